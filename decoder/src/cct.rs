//! The calling context tree (CCT) builder: aggregates a store's events into a tree of contexts
//! with additive metrics per node, in parallel, in the spirit of ParCCT
//! (`../shared/papers/parcct-parallel-cct-construction.txt`).
//!
//! ParCCT's packets carry a copy of the shadow stack as a header so that each packet can be
//! turned into a partial CCT on its own. lucce needs no header: every event already names its
//! full context as ⟨site, callId, version⟩, so a packet is just a range of event sequence numbers.
//! Workers read their packets' event blocks and count events by ⟨site, callId, version⟩; each
//! distinct key is then decoded once, by one worker, into that worker's partial tree; partial
//! trees are merged at the end. Metrics are sums (and the ordering hint a minimum), so the merged
//! tree does not depend on packet size, packet order or worker count; [`Cct`] is then put in a
//! canonical form so that equal profiles are equal values and print byte-identically.
//!
//! - [`tree`]: the node arena, merging, canonical form, derived trees (reverse, filter) and the
//!   compact `root{a:1{b:2}}` notation.
//! - [`build`]: packets, the two phases (counting, decoding) and the per-worker decoding cache.
//! - `tally`: the counting phase's table of events by key.

mod build;
mod tally;
mod tree;

pub use build::{build_cct, CctOptions, KindSet, PacketOrder};
pub use tree::{Cct, CctBuilder, Key, KeyKind, Metrics, Node, NO_SITE};

use lucce_log_format::StoreError;

use crate::DecodeError;

/// Why a CCT could not be built. Each message is one line a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum CctError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("event #{seq} does not decode: {source}")]
    Decode {
        seq: u64,
        #[source]
        source: DecodeError,
    },
    #[error("{what} id {id} is too large for a CCT key (at most {max})")]
    IdTooLarge { what: &'static str, id: u32, max: u32 },
    #[error("the CCT has more than 2^32 - 1 nodes")]
    TooManyNodes,
    #[error("a CCT worker panicked: {0}")]
    WorkerPanicked(String),
}
