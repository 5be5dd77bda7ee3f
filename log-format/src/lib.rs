//! lucce's on-disk store: one directory, written once by one process, append-only.
//!
//! Layout: a sled database (behind the [`Backend`] trait) with one tree per stream. The header
//! tree holds the magic, the format version and the commit mark. Every other stream is a
//! sequence of dense records (methods, sites, graph events by version, events by sequence
//! number) stored in blocks: key = big-endian id of the block's first record, value = a small
//! header (stream tag, codec, record count, CRC-32 of the payload) and the rkyv-encoded records,
//! zstd-compressed.
//! Thread names are kept one per key.
//!
//! Crash rule: the writer makes blocks durable first and only then advances the commit mark
//! (how many records of each stream are complete). A reader trusts what the mark covers and
//! reports, without reading it, anything past it: a process killed mid-stream leaves a store
//! whose committed part decodes and whose torn tail is detected.

mod backend;
mod error;
mod reader;
pub mod records;
mod writer;

pub use backend::{wait_until_released, Backend, SledBackend, Tree};
pub use error::StoreError;
pub use reader::{stores_below, Commit, EventBlocks, EventBuf, EventIter, StoreReader, TailReport};
pub use records::{
    EventKind, EventRecord, GraphRecord, MethodRecord, SiteRecord, ThreadRecord, TruthFrame,
};
pub use writer::{StoreWriter, WriterHandle, WriterOptions, WriterReport};

/// First bytes of the header's `magic` key.
pub const MAGIC: &[u8] = b"lucce-store";
/// The store format this build writes.
/// 1: uncompressed sled pages; 2: zstd-compressed pages (same records); 3: graph records Edge
/// and Link instead of Update (a callee stays in its caller's version when it can); 4: the same
/// records, but a frame version that names an anchor also carries its graph version
/// (`lucce_encoder::ANCHOR_BIT`), so format-3 contexts would decode wrongly; 5: the same
/// records, each block compressed by lucce (zstd) and sled's pages not (javac's runs with the
/// agent take 8% less CPU time; the block size decides the store's, `WriterOptions::block_records`).
pub const FORMAT_VERSION: u32 = 5;
/// The oldest format this build reads: format 4's blocks are format 5's, stored plain.
pub const OLDEST_READABLE_FORMAT: u32 = 4;
