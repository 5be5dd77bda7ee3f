/** What the Java agent's version of LiveAgentTarget calls at the start of each method. */
public final class LiveAgentHits {
    static long count;

    private LiveAgentHits() {}

    static void hit() {
        count = bump(count);
    }

    static long bump(long v) {
        return v + 1;
    }
}
