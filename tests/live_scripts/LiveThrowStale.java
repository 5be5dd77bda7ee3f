/**
 * An exception leaves the pending record of the call it came from: here `f`'s call of `t.m()`
 * at call site S, which throws before entering `m` (a null receiver; once C2 compiles `f`, the
 * JVM throws a preallocated NullPointerException, so no constructor's entry takes the record
 * either). Whatever catches it must drop the record, or the next entry of `m` from code lucce
 * cannot see (here the excluded bridge) takes it, and trusts it, since ⟨S, m⟩ is a real pair:
 * `m` then decodes as called from `f`, which has returned (tests `exceptions_caught_*`).
 * Mode 0: instrumented code catches (`tryF`) and returns to the bridge; mode 1: the bridge
 * catches. Run with the bridge left out.
 */
public class LiveThrowStale {
    static long n;

    static void f(LiveThrowStaleTarget t) {
        t.m(); // call site S
    }

    static void tryF(LiveThrowStaleTarget t) {
        try {
            f(t);
        } catch (NullPointerException e) {
            n += 0;
        }
    }

    public static void main(String[] args) {
        int rounds = Integer.parseInt(args[0]);
        boolean bridgeCatches = args[1].equals("1");
        LiveThrowStaleTarget t = new LiveThrowStaleTarget();
        for (int i = 0; i < rounds; i++) {
            LiveThrowStaleBridge.run(t, bridgeCatches);
        }
        System.out.println("n " + n);
    }
}

class LiveThrowStaleTarget {
    void m() {
        LiveThrowStale.n += g();
    }

    /** Not a leaf's caller only: `m` calls on, so its context matters below it. */
    int g() {
        return 1;
    }
}

class LiveThrowStaleBridge {
    static void run(LiveThrowStaleTarget t, boolean catches) {
        LiveThrowStale.f(t); // ⟨S, m⟩ becomes a known pair
        if (catches) {
            try {
                LiveThrowStale.f(null);
            } catch (NullPointerException e) {
                // caught where lucce cannot see
            }
        } else {
            LiveThrowStale.tryF(null);
        }
        t.m(); // an entry of m from the bridge
    }
}
