//! The calls the JIT may replace by intrinsics, after which the rewriter drops the caller's
//! pending record (probes.rs, the drop probe).
//!
//! C1 and C2 replace a call of a JDK method marked `@IntrinsicCandidate` (`Math.max`,
//! `StringBuilder.append` in C2's string concatenation, `Integer.valueOf`, `Reference.get`, …) by
//! code of their own, and the interpreter has entries of its own for a few (`Math.sin`,
//! `Reference.get`): the caller's call probe runs, the callee's entry probe does not, and the
//! record stays valid after the call. An entry of the same method from code with no call probe
//! (an excluded class, a native method) would take it as its own, and trust it, since the pair
//! ⟨call site, method⟩ is a real one (recorder.rs, "Which frame called me").
//!
//! intrinsics.txt lists the candidates with code, one `class name descriptor` per line (native
//! methods never run an entry probe, and no record is trusted for them): written by
//! scripts/list_intrinsics.sh, checked against the JDK by the test
//! `intrinsic_candidates_match_the_jdk`. An invoke is taken for one by its name and descriptor
//! alone, whatever class it names: the JIT also replaces a virtual call it binds to a listed
//! method (`Appendable.append` on a `StringBuilder`), and a call through a subclass names the subclass. A
//! constructor is taken by its class too (constructors are not inherited; `<init>()V` names
//! every constructor without parameters). So is every call of a `MethodHandle` method, through
//! which the JIT inlines into the handle's target. One listed method is left out: `Object.<init>`,
//! whose mark stands for what HotSpot does at its `return` (register a finalizable object), not
//! for a replacement of its body, whose entry probe always runs (`-XX:+PrintIntrinsics` shows
//! `Math.max` and `System.arraycopy` replaced in a loop that also constructs objects, never
//! `Object.<init>`); a drop after the `super()` of every constructor of a direct subclass of
//! `Object` would cost every such allocation a store and its constructor 3 bytes of its inlining
//! budget. Dropping a record after any call is exact (the record
//! belongs to a call that has ended), so taking too many costs only the drop.

use std::sync::OnceLock;

use rustc_hash::FxHashSet;

use super::target_key;

const LIST: &str = include_str!("intrinsics.txt");

/// The listed method whose body the JIT never replaces (above).
const OBJECT_INIT: &str = "java/lang/Object <init> ()V";

/// Keys of the listed methods: [`target_key`] of name and descriptor; of class and descriptor
/// for a constructor.
struct Keys {
    methods: FxHashSet<u64>,
    constructors: FxHashSet<u64>,
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys = Keys { methods: FxHashSet::default(), constructors: FxHashSet::default() };
        for line in LIST.lines().filter(|l| !l.starts_with('#') && *l != OBJECT_INIT) {
            let mut parts = line.split(' ');
            if let (Some(class), Some(name), Some(desc)) = (parts.next(), parts.next(), parts.next()) {
                if name == "<init>" {
                    keys.constructors.insert(target_key(class.as_bytes(), desc.as_bytes()));
                } else {
                    keys.methods.insert(target_key(name.as_bytes(), desc.as_bytes()));
                }
            }
        }
        keys
    })
}

/// Whether an invoke of `name` and `descriptor` in `class` (internal names, modified UTF-8 as in
/// the class file) may be one the JIT replaces by an intrinsic. Any call of a `MethodHandle`
/// method may: the JIT inlines through a constant method handle (`invokeExact`, and the
/// `linkTo*` and `invokeBasic` calls of lambda forms) into its target, intrinsics included.
pub fn may_be_intrinsic(class: &[u8], name: &[u8], descriptor: &[u8]) -> bool {
    listed(class, name, descriptor, target_key(name, descriptor))
}

/// [`may_be_intrinsic`] given `name_key`, the [`target_key`] of `name` and `descriptor`.
pub(crate) fn listed(class: &[u8], name: &[u8], descriptor: &[u8], name_key: u64) -> bool {
    if class == b"java/lang/invoke/MethodHandle" {
        return true;
    }
    let keys = keys();
    if name == b"<init>" {
        keys.constructors.contains(&target_key(class, descriptor))
    } else {
        keys.methods.contains(&name_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_of_listed_methods_by_name_and_descriptor() {
        assert!(may_be_intrinsic(b"java/lang/Math", b"max", b"(II)I"));
        // A call through an interface the JIT may bind to StringBuilder's, through a subclass.
        assert!(may_be_intrinsic(b"java/lang/Appendable", b"append", b"(C)Ljava/lang/Appendable;"));
        assert!(may_be_intrinsic(b"java/lang/ref/WeakReference", b"get", b"()Ljava/lang/Object;"));
        assert!(!may_be_intrinsic(b"java/lang/Math", b"max", b"(JI)J"));
        assert!(!may_be_intrinsic(b"java/util/List", b"size", b"()I"));
        assert!(may_be_intrinsic(b"java/lang/invoke/MethodHandle", b"linkToStatic", b"(IILjava/lang/invoke/MemberName;)I"));
        // Natives are not listed.
        assert!(!may_be_intrinsic(b"java/lang/System", b"arraycopy", b"(Ljava/lang/Object;ILjava/lang/Object;II)V"));
    }

    #[test]
    fn constructors_by_their_class() {
        assert!(may_be_intrinsic(b"java/lang/StringBuilder", b"<init>", b"(I)V"));
        assert!(LIST.lines().any(|l| l == OBJECT_INIT));
        assert!(!may_be_intrinsic(b"java/lang/Object", b"<init>", b"()V"));
        assert!(!may_be_intrinsic(b"java/util/ArrayList", b"<init>", b"()V"));
    }

    #[test]
    fn every_line_is_read() {
        let lines = LIST.lines().filter(|l| !l.starts_with('#')).count();
        assert!(lines > 200, "{lines} lines");
        assert!(LIST.lines().filter(|l| !l.starts_with('#')).all(|l| l.split(' ').count() == 3));
        let k = keys();
        // Distinct keys: some names and descriptors recur (min, max, append in several classes).
        assert!(k.methods.len() + k.constructors.len() > 200);
    }
}
