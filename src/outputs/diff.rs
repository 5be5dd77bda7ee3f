//! Comparing two profiles: degree of overlap and hot-edge coverage.
//!
//! Contexts of two stores are matched by their printed frames (ids differ between stores): a
//! context is the path of frame labels from the root.
//!
//! **Degree of overlap** (CCCP, `../shared/papers/cccp-complete-calling-context-profiling.txt`,
//! §6.1, after Arnold and Ryder): a CCT X is a set of contexts C, each with calls(C);
//! rc(C, X) = calls(C) / Σ_k calls(C_k) is its relative weight, and
//! overlap(A, B) = Σ over contexts with stack(C_A) = stack(C_B) of min(rc(C_A, A), rc(C_B, B)).
//! "Two identical CCTs have an overlap percentage of 100%." Here calls(C) is the context's own
//! count: its invocations in calls mode, its events otherwise.
//!
//! **Hot-edge coverage** (Zhuang et al., as used in the partial-safepoints paper,
//! `../shared/papers/partial-safepoints-incremental-stack-tracing.txt`, §7: "we consider an edge
//! to be hot if it is within a tenth of the hottest edge", T = 0.1): an edge of a CCT is the
//! edge into a context, weighted by that context's own count; hot(X) = the edges with weight
//! ≥ T · the hottest edge's weight (and > 0). The coverage of A's hot edges by B is
//! |hot(A) ∩ hot(B)| / |hot(A)|; both directions are reported, as the metric is not symmetric.

use std::collections::HashMap;

use lucce_decoder::cct::{Key, Metrics, NO_SITE};
use lucce_decoder::{Cct, CctBuilder, CctError};

use super::Labeler;

/// Two profiles' trees over one shared label space, so contexts can be matched.
pub struct LabelTrees {
    pub a: CctBuilder,
    pub b: CctBuilder,
}

/// Interns labels of both trees and rebuilds each keyed by label ids. Frames that print alike
/// (overloads merged per method, say) become one context, as they would for a reader.
pub fn label_trees(a: (&Cct, &Labeler<'_>), b: (&Cct, &Labeler<'_>)) -> Result<LabelTrees, CctError> {
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut relabel = |cct: &Cct, labeler: &Labeler<'_>| -> Result<CctBuilder, CctError> {
        let mut out = CctBuilder::new();
        let mut map = vec![0u32; cct.len()];
        for i in 1..cct.len() as u32 {
            let node = cct.node(i);
            let next = ids.len() as u32;
            let id = *ids.entry(labeler.label(node.key)).or_insert(next);
            let n = out.child(map[node.parent as usize], Key::frame(id)?, NO_SITE)?;
            out.add(n, node.metrics);
            map[i as usize] = n;
        }
        Ok(out)
    };
    Ok(LabelTrees { a: relabel(a.0, a.1)?, b: relabel(b.0, b.1)? })
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiffReport {
    /// Degree of overlap, 0..=1.
    pub overlap: f64,
    /// Share of A's hot edges that are hot in B, 0..=1 (1 when A has none).
    pub hot_a_in_b: f64,
    /// Share of B's hot edges that are hot in A.
    pub hot_b_in_a: f64,
    pub hot_a: usize,
    pub hot_b: usize,
    pub hot_both: usize,
    /// Contexts with events of their own in A, in B, and in both.
    pub contexts_a: usize,
    pub contexts_b: usize,
    pub contexts_both: usize,
}

/// Compares two trees built over one label space ([`label_trees`]).
pub fn compare(t: &LabelTrees, threshold: f64) -> DiffReport {
    let (a, b) = (&t.a, &t.b);
    let weight = |m: &Metrics| m.events;
    let total = |x: &CctBuilder| x.nodes().iter().map(|n| weight(&n.metrics)).sum::<u64>();
    let (wa, wb) = (total(a), total(b));
    let hottest = |x: &CctBuilder| x.nodes().iter().skip(1).map(|n| weight(&n.metrics)).max().unwrap_or(0);
    let (ha, hb) = (hottest(a), hottest(b));
    let hot = |w: u64, max: u64| w > 0 && w as f64 >= threshold * max as f64;

    // A's nodes in id order (parents first), each matched to B's node with the same path.
    let mut to_b: Vec<Option<u32>> = vec![None; a.len()];
    to_b[0] = Some(0);
    let mut r = DiffReport { overlap: 0.0, hot_a_in_b: 1.0, hot_b_in_a: 1.0, hot_a: 0, hot_b: 0, hot_both: 0, contexts_a: 0, contexts_b: 0, contexts_both: 0 };
    for (i, n) in a.nodes().iter().enumerate().skip(1) {
        let mb = to_b[n.parent as usize].and_then(|p| b.find(p, n.key));
        to_b[i] = mb;
        let x = weight(&n.metrics);
        let y = mb.map_or(0, |j| weight(&b.nodes()[j as usize].metrics));
        r.contexts_a += usize::from(x > 0);
        r.contexts_both += usize::from(x > 0 && y > 0);
        if wa > 0 && wb > 0 {
            r.overlap += (x as f64 / wa as f64).min(y as f64 / wb as f64);
        }
        r.hot_a += usize::from(hot(x, ha));
        r.hot_both += usize::from(hot(x, ha) && hot(y, hb));
    }
    for n in b.nodes().iter().skip(1) {
        let y = weight(&n.metrics);
        r.contexts_b += usize::from(y > 0);
        r.hot_b += usize::from(hot(y, hb));
    }
    if r.hot_a > 0 {
        r.hot_a_in_b = r.hot_both as f64 / r.hot_a as f64;
    }
    if r.hot_b > 0 {
        r.hot_b_in_a = r.hot_both as f64 / r.hot_b as f64;
    }
    // Summing many small shares can land a hair above 1 for identical trees.
    r.overlap = r.overlap.min(1.0);
    r
}
