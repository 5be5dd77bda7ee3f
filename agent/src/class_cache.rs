//! The class cache (`cache=DIR`): classes rewritten in earlier runs, served again by replaying
//! their registry calls instead of rewriting them (docs/agent.md, "The class cache").
//!
//! A class is found by a hash of its bytes as the load hook gets them (xxh3-128, plus its length),
//! so any class whose bytes recur is served: the JDK's own classes above all, which took half
//! (jython) to nine tenths (javac) of a run's rewrite time. A class the cache lacks is rewritten
//! as without a cache, and a copy of its bytes queued: a thread of the agent rewrites it again
//! with placeholder ids ([`Relocatable`]), off the class's load, and writes the records every
//! [`FLUSH_AT`] bytes; VMDeath waits for the rest.
//!
//! Two files per agent build and rewrite mode, `classes-KEY.pack` and `classes-KEY.idx`: the
//! records, and an index of 32-byte entries (hash, offset, length, check) read whole at startup.
//! A class's record is read when the class loads, with the records after it ([`ReadAhead`]):
//! a run loads its classes in about the order an earlier run kept them, so most records come
//! without a system call, and the cache costs the run little more memory than its index. Both
//! files begin with a magic and a format version. Several JVMs may share a
//! directory: appends happen under an exclusive `flock` of the index, at the ends the files have
//! then. A record whose check fails (a JVM killed while appending, a disk that lost a write) is
//! counted and the class rewritten, never served.
//!
//! The classes of the VMInit batch are kept otherwise, without placeholders, as the rewriter
//! made them (`ClassCache::serve_exact`).

use std::cell::{Cell, RefCell};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use rustc_hash::FxHashMap;
use serde::Serialize;
use xxhash_rust::xxh3::{xxh3_128, xxh3_128_with_seed, xxh3_64};

use crate::jdk_leaves::JdkLeaves;
use crate::recorder::lock;
use crate::registry::Registry;
use crate::rewrite::relocate::{relocate, Call, CallRef, Calls, Piece, Relocatable};
use crate::rewrite::{ClassStats, MethodInfo, ProbeChoice, RewriteError, SiteInfo, SiteKind, SiteRegistry, DISPATCH_FLAGS};

const PACK_MAGIC: &[u8; 8] = b"LUCCECP\0";
const INDEX_MAGIC: &[u8; 8] = b"LUCCECI\0";
/// The format this agent reads and writes (of both files and the records).
pub const FORMAT_VERSION: u32 = 2;
const HEADER_LEN: u64 = 16;
const ENTRY_LEN: usize = 32;
/// Classes the cache lacked wait in memory until this many bytes of them are pending, then the
/// writer thread takes them (one wake-up per batch, not per class).
const HAND_OVER_AT: usize = 256 << 10;
/// The writer thread writes its records to the files every this many bytes, and at VMDeath.
const FLUSH_AT: usize = 8 << 20;
/// A pack this large is emptied before the next records are written (`Files::append`).
pub const MAX_PACK: u64 = 1 << 30;
/// How often a writer tries for the lock, one millisecond apart, before it gives up (a JVM stopped
/// while it held the lock must not hang this one).
const LOCK_TRIES: u32 = 500;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0} is not a lucce class cache file (remove it or use another cache directory)")]
    NotACache(PathBuf),
    #[error("{path} has class cache format version {found}; this agent reads version {v} (remove the file or use another cache directory)", v = FORMAT_VERSION)]
    Version { path: PathBuf, found: u32 },
    #[error("{0} is locked by another process")]
    Locked(PathBuf),
    #[error("{0} is not a regular file (remove it or use another cache directory)")]
    NotAFile(PathBuf),
}

/// Where an index entry points.
#[derive(Debug, Clone, Copy)]
struct Entry {
    offset: u64,
    len: u32,
    /// The low 32 bits of the record's xxh3-64.
    check: u32,
}

/// Counts for the summary.
#[derive(Debug, Default, Serialize, Clone)]
pub struct CacheStats {
    pub dir: String,
    /// Opened read-only: served what it held, kept nothing.
    pub read_only: bool,
    /// Classes in the index when the run began.
    pub entries_at_start: u64,
    /// Classes served from the cache.
    pub hits: u64,
    /// Classes rewritten and kept for the cache.
    pub misses: u64,
    /// Records read back but unusable (check failed, malformed), whose class was rewritten.
    pub unusable: u64,
    /// Records not served because of leaf callers (`Record::leaves_hold`): the class was
    /// rewritten (a miss), and its new record replaces the old one.
    pub refused: u64,
    /// Records written to the files.
    pub stored: u64,
    /// Records not written: the pack was full, a write failed, or the class could not be
    /// rewritten with placeholder ids.
    pub dropped: u64,
    /// Records not written because another JVM sharing the directory had kept the class since
    /// this one opened the cache.
    pub already_kept: u64,
    /// Bytes of records written.
    pub bytes_written: u64,
    /// CPU time spent making and writing records off the load hook (the writer thread, and
    /// VMDeath for what it had not taken).
    pub records_cpu_ns: u64,
}

/// What a record is made of: a class the cache lacked, to be rewritten with placeholder ids, or
/// a class of the VMInit batch (`ClassCache::serve_exact`), to be rewritten with ids from
/// `first` on (kept only when they come out consecutive: a later run's registry gives them so).
enum Kept {
    Class(Vec<u8>),
    Exact { class: Vec<u8>, first: (u32, u32) },
}

impl Kept {
    fn len(&self) -> usize {
        match self {
            Kept::Class(class) | Kept::Exact { class, .. } => class.len(),
        }
    }
}

/// What [`Files::append`] did.
struct Appended {
    /// The entries of the records it wrote.
    ours: Vec<(u128, Entry)>,
    /// The entries other JVMs wrote since this one last looked.
    theirs: Vec<(u128, Entry)>,
    /// Bytes of records written.
    bytes: u64,
    /// Records not written: other JVMs had kept their classes.
    already_kept: u64,
}

/// Classes waiting for their records: (key, what the record is made of).
type Batch = Vec<(u128, Kept)>;
/// Records waiting to be written: (key, record).
type Records = Vec<(u128, Vec<u8>)>;

/// The files and the index, shared with the writer thread.
struct Files {
    dir: PathBuf,
    pack: File,
    /// Shared by the threads that load classes, so that its memory does not grow with them.
    read_ahead: Mutex<ReadAhead>,
    pack_path: PathBuf,
    index_file: File,
    index_path: PathBuf,
    index: RwLock<FxHashMap<u128, Entry>>,
    /// Where the index file's entries this JVM has read (or written) end: past it are those other
    /// JVMs appended since (`Files::append`).
    index_read_to: AtomicU64,
    entries_at_start: u64,
    already_kept: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    unusable: AtomicU64,
    refused: AtomicU64,
    stored: AtomicU64,
    dropped: AtomicU64,
    bytes_written: AtomicU64,
    records_cpu_ns: AtomicU64,
}

pub struct ClassCache {
    files: Arc<Files>,
    /// How its records are made.
    mode: Mode,
    /// Opened read-only (`ClassCache::open`): classes it lacks are rewritten, not kept.
    read_only: bool,
    /// Classes not yet handed to the writer, and their bytes.
    pending: Mutex<(Batch, usize)>,
    /// The thread that makes and writes the records, so that no load waits for that or for the
    /// disk (started at the first full batch; joined by [`ClassCache::flush`]).
    writer: Mutex<Option<(mpsc::Sender<Batch>, JoinHandle<()>)>>,
}

/// What the hook needs to know of a class it served: its counts, however it was made.
#[derive(Debug, Default)]
pub struct ClassReport {
    pub class_name: String,
    pub methods_with_code: u32,
    pub methods_rewritten: u32,
    /// (name + descriptor, reason) of every method with code left as it was.
    pub skipped: Vec<(String, String)>,
    /// See `rewrite::ClassStats::entry_only` (not kept in the cache's records: reported only
    /// where the run rewrote the class).
    pub entry_only: Vec<(String, String)>,
    /// See `rewrite::ClassStats::probes_renewed` (not kept in the cache's records).
    pub probes_renewed: bool,
}

impl From<ClassStats> for ClassReport {
    fn from(s: ClassStats) -> Self {
        ClassReport {
            class_name: s.class_name,
            methods_with_code: s.methods_with_code,
            methods_rewritten: s.methods_rewritten,
            skipped: s.skipped.into_iter().map(|(m, r)| (m, format!("{r:?}"))).collect(),
            entry_only: s.entry_only.into_iter().map(|(m, r)| (m, format!("{r:?}"))).collect(),
            probes_renewed: s.probes_renewed,
        }
    }
}

thread_local! {
    /// The buffer records are read into (reused: no allocation per class).
    static READ_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Windows on the pack, each the bytes from a record that had to be read on. One `pread` per
/// class (a system call, about half a microsecond on this VM) was about a sixth of the hook's
/// time for a served class; a run meets the records in about the order they were written (its
/// class loading order), so most come out of a window: javac with a warm cache took 0.098–0.103
/// s of CPU per 10k classes with a `pread` per class, 0.074–0.083 with one window per thread,
/// about what a mapping of the pack gave (which a file cut short under it would turn into a
/// SIGBUS; docs/performance-log.md, stop 45). Several windows, so that threads loading classes
/// side by side do not take each other's away. Records never change once written (the pack is
/// only appended to until it is full, then emptied with the windows, `Files::append`), so a
/// window never goes stale. A record at least a window long is read
/// straight into the thread's buffer instead ([`read_record`]): a window would hold it alone,
/// only to copy it again, and take another thread's window away.
#[derive(Default)]
struct ReadAhead {
    windows: [Window; 4],
    /// Counts reads, to tell the least recently used window.
    clock: u64,
    /// Windows filled (for tests).
    fills: u64,
}

#[derive(Default)]
struct Window {
    /// Offset of `bytes` in the pack.
    at: u64,
    /// The pack's bytes from `at` are the first `len`. The buffer is sized at the first fill;
    /// a refill reads over the old bytes without clearing them first.
    bytes: Vec<u8>,
    len: usize,
    last_used: u64,
}

impl Window {
    fn get(&self, at: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(at.checked_sub(self.at)?).ok()?;
        let end = start.checked_add(len)?;
        self.bytes[..self.len].get(start..end)
    }

    /// Reads up to `len` bytes of `pack` from `at` (fewer at its end).
    fn fill(&mut self, pack: &File, at: u64, len: usize) {
        self.at = at;
        if self.bytes.len() < len {
            self.bytes.resize(len, 0);
        }
        let mut n = 0;
        while n < len {
            match pack.read_at(&mut self.bytes[n..len], at.saturating_add(n as u64)) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.len = n;
    }
}

impl ReadAhead {
    /// Bytes a window reads at once: about three records (one this long or longer is read
    /// without a window, `read_via`). In a pack that several programs filled, a program's
    /// records lie among the others', and a bigger window mostly reads theirs (javac in a pack
    /// the eleven workloads filled: 27.8 MB read for its 14 MB of records with 64 KiB windows,
    /// 19.3 MB with 16 KiB; docs/performance-log.md, stop 46).
    const WINDOW: usize = 16 << 10;

    /// Forgets every window's bytes (the pack was emptied, `Files::append`).
    fn clear(&mut self) {
        self.windows.iter_mut().for_each(|w| w.len = 0);
    }

    /// Copies `entry`'s record of `pack` into `buf`; None when the pack does not hold it (cut
    /// short).
    fn copy(&mut self, pack: &File, entry: Entry, buf: &mut Vec<u8>) -> Option<()> {
        let len = entry.len as usize;
        self.clock += 1;
        let i = match self.windows.iter().position(|w| w.get(entry.offset, len).is_some()) {
            Some(i) => i,
            None => {
                let (i, w) = self.windows.iter_mut().enumerate().min_by_key(|(_, w)| w.last_used)?;
                w.fill(pack, entry.offset, Self::WINDOW);
                self.fills += 1;
                i
            }
        };
        let w = &mut self.windows[i];
        w.last_used = self.clock;
        buf.clear();
        buf.extend_from_slice(w.get(entry.offset, len)?);
        Some(())
    }
}

/// Reads `entry`'s record of `pack` into `buf`: out of the read-ahead's windows, or straight
/// from the pack (without the read-ahead's lock) when it is at least a window long. None when
/// the pack does not hold it (cut short).
fn read_via(read_ahead: &Mutex<ReadAhead>, pack: &File, entry: Entry, buf: &mut Vec<u8>) -> Option<()> {
    if (entry.len as usize) < ReadAhead::WINDOW {
        lock(read_ahead).copy(pack, entry, buf)
    } else {
        read_record(pack, entry, buf)
    }
}

/// Reads `entry`'s record of `pack` into `buf`, replacing what it held, without writing over
/// the buffer first (a record can be hundreds of KB); None when the pack does not hold it.
fn read_record(pack: &File, entry: Entry, buf: &mut Vec<u8>) -> Option<()> {
    let len = entry.len as usize;
    buf.clear();
    buf.try_reserve_exact(len).ok()?;
    while buf.len() < len {
        let at = libc::off_t::try_from(entry.offset.checked_add(buf.len() as u64)?).ok()?;
        let want = len - buf.len();
        // SAFETY: the destination is `buf`'s spare capacity, at least `want` bytes (reserved
        // above); `pread` writes at most `want` bytes there, and the length grows only by the
        // bytes it wrote.
        let n = unsafe { libc::pread(pack.as_raw_fd(), buf.as_mut_ptr().add(buf.len()).cast(), want, at) };
        match usize::try_from(n) {
            Ok(0) => return None,
            // SAFETY: as above, `n <= want` bytes were written after the first `buf.len()`.
            Ok(n) => unsafe { buf.set_len(buf.len() + n) },
            Err(_) if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(())
}

impl ClassCache {
    /// Opens (creating them if need be) the cache files in `dir` for this agent build and the
    /// registry's choice of `probes`, and reads the index.
    /// `jdk`: the JDK's leaves, which the records' leaf callers may count on (those a later run
    /// does not give are refused, `Record::leaves_hold`).
    pub fn open(dir: &Path, probes: ProbeChoice, jdk: Option<Arc<JdkLeaves>>) -> Result<ClassCache, CacheError> {
        std::fs::create_dir_all(dir).map_err(|e| CacheError::Io(dir.to_path_buf(), why_not_a_dir(dir, e)))?;
        let stem = format!("classes-{}-{}", env!("LUCCE_AGENT_SOURCE_HASH"), probes.tag());
        let open = |ext: &str, write: bool| {
            let p = dir.join(format!("{stem}.{ext}"));
            match OpenOptions::new().read(true).write(write).create(write).truncate(false).open(&p) {
                // A device or a pipe would take records and give none back (/dev/null), or fail
                // at every read with a message that says nothing about why.
                Ok(f) if !f.metadata().is_ok_and(|m| m.is_file()) => Err(CacheError::NotAFile(p)),
                Ok(f) => Ok((f, p)),
                Err(e) => Err(CacheError::Io(p, e)),
            }
        };
        let writable = open("pack", true).and_then(|pack| Ok((pack, open("idx", true)?)));
        let ((pack, pack_path), (index_file, index_path), read_only) = match writable {
            Ok((pack, index)) => (pack, index, false),
            // A cache this process may only read (another user's, a read-only file system) is
            // served as it is, and keeps nothing new.
            Err(CacheError::Io(path, e)) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM | libc::EROFS)) => {
                let missing = |r: &Result<_, CacheError>| matches!(r, Err(CacheError::Io(_, e)) if e.kind() == std::io::ErrorKind::NotFound);
                match (open("pack", false), open("idx", false)) {
                    (Ok(pack), Ok(index)) => (pack, index, true),
                    (p, i) if missing(&p) || missing(&i) => {
                        let why = format!("{e}, and it holds no classes of this agent build to read");
                        return Err(CacheError::Io(path, std::io::Error::new(e.kind(), why)));
                    }
                    (Err(other), _) | (_, Err(other)) => return Err(other),
                }
            }
            Err(e) => return Err(e),
        };
        let (index, index_read_to) = {
            // Headers are written under the lock, so two JVMs starting on an empty directory
            // do not both write them.
            let _lock = FileLock::exclusive(&index_file, &index_path)?;
            let pack_len = check_header(&pack, &pack_path, PACK_MAGIC, !read_only)?;
            let len = check_header(&index_file, &index_path, INDEX_MAGIC, !read_only)?;
            let end = entries_end(len);
            (read_entries(&index_file, &index_path, HEADER_LEN, end, pack_len)?.into_iter().collect::<FxHashMap<_, _>>(), end)
        };
        // Used now: not stale for another build's JVM (`remove_stale`) for a week.
        let now = std::time::SystemTime::now();
        let _ = (pack.set_modified(now), index_file.set_modified(now));
        remove_stale(dir, &stem);
        let files = Files {
            dir: dir.to_path_buf(),
            read_ahead: Mutex::default(),
            pack,
            pack_path,
            index_file,
            index_path,
            entries_at_start: index.len() as u64,
            index_read_to: AtomicU64::new(index_read_to),
            already_kept: AtomicU64::new(0),
            index: RwLock::new(index),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            unusable: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            records_cpu_ns: AtomicU64::new(0),
        };
        Ok(ClassCache { files: Arc::new(files), mode: Mode { probes, jdk }, read_only, pending: Mutex::new((Vec::new(), 0)), writer: Mutex::new(None) })
    }

    /// Gives `reg` the class `class` would become, served from the cache when it holds the class
    /// and rewritten (and kept for the cache) when not; `output` gets the class's bytes as the
    /// rewriter's output does (`rewrite::rewrite_class_with`). A registry unlike the cache's
    /// (its probes, the direct rewrite) is served by the rewriter alone.
    pub fn serve<O>(
        &self,
        class: &[u8],
        reg: &mut dyn SiteRegistry,
        output: impl FnOnce(&[&[u8]]) -> O,
    ) -> Result<(Option<O>, ClassReport), RewriteError> {
        if !self.suits(reg) {
            return rewritten(class, reg, output);
        }
        let f = &*self.files;
        let hash = xxh3_128(class);
        let mut output = Some(output);
        if let Some(r) = self.hit(hash, class, reg, &mut output, None) {
            return Ok(r);
        }
        let Some(output) = output else { return Err(RewriteError::Malformed("class cache record")) };
        // Its record is made off the load, by the writer thread; this run gets the rewriter's
        // class, the same but for the short pushes of small ids.
        let r = rewritten(class, reg, output)?;
        f.misses.fetch_add(1, Ordering::Relaxed);
        if !self.read_only {
            self.keep(hash, Kept::Class(class.to_vec()));
        }
        Ok(r)
    }

    /// [`ClassCache::serve`] for a class of the VMInit batch, which must keep the short pushes
    /// the rewriter gives small ids (hook.rs says why): its record holds the class as the
    /// rewriter made it, ids and all, found by the class's hash and the ids the registry would
    /// give next, and served only when the registry can give those same ids again. The batch
    /// retransforms the same classes in the same order (by name) run after run, so it meets the
    /// same ids as long as the JVM loads the same classes before and during it.
    pub fn serve_exact<O>(
        &self,
        class: &[u8],
        reg: &mut dyn SiteRegistry,
        output: impl FnOnce(&[&[u8]]) -> O,
    ) -> Result<(Option<O>, ClassReport), RewriteError> {
        let Some(next) = reg.next_ids().filter(|_| self.suits(reg)) else {
            return rewritten(class, reg, output);
        };
        // Keyed apart from the records of `serve`, which no seed derived this way can give.
        let key = xxh3_128_with_seed(class, ((next.0 as u64) << 32 | next.1 as u64) ^ EXACT_SEED);
        let mut output = Some(output);
        if let Some(r) = self.hit(key, class, reg, &mut output, Some(next)) {
            return Ok(r);
        }
        let Some(output) = output else { return Err(RewriteError::Malformed("class cache record")) };
        let r = rewritten(class, reg, output)?;
        self.files.misses.fetch_add(1, Ordering::Relaxed);
        // The writer thread rewrites it again with ids from `next` on, which a later run's
        // registry must give again (`hit`), whatever ids this run gave it.
        if !self.read_only {
            self.keep(key, Kept::Exact { class: class.to_vec(), first: next });
        }
        Ok(r)
    }

    /// Whether `reg` rewrites as the classes in the cache were rewritten (a registry unlike it,
    /// for its probes or the direct rewrite, is served by the rewriter alone).
    fn suits(&self, reg: &dyn SiteRegistry) -> bool {
        reg.probes() == self.mode.probes && reg.direct_rewrite()
    }

    /// Serves `class` from the record at `key` if there is one that holds together: with
    /// `exact`, a record without placeholders, whose ids from `exact` on the registry must give
    /// again. None when it is not served: no method or site registered (the ids of an exact
    /// record may have been taken, for the rewrite that follows).
    fn hit<O, F: FnOnce(&[&[u8]]) -> O>(
        &self,
        key: u128,
        class: &[u8],
        reg: &mut dyn SiteRegistry,
        output: &mut Option<F>,
        exact: Option<(u32, u32)>,
    ) -> Option<(Option<O>, ClassReport)> {
        let f = &*self.files;
        let entry = f.index.read().unwrap_or_else(|e| e.into_inner()).get(&key).copied()?;
        let (mut ids_gone, mut refused) = (false, false);
        let served = READ_BUF.with(|b| {
            let mut buf = b.take();
            let r = f.read(entry, &mut buf).and_then(|()| {
                let record = Record::decode(&mut buf, key, class.len())?;
                if exact.is_some() && !record.slots.is_empty() {
                    return None;
                }
                refused = !record.leaves_hold(reg);
                if refused {
                    return None;
                }
                if let Some(first) = exact {
                    // Another thread took one of them since `next_ids`: rewritten, as a miss.
                    ids_gone = !reg.take_ids(first, record.id_counts());
                    if ids_gone {
                        return None;
                    }
                }
                record.serve(class, reg, output)
            });
            b.replace(buf);
            r
        });
        let counter = match served {
            Some(_) => &f.hits,
            None if ids_gone => return None,
            None if refused => &f.refused,
            None => &f.unusable,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        served
    }

    /// Queues what a record is made of, and hands the queue to the writer thread when it is full.
    fn keep(&self, key: u128, kept: Kept) {
        let full = {
            let mut p = lock(&self.pending);
            p.1 += kept.len();
            p.0.push((key, kept));
            (p.1 >= HAND_OVER_AT).then(|| std::mem::take(&mut *p).0)
        };
        let Some(batch) = full else { return };
        let mut w = lock(&self.writer);
        if w.is_none() {
            let (tx, rx) = mpsc::channel::<Batch>();
            let (files, mode) = (self.files.clone(), self.mode.clone());
            let spawned = std::thread::Builder::new().name("lucce-class-cache".into()).spawn(move || {
                let mut records = Records::new();
                for batch in rx {
                    files.make_records(batch, &mode, &mut records);
                    if records.iter().map(|(_, r)| r.len()).sum::<usize>() >= FLUSH_AT {
                        files.store(&std::mem::take(&mut records));
                    }
                }
                files.store(&records);
                files.records_cpu_ns.fetch_add(crate::hook::thread_cpu_ns(), Ordering::Relaxed);
            });
            match spawned {
                Ok(thread) => *w = Some((tx, thread)),
                Err(e) => crate::diag!(Warn, "class cache: no writer thread ({e}); writing at exit"),
            }
        }
        let unsent = match &*w {
            Some((tx, _)) => tx.send(batch).err().map(|e| e.0),
            None => Some(batch),
        };
        if let Some(batch) = unsent {
            // No thread: back in the queue, for the flush.
            let mut p = lock(&self.pending);
            p.1 += batch.iter().map(|(_, r)| r.len()).sum::<usize>();
            p.0.extend(batch);
        }
    }

    /// Makes and writes every waiting record and waits for the writer thread; the records are
    /// then served in this run too. Called at VMDeath.
    pub fn flush(&self) {
        let mut rest = std::mem::take(&mut *lock(&self.pending)).0;
        if let Some((tx, thread)) = lock(&self.writer).take() {
            // What the writer cannot take (it is gone) is made here.
            rest = tx.send(rest).err().map_or_else(Vec::new, |e| e.0);
            drop(tx);
            let _ = thread.join();
        }
        if !rest.is_empty() {
            let cpu0 = crate::hook::thread_cpu_ns();
            let mut records = Records::new();
            self.files.make_records(rest, &self.mode, &mut records);
            self.files.store(&records);
            self.files.records_cpu_ns.fetch_add(crate::hook::thread_cpu_ns().saturating_sub(cpu0), Ordering::Relaxed);
        }
    }

    pub fn stats(&self) -> CacheStats {
        let f = &*self.files;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            dir: f.dir.display().to_string(),
            read_only: self.read_only,
            entries_at_start: f.entries_at_start,
            hits: get(&f.hits),
            misses: get(&f.misses),
            unusable: get(&f.unusable),
            refused: get(&f.refused),
            stored: get(&f.stored),
            dropped: get(&f.dropped),
            already_kept: get(&f.already_kept),
            bytes_written: get(&f.bytes_written),
            records_cpu_ns: get(&f.records_cpu_ns),
        }
    }
}

/// The rewriter's class and report, for a class the cache does not serve.
fn rewritten<O>(class: &[u8], reg: &mut dyn SiteRegistry, output: impl FnOnce(&[&[u8]]) -> O) -> Result<(Option<O>, ClassReport), RewriteError> {
    let (o, stats) = crate::rewrite::rewrite_class_with(class, reg, output)?;
    Ok((o, stats.into()))
}

/// The registry of the writer thread's rewrites, which give placeholder ids: only its mode is
/// asked (`Relocatable::rewrite`), its probes and the JDK's leaves.
#[derive(Clone)]
struct Mode {
    probes: ProbeChoice,
    jdk: Option<Arc<JdkLeaves>>,
}

impl SiteRegistry for Mode {
    fn method(&mut self, _: &MethodInfo<'_>) -> u32 {
        0
    }
    fn site(&mut self, _: u32, _: &SiteInfo) -> u32 {
        0
    }
    fn probes(&self) -> ProbeChoice {
        self.probes
    }
    /// The JDK's leaves only, as a run that has not loaded the program's classes yet knows them
    /// (`Registry::known_leaf` answers the program's from the classes loaded so far).
    fn known_leaf(&self, class: &[u8], name: &[u8], desc: &[u8], own: bool) -> Option<(u16, u16)> {
        let jdk = self.jdk.as_ref().filter(|_| crate::jdk_leaves::maybe_java_base(class))?;
        jdk.known_leaf(class, name, desc, own)
    }
}

impl Files {
    /// Appends to `records` those of `batch`. A class that cannot be rewritten again as it was
    /// (or makes the rewriter panic) gets none: the next run rewrites it, as this one did.
    fn make_records(&self, batch: Batch, mode: &Mode, records: &mut Records) {
        for (key, kept) in batch {
            let record = catch_unwind(AssertUnwindSafe(|| match kept {
                Kept::Class(class) => {
                    let rel = Relocatable::rewrite(&class, mode).ok()?;
                    Some(encode(key, class.len(), &rel))
                }
                Kept::Exact { class, first } => {
                    let reg = Registry::starting_at(first.0, first.1).with_probes(mode.probes).with_jdk_leaves(mode.jdk.clone());
                    let (rel, exact) = Relocatable::rewrite_exact(&class, &mut reg.registrar(), first).ok()?;
                    exact.then(|| encode(key, class.len(), &rel))
                }
            }))
            .ok()
            .flatten();
            match record {
                Some(r) => records.push((key, r)),
                None => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Reads a record into `buf`; None when it cannot be read or its check fails.
    fn read(&self, entry: Entry, buf: &mut Vec<u8>) -> Option<()> {
        read_via(&self.read_ahead, &self.pack, entry, buf)?;
        (xxh3_64(buf) as u32 == entry.check).then_some(())
    }

    /// Appends `batch` to the files and the index; counts what it could not write.
    fn store(&self, batch: &Records) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        match self.append(batch) {
            Ok(Some(a)) => {
                // Other JVMs' entries first: where a class is in both, this one's is the newer.
                self.index.write().unwrap_or_else(|e| e.into_inner()).extend(a.theirs.into_iter().chain(a.ours));
                self.stored.fetch_add(n - a.already_kept, Ordering::Relaxed);
                self.already_kept.fetch_add(a.already_kept, Ordering::Relaxed);
                self.bytes_written.fetch_add(a.bytes, Ordering::Relaxed);
            }
            Ok(None) => {
                crate::diag!(Info, "class cache {}: {n} records larger together than a whole pack ({MAX_PACK} bytes) not kept", self.dir.display());
                self.dropped.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                crate::diag!(Warn, "class cache: {e}; {n} classes not kept");
                self.dropped.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Writes `batch`'s records but those of classes other JVMs kept since this one last looked;
    /// None when the pack is full.
    fn append(&self, batch: &Records) -> Result<Option<Appended>, CacheError> {
        let (pack_path, index_path) = (&self.pack_path, &self.index_path);
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |e| CacheError::Io(p, e)
        };
        let size: u64 = batch.iter().map(|(_, r)| r.len() as u64).sum();
        let _lock = FileLock::exclusive(&self.index_file, index_path)?;
        let mut pack_end = self.pack.metadata().map_err(io(pack_path))?.len();
        // An entry cut short (a writer killed mid-append) is cut off.
        let mut index_end = entries_end(self.index_file.metadata().map_err(io(index_path))?.len());
        if pack_end + size > MAX_PACK {
            if HEADER_LEN + size > MAX_PACK {
                return Ok(None);
            }
            // Full: the files start over, or no class would ever be kept again (the pack also
            // holds records no entry points at: a class two JVMs kept at once, a JVM killed while
            // appending). A JVM still serving from the old records reads other bytes where they
            // were, which fail its checks: those classes are rewritten, never served wrong.
            self.pack.set_len(HEADER_LEN).map_err(io(pack_path))?;
            self.index_file.set_len(HEADER_LEN).map_err(io(index_path))?;
            self.index.write().unwrap_or_else(|e| e.into_inner()).clear();
            lock(&self.read_ahead).clear();
            crate::diag!(Warn, "class cache {}: the pack reached its limit ({MAX_PACK} bytes) and was emptied; classes are kept again from now on", self.dir.display());
            (pack_end, index_end) = (HEADER_LEN, HEADER_LEN);
            self.index_read_to.store(HEADER_LEN, Ordering::Relaxed);
        }
        // JVMs started together (a build tool's forks, a test suite's) miss the same classes: a
        // class another one kept since this one last looked is not kept twice, and is served by
        // this one from now on. (Fewer entries than last time: another JVM emptied the files.)
        let seen = self.index_read_to.load(Ordering::Relaxed);
        let theirs = read_entries(&self.index_file, index_path, if seen <= index_end { seen } else { HEADER_LEN }, index_end, pack_end)?;
        let kept: rustc_hash::FxHashSet<u128> = theirs.iter().map(|(k, _)| *k).collect();
        let total = batch.len();
        let batch: Vec<&(u128, Vec<u8>)> = batch.iter().filter(|(k, _)| !kept.contains(k)).collect();
        let mut records = Vec::with_capacity(batch.iter().map(|(_, r)| r.len()).sum());
        for (_, r) in &batch {
            records.extend_from_slice(r);
        }
        // A write that fails (a full disk) leaves nothing behind: records that no entry points
        // at would only fill the disk further, run after run.
        let undo = |e| {
            let _ = self.pack.set_len(pack_end);
            let _ = self.index_file.set_len(index_end);
            e
        };
        // The records first: an index entry never points at bytes not yet written.
        self.pack.write_all_at(&records, pack_end).map_err(io(pack_path)).map_err(undo)?;
        let mut entries = Vec::with_capacity(batch.len());
        let mut raw = Vec::with_capacity(batch.len() * ENTRY_LEN);
        let mut offset = pack_end;
        for &&(hash, ref record) in &batch {
            let e = Entry { offset, len: record.len() as u32, check: xxh3_64(record) as u32 };
            offset += record.len() as u64;
            raw.extend_from_slice(&hash.to_le_bytes());
            raw.extend_from_slice(&e.offset.to_le_bytes());
            raw.extend_from_slice(&e.len.to_le_bytes());
            raw.extend_from_slice(&e.check.to_le_bytes());
            entries.push((hash, e));
        }
        self.index_file.set_len(index_end).map_err(io(index_path)).map_err(undo)?;
        self.index_file.write_all_at(&raw, index_end).map_err(io(index_path)).map_err(undo)?;
        self.index_read_to.store(index_end + raw.len() as u64, Ordering::Relaxed);
        Ok(Some(Appended { ours: entries, theirs, bytes: records.len() as u64, already_kept: (total - batch.len()) as u64 }))
    }
}

/// Files of other agent builds (or modes) that no JVM opened for this long are removed when a
/// cache opens: a new build never reads an old build's records, and each build's files would
/// stay forever.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// What to report when `create_dir_all(dir)` failed with `e`: what is in the way, when something
/// is (a file, a loop of symbolic links), rather than "File exists".
fn why_not_a_dir(dir: &Path, e: std::io::Error) -> std::io::Error {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => std::io::Error::from_raw_os_error(libc::ENOTDIR),
        Err(m) if e.kind() == std::io::ErrorKind::AlreadyExists => m,
        _ => e,
    }
}

/// Removes the stale cache files in `dir` (those named `classes-*.pack` or `.idx` whose stem is
/// not `ours`); leaves every other file alone, and any error unreported (it only costs space).
fn remove_stale(dir: &Path, ours: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((stem, ext)) = name.rsplit_once('.') else { continue };
        if !stem.starts_with("classes-") || !matches!(ext, "pack" | "idx") || stem == ours {
            continue;
        }
        let old = e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_AFTER));
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Checks (or, in an empty file or one whose header was cut short, writes if `writable`) the
/// header; returns the file's length.
fn check_header(f: &File, path: &Path, magic: &[u8; 8], writable: bool) -> Result<u64, CacheError> {
    let io = |e| CacheError::Io(path.to_path_buf(), e);
    let len = f.metadata().map_err(io)?.len();
    let mut ours = [0u8; HEADER_LEN as usize];
    ours[..8].copy_from_slice(magic);
    ours[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    let mut h = [0u8; HEADER_LEN as usize];
    if len < HEADER_LEN {
        // A JVM killed while it wrote the header leaves the start of it: written again, or
        // the cache would stay off in every later run.
        let start = &mut h[..len as usize];
        if f.read_exact_at(start, 0).is_err() || start != &ours[..len as usize] {
            return Err(CacheError::NotACache(path.to_path_buf()));
        }
        if !writable {
            return Err(io(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "holds no header yet, and this process may not write it")));
        }
        f.write_all_at(&ours, 0).map_err(io)?;
        return Ok(HEADER_LEN);
    }
    if f.read_exact_at(&mut h, 0).is_err() || h[..8] != ours[..8] {
        return Err(CacheError::NotACache(path.to_path_buf()));
    }
    let found = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if found != FORMAT_VERSION {
        return Err(CacheError::Version { path: path.to_path_buf(), found });
    }
    Ok(len)
}

/// The index entries in bytes `from..to` of `f` (entry-aligned, past the header), in file order:
/// a later entry for the same class (rewritten after its record proved unusable) must win. A last
/// entry cut short is left out, and so is one that points outside a pack `pack_len` bytes long.
fn read_entries(f: &File, path: &Path, from: u64, to: u64, pack_len: u64) -> Result<Vec<(u128, Entry)>, CacheError> {
    let mut raw = vec![0u8; to.saturating_sub(from) as usize];
    f.read_exact_at(&mut raw, from).map_err(|e| CacheError::Io(path.to_path_buf(), e))?;
    let entry = |e: &[u8]| {
        let mut r = Reader(e);
        let (hash, offset, len, check) = (r.u128()?, r.u64()?, r.u32()?, r.u32()?);
        // Its record is gone (a pack cut short) or the entry is damaged: it could only fail its
        // check, after a damaged length had sized a buffer (up to 4 GiB).
        (offset >= HEADER_LEN && offset.checked_add(len as u64).is_some_and(|end| end <= pack_len)).then_some((hash, Entry { offset, len, check }))
    };
    Ok(raw.chunks_exact(ENTRY_LEN).filter_map(entry).collect())
}

/// Where the last whole entry of an index file `len` bytes long ends.
fn entries_end(len: u64) -> u64 {
    HEADER_LEN + len.saturating_sub(HEADER_LEN) / ENTRY_LEN as u64 * ENTRY_LEN as u64
}

/// An exclusive `flock`, released on drop.
struct FileLock<'a>(&'a File);

impl<'a> FileLock<'a> {
    fn exclusive(f: &'a File, path: &Path) -> Result<Self, CacheError> {
        for _ in 0..LOCK_TRIES {
            // SAFETY: flock on a descriptor `f` owns; it touches no memory.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(FileLock(f));
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) && e.kind() != std::io::ErrorKind::Interrupted {
                return Err(CacheError::Io(path.to_path_buf(), e));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Err(CacheError::Locked(path.to_path_buf()))
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `exclusive`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

// A record, little-endian:
//   hash u128, class length u32, literal length u32, literal (the rewritten class's new bytes),
//   pieces u32 (u32::MAX: the class is unchanged) × (kind u8: 0 of the class, 1 of the literal;
//   offset u32, length u32), string table length u32, string table (UTF-8),
//   class name, methods with code u32, rewritten u32, skipped u32 × (method, reason),
//   calls u32 × (tag u8, fields), slots u32 × (call u32, offset in the literal u32),
//   class access flags u16, assumed u32 × (class, name, descriptor, access u16, class access u16)
//   (the leaves of other classes its leaf callers count on, `Relocatable::assumed`).
// A string is its offset in the table (u32; u32::MAX for none) and length (u16): the table is
// checked as UTF-8 once per record, and the class's name and source file are there once. The
// literal comes first so that it can be patched in place while the strings after it are
// borrowed. The pieces of the class come from the class being loaded, whose hash and length
// are the record's. An exact record (`ClassCache::serve_exact`) has no slots: its ids are in
// its bytes.

/// Mixed into the seed of an exact record's key (see `ClassCache::serve_exact`), so that no
/// registry state gives seed 0, the seed of `xxh3_128`.
const EXACT_SEED: u64 = 0x9e37_79b9_7f4a_7c15;
const NO_PIECES: u32 = u32::MAX;
const NO_STRING: u32 = u32::MAX;
const TAG_METHOD: u8 = 0;
const TAG_SITE: u8 = 1;
const TAG_RESERVE: u8 = 2;
/// A method call's fields: four strings, access flags, leaf.
const METHOD_LEN: usize = 4 * 6 + 2 + 1;
/// A site call's fields: method, kind, bci, line, API flag, target.
const SITE_LEN: usize = 4 + 1 + 4 + 4 + 1 + 8;

/// Builds a record's string table and its references.
#[derive(Default)]
struct Strings<'a> {
    table: String,
    seen: FxHashMap<&'a str, u32>,
}

impl<'a> Strings<'a> {
    fn put(&mut self, out: &mut Vec<u8>, s: Option<&'a str>) {
        let Some(s) = s else {
            out.extend_from_slice(&NO_STRING.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            return;
        };
        // Names from a class file fit a u2 length as modified UTF-8; as UTF-8 they are no longer.
        let mut end = s.len().min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let s = &s[..end];
        let at = *self.seen.entry(s).or_insert_with(|| {
            self.table.push_str(s);
            (self.table.len() - s.len()) as u32
        });
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    }
}

fn encode(hash: u128, class_len: usize, r: &Relocatable) -> Vec<u8> {
    let u32_ = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
    let reasons: Vec<String> = r.stats.skipped.iter().map(|(_, reason)| format!("{reason:?}")).collect();
    let mut strings = Strings::default();
    // Everything after the string table, which is written before it.
    let mut body = Vec::new();
    strings.put(&mut body, Some(&r.stats.class_name));
    u32_(&mut body, r.stats.methods_with_code);
    u32_(&mut body, r.stats.methods_rewritten);
    u32_(&mut body, r.stats.skipped.len() as u32);
    for ((m, _), reason) in r.stats.skipped.iter().zip(&reasons) {
        strings.put(&mut body, Some(m));
        strings.put(&mut body, Some(reason));
    }
    u32_(&mut body, r.calls.len() as u32);
    for c in &r.calls {
        match c {
            Call::Method(m) => {
                body.push(TAG_METHOD);
                strings.put(&mut body, Some(&m.class));
                strings.put(&mut body, Some(&m.name));
                strings.put(&mut body, Some(&m.descriptor));
                strings.put(&mut body, m.source_file.as_deref());
                body.extend_from_slice(&m.access_flags.to_le_bytes());
                body.push(m.leaf as u8);
            }
            Call::Site { method, site } => {
                body.push(TAG_SITE);
                u32_(&mut body, *method);
                body.push(matches!(site.kind, SiteKind::Alloc) as u8);
                u32_(&mut body, site.bci);
                body.extend_from_slice(&site.line.to_le_bytes());
                body.push(site.api as u8);
                body.extend_from_slice(&site.target.to_le_bytes());
            }
            Call::Reserve(n) => {
                body.push(TAG_RESERVE);
                u32_(&mut body, *n);
            }
        }
    }
    u32_(&mut body, r.slots.len() as u32);
    for &(k, at) in &r.slots {
        u32_(&mut body, k);
        u32_(&mut body, at);
    }
    body.extend_from_slice(&r.stats.class_access.to_le_bytes());
    u32_(&mut body, r.assumed.len() as u32);
    for a in &r.assumed {
        strings.put(&mut body, Some(&a.class));
        strings.put(&mut body, Some(&a.name));
        strings.put(&mut body, Some(&a.descriptor));
        body.extend_from_slice(&a.access.to_le_bytes());
        body.extend_from_slice(&a.class_access.to_le_bytes());
    }
    let pieces = r.pieces.as_deref().unwrap_or_default();
    let mut out = Vec::with_capacity(32 + r.literal.len() + 9 * pieces.len() + strings.table.len() + body.len());
    out.extend_from_slice(&hash.to_le_bytes());
    u32_(&mut out, class_len as u32);
    u32_(&mut out, r.literal.len() as u32);
    out.extend_from_slice(&r.literal);
    u32_(&mut out, if r.pieces.is_some() { pieces.len() as u32 } else { NO_PIECES });
    for &p in pieces {
        let (kind, at, len) = match p {
            Piece::Original { at, len } => (0, at, len),
            Piece::Literal { at, len } => (1, at, len),
        };
        out.push(kind);
        u32_(&mut out, at);
        u32_(&mut out, len);
    }
    u32_(&mut out, strings.table.len() as u32);
    out.extend_from_slice(strings.table.as_bytes());
    out.extend_from_slice(&body);
    out
}

/// A record read back: the rewritten class (its placeholders still in) and what it takes to
/// give it a run's ids.
struct Record<'a> {
    pieces: Option<Vec<Piece>>,
    literal: &'a mut [u8],
    report: ClassReport,
    calls: RecordCalls<'a>,
    /// (call u32, offset in the literal u32) pairs.
    slots: &'a [u8],
    class_access: u16,
    /// (class, name, descriptor, (access, class access)) of each leaf counted on.
    assumed: Vec<(&'a str, &'a str, &'a str, (u16, u16))>,
}

/// A record's calls, checked by [`RecordCalls::check`] and made straight from its bytes: no list
/// of [`CallRef`]s in between (a large class makes thousands of calls).
struct RecordCalls<'a> {
    bytes: &'a [u8],
    table: &'a str,
    count: u32,
    methods: u32,
    sites: u32,
}

thread_local! {
    /// Which calls [`RecordCalls::check`] has seen are methods, kept per thread between classes.
    static IS_METHOD: Cell<Vec<bool>> = const { Cell::new(Vec::new()) };
}

impl<'a> RecordCalls<'a> {
    /// The `count` calls at the front of `r`, which it takes, when each is well formed and each
    /// site belongs to an earlier method call.
    fn check(r: &mut Reader<'a>, table: &'a str, count: u32) -> Option<RecordCalls<'a>> {
        let start = r.0;
        let (mut methods, mut sites) = (0, 0);
        let ok = IS_METHOD.with(|cell| {
            let mut is_method = cell.take();
            is_method.clear();
            let ok = (0..count).all(|_| match read_call(r, table) {
                Some(CallRef::Method(_)) => {
                    methods += 1;
                    is_method.push(true);
                    true
                }
                Some(CallRef::Site { method, .. }) => {
                    sites += 1;
                    is_method.push(false);
                    is_method.get(method as usize) == Some(&true)
                }
                Some(CallRef::Reserve(_)) => {
                    is_method.push(false);
                    true
                }
                None => false,
            });
            cell.set(is_method);
            ok
        });
        let bytes = &start[..start.len() - r.0.len()];
        ok.then_some(RecordCalls { bytes, table, count, methods, sites })
    }

    /// (name, descriptor, access flags, leaf) of the methods.
    fn methods(&self) -> impl Iterator<Item = (&'a str, &'a str, u16, bool)> + '_ {
        let mut r = Reader(self.bytes);
        std::iter::from_fn(move || loop {
            match r.u8()? {
                TAG_METHOD => {
                    let m = method_info(self.table, &r.array()?)?;
                    return Some((m.name, m.descriptor, m.access_flags, m.leaf));
                }
                TAG_SITE => {
                    r.take(SITE_LEN)?;
                }
                _ => {
                    r.u32()?;
                }
            }
        })
    }
}

impl Calls for RecordCalls<'_> {
    fn count(&self) -> usize {
        self.count as usize
    }

    /// Checked when read ([`RecordCalls::check`]).
    fn consistent(&self) -> bool {
        true
    }

    fn make(&self, reg: &mut dyn SiteRegistry, ids: &mut [u32]) {
        // Read again as `check` read them: they held (the early returns are never taken). Read
        // with `read_call` again, through a `CallRef` each, a served class took 15-18% longer in
        // `rewrite_dir` (stop 47).
        let mut r = Reader(self.bytes);
        for k in 0..self.count as usize {
            ids[k] = match r.u8() {
                Some(TAG_METHOD) => {
                    let Some(m) = r.array().and_then(|b| method_info(self.table, &b)) else { return };
                    reg.method(&m)
                }
                Some(TAG_SITE) => {
                    let Some((method, site)) = r.array().and_then(|b| site_info(&b)) else { return };
                    reg.site(ids[method as usize], &site)
                }
                _ => {
                    reg.reserve_sites(r.u32().unwrap_or(0));
                    0
                }
            };
        }
    }
}

/// The call at the front of `r`, which it takes; None when it is malformed (its tag, a string
/// outside `table`, a flag other than 0 or 1).
fn read_call<'a>(r: &mut Reader<'a>, table: &'a str) -> Option<CallRef<'a>> {
    Some(match r.u8()? {
        TAG_METHOD => CallRef::Method(method_info(table, &r.array()?)?),
        TAG_SITE => {
            let (method, site) = site_info(&r.array()?)?;
            CallRef::Site { method, site }
        }
        TAG_RESERVE => CallRef::Reserve(r.u32()?),
        _ => return None,
    })
}

// Each call's fields are read at once (one bounds check) and taken apart at fixed offsets, by
// the two functions below, inlined into both readers (as calls, serving took about 2% longer
// in `rewrite_dir`, stop 48).

/// A method call's fields; None when a string lies outside `table` or the flag is not 0 or 1.
#[inline(always)]
fn method_info<'a>(table: &'a str, b: &[u8; METHOD_LEN]) -> Option<MethodInfo<'a>> {
    let string = |i| table_str(table, b, i);
    Some(MethodInfo {
        class: string(0)??,
        name: string(6)??,
        descriptor: string(12)??,
        source_file: string(18)?,
        access_flags: u16::from_le_bytes([b[24], b[25]]),
        leaf: flag(b[26])?,
    })
}

/// A site call's fields: the number of its method's call, and the site; None when a flag is not
/// 0 or 1.
#[inline(always)]
fn site_info(b: &[u8; SITE_LEN]) -> Option<(u32, SiteInfo)> {
    let kind = if flag(b[4])? { SiteKind::Alloc } else { SiteKind::Call };
    let site = SiteInfo {
        kind,
        bci: u32_at(b, 5),
        line: u32_at(b, 9) as i32,
        api: flag(b[13])?,
        target: u64::from_le_bytes([b[14], b[15], b[16], b[17], b[18], b[19], b[20], b[21]]),
    };
    Some((u32_at(b, 0), site))
}

/// A flag byte: 0 or 1.
fn flag(v: u8) -> Option<bool> {
    match v {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// A record's slots, read as they are walked.
fn slots(b: &[u8]) -> impl Iterator<Item = (u32, u32)> + Clone + '_ {
    b.chunks_exact(8).map(|b| (u32_at(b, 0), u32_at(b, 4)))
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// The string of `table` whose reference (offset u32, length u16) is at `i` in `b`: Some(None)
/// for none, None when it lies outside the table or splits a character.
fn table_str<'a>(table: &'a str, b: &[u8], i: usize) -> Option<Option<&'a str>> {
    let (at, len) = (u32_at(b, i), u16::from_le_bytes([b[i + 4], b[i + 5]]));
    if at == NO_STRING {
        return Some(None);
    }
    table.get(at as usize..at as usize + len as usize).map(Some)
}

/// Reads fields off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }
    fn u128(&mut self) -> Option<u128> {
        self.array().map(u128::from_le_bytes)
    }
    fn str(&mut self, table: &'a str) -> Option<&'a str> {
        let b: [u8; 6] = self.array()?;
        table_str(table, &b, 0)?
    }
}

impl<'a> Record<'a> {
    /// None when the record is not that of a class with this hash and length, or is malformed.
    fn decode(buf: &'a mut [u8], hash: u128, class_len: usize) -> Option<Record<'a>> {
        let (head, rest) = buf.split_at_mut_checked(24)?;
        let mut h = Reader(head);
        if h.u128()? != hash || h.u32()? as usize != class_len {
            return None;
        }
        let (literal, rest) = rest.split_at_mut_checked(h.u32()? as usize)?;
        let mut r = Reader(rest);
        let pieces = match r.u32()? {
            NO_PIECES => None,
            n => {
                let mut pieces = Vec::with_capacity((n as usize).min(r.0.len() / 9));
                for _ in 0..n {
                    let b: [u8; 9] = r.array()?;
                    let (at, len) = (u32_at(&b, 1), u32_at(&b, 5));
                    pieces.push(match b[0] {
                        0 => Piece::Original { at, len },
                        1 => Piece::Literal { at, len },
                        _ => return None,
                    });
                }
                Some(pieces)
            }
        };
        let n = r.u32()? as usize;
        let table = std::str::from_utf8(r.take(n)?).ok()?;
        let mut report = ClassReport {
            class_name: r.str(table)?.to_string(),
            methods_with_code: r.u32()?,
            methods_rewritten: r.u32()?,
            skipped: Vec::new(),
            entry_only: Vec::new(),
            probes_renewed: false,
        };
        for _ in 0..r.u32()? {
            report.skipped.push((r.str(table)?.to_string(), r.str(table)?.to_string()));
        }
        let n = r.u32()?;
        let calls = RecordCalls::check(&mut r, table, n)?;
        let n = r.u32()? as usize;
        let slots = r.take(n.checked_mul(8)?)?;
        let class_access = r.u16()?;
        let n = r.u32()?;
        let mut assumed = Vec::new();
        for _ in 0..n {
            assumed.push((r.str(table)?, r.str(table)?, r.str(table)?, (r.u16()?, r.u16()?)));
        }
        r.0.is_empty().then_some(Record { pieces, literal, report, calls, slots, class_access, assumed })
    }

    /// Whether this run may take the record as it is, for its leaf callers: `reg` still answers
    /// every leaf of another class it counts on, and takes its methods' leaves as the class's
    /// (`SiteRegistry::served_leaves`: in a class of the JDK, callers may already count on
    /// some). Exactness does not depend on it, but speed does: a caller that counts on a
    /// callee that is no leaf makes that callee walk the stack at every entry.
    fn leaves_hold(&self, reg: &dyn SiteRegistry) -> bool {
        let flags = |(a, c): (u16, u16)| (a & DISPATCH_FLAGS, c & DISPATCH_FLAGS);
        self.assumed.iter().all(|&(c, n, d, answer)| reg.known_leaf(c.as_bytes(), n.as_bytes(), d.as_bytes(), false).map(flags) == Some(flags(answer)))
            && reg.served_leaves(&self.report.class_name, self.class_access, &mut self.calls.methods())
    }

    /// The method and site ids its calls take.
    fn id_counts(&self) -> (u32, u32) {
        (self.calls.methods, self.calls.sites)
    }

    /// Replays the record on `reg` and hands the class, made of pieces of `class` (the class
    /// being loaded) and of the record, to `output` (which it takes only then); None, and no
    /// registry call made, when the record does not hold together.
    fn serve<O, F: FnOnce(&[&[u8]]) -> O>(self, class: &[u8], reg: &mut dyn SiteRegistry, output: &mut Option<F>) -> Option<(Option<O>, ClassReport)> {
        let Record { pieces, literal, report, calls, slots, .. } = self;
        let parts = relocate(class, pieces.as_deref(), literal, &calls, self::slots(slots), reg);
        match parts? {
            None => Some((None, report)),
            Some(parts) => Some((Some(output.take()?(&parts)), report)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::relocate::{Assumed, OwnedMethodInfo};
    use crate::rewrite::SkipReason;

    /// Gives ids from 100 in call order and keeps the method names it was given.
    #[derive(Default)]
    struct Ids(u32, Vec<String>);

    impl SiteRegistry for Ids {
        fn method(&mut self, m: &MethodInfo<'_>) -> u32 {
            self.1.push(format!("{}.{}{} {:?}", m.class, m.name, m.descriptor, m.source_file));
            self.0 += 1;
            99 + self.0
        }
        fn site(&mut self, method_id: u32, site: &SiteInfo) -> u32 {
            self.1.push(format!("site of {method_id}: {site:?}"));
            self.0 += 1;
            99 + self.0
        }
    }

    fn sample() -> Relocatable {
        let method = |name: &str, source: Option<&str>| {
            Call::Method(OwnedMethodInfo {
                class: "p/Ç".into(),
                name: name.into(),
                descriptor: "()V".into(),
                source_file: source.map(Into::into),
                access_flags: 9,
                leaf: name == "b",
            })
        };
        let site = SiteInfo { kind: SiteKind::Alloc, bci: 7, line: -1, api: true, target: 0xfeed };
        Relocatable {
            pieces: Some(vec![Piece::Literal { at: 0, len: 30 }, Piece::Original { at: 2, len: 3 }, Piece::Literal { at: 30, len: 10 }]),
            literal: (0u8..40).collect(),
            stats: ClassStats {
                class_name: "p/Ç".into(),
                methods_with_code: 3,
                methods_rewritten: 2,
                skipped: vec![("finalize()V".into(), SkipReason::EmptyFinalizer)],
                class_access: 0x31,
                ..ClassStats::default()
            },
            calls: vec![method("a", Some("Ç.java")), Call::Reserve(1), Call::Site { method: 0, site }, method("b", None)],
            slots: vec![(0, 4), (2, 10), (3, 36)],
            assumed: vec![Assumed { class: "java/lang/String".into(), name: "length".into(), descriptor: "()I".into(), access: 1, class_access: 0x31 }],
        }
    }

    /// Answers one leaf of another class, and takes or refuses the served class's leaves,
    /// keeping what it was given.
    struct Leaves {
        answer: Option<(u16, u16)>,
        take: bool,
        given: RefCell<Vec<String>>,
    }

    impl SiteRegistry for Leaves {
        fn method(&mut self, _: &MethodInfo<'_>) -> u32 {
            0
        }
        fn site(&mut self, _: u32, _: &SiteInfo) -> u32 {
            0
        }
        fn known_leaf(&self, class: &[u8], name: &[u8], desc: &[u8], own: bool) -> Option<(u16, u16)> {
            (!own && (class, name, desc) == (&b"java/lang/String"[..], &b"length"[..], &b"()I"[..])).then_some(self.answer?)
        }
        fn served_leaves(&self, class: &str, access: u16, methods: &mut dyn Iterator<Item = (&str, &str, u16, bool)>) -> bool {
            self.given.borrow_mut().extend(methods.map(|(n, d, a, leaf)| format!("{class} {access:#x}: {n}{d} {a} {leaf}")));
            self.take
        }
    }

    /// A record holds only while the run answers the leaves of other classes it counts on as
    /// they were answered when it was made, and takes its own.
    #[test]
    fn records_hold_while_the_leaves_they_count_on_do() {
        let mut record = encode(7, 1234, &sample());
        let rec = Record::decode(&mut record, 7, 1234).expect("decodes");
        assert_eq!(rec.assumed, vec![("java/lang/String", "length", "()I", (1, 0x31))]);
        let holds = |answer, take| {
            let reg = Leaves { answer, take, given: RefCell::default() };
            let held = rec.leaves_hold(&reg);
            (held, reg.given.into_inner())
        };
        let (held, given) = holds(Some((1, 0x31)), true);
        assert!(held);
        assert_eq!(given, vec!["p/Ç 0x31: a()V 9 false".to_string(), "p/Ç 0x31: b()V 9 true".to_string()]);
        // Flags that do not fix a call's target may differ (a frame the JVM hides, 0x8000).
        assert!(holds(Some((0x8001, 0x31)), true).0);
        for (answer, take) in [(None, true), (Some((9, 0x31)), true), (Some((1, 0x21)), true), (Some((1, 0x31)), false)] {
            assert!(!holds(answer, take).0, "{answer:?} {take}");
        }
    }

    #[test]
    fn records_read_back_as_written() {
        let r = sample();
        let mut record = encode(7, 1234, &r);
        let mut copy = record.clone();
        let rec = Record::decode(&mut copy, 7, 1234).expect("decodes");
        assert_eq!(rec.report.class_name, "p/Ç");
        assert_eq!((rec.report.methods_with_code, rec.report.methods_rewritten), (3, 2));
        assert_eq!(rec.report.skipped, vec![("finalize()V".to_string(), "EmptyFinalizer".to_string())]);
        assert_eq!(slots(rec.slots).collect::<Vec<_>>(), r.slots);
        assert_eq!(rec.id_counts(), (2, 1));
        // Served: the registry gets the calls, the placeholders its ids.
        let mut ids = Ids::default();
        let class = [50u8, 51, 52, 53, 54, 55];
        let (out, _) = rec.serve(&class, &mut ids, &mut Some(|parts: &[&[u8]]| parts.concat())).expect("served");
        let mut want: Vec<u8> = (0u8..40).collect();
        for (at, id) in [(4, 100u32), (10, 101), (36, 102)] {
            want[at..at + 4].copy_from_slice(&id.to_be_bytes());
        }
        want.splice(30..30, [52, 53, 54]);
        assert_eq!(out, Some(want));
        // A piece past the end of the class being loaded: refused before any registry call.
        let mut copy = record.clone();
        let mut none = Ids::default();
        assert!(Record::decode(&mut copy, 7, 1234).unwrap().serve(&class[..4], &mut none, &mut Some(|p: &[&[u8]]| p.concat())).is_none());
        assert_eq!(none.0, 0);
        let site = SiteInfo { kind: SiteKind::Alloc, bci: 7, line: -1, api: true, target: 0xfeed };
        assert_eq!(ids.1, vec!["p/Ç.a()V Some(\"Ç.java\")".to_string(), format!("site of 100: {site:?}"), "p/Ç.b()V None".to_string()]);
        // Another class's hash or length: not this record.
        assert!(Record::decode(&mut record.clone(), 8, 1234).is_none());
        assert!(Record::decode(&mut record.clone(), 7, 1235).is_none());
        // Every cut is refused, and no changed byte makes the decoder panic.
        for cut in 0..record.len() {
            assert!(Record::decode(&mut record[..cut].to_vec(), 7, 1234).is_none(), "cut at {cut}");
        }
        for at in 0..record.len() {
            record[at] ^= 0xa5;
            if let Some(rec) = Record::decode(&mut record.clone(), 7, 1234) {
                let _ = rec.serve(&class, &mut Ids::default(), &mut Some(|parts: &[&[u8]]| parts.concat()));
            }
            record[at] ^= 0xa5;
        }
    }

    /// A site must belong to an earlier method call: a record whose calls say otherwise is
    /// refused when read, so none of its calls reaches a registry.
    #[test]
    fn records_with_sites_of_no_earlier_method_are_refused() {
        let method = sample().calls[0].clone();
        let site = |method| Call::Site { method, site: SiteInfo { kind: SiteKind::Call, bci: 3, line: 4, api: false, target: 5 } };
        let record = |calls: Vec<Call>| encode(7, 1234, &Relocatable { calls, slots: Vec::new(), ..sample() });
        assert!(Record::decode(&mut record(vec![method.clone(), Call::Reserve(1), site(0)]), 7, 1234).is_some());
        for calls in [
            vec![site(0), method.clone()],                  // before its method
            vec![method.clone(), site(1)],                  // of itself
            vec![method.clone(), site(0), site(1)],         // of a site
            vec![method.clone(), Call::Reserve(1), site(1)], // of a reservation
            vec![method.clone(), site(9)],                  // of no call
        ] {
            assert!(Record::decode(&mut record(calls.clone()), 7, 1234).is_none(), "{calls:?}");
        }
    }

    #[test]
    fn records_come_out_of_the_read_ahead_as_in_the_pack() {
        let pack = tempfile::tempfile().unwrap();
        // Records of 1 byte to more than a window, one after the other from offset 16.
        let lens = [1usize, 12, 5000, 70_000, 3, 64 << 10, 50_000, 7, 1, 4000];
        let total: usize = lens.iter().sum();
        let bytes: Vec<u8> = (0..total as u32).map(|i| (i * 7 + i / 251) as u8).collect();
        pack.write_all_at(&bytes, 16).unwrap();
        let mut records = Vec::new();
        let mut at = 0;
        for len in lens {
            records.push((Entry { offset: 16 + at as u64, len: len as u32, check: 0 }, &bytes[at..at + len]));
            at += len;
        }
        let r = Mutex::new(ReadAhead::default());
        let fills = || r.lock().unwrap().fills;
        let mut buf = vec![9; 3];
        let mut read = |i: usize| {
            let (e, want) = records[i];
            read_via(&r, &pack, e, &mut buf).expect("read");
            assert_eq!(buf, want, "record at {}", e.offset);
        };
        // In order: a window holds the first three; the fourth, longer than one, is read
        // straight into the buffer.
        for i in 0..4 {
            read(i);
        }
        // Two threads' reads side by side, one at the start and one further on: each keeps its
        // window, and the long record between took neither away.
        for (a, b) in [(0, 8), (5, 9), (1, 6), (2, 8), (0, 9)] {
            read(a);
            read(b);
        }
        assert_eq!(fills(), 2);
        // Backwards, all of them: two more windows, from records 7 and 4.
        for i in (0..records.len()).rev() {
            read(i);
        }
        assert_eq!(fills(), 4);
        // Past the end (the pack cut short): not read, by either way.
        for (offset, len) in [(16 + total as u64 - 1, 2), (16 + total as u64 - 100, 20_000), (u64::MAX, 1), (u64::MAX, 20_000)] {
            assert!(read_via(&r, &pack, Entry { offset, len, check: 0 }, &mut buf).is_none(), "{offset} {len}");
        }
    }

    #[test]
    fn an_unchanged_class_has_no_bytes() {
        let r = Relocatable { pieces: None, literal: Vec::new(), slots: Vec::new(), ..sample() };
        let mut record = encode(1, 2, &r);
        let rec = Record::decode(&mut record, 1, 2).expect("decodes");
        assert!(rec.pieces.is_none());
        let mut ids = Ids::default();
        let (out, report) = rec.serve(&[0, 0], &mut ids, &mut Some(|parts: &[&[u8]]| parts.concat())).expect("served");
        assert_eq!((out, report.methods_with_code, ids.0), (None, 3, 3));
    }
}
