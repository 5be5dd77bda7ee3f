//! Compiles the runtime class and the API class (agent/java/lucce/{Runtime,Lucce}.java) with javac into OUT_DIR; the library
//! embeds the class file with `include_bytes!`. Also gives the build a source hash
//! (`LUCCE_AGENT_SOURCE_HASH`), which names the class cache's files (`src/class_cache.rs`): a
//! class rewritten by one build of the rewriter is never served to another.
//!
//! `-source 11 -target 11`: the class file (version 55) loads on every JDK the agent supports.
//! The runtime class is compiled twice, the second time with `jdk.internal.misc.Unsafe` in place
//! of `sun.misc.Unsafe` (see Runtime.java, and `runtime::define_runtime_class`).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

fn javac() -> PathBuf {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let p = Path::new(&home).join("bin/javac");
        if p.exists() {
            return p;
        }
    }
    let debian = Path::new("/usr/lib/jvm/java-17-openjdk-amd64/bin/javac");
    if debian.exists() {
        return debian.to_path_buf();
    }
    PathBuf::from("javac")
}

/// Every file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// A hash of the agent's Rust and Java sources (SipHash with fixed keys: the same sources give
/// the same hash on every machine).
fn source_hash() -> u64 {
    let mut paths = Vec::new();
    files(Path::new("src"), &mut paths);
    files(Path::new("java"), &mut paths);
    paths.sort();
    #[allow(deprecated)] // SipHasher: fixed keys, unlike DefaultHasher's documented instability
    let mut h = std::hash::SipHasher::new();
    for p in paths {
        p.hash(&mut h);
        std::fs::read(&p).unwrap_or_default().hash(&mut h);
    }
    h.finish()
}

/// Compiles `sources` into `classes` (emptied first).
fn compile(javac: &Path, sources: &[&Path], classes: &Path) {
    let _ = std::fs::remove_dir_all(classes);
    std::fs::create_dir_all(classes).expect("create a class directory in OUT_DIR");
    let result = Command::new(javac)
        // Not --release, which forbids --add-exports: Runtime uses @DontInline, which HotSpot
        // honours in classes of the boot loader, where the agent defines it, and its second form
        // jdk.internal.misc.Unsafe, whose package the agent exports to it at run time.
        .args(["-source", "11", "-target", "11", "-Xlint:-options", "-nowarn", "-XDsuppressNotes", "-g:none"])
        .args(["--add-exports", "java.base/jdk.internal.vm.annotation=ALL-UNNAMED"])
        .args(["--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED", "-d"])
        .arg(classes)
        .args(sources)
        .output();
    match result {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "{} failed on {:?}:\n{}{}",
            javac.display(),
            sources,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("cannot run {} (set JAVA_HOME to a JDK >= 11): {e}", javac.display()),
    }
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rustc-env=LUCCE_AGENT_SOURCE_HASH={:016x}", source_hash());
    let runtime = Path::new("java/lucce/Runtime.java");
    let sources = [runtime, Path::new("java/lucce/Lucce.java")];
    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
    }
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let javac = javac();
    let classes = out.join("java-classes");
    compile(&javac, &sources, &classes);
    for name in ["Runtime", "Lucce"] {
        let class = classes.join(format!("lucce/{name}.class"));
        assert!(class.exists(), "javac produced no {}", class.display());
    }
    // The runtime class's second form (see its comment): jdk.internal.misc.Unsafe throughout.
    let text = std::fs::read_to_string(runtime).expect("read Runtime.java");
    let internal_src = out.join("runtime-internal/lucce/Runtime.java");
    std::fs::create_dir_all(internal_src.parent().unwrap()).expect("create OUT_DIR/runtime-internal");
    std::fs::write(&internal_src, text.replace("sun.misc.Unsafe", "jdk.internal.misc.Unsafe")).expect("write the second form");
    let internal = out.join("java-classes-internal");
    compile(&javac, &[internal_src.as_path()], &internal);
    assert!(internal.join("lucce/Runtime.class").exists(), "javac produced no second form of Runtime");
}
