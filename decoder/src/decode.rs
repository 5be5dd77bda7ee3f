//! Turning ⟨site, callId, version⟩ into frames, with memoized shared suffixes.

use lucce_encoder::{THREAD_ROOT, TRUNCATED_ROOT};
use rustc_hash::FxHashMap;

use crate::graph::Graph;
use crate::DecodeError;

/// A decoded calling context: a node in the decoder's tree. Equal stacks have equal ids within
/// one [`ContextDecoder`].
pub type CtxId = u32;

/// How a trace ends at the bottom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bottom {
    /// At the thread's first frame: the trace is complete.
    Thread,
    /// The real bottom is unknown (the thread or frame predates the agent).
    Truncated,
}

/// One frame of a decoded trace: the method of `site`, at the line of `site`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame {
    pub method: u32,
    pub site: u32,
}

#[derive(Debug, Clone, Copy)]
struct CtxNode {
    /// The site of the frame (in the caller of the next-inner frame), `u32::MAX` for roots.
    site: u32,
    method: u32,
    parent: CtxId,
}

const THREAD_CTX: CtxId = 0;
const TRUNCATED_CTX: CtxId = 1;
/// A legitimate JVM stack is far shallower; a longer walk means a damaged store.
const MAX_DEPTH: usize = 50_000_000;

/// One worker's decoder: its memo of ⟨method, c, v⟩ → context and its context tree.
pub struct ContextDecoder<'g> {
    graph: &'g Graph,
    memo: FxHashMap<(u32, u64, u64), CtxId>,
    children: FxHashMap<(CtxId, u32), CtxId>,
    nodes: Vec<CtxNode>,
    depth: Vec<u32>,
    /// Scratch for `decode_frame` (kept for its capacity).
    path: Vec<((u32, u64, u64), u32, u32)>,
}

impl<'g> ContextDecoder<'g> {
    pub fn new(graph: &'g Graph) -> Self {
        let root = |m: lucce_encoder::MethodId| CtxNode { site: u32::MAX, method: m.0, parent: CtxId::MAX };
        ContextDecoder {
            graph,
            memo: FxHashMap::default(),
            children: FxHashMap::default(),
            nodes: vec![root(THREAD_ROOT), root(TRUNCATED_ROOT)],
            depth: vec![0, 0],
            path: Vec::new(),
        }
    }

    pub fn graph(&self) -> &'g Graph {
        self.graph
    }

    /// Entries in the memo of ⟨method, c, v⟩ → context.
    pub fn memo_len(&self) -> usize {
        self.memo.len()
    }

    /// Forgets the memo (decoding gets slower, nothing else changes): the contexts decoded so far
    /// keep their ids. The memo grows with the distinct encodings of frames, which, unlike the
    /// distinct contexts, have no bound in a long recording.
    pub fn clear_memo(&mut self) {
        self.memo = FxHashMap::default();
    }

    /// Decodes an event that happened at `site` in a frame with context ⟨c, v⟩. The result's
    /// innermost frame is `site` itself.
    pub fn decode(&mut self, site: u32, c: u64, v: u64) -> Result<CtxId, DecodeError> {
        let method = self.graph.site(site).ok_or(DecodeError::UnknownSite(site))?.method;
        let below = self.decode_frame(method, c, v)?;
        Ok(self.child(below, site, method))
    }

    /// The context below a frame of `method` entered with ⟨c, v⟩ (its callers).
    fn decode_frame(&mut self, method: u32, c: u64, v: u64) -> Result<CtxId, DecodeError> {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        let r = self.decode_frame_into(&mut path, method, c, v);
        self.path = path;
        r
    }

    fn decode_frame_into(&mut self, path: &mut Vec<((u32, u64, u64), u32, u32)>, method: u32, c: u64, v: u64) -> Result<CtxId, DecodeError> {
        let (mut n, mut c, mut v) = (method, c, v);
        let mut base = loop {
            if let Some(&id) = self.memo.get(&(n, c, v)) {
                break id;
            }
            if n == THREAD_ROOT.0 || n == TRUNCATED_ROOT.0 {
                if c != 0 {
                    return Err(DecodeError::RootWithCallId(c));
                }
                break if n == THREAD_ROOT.0 { THREAD_CTX } else { TRUNCATED_CTX };
            }
            let step = self.graph.step(n, c, v)?;
            path.push(((n, c, v), step.site, step.caller));
            if path.len() > MAX_DEPTH {
                return Err(DecodeError::TooDeep(path.len()));
            }
            (n, c, v) = (step.caller, step.c, step.v);
        };
        // `path[i]` says: frame key i was called from site path[i].1 in method path[i].2, whose
        // own key is path[i+1] (or the base). Build the contexts bottom-up.
        for &(key, site, caller) in path.iter().rev() {
            base = if caller == THREAD_ROOT.0 || caller == TRUNCATED_ROOT.0 { base } else { self.child(base, site, caller) };
            self.memo.insert(key, base);
        }
        Ok(base)
    }

    /// The context `parent` extended by a frame of `method` at `site`; `parent` itself for a
    /// method the JVM hides from stack traces.
    fn child(&mut self, parent: CtxId, site: u32, method: u32) -> CtxId {
        if self.graph.method(method).is_some_and(|m| m.access_flags & lucce_encoder::ACC_HIDDEN_FRAME != 0) {
            return parent;
        }
        if let Some(&id) = self.children.get(&(parent, site)) {
            return id;
        }
        let id = self.nodes.len() as CtxId;
        self.nodes.push(CtxNode { site, method, parent });
        self.depth.push(self.depth[parent as usize] + 1);
        self.children.insert((parent, site), id);
        id
    }

    /// The frames of a context, innermost first.
    pub fn frames(&self, mut id: CtxId) -> impl Iterator<Item = Frame> + '_ {
        std::iter::from_fn(move || {
            let n = self.nodes.get(id as usize)?;
            if id == THREAD_CTX || id == TRUNCATED_CTX {
                return None;
            }
            id = n.parent;
            Some(Frame { method: n.method, site: n.site })
        })
    }

    /// How the context ends at the bottom.
    pub fn bottom(&self, mut id: CtxId) -> Bottom {
        while id != THREAD_CTX && id != TRUNCATED_CTX {
            id = self.nodes[id as usize].parent;
        }
        if id == THREAD_CTX {
            Bottom::Thread
        } else {
            Bottom::Truncated
        }
    }

    /// Number of frames of a context.
    pub fn depth(&self, id: CtxId) -> u32 {
        self.depth[id as usize]
    }

    /// The caller context (None at a root).
    pub fn parent(&self, id: CtxId) -> Option<CtxId> {
        (id != THREAD_CTX && id != TRUNCATED_CTX).then(|| self.nodes[id as usize].parent)
    }

    /// The innermost frame of a context (None at a root).
    pub fn frame(&self, id: CtxId) -> Option<Frame> {
        let n = self.nodes.get(id as usize)?;
        (id != THREAD_CTX && id != TRUNCATED_CTX).then_some(Frame { method: n.method, site: n.site })
    }

    /// Distinct contexts decoded so far (roots included).
    pub fn contexts(&self) -> usize {
        self.nodes.len()
    }
}
