//! Rewritten classes that can take other ids: the first step of rewriting the JDK's classes once
//! instead of at every load (docs/agent.md, "Real programs", stop 42).
//!
//! A class is rewritten with a [`Recorder`] as its registry: it hands out placeholder ids (at
//! least 2^30, so that every id is pushed as an Integer constant of its own, never as a short
//! push whose length depends on the id) and keeps the registry calls in order. [`Relocatable`]
//! then holds the rewritten class (as pieces of the original and new bytes), those calls and
//! where each placeholder sits. To use it in a run, [`Relocatable::replay`] makes the same calls
//! on the run's registry, which gives the run's dense ids, and writes them over the
//! placeholders: the result is the class the rewriter would have made with those ids whenever
//! they are all at least 32,768 (below, the rewriter would push them shorter; the class is as
//! valid either way). The class cache (`class_cache.rs`) keeps such records between runs.

use std::cell::{Cell, RefCell};

use super::classfile::{be_i32, be_u16, ConstPool, PoolBuffers, TAG_INTEGER};
use super::{rewrite_class_with, ClassStats, MethodInfo, ProbeChoice, RewriteError, SiteInfo, SiteRegistry};

/// The first placeholder id; call `k` of a recorded rewrite gets `PLACEHOLDER_BASE + k`.
const PLACEHOLDER_BASE: u32 = 1 << 30;

/// A registry call of a recorded rewrite.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Method(OwnedMethodInfo),
    /// A site of the method registered by call number `method` (an index into the calls).
    Site { method: u32, site: SiteInfo },
    Reserve(u32),
}

/// [`MethodInfo`] with its own strings.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedMethodInfo {
    pub class: String,
    pub name: String,
    pub descriptor: String,
    pub source_file: Option<String>,
    pub access_flags: u16,
    pub leaf: bool,
}

impl OwnedMethodInfo {
    fn of(m: &MethodInfo<'_>) -> Self {
        OwnedMethodInfo {
            class: m.class.to_string(),
            name: m.name.to_string(),
            descriptor: m.descriptor.to_string(),
            source_file: m.source_file.map(str::to_string),
            access_flags: m.access_flags,
            leaf: m.leaf,
        }
    }

    fn borrow(&self) -> MethodInfo<'_> {
        MethodInfo {
            class: &self.class,
            name: &self.name,
            descriptor: &self.descriptor,
            source_file: self.source_file.as_deref(),
            access_flags: self.access_flags,
            leaf: self.leaf,
        }
    }
}

/// A registry that records its calls and the ids they got: placeholders, or with a `live`
/// registry, that registry's own ids (an exact record). It rewrites as the live registry it
/// stands for would (the same `probes`, `direct_rewrite` and `known_leaf`), and keeps the
/// leaves of other classes that the rewrite counted on.
struct Recorder<'r> {
    calls: Vec<Call>,
    /// (id, call number) of each method call.
    methods: Vec<(u32, u32)>,
    /// The id of each site call.
    sites: Vec<u32>,
    live: Option<&'r mut dyn SiteRegistry>,
    /// Answers `known_leaf` for placeholders.
    like: Option<&'r dyn SiteRegistry>,
    probes: ProbeChoice,
    direct_rewrite: bool,
    /// See [`Relocatable::assumed`]; None once an answer could not be kept: a name that is not
    /// UTF-8, or a method made a leaf only because callers count on it.
    assumed: RefCell<Option<Vec<Assumed>>>,
}

impl<'r> Recorder<'r> {
    /// Placeholder ids, for a run whose registry is like `like`.
    fn placeholders(like: &'r dyn SiteRegistry) -> Self {
        Recorder::new(None, Some(like), like.probes(), like.direct_rewrite())
    }

    /// `live`'s own ids.
    fn forwarding(live: &'r mut dyn SiteRegistry) -> Self {
        let (probes, direct_rewrite) = (live.probes(), live.direct_rewrite());
        Recorder::new(Some(live), None, probes, direct_rewrite)
    }

    fn new(live: Option<&'r mut dyn SiteRegistry>, like: Option<&'r dyn SiteRegistry>, probes: ProbeChoice, direct_rewrite: bool) -> Self {
        let assumed = RefCell::new(Some(Vec::new()));
        Recorder { calls: Vec::new(), methods: Vec::new(), sites: Vec::new(), live, like, probes, direct_rewrite, assumed }
    }

    /// What [`Relocatable::assumed`] takes (each answer once); an error when an answer could not
    /// be kept.
    fn take_assumed(&self) -> Result<Vec<Assumed>, RewriteError> {
        let mut assumed = self.assumed.take().ok_or(RewriteError::Malformed("leaves counted on that a record cannot tell"))?;
        assumed.sort_unstable_by(|a, b| (&a.class, &a.name, &a.descriptor).cmp(&(&b.class, &b.name, &b.descriptor)));
        assumed.dedup();
        Ok(assumed)
    }

    /// The placeholder of the next call.
    fn placeholder(&self) -> u32 {
        PLACEHOLDER_BASE + self.calls.len() as u32
    }
}

impl SiteRegistry for Recorder<'_> {
    fn method(&mut self, m: &MethodInfo<'_>) -> u32 {
        let id = match self.live.as_deref_mut() {
            Some(live) => live.method(m),
            None => self.placeholder(),
        };
        self.methods.push((id, self.calls.len() as u32));
        self.calls.push(Call::Method(OwnedMethodInfo::of(m)));
        id
    }
    fn site(&mut self, method_id: u32, site: &SiteInfo) -> u32 {
        let id = match self.live.as_deref_mut() {
            Some(live) => live.site(method_id, site),
            None => self.placeholder(),
        };
        // The method is the last one given an id, in the rewriter's order.
        let method = self.methods.iter().rev().find(|m| m.0 == method_id).map_or(u32::MAX, |m| m.1);
        self.sites.push(id);
        self.calls.push(Call::Site { method, site: *site });
        id
    }
    fn reserve_sites(&mut self, n: u32) {
        if let Some(live) = self.live.as_deref_mut() {
            live.reserve_sites(n);
        }
        // Not an id: kept for the replay, which passes it on.
        self.calls.push(Call::Reserve(n));
    }
    fn probes(&self) -> ProbeChoice {
        self.probes
    }
    fn direct_rewrite(&self) -> bool {
        self.direct_rewrite
    }
    fn known_leaf(&self, class: &[u8], name: &[u8], desc: &[u8], own: bool) -> Option<(u16, u16)> {
        let answer = match (&self.live, self.like) {
            (Some(live), _) => live.known_leaf(class, name, desc, own),
            (None, Some(like)) => like.known_leaf(class, name, desc, own),
            (None, None) => None,
        }?;
        let mut assumed = self.assumed.borrow_mut();
        let text = |b: &[u8]| std::str::from_utf8(b).ok().map(str::to_string);
        match (own, assumed.as_mut(), text(class), text(name), text(desc)) {
            (false, Some(list), Some(class), Some(name), Some(descriptor)) => list.push(Assumed { class, name, descriptor, access: answer.0, class_access: answer.1 }),
            // A method of the class made a leaf because callers count on it, which the rewrite
            // did not find one on its own: what its calls count on is not known here.
            _ => *assumed = None,
        }
        Some(answer)
    }
}

/// A leaf of another class that a rewrite counted on ([`SiteRegistry::known_leaf`]): a run
/// whose registry does not answer the same may not take the rewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assumed {
    pub class: String,
    pub name: String,
    pub descriptor: String,
    /// The answer: the method's access flags and its class's.
    pub access: u16,
    pub class_access: u16,
}

/// A rewritten class whose ids are placeholders, kept as pieces: of the original class where
/// the rewriter copied it (its constant pool, the end of the class after the last method it
/// changed), of `literal` where the bytes are new. The pieces of the original need not be kept:
/// a record of the class cache is about a third smaller.
#[derive(Debug, Clone)]
pub struct Relocatable {
    /// The rewritten class, or None when the rewriter left it unchanged.
    pub pieces: Option<Vec<Piece>>,
    /// The new bytes the pieces refer to.
    pub literal: Vec<u8>,
    pub stats: ClassStats,
    pub calls: Vec<Call>,
    /// Where each placeholder's 4 bytes sit in `literal`: (call number, offset).
    pub slots: Vec<(u32, u32)>,
    /// The leaves of other classes that its leaf callers count on.
    pub assumed: Vec<Assumed>,
}

/// A piece of a rewritten class: `len` bytes at `at` of the original class or of the literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    Original { at: u32, len: u32 },
    Literal { at: u32, len: u32 },
}

impl Relocatable {
    /// Rewrites `class` for a run whose registry is like `live`.
    pub fn rewrite(class: &[u8], live: &dyn SiteRegistry) -> Result<Self, RewriteError> {
        let mut rec = Recorder::placeholders(live);
        let mut literal = Vec::new();
        let (pieces, stats) = rewrite_class_with(class, &mut rec, |parts| pieces_of(class, parts, &mut literal))?;
        let assumed = rec.take_assumed()?;
        let mut r = Relocatable { pieces: None, literal, stats, calls: rec.calls, slots: Vec::new(), assumed };
        if let Some(pieces) = pieces {
            let bytes = assemble(class, &pieces, &r.literal).ok_or(RewriteError::Malformed("pieces"))?.concat();
            r.slots = placeholder_slots(class, &bytes, r.calls.len())?
                .into_iter()
                .map(|(k, at)| Some((k, literal_offset(&pieces, at)?)))
                .collect::<Option<_>>()
                .ok_or(RewriteError::Malformed("placeholder outside the new bytes"))?;
            r.pieces = Some(pieces);
        }
        Ok(r)
    }

    /// Rewrites `class` with `live`'s own ids, keeping the calls it made: a record with no
    /// placeholders, which gives the same class again to a registry that hands out the same ids
    /// (`SiteRegistry::take_ids`). True with it when those ids were the ones from `first` on, in
    /// order (another thread taking ids between them makes the record useless).
    pub fn rewrite_exact(class: &[u8], live: &mut dyn SiteRegistry, first: (u32, u32)) -> Result<(Self, bool), RewriteError> {
        let mut rec = Recorder::forwarding(live);
        let mut literal = Vec::new();
        let (pieces, stats) = rewrite_class_with(class, &mut rec, |parts| pieces_of(class, parts, &mut literal))?;
        let consecutive = |first: u32, ids: &mut dyn Iterator<Item = u32>| ids.zip(first..).all(|(id, want)| id == want);
        let exact = consecutive(first.0, &mut rec.methods.iter().map(|m| m.0)) && consecutive(first.1, &mut rec.sites.iter().copied());
        let assumed = rec.take_assumed()?;
        Ok((Relocatable { pieces, literal, stats, calls: rec.calls, slots: Vec::new(), assumed }, exact))
    }

    /// Makes the recorded calls on `reg` and returns the class (`class` being the one rewritten)
    /// with the ids it gave; None when the rewriter left the class unchanged. None, and no call
    /// made, when the record does not hold together (see [`relocate`]).
    pub fn replay(&self, class: &[u8], reg: &mut dyn SiteRegistry) -> Option<Vec<u8>> {
        let mut literal = self.literal.clone();
        let calls: Vec<CallRef<'_>> = self.calls.iter().map(Call::as_ref).collect();
        relocate(class, self.pieces.as_deref(), &mut literal, &calls[..], self.slots.iter().copied(), reg)?.map(|parts| parts.concat())
    }
}

/// Gives a recorded rewrite of `class` a run's ids: makes `calls` on `reg`, writes the ids over
/// the placeholders in `literal` at `slots`, and returns the class as parts of `class` and
/// `literal` (Some(None) for a class the rewriter left unchanged, which has no pieces). None, and
/// no call made, when the record does not hold together: a piece outside `class` or `literal`,
/// or what [`replay_calls`] refuses. `slots` is walked twice (a check, then the patching): a
/// record read back needs no list of them.
pub fn relocate<'a>(
    class: &'a [u8],
    pieces: Option<&[Piece]>,
    literal: &'a mut [u8],
    calls: &(impl Calls + ?Sized),
    slots: impl Iterator<Item = (u32, u32)> + Clone,
    reg: &mut dyn SiteRegistry,
) -> Option<Option<Vec<&'a [u8]>>> {
    if let Some(p) = pieces {
        assemble(class, p, literal)?;
    }
    if !replay_calls(calls, slots, literal, reg) {
        return None;
    }
    let literal: &'a [u8] = literal;
    Some(pieces.map(|p| assemble(class, p, literal).expect("checked above")))
}

/// `parts` (the rewriter's output) as pieces: those that lie in `class` refer to it, the others
/// are appended to `literal`.
fn pieces_of(class: &[u8], parts: &[&[u8]], literal: &mut Vec<u8>) -> Vec<Piece> {
    let base = class.as_ptr() as usize;
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| {
            let start = p.as_ptr() as usize;
            if start >= base && start + p.len() <= base + class.len() {
                Piece::Original { at: (start - base) as u32, len: p.len() as u32 }
            } else {
                literal.extend_from_slice(p);
                Piece::Literal { at: (literal.len() - p.len()) as u32, len: p.len() as u32 }
            }
        })
        .collect()
}

/// The class the pieces make, as slices of `class` and `literal`; None when a piece lies outside
/// them.
fn assemble<'a>(class: &'a [u8], pieces: &[Piece], literal: &'a [u8]) -> Option<Vec<&'a [u8]>> {
    pieces
        .iter()
        .map(|&p| match p {
            Piece::Original { at, len } => class.get(at as usize..at as usize + len as usize),
            Piece::Literal { at, len } => literal.get(at as usize..at as usize + len as usize),
        })
        .collect()
}

/// Where the 4 bytes at `at` of the assembled class lie in the literal, if they lie in one
/// literal piece.
fn literal_offset(pieces: &[Piece], at: u32) -> Option<u32> {
    let mut start = 0u32;
    for &p in pieces {
        let (len, lit) = match p {
            Piece::Original { len, .. } => (len, None),
            Piece::Literal { at, len } => (len, Some(at)),
        };
        if at >= start && at + 4 <= start + len {
            return lit.map(|l| l + at - start);
        }
        start += len;
    }
    None
}

/// A registry call of a recorded rewrite, borrowing its strings (from a [`Call`], or from a
/// record read back from the class cache).
#[derive(Debug, Clone, Copy)]
pub enum CallRef<'a> {
    Method(MethodInfo<'a>),
    Site { method: u32, site: SiteInfo },
    Reserve(u32),
}

impl Call {
    pub fn as_ref(&self) -> CallRef<'_> {
        match self {
            Call::Method(m) => CallRef::Method(m.borrow()),
            Call::Site { method, site } => CallRef::Site { method: *method, site: *site },
            Call::Reserve(n) => CallRef::Reserve(*n),
        }
    }
}

/// The registry calls of a recorded rewrite, in order: a list of [`CallRef`]s, or a record of
/// the class cache read as it is walked (class_cache.rs), which needs no such list.
pub trait Calls {
    /// How many calls there are ([`Calls::make`] gives each an id, 0 for a reservation).
    fn count(&self) -> usize;
    /// Whether every site belongs to an earlier method call.
    fn consistent(&self) -> bool;
    /// Makes the calls on `reg`, in order; `ids[k]` gets call k's id. Only for calls that are
    /// [`Calls::consistent`], and `ids` must hold [`Calls::count`] entries.
    fn make(&self, reg: &mut dyn SiteRegistry, ids: &mut [u32]);
}

impl Calls for [CallRef<'_>] {
    fn count(&self) -> usize {
        self.len()
    }

    fn consistent(&self) -> bool {
        let method_before = |k: usize, m: u32| (m as usize) < k && matches!(self[m as usize], CallRef::Method(_));
        self.iter().enumerate().all(|(k, c)| !matches!(c, CallRef::Site { method, .. } if !method_before(k, *method)))
    }

    fn make(&self, reg: &mut dyn SiteRegistry, ids: &mut [u32]) {
        for (k, call) in self.iter().enumerate() {
            ids[k] = match call {
                CallRef::Method(m) => reg.method(m),
                CallRef::Site { method, site } => reg.site(ids[*method as usize], site),
                CallRef::Reserve(n) => {
                    reg.reserve_sites(*n);
                    0
                }
            };
        }
    }
}

thread_local! {
    /// [`replay_calls`]'s ids, kept per thread between classes: a large class makes thousands of
    /// calls, and a fresh list for each took page faults in the JVM.
    static IDS: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
}

/// Makes `calls` on `reg` and writes the ids they get over the placeholders in `bytes` (a
/// rewritten class's new bytes) at `slots` ((call number, offset)). False, and no call made, when
/// the record does not hold together (a site of a call that is not an earlier method, a place
/// outside those bytes): a record read back from elsewhere is checked.
fn replay_calls(calls: &(impl Calls + ?Sized), slots: impl Iterator<Item = (u32, u32)> + Clone, bytes: &mut [u8], reg: &mut dyn SiteRegistry) -> bool {
    let n = calls.count();
    if !calls.consistent() || !slots.clone().all(|(k, at)| (k as usize) < n && at as usize + 4 <= bytes.len()) {
        return false;
    }
    IDS.with(|cell| {
        let mut ids = cell.take();
        ids.clear();
        ids.resize(n, 0);
        calls.make(reg, &mut ids);
        for (k, at) in slots {
            bytes[at as usize..at as usize + 4].copy_from_slice(&ids[k as usize].to_be_bytes());
        }
        cell.set(ids);
    });
    true
}

/// The placeholders among the Integer constants that the rewriter appended to `orig`'s pool in
/// `new`: (call number, offset of the value). Every id is pushed from a constant of its own.
fn placeholder_slots(orig: &[u8], new: &[u8], calls: usize) -> Result<Vec<(u32, u32)>, RewriteError> {
    let bad = RewriteError::Malformed("rewritten constant pool");
    let count = |b: &[u8]| be_u16(b, 8).map(usize::from).ok_or(bad.clone());
    let (orig_count, new_count) = (count(orig)?, count(new)?);
    let (cp, _) = ConstPool::parse(new, 10, new_count, PoolBuffers::default())?;
    let mut slots = Vec::new();
    for i in orig_count..new_count {
        let Some(at) = cp.body(i as u16, TAG_INTEGER) else { continue };
        let k = (be_i32(new, at).ok_or(bad.clone())? as u32).wrapping_sub(PLACEHOLDER_BASE);
        if (k as usize) < calls {
            slots.push((k, at as u32));
        }
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::SiteKind;

    /// Counts the calls it gets.
    #[derive(Default)]
    struct Calls(u32);

    impl SiteRegistry for Calls {
        fn method(&mut self, _m: &MethodInfo<'_>) -> u32 {
            self.0 += 1;
            self.0
        }
        fn site(&mut self, _method_id: u32, _site: &SiteInfo) -> u32 {
            self.0 += 1;
            self.0
        }
    }

    /// A record that does not hold together is refused before any registry call.
    #[test]
    fn inconsistent_records_make_no_calls() {
        let method = Call::Method(OwnedMethodInfo {
            class: "C".into(),
            name: "m".into(),
            descriptor: "()V".into(),
            source_file: None,
            access_flags: 0,
            leaf: false,
        });
        let site = |method| Call::Site { method, site: SiteInfo { kind: SiteKind::Call, bci: 0, line: -1, api: false, target: 1 } };
        let record = |calls: Vec<Call>, slots: Vec<(u32, u32)>| Relocatable {
            pieces: Some(vec![Piece::Original { at: 1, len: 2 }, Piece::Literal { at: 0, len: 8 }]),
            literal: vec![0; 8],
            stats: ClassStats::default(),
            calls,
            slots,
            assumed: Vec::new(),
        };
        let good = record(vec![method.clone(), Call::Reserve(1), site(0)], vec![(0, 0), (2, 4)]);
        let mut reg = Calls::default();
        assert_eq!(good.replay(&[7, 8, 9], &mut reg), Some(vec![8, 9, 0, 0, 0, 1, 0, 0, 0, 2]));
        // A piece outside the class: refused before any call.
        let outside = Relocatable { pieces: Some(vec![Piece::Original { at: 2, len: 2 }]), ..good.clone() };
        assert_eq!(outside.replay(&[7, 8, 9], &mut reg), None);
        assert_eq!(reg.0, 2);
        for bad in [
            record(vec![site(0), method.clone()], vec![]),         // a site before its method
            record(vec![method.clone(), site(1)], vec![]),         // of a call that is not a method
            record(vec![method.clone(), site(7)], vec![]),         // of no call at all
            record(vec![method.clone()], vec![(0, 5)]),            // a place past the new bytes
            record(vec![method.clone()], vec![(3, 0)]),            // a place of no call
        ] {
            let mut reg = Calls::default();
            assert_eq!(bad.replay(&[7, 8, 9], &mut reg), None);
            assert_eq!(reg.0, 0);
        }
    }
}
