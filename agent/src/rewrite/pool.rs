//! The constant pool being extended: the original (read-only index) plus appended entries, with
//! reuse of what was already appended (runtime Methodrefs, Class entries).

use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use super::classfile::{ConstPool, CpAppender, TAG_METHODREF, TAG_NAME_AND_TYPE, TAG_UTF8};
use super::probes::{RuntimeMethod, RuntimeRefs, RUNTIME_CLASS};

/// Names [`PoolEdit::class`] looks up by scanning the pool before it indexes every Class entry.
const SCANS_BEFORE_INDEX: usize = 8;

pub(crate) struct PoolEdit<'a> {
    pub cp: ConstPool<'a>,
    pub app: CpAppender,
    /// Class entries by name looked up so far (found or appended), while there are few: a scan
    /// of the pool for each costs less than indexing every Class entry, which most classes
    /// never need.
    known: Vec<(&'a [u8], u16)>,
    /// All Class entries by name, built once `known` holds [`SCANS_BEFORE_INDEX`] names.
    classes: Option<FxHashMap<&'a [u8], u16>>,
    /// The Class entry of the runtime class, once looked up or appended.
    runtime_class: Option<u16>,
    /// Class entries appended for names that are not in the class bytes (array types).
    synthesized: FxHashMap<Vec<u8>, u16>,
    runtime: Option<RuntimeRefs>,
    probe_locals: Option<(u16, u16, u16, u16, u16)>,
    reuse: Utf8Reuse,
}

/// Whether a [`PoolEdit`] reuses the pool's Utf8 entries ([`PoolEdit::reuse_utf8`]).
enum Utf8Reuse {
    Off,
    /// On, and no Utf8 entry asked for yet.
    On,
    /// Per string of [`PROBE_STRINGS`], its entry: the pool's (all found in one pass at the
    /// first Utf8 entry asked for) or the one appended for it; 0 until there is one.
    Known([u16; PROBE_STRINGS.len()]),
}

/// The Utf8 entries naming the probe locals in LocalVariableTables: `lucce$ctx`, `lucce$ver`,
/// their descriptor, `lucce$leaf`, its descriptor.
const LOCAL_NAMES: [&[u8]; 5] = [b"lucce$ctx", b"lucce$ver", b"J", b"lucce$leaf", b"I"];

/// The Utf8 strings the probes need: the runtime class's name, the runtime methods' names and
/// descriptors (one descriptor twice), and [`LOCAL_NAMES`].
const PROBE_STRINGS: [&[u8]; 1 + 2 * RuntimeMethod::COUNT + LOCAL_NAMES.len()] = {
    let mut s = [b"".as_slice(); 1 + 2 * RuntimeMethod::COUNT + LOCAL_NAMES.len()];
    s[0] = RUNTIME_CLASS.as_bytes();
    let mut k = 0;
    while k < RuntimeMethod::COUNT {
        s[1 + k] = RuntimeMethod::ALL[k].name().as_bytes();
        s[1 + RuntimeMethod::COUNT + k] = RuntimeMethod::ALL[k].descriptor().as_bytes();
        k += 1;
    }
    let mut k = 0;
    while k < LOCAL_NAMES.len() {
        s[1 + 2 * RuntimeMethod::COUNT + k] = LOCAL_NAMES[k];
        k += 1;
    }
    s
};

impl<'a> PoolEdit<'a> {
    /// `app_bytes`: a reused buffer for the appended entries (cleared here).
    pub fn new(cp: ConstPool<'a>, app_bytes: Vec<u8>) -> Self {
        let app = CpAppender::with_buffer(cp.count(), app_bytes);
        PoolEdit {
            cp,
            app,
            known: Vec::new(),
            classes: None,
            runtime_class: None,
            synthesized: FxHashMap::default(),
            runtime: None,
            probe_locals: None,
            reuse: Utf8Reuse::Off,
        }
    }

    /// Makes the entries this edit appends reuse equal Utf8 entries of the pool (`()V`, `J`, `I`
    /// are in most pools) instead of appending duplicates, at the cost of a pass over the pool
    /// (the template of [`refs_template`] is not used then). For a class being
    /// retransformed: HotSpot merges its new pool into the old one
    /// (`VM_RedefineClasses::merge_constant_pools`), and an appended entry equal to an old one
    /// is mapped onto it, which moves every appended entry after it to another index: each of
    /// those then costs a search of the whole pool more, and the class's bytecodes are rewritten
    /// to the new indices. A loaded class has no old pool, and a duplicate costs it nothing.
    pub fn reuse_utf8(&mut self) {
        self.reuse = Utf8Reuse::On;
    }

    /// A Class entry for `name` (an internal name or array descriptor), appended if missing.
    pub fn class(&mut self, name: &'a [u8]) -> u16 {
        if name == RUNTIME_CLASS.as_bytes() {
            return self.runtime_class();
        }
        if let Some(i) = self.find_class(name) {
            return i;
        }
        let u = self.utf8(name);
        let c = self.app.class(u);
        self.remember(name, c);
        c
    }

    /// A Class entry for the array type whose component is Class entry `component`.
    pub fn array_class(&mut self, component: u16) -> Option<u16> {
        let c = self.cp.class_name(component)?;
        let mut name = Vec::with_capacity(c.len() + 3);
        name.push(b'[');
        if c.first() == Some(&b'[') {
            name.extend_from_slice(c);
        } else {
            name.push(b'L');
            name.extend_from_slice(c);
            name.push(b';');
        }
        if let Some(&i) = self.synthesized.get(&name) {
            return Some(i);
        }
        let i = match self.find_class(&name) {
            Some(i) => i,
            None => {
                let u = self.utf8(&name);
                self.app.class(u)
            }
        };
        self.synthesized.insert(name, i);
        Some(i)
    }

    /// The first Class entry named `name` in the pool, or the one appended for it.
    fn find_class(&mut self, name: &[u8]) -> Option<u16> {
        if self.classes.is_none() {
            if let Some(&(_, i)) = self.known.iter().find(|&&(n, _)| n == name) {
                return Some(i);
            }
            if self.known.len() < SCANS_BEFORE_INDEX {
                let i = self.cp.find_class(name)?;
                // Kept as the pool's own bytes, which live for 'a (`name` may not).
                let name = self.cp.class_name(i)?;
                self.known.push((name, i));
                return Some(i);
            }
            let mut map = self.cp.class_index();
            // The appended ones (the found ones map to the same first entry already).
            for &(n, i) in &self.known {
                map.entry(n).or_insert(i);
            }
            self.classes = Some(map);
        }
        self.classes.as_ref()?.get(name).copied()
    }

    /// A Utf8 entry holding `s`: appended, or with [`PoolEdit::reuse_utf8`] the pool's own if it
    /// has one (or the one appended for it before, if it is one of [`PROBE_STRINGS`]).
    fn utf8(&mut self, s: &[u8]) -> u16 {
        match self.reuse {
            Utf8Reuse::Off => return self.app.utf8(s),
            Utf8Reuse::On => self.reuse = Utf8Reuse::Known(self.cp.find_utf8s(PROBE_STRINGS)),
            Utf8Reuse::Known(_) => {}
        }
        let Utf8Reuse::Known(known) = &mut self.reuse else { unreachable!("set above") };
        match PROBE_STRINGS.iter().position(|&t| t == s) {
            Some(k) if known[k] != 0 => known[k],
            Some(k) => {
                known[k] = self.app.utf8(s);
                known[k]
            }
            // Another string (an array type's name, `hidden`'s): a pass of its own.
            None => match self.cp.find_utf8s([s]) {
                [0] => self.app.utf8(s),
                [i] => i,
            },
        }
    }

    /// Records Class entry `c`, appended for `name`.
    fn remember(&mut self, name: &'a [u8], c: u16) {
        match &mut self.classes {
            Some(map) => {
                map.insert(name, c);
            }
            None => self.known.push((name, c)),
        }
    }

    /// The Class entry of the runtime class, appended on first use (a class whose probes are
    /// renewed, `unprobe.rs`, has one already, which the new one duplicates: legal in a pool).
    fn runtime_class(&mut self) -> u16 {
        if let Some(c) = self.runtime_class {
            return c;
        }
        let u = self.utf8(RUNTIME_CLASS.as_bytes());
        let c = self.app.class(u);
        self.runtime_class = Some(c);
        c
    }

    /// [`PoolEdit::runtime_refs`] if an earlier method of the class appended them already, all
    /// of them (never with [`PoolEdit::reuse_utf8`]).
    pub fn runtime_refs_appended(&self) -> Option<RuntimeRefs> {
        self.runtime.filter(|_| matches!(self.reuse, Utf8Reuse::Off))
    }

    /// Methodrefs of the runtime methods, appended on first use (after the runtime class's
    /// Class entry, if that is appended too): one copy of [`refs_template`] with its indices
    /// made absolute. With [`PoolEdit::reuse_utf8`], only those of `needs()` (bits of
    /// [`RuntimeMethod::bit`]: the methods the caller's probes call; asked only then) and of
    /// earlier calls, each appended at its first need (the others' entries are 0): a
    /// retransformed class that calls fewer gives HotSpot's merge fewer entries to search its
    /// pool for (over a start's batch, 1.1 of the six go unused per class when counting, 1.9 in
    /// a recording).
    pub fn runtime_refs(&mut self, needs: impl FnOnce() -> u8) -> RuntimeRefs {
        if !matches!(self.reuse, Utf8Reuse::Off) {
            return self.runtime_refs_reusing(needs());
        }
        if let Some(r) = self.runtime {
            return r;
        }
        let class = self.runtime_class();
        let t = refs_template();
        let base = self.app.count();
        // Indices saturate as `CpAppender` gives them (a pool that overflows is refused later).
        let index = |rel: u16| (base + rel as u32).min(0xFFFF) as u16;
        let at = self.app.bytes.len();
        self.app.bytes.extend_from_slice(&t.bytes);
        let new = &mut self.app.bytes[at..];
        for &(pos, relative) in &t.indices {
            let v = if relative { index(u16::from_be_bytes([new[pos], new[pos + 1]])) } else { class };
            new[pos..pos + 2].copy_from_slice(&v.to_be_bytes());
        }
        self.app.skip(t.entries);
        let refs = RuntimeRefs(t.refs.map(index));
        self.runtime = Some(refs);
        refs
    }

    /// [`PoolEdit::runtime_refs`] entry by entry, reusing the pool's names and descriptors.
    fn runtime_refs_reusing(&mut self, needs: u8) -> RuntimeRefs {
        let mut refs = self.runtime.unwrap_or_default();
        for m in RuntimeMethod::ALL {
            if needs & m.bit() != 0 && refs.0[m as usize] == 0 {
                let class = self.runtime_class();
                let (name, desc) = (self.utf8(m.name().as_bytes()), self.utf8(m.descriptor().as_bytes()));
                let nat = self.app.name_and_type(name, desc);
                refs.0[m as usize] = self.app.methodref(class, nat);
            }
        }
        self.runtime = Some(refs);
        refs
    }

    /// A Methodref of one more static method of the runtime class (appended; for the one method
    /// that calls it, `probes::DEFINE_HOOK`).
    pub fn runtime_method(&mut self, name: &str, descriptor: &str) -> u16 {
        let class = self.runtime_class();
        let (n, d) = (self.utf8(name.as_bytes()), self.utf8(descriptor.as_bytes()));
        let nat = self.app.name_and_type(n, d);
        self.app.methodref(class, nat)
    }

    /// The Utf8 entries of [`LOCAL_NAMES`] (all five on first use, whichever kind of method
    /// asks).
    pub fn probe_local_names(&mut self) -> (u16, u16, u16, u16, u16) {
        if let Some(n) = self.probe_locals {
            return n;
        }
        let [a, b, c, d, e] = LOCAL_NAMES.map(|s| self.utf8(s));
        let n = (a, b, c, d, e);
        self.probe_locals = Some(n);
        n
    }

    #[inline]
    pub fn integer(&mut self, v: i32) -> u16 {
        self.app.integer(v)
    }
}

/// The entries [`PoolEdit::runtime_refs`] appends, numbered from 0: per runtime method its name
/// (Utf8), its descriptor (Utf8, once per distinct descriptor), a NameAndType and a Methodref of
/// the runtime class. Built once: appending a copy and patching its indices costs a class a
/// fraction of appending the entries one by one.
struct RefsTemplate {
    bytes: Vec<u8>,
    /// Every index in `bytes`: its offset, and whether it is relative (else the runtime class's
    /// Class entry, written as 0).
    indices: Vec<(usize, bool)>,
    entries: u32,
    /// The Methodrefs' relative indices.
    refs: [u16; RuntimeMethod::COUNT],
}

impl RefsTemplate {
    /// Appends an entry whose body holds `indices.len()` indices first (relative or not).
    fn entry(&mut self, tag: u8, body: &[u8], indices: &[bool]) -> u16 {
        self.bytes.push(tag);
        let at = self.bytes.len();
        self.indices.extend(indices.iter().enumerate().map(|(k, &relative)| (at + 2 * k, relative)));
        self.bytes.extend_from_slice(body);
        self.entries += 1;
        (self.entries - 1) as u16
    }

    fn utf8(&mut self, s: &str) -> u16 {
        self.entry(TAG_UTF8, &[&(s.len() as u16).to_be_bytes()[..], s.as_bytes()].concat(), &[])
    }
}

fn refs_template() -> &'static RefsTemplate {
    static TEMPLATE: OnceLock<RefsTemplate> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let mut t = RefsTemplate { bytes: Vec::new(), indices: Vec::new(), entries: 0, refs: [0; RuntimeMethod::COUNT] };
        let mut descs: Vec<(&str, u16)> = Vec::new();
        for m in RuntimeMethod::ALL {
            let name = t.utf8(m.name());
            let d = m.descriptor();
            let desc = match descs.iter().find(|&&(s, _)| s == d) {
                Some(&(_, i)) => i,
                None => {
                    let i = t.utf8(d);
                    descs.push((d, i));
                    i
                }
            };
            let nat = t.entry(TAG_NAME_AND_TYPE, &[name.to_be_bytes(), desc.to_be_bytes()].concat(), &[true, true]);
            // The class index is patched to the runtime class's entry.
            t.refs[m as usize] = t.entry(TAG_METHODREF, &[[0, 0], nat.to_be_bytes()].concat(), &[false, true]);
        }
        t
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::classfile::{PoolBuffers, TAG_CLASS};

    const ALL_METHODS: u8 = (1 << RuntimeMethod::COUNT) - 1;

    /// Appended for a class being retransformed: the Methodrefs name the same methods, and
    /// every name or descriptor the pool holds already is taken from it, not appended again.
    #[test]
    fn retransformed_pools_take_the_utf8_entries_they_have() {
        let have: [&[u8]; 5] = [b"x", b"()V", b"call", b"J", b"[J"];
        let orig: Vec<u8> = have.iter().flat_map(|s| [&[TAG_UTF8, 0, s.len() as u8][..], s].concat()).collect();
        let (cp, _) = ConstPool::parse(&orig, 0, have.len() + 1, PoolBuffers::default()).unwrap();
        let mut pool = PoolEdit::new(cp, Vec::new());
        pool.reuse_utf8();
        let refs = pool.runtime_refs(|| ALL_METHODS);
        let (ctx, _, long, _, int) = pool.probe_local_names();
        let array = pool.class(b"[J");
        let all = [&orig[..], &pool.app.bytes].concat();
        let (cp, end) = ConstPool::parse(&all, 0, pool.app.count() as usize, PoolBuffers::default()).unwrap();
        assert_eq!(end, all.len());
        let utf8s: Vec<&[u8]> = (1..pool.app.count() as u16).filter_map(|i| cp.utf8(i)).collect();
        for (k, s) in utf8s.iter().enumerate() {
            assert!(!utf8s[..k].contains(s), "{} appended again", String::from_utf8_lossy(s));
        }
        for m in RuntimeMethod::ALL {
            let (class, name, desc) = cp.member_ref(refs.0[m as usize]).unwrap();
            assert_eq!(cp.class_name(class), Some(RUNTIME_CLASS.as_bytes()));
            assert_eq!((cp.utf8(name), cp.utf8(desc)), (Some(m.name().as_bytes()), Some(m.descriptor().as_bytes())));
        }
        let (_, call, _) = cp.member_ref(refs.0[RuntimeMethod::Call as usize]).unwrap();
        let (_, drop, drop_desc) = cp.member_ref(refs.0[RuntimeMethod::Drop as usize]).unwrap();
        assert_eq!((call, drop_desc, long, cp.class_name_idx(array)), (3, 2, 4, Some(5)), "the pool's own entries");
        assert!(drop as u32 > have.len() as u32 && ctx as u32 > have.len() as u32 && int as u32 > have.len() as u32);
    }

    /// A retransformed class gets the Methodref of a runtime method at its first need, once;
    /// one it never needs is never appended.
    #[test]
    fn retransformed_pools_get_the_runtime_methods_asked_for() {
        let (cp, _) = ConstPool::parse(&[], 0, 1, PoolBuffers::default()).unwrap();
        let mut pool = PoolEdit::new(cp, Vec::new());
        pool.reuse_utf8();
        let drop = pool.runtime_refs(|| RuntimeMethod::Drop.bit());
        let count = pool.app.count();
        let both = pool.runtime_refs(|| RuntimeMethod::Drop.bit() | RuntimeMethod::Call.bit());
        assert_eq!(drop.0[RuntimeMethod::Drop as usize], both.0[RuntimeMethod::Drop as usize], "appended once");
        // The Call Methodref and its name, NameAndType and descriptor.
        assert_eq!(pool.app.count(), count + 4);
        let unasked = [RuntimeMethod::Enter, RuntimeMethod::Version, RuntimeMethod::Alloc, RuntimeMethod::Leaf];
        assert!(unasked.iter().all(|&m| both.0[m as usize] == 0), "{:?}", both.0);
        let all = pool.app.bytes.clone();
        let (cp, _) = ConstPool::parse(&all, 0, pool.app.count() as usize, PoolBuffers::default()).unwrap();
        let (_, name, _) = cp.member_ref(both.0[RuntimeMethod::Call as usize]).unwrap();
        assert_eq!(cp.utf8(name), Some(&b"call"[..]));
    }

    /// The runtime methods' Methodrefs, appended from the template to pools of several sizes,
    /// name the runtime class and each method's own name and descriptor.
    #[test]
    fn runtime_refs_name_the_runtime_methods() {
        // Pools of 1, 2 and 301 slots: none, one Utf8 "x", and 300 of them.
        for n in [0usize, 1, 300] {
            let orig: Vec<u8> = (0..n).flat_map(|_| [TAG_UTF8, 0, 1, b'x']).collect();
            let count = n + 1;
            let (cp, _) = ConstPool::parse(&orig, 0, count, PoolBuffers::default()).unwrap();
            let mut pool = PoolEdit::new(cp, Vec::new());
            let refs = pool.runtime_refs(|| ALL_METHODS);
            let all = [&orig[..], &pool.app.bytes].concat();
            let (cp, end) = ConstPool::parse(&all, 0, pool.app.count() as usize, PoolBuffers::default()).unwrap();
            assert_eq!(end, all.len());
            for m in RuntimeMethod::ALL {
                let (class, name, desc) = cp.member_ref(refs.0[m as usize]).unwrap();
                assert_eq!(cp.tag(class), TAG_CLASS);
                assert_eq!(cp.class_name(class), Some(RUNTIME_CLASS.as_bytes()));
                assert_eq!((cp.utf8(name), cp.utf8(desc)), (Some(m.name().as_bytes()), Some(m.descriptor().as_bytes())));
                assert!(refs.0[m as usize] as usize >= count, "appended, not found");
            }
            // Asked again: the same entries, nothing appended.
            let len = pool.app.bytes.len();
            assert_eq!(pool.runtime_refs(|| ALL_METHODS).0, refs.0);
            assert_eq!(pool.app.bytes.len(), len);
        }
    }
}
