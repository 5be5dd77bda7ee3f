//! Which methods of a class record mode makes leaves although they make calls, decided for the
//! whole class before its methods are rewritten.
//!
//! A leaf has no site probe: its entry probe only drops its caller's record and computes no
//! context (probes.rs; agent/java/lucce/Runtime.java, `leaf`). A method without invokes is one in
//! every mode. Record mode also makes leaves of
//! - a method whose calls only build the exception it throws ([`ProbeChoice::throw_path_calls`]
//!   off): each such call walks the stack, once per exception;
//! - a *leaf caller* ([`ProbeChoice::leaf_calls`] off), a method whose every call certainly
//!   enters a leaf of its own class: `String.length()`, which calls `coder()`; also through other
//!   leaf callers of the class.
//!
//! A leaf caller's callees find no record at their entry, since it has no call probe, and need
//! none: a leaf's entry computes nothing, and a walk that passes over a leaf computes its context
//! from its caller (agent/src/recorder.rs, `walk`). So exactness never depends on the callee
//! being a leaf, but speed does: a callee that is not one would walk the stack at every entry.
//! Hence the calls admitted are those whose target the instruction fixes: `invokestatic`,
//! `invokespecial`, and `invokevirtual` or `invokeinterface` of a private method, of a final
//! method or in a final class. A call a subclass could override is not admitted.

use super::classfile::{be_u16, ConstPool, Method, TAG_IMETHODREF, TAG_METHODREF};
use super::code;
use super::{ProbeChoice, ACC_ABSTRACT, ACC_NATIVE, ACC_STATIC};

const ACC_PRIVATE: u16 = 0x0002;
const ACC_FINAL: u16 = 0x0010;

/// Which kind of leaf record mode makes a method that has calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Leaf {
    /// None: the method has call probes, or no call at all (a leaf in every mode).
    #[default]
    No,
    /// Its calls only build the exception it throws.
    Throws,
    /// Every call enters a leaf of its own class.
    Caller,
}

/// The class's parts that [`find`] reads.
pub(crate) struct ClassView<'c, 'a> {
    pub bytes: &'a [u8],
    pub cp: &'c ConstPool<'a>,
    pub this_class: u16,
    pub access: u16,
    pub methods: &'c [Method],
    /// The method of the define hook (probes.rs, `DEFINE_HOOK`), never a leaf: its entry probe
    /// needs the locals of a method with sites.
    pub define_hook: Option<usize>,
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
}

/// Fills `out` with each method's [`Leaf`] under `probes` (all [`Leaf::No`] in counting mode).
pub(crate) fn find(class: &ClassView<'_, '_>, probes: ProbeChoice, s: &mut LeafScratch, out: &mut Vec<Leaf>) {
    out.clear();
    out.resize(class.methods.len(), Leaf::No);
    if probes.throw_path_calls && probes.leaf_calls {
        return;
    }
    let (scans, calls) = (&mut s.scans, &mut s.calls);
    scans.clear();
    calls.clear();
    for (i, m) in class.methods.iter().enumerate() {
        let scan = scan(class, i, m, probes, calls);
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
    for (o, scan) in out.iter_mut().zip(scans.iter()) {
        *o = match scan {
            Scan::Throws => Leaf::Throws,
            Scan::Caller => Leaf::Caller,
            _ => Leaf::No,
        };
    }
}

/// Method `i` before the leaf callers are known; its calls go to `calls` when it is
/// [`Scan::Calls`].
fn scan(class: &ClassView<'_, '_>, i: usize, m: &Method, probes: ProbeChoice, calls: &mut Vec<(u16, u16)>) -> Scan {
    let Some(span) = &m.code else { return Scan::No };
    if m.dup_code || m.access & (ACC_NATIVE | ACC_ABSTRACT) != 0 || class.define_hook == Some(i) {
        return Scan::No;
    }
    let Some((code, handlers)) = code_of(class.bytes.get(span.info.clone()).unwrap_or_default()) else {
        return Scan::No;
    };
    if code.len() > code::LEAF_MAX_CODE {
        return Scan::No;
    }
    if !probes.throw_path_calls && !handlers && code::invokes_only_before_throws(code) && !calls_api(class, code) {
        return Scan::Throws;
    }
    let mark = calls.len();
    let mut any = false;
    let all_in_class = code::every_invoke(code, |off| {
        any = true;
        match exact_callee(class, code, off) {
            Some(j) if !probes.leaf_calls => {
                calls.push((i as u16, j as u16));
                true
            }
            _ => false,
        }
    });
    match (all_in_class, any) {
        (true, false) => Scan::Plain,
        (true, true) => Scan::Calls,
        (false, _) => {
            calls.truncate(mark);
            Scan::No
        }
    }
}

/// The code of a Code attribute's info, and whether it has exception handlers.
fn code_of(info: &[u8]) -> Option<(&[u8], bool)> {
    let len = u32::from_be_bytes(info.get(4..8)?.try_into().ok()?) as usize;
    let code = info.get(8..8usize.checked_add(len)?)?;
    Some((code, be_u16(info, 8 + len)? != 0))
}

/// Whether a call of `code` is one of the lucce API (whose natives take the call's record).
fn calls_api(class: &ClassView<'_, '_>, code: &[u8]) -> bool {
    !code::every_invoke(code, |off| {
        let class_name = be_u16(code, off + 1).and_then(|idx| class.cp.member_ref(idx)).and_then(|(c, _, _)| class.cp.class_name(c));
        class_name != Some(b"lucce/Lucce")
    })
}

/// The index of the method of this class that the invoke at `off` certainly enters, if any.
fn exact_callee(class: &ClassView<'_, '_>, code: &[u8], off: usize) -> Option<usize> {
    const INVOKEVIRTUAL: u8 = 0xB6;
    const INVOKESPECIAL: u8 = 0xB7;
    const INVOKESTATIC: u8 = 0xB8;
    const INVOKEINTERFACE: u8 = 0xB9;
    let cp = class.cp;
    let op = code[off];
    let idx = be_u16(code, off + 1)?;
    if !matches!(cp.tag(idx), TAG_METHODREF | TAG_IMETHODREF) {
        return None;
    }
    let (c, n, d) = cp.member_ref(idx)?;
    if c != class.this_class && cp.class_name(c) != cp.class_name(class.this_class) {
        return None;
    }
    let (name, desc) = (cp.utf8(n)?, cp.utf8(d)?);
    let j = class.methods.iter().position(|m| (m.name, m.desc) == (n, d) || (cp.utf8(m.name), cp.utf8(m.desc)) == (Some(name), Some(desc)))?;
    let access = class.methods[j].access;
    let fixed = match op {
        INVOKESTATIC => access & ACC_STATIC != 0,
        INVOKESPECIAL => access & ACC_STATIC == 0,
        INVOKEVIRTUAL => access & ACC_STATIC == 0 && (access & (ACC_PRIVATE | ACC_FINAL) != 0 || class.access & ACC_FINAL != 0),
        INVOKEINTERFACE => access & (ACC_STATIC | ACC_PRIVATE) == ACC_PRIVATE,
        _ => false,
    };
    fixed.then_some(j)
}
