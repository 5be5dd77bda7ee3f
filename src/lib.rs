//! The `lucce` command line's library: the synthetic demo program, output formats and commands.

/// `eprintln!` that cannot panic: a closed stderr (`lucce record … 2>&1 | head -1`) loses the
/// message but must not turn a recorded program's exit status into a panic.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod cct_cli;
pub mod demo;
pub mod java_demo;
pub mod open;
pub mod record;
pub mod outputs;
pub mod render;
pub mod synth;
pub mod verify;
