//! A synthetic multi-threaded program for exercising the encoder without a JVM: methods with
//! call sites, virtual call sites with several targets, recursion, methods discovered only when
//! first called, and simulated threads that call, return, throw and record events while keeping
//! the true stack, so every recorded event carries the answer its decoding must give.

use std::sync::OnceLock;

use lucce_encoder::{Context, EncodeError, Encoder, GraphSink, MethodId, MethodMeta, SiteId, SiteKind, SiteMeta};
use lucce_log_format::{EventKind, EventRecord, TruthFrame};
use rand::Rng;

/// A call site of a synthetic method; a virtual call when it has several targets.
#[derive(Debug, Clone)]
pub struct SynthSite {
    pub line: i32,
    pub targets: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct SynthMethod {
    pub class: String,
    pub name: String,
    pub file: String,
    pub sites: Vec<SynthSite>,
    /// Line of the place where events are recorded.
    pub mark_line: i32,
}

/// A program: methods and their call sites. Method 0 is every thread's entry point.
#[derive(Debug, Clone)]
pub struct SynthProgram {
    pub methods: Vec<SynthMethod>,
}

/// Index of the method with two recursive call sites (and one that leaves the recursion).
pub const RECURSIVE: usize = 1;

impl SynthProgram {
    /// A random program of `n` methods (at least 3): a layered graph with virtual calls, back
    /// edges (recursion) and a method that recurses through two call sites.
    pub fn generate(rng: &mut impl Rng, n: usize) -> SynthProgram {
        let n = n.max(3);
        let methods = (0..n)
            .map(|i| {
                let sites = match i {
                    // RECURSIVE is entered only by `deep_recursion`, through this site.
                    0 => vec![SynthSite { line: 10, targets: (2..n.min(6)).collect() }],
                    RECURSIVE => vec![
                        SynthSite { line: 20, targets: vec![RECURSIVE] },
                        SynthSite { line: 21, targets: vec![RECURSIVE] },
                        SynthSite { line: 22, targets: vec![rng.gen_range(2..n)] },
                    ],
                    // Mostly calls to later methods (a layered program), some back edges
                    // (recursion), the last method a leaf.
                    _ if i == n - 1 => Vec::new(),
                    _ => (0..if rng.gen_bool(0.1) { 0 } else { rng.gen_range(1..4) })
                        .map(|k| {
                            let ntargets = if rng.gen_bool(0.3) { rng.gen_range(2..4) } else { 1 };
                            let targets = (0..ntargets)
                                .map(|_| if rng.gen_bool(0.01) { rng.gen_range(i.saturating_sub(20).max(1)..=i) } else { (i + 1 + rng.gen_range(0..6)).min(n - 1) })
                                .collect();
                            SynthSite { line: 100 + 10 * k, targets }
                        })
                        .collect(),
                };
                let class = format!("demo.pkg{}.C{}", i % 7, i / 5);
                SynthMethod { file: format!("C{}.java", i / 5), class, name: format!("m{i}"), sites, mark_line: 5 }
            })
            .collect();
        SynthProgram { methods }
    }
}

impl SynthProgram {
    /// A program given by its shape: for each method, its call sites, each a list of target
    /// method indexes (taken modulo the method count). Method i is `t.T.m{i}`, site k is on line
    /// 10·(k+1), events on line 1. For property tests.
    pub fn from_shape(shape: &[Vec<Vec<usize>>]) -> SynthProgram {
        let n = shape.len().max(1);
        let methods = shape
            .iter()
            .enumerate()
            .map(|(i, sites)| SynthMethod {
                class: "t.T".into(),
                name: format!("m{i}"),
                file: "T.java".into(),
                sites: sites
                    .iter()
                    .enumerate()
                    .map(|(k, targets)| SynthSite { line: 10 * (k as i32 + 1), targets: targets.iter().map(|t| t % n).collect() })
                    .collect(),
                mark_line: 1,
            })
            .collect();
        SynthProgram { methods }
    }
}

/// Ids of a method once the encoder knows it.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub id: MethodId,
    pub calls: Vec<SiteId>,
    pub mark: SiteId,
}

/// Registers methods with the encoder the first time they are called, like class loading.
pub struct Runtime<'a, S: GraphSink> {
    pub program: &'a SynthProgram,
    pub encoder: &'a Encoder<S>,
    loaded: Vec<OnceLock<Loaded>>,
}

impl<'a, S: GraphSink> Runtime<'a, S> {
    pub fn new(program: &'a SynthProgram, encoder: &'a Encoder<S>) -> Self {
        Runtime { program, encoder, loaded: (0..program.methods.len()).map(|_| OnceLock::new()).collect() }
    }

    pub fn load(&self, m: usize) -> &Loaded {
        self.loaded[m].get_or_init(|| {
            let sm = &self.program.methods[m];
            let id = self.encoder.register_method(MethodMeta {
                class: sm.class.clone(),
                name: sm.name.clone(),
                descriptor: "()V".into(),
                source_file: Some(sm.file.clone()),
                access_flags: 0,
            });
            let site = |kind, line| {
                self.encoder.register_site(SiteMeta { method: id, kind, bci: 0, line }).expect("method was just registered")
            };
            let calls = sm.sites.iter().map(|s| site(SiteKind::Call, s.line)).collect();
            Loaded { id, calls, mark: site(SiteKind::Event, sm.mark_line) }
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct SimFrame {
    method: usize,
    ctx: Context,
    /// Index of the caller's call site this frame was entered through.
    via: usize,
}

/// One step of a simulated thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Call through site `site % n` of the current method, to target `target % n`.
    Call { site: u8, target: u8 },
    Return,
    /// Unwind this many frames (an exception caught further down).
    Throw(u8),
    /// Record an event in the current frame.
    Mark,
}

/// A simulated thread: the true stack and each frame's encoded context.
pub struct SimThread {
    pub id: u32,
    stack: Vec<SimFrame>,
    max_depth: usize,
}

impl SimThread {
    /// Starts a thread at method 0 (or `entry`), as its first frame.
    pub fn start<S: GraphSink>(rt: &Runtime<'_, S>, id: u32, entry: usize, max_depth: usize) -> Result<SimThread, EncodeError> {
        let ctx = rt.encoder.enter_thread(rt.load(entry).id)?;
        Ok(SimThread { id, stack: vec![SimFrame { method: entry, ctx, via: 0 }], max_depth })
    }

    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// Applies one op; a `Mark` returns the event, with the true stack attached.
    pub fn step<S: GraphSink>(&mut self, rt: &Runtime<'_, S>, op: Op) -> Result<Option<EventRecord>, EncodeError> {
        match op {
            Op::Call { site, target } => {
                let top = *self.stack.last().expect("a thread always has its first frame");
                let sites = &rt.program.methods[top.method].sites;
                if sites.is_empty() || self.stack.len() >= self.max_depth {
                    return Ok(None);
                }
                let via = site as usize % sites.len();
                let callee = sites[via].targets[target as usize % sites[via].targets.len()];
                self.call(rt, via, callee)?;
            }
            Op::Return => {
                if self.stack.len() > 1 {
                    self.stack.pop();
                }
            }
            Op::Throw(k) => {
                let keep = self.stack.len().saturating_sub(k as usize).max(1);
                self.stack.truncate(keep);
            }
            Op::Mark => return Ok(Some(self.mark(rt, EventKind::Mark, None))),
        }
        Ok(None)
    }

    /// Calls `callee` through call site `via` of the current method.
    pub fn call<S: GraphSink>(&mut self, rt: &Runtime<'_, S>, via: usize, callee: usize) -> Result<(), EncodeError> {
        let top = *self.stack.last().expect("a thread always has its first frame");
        let site = rt.load(top.method).calls[via];
        let callee_id = rt.load(callee).id;
        let ctx = rt.encoder.enter(site, top.ctx, callee_id)?;
        self.stack.push(SimFrame { method: callee, ctx, via });
        Ok(())
    }

    /// Pops frames down to `depth`.
    pub fn unwind_to(&mut self, depth: usize) {
        self.stack.truncate(depth.max(1));
    }

    /// An event in the current frame, with the true stack.
    pub fn mark<S: GraphSink>(&self, rt: &Runtime<'_, S>, kind: EventKind, label: Option<String>) -> EventRecord {
        let top = self.stack.last().expect("a thread always has its first frame");
        EventRecord {
            thread: self.id,
            kind,
            site: rt.load(top.method).mark.0,
            c: top.ctx.c,
            v: top.ctx.v,
            label,
            truth: Some(self.truth(rt.program)),
        }
    }

    /// The true stack, innermost first, as `Throwable.getStackTrace()` would show it.
    pub fn truth(&self, program: &SynthProgram) -> Vec<TruthFrame> {
        let frame = |m: usize, line: i32| {
            let sm = &program.methods[m];
            TruthFrame { class: sm.class.clone(), method: sm.name.clone(), file: Some(sm.file.clone()), line }
        };
        let mut out = Vec::with_capacity(self.stack.len());
        let top = self.stack.len() - 1;
        out.push(frame(self.stack[top].method, program.methods[self.stack[top].method].mark_line));
        for i in (0..top).rev() {
            let m = self.stack[i].method;
            out.push(frame(m, program.methods[m].sites[self.stack[i + 1].via].line));
        }
        out
    }
}

/// A random op, weighted so stacks grow to a median depth around `target_depth`.
pub fn random_op(rng: &mut impl Rng, depth: usize, target_depth: usize) -> Op {
    let call_bias = if depth < target_depth { 0.62 } else { 0.45 };
    let x: f64 = rng.gen();
    if x < 0.12 {
        Op::Mark
    } else if x < 0.12 + call_bias * 0.88 {
        Op::Call { site: rng.gen(), target: rng.gen() }
    } else if x < 0.98 {
        Op::Return
    } else {
        Op::Throw(rng.gen_range(2..8))
    }
}

/// Drives one thread, from its first frame, into a recursion `depth` frames deep through the two
/// recursive call sites (chosen by `pattern`'s bits), records an event at the bottom, and
/// unwinds back to the first frame.
pub fn deep_recursion<S: GraphSink>(rt: &Runtime<'_, S>, t: &mut SimThread, depth: usize, pattern: u64) -> Result<EventRecord, EncodeError> {
    t.unwind_to(1);
    let start = 1;
    let saved = t.max_depth;
    t.max_depth = usize::MAX;
    t.call(rt, 0, RECURSIVE)?; // through method 0.s site 0, outside its random targets
    for i in 0..depth {
        t.call(rt, ((pattern.rotate_left(i as u32 % 64) ^ i as u64) & 1) as usize, RECURSIVE)?;
    }
    let ev = t.mark(rt, EventKind::Mark, Some(format!("recursion depth {depth}")));
    t.unwind_to(start);
    t.max_depth = saved;
    Ok(ev)
}
