//! Shared by the tests that run real JVMs: the JDK's tools, the agent library (built on first
//! use), and child processes run to their end under a timeout, killed if a test gives up.

#![allow(dead_code)]

pub mod random_java;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one child process may run.
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// JAVA_HOME, else Debian's JDK 17, else the JDK whose `javac` is on PATH.
pub fn java_home() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("JAVA_HOME") {
        let h = PathBuf::from(h);
        if h.join("bin/javac").exists() {
            return Some(h);
        }
    }
    let deb = PathBuf::from("/usr/lib/jvm/java-17-openjdk-amd64");
    if deb.join("bin/javac").exists() {
        return Some(deb);
    }
    // javac on PATH: JAVA_HOME is two levels above the real file.
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("javac"))
        .find(|p| p.exists())
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
}

/// A JDK tool (`java`, `javac`), by name on PATH when no JDK was found.
pub fn tool(name: &str) -> PathBuf {
    java_home().map(|h| h.join("bin").join(name)).unwrap_or_else(|| PathBuf::from(name))
}

/// A fresh directory for what a test process makes once and keeps to its end (compiled
/// classes, the JNI library, a recording several tests read): `target/tmp/lucce-PID-WHAT`. A `TempDir` in a static is never
/// dropped and stayed in /tmp after every run; these are removed by the next test process, which
/// first sweeps the directories of processes that have ended.
pub fn process_dir(what: &str) -> PathBuf {
    static SWEPT: OnceLock<()> = OnceLock::new();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    SWEPT.get_or_init(|| {
        let ended = |name: &str| {
            let pid = name.strip_prefix("lucce-").and_then(|r| r.split('-').next());
            pid.and_then(|p| p.parse::<u32>().ok()).is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists())
        };
        for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
            if entry.file_name().to_str().is_some_and(ended) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
    let dir = root.join(format!("lucce-{}-{what}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Builds (once per test process) and returns the agent library: LUCCE_AGENT_LIB if set, else
/// `cargo build -p lucce-agent` in this test's profile and target directory.
pub fn agent_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        if let Some(p) = std::env::var_os("LUCCE_AGENT_LIB") {
            return PathBuf::from(p);
        }
        // target/<profile>/deps/TEST-HASH -> target/<profile>
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf();
        let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "lucce-agent", "--lib"])
            .env("CARGO_TARGET_DIR", &target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if release {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("run cargo build -p lucce-agent");
        assert!(out.status.success(), "building the agent failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let lib = profile_dir.join("liblucce_agent.so");
        assert!(lib.exists(), "{} missing after build", lib.display());
        lib
    })
}

/// The `*.java` files of `dir`, sorted.
pub fn java_sources(dir: &Path) -> Vec<PathBuf> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    sources.sort();
    sources
}

/// Kills the child if the test ends (panics, times out) before it exited.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs a build tool's command (javac, jar, gcc) to its end; panics with its stderr unless it
/// succeeded.
pub fn tool_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()));
    assert!(out.status.success(), "{:?} failed:\n{}", cmd.get_program(), String::from_utf8_lossy(&out.stderr));
}

/// Clears the variables through which the environment adds JVM options (a developer's
/// `JAVA_TOOL_OPTIONS` would reach every JVM a test starts).
pub fn no_java_options(cmd: &mut Command) -> &mut Command {
    cmd.env_remove("JAVA_TOOL_OPTIONS").env_remove("_JAVA_OPTIONS").env_remove("JDK_JAVA_OPTIONS")
}

/// `-agentpath:` for the agent library with `options`.
pub fn agent_arg(options: &str) -> String {
    format!("-agentpath:{}={options}", agent_lib().display())
}

/// Runs `cmd` to its end within [`TIMEOUT`], collecting stdout and stderr; panics naming `what`
/// if it does not end in time.
pub fn run(mut cmd: Command, what: &str) -> Outcome {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = KillOnDrop(cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}")));
    // The readers end at EOF, i.e. when the process exits; their messages double as the exit signal.
    let (tx, rx) = mpsc::channel();
    for (i, pipe) in [
        Box::new(child.0.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.0.stderr.take().unwrap()),
    ]
    .into_iter()
    .enumerate()
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut pipe = pipe;
            let mut s = Vec::new();
            let _ = pipe.read_to_end(&mut s);
            let _ = tx.send((i, String::from_utf8_lossy(&s).into_owned()));
        });
    }
    drop(tx);
    let deadline = Instant::now() + TIMEOUT;
    let mut outs = [String::new(), String::new()];
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, s)) => outs[i] = s,
            Err(_) => panic!("{what} did not finish within {TIMEOUT:?}"),
        }
    }
    let status = child.0.wait().expect("wait");
    let [stdout, stderr] = outs;
    Outcome { code: status.code(), stdout, stderr }
}
