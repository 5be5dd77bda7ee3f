//! Hand-assembled class files for what javac no longer emits: versions 45/46 (no StackMapTable,
//! the inference verifier), jsr/ret and jsr_w, goto_w, a tableswitch with hand-picked padding,
//! plus a method that cannot be rewritten (max_locals too large), and a fuzz test (random and
//! mutated class bytes must give Ok or Err, never a panic).

mod rewrite_common;

use std::collections::HashMap;

use lucce_agent::rewrite::check::check_class;
use lucce_agent::rewrite::{drop_at_handlers_with, rewrite_class, RewriteError, SiteKind, SkipReason};
use rewrite_common::*;

/// A tiny class-file assembler: a constant pool with dedup and raw method bodies.
#[derive(Default)]
struct Asm {
    cp: Vec<u8>,
    count: u16,
    memo: HashMap<(u8, Vec<u8>), u16>,
}

struct M {
    access: u16,
    name: &'static str,
    desc: &'static str,
    max_stack: u16,
    max_locals: u16,
    code: Vec<u8>,
    exc: Vec<[u16; 4]>,
    lines: Vec<(u16, u16)>,
}

impl Asm {
    fn entry(&mut self, tag: u8, body: Vec<u8>) -> u16 {
        if let Some(&i) = self.memo.get(&(tag, body.clone())) {
            return i;
        }
        self.count += 1;
        self.cp.push(tag);
        self.cp.extend_from_slice(&body);
        self.memo.insert((tag, body), self.count);
        self.count
    }
    fn utf8(&mut self, s: &str) -> u16 {
        let mut b = (s.len() as u16).to_be_bytes().to_vec();
        b.extend_from_slice(s.as_bytes());
        self.entry(1, b)
    }
    fn class(&mut self, n: &str) -> u16 {
        let u = self.utf8(n);
        self.entry(7, u.to_be_bytes().to_vec())
    }
    fn string(&mut self, s: &str) -> u16 {
        let u = self.utf8(s);
        self.entry(8, u.to_be_bytes().to_vec())
    }
    fn member(&mut self, tag: u8, c: &str, n: &str, d: &str) -> u16 {
        let c = self.class(c);
        let (n, d) = (self.utf8(n), self.utf8(d));
        let nat = self.entry(12, [n.to_be_bytes(), d.to_be_bytes()].concat());
        self.entry(tag, [c.to_be_bytes(), nat.to_be_bytes()].concat())
    }
    fn method(&mut self, c: &str, n: &str, d: &str) -> u16 {
        self.member(10, c, n, d)
    }
    fn field(&mut self, c: &str, n: &str, d: &str) -> u16 {
        self.member(9, c, n, d)
    }

    fn build(mut self, major: u16, name: &str, methods: Vec<M>) -> Vec<u8> {
        let this = self.class(name);
        let sup = self.class("java/lang/Object");
        let code_n = self.utf8("Code");
        let lnt_n = self.utf8("LineNumberTable");
        let mut ms = Vec::new();
        for m in &methods {
            let (n, d) = (self.utf8(m.name), self.utf8(m.desc));
            ms.push((n, d));
        }
        let mut out = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, if major == 45 { 3 } else { 0 }];
        out.extend_from_slice(&major.to_be_bytes());
        out.extend_from_slice(&(self.count + 1).to_be_bytes());
        out.extend_from_slice(&self.cp);
        out.extend_from_slice(&0x0021u16.to_be_bytes());
        out.extend_from_slice(&this.to_be_bytes());
        out.extend_from_slice(&sup.to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]); // interfaces, fields
        out.extend_from_slice(&(methods.len() as u16).to_be_bytes());
        for (m, (n, d)) in methods.iter().zip(ms) {
            out.extend_from_slice(&m.access.to_be_bytes());
            out.extend_from_slice(&n.to_be_bytes());
            out.extend_from_slice(&d.to_be_bytes());
            out.extend_from_slice(&1u16.to_be_bytes());
            let mut c = Vec::new();
            c.extend_from_slice(&m.max_stack.to_be_bytes());
            c.extend_from_slice(&m.max_locals.to_be_bytes());
            c.extend_from_slice(&(m.code.len() as u32).to_be_bytes());
            c.extend_from_slice(&m.code);
            c.extend_from_slice(&(m.exc.len() as u16).to_be_bytes());
            for e in &m.exc {
                for v in e {
                    c.extend_from_slice(&v.to_be_bytes());
                }
            }
            if m.lines.is_empty() {
                c.extend_from_slice(&0u16.to_be_bytes());
            } else {
                c.extend_from_slice(&1u16.to_be_bytes());
                c.extend_from_slice(&lnt_n.to_be_bytes());
                c.extend_from_slice(&((2 + 4 * m.lines.len()) as u32).to_be_bytes());
                c.extend_from_slice(&(m.lines.len() as u16).to_be_bytes());
                for (pc, l) in &m.lines {
                    c.extend_from_slice(&pc.to_be_bytes());
                    c.extend_from_slice(&l.to_be_bytes());
                }
            }
            out.extend_from_slice(&code_n.to_be_bytes());
            out.extend_from_slice(&(c.len() as u32).to_be_bytes());
            out.extend_from_slice(&c);
        }
        out.extend_from_slice(&0u16.to_be_bytes()); // class attributes
        out
    }
}

fn u2(v: u16) -> [u8; 2] {
    v.to_be_bytes()
}

/// Class `Old` (version `major`) with jsr/ret, jsr_w, goto_w, a tableswitch, exception handlers
/// (two that start with an invoke and a `new`, where the rewriter's drop probe goes first).
fn old_class(major: u16) -> Vec<u8> {
    let mut a = Asm::default();
    let out = a.field("java/lang/System", "out", "Ljava/io/PrintStream;");
    let pi = a.method("java/io/PrintStream", "println", "(I)V");
    let ps = a.method("java/io/PrintStream", "println", "(Ljava/lang/String;)V");
    let f = a.method("Old", "f", "(I)I");
    let g = a.method("Old", "g", "(I)I");
    let h = a.method("Old", "h", "(I)I");
    let sw = a.method("Old", "sw", "(I)I");
    let k = a.method("Old", "k", "(I)I");
    let n = a.method("Old", "n", "(I)I");
    let sub = a.string("sub");
    let obj = a.class("java/lang/Object");
    let hash = a.method("java/lang/Object", "hashCode", "()I");
    let init = a.method("java/lang/Object", "<init>", "()V");

    // f(I)I: both paths call the subroutine (jsr and jsr_w), which prints and returns via ret.
    let mut fc = vec![0x1A, 0x99]; // 0: iload_0; 1: ifeq -> 11
    fc.extend_from_slice(&u2(10));
    fc.push(0xA8); // 4: jsr -> 18
    fc.extend_from_slice(&u2(14));
    fc.extend_from_slice(&[0x1A, 0x05, 0x68, 0xAC]); // 7: iload_0 iconst_2 imul ireturn
    fc.push(0xC9); // 11: jsr_w -> 18
    fc.extend_from_slice(&7i32.to_be_bytes());
    fc.extend_from_slice(&[0x02, 0xAC]); // 16: iconst_m1 ireturn
    fc.push(0x4C); // 18: astore_1
    fc.push(0xB2); // 19: getstatic out
    fc.extend_from_slice(&u2(out));
    fc.push(0x12); // 22: ldc "sub"
    fc.push(sub as u8);
    fc.push(0xB6); // 24: invokevirtual println(String)
    fc.extend_from_slice(&u2(ps));
    fc.extend_from_slice(&[0x84, 0x00, 0x01]); // 27: iinc 0 1
    fc.extend_from_slice(&[0xA9, 0x01]); // 30: ret 1
    assert!(sub < 256);

    // g(I)I: a handler around a call that may throw.
    let mut gc = vec![0x1A, 0xB8]; // 0: iload_0; 1: invokestatic h
    gc.extend_from_slice(&u2(h));
    gc.push(0xAC); // 4: ireturn
    gc.extend_from_slice(&[0x4C, 0x10, 42, 0xAC]); // 5: astore_1 bipush 42 ireturn

    let hc = vec![0x04, 0x1A, 0x6C, 0xAC]; // iconst_1 iload_0 idiv ireturn

    // k(I)I and n(I)I: g's shape, with handlers that start with an invoke and with a `new`.
    let mut kc = vec![0x1A, 0xB8]; // 0: iload_0; 1: invokestatic h
    kc.extend_from_slice(&u2(h));
    kc.push(0xAC); // 4: ireturn
    kc.push(0xB6); // 5: invokevirtual hashCode
    kc.extend_from_slice(&u2(hash));
    kc.extend_from_slice(&[0x57, 0x10, 7, 0xAC]); // 8: pop bipush 7 ireturn
    let mut nc = kc[..5].to_vec();
    nc.push(0xBB); // 5: new Object
    nc.extend_from_slice(&u2(obj));
    nc.extend_from_slice(&[0x59, 0xB7]); // 8: dup; 9: invokespecial <init>
    nc.extend_from_slice(&u2(init));
    nc.extend_from_slice(&[0x57, 0x57, 0x10, 8, 0xAC]); // 12: pop pop bipush 8 ireturn

    // sw(I)I: tableswitch at offset 1 (2 bytes of padding), a goto_w backwards.
    let mut sc = vec![0x1A, 0xAA, 0, 0]; // 0: iload_0; 1: tableswitch; pad
    for v in [41i32 - 1, 5, 8, 31, 31, 33, 35] {
        sc.extend_from_slice(&v.to_be_bytes()); // default, low, high, 4 offsets (relative to 1)
    }
    assert_eq!(sc.len(), 32);
    sc.extend_from_slice(&[0x04, 0xAC, 0x05, 0xAC]); // 32: iconst_1 ireturn; 34: iconst_2 ireturn
    sc.push(0xC8); // 36: goto_w -> 32
    sc.extend_from_slice(&(-4i32).to_be_bytes());
    sc.extend_from_slice(&[0x10, 99, 0xAC]); // 41: bipush 99 ireturn

    let mut mc = Vec::new();
    for (arg, callee) in [
        (3u8, f),
        (0, f),
        (0, g),
        (5, g),
        (7, sw),
        (8, sw),
        (5, sw),
        (1, sw),
        (0, k),
        (5, k),
        (0, n),
        (5, n),
    ] {
        mc.push(0xB2);
        mc.extend_from_slice(&u2(out));
        mc.extend_from_slice(&[0x10, arg, 0xB8]);
        mc.extend_from_slice(&u2(callee));
        mc.push(0xB6);
        mc.extend_from_slice(&u2(pi));
    }
    mc.push(0xB1);

    let ms = vec![
        M {
            access: 9,
            name: "main",
            desc: "([Ljava/lang/String;)V",
            max_stack: 3,
            max_locals: 1,
            code: mc,
            exc: vec![],
            lines: vec![(0, 1)],
        },
        M {
            access: 9,
            name: "f",
            desc: "(I)I",
            max_stack: 2,
            max_locals: 2,
            code: fc,
            exc: vec![],
            lines: vec![(0, 10), (4, 11), (18, 20), (24, 21), (24, 22)],
        },
        M {
            access: 9,
            name: "g",
            desc: "(I)I",
            max_stack: 1,
            max_locals: 2,
            code: gc,
            exc: vec![[0, 5, 5, 0]],
            lines: vec![],
        },
        M {
            access: 9,
            name: "h",
            desc: "(I)I",
            max_stack: 2,
            max_locals: 1,
            code: hc,
            exc: vec![],
            lines: vec![(2, 7)],
        },
        M {
            access: 9,
            name: "sw",
            desc: "(I)I",
            max_stack: 1,
            max_locals: 1,
            code: sc,
            exc: vec![],
            lines: vec![],
        },
        M {
            access: 9,
            name: "k",
            desc: "(I)I",
            max_stack: 1,
            max_locals: 1,
            code: kc,
            exc: vec![[0, 5, 5, 0]],
            lines: vec![],
        },
        M {
            access: 9,
            name: "n",
            desc: "(I)I",
            max_stack: 3,
            max_locals: 1,
            code: nc,
            exc: vec![[0, 5, 5, 0]],
            lines: vec![],
        },
        M {
            access: 9,
            name: "huge",
            desc: "()V",
            max_stack: 0,
            // Not even a leaf's one probe local fits.
            max_locals: 65535,
            code: vec![0xB1],
            exc: vec![],
            lines: vec![],
        },
    ];
    a.build(major, "Old", ms)
}

/// A member whose name or descriptor index points past the constant pool leaves the whole class
/// as it was: the entries the rewriter appends would otherwise give that index a meaning (found
/// by fuzzing: a method's descriptor index resolved to an appended Utf8 entry).
#[test]
fn member_index_past_the_pool_leaves_the_class_alone() {
    let class = old_class(49);
    assert!(rewrite_class(&class, &mut rewrite_common::Recorder::default()).unwrap().bytes.is_some());
    // The first method's descriptor index: methods follow the (empty) interfaces and fields.
    let count = u16::from_be_bytes([class[8], class[9]]);
    let mut pos = 10;
    for _ in 1..count {
        let tag = class[pos];
        pos += match tag {
            1 => 3 + u16::from_be_bytes([class[pos + 1], class[pos + 2]]) as usize,
            5 | 6 => 9,
            7 | 8 | 16 | 19 | 20 => 3,
            15 => 4,
            _ => 5,
        };
    }
    let desc_at = pos + 6 + 4 + 2 + 2 + 2; // flags, this, super, interfaces, fields, methods; access, name
    for bad in [count, count + 1, u16::MAX] {
        let mut c = class.clone();
        c[desc_at..desc_at + 2].copy_from_slice(&bad.to_be_bytes());
        let r = rewrite_class(&c, &mut rewrite_common::Recorder::default());
        assert!(matches!(r, Err(RewriteError::Malformed(_))), "descriptor index {bad}: {:?}", r.map(|o| o.stats));
    }
}

/// A class that comes to the rewriter with lucce's probes in it (another agent transformed
/// lucce's rewrite) gets them turned off and fresh ones put in: it runs as the original does,
/// verified, and no old probe runs (the stub counts entries of the first rewrite's ids).
#[test]
fn a_rewritten_class_is_rewritten_again_over_its_old_probes() {
    for major in [49u16, 50] {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("stubsrc/lucce");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("Runtime.java"),
            "package lucce;\npublic final class Runtime {\n\
             static int old;\n\
             static { java.lang.Runtime.getRuntime().addShutdownHook(new Thread(() -> System.out.println(\"old probes run: \" + old))); }\n\
             public static long enter(int m) { if (m < 50000) old++; return 0; }\n\
             public static long version() { return 0; }\n\
             public static int leaf(int m) { if (m < 50000) old++; return m; }\n\
             public static void call(int s, long c, long v) { if (s < 50000) old++; }\n\
             public static void alloc(int s, long c, long v) { if (s < 50000) old++; }\n\
             public static void drop() {}\n}\n",
        )
        .unwrap();
        let stub = tmp.path().join("stub");
        compile(&[src.join("Runtime.java")], &stub, &[]);
        let once = rewrite_class(&old_class(major), &mut Recorder { id_base: 40000, ..Recorder::default() }).unwrap();
        let once = once.bytes.expect("rewritten");
        let again = rewrite_class(&once, &mut Recorder { id_base: 50000, ..Recorder::default() }).unwrap();
        assert!(again.stats.probes_renewed && again.stats.unchanged_reason.is_none(), "{major}: {:?}", again.stats);
        assert_eq!(again.stats.methods_rewritten, 7);
        let again = again.bytes.expect("rewritten again");
        check_class(&again).unwrap_or_else(|e| panic!("{major}: {e}"));
        let (orig, new) = (tmp.path().join("orig"), tmp.path().join("new"));
        std::fs::create_dir_all(&orig).unwrap();
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(orig.join("Old.class"), old_class(major)).unwrap();
        std::fs::write(new.join("Old.class"), &again).unwrap();
        let (o, _) = run_java(&[&orig, &stub], "Old");
        let (n, e) = run_java(&[&new, &stub], "Old");
        assert_eq!(format!("{o}old probes run: 0\n"), n, "{major}: {e}");
    }
}

/// The load hook reads the clocks only when a summary will report the rewrite time (they cost
/// two system calls per class), and rewrites the same either way.
#[test]
fn hook_times_classes_only_for_a_summary() {
    use lucce_agent::hook::{Arrival, HookState};
    use lucce_agent::options::Options;
    use lucce_agent::registry::Registry;
    use lucce_agent::summary::Stats;
    use std::sync::Mutex;

    let class = old_class(50);
    let run = |opts: &str| {
        let options = Options::parse(opts).unwrap();
        let (registry, stats, early) = (Registry::new(), Mutex::new(Stats::default()), Mutex::new(None));
        let hook = HookState { options: &options, registry: &registry, stats: &stats, recorder: None, hooked_early: &early, cache: None };
        let mut out = Vec::new();
        // SAFETY: malloc returns null or `n` writable bytes, as `on_class` requires.
        let new = hook.on_class(Some("Old"), Arrival::Load, &class, |n| unsafe { libc::malloc(n) }.cast()).unwrap();
        // SAFETY: `on_class` filled `new.1` bytes at `new.0`, a malloc block freed once copied.
        unsafe {
            out.extend_from_slice(std::slice::from_raw_parts(new.0, new.1 as usize));
            libc::free(new.0.cast());
        }
        let s = stats.into_inner().unwrap();
        (out, s.classes_rewritten, s.rewrite_ns_total)
    };
    let (timed, rewritten, ns) = run("");
    assert_eq!(rewritten, 1);
    assert!(ns > 0, "the default summary reports the rewrite time");
    assert!(run("summary=off,json=/dev/null").2 > 0, "a JSON summary reports it too");
    let (untimed, rewritten, ns) = run("summary=off");
    assert_eq!((rewritten, ns), (1, 0));
    assert_eq!(timed, untimed);
}

#[test]
fn old_class_files_with_jsr_ret_verify_and_run() {
    for major in [45u16, 46, 49] {
        let tmp = tempfile::tempdir().unwrap();
        let stub = stub_runtime(tmp.path());
        let (orig, new) = (tmp.path().join("orig"), tmp.path().join("new"));
        std::fs::create_dir_all(&orig).unwrap();
        std::fs::write(orig.join("Old.class"), old_class(major)).unwrap();
        let mut reg = Recorder {
            id_base: 40000,
            ..Recorder::default()
        }; // ids need ldc_w
        let stats = rewrite_tree(&orig, &new, &mut reg);
        assert_eq!(stats[0].methods_with_code, 8);
        assert_eq!(stats[0].methods_rewritten, 7);
        assert_eq!(
            stats[0].skipped,
            vec![("huge()V".to_string(), SkipReason::TooManyLocals)]
        );
        // Line rule: exact start_pc match first in table order; else the largest below.
        let f_id = reg.methods.iter().position(|m| m.1 == "f").unwrap() as u32 + 40000;
        let f_sites: Vec<_> = reg.sites.iter().filter(|s| s.0 == f_id).collect();
        assert_eq!(f_sites.len(), 1);
        assert_eq!(
            (f_sites[0].1, f_sites[0].2, f_sites[0].3),
            (SiteKind::Call, 24, 21)
        );
        let h_id = reg.methods.iter().position(|m| m.1 == "g").unwrap() as u32 + 40000;
        assert!(reg.sites.iter().filter(|s| s.0 == h_id).all(|s| s.3 == -1));

        let (o, _) = run_java(&[&orig, &stub], "Old");
        let (n, e) = run_java(&[&new, &stub], "Old");
        // The subroutine increments local 0 before f multiplies it: f(3) = 8; h(5) = 1/5 = 0.
        assert_eq!(o, "sub\n8\nsub\n-1\n42\n0\n2\n1\n1\n99\n7\n0\n8\n0\n");
        assert_eq!(o, n, "{e}");
    }
}

/// Class `name` whose `main` has the line table `lines` (in table order) over
/// `0: where; 3: where; 6: iconst_0; 7: pop; 8: where; 11: return`. `where` prints its caller's
/// line, as the JVM gives it.
fn where_lines_class(name: &str, lines: Vec<(u16, u16)>) -> Vec<u8> {
    let mut a = Asm::default();
    let out = a.field("java/lang/System", "out", "Ljava/io/PrintStream;");
    let println = a.method("java/io/PrintStream", "println", "(I)V");
    let throwable = a.class("java/lang/Throwable");
    let init = a.method("java/lang/Throwable", "<init>", "()V");
    let trace = a.method("java/lang/Throwable", "getStackTrace", "()[Ljava/lang/StackTraceElement;");
    let line = a.method("java/lang/StackTraceElement", "getLineNumber", "()I");
    let w = a.method(name, "where", "()V");
    let [w0, w1] = u2(w);
    let ms = vec![
        M {
            access: 9,
            name: "main",
            desc: "([Ljava/lang/String;)V",
            max_stack: 1,
            max_locals: 1,
            code: vec![0xB8, w0, w1, 0xB8, w0, w1, 0x03, 0x57, 0xB8, w0, w1, 0xB1],
            exc: vec![],
            lines,
        },
        M {
            access: 9,
            name: "where",
            desc: "()V",
            max_stack: 3,
            max_locals: 0,
            code: [
                vec![0xB2],
                u2(out).to_vec(),
                vec![0xBB],
                u2(throwable).to_vec(),
                vec![0x59, 0xB7],
                u2(init).to_vec(),
                vec![0xB6],
                u2(trace).to_vec(),
                vec![0x04, 0x32, 0xB6],
                u2(line).to_vec(),
                vec![0xB6],
                u2(println).to_vec(),
                vec![0xB1],
            ]
            .concat(),
            exc: vec![],
            lines: vec![(0, 100)],
        },
    ];
    a.build(49, name, ms)
}

/// Rewrites the class `name` (both ways), checks the sites' lines of its `main` in the registry
/// against `sites` ((bci, line)) and that it prints `expected`, as the original does.
fn assert_lines_kept(name: &str, class: Vec<u8>, sites: &[(u32, i32)], expected: &str) {
    for general in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let stub = stub_runtime(tmp.path());
        let (orig, new) = (tmp.path().join("orig"), tmp.path().join("new"));
        std::fs::create_dir_all(&orig).unwrap();
        std::fs::write(orig.join(format!("{name}.class")), &class).unwrap();
        let mut reg = Recorder { general, ..Recorder::default() };
        let stats = rewrite_tree(&orig, &new, &mut reg);
        assert_eq!(stats[0].methods_rewritten, 2);
        let main_id = reg.methods.iter().position(|m| m.1 == "main").unwrap() as u32;
        let lines: Vec<_> = reg.sites.iter().filter(|s| s.0 == main_id).map(|s| (s.2, s.3)).collect();
        assert_eq!(lines, sites, "general: {general}");
        let (o, _) = run_java(&[&orig, &stub], name);
        let (n, e) = run_java(&[&new, &stub], name);
        assert_eq!(o, expected);
        assert_eq!(o, n, "general: {general}; {e}");
    }
}

/// Several line entries at one start_pc (Clojure's compiler writes them), at the method's first
/// instruction, at an invoke and at a plain instruction, in interleaved table order: HotSpot
/// gives an instruction there the first in table order, and one after it (up to the next
/// start_pc) the last. The rewritten class must give the lines the original gives, though probes
/// now come before the first instruction and the invoke (moved to the probe's start, the entries
/// gave the instruction after it the group's last line: 20 and 40 here); and the sites' lines in
/// the registry are those lines.
#[test]
fn duplicate_line_entries_keep_the_jvms_lines() {
    let lines = vec![(0, 10), (3, 30), (0, 20), (3, 40), (6, 50), (6, 60)];
    assert_lines_kept("Dup", where_lines_class("Dup", lines), &[(0, 10), (3, 30), (8, 60)], "10\n30\n60\n");
}

/// A table that starts with (pc 0, line 0), as JRuby's generated constructors do: HotSpot drops
/// those entries (it stores deltas from (0, 0) and skips a zero one), so an instruction before
/// the next entry has line -1, and an entry group at pc 0 gives the first line after them. The
/// sites must say so too, and the rewritten table must keep them droppable: moved past the entry
/// probe with the rest of their group, they gave line 0 (found on JRuby: 28 mismatches).
#[test]
fn leading_zero_line_entries_are_the_jvms_minus_one() {
    let lines = vec![(0, 0), (0, 0), (3, 30)];
    assert_lines_kept("Zero", where_lines_class("Zero", lines), &[(0, -1), (3, 30), (8, 30)], "-1\n30\n30\n");
    // Only leading ones are lost: a later (0, 0) is a delta like any other.
    let lines = vec![(0, 0), (0, 20), (0, 25), (8, 0), (6, 0), (0, 0)];
    assert_lines_kept("ZeroGroup", where_lines_class("ZeroGroup", lines), &[(0, 20), (3, 0), (8, 0)], "20\n0\n0\n");
}

/// xorshift64*: deterministic randomness without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn fuzz_one(bytes: &[u8]) {
    let rewrite = |general: bool| {
        let mut reg = Recorder { general, ..Recorder::default() };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rewrite_class(bytes, &mut reg)));
        r.unwrap_or_else(|_| panic!("panic on input {:?}", bytes))
    };
    let (r, general) = (rewrite(false), rewrite(true));
    // The two paths of the rewriter skip the same methods and give the same class when they
    // skip none (a method the direct path rejects after taking its ids leaves their constants
    // in the pool).
    if let (Ok(d), Ok(g)) = (&r, &general) {
        let skipped = |o: &lucce_agent::rewrite::RewriteOutcome| o.stats.skipped.iter().map(|s| s.0.clone()).collect::<Vec<_>>();
        assert_eq!(skipped(d), skipped(g), "input {:?}", bytes);
        if d.stats.skipped.is_empty() {
            assert!(d.bytes == g.bytes, "the paths differ on input {:?}", bytes);
        }
    }
    assert_eq!(r.is_ok(), general.is_ok(), "input {:?}", bytes);
    // The rewrite of a class a recording leaves out (drops at its handlers only) too.
    let left = std::panic::catch_unwind(|| drop_at_handlers_with(bytes, |parts| parts.concat())).unwrap_or_else(|_| panic!("panic leaving out input {:?}", bytes));
    if let (Ok((Some(b), _)), true) = (left, check_class(bytes).is_ok()) {
        check_class(&b).unwrap_or_else(|e| panic!("bad output left out ({e}) for input {:?}", bytes));
    }
    // Methods the rewriter skips are copied as they are, so the output is only held to the
    // structural check when the input passes it.
    if let (Ok(o), true) = (r, check_class(bytes).is_ok()) {
        if let Some(b) = o.bytes {
            // Output of a mutated-but-parseable class still has to be structurally sound.
            check_class(&b).unwrap_or_else(|e| panic!("bad output ({e}) for input {:?}", bytes));
        }
    }
}

#[test]
fn fuzz_random_and_mutated_classes_never_panic() {
    let mut seeds = vec![old_class(46), old_class(49)];
    // A javac-compiled class with frames too, when javac is around.
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("F.java");
    std::fs::write(
        &src,
        "public class F { Object o; F(int a) { super(); o = a > 0 ? new StringBuilder(\"x\") : null; }\n\
         static int s(int v, String t) { switch (v) { case 1: return t.length(); case 9: return 2; default: try { return Integer.parseInt(t); } catch (RuntimeException e) { return -1; } finally { v++; } } }\n\
         static long l(long[] a) { long r = 0; for (long x : a) { r += x > 3 ? x : -x; } return r; } }",
    )
    .unwrap();
    compile(&[src], tmp.path(), &[]);
    seeds.push(std::fs::read(tmp.path().join("F.class")).unwrap());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..2000 {
        let n = rng.below(200);
        let v: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        fuzz_one(&v);
        let mut w = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52];
        w.extend_from_slice(&v);
        fuzz_one(&w);
    }
    for i in 0..6000 {
        let mut b = seeds[i % seeds.len()].clone();
        match rng.below(4) {
            0 => {
                for _ in 0..1 + rng.below(4) {
                    let k = rng.below(b.len());
                    b[k] = rng.next() as u8;
                }
            }
            1 => {
                let k = rng.below(b.len());
                b.truncate(k);
            }
            2 => {
                let k = rng.below(b.len());
                b[k] = b[k].wrapping_add(1 + rng.below(3) as u8);
            }
            _ => {
                let k = rng.below(b.len());
                b.insert(k, rng.next() as u8);
            }
        }
        fuzz_one(&b);
    }
}
