import java.util.List;
import java.util.stream.Collectors;

import lucce.Lucce;

/**
 * Cost of capturing the calling context at depths 10, 100 and 1000: Lucce.context(),
 * Lucce.mark(), new Throwable().getStackTrace() and StackWalker. Run with the agent recording
 * (scripts/bench_context.sh). Rounds are interleaved and the best round of each is reported, in
 * nanoseconds per call.
 */
public class ContextBench {
    static volatile long sink;

    interface Op {
        void run();
    }

    static final Op CONTEXT = () -> sink += Lucce.context();
    static final Op MARK = () -> Lucce.mark("bench");
    static final Op THROWABLE = () -> sink += new Throwable().getStackTrace().length;
    static final Op WALKER = () -> sink += StackWalker.getInstance().walk(s -> s.collect(Collectors.toList())).size();

    static long at(int depth, Op op, int n) {
        if (depth > 0) {
            return at(depth - 1, op, n);
        }
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            op.run();
        }
        return System.nanoTime() - t0;
    }

    public static void main(String[] args) {
        String[] names = {"Lucce.context()", "Lucce.mark()", "Throwable.getStackTrace()", "StackWalker"};
        Op[] ops = {CONTEXT, MARK, THROWABLE, WALKER};
        int[] depths = {10, 100, 1000};
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        double[][] best = new double[ops.length][depths.length];
        for (double[] b : best) {
            java.util.Arrays.fill(b, Double.MAX_VALUE);
        }
        for (int r = 0; r < rounds; r++) {
            for (int d = 0; d < depths.length; d++) {
                for (int o = 0; o < ops.length; o++) {
                    int n = o < 2 ? 200_000 : (depths[d] >= 1000 ? 500 : 5_000);
                    best[o][d] = Math.min(best[o][d], at(depths[d], ops[o], n) / (double) n);
                }
            }
        }
        System.out.printf("%-28s %12s %12s %12s%n", "ns per call, best of " + rounds, "depth 10", "depth 100", "depth 1000");
        for (int o = 0; o < ops.length; o++) {
            System.out.printf("%-28s %12.1f %12.1f %12.1f%n", names[o], best[o][0], best[o][1], best[o][2]);
        }
        System.out.printf("%-28s %12.0fx %11.0fx %11.0fx%n", "Throwable / Lucce.context()",
                best[2][0] / best[0][0], best[2][1] / best[0][1], best[2][2] / best[0][2]);
    }
}
