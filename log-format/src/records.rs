//! The records of a store and their block encoding. `decode_block` is the one place where bytes
//! from disk become records; it is fuzzed (tests/fuzz_records.rs) and never panics.

use rkyv::rancor::Error as RkyvError;
use rkyv::util::AlignedVec;
use rkyv::{Archive, Deserialize, Serialize};

use lucce_encoder::{GraphEvent, MethodId, MethodMeta, SiteId, SiteKind, SiteMeta};

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MethodRecord {
    /// Binary class name with dots.
    pub class: String,
    pub name: String,
    pub descriptor: String,
    pub source_file: Option<String>,
    pub access_flags: u16,
}

/// `SiteRecord::kind` values.
pub mod site_kind {
    pub const CALL: u8 = 0;
    pub const ALLOC: u8 = 1;
    pub const EVENT: u8 = 2;
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteRecord {
    pub method: u32,
    pub kind: u8,
    pub bci: u32,
    pub line: i32,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphRecord {
    Edge { version: u64, site: u32, callee: u32 },
    Link { version: u64, site: u32, callee: u32, caller_v: u64 },
    NumCC { version: u64, method: u32, numcc: u64 },
    Anchor { version: u64, site: u32, callee: u32, caller_c: u64, caller_v: u64 },
}

impl GraphRecord {
    pub fn version(&self) -> u64 {
        GraphEvent::from(self).version()
    }
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// A mark recorded by the program (`Lucce.mark`).
    Mark,
    /// A sampled method entry.
    Sample,
    /// An allocation.
    Alloc,
}

impl EventKind {
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Mark => "mark",
            EventKind::Sample => "sample",
            EventKind::Alloc => "alloc",
        }
    }
}

/// A frame as `Throwable.getStackTrace()` shows it, kept with an event for verification.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct TruthFrame {
    pub class: String,
    pub method: String,
    pub file: Option<String>,
    pub line: i32,
}

impl TruthFrame {
    /// Marks the end of a runtime stack that the JVM cut (MaxJavaStackTraceDepth): the frames
    /// before it are the top of the stack, not all of it.
    pub fn capped() -> TruthFrame {
        TruthFrame { class: String::new(), method: "<more frames: the JVM cut this trace>".into(), file: None, line: -1 }
    }

    pub fn is_capped(&self) -> bool {
        self.class.is_empty() && *self == TruthFrame::capped()
    }
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub thread: u32,
    pub kind: EventKind,
    /// The site where the event happened; its method is the innermost frame.
    pub site: u32,
    /// The context ⟨c, v⟩ of the frame the event happened in.
    pub c: u64,
    pub v: u64,
    pub label: Option<String>,
    /// The stack as the runtime saw it (verify mode), innermost first.
    pub truth: Option<Vec<TruthFrame>>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ThreadRecord {
    pub name: String,
}

impl From<&MethodMeta> for MethodRecord {
    fn from(m: &MethodMeta) -> Self {
        MethodRecord {
            class: m.class.clone(),
            name: m.name.clone(),
            descriptor: m.descriptor.clone(),
            source_file: m.source_file.clone(),
            access_flags: m.access_flags,
        }
    }
}

/// Without copying the strings.
impl From<MethodMeta> for MethodRecord {
    fn from(m: MethodMeta) -> Self {
        MethodRecord { class: m.class, name: m.name, descriptor: m.descriptor, source_file: m.source_file, access_flags: m.access_flags }
    }
}

impl From<&SiteMeta> for SiteRecord {
    fn from(s: &SiteMeta) -> Self {
        let kind = match s.kind {
            SiteKind::Call => site_kind::CALL,
            SiteKind::Alloc => site_kind::ALLOC,
            SiteKind::Event => site_kind::EVENT,
        };
        SiteRecord { method: s.method.0, kind, bci: s.bci, line: s.line }
    }
}

impl From<&GraphEvent> for GraphRecord {
    fn from(e: &GraphEvent) -> Self {
        match *e {
            GraphEvent::Edge { version, site, callee } => GraphRecord::Edge { version, site: site.0, callee: callee.0 },
            GraphEvent::Link { version, site, callee, caller_v } => {
                GraphRecord::Link { version, site: site.0, callee: callee.0, caller_v }
            }
            GraphEvent::NumCC { version, method, numcc } => GraphRecord::NumCC { version, method: method.0, numcc },
            GraphEvent::Anchor { version, site, callee, caller_c, caller_v } => {
                GraphRecord::Anchor { version, site: site.0, callee: callee.0, caller_c, caller_v }
            }
        }
    }
}

impl From<&GraphRecord> for GraphEvent {
    fn from(r: &GraphRecord) -> Self {
        match *r {
            GraphRecord::Edge { version, site, callee } => GraphEvent::Edge { version, site: SiteId(site), callee: MethodId(callee) },
            GraphRecord::Link { version, site, callee, caller_v } => {
                GraphEvent::Link { version, site: SiteId(site), callee: MethodId(callee), caller_v }
            }
            GraphRecord::NumCC { version, method, numcc } => GraphEvent::NumCC { version, method: MethodId(method), numcc },
            GraphRecord::Anchor { version, site, callee, caller_c, caller_v } => GraphEvent::Anchor {
                version,
                site: SiteId(site),
                callee: MethodId(callee),
                caller_c,
                caller_v,
            },
        }
    }
}

/// Which stream a block belongs to (the first byte of every block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StreamTag {
    Methods = 1,
    Sites = 2,
    Graph = 3,
    Events = 4,
}

/// Bytes before the payload: tag, codec, 2 reserved, count (u32 LE), CRC-32 of the payload
/// (u32 LE).
pub const BLOCK_HEADER: usize = 12;

/// The header's second byte: how the payload holds the records' rkyv bytes. Format 4 wrote
/// every block plain (sled compressed its pages); format 5 compresses each block itself, which
/// costs less CPU time (see `FORMAT_VERSION`).
const CODEC_PLAIN: u8 = 0;
/// The payload is the rkyv bytes' length (u32 LE), then one zstd frame of them.
const CODEC_ZSTD: u8 = 1;
const ZSTD_LEVEL: i32 = 3;
/// The largest decompressed block a reader accepts. The writer's blocks are far smaller
/// (`WriterOptions::block_records` and `block_frames`); a damaged length must not become a huge
/// allocation.
const MAX_BLOCK_BYTES: usize = 1 << 30;

thread_local! {
    // A zstd context costs more to set up than compressing a small block: one per thread.
    static COMPRESSOR: std::cell::RefCell<zstd::block::Compressor> = std::cell::RefCell::new(zstd::block::Compressor::new());
    static DECOMPRESSOR: std::cell::RefCell<zstd::block::Decompressor> = std::cell::RefCell::new(zstd::block::Decompressor::new());
}

/// A record type that is stored in blocks.
pub trait BlockRecord: Sized + Archive {
    const TAG: StreamTag;
    #[allow(clippy::ptr_arg)] // rkyv serializes a Vec, not a slice
    fn encode(records: &Vec<Self>) -> Result<AlignedVec, RkyvError>;
    fn decode(payload: &AlignedVec) -> Result<Vec<Self>, RkyvError>;
}

macro_rules! block_record {
    ($t:ty, $tag:expr) => {
        impl BlockRecord for $t {
            const TAG: StreamTag = $tag;
            fn encode(records: &Vec<Self>) -> Result<AlignedVec, RkyvError> {
                rkyv::to_bytes::<RkyvError>(records)
            }
            fn decode(payload: &AlignedVec) -> Result<Vec<Self>, RkyvError> {
                rkyv::from_bytes::<Vec<Self>, RkyvError>(payload)
            }
        }
    };
}
block_record!(MethodRecord, StreamTag::Methods);
block_record!(SiteRecord, StreamTag::Sites);
block_record!(GraphRecord, StreamTag::Graph);
block_record!(EventRecord, StreamTag::Events);

/// Encodes records as one block value, compressed.
#[allow(clippy::ptr_arg)]
pub fn encode_block<T: BlockRecord>(records: &Vec<T>) -> Vec<u8> {
    let raw = T::encode(records).expect("serializing plain records into memory cannot fail");
    let mut out = vec![0u8; BLOCK_HEADER + 4 + zstd::zstd_safe::compress_bound(raw.len())];
    let compressed = COMPRESSOR.with(|c| c.borrow_mut().compress_to_buffer(&raw, &mut out[BLOCK_HEADER + 4..], ZSTD_LEVEL));
    let codec = match (compressed, u32::try_from(raw.len())) {
        (Ok(n), Ok(len)) => {
            out.truncate(BLOCK_HEADER + 4 + n);
            out[BLOCK_HEADER..BLOCK_HEADER + 4].copy_from_slice(&len.to_le_bytes());
            CODEC_ZSTD
        }
        // Cannot happen with a buffer of the bound's size; a plain block is still a good block.
        _ => {
            out.truncate(BLOCK_HEADER);
            out.extend_from_slice(&raw);
            CODEC_PLAIN
        }
    };
    let crc = crc32fast::hash(&out[BLOCK_HEADER..]);
    out[0] = T::TAG as u8;
    out[1] = codec;
    out[4..8].copy_from_slice(&(records.len() as u32).to_le_bytes());
    out[8..12].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes one block value; any damage is an error naming what is wrong.
pub fn decode_block<T: BlockRecord>(bytes: &[u8]) -> Result<Vec<T>, String> {
    let mut scratch = AlignedVec::<16>::new();
    let count = checked_payload::<T>(bytes, &mut scratch)?;
    let records = T::decode(&scratch).map_err(|_| undecodable("block"))?;
    if records.len() != count {
        return Err(format!("block says {count} records but holds {}", records.len()));
    }
    Ok(records)
}

/// The fields of an event that aggregation needs (everything but the label and the verification
/// stack), read straight out of a block's archived records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventCore {
    pub thread: u32,
    pub kind: EventKind,
    pub site: u32,
    pub c: u64,
    pub v: u64,
}

impl From<&EventRecord> for EventCore {
    fn from(e: &EventRecord) -> Self {
        EventCore { thread: e.thread, kind: e.kind, site: e.site, c: e.c, v: e.v }
    }
}

/// Checks the header of a block value and puts the records' rkyv bytes into `scratch` (aligned
/// for rkyv), decompressed; returns the record count the header states.
fn checked_payload<T: BlockRecord>(bytes: &[u8], scratch: &mut AlignedVec<16>) -> Result<usize, String> {
    if bytes.len() < BLOCK_HEADER {
        return Err(format!("block of {} bytes is shorter than its header", bytes.len()));
    }
    if bytes[0] != T::TAG as u8 {
        return Err(format!("block tag {} where {:?} was expected", bytes[0], T::TAG));
    }
    let count = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    let crc = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    let payload = &bytes[BLOCK_HEADER..];
    if crc32fast::hash(payload) != crc {
        return Err("block checksum mismatch".into());
    }
    scratch.clear();
    match bytes[1] {
        CODEC_PLAIN => scratch.extend_from_slice(payload),
        CODEC_ZSTD => {
            let (len, frame) = payload.split_first_chunk::<4>().ok_or("compressed block without its length")?;
            let len = u32::from_le_bytes(*len) as usize;
            if len > MAX_BLOCK_BYTES {
                return Err(format!("block says it holds {len} bytes, more than a block can"));
            }
            scratch.resize(len, 0);
            let n = DECOMPRESSOR
                .with(|d| d.borrow_mut().decompress_to_buffer(frame, &mut scratch[..]))
                .map_err(|e| format!("block does not decompress: {e}"))?;
            if n != len {
                return Err(format!("block decompresses to {n} bytes, not the {len} it says"));
            }
        }
        other => return Err(format!("block codec {other} is unknown")),
    }
    Ok(count)
}

/// Decodes an event block without building [`EventRecord`]s: the same checks as
/// [`decode_block`] (header, CRC-32, full rkyv validation, record count), then the core fields
/// of each record are appended to `out`. `scratch` is reused across calls so a steady stream
/// of blocks allocates nothing.
pub fn decode_event_cores(bytes: &[u8], scratch: &mut AlignedVec<16>, out: &mut Vec<EventCore>) -> Result<usize, String> {
    let count = checked_payload::<EventRecord>(bytes, scratch)?;
    let records = rkyv::access::<rkyv::vec::ArchivedVec<ArchivedEventRecord>, RkyvError>(scratch)
        .map_err(|_| undecodable("block"))?;
    if records.len() != count {
        return Err(format!("block says {count} records but holds {}", records.len()));
    }
    out.reserve(count);
    out.extend(records.iter().map(|r| EventCore {
        thread: r.thread.to_native(),
        kind: match r.kind {
            ArchivedEventKind::Mark => EventKind::Mark,
            ArchivedEventKind::Sample => EventKind::Sample,
            ArchivedEventKind::Alloc => EventKind::Alloc,
        },
        site: r.site.to_native(),
        c: r.c.to_native(),
        v: r.v.to_native(),
    }));
    Ok(count)
}

/// Thread records are stored one per key, as bare rkyv bytes.
pub fn encode_thread(t: &ThreadRecord) -> Vec<u8> {
    rkyv::to_bytes::<RkyvError>(t).expect("serializing into memory cannot fail").to_vec()
}

/// The error for bytes rkyv refuses. Its own error says nothing in a release build (rancor keeps
/// the details only with debug assertions), only how to get them: not for a user.
fn undecodable(what: &str) -> String {
    format!("{what} does not decode (its bytes are damaged)")
}

pub fn decode_thread(bytes: &[u8]) -> Result<ThreadRecord, String> {
    let mut aligned = AlignedVec::<16>::with_capacity(bytes.len());
    aligned.extend_from_slice(bytes);
    rkyv::from_bytes::<ThreadRecord, RkyvError>(&aligned).map_err(|_| undecodable("thread record"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_damage_is_detected() {
        let recs = vec![SiteRecord { method: 3, kind: site_kind::CALL, bci: 7, line: 42 }; 5];
        let mut b = encode_block(&recs);
        assert_eq!(decode_block::<SiteRecord>(&b).unwrap(), recs);
        assert!(decode_block::<MethodRecord>(&b).unwrap_err().contains("tag"));
        let last = b.len() - 1;
        b[last] ^= 0x40;
        assert!(decode_block::<SiteRecord>(&b).unwrap_err().contains("checksum"));
        assert!(decode_block::<SiteRecord>(&b[..5]).is_err());
    }

    /// Rewrites the block's CRC after `damage`, so that only the codec's own checks are left.
    fn damaged_under_a_good_checksum(block: &[u8], damage: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut b = block.to_vec();
        damage(&mut b);
        let crc = crc32fast::hash(&b[BLOCK_HEADER..]);
        b[8..12].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn blocks_are_compressed_and_a_damaged_frame_is_an_error() {
        let recs: Vec<GraphRecord> = (1..=4096u64).map(|v| GraphRecord::Anchor { version: v, site: 7, callee: 3, caller_c: v * 3, caller_v: v - 1 }).collect();
        let b = encode_block(&recs);
        assert_eq!(b[1], CODEC_ZSTD);
        let raw = GraphRecord::encode(&recs).unwrap().len();
        assert!(b.len() * 4 < raw, "{} bytes for {raw} bytes of records", b.len());
        assert_eq!(decode_block::<GraphRecord>(&b).unwrap(), recs);

        let len_at = BLOCK_HEADER;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("more than a block can", damaged_under_a_good_checksum(&b, |b| b[len_at + 3] = 0xFF)),
            ("not the", damaged_under_a_good_checksum(&b, |b| b[len_at] ^= 1)),
            ("decompress", damaged_under_a_good_checksum(&b, |b| b[len_at + 4..len_at + 8].fill(0))),
            ("decompress", damaged_under_a_good_checksum(&b, |b| b.truncate(b.len() - 3))),
            ("without its length", damaged_under_a_good_checksum(&b, |b| b.truncate(BLOCK_HEADER + 2))),
            ("codec 9", damaged_under_a_good_checksum(&b, |b| b[1] = 9)),
            // The compressed bytes read as plain rkyv bytes.
            ("does not decode", damaged_under_a_good_checksum(&b, |b| b[1] = CODEC_PLAIN)),
        ];
        for (why, bad) in cases {
            let err = decode_block::<GraphRecord>(&bad).unwrap_err();
            assert!(err.contains(why), "expected {why:?}: {err}");
        }
    }

    #[test]
    fn event_cores_match_full_decoding_and_damage_is_detected() {
        let recs: Vec<EventRecord> = (0..300u64)
            .map(|i| EventRecord {
                thread: (i % 3) as u32,
                kind: [EventKind::Mark, EventKind::Sample, EventKind::Alloc][(i % 3) as usize],
                site: i as u32 * 7,
                c: i * i,
                v: u64::MAX - i,
                label: (i % 5 == 0).then(|| format!("l{i}")),
                truth: (i % 7 == 0).then(|| vec![TruthFrame { class: "C".into(), method: "m".into(), file: None, line: 3 }]),
            })
            .collect();
        let b = encode_block(&recs);
        let (mut scratch, mut out) = (AlignedVec::new(), vec![EventCore { thread: 9, kind: EventKind::Mark, site: 9, c: 9, v: 9 }]);
        assert_eq!(decode_event_cores(&b, &mut scratch, &mut out).unwrap(), 300);
        assert_eq!(out[0].site, 9, "appends");
        assert_eq!(out[1..], recs.iter().map(EventCore::from).collect::<Vec<_>>()[..]);
        assert!(decode_event_cores(&encode_block(&vec![SiteRecord { method: 1, kind: 0, bci: 0, line: 0 }]), &mut scratch, &mut out).unwrap_err().contains("tag"));
        let mut d = b.clone();
        let last = d.len() - 1;
        d[last] ^= 0x40;
        assert!(decode_event_cores(&d, &mut scratch, &mut out).unwrap_err().contains("checksum"));
        let mut d = b.clone();
        d[4] ^= 1; // count, not covered by the CRC
        assert!(decode_event_cores(&d, &mut scratch, &mut out).unwrap_err().contains("records"));
        assert!(decode_event_cores(&b[..5], &mut scratch, &mut out).is_err());
    }
}
