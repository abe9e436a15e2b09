//! What a rule reports, before and after it is placed in a file.

use serde::Serialize;

use crate::parse::TextRange;
use crate::rules::Rule;
use crate::tree::Pending;

/// One text replacement of a fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The bytes to replace (empty for an insertion).
    pub range: TextRange,
    /// The new text.
    pub content: String,
}

/// A rule finding inside one file, in byte offsets: what `Checker::report` makes of a
/// rule's `Violation` (its message and fix title, formatted once).
#[derive(Debug, Clone)]
pub struct Finding {
    /// Which rule.
    pub rule: Rule,
    /// States the problem with the names from the code.
    pub message: String,
    /// Imperative: what to do instead.
    pub fix_title: String,
    /// Where.
    pub range: TextRange,
    /// A safe automatic fix, when the rule has one for this case.
    pub edits: Vec<Edit>,
    /// Evidence still needed from the other files of the linted tree.
    pub pending: Pending,
}

/// A finding as reported: flat, with 1-based lines and columns (the JSON shape).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Diagnostic {
    /// Rule code, e.g. `OOM101`.
    pub code: &'static str,
    /// Rule name, e.g. `tensor-appended-in-loop`.
    pub name: &'static str,
    /// The problem.
    pub message: String,
    /// What to do instead.
    pub fix: String,
    /// The remedy in `oomkit_core::remedies` that this rule points to, if any.
    pub remedy: Option<oomkit_core::remedies::RemedyId>,
    /// Whether `--fix` can fix it.
    pub fixable: bool,
    /// The file, as given or found.
    pub path: String,
    /// For a notebook: the 1-based cell (its position among all cells); `line` and
    /// `end_line` are then lines within that cell. Absent for Python files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cell: Option<usize>,
    /// 1-based start line.
    pub line: usize,
    /// 1-based start column (characters).
    pub column: usize,
    /// 1-based end line.
    pub end_line: usize,
    /// 1-based end column (exclusive).
    pub end_column: usize,
    /// Evidence still needed from the other files of the linted tree
    /// ([`crate::tree::settle`]); not part of the output.
    #[serde(skip)]
    pub pending: Pending,
}
