//! The probe templates: the ONLY place that knows what inserted bytecode looks like.
//!
//! Every probe is straight-line code (pushes, one `invokestatic` into [`RUNTIME_CLASS`], stores
//! into the new locals), so the rewriter never has to invent branch targets or StackMapTable
//! frames for them. To change a probe's shape, change the `*_len` and `emit_*` pairs here
//! together (lengths must match the emitted bytes exactly; a debug assertion in `code.rs` checks
//! it) and keep [`EXTRA_STACK`], [`EXTRA_LOCALS`], [`LEAF_EXTRA_LOCALS`] and
//! [`ProbeLocals::max_stack`] in step.
//!
//! - entry: `push methodId; invokestatic enter(I)J; lstore CTX; invokestatic version()J; lstore VER`
//! - entry of a *leaf* (a method without site probes: no invoke, no allocation; in record mode
//!   also one whose invokes only build the exception it throws or certainly enter leaves,
//!   leaves.rs):
//!   `push methodId; invokestatic leaf(I)I; istore MARK`. `leaf` returns the id, which stays in the
//!   one int local MARK for walks to read; in the full-encoding steady state it only drops the
//!   caller's pending record (Runtime.java, `leaf`). A leaf has no CTX and VER, so it stays small
//!   enough for C1 to inline (C1InlineStackLimit counts max_stack + max_locals - parameters).
//! - site (call before an invoke, alloc after an allocation):
//!   `push siteId; lload CTX; lload VER; invokestatic call|alloc(IJJ)V`
//! - drop (after an invoke of a method the JIT may replace by an intrinsic, intrinsics.rs; after
//!   every invoke with `ProbeChoice::drop_after_calls`; first in every exception handler, also in
//!   the classes a recording leaves out, `drop_at_handlers_with`): `invokestatic drop()V`, which
//!   drops the caller's pending record that no entry probe took
//! - in one JDK method only, [`DEFINE_HOOK`], the entry probe goes on with
//!   `aload BYTES; iload FLAGS; invokestatic hidden([BI)[B; astore BYTES`: the bytes of every
//!   hidden class pass through the rewriter before the JVM defines the class.

use super::code::CodeBuf;

/// Internal name of the runtime class every probe calls.
pub const RUNTIME_CLASS: &str = "lucce/Runtime";

/// Classes under this prefix are the runtime itself and are never instrumented.
pub const EXCLUDED_PREFIX: &str = "lucce/";

/// Operand-stack slots a probe needs on top of whatever the method has on its stack there:
/// int id + two longs.
pub const EXTRA_STACK: u16 = 5;

/// Local slots appended after the method's own: CTX (long) and VER (long).
pub const EXTRA_LOCALS: u16 = 4;

/// A leaf's appended local: MARK (int, the method id).
pub const LEAF_EXTRA_LOCALS: u16 = 1;

/// The one method whose entry hands the bytes of hidden classes to the agent: hidden classes
/// (lambda proxies, lambda forms, `Lookup.defineHiddenClass`) never reach a ClassFileLoadHook,
/// and in JDK 17 every one is defined through this method (`Lookup.ClassDefiner.defineClass`
/// calls it, it calls the native `ClassLoader.defineClass0`). `hidden` returns the bytes
/// rewritten when `flags` has `HIDDEN_CLASS` (0x2), else unchanged; storing them back into the
/// parameter keeps its type, so no frame changes.
pub struct DefineHook {
    pub class: &'static str,
    pub method: &'static str,
    pub descriptor: &'static str,
    /// Local slots of the `byte[] b` and `int flags` parameters.
    pub bytes_slot: u8,
    pub flags_slot: u8,
    /// The runtime method it calls.
    pub runtime_method: &'static str,
    pub runtime_descriptor: &'static str,
}

impl DefineHook {
    /// Whether method (name, descriptor) of `access` in class `class` is this one: an instance
    /// method (its parameters' slots hold for that only).
    pub fn is(&self, class: &[u8], name: &[u8], desc: &[u8], access: u16) -> bool {
        access & super::ACC_STATIC == 0 && name == self.method.as_bytes() && class == self.class.as_bytes() && desc == self.descriptor.as_bytes()
    }
}

pub const DEFINE_HOOK: DefineHook = DefineHook {
    class: "java/lang/System$2",
    method: "defineClass",
    descriptor: "(Ljava/lang/ClassLoader;Ljava/lang/Class;Ljava/lang/String;[BLjava/security/ProtectionDomain;ZILjava/lang/Object;)Ljava/lang/Class;",
    bytes_slot: 4,
    flags_slot: 7,
    runtime_method: "hidden",
    runtime_descriptor: "([BI)[B",
};

/// Byte length of the define hook's part of the entry probe: aload, iload, invokestatic, astore.
const DEFINE_HOOK_LEN: u32 = 2 + 2 + 3 + 2;

/// Static methods of the runtime class the probes call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeMethod {
    Enter = 0,
    Version = 1,
    Call = 2,
    Alloc = 3,
    Leaf = 4,
    Drop = 5,
}

impl RuntimeMethod {
    pub const COUNT: usize = 6;
    pub const ALL: [RuntimeMethod; RuntimeMethod::COUNT] = [
        RuntimeMethod::Enter,
        RuntimeMethod::Version,
        RuntimeMethod::Call,
        RuntimeMethod::Alloc,
        RuntimeMethod::Leaf,
        RuntimeMethod::Drop,
    ];

    /// This method's bit in a set of runtime methods (the probes of a method need, see
    /// `PoolEdit::runtime_refs`).
    pub const fn bit(self) -> u8 {
        1 << self as u8
    }

    pub const fn name(self) -> &'static str {
        match self {
            RuntimeMethod::Enter => "enter",
            RuntimeMethod::Version => "version",
            RuntimeMethod::Call => "call",
            RuntimeMethod::Alloc => "alloc",
            RuntimeMethod::Leaf => "leaf",
            RuntimeMethod::Drop => "drop",
        }
    }

    pub const fn descriptor(self) -> &'static str {
        match self {
            RuntimeMethod::Enter => "(I)J",
            RuntimeMethod::Leaf => "(I)I",
            RuntimeMethod::Version => "()J",
            RuntimeMethod::Drop => "()V",
            RuntimeMethod::Call | RuntimeMethod::Alloc => "(IJJ)V",
        }
    }
}

/// Constant-pool Methodref indices of the runtime methods, by `RuntimeMethod as usize`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimeRefs(pub [u16; RuntimeMethod::COUNT]);

/// How an id is pushed: the shortest form that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntPush {
    /// iconst_0..iconst_5 (the opcode).
    Const(u8),
    Byte(i8),
    Short(i16),
    /// ldc / ldc_w of an Integer constant (the pool index).
    Ldc(u16),
}

/// An entry probe read back from the start of a rewritten method's bytecode, as a stack walk
/// sees it: the method id it pushes, and where it calls the runtime class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryProbe {
    pub method_id: u32,
    /// A leaf's probe (`leaf`), else `enter`.
    pub leaf: bool,
    /// Offset of the `invokestatic` (where the JVM calls out of the probe).
    pub call_at: usize,
}

impl EntryProbe {
    /// The entry probe `code` starts with: a push of the id, then `invokestatic` of the runtime
    /// class's `enter(I)J` or `leaf(I)I`; None for code that starts otherwise (not rewritten by
    /// lucce, or an older form of the method). `pool` gives the class's constant pool, its count
    /// and entries as JVMTI GetConstantPool does; it is asked for only when the opcodes match.
    pub fn read(code: &[u8], pool: impl FnOnce() -> Option<(u16, Box<[u8]>)>) -> Option<EntryProbe> {
        let push = IntPush::read(code)?;
        let call_at = push.byte_len() as usize;
        let &[INVOKESTATIC, i0, i1] = code.get(call_at..call_at + 3)? else {
            return None;
        };
        let (count, bytes) = pool()?;
        let pool = super::RawPool::parse(&bytes, count)?;
        let (class, name, desc) = pool.member_ref(u16::from_be_bytes([i0, i1]))?;
        let called = [RuntimeMethod::Enter, RuntimeMethod::Leaf]
            .into_iter()
            .find(|m| class == RUNTIME_CLASS.as_bytes() && name == m.name().as_bytes() && desc == m.descriptor().as_bytes())?;
        let id = push.value(|index| pool.integer(index))?;
        Some(EntryProbe { method_id: u32::try_from(id).ok()?, leaf: called == RuntimeMethod::Leaf, call_at })
    }
}

pub(crate) const ICONST_0: u8 = 0x03;
const ICONST_5: u8 = 0x08;
const BIPUSH: u8 = 0x10;
const SIPUSH: u8 = 0x11;
const LDC: u8 = 0x12;
const LDC_W: u8 = 0x13;
pub(crate) const INVOKESTATIC: u8 = 0xB8;
pub(crate) const LLOAD: u8 = 0x16;
pub(crate) const LLOAD_0: u8 = 0x1E;
const LSTORE: u8 = 0x37;
const LSTORE_0: u8 = 0x3F;
const ISTORE: u8 = 0x36;
const ISTORE_0: u8 = 0x3B;
const WIDE: u8 = 0xC4;
pub(crate) const ALOAD: u8 = 0x19;
pub(crate) const ALOAD_0: u8 = 0x2A;
pub(crate) const ILOAD: u8 = 0x15;
pub(crate) const ILOAD_0: u8 = 0x1A;
pub(crate) const ASTORE: u8 = 0x3A;
pub(crate) const ASTORE_0: u8 = 0x4B;

/// Whether the instruction at `at` is the local-variable instruction `op` (its one-byte forms
/// from `op_0`, its byte form, or `wide`), any slot: what `local_insn` writes, read back.
pub(crate) fn is_local_insn(code: &[u8], at: usize, op_0: u8, op: u8) -> bool {
    match code.get(at) {
        Some(&o) => o == op || (op_0..=op_0 + 3).contains(&o) || (o == WIDE && code.get(at + 1) == Some(&op)),
        None => false,
    }
}

impl IntPush {
    /// The longest push; used to size methods before ids are known.
    pub const MAX_LEN: u32 = 3;

    /// Pushes that need no constant-pool entry, or None when `id` needs an Integer constant.
    pub fn inline(id: u32) -> Option<IntPush> {
        let v = id as i32;
        match v {
            0..=5 => Some(IntPush::Const(ICONST_0 + v as u8)),
            6..=127 => Some(IntPush::Byte(v as i8)),
            128..=32767 => Some(IntPush::Short(v as i16)),
            _ => None,
        }
    }

    #[inline]
    pub fn byte_len(self) -> u32 {
        match self {
            IntPush::Const(_) => 1,
            IntPush::Byte(_) => 2,
            IntPush::Short(_) => 3,
            IntPush::Ldc(i) if i <= 0xFF => 2,
            IntPush::Ldc(_) => 3,
        }
    }

    /// The push at the start of `code`, if it is one of those the probes use. Every rewritten
    /// method's code starts with its entry probe, whose first instruction pushes the method id.
    pub fn read(code: &[u8]) -> Option<IntPush> {
        let operand = |n: usize| code.get(1..1 + n);
        Some(match *code.first()? {
            op @ ICONST_0..=ICONST_5 => IntPush::Const(op),
            BIPUSH => IntPush::Byte(operand(1)?[0] as i8),
            SIPUSH => IntPush::Short(i16::from_be_bytes(operand(2)?.try_into().ok()?)),
            LDC => IntPush::Ldc(operand(1)?[0] as u16),
            // Only past ldc's reach, as `encoded` writes it (else `byte_len` would be wrong).
            LDC_W => match u16::from_be_bytes(operand(2)?.try_into().ok()?) {
                i if i > 0xFF => IntPush::Ldc(i),
                _ => return None,
            },
            _ => return None,
        })
    }

    /// The value pushed, given the Integer constant at a pool index.
    pub fn value(self, integer_at: impl FnOnce(u16) -> Option<i32>) -> Option<i32> {
        match self {
            IntPush::Const(op) => Some(op as i32 - ICONST_0 as i32),
            IntPush::Byte(v) => Some(v as i32),
            IntPush::Short(v) => Some(v as i32),
            IntPush::Ldc(i) => integer_at(i),
        }
    }

    /// The instruction's bytes (the first `byte_len` of the three) and their count.
    #[inline]
    fn encoded(self) -> ([u8; 3], usize) {
        match self {
            IntPush::Const(op) => ([op, 0, 0], 1),
            IntPush::Byte(v) => ([BIPUSH, v as u8, 0], 2),
            IntPush::Short(v) => {
                let b = v.to_be_bytes();
                ([SIPUSH, b[0], b[1]], 3)
            }
            IntPush::Ldc(i) if i <= 0xFF => ([LDC, i as u8, 0], 2),
            IntPush::Ldc(i) => {
                let b = i.to_be_bytes();
                ([LDC_W, b[0], b[1]], 3)
            }
        }
    }
}

/// The appended locals: CTX and VER (two longs), or a leaf's MARK (one int, in `ctx`); and
/// whether the entry probe ends with the [`DEFINE_HOOK`] call (the Methodref of `hidden`).
#[derive(Debug, Clone, Copy)]
pub struct ProbeLocals {
    pub ctx: u16,
    pub ver: u16,
    pub leaf: bool,
    pub define_hook: Option<u16>,
}

impl ProbeLocals {
    /// The runtime methods the entry probe of a method with these locals calls.
    pub fn entry_methods(self) -> u8 {
        match self.leaf {
            true => RuntimeMethod::Leaf.bit(),
            false => RuntimeMethod::Enter.bit() | RuntimeMethod::Version.bit(),
        }
    }

    /// The probe locals of a method whose own locals end at `max_locals`; None when they would
    /// not fit into the u2 `max_locals`.
    pub fn after(max_locals: u16, leaf: bool) -> Option<ProbeLocals> {
        // A leaf has no VER (`ver` is never used then).
        let l = ProbeLocals { ctx: max_locals, ver: if leaf { max_locals } else { max_locals.wrapping_add(2) }, leaf, define_hook: None };
        max_locals.checked_add(l.extra_locals())?;
        Some(l)
    }

    /// Local slots added to the method's.
    pub fn extra_locals(self) -> u16 {
        if self.leaf { LEAF_EXTRA_LOCALS } else { EXTRA_LOCALS }
    }

    /// The new max_stack of a method that had `max_stack`: a leaf's one probe runs on an empty
    /// stack and needs one slot; site probes need [`EXTRA_STACK`] on top of anything.
    pub fn max_stack(self, max_stack: u16) -> Option<u16> {
        if self.leaf {
            Some(max_stack.max(1))
        } else {
            max_stack.checked_add(EXTRA_STACK)
        }
    }
}

fn local_insn_len(slot: u16) -> u32 {
    match slot {
        0..=3 => 1,
        4..=255 => 2,
        _ => 4,
    }
}

/// The bytes of a load or store of `slot` (shortest form) and their count.
fn local_insn(short0: u8, long_op: u8, slot: u16) -> ([u8; 4], usize) {
    match slot {
        0..=3 => ([short0 + slot as u8, 0, 0, 0], 1),
        4..=255 => ([long_op, slot as u8, 0, 0], 2),
        _ => {
            let s = slot.to_be_bytes();
            ([WIDE, long_op, s[0], s[1]], 4)
        }
    }
}

fn invokestatic(refs: &RuntimeRefs, m: RuntimeMethod) -> [u8; 3] {
    let r = refs.0[m as usize].to_be_bytes();
    [INVOKESTATIC, r[0], r[1]]
}

/// Writes `bytes[..len]` at `buf[*n..]` as one fixed-size write (the bytes past `len` are
/// overwritten by the next piece or cut off at the end), so that assembling a probe from its
/// instructions calls no memcpy.
#[inline]
fn put<const N: usize>(buf: &mut [u8], n: &mut usize, bytes: [u8; N], len: usize) {
    buf[*n..*n + N].copy_from_slice(&bytes);
    *n += len;
}

/// Byte length of the entry probe.
pub fn entry_len(push: IntPush, l: ProbeLocals) -> u32 {
    let hook = if l.define_hook.is_some() { DEFINE_HOOK_LEN } else { 0 };
    if l.leaf {
        push.byte_len() + 3 + local_insn_len(l.ctx) + hook
    } else {
        push.byte_len() + 3 + local_insn_len(l.ctx) + 3 + local_insn_len(l.ver) + hook
    }
}

/// Bytes [`emit_entry`] may store past the probe's end (they are overwritten or cut off): its
/// fixed-size write less the shortest probe. The new code's buffer keeps this much slack.
pub const ENTRY_OVERRUN: usize = ENTRY_BUF - 5;

/// Size of the entry probe's fixed write: the longest probe, push (3), invokestatic (3), wide
/// lstore (4), invokestatic, wide lstore, and the define hook.
const ENTRY_BUF: usize = 17 + DEFINE_HOOK_LEN as usize;

/// The longest site probe: ldc_w, wide lload, wide lload, invokestatic.
pub const MAX_SITE_LEN: u32 = IntPush::MAX_LEN + 4 + 4 + 3;

/// Writes the entry probe at the cursor as one fixed-size store of [`ENTRY_BUF`] bytes.
pub(crate) fn emit_entry(out: &mut CodeBuf<'_>, push: IntPush, l: ProbeLocals, refs: &RuntimeRefs) {
    let mut b = [0u8; ENTRY_BUF];
    let mut n = 0;
    let (bytes, len) = push.encoded();
    put(&mut b, &mut n, bytes, len);
    if l.leaf {
        put(&mut b, &mut n, invokestatic(refs, RuntimeMethod::Leaf), 3);
        let (st, len) = local_insn(ISTORE_0, ISTORE, l.ctx);
        put(&mut b, &mut n, st, len);
    } else {
        put(&mut b, &mut n, invokestatic(refs, RuntimeMethod::Enter), 3);
        let (st, len) = local_insn(LSTORE_0, LSTORE, l.ctx);
        put(&mut b, &mut n, st, len);
        put(&mut b, &mut n, invokestatic(refs, RuntimeMethod::Version), 3);
        let (st, len) = local_insn(LSTORE_0, LSTORE, l.ver);
        put(&mut b, &mut n, st, len);
    }
    if let Some(hidden) = l.define_hook {
        let (bytes, flags) = (DEFINE_HOOK.bytes_slot, DEFINE_HOOK.flags_slot);
        let r = hidden.to_be_bytes();
        put(&mut b, &mut n, [ALOAD, bytes, ILOAD, flags, INVOKESTATIC, r[0], r[1], ASTORE, bytes], DEFINE_HOOK_LEN as usize);
    }
    out.put(b, n);
}

/// Byte length of a call or allocation probe.
pub fn site_len(push: IntPush, l: ProbeLocals) -> u32 {
    push.byte_len() + site_tail_len(l)
}

/// Byte length of a site probe after its id push (the same for every site of a method).
pub fn site_tail_len(l: ProbeLocals) -> u32 {
    local_insn_len(l.ctx) + local_insn_len(l.ver) + 3
}

/// A call probe (`alloc == false`, before an invoke) or an allocation probe (after `new` etc.).
#[cfg(test)]
fn emit_site(out: &mut CodeBuf<'_>, alloc: bool, push: IntPush, l: ProbeLocals, refs: &RuntimeRefs) {
    emit_site_with(out, alloc, push, &SiteTail::new(l, refs));
}

/// Byte length of a drop probe.
pub const DROP_LEN: u32 = 3;

/// What follows the id push in a site probe (`lload CTX; lload VER; invokestatic call|alloc`),
/// the same for every site of a method: built once, then copied per site; and the drop probe.
#[derive(Debug, Clone, Copy)]
pub struct SiteTail {
    /// Call, then alloc.
    bytes: [[u8; 11]; 2],
    len: usize,
    drop: [u8; 3],
}

impl SiteTail {
    pub fn new(l: ProbeLocals, refs: &RuntimeRefs) -> SiteTail {
        let mut bytes = [[0u8; 11]; 2];
        let (c, cn) = local_insn(LLOAD_0, LLOAD, l.ctx);
        let (v, vn) = local_insn(LLOAD_0, LLOAD, l.ver);
        let mut len = 0;
        for (b, m) in bytes.iter_mut().zip([RuntimeMethod::Call, RuntimeMethod::Alloc]) {
            len = 0;
            put(b, &mut len, c, cn);
            put(b, &mut len, v, vn);
            put(b, &mut len, invokestatic(refs, m), 3);
        }
        SiteTail { bytes, len, drop: invokestatic(refs, RuntimeMethod::Drop) }
    }

    /// The tail of a method that gets drop probes only (no entry probe, no probe locals).
    pub fn drops(refs: &RuntimeRefs) -> SiteTail {
        SiteTail { bytes: [[0; 11]; 2], len: 0, drop: invokestatic(refs, RuntimeMethod::Drop) }
    }
}

/// Writes the Methodref of `m` (`call`, `alloc` or `drop`) into the `invokestatic` operand at
/// `code[at..]`: a probe's last two bytes. A probe written from a tail built before the class's
/// Methodrefs of the runtime existed (with `RuntimeRefs::default()`) gets them so.
pub fn link_site(code: &mut [u8], at: usize, m: RuntimeMethod, refs: &RuntimeRefs) -> Option<()> {
    code.get_mut(at..at + 2)?.copy_from_slice(&refs.0[m as usize].to_be_bytes());
    Some(())
}

/// A site probe with the tail built already, as two fixed-size stores (3 and 11 bytes).
#[inline]
pub(crate) fn emit_site_with(out: &mut CodeBuf<'_>, alloc: bool, push: IntPush, tail: &SiteTail) {
    let (bytes, len) = push.encoded();
    out.put(bytes, len);
    out.put(tail.bytes[alloc as usize], tail.len);
}

/// A drop probe, with the tail's Methodref.
#[inline]
pub(crate) fn emit_drop_with(out: &mut CodeBuf<'_>, tail: &SiteTail) {
    out.put(tail.drop, DROP_LEN as usize);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_pushes_read_back() {
        // What a walk reads from the start of a method's code (`EntryProbe::read`).
        let pool = |i: u16| (i == 40000).then_some(70_000);
        for id in [0u32, 5, 6, 127, 128, 32767] {
            let p = IntPush::inline(id).unwrap();
            let (b, n) = p.encoded();
            let code = [&b[..n], &[INVOKESTATIC, 1, 2]].concat();
            let read = IntPush::read(&code).unwrap();
            assert_eq!((read.byte_len(), read.value(pool)), (p.byte_len(), Some(id as i32)), "{id}");
        }
        for (i, len) in [(7u16, 2), (40000, 3)] {
            let read = IntPush::read(&IntPush::Ldc(i).encoded().0).unwrap();
            assert_eq!(read.byte_len(), len);
            assert_eq!(read.value(pool), pool(i));
        }
        // Not a push, or one cut short.
        for code in [&[INVOKESTATIC, 0, 1][..], &[], &[SIPUSH, 1], &[LDC_W, 0], &[BIPUSH]] {
            assert!(IntPush::read(code).is_none(), "{code:?}");
        }
    }

    #[test]
    fn entry_probes_read_back() {
        let utf8 = |t: &str| [&[1u8, 0, t.len() as u8][..], t.as_bytes()].concat();
        let pool: Box<[u8]> = [
            utf8("lucce/Runtime"),         // 1
            vec![7, 0, 1],                 // 2: Class lucce/Runtime
            utf8("enter"),                 // 3
            utf8("(I)J"),                  // 4
            vec![12, 0, 3, 0, 4],          // 5: enter(I)J
            vec![10, 0, 2, 0, 5],          // 6: Runtime.enter
            utf8("leaf"),                  // 7
            utf8("(I)I"),                  // 8
            vec![12, 0, 7, 0, 8],          // 9: leaf(I)I
            vec![10, 0, 2, 0, 9],          // 10: Runtime.leaf
            vec![3, 0, 1, 0x11, 0x70],     // 11: Integer 70000
            utf8("other/Cls"),             // 12
            vec![7, 0, 12],                // 13
            vec![10, 0, 13, 0, 5],         // 14: Cls.enter(I)J
            vec![12, 0, 3, 0, 8],          // 15: enter(I)I
            vec![10, 0, 2, 0, 15],         // 16: Runtime.enter(I)I
        ]
        .concat()
        .into();
        let pool = || Some((17u16, pool.clone()));
        let probe = |push: &[u8], call: u16| [push, &[INVOKESTATIC], &call.to_be_bytes()[..]].concat();
        let read = |code: &[u8]| EntryProbe::read(code, pool);
        assert_eq!(read(&probe(&[SIPUSH, 0x12, 0x34], 6)), Some(EntryProbe { method_id: 0x1234, leaf: false, call_at: 3 }));
        assert_eq!(read(&probe(&[LDC, 11], 10)), Some(EntryProbe { method_id: 70_000, leaf: true, call_at: 2 }));
        assert_eq!(read(&probe(&[ICONST_0 + 4], 6)).map(|p| (p.method_id, p.call_at)), Some((4, 1)));
        // Code that only looks like a probe: a call of another class's method or of another
        // descriptor, an ldc of something else, a negative id, no invokestatic after the push.
        for code in [probe(&[BIPUSH, 9], 14), probe(&[BIPUSH, 9], 16), probe(&[LDC, 1], 6), probe(&[BIPUSH, 0xFF], 6), probe(&[LDC_W, 0, 11], 6), vec![BIPUSH, 9, LLOAD, 0, 6]] {
            assert_eq!(read(&code), None, "{code:?}");
        }
        // The pool is not fetched for code that starts otherwise.
        assert_eq!(EntryProbe::read(&[LLOAD_0, INVOKESTATIC, 0, 6], || unreachable!()), None);
    }

    /// What `emit` writes through a cursor at the start of a buffer with the probes' slack.
    fn written(emit: impl FnOnce(&mut CodeBuf<'_>)) -> Vec<u8> {
        let mut buf = [0u8; 64];
        let mut out = CodeBuf::new(&mut buf);
        emit(&mut out);
        let n = out.pos();
        buf[..n].to_vec()
    }

    #[test]
    fn lengths_match_emitted_bytes() {
        let refs = RuntimeRefs([300, 301, 302, 303, 304, 305]);
        let inline = [0u32, 5, 6, 127, 128, 32767].map(|id| IntPush::inline(id).unwrap());
        let ldc = [7u16, 255, 256, 40000].map(IntPush::Ldc);
        for p in inline.into_iter().chain(ldc) {
            for ml in [0u16, 2, 3, 4, 200, 254, 255, 256, 1000] {
                for (leaf, define_hook) in [(false, None), (true, None), (false, Some(0x0203))] {
                    let l = ProbeLocals { define_hook, ..ProbeLocals::after(ml, leaf).unwrap() };
                    let v = written(|out| emit_entry(out, p, l, &refs));
                    assert_eq!(v.len() as u32, entry_len(p, l));
                }
                let l = ProbeLocals::after(ml, false).unwrap();
                for alloc in [false, true] {
                    let v = written(|out| emit_site(out, alloc, p, l, &refs));
                    assert_eq!(v.len() as u32, site_len(p, l));
                }
                let v = written(|out| emit_drop_with(out, &SiteTail::new(l, &refs)));
                assert_eq!(v.len() as u32, DROP_LEN);
            }
        }
        assert!(IntPush::inline(32768).is_none());
        assert!(ProbeLocals::after(65532, false).is_none());
        assert!(ProbeLocals::after(65534, true).is_some());
        assert!(ProbeLocals::after(65535, true).is_none());
    }

    #[test]
    fn probe_bytes() {
        let refs = RuntimeRefs([0x0101, 0x0102, 0x0103, 0x0104, 0x0105, 0x0106]);
        let v = written(|out| emit_entry(out, IntPush::Ldc(256), ProbeLocals::after(1000, false).unwrap(), &refs));
        assert_eq!(v, [LDC_W, 1, 0, INVOKESTATIC, 1, 1, WIDE, LSTORE, 3, 0xE8, INVOKESTATIC, 1, 2, WIDE, LSTORE, 3, 0xEA]);
        let hooked = ProbeLocals { define_hook: Some(0x0203), ..ProbeLocals::after(9, false).unwrap() };
        let v = written(|out| emit_entry(out, IntPush::Byte(7), hooked, &refs));
        assert_eq!(
            v,
            [BIPUSH, 7, INVOKESTATIC, 1, 1, LSTORE, 9, INVOKESTATIC, 1, 2, LSTORE, 11, ALOAD, 4, ILOAD, 7, INVOKESTATIC, 2, 3, ASTORE, 4]
        );
        let v = written(|out| emit_entry(out, IntPush::Const(ICONST_0), ProbeLocals::after(2, true).unwrap(), &refs));
        assert_eq!(v, [ICONST_0, INVOKESTATIC, 1, 5, ISTORE_0 + 2]);
        let v = written(|out| emit_site(out, true, IntPush::Byte(9), ProbeLocals::after(3, false).unwrap(), &refs));
        assert_eq!(v, [BIPUSH, 9, LLOAD_0 + 3, LLOAD, 5, INVOKESTATIC, 1, 4]);
        let v = written(|out| emit_drop_with(out, &SiteTail::new(ProbeLocals::after(3, false).unwrap(), &refs)));
        assert_eq!(v, [INVOKESTATIC, 1, 6]);
    }
}
