/**
 * 2,000 exceptions thrown by a method whose only call builds the exception: a leaf in record
 * mode (agent/src/rewrite/leaves.rs), so each throw walks the stack, unless the agent
 * runs with throw_leaves=off.
 */
public class LiveThrowLeaves {
    static void check(int i) {
        if (i >= 0) throw new IllegalArgumentException();
    }

    public static void main(String[] args) {
        int caught = 0;
        for (int i = 0; i < 2000; i++) {
            try {
                check(i);
            } catch (IllegalArgumentException e) {
                caught++;
            }
        }
        System.out.println("caught " + caught);
    }
}
