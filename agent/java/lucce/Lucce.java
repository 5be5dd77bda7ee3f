package lucce;

/**
 * The lucce API for programs and tools. This class exists only when the JVM runs with the lucce
 * agent (it is defined into the bootstrap class loader at startup); compile against the stub in
 * the README and do not ship it. Both methods are implemented in the agent library.
 */
public final class Lucce {
    private Lucce() {}

    /** Records an event labelled {@code label} with the exact calling context of this call. */
    public static native void mark(String label);

    /**
     * A token for the calling context of this call, line included, to store with a tool's own
     * data and decode later with {@code lucce decode STORE TOKEN}. The same method, line and
     * encoded context give the same token; the same context reached again at a later graph
     * version may give another, which decodes to the same trace. Tokens are positive and valid
     * only for the store of this run. Returns 0 when the agent no longer records (the JVM is
     * shutting down) or cannot place the calling frame.
     */
    public static native long context();
}
