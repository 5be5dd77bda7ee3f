//! speedscope JSON (<https://www.speedscope.app/file-format-schema.json>): shared frames and
//! "sampled" profiles whose samples are the contexts with events of their own (frame indices,
//! root first) weighted by their counts. With per-thread roots, one profile per thread.

use std::collections::HashMap;
use std::io::{self, Write};

use lucce_decoder::cct::KeyKind;
use lucce_decoder::Cct;
use serde_json::{json, Value};

use super::Labeler;

pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// Writes the speedscope document for `cct`, named `name`.
pub fn write_speedscope(out: &mut dyn Write, cct: &Cct, labeler: &Labeler<'_>, name: &str) -> io::Result<()> {
    // Frames in order of first appearance in the tree (deterministic).
    let mut frames: Vec<Value> = Vec::new();
    let mut frame_of: HashMap<String, usize> = HashMap::new();
    let mut index = vec![usize::MAX; cct.len()];
    let per_thread = cct.children(0).any(|c| matches!(cct.node(c).key.kind(), KeyKind::Thread(_)));
    for id in 1..cct.len() as u32 {
        let key = cct.node(id).key;
        if per_thread && matches!(key.kind(), KeyKind::Thread(_)) {
            continue; // the profile's name says the thread
        }
        let parts = labeler.parts(key);
        let label = labeler.label(key);
        index[id as usize] = *frame_of.entry(label).or_insert_with(|| {
            let mut f = json!({ "name": parts.name });
            if let Some(file) = parts.file {
                f["file"] = json!(file);
            }
            if let Some(line) = parts.line {
                f["line"] = json!(line);
            }
            frames.push(f);
            frames.len() - 1
        });
    }
    let profile = |pname: String, root: u32| {
        let (mut samples, mut weights, mut total) = (Vec::new(), Vec::new(), 0u64);
        let first = if root == 0 { 1 } else { root };
        for id in first..cct.end(root) {
            let events = cct.node(id).metrics.events;
            if events == 0 || index[id as usize] == usize::MAX {
                continue;
            }
            let mut stack: Vec<usize> = Vec::with_capacity(cct.depth(id) as usize);
            let mut n = id;
            while n != root && n != 0 {
                stack.push(index[n as usize]);
                n = cct.node(n).parent;
            }
            stack.reverse();
            samples.push(stack);
            weights.push(events);
            total += events;
        }
        json!({
            "type": "sampled",
            "name": pname,
            "unit": "none",
            "startValue": 0,
            "endValue": total,
            "samples": samples,
            "weights": weights,
        })
    };
    let profiles: Vec<Value> = if per_thread {
        cct.children(0).map(|t| profile(labeler.label(cct.node(t).key), t)).collect()
    } else {
        vec![profile(name.to_string(), 0)]
    };
    let doc = json!({
        "$schema": SCHEMA,
        "shared": { "frames": frames },
        "profiles": profiles,
        "name": name,
        "activeProfileIndex": 0,
        "exporter": concat!("lucce ", env!("CARGO_PKG_VERSION")),
    });
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)
}
