/**
 * A call into left-out code that enters nothing instrumented must not leave its record for a
 * later entry from left-out code further down (test `calls_through_excluded_code_that_enter_nothing`;
 * docs/agent.md, "Known limits"). Run with the bridge left out. `f` calls
 * `LiveExcludedStaleBridge.run` at one call site S. In mode 0, `run` calls `g` straight away:
 * `g`'s entry walks through the `run` frame and admits the pair ⟨S, g⟩ with the call site. In
 * mode 1, `f(1)` calls `run(1)`, which calls `f(0)`; `f(0)` calls `run(0)` at S, which enters no
 * instrumented method. Back in `run(1)`, `g`'s entry looks for a record: with stop 56's agent the
 * one of `f(0)`'s call was still valid, and trusted, and `g` (and `h` below it) decoded with one
 * `f` level too many: 1,000 of 3,501 events wrong with `sample=1` over 500 rounds (a helper's
 * reduction of a Groovy run with only the script's classes included). With classes left out a
 * drop probe follows every call, so no record outlives its call. The JDK is called only outside
 * the loop, so no intrinsic is involved (the same with -Xint).
 */
public class LiveExcludedStale {
    static long n;

    static void f(int d, int mode) {
        LiveExcludedStaleBridge.run(d, mode); // call site S
    }

    /** Not a leaf: it calls on. */
    static void g(int d) {
        n += h(d);
    }

    static int h(int d) {
        return d & 1;
    }

    public static void main(String[] args) {
        int rounds = Integer.parseInt(args[0]);
        for (int i = 0; i < rounds; i++) {
            f(0, 0); // run(0) calls g
            f(1, 1); // run(1) calls f(0) (its run(0) enters nothing), then g
        }
        System.out.println("n " + n);
    }
}

class LiveExcludedStaleBridge {
    static void run(int d, int mode) {
        if (mode == 0) {
            LiveExcludedStale.g(d);
        } else if (d > 0) {
            LiveExcludedStale.f(d - 1, mode);
            LiveExcludedStale.g(d);
        }
    }
}
