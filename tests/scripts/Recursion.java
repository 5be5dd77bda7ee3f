import java.util.*;

/** Recursion: linear, branching, mutual, deep, and a stack overflow that is caught. */
public class Recursion {
    static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
    static int ack(int m, int n) {
        if (m == 0) return n + 1;
        if (n == 0) return ack(m - 1, 1);
        return ack(m - 1, ack(m, n - 1));
    }
    static boolean isEven(int n) { return n == 0 || isOdd(n - 1); }
    static boolean isOdd(int n) { return n != 0 && isEven(n - 1); }
    static long deep(int n) { return n == 0 ? 0 : 1 + deep(n - 1); }
    static int depth;
    static void overflow() { depth++; overflow(); }

    static int tree(int n, int branches) {
        if (n == 0) return 1;
        int s = 1;
        for (int i = 0; i < branches; i++) s += tree(n - 1, branches);
        return s;
    }

    static List<String> perms(String s) {
        if (s.length() <= 1) return new ArrayList<>(List.of(s));
        List<String> out = new ArrayList<>();
        for (int i = 0; i < s.length(); i++)
            for (String p : perms(s.substring(0, i) + s.substring(i + 1))) out.add(s.charAt(i) + p);
        return out;
    }

    public static void main(String[] args) {
        System.out.println("fib(25)=" + fib(25));
        System.out.println("ack(2,3)=" + ack(2, 3));
        System.out.println("even(1001)=" + isEven(1001));
        System.out.println("deep=" + deep(3000));
        System.out.println("tree=" + tree(7, 3));
        System.out.println("perms=" + perms("abcde").size() + " " + perms("abc"));
        try {
            overflow();
        } catch (StackOverflowError e) {
            System.out.println("stack overflow caught: " + (depth > 500));
        }
    }
}
