//! The agent option string: `-agentpath:/abs/liblucce_agent.so=key=value,key=value,...`.
//!
//! Parsing is strict: an unknown key or a bad value is an error, and the agent then installs
//! nothing (the JVM runs as if it had not been given), because silently ignoring a typo such as
//! `exclud=...` would instrument what the user meant to leave alone.

use std::path::PathBuf;

use crate::log::Level;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OptionsError {
    #[error("option '{0}' is not of the form key=value")]
    NotKeyValue(String),
    #[error("unknown option '{0}' (known: {known})", known = KNOWN.join(", "))]
    UnknownKey(String),
    #[error("bad value '{value}' for option '{key}': {why}")]
    BadValue { key: String, value: String, why: &'static str },
    #[error("option '{0}' holds a control character (a newline or a tab inside it?)")]
    ControlCharacter(String),
}

/// An option as an error quotes it: a long one (a file read into the option string by mistake)
/// is cut, so that the message stays one readable line.
fn quoted(s: &str) -> String {
    const MAX: usize = 80;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

const KNOWN: &[&str] =
    &["out", "sample", "verify", "include", "exclude", "log", "loglevel", "summary", "json", "count_check", "retransform", "counters", "thread_slots", "answer_cache", "cache", "after_agents", "throw_leaves", "leaf_callers"];

/// Where a text stream goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    Off,
    Stderr,
    File(PathBuf),
}

/// Whether the load hook may retransform (`after_agents=`): the JVM calls the load hooks of
/// environments that can retransform after all others, so only a hook that can runs after the
/// transformers of Java agents that retransform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAgents {
    /// `On` when the JVM started with a Java agent (`-javaagent`), else `Off`.
    Auto,
    /// The hook can retransform: it runs after every transformer of the Java agents given on the
    /// command line, and rewrites again each class they retransform; the JVM then keeps a copy
    /// of the bytes of every class the hook changes.
    On,
    /// The hook cannot retransform: it runs after the transformers of Java agents that do not
    /// retransform, before those that do.
    Off,
}

/// How the runtime class bumps counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterMode {
    /// `Unsafe.getAndAddLong`: exact under concurrency, but a locked add per probe (rhino: 4x the
    /// run time of `Plain` on the 2-core test VM).
    Atomic,
    /// `getLong` + `putLong` (default): may lose increments when threads race on one counter.
    Plain,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// Record mode: the store directory (`%p` = pid, `%t` = start time). Without it the probes
    /// only count (the rewriter's test mode).
    pub out: Option<PathBuf>,
    /// Every Nth method entry of each thread becomes a sample event (0 = none).
    pub sample: u64,
    /// Every Nth event also stores the JVM's own stack trace (0 = none).
    pub verify: u64,
    pub include: Vec<Pattern>,
    pub exclude: Vec<Pattern>,
    pub log: Sink,
    pub log_level: Level,
    /// Human-readable summary at VM death; a path ending in `.json` gets the JSON form instead.
    pub summary: Sink,
    /// Machine-readable summary (JSON) at VM death, in addition to `summary`.
    pub json: Option<PathBuf>,
    /// Classes whose per-method entry counts are checked against JVMTI MethodEntry events.
    pub count_check: Vec<Pattern>,
    pub retransform: bool,
    pub counters: CounterMode,
    /// Record mode: home slots of per-thread state (a power of two). A thread whose home slot
    /// another live thread holds (tids equal modulo this) has its entries resolved by stack
    /// walks: exact but slow. Small values exist to test that path.
    pub thread_slots: usize,
    /// Record mode: entries of each thread's answer cache (a power of two, 32 bytes each; 0 =
    /// none), a private copy of the memo answers the thread takes (agent/java/lucce/Runtime.java,
    /// memo).
    pub answer_cache: usize,
    /// The class cache's directory (class_cache.rs): classes rewritten in earlier runs are served
    /// from it. None: every class is rewritten as it loads.
    pub cache: Option<PathBuf>,
    pub after_agents: AfterAgents,
    /// Record mode: a method whose calls only build the exception it throws is a leaf, whose
    /// entry costs no lookup but each of whose throws costs a stack walk
    /// (`rewrite::ProbeChoice::throw_path_calls`). Off for a program that throws very often.
    pub throw_leaves: bool,
    /// Record mode, `leaf_callers=on|own|off` (None: not given, see [`Options::leaf_callers`]).
    pub leaf_callers: Option<bool>,
    /// `leaf_callers=own`: leaf callers count on the leaves of their own class (and the natives
    /// of [`crate::rewrite`]'s list) only, not on other classes', whose answers read the JDK's
    /// class files (see [`Options::other_leaves`]).
    pub own_leaves_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            out: None,
            sample: 0,
            verify: 0,
            include: Vec::new(),
            exclude: Vec::new(),
            log: Sink::Stderr,
            log_level: Level::Warn,
            summary: Sink::Stderr,
            json: None,
            count_check: Vec::new(),
            retransform: true,
            counters: CounterMode::Plain,
            thread_slots: crate::recorder::EXCLUSIVE_SLOTS,
            answer_cache: 1 << 16,
            cache: None,
            after_agents: AfterAgents::Auto,
            throw_leaves: true,
            leaf_callers: None,
            own_leaves_only: false,
        }
    }
}

/// Classes that are never instrumented whatever the options say: the runtime class itself, and
/// `sun.misc.Unsafe`, whose accessors the probes call (instrumented, they would call back into
/// the probe that called them, forever).
const ALWAYS_EXCLUDED: &[&str] = &["lucce.*", "sun.misc.Unsafe"];
/// Also excluded when the probes count (no `out=`): the counting probes call `getAndAddLong`,
/// which `jdk.internal.misc.Unsafe` implements in Java. In record mode the probes only use its
/// native accessors, and its frames (`ensureClassInitialized`) show in traces.
const EXCLUDED_WHEN_COUNTING: &[&str] = &["jdk.internal.misc.Unsafe"];

impl Options {
    /// Whether a summary will report the rewrite time. When none does, the load hook reads no
    /// clock: the thread's CPU clock is a system call, about 0.5 µs on the development VM, twice
    /// per class.
    pub fn wants_summary(&self) -> bool {
        self.summary != Sink::Off || self.json.is_some()
    }

    /// Record mode: a method whose every call certainly enters a leaf is a leaf too
    /// (`rewrite::ProbeChoice::leaf_calls`). By default only without `sample=`: a sample taken
    /// at the entry of such a method's callee walks the stack.
    pub fn leaf_callers(&self) -> bool {
        self.leaf_callers.unwrap_or(self.sample == 0)
    }

    /// Record mode: leaf callers may count on leaves of other classes too (the JDK's, from its
    /// runtime image; the program's loaded so far): with leaf callers, unless `leaf_callers=own`.
    pub fn other_leaves(&self) -> bool {
        self.leaf_callers() && !self.own_leaves_only
    }

    pub fn parse(s: &str) -> Result<Options, OptionsError> {
        let mut o = Options::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if item.chars().any(char::is_control) {
                return Err(OptionsError::ControlCharacter(quoted(&item.escape_debug().to_string())));
            }
            let (key, value) = item.split_once('=').ok_or_else(|| OptionsError::NotKeyValue(quoted(item)))?;
            let bad = |why| OptionsError::BadValue { key: quoted(key), value: quoted(value), why };
            match key {
                "out" if !value.is_empty() => o.out = Some(expand_path(value)),
                "out" => return Err(bad("expected a directory path")),
                "sample" => o.sample = value.parse().map_err(|_| bad("expected a whole number (1 = every entry)"))?,
                "verify" => o.verify = value.parse().map_err(|_| bad("expected a whole number (1 = every event)"))?,
                "include" => o.include.extend(Pattern::parse_list(value).map_err(bad)?),
                "exclude" => o.exclude.extend(Pattern::parse_list(value).map_err(bad)?),
                "count_check" => o.count_check.extend(Pattern::parse_list(value).map_err(bad)?),
                "log" => o.log = parse_sink(value).ok_or_else(|| bad("expected stderr, off or a path"))?,
                "summary" => {
                    o.summary = parse_sink(value).ok_or_else(|| bad("expected stderr, off or a path"))?
                }
                "json" if !value.is_empty() => o.json = Some(expand_path(value)),
                "cache" if value == "off" => o.cache = None,
                "cache" if !value.is_empty() => o.cache = Some(PathBuf::from(value)),
                "cache" => return Err(bad("expected a directory path or off")),
                "json" => return Err(bad("expected a path")),
                "loglevel" => {
                    o.log_level = match value {
                        "error" => Level::Error,
                        "warn" => Level::Warn,
                        "info" => Level::Info,
                        "debug" => Level::Debug,
                        _ => return Err(bad("expected error, warn, info or debug")),
                    }
                }
                "after_agents" => {
                    o.after_agents = match value {
                        "auto" => AfterAgents::Auto,
                        _ => match parse_bool(value) {
                            Some(true) => AfterAgents::On,
                            Some(false) => AfterAgents::Off,
                            None => return Err(bad("expected auto, on or off")),
                        },
                    }
                }
                "retransform" => o.retransform = parse_bool(value).ok_or_else(|| bad("expected on or off"))?,
                "throw_leaves" => o.throw_leaves = parse_bool(value).ok_or_else(|| bad("expected on or off"))?,
                "leaf_callers" => {
                    o.own_leaves_only = value == "own";
                    o.leaf_callers = Some(o.own_leaves_only || parse_bool(value).ok_or_else(|| bad("expected on, own or off"))?);
                }
                "counters" => {
                    o.counters = match value {
                        "atomic" => CounterMode::Atomic,
                        "plain" => CounterMode::Plain,
                        _ => return Err(bad("expected atomic or plain")),
                    }
                }
                "thread_slots" => {
                    o.thread_slots = value
                        .parse()
                        .ok()
                        .filter(|n: &usize| n.is_power_of_two() && *n <= crate::recorder::EXCLUSIVE_SLOTS)
                        .ok_or_else(|| bad("expected a power of two from 1 to 4294967296"))?
                }
                "answer_cache" => {
                    o.answer_cache = value
                        .parse()
                        .ok()
                        .filter(|&n: &usize| n == 0 || (n.is_power_of_two() && (2..=1 << 24).contains(&n)))
                        .ok_or_else(|| bad("expected 0 (none) or a power of two from 2 to 16777216"))?
                }
                _ => return Err(OptionsError::UnknownKey(quoted(key))),
            }
        }
        Ok(o)
    }

    /// Whether the class with this internal (`a/b/C`) or dotted name is instrumented.
    pub fn wants(&self, class: &str) -> bool {
        // Matched in place, slashes read as dots (no dotted copy per class in the load hook).
        let name = class.as_bytes();
        if ALWAYS_EXCLUDED.iter().any(|p| glob(p.as_bytes(), name)) {
            return false;
        }
        if self.out.is_none() && EXCLUDED_WHEN_COUNTING.iter().any(|p| glob(p.as_bytes(), name)) {
            return false;
        }
        if !self.include.is_empty() && !self.include.iter().any(|p| glob(p.0.as_bytes(), name)) {
            return false;
        }
        !self.exclude.iter().any(|p| glob(p.0.as_bytes(), name))
    }

    pub fn count_checked(&self, class: &str) -> bool {
        self.count_check.iter().any(|p| glob(p.0.as_bytes(), class.as_bytes()))
    }
}

fn dotted(class: &str) -> String {
    class.replace('/', ".")
}

fn parse_sink(v: &str) -> Option<Sink> {
    match v {
        "" => None,
        "stderr" => Some(Sink::Stderr),
        "off" | "none" => Some(Sink::Off),
        p => Some(Sink::File(expand_path(p))),
    }
}

/// `%p` in a path becomes the process id, so that every JVM of a multi-JVM run (wrapper scripts
/// started with JAVA_TOOL_OPTIONS) writes its own file; `%t` the start time (Unix seconds).
fn expand_path(p: &str) -> PathBuf {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    PathBuf::from(p.replace("%p", &std::process::id().to_string()).replace("%t", &t.to_string()))
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "on" | "true" | "1" | "yes" => Some(true),
        "off" | "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

/// A class-name pattern over dotted names (`java.util.*`); slashes are accepted and mean dots
/// (`java/util/*`). `*` matches any run of characters, dots included, `?` exactly one character;
/// everything else matches itself. Nested classes are separate names: `a.B` does not match
/// `a.B$Inner`, `a.B*` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(String);

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern, &'static str> {
        if s.is_empty() {
            return Err("empty class pattern");
        }
        if s.chars().any(|c| c.is_whitespace() || c == ';' || c == '[') {
            return Err("class patterns may not contain whitespace, ';' or '['");
        }
        Ok(Pattern(dotted(s)))
    }

    /// Several patterns in one value, separated by `;` or `|` (`,` separates options).
    fn parse_list(s: &str) -> Result<Vec<Pattern>, &'static str> {
        s.split([';', '|']).map(Pattern::parse).collect()
    }
}

/// Iterative glob with single-star backtracking: linear-ish and no recursion. A `/` in `s`
/// matches like a `.` (patterns are dotted; names may be internal).
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        let c = if s[si] == b'/' { b'.' } else { s[si] };
        if pi < p.len() && (p[pi] == b'?' || p[pi] == c) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globbing() {
        assert!(glob(b"java.*", b"java.lang.String"));
        assert!(!glob(b"java.*", b"javax.swing.JFrame"));
        assert!(glob(b"*Test?", b"a.b.MyTest1"));
        assert!(glob(b"a.B", b"a.B"));
        assert!(!glob(b"a.B", b"a.B$X"));
        assert!(glob(b"*", b""));
        // Internal names match dotted patterns.
        assert!(glob(b"java.*", b"java/lang/String"));
        assert!(glob(b"a?b", b"a/b"));
        assert!(!glob(b"a.B", b"a/B$X"));
    }

    #[test]
    fn parse_and_filter() {
        let o = Options::parse("include=com/acme/*;org.x.*,exclude=com.acme.gen.*,summary=/tmp/s.json").unwrap();
        assert!(o.wants("com/acme/Foo"));
        assert!(o.wants("org.x.Y"));
        assert!(!o.wants("com/acme/gen/Foo"));
        assert!(!o.wants("java/lang/String"));
        assert_eq!(o.summary, Sink::File("/tmp/s.json".into()));
        let all = Options::parse("").unwrap();
        assert!(all.wants("java/lang/String"));
        assert!(!all.wants("lucce/Runtime"));
        assert!(!all.wants("sun/misc/Unsafe"));
        assert!(all.wants("sun/misc/UnsafeX"));
    }

    #[test]
    fn errors() {
        assert_eq!(Options::parse("bogus=1").unwrap_err(), OptionsError::UnknownKey("bogus".into()));
        assert!(matches!(Options::parse("include"), Err(OptionsError::NotKeyValue(_))));
        assert!(matches!(Options::parse("loglevel=loud"), Err(OptionsError::BadValue { .. })));
        assert!(matches!(Options::parse("include="), Err(OptionsError::BadValue { .. })));
        assert!(matches!(Options::parse("sample=often"), Err(OptionsError::BadValue { .. })));
        assert!(matches!(Options::parse("out="), Err(OptionsError::BadValue { .. })));
        assert!(matches!(Options::parse("throw_leaves=maybe"), Err(OptionsError::BadValue { .. })));
        assert!(Options::parse("").unwrap().throw_leaves);
        assert!(!Options::parse("throw_leaves=off").unwrap().throw_leaves);
        assert!(matches!(Options::parse("leaf_callers=1x"), Err(OptionsError::BadValue { .. })));
        assert!(Options::parse("").unwrap().leaf_callers());
        assert!(!Options::parse("sample=1000").unwrap().leaf_callers());
        assert!(Options::parse("").unwrap().other_leaves());
        let own = Options::parse("sample=1000,leaf_callers=own").unwrap();
        assert!(own.leaf_callers() && !own.other_leaves());
        assert!(Options::parse("sample=1000,leaf_callers=on").unwrap().leaf_callers());
        assert!(!Options::parse("leaf_callers=off").unwrap().leaf_callers());
        let o = Options::parse("out=/tmp/x-%p,sample=10,verify=3").unwrap();
        assert_eq!(o.out, Some(PathBuf::from(format!("/tmp/x-{}", std::process::id()))));
        assert_eq!((o.sample, o.verify), (10, 3));
        assert_eq!(o.after_agents, AfterAgents::Auto);
        assert_eq!(Options::parse("after_agents=on").unwrap().after_agents, AfterAgents::On);
        assert_eq!(Options::parse("after_agents=off").unwrap().after_agents, AfterAgents::Off);
        assert!(matches!(Options::parse("after_agents=last"), Err(OptionsError::BadValue { .. })));
        for bad in ["thread_slots=0", "thread_slots=3", "thread_slots=8589934592", "thread_slots=x"] {
            assert!(matches!(Options::parse(bad), Err(OptionsError::BadValue { .. })), "{bad}");
        }
        assert_eq!(Options::parse("thread_slots=1").unwrap().thread_slots, 1);
        assert_eq!(Options::parse("").unwrap().thread_slots, 1 << 32);
        assert_eq!(Options::parse("thread_slots=4294967296").unwrap().thread_slots, 1 << 32);
        for bad in ["answer_cache=1", "answer_cache=3", "answer_cache=33554432", "answer_cache=-1"] {
            assert!(matches!(Options::parse(bad), Err(OptionsError::BadValue { .. })), "{bad}");
        }
        assert_eq!(Options::parse("answer_cache=0").unwrap().answer_cache, 0);
        assert_eq!(Options::parse("").unwrap().answer_cache, 65536);
        assert!(matches!(Options::parse("cache="), Err(OptionsError::BadValue { .. })));
        assert_eq!(Options::parse("cache=/tmp/c").unwrap().cache, Some(PathBuf::from("/tmp/c")));
        assert_eq!(Options::parse("cache=/tmp/c,cache=off").unwrap().cache, None);
        assert_eq!(Options::parse("").unwrap().cache, None);
        // A newline inside a value would otherwise name a file `off\nloglevel=warn`.
        let e = Options::parse("summary=off\nloglevel=warn").unwrap_err();
        assert_eq!(e, OptionsError::ControlCharacter("summary=off\\nloglevel=warn".into()), "shown escaped, on one line");
        assert!(Options::parse("summary=off,\n").is_ok(), "whitespace around an option is not inside it");
        let long = Options::parse(&"k".repeat(100_000)).unwrap_err().to_string();
        assert!(long.len() < 200 && long.contains("k…"), "{long}");
    }
}
