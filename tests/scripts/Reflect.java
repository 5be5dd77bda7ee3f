import java.lang.annotation.*;
import java.lang.invoke.*;
import java.lang.reflect.*;
import java.util.*;

/** Reflection, method handles, dynamic proxies, annotations, class initialization order. */
public class Reflect {
    @Retention(RetentionPolicy.RUNTIME) @interface Tag { String value(); }

    static StringBuilder order = new StringBuilder();

    static class Init {
        static final int CONST = 5;
        static int computed;
        static { order.append("Init.clinit;"); computed = CONST * 2; }
        int field = 3;
        { order.append("Init.instance;"); }
        Init() { order.append("Init.ctor;"); }
        Init(int x) { this(); field = x; }
        @Tag("hello") public int add(int a, int b) { return a + b + field; }
        private String secret() { return "secret" + field; }
        public static String stat(String s) { return "stat:" + s; }
    }

    static class Lazy { static { order.append("Lazy.clinit;"); } static void touch() {} }

    interface Greeter { String greet(String who); int count(); }

    public static void main(String[] args) throws Throwable {
        Class<?> c = Class.forName("Reflect$Init");
        System.out.println("before new: " + order);
        Object o = c.getDeclaredConstructor(int.class).newInstance(7);
        System.out.println("after new: " + order);
        Method add = c.getMethod("add", int.class, int.class);
        System.out.println("add=" + add.invoke(o, 1, 2) + " tag=" + add.getAnnotation(Tag.class).value());
        Method secret = c.getDeclaredMethod("secret");
        secret.setAccessible(true);
        System.out.println(secret.invoke(o));
        for (int i = 0; i < 50; i++) add.invoke(o, i, i);   // past the inflation threshold
        System.out.println("invoked 50 more: " + add.invoke(o, 100, 200));
        Field f = c.getDeclaredField("field");
        f.setInt(o, 9);
        System.out.println("field=" + f.getInt(o) + " computed=" + Init.computed);
        try {
            c.getMethod("add", int.class, int.class).invoke(null, 1, 2);
        } catch (NullPointerException e) {
            System.out.println("npe from invoke on null receiver");
        }
        Method thrower = Reflect.class.getDeclaredMethod("thrower");
        try {
            thrower.invoke(null);
        } catch (InvocationTargetException e) {
            System.out.println("ite cause: " + e.getCause().getMessage());
        }

        MethodHandles.Lookup lk = MethodHandles.lookup();
        MethodHandle mh = lk.findStatic(Init.class, "stat", MethodType.methodType(String.class, String.class));
        System.out.println((String) mh.invokeExact("mh"));
        MethodHandle concat = lk.findVirtual(String.class, "concat", MethodType.methodType(String.class, String.class));
        System.out.println((String) MethodHandles.insertArguments(concat, 1, "!").invoke("bound"));
        MethodHandle ctor = lk.findConstructor(ArrayList.class, MethodType.methodType(void.class));
        System.out.println(((List<?>) ctor.invoke()).size());

        Greeter g = (Greeter) Proxy.newProxyInstance(Reflect.class.getClassLoader(), new Class<?>[] {Greeter.class},
            (proxy, m, a) -> m.getName().equals("greet") ? "hi " + a[0] : (Object) 3);
        System.out.println(g.greet("proxy") + " " + g.count());

        System.out.println("lazy before: " + order.toString().contains("Lazy"));
        Lazy.touch();
        System.out.println("lazy after: " + order.toString().contains("Lazy"));
        Object arr = Array.newInstance(int.class, 3, 4);
        System.out.println(arr.getClass().getName() + " " + Array.getLength(arr));
        System.out.println(Arrays.toString(Init.class.getDeclaredConstructors().length > 1 ? new int[] {1} : new int[0]));
    }

    static void thrower() { throw new UnsupportedOperationException("from reflected"); }
}
