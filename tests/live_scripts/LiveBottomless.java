import lucce.Lucce;

/**
 * Marks in a method whose callers lucce cannot see: with `exclude=LiveBottomless`, this class's
 * frames are invisible, so entering {@link LiveBottomlessMark#mark} walks the whole stack down
 * to the thread's first frame. For depths 0 to 40 the stack is, once in 16, exactly a multiple
 * of the 16 frames a walk reads at a time (tests/live_jvm.rs, walks_to_the_bottom_of_any_stack).
 */
public class LiveBottomless {
    static void down(int n) {
        if (n > 0) {
            down(n - 1);
        } else {
            LiveBottomlessMark.mark();
        }
    }

    public static void main(String[] args) {
        for (int depth = 0; depth <= 40; depth++) {
            down(depth);
        }
        System.out.println("done");
    }
}

/** The instrumented method, entered from invisible frames only. */
final class LiveBottomlessMark {
    private LiveBottomlessMark() {}

    static void mark() {
        Lucce.mark("bottomless");
    }
}
