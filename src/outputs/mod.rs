//! What people look at, made from a [`Cct`]: an indented text tree, collapsed stacks, speedscope
//! JSON, a flame graph SVG, and the comparison of two profiles. Each submodule is one format;
//! this module names frames and filters trees, which all formats share.

pub mod collapsed;
pub mod diff;
pub mod speedscope;
pub mod svg;
pub mod text;

use std::collections::HashMap;

use lucce_decoder::cct::{Key, KeyKind};
use lucce_decoder::{Cct, CctError, Graph};
use regex::Regex;

/// Names the nodes of a tree built from one store.
pub struct Labeler<'a> {
    pub graph: &'a Graph,
    pub threads: &'a HashMap<u32, String>,
    /// Keys are sites (frames with lines) rather than methods.
    pub lines: bool,
}

/// One frame's printable parts (speedscope keeps file and line apart).
pub struct FrameParts {
    pub name: String,
    pub file: Option<String>,
    pub line: Option<i32>,
}

impl Labeler<'_> {
    /// The full label: `pkg.Cls.m` per method, `pkg.Cls.m(File.java:42)` with lines,
    /// `[thread "name"]` for a thread root, `[truncated]` where the bottom is unknown.
    pub fn label(&self, key: Key) -> String {
        match key.kind() {
            KeyKind::Root => "all".into(),
            KeyKind::Thread(t) => match self.threads.get(&t) {
                Some(name) => format!("[thread {name}]"),
                None => format!("[thread #{t}]"),
            },
            KeyKind::Truncated => "[truncated]".into(),
            KeyKind::Frame(id) if self.lines => match self.graph.frame_info(id) {
                Some(f) => f.to_string(),
                None => format!("[site #{id}]"),
            },
            KeyKind::Frame(id) => match self.graph.method(id) {
                Some(m) => format!("{}.{}", m.class, m.name),
                None => format!("[method #{id}]"),
            },
        }
    }

    /// The short label of the compact notation: the method's name (`name:line` with lines).
    pub fn short(&self, key: Key) -> String {
        match key.kind() {
            KeyKind::Frame(id) if self.lines => match (self.graph.site(id), self.graph.frame_info(id)) {
                (Some(s), Some(f)) => format!("{}:{}", f.method, s.line),
                _ => format!("[site #{id}]"),
            },
            KeyKind::Frame(id) => self.graph.method(id).map_or_else(|| format!("[method #{id}]"), |m| m.name.clone()),
            _ => self.label(key),
        }
    }

    /// Name, file and line apart.
    pub fn parts(&self, key: Key) -> FrameParts {
        match key.kind() {
            KeyKind::Frame(id) if self.lines => match (self.graph.site(id), self.graph.method(self.graph.site(id).map_or(u32::MAX, |s| s.method))) {
                (Some(s), Some(m)) => FrameParts { name: format!("{}.{}", m.class, m.name), file: m.source_file.clone(), line: Some(s.line).filter(|&l| l >= 0) },
                _ => FrameParts { name: self.label(key), file: None, line: None },
            },
            KeyKind::Frame(id) => match self.graph.method(id) {
                Some(m) => FrameParts { name: format!("{}.{}", m.class, m.name), file: m.source_file.clone(), line: None },
                None => FrameParts { name: self.label(key), file: None, line: None },
            },
            _ => FrameParts { name: self.label(key), file: None, line: None },
        }
    }
}

/// `--include` / `--exclude`: keep the events whose context has a frame matching one of the
/// include patterns (all, when there are none) and no frame matching an exclude pattern.
pub fn filter(cct: &Cct, labeler: &Labeler<'_>, include: &[Regex], exclude: &[Regex]) -> Result<Cct, CctError> {
    if include.is_empty() && exclude.is_empty() {
        return Ok(cct.clone());
    }
    // Per node: does the path down to it hold an included / excluded frame? Labels are
    // matched once per distinct key.
    let mut memo: HashMap<Key, (bool, bool)> = HashMap::new();
    let n = cct.len();
    let mut inc = vec![false; n];
    let mut exc = vec![false; n];
    for i in 1..n as u32 {
        let node = cct.node(i);
        let (mi, me) = *memo.entry(node.key).or_insert_with(|| {
            let l = labeler.label(node.key);
            (include.iter().any(|r| r.is_match(&l)), exclude.iter().any(|r| r.is_match(&l)))
        });
        let p = node.parent as usize;
        inc[i as usize] = inc[p] || mi;
        exc[i as usize] = exc[p] || me;
    }
    cct.retain(|i| (include.is_empty() || inc[i as usize]) && !exc[i as usize])
}

/// Share of `part` in `whole`, in percent (0 when the whole is empty).
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}
