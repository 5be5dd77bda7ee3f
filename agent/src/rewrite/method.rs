//! Rewriting one method's `Code` attribute, by one of two paths, each step able to skip the
//! method. Both start by parsing the Code attribute and its line and local tables.
//!
//! The direct path ([`code::Direct`], most methods): one walk over the code writes the new code,
//! asking the registry for the method's id at its first site and for each site's id as it comes;
//! then the exception table and frames are checked against the new positions, and the tables
//! written. A method the walk or those checks reject has taken its ids already; they are wasted
//! (never published with a rewritten class body that uses them), which is harmless for the
//! registry. Only malformed code gets that far, and it is rare.
//!
//! The general path (methods that may grow past 32 KiB, `Object.<init>`, a switch before the
//! first probe):
//! 1. Decode instructions, frames and tables (all checks that do not depend on ids happen here,
//!    so a method skipped here never consumes registry ids).
//! 2. Lay the code out with worst-case (3-byte) id pushes; if even that does not fit, skip.
//! 3. Ask the registry for the method id and site ids (bytecode order), choose the shortest
//!    pushes, lay out again, emit.
//!
//! After step 3 a method can still be skipped in one narrow case: the real layout shifts a
//! switch's padding so that a branch needs widening that the worst-case layout did not, and the
//! frame for it cannot be inferred (or the code then exceeds 64 KiB). Its ids are then wasted too.

use std::ops::Range;

use super::classfile::{be_u16, for_each_attr, ConstPool, Reader, MAX_CP_COUNT};
use super::code::{self, Boundaries, CodeMap, Decoded, Direct, Kind, Layout, Probe, Pushes, Segmented, Walk, OP_GOTO, OP_JSR, OP_RETURN};
use super::frames::{self, Frames};
use super::pool::PoolEdit;
use super::leaves::Leaf;
use super::probes::{self, IntPush, ProbeLocals};
use super::typesim;
use super::{MethodInfo, SiteInfo, SiteKind, SiteRegistry, SkipReason};

/// Per-class facts every method needs.
pub(crate) struct ClassCtx<'a, 'n> {
    pub bytes: &'a [u8],
    pub major: u16,
    pub this_class: u16,
    pub class_name: &'n str,
    pub this_is_object: bool,
    pub source_file: Option<&'n str>,
}

/// Buffers reused across the methods of a class (and across classes, see `mod.rs`).
#[derive(Default)]
pub(crate) struct Scratch<'a> {
    d: Decoded,
    direct: Direct,
    lay: Layout,
    frames: Frames<'a>,
    lines: Vec<(u16, u16)>,
    /// The exception handlers' offsets, sorted, each once (see [`read_handlers`]).
    handlers: Vec<u32>,
    pushes: Vec<Option<IntPush>>,
    /// Sub-attributes of the Code attribute: (whole, info, kind).
    sub: Vec<(Range<usize>, Range<usize>, u8)>,
    /// What the class's invoked constant-pool entries call (see [`Targets`]).
    targets: Targets,
    /// Per class, by constant-pool index, the `ATTR_*` kind of each attribute name met so far
    /// plus 1 (0: not met yet): a class's methods share their attribute names' entries.
    attr_kinds: Vec<u8>,
}

/// Per class, [`invoke_target`]'s answer for each constant-pool entry already invoked: most
/// entries are invoked from several sites, and the answer decodes and hashes two strings.
#[derive(Default)]
struct Targets {
    /// By constant-pool index: 0 if not known yet, else 1 + its index in `known`.
    slot: Vec<u16>,
    known: Vec<Target>,
}

#[derive(Clone, Copy)]
struct Target {
    /// Computed for an invokedynamic (which reads the entry as an InvokeDynamic entry).
    indy: bool,
    /// The entry names a method of `lucce/Lucce`.
    lucce_api: bool,
    key: u64,
    /// A method the JIT may replace by an intrinsic (intrinsics.rs).
    intrinsic: bool,
}

/// What an invoke calls, as its site and probes need it.
#[derive(Clone, Copy)]
struct Invoked {
    /// An invokestatic of a method of `lucce/Lucce`.
    api: bool,
    /// [`super::target_key`] of the name and descriptor it references (see [`invoke_target`]).
    target: u64,
    /// The JIT may replace it by an intrinsic: a drop probe goes after it (intrinsics.rs).
    drop: bool,
}

/// What an allocation site's probe is, in the terms of [`Invoked`].
const ALLOCATION: Invoked = Invoked { api: false, target: super::ANY_TARGET, drop: false };

impl Scratch<'_> {
    /// The same buffers, emptied, for the next class (whose bytes live elsewhere).
    pub fn recycle(self) -> Scratch<'static> {
        Scratch {
            d: self.d,
            direct: self.direct,
            lay: self.lay,
            frames: self.frames.recycle(),
            lines: self.lines,
            handlers: self.handlers,
            pushes: self.pushes,
            sub: self.sub,
            targets: Targets {
                slot: clear(self.targets.slot),
                known: clear(self.targets.known),
            },
            attr_kinds: clear(self.attr_kinds),
        }
    }
}

fn clear<T>(mut v: Vec<T>) -> Vec<T> {
    v.clear();
    v
}

const ATTR_OTHER: u8 = 0;
const ATTR_SMT: u8 = 1;
const ATTR_LNT: u8 = 2;
const ATTR_LVT: u8 = 3;
/// LocalVariableTypeTable: checked and remapped like a LocalVariableTable, without the probe
/// locals' entries.
const ATTR_LVTT: u8 = 4;
const ATTR_DROP: u8 = 5;

/// The `ATTR_*` kind of the Code sub-attribute named by entry `name`, remembered in `kinds`
/// (see `Scratch::attr_kinds`).
fn attr_kind(kinds: &mut Vec<u8>, cp: &ConstPool<'_>, name: u16) -> u8 {
    if kinds.len() != cp.count() as usize {
        // The first attribute of the class (the memo is emptied between classes).
        kinds.clear();
        kinds.resize(cp.count() as usize, 0);
    }
    if let Some(&k) = kinds.get(name as usize).filter(|&&k| k != 0) {
        return k - 1;
    }
    let kind = match cp.utf8(name) {
        Some(b"StackMapTable") => ATTR_SMT,
        Some(b"LineNumberTable") => ATTR_LNT,
        Some(b"LocalVariableTable") => ATTR_LVT,
        Some(b"LocalVariableTypeTable") => ATTR_LVTT,
        // Their offsets (type paths into locals, new, casts) would need remapping; type
        // annotations on code are not used by the JVM, so dropping them is safe.
        Some(b"RuntimeVisibleTypeAnnotations") | Some(b"RuntimeInvisibleTypeAnnotations") => ATTR_DROP,
        _ => ATTR_OTHER,
    };
    if let Some(k) = kinds.get_mut(name as usize) {
        *k = kind + 1;
    }
    kind
}

fn bad_table(what: &'static str) -> SkipReason {
    SkipReason::MalformedTable(what)
}

/// The method's Code attribute, already located in the class bytes.
pub(crate) struct MethodIn<'a, 'n> {
    pub name: &'n str,
    pub desc: &'n str,
    pub desc_bytes: &'a [u8],
    pub access: u16,
    /// The whole Code attribute (name index through info).
    pub attr: Range<usize>,
    pub info: Range<usize>,
    /// Record mode makes it a leaf although it calls (leaves.rs): no site probes.
    pub leaf: Leaf,
}

/// HotSpot's line for `bci`: the entry whose start_pc equals it (first such in table order),
/// else the last one in table order among those with the largest start_pc below it.
/// `sorted` is stably sorted by start_pc.
#[cfg(test)]
pub(crate) fn line_for(sorted: &[(u16, u16)], has_table: bool, bci: u32) -> i32 {
    let p = sorted.partition_point(|&(pc, _)| (pc as u32) < bci);
    line_at(sorted, has_table, p, bci)
}

/// [`line_for`] given `p`, the number of entries with start_pc below `bci`.
#[inline]
fn line_at(sorted: &[(u16, u16)], has_table: bool, p: usize, bci: u32) -> i32 {
    if !has_table {
        return -1;
    }
    if let Some(&(pc, line)) = sorted.get(p) {
        if pc as u32 == bci {
            return line as i32;
        }
    }
    match p.checked_sub(1).and_then(|q| sorted.get(q)) {
        Some(&(_, line)) => line as i32,
        None => -1,
    }
}

/// The parts of a Code attribute, located in its info.
struct CodeAttr<'a> {
    info: &'a [u8],
    max_stack: u16,
    max_locals: u16,
    code: &'a [u8],
    nexc: usize,
    exc_start: usize,
    /// Name index of the (first) StackMapTable, if any.
    smt_name: Option<u16>,
    has_lnt: bool,
}

const TRUNCATED: SkipReason = SkipReason::MalformedCode("truncated Code attribute");

/// Rewrites one method; appends the replacement for the whole Code attribute to `out`. On
/// error, `out` may hold part of it (the caller truncates).
///
/// Most methods take the direct rewrite ([`code::Direct`]: one pass over the code, probes
/// inserted as their instructions come); a method that may grow past 32 KiB, `Object.<init>`
/// when its `return`s get call probes and one with a switch before its first probe take the
/// general one (segments, a layout that can widen branches, [`code::emit`]). Both give the
/// same bytes, but for a class with a method the direct path rejects after taking its ids
/// (malformed code): that class keeps the ids' constants in its pool.
pub(crate) fn rewrite_method<'a>(
    cx: &ClassCtx<'a, '_>,
    m: &MethodIn<'a, '_>,
    pool: &mut PoolEdit<'a>,
    reg: &mut dyn SiteRegistry,
    s: &mut Scratch<'a>,
    out: &mut Vec<u8>,
) -> Result<Path, SkipReason> {
    let c = parse_code_attr(cx, m, pool, s)?;
    read_tables(&c, s)?;
    read_handlers(&c, &mut s.handlers)?;
    let object_init = cx.this_is_object && m.name == "<init>" && reg.probes().finalizer_call();
    let sites = object_init || !m.leaf.drops_calls();
    let leaf_path = if m.leaf == Leaf::Throws { Path::ThrowLeaf } else { Path::LeafCaller };
    let direct = reg.direct_rewrite()
        && c.code.len() as u32 <= code::DIRECT_MAX_CODE
        && s.handlers.len() <= code::DIRECT_MAX_HANDLERS
        && !object_init
        && ProbeLocals::after(c.max_locals, false).is_some()
        && c.max_stack.checked_add(probes::EXTRA_STACK).is_some();
    if direct {
        if let Walk::Done = rewrite_direct(cx, m, &c, pool, reg, s, out, sites)? {
            return Ok(if sites { Path::Direct } else { leaf_path });
        }
    }
    if !sites {
        rewrite_general(cx, m, &c, pool, reg, s, out, false)?;
        return Ok(leaf_path);
    }
    let start = out.len();
    match rewrite_general(cx, m, &c, pool, reg, s, out, true) {
        Ok(()) => Ok(Path::General),
        // The site probes do not fit. Without them the method is a leaf (an entry probe, one int
        // local, no extra stack): its frames still show in traces, and each of its calls finds
        // its caller by a stack walk, which reads the frame's line. Left as it was, the method
        // would be invisible and its callees would decode under its caller (a Clojure function
        // of thousands of calls, past 64 KiB with its call probes).
        Err(why @ (SkipReason::CodeTooLarge | SkipReason::TooManyLocals | SkipReason::TooManyStackSlots)) => {
            out.truncate(start);
            rewrite_general(cx, m, &c, pool, reg, s, out, false)?;
            Ok(Path::EntryOnly(why))
        }
        Err(e) => Err(e),
    }
}

/// Which rewrite a method took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    Direct,
    General,
    /// The general one without site probes, for this reason.
    EntryOnly(SkipReason),
    /// Either one without site probes: a leaf whose calls only build exceptions
    /// ([`Leaf::Throws`]).
    ThrowLeaf,
    /// Either one without site probes: a leaf whose calls enter leaves ([`Leaf::Caller`]).
    LeafCaller,
}

/// Locates the parts of the method's Code attribute and classifies its sub-attributes into
/// `s.sub`.
#[inline(always)]
fn parse_code_attr<'a>(cx: &ClassCtx<'a, '_>, m: &MethodIn<'a, '_>, pool: &PoolEdit<'a>, s: &mut Scratch<'a>) -> Result<CodeAttr<'a>, SkipReason> {
    let info: &'a [u8] = cx.bytes.get(m.info.clone()).ok_or(SkipReason::MalformedCode("attribute range"))?;
    let trunc = TRUNCATED;
    let mut r = Reader::new(info, 0);
    let max_stack = r.u2().ok_or(trunc)?;
    let max_locals = r.u2().ok_or(trunc)?;
    let code_len = r.u4().ok_or(trunc)? as usize;
    if code_len == 0 || code_len > code::MAX_CODE as usize {
        return Err(SkipReason::MalformedCode("code_length out of range"));
    }
    let code_start = r.pos;
    r.skip(code_len).ok_or(trunc)?;
    let code: &'a [u8] = &info[code_start..code_start + code_len];
    let nexc = r.u2().ok_or(trunc)? as usize;
    let exc_start = r.pos;
    r.skip(nexc * 8).ok_or(trunc)?;
    // Sub-attributes, classified by name.
    let sub = &mut s.sub;
    sub.clear();
    let mut smt_name = None;
    let mut has_lnt = false;
    let kinds = &mut s.attr_kinds;
    for_each_attr(&mut r, |n, span| {
        let kind = attr_kind(kinds, &pool.cp, n);
        match kind {
            ATTR_SMT => smt_name = Some(n),
            ATTR_LNT => has_lnt = true,
            _ => {}
        }
        sub.push((span.whole, span.info, kind));
        Ok(())
    })
    .map_err(|_| trunc)?;
    if r.pos != info.len() {
        return Err(SkipReason::MalformedCode("trailing bytes in Code attribute"));
    }
    Ok(CodeAttr { info, max_stack, max_locals, code, nexc, exc_start, smt_name, has_lnt })
}

/// Reads the line table as HotSpot keeps it (for the sites' lines, into `s.lines`, stably sorted
/// by start_pc) and checks the line and local-variable tables against the code's length.
#[inline(always)]
fn read_tables(c: &CodeAttr<'_>, s: &mut Scratch<'_>) -> Result<(), SkipReason> {
    let code_len = c.code.len();
    s.lines.clear();
    for (_, i, k) in s.sub.iter() {
        let t = c.info.get(i.clone()).ok_or(TRUNCATED)?;
        match *k {
            ATTR_LNT => {
                let n = be_u16(t, 0).ok_or(bad_table("LineNumberTable"))? as usize;
                if t.len() != 2 + n * 4 {
                    return Err(bad_table("LineNumberTable length"));
                }
                let entries = t[2..].chunks_exact(4).map(|e| (get_u16(e, 0) as u16, get_u16(e, 2) as u16));
                let first = s.lines.len();
                s.lines.extend(entries);
                if s.lines[first..].iter().any(|&(pc, _)| pc as usize >= code_len) {
                    return Err(bad_table("LineNumberTable start_pc past the code"));
                }
            }
            ATTR_LVT | ATTR_LVTT => {
                let n = be_u16(t, 0).ok_or(bad_table("LocalVariableTable"))? as usize;
                if t.len() != 2 + n * 10 {
                    return Err(bad_table("LocalVariableTable length"));
                }
                for e in 0..n {
                    let st = be_u16(t, 2 + e * 10).unwrap_or(0) as usize;
                    let len = be_u16(t, 4 + e * 10).unwrap_or(0) as usize;
                    if st + len > code_len {
                        return Err(bad_table("LocalVariableTable range past the code"));
                    }
                }
            }
            _ => {}
        }
    }
    // HotSpot keeps the table as deltas from (pc 0, line 0) and skips a zero delta
    // (`CompressedLineNumberWriteStream::write_pair`): leading (0, 0) entries are lost, and the
    // JVM prints -1 before the next entry (JRuby's constructors start so).
    let lost = s.lines.iter().take_while(|&&e| e == (0, 0)).count();
    s.lines.drain(..lost);
    s.lines.sort_by_key(|&(pc, _)| pc); // stable: keeps table order among equal start_pc
    Ok(())
}

/// The offsets of the method's exception handlers, sorted, each once, into `handlers`: a drop
/// probe goes before each (probes.rs). An exception leaves the pending record of the call it came
/// from (one that threw before entering its method, a null receiver, or whose method lucce does
/// not instrument); a handler that catches it and returns to code lucce cannot see (an excluded
/// class, a native method) would otherwise leave it for an entry from there, which takes it.
#[inline(always)]
fn read_handlers(c: &CodeAttr<'_>, handlers: &mut Vec<u32>) -> Result<(), SkipReason> {
    handlers.clear();
    for k in 0..c.nexc {
        handlers.push(be_u16(c.info, c.exc_start + k * 8 + 4).ok_or(TRUNCATED)? as u32);
    }
    handlers.sort_unstable();
    handlers.dedup();
    Ok(())
}

/// Checks that every exception range and handler lies on instruction boundaries.
fn check_exceptions(c: &CodeAttr<'_>, map: &impl Boundaries) -> Result<(), SkipReason> {
    let code_len = c.code.len() as u32;
    for k in 0..c.nexc {
        let e = c.exc_start + k * 8;
        let sp = be_u16(c.info, e).ok_or(TRUNCATED)? as u32;
        let ep = be_u16(c.info, e + 2).ok_or(TRUNCATED)? as u32;
        let hp = be_u16(c.info, e + 4).ok_or(TRUNCATED)? as u32;
        // Boundaries compare like their instructions; the handler must be an instruction.
        if !(sp < ep && map.is_boundary(sp) && map.is_boundary(ep) && hp < code_len && map.is_boundary(hp)) {
            return Err(bad_table("exception range not on instruction boundaries"));
        }
    }
    Ok(())
}

/// Fills `frames` with the method's initial frame (from its descriptor) once, on first need.
fn ensure_initial<'a>(cx: &ClassCtx<'a, '_>, m: &MethodIn<'a, '_>, frames: &mut Frames<'a>, set: &mut bool) -> Result<(), SkipReason> {
    if !*set {
        frames.set_initial(m.desc_bytes, m.access & super::ACC_STATIC != 0, m.name == "<init>", cx.this_is_object, cx.this_class)?;
        *set = true;
    }
    Ok(())
}

/// Decodes the method's StackMapTable into `s.frames` (emptied first); whether the initial
/// frame was set. Only classes verified by type checking (version 50+) use frames; older classes
/// may carry a stale table the JVM ignores, which is dropped rather than rewritten.
#[allow(clippy::type_complexity)]
fn decode_frames<'a>(
    cx: &ClassCtx<'a, '_>,
    m: &MethodIn<'a, '_>,
    c: &CodeAttr<'a>,
    sub: &[(Range<usize>, Range<usize>, u8)],
    frames: &mut Frames<'a>,
    map: &impl Boundaries,
) -> Result<bool, SkipReason> {
    // The initial frame only matters to a method that has or may gain frames: most methods have
    // none, so it is parsed on first need.
    let mut initial_set = false;
    frames.clear();
    if cx.major >= 50 && c.smt_name.is_some() {
        ensure_initial(cx, m, frames, &mut initial_set)?;
        for (_, i, k) in sub.iter() {
            if *k == ATTR_SMT {
                frames.decode(c.info.get(i.clone()).ok_or(TRUNCATED)?, map)?;
            }
        }
    }
    Ok(initial_set)
}

/// The site's line, moving `lp` forward to the first line entry at or after `off` (sites come
/// in increasing bci order).
#[inline]
fn site_line(lines: &[(u16, u16)], has_lnt: bool, lp: &mut usize, off: u32) -> i32 {
    while lines.get(*lp).is_some_and(|&(pc, _)| (pc as u32) < off) {
        *lp += 1;
    }
    line_at(lines, has_lnt, *lp, off)
}

fn method_info<'n>(cx: &ClassCtx<'_, 'n>, m: &MethodIn<'_, 'n>, leaf: bool) -> MethodInfo<'n> {
    MethodInfo { class: cx.class_name, name: m.name, descriptor: m.desc, source_file: cx.source_file, access_flags: m.access, leaf }
}

/// The probe locals of a method, with the define hook's Methodref appended when this is the
/// hooked method (see [`probes::DEFINE_HOOK`]; not a leaf).
fn probe_locals(cx: &ClassCtx<'_, '_>, m: &MethodIn<'_, '_>, max_locals: u16, leaf: bool, pool: &mut PoolEdit<'_>) -> Result<ProbeLocals, SkipReason> {
    let mut locals = ProbeLocals::after(max_locals, leaf).ok_or(SkipReason::TooManyLocals)?;
    let hook = &probes::DEFINE_HOOK;
    if !leaf && hook.is(cx.class_name.as_bytes(), m.name.as_bytes(), m.desc.as_bytes(), m.access) {
        locals.define_hook = Some(pool.runtime_method(hook.runtime_method, hook.runtime_descriptor));
    }
    Ok(locals)
}

/// The direct rewrite (see [`rewrite_method`]); [`Walk::Switch`] when the method must take the
/// general one (nothing registered, nothing written). Without `sites`, no site probes (a leaf).
#[allow(clippy::too_many_arguments)]
fn rewrite_direct<'a>(
    cx: &ClassCtx<'a, '_>,
    m: &MethodIn<'a, '_>,
    c: &CodeAttr<'a>,
    pool: &mut PoolEdit<'a>,
    reg: &mut dyn SiteRegistry,
    s: &mut Scratch<'a>,
    out: &mut Vec<u8>,
    sites: bool,
) -> Result<Walk, SkipReason> {
    let code = c.code;
    // Site probes take a non-leaf's locals. In the class's first method with probes, their
    // Methodref is linked after the walk, when the class's runtime Methodrefs exist (appended
    // after the method's pushes, as the general rewrite does).
    let site_locals = ProbeLocals::after(c.max_locals, false).ok_or(SkipReason::TooManyLocals)?;
    let known_refs = pool.runtime_refs_appended();
    let tail = probes::SiteTail::new(site_locals, &known_refs.unwrap_or_default());
    let probes = reg.probes();
    // The method's id, push and probe locals and its entry probe's length, taken at its first
    // site.
    let mut method: Option<(u32, IntPush, ProbeLocals, u32)> = None;
    let mut lp = 0;
    let (lines, handlers, targets, has_lnt) = (&s.lines, &s.handlers, &mut s.targets, c.has_lnt);
    let site = |off: u32, probe: Probe| -> Result<(IntPush, u32, bool), SkipReason> {
        let (method_id, _, _, entry_len) = match method {
            Some(v) => v,
            None => {
                let locals = probe_locals(cx, m, c.max_locals, false, pool)?;
                let id = reg.method(&method_info(cx, m, false));
                let push = push_for(id, pool);
                let v = (id, push, locals, probes::entry_len(push, locals));
                method = Some(v);
                v
            }
        };
        let line = site_line(lines, has_lnt, &mut lp, off);
        let (kind, invoked) = match probe {
            Probe::Alloc => (SiteKind::Alloc, ALLOCATION),
            _ => (SiteKind::Call, invoke_target(code, off, &pool.cp, targets)),
        };
        let Invoked { api, target, drop } = invoked;
        let id = reg.site(method_id, &SiteInfo { kind, bci: off, line, api, target });
        Ok((push_for(id, pool), entry_len, kind == SiteKind::Call && (drop || probes.drop_after_calls)))
    };
    if let Walk::Switch = s.direct.walk(code, handlers, sites, sites && probes.alloc_sites, &tail, known_refs.is_some(), site)? {
        return Ok(Walk::Switch);
    }
    let (method_push, locals) = match method {
        Some((_, push, locals, _)) => (push, locals),
        None => {
            // No site: a leaf (probes.rs), one int local and no extra stack.
            let locals = probe_locals(cx, m, c.max_locals, true, pool)?;
            let id = reg.method(&method_info(cx, m, true));
            (push_for(id, pool), locals)
        }
    };
    let refs = pool.runtime_refs(|| locals.entry_methods() | s.direct.probe_methods());
    let direct = &mut s.direct;
    direct.link(&refs)?;
    // The entry probe, which goes before the body.
    let mut entry = [0u8; 64];
    let mut w = code::CodeBuf::new(&mut entry);
    probes::emit_entry(&mut w, method_push, locals, &refs);
    let entry_len = w.pos();
    direct.entry_len = entry_len as u32;
    check_exceptions(c, direct)?;
    decode_frames(cx, m, c, &s.sub, &mut s.frames, &s.direct)?;
    let new_stack = locals.max_stack(c.max_stack).ok_or(SkipReason::TooManyStackSlots)?;
    // The new Code attribute.
    let attr_start = write_code_header(cx, m, c, new_stack, Some(locals), out)?;
    out.extend_from_slice(&entry[..entry_len]);
    out.extend_from_slice(s.direct.body());
    write_tables(cx, c, &s.direct, &s.frames, &s.sub, &s.lines, &s.handlers, Some(locals), attr_start, pool, out)?;
    Ok(Walk::Done)
}

/// The general rewrite (see [`rewrite_method`]); without `sites`, no site probes (a leaf).
#[allow(clippy::too_many_arguments)]
fn rewrite_general<'a>(
    cx: &ClassCtx<'a, '_>,
    m: &MethodIn<'a, '_>,
    c: &CodeAttr<'a>,
    pool: &mut PoolEdit<'a>,
    reg: &mut dyn SiteRegistry,
    s: &mut Scratch<'a>,
    out: &mut Vec<u8>,
    sites: bool,
) -> Result<(), SkipReason> {
    let code = c.code;
    let code_len = code.len();
    let d = &mut s.d;
    d.decode(code, &s.handlers)?;
    if cx.this_is_object && m.name == "<init>" && reg.probes().finalizer_call() {
        // The JVM calls `Finalizer.register` from the `return` of `Object.<init>`
        // (RegisterFinalizersAtInit): a call probe there gives that upcall the frame's record,
        // where it would otherwise walk and read the frame's locals, a safepoint each, for
        // every finalizable object (jython: almost all of its walks). Not in full encoding,
        // where `Object.<init>` is a leaf (`ProbeChoice::finalizer_call`).
        for ins in d.insns.iter_mut().filter(|ins| ins.op == OP_RETURN) {
            ins.probe = Probe::Call;
            d.nprobes += 1;
        }
    }
    let probes = reg.probes();
    if !sites {
        d.drop_probes(None);
    } else if !probes.alloc_sites {
        d.drop_probes(Some(Probe::Alloc));
    }
    for ins in d.insns.iter_mut().filter(|ins| ins.probe == Probe::Call && ins.op != OP_RETURN) {
        ins.drop = probes.drop_after_calls || invoke_target(code, ins.off, &pool.cp, &mut s.targets).drop;
        d.ndrops += ins.drop as u32;
    }
    // A method without site probes is a leaf (probes.rs): one int local, no extra stack.
    let locals = probe_locals(cx, m, c.max_locals, d.nprobes == 0, pool)?;
    let new_stack = locals.max_stack(c.max_stack).ok_or(SkipReason::TooManyStackSlots)?;
    // Too large even with the shortest id pushes: known before any id is taken.
    let best_bound = code_len as u64
        + d.nprobes as u64 * probes::site_len(IntPush::Const(0), locals) as u64
        + d.ndrops as u64 * probes::DROP_LEN as u64;
    if best_bound > code::MAX_CODE as u64 {
        return Err(SkipReason::CodeTooLarge);
    }
    check_exceptions(c, &*d)?;
    let mut initial_set = decode_frames(cx, m, c, &s.sub, &mut s.frames, &s.d)?;
    let (d, lay, frames) = (&mut s.d, &mut s.lay, &mut s.frames);

    // Worst-case layout before any id is handed out; skipped when even the worst case is
    // clearly below 32 KiB (nothing can widen or overflow then).
    let worst = IntPush::Short(0);
    let worst_site = probes::site_len(worst, locals);
    let worst_bound = code_len as u64
        + d.nprobes as u64 * worst_site as u64
        + d.ndrops as u64 * probes::DROP_LEN as u64
        + 64
        + 3 * d.targets.len() as u64;
    let may_widen = worst_bound > i16::MAX as u64;
    if may_widen {
        for ins in d.insns.iter_mut() {
            if ins.probe != Probe::None {
                ins.probe_len = worst_site;
            }
        }
        lay_out(cx, m, code, d, lay, frames, pool, probes::entry_len(worst, locals), &mut initial_set)?;
    }

    // Ids, in bytecode order, then the shortest pushes.
    let method_id = reg.method(&method_info(cx, m, locals.leaf));
    let method_push = push_for(method_id, pool);
    s.pushes.clear();
    s.pushes.resize(d.insns.len(), None);
    let mut lp = 0;
    let site_tail_len = probes::site_tail_len(locals);
    reg.reserve_sites(d.nprobes);
    for (i, ins) in d.insns.iter_mut().enumerate() {
        let kind = match ins.probe {
            Probe::None => continue,
            Probe::Call => SiteKind::Call,
            Probe::Alloc => SiteKind::Alloc,
        };
        let line = site_line(&s.lines, c.has_lnt, &mut lp, ins.off);
        let Invoked { api, target, .. } = match kind {
            SiteKind::Call if ins.op == OP_RETURN => Invoked { target: super::finalizer_register_key(), ..ALLOCATION },
            SiteKind::Call => invoke_target(code, ins.off, &pool.cp, &mut s.targets),
            SiteKind::Alloc => ALLOCATION,
        };
        let id = reg.site(method_id, &SiteInfo { kind, bci: ins.off, line, api, target });
        let p = push_for(id, pool);
        s.pushes[i] = Some(p);
        ins.probe_len = p.byte_len() + site_tail_len;
    }
    if pool.app.count() > MAX_CP_COUNT {
        return Err(SkipReason::ConstantPoolFull);
    }
    // Which branches widen, when any may; `emit` then records the positions as it writes the
    // code (alone when nothing can widen).
    let planned_len = if may_widen {
        Some(lay_out(cx, m, code, d, lay, frames, pool, probes::entry_len(method_push, locals), &mut initial_set)?)
    } else {
        None
    };
    let refs = pool.runtime_refs(|| locals.entry_methods() | d.probe_methods());

    // The new Code attribute.
    out.reserve(m.attr.len() + worst_bound as usize - code_len);
    let attr_start = write_code_header(cx, m, c, new_stack, Some(locals), out)?;
    code::emit(code, d, lay, &Pushes { entry: Some((method_push, locals)), site: &s.pushes }, &refs, out)?;
    if planned_len.is_some_and(|l| l != lay.code_len) {
        return Err(SkipReason::MalformedCode("layout mismatch"));
    }
    write_tables(cx, c, &Segmented { d, lay }, frames, &s.sub, &s.lines, &s.handlers, Some(locals), attr_start, pool, out)
}

/// A method of a class lucce leaves out (`include=`/`exclude=`) in a recording: a drop probe
/// first in each exception handler ([`read_handlers`] says why), nothing else; no id, no probe
/// locals. Appends the new Code attribute to `out` and returns true, or false (nothing appended)
/// when the method has no handler.
pub(crate) fn drop_at_handlers<'a>(cx: &ClassCtx<'a, '_>, m: &MethodIn<'a, '_>, pool: &mut PoolEdit<'a>, s: &mut Scratch<'a>, out: &mut Vec<u8>) -> Result<bool, SkipReason> {
    let c = parse_code_attr(cx, m, pool, s)?;
    read_tables(&c, s)?;
    read_handlers(&c, &mut s.handlers)?;
    if s.handlers.is_empty() {
        return Ok(false);
    }
    let d = &mut s.d;
    d.decode(c.code, &s.handlers)?;
    d.drop_probes(None);
    check_exceptions(&c, &*d)?;
    let mut initial_set = decode_frames(cx, m, &c, &s.sub, &mut s.frames, &s.d)?;
    let (d, lay, frames) = (&mut s.d, &mut s.lay, &mut s.frames);
    let bound = c.code.len() as u64 + d.ndrops as u64 * probes::DROP_LEN as u64 + 3 * d.targets.len() as u64;
    let planned_len = if bound > i16::MAX as u64 {
        Some(lay_out(cx, m, c.code, d, lay, frames, pool, 0, &mut initial_set)?)
    } else {
        None
    };
    let refs = pool.runtime_refs(|| d.probe_methods());
    s.pushes.clear();
    s.pushes.resize(d.insns.len(), None);
    let attr_start = write_code_header(cx, m, &c, c.max_stack, None, out)?;
    code::emit(c.code, d, lay, &Pushes { entry: None, site: &s.pushes }, &refs, out)?;
    if planned_len.is_some_and(|l| l != lay.code_len) {
        return Err(SkipReason::MalformedCode("layout mismatch"));
    }
    write_tables(cx, &c, &Segmented { d, lay }, frames, &s.sub, &s.lines, &s.handlers, None, attr_start, pool, out)?;
    Ok(true)
}

/// Bytes of a Code attribute before its code: name, length, max_stack, max_locals, code_length.
const CODE_HEADER_LEN: usize = 14;

/// Starts the new Code attribute in `out`: its name, a length and a code_length that
/// [`write_tables`] patches, max_stack and max_locals; returns where the attribute starts.
fn write_code_header(cx: &ClassCtx<'_, '_>, m: &MethodIn<'_, '_>, c: &CodeAttr<'_>, new_stack: u16, locals: Option<ProbeLocals>, out: &mut Vec<u8>) -> Result<usize, SkipReason> {
    let name = cx.bytes.get(m.attr.start..m.attr.start + 2).ok_or(TRUNCATED)?;
    let [s0, s1] = new_stack.to_be_bytes();
    let [l0, l1] = (c.max_locals + locals.map_or(0, |l| l.extra_locals())).to_be_bytes();
    let start = out.len();
    out.extend_from_slice(&[name[0], name[1], 0, 0, 0, 0, s0, s1, l0, l1, 0, 0, 0, 0]);
    Ok(start)
}

/// Ends the new Code attribute that [`write_code_header`] began at `attr_start` and the new code
/// continued (up to the end of `out`): the code_length, the exception table and the
/// sub-attributes, their offsets mapped through `map`, then the attribute's length.
#[allow(clippy::too_many_arguments)]
fn write_tables<'a>(
    cx: &ClassCtx<'a, '_>,
    c: &CodeAttr<'a>,
    map: &impl CodeMap,
    frames: &Frames<'a>,
    sub: &[(Range<usize>, Range<usize>, u8)],
    lines: &[(u16, u16)],
    handlers: &[u32],
    locals: Option<ProbeLocals>,
    attr_start: usize,
    pool: &mut PoolEdit<'a>,
    out: &mut Vec<u8>,
) -> Result<(), SkipReason> {
    let (info, trunc) = (c.info, TRUNCATED);
    let base = attr_start;
    let new_code_len = u32::try_from(out.len() - base - CODE_HEADER_LEN).map_err(|_| SkipReason::CodeTooLarge)?;
    out[base + CODE_HEADER_LEN - 4..base + CODE_HEADER_LEN].copy_from_slice(&new_code_len.to_be_bytes());
    let needs_frames = cx.major >= 50;
    // The tables below are copied whole, then their offsets remapped in place.
    let at = out.len() + 2;
    out.extend_from_slice(info.get(c.exc_start - 2..c.exc_start + c.nexc * 8).ok_or(trunc)?);
    for e in out[at..].chunks_exact_mut(8) {
        // start, end (exclusive; code_len maps to the new end), handler.
        for j in [0, 2, 4] {
            let np = map.pos(get_u16(e, j)).ok_or(bad_table("exception"))?;
            set_u16(e, j, np);
        }
    }
    let count_at = out.len();
    out.extend_from_slice(&[0, 0]);
    let mut count: u16 = 0;
    let mut smt_written = false;
    let split = split_line_groups(c.code, map, lines, handlers)?;
    let mut lnt_written = false;
    // Whether the entries so far are all (0, 0): those stay so, for HotSpot to drop them again
    // (see `read_tables`), also when `split` moves their start_pc's other entries.
    let mut leading_zeros = true;
    for (whole, i, k) in sub.iter() {
        let t = info.get(i.clone()).ok_or(trunc)?;
        let head = info.get(whole.start..whole.start + 2).ok_or(trunc)?;
        match *k {
            ATTR_DROP => continue,
            ATTR_SMT => {
                if !needs_frames || smt_written {
                    continue;
                }
                let start = out.len();
                write_attr_header(out, head);
                frames::encode(frames, map, c.code, c.max_locals, locals.map(|l| l.leaf), pool, out)?;
                patch_len(out, start)?;
                smt_written = true;
            }
            ATTR_LNT => {
                // The attribute is copied whole and its start_pcs remapped; the first also gets
                // the entries `split` adds.
                let start = out.len();
                out.extend_from_slice(info.get(whole.clone()).ok_or(trunc)?);
                for e in out[start + 8..].chunks_exact_mut(4) {
                    let pc = get_u16(e, 0);
                    leading_zeros &= pc == 0 && get_u16(e, 2) == 0;
                    if leading_zeros {
                        continue;
                    }
                    if let Some(sp) = split.iter().find(|sp| sp.pc == pc) {
                        set_u16(e, 0, sp.insn);
                    } else if pc != 0 {
                        // Offset 0 stays 0 so the entry probe belongs to the first line.
                        set_u16(e, 0, map_pc(map, pc)?);
                    }
                }
                if !lnt_written && !split.is_empty() {
                    for sp in &split {
                        out.extend_from_slice(&sp.region.to_be_bytes());
                        out.extend_from_slice(&sp.line.to_be_bytes());
                    }
                    let n = be_u16(out, start + 6).ok_or(trunc)? as usize + split.len();
                    let n = u16::try_from(n).map_err(|_| bad_table("LineNumberTable length"))?;
                    out[start + 6..start + 8].copy_from_slice(&n.to_be_bytes());
                    patch_len(out, start)?;
                }
                lnt_written = true;
            }
            ATTR_LVT | ATTR_LVTT => {
                // JVMTI reads a local of a method that has a LocalVariableTable only when the
                // table describes it: the probe locals get entries over the whole code (a
                // LocalVariableTypeTable gets none).
                let (extra, nextra) = match locals {
                    Some(locals) if *k == ATTR_LVT => probe_local_entries(pool, locals, new_code_len as u16),
                    _ => ([0; 20], 0),
                };
                let n = be_u16(t, 0).ok_or(trunc)?;
                let n = n.checked_add(nextra as u16).ok_or(bad_table("LocalVariableTable length"))?;
                let len = u32::try_from(t.len() + nextra * 10).map_err(|_| bad_table("LocalVariableTable length"))?;
                let [l0, l1, l2, l3] = len.to_be_bytes();
                let [n0, n1] = n.to_be_bytes();
                out.extend_from_slice(&[head[0], head[1], l0, l1, l2, l3, n0, n1]);
                out.extend_from_slice(&extra[..nextra * 10]);
                let at = out.len();
                out.extend_from_slice(t.get(2..).ok_or(trunc)?);
                for e in out[at..].chunks_exact_mut(10) {
                    let st = get_u16(e, 0);
                    let end = st + get_u16(e, 2);
                    // Variables live from 0 (parameters) also cover the entry probe.
                    let ns = if st == 0 { 0 } else { map_pc(map, st)? };
                    let ne = map_pc(map, end)?;
                    set_u16(e, 0, ns);
                    set_u16(e, 2, ne.saturating_sub(ns));
                }
            }
            _ => {
                out.extend_from_slice(info.get(whole.clone()).ok_or(trunc)?);
            }
        }
        count = count.checked_add(1).ok_or(trunc)?;
    }
    // A frame-verified method that had no table but now needs one (a widened branch created a
    // new branch target).
    if needs_frames && !smt_written && !frames.frames.is_empty() {
        let name = match c.smt_name {
            Some(n) => n,
            None => pool.app.utf8(b"StackMapTable"),
        };
        let start = out.len();
        write_attr_header(out, &name.to_be_bytes());
        frames::encode(frames, map, c.code, c.max_locals, locals.map(|l| l.leaf), pool, out)?;
        patch_len(out, start)?;
        count = count.checked_add(1).ok_or(trunc)?;
    }
    out[count_at..count_at + 2].copy_from_slice(&count.to_be_bytes());
    let body_len = u32::try_from(out.len() - base - 6).map_err(|_| SkipReason::CodeTooLarge)?;
    out[base + 2..base + 6].copy_from_slice(&body_len.to_be_bytes());
    if pool.app.count() > MAX_CP_COUNT {
        return Err(SkipReason::ConstantPoolFull);
    }
    Ok(())
}

/// Of the invoke at `off`: whether it is an invokestatic of a method of `lucce/Lucce`; the
/// [`super::target_key`] of the name and descriptor it references ([`super::indy_target_key`]
/// for an invokedynamic; [`super::ANY_TARGET`] for a method of `MethodHandle` or `VarHandle`, or
/// when unreadable); whether the JIT may replace it by an intrinsic.
#[inline]
fn invoke_target(code: &[u8], off: u32, cp: &ConstPool<'_>, known: &mut Targets) -> Invoked {
    const INVOKEDYNAMIC: u8 = 0xBA;
    let o = off as usize;
    let (Some(&op), Some(idx)) = (code.get(o), be_u16(code, o + 1)) else { return ALLOCATION };
    let indy = op == INVOKEDYNAMIC;
    if known.slot.len() != cp.count() as usize {
        // The first site of the class (the cache is emptied between classes).
        known.slot.clear();
        known.slot.resize(cp.count() as usize, 0);
    }
    // Slot 0 (not known) wraps to an index `get` refuses.
    let t = match known.slot.get(idx as usize).and_then(|&k| known.known.get((k as usize).wrapping_sub(1))) {
        Some(t) if t.indy == indy => *t,
        _ => {
            let t = Target::of(cp, idx, indy);
            if let Some(k) = known.slot.get_mut(idx as usize) {
                // At most one per entry of a pool of at most 65535: the slot fits a u16.
                known.known.push(t);
                *k = known.known.len() as u16;
            }
            t
        }
    };
    Invoked { api: op == probes::INVOKESTATIC && t.lucce_api, target: t.key, drop: t.intrinsic }
}

impl Target {
    /// What an invoke of entry `idx` (an invokedynamic when `indy`) calls. Out of line: the
    /// cache lookup around it stays small enough to inline.
    #[inline(never)]
    fn of(cp: &ConstPool<'_>, idx: u16, indy: bool) -> Target {
        let (class, nat) = if indy {
            (None, cp.dynamic_nat(idx))
        } else {
            match cp.member_ref(idx) {
                Some((class, n, d)) => (Some(class), Some((n, d))),
                None => (None, None),
            }
        };
        let class = class.and_then(|c| cp.class_name(c));
        let lucce_api = class == Some(b"lucce/Lucce");
        if indy {
            let key = nat.and_then(|(_, d)| super::indy_target_key(cp.utf8(d)?)).unwrap_or(super::ANY_TARGET);
            return Target { indy, lucce_api, key, intrinsic: false };
        }
        let Some((n, d)) = nat.and_then(|(n, d)| cp.utf8(n).zip(cp.utf8(d))) else {
            return Target { indy, lucce_api, key: super::ANY_TARGET, intrinsic: false };
        };
        let name_key = super::target_key(n, d);
        let any = matches!(class, Some(b"java/lang/invoke/MethodHandle" | b"java/lang/invoke/VarHandle"));
        let key = if any { super::ANY_TARGET } else { name_key };
        let intrinsic = class.is_some_and(|c| super::intrinsics::listed(c, n, d, name_key));
        Target { indy, lucce_api, key, intrinsic }
    }
}

/// The LocalVariableTable entries of the probe locals, over the whole new code of `code_len`
/// bytes: CTX and VER (longs), or a leaf's MARK (int); and how many.
fn probe_local_entries(pool: &mut PoolEdit<'_>, locals: ProbeLocals, code_len: u16) -> ([u8; 20], usize) {
    let (ctx_name, ver_name, long_desc, mark_name, int_desc) = pool.probe_local_names();
    let entry = |name: u16, desc: u16, slot: u16| {
        let [c0, c1] = code_len.to_be_bytes();
        let [n0, n1] = name.to_be_bytes();
        let [d0, d1] = desc.to_be_bytes();
        let [s0, s1] = slot.to_be_bytes();
        [0, 0, c0, c1, n0, n1, d0, d1, s0, s1]
    };
    let mut b = [0; 20];
    if locals.leaf {
        b[..10].copy_from_slice(&entry(mark_name, int_desc, locals.ctx));
        (b, 1)
    } else {
        b[..10].copy_from_slice(&entry(ctx_name, long_desc, locals.ctx));
        b[10..].copy_from_slice(&entry(ver_name, long_desc, locals.ver));
        (b, 2)
    }
}

/// Lays the segments out after an entry probe of `entry_len` bytes, widening the branches that
/// need it, and gives a class verified by type checking the frames those need; the new code's
/// length. `initial_set`: whether `frames` has the method's initial frame.
#[allow(clippy::too_many_arguments)]
fn lay_out<'a>(
    cx: &ClassCtx<'a, '_>,
    m: &MethodIn<'a, '_>,
    code: &'a [u8],
    d: &mut Decoded,
    lay: &mut Layout,
    frames: &mut Frames<'a>,
    pool: &PoolEdit<'a>,
    entry_len: u32,
    initial_set: &mut bool,
) -> Result<u32, SkipReason> {
    lay.compute(d, entry_len)?;
    if cx.major >= 50 && lay.any_wide {
        ensure_initial(cx, m, frames, initial_set)?;
        add_widening_frames(frames, d, code, pool, cx.this_class)?;
    }
    Ok(lay.code_len)
}

/// Adds frames after conditional branches that were widened into `if!cond; goto_w` when the
/// following instruction has none.
fn add_widening_frames<'a>(
    frames: &mut Frames<'a>,
    d: &Decoded,
    code: &'a [u8],
    pool: &PoolEdit<'a>,
    this_class: u16,
) -> Result<(), SkipReason> {
    for ins in d.insns.iter() {
        if ins.kind == Kind::Branch
            && ins.wide
            && !matches!(ins.op, OP_GOTO | OP_JSR)
            && !frames::has_frame(frames, ins.off + ins.len)
        {
            typesim::add_fallthrough_frame(frames, d, code, &pool.cp, this_class, ins.off)?;
        }
    }
    Ok(())
}

/// A start_pc whose line entries [`write_tables`] moves past the probe before its instruction.
struct SplitLine {
    pc: u32,
    /// Where its instruction went.
    insn: u32,
    /// Where the code inserted before it starts (the method's start for the entry probe).
    region: u16,
    /// The line HotSpot gives the original instruction: its first entry in table order.
    line: u16,
}

/// The start_pcs whose line entries disagree (several entries, not all the same line) and whose
/// instruction gets code before it (the entry probe at 0, a call probe before an invoke, a drop
/// probe before a handler's first instruction, whose offsets `handlers` lists). HotSpot
/// gives a bci the first entry at it in table order, else the last of those at the nearest
/// start_pc below; an entry moved to the probe's start would give the instruction, now past it,
/// the group's last line instead of its first (Clojure's classes have many such groups: 201
/// mismatches in a small program, and the program's own traces changed). So the group moves to
/// the instruction itself, which keeps every original instruction's line, and an entry of the
/// first line at the probe's start gives the probe the instruction's line, as before.
#[inline]
fn split_line_groups(code: &[u8], map: &impl CodeMap, lines: &[(u16, u16)], handlers: &[u32]) -> Result<Vec<SplitLine>, SkipReason> {
    // `lines` is sorted by start_pc: a disagreeing group has two neighbours that disagree.
    if lines.windows(2).all(|w| w[0].0 != w[1].0 || w[0].1 == w[1].1) {
        return Ok(Vec::new());
    }
    split_disagreeing_groups(code, map, lines, handlers)
}

/// [`split_line_groups`] of a table that has a disagreeing group.
#[inline(never)]
fn split_disagreeing_groups(code: &[u8], map: &impl CodeMap, lines: &[(u16, u16)], handlers: &[u32]) -> Result<Vec<SplitLine>, SkipReason> {
    let mut split = Vec::new();
    for g in lines.chunk_by(|a, b| a.0 == b.0) {
        if g.iter().all(|e| e.1 == g[0].1) {
            continue;
        }
        let pc = g[0].0 as u32;
        let region = if pc == 0 { 0 } else { map_pc(map, pc)? };
        let insn = match code.get(pc as usize) {
            Some(0xB6..=0xB8) if map.is_boundary(pc) => map_pc(map, pc + 3)? - 3,
            Some(0xB9 | 0xBA) if map.is_boundary(pc) => map_pc(map, pc + 5)? - 5,
            Some(0xAC..=0xB1) if map.is_boundary(pc) => map_pc(map, pc + 1)? - 1,
            _ if handlers.binary_search(&pc).is_ok() && map.is_boundary(pc) => map_pc(map, pc)? + probes::DROP_LEN,
            _ => map_pc(map, pc)?,
        };
        if insn != region {
            // New code offsets are below 65536 (`set_u16` writes them all).
            split.push(SplitLine { pc, insn, region: region as u16, line: g[0].1 });
        }
    }
    Ok(split)
}

/// New offset for an old table offset: boundaries map to the instruction's start; an offset
/// inside an instruction (never produced by javac, tolerated for odd tools) to the start of the
/// instruction containing it; the code end to the new code end.
#[inline(always)]
fn map_pc(map: &impl CodeMap, pc: u32) -> Result<u32, SkipReason> {
    match map.pos(pc) {
        Some(at) => Ok(at),
        None => map_pc_inside(map, pc),
    }
}

/// [`map_pc`] of an offset that is not an instruction boundary.
#[inline(never)]
fn map_pc_inside(map: &impl CodeMap, pc: u32) -> Result<u32, SkipReason> {
    map.containing(pc).and_then(|at| map.pos(at)).ok_or(bad_table("offset"))
}

#[inline]
fn push_for(id: u32, pool: &mut PoolEdit<'_>) -> IntPush {
    IntPush::inline(id).unwrap_or_else(|| IntPush::Ldc(pool.integer(id as i32)))
}

/// The big-endian u16 at `b[at..]`.
#[inline]
fn get_u16(b: &[u8], at: usize) -> u32 {
    u16::from_be_bytes([b[at], b[at + 1]]) as u32
}

/// Writes `v` (a new code offset, below 65536) as the big-endian u16 at `b[at..]`.
#[inline]
fn set_u16(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 2].copy_from_slice(&(v as u16).to_be_bytes());
}

fn write_attr_header(out: &mut Vec<u8>, name: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(&[0, 0, 0, 0]);
}

fn patch_len(out: &mut [u8], start: usize) -> Result<(), SkipReason> {
    let len = u32::try_from(out.len() - start - 6).map_err(|_| SkipReason::CodeTooLarge)?;
    out[start + 2..start + 6].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::line_for;

    #[test]
    fn line_rule_matches_hotspot() {
        // Table order: (pc, line); sorted stably by pc as rewrite_method does.
        let mut t = vec![(10u16, 3u16), (0, 1), (10, 4), (5, 2), (5, 9)];
        t.sort_by_key(|e| e.0);
        assert_eq!(line_for(&t, true, 0), 1);
        assert_eq!(line_for(&t, true, 3), 1);
        assert_eq!(line_for(&t, true, 5), 2); // exact: first in table order
        assert_eq!(line_for(&t, true, 7), 9); // below: last in table order among pc 5
        assert_eq!(line_for(&t, true, 10), 3);
        assert_eq!(line_for(&t, true, 99), 4);
        assert_eq!(line_for(&t[2..], true, 1), -1);
        assert_eq!(line_for(&t, false, 5), -1);
    }
}
