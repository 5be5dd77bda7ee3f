import java.io.*;

/** Exceptions through many frames, finally blocks, try-with-resources, suppressed, rethrow, traces with line numbers. */
public class Exceptions {
    static class MyException extends Exception {
        final int code;
        MyException(String m, int code, Throwable cause) { super(m, cause); this.code = code; }
    }

    static class Res implements AutoCloseable {
        final String name;
        Res(String name) { this.name = name; System.out.println("open " + name); }
        public void close() throws IOException {
            System.out.println("close " + name);
            if (name.equals("bad")) throw new IOException("close failed " + name);
        }
    }

    static int thrower(int depth) throws MyException {
        if (depth == 0) {
            try {
                Object o = null;
                o.hashCode();
            } catch (NullPointerException npe) {
                throw new MyException("bottom", 42, npe);
            }
        }
        try {
            return thrower(depth - 1);
        } finally {
            System.out.println("finally at depth " + depth);
        }
    }

    static String finallyOverrides() {
        try {
            throw new RuntimeException("lost");
        } finally {
            return "finally wins";
        }
    }

    static int nested(int x) {
        int r = 0;
        try {
            try {
                r += 1;
                if (x > 0) throw new IllegalArgumentException("x=" + x);
                r += 10;
            } catch (IllegalArgumentException e) {
                r += 100;
                throw new IllegalStateException("wrapped", e);
            } finally {
                r += 1000;
            }
        } catch (IllegalStateException e) {
            r += 10000;
        }
        return r;
    }

    static void printTrace(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            System.out.println(c.getClass().getName() + ": " + c.getMessage());
            for (StackTraceElement e : c.getStackTrace()) {
                if (e.getClassName().startsWith("Exceptions"))
                    System.out.println("    at " + e);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        try {
            thrower(5);
        } catch (MyException e) {
            System.out.println("caught code " + e.code);
            printTrace(e);
        }
        System.out.println(finallyOverrides());
        System.out.println("nested(0)=" + nested(0) + " nested(1)=" + nested(1));
        try (Res a = new Res("a"); Res b = new Res("bad")) {
            throw new RuntimeException("body");
        } catch (RuntimeException e) {
            System.out.println("body exception " + e.getMessage() + " suppressed " + e.getSuppressed().length
                + ": " + e.getSuppressed()[0].getMessage());
        }
        try {
            int[] a = new int[2];
            a[3] = 1;
        } catch (ArrayIndexOutOfBoundsException e) {
            System.out.println("aioobe: " + e.getMessage());
        }
        try {
            Object s = "str";
            Integer i = (Integer) s;
        } catch (ClassCastException e) {
            System.out.println("cce caught");
        }
        try {
            System.out.println(10 / (args.length));
        } catch (ArithmeticException e) {
            System.out.println("arith: " + e.getMessage());
        }
        StringWriter sw = new StringWriter();
        new Throwable("trace").printStackTrace(new PrintWriter(sw));
        System.out.println(sw.toString().split("\n")[1].trim());
        throw new MyException("escapes main", 7, null);
    }
}
