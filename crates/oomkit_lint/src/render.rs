//! Text renderings of diagnostics: the concise human form (styled; the binary strips
//! styles off a terminal), GitHub workflow annotations and `--statistics`.

use std::collections::BTreeMap;
use std::fmt::Write;

use anstyle::{AnsiColor, Style};

use oomkit_core::text::escape;

use crate::diagnostic::Diagnostic;

const PATH: Style = Style::new().bold();
const CODE: Style = AnsiColor::Red.on_default().bold();
const HELP: Style = AnsiColor::Cyan.on_default().bold();

/// `path:line:col: OOM101 message` and an indented `help:` line per diagnostic.
/// The path and the texts quoting the source pass through [`escape`], so
/// control characters reach a terminal as text.
pub fn human(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let fixable = if d.fixable { " [*]" } else { "" };
        let cell = d.cell.map(|c| format!("cell {c}:")).unwrap_or_default();
        let _ = writeln!(
            out,
            "{PATH}{}{PATH:#}:{cell}{}:{}: {CODE}{}{CODE:#}{fixable} {}",
            escape(&d.path),
            d.line,
            d.column,
            d.code,
            escape(&d.message)
        );
        let _ = writeln!(out, "  {HELP}help{HELP:#}: {}", escape(&d.fix));
    }
    out
}

/// The closing summary line (`Found 3 problems (1 fixable with --fix).`).
pub fn summary(diagnostics: &[Diagnostic], fixed: usize) -> String {
    let n = diagnostics.len();
    let fixable = diagnostics.iter().filter(|d| d.fixable).count();
    let mut s = match n {
        0 => "All checks passed!".to_string(),
        1 => "Found 1 problem".to_string(),
        _ => format!("Found {n} problems"),
    };
    if fixed > 0 {
        let _ = write!(s, " ({fixed} fixed)");
    }
    if n > 0 && fixable > 0 {
        let _ = write!(s, " ({fixable} fixable with `--fix`)");
    }
    if n > 0 {
        s.push('.');
    }
    s
}

/// GitHub workflow commands: `::warning file=…,line=…::…`.
pub fn github(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let _ = writeln!(
            out,
            "::warning title=oomkit ({code}{cell}),file={file},line={l},col={c},endLine={el},endColumn={ec}::{code} {msg}",
            code = d.code,
            cell = d.cell.map(|c| format!(", cell {c}")).unwrap_or_default(),
            file = escape_property(&d.path),
            l = d.line,
            c = d.column,
            el = d.end_line,
            ec = d.end_column,
            msg = escape_data(&format!("{} (help: {})", d.message, d.fix)),
        );
    }
    out
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// `--statistics`: count, code, name, one line per rule that fired.
pub fn statistics(diagnostics: &[Diagnostic]) -> String {
    let mut counts: BTreeMap<&str, (usize, &str, bool)> = BTreeMap::new();
    for d in diagnostics {
        let e = counts.entry(d.code).or_insert((0, d.name, false));
        e.0 = e.0.saturating_add(1);
        e.2 |= d.fixable;
    }
    let mut out = String::new();
    for (code, (n, name, fixable)) in counts {
        let f = if fixable { "[*] " } else { "" };
        let _ = writeln!(out, "{n:>5}\t{code}\t{f}{name}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_annotations_escape_newlines_and_commas_in_paths() {
        let d = Diagnostic {
            code: "OOM101",
            name: "tensor-appended-in-loop",
            message: "a\nb".into(),
            fix: "c".into(),
            remedy: None,
            fixable: false,
            path: "a,b.py".into(),
            cell: None,
            line: 1,
            column: 2,
            end_line: 1,
            end_column: 3,
            pending: Default::default(),
        };
        assert_eq!(
            github(&[d]),
            "::warning title=oomkit (OOM101),file=a%2Cb.py,line=1,col=2,endLine=1,endColumn=3::OOM101 a%0Ab (help: c)\n"
        );
    }
}
