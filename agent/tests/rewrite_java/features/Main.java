import java.util.*;
import java.util.function.*;
import java.util.stream.*;

/** End-to-end fixture for the class-file rewriter: many bytecode shapes, deterministic output. */
public class Main {
    interface Shape { double area(); }
    enum Color { RED, GREEN, BLUE; Color next() { return values()[(ordinal() + 1) % 3]; } }
    static abstract class Base<T> { abstract T get(); T twice() { get(); return get(); } }
    static final class StrBox extends Base<String> { int n; String get() { return "box" + (n++); } } // bridge method
    static final class Pt implements Shape {
        final int x, y; Pt(int x, int y) { this.x = x; this.y = y; }
        public double area() { return x * y; }
        public String toString() { return "Pt[x=" + x + ", y=" + y + "]"; }
        public boolean equals(Object o) { return o instanceof Pt && ((Pt) o).x == x && ((Pt) o).y == y; }
        public int hashCode() { return x * 31 + y; }
    }
    static String repeat(String s, Integer n) { StringBuilder b = new StringBuilder(); for (int i = 0; i < n; i++) b.append(s); return b.toString(); }

    static class Parent {
        final Object o; final int k;
        Parent(Object o, int k) { this.o = o; this.k = k; }
    }
    static class Child extends Parent {
        // new in super() arguments with branches: Uninitialized and UninitializedThis in frames
        Child(boolean f) { super(new StringBuilder(f ? "yes" : "no").append(f ? 1 : 2), f ? 10 : 20); }
        Child() { this(Main.flag()); }
        Child(int a, long b, double c) { super(a > 0 ? new int[]{a} : new long[]{b}, (int) (b + (long) c)); }
    }
    static boolean flag() { return System.nanoTime() != 0; }

    static int sw(int x) {
        switch (x) { case 1: return 10; case 2: return 20; case 3: return 30; case 4: return 40; default: return -1; }
    }
    static int lsw(int x) {
        switch (x) { case -1000: return 1; case 7: return 2; case 100000: return 3; default: return 0; }
    }
    static String strsw(String s) {
        switch (s) { case "alpha": return "A"; case "beta": return "B"; case "Aa": return "Aa"; case "BB": return "BB"; default: return "?"; }
    }
    static int branches(int a, int b, Object o, long l, float f, double d) {
        int r = 0;
        if (a == 0) r++; if (a != 0) r++; if (a < 0) r++; if (a >= 0) r++; if (a > 0) r++; if (a <= 0) r++;
        if (a == b) r++; if (a != b) r++; if (a < b) r++; if (a >= b) r++; if (a > b) r++; if (a <= b) r++;
        if (o == null) r++; if (o != null) r++; if (o == (Object) "x") r++; if (o != (Object) "x") r++;
        if (l > 3L) r++; if (f < 2.5f) r++; if (d >= 1.0) r++; if (f > 0.0f) r += 2;
        return r;
    }
    static long loops(int n) {
        long acc = 0; double dd = 1.5;
        outer:
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < i; j++) { if (j == 7) continue outer; acc += i * j; dd *= 1.0001; }
            do { acc ^= i; } while (acc < 0);
            while (acc > 1000000) acc /= 3;
        }
        return acc + (long) dd;
    }
    static String tryFinally(int k) {
        StringBuilder sb = new StringBuilder();
        try {
            try {
                sb.append("t");
                if (k == 1) throw new IllegalStateException("k1");
                if (k == 2) return sb.append("r").toString();
                sb.append(Integer.parseInt(k == 3 ? "zz" : "5"));
            } catch (NumberFormatException e) {
                sb.append("nfe");
            } finally {
                sb.append("f");
            }
        } catch (IllegalStateException | IllegalArgumentException e) {
            sb.append("ise:").append(e.getMessage());
        } finally {
            sb.append("F");
        }
        return sb.toString();
    }
    private final Object lock = new Object();
    private int counter;
    synchronized void inc() { counter++; }
    int syncBlock(int n) { synchronized (lock) { for (int i = 0; i < n; i++) inc(); if (n > 100) throw new RuntimeException(); return counter; } }
    static String arrays() {
        boolean[] z = new boolean[3]; byte[] b = {1, 2}; char[] c = {'a', 'b'}; short[] s = new short[2];
        int[] i = new int[]{3, 4}; long[] l = new long[2]; float[] f = {1f}; double[] d = {2.0};
        String[] str = new String[2]; int[][] m = new int[3][4]; Object[][][] o3 = new Object[2][3][];
        z[1] = true; s[1] = 7; l[1] = 1L << 40; str[0] = "s"; m[2][3] = 9; o3[1][2] = new Object[]{"deep"};
        return Arrays.toString(z) + Arrays.toString(b) + new String(c) + Arrays.toString(s) + Arrays.toString(i)
            + Arrays.toString(l) + Arrays.toString(f) + Arrays.toString(d) + Arrays.toString(str)
            + Arrays.deepToString(m) + Arrays.deepToString(o3);
    }
    static double longsDoubles(long a, double b, int c) {
        long x = a * 3 + c; double y = b / 2; long z = x << 3; double w = y * x;
        for (long k = 0; k < 5; k++) { x += k; y -= k * 0.5; }
        return x + y + z + w;
    }
    static String lambdas() {
        Function<Integer, Integer> sq = v -> v * v;
        Supplier<String> sup = () -> "sup";
        BiFunction<String, Integer, String> rep = Main::repeat;
        Runnable r = () -> {};
        r.run();
        List<String> names = Stream.of("b", "a", "c").sorted().map(String::toUpperCase).collect(Collectors.toList());
        int sum = IntStream.rangeClosed(1, 10).map(v -> v * 2).sum();
        return sq.apply(7) + sup.get() + rep.apply("ab", 3) + names + sum;
    }
    static <T extends Comparable<T>> T max(List<T> xs) { T best = null; for (T x : xs) if (best == null || x.compareTo(best) > 0) best = x; return best; }
    class Inner { int v() { return counter + 1; } }
    static String anon() {
        Comparator<String> c = new Comparator<String>() { public int compare(String a, String b) { return b.compareTo(a); } };
        List<String> l = new ArrayList<>(Arrays.asList("x", "z", "y")); l.sort(c); return l.toString();
    }
    static int ternaryChain(int a) { return a > 5 ? (a > 10 ? 3 : 2) : (a < 0 ? -1 : 0); }
    static String exceptions() {
        StringBuilder sb = new StringBuilder();
        for (int k = 0; k < 4; k++) {
            try {
                switch (k) {
                    case 0: Object o = null; o.hashCode(); break;
                    case 1: int[] a = new int[1]; a[k] = 1; break;
                    case 2: throw new Error("e");
                    default: sb.append(10 / (k - 3));
                }
            } catch (NullPointerException e) { sb.append("npe;"); }
            catch (ArrayIndexOutOfBoundsException e) { sb.append("aioobe;"); }
            catch (Throwable t) { sb.append(t.getClass().getSimpleName()).append(';'); }
        }
        return sb.toString();
    }
    static Object instanceofs(Object o) {
        if (o instanceof String) return ((String) o).length();
        if (o instanceof Integer) return (Integer) o + 1;
        return o;
    }

    public static void main(String[] args) {
        System.out.println(sw(0) + " " + sw(2) + " " + sw(4) + " " + lsw(7) + " " + lsw(100000) + " " + lsw(-1000) + " " + lsw(5));
        System.out.println(strsw("alpha") + strsw("beta") + strsw("Aa") + strsw("BB") + strsw("zz"));
        System.out.println(branches(0, 1, null, 5, 1f, 2.0) + " " + branches(3, 3, "x", 1, 3f, 0.5) + " " + branches(-2, 5, new Object(), 9, -1f, 1.0));
        System.out.println(loops(30) + " " + loops(3));
        for (int k = 0; k < 5; k++) System.out.print(tryFinally(k) + " ");
        System.out.println();
        Main m = new Main();
        System.out.println(m.syncBlock(5) + " " + m.syncBlock(3) + " " + m.new Inner().v());
        try { m.syncBlock(1000); } catch (RuntimeException e) { System.out.println("caught " + m.counter); }
        System.out.println(arrays());
        System.out.println(longsDoubles(1L << 33, 3.25, 7));
        System.out.println(lambdas());
        System.out.println(max(Arrays.asList(3, 9, 2)) + " " + max(Arrays.asList("q", "b")));
        StrBox box = new StrBox(); Base<String> bb = box;
        System.out.println(bb.twice() + " " + box.get());
        System.out.println(Color.RED.next() + " " + Color.BLUE.next() + " " + Color.valueOf("GREEN").ordinal());
        System.out.println(new Pt(3, 4).area() + " " + new Pt(3, 4) + " " + new Pt(1, 2).equals(new Pt(1, 2)));
        System.out.println(((StringBuilder) new Child(true).o) + " " + new Child(false).k + " " + new Child().k + " " + new Child(1, 2L, 3.0).k + " " + new Child(-1, 2L, 3.0).o.getClass().getSimpleName());
        System.out.println(anon() + " " + ternaryChain(12) + ternaryChain(7) + ternaryChain(-3) + ternaryChain(1));
        System.out.println(exceptions());
        System.out.println(instanceofs("abc") + " " + instanceofs(41) + " " + instanceofs(2.5));
        System.out.println(Gen.run());
    }
}
