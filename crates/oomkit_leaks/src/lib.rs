//! `oomkit leaks`: run a few steps of a training or evaluation program and
//! find the memory that is still alive one step later and grows step after
//! step — what keeps it, the line that stores it, and the fix.
//!
//! The work is split where it can be tested:
//! - [`HOOK`], the Python side (`leaks_hook.py`), written by the binary in
//!   front of `oomkit_probe`'s `sitecustomize.py` (the same private folder,
//!   chaining and main-process rules). It tags every tensor storage with its
//!   creation site, counts step boundaries, and writes facts as JSON lines to
//!   the file named by [`FILE_ENV`]: per boundary the bytes still alive per
//!   site that were created in earlier steps and the autograd nodes each named
//!   holder reaches; at the end, who holds what grew.
//! - [`trace::Trace::parse`] reads those lines (bounded, never trusting them).
//! - [`classify::classify`] tells steady growth from warm-up and bounded
//!   windows; [`analyse::analyse`] joins growth and holders into [`Leak`]s
//!   with their [`Kind`] and fix; [`render`] prints them (text, JSON).
//!
//! ```
//! use oomkit_leaks::classify::{classify, Trend};
//! assert!(matches!(classify(&[0, 10, 20, 30, 40, 50]), Trend::Growing { per_step: 10 }));
//! assert!(matches!(classify(&[0, 10, 20, 20, 20, 20, 20]), Trend::Plateau));
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![deny(clippy::indexing_slicing, clippy::string_slice)]
#![warn(missing_docs)]

pub mod analyse;
pub mod classify;
pub mod render;
pub mod trace;

pub use analyse::{Kind, Leak, Report, analyse};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lint_findings_of_leak_rules_point_to_the_command() {
        assert_eq!(
            command_for_lint("OOM101", "examples/train.py").as_deref(),
            Some("oomkit leaks -- python examples/train.py")
        );
        assert_eq!(
            command_for_lint("OOM113", "my dir/it's.py").as_deref(),
            Some(r"oomkit leaks -- python 'my dir/it'\''s.py'")
        );
        assert_eq!(command_for_lint("OOM201", "train.py"), None);
        assert_eq!(command_for_lint("OOM101", "train.ipynb"), None);
    }
}

/// The Python hook (also readable in the source tree next to this file).
pub const HOOK: &str = include_str!("leaks_hook.py");

/// Variable naming the JSON-lines file the hook writes.
pub const FILE_ENV: &str = "OOMKIT_LEAKS_FILE";
/// Variable holding the number of step boundaries to run.
pub const STEPS_ENV: &str = "OOMKIT_LEAKS_STEPS";
/// Variable holding `module:function`, the user's step marker.
pub const MARKER_ENV: &str = "OOMKIT_LEAKS_MARKER";

/// Step boundaries run by default: enough to tell steady growth (every step)
/// from warm-up (optimizer state at the first step, caches that fill) and
/// from windows of up to three steps, in a few seconds for a small model.
pub const DEFAULT_STEPS: u64 = 10;
/// The fewest boundaries that can tell growth from warm-up (see [`classify`]).
pub const MIN_STEPS: u64 = 4;
/// The most boundaries: every boundary costs a walk of the program's names.
pub const MAX_STEPS: u64 = 1000;

/// The `oomkit lint` rules whose findings are leaks this command can confirm
/// at run time (memory kept from step to step: tensors, graphs, modules).
pub const LINT_RULES: &[&str] = &[
    "OOM101", "OOM102", "OOM108", "OOM110", "OOM111", "OOM112", "OOM113", "OOM114", "OOM115",
    "OOM116",
];

/// The command that confirms a lint finding in `path` at run time:
/// `oomkit leaks -- python PATH` (shell-quoted), or `None` when the rule is
/// not a leak or the file is not a script (a notebook).
pub fn command_for_lint(code: &str, path: &str) -> Option<String> {
    if !LINT_RULES.contains(&code) || !(path.ends_with(".py") || path.ends_with(".pyw")) {
        return None;
    }
    let plain = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    let quoted = if plain {
        path.to_owned()
    } else {
        format!("'{}'", path.replace('\'', r"'\''"))
    };
    Some(format!("oomkit leaks -- python {quoted}"))
}

/// Errors reading the hook's file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is larger than [`trace::MAX_TRACE_BYTES`].
    #[error("the hook's record is larger than {0} bytes")]
    TooLarge(u64),
}
