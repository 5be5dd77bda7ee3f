/** LiveAgentTarget as the Java agent makes it: a call at the start of each method. */
public final class LiveAgentTarget {
    private LiveAgentTarget() {}

    static int f(int n) {
        LiveAgentHits.hit();
        return n < 2 ? n : f(n - 1) + f(n - 2);
    }

    public static void main(String[] args) {
        LiveAgentHits.hit();
        System.out.println("fib(15) = " + f(15) + ", hits " + LiveAgentHits.count);
    }
}
