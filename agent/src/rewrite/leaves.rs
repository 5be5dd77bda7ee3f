//! Which methods of a class record mode makes leaves although they make calls, decided for the
//! whole class before its methods are rewritten.
//!
//! A leaf has no site probe: its entry probe only drops its caller's record and computes no
//! context (probes.rs; agent/java/lucce/Runtime.java, `leaf`). A method without invokes is one in
//! every mode. Record mode also makes leaves of
//! - a method whose calls only build the exception it throws ([`ProbeChoice::throw_path_calls`]
//!   off): each such call walks the stack, once per exception;
//! - a *leaf caller* ([`ProbeChoice::leaf_calls`] off), a method whose every call certainly
//!   enters a leaf of its own class (`String.length()`, which calls `coder()`; also through
//!   other leaf callers of the class) or a leaf of another class that the registry knows
//!   ([`super::SiteRegistry::known_leaf`]: `String.charAt` through the static
//!   `StringLatin1.charAt`, `ArrayList()` through the constructors of its superclasses up to
//!   `Object.<init>`), or calls one of a few natives that run no Java code
//!   (`System.arraycopy`, [`PURE_NATIVES`]).
//!
//! A leaf caller's callees find no record at their entry, since it has no call probe, and need
//! none: a leaf's entry computes nothing, and a walk that passes over a leaf computes its context
//! from its caller (agent/src/recorder.rs, `walk`). So exactness never depends on the callee
//! being a leaf, but speed does: a callee that is not one would walk the stack at every entry.
//! Hence the calls admitted are those whose target the instruction fixes: `invokestatic`,
//! `invokespecial`, and `invokevirtual` or `invokeinterface` of a private method, of a final
//! method or in a final class, and `invokevirtual` of a package-private method of a class in a
//! `java.` package, which only the JDK's own classes could override. A call a subclass could
//! override is not admitted. Of another class, static methods and those of `invokespecial`
//! (constructors, `super.m()`) are asked about, and virtual ones only of a few final classes
//! of the JDK ([`FINAL_CLASSES`]: `String`, the builders, the boxes). A leaf caller may also
//! make calls that build the exception it throws, as the first kind.

use super::classfile::{be_u16, ConstPool, Method, TAG_IMETHODREF, TAG_METHODREF};
use super::code;
use super::probes::DEFINE_HOOK;
use super::{ProbeChoice, ACC_ABSTRACT, ACC_FINAL, ACC_NATIVE, ACC_PRIVATE, ACC_STATIC};

/// Which kind of leaf record mode makes a method that has calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Leaf {
    /// None: the method has call probes.
    #[default]
    No,
    /// No call at all: a leaf in every mode.
    Plain,
    /// Its calls only build the exception it throws.
    Throws,
    /// Every call enters a leaf, of its own class or one the registry knows
    /// ([`super::SiteRegistry::known_leaf`]); or the registry said callers count on it.
    Caller,
}

impl Leaf {
    pub(crate) fn is_leaf(self) -> bool {
        self != Leaf::No
    }

    /// A leaf only in record mode: no site probes although the method calls.
    pub(crate) fn drops_calls(self) -> bool {
        matches!(self, Leaf::Throws | Leaf::Caller)
    }
}

/// The class's parts that [`find`] reads.
pub(crate) struct ClassView<'c, 'a> {
    pub bytes: &'a [u8],
    pub cp: &'c ConstPool<'a>,
    pub this_class: u16,
    pub access: u16,
    pub methods: &'c [Method],
    /// The method that has site probes whatever it calls, if the class has one: the define
    /// hook's (probes.rs, `DEFINE_HOOK`: its entry probe needs the locals of a method with
    /// sites).
    sited: Option<usize>,
    /// `Object.<init>`, in class `Object`: it has site probes too with
    /// [`ProbeChoice::finalizer_call`] (a call probe before its `return`s, method.rs).
    object_init: Option<usize>,
    /// [`super::SiteRegistry::known_leaf`].
    pub known_leaf: &'c super::KnownLeaf<'c>,
}

impl<'c, 'a> ClassView<'c, 'a> {
    pub fn new(bytes: &'a [u8], cp: &'c ConstPool<'a>, this_class: u16, access: u16, methods: &'c [Method], known_leaf: &'c super::KnownLeaf<'c>) -> Self {
        let class = cp.class_name(this_class).unwrap_or_default();
        let named = |m: &Method| (cp.utf8(m.name).unwrap_or_default(), cp.utf8(m.desc).unwrap_or_default());
        let sited = methods.iter().position(|m| {
            let (name, desc) = named(m);
            DEFINE_HOOK.is(class, name, desc, m.access)
        });
        let object_init = (class == b"java/lang/Object").then(|| methods.iter().position(|m| named(m).0 == b"<init>")).flatten();
        ClassView { bytes, cp, this_class, access, methods, sited, object_init, known_leaf }
    }
}

/// What a method is before the leaf callers are known.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Not a leaf, or not one that callers may count on.
    No,
    /// No invoke: a leaf in every mode.
    Plain,
    Throws,
    /// Every invoke enters a method of the class, certainly: a leaf caller if they all are leaves.
    Calls,
    Caller,
}

impl Scan {
    fn is_leaf(self) -> bool {
        matches!(self, Scan::Plain | Scan::Throws | Scan::Caller)
    }
}

/// Reused between classes.
#[derive(Default)]
pub(crate) struct LeafScratch {
    scans: Vec<Scan>,
    /// (caller, callee) method indices of the calls of the methods scanned as [`Scan::Calls`].
    calls: Vec<(u16, u16)>,
    /// For [`code::every_invoke`].
    pending: Vec<u32>,
}

/// Fills `out` with each method's [`Leaf`] under `probes` (all [`Leaf::No`] in counting mode).
pub(crate) fn find(class: &ClassView<'_, '_>, probes: ProbeChoice, s: &mut LeafScratch, out: &mut Vec<Leaf>) {
    out.clear();
    out.resize(class.methods.len(), Leaf::No);
    if probes.throw_path_calls && probes.leaf_calls {
        return;
    }
    let (scans, calls, pending) = (&mut s.scans, &mut s.calls, &mut s.pending);
    scans.clear();
    calls.clear();
    for (i, m) in class.methods.iter().enumerate() {
        let scan = scan(class, i, m, probes, calls, pending);
        scans.push(scan);
    }
    // The least fixed point: a method that calls itself, or a cycle of the class's methods, is
    // not a leaf caller (its recursion would be frames that only a walk could find contexts for).
    let mut changed = !calls.is_empty();
    while changed {
        changed = false;
        let mut k = 0;
        while k < calls.len() {
            let caller = calls[k].0;
            let end = k + calls[k..].iter().take_while(|c| c.0 == caller).count();
            let i = caller as usize;
            if scans[i] == Scan::Calls && calls[k..end].iter().all(|&(_, j)| scans[j as usize].is_leaf()) {
                scans[i] = Scan::Caller;
                changed = true;
            }
            k = end;
        }
    }
    let this = class.cp.class_name(class.this_class).unwrap_or_default();
    for ((o, scan), m) in out.iter_mut().zip(scans.iter()).zip(class.methods) {
        *o = match scan {
            Scan::Plain => Leaf::Plain,
            Scan::Throws => Leaf::Throws,
            Scan::Caller => Leaf::Caller,
            Scan::No | Scan::Calls => match (class.cp.utf8(m.name), class.cp.utf8(m.desc)) {
                (Some(n), Some(d)) if m.code.is_some() && (class.known_leaf)(this, n, d, true).is_some() => Leaf::Caller,
                _ => Leaf::No,
            },
        };
    }
}

/// Method `i` before the leaf callers are known; its calls go to `calls` when it is
/// [`Scan::Calls`]. A call may build the exception the method throws only if no exception
/// handler covers the run from the call to the `athrow`: one could catch what it throws and go
/// on, and its calls could then be a loop's (`IntStack.peek`'s handler, which throws another
/// exception, covers only what comes before it).
fn scan(class: &ClassView<'_, '_>, i: usize, m: &Method, probes: ProbeChoice, calls: &mut Vec<(u16, u16)>, pending: &mut Vec<u32>) -> Scan {
    let Some(span) = &m.code else { return Scan::No };
    if m.dup_code || m.access & (ACC_NATIVE | ACC_ABSTRACT) != 0 || class.sited == Some(i) || probes.finalizer_call() && class.object_init == Some(i) {
        return Scan::No;
    }
    let Some((code, handlers)) = code_of(class.bytes.get(span.info.clone()).unwrap_or_default()) else {
        return Scan::No;
    };
    if code.len() > code::LEAF_MAX_CODE {
        return Scan::No;
    }
    // Whether the exception thrown at `throw` leaves the method, from the call at `off` on.
    let uncaught = |off: usize, throw: usize| handlers.chunks_exact(8).all(|h| be_u16(h, 0).zip(be_u16(h, 2)).is_some_and(|(start, end)| usize::from(start) > throw || usize::from(end) <= off));
    let mark = calls.len();
    let mut any = false;
    // First without asking the registry about other classes (taking the methods it would be
    // asked about for leaves), so that a method with another kind of call leads to no question: each may read
    // and analyse class files (agent/src/jdk_leaves.rs). Again, asking, only if it calls such.
    let mut elsewhere = false;
    for ask in [false, true] {
        if ask && !elsewhere {
            break;
        }
        calls.truncate(mark);
        let all_leaves = code::every_invoke(code, pending, |off, throw| {
            any = true;
            if throw.is_some_and(|at| !probes.throw_path_calls && uncaught(off, at)) {
                // Not the lucce API, whose natives take the call's record.
                return callee_class(class, code, off) != Some(b"lucce/Lucce");
            }
            if probes.leaf_calls {
                return false;
            }
            match callee(class, code, off, ask) {
                Callee::Here(j) => {
                    calls.push((i as u16, j as u16));
                    true
                }
                Callee::LeafElsewhere => {
                    elsewhere = true;
                    true
                }
                Callee::Unknown => false,
            }
        });
        if !all_leaves {
            calls.truncate(mark);
            return Scan::No;
        }
    }
    match (any, calls.len() > mark) {
        (false, _) => Scan::Plain,
        (true, false) => Scan::Throws,
        (true, true) => Scan::Calls,
    }
}

/// The code of a Code attribute's info, and its exception table (8 bytes an entry: start, end,
/// handler, type).
fn code_of(info: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_be_bytes(info.get(4..8)?.try_into().ok()?) as usize;
    let code = info.get(8..8usize.checked_add(len)?)?;
    let handlers = usize::from(be_u16(info, 8 + len)?);
    Some((code, info.get(10 + len..10 + len + 8 * handlers)?))
}

/// The class named by the invoke at `off`.
fn callee_class<'a>(class: &ClassView<'_, 'a>, code: &[u8], off: usize) -> Option<&'a [u8]> {
    let idx = be_u16(code, off + 1)?;
    class.cp.class_name(class.cp.member_ref(idx)?.0)
}

/// What the invoke at `off` certainly enters.
enum Callee {
    /// This method of the class.
    Here(usize),
    /// A leaf of another class.
    LeafElsewhere,
    Unknown,
}

/// Static native methods of `java.base` that run no Java code (but for an exception they throw):
/// a call of one needs no record, as a leaf's does not (`Arrays.copyOf` calls `arraycopy`). Only
/// the JDK's boot loader may define classes in `java.` packages, so the names are these.
const PURE_NATIVES: &[(&[u8], &[u8])] = &[
    (b"java/lang/System", b"arraycopy"),
    (b"java/lang/System", b"nanoTime"),
    (b"java/lang/System", b"currentTimeMillis"),
    (b"java/lang/System", b"identityHashCode"),
    (b"java/lang/Thread", b"currentThread"),
    (b"java/lang/Float", b"floatToRawIntBits"),
    (b"java/lang/Float", b"intBitsToFloat"),
    (b"java/lang/Double", b"doubleToRawLongBits"),
    (b"java/lang/Double", b"longBitsToDouble"),
    (b"java/lang/reflect/Array", b"newArray"),
    (b"java/lang/reflect/Array", b"getLength"),
];

/// Final classes of `java.base` whose methods' leaves are asked about for `invokevirtual` too
/// (the final class fixes the target): the strings, builders and boxes that small methods call
/// most. Not every class: an answer reads and analyses the class, and those its methods call
/// in turn, twice as many in a small program's JVM when every virtual call asked.
const FINAL_CLASSES: &[&[u8]] = &[
    b"java/lang/String",
    b"java/lang/StringBuilder",
    b"java/lang/StringBuffer",
    b"java/lang/Integer",
    b"java/lang/Long",
    b"java/lang/Short",
    b"java/lang/Byte",
    b"java/lang/Character",
    b"java/lang/Boolean",
    b"java/lang/Double",
    b"java/lang/Float",
    b"java/lang/Class",
];

const INVOKEVIRTUAL: u8 = 0xB6;
const INVOKESPECIAL: u8 = 0xB7;
const INVOKESTATIC: u8 = 0xB8;
const INVOKEINTERFACE: u8 = 0xB9;

/// What the invoke at `off` certainly enters; without `ask`, a method of another class that the
/// registry would be asked about is taken for a leaf.
fn callee(class: &ClassView<'_, '_>, code: &[u8], off: usize, ask: bool) -> Callee {
    let cp = class.cp;
    let op = code[off];
    let Some((c, n, d)) = be_u16(code, off + 1).filter(|&idx| matches!(cp.tag(idx), TAG_METHODREF | TAG_IMETHODREF)).and_then(|idx| cp.member_ref(idx)) else {
        return Callee::Unknown;
    };
    let (Some(class_name), Some(name), Some(desc)) = (cp.class_name(c), cp.utf8(n), cp.utf8(d)) else { return Callee::Unknown };
    if c != class.this_class && Some(class_name) != cp.class_name(class.this_class) {
        // Another class's: only static methods, those of `invokespecial` (constructors,
        // `super.m()`) and virtual ones of [`FINAL_CLASSES`] are asked about, whose target the
        // instruction fixes, so that an answer reads few classes (utility classes such as
        // `StringLatin1`, `Objects`, `Preconditions`; superclasses up to `Object`).
        let want_static = match op {
            INVOKESTATIC if PURE_NATIVES.contains(&(class_name, name)) => return Callee::LeafElsewhere,
            INVOKESTATIC => true,
            INVOKESPECIAL => false,
            INVOKEVIRTUAL if FINAL_CLASSES.contains(&class_name) => false,
            _ => return Callee::Unknown,
        };
        let leaf = !ask
            || (class.known_leaf)(class_name, name, desc, false).is_some_and(|(access, class_access)| {
                (access & ACC_STATIC != 0) == want_static && (op != INVOKEVIRTUAL || access & (ACC_FINAL | ACC_PRIVATE) != 0 || class_access & ACC_FINAL != 0)
            });
        return if leaf { Callee::LeafElsewhere } else { Callee::Unknown };
    }
    let found = class.methods.iter().position(|m| (m.name, m.desc) == (n, d) || (cp.utf8(m.name), cp.utf8(m.desc)) == (Some(name), Some(desc)));
    match found {
        Some(j) if dispatch_fixed(op, class.methods[j].access, class.access, class_name.starts_with(b"java/")) => Callee::Here(j),
        _ => Callee::Unknown,
    }
}

/// Whether invoke `op` of a method of `access` in a class of `class_access` enters that method
/// and no override; `in_java`: the method is of the caller's class, in a `java.` package, where
/// only the JDK's own classes could override a package-private method (`ArrayList.elementData`).
fn dispatch_fixed(op: u8, access: u16, class_access: u16, in_java: bool) -> bool {
    const ACC_PUBLIC: u16 = 0x0001;
    const ACC_PROTECTED: u16 = 0x0004;
    let package_private = access & (ACC_PUBLIC | ACC_PROTECTED | ACC_PRIVATE) == 0;
    match op {
        INVOKESTATIC => access & ACC_STATIC != 0,
        INVOKESPECIAL => access & ACC_STATIC == 0,
        INVOKEVIRTUAL => access & ACC_STATIC == 0 && (access & (ACC_PRIVATE | ACC_FINAL) != 0 || class_access & ACC_FINAL != 0 || in_java && package_private),
        INVOKEINTERFACE => access & (ACC_STATIC | ACC_PRIVATE) == ACC_PRIVATE,
        _ => false,
    }
}
