package example.modular;

/** Recursion and calls inside a named module; prints whether jdk.unsupported is in the boot layer. */
public final class Main {
    private Main() {}

    static long fib(int n) {
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    static String describe(long v) {
        return "fib(22) = " + v;
    }

    public static void main(String[] args) {
        System.out.println("jdk.unsupported in the boot layer: " + ModuleLayer.boot().findModule("jdk.unsupported").isPresent());
        System.out.println(describe(fib(22)));
    }
}
