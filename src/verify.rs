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

/// Whether a decoded stack (`truncated`: its bottom predates the agent) agrees with the one the
/// runtime saw. A truncated stack must be exactly the top of the runtime's, any other all of it;
/// a runtime stack the JVM cut (MaxJavaStackTraceDepth) must be the top of the decoded one, or,
/// when both are cut, the longer of the two must start with the shorter.
fn agrees(decoded: &[TruthFrame], truncated: bool, expected: &[TruthFrame]) -> bool {
    match expected.split_last() {
        Some((last, top)) if last.is_capped() => decoded.starts_with(top) || (truncated && top.starts_with(decoded)),
        _ if truncated => decoded.len() < expected.len() && expected.starts_with(decoded),
        _ => decoded == expected,
    }
}

/// Decodes every event; compares those that carry a true stack. `progress` is told each event.
pub fn verify_store(store: &StoreReader, graph: &Graph, mut progress: impl FnMut(u64)) -> Result<VerifyReport, DecodeError> {
    let mut dec = ContextDecoder::new(graph);
    let mut report = VerifyReport::default();
    for item in store.events() {
        let (seq, ev) = item?;
        report.events += 1;
        progress(seq);
        // Frames are rendered only for an event that has a runtime stack to compare with; of
        // the others (most), only that they decode.
        match (ev.truth, dec.decode(ev.site, ev.c, ev.v)) {
            (Some(expected), decoded) => {
                report.checked += 1;
                let decoded = decoded.map(|ctx| (crate::render::truth_frames(&dec, ctx), dec.bottom(ctx) == Bottom::Truncated));
                let ok = matches!(&decoded, Ok((frames, truncated)) if agrees(frames, *truncated, &expected));
                report.truncated += matches!(decoded, Ok((_, true))) as u64;
                if !ok {
                    let decoded = decoded.map(|(f, _)| f).map_err(|e| e.to_string());
                    report.mismatches.push(Mismatch { seq, expected: Some(expected), decoded });
                }
            }
            (None, Err(e)) => report.mismatches.push(Mismatch { seq, expected: None, decoded: Err(e.to_string()) }),
            (None, Ok(_)) => {}
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(lines: &[i32]) -> Vec<TruthFrame> {
        lines.iter().map(|&line| TruthFrame { class: "C".into(), method: "m".into(), file: Some("C.java".into()), line }).collect()
    }

    #[test]
    fn decoded_and_runtime_stacks_agree_by_the_rules() {
        let (full, capped) = (frames(&[1, 2, 3, 4]), [frames(&[1, 2, 3]), vec![TruthFrame::capped()]].concat());
        assert!(agrees(&full, false, &full));
        assert!(!agrees(&frames(&[1, 2, 3]), false, &full), "a complete stack is all of it");
        assert!(agrees(&frames(&[1, 2]), true, &full), "a truncated one its top");
        assert!(!agrees(&full, true, &full) && !agrees(&frames(&[1, 9]), true, &full));
        // The JVM cut its stack after three frames.
        assert!(agrees(&full, false, &capped) && agrees(&frames(&[1, 2, 3]), false, &capped));
        assert!(!agrees(&frames(&[1, 2]), false, &capped), "a complete stack is not shorter than a cut one");
        assert!(agrees(&frames(&[1, 2]), true, &capped), "both cut: the shorter is the top of the longer");
        assert!(!agrees(&frames(&[1, 9]), true, &capped) && !agrees(&frames(&[1, 2, 9, 9]), false, &capped));
    }
}
