//! Property tests: for random event streams recorded into real stores, the parallel builder
//! equals a simple sequential builder (over the true stacks each event carries) for every packet
//! size, packet order and worker count; counts sum to the events; nodes are the distinct
//! contexts; the depth is the deepest stack.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use lucce::outputs::Labeler;
use lucce::synth::{Op, Runtime, SimThread, SynthProgram};
use lucce_decoder::cct::KindSet;
use lucce_decoder::{build_cct, Cct, CctOptions, Graph, PacketOrder};
use lucce_encoder::{Encoder, EncoderConfig};
use lucce_log_format::{EventKind, EventRecord, StoreReader, StoreWriter, WriterOptions};
use common::op;
use proptest::prelude::*;

fn program(shape: &[Vec<Vec<usize>>]) -> SynthProgram {
    SynthProgram::from_shape(shape)
}

const KINDS: [EventKind; 3] = [EventKind::Mark, EventKind::Sample, EventKind::Alloc];

/// Records the ops of up to 4 interleaved threads; returns the events as written.
fn record(dir: &std::path::Path, prog: &SynthProgram, ops: &[(u8, Op, u8)], limit: u64) -> Vec<EventRecord> {
    let writer = StoreWriter::create(dir, WriterOptions { block_records: 5, ..Default::default() }).unwrap();
    let out = writer.handle();
    let enc = Encoder::new(EncoderConfig { call_id_limit: limit, site_cache_capacity: 64, anchor_cache_capacity: 64, ..Default::default() }, writer.handle());
    let rt = Runtime::new(prog, &enc);
    let mut threads: Vec<Option<SimThread>> = (0..4).map(|_| None).collect();
    let mut events = Vec::new();
    for &(t, op, kind) in ops {
        let t = t as usize % 4;
        let th = match &mut threads[t] {
            Some(th) => th,
            slot => slot.insert(SimThread::start(&rt, out.thread(&format!("t{t}")), t % prog.methods.len(), 48).unwrap()),
        };
        if let Some(mut ev) = th.step(&rt, op).unwrap() {
            ev.kind = KINDS[kind as usize % 3];
            events.push(ev.clone());
            out.event(ev);
        }
    }
    drop(rt);
    drop(enc);
    writer.close().unwrap();
    events
}

/// The sequential reference: each selected event's true stack, root first, as labels.
fn reference(events: &[EventRecord], kinds: KindSet, lines: bool, per_thread: bool, names: &HashMap<u32, String>) -> BTreeMap<Vec<String>, u64> {
    let mut m = BTreeMap::new();
    for ev in events.iter().filter(|e| kinds.contains(e.kind)) {
        let mut path: Vec<String> = Vec::new();
        if per_thread {
            path.push(format!("[thread {}]", names[&ev.thread]));
        }
        for f in ev.truth.as_ref().unwrap().iter().rev() {
            path.push(if lines { format!("{}.{}({}:{})", f.class, f.method, f.file.as_deref().unwrap(), f.line) } else { format!("{}.{}", f.class, f.method) });
        }
        *m.entry(path).or_insert(0) += 1;
    }
    m
}

/// The tree's contexts with events of their own, as label paths.
fn contexts(cct: &Cct, labeler: &Labeler<'_>) -> BTreeMap<Vec<String>, u64> {
    (1..cct.len() as u32)
        .filter(|&i| cct.node(i).metrics.events > 0)
        .map(|i| (cct.path(i).into_iter().map(|k| labeler.label(k)).collect(), cct.node(i).metrics.events))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn parallel_equals_sequential_for_every_schedule(
        shape in prop::collection::vec(prop::collection::vec(prop::collection::vec(0usize..10, 1..4), 0..4), 2..10),
        ops in prop::collection::vec((any::<u8>(), op(), any::<u8>()), 1..300),
        limit in prop_oneof![Just(3u64), Just(64), Just(1 << 62)],
        kind_bits in 1u8..8,
        lines in any::<bool>(),
        per_thread in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let prog = program(&shape);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let events = record(&path, &prog, &ops, limit);
        let store = StoreReader::open(&path).unwrap();
        // Half the cases reopen the database every few blocks read (its memory bound).
        if seed % 2 == 0 {
            store.backend().set_reopen_after(300);
        }
        let graph = Graph::from_store(&store).unwrap();
        let names: HashMap<u32, String> = store.threads().unwrap().into_iter().map(|(id, t)| (id, t.name)).collect();
        let kinds = KindSet::of(&KINDS.iter().enumerate().filter(|(i, _)| kind_bits >> i & 1 == 1).map(|(_, &k)| k).collect::<Vec<_>>());
        let labeler = Labeler { graph: &graph, threads: &names, lines };

        let want = reference(&events, kinds, lines, per_thread, &names);
        let selected: u64 = want.values().sum();
        let prefixes: BTreeSet<&[String]> = want.keys().flat_map(|p| (1..=p.len()).map(move |n| &p[..n])).collect();
        let deepest = want.keys().map(|p| p.len()).max().unwrap_or(0);

        let mut first: Option<Cct> = None;
        let n = events.len() as u64;
        for packet in [1, 2, 5, 17, n.max(1)] {
            for workers in [1usize, 2, 3] {
                let order = match workers { 1 => PacketOrder::InOrder, 2 => PacketOrder::Reverse, _ => PacketOrder::Shuffled(seed ^ packet) };
                // Small spill bounds make workers decode and clear their tables (and decoders
                // their memos) mid-stream: the tree must not change.
                let spill_keys = match (packet + workers as u64) % 3 { 0 => 1, 1 => 7, _ => usize::MAX };
                let opts = CctOptions { kinds, lines, per_thread, workers, packet, order, spill_keys };
                let cct = build_cct(&store, &graph, &opts).unwrap();
                match &first {
                    Some(f) => prop_assert_eq!(&cct, f, "packet {} workers {}", packet, workers),
                    None => {
                        prop_assert_eq!(contexts(&cct, &labeler), want.clone());
                        prop_assert_eq!(cct.total(0).events, selected);
                        prop_assert_eq!(cct.len() - 1, prefixes.len());
                        prop_assert_eq!(cct.max_depth() as usize, deepest);
                        first = Some(cct);
                    }
                }
            }
        }
        if seed % 2 == 0 && events.len() >= 20 {
            prop_assert!(store.backend().reopens() > 0, "the reopening cases must reopen");
        }
    }
}
