//! Smoke test: rewrite every class of the running JDK's modules (extracted with `jimage`) and
//! check each output structurally. The always-on variant takes a deterministic sample; the full
//! run is `#[ignore]`d (run it with `--ignored`, in release mode for the throughput number).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

mod rewrite_common;

use lucce_agent::jdk_leaves::JdkLeaves;
use lucce_agent::rewrite::check::check_class;
use lucce_agent::rewrite::relocate::Relocatable;
use lucce_agent::rewrite::{rewrite_class, MethodInfo, ProbeChoice, SiteInfo, SiteRegistry};

#[derive(Default)]
struct Counter {
    methods: u32,
    sites: u32,
    /// The probes asked for (counting mode's by default).
    choice: ProbeChoice,
    /// Every method through the rewriter's general path.
    general: bool,
    /// As the agent rewrites a class being retransformed (the VMInit batch).
    retransforming: bool,
}

impl SiteRegistry for Counter {
    fn direct_rewrite(&self) -> bool {
        !self.general
    }

    fn probes(&self) -> ProbeChoice {
        self.choice
    }

    fn retransforming(&self) -> bool {
        self.retransforming
    }

    fn method(&mut self, _m: &MethodInfo<'_>) -> u32 {
        self.methods += 1;
        self.methods - 1
    }
    fn site(&mut self, _method_id: u32, _site: &SiteInfo) -> u32 {
        self.sites += 1;
        self.sites - 1
    }
}

fn run(every: usize) {
    let Some((_, _dir, files)) = rewrite_common::jdk_classes(None) else { return };
    let files: Vec<_> = files.into_iter().step_by(every).collect();
    let classes: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(classes.len() > 100);

    let mut reg = Counter::default();
    let mut parse_errors = Vec::new();
    let mut methods = 0u64;
    let mut rewritten = 0u64;
    let mut direct = 0u64;
    let mut skipped: BTreeMap<String, u64> = BTreeMap::new();
    let mut skipped_examples = Vec::new();
    let mut outputs = Vec::with_capacity(classes.len());
    let mut rewrite_time = Duration::ZERO;
    for (i, c) in classes.iter().enumerate() {
        let t = Instant::now();
        let r = rewrite_class(c, &mut reg);
        rewrite_time += t.elapsed();
        match r {
            Err(e) => parse_errors.push(format!("{}: {e}", files[i].display())),
            Ok(o) => {
                methods += o.stats.methods_with_code as u64;
                rewritten += o.stats.methods_rewritten as u64;
                direct += o.stats.methods_direct as u64;
                for (m, why) in &o.stats.skipped {
                    let key = format!("{why:?}");
                    *skipped.entry(key.clone()).or_default() += 1;
                    if skipped_examples.len() < 20 {
                        skipped_examples.push(format!("{}.{m}: {key}", o.stats.class_name));
                    }
                }
                outputs.push((i, o.bytes));
            }
        }
    }
    // The general path alone gives the same classes.
    let mut general = Counter { general: true, ..Counter::default() };
    let mut direct_methods = 0u64;
    for (i, out) in &outputs {
        let o = rewrite_class(&classes[*i], &mut general).unwrap();
        direct_methods += o.stats.methods_direct as u64;
        assert!(o.bytes == *out, "{}: the direct and general rewrites differ", files[*i].display());
    }
    assert_eq!(direct_methods, 0);
    // Most methods take the direct path (so the comparison covers it).
    assert!(direct * 10 > rewritten * 9, "{direct} of {rewritten} methods direct");
    assert_eq!((general.methods, general.sites), (reg.methods, reg.sites));
    // Rewritten once with placeholder ids, then given a run's ids by replaying the registry
    // calls: the same classes and registry calls as a rewrite with those ids (all past 32,767,
    // so that the rewriter pushes every id from a constant of its own there too).
    for (i, out) in outputs.iter().step_by(7) {
        let base = 1 << 20;
        let mut live = rewrite_common::Recorder { id_base: base, ..Default::default() };
        let direct_out = rewrite_class(&classes[*i], &mut live).unwrap().bytes;
        let r = Relocatable::rewrite(&classes[*i], &Counter::default()).unwrap();
        assert_eq!(r.pieces.is_some(), out.is_some());
        let mut replayed = rewrite_common::Recorder { id_base: base, ..Default::default() };
        let patched = r.replay(&classes[*i], &mut replayed);
        assert!(patched == direct_out, "{}: the replayed class differs", files[*i].display());
        assert_eq!((&replayed.methods, &replayed.sites), (&live.methods, &live.sites));
    }
    // Timed again without the allocations of the first pass' bookkeeping: pure rewrite time.
    let t = Instant::now();
    for c in &classes {
        let _ = rewrite_class(c, &mut reg);
    }
    let second = t.elapsed();

    // As record mode rewrites: without allocation probes, and without call probes in methods
    // whose calls only build exceptions or enter leaves of their own class (more methods are
    // leaves); and with either kind of those call probes, which must be the only difference.
    // The check requires the leaf entry probe exactly in the methods without site probes. The
    // general path alone gives the same classes here too.
    let record = ProbeChoice::record(false);
    let mut counters = [record, ProbeChoice { throw_path_calls: true, ..record }, ProbeChoice { leaf_calls: true, ..record }]
        .map(|choice| Counter { choice, ..Counter::default() });
    let mut record_general = Counter { choice: record, general: true, ..Counter::default() };
    let (mut alloc_probes_left, mut throw_leaves, mut leaf_callers, mut call_probes) = (0, 0u64, 0u64, [0u64; 3]);
    let mut check_errors = Vec::new();
    for (i, out) in &outputs {
        if let Some(b) = out {
            if let Err(e) = check_class(b) {
                check_errors.push(format!("{}: {e}", files[*i].display()));
            }
        }
        for (k, reg) in counters.iter_mut().enumerate() {
            let o = rewrite_class(&classes[*i], reg).unwrap();
            if k == 0 {
                throw_leaves += o.stats.throw_leaves as u64;
                leaf_callers += o.stats.leaf_callers as u64;
                let general = rewrite_class(&classes[*i], &mut record_general).unwrap().bytes;
                assert!(general == o.bytes, "{}: the direct and general rewrites differ in record mode", files[*i].display());
            }
            let Some(b) = o.bytes else { continue };
            match check_class(&b) {
                Ok(sum) => {
                    alloc_probes_left += sum.alloc_probes;
                    call_probes[k] += sum.call_probes as u64;
                }
                Err(e) => check_errors.push(format!("{} ({:?}): {e}", files[*i].display(), reg.choice)),
            }
        }
    }
    assert_eq!(alloc_probes_left, 0, "allocation probes in classes rewritten without them");
    // In the JDK, about one method in forty only builds exceptions (`checkIndex`-like ones).
    assert!(throw_leaves * 100 > methods, "{throw_leaves} of {methods} methods are leaves that only throw");
    // And about one in a hundred calls leaves of its class only (`String.length()`).
    assert!(leaf_callers * 200 > methods, "{leaf_callers} of {methods} methods are leaf callers");
    assert!(call_probes[0] < call_probes[1], "call probes without and with those on throw paths: {call_probes:?}");
    assert!(call_probes[0] < call_probes[2], "call probes without and with those of leaf callers: {call_probes:?}");
    assert_eq!(counters[0].methods, counters[1].methods);
    assert_eq!(counters[0].methods, counters[2].methods);
    eprintln!(
        "record mode: {throw_leaves} of {methods} methods are leaves that only throw, {leaf_callers} leaf callers; \
         call probes {call_probes:?} (without, with those on throw paths, with those of leaf callers)"
    );
    // As the VMInit batch rewrites: the same registry calls and probes, and no appended Utf8
    // entry equal to one the class has (HotSpot's merge of the old and new pools would map it
    // onto the old one and move every later appended entry; rewrite/pool.rs, `reuse_utf8`).
    let mut retransform = Counter { retransforming: true, ..Counter::default() };
    let mut duplicated = Vec::new();
    for (i, out) in &outputs {
        let again = rewrite_class(&classes[*i], &mut retransform).unwrap().bytes;
        assert_eq!(again.is_some(), out.is_some(), "{}", files[*i].display());
        let (Some(again), Some(out)) = (again, out) else { continue };
        match (check_class(&again), check_class(out)) {
            // The same probes, so as many calls of the runtime.
            (Ok(a), Ok(o)) => assert_eq!(a.runtime_calls, o.runtime_calls, "{}", files[*i].display()),
            (Err(e), _) => check_errors.push(format!("{} (retransformed): {e}", files[*i].display())),
            (Ok(_), Err(_)) => {} // reported above
        }
        let (old, old_count) = utf8_entries(&classes[*i]);
        let (new, _) = utf8_entries(&again);
        for (index, s) in new.iter().filter(|(index, _)| *index >= old_count) {
            if old.iter().any(|(_, o)| o == s) {
                duplicated.push(format!("{} #{index} {}", files[*i].display(), String::from_utf8_lossy(s)));
            }
        }
    }
    assert_eq!((retransform.methods, retransform.sites), (general.methods, general.sites));
    assert!(duplicated.is_empty(), "{} appended Utf8 entries the pool had, e.g. {:?}", duplicated.len(), &duplicated[..duplicated.len().min(5)]);
    let pct = if methods == 0 {
        100.0
    } else {
        rewritten as f64 * 100.0 / methods as f64
    };
    let secs = second.as_secs_f64().max(1e-9);
    eprintln!(
        "JDK smoke: {} classes, {methods} methods with code, {rewritten} rewritten ({pct:.4}%), skipped {skipped:?}",
        classes.len()
    );
    eprintln!(
        "rewrite throughput: {:.0} classes/s ({:.1} us/class; first pass {:.1} us/class) [{} build]",
        classes.len() as f64 / secs,
        secs * 1e6 / classes.len() as f64,
        rewrite_time.as_secs_f64() * 1e6 / classes.len() as f64,
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    for e in &skipped_examples {
        eprintln!("  skipped: {e}");
    }
    for e in check_errors.iter().take(20) {
        eprintln!("  check error: {e}");
    }
    assert!(
        parse_errors.is_empty(),
        "parse errors: {:?}",
        &parse_errors[..parse_errors.len().min(20)]
    );
    assert!(
        check_errors.is_empty(),
        "{} classes fail the structural check",
        check_errors.len()
    );
    assert!(pct >= 99.9, "only {pct}% of methods rewritten");
}

/// The Utf8 entries of a class file's constant pool with their indices, and the pool's
/// constant_pool_count.
fn utf8_entries(class: &[u8]) -> (Vec<(u16, Vec<u8>)>, u16) {
    let u2 = |at: usize| u16::from_be_bytes([class[at], class[at + 1]]);
    let count = u2(8);
    let (mut at, mut index, mut out) = (10, 1, Vec::new());
    while index < count {
        let size = match class[at] {
            1 => 2 + u2(at + 1) as usize,
            7 | 8 | 16 | 19 | 20 => 2,
            15 => 3,
            3 | 4 | 9 | 10 | 11 | 12 | 17 | 18 => 4,
            5 | 6 => 8,
            t => panic!("constant-pool tag {t}"),
        };
        if class[at] == 1 {
            out.push((index, class[at + 3..at + 1 + size].to_vec()));
        }
        index += if matches!(class[at], 5 | 6) { 2 } else { 1 };
        at += 1 + size;
    }
    (out, count)
}

/// `JavaLangAccess.defineClass` (`System$2`), through which the JDK defines every hidden class,
/// hands the class bytes to `lucce/Runtime.hidden` at its entry and defines what comes back; no
/// other method of the JDK gets that call.
#[test]
fn hidden_classes_pass_through_the_runtime() {
    let Some((_, _dir, files)) = rewrite_common::jdk_classes(Some("regex:/java.base/java/lang/System.*")) else { return };
    // aload 4; iload 7; invokestatic #?; astore 4 — the index is the rewriter's.
    let hook_calls = |bytes: &[u8]| {
        bytes.windows(9).filter(|w| w[..5] == [0x19, 4, 0x15, 7, 0xB8] && w[7..] == [0x3A, 4]).count()
    };
    let mut hooked = Vec::new();
    for path in files {
        let original = std::fs::read(&path).unwrap();
        let Some(out) = rewrite_class(&original, &mut Counter::default()).unwrap().bytes else { continue };
        check_class(&out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let new_calls = hook_calls(&out) - hook_calls(&original);
        if new_calls > 0 {
            let has = |s: &[u8]| out.windows(s.len()).any(|w| w == s);
            assert!(has(b"hidden") && has(b"([BI)[B"), "{}: no Methodref of Runtime.hidden", path.display());
            hooked.push((path.file_name().unwrap().to_string_lossy().into_owned(), new_calls));
        }
    }
    assert_eq!(hooked, [("System$2.class".to_string(), 1)]);
}

/// Records each method's name, descriptor and whether the rewriter made it a leaf; tells the
/// JDK's leaves when it has them.
#[derive(Default)]
struct Leaves {
    choice: ProbeChoice,
    methods: Vec<(String, bool)>,
    jdk: Option<std::sync::Arc<JdkLeaves>>,
    /// A method of the class being rewritten that callers count on, as if they did.
    forced: &'static str,
}

impl SiteRegistry for Leaves {
    fn probes(&self) -> ProbeChoice {
        self.choice
    }
    fn known_leaf(&self, class: &[u8], name: &[u8], desc: &[u8], own: bool) -> Option<(u16, u16)> {
        if own && name == self.forced.as_bytes() {
            return Some((1, 0x31));
        }
        self.jdk.as_ref()?.known_leaf(class, name, desc, own)
    }
    fn method(&mut self, m: &MethodInfo<'_>) -> u32 {
        self.methods.push((format!("{}{}", m.name, m.descriptor), m.leaf));
        self.methods.len() as u32 - 1
    }
    fn site(&mut self, _method_id: u32, _site: &SiteInfo) -> u32 {
        0
    }
}

/// In record mode `String.length()`, whose one call is of `coder()`, a leaf of the final class
/// String, is a leaf (rewrite/leaves.rs); `charAt`, which calls into `StringLatin1`, only when
/// the registry tells the JDK's leaves (agent/src/jdk_leaves.rs), and so is `ArrayList.get`,
/// through `Objects.checkIndex`; with `leaf_calls` none is. `Object.<init>` is a leaf in record
/// mode, without the call probe before its `return` that it keeps with `leaf_calls`; so are the
/// constructors that only call it through their superclasses' (`ArrayList()`), and
/// `Finalizer.register`, whose constructor chain ends there, with the JDK's leaves; and through
/// the native `System.arraycopy`, `super.m()` and virtual calls of the final class String,
/// `String.substring` and `StringBuilder.append(String)`.
#[test]
fn leaf_callers_in_string_and_array_list() {
    let Some((home, _dir, files)) = rewrite_common::jdk_classes(Some("regex:/java.base/java/(lang/String|util/ArrayList|lang/Object|lang/ref/Finalizer|lang/StringBuilder).class")) else { return };
    let class = |name: &str| std::fs::read(files.iter().find(|f| f.ends_with(name)).unwrap_or_else(|| panic!("no {name}"))).unwrap();
    let (string, list) = (class("java/lang/String.class"), class("java/util/ArrayList.class"));
    let record = ProbeChoice::record(false);
    let leaves_of = |choice: ProbeChoice, bytes: &[u8], methods: &[&str], jdk: bool| {
        let jdk = jdk.then(|| JdkLeaves::open(&home.join("lib/modules"), choice).unwrap());
        let mut reg = Leaves { choice, jdk, ..Leaves::default() };
        let o = rewrite_class(bytes, &mut reg).unwrap();
        check_class(&o.bytes.expect("rewritten")).unwrap();
        let leaf = |m: &str| reg.methods.iter().find(|(n, _)| n == m).unwrap_or_else(|| panic!("no {m}")).1;
        (methods.iter().map(|m| leaf(m)).collect::<Vec<_>>(), o.stats.leaf_callers)
    };
    let string_methods = ["length()I", "coder()B", "charAt(I)C"];
    let (leaves, callers) = leaves_of(record, &string, &string_methods, false);
    assert!(leaves == [true, true, false] && callers > 0, "record mode: {leaves:?} {string_methods:?}, {callers} leaf callers");
    let (leaves, callers) = leaves_of(record, &string, &string_methods, true);
    assert!(leaves == [true, true, true] && callers > 1, "record mode, JDK leaves: {leaves:?} {string_methods:?}, {callers} leaf callers");
    let (leaves, callers) = leaves_of(ProbeChoice { leaf_calls: true, ..record }, &string, &string_methods, true);
    assert!(leaves == [false, true, false] && callers == 0, "leaf_calls: {leaves:?} {string_methods:?}, {callers} leaf callers");
    let list_methods = ["get(I)Ljava/lang/Object;", "elementData(I)Ljava/lang/Object;", "add(Ljava/lang/Object;)Z"];
    let (leaves, _) = leaves_of(record, &list, &list_methods, false);
    assert_eq!(leaves, [false, true, false], "{list_methods:?}");
    let (leaves, _) = leaves_of(record, &list, &list_methods, true);
    assert_eq!(leaves, [true, true, false], "{list_methods:?} with the JDK's leaves");
    let (object, finalizer, builder) = (class("java/lang/Object.class"), class("java/lang/ref/Finalizer.class"), class("java/lang/StringBuilder.class"));
    let init = ["<init>()V"];
    assert_eq!(leaves_of(record, &object, &init, false).0, [true], "Object.<init>");
    assert_eq!(leaves_of(ProbeChoice { leaf_calls: true, ..record }, &object, &init, false).0, [false], "Object.<init> with leaf_calls");
    assert_eq!(leaves_of(record, &list, &init, false).0, [false], "ArrayList.<init> without the JDK's leaves");
    assert_eq!(leaves_of(record, &list, &init, true).0, [true], "ArrayList.<init> with the JDK's leaves");
    let register = ["register(Ljava/lang/Object;)V"];
    assert_eq!(leaves_of(record, &finalizer, &register, true).0, [true], "Finalizer.register with the JDK's leaves");
    // Through `Arrays.copyOfRange`, which calls the native `System.arraycopy`, and the
    // constructor `String(byte[], byte)`.
    let substring = ["substring(II)Ljava/lang/String;"];
    assert_eq!(leaves_of(record, &string, &substring, true).0, [true], "String.substring with the JDK's leaves");
    // `super.append(s)`, whose `putStringAt` calls the final class String's `getBytes`.
    let append = ["append(Ljava/lang/String;)Ljava/lang/StringBuilder;"];
    assert_eq!(leaves_of(record, &builder, &append, true).0, [true], "StringBuilder.append(String) with the JDK's leaves");
    // A record for the class cache keeps the leaves of other classes that its leaf callers
    // count on (`String.charAt` on `StringLatin1.charAt`), each once; and none is made of a
    // class whose rewrite made a method a leaf only because callers counted on it (what that
    // method's calls count on is not known).
    let jdk = Some(JdkLeaves::open(&home.join("lib/modules"), record).unwrap());
    let r = Relocatable::rewrite(&string, &Leaves { choice: record, jdk: jdk.clone(), ..Leaves::default() }).unwrap();
    let named = |c: &str, n: &str| r.assumed.iter().filter(|a| a.class == c && a.name == n).count();
    assert_eq!(named("java/lang/StringLatin1", "charAt"), 1, "{:?}", r.assumed);
    assert!(Relocatable::rewrite(&string, &Leaves { choice: record, jdk: None, ..Leaves::default() }).unwrap().assumed.is_empty());
    assert!(Relocatable::rewrite(&string, &Leaves { choice: record, jdk, forced: "format", ..Leaves::default() }).is_err());
}

#[test]
fn jdk_sample_rewrites_and_checks() {
    run(7);
}

#[test]
#[ignore = "full JDK: run with --ignored (use --release for the throughput figure)"]
fn jdk_all_rewrites_and_checks() {
    run(1);
}
