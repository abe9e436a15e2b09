//! Rule fixtures: `fixtures/OOMxxx.py` marks each flagged line with
//! `# expect: OOMxxx` (repeated for several findings on one line); everything else in
//! the file is clean code that must not be flagged. Each fixture runs with its own rule
//! only; the findings' (code, line) multiset must equal the markers, and the messages
//! are snapshotted. The clean corpus (`fixtures/clean/`) must give no finding with every
//! rule on.
#![allow(clippy::indexing_slicing, clippy::string_slice)] // test code: a bad index is a failed test

use std::path::Path;

use oomkit_lint::{Diagnostic, RULES, RuleSet, Settings, lint_source};

fn plain(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(|d| {
            format!(
                "{}:{}-{}:{} {} {}\n  help: {}\n",
                d.line, d.column, d.end_line, d.end_column, d.code, d.message, d.fix
            )
        })
        .collect()
}

fn expected(source: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        if let Some((_, rest)) = line.split_once("# expect:") {
            for code in rest.split_whitespace() {
                out.push((code.to_string(), i + 1));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_rule_has_a_fixture_and_each_fixture_matches_its_markers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut failures = Vec::new();
    let mut snapshots = Vec::new();
    for rule in RULES {
        let path = dir.join(format!("{}.py", rule.code));
        let source = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} needs a fixture: {e}", rule.code));
        let settings = Settings {
            rules: RuleSet::matching(rule.code).expect("code"),
        };
        let name = format!("{}.py", rule.code);
        let diags = lint_source(&name, &source, &settings).expect("fixture parses");
        let mut got: Vec<(String, usize)> =
            diags.iter().map(|d| (d.code.to_string(), d.line)).collect();
        got.sort();
        let want = expected(&source);
        assert!(!want.is_empty(), "{name} has no flagged example");
        if got != want {
            failures.push(format!("{name}:\n  expected {want:?}\n  got      {got:?}"));
        }
        snapshots.push((rule.code, plain(&diags)));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for (code, text) in snapshots {
        insta::assert_snapshot!(code, text);
    }
}

#[test]
fn clean_corpus_of_real_training_loops_has_no_findings() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clean");
    let mut findings = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("clean corpus") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("py") {
            continue;
        }
        files += 1;
        let source = std::fs::read_to_string(&path).expect("read");
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let diags = lint_source(name, &source, &Settings::default()).expect("parses");
        findings.extend(
            diags
                .into_iter()
                .map(|d| format!("{}:{}: {} {}", d.path, d.line, d.code, d.message)),
        );
    }
    assert!(files >= 5, "the clean corpus is missing");
    assert!(
        findings.is_empty(),
        "false positives:\n{}",
        findings.join("\n")
    );
}

#[test]
fn syntax_errors_are_errors_not_rule_codes() {
    let err = lint_source("bad.py", "def f(:\n    pass\n", &Settings::default())
        .expect_err("invalid Python");
    assert!(err.to_string().starts_with("bad.py:1:"), "{err}");
}

#[test]
fn noqa_silences_the_named_code_or_everything() {
    let src = "for b in loader:\n    loss = model(b)\n    xs.append(loss)  # noqa: OOM101\n    ys.append(loss)  # noqa\n    zs.append(loss)  # noqa: OOM102\n";
    let diags = lint_source("t.py", src, &Settings::default()).expect("parses");
    let lines: Vec<_> = diags.iter().map(|d| (d.code, d.line)).collect();
    assert_eq!(lines, vec![("OOM101", 5)]);
}

#[test]
fn fix_rewrites_deprecated_amp_calls() {
    let src = "import torch\nscaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast(dtype=torch.float16):\n    pass\n";
    let fixed = oomkit_lint::fix_source("t.py", src, &Settings::default()).expect("parses");
    assert_eq!(fixed.fixed, 2);
    assert_eq!(
        fixed.source,
        "import torch\nscaler = torch.amp.GradScaler(\"cuda\")\nwith torch.autocast(\"cuda\", dtype=torch.float16):\n    pass\n"
    );
    assert!(fixed.diagnostics.is_empty());
}
