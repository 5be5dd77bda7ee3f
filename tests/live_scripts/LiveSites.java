import lucce.Lucce;

/**
 * One call site shared by three callees and by caller contexts of several depths, run hot: after
 * the first thousand iterations its entries are answered by the thread's answer cache or the
 * encoder's memo (agent/java/lucce/Runtime.java, memo), which keep ⟨site, callee, caller
 * version⟩ apart. A mark now and then checks the context those answers built.
 */
public class LiveSites {
    interface Op {
        int apply(int x, boolean mark);
    }

    static final class Inc implements Op {
        public int apply(int x, boolean mark) {
            return tail("inc", x, mark) + 1;
        }
    }

    static final class Dbl implements Op {
        public int apply(int x, boolean mark) {
            return tail("dbl", x, mark) * 2;
        }
    }

    static final class Neg implements Op {
        public int apply(int x, boolean mark) {
            return -tail("neg", x, mark);
        }
    }

    static int tail(String kind, int x, boolean mark) {
        if (mark) {
            Lucce.mark(T.here("tail-" + kind));
        }
        return x ^ 5;
    }

    /** The shared site. */
    static int site(Op op, int x, boolean mark) {
        return op.apply(x, mark);
    }

    static int viaOne(Op op, int x, boolean mark) {
        return site(op, x, mark);
    }

    static int viaTwo(Op op, int x, boolean mark) {
        return site(op, x, mark) + 1;
    }

    static int deep(int d, Op op, int x, boolean mark) {
        return d == 0 ? site(op, x, mark) : deep(d - 1, op, x, mark) + 1;
    }

    /**
     * Other ways into the callees, taken first: Inc.apply from one context, Dbl.apply from two,
     * so that the shared site's edges into the three callees get three different addends.
     */
    static int once(Op op) {
        return op.apply(1, false);
    }

    static int twice(Op op) {
        return op.apply(2, false);
    }

    /**
     * A plain caller and an anchored one with the same graph version g at one site: main's one
     * call site gives every seg frame it enters the same version, and seg(1)'s inner frame is
     * anchored at that version (nothing changes the graph in between), so its graph version is g
     * too. Both call segEnd through a link, the plain frame's kept under g, the anchored frame's
     * under its whole version; the plain one's answer, in the thread's answer cache under g
     * after the second round, must not answer the anchored caller.
     */
    static int seg(int d) {
        return d > 0 ? seg(d - 1) + 1 : segEnd(d);
    }

    static int segEnd(int d) {
        Lucce.mark(T.here("seg-end"));
        return d;
    }

    public static void main(String[] args) {
        int sum = 0;
        for (int d : new int[] {1, 0, 0, 1, 0, 1, 0, 1}) {
            sum += seg(d);
        }
        Op[] ops = {new Inc(), new Dbl(), new Neg()};
        sum += once(ops[0]);
        sum += twice(ops[1]);
        sum += twice(ops[1]) * 3;
        for (int i = 0; i < 300_000; i++) {
            // Runs of three calls from one path, one per callee; 7 + 29,989 k: the marks fall on
            // every callee and every path.
            Op op = ops[i % 3];
            boolean mark = i % 29_989 == 7;
            switch (i / 3 % 4) {
                case 0:
                    sum += viaOne(op, i, mark);
                    break;
                case 1:
                    sum += viaTwo(op, i, mark);
                    break;
                default:
                    sum += deep(i / 12 % 5, op, i, mark);
                    break;
            }
        }
        System.out.println("sum " + sum);
    }
}
