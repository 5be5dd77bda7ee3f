//! The parallel builder, in two phases.
//!
//! 1. Counting: the events are cut into packets (sequence ranges), queued per worker (see
//!    [`Packets`]); each worker reads the event blocks that start in its packets straight out
//!    of the store (each worker its own blocks: reading and decompressing is most of the work)
//!    and counts events by ⟨site, c, v⟩ (and thread, for per-thread trees): the key that
//!    determines an event's context. Nothing is decoded yet. Each worker's table remembers the
//!    order its keys were first met — stream order, as a worker's packets are a contiguous run.
//! 2. Decoding: the distinct keys are dealt out to the workers in runs of consecutive keys of
//!    that order; each worker decodes its keys, each once, into its own partial tree, adding
//!    the counts of every table. A key is decoded by one worker only, so the decoding work (the
//!    expensive part per distinct context) is split instead of repeated; and a run of keys in
//!    stream order is a run of neighbouring contexts sharing most of their callers, so the
//!    decoder works on a small, cached part of its memo and two workers rarely decode the same
//!    callers. (Splitting keys by hash instead balanced as well but made each worker decode
//!    three quarters of all callers, in random order: measured slower.)
//!
//! The partial trees are then merged. Counting is addition and `via` a minimum, so the result
//! does not depend on how packets or keys were split: ParCCT's partial trees, without its
//! shadow-stack packet headers (every event already names its full context).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use lucce_log_format::records::EventCore;
use lucce_log_format::{EventBuf, EventKind, StoreError, StoreReader};
use rustc_hash::FxHashMap;

use super::tally::{EventKey, TallyTable};
use super::tree::{Cct, CctBuilder, Key, Metrics, NO_SITE};
use super::CctError;
use crate::{Bottom, ContextDecoder, CtxId, Graph};

/// Which event kinds to aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindSet(u8);

impl KindSet {
    pub const ALL: KindSet = KindSet(0b111);

    pub fn of(kinds: &[EventKind]) -> KindSet {
        KindSet(kinds.iter().fold(0, |acc, &k| acc | Self::bit(k)))
    }

    fn bit(k: EventKind) -> u8 {
        match k {
            EventKind::Mark => 1,
            EventKind::Sample => 2,
            EventKind::Alloc => 4,
        }
    }

    pub fn contains(self, k: EventKind) -> bool {
        self.0 & Self::bit(k) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Names of the kinds in the set, for messages.
    pub fn names(self) -> Vec<&'static str> {
        [EventKind::Mark, EventKind::Sample, EventKind::Alloc].into_iter().filter(|&k| self.contains(k)).map(EventKind::name).collect()
    }
}

/// The order in which packets are put on the queue. The result never depends on it; tests use
/// the other orders to show that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketOrder {
    InOrder,
    Reverse,
    /// A pseudo-random permutation from this seed.
    Shuffled(u64),
}

#[derive(Debug, Clone, Copy)]
pub struct CctOptions {
    pub kinds: KindSet,
    /// Frames keyed by site (call sites and lines distinguished) instead of by method.
    pub lines: bool,
    /// One root per thread under the global root.
    pub per_thread: bool,
    pub workers: usize,
    /// Events per packet.
    pub packet: u64,
    pub order: PacketOrder,
    /// Memory bound: a counting worker holding this many distinct ⟨site, c, v⟩ keys decodes them
    /// into a partial tree of its own and starts counting afresh, and a decoder's memo is
    /// cleared at this many entries. The same context is encoded with many versions over a
    /// long run, so without a bound these grow with the run, not with the tree.
    pub spill_keys: usize,
}

impl Default for CctOptions {
    fn default() -> Self {
        CctOptions {
            kinds: KindSet::ALL,
            lines: false,
            per_thread: false,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            // Large enough that a packet's start-up (one index lookup, one block decoded twice at
            // its edges) is noise; a multiple of the writer's 4096-record blocks.
            packet: 1 << 16,
            order: PacketOrder::InOrder,
            // About 170 MB of table per worker.
            spill_keys: 1 << 22,
        }
    }
}

/// Builds the CCT of every committed event of `store` whose kind is in `opts.kinds`.
///
/// The result is identical for any packet size, packet order and worker count. If some events
/// do not decode, the error is that of the lowest-numbered such event, whatever the schedule
/// (a store error stops every worker at once).
pub fn build_cct(store: &StoreReader, graph: &Graph, opts: &CctOptions) -> Result<Cct, CctError> {
    let n = store.commit().events;
    let packet = opts.packet.max(1);
    let count = n.div_ceil(packet);
    let workers = opts.workers.clamp(1, count.clamp(1, 1024) as usize);
    let packets = Packets::new(packet_order(count, opts.order).into_iter().map(|p| p * packet..((p + 1) * packet).min(n)), workers);

    // Phase 1: count events by key.
    let abort = AtomicBool::new(false);
    let counted = crossbeam::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|me| {
                let (packets, abort) = (&packets, &abort);
                s.spawn(move |_| {
                    let mut c = Counter::new(graph, opts);
                    while let Some(range) = packets.next(me) {
                        if abort.load(Ordering::Relaxed) {
                            break;
                        }
                        if let Err(e) = c.packet(store, range) {
                            abort.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                    Ok(c)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    })
    .map_err(|_| CctError::WorkerPanicked("scope".into()))?;
    let mut tables = Vec::with_capacity(workers);
    let mut extents = Vec::new();
    let mut first_err: Option<(u64, CctError)> = None;
    let mut trees = Vec::with_capacity(2 * workers);
    let mut failed = Vec::new();
    for r in counted {
        match r {
            Ok(Ok(c)) => {
                extents.extend(c.extents);
                tables.push(c.table);
                if let Some(w) = c.spilled {
                    trees.push(w.tree);
                }
                failed.extend(c.failed);
            }
            Ok(Err(e)) => keep_first(&mut first_err, e),
            Err(p) => return Err(CctError::WorkerPanicked(panic_message(&p))),
        }
    }
    if let Some((_, e)) = first_err {
        return Err(e);
    }
    check_tiling(extents, n)?;

    // Phase 2: every worker decodes its share of the distinct keys into its partial tree.
    let tables = &tables;
    let decoded = crossbeam::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|me| {
                s.spawn(move |_| {
                    let mut w = Worker::new(graph, opts);
                    let mut failed = Vec::new();
                    w.add_share(tables, me, workers, &mut failed);
                    if failed.is_empty() {
                        Ok(w.tree)
                    } else {
                        Err(failed)
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    })
    .map_err(|_| CctError::WorkerPanicked("scope".into()))?;
    for r in decoded {
        match r {
            Ok(Ok(t)) => trees.push(t),
            Ok(Err(f)) => failed.extend(f),
            Err(p) => return Err(CctError::WorkerPanicked(panic_message(&p))),
        }
    }
    if !failed.is_empty() {
        return Err(first_failure(store, opts, failed));
    }
    // Merge the smaller trees into the largest: fewer insertions, same result.
    trees.sort_by_key(|t| std::cmp::Reverse(t.len()));
    let mut iter = trees.into_iter();
    let mut acc = iter.next().unwrap_or_default();
    for t in iter {
        acc.merge(&t)?;
    }
    Ok(acc.finish())
}

/// Keeps the error of the lowest sequence number.
fn keep_first(first: &mut Option<(u64, CctError)>, (seq, e): (u64, CctError)) {
    match first {
        Some((s, _)) if *s <= seq => {}
        _ => *first = Some((seq, e)),
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".into())
}

/// Each packet read the blocks that start in it, each checked contiguous; together they must
/// cover 0..n exactly once, or some block is missing (or the stream is damaged).
fn check_tiling(mut extents: Vec<Range<u64>>, n: u64) -> Result<(), CctError> {
    extents.sort_unstable_by_key(|r| r.start);
    let mut next = 0;
    for r in extents {
        if r.start != next {
            let what = if r.start > next { "is missing" } else { "is in two blocks" };
            return Err(StoreError::Corrupt(format!("Events stream: record {next} {what}")).into());
        }
        next = r.end;
    }
    if next != n {
        return Err(StoreError::Corrupt(format!("Events stream: ends at {next} but the commit mark says {n}")).into());
    }
    Ok(())
}

/// The packets, in one queue per worker: each worker takes its share as a contiguous run of the
/// packet order and, once done, takes packets from the back of the fullest other queue.
///
/// With packets in stream order, workers thus read far apart from each other. A single shared
/// queue would have them read neighbouring packets at the same moments: one worker starting a
/// packet while the other finishes the one before, both reading (and decompressing) the
/// database page that holds their common boundary, twice.
struct Packets {
    queues: Vec<Mutex<VecDeque<Range<u64>>>>,
}

impl Packets {
    fn new(mut order: impl ExactSizeIterator<Item = Range<u64>>, workers: usize) -> Packets {
        let len = order.len();
        let queues = (0..workers)
            .map(|i| {
                let share = len * (i + 1) / workers - len * i / workers;
                Mutex::new(order.by_ref().take(share).collect())
            })
            .collect();
        Packets { queues }
    }

    fn next(&self, me: usize) -> Option<Range<u64>> {
        let len_of = |q: &Mutex<VecDeque<Range<u64>>>| q.lock().unwrap_or_else(|e| e.into_inner()).len();
        if let Some(r) = self.queues[me].lock().unwrap_or_else(|e| e.into_inner()).pop_front() {
            return Some(r);
        }
        loop {
            let fullest = (0..self.queues.len()).filter(|&i| i != me).max_by_key(|&i| len_of(&self.queues[i]))?;
            let mut q = self.queues[fullest].lock().unwrap_or_else(|e| e.into_inner());
            if let Some(r) = q.pop_back() {
                return Some(r);
            }
            drop(q);
            if self.queues.iter().all(|q| len_of(q) == 0) {
                return None;
            }
        }
    }
}

/// Packet indices 0..count in the requested order.
fn packet_order(count: u64, order: PacketOrder) -> Vec<u64> {
    let mut v: Vec<u64> = (0..count).collect();
    match order {
        PacketOrder::InOrder => {}
        PacketOrder::Reverse => v.reverse(),
        PacketOrder::Shuffled(seed) => {
            // Fisher–Yates with splitmix64: no RNG dependency for a test knob.
            let mut state = seed;
            for i in (1..v.len()).rev() {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                v.swap(i, (z % (i as u64 + 1)) as usize);
            }
        }
    }
    v
}

const UNMAPPED: u32 = u32::MAX;

/// Keys per run when phase 2 deals out a table's keys to the workers: long enough that a worker
/// decodes stretches of neighbouring contexts (which share most callers), short enough to share
/// the work evenly.
const RUN: usize = 2048;

/// How many events ahead the counter prefetches table slots.
const AHEAD: usize = 16;

/// A phase-1 worker: reads packets and counts their events by key.
struct Counter<'g> {
    graph: &'g Graph,
    opts: CctOptions,
    table: TallyTable,
    /// The partial tree of the keys decoded whenever the table reached `opts.spill_keys`.
    spilled: Option<Worker<'g>>,
    /// Keys of `spilled` that did not decode.
    failed: Vec<(EventKey, CctError)>,
    buf: EventBuf,
    /// The current block's key hashes (reused).
    hashes: Vec<u64>,
    /// The ids covered by each packet's blocks, to check that the packets tile the stream.
    extents: Vec<Range<u64>>,
}

impl<'g> Counter<'g> {
    fn new(graph: &'g Graph, opts: &CctOptions) -> Self {
        Counter {
            graph,
            opts: *opts,
            table: TallyTable::default(),
            spilled: None,
            failed: Vec::new(),
            buf: EventBuf::default(),
            hashes: Vec::new(),
            extents: Vec::new(),
        }
    }

    /// Counts the events of the blocks that start in `range` (each block is read by exactly
    /// one packet: see [`StoreReader::event_blocks`]); records the ids they covered.
    fn packet(&mut self, store: &StoreReader, range: Range<u64>) -> Result<(), (u64, CctError)> {
        let start = range.start;
        let mut blocks = store.event_blocks(range);
        let mut buf = std::mem::take(&mut self.buf);
        while let Some(first) = blocks.next_block(&mut buf) {
            first.map_err(|e| (start, e.into()))?;
            self.count(buf.events());
            if self.table.len() >= self.opts.spill_keys.max(1) {
                self.spill();
            }
        }
        self.buf = buf;
        if let Some(ext) = blocks.extent() {
            self.extents.push(ext);
        }
        Ok(())
    }

    /// Decodes the table's keys into this worker's own partial tree and empties the table.
    fn spill(&mut self) {
        let Counter { graph, opts, table, spilled, failed, .. } = self;
        let w = spilled.get_or_insert_with(|| Worker::new(graph, opts));
        for (key, events) in table.iter() {
            if let Err(e) = w.add(&key, events) {
                failed.push((key, e));
            }
        }
        self.table = TallyTable::default();
    }

    /// Counts the events of one block. The table slot of the event `AHEAD` places on is
    /// prefetched, so that table updates do not wait for memory one after the other. A run of events with the same key (a thread sampled
    /// repeatedly in one place) costs one update.
    fn count(&mut self, events: &[EventCore]) {
        let Counter { opts, table, hashes, .. } = self;
        let key = |ev: &EventCore| EventKey { site: ev.site, thread: if opts.per_thread { ev.thread } else { 0 }, c: ev.c, v: ev.v };
        hashes.clear();
        hashes.extend(events.iter().map(|ev| key(ev).hash()));
        let mut run: Option<(EventKey, u64, u64)> = None; // key, hash, events
        for (i, ev) in events.iter().enumerate() {
            if let Some(&h) = hashes.get(i + AHEAD) {
                table.prefetch(h);
            }
            if !opts.kinds.contains(ev.kind) {
                continue;
            }
            let k = key(ev);
            match &mut run {
                Some((rk, _, count)) if *rk == k => *count += 1,
                _ => {
                    if let Some((rk, rh, count)) = run.replace((k, hashes[i], 1)) {
                        table.add(rk, rh, count);
                    }
                }
            }
        }
        if let Some((rk, rh, count)) = run {
            table.add(rk, rh, count);
        }
    }
}

/// The error to report when some keys did not decode: that of the lowest-numbered event with
/// one of those keys, whatever the schedule (found by reading the events again, in order).
fn first_failure(store: &StoreReader, opts: &CctOptions, failed: Vec<(EventKey, CctError)>) -> CctError {
    let mut failed: FxHashMap<EventKey, CctError> = failed.into_iter().collect();
    let mut blocks = store.event_blocks(0..store.commit().events);
    let mut buf = EventBuf::default();
    while let Some(first) = blocks.next_block(&mut buf) {
        let first = match first {
            Ok(f) => f,
            Err(e) => return e.into(),
        };
        for (i, ev) in buf.events().iter().enumerate() {
            let key = EventKey { site: ev.site, thread: if opts.per_thread { ev.thread } else { 0 }, c: ev.c, v: ev.v };
            if !opts.kinds.contains(ev.kind) {
                continue;
            }
            if let Some(e) = failed.remove(&key) {
                return match e {
                    CctError::Decode { source, .. } => CctError::Decode { seq: first + i as u64, source },
                    e => e,
                };
            }
        }
    }
    // Every failed key was counted from some event, so the loop returns.
    failed.into_values().next().unwrap_or(CctError::WorkerPanicked("a failed key without an event".into()))
}

/// A phase-2 worker: its decoder, its partial tree, and a cache from decoded context to tree
/// node (shared callers are decoded and mapped once).
struct Worker<'g> {
    dec: ContextDecoder<'g>,
    tree: CctBuilder,
    opts: CctOptions,
    /// Per base (the global root, or one per thread): decoder context id → tree node.
    maps: Vec<Vec<u32>>,
    base_nodes: Vec<u32>,
    bases: FxHashMap<u32, usize>,
    walk: Vec<CtxId>,
}

impl<'g> Worker<'g> {
    fn new(graph: &'g Graph, opts: &CctOptions) -> Self {
        Worker {
            dec: ContextDecoder::new(graph),
            tree: CctBuilder::new(),
            opts: *opts,
            maps: vec![Vec::new()],
            base_nodes: vec![0],
            bases: FxHashMap::default(),
            walk: Vec::new(),
        }
    }

    /// Phase 2 for worker `me` of `workers`: decodes its share of the distinct keys of all
    /// counting workers' `tables` and adds their summed counts. A key belongs to the first
    /// table holding it; each table's keys, in the order they were first met, are dealt out to
    /// the workers in runs of `RUN` (round robin). Keys that do not decode are skipped and added
    /// to `failed` with their errors.
    fn add_share(&mut self, tables: &[TallyTable], me: usize, workers: usize, failed: &mut Vec<(EventKey, CctError)>) {
        for (i, t) in tables.iter().enumerate() {
            for run in (me..t.len().div_ceil(RUN)).step_by(workers) {
                for k in run * RUN..((run + 1) * RUN).min(t.len()) {
                    let (key, events) = t.nth(k);
                    let h = key.hash();
                    if tables[..i].iter().any(|u| u.get(key, h) > 0) {
                        continue; // an earlier table's key
                    }
                    let events = events + tables[i + 1..].iter().map(|u| u.get(key, h)).sum::<u64>();
                    if let Err(e) = self.add(&key, events) {
                        failed.push((key, e));
                    }
                }
            }
        }
    }

    /// Decodes one key and adds its events to the tree. (A decoding error says event 0: the
    /// caller finds the real one.)
    fn add(&mut self, key: &EventKey, events: u64) -> Result<(), CctError> {
        if self.dec.memo_len() >= self.opts.spill_keys.max(1) {
            self.dec.clear_memo();
        }
        let slot = if self.opts.per_thread { self.slot(key.thread)? } else { 0 };
        let ctx = self.dec.decode(key.site, key.c, key.v).map_err(|source| CctError::Decode { seq: 0, source })?;
        let node = match self.maps[slot].get(ctx as usize) {
            Some(&n) if n != UNMAPPED => n,
            _ => self.map_context(slot, ctx)?,
        };
        self.tree.add(node, Metrics { events });
        Ok(())
    }
    /// The base slot of a thread, creating its root node on first sight.
    fn slot(&mut self, thread: u32) -> Result<usize, CctError> {
        if let Some(&s) = self.bases.get(&thread) {
            return Ok(s);
        }
        let node = self.tree.child(0, Key::thread(thread)?, NO_SITE)?;
        let s = self.maps.len();
        self.maps.push(Vec::new());
        self.base_nodes.push(node);
        self.bases.insert(thread, s);
        Ok(s)
    }

    /// Maps a context not seen under this base yet: walks to the nearest mapped caller (or the
    /// bottom), then creates the missing nodes top-down.
    fn map_context(&mut self, slot: usize, ctx: CtxId) -> Result<u32, CctError> {
        let Worker { dec, tree, maps, base_nodes, walk, opts, .. } = self;
        let map = &mut maps[slot];
        if map.len() < dec.contexts() {
            map.resize(dec.contexts(), UNMAPPED);
        }
        walk.clear();
        let mut cur = ctx;
        let mut node = loop {
            let n = map[cur as usize];
            if n != UNMAPPED {
                break n;
            }
            match dec.parent(cur) {
                Some(p) => {
                    walk.push(cur);
                    cur = p;
                }
                None => {
                    let base = base_nodes[slot];
                    let n = match dec.bottom(cur) {
                        Bottom::Thread => base,
                        // Keep contexts without a known bottom apart from complete ones.
                        Bottom::Truncated => tree.child(base, Key::TRUNCATED, NO_SITE)?,
                    };
                    map[cur as usize] = n;
                    break n;
                }
            }
        };
        for &c in walk.iter().rev() {
            let f = dec.frame(c).expect("contexts on the walk are not roots");
            let key = Key::frame(if opts.lines { f.site } else { f.method })?;
            let via = dec.parent(c).and_then(|p| dec.frame(p)).map_or(NO_SITE, |caller| caller.site);
            node = tree.child(node, key, via)?;
            map[c as usize] = node;
        }
        Ok(node)
    }
}

