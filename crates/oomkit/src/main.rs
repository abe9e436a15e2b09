//! The `oomkit` binary: parse arguments, run one subcommand, map the outcome
//! to an exit code (0 ok, 1 findings-dependent, 2 error). All logic lives in
//! the library crates; see ARCHITECTURE.md.

mod cli;
mod commands;
mod input;
mod interrupt;
mod output;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of the system allocator: `oomkit lint` builds and drops a syntax
/// tree per file on every worker thread, and glibc's malloc took about a fifth of its
/// time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse_from(cli::engine_spellings(std::env::args_os().collect()));
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            if output::is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            output::print_error(&err);
            ExitCode::from(2)
        }
    }
}
