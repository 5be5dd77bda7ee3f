//! Comparing the stacks a runtime saw (kept with verify-mode events) with decoded ones.

use lucce_decoder::{ContextDecoder, DecodeError, Graph};
use lucce_log_format::{StoreReader, TruthFrame};

/// One event whose decoded trace differs from the one the runtime saw.
#[derive(Debug, Clone)]
pub struct Mismatch {
    pub seq: u64,
    pub expected: Vec<TruthFrame>,
    /// The decoded frames, or why decoding failed.
    pub decoded: Result<Vec<TruthFrame>, String>,
}

#[derive(Debug, Default)]
pub struct VerifyReport {
    pub events: u64,
    pub checked: u64,
    pub mismatches: Vec<Mismatch>,
}

/// Decodes every event that carries a true stack and compares. `progress` is told each event.
pub fn verify_store(store: &StoreReader, graph: &Graph, mut progress: impl FnMut(u64)) -> Result<VerifyReport, DecodeError> {
    let mut dec = ContextDecoder::new(graph);
    let mut report = VerifyReport::default();
    for item in store.events() {
        let (seq, ev) = item?;
        report.events += 1;
        progress(seq);
        let Some(expected) = ev.truth else { continue };
        report.checked += 1;
        let decoded = dec.decode(ev.site, ev.c, ev.v).map(|ctx| crate::render::truth_frames(&dec, ctx)).map_err(|e| e.to_string());
        if decoded.as_ref() != Ok(&expected) {
            report.mismatches.push(Mismatch { seq, expected, decoded });
        }
    }
    Ok(report)
}
