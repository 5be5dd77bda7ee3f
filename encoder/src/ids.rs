//! The numbers the encoder hands out.

/// Dense id of a method (a node of the call graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MethodId(pub u32);

/// Dense id of a site: a call site, an allocation site or an event site inside one method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteId(pub u32);

/// A version with this bit set is not a graph version but the id of an anchor record: the frame
/// that carries it is the first frame of a new segment (see `Encoder` docs, "Overflow rule").
pub const ANCHOR_BIT: u64 = 1 << 63;

/// The encoding of one frame's calling context: ⟨callId, graph version⟩.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Context {
    /// The callId: a number below the callee's numCC in graph version `v`.
    pub c: u64,
    /// The graph version in which `c` was computed, or an anchor id with [`ANCHOR_BIT`] set.
    pub v: u64,
}

impl Context {
    /// The context of the virtual roots: ⟨0, 0⟩.
    pub const ROOT: Context = Context { c: 0, v: 0 };

    /// Whether this frame starts a new segment (its caller is found through an anchor record).
    pub fn is_anchor(self) -> bool {
        self.v & ANCHOR_BIT != 0
    }
}
