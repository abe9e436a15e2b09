//! The thin parser module: the only file that names the parser crates.
//!
//! oomkit uses `ruff_python_parser`/`ruff_python_ast` pinned to `=0.0.10` (the newest
//! release that builds with rustc 1.95). Everything else in the crate goes through the
//! re-exports and functions here, so switching parser (a newer ruff release, or
//! tree-sitter-python) touches this file and the AST-shaped code that imports [`ast`].

pub mod depth;

pub use ruff_python_ast as ast;
pub use ruff_python_ast::visitor;
pub use ruff_text_size::{Ranged, TextRange, TextSize};

use ruff_python_ast::PythonVersion;
use ruff_python_parser::{Mode, ParseOptions};
use ruff_source_file::LineIndex;

/// A parsed module.
pub type Module = ast::ModModule;

/// The first syntax error in a file, 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// What the parser says.
    pub message: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters).
    pub column: usize,
}

/// Parses a whole file. Targets the newest Python, so modern syntax parses.
pub fn parse_module(source: &str, lines: &Lines) -> Result<Module, SyntaxError> {
    let options = ParseOptions::from(Mode::Module).with_target_version(PythonVersion::PY314);
    let parsed = ruff_python_parser::parse_unchecked(source, options);
    if let Some(err) = parsed.errors().first() {
        let (line, column) = lines.line_col(source, err.location.start());
        return Err(SyntaxError {
            message: err.error.to_string(),
            line,
            column,
        });
    }
    match parsed.into_syntax() {
        ast::Mod::Module(m) => Ok(m),
        ast::Mod::Expression(_) => Err(SyntaxError {
            message: "expected a module".into(),
            line: 1,
            column: 1,
        }),
    }
}

/// Offsets → 1-based line and column.
pub struct Lines(LineIndex);

impl Lines {
    /// Indexes the line starts of `source`.
    pub fn new(source: &str) -> Self {
        Self(LineIndex::from_source_text(source))
    }

    /// The 1-based line and character column of `offset`.
    pub fn line_col(&self, source: &str, offset: TextSize) -> (usize, usize) {
        let lc = self.0.line_column(offset, source);
        (lc.line.get(), lc.column.get())
    }

    /// The text of the 1-based line `line` (without its newline).
    pub fn line_text<'s>(&self, source: &'s str, line: usize) -> &'s str {
        let Some(one) = ruff_source_file::OneIndexed::new(line) else {
            return "";
        };
        if line > self.0.line_count() {
            return "";
        }
        let range = self.0.line_range(one, source);
        source
            .get(range.start().to_usize()..range.end().to_usize())
            .unwrap_or("")
            .trim_end_matches(['\n', '\r'])
    }
}
