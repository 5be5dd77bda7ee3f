//! The call graph at every version, as per-node histories: each node keeps its incoming edges
//! (with the version that added them) and its numCC values with the versions that set them; the
//! Link and Anchor records by version. "As of version v" is a binary search. Chosen over a
//! persistent map (imbl) because the histories cost a few words per graph event and a lookup
//! touches two cache lines.

use std::fmt;

use lucce_encoder::{anchor_of, anchored_version, is_root, key_version};
use lucce_log_format::{GraphRecord, MethodRecord, SiteRecord, StoreReader};
use rustc_hash::FxHashMap;

use crate::DecodeError;

#[derive(Debug, Clone, Copy)]
struct InEdge {
    site: u32,
    caller: u32,
    added: u64,
}

#[derive(Debug, Default)]
struct Node {
    incoming: Vec<InEdge>,
    numcc: History,
}

/// A Link record: a frame of `callee` entered through `site` at this version has its caller at
/// `caller_v` (lucce-encoder's encoder.rs, "Versions").
#[derive(Debug, Clone, Copy)]
struct Link {
    site: u32,
    callee: u32,
    caller_v: u64,
}

#[derive(Debug, Clone, Copy)]
struct Anchor {
    site: u32,
    callee: u32,
    caller_c: u64,
    caller_v: u64,
    /// The version of the frames of its segment (`lucce_encoder::anchored_version`).
    v: u64,
}

/// One step back from a frame: the site in the caller and the caller's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    pub site: u32,
    pub caller: u32,
    pub c: u64,
    pub v: u64,
}

/// Sizes, for `lucce stats`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GraphStats {
    pub methods: u64,
    pub sites: u64,
    pub edges: u64,
    pub versions: u64,
    pub anchors: u64,
}

/// The replayed graph log of one store, with its metadata.
pub struct Graph {
    methods: Vec<MethodRecord>,
    sites: Vec<SiteRecord>,
    nodes: Vec<Node>,
    links: FxHashMap<u64, Link>,
    anchors: FxHashMap<u64, Anchor>,
    last_version: u64,
    /// The last version that is not an anchor's: the graph as of `last_version`.
    graph_version: u64,
    edges: u64,
}

/// What a frame prints as: `class.method(file:line)`, like `StackTraceElement`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo<'a> {
    pub class: &'a str,
    pub method: &'a str,
    pub file: Option<&'a str>,
    /// -1 when unknown.
    pub line: i32,
    pub native: bool,
}

impl fmt::Display for FrameInfo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}(", self.class, self.method)?;
        match (self.native, self.file, self.line) {
            (true, _, _) => write!(f, "Native Method)"),
            (false, Some(file), l) if l >= 0 => write!(f, "{file}:{l})"),
            (false, Some(file), _) => write!(f, "{file})"),
            (false, None, _) => write!(f, "Unknown Source)"),
        }
    }
}

const ACC_NATIVE: u16 = 0x0100;

impl Graph {
    /// Replays the committed part of a store.
    pub fn from_store(store: &StoreReader) -> Result<Graph, DecodeError> {
        let methods = store.methods()?;
        let sites = store.sites()?;
        let mut g = Graph::new(methods, sites);
        for r in store.graph() {
            g.apply(&r?)?;
        }
        Ok(g)
    }

    /// A graph with metadata and no edges yet; feed it with [`Graph::apply`].
    pub fn new(methods: Vec<MethodRecord>, sites: Vec<SiteRecord>) -> Graph {
        let nodes = (0..methods.len())
            .map(|m| {
                let mut numcc = History::default();
                if is_root(lucce_encoder::MethodId(m as u32)) {
                    numcc.push(0, 1);
                }
                Node { numcc, ..Node::default() }
            })
            .collect();
        Graph { methods, sites, nodes, links: FxHashMap::default(), anchors: FxHashMap::default(), last_version: 0, graph_version: 0, edges: 0 }
    }

    /// Applies the next graph event (versions must come in order, without gaps).
    pub fn apply(&mut self, r: &GraphRecord) -> Result<(), DecodeError> {
        let bad = |why: String| DecodeError::BadGraph(why);
        match *r {
            GraphRecord::Edge { version, site, callee } => {
                self.expect_version(version)?;
                let caller = self.sites.get(site as usize).ok_or_else(|| bad(format!("version {version}: unknown site {site}")))?.method;
                if callee as usize >= self.nodes.len() || caller as usize >= self.nodes.len() {
                    return Err(bad(format!("version {version}: unknown method")));
                }
                self.nodes[callee as usize].incoming.push(InEdge { site, caller, added: version });
                self.edges += 1;
            }
            GraphRecord::Link { version, site, callee, caller_v } => {
                self.expect_version(version)?;
                if site as usize >= self.sites.len() || callee as usize >= self.nodes.len() {
                    return Err(bad(format!("link {version}: unknown site or method")));
                }
                self.links.insert(version, Link { site, callee, caller_v });
            }
            GraphRecord::NumCC { version, method, numcc } => {
                self.expect_version(version)?;
                let node = self.nodes.get_mut(method as usize).ok_or_else(|| bad(format!("version {version}: unknown method {method}")))?;
                node.numcc.push(version, numcc);
            }
            GraphRecord::Anchor { version, site, callee, caller_c, caller_v } => {
                self.expect_version(version)?;
                if site as usize >= self.sites.len() || callee as usize >= self.nodes.len() {
                    return Err(bad(format!("anchor {version}: unknown site or method")));
                }
                let v = anchored_version(version, self.graph_version)
                    .ok_or_else(|| bad(format!("anchor {version}: past the last version an anchor can have")))?;
                self.anchors.insert(version, Anchor { site, callee, caller_c, caller_v, v });
            }
        }
        self.last_version += 1;
        if !matches!(r, GraphRecord::Anchor { .. }) {
            self.graph_version = self.last_version;
        }
        Ok(())
    }

    fn expect_version(&self, version: u64) -> Result<(), DecodeError> {
        if version != self.last_version + 1 {
            return Err(DecodeError::BadGraph(format!("version {version} follows {}", self.last_version)));
        }
        Ok(())
    }

    pub fn stats(&self) -> GraphStats {
        GraphStats {
            methods: self.methods.len() as u64,
            sites: self.sites.len() as u64,
            edges: self.edges,
            versions: self.last_version,
            anchors: self.anchors.len() as u64,
        }
    }

    pub fn method(&self, id: u32) -> Option<&MethodRecord> {
        self.methods.get(id as usize)
    }

    pub fn site(&self, id: u32) -> Option<&SiteRecord> {
        self.sites.get(id as usize)
    }

    /// The printable frame of `site`: its method, at the site's line.
    pub fn frame_info(&self, site: u32) -> Option<FrameInfo<'_>> {
        let s = self.sites.get(site as usize)?;
        let m = self.methods.get(s.method as usize)?;
        Some(FrameInfo {
            class: &m.class,
            method: &m.name,
            file: m.source_file.as_deref(),
            line: s.line,
            native: m.access_flags & ACC_NATIVE != 0,
        })
    }

    fn numcc_at(&self, m: u32, v: u64) -> u64 {
        self.nodes[m as usize].numcc.at(v)
    }

    /// One decoding step (the paper's De, with the version rule of lucce-encoder's encoder.rs,
    /// "Versions"): the edge into `n` that the frame ⟨c, v⟩ came through, and the caller's context.
    pub(crate) fn step(&self, n: u32, c: u64, v: u64) -> Result<Step, DecodeError> {
        let g = key_version(v);
        let anchor = anchor_of(v);
        if let Some(a) = anchor {
            match self.anchors.get(&a) {
                Some(an) if an.v != v => return Err(DecodeError::BadAnchor(a)),
                Some(an) if an.callee == n && c == 0 => {
                    return Ok(Step { site: an.site, caller: self.sites[an.site as usize].method, c: an.caller_c, v: an.caller_v });
                }
                Some(_) => {} // a frame below the anchored one, entered by a stay: in graph g
                None => return Err(DecodeError::BadAnchor(a)),
            }
        }
        if g > self.last_version {
            return Err(DecodeError::VersionBeyondStore { version: g, last: self.last_version });
        }
        let node = self.nodes.get(n as usize).ok_or(DecodeError::UnknownMethod(n))?;
        let mut av = 0u64;
        for e in node.incoming.iter().take_while(|e| e.added <= g) {
            let width = self.numcc_at(e.caller, g);
            if c < av.saturating_add(width) {
                // A frame of an anchored version entered by a stay: its caller has that version.
                let caller_v = match self.links.get(&g) {
                    Some(l) if anchor.is_none() && l.site == e.site && l.callee == n => l.caller_v,
                    _ => v,
                };
                return Ok(Step { site: e.site, caller: e.caller, c: c - av, v: caller_v });
            }
            av = av.saturating_add(width);
        }
        Err(DecodeError::NoEdge { method: self.method_name(n), c, version: v })
    }

    pub(crate) fn method_name(&self, n: u32) -> String {
        match self.methods.get(n as usize) {
            Some(m) => format!("{}.{}{}", m.class, m.name, m.descriptor),
            None => format!("method #{n}"),
        }
    }
}

/// Values by version (versions ascending), with every `STRIDE`-th version copied into a small
/// index: a lookup searches the index (a few cache lines, usually cached) and then one stretch of
/// `STRIDE` entries, instead of binary-searching a long history line by line from memory.
#[derive(Debug, Default)]
struct History {
    entries: Vec<(u64, u64)>,
    index: Vec<u64>,
}

const STRIDE: usize = 16;

impl History {
    fn push(&mut self, version: u64, value: u64) {
        // Every STRIDE-th entry starts a stretch.
        if self.index.len() * STRIDE == self.entries.len() {
            self.index.push(version);
        }
        self.entries.push((version, value));
    }

    /// The value at version v (0 before the first entry).
    fn at(&self, v: u64) -> u64 {
        let stretch = match self.index.partition_point(|&ver| ver <= v) {
            0 => return 0,
            j => &self.entries[(j - 1) * STRIDE..(j * STRIDE).min(self.entries.len())],
        };
        // The stretch's first version is ≤ v, so the answer is in it.
        stretch[stretch.partition_point(|&(ver, _)| ver <= v) - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::{Graph, History};
    use crate::DecodeError;
    use lucce_encoder::anchored_version;
    use lucce_log_format::{GraphRecord, MethodRecord, SiteRecord};

    #[test]
    fn an_anchored_version_must_carry_its_anchors_graph_version() {
        let m = |name: &str| MethodRecord { class: "T".into(), name: name.into(), descriptor: "()V".into(), source_file: None, access_flags: 0 };
        let site = |method| SiteRecord { method, kind: 0, bci: 0, line: 1 };
        // Roots 0 and 1 with their sites 0 and 1; main = 2, f = 3; site 2 in main, 3 and 4 in f.
        let mut g = Graph::new(vec![m("<thread>"), m("<truncated>"), m("main"), m("f")], vec![site(0), site(1), site(2), site(3), site(3)]);
        for r in [
            GraphRecord::Edge { version: 1, site: 0, callee: 2 },
            GraphRecord::NumCC { version: 2, method: 2, numcc: 1 },
            GraphRecord::Link { version: 3, site: 0, callee: 2, caller_v: 0 },
            GraphRecord::Edge { version: 4, site: 2, callee: 3 },
            GraphRecord::NumCC { version: 5, method: 3, numcc: 1 },
            GraphRecord::Link { version: 6, site: 2, callee: 3, caller_v: 3 },
            GraphRecord::Anchor { version: 7, site: 3, callee: 3, caller_c: 0, caller_v: 6 },
            GraphRecord::Anchor { version: 8, site: 4, callee: 3, caller_c: 0, caller_v: 6 },
        ] {
            g.apply(&r).unwrap();
        }
        // Both anchors are at graph version 6, the last Link.
        let step = g.step(3, 0, anchored_version(8, 6).unwrap()).unwrap();
        assert_eq!((step.site, step.c, step.v), (4, 0, 6));
        for wrong in [anchored_version(8, 5).unwrap(), anchored_version(8, 7).unwrap(), anchored_version(9, 6).unwrap()] {
            assert!(matches!(g.step(3, 0, wrong), Err(DecodeError::BadAnchor(_))), "{wrong:#x}");
        }
    }

    #[test]
    fn history_lookups_match_a_plain_search() {
        for len in [0usize, 1, 15, 16, 17, 100, 1000] {
            let mut h = History::default();
            let mut plain = Vec::new();
            for i in 0..len as u64 {
                // Versions ascending with gaps (and a repeat now and then).
                let ver = 3 * i + i % 7 / 6 * 2 - (i % 11 == 0 && i > 0) as u64;
                h.push(ver, i + 100);
                plain.push((ver, i + 100));
            }
            for v in 0..3 * len as u64 + 5 {
                let want = match plain.partition_point(|&(ver, _)| ver <= v) {
                    0 => 0,
                    i => plain[i - 1].1,
                };
                assert_eq!(h.at(v), want, "len {len} v {v}");
            }
        }
    }
}
