//! Reads class files of the module `java.base` from the JDK's runtime image (`lib/modules`), the
//! "jimage" format of OpenJDK's `src/java.base/share/native/libjimage/imageFile.hpp`: a header,
//! a perfect-hash table of resource names, each name's location attributes, a string table, then
//! the resources. The index (all but the resources, about 1.5 MB for the JDK's image) is read
//! into memory at open, and each class file with one `pread`; nothing is mapped, so a file
//! replaced under a running JVM (an upgrade) gives errors, never a SIGBUS.
//!
//! Only uncompressed resources are read (the JDK's own images are; a `jlink --compress` image
//! gives None, which only means less is known).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

const MAGIC: u32 = 0xCAFE_DADA;
const VERSION: u32 = 1 << 16; // 1.0
const HEADER_BYTES: u64 = 7 * 4;
const HASH_MULTIPLIER: u32 = 0x0100_0193;

/// Location attribute kinds.
const ATTR_END: u8 = 0;
const ATTR_MODULE: u8 = 1;
const ATTR_PARENT: u8 = 2;
const ATTR_BASE: u8 = 3;
const ATTR_EXTENSION: u8 = 4;
const ATTR_OFFSET: u8 = 5;
const ATTR_COMPRESSED: u8 = 6;
const ATTR_UNCOMPRESSED: u8 = 7;

/// Largest class file read (the JDK's largest is under 200 KB).
const MAX_CLASS_BYTES: u64 = 4 << 20;

/// Largest index read (the JDK 17 image's is 1.5 MB).
const MAX_INDEX_BYTES: u64 = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum JImageError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a jimage file (magic {0:#x})")]
    Magic(u32),
    #[error("unsupported jimage version {0:#x}")]
    Version(u32),
    #[error("jimage header out of range")]
    Header,
}

pub struct JImage {
    file: File,
    table_length: u32,
    /// The file up to the resources.
    index: Vec<u8>,
    /// Offsets in `index` of the redirect table, the location offsets, the locations and the
    /// strings; in the file, of the resources.
    redirects: u64,
    offsets: u64,
    locations: u64,
    strings: u64,
    resources: u64,
    len: u64,
}

impl JImage {
    pub fn open(path: &Path) -> Result<JImage, JImageError> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let mut h = [0u8; HEADER_BYTES as usize];
        file.read_exact_at(&mut h, 0)?;
        let word = |i: usize| u32::from_le_bytes([h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]]);
        if word(0) != MAGIC {
            return Err(JImageError::Magic(word(0)));
        }
        if word(1) != VERSION {
            return Err(JImageError::Version(word(1)));
        }
        let (table_length, locations_size, strings_size) = (word(4), u64::from(word(5)), u64::from(word(6)));
        let redirects = HEADER_BYTES;
        let offsets = redirects + 4 * u64::from(table_length);
        let locations = offsets + 4 * u64::from(table_length);
        let strings = locations + locations_size;
        let resources = strings + strings_size;
        if table_length == 0 || resources > len || resources > MAX_INDEX_BYTES {
            return Err(JImageError::Header);
        }
        let mut index = vec![0u8; resources as usize];
        file.read_exact_at(&mut index, 0)?;
        Ok(JImage { file, table_length, index, redirects, offsets, locations, strings, resources, len })
    }

    /// The class file of `java.base`'s class `name` (internal form, `java/lang/String`), if the
    /// image has it uncompressed. Any read error or inconsistency is None.
    pub fn java_base_class(&self, name: &[u8]) -> Option<Vec<u8>> {
        let mut full = Vec::with_capacity(name.len() + 18);
        full.extend_from_slice(b"/java.base/");
        full.extend_from_slice(name);
        full.extend_from_slice(b".class");
        self.resource(&full)
    }

    fn resource(&self, name: &[u8]) -> Option<Vec<u8>> {
        let n = self.table_length;
        let mut index = hash(name, HASH_MULTIPLIER) % n;
        let redirect = self.i32_at(self.redirects + 4 * u64::from(index))?;
        index = match redirect {
            0 => return None,
            r if r < 0 => u32::try_from(-1 - i64::from(r)).ok()?,
            r => hash(name, r as u32) % n,
        };
        if index >= n {
            return None;
        }
        let location = self.locations + u64::from(self.u32_at(self.offsets + 4 * u64::from(index))?);
        let attrs = self.attributes(location)?;
        // The table is a perfect hash of the names it holds: any other name lands somewhere too.
        if self.name_of(&attrs)? != name || attrs[ATTR_COMPRESSED as usize] != 0 {
            return None;
        }
        let (start, size) = (self.resources.checked_add(attrs[ATTR_OFFSET as usize])?, attrs[ATTR_UNCOMPRESSED as usize]);
        if size > MAX_CLASS_BYTES || start.checked_add(size)? > self.len {
            return None;
        }
        let mut bytes = vec![0u8; size as usize];
        self.file.read_exact_at(&mut bytes, start).ok()?;
        Some(bytes)
    }

    /// The location attributes at `at`, by kind: each is a byte `kind << 3 | (length - 1)`
    /// followed by a big-endian value of that length, up to a byte of kind END.
    fn attributes(&self, at: u64) -> Option<[u64; 8]> {
        let buf = self.index.get(usize::try_from(at).ok()?..usize::try_from(self.strings).ok()?)?;
        let mut attrs = [0u64; 8];
        let mut i = 0;
        loop {
            let b = *buf.get(i)?;
            let kind = b >> 3;
            if kind == ATTR_END {
                return Some(attrs);
            }
            let len = usize::from(b & 7) + 1;
            let value = buf.get(i + 1..i + 1 + len)?.iter().fold(0u64, |v, &x| v << 8 | u64::from(x));
            *attrs.get_mut(usize::from(kind))? = value;
            i += 1 + len;
        }
    }

    /// `/module/parent/base.extension`, each part left out (with its separator) when empty.
    fn name_of(&self, attrs: &[u64; 8]) -> Option<Vec<u8>> {
        let mut name = Vec::new();
        let module = self.string(attrs[ATTR_MODULE as usize])?;
        if !module.is_empty() {
            name.push(b'/');
            name.extend_from_slice(module);
            name.push(b'/');
        }
        let parent = self.string(attrs[ATTR_PARENT as usize])?;
        if !parent.is_empty() {
            name.extend_from_slice(parent);
            name.push(b'/');
        }
        name.extend_from_slice(self.string(attrs[ATTR_BASE as usize])?);
        let extension = self.string(attrs[ATTR_EXTENSION as usize])?;
        if !extension.is_empty() {
            name.push(b'.');
            name.extend_from_slice(extension);
        }
        Some(name)
    }

    /// The NUL-terminated string at `offset` of the string table.
    fn string(&self, offset: u64) -> Option<&[u8]> {
        let at = usize::try_from(self.strings.checked_add(offset)?).ok()?;
        let rest = self.index.get(at..)?;
        Some(&rest[..rest.iter().position(|&b| b == 0)?])
    }

    fn u32_at(&self, at: u64) -> Option<u32> {
        let at = usize::try_from(at).ok()?;
        Some(u32::from_le_bytes(self.index.get(at..at + 4)?.try_into().ok()?))
    }

    fn i32_at(&self, at: u64) -> Option<i32> {
        self.u32_at(at).map(|v| v as i32)
    }
}

/// The image's hash of a name (`ImageStrings::hash_code`).
fn hash(name: &[u8], seed: u32) -> u32 {
    name.iter().fold(seed, |h, &b| h.wrapping_mul(HASH_MULTIPLIER) ^ u32::from(b)) & 0x7FFF_FFFF
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The runtime image of the JDK that runs `javac` (JAVA_HOME first), if any.
    pub(crate) fn jdk_modules() -> Option<std::path::PathBuf> {
        let home = std::env::var_os("JAVA_HOME").map(std::path::PathBuf::from).or_else(|| {
            let javac = std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("javac")).find(|p| p.is_file())?;
            Some(std::fs::canonicalize(javac).ok()?.parent()?.parent()?.to_path_buf())
        })?;
        Some(home.join("lib/modules")).filter(|p| p.is_file())
    }

    #[test]
    fn reads_java_base_classes_and_nothing_else() {
        let Some(path) = jdk_modules() else {
            eprintln!("no JDK runtime image; skipping");
            return;
        };
        let image = JImage::open(&path).unwrap();
        for name in ["java/lang/String", "java/util/ArrayList", "jdk/internal/util/Preconditions"] {
            let bytes = image.java_base_class(name.as_bytes()).unwrap_or_else(|| panic!("{name} not found"));
            assert_eq!(bytes[..4], [0xCA, 0xFE, 0xBA, 0xBE], "{name}");
            assert!(bytes.windows(name.len()).any(|w| w == name.as_bytes()), "{name}: not its class file");
        }
        // Not in the image, or in another module.
        assert!(image.java_base_class(b"java/lang/NoSuchClass").is_none());
        assert!(image.java_base_class(b"javax/xml/XMLConstants").is_none());
    }

    #[test]
    fn other_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (short, wrong, cut) = (dir.path().join("short"), dir.path().join("wrong"), dir.path().join("cut"));
        std::fs::write(&short, [0xDA, 0xDA]).unwrap();
        std::fs::write(&wrong, [0u8; 64]).unwrap();
        let mut header = Vec::new();
        for w in [MAGIC, VERSION, 0, 10, 10, 1000, 1000] {
            header.extend_from_slice(&w.to_le_bytes());
        }
        std::fs::write(&cut, &header).unwrap();
        assert!(matches!(JImage::open(&short), Err(JImageError::Io(_))));
        assert!(matches!(JImage::open(&wrong), Err(JImageError::Magic(0))));
        assert!(matches!(JImage::open(&cut), Err(JImageError::Header)));
        assert!(JImage::open(&dir.path().join("missing")).is_err());
    }
}
