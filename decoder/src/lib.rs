//! Decoding: replays a store's graph log into a structure that answers "the graph as of
//! version v", and turns any recorded ⟨site, callId, version⟩ back into the exact frames.
//!
//! [`Graph`] is immutable once built and shared by every worker; a [`ContextDecoder`] holds one
//! worker's memo and its tree of decoded contexts, in which equal stacks get equal ids.

pub mod cct;
mod decode;
mod error;
mod graph;

pub use cct::{build_cct, Cct, CctBuilder, CctError, CctOptions, KindSet, PacketOrder};
pub use decode::{Bottom, ContextDecoder, CtxId, Frame};
pub use error::DecodeError;
pub use graph::{FrameInfo, Graph, GraphStats};
