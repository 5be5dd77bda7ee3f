package lucce;

/**
 * The lucce runtime: the probes that instrumented code calls (see agent/src/rewrite/mod.rs for
 * the exact bytecode). This class is compiled by agent/build.rs, embedded in liblucce_agent.so and
 * defined into the bootstrap class loader by the agent at VMInit. It is never instrumented itself.
 *
 * For now the probes only count: method entries per method id and executions per call or
 * allocation site id, in a counter region that the Rust side owns (mmap'ed, lazily committed). Its
 * address comes from ONE native call, in the static initializer; after that every probe is plain
 * arithmetic plus an Unsafe access, no JNI.
 *
 * Rules that keep this safe inside a JVM whose every other class calls these probes:
 * - The probes call nothing but sun.misc.Unsafe / jdk.internal.misc.Unsafe, which the agent never
 *   instruments; calling any instrumented method from a probe would recurse forever.
 * - The static initializer itself runs instrumented JDK code, which calls the probes again on the
 *   initializing thread before the statics are set. Every probe checks its id against a limit that
 *   is 0 until initialization has finished (the limits are assigned last), so those calls do
 *   nothing and never touch memory. Ids beyond the reserved region are ignored the same way.
 * - Initialization never throws: any failure leaves the limits at 0 and the probes as no-ops.
 */
public final class Runtime {
    /** Region header layout, written by the agent (agent/src/runtime.rs): three longs. */
    private static final int HEADER_BYTES = 64;

    private static final sun.misc.Unsafe U;
    private static final boolean ATOMIC;
    /** Record mode: the probes hand over to the encoder in the agent library (natives). */
    private static final boolean RECORD;
    /** Address of the method-entry counters (one long per method id). */
    private static final long ENTRIES;
    /** Address of the site counters (one long per call or allocation site id). */
    private static final long SITES;
    /** Number of method counters; 0 until initialization has completed. */
    private static final long METHOD_LIMIT;
    /** Number of site counters; 0 until initialization has completed. */
    private static final long SITE_LIMIT;

    static {
        sun.misc.Unsafe u = null;
        long base = 0L, methods = 0L, sites = 0L;
        boolean atomic = true;
        boolean record = false;
        try {
            long b = counters();
            if (b != 0L) {
                u = sun.misc.Unsafe.getUnsafe();
                methods = u.getLong(b);
                sites = u.getLong(b + 8L);
                atomic = u.getLong(b + 16L) != 0L;
                record = u.getLong(b + 24L) != 0L;
                base = b;
            }
        } catch (Throwable t) {
            u = null;
        }
        if (u == null || methods < 0L || sites < 0L) {
            methods = 0L;
            sites = 0L;
        }
        U = u;
        ATOMIC = atomic;
        RECORD = record;
        ENTRIES = base + HEADER_BYTES;
        SITES = base + HEADER_BYTES + (methods << 3);
        // Last: from here on the probes are live.
        SITE_LIMIT = sites;
        METHOD_LIMIT = methods;
    }

    private Runtime() {}

    /** Address of the counter region (0 when unavailable); implemented in the agent library. */
    private static native long counters();

    /** Method entry: returns the callId of this frame (record mode), or counts. */
    public static long enter(int methodId) {
        if (RECORD) {
            return enter0(methodId);
        }
        long i = methodId & 0xFFFFFFFFL;
        if (i < METHOD_LIMIT) {
            bump(ENTRIES + (i << 3));
        }
        return 0L;
    }

    /** The graph version of the context `enter` just returned (record mode). */
    public static long version() {
        return RECORD ? version0() : 0L;
    }

    /** Before an invoke instruction: the caller's site and context, for the callee's entry. */
    public static void call(int siteId, long ctx, long ver) {
        if (RECORD) {
            call0(siteId, ctx, ver);
            return;
        }
        long i = siteId & 0xFFFFFFFFL;
        if (i < SITE_LIMIT) {
            bump(SITES + (i << 3));
        }
    }

    /** After an allocation (recording allocations is future work: record mode ignores it). */
    public static void alloc(int siteId, long ctx, long ver) {
        if (RECORD) {
            return;
        }
        long i = siteId & 0xFFFFFFFFL;
        if (i < SITE_LIMIT) {
            bump(SITES + (i << 3));
        }
    }

    private static native long enter0(int methodId);

    private static native long version0();

    private static native void call0(int siteId, long ctx, long ver);

    /**
     * The current stack exactly as Throwable shows it, one frame per line:
     * class TAB method TAB file TAB line. Called by the agent (verify mode) with the probes of this
     * thread switched off.
     */
    static String truth() {
        StackTraceElement[] st = new Throwable().getStackTrace();
        StringBuilder sb = new StringBuilder(st.length * 64);
        for (StackTraceElement e : st) {
            String f = e.getFileName();
            sb.append(e.getClassName()).append('\t').append(e.getMethodName()).append('\t')
              .append(f == null ? "" : f).append('\t').append(e.getLineNumber()).append('\n');
        }
        return sb.toString();
    }

    /** The current thread's name (called by the agent with this thread's probes off). */
    static String threadName() {
        return Thread.currentThread().getName();
    }

    private static void bump(long address) {
        if (ATOMIC) {
            U.getAndAddLong(null, address, 1L);
        } else {
            U.putLong(address, U.getLong(address) + 1L);
        }
    }
}
