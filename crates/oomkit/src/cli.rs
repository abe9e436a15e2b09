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
    /// Find memory leaks and OOM traps in Python training code.
    ///
    /// Lints each PATH (files and directories, respecting .gitignore; default `.`;
    /// `-` reads standard input). Exit status: 0 clean, 1 findings, 2 a file could not
    /// be read or parsed (other files are still linted) or bad arguments/configuration.
    Lint(LintArgs),
}

#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Files or directories to lint; `-` reads standard input.
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,
    /// Rules to run: codes, prefixes (`OOM1`), names or ALL (comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    pub select: Option<Vec<String>>,
    /// Rules to skip: codes, prefixes or names.
    #[arg(long, value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// Apply safe fixes in place (to standard output for `-`).
    #[arg(long)]
    pub fix: bool,
    /// Print a rule's documentation (`--explain OOM101`) and exit.
    #[arg(long, value_name = "CODE")]
    pub explain: Option<String>,
    /// Print a count per rule instead of each diagnostic.
    #[arg(long)]
    pub statistics: bool,
    /// The file name to report for standard input.
    #[arg(long, value_name = "PATH")]
    pub stdin_filename: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    /// `path:line:col: CODE message` and a `help:` line.
    Human,
    /// One JSON object (see README).
    Json,
    /// SARIF 2.1.0, for GitHub code scanning.
    Sarif,
    /// GitHub Actions workflow annotations.
    Github,
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
