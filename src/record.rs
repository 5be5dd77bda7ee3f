//! `lucce record`: runs a Java command line with the agent recording into a store.
//!
//! The agent reaches every JVM the command starts (wrapper scripts included) through
//! `JAVA_TOOL_OPTIONS`; each JVM writes its own store `DIR/<pid>`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{bail, Context as _};

/// The agent library's file name.
pub const AGENT_LIB: &str = "liblucce_agent.so";

#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// Directory for the stores, one per JVM (`DIR/<pid>`); default `lucce-record-<time>`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// More agent options, comma-separated: sample=N, verify=N, include=..., exclude=...
    #[arg(long, default_value = "")]
    pub agent_opts: String,
    /// The agent library (default: $LUCCE_AGENT, else next to this executable).
    #[arg(long)]
    pub agent: Option<PathBuf>,
    /// Where the agent keeps the classes it rewrote, to serve them again in later runs instead of
    /// rewriting them (default: $LUCCE_CLASS_CACHE, else $XDG_CACHE_HOME/lucce/classes, else
    /// ~/.cache/lucce/classes). Safe to delete at any time.
    #[arg(long, value_name = "DIR")]
    pub class_cache: Option<PathBuf>,
    /// Rewrite every class as it loads, keeping none.
    #[arg(long, conflicts_with = "class_cache")]
    pub no_class_cache: bool,
    /// The command to run, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Where the agent library is: the flag, $LUCCE_AGENT, or beside the running executable.
pub fn find_agent(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("LUCCE_AGENT") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let dir = exe.parent().context("executable without a directory")?;
    for candidate in [dir.join(AGENT_LIB), dir.join("..").join(AGENT_LIB)] {
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    bail!("cannot find {AGENT_LIB} next to {} (build it with `cargo build --release -p lucce-agent`, or set LUCCE_AGENT)", exe.display())
}

/// The class cache directory for the agent (see [`RecordArgs::class_cache`]), if any.
fn class_cache(a: &RecordArgs) -> Option<PathBuf> {
    if a.no_class_cache {
        return None;
    }
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let dir = a
        .class_cache
        .clone()
        .or_else(|| env("LUCCE_CLASS_CACHE"))
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("lucce/classes")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/lucce/classes")))?;
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    if dir.to_string_lossy().contains([' ', ',', '=']) {
        say!("lucce: not using the class cache {}: a space, ',' or '=' cannot pass through JAVA_TOOL_OPTIONS", dir.display());
        return None;
    }
    Some(dir)
}

/// Refuses a path JAVA_TOOL_OPTIONS cannot carry in the agent's options.
fn check_carried(what: &str, p: &Path) -> anyhow::Result<()> {
    let s = p.to_string_lossy();
    if s.contains([' ', ',', '=']) {
        bail!("the {what} path {s:?} contains a space, ',' or '=', which JAVA_TOOL_OPTIONS cannot carry");
    }
    Ok(())
}

pub fn run(a: &RecordArgs) -> anyhow::Result<ExitCode> {
    // Each JVM's store goes below --out, which is where this command looks for them.
    if a.agent_opts.split(',').any(|o| o.split_once('=').map_or(o, |(k, _)| k).trim() == "out") {
        bail!("--agent-opts cannot set out=: the stores go below --out DIR, one per JVM (DIR/<pid>)");
    }
    let out = a.out.clone().unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        PathBuf::from(format!("lucce-record-{t}"))
    });
    // Checked before the directory is made, so that a refused path leaves nothing behind.
    check_carried("output directory", &std::path::absolute(&out).unwrap_or_else(|_| out.clone()))?;
    let agent = find_agent(a.agent.as_deref())?;
    let agent = agent.canonicalize().with_context(|| format!("agent library {}", agent.display()))?;
    check_carried("agent library", &agent)?;
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let out = out.canonicalize().with_context(|| format!("{}", out.display()))?;
    check_carried("output directory", &out)?;
    // A directory of earlier recordings: only this run's stores are reported as new.
    let earlier = lucce_log_format::stores_below(&out);
    let mut opts = format!("out={}/%p,summary=off", out.display());
    if let Some(cache) = class_cache(a) {
        // The agent creates it; an unusable one costs the run its speed-up, nothing else.
        opts.push_str(&format!(",cache={}", cache.display()));
    }
    // After lucce's own: the user's options win (the agent takes the last of a key).
    if !a.agent_opts.is_empty() {
        opts.push(',');
        opts.push_str(&a.agent_opts);
    }
    let mut tool_opts = std::env::var("JAVA_TOOL_OPTIONS").unwrap_or_default();
    if !tool_opts.is_empty() {
        tool_opts.push(' ');
    }
    tool_opts.push_str(&format!("-agentpath:{}={opts}", agent.display()));
    let child = Command::new(&a.command[0])
        .args(&a.command[1..])
        .env("JAVA_TOOL_OPTIONS", &tool_opts)
        .spawn()
        .with_context(|| format!("cannot run {:?}", a.command[0]))?;
    let status = wait_through_signals(child).with_context(|| format!("waiting for {:?}", a.command[0]))?;
    let stores: Vec<PathBuf> = lucce_log_format::stores_below(&out).into_iter().filter(|s| !earlier.contains(s)).collect();
    if !earlier.is_empty() {
        say!("lucce: {} store(s) of earlier runs in {} left as they were", earlier.len(), out.display());
    }
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + status.signal().unwrap_or(0)
    });
    match stores.as_slice() {
        [] => {
            say!(
                "lucce: no JVM recorded anything into {}: the command started no JVM, or the agent refused its options (its message, if any, is above)",
                out.display()
            );
            // Nothing was recorded: not a success, whatever the command's own status.
            return Ok(ExitCode::from(code.clamp(1, 255) as u8));
        }
        [one] => say!("lucce: store {} (try `lucce events {}`)", one.display(), one.display()),
        many => {
            say!("lucce: {} JVMs recorded, one store each:", many.len());
            for s in many {
                say!("  {}", s.display());
            }
        }
    }
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// The command's pid while `lucce record` waits for it, for [`pass_on`].
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn pass_on(signal: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe and takes any pid and signal number.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Waits for the command, outliving the signals that stop it, so that its stores are complete
/// and closed when `lucce record` returns and says where they are. Ctrl-C (SIGINT) and Ctrl-\
/// (SIGQUIT, a JVM's thread dump) reach the command from the terminal: here they are ignored.
/// SIGTERM and SIGHUP may be sent to `lucce record` alone: they are passed on to the command.
/// The handlers are set after the spawn: a JVM started with SIGINT ignored would keep ignoring it.
fn wait_through_signals(mut child: Child) -> std::io::Result<ExitStatus> {
    CHILD.store(i32::try_from(child.id()).unwrap_or(0), Ordering::Relaxed);
    let forward = pass_on as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for (signal, handler) in [(libc::SIGINT, libc::SIG_IGN), (libc::SIGQUIT, libc::SIG_IGN), (libc::SIGTERM, forward), (libc::SIGHUP, forward)] {
        // SAFETY: sigaction with a zeroed, then filled struct; `pass_on` only loads an atomic and
        // calls kill, both async-signal-safe. SA_RESTART: the wait goes on after a handler.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    child.wait()
}
