//! Runs small Java programs (tests/scripts/*.java) on a real JVM with and without the lucce agent
//! and requires identical behaviour: same stdout, same stderr, same exit code, under
//! `-Xverify:all` (every class verified, the JDK's included).
//!
//! Needs a JDK (JAVA_HOME, else /usr/lib/jvm/java-17-openjdk-amd64, else `java`/`javac` on PATH).
//! The agent library is built by the test itself (`cargo build -p lucce-agent`, same profile and
//! target directory) unless LUCCE_AGENT_LIB points at one.

mod jvm_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jvm_support::{agent_arg, java_sources, no_java_options, process_dir, run, tool, tool_ok, Outcome};

/// Compiles every tests/scripts/*.java once into a temporary directory.
fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = process_dir("scripts");
        let sources = java_sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts"));
        tool_ok(Command::new(tool("javac")).arg("-g").arg("-d").arg(&dir).args(&sources));
        dir
    })
}

/// Runs `java [agent] -Xverify:all -cp CLASSES main`, with a timeout.
fn run_java(main: &str, agent_options: Option<&str>) -> Outcome {
    let mut cmd = Command::new(tool("java"));
    no_java_options(&mut cmd);
    if let Some(opts) = agent_options {
        cmd.arg(agent_arg(opts));
    }
    cmd.arg("-Xverify:all").arg("-Xss4m").arg("-cp").arg(classes()).arg(main);
    run(cmd, &format!("{main} (agent: {agent_options:?})"))
}

fn summary_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("summary {}: {e}", path.display()));
    serde_json::from_str(&text).expect("summary JSON")
}

/// The program behaves identically with the agent; returns the agent's JSON summary.
fn same_with_agent(main: &str) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("summary.json");
    let log = tmp.path().join("agent.log");
    let opts = format!("summary={},log={}", json.display(), log.display());
    let base = run_java(main, None);
    let with = run_java(main, Some(&opts));
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(base.code, with.code, "{main}: exit code differs; agent log:\n{log_text}");
    assert_eq!(base.stdout, with.stdout, "{main}: stdout differs; agent log:\n{log_text}");
    assert_eq!(base.stderr, with.stderr, "{main}: stderr differs; agent log:\n{log_text}");
    assert!(!base.stdout.is_empty(), "{main}: no output at all");
    let s = summary_json(&json);
    let with_code = s["methods_with_code"].as_u64().unwrap();
    let rewritten = s["methods_rewritten"].as_u64().unwrap();
    assert!(with_code > 1000, "{main}: only {with_code} methods with code seen: {s}");
    assert!(
        rewritten as f64 >= 0.999 * with_code as f64,
        "{main}: only {rewritten} of {with_code} methods rewritten; skipped: {}",
        s["skipped_by_reason"]
    );
    assert_eq!(s["classes_failed"].as_u64(), Some(0), "{main}: classes failed: {}", s["failure_examples"]);
    assert_eq!(s["retransform"]["failed"].as_u64(), Some(0), "{main}: retransform failures: {}", s["retransform"]);
    // The JDK classes loaded before VMInit are retransformed, but for those without code
    // (`Serializable`, `Comparable`, …), which the rewrite would leave as they are.
    let batch = |k: &str| s["retransform"][k].as_u64().unwrap_or(0);
    assert!(batch("retransformed") > 200 && batch("without_code") > 10, "{main}: the VMInit batch: {}", s["retransform"]);
    assert!(s["entries"].as_u64().unwrap() > 0, "{main}: no method entry counted");
    s
}

#[test]
fn threads() {
    same_with_agent("Threads");
}

#[test]
fn recursion() {
    same_with_agent("Recursion");
}

#[test]
fn exceptions_finally_and_line_numbers() {
    // Exits with 1 through an exception that escapes main; its trace has line numbers.
    same_with_agent("Exceptions");
}

#[test]
fn lambdas_indy_switches() {
    same_with_agent("Lambdas");
}

#[test]
fn reflection_method_handles_proxies_clinit() {
    same_with_agent("Reflect");
}

#[test]
fn synchronized_inner_classes_arrays() {
    // Exits with System.exit(3).
    same_with_agent("Misc");
}

#[test]
fn entry_counts_match_jvmti_method_entry_events() {
    check_entry_counts("");
}

/// The entry counts of CountCheck's methods, with more agent options `extra`, equal JVMTI's and
/// those known by construction; returns the summary.
fn check_entry_counts(extra: &str) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("summary.json");
    let opts = format!("summary={},count_check=CountCheck*{extra}", json.display());
    let base = run_java("CountCheck", None);
    let with = run_java("CountCheck", Some(&opts));
    assert_eq!(base, with);
    let s = summary_json(&json);
    let cc = &s["count_check"];
    assert_eq!(cc["differences"].as_array().map(Vec::len), Some(0), "count differences: {cc}");
    assert!(cc["methods_compared"].as_u64().unwrap() >= 7, "{cc}");
    assert_eq!(cc["not_instrumented"].as_array().map(Vec::len), Some(0), "{cc}");
    // Known by construction.
    let count = |m: &str| {
        cc["counts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["method"] == m)
            .unwrap_or_else(|| panic!("{m} not in {cc}"))["probes"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(count("CountCheck.f(I)V"), 12346); // 11345 + 1000 via g + 1 via the Runnable
    assert_eq!(count("CountCheck.g(I)I"), 1000);
    assert_eq!(count("CountCheck.h()V"), 10);
    assert_eq!(count("CountCheck.rec(I)I"), 101);
    assert_eq!(count("CountCheck.<init>()V"), 1);
    assert_eq!(count("CountCheck.main([Ljava/lang/String;)V"), 1);
    assert_eq!(count("CountCheck.lambda$main$0(I)I"), 7);
    // The lambda's proxy is a hidden class, which no ClassFileLoadHook sees: instrumented through
    // `JavaLangAccess.defineClass`, compared under the name in its bytes.
    let proxy: Vec<&serde_json::Value> = cc["counts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["method"].as_str().is_some_and(|m| m.starts_with("CountCheck$$Lambda$") && m.ends_with(".applyAsInt(I)I")))
        .collect();
    assert_eq!(proxy.len(), 1, "{cc}");
    assert_eq!((proxy[0]["jvmti"].as_u64(), proxy[0]["probes"].as_u64()), (Some(7), Some(7)), "{cc}");
    s
}

#[test]
fn class_cache_serves_a_second_run_with_the_same_counts() {
    let cache = tempfile::tempdir().unwrap();
    let opts = format!(",cache={}", cache.path().display());
    let first = &check_entry_counts(&opts)["class_cache"];
    let kept = first["misses"].as_u64().unwrap();
    // Every record made (off the load hook: the writer thread's CPU time is counted) and written.
    let records_cpu = first["records_cpu_ns"].as_u64().unwrap_or(0);
    assert!(kept > 300 && first["hits"] == 0 && first["stored"] == kept && first["dropped"] == 0 && records_cpu > 0, "first run: {first}");
    // The classes from the cache (the JDK's loaded before VMInit and retransformed included,
    // whose records hold their ids, as long as the batch meets the same ids again; and the
    // lambda's hidden proxy), and the same counts: the replayed ids are the ones the probes
    // bump. A few of the batch may meet other ids now and then (its classes come in a slightly
    // different order).
    let second = &check_entry_counts(&opts)["class_cache"];
    let (hits, misses) = (second["hits"].as_u64().unwrap(), second["misses"].as_u64().unwrap());
    assert!(hits + misses == kept && misses <= 3 && second["unusable"] == 0, "second run: {second}");
}

#[test]
fn a_class_cache_it_cannot_use_leaves_the_run_alone() {
    let cache = tempfile::tempdir().unwrap();
    std::fs::write(cache.path().join("not-a-dir"), b"").unwrap();
    let base = run_java("Recursion", None);
    let with = run_java("Recursion", Some(&format!("summary=off,cache={}/not-a-dir/sub", cache.path().display())));
    assert_eq!((with.code, &with.stdout), (base.code, &base.stdout));
    let lines: Vec<&str> = with.stderr.lines().collect();
    assert!(lines.len() == 1 && lines[0].starts_with("lucce-agent: class cache off: ") && lines[0].contains("not-a-dir"), "{lines:?}");
}

#[test]
fn bad_options_leave_the_program_alone() {
    let base = run_java("Recursion", None);
    for bad in ["bogus=1", "include", "loglevel=loud", "summary="] {
        let with = run_java("Recursion", Some(bad));
        assert_eq!(with.code, Some(0), "{bad}: {with:?}");
        assert_eq!(with.stdout, base.stdout, "{bad}");
        let lines: Vec<&str> = with.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{bad}: expected one message, got {:?}", with.stderr);
        assert!(lines[0].starts_with("lucce-agent: ") && lines[0].contains("WITHOUT the agent"), "{bad}: {lines:?}");
    }
}

#[test]
fn default_summary_goes_to_stderr() {
    let with = run_java("Recursion", Some(""));
    assert_eq!(with.code, Some(0));
    assert!(with.stderr.contains("lucce-agent summary"), "{}", with.stderr);
    assert!(with.stderr.contains("methods with code:"), "{}", with.stderr);
}

#[test]
fn exclude_leaves_matching_classes_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("s.json");
    let opts = format!("summary={},include=Recursion*", json.display());
    let base = run_java("Recursion", None);
    let with = run_java("Recursion", Some(&opts));
    assert_eq!(base, with);
    let s = summary_json(&json);
    assert_eq!(s["classes_rewritten"].as_u64(), Some(1), "{s}");
    assert!(s["classes_excluded"].as_u64().unwrap() > 100, "{s}");
}
