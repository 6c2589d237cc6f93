//! `xla-ffi-run`: runs a `jax.export`ed program (or StableHLO) on a PJRT plugin,
//! with the XLA FFI handlers of Python-free libraries. `--help` says how.
// Denied, not forbidden: loading the plugin and the handler libraries the user
// names on the command line is `unsafe` (it runs their code), allowed at those two
// calls only (`run.rs`, `handlers.rs`).
#![deny(unsafe_code)]

mod cli;
mod handlers;
mod model;
mod npy;
mod run;
mod signature;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::parse(std::env::args_os().skip(1)) {
        Ok(cli::Command::Help) => {
            print!("{}", cli::HELP);
            ExitCode::SUCCESS
        }
        Ok(cli::Command::Version) => {
            println!("xla-ffi-run {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Ok(cli::Command::Run(args)) => match run::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("xla-ffi-run: error: {message}");
                ExitCode::from(1)
            }
        },
        Err(message) => {
            eprintln!("xla-ffi-run: {message}\n(xla-ffi-run --help says how to call it)");
            ExitCode::from(2)
        }
    }
}
