//! A structural checker for (rewritten) class files, used by the tests and the JDK smoke test.
//!
//! It re-parses a class and checks per method with code: code_length in 1..=65535, every
//! instruction decodes and every branch/switch target is an instruction boundary, exception
//! ranges are ordered boundaries with a boundary handler, StackMapTable frames sit on
//! instruction boundaries (strictly increasing) and Uninitialized types name a `new`,
//! LineNumberTable offsets are inside the code, LocalVariable(Type)Table ranges are inside the
//! code, every invokestatic names a method of a class, and a rewritten method's entry probe is
//! the leaf one exactly when it has no site probe (a method of a class a recording leaves out
//! has drop probes only).
//! It does not type-check (that is what running the JVM verifier in the tests is for).

use super::classfile::{be_u16, for_each_attr, ClassFile, Reader};
use super::code::{Decoded, OP_NEW};
use super::frames::{Frames, VType};
use super::probes::RUNTIME_CLASS;

/// Per-class summary of what the checker saw.
#[derive(Debug, Default, Clone)]
pub struct CheckSummary {
    pub methods_with_code: u32,
    /// invokestatic instructions into the runtime class.
    pub runtime_calls: u32,
    /// All invoke instructions (including the runtime calls).
    pub invokes: u32,
    /// Calls of the runtime's `call`.
    pub call_probes: u32,
    /// Calls of the runtime's `alloc`.
    pub alloc_probes: u32,
}

fn err(m: &str, what: impl std::fmt::Display) -> String {
    format!("{m}: {what}")
}

/// Checks `bytes`; Err describes the first problem found.
pub fn check_class(bytes: &[u8]) -> Result<CheckSummary, String> {
    let cf = ClassFile::parse(bytes).map_err(|e| e.to_string())?;
    let mut sum = CheckSummary::default();
    let mut d = Decoded::default();
    for m in &cf.methods {
        let Some(code_attr) = &m.code else { continue };
        let mname = format!(
            "{}{}",
            String::from_utf8_lossy(cf.cp.utf8(m.name).unwrap_or(b"?")),
            String::from_utf8_lossy(cf.cp.utf8(m.desc).unwrap_or(b"?"))
        );
        sum.methods_with_code += 1;
        let info = bytes
            .get(code_attr.info.clone())
            .ok_or_else(|| err(&mname, "Code range"))?;
        let mut r = Reader::new(info, 0);
        let _max_stack = r.u2().ok_or_else(|| err(&mname, "truncated"))?;
        let max_locals = r.u2().ok_or_else(|| err(&mname, "truncated"))?;
        let code_len = r.u4().ok_or_else(|| err(&mname, "truncated"))? as usize;
        if code_len == 0 || code_len > 65535 {
            return Err(err(&mname, format!("code_length {code_len}")));
        }
        let code = info
            .get(r.pos..r.pos + code_len)
            .ok_or_else(|| err(&mname, "truncated code"))?;
        r.skip(code_len).ok_or_else(|| err(&mname, "truncated"))?;
        d.decode(code, &[]).map_err(|e| err(&mname, format!("{e:?}")))?;
        // The runtime method the first runtime call names (the entry probe's), and how many
        // site probes there are.
        let mut entry: Option<&[u8]> = None;
        let (mut site_probes, mut entry_probes) = (0, 0);
        for ins in &d.insns {
            if (0xB6..=0xBA).contains(&ins.op) {
                sum.invokes += 1;
                if ins.op == 0xB8 {
                    let idx = be_u16(code, ins.off as usize + 1).unwrap_or(0);
                    let Some((c, n, _)) = cf.cp.member_ref(idx).filter(|&(c, _, _)| cf.cp.class_name(c).is_some()) else {
                        return Err(err(&mname, format!("invokestatic at {} names no method (#{idx})", ins.off)));
                    };
                    if cf.cp.class_name(c) == Some(RUNTIME_CLASS.as_bytes()) {
                        sum.runtime_calls += 1;
                        let name = cf.cp.utf8(n).unwrap_or(b"");
                        entry.get_or_insert(name);
                        site_probes += (name == b"call" || name == b"alloc") as u32;
                        entry_probes += (name == b"enter" || name == b"leaf") as u32;
                        sum.call_probes += (name == b"call") as u32;
                        sum.alloc_probes += (name == b"alloc") as u32;
                    }
                }
            }
        }
        if let Some(entry) = entry {
            let drops_only = entry == b"drop" && site_probes + entry_probes == 0;
            if !drops_only && (entry == b"leaf") != (site_probes == 0) {
                return Err(err(&mname, format!("entry probe {:?} with {site_probes} site probes", String::from_utf8_lossy(entry))));
            }
        }
        let nexc = r.u2().ok_or_else(|| err(&mname, "truncated"))? as usize;
        for _ in 0..nexc {
            let s = r.u2().unwrap_or(u16::MAX) as u32;
            let e = r.u2().unwrap_or(u16::MAX) as u32;
            let h = r.u2().unwrap_or(u16::MAX) as u32;
            r.u2()
                .ok_or_else(|| err(&mname, "truncated exception table"))?;
            match (d.index(s), d.index(e), d.is_insn(h)) {
                (Some(_), Some(_), true) if s < e => {}
                _ => return Err(err(&mname, format!("bad exception entry {s} {e} {h}"))),
            }
        }
        let mut subs = Vec::new();
        for_each_attr(&mut r, |n, span| {
            subs.push((cf.cp.utf8(n).unwrap_or(b"").to_vec(), span.info));
            Ok(())
        })
        .map_err(|e| err(&mname, e))?;
        if r.pos != info.len() {
            return Err(err(&mname, "trailing bytes in Code"));
        }
        for (name, span) in &subs {
            let t = info
                .get(span.clone())
                .ok_or_else(|| err(&mname, "attr range"))?;
            match name.as_slice() {
                b"StackMapTable" => {
                    let mut f = Frames::default();
                    let is_static = m.access & super::ACC_STATIC != 0;
                    let desc = cf.cp.utf8(m.desc).unwrap_or(b"()V");
                    let is_init = cf.cp.utf8(m.name) == Some(b"<init>");
                    f.set_initial(desc, is_static, is_init, false, cf.this_class)
                        .map_err(|e| err(&mname, format!("{e:?}")))?;
                    f.decode(t, &d).map_err(|e| err(&mname, format!("{e:?}")))?;
                    for fr in &f.frames {
                        let mut slots = 0;
                        for v in &f.pool[fr.locals.start as usize..fr.locals.end as usize] {
                            slots += v.slots();
                        }
                        if slots > max_locals as u32 {
                            return Err(err(&mname, "frame locals exceed max_locals"));
                        }
                        let locals = &f.pool[fr.locals.start as usize..fr.locals.end as usize];
                        let stack = &f.pool[fr.stack.start as usize..fr.stack.end as usize];
                        for v in locals.iter().chain(stack) {
                            if let VType::Uninit(o) = v {
                                if code.get(*o as usize) != Some(&OP_NEW) || d.index(*o).is_none() {
                                    return Err(err(
                                        &mname,
                                        format!("Uninitialized({o}) does not name a new"),
                                    ));
                                }
                            }
                        }
                    }
                }
                b"LineNumberTable" => {
                    let n = be_u16(t, 0).unwrap_or(0) as usize;
                    if t.len() != 2 + 4 * n {
                        return Err(err(&mname, "LineNumberTable length"));
                    }
                    for k in 0..n {
                        let pc = be_u16(t, 2 + 4 * k).unwrap_or(0) as usize;
                        if pc >= code_len {
                            return Err(err(&mname, format!("line start_pc {pc} >= {code_len}")));
                        }
                    }
                }
                b"LocalVariableTable" | b"LocalVariableTypeTable" => {
                    let n = be_u16(t, 0).unwrap_or(0) as usize;
                    if t.len() != 2 + 10 * n {
                        return Err(err(&mname, "LocalVariableTable length"));
                    }
                    for k in 0..n {
                        let s = be_u16(t, 2 + 10 * k).unwrap_or(0) as u32;
                        let l = be_u16(t, 4 + 10 * k).unwrap_or(0) as u32;
                        if d.index(s).is_none() || d.index(s + l).is_none() {
                            return Err(err(
                                &mname,
                                format!("local range {s}+{l} not on boundaries"),
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Ok(sum)
}
