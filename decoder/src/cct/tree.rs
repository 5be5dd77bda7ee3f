//! The CCT itself: a node arena with u32 ids and u64 counters, merging of partial trees, the
//! canonical form, and trees derived from a finished one (reversed, filtered).

use std::fmt::Write as _;

use rustc_hash::FxHashMap;

use super::CctError;

/// What a node stands for, packed into 32 bits: a 2-bit tag and a 30-bit id. Packing keeps a
/// node at 24 bytes; 2^30 sites, methods or threads is far beyond any real program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(u32);

/// A [`Key`] unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// The global root (node 0).
    Root,
    /// A frame: a site id when the tree distinguishes lines, else a method id.
    Frame(u32),
    /// A per-thread root (thread id of the store).
    Thread(u32),
    /// Where a context whose real bottom is unknown starts (see `Bottom::Truncated`).
    Truncated,
}

const TAG_SHIFT: u32 = 30;
const ID_MASK: u32 = (1 << TAG_SHIFT) - 1;
const TAG_FRAME: u32 = 0;
const TAG_THREAD: u32 = 1;
const TAG_TRUNCATED: u32 = 2;
const TAG_ROOT: u32 = 3;

impl Key {
    pub const ROOT: Key = Key(TAG_ROOT << TAG_SHIFT);
    pub const TRUNCATED: Key = Key(TAG_TRUNCATED << TAG_SHIFT);
    /// Largest id a frame or thread key can hold.
    pub const MAX_ID: u32 = ID_MASK;

    /// A frame key (site id with lines, method id without).
    pub fn frame(id: u32) -> Result<Key, CctError> {
        Self::tagged(TAG_FRAME, id, "site or method")
    }

    /// A per-thread root key.
    pub fn thread(id: u32) -> Result<Key, CctError> {
        Self::tagged(TAG_THREAD, id, "thread")
    }

    fn tagged(tag: u32, id: u32, what: &'static str) -> Result<Key, CctError> {
        if id > ID_MASK {
            return Err(CctError::IdTooLarge { what, id, max: ID_MASK });
        }
        Ok(Key(tag << TAG_SHIFT | id))
    }

    pub fn kind(self) -> KeyKind {
        let id = self.0 & ID_MASK;
        match self.0 >> TAG_SHIFT {
            TAG_FRAME => KeyKind::Frame(id),
            TAG_THREAD => KeyKind::Thread(id),
            TAG_TRUNCATED => KeyKind::Truncated,
            _ => KeyKind::Root,
        }
    }
}

/// Additive metrics of one context. Adding a field (bytes and objects for allocations) only
/// needs [`Metrics::add`] to learn it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Metrics {
    /// Events whose context is exactly this node. In calls mode (the agent's `sample=1`, every
    /// method entry a `Sample` event) this is the node's invocation count.
    pub events: u64,
}

impl Metrics {
    pub fn add(&mut self, o: Metrics) {
        self.events += o.events;
    }

    pub fn is_zero(&self) -> bool {
        *self == Metrics::default()
    }
}

/// "No call site": the `via` of nodes whose parent is not a frame (roots, thread roots).
pub const NO_SITE: u32 = 0;

/// One node: 24 bytes (`parent` 4, `key` 4, `via` 4, padding 4, `metrics` 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// Parent node id (`u32::MAX` for the root).
    pub parent: u32,
    pub key: Key,
    /// The smallest site id of the parent frame through which this node was entered. Sites are
    /// numbered in source order within a method, so ordering siblings by `via` lists callees
    /// in the order their calls appear in the caller, whatever order events came in (a minimum,
    /// so merging keeps it order-independent).
    pub via: u32,
    pub metrics: Metrics,
}

/// A tree under construction: the arena plus a (parent, key) → child index. Workers build one
/// each; partial trees are merged with [`CctBuilder::merge`]; [`CctBuilder::finish`] puts the
/// result in canonical form. Children always get larger ids than their parent, which merging
/// and finishing rely on.
#[derive(Debug, Clone)]
pub struct CctBuilder {
    nodes: Vec<Node>,
    index: FxHashMap<(u32, Key), u32>,
}

impl Default for CctBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl CctBuilder {
    /// A tree holding only the root (id 0).
    pub fn new() -> Self {
        CctBuilder {
            nodes: vec![Node { parent: u32::MAX, key: Key::ROOT, via: NO_SITE, metrics: Metrics::default() }],
            index: FxHashMap::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        false // the root is always there
    }

    /// The child of `parent` with `key`, if there is one.
    pub fn find(&self, parent: u32, key: Key) -> Option<u32> {
        self.index.get(&(parent, key)).copied()
    }

    /// Nodes by id; parents precede their children.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The child of `parent` with `key`, created if new; `via` lowers its ordering hint.
    pub fn child(&mut self, parent: u32, key: Key, via: u32) -> Result<u32, CctError> {
        if let Some(&id) = self.index.get(&(parent, key)) {
            let n = &mut self.nodes[id as usize];
            n.via = n.via.min(via);
            return Ok(id);
        }
        let id = u32::try_from(self.nodes.len()).ok().filter(|&id| id != u32::MAX).ok_or(CctError::TooManyNodes)?;
        self.nodes.push(Node { parent, key, via, metrics: Metrics::default() });
        self.index.insert((parent, key), id);
        Ok(id)
    }

    /// Adds metrics to a node.
    #[inline]
    pub fn add(&mut self, node: u32, m: Metrics) {
        self.nodes[node as usize].metrics.add(m);
    }

    /// Adds `m` at the context `path` (root first: key and via per level).
    pub fn add_path(&mut self, path: &[(Key, u32)], m: Metrics) -> Result<u32, CctError> {
        let mut node = 0;
        for &(key, via) in path {
            node = self.child(node, key, via)?;
        }
        self.add(node, m);
        Ok(node)
    }

    /// Merges another partial tree into this one (ParCCT's integration of a partial CCT).
    pub fn merge(&mut self, other: &CctBuilder) -> Result<(), CctError> {
        // Parents precede children in `other`, so each parent is mapped before its children.
        let mut map = vec![0u32; other.nodes.len()];
        self.nodes[0].metrics.add(other.nodes[0].metrics);
        for (i, n) in other.nodes.iter().enumerate().skip(1) {
            let id = self.child(map[n.parent as usize], n.key, n.via)?;
            self.add(id, n.metrics);
            map[i] = id;
        }
        Ok(())
    }

    /// The canonical form: nodes in pre-order, siblings sorted by (`via`, key). Equal profiles
    /// give equal [`Cct`]s, whatever order their events were added in.
    pub fn finish(self) -> Cct {
        let n = self.nodes.len();
        // Children lists by counting sort on the parent, then each sorted canonically.
        let mut start = vec![0u32; n + 1];
        for node in &self.nodes[1..] {
            start[node.parent as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut kids = vec![0u32; n.saturating_sub(1)];
        for (i, node) in self.nodes.iter().enumerate().skip(1) {
            let p = node.parent as usize;
            kids[fill[p] as usize] = i as u32;
            fill[p] += 1;
        }
        for p in 0..n {
            kids[start[p] as usize..start[p + 1] as usize].sort_unstable_by_key(|&c| (self.nodes[c as usize].via, self.nodes[c as usize].key));
        }
        // Iterative pre-order (stacks can be 10,000s of frames deep).
        let mut nodes = Vec::with_capacity(n);
        let mut depth = Vec::with_capacity(n);
        let mut stack: Vec<(u32, u32, u32)> = vec![(0, u32::MAX, 0)]; // (old id, new parent, depth)
        while let Some((old, parent, d)) = stack.pop() {
            let new_id = nodes.len() as u32;
            let mut node = self.nodes[old as usize];
            node.parent = parent;
            nodes.push(node);
            depth.push(d);
            for &c in kids[start[old as usize] as usize..start[old as usize + 1] as usize].iter().rev() {
                stack.push((c, new_id, d + 1));
            }
        }
        Cct::from_preorder(nodes, depth)
    }
}

/// A finished calling context tree in canonical form. Node 0 is the root; every node's subtree
/// is the id range `id..end(id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cct {
    nodes: Vec<Node>,
    end: Vec<u32>,
    depth: Vec<u32>,
    total: Vec<Metrics>,
}

impl Cct {
    fn from_preorder(nodes: Vec<Node>, depth: Vec<u32>) -> Cct {
        let n = nodes.len();
        let mut size = vec![1u32; n];
        let mut total: Vec<Metrics> = nodes.iter().map(|n| n.metrics).collect();
        for i in (1..n).rev() {
            let p = nodes[i].parent as usize;
            size[p] += size[i];
            let t = total[i];
            total[p].add(t);
        }
        let end = (0..n).map(|i| i as u32 + size[i]).collect();
        Cct { nodes, end, depth, total }
    }

    /// Number of nodes, root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    pub fn node(&self, id: u32) -> &Node {
        &self.nodes[id as usize]
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Metrics of the node's whole subtree.
    pub fn total(&self, id: u32) -> Metrics {
        self.total[id as usize]
    }

    /// Frames from the root (0) down to this node.
    pub fn depth(&self, id: u32) -> u32 {
        self.depth[id as usize]
    }

    pub fn max_depth(&self) -> u32 {
        self.depth.iter().copied().max().unwrap_or(0)
    }

    /// One past the last node of the subtree of `id`.
    pub fn end(&self, id: u32) -> u32 {
        self.end[id as usize]
    }

    pub fn parent(&self, id: u32) -> Option<u32> {
        let p = self.nodes[id as usize].parent;
        (p != u32::MAX).then_some(p)
    }

    /// Children in canonical order.
    pub fn children(&self, id: u32) -> impl Iterator<Item = u32> + '_ {
        let end = self.end[id as usize];
        let mut next = id + 1;
        std::iter::from_fn(move || {
            (next < end).then(|| {
                let c = next;
                next = self.end[c as usize];
                c
            })
        })
    }

    /// Keys from the root's child down to `id`.
    pub fn path(&self, mut id: u32) -> Vec<Key> {
        let mut out = Vec::with_capacity(self.depth[id as usize] as usize);
        while id != 0 {
            out.push(self.nodes[id as usize].key);
            id = self.nodes[id as usize].parent;
        }
        out.reverse();
        out
    }

    /// The callers view ("bottom-up", `--reverse`): each context's own metrics are added at its
    /// path read innermost frame first, so the root's children are the frames events happened
    /// in, with their callers below.
    pub fn reverse(&self) -> Result<Cct, CctError> {
        let mut b = CctBuilder::new();
        let mut path = Vec::new();
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            if n.metrics.is_zero() {
                continue;
            }
            path.clear();
            // Callers have no call-site order relative to each other here: order by key.
            path.extend(self.path(i as u32).into_iter().rev().map(|k| (k, NO_SITE)));
            b.add_path(&path, n.metrics)?;
        }
        b.nodes[0].metrics.add(self.nodes[0].metrics);
        Ok(b.finish())
    }

    /// The tree restricted to the contexts for which `keep(id)` holds: their own metrics are
    /// kept, every other node's are dropped, and nodes left without metrics below them vanish.
    pub fn retain(&self, mut keep: impl FnMut(u32) -> bool) -> Result<Cct, CctError> {
        let n = self.nodes.len();
        let mut needed: Vec<bool> = (0..n).map(|i| i == 0 || (!self.nodes[i].metrics.is_zero() && keep(i as u32))).collect();
        for i in (1..n).rev() {
            if needed[i] {
                needed[self.nodes[i].parent as usize] = true;
            }
        }
        let mut b = CctBuilder::new();
        let mut map = vec![0u32; n];
        for i in 1..n {
            if !needed[i] {
                continue;
            }
            let node = self.nodes[i];
            let id = b.child(map[node.parent as usize], node.key, node.via)?;
            map[i] = id;
            if keep(i as u32) {
                b.add(id, node.metrics);
            }
        }
        if keep(0) {
            b.nodes[0].metrics.add(self.nodes[0].metrics);
        }
        Ok(b.finish())
    }

    /// The compact notation of the ParCCT paper's figures: `root{a:1{b:2,c:1}}` — each node's
    /// label and own event count, children in braces in canonical order.
    pub fn compact(&self, mut label: impl FnMut(Key) -> String) -> String {
        let mut out = String::from("root");
        let mut open: Vec<u32> = vec![self.end(0)];
        if self.nodes.len() > 1 {
            out.push('{');
        }
        for i in 1..self.nodes.len() as u32 {
            while open.last().is_some_and(|&e| i >= e) {
                out.push('}');
                open.pop();
            }
            if self.nodes[i as usize].parent + 1 != i {
                out.push(',');
            }
            let _ = write!(out, "{}:{}", label(self.nodes[i as usize].key), self.nodes[i as usize].metrics.events);
            if self.end(i) > i + 1 {
                out.push('{');
                open.push(self.end(i));
            }
        }
        // The root's own entry needs no brace when it has no children.
        let closing = open.len() - usize::from(self.nodes.len() <= 1);
        out.push_str(&"}".repeat(closing));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(id: u32) -> Key {
        Key::frame(id).unwrap()
    }

    #[test]
    fn node_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 24);
    }

    #[test]
    fn merge_in_any_order_gives_the_same_canonical_tree() {
        let paths: Vec<Vec<(Key, u32)>> = vec![
            vec![(k(1), 0)],
            vec![(k(1), 0), (k(2), 5)],
            vec![(k(1), 0), (k(3), 4), (k(2), 9)],
            vec![(k(1), 0), (k(2), 7)],
        ];
        let build = |order: &[usize]| {
            let mut parts: Vec<CctBuilder> = Vec::new();
            for &i in order {
                let mut b = CctBuilder::new();
                b.add_path(&paths[i], Metrics { events: 1 }).unwrap();
                parts.push(b);
            }
            let mut acc = CctBuilder::new();
            for p in &parts {
                acc.merge(p).unwrap();
            }
            acc.finish()
        };
        let a = build(&[0, 1, 2, 3]);
        let b = build(&[3, 2, 1, 0]);
        assert_eq!(a, b);
        let label = |k: Key| match k.kind() {
            KeyKind::Frame(i) => format!("m{i}"),
            _ => "?".into(),
        };
        // m3 (via 4) precedes m2 (via min(5, 7) = 5).
        assert_eq!(a.compact(label), "root{m1:1{m3:0{m2:1},m2:2}}");
        assert_eq!(a.total(0).events, 4);
        assert_eq!(a.max_depth(), 3);
        assert_eq!(CctBuilder::new().finish().compact(label), "root");
        let r = a.reverse().unwrap();
        // A reversed tree's own counts sit at the outermost caller; totals give the view.
        assert_eq!(r.compact(label), "root{m1:1,m2:0{m1:2,m3:0{m1:1}}}");
        let m2 = r.children(0).nth(1).unwrap();
        assert_eq!(r.total(m2).events, 3);
        let only_deep = a.retain(|id| a.depth(id) == 3).unwrap();
        assert_eq!(only_deep.compact(label), "root{m1:0{m3:0{m2:1}}}");
    }
}
