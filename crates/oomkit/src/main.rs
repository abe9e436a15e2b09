//! The `oomkit` binary: parse arguments, run one subcommand, map the outcome
//! to an exit code (0 ok, 1 findings-dependent, 2 error; `run` and `probe`,
//! which run a command, use 125 for their own errors as `timeout` and `env`
//! do, since 2 is a status commands exit with). All logic lives in the
//! library crates; see ARCHITECTURE.md.

mod cli;
mod commands;
mod input;
mod interrupt;
mod output;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

/// mimalloc instead of the system allocator: `oomkit lint` builds and drops a syntax
/// tree per file on every worker thread, and glibc's malloc took about a fifth of its
/// time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The status of `run`'s and `probe`'s own failures (`timeout`, `env`).
const RUNNER_FAILURE: u8 = 125;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse_from(cli::engine_spellings(std::env::args_os().collect())) {
        Ok(cli) => cli,
        Err(err) => {
            if err.use_stderr() && runs_a_command() {
                let _ = err.print();
                return ExitCode::from(RUNNER_FAILURE);
            }
            err.exit()
        }
    };
    let failure = if matches!(
        cli.command,
        cli::Command::Run(_) | cli::Command::Probe(_) | cli::Command::Leaks(_)
    ) {
        RUNNER_FAILURE
    } else {
        2
    };
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            if output::is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            output::print_error(&err);
            ExitCode::from(failure)
        }
    }
}

/// Whether the arguments that failed to parse name `run` or `probe`.
fn runs_a_command() -> bool {
    cli::Cli::command()
        .ignore_errors(true)
        .try_get_matches()
        .ok()
        .and_then(|m| m.subcommand_name().map(|n| n == "run" || n == "probe"))
        .unwrap_or(false)
}
