/** How deep two recursive methods get on a thread with a 1 MiB stack before StackOverflowError:
 *  `f(int)`, and `g(Object, int)`, whose frames also call `Objects.hash`. */
public class StackDepth {
    static int max;

    static int f(int n) {
        max = n;
        return f(n + 1) + 1;
    }

    static Object g(Object o, int n) {
        max = n;
        return java.util.Objects.hash(g(o, n + 1), o);
    }

    public static void main(String[] args) throws Exception {
        Thread t = new Thread(null, () -> {
            try {
                f(0);
            } catch (StackOverflowError e) {
                // the depth is in max
            }
            System.out.println("f " + max);
            try {
                g("x", 0);
            } catch (StackOverflowError e) {
                // the depth is in max
            }
            System.out.println("g " + max);
        }, "deep", 1 << 20);
        t.start();
        t.join();
    }
}
