import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import lucce.Lucce;

/**
 * Synchronized methods and blocks, default and static interface methods, bridge methods (generic
 * overrides called through the erased signature), enums with constant bodies, switch on strings
 * and enums, inner, anonymous and local classes, varargs.
 */
public class LiveMisc {
    private int counter;

    synchronized void syncInstance(int depth) {
        counter++;
        if (depth == 0) {
            Lucce.mark(T.here("sync-instance"));
            return;
        }
        syncInstance(depth - 1);
    }

    static synchronized void syncStatic() {
        Lucce.mark(T.here("sync-static"));
    }

    void syncBlock() {
        synchronized (this) {
            Lucce.mark(T.here("sync-block"));
            synchronized (LiveMisc.class) {
                Lucce.mark(T.here("sync-block-nested"));
            }
        }
    }

    interface Shape {
        double area();
        default String describe() {
            Lucce.mark(T.here("default-" + getClass().getSimpleName()));
            return getClass().getSimpleName() + " " + area();
        }
        static Shape unit() {
            Lucce.mark(T.here("interface-static"));
            return new Square(1);
        }
    }

    static class Square implements Shape, Comparable<Square> {
        final double side;
        Square(double side) { this.side = side; }
        @Override public double area() { return side * side; }
        @Override public int compareTo(Square o) {
            Lucce.mark(T.here("compareTo-" + side + "-" + o.side));
            return Double.compare(side, o.side);
        }
    }

    static class Circle implements Shape {
        @Override public double area() { return 3.0; }
        @Override public String describe() {
            Lucce.mark(T.here("override-default"));
            return "circle:" + Shape.super.describe();
        }
    }

    interface Box<V> { V get(); }

    static class StringBox implements Box<String> {
        @Override public String get() {
            Lucce.mark(T.here("bridge-get"));
            return "boxed";
        }
    }

    enum Op {
        ADD { @Override int apply(int a, int b) { Lucce.mark(T.here("enum-body-ADD")); return a + b; } },
        MUL { @Override int apply(int a, int b) { Lucce.mark(T.here("enum-body-MUL")); return a * b; } };
        abstract int apply(int a, int b);
        int twice(int a) {
            Lucce.mark(T.here("enum-method-" + name()));
            return apply(a, a);
        }
    }

    static int byName(String s) {
        switch (s) {
            case "alpha":
                Lucce.mark(T.here("switch-alpha"));
                return 1;
            case "beta":
            case "gamma":
                Lucce.mark(T.here("switch-beta-gamma-" + s));
                return 2;
            case "Aa": // same hashCode as "BB"
                Lucce.mark(T.here("switch-Aa"));
                return 3;
            case "BB":
                Lucce.mark(T.here("switch-BB"));
                return 4;
            default:
                Lucce.mark(T.here("switch-default-" + s));
                return 0;
        }
    }

    static String byOp(Op op) {
        switch (op) {
            case ADD: Lucce.mark(T.here("switch-enum-ADD")); return "+";
            default: Lucce.mark(T.here("switch-enum-other")); return "*";
        }
    }

    static int sum(int... xs) {
        Lucce.mark(T.here("varargs-" + xs.length));
        int s = 0;
        for (int x : xs) s += x;
        return s;
    }

    class InnerCounter {
        int next() {
            Lucce.mark(T.here("inner-class"));
            return ++counter;
        }
    }

    public static void main(String[] args) {
        LiveMisc m = new LiveMisc();
        m.syncInstance(4);
        syncStatic();
        m.syncBlock();
        System.out.println(new Square(2).describe());
        System.out.println(new Circle().describe());
        System.out.println(Shape.unit().area());
        List<Square> squares = new ArrayList<>(List.of(new Square(3), new Square(1), new Square(2)));
        Collections.sort(squares);
        @SuppressWarnings({"unchecked", "rawtypes"})
        Comparable<Object> raw = (Comparable) new Square(5);
        System.out.println(raw.compareTo(new Square(4)));
        Box<String> box = new StringBox();
        System.out.println(box.get());
        for (Op op : Op.values()) System.out.println(op.twice(3) + " " + byOp(op));
        System.out.println(Op.valueOf("MUL").apply(2, 5));
        for (String s : new String[] {"alpha", "beta", "gamma", "Aa", "BB", "delta"}) System.out.println(byName(s));
        System.out.println(sum() + sum(1) + sum(1, 2, 3));
        System.out.println(m.new InnerCounter().next());
        Runnable anon = new Runnable() {
            @Override public void run() { Lucce.mark(T.here("anonymous")); }
        };
        anon.run();
        class Local {
            void go() { Lucce.mark(T.here("local-class")); }
        }
        new Local().go();
    }
}
