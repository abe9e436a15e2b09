//! The one place oomkit compiles a regular expression.
//!
//! Perl classes are ASCII here: `\d` is `[0-9]`, `\w` is `[0-9A-Za-z_]`,
//! `\s` is `[\t\n\v\f\r ]` and `\b` an ASCII word boundary. Everything
//! else (`.`, `\S`, `[^…]`) stays Unicode, so a pattern still matches a
//! path or a model name with non-ASCII letters in it.
//!
//! Why: the messages' numbers, identifiers and flags are ASCII (the
//! normalizer already turns a no-break space into a space), and Unicode
//! classes are what made compiling slow — `\w` is some 770 ranges of code
//! points, each class a UTF-8 automaton built forwards and in reverse. The
//! regex crate compiles a pattern on first use, and the ~80 patterns a
//! typical log reaches took about 20 ms per run with Unicode classes
//! against about 8 ms without (bench/README.md, "explain: compiling"); on
//! a short traceback that was most of the time of the whole command.
//! For the same reason a bounded repetition of a Unicode class
//! (`\S{1,300}`, one automaton per repeat) is written `\S+` and its length
//! checked in code.
//!
//! The rewrite is textual but knows escapes (`\\d` is a backslash and a
//! `d`) and bracketed classes (inside `[…]` the ASCII class names
//! `[:digit:]`, `[:word:]` and `[:space:]` take the Perl classes' place).

use regex::Regex;

/// Compiles `pattern` with ASCII Perl classes (see the module comment).
#[allow(clippy::disallowed_methods)] // the one place
pub fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(&ascii_classes(pattern))
}

/// The pattern with `\d`, `\w`, `\s` and `\b` made ASCII.
pub fn ascii_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len().saturating_add(32));
    // Depth of bracketed classes (`[:digit:]` inside a class nests one).
    let mut depth = 0usize;
    // Just after `[` or `[^`, where a `]` is a literal.
    let mut class_start = false;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        let at_start = std::mem::take(&mut class_start);
        match c {
            '\\' => match chars.next() {
                Some(k @ ('d' | 'w' | 's')) => {
                    let name = match k {
                        'd' => "[:digit:]",
                        'w' => "[:word:]",
                        _ => "[:space:]",
                    };
                    if depth == 0 {
                        out.push('[');
                        out.push_str(name);
                        out.push(']');
                    } else {
                        out.push_str(name);
                    }
                }
                Some('b') if depth == 0 => out.push_str(r"(?-u:\b)"),
                Some(k) => {
                    out.push('\\');
                    out.push(k);
                }
                None => out.push('\\'),
            },
            '[' => {
                depth = depth.saturating_add(1);
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
                class_start = true;
            }
            ']' if depth > 0 && !at_start => {
                depth -= 1;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_become_ascii_outside_and_inside_brackets() {
        assert_eq!(ascii_classes(r"\d+"), "[[:digit:]]+");
        assert_eq!(ascii_classes(r"\w\s"), "[[:word:]][[:space:]]");
        assert_eq!(ascii_classes(r"[\d,]"), "[[:digit:],]");
        assert_eq!(ascii_classes(r#"[^'"\s]+"#), r#"[^'"[:space:]]+"#);
        assert_eq!(ascii_classes(r"\bx\b"), r"(?-u:\b)x(?-u:\b)");
    }

    #[test]
    fn escapes_negations_and_literal_brackets_are_kept() {
        // An escaped backslash then `d` is two literals.
        assert_eq!(ascii_classes(r"\\d"), r"\\d");
        // Negated classes stay Unicode (ASCII ones could match half a character).
        assert_eq!(ascii_classes(r"\S\W\D\B"), r"\S\W\D\B");
        // `]` first in a class is a literal; the class ends at the next one.
        assert_eq!(ascii_classes(r"[]\d]\d"), "[][:digit:]][[:digit:]]");
        assert_eq!(ascii_classes(r"[^]\s]"), "[^][:space:]]");
        assert_eq!(ascii_classes(r"\[\d\]"), r"\[[[:digit:]]\]");
        assert_eq!(ascii_classes(r"[[:alpha:]\d]"), "[[:alpha:][:digit:]]");
    }

    #[test]
    fn compiled_patterns_match_ascii_and_keep_unicode_where_asked() {
        let re = compile(r"\b(\d+) (\w+)\s(\S+)$").unwrap();
        let c = re.captures("x 12 ab\tpäth").unwrap();
        assert_eq!((&c[1], &c[2], &c[3]), ("12", "ab", "päth"));
        // Arabic-Indic digits are not numbers here; `\w` stops at `ä`.
        assert!(!compile(r"^\d+$").unwrap().is_match("٣٤"));
        assert!(!compile(r"^\w+$").unwrap().is_match("päth"));
        // `\b` is an ASCII boundary: after `ä` (not an ASCII word character).
        assert!(compile(r"ä\bx").unwrap().is_match("äx"));
    }
}
