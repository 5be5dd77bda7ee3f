//! `lucce cct`, `lucce flame` and `lucce diff`: build a store's calling context tree in parallel
//! and show it as a text tree, a flame graph (SVG, collapsed stacks, speedscope JSON), or
//! compare two stores' trees.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use lucce_decoder::cct::KindSet;
use lucce_decoder::{build_cct, Cct, CctOptions, PacketOrder};
use lucce_log_format::EventKind;
use regex::Regex;

use crate::open::{open_store, OpenedStore};
use crate::outputs::collapsed::write_collapsed;
use crate::outputs::diff::{compare, label_trees};
use crate::outputs::speedscope::write_speedscope;
use crate::outputs::svg::{write_svg, SvgOptions};
use crate::outputs::text::{write_text, TextOptions};
use crate::outputs::{filter, Labeler};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    Mark,
    /// Sampled method entries; with the agent's `sample=1` every entry, so counts are
    /// invocation counts (calls mode).
    Sample,
    Alloc,
}

impl From<KindArg> for EventKind {
    fn from(k: KindArg) -> EventKind {
        match k {
            KindArg::Mark => EventKind::Mark,
            KindArg::Sample => EventKind::Sample,
            KindArg::Alloc => EventKind::Alloc,
        }
    }
}

/// How the tree is built: shared by the three commands.
#[derive(Debug, Clone, Args)]
pub struct BuildArgs {
    /// Event kinds to count (repeat or comma-separate; default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub kind: Vec<KindArg>,
    /// Distinguish frames by line (call site) instead of merging them per method.
    #[arg(long)]
    pub lines: bool,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Events per packet handed to a worker.
    #[arg(long, default_value_t = 1 << 16)]
    pub packet: u64,
}

/// Frame filters, shared by `cct` and `flame`.
#[derive(Debug, Clone, Args)]
pub struct FilterArgs {
    /// Keep only events with a frame matching this regex (repeatable: any of them).
    #[arg(long)]
    pub include: Vec<String>,
    /// Drop events with a frame matching this regex (repeatable).
    #[arg(long)]
    pub exclude: Vec<String>,
    /// Callers view: the frames events happened in at the top, their callers below.
    #[arg(long)]
    pub reverse: bool,
    /// One root per thread under the global root.
    #[arg(long)]
    pub threads: bool,
}

#[derive(Debug, Clone, Args)]
pub struct CctArgs {
    pub store: PathBuf,
    #[command(flatten)]
    pub build: BuildArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Hide contexts below this share of all events.
    #[arg(long, default_value_t = 0.0)]
    pub min_percent: f64,
    /// Levels to print below the root.
    #[arg(long)]
    pub depth: Option<u32>,
    /// Print only the tree's size (events, contexts, deepest context, threads, build time): the
    /// columns of ParCCT's Table 2.
    #[arg(long)]
    pub summary: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlameFormat {
    /// Interactive SVG (zoom, search).
    Svg,
    /// `frame;frame;frame count`, root first.
    Collapsed,
    /// speedscope.app JSON.
    Speedscope,
}

#[derive(Debug, Clone, Args)]
pub struct FlameArgs {
    pub store: PathBuf,
    /// Output file ("-" or absent: standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = FlameFormat::Svg)]
    pub format: FlameFormat,
    #[command(flatten)]
    pub build: BuildArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// SVG: leave out frames narrower than this many pixels (0: every context gets a frame).
    #[arg(long, default_value_t = 0.1)]
    pub min_width: f64,
    /// SVG: title (default: the store's path).
    #[arg(long)]
    pub title: Option<String>,
    /// SVG: width in pixels.
    #[arg(long, default_value_t = 1200)]
    pub width: u32,
}

#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    pub a: PathBuf,
    pub b: PathBuf,
    #[command(flatten)]
    pub build: BuildArgs,
    /// Hot-edge threshold T: an edge is hot when its weight is at least T times the hottest.
    #[arg(long, default_value_t = 0.1)]
    pub threshold: f64,
}

/// Opens a store for tree building, refusing one without events.
fn load(path: &Path) -> anyhow::Result<OpenedStore> {
    let opened = open_store(path)?;
    if opened.store.commit().events == 0 {
        bail!("{}: the store has no events", path.display());
    }
    Ok(opened)
}

fn options(b: &BuildArgs, per_thread: bool) -> anyhow::Result<CctOptions> {
    if b.packet == 0 {
        bail!("--packet must be at least 1");
    }
    let mut o = CctOptions { lines: b.lines, per_thread, packet: b.packet, order: PacketOrder::InOrder, ..CctOptions::default() };
    if let Some(w) = b.workers {
        if w == 0 {
            bail!("--workers must be at least 1");
        }
        o.workers = w;
    }
    if !b.kind.is_empty() {
        o.kinds = KindSet::of(&b.kind.iter().map(|&k| k.into()).collect::<Vec<_>>());
    }
    Ok(o)
}

/// Builds the tree and refuses an empty one with a message saying why.
fn build(l: &OpenedStore, path: &Path, o: &CctOptions) -> anyhow::Result<Cct> {
    let cct = build_cct(&l.store, &l.graph, o)?;
    if cct.total(0).events == 0 {
        bail!("{}: none of its {} events is of kind {}", path.display(), l.store.commit().events, o.kinds.names().join(" or "));
    }
    Ok(cct)
}

fn regexes(patterns: &[String], what: &str) -> anyhow::Result<Vec<Regex>> {
    patterns
        .iter()
        .map(|p| {
            // regex's message draws a caret under the pattern over several lines; keep the last.
            Regex::new(p).map_err(|e| {
                let why = e.to_string();
                anyhow::anyhow!("--{what} {p:?} is not a regular expression ({})", why.lines().last().unwrap_or("").trim_start_matches("error: "))
            })
        })
        .collect()
}

/// Filters, then reverses if asked.
fn shape(cct: Cct, labeler: &Labeler<'_>, f: &FilterArgs) -> anyhow::Result<Cct> {
    let include = regexes(&f.include, "include")?;
    let exclude = regexes(&f.exclude, "exclude")?;
    let mut cct = filter(&cct, labeler, &include, &exclude)?;
    if cct.total(0).events == 0 {
        bail!("no event is left after --include/--exclude");
    }
    if f.reverse {
        cct = cct.reverse()?;
    }
    Ok(cct)
}

/// Treats a closed pipe (`| head`) as success.
fn finish_output(r: io::Result<()>) -> anyhow::Result<ExitCode> {
    match r {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
    }
}

pub fn run_cct(a: &CctArgs) -> anyhow::Result<ExitCode> {
    if !(0.0..=100.0).contains(&a.min_percent) {
        bail!("--min-percent must be between 0 and 100");
    }
    let l = load(&a.store)?;
    let o = options(&a.build, a.filter.threads)?;
    let labeler = Labeler { graph: &l.graph, threads: &l.threads, lines: o.lines };
    let started = std::time::Instant::now();
    let cct = shape(build(&l, &a.store, &o)?, &labeler, &a.filter)?;
    if a.summary {
        println!("events           {}", cct.total(0).events);
        println!("contexts (nodes) {}", cct.len() - 1);
        println!("max depth        {}", cct.max_depth());
        println!("threads          {}", l.threads.len());
        println!("build time       {:.2?}", started.elapsed());
        return Ok(ExitCode::SUCCESS);
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let r = write_text(&mut out, &cct, &labeler, &TextOptions { min_percent: a.min_percent, depth: a.depth }).and_then(|_| out.flush());
    finish_output(r)
}

pub fn run_flame(a: &FlameArgs) -> anyhow::Result<ExitCode> {
    let l = load(&a.store)?;
    let o = options(&a.build, a.filter.threads)?;
    let labeler = Labeler { graph: &l.graph, threads: &l.threads, lines: o.lines };
    let cct = shape(build(&l, &a.store, &o)?, &labeler, &a.filter)?;
    let mut out: Box<dyn Write> = match a.output.as_deref() {
        None => Box::new(BufWriter::new(io::stdout().lock())),
        Some(p) if p == Path::new("-") => Box::new(BufWriter::new(io::stdout().lock())),
        Some(p) => Box::new(BufWriter::new(File::create(p).with_context(|| format!("creating {}", p.display()))?)),
    };
    let name = a.title.clone().unwrap_or_else(|| a.store.display().to_string());
    let r = match a.format {
        FlameFormat::Svg => {
            // Sampled entries are calls only with sample=1, which the store does not record.
            let unit = if o.kinds == KindSet::of(&[EventKind::Sample]) { "samples" } else { "events" };
            write_svg(&mut out, &cct, &labeler, &SvgOptions { title: name, width: a.width.max(100), min_width: a.min_width.max(0.0), unit: unit.into() })
        }
        FlameFormat::Collapsed => write_collapsed(&mut out, &cct, &labeler),
        FlameFormat::Speedscope => write_speedscope(&mut out, &cct, &labeler, &name),
    };
    finish_output(r.and_then(|_| out.flush()))
}

pub fn run_diff(a: &DiffArgs) -> anyhow::Result<ExitCode> {
    if !(0.0..=1.0).contains(&a.threshold) {
        bail!("--threshold must be between 0 and 1");
    }
    let o = options(&a.build, false)?;
    let la = load(&a.a)?;
    let ca = build(&la, &a.a, &o)?;
    // A store is locked while open: comparing one with itself reuses it.
    let same = matches!((a.a.canonicalize(), a.b.canonicalize()), (Ok(x), Ok(y)) if x == y);
    let lb_own = if same { None } else { Some(load(&a.b)?) };
    let lb = lb_own.as_ref().unwrap_or(&la);
    let cb = if same { ca.clone() } else { build(lb, &a.b, &o)? };
    let (xa, xb) = (
        Labeler { graph: &la.graph, threads: &la.threads, lines: o.lines },
        Labeler { graph: &lb.graph, threads: &lb.threads, lines: o.lines },
    );
    let r = compare(&label_trees((&ca, &xa), (&cb, &xb))?, a.threshold);
    println!("degree of overlap          {:.2}%", r.overlap * 100.0);
    println!("hot-edge coverage (T={})   {:.2}% of A's hot edges are hot in B ({} of {})", a.threshold, r.hot_a_in_b * 100.0, r.hot_both, r.hot_a);
    println!("                           {:.2}% of B's hot edges are hot in A ({} of {})", r.hot_b_in_a * 100.0, r.hot_both, r.hot_b);
    println!("contexts with events       A {}, B {}, both {}", r.contexts_a, r.contexts_b, r.contexts_both);
    Ok(ExitCode::SUCCESS)
}
