/**
 * 2,000 exceptions thrown by a method whose only call builds the exception, and 2,000 by one
 * whose exception handler throws another exception: leaves in record mode
 * (agent/src/rewrite/leaves.rs; the handler covers only the read before it), so each throw
 * walks the stack, unless the agent runs with throw_leaves=off.
 */
public class LiveThrowLeaves {
    static final int[] EMPTY = new int[0];

    static void check(int i) {
        if (i >= 0) throw new IllegalArgumentException();
    }

    static int first(int[] a) {
        try {
            return a[0];
        } catch (ArrayIndexOutOfBoundsException e) {
            throw new IllegalStateException();
        }
    }

    public static void main(String[] args) {
        int caught = 0;
        for (int i = 0; i < 2000; i++) {
            try {
                check(i);
            } catch (IllegalArgumentException e) {
                caught++;
            }
            try {
                first(EMPTY);
            } catch (IllegalStateException e) {
                caught++;
            }
        }
        System.out.println("caught " + caught);
    }
}
