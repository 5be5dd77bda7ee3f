//! Algorithm 1: the call graph, numCC, addition values, last versions, and the graph version.
//!
//! # Overflow rule
//! callIds are kept below a limit L (`EncoderConfig::call_id_limit`, default 2^62): numCC values
//! saturate at L, and when entering a callee would give a callId c + av(e) ≥ L, the callee instead
//! starts a new *segment*: the encoder logs an anchor record ⟨site, callee, caller's ⟨c, v⟩⟩ at a
//! fresh version a and returns ⟨0, ANCHOR_BIT | a << 32 | g⟩, g being the graph version at a (see
//! `ids::ANCHOR_BIT`). The decoder, reaching that frame, reads the anchor and continues at the
//! caller with the logged ⟨c, v⟩. So every
//! context stays exact with two fixed-size numbers per frame, at the price of one log record per
//! segment. Anchors are memoized by ⟨site, callee, c, v⟩, so a recursion that repeats the same
//! contexts does not grow the log.
//!
//! Why a saturated numCC is still exact: a frame's callId is always below its method's numCC
//! (frames that would reach L are anchors with callId 0), so the ranges [av(e_i), av(e_i) +
//! numCC(caller_i)) of a callee's incoming edges stay disjoint and cover every callId that can
//! arrive through them.
//!
//! # Cycle-closing edges are segment boundaries
//! Departure from the paper, which lets recursion grow numCC along every new recursive path (its
//! "nodeUpdated" events): an edge whose callee already reaches its caller through the edges
//! counted so far (so it would close a cycle; a self call is one) is a *back edge*. A back edge
//! adds no width to its callee's numCC and is not part of the callee's incoming list; entering
//! through it always starts a segment, exactly like the overflow rule (an anchor record, memoized
//! by ⟨site, callee, c, v⟩). So the counted edges always form a DAG, numCC stops changing as soon
//! as the graph stops growing, and recursion costs one anchor per distinct recursive context,
//! logged once — instead of numCC churn until saturation and then an anchor per context anyway.
//! The classification is made once, when the edge is first seen, with a dynamic topological
//! order (Pearce and Kelly, "A dynamic topological sort algorithm for directed acyclic graphs",
//! JEA 2007): an edge that agrees with the order costs nothing; otherwise only the nodes between
//! the two positions are searched. The decoder needs no change: anchors carry their caller.
//!
//! # Versions: a callee stays in its caller's version when it can
//! Departure from the paper, whose Update sets lv(p) ← v at every entry and gives the callee the
//! current version, so that the decoder finds a caller's version as lv(p) in the callee's. Every
//! entry from a frame of p whose version differs from lv(p) then makes a new version, and the
//! versions multiply like the calling contexts themselves (FOP: 1.76M versions for 46k edges,
//! each a locked entry, a log record and a memo entry that the caches do not hold).
//! Here an entry of n through e = ⟨p, site⟩ from a frame ⟨c, v⟩ (graph version g = v without
//! the anchor bit) is one of two cases:
//! - *stay*: e exists at g and [av(e, g), av(e, g) + numCC_g(p)) lies within numCC_g(n). The
//!   callee gets ⟨c + av(e, g), v⟩: nothing is logged, and everything below a hot frame shares
//!   its version. Whether an entry stays, and av(e, g), depend on g only, so the memo and the
//!   caches keep a stay under ⟨site, callee, g⟩ and answer it to every frame whose version has
//!   graph version g, anchored or not (`ids::key_version`): a recursion's segments each have an
//!   anchored version of their own, and their stays would otherwise be one entry per segment
//!   (antlr4: 79M of 86M locked entries were stays from anchored versions).
//! - *link*: otherwise. The edge is added if new, numCC(n) is recomputed from the callers'
//!   current numCC, and a Link record ⟨w, site, callee, v⟩ at a fresh version w says that a
//!   frame of `callee` entered through `site` at w has its caller at v. The callee gets
//!   ⟨c + av(e, w), w⟩.
//!
//! The decoder, at a frame of n with ⟨c, V⟩ (g = V's graph version): an anchor's callee
//! with c = 0 steps to the anchor's caller; otherwise e = prev(n, c, g), the caller has callId
//! c − av(e, g) and version V, unless V is not anchored and the Link at g names e's site and n,
//! in which case the caller's version is the Link's (a frame of an anchored version that is not
//! its anchor's callee was entered by a stay: a link gives its callee a plain version). Why the
//! Link is never mistaken: frames at a link version w
//! are the link's callee and frames below it entered by stays, all in one segment, whose edges
//! are counted edges, i.e. a path in a DAG; so n occurs once on it. Why the ranges are right:
//! every frame's callId is below its method's numCC at the frame's version (a stay checks it, a
//! link recomputes numCC(n) ≥ av + numCC(p), numCC only grows, an anchor has c = 0 and
//! numCC ≥ 1), so c − av(e) falls in e's range at g and nowhere else.

use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxHashMap;
use thin_vec::ThinVec;

use crate::cache::SiteCache;
use crate::ids::{anchored_version, key_version, Context, MethodId, SiteId, ANCHOR_LIMIT};
use crate::memo::{AnchorMemo, Memo, ANCHOR_MEMO_WINDOW};
use crate::meta::{GraphEvent, GraphSink, MethodMeta, SiteKind, SiteMeta};
use crate::{is_root, THREAD_ROOT_SITE, TRUNCATED_ROOT_SITE};

/// Tunables of an [`Encoder`].
#[derive(Debug, Clone, Copy)]
pub struct EncoderConfig {
    /// Exclusive upper bound of callIds (see "Overflow rule"). At least 2.
    pub call_id_limit: u64,
    /// Buckets of the lock-free memo (128 bytes each, three results; committed lazily by the OS).
    /// Default 2^15 (4 MiB). Before the agent's threads had answer tables of their own in front
    /// of it, 2^16 fitted best (FOP's CPU time with 2^18 buckets was about 5% higher, with 2^12
    /// 7% higher); with them, 2^15 costs no time in whole runs (jython, fop, xalan,
    /// lucene_search, rhino) or antlr4's steady state and saves 4 MiB of resident memory, and
    /// 2^14 made rhino and the steady state about 3% slower.
    pub site_cache_capacity: usize,
    /// Buckets of the lock-free anchor table (same layout). Anchors are far fewer than memo
    /// entries (lucene_search: 6,353 against 434k; rhino, the most recursive workload, 95k),
    /// and every bucket written commits its page, so this one is smaller: 2^14 buckets, 2 MiB.
    pub anchor_cache_capacity: usize,
    /// A stay through an edge with fewer than this many edges before it in its callee's
    /// incoming list is computed again at each locked entry instead of kept in the locked memo
    /// (`State::recomputed`; entries through back edges are not memoized either). 0 memoizes
    /// every stay. Default 16: antlr4's whole run 65–71 s → 41 s, against 51 s with 4 and 42 s
    /// with 64 (single runs of builds that differed in this default, the README's antlr4 command
    /// line with `loglevel=info`); lucene_search's extra peak RSS about 10 MB lower.
    pub recomputed_stay_edges: usize,
    /// Anchors the locked anchor memo keeps (⟨site, callee, caller context⟩ → anchored version,
    /// about 40 bytes each): past this, a sixteenth of it is forgotten, and a caller context whose
    /// anchor was forgotten gets a new one, logged again. Exact either way (an anchor record is
    /// complete in itself); the memo only keeps a repeated recursion from growing the log, and
    /// is skipped for a while whenever it stops paying (`memo::AnchorMemo`). 0: no memo.
    /// Default 2^18: javac's 18.9M anchors took about 1 GB in it. A power of two keeps at most
    /// 7/8 of it, what a table of that size holds (`ShardedMap::insert_bounded`); so do the
    /// two bounds below.
    pub anchor_memo_capacity: usize,
    /// Stays the locked memo keeps (about 24 bytes each; stays through the first
    /// `recomputed_stay_edges` edges of a callee are never kept): past this, a sixteenth of them
    /// is forgotten, and a forgotten one is computed again when an entry needs it, which logs
    /// nothing. They grow with the graph versions that anchored callers have (javac: 170 MB).
    /// Default 2^16: at 2^19 jython kept 219k stays in 5.5 MB of table, and with 2^16 it, FOP and
    /// javac ran no slower (docs/performance-log.md, stop 40).
    pub stay_memo_capacity: usize,
    /// Results the locked memo keeps at full width (about 40 bytes each): in practice the links
    /// of anchored callers, one set per anchored version, so they grow with the anchors; past
    /// this a sixteenth of them is forgotten, and a forgotten link is logged again when an entry
    /// needs it (exact either way; `memo.rs`). Default 2^18, like the anchors they belong to.
    pub wide_memo_capacity: usize,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        EncoderConfig {
            call_id_limit: 1 << 62,
            site_cache_capacity: 1 << 15,
            anchor_cache_capacity: 1 << 14,
            recomputed_stay_edges: 16,
            anchor_memo_capacity: 1 << 18,
            stay_memo_capacity: 1 << 16,
            wide_memo_capacity: 1 << 18,
        }
    }
}

/// A method or site that [`Encoder::define_all`] did not define, and why.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    Method(MethodId, EncodeError),
    Site(SiteId, EncodeError),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EncodeError {
    #[error("unknown site id {0}")]
    UnknownSite(u32),
    #[error("unknown method id {0}")]
    UnknownMethod(u32),
    #[error("method id {0} is a virtual root and cannot be called")]
    RootCallee(u32),
    #[error("id {0} is defined already")]
    Redefined(u32),
    #[error("graph version {0} is past the last one an anchor can have ({ANCHOR_LIMIT} - 1)")]
    AnchorsExhausted(u64),
}

/// Counters for reports and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderStats {
    pub methods: u64,
    pub sites: u64,
    pub edges: u64,
    /// Edges that close a cycle (entered only through anchors); included in `edges`.
    pub back_edges: u64,
    /// The current graph version (= number of graph events logged, anchors included).
    pub version: u64,
    /// Anchor records logged (a caller context whose anchor the bounded anchor memo forgot is
    /// logged again: `EncoderConfig::anchor_memo_capacity`).
    pub anchors: u64,
    /// Entries that missed the lock-free cache and took the lock.
    pub slow_entries: u64,
    /// Of those, the ones that computed a stay (a stay that is not memoized, see
    /// `EncoderConfig::recomputed_stay_edges`, counts at every locked entry that computes it
    /// again), and the ones that logged a link (see "Versions").
    pub stays: u64,
    pub links: u64,
}

/// A method of the graph. Its lists are thin (one pointer each, the length and capacity on the
/// heap, nothing allocated while empty): most methods a program loads are never entered, and a
/// node of four `Vec`s took 112 bytes each (jython: 47k methods, 5.3 MB).
struct Node {
    /// Every numCC value with the version that set it (ascending; the last is the current one,
    /// also in `State::widths`): a callee stays in its caller's version only if the widths of that
    /// version allow it (see "Versions").
    numcc_history: ThinVec<(u64, u64)>,
    /// False for ids skipped over by [`Encoder::define_method`].
    defined: bool,
    /// Callers of the incoming (counted, non-back) edges, in the fixed (insertion) order that
    /// defines av.
    incoming: ThinVec<MethodId>,
    /// The version that added each edge of `incoming` (ascending).
    incoming_added: ThinVec<u64>,
    /// Callees of the outgoing counted edges (for the cycle check).
    outgoing: ThinVec<MethodId>,
    /// Position in a topological order of the counted edges: caller before callee.
    ord: u32,
    /// Search mark of the cycle check (equal to `State::mark` when visited by the current one).
    mark: u32,
}

const _: () = assert!(std::mem::size_of::<Node>() <= 48);

/// Pushes onto one of a node's lists, which start at one element and then double: `ThinVec`
/// starts at four, and many methods' lists hold one or two (jython: the lists' peak heap 6.45 →
/// 5.81 MB, heaptrack, docs/performance-log.md, stop 46). Only graph changes push.
fn push_tight<T>(v: &mut ThinVec<T>, x: T) {
    if v.len() == v.capacity() {
        v.reserve_exact(v.len().max(1));
    }
    v.push(x);
}

impl Node {
    fn new(ord: usize, defined: bool) -> Node {
        Node {
            numcc_history: ThinVec::new(),
            defined,
            incoming: ThinVec::new(),
            incoming_added: ThinVec::new(),
            outgoing: ThinVec::new(),
            ord: ord as u32,
            mark: 0,
        }
    }

    /// numCC as of version `g` (0 before the first value), from the history.
    fn numcc_in_history(&self, g: u64) -> u64 {
        match self.numcc_history.partition_point(|&(ver, _)| ver <= g) {
            0 => 0,
            i => self.numcc_history[i - 1].1,
        }
    }
}

/// A method's current numCC and the version that set it: what [`State::numcc_at`] answers
/// from for every version since, without reading the method's history.
#[derive(Clone, Copy, Default)]
struct Width {
    since: u64,
    numcc: u64,
}

/// `State::edges` value of a back edge (see "Cycle-closing edges are segment boundaries").
const BACK_EDGE: u32 = u32::MAX;

/// Placeholder owner of a site id that was skipped over by [`Encoder::define_site`].
const NO_METHOD: u32 = u32::MAX;

impl State {
    fn defined_method(&self, i: usize) -> bool {
        self.nodes.get(i).is_some_and(|n| n.defined)
    }

    /// Marks method `id` defined, growing the nodes up to it.
    fn define_method(&mut self, id: MethodId) -> Result<(), EncodeError> {
        let i = id.0 as usize;
        if i < self.nodes.len() && self.defined_method(i) {
            return Err(EncodeError::Redefined(id.0));
        }
        while self.nodes.len() <= i {
            self.push_node(false);
        }
        self.nodes[i].defined = true;
        Ok(())
    }

    /// Adds the node of the next method id.
    fn push_node(&mut self, defined: bool) -> MethodId {
        // A new node's position is its id: the order is always a permutation of the ids.
        let id = self.nodes.len();
        self.nodes.push(Node::new(id, defined));
        self.widths.push(Width::default());
        MethodId(id as u32)
    }

    /// Gives site `id` to `method`, which must be defined.
    fn define_site(&mut self, id: SiteId, method: MethodId) -> Result<(), EncodeError> {
        if !self.defined_method(method.0 as usize) {
            return Err(EncodeError::UnknownMethod(method.0));
        }
        let i = id.0 as usize;
        if self.site_owner.get(i).is_some_and(|m| m.0 != NO_METHOD) {
            return Err(EncodeError::Redefined(id.0));
        }
        if self.site_owner.len() <= i {
            self.site_owner.resize(i + 1, MethodId(NO_METHOD));
        }
        self.site_owner[i] = method;
        Ok(())
    }

    /// The current numCC of `m` (0 before the first value).
    fn numcc(&self, m: MethodId) -> u64 {
        self.widths[m.0 as usize].numcc
    }

    /// numCC of `m` as of version `g`. Most lookups are at or after the method's last change,
    /// and answer from the dense `widths` alone: a stay sums this over every caller before its
    /// edge, and the histories' binary searches missed the CPU caches (javac: a ninth of its
    /// samples, in `stay`).
    fn numcc_at(&self, m: MethodId, g: u64) -> u64 {
        let w = self.widths[m.0 as usize];
        if g >= w.since {
            w.numcc
        } else {
            self.nodes[m.0 as usize].numcc_in_history(g)
        }
    }

    /// Records numCC `numcc` of `m` as of `version` (after every earlier one).
    fn set_numcc(&mut self, m: MethodId, version: u64, numcc: u64) {
        push_tight(&mut self.nodes[m.0 as usize].numcc_history, (version, numcc));
        self.widths[m.0 as usize] = Width { since: version, numcc };
    }
}

struct State {
    version: u64,
    /// The version of the last graph event that is not an anchor: the graph as of `version`.
    graph_version: u64,
    nodes: Vec<Node>,
    /// By method id, beside `nodes`: the current numCC (see [`State::numcc_at`]).
    widths: Vec<Width>,
    site_owner: Vec<MethodId>,
    /// ⟨site, callee⟩ → index of the edge in the callee's `incoming`, or [`BACK_EDGE`].
    edges: FxHashMap<(u32, u32), u32>,
    back_edges: u64,
    /// The current search mark of the cycle check, and its work lists (kept to reuse memory).
    mark: u32,
    forward: Vec<MethodId>,
    backward: Vec<MethodId>,
    stack: Vec<MethodId>,
    /// ⟨site, callee, caller version⟩ → ⟨add, callee version⟩: the updates made, but for the
    /// stays and full-width results it forgot (`memo.rs`; the lock-free cache holds only what
    /// fits).
    memo: Memo,
    /// ⟨site, callee, caller c, caller v⟩ → anchored version, bounded
    /// (`EncoderConfig::anchor_memo_capacity`), consulted while it pays.
    anchors: AnchorMemo,
    /// Anchor records logged.
    anchors_logged: u64,
    slow_entries: u64,
    stays: u64,
    links: u64,
}

/// The encoder: thread safe, shared by every thread of the program.
pub struct Encoder<S: GraphSink> {
    limit: u64,
    /// `EncoderConfig::recomputed_stay_edges`.
    recomputed_stay_edges: usize,
    cache: SiteCache,
    /// ⟨site, callee, caller c⟩ → ⟨caller v, anchored context's version⟩: the anchors, readable
    /// without the lock (same table layout; the "v_in" word holds c).
    anchor_cache: SiteCache,
    state: Mutex<State>,
    sink: S,
}

impl<S: GraphSink> Encoder<S> {
    /// A new encoder with the two virtual roots registered (and reported to `sink`).
    pub fn new(config: EncoderConfig, sink: S) -> Encoder<S> {
        let enc = Encoder {
            limit: config.call_id_limit.max(2),
            recomputed_stay_edges: config.recomputed_stay_edges,
            cache: SiteCache::new(config.site_cache_capacity),
            anchor_cache: SiteCache::new(config.anchor_cache_capacity),
            state: Mutex::new(State {
                version: 0,
                graph_version: 0,
                nodes: Vec::new(),
                widths: Vec::new(),
                site_owner: Vec::new(),
                edges: FxHashMap::default(),
                back_edges: 0,
                mark: 0,
                forward: Vec::new(),
                backward: Vec::new(),
                stack: Vec::new(),
                memo: Memo::new(config.stay_memo_capacity, config.wide_memo_capacity),
                anchors: AnchorMemo::new(config.anchor_memo_capacity, ANCHOR_MEMO_WINDOW),
                anchors_logged: 0,
                slow_entries: 0,
                stays: 0,
                links: 0,
            }),
            sink,
        };
        for (name, site) in [("<thread>", THREAD_ROOT_SITE), ("<truncated>", TRUNCATED_ROOT_SITE)] {
            let m = enc.register_method(MethodMeta {
                class: "lucce".into(),
                name: name.into(),
                descriptor: "()V".into(),
                source_file: None,
                access_flags: 0,
            });
            enc.lock().set_numcc(m, 0, 1);
            let s = enc
                .register_site(SiteMeta { method: m, kind: SiteKind::Call, bci: 0, line: -1 })
                .expect("root method was just registered");
            debug_assert_eq!(s, site);
        }
        enc
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the state consistent (every mutation is
        // completed before the sink is called), so poisoning is not a reason to stop encoding.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sink this encoder reports to.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The lock-free cache, for runtimes that read it directly.
    pub fn site_cache(&self) -> &SiteCache {
        &self.cache
    }

    /// The lock-free anchor table, for runtimes that read it directly: bucket of ⟨site, callee,
    /// c⟩, ways {site << 32 | callee + 1, c, v, anchored version | ANCHOR_BIT}.
    pub fn anchor_cache(&self) -> &SiteCache {
        &self.anchor_cache
    }

    /// The exclusive upper bound of callIds.
    pub fn call_id_limit(&self) -> u64 {
        self.limit
    }

    /// Adds a method (a node) and reports it to the sink.
    pub fn register_method(&self, meta: MethodMeta) -> MethodId {
        let mut st = self.lock();
        let id = st.push_node(true);
        self.sink.method(id, &meta);
        id
    }

    /// Adds a site of an already registered method and reports it to the sink.
    pub fn register_site(&self, meta: SiteMeta) -> Result<SiteId, EncodeError> {
        let mut st = self.lock();
        if meta.method.0 as usize >= st.nodes.len() {
            return Err(EncodeError::UnknownMethod(meta.method.0));
        }
        let id = SiteId(st.site_owner.len() as u32);
        st.site_owner.push(meta.method);
        self.sink.site(id, &meta);
        Ok(id)
    }

    /// Adds a method under an id chosen by the caller (a runtime that numbers methods itself,
    /// ahead of registering them). Ids skipped over stay unknown; defining an id twice is refused.
    pub fn define_method(&self, id: MethodId, meta: &MethodMeta) -> Result<(), EncodeError> {
        let mut st = self.lock();
        st.define_method(id)?;
        self.sink.method(id, meta);
        Ok(())
    }

    /// Adds a site under an id chosen by the caller; its method must be known.
    pub fn define_site(&self, id: SiteId, meta: &SiteMeta) -> Result<(), EncodeError> {
        let mut st = self.lock();
        st.define_site(id, meta.method)?;
        self.sink.site(id, meta);
        Ok(())
    }

    /// [`Encoder::define_method`] for each of `methods`, then [`Encoder::define_site`] for each
    /// of `sites` (a class's), under one lock and handed to the sink in one call: once per method
    /// and site, the lock and the sink were most of the cost of loading a class in record mode.
    /// What is refused is left out and comes back with its error.
    pub fn define_all(&self, mut methods: Vec<(MethodId, MethodMeta)>, mut sites: Vec<(SiteId, SiteMeta)>) -> Vec<Refused> {
        let mut refused = Vec::new();
        let mut st = self.lock();
        methods.retain(|(id, _)| st.define_method(*id).map_err(|e| refused.push(Refused::Method(*id, e))).is_ok());
        sites.retain(|(id, meta)| st.define_site(*id, meta.method).map_err(|e| refused.push(Refused::Site(*id, e))).is_ok());
        self.sink.methods_and_sites(methods, sites);
        refused
    }

    /// The first unused method and site ids, for a runtime that numbers them itself.
    pub fn next_ids(&self) -> (MethodId, SiteId) {
        let st = self.lock();
        (MethodId(st.nodes.len() as u32), SiteId(st.site_owner.len() as u32))
    }

    /// The lock-free part of [`Encoder::enter`] alone: Some when the cache answers.
    #[inline]
    pub fn enter_cached(&self, site: SiteId, caller: Context, callee: MethodId) -> Option<Context> {
        // An answer at or past the limit only leads to the anchor table: it holds for any caller.
        let (add, v) = kept_answer(caller.v, self.limit, |k| self.cache.lookup(site.0, callee.0, k))?;
        match caller.c.checked_add(add) {
            Some(c) if c < self.limit => Some(Context { c, v }),
            // Past the limit: the anchor this exact caller context got before, if any.
            _ => self.anchor_cache.lookup_anchor(site.0, callee.0, caller.c, caller.v).map(|v| Context { c: 0, v }),
        }
    }

    /// The context of a thread's first frame, `callee`.
    pub fn enter_thread(&self, callee: MethodId) -> Result<Context, EncodeError> {
        self.enter(THREAD_ROOT_SITE, Context::ROOT, callee)
    }

    /// The context of a frame whose caller is unknown: its traces end in a truncation mark.
    pub fn enter_truncated(&self, callee: MethodId) -> Result<Context, EncodeError> {
        self.enter(TRUNCATED_ROOT_SITE, Context::ROOT, callee)
    }

    /// Algorithm 1: `callee` is entered from `site`, whose frame has context `caller`; returns the
    /// callee's context. Lock-free and allocation-free when the site has seen this callee and
    /// caller version before.
    #[inline]
    pub fn enter(&self, site: SiteId, caller: Context, callee: MethodId) -> Result<Context, EncodeError> {
        if let Some(ctx) = self.enter_cached(site, caller, callee) {
            return Ok(ctx);
        }
        self.enter_slow(site, caller, callee)
    }

    #[cold]
    fn enter_slow(&self, site: SiteId, caller: Context, callee: MethodId) -> Result<Context, EncodeError> {
        self.enter_locked(site, caller, callee, false).map(|c| c.expect("not only_known"))
    }

    /// [`Encoder::enter`] for a runtime that admits a ⟨site, callee⟩ pair only after checking it:
    /// None (and nothing changed) when the edge does not exist yet. One lock either way.
    pub fn enter_known(&self, site: SiteId, caller: Context, callee: MethodId) -> Result<Option<Context>, EncodeError> {
        if let Some(ctx) = self.enter_cached(site, caller, callee) {
            return Ok(Some(ctx));
        }
        self.enter_locked(site, caller, callee, true)
    }

    fn enter_locked(&self, site: SiteId, caller: Context, callee: MethodId, only_known: bool) -> Result<Option<Context>, EncodeError> {
        let mut guard = self.lock();
        let st = &mut *guard;
        let edge = st.edges.get(&(site.0, callee.0)).copied();
        if only_known && edge.is_none() {
            return Ok(None);
        }
        st.slow_entries += 1;
        let caller_m = *st.site_owner.get(site.0 as usize).ok_or(EncodeError::UnknownSite(site.0))?;
        if caller_m.0 == NO_METHOD {
            return Err(EncodeError::UnknownSite(site.0));
        }
        if !st.defined_method(callee.0 as usize) {
            return Err(EncodeError::UnknownMethod(callee.0));
        }
        if is_root(callee) {
            return Err(EncodeError::RootCallee(callee.0));
        }
        // Stays are kept under the caller's graph version g (see "Versions"); anything else under
        // the caller's version itself, which is g unless the caller is anchored.
        let g = key_version(caller.v);
        let known = edge.and_then(|e| st.recomputed(e, caller_m, callee, caller.v, self.limit, self.recomputed_stay_edges));
        // The memo keeps an answer past the limit under the caller's own version, like a link.
        let memoized = || kept_answer(caller.v, u64::MAX, |k| st.memo.get(site.0, callee.0, k));
        let (add, v_out) = match known.or_else(memoized) {
            Some(r) => r,
            None => {
                let r = st.update(&self.sink, site, caller_m, callee, caller.v, self.limit);
                match r {
                    (add, v_out) if v_out == caller.v => st.memo.insert(site.0, callee.0, g, (add, g)),
                    _ => st.memo.insert(site.0, callee.0, caller.v, r),
                }
                r
            }
        };
        // As `enter_cached` reads it. An answer at or past the limit holds for any caller: it only
        // sends readers to the anchor table, whose key is the whole caller context.
        if v_out == caller.v {
            self.cache.store(site.0, callee.0, g, add, g);
        } else if caller.v == g || add >= self.limit {
            self.cache.store(site.0, callee.0, g, add, v_out);
        } else {
            self.cache.store(site.0, callee.0, caller.v, add, v_out);
        }
        match caller.c.checked_add(add) {
            Some(c) if c < self.limit => Ok(Some(Context { c, v: v_out })),
            _ => {
                let ctx = st.anchor(&self.sink, site, callee, caller)?;
                self.anchor_cache.store_anchor(site.0, callee.0, caller.c, caller.v, ctx.v);
                Ok(Some(ctx))
            }
        }
    }

    pub fn stats(&self) -> EncoderStats {
        let st = self.lock();
        EncoderStats {
            methods: st.nodes.len() as u64,
            sites: st.site_owner.len() as u64,
            edges: st.edges.len() as u64,
            back_edges: st.back_edges,
            version: st.version,
            anchors: st.anchors_logged,
            slow_entries: st.slow_entries,
            stays: st.stays,
            links: st.links,
        }
    }
}

/// The answer for a caller of version `v` in a table that keeps answers as
/// [`Encoder::enter_locked`] does, read with `lookup(key version)`: a stay is kept under v's
/// graph version g and keeps `v`; a link kept under g holds for a caller whose version is g
/// itself, or for any caller when its add is at least `any_caller_from`; an anchored caller's
/// own links are kept under its whole version.
#[inline]
fn kept_answer(v: u64, any_caller_from: u64, lookup: impl Fn(u64) -> Option<(u64, u64)>) -> Option<(u64, u64)> {
    let g = key_version(v);
    match lookup(g) {
        Some((add, v_out)) if v_out == g => Some((add, v)),
        Some((add, v_out)) if v == g || add >= any_caller_from => Some((add, v_out)),
        _ if v != g => lookup(v),
        _ => None,
    }
}

impl State {
    /// One step of Algorithm 1 under the lock: ⟨av(e), version⟩ for the callee entered through
    /// `site` (in `p`) from a frame of version `v_in` (see "Versions" for the two cases).
    ///
    /// A back edge changes nothing and returns an addition value of `limit`, so that every entry
    /// through it, cached or not, takes the anchor path.
    fn update(&mut self, sink: &impl GraphSink, site: SiteId, p: MethodId, n: MethodId, v_in: u64, limit: u64) -> (u64, u64) {
        let idx = match self.edges.get(&(site.0, n.0)).copied() {
            Some(BACK_EDGE) => return (limit, 0),
            Some(i) => Some(i as usize),
            None if self.closes_cycle(p, n) => {
                self.edges.insert((site.0, n.0), BACK_EDGE);
                self.back_edges += 1;
                return (limit, 0);
            }
            None => None,
        };
        if let Some(i) = idx {
            if let Some(add) = self.stay(p, n, i, key_version(v_in), limit) {
                self.stays += 1;
                return (add, v_in);
            }
        }
        let i = idx.unwrap_or_else(|| {
            self.version += 1;
            sink.graph(&GraphEvent::Edge { version: self.version, site, callee: n });
            push_tight(&mut self.nodes[p.0 as usize].outgoing, n);
            let node = &mut self.nodes[n.0 as usize];
            push_tight(&mut node.incoming, p);
            push_tight(&mut node.incoming_added, self.version);
            self.edges.insert((site.0, n.0), node.incoming.len() as u32 - 1);
            node.incoming.len() - 1
        });
        // av(e) and numCC(n) in one pass, with the callers' current numCC.
        let (mut sum, mut add) = (0u64, 0u64);
        for (j, q) in self.nodes[n.0 as usize].incoming.iter().enumerate() {
            if j == i {
                add = sum;
            }
            sum = sum.saturating_add(self.numcc(*q));
        }
        let numcc = sum.min(limit);
        if self.numcc(n) != numcc {
            self.version += 1;
            self.set_numcc(n, self.version, numcc);
            sink.graph(&GraphEvent::NumCC { version: self.version, method: n, numcc });
        }
        self.version += 1;
        self.links += 1;
        sink.graph(&GraphEvent::Link { version: self.version, site, callee: n, caller_v: v_in });
        self.graph_version = self.version;
        (add, self.version)
    }

    /// [`State::update`]'s answer for an entry through the existing edge `edge` (its
    /// value in `edges`) from `p` to `n`, computed again instead
    /// of kept in the memo, when that is cheap: through a back edge always ⟨limit, 0⟩ (every
    /// entry through it anchors), and through an edge with fewer than `max_before` edges before
    /// it in its callee's incoming list the stay, if there is one. About as fast as the memo's
    /// lookup, which misses the CPU caches, and most of the memo's entries were such answers
    /// (lucene_search: 342k stays and 93k links; recursive code one back-edge entry per anchored
    /// caller version). Exact because both are functions of the graph's history at the caller's
    /// version, which never changes (an edge stays a back edge): they are the answer `update`
    /// gave, or would have given, the first time; when a stay was not possible the entry linked
    /// and the memo has the link.
    fn recomputed(&mut self, edge: u32, p: MethodId, n: MethodId, v_in: u64, limit: u64, max_before: usize) -> Option<(u64, u64)> {
        if edge == BACK_EDGE {
            return Some((limit, 0));
        }
        if edge as usize >= max_before {
            return None;
        }
        let add = self.stay(p, n, edge as usize, key_version(v_in), limit)?;
        self.stays += 1;
        Some((add, v_in))
    }

    /// av(e) as of version `g` for the edge `incoming[i]` of `n`, if a callee entered through it
    /// from any frame of `p` at `g` can keep `g`: the edge exists at `g`, and its whole range
    /// [av, av + numCC(p)) lies within numCC(n) at `g` (so the callee's own callId stays below
    /// its numCC, which its callees' ranges rely on). numCC saturated at the limit always has
    /// room: the overflow rule keeps callIds below it.
    fn stay(&self, p: MethodId, n: MethodId, i: usize, g: u64, limit: u64) -> Option<u64> {
        let node = &self.nodes[n.0 as usize];
        if node.incoming_added[i] > g {
            return None;
        }
        // Edges are appended in version order, so every edge before `i` exists at `g` too.
        let add = node.incoming[..i].iter().fold(0u64, |sum, &q| sum.saturating_add(self.numcc_at(q, g)));
        let room = self.numcc_at(n, g);
        (room >= limit || add.saturating_add(self.numcc_at(p, g)) <= room).then_some(add)
    }

    /// Whether the edge p → n would close a cycle of counted edges. When it would not, the
    /// topological order is repaired for it (Pearce–Kelly) before the caller adds the edge.
    fn closes_cycle(&mut self, p: MethodId, n: MethodId) -> bool {
        if p == n {
            return true;
        }
        let (lower, upper) = (self.nodes[n.0 as usize].ord, self.nodes[p.0 as usize].ord);
        if upper < lower {
            return false; // p already comes before n
        }
        // Forward from n over nodes placed before p: reaching p means a cycle.
        self.mark = self.mark.wrapping_add(1);
        if self.mark == 0 {
            // Wrapped: clear the old marks so that none can equal a new one.
            self.nodes.iter_mut().for_each(|node| node.mark = 0);
            self.mark = 1;
        }
        let mark = self.mark;
        let (mut forward, mut backward, mut stack) =
            (std::mem::take(&mut self.forward), std::mem::take(&mut self.backward), std::mem::take(&mut self.stack));
        forward.clear();
        backward.clear();
        stack.clear();
        stack.push(n);
        self.nodes[n.0 as usize].mark = mark;
        let mut cycle = false;
        'search: while let Some(w) = stack.pop() {
            forward.push(w);
            for i in 0..self.nodes[w.0 as usize].outgoing.len() {
                let x = self.nodes[w.0 as usize].outgoing[i];
                if x == p {
                    cycle = true;
                    break 'search;
                }
                let node = &mut self.nodes[x.0 as usize];
                if node.mark != mark && node.ord < upper {
                    node.mark = mark;
                    stack.push(x);
                }
            }
        }
        if !cycle {
            // Backward from p over nodes placed after n; then the nodes found backward take the
            // lowest of the positions involved, in their old order, and the forward ones the rest.
            stack.clear();
            stack.push(p);
            self.nodes[p.0 as usize].mark = mark;
            while let Some(w) = stack.pop() {
                backward.push(w);
                for i in 0..self.nodes[w.0 as usize].incoming.len() {
                    let x = self.nodes[w.0 as usize].incoming[i];
                    let node = &mut self.nodes[x.0 as usize];
                    if node.mark != mark && node.ord > lower {
                        node.mark = mark;
                        stack.push(x);
                    }
                }
            }
            let nodes = &mut self.nodes;
            backward.sort_unstable_by_key(|m| nodes[m.0 as usize].ord);
            forward.sort_unstable_by_key(|m| nodes[m.0 as usize].ord);
            let mut positions: Vec<u32> = backward.iter().chain(forward.iter()).map(|m| nodes[m.0 as usize].ord).collect();
            positions.sort_unstable();
            for (m, pos) in backward.iter().chain(forward.iter()).zip(positions) {
                nodes[m.0 as usize].ord = pos;
            }
        }
        (self.forward, self.backward, self.stack) = (forward, backward, stack);
        cycle
    }

    /// Starts a new segment at `callee` (see "Overflow rule"): its anchored version. An error,
    /// and nothing logged, once anchor versions no longer fit one (after 2^31 graph events).
    fn anchor(&mut self, sink: &impl GraphSink, site: SiteId, callee: MethodId, caller: Context) -> Result<Context, EncodeError> {
        let key = (site.0, callee.0, caller.c, caller.v);
        let v = self.anchors.get_or_log(key, || {
            let a = self.version + 1;
            let v = anchored_version(a, self.graph_version).ok_or(EncodeError::AnchorsExhausted(a))?;
            self.version = a;
            sink.graph(&GraphEvent::Anchor { version: a, site, callee, caller_c: caller.c, caller_v: caller.v });
            self.anchors_logged += 1;
            Ok(v)
        })?;
        Ok(Context { c: 0, v })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::{GraphEvent, GraphSink};

    /// A node's list takes one element's room at its first push, then doubles.
    #[test]
    fn node_lists_start_at_one_element() {
        let mut v: ThinVec<(u64, u64)> = ThinVec::new();
        let mut caps = Vec::new();
        for i in 0..9 {
            push_tight(&mut v, (i, i));
            caps.push(v.capacity());
        }
        assert_eq!(caps, [1, 2, 4, 4, 8, 8, 8, 8, 16]);
        assert!(v.iter().copied().eq((0..9).map(|i| (i, i))));
    }

    struct NoSink;
    impl GraphSink for NoSink {
        fn method(&self, _: MethodId, _: &MethodMeta) {}
        fn site(&self, _: SiteId, _: &SiteMeta) {}
        fn graph(&self, _: &GraphEvent) {}
    }

    /// Whether `to` is reachable from `from` over `edges` (plain DFS).
    fn reaches(edges: &[(u32, u32)], from: u32, to: u32) -> bool {
        let mut seen = vec![from];
        let mut stack = vec![from];
        while let Some(w) = stack.pop() {
            if w == to {
                return true;
            }
            for &(a, b) in edges {
                if a == w && !seen.contains(&b) {
                    seen.push(b);
                    stack.push(b);
                }
            }
        }
        false
    }

    #[test]
    fn back_edges_are_exactly_the_cycle_closing_ones_and_the_order_stays_topological() {
        const N: u32 = 40;
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |m: u32| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % m as u64) as u32
        };
        for _round in 0..20 {
            let mut st = Encoder::new(EncoderConfig::default(), NoSink).state.into_inner().unwrap();
            let base = st.nodes.len() as u32;
            for _ in 0..N {
                st.push_node(true);
            }
            let mut counted: Vec<(u32, u32)> = Vec::new();
            for _ in 0..300 {
                let (p, n) = (base + next(N), base + next(N));
                if counted.contains(&(p, n)) {
                    continue;
                }
                let expect_cycle = reaches(&counted, n, p);
                let got = st.closes_cycle(MethodId(p), MethodId(n));
                assert_eq!(got, expect_cycle, "edge {p} -> {n} over {counted:?}");
                if !got {
                    st.nodes[p as usize].outgoing.push(MethodId(n));
                    st.nodes[n as usize].incoming.push(MethodId(p));
                    counted.push((p, n));
                }
                for &(a, b) in &counted {
                    assert!(st.nodes[a as usize].ord < st.nodes[b as usize].ord, "order broken at {a} -> {b}");
                }
            }
            let mut ords: Vec<u32> = st.nodes.iter().map(|n| n.ord).collect();
            ords.sort_unstable();
            assert!(ords.iter().enumerate().all(|(i, &o)| o == i as u32), "positions stay a permutation of the ids");
        }
    }

    #[test]
    fn define_all_refuses_like_one_by_one_and_hands_over_the_rest_at_once() {
        #[derive(Default)]
        struct Batches(Mutex<Vec<(Vec<u32>, Vec<u32>)>>);
        impl GraphSink for Batches {
            fn method(&self, _: MethodId, _: &MethodMeta) {}
            fn site(&self, _: SiteId, _: &SiteMeta) {}
            fn graph(&self, _: &GraphEvent) {}
            fn methods_and_sites(&self, methods: Vec<(MethodId, MethodMeta)>, sites: Vec<(SiteId, SiteMeta)>) {
                self.0.lock().unwrap().push((methods.iter().map(|m| m.0 .0).collect(), sites.iter().map(|s| s.0 .0).collect()));
            }
        }
        let enc = Encoder::new(EncoderConfig::default(), Batches::default());
        let (m0, s0) = enc.next_ids();
        let meta = MethodMeta { class: "T".into(), name: "m".into(), descriptor: "()V".into(), source_file: None, access_flags: 0 };
        let site = |m: u32| SiteMeta { method: MethodId(m), kind: SiteKind::Call, bci: 0, line: 1 };
        enc.define_method(MethodId(m0.0), &meta).unwrap();
        let refused = enc.define_all(
            vec![(MethodId(m0.0), meta.clone()), (MethodId(m0.0 + 1), meta.clone()), (MethodId(m0.0 + 2), meta.clone()), (MethodId(m0.0 + 2), meta)],
            vec![(SiteId(s0.0), site(m0.0 + 1)), (SiteId(s0.0 + 1), site(m0.0 + 9)), (SiteId(s0.0), site(m0.0 + 2))],
        );
        assert_eq!(
            refused,
            [
                Refused::Method(MethodId(m0.0), EncodeError::Redefined(m0.0)),
                Refused::Method(MethodId(m0.0 + 2), EncodeError::Redefined(m0.0 + 2)),
                Refused::Site(SiteId(s0.0 + 1), EncodeError::UnknownMethod(m0.0 + 9)),
                Refused::Site(SiteId(s0.0), EncodeError::Redefined(s0.0)),
            ]
        );
        assert_eq!(*enc.sink().0.lock().unwrap(), [(vec![m0.0 + 1, m0.0 + 2], vec![s0.0])]);
    }

    #[test]
    fn recursion_repeated_adds_nothing_and_numcc_stays_put() {
        let enc = Encoder::new(EncoderConfig::default(), NoSink);
        let meta = |name: &str| MethodMeta { class: "T".into(), name: name.into(), descriptor: "()V".into(), source_file: None, access_flags: 0 };
        let (main, f) = (enc.register_method(meta("main")), enc.register_method(meta("f")));
        let site = |m| enc.register_site(SiteMeta { method: m, kind: SiteKind::Call, bci: 0, line: 1 }).unwrap();
        let (s_main, s_f1, s_f2) = (site(main), site(f), site(f));
        let run = |depth: usize| {
            let root = enc.enter_thread(main).unwrap();
            let mut ctx = enc.enter(s_main, root, f).unwrap();
            for d in 0..depth {
                ctx = enc.enter(if d % 3 == 0 { s_f1 } else { s_f2 }, ctx, f).unwrap();
                assert!(ctx.is_anchor(), "a recursive entry starts a segment");
            }
        };
        run(500);
        let after_first = enc.stats();
        assert_eq!(after_first.back_edges, 2);
        assert_eq!(enc.lock().numcc(f), 1, "recursion does not grow numCC");
        run(500);
        assert_eq!(enc.stats().version, after_first.version, "a repeated recursion logs nothing");
        // Every anchored caller of the recursion has c = 0: the anchor table must tell them
        // apart by version, or each entry takes the lock again.
        let locked = enc.stats().slow_entries;
        run(500);
        assert_eq!(enc.stats().slow_entries, locked, "a repeated recursion is answered lock-free");
    }

    #[test]
    fn the_stays_of_a_recursion_are_shared_by_its_segments() {
        let enc = Encoder::new(EncoderConfig { recomputed_stay_edges: 0, ..Default::default() }, NoSink);
        let meta = |name: &str| MethodMeta { class: "T".into(), name: name.into(), descriptor: "()V".into(), source_file: None, access_flags: 0 };
        let (main, f, leaf) = (enc.register_method(meta("main")), enc.register_method(meta("f")), enc.register_method(meta("leaf")));
        let site = |m| enc.register_site(SiteMeta { method: m, kind: SiteKind::Call, bci: 0, line: 1 }).unwrap();
        let (s_main, s_rec, s_leaf) = (site(main), site(f), site(f));
        let root = enc.enter_thread(main).unwrap();
        let top = enc.enter(s_main, root, f).unwrap();
        // The graph first: f → leaf and the back edge f → f.
        enc.enter(s_leaf, top, leaf).unwrap();
        enc.enter(s_rec, top, f).unwrap();
        let before = enc.stats();
        let mut ctx = top;
        for _ in 0..300 {
            ctx = enc.enter(s_rec, ctx, f).unwrap();
            assert!(ctx.is_anchor());
            let l = enc.enter(s_leaf, ctx, leaf).unwrap();
            assert_eq!(l.v, ctx.v, "a stay keeps the anchored version");
        }
        let after = enc.stats();
        assert_eq!(after.version - before.version, 299, "one anchor per new level, nothing else logged");
        // Each new level's anchor takes the lock once, and the first segment's stay into `leaf`;
        // every other segment is at the same graph version and finds that stay in the cache
        // (keyed by the anchored version, each segment would take the lock for it: 599).
        assert_eq!(after.slow_entries - before.slow_entries, 300);
    }
}
