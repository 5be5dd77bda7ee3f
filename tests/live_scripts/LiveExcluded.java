import lucce.Lucce;

/**
 * Calls from a class the agent leaves alone (`exclude=LiveExcludedBridge`) into instrumented
 * code: each entry of `work` from the bridge finds its caller by a walk, which takes the context
 * of the frame below the bridge (`f`) from the thread's walk memo once it has read it
 * (agent/src/recorder.rs, WalkMemo): every call but the first of a bridge frame (the first takes
 * the call-site record `f` left). The same `f` is reached through stacks that differ only
 * below it (other callers, two call sites of one caller, recursion depths, another thread) and
 * calls the bridge from two lines: a memo that kept a context for the wrong stack, or kept the
 * line, gives marks that `lucce verify` finds wrong.
 */
public class LiveExcluded {
    static int n;

    /** Entered from the bridge; calls on (a leaf would keep no context to walk to). */
    static void work(String path, int i) {
        if (i % 40 == 0) {
            Lucce.mark(T.here("work-" + path));
        }
        n += parity(i);
    }

    static int parity(int i) {
        return i & 1;
    }

    static void f(String path, int i) {
        if ((i & 1) == 0) {
            LiveExcludedBridge.call(path + "-even", i);
        } else {
            LiveExcludedBridge.call(path + "-odd", i);
        }
    }

    static void a(int i) {
        f("a", i);
    }

    static void b(int i) {
        f("b1", i);
        f("b2", i);
    }

    static void deep(int d, int i) {
        if (d == 0) {
            f("deep" + (i % 4), i);
        } else {
            deep(d - 1, i);
        }
    }

    static void rounds(int from, int to) {
        for (int i = from; i < to; i++) {
            a(i);
            b(i);
            deep(i % 4, i);
        }
    }

    public static void main(String[] args) throws Exception {
        rounds(0, 400);
        Thread t = new Thread(() -> rounds(400, 600), "other");
        t.start();
        t.join();
        rounds(600, 800);
        System.out.println("n " + n);
    }
}

class LiveExcludedBridge {
    /** The first call takes the record of `f`'s call here; the second finds it used. */
    static void call(String path, int i) {
        LiveExcluded.work(path, i);
        LiveExcluded.work(path + "-again", i);
    }
}
