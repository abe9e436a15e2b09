//! Property tests: no input makes `lint_source`, `fix_source` or `source::decode`
//! panic, and every run ends. Small inputs and 256 cases per property keep
//! them fast on a 2-core CI; `fuzz/` (cargo-fuzz, nightly) explores further.
#![allow(clippy::indexing_slicing, clippy::string_slice)] // test code: a bad index is a failed test

use std::path::Path;
use std::sync::OnceLock;

use oomkit_lint::{Settings, fix_source, lint_source, source};
use proptest::prelude::*;

fn fixtures() -> &'static [String] {
    static FIXTURES: OnceLock<Vec<String>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut out: Vec<String> = std::fs::read_dir(dir)
            .expect("fixtures")
            .filter_map(|e| e.ok().map(|e| e.path()))
            // the main fixture of each rule (scenario files `OOMxxx_*.py` may be clean)
            .filter(|p| {
                p.extension().is_some_and(|x| x == "py")
                    && p.file_stem()
                        .is_some_and(|s| !s.to_string_lossy().contains('_'))
            })
            .map(|p| std::fs::read_to_string(p).expect("fixture"))
            .collect();
        out.sort();
        assert!(out.len() >= 10, "fixtures found: {}", out.len());
        out
    })
}

/// Python-ish pieces: brackets, strings, comments, indentation, multi-byte text and
/// the names the rules look for.
const PIECES: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "'",
    "\"",
    "\"\"\"",
    "f'{",
    "}'",
    "#",
    "# noqa",
    "# noqa: OOM101",
    "\n",
    "\n    ",
    "\t",
    " ",
    ":",
    ",",
    ".",
    "=",
    "+=",
    "%",
    "-",
    "not ",
    "lambda: ",
    "if ",
    "else ",
    "for batch in loader:",
    "while True:",
    "with torch.no_grad():",
    "def f(x):",
    "class M(nn.Module):",
    "loss",
    "model(batch)",
    ".append(",
    ".backward()",
    ".item()",
    "torch.cuda.amp.autocast()",
    "optimizer.step()",
    "zero_grad()",
    "清理显存",
    "é",
    "\u{feff}",
    "\r\n",
    "\\",
    "0x",
    "1e",
    "@",
    "**",
    ":=",
    "yield ",
    "return ",
    "global x",
];

fn soup() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(PIECES), 0..80).prop_map(|v| v.concat())
}

/// Every rule, the opt-in categories included.
fn all_rules() -> Settings {
    Settings {
        rules: oomkit_lint::RuleSet::all(),
        ..Settings::default()
    }
}

/// Runs every entry point; only a panic (or a hang) fails.
fn exercise(text: &str) {
    let settings = all_rules();
    let _ = lint_source("p.py", text, &settings);
    let _ = fix_source("p.py", text, &settings);
    // the same text as a notebook, and wrapped in one code cell
    let _ = oomkit_lint::lint_notebook("p.ipynb", text, &settings);
    let cell = serde_json::json!({"cells": [{"cell_type": "code", "source": text}]});
    let _ = oomkit_lint::lint_notebook("p.ipynb", &cell.to_string(), &settings);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        exercise(&text);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(decoded) = source::decode(&bytes) {
            exercise(&decoded.text);
            let _ = source::encode(&bytes, &decoded, &decoded.text);
        }
        exercise(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn python_like_soup_never_panics(text in soup()) {
        exercise(&text);
    }

    #[test]
    fn mutated_fixtures_never_panic(
        which in any::<proptest::sample::Index>(),
        at in any::<proptest::sample::Index>(),
        cut in 0usize..40,
        insert in soup(),
    ) {
        let fixture = which.get(fixtures());
        let mut at = at.index(fixture.len() + 1);
        while !fixture.is_char_boundary(at) {
            at -= 1;
        }
        let mut end = (at + cut).min(fixture.len());
        while !fixture.is_char_boundary(end) {
            end -= 1;
        }
        let mutated = format!("{}{insert}{}", &fixture[..at], &fixture[end..]);
        exercise(&mutated);
    }
}

/// The mutations start from files that parse and have findings.
#[test]
fn the_fixtures_being_mutated_parse_and_have_findings() {
    for f in fixtures() {
        let diags = lint_source("f.py", f, &all_rules()).expect("fixture parses");
        assert!(!diags.is_empty(), "{}", &f[..80.min(f.len())]);
    }
}
