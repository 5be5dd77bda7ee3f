//! Reading a store: the header is checked on open; streams are read up to the commit mark.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use rkyv::util::AlignedVec;

use crate::backend::{Backend, KeyValue, SharedScan, SledBackend, Tree};
use crate::records::{decode_block, decode_event_cores, decode_thread, BlockRecord, EventCore, EventRecord, GraphRecord, MethodRecord, SiteRecord, ThreadRecord, BLOCK_HEADER};
use crate::{StoreError, FORMAT_VERSION, MAGIC, OLDEST_READABLE_FORMAT};

pub(crate) const MAGIC_KEY: &[u8] = b"magic";
pub(crate) const FORMAT_KEY: &[u8] = b"format";
pub(crate) const COMMIT_KEY: &[u8] = b"commit";

/// The commit mark: how many records of each stream are complete and durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Commit {
    pub methods: u64,
    pub sites: u64,
    /// Graph events; the newest committed graph version equals this count.
    pub graph: u64,
    pub events: u64,
    /// The writer closed the store itself (false after a crash or a kill).
    pub clean: bool,
}

impl Commit {
    const LEN: usize = 33;

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        for n in [self.methods, self.sites, self.graph, self.events] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        out.push(self.clean as u8);
        out
    }

    fn decode(b: &[u8]) -> Option<Commit> {
        if b.len() != Self::LEN || b[32] > 1 {
            return None;
        }
        let n = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Some(Commit { methods: n(0), sites: n(1), graph: n(2), events: n(3), clean: b[32] == 1 })
    }
}

/// Records present in the store past the commit mark: written by a process that stopped before
/// it could commit them. They are never read as data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TailReport {
    pub methods: u64,
    pub sites: u64,
    pub graph: u64,
    pub events: u64,
    /// A block past the mark whose header is unreadable.
    pub damaged: bool,
}

impl TailReport {
    pub fn is_empty(&self) -> bool {
        *self == TailReport::default()
    }
}

/// Whether `dir` has the files of a sled database (opening one would create them).
fn has_database_files(dir: &Path) -> bool {
    dir.join("conf").is_file() && dir.join("db").is_file()
}

/// The directories right below `dir` that have a store's database files, sorted: the stores
/// that `out=DIR/%p` (and `lucce record --out DIR`) gives each JVM.
pub fn stores_below(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir() && has_database_files(p)).collect();
    found.sort();
    found
}

/// An open store, for reading.
pub struct StoreReader {
    db: SledBackend,
    commit: Commit,
    path: PathBuf,
}

impl StoreReader {
    /// Opens the store in `dir`, refusing with a clear error anything that is not a complete
    /// store of a format version this build reads.
    pub fn open(dir: &Path) -> Result<StoreReader, StoreError> {
        let path = dir.to_path_buf();
        let not_a_store = |why: &str| StoreError::NotAStore { path: path.clone(), why: why.to_string() };
        if !dir.exists() {
            return Err(StoreError::NotFound { path });
        }
        if !dir.is_dir() {
            return Err(not_a_store("a file, not a store directory"));
        }
        if std::fs::read_dir(dir)?.next().is_none() {
            return Err(not_a_store("empty directory"));
        }
        // Opening with sled would create a database where there is none: look first.
        if !has_database_files(dir) {
            // `lucce record --out DIR` and `out=DIR/%p` give each JVM its own store below DIR.
            let below = stores_below(dir);
            if below.is_empty() {
                return Err(not_a_store("no database files"));
            }
            let shown: Vec<String> = below.iter().take(5).map(|p| p.display().to_string()).collect();
            let more = if below.len() > shown.len() { format!(" and {} more", below.len() - shown.len()) } else { String::new() };
            return Err(not_a_store(&format!(
                "it holds the stores of {} JVM run(s), one per process: {}{more}; pass one of them",
                below.len(),
                shown.join(", ")
            )));
        }
        // Readers scan every block once; a larger page cache saves re-reading sled pages (and,
        // in a format-4 store, decompressing them again). It is an upper bound, filled only as
        // pages are touched.
        let db = match SledBackend::open(dir, 64 << 20, false) {
            // Compressed pages: a store of formats 2 to 4 (or not ours); its header says which.
            Err(StoreError::Backend(e)) if e.contains("compression") => SledBackend::open(dir, 64 << 20, true),
            other => other,
        }
        .map_err(|e| match e {
            // sled locks the database file of an open store (its message, through an io::Error).
            StoreError::Backend(e) if e.contains("could not acquire lock") => StoreError::InUse { path: path.clone() },
            e => e,
        })?;
        match db.get(Tree::Header, MAGIC_KEY)? {
            Some(m) if m == MAGIC => {}
            Some(_) => return Err(not_a_store("wrong magic")),
            None => return Err(not_a_store("no lucce header")),
        }
        let format = db.get(Tree::Header, FORMAT_KEY)?.ok_or_else(|| StoreError::Corrupt("no format version".into()))?;
        let found = u32::from_be_bytes(format.as_slice().try_into().map_err(|_| StoreError::Corrupt("bad format version record".into()))?);
        if !(OLDEST_READABLE_FORMAT..=FORMAT_VERSION).contains(&found) {
            return Err(StoreError::WrongFormat { path, found, oldest: OLDEST_READABLE_FORMAT, newest: FORMAT_VERSION });
        }
        let commit = db
            .get(Tree::Header, COMMIT_KEY)?
            .and_then(|b| Commit::decode(&b))
            .ok_or_else(|| StoreError::Corrupt("missing or damaged commit mark".into()))?;
        let reader = StoreReader { db, commit, path };
        // Readers size their work by the commit mark (the CCT builder's packets): a damaged one
        // that counts past the stream is refused here, not met as an allocation of petabytes.
        if let Some(last) = commit.events.checked_sub(1) {
            match reader.events_range(last..commit.events).next() {
                Some(Ok(_)) => {}
                Some(Err(StoreError::Corrupt(_))) | None => {
                    return Err(StoreError::Corrupt(format!("the commit mark says {} events, but event {last} is not in the store", commit.events)))
                }
                Some(Err(e)) => return Err(e),
            }
        }
        Ok(reader)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The database under the store (for its memory knobs: [`SledBackend::set_reopen_after`]).
    pub fn backend(&self) -> &SledBackend {
        &self.db
    }

    pub fn commit(&self) -> Commit {
        self.commit
    }

    /// Every committed method, by id.
    pub fn methods(&self) -> Result<Vec<MethodRecord>, StoreError> {
        self.stream::<MethodRecord>(Tree::Methods, 0, self.commit.methods).map(|r| r.map(|(_, m)| m)).collect()
    }

    /// Every committed site, by id.
    pub fn sites(&self) -> Result<Vec<SiteRecord>, StoreError> {
        self.stream::<SiteRecord>(Tree::Sites, 0, self.commit.sites).map(|r| r.map(|(_, s)| s)).collect()
    }

    /// One method by id.
    pub fn method(&self, id: u32) -> Result<Option<MethodRecord>, StoreError> {
        self.stream::<MethodRecord>(Tree::Methods, id as u64, self.commit.methods.min(id as u64 + 1)).next().transpose().map(|r| r.map(|(_, m)| m))
    }

    /// Committed graph events in version order (version = index + 1).
    pub fn graph(&self) -> impl Iterator<Item = Result<GraphRecord, StoreError>> + '_ {
        self.stream::<GraphRecord>(Tree::Graph, 0, self.commit.graph).map(|r| r.map(|(_, g)| g))
    }

    /// Committed events in sequence order, with their sequence numbers.
    pub fn events(&self) -> EventIter<'_> {
        self.events_range(0..self.commit.events)
    }

    /// Committed events with sequence numbers in `range`.
    pub fn events_range(&self, range: std::ops::Range<u64>) -> EventIter<'_> {
        self.stream::<EventRecord>(Tree::Events, range.start, range.end.min(self.commit.events))
    }

    /// The committed event blocks whose *first* sequence number lies in `starts`, read without
    /// building [`EventRecord`]s or copying them out of the database (see [`EventBlocks::next_block`]). Every block starts in exactly
    /// one of a set of ranges that partition `0..commit().events`, so such ranges read each
    /// block once, by one reader, and together cover every event: the parallel CCT builder's
    /// packets. Blocks are checked to be contiguous within one call; a caller that splits the
    /// stream checks with [`EventBlocks::extent`] that the pieces tile it.
    pub fn event_blocks(&self, starts: std::ops::Range<u64>) -> EventBlocks<'_> {
        let limit = self.commit.events;
        let until = starts.end.min(limit);
        EventBlocks { db: &self.db, from: starts.start, until, limit, scan: None, next: None, first: None, done: starts.start >= until }
    }

    /// Thread names by id.
    pub fn threads(&self) -> Result<Vec<(u32, ThreadRecord)>, StoreError> {
        self.db
            .scan_from(Tree::Threads, &[])
            .map(|kv| {
                let (k, v) = kv?;
                let id = u32::from_be_bytes(k.as_slice().try_into().map_err(|_| StoreError::Corrupt("bad thread key".into()))?);
                let t = decode_thread(&v).map_err(|e| StoreError::Corrupt(format!("thread {id}: {e}")))?;
                Ok((id, t))
            })
            .collect()
    }

    /// What a `Lucce.context()` token stands for: ⟨site, c, v⟩, or None for an unknown token.
    pub fn token(&self, token: u64) -> Result<Option<(u32, u64, u64)>, StoreError> {
        let Some(v) = self.db.get(Tree::Tokens, &token.to_be_bytes())? else { return Ok(None) };
        if v.len() != 20 {
            return Err(StoreError::Corrupt(format!("token {token}: record of {} bytes", v.len())));
        }
        let site = u32::from_be_bytes(v[..4].try_into().expect("4 bytes"));
        let c = u64::from_be_bytes(v[4..12].try_into().expect("8 bytes"));
        let ver = u64::from_be_bytes(v[12..].try_into().expect("8 bytes"));
        Ok(Some((site, c, ver)))
    }

    /// What lies past the commit mark.
    pub fn tail(&self) -> Result<TailReport, StoreError> {
        let mut t = TailReport::default();
        for (tree, committed, out) in [
            (Tree::Methods, self.commit.methods, &mut t.methods),
            (Tree::Sites, self.commit.sites, &mut t.sites),
            (Tree::Graph, self.commit.graph, &mut t.graph),
            (Tree::Events, self.commit.events, &mut t.events),
        ] {
            if let Some((k, v)) = self.db.floor(tree, &u64::MAX.to_be_bytes())? {
                match (block_key(&k), block_count(&v)) {
                    (Some(first), Some(n)) => *out = (first + n).saturating_sub(committed),
                    _ => t.damaged = true,
                }
            }
        }
        Ok(t)
    }

    /// Bytes of every file of the store.
    pub fn bytes_on_disk(&self) -> Result<u64, StoreError> {
        fn walk(p: &Path) -> std::io::Result<u64> {
            let mut n = 0;
            for e in std::fs::read_dir(p)? {
                let e = e?;
                let md = e.metadata()?;
                n += if md.is_dir() { walk(&e.path())? } else { md.len() };
            }
            Ok(n)
        }
        Ok(walk(&self.path)?)
    }

    fn stream<T: BlockRecord>(&self, tree: Tree, from: u64, end: u64) -> BlockIter<'_, T> {
        BlockIter { db: &self.db, tree, next: from, end, scan: None, scanned: 0, block: Vec::new().into_iter(), block_end: from, _t: PhantomData }
    }
}

fn block_key(k: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(k.try_into().ok()?))
}

fn block_count(v: &[u8]) -> Option<u64> {
    (v.len() >= BLOCK_HEADER).then(|| u32::from_le_bytes([v[4], v[5], v[6], v[7]]) as u64)
}

/// Event blocks by first sequence number, from [`StoreReader::event_blocks`].
pub struct EventBlocks<'a> {
    db: &'a SledBackend,
    /// Blocks whose first id is in from..until are read.
    from: u64,
    until: u64,
    /// The commit mark: events at or past it are not returned.
    limit: u64,
    scan: Option<SharedScan<'a>>,
    /// One past the last event of the previous block read.
    next: Option<u64>,
    /// First id of the first block read.
    first: Option<u64>,
    done: bool,
}

/// One decoded event block (its events' [`EventCore`]s) and the aligned scratch space decoding
/// uses: kept across blocks and packets, so that a steady stream of blocks allocates nothing.
#[derive(Default)]
pub struct EventBuf {
    scratch: AlignedVec<16>,
    events: Vec<EventCore>,
}

impl EventBuf {
    /// The events of the block last read.
    pub fn events(&self) -> &[EventCore] {
        &self.events
    }
}

impl EventBlocks<'_> {
    /// Decodes the next block into `buf` and returns the sequence number of its first event;
    /// `None` when no more blocks start in the range. Events at or past the commit mark are
    /// never returned. After an error the iterator is finished.
    pub fn next_block(&mut self, buf: &mut EventBuf) -> Option<Result<u64, StoreError>> {
        buf.events.clear();
        if self.done {
            return None;
        }
        match self.load(buf) {
            Ok(r) => r.map(Ok),
            Err(why) => {
                self.done = true;
                buf.events.clear();
                Some(Err(StoreError::Corrupt(format!("{:?} stream: {why}", Tree::Events))))
            }
        }
    }

    fn load(&mut self, buf: &mut EventBuf) -> Result<Option<u64>, String> {
        let (db, from) = (self.db, self.from);
        let scan = self.scan.get_or_insert_with(|| db.scan_shared_from(Tree::Events, &from.to_be_bytes()));
        let kv = scan.next();
        // Blocks are contiguous: once one was read, the next must start where it ended (which
        // is before `until`, or reading would have stopped).
        let expected = self.next;
        let (key, value) = match kv {
            Some(kv) => kv.map_err(|e| e.to_string())?,
            None => {
                self.done = true;
                return match expected {
                    Some(n) => Err(format!("ends at {n} but the commit mark says {}", self.limit)),
                    None => Ok(None),
                };
            }
        };
        let first = block_key(&key).ok_or("bad block key")?;
        match expected {
            Some(n) if n != first => return Err(format!("block at {first} does not hold record {n} (gap)")),
            None if first >= self.until => {
                self.done = true;
                return Ok(None);
            }
            _ => {}
        }
        let count = decode_event_cores(&value, &mut buf.scratch, &mut buf.events).map_err(|e| format!("block at {first}: {e}"))?;
        if count == 0 {
            return Err(format!("block at {first} is empty"));
        }
        let block_end = (first + count as u64).min(self.limit);
        // Only committed events: past the mark nothing is data.
        buf.events.truncate((block_end - first) as usize);
        self.first.get_or_insert(first);
        self.next = Some(block_end);
        // The next block starts at block_end: read it only if it starts in the range.
        if block_end >= self.until {
            self.done = true;
        }
        Ok(Some(first))
    }

    /// The ids covered by the blocks read so far (first id of the first block, one past the last
    /// event of the last, capped at the commit mark); `None` if no block was read.
    pub fn extent(&self) -> Option<std::ops::Range<u64>> {
        Some(self.first?..self.next?)
    }
}

/// Blocks one scan of a [`BlockIter`] reads before it starts another.
const RESCAN_BLOCKS: u32 = 1024;

/// Records of one stream with ids in [next, end), checked to be contiguous.
pub struct BlockIter<'a, T> {
    db: &'a SledBackend,
    tree: Tree,
    next: u64,
    end: u64,
    scan: Option<Box<dyn Iterator<Item = Result<KeyValue, StoreError>> + 'a>>,
    /// Blocks read through `scan`: a long scan is started afresh now and then, so that the
    /// backend can let go of what it read (see [`SledBackend`]).
    scanned: u32,
    block: std::vec::IntoIter<T>,
    /// Id one past the last record of the current block.
    block_end: u64,
    _t: PhantomData<T>,
}

/// Events with their sequence numbers.
pub type EventIter<'a> = BlockIter<'a, EventRecord>;

impl<T: BlockRecord> BlockIter<'_, T> {
    fn corrupt(&mut self, why: String) -> Option<Result<(u64, T), StoreError>> {
        self.end = self.next; // stop after reporting
        Some(Err(StoreError::Corrupt(format!("{:?} stream: {why}", self.tree))))
    }

    /// Loads the block that holds `self.next`.
    fn load(&mut self) -> Result<(), String> {
        if self.scanned >= RESCAN_BLOCKS {
            self.scan = None;
            self.scanned = 0;
        }
        self.scanned += 1;
        let (key, value) = match self.scan.as_mut() {
            Some(scan) => match scan.next() {
                Some(kv) => kv.map_err(|e| e.to_string())?,
                None => return Err(format!("ends at {} but the commit mark says {}", self.next, self.end)),
            },
            None => {
                // First block: the one whose first id is the greatest ≤ next.
                let kv = self.db.floor(self.tree, &self.next.to_be_bytes()).map_err(|e| e.to_string())?;
                let (k, v) = kv.ok_or_else(|| format!("record {} is missing", self.next))?;
                let after = block_key(&k).ok_or("bad block key")?.saturating_add(1);
                self.scan = Some(self.db.scan_from(self.tree, &after.to_be_bytes()));
                (k, v)
            }
        };
        let first = block_key(&key).ok_or("bad block key")?;
        let records = decode_block::<T>(&value).map_err(|e| format!("block at {first}: {e}"))?;
        let block_end = first + records.len() as u64;
        if first > self.next || block_end <= self.next {
            return Err(format!("block at {first} does not hold record {} (gap)", self.next));
        }
        let mut it = records.into_iter();
        if self.next > first {
            it.nth((self.next - first - 1) as usize);
        }
        self.block = it;
        self.block_end = block_end;
        Ok(())
    }
}

impl<T: BlockRecord> Iterator for BlockIter<'_, T> {
    type Item = Result<(u64, T), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        if self.next >= self.block_end {
            if let Err(why) = self.load() {
                return self.corrupt(why);
            }
        }
        match self.block.next() {
            Some(r) => {
                let id = self.next;
                self.next += 1;
                Some(Ok((id, r)))
            }
            None => self.corrupt(format!("record {} is missing", self.next)),
        }
    }
}
