/** The cost of `verify=N` on a deep stack: a thread recurses `args[0]` deep, then calls a method
 *  2,000 times at the bottom. `java -agentpath:…=out=DIR,sample=1,verify=1 -cp CLASSES
 *  DeepVerify 5000` makes every entry an event with the JVM's trace (7,003 events), with every
 *  class instrumented, the JDK code that takes the trace too; `include=DeepVerify` leaves the
 *  JDK out. Without `verify=1` the same run shows what the encoding alone costs. */
public class DeepVerify {
    static int hits;

    static void hit() {
        hits++;
    }

    static void down(int n) {
        if (n == 0) {
            for (int i = 0; i < 2000; i++) {
                hit();
            }
            return;
        }
        down(n - 1);
    }

    public static void main(String[] args) throws Exception {
        Thread t = new Thread(null, () -> down(Integer.parseInt(args[0])), "deep", 256 << 20);
        t.start();
        t.join();
        System.out.println(hits);
    }
}
