//! The key-value layer under the store, kept small so another embedded store could replace sled.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use crate::StoreError;

/// The trees of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    Header,
    Methods,
    Sites,
    Graph,
    Events,
    Threads,
    /// `Lucce.context()` tokens: key = token (big-endian u64), value = site u32 + c u64 + v u64.
    Tokens,
}

impl Tree {
    fn name(self) -> &'static str {
        match self {
            Tree::Header => "header",
            Tree::Methods => "methods",
            Tree::Sites => "sites",
            Tree::Graph => "graph",
            Tree::Events => "events",
            Tree::Threads => "threads",
            Tree::Tokens => "tokens",
        }
    }
}

pub type KeyValue = (Vec<u8>, Vec<u8>);

/// An ordered key-value store with named trees and an explicit durability point.
pub trait Backend: Send + Sync {
    fn get(&self, tree: Tree, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    fn put(&self, tree: Tree, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    /// Entries with key ≥ `from`, in key order.
    fn scan_from<'a>(&'a self, tree: Tree, from: &[u8]) -> Box<dyn Iterator<Item = Result<KeyValue, StoreError>> + 'a>;
    /// The entry with the greatest key ≤ `key`.
    fn floor(&self, tree: Tree, key: &[u8]) -> Result<Option<KeyValue>, StoreError>;
    /// Makes everything written so far durable.
    fn flush(&self) -> Result<(), StoreError>;
}

/// sled 0.34. Its own crash recovery gives back a prefix of what was written; sled panics on
/// some kinds of damaged files, which this wrapper turns into errors.
pub struct SledBackend {
    db: sled::Db,
    trees: Vec<sled::Tree>,
    dir: std::path::PathBuf,
}

const ALL_TREES: [Tree; 7] = [Tree::Header, Tree::Methods, Tree::Sites, Tree::Graph, Tree::Events, Tree::Threads, Tree::Tokens];

fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, sled::Error>) -> Result<T, StoreError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(sled::Error::Corruption { .. })) => Err(StoreError::Corrupt(format!("{what}: sled reports corruption"))),
        Ok(Err(e)) => Err(StoreError::Backend(format!("{what}: {e}"))),
        Err(_) => Err(StoreError::Corrupt(format!("{what}: the database files are damaged"))),
    }
}

impl SledBackend {
    /// Opens (or creates) the database in `dir` with a cache of `cache_bytes`. Stores of
    /// format 2 and later compress their pages (zstd); format 1 did not, and sled will not open
    /// a database with the other setting.
    pub fn open(dir: &Path, cache_bytes: u64, compressed: bool) -> Result<SledBackend, StoreError> {
        let config = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .mode(sled::Mode::HighThroughput)
            .use_compression(compressed)
            .compression_factor(3)
            // The writer decides when data is durable (its commit mark); sled's own background
            // flusher would only add I/O.
            .flush_every_ms(None);
        let db = guarded("opening the database", || config.open())?;
        let trees = ALL_TREES
            .iter()
            .map(|t| guarded("opening a tree", || db.open_tree(t.name())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SledBackend { db, trees, dir: dir.to_path_buf() })
    }

    fn tree(&self, t: Tree) -> &sled::Tree {
        &self.trees[ALL_TREES.iter().position(|x| *x == t).unwrap_or(0)]
    }

    /// Closes the database and returns once sled has released its lock on the files, so that
    /// the store can be opened again at once (sled's I/O threads let go of it a moment after
    /// the last handle is dropped).
    pub fn close(self) {
        let lock_file = self.dir.join("db");
        drop(self.trees);
        drop(self.db);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            match std::fs::File::open(&lock_file).map(|f| f.try_lock()) {
                Ok(Err(std::fs::TryLockError::WouldBlock)) => std::thread::yield_now(),
                _ => return, // released (or gone): nothing holds it any more
            }
        }
    }

    /// Like [`Backend::scan_from`], but the values are sled's own buffers (reference-counted
    /// views of its cached pages), not copies: for readers that only look at each value once.
    pub(crate) fn scan_shared_from(&self, tree: Tree, from: &[u8]) -> SharedScan {
        SharedScan(guarded("scanning", || Ok(self.tree(tree).range(from.to_vec()..))).map_err(Some))
    }

    /// Bytes the database occupies on disk.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        guarded("measuring the database", || self.db.size_on_disk())
    }
}

/// Entries in key order from [`SledBackend::scan_shared_from`]; after an error, none.
pub(crate) struct SharedScan(Result<sled::Iter, Option<StoreError>>);

impl Iterator for SharedScan {
    type Item = Result<(sled::IVec, sled::IVec), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        let inner = match &mut self.0 {
            Ok(it) => it,
            Err(e) => return e.take().map(Err),
        };
        let item = match catch_unwind(AssertUnwindSafe(|| inner.next())) {
            Ok(None) => return None,
            Ok(Some(Ok(kv))) => return Some(Ok(kv)),
            Ok(Some(Err(e))) => StoreError::Corrupt(format!("scanning: {e}")),
            Err(_) => StoreError::Corrupt("scanning: the database files are damaged".into()),
        };
        self.0 = Err(None);
        Some(Err(item))
    }
}

impl Backend for SledBackend {
    fn get(&self, tree: Tree, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        guarded("reading", || self.tree(tree).get(key)).map(|v| v.map(|v| v.to_vec()))
    }

    fn put(&self, tree: Tree, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        guarded("writing", || self.tree(tree).insert(key, value)).map(|_| ())
    }

    fn scan_from<'a>(&'a self, tree: Tree, from: &[u8]) -> Box<dyn Iterator<Item = Result<KeyValue, StoreError>> + 'a> {
        let mut inner = match guarded("scanning", || Ok(self.tree(tree).range(from.to_vec()..))) {
            Ok(it) => it,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        Box::new(std::iter::from_fn(move || {
            match catch_unwind(AssertUnwindSafe(|| inner.next())) {
                Ok(None) => None,
                Ok(Some(Ok((k, v)))) => Some(Ok((k.to_vec(), v.to_vec()))),
                Ok(Some(Err(e))) => Some(Err(StoreError::Corrupt(format!("scanning: {e}")))),
                Err(_) => Some(Err(StoreError::Corrupt("scanning: the database files are damaged".into()))),
            }
        }))
    }

    fn floor(&self, tree: Tree, key: &[u8]) -> Result<Option<KeyValue>, StoreError> {
        guarded("reading", || self.tree(tree).range(..=key.to_vec()).next_back().transpose())
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
    }

    fn flush(&self) -> Result<(), StoreError> {
        guarded("flushing", || self.db.flush()).map(|_| ())
    }
}
