import lucce.Lucce;

/**
 * Native methods calling back into Java (JNI): static and instance callbacks, a Runnable, nested
 * native -> Java -> native -> Java. The library path comes in -Dlive.jni=/abs/libLiveJni.so.
 * By the rule the native frames are not in the decoded stacks (nor in what the test compares).
 * LiveLoadedJni: a stale call-site record of a native call, then an upcall by the JVM.
 * attachedThreads: native threads that attach themselves to the JVM at once and call back.
 */
public class LiveJni {
    static native void callStatic(int n);
    native void callInstance(int n);
    static native void callRunnable(Runnable r);
    /** Calls {@code loader.loadClass(name)}, or returns at once when the loader is null. */
    public static native void loadVia(ClassLoader loader, String name);
    /** Starts `n` native threads that attach to the JVM together, call attachedCallback, detach. */
    static native void attachedThreads(int n);

    static void staticCallback(int n) {
        Lucce.mark(T.here("jni-static-" + n));
        if (n > 0) callStatic(n - 1);
    }

    void instanceCallback(int n) {
        Lucce.mark(T.here("jni-instance-" + n));
        helper(n);
    }

    static void attachedCallback(int i) {
        helper(i);
        Lucce.mark(T.here("jni-attached"));
    }

    static void helper(int n) {
        Lucce.mark(T.here("jni-helper-" + n));
    }

    public static void main(String[] args) {
        System.load(System.getProperty("live.jni"));
        callStatic(2);
        new LiveJni().callInstance(7);
        callRunnable(() -> Lucce.mark(T.here("jni-runnable")));
        attachedThreads(4);
        for (int i = 0; i < 3; i++) callRunnable(new Runnable() {
            @Override public void run() { Lucce.mark(T.here("jni-anon")); }
        });
        LiveLoader.MarkingLoader loader = new LiveLoader.MarkingLoader(LiveJni.class.getClassLoader());
        try {
            loader.loadClass("LiveLoadedJni").getMethod("run").invoke(null);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
        }
        Lucce.mark(T.here("main-end"));
    }
}
