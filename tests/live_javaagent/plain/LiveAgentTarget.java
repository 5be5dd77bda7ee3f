/** The class as compiled; the Java agent replaces it with variant/LiveAgentTarget.java's. */
public final class LiveAgentTarget {
    private LiveAgentTarget() {}

    static int f(int n) {
        return n < 2 ? n : f(n - 1) + f(n - 2);
    }

    public static void main(String[] args) {
        System.out.println("fib(15) = " + f(15) + ", hits " + LiveAgentHits.count);
    }
}
