import lucce.Lucce;

/**
 * Static initializers run in the middle of a call: triggered by a static field read, a static
 * call, `new`, Class.forName and a nested initializer; a mark inside <clinit>; an initializer
 * that starts a thread which marks (and waits for it), an enum's initializer; initializers
 * triggered from leaves (methods that call nothing, whose entries compute no context).
 */
public class LiveClinit {
    static class ByField {
        static final int VALUE;
        static {
            Lucce.mark(T.here("clinit-by-field"));
            VALUE = compute(3);
        }
        static int compute(int x) {
            Lucce.mark(T.here("clinit-compute-" + x));
            return x * 7;
        }
    }

    static class ByCall {
        static { Lucce.mark(T.here("clinit-by-call")); }
        static int call() {
            Lucce.mark(T.here("by-call-body"));
            return 1;
        }
    }

    static class ByNew {
        static int count;
        static { Lucce.mark(T.here("clinit-by-new")); }
        ByNew() {
            count++;
            Lucce.mark(T.here("by-new-ctor"));
        }
    }

    static class Outer {
        static final int X;
        static {
            Lucce.mark(T.here("clinit-outer-before"));
            X = Inner.Y + 1;
            Lucce.mark(T.here("clinit-outer-after"));
        }
    }

    static class Inner {
        static final int Y;
        static {
            Lucce.mark(T.here("clinit-inner"));
            Y = Integer.parseInt("41");
        }
    }

    static class ByForName {
        static { Lucce.mark(T.here("clinit-by-forname")); }
    }

    /** Runs on the thread a class initializer starts; it must not touch the class being initialized. */
    static class Starter implements Runnable {
        @Override public void run() {
            Lucce.mark(T.here("clinit-thread-run"));
            deeper(2);
        }
        static void deeper(int n) {
            if (n == 0) {
                Lucce.mark(T.here("clinit-thread-deeper"));
                return;
            }
            deeper(n - 1);
        }
    }

    static class StartsThread {
        static final boolean STARTED;
        static {
            Lucce.mark(T.here("clinit-starts-thread"));
            Thread t = new Thread(new Starter(), "from-clinit");
            t.start();
            try {
                t.join();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            STARTED = true;
        }
    }

    enum Color {
        RED, GREEN;
        Color() { Lucce.mark(T.here("enum-ctor-" + name())); }
        static { Lucce.mark(T.here("enum-clinit")); }
    }

    static class LeafInner {
        static final int Z;
        static {
            Lucce.mark(T.here("clinit-from-leaf"));
            Z = Integer.parseInt("5");
        }
    }

    /** Its initializer is a leaf too (a field read, an add, a field write). */
    static class LeafOuter {
        static int w = LeafInner.Z + 1;
    }

    /** A leaf: it calls nothing, so the JVM's calls of the initializers are its only callees. */
    static int leafRead(int k) {
        int before = k * 3;
        return LeafOuter.w + before;
    }

    static int middle(int k) {
        int before = k + 1;
        int v = ByField.VALUE + before;
        return v + ByCall.call();
    }

    public static void main(String[] args) throws Exception {
        System.out.println(middle(1));
        System.out.println(middle(2));
        new ByNew();
        new ByNew();
        System.out.println(Outer.X);
        Class.forName("LiveClinit$ByForName");
        System.out.println(StartsThread.STARTED);
        System.out.println(Color.GREEN.ordinal());
        System.out.println(leafRead(1));
        Lucce.mark(T.here("main-end"));
    }
}
