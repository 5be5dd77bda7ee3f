//! Golden test: the ParCCT paper's worked example. The calls of its four packets, recorded in
//! any order, built with any packet size, packet order and worker count, give the CCT of its
//! Figure 6.

mod cct_support;

use std::collections::HashMap;

use cct_support::*;
use lucce::outputs::Labeler;
use lucce_decoder::cct::KindSet;
use lucce_decoder::{build_cct, CctOptions, Graph, PacketOrder};
use lucce_log_format::{EventKind, StoreReader};

/// Every permutation of 0..n.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
fn the_four_packets_in_any_order_give_the_papers_cct() {
    let prog = paper_program();
    let threads = HashMap::new();
    // All 24 recording orders; each store built under several packet sizes, orders and pools.
    for (k, order) in permutations(4).into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        record(&path, &prog, &paper_events(&order), 1 + k % 4);
        let store = StoreReader::open(&path).unwrap();
        let graph = Graph::from_store(&store).unwrap();
        let labeler = Labeler { graph: &graph, threads: &threads, lines: false };
        let mut reference = None;
        for packet in [1u64, 2, 3, 7, 100] {
            for workers in [1usize, 2, 4] {
                for porder in [PacketOrder::InOrder, PacketOrder::Reverse, PacketOrder::Shuffled(k as u64 * 31 + packet)] {
                    let opts = CctOptions { kinds: KindSet::of(&[EventKind::Sample]), workers, packet, order: porder, ..CctOptions::default() };
                    let cct = build_cct(&store, &graph, &opts).unwrap();
                    assert_eq!(cct.compact(|key| labeler.short(key)), PAPER_CCT, "recording order {order:?}, packet {packet}, {workers} workers, {porder:?}");
                    assert_eq!(cct.total(0).events, 10);
                    match &reference {
                        None => reference = Some(cct),
                        Some(r) => assert_eq!(&cct, r, "identical trees for every schedule"),
                    }
                }
            }
        }
    }
}

#[test]
fn with_lines_the_two_calls_of_b_in_a_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    record(&path, &paper_program(), &paper_events(&[2, 0, 3, 1]), 4096);
    let store = StoreReader::open(&path).unwrap();
    let graph = Graph::from_store(&store).unwrap();
    let threads = HashMap::new();
    let labeler = Labeler { graph: &graph, threads: &threads, lines: true };
    let cct = build_cct(&store, &graph, &CctOptions { lines: true, workers: 2, packet: 3, ..CctOptions::default() }).unwrap();
    // Frames are "method:line" then the count: a is at line 1 (where its events are recorded,
    // registered after its call sites) for its own call, and at the line of the call site (10,
    // 20, 30, 40) above its callees; siblings in site order.
    assert_eq!(
        cct.compact(|k| labeler.short(k)),
        "root{a:10:0{b:1:1},a:20:0{c:10:0{d:10:0{e:1:1},d:20:0{b:1:1},d:1:1},c:1:1},a:30:0{b:1:1},a:40:0{d:10:0{e:1:1},d:20:0{b:1:1},d:1:1},a:1:1}"
    );
}

#[test]
fn per_thread_roots_keep_threads_apart() {
    let prog = paper_program();
    let mut events = paper_events(&[0, 1, 2, 3]);
    for e in paper_events(&[3, 2, 1, 0]) {
        events.push(PathEvent { thread: 1, ..e });
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    record(&path, &prog, &events, 5);
    let store = StoreReader::open(&path).unwrap();
    let graph = Graph::from_store(&store).unwrap();
    let threads: HashMap<u32, String> = store.threads().unwrap().into_iter().map(|(id, t)| (id, t.name)).collect();
    let labeler = Labeler { graph: &graph, threads: &threads, lines: false };
    let body = &PAPER_CCT["root{".len()..PAPER_CCT.len() - 1];
    for workers in [1, 2] {
        let split = build_cct(&store, &graph, &CctOptions { per_thread: true, workers, packet: 3, ..CctOptions::default() }).unwrap();
        assert_eq!(split.compact(|k| labeler.short(k)), format!("root{{[thread t0]:0{{{body}}},[thread t1]:0{{{body}}}}}"));
        let merged = build_cct(&store, &graph, &CctOptions { workers, packet: 3, ..CctOptions::default() }).unwrap();
        assert_eq!(merged.compact(|k| labeler.short(k)), "root{a:2{b:4,c:2{d:2{e:2,b:2}},d:2{e:2,b:2}}}");
    }
}
