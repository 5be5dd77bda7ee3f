//! What record mode's leaf callers (rewrite/leaves.rs) may count on in other classes: the leaves
//! of the classes of `java.base`, found by the rewriter's own analysis
//! ([`rewrite::leaf_methods`]) of their class files in the JDK's runtime image (jimage.rs),
//! whether or not the class has loaded yet. `String.charAt` so becomes a leaf through
//! `StringLatin1.charAt`, `ArrayList.get` through `Objects.checkIndex`, and `ArrayList()`
//! through the constructors of its superclasses.
//!
//! Every class of the boot layer's packages comes from that image, whoever resolves its name, so
//! an answer describes the class the call will enter. An answer, once given, is final, and the
//! rewrite of that class makes a leaf of every method an answer called one
//! (`SiteRegistry::known_leaf` with `own`), even if its bytes are not the image's (another agent
//! changed them): callers counted on it. Exactness never depends on this, only speed: a
//! leaf caller's callee that is no leaf finds no record and walks the stack.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

use crate::jimage::{JImage, JImageError};
use crate::rewrite::{self, ProbeChoice};

/// How deep one question may lead through the classes its answer depends on (each a class file
/// read and analysed); past it, calls into further classes count as unknown.
const MAX_DEPTH: u32 = 4;

/// Rounds of analysis again over the classes one question read, while their leaves grow: a
/// class asked about while it was being analysed (`String` calls `StringUTF16`, which calls
/// `String.checkIndex`) answered from what was known of it then, and one past [`MAX_DEPTH`]
/// not at all.
const MAX_ROUNDS: usize = 4;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The classes the current question analysed, in the order they were done, each with
    /// whether an answer in its analysis came from a class still being analysed or past the
    /// depth.
    static ANALYSED: RefCell<Vec<(Box<[u8]>, bool)>> = const { RefCell::new(Vec::new()) };
    /// Whether the analysis under way took such an answer.
    static TOOK_PENDING: Cell<bool> = const { Cell::new(false) };
}

/// A class's leaves: `rewrite::target_key` of (name, descriptor) → access flags (a collision
/// could only make a caller count on a method that is no leaf: slower, never wrong); and the
/// class's own access flags.
#[derive(Default, Clone)]
struct ClassLeaves {
    access: u16,
    leaves: FxHashMap<u64, u16>,
}

struct Entry {
    /// Being analysed: its leaves are what is known so far (none at first).
    pending: bool,
    /// None: not in the image, or not a class the rewriter reads.
    leaves: Option<ClassLeaves>,
    /// The class has been rewritten with these leaves: they may grow no more.
    frozen: bool,
}

pub struct JdkLeaves {
    image: JImage,
    probes: ProbeChoice,
    classes: RwLock<FxHashMap<Box<[u8]>, Entry>>,
    reads: AtomicU64,
}

/// Whether `class` may be one of `java.base`'s (its packages' prefixes): the rewrite of any
/// other class asks nothing.
pub(crate) fn maybe_java_base(class: &[u8]) -> bool {
    class.starts_with(b"java/") || class.starts_with(b"jdk/internal/") || class.starts_with(b"sun/")
}

impl JdkLeaves {
    /// The leaves of the classes in the runtime image at `modules`, for rewrites with `probes`.
    pub fn open(modules: &Path, probes: ProbeChoice) -> Result<Arc<JdkLeaves>, JImageError> {
        let image = JImage::open(modules)?;
        Ok(Arc::new(JdkLeaves { image, probes, classes: RwLock::default(), reads: AtomicU64::new(0) }))
    }

    /// How many class files were read from the image (analyses, rounds included).
    pub fn classes_read(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// `SiteRegistry::known_leaf`: the access flags of method (name, desc) of `class` and of the
    /// class, if it is a leaf. A class not asked about before is read and analysed now. `own`:
    /// the class is being rewritten, and the leaves answered are final (any other class's
    /// callers may count on them from now on, and the rewrite makes them leaves).
    pub fn known_leaf(&self, class: &[u8], name: &[u8], desc: &[u8], own: bool) -> Option<(u16, u16)> {
        if own && !maybe_java_base(class) {
            return None;
        }
        let key = rewrite::target_key(name, desc);
        let answer = |e: &Entry| e.leaves.as_ref().and_then(|c| c.leaves.get(&key).map(|&a| (a, c.access)));
        let known = match self.classes.read().ok()?.get(class) {
            Some(e) => {
                if e.pending {
                    TOOK_PENDING.with(|t| t.set(true));
                }
                // A class rewritten while another thread analyses it is frozen with what is
                // known so far: the analysis then adds nothing that its rewrite did not force.
                if !own || e.frozen {
                    return answer(e);
                }
                true
            }
            None => false,
        };
        if !known {
            self.settle(class)?;
        }
        let mut classes = self.classes.write().ok()?;
        let e = classes.get_mut(class)?;
        e.frozen |= own;
        answer(e)
    }

    /// `SiteRegistry::served_leaves`: `class` is about to be served from the class cache with
    /// `methods` (name, descriptor, access flags, leaf) and `access`. False when a leaf known
    /// already (answered, or being worked out) is one of those methods but no leaf there, or
    /// one with other [`rewrite::DISPATCH_FLAGS`]: the class must be rewritten then, which makes
    /// it a leaf. Else the methods' leaves join the class's, as if analysed, and are final (a
    /// leaf the record does not register, such as an empty `finalize` the rewrite leaves alone,
    /// stays one); a class frozen already (rewritten or served before) keeps its own.
    pub fn served(&self, class: &[u8], access: u16, methods: &mut dyn Iterator<Item = (&str, &str, u16, bool)>) -> bool {
        let methods: FxHashMap<u64, (u16, bool)> = methods.map(|(n, d, a, leaf)| (rewrite::target_key(n.as_bytes(), d.as_bytes()), (a, leaf))).collect();
        let Ok(mut classes) = self.classes.write() else { return false };
        let e = classes.entry(class.into()).or_insert(Entry { pending: false, leaves: None, frozen: false });
        let kept = |k: &u64, a: &u16| methods.get(k).is_none_or(|&(b, leaf)| leaf && (a ^ b) & rewrite::DISPATCH_FLAGS == 0);
        if e.leaves.as_ref().is_some_and(|known| !known.leaves.iter().all(|(k, a)| kept(k, a))) {
            return false;
        }
        if !e.frozen {
            let known = e.leaves.get_or_insert_with(|| ClassLeaves { access, ..ClassLeaves::default() });
            known.leaves.extend(methods.iter().filter(|(_, (_, leaf))| *leaf).map(|(&k, &(a, _))| (k, a)));
            e.frozen = true;
        }
        true
    }

    /// Analyses `class`, and at the outermost question, again those it led to while they grow.
    fn settle(&self, class: &[u8]) -> Option<()> {
        let depth = DEPTH.with(Cell::get);
        if depth >= MAX_DEPTH {
            // The class asking knows less than it could: the rounds analyse it again.
            TOOK_PENDING.with(|t| t.set(true));
            return None;
        }
        {
            let mut classes = self.classes.write().ok()?;
            if classes.contains_key(class) {
                return Some(());
            }
            classes.insert(class.into(), Entry { pending: true, leaves: None, frozen: false });
        }
        let outer = TOOK_PENDING.with(|t| t.replace(false));
        let leaves = self.analyse(class);
        let took = TOOK_PENDING.with(|t| t.replace(outer || t.get()));
        self.store(class, leaves, true);
        ANALYSED.with(|a| a.borrow_mut().push((class.into(), took)));
        if depth == 0 {
            let take = || ANALYSED.with(|a| std::mem::take(&mut *a.borrow_mut()));
            let mut done = take();
            // Classes are done after those they asked about: from the first that took an
            // answer of a class still under way, every later one may learn more now (and
            // those a round analyses for the first time join the next).
            for _ in 0..MAX_ROUNDS {
                let Some(first) = done.iter().position(|(_, took)| *took) else { break };
                let grew = done[first..].iter().filter(|(c, _)| self.store(c, self.analyse(c), false)).count();
                let new = take();
                if grew == 0 && new.is_empty() {
                    break;
                }
                done.extend(new);
            }
            take();
            TOOK_PENDING.with(|t| t.set(false));
        }
        Some(())
    }

    /// Records `leaves` for `class` (`done`: its first analysis ended): added to what is known,
    /// unless the class is frozen. Whether they grew.
    fn store(&self, class: &[u8], leaves: Option<ClassLeaves>, done: bool) -> bool {
        let Ok(mut classes) = self.classes.write() else { return false };
        let Some(e) = classes.get_mut(class) else { return false };
        if done {
            e.pending = false;
        }
        let Some(new) = leaves else { return false };
        if e.frozen {
            return false;
        }
        let old = e.leaves.get_or_insert_with(|| ClassLeaves { access: new.access, ..ClassLeaves::default() });
        let before = old.leaves.len();
        old.leaves.extend(new.leaves);
        old.leaves.len() > before
    }

    /// The leaves of `class` as the image has it (the classes it calls asked in turn, one level
    /// deeper).
    fn analyse(&self, class: &[u8]) -> Option<ClassLeaves> {
        let bytes = self.image.java_base_class(class)?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        DEPTH.with(|d| d.set(d.get() + 1));
        let known = |c: &[u8], n: &[u8], d: &[u8], own: bool| self.known_leaf(c, n, d, own);
        // The analysis must not unwind through the load hook; a class it fails on is unknown.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rewrite::leaf_methods(&bytes, self.probes, &known)));
        DEPTH.with(|d| d.set(d.get() - 1));
        let (access, methods) = result.ok()?.ok()?;
        let leaves = methods.into_iter().map(|(n, d, a)| (rewrite::target_key(&n, &d), a)).collect();
        Some(ClassLeaves { access, leaves })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::rewrite::{ACC_FINAL, ACC_STATIC};

    /// Record mode's leaves of the running JDK's image; None (the test skips) without one.
    fn record_leaves() -> Option<Arc<JdkLeaves>> {
        let Some(modules) = crate::jimage::tests::jdk_modules() else {
            eprintln!("no JDK runtime image; skipping");
            return None;
        };
        Some(JdkLeaves::open(&modules, ProbeChoice::record(false)).unwrap())
    }

    #[test]
    fn jdk_leaves_are_settled_once() {
        let Some(j) = record_leaves() else { return };
        // A static leaf whose only call builds the exception it throws.
        let (access, _) = j.known_leaf(b"java/lang/StringLatin1", b"charAt", b"([BI)C", false).expect("StringLatin1.charAt");
        assert_ne!(access & ACC_STATIC, 0, "static");
        // Through it and StringUTF16.charAt (which calls back into String), String.charAt;
        // String is final.
        let (_, class_access) = j.known_leaf(b"java/lang/String", b"charAt", b"(I)C", false).expect("String.charAt");
        assert_ne!(class_access & ACC_FINAL, 0, "final class");
        // Through Objects.checkIndex and its own package-private elementData.
        j.known_leaf(b"java/util/ArrayList", b"get", b"(I)Ljava/lang/Object;", false).expect("ArrayList.get");
        // Not leaves: a method that calls on (a Formatter's parser), one of another module, one
        // that does not exist.
        assert_eq!(j.known_leaf(b"java/lang/String", b"format", b"(Ljava/lang/String;[Ljava/lang/Object;)Ljava/lang/String;", false), None);
        assert_eq!(j.known_leaf(b"javax/xml/XMLConstants", b"<init>", b"()V", false), None);
        assert_eq!(j.known_leaf(b"java/lang/String", b"noSuchMethod", b"()V", false), None);
        let reads = j.classes_read();
        j.known_leaf(b"java/lang/String", b"length", b"()I", false).expect("String.length");
        assert_eq!(j.classes_read(), reads, "String was settled once");
        // Its rewrite freezes what callers count on.
        j.known_leaf(b"java/lang/String", b"length", b"()I", true).expect("String.length");
        // A class outside java.base's packages asks nothing.
        assert_eq!(j.known_leaf(b"org/example/Foo", b"bar", b"()V", true), None);
        assert_eq!(j.classes_read(), reads);
    }

    /// A class served from the class cache: its record's leaves are taken unless the record
    /// registers a leaf known already as no leaf, and a class frozen before keeps its own.
    #[test]
    fn served_leaves_are_taken_unless_callers_count_on_others() {
        let Some(j) = record_leaves() else { return };
        // Not asked about before: served with two leaves, which are its answers from now on,
        // read from no class file.
        assert!(j.served(b"java/util/BitSet", 0x31, &mut [("size", "()I", 1, true), ("isEmpty", "()Z", 1, true), ("get", "(I)Z", 1, false)].into_iter()));
        assert_eq!(j.known_leaf(b"java/util/BitSet", b"size", b"()I", false), Some((1, 0x31)));
        assert_eq!(j.known_leaf(b"java/util/BitSet", b"get", b"(I)Z", false), None);
        assert_eq!(j.classes_read(), 0);
        // Served again (another loader's copy): refused where it registers one of those as no
        // leaf; taken where it leaves one out (a method it did not rewrite), or has more, which
        // the frozen class does not take.
        assert!(!j.served(b"java/util/BitSet", 0x31, &mut [("size", "()I", 1, true), ("isEmpty", "()Z", 1, false)].into_iter()));
        assert!(j.served(b"java/util/BitSet", 0x31, &mut [("size", "()I", 1, true), ("get", "(I)Z", 1, true)].into_iter()));
        assert_eq!(j.known_leaf(b"java/util/BitSet", b"get", b"(I)Z", false), None);
        // Analysed already (an answer given): refused if a leaf found is no leaf in the record,
        // or one with other flags that fix a call's target; taken with the leaves a rewrite
        // makes, whatever flags the record adds (a frame the JVM hides).
        j.known_leaf(b"java/lang/String", b"length", b"()I", false).expect("String.length");
        assert!(!j.served(b"java/lang/String", 0x31, &mut [("length", "()I", 1, false)].into_iter()));
        assert!(!j.served(b"java/lang/String", 0x31, &mut [("length", "()I", 1 | ACC_STATIC, true)].into_iter()));
        let bytes = j.image.java_base_class(b"java/lang/String").unwrap();
        let (access, leaves) = rewrite::leaf_methods(&bytes, j.probes, &|c: &[u8], n: &[u8], d: &[u8], own: bool| j.known_leaf(c, n, d, own)).unwrap();
        let text: Vec<(String, String, u16)> = leaves.into_iter().map(|(n, d, a)| (String::from_utf8(n).unwrap(), String::from_utf8(d).unwrap(), a)).collect();
        assert!(text.len() > 10);
        let mut served = text.iter().map(|(n, d, a)| (n.as_str(), d.as_str(), *a | rewrite::HIDDEN_FRAME_FLAG, true));
        assert!(j.served(b"java/lang/String", access, &mut served));
    }
}
