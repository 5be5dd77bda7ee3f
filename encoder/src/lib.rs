//! Lazy precise calling-context encoding over a call graph that grows while the program runs:
//! Lucce's Algorithm 1 (see `../shared/papers/lucce-lazy-unintrusive-calling-context-encoding.txt`).
//!
//! Every frame of the running program carries a [`Context`] ⟨callId, version⟩. Entering a callee
//! from a call site of a frame with ⟨c, v⟩ yields the callee's context through [`Encoder::enter`].
//! Every change to the graph (edge added, numCC changed, last version of a caller changed) gets a
//! new version and is handed, in version order, to a [`GraphSink`]; so is the metadata of every
//! method and site. With that log alone, any context the encoder returned can be decoded.
//!
//! This crate knows nothing of storage or of the JVM.

mod cache;
mod encoder;
mod ids;
mod memo;
mod meta;
mod sharded;

pub use cache::{bucket_index, SiteCache, HASH_MUL, SLOT_BYTES, WAYS};
pub use encoder::{EncodeError, Encoder, EncoderConfig, EncoderStats, Refused};
pub use ids::{anchor_of, anchored_version, key_version, Context, MethodId, SiteId, ANCHOR_BIT, ANCHOR_LIMIT};
pub use meta::{GraphEvent, GraphSink, MethodMeta, SiteKind, SiteMeta, ACC_HIDDEN_FRAME};

/// Method id of the virtual root under which every thread's first frame sits.
pub const THREAD_ROOT: MethodId = MethodId(0);
/// Method id of the virtual root used when the real bottom of the stack is unknown (a thread
/// that started before the agent, a frame entered before its class was rewritten).
pub const TRUNCATED_ROOT: MethodId = MethodId(1);
/// The call site through which a thread's first frame is entered.
pub const THREAD_ROOT_SITE: SiteId = SiteId(0);
/// The call site through which a frame with an unknown caller is entered.
pub const TRUNCATED_ROOT_SITE: SiteId = SiteId(1);

/// Whether `m` is one of the two virtual roots.
pub fn is_root(m: MethodId) -> bool {
    m == THREAD_ROOT || m == TRUNCATED_ROOT
}
