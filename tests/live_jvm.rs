//! Record mode on a real JVM: the Java programs under tests/live_scripts/ call
//! `Lucce.mark(T.here("label"))`, where `T.here` prints the label and the frames
//! `new Throwable().getStackTrace()` shows at that line (its own frame left out), independently
//! of the agent. Every mark event that `lucce events --json` decodes must have exactly those
//! frames — class, method, file and line — minus native-method frames (the documented rule; the
//! frames the JVM hides it hides from both). Each program also runs with `verify=1` (and the
//! smaller ones with `sample=1,verify=1`), and `lucce verify` must find no mismatch. Random
//! programs (tests/jvm_support/random_java.rs) are checked the same way.
//!
//! Needs a JDK 17+ (JAVA_HOME, else /usr/lib/jvm/java-17-openjdk-amd64, else `java`/`javac` on
//! PATH) and, for the JNI test, gcc. The agent library is built by the test itself (`cargo build
//! -p lucce-agent`, same profile and target directory) unless LUCCE_AGENT_LIB points at one. The
//! programs are compiled once per test process against a stub of `lucce.Lucce` that is not on
//! the run-time class path (the agent defines the real one).

mod jvm_support;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jvm_support::{agent_arg, agent_lib, java_home, java_sources, no_java_options, process_dir, run, tool, tool_ok, Outcome};

/// `Lucce` as the programs compile against it; never on the run-time class path.
const STUB: &str = "package lucce;\n\
public final class Lucce {\n\
    private Lucce() {}\n\
    public static void mark(String label) {}\n\
    public static long context() { return 0; }\n\
}\n";

// ---------------------------------------------------------------------------------------------
// Tools: JDK, agent, CLI, compiled programs

fn lucce_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_lucce"))
}

fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/live_scripts")
}

/// Compiles the stub and every tests/live_scripts/*.java once; returns the class directory
/// (the stub's classes are elsewhere).
fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = process_dir("live-scripts");
        let stub_src = dir.join("stub-src/lucce");
        let stub_classes = dir.join("stub-classes");
        let classes = dir.join("classes");
        std::fs::create_dir_all(&stub_src).unwrap();
        std::fs::write(stub_src.join("Lucce.java"), STUB).unwrap();
        tool_ok(Command::new(tool("javac")).arg("-d").arg(&stub_classes).arg(stub_src.join("Lucce.java")));
        let sources = java_sources(&scripts_dir());
        tool_ok(Command::new(tool("javac")).arg("-g").arg("-cp").arg(&stub_classes).arg("-d").arg(&classes).args(&sources));
        assert!(!classes.join("lucce").exists(), "the stub must not be on the run-time class path");
        classes
    })
}

/// The Java agent of tests/live_javaagent/agent, built once into a jar.
fn transformer_jar() -> &'static Path {
    static JAR: OnceLock<PathBuf> = OnceLock::new();
    JAR.get_or_init(|| {
        let dir = process_dir("javaagent");
        let classes = dir.join("classes");
        let sources = java_sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/live_javaagent/agent"));
        tool_ok(Command::new(tool("javac")).arg("-g").arg("-d").arg(&classes).args(&sources));
        let manifest = dir.join("manifest.txt");
        std::fs::write(&manifest, "Premain-Class: LiveTransformer\nAgent-Class: LiveTransformer\nCan-Retransform-Classes: true\n").unwrap();
        let jar = dir.join("agent.jar");
        tool_ok(Command::new(tool("jar")).arg("cfm").arg(&jar).arg(&manifest).arg("-C").arg(&classes).arg("."));
        jar
    })
}

/// Compiles tests/live_scripts/live_jni.c once into a shared library.
fn jni_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let home = java_home().expect("the JNI test needs a JDK with include/jni.h (JAVA_HOME)");
        let dir = process_dir("jni");
        let lib = dir.join("libLiveJni.so");
        tool_ok(
            Command::new("gcc")
                .args(["-shared", "-fPIC", "-pthread", "-O1", "-Wall", "-Werror"])
                .arg(format!("-I{}", home.join("include").display()))
                .arg(format!("-I{}", home.join("include/linux").display()))
                .arg("-o")
                .arg(&lib)
                .arg(scripts_dir().join("live_jni.c")),
        );
        lib
    })
}

// ---------------------------------------------------------------------------------------------
// Running processes

/// Runs `java -agentpath:AGENT=OPTS JVM_ARGS -cp CLASSES MAIN`.
fn run_java(main: &str, agent_options: &str, jvm_args: &[OsString]) -> Outcome {
    run_java_limited(main, &[], agent_options, jvm_args, None)
}

/// A limit of the shell's `ulimit` for a JVM: its flag and value (KiB for `v`, address space, and
/// `f`, the size of any file written).
type Ulimit = (char, u64);

/// [`run_java`] with program arguments and, when given, a `ulimit`.
fn run_java_limited(main: &str, args: &[&str], agent_options: &str, jvm_args: &[OsString], limit: Option<Ulimit>) -> Outcome {
    run_java_on(classes().as_os_str(), main, args, agent_options, jvm_args, limit)
}

/// [`run_java_limited`] on class path `cp`.
fn run_java_on(cp: &OsStr, main: &str, args: &[&str], agent_options: &str, jvm_args: &[OsString], limit: Option<Ulimit>) -> Outcome {
    let mut cmd = match limit {
        Some((flag, value)) => {
            let mut c = Command::new("bash");
            c.arg("-c").arg(format!("ulimit -{flag} {value} && exec \"$0\" \"$@\"")).arg(tool("java"));
            c
        }
        None => Command::new(tool("java")),
    };
    no_java_options(&mut cmd).arg(agent_arg(agent_options));
    cmd.args(jvm_args).arg("-cp").arg(cp).arg(main).args(args);
    run(cmd, &format!("java {main} ({agent_options})"))
}

fn run_lucce(args: &[&OsString]) -> Outcome {
    let mut cmd = Command::new(lucce_bin());
    cmd.args(args);
    run(cmd, &format!("lucce {args:?}"))
}

// ---------------------------------------------------------------------------------------------
// Frames: what T.here printed, what lucce decoded

#[derive(Debug, Clone, PartialEq, Eq)]
struct Frame {
    class: String,
    method: String,
    file: Option<String>,
    line: i64,
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}({}:{})", self.class, self.method, self.file.as_deref().unwrap_or("Unknown Source"), self.line)
    }
}

fn show(frames: &[Frame]) -> String {
    let mut s = String::new();
    for f in frames {
        s.push_str(&format!("\n\tat {f}"));
    }
    s
}

/// The `#here` lines of a program's stdout: label -> frames, native frames (line -2) dropped.
fn parse_heres(stdout: &str) -> BTreeMap<String, Vec<Frame>> {
    let mut heres = BTreeMap::new();
    for line in stdout.lines().filter(|l| l.starts_with("#here\t")) {
        let mut fields = line.split('\t').skip(1);
        let label = fields.next().expect("label").to_string();
        let rest: Vec<&str> = fields.collect();
        assert_eq!(rest.len() % 4, 0, "malformed #here line: {line}");
        let frames: Vec<Frame> = rest
            .chunks(4)
            .map(|c| Frame {
                class: c[0].to_string(),
                method: c[1].to_string(),
                file: (!c[2].is_empty()).then(|| c[2].to_string()),
                line: c[3].parse().unwrap_or_else(|_| panic!("bad line number in {line}")),
            })
            .filter(|f| f.line != -2)
            .collect();
        assert!(!frames.is_empty(), "no frame below T.here in {line}");
        assert!(heres.insert(label.clone(), frames).is_none(), "label {label} printed twice");
    }
    heres
}

/// The label as the program wrote it (T.here appends `#N`).
fn base_label(label: &str) -> &str {
    label.rsplit_once('#').map_or(label, |(b, _)| b)
}

#[derive(Debug)]
struct MarkEvent {
    seq: u64,
    thread: String,
    label: Option<String>,
    truncated: bool,
    frames: Vec<Frame>,
}

fn json_frames(v: &serde_json::Value) -> Vec<Frame> {
    v.as_array()
        .expect("frames array")
        .iter()
        .map(|f| Frame {
            class: f["class"].as_str().expect("class").to_string(),
            method: f["method"].as_str().expect("method").to_string(),
            file: f["file"].as_str().map(str::to_string),
            line: if f["native"].as_bool() == Some(true) { -2 } else { f["line"].as_i64().expect("line") },
        })
        .collect()
}

/// `lucce events STORE --json`, one value per event.
fn events_json(store: &Path) -> Vec<serde_json::Value> {
    let out = run_lucce(&[&"events".into(), &store.into(), &"--json".into()]);
    assert_eq!(out.code, Some(0), "lucce events failed:\n{}", out.stderr);
    out.stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line ({e}): {l}"))).collect()
}

/// [`events_json`], mark events only.
fn mark_events(store: &Path) -> Vec<MarkEvent> {
    events_json(store)
        .into_iter()
        .filter(|v| v["kind"] == "mark")
        .map(|v| MarkEvent {
            seq: v["seq"].as_u64().expect("seq"),
            thread: v["thread"].as_str().unwrap_or("").to_string(),
            label: v["label"].as_str().map(str::to_string),
            truncated: v["truncated"].as_bool().expect("truncated"),
            frames: json_frames(&v["frames"]),
        })
        .collect()
}

/// Every mark event decodes to exactly the frames T.here printed for its label, and every label
/// T.here printed has its event.
fn check_marks(what: &str, heres: &BTreeMap<String, Vec<Frame>>, store: &Path) {
    let events = mark_events(store);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for ev in &events {
        let Some(label) = &ev.label else {
            problems.push(format!("mark event #{} (thread {}) has no label", ev.seq, ev.thread));
            continue;
        };
        let Some(expected) = heres.get(label) else {
            problems.push(format!("mark event #{} label {label:?} was never printed by T.here", ev.seq));
            continue;
        };
        if !seen.insert(label.clone()) {
            problems.push(format!("label {label:?} recorded twice (event #{})", ev.seq));
        }
        if ev.frames != *expected {
            let first = expected.iter().zip(&ev.frames).position(|(a, b)| a != b).unwrap_or(expected.len().min(ev.frames.len()));
            problems.push(format!(
                "MISMATCH {what}: mark {label:?} (event #{}, thread {:?}, truncated {}): {} frames expected, {} decoded, first difference at frame {first}\n  expected (Throwable, natives dropped):{}\n  decoded:{}",
                ev.seq,
                ev.thread,
                ev.truncated,
                expected.len(),
                ev.frames.len(),
                show(expected),
                show(&ev.frames)
            ));
        }
    }
    for label in heres.keys().filter(|l| !seen.contains(*l)) {
        problems.push(format!("{what}: T.here printed {label:?} but no mark event carries it"));
    }
    if !problems.is_empty() {
        // Very deep stacks make huge messages: cap each one.
        let text: Vec<String> = problems
            .iter()
            .take(8)
            .map(|p| if p.len() > 20_000 { format!("{}\n  ... ({} more bytes)", &p[..20_000], p.len() - 20_000) } else { p.clone() })
            .collect();
        panic!("{what}: {} of {} mark events wrong or missing:\n{}", problems.len(), events.len(), text.join("\n\n"));
    }
}

#[derive(Debug)]
struct Verified {
    events: u64,
    verified: u64,
}

/// Runs `main ARGS` with the agent (`out=STORE,summary=off,` then `opts`), which must exit 0 and,
/// when given, print `stdout`; then [`verify`] on its store.
fn run_verified(main: &str, args: &[&str], opts: &str, stdout: Option<&str>) -> Verified {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let out = run_java_limited(main, args, &format!("out={},summary=off,{opts}", store.display()), &[], None);
    assert_eq!(out.code, Some(0), "{main} failed:\n{}", out.stderr);
    if let Some(expected) = stdout {
        assert_eq!(out.stdout, expected, "{main}'s output");
    }
    verify(main, &store)
}

/// `lucce verify STORE`: exit 0 and "0 mismatches".
fn verify(what: &str, store: &Path) -> Verified {
    let out = run_lucce(&[&"verify".into(), &store.into(), &"--show".into(), &"5".into()]);
    let summary = out.stdout.lines().last().unwrap_or("").to_string();
    let nums: Vec<u64> = summary.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    let text = || {
        let s = &out.stdout;
        if s.len() > 30_000 {
            format!("{}\n... ({} bytes)", &s[..30_000], s.len())
        } else {
            s.clone()
        }
    };
    assert_eq!(out.code, Some(0), "lucce verify {what} failed ({summary}):\n{}\n{}", text(), out.stderr);
    // "N events, M verified (T truncated ...), K mismatches or undecodable"
    assert_eq!(nums.len(), 4, "unexpected verify summary: {summary:?}");
    assert_eq!(nums[3], 0, "{what}: {summary}");
    Verified { events: nums[0], verified: nums[1] }
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// A run with the agent (its log in `log`) must exit 0 and the agent must log no error.
fn assert_clean_exit(what: &str, out: Outcome, log: &Path) -> Outcome {
    let log_text = std::fs::read_to_string(log).unwrap_or_default();
    assert_eq!(out.code, Some(0), "{what} failed:\nstderr:\n{}\nagent log:\n{log_text}", out.stderr);
    assert!(!log_text.contains("[Error]"), "{what}: the agent logged errors:\n{log_text}\nstderr:\n{}", out.stderr);
    out
}

struct Scenario<'a> {
    main: &'a str,
    /// The program's arguments.
    args: &'a [&'a str],
    jvm_args: Vec<OsString>,
    /// Agent options added to every run.
    agent: &'a str,
    /// Also run with `sample=1,verify=1`.
    sample: bool,
    /// Labels (as written in the program) that must have been printed at least once.
    expect: &'a [&'a str],
    /// A `ulimit` for the JVM (`address_space` sets `-v`).
    limit: Option<Ulimit>,
}

impl<'a> Scenario<'a> {
    fn new(main: &'a str) -> Self {
        Scenario { main, args: &[], jvm_args: Vec::new(), agent: "", sample: false, expect: &[], limit: None }
    }

    fn jvm(mut self, args: &[&str]) -> Self {
        self.jvm_args.extend(args.iter().map(OsString::from));
        self
    }

    fn agent(mut self, opts: &'a str) -> Self {
        self.agent = opts;
        self
    }

    fn sample(mut self) -> Self {
        self.sample = true;
        self
    }

    fn expect(mut self, labels: &'a [&'a str]) -> Self {
        self.expect = labels;
        self
    }

    fn address_space(mut self, kib: u64) -> Self {
        self.limit = Some(('v', kib));
        self
    }

    /// One run per agent option set; returns the stdout and the store of the `verify=1` run
    /// (`store0`, beside its agent log `agent0.log`).
    fn run(&self) -> (tempfile::TempDir, Outcome) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = self.run_in(tmp.path());
        (tmp, out)
    }

    /// [`Scenario::run`], writing into `dir`.
    fn run_in(&self, dir: &Path) -> Outcome {
        let mut first = None;
        let modes: &[&str] = if self.sample { &["verify=1", "sample=1,verify=1"] } else { &["verify=1"] };
        for (i, mode) in modes.iter().enumerate() {
            let store = dir.join(format!("store{i}"));
            let log = dir.join(format!("agent{i}.log"));
            let opts = format!("out={},{mode},summary=off,log={},{}", store.display(), log.display(), self.agent);
            let what = format!("{} ({mode})", self.main);
            let out = assert_clean_exit(&what, run_java_limited(self.main, self.args, &opts, &self.jvm_args, self.limit), &log);
            let heres = parse_heres(&out.stdout);
            for want in self.expect {
                assert!(heres.keys().any(|l| base_label(l) == *want), "{what}: no mark {want:?} printed; stdout:\n{}", out.stdout);
            }
            let v = verify(&what, &store);
            if mode.contains("sample") {
                // Hundreds of thousands of events (every method entry of the JDK too): `lucce
                // verify` compares each with its runtime stack; the marks are compared exactly in
                // the verify=1 run (here their JSON alone would be hundreds of MB).
                assert!(v.verified > 10_000, "{what}: sample=1 gave only {} verified events", v.verified);
            } else {
                check_marks(&what, &heres, &store);
                assert_eq!(v.verified, v.events, "{what}: every event must carry its runtime stack with verify=1");
                assert_eq!(v.events, heres.len() as u64, "{what}: one event per mark");
            }
            first.get_or_insert((store, out));
        }
        first.unwrap().1
    }
}

#[test]
fn threads_and_pools() {
    Scenario::new("LiveThreads").sample().expect(THREAD_MARKS).run();
}

/// Classes left alone with `exclude=` are frames lucce cannot see, and `lucce verify` leaves them
/// out of the JVM's stacks too: the pools' `FutureTask.run` and `ThreadPoolExecutor` frames in
/// the middle of a trace, `Thread.run` at its bottom.
#[test]
fn excluded_classes_are_left_out_of_verified_stacks() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let out = run_java("LiveThreads", &format!("out={},verify=1,summary=off,exclude=java.util.concurrent.*;java.lang.Thread", store.display()), &[]);
    assert_eq!(out.code, Some(0), "LiveThreads failed:\n{}", out.stderr);
    let v = verify("LiveThreads with exclude=", &store);
    assert!(v.verified >= THREAD_MARKS.len() as u64, "{} verified", v.verified);
}

/// Calls from an excluded class into instrumented code walk to the frame below it, and take that
/// frame's context from the thread's walk memo after the first read: exact through callers that
/// differ only below that frame, and from two lines of it (the program says how).
#[test]
fn calls_from_excluded_code_take_remembered_contexts() {
    let (_tmp, out, log_text, store) = run_logged("LiveExcluded", "verify=1,exclude=LiveExcludedBridge");
    assert_eq!((out.code, out.stdout.lines().last()), (Some(0), Some("n 3200")), "{}\n{log_text}", out.stderr);
    let marks = parse_heres(&out.stdout).len() as u64;
    let v = verify("LiveExcluded", &store);
    assert_eq!((v.events, v.verified), (marks, marks), "every mark, verified");
    // 800 rounds of 4 bridge frames that each walk once; the memo answers all but the first walk
    // of each stack below `f` (a handful).
    let hits = logged_count(&log_text, "walks answered by the memo");
    assert!(hits >= 3100, "{hits} walks answered by the memo:\n{log_text}");
}

/// A call into excluded code that enters nothing instrumented must not leave its record valid for
/// a later entry from excluded code that belongs to a frame further down: with classes left out
/// a drop probe follows every call (the program says how; 1,000 of 3,501 events wrong with stop
/// 56's agent, and as many with the drops left out and the pairs through excluded frames
/// trusted).
#[test]
fn calls_through_excluded_code_that_enter_nothing() {
    let v = run_verified("LiveExcludedStale", &["500"], "sample=1,verify=1,include=LiveExcludedStale", Some("n 500\n"));
    assert!(v.verified >= 3_500, "{} verified", v.verified);
}

/// With classes left out, a virtual call site that reaches both an instrumented method and
/// excluded code that enters nothing must not leave its record for a later entry of that method
/// from excluded code: a drop probe follows every call (the program says how; 1,000 of 3,002
/// events wrong without it).
#[test]
fn virtual_calls_into_excluded_code_that_enter_nothing() {
    let opts = "sample=1,verify=1,include=LiveExcludedVirtual*,exclude=LiveExcludedVirtualBridge";
    let v = run_verified("LiveExcludedVirtual", &["500"], opts, Some("n 500\n"));
    assert!(v.verified >= 3_000, "{} verified", v.verified);
}

/// An exception leaves the pending record of the call it came from when that call threw before
/// entering its method (here a null receiver, thrown by C2 as a preallocated
/// NullPointerException, so no constructor's entry takes the record): whatever catches it drops
/// the record first thing in its handler, or an entry of that method from code lucce cannot see
/// takes it (the program says how; with stop 57's agent 975 of 4,411 events wrong when
/// instrumented code catches, 975 of 3,895 when the excluded bridge does).
#[test]
fn exceptions_caught_by_instrumented_code_drop_the_record() {
    let v = run_verified("LiveThrowStale", &["50000", "0"], "sample=97,verify=1,exclude=LiveThrowStaleBridge", Some("n 100000\n"));
    assert!(v.verified >= 4_000, "{} verified", v.verified);
}

/// The same when left-out code catches: a recording gives the handlers of the classes it leaves
/// out a drop probe, and nothing else.
#[test]
fn exceptions_caught_by_excluded_code_drop_the_record() {
    let v = run_verified("LiveThrowStale", &["50000", "1"], "sample=97,verify=1,exclude=LiveThrowStaleBridge", Some("n 100000\n"));
    assert!(v.verified >= 3_500, "{} verified", v.verified);
}

/// A class whose SourceFile attribute names "": the JVM's traces give its frames the file name
/// "", and so do lucce's (`verify` compared them as no file against "" until stop 56: every
/// such event mismatched).
#[test]
fn empty_source_file_names() {
    let (_tmp, out, log_text, store) = run_logged("LiveEmptySource", "sample=1,verify=1,include=LiveEmptySource*");
    assert_eq!((out.code, out.stdout.as_str()), (Some(0), "file '' sum 1100\n"), "{}\n{log_text}", out.stderr);
    let v = verify("LiveEmptySource", &store);
    assert!(v.verified >= 300, "{} verified", v.verified);
    let events = run_lucce(&[&"events".into(), &store.into(), &"--json".into()]);
    assert!(events.stdout.contains(r#"{"class":"LiveEmptySourceTarget","file":"","line":"#), "no frame with file \"\":\n{}", events.stdout);
}

/// Calls into methods the JIT replaces by intrinsics run the caller's call probe but not the
/// callee's entry probe: the rewriter drops the record after them, or an entry of the same method
/// from code lucce cannot see (here an excluded class) would take it for its own. Stop 56 found
/// it (a helper's fop run with `exclude=`, 1 of 97,688 verified events); with stop 56's agent
/// this program gives 1,488 of 23,050 events wrong.
#[test]
fn calls_into_jit_intrinsics() {
    let v = run_verified("LiveIntrinsics", &["2000000"], "sample=97,verify=1,exclude=LiveIntrinsicsBridge", None);
    assert!(v.verified >= 20_000, "{} verified", v.verified);
}

/// The rewriter's list of the calls the JIT may replace by intrinsics
/// (agent/src/rewrite/intrinsics.txt) is the running JDK's: every method with code marked
/// `@IntrinsicCandidate`, as tests/live_scripts/ListIntrinsics.java reads them. A JDK update that
/// adds one fails here; scripts/list_intrinsics.sh writes the list anew.
#[test]
fn intrinsic_candidates_match_the_jdk() {
    let mut cmd = Command::new(tool("java"));
    no_java_options(&mut cmd).args(["--add-modules", "ALL-SYSTEM", "-cp"]).arg(classes()).arg("ListIntrinsics");
    let out = run(cmd, "java ListIntrinsics");
    assert_eq!(out.code, Some(0), "ListIntrinsics failed:\n{}", out.stderr);
    let listed = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("agent/src/rewrite/intrinsics.txt")).expect("intrinsics.txt");
    let listed: BTreeSet<&str> = listed.lines().filter(|l| !l.starts_with('#')).collect();
    let jdk: BTreeSet<&str> = out.stdout.lines().collect();
    assert!(jdk.len() > 200, "{} candidates found:\n{}", jdk.len(), out.stderr);
    let missing: Vec<_> = jdk.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&jdk).collect();
    assert!(missing.is_empty() && extra.is_empty(), "run scripts/list_intrinsics.sh: not listed {missing:?}; listed, not in the JDK {extra:?}");
}

/// A walk that reaches a thread's first frame reads the stack 16 frames at a time; with exactly
/// a multiple of 16 frames, the JVM refused the read past the last one, and the walk ended
/// truncated instead of at the thread's root (here at two of the 41 depths).
#[test]
fn walks_to_the_bottom_of_any_stack() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let out = run_java("LiveBottomless", &format!("out={},verify=1,summary=off,exclude=LiveBottomless", store.display()), &[]);
    assert_eq!(out.code, Some(0), "LiveBottomless failed:\n{}", out.stderr);
    let marks = mark_events(&store);
    assert_eq!(marks.len(), 41, "one mark per depth");
    let truncated: Vec<u64> = marks.iter().filter(|m| m.truncated).map(|m| m.seq).collect();
    assert!(truncated.is_empty(), "marks entered from invisible frames only, truncated: {truncated:?}");
    let v = verify("LiveBottomless", &store);
    assert_eq!(v.verified, 41);
}

/// The debugger's agent (JDWP) loaded after lucce's: the JVM starts and the run is exact. lucce
/// took `can_suspend`, which one JVMTI environment may hold at a time, at load; JDWP then could
/// not start, nor the JVM with it (so jshell failed under `lucce record`: its execution JVM runs
/// with JDWP). Now lucce holds it only while it restarts the reference threads, and leaves them
/// alone when it cannot have it.
#[test]
fn debugger_agent_alongside() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let jdwp = OsString::from("-agentlib:jdwp=transport=dt_socket,server=y,suspend=n,address=localhost:0");
    let out = run_java("LiveThreads", &format!("out={},verify=1,summary=off", store.display()), &[jdwp]);
    assert_eq!(out.code, Some(0), "LiveThreads with JDWP failed:\n{}", out.stderr);
    check_marks("LiveThreads with JDWP", &parse_heres(&out.stdout), &store);
    let v = verify("LiveThreads with JDWP", &store);
    assert!(v.verified >= THREAD_MARKS.len() as u64, "{} verified", v.verified);
}

/// The JDK Flight Recorder started with the JVM: it retransforms `Throwable`, `Error` and the file
/// and socket classes from a JVMTI environment of its own, made after the agent's. The load hook
/// moves after it (as after an attached Java agent); before, JFR rewrote the agent's rewrite,
/// and 26 of this program's 67 marks, those under `Throwable.toString`, were truncated there.
#[test]
fn flight_recorder_alongside() {
    const MARKS: &[&str] = &["fill-exception", "fill-error", "get-message", "main-end"];
    let (tmp, _) = Scenario::new("LiveFlightRecorder").agent("loglevel=info").jvm(&["-XX:StartFlightRecording"]).expect(MARKS).run();
    let log = std::fs::read_to_string(tmp.path().join("agent0.log")).unwrap_or_default();
    assert!(log.contains("the flight recorder starts: the load hook moved"), "no move after JFR's environment logged:\n{log}");
}

/// `Thread.stop` during a recording with `verify=1`: the ThreadDeath often arrives while the
/// agent's Java helper takes the JVM's trace, and the agent cleared it with the helper's own
/// exceptions, so 9 of these 10 threads ran on; now it is thrown on to the program, and each dies.
#[test]
fn stopped_threads_die() {
    let v = run_verified("LiveStopped", &["10"], "sample=10,verify=1", Some("stopped 10, ran on after the stop 0\n"));
    assert!(v.verified > 0, "no event verified");
}

/// Threads that catch ThreadDeath and run on, stopped four times each (each stop sent once the
/// thread has caught the one before): every stop reaches its thread once, also one the agent
/// holds while its helper runs and throws on as its native method returns.
#[test]
fn stopped_threads_catch_every_stop() {
    let v = run_verified("LiveStoppedAgain", &["6"], "sample=5,verify=1", Some("threads 6, stops sent 24, caught 24\n"));
    assert!(v.verified > 0, "no event verified");
}

/// The store cannot be written, in three ways: from some point of the run on, sled cannot write a
/// large value (LiveStoreFails puts a file in place of the store's directory of blobs, then marks
/// an event too large for sled's log; with sled 0.34 the JVM then never exited), or the store's files reach the size limit (`ulimit -f`, as a
/// full disk would stop them); or not even at the start (`ulimit -f 0`). Each time the program
/// runs to its end and the JVM exits 0, and the agent says once why there is no store or where
/// it stopped; a store that stopped reads and verifies what it committed, and one that could not
/// be made is not left behind half made.
#[test]
fn a_store_that_cannot_be_written_neither_hangs_nor_stops_the_jvm() {
    let cases = [
        ("blobs", "sample=1000,verify=1", None, "failed", "Not a directory"),
        ("size", "sample=10,verify=50", Some(('f', 100)), "failed", "ulimit -f"),
        ("size", "sample=10", Some(('f', 0)), "cannot create the store", "ulimit -f"),
    ];
    for (mode, opts, limit, what, why) in cases {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = tmp.path().join("store");
        let path = store.display().to_string();
        let out = run_java_limited("LiveStoreFails", &[&path, mode], &format!("out={path},summary=off,{opts}"), &[], limit);
        assert_eq!((out.code, out.stdout.as_str()), (Some(0), "done 1201200\n"), "{mode} {limit:?}:\n{}", out.stderr);
        let told: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("lucce-agent:")).collect();
        assert!(
            told.len() == 1 && told[0].contains(what) && told[0].contains(&path) && told[0].contains(why),
            "{mode} {limit:?}: the agent should say once that the store {what} ({why}):\n{}",
            out.stderr
        );
        if what == "cannot create the store" {
            assert!(!store.exists(), "a half-made store was left behind");
            continue;
        }
        if mode == "blobs" {
            std::fs::remove_file(store.join("blobs")).expect("LiveStoreFails made blobs a file");
            std::fs::rename(store.join("blobs.kept"), store.join("blobs")).expect("LiveStoreFails kept the blobs");
        }
        verify(mode, &store);
    }
}

/// A thread gets its answer table (2 MiB) only once it keeps entering methods the memo has not
/// seen: of LiveThreads' 12 threads and the JVM's own, 3 to 5 took one in five runs (9 when a
/// table came with the first slow entry, every thread when it came with the first probe).
#[test]
fn short_threads_take_no_answer_table() {
    let (_tmp, out, log_text, _) = run_logged("LiveThreads", "");
    assert_eq!(out.code, Some(0), "LiveThreads failed:\n{}\n{log_text}", out.stderr);
    let tables = logged_count(&log_text, "answer tables");
    assert!((1..=7).contains(&tables), "{tables} answer tables mapped");
}

const THREAD_MARKS: &[&str] = &[
    "main-start",
    "thread-subclass-0",
    "thread-step-2",
    "runnable-plain",
    "lambda-thread",
    "callable-7",
    "callable-103",
    "runnable-pooled-3",
    "runnable-tight-5",
    "fork-join-7",
    "callable-200",
    "callable-201",
    "main-end",
];

/// Two home slots, of which slot 0 is no thread's: the threads of odd tids share one, and every
/// thread but its holder keeps its state in a private slot, its call probes write into the sink
/// and its entries are resolved by walks — the path of threads whose tids collide, exact too.
/// (With the default, every tid below 2^32 has a home slot of its own.)
#[test]
fn threads_without_home_slots() {
    Scenario::new("LiveThreads").agent("thread_slots=2").sample().expect(THREAD_MARKS).run();
}

/// Where the 256 GiB of address space for one slot per tid cannot be reserved (here `ulimit -v`
/// 32 GiB; the heap capped so that the JVM's own reservation fits on any machine), the agent says
/// so and takes 65536 slots with the owner check: exact all the same.
#[test]
fn thread_slots_without_the_address_space() {
    let (tmp, _) = Scenario::new("LiveThreads").jvm(&["-Xmx512m"]).address_space(32 << 20).expect(THREAD_MARKS).run();
    let log = std::fs::read_to_string(tmp.path().join("agent0.log")).unwrap_or_default();
    assert!(log.contains("using 65536 thread slots"), "no fallback reported:\n{log}");
}

#[test]
fn deep_recursion_through_several_sites() {
    let (_tmp, out) = Scenario::new("LiveRecursion")
        .jvm(&["-Xss512m", "-XX:MaxJavaStackTraceDepth=1000000"])
        .expect(&[
            "pass1-down-a-10000",
            "pass1-bottom-a",
            "pass1-up-a-9003",
            "pass2-down-a-10000",
            "pass2-bottom-a",
            "pass2-up-a-3001",
            "thread-down-a-2500",
            "thread-bottom-a",
            "thread-up-a-6002",
        ])
        .run();
    let heres = parse_heres(&out.stdout);
    let deepest = heres.values().map(Vec::len).max().unwrap_or(0);
    assert!(deepest > 12_345, "Throwable showed at most {deepest} frames: the deep marks were not compared in full");
}

/// At the end of a thread's stack the Java helper that takes an event's JVM trace overflows: the
/// event is stored without it (never a made-up one), the StackOverflowError stays the agent's
/// (the program's own comes where it would), and the log counts every such event. The deeper
/// traces are the JVM's cut ones (1024 frames), flagged so: compared in full, they mismatch.
#[test]
fn events_at_the_end_of_the_stack() {
    let (_tmp, out, log_text, store) = run_logged("LiveOverflow", "sample=1,verify=1,include=LiveOverflow");
    assert_eq!((out.code, out.stdout.as_str()), (Some(0), "overflowed true\nafter 3\n"), "{}\n{log_text}", out.stderr);
    let v = verify("LiveOverflow", &store);
    let untraced = logged_count(&log_text, "events without their JVM trace");
    assert!(untraced > 0, "no event near the end of the stack lost its trace: the test does not reach it\n{log_text}");
    assert_eq!(v.events - v.verified, untraced, "{log_text}");
}

#[test]
fn exceptions_catch_rethrow_finally() {
    Scenario::new("LiveExceptions")
        .sample()
        .expect(&[
            "boom-ctor-first",
            "finally-first-30",
            "caught-first",
            "rethrow-catch-first",
            "rethrow-finally-first",
            "caught-wrapped-first",
            "finally-after-rethrow-second",
            "after-catch-second",
            "nfe-x1",
            "close-ok-a",
            "twr-body-ok",
            "close-throw-b",
            "twr-catch-throw",
            "loop-catch-3",
            "nested-inner-finally",
            "nested-outer-catch",
            "finally-overrides-throw",
            "boom-ctor-check-29999",
            "boom-ctor-check-29997",
            "marked--1",
            "boom-ctor-marked-3",
            "failure-at-100",
            "boom-ctor-at-102",
            "sioobe-0",
            "sioobe-2",
            "main-end",
        ])
        .run();
}

#[test]
fn reflection_before_and_after_inflation() {
    // The default inflation threshold (15) set explicitly: calls 0..14 go through the native
    // accessor, 15.. through generated bytecode accessors.
    let (_tmp, out) = Scenario::new("LiveReflect")
        .jvm(&["-Dsun.reflect.inflationThreshold=15"])
        .expect(&["ctor-0", "ctor-24", "inst-0-0", "inst-24-24", "stat-0", "stat-helper-20", "secret-s24", "fail-r19", "fail-caught-16", "proxy-p2", "ctor-1000"])
        .run();
    // Both kinds of accessor were in the stacks compared.
    for accessor in ["NativeMethodAccessorImpl", "NativeConstructorAccessorImpl", "GeneratedMethodAccessor", "GeneratedConstructorAccessor"] {
        assert!(heres_mention(&out.stdout, accessor), "no mark called through {accessor}");
    }
}

/// Whether some `#here` line has a frame whose class contains `class_part`.
fn heres_mention(stdout: &str, class_part: &str) -> bool {
    parse_heres(stdout).values().flatten().any(|f| f.class.contains(class_part))
}

#[test]
fn reflection_generated_accessors_only() {
    // No native accessor at all: every call goes through a generated one.
    let (_tmp, out) = Scenario::new("LiveReflect")
        .jvm(&["-Dsun.reflect.noInflation=true"])
        .expect(&["ctor-0", "inst-3-3", "stat-10", "fail-caught-0"])
        .run();
    assert!(heres_mention(&out.stdout, "GeneratedMethodAccessor"), "no mark called through a generated accessor");
    assert!(!heres_mention(&out.stdout, "NativeMethodAccessorImpl"), "noInflation=true still used the native accessor");
}

/// Lambda proxies and lambda forms are hidden classes, which the agent instruments through
/// `JavaLangAccess.defineClass`: every class verified (the rewritten lambda forms of java.base
/// too), and every entry an event whose decoded trace must leave their frames out as the JVM does.
#[test]
fn lambdas_method_refs_indy_concat_method_handles() {
    Scenario::new("LiveLambdas")
        .jvm(&["-Xverify:all"])
        .sample()
        .expect(&[
            "lambda-runnable",
            "lambda-capturing-2",
            "lambda-nested-6-7",
            "static-ref-21",
            "bound-ref-bob-amy",
            "unbound-ref-bob",
            "ctor-ref-cid",
            "toString-bob",
            "toString-dan",
            "stream-map-6",
            "mh-static-exact",
            "mh-static-generic",
            "mh-virtual-bob-2",
            "mh-virtual-eve-9",
            "ctor-ref-mhctor",
            "mh-filter-quiet",
            "mh-virtual-fay-5",
        ])
        .run();
}

/// Stack walks of a run of `main` with system property `property` = `n` (from the agent's
/// closing log line).
fn walks_of(tmp: &Path, main: &str, property: &str, n: u32) -> u64 {
    logged_count(&logged_run(tmp, main, property, n, ""), "walks")
}

/// The agent's log of a run of `main` in full encoding, with `verify=1` and options `extra`,
/// with system property `property` = `n`, whose marks are checked.
fn logged_run(tmp: &Path, main: &str, property: &str, n: u32, extra: &str) -> String {
    let run = tempfile::tempdir_in(tmp).expect("tempdir");
    let store = run.path().join(format!("store-{main}-{n}"));
    let log = run.path().join(format!("agent-{main}-{n}.log"));
    let opts = format!("out={},verify=1,summary=off,loglevel=info,log={}{extra}", store.display(), log.display());
    let out = run_java(main, &opts, &[OsString::from(format!("-D{property}={n}"))]);
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(out.code, Some(0), "{main} {n} failed:\n{}\n{log_text}", out.stderr);
    check_marks(&format!("{main} {n}"), &parse_heres(&out.stdout), &store);
    log_text
}

/// A method whose every call certainly enters a leaf of its own class is a leaf too in full
/// encoding (agent/src/rewrite/leaves.rs), so nothing below it has a record of its caller: marks
/// made where the JVM calls out of its leaves (a static initializer, an exception's constructor)
/// walk through them and must equal the JVM's traces, with `sample=1` too (`leaf_callers=on`
/// forces them there). Calls of leaf callers do not walk, but every sample taken in their callees
/// does: which shows that they are leaves in the JVM.
#[test]
fn leaf_callers_are_exact_and_walk_only_below_upcalls() {
    let marks = ["late-clinit", "bad-ctor-13", "bad-ctor-99013", "after-loop", "main-end"];
    Scenario::new("LiveLeafCallers").sample().agent("leaf_callers=on").expect(&marks).run();
    assert_loop_does_not_walk("LiveLeafCallers", "leafcallers.n", "calls of leaf callers");
    let walks = |opts: &str| {
        let (_tmp, out, log_text, _store) = run_logged("LiveLeafCallers", opts);
        assert_eq!(out.code, Some(0), "{opts}: {}\n{log_text}", out.stderr);
        logged_count(&log_text, "walks")
    };
    // 2,000 iterations, each with six entries below a leaf caller, every one a sample.
    let (on, off) = (walks("sample=1,leaf_callers=on"), walks("sample=1"));
    assert!(on >= off + 10_000, "sample=1: {on} walks with leaf_callers=on, {off} without");
}

/// A method whose calls only build the exception it throws is a leaf in record mode
/// (agent/src/rewrite/leaves.rs), also when an exception handler covers code before them: each
/// of its throws walks the stack to find it. `throw_leaves=off` gives its calls their probes
/// back, and its throws walk no more.
#[test]
fn throw_leaves_walk_once_per_throw_unless_off() {
    let walks = |opts: &str| {
        let (_tmp, out, log_text, _store) = run_logged("LiveThrowLeaves", opts);
        assert_eq!((out.code, out.stdout.as_str()), (Some(0), "caught 4000\n"), "{opts}: {}\n{log_text}", out.stderr);
        logged_count(&log_text, "walks")
    };
    let (on, off) = (walks(""), walks("throw_leaves=off"));
    // Not quite one per throw: with 2,000 throws of the first kind only, in one run 1,894 more
    // (4,476 against 2,582). Under 3,000 more if the second kind were no leaf.
    assert!(on >= off + 3_000, "4,000 throws from leaves: {on} walks, {off} with throw_leaves=off");
}

/// A run of `main` with agent options `opts` plus a store and a log in a new directory
/// (`summary=off,loglevel=info`): the directory, the outcome, the log's text and the store.
fn run_logged(main: &str, opts: &str) -> (tempfile::TempDir, Outcome, String, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (store, log) = (tmp.path().join("store"), tmp.path().join("agent.log"));
    // (Empty items between commas are ignored.)
    let opts = format!("out={},summary=off,loglevel=info,log={},{opts}", store.display(), log.display());
    let out = run_java(main, &opts, &[]);
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    (tmp, out, log_text, store)
}

/// The count before `what` in the agent's closing line (`loglevel=info`): "…, 12 walks, …".
fn logged_count(log_text: &str, what: &str) -> u64 {
    let label = format!(" {what},");
    let count = log_text.lines().find_map(|l| l.split(&label).next().filter(|_| l.contains(&label))?.rsplit(' ').next()?.parse().ok());
    count.unwrap_or_else(|| panic!("no count of {what} in the agent log:\n{log_text}"))
}

/// A loop of 20,000 iterations of `main` (system property `property`) must not walk per
/// iteration: under 2,000 walks more than one iteration.
fn assert_loop_does_not_walk(main: &str, property: &str, what: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let few = walks_of(tmp.path(), main, property, 1);
    let many = walks_of(tmp.path(), main, property, 20_000);
    assert!(many < few + 2_000, "20,000 {what} took {many} walks against {few} for one");
}

/// The JVM calls `Finalizer.register` from the `return` of `Object.<init>`: exact in every
/// entry (sample=1, where the rewriter puts a call probe before that `return`), and not by a
/// walk per finalizable object in full encoding, where `Object.<init>` is a leaf and so is
/// `Finalizer.register` (its constructor's chain ends in `Object.<init>`). With
/// `leaf_callers=own`, which counts on no other class's leaves, `Finalizer.register` is no leaf
/// and each registration walks; the walk then takes its caller's record from the thread's slot,
/// not from the locals of the constructor that called `Object.<init>` (a safepoint each). The Reference Handler and
/// Finalizer threads, restarted on rewritten code, enqueue and finalize them all, exactly,
/// without a walk per object (their obsolete loops took three), and the old threads are gone.
/// An empty finalizer keeps a class's instances unregistered.
#[test]
fn finalizers() {
    Scenario::new("LiveFinalizers")
        .sample()
        .expect(&["tracked-ctor-0", "finalizers-done-true", "finalize-on-Finalizer-8-true-null", "finalized-all-true", "finalizer-threads-1", "reference-handlers-1", "cancelled-unregistered-true"])
        .run();
    assert_loop_does_not_walk("LiveFinalizers", "finalizers.n", "finalizable objects");
    let tmp = tempfile::tempdir().expect("tempdir");
    let counts = |n| {
        let log = logged_run(tmp.path(), "LiveFinalizers", "finalizers.n", n, ",leaf_callers=own");
        (logged_count(&log, "walks"), logged_count(&log, "walks that read a frame's context"))
    };
    let (few, few_reads) = counts(1);
    let (many, many_reads) = counts(20_000);
    assert!(many >= few + 20_000, "with leaf_callers=own, 20,000 registrations took {many} walks against {few}: not the path to test");
    assert!(many_reads < few_reads + 2_000, "20,000 registrations read {many_reads} frames' contexts against {few_reads} for one");
    // With a class cache, filled by one run and served in the next, `Finalizer.register` is a
    // leaf too: the records keep the leaves of other classes their leaf callers count on.
    let cache = tmp.path().join("cache");
    let json = tmp.path().join("summary.json");
    logged_run(tmp.path(), "LiveFinalizers", "finalizers.n", 1, &format!(",cache={}", cache.display()));
    let walks = |n| logged_count(&logged_run(tmp.path(), "LiveFinalizers", "finalizers.n", n, &format!(",cache={},json={}", cache.display(), json.display())), "walks");
    let (few, many) = (walks(1), walks(20_000));
    assert!(many < few + 2_000, "with a class cache, 20,000 registrations took {many} walks against {few} for one");
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON summary")).expect("summary JSON");
    let c = &summary["class_cache"];
    assert!(c["hits"].as_u64().unwrap() > 300 && c["refused"].as_u64().unwrap() < 10, "{c}");
}

/// VarHandle and MethodHandle calls are linked straight to methods of other names; once known,
/// such a pair must be entered from the call site's record, not by a walk per call.
#[test]
fn method_handle_calls_do_not_walk() {
    assert_loop_does_not_walk("LiveHandles", "handles.n", "handle calls");
}

/// A hot site with three callees and callers of several depths: entries from the threads'
/// answer caches and the memo must keep callees and caller versions apart, with and without
/// sampling (the sampled entries' callers were entered on that path too). The sampled run has
/// answer caches of two entries, so that keys collide all the time and the cache's check, not
/// its hash, must tell them apart.
#[test]
fn hot_polymorphic_site() {
    let (tmp, _) = Scenario::new("LiveSites").expect(&["seg-end", "tail-inc", "tail-dbl", "tail-neg"]).run();
    let store = tmp.path().join("sampled");
    let out = run_java("LiveSites", &format!("out={},sample=97,verify=1,answer_cache=2,summary=off", store.display()), &[]);
    assert_eq!(out.code, Some(0), "LiveSites (sample=97) failed:\n{}", out.stderr);
    let v = verify("LiveSites (sample=97)", &store);
    assert!(v.verified > 10_000, "LiveSites (sample=97): only {} verified events", v.verified);
}

#[test]
fn class_initialization() {
    Scenario::new("LiveClinit")
        .sample()
        .expect(&[
            "clinit-by-field",
            "clinit-compute-3",
            "clinit-by-call",
            "by-call-body",
            "clinit-by-new",
            "by-new-ctor",
            "clinit-outer-before",
            "clinit-inner",
            "clinit-outer-after",
            "clinit-by-forname",
            "clinit-starts-thread",
            "clinit-thread-run",
            "clinit-thread-deeper",
            "enum-ctor-GREEN",
            "enum-clinit",
            "clinit-from-leaf",
            "main-end",
        ])
        .run();
}

#[test]
fn custom_class_loader() {
    Scenario::new("LiveLoader")
        .expect(&[
            "loadClass-LiveLoadedA",
            "define-LiveLoadedA",
            // The JVM asks the loader for lucce's runtime class from the entry probe of the first
            // class it defined, before that frame has a context: the mark must still be exact.
            "loadClass-lucce.Runtime",
            "loaded-true",
            "loadedA-clinit",
            "loadedA-run-3",
            "loadClass-LiveLoadedB",
            "loadedB-twice-3",
            "loadClass-LiveLoadedC",
            "loadedC-get",
        ])
        .run();
}

/// Classes served from the class cache (`cache=DIR`) give the same exact traces: the first run
/// fills the cache, the second takes its classes from it (every id there an Integer constant,
/// which the recorder also reads when the JVM calls out of an entry probe: `LiveLoader`).
#[test]
fn classes_from_the_class_cache() {
    let cache = tempfile::tempdir().expect("tempdir");
    let summaries = tempfile::tempdir().expect("tempdir");
    for (main, marks) in [
        ("LiveLoader", &["loadClass-LiveLoadedA", "loadClass-lucce.Runtime", "loadedA-run-3", "loadedB-twice-3", "loadedC-get"][..]),
        ("LiveLambdas", &["lambda-capturing-2", "bound-ref-bob-amy", "stream-map-6", "mh-virtual-eve-9", "mh-filter-quiet"][..]),
    ] {
        for run in ["fills", "serves"] {
            let json = summaries.path().join(format!("{main}-{run}.json"));
            let opts = format!("cache={},json={}", cache.path().display(), json.display());
            Scenario::new(main).jvm(&["-Xverify:all"]).agent(&opts).expect(marks).run();
            let text = std::fs::read_to_string(&json).expect("JSON summary");
            let c = serde_json::from_str::<serde_json::Value>(&text).expect("summary JSON")["class_cache"].clone();
            let (hits, misses) = (c["hits"].as_u64().unwrap(), c["misses"].as_u64().unwrap());
            assert_eq!(c["unusable"], 0, "{main} {run}: {c}");
            if run == "serves" {
                // Both mains' classes are there now; a rebuilt JDK class may differ now and then.
                assert!(hits > 300 && misses <= 3, "{main} {run}: {c}");
            }
        }
    }
}

/// `lucce record` runs the command with the agent through `JAVA_TOOL_OPTIONS`, keeps rewritten
/// classes in the class cache it is given (a second run serves them) or none with
/// `--no-class-cache`, and says where the store is.
#[test]
fn lucce_record_and_its_class_cache() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    let record = |out: &Path, cache_flag: &[&OsString]| {
        let mut cmd = Command::new(lucce_bin());
        no_java_options(&mut cmd);
        // Where the default cache would go: a test must not write to the user's.
        cmd.env("XDG_CACHE_HOME", tmp.path().join("xdg")).env_remove("LUCCE_CLASS_CACHE");
        cmd.env("LUCCE_AGENT", agent_lib()).arg("record").arg("--out").arg(out).args(cache_flag);
        cmd.args(["--agent-opts", "verify=1", "--", tool("java").to_str().unwrap(), "-Xverify:all", "-cp"]).arg(classes()).arg("LiveLoader");
        let what = format!("lucce record {}", out.display());
        let o = run(cmd, &what);
        assert_eq!(o.code, Some(0), "{what}: {}", o.stderr);
        let stores = lucce_log_format::stores_below(out);
        assert_eq!(stores.len(), 1, "{what}: stores {stores:?}; stderr {}", o.stderr);
        assert!(o.stderr.contains(&format!("lucce: store {}", stores[0].display())), "{what}: {}", o.stderr);
        let v = verify(&what, &stores[0]);
        assert!(v.events > 5 && v.verified == v.events, "{what}: {} events, {} verified", v.events, v.verified);
        (o.stdout, stores[0].clone())
    };
    let cache_files = |dir: &Path| std::fs::read_dir(dir).map_or(0, |d| d.count());
    let flag: OsString = "--class-cache".into();
    let dir: OsString = cache.clone().into();
    let (first, _) = record(&tmp.path().join("r1"), &[&flag, &dir]);
    assert_eq!(cache_files(&cache), 2, "the pack and its index");
    let pack_len = || std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).max().unwrap();
    let filled = pack_len();
    let (second, _) = record(&tmp.path().join("r2"), &[&flag, &dir]);
    assert_eq!(first, second);
    // Served, not rewritten and kept again (a rebuilt JDK class may differ now and then).
    assert!(pack_len() < filled + filled / 20, "the pack grew from {filled} to {} bytes", pack_len());
    record(&tmp.path().join("r3"), &[&"--no-class-cache".into()]);
    assert_eq!(cache_files(&tmp.path().join("xdg")), 0, "--no-class-cache wrote a cache");
    record(&tmp.path().join("r4"), &[]);
    assert_eq!(cache_files(&tmp.path().join("xdg/lucce/classes")), 2, "no cache at the default place");

    // Again into r1, which holds a store: only the new one is reported. Then a command that
    // starts no JVM: nothing recorded, exit status 1.
    let again = |out: &Path, command: &[&OsStr]| {
        let mut cmd = Command::new(lucce_bin());
        no_java_options(&mut cmd);
        cmd.env("LUCCE_AGENT", agent_lib()).arg("record").arg("--out").arg(out).arg("--no-class-cache").arg("--").args(command);
        run(cmd, &format!("lucce record {}", out.display()))
    };
    let r1 = tmp.path().join("r1");
    let old = lucce_log_format::stores_below(&r1);
    let o = again(&r1, &[tool("java").as_os_str(), OsStr::new("-cp"), classes().as_os_str(), OsStr::new("LiveLoader")]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let new: Vec<_> = lucce_log_format::stores_below(&r1).into_iter().filter(|s| !old.contains(s)).collect();
    assert_eq!((old.len(), new.len()), (1, 1), "{}", o.stderr);
    assert!(o.stderr.contains(&format!("lucce: store {}", new[0].display())), "{}", o.stderr);
    assert!(!o.stderr.contains(&old[0].display().to_string()) && o.stderr.contains("1 store(s) of earlier runs"), "{}", o.stderr);
    let o = again(&tmp.path().join("r5"), &[OsStr::new("true")]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("no JVM recorded anything"), "{}", o.stderr);
}

/// `lucce record … 2>&1 | head -1`: lucce's own lines meet a closed stderr. They are lost, but
/// the exit status stays the program's and the store is complete (a panic gave 101).
#[test]
fn lucce_record_with_its_stderr_closed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("r");
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut cmd = Command::new(lucce_bin());
    no_java_options(&mut cmd);
    cmd.env("LUCCE_AGENT", agent_lib()).arg("record").arg("--out").arg(&out).arg("--no-class-cache");
    // The JVM's own "Picked up JAVA_TOOL_OPTIONS" line would kill it with SIGPIPE before it
    // installs its handlers; ignored, it stays ignored across exec, as in a shell that set it.
    let java = format!("trap '' PIPE; exec {} -cp {} LiveLoader", tool("java").display(), classes().display());
    cmd.args(["--agent-opts", "verify=1", "--", "sh", "-c", &java]);
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(writer);
    let mut child = jvm_support::KillOnDrop(cmd.spawn().expect("spawn lucce record"));
    let status = child.0.wait().expect("wait for lucce record");
    assert_eq!(status.code(), Some(0), "lucce record with a closed stderr");
    let stores = lucce_log_format::stores_below(&out);
    assert_eq!(stores.len(), 1, "stores {stores:?}");
    let v = verify("lucce record with a closed stderr", &stores[0]);
    assert!(v.events > 5 && v.verified == v.events, "{} events, {} verified", v.events, v.verified);
}

/// Ctrl-\ and Ctrl-C at a terminal reach its whole foreground process group: the JVM prints a
/// thread dump, then ends. `lucce record` outlives both, waits until the JVM has closed its
/// store, says where it is and exits with the JVM's status. It died of them before: of Ctrl-\
/// at once, the JVM running on; of Ctrl-C while the JVM still wrote its store. A SIGTERM sent
/// to `lucce record` alone reaches the JVM the same way.
#[test]
fn lucce_record_outlives_ctrl_c() {
    use std::io::{BufRead, Read};
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;

    /// The process group of `lucce record` and its JVM, killed if the test ends early.
    struct Group(i32);
    impl Drop for Group {
        fn drop(&mut self) {
            // SAFETY: kill with a negative pid signals a process group, which may be gone.
            unsafe { libc::kill(-self.0, libc::SIGKILL) };
        }
    }
    let kill = |pid: i32, signal: i32| {
        // SAFETY: kill takes any pid and signal number; no memory involved.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill -{signal} {pid}");
    };

    /// Sends signals, given the group's leader (`lucce record`) and a function that waits for a
    /// line of the JVM's output.
    type Signals<'a> = &'a dyn Fn(i32, &mut dyn FnMut(&str));

    let tmp = tempfile::tempdir().expect("tempdir");
    // After `signals`, `lucce record` must end with `code`.
    let record = |name: &str, code: i32, signals: Signals| {
        let out = tmp.path().join(name);
        let mut cmd = Command::new(lucce_bin());
        no_java_options(&mut cmd);
        cmd.env("LUCCE_AGENT", agent_lib()).arg("record").arg("--out").arg(&out).arg("--no-class-cache");
        cmd.args(["--agent-opts", "sample=5,verify=1", "--"]).arg(tool("java")).arg("-cp").arg(classes()).arg("LiveWaits");
        cmd.process_group(0).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn lucce record");
        let group = Group(child.id() as i32);
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut wait_for = |text: &str| loop {
            match stdout.next() {
                Some(Ok(line)) if line.contains(text) => break,
                Some(Ok(_)) => {}
                _ => panic!("{name}: the JVM's output ended before {text:?}"),
            }
        };
        wait_for("ready 50");
        signals(group.0, &mut wait_for);
        let mut stderr = String::new();
        child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read stderr");
        let status = child.wait().expect("wait for lucce record");
        assert_eq!(status.code(), Some(code), "{name}: lucce record's status ({status:?}), the JVM's:\n{stderr}");
        let stores = lucce_log_format::stores_below(&out);
        assert_eq!(stores.len(), 1, "{name}: stores {stores:?}; stderr {stderr}");
        assert!(stderr.contains(&format!("lucce: store {}", stores[0].display())), "{name}: {stderr}");
        let v = verify(name, &stores[0]);
        assert!(v.verified > 0, "{name}: no event verified");
    };
    record("ctrl-c", 130, &|leader, wait_for| {
        kill(-leader, libc::SIGQUIT);
        wait_for("Full thread dump");
        kill(-leader, libc::SIGINT);
    });
    record("sigterm", 143, &|leader, _| kill(leader, libc::SIGTERM));
}

#[test]
fn custom_class_loader_with_method_ids_past_sipush() {
    Scenario::new("LiveLoaderHighIds")
        .expect(&["loadClass-LiveLoadedA", "define-LiveLoadedA", "loadClass-lucce.Runtime", "loadedA-run-3", "loadedC-get"])
        .run();
}

/// Frames that go on running a version of their method that a retransformation replaced (what
/// a debugger's HotSwap leaves too): lucce's hook rewrites the class again with new ids. The
/// JVM's traces show such frames without their source file, and the events above them are
/// encoded anew to match (recorder.rs, `Replacements`). Before, walks stopped at such a frame,
/// so the marks entered below it were truncated, and those in frames entered before the
/// redefinition (`loop-retransformed`, `recurse-return`, `main-end`) named the file. Three
/// times: with the ids pushed inline (and every entry sampled), from the pool, and with the
/// Java agent attached by the program itself: the JVM then hands the retransformation lucce's
/// own rewrite, which the load hook left as it was, so the JVM kept the methods (equal code) and
/// the old frames were not obsolete to JVMTI; now their probes are turned off and the class
/// rewritten again (rewrite/unprobe.rs).
#[test]
fn frames_of_a_replaced_version() {
    let jar = transformer_jar();
    let attach = format!("attach={}", jar.display());
    let expect = &["work-before", "loop-retransformed", "work-after", "loop-end", "recurse-return", "main-end"];
    for how in ["javaagent", "high", "attach"] {
        let mut scenario = Scenario::new("LiveRedefined").expect(expect);
        let args = [attach.as_str()];
        match how {
            "javaagent" => {
                scenario.jvm_args.push(OsString::from(format!("-javaagent:{}=keep", jar.display())));
                scenario = scenario.sample();
            }
            "high" => {
                scenario.jvm_args.push(OsString::from(format!("-javaagent:{}=keep", jar.display())));
                scenario.args = &["high"];
            }
            _ => {
                scenario.jvm_args.push(OsString::from("-Djdk.attach.allowAttachSelf=true"));
                scenario.args = &args;
            }
        }
        let (_, out) = scenario.run();
        assert!(out.stdout.contains("result 25\n"), "{how}: {}", out.stdout);
    }
}

/// A method whose site probes do not fit in 64 KiB keeps an entry probe, so its frame shows in
/// the traces of what it calls (before stop 62 it was left as it was, and its callee decoded
/// under its caller).
#[test]
fn methods_too_large_for_site_probes() {
    Scenario::new("LiveHugeMethod").sample().expect(&["huge-1", "huge-3000", "huge-6000", "after-6000"]).run();
}

#[test]
fn synchronized_default_bridge_enum_switch() {
    Scenario::new("LiveMisc")
        .expect(&[
            "sync-instance",
            "sync-static",
            "sync-block-nested",
            "default-Square",
            "override-default",
            "default-Circle",
            "interface-static",
            "compareTo-5.0-4.0",
            "bridge-get",
            "enum-method-MUL",
            "enum-body-ADD",
            "switch-enum-other",
            "switch-alpha",
            "switch-beta-gamma-gamma",
            "switch-Aa",
            "switch-BB",
            "switch-default-delta",
            "varargs-3",
            "inner-class",
            "anonymous",
            "local-class",
        ])
        .run();
}

#[test]
fn jni_callbacks() {
    let (_tmp, out) = Scenario::new("LiveJni")
        .jvm(&[&format!("-Dlive.jni={}", jni_lib().display())])
        .sample()
        .expect(&["jni-static-2", "jni-static-0", "jni-instance-7", "jni-helper-7", "jni-runnable", "jni-anon", "jni-attached", "main-end",
            "loadClass-LiveJni", "loadClass-LiveLoadedJniY", "jni-after-resolution-1",
            "loadClass-LiveLoadedJniX", "loadClass-LiveLoadedJniZ", "jni-after-native-2"])
        .run();
    // The native frames were in Throwable's stacks (and left out of the comparison by the rule).
    assert!(out.stdout.contains("\tLiveJni\tcallStatic\tLiveJni.java\t-2\t"), "no native frame under a callback:\n{}", out.stdout);
}

/// `#token` lines: name -> (token, label of the mark on the same line, or "").
fn parse_tokens(stdout: &str) -> BTreeMap<String, (u64, String)> {
    let mut tokens = BTreeMap::new();
    for line in stdout.lines().filter(|l| l.starts_with("#token\t")) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 4, "malformed #token line: {line}");
        let t: u64 = f[2].parse().unwrap_or_else(|_| panic!("bad token in {line}"));
        assert!(tokens.insert(f[1].to_string(), (t, f[3].to_string())).is_none(), "token {} printed twice", f[1]);
    }
    tokens
}

/// `lucce decode STORE @TOKEN --json`: the frames and whether they are truncated.
fn decode_token(store: &Path, token: u64) -> (Vec<Frame>, bool) {
    let out = run_lucce(&[&"decode".into(), &store.into(), &format!("@{token}").into(), &"--json".into()]);
    assert_eq!(out.code, Some(0), "lucce decode @{token} failed:\n{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line per id: {}", out.stdout);
    let v: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON");
    // A token is no event: it names itself and has no sequence number or thread of its own.
    assert_eq!(v["token"].as_u64(), Some(token), "a decoded token names itself: {v}");
    assert!(v.get("seq").is_none() && v.get("thread").is_none(), "a token is not an event: {v}");
    (json_frames(&v["frames"]), v["truncated"].as_bool().expect("truncated"))
}

/// Runs LiveTokens once per test process (two tests look at it); returns its store and output.
fn tokens_run() -> &'static (PathBuf, Outcome) {
    static RUN: OnceLock<(PathBuf, Outcome)> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = process_dir("tokens");
        let out = Scenario::new("LiveTokens").expect(&["mark-main1", "mark-main2", "mark-deep5", "mark-thread"]).run_in(&dir);
        (dir.join("store0"), out)
    })
}

#[test]
fn context_tokens_equal_iff_contexts_equal() {
    let (store, out) = tokens_run();
    let tokens = parse_tokens(&out.stdout);
    assert!(tokens.values().all(|(t, _)| *t > 0), "tokens must be positive: {tokens:?}");
    // Names are GROUP/N: one context per group (a loop on one line, or two threads running the
    // same code), a different context for each group.
    let mut groups: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for (name, (t, _)) in &tokens {
        groups.entry(name.split_once('/').expect("GROUP/N").0).or_default().insert(*t);
    }
    let want: BTreeSet<&str> = [
        "loop", "viaA", "viaB", "rec3", "rec4", "direct", "other-line", "at-main1", "at-main2", "at-deep5", "thread", "at-thread",
    ]
    .into_iter()
    .collect();
    assert_eq!(groups.keys().copied().collect::<BTreeSet<_>>(), want, "token groups printed");
    let mut problems = Vec::new();
    for (g, ts) in groups.iter().filter(|(_, ts)| ts.len() > 1) {
        let mut p = format!("group {g}: one context, {} tokens:", ts.len());
        for t in ts {
            let (frames, truncated) = decode_token(store, *t);
            p.push_str(&format!("\n  @{t} (truncated {truncated}) decodes to:{}", show(&frames)));
        }
        problems.push(p);
    }
    let mut owner: BTreeMap<u64, &str> = BTreeMap::new();
    for (g, ts) in &groups {
        for t in ts {
            if let Some(other) = owner.insert(*t, g) {
                problems.push(format!("groups {other} and {g} (different contexts) share token {t}"));
            }
        }
    }
    assert!(problems.is_empty(), "equal contexts must give equal tokens, different ones different tokens ({tokens:?}):\n{}", problems.join("\n"));
}

#[test]
fn context_token_decodes_like_the_mark_on_its_line() {
    let (store, out) = tokens_run();
    let tokens = parse_tokens(&out.stdout);
    let heres = parse_heres(&out.stdout);
    let at: Vec<_> = tokens.iter().filter(|(n, _)| n.starts_with("at-")).collect();
    assert_eq!(at.len(), 4, "{tokens:?}");
    for (name, (t, label)) in at {
        let expected = heres.get(label).unwrap_or_else(|| panic!("{name}: no #here line for {label:?}"));
        let (decoded, truncated) = decode_token(store, *t);
        assert!(!truncated, "{name}: @{t} decodes truncated:{}", show(&decoded));
        assert!(
            decoded == *expected,
            "MISMATCH {name}: @{t} decodes differently from mark {label:?}\n  expected:{}\n  decoded:{}",
            show(expected),
            show(&decoded)
        );
    }
    // A token this store never handed out is an error, not some other context.
    let out = run_lucce(&[&"decode".into(), &store.into(), &"@999999999".into()]);
    assert_ne!(out.code, Some(0), "an unknown token must be an error: {}", out.stdout);
}

/// A program started as a named module (`java -p DIR -m MODULE/MAIN`) whose boot layer lacks
/// jdk.unsupported, as javap's does: every probe still counts and records. (The probes used
/// `sun.misc.Unsafe`, from that module; the runtime class could not initialize, and such a
/// program's store held no thread and no event, silently.)
#[test]
fn modular_program_without_jdk_unsupported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let modules = tmp.path().join("modules");
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/live_modules");
    tool_ok(Command::new(tool("javac")).arg("-g").arg("--module-source-path").arg(&sources).args(["-m", "example.modular", "-d"]).arg(&modules));
    let java = |agent_options: &str| {
        let mut cmd = Command::new(tool("java"));
        no_java_options(&mut cmd).arg(agent_arg(agent_options));
        cmd.arg("-p").arg(&modules).args(["-m", "example.modular/example.modular.Main"]);
        let what = format!("java -m example.modular ({agent_options})");
        let o = run(cmd, &what);
        assert_eq!(o.code, Some(0), "{what}: {}", o.stderr);
        assert_eq!(o.stdout, "jdk.unsupported in the boot layer: false\nfib(22) = 17711\n", "{what}");
        assert!(!o.stderr.contains("lucce-agent:"), "{what}: {}", o.stderr);
        o
    };

    // Counting: fib alone enters 57,313 times.
    let summary = tmp.path().join("summary.json");
    java(&format!("summary=off,json={}", summary.display()));
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).expect("summary")).expect("summary JSON");
    assert!(summary["entries"].as_u64().expect("entries") > 57_313, "{summary}");

    // Recording: events inside the module's recursion, each checked against the JVM's stack.
    let store = tmp.path().join("store");
    java(&format!("out={},sample=97,verify=1,summary=off", store.display()));
    let v = verify("java -m example.modular", &store);
    assert!(v.verified > 500 && v.verified == v.events, "{} events, {} verified", v.events, v.verified);
    let in_fib = events_json(&store)
        .iter()
        .filter(|v| json_frames(&v["frames"]).first().is_some_and(|f| f.class == "example.modular.Main" && f.method == "fib"))
        .count();
    // 57,313 entries of fib, one in 97 an event (fewer on threads that sampled elsewhere first).
    assert!(in_fib > 400, "{in_fib} events in fib");
}

/// A Java agent whose transformer changes a class: lucce must rewrite what the Java agent made,
/// not the other way round. Three modes: the transformer replaces the class as it loads, does so
/// registered to retransform, or replaces it when it retransforms the class after it loaded;
/// each with the Java agent given at startup (`-javaagent`, after lucce's agent, as `lucce
/// record` orders them: `JAVA_TOOL_OPTIONS` comes first) and attached while the JVM runs
/// (LiveAttach, through the Attach API). (Hooked from its environment made at load, lucce's
/// rewrite came first and the Java agent's bytes replaced it: here every frame of the class was
/// then uninstrumented and 91,450 of 105,256 events truncated. With a load hook that cannot
/// retransform, the two retransforming modes at startup gave 3,948 events, every one truncated;
/// with a hook that stays where it was made, the attached modes failed.)
#[test]
fn java_agent_transforming_classes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/live_javaagent");
    let javac = |out: &str, classpath: Option<&Path>, sources: &[PathBuf]| {
        let mut cmd = Command::new(tool("javac"));
        cmd.arg("-g").arg("-d").arg(tmp.path().join(out));
        if let Some(cp) = classpath {
            cmd.arg("-cp").arg(cp);
        }
        tool_ok(cmd.args(sources));
        tmp.path().join(out)
    };
    let plain = javac("plain", None, &java_sources(&dir.join("plain")));
    let variant = javac("variant", Some(&plain), &java_sources(&dir.join("variant")));
    let jar = transformer_jar();

    for (mode, attached) in ["load", "load-retransforming", "retransform"].into_iter().flat_map(|m| [(m, false), (m, true)]) {
        let what = format!("java {} Java agent, mode {mode}", if attached { "attaching a" } else { "-javaagent:" });
        let store = tmp.path().join(format!("store-{mode}-{attached}"));
        let mut cmd = Command::new(tool("java"));
        // Only these classes: every entry of the JDK's too made this run ten times longer.
        no_java_options(&mut cmd).arg(agent_arg(&format!("out={},sample=1,verify=1,summary=off,include=LiveA*", store.display())));
        let agent_opts = format!("{mode}:{}", variant.join("LiveAgentTarget.class").display());
        if attached {
            cmd.arg("-Djdk.attach.allowAttachSelf=true").arg("-cp").arg(&plain).arg("LiveAttach").arg(jar).arg(agent_opts);
        } else {
            cmd.arg(format!("-javaagent:{}={agent_opts}", jar.display())).arg("-cp").arg(&plain).arg("LiveAgentTarget");
        }
        let out = run(cmd, &what);
        assert_eq!(out.code, Some(0), "{what}: {}", out.stderr);
        // The variant ran: fib(15) enters f 1,973 times, and main calls hit once more.
        assert_eq!(out.stdout, "fib(15) = 610, hits 1974\n", "{what}");
        verify(&what, &store);
        let (mut bumps, mut truncated) = (0, 0);
        for v in events_json(&store) {
            let frames = json_frames(&v["frames"]);
            if frames.first().is_some_and(|f| f.class == "LiveAgentHits" && f.method == "bump") {
                bumps += 1;
                truncated += u32::from(v["truncated"].as_bool() == Some(true));
                assert!(frames.iter().any(|f| f.class == "LiveAgentTarget"), "{what}: {frames:?}");
            }
        }
        assert_eq!((bumps, truncated), (1974, 0), "{what}: events in LiveAgentHits.bump, and of them truncated");
    }
}

// ---------------------------------------------------------------------------------------------
// Random programs

/// The seeds [`random_programs_decode_exactly`] runs: `LUCCE_RANDOM_SEEDS` (`1-200`, `7,9,12`)
/// for a longer search, else a few.
fn random_seeds() -> Vec<u64> {
    let Ok(spec) = std::env::var("LUCCE_RANDOM_SEEDS") else {
        return (1..=4).collect();
    };
    let mut seeds = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || panic!("LUCCE_RANDOM_SEEDS: {part:?} is neither a seed nor a range FROM-TO");
        match part.split_once('-') {
            Some((a, b)) => seeds.extend(a.parse::<u64>().unwrap_or_else(|_| bad())..=b.parse::<u64>().unwrap_or_else(|_| bad())),
            None => seeds.push(part.parse().unwrap_or_else(|_| bad())),
        }
    }
    seeds
}

/// Rounds of a random program's calls in its sampling run (see [`random_programs_decode_exactly`]).
const HOT_ROUNDS: u32 = 600;

/// Keeps a failed test's directory (the generated sources, the stores, the agent's logs) and says
/// where it is.
struct KeepOnPanic(Option<tempfile::TempDir>);

impl Drop for KeepOnPanic {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            if std::thread::panicking() {
                eprintln!("kept for inspection: {}", dir.keep().display());
            }
        }
    }
}

/// Programs nobody wrote by hand (tests/jvm_support/random_java.rs: every kind of call, JNI
/// callbacks among them, in try/catch/finally, loops, switches, threads and pools, recursions up
/// to thousands of frames deep, static initializers reached mid-call, plugins defined by a class
/// loader of the program's own, exceptions unwinding several frames). For each seed: without the
/// agent, then with it (`verify=1`, every class verified by the JVM); then sampling method entries
/// with the class through which `main` calls left out: for even seeds hot, its calls repeated
/// until C2 compiles them (`sample=997,verify=1`, against a hot run without the agent), for odd
/// seeds with more classes left out (`sample=211,verify=1`). The same output with and without
/// the agent, every mark decodes to what `Throwable` showed, and `lucce verify` finds no
/// mismatch. A failure names the seed and keeps the directory.
#[test]
fn random_programs_decode_exactly() {
    let keep = KeepOnPanic(Some(tempfile::tempdir().expect("tempdir")));
    let dir = keep.0.as_ref().unwrap().path().to_path_buf();
    let (src, gen_classes) = (dir.join("src"), dir.join("classes"));
    std::fs::create_dir_all(&src).unwrap();
    let seeds = random_seeds();
    let programs: Vec<_> = seeds.iter().map(|&s| jvm_support::random_java::program(s)).collect();
    for (name, text) in programs.iter().flat_map(|p| &p.files) {
        std::fs::write(src.join(name), text).unwrap();
    }
    let stub_classes = classes().parent().expect("the stub's directory").join("stub-classes");
    let compile_cp = std::env::join_paths([stub_classes.as_path(), classes()]).unwrap();
    tool_ok(Command::new(tool("javac")).arg("-g").arg("-cp").arg(&compile_cp).arg("-d").arg(&gen_classes).args(java_sources(&src)));
    let cp = std::env::join_paths([gen_classes.as_path(), classes()]).unwrap();
    // Without the agent the stub stands in for `lucce.Lucce` (its mark does nothing).
    let plain_cp = std::env::join_paths([gen_classes.as_path(), classes(), &stub_classes]).unwrap();
    for (seed, p) in seeds.iter().zip(&programs) {
        let main = p.main_class.as_str();
        // The second run samples method entries. For even seeds it is hot: `main` runs its calls
        // HOT_ROUNDS times (marks only in the last round), long enough for C2 to compile the
        // busiest functions, probes included. Both leave out the class through which `main`
        // calls (`E`): calls from code lucce cannot see take remembered contexts, and `lucce
        // verify` leaves those frames out of the JVM's stacks too; `E` catches what a call on
        // null threw and calls on (C2 throws a preallocated exception, which no constructor
        // entry sees). Odd seeds leave out one of the program's classes and the JDK's streams
        // too (a stream's pipeline calling a lambda), once: such calls walk the stack, too slow
        // to repeat hundreds of times; and with samples far apart: each keeps the JVM's stack.
        // Given a number of rounds (both runs here), a program keeps its recursions 10 to 17
        // frames deep (random_java.rs, SHALLOW).
        let hot_rounds = HOT_ROUNDS.to_string();
        let (sampled, sampled_args) = if seed % 2 == 0 {
            (format!("sample=997,verify=1,exclude={}E", p.prefix), vec![hot_rounds.as_str()])
        } else {
            (format!("sample=211,verify=1,exclude={0}E;{0}C1;java.util.stream.*", p.prefix), vec!["1"])
        };
        // The JNI route's library, in the runs without the agent too. Nested recursions make
        // traces of more than the JVM's 1,024 frames (Throwable shows them whole), up to about
        // 16,000, and some need more than 8 MB of stack without the agent (a run of seed 4 with
        // an agent overflowed 16 MB): 64 MB, which a thread only reserves.
        let jni = format!("-Dlive.jni={}", jni_lib().display());
        let common = ["-XX:MaxJavaStackTraceDepth=100000", "-Xss64m", jni.as_str()];
        let verified = [&["-Xverify:all"][..], &common[..]].concat();
        for (i, (mode, jvm, args)) in [("verify=1", &verified[..], &[][..]), (sampled.as_str(), &common[..], &sampled_args[..])].into_iter().enumerate() {
            let what = format!("seed {seed}, {main} {} ({mode})", args.join(" "));
            let mut plain = Command::new(tool("java"));
            no_java_options(&mut plain).args(common).arg("-cp").arg(&plain_cp).arg(main).args(args);
            let expected = run(plain, main);
            assert_eq!(expected.code, Some(0), "{what}: failed without the agent:\n{}", expected.stderr);
            let heres = parse_heres(&expected.stdout);
            let (store, log) = (dir.join(format!("store-{seed}-{i}")), dir.join(format!("agent-{seed}-{i}.log")));
            let opts = format!("out={},{mode},summary=off,log={}", store.display(), log.display());
            let jvm: Vec<OsString> = jvm.iter().map(OsString::from).collect();
            let out = assert_clean_exit(&what, run_java_on(&cp, main, args, &opts, &jvm, None), &log);
            if out.stdout != expected.stdout {
                let (line, (a, b)) = expected.stdout.lines().zip(out.stdout.lines()).enumerate().find(|(_, (a, b))| a != b).unwrap_or((0, ("", "")));
                panic!("{what}: the output differs from the run without the agent, first at line {}:\n without: {a}\n with: {b}", line + 1);
            }
            let v = verify(&what, &store);
            if i == 0 {
                check_marks(&what, &heres, &store);
                assert_eq!((v.events, v.verified), (heres.len() as u64, heres.len() as u64), "{what}: one verified event per mark");
            } else {
                assert!(v.verified == v.events && v.events > heres.len() as u64, "{what}: every sample verified, and more events than marks: {v:?}");
            }
            eprintln!("{what}: {} marks, {} events, {} verified", heres.len(), v.events, v.verified);
        }
    }
}
