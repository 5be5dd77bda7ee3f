/**
 * Stale records after JIT intrinsics (docs/agent.md, "Record mode", the drop probe; test
 * `calls_into_jit_intrinsics`): `inst` calls `Math.max`, which C2 replaces by an intrinsic once
 * `inst` is hot, so `Math.max`'s entry probe no longer runs and would leave the call-site record
 * of `inst` valid. The excluded `LiveIntrinsicsBridge` then calls `Math.max` itself: without the
 * drop probe after the call in `inst`, its entry takes that record, a pair the encoder knows, and
 * its sampled events decode with `inst` as the caller.
 */
public class LiveIntrinsics {
    static int inst(int a, int b) {
        return Math.max(a, b) + 1;
    }

    public static void main(String[] args) {
        long s = 0;
        int n = Integer.parseInt(args[0]);
        for (int i = 0; i < n; i++) {
            s += LiveIntrinsicsBridge.call(i);
        }
        System.out.println("sum " + s);
    }
}

class LiveIntrinsicsBridge {
    static int call(int i) {
        return LiveIntrinsics.inst(i, 7) + Math.max(i, 3);
    }
}
