//! Bytecode: the two ways a method's code is rewritten, and what they tell the tables of where
//! each old offset went ([`CodeMap`]).
//!
//! - [`Direct`]: one pass over the code that writes the new code as it reads the old; for every
//!   method whose new code cannot reach 32 KiB (almost all).
//! - The general way, for the rest: decoding into a compact segment vector ([`Decoded`]),
//!   computing the new layout (with probe bytes, switch padding and widened branches;
//!   [`Layout`]), and emitting the new code array ([`emit`]).
//!
//! A segment is either one instruction the rewriter changes or moves relative to its neighbours
//! (a branch, a switch, an instruction with a probe) or a maximal run of other ("plain")
//! instructions, which is copied as one block and shifts as a whole. Most instructions are plain,
//! so decoding, layout and emission work per segment, not per instruction. Every instruction
//! boundary is still known (`Decoded::index_of`), and a boundary inside a run maps to the run's
//! new start plus its distance from the run's old start.
//!
//! Offsets of the old code map to the new code in two ways:
//! - [`Layout::start`]: the first byte emitted for an instruction, i.e. its call probe when it has
//!   one (or the drop probe before it, when an exception handler starts there). Branch targets,
//!   exception ranges and handlers, frames and line/local tables use this, so a jump to an invoke
//!   runs its probe, a handler covering an invoke covers its probe, and a handler runs its drop.
//! - [`Layout::at`]: the instruction's own opcode. Used for the branch origin and for
//!   `Uninitialized(offset)` verification types, which must name the `new` opcode itself.

use super::probes::{self, IntPush, ProbeLocals, RuntimeMethod, RuntimeRefs};
use super::SkipReason;

pub(crate) const NONE: u32 = u32::MAX;

/// `Decoded::index_of` of an offset inside an instruction.
const NO_SEGMENT: u16 = u16::MAX;

/// Largest legal `code_length` (the JVM requires code_length < 65536).
pub(crate) const MAX_CODE: u32 = 65535;

pub(crate) const OP_GOTO: u8 = 0xA7;
pub(crate) const OP_JSR: u8 = 0xA8;
pub(crate) const OP_TABLESWITCH: u8 = 0xAA;
pub(crate) const OP_LOOKUPSWITCH: u8 = 0xAB;
/// `return` (void).
pub(crate) const OP_RETURN: u8 = 0xB1;
pub(crate) const OP_NEW: u8 = 0xBB;
pub(crate) const OP_WIDE: u8 = 0xC4;
pub(crate) const OP_GOTO_W: u8 = 0xC8;
pub(crate) const OP_JSR_W: u8 = 0xC9;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Plain,
    /// if*, goto, jsr (16-bit offset).
    Branch,
    /// goto_w, jsr_w.
    BranchW,
    Switch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    None,
    /// Call probe before the instruction.
    Call,
    /// Allocation probe after it.
    Alloc,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Insn {
    /// Offset in the old code.
    pub off: u32,
    /// Length in the old code (of the whole run for a run of plain instructions).
    pub len: u32,
    /// The (first) opcode.
    pub op: u8,
    pub kind: Kind,
    pub probe: Probe,
    /// A 16-bit branch that needs the long form in the new layout.
    pub wide: bool,
    /// A drop probe after this invoke: one the JIT may replace by an intrinsic (intrinsics.rs),
    /// or any with `ProbeChoice::drop_after_calls`.
    pub drop: bool,
    /// A drop probe before this instruction, which starts an exception handler (probes.rs):
    /// the instruction begins a segment of its own.
    pub handler: bool,
    /// Branch: target offset in the old code (an instruction boundary). Switch: first index into
    /// `Decoded::targets`.
    pub target: u32,
    /// Switch: number of targets (default first).
    pub ntargets: u32,
    /// Byte length of this instruction's probe in the current layout pass (0 = none).
    pub probe_len: u32,
}

impl Insn {
    /// Bytes of probes before the opcode: the handler's drop, then the call probe.
    #[inline]
    fn before_len(&self) -> u32 {
        (if self.handler { probes::DROP_LEN } else { 0 }) + if self.probe == Probe::Call { self.probe_len } else { 0 }
    }

    /// An instruction with no probe and no target (yet).
    fn plain(off: u32, len: u32, op: u8) -> Insn {
        Insn { off, len, op, kind: Kind::Plain, probe: Probe::None, wide: false, drop: false, handler: false, target: NONE, ntargets: 0, probe_len: 0 }
    }
}

/// A decoded method body; buffers are reused across methods.
#[derive(Default)]
pub(crate) struct Decoded {
    /// Segments in code order (see the module comment).
    pub insns: Vec<Insn>,
    /// Switch targets as old offsets (instruction boundaries).
    pub targets: Vec<u32>,
    /// Old offset -> index of the segment holding the instruction that starts there
    /// ([`NO_SEGMENT`] inside an instruction); `index_of[code_len]` is `insns.len()` so an
    /// exclusive end offset maps too. 16 bits are enough: a segment other than a run of plain
    /// instructions is at least 2 bytes long and two runs are never adjacent, so there are at
    /// most two segments for every three bytes, fewer than 43,700 in a code array below 64 KiB
    /// (and below [`NO_SEGMENT`]); half the width of u32 halves the table that every method
    /// clears and fills.
    pub index_of: Vec<u16>,
    pub code_len: u32,
    /// Instructions with a probe.
    pub nprobes: u32,
    /// Drop probes: before exception handlers (set by [`Decoded::decode`]) and after invokes
    /// (set by its caller).
    pub ndrops: u32,
}

/// Per opcode: the length of a plain instruction (fixed-length, neither a branch nor probed: it
/// joins a run of plain instructions), 0 for any other opcode.
static PLAIN_LEN: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut op = 0;
    while op < 256 {
        let o = op as u8;
        let branch = matches!(o, 0x99..=0xA8 | 0xC6..=0xC9);
        if let Some(n) = fixed_len(o) {
            if !branch && !is_invoke(o) && !is_alloc(o) {
                t[op] = n as u8;
            }
        }
        op += 1;
    }
    t
};

/// An invalid opcode in [`FIXED_LEN`].
const INVALID: u8 = 0xFF;

/// Per opcode: [`fixed_len`] as a table, [`INVALID`] for None.
static FIXED_LEN: [u8; 256] = {
    let mut t = [INVALID; 256];
    let mut op = 0;
    while op < 256 {
        if let Some(n) = fixed_len(op as u8) {
            t[op] = n as u8;
        }
        op += 1;
    }
    t
};

/// Length of a fixed-size instruction, 0 for variable-length ones, None for invalid opcodes.
#[inline]
const fn fixed_len(op: u8) -> Option<u32> {
    Some(match op {
        0x00..=0x0F => 1,
        0x10 => 2,
        0x11 => 3,
        0x12 => 2,
        0x13 | 0x14 => 3,
        0x15..=0x19 => 2,
        0x1A..=0x35 => 1,
        0x36..=0x3A => 2,
        0x3B..=0x83 => 1,
        0x84 => 3,
        0x85..=0x98 => 1,
        0x99..=0xA8 => 3,
        0xA9 => 2,
        0xAA | 0xAB => 0,
        0xAC..=0xB1 => 1,
        0xB2..=0xB8 => 3,
        0xB9 | 0xBA => 5,
        0xBB => 3,
        0xBC => 2,
        0xBD => 3,
        0xBE | 0xBF => 1,
        0xC0 | 0xC1 => 3,
        0xC2 | 0xC3 => 1,
        0xC4 => 0,
        0xC5 => 4,
        0xC6 | 0xC7 => 3,
        0xC8 | 0xC9 => 5,
        _ => return None,
    })
}

pub(crate) const fn is_invoke(op: u8) -> bool {
    matches!(op, 0xB6..=0xBA)
}

pub(crate) const fn is_alloc(op: u8) -> bool {
    matches!(op, 0xBB | 0xBC | 0xBD | 0xC5)
}

/// Longest code of a method that calls and is a leaf in record mode (leaves.rs): such methods are
/// small (of the 628 whose calls only build exceptions among the 1,659 classes h2's JVM loads,
/// 624 are shorter), and a long one would cost a scan of all its code up to its first call.
pub(crate) const LEAF_MAX_CODE: usize = 256;

/// Calls `f(off, throw)` at each invoke of `code`, in order, while it returns true; `throw`: the
/// offset of the `athrow` that ends the straight run of instructions the invoke lies on, with no
/// branch, switch, `jsr`, `ret` or return in between, so that it only builds the exception
/// (`throw new E(...)`, `throw outOfBounds(i)`). True when `f` approved every invoke; false when
/// it refused one or the code is malformed. `pending` holds the invokes of the current run.
pub(crate) fn every_invoke(code: &[u8], pending: &mut Vec<u32>, mut f: impl FnMut(usize, Option<usize>) -> bool) -> bool {
    const ATHROW: u8 = 0xBF;
    // Most methods throw nothing: no byte of theirs is an athrow (a fast search, operands too),
    // and every invoke is told at once.
    let may_throw = code.contains(&ATHROW);
    pending.clear();
    let mut off = 0;
    let mut end_run = |pending: &mut Vec<u32>, throw: Option<usize>| pending.drain(..).all(|at| f(at as usize, throw));
    while let Some(&op) = code.get(off) {
        let run_ends = match op {
            ATHROW => Some(Some(off)),
            // if*, goto, jsr, ret, the switches, the returns, ifnull, ifnonnull, goto_w, jsr_w,
            // and `wide ret`.
            0x99..=0xB1 | 0xC6..=0xC9 => Some(None),
            OP_WIDE if code.get(off + 1) == Some(&0xA9) => Some(None),
            _ if is_invoke(op) => {
                pending.push(off as u32);
                (!may_throw).then_some(None)
            }
            _ => None,
        };
        if let Some(throw) = run_ends {
            if !end_run(pending, throw) {
                return false;
            }
        }
        off += match FIXED_LEN[op as usize] {
            INVALID => return false,
            0 => match any_insn_len(code, off) {
                Some(len) => len,
                None => return false,
            },
            len => len as usize,
        };
    }
    // An instruction that overruns the code moved `off` past its end.
    end_run(pending, None) && off == code.len()
}

/// Whether `code` has an invoke and every invoke only builds the exception it throws
/// ([`every_invoke`]); false for malformed code (which the rewrite itself then reports) and for
/// code longer than [`LEAF_MAX_CODE`].
#[cfg(test)]
pub(crate) fn invokes_only_before_throws(code: &[u8]) -> bool {
    let mut any = false;
    code.len() <= LEAF_MAX_CODE
        && every_invoke(code, &mut Vec::new(), |_, throw| {
            any = true;
            throw.is_some()
        })
        && any
}

/// Switch padding for an opcode at `pos`: operands start at the next multiple of 4.
#[inline]
pub(crate) fn switch_pad(pos: u32) -> u32 {
    3 - (pos & 3)
}

fn rd_i32(code: &[u8], at: u32) -> Result<i32, SkipReason> {
    super::classfile::be_i32(code, at as usize)
        .ok_or(SkipReason::MalformedCode("truncated instruction"))
}

/// Length of the instruction at `off` (any opcode but the switches, which need the decoder), or
/// None when it is invalid or overruns the code.
pub(crate) fn insn_len(code: &[u8], off: usize) -> Option<usize> {
    let op = *code.get(off)?;
    let n = match fixed_len(op)? {
        0 if op == OP_WIDE => match *code.get(off + 1)? {
            0x84 => 6,
            0x15..=0x19 | 0x36..=0x3A | 0xA9 => 4,
            _ => return None,
        },
        0 => return None,
        n => n as usize,
    };
    (off + n <= code.len()).then_some(n)
}

/// Length of the instruction at `off`, switches included (their layout checked as the decoder
/// checks it), or None when it is invalid or overruns the code.
pub(crate) fn any_insn_len(code: &[u8], off: usize) -> Option<usize> {
    match *code.get(off)? {
        OP_TABLESWITCH | OP_LOOKUPSWITCH => Switch::parse(code, u32::try_from(off).ok()?).ok().map(|s| s.end as usize - off),
        _ => insn_len(code, off),
    }
}

fn target_of(off: u32, disp: i64, code_len: u32) -> Result<u32, SkipReason> {
    let t = off as i64 + disp;
    if t < 0 || t >= code_len as i64 {
        return Err(SkipReason::MalformedCode("branch target outside the code"));
    }
    Ok(t as u32)
}

/// Length of the `wide` instruction at `off`.
fn wide_len(code: &[u8], off: u32) -> Result<u32, SkipReason> {
    let next = *code.get(off as usize + 1).ok_or(SkipReason::MalformedCode("truncated wide"))?;
    Ok(match next {
        0x84 => 6,
        0x15..=0x19 | 0x36..=0x3A | 0xA9 => 4,
        _ => return Err(SkipReason::MalformedCode("bad wide opcode")),
    })
}

/// The layout of a tableswitch or lookupswitch, checked against the code's end.
struct Switch {
    /// The default displacement.
    default: i32,
    /// Number of targets besides the default.
    n: u32,
    /// Offset of the first entry, entry size, and where the displacement sits in an entry.
    first: u32,
    stride: u32,
    disp_at: u32,
    /// Offset just past the instruction.
    end: u32,
}

impl Switch {
    fn parse(code: &[u8], off: u32) -> Result<Switch, SkipReason> {
        let code_len = code.len() as u32;
        let base = off + 1 + switch_pad(off);
        let default = rd_i32(code, base)?;
        let (n, first, stride, disp_at) = if code.get(off as usize) == Some(&OP_TABLESWITCH) {
            let low = rd_i32(code, base + 4)?;
            let high = rd_i32(code, base + 8)?;
            if high < low {
                return Err(SkipReason::MalformedCode("tableswitch high < low"));
            }
            // Offsets follow low/high directly.
            ((high as i64 - low as i64 + 1) as u64, base + 12, 4u32, 0)
        } else {
            let n = rd_i32(code, base + 4)?;
            if n < 0 {
                return Err(SkipReason::MalformedCode("lookupswitch npairs < 0"));
            }
            // (match, offset) pairs follow npairs.
            (n as u64, base + 8, 8u32, 4)
        };
        // Bound before multiplying so a hostile count cannot overflow or allocate.
        if n > code_len as u64 {
            return Err(SkipReason::MalformedCode("switch overruns the code"));
        }
        let end = first as u64 + n * stride as u64;
        if end > code_len as u64 {
            return Err(SkipReason::MalformedCode("switch overruns the code"));
        }
        Ok(Switch { default, n: n as u32, first, stride, disp_at, end: end as u32 })
    }
}

impl Decoded {
    /// The runtime methods the site and drop probes [`emit`] writes call
    /// ([`RuntimeMethod::bit`]s).
    pub fn probe_methods(&self) -> u8 {
        self.insns.iter().fold(0, |set, ins| {
            let site = match ins.probe {
                Probe::Call => RuntimeMethod::Call.bit(),
                Probe::Alloc => RuntimeMethod::Alloc.bit(),
                Probe::None => 0,
            };
            set | site | if ins.handler || ins.drop { RuntimeMethod::Drop.bit() } else { 0 }
        })
    }

    /// Appends a plain instruction to the open run (`run`), or starts one.
    #[inline]
    fn add_plain(&mut self, off: u32, len: u32, op: u8, run: &mut bool) {
        if *run {
            let last = self.insns.len() - 1;
            self.insns[last].len += len;
            self.index_of[off as usize] = last as u16;
        } else {
            self.index_of[off as usize] = self.insns.len() as u16;
            self.insns.push(Insn::plain(off, len, op));
            *run = true;
        }
    }

    /// Unmarks the probe points of `kind`, or all of them (the instructions and the handlers'
    /// drops stay as they are).
    pub fn drop_probes(&mut self, kind: Option<Probe>) {
        for ins in self.insns.iter_mut().filter(|ins| ins.probe != Probe::None && kind.is_none_or(|k| ins.probe == k)) {
            ins.probe = Probe::None;
            self.nprobes -= 1;
        }
    }

    /// Decodes `code`, marking probe points and the instructions at `handlers` (the exception
    /// handlers' offsets, sorted, each once) for drop probes. Branch targets must be instruction
    /// boundaries.
    pub fn decode(&mut self, code: &[u8], handlers: &[u32]) -> Result<(), SkipReason> {
        self.insns.clear();
        self.targets.clear();
        self.index_of.clear();
        self.nprobes = 0;
        self.ndrops = 0;
        let code_len = code.len() as u32;
        self.code_len = code_len;
        if code_len == 0 {
            return Err(SkipReason::MalformedCode("empty code"));
        }
        self.index_of.resize(code.len() + 1, NO_SEGMENT);
        let overrun = SkipReason::MalformedCode("instruction overruns the code");
        // Whether the last segment is a run of plain instructions that the next one may join.
        let mut run = false;
        let mut off = 0u32;
        // handlers[..hi] are at or before the instructions decoded; the next is `next_handler`.
        let mut hi = 0;
        let mut next_handler = 0;
        while off < code_len {
            // A handler starts a segment (its drop probe goes before it); a run stops before the
            // next one.
            if off >= next_handler {
                while handlers.get(hi).is_some_and(|&h| h <= off) {
                    run &= handlers[hi] != off;
                    hi += 1;
                }
                next_handler = handlers.get(hi).map_or(u32::MAX, |&h| h);
            }
            let op = code[off as usize];
            if PLAIN_LEN[op as usize] != 0 {
                // The common case: no Insn of its own, no probe, no target. The whole run of
                // such instructions is taken in this tight loop, on a slice of `index_of` (a
                // store through the vector would make the compiler reload its fields).
                if !run {
                    self.insns.push(Insn::plain(off, 0, op));
                    run = true;
                }
                let seg = self.insns.len() - 1;
                let index_of = &mut self.index_of[..code.len()];
                let mut at = off as usize;
                while let Some(&op) = code.get(at) {
                    let len = PLAIN_LEN[op as usize] as usize;
                    if len == 0 {
                        break;
                    }
                    if at + len > code.len() {
                        return Err(overrun);
                    }
                    index_of[at] = seg as u16;
                    at += len;
                }
                // A run past a handler ends before it (the offsets past it are set again).
                let limit = next_handler as usize;
                if at > limit && index_of[limit] == seg as u16 {
                    at = limit;
                }
                off = at as u32;
                self.insns[seg].len = off - self.insns[seg].off;
                continue;
            }
            let fl = match FIXED_LEN[op as usize] {
                INVALID => return Err(SkipReason::MalformedCode("unknown opcode")),
                n => n as u32,
            };
            let mut ins = Insn::plain(off, fl, op);
            match op {
                0x99..=0xA8 | 0xC6 | 0xC7 => {
                    let d = super::classfile::be_u16(code, off as usize + 1)
                        .ok_or(SkipReason::MalformedCode("truncated instruction"))?
                        as i16;
                    ins.kind = Kind::Branch;
                    // Old offset for now; resolved to an index below.
                    ins.target = target_of(off, d as i64, code_len)?;
                }
                OP_GOTO_W | OP_JSR_W => {
                    let d = rd_i32(code, off + 1)?;
                    ins.kind = Kind::BranchW;
                    ins.target = target_of(off, d as i64, code_len)?;
                }
                OP_TABLESWITCH | OP_LOOKUPSWITCH => {
                    let sw = Switch::parse(code, off)?;
                    ins.kind = Kind::Switch;
                    ins.target = self.targets.len() as u32;
                    self.targets.push(target_of(off, sw.default as i64, code_len)?);
                    for k in 0..sw.n {
                        let d = rd_i32(code, sw.first + k * sw.stride + sw.disp_at)?;
                        self.targets.push(target_of(off, d as i64, code_len)?);
                    }
                    ins.ntargets = sw.n + 1;
                    ins.len = sw.end - off;
                }
                OP_WIDE => ins.len = wide_len(code, off)?,
                _ => {}
            }
            if is_invoke(op) {
                ins.probe = Probe::Call;
            } else if is_alloc(op) {
                ins.probe = Probe::Alloc;
            }
            if off as u64 + ins.len as u64 > code_len as u64 {
                return Err(overrun);
            }
            if ins.kind == Kind::Plain && ins.probe == Probe::None {
                // `wide`: plain, only not of a fixed length.
                self.add_plain(off, ins.len, op, &mut run);
            } else {
                self.index_of[off as usize] = self.insns.len() as u16;
                self.nprobes += (ins.probe != Probe::None) as u32;
                self.insns.push(ins);
                run = false;
            }
            off += ins.len;
        }
        // A segment index must stay below NO_SEGMENT: runs split at handlers may be one byte long.
        if self.insns.len() >= NO_SEGMENT as usize {
            return Err(SkipReason::MalformedCode("too many exception handlers"));
        }
        self.index_of[code.len()] = self.insns.len() as u16;
        for &h in handlers {
            // A handler inside an instruction fails the exception table's check later.
            if let Some(ins) = self.index(h).and_then(|i| self.insns.get_mut(i)).filter(|ins| ins.off == h) {
                ins.handler = true;
                self.ndrops += 1;
            }
        }
        // Targets must be instruction boundaries (they stay old offsets).
        for ins in self.insns.iter() {
            if matches!(ins.kind, Kind::Branch | Kind::BranchW)
                && self.index_of[ins.target as usize] == NO_SEGMENT
            {
                return Err(SkipReason::MalformedCode(
                    "branch into the middle of an instruction",
                ));
            }
        }
        for &t in self.targets.iter() {
            if self.index_of[t as usize] == NO_SEGMENT {
                return Err(SkipReason::MalformedCode(
                    "switch target inside an instruction",
                ));
            }
        }
        Ok(())
    }

    /// Segment index of the instruction at old offset `off` (boundary or `code_len`), else None.
    #[inline]
    pub fn index(&self, off: u32) -> Option<usize> {
        match self.index_of.get(off as usize) {
            Some(&i) if i != NO_SEGMENT => Some(i as usize),
            _ => None,
        }
    }

    /// Whether `off` is the start of an instruction (not the code end).
    #[inline]
    pub fn is_insn(&self, off: u32) -> bool {
        off < self.code_len && self.index(off).is_some()
    }

    /// Start of the instruction containing old offset `off` (for tables that may point
    /// mid-instruction); offsets past the code give the code end.
    pub fn containing(&self, off: u32) -> Option<u32> {
        containing(&self.index_of, off)
    }
}

/// The last offset at or before `off` (or the table's end, for offsets past it) whose entry in a
/// per-offset table is not `u16::MAX`, the mark of "inside an instruction" in
/// [`Decoded::index_of`] and [`Direct`]'s positions alike.
fn containing(table: &[u16], off: u32) -> Option<u32> {
    let mut o = (off as usize).min(table.len().checked_sub(1)?);
    while *table.get(o)? == u16::MAX {
        o = o.checked_sub(1)?;
    }
    Some(o as u32)
}

/// New positions; `start` has one entry per segment plus one for the code end. [`emit`] records
/// them as it writes the code; [`Layout::compute`] computes them beforehand to choose the branches
/// to widen, for a method whose new code may pass 32 KiB.
#[derive(Default)]
pub(crate) struct Layout {
    pub start: Vec<u32>,
    pub code_len: u32,
    pub entry_len: u32,
    /// Some 16-bit branch is in its wide form.
    pub any_wide: bool,
    /// [`emit`]'s branch displacements still to write.
    fixups: Vec<Fixup>,
}

/// A branch displacement [`emit`] writes once every position is known.
struct Fixup {
    /// Where the displacement goes in the new code.
    at: u32,
    /// The new position it is relative to.
    origin: u32,
    /// The old offset of the target.
    target: u32,
    /// Four bytes, else two.
    wide: bool,
}

/// Size of an instruction at new opcode position `at`.
#[inline]
fn new_len(ins: &Insn, at: u32) -> u32 {
    // Plain instructions and unwidened branches keep their length: one predictable test.
    if ins.kind != Kind::Switch && !ins.wide {
        return ins.len;
    }
    match ins.kind {
        Kind::Switch => ins.len - switch_pad(ins.off) + switch_pad(at),
        Kind::Branch if matches!(ins.op, OP_GOTO | OP_JSR) => 5,
        // Inverted condition over a goto_w.
        Kind::Branch => 8,
        // Never widened.
        Kind::Plain | Kind::BranchW => ins.len,
    }
}

impl Layout {
    /// New position of segment `i`'s (first) opcode: after the probes before it, if any.
    #[inline]
    pub fn at(&self, d: &Decoded, i: usize) -> u32 {
        self.start[i] + d.insns[i].before_len()
    }

    /// New position of the instruction boundary at old offset `off` (or of the code end).
    #[inline]
    pub fn pos(&self, d: &Decoded, off: u32) -> Option<u32> {
        self.pos_in(d, d.index(off)?, off)
    }

    /// [`Layout::pos`] given `i = d.index(off)`.
    #[inline]
    pub fn pos_in(&self, d: &Decoded, i: usize, off: u32) -> Option<u32> {
        let start = *self.start.get(i)?;
        Some(match d.insns.get(i) {
            // Inside a run the distance to the run's first opcode is unchanged (a handler's drop
            // probe may go before that).
            Some(s) if off != s.off => start + s.before_len() + (off - s.off),
            _ => start,
        })
    }

    /// Computes positions, widening 16-bit branches until every displacement fits (a fixed
    /// point: widening only grows code, so it terminates after at most one pass per branch).
    /// Probe lengths come from `Insn::probe_len`; `wide` flags persist in `d.insns`.
    pub fn compute(&mut self, d: &mut Decoded, entry_len: u32) -> Result<(), SkipReason> {
        let n = d.insns.len();
        self.entry_len = entry_len;
        self.start.clear();
        self.start.resize(n + 1, 0);
        // Whether some branch is wide, as of the last pass (which changed no flag).
        let any_wide = loop {
            let mut pos = entry_len;
            let mut any_wide = false;
            for (ins, start) in d.insns.iter().zip(&mut self.start) {
                *start = pos;
                // A handler's drop and a call probe go before the instruction, an allocation
                // probe or an invoke's drop after it.
                let after = match ins.probe {
                    Probe::None => 0,
                    Probe::Call => if ins.drop { probes::DROP_LEN } else { 0 },
                    Probe::Alloc => ins.probe_len,
                };
                pos += ins.before_len();
                pos += new_len(ins, pos) + after;
                any_wide |= ins.wide;
                // Give up early on absurd sizes; u32 cannot overflow before this trips.
                if pos > 4 * MAX_CODE {
                    return Err(SkipReason::CodeTooLarge);
                }
            }
            self.start[n] = pos;
            self.code_len = pos;
            // The new code with every branch narrow fits in the i16 range: no displacement can
            // overflow, so the widening check is skipped (the common case).
            if !any_wide && pos <= i16::MAX as u32 {
                break false;
            }
            let mut changed = false;
            for i in 0..n {
                let ins = d.insns[i];
                if ins.kind == Kind::Branch && !ins.wide {
                    let t = self.pos(d, ins.target).ok_or(SkipReason::MalformedCode("target"))?;
                    let disp = t as i64 - self.at(d, i) as i64;
                    if disp < i16::MIN as i64 || disp > i16::MAX as i64 {
                        d.insns[i].wide = true;
                        changed = true;
                    }
                }
            }
            if !changed {
                break any_wide;
            }
        };
        if self.code_len > MAX_CODE {
            return Err(SkipReason::CodeTooLarge);
        }
        self.any_wide = any_wide;
        Ok(())
    }
}

/// Inverse of a conditional branch opcode.
fn invert(op: u8) -> u8 {
    match op {
        0x99..=0xA6 => {
            if (op - 0x99).is_multiple_of(2) {
                op + 1
            } else {
                op - 1
            }
        }
        _ => op ^ 1, // ifnull <-> ifnonnull
    }
}

/// The entry probe (the method id's push and the probe locals; None for none) and the pushes of
/// each instruction's probe.
pub(crate) struct Pushes<'a> {
    pub entry: Option<(IntPush, ProbeLocals)>,
    /// Per instruction (NONE-free only where a probe exists).
    pub site: &'a [Option<IntPush>],
}

/// The new code array as it is written: a buffer sized beforehand (see [`emit`]) and a position.
/// Stores go through a slice and a local position, where `Vec` pushes would reload the vector's
/// length and capacity after every byte stored (a `u8` store may alias them); and pieces are
/// written as fixed-size stores cut back to their length (no memcpy calls), which needs
/// [`CodeBuf::SLACK`] bytes past the end of the real code.
pub(crate) struct CodeBuf<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl<'b> CodeBuf<'b> {
    /// The most any fixed-size store writes past the bytes it keeps: a 16-byte run copy of a
    /// 1-byte run, or the entry probe's store.
    pub const SLACK: usize = if probes::ENTRY_OVERRUN > 15 { probes::ENTRY_OVERRUN } else { 15 };

    pub fn new(buf: &'b mut [u8]) -> Self {
        CodeBuf { buf, pos: 0 }
    }

    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Stores all of `bytes` and keeps the first `len`.
    #[inline]
    pub fn put<const N: usize>(&mut self, bytes: [u8; N], len: usize) {
        self.buf[self.pos..self.pos + N].copy_from_slice(&bytes);
        self.pos += len;
    }

    /// Stores `n` zero bytes (the buffer starts zeroed, but a fixed-size store past the end of
    /// an earlier piece may have written there).
    #[inline]
    pub fn zeros(&mut self, n: usize) {
        self.buf[self.pos..self.pos + n].fill(0);
        self.pos += n;
    }

    #[inline]
    fn byte(&mut self, b: u8) {
        self.buf[self.pos] = b;
        self.pos += 1;
    }

    /// Stores `run`, which is `code[off..]`'s first bytes: a short run (most are) as a fixed
    /// 16 bytes of `code` cut back to its length.
    #[inline]
    fn run(&mut self, code: &[u8], off: usize, run: &[u8]) {
        if run.len() <= 16 {
            if let Some(chunk) = code.get(off..).and_then(|c| c.first_chunk::<16>()) {
                self.put(*chunk, run.len());
                return;
            }
        }
        self.slice(run);
    }

    #[inline]
    fn slice(&mut self, s: &[u8]) {
        self.buf[self.pos..self.pos + s.len()].copy_from_slice(s);
        self.pos += s.len();
    }
}

/// Appends the new code array to `out` (on error, maybe part of it), and records where it put
/// each segment in `lay.start` and the new length in `lay.code_len`: the layout is where the
/// bytes land, with the branch forms that `wide` flags chose (none without [`Layout::compute`]).
/// Branch and switch displacements are written at the end, when every target's place is known.
pub(crate) fn emit(
    code: &[u8],
    d: &Decoded,
    lay: &mut Layout,
    pushes: &Pushes<'_>,
    refs: &RuntimeRefs,
    out: &mut Vec<u8>,
) -> Result<(), SkipReason> {
    let bad = SkipReason::MalformedCode("emit");
    if pushes.site.len() != d.insns.len() {
        return Err(bad);
    }
    // The largest code the segments can give: every probe at its longest, every segment 5
    // bytes longer (a conditional branch widened from 3 to 8 bytes; a switch gains at most 3
    // bytes of padding), plus the entry probe.
    let bound = d.code_len as usize
        + d.nprobes as usize * probes::MAX_SITE_LEN as usize
        + d.ndrops as usize * probes::DROP_LEN as usize
        + d.insns.len() * 5
        + pushes.entry.map_or(0, |(push, locals)| probes::entry_len(push, locals)) as usize;
    let base = out.len();
    out.resize(base + bound + CodeBuf::SLACK, 0);
    let mut w = CodeBuf::new(&mut out[base..]);
    lay.start.clear();
    lay.start.resize(d.insns.len() + 1, 0);
    lay.fixups.clear();
    let tail = match pushes.entry {
        Some((push, locals)) => {
            probes::emit_entry(&mut w, push, locals, refs);
            probes::SiteTail::new(locals, refs)
        }
        None => probes::SiteTail::drops(refs),
    };
    // Writes a placeholder for a displacement from `origin` to old offset `target`.
    let mut branch = |w: &mut CodeBuf<'_>, origin: u32, target: u32, wide: bool| {
        lay.fixups.push(Fixup { at: w.pos() as u32, origin, target, wide });
        w.put([0; 4], if wide { 4 } else { 2 });
    };
    for ((ins, start), push) in d.insns.iter().zip(lay.start.iter_mut()).zip(pushes.site) {
        *start = w.pos() as u32;
        if ins.handler {
            probes::emit_drop_with(&mut w, &tail);
        }
        if ins.probe == Probe::Call {
            probes::emit_site_with(&mut w, false, push.ok_or(bad)?, &tail);
        }
        let at = w.pos() as u32;
        let off = ins.off as usize;
        match ins.kind {
            Kind::Plain => w.run(code, off, code.get(off..off + ins.len as usize).ok_or(bad)?),
            Kind::Branch | Kind::BranchW => {
                if ins.kind == Kind::BranchW {
                    w.byte(ins.op);
                    branch(&mut w, at, ins.target, true);
                } else if !ins.wide {
                    w.byte(ins.op);
                    branch(&mut w, at, ins.target, false);
                } else if matches!(ins.op, OP_GOTO | OP_JSR) {
                    w.byte(if ins.op == OP_GOTO { OP_GOTO_W } else { OP_JSR_W });
                    branch(&mut w, at, ins.target, true);
                } else {
                    // if!cond +8 (skip the goto_w); goto_w target.
                    let [h, l] = 8i16.to_be_bytes();
                    w.put([invert(ins.op), h, l, OP_GOTO_W], 4);
                    branch(&mut w, at + 3, ins.target, true);
                }
            }
            Kind::Switch => {
                w.byte(ins.op);
                w.put([0; 3], switch_pad(at) as usize);
                let base = ins.off + 1 + switch_pad(ins.off);
                let tg = d
                    .targets
                    .get(ins.target as usize..(ins.target + ins.ntargets) as usize)
                    .ok_or(bad)?;
                branch(&mut w, at, tg[0], true);
                let rest = code.get(base as usize + 4..off + ins.len as usize).ok_or(bad)?;
                if ins.op == OP_TABLESWITCH {
                    w.slice(rest.get(..8).ok_or(bad)?); // low, high
                    for &t in &tg[1..] {
                        branch(&mut w, at, t, true);
                    }
                } else {
                    w.slice(rest.get(..4).ok_or(bad)?); // npairs
                    for (k, &t) in tg.iter().enumerate().skip(1) {
                        let m = 4 + (k - 1) * 8;
                        w.slice(rest.get(m..m + 4).ok_or(bad)?);
                        branch(&mut w, at, t, true);
                    }
                }
            }
        }
        if ins.probe == Probe::Alloc {
            probes::emit_site_with(&mut w, true, push.ok_or(bad)?, &tail);
        }
        if ins.drop {
            probes::emit_drop_with(&mut w, &tail);
        }
    }
    let len = w.pos();
    out.truncate(base + len);
    let len = u32::try_from(len).map_err(|_| SkipReason::CodeTooLarge)?;
    lay.start[d.insns.len()] = len;
    lay.code_len = len;
    let new_code = &mut out[base..];
    for f in &lay.fixups {
        let t = lay.pos(d, f.target).ok_or(bad)?;
        let disp = t as i64 - f.origin as i64;
        let at = f.at as usize;
        if f.wide {
            new_code[at..at + 4].copy_from_slice(&(disp as i32).to_be_bytes());
        } else {
            new_code[at..at + 2].copy_from_slice(&(disp as i16).to_be_bytes());
        }
    }
    Ok(())
}

/// Where the old code's offsets went, as the tables (exceptions, frames, lines, locals) need
/// it: from the segments of the general rewrite ([`Segmented`]) or the direct one ([`Direct`]).
/// Which old offsets are instruction boundaries.
pub(crate) trait Boundaries {
    /// Length of the old code.
    fn code_len(&self) -> u32;
    /// Whether old offset `off` starts an instruction or is the code end.
    fn is_boundary(&self, off: u32) -> bool;
}

impl Boundaries for Decoded {
    fn code_len(&self) -> u32 {
        self.code_len
    }
    #[inline]
    fn is_boundary(&self, off: u32) -> bool {
        self.index(off).is_some()
    }
}

pub(crate) trait CodeMap: Boundaries {
    /// New position of boundary `off`: the first byte emitted for its instruction, i.e. its call
    /// probe when it has one, or its drop probe when a handler starts there (branch targets,
    /// handlers, frames and tables use this, so a jump to an invoke runs its probe); the new code
    /// end for the code end.
    fn pos(&self, off: u32) -> Option<u32>;
    /// New position of the opcode of the `new` at old offset `off` (what an Uninitialized
    /// verification type names).
    fn new_opcode(&self, off: u32) -> Option<u32>;
    /// Start of the instruction containing old offset `off` (the code end past it).
    fn containing(&self, off: u32) -> Option<u32>;
}

/// The general rewrite's [`CodeMap`]: segments and their layout.
pub(crate) struct Segmented<'s> {
    pub d: &'s Decoded,
    pub lay: &'s Layout,
}

impl Boundaries for Segmented<'_> {
    fn code_len(&self) -> u32 {
        self.d.code_len()
    }
    #[inline]
    fn is_boundary(&self, off: u32) -> bool {
        self.d.is_boundary(off)
    }
}

impl CodeMap for Segmented<'_> {
    #[inline]
    fn pos(&self, off: u32) -> Option<u32> {
        self.lay.pos_in(self.d, self.d.index(off)?, off)
    }
    fn new_opcode(&self, off: u32) -> Option<u32> {
        // A `new` has a probe, so it is a segment of its own.
        let i = self.d.index(off).filter(|&i| i < self.d.insns.len())?;
        Some(self.lay.at(self.d, i))
    }
    fn containing(&self, off: u32) -> Option<u32> {
        self.d.containing(off)
    }
}

/// The direct rewrite: one pass over the code that copies it into the new body, inserting the
/// probes as it meets their instructions, without segments or a layout. It serves methods whose
/// new code cannot reach 32 KiB (no branch can need widening; [`DIRECT_MAX_CODE`]); the others,
/// and a method with a switch before its first probe (whose padding depends on the entry probe's
/// length, not known yet), take the general rewrite.
///
/// Positions in the body are relative to its start: the entry probe, whose length is known only
/// once the method has an id, goes before it (`entry_len`).
#[derive(Default)]
pub(crate) struct Direct {
    /// Old offset -> body position of the instruction starting there ([`NO_POS`] inside an
    /// instruction); `newpos[code_len]` is the body's end.
    newpos: Vec<u16>,
    /// The body; only its first `body_len` bytes are the code (a reused buffer of
    /// [`DIRECT_BODY_CAP`] bytes).
    body: Vec<u8>,
    pub body_len: usize,
    pub entry_len: u32,
    /// Branch displacements to write once every target's place is known.
    fixups: Vec<Fixup>,
    /// Body positions of the probes' `invokestatic` operands, and the runtime method each calls
    /// (written by [`Direct::link`]).
    links: Vec<(u32, RuntimeMethod)>,
    /// The exception handlers' old offsets, sorted: a drop probe goes before each.
    handlers: Vec<u32>,
}

/// Largest code the direct rewrite takes: a probe point is at least 2 bytes of code and its probe
/// at most [`probes::MAX_SITE_LEN`], so the new code (with an entry probe of at most 26 bytes and
/// at most [`DIRECT_MAX_HANDLERS`] handlers' drop probes) stays below 32 KiB.
pub(crate) const DIRECT_MAX_CODE: u32 = 3900;
/// Most exception handlers (distinct offsets) a method of the direct rewrite may have.
pub(crate) const DIRECT_MAX_HANDLERS: usize = 256;
/// The body buffer: [`DIRECT_MAX_CODE`] bytes of code give at most 31,932 (every other byte
/// a probe point with a 14-byte probe, switches 3 bytes more padding each; an invoke is 3 bytes
/// or more, so one with a drop probe too adds less per byte), plus 768 for the handlers' drops.
const DIRECT_BODY_CAP: usize = 32 * 1024;
/// [`Direct`]'s mark of an offset inside an instruction (the same as [`NO_SEGMENT`]).
const NO_POS: u16 = u16::MAX;

/// How the direct walk ended.
pub(crate) enum Walk {
    Done,
    /// A switch before the first probe: nothing registered, take the general rewrite.
    Switch,
}

impl Direct {
    /// The new code: `entry` (the entry probe) and the body.
    pub fn body(&self) -> &[u8] {
        &self.body[..self.body_len]
    }

    /// The runtime methods of the probes [`Direct::link`] links ([`RuntimeMethod::bit`]s).
    pub fn probe_methods(&self) -> u8 {
        self.links.iter().fold(0, |set, &(_, m)| set | m.bit())
    }

    /// Writes the class's Methodrefs of the runtime into the site probes.
    pub fn link(&mut self, refs: &RuntimeRefs) -> Result<(), SkipReason> {
        for &(at, m) in &self.links {
            probes::link_site(&mut self.body[..self.body_len], at as usize, m, refs)
                .ok_or(SkipReason::MalformedCode("site link"))?;
        }
        Ok(())
    }

    /// Rewrites `code` into the body. `handlers`: the exception handlers' offsets (sorted, each
    /// once, at most [`DIRECT_MAX_HANDLERS`]), each given a drop probe before its instruction.
    /// `call_probes`, `alloc_probes`: whether invokes and allocations get probes. `tail` is
    /// the site probes' tail, `linked` when it has the class's Methodrefs of the runtime already
    /// (otherwise [`Direct::link`] writes them later, as [`probes::link_site`] describes). `site(off,
    /// probe)` is asked at each probe point for the push of its site id, the entry probe's
    /// length (the method takes its id at its first site) and, for an invoke, whether a drop
    /// probe follows it.
    #[allow(clippy::too_many_arguments)]
    pub fn walk(
        &mut self,
        code: &[u8],
        handlers: &[u32],
        call_probes: bool,
        alloc_probes: bool,
        tail: &probes::SiteTail,
        linked: bool,
        mut site: impl FnMut(u32, Probe) -> Result<(IntPush, u32, bool), SkipReason>,
    ) -> Result<Walk, SkipReason> {
        let code_len = code.len() as u32;
        if code_len == 0 || code_len > DIRECT_MAX_CODE || handlers.len() > DIRECT_MAX_HANDLERS {
            return Err(SkipReason::MalformedCode("code length for the direct rewrite"));
        }
        self.handlers.clear();
        self.handlers.extend_from_slice(handlers);
        self.newpos.clear();
        self.newpos.resize(code.len() + 1, NO_POS);
        if self.body.len() < DIRECT_BODY_CAP + CodeBuf::SLACK {
            self.body.resize(DIRECT_BODY_CAP + CodeBuf::SLACK, 0);
        }
        self.fixups.clear();
        self.links.clear();
        self.entry_len = 0;
        let overrun = SkipReason::MalformedCode("instruction overruns the code");
        let newpos = &mut self.newpos[..code.len()];
        let mut w = CodeBuf::new(&mut self.body[..]);
        // The entry probe's length, from the first site on.
        let mut entry_len = None;
        let mut off = 0usize;
        // handlers[..hi] are at or before the instructions done; the next is `next_handler`
        // (usize::MAX: none), the first after `first` once a segment has begun.
        let mut hi = 0;
        let mut next_handler = 0;
        while off < code.len() {
            let first = off;
            // A handler's drop probe goes before its instruction, whose position it takes; a
            // run of plain instructions stops before the next handler. One test per segment
            // for the common case, a method without handlers.
            let mut drop_at = None;
            if off >= next_handler {
                while handlers.get(hi).is_some_and(|&h| (h as usize) < off) {
                    hi += 1;
                }
                if handlers.get(hi) == Some(&(off as u32)) {
                    hi += 1;
                    drop_at = Some(w.pos());
                    probes::emit_drop_with(&mut w, tail);
                    if !linked {
                        self.links.push((w.pos() as u32 - 2, RuntimeMethod::Drop));
                    }
                }
                next_handler = handlers.get(hi).map_or(usize::MAX, |&h| h as usize);
            }
            let op = code[off];
            'insn: {
                if PLAIN_LEN[op as usize] != 0 {
                    // A run of plain instructions, copied as one block: they keep their distance
                    // from its start.
                    let start = off;
                    let shift = w.pos().wrapping_sub(start);
                    while let Some(&op) = code.get(off) {
                        let len = PLAIN_LEN[op as usize] as usize;
                        if len == 0 {
                            break;
                        }
                        newpos[off] = off.wrapping_add(shift) as u16;
                        off += len;
                    }
                    // A run past a handler ends before it (the positions past it are set again).
                    if off > next_handler && newpos[next_handler] != NO_POS {
                        off = next_handler;
                    }
                    // An instruction that overruns the code ends the run past the end.
                    w.run(code, start, code.get(start..off).ok_or(overrun)?);
                    break 'insn;
                }
                let at = w.pos();
                let len = match FIXED_LEN[op as usize] {
                    INVALID => return Err(SkipReason::MalformedCode("unknown opcode")),
                    0 if op == OP_WIDE => wide_len(code, off as u32)? as usize,
                    0 => {
                        // A switch: its padding depends on its position in the whole new code.
                        let Some(entry_len) = entry_len else { return Ok(Walk::Switch) };
                        let o = off as u32;
                        let sw = Switch::parse(code, o)?;
                        let new_at = (entry_len as usize + at) as u32;
                        w.put([op, 0, 0, 0], 1 + switch_pad(new_at) as usize);
                        self.fixups.push(Fixup { at: w.pos() as u32, origin: at as u32, target: target_of(o, sw.default as i64, code_len)?, wide: true });
                        w.put([0; 4], 4);
                        let base = (o + 1 + switch_pad(o)) as usize;
                        // low and high, or npairs.
                        w.slice(code.get(base + 4..sw.first as usize).ok_or(overrun)?);
                        for k in 0..sw.n {
                            let e = sw.first + k * sw.stride;
                            if sw.disp_at != 0 {
                                w.slice(code.get(e as usize..(e + 4) as usize).ok_or(overrun)?); // match
                            }
                            let d = rd_i32(code, e + sw.disp_at)?;
                            self.fixups.push(Fixup { at: w.pos() as u32, origin: at as u32, target: target_of(o, d as i64, code_len)?, wide: true });
                            w.put([0; 4], 4);
                        }
                        newpos[off] = at as u16;
                        off = sw.end as usize;
                        break 'insn;
                    }
                    n => n as usize,
                };
                if off + len > code.len() {
                    return Err(overrun);
                }
                newpos[off] = at as u16;
                let o = off as u32;
                match op {
                    0x99..=0xA8 | 0xC6 | 0xC7 | OP_GOTO_W | OP_JSR_W => {
                        let wide = matches!(op, OP_GOTO_W | OP_JSR_W);
                        let d = if wide { rd_i32(code, o + 1)? as i64 } else { super::classfile::be_u16(code, off + 1).ok_or(overrun)? as i16 as i64 };
                        self.fixups.push(Fixup { at: at as u32 + 1, origin: at as u32, target: target_of(o, d, code_len)?, wide });
                        w.put([op, 0, 0, 0, 0], len);
                    }
                    _ if (call_probes && is_invoke(op)) || (alloc_probes && is_alloc(op)) => {
                        let alloc = !is_invoke(op);
                        if alloc {
                            w.run(code, off, &code[off..off + len]);
                        }
                        let (push, e, drop) = site(o, if alloc { Probe::Alloc } else { Probe::Call })?;
                        entry_len = Some(e);
                        probes::emit_site_with(&mut w, alloc, push, tail);
                        // The `invokestatic` operand ends a probe.
                        if !linked {
                            self.links.push((w.pos() as u32 - 2, if alloc { RuntimeMethod::Alloc } else { RuntimeMethod::Call }));
                        }
                        if !alloc {
                            w.run(code, off, &code[off..off + len]);
                        }
                        if drop {
                            probes::emit_drop_with(&mut w, tail);
                            if !linked {
                                self.links.push((w.pos() as u32 - 2, RuntimeMethod::Drop));
                            }
                        }
                    }
                    _ => w.run(code, off, &code[off..off + len]),
                }
                off += len;
            }
            if let Some(p) = drop_at {
                newpos[first] = p as u16;
            }
        }
        let body_len = w.pos();
        self.newpos[code.len()] = body_len as u16;
        self.body_len = body_len;
        // Displacements, once every target is placed; a target must start an instruction.
        for f in &self.fixups {
            let t = match self.newpos.get(f.target as usize) {
                Some(&p) if p != NO_POS => p as i64,
                _ => return Err(SkipReason::MalformedCode("branch into the middle of an instruction")),
            };
            let disp = t - f.origin as i64;
            let at = f.at as usize;
            if f.wide {
                self.body[at..at + 4].copy_from_slice(&(disp as i32).to_be_bytes());
            } else {
                self.body[at..at + 2].copy_from_slice(&(disp as i16).to_be_bytes());
            }
        }
        Ok(Walk::Done)
    }
}

impl Boundaries for Direct {
    fn code_len(&self) -> u32 {
        self.newpos.len() as u32 - 1
    }
    #[inline]
    fn is_boundary(&self, off: u32) -> bool {
        self.newpos.get(off as usize).is_some_and(|&p| p != NO_POS)
    }
}

impl CodeMap for Direct {
    #[inline]
    fn pos(&self, off: u32) -> Option<u32> {
        match self.newpos.get(off as usize) {
            Some(&p) if p != NO_POS => Some(self.entry_len + p as u32),
            _ => None,
        }
    }
    fn new_opcode(&self, off: u32) -> Option<u32> {
        // An allocation probe goes after its instruction; a handler's drop probe before it.
        let drop = if self.handlers.binary_search(&off).is_ok() { probes::DROP_LEN } else { 0 };
        Some(self.pos(off)? + drop)
    }
    fn containing(&self, off: u32) -> Option<u32> {
        containing(&self.newpos, off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverted_conditions() {
        for (a, b) in [
            (0x99, 0x9A),
            (0x9B, 0x9C),
            (0x9D, 0x9E),
            (0x9F, 0xA0),
            (0xA1, 0xA2),
            (0xA3, 0xA4),
            (0xA5, 0xA6),
            (0xC6, 0xC7),
        ] {
            assert_eq!(invert(a), b);
            assert_eq!(invert(b), a);
        }
    }

    #[test]
    fn containing_finds_the_instruction_start() {
        let m = u16::MAX;
        let table = [m, 0, m, m, 1, m, 2];
        assert_eq!(containing(&table, 0), None); // before the first instruction
        assert_eq!([1, 2, 3, 4, 5].map(|o| containing(&table, o)), [1, 1, 1, 4, 4].map(Some));
        assert_eq!(containing(&table, 99), Some(6)); // past the end: the end
        assert_eq!(containing(&[], 0), None);
    }

    #[test]
    fn switch_lengths_at_every_alignment() {
        for pad in 0..4usize {
            // nops, then a tableswitch of low 1, high 2 (two targets), then a lookupswitch of one pair.
            let mut code = vec![0x00; pad];
            let at = code.len();
            code.push(OP_TABLESWITCH);
            code.extend(std::iter::repeat_n(0, switch_pad(at as u32) as usize));
            code.extend([0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0]);
            let next = code.len();
            code.push(OP_LOOKUPSWITCH);
            code.extend(std::iter::repeat_n(0, switch_pad(next as u32) as usize));
            code.extend([0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0]);
            assert_eq!(any_insn_len(&code, at), Some(next - at), "tableswitch at {at}");
            assert_eq!(any_insn_len(&code, next), Some(code.len() - next), "lookupswitch at {next}");
            assert_eq!(any_insn_len(&code[..code.len() - 1], next), None, "cut short");
        }
    }

    #[test]
    fn invokes_only_before_throws_needs_straight_runs_to_athrow() {
        const INVOKE: [u8; 3] = [0xB8, 0, 1];
        let cases: [(&str, Vec<u8>, bool); 10] = [
            ("a call, then athrow", [&[0x2A][..], &INVOKE, &[0xBF]].concat(), true),
            // iload_0; ifge 12; new; dup; invokespecial; athrow; return
            ("a throw branched around", vec![0x1A, 0x9C, 0, 11, 0xBB, 0, 2, 0x59, 0xB7, 0, 3, 0xBF, 0xB1], true),
            ("a call, then return", [&INVOKE[..], &[0xB1]].concat(), false),
            ("a call, then goto", [&INVOKE[..], &[0xA7, 0xFF, 0xFD]].concat(), false),
            ("a call, then a branch", [&INVOKE[..], &[0x9A, 0, 4, 0xBF, 0xB1]].concat(), false),
            ("no call", vec![0x03, 0xAC], false),
            ("a second call returns", [&INVOKE[..], &[0xBF], &INVOKE, &[0xAC]].concat(), false),
            ("a call, then wide ret", [&INVOKE[..], &[0xC4, 0xA9, 0, 1]].concat(), false),
            ("truncated", vec![0xB8, 0], false),
            ("too long", [&[0x00; LEAF_MAX_CODE][..], &INVOKE, &[0xBF]].concat(), false),
        ];
        for (what, code, want) in cases {
            assert_eq!(invokes_only_before_throws(&code), want, "{what}");
        }
    }

    #[test]
    fn switch_padding_for_every_alignment() {
        assert_eq!([0, 1, 2, 3, 4].map(switch_pad), [3, 2, 1, 0, 3]);
    }

    #[test]
    fn decode_rejects_without_panicking() {
        let mut d = Decoded::default();
        assert!(d.decode(&[], &[]).is_err());
        assert!(d.decode(&[0xA7, 0x00], &[]).is_err()); // truncated goto
        assert!(d.decode(&[0xA7, 0x00, 0x01, 0xB1], &[]).is_err()); // into the middle
        assert!(d
            .decode(&[0xAA, 0, 0, 0, 0, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF, 0x80, 0, 0, 0], &[])
            .is_err());
        assert!(d.decode(&[0xFE], &[]).is_err());
        assert!(d.decode(&[0xC4, 0xB1], &[]).is_err());
        assert!(d.decode(&[0x00, 0xA7, 0xFF, 0xFF, 0xB1], &[]).is_ok());
    }
}
