//! Rewrites every `.class` file under a directory (e.g. the JDK, extracted once with
//! `jimage extract --dir DIR $JAVA_HOME/lib/modules`) and prints a digest of all outputs and
//! statistics plus the rewrite time per class.
//!
//! `cargo run --release -p lucce-agent --example rewrite_dir -- DIR [PASSES] [nodigest]`
//!
//! The digest is for comparing two builds of the rewriter: equal digests mean byte-identical
//! output classes and identical statistics (ids come from a counting registry, in call order, so
//! the order and content of the registry calls are covered too). The time is the best of PASSES
//! passes over all classes (the files are read into memory first).

use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lucce_agent::rewrite::{rewrite_class, MethodInfo, SiteInfo, SiteRegistry};

/// Counts ids and folds every registry call into a digest.
struct Digest {
    methods: u32,
    sites: u32,
    h: Fnv,
}

impl SiteRegistry for Digest {
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

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "class") {
            out.push(p);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: rewrite_dir DIR [PASSES]"));
    let passes: usize = args.next().map_or(5, |s| s.parse().expect("PASSES"));
    // For profiles: only the timed passes.
    let digest = args.next().as_deref() != Some("nodigest");
    let mut files = Vec::new();
    collect(&dir, &mut files);
    files.sort();
    let classes: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();

    let mut reg = Digest { methods: 0, sites: 0, h: Fnv(0xcbf2_9ce4_8422_2325) };
    let mut out_bytes = 0u64;
    for c in classes.iter().filter(|_| digest) {
        let r = rewrite_class(c, &mut reg);
        match r {
            Err(e) => reg.h.write(format!("err {e:?}").as_bytes()),
            Ok(o) => {
                reg.h.write(format!("{:?}", o.stats).as_bytes());
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
        "digest {:016x}: {} classes, {} methods, {} sites, {out_bytes} output bytes",
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
