//! The class cache on real classes (a slice of the running JDK's, extracted with `jimage`): what
//! it serves equals what the rewriter makes, and damaged or foreign files are refused or passed
//! over, never served.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

mod rewrite_common;

use lucce_agent::class_cache::{CacheError, CacheStats, ClassCache, FORMAT_VERSION, MAX_PACK};
use lucce_agent::jdk_leaves::JdkLeaves;
use lucce_agent::registry::{ClassRegistrar, Registry};
use lucce_agent::rewrite::{rewrite_class, MethodInfo, ProbeChoice, SiteInfo, SiteRegistry};
use rewrite_common::Recorder;

/// Ids from here on: the rewriter pushes every id from a constant of its own, as a class served
/// from the cache does, so the two give the same bytes.
const ID_BASE: u32 = 1 << 20;

/// The classes of `java.util.concurrent` (a few hundred, of every shape), extracted once per
/// test process.
fn jdk_classes() -> &'static [Vec<u8>] {
    static CLASSES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let home = rewrite_common::java_home().expect("no JDK found (set JAVA_HOME)");
        let dir = tempfile::tempdir().unwrap();
        let files = rewrite_common::extract_jdk_classes(&home, dir.path(), Some("regex:/java.base/java/util/concurrent/.*"));
        let classes: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
        assert!(classes.len() > 200, "only {} classes", classes.len());
        classes
    })
}

/// What a run gets for each class: its bytes (None: left unchanged) and the registry's calls.
#[derive(Debug, PartialEq)]
struct Run {
    outputs: Vec<Option<Vec<u8>>>,
    methods: Vec<(String, String, String)>,
    sites: Vec<(u32, lucce_agent::rewrite::SiteKind, u32, i32)>,
}

fn direct(classes: &[Vec<u8>]) -> Run {
    let mut reg = Recorder { id_base: ID_BASE, ..Default::default() };
    let outputs = classes.iter().map(|c| rewrite_class(c, &mut reg).unwrap().bytes).collect();
    Run { outputs, methods: reg.methods, sites: reg.sites }
}

/// Serves every class through `cache` (into one registry, as a run does).
fn served(cache: &ClassCache, classes: &[Vec<u8>]) -> Run {
    let mut reg = Recorder { id_base: ID_BASE, ..Default::default() };
    let outputs = classes.iter().map(|c| cache.serve(c, &mut reg, |parts| parts.concat()).unwrap().0).collect();
    Run { outputs, methods: reg.methods, sites: reg.sites }
}

fn open(dir: &Path) -> ClassCache {
    ClassCache::open(dir, ProbeChoice::default(), None).unwrap_or_else(|e| panic!("open: {e}"))
}

fn counts(s: &CacheStats) -> (u64, u64, u64) {
    (s.hits, s.misses, s.unusable)
}

/// The cache's two files in `dir`: (pack, index).
fn files(dir: &Path) -> (PathBuf, PathBuf) {
    let mut pack = None;
    let mut index = None;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        match p.extension().and_then(|e| e.to_str()) {
            Some("pack") => pack = Some(p),
            Some("idx") => index = Some(p),
            _ => panic!("unexpected file {}", p.display()),
        }
    }
    (pack.expect("pack file"), index.expect("index file"))
}

/// Cuts (or extends, sparse) the file at `path` to `len` bytes.
fn set_len(path: &Path, len: u64) {
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

/// The bytes of the cache's two files, to check that something left them alone.
fn contents(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let (pack, index) = files(dir);
    (std::fs::read(pack).unwrap(), std::fs::read(index).unwrap())
}

/// Runs the ignored test `name` of this binary in a child process with `CHILD_DIR` set to `dir`,
/// `setup` run in the child before it starts (async-signal-safe calls only); returns its
/// stdout, after checking it succeeded.
fn run_child(name: &str, dir: &Path, setup: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static) -> String {
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args(["--exact", name, "--ignored", "--nocapture", "--test-threads=1"]).env(CHILD_DIR, dir);
    // SAFETY: the callers' `setup` makes only async-signal-safe calls, as between fork and exec
    // they must.
    unsafe { child.pre_exec(setup) };
    let out = child.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "child {name} failed: {text}\n{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// Fills a cache with `classes`, checking the first run against the rewriter.
fn filled(classes: &[Vec<u8>], want: &Run) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    assert!(served(&cache, classes) == *want, "classes rewritten for the cache differ from the rewriter's");
    cache.flush();
    let s = cache.stats();
    assert_eq!(counts(&s), (0, classes.len() as u64, 0));
    assert_eq!((s.stored, s.dropped), (classes.len() as u64, 0));
    dir
}

#[test]
fn served_classes_equal_the_rewriters() {
    let classes = jdk_classes();
    let want = direct(classes);
    let dir = filled(classes, &want);
    // A later run serves every class, with the same bytes and registry calls.
    let cache = open(dir.path());
    assert_eq!(cache.stats().entries_at_start, classes.len() as u64);
    assert!(served(&cache, classes) == want, "served classes differ from the rewriter's");
    assert_eq!(counts(&cache.stats()), (classes.len() as u64, 0, 0));
    // Flushing with nothing new writes nothing.
    cache.flush();
    assert_eq!(cache.stats().stored, 0);
}

#[test]
fn damaged_records_are_rewritten_not_served() {
    let classes = jdk_classes();
    let want = direct(classes);
    let n = classes.len() as u64;
    let dir = filled(classes, &want);
    let (pack, index) = files(dir.path());

    // One byte changed in the middle of the pack: that class is rewritten, the others served.
    let mut bytes = std::fs::read(&pack).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&pack, &bytes).unwrap();
    let cache = open(dir.path());
    assert!(served(&cache, classes) == want);
    assert_eq!(counts(&cache.stats()), (n - 1, 1, 1));
    // The rewritten class is kept again, and the new record wins from then on.
    cache.flush();
    drop(cache);
    let cache = open(dir.path());
    assert!(served(&cache, classes) == want);
    assert_eq!(counts(&cache.stats()), (n, 0, 0));
    drop(cache);

    // The pack cut in half (a disk that lost the end): the entries past the cut are passed
    // over when the index is read, and their classes rewritten.
    let len = std::fs::metadata(&pack).unwrap().len();
    set_len(&pack, len / 2);
    let cache = open(dir.path());
    let kept = cache.stats().entries_at_start;
    assert!(kept > 0 && kept < n, "{kept} of {n} entries kept");
    assert!(served(&cache, classes) == want);
    assert_eq!(counts(&cache.stats()), (kept, n - kept, 0));
    drop(cache);

    // An index entry cut short (a JVM killed while appending) is ignored, and cut off by the
    // next writer before it appends.
    let len = std::fs::metadata(&index).unwrap().len();
    set_len(&index, len - 5);
    let cache = open(dir.path());
    assert!(served(&cache, classes) == want);
    cache.flush();
    drop(cache);
    assert_eq!((std::fs::metadata(&index).unwrap().len() - 16) % 32, 0, "index entries are 32 bytes");
    let cache = open(dir.path());
    assert!(served(&cache, classes) == want);
    assert_eq!(counts(&cache.stats()), (n, 0, 0));
}

/// What a VMInit batch gets for each class, through the agent's registry starting at `first`
/// ids (small: the rewriter pushes them with `bipush`/`sipush`): the bytes, and the registry's
/// tables. Through `serve_exact` with a cache (`racing`: another thread always takes the ids
/// first), through the rewriter without.
fn batch(cache: Option<&ClassCache>, classes: &[Vec<u8>], first: (u32, u32), racing: bool) -> (Vec<Option<Vec<u8>>>, String) {
    let reg = Registry::starting_at(first.0, first.1);
    let outputs = classes
        .iter()
        .map(|c| {
            let mut registrar = reg.registrar();
            let out = match cache {
                Some(cache) => cache.serve_exact(c, &mut Racing { reg: &mut registrar, racing }, |parts| parts.concat()).unwrap().0,
                None => rewrite_class(c, &mut registrar).unwrap().bytes,
            };
            registrar.publish();
            out
        })
        .collect();
    let t = reg.tables();
    (outputs, format!("{:?} {:?}", t.methods, t.sites))
}

/// A registrar that another thread always beats to the ids it would take, when `racing`.
struct Racing<'r, 'a> {
    reg: &'r mut ClassRegistrar<'a>,
    racing: bool,
}

impl SiteRegistry for Racing<'_, '_> {
    fn method(&mut self, m: &MethodInfo<'_>) -> u32 {
        self.reg.method(m)
    }
    fn site(&mut self, method_id: u32, site: &SiteInfo) -> u32 {
        self.reg.site(method_id, site)
    }
    fn reserve_sites(&mut self, n: u32) {
        self.reg.reserve_sites(n)
    }
    fn next_ids(&self) -> Option<(u32, u32)> {
        self.reg.next_ids()
    }
    fn take_ids(&mut self, first: (u32, u32), counts: (u32, u32)) -> bool {
        !self.racing && self.reg.take_ids(first, counts)
    }
}

#[test]
fn the_vminit_batch_gets_the_rewriters_own_classes() {
    let classes = jdk_classes();
    let n = classes.len() as u64;
    let want = batch(None, classes, (3, 5), false);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    assert!(batch(Some(&cache), classes, (3, 5), false) == want, "the batch's first run differs from the rewriter");
    cache.flush();
    assert_eq!((counts(&cache.stats()), cache.stats().stored), ((0, n, 0), n));
    // A later batch that meets the same ids is served the same bytes and registry records.
    let cache = open(dir.path());
    assert!(batch(Some(&cache), classes, (3, 5), false) == want, "served batch differs from the rewriter's");
    assert_eq!(counts(&cache.stats()), (n, 0, 0));
    // One whose ids start elsewhere is not: every class is rewritten, with its own ids.
    let want_elsewhere = batch(None, classes, (4, 5), false);
    assert!(want_elsewhere != want);
    assert!(batch(Some(&cache), classes, (4, 5), false) == want_elsewhere);
    assert_eq!(counts(&cache.stats()), (n, n, 0));
    // Nor one where another thread takes the ids first.
    let cache = open(dir.path());
    assert!(batch(Some(&cache), classes, (3, 5), true) == want);
    assert_eq!(counts(&cache.stats()), (0, n, 0));
}

#[test]
fn foreign_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let (pack, index) = files(dir.path());
    // Another format version: refused, with both versions named.
    let mut header = std::fs::read(&index).unwrap();
    header[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    std::fs::write(&index, &header).unwrap();
    match ClassCache::open(dir.path(), ProbeChoice::default(), None) {
        Err(e @ CacheError::Version { found, .. }) => {
            assert_eq!(found, FORMAT_VERSION + 1);
            let text = e.to_string();
            assert!(text.contains(&format!("version {}", FORMAT_VERSION + 1)) && text.contains(&format!("reads version {FORMAT_VERSION}")), "{text}");
        }
        other => panic!("expected a version error, got {:?}", other.err()),
    }
    // Not a cache file at all: refused, and left as it was.
    std::fs::write(&pack, b"some other file").unwrap();
    assert!(matches!(ClassCache::open(dir.path(), ProbeChoice::default(), None), Err(CacheError::NotACache(p)) if p == pack));
    assert_eq!(std::fs::read(&pack).unwrap(), b"some other file");
    // A pack that is not a regular file (here /dev/null, which would swallow every record).
    std::fs::remove_file(&pack).unwrap();
    std::os::unix::fs::symlink("/dev/null", &pack).unwrap();
    assert!(matches!(ClassCache::open(dir.path(), ProbeChoice::default(), None), Err(CacheError::NotAFile(p)) if p == pack));
    // A directory that cannot be made.
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"").unwrap();
    assert!(matches!(ClassCache::open(&file.join("cache"), ProbeChoice::default(), None), Err(CacheError::Io(..))));
    // A file or a loop of symbolic links where the directory should be: named as such, not as
    // "File exists".
    let loop_a = dir.path().join("loop-a");
    std::os::unix::fs::symlink(dir.path().join("loop-b"), &loop_a).unwrap();
    std::os::unix::fs::symlink(&loop_a, dir.path().join("loop-b")).unwrap();
    for (path, why) in [(&file, "Not a directory"), (&loop_a, "symbolic links")] {
        let text = ClassCache::open(path, ProbeChoice::default(), None).err().expect("opened").to_string();
        assert!(text.contains(why), "{text}");
    }
}

#[test]
fn jvms_sharing_a_directory_keep_both_their_classes() {
    let classes = jdk_classes();
    let want = direct(classes);
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = classes.split_at(classes.len() / 2);
    // Both open before either writes, as two JVMs starting together do.
    let a = open(dir.path());
    let b = open(dir.path());
    served(&a, first);
    served(&b, second);
    b.flush();
    a.flush();
    let cache = open(dir.path());
    assert_eq!(cache.stats().entries_at_start, classes.len() as u64);
    assert!(served(&cache, classes) == want);
    assert_eq!(counts(&cache.stats()), (classes.len() as u64, 0, 0));
}

#[test]
fn a_class_another_jvm_kept_meanwhile_is_not_kept_twice() {
    let classes = jdk_classes();
    let want = direct(classes);
    let n = classes.len() as u64;
    let alone = filled(classes, &want);
    let pack_len = |dir: &Path| std::fs::metadata(files(dir).0).unwrap().len();
    // Two JVMs started together on an empty directory miss the same classes.
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    let b = open(dir.path());
    assert!(served(&a, classes) == want && served(&b, classes) == want);
    a.flush();
    b.flush();
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!((sa.stored, sa.already_kept), (n, 0), "{sa:?}");
    assert_eq!((sb.stored, sb.already_kept, sb.dropped), (0, n, 0), "{sb:?}");
    assert_eq!(pack_len(dir.path()), pack_len(alone.path()), "the pack holds the classes twice");
    let cache = open(dir.path());
    assert_eq!(cache.stats().entries_at_start, n);
    assert!(served(&cache, classes) == want);
    assert_eq!(counts(&cache.stats()), (n, 0, 0));
}

#[test]
fn other_builds_files_go_once_a_week_old() {
    let dir = tempfile::tempdir().unwrap();
    let week_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 24 * 3600);
    let put = |name: &str, old: bool| {
        let p = dir.path().join(name);
        let f = std::fs::File::create(&p).unwrap();
        if old {
            f.set_modified(week_ago).unwrap();
        }
        p
    };
    let stale = [put("classes-0123456789abcdef-a.pack", true), put("classes-0123456789abcdef-a.idx", true)];
    let recent = put("classes-fedcba9876543210-n.pack", false);
    let foreign = put("notes.pack", true);
    drop(open(dir.path()));
    assert!(stale.iter().all(|p| !p.exists()), "stale files of another build kept");
    assert!(recent.exists() && foreign.exists(), "removed a recent file of another build, or a file not the cache's");
    // Its own files (the ones with a header: the others above are empty), however old, stay.
    let ours: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("classes-") && p.metadata().unwrap().len() >= 16)
        .collect();
    assert_eq!(ours.len(), 2, "{ours:?}");
    for p in &ours {
        std::fs::File::options().write(true).open(p).unwrap().set_modified(week_ago).unwrap();
    }
    drop(open(dir.path()));
    assert!(ours.iter().all(|p| p.exists()));
}

#[test]
fn the_mode_names_the_files() {
    // Record mode has no allocation probes and none on throw paths or in leaf callers, and with
    // classes left out drops after every call: its classes are other caches'.
    let classes = jdk_classes();
    let dir = filled(classes, &direct(classes));
    let counting = ProbeChoice::default();
    for other_choice in [
        ProbeChoice::record(false),
        ProbeChoice::record(true),
        ProbeChoice { drop_after_calls: true, ..counting },
        ProbeChoice { throw_path_calls: false, ..counting },
        ProbeChoice { leaf_calls: false, ..counting },
    ] {
        let other = ClassCache::open(dir.path(), other_choice, None).unwrap();
        assert_eq!(other.stats().entries_at_start, 0, "{other_choice:?}");
    }
}

/// Writes `value` at byte `at` of index entry `i` (16-byte header, 32-byte entries: hash 16,
/// offset 8, length 4, check 4).
fn patch_entry(index: &Path, i: usize, at: usize, value: &[u8]) {
    let mut bytes = std::fs::read(index).unwrap();
    let start = 16 + 32 * i + at;
    bytes[start..start + value.len()].copy_from_slice(value);
    std::fs::write(index, &bytes).unwrap();
}

#[test]
fn index_entries_outside_the_pack_are_passed_over() {
    let classes = jdk_classes();
    let want = direct(classes);
    let n = classes.len() as u64;
    let dir = filled(classes, &want);
    let (pack, index) = files(dir.path());
    let pack_len = std::fs::metadata(&pack).unwrap().len();
    // A damaged length (4 GiB: no buffer is sized by it), an offset past the end, an offset in
    // the header.
    patch_entry(&index, 3, 24, &u32::MAX.to_le_bytes());
    patch_entry(&index, 5, 16, &pack_len.to_le_bytes());
    patch_entry(&index, 7, 16, &1u64.to_le_bytes());
    let cache = open(dir.path());
    assert_eq!(cache.stats().entries_at_start, n - 3);
    assert!(served(&cache, classes) == want);
    assert_eq!(counts(&cache.stats()), (n - 3, 3, 0));
}

#[test]
fn a_header_cut_short_is_written_again() {
    let classes = jdk_classes();
    let want = direct(classes);
    let n = classes.len() as u64;
    for (file, keep) in [(1, 10), (0, 8), (1, 0)] {
        let dir = filled(classes, &want);
        let f = [files(dir.path()).0, files(dir.path()).1][file].clone();
        set_len(&f, keep);
        // The cache opens (a JVM killed while it wrote a header must not turn it off for good),
        // starts empty, and is filled again.
        let cache = open(dir.path());
        assert_eq!(cache.stats().entries_at_start, 0);
        assert!(served(&cache, classes) == want);
        assert_eq!(counts(&cache.stats()), (0, n, 0));
        cache.flush();
        drop(cache);
        let cache = open(dir.path());
        assert!(served(&cache, classes) == want);
        assert_eq!(counts(&cache.stats()), (n, 0, 0), "{} cut to {keep} bytes", f.display());
    }
    // Bytes that are not the start of a header: refused.
    let dir = filled(classes, &want);
    let (_, index) = files(dir.path());
    std::fs::write(&index, b"LUCCEXX").unwrap();
    assert!(matches!(ClassCache::open(dir.path(), ProbeChoice::default(), None), Err(CacheError::NotACache(p)) if p == index));
}

#[test]
fn a_full_pack_is_emptied_and_filled_again() {
    let classes = jdk_classes();
    let want = direct(classes);
    let (first, second) = classes.split_at(classes.len() / 2);
    let dir = filled(first, &direct(first));
    let (pack, _) = files(dir.path());
    // At its limit (a sparse file: the records before stay where they are).
    set_len(&pack, MAX_PACK);
    let cache = open(dir.path());
    assert!(served(&cache, classes) == want);
    assert_eq!(counts(&cache.stats()), (first.len() as u64, second.len() as u64, 0));
    cache.flush();
    let s = cache.stats();
    assert_eq!((s.stored, s.dropped), (second.len() as u64, 0), "the second half was not kept");
    drop(cache);
    assert!(std::fs::metadata(&pack).unwrap().len() < MAX_PACK / 2, "the pack was not emptied");
    // The emptied files hold the second half alone.
    let cache = open(dir.path());
    assert_eq!(cache.stats().entries_at_start, second.len() as u64);
    assert!(served(&cache, classes) == want);
    assert_eq!(counts(&cache.stats()), (second.len() as u64, first.len() as u64, 0));
}

/// Where [`a_failed_write_leaves_the_files_as_they_were`]'s child process finds its cache.
const CHILD_DIR: &str = "LUCCE_TEST_CACHE_DIR";

#[test]
fn a_failed_write_leaves_the_files_as_they_were() {
    let classes = jdk_classes();
    let (first, _) = classes.split_at(classes.len() / 2);
    let dir = filled(first, &direct(first));
    let before = contents(dir.path());
    // A child process whose files may not grow past the pack's size (RLIMIT_FSIZE, as a full
    // disk would stop them) serves every class and flushes: its writes fail.
    let limit = before.0.len() as u64 + 4096;
    let text = run_child("write_into_a_limited_file", dir.path(), move || {
        let lim = libc::rlimit { rlim_cur: limit, rlim_max: limit };
        // SAFETY: setrlimit reads `lim`; signal changes a disposition (both async-signal-safe).
        // A write past the limit then fails with EFBIG instead of killing the process.
        unsafe {
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
        Ok(())
    });
    assert!(text.contains("child: dropped"), "{text}");
    assert!(contents(dir.path()) == before, "a failed write left bytes behind");
    // And the cache still serves what it held.
    let cache = open(dir.path());
    assert!(served(&cache, first) == direct(first));
    assert_eq!(counts(&cache.stats()), (first.len() as u64, 0, 0));
}

/// The child of [`a_failed_write_leaves_the_files_as_they_were`] (ignored when run alone).
#[test]
#[ignore = "run by a_failed_write_leaves_the_files_as_they_were"]
fn write_into_a_limited_file() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else { return };
    let classes = jdk_classes();
    let cache = open(Path::new(&dir));
    served(&cache, classes);
    cache.flush();
    let s = cache.stats();
    assert_eq!(s.stored, 0, "{s:?}");
    println!("child: dropped {}", s.dropped);
}

#[test]
fn a_cache_this_user_may_only_read_is_served_as_it_is() {
    // SAFETY: geteuid reads the process's credentials, nothing else.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root, to run a child process as another user");
        return;
    }
    // The child runs this test binary as `nobody`: every directory above it must let others in
    // (a checkout under a private `mktemp -d` does not).
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe().unwrap();
    let others_may = |p: &Path, bits: u32| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & bits == bits);
    if !others_may(&exe, 0o005) || !exe.ancestors().skip(1).all(|d| others_may(d, 0o001)) {
        eprintln!("skipped: {} is not reachable by other users", exe.display());
        return;
    }
    let classes = jdk_classes();
    let dir = filled(classes, &direct(classes));
    let before = contents(dir.path());
    // Readable by everyone, writable by root alone.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let text = run_child("serve_a_cache_this_user_may_only_read", dir.path(), || {
        let nobody: libc::uid_t = 65534;
        // SAFETY: credential changes of this (child) process, async-signal-safe.
        if unsafe { libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(nobody) != 0 || libc::setuid(nobody) != 0 } {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    });
    assert!(text.contains(&format!("child: served {} read-only", classes.len())), "{text}");
    assert!(contents(dir.path()) == before, "a read-only cache changed");
}

/// The child of [`a_cache_this_user_may_only_read_is_served_as_it_is`], run as another user.
#[test]
#[ignore = "run by a_cache_this_user_may_only_read_is_served_as_it_is"]
fn serve_a_cache_this_user_may_only_read() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else { return };
    let classes = jdk_classes();
    let cache = open(Path::new(&dir));
    assert!(served(&cache, classes) == direct(classes));
    cache.flush();
    let s = cache.stats();
    assert!(s.read_only, "{s:?}");
    assert_eq!((counts(&s), s.stored), ((classes.len() as u64, 0, 0), 0), "{s:?}");
    println!("child: served {} read-only", s.hits);
}

/// A run's registry in record mode with leaf callers: ids as [`Recorder`]'s, the JDK's leaves
/// (when given) as the agent's registry tells them, the leaf methods it was given and how many
/// classes' served leaves it took.
struct LeafRun {
    ids: Recorder,
    jdk: Option<Arc<JdkLeaves>>,
    probes: ProbeChoice,
    leaves: Vec<String>,
    served: std::cell::Cell<usize>,
}

impl SiteRegistry for LeafRun {
    fn method(&mut self, m: &MethodInfo<'_>) -> u32 {
        if m.leaf {
            self.leaves.push(format!("{}.{}{}", m.class, m.name, m.descriptor));
        }
        self.ids.method(m)
    }
    fn site(&mut self, method_id: u32, site: &SiteInfo) -> u32 {
        self.ids.site(method_id, site)
    }
    fn probes(&self) -> ProbeChoice {
        self.probes
    }
    fn known_leaf(&self, class: &[u8], name: &[u8], desc: &[u8], own: bool) -> Option<(u16, u16)> {
        self.jdk.as_ref()?.known_leaf(class, name, desc, own)
    }
    fn served_leaves(&self, class: &str, access: u16, methods: &mut dyn Iterator<Item = (&str, &str, u16, bool)>) -> bool {
        let took = self.jdk.as_ref().is_none_or(|j| j.served(class.as_bytes(), access, methods));
        self.served.set(self.served.get() + took as usize);
        took
    }
}

/// Record mode with the JDK's leaves: a record keeps its leaf callers, which count on leaves of
/// other classes; a later run serves the records with the same leaves (but the few that register
/// as no leaf a method this run's analysis of the JDK found a leaf, which callers may count
/// on), and a run
/// that knows no other class's leaves refuses each record that counts on one, and gets the
/// rewriter's classes without them.
#[test]
fn records_keep_leaf_callers_while_the_jdk_gives_the_same_leaves() {
    let probes = ProbeChoice { throw_path_calls: false, leaf_calls: false, ..ProbeChoice::record(false) };
    let modules = rewrite_common::java_home().expect("no JDK found").join("lib/modules");
    let classes = jdk_classes();
    let dir = tempfile::tempdir().unwrap();
    let run = |cache: Option<&ClassCache>, jdk: Option<Arc<JdkLeaves>>| {
        let mut reg = LeafRun { ids: Recorder { id_base: ID_BASE, ..Default::default() }, jdk, probes, leaves: Vec::new(), served: Default::default() };
        let (mut outputs, mut took) = (Vec::new(), Vec::new());
        for c in classes {
            let before = reg.served.get();
            outputs.push(match cache {
                Some(cache) => cache.serve(c, &mut reg, |parts| parts.concat()).unwrap().0,
                None => rewrite_class(c, &mut reg).unwrap().bytes,
            });
            took.push(reg.served.get() > before);
        }
        (outputs, reg.leaves, took)
    };
    let with_jdk = || Some(JdkLeaves::open(&modules, probes).expect("runtime image"));
    let jdk = with_jdk();
    let first = ClassCache::open(dir.path(), probes, jdk.clone()).unwrap();
    let (outputs, leaves, _) = run(Some(&first), jdk);
    first.flush();
    let s = first.stats();
    assert_eq!((s.misses, s.stored, s.dropped), (classes.len() as u64, classes.len() as u64, 0));
    // Without the JDK's leaves, fewer leaves.
    let (plain_outputs, plain_leaves, _) = run(None, None);
    assert!(leaves.len() > plain_leaves.len() + 50, "{} leaves with the JDK's, {} without", leaves.len(), plain_leaves.len());

    let jdk = with_jdk();
    let second = ClassCache::open(dir.path(), probes, jdk.clone()).unwrap();
    let (served, _, took) = run(Some(&second), jdk);
    let s = second.stats();
    assert_eq!((s.hits, s.misses, s.unusable), (took.iter().filter(|&&t| t).count() as u64, s.refused, 0));
    assert!(s.refused * 100 <= classes.len() as u64, "{} of {} records refused", s.refused, classes.len());
    for (i, ((out, want), took)) in served.iter().zip(&outputs).zip(took).enumerate() {
        assert!(!took || out == want, "class {i} served unlike the first run's");
    }

    let bare = ClassCache::open(dir.path(), probes, None).unwrap();
    let (served, served_leaves, _) = run(Some(&bare), None);
    let s = bare.stats();
    assert!(s.refused > 50 && s.hits > 50, "{s:?}");
    assert!(served == plain_outputs && served_leaves == plain_leaves, "classes differ from the rewriter's without the JDK's leaves");
}
