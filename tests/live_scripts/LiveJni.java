import lucce.Lucce;

/**
 * Native methods calling back into Java (JNI): static and instance callbacks, a Runnable, nested
 * native -> Java -> native -> Java. The library path comes in -Dlive.jni=/abs/libLiveJni.so.
 * By the rule the native frames are not in the decoded stacks (nor in what the test compares).
 */
public class LiveJni {
    static native void callStatic(int n);
    native void callInstance(int n);
    static native void callRunnable(Runnable r);

    static void staticCallback(int n) {
        Lucce.mark(T.here("jni-static-" + n));
        if (n > 0) callStatic(n - 1);
    }

    void instanceCallback(int n) {
        Lucce.mark(T.here("jni-instance-" + n));
        helper(n);
    }

    static void helper(int n) {
        Lucce.mark(T.here("jni-helper-" + n));
    }

    public static void main(String[] args) {
        System.load(System.getProperty("live.jni"));
        callStatic(2);
        new LiveJni().callInstance(7);
        callRunnable(() -> Lucce.mark(T.here("jni-runnable")));
        for (int i = 0; i < 3; i++) callRunnable(new Runnable() {
            @Override public void run() { Lucce.mark(T.here("jni-anon")); }
        });
        Lucce.mark(T.here("main-end"));
    }
}
