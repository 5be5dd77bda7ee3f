//! Property tests: random call/return/throw traces over a call graph that grows while it runs,
//! 1–16 interleaved threads, recorded through a real on-disk store, reopened and decoded; every
//! event must decode to exactly its true stack.

mod common;

use lucce::synth::{deep_recursion, Op, Runtime, SimThread, SynthProgram, RECURSIVE};
use lucce_encoder::{Encoder, EncoderConfig};
use lucce_log_format::{StoreWriter, WriterOptions};
use common::op;
use proptest::prelude::*;

fn program(shape: &[Vec<Vec<usize>>]) -> SynthProgram {
    SynthProgram::from_shape(shape)
}

/// Runs `ops` (thread, op) interleaved on one OS thread; returns the number of events.
/// `recomputed`: `EncoderConfig::recomputed_stay_edges` (which stays skip the memo);
/// `anchor_memo`: `EncoderConfig::anchor_memo_capacity`, `stay_memo_capacity` and
/// `wide_memo_capacity` (how many anchors, stays and links of anchored callers the encoder
/// remembers).
fn run(dir: &std::path::Path, prog: &SynthProgram, ops: &[(u8, Op)], limit: u64, flush_every: usize, recomputed: usize, anchor_memo: usize) -> usize {
    let writer = StoreWriter::create(dir, WriterOptions { block_records: 7, ..Default::default() }).unwrap();
    let out = writer.handle();
    let config = EncoderConfig {
        call_id_limit: limit,
        site_cache_capacity: 64,
        anchor_cache_capacity: 64,
        recomputed_stay_edges: recomputed,
        anchor_memo_capacity: anchor_memo,
        stay_memo_capacity: anchor_memo,
        wide_memo_capacity: anchor_memo,
    };
    let enc = Encoder::new(config, writer.handle());
    let rt = Runtime::new(prog, &enc);
    let mut threads: Vec<Option<SimThread>> = (0..16).map(|_| None).collect();
    let mut events = 0;
    for (i, &(t, op)) in ops.iter().enumerate() {
        let t = t as usize % 16;
        let th = match &mut threads[t] {
            Some(th) => th,
            slot => slot.insert(SimThread::start(&rt, t as u32, t % prog.methods.len(), 64).unwrap()),
        };
        if let Some(ev) = th.step(&rt, op).unwrap() {
            out.event(ev);
            events += 1;
        }
        if flush_every > 0 && i % flush_every == 0 {
            out.flush().unwrap();
        }
    }
    drop(rt);
    drop(enc);
    writer.close().unwrap();
    events
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_event_decodes_to_its_true_stack(
        shape in prop::collection::vec(prop::collection::vec(prop::collection::vec(0usize..12, 1..4), 0..4), 2..12),
        threads in 1u8..=16,
        ops in prop::collection::vec((any::<u8>(), op()), 1..400),
        limit in prop_oneof![Just(2u64), Just(5), Just(64), Just(1 << 20), Just(1 << 62)],
        flush_every in 0usize..50,
        // Every stay memoized, only the first edge's recomputed, nearly all recomputed.
        recomputed in prop_oneof![Just(0usize), Just(1), Just(16)],
        // Anchor, stay and link memos that forget almost at once (contexts get anchored and
        // linked again), or never.
        anchor_memo in prop_oneof![Just(16usize), Just(1 << 18)],
    ) {
        let prog = program(&shape);
        let ops: Vec<(u8, Op)> = ops.into_iter().map(|(t, o)| (t % threads, o)).collect();
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s");
        let events = run(&store, &prog, &ops, limit, flush_every, recomputed, anchor_memo);
        common::assert_all_exact(&store, events);
    }
}

/// P gets a second caller after P → N → M → K were entered: P's numCC grows, and frames below
/// P that kept its new version with the widths N and M had before would decode wrongly (encoder
/// .rs, "Versions": a stay needs room for the caller's whole range).
#[test]
fn callees_of_a_method_whose_width_grew_decode_exactly() {
    // Thread 0 starts in A, thread 1 in B; A → P, B → P, P → N → M → K.
    let prog = program(&[vec![vec![2]], vec![vec![2]], vec![vec![3]], vec![vec![4]], vec![vec![5]], vec![]]);
    let call = Op::Call { site: 0, target: 0 };
    let mut ops = Vec::new();
    for t in [0u8, 1, 0, 1] {
        ops.extend([call, call, call, call, Op::Mark, Op::Return, Op::Return, Op::Return, Op::Return].map(|op| (t, op)));
    }
    // The stays below P: kept in the memo, and computed again at each entry.
    for recomputed in [0, 16] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s");
        let events = run(&store, &prog, &ops, 1 << 62, 0, recomputed, 1 << 18);
        assert_eq!(events, 4);
        common::assert_all_exact(&store, events);
    }
}

fn recursion_program() -> SynthProgram {
    // m0 → RECURSIVE (m1), which calls itself through two sites and leaves through a third.
    program(&[vec![vec![RECURSIVE]], vec![vec![RECURSIVE], vec![RECURSIVE], vec![2]], vec![]])
}

#[test]
fn recursion_10000_deep_through_two_call_sites_decodes_exactly_and_never_wraps() {
    for limit in [1u64 << 62, 1 << 20, 3] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s");
        let prog = recursion_program();
        let writer = StoreWriter::create(&store, WriterOptions::default()).unwrap();
        let enc = Encoder::new(EncoderConfig { call_id_limit: limit, ..Default::default() }, writer.handle());
        let rt = Runtime::new(&prog, &enc);
        let mut t = SimThread::start(&rt, 0, 0, 64).unwrap();
        let mut n = 0;
        for (depth, pattern) in [(10_000, 0xdead_beef_u64), (12_345, 0x5555_5555_5555_5555), (10_000, 0xdead_beef)] {
            writer.handle().event(deep_recursion(&rt, &mut t, depth, pattern).unwrap());
            n += 1;
        }
        let stats = enc.stats();
        assert!(stats.anchors > 0, "a recursion this deep through two sites must need anchors (limit {limit})");
        let anchors_after_first_pass = stats.anchors;
        writer.handle().event(deep_recursion(&rt, &mut t, 10_000, 0xdead_beef).unwrap());
        n += 1;
        assert_eq!(enc.stats().anchors, anchors_after_first_pass, "repeating a recursion must not log new anchors");
        drop(rt);
        drop(enc);
        writer.close().unwrap();
        common::assert_all_exact(&store, n);
    }
}

#[test]
fn sixteen_real_threads_share_one_encoder_and_every_event_decodes() {
    use rand::{rngs::SmallRng, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let prog = SynthProgram::generate(&mut SmallRng::seed_from_u64(7), 120);
    let writer = StoreWriter::create(&store, WriterOptions::default()).unwrap();
    let enc = Encoder::new(EncoderConfig::default(), writer.handle());
    let rt = Runtime::new(&prog, &enc);
    let per_thread = 3000;
    std::thread::scope(|s| {
        for i in 0..16u32 {
            let (rt, out) = (&rt, writer.handle());
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(i as u64);
                let mut t = SimThread::start(rt, i, 0, 200).unwrap();
                let mut got = 0;
                while got < per_thread {
                    if let Some(ev) = t.step(rt, lucce::synth::random_op(&mut rng, t.depth(), 40)).unwrap() {
                        out.event(ev);
                        got += 1;
                    }
                }
            });
        }
    });
    // Both cases of an entry happen here, so the exactness below covers both (encoder.rs,
    // "Versions"); with stays dead, every entry would link and decoding would still pass.
    let stats = enc.stats();
    assert!(stats.stays > 0 && stats.links > 0, "{stats:?}");
    drop(rt);
    drop(enc);
    writer.close().unwrap();
    common::assert_all_exact(&store, 16 * per_thread);
}
