import java.util.*;

/** Synchronized methods and blocks, inner/anonymous/local classes, static initializers, arrays of every kind,
 *  switches (tableswitch, lookupswitch), long branches, interfaces with static and default methods. */
public class Misc {
    static final int[] TABLE;
    static String log = "";
    static {
        TABLE = new int[16];
        for (int i = 0; i < TABLE.length; i++) TABLE[i] = i * i;
        log += "clinit;";
    }

    private int counter;
    synchronized void inc() { counter++; }
    void incBlock() { synchronized (this) { counter += 2; } }

    class Inner { int get() { return counter * 10; } }
    static class Nested { String hi() { return "nested"; } }

    interface Op { int apply(int x); static Op id() { return x -> x; } default Op twice() { return x -> apply(apply(x)); } }

    static String dense(int x) {
        switch (x) {
            case 0: return "zero";
            case 1: return "one";
            case 2: return "two";
            case 3: return "three";
            case 4: return "four";
            default: return "many";
        }
    }

    static String sparse(int x) {
        switch (x) {
            case -1000000: return "neg";
            case 7: return "seven";
            case 1 << 20: return "big";
            default: return "?";
        }
    }

    static int longMethod(int x) {
        int s = 0;
        for (int i = 0; i < x; i++) {
            // A loop body large enough to need wide jumps once probes are added is not
            // possible to write by hand; this keeps many branches and locals instead.
            if ((i & 1) == 0) s += i; else s -= i;
            if (i % 3 == 0) s ^= i;
            if (i % 5 == 0) { long l = s; double d = l * 1.5; s = (int) d; }
            s = s > 100000 ? s - 100000 : s;
        }
        return s;
    }

    public static void main(String[] args) throws Exception {
        System.out.println(log + " " + Arrays.toString(TABLE));
        Misc m = new Misc();
        Thread[] ts = new Thread[3];
        for (int i = 0; i < 3; i++) {
            ts[i] = new Thread(() -> { for (int j = 0; j < 1000; j++) { m.inc(); m.incBlock(); } });
            ts[i].start();
        }
        for (Thread t : ts) t.join();
        System.out.println("counter=" + m.counter);
        Misc.Inner in = m.new Inner();
        System.out.println(in.get() + " " + new Nested().hi());
        Comparator<String> anon = new Comparator<String>() {
            @Override public int compare(String a, String b) { return b.compareTo(a); }
        };
        class Local { final String v; Local(String v) { this.v = v; } public String toString() { return "Local(" + v + ")"; } }
        List<String> l = new ArrayList<>(List.of("b", "c", "a"));
        l.sort(anon);
        System.out.println(l + " " + new Local("x"));
        Op sq = x -> x * x;
        System.out.println(sq.twice().apply(3) + " " + Op.id().apply(9));

        boolean[] bo = {true, false}; byte[] by = {1, -2}; char[] ch = {'h', 'i'}; short[] sh = {300, -300};
        int[] in1 = new int[5]; long[] lo = {1L << 50}; float[] fl = {1.5f}; double[] db = {2.25};
        String[] st = new String[] {"s", null}; Object[] ob = {1, "two", 3.0, null};
        int[][] grid = new int[3][4]; long[][][] cube = new long[2][3][4]; String[][] jag = new String[2][];
        jag[0] = new String[] {"a"}; jag[1] = new String[0];
        for (int i = 0; i < 3; i++) for (int j = 0; j < 4; j++) grid[i][j] = i * j;
        cube[1][2][3] = 99;
        in1[4] = by[1] + sh[0] + ch[0];
        System.out.println(Arrays.toString(bo) + Arrays.toString(by) + new String(ch) + Arrays.toString(sh)
            + Arrays.toString(in1) + Arrays.toString(lo) + Arrays.toString(fl) + Arrays.toString(db)
            + Arrays.toString(st) + Arrays.toString(ob) + Arrays.deepToString(grid) + cube[1][2][3]
            + Arrays.deepToString(jag) + by.clone().length + grid.clone()[2][3]);
        Object[] covariant = new Integer[1];
        try { covariant[0] = "s"; } catch (ArrayStoreException e) { System.out.println("ase " + e.getMessage()); }
        try { int[] neg = new int[args.length - 1]; } catch (NegativeArraySizeException e) { System.out.println("nase " + e.getMessage()); }
        for (int i = -1; i < 6; i++) System.out.print(dense(i) + " ");
        System.out.println(sparse(7) + sparse(1 << 20) + sparse(-1000000) + sparse(0));
        System.out.println(longMethod(10000));
        StringBuilder sb = new StringBuilder();
        for (char c = 'a'; c <= 'z'; c++) sb.append(c);
        System.out.println(sb.reverse());
        System.out.println(String.format("%05d|%-6s|%.3f|%x", 42, "ab", Math.E, 255));
        Iterator<Integer> it = new Iterator<Integer>() {
            int k = 0;
            public boolean hasNext() { return k < 3; }
            public Integer next() { return k++; }
        };
        while (it.hasNext()) System.out.print(it.next());
        System.out.println();
        System.exit(3);
    }
}
