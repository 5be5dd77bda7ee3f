import lucce.Lucce;

/**
 * Stale call-site records followed by upcalls of the JVM (run by LiveJni, defined by LiveLoader's
 * MarkingLoader, so that the JVM resolves this class's references by calling loadClass). A call
 * of a native method leaves its site's record unconsumed; then the JVM calls loadClass from this
 * frame to resolve a `new`: the trace must show this frame at the line of the `new`, never at the
 * line of the earlier call.
 */
public class LiveLoadedJni {
    public static void run() {
        ClassLoader loader = LiveLoadedJni.class.getClassLoader();
        // Resolving this call the first time loads LiveJni: loadClass is entered from this frame,
        // at this call; the second time the native returns at once.
        for (int i = 0; i < 2; i++) {
            LiveJni.loadVia(null, "none");
        }
        Lucce.mark(T.here("jni-after-resolution-" + new LiveLoadedJniY().get()));
        // The first call's native calls loadClass (an upcall through a native frame); the second
        // returns at once.
        for (int i = 0; i < 2; i++) {
            LiveJni.loadVia(i == 0 ? loader : null, "LiveLoadedJniX");
        }
        Lucce.mark(T.here("jni-after-native-" + new LiveLoadedJniZ().get()));
    }
}

class LiveLoadedJniX {}

class LiveLoadedJniY {
    int get() { return 1; }
}

class LiveLoadedJniZ {
    int get() { return 2; }
}
