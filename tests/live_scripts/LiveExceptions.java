import java.io.Closeable;

import lucce.Lucce;

/**
 * Exceptions unwinding many frames, caught, wrapped and rethrown; finally blocks; marks in
 * catch and finally blocks, in an exception's constructor, in try-with-resources close().
 */
public class LiveExceptions {
    static class Boom extends RuntimeException {
        Boom(String msg) {
            super(msg);
            Lucce.mark(T.here("boom-ctor-" + msg));
        }
    }

    static class Res implements Closeable {
        final String name;
        Res(String name) { this.name = name; }
        @Override public void close() {
            Lucce.mark(T.here("close-" + name));
        }
    }

    static int seq;

    static int down(int n, String tag) {
        if (n == 0) throw new Boom(tag);
        try {
            return down(n - 1, tag) + 1;
        } finally {
            if (n % 10 == 0) Lucce.mark(T.here("finally-" + tag + "-" + n));
        }
    }

    static void rethrow(RuntimeException e) {
        try {
            throw e;
        } catch (Boom b) {
            Lucce.mark(T.here("rethrow-catch-" + b.getMessage()));
            throw new IllegalStateException("wrapped", b);
        } finally {
            Lucce.mark(T.here("rethrow-finally-" + e.getMessage()));
        }
    }

    static void catcher(String tag) {
        try {
            down(35, tag);
        } catch (Boom e) {
            Lucce.mark(T.here("caught-" + tag));
            try {
                rethrow(e);
            } catch (IllegalStateException w) {
                Lucce.mark(T.here("caught-wrapped-" + tag));
            } finally {
                Lucce.mark(T.here("finally-after-rethrow-" + tag));
            }
        }
        Lucce.mark(T.here("after-catch-" + tag));
    }

    static int parse(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            Lucce.mark(T.here("nfe-" + s));
            return -1;
        }
    }

    static void withResources(String tag) throws Exception {
        try (Res a = new Res(tag + "-a"); Res b = new Res(tag + "-b")) {
            if (tag.startsWith("throw")) throw new Boom(tag);
            Lucce.mark(T.here("twr-body-" + tag));
        } catch (Boom e) {
            Lucce.mark(T.here("twr-catch-" + tag));
        }
    }

    static int loopy() {
        int caught = 0;
        for (int i = 0; i < 5; i++) {
            try {
                if (i % 2 == 0) down(i * 3, "loop" + i);
                else Object.class.cast(null).hashCode();
            } catch (Boom | NullPointerException e) {
                caught++;
                Lucce.mark(T.here("loop-catch-" + i));
            }
        }
        return caught;
    }

    static int nested() {
        try {
            try {
                down(12, "inner");
            } finally {
                Lucce.mark(T.here("nested-inner-finally"));
            }
        } catch (Boom e) {
            Lucce.mark(T.here("nested-outer-catch"));
        }
        try {
            return down(0, "return-in-finally");
        } finally {
            Lucce.mark(T.here("finally-overrides-throw"));
            return 7;
        }
    }

    public static void main(String[] args) throws Exception {
        catcher("first");
        catcher("second");
        System.out.println(parse("12") + parse("x1") + parse("y2"));
        withResources("ok");
        withResources("throw");
        System.out.println("loop caught " + loopy());
        System.out.println("nested " + nested());
        Lucce.mark(T.here("main-end"));
    }
}
