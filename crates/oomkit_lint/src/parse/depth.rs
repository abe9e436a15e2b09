//! The nesting pre-check: a linear scan of the tokens that refuses a file whose syntax
//! tree would be too deep for the parser and the checker, which both recurse.
//!
//! Two budgets, checked at every token:
//! - **nesting** ([`MAX_NESTING`]): open brackets, indented blocks, f-string
//!   replacements and prefix operators (`-x`, `not`, `lambda`, `await`, `x if c else`,
//!   `**`, `:=`, `yield`) of the expression being read, at every open level. These are
//!   what the parser recurses on, with a large frame each (about 2 KiB per bracket).
//!   200 is CPython's own limit for brackets (it stops at 100 indentation levels), so
//!   no program that Python compiles is refused for its brackets or blocks.
//! - **depth** ([`MAX_EXPR_DEPTH`]): the nesting plus every chain link (`a.b`, `f()`,
//!   `x[i]`, a binary operator) of the expressions being read. The parser reads chains
//!   in a loop, but the tree it builds is as deep as the chain and everything that
//!   walks or drops it recurses once per link (a few hundred bytes each).
//!
//! The counts reset at `,`, `;` and the end of a logical line, so a 10 MB list literal
//! or a 100,000-line file is flat. Both counts are upper bounds of the tree depth: a
//! file under both limits can be parsed, walked and dropped on the binary's worker
//! stack (256 MiB, of which a file at the limits touches a few tens of MiB).

use ruff_python_ast::token::TokenKind;
use ruff_python_parser::Mode;

/// The deepest nesting of brackets, blocks and prefix operators that is linted.
pub const MAX_NESTING: usize = 200;
/// The deepest expression (nesting plus chained operators) that is linted.
pub const MAX_EXPR_DEPTH: usize = 100_000;

/// Why a file is too deep to lint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TooDeep {
    /// Over [`MAX_NESTING`].
    Nesting,
    /// Over [`MAX_EXPR_DEPTH`].
    Expression,
}

impl std::fmt::Display for TooDeep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TooDeep::Nesting => write!(
                f,
                "nesting deeper than {MAX_NESTING} levels (brackets, indented blocks and prefix operators such as `not`, `-`, `lambda`)"
            ),
            TooDeep::Expression => write!(
                f,
                "an expression deeper than {MAX_EXPR_DEPTH} levels (a chain of operators, calls or attribute accesses)"
            ),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Opener {
    Root,
    Bracket,
    Block,
    Str,
}

struct Level {
    opener: Opener,
    prefix: usize,
    chain: usize,
}

struct Counter {
    levels: Vec<Level>,
    nesting: usize,
    depth: usize,
}

impl Counter {
    fn check(&self) -> Result<(), TooDeep> {
        if self.nesting > MAX_NESTING {
            Err(TooDeep::Nesting)
        } else if self.depth > MAX_EXPR_DEPTH {
            Err(TooDeep::Expression)
        } else {
            Ok(())
        }
    }

    fn push(&mut self, opener: Opener) -> Result<(), TooDeep> {
        self.levels.push(Level {
            opener,
            prefix: 0,
            chain: 0,
        });
        self.nesting = self.nesting.saturating_add(1);
        self.depth = self.depth.saturating_add(1);
        self.check()
    }

    /// Closes the innermost level if `opener` opened it (a stray closer is the
    /// parser's error to report, not ours).
    fn pop(&mut self, opener: Opener) {
        if self.levels.last().is_some_and(|l| l.opener == opener)
            && let Some(l) = self.levels.pop()
        {
            let own = l.prefix.saturating_add(1);
            self.nesting = self.nesting.saturating_sub(own);
            self.depth = self.depth.saturating_sub(own.saturating_add(l.chain));
        }
    }

    fn prefix(&mut self) -> Result<(), TooDeep> {
        if let Some(l) = self.levels.last_mut() {
            l.prefix = l.prefix.saturating_add(1);
            self.nesting = self.nesting.saturating_add(1);
            self.depth = self.depth.saturating_add(1);
        }
        self.check()
    }

    fn chain(&mut self) -> Result<(), TooDeep> {
        if let Some(l) = self.levels.last_mut() {
            l.chain = l.chain.saturating_add(1);
            self.depth = self.depth.saturating_add(1);
        }
        self.check()
    }

    /// A new expression starts at this level (`,`, `;`, a new logical line).
    fn reset(&mut self) {
        if let Some(l) = self.levels.last_mut() {
            self.nesting = self.nesting.saturating_sub(l.prefix);
            self.depth = self.depth.saturating_sub(l.prefix.saturating_add(l.chain));
            l.prefix = 0;
            l.chain = 0;
        }
    }
}

/// Refuses a file that nests deeper than the limits; O(n) time, O(nesting) memory.
/// Lexes the file: for one not parsed yet.
pub fn check(source: &str) -> Result<(), TooDeep> {
    let mut lexer = ruff_python_parser::lexer::lex(source, Mode::Module);
    // every token but a few zero-width ones (dedents, the end) consumes a byte; the
    // bound only guards against a lexer that would stop advancing
    let mut budget = source.len().saturating_mul(2).saturating_add(64);
    check_tokens(std::iter::from_fn(|| {
        budget = budget.saturating_sub(1);
        let kind = lexer.next_token();
        (budget > 0 && kind != TokenKind::EndOfFile).then_some(kind)
    }))
}

/// [`check`] on tokens already lexed (the parser's, without the end-of-file token):
/// the same verdict as [`check`] on the text they were lexed from.
pub fn check_tokens(tokens: impl IntoIterator<Item = TokenKind>) -> Result<(), TooDeep> {
    use TokenKind as T;
    let mut c = Counter {
        levels: vec![Level {
            opener: Opener::Root,
            prefix: 0,
            chain: 0,
        }],
        nesting: 0,
        depth: 0,
    };
    // whether the last token ends an operand: then `-` is binary and `(` a call
    let mut after_operand = false;
    for kind in tokens {
        if kind == T::EndOfFile {
            break;
        }
        let operand_before = after_operand;
        after_operand = false;
        match kind {
            T::Comment | T::NonLogicalNewline => after_operand = operand_before,
            T::Lpar | T::Lsqb | T::Lbrace => {
                if operand_before {
                    c.chain()?; // a call or a subscript nests its target
                }
                c.push(Opener::Bracket)?;
            }
            T::Rpar | T::Rsqb | T::Rbrace => {
                c.pop(Opener::Bracket);
                after_operand = true;
            }
            T::FStringStart | T::TStringStart => c.push(Opener::Str)?,
            T::FStringEnd | T::TStringEnd => {
                c.pop(Opener::Str);
                after_operand = true;
            }
            T::Indent => c.push(Opener::Block)?,
            T::Dedent => c.pop(Opener::Block),
            T::Newline | T::Comma | T::Semi => c.reset(),
            T::Plus | T::Minus if !operand_before => c.prefix()?,
            T::Tilde
            | T::Not
            | T::Await
            | T::Lambda
            | T::If
            | T::Else
            | T::Yield
            | T::DoubleStar
            | T::ColonEqual => c.prefix()?,
            T::Plus
            | T::Minus
            | T::Dot
            | T::Star
            | T::Slash
            | T::DoubleSlash
            | T::Percent
            | T::At
            | T::LeftShift
            | T::RightShift
            | T::Amper
            | T::Vbar
            | T::CircumFlex
            | T::Less
            | T::Greater
            | T::EqEqual
            | T::NotEqual
            | T::LessEqual
            | T::GreaterEqual
            | T::In
            | T::Is
            | T::And
            | T::Or => c.chain()?,
            T::Name
            | T::Int
            | T::Float
            | T::Complex
            | T::String
            | T::True
            | T::False
            | T::None
            | T::Ellipsis
            | T::Case
            | T::Match
            | T::Type
            | T::Lazy => after_operand = true,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_brackets_blocks_and_prefixes_are_refused() {
        let parens = |n: usize| format!("x = {}1{}\n", "(".repeat(n), ")".repeat(n));
        assert_eq!(check(&parens(MAX_NESTING - 1)), Ok(()));
        assert_eq!(check(&parens(MAX_NESTING + 1)), Err(TooDeep::Nesting));
        assert_eq!(check(&"[".repeat(100_000)), Err(TooDeep::Nesting));
        let nots = format!("x = {}a\n", "not ".repeat(MAX_NESTING + 1));
        assert_eq!(check(&nots), Err(TooDeep::Nesting));
        let lambdas = format!("f = {}0\n", "lambda: ".repeat(MAX_NESTING + 1));
        assert_eq!(check(&lambdas), Err(TooDeep::Nesting));
        let mut blocks = String::new();
        for i in 0..=MAX_NESTING {
            blocks.push_str(&format!("{}if x:\n", " ".repeat(i)));
        }
        blocks.push_str(&format!("{}pass\n", " ".repeat(MAX_NESTING + 1)));
        assert_eq!(check(&blocks), Err(TooDeep::Nesting));
        // f-strings nest like brackets
        let fs = format!("x = {}1{}\n", "f'{".repeat(150), "}'".repeat(150));
        assert_eq!(check(&fs), Err(TooDeep::Nesting));
    }

    #[test]
    fn long_chains_count_against_the_expression_depth_only() {
        let chain = |n: usize| format!("x = a{}\n", ".b".repeat(n));
        assert_eq!(check(&chain(40_000)), Ok(()));
        assert_eq!(check(&chain(MAX_EXPR_DEPTH + 1)), Err(TooDeep::Expression));
        let sum = format!("x = a{}\n", " + a".repeat(MAX_EXPR_DEPTH + 1));
        assert_eq!(check(&sum), Err(TooDeep::Expression));
        let calls = format!("x = f{}\n", "()".repeat(MAX_EXPR_DEPTH + 1));
        assert_eq!(check(&calls), Err(TooDeep::Expression));
    }

    #[test]
    fn flat_code_is_not_counted_across_items_and_lines() {
        let list = format!("x = [{}]\n", "-a.b + c, ".repeat(200_000));
        assert_eq!(check(&list), Ok(()));
        let lines = "y = not -a.b(c)[d] + e if f else g\n".repeat(50_000);
        assert_eq!(check(&lines), Ok(()));
        // brackets inside strings and comments are not nesting
        let text = format!("s = '{}'  # {}\n", "(".repeat(1000), "[".repeat(1000));
        assert_eq!(check(&text), Ok(()));
    }
}
