import lucce.Lucce;

/**
 * Objects whose class has a finalizer, made in a loop (-Dfinalizers.n iterations) from two call
 * paths. The JVM registers each such object by calling Finalizer.register from the return of
 * Object.<init> (RegisterFinalizersAtInit), an upcall with no call instruction: the test checks
 * that those entries decode exactly (every entry is an event in the sample=1 run) and that, once
 * known, they take no stack walk.
 */
public class LiveFinalizers {
    static int made;

    static class Tracked {
        final int id;

        Tracked(int id) {
            this.id = id;
            made++;
            if (id == 0) {
                Lucce.mark(T.here("tracked-ctor-" + id));
            }
        }

        @Override
        @SuppressWarnings("deprecation")
        protected void finalize() {
            made--;
        }
    }

    static class Child extends Tracked {
        Child(int id) {
            super(id);
        }
    }

    static Object viaChild(int i) {
        return new Child(i);
    }

    public static void main(String[] args) {
        int n = Integer.getInteger("finalizers.n", 1);
        Object keep = null;
        for (int i = 0; i < n; i++) {
            keep = (i & 1) == 0 ? new Tracked(i) : viaChild(i);
        }
        Lucce.mark(T.here("finalizers-done-" + (keep != null)));
    }
}
