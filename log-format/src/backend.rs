//! The key-value layer under the store, kept small so another embedded store could replace sled.

use std::io::ErrorKind;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

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
///
/// sled keeps every page a scan reads, and every value written, in memory for as long as the
/// database is open, whatever its cache capacity (it charges a page the compressed size it has
/// on disk, far below its size in memory). So once scans have read and writes have put
/// [`REOPEN_AFTER_BYTES`] (or what [`SledBackend::set_reopen_after`] says), the next scan to
/// start, or the writer's next [`SledBackend::release_memory`] after a commit, closes the
/// database and opens it again, which lets all of it go: `lucce cct` on the 500M events of a
/// Batik `sample=1` store peaks at 1.0 GB, not 18.6 GB, and an agent recording FOP with
/// `sample=10` at 0.9 GB, not 1.5 GB.
pub struct SledBackend {
    handle: Mutex<Result<Arc<Handle>, String>>,
    /// Signalled when a scan ends (its handle is released).
    released: Condvar,
    /// Bytes of values scans have read and puts have written since the database was last
    /// opened: what sled holds on to.
    held: AtomicU64,
    /// Reopen once `held` reaches this.
    reopen_after: AtomicU64,
    /// Times the database was reopened.
    reopens: AtomicU64,
    dir: PathBuf,
    cache_bytes: u64,
    compressed: bool,
}

/// One opening of the database.
struct Handle {
    db: sled::Db,
    trees: Vec<sled::Tree>,
}

impl Handle {
    fn tree(&self, t: Tree) -> &sled::Tree {
        &self.trees[ALL_TREES.iter().position(|x| *x == t).unwrap_or(0)]
    }
}

/// Values read by scans (and written) after which the database is reopened to free what sled
/// holds (the default of [`SledBackend::set_reopen_after`]).
pub const REOPEN_AFTER_BYTES: u64 = 512 << 20;

/// How long a scan that would reopen the database waits for the other scans to end; then it
/// goes on with the open database and the next scans try again.
const REOPEN_WAIT: Duration = Duration::from_millis(200);

const ALL_TREES: [Tree; 7] = [Tree::Header, Tree::Methods, Tree::Sites, Tree::Graph, Tree::Events, Tree::Threads, Tree::Tokens];

fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, sled::Error>) -> Result<T, StoreError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(sled::Error::Corruption { .. })) => Err(StoreError::Corrupt(format!("{what}: sled reports corruption"))),
        // Words of our own: sled passes on copies of I/O errors whose message is the Debug form.
        Ok(Err(sled::Error::Io(e))) => match disk_trouble(e.kind()) {
            Some(trouble) => Err(StoreError::Disk(format!("{what}: {trouble}"))),
            None => Err(StoreError::Backend(format!("{what}: {e}"))),
        },
        Ok(Err(e)) => Err(StoreError::Backend(format!("{what}: {e}"))),
        Err(_) => Err(StoreError::Corrupt(format!("{what}: the database files are damaged"))),
    }
}

/// What an I/O error says about the disk rather than the store, in words for the user (None for
/// the others: sled's lock on an open store among them, which readers look for).
fn disk_trouble(kind: ErrorKind) -> Option<&'static str> {
    Some(match kind {
        ErrorKind::StorageFull => "no space left on the device",
        ErrorKind::FileTooLarge => "a file reached the size limit (ulimit -f)",
        ErrorKind::QuotaExceeded => "disk quota exceeded",
        ErrorKind::ReadOnlyFilesystem => "read-only file system",
        ErrorKind::PermissionDenied => "permission denied",
        _ => return None,
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SledBackend {
    /// Opens (or creates) the database in `dir` with a cache of `cache_bytes`. Stores of
    /// formats 2 to 4 compress their pages (zstd); formats 1 and 5 do not, and sled will not
    /// open a database with the other setting.
    pub fn open(dir: &Path, cache_bytes: u64, compressed: bool) -> Result<SledBackend, StoreError> {
        let handle = Self::open_handle(dir, cache_bytes, compressed)?;
        Ok(SledBackend {
            handle: Mutex::new(Ok(Arc::new(handle))),
            released: Condvar::new(),
            held: AtomicU64::new(0),
            reopen_after: AtomicU64::new(REOPEN_AFTER_BYTES),
            reopens: AtomicU64::new(0),
            dir: dir.to_path_buf(),
            cache_bytes,
            compressed,
        })
    }

    fn open_handle(dir: &Path, cache_bytes: u64, compressed: bool) -> Result<Handle, StoreError> {
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
        Ok(Handle { db, trees })
    }

    /// The current opening of the database.
    fn handle(&self) -> Result<Arc<Handle>, StoreError> {
        lock(&self.handle).as_ref().map(Arc::clone).map_err(|e| StoreError::Backend(e.clone()))
    }

    /// Lets go of an opening taken with [`SledBackend::handle`] and wakes a scan waiting to
    /// reopen the database (under the lock, so that it cannot miss the signal).
    fn release(&self, handle: Arc<Handle>) {
        let _current = lock(&self.handle);
        drop(handle);
        self.released.notify_all();
    }

    /// Runs one sled operation on the current opening.
    fn with_handle<T>(&self, what: &str, f: impl FnOnce(&Handle) -> Result<T, sled::Error>) -> Result<T, StoreError> {
        let h = self.handle()?;
        let r = guarded(what, || f(&h));
        self.release(h);
        r
    }

    /// Bytes of values read and written before the database is reopened (a memory bound, see
    /// [`SledBackend`]).
    pub fn set_reopen_after(&self, bytes: u64) {
        self.reopen_after.store(bytes, Ordering::Relaxed);
    }

    /// Times the database was reopened since [`SledBackend::open`].
    pub fn reopens(&self) -> u64 {
        self.reopens.load(Ordering::Relaxed)
    }

    /// Reopens the database, which lets go of everything sled holds, if scans and puts have
    /// moved enough values since it was opened and no other scan is running (waiting a little
    /// for them to end). Every scan calls it first; a writer calls it right after a flush, so
    /// that a reopen that fails cannot lose what it wrote.
    pub fn release_memory(&self) {
        let limit = self.reopen_after.load(Ordering::Relaxed);
        if self.held.load(Ordering::Relaxed) < limit {
            return;
        }
        let mut current = lock(&self.handle);
        let deadline = Instant::now() + REOPEN_WAIT;
        loop {
            let shared = matches!(&*current, Ok(h) if Arc::strong_count(h) > 1);
            if !shared {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Another scan is still running (maybe this thread's own): try again later.
                self.held.store(0, Ordering::Relaxed);
                return;
            }
            current = self.released.wait_timeout(current, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        // A scan that waited with this one may have reopened it already.
        if self.held.swap(0, Ordering::Relaxed) < limit || current.is_err() {
            return;
        }
        self.reopens.fetch_add(1, Ordering::Relaxed);
        *current = Err("the database is being reopened".into());
        wait_until_released(&self.dir);
        *current = Self::open_handle(&self.dir, self.cache_bytes, self.compressed).map(Arc::new).map_err(|e| format!("reopening the database: {e}"));
    }

    /// Like [`Backend::scan_from`], but the values are sled's own buffers (reference-counted
    /// views of its cached pages), not copies: for readers that only look at each value once.
    pub(crate) fn scan_shared_from(&self, tree: Tree, from: &[u8]) -> SharedScan<'_> {
        self.release_memory();
        let scan = self.handle().and_then(|h| {
            let it = guarded("scanning", || Ok(h.tree(tree).range(from.to_vec()..)))?;
            Ok((it, h))
        });
        match scan {
            Ok((it, h)) => SharedScan { backend: self, state: Ok((it, Some(h))) },
            Err(e) => SharedScan { backend: self, state: Err(Some(e)) },
        }
    }

    /// Lets go of the database without flushing it or waiting for its lock, after a write
    /// failed: sled 0.34 may then wait forever for a log buffer that the failed write left
    /// unfinished (a value too big for its log whose blob file it could not write), and dropping
    /// the database flushes. So it is leaked: the files keep what the last flush made durable,
    /// and the lock goes with the process.
    pub fn abandon(self) {
        std::mem::forget(self);
    }

    /// Bytes the database occupies on disk.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.with_handle("measuring the database", |h| h.db.size_on_disk())
    }
}

/// Waits (up to 10 s) until sled has released its lock on the files of the store at `dir`, all
/// of whose handles this process dropped: its I/O threads let go of it a moment after the last
/// handle is dropped, and opening the store before then fails as "in use". For code that opens
/// a store with sled directly (tests); [`StoreWriter`](crate::StoreWriter) and
/// [`StoreReader`](crate::StoreReader) wait on their own.
pub fn wait_until_released(dir: &Path) {
    let lock_file = dir.join("db");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match std::fs::File::open(&lock_file).map(|f| f.try_lock()) {
            Ok(Err(std::fs::TryLockError::WouldBlock)) => std::thread::yield_now(),
            _ => return, // released (or gone): nothing holds it any more
        }
    }
}

impl Drop for SledBackend {
    /// Waits for sled to let go of the files: a store dropped by one part of a program and
    /// opened by the next would otherwise be refused as "in use" now and then.
    fn drop(&mut self) {
        *lock(&self.handle) = Err("the database is closed".into());
        wait_until_released(&self.dir);
    }
}

/// Entries in key order from [`SledBackend::scan_shared_from`]; after an error, none.
pub(crate) struct SharedScan<'a> {
    backend: &'a SledBackend,
    /// The iterator and the opening it reads (released on drop, so that the database can be
    /// reopened), or the error still to report.
    state: Result<(sled::Iter, Option<Arc<Handle>>), Option<StoreError>>,
}

impl Iterator for SharedScan<'_> {
    type Item = Result<(sled::IVec, sled::IVec), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        let inner = match &mut self.state {
            Ok((it, _)) => it,
            Err(e) => return e.take().map(Err),
        };
        let item = match catch_unwind(AssertUnwindSafe(|| inner.next())) {
            Ok(None) => return None,
            Ok(Some(Ok(kv))) => {
                self.backend.held.fetch_add(kv.1.len() as u64, Ordering::Relaxed);
                return Some(Ok(kv));
            }
            Ok(Some(Err(e))) => StoreError::Corrupt(format!("scanning: {e}")),
            Err(_) => StoreError::Corrupt("scanning: the database files are damaged".into()),
        };
        self.state = Err(None);
        Some(Err(item))
    }
}

impl Drop for SharedScan<'_> {
    fn drop(&mut self) {
        if let Ok((_, handle)) = &mut self.state {
            if let Some(h) = handle.take() {
                self.backend.release(h);
            }
        }
    }
}

impl Backend for SledBackend {
    fn get(&self, tree: Tree, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.with_handle("reading", |h| h.tree(tree).get(key)).map(|v| v.map(|v| v.to_vec()))
    }

    fn put(&self, tree: Tree, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.held.fetch_add(value.len() as u64, Ordering::Relaxed);
        self.with_handle("writing", |h| h.tree(tree).insert(key, value)).map(|_| ())
    }

    fn scan_from<'a>(&'a self, tree: Tree, from: &[u8]) -> Box<dyn Iterator<Item = Result<KeyValue, StoreError>> + 'a> {
        Box::new(self.scan_shared_from(tree, from).map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec()))))
    }

    fn floor(&self, tree: Tree, key: &[u8]) -> Result<Option<KeyValue>, StoreError> {
        self.with_handle("reading", |h| h.tree(tree).range(..=key.to_vec()).next_back().transpose())
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.with_handle("flushing", |h| h.db.flush()).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRIES: u64 = 300;

    fn value(i: u64) -> Vec<u8> {
        (0..1000).map(|j| (i * 7 + j) as u8).collect()
    }

    /// A database of ENTRIES values of 1000 bytes in the events tree, reopened every 10 kB read.
    fn filled(dir: &Path) -> SledBackend {
        let db = SledBackend::open(dir, 1 << 20, true).unwrap();
        for i in 0..ENTRIES {
            db.put(Tree::Events, &i.to_be_bytes(), &value(i)).unwrap();
        }
        db.flush().unwrap();
        drop(db);
        // Opened again, as a reader opens a store: what was written is not held.
        let db = SledBackend::open(dir, 1 << 20, true).unwrap();
        db.set_reopen_after(10_000);
        db
    }

    fn read_from(db: &SledBackend, from: u64) -> u64 {
        let mut next = from;
        for kv in db.scan_shared_from(Tree::Events, &from.to_be_bytes()) {
            let (k, v) = kv.unwrap();
            assert_eq!(k.as_ref(), next.to_be_bytes(), "key order");
            assert_eq!(v.as_ref(), value(next), "value of {next}");
            next += 1;
        }
        next - from
    }

    #[test]
    fn scans_reopen_the_database_and_still_read_everything() {
        let dir = tempfile::tempdir().unwrap();
        let db = filled(dir.path());
        for from in (0..ENTRIES).step_by(7) {
            assert_eq!(read_from(&db, from), ENTRIES - from);
        }
        assert!(db.reopens() > 10, "reopened {} times", db.reopens());
        // Point reads and writes go to the reopened database too.
        assert_eq!(db.get(Tree::Events, &5u64.to_be_bytes()).unwrap(), Some(value(5)));
        db.put(Tree::Events, &ENTRIES.to_be_bytes(), &value(ENTRIES)).unwrap();
        assert_eq!(read_from(&db, ENTRIES), 1);
    }

    #[test]
    fn a_running_scan_is_never_cut_off_by_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let db = filled(dir.path());
        let mut held = db.scan_shared_from(Tree::Events, &0u64.to_be_bytes());
        for i in 0..ENTRIES / 2 {
            assert_eq!(held.next().unwrap().unwrap().1.as_ref(), value(i));
        }
        // Past the limit, but `held` still reads the open database: no reopen.
        assert_eq!(read_from(&db, 0), ENTRIES);
        assert_eq!(db.reopens(), 0);
        for i in ENTRIES / 2..ENTRIES {
            assert_eq!(held.next().unwrap().unwrap().1.as_ref(), value(i));
        }
        assert!(held.next().is_none());
        drop(held);
        read_from(&db, 0);
        assert_eq!(read_from(&db, 0), ENTRIES);
        assert!(db.reopens() > 0);
    }

    #[test]
    fn concurrent_scans_take_turns_with_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let db = filled(dir.path());
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let db = &db;
                s.spawn(move || {
                    for from in (t..ENTRIES).step_by(11) {
                        assert_eq!(read_from(db, from), ENTRIES - from);
                    }
                });
            }
        });
        assert!(db.reopens() > 0);
    }
}
