//! The constant pool being extended: the original (read-only index) plus appended entries, with
//! reuse of what was already appended (runtime Methodrefs, Class entries).

use rustc_hash::FxHashMap;

use super::classfile::{ConstPool, CpAppender};
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

    /// [`PoolEdit::class`] of the runtime class, without indexing every Class entry: a scan
    /// finds it at a fraction of the cost, and is skipped when no Utf8 entry names it.
    fn runtime_class(&mut self) -> u16 {
        if let Some(c) = self.runtime_class {
            return c;
        }
        let name = RUNTIME_CLASS.as_bytes();
        let found = if self.cp.has_runtime_name { self.cp.find_class(name) } else { None };
        let c = match found {
            Some(c) => c,
            None => {
                let u = self.app.utf8(name);
                self.app.class(u)
            }
        };
        self.runtime_class = Some(c);
        c
    }

    /// [`PoolEdit::runtime_refs`] if an earlier method of the class appended them already.
    pub fn runtime_refs_appended(&self) -> Option<RuntimeRefs> {
        self.runtime
    }

    /// Methodrefs of the runtime methods, appended on first use.
    pub fn runtime_refs(&mut self) -> RuntimeRefs {
        if let Some(r) = self.runtime {
            return r;
        }
        let class = self.runtime_class();
        let mut refs = RuntimeRefs::default();
        // One Utf8 per distinct descriptor.
        let mut descs = [("", 0); RuntimeMethod::COUNT];
        let mut ndescs = 0;
        for m in RuntimeMethod::ALL {
            let name = self.app.utf8(m.name().as_bytes());
            let d = m.descriptor();
            let desc = match descs[..ndescs].iter().find(|&&(s, _)| s == d) {
                Some(&(_, i)) => i,
                None => {
                    let i = self.app.utf8(d.as_bytes());
                    descs[ndescs] = (d, i);
                    ndescs += 1;
                    i
                }
            };
            let nat = self.app.name_and_type(name, desc);
            refs.0[m as usize] = self.app.methodref(class, nat);
        }
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
