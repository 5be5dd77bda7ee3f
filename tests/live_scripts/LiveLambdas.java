import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.function.IntUnaryOperator;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import lucce.Lucce;

/**
 * Lambdas (capturing and not), method references of every kind, streams, invokedynamic string
 * concatenation calling a toString() that marks, method handles (invokeExact, invoke, findVirtual,
 * findStatic, findConstructor, bindTo, filterReturnValue).
 */
public class LiveLambdas {
    final String name;

    LiveLambdas(String name) {
        this.name = name;
        Lucce.mark(T.here("ctor-ref-" + name));
    }

    static int twice(int x) {
        Lucce.mark(T.here("static-ref-" + x));
        return 2 * x;
    }

    String greet(String who) {
        Lucce.mark(T.here("bound-ref-" + name + "-" + who));
        return name + who;
    }

    int len() {
        Lucce.mark(T.here("unbound-ref-" + name));
        return name.length();
    }

    @Override public String toString() {
        Lucce.mark(T.here("toString-" + name));
        return "L(" + name + ")";
    }

    static String viaHandle(String s) {
        Lucce.mark(T.here("mh-static-" + s));
        return s;
    }

    String viaVirtualHandle(int i) {
        Lucce.mark(T.here("mh-virtual-" + name + "-" + i));
        return name + i;
    }

    static String shout(String s) {
        Lucce.mark(T.here("mh-filter-" + s));
        return s.toUpperCase();
    }

    public static void main(String[] args) throws Throwable {
        Runnable r = () -> Lucce.mark(T.here("lambda-runnable"));
        r.run();
        int base = 40;
        IntUnaryOperator add = x -> {
            Lucce.mark(T.here("lambda-capturing-" + x));
            return x + base;
        };
        System.out.println(add.applyAsInt(2));
        Function<Integer, Function<Integer, Integer>> curried = a -> b -> {
            Lucce.mark(T.here("lambda-nested-" + a + "-" + b));
            return a * b;
        };
        System.out.println(curried.apply(6).apply(7));

        IntUnaryOperator st = LiveLambdas::twice;
        System.out.println(st.applyAsInt(21));
        LiveLambdas bob = new LiveLambdas("bob");
        Function<String, String> bound = bob::greet;
        System.out.println(bound.apply("amy"));
        Function<LiveLambdas, Integer> unbound = LiveLambdas::len;
        System.out.println(unbound.apply(bob));
        Function<String, LiveLambdas> ctor = LiveLambdas::new;
        System.out.println(ctor.apply("cid").name);
        Supplier<List<String>> listMaker = ArrayList::new;
        System.out.println(listMaker.get().size());

        // invokedynamic string concatenation calls toString() from the JDK's method handles.
        System.out.println("concat " + bob + " and " + ctor.apply("dan"));

        System.out.println(IntStream.range(0, 4).map(LiveLambdas::twice).boxed()
            .map(i -> {
                Lucce.mark(T.here("stream-map-" + i));
                return "s" + i;
            })
            .collect(Collectors.joining(",")));

        MethodHandles.Lookup lookup = MethodHandles.lookup();
        MethodHandle hs = lookup.findStatic(LiveLambdas.class, "viaHandle", MethodType.methodType(String.class, String.class));
        System.out.println((String) hs.invokeExact("exact"));
        System.out.println(hs.invoke((Object) "generic"));
        MethodHandle hv = lookup.findVirtual(LiveLambdas.class, "viaVirtualHandle", MethodType.methodType(String.class, int.class));
        for (int i = 0; i < 3; i++) System.out.println((String) hv.invokeExact(bob, i));
        MethodHandle hb = hv.bindTo(new LiveLambdas("eve"));
        System.out.println((String) hb.invokeExact(9));
        MethodHandle hc = lookup.findConstructor(LiveLambdas.class, MethodType.methodType(void.class, String.class));
        System.out.println(((LiveLambdas) hc.invokeExact("mhctor")).name);
        MethodHandle filtered = MethodHandles.filterReturnValue(hs,
            lookup.findStatic(LiveLambdas.class, "shout", MethodType.methodType(String.class, String.class)));
        System.out.println((String) filtered.invokeExact("quiet"));
        BiFunction<String, Integer, String> fromHandle = (s, i) -> {
            try {
                return (String) hv.invokeExact(new LiveLambdas(s), i.intValue());
            } catch (Throwable t) {
                throw new RuntimeException(t);
            }
        };
        System.out.println(fromHandle.apply("fay", 5));
    }
}
