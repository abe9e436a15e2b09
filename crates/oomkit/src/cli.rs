//! Command-line arguments (clap derive). Raw arguments only: validation and
//! conversion to library options happen in `commands/`.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// The GPU out-of-memory toolkit.
#[derive(Debug, Parser)]
#[command(name = "oomkit", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// When to use colour: auto (only on a terminal, honouring NO_COLOR), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Find out-of-memory errors in logs and explain them: numbers, cause, fixes.
    ///
    /// Reads each FILE (or standard input when none is given or FILE is `-`).
    /// Exit status: 0 an OOM was found, 1 no OOM in the input, 2 bad input or I/O error.
    Explain(ExplainArgs),
}

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// Log files to read; `-` or nothing reads standard input.
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Print the message families oomkit recognises, with an example of each.
    #[arg(long)]
    pub list_formats: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Text for people.
    Human,
    /// One JSON object (see README "JSON contract").
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}
