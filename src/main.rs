//! The `lucce` command line: thin wrappers over the libraries.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use lucce::demo::{self, DemoOptions};
use lucce::open::open_store;
use lucce::render::{DecodedEvent, JavaText, JsonLines, Named, Outputter};
use lucce::say;
use lucce::verify::verify_store;
use lucce_decoder::ContextDecoder;

#[derive(Parser)]
#[command(name = "lucce", version, about = "Exact calling contexts for the JVM: record, decode, aggregate")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The main job on the bundled Java example: compile it, record it on a real JVM with the
    /// agent, check every event against the JVM's own stack trace, show the traces.
    Demo {
        /// Where to put the example, its classes and the store (default: a new temp directory).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Instead, record the synthetic multi-threaded program (no JVM needed).
        #[arg(long)]
        synthetic: bool,
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Events to record, over all threads (--synthetic).
        #[arg(long, default_value_t = 200_000)]
        events: u64,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Depth of the deep recursion (two recursive call sites) thread 0 records first (--synthetic).
        #[arg(long, default_value_t = 10_000)]
        recursion_depth: usize,
        /// Traces to print at the end (--synthetic).
        #[arg(long, default_value_t = 3)]
        show: usize,
        /// Keep the true stack with every Nth event (--synthetic; 1 = all).
        #[arg(long, default_value_t = 10)]
        verify_every: u64,
    },
    /// Print every event of a store as a Java-style stack trace (or JSON lines).
    Events {
        store: PathBuf,
        /// One JSON object per line; frames like Throwable.getStackTrace().
        #[arg(long)]
        json: bool,
        /// Stop after this many events.
        #[arg(long)]
        limit: Option<u64>,
        /// Frames to print per event in text form.
        #[arg(long, default_value_t = 1024)]
        max_frames: usize,
    },
    /// Decode events by sequence number, `Lucce.context()` tokens written @TOKEN, or raw contexts
    /// written SITE:CALLID:VERSION.
    Decode {
        store: PathBuf,
        #[arg(required = true)]
        ids: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Run a Java command line (wrapper scripts too) with the agent recording; tells where the
    /// store is. The agent reaches every JVM through JAVA_TOOL_OPTIONS.
    Record(lucce::record::RecordArgs),
    /// Sizes of a store: methods, sites, edges, versions, events, bytes on disk.
    Stats { store: PathBuf },
    /// Compare every event that carries the stack its runtime saw with its decoded trace.
    Verify {
        store: PathBuf,
        /// Mismatches to print in full.
        #[arg(long, default_value_t = 10)]
        show: usize,
    },
    /// Build the calling context tree of a store's events (in parallel) and print it indented.
    Cct(lucce::cct_cli::CctArgs),
    /// Write a flame graph of a store's events: interactive SVG, collapsed stacks or speedscope JSON.
    Flame(lucce::cct_cli::FlameArgs),
    /// Compare two stores' calling context trees: degree of overlap and hot-edge coverage.
    Diff(lucce::cct_cli::DiffArgs),
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            say!("lucce: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Cmd::Demo { out, synthetic, threads, events, seed, recursion_depth, show, verify_every } => {
            let out = out.unwrap_or_else(|| std::env::temp_dir().join(format!("lucce-demo-{}-{}", std::process::id(), unix_time())));
            if synthetic {
                let opts = DemoOptions { out, threads, events, seed, recursion_depth, verify_every, ..DemoOptions::default() };
                cmd_demo(&opts, show)
            } else {
                cmd_java_demo(&out)
            }
        }
        Cmd::Events { store, json, limit, max_frames } => cmd_events(&store, json, limit, max_frames),
        Cmd::Decode { store, ids, json } => cmd_decode(&store, &ids, json),
        Cmd::Record(a) => lucce::record::run(&a),
        Cmd::Stats { store } => cmd_stats(&store),
        Cmd::Verify { store, show } => cmd_verify(&store, show),
        Cmd::Cct(a) => lucce::cct_cli::run_cct(&a),
        Cmd::Flame(a) => lucce::cct_cli::run_flame(&a),
        Cmd::Diff(a) => lucce::cct_cli::run_diff(&a),
    }
}

fn unix_time() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Progress of a pass over a store's events, on stderr: a bar on a terminal; otherwise a line
/// every 10 s, so that a log (or `lucce verify STORE 2>log`) shows that long work goes on.
enum Progress {
    Bar(ProgressBar),
    Lines { what: &'static str, len: u64, done: u64, last: Instant },
}

impl Progress {
    const EVERY: Duration = Duration::from_secs(10);

    fn new(len: u64, what: &'static str) -> Progress {
        if !io::stderr().is_terminal() {
            return Progress::Lines { what, len, done: 0, last: Instant::now() };
        }
        let pb = ProgressBar::new(len);
        pb.set_style(ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})").expect("valid template"));
        pb.set_message(what);
        Progress::Bar(pb)
    }

    fn inc(&mut self) {
        match self {
            Progress::Bar(pb) => pb.inc(1),
            Progress::Lines { what, len, done, last } => {
                *done += 1;
                // The clock is read once per 4096 events.
                if *done % 4096 == 0 && last.elapsed() >= Self::EVERY {
                    say!("lucce: {what}: {done} of {len} events ({:.0}%)", *done as f64 * 100.0 / (*len).max(1) as f64);
                    *last = Instant::now();
                }
            }
        }
    }

    fn finish(self) {
        if let Progress::Bar(pb) = self {
            pb.finish_and_clear();
        }
    }
}

fn cmd_demo(opts: &DemoOptions, show: usize) -> anyhow::Result<ExitCode> {
    println!(
        "recording a synthetic program: {} threads, {} events, {} methods discovered as they are first called, a {}-deep recursion through two call sites",
        opts.threads, opts.events, opts.methods, opts.recursion_depth
    );
    let rep = demo::record(opts)?;
    println!(
        "recorded in {:.2?}: {} method entries, {} methods, {} edges, {} graph versions ({} anchors), {} events",
        rep.elapsed, rep.method_entries, rep.encoder.methods, rep.encoder.edges, rep.encoder.version, rep.encoder.anchors, rep.writer.events
    );
    println!("store: {} ({} bytes on disk)", opts.out.display(), rep.writer.bytes_on_disk);
    let o = open_store(&opts.out)?;
    let mut progress = Progress::new(o.store.commit().events, "decoding");
    let start = Instant::now();
    let report = verify_store(&o.store, &o.graph, |_| progress.inc())?;
    progress.finish();
    println!(
        "decoded all {} events in {:.2?}; {} carry their true stack: {} exact, {} wrong",
        report.events,
        start.elapsed(),
        report.checked,
        report.checked - report.mismatches.iter().filter(|m| m.expected.is_some()).count() as u64,
        report.mismatches.len()
    );
    // A few traces: the deep recursion (the labelled event), then some spread over the run.
    let mut dec = ContextDecoder::new(&o.graph);
    let n = o.store.commit().events;
    let mut picks: Vec<u64> = o.store.events().filter_map(|r| r.ok()).find(|(_, e)| e.label.is_some()).map(|(s, _)| s).into_iter().collect();
    picks.extend((1..show as u64).map(|k| k * n / show.max(1) as u64));
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for seq in picks.into_iter().take(show) {
        if let Some(item) = o.store.events_range(seq..seq + 1).next() {
            let (seq, ev) = item?;
            let ctx = dec.decode(ev.site, ev.c, ev.v)?;
            writeln!(out)?;
            let thread = o.thread_name(ev.thread);
            JavaText { max_frames: 8 }.event(&mut out, &dec, &DecodedEvent { seq, event: &ev, thread: &thread, ctx })?;
        }
    }
    writeln!(out, "\nmore: lucce events {0} | less   ·   lucce stats {0}   ·   lucce verify {0}", opts.out.display())?;
    Ok(if report.mismatches.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn cmd_java_demo(dir: &Path) -> anyhow::Result<ExitCode> {
    let store = lucce::java_demo::record_example(dir)?;
    let o = open_store(&store)?;
    let report = verify_store(&o.store, &o.graph, |_| {})?;
    println!(
        "\nrecorded {} events on {} threads; each also kept the JVM's own stack trace: {} exact, {} wrong",
        report.events,
        o.store.threads()?.len(),
        report.checked - report.mismatches.iter().filter(|m| m.expected.is_some()).count() as u64,
        report.mismatches.len()
    );
    let mut dec = ContextDecoder::new(&o.graph);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for item in o.store.events() {
        let (seq, ev) = item?;
        let ctx = dec.decode(ev.site, ev.c, ev.v)?;
        writeln!(out)?;
        let thread = o.thread_name(ev.thread);
        JavaText { max_frames: 8 }.event(&mut out, &dec, &DecodedEvent { seq, event: &ev, thread: &thread, ctx })?;
    }
    if let Some((site, c, v)) = o.store.token(1)? {
        // The first token the example took (Lucce.context() in Order.created), as `lucce decode
        // STORE @1` prints it.
        let ctx = dec.decode(site, c, v)?;
        writeln!(out)?;
        JavaText { max_frames: 8 }.named(&mut out, &dec, Named::Token(1), ctx)?;
    }
    writeln!(out, "\nstore: {0}\nmore: lucce events {0} --json · lucce decode {0} @2 · lucce cct {0} · lucce verify {0}", store.display())?;
    Ok(if report.mismatches.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn cmd_events(path: &Path, json: bool, limit: Option<u64>, max_frames: usize) -> anyhow::Result<ExitCode> {
    let o = open_store(path)?;
    if o.store.commit().events == 0 {
        // Not an error (the graph is still there for `lucce decode`), but an empty output alone
        // would leave the user guessing.
        say!(
            "lucce: note: {} has no events: the program made no lucce.Lucce.mark call and no method entry was sampled (with the agent option sample=N, every Nth entry of a thread is an event)",
            path.display()
        );
    }
    let mut dec = ContextDecoder::new(&o.graph);
    let mut fmt: Box<dyn Outputter> = if json { Box::new(JsonLines) } else { Box::new(JavaText { max_frames }) };
    let end = limit.unwrap_or(u64::MAX);
    let mut progress = Progress::new(o.store.commit().events.min(end), "decoding");
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    for item in o.store.events_range(0..end) {
        let (seq, ev) = item?;
        let ctx = dec.decode(ev.site, ev.c, ev.v).with_context(|| format!("event #{seq}"))?;
        let thread = o.thread_name(ev.thread);
        if let Err(e) = fmt.event(&mut out, &dec, &DecodedEvent { seq, event: &ev, thread: &thread, ctx }) {
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(e.into());
        }
        progress.inc();
    }
    progress.finish();
    out.flush().or_else(|e| if e.kind() == io::ErrorKind::BrokenPipe { Ok(()) } else { Err(e) })?;
    Ok(ExitCode::SUCCESS)
}

/// What an id given to `lucce decode` names: a recorded event, or a context that is none.
enum Decodable {
    Event(u64, lucce_log_format::EventRecord),
    Named(Named),
}

fn cmd_decode(path: &Path, ids: &[String], json: bool) -> anyhow::Result<ExitCode> {
    let o = open_store(path)?;
    let mut dec = ContextDecoder::new(&o.graph);
    let mut fmt: Box<dyn Outputter> = if json { Box::new(JsonLines) } else { Box::new(JavaText { max_frames: usize::MAX }) };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for id in ids {
        let parts: Vec<&str> = id.split(':').collect();
        // What the id names, and the context ⟨site, callId, version⟩ it stands for.
        let (what, (site, c, v)) = match parts.as_slice() {
            [token] if token.starts_with('@') => {
                let t: u64 = token[1..].parse().with_context(|| format!("{id:?}: a token is @ and a number"))?;
                let at = o.store.token(t)?.with_context(|| {
                    format!("no token {t} in {} (tokens are valid only for the store of the run that made them)", path.display())
                })?;
                (Decodable::Named(Named::Token(t)), at)
            }
            [seq] => {
                let seq: u64 = seq.parse().with_context(|| format!("{id:?} is neither an event number, @TOKEN nor SITE:CALLID:VERSION"))?;
                let (seq, ev) = match o.store.events_range(seq..seq + 1).next() {
                    Some(item) => item?,
                    None => bail!("no event #{seq} in {} (it has {})", path.display(), o.store.commit().events),
                };
                let at = (ev.site, ev.c, ev.v);
                (Decodable::Event(seq, ev), at)
            }
            [site, c, v] => {
                let num = |s: &str| s.parse::<u64>().with_context(|| format!("{id:?}: {s:?} is not a number"));
                let (site, call_id, version) = (u32::try_from(num(site)?).map_err(|_| anyhow::anyhow!("{id:?}: site id {site} is too large (site ids are 32-bit)"))?, num(c)?, num(v)?);
                (Decodable::Named(Named::Raw { site, call_id, version }), (site, call_id, version))
            }
            _ => bail!("{id:?} is neither an event number, @TOKEN nor SITE:CALLID:VERSION"),
        };
        let ctx = dec.decode(site, c, v).with_context(|| format!("{id} does not decode in {}", path.display()))?;
        match what {
            Decodable::Event(seq, ev) => {
                let thread = o.thread_name(ev.thread);
                fmt.event(&mut out, &dec, &DecodedEvent { seq, event: &ev, thread: &thread, ctx })?
            }
            Decodable::Named(named) => fmt.named(&mut out, &dec, named, ctx)?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_stats(path: &Path) -> anyhow::Result<ExitCode> {
    let o = open_store(path)?;
    let g = o.graph.stats();
    let c = o.store.commit();
    let bytes = o.store.bytes_on_disk()?;
    let per = |n: u64| if n == 0 { 0.0 } else { bytes as f64 / n as f64 };
    println!("store            {}", path.display());
    println!("closed cleanly   {}", if c.clean { "yes" } else { "no (killed or crashed, a write failed, or files damaged after; the committed part is complete)" });
    println!("methods          {}", g.methods);
    println!("sites            {}", g.sites);
    println!("edges            {}", g.edges);
    println!("graph versions   {}", g.versions);
    println!("anchors          {}", g.anchors);
    println!("threads          {}", o.threads.len());
    println!("events           {}", c.events);
    println!("bytes on disk    {bytes}");
    println!("bytes/record     {:.1} (graph events + events)", per(g.versions + c.events));
    Ok(ExitCode::SUCCESS)
}

fn cmd_verify(path: &Path, show: usize) -> anyhow::Result<ExitCode> {
    let o = open_store(path)?;
    let mut progress = Progress::new(o.store.commit().events, "verifying");
    let report = verify_store(&o.store, &o.graph, |_| progress.inc())?;
    progress.finish();
    for m in report.mismatches.iter().take(show) {
        println!("MISMATCH event #{}", m.seq);
        println!("  expected (runtime):");
        for f in m.expected.iter().flatten() {
            println!("\tat {}.{}({}:{})", f.class, f.method, f.file.as_deref().unwrap_or("Unknown Source"), f.line);
        }
        match &m.decoded {
            Ok(frames) => {
                println!("  decoded:");
                for f in frames {
                    println!("\tat {}.{}({}:{})", f.class, f.method, f.file.as_deref().unwrap_or("Unknown Source"), f.line);
                }
            }
            Err(e) => println!("  decoded: error: {e}"),
        }
    }
    println!(
        "{} events, {} verified ({} truncated at the bottom, compared as the top of the JVM's stack), {} mismatches or undecodable",
        report.events,
        report.checked,
        report.truncated,
        report.mismatches.len()
    );
    if report.checked == 0 {
        say!("lucce: note: no event in {} carries a runtime stack (record with verify=N)", path.display());
    }
    Ok(if report.mismatches.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
