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

    /**
     * Calls only to build what it throws: in record mode a leaf, whose calls get no probes
     * (agent/src/rewrite/leaves.rs), so Boom's constructor finds this frame by a walk.
     */
    static void check(int i, int limit) {
        if (i >= limit) throw new Boom("check-" + i);
    }

    /** A mark before the throw: a call of the lucce API keeps its probes (not a leaf). */
    static void checkMarked(int i) {
        if (i < 0) {
            Lucce.mark(T.here("marked-" + i));
            throw new Boom("marked" + i);
        }
    }

    static Boom failure(String why) {
        Lucce.mark(T.here("failure-" + why));
        return new Boom(why);
    }

    /** A leaf too: its call is a factory that is not one. */
    static int at(int[] a, int i) {
        if (i >= a.length) throw failure("at-" + i);
        return a[i];
    }

    /** Hot loops (compiled, the leaves inlined) that throw now and then, from the leaves above and from the JDK's (String.charAt). */
    static int throwLeaves() {
        int[] a = new int[100];
        int caught = 0;
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 30000; i++) {
                try {
                    check(i, 29999 - round);
                    checkMarked(i == 20000 + round ? -1 - round : i);
                    caught += at(a, i % 5000 == 4999 ? 100 + round : i % 100);
                    caught += "abc".charAt(i % 7000 == 6999 ? 3 + round : 1);
                } catch (Boom e) {
                    caught++;
                } catch (StringIndexOutOfBoundsException e) {
                    Lucce.mark(T.here("sioobe-" + round));
                }
            }
        }
        return caught;
    }

    public static void main(String[] args) throws Exception {
        catcher("first");
        catcher("second");
        System.out.println(parse("12") + parse("x1") + parse("y2"));
        withResources("ok");
        withResources("throw");
        System.out.println("loop caught " + loopy());
        System.out.println("nested " + nested());
        System.out.println("throw leaves " + throwLeaves());
        Lucce.mark(T.here("main-end"));
    }
}
