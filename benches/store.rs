//! Whole-store benchmarks: write throughput, bytes on disk per record, and decode throughput
//! over ≥ 1M events at a median depth around 50. `cargo bench --bench store` (prints a table;
//! LUCCE_BENCH_EVENTS overrides the event count).

use std::time::Instant;

use lucce::synth::{random_op, Runtime, SimThread, SynthProgram};
use lucce_decoder::{ContextDecoder, Graph};
use lucce_encoder::{Encoder, EncoderConfig};
use lucce_log_format::{StoreReader, StoreWriter, WriterOptions};
use rand::{rngs::SmallRng, SeedableRng};

/// What the random walk aims for; gives a median depth around 50 with this generator.
const TARGET_DEPTH: usize = 75;

fn dir_bytes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() { dir_bytes(&e.path()) } else { e.metadata().unwrap().len() }
        })
        .sum()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // criterion-style discovery by `cargo bench -- --list`
    }
    let events: u64 = std::env::var("LUCCE_BENCH_EVENTS").ok().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let prog = SynthProgram::generate(&mut SmallRng::seed_from_u64(1), 400);
    let writer = StoreWriter::create(&path, WriterOptions::default()).unwrap();
    let enc = Encoder::new(EncoderConfig::default(), writer.handle());
    let rt = Runtime::new(&prog, &enc);
    let out = writer.handle();
    let mut rng = SmallRng::seed_from_u64(2);
    let mut t = SimThread::start(&rt, out.thread("main"), 0, 400).unwrap();
    // Phase 1: run the program, keeping events in memory (graph events go to the store).
    let (mut all, mut depths) = (Vec::with_capacity(events as usize), Vec::new());
    while (all.len() as u64) < events {
        if let Some(mut ev) = t.step(&rt, random_op(&mut rng, t.depth(), TARGET_DEPTH)).unwrap() {
            ev.truth = None; // production events carry only ⟨site, c, v⟩
            if all.len() % 1000 == 0 {
                depths.push(t.depth());
            }
            all.push(ev);
        }
    }
    let n = all.len() as u64;
    drop(rt);
    let stats = enc.stats();
    drop(enc);
    writer.flush().unwrap();
    let graph_bytes = dir_bytes(&path);
    // Phase 2: the writer alone: hand over every event in batches, close (everything durable).
    let start = Instant::now();
    let mut it = all.into_iter();
    loop {
        let batch: Vec<_> = it.by_ref().take(4096).collect();
        if batch.is_empty() {
            break;
        }
        out.events(batch);
    }
    let report = writer.close().unwrap();
    let write_s = start.elapsed().as_secs_f64();
    let event_bytes = dir_bytes(&path) - graph_bytes;
    depths.sort_unstable();

    let store = StoreReader::open(&path).unwrap();
    let t0 = Instant::now();
    let graph = Graph::from_store(&store).unwrap();
    let replay_s = t0.elapsed().as_secs_f64();
    let bytes = store.bytes_on_disk().unwrap();
    let evs: Vec<_> = store.events().map(|r| r.unwrap().1).collect();
    let t1 = Instant::now();
    let mut dec = ContextDecoder::new(&graph);
    let mut frames = 0u64;
    for ev in &evs {
        let ctx = dec.decode(ev.site, ev.c, ev.v).unwrap();
        frames += dec.depth(ctx) as u64;
    }
    let decode_s = t1.elapsed().as_secs_f64();
    println!("events                     {n}");
    println!("median depth               {}", depths[depths.len() / 2]);
    println!("graph versions             {} ({} anchors, {} edges)", stats.version, stats.anchors, stats.edges);
    println!("store write (writer thread) {:.0} events/s", n as f64 / write_s);
    println!("bytes on disk              {bytes}");
    println!("  per graph event          {:.1}", graph_bytes as f64 / report.graph_events.max(1) as f64);
    println!("  per event                {:.1}", event_bytes as f64 / n as f64);
    println!("graph replay               {:.3} s", replay_s);
    println!("decode                     {:.0} events/s ({:.0} frames/s, one core)", n as f64 / decode_s, frames as f64 / decode_s);
}
