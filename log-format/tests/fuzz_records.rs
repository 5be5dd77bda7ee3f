//! The block reader over arbitrary and mutated bytes: an error or the right records, never a
//! panic. (The same entry point is the cargo-fuzz target in `fuzz/`.)

use lucce_log_format::records::{decode_block, encode_block};
use lucce_log_format::{EventKind, EventRecord, GraphRecord, MethodRecord, SiteRecord, TruthFrame};
use proptest::prelude::*;

fn sample_events() -> Vec<EventRecord> {
    (0..5)
        .map(|i| EventRecord {
            thread: i,
            kind: EventKind::Mark,
            site: 7 * i,
            c: 1 << i,
            v: 99,
            label: Some(format!("e{i}")),
            truth: Some(vec![TruthFrame { class: "a.B".into(), method: "m".into(), file: None, line: i as i32 }]),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_block::<EventRecord>(&bytes);
        let _ = decode_block::<GraphRecord>(&bytes);
        let _ = decode_block::<MethodRecord>(&bytes);
        let _ = decode_block::<SiteRecord>(&bytes);
    }

    #[test]
    fn mutated_blocks_are_rejected_or_exact(pos in any::<prop::sample::Index>(), xor in 1u8..=255, cut in any::<prop::sample::Index>()) {
        let recs = sample_events();
        let mut b = encode_block(&recs);
        let i = pos.index(b.len());
        b[i] ^= xor;
        // A flipped byte anywhere must be caught (header fields or the CRC over the payload).
        prop_assert!(decode_block::<EventRecord>(&b).is_err() || (2..4).contains(&i), "flip at {} accepted (only the reserved bytes may change)", i);
        let good = encode_block(&recs);
        let n = cut.index(good.len());
        prop_assert!(decode_block::<EventRecord>(&good[..n]).is_err(), "truncated block at {} accepted", n);
    }
}
