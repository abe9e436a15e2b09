//! One file per subcommand; each turns its arguments into library calls and
//! returns the exit code.

mod completions;
mod estimate;
mod explain;
mod hub_client;
mod leaks;
mod lint;
mod llamacpp;
mod monitor;
mod preflight;
mod probe;
mod run;
mod snapshot;

use crate::cli::{Cli, Command};

/// Runs the chosen subcommand.
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Explain(args) => explain::run(args, cli.color),
        Command::Lint(args) => lint::run(args, cli.color),
        Command::Estimate(args) if preflight::applies(&args) => preflight::run(*args, cli.color),
        Command::Estimate(args) => estimate::run(*args, cli.color),
        Command::Probe(args) => probe::run(args, cli.color),
        Command::Run(args) => run::run(args, cli.color),
        Command::Leaks(args) => leaks::run(args, cli.color),
        Command::Snapshot(args) => snapshot::run(args, cli.color),
        Command::Monitor(args) => monitor::run(args, cli.color),
        Command::Completions { shell } => completions::completions(shell, cli.color),
        Command::Man { subcommand, dir } => {
            completions::man(subcommand.as_deref(), dir.as_deref(), cli.color)
        }
    }
}
