/**
 * A class whose SourceFile attribute names "" (class-file tools write such classes): the JVM's
 * trace shows its frames with the file name "", not none ("(:5)", not "(Unknown Source:5)"), and
 * so must lucce's. The program makes that class by patching its own companion's bytes, loads it
 * through a class loader of its own and runs it.
 */
public class LiveEmptySource {
    static final class Loader extends ClassLoader {
        private final byte[] bytes;

        Loader(byte[] bytes) {
            super(LiveEmptySource.class.getClassLoader());
            this.bytes = bytes;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!name.equals("LiveEmptySourceTarget")) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                return c != null ? c : defineClass(name, bytes, 0, bytes.length);
            }
        }
    }

    /** `b` with the CONSTANT_Utf8 `from` (the SourceFile attribute's) made empty. */
    static byte[] emptySourceFile(byte[] b, String from) {
        byte[] name = from.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        for (int i = 0; i + 3 + name.length <= b.length; i++) {
            if (b[i] == 1 && b[i + 1] == 0 && b[i + 2] == name.length
                    && java.util.Arrays.equals(b, i + 3, i + 3 + name.length, name, 0, name.length)) {
                byte[] out = new byte[b.length - name.length];
                System.arraycopy(b, 0, out, 0, i + 1);
                System.arraycopy(b, i + 3 + name.length, out, i + 3, b.length - i - 3 - name.length);
                return out;
            }
        }
        throw new AssertionError("no " + from + " in the class");
    }

    public static void main(String[] args) throws Exception {
        byte[] b;
        try (java.io.InputStream in = LiveEmptySource.class.getResourceAsStream("LiveEmptySourceTarget.class")) {
            b = in.readAllBytes();
        }
        Class<?> c = new Loader(emptySourceFile(b, "LiveEmptySource.java")).loadClass("LiveEmptySourceTarget");
        // Another runtime package (another loader): its constructor is not accessible as is.
        java.lang.reflect.Constructor<?> k = c.getDeclaredConstructor();
        k.setAccessible(true);
        ((Runnable) k.newInstance()).run();
    }
}

class LiveEmptySourceTarget implements Runnable {
    static long work(int d) {
        return d == 0 ? leaf() : work(d - 1) + d;
    }

    static long leaf() {
        return 7;
    }

    @Override
    public void run() {
        String file = new Throwable().getStackTrace()[0].getFileName();
        long s = 0;
        for (int i = 0; i < 50; i++) {
            s += work(5);
        }
        System.out.println("file '" + file + "' sum " + s);
    }
}
