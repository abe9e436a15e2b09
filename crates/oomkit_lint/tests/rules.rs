//! Rule fixtures: `fixtures/OOMxxx.py` marks each flagged line with
//! `# expect: OOMxxx` (repeated for several findings on one line); everything else in
//! the file is clean code that must not be flagged. Each fixture runs with its own rule
//! only (one test per rule, named by its code); the findings' (code, line) multiset
//! must equal the markers, and the messages are snapshotted. The clean corpus
//! (`fixtures/clean/`) must give no finding with every rule on.
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

/// The fixtures of a rule: `OOMxxx.py` (must flag something) and any
/// `OOMxxx_<scenario>.py` (a real-project scenario; may be clean, e.g. the negative
/// cases that need a file of their own because the rule reads whole-file evidence).
fn fixtures_of(dir: &Path, code: &str) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name == format!("{code}.py")
                || (name.starts_with(&format!("{code}_")) && name.ends_with(".py"))
        })
        .collect();
    out.sort();
    out
}

/// Runs the fixtures of rule `code` with that rule only: `OOMxxx.py` must
/// exist and flag something, every fixture's findings must equal its markers,
/// and every fixture's messages are snapshotted (`rules__<fixture>.snap`).
fn check_rule(code: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let files = fixtures_of(&dir, code);
    assert!(
        files.iter().any(|f| f.ends_with(format!("{code}.py"))),
        "{code} needs a fixture"
    );
    let mut failures = Vec::new();
    let mut snapshots = Vec::new();
    for path in files {
        let source = std::fs::read_to_string(&path).expect("fixture");
        let settings = Settings {
            rules: RuleSet::matching(code).expect("code"),
            ..Settings::default()
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_string();
        let diags = lint_source(&name, &source, &settings).expect("fixture parses");
        let mut got: Vec<(String, usize)> =
            diags.iter().map(|d| (d.code.to_string(), d.line)).collect();
        got.sort();
        let want = expected(&source);
        if name == format!("{code}.py") {
            assert!(!want.is_empty(), "{name} has no flagged example");
        }
        if got != want {
            failures.push(format!("{name}:\n  expected {want:?}\n  got      {got:?}"));
        }
        snapshots.push((name.trim_end_matches(".py").to_string(), plain(&diags)));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for (name, text) in snapshots {
        insta::assert_snapshot!(name, text);
    }
}

/// One test per rule, named by its code (`cargo test -p oomkit_lint --test
/// rules OOM101`), and the list of codes they cover.
macro_rules! rule_tests {
    ($($code:ident)*) => {
        $(
            #[test]
            #[allow(non_snake_case)]
            fn $code() {
                check_rule(stringify!($code));
            }
        )*
        const TESTED: &[&str] = &[$(stringify!($code)),*];
    };
}

rule_tests! {
    OOM101 OOM102 OOM103 OOM104 OOM105 OOM106 OOM107 OOM108 OOM109 OOM110 OOM111 OOM112
    OOM113 OOM114 OOM115 OOM116 OOM117
    OOM201 OOM202 OOM203 OOM204 OOM205 OOM206 OOM207
}

/// A new rule gets its line in `rule_tests!` (and its fixture); a removed one
/// loses it.
#[test]
fn every_rule_has_a_test() {
    let mut registered: Vec<&str> = RULES.iter().map(|r| r.code).collect();
    let mut tested = TESTED.to_vec();
    registered.sort_unstable();
    tested.sort_unstable();
    assert_eq!(
        tested, registered,
        "rule_tests! in tests/rules.rs must list exactly the registered rules"
    );
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
        let diags = lint_source(
            name,
            &source,
            &Settings {
                rules: RuleSet::all(),
                ..Settings::default()
            },
        )
        .expect("parses");
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
    let upgrade = Settings {
        rules: RuleSet::matching("upgrade").expect("category"),
        ..Settings::default()
    };
    let fixed = oomkit_lint::fix_source("t.py", src, &upgrade).expect("parses");
    assert_eq!(fixed.fixed, 2);
    assert_eq!(
        fixed.source,
        "import torch\nscaler = torch.amp.GradScaler(\"cuda\")\nwith torch.autocast(\"cuda\", dtype=torch.float16):\n    pass\n"
    );
    assert!(fixed.diagnostics.is_empty());
}

#[test]
fn oom201_is_silent_when_the_project_requires_transformers_5() {
    let src = "from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained(name)\n";
    let mut project = oomkit_lint::Project::default();
    let flagged = lint_source("t.py", src, &Settings::default()).expect("parses");
    assert_eq!(flagged.len(), 1);
    project.read("requirements.txt", "torch\ntransformers>=5.0\n");
    let settings = Settings {
        project,
        ..Settings::default()
    };
    assert!(
        lint_source("t.py", src, &settings)
            .expect("parses")
            .is_empty()
    );
}

#[test]
fn jax_and_tensorflow_only_files_are_not_checked_by_pytorch_rules() {
    let body = "xs = []\nfor batch in loader:\n    loss = model(batch)\n    xs.append(loss)\n";
    let all = Settings {
        rules: RuleSet::all(),
        ..Settings::default()
    };
    for (imports, findings) in [
        ("import jax\nimport flax.linen as nn\n", 0),
        ("import tensorflow as tf\n", 0),
        (
            "from transformers import FlaxAutoModelForCausalLM\nimport optax\n",
            0,
        ),
        ("import torch\nimport jax\n", 1),
        ("", 1),
    ] {
        let src = format!("{imports}{body}");
        let got = lint_source("t.py", &src, &all).expect("parses");
        assert_eq!(got.len(), findings, "{imports}");
    }
}
