//! Rewrites every `.class` file under a directory (e.g. the JDK, extracted once with
//! `jimage extract --dir DIR $JAVA_HOME/lib/modules`) and prints a digest of all outputs and
//! statistics plus the rewrite time per class.
//!
//! `cargo run --release -p lucce-agent --example rewrite_dir -- DIR [PASSES] [nodigest|general|hook|cold] [AGENT_OPTIONS]`
//!
//! `hook`: the timed passes go through the agent's load hook instead ([`HookState::on_class`]:
//! class filter, registrar, rewrite, statistics, the copy into a fresh `malloc` buffer standing
//! in for JVMTI Allocate, publishing into a fresh [`Registry`]), counting mode without a
//! recorder. Not covered: the JNI/JVMTI call itself and the recorder's publish sink. A second
//! digest covers what the hook left behind (class bytes, registry tables, statistics but times).
//! AGENT_OPTIONS are the agent's options for these passes (default none: the summary is on, so
//! the hook reads the clocks; `summary=off` as `lucce record` passes it reads none).
//!
//! `general`: the digest pass makes every method take the rewriter's general path (no direct
//! rewrite); the digest must equal the default one, which takes the direct path where it can.
//!
//! `replay`: every class rewritten once with placeholder ids, then the timed passes give each
//! one a fresh registry's ids (`rewrite::relocate`): the cost of serving a class rewritten ahead.
//!
//! With `cache=DIR` among AGENT_OPTIONS, the hook serves classes from the class cache in DIR:
//! the first pass fills it (unless an earlier run did), the cache is flushed after each pass,
//! and the digests of the first two passes are printed. A pass that fills the cache gives the
//! classes the rewriter gives without one (the same digest), a pass that serves them gives
//! every id an `ldc_w` (another digest, the same for every such pass). The cache's writer thread
//! makes the records during the filling pass, whose time so includes theirs on a pinned CPU.
//!
//! `cold`: as `hook`, but the data caches are flushed before each class (by writing a buffer
//! larger than L2), as the JVM's own work between two loads does; only the hook calls are timed.
//! In a JVM the hook costs 2–3 times what it costs on warm caches.
//!
//! The digest is for comparing two builds of the rewriter: equal digests mean byte-identical
//! output classes and identical statistics (ids come from a counting registry, in call order, so
//! the order and content of the registry calls are covered too). The time is the best of PASSES
//! passes over all classes (the files are read into memory first).

use std::hash::Hasher;
use std::path::PathBuf;
use std::time::Instant;

use std::collections::HashSet;
use std::sync::Mutex;

// The integration tests' helpers (class-file collection).
#[path = "../tests/rewrite_common/mod.rs"]
mod rewrite_common;

use lucce_agent::class_cache::ClassCache;
use lucce_agent::hook::{Arrival, HookState};
use lucce_agent::options::Options;
use lucce_agent::registry::Registry;
use lucce_agent::rewrite::relocate::Relocatable;
use lucce_agent::rewrite::{rewrite_class, ClassStats, MethodInfo, SiteInfo, SiteRegistry};
use lucce_agent::summary::Stats;

/// Counts ids and folds every registry call into a digest.
struct Digest {
    methods: u32,
    sites: u32,
    h: Fnv,
    /// Every method through the general rewrite.
    general: bool,
}

impl SiteRegistry for Digest {
    fn direct_rewrite(&self) -> bool {
        !self.general
    }
    fn method(&mut self, m: &MethodInfo<'_>) -> u32 {
        self.h.write(format!("{m:?}").as_bytes());
        self.methods += 1;
        self.methods - 1
    }
    fn site(&mut self, method_id: u32, site: &SiteInfo) -> u32 {
        self.h.write(format!("{method_id} {site:?}").as_bytes());
        self.sites += 1;
        self.sites - 1
    }
}

/// Just counts ids (the timed passes).
struct Counter(u32, u32);

impl SiteRegistry for Counter {
    fn method(&mut self, _m: &MethodInfo<'_>) -> u32 {
        self.0 += 1;
        self.0 - 1
    }
    fn site(&mut self, _method_id: u32, _site: &SiteInfo) -> u32 {
        self.1 += 1;
        self.1 - 1
    }
}

/// FNV-1a, 64 bit: stable across builds and Rust versions (unlike `DefaultHasher`).
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: rewrite_dir DIR [PASSES]"));
    let passes: usize = args.next().map_or(5, |s| s.parse().expect("PASSES"));
    let mode = args.next();
    // For profiles: only the timed passes.
    let digest = mode.as_deref() != Some("nodigest");
    let hook = mode.as_deref() == Some("hook");
    let cold = mode.as_deref() == Some("cold");
    let general = mode.as_deref() == Some("general");
    if !dir.is_dir() {
        eprintln!("rewrite_dir: {} is not a directory", dir.display());
        std::process::exit(2);
    }
    let mut files = Vec::new();
    rewrite_common::class_files(&dir, &mut files);
    files.sort();
    let classes: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    // What the JVM passes as the name: the internal name (path below the module directory).
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&dir).unwrap().with_extension("");
            let mut c = rel.components();
            c.next();
            c.as_path().to_string_lossy().into_owned()
        })
        .collect();
    if hook || cold {
        let options = match Options::parse(&args.next().unwrap_or_default()) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("rewrite_dir: bad agent options: {e}");
                std::process::exit(2);
            }
        };
        hook_passes(&classes, &names, passes, cold, &options);
        return;
    }
    if mode.as_deref() == Some("replay") {
        replay_passes(&classes, passes);
        return;
    }

    let mut reg = Digest { methods: 0, sites: 0, h: Fnv(0xcbf2_9ce4_8422_2325), general };
    let mut out_bytes = 0u64;
    let mut direct = 0u64;
    for c in classes.iter().filter(|_| digest) {
        let r = rewrite_class(c, &mut reg);
        match r {
            Err(e) => reg.h.write(format!("err {e:?}").as_bytes()),
            Ok(o) => {
                // Which path took a method is left out: the two paths must give the same digest.
                direct += o.stats.methods_direct as u64;
                let stats = ClassStats { methods_direct: 0, ..o.stats };
                reg.h.write(format!("{stats:?}").as_bytes());
                match &o.bytes {
                    Some(b) => {
                        out_bytes += b.len() as u64;
                        reg.h.write(&(b.len() as u64).to_le_bytes());
                        reg.h.write(b);
                    }
                    None => reg.h.write(b"unchanged"),
                }
            }
        }
    }
    println!(
        "digest {:016x}: {} classes, {} methods, {} sites, {out_bytes} output bytes ({direct} methods rewritten directly)",
        reg.h.finish(),
        classes.len(),
        reg.methods,
        reg.sites
    );

    let mut times = Vec::new();
    for _ in 0..passes {
        let mut reg = Counter(0, 0);
        let t = Instant::now();
        for c in &classes {
            let _ = std::hint::black_box(rewrite_class(c, &mut reg));
        }
        times.push(t.elapsed().as_secs_f64() * 1e6 / classes.len() as f64);
    }
    times.sort_by(f64::total_cmp);
    if !times.is_empty() {
        println!(
            "us/class: best {:.2}, median {:.2} ({passes} passes)",
            times[0],
            times[times.len() / 2]
        );
    }
}

/// The timed passes through the load hook, and a digest of what one pass left behind.
fn hook_passes(classes: &[Vec<u8>], names: &[String], passes: usize, cold: bool, options: &Options) {
    let mut times = Vec::new();
    // Written before each class in `cold` mode: 4 MiB, more than the L2 cache of a core.
    let mut flush = if cold { vec![0u8; 4 << 20] } else { Vec::new() };
    let cache = options.cache.as_deref().map(|dir| ClassCache::open(dir, lucce_agent::rewrite::ProbeChoice::default(), None).unwrap_or_else(|e| panic!("class cache: {e}")));
    let digested = |pass: usize| pass == 0 || (pass == 1 && cache.is_some());
    for pass in 0..passes.max(1) {
        let registry = Registry::new();
        let stats = Mutex::new(Stats::default());
        let hooked_early = Mutex::new(None::<HashSet<String>>);
        let state =
            HookState { options, registry: &registry, stats: &stats, recorder: None, hooked_early: &hooked_early, cache: cache.as_ref() };
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        let mut flushed = std::time::Duration::ZERO;
        let t = Instant::now();
        for (c, n) in classes.iter().zip(names) {
            if cold {
                let t = Instant::now();
                for b in flush.iter_mut().step_by(64) {
                    *b = b.wrapping_add(1);
                }
                std::hint::black_box(&mut flush);
                flushed += t.elapsed();
            }
            // SAFETY: malloc returns null or `n` writable bytes, as `on_class` requires.
            let out = state.on_class(Some(n), Arrival::Load, c, |n| unsafe { libc::malloc(n) }.cast());
            if let Some((p, len)) = out {
                if digested(pass) {
                    // SAFETY: `on_class` filled `len` bytes at `p`.
                    h.write(unsafe { std::slice::from_raw_parts(p, len as usize) });
                }
                // SAFETY: `p` came from malloc above and is not used after this.
                unsafe { libc::free(p.cast()) };
            }
        }
        times.push((t.elapsed() - flushed).as_secs_f64() * 1e6 / classes.len() as f64);
        if let Some(c) = &cache {
            c.flush();
            let s = c.stats();
            println!("pass {pass}: {:.2} us/class, cache {} served, {} rewritten and kept", times[pass], s.hits, s.misses);
        }
        if digested(pass) {
            let t = registry.tables();
            for m in t.methods.iter().flatten() {
                h.write(format!("{}|{}|{}|{:?}|{}", m.class(), m.name(), m.descriptor(), m.source_file(), m.access_flags).as_bytes());
            }
            for s in t.sites.iter().flatten() {
                h.write(format!("{s:?}").as_bytes());
            }
            let mut s = stats.lock().unwrap().clone();
            (s.rewrite_ns_total, s.rewrite_cpu_ns_total, s.page_in_cpu_ns_total, s.rewrite_ns_max, s.slowest_class) = (0, 0, 0, 0, String::new());
            h.write(format!("{s:?}").as_bytes());
            println!("hook digest {:016x}: {} methods, {} sites registered", h.finish(), t.methods.len(), t.sites.len());
        }
    }
    times.sort_by(f64::total_cmp);
    let what = if cold { "hook on cold caches" } else { "hook" };
    println!("{what} us/class: best {:.2}, median {:.2} ({passes} passes)", times[0], times[times.len() / 2]);
}

/// The timed passes of a class that was rewritten once with placeholder ids
/// ([`Relocatable`]): each class's registry calls replayed into a live registry, the ids
/// patched in, the class published. What serving a class rewritten ahead would cost, against
/// the `hook` passes (which rewrite).
fn replay_passes(classes: &[Vec<u8>], passes: usize) {
    let ahead: Vec<(&Vec<u8>, Relocatable)> =
        classes.iter().filter_map(|c| Some((c, Relocatable::rewrite(c, &Counter(0, 0)).ok()?))).collect();
    let mut times = Vec::new();
    for _ in 0..passes.max(1) {
        let registry = Registry::new();
        let t = Instant::now();
        for (class, r) in &ahead {
            let mut reg = registry.registrar();
            std::hint::black_box(r.replay(class, &mut reg));
            reg.publish();
        }
        times.push(t.elapsed().as_secs_f64() * 1e6 / classes.len() as f64);
    }
    times.sort_by(f64::total_cmp);
    println!("replay us/class: best {:.2}, median {:.2} ({passes} passes)", times[0], times[times.len() / 2]);
}
