//! What the encoder tells the outside world: metadata and graph changes.

use crate::ids::{MethodId, SiteId};

/// A method as the JVM names it, enough to print a frame of a stack trace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MethodMeta {
    /// Binary class name with dots, `java.lang.String`.
    pub class: String,
    pub name: String,
    pub descriptor: String,
    /// The SourceFile attribute, `String.java`.
    pub source_file: Option<String>,
    /// JVM access flags (`ACC_NATIVE` = 0x0100 marks a native method), plus
    /// [`ACC_HIDDEN_FRAME`].
    pub access_flags: u16,
}

/// A method the JVM leaves out of stack traces (annotated `@Hidden`): decoders leave its frames
/// out too. Bit 15 of the access flags, which no JVM method flag uses.
pub const ACC_HIDDEN_FRAME: u16 = 0x8000;

/// What kind of place in a method a site is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteKind {
    /// An invoke instruction, or a virtual root's entry point.
    Call,
    /// An allocation instruction.
    Alloc,
    /// A place where events are recorded (a mark, a sample at method entry).
    Event,
}

/// A site inside a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteMeta {
    pub method: MethodId,
    pub kind: SiteKind,
    /// Bytecode index in the original method.
    pub bci: u32,
    /// The source line the JVM reports for `bci`, or -1.
    pub line: i32,
}

/// One change of the call graph, at its own version. Versions start at 1 and have no gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphEvent {
    /// The counted edge ⟨site, callee⟩ was added as the last incoming edge of `callee`.
    Edge { version: u64, site: SiteId, callee: MethodId },
    /// A frame of `callee` entered through `site` with this version has its caller at version
    /// `caller_v` (encoder.rs, "Versions").
    Link { version: u64, site: SiteId, callee: MethodId, caller_v: u64 },
    /// numCC of `method` was recomputed to a new value.
    NumCC { version: u64, method: MethodId, numcc: u64 },
    /// Entering `callee` through `site` from a caller frame ⟨caller_c, caller_v⟩ would have given
    /// a callId at or above the limit: the callee starts a new segment with context
    /// ⟨0, `ids::anchored_version(version, g)`⟩, g the graph version at `version`. Does not change
    /// the graph.
    Anchor { version: u64, site: SiteId, callee: MethodId, caller_c: u64, caller_v: u64 },
}

impl GraphEvent {
    pub fn version(&self) -> u64 {
        match *self {
            GraphEvent::Edge { version, .. } | GraphEvent::Link { version, .. } | GraphEvent::NumCC { version, .. } | GraphEvent::Anchor { version, .. } => version,
        }
    }
}

/// Receives metadata and graph changes, in order. Called with the encoder's lock held, so an
/// implementation must not block for long (hand the record to another thread).
pub trait GraphSink: Send + Sync {
    fn method(&self, id: MethodId, meta: &MethodMeta);
    fn site(&self, id: SiteId, meta: &SiteMeta);
    fn graph(&self, event: &GraphEvent);
    /// Many methods, then many sites (a class's): a sink that can take them in one piece
    /// saves a hand-over per record.
    fn methods_and_sites(&self, methods: Vec<(MethodId, MethodMeta)>, sites: Vec<(SiteId, SiteMeta)>) {
        for (id, m) in &methods {
            self.method(*id, m);
        }
        for (id, s) in &sites {
            self.site(*id, s);
        }
    }
}

/// A sink that drops everything (benchmarks, tests of the encoder alone).
impl GraphSink for () {
    fn method(&self, _: MethodId, _: &MethodMeta) {}
    fn site(&self, _: SiteId, _: &SiteMeta) {}
    fn graph(&self, _: &GraphEvent) {}
}

impl<T: GraphSink + ?Sized> GraphSink for std::sync::Arc<T> {
    fn method(&self, id: MethodId, meta: &MethodMeta) {
        (**self).method(id, meta)
    }
    fn site(&self, id: SiteId, meta: &SiteMeta) {
        (**self).site(id, meta)
    }
    fn graph(&self, event: &GraphEvent) {
        (**self).graph(event)
    }
    fn methods_and_sites(&self, methods: Vec<(MethodId, MethodMeta)>, sites: Vec<(SiteId, SiteMeta)>) {
        (**self).methods_and_sites(methods, sites)
    }
}
