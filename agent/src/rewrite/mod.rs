//! Class-file rewriter: inserts the lucce probes into every method of a class.
//!
//! INTERFACE CONTRACT between the rewriter (this module) and the agent shell (jvmti, runtime class).
//! Both sides code against exactly this; change it only in agreement.
//!
//! Probes (all `invokestatic` into the runtime class `lucce/Runtime`, see `probes.rs`):
//! - method entry, first thing in every method with code (legal before `super()`):
//!   push methodId (int); invokestatic lucce/Runtime.enter(I)J; lstore CTX
//!   invokestatic lucce/Runtime.version()J; lstore VER
//!   CTX and VER are two new long locals appended after the method's max_locals.
//! - before every invoke instruction (invokevirtual/special/static/interface/dynamic), and before
//!   the `return` of `java/lang/Object.<init>` (the JVM calls `Finalizer.register` from there;
//!   not in full encoding, where it is a leaf: `ProbeChoice::finalizer_call`):
//!   push siteId (int); lload CTX; lload VER; invokestatic lucce/Runtime.call(IJJ)V
//! - right after every allocation (new, newarray, anewarray, multianewarray):
//!   push allocSiteId (int); lload CTX; lload VER; invokestatic lucce/Runtime.alloc(IJJ)V
//! - after some invokes (`probes.rs`) and first in every exception handler:
//!   invokestatic lucce/Runtime.drop()V (the only probe of a class a recording leaves out)
//! - in `java/lang/System$2.defineClass` only (`probes::DEFINE_HOOK`), after the entry probe:
//!   aload 4; iload 7; invokestatic lucce/Runtime.hidden([BI)[B; astore 4
//!
//! Classes whose internal name starts with `lucce/` are never rewritten.
//!
//! Module map: `classfile` (parse the class, index the pool, write the output), `pool` (appended
//! constants), `code` (instruction decode, layout with widening, emission), `frames`
//! (StackMapTable), `typesim` (the one frame the rewriter must invent: after a widened
//! conditional branch), `probes` (the inserted code, in one place), `method` (one method, step by
//! step).
//!
//! What is dropped: `RuntimeVisibleTypeAnnotations`/`RuntimeInvisibleTypeAnnotations` attributes
//! of Code (their bytecode offsets are not remapped; the JVM does not use them). A StackMapTable
//! in a class older than version 50 (ignored by the JVM) is dropped too.
//!
//! Registry ids are requested only after every id-independent check passed; see `method.rs` for
//! the one narrow case where a method is skipped after its ids were handed out.

pub mod check;
mod classfile;
mod code;
mod frames;
pub mod intrinsics;
mod leaves;
mod method;
mod pool;
pub mod probes;
pub mod relocate;
mod typesim;
mod unprobe;

use std::cell::Cell;

pub use classfile::RawPool;
/// For walks, which look at the instruction a frame is at.
pub(crate) use code::{is_invoke, OP_RETURN};
use classfile::{assemble, mutf8, ClassFile, MAX_CP_COUNT};
use pool::PoolEdit;

/// Per-thread buffers of the rewriter, kept between classes so that a class costs no
/// allocations for decoding, layout, frames and the rewritten method bodies.
#[derive(Default)]
struct Buffers {
    pool: classfile::PoolBuffers,
    method: method::Scratch<'static>,
    /// The class file from the end of the constant pool on, with the new Code attributes.
    body: Vec<u8>,
    /// The appended constant-pool entries.
    app: Vec<u8>,
    /// The class's methods.
    methods: Vec<classfile::Method>,
    /// (name, descriptor) of the rewritten methods.
    rewritten: Vec<(u16, u16)>,
    leaf_scratch: leaves::LeafScratch,
    /// Each method's [`leaves::Leaf`].
    leaves: Vec<leaves::Leaf>,
}

thread_local! {
    // Taken for the duration of one rewrite (so a panic just leaves fresh buffers behind).
    static BUFFERS: Cell<Option<Box<Buffers>>> = const { Cell::new(None) };
}

/// Ids handed out by the agent for methods and sites; the rewriter asks for one per method,
/// call site and allocation site it instruments, in bytecode order.
pub trait SiteRegistry {
    /// A dense id for a method with code.
    fn method(&mut self, m: &MethodInfo<'_>) -> u32;
    /// A dense id for a call or allocation site of `method_id`.
    fn site(&mut self, method_id: u32, site: &SiteInfo) -> u32;
    /// Announces that the next `n` calls of [`SiteRegistry::site`] follow now (one per probe of
    /// the method just given an id), so that a registry shared by threads can take their ids in
    /// one step.
    fn reserve_sites(&mut self, _n: u32) {}
    /// The optional probes the rewriter puts in.
    fn probes(&self) -> ProbeChoice {
        ProbeChoice::default()
    }
    /// Record mode's leaf callers (leaves.rs): whether method (name, descriptor) of class `class`
    /// is a leaf that the rewrite of its class makes too, and if so its access flags and its
    /// class's. `own`: asked by the rewrite of `class` itself, which must then make that method a
    /// leaf whatever the class holds now, since callers may count on it.
    fn known_leaf(&self, _class: &[u8], _name: &[u8], _desc: &[u8], _own: bool) -> Option<(u16, u16)> {
        None
    }
    /// A class about to be served from the class cache instead of rewritten, with the methods
    /// its record registers (name, descriptor, access flags, leaf) and its access flags: whether
    /// those keep every leaf callers may count on in it. If so, its leaves are those from now
    /// on, as a rewrite's [`SiteRegistry::known_leaf`] with `own` makes them; if not, the class
    /// is rewritten instead.
    fn served_leaves(&self, _class: &str, _class_access: u16, _methods: &mut dyn Iterator<Item = (&str, &str, u16, bool)>) -> bool {
        true
    }
    /// Whether a method may take the direct rewrite (`method.rs`). Both rewrites give the same
    /// bytes and registry calls for well-formed code; false makes every method take the general
    /// one, for tests that compare the two.
    fn direct_rewrite(&self) -> bool {
        true
    }
    /// The ids the next [`SiteRegistry::method`] and [`SiteRegistry::site`] would give if no
    /// other thread took one first; None from a registry that cannot say.
    fn next_ids(&self) -> Option<(u32, u32)> {
        None
    }
    /// Takes `counts.0` method ids and `counts.1` site ids starting at `first` for the calls that
    /// follow, which then get them in order (and [`SiteRegistry::reserve_sites`] takes none).
    /// False when another thread took either first (method ids it could take still go to the
    /// methods that follow).
    fn take_ids(&mut self, _first: (u32, u32), _counts: (u32, u32)) -> bool {
        false
    }
    /// Whether the class is being retransformed: the Utf8 entries the probes need then reuse
    /// equal ones of its pool ([`pool::PoolEdit::reuse_utf8`] says why).
    fn retransforming(&self) -> bool {
        false
    }
}

/// What the decoder needs to print a frame of this method like the JVM does.
#[derive(Debug, Clone, Copy)]
pub struct MethodInfo<'a> {
    /// Internal class name, `java/lang/String`.
    pub class: &'a str,
    pub name: &'a str,
    pub descriptor: &'a str,
    /// From the SourceFile attribute, if present.
    pub source_file: Option<&'a str>,
    pub access_flags: u16,
    /// A leaf: no site probes, its entry probe is `leaf` and its one probe local holds its id
    /// (probes.rs).
    pub leaf: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteKind {
    Call,
    Alloc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteInfo {
    pub kind: SiteKind,
    /// Bytecode index in the ORIGINAL (un-rewritten) method.
    pub bci: u32,
    /// The LineNumberTable line HotSpot would report for `bci` (entry whose start_pc equals it,
    /// else the last one below it), or -1 when the method has no line table.
    pub line: i32,
    /// A call of the lucce API (`lucce/Lucce`): its natives trust the pending record only from
    /// such a site.
    pub api: bool,
    /// For a call site, [`target_key`] of the name and descriptor its instruction references
    /// (for invokedynamic, [`indy_target_key`] of its descriptor); [`ANY_TARGET`] for a call of
    /// a method of `MethodHandle` or `VarHandle` and for an allocation site.
    pub target: u64,
}

/// The probes a rewrite puts in beyond entry, call and intrinsic drop probes: a registry's
/// choice ([`SiteRegistry::probes`]), which the class cache keeps apart (files per choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeChoice {
    /// Allocation probes (record mode has no use for them yet; without them more methods are
    /// leaves).
    pub alloc_sites: bool,
    /// A drop probe after every invoke, not only after those the JIT may replace by an intrinsic
    /// (intrinsics.rs): for a recording that leaves classes out, whose methods a virtual call
    /// may reach and return from without entering anything instrumented, leaving the record
    /// valid for a later entry from them (agent/src/recorder.rs, "Which frame called me").
    pub drop_after_calls: bool,
    /// Call probes in a method whose every invoke lies on a straight run of code that ends in
    /// `athrow` (`StringLatin1.charAt`, `Buffer.position(int)`: calls that build the exception
    /// only). Without them such a method is a leaf, whose entry costs no lookup; a call it
    /// makes walks the stack, once per exception thrown (leaves.rs). Counting
    /// mode keeps them, since it counts every call site.
    pub throw_path_calls: bool,
    /// Call probes in a method whose every call certainly enters a leaf, of its own class
    /// (`String.length()` calling `coder()`) or of another class that the registry knows
    /// ([`SiteRegistry::known_leaf`]: static methods, constructors, `super` calls). Without them such a method is a leaf too, and its callees
    /// find no record, which leaves do not need (leaves.rs); but a sample taken at such a
    /// callee's entry walks the stack. Counting mode keeps them.
    pub leaf_calls: bool,
}

impl Default for ProbeChoice {
    /// Counting mode's.
    fn default() -> Self {
        ProbeChoice { alloc_sites: true, drop_after_calls: false, throw_path_calls: true, leaf_calls: true }
    }
}

impl ProbeChoice {
    /// Record mode's: no allocation probes (nothing records allocations yet: more methods are
    /// leaves), no call probes on throw paths or in leaf callers, and with `drop_after_calls`
    /// (classes left out) a drop probe after every call.
    pub fn record(drop_after_calls: bool) -> Self {
        ProbeChoice { alloc_sites: false, drop_after_calls, throw_path_calls: false, leaf_calls: false }
    }

    /// Whether `Object.<init>` has a call probe before its `return`s, standing for the JVM's call
    /// of `Finalizer.register` there (method.rs). Not where leaf callers drop their call probes:
    /// there it is a leaf, which the constructors that only call it count on; a finalizable
    /// object's registration then finds its caller by a walk that reads no frame's locals
    /// (agent/src/recorder.rs, `walk_from`).
    pub fn finalizer_call(self) -> bool {
        self.leaf_calls
    }

    /// The part of the class cache's file names that tells the choice.
    pub fn tag(self) -> String {
        let on = |flag, t| if flag { t } else { "" };
        format!(
            "{}{}{}{}",
            if self.alloc_sites { "a" } else { "n" },
            on(self.drop_after_calls, "d"),
            on(!self.throw_path_calls, "t"),
            on(!self.leaf_calls, "l")
        )
    }
}

/// The `target` of a call site whose callee may have any name: the signature-polymorphic
/// methods of `MethodHandle` and `VarHandle` are linked straight to adapters
/// (`VarHandleGuards.guard_LI_L`) and targets (`linkToStatic`).
pub const ANY_TARGET: u64 = 0;

/// A key of a method's name and descriptor, given as their modified-UTF-8 bytes as in the class
/// file (never [`ANY_TARGET`]): a method entered straight from a call site can be that call only
/// if its key equals the site's `target` (otherwise it is an upcall the JVM made while resolving
/// the call: `loadClass`, `<clinit>`). Raw bytes, so that a call site's key needs no decoding.
pub fn target_key(name: &[u8], descriptor: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    // What hashing the pair as `(&str, &str)` feeds the hasher, so that a key is the one of the
    // decoded names whenever those are their own modified UTF-8 (all names in practice).
    for s in [name, descriptor] {
        h.write(s);
        h.write_u8(0xff);
    }
    h.finish().max(1)
}

/// [`target_key`] of a name and descriptor held as text (as the registry holds them, decoded by
/// the rewriter): equal to the key of the modified-UTF-8 bytes they were decoded from (unless
/// those were malformed and decoded with replacement characters).
pub fn target_key_of_text(name: &str, descriptor: &str) -> u64 {
    target_key(&classfile::to_mutf8(name), &classfile::to_mutf8(descriptor))
}

/// The name under which [`indy_target_key`] keys an invokedynamic's adapter.
pub const INDY_ADAPTER: &str = "linkToTargetMethod";

/// The `target` of an invokedynamic with `descriptor`. The JVM links the instruction to a
/// lambda form of the descriptor's basic types with the call site's target (or the call site)
/// appended, `Invokers$Holder.linkToTargetMethod` (`linkToCallSite` for a call site that is not
/// constant) when the JDK holds one of that shape, else a hidden class a walk does not see: so
/// the instruction's own name never enters, and with it as the key every execution walked
/// (lucene_search: 208k walks). None for a malformed descriptor.
pub fn indy_target_key(descriptor: &[u8]) -> Option<u64> {
    let body = descriptor.strip_prefix(b"(")?;
    let close = body.iter().position(|&b| b == b')')?;
    let (mut params, ret) = (&body[..close], &body[close + 1..]);
    let mut basic = Vec::with_capacity(descriptor.len() + OBJECT.len());
    basic.push(b'(');
    while !params.is_empty() {
        let (ty, tail) = field_type(params)?;
        basic.extend_from_slice(basic_type(ty));
        params = tail;
    }
    basic.extend_from_slice(OBJECT);
    basic.push(b')');
    match ret {
        b"V" => basic.push(b'V'),
        _ => match field_type(ret)? {
            (ty, []) => basic.extend_from_slice(basic_type(ty)),
            _ => return None,
        },
    }
    Some(target_key(INDY_ADAPTER.as_bytes(), &basic))
}

const OBJECT: &[u8] = b"Ljava/lang/Object;";

/// The first field type of `s` and what follows it.
fn field_type(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let dims = s.iter().take_while(|&&b| b == b'[').count();
    let end = match s.get(dims)? {
        b'L' => dims + s[dims..].iter().position(|&b| b == b';')? + 1,
        b'B' | b'C' | b'D' | b'F' | b'I' | b'J' | b'S' | b'Z' => dims + 1,
        _ => return None,
    };
    Some(s.split_at(end))
}

/// A field type's basic type as lambda forms spell it (`MethodType.basicType`): references are
/// `Object`, `boolean`, `byte`, `short` and `char` are `int`.
fn basic_type(ty: &[u8]) -> &'static [u8] {
    match ty {
        b"J" => b"J",
        b"F" => b"F",
        b"D" => b"D",
        b"B" | b"C" | b"I" | b"S" | b"Z" => b"I",
        _ => OBJECT,
    }
}

/// The `target` of the call site at the `return` of `Object.<init>`, from which the JVM calls
/// `Finalizer.register` for an object whose class has a finalizer.
pub fn finalizer_register_key() -> u64 {
    target_key(b"register", b"(Ljava/lang/Object;)V")
}

/// Why a method with code was left unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The rewritten code would exceed 65535 bytes.
    CodeTooLarge,
    /// max_locals + 4 would not fit into a u2.
    TooManyLocals,
    /// max_stack + 5 would not fit into a u2.
    TooManyStackSlots,
    /// The class has more than one Code attribute for this method.
    DuplicateCode,
    /// The appended constants would overflow the constant pool (the whole class is unchanged).
    ConstantPoolFull,
    /// Left as it is on purpose: `finalize()V` whose code is only `return`. HotSpot registers no
    /// instance of a class whose finalizer is empty (classes declare one to cancel an inherited
    /// finalizer); with a probe, every instance would be registered and finalized (jython's
    /// `PyObject`: 5.6M finalizable objects alive, 1.2 GB of heap). Such a method calls nothing
    /// and runs nothing, so no trace can show it.
    EmptyFinalizer,
    /// The class already calls the runtime class, but not only from probes this agent could
    /// turn off (`unprobe.rs`; the whole class is unchanged): rewritten again, those calls would
    /// run next to the new probes.
    AlreadyRewritten,
    /// Bytecode the rewriter does not accept (the JVM would reject it too).
    MalformedCode(&'static str),
    MalformedStackMap(&'static str),
    /// Exception, line or local-variable table that does not fit the code.
    MalformedTable(&'static str),
    /// A widened conditional branch needs a frame that could not be computed.
    FrameInference(&'static str),
}

/// The class could not be parsed; the agent leaves it untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error("malformed class file: {0}")]
    Malformed(&'static str),
}

#[derive(Debug, Default, Clone)]
pub struct ClassStats {
    /// Internal name, `java/lang/String`.
    pub class_name: String,
    /// The class's access flags.
    pub class_access: u16,
    pub methods_with_code: u32,
    pub methods_rewritten: u32,
    /// Of them, those the direct rewrite took (see `method.rs`; the others took the general one).
    pub methods_direct: u32,
    /// Of them, leaves whose calls only build exceptions (their calls get no probes:
    /// [`ProbeChoice::throw_path_calls`]).
    pub throw_leaves: u32,
    /// Of them, leaf callers: leaves whose every call enters a leaf (their calls get no probes:
    /// [`ProbeChoice::leaf_calls`]).
    pub leaf_callers: u32,
    /// (name + descriptor, reason) of every method with code that was left as it was.
    pub skipped: Vec<(String, SkipReason)>,
    /// (name + descriptor, reason) of every rewritten method whose site probes did not fit: it
    /// has an entry probe only (a leaf; `method.rs`).
    pub entry_only: Vec<(String, SkipReason)>,
    /// Set when the whole class was left unchanged for a class-level reason (constant pool full).
    pub unchanged_reason: Option<SkipReason>,
    /// The class came with lucce's probes in it, transformed further by another agent: they were
    /// turned off and the class rewritten again (`unprobe.rs`).
    pub probes_renewed: bool,
}

#[derive(Debug)]
pub struct RewriteOutcome {
    /// The rewritten class, or None to leave the class unchanged.
    pub bytes: Option<Vec<u8>>,
    pub stats: ClassStats,
}

pub(crate) const ACC_PRIVATE: u16 = 0x0002;
pub(crate) const ACC_STATIC: u16 = 0x0008;
pub(crate) const ACC_FINAL: u16 = 0x0010;
pub(crate) const ACC_NATIVE: u16 = 0x0100;
pub(crate) const ACC_ABSTRACT: u16 = 0x0400;
/// Set in `MethodInfo::access_flags` of `@Hidden` methods (a bit no JVM method flag uses); the
/// same value as `lucce_encoder::ACC_HIDDEN_FRAME`.
pub const HIDDEN_FRAME_FLAG: u16 = 0x8000;

/// The access flags a leaf caller's call depends on ([`SiteRegistry::known_leaf`]'s answers):
/// private, static and final (of a method; of its class, final). Answers are compared on these
/// only: a record's flags may carry [`HIDDEN_FRAME_FLAG`].
pub const DISPATCH_FLAGS: u16 = ACC_PRIVATE | ACC_STATIC | ACC_FINAL;

/// HotSpot's test for an empty finalizer (`ClassFileParser::parse_method`, `is_empty_method`):
/// `finalize()V` whose code is the single instruction `return`. `code_attr` is the Code
/// attribute's info: max_stack, max_locals, code_length, code.
fn is_empty_finalizer(name: &str, desc: &str, code_attr: &[u8]) -> bool {
    name == "finalize" && desc == "()V" && code_attr.get(4..9) == Some(&[0, 0, 0, 1, 0xB1])
}

/// Inserts the probes into every method with code. Never panics on any input: a class that
/// cannot be parsed is an `Err`, a method that cannot be rewritten is left as it was and listed
/// in `stats.skipped`. Classes under `lucce/` come back unchanged.
pub fn rewrite_class(
    class_bytes: &[u8],
    registry: &mut dyn SiteRegistry,
) -> Result<RewriteOutcome, RewriteError> {
    let (bytes, stats) = rewrite_class_with(class_bytes, registry, |parts| parts.concat())?;
    Ok(RewriteOutcome { bytes, stats })
}

/// [`rewrite_class`] that hands the rewritten class to `output` as consecutive parts (from the
/// rewriter's buffers) instead of a new Vec, so that the load hook copies it once, straight into
/// the memory it returns to the JVM. `output` is called only for a rewritten class; its result
/// comes back in place of the bytes.
pub fn rewrite_class_with<O>(
    class_bytes: &[u8],
    registry: &mut dyn SiteRegistry,
    output: impl FnOnce(&[&[u8]]) -> O,
) -> Result<(Option<O>, ClassStats), RewriteError> {
    rewrite_with(class_bytes, Some(registry), output, false)
}

/// For a class a recording leaves out (`include=`/`exclude=`): a drop probe first in each of its
/// exception handlers, and nothing else (no method gets an id or any other probe). An exception
/// caught there may come from a call whose pending record no entry took (it threw before entering
/// its method, or its method is left out too); left valid, the record would be taken by the next
/// entry of an instrumented method called from the class (agent/src/recorder.rs, "Which frame
/// called me"). Otherwise as [`rewrite_class_with`]: `stats.methods_rewritten` counts the
/// methods given drops; None for a class without handlers.
pub fn drop_at_handlers_with<O>(class_bytes: &[u8], output: impl FnOnce(&[&[u8]]) -> O) -> Result<(Option<O>, ClassStats), RewriteError> {
    rewrite_with(class_bytes, None, output, false)
}

/// [`rewrite_class_with`], or [`drop_at_handlers_with`] without a registry; `renewing`: the
/// class's probes were turned off (`unprobe.rs`), and its pool's naming the runtime class does
/// not stop the rewrite.
fn rewrite_with<O>(
    class_bytes: &[u8],
    mut registry: Option<&mut dyn SiteRegistry>,
    output: impl FnOnce(&[&[u8]]) -> O,
    renewing: bool,
) -> Result<(Option<O>, ClassStats), RewriteError> {
    let mut bufs = BUFFERS.with(|b| b.take()).unwrap_or_default();
    let cf = ClassFile::parse_with(class_bytes, std::mem::take(&mut bufs.pool), std::mem::take(&mut bufs.methods))?;
    let ClassFile {
        bytes,
        major,
        cp,
        cp_end,
        access,
        this_class,
        methods,
        source_file,
    } = cf;
    let raw_name = cp
        .class_name(this_class)
        .ok_or(RewriteError::Malformed("this_class"))?;
    let class_name = mutf8(raw_name);
    let mut stats = ClassStats {
        class_name: class_name.clone().into_owned(),
        class_access: access,
        ..ClassStats::default()
    };
    if class_name.starts_with(probes::EXCLUDED_PREFIX) {
        return Ok((None, stats));
    }
    if !renewing && cp.has_runtime_name && cp.find_class(probes::RUNTIME_CLASS.as_bytes()).is_some() {
        // Lucce's rewrite, transformed by another agent: its probes off, rewritten again.
        bufs.pool = cp.into_buffers();
        bufs.methods = methods;
        BUFFERS.with(|b| b.set(Some(bufs)));
        return match unprobe::unprobe(class_bytes) {
            Some(clean) => rewrite_with(&clean, registry, output, true).map(|(out, s)| (out, ClassStats { probes_renewed: true, ..s })),
            None => Ok((None, ClassStats { unchanged_reason: Some(SkipReason::AlreadyRewritten), ..stats })),
        };
    }
    let source = source_file.and_then(|i| cp.utf8(i)).map(mutf8);
    let cx = method::ClassCtx {
        bytes,
        major,
        this_class,
        class_name: &class_name,
        this_is_object: raw_name == b"java/lang/Object",
        source_file: source.as_deref(),
    };
    let mut pool = PoolEdit::new(cp, std::mem::take(&mut bufs.app));
    if registry.as_ref().is_some_and(|r| r.retransforming()) {
        pool.reuse_utf8();
    }
    let Buffers {
        method: scratch,
        body,
        rewritten: rewritten_names,
        leaf_scratch,
        leaves,
        ..
    } = &mut *bufs;
    match registry.as_deref() {
        Some(r) => {
            let known_leaf = |c: &[u8], n: &[u8], d: &[u8], own: bool| r.known_leaf(c, n, d, own);
            let view = leaves::ClassView::new(bytes, &pool.cp, this_class, access, &methods, &known_leaf);
            leaves::find(&view, r.probes(), leaf_scratch, leaves);
        }
        None => {
            leaves.clear();
            leaves.resize(methods.len(), leaves::Leaf::No);
        }
    }
    // Covariance: the 'static buffers serve this class's borrowed bytes until `recycle`.
    let mut scratch: method::Scratch<'_> = std::mem::take(scratch);
    body.clear();
    // Copied from the class bytes up to here.
    let mut copied = cp_end;
    rewritten_names.clear();
    for (m, &leaf) in methods.iter().zip(leaves.iter()) {
        let Some(code) = &m.code else { continue };
        if m.access & (ACC_NATIVE | ACC_ABSTRACT) != 0 {
            // Such a method must not have code; the JVM rejects the class. Leave it alone.
            continue;
        }
        stats.methods_with_code += 1;
        let name = mutf8(pool.cp.utf8(m.name).unwrap_or(b"?"));
        let desc_bytes = pool.cp.utf8(m.desc).unwrap_or(b"");
        let desc = mutf8(desc_bytes);
        let label = || format!("{name}{desc}");
        if m.dup_code {
            stats.skipped.push((label(), SkipReason::DuplicateCode));
            continue;
        }
        if is_empty_finalizer(&name, &desc, bytes.get(code.info.clone()).unwrap_or_default()) {
            stats.skipped.push((label(), SkipReason::EmptyFinalizer));
            continue;
        }
        let mi = method::MethodIn {
            name: &name,
            desc: &desc,
            desc_bytes,
            // `@Hidden` methods are instrumented like any other; the flag tells the decoder to
            // leave their frames out, as the JVM does.
            access: m.access | if m.hidden { HIDDEN_FRAME_FLAG } else { 0 },
            attr: code.whole.clone(),
            info: code.info.clone(),
            leaf,
        };
        // Methods are in class-file order, so the Code attributes come in increasing order.
        let mark = body.len();
        let gap = bytes
            .get(copied..code.whole.start)
            .ok_or(RewriteError::Malformed("method order"))?;
        body.extend_from_slice(gap);
        let rewritten = match registry.as_deref_mut() {
            Some(registry) => method::rewrite_method(&cx, &mi, &mut pool, registry, &mut scratch, body).map(|path| {
                stats.methods_direct += (path == method::Path::Direct) as u32;
                stats.throw_leaves += (path == method::Path::ThrowLeaf) as u32;
                stats.leaf_callers += (path == method::Path::LeafCaller) as u32;
                if let method::Path::EntryOnly(why) = path {
                    stats.entry_only.push((label(), why));
                }
                true
            }),
            None => method::drop_at_handlers(&cx, &mi, &mut pool, &mut scratch, body),
        };
        match rewritten {
            Ok(true) => {
                copied = code.whole.end;
                rewritten_names.push((m.name, m.desc));
                stats.methods_rewritten += 1;
            }
            Ok(false) => body.truncate(mark),
            Err(r) => {
                body.truncate(mark);
                stats.skipped.push((label(), r));
            }
        }
    }
    bufs.method = scratch.recycle();
    let out = finish(bytes, cp_end, copied, &pool, &bufs.rewritten, &mut stats, &bufs.body, output);
    bufs.pool = pool.cp.into_buffers();
    bufs.methods = methods;
    bufs.app = pool.app.bytes;
    BUFFERS.with(|b| b.set(Some(bufs)));
    Ok((out?, stats))
}

/// [`SiteRegistry::known_leaf`] as a function: (class, name, descriptor, own) → the access
/// flags of a leaf method and of its class.
pub type KnownLeaf<'a> = dyn Fn(&[u8], &[u8], &[u8], bool) -> Option<(u16, u16)> + 'a;

/// A leaf method: name, descriptor and access flags.
pub type LeafMethod = (Vec<u8>, Vec<u8>, u16);

/// The leaves a rewrite of `class_bytes` under `probes` makes, as (name, descriptor, access
/// flags), and the class's access flags: for [`SiteRegistry::known_leaf`], which answers from
/// the JDK's own class files (agent/src/jdk_leaves.rs). `known_leaf` answers for the classes it
/// calls, as in a rewrite.
pub fn leaf_methods(class_bytes: &[u8], probes: ProbeChoice, known_leaf: &KnownLeaf<'_>) -> Result<(u16, Vec<LeafMethod>), RewriteError> {
    let cf = ClassFile::parse(class_bytes)?;
    // What callers count on in this class is what is being found: nothing to keep.
    let others = |c: &[u8], n: &[u8], d: &[u8], own: bool| if own { None } else { known_leaf(c, n, d, false) };
    let view = leaves::ClassView::new(cf.bytes, &cf.cp, cf.this_class, cf.access, &cf.methods, &others);
    let mut kinds = Vec::new();
    leaves::find(&view, probes, &mut leaves::LeafScratch::default(), &mut kinds);
    let mut out = Vec::new();
    for (m, kind) in cf.methods.iter().zip(kinds) {
        if let (true, Some(name), Some(desc)) = (kind.is_leaf(), cf.cp.utf8(m.name), cf.cp.utf8(m.desc)) {
            out.push((name.to_vec(), desc.to_vec(), m.access));
        }
    }
    Ok((cf.access, out))
}

/// The rewritten class passed through `output` (None when no method was rewritten or the pool
/// overflowed).
#[allow(clippy::too_many_arguments)]
fn finish<O>(
    bytes: &[u8],
    cp_end: usize,
    copied: usize,
    pool: &PoolEdit<'_>,
    rewritten_names: &[(u16, u16)],
    stats: &mut ClassStats,
    body: &[u8],
    output: impl FnOnce(&[&[u8]]) -> O,
) -> Result<Option<O>, RewriteError> {
    if rewritten_names.is_empty() {
        return Ok(None);
    }
    if pool.app.count() > MAX_CP_COUNT {
        stats.methods_rewritten = 0;
        for &(n, d) in rewritten_names {
            let label = format!(
                "{}{}",
                mutf8(pool.cp.utf8(n).unwrap_or(b"?")),
                mutf8(pool.cp.utf8(d).unwrap_or(b""))
            );
            stats.skipped.push((label, SkipReason::ConstantPoolFull));
        }
        stats.unchanged_reason = Some(SkipReason::ConstantPoolFull);
        return Ok(None);
    }
    let out = assemble(bytes, cp_end, &pool.app, body, copied, output)
        .ok_or(RewriteError::Malformed("assemble"))?;
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indy_keys_are_the_adapters_of_the_basic_types() {
        let adapter = |d: &str| Some(target_key(INDY_ADAPTER.as_bytes(), d.as_bytes()));
        // The shapes lucene_search entered most (`Invokers$Holder`).
        assert_eq!(indy_target_key("()Ljava/util/function/ToLongFunction;".as_bytes()), adapter("(Ljava/lang/Object;)Ljava/lang/Object;"));
        assert_eq!(
            indy_target_key("(I)Ljava/lang/String;".as_bytes()),
            adapter("(ILjava/lang/Object;)Ljava/lang/Object;")
        );
        assert_eq!(
            indy_target_key("([JZLjava/util/List;CD)V".as_bytes()),
            adapter("(Ljava/lang/Object;ILjava/lang/Object;IDLjava/lang/Object;)V")
        );
        assert_eq!(indy_target_key("(S)Z".as_bytes()), adapter("(ILjava/lang/Object;)I"));
        for bad in ["", "()", "(", "(Q)V", "(L)V", "()X", "()VV", "(I)[", "()II"] {
            assert_eq!(indy_target_key(bad.as_bytes()), None, "{bad}");
        }
    }
}
