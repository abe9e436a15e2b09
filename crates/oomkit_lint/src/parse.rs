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

/// Why a file is not linted.
#[derive(Debug)]
pub enum Refused {
    /// It nests deeper than the limits ([`depth`]).
    TooDeep(depth::TooDeep),
    /// It is not valid Python.
    Syntax(SyntaxError),
}

/// Files up to this size are parsed before the nesting check ([`depth`]), which then
/// reads the parser's tokens instead of lexing the file again (lexing was a sixth of
/// `oomkit lint`'s time). The parser grows its own stack as it recurses, and
/// whatever it builds from this many bytes is at most this deep, which the worker
/// stack drops easily (files up to `MAX_EXPR_DEPTH` deep are linted); its memory is
/// bounded by the size too (about 2 KiB per open bracket: at most 128 MiB). A larger
/// file is checked on its own tokens first, as before, so a 10 MB bracket bomb is
/// never parsed.
pub const PARSE_FIRST_MAX: usize = 64 << 10;

/// Parses a whole file after making sure that it is not too deep to lint
/// ([`depth::check`]); a file both too deep and invalid is refused as too deep.
pub fn parse_checked(source: &str, lines: &Lines) -> Result<Module, Refused> {
    if source.len() > PARSE_FIRST_MAX {
        depth::check(source).map_err(Refused::TooDeep)?;
        return parse_module(source, lines).map_err(Refused::Syntax);
    }
    let parsed = ruff_python_parser::parse_unchecked(source, options());
    if parsed.errors().is_empty() {
        // without errors the parser's tokens are the lexer's (it re-lexes only to
        // recover from an error); the soft keywords it turns into names count alike
        depth::check_tokens(parsed.tokens().iter().map(|t| t.kind()))
    } else {
        depth::check(source)
    }
    .map_err(Refused::TooDeep)?;
    module_of(parsed, source, lines).map_err(Refused::Syntax)
}

fn options() -> ParseOptions {
    ParseOptions::from(Mode::Module).with_target_version(PythonVersion::PY314)
}

/// Parses a whole file. Targets the newest Python, so modern syntax parses.
pub fn parse_module(source: &str, lines: &Lines) -> Result<Module, SyntaxError> {
    module_of(
        ruff_python_parser::parse_unchecked(source, options()),
        source,
        lines,
    )
}

fn module_of(
    parsed: ruff_python_parser::Parsed<ast::Mod>,
    source: &str,
    lines: &Lines,
) -> Result<Module, SyntaxError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict of the order used for files over [`PARSE_FIRST_MAX`]: the nesting
    /// check on the lexer's tokens, then the parse.
    fn lex_first(source: &str) -> Result<(), String> {
        depth::check(source).map_err(|e| format!("deep: {e}"))?;
        parse_module(source, &Lines::new(source))
            .map(drop)
            .map_err(|e| format!("syntax: {e:?}"))
    }

    fn parse_first(source: &str) -> Result<(), String> {
        parse_checked(source, &Lines::new(source))
            .map(drop)
            .map_err(|e| match e {
                Refused::TooDeep(e) => format!("deep: {e}"),
                Refused::Syntax(e) => format!("syntax: {e:?}"),
            })
    }

    #[test]
    fn parsing_first_refuses_exactly_what_lexing_first_does() {
        let n = depth::MAX_NESTING;
        let mut blocks = String::new();
        for i in 0..=n {
            blocks.push_str(&format!("{}if x:\n", " ".repeat(i)));
        }
        blocks.push_str(&format!("{}pass\n", " ".repeat(n + 1)));
        let mut cases = vec![
            format!("x = {}1{}\n", "(".repeat(n + 1), ")".repeat(n + 1)),
            format!("x = {}1{}\n", "(".repeat(n - 1), ")".repeat(n - 1)),
            format!("x = {}1{}\n", "[".repeat(n + 1), "]".repeat(n + 1)),
            format!("x = {}a\n", "not ".repeat(n + 1)),
            format!("x = {}a\n", "not ".repeat(n - 1)),
            format!("x = {}a\n", "-".repeat(n + 1)),
            format!("f = {}0\n", "lambda: ".repeat(n + 1)),
            format!("x = {}1{}\n", "f'{".repeat(150), "}'".repeat(150)),
            format!("x = {}1{}\n", "f'{".repeat(90), "}'".repeat(90)),
            blocks.clone(),
            // too deep and invalid: refused as too deep either way
            format!("x = {}1\n", "(".repeat(n + 1)),
            format!("x = {}1)\n", "(".repeat(10)),
            "[".repeat(30_000),
            "match x:\n    case [a, *rest]:\n        type = lazy = 1\n".to_string(),
            "s = f\"{x!r}\" f'{y:{w}.{p}}' t'{z}'\n".to_string(),
            "def f(:\n".to_string(),
            String::new(),
        ];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        for entry in std::fs::read_dir(dir).expect("fixtures") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|x| x == "py") {
                cases.push(std::fs::read_to_string(path).expect("read"));
            }
        }
        assert!(parse_first(&blocks).is_err());
        // on a stack like the binary's workers': the parser recurses per bracket, and
        // a debug build's frames are large
        let run = move || {
            for source in &cases {
                assert!(source.len() <= PARSE_FIRST_MAX);
                assert_eq!(parse_first(source), lex_first(source), "{source:.200}");
            }
        };
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(run)
            .expect("thread")
            .join()
            .expect("no panic");
    }
}
