package lucce;

/**
 * Compile-time stub of the lucce API. Compile against it, never put it on the class path at run
 * time: with the agent loaded the real class exists (and records); without it, calls fail with
 * NoClassDefFoundError, so guard them if your program must also run without lucce.
 */
public final class Lucce {
    private Lucce() {}

    /** Records an event labelled {@code label} with the exact calling context of this call. */
    public static void mark(String label) {}

    /** A token for the calling context of this call (line included); decode with `lucce decode STORE @TOKEN`. */
    public static long context() {
        return 0L;
    }
}
