/**
 * Steady-state cost of full encoding per call: a loop of small calls, timed per round.
 * Run by scripts/bench_calls.sh with and without the agent.
 *
 * Mode "o": a virtual call per iteration to one of two implementations, which make 7 or 1 more
 * static calls (5 calls per iteration on average). Mode "r": a recursion 0-7 deep through one
 * site plus 7 static calls at its bottom (every recursive call starts a segment). Mode "b": a
 * method reference that boxes its argument (the JVM's hidden proxy calls Long.valueOf, then the
 * target), so every iteration's second call has no call-site record of its own and costs the
 * agent a walk that reads the caller's context locals (docs/agent.md, "invokedynamic").
 */
public class CallBench {
    static int sink;

    static int leaf(int x) { return x * 31 + 7; }
    static int mid(int x) { return leaf(x) ^ leaf(x + 1); }
    static int top(int x) { return mid(x) + mid(x >> 1); }
    static int rec(int d, int x) { return d == 0 ? top(x) : rec(d - 1, x + 1) + 1; }

    static void takeBoxed(Long x) { sink += x.intValue(); }
    static final java.util.function.LongConsumer BOXING = CallBench::takeBoxed;

    /** Mode "b": its own method, so that C2 compiles it as a whole like any hot caller. */
    static void boxingLoop(int n) {
        for (int i = 0; i < n; i++) {
            BOXING.accept(i);
        }
    }

    interface Op { int apply(int x); }
    static final class A implements Op { public int apply(int x) { return top(x); } }
    static final class B implements Op { public int apply(int x) { return leaf(x) + 1; } }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        boolean virtual = args[1].contains("o"), recursive = args[1].contains("r"), boxing = args[1].contains("b");
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 5;
        Op[] ops = { new A(), new B() };
        double best = Double.MAX_VALUE;
        for (int round = 0; round < rounds; round++) {
            long t0 = System.nanoTime();
            int s = 0;
            if (boxing) boxingLoop(n);
            for (int i = 0; (virtual || recursive) && i < n; i++) {
                if (virtual) s += ops[i & 1].apply(i);
                if (recursive) s += rec(i & 7, i);
            }
            sink += s;
            best = Math.min(best, (System.nanoTime() - t0) / (double) n);
        }
        System.out.printf("%.2f%n", best);
    }
}
