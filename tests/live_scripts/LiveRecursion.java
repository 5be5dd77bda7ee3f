import lucce.Lucce;

/**
 * Recursion more than 10,000 deep through several recursive call sites (direct, mutual, through
 * an interface), twice on main (the second pass reuses and extends the first's contexts) and once
 * on a thread with its own big stack. Run with a big -Xss and -XX:MaxJavaStackTraceDepth so that
 * Throwable shows every frame.
 */
public class LiveRecursion {
    interface Step { int step(int n, String pass); }

    static final Step VIA_INTERFACE = new Step() {
        @Override public int step(int n, String pass) { return b(n - 1, pass) + 1; }
    };

    static int a(int n, String pass) {
        if (n == 0) {
            Lucce.mark(T.here(pass + "-bottom-a"));
            return 0;
        }
        if (n % 2500 == 0) Lucce.mark(T.here(pass + "-down-a-" + n));
        int r;
        if (n % 7 == 0) r = b(n - 1, pass);
        else if (n % 5 == 0) r = a(n - 1, pass) + 1;
        else r = a(n - 1, pass);
        if (n % 3001 == 0) Lucce.mark(T.here(pass + "-up-a-" + n));
        return r;
    }

    static int b(int n, String pass) {
        if (n == 0) {
            Lucce.mark(T.here(pass + "-bottom-b"));
            return 0;
        }
        if (n % 2 == 0) return a(n - 1, pass);
        if (n % 3 == 0) return VIA_INTERFACE.step(n, pass);
        int r = b(n - 1, pass);
        if (n % 4001 == 0) Lucce.mark(T.here(pass + "-up-b-" + n));
        return r;
    }

    public static void main(String[] args) throws Exception {
        System.out.println("pass1 " + a(10_000, "pass1"));
        System.out.println("pass2 " + a(12_345, "pass2"));
        int[] out = new int[1];
        Thread t = new Thread(null, () -> out[0] = b(11_111, "thread"), "deep", 512L << 20);
        t.start();
        t.join();
        System.out.println("thread " + out[0]);
    }
}
