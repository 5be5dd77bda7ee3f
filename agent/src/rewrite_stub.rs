//! Stand-in for the rewriter's entry point while agent/src/rewrite/ is being written: the same
//! signature and result types as the agreed contract, but it changes nothing. It only reads the
//! class name so that filtering and the summary work. Remove once `crate::rewrite::rewrite_class`
//! compiles (hook.rs imports the rewriter through one `use`).

use crate::rewrite::SiteRegistry;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    NotImplemented,
}

#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error("malformed class file: {0}")]
    Malformed(&'static str),
}

#[derive(Debug, Default)]
pub struct ClassStats {
    pub class_name: String,
    pub methods_with_code: u32,
    pub methods_rewritten: u32,
    pub skipped: Vec<(String, SkipReason)>,
}

#[derive(Debug)]
pub struct RewriteOutcome {
    pub bytes: Option<Vec<u8>>,
    pub stats: ClassStats,
}

pub fn rewrite_class(class_bytes: &[u8], registry: &mut dyn SiteRegistry) -> Result<RewriteOutcome, RewriteError> {
    entry_only::rewrite(class_bytes, registry).map_err(RewriteError::Malformed)
}

/// A deliberately small instrumenter used to exercise the agent before the real rewriter lands:
/// only the method-entry probe, `ldc_w id; invokestatic lucce/Runtime.enter(I)J; pop2; nop`
/// (8 bytes, so switch padding is unchanged) at offset 0 of every method. All branch offsets are
/// relative and stay valid; only absolute offsets (exception table, line/local tables, the first
/// StackMapTable frame) move by 8. Methods with other Code attributes are skipped.
mod entry_only {
    use super::{ClassStats, RewriteOutcome, SkipReason};
    use crate::rewrite::{MethodInfo, SiteRegistry};

    const SHIFT: u16 = 8;

    struct R<'a> {
        b: &'a [u8],
        i: usize,
    }
    impl<'a> R<'a> {
        fn u1(&mut self) -> Result<u8, &'static str> {
            let v = *self.b.get(self.i).ok_or("truncated")?;
            self.i += 1;
            Ok(v)
        }
        fn u2(&mut self) -> Result<u16, &'static str> {
            Ok(((self.u1()? as u16) << 8) | self.u1()? as u16)
        }
        fn u4(&mut self) -> Result<u32, &'static str> {
            Ok(((self.u2()? as u32) << 16) | self.u2()? as u32)
        }
        fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
            let s = self.b.get(self.i..self.i + n).ok_or("truncated")?;
            self.i += n;
            Ok(s)
        }
    }

    fn p2(v: &mut Vec<u8>, x: u16) {
        v.extend_from_slice(&x.to_be_bytes());
    }
    fn p4(v: &mut Vec<u8>, x: u32) {
        v.extend_from_slice(&x.to_be_bytes());
    }

    pub fn rewrite(b: &[u8], reg: &mut dyn SiteRegistry) -> Result<RewriteOutcome, &'static str> {
        let mut r = R { b, i: 8 };
        if b.get(0..4) != Some(&[0xCA, 0xFE, 0xBA, 0xBE][..]) {
            return Err("bad magic");
        }
        let cp_count = r.u2()? as usize;
        let mut utf8: Vec<Option<&str>> = vec![None; cp_count];
        let mut class_of: Vec<u16> = vec![0; cp_count];
        let mut k = 1;
        while k < cp_count {
            let tag = r.u1()?;
            match tag {
                1 => {
                    let n = r.u2()? as usize;
                    utf8[k] = std::str::from_utf8(r.take(n)?).ok();
                }
                7 => class_of[k] = r.u2()?,
                8 | 16 | 19 | 20 => {
                    r.u2()?;
                }
                15 => {
                    r.take(3)?;
                }
                3 | 4 | 9 | 10 | 11 | 12 | 17 | 18 => {
                    r.u4()?;
                }
                5 | 6 => {
                    r.take(8)?;
                    k += 1;
                }
                _ => return Err("bad constant tag"),
            }
            k += 1;
        }
        let cp_end = r.i;
        let name = |i: u16| utf8.get(i as usize).copied().flatten();
        let _access = r.u2()?;
        let this = r.u2()?;
        let class_name = class_of.get(this as usize).and_then(|&n| name(n)).ok_or("bad this_class")?.to_string();
        let mut stats = ClassStats { class_name: class_name.clone(), ..Default::default() };
        if class_name.starts_with("lucce/") {
            return Ok(RewriteOutcome { bytes: None, stats });
        }
        r.u2()?;
        let n_if = r.u2()? as usize;
        r.take(2 * n_if)?;
        let skip_members = |r: &mut R| -> Result<(), &'static str> {
            let n = r.u2()?;
            for _ in 0..n {
                r.take(6)?;
                let na = r.u2()?;
                for _ in 0..na {
                    r.u2()?;
                    let len = r.u4()? as usize;
                    r.take(len)?;
                }
            }
            Ok(())
        };
        skip_members(&mut r)?;
        let methods_start = r.i;
        skip_members(&mut r)?;
        let methods_end = r.i;
        // Class attributes: SourceFile.
        let mut source = None;
        let na = r.u2()?;
        for _ in 0..na {
            let an = r.u2()?;
            let len = r.u4()? as usize;
            let body = r.take(len)?;
            if name(an) == Some("SourceFile") && len == 2 {
                source = name(u16::from_be_bytes([body[0], body[1]]));
            }
        }
        // New constants appended after the existing pool.
        let mut extra: Vec<u8> = Vec::new();
        let mut next = cp_count as u32;
        let add = |extra: &mut Vec<u8>, next: &mut u32, bytes: &[u8]| -> u32 {
            extra.extend_from_slice(bytes);
            *next += 1;
            *next - 1
        };
        let utf = |s: &str| {
            let mut v = vec![1u8];
            p2(&mut v, s.len() as u16);
            v.extend_from_slice(s.as_bytes());
            v
        };
        let u_rt = add(&mut extra, &mut next, &utf("lucce/Runtime"));
        let c_rt = add(&mut extra, &mut next, &[7, (u_rt >> 8) as u8, u_rt as u8]);
        let u_n = add(&mut extra, &mut next, &utf("enter"));
        let u_d = add(&mut extra, &mut next, &utf("(I)J"));
        let nt = add(&mut extra, &mut next, &[12, (u_n >> 8) as u8, u_n as u8, (u_d >> 8) as u8, u_d as u8]);
        let mref = add(&mut extra, &mut next, &[10, (c_rt >> 8) as u8, c_rt as u8, (nt >> 8) as u8, nt as u8]);

        let mut out_methods: Vec<u8> = Vec::new();
        let mut r = R { b, i: methods_start };
        let nm = r.u2()?;
        p2(&mut out_methods, nm);
        for _ in 0..nm {
            let acc = r.u2()?;
            let mn = r.u2()?;
            let md = r.u2()?;
            p2(&mut out_methods, acc);
            p2(&mut out_methods, mn);
            p2(&mut out_methods, md);
            let na = r.u2()?;
            p2(&mut out_methods, na);
            for _ in 0..na {
                let an = r.u2()?;
                let len = r.u4()? as usize;
                let body = r.take(len)?;
                if name(an) != Some("Code") {
                    p2(&mut out_methods, an);
                    p4(&mut out_methods, len as u32);
                    out_methods.extend_from_slice(body);
                    continue;
                }
                stats.methods_with_code += 1;
                let mname = name(mn).unwrap_or("?");
                let new_body = if next + 1 >= 0xFFFF {
                    Err(SkipReason::NotImplemented)
                } else {
                    let id = reg.method(&MethodInfo {
                        class: &class_name,
                        name: mname,
                        descriptor: name(md).unwrap_or("?"),
                        source_file: source,
                        access_flags: acc,
                    });
                    let c_id = add(&mut extra, &mut next, &[3, (id >> 24) as u8, (id >> 16) as u8, (id >> 8) as u8, id as u8]);
                    shift_code(body, &name, c_id as u16, mref as u16).map_err(|_| SkipReason::NotImplemented)
                };
                match new_body {
                    Ok(nb) => {
                        stats.methods_rewritten += 1;
                        p2(&mut out_methods, an);
                        p4(&mut out_methods, nb.len() as u32);
                        out_methods.extend_from_slice(&nb);
                    }
                    Err(why) => {
                        stats.skipped.push((mname.to_string(), why));
                        p2(&mut out_methods, an);
                        p4(&mut out_methods, len as u32);
                        out_methods.extend_from_slice(body);
                    }
                }
            }
        }
        if stats.methods_rewritten == 0 {
            return Ok(RewriteOutcome { bytes: None, stats });
        }
        let mut out = Vec::with_capacity(b.len() + extra.len() + out_methods.len() - (methods_end - methods_start));
        out.extend_from_slice(&b[0..8]);
        p2(&mut out, next as u16);
        out.extend_from_slice(&b[10..cp_end]);
        out.extend_from_slice(&extra);
        out.extend_from_slice(&b[cp_end..methods_start]);
        out.extend_from_slice(&out_methods);
        out.extend_from_slice(&b[methods_end..]);
        Ok(RewriteOutcome { bytes: Some(out), stats })
    }

    fn vtypes(a: &mut R, nb: &mut Vec<u8>, n: u16) -> Result<(), &'static str> {
        for _ in 0..n {
            let tag = a.u1()?;
            nb.push(tag);
            match tag {
                0..=6 => {}
                7 => {
                    let c = a.u2()?;
                    p2(nb, c);
                }
                8 => {
                    let off = a.u2()?;
                    p2(nb, off + SHIFT);
                }
                _ => return Err("bad verification type"),
            }
        }
        Ok(())
    }

    fn shift_code<'a>(
        body: &[u8],
        name: &dyn Fn(u16) -> Option<&'a str>,
        c_id: u16,
        mref: u16,
    ) -> Result<Vec<u8>, &'static str> {
        let mut r = R { b: body, i: 0 };
        let max_stack = r.u2()?;
        let max_locals = r.u2()?;
        let code_len = r.u4()? as usize;
        let code = r.take(code_len)?;
        if code_len + SHIFT as usize > 65535 {
            return Err("too large");
        }
        let mut o = Vec::with_capacity(body.len() + 16);
        p2(&mut o, max_stack.max(2));
        p2(&mut o, max_locals);
        p4(&mut o, (code_len + SHIFT as usize) as u32);
        o.push(0x13); // ldc_w
        p2(&mut o, c_id);
        o.push(0xB8); // invokestatic
        p2(&mut o, mref);
        o.push(0x58); // pop2
        o.push(0x00); // nop
        o.extend_from_slice(code);
        let n_ex = r.u2()?;
        p2(&mut o, n_ex);
        for _ in 0..n_ex {
            for _ in 0..3 {
                let pc = r.u2()?;
                p2(&mut o, pc + SHIFT);
            }
            let t = r.u2()?;
            p2(&mut o, t);
        }
        let na = r.u2()?;
        p2(&mut o, na);
        for _ in 0..na {
            let an = r.u2()?;
            let len = r.u4()? as usize;
            let ab = r.take(len)?;
            let mut a = R { b: ab, i: 0 };
            let mut nb = Vec::with_capacity(len + 2);
            match name(an) {
                Some("LineNumberTable") => {
                    let n = a.u2()?;
                    p2(&mut nb, n);
                    for _ in 0..n {
                        let pc = a.u2()?;
                        p2(&mut nb, pc + SHIFT);
                        let l = a.u2()?;
                        p2(&mut nb, l);
                    }
                }
                Some("LocalVariableTable") | Some("LocalVariableTypeTable") => {
                    let n = a.u2()?;
                    p2(&mut nb, n);
                    for _ in 0..n {
                        let pc = a.u2()?;
                        p2(&mut nb, pc + SHIFT);
                        nb.extend_from_slice(a.take(8)?);
                    }
                }
                Some("StackMapTable") => {
                    let n = a.u2()?;
                    p2(&mut nb, n);
                    for f in 0..n {
                        let t = a.u1()?;
                        // Only the first frame's offset is absolute; Uninitialized(offset) types
                        // name the `new` instruction by absolute offset in every frame.
                        let first = f == 0;
                        match t {
                            0..=63 if !first => nb.push(t),
                            0..=63 if t as u16 + SHIFT <= 63 => nb.push(t + SHIFT as u8),
                            0..=63 => {
                                nb.push(251);
                                p2(&mut nb, t as u16 + SHIFT);
                            }
                            64..=127 => {
                                if !first {
                                    nb.push(t);
                                } else if t as u16 - 64 + SHIFT <= 63 {
                                    nb.push(t + SHIFT as u8);
                                } else {
                                    nb.push(247);
                                    p2(&mut nb, t as u16 - 64 + SHIFT);
                                }
                                vtypes(&mut a, &mut nb, 1)?;
                            }
                            247..=255 => {
                                nb.push(t);
                                let d = a.u2()?;
                                p2(&mut nb, if first { d + SHIFT } else { d });
                                match t {
                                    247 => vtypes(&mut a, &mut nb, 1)?,
                                    248..=251 => {}
                                    252..=254 => vtypes(&mut a, &mut nb, (t - 251) as u16)?,
                                    _ => {
                                        let nl = a.u2()?;
                                        p2(&mut nb, nl);
                                        vtypes(&mut a, &mut nb, nl)?;
                                        let ns = a.u2()?;
                                        p2(&mut nb, ns);
                                        vtypes(&mut a, &mut nb, ns)?;
                                    }
                                }
                            }
                            _ => return Err("bad frame"),
                        }
                    }
                }
                _ => return Err("unknown Code attribute"),
            }
            p2(&mut o, an);
            p4(&mut o, nb.len() as u32);
            o.extend_from_slice(&nb);
        }
        Ok(o)
    }
}

/// The internal name of `this_class`, read by walking the constant pool.
pub fn class_name(b: &[u8]) -> Option<String> {
    let u2 = |i: usize| -> Option<usize> { Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]) as usize) };
    if b.get(0..4)? != [0xCA, 0xFE, 0xBA, 0xBE] {
        return None;
    }
    let count = u2(8)?;
    let mut utf8 = vec![None; count];
    let mut class_idx = vec![0usize; count];
    let mut i = 10;
    let mut k = 1;
    while k < count {
        let tag = *b.get(i)?;
        let size = match tag {
            1 => {
                let len = u2(i + 1)?;
                utf8[k] = Some((i + 3, len));
                3 + len
            }
            7 => {
                class_idx[k] = u2(i + 1)?;
                3
            }
            8 | 16 | 19 | 20 => 3,
            15 => 4,
            3 | 4 | 9 | 10 | 11 | 12 | 17 | 18 => 5,
            5 | 6 => 9,
            _ => return None,
        };
        i += size;
        k += if tag == 5 || tag == 6 { 2 } else { 1 };
    }
    let this = u2(i + 2)?;
    let (start, len) = (*utf8.get(*class_idx.get(this)?)?)?;
    Some(String::from_utf8_lossy(b.get(start..start + len)?).into_owned())
}
