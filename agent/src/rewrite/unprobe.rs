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
use super::code::any_insn_len;
use super::probes::{is_local_insn, IntPush, RuntimeMethod, ALOAD, ALOAD_0, ASTORE, ASTORE_0, ICONST_0, ILOAD, ILOAD_0, INVOKESTATIC, LLOAD, LLOAD_0, RUNTIME_CLASS};

const NOP: u8 = 0x00;
const LCONST_0: u8 = 0x09;

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
    // Where the instructions so far start.
    let mut starts: Vec<usize> = Vec::new();
    let mut patches: Vec<(usize, usize, u8)> = Vec::new();
    let mut off = 0;
    while off < code.len() {
        let len = any_insn_len(code, off)?;
        if code[off] == INVOKESTATIC {
            let index = u16::from_be_bytes([*code.get(off + 1)?, *code.get(off + 2)?]);
            if let Some(&(_, called)) = calls.iter().find(|(i, _)| *i == index) {
                let before = |n: usize| starts.len().checked_sub(n).map(|i| starts[i]);
                let push = |at: usize| IntPush::read(&code[at..]).is_some();
                let end = off + len;
                // (first byte of the probe, the byte it starts with now: the rest become nops)
                let (from, first) = match called {
                    // push id; invokestatic enter|leaf  (then lstore CTX | istore MARK, kept)
                    Called::Probe(m @ (RuntimeMethod::Enter | RuntimeMethod::Leaf)) => {
                        let at = before(1).filter(|&at| push(at))?;
                        (at, if m == RuntimeMethod::Enter { LCONST_0 } else { ICONST_0 })
                    }
                    // invokestatic version  (then lstore VER, kept)
                    Called::Probe(RuntimeMethod::Version) => (off, LCONST_0),
                    // invokestatic drop
                    Called::Probe(RuntimeMethod::Drop) => (off, NOP),
                    // push site; lload CTX; lload VER; invokestatic call|alloc
                    Called::Probe(RuntimeMethod::Call | RuntimeMethod::Alloc) => {
                        let (p, c, v) = (before(3)?, before(2)?, before(1)?);
                        let ok = push(p) && is_local_insn(code, c, LLOAD_0, LLOAD) && is_local_insn(code, v, LLOAD_0, LLOAD);
                        (Some(p).filter(|_| ok)?, NOP)
                    }
                    // aload BYTES; iload FLAGS; invokestatic hidden; astore BYTES
                    Called::Hidden => {
                        let (b, f) = (before(2)?, before(1)?);
                        let ok = is_local_insn(code, b, ALOAD_0, ALOAD) && is_local_insn(code, f, ILOAD_0, ILOAD);
                        let store = any_insn_len(code, end).filter(|_| ok && is_local_insn(code, end, ASTORE_0, ASTORE))?;
                        patches.push((end, end + store, NOP));
                        (b, NOP)
                    }
                };
                patches.push((from, end, first));
            }
        }
        starts.push(off);
        off += len;
    }
    for &(from, to, first) in &patches {
        code[from..to].fill(NOP);
        code[from] = first;
    }
    Some(!patches.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIPUSH: u8 = 0x10;
    const SIPUSH: u8 = 0x11;
    const LDC: u8 = 0x12;
    const WIDE: u8 = 0xC4;

    #[test]
    fn probes_become_calls_of_nothing() {
        let calls = [
            (1, Called::Probe(RuntimeMethod::Enter)),
            (2, Called::Probe(RuntimeMethod::Version)),
            (3, Called::Probe(RuntimeMethod::Call)),
            (4, Called::Probe(RuntimeMethod::Leaf)),
            (5, Called::Probe(RuntimeMethod::Drop)),
        ];
        let mut code = vec![
            SIPUSH, 0x12, 0x34, INVOKESTATIC, 0, 1, 0x37, 5, // enter; lstore 5
            INVOKESTATIC, 0, 2, 0x37, 7, // version; lstore 7
            0x2A, // aload_0 (another agent's code)
            BIPUSH, 9, LLOAD, 5, WIDE, LLOAD, 0, 7, INVOKESTATIC, 0, 3, // call
            0xB6, 0, 9, // invokevirtual
            INVOKESTATIC, 0, 5, // drop
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
                NOP, NOP, NOP,
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
