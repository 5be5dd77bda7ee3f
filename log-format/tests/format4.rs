//! A format-4 store (plain blocks, sled compressing its pages) still reads, record for record
//! as the format-5 store it is converted from.

use lucce_encoder::{GraphEvent, GraphSink, MethodId, MethodMeta, SiteId, SiteKind, SiteMeta};
use lucce_log_format::records::BLOCK_HEADER;
use lucce_log_format::{wait_until_released, EventKind, EventRecord, StoreReader, StoreWriter, TruthFrame, WriterOptions};
use std::path::Path;

fn write_store(path: &Path) {
    // Small blocks, so that every stream has several.
    let writer = StoreWriter::create(path, WriterOptions { block_records: 3, ..WriterOptions::default() }).unwrap();
    let h = writer.handle();
    for m in 0..7u32 {
        let meta = MethodMeta { class: format!("p.C{m}"), name: "run".into(), descriptor: "()V".into(), source_file: Some(format!("C{m}.java")), access_flags: 1 };
        h.method(MethodId(m), &meta);
        h.site(SiteId(m), &SiteMeta { method: MethodId(m), kind: SiteKind::Call, bci: 3 * m, line: 10 + m as i32 });
    }
    for v in 1..=9u64 {
        h.graph(&GraphEvent::Edge { version: v, site: SiteId(v as u32 % 7), callee: MethodId((v as u32 + 1) % 7) });
    }
    let thread = h.thread("main");
    for i in 0..10u64 {
        let truth = (i % 3 == 0).then(|| vec![TruthFrame { class: "p.C1".into(), method: "run".into(), file: Some("C1.java".into()), line: 11 }]);
        h.event(EventRecord { thread, kind: EventKind::Mark, site: (i % 7) as u32, c: i, v: 9, label: Some(format!("m{i}")), truth });
    }
    h.token(1, 2, 3, 4);
    writer.close().unwrap();
}

/// The block as format 4 stored it: the same header and records, the payload not compressed.
fn plain(block: &[u8]) -> Vec<u8> {
    assert_eq!(block[1], 1, "format 5 writes zstd blocks");
    let payload = &block[BLOCK_HEADER..];
    let len = u32::from_le_bytes(payload[..4].try_into().unwrap()) as usize;
    let raw = zstd::block::decompress(&payload[4..], len).unwrap();
    let mut out = block[..BLOCK_HEADER].to_vec();
    out[1] = 0;
    out[8..12].copy_from_slice(&crc32fast::hash(&raw).to_le_bytes());
    out.extend_from_slice(&raw);
    out
}

fn convert_to_format4(from: &Path, to: &Path) {
    let src = sled::Config::new().path(from).open().unwrap();
    let dst = sled::Config::new().path(to).use_compression(true).open().unwrap();
    for name in ["header", "methods", "sites", "graph", "events", "threads", "tokens"] {
        let (s, d) = (src.open_tree(name).unwrap(), dst.open_tree(name).unwrap());
        for kv in s.iter() {
            let (k, v) = kv.unwrap();
            let v = match name {
                "methods" | "sites" | "graph" | "events" => plain(&v),
                "header" if &*k == b"format" => 4u32.to_be_bytes().to_vec(),
                _ => v.to_vec(),
            };
            d.insert(k, v).unwrap();
        }
    }
    dst.flush().unwrap();
    drop((src, dst));
    wait_until_released(from);
    wait_until_released(to);
}

#[test]
fn a_format4_store_reads_as_its_format5_original() {
    let dir = tempfile::tempdir().unwrap();
    let (new, old) = (dir.path().join("v5"), dir.path().join("v4"));
    write_store(&new);
    convert_to_format4(&new, &old);
    let (a, b) = (StoreReader::open(&new).unwrap(), StoreReader::open(&old).unwrap());
    assert_eq!(a.commit(), b.commit());
    assert_eq!(a.methods().unwrap(), b.methods().unwrap());
    assert_eq!(a.sites().unwrap(), b.sites().unwrap());
    let graph = |r: &StoreReader| r.graph().collect::<Result<Vec<_>, _>>().unwrap();
    assert_eq!(graph(&a).len(), 9);
    assert_eq!(graph(&a), graph(&b));
    let events = |r: &StoreReader| r.events().map(|e| e.unwrap()).collect::<Vec<_>>();
    assert_eq!(events(&a).len(), 10);
    assert_eq!(events(&a), events(&b));
    assert_eq!(a.threads().unwrap(), b.threads().unwrap());
    assert_eq!(a.token(1).unwrap(), Some((2, 3, 4)));
    assert_eq!(b.token(1).unwrap(), Some((2, 3, 4)));
}
