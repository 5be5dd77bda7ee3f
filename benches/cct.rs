//! CCT builder benchmark: events per second with 1 and 2 workers over a store of ≥ 10M events,
//! and peak memory. `cargo bench --bench cct` (prints a table).
//!
//! The store: random walks of 4 synthetic threads (median depth ~50) record
//! LUCCE_BENCH_DISTINCT events (default 200,000), nearly each a new context — random walks this
//! deep rarely repeat a stack. A profile of a real program sees the same contexts over and over,
//! so the rest of the LUCCE_BENCH_EVENTS events (default 10,000,000) re-record those events with
//! a skewed choice (a few hot contexts, a long tail). Set LUCCE_BENCH_DISTINCT to the event
//! count to measure the all-new-contexts worst case.
//!
//! LUCCE_BENCH_STORE reuses (or creates, when missing) a store at that path instead of a
//! temporary one; LUCCE_BENCH_WORKERS lists the pool sizes (default "1,2").

use std::path::{Path, PathBuf};
use std::time::Instant;

use lucce::synth::{random_op, Runtime, SimThread, SynthProgram};
use lucce_decoder::{build_cct, CctOptions, Graph};
use lucce_encoder::{Encoder, EncoderConfig};
use lucce_log_format::{StoreReader, StoreWriter, WriterOptions};
use rand::{rngs::SmallRng, SeedableRng};

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// Records `distinct` marks of 4 synthetic threads, then `events - distinct` repeats of them.
fn write_store(path: &Path, events: u64, distinct: u64) {
    use rand::Rng;
    let distinct = distinct.clamp(1, events.max(1));
    let prog = SynthProgram::generate(&mut SmallRng::seed_from_u64(1), 400);
    let writer = StoreWriter::create(path, WriterOptions::default()).unwrap();
    let enc = Encoder::new(EncoderConfig::default(), writer.handle());
    let rt = Runtime::new(&prog, &enc);
    let per_thread = distinct.div_ceil(4);
    let recorded = std::sync::Mutex::new(Vec::with_capacity(distinct as usize));
    std::thread::scope(|s| {
        for i in 0..4u64 {
            let (rt, out, recorded) = (&rt, writer.handle(), &recorded);
            let n = per_thread.min(distinct.saturating_sub(i * per_thread));
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(2 + i);
                let mut t = SimThread::start(rt, out.thread(&format!("bench-{i}")), 0, 200).unwrap();
                let (mut batch, mut got) = (Vec::with_capacity(4096), 0u64);
                while got < n {
                    if let Some(mut ev) = t.step(rt, random_op(&mut rng, t.depth(), 50)).unwrap() {
                        ev.truth = None; // production events carry only ⟨site, c, v⟩
                        recorded.lock().unwrap().push(ev.clone());
                        batch.push(ev);
                        got += 1;
                        if batch.len() == 4096 {
                            out.events(std::mem::take(&mut batch));
                        }
                    }
                }
                out.events(batch);
            });
        }
    });
    let recorded = recorded.into_inner().unwrap();
    let mut rng = SmallRng::seed_from_u64(99);
    let out = writer.handle();
    let mut left = events - distinct.min(events);
    while left > 0 {
        let k = left.min(4096);
        let batch = (0..k).map(|_| recorded[(rng.gen::<f64>().powi(3) * recorded.len() as f64) as usize].clone()).collect();
        out.events(batch);
        left -= k;
    }
    drop(rt);
    drop(enc);
    writer.close().unwrap();
}

/// Peak resident set (VmHWM) in MiB.
fn vm_hwm_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Resets VmHWM to the current RSS (Linux ≥ 4.0), so each run's peak is its own.
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // criterion-style discovery by `cargo bench -- --list`
    }
    let events: u64 = env("LUCCE_BENCH_EVENTS").unwrap_or(10_000_000);
    let distinct: u64 = env("LUCCE_BENCH_DISTINCT").unwrap_or(200_000);
    let workers: Vec<usize> = std::env::var("LUCCE_BENCH_WORKERS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let path: PathBuf = std::env::var_os("LUCCE_BENCH_STORE").map(PathBuf::from).unwrap_or_else(|| tmp.path().join("s"));
    if !path.exists() {
        let t = Instant::now();
        write_store(&path, events, distinct);
        println!("wrote {events} events ({distinct} from random walks, the rest repeats) in {:.1} s ({})", t.elapsed().as_secs_f64(), path.display());
    }
    let store = StoreReader::open(&path).unwrap();
    let n = store.commit().events;
    let graph = Graph::from_store(&store).unwrap();

    // What reading alone costs (one thread): the bound on any builder.
    reset_hwm();
    let t = Instant::now();
    let mut read = 0u64;
    for item in store.events() {
        read += item.unwrap().1.site as u64 & 1;
    }
    let read_s = t.elapsed().as_secs_f64();
    std::hint::black_box(read);

    println!("events                     {n}");
    println!("read only, 1 thread        {:.2} M events/s", n as f64 / read_s / 1e6);
    println!("{:<8} {:>14} {:>10} {:>10} {:>12} {:>14}", "workers", "M events/s", "seconds", "speedup", "CCT nodes", "peak RSS MiB");
    let mut base = None;
    let mut first = None;
    for &w in &workers {
        reset_hwm();
        let t = Instant::now();
        let cct = build_cct(&store, &graph, &CctOptions { workers: w, ..CctOptions::default() }).unwrap();
        let s = t.elapsed().as_secs_f64();
        let base_s = *base.get_or_insert(s);
        println!("{w:<8} {:>14.2} {:>10.3} {:>9.2}x {:>12} {:>14.1}", n as f64 / s / 1e6, s, base_s / s, cct.len(), vm_hwm_mib());
        assert_eq!(cct.total(0).events, n);
        match &first {
            None => first = Some(cct),
            Some(f) => assert!(f == &cct, "every pool size gives the same tree"),
        }
    }
    println!("node: {} bytes in the arena", std::mem::size_of::<lucce_decoder::cct::Node>());
}
