//! Output formats for decoded events: one [`Outputter`] per format.

use std::fmt;
use std::io::{self, Write};

use lucce_decoder::{Bottom, ContextDecoder, CtxId, FrameInfo};
use lucce_log_format::{EventRecord, TruthFrame};
use serde_json::json;

/// A decoded event, ready to print.
pub struct DecodedEvent<'a> {
    pub seq: u64,
    pub event: &'a EventRecord,
    pub thread: &'a str,
    pub ctx: CtxId,
}

/// A context that is not a recorded event: named on the command line of `lucce decode`. It has
/// no sequence number, thread or kind, so it is printed without them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// A `Lucce.context()` token (`@TOKEN`).
    Token(u64),
    /// A raw context (`SITE:CALLID:VERSION`).
    Raw { site: u32, call_id: u64, version: u64 },
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Named::Token(t) => write!(f, "token @{t}"),
            Named::Raw { site, call_id, version } => write!(f, "context {site}:{call_id}:{version}"),
        }
    }
}

/// Writes decoded events in one format.
pub trait Outputter {
    fn event(&mut self, out: &mut dyn Write, dec: &ContextDecoder<'_>, ev: &DecodedEvent<'_>) -> io::Result<()>;
    /// A token's or raw context's frames.
    fn named(&mut self, out: &mut dyn Write, dec: &ContextDecoder<'_>, what: Named, ctx: CtxId) -> io::Result<()>;
}

/// The frames of a context as printable infos, innermost first.
pub fn frame_infos<'g>(dec: &ContextDecoder<'g>, ctx: CtxId) -> Vec<FrameInfo<'g>> {
    let g = dec.graph();
    dec.frames(ctx).filter_map(|f| g.frame_info(f.site)).collect()
}

/// `TruthFrame`s of a decoded context, for comparing with what the runtime saw.
pub fn truth_frames(dec: &ContextDecoder<'_>, ctx: CtxId) -> Vec<TruthFrame> {
    frame_infos(dec, ctx)
        .into_iter()
        .map(|f| TruthFrame { class: f.class.to_string(), method: f.method.to_string(), file: f.file.map(str::to_string), line: f.line })
        .collect()
}

/// Like a Java stack trace: a header line, then `\tat pkg.Cls.m(File.java:42)` per frame.
pub struct JavaText {
    /// Print at most this many frames per event (the rest are counted).
    pub max_frames: usize,
}

impl JavaText {
    fn frames(&self, out: &mut dyn Write, dec: &ContextDecoder<'_>, ctx: CtxId) -> io::Result<()> {
        let frames = frame_infos(dec, ctx);
        for f in frames.iter().take(self.max_frames) {
            writeln!(out, "\tat {f}")?;
        }
        if frames.len() > self.max_frames {
            writeln!(out, "\t... {} more", frames.len() - self.max_frames)?;
        }
        if dec.bottom(ctx) == Bottom::Truncated {
            writeln!(out, "\t... (truncated: the bottom of this stack predates the agent)")?;
        }
        Ok(())
    }
}

impl Outputter for JavaText {
    fn event(&mut self, out: &mut dyn Write, dec: &ContextDecoder<'_>, ev: &DecodedEvent<'_>) -> io::Result<()> {
        write!(out, "event #{} {} in thread \"{}\"", ev.seq, ev.event.kind.name(), ev.thread)?;
        if let Some(l) = &ev.event.label {
            write!(out, ": {l}")?;
        }
        writeln!(out)?;
        self.frames(out, dec, ev.ctx)
    }

    fn named(&mut self, out: &mut dyn Write, dec: &ContextDecoder<'_>, what: Named, ctx: CtxId) -> io::Result<()> {
        writeln!(out, "{what}")?;
        self.frames(out, dec, ctx)
    }
}

/// One JSON object per line; frames like `Throwable.getStackTrace()`, innermost first.
pub struct JsonLines;

/// The frames of `ctx` as JSON objects, innermost first.
fn json_frames(dec: &ContextDecoder<'_>, ctx: CtxId) -> Vec<serde_json::Value> {
    frame_infos(dec, ctx)
        .iter()
        .map(|f| {
            let mut o = json!({"class": f.class, "method": f.method, "file": f.file, "line": f.line});
            if f.native {
                o["native"] = json!(true);
            }
            o
        })
        .collect()
}

impl Outputter for JsonLines {
    fn event(&mut self, out: &mut dyn Write, dec: &ContextDecoder<'_>, ev: &DecodedEvent<'_>) -> io::Result<()> {
        let line = json!({
            "seq": ev.seq,
            "kind": ev.event.kind.name(),
            "thread": ev.thread,
            "label": ev.event.label,
            "truncated": dec.bottom(ev.ctx) == Bottom::Truncated,
            "frames": json_frames(dec, ev.ctx),
        });
        writeln!(out, "{line}")
    }

    fn named(&mut self, out: &mut dyn Write, dec: &ContextDecoder<'_>, what: Named, ctx: CtxId) -> io::Result<()> {
        let mut line = json!({
            "truncated": dec.bottom(ctx) == Bottom::Truncated,
            "frames": json_frames(dec, ctx),
        });
        match what {
            Named::Token(t) => line["token"] = json!(t),
            Named::Raw { site, call_id, version } => {
                line["context"] = json!({"site": site, "call_id": call_id, "version": version})
            }
        }
        writeln!(out, "{line}")
    }
}
