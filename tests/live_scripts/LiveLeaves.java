import lucce.Lucce;

/**
 * Calls of a class's own leaves, which full encoding makes without call probes
 * (`ProbeChoice::leaf_calls`): a chain of private static methods whose innermost reads a field
 * (so a method whose only calls are leaves is a leaf too), private instance leaves, an
 * interface's private method under a default method, and a recursion (which keeps its probes).
 * Each triggers a class initializer from its innermost frame, whose mark the walk must place
 * through every leaf frame; marks after the calls check their caller's context; then the same
 * calls, hot, once the JIT has compiled them.
 */
public class LiveLeaves {
    static class InChain {
        static final int V;
        static {
            Lucce.mark(T.here("clinit-in-chain"));
            V = Integer.parseInt("3");
        }
    }

    static class InPrivate {
        static final int V;
        static {
            Lucce.mark(T.here("clinit-in-private"));
            V = Integer.parseInt("4");
        }
    }

    static class InRecursion {
        static final int V;
        static {
            Lucce.mark(T.here("clinit-in-recursion"));
            V = Integer.parseInt("5");
        }
    }

    static class InInterface {
        static final int V;
        static {
            Lucce.mark(T.here("clinit-in-interface"));
            V = Integer.parseInt("6");
        }
    }

    static class Late {
        static final int V;
        static {
            Lucce.mark(T.here("clinit-late"));
            V = Integer.parseInt("7");
        }
    }

    private static int c3(int x) {
        return InChain.V + x;
    }

    private static int c2(int x) {
        return c3(x) * 2;
    }

    static int c1(int x) {
        return c2(x) + c2(x + 1);
    }

    private int field = 7;

    private int inst(int x) {
        return field + x + InPrivate.V;
    }

    private int instChain(int x) {
        return inst(x) + inst(x * 2);
    }

    private static int rec(int n) {
        return n == 0 ? InRecursion.V : 1 + rec(n - 1);
    }

    interface Shape {
        private int secret(int x) {
            return x + InInterface.V;
        }

        default int area(int x) {
            return secret(x) * 2;
        }
    }

    static class Square implements Shape {}

    /** A leaf chain whose innermost frame initializes a class only when asked. */
    private static int late(int x, boolean init) {
        return init ? Late.V + x : x;
    }

    private static int lateChain(int x, boolean init) {
        return late(x, init) + late(x + 1, false);
    }

    int run() {
        Lucce.mark(T.here("before-leaves"));
        int a = c1(1);
        Lucce.mark(T.here("after-chain"));
        int b = instChain(2);
        Lucce.mark(T.here("after-private"));
        int c = rec(50);
        Lucce.mark(T.here("after-recursion"));
        int d = new Square().area(3);
        Lucce.mark(T.here("after-interface"));
        return a + b + c + d;
    }

    public static void main(String[] args) {
        LiveLeaves l = new LiveLeaves();
        System.out.println("run " + l.run());
        long sum = 0;
        for (int i = 0; i < 20_000; i++) {
            sum += c1(i) + l.instChain(i) + lateChain(i, false) + new Square().area(i);
        }
        System.out.println("sum " + sum);
        // The JIT has compiled the chain by now; the initializer's first use deoptimizes it.
        System.out.println("late " + lateChain(1, true));
        System.out.println("run " + l.run());
        Lucce.mark(T.here("main-end"));
    }
}
