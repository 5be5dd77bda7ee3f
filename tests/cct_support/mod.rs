//! Shared by the CCT tests: small programs, stores recorded from explicit call paths, and the
//! ParCCT paper's worked example.

#![allow(dead_code)]

use std::path::Path;

use lucce::synth::{Runtime, SimThread, SynthMethod, SynthProgram, SynthSite};
use lucce_encoder::{Encoder, EncoderConfig};
use lucce_log_format::{EventKind, StoreWriter, WriterOptions};

/// A program from `(name, callees by call site)`; method 0 is the thread entry.
pub fn program(methods: &[(&str, &[usize])]) -> SynthProgram {
    SynthProgram {
        methods: methods
            .iter()
            .map(|(name, callees)| SynthMethod {
                class: "p.Sample".into(),
                name: name.to_string(),
                file: "Sample.java".into(),
                sites: callees.iter().enumerate().map(|(k, &t)| SynthSite { line: 10 * (k as i32 + 1), targets: vec![t] }).collect(),
                mark_line: 1,
            })
            .collect(),
    }
}

/// One event: in `thread`, after calling down from the entry method through the given call
/// sites (indices into each method's sites), an event of `kind` in the innermost method.
#[derive(Debug, Clone)]
pub struct PathEvent {
    pub thread: usize,
    pub vias: Vec<usize>,
    pub kind: EventKind,
}

/// Records `events` in order into a new store at `dir`; threads are named `t0`, `t1`, ...
/// `block` is the writer's records per block (small values give many blocks).
pub fn record(dir: &Path, prog: &SynthProgram, events: &[PathEvent], block: usize) {
    let writer = StoreWriter::create(dir, WriterOptions { block_records: block, ..Default::default() }).unwrap();
    let out = writer.handle();
    let enc = Encoder::new(EncoderConfig::default(), writer.handle());
    let rt = Runtime::new(prog, &enc);
    let nthreads = events.iter().map(|e| e.thread + 1).max().unwrap_or(0);
    let mut threads: Vec<SimThread> = (0..nthreads).map(|i| SimThread::start(&rt, out.thread(&format!("t{i}")), 0, usize::MAX).unwrap()).collect();
    for e in events {
        let t = &mut threads[e.thread];
        t.unwind_to(1);
        let mut m = 0;
        for &via in &e.vias {
            let callee = prog.methods[m].sites[via].targets[0];
            t.call(&rt, via, callee).unwrap();
            m = callee;
        }
        out.event(t.mark(&rt, e.kind, None));
    }
    drop(rt);
    drop(enc);
    writer.close().unwrap();
}

/// The ParCCT paper's Figure 6: `a() { b(); c(); b(); d(); }`, `c() { d(); }`,
/// `d() { e(); b(); }`, `b() {}`, `e() {}`.
pub fn paper_program() -> SynthProgram {
    // a=0, b=1, c=2, d=3, e=4
    program(&[("a", &[1, 2, 1, 3]), ("b", &[]), ("c", &[3]), ("d", &[4, 1]), ("e", &[])])
}

/// The calls of the paper's four packets (Figure 7, packet size 7 with the shadow stack as
/// header), each as the call path from `a`. Packet 1 holds a, b, c, d, e; packet 2 (header
/// a c d) the b in d; packet 3 (header a) the second b, d, e; packet 4 (header a d) the last b.
pub fn paper_packets() -> Vec<Vec<Vec<usize>>> {
    vec![
        vec![vec![], vec![0], vec![1], vec![1, 0], vec![1, 0, 0]],
        vec![vec![1, 0, 1]],
        vec![vec![2], vec![3], vec![3, 0]],
        vec![vec![3, 1]],
    ]
}

/// The paper's calls as events (calls mode: each method entry a `Sample`), packets in `order`.
pub fn paper_events(order: &[usize]) -> Vec<PathEvent> {
    let packets = paper_packets();
    order.iter().flat_map(|&p| packets[p].iter().map(|vias| PathEvent { thread: 0, vias: vias.clone(), kind: EventKind::Sample })).collect()
}

pub const PAPER_CCT: &str = "root{a:1{b:2,c:1{d:1{e:1,b:1}},d:1{e:1,b:1}}}";

/// Runs the `lucce` binary; returns (exit code, stdout, stderr).
pub fn lucce(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lucce")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}
