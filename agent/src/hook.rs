//! The agent's life in the JVM: setup at `Agent_OnLoad`, the ClassFileLoadHook that rewrites
//! classes, the VMInit batch retransformation, and the VMDeath summary.
//!
//! Phases:
//! - OnLoad: options, capabilities, counter memory, callbacks. Nothing is rewritten yet.
//! - Before VMInit no class is hooked. Instrumented code calls `lucce/Runtime`, which does not
//!   exist before VMInit, and early in startup the boot loader cannot load classes from outside
//!   java.base anyway.
//! - VMInit: define `lucce/Runtime` into the boot loader, switch the hook on (in an environment
//!   made then, see `Agent::enable_load_hook`), then retransform every
//!   modifiable class loaded so far in ONE `RetransformClasses` call (class by class only if the
//!   batch is refused).
//! - VMDeath: the summary (and the count check).
//!
//! Every callback runs inside `catch_unwind`; a panic in the agent is logged and the class (or
//! event) is left as the JVM gave it.

use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_uchar, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crate::class_cache::{ClassCache, ClassReport};
use crate::count_check::CountCheck;
use crate::diag;
use crate::registry::MethodRecord;
use crate::jvmti::{self, jbyteArray, jclass, jint, jmethodID, jobject, jthread, Capabilities, EventCallbacks, Jni, JniEnv, Jvmti, JvmtiEnv};
use crate::options::{AfterAgents, Options};
use crate::ref_threads;
use crate::recorder::{lock, Recorder};
use crate::registry::Registry;
use crate::rewrite::{drop_at_handlers_with, rewrite_class_with};
use crate::runtime::{self, Counters};
use crate::summary::{Stats, Summary};

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("no JVMTI 1.2 environment")]
    NoJvmti,
    #[error("the JVM cannot {0}")]
    MissingCapability(&'static str),
    #[error("JVMTI call {0} failed: {1}")]
    Jvmti(&'static str, jvmti::Error),
    #[error(transparent)]
    Runtime(#[from] runtime::RuntimeError),
    #[error("the agent was loaded twice")]
    AlreadyLoaded,
    #[error("{0}")]
    Store(String),
}

pub struct Agent {
    jvmti: Jvmti,
    /// With `retransform` on: the environment of the VMInit batch ([`retransformer`]).
    retransformer: Option<Jvmti>,
    options: Options,
    options_text: String,
    registry: Registry,
    stats: Mutex<Stats>,
    counters: &'static Counters,
    count_check: Option<CountCheck>,
    /// Record mode (`out=`): the encoder and the store.
    recorder: Option<&'static Recorder>,
    /// With `cache=DIR`, when it opened.
    cache: Option<ClassCache>,
    /// Until the VMInit batch has been assembled: names of classes the hook rewrote at first load,
    /// so that the batch does not retransform them a second time.
    hooked_early: Mutex<Option<HashSet<String>>>,
    /// Where the load hook is on, from VMInit (`Agent::enable_load_hook`).
    load_hook: Mutex<Option<LoadHook>>,
    /// While the VMInit batch runs (its classes' current versions are not rewritten: no
    /// redefinition of rewritten code to tell the recorder of).
    in_batch: AtomicBool,
    dead: AtomicBool,
}

/// The JVMTI environment whose load hook is on.
struct LoadHook {
    env: Jvmti,
    /// Times it moved to a new environment, after a Java agent attached or the flight recorder
    /// started ([`MAX_MOVES`] at most).
    moves: u32,
    /// When the attach thread last loaded a class.
    last_attach_class: Option<Instant>,
    /// Whether it moved after the flight recorder's environment (once: the environment made
    /// then sees the same load of `JDKEvents` again).
    after_flight_recorder: bool,
}

/// Moves of the load hook after attached Java agents and the flight recorder, at most: each
/// leaves an environment behind (disabled, but the JVM passes every event by it).
const MAX_MOVES: u32 = 16;
/// Classes the attach thread loads closer together than this belong to one attach (the load hook
/// moves once for them).
const ATTACH_QUIET: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether any method of `class` has bytecode (is neither abstract nor native); true when
/// JVMTI cannot say.
fn has_code(jvmti: Jvmti, class: jclass) -> bool {
    const ABSTRACT_OR_NATIVE: jint = (crate::rewrite::ACC_ABSTRACT | crate::rewrite::ACC_NATIVE) as jint;
    let Ok(methods) = jvmti.class_methods(class) else { return true };
    methods.iter().any(|&m| jvmti.method_modifiers(m).map_or(true, |f| f & ABSTRACT_OR_NATIVE == 0))
}

/// Classes per `RetransformClasses` call of the VMInit batch. The JVM parses all classes of one
/// call into one resource area and keeps their new versions until the call returns; its arena
/// chunks then go to a pool the process keeps. Hello World under the counting agent, NMT at
/// exit: 353 classes in one call left 8.7 MB of "Arena Chunk" and 6.0 MB of Metaspace; calls
/// of 64 left 2.0 and 4.2 MB, calls of 16 0.8 and 4.1 MB (peak RSS 21 MB above the run without
/// the agent → 11 MB), and the batch took no longer (57–61 ms against 61–65 ms in one call).
/// But each call is a VM operation that walks every loaded class's constant-pool cache
/// (`VM_RedefineClasses::doit`, `AdjustAndCleanMetadata`): in calls of 16 that walk took 17–19
/// ms of the VM thread's CPU in a Hello World's start, in calls of 32 10 ms, 64 5 ms (perf, four
/// runs each, stop 68). Calls of 32: its start 0.195 → 0.174 s, peak RSS +0.5 MiB (calls of 64:
/// 0.180 s, +1.4 MiB).
const RETRANSFORM_CHUNK: usize = 32;

static AGENT: OnceLock<Agent> = OnceLock::new();
static RECORDER: OnceLock<Recorder> = OnceLock::new();

/// The recorder, in record mode.
pub fn recorder() -> Option<&'static Recorder> {
    RECORDER.get()
}

/// The method of a site the rewriter registered.
pub fn site_method(site: u32) -> Option<u32> {
    site_position(site).map(|(m, _)| m)
}

/// Whether `method` has the name and descriptor that call site `site`'s instruction references,
/// so that entering it straight from that site can be the call itself (and not an upcall the JVM
/// made while resolving the call).
pub fn site_may_call(site: u32, method: u32) -> bool {
    let Some(agent) = agent() else { return false };
    let t = agent.registry.tables();
    match (t.sites.get(site as usize), t.methods.get(method as usize)) {
        (Some(Some(s)), Some(Some(m))) => {
            // An invokedynamic's adapter for a call site that is not constant has another name.
            let name = if m.name() == "linkToCallSite" { crate::rewrite::INDY_ADAPTER } else { m.name() };
            s.target == crate::rewrite::ANY_TARGET || s.target == crate::rewrite::target_key_of_text(name, m.descriptor())
        }
        _ => false,
    }
}

/// The record of method `id`, if the rewriter registered it.
pub fn method_record(id: u32) -> Option<MethodRecord> {
    agent()?.registry.tables().methods.get(id as usize).cloned().flatten()
}

/// `class.name descriptor` of a method the rewriter registered (for the log).
pub fn method_label(id: u32) -> Option<String> {
    method_record(id).map(|m| format!("{}.{}{}", m.class(), m.name(), m.descriptor()))
}

/// Whether method id `id` is a leaf (`rewrite::MethodInfo::leaf`).
pub fn is_leaf(id: u32) -> bool {
    method_named(id, None) == Some(true)
}

/// Whether method id `id`, given its internal class name, name and descriptor, is that method
/// (any method the rewriter registered with None), and then whether it is a leaf.
pub fn method_named(id: u32, named: Option<(&str, &str, &str)>) -> Option<bool> {
    let m = method_record(id)?;
    named.is_none_or(|(class, name, desc)| m.class() == class && m.name() == name && m.descriptor() == desc).then_some(m.leaf)
}

/// The `target` key of a site the rewriter registered (see `rewrite::SiteInfo`).
pub fn site_target(site: u32) -> Option<u64> {
    let t = agent()?.registry.tables();
    t.sites.get(site as usize).and_then(|s| s.as_ref()).map(|s| s.target)
}

/// The method and line of a site the rewriter registered.
pub fn site_position(site: u32) -> Option<(u32, i32)> {
    let t = agent()?.registry.tables();
    t.sites.get(site as usize).and_then(|s| s.as_ref()).map(|s| (s.method, s.line()))
}

/// `private static native byte[] hidden0(byte[])` of `lucce/Runtime`, found by the VM's native
/// lookup like `counters`: the rewritten bytes of a hidden class about to be defined, or null to
/// define it as it is (not wanted, nothing to rewrite, an error, which the summary counts, or a
/// thread inside the recorder, whose probes are off).
#[no_mangle]
pub extern "C" fn Java_lucce_Runtime_hidden0(env: *mut JniEnv, _cls: jclass, bytes: jbyteArray) -> jbyteArray {
    catch_unwind(|| {
        let a = agent().filter(|_| !crate::recorder::thread_busy())?;
        let jni = Jni(env);
        let bytes = jni.byte_array(bytes)?;
        let mut out = Vec::new();
        let allocate = |n: usize| {
            out = vec![0u8; n];
            out.as_mut_ptr()
        };
        a.on_class(None, Arrival::Hidden, &bytes, allocate)?;
        Some(jni.new_byte_array(&out))
    })
    .ok()
    .flatten()
    .unwrap_or(std::ptr::null_mut())
}

/// Whether the options instrument this class (an internal or a binary name: the patterns read
/// slashes as dots).
pub fn class_wanted(internal: &str) -> bool {
    agent().is_some_and(|a| a.options.wants(internal))
}

/// A fresh method id from the same sequence as the rewriter's.
pub fn reserve_method() -> Option<u32> {
    Some(agent()?.registry.reserve_method())
}

/// A fresh site id from the same sequence as the rewriter's.
pub fn reserve_site() -> Option<u32> {
    Some(agent()?.registry.reserve_site())
}

/// Everything `Agent_OnLoad` does after parsing the options.
///
/// # Safety
/// `vm` must be the `JavaVM*` the JVM passed to `Agent_OnLoad`.
pub unsafe fn install(vm: *mut jvmti::JavaVM, options: Options, options_text: String) -> Result<(), SetupError> {
    if AGENT.get().is_some() {
        return Err(SetupError::AlreadyLoaded);
    }
    // SAFETY: forwarded from the caller's contract.
    let jvmti = unsafe { jvmti::JavaVM::get_jvmti(vm) }.ok_or(SetupError::NoJvmti)?;
    let potential = jvmti.potential_capabilities().map_err(|e| SetupError::Jvmti("GetPotentialCapabilities", e))?;
    let mut caps = Capabilities::default();
    let mut want = vec![(Capabilities::GENERATE_ALL_CLASS_HOOK_EVENTS, "generate all class hook events")];
    if !options.count_check.is_empty() {
        want.push((Capabilities::GENERATE_METHOD_ENTRY_EVENTS, "generate method entry events"));
    }
    if options.out.is_some() {
        want.push((Capabilities::ACCESS_LOCAL_VARIABLES, "access local variables"));
        want.push((Capabilities::GET_LINE_NUMBERS, "get line numbers"));
        want.push((Capabilities::GET_BYTECODES, "get bytecodes"));
    }
    for (bit, what) in want {
        if !potential.has(bit) {
            return Err(SetupError::MissingCapability(what));
        }
        caps.set(bit);
    }
    // Optional: to identify a frame inside its first entry probe by the id the probe pushes
    // (recorder.rs, learn_entering), when that id is a constant of the class's pool.
    if options.out.is_some() && potential.has(Capabilities::GET_CONSTANT_POOL) {
        caps.set(Capabilities::GET_CONSTANT_POOL);
    }
    // Optional, for the class cache: the bytes HotSpot rebuilds for a retransformation list the
    // methods in the order the class file had, not sorted by where their names' symbols happen
    // to lie in this run (which differs from run to run for classes not from the CDS archive:
    // each run would miss them in the cache, and add them again).
    if options.cache.is_some() && potential.has(Capabilities::MAINTAIN_ORIGINAL_METHOD_ORDER) {
        caps.set(Capabilities::MAINTAIN_ORIGINAL_METHOD_ORDER);
    }
    jvmti.add_capabilities(&caps).map_err(|e| SetupError::Jvmti("AddCapabilities", e))?;
    let retransformer = if options.retransform {
        // SAFETY: forwarded from the caller's contract.
        Some(unsafe { retransformer(vm) }?)
    } else {
        None
    };
    let counters = runtime::install_counters(options.counters, options.out.is_some())?;
    let count_check = (!options.count_check.is_empty()).then(CountCheck::default);
    let (recorder, registry) = match &options.out {
        Some(out) => {
            let r = Recorder::create(jvmti, out.clone(), &options).map_err(SetupError::Store)?;
            let r: &'static Recorder = RECORDER.get_or_init(|| r);
            let registry = r.registry();
            registry.set_sink(Box::new(move |m, s| r.define(m, s)));
            counters.set_record_header(&r.tables());
            (Some(r), registry)
        }
        None => (None, Registry::new()),
    };
    // The cache only saves time: a run without it loses nothing, so it does not stop the agent.
    let cache = options.cache.as_deref().and_then(|dir| match ClassCache::open(dir, registry.probes(), registry.jdk_leaves()) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("lucce-agent: class cache off: {e}");
            None
        }
    });
    let agent = Agent {
        jvmti,
        retransformer,
        options,
        options_text,
        registry,
        stats: Mutex::new(Stats::default()),
        counters,
        count_check,
        recorder,
        cache,
        hooked_early: Mutex::new(Some(HashSet::new())),
        load_hook: Mutex::new(None),
        in_batch: AtomicBool::new(false),
        dead: AtomicBool::new(false),
    };
    if AGENT.set(agent).is_err() {
        return Err(SetupError::AlreadyLoaded);
    }
    let mut cb = EventCallbacks::new();
    cb.vm_init(vm_init);
    cb.vm_death(vm_death);
    cb.class_file_load_hook(class_file_load_hook);
    cb.method_entry(method_entry);
    cb.thread_end(thread_end);
    jvmti.set_event_callbacks(&cb).map_err(|e| SetupError::Jvmti("SetEventCallbacks", e))?;
    if let Some(r) = retransformer {
        r.set_event_callbacks(&cb).map_err(|e| SetupError::Jvmti("SetEventCallbacks", e))?;
    }
    // The load hook is enabled at VMInit (`Agent::enable_load_hook`).
    let mut events = vec![jvmti::JVMTI_EVENT_VM_INIT, jvmti::JVMTI_EVENT_VM_DEATH];
    if recorder.is_some() {
        events.push(jvmti::JVMTI_EVENT_THREAD_END);
    }
    for ev in events {
        jvmti
            .set_event_notification_mode(true, ev, std::ptr::null_mut())
            .map_err(|e| SetupError::Jvmti("SetEventNotificationMode", e))?;
    }
    diag!(Info, "loaded; counters at {:#x}", counters.base_address());
    Ok(())
}

/// The environment that retransforms the classes loaded before VMInit: its own, because the JVM
/// keeps a copy of the original bytes of every class that an environment able to retransform
/// changes in its load hook (`JvmtiCachedClassFileData`, NMT's "Internal": 8.4 MB in
/// lucene_search); so only this one can, and its hook is on only during the VMInit batch (unless
/// a Java agent makes the load hook's own environment retransform: `Agent::enable_load_hook`).
///
/// # Safety
/// `vm` must be the `JavaVM*` the JVM passed to `Agent_OnLoad`.
unsafe fn retransformer(vm: *mut jvmti::JavaVM) -> Result<Jvmti, SetupError> {
    // SAFETY: forwarded from the caller's contract; every GetEnv makes a new environment.
    let env = unsafe { jvmti::JavaVM::get_jvmti(vm) }.ok_or(SetupError::NoJvmti)?;
    let potential = env.potential_capabilities().map_err(|e| SetupError::Jvmti("GetPotentialCapabilities", e))?;
    let mut caps = Capabilities::default();
    for (bit, what) in [
        (Capabilities::RETRANSFORM_CLASSES, "retransform classes"),
        (Capabilities::RETRANSFORM_ANY_CLASS, "retransform any class"),
    ] {
        if !potential.has(bit) {
            return Err(SetupError::MissingCapability(what));
        }
        caps.set(bit);
    }
    env.add_capabilities(&caps).map_err(|e| SetupError::Jvmti("AddCapabilities", e))?;
    Ok(env)
}

fn agent() -> Option<&'static Agent> {
    AGENT.get()
}

/// Converts a panic payload to text for the log.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

// ---------------------------------------------------------------------------------------------
// ClassFileLoadHook

unsafe extern "C" fn class_file_load_hook(
    jvmti: *mut JvmtiEnv,
    jni: *mut JniEnv,
    class_being_redefined: jclass,
    _loader: jobject,
    name: *const c_char,
    _protection_domain: jobject,
    class_data_len: jint,
    class_data: *const c_uchar,
    new_class_data_len: *mut jint,
    new_class_data: *mut *mut c_uchar,
) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let Some(a) = agent() else { return };
        if a.retransformer.is_some_and(|r| r.0 == jvmti) && class_being_redefined.is_null() {
            // A class loaded during the VMInit batch: the main environment, called first, did it.
            return;
        }
        if class_data.is_null() || class_data_len <= 0 || new_class_data.is_null() || new_class_data_len.is_null() {
            return;
        }
        if !jni.is_null() && on_attach_thread() {
            a.follow_attached_agent(Jni(jni));
        }
        let name = if name.is_null() {
            None
        } else {
            // SAFETY: the JVM passes a NUL-terminated class name valid for the callback.
            Some(unsafe { CStr::from_ptr(name) }.to_string_lossy())
        };
        if !jni.is_null() && class_being_redefined.is_null() && name.as_deref().is_some_and(instruments_for_flight_recorder) {
            a.follow_flight_recorder(Jni(jni));
        }
        // SAFETY: the JVM guarantees `class_data` points at `class_data_len` readable bytes for
        // the duration of the callback.
        let bytes = unsafe { std::slice::from_raw_parts(class_data, class_data_len as usize) };
        let arrival = if class_being_redefined.is_null() { Arrival::Load } else { Arrival::Retransform };
        if let Some(r) = a.recorder.filter(|_| arrival == Arrival::Retransform && !a.in_batch.load(Ordering::Acquire)) {
            r.redefining(class_being_redefined);
        }
        let allocate = |n| a.jvmti.allocate(n).unwrap_or(std::ptr::null_mut());
        if let Some(new) = a.on_class(name.as_deref(), arrival, bytes, allocate) {
            // SAFETY: both out-pointers were checked non-null above and are the JVM's to receive
            // a buffer from JVMTI Allocate (which `on_class` used).
            unsafe {
                *new_class_data_len = new.1;
                *new_class_data = new.0;
            }
        }
    }));
    if let Err(p) = r {
        diag!(Error, "panic in ClassFileLoadHook: {}", panic_text(&*p));
    }
}

/// What the load hook works with once the agent is live, borrowed from the [`Agent`]: the hook's
/// work without the JVM around it, so that examples/rewrite_dir.rs can time it on a directory of
/// classes.
pub struct HookState<'a> {
    pub options: &'a Options,
    pub registry: &'a Registry,
    pub stats: &'a Mutex<Stats>,
    pub recorder: Option<&'static Recorder>,
    pub hooked_early: &'a Mutex<Option<HashSet<String>>>,
    pub cache: Option<&'a ClassCache>,
}

/// How a class reaches the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Loaded (or defined) for the first time: the ClassFileLoadHook.
    Load,
    /// Retransformed (the VMInit batch).
    Retransform,
    /// A hidden class (lambda proxy, lambda form, `Lookup.defineHiddenClass`), which no
    /// ClassFileLoadHook sees: its bytes are handed over by `lucce/Runtime.hidden`, called at the
    /// entry of `JavaLangAccess.defineClass` (`rewrite::probes::DEFINE_HOOK`). Every method of it
    /// is registered as a frame the JVM leaves out of stack traces.
    Hidden,
}

/// Where the hook's rewritten class went.
enum Output {
    /// Into a fresh allocation (pointer, length).
    Copied(*mut u8, usize),
    /// Not yet allocated (an unnamed class, still to be filtered).
    Held(Vec<u8>),
    /// The allocation failed.
    Failed,
}

/// Concatenates `parts` into one allocation from `allocate` (see [`HookState::on_class`]).
fn copy_parts(parts: &[&[u8]], allocate: impl FnOnce(usize) -> *mut u8) -> Output {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let p = allocate(len);
    if p.is_null() {
        return Output::Failed;
    }
    let mut at = 0;
    for part in parts {
        // SAFETY: `allocate` returned a fresh allocation of `len` bytes (its contract), and the
        // parts add up to `len`, so `at + part.len() <= len`; a fresh allocation does not overlap
        // the rewriter's buffers.
        unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), p.add(at), part.len()) };
        at += part.len();
    }
    Output::Copied(p, len)
}

/// A class a recording leaves out, with a drop probe first in each exception handler
/// ([`drop_at_handlers_with`]), in an allocation from `allocate`; None to leave it as it
/// is (no handler, or it could not be parsed).
fn left_out(name: &str, bytes: &[u8], allocate: impl FnOnce(usize) -> *mut u8) -> Option<(*mut u8, jint)> {
    let result = catch_unwind(AssertUnwindSafe(|| drop_at_handlers_with(bytes, |parts| copy_parts(parts, allocate))));
    match result {
        Ok(Ok((Some(Output::Copied(p, len)), _))) => Some((p, len as jint)),
        Ok(Ok((None, _))) => None,
        Ok(Ok((Some(_), _))) => {
            diag!(Info, "{name} (left out): no memory for its drop probes");
            None
        }
        Ok(Err(e)) => {
            diag!(Info, "{name} (left out) not given drop probes: {e:?}");
            None
        }
        Err(p) => {
            diag!(Info, "{name} (left out) not given drop probes: panic: {}", panic_text(&*p));
            None
        }
    }
}

impl HookState<'_> {
    /// Rewrites one class (the live hook); returns the new class bytes and their length.
    /// `allocate(n)` must return null or a fresh allocation of `n` writable bytes, which the
    /// caller then owns (JVMTI Allocate in the agent).
    pub fn on_class(
        &self,
        name: Option<&str>,
        arrival: Arrival,
        bytes: &[u8],
        allocate: impl FnOnce(usize) -> *mut u8,
    ) -> Option<(*mut u8, jint)> {
        if let Some(n) = name {
            if !self.options.wants(n) {
                // A recording gives a left-out class's handlers drop probes (nothing to record
                // in counting mode).
                let out = self.recorder.and_then(|_| left_out(n, bytes, allocate));
                let mut s = lock(self.stats);
                s.hook_calls += 1;
                s.classes_excluded += 1;
                s.classes_excluded_given_drops += out.is_some() as u64;
                return out;
            }
        }
        let mut registrar = match arrival {
            Arrival::Hidden => self.registry.hidden_class_registrar(),
            Arrival::Load => self.registry.registrar(),
            Arrival::Retransform => self.registry.retransform_registrar(),
        };
        let mut allocate = Some(allocate);
        let timed = self.options.wants_summary();
        // The class read in first, timed apart (`page_in`); the CPU clock (a system call)
        // outside the wall clock's interval.
        let (page_in_cpu0, cpu0) = if timed {
            let before = thread_cpu_ns();
            page_in(bytes);
            (before, thread_cpu_ns())
        } else {
            (0, 0)
        };
        let t0 = timed.then(Instant::now);
        let result = catch_unwind(AssertUnwindSafe(|| {
            let output = |parts: &[&[u8]]| match name {
                // Straight into the JVM's buffer: one copy, no Vec.
                Some(_) => match allocate.take() {
                    Some(allocate) => copy_parts(parts, allocate),
                    None => Output::Failed,
                },
                // Unnamed: the filter still has to see the name; allocate only if it is kept.
                None => Output::Held(parts.concat()),
            };
            // Hidden classes too: most recur byte for byte (lambda forms; lambda proxies, whose
            // names are numbered, as long as the program makes its lambdas in the same order).
            // The VMInit batch keeps the rewriter's own bytes: HotSpot merges a retransformed
            // class's constant pool into the old one, searching the whole pool for each constant
            // the new class adds (VM_RedefineClasses::merge_constant_pools), and a class served
            // with placeholders adds one per id where the rewriter pushes the batch's small ids
            // inline (Hello World's batch: 400-490 ms instead of 110-140).
            match (self.cache, arrival) {
                (Some(cache), Arrival::Retransform) => cache.serve_exact(bytes, &mut registrar, output),
                (Some(cache), _) => cache.serve(bytes, &mut registrar, output),
                (None, _) => rewrite_class_with(bytes, &mut registrar, output).map(|(o, cs)| (o, ClassReport::from(cs))),
            }
        }));
        let ns = t0.map_or(0, |t| t.elapsed().as_nanos() as u64);
        let cpu_ns = if timed { thread_cpu_ns().saturating_sub(cpu0).saturating_sub(cpu_clock_cost()) } else { 0 };
        let page_in_cpu_ns = if timed { cpu0.saturating_sub(page_in_cpu0).saturating_sub(cpu_clock_cost()) } else { 0 };
        // Borrowed: most classes never need the name as a String.
        let label = name.unwrap_or("<unnamed>");
        if timed {
            // Per class, for scripts/class_times.sh (which classes the time goes to).
            diag!(Debug, "class time: {label} {cpu_ns} ns of CPU, {ns} ns, paged in in {page_in_cpu_ns} ns of CPU");
        }
        let mut out = None;
        let mut stats = lock(self.stats);
        stats.hook_calls += 1;
        stats.page_in_cpu_ns_total += page_in_cpu_ns;
        match result {
            Err(p) => {
                stats.classes_seen += 1;
                stats.timed(label, ns, cpu_ns);
                stats.failed(label, format!("Panic: {}", panic_text(&*p)));
            }
            Ok(Err(e)) => {
                stats.classes_seen += 1;
                stats.timed(label, ns, cpu_ns);
                diag!(Info, "{label} not rewritten: {e:?}");
                stats.failed(label, format!("{e:?}"));
            }
            Ok(Ok((new, cs))) => {
                // Classes defined without a name are filtered only now that the name is known
                // (their bytes are still held, nothing was allocated).
                if name.is_none() && !self.options.wants(&cs.class_name) {
                    stats.classes_excluded += 1;
                    return None;
                }
                stats.classes_seen += 1;
                stats.timed(&cs.class_name, ns, cpu_ns);
                stats.methods_with_code += cs.methods_with_code as u64;
                stats.methods_rewritten += cs.methods_rewritten as u64;
                if cs.probes_renewed {
                    diag!(Info, "{}: came to the load hook with lucce's probes in it (another agent transformed lucce's rewrite, or the hook moved during its load): probes renewed", cs.class_name);
                }
                for (method, reason) in &cs.entry_only {
                    diag!(Info, "{}.{method} has an entry probe only: {reason}", cs.class_name);
                    stats.entry_only(reason);
                }
                for (method, reason) in &cs.skipped {
                    diag!(Info, "{}.{method} skipped: {reason}", cs.class_name);
                    if let Some(r) = self.recorder {
                        r.unrewritten(&cs.class_name, method);
                    }
                    stats.skipped(&cs.class_name, method, reason.clone());
                }
                let new = match (new, allocate.take()) {
                    (Some(Output::Held(v)), Some(allocate)) => Some(copy_parts(&[&v], allocate)),
                    (new, _) => new,
                };
                match new {
                    None => stats.classes_unchanged += 1,
                    Some(Output::Copied(p, len)) => {
                        stats.classes_rewritten += 1;
                        out = Some((p, len as jint));
                    }
                    Some(_) => stats.failed(&cs.class_name, "JvmtiAllocateFailed".to_string()),
                }
            }
        }
        drop(stats);
        if out.is_some() {
            registrar.publish();
            if arrival == Arrival::Load {
                if let Some(set) = lock(self.hooked_early).as_mut() {
                    set.insert(label.to_string());
                }
            }
        }
        out
    }
}

impl Agent {
    /// Decides about one class; returns new class bytes (JVMTI-allocated) and their length.
    fn on_class(&self, name: Option<&str>, arrival: Arrival, bytes: &[u8], allocate: impl FnOnce(usize) -> *mut u8) -> Option<(*mut u8, jint)> {
        let hook = HookState {
            options: &self.options,
            registry: &self.registry,
            stats: &self.stats,
            recorder: self.recorder,
            hooked_early: &self.hooked_early,
            cache: self.cache.as_ref(),
        };
        hook.on_class(name, arrival, bytes, allocate)
    }

    /// VMInit: runtime class, hook on, one batch retransformation of what was loaded before.
    fn on_vm_init(&self, jni: Jni) {
        let runtime_class = match runtime::define_runtime_class(self.jvmti, jni) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("lucce-agent: {e}; classes will not be instrumented");
                return;
            }
        };
        if let Some(r) = self.recorder {
            let ready = runtime::define_api_class(jni).map_err(|e| e.to_string()).and_then(|api| {
                let done = r.on_vm_init(jni, runtime_class, api).map_err(|c| runtime::RuntimeError::Natives(c).to_string());
                jni.delete_local_ref(api);
                done
            });
            if let Err(e) = ready {
                eprintln!("lucce-agent: {e}; classes will not be instrumented");
                return;
            }
        }
        jni.delete_local_ref(runtime_class);
        if let Some(_cc) = &self.count_check {
            if let Err(e) = self.jvmti.set_event_notification_mode(true, jvmti::JVMTI_EVENT_METHOD_ENTRY, std::ptr::null_mut()) {
                diag!(Error, "cannot enable MethodEntry events for count_check: {e}");
            }
        }
        // The hook goes on only now, once the runtime class its probes call exists.
        let load_env = self.enable_load_hook(jni);
        // Present exactly when the `retransform` option is on.
        let Some(retransformer) = self.retransformer else {
            *lock(&self.hooked_early) = None;
            return;
        };
        // A load hook that can retransform does the batch itself, after the Java agents'
        // transformers; its hook stays on.
        let toggled = load_env.is_none();
        let retransformer = load_env.unwrap_or(retransformer);
        let t0 = Instant::now();
        let classes = match self.jvmti.loaded_classes() {
            Ok(c) => c,
            Err(e) => {
                diag!(Error, "GetLoadedClasses failed: {e}");
                return;
            }
        };
        let hooked = lock(&self.hooked_early).take().unwrap_or_default();
        let mut batch: Vec<(jclass, String)> = Vec::new();
        let (mut hidden, mut without_code) = (0, 0);
        for &c in &classes {
            let Ok(sig) = self.jvmti.class_signature(c) else { continue };
            // Only `Lname;` (arrays and primitives are never modifiable anyway).
            let Some((name, is_hidden)) = jvmti::signature_class(&sig) else { continue };
            if !retransformer.is_modifiable_class(c).unwrap_or(false) {
                // Hidden classes defined before the runtime class existed: never instrumented
                // (JVMTI cannot retransform a hidden class).
                hidden += is_hidden as u64;
                continue;
            }
            if self.options.wants(name) && !hooked.contains(name) {
                // A class without code (an interface of abstract methods only) would come back
                // unchanged, but HotSpot would redefine it all the same: 33 of a Hello World's 355.
                if has_code(self.jvmti, c) {
                    batch.push((c, name.to_string()));
                } else {
                    without_code += 1;
                }
            }
        }
        // By name: GetLoadedClasses's order varies a little from run to run, and the class cache
        // serves a class of the batch only when it meets the ids of its earlier run
        // (`ClassCache::serve_exact`), which depend on every class before it.
        batch.sort_unstable_by(|a, b| a.1.cmp(&b.1));
        let hook = |on| if toggled { set_load_hook(retransformer, on) } else { Ok(()) };
        if let Err(e) = hook(true) {
            diag!(Error, "cannot enable the retransforming load hook: {e}");
        }
        let (mut ok, mut failed, mut batch_ok, mut examples) = (0, 0, true, Vec::new());
        self.in_batch.store(true, Ordering::Release);
        for chunk in batch.chunks(RETRANSFORM_CHUNK) {
            let refs: Vec<jclass> = chunk.iter().map(|(c, _)| *c).collect();
            let Err(e) = retransformer.retransform_classes(&refs) else {
                ok += refs.len() as u64;
                continue;
            };
            // RetransformClasses is all-or-nothing: find the culprits one by one.
            diag!(Warn, "retransforming a batch of {} classes failed ({e}); retrying one by one", refs.len());
            batch_ok = false;
            for (c, name) in chunk {
                match retransformer.retransform_classes(&[*c]) {
                    Ok(()) => ok += 1,
                    Err(e) => {
                        failed += 1;
                        diag!(Warn, "retransforming {name} failed: {e}");
                        if examples.len() < 40 {
                            examples.push(format!("{name}: {e}"));
                        }
                    }
                }
            }
        }
        self.in_batch.store(false, Ordering::Release);
        if let Err(e) = hook(false) {
            diag!(Warn, "cannot disable the retransforming load hook: {e}");
        }
        for &c in &classes {
            jni.delete_local_ref(c);
        }
        let mut s = lock(&self.stats);
        s.retransform.candidates = batch.len() as u64;
        s.retransform.hidden_left_alone = hidden;
        s.retransform.without_code = without_code;
        s.retransform.retransformed = ok;
        s.retransform.failed = failed;
        s.retransform.batch_ok = batch_ok;
        s.retransform.failure_examples = examples;
        s.retransform.ns = t0.elapsed().as_nanos() as u64;
        drop(s);
        diag!(Info, "VMInit: retransformed {ok} classes ({failed} failed) in {:?}", t0.elapsed());
        // Record mode: the JDK's reference threads, restarted on rewritten code, record their
        // work completely (the batch above rewrote their classes).
        if self.recorder.is_some() {
            self.restart_reference_threads(jni);
        }
    }

    /// Enables the load hook in a JVMTI environment of its own, made now. The JVM calls the load
    /// hooks of environments in the order they were made, those that cannot retransform first,
    /// and a `-javaagent`'s environments are made at load, after this agent's when
    /// `JAVA_TOOL_OPTIONS` names this one (as `lucce record` does). Hooked from the environment
    /// made at load, this agent rewrote a class first and the Java agent's transformer then
    /// changed the result, putting calls before the entry probe, which made decoded traces wrong
    /// (test `java_agent_transforming_classes`). Made now, it comes after them all; and when it
    /// can retransform too (`after_agents`), also after the transformers that retransform, and
    /// it is called again for each class a Java agent retransforms. Returns that environment
    /// when it can retransform (it then retransforms the VMInit batch), else None. Without a new
    /// environment, the one made at load.
    fn enable_load_hook(&self, jni: Jni) -> Option<Jvmti> {
        let wanted = match self.options.after_agents {
            AfterAgents::On => true,
            AfterAgents::Off => false,
            AfterAgents::Auto => java_agent_loaded(),
        };
        let (env, retransforms) = new_load_hook(jni, wanted).unwrap_or_else(|| {
            diag!(Warn, "no JVMTI environment of its own for the load hook; a Java agent's transformers may run after it");
            if let Err(e) = set_load_hook(self.jvmti, true) {
                diag!(Error, "cannot enable the load hook: {e}");
            }
            (self.jvmti, false)
        });
        lock(&self.stats).load_hook_retransforms = retransforms;
        *lock(&self.load_hook) = Some(LoadHook { env, moves: 0, last_attach_class: None, after_flight_recorder: false });
        retransforms.then_some(env)
    }

    /// Called when the attach thread loads a class: a Java agent may just have attached (its
    /// JVMTI environments are made before it loads its classes), and the JVM would call its
    /// transformers after this agent's load hook, on classes this agent has already rewritten.
    /// So the hook moves to an environment made now, after the Java agent's. Once per burst of
    /// the attach thread's loads.
    fn follow_attached_agent(&self, jni: Jni) {
        let mut guard = lock(&self.load_hook);
        let Some(hook) = guard.as_mut() else { return };
        let burst_goes_on = hook.last_attach_class.is_some_and(|t| t.elapsed() < ATTACH_QUIET);
        hook.last_attach_class = Some(Instant::now());
        if !burst_goes_on {
            self.move_load_hook(jni, hook, "the attach thread loads classes");
        }
    }

    /// Called when the JDK Flight Recorder loads the class that instruments the JDK's classes
    /// (`JDKEvents`, whatever the thread: `-XX:StartFlightRecording` starts it on the main thread,
    /// `jcmd JFR.start` on the attach thread within a burst that already moved the hook). JFR
    /// has just made its JVMTI environment, which can retransform, and is about to retransform
    /// the file, socket and exception classes with its own code: after this agent's load hook,
    /// that code would replace probed methods and move the probe locals, and the walks below it
    /// end truncated or read other locals. So the hook moves after it, as after a Java agent.
    fn follow_flight_recorder(&self, jni: Jni) {
        let mut guard = lock(&self.load_hook);
        if let Some(hook) = guard.as_mut().filter(|h| !h.after_flight_recorder) {
            hook.after_flight_recorder = true;
            self.move_load_hook(jni, hook, "the flight recorder starts");
        }
    }

    /// Moves the load hook to an environment made now, after every environment made so far: on
    /// first, then the old one off (a class that both see comes to the second with the first's
    /// probes, which it turns off and renews, rewrite/unprobe.rs). At most [`MAX_MOVES`] times,
    /// since each move leaves an environment behind.
    fn move_load_hook(&self, jni: Jni, hook: &mut LoadHook, why: &str) {
        if hook.moves >= MAX_MOVES {
            return;
        }
        let wanted = self.options.after_agents != AfterAgents::Off;
        let Some((env, retransforms)) = new_load_hook(jni, wanted) else { return };
        if let Err(e) = set_load_hook(hook.env, false) {
            diag!(Error, "cannot disable the old load hook: {e}");
        }
        hook.env = env;
        hook.moves += 1;
        let mut s = lock(&self.stats);
        s.load_hook_moves = hook.moves;
        s.load_hook_retransforms = retransforms;
        drop(s);
        diag!(Info, "{why}: the load hook moved after the environments made so far ({} moves)", hook.moves);
    }

    /// Restarts the JDK's reference threads on rewritten code (ref_threads.rs). The capabilities
    /// that takes are held only meanwhile: `can_suspend` is one that a single JVMTI environment
    /// may hold at a time, and the debugger's agent (JDWP) needs it. Taken at load, it made every
    /// JVM started with `-agentlib:jdwp` after the agent fail ("JDWP unable to get necessary
    /// JVMTI capabilities"). When another agent holds it, the threads keep their obsolete loops
    /// (their work is then recorded as truncated, honestly).
    fn restart_reference_threads(&self, jni: Jni) {
        let mut caps = Capabilities::default();
        caps.set(Capabilities::SUSPEND);
        caps.set(Capabilities::SIGNAL_THREAD);
        if let Err(e) = self.jvmti.add_capabilities(&caps) {
            diag!(Info, "VMInit: the reference threads keep their obsolete loops: no capability to suspend them ({e}; a debugger's agent holds it?)");
            return;
        }
        for what in &ref_threads::LOOPS {
            match ref_threads::restart(self.jvmti, jni, what) {
                ref_threads::Outcome::Replaced => diag!(Info, "VMInit: {:?} restarted on rewritten code", what.class),
                ref_threads::Outcome::Kept(why) => diag!(Info, "VMInit: {:?} keeps its obsolete loop: {why}", what.class),
            }
        }
        if let Err(e) = self.jvmti.relinquish_capabilities(&caps) {
            diag!(Error, "VMInit: cannot give back the capability to suspend threads: {e}");
        }
    }

    fn on_vm_death(&self, jni: Jni) {
        if self.dead.swap(true, Ordering::AcqRel) {
            return;
        }
        // Before the recorder closes and frees its tables.
        #[cfg(feature = "alloc-stats")]
        crate::alloc_stats::report();
        let check = self.count_check.as_ref().map(|cc| {
            let _ = self.jvmti.set_event_notification_mode(false, jvmti::JVMTI_EVENT_METHOD_ENTRY, std::ptr::null_mut());
            cc.report(self.jvmti, jni, &self.options, &self.registry, Some(self.counters))
        });
        if let Some(r) = self.recorder {
            let report = r.close();
            let e = r.encoder_stats();
            let s = &r.stats;
            diag!(
                Info,
                "recorded {} events into {}: {} methods, {} edges ({} closing a cycle), {} graph versions ({} anchors), {} slow entries ({} stays, {} links), {} walks, {} walks answered by the memo, {} walks that read a frame's context, {} location sites, {} truncated ({} with an unreadable caller context), {} answer tables, {} events without their JVM trace, {} JDK classes read for leaf callers, {} errors; {:?}",
                s.events.load(Ordering::Relaxed),
                r.out.display(),
                e.methods,
                e.edges,
                e.back_edges,
                e.version,
                e.anchors,
                e.slow_entries,
                e.stays,
                e.links,
                s.walks.load(Ordering::Relaxed),
                s.memo_hits.load(Ordering::Relaxed),
                s.local_reads.load(Ordering::Relaxed),
                s.location_sites.load(Ordering::Relaxed),
                s.truncated.load(Ordering::Relaxed),
                s.unreadable.load(Ordering::Relaxed),
                r.answer_tables(),
                s.untraced.load(Ordering::Relaxed),
                r.jdk_classes_read(),
                s.errors.load(Ordering::Relaxed),
                report
            );
        }
        let mut stats = lock(&self.stats).clone();
        if let Some(c) = &self.cache {
            c.flush();
            stats.class_cache = Some(c.stats());
        }
        let summary = Summary::build(&self.options_text, stats, &self.registry, Some(self.counters), check);
        summary.emit(&self.options.summary, self.options.json.as_deref());
    }
}

unsafe extern "C" fn vm_init(_jvmti: *mut JvmtiEnv, jni: *mut JniEnv, _thread: jthread) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        if let Some(a) = agent() {
            a.on_vm_init(Jni(jni));
        }
    }));
    if let Err(p) = r {
        diag!(Error, "panic in VMInit: {}", panic_text(&*p));
    }
}

unsafe extern "C" fn vm_death(_jvmti: *mut JvmtiEnv, jni: *mut JniEnv) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        if let Some(a) = agent() {
            a.on_vm_death(Jni(jni));
        }
    }));
    if let Err(p) = r {
        diag!(Error, "panic in VMDeath: {}", panic_text(&*p));
    }
}

unsafe extern "C" fn thread_end(_jvmti: *mut JvmtiEnv, _jni: *mut JniEnv, _thread: jthread) {
    let _ = catch_unwind(|| {
        if let Some(r) = recorder() {
            r.thread_end();
        }
    });
}

unsafe extern "C" fn method_entry(_jvmti: *mut JvmtiEnv, _jni: *mut JniEnv, _thread: jthread, method: jmethodID) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Some(cc) = agent().and_then(|a| a.count_check.as_ref()) {
            cc.record(method);
        }
    }));
}

/// Agent_OnUnload: the summary has been written at VMDeath; flush nothing else. The counter
/// region stays mapped because daemon threads may still be running instrumented code.
pub fn unload() {
    diag!(Info, "unloaded");
}

/// Turns the load hook of `env` on or off.
fn set_load_hook(env: Jvmti, on: bool) -> Result<(), jvmti::Error> {
    env.set_event_notification_mode(on, jvmti::JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, std::ptr::null_mut())
}

/// A new JVMTI environment with this agent's load hook on, able to retransform when `retransform`
/// and the JVM allows it; with whether it can. None (and nothing on) if it cannot be made.
fn new_load_hook(jni: Jni, retransform: bool) -> Option<(Jvmti, bool)> {
    // SAFETY: `java_vm` is the VM this thread runs in, live for the rest of the process.
    let env = jni.java_vm().and_then(|vm| unsafe { jvmti::JavaVM::get_jvmti(vm) })?;
    let mut cb = EventCallbacks::new();
    cb.class_file_load_hook(class_file_load_hook);
    env.set_event_callbacks(&cb).ok()?;
    let mut caps = Capabilities::default();
    caps.set(Capabilities::RETRANSFORM_CLASSES);
    caps.set(Capabilities::RETRANSFORM_ANY_CLASS);
    let retransforms = retransform
        && env
            .add_capabilities(&caps)
            .map_err(|e| diag!(Warn, "the load hook cannot retransform ({e}): a Java agent's transformers that retransform run after it"))
            .is_ok();
    set_load_hook(env, true).map_err(|e| diag!(Error, "cannot enable the load hook: {e}")).ok()?;
    Some((env, retransforms))
}

/// Whether `class` is the JDK Flight Recorder's class that instruments the JDK's own classes,
/// loaded right after JFR made its JVMTI environment (JDK 17's name, and later JDKs').
fn instruments_for_flight_recorder(class: &str) -> bool {
    matches!(class, "jdk/jfr/internal/instrument/JDKEvents" | "jdk/jfr/internal/JDKEvents")
}

/// Whether this is the JVM's attach thread, which runs `jcmd` commands and loads Java agents
/// attached while the JVM runs (`jcmd PID JVMTI.agent_load`, the Attach API). HotSpot gives every
/// Java thread its name as the native thread's too; the answer is kept per thread.
fn on_attach_thread() -> bool {
    thread_local!(static ATTACH: Cell<Option<bool>> = const { Cell::new(None) });
    ATTACH.with(|a| {
        if let Some(known) = a.get() {
            return known;
        }
        let mut name = [0u8; 16];
        // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into `name`.
        let ok = unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) } == 0;
        let attach = ok && name.starts_with(b"Attach Listener\0");
        a.set(Some(attach));
        attach
    })
}

/// Whether the JVM started with a Java agent: it loads libinstrument, java.lang.instrument's
/// native side, for each `-javaagent` before VMInit (for an agent attached later, only then).
fn java_agent_loaded() -> bool {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, found: *mut c_void) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid `info` whose name is null or NUL-terminated,
        // and `found` is the `bool` given below, live for the whole iteration.
        unsafe {
            let name = (*info).dlpi_name;
            if !name.is_null() && CStr::from_ptr(name).to_bytes().ends_with(b"/libinstrument.so") {
                *found.cast::<bool>() = true;
                return 1;
            }
        }
        0
    }
    let mut found = false;
    // SAFETY: `each` is a valid callback for dl_iterate_phdr and `found` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut found as *mut bool).cast()) };
    found
}

/// Reads a byte of each page of a class's bytes. HotSpot hands the hook the classes that the
/// platform and application loaders take from the runtime image (javac's, for one) straight
/// from its mapping of `lib/modules`, whose pages may be on disk still, or out of the page
/// table: whoever reads them first pays for reading them in, which without an agent is the
/// JVM's class-file parser. Done, when the hook is timed, before the rewrite's clocks start
/// and timed apart, so that the rewrite time is the agent's own work (docs/performance-log.md,
/// stop 48).
fn page_in(bytes: &[u8]) {
    const PAGE: usize = 4096;
    let first_boundary = (PAGE - bytes.as_ptr() as usize % PAGE) % PAGE;
    let pages = std::iter::once(0).chain((first_boundary..bytes.len()).step_by(PAGE));
    for i in pages.filter(|&i| i < bytes.len()) {
        std::hint::black_box(bytes[i]);
    }
}

/// What one reading of [`thread_cpu_ns`] adds to an interval it ends (about 0.5 µs on a VM, a
/// few percent of a class's rewrite time): the least of 16 intervals between two readings in a
/// row, measured once.
fn cpu_clock_cost() -> u64 {
    static COST: OnceLock<u64> = OnceLock::new();
    *COST.get_or_init(|| {
        let interval = |_| {
            let start = thread_cpu_ns();
            thread_cpu_ns().saturating_sub(start)
        };
        (0..16).map(interval).min().unwrap_or(0)
    })
}

/// CPU time of the calling thread, in ns (0 if the clock is unavailable): the rewrite time without
/// the time the thread was preempted, which on a busy machine is most of the wall time of some
/// classes.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}
