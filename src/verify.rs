//! Comparing the stacks a runtime saw (kept with verify-mode events) with decoded ones.

use lucce_decoder::{Bottom, ContextDecoder, DecodeError, Graph};
use lucce_log_format::{StoreReader, TruthFrame};

/// One event whose decoded trace differs from the one the runtime saw.
#[derive(Debug, Clone)]
pub struct Mismatch {
    pub seq: u64,
    /// The runtime's stack; None for an event without one that failed to decode.
    pub expected: Option<Vec<TruthFrame>>,
    /// The decoded frames, or why decoding failed.
    pub decoded: Result<Vec<TruthFrame>, String>,
}

#[derive(Debug, Default)]
pub struct VerifyReport {
    pub events: u64,
    pub checked: u64,
    /// Checked events whose decoded stack is truncated at the bottom (compared as a prefix).
    pub truncated: u64,
    pub mismatches: Vec<Mismatch>,
}

/// Decodes every event; compares those that carry a true stack. `progress` is told each event.
pub fn verify_store(store: &StoreReader, graph: &Graph, mut progress: impl FnMut(u64)) -> Result<VerifyReport, DecodeError> {
    let mut dec = ContextDecoder::new(graph);
    let mut report = VerifyReport::default();
    for item in store.events() {
        let (seq, ev) = item?;
        report.events += 1;
        progress(seq);
        let decoded = dec
            .decode(ev.site, ev.c, ev.v)
            .map(|ctx| (crate::render::truth_frames(&dec, ctx), dec.bottom(ctx) == Bottom::Truncated))
            .map_err(|e| e.to_string());
        match ev.truth {
            Some(expected) => {
                report.checked += 1;
                // A truncated stack (its bottom predates the agent) must be exactly the top of
                // the runtime's stack; any other stack must be all of it.
                // A runtime stack the JVM cut must be the top of the decoded one.
                let ok = match (&decoded, expected.split_last()) {
                    (Ok((frames, _)), Some((last, top))) if last.is_capped() => frames.starts_with(top),
                    (Ok((frames, true)), _) => frames.len() < expected.len() && expected.starts_with(frames),
                    (Ok((frames, false)), _) => *frames == expected,
                    (Err(_), _) => false,
                };
                report.truncated += matches!(decoded, Ok((_, true))) as u64;
                let decoded = decoded.map(|(f, _)| f);
                if !ok {
                    report.mismatches.push(Mismatch { seq, expected: Some(expected), decoded });
                }
            }
            None if decoded.is_err() => report.mismatches.push(Mismatch { seq, expected: None, decoded: decoded.map(|(f, _)| f) }),
            None => {}
        }
    }
    Ok(report)
}
