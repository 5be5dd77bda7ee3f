//! The indented text tree: one line per context with its share of all events, its total
//! (subtree) and own counts, hottest children first.

use std::io::{self, Write};

use lucce_decoder::Cct;

use super::{percent, Labeler};

#[derive(Debug, Clone, Copy)]
pub struct TextOptions {
    /// Hide contexts whose total is below this share of the root's.
    pub min_percent: f64,
    /// Print at most this many levels below the root.
    pub depth: Option<u32>,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions { min_percent: 0.0, depth: None }
    }
}

/// Writes the tree. Indentation is two spaces per level; siblings by descending total, ties in
/// canonical order, so the output is fully determined by the tree.
pub fn write_text(out: &mut dyn Write, cct: &Cct, labeler: &Labeler<'_>, opts: &TextOptions) -> io::Result<()> {
    let all = cct.total(0).events;
    writeln!(out, "{:>8} {:>12} {:>12}  context", "total%", "total", "self")?;
    // Iterative: stacks can be tens of thousands of frames deep.
    let mut stack: Vec<u32> = vec![0];
    let mut kids: Vec<u32> = Vec::new();
    while let Some(id) = stack.pop() {
        let total = cct.total(id).events;
        let depth = cct.depth(id);
        let indent = "  ".repeat(depth as usize);
        writeln!(
            out,
            "{:>7.2}% {:>12} {:>12}  {indent}{}",
            percent(total, all),
            total,
            cct.node(id).metrics.events,
            labeler.label(cct.node(id).key)
        )?;
        if opts.depth.is_some_and(|d| depth >= d) {
            continue;
        }
        kids.clear();
        kids.extend(cct.children(id).filter(|&c| percent(cct.total(c).events, all) >= opts.min_percent));
        kids.sort_by_key(|&c| (std::cmp::Reverse(cct.total(c).events), c));
        stack.extend(kids.iter().rev());
    }
    Ok(())
}
