import lucce.Lucce;

/**
 * Lucce.context(): equal contexts give equal tokens (a loop on one line; two threads running the
 * same code), different contexts different ones (other line, other caller, other depth). Each
 * token is printed as `#token<TAB>name<TAB>value`; the tokens named `at-*` are taken on the same
 * line as a mark, whose label is printed in the same `#token` line, so the test can compare
 * `lucce decode STORE @TOKEN` with that mark.
 */
public class LiveTokens {
    static void print(String name, long token, String markLabel) {
        System.out.println("#token\t" + name + "\t" + token + "\t" + markLabel);
    }

    static long tok() {
        return Lucce.context();
    }

    static long viaA() { return tok(); }

    static long viaB() { return tok(); }

    static long rec(int n) {
        if (n == 0) return tok();
        return rec(n - 1);
    }

    static void atLine(String name) {
        long t = Lucce.context(); String l = T.here("mark-" + name); Lucce.mark(l);
        print("at-" + name + "/0", t, l);
    }

    static void deeper(String name, int n) {
        if (n == 0) {
            long t = Lucce.context(); String l = T.here("mark-" + name); Lucce.mark(l);
            print("at-" + name + "/0", t, l);
            return;
        }
        deeper(name, n - 1);
    }

    static class Same implements Runnable {
        final String name;
        Same(String name) { this.name = name; }
        @Override public void run() { print(name, tok(), ""); }
    }

    public static void main(String[] args) throws Exception {
        // Names are GROUP/N: the test requires equal tokens within a group, distinct across groups.
        for (int i = 0; i < 3; i++) print("loop/" + i, tok(), "");
        for (int i = 0; i < 2; i++) {
            print("viaA/" + i, viaA(), "");
            print("viaB/" + i, viaB(), "");
        }
        for (int i = 0; i < 4; i++) print("rec" + (3 + i % 2) + "/" + i, rec(3 + i % 2), "");
        print("direct/0", Lucce.context(), "");
        print("other-line/0", tok(), "");
        atLine("main1");
        atLine("main2");
        deeper("deep5", 5);
        Thread t1 = new Thread(new Same("thread/1"), "same-1");
        Thread t2 = new Thread(new Same("thread/2"), "same-2");
        t1.start();
        t1.join();
        t2.start();
        t2.join();
        Thread t3 = new Thread(() -> atLine("thread"), "tok-thread");
        t3.start();
        t3.join();
    }
}
