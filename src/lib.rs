//! The `lucce` command line's library: the synthetic demo program, output formats and commands.

pub mod cct_cli;
pub mod demo;
pub mod java_demo;
pub mod open;
pub mod record;
pub mod outputs;
pub mod render;
pub mod synth;
pub mod verify;
