//! The parallel builder: packets of events (sequence ranges) on a crossbeam queue, a pool of
//! workers each decoding into its own partial tree, and a final merge.
//!
//! A worker keeps its decoder (and its memo) and its partial tree across packets: adding a
//! packet's events to the worker's tree is the same as building the packet's partial CCT and
//! merging it in (addition is associative and commutative), without the intermediate tree.
//! ParCCT builds per-packet trees because its packets start from a shadow-stack header; ours
//! need none.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use lucce_log_format::{EventKind, StoreReader};
use rustc_hash::FxHashMap;

use super::tree::{Cct, CctBuilder, Key, NO_SITE};
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
        }
    }
}

/// Builds the CCT of every committed event of `store` whose kind is in `opts.kinds`.
///
/// The result is identical for any packet size, packet order and worker count. On an event that
/// does not decode, the error of the lowest-numbered such event any worker met is returned
/// (workers stop early once one fails).
pub fn build_cct(store: &StoreReader, graph: &Graph, opts: &CctOptions) -> Result<Cct, CctError> {
    let n = store.commit().events;
    let packet = opts.packet.max(1);
    let count = n.div_ceil(packet);
    let (tx, rx) = crossbeam::channel::unbounded::<Range<u64>>();
    for p in packet_order(count, opts.order) {
        let start = p * packet;
        let _ = tx.send(start..(start + packet).min(n));
    }
    drop(tx);
    let workers = opts.workers.clamp(1, count.clamp(1, 1024) as usize);
    let abort = AtomicBool::new(false);
    let results = crossbeam::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let (rx, abort) = (rx.clone(), &abort);
                s.spawn(move |_| {
                    let mut w = Worker::new(graph, opts);
                    for range in rx.iter() {
                        if abort.load(Ordering::Relaxed) {
                            break;
                        }
                        if let Err(e) = w.packet(store, range) {
                            abort.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                    Ok(w.tree)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    })
    .map_err(|_| CctError::WorkerPanicked("scope".into()))?;

    let mut trees = Vec::with_capacity(workers);
    let mut first_err: Option<(u64, CctError)> = None;
    for r in results {
        match r {
            Ok(Ok(t)) => trees.push(t),
            Ok(Err((seq, e))) => {
                match &first_err {
                    Some((s, _)) if *s <= seq => {}
                    _ => first_err = Some((seq, e)),
                }
            }
            Err(p) => return Err(CctError::WorkerPanicked(panic_message(&p))),
        }
    }
    if let Some((_, e)) = first_err {
        return Err(e);
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

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".into())
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

/// One worker: its decoder, its partial tree, and a cache from decoded context to tree node so
/// that an event whose context was seen before costs one decode lookup and one array read.
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

    fn packet(&mut self, store: &StoreReader, range: Range<u64>) -> Result<(), (u64, CctError)> {
        let start = range.start;
        let mut last_thread: Option<(u32, usize)> = None;
        for item in store.events_range(range) {
            let (seq, ev) = item.map_err(|e| (start, e.into()))?;
            if !self.opts.kinds.contains(ev.kind) {
                continue;
            }
            let ctx = self.dec.decode(ev.site, ev.c, ev.v).map_err(|source| (seq, CctError::Decode { seq, source }))?;
            let slot = if !self.opts.per_thread {
                0
            } else {
                match last_thread {
                    Some((t, slot)) if t == ev.thread => slot,
                    _ => {
                        let slot = self.slot(ev.thread).map_err(|e| (seq, e))?;
                        last_thread = Some((ev.thread, slot));
                        slot
                    }
                }
            };
            let node = match self.maps[slot].get(ctx as usize) {
                Some(&n) if n != UNMAPPED => n,
                _ => self.map_context(slot, ctx).map_err(|e| (seq, e))?,
            };
            self.tree.count(node);
        }
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
