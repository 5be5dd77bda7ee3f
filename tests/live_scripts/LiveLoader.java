import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.util.concurrent.atomic.AtomicInteger;

import lucce.Lucce;

/**
 * A custom class loader whose loadClass override marks: called directly and by the JVM when the
 * code of a class it defined resolves a class; the class it defines marks too.
 */
public class LiveLoader {
    static final AtomicInteger LOADS = new AtomicInteger();

    static class MarkingLoader extends ClassLoader {
        MarkingLoader(ClassLoader parent) { super(parent); }

        @Override protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!name.startsWith("java.")) Lucce.mark(T.here("loadClass-" + name));
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null && name.startsWith("LiveLoaded")) c = define(name);
                if (c == null) c = super.loadClass(name, false);
                if (resolve) resolveClass(c);
                return c;
            }
        }

        private Class<?> define(String name) throws ClassNotFoundException {
            Lucce.mark(T.here("define-" + name));
            try (InputStream in = getParent().getResourceAsStream(name.replace('.', '/') + ".class")) {
                if (in == null) throw new ClassNotFoundException(name);
                ByteArrayOutputStream bytes = new ByteArrayOutputStream();
                in.transferTo(bytes);
                byte[] b = bytes.toByteArray();
                return defineClass(name, b, 0, b.length);
            } catch (java.io.IOException e) {
                throw new ClassNotFoundException(name, e);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        MarkingLoader loader = new MarkingLoader(LiveLoader.class.getClassLoader());
        Class<?> c = loader.loadClass("LiveLoadedA");
        Lucce.mark(T.here("loaded-" + (c.getClassLoader() == loader)));
        Method run = c.getMethod("run", int.class);
        System.out.println(run.invoke(null, 3));
        Class<?> viaForName = Class.forName("LiveLoadedB", true, loader);
        System.out.println(viaForName.getName() + " " + (viaForName.getClassLoader() == loader));
    }
}
