//! Collapsed stacks (`frame;frame;frame count`, root first), the input format of most flame
//! graph tools: one line per context with events of its own, in canonical tree order.

use std::io::{self, Write};

use lucce_decoder::Cct;

use super::Labeler;

/// Writes one line per context that has events of its own. `;` inside a label would split a
/// frame, so it is replaced by `:`.
pub fn write_collapsed(out: &mut dyn Write, cct: &Cct, labeler: &Labeler<'_>) -> io::Result<()> {
    // The current path as one line; `lens[k]` is where level k + 1's frame ends in it, so a
    // node at depth d (in pre-order) cuts the line back to the end of level d - 1.
    let mut line = String::new();
    let mut lens: Vec<usize> = Vec::new();
    for id in 1..cct.len() as u32 {
        let depth = cct.depth(id) as usize;
        lens.truncate(depth - 1);
        line.truncate(lens.last().copied().unwrap_or(0));
        if depth > 1 {
            line.push(';');
        }
        line.push_str(&labeler.label(cct.node(id).key).replace(';', ":"));
        lens.push(line.len());
        let events = cct.node(id).metrics.events;
        if events > 0 {
            writeln!(out, "{line} {events}")?;
        }
    }
    Ok(())
}
