//! End to end: compile the Java fixture (agent/tests/rewrite_java/features plus a generated class
//! with switches at every alignment, jumps that grow past 32 KiB and a method near 64 KiB),
//! rewrite every class, and run original and rewritten code under `java -Xverify:all` with a stub
//! runtime class. Outputs must be identical.

mod rewrite_common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use lucce_agent::rewrite::check::check_class;
use lucce_agent::rewrite::intrinsics::may_be_intrinsic;
use lucce_agent::rewrite::{drop_at_handlers_with, SkipReason};
use rewrite_common::*;

/// A statement of 8 bytes of bytecode (iload, bipush, imul, bipush, iadd, istore).
const ARITH: &str = "x = x * 31 + 7;";

fn gen_source() -> String {
    let mut s = String::from(
        "public class Gen {\n  static int sink;\n  static void f(int v) { sink += v; }\n",
    );
    // Switches at all four alignments, with and without a probe (an invoke) before them.
    for k in 0..4 {
        for (tag, pre) in [("", ""), ("c", "f(a);")] {
            let incs = "a++;".repeat(k);
            writeln!(
                s,
                "  static int sw{tag}{k}(int v) {{ int a = v; {pre}{incs} int r;\n\
                 switch (a) {{ case 1: r = 11; break; case 2: r = 12; break; case 3: f(a); r = 13; break; case 4: r = 14; break; default: r = -1; }}\n\
                 switch (a) {{ case -5: return r + 100; case 3: return r + 300; case 999: return r + 999; default: return r; }} }}"
            )
            .unwrap();
        }
    }
    // Forward conditionals over a body that crosses 32 KiB only after probes are inserted; locals
    // of many types (including a String built with new/<init>) must be in the inferred frames.
    let body = |n_arith: usize, n_calls: usize| {
        let mut b = String::new();
        let every = n_arith / n_calls.max(1);
        for i in 0..n_arith {
            b.push_str(ARITH);
            if i % every == 0 {
                b.push_str("f(x);");
            }
            if i % 8 == 7 {
                b.push('\n');
            }
        }
        b
    };
    writeln!(
        s,
        "  static String bigIf(int a, String str, long l, double d, int[] arr) {{\n\
         int x = a; long acc = l; String t = new StringBuilder(str).append('!').toString(); double dd = d; Object o = arr; int[] w = new int[2];\n\
         if (a > 0 && x != 5) {{\n{}\n acc += x; }}\n\
         return t + x + acc + dd + (o == null) + w.length; }}",
        // x is local 6 here: 10 bytes per statement.
        body(2800, 700)
    )
    .unwrap();
    writeln!(
        s,
        "  static long bigWhile(int n) {{ int i = 0; int x = 1; long acc = 0;\n\
         while (i < n) {{ try {{\n{}\n acc += 100 / (x & 3); }} catch (ArithmeticException e) {{ acc -= 1; }} finally {{ acc += 2; }}\n acc += x; i++; }}\n return acc; }}",
        body(3300, 700)
    )
    .unwrap();
    // Already past 32 KiB in javac's output (javac emits goto_w itself).
    writeln!(
        s,
        "  static int fat(int a) {{ int x = a; if (a > 3) {{\n{}\n }} else {{ x = -x; }} return x; }}",
        body(4300, 50)
    )
    .unwrap();
    // Near the 64 KiB limit: fits as compiled, not with probes; must stay byte-identical.
    writeln!(
        s,
        "  static int near64k(int a) {{ int x = a;\n{}\n return x; }}",
        body(7990, 150)
    )
    .unwrap();
    s.push_str("  static String run() {\n    StringBuilder b = new StringBuilder();\n");
    s.push_str("    for (int v = -6; v < 8; v++) b.append(sw0(v)).append(sw1(v)).append(sw2(v)).append(sw3(v)).append(swc0(v)).append(swc1(v)).append(swc2(v)).append(swc3(v)).append(' ');\n");
    s.push_str("    b.append(sw3(999)).append(' ').append(bigIf(3, \"s\", 5L, 2.5, null)).append(' ').append(bigIf(-1, \"q\", 1L, 0.5, new int[1])).append(' ').append(bigIf(5, \"f\", 0L, 0.0, null));\n");
    s.push_str("    b.append(' ').append(bigWhile(3)).append(' ').append(bigWhile(0)).append(' ').append(fat(5)).append(' ').append(fat(1)).append(' ').append(near64k(2)).append(' ').append(sink);\n");
    s.push_str("    return b.toString();\n  }\n}\n");
    s
}

fn fixture_sources(dir: &Path) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/rewrite_java/features");
    let gen_dir = dir.join("gensrc");
    std::fs::create_dir_all(&gen_dir).unwrap();
    let main = gen_dir.join("Main.java");
    std::fs::copy(src.join("Main.java"), &main).unwrap();
    let gen = gen_dir.join("Gen.java");
    std::fs::write(&gen, gen_source()).unwrap();
    vec![main, gen]
}

fn count_in_javap(dir: &Path, class: &str, needle: &str) -> usize {
    let out = run_ok(
        Command::new(tool("javap").expect("javap"))
            .arg("-c")
            .arg("-p")
            .arg("-cp")
            .arg(dir)
            .arg(class),
    );
    String::from_utf8_lossy(&out.stdout).matches(needle).count()
}

/// In `class` under `dir`, drop probes are exactly where they are due, in both paths of the
/// rewriter (the big methods take the general one): after the invokes of the methods the JIT may
/// replace by intrinsics (here StringBuilder's constructors, `append`s and `toString`), and first
/// in every exception handler. Returns how many of each there are. `probed`: the class got
/// lucce's probes (not only the drops of a class a recording leaves out, which has none after
/// calls).
fn drops_where_due(dir: &Path, class: &str, probed: bool) -> (u32, u32) {
    let out = run_ok(Command::new(tool("javap").expect("javap")).args(["-c", "-p", "-cp"]).arg(dir).arg(class));
    let text = String::from_utf8_lossy(&out.stdout);
    let is_drop = |line: &str| line.contains("// Method lucce/Runtime.drop:()V");
    // Whether the instruction `line` calls a method the JIT may replace by an intrinsic; None
    // when it calls nothing (javap leaves out the owner of a method of the class itself).
    let intrinsic_call = |line: &str| {
        let (_, called) = line.split_once("// Method ").or_else(|| line.split_once("// InterfaceMethod "))?;
        let (owner_name, desc) = called.split_once(':')?;
        let (owner, name) = owner_name.rsplit_once('.').unwrap_or(("", owner_name));
        Some(may_be_intrinsic(owner.as_bytes(), name.trim_matches('"').as_bytes(), desc.as_bytes()))
    };
    let (mut after_calls, mut at_handlers) = (0, 0);
    // javap prints each method's code, then its exception table.
    for method in text.split("    Code:\n").skip(1) {
        let lines: Vec<&str> = method.lines().collect();
        // `   12: invokevirtual #7   // Method java/lang/StringBuilder.append:(C)Ljava/lang/StringBuilder;`
        let insn_at = |line: &str| line.trim_start().split_once(": ").and_then(|(o, _)| o.parse::<u32>().ok());
        // `        12    20    23   Class java/lang/Exception` (from, to, target, type)
        let handlers: Vec<u32> = match lines.iter().position(|l| l.trim() == "Exception table:") {
            Some(t) => lines[t + 2..].iter().map_while(|l| l.split_whitespace().nth(2)?.parse().ok()).collect(),
            None => Vec::new(),
        };
        let mut prev: Option<&str> = None;
        for line in lines.iter().take_while(|l| insn_at(l).is_some()) {
            let at = insn_at(line).unwrap();
            if handlers.contains(&at) {
                assert!(is_drop(line), "{class}: handler at {at} starts with {line}");
                at_handlers += 1;
            } else if is_drop(line) {
                assert_eq!(prev.and_then(intrinsic_call), Some(true), "{class}: a drop at {at} after {prev:?}");
                after_calls += 1;
            } else if let Some(p) = prev.filter(|p| probed && !p.contains("lucce/Runtime")) {
                assert_ne!(intrinsic_call(p), Some(true), "{class}: no drop after {p}");
            }
            prev = Some(line);
        }
    }
    (after_calls, at_handlers)
}

fn end_to_end(release: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let stub = stub_runtime(tmp.path());
    let mut sources = fixture_sources(tmp.path());
    if release == "7" {
        // No lambdas before 8: only the generated class, with a plain driver.
        let m = tmp.path().join("gensrc/Main.java");
        std::fs::write(&m, "public class Main { public static void main(String[] a) { System.out.println(Gen.run()); } }").unwrap();
        sources = vec![m, tmp.path().join("gensrc/Gen.java")];
    }
    let orig = tmp.path().join("orig");
    compile(&sources, &orig, &["--release", release]);
    let new = tmp.path().join("new");
    let mut reg = Recorder::default();
    let stats = rewrite_tree(&orig, &new, &mut reg);

    // Every method rewritten; near64k, whose call probes do not fit, with an entry probe only.
    let mut entry_only = Vec::new();
    for s in &stats {
        assert!(s.unchanged_reason.is_none());
        assert!(s.skipped.is_empty(), "{}: skipped {:?}", s.class_name, s.skipped);
        for (m, why) in &s.entry_only {
            entry_only.push((s.class_name.clone(), m.clone(), *why));
        }
    }
    assert_eq!(entry_only, vec![("Gen".to_string(), "near64k(I)I".to_string(), SkipReason::CodeTooLarge)]);
    // Registered once (no ids taken for probes that cannot fit), as a leaf: no sites.
    let near64k: Vec<u32> = (0..).zip(&reg.methods).filter(|(_, m)| m.1 == "near64k").map(|(i, _)| reg.id_base + i).collect();
    assert_eq!(near64k.len(), 1);
    assert!(reg.sites.iter().all(|s| s.0 != near64k[0]), "near64k has sites");
    let ng = std::fs::read(new.join("Gen.class")).unwrap();
    let sum = check_class(&ng).unwrap();
    assert!(sum.runtime_calls > 0);
    // Branches widened by the rewriter (javac's own goto_w in fat() counts in both).
    assert!(
        count_in_javap(&new, "Gen", "goto_w") > count_in_javap(&orig, "Gen", "goto_w") + 2,
        "expected widened branches"
    );
    // Each method got an entry probe; each invoke a call probe.
    let total_methods: u32 = stats.iter().map(|s| s.methods_rewritten).sum();
    assert_eq!(reg.methods.len() as u32, total_methods);
    // Both paths of the rewriter ran (the direct one for most methods; the general one for the
    // big methods and the switches before any probe), and the general path alone gives the same
    // classes and registry calls.
    let direct: u32 = stats.iter().map(|s| s.methods_direct).sum();
    assert!(direct > 0 && direct < total_methods, "{direct} of {total_methods} methods direct");
    let general = tmp.path().join("general");
    let mut general_reg = Recorder { general: true, ..Recorder::default() };
    let general_stats = rewrite_tree(&orig, &general, &mut general_reg);
    assert_eq!(general_stats.iter().map(|s| s.methods_direct).sum::<u32>(), 0);
    assert_eq!((&general_reg.methods, &general_reg.sites), (&reg.methods, &reg.sites));
    let mut files = Vec::new();
    class_files(&new, &mut files);
    for f in files {
        let g = general.join(f.strip_prefix(&new).unwrap());
        assert!(std::fs::read(&f).unwrap() == std::fs::read(&g).unwrap(), "{}: the paths differ", f.display());
    }

    let (gen_calls, gen_handlers) = drops_where_due(&new, "Gen", true);
    assert!(gen_calls > 5 && gen_handlers >= 2, "Gen: {gen_calls} drops after calls, {gen_handlers} at handlers");
    let (_, main_handlers) = drops_where_due(&new, "Main", true);
    // Release 7's Main is a one-line driver.
    assert!(release == "7" || main_handlers >= 4, "Main: {main_handlers} drops at handlers");

    // The same classes as a recording that leaves them out rewrites them: drops first in their
    // handlers, nothing else.
    let left = tmp.path().join("left");
    let mut files = Vec::new();
    class_files(&orig, &mut files);
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let (out, _) = drop_at_handlers_with(&bytes, |parts| parts.concat()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if let Some(b) = &out {
            check_class(b).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
        let dest = left.join(f.strip_prefix(&orig).unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, out.as_deref().unwrap_or(&bytes)).unwrap();
    }
    let (left_calls, left_handlers) = drops_where_due(&left, "Gen", false);
    assert_eq!((left_calls, left_handlers), (0, gen_handlers), "Gen, left out");
    assert_eq!(count_in_javap(&left, "Gen", "lucce/Runtime"), gen_handlers as usize, "Gen, left out: only the drops");
    assert_eq!(drops_where_due(&left, "Main", false), (0, main_handlers), "Main, left out");

    let (o_out, o_err) = run_java(&[&orig, &stub], "Main");
    for dir in [&new, &left] {
        let (n_out, n_err) = run_java(&[dir, &stub], "Main");
        assert!(!n_err.contains("VerifyError"), "{n_err}");
        assert_eq!(o_out, n_out, "{}: stderr:\n{o_err}\n---\n{n_err}", dir.display());
    }
    assert!(o_out.lines().count() > if release == "7" { 0 } else { 10 });
}

#[test]
fn java17_end_to_end() {
    end_to_end("17");
}

#[test]
fn java8_end_to_end() {
    end_to_end("8");
}

#[test]
fn java7_end_to_end() {
    end_to_end("7");
}
