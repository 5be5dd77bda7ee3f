//! Diagnostics of the agent itself (not the program's output): a level and a destination set once
//! from the options. Writes never fail loudly: a diagnostic that cannot be written is dropped.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

use crate::options::Sink;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

struct Logger {
    level: Level,
    out: Mutex<Option<Box<dyn Write + Send>>>,
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

/// Installs the logger; on an unopenable file the diagnostics fall back to stderr.
pub fn init(sink: &Sink, level: Level) {
    let out: Option<Box<dyn Write + Send>> = match sink {
        Sink::Off => None,
        Sink::Stderr => Some(Box::new(std::io::stderr())),
        Sink::File(p) => match std::fs::File::create(p) {
            Ok(f) => Some(Box::new(std::io::LineWriter::new(f))),
            Err(e) => {
                eprintln!("lucce-agent: cannot open log file {}: {e}; logging to stderr", p.display());
                Some(Box::new(std::io::stderr()))
            }
        },
    };
    let _ = LOGGER.set(Logger { level, out: Mutex::new(out) });
}

pub fn enabled(level: Level) -> bool {
    LOGGER.get().is_some_and(|l| level <= l.level)
}

pub fn log(level: Level, msg: std::fmt::Arguments<'_>) {
    let Some(l) = LOGGER.get() else { return };
    if level > l.level {
        return;
    }
    // A poisoned lock only means another thread panicked mid-write; the writer is still usable.
    let mut g = l.out.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(w) = g.as_mut() {
        let _ = writeln!(w, "lucce-agent [{level:?}]: {msg}");
    }
}

#[macro_export]
macro_rules! diag {
    ($level:ident, $($arg:tt)*) => {
        if $crate::log::enabled($crate::log::Level::$level) {
            $crate::log::log($crate::log::Level::$level, format_args!($($arg)*));
        }
    };
}
