//! Site tables: dense ids for instrumented methods and their call/allocation sites.
//!
//! The ClassFileLoadHook runs on many threads at once. Ids come from two atomic counters, so
//! handing one out never takes a lock; each rewrite collects its records in a per-class
//! [`ClassRegistrar`] and publishes them under the table lock once, when the class is done. An id
//! whose class has not been published yet (or whose rewrite failed) reads as a `None` slot.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use rustc_hash::FxHashMap;

use serde::Serialize;

use crate::rewrite::{MethodInfo, ProbeChoice, SiteInfo, SiteKind, SiteRegistry};

/// A method with code. Its strings live in one text shared by the methods of its class (one
/// allocation per class instead of several per method), which also holds the class's name and
/// source file once: a record takes 32 bytes, and a program has tens of thousands.
#[derive(Clone)]
pub struct MethodRecord {
    strings: Arc<ClassText>,
    /// Name and descriptor as byte ranges of the text.
    name: (u32, u32),
    descriptor: (u32, u32),
    pub access_flags: u16,
    /// See `rewrite::MethodInfo::leaf`.
    pub leaf: bool,
}

const _: () = assert!(std::mem::size_of::<Option<MethodRecord>>() == 32);

/// The strings of a class's methods, with the one class name and source file they share.
struct ClassText {
    text: Box<str>,
    /// Class name and source file as byte ranges of `text`.
    class: (u32, u32),
    source: Option<(u32, u32)>,
}

impl ClassText {
    fn span(&self, (a, b): (u32, u32)) -> &str {
        // The ranges were taken at char boundaries of this text (see `RegistrarBuffers::push`).
        self.text.get(a as usize..b as usize).unwrap_or("")
    }
}

impl MethodRecord {
    /// Internal name, `java/lang/String`.
    pub fn class(&self) -> &str {
        self.strings.span(self.strings.class)
    }

    pub fn name(&self) -> &str {
        self.strings.span(self.name)
    }

    pub fn descriptor(&self) -> &str {
        self.strings.span(self.descriptor)
    }

    pub fn source_file(&self) -> Option<&str> {
        self.strings.source.map(|s| self.strings.span(s))
    }
}

impl std::fmt::Debug for MethodRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MethodRecord")
            .field("class", &self.class())
            .field("name", &self.name())
            .field("descriptor", &self.descriptor())
            .field("source_file", &self.source_file())
            .field("access_flags", &self.access_flags)
            .field("leaf", &self.leaf)
            .finish()
    }
}

/// A call or allocation site as the rewriter registers it (what the publish sink is told).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SiteRecord {
    pub method: u32,
    pub kind: SiteKindTag,
    /// Bytecode index in the original method.
    pub bci: u32,
    /// Source line, -1 when unknown.
    pub line: i32,
    /// Calls the lucce API.
    pub api: bool,
    /// `SiteInfo::target`: the key of the name and descriptor a call site's instruction names.
    pub target: u64,
}

/// What the tables keep of a site once published: what walks and the summary read, in 16 bytes
/// (a `SiteRecord` takes 24, and a program has hundreds of thousands of sites: jython 198k).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteEntry {
    /// `SiteRecord::target`.
    pub target: u64,
    pub method: u32,
    /// The line when `has_line` (a LineNumberTable's lines are 16-bit).
    line: u16,
    has_line: bool,
    pub kind: SiteKindTag,
}

impl SiteEntry {
    fn of(r: &SiteRecord) -> SiteEntry {
        let line = u16::try_from(r.line).ok();
        SiteEntry { target: r.target, method: r.method, line: line.unwrap_or(0), has_line: line.is_some(), kind: r.kind }
    }

    /// Source line, -1 when unknown.
    pub fn line(&self) -> i32 {
        if self.has_line {
            self.line as i32
        } else {
            -1
        }
    }
}

const _: () = assert!(std::mem::size_of::<Option<SiteEntry>>() == 16);

/// Serializable mirror of the rewriter's `SiteKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SiteKindTag {
    Call,
    Alloc,
}

#[derive(Default)]
pub struct Tables {
    pub methods: Vec<Option<MethodRecord>>,
    pub sites: Vec<Option<SiteEntry>>,
}

/// Told about each class's records when they are published (the recorder forwards them to the
/// encoder and the store), before the class's code can run.
pub type PublishSink = Box<dyn Fn(&[(u32, MethodRecord)], &[(u32, SiteRecord)]) + Send + Sync>;

#[derive(Default)]
pub struct Registry {
    next_method: AtomicU32,
    next_site: AtomicU32,
    tables: Mutex<Tables>,
    sink: OnceLock<PublishSink>,
    /// See `SiteRegistry::probes`.
    probes: ProbeChoice,
    /// See `SiteRegistry::known_leaf` (none: nothing known of other classes).
    jdk_leaves: Option<std::sync::Arc<crate::jdk_leaves::JdkLeaves>>,
    /// With `jdk_leaves`, the leaves of the program's classes published so far that a call
    /// fixes (static methods and constructors), by class name: `rewrite::target_key` of (name,
    /// descriptor) → access flags. A class published again under the same name (another class
    /// loader's, a retransform) keeps only the leaves both have. A superclass is loaded after its
    /// first subclass's load hook, so that constructor counts on nothing; later ones count on it.
    app_leaves: Option<RwLock<FxHashMap<Box<str>, MethodLeaves>>>,
}

/// A class's leaves: `rewrite::target_key` of (name, descriptor) → access flags.
type MethodLeaves = FxHashMap<u64, u16>;

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry whose first ids are `method` and `site` (ids below belong to someone else:
    /// the encoder's virtual roots).
    pub fn starting_at(method: u32, site: u32) -> Self {
        let r = Self::default();
        r.next_method.store(method, Ordering::Relaxed);
        r.next_site.store(site, Ordering::Relaxed);
        r
    }

    /// This registry asks the rewriter for `probes`.
    pub fn with_probes(mut self, probes: ProbeChoice) -> Self {
        self.probes = probes;
        self
    }

    /// This registry tells the rewriter the leaves of the JDK's classes (`jdk_leaves.rs`).
    pub fn with_jdk_leaves(mut self, jdk_leaves: Option<std::sync::Arc<crate::jdk_leaves::JdkLeaves>>) -> Self {
        self.app_leaves = jdk_leaves.is_some().then(RwLock::default);
        self.jdk_leaves = jdk_leaves;
        self
    }

    /// The JDK's leaves it tells (`with_jdk_leaves`).
    pub fn jdk_leaves(&self) -> Option<std::sync::Arc<crate::jdk_leaves::JdkLeaves>> {
        self.jdk_leaves.clone()
    }

    /// Keeps the leaves of a published class of the program that calls fix (`app_leaves`).
    fn learn_leaves(&self, methods: &[(u32, MethodRecord)]) {
        let Some(app) = &self.app_leaves else { return };
        let Some(class) = methods.first().map(|(_, m)| m.class()).filter(|c| !crate::jdk_leaves::maybe_java_base(c.as_bytes())) else { return };
        let leaves: MethodLeaves = methods
            .iter()
            .filter(|(_, m)| m.leaf && (m.access_flags & crate::rewrite::ACC_STATIC != 0 || m.name() == "<init>"))
            .map(|(_, m)| (crate::rewrite::target_key_of_text(m.name(), m.descriptor()), m.access_flags))
            .collect();
        let mut app = app.write().unwrap_or_else(|e| e.into_inner());
        match app.get_mut(class) {
            Some(known) => known.retain(|k, a| leaves.get(k) == Some(a)),
            None => {
                app.insert(class.into(), leaves);
            }
        }
    }

    /// `SiteRegistry::known_leaf`: the JDK's from its runtime image, the program's from
    /// `app_leaves` (with the class's access flags unknown: 0).
    fn known_leaf(&self, class: &[u8], name: &[u8], desc: &[u8], own: bool) -> Option<(u16, u16)> {
        let jdk = self.jdk_leaves.as_ref()?;
        if crate::jdk_leaves::maybe_java_base(class) {
            return jdk.known_leaf(class, name, desc, own);
        }
        if own {
            return None;
        }
        let app = self.app_leaves.as_ref()?.read().unwrap_or_else(|e| e.into_inner());
        let access = *app.get(std::str::from_utf8(class).ok()?)?.get(&crate::rewrite::target_key(name, desc))?;
        Some((access, 0))
    }

    /// Sets the publish sink (once).
    pub fn set_sink(&self, sink: PublishSink) {
        let _ = self.sink.set(sink);
    }

    /// A registrar for one class rewrite; call [`ClassRegistrar::publish`] when it succeeded.
    pub fn registrar(&self) -> ClassRegistrar<'_> {
        let bufs = REGISTRAR_BUFFERS.with(|c| c.take()).unwrap_or_default();
        ClassRegistrar { reg: self, bufs, hidden_class: false, retransforming: false, reserved: 0..0, methods: 0..0, taken: false, published: false }
    }

    /// [`Registry::registrar`] for a class being retransformed ([`SiteRegistry::retransforming`]).
    pub fn retransform_registrar(&self) -> ClassRegistrar<'_> {
        let mut r = self.registrar();
        r.retransforming = true;
        r
    }

    /// [`Registry::registrar`] for a hidden class (see `ClassRegistrar::hidden_class`).
    pub fn hidden_class_registrar(&self) -> ClassRegistrar<'_> {
        let mut r = self.registrar();
        r.hidden_class = true;
        r
    }

    pub fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The optional probes of its rewrites ([`SiteRegistry::probes`] of its registrars).
    pub fn probes(&self) -> ProbeChoice {
        self.probes
    }

    /// A method id for a method the rewriter did not make (the recorder's twins of replaced
    /// methods).
    pub fn reserve_method(&self) -> u32 {
        self.next_method.fetch_add(1, Ordering::Relaxed)
    }

    /// A site id for a site the rewriter did not make (the recorder's location sites).
    pub fn reserve_site(&self) -> u32 {
        self.next_site.fetch_add(1, Ordering::Relaxed)
    }

    pub fn method_count(&self) -> u32 {
        self.next_method.load(Ordering::Relaxed)
    }

    pub fn site_count(&self) -> u32 {
        self.next_site.load(Ordering::Relaxed)
    }
}

pub struct ClassRegistrar<'a> {
    reg: &'a Registry,
    bufs: Box<RegistrarBuffers>,
    /// Registering a hidden class: every method is flagged as a frame the JVM leaves out of
    /// stack traces (HotSpot marks all methods of a hidden class hidden).
    hidden_class: bool,
    /// Registering a class being retransformed.
    retransforming: bool,
    /// Site ids taken by [`SiteRegistry::reserve_sites`] (or [`SiteRegistry::take_ids`]) and not
    /// yet handed out.
    reserved: std::ops::Range<u32>,
    /// Method ids taken by [`SiteRegistry::take_ids`] and not yet handed out.
    methods: std::ops::Range<u32>,
    /// Whether [`SiteRegistry::take_ids`] took this class's site ids.
    taken: bool,
    published: bool,
}

/// A method until its class is published: spans of the registrar's text.
#[derive(Clone, Copy)]
struct Pending {
    /// Index into `sealed` (or `sealed.len()` for the open text).
    text: u32,
    name: (u32, u32),
    descriptor: (u32, u32),
    access_flags: u16,
    leaf: bool,
}

/// A registrar's lists, kept per thread between classes so that registering costs no
/// allocations beyond the one text per class.
#[derive(Default)]
struct RegistrarBuffers {
    pending: Vec<(u32, Pending)>,
    methods: Vec<(u32, MethodRecord)>,
    sites: Vec<(u32, SiteRecord)>,
    /// The class's strings: its name and source file, then each method's name and descriptor.
    text: String,
    /// Where the open text holds the class name (None: no method yet) and the source file.
    class: Option<(u32, u32)>,
    source: Option<(u32, u32)>,
    /// Texts closed: when full (only for absurd classes: the spans are u32), or when a method of
    /// another class or source file came (never from the rewriter, which registers one class).
    sealed: Vec<Arc<ClassText>>,
}

/// Past this length the text is sealed before the next method; one method adds at most four
/// 64K-byte constants (at most three bytes of text per byte), so the spans stay below 4 GiB.
/// (The class name and source file of a text are those of its first method.)
const SEAL_AT: usize = 1 << 31;

thread_local! {
    static REGISTRAR_BUFFERS: Cell<Option<Box<RegistrarBuffers>>> = const { Cell::new(None) };
}

impl RegistrarBuffers {
    fn clear(&mut self) {
        self.pending.clear();
        self.methods.clear();
        self.sites.clear();
        self.text.clear();
        self.sealed.clear();
        self.class = None;
        self.source = None;
    }

    /// `s` appended to the open text, and its span.
    fn push(&mut self, s: &str) -> (u32, u32) {
        let a = self.text.len();
        self.text.push_str(s);
        (a as u32, self.text.len() as u32)
    }

    /// Whether the open text holds `s` at `span` (both None: no source file either way).
    fn holds(&self, span: Option<(u32, u32)>, s: Option<&str>) -> bool {
        match (span, s) {
            (Some((a, b)), Some(s)) => self.text.get(a as usize..b as usize) == Some(s),
            (None, None) => true,
            _ => false,
        }
    }

    /// The open text, shared.
    fn open_text(&self) -> Arc<ClassText> {
        Arc::new(ClassText { text: self.text.as_str().into(), class: self.class.unwrap_or((0, 0)), source: self.source })
    }
}

impl ClassRegistrar<'_> {
    /// Makes the collected records visible in the tables (one lock per class).
    pub fn publish(mut self) {
        self.published = true;
        if !self.hand_to_sink() {
            return;
        }
        let b = &mut *self.bufs;
        if !self.hidden_class {
            self.reg.learn_leaves(&b.methods);
        }
        let mut t = self.reg.tables();
        reserve_for(&mut t.methods, &b.methods);
        for (id, m) in b.methods.drain(..) {
            put(&mut t.methods, id, m);
        }
        reserve_for(&mut t.sites, &b.sites);
        for (id, s) in &b.sites {
            put(&mut t.sites, *id, SiteEntry::of(s));
        }
    }

    /// Hands the collected records to the sink; false when there are none.
    fn hand_to_sink(&mut self) -> bool {
        let b = &mut *self.bufs;
        if b.pending.is_empty() && b.sites.is_empty() {
            return false;
        }
        if !b.pending.is_empty() {
            let open = b.open_text();
            for (id, p) in &b.pending {
                let strings = b.sealed.get(p.text as usize).unwrap_or(&open).clone();
                let Pending { name, descriptor, access_flags, leaf, .. } = *p;
                b.methods.push((*id, MethodRecord { strings, name, descriptor, access_flags, leaf }));
            }
        }
        if let Some(sink) = self.reg.sink.get() {
            sink(&b.methods, &b.sites);
        }
        true
    }
}

impl Drop for ClassRegistrar<'_> {
    fn drop(&mut self) {
        // Not published (the rewrite failed, or its bytes could not be handed over): the sink
        // still gets the records of the ids taken, which no probe uses, since the store refuses
        // a gap in its ids. The tables do not: to walks the ids stay unknown.
        if !self.published && !std::thread::panicking() {
            self.hand_to_sink();
        }
        let mut bufs = std::mem::take(&mut self.bufs);
        bufs.clear();
        REGISTRAR_BUFFERS.with(|c| c.set(Some(bufs)));
    }
}

/// Grows a table once for a class's ids (not once per id).
fn reserve_for<T, U>(v: &mut Vec<Option<T>>, records: &[(u32, U)]) {
    if let Some(max) = records.iter().map(|r| r.0 as usize).max() {
        if v.len() <= max {
            v.resize_with(max + 1, || None);
        }
    }
}

fn put<T>(v: &mut Vec<Option<T>>, id: u32, x: T) {
    let i = id as usize;
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    v[i] = Some(x);
}

impl SiteRegistry for ClassRegistrar<'_> {
    fn probes(&self) -> ProbeChoice {
        self.reg.probes
    }

    /// A hidden class counts on other classes' leaves, but no caller counts on its own (no call
    /// names it; another class of its name may have some).
    fn known_leaf(&self, class: &[u8], name: &[u8], desc: &[u8], own: bool) -> Option<(u16, u16)> {
        if own && self.hidden_class {
            return None;
        }
        self.reg.known_leaf(class, name, desc, own)
    }

    /// Only the JDK's classes may have leaves that callers counted on before the class loaded;
    /// the program's are learned from the class as served (`learn_leaves`), and a hidden class
    /// no call names.
    fn served_leaves(&self, class: &str, class_access: u16, methods: &mut dyn Iterator<Item = (&str, &str, u16, bool)>) -> bool {
        match &self.reg.jdk_leaves {
            Some(jdk) if !self.hidden_class && crate::jdk_leaves::maybe_java_base(class.as_bytes()) => jdk.served(class.as_bytes(), class_access, methods),
            _ => true,
        }
    }

    fn retransforming(&self) -> bool {
        self.retransforming
    }

    fn method(&mut self, m: &MethodInfo<'_>) -> u32 {
        let id = match self.methods.next() {
            Some(id) => id,
            None => self.reg.next_method.fetch_add(1, Ordering::Relaxed),
        };
        let b = &mut *self.bufs;
        if b.text.len() > SEAL_AT || !b.holds(b.class, Some(m.class)) || !b.holds(b.source, m.source_file) {
            if b.class.is_some() {
                let sealed = b.open_text();
                b.sealed.push(sealed);
                b.text.clear();
            }
            b.class = Some(b.push(m.class));
            b.source = m.source_file.map(|s| b.push(s));
        }
        let name = b.push(m.name);
        let descriptor = b.push(m.descriptor);
        let text = b.sealed.len() as u32;
        let access_flags = m.access_flags | if self.hidden_class { crate::rewrite::HIDDEN_FRAME_FLAG } else { 0 };
        b.pending.push((id, Pending { text, name, descriptor, access_flags, leaf: m.leaf }));
        id
    }

    fn reserve_sites(&mut self, n: u32) {
        if self.taken {
            return;
        }
        let first = self.reg.next_site.fetch_add(n, Ordering::Relaxed);
        self.reserved = first..first + n;
    }

    fn site(&mut self, method_id: u32, site: &SiteInfo) -> u32 {
        // One atomic add per method, not per site (a locked instruction each).
        let id = match self.reserved.next() {
            Some(id) => id,
            None => self.reg.next_site.fetch_add(1, Ordering::Relaxed),
        };
        let kind = match site.kind {
            SiteKind::Call => SiteKindTag::Call,
            SiteKind::Alloc => SiteKindTag::Alloc,
        };
        self.bufs.sites.push((id, SiteRecord { method: method_id, kind, bci: site.bci, line: site.line, api: site.api, target: site.target }));
        id
    }

    fn next_ids(&self) -> Option<(u32, u32)> {
        Some((self.reg.next_method.load(Ordering::Relaxed), self.reg.next_site.load(Ordering::Relaxed)))
    }

    fn take_ids(&mut self, first: (u32, u32), counts: (u32, u32)) -> bool {
        let take = |counter: &AtomicU32, from: u32, n: u32| {
            let to = from.checked_add(n)?;
            counter.compare_exchange(from, to, Ordering::Relaxed, Ordering::Relaxed).ok()?;
            Some(from..to)
        };
        let Some(methods) = take(&self.reg.next_method, first.0, counts.0) else { return false };
        // Taken, they go to this class's methods whatever follows: a method id never registered
        // would leave a gap that the store refuses.
        self.methods = methods;
        let Some(sites) = take(&self.reg.next_site, first.1, counts.1) else { return false };
        (self.reserved, self.taken) = (sites, true);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A published site keeps its line (unknown, the first and the last a LineNumberTable can
    /// hold), kind, method and target.
    #[test]
    fn site_entries_keep_what_walks_read() {
        for (line, kind) in [(-1, SiteKindTag::Call), (0, SiteKindTag::Alloc), (65535, SiteKindTag::Call), (12, SiteKindTag::Alloc)] {
            let r = SiteRecord { method: 77, kind, bci: 65534, line, api: true, target: u64::MAX - 3 };
            let e = SiteEntry::of(&r);
            assert_eq!((e.line(), e.kind, e.method, e.target), (line, kind, 77, u64::MAX - 3));
        }
    }

    /// `take_ids` takes exactly the ids asked for; method ids it took go to the methods that
    /// follow even when the site ids were gone.
    #[test]
    fn ids_taken_in_advance() {
        let m = MethodInfo { class: "C", name: "m", descriptor: "()V", source_file: None, access_flags: 0, leaf: false };
        let s = SiteInfo { kind: SiteKind::Call, bci: 0, line: -1, api: false, target: crate::rewrite::ANY_TARGET };
        let reg = Registry::starting_at(10, 100);
        let mut t = reg.registrar();
        assert_eq!(t.next_ids(), Some((10, 100)));
        assert!(!t.take_ids((9, 100), (1, 1)), "method 9 is not the next");
        assert!(t.take_ids((10, 100), (2, 1)));
        t.reserve_sites(1);
        assert_eq!((t.method(&m), t.site(10, &s), t.method(&m), t.method(&m)), (10, 100, 11, 12));
        let mut u = reg.registrar();
        assert_eq!(u.next_ids(), Some((13, 101)));
        reg.reserve_site();
        assert!(!u.take_ids((13, 101), (1, 1)), "site 101 is gone");
        u.reserve_sites(1);
        assert_eq!((u.method(&m), u.site(13, &s), u.method(&m)), (13, 102, 14));
    }

    /// With the JDK's leaves, the program's are known from its classes' publishes: static leaves
    /// and leaf constructors (the calls that fix their target), of no hidden class, those that
    /// every publish of the name agrees on.
    #[test]
    fn program_leaves_are_those_calls_fix() {
        let Some(modules) = crate::jimage::tests::jdk_modules() else {
            eprintln!("no JDK runtime image; skipping");
            return;
        };
        let jdk = crate::jdk_leaves::JdkLeaves::open(&modules, ProbeChoice::record(false)).unwrap();
        let reg = Registry::new().with_jdk_leaves(Some(jdk));
        let publish = |hidden: bool, methods: &[(&str, u16, bool)]| {
            let mut r = if hidden { reg.hidden_class_registrar() } else { reg.registrar() };
            for &(name, access_flags, leaf) in methods {
                r.method(&MethodInfo { class: "p/A", name, descriptor: "()V", source_file: None, access_flags, leaf });
            }
            r.publish();
        };
        let leaf = |name: &str| reg.known_leaf(b"p/A", name.as_bytes(), b"()V", false).map(|(access, _)| access);
        publish(true, &[("<init>", 1, true)]);
        assert_eq!(leaf("<init>"), None, "a hidden class");
        publish(false, &[("<init>", 1, true), ("s", 9, true), ("v", 1, true), ("t", 9, false)]);
        assert_eq!([leaf("<init>"), leaf("s"), leaf("v"), leaf("t")], [Some(1), Some(9), None, None]);
        assert_eq!(reg.known_leaf(b"p/A", b"s", b"()V", true), None, "asked by its own rewrite");
        // Another class loader's p/A, whose constructor calls on.
        publish(false, &[("<init>", 1, false), ("s", 9, true)]);
        assert_eq!([leaf("<init>"), leaf("s")], [None, Some(9)]);
        assert!(reg.known_leaf(b"java/lang/Object", b"<init>", b"()V", false).is_some(), "the JDK's from its image");
        let without = Registry::new();
        let mut r = without.registrar();
        r.method(&MethodInfo { class: "p/A", name: "s", descriptor: "()V", source_file: None, access_flags: 9, leaf: true });
        r.publish();
        assert_eq!(without.known_leaf(b"p/A", b"s", b"()V", false), None, "without the JDK's leaves, none");
    }

    /// Each method keeps its own class name and source file, also when one registrar is given
    /// methods of several classes (its text is then closed and another begun).
    #[test]
    fn methods_keep_their_strings() {
        let method = |class, name, source_file| MethodInfo { class, name, descriptor: "(I)V", source_file, access_flags: 9, leaf: true };
        let calls = [
            method("p/A", "a", Some("A.java")),
            method("p/A", "b", Some("A.java")),
            method("p/B", "c", Some("A.java")),
            method("p/B", "d", None),
            method("p/B", "é", None),
            method("p/A", "f", Some("A2.java")),
        ];
        let reg = Registry::new();
        let mut r = reg.registrar();
        let ids: Vec<u32> = calls.iter().map(|m| r.method(m)).collect();
        r.publish();
        let t = reg.tables();
        for (id, m) in ids.iter().zip(&calls) {
            let got = t.methods[*id as usize].as_ref().unwrap();
            assert_eq!((got.class(), got.name(), got.descriptor(), got.source_file()), (m.class, m.name, m.descriptor, m.source_file));
            assert_eq!((got.access_flags, got.leaf), (9, true));
        }
        // The methods of one class and source file share one text.
        let (a, b) = (t.methods[ids[0] as usize].as_ref().unwrap(), t.methods[ids[1] as usize].as_ref().unwrap());
        assert!(Arc::ptr_eq(&a.strings, &b.strings));
    }

    /// The sink gets every id taken, once: a class whose rewrite failed too (the store refuses
    /// gaps), though the tables do not.
    #[test]
    fn the_sink_gets_every_id_taken() {
        let m = MethodInfo { class: "C", name: "m", descriptor: "()V", source_file: None, access_flags: 0, leaf: false };
        let s = SiteInfo { kind: SiteKind::Call, bci: 0, line: -1, api: false, target: crate::rewrite::ANY_TARGET };
        let reg = Registry::new();
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink_got = got.clone();
        reg.set_sink(Box::new(move |methods, sites| {
            let mut g = sink_got.lock().unwrap();
            g.extend(methods.iter().map(|(id, _)| ('m', *id)).chain(sites.iter().map(|(id, _)| ('s', *id))));
        }));
        for publish in [true, false, true] {
            let mut r = reg.registrar();
            let id = r.method(&m);
            r.site(id, &s);
            if publish {
                r.publish();
            }
        }
        assert_eq!(*got.lock().unwrap(), [('m', 0), ('s', 0), ('m', 1), ('s', 1), ('m', 2), ('s', 2)]);
        let t = reg.tables();
        assert_eq!((t.methods.iter().flatten().count(), t.sites.iter().flatten().count()), (2, 2));
        assert!(t.methods[1].is_none() && t.sites[1].is_none());
    }

    #[test]
    fn dense_ids_across_threads() {
        let reg = Registry::new();
        std::thread::scope(|s| {
            for t in 0..4 {
                let reg = &reg;
                s.spawn(move || {
                    for c in 0..100 {
                        let mut r = reg.registrar();
                        let cls = format!("C{t}_{c}");
                        for k in 0..3 {
                            let name = format!("m{k}");
                            let mid = r.method(&MethodInfo {
                                class: &cls,
                                name: &name,
                                descriptor: "()V",
                                source_file: Some("X.java"),
                                access_flags: 0,
                                leaf: false,
                            });
                            r.site(mid, &SiteInfo { kind: SiteKind::Call, bci: 3, line: 7, api: false, target: crate::rewrite::ANY_TARGET });
                        }
                        r.publish();
                    }
                });
            }
        });
        let t = reg.tables();
        assert_eq!(t.methods.len(), 1200);
        assert_eq!(t.sites.len(), 1200);
        assert!(t.methods.iter().all(Option::is_some));
        for s in t.sites.iter().flatten() {
            let m = t.methods[s.method as usize].as_ref().unwrap();
            assert_eq!(m.descriptor(), "()V");
            assert_eq!(m.source_file(), Some("X.java"));
            assert!(m.class().starts_with('C') && m.name().starts_with('m'));
        }
    }
}
