//! `lucce demo`: the main job on the bundled Java example (examples/java/demo/Shop.java): compile
//! it with javac against the API stub, run it on a real JVM with the agent recording, then
//! decode the store and check every event against the stack the JVM itself showed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};

const SHOP: &str = include_str!("../examples/java/demo/Shop.java");
const STUB: &str = include_str!("../examples/java/stub/lucce/Lucce.java");

/// A JDK tool: $JAVA_HOME/bin, Debian's OpenJDK 17, else the PATH.
pub fn jdk_tool(name: &str) -> PathBuf {
    let homes = std::env::var_os("JAVA_HOME").map(PathBuf::from).into_iter().chain([PathBuf::from("/usr/lib/jvm/java-17-openjdk-amd64")]);
    for h in homes {
        let p = h.join("bin").join(name);
        if p.exists() {
            return p;
        }
    }
    PathBuf::from(name)
}

fn run(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let out = cmd.output().with_context(|| format!("cannot run {what} (is a JDK installed? `bash scripts/install-deps.sh`)"))?;
    if !out.status.success() {
        bail!("{what} failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// The agent library; under `cargo run` it is built first when missing (cargo builds only the
/// binary for `cargo run`).
fn agent_library() -> anyhow::Result<PathBuf> {
    if let Ok(p) = crate::record::find_agent(None) {
        return Ok(p);
    }
    let Some(cargo) = std::env::var_os("CARGO") else { return crate::record::find_agent(None) };
    say!("building the agent library (cargo build --release -p lucce-agent) ...");
    let exe = std::env::current_exe()?;
    let target = exe.parent().and_then(Path::parent).context("target directory")?;
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "lucce-agent", "--lib"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()?;
    if !status.success() {
        bail!("building the agent failed");
    }
    crate::record::find_agent(None)
}

/// Compiles and records the example into `dir` (which must not exist); returns the store path.
pub fn record_example(dir: &Path) -> anyhow::Result<PathBuf> {
    if dir.exists() {
        bail!("{} already exists; give another --out", dir.display());
    }
    let agent = agent_library()?;
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("demo"))?;
    std::fs::create_dir_all(src.join("lucce"))?;
    std::fs::write(src.join("demo/Shop.java"), SHOP)?;
    std::fs::write(src.join("lucce/Lucce.java"), STUB)?;
    let (stub, classes, store) = (dir.join("stub"), dir.join("classes"), dir.join("store"));
    run(Command::new(jdk_tool("javac")).arg("-d").arg(&stub).arg(src.join("lucce/Lucce.java")), "javac (API stub)")?;
    run(Command::new(jdk_tool("javac")).arg("-cp").arg(&stub).arg("-d").arg(&classes).arg(src.join("demo/Shop.java")), "javac (example)")?;
    // The example parses an expression 3,000 parentheses deep: more stack than the default.
    let agent_opt = format!("-agentpath:{}=out={},verify=1,summary=off", agent.display(), store.display());
    // What runs, as the user can run it again.
    println!("$ java -Xss64m {agent_opt} -cp {} demo.Shop", classes.display());
    let status = Command::new(jdk_tool("java"))
        .arg("-Xss64m")
        .arg(&agent_opt)
        .arg("-cp")
        .arg(&classes)
        .arg("demo.Shop")
        .status()
        .context("cannot run java")?;
    if !status.success() {
        bail!("the example exited with {status}");
    }
    Ok(store)
}
