//! Crash rule and bad input: a writer killed with SIGKILL mid-stream leaves a store whose flushed
//! part reads back and decodes; damaged, foreign or wrong-version stores give one clear error.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use lucce::synth::{random_op, Runtime, SimThread, SynthProgram};
use lucce_encoder::{Encoder, EncoderConfig};
use lucce_log_format::{wait_until_released, StoreReader, StoreWriter, WriterOptions};
use rand::{rngs::SmallRng, SeedableRng};

const CHILD_ENV: &str = "LUCCE_TEST_CRASH_CHILD";

/// In the child process: records forever, printing how many events each flush made durable.
#[test]
fn crash_child_writer() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let prog = SynthProgram::generate(&mut SmallRng::seed_from_u64(3), 80);
    let writer = StoreWriter::create(Path::new(&dir), WriterOptions { block_records: 100, ..Default::default() }).unwrap();
    let enc = Encoder::new(EncoderConfig::default(), writer.handle());
    let rt = Runtime::new(&prog, &enc);
    let mut rng = SmallRng::seed_from_u64(5);
    let mut t = SimThread::start(&rt, writer.handle().thread("main"), 0, 100).unwrap();
    let mut events = 0u64;
    loop {
        if let Some(ev) = t.step(&rt, random_op(&mut rng, t.depth(), 30)).unwrap() {
            writer.handle().event(ev);
            events += 1;
            if events.is_multiple_of(1000) {
                writer.flush().unwrap();
                println!("flushed {events}");
            }
        }
    }
}

#[test]
fn sigkill_mid_stream_keeps_everything_flushed_and_reports_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child_writer", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &store)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut flushed = 0u64;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        if let Some(n) = line.unwrap().strip_prefix("flushed ") {
            flushed = n.parse().unwrap();
            if flushed >= 20_000 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL: no destructor, no final commit
    child.wait().unwrap();
    assert!(flushed >= 20_000);

    let reader = StoreReader::open(&store).expect("a killed writer's store opens");
    let commit = reader.commit();
    assert!(!commit.clean, "the store must say it was not closed");
    assert!(commit.events >= flushed, "everything flushed before the kill is committed ({} < {flushed})", commit.events);
    drop(reader);
    common::assert_all_exact(&store, common::decode_all(&store).len());
}

fn lucce(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lucce")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn small_store(dir: &Path) {
    let (code, _, err) = lucce(&["demo", "--synthetic", "--out", dir.to_str().unwrap(), "--events", "2000", "--threads", "2", "--recursion-depth", "200", "--show", "0"]);
    assert_eq!(code, 0, "{err}");
}

fn assert_clean_error(args: &[&str], needle: &str) {
    let (code, _, err) = lucce(args);
    assert_eq!(code, 2, "expected an error for {args:?}, got: {err}");
    assert!(!err.contains("panicked"), "no panics: {err}");
    assert!(err.to_lowercase().contains(needle), "{args:?}: error should mention {needle:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn bad_inputs_get_one_clear_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    assert_clean_error(&["stats", &p("missing")], "no such store");
    // `lucce record`'s own arguments, checked before anything runs or is made.
    assert_clean_error(&["record", "--agent-opts", "sample=10,out=x", "--", "true"], "--out dir");
    assert_clean_error(&["record", "--out", &p("a b"), "--", "true"], "cannot carry");
    assert!(!Path::new(&p("a b")).exists(), "a refused --out was made");
    std::fs::write(p("file"), b"hello").unwrap();
    assert_clean_error(&["events", &p("file")], "not a lucce store");
    std::fs::create_dir(p("empty")).unwrap();
    assert_clean_error(&["stats", &p("empty")], "empty directory");
    std::fs::create_dir(p("other")).unwrap();
    std::fs::write(p("other/notes.txt"), b"x").unwrap();
    assert_clean_error(&["stats", &p("other")], "not a lucce store");

    small_store(Path::new(&p("s")));
    // The folder `lucce record --out` fills with one store per JVM: the error names the stores.
    let parent = dir.path().to_str().unwrap();
    assert_clean_error(&["stats", parent], "holds the stores of 1 jvm run(s), one per process");
    assert_clean_error(&["stats", parent], &p("s").to_lowercase());
    assert_clean_error(&["decode", &p("s"), "999999"], "no event #999999");
    assert_clean_error(&["decode", &p("s"), "5:0:1"], "does not decode");
    assert_clean_error(&["decode", &p("s"), "123456:0:1"], "unknown site");
    assert_clean_error(&["decode", &p("s"), "abc"], "neither an event number");
    assert_clean_error(&["decode", &p("s"), "4294967296:0:0"], "site id 4294967296 is too large");
    assert_clean_error(&["cct", &p("s"), "--min-percent", "nan"], "between 0 and 100");
    let (code, out, _) = lucce(&["decode", &p("s"), "0", "--json"]);
    assert_eq!(code, 0);
    assert!(out.contains("\"frames\":[{"), "{out}");
    assert_clean_error(&["demo", "--synthetic", "--out", &p("s")], "already exists");

    // Another format version; while it is written, the store is in use.
    {
        let db = sled::Config::new().path(p("s")).open().unwrap();
        assert_clean_error(&["events", &p("s")], "in use by another process");
        db.open_tree("header").unwrap().insert("format", &99u32.to_be_bytes()).unwrap();
        db.flush().unwrap();
    }
    // sled's threads hold the lock a moment past the drop (one CI run found the store in use).
    wait_until_released(Path::new(&p("s")));
    assert_clean_error(&["stats", &p("s")], "format version 99");
}

/// sled writes to a store's files as it opens them: a store this user may not write (one that
/// another user recorded, or on a read-only or full disk) is read from a temporary copy, with a
/// note, and reads exactly as it would in place. As root (CI), lucce runs as `nobody` through
/// setpriv; otherwise the store is made read-only.
#[test]
fn a_store_it_may_not_write_is_read_from_a_copy() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    small_store(&store);
    let s = store.to_str().unwrap();
    let (code, reference, err) = lucce(&["events", s, "--json"]);
    assert_eq!(code, 0, "{err}");
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let out = if root {
        // nobody must reach the binary and the store: both in a directory anyone may enter.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.path().join("lucce");
        std::fs::copy(env!("CARGO_BIN_EXE_lucce"), &bin).unwrap();
        Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&bin).args(["events", s, "--json"]).output()
    } else {
        for f in ["db", "conf"] {
            std::fs::set_permissions(store.join(f), std::fs::Permissions::from_mode(0o444)).unwrap();
        }
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o555)).unwrap();
        Command::new(env!("CARGO_BIN_EXE_lucce")).args(["events", s, "--json"]).output()
    }
    .expect("running lucce (as root: setpriv, from util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("cannot be opened where it is (opening the database: permission denied): reading a copy in"), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), reference);
    if !root {
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn a_commit_mark_past_the_stream_is_refused_before_anything_is_sized_by_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    small_store(&store);
    // The commit mark (methods, sites, graph, events: u64 each, then the clean flag) damaged to
    // count 2^50 events: the CCT builder used to allocate one slot per 2^16 of them up front.
    {
        let db = sled::Config::new().path(&store).open().unwrap();
        let header = db.open_tree("header").unwrap();
        let mut mark = header.get("commit").unwrap().unwrap().to_vec();
        mark[24..32].copy_from_slice(&(1u64 << 50).to_le_bytes());
        header.insert("commit", mark).unwrap();
        db.flush().unwrap();
    }
    wait_until_released(&store);
    let s = store.to_str().unwrap();
    for cmd in ["cct", "flame", "stats", "events"] {
        assert_clean_error(&[cmd, s], &format!("event {} is not in the store", (1u64 << 50) - 1));
    }
}

#[test]
fn damaged_database_files_never_panic_or_misdecode() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean");
    small_store(&clean);
    let (_, reference, _) = lucce(&["events", clean.to_str().unwrap(), "--json"]);
    let db_len = std::fs::metadata(clean.join("db")).unwrap().len();
    for (i, how) in ["truncate-half", "truncate-tail", "flip-middle", "flip-quarter", "zero-head"].iter().enumerate() {
        let d = dir.path().join(format!("d{i}"));
        std::fs::create_dir(&d).unwrap();
        for f in std::fs::read_dir(&clean).unwrap() {
            let f = f.unwrap();
            if f.file_type().unwrap().is_file() {
                std::fs::copy(f.path(), d.join(f.file_name())).unwrap();
            }
        }
        let mut bytes = std::fs::read(d.join("db")).unwrap();
        let len = bytes.len();
        match *how {
            "truncate-half" => bytes.truncate(len / 2),
            "truncate-tail" => bytes.truncate(len - 100),
            "flip-middle" => (0..64).for_each(|k| bytes[(db_len as usize / 2 + k * 31) % len] ^= 0x5a),
            "flip-quarter" => (0..64).for_each(|k| bytes[(db_len as usize / 4 + k * 97) % len] ^= 0xff),
            _ => bytes[..4096.min(len)].fill(0),
        }
        std::fs::write(d.join("db"), bytes).unwrap();
        let (code, out, err) = lucce(&["events", d.to_str().unwrap(), "--json"]);
        assert!(!err.contains("panicked"), "{how}: {err}");
        match code {
            2 => assert_eq!(err.trim().lines().count(), 1, "{how}: one line: {err}"),
            // sled recovered: whatever is printed must be a prefix of the true output.
            0 => assert!(reference.starts_with(&out), "{how}: output is not a prefix of the undamaged store's"),
            c => panic!("{how}: exit {c}: {err}"),
        }
    }
}
