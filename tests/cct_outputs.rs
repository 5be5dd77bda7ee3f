//! The outputs of `lucce cct`, `lucce flame` and `lucce diff`, run as the real binary: golden
//! files for the text tree, collapsed stacks and speedscope JSON (the ParCCT paper's example),
//! the SVG checked structurally, diff values, and bad input. `LUCCE_BLESS=1` rewrites the
//! golden files.

mod cct_support;

use std::path::{Path, PathBuf};

use cct_support::*;
use lucce_log_format::EventKind;

fn paper_store(dir: &Path) -> PathBuf {
    let path = dir.join("paper");
    let mut events = paper_events(&[1, 3, 0, 2]);
    // A second thread with one mark, so thread roots and kinds show up in the outputs.
    events.push(PathEvent { thread: 1, vias: vec![3, 0], kind: EventKind::Mark });
    record(&path, &paper_program(), &events, 3);
    path
}

fn golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("LUCCE_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (run with LUCCE_BLESS=1 to create it)", path.display()));
    assert_eq!(got, want, "output differs from {}", path.display());
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = lucce(args);
    assert_eq!(code, 0, "lucce {args:?} failed: {err}");
    out
}

#[test]
fn golden_text_collapsed_and_speedscope() {
    let dir = tempfile::tempdir().unwrap();
    let s = paper_store(dir.path());
    let s = s.to_str().unwrap();
    for workers in ["1", "2"] {
        let w = ["--workers", workers, "--packet", "2"];
        let run = |args: &[&str]| ok(&[args, &w[..]].concat());
        golden("paper-calls.txt", &run(&["cct", s, "--kind", "sample"]));
        golden("paper-threads-lines.txt", &run(&["cct", s, "--threads", "--lines"]));
        golden("paper-reverse.txt", &run(&["cct", s, "--kind", "sample", "--reverse"]));
        golden("paper-filtered.txt", &run(&["cct", s, "--include", r"\.d$", "--exclude", r"\.e$", "--min-percent", "15", "--depth", "2"]));
        golden("paper.collapsed", &run(&["flame", s, "--format", "collapsed"]));
        golden("paper-lines.collapsed", &run(&["flame", s, "--format", "collapsed", "--lines", "--threads"]));
        golden("paper.speedscope.json", &run(&["flame", s, "--format", "speedscope", "--title", "paper"]));
        golden("paper-threads.speedscope.json", &run(&["flame", s, "--format", "speedscope", "--threads", "--lines", "--title", "paper"]));
    }
    let json: serde_json::Value = serde_json::from_str(&ok(&["flame", s, "--format", "speedscope"])).unwrap();
    assert_eq!(json["$schema"], "https://www.speedscope.app/file-format-schema.json");
    let p = &json["profiles"][0];
    assert_eq!(p["type"], "sampled");
    assert_eq!(p["samples"].as_array().unwrap().len(), p["weights"].as_array().unwrap().len());
    assert_eq!(p["weights"].as_array().unwrap().iter().map(|w| w.as_u64().unwrap()).sum::<u64>(), 11);
}

#[test]
fn svg_is_well_formed_with_one_rect_per_node_and_its_script() {
    let dir = tempfile::tempdir().unwrap();
    let s = paper_store(dir.path());
    let out = dir.path().join("f.svg");
    ok(&["flame", s.to_str().unwrap(), "-o", out.to_str().unwrap(), "--min-width", "0", "--title", "a <paper> & co"]);
    let text = std::fs::read_to_string(&out).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let rects: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("rect")).collect();
    // root, a, b, c, c.d, c.d.e, c.d.b, d, d.e, d.b: 10 nodes (the mark in thread 1 is a.d.e).
    assert_eq!(rects.len(), 10);
    let frames: Vec<_> = doc.descendants().filter(|n| n.attribute("class") == Some("f")).collect();
    assert_eq!(frames.len(), rects.len(), "one frame group per rect");
    for g in &frames {
        assert_eq!(g.children().filter(|c| c.has_tag_name("rect")).count(), 1);
        assert!(g.children().any(|c| c.has_tag_name("title")));
    }
    let widest = frames.iter().find(|g| g.attribute("data-d") == Some("0")).unwrap();
    assert_eq!(widest.attribute("data-n"), Some("11"));
    let script = doc.descendants().find(|n| n.has_tag_name("script")).expect("a script").text().unwrap_or("");
    for needle in ["function zoom", "function search", "function reset", "RegExp", "addEventListener('click'"] {
        assert!(script.contains(needle), "script lacks {needle}");
    }
    assert!(doc.descendants().any(|n| n.has_tag_name("text") && n.text() == Some("a <paper> & co")));
}

#[test]
fn diff_is_100_percent_on_identical_input_and_right_on_a_hand_computed_pair() {
    let dir = tempfile::tempdir().unwrap();
    let s = paper_store(dir.path());
    let out = ok(&["diff", s.to_str().unwrap(), s.to_str().unwrap()]);
    assert!(out.contains("degree of overlap          100.00%"), "{out}");
    assert!(out.contains("100.00% of A's hot edges are hot in B"), "{out}");
    // Copies recorded separately (different ids) match by their frames.
    let s2 = paper_store(&dir.path().join("again"));
    assert!(ok(&["diff", s.to_str().unwrap(), s2.to_str().unwrap()]).contains("overlap          100.00%"));

    // a() { b(); c(); }.  A: a ×2, a.b ×2.   B: a ×1, a.b ×1, a.c ×2.
    // rc in A: a .5, a.b .5; in B: a .25, a.b .25, a.c .5.
    // overlap = min(.5,.25) + min(.5,.25) = 50%.
    // T = 0.1: hot(A) = {a, a.b}; hot(B) = {a, a.b, a.c}: A in B 2/2, B in A 2/3.
    // T = 0.6: hot(A) = {a, a.b} (≥ 1.2); hot(B) = {a.c} (≥ 1.2): A in B 0/2, B in A 0/1.
    let prog = program(&[("a", &[1, 2]), ("b", &[]), ("c", &[])]);
    let ev = |vias: Vec<usize>| PathEvent { thread: 0, vias, kind: EventKind::Mark };
    let a = dir.path().join("A");
    let b = dir.path().join("B");
    record(&a, &prog, &[ev(vec![]), ev(vec![0]), ev(vec![]), ev(vec![0])], 4096);
    record(&b, &prog, &[ev(vec![1]), ev(vec![]), ev(vec![0]), ev(vec![1])], 4096);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = ok(&["diff", a, b]);
    assert!(out.contains("degree of overlap          50.00%"), "{out}");
    assert!(out.contains("100.00% of A's hot edges are hot in B (2 of 2)"), "{out}");
    assert!(out.contains("66.67% of B's hot edges are hot in A (2 of 3)"), "{out}");
    let out = ok(&["diff", a, b, "--threshold", "0.6"]);
    assert!(out.contains("0.00% of A's hot edges are hot in B (0 of 2)"), "{out}");
    assert!(out.contains("0.00% of B's hot edges are hot in A (0 of 1)"), "{out}");
    // Symmetric overlap.
    assert!(ok(&["diff", b, a]).contains("degree of overlap          50.00%"));
}

fn fails_cleanly(args: &[&str], want: &str) {
    let (code, out, err) = lucce(args);
    assert_eq!(code, 2, "lucce {args:?}: exit {code}, stdout {out}, stderr {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(want), "stderr {err:?} lacks {want:?}");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    record(&empty, &paper_program(), &[], 4096);
    let s = paper_store(dir.path());
    let foreign = dir.path().join("foreign.txt");
    std::fs::write(&foreign, "hello").unwrap();
    let (empty, s, foreign) = (empty.to_str().unwrap(), s.to_str().unwrap(), foreign.to_str().unwrap());
    for cmd in [&["cct"][..], &["flame", "--format", "collapsed"]] {
        let run = |store: &str, extra: &[&str], want: &str| fails_cleanly(&[&cmd[..1], &[store], &cmd[1..], extra].concat(), want);
        run(empty, &[], "the store has no events");
        run(s, &["--kind", "alloc"], "none of its 11 events is of kind alloc");
        run(foreign, &[], "not a lucce store");
        run(s, &["--include", "("], "not a regular expression");
        run(s, &["--include", "nothing-matches-this"], "no event is left");
    }
    fails_cleanly(&["diff", s, empty], "the store has no events");
    fails_cleanly(&["diff", foreign, s], "not a lucce store");
    fails_cleanly(&["diff", s, s, "--threshold", "2"], "--threshold");
    fails_cleanly(&["cct", s, "--workers", "0"], "--workers");
}

#[test]
fn summary_gives_the_size_of_the_papers_tree() {
    let dir = tempfile::tempdir().unwrap();
    let s = paper_store(dir.path());
    let out = ok(&["cct", s.to_str().unwrap(), "--kind", "sample", "--summary"]);
    let field = |name: &str| {
        out.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("no {name:?} in {out}")).trim().to_string()
    };
    // root{a:1{b:2,c:1{d:1{e:1,b:1}},d:1{e:1,b:1}}}: 10 calls in 9 contexts, a→c→d→e the deepest.
    assert_eq!(field("events"), "10");
    assert_eq!(field("contexts (nodes)"), "9");
    assert_eq!(field("max depth"), "4");
    assert_eq!(field("threads"), "2");
}
