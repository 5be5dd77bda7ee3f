import java.util.function.IntUnaryOperator;

/**
 * Deterministic call counts, known by construction: f() runs exactly 12345 times, g() 1000,
 * h() 10, and the lambda's proxy (a hidden class) 7 times.
 */
public class CountCheck {
    static int acc;
    int inst;

    static void f(int i) { acc += i & 3; }
    static int g(int i) { f(i); return i; }
    void h() { inst++; }
    static int rec(int n) { return n == 0 ? 0 : 1 + rec(n - 1); }

    CountCheck() { inst = 1; }

    public static void main(String[] args) {
        for (int i = 0; i < 11345; i++) f(i);
        for (int i = 0; i < 1000; i++) g(i);
        CountCheck c = new CountCheck();
        for (int i = 0; i < 10; i++) c.h();
        System.out.println(acc + " " + c.inst + " " + rec(100));
        Runnable r = new Runnable() { public void run() { f(0); } };
        r.run();
        IntUnaryOperator twice = x -> 2 * x;
        int sum = 0;
        for (int i = 0; i < 7; i++) sum += twice.applyAsInt(i);
        System.out.println(sum);
    }
}
