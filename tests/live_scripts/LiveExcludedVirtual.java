/**
 * With classes left out, a drop probe follows every call (test
 * `virtual_calls_into_excluded_code_that_enter_nothing`; agent/src/rewrite/mod.rs, ProbeChoice).
 * Run with the bridge excluded. `f`'s call site S is a virtual call that reaches the
 * instrumented `Inst.run` (an entry straight from the invoke: the pair ⟨S, Inst.run⟩ is a real
 * one, admitted with the call site) or the excluded bridge's `run`, which enters nothing
 * instrumented and so leaves the record of S valid after `f` returns. The excluded `drive` then
 * calls `Inst.run` itself: without a drop after the call at S, that entry takes the record, the
 * pair is known, and `Inst.run` decodes as called from `f`, a frame that has returned (1,000 of
 * 3,002 events wrong with `sample=1` over 500 rounds, stop 57 before the drops).
 */
public class LiveExcludedVirtual {
    static long n;

    interface Op {
        void run(int d);
    }

    static class Inst implements Op {
        /** Not a leaf: it calls on. */
        public void run(int d) {
            n += h(d);
        }
    }

    static int h(int d) {
        return d & 1;
    }

    static void f(Op op, int d) {
        op.run(d); // call site S: Inst.run, or the excluded bridge's run
    }

    public static void main(String[] args) {
        int rounds = Integer.parseInt(args[0]);
        Op inst = new Inst();
        Op ex = new LiveExcludedVirtualBridge();
        for (int i = 0; i < rounds; i++) {
            f(inst, i); // admits ⟨S, Inst.run⟩
            LiveExcludedVirtualBridge.drive(inst, ex, i);
        }
        System.out.println("n " + n);
    }
}

class LiveExcludedVirtualBridge implements LiveExcludedVirtual.Op {
    public void run(int d) {
    }

    static void drive(LiveExcludedVirtual.Op inst, LiveExcludedVirtual.Op ex, int d) {
        LiveExcludedVirtual.f(ex, d); // S dispatches here: enters nothing
        inst.run(d); // an entry of Inst.run from excluded code
    }
}
