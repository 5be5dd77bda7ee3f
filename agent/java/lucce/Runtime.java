package lucce;

/**
 * The lucce runtime: the probes that instrumented code calls (see agent/src/rewrite/mod.rs for
 * the exact bytecode). This class is compiled by agent/build.rs, embedded in liblucce_agent.so and
 * defined into the bootstrap class loader by the agent at VMInit. It is never instrumented itself.
 *
 * In counting mode the probes count method entries per method id and executions per call or
 * allocation site id, in a counter region that the Rust side owns (mmap'ed, lazily committed); in
 * record mode they compute each frame's context (see {@link #enter}) from tables in that region
 * and in the agent's memory. The region's address comes from ONE native call, in the static
 * initializer; after that the common paths are plain arithmetic plus Unsafe accesses, no JNI.
 *
 * Rules that keep this safe inside a JVM whose every other class calls these probes:
 * - The probes call nothing but Thread.currentThread() (native), the native accessors of
 *   sun.misc.Unsafe (which the agent never instruments) and this class's natives; calling any
 *   instrumented method from a probe would recurse forever.
 * - agent/build.rs also compiles a second form of this class, with jdk.internal.misc.Unsafe (its
 *   accessors are natives) in place of sun.misc.Unsafe, which the agent defines when the boot
 *   layer lacks jdk.unsupported, sun.misc.Unsafe's module (`java -m` of a module graph that does
 *   not require it): this source names the class only as `sun.misc.Unsafe`, and calls nothing
 *   that jdk.internal.misc.Unsafe does not have.
 * - The static initializer itself runs instrumented JDK code, which calls the probes again on the
 *   initializing thread before the statics are set. Every probe checks its id against a limit that
 *   is 0 until initialization has finished (the limits are assigned last), so those calls do
 *   nothing and never touch memory. Ids beyond the reserved region are ignored the same way.
 * - Initialization never throws: any failure leaves the limits at 0 and the probes as no-ops.
 */
public final class Runtime implements Thread.UncaughtExceptionHandler {
    /** Region header, written by the agent (agent/src/runtime.rs): sixteen longs. */
    private static final int HEADER_BYTES = 128;

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

    // Record mode: the steady-state path reads the encoder's site cache and the thread's slot
    // (both in memory the agent owns; layouts in encoder/src/cache.rs and agent/src/recorder.rs).
    /** The encoder's memo: base address, bucket index mask (0 = not usable). */
    private static final long CACHE, CACHE_MASK;
    /** Bytes per bucket (aligned): a sequence word, then three ways of {site << 32 | callee + 1, v_in, add, v_out}. */
    private static final long CACHE_SLOT = 128L;
    /** Offset of the end of a bucket's ways. */
    private static final long WAYS_END = 8L + 3L * 32L;
    /** The encoder's anchor table (same layout, bucket of ⟨site, callee, c⟩): base, mask. */
    private static final long ANCHORS, ANCHOR_MASK;
    /** callIds stay below this (the overflow rule); results at or above it take the slow path. */
    private static final long LIMIT;
    /** Per-thread slots: base address, index mask (home slot = tid & mask), 64 bytes each. */
    private static final long SLOTS, SLOT_MASK;
    /**
     * A slot no thread owns: {@link #home} answers it to a thread that does not own its home
     * slot, so that the call probes write somewhere without a branch to a call (see
     * {@link #home}); nothing reads it. The slot after the home slots, or with
     * {@link #EXCLUSIVE} slot 0, the home of tid 0 (a thread whose constructor is running).
     */
    private static final long SINK;
    /**
     * Record mode with a home slot for every tid below 2^32 (thread_slots=2^32, the default):
     * tids are unique, so every thread with a tid owns its home slot from its first probe to its
     * end and {@link #home} needs no ownership check (the agent stops recording long before a
     * tid reaches 2^32; agent/src/recorder.rs, EXCLUSIVE_TID_LIMIT).
     */
    private static final boolean EXCLUSIVE;
    /** Offset of Thread.tid, or -1 (then every probe asks the agent for the slot). */
    private static final long TID;
    /** sample=N (0 = off). */
    private static final int SAMPLE;
    /** Record mode, memo readable: {@link #enter} may take {@link #memo}. */
    private static final boolean FAST;
    /**
     * Record mode: 64 minus the index bits of the threads' answer caches, or 0 when there are
     * none. A thread's cache (its slot's word at offset 48; 0 = none) holds entries {key =
     * site << 32 | callee + 1 (0 = empty), caller version, add, callee version}: answers of the
     * memo that this thread took, by the whole caller version (see {@link #memo}).
     */
    private static final int TC_SHIFT;

    static {
        sun.misc.Unsafe u = null;
        long base = 0L, methods = 0L, sites = 0L;
        boolean atomic = true;
        boolean record = false;
        long cache = 0L, cacheMask = 0L, anchors = 0L, anchorMask = -1L, limit = 0L, slots = 0L, slotMask = 0L, tid = -1L;
        int sample = 0, tcBits = 0;
        try {
            long b = counters();
            if (b != 0L) {
                u = sun.misc.Unsafe.getUnsafe();
                methods = u.getLong(null, b);
                sites = u.getLong(null, b + 8L);
                atomic = u.getLong(null, b + 16L) != 0L;
                record = u.getLong(null, b + 24L) != 0L;
                cache = u.getLong(null, b + 32L);
                cacheMask = u.getLong(null, b + 40L) - 1L;
                limit = u.getLong(null, b + 48L);
                slots = u.getLong(null, b + 56L);
                slotMask = u.getLong(null, b + 64L);
                sample = (int) u.getLong(null, b + 72L);
                anchors = u.getLong(null, b + 88L);
                anchorMask = u.getLong(null, b + 96L) - 1L;
                tcBits = (int) u.getLong(null, b + 104L);
                if (u.getLong(null, b + 80L) != CACHE_SLOT) {
                    cacheMask = -1L; // another layout: every entry takes the agent's path
                    anchorMask = -1L;
                }
                base = b;
                if (record) {
                    try {
                        tid = u.objectFieldOffset(Thread.class.getDeclaredField("tid"));
                    } catch (Throwable t) {
                        tid = -1L;
                    }
                }
            }
        } catch (Throwable t) {
            u = null;
            failed(t);
        }
        if (u == null || methods < 0L || sites < 0L) {
            methods = 0L;
            sites = 0L;
        }
        U = u;
        ATOMIC = atomic;
        RECORD = record;
        CACHE = cache;
        CACHE_MASK = cacheMask;
        ANCHORS = anchors;
        ANCHOR_MASK = anchorMask;
        LIMIT = limit;
        SLOTS = slots;
        SLOT_MASK = slotMask;
        boolean fast = record && cacheMask >= 0L && tid >= 0L;
        boolean exclusive = fast && slotMask == 0xFFFFFFFFL;
        SINK = exclusive ? slots : slots + ((slotMask + 1L) << 6);
        TID = tid;
        SAMPLE = sample;
        FAST = fast;
        ENTRIES = base + HEADER_BYTES;
        SITES = base + HEADER_BYTES + (methods << 3);
        TC_SHIFT = fast && tcBits > 0 && tcBits < 32 ? 64 - tcBits : 0;
        EXCLUSIVE = exclusive;
        // Last: from here on the probes are live.
        SITE_LIMIT = sites;
        METHOD_LIMIT = methods;
    }

    private Runtime() {}

    /** Address of the counter region (0 when unavailable); implemented in the agent library. */
    private static native long counters();

    /** Initialization failed with `t`: the agent says so (every probe stays a no-op). */
    private static void failed(Throwable t) {
        try {
            failed0(String.valueOf(t));
        } catch (Throwable ignored) {
            // Nothing else to do: the probes stay no-ops either way.
        }
    }

    /** Implemented in the agent library, like {@link #counters}. */
    private static native void failed0(String why);

    /**
     * This thread's slot: its home slot when the thread owns it, else what the agent says (a
     * private slot, and the agent claims the home slot on a thread's first probe).
     * Slot layout: tid, pending site (int), pending valid (int), pending c, pending v, version of
     * the last entry, sample countdown (int), the agent's busy flag (int, at 44), then at 48 the
     * address of the thread's answer cache
     * (see {@link #memo}).
     */
    private static long slot() {
        if (TID < 0L) {
            return attach0(-1L);
        }
        long tid = U.getLong(Thread.currentThread(), TID);
        long s = SLOTS + ((tid & SLOT_MASK) << 6);
        return U.getLong(null, s) == tid ? s : attach0(tid);
    }

    /**
     * This thread's home slot if it owns it, else {@link #SINK} (only when TID >= 0). With
     * {@link #EXCLUSIVE} slots, its home slot without a check (the sink for tid 0).
     *
     * No call on any path: the probes are inlined into every compiled method, and a call that a
     * probe may take (as {@link #slot} takes attach0 on a thread's first probe, so the shared
     * branch profile says "taken") costs C2 a call site with its spills and debug info at every
     * call of every compiled method. A thread whose home slot is not its own (its first probe,
     * or another live thread has the same home) so writes its call records into the sink; its
     * entries then find no record in the slot {@link #slot} gives them and the agent walks the
     * stack instead — slower for those threads, exact for all.
     */
    private static long home() {
        long tid = U.getLong(Thread.currentThread(), TID);
        long s = SLOTS + ((tid & SLOT_MASK) << 6);
        if (EXCLUSIVE) {
            return s;
        }
        return U.getLong(null, s) == tid ? s : SINK;
    }

    /**
     * Method entry: returns the callId of this frame (record mode), or counts.
     *
     * Only the common case is in {@link #memo} — a pending record whose ⟨site, callee, caller
     * version⟩ the encoder's memo answers, not a sample, no segment. `enter` is small, so that C2
     * inlines it into every caller, and makes one call; `memo` is not inlined: inlined everywhere,
     * its loop made C2 compile the instrumented program about 40% slower (FOP: C2 time 28 s
     * against 21 s with -XX:+CITime), which costs a short run more than the call does.
     */
    public static long enter(int methodId) {
        if (FAST) {
            return memo(home(), methodId);
        }
        // Counting mode does not go through enterRest: that is too big for C2 to inline, and a
        // call per entry cost ant's counting run half its time.
        return RECORD ? enterRest(methodId) : countEntry(methodId);
    }

    private static long countEntry(int methodId) {
        count(ENTRIES, METHOD_LIMIT, methodId);
        return 0L;
    }

    /**
     * Entry of a leaf, a method without site probes (no invoke, no allocation): returns its
     * method id, which the leaf keeps in its one probe local for walks. Nothing below a leaf reads
     * its context except a walk (an upcall the JVM makes from it: class loading,
     * {@code <clinit>}), which computes it then from the leaf's caller (agent/src/recorder.rs,
     * walk). So in full encoding the entry only drops the caller's pending record, which no later
     * entry may take as its own (written into the sink when the thread does not own its home
     * slot: no branch). With sampling the same for every entry that is not a sample; a sample is
     * an entry like any other. Counting mode counts it.
     */
    public static int leaf(int methodId) {
        if (!RECORD) {
            countEntry(methodId);
            return methodId;
        }
        if (FAST && SAMPLE == 0) {
            U.putInt(null, home() + 12L, 0);
            return methodId;
        }
        if (SAMPLE != 0 && TID >= 0L) {
            long s = home();
            int n = U.getInt(null, s + 40L) + 1;
            if (s != SINK && n < SAMPLE) {
                U.putInt(null, s + 40L, n);
                U.putInt(null, s + 12L, 0);
                return methodId;
            }
        }
        enterRest(methodId);
        return methodId;
    }

    /**
     * The memo's answer for the pending record in slot `s` and callee `methodId`: consumes the
     * record and returns the callId. A miss goes straight to the agent; anything else (no record,
     * a writer inside, past the limit, an entry that is a sample) is {@link #enterRest}, which
     * repeats the lookup. With sampling, an answered entry counts down to the next sample.
     *
     * The thread's answer cache comes first: a small hashed table, private to the thread, of the
     * answers it took from the memo, keyed like the memo (below) so that it answers anchored
     * callers too. The memo's buckets are scattered over megabytes shared by all threads, each
     * read under a sequence check; the thread's table stays in the core's cache and needs no
     * check, since only its thread writes or reads it (a thread that ends hands its table back
     * to the agent, which gives it to the next thread). Exact like the memo: an answer for
     * ⟨site, callee, caller version⟩ never changes (encoder/src/cache.rs), so a copy is as good
     * as the original.
     *
     * The memo is keyed by the caller's graph version g (the version, or an anchored one's low
     * half): an answer with v_out = g is a stay, which keeps the caller's own version, anchored
     * or not; any other answer is a link, which holds only for a caller whose version is g
     * itself. An anchored caller's own links are in the memo under its whole version
     * ({@link #anchoredLink}; encoder/src/encoder.rs, "Versions", and enter_cached). The thread's
     * table keeps both the same way: so every segment of a recursion (each has an anchored
     * version of its own, with the same g) takes its stays from the one entry of g. Keyed by the
     * whole version, the stays of antlr4's recursions missed the table at almost every entry.
     */
    @jdk.internal.vm.annotation.DontInline
    private static long memo(long s, int methodId) {
        if (s == SINK || U.getInt(null, s + 12L) == 0) {
            return enterRest(methodId);
        }
        int n = 0;
        if (SAMPLE != 0) {
            n = U.getInt(null, s + 40L) + 1;
            if (n >= SAMPLE) {
                return enterRest(methodId); // the agent records it
            }
        }
        long tc = TC_SHIFT != 0 ? U.getLong(null, s + 48L) : 0L;
        if (tc != 0L) {
            long v = U.getLong(null, s + 24L);
            long g = graphVersion(v);
            long key = siteKey(s, methodId);
            long t = tc + entry(key, g);
            if (U.getLong(null, t) == key && U.getLong(null, t + 8L) == g) {
                long c = U.getLong(null, s + 16L);
                long nc = c + U.getLong(null, t + 16L);
                long vOut = U.getLong(null, t + 24L);
                // The callee's version if the answer holds for this caller: a stay (v_out = g)
                // keeps v; a link's v_out (never anchored) holds only for a caller that is not
                // anchored either, i.e. when r and v have the same sign.
                long r = vOut == g ? v : vOut;
                // nc < c: the sum wrapped (then, as at LIMIT, enterRest finds the anchor).
                if ((r ^ v) >= 0L && nc >= c && nc < LIMIT) {
                    return answer(s, n, nc, r);
                }
            }
        }
        return memoMiss(s, n, tc, methodId);
    }

    /**
     * {@link #memo} past the thread's table (`tc`, 0 when none): an anchored caller's own link in
     * the table, then the memo. Not inlined, so that memo's hit path keeps few values live: as
     * one method, C2 spilled registers before the table's lookup, on every entry.
     */
    @jdk.internal.vm.annotation.DontInline
    private static long memoMiss(long s, int n, long tc, int methodId) {
        if (busy(s)) {
            return 0L;
        }
        long v = U.getLong(null, s + 24L);
        long c = U.getLong(null, s + 16L);
        long g = graphVersion(v);
        long key = siteKey(s, methodId);
        if (v < 0L && tc != 0L) {
            long t = tc + entry(key, v);
            if (U.getLong(null, t) == key && U.getLong(null, t + 8L) == v) {
                long nc = c + U.getLong(null, t + 16L);
                if (nc >= c && nc < LIMIT) {
                    return answer(s, n, nc, U.getLong(null, t + 24L));
                }
            }
        }
        long e = bucket(CACHE, CACHE_MASK, key, g);
        long seq = U.getLongVolatile(null, e);
        long w = way(e, key, g);
        if (w != 0L) {
            long add = U.getLong(null, w + 16L);
            long nc = c + add;
            long vOut = U.getLong(null, w + 24L);
            U.loadFence();
            if ((seq & 1L) != 0L || U.getLong(null, e) != seq || nc < c || nc >= LIMIT) {
                return enterRest(methodId);
            }
            remember(tc, key, g, add, vOut);
            long r = vOut == g ? v : vOut;
            if ((r ^ v) >= 0L) {
                return answer(s, n, nc, r);
            }
        }
        // A miss goes to the agent, except an anchored caller's: its own links are kept apart.
        return v < 0L ? anchoredLink(s, n, tc, key, c, v, methodId) : enter0(methodId, s);
    }

    /** The memo's key of slot `s`'s pending site and callee `methodId`. */
    private static long siteKey(long s, int methodId) {
        return (U.getInt(null, s + 8L) & 0xFFFFFFFFL) << 32 | ((methodId & 0xFFFFFFFFL) + 1L);
    }

    /**
     * The graph version of caller version `v`: `v`, or an anchored version's low half (the anchor
     * bit is the sign bit; encoder/src/ids.rs, ANCHOR_BIT).
     */
    private static long graphVersion(long v) {
        return v & ~((v >> 63) << 32);
    }

    /**
     * {@link #memoMiss} for an anchored caller ⟨c, v⟩ whose graph version answered no stay: the
     * link the memo keeps for its whole version, if any.
     */
    private static long anchoredLink(long s, int n, long tc, long key, long c, long v, int methodId) {
        long e = bucket(CACHE, CACHE_MASK, key, v);
        long seq = U.getLongVolatile(null, e);
        long w = way(e, key, v);
        if (w == 0L) {
            return enter0(methodId, s);
        }
        long add = U.getLong(null, w + 16L);
        long nc = c + add;
        long vOut = U.getLong(null, w + 24L);
        U.loadFence();
        if ((seq & 1L) == 0L && U.getLong(null, e) == seq && nc >= c && nc < LIMIT) {
            remember(tc, key, v, add, vOut);
            return answer(s, n, nc, vOut);
        }
        return enterRest(methodId);
    }

    /** Offset of the entry of ⟨key, caller version x⟩ in a thread's answer table. */
    private static long entry(long key, long x) {
        return (((key ^ ((x << 29) | (x >>> 35))) * 0x9E3779B97F4A7C15L) >>> TC_SHIFT) << 5;
    }

    /** Consumes slot `s`'s pending record for an entry answered ⟨nc, vOut⟩; `n`: the sample count. */
    private static long answer(long s, int n, long nc, long vOut) {
        U.putInt(null, s + 12L, 0);
        U.putLong(null, s + 32L, vOut);
        if (SAMPLE != 0) {
            U.putInt(null, s + 40L, n);
        }
        return nc;
    }

    /**
     * Copies the memo's entry ⟨add, v_out⟩ for ⟨key, version x⟩ (its key version: g, or an
     * anchored caller's whole version) into its entry in the thread's table `tc` (none when 0).
     * The key goes last, so that an entry left half written (an exception thrown into the
     * thread in between) is an empty one.
     */
    private static void remember(long tc, long key, long x, long add, long vOut) {
        if (tc != 0L) {
            long t = tc + entry(key, x);
            U.putLong(null, t, 0L);
            U.putLong(null, t + 8L, x);
            U.putLong(null, t + 16L, add);
            U.putLong(null, t + 24L, vOut);
            U.putLong(null, t, key);
        }
    }

    /** The way of `key` with caller version `v` in the memo's bucket at `e`, or 0. */
    private static long way(long e, long key, long v) {
        for (long w = e + 8L; w < e + WAYS_END; w += 32L) {
            if (U.getLong(null, w) == key && U.getLong(null, w + 8L) == v) {
                return w;
            }
        }
        return 0L;
    }

    /**
     * Address of the bucket of `key` mixed with `x` in the table at `base`: encoder/src/cache.rs,
     * bucket_index. (No Long.rotateLeft: every JDK method is instrumented, so a probe that called
     * one would recurse.)
     */
    private static long bucket(long base, long mask, long key, long x) {
        return base + ((((key ^ ((x << 29) | (x >>> 35))) * 0x9E3779B97F4A7C15L) >>> 32) & mask) * CACHE_SLOT;
    }

    /** The rest of {@link #enter} in record mode: sampling, segments (anchors), misses. */
    private static long enterRest(int methodId) {
        long s = slot();
        if (busy(s)) {
            return 0L;
        }
        if (s != 0L && U.getInt(null, s + 12L) != 0) {
            if (CACHE_MASK >= 0L && (SAMPLE == 0 || U.getInt(null, s + 40L) + 1 < SAMPLE)) {
                long c = U.getLong(null, s + 16L), v = U.getLong(null, s + 24L);
                long g = graphVersion(v);
                long key = siteKey(s, methodId);
                long e = bucket(CACHE, CACHE_MASK, key, g);
                long seq = U.getLongVolatile(null, e);
                long w = way(e, key, g);
                long add = w != 0L ? U.getLong(null, w + 16L) : -1L;
                long vOut = w != 0L ? U.getLong(null, w + 24L) : 0L;
                U.loadFence();
                if ((seq & 1L) == 0L && add >= 0L && U.getLong(null, e) == seq) {
                    long nc = c + add;
                    if (nc < c || nc >= LIMIT) {
                        // Past the limit: the anchor this caller context got before, if any
                        // (its key is the whole caller context, so any answer may lead there).
                        vOut = anchored(key, c, v);
                        nc = 0L;
                    } else if (vOut == g) {
                        vOut = v; // a stay
                    } else if (v != g) {
                        vOut = 0L; // a link, and not this anchored caller's
                    }
                    if (vOut != 0L) {
                        U.putInt(null, s + 12L, 0);
                        U.putLong(null, s + 32L, vOut);
                        if (SAMPLE != 0) {
                            U.putInt(null, s + 40L, U.getInt(null, s + 40L) + 1);
                        }
                        return nc;
                    }
                }
            }
        }
        return enter0(methodId, s);
    }

    /**
     * Whether the agent's Java helper runs on the thread of slot `s` (0: none known), which the
     * slot says at 44 (agent/src/recorder.rs, Slot::hush): the agent would answer the helper's
     * entries 0, so the probes do, before the memo's lookups and the call into the agent.
     */
    private static boolean busy(long s) {
        return s != 0L && U.getInt(null, s + 44L) != 0;
    }

    /**
     * The anchored version for ⟨site, callee⟩ = `key` entered from ⟨c, v⟩, or 0 when not cached
     * (encoder/src/cache.rs, lookup_anchor: way {key, c, v, anchored} in the bucket of
     * anchor_hash_in(c, v) = c ^ (v + (v >>> 32))).
     */
    private static long anchored(long key, long c, long v) {
        if (ANCHOR_MASK < 0L) {
            return 0L;
        }
        long e = bucket(ANCHORS, ANCHOR_MASK, key, c ^ (v + (v >>> 32)));
        long seq = U.getLongVolatile(null, e);
        long found = 0L;
        for (long w = e + 8L; w < e + WAYS_END; w += 32L) {
            if (U.getLong(null, w) == key && U.getLong(null, w + 8L) == c && U.getLong(null, w + 16L) == v) {
                found = U.getLong(null, w + 24L);
                break;
            }
        }
        U.loadFence();
        return (seq & 1L) == 0L && U.getLong(null, e) == seq ? found : 0L;
    }

    /**
     * The graph version of the context `enter` just returned (record mode). With
     * {@link #EXCLUSIVE} slots no branch: a thread of tid 0 reads the sink's, which is -1,
     * "unknown" (agent/src/recorder.rs, UNKNOWN_VERSION), and walks compute its frames' contexts.
     */
    public static long version() {
        if (EXCLUSIVE) {
            return U.getLong(null, home() + 32L);
        }
        if (RECORD) {
            long s = TID >= 0L ? home() : SINK;
            if (s == SINK) {
                s = slot(); // a private slot (never taken in most runs: C2 makes it a trap)
            }
            return s != 0L ? U.getLong(null, s + 32L) : 0L;
        }
        return 0L;
    }

    /** Before an invoke instruction: the caller's site and context, for the callee's entry. */
    public static void call(int siteId, long ctx, long ver) {
        if (RECORD) {
            pend(TID >= 0L ? home() : slot(), siteId, ctx, ver);
            return;
        }
        count(SITES, SITE_LIMIT, siteId);
    }

    /**
     * Writes the pending record into slot `s` (none when 0). The site and the valid flag are one
     * store: on a little-endian machine (the agent builds for no other) the low half lands at
     * s + 8.
     */
    private static void pend(long s, int siteId, long ctx, long ver) {
        if (s != 0L) {
            U.putLong(null, s + 16L, ctx);
            U.putLong(null, s + 24L, ver);
            U.putLong(null, s + 8L, 1L << 32 | (siteId & 0xFFFFFFFFL));
        }
    }

    /**
     * After an invoke of a method the JIT may replace by an intrinsic (agent/src/rewrite/intrinsics.rs),
     * and with classes left out after every invoke: drops the pending record of that call, which
     * no entry probe took if the call ran as an intrinsic or in left-out code that entered
     * nothing instrumented. Left valid, it would be taken by the next entry of the same method
     * from code with no call probe (an excluded class, a native method), and trusted, since the
     * pair ⟨call site, method⟩ is a real one. Written where {@link #call} wrote it (the sink when
     * the thread does not own its home slot: nothing reads that).
     */
    public static void drop() {
        if (RECORD) {
            long s = TID >= 0L ? home() : slot();
            if (s != 0L) {
                U.putInt(null, s + 12L, 0);
            }
        }
    }

    /** After an allocation (recording allocations is future work: record mode ignores it). */
    public static void alloc(int siteId, long ctx, long ver) {
        if (!RECORD) {
            count(SITES, SITE_LIMIT, siteId);
        }
    }

    /**
     * Called at the entry of {@code JavaLangAccess.defineClass} (agent/src/rewrite/probes.rs,
     * DEFINE_HOOK) with the bytes of a class about to be defined: a hidden class (flags has
     * HIDDEN_CLASS, 0x2), which no ClassFileLoadHook sees, comes back instrumented, in both modes.
     * Anything else, and any failure, gives the bytes back as they were.
     */
    public static byte[] hidden(byte[] b, int flags) {
        if (METHOD_LIMIT != 0L && (flags & 2) != 0 && b != null) {
            byte[] n = hidden0(b);
            if (n != null) {
                return n;
            }
        }
        return b;
    }

    /** The rewritten bytes of hidden class `b`, or null to keep them. */
    private static native byte[] hidden0(byte[] b);

    /** The slow path of an entry: the agent reads and consumes the pending record in `slot`. */
    private static native long enter0(int methodId, long slot);

    /** The slot of this thread (tid, or -1 when unknown); 0 while the agent is busy on it. */
    private static native long attach0(long tid);

    /**
     * The current stack exactly as Throwable shows it, one frame per line:
     * class TAB method TAB file TAB line, where file is empty when the JVM has none and is '='
     * and the name otherwise (a class whose SourceFile attribute names "" has the name "").
     * Called by the agent (verify mode) with the probes of this thread switched off.
     */
    static String truth() {
        StackTraceElement[] st = new Throwable().getStackTrace();
        StringBuilder sb = new StringBuilder(st.length * 64);
        // Throwable keeps at most MaxJavaStackTraceDepth frames (1024 by default); a walk finds
        // whether there are more, so a cut trace is flagged and compared as the top of the stack
        // only. It stops one frame past the cut: counting them all cost a deep stack (thousands
        // of frames) about a millisecond per trace.
        if (st.length >= 1024 && StackWalker.getInstance(StackWalker.Option.SHOW_REFLECT_FRAMES)
                .walk(frames -> frames.skip(st.length).findFirst().isPresent())) {
            sb.append("capped\n");
        }
        for (StackTraceElement e : st) {
            String f = e.getFileName();
            sb.append(e.getClassName()).append('\t').append(e.getMethodName()).append('\t');
            if (f != null) {
                sb.append('=').append(f);
            }
            sb.append('\t').append(e.getLineNumber()).append('\n');
        }
        return sb.toString();
    }

    /**
     * The handler of a JDK thread the agent retires (agent/src/ref_threads.rs): its only
     * exception is the agent's ThreadDeath, which the program must not see.
     */
    static Thread.UncaughtExceptionHandler retired() {
        return new Runtime();
    }

    @Override
    public void uncaughtException(Thread t, Throwable e) {}

    /** The current thread's name (called by the agent with this thread's probes off). */
    static String threadName() {
        return Thread.currentThread().getName();
    }

    /** Counting mode: one more for counter `id` of the array at `base` (ids past `limit` ignored). */
    private static void count(long base, long limit, int id) {
        long i = id & 0xFFFFFFFFL;
        if (i < limit) {
            bump(base + (i << 3));
        }
    }

    private static void bump(long address) {
        if (ATOMIC) {
            U.getAndAddLong(null, address, 1L);
        } else {
            U.putLong(null, address, U.getLong(null, address) + 1L);
        }
    }
}
