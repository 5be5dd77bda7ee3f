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
}

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
        }
    }

    /// A Class entry for `name` (an internal name or array descriptor), appended if missing.
    pub fn class(&mut self, name: &'a [u8]) -> u16 {
        if name == RUNTIME_CLASS.as_bytes() {
            return self.runtime_class();
        }
        if let Some(i) = self.find_class(name) {
            return i;
        }
        let u = self.app.utf8(name);
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
                let u = self.app.utf8(&name);
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
        let u = self.app.utf8(RUNTIME_CLASS.as_bytes());
        let c = self.app.class(u);
        self.runtime_class = Some(c);
        c
    }

    /// [`PoolEdit::runtime_refs`] if an earlier method of the class appended them already.
    pub fn runtime_refs_appended(&self) -> Option<RuntimeRefs> {
        self.runtime
    }

    /// Methodrefs of the runtime methods, appended on first use (after the runtime class's
    /// Class entry, if that is appended too): one copy of [`refs_template`] with its indices
    /// made absolute.
    pub fn runtime_refs(&mut self) -> RuntimeRefs {
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

    /// A Methodref of one more static method of the runtime class (appended; for the one method
    /// that calls it, `probes::DEFINE_HOOK`).
    pub fn runtime_method(&mut self, name: &str, descriptor: &str) -> u16 {
        let class = self.runtime_class();
        let (n, d) = (self.app.utf8(name.as_bytes()), self.app.utf8(descriptor.as_bytes()));
        let nat = self.app.name_and_type(n, d);
        self.app.methodref(class, nat)
    }

    /// Utf8 entries naming the probe locals in LocalVariableTables: `lucce$ctx`, `lucce$ver`,
    /// `J`, `lucce$leaf`, `I` (all five on first use, whichever kind of method asks).
    pub fn probe_local_names(&mut self) -> (u16, u16, u16, u16, u16) {
        if let Some(n) = self.probe_locals {
            return n;
        }
        let a = &mut self.app;
        let n = (a.utf8(b"lucce$ctx"), a.utf8(b"lucce$ver"), a.utf8(b"J"), a.utf8(b"lucce$leaf"), a.utf8(b"I"));
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
            let refs = pool.runtime_refs();
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
            assert_eq!(pool.runtime_refs().0, refs.0);
            assert_eq!(pool.app.bytes.len(), len);
        }
    }
}
