/**
 * Recursion on a thread with a small stack until StackOverflowError, caught. Near the end of the
 * stack the agent's Java helper that takes the JVM's trace of an event (verify=N) overflows too:
 * such events are stored without that trace, and counted. Deeper than 1024 frames, the JVM's
 * traces are cut (MaxJavaStackTraceDepth), which the helper flags.
 */
public class LiveOverflow {
    static int depth;

    static int down(int n) {
        depth = n;
        return down(n + 1) + 1;
    }

    public static void main(String[] args) throws Exception {
        Thread t = new Thread(null, () -> {
            try {
                down(0);
            } catch (StackOverflowError e) {
                System.out.println("overflowed " + (depth > 1100));
            }
        }, "small", 512 << 10);
        t.start();
        t.join();
        System.out.println("after " + down2(3));
    }

    static int down2(int n) {
        return n == 0 ? 0 : down2(n - 1) + 1;
    }
}
