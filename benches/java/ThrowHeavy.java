/** What an exception costs when the method that throws it calls only to build it (a leaf in
 *  record mode, agent option `throw_leaves`): `args[0]` `IllegalArgumentException`s from a
 *  two-line `check`, then as many `IndexOutOfBoundsException`s from `ArrayList.get`, each caught
 *  by the loop; prints the ns per iteration of each loop. Compare, one after the other,
 *  `java -cp CLASSES ThrowHeavy 200000`, the same with
 *  `-agentpath:…/liblucce_agent.so=out=DIR,summary=off` and with `…,throw_leaves=off` added
 *  (`loglevel=info` also prints the walks: one per exception with the leaves on). */
public class ThrowHeavy {
    static void check(int i) {
        if ((i & 1) == 0) throw new IllegalArgumentException("odd " + i);
    }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        int caught = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < 2 * n; i++) {
            try {
                check(i);
            } catch (IllegalArgumentException e) {
                caught++;
            }
        }
        long t1 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            try {
                new java.util.ArrayList<Integer>(2).get(i % 5);
            } catch (IndexOutOfBoundsException e) {
                caught++;
            }
        }
        long t2 = System.nanoTime();
        System.out.println(caught + " caught; check " + (t1 - t0) / n + " ns per throw, ArrayList.get " + (t2 - t1) / n + " ns per iteration");
    }
}
