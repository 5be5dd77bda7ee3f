//! Shared helpers for the rewriter's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lucce_agent::rewrite::{
    rewrite_class, ClassStats, MethodInfo, SiteInfo, SiteKind, SiteRegistry,
};

/// Hands out dense ids from 0 and records what it was asked.
#[derive(Default)]
pub struct Recorder {
    pub methods: Vec<(String, String, String)>,
    pub sites: Vec<(u32, SiteKind, u32, i32)>,
    /// Added to every id, to exercise the ldc/ldc_w push forms.
    pub id_base: u32,
    /// Every method through the rewriter's general path (no direct rewrite).
    pub general: bool,
}

impl SiteRegistry for Recorder {
    fn direct_rewrite(&self) -> bool {
        !self.general
    }
    fn method(&mut self, m: &MethodInfo<'_>) -> u32 {
        self.methods.push((
            m.class.to_string(),
            m.name.to_string(),
            m.descriptor.to_string(),
        ));
        self.id_base + self.methods.len() as u32 - 1
    }
    fn site(&mut self, method_id: u32, s: &SiteInfo) -> u32 {
        self.sites.push((method_id, s.kind, s.bci, s.line));
        self.id_base + self.sites.len() as u32 - 1
    }
}

pub fn tool(name: &str) -> Option<PathBuf> {
    if let Ok(h) = std::env::var("JAVA_HOME") {
        let p = Path::new(&h).join("bin").join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// javac is required: the tests say so loudly instead of passing vacuously.
pub fn javac() -> PathBuf {
    tool("javac").expect("javac not found (set JAVA_HOME or PATH)")
}

pub fn java() -> PathBuf {
    tool("java").expect("java not found")
}

pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Compiles `sources` into `out` with extra javac args.
pub fn compile(sources: &[PathBuf], out: &Path, args: &[&str]) {
    std::fs::create_dir_all(out).unwrap();
    let mut c = Command::new(javac());
    c.arg("-nowarn").arg("-d").arg(out).args(args).args(sources);
    run_ok(&mut c);
}

/// The stub runtime class the rewritten code calls: enter/version return 0, leaf its argument,
/// call/alloc/drop no-ops.
pub fn stub_runtime(dir: &Path) -> PathBuf {
    let src = dir.join("stubsrc/lucce");
    std::fs::create_dir_all(&src).unwrap();
    let f = src.join("Runtime.java");
    std::fs::write(
        &f,
        "package lucce;\npublic final class Runtime {\n\
         public static long enter(int m) { return 0; }\n\
         public static long version() { return 0; }\n\
         public static int leaf(int m) { return m; }\n\
         public static void call(int s, long c, long v) {}\n\
         public static void alloc(int s, long c, long v) {}\n\
         public static void drop() {}\n}\n",
    )
    .unwrap();
    let out = dir.join("stub");
    compile(&[f], &out, &["--release", "8"]);
    out
}

/// The running JDK's home: $JAVA_HOME, else the one whose `javac` is on the PATH.
pub fn java_home() -> Option<PathBuf> {
    if let Ok(h) = std::env::var("JAVA_HOME") {
        return Some(PathBuf::from(h));
    }
    let real = std::fs::canonicalize(tool("javac")?).ok()?;
    Some(real.parent()?.parent()?.to_path_buf())
}

/// The running JDK's home, and the class files of its module image that match `include` (a
/// `jimage` pattern list; all without), extracted into a new directory (kept while the `TempDir`
/// lives), sorted; None (and a note on stderr) when no JDK is found, for tests that then skip.
pub fn jdk_classes(include: Option<&str>) -> Option<(PathBuf, tempfile::TempDir, Vec<PathBuf>)> {
    let Some(home) = java_home() else {
        eprintln!("no JDK found; skipping");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let files = extract_jdk_classes(&home, dir.path(), include);
    Some((home, dir, files))
}

/// Extracts the class files of `home`'s module image (those matching `include`, a `jimage`
/// pattern list, if given) into `dir`; returns their paths, sorted.
pub fn extract_jdk_classes(home: &Path, dir: &Path, include: Option<&str>) -> Vec<PathBuf> {
    let (jimage, modules) = (home.join("bin/jimage"), home.join("lib/modules"));
    assert!(jimage.is_file() && modules.is_file(), "jimage or lib/modules missing under {}", home.display());
    let mut cmd = Command::new(&jimage);
    cmd.arg("extract").arg("--dir").arg(dir);
    if let Some(p) = include {
        cmd.args(["--include", p]);
    }
    assert!(cmd.arg(&modules).status().expect("run jimage").success());
    let mut files = Vec::new();
    class_files(dir, &mut files);
    files.sort();
    files
}

pub fn class_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            class_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "class") {
            out.push(p);
        }
    }
}

/// Rewrites every class under `from` into `to` (unchanged classes are copied); returns stats.
pub fn rewrite_tree(from: &Path, to: &Path, reg: &mut Recorder) -> Vec<ClassStats> {
    let mut files = Vec::new();
    class_files(from, &mut files);
    files.sort();
    let mut stats = Vec::new();
    for f in files {
        let rel = f.strip_prefix(from).unwrap();
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        let bytes = std::fs::read(&f).unwrap();
        let o = rewrite_class(&bytes, reg).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if let Some(b) = &o.bytes {
            lucce_agent::rewrite::check::check_class(b)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
        std::fs::write(&dest, o.bytes.as_deref().unwrap_or(&bytes)).unwrap();
        stats.push(o.stats);
    }
    stats
}

/// Runs `main` with the verifier on for all classes; returns (stdout, stderr).
pub fn run_java(cp: &[&Path], main: &str) -> (String, String) {
    let cp = std::env::join_paths(cp).unwrap();
    let out = run_ok(
        Command::new(java())
            .arg("-Xverify:all")
            .arg("-Xshare:off")
            .arg("-cp")
            .arg(cp)
            .arg(main),
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
