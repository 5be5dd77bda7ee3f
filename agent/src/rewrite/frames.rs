//! StackMapTable: decoding every frame kind into explicit (locals, stack) lists, and re-encoding
//! them at the new offsets with the probe locals CTX and VER appended (a leaf's MARK).
//!
//! Every frame after the entry probe sees CTX and VER as longs (the entry probe has stored them),
//! so each frame's locals become `own locals, Top padding up to max_locals, Long, Long` (a long is
//! one verification-type entry covering two slots); in a leaf `..., Integer`. Because the new
//! locals sit at the end, the original chop/append relations between frames no longer hold;
//! frames are re-encoded as `same`/`same_locals_1_stack_item` when the locals equal the previous
//! frame's, else as `full_frame`. The implicit initial frame is unchanged (the entry probe runs in it).

use std::ops::Range;

use super::classfile::Reader;
use super::code::{Boundaries, CodeBuf, CodeMap, OP_NEW};
use super::pool::PoolEdit;
use super::SkipReason;

/// A verification type. `Name` is a class named by text (from a descriptor or synthesized),
/// resolved to a constant-pool Class entry only when written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VType<'a> {
    Top,
    Int,
    Float,
    Double,
    Long,
    Null,
    UninitThis,
    Obj(u16),
    Name(&'a [u8]),
    /// Old offset of the `new` instruction.
    Uninit(u32),
    /// An array whose component is the Class entry (from `anewarray`).
    ArrayOf(u16),
}

impl VType<'_> {
    pub fn slots(self) -> u32 {
        if matches!(self, VType::Long | VType::Double) {
            2
        } else {
            1
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Frame {
    /// Old offset of the instruction the frame belongs to.
    pub off: u32,
    pub locals: Range<u32>,
    pub stack: Range<u32>,
}

/// Decoded frames; all type lists live in one pool to avoid per-frame allocation.
#[derive(Default)]
pub(crate) struct Frames<'a> {
    pub pool: Vec<VType<'a>>,
    /// Locals of the implicit initial frame (always at pool[0..n]).
    pub initial: Range<u32>,
    pub frames: Vec<Frame>,
}

/// An emptied type list for another class: the map never runs (the vector is empty) and the
/// in-place collect keeps the allocation (same size and alignment), so this is free.
fn recycle_types(mut v: Vec<VType<'_>>) -> Vec<VType<'static>> {
    v.clear();
    v.into_iter().map(|_| VType::Top).collect()
}

fn bad(what: &'static str) -> SkipReason {
    SkipReason::MalformedStackMap(what)
}

/// Parses one field type starting at `d[*i]`.
pub(crate) fn parse_field_type<'a>(d: &'a [u8], i: &mut usize) -> Option<VType<'a>> {
    let start = *i;
    let c = *d.get(*i)?;
    *i += 1;
    Some(match c {
        b'B' | b'C' | b'I' | b'S' | b'Z' => VType::Int,
        b'F' => VType::Float,
        b'J' => VType::Long,
        b'D' => VType::Double,
        b'L' => {
            let semi = d.get(*i..)?.iter().position(|&b| b == b';')?;
            let name = d.get(*i..*i + semi)?;
            *i += semi + 1;
            VType::Name(name)
        }
        b'[' => {
            while d.get(*i) == Some(&b'[') {
                *i += 1;
            }
            match parse_field_type(d, i)? {
                VType::Top
                | VType::Null
                | VType::UninitThis
                | VType::Uninit(_)
                | VType::Obj(_)
                | VType::ArrayOf(_) => return None,
                _ => VType::Name(d.get(start..*i)?),
            }
        }
        _ => return None,
    })
}

impl Frames<'_> {
    /// The same buffers, emptied, for the next class.
    pub fn recycle(self) -> Frames<'static> {
        let mut frames = self.frames;
        frames.clear();
        Frames {
            pool: recycle_types(self.pool),
            initial: 0..0,
            frames,
        }
    }
}

impl<'a> Frames<'a> {
    /// No frames and no initial frame (a method without a StackMapTable).
    pub fn clear(&mut self) {
        self.pool.clear();
        self.frames.clear();
        self.initial = 0..0;
    }

    /// Fills `initial` from the method descriptor.
    pub fn set_initial(
        &mut self,
        desc: &'a [u8],
        is_static: bool,
        is_init: bool,
        this_is_object: bool,
        this_class: u16,
    ) -> Result<(), SkipReason> {
        self.pool.clear();
        self.frames.clear();
        if !is_static {
            self.pool.push(if is_init && !this_is_object {
                VType::UninitThis
            } else {
                VType::Obj(this_class)
            });
        }
        if desc.first() != Some(&b'(') {
            return Err(SkipReason::MalformedCode("bad method descriptor"));
        }
        let mut i = 1;
        while desc.get(i) != Some(&b')') {
            let t = parse_field_type(desc, &mut i)
                .ok_or(SkipReason::MalformedCode("bad method descriptor"))?;
            self.pool.push(t);
        }
        self.initial = 0..self.pool.len() as u32;
        Ok(())
    }

    fn read_vt(&mut self, r: &mut Reader<'_>) -> Result<VType<'a>, SkipReason> {
        let t = r.u1().ok_or(bad("truncated"))?;
        Ok(match t {
            0 => VType::Top,
            1 => VType::Int,
            2 => VType::Float,
            3 => VType::Double,
            4 => VType::Long,
            5 => VType::Null,
            6 => VType::UninitThis,
            7 => VType::Obj(r.u2().ok_or(bad("truncated"))?),
            8 => VType::Uninit(r.u2().ok_or(bad("truncated"))? as u32),
            _ => return Err(bad("bad verification type")),
        })
    }

    fn read_vts(&mut self, r: &mut Reader<'_>, n: u32) -> Result<Range<u32>, SkipReason> {
        let s = self.pool.len() as u32;
        for _ in 0..n {
            let v = self.read_vt(r)?;
            self.pool.push(v);
        }
        Ok(s..self.pool.len() as u32)
    }

    fn copy(&mut self, r: Range<u32>) -> Range<u32> {
        let s = self.pool.len() as u32;
        self.pool
            .extend_from_within(r.start as usize..r.end as usize);
        s..self.pool.len() as u32
    }

    /// Decodes a StackMapTable attribute's info (call after `set_initial`; may be called for
    /// several tables, which continue from the previous frame).
    pub fn decode(&mut self, info: &[u8], map: &impl Boundaries) -> Result<(), SkipReason> {
        let mut r = Reader::new(info, 0);
        let n = r.u2().ok_or(bad("truncated"))?;
        let mut prev_locals = self
            .frames
            .last()
            .map(|f| f.locals.clone())
            .unwrap_or(self.initial.clone());
        let mut prev_off: i64 = self
            .frames
            .last()
            .map(|f| f.off as i64)
            .unwrap_or(-1);
        for _ in 0..n {
            let tag = r.u1().ok_or(bad("truncated"))?;
            let (delta, locals, stack) = match tag {
                0..=63 => (tag as u32, prev_locals.clone(), 0..0),
                64..=127 => {
                    let st = self.read_vts(&mut r, 1)?;
                    (tag as u32 - 64, prev_locals.clone(), st)
                }
                128..=246 => return Err(bad("reserved frame type")),
                247 => {
                    let delta = r.u2().ok_or(bad("truncated"))? as u32;
                    let st = self.read_vts(&mut r, 1)?;
                    (delta, prev_locals.clone(), st)
                }
                248..=250 => {
                    let delta = r.u2().ok_or(bad("truncated"))? as u32;
                    let k = 251 - tag as u32;
                    if prev_locals.end - prev_locals.start < k {
                        return Err(bad("chop below zero locals"));
                    }
                    (delta, prev_locals.start..prev_locals.end - k, 0..0)
                }
                251 => (
                    r.u2().ok_or(bad("truncated"))? as u32,
                    prev_locals.clone(),
                    0..0,
                ),
                252..=254 => {
                    let delta = r.u2().ok_or(bad("truncated"))? as u32;
                    let loc = self.copy(prev_locals.clone());
                    let add = self.read_vts(&mut r, tag as u32 - 251)?;
                    (delta, loc.start..add.end, 0..0)
                }
                255 => {
                    let delta = r.u2().ok_or(bad("truncated"))? as u32;
                    let nl = r.u2().ok_or(bad("truncated"))? as u32;
                    let loc = self.read_vts(&mut r, nl)?;
                    let ns = r.u2().ok_or(bad("truncated"))? as u32;
                    let st = self.read_vts(&mut r, ns)?;
                    (delta, loc, st)
                }
            };
            let off = prev_off + 1 + delta as i64;
            let at = u32::try_from(off)
                .ok()
                .filter(|&o| map.is_boundary(o))
                .ok_or(bad("frame not at an instruction"))?;
            if at >= map.code_len() {
                return Err(bad("frame past the code"));
            }
            self.frames.push(Frame {
                off: at,
                locals: locals.clone(),
                stack,
            });
            prev_locals = locals;
            prev_off = off;
        }
        if r.pos != info.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(())
    }
}

/// Bytes [`write_vt`] writes at most.
const VT_MAX_LEN: usize = 3;

/// Writes one verification type. The kinds that need no lookup are written inline; a class
/// named by text, an array class and an uninitialized `new` go out of line.
#[inline(always)]
fn write_vt<'a>(
    out: &mut CodeBuf<'_>,
    v: VType<'a>,
    map: &impl CodeMap,
    code: &[u8],
    pool: &mut PoolEdit<'a>,
) -> Result<(), SkipReason> {
    let (bytes, len) = match simple_vt(v) {
        Some(b) => b,
        None => resolved_vt(v, map, code, pool)?,
    };
    out.put(bytes, len);
    Ok(())
}

/// The bytes of a verification type that needs neither the pool nor the layout.
#[inline(always)]
fn simple_vt(v: VType<'_>) -> Option<([u8; 3], usize)> {
    Some(match v {
        VType::Top => ([0, 0, 0], 1),
        VType::Int => ([1, 0, 0], 1),
        VType::Float => ([2, 0, 0], 1),
        VType::Double => ([3, 0, 0], 1),
        VType::Long => ([4, 0, 0], 1),
        VType::Null => ([5, 0, 0], 1),
        VType::UninitThis => ([6, 0, 0], 1),
        VType::Obj(i) => obj_vt(i),
        VType::Name(_) | VType::ArrayOf(_) | VType::Uninit(_) => return None,
    })
}

/// An Object verification type of Class entry `i`.
#[inline(always)]
fn obj_vt(i: u16) -> ([u8; 3], usize) {
    let [h, l] = i.to_be_bytes();
    ([7, h, l], 3)
}

/// [`write_vt`]'s bytes of a type that needs the pool or the new layout.
#[inline(never)]
fn resolved_vt<'a>(
    v: VType<'a>,
    map: &impl CodeMap,
    code: &[u8],
    pool: &mut PoolEdit<'a>,
) -> Result<([u8; 3], usize), SkipReason> {
    Ok(match v {
        VType::Name(n) => obj_vt(pool.class(n)),
        VType::ArrayOf(c) => obj_vt(pool.array_class(c).ok_or(bad("bad anewarray class"))?),
        VType::Uninit(off) => {
            if code.get(off as usize) != Some(&OP_NEW) {
                return Err(bad("Uninitialized does not name a new"));
            }
            // Must name the moved `new` opcode itself (never its probe).
            let at = map.new_opcode(off).ok_or(bad("Uninitialized not at an instruction"))?;
            let [h, l] = (at as u16).to_be_bytes();
            ([8, h, l], 3)
        }
        simple => simple_vt(simple).ok_or(bad("verification type"))?,
    })
}

/// `locals` without its trailing Tops. Two frames' locals are equal once the probe locals are
/// appended (Top padding up to max_locals, then CTX and VER) exactly when their trimmed forms
/// are equal, so frames compare without building the extended lists.
fn trim_tops<'t, 'a>(locals: &'t [VType<'a>]) -> &'t [VType<'a>] {
    let n = locals.iter().rposition(|&v| v != VType::Top).map_or(0, |i| i + 1);
    &locals[..n]
}

/// Appends the StackMapTable info for the new code to `out`. `frames.frames` must be sorted by
/// offset, one frame per instruction. With `probe_locals` (whether the method is a leaf), every
/// full frame's locals get the probe locals appended: Top padding up to max_locals, then Long,
/// Long (a leaf: Int); without, they stay as they are.
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode<'a>(
    frames: &Frames<'a>,
    map: &impl CodeMap,
    code: &[u8],
    max_locals: u16,
    probe_locals: Option<bool>,
    pool: &mut PoolEdit<'a>,
    out: &mut Vec<u8>,
) -> Result<(), SkipReason> {
    let n = frames.frames.len();
    if n > 0xFFFF {
        return Err(bad("too many frames"));
    }
    let types = &frames.pool;
    let probe_locals: ([u8; 2], usize) = match probe_locals {
        Some(true) => ([1, 0], 1),
        Some(false) => ([4, 4], 2),
        None => ([0, 0], 0),
    };
    // The most the table can take: each frame a full_frame (tag, delta, two counts), its
    // locals and stack at 3 bytes a type, the padding (at most max_locals) and the probe locals.
    let bound = 2 + frames
        .frames
        .iter()
        .map(|f| 7 + max_locals as usize + 2 + VT_MAX_LEN * (f.locals.len() + f.stack.len()))
        .sum::<usize>();
    let base = out.len();
    out.resize(base + bound + CodeBuf::SLACK, 0);
    let mut w = CodeBuf::new(&mut out[base..]);
    w.put((n as u16).to_be_bytes(), 2);
    // The previous frame: its locals' range in `types`, their trimmed form and slot count.
    // None before the first frame, which is relative to the implicit initial frame (that lacks
    // the probe locals).
    let mut prev: Option<(&Range<u32>, &[VType<'a>], u32)> = None;
    let mut prev_pos: i64 = -1;
    for f in frames.frames.iter() {
        let pos = map.pos(f.off).ok_or(bad("frame not at an instruction"))? as i64;
        let delta = pos - prev_pos - 1;
        if !(0..=0xFFFF).contains(&delta) {
            return Err(bad("frames out of order"));
        }
        let delta = delta as u16;
        let locals = types
            .get(f.locals.start as usize..f.locals.end as usize)
            .ok_or(bad("range"))?;
        let stack = types
            .get(f.stack.start as usize..f.stack.end as usize)
            .ok_or(bad("range"))?;
        // A frame decoded as `same` or `same_locals_1_stack_item` shares its predecessor's
        // locals range: nothing to count or compare.
        let (trimmed, slots, same) = match prev {
            Some((r, t, slots)) if *r == f.locals => (t, slots, true),
            _ => {
                let slots: u32 = locals.iter().map(|v| v.slots()).sum();
                if slots > max_locals as u32 {
                    return Err(bad("frame locals exceed max_locals"));
                }
                let trimmed = trim_tops(locals);
                (trimmed, slots, prev.is_some_and(|(_, t, _)| t == trimmed))
            }
        };
        let [dh, dl] = delta.to_be_bytes();
        if same && stack.is_empty() {
            if delta < 64 {
                w.put([delta as u8], 1);
            } else {
                w.put([251, dh, dl], 3);
            }
        } else if same && stack.len() == 1 {
            if delta < 64 {
                w.put([64 + delta as u8], 1);
            } else {
                w.put([247, dh, dl], 3);
            }
            write_vt(&mut w, stack[0], map, code, pool)?;
        } else {
            let padding = if probe_locals.1 == 0 { 0 } else { (max_locals as u32 - slots) as usize };
            let nlocals = locals.len() + padding + probe_locals.1;
            if nlocals > 0xFFFF || stack.len() > 0xFFFF {
                return Err(bad("frame too large"));
            }
            let [nh, nl] = (nlocals as u16).to_be_bytes();
            w.put([255, dh, dl, nh, nl], 5);
            for &v in locals {
                write_vt(&mut w, v, map, code, pool)?;
            }
            w.zeros(padding); // Top
            w.put(probe_locals.0, probe_locals.1);
            w.put((stack.len() as u16).to_be_bytes(), 2);
            for &v in stack {
                write_vt(&mut w, v, map, code, pool)?;
            }
        }
        prev = Some((&f.locals, trimmed, slots));
        prev_pos = pos;
    }
    let len = w.pos();
    out.truncate(base + len);
    Ok(())
}

/// True when the method's StackMapTable has a frame for the instruction at old offset `off`.
pub(crate) fn has_frame(frames: &Frames<'_>, off: u32) -> bool {
    frames.frames.binary_search_by_key(&off, |f| f.off).is_ok()
}
