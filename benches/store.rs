//! Whole-store benchmarks: write throughput, bytes on disk per record, and decode throughput
//! over ≥ 1M events at a median depth around 50. `cargo bench --bench store` (prints a table;
//! LUCCE_BENCH_EVENTS overrides the event count).

use std::time::Instant;

use lucce::synth::{random_op, Runtime, SimThread, SynthProgram};
use lucce_decoder::{ContextDecoder, Graph};
use lucce_encoder::{Encoder, EncoderConfig};
use lucce_log_format::{StoreReader, StoreWriter, WriterOptions};
use rand::{rngs::SmallRng, SeedableRng};

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
    let mut t = SimThread::start(&rt, out.thread("main"), 0, 200).unwrap();
    let (mut batch, mut depths, mut n) = (Vec::with_capacity(4096), Vec::new(), 0u64);
    let start = Instant::now();
    while n < events {
        if let Some(mut ev) = t.step(&rt, random_op(&mut rng, t.depth(), 50)).unwrap() {
            ev.truth = None; // production events carry only ⟨site, c, v⟩
            if n % 1000 == 0 {
                depths.push(t.depth());
            }
            batch.push(ev);
            n += 1;
            if batch.len() == 4096 {
                out.events(std::mem::take(&mut batch));
            }
        }
    }
    out.events(batch);
    drop(rt);
    let stats = enc.stats();
    drop(enc);
    let report = writer.close().unwrap();
    let write_s = start.elapsed().as_secs_f64();
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
    println!("record + write             {:.0} events/s", n as f64 / write_s);
    println!("bytes on disk              {bytes} ({:.1} per event+graph record)", bytes as f64 / (n + report.graph_events) as f64);
    println!("graph replay               {:.3} s", replay_s);
    println!("decode                     {:.0} events/s ({:.0} frames/s, one core)", n as f64 / decode_s, frames as f64 / decode_s);
}
