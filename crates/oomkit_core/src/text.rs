//! Text taken from an input (a log line, a file name, a frame name, a source
//! line) made safe to print on a terminal.
//!
//! Why: a terminal acts on control characters. A frame name in a snapshot or a
//! line in a log holding `ESC ] 0 ; … BEL` retitles the window, `ESC [ 2 J`
//! clears the screen, a bare `CR` overwrites what was printed before. Every
//! string that comes from an input passes through [`escape`] before it is
//! printed as text, so it reaches the terminal as visible characters.
//!
//! What is escaped: the C0 controls (U+0000–U+001F) except TAB, DEL (U+007F)
//! and the C1 controls (U+0080–U+009F, which include the 8-bit CSI, U+009B),
//! each as `\u{XX}` — Rust's `char::escape_unicode` form — except `\t`, `\n`
//! and `\r`, which read better in their short form when they are escaped (for
//! a one-line field). A backslash is left as it is: the output is for a
//! reader, and a literal `\u{1b}` in an input is as harmless as its escape.

use std::borrow::Cow;

/// Whether `c` is a control character a terminal would act on: C0 (except
/// TAB), DEL, or C1.
fn is_control(c: char) -> bool {
    c != '\t' && c.is_control()
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        _ => {
            use std::fmt::Write as _;
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// `s` for one line of output: every control character escaped, including
/// newlines and tabs (a file name, a frame name, a quoted log line).
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control()) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().saturating_add(8));
    for c in s.chars() {
        if c.is_control() {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` for a block of lines: like [`escape`], but newlines and tabs are kept
/// (a source excerpt, several log lines); a `CR` before a newline is dropped
/// (Windows line ends), any other `CR` is escaped.
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && is_control(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().saturating_add(8));
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if c != '\n' && is_control(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(escape("train.py:12 forward"), Cow::Borrowed(_)));
        assert!(matches!(escape_lines("a\n\tb\n"), Cow::Borrowed(_)));
        assert_eq!(escape("émoji ✓ 中文"), "émoji ✓ 中文");
    }

    #[test]
    fn escapes_reach_the_terminal_as_text() {
        assert_eq!(escape("\u{1b}]0;pwned\u{7}x"), "\\u{1b}]0;pwned\\u{7}x");
        assert_eq!(escape("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escape("csi\u{9b}31m"), "csi\\u{9b}31m");
        assert_eq!(escape("del\u{7f}"), "del\\u{7f}");
        assert_eq!(escape("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(escape("nul\0"), "nul\\u{0}");
    }

    #[test]
    fn lines_keep_newlines_and_tabs() {
        assert_eq!(escape_lines("a\r\n\tb\u{1b}[2J\rc"), "a\n\tb\\u{1b}[2J\\rc");
    }
}
