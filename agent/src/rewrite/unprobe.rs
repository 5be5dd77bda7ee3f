//! Turns off the probes of a class lucce rewrote and another agent then transformed, so that the
//! class can be rewritten again.
//!
//! A Java agent attached while the JVM runs that retransforms a class lucce rewrote at load is
//! handed lucce's output (the JVM replays the rewrite of an environment that cannot retransform,
//! as lucce's is without a Java agent at startup), and what it makes of it comes to lucce's load
//! hook with the old probes inside: Byte Buddy's advice (Mockito's inline mocks) goes before the
//! entry probe and shifts the method's locals, probe locals included. Every probe is replaced in
//! place by code of the same length with the same effect on the operand stack and on the locals'
//! types that calls nothing: offsets, branches, exception tables and StackMapTable frames stay
//! valid, and the probe locals keep their long and int types (the frames may name them), with
//! values nobody reads. The rewrite then puts in fresh probes, with new ids, around everything.

use super::classfile::{ClassFile, ConstPool};
use super::code::{insn_len, switch_pad};
use super::probes::{RuntimeMethod, RUNTIME_CLASS};

const NOP: u8 = 0x00;
const ICONST_0: u8 = 0x03;
const ICONST_5: u8 = 0x08;
const LCONST_0: u8 = 0x09;
const BIPUSH: u8 = 0x10;
const SIPUSH: u8 = 0x11;
const LDC: u8 = 0x12;
const LDC_W: u8 = 0x13;
const ILOAD: u8 = 0x15;
const LLOAD: u8 = 0x16;
const ALOAD: u8 = 0x19;
const ILOAD_0: u8 = 0x1A;
const LLOAD_0: u8 = 0x1E;
const LLOAD_3: u8 = 0x21;
const ALOAD_0: u8 = 0x2A;
const ILOAD_3: u8 = 0x1D;
const ALOAD_3: u8 = 0x2D;
const ASTORE: u8 = 0x3A;
const ASTORE_0: u8 = 0x4B;
const ASTORE_3: u8 = 0x4E;
const TABLESWITCH: u8 = 0xAA;
const LOOKUPSWITCH: u8 = 0xAB;
const INVOKESTATIC: u8 = 0xB8;
const WIDE: u8 = 0xC4;

/// The hidden-class hook's runtime method (`probes::DEFINE_HOOK`), which is not a `RuntimeMethod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Called {
    Probe(RuntimeMethod),
    Hidden,
}

/// `class` with every probe turned off, or None when it has none or one lucce would not have
/// written (then the class is better left as it is).
pub(crate) fn unprobe(class: &[u8]) -> Option<Vec<u8>> {
    let cf = ClassFile::parse(class).ok()?;
    let calls = runtime_calls(&cf.cp);
    if calls.is_empty() {
        return None;
    }
    let mut out = class.to_vec();
    let mut found = false;
    for m in &cf.methods {
        let Some(code) = &m.code else { continue };
        // Code attribute info: max_stack, max_locals, code_length, code.
        let info = code.info.clone();
        let len = u32::from_be_bytes(class.get(info.start + 4..info.start + 8)?.try_into().ok()?) as usize;
        let start = info.start + 8;
        let code = out.get_mut(start..start.checked_add(len)?)?;
        found |= unprobe_code(code, &calls)?;
    }
    found.then_some(out)
}

/// The pool's Methodrefs of the runtime class's probe methods.
fn runtime_calls(cp: &ConstPool<'_>) -> Vec<(u16, Called)> {
    let mut calls = Vec::new();
    for i in 1..cp.count().min(u16::MAX as u32 + 1) as u16 {
        let Some((class, name, desc)) = cp.member_ref(i) else { continue };
        if cp.class_name(class) != Some(RUNTIME_CLASS.as_bytes()) {
            continue;
        }
        let (Some(name), Some(desc)) = (cp.utf8(name), cp.utf8(desc)) else { continue };
        let probe = RuntimeMethod::ALL.into_iter().find(|m| name == m.name().as_bytes() && desc == m.descriptor().as_bytes());
        let hook = super::probes::DEFINE_HOOK;
        match probe {
            Some(m) => calls.push((i, Called::Probe(m))),
            None if name == hook.runtime_method.as_bytes() && desc == hook.runtime_descriptor.as_bytes() => calls.push((i, Called::Hidden)),
            None => {}
        }
    }
    calls
}

/// Turns off the probes of one method's code in place; whether there was one. None when an
/// instruction does not decode or a call of the runtime class is not inside a probe's shape.
fn unprobe_code(code: &mut [u8], calls: &[(u16, Called)]) -> Option<bool> {
    // The instructions so far, as (offset, length).
    let mut insns: Vec<(usize, usize)> = Vec::new();
    let mut patches: Vec<(usize, usize, u8)> = Vec::new();
    let mut off = 0;
    while off < code.len() {
        let len = insn_length(code, off)?;
        if code[off] == INVOKESTATIC {
            let index = u16::from_be_bytes([*code.get(off + 1)?, *code.get(off + 2)?]);
            if let Some(&(_, called)) = calls.iter().find(|(i, _)| *i == index) {
                let before = |n: usize| insns.len().checked_sub(n).map(|i| insns[i]);
                let op_before = |n: usize| before(n).map(|(o, _)| code[o]);
                let end = off + len;
                // (first byte of the probe, the byte it starts with now: the rest become nops)
                let (from, first) = match called {
                    // push id; invokestatic enter|leaf  (then lstore CTX | istore MARK, kept)
                    Called::Probe(m @ (RuntimeMethod::Enter | RuntimeMethod::Leaf)) => {
                        let (at, _) = before(1).filter(|&(o, _)| is_int_push(code[o]))?;
                        (at, if m == RuntimeMethod::Enter { LCONST_0 } else { ICONST_0 })
                    }
                    // invokestatic version  (then lstore VER, kept)
                    Called::Probe(RuntimeMethod::Version) => (off, LCONST_0),
                    // push site; lload CTX; lload VER; invokestatic call|alloc
                    Called::Probe(RuntimeMethod::Call | RuntimeMethod::Alloc) => {
                        let ok = is_int_push(op_before(3)?) && is_lload(code, before(2)?) && is_lload(code, before(1)?);
                        (before(3).filter(|_| ok)?.0, NOP)
                    }
                    // aload BYTES; iload FLAGS; invokestatic hidden; astore BYTES
                    Called::Hidden => {
                        let ok = is_load(code, before(2)?, ALOAD, ALOAD_0, ALOAD_3) && is_load(code, before(1)?, ILOAD, ILOAD_0, ILOAD_3);
                        let store = insn_length(code, end).filter(|_| is_load(code, (end, 0), ASTORE, ASTORE_0, ASTORE_3))?;
                        patches.push((end, end + store, NOP));
                        (before(2).filter(|_| ok)?.0, NOP)
                    }
                };
                patches.push((from, end, first));
            }
        }
        insns.push((off, len));
        off += len;
    }
    for &(from, to, first) in &patches {
        code[from..to].fill(NOP);
        code[from] = first;
    }
    Some(!patches.is_empty())
}

/// Length of the instruction at `off`, switches included.
fn insn_length(code: &[u8], off: usize) -> Option<usize> {
    let op = *code.get(off)?;
    if op != TABLESWITCH && op != LOOKUPSWITCH {
        return insn_len(code, off);
    }
    let operands = off + 1 + switch_pad(off as u32) as usize;
    let word = |i: usize| code.get(operands + 4 * i..operands + 4 * i + 4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let entries = if op == TABLESWITCH {
        let (low, high) = (word(1)?, word(2)?);
        3 + usize::try_from(i64::from(high) - i64::from(low) + 1).ok()?
    } else {
        2 + 2 * usize::try_from(word(1)?).ok()?
    };
    let len = operands - off + 4 * entries;
    (off + len <= code.len()).then_some(len)
}

fn is_int_push(op: u8) -> bool {
    matches!(op, ICONST_0..=ICONST_5 | BIPUSH | SIPUSH | LDC | LDC_W)
}

fn is_lload(code: &[u8], at: (usize, usize)) -> bool {
    is_load(code, at, LLOAD, LLOAD_0, LLOAD_3)
}

/// Whether the instruction at `at.0` is the load (or store) `op`, in any of its forms.
fn is_load(code: &[u8], (at, _): (usize, usize), op: u8, short_first: u8, short_last: u8) -> bool {
    match code.get(at) {
        Some(&o) if o == op || (short_first..=short_last).contains(&o) => true,
        Some(&WIDE) => code.get(at + 1) == Some(&op),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_lengths_at_every_alignment() {
        for pad in 0..4usize {
            // nops, then a tableswitch of low 1, high 2 (two targets), then a lookupswitch of one pair.
            let mut code = vec![NOP; pad];
            let at = code.len();
            code.push(TABLESWITCH);
            code.extend(std::iter::repeat_n(0, switch_pad(at as u32) as usize));
            code.extend([0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0]);
            let next = code.len();
            code.push(LOOKUPSWITCH);
            code.extend(std::iter::repeat_n(0, switch_pad(next as u32) as usize));
            code.extend([0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0]);
            assert_eq!(insn_length(&code, at), Some(next - at), "tableswitch at {at}");
            assert_eq!(insn_length(&code, next), Some(code.len() - next), "lookupswitch at {next}");
            assert_eq!(insn_length(&code[..code.len() - 1], next), None, "cut short");
        }
    }

    #[test]
    fn probes_become_calls_of_nothing() {
        let calls = [
            (1, Called::Probe(RuntimeMethod::Enter)),
            (2, Called::Probe(RuntimeMethod::Version)),
            (3, Called::Probe(RuntimeMethod::Call)),
            (4, Called::Probe(RuntimeMethod::Leaf)),
        ];
        let mut code = vec![
            SIPUSH, 0x12, 0x34, INVOKESTATIC, 0, 1, 0x37, 5, // enter; lstore 5
            INVOKESTATIC, 0, 2, 0x37, 7, // version; lstore 7
            0x2A, // aload_0 (another agent's code)
            BIPUSH, 9, LLOAD, 5, WIDE, LLOAD, 0, 7, INVOKESTATIC, 0, 3, // call
            0xB6, 0, 9, // invokevirtual
            LDC, 8, INVOKESTATIC, 0, 4, 0x36, 3, // leaf; istore 3
            0xB1,
        ];
        assert_eq!(unprobe_code(&mut code, &calls), Some(true));
        assert_eq!(
            code,
            [
                LCONST_0, NOP, NOP, NOP, NOP, NOP, 0x37, 5,
                LCONST_0, NOP, NOP, 0x37, 7,
                0x2A,
                NOP, NOP, NOP, NOP, NOP, NOP, NOP, NOP, NOP, NOP, NOP,
                0xB6, 0, 9,
                ICONST_0, NOP, NOP, NOP, NOP, 0x36, 3,
                0xB1,
            ]
        );
        // A call of the runtime class without its probe's shape: left to the caller.
        let mut odd = vec![0x2A, INVOKESTATIC, 0, 1, 0xB1];
        assert_eq!(unprobe_code(&mut odd, &calls), None);
        let mut none = vec![0x2A, 0xB0];
        assert_eq!(unprobe_code(&mut none, &calls), Some(false));
    }
}
