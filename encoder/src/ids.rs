//! The numbers the encoder hands out.

/// Dense id of a method (a node of the call graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MethodId(pub u32);

/// Dense id of a site: a call site, an allocation site or an event site inside one method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteId(pub u32);

/// A version with this bit set is an *anchored version*: `ANCHOR_BIT | a << 32 | g`, where `a`
/// is the version of an anchor record (the frame that carries it, or one of the frames entered
/// from it by stays, belongs to the segment that anchor starts; see `Encoder` docs, "Overflow
/// rule") and `g` the graph version at `a`, i.e. that of the last graph event before it that is
/// not an anchor (anchors do not change the graph). Frames of a segment thus carry the graph
/// version they were computed in next to the anchor that tells them apart, and the encoder's
/// caches answer their stays by `g` alone (see [`key_version`]).
pub const ANCHOR_BIT: u64 = 1 << 63;

/// Anchor record versions that fit an anchored version: below 2^31.
pub const ANCHOR_LIMIT: u64 = 1 << 31;

/// The anchored version of anchor `a` at graph version `g`; None when `a` does not fit.
#[inline]
pub fn anchored_version(a: u64, g: u64) -> Option<u64> {
    (a < ANCHOR_LIMIT && g <= a).then_some(ANCHOR_BIT | a << 32 | g)
}

/// The graph version of frame version `v`: `v` itself, or an anchored version's `g`.
#[inline]
pub fn key_version(v: u64) -> u64 {
    if v & ANCHOR_BIT != 0 {
        v & 0xFFFF_FFFF
    } else {
        v
    }
}

/// The anchor record version of an anchored version, else None.
#[inline]
pub fn anchor_of(v: u64) -> Option<u64> {
    (v & ANCHOR_BIT != 0).then_some((v & !ANCHOR_BIT) >> 32)
}

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
