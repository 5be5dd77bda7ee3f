//! Class-file rewriter: inserts the lucce probes into every method of a class.
//!
//! INTERFACE CONTRACT between the rewriter (this module) and the agent shell (jvmti, runtime class).
//! Both sides code against exactly this; change it only in agreement.
//!
//! Probes (all `invokestatic` into the runtime class `lucce/Runtime`, see `probes.rs`):
//! - method entry, first thing in every method with code (legal before `super()`):
//!     push methodId (int); invokestatic lucce/Runtime.enter(I)J; lstore CTX
//!     invokestatic lucce/Runtime.version()J; lstore VER
//!   CTX and VER are two new long locals appended after the method's max_locals.
//! - before every invoke instruction (invokevirtual/special/static/interface/dynamic):
//!     push siteId (int); lload CTX; lload VER; invokestatic lucce/Runtime.call(IJJ)V
//! - right after every allocation (new, newarray, anewarray, multianewarray):
//!     push allocSiteId (int); lload CTX; lload VER; invokestatic lucce/Runtime.alloc(IJJ)V
//! Classes whose internal name starts with `lucce/` are never rewritten.

/// Ids handed out by the agent for methods and sites; the rewriter asks for one per method,
/// call site and allocation site it instruments, in bytecode order.
pub trait SiteRegistry {
    /// A dense id for a method with code.
    fn method(&mut self, m: &MethodInfo<'_>) -> u32;
    /// A dense id for a call or allocation site of `method_id`.
    fn site(&mut self, method_id: u32, site: &SiteInfo) -> u32;
}

/// What the decoder needs to print a frame of this method like the JVM does.
#[derive(Debug, Clone, Copy)]
pub struct MethodInfo<'a> {
    /// Internal class name, `java/lang/String`.
    pub class: &'a str,
    pub name: &'a str,
    pub descriptor: &'a str,
    /// From the SourceFile attribute, if present.
    pub source_file: Option<&'a str>,
    pub access_flags: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteKind {
    Call,
    Alloc,
}

#[derive(Debug, Clone, Copy)]
pub struct SiteInfo {
    pub kind: SiteKind,
    /// Bytecode index in the ORIGINAL (un-rewritten) method.
    pub bci: u32,
    /// The LineNumberTable line HotSpot would report for `bci` (entry whose start_pc equals it,
    /// else the last one below it), or -1 when the method has no line table.
    pub line: i32,
}
