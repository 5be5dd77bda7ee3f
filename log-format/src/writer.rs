//! The batching writer: producers hand records to a channel and never wait on disk; one thread
//! owns the database, packs records into blocks, and commits on request, on a timer and at close.
//! Only when the events waiting in the channel pass [`WriterOptions::max_queued_events`] does
//! a producer of events wait for the writer to catch up (back-pressure: without it a program
//! recording every method entry queued 9.7 GB of events).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use lucce_encoder::{GraphEvent, GraphSink, MethodId, MethodMeta, SiteId, SiteMeta};

use crate::backend::{Backend, SledBackend, Tree};
use crate::reader::{Commit, COMMIT_KEY, FORMAT_KEY, MAGIC_KEY};
use crate::records::{encode_block, encode_thread, BlockRecord, EventRecord, GraphRecord, MethodRecord, SiteRecord, ThreadRecord};
use crate::{StoreError, FORMAT_VERSION, MAGIC};

/// Tunables of a [`StoreWriter`].
#[derive(Debug, Clone, Copy)]
pub struct WriterOptions {
    /// How often pending records are committed when nobody asks (the most a crash can lose).
    pub flush_interval: Duration,
    /// Records per block. Each block is one zstd frame, and sled keeps up to 16 values in a
    /// page that it writes again as keys join it, so the size decides the store's: FOP with
    /// `sample=1` (310M events) and javac (38M graph records) made stores of 1.2 GB and 330 MB
    /// with blocks of 4096 records, 472 and 286 MB with 32768, 341 and 467 MB with 65536.
    pub block_records: usize,
    /// Frames of the JVM's own stacks (`EventRecord::truth`, verify mode) after which a block of
    /// events is cut short, so that a block of deep stacks stays a few MB for the writer and
    /// for every reader.
    pub block_frames: usize,
    /// sled's page cache (its default is 1 GiB; a writer needs little).
    pub cache_bytes: u64,
    /// Events that may wait in the channel before [`WriterHandle::events`] blocks.
    pub max_queued_events: u64,
    /// Bytes written after which the writer reopens the database (after a commit), so that
    /// sled lets go of its copies of what it wrote (it keeps them all while open, whatever
    /// `cache_bytes` says; see `SledBackend`). A reopen cost the writer thread 230–430 ms next to
    /// a busy JVM on two cores (FOP, `sample=10`; docs/agent.md, "Memory").
    pub reopen_after_bytes: u64,
    /// How long a close, or a producer waiting past the backlog limit, waits for a writer that
    /// handles nothing at all before giving up on it ([`WriterHandle::failure`] then says so).
    /// sled can wait forever inside a write (see `SledBackend::abandon`), and the agent must
    /// never hang the JVM it records.
    pub stall_limit: Duration,
}

impl Default for WriterOptions {
    fn default() -> Self {
        // About 100 bytes per queued event: 400 MB at most.
        WriterOptions { flush_interval: Duration::from_millis(200), block_records: 32768, block_frames: 1 << 16, cache_bytes: 16 << 20, max_queued_events: 4 << 20, reopen_after_bytes: 256 << 20, stall_limit: Duration::from_secs(60) }
    }
}

/// What a closed writer wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterReport {
    pub methods: u64,
    pub sites: u64,
    pub graph_events: u64,
    pub events: u64,
    pub threads: u64,
    pub commits: u64,
    pub bytes_on_disk: u64,
    /// The most events that were waiting in the channel at once.
    pub max_queued_events: u64,
    /// Times the database was reopened to free memory (see [`WriterOptions::reopen_after_bytes`]).
    pub reopens: u64,
}

/// The events sent but not yet taken by the writer, and a way to wait for that to shrink; and
/// what producers and the closer need to know of the writer: whether it still moves, and why it
/// stopped storing.
#[derive(Default)]
struct Backlog {
    queued: AtomicU64,
    max: AtomicU64,
    limit: u64,
    /// Set when the writer stops storing (its thread ended, a write failed, or it is stuck):
    /// nobody waits for it any more, and events are no longer sent.
    gone: AtomicBool,
    lock: Mutex<()>,
    shrunk: Condvar,
    /// Messages handled and commits made: a writer whose count stands still is stuck.
    progress: AtomicU64,
    stall_limit: Duration,
    /// Why the writer stopped storing, once a write failed or it got stuck.
    failure: OnceLock<String>,
}

impl Backlog {
    /// Counts `n` events about to be sent, before the send: the writer subtracts them only after
    /// it received them, so the count never drops below zero (which wrapped it around once the
    /// writer took a batch before its producer had added it). Returns the new count.
    fn count(&self, n: u64) -> u64 {
        let now = self.queued.fetch_add(n, Ordering::AcqRel) + n;
        self.max.fetch_max(now, Ordering::Relaxed);
        now
    }

    /// After a send that made the count `now`: waits while the count is past the limit.
    fn wait(&self, now: u64) {
        if now <= self.limit {
            return;
        }
        let waited = self.while_moving(|step| {
            let guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            if self.queued.load(Ordering::Acquire) <= self.limit || self.gone.load(Ordering::Acquire) {
                return true;
            }
            // The writer notifies under the lock; the timeout is for watching its progress.
            drop(self.shrunk.wait_timeout(guard, step));
            false
        });
        if let Err(why) = waited {
            self.fail(why);
        }
    }

    /// Calls `done(step)`, which waits at most `step` and says whether the wait is over, until it
    /// is; or, once the writer has handled nothing for the stall limit, says so.
    fn while_moving(&self, mut done: impl FnMut(Duration) -> bool) -> Result<(), String> {
        let mut seen = self.progress.load(Ordering::Acquire);
        let mut still_since = Instant::now();
        while !done(Duration::from_millis(100)) {
            let now = self.progress.load(Ordering::Acquire);
            if now != seen {
                seen = now;
                still_since = Instant::now();
            } else if still_since.elapsed() >= self.stall_limit {
                return Err(format!("the writer has handled nothing for {} s (stuck inside sled)", self.stall_limit.as_secs()));
            }
        }
        Ok(())
    }

    /// The writer stopped storing, for `why`: producers stop sending and waiting.
    fn fail(&self, why: String) {
        let _ = self.failure.set(why);
        self.stop();
    }

    fn taken(&self, n: u64) {
        let before = self.queued.fetch_sub(n, Ordering::AcqRel);
        if before > self.limit {
            let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.shrunk.notify_all();
        }
    }

    fn stop(&self) {
        self.gone.store(true, Ordering::Release);
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.shrunk.notify_all();
    }
}

enum Msg {
    Method(u32, MethodRecord),
    Site(u32, SiteRecord),
    /// A class's methods and sites, converted on the writer thread.
    MethodsAndSites(Vec<(MethodId, MethodMeta)>, Vec<(SiteId, SiteMeta)>),
    /// Graph records in version order (see [`Outbox`]).
    Graphs(Vec<GraphRecord>),
    Events(Vec<EventRecord>),
    Thread(u32, String),
    Token(u64, u32, u64, u64),
    Flush(Sender<Result<(), String>>),
    Close,
}

/// Graph records waiting in the outbox before they go to the writer as one message.
const GRAPH_BATCH: usize = 512;

/// The channel to the writer, and the graph records not sent yet. A graph record comes under
/// the encoder's lock, one at a time and for most entries that take the lock (javac logs 34M
/// anchors): with one channel message each, javac's writer thread had 24% of the run's CPU
/// samples, a third of them receiving and waking up (14% once batched). So they wait here, in
/// order, and every other message first sends them: whatever a producer sends after it has seen
/// a graph version (an event, a token, a flush, the close) reaches the writer after that
/// version's record, as with one message each. At most `GRAPH_BATCH - 1` records wait, and only
/// while nothing else is sent (the close sends them too).
struct Outbox {
    tx: Sender<Msg>,
    graph: Mutex<Vec<GraphRecord>>,
}

impl Outbox {
    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<GraphRecord>> {
        self.graph.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends the waiting graph records, if any (the caller holds the outbox's lock).
    fn send_graph(&self, pending: &mut Vec<GraphRecord>) {
        if !pending.is_empty() {
            let batch = std::mem::replace(pending, Vec::with_capacity(GRAPH_BATCH));
            let _ = self.tx.send(Msg::Graphs(batch));
        }
    }

    /// Sends `msg` after the waiting graph records. False when the writer is gone.
    fn send(&self, msg: Msg) -> bool {
        let mut pending = self.pending();
        self.send_graph(&mut pending);
        self.tx.send(msg).is_ok()
    }

    fn graph(&self, record: GraphRecord) {
        let mut pending = self.pending();
        pending.push(record);
        if pending.len() >= GRAPH_BATCH {
            self.send_graph(&mut pending);
        }
    }
}

/// A cheap, cloneable way to send records to the writer from any thread. It is the encoder's
/// [`GraphSink`].
#[derive(Clone)]
pub struct WriterHandle {
    out: Arc<Outbox>,
    next_thread: Arc<AtomicU32>,
    backlog: Arc<Backlog>,
}

impl WriterHandle {
    /// Records one event; its sequence number is its arrival order at the writer.
    pub fn event(&self, e: EventRecord) {
        self.events(vec![e]);
    }

    /// Records a batch of events (cheaper than one by one). Dropped once the writer has stopped
    /// storing ([`WriterHandle::failure`]).
    pub fn events(&self, batch: Vec<EventRecord>) {
        if !batch.is_empty() && !self.backlog.gone.load(Ordering::Acquire) {
            let n = batch.len() as u64;
            let now = self.backlog.count(n);
            if self.out.send(Msg::Events(batch)) {
                self.backlog.wait(now);
            } else {
                self.backlog.taken(n);
            }
        }
    }

    /// Registers a thread and returns its id for [`EventRecord::thread`].
    pub fn thread(&self, name: &str) -> u32 {
        let id = self.next_thread.fetch_add(1, Ordering::Relaxed);
        let _ = self.out.send(Msg::Thread(id, name.to_string()));
        id
    }

    /// Records what a context token stands for: the site and context ⟨c, v⟩ of its frame.
    pub fn token(&self, token: u64, site: u32, c: u64, v: u64) {
        let _ = self.out.send(Msg::Token(token, site, c, v));
    }

    /// Why the writer stopped storing, once it has: a write failed (a full disk, say) or it got
    /// stuck. The store keeps what its last commit held; later records are dropped.
    pub fn failure(&self) -> Option<String> {
        self.backlog.failure.get().cloned()
    }

    /// Blocks until everything sent before this call is durable and committed (or the writer
    /// has handled nothing for the stall limit).
    pub fn flush(&self) -> Result<(), StoreError> {
        let (ack_tx, ack_rx) = bounded(1);
        if !self.out.send(Msg::Flush(ack_tx)) {
            return Err(StoreError::WriterGone("closed".into()));
        }
        let mut answer = None;
        let waited = self.backlog.while_moving(|step| match ack_rx.recv_timeout(step) {
            Err(RecvTimeoutError::Timeout) => false,
            got => {
                answer = Some(got);
                true
            }
        });
        match (waited, answer) {
            (Err(why), _) => Err(StoreError::WriterGone(why)),
            (_, Some(Ok(Ok(())))) => Ok(()),
            (_, Some(Ok(Err(e)))) => Err(StoreError::WriterGone(e)),
            _ => Err(StoreError::WriterGone("the writer thread stopped".into())),
        }
    }
}

impl GraphSink for WriterHandle {
    fn method(&self, id: MethodId, meta: &MethodMeta) {
        let _ = self.out.send(Msg::Method(id.0, meta.into()));
    }
    fn site(&self, id: SiteId, meta: &SiteMeta) {
        let _ = self.out.send(Msg::Site(id.0, meta.into()));
    }
    fn graph(&self, event: &GraphEvent) {
        self.out.graph(event.into());
    }
    fn methods_and_sites(&self, methods: Vec<(MethodId, MethodMeta)>, sites: Vec<(SiteId, SiteMeta)>) {
        let _ = self.out.send(Msg::MethodsAndSites(methods, sites));
    }
}

/// Owns the writer thread of one new store.
pub struct StoreWriter {
    handle: WriterHandle,
    join: Option<JoinHandle<Result<WriterReport, StoreError>>>,
    /// Disconnected when the writer thread ends.
    ended: Receiver<()>,
    path: PathBuf,
}

impl StoreWriter {
    /// Creates a new store in `dir`, which must not exist or be an empty directory.
    pub fn create(dir: &Path, opts: WriterOptions) -> Result<StoreWriter, StoreError> {
        if dir.exists() {
            let empty = dir.is_dir() && std::fs::read_dir(dir)?.next().is_none();
            if !empty {
                return Err(StoreError::AlreadyExists { path: dir.to_path_buf() });
            }
        }
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // Only the process that made the directory may remove it (another JVM given the same
        // `out` may be writing its store there).
        let made_dir = match std::fs::create_dir(dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(e.into()),
        };
        let backend = match Self::begin(dir, &opts) {
            Ok(b) => b,
            Err(e) => {
                // No half-made store left behind (a full disk fails here): readers would take
                // it for a broken store.
                if made_dir {
                    let _ = std::fs::remove_dir_all(dir);
                }
                return Err(e);
            }
        };
        let (tx, rx) = unbounded();
        let backlog = Arc::new(Backlog { limit: opts.max_queued_events, stall_limit: opts.stall_limit, ..Backlog::default() });
        let theirs = backlog.clone();
        let (ending, ended) = bounded::<()>(0);
        let join = std::thread::Builder::new().name("lucce-writer".into()).spawn(move || {
            // However the thread ends (a panic included), producers stop waiting for it, and
            // the closer learns it (`_ending` is dropped).
            struct Stop {
                backlog: Arc<Backlog>,
                _ending: Sender<()>,
            }
            impl Drop for Stop {
                fn drop(&mut self) {
                    self.backlog.stop();
                }
            }
            let _stop = Stop { backlog: theirs.clone(), _ending: ending };
            WriterThread::new(backend, opts, theirs).run(rx)
        })?;
        Ok(StoreWriter {
            handle: WriterHandle {
                out: Arc::new(Outbox { tx, graph: Mutex::new(Vec::with_capacity(GRAPH_BATCH)) }),
                next_thread: Arc::new(AtomicU32::new(0)),
                backlog,
            },
            join: Some(join),
            ended,
            path: dir.to_path_buf(),
        })
    }

    /// Opens the new database and writes its header, durably.
    fn begin(dir: &Path, opts: &WriterOptions) -> Result<SledBackend, StoreError> {
        // Blocks come compressed (records.rs): sled compressing its pages again would cost CPU.
        let backend = SledBackend::open(dir, opts.cache_bytes, false)?;
        let header = (|| {
            backend.put(Tree::Header, MAGIC_KEY, MAGIC)?;
            backend.put(Tree::Header, FORMAT_KEY, &FORMAT_VERSION.to_be_bytes())?;
            backend.put(Tree::Header, COMMIT_KEY, &Commit::default().encode())?;
            backend.flush()
        })();
        match header {
            Ok(()) => {
                backend.set_reopen_after(opts.reopen_after_bytes);
                Ok(backend)
            }
            Err(e) => {
                backend.abandon(); // as after any failed write (`WriterThread::fail`)
                Err(e)
            }
        }
    }

    pub fn handle(&self) -> WriterHandle {
        self.handle.clone()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Commits everything sent so far and waits until it is durable.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.handle.flush()
    }

    /// Commits everything, marks the store as closed cleanly and stops the writer thread.
    pub fn close(mut self) -> Result<WriterReport, StoreError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<WriterReport, StoreError> {
        let _ = self.handle.out.send(Msg::Close);
        let Some(join) = self.join.take() else { return Err(StoreError::WriterGone("already closed".into())) };
        let backlog = &self.handle.backlog;
        let ended = backlog.while_moving(|step| !matches!(self.ended.recv_timeout(step), Err(RecvTimeoutError::Timeout)));
        if let Err(why) = ended {
            // Left behind: joining it would hang this thread as well.
            backlog.fail(why.clone());
            return Err(StoreError::WriterGone(why));
        }
        join.join().unwrap_or_else(|_| Err(StoreError::WriterGone("the writer thread panicked".into())))
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        if self.join.is_some() {
            let _ = self.stop();
        }
    }
}

/// Records of one stream not yet written as a block.
struct Pending<T> {
    tree: Tree,
    written: u64,
    buf: Vec<T>,
    /// Verification frames in `buf` (events only).
    frames: usize,
    /// Records that arrived before a lower id of the same stream, by id: method and site ids are
    /// reserved by one thread and published by another, so their records may arrive out of
    /// order (a location site defined on one thread while a class whose ids come first is still
    /// being rewritten on another). They join `buf` once the ids below them have arrived.
    early: BTreeMap<u64, T>,
}

impl<T: BlockRecord> Pending<T> {
    fn new(tree: Tree) -> Self {
        Pending { tree, written: 0, buf: Vec::new(), frames: 0, early: BTreeMap::new() }
    }

    /// At close: an early record whose lower ids never came (the store cannot hold it).
    fn unfilled_gap(&self) -> Option<String> {
        let id = self.early.keys().next()?;
        Some(format!("{:?} record {id} arrived but the ids below it did not", self.tree))
    }

    fn next_id(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    fn write_block(&mut self, db: &dyn Backend) -> Result<(), StoreError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        db.put(self.tree, &self.written.to_be_bytes(), &encode_block(&self.buf))?;
        self.written += self.buf.len() as u64;
        // Not `clear`: a commit writes what came in its interval, and a buffer kept at its
        // largest block's capacity held 2.8 MB for the rest of fop's run (scripts/agent_heap.sh).
        self.buf = Vec::new();
        self.frames = 0;
        Ok(())
    }
}

struct WriterThread {
    db: SledBackend,
    opts: WriterOptions,
    backlog: Arc<Backlog>,
    methods: Pending<MethodRecord>,
    sites: Pending<SiteRecord>,
    graph: Pending<GraphRecord>,
    events: Pending<EventRecord>,
    threads: u64,
    commits: u64,
    dirty: bool,
    /// A sled call failed: the database is left as it is at the end (`SledBackend::abandon`).
    db_in_doubt: bool,
}

impl WriterThread {
    fn new(db: SledBackend, opts: WriterOptions, backlog: Arc<Backlog>) -> Self {
        WriterThread {
            db,
            opts,
            backlog,
            methods: Pending::new(Tree::Methods),
            sites: Pending::new(Tree::Sites),
            graph: Pending::new(Tree::Graph),
            events: Pending::new(Tree::Events),
            threads: 0,
            commits: 0,
            dirty: false,
            db_in_doubt: false,
        }
    }

    fn run(mut self, rx: Receiver<Msg>) -> Result<WriterReport, StoreError> {
        let mut next_commit = Instant::now() + self.opts.flush_interval;
        loop {
            let msg = rx.recv_timeout(next_commit.saturating_duration_since(Instant::now()));
            match msg {
                Ok(Msg::Flush(ack)) => {
                    self.commit(false);
                    self.backlog.progress.fetch_add(1, Ordering::Release);
                    let _ = ack.send(self.backlog.failure.get().cloned().map_or(Ok(()), Err));
                    self.release_memory();
                }
                Ok(Msg::Close) | Err(RecvTimeoutError::Disconnected) => {
                    // Disconnected: every handle is gone without a close; still commit what came.
                    let clean = matches!(msg, Ok(Msg::Close));
                    if let Some(gap) = self.methods.unfilled_gap().or_else(|| self.sites.unfilled_gap()).or_else(|| self.graph.unfilled_gap()).or_else(|| self.events.unfilled_gap()) {
                        self.fail(StoreError::WriterGone(gap));
                    }
                    self.commit(clean);
                    let report = WriterReport {
                        methods: self.methods.written,
                        sites: self.sites.written,
                        graph_events: self.graph.written,
                        events: self.events.written,
                        threads: self.threads,
                        commits: self.commits,
                        bytes_on_disk: self.db.size_on_disk().unwrap_or(0),
                        max_queued_events: self.backlog.max.load(Ordering::Relaxed),
                        reopens: self.db.reopens(),
                    };
                    if self.db_in_doubt {
                        self.db.abandon();
                    } else {
                        // Returns once sled has let go of the files: the store can be opened at once.
                        drop(self.db);
                    }
                    return match self.backlog.failure.get() {
                        Some(e) => Err(StoreError::WriterGone(e.clone())),
                        None => Ok(report),
                    };
                }
                Ok(m) => {
                    if let Msg::Events(batch) = &m {
                        self.backlog.taken(batch.len() as u64);
                    }
                    if let Err(e) = self.accept(m) {
                        self.fail(e);
                    }
                    self.backlog.progress.fetch_add(1, Ordering::Release);
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= next_commit {
                if self.dirty {
                    self.commit(false);
                    self.release_memory();
                }
                next_commit = Instant::now() + self.opts.flush_interval;
            }
        }
    }

    fn accept(&mut self, msg: Msg) -> Result<(), StoreError> {
        if self.failed() {
            return Ok(());
        }
        self.dirty = true;
        let block = self.opts.block_records;
        let db = &self.db;
        match msg {
            Msg::Method(id, r) => push_dense(&mut self.methods, id as u64, r, block, db),
            Msg::Site(id, r) => push_dense(&mut self.sites, id as u64, r, block, db),
            Msg::MethodsAndSites(methods, sites) => {
                for (id, m) in methods {
                    push_dense(&mut self.methods, id.0 as u64, m.into(), block, db)?;
                }
                for (id, s) in sites {
                    push_dense(&mut self.sites, id.0 as u64, (&s).into(), block, db)?;
                }
                Ok(())
            }
            Msg::Graphs(batch) => {
                for r in batch {
                    let id = r.version().wrapping_sub(1);
                    push_dense(&mut self.graph, id, r, block, db)?;
                }
                Ok(())
            }
            Msg::Events(batch) => {
                for e in batch {
                    let id = self.events.next_id();
                    // Counted before it joins `buf`: a full block written now resets the count.
                    self.events.frames += e.truth.as_ref().map_or(0, Vec::len);
                    push_dense(&mut self.events, id, e, block, db)?;
                    if self.events.frames >= self.opts.block_frames {
                        self.events.write_block(db)?;
                    }
                }
                Ok(())
            }
            Msg::Thread(id, name) => {
                self.threads += 1;
                db.put(Tree::Threads, &id.to_be_bytes(), &encode_thread(&ThreadRecord { name }))
            }
            Msg::Token(token, site, c, v) => {
                let mut value = [0u8; 20];
                value[..4].copy_from_slice(&site.to_be_bytes());
                value[4..12].copy_from_slice(&c.to_be_bytes());
                value[12..].copy_from_slice(&v.to_be_bytes());
                db.put(Tree::Tokens, &token.to_be_bytes(), &value)
            }
            Msg::Flush(_) | Msg::Close => Ok(()),
        }
    }

    /// After a commit that succeeded (not at close, and after a flush's answer, so that nobody
    /// waits for a reopen): lets sled drop what it holds once enough was written
    /// ([`WriterOptions::reopen_after_bytes`]).
    fn release_memory(&self) {
        if !self.failed() {
            self.db.release_memory();
        }
    }

    /// Blocks first, durable; then the mark that says they are complete, durable.
    fn commit(&mut self, clean: bool) {
        if self.failed() {
            return;
        }
        let result = (|| {
            self.methods.write_block(&self.db)?;
            self.sites.write_block(&self.db)?;
            self.graph.write_block(&self.db)?;
            self.events.write_block(&self.db)?;
            self.db.flush()?;
            let mark = Commit {
                methods: self.methods.written,
                sites: self.sites.written,
                graph: self.graph.written,
                events: self.events.written,
                clean,
            };
            self.db.put(Tree::Header, COMMIT_KEY, &mark.encode())?;
            self.db.flush()
        })();
        match result {
            Ok(()) => {
                self.commits += 1;
                self.dirty = false;
            }
            Err(e) => self.fail(e),
        }
    }

    /// A write failed, or the records make no store: nothing more is written (the store keeps
    /// its last commit), and producers learn why (the first failure is the one kept).
    fn fail(&mut self, e: StoreError) {
        // Anything but the writer's own complaint about the records came from sled.
        self.db_in_doubt |= !matches!(e, StoreError::WriterGone(_));
        self.backlog.fail(e.to_string());
    }

    /// Whether the writer has stopped storing: a write failed here, or producers or the closer
    /// gave up on it as stuck (and drop what they would send since).
    fn failed(&self) -> bool {
        self.backlog.failure.get().is_some()
    }
}

/// Appends a record of a dense stream: ids must arrive each exactly once. One ahead of the next
/// id waits in `early` until the ids below it have come (at most `MAX_EARLY` records); an id
/// that came already means a producer bug and would make the store undecodable, so it stops
/// the writer with an error, as does a gap that never closes.
fn push_dense<T: BlockRecord>(p: &mut Pending<T>, id: u64, r: T, block: usize, db: &dyn Backend) -> Result<(), StoreError> {
    const MAX_EARLY: usize = 1 << 20;
    if id != p.next_id() {
        if id < p.next_id() || p.early.len() >= MAX_EARLY || p.early.insert(id, r).is_some() {
            return Err(StoreError::WriterGone(format!("{:?} record {id} arrived where {} was expected", p.tree, p.next_id())));
        }
        return Ok(());
    }
    p.buf.push(r);
    while let Some(r) = p.early.remove(&p.next_id()) {
        p.buf.push(r);
    }
    if p.buf.len() >= block {
        p.write_block(db)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::EventKind;

    /// A writer creating the store `s` in a new temporary directory (kept alive by the caller).
    fn new_store(opts: WriterOptions) -> (tempfile::TempDir, PathBuf, StoreWriter) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let writer = StoreWriter::create(&path, opts).unwrap();
        (dir, path, writer)
    }

    #[test]
    fn a_written_block_gives_its_buffer_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = SledBackend::open(dir.path(), 1 << 20, false).unwrap();
        let mut sites = Pending::new(Tree::Sites);
        for id in 0..1000 {
            push_dense(&mut sites, id, SiteRecord { method: 0, kind: 0, bci: id as u32, line: -1 }, 1 << 20, &db).unwrap();
        }
        assert!(sites.buf.capacity() >= 1000);
        sites.write_block(&db).unwrap();
        assert_eq!((sites.written, sites.buf.capacity()), (1000, 0));
        // The stream goes on from there.
        push_dense(&mut sites, 1000, SiteRecord { method: 0, kind: 0, bci: 0, line: -1 }, 1 << 20, &db).unwrap();
        assert_eq!(sites.next_id(), 1001);
    }

    #[test]
    fn producers_wait_for_the_writer_past_the_backlog_limit_and_nothing_is_lost() {
        const PRODUCERS: u64 = 4;
        const BATCHES: u64 = 2_000;
        const BATCH: u64 = 8;
        const LIMIT: u64 = 64;
        let (_dir, _, writer) = new_store(WriterOptions { max_queued_events: LIMIT, ..WriterOptions::default() });
        std::thread::scope(|s| {
            for t in 0..PRODUCERS {
                let h = writer.handle();
                s.spawn(move || {
                    for _ in 0..BATCHES {
                        let e = EventRecord { thread: t as u32, kind: EventKind::Mark, site: 0, c: 0, v: 0, label: None, truth: None };
                        h.events(vec![e; BATCH as usize]);
                    }
                });
            }
        });
        let report = writer.close().unwrap();
        assert_eq!(report.events, PRODUCERS * BATCHES * BATCH);
        // Each producer adds its batch before it checks the limit.
        assert!(report.max_queued_events <= LIMIT + PRODUCERS * BATCH, "backlog reached {}", report.max_queued_events);
        assert!(report.max_queued_events > 0);
    }

    /// A write that fails (here sled cannot make the blob file of a large block: the store's
    /// directory of blobs has become a file) stops the writer: producers and the close learn why,
    /// later events are dropped, and the store keeps what was committed before. With sled 0.34
    /// dropping the database after such a write waited forever, and so did the JVM's exit.
    #[test]
    fn a_failed_write_stops_the_writer_without_hanging_and_keeps_the_committed_part() {
        use crate::records::TruthFrame;
        let (dir, path, writer) = new_store(WriterOptions::default());
        let h = writer.handle();
        let event = |i: u64, truth| EventRecord { thread: 0, kind: EventKind::Mark, site: i as u32, c: i, v: 1, label: None, truth };
        h.events((0..100).map(|i| event(i, None)).collect());
        writer.flush().unwrap();
        let blobs = path.join("blobs");
        std::fs::remove_dir_all(&blobs).unwrap();
        std::fs::write(&blobs, b"").unwrap();
        // Names that do not compress: each block of 65,536 frames is far above sled's threshold.
        let frames = |i: u64| {
            let name = |k: u64| format!("c{:x}", (i * 2000 + k).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            Some((0..2000).map(|k| TruthFrame { class: name(k), method: "m".into(), file: None, line: k as i32 }).collect())
        };
        h.events((100..200).map(|i| event(i, frames(i))).collect());
        let failed = writer.flush().expect_err("a flush after a failed write").to_string();
        let why = h.failure().expect("the failure, for producers");
        assert!(failed.contains(&why), "{failed} / {why}");
        h.events(vec![event(200, None)]);
        assert_eq!(h.backlog.queued.load(Ordering::Relaxed), 0, "an event queued after the failure");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(writer.close().map_err(|e| e.to_string())));
        let closed = rx.recv_timeout(Duration::from_secs(120)).expect("the close hung");
        assert!(closed.expect_err("a close after a failed write").contains(&why));
        // This process still holds sled's lock on the abandoned store: read a copy.
        let copy = dir.path().join("copy");
        std::fs::create_dir_all(copy.join("blobs")).unwrap();
        for f in ["conf", "db"] {
            std::fs::copy(path.join(f), copy.join(f)).unwrap();
        }
        let reader = crate::StoreReader::open(&copy).unwrap();
        assert!(!reader.commit().clean);
        let got: Vec<EventRecord> = reader.events().map(|r| r.unwrap().1).collect();
        assert_eq!(got, (0..100).map(|i| event(i, None)).collect::<Vec<_>>());
    }

    /// The close and producers past the backlog wait for a writer as long as it handles
    /// something, however long that takes, and give up on one that handles nothing for the stall
    /// limit (the sleeps stand for the writer's work, not for synchronization).
    #[test]
    fn a_writer_that_moves_is_waited_for_and_one_that_does_not_is_given_up() {
        let backlog = Backlog { stall_limit: Duration::from_millis(300), ..Backlog::default() };
        let mut steps = 0;
        let moving = backlog.while_moving(|_| {
            steps += 1;
            std::thread::sleep(Duration::from_millis(50));
            backlog.progress.fetch_add(1, Ordering::Release);
            steps == 20
        });
        assert_eq!((moving, steps), (Ok(()), 20));
        let stuck = backlog.while_moving(|step| {
            std::thread::sleep(step);
            false
        });
        assert!(stuck.expect_err("a writer that handles nothing").contains("handled nothing"));
    }

    #[test]
    fn methods_may_arrive_out_of_order_and_are_stored_in_id_order() {
        let (_dir, path, writer) = new_store(WriterOptions::default());
        let h = writer.handle();
        let meta = |name: &str| MethodMeta { class: "T".into(), name: name.into(), descriptor: "()V".into(), source_file: None, access_flags: 0 };
        for id in [2u32, 0, 3, 1] {
            h.method(MethodId(id), &meta(&format!("m{id}")));
        }
        assert_eq!(writer.close().unwrap().methods, 4);
        let names: Vec<String> = crate::StoreReader::open(&path).unwrap().methods().unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["m0", "m1", "m2", "m3"]);
    }

    #[test]
    fn events_with_deep_stacks_are_cut_into_smaller_blocks() {
        use crate::records::TruthFrame;
        let (_dir, path, writer) = new_store(WriterOptions { block_records: 100, block_frames: 50, ..WriterOptions::default() });
        let h = writer.handle();
        // 10 frames every third event: a block holds at most 50 frames' worth, about 13 events
        // (plain events count for nothing), where 100 events would fit otherwise.
        let event = |i: u64| {
            let truth = i.is_multiple_of(3).then(|| vec![TruthFrame { class: "a.B".into(), method: "m".into(), file: None, line: i as i32 }; 10]);
            EventRecord { thread: 0, kind: EventKind::Mark, site: i as u32, c: i, v: 1, label: None, truth }
        };
        h.events((0..300).map(event).collect());
        writer.close().unwrap();
        let reader = crate::StoreReader::open(&path).unwrap();
        let blocks: Vec<u64> = reader.backend().scan_from(Tree::Events, &[]).map(|kv| u64::from_be_bytes(kv.unwrap().0.try_into().unwrap())).collect();
        let sizes: Vec<u64> = blocks.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(blocks.len() >= 300 / 15, "{} blocks: {blocks:?}", blocks.len());
        assert!(sizes.iter().all(|&n| n <= 15), "block sizes {sizes:?}");
        let got: Vec<EventRecord> = reader.events().map(|r| r.unwrap().1).collect();
        assert_eq!(got, (0..300).map(event).collect::<Vec<_>>());
    }

    #[test]
    fn reopening_after_commits_loses_nothing() {
        const COMMITS: u64 = 20;
        const PER_COMMIT: u64 = 50;
        // Reopens after every commit that wrote anything; blocks of 16 so that most are full.
        let (_dir, path, writer) = new_store(WriterOptions { block_records: 16, reopen_after_bytes: 1, ..WriterOptions::default() });
        let h = writer.handle();
        let event = |i: u64| EventRecord { thread: 0, kind: EventKind::Mark, site: i as u32, c: i, v: 1, label: Some(format!("e{i}")), truth: None };
        for k in 0..COMMITS {
            h.events((k * PER_COMMIT..(k + 1) * PER_COMMIT).map(event).collect());
            writer.flush().unwrap();
        }
        let report = writer.close().unwrap();
        assert!(report.reopens >= COMMITS, "{} reopens", report.reopens);
        let got: Vec<EventRecord> = crate::StoreReader::open(&path).unwrap().events().map(|r| r.unwrap().1).collect();
        assert_eq!(got, (0..COMMITS * PER_COMMIT).map(event).collect::<Vec<_>>());
    }

    #[test]
    fn graph_records_are_stored_in_version_order_with_the_ones_still_waiting_at_close() {
        let (_dir, path, writer) = new_store(WriterOptions::default());
        let h = writer.handle();
        // Two whole batches and a part that is still in the outbox when the writer closes.
        let n = 2 * GRAPH_BATCH as u64 + 5;
        for v in 1..=n {
            h.graph(&GraphEvent::NumCC { version: v, method: MethodId(0), numcc: v });
        }
        assert_eq!(writer.close().unwrap().graph_events, n);
        let versions: Vec<u64> = crate::StoreReader::open(&path).unwrap().graph().map(|r| r.unwrap().version()).collect();
        assert_eq!(versions, (1..=n).collect::<Vec<_>>());
    }

    #[test]
    fn a_gap_that_never_closes_is_an_error() {
        let (_dir, _, writer) = new_store(WriterOptions::default());
        let meta = MethodMeta { class: "T".into(), name: "m".into(), descriptor: "()V".into(), source_file: None, access_flags: 0 };
        writer.handle().method(MethodId(1), &meta);
        let err = writer.close().unwrap_err().to_string();
        assert!(err.contains("record 1 arrived but the ids below it did not"), "{err}");
    }

    #[test]
    fn a_stopped_writer_releases_a_producer_waiting_past_the_limit() {
        let backlog = Arc::new(Backlog { limit: 1, ..Backlog::default() });
        let producer = {
            let b = backlog.clone();
            // Past the limit, with nobody taking: this waits until `stop` (before or after).
            std::thread::spawn(move || b.wait(b.count(10)))
        };
        backlog.stop();
        producer.join().unwrap();
        assert_eq!(backlog.queued.load(Ordering::Relaxed), 10);
        assert_eq!(backlog.max.load(Ordering::Relaxed), 10);
    }
}
