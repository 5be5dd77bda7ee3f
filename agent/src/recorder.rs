//! Record mode (`out=DIR`): the encoder and the store inside the JVM.
//!
//! The probes of `lucce/Runtime` (agent/java/lucce/Runtime.java): `call` before an invoke leaves
//! the caller's ⟨site, c, v⟩ in the thread's *pending* record (its slot); `enter` at the callee's
//! first instruction takes it and answers from the encoder's lock-free memo in steady state, and
//! calls the native `enter0` below, which runs Algorithm 1, otherwise; `version` hands back the
//! version of that result.
//!
//! # Which frame called me: the pending record and the stack walk
//! The pending record is trusted without a look at the stack only for a ⟨site, callee⟩ pair the
//! encoder already knows (its cache, or an existing edge). A pair is first admitted by a *stack
//! walk* (JVMTI GetStackTrace), the slow path, which also handles every entry without a usable
//! pending record: upcalls the JVM makes itself (class loading, `<clinit>`, finalizers, JNI
//! callbacks, reflection through native accessors), and thread starts. The walk goes down from
//! the callee past frames lucce cannot see (native methods, hidden classes not yet seen at an
//! entry, excluded or unrewritable methods) to the first instrumented frame F, reads F's context
//! from its two probe locals (GetLocalLong) and F's current bytecode index. If no frame lies
//! between the callee and F, F is at an invoke, the pending record is F's own and the callee
//! has the name and descriptor the invoke references, the edge uses the pending site (the
//! `return` of `Object.<init>` counts as an invoke of `Finalizer.register`, which the JVM calls
//! from there, and the rewriter puts a call probe before it, except in full encoding, where
//! `Object.<init>` is a leaf whose caller's record the walk takes from the slot); otherwise the
//! edge uses a *location site* for F's current instruction, whose line is the line HotSpot prints for it. A
//! walk that meets an obsolete method (a frame entered before its class was rewritten) stops
//! there: the context starts at the truncated root; a frame of a rewritten version that a
//! redefinition replaced is that version's ([`Replacements`]). A walk that runs out of frames:
//! the thread root.
//!
//! So a stale pending record (its call went to code lucce cannot see and returned, or threw)
//! never attaches an entry to a returned frame. A call the JIT replaces by an intrinsic runs no
//! entry probe, so the rewriter drops its record after it (rewrite/intrinsics.rs), and with
//! classes left out (`include=`/`exclude=`) after every call (`rewrite::ProbeChoice`). A pair
//! ⟨call site, callee⟩ is admitted through frames lucce cannot see only where no record can be
//! stale there (`caller_frame`): through hidden classes (adapters that call their target), and
//! through left-out methods when every call drops its record; never through a native method.
//! Otherwise ⟨stale site, callee⟩ is not known, the walk decides, and the walk only looks at
//! live frames. (Admitted with the call site through a native method, the same upcall made later
//! from another native, after that call site's record went stale, was trusted: a wrong trace on
//! jython. Through an excluded method without the drops, an entry from excluded code that
//! belonged to a frame further down, until stop 57: tests/live_scripts/LiveExcludedStale.java.)
//! An exception leaves the record of a call that threw before entering its method: a drop probe
//! starts every exception handler, those of left-out classes too (`rewrite::drop_at_handlers_with`).
//! A stale record can still be trusted only for a pair that is
//! also a real direct call, by an entry of that same method from code lucce cannot see that
//! belongs to a frame further down, before any probe runs: after the call threw and code without
//! those drops caught the exception (a native method, a left-out class loaded before VMInit),
//! or, with nothing left out, after the call site dispatched to a native override that entered
//! nothing (docs/agent.md, "Known limits"). The
//! upcalls the JVM makes while resolving an invoke (`loadClass`, `<clinit>`) are entered straight
//! from the invoke with its own record, but do not have the name the invoke references, so they
//! get a location site too: with the call site, a later stale record of that site was trusted
//! for a `loadClass` triggered by another instruction of the same frame (tests/live_jvm.rs,
//! `jni_callbacks`).
//!
//! # Events
//! `Lucce.mark`, `Lucce.context` and samples (`sample=N`) go into per-thread buffers that a
//! flusher thread hands to the store writer every 200 ms; thread end and VM death flush too.
//! With `verify=N` every Nth event of a thread also keeps the stack `Throwable` shows, taken by
//! calling `Runtime.truth()` with the thread's probes switched off.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::{Duration, Instant};

use lucce_encoder::{Context, Encoder, EncoderConfig, MethodId, MethodMeta, Refused, SiteId, SiteKind, SiteMeta};
use lucce_log_format::{EventKind, EventRecord, StoreWriter, TruthFrame, WriterHandle, WriterOptions, WriterReport};
use rustc_hash::FxHashMap;

use crate::diag;
use crate::jdk_leaves::JdkLeaves;
use crate::jvmti::{jclass, jint, jlong, jmethodID, jobject, jstring, signature_class, Error as JvmtiError, FrameInfo, Jni, JniEnv, Jvmti, NativeMethod, JVMTI_ERROR_INVALID_SLOT};
use crate::registry::{MethodRecord, Registry, SiteKindTag, SiteRecord};
use crate::rewrite::probes::EntryProbe;
use crate::rewrite::{is_invoke, ProbeChoice, OP_RETURN};

/// Events a thread buffers before handing them to the writer.
const BUFFER_EVENTS: usize = 1024;
/// Tokens a thread remembers before it starts over.
const THREAD_TOKENS: usize = 4096;
/// How often the flusher hands every thread's buffer to the writer.
const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// Frames fetched per GetStackTrace call of a walk (a walk usually stops within a few; the cost
/// of the call grows with the frames asked for).
const WALK_CHUNK: usize = 16;

/// What a walk passed over between a callee and its caller frame, the worst kind kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Between {
    Nothing,
    /// Only frames of hidden classes.
    HiddenClasses,
    /// Methods left out or left unrewritten (and maybe hidden classes).
    LeftOut,
    /// A native method.
    Native,
}

/// What a stack frame's method is to the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    /// Rewritten and entered through its entry probe: method id, slot of its CTX local.
    Instrumented { id: u32, ctx_slot: jint },
    /// A rewritten leaf (rewrite/probes.rs): it keeps no context, a walk computes it.
    Leaf { id: u32 },
    /// lucce's own classes (the probe and API natives on top of the stack).
    Lucce,
    /// Native methods: invisible to lucce, and where the JVM's own upcalls start.
    Native,
    /// Hidden classes: invisible to lucce (in traces; most of them are instrumented, those from
    /// before VMInit and from the CDS archive are not).
    HiddenClass,
    /// Methods of classes left out (`include=`/`exclude=`) or left unrewritten: invisible.
    LeftOut,
    /// Code from before the rewrite (replaced by it while this frame ran): nothing below is known.
    Obsolete,
    /// A version of a rewritten method that a redefinition replaced while this frame ran it: to a
    /// walk as `Instrumented` (a leaf's without a CTX slot), but the JVM's traces show the frame
    /// without its source file, so events above it are encoded anew ([`Replacements`]).
    Replaced { id: u32, ctx_slot: Option<jint> },
    /// A method of a wanted class that no walk has entered: a leaf (whose entries need not
    /// walk, see `Runtime.leaf`) if its probe local says so, else unknown (as `Obsolete`).
    Unlearned,
}

/// Redefinitions of classes this agent had rewritten (a debugger's HotSwap, a Java agent's
/// retransform). A frame that goes on running a replaced version of a method is in the JVM's
/// traces without its source file (HotSpot names the file only for frames of the class's current
/// version; the line is the old version's), while contexts computed when that version was
/// current show the file. So once a redefinition has begun, each thread looks at its whole stack
/// at its next event: without frames of replaced or soon-replaced versions it is clean until the
/// next redefinition; with replaced ones, each of its events is encoded anew from the lowest of
/// them up ([`Recorder::encode_anew`]), every replaced frame as its method's *twin*: a method id
/// with the same names and no source file.
#[derive(Default)]
struct Replacements {
    /// Redefinitions begun (0: none, and events take no look at the stack).
    epoch: AtomicU64,
    /// Ids of versions a redefinition is replacing, with a deadline. The load hook sees it begin;
    /// the JVM replaces the methods at its next safepoint, if it accepts the new class. Until the
    /// deadline a thread with frames of them is not clean.
    pending: Mutex<FxHashMap<u32, Instant>>,
    /// Method id → its twin.
    twins: Mutex<FxHashMap<u32, u32>>,
}

/// How long after the load hook saw a redefinition begin the JVM may still be about to replace
/// the methods (it does so at a safepoint right after; a JVM that takes longer to reach one
/// than this makes the events of that moment show the old file names).
const REPLACEMENT_SETTLES: Duration = Duration::from_secs(10);
/// Frames per GetStackTrace call when a thread looks at its whole stack.
const SCAN_CHUNK: usize = 256;

/// Frames below a walk's caller frame that its [`WalkMemo`] key covers at most.
const MEMO_DEPTH: usize = 256;
/// Contexts a thread's [`WalkMemo`] keeps (at most 2 KiB each).
const MEMO_ENTRIES: usize = 8;

/// The contexts this thread's walks read from caller frames' locals, by the frame's method and
/// what the stack holds below it: each frame's method (as a walk knows it) and bytecode index.
/// Threads that never walk to a frame's locals have none.
///
/// Reading a frame's context locals takes two JVMTI `GetLocalLong` calls, each a VM operation at
/// a safepoint (about 170 µs per walk); calls from code lucce leaves alone into instrumented
/// code each walk to the same caller frame (docs/agent.md, "Known limits"). A frame's context
/// decodes to the trace of the frames below it, which is what the key holds: a frame with the
/// same key has a context that decodes the same, so its callees' contexts do too (their version
/// may be another; both decode to one trace). Methods are keyed by their lucce ids, which a
/// redefinition changes (its replaced frames get jmethodIDs of their own: not kept); frames the
/// trace leaves out by their jmethodIDs.
struct WalkMemo {
    entries: Vec<(Vec<u64>, Context)>,
    /// The entry to replace next when full.
    next: usize,
}

impl WalkMemo {
    fn get(&self, key: &[u64]) -> Option<Context> {
        self.entries.iter().find(|(k, _)| k.as_slice() == key).map(|&(_, ctx)| ctx)
    }

    fn put(&mut self, key: Vec<u64>, ctx: Context) {
        if self.entries.len() < MEMO_ENTRIES {
            self.entries.push((key, ctx));
        } else {
            self.entries[self.next] = (key, ctx);
            self.next = (self.next + 1) % MEMO_ENTRIES;
        }
    }
}

/// Who called: the frame's site and context, or a virtual root.
#[derive(Debug, Clone, Copy)]
enum Caller {
    Frame { site: u32, ctx: Context },
    Thread,
    Truncated,
}

#[derive(Debug, Default)]
pub struct RecorderStats {
    pub events: AtomicU64,
    pub walks: AtomicU64,
    pub location_sites: AtomicU64,
    pub truncated: AtomicU64,
    /// Walks whose caller frame refused its context locals (truncated, counted in `truncated` too).
    pub unreadable: AtomicU64,
    pub errors: AtomicU64,
    pub tokens: AtomicU64,
    /// Events due a JVM trace (`verify=N`) stored without one: its Java helper threw (a
    /// StackOverflowError at the end of the thread's stack) or was not there yet.
    pub untraced: AtomicU64,
    /// Walks that found their caller frame's context in the thread's [`WalkMemo`].
    pub memo_hits: AtomicU64,
    /// Walks that read their caller frame's context locals through JVMTI.
    pub local_reads: AtomicU64,
}

type EventBuffer = Arc<Mutex<Vec<EventRecord>>>;
/// ⟨site, c, v⟩ → token, per thread.
type TokenCache = FxHashMap<(u32, u64, u64), u64>;

pub struct Recorder {
    jvmti: Jvmti,
    slots: Slots,
    answers: AnswerCaches,
    encoder: Encoder<WriterHandle>,
    handle: WriterHandle,
    writer: Mutex<Option<StoreWriter>>,
    pub out: PathBuf,
    sample: u64,
    verify: u64,
    /// The probes of record mode's rewrites ([`record_probes`]). With classes left out
    /// (`include=`/`exclude=`) a drop probe follows every call (`drop_after_calls`), so pairs
    /// entered through left-out code may be trusted (`caller_frame`).
    probes: ProbeChoice,
    /// What leaf callers may count on in the JDK's classes (none without `leaf_callers`, and
    /// with `leaf_callers=own`).
    jdk_leaves: Option<Arc<JdkLeaves>>,
    frames: RwLock<FxHashMap<usize, FrameKind>>,
    /// jmethodID → what each byte of its bytecode is, as [`OpKinds`] (walks look up the opcode
    /// under a frame; GetBytecodes copies and reconstitutes the whole method, so once per
    /// method: it was 2.7% of FOP's CPU time when done once per location).
    op_kinds: Mutex<FxHashMap<usize, OpKinds>>,
    /// ⟨method, location⟩ → location site.
    location_sites: Mutex<FxHashMap<(u32, i64), u32>>,
    /// method → the location site of its entry probe (sample events).
    entry_sites: Mutex<FxHashMap<u32, u32>>,
    /// ⟨method, line, c, v⟩ → token.
    tokens: Mutex<FxHashMap<(u32, i32, u64, u64), u64>>,
    /// Location site → ⟨method, line⟩.
    location_meta: Mutex<FxHashMap<u32, (u32, i32)>>,
    /// Sites that call the lucce API (the pending record is trusted by the API natives only
    /// when it comes from one: the first call of a site may resolve classes in between).
    api_sites: SiteBits,
    /// `class.name(desc)` of methods the rewriter left alone: invisible frames.
    unrewritten: RwLock<rustc_hash::FxHashSet<String>>,
    buffers: Mutex<Vec<Weak<Mutex<Vec<EventRecord>>>>>,
    /// Global reference to `lucce/Runtime` and its static helpers (set at VMInit).
    runtime: Mutex<Option<RuntimeHelpers>>,
    closed: AtomicBool,
    /// The store's failure has been reported ([`Recorder::tell_store_failure`]).
    failure_told: AtomicBool,
    pub stats: RecorderStats,
    replaced: Replacements,
}

#[derive(Clone, Copy)]
struct RuntimeHelpers {
    class: usize,
    truth: usize,
    thread_name: usize,
}

/// A set of site ids readable without a lock (one bit per site, 2 MiB of address space; only
/// the pages of words with a bit set become resident).
struct SiteBits(Box<[AtomicU64]>);

impl SiteBits {
    /// Sites beyond are never in the set (their API calls take the walk: slower, still exact).
    const SITES: usize = 1 << 24;

    fn new() -> SiteBits {
        const WORDS: usize = SiteBits::SITES / 64;
        let layout = std::alloc::Layout::array::<AtomicU64>(WORDS).expect("2 MiB fits a layout");
        // SAFETY: the layout's size is not zero. Zeroed memory is a valid AtomicU64 (the same
        // bit validity as u64), and a zeroed allocation leaves the pages untouched (calloc).
        let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<AtomicU64>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `p` holds WORDS initialized AtomicU64s, allocated by the global allocator with
        // the layout of [AtomicU64; WORDS], which is what the Box frees with.
        SiteBits(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, WORDS)) })
    }

    fn insert(&self, site: u32) {
        if let Some(w) = self.0.get(site as usize / 64) {
            w.fetch_or(1 << (site % 64), Ordering::Release);
        }
    }

    fn contains(&self, site: u32) -> bool {
        self.0.get(site as usize / 64).is_some_and(|w| w.load(Ordering::Acquire) & (1 << (site % 64)) != 0)
    }
}

/// One thread's slot, shared with the Java probes (agent/java/lucce/Runtime.java reads and writes
/// it with Unsafe at these offsets): the pending call-site record, the version of the last
/// entry, the sample countdown. Only its own thread touches a slot, except `tid`, which threads
/// claim with a compare-and-swap.
#[repr(C, align(64))]
struct Slot {
    /// Java thread id of the owner; 0 = free.
    tid: AtomicI64,
    site: AtomicU32,
    valid: AtomicU32,
    c: AtomicU64,
    v: AtomicU64,
    last_v: AtomicU64,
    sample: AtomicU32,
    /// Nonzero while a Java helper of the agent runs on the owner ([`Slot::hush`]; Runtime.java,
    /// `busy`).
    busy: AtomicU32,
    /// Address of the owner's answer cache ([`AnswerCaches`]), 0 = none; a home slot's only.
    answers: AtomicU64,
}

/// What [`Slot::hush`] changed in a slot, for [`Slot::restore`]: everything but the owner.
type SlotState = (u32, u32, u64, u64, u64, u32, u32, u64);

impl Slot {
    /// Turns the probes of the owner off while a Java helper of the agent runs on it, and
    /// returns the slot as it was. The helper's own Java code runs the probes, and the agent,
    /// busy, answers each entry 0: so the slot says the agent is busy (`busy`), the sample
    /// countdown is set far from the interval, and the thread's table is out of the way
    /// (`answers`); the probes then answer 0 themselves at once. A JVM trace of 1,000 frames
    /// takes the helper thousands of entries, each of which called the agent or searched the
    /// memo before.
    fn hush(&self) -> SlotState {
        let r = Ordering::Relaxed;
        let state = (self.site.load(r), self.valid.load(r), self.c.load(r), self.v.load(r), self.last_v.load(r), self.sample.load(r), self.busy.load(r), self.answers.load(r));
        self.busy.store(1, r);
        self.sample.store(i32::MIN as u32, r);
        self.answers.store(0, r);
        state
    }

    fn restore(&self, (site, valid, c, v, last_v, sample, busy, answers): SlotState) {
        let r = Ordering::Relaxed;
        self.site.store(site, r);
        self.valid.store(valid, r);
        self.c.store(c, r);
        self.v.store(v, r);
        self.last_v.store(last_v, r);
        self.sample.store(sample, r);
        self.busy.store(busy, r);
        self.answers.store(answers, r);
    }
}

const SLOT_BYTES: usize = 64;
/// `thread_slots=` at which every tid below 2^32 has a home slot of its own (the default): the
/// probes then skip the ownership check (Runtime.java, EXCLUSIVE), and slot 0 is the sink.
pub const EXCLUSIVE_SLOTS: usize = 1 << 32;
/// With exclusive slots, the first tid at which recording stops: a JVM that has made this many
/// threads may come to 2^32, whose home slot is tid 0 mod 2^32's; stopping this early (2^24
/// threads before) leaves no thread of tid 2^32 or more running instrumented code unnoticed.
const EXCLUSIVE_TID_LIMIT: i64 = (1 << 32) - (1 << 24);
/// Thread slots when the exclusive ones cannot be mapped.
const FALLBACK_SLOTS: usize = 1 << 16;
/// The version slot 0 holds, which no context has (an anchored version's graph version is at
/// most its anchor, below 2^31; encoder/src/ids.rs). With exclusive slots it is the version of
/// every frame a thread enters while its tid is 0 (Runtime.version reads its home slot's, and
/// slot 0 is the sink, which no probe writes a version into): walks compute those frames'
/// contexts from their callers, as leaves'. So the version probe has no branch to the agent,
/// which C2 would compile into every method as an uncommon trap.
const UNKNOWN_VERSION: u64 = u64::MAX;
// Runtime.pend writes `site` and `valid` with one 8-byte store, low half first in memory.
#[cfg(target_endian = "big")]
compile_error!("the probes' slot layout assumes a little-endian target");
const _: () = assert!(std::mem::size_of::<Slot>() == SLOT_BYTES);
// The offsets Runtime.java reads.
const _: () = assert!(std::mem::offset_of!(Slot, sample) == 40 && std::mem::offset_of!(Slot, busy) == 44 && std::mem::offset_of!(Slot, answers) == 48);
/// The home slots (`thread_slots=`, a power of two; a thread's is `tid & (count - 1)`), then one
/// more: a lazily committed mapping that lives until the process exits. The sink
/// (`Runtime.SINK`, owned by no thread and read by nobody) is that last slot, or slot 0 with
/// [`EXCLUSIVE_SLOTS`]; slot 0 is never a home (tid 0 is a thread whose constructor is still
/// running, as in JNI AttachCurrentThread, and several may be at once). A thread whose home slot
/// is taken gets a private one, which its entry and version probes ask the agent for (one JNI
/// call), while its call probes write into the sink: its entries are resolved by walks.
struct Slots {
    base: *mut Slot,
    count: usize,
    /// With exclusive slots: page of slots → threads of that page that claimed their home slot
    /// and ended (see [`Slots::release`]).
    ended: Mutex<FxHashMap<usize, u8>>,
}
/// Bytes and slots per page of the mapping (x86-64's page, the only one the agent builds for).
const PAGE_BYTES: usize = 4096;
const PAGE_SLOTS: usize = PAGE_BYTES / SLOT_BYTES;
// SAFETY: every field of a slot is an atomic; the mapping is never unmapped; `ended` is a Mutex.
unsafe impl Send for Slots {}
// SAFETY: as above.
unsafe impl Sync for Slots {}

impl Slots {
    /// `count` slots, or [`FALLBACK_SLOTS`] when the exclusive ones' 256 GiB of address space
    /// cannot be reserved.
    fn map(count: usize) -> Result<Slots, String> {
        match Self::map_exactly(count) {
            Err(e) if count == EXCLUSIVE_SLOTS => {
                diag!(Warn, "{e}; using {FALLBACK_SLOTS} thread slots (a thread whose tid equals a live one's modulo {FALLBACK_SLOTS} is slow)");
                Self::map_exactly(FALLBACK_SLOTS)
            }
            r => r,
        }
    }

    fn map_exactly(count: usize) -> Result<Slots, String> {
        let len = (count + 1) * SLOT_BYTES;
        // Zero pages are valid slots (free, no pending record).
        let p = crate::runtime::map_zeroed(len).map_err(|e| format!("cannot map {len} bytes of thread slots: {e}"))?.cast::<c_void>();
        // SAFETY: the mapping just made; a refusal changes nothing else. Huge pages would commit
        // 2 MiB for the first slot touched, and a core dump of the JVM would hold the 256 GiB of
        // exclusive slots (as a sparse file at best).
        unsafe {
            libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
            libc::madvise(p, len, libc::MADV_DONTDUMP);
        }
        let slots = Slots { base: p as *mut Slot, count, ended: Mutex::new(FxHashMap::default()) };
        let zero = slots.home(0);
        zero.tid.store(-1, Ordering::Relaxed); // owned by no thread (tids are positive)
        zero.last_v.store(UNKNOWN_VERSION, Ordering::Relaxed);
        Ok(slots)
    }

    /// Whether every tid below 2^32 has a slot of its own.
    fn exclusive(&self) -> bool {
        self.count == EXCLUSIVE_SLOTS
    }

    /// Frees `home`, the slot of a thread that ends. With exclusive slots no other thread ever
    /// has it, so once all the threads of a page's tids have claimed their slots and ended,
    /// nothing touches the page again and its memory goes back to the system: a program that
    /// makes threads all the time keeps about one page per 64 of its live threads, not one per
    /// 64 it ever ran.
    fn release(&self, home: &Slot) {
        home.tid.store(0, Ordering::Release);
        if !self.exclusive() {
            return;
        }
        let page = (home as *const Slot as usize - self.base as usize) / SLOT_BYTES / PAGE_SLOTS;
        let mut ended = lock(&self.ended);
        let n = ended.entry(page).or_insert(0);
        *n += 1;
        if usize::from(*n) == PAGE_SLOTS {
            ended.remove(&page);
            // SAFETY: a whole page inside the mapping (the base is page-aligned), whose slots no
            // thread will touch again (above); it reads as zeros if anything does.
            unsafe { libc::madvise(self.base.add(page * PAGE_SLOTS) as *mut c_void, PAGE_BYTES, libc::MADV_DONTNEED) };
        }
    }

    fn home(&self, tid: i64) -> &Slot {
        // SAFETY: the index is masked into the mapping, which lives for the rest of the process.
        unsafe { &*self.base.add(tid as usize & (self.count - 1)) }
    }

    fn contains(&self, s: *const Slot) -> bool {
        let base = self.base as usize;
        (base..base + self.count * SLOT_BYTES).contains(&(s as usize))
    }
}

/// Slow entries a thread makes before it gets an answer table ([`AnswerCaches`]): a thread that
/// enters few methods (the JVM's reference handler, finalizer and cleaner threads) would touch
/// a whole table, 2 MiB on a huge page, for nothing, and a thread at work makes hundreds of
/// thousands of slow entries while it warms up (jython's main thread over a million; its two
/// helper threads 500 to 2,000 each, which got tables at 256).
const ANSWER_TABLE_AFTER: u32 = 4096;

/// The threads' answer caches (agent/java/lucce/Runtime.java, memo): one per thread that owns
/// its home slot and made [`ANSWER_TABLE_AFTER`] slow entries, `entries` of 32 bytes each,
/// mapped when a thread first needs one and handed from a thread that ends to the next that
/// needs one (its entries stay true: the memo's answers never change), so their number is the
/// most busy threads alive at once. Never unmapped: a daemon thread may run instrumented code
/// while the VM shuts down.
struct AnswerCaches {
    /// log2 of the entries; 0 = no caches (`answer_cache=0`).
    bits: u32,
    free: Mutex<Vec<usize>>,
    /// Tables mapped so far.
    mapped: AtomicU32,
}

impl AnswerCaches {
    /// `entries`: 0 or a power of two from 2 (options.rs checks it).
    fn new(entries: usize) -> AnswerCaches {
        AnswerCaches { bits: if entries >= 2 { entries.trailing_zeros() } else { 0 }, free: Mutex::new(Vec::new()), mapped: AtomicU32::new(0) }
    }

    /// A cache's address, or 0 (none: the thread's entries take the memo).
    fn take(&self) -> usize {
        if self.bits == 0 {
            return 0;
        }
        if let Some(a) = lock(&self.free).pop() {
            return a;
        }
        // A table of 2 MiB or more goes on a transparent huge page where the kernel allows it
        // (`madvise` mode, as on Debian), aligned to one: its entries are scattered by a hash
        // over 512 small pages, presumably a TLB miss at most lookups (lucene_index, ant and
        // lucene_search ran 3-10% slower with tables of 2 MiB than of 128 KiB; on a huge page
        // about as fast, docs/agent.md). So the mapping is one huge page longer than the table;
        // the slack is never touched, hence never committed.
        const HUGE: usize = 2 << 20;
        let len = 32usize << self.bits;
        let align = if len >= HUGE { HUGE } else { 1 };
        // Zero pages are empty entries (key 0).
        let Ok(p) = crate::runtime::map_zeroed(len + align - 1) else {
            return 0;
        };
        self.mapped.fetch_add(1, Ordering::Relaxed);
        let table = (p as usize).next_multiple_of(align);
        if align == HUGE {
            // SAFETY: [table, table + len) lies inside the mapping just made. A refusal (huge
            // pages off) leaves ordinary pages, which work the same.
            unsafe { libc::madvise(table as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
        }
        table
    }

    fn give_back(&self, a: usize) {
        if a != 0 {
            lock(&self.free).push(a);
        }
    }
}

/// Per-thread state. The natives of one thread never run inside each other except through
/// `Runtime.truth()`/`threadName()`, during which `busy` turns the probes off.
struct ThreadState {
    /// This thread's slot (home or private); null before its first probe.
    slot: Cell<*const Slot>,
    private: RefCell<Option<Box<Slot>>>,
    busy: Cell<bool>,
    /// Entries that took this slow path (see [`ANSWER_TABLE_AFTER`]).
    slow_entries: Cell<u32>,
    events: Cell<u64>,
    /// The store's id of this thread, and whether it has its name (a thread's events inside its
    /// own constructor, as JNI AttachCurrentThread runs it, come before it has one).
    thread: Cell<Option<(u32, bool)>>,
    buffer: RefCell<Option<EventBuffer>>,
    stack: RefCell<Vec<FrameInfo>>,
    /// Tokens this thread handed out lately, so that a repeated context skips the global map.
    tokens: RefCell<Option<TokenCache>>,
    walk_memo: RefCell<WalkMemo>,
    /// The frames below a walk's caller frame ([`Recorder::memo_key`]).
    memo_frames: RefCell<Vec<FrameInfo>>,
    /// The last [`Replacements::epoch`] at which this thread's stack had no replaced frames.
    clean_epoch: Cell<u64>,
    /// An exception delivered to this thread while a Java helper of the agent ran on it (a global
    /// reference, or null), thrown again when the native method that called the helper returns
    /// ([`throw_delivered`]).
    delivered: Cell<jobject>,
}

/// What a walk needs to know of an opcode (`Recorder::at_call`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    /// invokevirtual, invokespecial, invokestatic, invokeinterface, invokedynamic.
    Invoke,
    /// `return` (void).
    Return,
    Other,
}

/// The [`OpKind`] of every byte of a method's bytecode, two bits each: a quarter of the
/// bytecode's size, for every method a walk has passed.
struct OpKinds {
    bits: Box<[u8]>,
    len: usize,
}

impl OpKinds {
    fn of(code: &[u8]) -> OpKinds {
        let mut bits = vec![0u8; code.len().div_ceil(4)].into_boxed_slice();
        for (i, &op) in code.iter().enumerate() {
            let kind = match op {
                _ if is_invoke(op) => 1,
                OP_RETURN => 2,
                _ => 0,
            };
            bits[i / 4] |= kind << (2 * (i % 4));
        }
        OpKinds { bits, len: code.len() }
    }

    fn get(&self, i: usize) -> Option<OpKind> {
        if i >= self.len {
            return None;
        }
        Some(match (self.bits[i / 4] >> (2 * (i % 4))) & 3 {
            1 => OpKind::Invoke,
            2 => OpKind::Return,
            _ => OpKind::Other,
        })
    }
}

thread_local! {
    static TLS: ThreadState = const {
        ThreadState {
            slot: Cell::new(std::ptr::null()),
            private: RefCell::new(None),
            busy: Cell::new(false),
            slow_entries: Cell::new(0),
            events: Cell::new(0),
            thread: Cell::new(None),
            buffer: RefCell::new(None),
            stack: RefCell::new(Vec::new()),
            tokens: RefCell::new(None),
            walk_memo: RefCell::new(WalkMemo { entries: Vec::new(), next: 0 }),
            memo_frames: RefCell::new(Vec::new()),
            clean_epoch: Cell::new(0),
            delivered: Cell::new(std::ptr::null_mut()),
        }
    };
}

/// This thread's slot, if it has one.
fn my_slot() -> Option<&'static Slot> {
    let p = TLS.try_with(|t| t.slot.get()).ok()?;
    // SAFETY: a slot pointer in TLS is either a home slot (mapping lives forever) or this
    // thread's private slot, kept in the same TLS until the thread exits.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The pending call-site record of this thread, taken (a record is used at most once). A record
/// of a frame whose version is unknown (entered while its thread's tid was 0, calling once the
/// tid is set) is none: the caller is found by a walk.
fn take_pending() -> Option<(u32, Context)> {
    let s = my_slot()?;
    if s.valid.swap(0, Ordering::Relaxed) == 0 {
        return None;
    }
    let ctx = Context { c: s.c.load(Ordering::Relaxed), v: s.v.load(Ordering::Relaxed) };
    (ctx.v != UNKNOWN_VERSION).then(|| (s.site.load(Ordering::Relaxed), ctx))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The line HotSpot prints for `location`: the entry starting exactly there, else the last of
/// the entries with the greatest start below it; -1 without one (Method::line_number_from_bci).
pub fn hotspot_line(table: &[crate::jvmti::LineNumberEntry], location: i64) -> i32 {
    let (mut best_start, mut best_line) = (0i64, -1);
    for e in table {
        if e.start_location == location {
            return e.line_number;
        }
        if e.start_location < location && e.start_location >= best_start {
            best_start = e.start_location;
            best_line = e.line_number;
        }
    }
    best_line
}

fn dotted(internal: &str) -> String {
    internal.replace('/', ".")
}

/// Record mode's probes under `options` ([`ProbeChoice::record`]; with classes left out a drop
/// probe after every call; with `throw_leaves=off` call probes on throw paths, with
/// `leaf_callers=off` in leaf callers).
fn record_probes(options: &crate::options::Options) -> ProbeChoice {
    let drop_after_calls = !options.include.is_empty() || !options.exclude.is_empty();
    ProbeChoice { throw_path_calls: !options.throw_leaves, leaf_calls: !options.leaf_callers(), ..ProbeChoice::record(drop_after_calls) }
}

/// The leaves of the JDK's classes, from the runtime image of the JVM's `java.home`, when leaf
/// callers may count on other classes'. Without the image, calls into other classes make no
/// leaf callers; nothing else changes.
fn jdk_leaves(jvmti: Jvmti, options: &crate::options::Options, probes: ProbeChoice) -> Option<Arc<JdkLeaves>> {
    if !options.other_leaves() {
        return None;
    }
    let home = jvmti.system_property(c"java.home").ok()?;
    let modules = PathBuf::from(home).join("lib/modules");
    match JdkLeaves::open(&modules, probes) {
        Ok(j) => Some(j),
        Err(e) => {
            diag!(Info, "leaf callers count on no other class: {}: {e}", modules.display());
            None
        }
    }
}

impl Recorder {
    /// Creates the store and the encoder; the registry's published classes flow into both.
    pub fn create(jvmti: Jvmti, out: PathBuf, options: &crate::options::Options) -> Result<Recorder, String> {
        // The writer only appends, so sled's cache needs little more than the tree's right edge:
        // 4 MiB instead of the default 16 (peak RSS of a run, less by about as much). sled keeps
        // what was written until the database is reopened: every 64 MiB instead of the default
        // 256 (javac, whose 33.8M anchors make a 280 MB store: 19–20 reopens instead of 5, and
        // its peak RSS 235–314 MB lower together with the bound on the encoder's
        // full-width memo; docs/agent.md, "Memory"). A run that writes less never reopens.
        let opts = WriterOptions { cache_bytes: 4 << 20, reopen_after_bytes: 64 << 20, ..WriterOptions::default() };
        let writer = StoreWriter::create(&out, opts).map_err(|e| format!("cannot create the store {}: {e}", out.display()))?;
        let handle = writer.handle();
        let encoder = Encoder::new(EncoderConfig::default(), handle.clone());
        let probes = record_probes(options);
        Ok(Recorder {
            jvmti,
            slots: Slots::map(options.thread_slots)?,
            answers: AnswerCaches::new(options.answer_cache),
            encoder,
            handle,
            writer: Mutex::new(Some(writer)),
            out,
            sample: options.sample,
            verify: options.verify,
            probes,
            jdk_leaves: jdk_leaves(jvmti, options, probes),
            frames: RwLock::new(FxHashMap::default()),
            op_kinds: Mutex::new(FxHashMap::default()),
            location_sites: Mutex::new(FxHashMap::default()),
            entry_sites: Mutex::new(FxHashMap::default()),
            tokens: Mutex::new(FxHashMap::default()),
            location_meta: Mutex::new(FxHashMap::default()),
            api_sites: SiteBits::new(),
            unrewritten: RwLock::new(Default::default()),
            buffers: Mutex::new(Vec::new()),
            runtime: Mutex::new(None),
            closed: AtomicBool::new(false),
            failure_told: AtomicBool::new(false),
            stats: RecorderStats::default(),
            replaced: Replacements::default(),
        })
    }

    /// The registry that numbers methods and sites after the encoder's virtual roots, and asks
    /// for record mode's probes ([`record_probes`]), telling the JDK's leaves.
    pub fn registry(&self) -> Registry {
        let (m, s) = self.encoder.next_ids();
        Registry::starting_at(m.0, s.0).with_probes(self.probes).with_jdk_leaves(self.jdk_leaves.clone())
    }

    /// How many of the JDK's class files were read to find what leaf callers may count on.
    pub fn jdk_classes_read(&self) -> u64 {
        self.jdk_leaves.as_ref().map_or(0, |j| j.classes_read())
    }

    /// A class's methods and sites, as the rewriter registered them (the publish sink): one
    /// hand-over to the encoder and the store for the whole class.
    pub fn define(&self, methods: &[(u32, MethodRecord)], sites: &[(u32, SiteRecord)]) {
        // The methods of a class share its name: converted once.
        let mut class: Option<(&str, String)> = None;
        let metas = methods
            .iter()
            .map(|(id, m)| {
                let dotted = match &class {
                    Some((internal, d)) if *internal == m.class() => d.clone(),
                    _ => class.insert((m.class(), dotted(m.class()))).1.clone(),
                };
                let meta = MethodMeta {
                    class: dotted,
                    name: m.name().to_string(),
                    descriptor: m.descriptor().to_string(),
                    source_file: m.source_file().map(str::to_string),
                    access_flags: m.access_flags,
                };
                (MethodId(*id), meta)
            })
            .collect();
        for (id, _) in sites.iter().filter(|(_, s)| s.api) {
            self.api_sites.insert(*id);
        }
        let site_metas = sites
            .iter()
            .map(|(id, s)| {
                let kind = match s.kind {
                    SiteKindTag::Call => SiteKind::Call,
                    SiteKindTag::Alloc => SiteKind::Alloc,
                };
                (SiteId(*id), SiteMeta { method: MethodId(s.method), kind, bci: s.bci, line: s.line })
            })
            .collect();
        for refused in self.encoder.define_all(metas, site_metas) {
            match refused {
                Refused::Method(id, e) => self.error(format_args!("method {}: {e}", id.0)),
                Refused::Site(id, e) => self.error(format_args!("site {}: {e}", id.0)),
            }
        }
    }

    fn error(&self, what: std::fmt::Arguments<'_>) {
        if self.stats.errors.fetch_add(1, Ordering::Relaxed) < 20 {
            diag!(Error, "recorder: {what}");
        }
    }

    /// VMInit: the runtime class is defined; registers the natives of both classes and starts
    /// the flusher.
    pub fn on_vm_init(&'static self, jni: Jni, runtime: jclass, api: jclass) -> Result<(), &'static str> {
        let runtime_natives = [
            NativeMethod { name: c"enter0".as_ptr(), signature: c"(IJ)J".as_ptr(), fn_ptr: enter0 as *mut c_void },
            NativeMethod { name: c"attach0".as_ptr(), signature: c"(J)J".as_ptr(), fn_ptr: attach0 as *mut c_void },
        ];
        if !jni.register_natives(runtime, &runtime_natives) {
            return Err("lucce/Runtime");
        }
        let api_natives = [
            NativeMethod { name: c"mark".as_ptr(), signature: c"(Ljava/lang/String;)V".as_ptr(), fn_ptr: mark as *mut c_void },
            NativeMethod { name: c"context".as_ptr(), signature: c"()J".as_ptr(), fn_ptr: context as *mut c_void },
        ];
        if !jni.register_natives(api, &api_natives) {
            return Err("lucce/Lucce");
        }
        let truth = jni.static_method_id(runtime, c"truth", c"()Ljava/lang/String;");
        let thread_name = jni.static_method_id(runtime, c"threadName", c"()Ljava/lang/String;");
        let class = jni.new_global_ref(runtime);
        if !class.is_null() && !truth.is_null() && !thread_name.is_null() {
            *lock(&self.runtime) = Some(RuntimeHelpers { class: class as usize, truth: truth as usize, thread_name: thread_name as usize });
        }
        let spawned = std::thread::Builder::new().name("lucce-flusher".into()).spawn(move || {
            while !self.closed.load(Ordering::Acquire) {
                std::thread::sleep(FLUSH_EVERY);
                self.drain_all();
                self.tell_store_failure();
            }
        });
        if let Err(e) = spawned {
            diag!(Warn, "no flusher thread ({e}): events are written at thread end and exit only");
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Entry

    fn enter(&self, env: Jni, method: u32) -> Context {
        let callee = MethodId(method);
        let ctx = match take_pending() {
            Some((site, caller)) => match self.encoder.enter_known(SiteId(site), caller, callee) {
                Ok(Some(ctx)) => Ok(ctx),
                Ok(None) => self.enter_by_walk(callee, Some((site, caller))),
                Err(e) => Err(e),
            },
            None => self.enter_by_walk(callee, None),
        };
        let ctx = ctx.unwrap_or_else(|e| {
            self.error(format_args!("entering method {method}: {e}"));
            self.encoder.enter_truncated(callee).unwrap_or_default()
        });
        if let Some(slot) = my_slot() {
            let slow = TLS.with(|t| {
                let n = t.slow_entries.get().saturating_add(1);
                t.slow_entries.set(n);
                n
            });
            if slow == ANSWER_TABLE_AFTER && self.slots.contains(slot) {
                // This thread keeps entering: it gets its answer table now (a home slot's own).
                slot.answers.store(self.answers.take() as u64, Ordering::Relaxed);
            }
            slot.last_v.store(ctx.v, Ordering::Relaxed);
            if self.sample != 0 {
                // The Java fast path counts entries below the interval and leaves the one that
                // reaches it to this slow path.
                let n = slot.sample.load(Ordering::Relaxed) as u64 + 1;
                if n >= self.sample {
                    slot.sample.store(0, Ordering::Relaxed);
                    let event = match self.redefined().then(|| self.replaced_frames_event()).flatten() {
                        Some(Caller::Frame { site, ctx }) => Some((site, ctx)),
                        _ => self.entry_site(method).map(|site| (site, ctx)),
                    };
                    if let Some((site, ctx)) = event {
                        self.record(env, EventKind::Sample, site, ctx, None);
                    }
                } else {
                    slot.sample.store(n as u32, Ordering::Relaxed);
                }
            }
        }
        ctx
    }

    /// The slow path of an entry: find the caller on the stack.
    fn enter_by_walk(&self, callee: MethodId, pending: Option<(u32, Context)>) -> Result<Context, lucce_encoder::EncodeError> {
        self.stats.walks.fetch_add(1, Ordering::Relaxed);
        let caller = self.walk(pending, Some(callee.0));
        diag!(Debug, "walk: entering {} found {caller:?}", crate::hook::method_label(callee.0).unwrap_or_default());
        self.enter_from(caller, callee)
    }

    /// Algorithm 1 for entering `callee` from what a walk found.
    fn enter_from(&self, caller: Caller, callee: MethodId) -> Result<Context, lucce_encoder::EncodeError> {
        match caller {
            Caller::Frame { site, ctx } => self.encoder.enter(SiteId(site), ctx, callee),
            Caller::Thread => self.encoder.enter_thread(callee),
            Caller::Truncated => {
                self.stats.truncated.fetch_add(1, Ordering::Relaxed);
                self.encoder.enter_truncated(callee)
            }
        }
    }

    /// Walks the current thread's stack below lucce's own frames. With `callee`, the first
    /// visible frame is that method being entered: its jmethodID is learned and it is skipped.
    ///
    /// A leaf frame keeps no context (rewrite/probes.rs): the walk goes on below it to the leaf's
    /// caller, and then computes the leaf's context by Algorithm 1 from there, as its entry would
    /// have (with a location site: the leaf's entry dropped the pending record of its call).
    /// Leaves are found where the JVM called out of one (class loading, `<clinit>`), where one
    /// calls to build the exception it throws, and below such calls in leaf callers
    /// (rewrite/leaves.rs), so there are few per walk.
    fn walk(&self, pending: Option<(u32, Context)>, callee: Option<u32>) -> Caller {
        self.walk_from(0, pending, callee, callee.is_none())
    }

    /// [`Recorder::walk`] from `depth` down; `callee_done`: the first visible frame there is
    /// not the callee (it is above).
    fn walk_from(&self, depth: usize, pending: Option<(u32, Context)>, callee: Option<u32>, callee_done: bool) -> Caller {
        // Leaf frames passed over, innermost first: method id, jmethodID, location.
        let mut leaves: Vec<(u32, jmethodID, i64)> = Vec::new();
        let found = TLS.with(|t| {
            let mut stack = t.stack.borrow_mut();
            let mut start = depth;
            let mut callee_done = callee_done;
            let (mut pending, mut callee) = (pending, callee);
            // What was passed over between the callee and its caller: with anything, the pending
            // record may be another frame's.
            let mut between = Between::Nothing;
            // Whether the callee being entered is the first visible frame of this walk.
            let mut entered_here = false;
            loop {
                if self.jvmti.current_stack(start as jint, WALK_CHUNK, &mut stack).is_err() {
                    return Caller::Truncated;
                }
                for (i, f) in stack.iter().enumerate() {
                    let kind = self.frame_kind(f.method);
                    if kind == FrameKind::Lucce {
                        continue;
                    }
                    if !callee_done {
                        callee_done = true;
                        if let Some(id) = callee {
                            self.learn(f.method, id);
                            entered_here = true;
                        }
                        continue;
                    }
                    let leaf = match kind {
                        FrameKind::Instrumented { id, ctx_slot } | FrameKind::Replaced { id, ctx_slot: Some(ctx_slot) } => {
                            match self.caller_frame(id, ctx_slot, (start + i) as jint, f, pending, between, callee) {
                                Some(caller) => return caller,
                                None => id, // no context in its locals: as a leaf's
                            }
                        }
                        FrameKind::Leaf { id } | FrameKind::Replaced { id, ctx_slot: None } => id,
                        // A leaf, or a method whose first entry has not reached the agent yet
                        // (the frame is inside its entry probe): as a leaf's, its context comes
                        // from its caller.
                        FrameKind::Unlearned => match self.learn_leaf(f, (start + i) as jint).or_else(|| self.learn_entering(f)) {
                            Some(id) => id,
                            None => return Caller::Truncated,
                        },
                        FrameKind::Obsolete => return Caller::Truncated,
                        FrameKind::HiddenClass => {
                            between = between.max(Between::HiddenClasses);
                            continue;
                        }
                        FrameKind::LeftOut => {
                            between = between.max(Between::LeftOut);
                            continue;
                        }
                        FrameKind::Native => {
                            between = Between::Native;
                            continue;
                        }
                        FrameKind::Lucce => continue,
                    };
                    // A leaf: the next frame to find is its caller, which called it with the
                    // slot's last record if the leaf is `Object.<init>` at its `return` and the
                    // callee, right above it, is what the JVM called from there
                    // (`Finalizer.register`): the leaf's entry only dropped the record, and
                    // `Object.<init>` runs nothing else. Its caller's locals then need no read.
                    let registering = entered_here && leaves.is_empty() && between == Between::Nothing && self.is_object_init_return(leaf, f);
                    leaves.push((leaf, f.method, f.location));
                    (pending, callee, between) = (registering.then(|| self.last_record()).flatten(), Some(leaf), Between::Nothing);
                }
                if stack.len() < WALK_CHUNK {
                    return Caller::Thread;
                }
                start += stack.len();
            }
        });
        leaves.into_iter().rev().fold(found, |caller, (id, jm, location)| match self.enter_from(caller, MethodId(id)) {
            Ok(ctx) => self.location_caller(id, jm, location, ctx),
            Err(e) => {
                self.error(format_args!("entering leaf method {id} in a walk: {e}"));
                Caller::Truncated
            }
        })
    }

    /// The frame of `method` at `location` in context `ctx`, as a caller through its location site.
    fn location_caller(&self, method: u32, jm: jmethodID, location: i64, ctx: Context) -> Caller {
        match self.location_site(method, jm, location) {
            Some(site) => Caller::Frame { site, ctx },
            None => Caller::Truncated,
        }
    }

    /// The caller frame found by a walk: its site, and its context from the pending record or its
    /// probe locals.
    ///
    /// When no frame lies between the callee and this frame (`direct`), and the
    /// record's site belongs to this frame's method and the frame is at an invoke, the record is
    /// this frame's: every invoke is preceded by its probe, so the last probe this frame ran is
    /// the one of the invoke it is executing, and since then only the callee's resolution (class
    /// loading, `<clinit>`) can have run — Java code whose probes would have to run the same site
    /// of the same method and then fail to enter anything. So the locals need not be read: reading
    /// them (GetLocalLong) makes HotSpot recompute the whole method's oop map several times per
    /// call for an interpreted frame, which was 40% of the CPU time of a FOP run.
    ///
    /// Entered straight from that invoke, the callee is the call itself only if it has the name
    /// and descriptor the instruction references (any name for `MethodHandle` and `VarHandle`
    /// calls, linked straight to adapters such as `VarHandleGuards.guard_LI_L`); otherwise it is
    /// an upcall the JVM made while resolving the call (`loadClass`, `<clinit>`), and the edge
    /// gets a location site (the same line): admitted with the call site, the pair ⟨call site,
    /// loadClass⟩ would be trusted later from that site's stale record, for a class loaded by
    /// another instruction of the frame. (The names are compared as 64-bit hashes,
    /// `rewrite::target_key`.)
    ///
    /// A callee entered through frames lucce cannot see keeps the record's call site only where
    /// that record cannot be stale (`call_site_allowed` below); otherwise it gets a location site
    /// (the same line, and no probe ever names it), and its entries walk every time, which the
    /// walk memo keeps cheap. Admitted with the call site, the pair is trusted for any later
    /// entry of the callee from such code that finds the site's record valid: also a stale one,
    /// left by a call into invisible code that entered nothing instrumented, when the entry
    /// belongs to a frame further down (a recursion one level too deep:
    /// tests/live_scripts/LiveExcludedStale.java).
    ///
    /// None when the frame's version is [`UNKNOWN_VERSION`] or not stored yet (below): the walk
    /// goes on below it and computes its context as a leaf's, from its caller.
    #[allow(clippy::too_many_arguments)]
    fn caller_frame(
        &self,
        id: u32,
        ctx_slot: jint,
        depth: jint,
        f: &FrameInfo,
        pending: Option<(u32, Context)>,
        between: Between,
        callee: Option<u32>,
    ) -> Option<Caller> {
        let direct = between == Between::Nothing;
        // The pending record of this frame's current invoke, if the record can be that.
        let own = pending.filter(|&(site, _)| self.at_call(f.method, f.location, site) && crate::hook::site_method(site) == Some(id));
        // Whether the edge may carry that record's call site, or must get a location site:
        // - straight from the invoke: only the call itself, not a resolution upcall (above);
        // - through hidden classes only (lambda proxies from the CDS archive, lambda forms from
        //   before VMInit, which lucce cannot instrument: adapters that call their target):
        //   yes. javac's streams enter `FindOps$FindSink$OfRef.<init>` through an archived
        //   proxy about 35,000 times a run, each a walk that reads the frame's locals with a
        //   location site (stop 57, measured before this case was allowed again);
        // - through methods left out or unrewritten: only when a drop probe follows every call
        //   (`drop_after_calls`: with classes left out). A valid record's call has then not
        //   returned (a call that threw had its record dropped by the handler that caught it),
        //   and nothing instrumented has been entered since its probe, so it is this live frame's. Without the drops, a call into such code that entered nothing left
        //   the record valid for an entry further down (LiveExcludedStale);
        // - through a native method: no; the same upcall made later from another native, after
        //   the call site's record went stale, would be trusted (jython:
        //   `Modules.transformedByAgent`, upcalled inside `findBootstrapClass` and `defineClass0`).
        let call_site_allowed = |site: u32| match between {
            Between::Nothing => callee.is_none_or(|m| crate::hook::site_may_call(site, m)),
            Between::HiddenClasses => true,
            Between::LeftOut => self.probes.drop_after_calls,
            Between::Native => false,
        };
        let location = |ctx: Context| self.location_caller(id, f.method, f.location, ctx);
        if let Some((site, pc)) = own.filter(|_| direct) {
            return Some(if call_site_allowed(site) { Caller::Frame { site, ctx: pc } } else { location(pc) });
        }
        let finish = |ctx: Context| match own {
            Some((site, pc)) if pc == ctx && call_site_allowed(site) => Caller::Frame { site, ctx },
            _ => location(ctx),
        };
        let key = self.memo_key(id, depth);
        if let Some(ctx) = key.as_deref().and_then(|k| TLS.with(|t| t.walk_memo.borrow().get(k))) {
            self.stats.memo_hits.fetch_add(1, Ordering::Relaxed);
            return Some(finish(ctx));
        }
        self.stats.local_reads.fetch_add(1, Ordering::Relaxed);
        let c = self.jvmti.local_long(depth, ctx_slot);
        let v = self.jvmti.local_long(depth, ctx_slot + 2);
        // Locals with no context: a frame inside its entry probe, which the JVM called out of
        // before the probe stored it (resolving `lucce.Runtime` through a class loader written
        // in Java, for the first class it defined), or past its last call, where HotSpot's
        // liveness says the locals are dead. The JVM refuses to read them, or, where a
        // LocalVariableTable covers them, they read as the zeros the interpreter gives new
        // locals (no real frame has version 0; only the virtual roots do). The frame's context
        // is then computed as a leaf's, from its caller, as its entry did or will: exact, since
        // the caller stays at that call while the frame lives.
        // A frame entered while its thread's tid was 0 has [`UNKNOWN_VERSION`]: the same.
        let not_stored = |r: &Result<jlong, JvmtiError>| matches!(r, Err(JvmtiError(JVMTI_ERROR_INVALID_SLOT)));
        if not_stored(&c) && not_stored(&v) || matches!(v, Ok(v) if v == 0 || v as u64 == UNKNOWN_VERSION) {
            return None;
        }
        let (Ok(c), Ok(v)) = (c, v) else {
            // Not seen on the eleven workloads: the entry is truncated. Counted, and told in the
            // log file, not on the program's stderr (batik's kit check counts its output lines).
            if self.stats.unreadable.fetch_add(1, Ordering::Relaxed) < 20 {
                let name = self.jvmti.method_name(f.method).unwrap_or_default();
                let op = self.opcode_at(f.method, f.location);
                let pending_method = pending.map(|(site, _)| crate::hook::site_method(site));
                diag!(
                    Info,
                    "recorder: truncated: cannot read the context locals of method {id} {name:?} at depth {depth} slot {ctx_slot} (bci {} opcode kind {op:?}, direct {direct}, pending site's method {pending_method:?}): {:?}",
                    f.location,
                    (c, v)
                );
            }
            return Some(Caller::Truncated);
        };
        let ctx = Context { c: c as u64, v: v as u64 };
        if let Some(key) = key {
            TLS.with(|t| t.walk_memo.borrow_mut().put(key, ctx));
        }
        Some(finish(ctx))
    }

    /// The key under which a thread's [`WalkMemo`] keeps the context of a frame of instrumented
    /// method `id` at `depth`: the method, and what the stack holds below the frame. None when
    /// that is too deep, or holds a frame whose method is not known for certain (a walk stops at
    /// such frames, or encodes anew above them).
    fn memo_key(&self, id: u32, depth: jint) -> Option<Vec<u64>> {
        TLS.with(|t| {
            let mut below = t.memo_frames.borrow_mut();
            self.jvmti.current_stack(depth + 1, MEMO_DEPTH + 1, &mut below).ok()?;
            if below.len() > MEMO_DEPTH {
                return None;
            }
            let mut key = Vec::with_capacity(1 + below.len());
            key.push(u64::from(id));
            for f in below.iter() {
                // One word per frame: a method id (bit 63 set) or a jmethodID (a user-space
                // address, below 2^47), then 16 bits of bytecode index (a native method's -1 is
                // 0xFFFF, which no bytecode index is: code is shorter than 64 KiB).
                let method = match self.frame_kind(f.method) {
                    FrameKind::Instrumented { id, .. } | FrameKind::Leaf { id } => 1 << 47 | u64::from(id),
                    FrameKind::Unlearned => 1 << 47 | u64::from(self.learn_current(f.method)?),
                    FrameKind::Lucce | FrameKind::Native | FrameKind::HiddenClass | FrameKind::LeftOut => Some(f.method as u64).filter(|&m| m < 1 << 47)?,
                    FrameKind::Obsolete | FrameKind::Replaced { .. } => return None,
                };
                key.push(method << 16 | (f.location as u64 & 0xFFFF));
            }
            Some(key)
        })
    }

    /// The id of the method of an unlearned frame, from the entry probe of its code (the
    /// method's current code: a frame of an older form would have an obsolete jmethodID).
    /// Learned then.
    fn learn_current(&self, m: jmethodID) -> Option<u32> {
        let probe = self.entry_probe(m)?;
        (self.named(m, probe.method_id) == Some(probe.leaf)).then(|| {
            self.learn(m, probe.method_id);
            probe.method_id
        })
    }

    /// The last call-site record written into this thread's slot, taken or not: the record of
    /// the call that entered a leaf (whose entry only drops it), as long as no call probe has
    /// run since. Only from a home slot that the thread owns: a thread with a private slot
    /// writes its records into the sink.
    fn last_record(&self) -> Option<(u32, Context)> {
        let s = my_slot().filter(|&s| self.slots.contains(s) && s.tid.load(Ordering::Relaxed) > 0)?;
        let ctx = Context { c: s.c.load(Ordering::Relaxed), v: s.v.load(Ordering::Relaxed) };
        (ctx.v != UNKNOWN_VERSION).then(|| (s.site.load(Ordering::Relaxed), ctx))
    }

    /// Whether frame `f` of leaf `id` is `Object.<init>` at a `return` (where the JVM calls
    /// `Finalizer.register`, when the rewrite has no call probe there: `ProbeChoice::finalizer_call`).
    fn is_object_init_return(&self, id: u32, f: &FrameInfo) -> bool {
        crate::hook::method_named(id, Some(("java/lang/Object", "<init>", "()V"))).is_some() && self.opcode_at(f.method, f.location) == Some(OpKind::Return)
    }

    /// Whether the instruction at `location` can be the one call site `site` probes: an invoke,
    /// or the `return` of `Object.<init>`, whose probe stands for the JVM's call of
    /// `Finalizer.register` (the rewriter puts a call probe only there before a `return`).
    fn at_call(&self, m: jmethodID, location: i64, site: u32) -> bool {
        match self.opcode_at(m, location) {
            Some(OpKind::Invoke) => true,
            Some(OpKind::Return) => crate::hook::site_target(site) == Some(crate::rewrite::finalizer_register_key()),
            _ => false,
        }
    }

    /// The kind of the opcode at `location` of method `m`, when its bytecode is readable.
    fn opcode_at(&self, m: jmethodID, location: i64) -> Option<OpKind> {
        let mut cache = lock(&self.op_kinds);
        let kinds = cache.entry(m as usize).or_insert_with(|| OpKinds::of(&self.jvmti.bytecodes(m).unwrap_or_default()));
        kinds.get(usize::try_from(location).ok()?)
    }

    /// What a frame's method is (cached by jmethodID; instrumented methods are learned at entry).
    fn frame_kind(&self, m: jmethodID) -> FrameKind {
        if let Some(&k) = self.frames.read().unwrap_or_else(|e| e.into_inner()).get(&(m as usize)) {
            return k;
        }
        let kind = self.classify(m);
        self.frames.write().unwrap_or_else(|e| e.into_inner()).entry(m as usize).or_insert(kind);
        kind
    }

    /// A method never learned at entry: lucce's own, invisible by the rule (native, hidden class,
    /// `@Hidden`, excluded class, left unrewritten), or a frame that runs code from before the
    /// rewrite (obsolete, or unknown): the walk stops there, honestly truncated.
    fn classify(&self, m: jmethodID) -> FrameKind {
        let j = self.jvmti;
        let Ok(sig) = j.declaring_class_signature(m) else { return FrameKind::Obsolete };
        if sig.starts_with("Llucce/") {
            return FrameKind::Lucce;
        }
        if j.is_method_native(m).unwrap_or(false) {
            return FrameKind::Native;
        }
        if j.is_method_obsolete(m).unwrap_or(true) {
            return self.obsolete_kind(m);
        }
        let (class, hidden) = signature_class(&sig).unwrap_or((&sig, false));
        if hidden {
            return FrameKind::HiddenClass;
        }
        if !crate::hook::class_wanted(class) {
            return FrameKind::LeftOut;
        }
        let Ok((name, desc)) = j.method_name(m) else { return FrameKind::Obsolete };
        let key = format!("{class}.{name}{desc}");
        if self.unrewritten.read().unwrap_or_else(|e| e.into_inner()).contains(&key) {
            return FrameKind::LeftOut;
        }
        FrameKind::Unlearned
    }

    /// The method id of the unlearned frame `f` at `depth` if it is a leaf: its probe local (the
    /// last) holds the id of a leaf the rewriter registered under this frame's class, name and
    /// descriptor (so an int local of some other method cannot pass for one). Learned then.
    fn learn_leaf(&self, f: &FrameInfo, depth: jint) -> Option<u32> {
        let j = self.jvmti;
        let mark_slot = j.max_locals(f.method).ok()? - jint::from(crate::rewrite::probes::LEAF_EXTRA_LOCALS);
        let id = u32::try_from(j.local_int(depth, mark_slot).ok()?).ok()?;
        self.learn_if_named(f.method, id, true)
    }

    /// The id of an instrumented method no entry of which has reached the agent: every entry's
    /// first one does (a new edge), and learns its jmethodID, so its frames are all inside their
    /// entry probe, which the JVM called out of (to load `lucce.Runtime` through a class loader
    /// written in Java, for the first class that loader defined).
    fn learn_entering(&self, f: &FrameInfo) -> Option<u32> {
        let probe = self.entry_probe(f.method)?;
        if !(0..=probe.call_at as i64).contains(&f.location) {
            return None;
        }
        self.learn_if_named(f.method, probe.method_id, false)
    }

    /// A frame still running a version of its method that a redefinition replaced (a debugger's
    /// HotSwap, a Java agent's retransform; HotSpot gives it a jmethodID of its own). If lucce
    /// rewrote that version, the frame is that version's method like any other (`Replaced`): its
    /// entry probe names the id, its locals hold its context, its calls wrote their records, and
    /// its lines are its own table's. Otherwise (code from before the rewrite, as the VMInit
    /// batch leaves on stacks) nothing below it is known.
    fn obsolete_kind(&self, m: jmethodID) -> FrameKind {
        let kind = self.entry_probe(m).filter(|p| self.named(m, p.method_id) == Some(p.leaf)).and_then(|p| self.kind_of(m, p.method_id));
        if kind.is_some() {
            // Normally told by the load hook already (`redefining`); not when it was not called
            // (a Java agent retransforming with `after_agents=off`): every thread looks again.
            self.replaced.epoch.fetch_add(1, Ordering::AcqRel);
        }
        kind.unwrap_or(FrameKind::Obsolete)
    }

    /// The entry probe `m`'s code starts with, if lucce rewrote that code. Read from the method,
    /// not through the bytecode cache: the frame may run an older form than the cached one. An
    /// id pushed from the constant pool is read from the class's current pool, which holds every
    /// entry of an older version's pool at the same index (HotSpot merges the pools of a
    /// redefinition that way so that running code of the old version keeps working).
    fn entry_probe(&self, m: jmethodID) -> Option<EntryProbe> {
        let j = self.jvmti;
        let code = j.bytecodes(m).ok()?;
        EntryProbe::read(&code, || j.constant_pool(j.method_declaring_class(m).ok()?).ok())
    }

    /// Learns that frames of `m` belong to method `id`, and returns it, if the rewriter
    /// registered `id` under `m`'s class, name and descriptor (and as a leaf, with `leaf`).
    fn learn_if_named(&self, m: jmethodID, id: u32, leaf: bool) -> Option<u32> {
        let is_leaf = self.named(m, id)?;
        if leaf && !is_leaf {
            return None;
        }
        self.learn(m, id);
        Some(id)
    }

    /// Whether the rewriter registered `id` under `m`'s class, name and descriptor: then whether
    /// as a leaf.
    fn named(&self, m: jmethodID, id: u32) -> Option<bool> {
        let j = self.jvmti;
        let sig = j.declaring_class_signature(m).ok()?;
        let (class, _) = signature_class(&sig)?;
        let (name, desc) = j.method_name(m).ok()?;
        crate::hook::method_named(id, Some((class, &name, &desc)))
    }

    /// A method the rewriter left alone (`class` internal name, `method` = name + descriptor).
    pub fn unrewritten(&self, class: &str, method: &str) {
        self.unrewritten.write().unwrap_or_else(|e| e.into_inner()).insert(format!("{class}.{method}"));
    }

    /// Records that frames of `m` belong to the instrumented method `id`.
    fn learn(&self, m: jmethodID, id: u32) {
        // Known already (most walks): no JVMTI call, no write lock. A class redefined later gives
        // its methods new ids, which are learned anew.
        let known = self.frames.read().unwrap_or_else(|e| e.into_inner()).get(&(m as usize)).copied();
        if matches!(known, Some(FrameKind::Instrumented { id: k, .. } | FrameKind::Leaf { id: k } | FrameKind::Replaced { id: k, .. }) if k == id) {
            return;
        }
        if let Some(kind) = self.kind_of(m, id) {
            self.frames.write().unwrap_or_else(|e| e.into_inner()).insert(m as usize, kind);
        }
    }

    /// What frames of `m`, which belong to the instrumented method `id`, are to a walk. (A frame
    /// stopped at a debugger's breakpoint before its entry probe, whose class was then redefined,
    /// enters its replaced version.)
    fn kind_of(&self, m: jmethodID, id: u32) -> Option<FrameKind> {
        let j = self.jvmti;
        let ctx_slot = match crate::hook::is_leaf(id) {
            true => None,
            false => Some(j.max_locals(m).ok()? - jint::from(crate::rewrite::probes::EXTRA_LOCALS)),
        };
        Some(match (j.is_method_obsolete(m).unwrap_or(false), ctx_slot) {
            (true, ctx_slot) => FrameKind::Replaced { id, ctx_slot },
            (false, Some(ctx_slot)) => FrameKind::Instrumented { id, ctx_slot },
            (false, None) => FrameKind::Leaf { id },
        })
    }

    /// The load hook is about to rewrite `class` again for a redefinition: if the agent had
    /// rewritten its current version, the methods of that version are being replaced.
    pub fn redefining(&self, class: jclass) {
        let Ok(methods) = self.jvmti.class_methods(class) else { return };
        let ids: Vec<u32> = methods.into_iter().filter_map(|m| self.entry_probe(m)).map(|p| p.method_id).collect();
        if ids.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut pending = lock(&self.replaced.pending);
        pending.retain(|_, until| *until > now);
        pending.extend(ids.into_iter().map(|id| (id, now + REPLACEMENT_SETTLES)));
        drop(pending);
        self.replaced.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether a class lucce rewrote has been redefined in this JVM (the events' only cost
    /// until then).
    #[inline(always)]
    fn redefined(&self) -> bool {
        self.replaced.epoch.load(Ordering::Relaxed) != 0
    }

    /// The site and context of this thread's event frame (the innermost visible one) as the
    /// JVM's trace now shows it, when its stack holds frames of replaced versions; None when the
    /// ordinary ones are exact (see [`Replacements`]).
    #[cold]
    #[inline(never)]
    fn replaced_frames_event(&self) -> Option<Caller> {
        let epoch = self.replaced.epoch.load(Ordering::Acquire);
        if TLS.with(|t| t.clean_epoch.get()) == epoch {
            return None;
        }
        let frames = self.whole_stack()?;
        let kinds: Vec<FrameKind> = frames.iter().map(|f| self.frame_kind(f.method)).collect();
        if let Some(lowest) = kinds.iter().rposition(|k| matches!(k, FrameKind::Replaced { .. })) {
            return Some(self.encode_anew(&frames, &kinds, lowest));
        }
        let pending = lock(&self.replaced.pending);
        let now = Instant::now();
        let soon_replaced = |k: &FrameKind| match *k {
            FrameKind::Instrumented { id, .. } | FrameKind::Leaf { id } => pending.get(&id).is_some_and(|until| *until > now),
            // Its id is not known: it might be.
            FrameKind::Unlearned => !pending.is_empty(),
            _ => false,
        };
        if !kinds.iter().any(soon_replaced) {
            TLS.with(|t| t.clean_epoch.set(epoch));
        }
        None
    }

    /// The innermost visible frame's site and context, computed from the frame below the lowest
    /// replaced one (`frames[lowest]`, found as a walk finds a caller) up by Algorithm 1, each
    /// frame through a location site (the same line as its call site), and each replaced one as
    /// its method's twin.
    fn encode_anew(&self, frames: &[FrameInfo], kinds: &[FrameKind], lowest: usize) -> Caller {
        let FrameKind::Replaced { id, .. } = kinds[lowest] else { return Caller::Truncated };
        let mut caller = match self.twin(id) {
            Some(twin) => self.walk_from(lowest + 1, None, Some(twin), true),
            None => Caller::Truncated,
        };
        for (depth, (f, kind)) in frames.iter().zip(kinds).enumerate().take(lowest + 1).rev() {
            let id = match *kind {
                FrameKind::Replaced { id, .. } => self.twin(id),
                FrameKind::Instrumented { id, .. } | FrameKind::Leaf { id } => Some(id),
                FrameKind::Unlearned => self.learn_leaf(f, depth as jint).or_else(|| self.learn_entering(f)),
                FrameKind::Obsolete => None,
                FrameKind::Native | FrameKind::HiddenClass | FrameKind::LeftOut | FrameKind::Lucce => continue,
            };
            caller = match id.map(|id| (id, self.enter_from(caller, MethodId(id)))) {
                Some((id, Ok(ctx))) => self.location_caller(id, f.method, f.location, ctx),
                Some((id, Err(e))) => {
                    self.error(format_args!("entering method {id} anew above a replaced frame: {e}"));
                    Caller::Truncated
                }
                // Nothing known of this frame: the frames above start at the truncated root.
                None => Caller::Truncated,
            };
        }
        caller
    }

    /// Every frame of this thread, innermost first.
    fn whole_stack(&self) -> Option<Vec<FrameInfo>> {
        let (mut all, mut chunk) = (Vec::new(), Vec::new());
        loop {
            self.jvmti.current_stack(all.len() as jint, SCAN_CHUNK, &mut chunk).ok()?;
            all.extend_from_slice(&chunk);
            if chunk.len() < SCAN_CHUNK {
                return Some(all);
            }
        }
    }

    /// The twin of method `id`: the same names, no source file (made once).
    fn twin(&self, id: u32) -> Option<u32> {
        let mut twins = lock(&self.replaced.twins);
        if let Some(&t) = twins.get(&id) {
            return Some(t);
        }
        let m = crate::hook::method_record(id)?;
        let twin = crate::hook::reserve_method()?;
        let meta = MethodMeta {
            class: dotted(m.class()),
            name: m.name().to_string(),
            descriptor: m.descriptor().to_string(),
            source_file: None,
            access_flags: m.access_flags,
        };
        if let Err(e) = self.encoder.define_method(MethodId(twin), &meta) {
            self.error(format_args!("twin {twin} of method {id}: {e}"));
            return None;
        }
        twins.insert(id, twin);
        Some(twin)
    }

    /// The jmethodID and current location of the innermost non-lucce frame.
    fn top_frame(&self) -> Option<(jmethodID, i64)> {
        TLS.with(|t| {
            let mut stack = t.stack.borrow_mut();
            self.jvmti.current_stack(0, WALK_CHUNK, &mut stack).ok()?;
            stack.iter().find(|f| self.frame_kind(f.method) != FrameKind::Lucce).map(|f| (f.method, f.location))
        })
    }

    /// The location site of ⟨method, location⟩ (created once).
    fn location_site(&self, method: u32, jm: jmethodID, location: i64) -> Option<u32> {
        let mut sites = lock(&self.location_sites);
        if let Some(&s) = sites.get(&(method, location)) {
            return Some(s);
        }
        let line = self.jvmti.line_table(jm).map(|t| hotspot_line(&t, location)).unwrap_or(-1);
        let id = crate::hook::reserve_site()?;
        let meta = SiteMeta { method: MethodId(method), kind: SiteKind::Call, bci: location.max(0) as u32, line };
        if let Err(e) = self.encoder.define_site(SiteId(id), &meta) {
            self.error(format_args!("location site of method {method}: {e}"));
            return None;
        }
        self.stats.location_sites.fetch_add(1, Ordering::Relaxed);
        sites.insert((method, location), id);
        lock(&self.location_meta).insert(id, (method, line));
        Some(id)
    }

    /// The site of sample events of `method`: its entry probe's location.
    fn entry_site(&self, method: u32) -> Option<u32> {
        if let Some(&s) = lock(&self.entry_sites).get(&method) {
            return Some(s);
        }
        let (jm, location) = self.top_frame()?;
        let site = self.location_site(method, jm, location)?;
        lock(&self.entry_sites).insert(method, site);
        Some(site)
    }

    // -----------------------------------------------------------------------------------------
    // Events

    /// The site and context of the frame that called a lucce API native.
    #[inline(always)]
    fn api_caller(&self) -> Caller {
        let pending = take_pending();
        if self.redefined() {
            if let Some(anew) = self.replaced_frames_event() {
                return anew;
            }
        }
        match pending {
            Some((site, ctx)) if self.api_sites.contains(site) => Caller::Frame { site, ctx },
            _ => self.walk(None, None),
        }
    }

    fn mark(&self, env: Jni, label: Option<String>) {
        match self.api_caller() {
            Caller::Frame { site, ctx } => self.record(env, EventKind::Mark, site, ctx, label),
            _ => self.error(format_args!("Lucce.mark called with no instrumented caller")),
        }
    }

    /// The token of the caller's context. Tokens are keyed by what a trace shows of the
    /// innermost frame (method, line) plus the frame's ⟨c, v⟩, not by site id: the first call
    /// of a site may be resolved by a walk, which names the place with a location site instead
    /// of the rewriter's site, and both must give one token.
    fn context(&self) -> u64 {
        if self.closed.load(Ordering::Acquire) {
            return 0;
        }
        let Caller::Frame { site, ctx } = self.api_caller() else { return 0 };
        let fast_key = (site, ctx.c, ctx.v);
        if let Some(t) = TLS.with(|t| t.tokens.borrow().as_ref().and_then(|m| m.get(&fast_key).copied())) {
            return t;
        }
        let Some((method, line)) = crate::hook::site_position(site).or_else(|| self.location_position(site)) else { return 0 };
        let token = {
            let mut tokens = lock(&self.tokens);
            let next = tokens.len() as u64 + 1;
            let token = *tokens.entry((method, line, ctx.c, ctx.v)).or_insert(next);
            if token == next {
                self.stats.tokens.fetch_add(1, Ordering::Relaxed);
                self.handle.token(token, site, ctx.c, ctx.v);
            }
            token
        };
        TLS.with(|t| {
            let mut mine = t.tokens.borrow_mut();
            let mine = mine.get_or_insert_with(FxHashMap::default);
            if mine.len() >= THREAD_TOKENS {
                mine.clear();
            }
            mine.insert(fast_key, token);
        });
        token
    }

    /// Method and line of a location site.
    fn location_position(&self, site: u32) -> Option<(u32, i32)> {
        lock(&self.location_meta).get(&site).copied()
    }

    fn record(&self, env: Jni, kind: EventKind, site: u32, ctx: Context, label: Option<String>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let Some(thread) = self.thread_id(env) else { return };
        let n = TLS.with(|t| {
            let n = t.events.get() + 1;
            t.events.set(n);
            n
        });
        let truth = if self.verify != 0 && n.is_multiple_of(self.verify) {
            let t = self.truth(env);
            if t.is_none() {
                self.stats.untraced.fetch_add(1, Ordering::Relaxed);
            }
            t
        } else {
            None
        };
        let e = EventRecord { thread, kind, site, c: ctx.c, v: ctx.v, label, truth };
        self.stats.events.fetch_add(1, Ordering::Relaxed);
        TLS.with(|t| {
            let mut b = t.buffer.borrow_mut();
            let buf = b.get_or_insert_with(|| {
                let buf: EventBuffer = Arc::new(Mutex::new(Vec::with_capacity(BUFFER_EVENTS)));
                lock(&self.buffers).push(Arc::downgrade(&buf));
                buf
            });
            let mut v = lock(buf);
            v.push(e);
            if v.len() >= BUFFER_EVENTS {
                self.handle.events(std::mem::take(&mut *v));
            }
        });
    }

    /// Calls a `String` helper of `lucce/Runtime` with this thread's probes off.
    fn call_helper(&self, env: Jni, pick: impl Fn(&RuntimeHelpers) -> usize) -> Option<String> {
        let h = (*lock(&self.runtime))?;
        let was_busy = TLS.with(|t| t.busy.replace(true));
        let saved = my_slot().map(Slot::hush);
        let s = env.call_static_object_noargs(h.class as jclass, pick(&h) as jmethodID).unwrap_or_else(|thrown| {
            keep_if_delivered(env, thrown);
            std::ptr::null_mut()
        });
        let text = env.string(s);
        env.delete_local_ref(s);
        if let (Some(slot), Some(saved)) = (my_slot(), saved) {
            slot.restore(saved);
        }
        TLS.with(|t| t.busy.set(was_busy));
        text
    }

    fn thread_id(&self, env: Jni) -> Option<u32> {
        let known = TLS.with(|t| t.thread.get());
        if let Some((id, true)) = known {
            return Some(id);
        }
        let id = match self.call_helper(env, |h| h.thread_name) {
            Some(name) => (self.handle.thread(&name), true),
            None => known.unwrap_or_else(|| (self.handle.thread("?"), false)),
        };
        TLS.with(|t| t.thread.set(Some(id)));
        Some(id.0)
    }

    /// The stack `Throwable` shows here, minus what lucce cannot see by its rule: lucce's own
    /// frames, native methods and the classes the options leave alone (`include=`/`exclude=`;
    /// hidden frames are omitted by the JVM already).
    fn truth(&self, env: Jni) -> Option<Vec<TruthFrame>> {
        let text = self.call_helper(env, |h| h.truth)?;
        let capped = text.starts_with("capped\n");
        let mut frames: Vec<TruthFrame> = text
            .lines()
            .filter_map(|l| {
                let mut p = l.split('\t');
                let (class, method, file, line) = (p.next()?, p.next()?, p.next()?, p.next()?.parse::<i32>().ok()?);
                // `class_wanted` is false for lucce's own classes too.
                (line != -2 && crate::hook::class_wanted(class)).then(|| TruthFrame {
                    class: class.to_string(),
                    method: method.to_string(),
                    file: file.strip_prefix('=').map(str::to_string),
                    line,
                })
            })
            .collect();
        if capped {
            frames.push(TruthFrame::capped());
        }
        Some(frames)
    }

    /// Hands every thread's buffered events to the writer.
    fn drain_all(&self) {
        let mut list = lock(&self.buffers);
        list.retain(|w| match w.upgrade() {
            Some(buf) => {
                let batch = std::mem::take(&mut *lock(&buf));
                self.handle.events(batch);
                true
            }
            None => false,
        });
    }

    /// The slot of the current thread, claiming its home slot (or making a private one) on the
    /// thread's first probe; null while the agent is busy on this thread (probes off).
    ///
    /// A thread that first came here with tid 0 (its constructor was running: JNI
    /// AttachCurrentThread) has a private slot, and comes again with its tid once the
    /// constructor has set it (the probes find no home slot of theirs before): it moves to its
    /// home slot then, which with exclusive slots its probes use from then on.
    fn attach(&self, tid: i64) -> *const Slot {
        TLS.with(|t| {
            if t.busy.get() {
                return std::ptr::null();
            }
            let p = t.slot.get();
            // SAFETY: as in `my_slot`.
            if !p.is_null() && (tid <= 0 || unsafe { (*p).tid.load(Ordering::Relaxed) } == tid) {
                return p;
            }
            if self.slots.exclusive() && tid >= EXCLUSIVE_TID_LIMIT && !self.closed.swap(true, Ordering::AcqRel) {
                diag!(
                    Error,
                    "recorder: thread id {tid}: this JVM has made nearly 2^32 threads, past which two threads could share \
                     one slot; recording stops here (events after this are dropped)"
                );
            }
            let home = self.slots.home(tid);
            let p: *const Slot = if tid > 0 && home.tid.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                // A record its previous owner left (a call into a native method that returned,
                // the last before that thread ended) is not this thread's.
                home.valid.store(0, Ordering::Relaxed);
                home
            } else {
                let private = Box::new(Slot {
                    tid: AtomicI64::new(tid),
                    site: AtomicU32::new(0),
                    valid: AtomicU32::new(0),
                    c: AtomicU64::new(0),
                    v: AtomicU64::new(0),
                    last_v: AtomicU64::new(0),
                    sample: AtomicU32::new(0),
                    busy: AtomicU32::new(0),
                    answers: AtomicU64::new(0),
                });
                let p: *const Slot = &*private;
                *t.private.borrow_mut() = Some(private);
                p
            };
            t.slot.set(p);
            p
        })
    }

    /// Thread end: this thread's events go to the writer now, and its home slot is freed.
    pub fn thread_end(&self) {
        let _ = TLS.try_with(|t| {
            if let Some(buf) = t.buffer.borrow_mut().take() {
                self.handle.events(std::mem::take(&mut *lock(&buf)));
            }
            let p = t.slot.replace(std::ptr::null());
            if self.slots.contains(p) {
                // SAFETY: a home slot: the mapping lives for the rest of the process.
                let home = unsafe { &*p };
                self.answers.give_back(home.answers.swap(0, Ordering::Relaxed) as usize);
                self.slots.release(home);
            }
        });
    }

    /// Once the store writer has stopped storing (a full disk, say), says so on stderr, once,
    /// and stops recording (no event, no `verify=` trace, no token could be stored): the program
    /// runs on, and the user learns now, not at its end, that the store is short.
    fn tell_store_failure(&self) {
        if let Some(why) = self.handle.failure() {
            self.closed.store(true, Ordering::Release);
            self.say_store_failed("writing", &why, ". The program goes on, but recording has stopped;");
        }
    }

    /// The one line on stderr about a store that failed ("`doing` the store … failed"), the
    /// first time only.
    fn say_store_failed(&self, doing: &str, why: &dyn std::fmt::Display, then: &str) {
        if !self.failure_told.swap(true, Ordering::AcqRel) {
            let out = self.out.display();
            eprintln!("lucce-agent: {doing} the store {out} failed: {why}{then} the store keeps what was committed before (`lucce events {out}` reads it)");
        }
    }

    /// VM death: every buffer, then the store is committed and closed. Later events are dropped.
    pub fn close(&self) -> Option<WriterReport> {
        self.drain_all();
        self.closed.store(true, Ordering::Release);
        self.drain_all();
        let writer = lock(&self.writer).take()?;
        match writer.close() {
            Ok(r) => Some(r),
            Err(e) => {
                self.say_store_failed("closing", &e, ";");
                None
            }
        }
    }

    pub fn encoder_stats(&self) -> lucce_encoder::EncoderStats {
        self.encoder.stats()
    }

    /// Threads' answer tables mapped so far.
    pub fn answer_tables(&self) -> u32 {
        self.answers.mapped.load(Ordering::Relaxed)
    }

    /// Where the tables the runtime class reads are.
    pub fn tables(&self) -> crate::runtime::RecordTables {
        let (c, a) = (self.encoder.site_cache(), self.encoder.anchor_cache());
        crate::runtime::RecordTables {
            cache_base: c.base_address(),
            cache_buckets: c.capacity(),
            anchor_base: a.base_address(),
            anchor_buckets: a.capacity(),
            limit: self.encoder.call_id_limit(),
            slots: self.slots.base as usize,
            slot_mask: (self.slots.count - 1) as u64,
            sample: self.sample,
            answer_bits: self.answers.bits as u64,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Natives (registered with RegisterNatives at VMInit). Nothing unwinds into the JVM.

/// Whether this thread is inside the recorder (its probes are off; see [`ThreadState`]).
pub fn thread_busy() -> bool {
    TLS.try_with(|t| t.busy.get()).unwrap_or(true)
}

fn with_recorder<R>(default: R, f: impl FnOnce(&'static Recorder) -> R) -> R {
    if thread_busy() {
        return default;
    }
    let Some(r) = crate::hook::recorder() else { return default };
    catch_unwind(AssertUnwindSafe(|| f(r))).unwrap_or(default)
}

/// Throws, as the native method called on `env` returns, what was delivered to its thread while
/// the agent's Java helper ran ([`keep_if_delivered`]). Called by the natives that record events
/// (`enter0`, `mark`), the only ones that call the helpers: `Lucce.context()` pays nothing.
fn throw_delivered(env: Jni) {
    if let Some(delivered) = TLS.try_with(|t| t.delivered.replace(std::ptr::null_mut())).ok().filter(|e| !e.is_null()) {
        env.throw(delivered);
        env.delete_global_ref(delivered);
    }
}

/// Keeps `thrown`, an exception a Java helper of the agent threw (`truth`, `threadName`), to be
/// thrown again to the program if it is not the helper's own: `Thread.stop`'s ThreadDeath, or
/// what a debugger throws into the thread, arrive wherever the thread is, and the program must
/// see them (cleared here, they were lost: a thread stopped during `verify=2` ran on). What the
/// helper's own work throws is the JVM's kind (a StackOverflowError near the end of the stack,
/// an OutOfMemoryError), and the program did not cause it: dropped, the event then keeps no JVM
/// trace.
fn keep_if_delivered(env: Jni, thrown: jobject) {
    let vm_error = env.find_class(c"java/lang/VirtualMachineError");
    let own = vm_error.is_null() || env.is_instance_of(thrown, vm_error);
    env.delete_local_ref(vm_error);
    if !own {
        let _ = TLS.try_with(|t| {
            if t.delivered.get().is_null() {
                t.delivered.set(env.new_global_ref(thrown));
            }
        });
    }
    env.delete_local_ref(thrown);
}

extern "C" fn enter0(env: *mut JniEnv, _cls: jclass, method: jint, _slot: jlong) -> jlong {
    // `_slot` is this thread's slot, known from TLS already (attach0 put it there).
    let ctx = with_recorder(Context::default(), |r| r.enter(Jni(env), method as u32));
    throw_delivered(Jni(env));
    ctx.c as jlong
}

extern "C" fn attach0(_env: *mut JniEnv, _cls: jclass, tid: jlong) -> jlong {
    with_recorder(std::ptr::null(), |r| r.attach(tid)) as jlong
}

extern "C" fn mark(env: *mut JniEnv, _cls: jclass, label: jstring) {
    with_recorder((), |r| {
        let label = Jni(env).string(label);
        r.mark(Jni(env), label)
    });
    throw_delivered(Jni(env));
}

extern "C" fn context(_env: *mut JniEnv, _cls: jclass) -> jlong {
    with_recorder(0, |r| r.context()) as jlong
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte reads back as its kind (five invokes, the void return, the rest), at every
    /// position in its byte of two-bit kinds; past the end there is none.
    #[test]
    fn op_kinds_read_back() {
        let code: Vec<u8> = (0..=255u8).chain([0xB6, 0xB1, 0xBA, 0x00, 0xB0, 0xB7]).collect();
        let kinds = OpKinds::of(&code);
        for (i, &op) in code.iter().enumerate() {
            let want = match op {
                0xB6..=0xBA => OpKind::Invoke,
                0xB1 => OpKind::Return,
                _ => OpKind::Other,
            };
            assert_eq!(kinds.get(i), Some(want), "byte {i} (opcode {op:#x})");
        }
        assert_eq!(kinds.get(code.len()), None);
        assert_eq!(OpKinds::of(&[]).get(0), None);
    }

    /// A page of exclusive slots goes back to the system when the last of its 64 threads ends,
    /// not before; and slot 0 (the sink) is no thread's home.
    #[test]
    fn exclusive_slots_free_whole_pages() {
        let slots = Slots::map(EXCLUSIVE_SLOTS).expect("map");
        assert!(slots.exclusive(), "256 GiB of address space could not be reserved here");
        assert_eq!(slots.home(0).tid.load(Ordering::Relaxed), -1);
        let page: Vec<&Slot> = (64..128).map(|tid| slots.home(tid)).collect();
        for (s, tid) in page.iter().zip(64..) {
            s.tid.store(tid, Ordering::Relaxed);
            s.c.store(7, Ordering::Relaxed);
        }
        for s in &page[..63] {
            slots.release(s);
        }
        assert!(page.iter().all(|s| s.c.load(Ordering::Relaxed) == 7), "a page with a live thread was dropped");
        assert!(page[..63].iter().all(|s| s.tid.load(Ordering::Relaxed) == 0));
        slots.release(page[63]);
        assert!(page.iter().all(|s| s.c.load(Ordering::Relaxed) == 0), "the page of 64 ended threads was kept");
        assert!(lock(&slots.ended).is_empty());
    }

    /// A record whose version is unknown (a frame entered while its thread's tid was 0) is
    /// consumed but never trusted; any other is taken once.
    #[test]
    fn records_of_unknown_version_are_none() {
        let slots = Slots::map(64).expect("map");
        let slot = slots.home(3);
        TLS.with(|t| t.slot.set(slot));
        let pend = |v: u64| {
            slot.site.store(9, Ordering::Relaxed);
            slot.c.store(4, Ordering::Relaxed);
            slot.v.store(v, Ordering::Relaxed);
            slot.valid.store(1, Ordering::Relaxed);
        };
        pend(UNKNOWN_VERSION);
        assert_eq!(take_pending(), None);
        assert_eq!(slot.valid.load(Ordering::Relaxed), 0, "the record must be consumed");
        pend(5);
        assert_eq!(take_pending(), Some((9, Context { c: 4, v: 5 })));
        assert_eq!(take_pending(), None, "a record is taken once");
        TLS.with(|t| t.slot.set(std::ptr::null()));
    }

    #[test]
    fn checked_slots_keep_their_pages() {
        let slots = Slots::map(64).expect("map");
        assert!(!slots.exclusive());
        let s = slots.home(5);
        s.tid.store(5, Ordering::Relaxed);
        s.c.store(7, Ordering::Relaxed);
        slots.release(s);
        assert_eq!((s.tid.load(Ordering::Relaxed), s.c.load(Ordering::Relaxed)), (0, 7));
    }
}
