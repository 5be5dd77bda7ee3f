//! Statistics gathered by the hook and the VMDeath summary: a text form for people (stderr by
//! default) and a JSON form for tests and scripts (`summary=FILE.json` or `json=FILE`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::class_cache::CacheStats;
use crate::count_check::CheckReport;
use crate::options::Sink;
use crate::registry::{Registry, SiteKindTag};
use crate::runtime::Counters;

/// Examples kept per list, so that a pathological run does not grow the summary without bound.
const MAX_EXAMPLES: usize = 40;

#[derive(Debug, Default, Clone, Serialize)]
pub struct Stats {
    /// ClassFileLoadHook calls, retransformations included.
    pub hook_calls: u64,
    /// Classes the rewriter was asked about (after filtering).
    pub classes_seen: u64,
    /// Classes left alone because of include/exclude (or the built-in exclusions).
    pub classes_excluded: u64,
    /// Of them, those a recording gave drop probes at their exception handlers, and nothing
    /// else (`rewrite::drop_at_handlers_with`).
    pub classes_excluded_given_drops: u64,
    pub classes_rewritten: u64,
    /// The rewriter returned the class unchanged (nothing to instrument, or every method skipped).
    pub classes_unchanged: u64,
    /// The rewriter returned an error or panicked: the class is loaded as it was.
    pub classes_failed: u64,
    pub methods_with_code: u64,
    pub methods_rewritten: u64,
    pub methods_skipped: u64,
    pub skipped_by_reason: BTreeMap<String, u64>,
    /// Rewritten methods whose site probes did not fit (they have an entry probe only), by reason.
    pub entry_only_by_reason: BTreeMap<String, u64>,
    pub failures_by_reason: BTreeMap<String, u64>,
    pub skipped_examples: Vec<String>,
    pub failure_examples: Vec<String>,
    pub rewrite_ns_total: u64,
    /// The same on the rewriting thread's CPU clock (preemption excluded), less what reading
    /// that clock adds to each class (measured once at the first class).
    pub rewrite_cpu_ns_total: u64,
    /// CPU time the hook took to read the classes' bytes in before the rewrite's clocks start
    /// (pages the JVM maps from its runtime image and nothing has read yet; see `page_in`),
    /// less the clock's cost.
    pub page_in_cpu_ns_total: u64,
    pub rewrite_ns_max: u64,
    pub slowest_class: String,
    pub retransform: RetransformStats,
    /// Whether the load hook could retransform (`after_agents`), so came after every transformer
    /// of the Java agents given at startup.
    pub load_hook_retransforms: bool,
    /// Times the load hook moved to a new environment after a Java agent attached.
    pub load_hook_moves: u32,
    /// With `cache=DIR`.
    pub class_cache: Option<CacheStats>,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct RetransformStats {
    /// Loaded classes at VMInit that were modifiable and not yet instrumented.
    pub candidates: u64,
    /// Whether every RetransformClasses call of the batch succeeded (else the classes of a call
    /// that failed were retried one by one).
    pub batch_ok: bool,
    pub retransformed: u64,
    pub failed: u64,
    /// Hidden classes already defined at VMInit, which cannot be retransformed: never
    /// instrumented.
    pub hidden_left_alone: u64,
    /// Classes without code (no method but abstract or native ones), which a retransformation
    /// would leave as they are: not retransformed.
    pub without_code: u64,
    pub ns: u64,
    pub failure_examples: Vec<String>,
}

impl Stats {
    pub fn skipped(&mut self, class: &str, method: &str, reason: String) {
        self.methods_skipped += 1;
        *self.skipped_by_reason.entry(reason_key(&reason)).or_default() += 1;
        if self.skipped_examples.len() < MAX_EXAMPLES {
            self.skipped_examples.push(format!("{class}.{method}: {reason}"));
        }
    }

    pub fn entry_only(&mut self, reason: &str) {
        *self.entry_only_by_reason.entry(reason_key(reason)).or_default() += 1;
    }

    pub fn failed(&mut self, class: &str, reason: String) {
        self.classes_failed += 1;
        *self.failures_by_reason.entry(reason_key(&reason)).or_default() += 1;
        if self.failure_examples.len() < MAX_EXAMPLES {
            self.failure_examples.push(format!("{class}: {reason}"));
        }
    }

    pub fn timed(&mut self, class: &str, ns: u64, cpu_ns: u64) {
        self.rewrite_ns_total += ns;
        self.rewrite_cpu_ns_total += cpu_ns;
        if ns > self.rewrite_ns_max {
            self.rewrite_ns_max = ns;
            self.slowest_class = class.to_string();
        }
    }
}

/// Aggregation key of a reason: its variant name (a `Debug` string up to the first payload).
fn reason_key(reason: &str) -> String {
    let end = reason.find(['(', '{', ' ', ':']).unwrap_or(reason.len());
    reason[..end].to_string()
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub agent_version: &'static str,
    pub options: String,
    #[serde(flatten)]
    pub stats: Stats,
    pub methods_registered: u64,
    pub sites_registered: u64,
    pub call_sites: u64,
    pub alloc_sites: u64,
    pub entries: u64,
    pub calls: u64,
    pub allocs: u64,
    pub count_check: Option<CheckReport>,
}

impl Summary {
    pub fn build(
        options: &str,
        stats: Stats,
        registry: &Registry,
        counters: Option<&Counters>,
        count_check: Option<CheckReport>,
    ) -> Summary {
        let t = registry.tables();
        let (mut entries, mut calls, mut allocs, mut call_sites, mut alloc_sites) = (0, 0, 0, 0, 0);
        let mut methods_registered = 0;
        for (id, _) in t.methods.iter().enumerate().filter(|(_, m)| m.is_some()) {
            methods_registered += 1;
            entries += counters.map_or(0, |c| c.method_entries(id as u32));
        }
        for (id, s) in t.sites.iter().enumerate() {
            let Some(s) = s else { continue };
            let n = counters.map_or(0, |c| c.site_count(id as u32));
            match s.kind {
                SiteKindTag::Call => {
                    call_sites += 1;
                    calls += n;
                }
                SiteKindTag::Alloc => {
                    alloc_sites += 1;
                    allocs += n;
                }
            }
        }
        Summary {
            agent_version: env!("CARGO_PKG_VERSION"),
            options: options.to_string(),
            stats,
            methods_registered,
            sites_registered: call_sites + alloc_sites,
            call_sites,
            alloc_sites,
            entries,
            calls,
            allocs,
            count_check,
        }
    }

    pub fn text(&self) -> String {
        let s = &self.stats;
        let pct = |a: u64, b: u64| if b == 0 { 100.0 } else { a as f64 * 100.0 / b as f64 };
        let mut o = String::new();
        use std::fmt::Write as _;
        let _ = writeln!(o, "lucce-agent summary (options: '{}')", self.options);
        let _ = writeln!(
            o,
            "  classes: seen {}, rewritten {}, unchanged {}, failed {}, excluded {}{}",
            s.classes_seen,
            s.classes_rewritten,
            s.classes_unchanged,
            s.classes_failed,
            s.classes_excluded,
            match s.classes_excluded_given_drops {
                0 => String::new(),
                n => format!(" ({n} given drop probes at their exception handlers)"),
            }
        );
        let r = &s.retransform;
        let _ = writeln!(
            o,
            "  loaded before VMInit: {} retransformed in one batch ({} failed{}) in {:.1} ms; {} without code and {} hidden classes left alone",
            r.retransformed,
            r.failed,
            if r.batch_ok || r.candidates == 0 { "" } else { ", batch retried class by class" },
            r.ns as f64 / 1e6,
            r.without_code,
            r.hidden_left_alone
        );
        let _ = writeln!(
            o,
            "  load hook: {}{}",
            if s.load_hook_retransforms {
                "can retransform (runs after every transformer of the Java agents given at startup)"
            } else {
                "cannot retransform (a Java agent's transformer that retransforms would run after it)"
            },
            match s.load_hook_moves {
                0 => String::new(),
                n => format!("; moved after attached Java agents or the flight recorder {n} times"),
            }
        );
        let _ = writeln!(
            o,
            "  methods with code: {}, rewritten {} ({:.3}%), skipped {}",
            s.methods_with_code,
            s.methods_rewritten,
            pct(s.methods_rewritten, s.methods_with_code),
            s.methods_skipped
        );
        for (reason, n) in &s.entry_only_by_reason {
            let _ = writeln!(o, "    rewritten with an entry probe only (its site probes did not fit), {reason}: {n}");
        }
        for (reason, n) in &s.skipped_by_reason {
            let _ = writeln!(o, "    skipped {reason}: {n}");
        }
        for (reason, n) in &s.failures_by_reason {
            let _ = writeln!(o, "    class failed {reason}: {n}");
        }
        let us_per_class = |ns: u64| if s.classes_seen == 0 { 0.0 } else { ns as f64 / s.classes_seen as f64 / 1e3 };
        let _ = writeln!(
            o,
            "  rewrite time: total {:.1} ms, {:.1} us per class ({:.1} us of thread CPU time, and {:.1} us reading the class in first), max {:.1} us ({})",
            s.rewrite_ns_total as f64 / 1e6,
            us_per_class(s.rewrite_ns_total),
            us_per_class(s.rewrite_cpu_ns_total),
            us_per_class(s.page_in_cpu_ns_total),
            s.rewrite_ns_max as f64 / 1e3,
            s.slowest_class
        );
        if let Some(c) = &s.class_cache {
            let _ = writeln!(
                o,
                "  class cache {}: {} classes served, {} {} ({} written, {} kept by another JVM meanwhile, {} dropped, {} unusable records, {} refused for their leaves; {:.1} ms of CPU making records off the load hook); {} classes at start",
                c.dir,
                c.hits,
                c.misses,
                if c.read_only { "rewritten, none kept (the cache is read-only here)" } else { "rewritten and kept" },
                c.stored,
                c.already_kept,
                c.dropped,
                c.unusable,
                c.refused,
                c.records_cpu_ns as f64 / 1e6,
                c.entries_at_start
            );
        }
        let _ = writeln!(
            o,
            "  counted: {} method entries, {} calls, {} allocations ({} methods, {} call sites, {} allocation sites)",
            self.entries, self.calls, self.allocs, self.methods_registered, self.call_sites, self.alloc_sites
        );
        if let Some(c) = &self.count_check {
            let _ = writeln!(
                o,
                "  count check: {} methods compared, {} differences, {} entries by JVMTI, {} by probes",
                c.methods_compared,
                c.differences.len(),
                c.jvmti_entries,
                c.probe_entries
            );
            for d in c.differences.iter().take(20) {
                let _ = writeln!(o, "    {} jvmti={} probes={}", d.method, d.jvmti, d.probes);
            }
        }
        o
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Writes the summary where the options say; errors go to stderr, never further.
    pub fn emit(&self, sink: &Sink, json: Option<&Path>) {
        match sink {
            Sink::Off => {}
            Sink::Stderr => {
                let _ = std::io::stderr().write_all(self.text().as_bytes());
            }
            Sink::File(p) => {
                let body = if p.extension().is_some_and(|e| e == "json") { self.json() } else { self.text() };
                if let Err(e) = write_whole(p, &body) {
                    eprintln!("lucce-agent: cannot write summary to {}: {e}", p.display());
                }
            }
        }
        if let Some(p) = json {
            if let Err(e) = write_whole(p, &self.json()) {
                eprintln!("lucce-agent: cannot write JSON summary to {}: {e}", p.display());
            }
        }
    }
}

/// Writes `body` to `path` whole or not at all: into a file beside it, renamed over it once
/// written. A full disk would otherwise leave an empty or cut-off summary, which a tool that
/// reads it takes for the agent's.
fn write_whole(path: &Path, body: &str) -> std::io::Result<()> {
    let mut part = path.as_os_str().to_owned();
    part.push(format!(".part-{}", std::process::id()));
    let part = std::path::PathBuf::from(part);
    let written = std::fs::write(&part, body).and_then(|()| std::fs::rename(&part, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        std::fs::write(&path, "old").unwrap();
        write_whole(&path, "{\"new\": 1}").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"new\": 1}");
        // A summary that cannot take its place (a directory is in the way) leaves no part file.
        let blocked = dir.path().join("blocked.json");
        std::fs::create_dir(&blocked).unwrap();
        assert!(write_whole(&blocked, "x").is_err());
        let mut names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["blocked.json", "s.json"]);
    }

    #[test]
    fn reasons_aggregate_by_variant() {
        assert_eq!(reason_key("TooLarge { len: 70000 }"), "TooLarge");
        assert_eq!(reason_key("Jsr"), "Jsr");
        assert_eq!(reason_key("Unsupported(\"x\")"), "Unsupported");
    }
}
