/**
 * Says it is ready, then waits until a signal ends the JVM: the program of the test of
 * `lucce record` under Ctrl-C and Ctrl-\ (tests/live_jvm.rs).
 */
public class LiveWaits {
    static int depth(int n) {
        return n == 0 ? 0 : depth(n - 1) + 1;
    }

    public static void main(String[] args) throws InterruptedException {
        System.out.println("ready " + depth(50));
        System.out.flush();
        new java.util.concurrent.CountDownLatch(1).await();
    }
}
