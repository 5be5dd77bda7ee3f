import lucce.Lucce;

/**
 * Objects whose class has a finalizer, made in a loop (-Dfinalizers.n iterations) from two call
 * paths. The JVM registers each such object by calling Finalizer.register from the return of
 * Object.<init> (RegisterFinalizersAtInit), an upcall with no call instruction: the test checks
 * that those entries decode exactly (every entry is an event in the sample=1 run) and that, once
 * known, they take no stack walk. Then it waits until the JVM's Finalizer thread has finalized
 * them all: the agent restarts that thread's loop on rewritten code (agent/src/finalizer.rs), so
 * a mark inside finalize() decodes completely, no finalizer is lost, one Finalizer thread is
 * left, and the loop takes no walk per object either. An empty finalize() must stay empty: the
 * JVM registers no instance of a class whose finalizer is empty.
 */
public class LiveFinalizers {
    static int made;
    /** Guarded by LiveFinalizers.class. */
    static int finalized;

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
            synchronized (LiveFinalizers.class) {
                finalized++;
                if (id == 0) {
                    Thread t = Thread.currentThread();
                    Lucce.mark(T.here("finalize-on-" + t.getName() + "-" + t.getPriority() + "-" + t.isDaemon() + "-" + t.getContextClassLoader()));
                }
                LiveFinalizers.class.notifyAll();
            }
        }
    }

    /** Cancels the inherited finalizer with an empty one: the JVM registers no instance. */
    static class Cancelled extends Tracked {
        Cancelled() {
            super(-1);
        }

        @Override
        protected void finalize() {}
    }

    static class Child extends Tracked {
        Child(int id) {
            super(id);
        }
    }

    static Object viaChild(int i) {
        return new Child(i);
    }

    public static void main(String[] args) throws InterruptedException {
        int n = Integer.getInteger("finalizers.n", 1);
        Object keep = null;
        for (int i = 0; i < n; i++) {
            keep = (i & 1) == 0 ? new Tracked(i) : viaChild(i);
        }
        Lucce.mark(T.here("finalizers-done-" + (keep != null)));
        keep = null;
        // No runFinalization(): its secondary thread would take some of the work.
        long deadline = System.nanoTime() + 120_000_000_000L;
        synchronized (LiveFinalizers.class) {
            while (finalized < n && System.nanoTime() < deadline) {
                System.gc();
                LiveFinalizers.class.wait(100);
            }
        }
        Lucce.mark(T.here("finalized-all-" + (finalized == n)));
        // The agent joined the old Finalizer thread; the old Reference Handler dies when a
        // collection hands over references and it sees them before the new thread takes them
        // (both wait for them), so every round makes a weak reference for the next collection.
        java.lang.ref.ReferenceQueue<Object> queue = new java.lang.ref.ReferenceQueue<>();
        java.lang.ref.WeakReference<Object> weak = null;
        synchronized (LiveFinalizers.class) {
            while (alive("Reference Handler") > 1 && System.nanoTime() < deadline) {
                weak = new java.lang.ref.WeakReference<>(new Object(), queue);
                System.gc();
                LiveFinalizers.class.wait(100);
            }
        }
        java.lang.ref.Reference.reachabilityFence(weak);
        Lucce.mark(T.here("finalizer-threads-" + alive("Finalizer")));
        Lucce.mark(T.here("reference-handlers-" + alive("Reference Handler")));
        // Not finalizable, a Cancelled object is phantom reachable after one collection (a
        // registered one would need its finalizer to run, then another collection). The timeout
        // is only reached when that is wrong.
        java.lang.ref.ReferenceQueue<Object> phantoms = new java.lang.ref.ReferenceQueue<>();
        java.lang.ref.PhantomReference<Object> phantom = new java.lang.ref.PhantomReference<>(new Cancelled(), phantoms);
        System.gc();
        Lucce.mark(T.here("cancelled-unregistered-" + (phantoms.remove(10_000) == phantom)));
    }

    static long alive(String name) {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals(name)).count();
    }
}
