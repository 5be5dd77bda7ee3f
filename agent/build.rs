//! Compiles the runtime class and the API class (agent/java/lucce/{Runtime,Lucce}.java) with javac into OUT_DIR; the library
//! embeds the class file with `include_bytes!`.
//!
//! `--release 11`: the oldest release whose API snapshot still has `sun.misc.Unsafe`
//! (jdk.unsupported); the class file (version 55) loads on every JDK the agent supports.

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

fn main() {
    let sources = [Path::new("java/lucce/Runtime.java"), Path::new("java/lucce/Lucce.java")];
    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
    }
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let classes = out.join("java-classes");
    let _ = std::fs::remove_dir_all(&classes);
    std::fs::create_dir_all(&classes).expect("create OUT_DIR/java-classes");
    let javac = javac();
    let result = Command::new(&javac)
        // Not --release, which forbids --add-exports: Runtime uses @DontInline, which HotSpot
        // honours in classes of the boot loader, where the agent defines it.
        .args(["-source", "11", "-target", "11", "-Xlint:-options", "-nowarn", "-XDsuppressNotes", "-g:none"])
        .args(["--add-exports", "java.base/jdk.internal.vm.annotation=ALL-UNNAMED", "-d"])
        .arg(&classes)
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
    for name in ["Runtime", "Lucce"] {
        let class = classes.join(format!("lucce/{name}.class"));
        assert!(class.exists(), "javac produced no {}", class.display());
    }
}
