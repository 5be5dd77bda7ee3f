//! Shared by the integration tests: record a synthetic run into a real store, reopen, decode.

#![allow(dead_code)]

use std::path::Path;

use lucce::render::truth_frames;
use lucce::synth::Op;
use lucce_decoder::{ContextDecoder, Graph};
use lucce_log_format::{EventRecord, StoreReader};
use proptest::prelude::*;

/// Reopens the store at `dir` and returns, for every committed event, its true stack and what
/// it decodes to (or the decoding error).
pub fn decode_all(dir: &Path) -> Vec<(EventRecord, Result<Vec<lucce_log_format::TruthFrame>, String>)> {
    let store = StoreReader::open(dir).expect("store reopens");
    let graph = Graph::from_store(&store).expect("graph log replays");
    let mut dec = ContextDecoder::new(&graph);
    store
        .events()
        .map(|item| {
            let (_, ev) = item.expect("committed events read back");
            let got = dec.decode(ev.site, ev.c, ev.v).map(|ctx| truth_frames(&dec, ctx)).map_err(|e| e.to_string());
            (ev, got)
        })
        .collect()
}

/// Panics with a readable diff at the first event whose decoding is not its true stack.
pub fn assert_all_exact(dir: &Path, expected_events: usize) {
    let decoded = decode_all(dir);
    assert_eq!(decoded.len(), expected_events, "every recorded event must be in the store");
    for (i, (ev, got)) in decoded.iter().enumerate() {
        let truth = ev.truth.as_ref().expect("test events carry their true stack");
        match got {
            Ok(frames) if frames == truth => {}
            Ok(frames) => panic!(
                "event {i} decodes wrong\n  true:    {}\n  decoded: {}",
                show(truth),
                show(frames)
            ),
            Err(e) => panic!("event {i} does not decode: {e}\n  true: {}", show(truth)),
        }
    }
}

fn show(frames: &[lucce_log_format::TruthFrame]) -> String {
    frames.iter().map(|f| format!("{}:{}", f.method, f.line)).collect::<Vec<_>>().join(" < ")
}

/// One step of a random synthetic thread, for the property tests: mostly calls, some returns,
/// exceptions that unwind one to five frames, and marks.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (any::<u8>(), any::<u8>()).prop_map(|(site, target)| Op::Call { site, target }),
        2 => Just(Op::Return),
        1 => (1u8..6).prop_map(Op::Throw),
        3 => Just(Op::Mark),
    ]
}
