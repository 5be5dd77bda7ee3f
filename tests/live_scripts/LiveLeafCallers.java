import lucce.Lucce;

/**
 * Leaf callers (agent/src/rewrite/leaves.rs): methods whose every call certainly enters a leaf
 * of their own class have no call probes in record mode, so nothing below them has a record of
 * its caller. Marks made below them, where the JVM calls out of their leaves (a static
 * initializer, an exception's constructor), must decode to the JVM's trace through the leaves
 * and the leaf callers; marks made after them must not take a stale record. The class is final,
 * so that its own virtual calls have one target. The hot loop runs leafcallers.n times (2,000
 * unless the system property says otherwise).
 */
public final class LiveLeafCallers {
    private int size = 3;

    /** A leaf. */
    private int size() {
        return size;
    }

    /** A leaf caller through a virtual call of a final class's method. */
    int twice() {
        return size() + size();
    }

    /** A leaf caller of a leaf caller. */
    int four() {
        return twice() + twice();
    }

    static final class Late {
        static final int VALUE;
        static {
            Lucce.mark(T.here("late-clinit"));
            VALUE = 7;
        }
    }

    /** A leaf whose field read runs Late's initializer the first time. */
    static int late() {
        return Late.VALUE;
    }

    /** A leaf caller through a static call. */
    static int viaLate(int x) {
        return late() + x;
    }

    static final class Bad extends RuntimeException {
        Bad(int i) {
            super("bad");
            if (i == 13 || i == 99_013) {
                Lucce.mark(T.here("bad-ctor-" + i));
            }
        }
    }

    /** A leaf whose only call builds the exception it throws. */
    static int check(int i) {
        if (i % 1000 == 13) throw new Bad(i);
        return i;
    }

    /** A leaf caller of that leaf. */
    static int viaCheck(int i) {
        return check(i) + 1;
    }

    static void after(String label) {
        Lucce.mark(T.here(label));
    }

    public static void main(String[] args) {
        int n = Integer.getInteger("leafcallers.n", 2_000);
        LiveLeafCallers o = new LiveLeafCallers();
        long sum = viaLate(1);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            sum += o.four();
            try {
                sum += viaCheck(i);
            } catch (Bad e) {
                bad++;
            }
        }
        try {
            viaCheck(99_013);
        } catch (Bad e) {
            bad++;
        }
        after("after-loop");
        System.out.println("sum " + sum + " bad " + bad);
        Lucce.mark(T.here("main-end"));
    }
}
