import java.net.URI;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;

/**
 * {@link LiveLoader} after every class of java.desktop has been loaded (not initialized): the
 * classes its loader defines then get method ids above 32767, which their probes push with ldc
 * from the constant pool, and a walk through a frame inside its entry probe reads them back from
 * there (agent/src/recorder.rs, learn_entering).
 */
public class LiveLoaderHighIds {
    public static void main(String[] args) throws Exception {
        loadDesktop();
        LiveLoader.main(args);
    }

    /** Loads every class of java.desktop that loads alone (not initialized). */
    static void loadDesktop() throws Exception {
        FileSystem jrt = FileSystems.getFileSystem(URI.create("jrt:/"));
        String root = "/modules/java.desktop/";
        int loaded = 0;
        try (Stream<Path> files = Files.walk(jrt.getPath(root))) {
            for (Path p : (Iterable<Path>) files::iterator) {
                String f = p.toString();
                if (!f.endsWith(".class") || f.endsWith("module-info.class")) continue;
                String name = f.substring(root.length(), f.length() - ".class".length()).replace('/', '.');
                try {
                    Class.forName(name, false, null);
                    loaded++;
                } catch (Throwable t) {
                    // Not loadable alone (a missing dependency): skipped.
                }
            }
        }
        // About 3,500 classes and 30,000 methods: enough to push the ids past 32767.
        if (loaded < 3000) throw new AssertionError("only " + loaded + " classes of java.desktop loaded");
    }
}
