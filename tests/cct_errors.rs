//! The CCT builder on stores it cannot fully use: events that do not decode give the error of the
//! lowest-numbered one for every schedule; a missing event block is an error, never a smaller
//! tree.

mod cct_support;

use cct_support::*;
use lucce::synth::{Runtime, SimThread};
use lucce_decoder::{build_cct, CctError, CctOptions, DecodeError, Graph, PacketOrder};
use lucce_encoder::{Encoder, EncoderConfig};
use lucce_log_format::{wait_until_released, EventRecord, StoreError, StoreReader, StoreWriter, WriterOptions};

/// Every schedule the builder can take over a store of `n` events.
fn schedules(n: u64) -> Vec<CctOptions> {
    let mut v = Vec::new();
    for packet in [1u64, 2, 3, 7, n.max(1)] {
        for workers in [1usize, 2, 3] {
            for order in [PacketOrder::InOrder, PacketOrder::Reverse, PacketOrder::Shuffled(packet * 7 + workers as u64)] {
                v.push(CctOptions { workers, packet, order, ..CctOptions::default() });
            }
        }
    }
    v
}

/// The paper's events in order, with undecodable events written at the given positions: each a
/// copy of the next good event, changed by its function.
type Spoil = fn(&mut EventRecord);

fn record_with_bad(dir: &std::path::Path, bad: &[(usize, Spoil)], block: usize) -> u64 {
    let prog = paper_program();
    let writer = StoreWriter::create(dir, WriterOptions { block_records: block, ..Default::default() }).unwrap();
    let out = writer.handle();
    let enc = Encoder::new(EncoderConfig::default(), writer.handle());
    let rt = Runtime::new(&prog, &enc);
    let mut t = SimThread::start(&rt, out.thread("t0"), 0, usize::MAX).unwrap();
    let mut seq = 0;
    for e in paper_events(&[0, 1, 2, 3]) {
        t.unwind_to(1);
        let mut m = 0;
        for &via in &e.vias {
            let callee = prog.methods[m].sites[via].targets[0];
            t.call(&rt, via, callee).unwrap();
            m = callee;
        }
        let good = t.mark(&rt, e.kind, None);
        for (at, spoil) in bad {
            if *at == seq {
                let mut ev = good.clone();
                spoil(&mut ev);
                out.event(ev);
                seq += 1;
            }
        }
        out.event(good);
        seq += 1;
    }
    drop(rt);
    drop(enc);
    writer.close().unwrap();
    seq as u64
}

#[test]
fn undecodable_events_report_the_lowest_numbered_for_every_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    // Three bad events: an unknown site at #9, a version past the store at #4 (reported), and
    // the same bad key again at #6.
    let bad: [(usize, Spoil); 3] = [(4, |e| e.v = 1 << 40), (6, |e| e.v = 1 << 40), (9, |e| e.site = 10_000)];
    let n = record_with_bad(&path, &bad, 2);
    let store = StoreReader::open(&path).unwrap();
    let graph = Graph::from_store(&store).unwrap();
    for opts in schedules(n) {
        match build_cct(&store, &graph, &opts) {
            Err(CctError::Decode { seq: 4, source: DecodeError::VersionBeyondStore { .. } }) => {}
            other => panic!("{opts:?}: {:?}", other.map(|c| c.len())),
        }
    }
}

#[test]
fn a_missing_event_block_is_an_error_not_a_smaller_tree() {
    for victim in ["first", "middle", "last"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let n = record_with_bad(&path, &[], 2);
        {
            let db = sled::Config::new().path(&path).open().unwrap();
            let events = db.open_tree("events").unwrap();
            let keys: Vec<_> = events.iter().keys().map(|k| k.unwrap()).collect();
            assert!(keys.len() >= 3, "several blocks");
            let key = match victim {
                "first" => &keys[0],
                "middle" => &keys[keys.len() / 2],
                _ => &keys[keys.len() - 1],
            };
            events.remove(key).unwrap();
            db.flush().unwrap();
        }
        wait_until_released(&path);
        let opened = StoreReader::open(&path);
        // The last block holds the last committed event, which opening the store checks.
        if victim == "last" {
            let e = opened.err().expect("a store without its last block opened");
            assert!(matches!(e, StoreError::Corrupt(_)) && e.to_string().contains("is not in the store"), "{e}");
            continue;
        }
        let store = opened.unwrap();
        let graph = Graph::from_store(&store).unwrap();
        for opts in schedules(n) {
            match build_cct(&store, &graph, &opts) {
                Err(CctError::Store(e)) => assert!(e.to_string().contains("Events stream"), "{victim} {opts:?}: {e}"),
                other => panic!("{victim} {opts:?}: {:?}", other.map(|c| c.len())),
            }
        }
    }
}
