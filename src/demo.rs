//! `lucce demo`: records a synthetic multi-threaded program into a real store on disk.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use lucce_encoder::{Encoder, EncoderConfig, EncoderStats};
use lucce_log_format::{StoreWriter, WriterHandle, WriterOptions, WriterReport};
use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::synth::{deep_recursion, random_op, Op, Runtime, SimThread, SynthProgram};

#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub out: PathBuf,
    pub threads: usize,
    /// Events to record in all (marks at random points of every thread).
    pub events: u64,
    pub methods: usize,
    pub seed: u64,
    /// Depth of the one deep recursion thread 0 runs first (through two recursive call sites).
    pub recursion_depth: usize,
    /// Median stack depth the random walk aims for.
    pub target_depth: usize,
    pub call_id_limit: u64,
    /// Every Nth event keeps the stack the simulated runtime had, for verification.
    pub verify_every: u64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            out: PathBuf::from("lucce-demo.store"),
            threads: 4,
            events: 200_000,
            methods: 300,
            seed: 42,
            recursion_depth: 10_000,
            target_depth: 50,
            call_id_limit: EncoderConfig::default().call_id_limit,
            verify_every: 10,
        }
    }
}

#[derive(Debug, Clone)]
pub struct DemoReport {
    pub encoder: EncoderStats,
    pub writer: WriterReport,
    pub elapsed: Duration,
    pub method_entries: u64,
}

/// Runs the synthetic program on `threads` threads and records it into a new store.
pub fn record(opts: &DemoOptions) -> anyhow::Result<DemoReport> {
    let program = SynthProgram::generate(&mut SmallRng::seed_from_u64(opts.seed), opts.methods);
    let writer = StoreWriter::create(&opts.out, WriterOptions::default())
        .with_context(|| format!("creating the store {}", opts.out.display()))?;
    let encoder = Encoder::new(EncoderConfig { call_id_limit: opts.call_id_limit, ..Default::default() }, writer.handle());
    let rt = Runtime::new(&program, &encoder);
    let start = Instant::now();
    let per_thread = opts.events / opts.threads.max(1) as u64;
    let entries: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..opts.threads.max(1))
            .map(|i| {
                let (rt, handle) = (&rt, writer.handle());
                s.spawn(move || run_thread(rt, handle, i, per_thread, opts))
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("demo thread panicked")).sum::<anyhow::Result<u64>>()
    })?;
    let encoder_stats = encoder.stats();
    let elapsed = start.elapsed();
    drop(rt);
    drop(encoder);
    let writer_report = writer.close()?;
    Ok(DemoReport { encoder: encoder_stats, writer: writer_report, elapsed, method_entries: entries })
}

fn run_thread<S: lucce_encoder::GraphSink>(rt: &Runtime<'_, S>, out: WriterHandle, i: usize, events: u64, opts: &DemoOptions) -> anyhow::Result<u64> {
    let mut rng = SmallRng::seed_from_u64(opts.seed ^ (0x9e37_79b9 * (i as u64 + 1)));
    let tid = out.thread(&format!("demo-worker-{i}"));
    let mut t = SimThread::start(rt, tid, 0, 4 * opts.target_depth)?;
    let mut batch = Vec::with_capacity(1024);
    let mut entries = 0u64;
    if i == 0 && opts.recursion_depth > 0 {
        batch.push(deep_recursion(rt, &mut t, opts.recursion_depth, opts.seed)?);
        entries += opts.recursion_depth as u64 + 1;
    }
    let mut recorded = batch.len() as u64;
    while recorded < events {
        let op = random_op(&mut rng, t.depth(), opts.target_depth);
        if let Some(mut ev) = t.step(rt, op)? {
            if !recorded.is_multiple_of(opts.verify_every.max(1)) {
                ev.truth = None;
            }
            batch.push(ev);
            recorded += 1;
            if batch.len() == 1024 {
                out.events(std::mem::take(&mut batch));
            }
        } else if matches!(op, Op::Call { .. }) {
            entries += 1;
        }
    }
    out.events(batch);
    Ok(entries)
}
