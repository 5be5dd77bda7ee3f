//! Class-file parsing and writing, just deep enough for the rewriter.
//!
//! The parser does not build an object model: it indexes the constant pool (tag + offset of every
//! entry) and records the byte spans of methods and their `Code` attributes. The writer copies the
//! original bytes verbatim and splices in (a) constant-pool entries appended at the end of the pool
//! and (b) replacement `Code` attributes. Everything else (fields, other attributes, constant kinds
//! the rewriter never looks at such as Dynamic/Module/Package) passes through byte for byte.

use std::borrow::Cow;
use std::ops::Range;

use rustc_hash::FxHashMap;

use super::probes::RUNTIME_CLASS;
use super::RewriteError;

pub(crate) const TAG_UTF8: u8 = 1;
pub(crate) const TAG_INTEGER: u8 = 3;
pub(crate) const TAG_FLOAT: u8 = 4;
pub(crate) const TAG_LONG: u8 = 5;
pub(crate) const TAG_DOUBLE: u8 = 6;
pub(crate) const TAG_CLASS: u8 = 7;
pub(crate) const TAG_STRING: u8 = 8;
pub(crate) const TAG_FIELDREF: u8 = 9;
pub(crate) const TAG_METHODREF: u8 = 10;
pub(crate) const TAG_IMETHODREF: u8 = 11;
pub(crate) const TAG_NAME_AND_TYPE: u8 = 12;
pub(crate) const TAG_METHOD_HANDLE: u8 = 15;
pub(crate) const TAG_METHOD_TYPE: u8 = 16;
pub(crate) const TAG_DYNAMIC: u8 = 17;
pub(crate) const TAG_INVOKE_DYNAMIC: u8 = 18;
pub(crate) const TAG_MODULE: u8 = 19;
pub(crate) const TAG_PACKAGE: u8 = 20;

/// Highest constant-pool count a class file can state (`u2`).
pub(crate) const MAX_CP_COUNT: u32 = 0xFFFF;

fn malformed(what: &'static str) -> RewriteError {
    RewriteError::Malformed(what)
}

/// Bounds-checked big-endian reader over a byte slice. Every accessor fails instead of panicking.
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    pub b: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8], pos: usize) -> Self {
        Reader { b, pos }
    }
    #[inline]
    pub fn u1(&mut self) -> Option<u8> {
        let v = *self.b.get(self.pos)?;
        self.pos += 1;
        Some(v)
    }
    #[inline]
    pub fn u2(&mut self) -> Option<u16> {
        let s = self.b.get(self.pos..self.pos.checked_add(2)?)?;
        self.pos += 2;
        Some(u16::from_be_bytes([s[0], s[1]]))
    }
    #[inline]
    pub fn u4(&mut self) -> Option<u32> {
        let s = self.b.get(self.pos..self.pos.checked_add(4)?)?;
        self.pos += 4;
        Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    #[inline]
    pub fn skip(&mut self, n: usize) -> Option<()> {
        let end = self.pos.checked_add(n)?;
        if end > self.b.len() {
            return None;
        }
        self.pos = end;
        Some(())
    }
}

/// Reads a big-endian u16 at `at`, or None when out of range.
#[inline]
pub(crate) fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

#[inline]
pub(crate) fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// A constant pool as JVMTI GetConstantPool gives it: its entries as in a class file, without
/// the count. For reading a probe back from a method's bytecode (probes.rs, `EntryProbe`).
pub struct RawPool<'a>(ConstPool<'a>);

impl<'a> RawPool<'a> {
    /// `count` is constant_pool_count; None when the pool does not parse.
    pub fn parse(pool: &'a [u8], count: u16) -> Option<RawPool<'a>> {
        ConstPool::parse(pool, 0, count as usize, PoolBuffers::default()).ok().map(|(cp, _)| RawPool(cp))
    }

    /// The Integer constant at `index`, if that entry is one.
    pub fn integer(&self, index: u16) -> Option<i32> {
        be_i32(self.0.bytes, self.0.body(index, TAG_INTEGER)?)
    }

    /// Class name, name and descriptor of the member reference at `index`, if that entry is one.
    pub fn member_ref(&self, index: u16) -> Option<(&'a [u8], &'a [u8], &'a [u8])> {
        let (class, name, desc) = self.0.member_ref(index)?;
        Some((self.0.class_name(class)?, self.0.utf8(name)?, self.0.utf8(desc)?))
    }
}

/// Per constant-pool tag: the size of the entry after its tag (for Utf8 without its bytes), 0
/// for an unknown tag. One entry per byte value, so that a tag indexes it without a check.
static CP_ENTRY_SIZE: [u8; 256] = {
    let mut t = [0u8; 256];
    t[TAG_UTF8 as usize] = 2;
    t[TAG_INTEGER as usize] = 4;
    t[TAG_FLOAT as usize] = 4;
    t[TAG_LONG as usize] = 8;
    t[TAG_DOUBLE as usize] = 8;
    t[TAG_CLASS as usize] = 2;
    t[TAG_STRING as usize] = 2;
    t[TAG_FIELDREF as usize] = 4;
    t[TAG_METHODREF as usize] = 4;
    t[TAG_IMETHODREF as usize] = 4;
    t[TAG_NAME_AND_TYPE as usize] = 4;
    t[TAG_METHOD_HANDLE as usize] = 3;
    t[TAG_METHOD_TYPE as usize] = 2;
    t[TAG_DYNAMIC as usize] = 4;
    t[TAG_INVOKE_DYNAMIC as usize] = 4;
    t[TAG_MODULE as usize] = 2;
    t[TAG_PACKAGE as usize] = 2;
    t
};

/// The constant pool as an index: for entry `i`, its tag and the offset of its first byte after
/// the tag. Slot 0 and the second slot of Long/Double entries have tag 0.
pub(crate) struct ConstPool<'a> {
    bytes: &'a [u8],
    tags: Vec<u8>,
    offs: Vec<u32>,
    /// Whether some Utf8 entry is the runtime class's name; without one (almost always), the class
    /// cannot have been rewritten already and [`ConstPool::find_class`] of it is not worth a scan.
    pub has_runtime_name: bool,
}

impl<'a> ConstPool<'a> {
    /// Indexes the constant pool of `count` slots (constant_pool_count) that starts at `start` in
    /// `bytes`, into reused buffers; returns it and the offset just past it.
    #[inline(always)]
    pub fn parse(bytes: &'a [u8], start: usize, count: usize, bufs: PoolBuffers) -> Result<(Self, usize), RewriteError> {
        let PoolBuffers { mut tags, mut offs } = bufs;
        tags.clear();
        tags.resize(count, 0);
        offs.clear();
        offs.resize(count, 0);
        let mut has_runtime_name = false;
        let truncated = malformed("truncated constant pool");
        // Branch-free per entry but for errors (tags come in no predictable order): the size
        // comes from a table, a Utf8 entry adds the length that follows its tag.
        let mut pos = start;
        let mut i = 1;
        // Slices of exactly `count`: the loop's bound proves every index in range.
        let (tag_of, off_of) = (&mut tags[..count], &mut offs[..count]);
        while i < count {
            // Every entry has its tag and at least two more bytes (a Utf8 entry its length).
            let Some(&[tag, l0, l1]) = bytes.get(pos..pos + 3) else {
                return Err(truncated);
            };
            let size = CP_ENTRY_SIZE[tag as usize] as usize;
            if size == 0 {
                return Err(malformed("unknown constant-pool tag"));
            }
            let body = pos + 1;
            tag_of[i] = tag;
            off_of[i] = body as u32;
            // Read for every tag and used for Utf8 only.
            let len = u16::from_be_bytes([l0, l1]) as usize;
            let utf8_len = if tag == TAG_UTF8 { len } else { 0 };
            let end = body + size + utf8_len;
            if end > bytes.len() {
                return Err(truncated);
            }
            if utf8_len == RUNTIME_CLASS.len() {
                has_runtime_name |= &bytes[body + 2..end] == RUNTIME_CLASS.as_bytes();
            }
            pos = end;
            // Long and Double take two slots; the second is unusable.
            i += 1 + matches!(tag, TAG_LONG | TAG_DOUBLE) as usize;
        }
        Ok((ConstPool { bytes, tags, offs, has_runtime_name }, pos))
    }

    /// Number of slots as the class file states it (`constant_pool_count`).
    pub fn count(&self) -> u32 {
        self.tags.len() as u32
    }

    pub fn tag(&self, idx: u16) -> u8 {
        self.tags.get(idx as usize).copied().unwrap_or(0)
    }

    /// Where entry `idx`'s bytes after its tag start in the class file, if its tag is `tag`.
    pub fn body(&self, idx: u16, tag: u8) -> Option<usize> {
        if self.tag(idx) != tag {
            return None;
        }
        self.offs.get(idx as usize).map(|&o| o as usize)
    }

    /// The raw (modified UTF-8) bytes of a Utf8 entry and their offset in the class file.
    pub fn utf8_span(&self, idx: u16) -> Option<Range<usize>> {
        let o = self.body(idx, TAG_UTF8)?;
        let len = be_u16(self.bytes, o)? as usize;
        let start = o + 2;
        let end = start.checked_add(len)?;
        if end > self.bytes.len() {
            return None;
        }
        Some(start..end)
    }

    pub fn utf8(&self, idx: u16) -> Option<&'a [u8]> {
        let r = self.utf8_span(idx)?;
        self.bytes.get(r)
    }

    /// The name index of a Class entry.
    pub fn class_name_idx(&self, idx: u16) -> Option<u16> {
        be_u16(self.bytes, self.body(idx, TAG_CLASS)?)
    }

    pub fn class_name(&self, idx: u16) -> Option<&'a [u8]> {
        self.utf8(self.class_name_idx(idx)?)
    }

    /// (name, descriptor) Utf8 indices of a NameAndType entry.
    pub fn name_and_type(&self, idx: u16) -> Option<(u16, u16)> {
        let o = self.body(idx, TAG_NAME_AND_TYPE)?;
        Some((be_u16(self.bytes, o)?, be_u16(self.bytes, o + 2)?))
    }

    /// (class index, name index, descriptor index) of a Field/Method/InterfaceMethod ref.
    pub fn member_ref(&self, idx: u16) -> Option<(u16, u16, u16)> {
        let t = self.tag(idx);
        if !matches!(t, TAG_FIELDREF | TAG_METHODREF | TAG_IMETHODREF) {
            return None;
        }
        let o = *self.offs.get(idx as usize)? as usize;
        let class = be_u16(self.bytes, o)?;
        let (n, d) = self.name_and_type(be_u16(self.bytes, o + 2)?)?;
        Some((class, n, d))
    }

    /// The NameAndType of an InvokeDynamic or Dynamic entry: (name, descriptor).
    pub fn dynamic_nat(&self, idx: u16) -> Option<(u16, u16)> {
        let t = self.tag(idx);
        if !matches!(t, TAG_DYNAMIC | TAG_INVOKE_DYNAMIC) {
            return None;
        }
        let o = *self.offs.get(idx as usize)? as usize;
        self.name_and_type(be_u16(self.bytes, o + 2)?)
    }

    /// The first Class entry named `name` (the one [`ConstPool::class_index`] maps it to).
    pub fn find_class(&self, name: &[u8]) -> Option<u16> {
        (1..self.tags.len())
            .find(|&i| self.tags[i] == TAG_CLASS && self.class_name(i as u16) == Some(name))
            .map(|i| i as u16)
    }

    /// The first Utf8 entry holding each of `wanted` (0 where none does), found in one pass that
    /// compares an entry only with the wanted strings of its length (at most 32 strings, each
    /// shorter than 64 bytes: the probes' names and descriptors).
    pub fn find_utf8s<const N: usize>(&self, wanted: [&[u8]; N]) -> [u16; N] {
        const { assert!(N <= 32) };
        // Per length, the wanted strings of that length (a bit each).
        let mut by_len = [0u32; 64];
        for (k, w) in wanted.iter().enumerate() {
            if let Some(b) = by_len.get_mut(w.len()) {
                *b |= 1 << k;
            }
        }
        let mut found = [0u16; N];
        for (i, (&tag, &off)) in self.tags.iter().zip(&self.offs).enumerate().skip(1) {
            if tag != TAG_UTF8 {
                continue;
            }
            let off = off as usize;
            let Some(len) = be_u16(self.bytes, off) else { continue };
            let mut candidates = by_len.get(len as usize).copied().unwrap_or(0);
            while candidates != 0 {
                let k = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                if found[k] == 0 && self.bytes.get(off + 2..off + 2 + len as usize) == Some(wanted[k]) {
                    found[k] = i as u16;
                }
            }
        }
        found
    }

    /// All Class entries by name, for reusing them instead of appending duplicates.
    pub fn class_index(&self) -> FxHashMap<&'a [u8], u16> {
        // Sized once (no rehashing while filling); a few appended names fit in the slack.
        let n = self.tags.iter().filter(|&&t| t == TAG_CLASS).count();
        let mut m = FxHashMap::with_capacity_and_hasher(n + 8, Default::default());
        for i in 1..self.tags.len() {
            if self.tags[i] == TAG_CLASS {
                if let Some(n) = self.class_name(i as u16) {
                    m.entry(n).or_insert(i as u16);
                }
            }
        }
        m
    }
}

/// The constant-pool index's vectors, kept between classes.
#[derive(Default)]
pub(crate) struct PoolBuffers {
    tags: Vec<u8>,
    offs: Vec<u32>,
}

impl ConstPool<'_> {
    pub fn into_buffers(self) -> PoolBuffers {
        PoolBuffers {
            tags: self.tags,
            offs: self.offs,
        }
    }
}

/// Where one attribute sits in the class file.
#[derive(Debug, Clone)]
pub(crate) struct AttrSpan {
    /// From the attribute_name_index to the end of its info.
    pub whole: Range<usize>,
    /// The info bytes only.
    pub info: Range<usize>,
}

pub(crate) struct Method {
    pub access: u16,
    pub name: u16,
    pub desc: u16,
    pub code: Option<AttrSpan>,
    /// More than one Code attribute: malformed, left alone.
    pub dup_code: bool,
    /// Annotated `@Hidden` (left out of stack traces by the JVM).
    pub hidden: bool,
}

pub(crate) struct ClassFile<'a> {
    pub bytes: &'a [u8],
    pub major: u16,
    pub cp: ConstPool<'a>,
    /// Offset just after the last constant-pool entry (where appended entries go).
    pub cp_end: usize,
    /// The class's access flags.
    pub access: u16,
    pub this_class: u16,
    pub methods: Vec<Method>,
    pub source_file: Option<u16>,
}

/// Reads attribute headers, calling `f(name_idx, span)` for each; returns the end offset.
pub(crate) fn for_each_attr<'a>(
    r: &mut Reader<'a>,
    mut f: impl FnMut(u16, AttrSpan) -> Result<(), RewriteError>,
) -> Result<(), RewriteError> {
    let n = r.u2().ok_or(malformed("truncated attribute count"))?;
    let (b, mut pos) = (r.b, r.pos);
    for _ in 0..n {
        // The name and the length in one read.
        let Some(&[n0, n1, l0, l1, l2, l3]) = b.get(pos..pos + 6) else {
            return Err(malformed("truncated attribute"));
        };
        let info_start = pos + 6;
        let end = info_start + u32::from_be_bytes([l0, l1, l2, l3]) as usize;
        if end > b.len() {
            return Err(malformed("attribute overruns the class file"));
        }
        f(u16::from_be_bytes([n0, n1]), AttrSpan { whole: pos..end, info: info_start..end })?;
        pos = end;
    }
    r.pos = pos;
    Ok(())
}

impl<'a> ClassFile<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self, RewriteError> {
        Self::parse_with(bytes, PoolBuffers::default(), Vec::new())
    }

    /// [`ClassFile::parse`] into reused buffers (get them back with [`ConstPool::into_buffers`]
    /// and from `methods`).
    pub fn parse_with(bytes: &'a [u8], bufs: PoolBuffers, mut methods: Vec<Method>) -> Result<Self, RewriteError> {
        let mut r = Reader::new(bytes, 0);
        if r.u4() != Some(0xCAFE_BABE) {
            return Err(malformed("bad magic"));
        }
        let _minor = r.u2().ok_or(malformed("truncated header"))?;
        let major = r.u2().ok_or(malformed("truncated header"))?;
        let count = r.u2().ok_or(malformed("truncated header"))? as usize;
        if count == 0 {
            return Err(malformed("constant_pool_count is 0"));
        }
        let (cp, cp_end) = ConstPool::parse(bytes, r.pos, count, bufs)?;
        r.pos = cp_end;
        let access = r.u2().ok_or(malformed("truncated class header"))?;
        let this_class = r.u2().ok_or(malformed("truncated class header"))?;
        let _super = r.u2().ok_or(malformed("truncated class header"))?;
        let ninterfaces = r.u2().ok_or(malformed("truncated interfaces"))? as usize;
        r.skip(ninterfaces * 2)
            .ok_or(malformed("truncated interfaces"))?;
        // A member's name and descriptor must be Utf8 entries of this pool: an index past its
        // end would otherwise name an entry the rewriter appends (a runtime method's name or
        // descriptor), and the JVM would take the rewritten class where it rejects the original.
        let member_names = |name: u16, desc: u16| {
            if cp.tag(name) == TAG_UTF8 && cp.tag(desc) == TAG_UTF8 {
                Ok(())
            } else {
                Err(malformed("member name or descriptor is not a Utf8 entry"))
            }
        };
        let nfields = r.u2().ok_or(malformed("truncated fields"))?;
        for _ in 0..nfields {
            r.skip(2).ok_or(malformed("truncated field"))?;
            let name = r.u2().ok_or(malformed("truncated field"))?;
            let desc = r.u2().ok_or(malformed("truncated field"))?;
            member_names(name, desc)?;
            for_each_attr(&mut r, |_, _| Ok(()))?;
        }
        let nmethods = r.u2().ok_or(malformed("truncated methods"))?;
        methods.clear();
        // The Code attributes' name entry once met (0 before: no Utf8 entry has index 0): the
        // methods share it, so it is compared by index.
        let mut code_name = 0;
        for _ in 0..nmethods {
            let access = r.u2().ok_or(malformed("truncated method"))?;
            let name = r.u2().ok_or(malformed("truncated method"))?;
            let desc = r.u2().ok_or(malformed("truncated method"))?;
            member_names(name, desc)?;
            let mut code = None;
            let mut dup_code = false;
            let mut hidden = false;
            for_each_attr(&mut r, |n, span| {
                match if n == code_name { Some(&b"Code"[..]) } else { cp.utf8(n) } {
                    Some(b"Code") => {
                        code_name = n;
                        if code.is_some() {
                            dup_code = true;
                        }
                        code = Some(span);
                    }
                    Some(b"RuntimeVisibleAnnotations") => {
                        hidden |= bytes.get(span.info.clone()).is_some_and(|a| annotated_hidden(a, &cp));
                    }
                    _ => {}
                }
                Ok(())
            })?;
            methods.push(Method {
                access,
                name,
                desc,
                code,
                dup_code,
                hidden,
            });
        }
        let mut source_file = None;
        for_each_attr(&mut r, |n, span| {
            if cp.utf8(n) == Some(b"SourceFile") {
                source_file = be_u16(bytes, span.info.start);
            }
            Ok(())
        })?;
        if r.pos != bytes.len() {
            return Err(malformed("trailing bytes after the class file"));
        }
        if cp.class_name(this_class).is_none() {
            return Err(malformed("this_class is not a Class entry"));
        }
        Ok(ClassFile {
            bytes,
            major,
            cp,
            cp_end,
            access,
            this_class,
            methods,
            source_file,
        })
    }
}

/// Java's modified UTF-8 to a Rust string. Plain UTF-8 (the common case) is borrowed; embedded
/// NULs (`C0 80`) and surrogate pairs are decoded; anything invalid becomes U+FFFD.
#[inline]
pub(crate) fn mutf8(b: &[u8]) -> Cow<'_, str> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8 (the path below would borrow it unchanged too).
        return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(b) });
    }
    mutf8_non_ascii(b)
}

/// [`mutf8`] of bytes that are not all ASCII (rare; kept out of line).
#[inline(never)]
fn mutf8_non_ascii(b: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(b) {
        if !b.contains(&0xED) {
            return Cow::Borrowed(s);
        }
    }
    let mut units: Vec<u16> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as u32;
        if c < 0x80 {
            units.push(c as u16);
            i += 1;
        } else if c & 0xE0 == 0xC0 && i + 1 < b.len() {
            units.push((((c & 0x1F) << 6) | (b[i + 1] as u32 & 0x3F)) as u16);
            i += 2;
        } else if c & 0xF0 == 0xE0 && i + 2 < b.len() {
            units.push(
                (((c & 0x0F) << 12) | ((b[i + 1] as u32 & 0x3F) << 6) | (b[i + 2] as u32 & 0x3F))
                    as u16,
            );
            i += 3;
        } else {
            units.push(0xFFFD);
            i += 1;
        }
    }
    Cow::Owned(String::from_utf16_lossy(&units))
}

/// Text to Java's modified UTF-8, the inverse of [`mutf8`]: borrowed unless it holds NULs
/// (`C0 80`) or supplementary characters (a surrogate pair, three bytes each), the only
/// characters whose encodings differ from UTF-8.
pub(crate) fn to_mutf8(s: &str) -> Cow<'_, [u8]> {
    // A supplementary character's UTF-8 starts with F0..F4.
    if !s.bytes().any(|b| b == 0 || b >= 0xF0) {
        return Cow::Borrowed(s.as_bytes());
    }
    let mut out = Vec::with_capacity(s.len() + 8);
    let mut units = [0u16; 2];
    for c in s.chars() {
        for &u in c.encode_utf16(&mut units).iter() {
            let u = u as u32;
            match u {
                1..=0x7F => out.push(u as u8),
                0 | 0x80..=0x7FF => out.extend_from_slice(&[0xC0 | (u >> 6) as u8, 0x80 | (u & 0x3F) as u8]),
                _ => out.extend_from_slice(&[
                    0xE0 | (u >> 12) as u8,
                    0x80 | ((u >> 6) & 0x3F) as u8,
                    0x80 | (u & 0x3F) as u8,
                ]),
            }
        }
    }
    Cow::Owned(out)
}

/// Constant-pool entries appended after the original ones.
pub(crate) struct CpAppender {
    next: u32,
    pub bytes: Vec<u8>,
}

impl CpAppender {
    /// An appender writing into a reused buffer.
    pub fn with_buffer(orig_count: u32, mut bytes: Vec<u8>) -> Self {
        bytes.clear();
        CpAppender {
            next: orig_count,
            bytes,
        }
    }

    /// The count to write into the class file; may exceed [`MAX_CP_COUNT`] (caller checks).
    pub fn count(&self) -> u32 {
        self.next
    }

    /// Counts `n` entries that were appended to `bytes` directly.
    pub fn skip(&mut self, n: u32) {
        self.next += n;
    }

    /// Index the next entry would get, saturated to u16 (overflow is detected via `count`).
    fn take(&mut self, slots: u32) -> u16 {
        let i = self.next;
        self.next += slots;
        i.min(0xFFFF) as u16
    }

    pub fn utf8(&mut self, s: &[u8]) -> u16 {
        self.bytes.push(TAG_UTF8);
        self.bytes
            .extend_from_slice(&(s.len().min(0xFFFF) as u16).to_be_bytes());
        self.bytes.extend_from_slice(s);
        self.take(1)
    }

    pub fn class(&mut self, name_utf8: u16) -> u16 {
        self.bytes.push(TAG_CLASS);
        self.bytes.extend_from_slice(&name_utf8.to_be_bytes());
        self.take(1)
    }

    pub fn name_and_type(&mut self, name: u16, desc: u16) -> u16 {
        self.bytes.push(TAG_NAME_AND_TYPE);
        self.bytes.extend_from_slice(&name.to_be_bytes());
        self.bytes.extend_from_slice(&desc.to_be_bytes());
        self.take(1)
    }

    pub fn methodref(&mut self, class: u16, nat: u16) -> u16 {
        self.bytes.push(TAG_METHODREF);
        self.bytes.extend_from_slice(&class.to_be_bytes());
        self.bytes.extend_from_slice(&nat.to_be_bytes());
        self.take(1)
    }

    #[inline]
    pub fn integer(&mut self, v: i32) -> u16 {
        let b = v.to_be_bytes();
        self.bytes.extend_from_slice(&[TAG_INTEGER, b[0], b[1], b[2], b[3]]);
        self.take(1)
    }
}

/// Builds the output class: the original header and pool, the appended pool entries, `body`
/// (the rewritten class from `cp_end` up to original offset `copied`), the rest of the original;
/// `output` gets these as parts to concatenate.
pub(crate) fn assemble<O>(
    orig: &[u8],
    cp_end: usize,
    cp: &CpAppender,
    body: &[u8],
    copied: usize,
    output: impl FnOnce(&[&[u8]]) -> O,
) -> Option<O> {
    if cp.count() > MAX_CP_COUNT {
        return None;
    }
    let rest = orig.get(copied..)?;
    let count = (cp.count() as u16).to_be_bytes();
    Some(output(&[orig.get(..8)?, &count, orig.get(10..cp_end)?, &cp.bytes, body, rest]))
}

/// Whether a RuntimeVisibleAnnotations attribute holds `@Hidden` (`jdk.internal.vm.annotation`
/// or `LambdaForm$Hidden`): the JVM leaves such methods out of stack traces.
fn annotated_hidden(attr: &[u8], cp: &ConstPool<'_>) -> bool {
    let mut r = Reader::new(attr, 0);
    let Some(n) = r.u2() else { return false };
    for _ in 0..n {
        let Some(ty) = r.u2() else { return false };
        if matches!(cp.utf8(ty), Some(b"Ljdk/internal/vm/annotation/Hidden;") | Some(b"Ljava/lang/invoke/LambdaForm$Hidden;")) {
            return true;
        }
        if skip_annotation_pairs(&mut r, 0).is_none() {
            return false;
        }
    }
    false
}

/// Skips the element-value pairs of an annotation whose type index was just read.
fn skip_annotation_pairs(r: &mut Reader<'_>, depth: u32) -> Option<()> {
    let pairs = r.u2()?;
    for _ in 0..pairs {
        r.u2()?;
        skip_element_value(r, depth + 1)?;
    }
    Some(())
}

fn skip_element_value(r: &mut Reader<'_>, depth: u32) -> Option<()> {
    if depth > 64 {
        return None;
    }
    match r.u1()? {
        b'B' | b'C' | b'D' | b'F' | b'I' | b'J' | b'S' | b'Z' | b's' | b'c' => r.skip(2),
        b'e' => r.skip(4),
        b'@' => {
            r.u2()?;
            skip_annotation_pairs(r, depth)
        }
        b'[' => {
            let n = r.u2()?;
            for _ in 0..n {
                skip_element_value(r, depth + 1)?;
            }
            Some(())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{mutf8, to_mutf8, RawPool};

    #[test]
    fn entries_of_a_raw_pool() {
        // 1: Utf8 "ab", 2: Integer 42, 3-4: Long (two slots), 5: Integer -7, 6: Class #1,
        // 7: NameAndType #1 #1, 8: Methodref #6 #7.
        let pool = [
            &[1, 0, 2, b'a', b'b'][..],
            &[3, 0, 0, 0, 42],
            &[5, 0, 0, 0, 0, 0, 0, 0, 9],
            &[3, 0xFF, 0xFF, 0xFF, 0xF9],
            &[7, 0, 1],
            &[12, 0, 1, 0, 1],
            &[10, 0, 6, 0, 7],
        ]
        .concat();
        let count = 9;
        let raw = RawPool::parse(&pool, count).unwrap();
        assert_eq!(raw.integer(2), Some(42));
        assert_eq!(raw.integer(5), Some(-7));
        assert_eq!(raw.member_ref(8), Some((&b"ab"[..], &b"ab"[..], &b"ab"[..])));
        // Not Integers: Utf8, Long and its unusable second slot, Class, a Methodref; past the count.
        for index in [0, 1, 3, 4, 6, 8, 9, 100] {
            assert_eq!(raw.integer(index), None, "{index}");
        }
        for index in [0, 2, 6, 7, 9] {
            assert_eq!(raw.member_ref(index), None, "{index}");
        }
        // A pool cut short, or with an unknown tag, does not parse.
        assert!(RawPool::parse(&pool[..12], count).is_none());
        let mut bad = pool.clone();
        bad[5] = 2; // entry 2's tag
        assert!(RawPool::parse(&bad, count).is_none());
    }

    #[test]
    fn modified_utf8_round_trip() {
        // Plain, NUL (C0 80), a BMP character, a supplementary one (a surrogate pair).
        for raw in [&b"run"[..], b"a\xC0\x80b", b"\xC3\xA9t\xC3\xA9", b"x\xED\xA0\xBD\xED\xB8\x80y"] {
            let text = mutf8(raw);
            assert_eq!(&*to_mutf8(&text), raw);
            assert_eq!(crate::rewrite::target_key_of_text(&text, "()V"), crate::rewrite::target_key(raw, b"()V"));
        }
    }
}
