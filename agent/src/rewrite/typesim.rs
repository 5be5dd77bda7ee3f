//! Forward type simulation over straight-line code, used for one thing only: when a conditional
//! branch must be widened (`if!cond +8; goto_w target`) in a class verified by StackMapTable, the
//! instruction after it becomes a new branch target and needs a frame. Its types are those after
//! the conditional pops its operands, computed from the closest preceding frame (or the initial
//! frame). Between that frame and the branch there is no unconditional transfer (the JVM demands
//! a frame after every one), so a single forward pass is exact; no merging is needed.

use super::classfile::{
    be_u16, ConstPool, TAG_CLASS, TAG_DOUBLE, TAG_DYNAMIC, TAG_FLOAT, TAG_INTEGER, TAG_LONG,
    TAG_METHOD_HANDLE, TAG_METHOD_TYPE, TAG_STRING,
};
use super::code::{insn_len, Decoded, OP_WIDE};
use super::frames::{parse_field_type, Frame, Frames, VType};
use super::SkipReason;

fn unsupported(what: &'static str) -> SkipReason {
    SkipReason::FrameInference(what)
}

struct Sim<'a, 'c> {
    cp: &'c ConstPool<'a>,
    this_class: u16,
    code: &'a [u8],
    /// One entry per slot; the second half of a long/double is Top.
    locals: Vec<VType<'a>>,
    /// One entry per slot, same convention.
    stack: Vec<VType<'a>>,
}

fn to_slots<'a>(src: &[VType<'a>], out: &mut Vec<VType<'a>>) {
    out.clear();
    for &v in src {
        out.push(v);
        if v.slots() == 2 {
            out.push(VType::Top);
        }
    }
}

fn to_entries<'a>(slots: &[VType<'a>], out: &mut Vec<VType<'a>>) {
    let mut k = 0;
    while k < slots.len() {
        let v = slots[k];
        out.push(v);
        k += v.slots() as usize;
    }
}

impl<'a> Sim<'a, '_> {
    fn push(&mut self, v: VType<'a>) {
        self.stack.push(v);
        if v.slots() == 2 {
            self.stack.push(VType::Top);
        }
    }

    fn pop_slots(&mut self, n: usize) -> Result<(), SkipReason> {
        let len = self
            .stack
            .len()
            .checked_sub(n)
            .ok_or(unsupported("stack underflow"))?;
        self.stack.truncate(len);
        Ok(())
    }

    /// Pops one value (1 or 2 slots) and returns its type.
    fn pop(&mut self) -> Result<VType<'a>, SkipReason> {
        let top = self.stack.pop().ok_or(unsupported("stack underflow"))?;
        if top == VType::Top {
            // Second half of a long/double.
            let v = self.stack.pop().ok_or(unsupported("stack underflow"))?;
            if v.slots() != 2 {
                return Err(unsupported("bad stack shape"));
            }
            return Ok(v);
        }
        Ok(top)
    }

    fn load(&mut self, slot: usize) -> Result<(), SkipReason> {
        let v = *self
            .locals
            .get(slot)
            .ok_or(unsupported("load of unknown local"))?;
        self.push(v);
        Ok(())
    }

    fn store(&mut self, slot: usize) -> Result<(), SkipReason> {
        let v = self.pop()?;
        let n = v.slots() as usize;
        if self.locals.len() < slot + n {
            self.locals.resize(slot + n, VType::Top);
        }
        // Overwriting the second half of a long/double kills it.
        if slot > 0 && self.locals[slot - 1].slots() == 2 {
            self.locals[slot - 1] = VType::Top;
        }
        self.locals[slot] = v;
        if n == 2 {
            self.locals[slot + 1] = VType::Top;
        }
        // A long that started here leaves its second half as Top, which it already is.
        Ok(())
    }

    fn u2(&self, at: usize) -> Result<u16, SkipReason> {
        be_u16(self.code, at).ok_or(unsupported("truncated"))
    }

    fn field_type(&self, desc: u16) -> Result<VType<'a>, SkipReason> {
        let d = self.cp.utf8(desc).ok_or(unsupported("bad descriptor"))?;
        let mut i = 0;
        parse_field_type(d, &mut i).ok_or(unsupported("bad descriptor"))
    }

    /// Pops a method's arguments and pushes its return value.
    fn invoke(&mut self, desc: &'a [u8]) -> Result<(), SkipReason> {
        if desc.first() != Some(&b'(') {
            return Err(unsupported("bad descriptor"));
        }
        let mut i = 1;
        let mut slots = 0usize;
        while desc.get(i) != Some(&b')') {
            slots += parse_field_type(desc, &mut i)
                .ok_or(unsupported("bad descriptor"))?
                .slots() as usize;
        }
        i += 1;
        self.pop_slots(slots)?;
        self.ret_after(desc, i)
    }

    fn ret_after(&mut self, desc: &'a [u8], mut i: usize) -> Result<(), SkipReason> {
        if desc.get(i) == Some(&b'V') {
            return Ok(());
        }
        let r = parse_field_type(desc, &mut i).ok_or(unsupported("bad descriptor"))?;
        self.push(r);
        Ok(())
    }

    fn replace_uninit(&mut self, from: VType<'a>, to: VType<'a>) {
        for v in self.locals.iter_mut().chain(self.stack.iter_mut()) {
            if *v == from {
                *v = to;
            }
        }
    }

    fn array_component(&self, arr: VType<'a>) -> Result<VType<'a>, SkipReason> {
        let name = match arr {
            VType::Null => return Ok(VType::Null),
            VType::Obj(i) => self.cp.class_name(i).ok_or(unsupported("bad class"))?,
            VType::Name(n) => n,
            VType::ArrayOf(c) => return Ok(VType::Obj(c)),
            _ => return Err(unsupported("aaload on a non-array")),
        };
        let rest = name
            .strip_prefix(b"[")
            .ok_or(unsupported("aaload on a non-array"))?;
        let mut i = 0;
        let t = parse_field_type(rest, &mut i).ok_or(unsupported("bad array type"))?;
        Ok(t)
    }

    fn step(&mut self, off: usize, op: u8) -> Result<(), SkipReason> {
        use VType::*;
        match op {
            0x00 => {}
            0x01 => self.push(Null),
            0x02..=0x08 | 0x10 | 0x11 => self.push(Int),
            0x09 | 0x0A => self.push(Long),
            0x0B..=0x0D => self.push(Float),
            0x0E | 0x0F => self.push(Double),
            0x12..=0x14 => {
                let idx = if op == 0x12 {
                    *self.code.get(off + 1).ok_or(unsupported("truncated"))? as u16
                } else {
                    self.u2(off + 1)?
                };
                let t = match self.cp.tag(idx) {
                    TAG_INTEGER => Int,
                    TAG_FLOAT => Float,
                    TAG_LONG => Long,
                    TAG_DOUBLE => Double,
                    TAG_STRING => Name(b"java/lang/String"),
                    TAG_CLASS => Name(b"java/lang/Class"),
                    TAG_METHOD_TYPE => Name(b"java/lang/invoke/MethodType"),
                    TAG_METHOD_HANDLE => Name(b"java/lang/invoke/MethodHandle"),
                    TAG_DYNAMIC => {
                        let (_, d) = self.cp.dynamic_nat(idx).ok_or(unsupported("bad ldc"))?;
                        self.field_type(d)?
                    }
                    _ => return Err(unsupported("bad ldc")),
                };
                self.push(t);
            }
            0x15..=0x19 => {
                self.load(*self.code.get(off + 1).ok_or(unsupported("truncated"))? as usize)?
            }
            0x1A..=0x2D => self.load(((op - 0x1A) % 4) as usize)?,
            0x2E..=0x35 => {
                self.pop()?;
                let arr = self.pop()?;
                let t = match op {
                    0x2F => Long,
                    0x30 => Float,
                    0x31 => Double,
                    0x32 => self.array_component(arr)?,
                    _ => Int,
                };
                self.push(t);
            }
            0x36..=0x3A => {
                self.store(*self.code.get(off + 1).ok_or(unsupported("truncated"))? as usize)?
            }
            0x3B..=0x4E => self.store(((op - 0x3B) % 4) as usize)?,
            0x4F..=0x56 => {
                self.pop()?;
                self.pop()?;
                self.pop()?;
            }
            0x57 => self.pop_slots(1)?,
            0x58 => self.pop_slots(2)?,
            0x59..=0x5F => {
                let n = self.stack.len();
                let s = |k: usize| -> Result<VType<'a>, SkipReason> {
                    n.checked_sub(k)
                        .and_then(|i| self.stack.get(i).copied())
                        .ok_or(unsupported("stack underflow"))
                };
                match op {
                    0x59 => {
                        let a = s(1)?;
                        self.stack.push(a);
                    }
                    0x5A => {
                        let (a, b) = (s(1)?, s(2)?);
                        self.stack.truncate(n - 2);
                        self.stack.extend_from_slice(&[a, b, a]);
                    }
                    0x5B => {
                        let (a, b, c) = (s(1)?, s(2)?, s(3)?);
                        self.stack.truncate(n - 3);
                        self.stack.extend_from_slice(&[a, c, b, a]);
                    }
                    0x5C => {
                        let (a, b) = (s(1)?, s(2)?);
                        self.stack.extend_from_slice(&[b, a]);
                    }
                    0x5D => {
                        let (a, b, c) = (s(1)?, s(2)?, s(3)?);
                        self.stack.truncate(n - 3);
                        self.stack.extend_from_slice(&[b, a, c, b, a]);
                    }
                    0x5E => {
                        let (a, b, c, e) = (s(1)?, s(2)?, s(3)?, s(4)?);
                        self.stack.truncate(n - 4);
                        self.stack.extend_from_slice(&[b, a, e, c, b, a]);
                    }
                    _ => {
                        let (a, b) = (s(1)?, s(2)?);
                        self.stack.truncate(n - 2);
                        self.stack.extend_from_slice(&[a, b]);
                    }
                }
            }
            0x60..=0x77 | 0x7E..=0x83 => {
                let t = match op {
                    0x7E..=0x83 => [Int, Long][((op - 0x7E) % 2) as usize],
                    _ => [Int, Long, Float, Double][((op - 0x60) % 4) as usize],
                };
                let unary = (0x74..=0x77).contains(&op);
                self.pop()?;
                if !unary {
                    self.pop()?;
                }
                self.push(t);
            }
            0x78..=0x7D => {
                self.pop()?;
                let v = self.pop()?;
                self.push(v);
            }
            0x84 => {}
            0x85..=0x93 => {
                self.pop()?;
                let t = match op {
                    0x85 | 0x8C | 0x8F => Long,
                    0x86 | 0x89 | 0x90 => Float,
                    0x87 | 0x8A | 0x8D => Double,
                    _ => Int,
                };
                self.push(t);
            }
            0x94..=0x98 => {
                self.pop()?;
                self.pop()?;
                self.push(Int);
            }
            0x99..=0x9E | 0xC6 | 0xC7 => {
                self.pop()?;
            }
            0x9F..=0xA6 => {
                self.pop()?;
                self.pop()?;
            }
            0xB2..=0xB5 => {
                let (_, _, d) = self
                    .cp
                    .member_ref(self.u2(off + 1)?)
                    .ok_or(unsupported("bad field ref"))?;
                let t = self.field_type(d)?;
                match op {
                    0xB2 => self.push(t),
                    0xB3 => {
                        self.pop()?;
                    }
                    0xB4 => {
                        self.pop()?;
                        self.push(t);
                    }
                    _ => {
                        self.pop()?;
                        self.pop()?;
                    }
                }
            }
            0xB6..=0xB9 => {
                let (_, n, d) = self
                    .cp
                    .member_ref(self.u2(off + 1)?)
                    .ok_or(unsupported("bad method ref"))?;
                let desc = self.cp.utf8(d).ok_or(unsupported("bad descriptor"))?;
                let is_init = self.cp.utf8(n) == Some(b"<init>");
                // Arguments first, then the receiver.
                let mut i = 1;
                let mut slots = 0usize;
                if desc.first() != Some(&b'(') {
                    return Err(unsupported("bad descriptor"));
                }
                while desc.get(i) != Some(&b')') {
                    slots += parse_field_type(desc, &mut i)
                        .ok_or(unsupported("bad descriptor"))?
                        .slots() as usize;
                }
                i += 1;
                self.pop_slots(slots)?;
                if op != 0xB8 {
                    let recv = self.pop()?;
                    if op == 0xB7 && is_init {
                        match recv {
                            UninitThis => self.replace_uninit(UninitThis, Obj(self.this_class)),
                            Uninit(o) => {
                                let c = self.u2(o as usize + 1)?;
                                self.replace_uninit(Uninit(o), Obj(c));
                            }
                            _ => {}
                        }
                    }
                }
                self.ret_after(desc, i)?;
            }
            0xBA => {
                let (_, d) = self
                    .cp
                    .dynamic_nat(self.u2(off + 1)?)
                    .ok_or(unsupported("bad indy"))?;
                let desc = self.cp.utf8(d).ok_or(unsupported("bad descriptor"))?;
                self.invoke(desc)?;
            }
            0xBB => self.push(Uninit(off as u32)),
            0xBC => {
                self.pop()?;
                let t: &'static [u8] = match self.code.get(off + 1) {
                    Some(4) => b"[Z",
                    Some(5) => b"[C",
                    Some(6) => b"[F",
                    Some(7) => b"[D",
                    Some(8) => b"[B",
                    Some(9) => b"[S",
                    Some(10) => b"[I",
                    Some(11) => b"[J",
                    _ => return Err(unsupported("bad newarray type")),
                };
                self.push(Name(t));
            }
            0xBD => {
                self.pop()?;
                self.push(ArrayOf(self.u2(off + 1)?));
            }
            0xBE => {
                self.pop()?;
                self.push(Int);
            }
            0xC0 => {
                self.pop()?;
                self.push(Obj(self.u2(off + 1)?));
            }
            0xC1 => {
                self.pop()?;
                self.push(Int);
            }
            0xC2 | 0xC3 => {
                self.pop()?;
            }
            OP_WIDE => {
                let inner = *self.code.get(off + 1).ok_or(unsupported("truncated"))?;
                let slot = self.u2(off + 2)? as usize;
                match inner {
                    0x15..=0x19 => self.load(slot)?,
                    0x36..=0x3A => self.store(slot)?,
                    0x84 => {}
                    _ => return Err(unsupported("wide ret")),
                }
            }
            0xC5 => {
                let dims = *self.code.get(off + 3).ok_or(unsupported("truncated"))? as usize;
                for _ in 0..dims {
                    self.pop()?;
                }
                self.push(Obj(self.u2(off + 1)?));
            }
            _ => return Err(unsupported("control transfer inside a basic block")),
        }
        Ok(())
    }
}

/// The frame at the instruction after the conditional branch at old offset `branch`: appended
/// to `frames` (which stays sorted by offset).
pub(crate) fn add_fallthrough_frame<'a>(
    frames: &mut Frames<'a>,
    d: &Decoded,
    code: &'a [u8],
    cp: &ConstPool<'a>,
    this_class: u16,
    branch: u32,
) -> Result<(), SkipReason> {
    let next = insn_len(code, branch as usize)
        .map(|n| branch + n as u32)
        .ok_or(unsupported("bad branch"))?;
    if next >= d.code_len {
        return Err(unsupported("conditional branch at the end of the code"));
    }
    let pos = frames.frames.partition_point(|f| f.off <= branch);
    let (from, locals, stack) = match pos.checked_sub(1).and_then(|p| frames.frames.get(p)) {
        Some(f) => (f.off, f.locals.clone(), f.stack.clone()),
        None => (0, frames.initial.clone(), 0..0),
    };
    let mut sim = Sim {
        cp,
        this_class,
        code,
        locals: Vec::new(),
        stack: Vec::new(),
    };
    to_slots(
        &frames.pool[locals.start as usize..locals.end as usize],
        &mut sim.locals,
    );
    to_slots(
        &frames.pool[stack.start as usize..stack.end as usize],
        &mut sim.stack,
    );
    // Instruction by instruction from the frame through the branch (runs of plain instructions
    // are single segments, so this walks the code itself). `from` is an instruction boundary,
    // so stepping by lengths meets `branch`; an instruction that ends the block (a switch
    // among them) fails in `step` first.
    let mut off = from as usize;
    loop {
        let op = *code.get(off).ok_or(unsupported("truncated"))?;
        sim.step(off, op)?;
        if off >= branch as usize {
            break;
        }
        off += insn_len(code, off).ok_or(unsupported("bad instruction"))?;
    }
    let l0 = frames.pool.len() as u32;
    to_entries(&sim.locals, &mut frames.pool);
    let l1 = frames.pool.len() as u32;
    to_entries(&sim.stack, &mut frames.pool);
    let s1 = frames.pool.len() as u32;
    let f = Frame {
        off: next,
        locals: l0..l1,
        stack: l1..s1,
    };
    match frames
        .frames
        .binary_search_by_key(&next, |f| f.off)
    {
        Ok(_) => {} // Already a branch target with its own frame.
        Err(at) => frames.frames.insert(at, f),
    }
    Ok(())
}
