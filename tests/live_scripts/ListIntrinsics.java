import java.lang.reflect.Constructor;
import java.lang.reflect.Executable;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URI;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Prints the methods of the running JDK that carry {@code @IntrinsicCandidate} and have code, one
 * {@code class name descriptor} per line, sorted: the calls the JIT may replace by an intrinsic,
 * which agent/src/rewrite/intrinsics.txt lists (scripts/list_intrinsics.sh writes it from this
 * program; test `intrinsic_candidates_match_the_jdk` compares them). Native methods are left
 * out: they have no entry probe either way. Run it with {@code --add-modules ALL-SYSTEM} so that
 * every module of the image is read; it prints the classes it could not read on stderr, and
 * fails if any of them is in java.base.
 */
public class ListIntrinsics {
    public static void main(String[] args) throws Exception {
        Class<? extends java.lang.annotation.Annotation> candidate = Class.forName("jdk.internal.vm.annotation.IntrinsicCandidate")
            .asSubclass(java.lang.annotation.Annotation.class);
        FileSystem jrt = FileSystems.getFileSystem(URI.create("jrt:/"));
        List<Path> files;
        try (Stream<Path> s = Files.walk(jrt.getPath("/modules"))) {
            files = s.filter(p -> p.toString().endsWith(".class") && !p.endsWith("module-info.class")).collect(Collectors.toList());
        }
        TreeSet<String> out = new TreeSet<>();
        List<String> unread = new ArrayList<>();
        for (Path p : files) {
            String module = p.getName(1).toString();
            String file = p.subpath(2, p.getNameCount()).toString();
            String name = file.substring(0, file.length() - ".class".length());
            try {
                Class<?> c = Class.forName(name.replace('/', '.'), false, ClassLoader.getSystemClassLoader());
                List<Executable> all = new ArrayList<>(List.of(c.getDeclaredMethods()));
                all.addAll(List.of(c.getDeclaredConstructors()));
                for (Executable m : all) {
                    if (m.isAnnotationPresent(candidate) && !Modifier.isNative(m.getModifiers())) {
                        String method = m instanceof Constructor ? "<init>" : m.getName();
                        out.add(name + " " + method + " " + descriptor(m));
                    }
                }
            } catch (Throwable t) {
                unread.add(module + "/" + name);
            }
        }
        out.forEach(System.out::println);
        System.err.println(out.size() + " methods; " + unread.size() + " of " + files.size() + " classes not readable");
        if (unread.stream().anyMatch(u -> u.startsWith("java.base/"))) {
            System.err.println("not readable in java.base: " + unread);
            System.exit(1);
        }
    }

    static String descriptor(Executable m) {
        StringBuilder b = new StringBuilder("(");
        for (Class<?> t : m.getParameterTypes()) {
            b.append(type(t));
        }
        return b.append(')').append(m instanceof Method ? type(((Method) m).getReturnType()) : "V").toString();
    }

    static String type(Class<?> t) {
        if (t.isArray()) {
            return t.getName().replace('.', '/');
        }
        if (!t.isPrimitive()) {
            return "L" + t.getName().replace('.', '/') + ";";
        }
        return String.valueOf("VZBCSIJFD".charAt(List.of(void.class, boolean.class, byte.class, char.class, short.class, int.class, long.class, float.class, double.class).indexOf(t)));
    }
}
