//! `oomkit lint`: find memory leaks and out-of-memory traps in Python training code.
//!
//! One file is parsed once (`parse`, ruff's parser), then a single pass over the AST
//! (`context::Checker`) builds the shared context — imports and aliases, which names are
//! tensors with a graph and which are plain numbers, loops, `no_grad` regions — and runs
//! every selected rule from [`rules::RULES`] as it goes. The caller (the `oomkit`
//! binary) walks directories and lints files in parallel; this crate does no I/O.
//!
//! Entry points: [`lint_source`] (diagnostics for one file) and [`fix_source`]
//! (`--fix`); [`render`] and [`sarif`] format the results.
//!
//! ```
//! use oomkit_lint::{Settings, lint_source};
//! let src = "losses = []\nfor batch in loader:\n    loss = model(batch)\n    losses.append(loss)\n";
//! let diags = lint_source("train.py", src, &Settings::default()).unwrap();
//! assert_eq!(diags[0].code, "OOM101");
//! assert_eq!((diags[0].line, diags[0].column), (4, 5));
//! ```
#![warn(missing_docs)]
// No panic is reachable from input (ARCHITECTURE.md): no indexing or slicing that can
// go out of bounds or cut a character, no unwrap/expect/panic. Tests may index
// (clippy.toml allows unwrap/expect there; test modules allow indexing).
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]
#![cfg_attr(
    test,
    allow(
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::string_slice,
        clippy::panic,
        clippy::arithmetic_side_effects
    )
)]

pub mod config;
mod context;
mod diagnostic;
mod file_facts;
mod fix;
pub mod notebook;
mod parse;
pub mod project;
pub mod render;
pub mod rules;
pub mod sarif;
pub mod source;
mod suppression;
pub mod tree;

pub use config::{DEFAULT_MAX_FILE_SIZE, LintConfig, Selection, rule_set};
pub use diagnostic::Diagnostic;
pub use parse::SyntaxError;
pub use parse::depth::{MAX_EXPR_DEPTH, MAX_NESTING};
pub use project::Project;
pub use rules::{Category, RULES, Rule, RuleInfo, RuleSet};

use crate::context::Checker;
use crate::diagnostic::Finding;
use crate::parse::Lines;

/// What a lint run checks.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// The selected rules.
    pub rules: RuleSet,
    /// The project's library versions (version-dependent rules read them).
    pub project: Project,
}

impl Default for Settings {
    /// The default rule set ([`RuleSet::default_set`]) and no known versions.
    fn default() -> Self {
        Self {
            rules: RuleSet::default_set(),
            project: Project::default(),
        }
    }
}

/// Errors of the lint library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is not valid Python.
    #[error("{path}:{line}:{column}: syntax error: {message}", line = .error.line, column = .error.column, message = .error.message)]
    Syntax {
        /// The file.
        path: String,
        /// Where and what.
        error: SyntaxError,
    },
    /// The file nests deeper than the limits (`parse::depth`): the parser and the
    /// checker recurse, so it is refused before parsing.
    #[error("{path}: {reason}; not linted")]
    TooDeep {
        /// The file.
        path: String,
        /// Which limit, with its value.
        reason: String,
    },
    /// A `.ipynb` file that is not a notebook's JSON.
    #[error("{path}: {message}")]
    Notebook {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// An invalid `pyproject.toml`.
    #[error("invalid [tool.oomkit.lint] configuration: {0}")]
    Config(String),
    /// A `--select`/`--ignore`/config selector that matches no rule.
    #[error(
        "unknown rule selector `{0}` (expected a code like OOM101, a prefix like OOM1, a rule name or ALL)"
    )]
    UnknownSelector(String),
}

/// The result of `--fix` on one file.
#[derive(Debug)]
pub struct Fixed {
    /// The new text (equal to the input when nothing was fixed).
    pub source: String,
    /// How many fixes were applied.
    pub fixed: usize,
    /// What remains after fixing.
    pub diagnostics: Vec<Diagnostic>,
    /// What the fixed file tells the other files of the tree ([`tree`]).
    pub summary: tree::Summary,
}

/// One file's findings before the evidence of the other files is applied
/// ([`tree::settle`]), and what the file tells them.
#[derive(Debug)]
pub struct Linted {
    /// The findings; some may carry a [`tree::Pending`] condition.
    pub diagnostics: Vec<Diagnostic>,
    /// What the file tells the rest of the tree.
    pub summary: tree::Summary,
}

impl Linted {
    /// The findings of a tree of this one file.
    pub fn alone(self) -> Vec<Diagnostic> {
        let mut t = tree::Tree::default();
        t.add(self.summary);
        let mut d = self.diagnostics;
        tree::settle(&mut d, &t);
        d
    }
}

fn violations(
    path: &str,
    source: &str,
    settings: &Settings,
    tree: Option<&tree::Returns>,
) -> Result<(Vec<Finding>, Lines, tree::Summary), Error> {
    let lines = Lines::new(source);
    let module = parse::parse_checked(source, &lines).map_err(|refused| match refused {
        parse::Refused::TooDeep(why) => Error::TooDeep {
            path: path.to_string(),
            reason: why.to_string(),
        },
        parse::Refused::Syntax(error) => Error::Syntax {
            path: path.to_string(),
            error,
        },
    })?;
    let (mut found, summary) =
        Checker::check(&module, source, settings, tree).map_err(|()| Error::TooDeep {
            path: path.to_string(),
            reason: format!(
                "a syntax tree deeper than {} levels",
                context::MAX_WALK_DEPTH
            ),
        })?;
    // noqa on the first or last line of the flagged range
    found.retain(|v| {
        let (l1, _) = lines.line_col(source, v.range.start());
        let (l2, _) = lines.line_col(source, v.range.end());
        let code = v.rule.info().code;
        ![l1, l2].iter().any(|l| {
            suppression::noqa(lines.line_text(source, *l)).is_some_and(|n| n.silences(code))
        })
    });
    found.sort_by_key(|v| (v.range.start(), v.rule));
    found.dedup_by_key(|v| (v.range, v.rule));
    Ok((found, lines, summary))
}

fn to_diagnostic(path: &str, source: &str, lines: &Lines, v: Finding) -> Diagnostic {
    let info = v.rule.info();
    let (line, column) = lines.line_col(source, v.range.start());
    let (end_line, end_column) = lines.line_col(source, v.range.end());
    Diagnostic {
        code: info.code,
        name: info.name,
        message: v.message,
        fix: v.fix_title,
        remedy: info.remedy,
        fixable: !v.edits.is_empty(),
        path: path.to_string(),
        cell: None,
        line,
        column,
        end_line,
        end_column,
        pending: v.pending,
    }
}

/// Lints one file's text, as a tree of one file. `path` is only used to name the file
/// in diagnostics.
pub fn lint_source(
    path: &str,
    source: &str,
    settings: &Settings,
) -> Result<Vec<Diagnostic>, Error> {
    lint_file(path, source, settings).map(Linted::alone)
}

/// Lints one file of a tree: the findings still wait for the other files' evidence
/// ([`tree`]).
pub fn lint_file(path: &str, source: &str, settings: &Settings) -> Result<Linted, Error> {
    lint_file_in_tree(path, source, settings, None)
}

/// Lints one file again once what the functions of the whole tree return is known
/// ([`tree::Returns`], gathered from every file's [`tree::Summary`]): a value returned
/// by `trainer.train_step(...)` of another module then carries what that method
/// returns. Only files that name one of those functions need it
/// ([`tree::Returns::graph_names`]).
pub fn lint_file_in_tree(
    path: &str,
    source: &str,
    settings: &Settings,
    tree: Option<&tree::Returns>,
) -> Result<Linted, Error> {
    let (found, lines, summary) = violations(path, source, settings, tree)?;
    Ok(Linted {
        diagnostics: found
            .into_iter()
            .map(|v| to_diagnostic(path, source, &lines, v))
            .collect(),
        summary,
    })
}

/// Lints a Jupyter notebook's JSON text: its code cells, joined
/// ([`notebook::join`]); every diagnostic carries its `cell` and lines within it. A
/// syntax error names its cell too.
pub fn lint_notebook(
    path: &str,
    json: &str,
    settings: &Settings,
) -> Result<Vec<Diagnostic>, Error> {
    lint_notebook_file(path, json, settings).map(Linted::alone)
}

/// [`lint_notebook`] for one file of a tree ([`lint_file`]).
pub fn lint_notebook_file(path: &str, json: &str, settings: &Settings) -> Result<Linted, Error> {
    let joined = notebook::join(json).map_err(|message| Error::Notebook {
        path: path.to_string(),
        message,
    })?;
    let found = lint_file(path, &joined.source, settings).map_err(|e| match e {
        Error::Syntax { path, mut error } => {
            let (cell, line) = joined.locate(error.line);
            error.line = line;
            error.message = format!("cell {cell}: {}", error.message);
            Error::Syntax { path, error }
        }
        e => e,
    })?;
    Ok(Linted {
        diagnostics: found
            .diagnostics
            .into_iter()
            .map(|mut d| {
                let (cell, line) = joined.locate(d.line);
                let (_, end_line) = joined.locate(d.end_line);
                d.cell = Some(cell);
                d.line = line;
                d.end_line = end_line;
                d
            })
            .collect(),
        summary: found.summary,
    })
}

/// Applies every safe fix to one file's text and lints the result, as a tree of one
/// file.
pub fn fix_source(path: &str, source: &str, settings: &Settings) -> Result<Fixed, Error> {
    let mut fixed = fix_file(path, source, settings)?;
    fixed.diagnostics = Linted {
        diagnostics: std::mem::take(&mut fixed.diagnostics),
        summary: fixed.summary.clone(),
    }
    .alone();
    Ok(fixed)
}

/// [`fix_source`] for one file of a tree: what remains still waits for the other
/// files' evidence ([`lint_file`]).
pub fn fix_file(path: &str, source: &str, settings: &Settings) -> Result<Fixed, Error> {
    let (found, _, _) = violations(path, source, settings, None)?;
    let edits: Vec<_> = found
        .into_iter()
        .filter(|v| !v.edits.is_empty())
        .map(|v| v.edits)
        .collect();
    let (new, fixed) = fix::apply(source, &edits);
    let linted = lint_file(path, &new, settings)?;
    Ok(Fixed {
        source: new,
        fixed,
        diagnostics: linted.diagnostics,
        summary: linted.summary,
    })
}

/// A rule's documentation as `--explain` prints it: a title line, the category (and
/// whether it runs by default), then the doc.
pub fn explain(rule: &RuleInfo) -> String {
    let mut out = format!("{} ({})\n\n", rule.name, rule.code);
    let when = if rule.preview {
        "preview: runs only with `--preview`".to_string()
    } else if rule.category.is_default() {
        "on by default".to_string()
    } else {
        format!(
            "opt-in: `--extend-select {}` or `--select {}`",
            rule.category.name(),
            rule.code
        )
    };
    out.push_str(&format!("Category: {} ({when})\n\n", rule.category.name()));
    for line in rule.doc.lines() {
        out.push_str(line.strip_prefix(' ').unwrap_or(line));
        out.push('\n');
    }
    if let Some(id) = rule.remedy {
        out.push_str(&format!(
            "\nSee also: remedy `{id}` (oomkit's fix catalogue).\n"
        ));
    }
    out
}
