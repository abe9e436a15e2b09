//! `oomkit probe` and `oomkit run`: supervise a training command.
//!
//! - [`probe::probe`] finds the largest batch size that fits by running the
//!   command once per trial (`{batch}` in its arguments and
//!   `OOMKIT_BATCH_SIZE` in its environment), each in its own process group,
//!   classifying each exit with `oomkit_explain`; the search itself is the
//!   pure [`search::search`].
//! - [`runner::run`] runs a command with its output passed through byte for
//!   byte, keeping a bounded tail, a memory [`timeline`] and explain's report;
//!   [`report::html`] turns that into a self-contained page.
//!
//! This crate depends on `oomkit_explain` (the documented exception to
//! "capability crates depend only on `oomkit_core`": recognising an OOM in a
//! child's output *is* explain's job). Like the monitor, its job is side
//! effects — it spawns and kills processes — but it still never prints:
//! progress comes back through a callback and the binary renders it.
//!
//! ```
//! use oomkit_probe::search::{search, Bounds, Verdict};
//! let a = search(Bounds { min: 1, max: Some(1024), estimate: None }, |b| {
//!     if b <= 37 { Verdict::Fits } else { Verdict::TooBig }
//! });
//! assert_eq!(a.largest_fit, Some(37));
//! assert!(a.trials <= 11);
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![warn(missing_docs)]

pub mod command;
pub mod hook;
pub mod probe;
pub mod report;
pub mod runner;
pub mod search;
pub mod timeline;

pub use command::CommandLine;

/// Errors supervising a command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing after `--`.
    #[error("no command given: put it after `--`")]
    NoCommand,
    /// The program could not be started.
    #[error("cannot run {program}")]
    Spawn {
        /// The program named.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The child's id does not fit a pid.
    #[error("child process id {0} is out of range")]
    Pid(u32),
    /// Waiting for the child failed.
    #[error("cannot wait for the command")]
    Wait(#[source] std::io::Error),
    /// The explainer thread failed.
    #[error("reading the command's output failed")]
    Explain,
    /// Supervising a command needs POSIX process groups and signals.
    #[error(
        "supervising a command needs Linux or macOS (POSIX process groups and signals): on Windows, run oomkit inside WSL2"
    )]
    Unsupported,
    /// The Python hook could not be written.
    #[error("cannot write the Python hook")]
    Hook(#[source] std::io::Error),
}
