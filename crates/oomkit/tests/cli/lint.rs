//! `oomkit lint` through the binary: every rule fixture in every output format, exit
//! codes, errors, noqa, selection, pyproject configuration, .gitignore, `--fix`,
//! `--explain`, `--statistics`, standard input.

use std::fs;
use std::path::Path;

use serde_json::Value;

use super::support::{cli, exit_2_says};
use super::{json, lint_fixtures, run_in, stderr, stdout};

fn markers(source: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        if let Some((_, rest)) = line.split_once("# expect:") {
            for code in rest.split_whitespace() {
                out.push((code.to_string(), i as u64 + 1));
            }
        }
    }
    out.sort();
    out
}

const CODES: &[&str] = &[
    "OOM101", "OOM102", "OOM103", "OOM104", "OOM105", "OOM106", "OOM107", "OOM108", "OOM109",
    "OOM110", "OOM111", "OOM112", "OOM201", "OOM202", "OOM203", "OOM204", "OOM205", "OOM206",
    "OOM207", "OOM113", "OOM114", "OOM115", "OOM116", "OOM117",
];

#[test]
fn every_rule_fixture_gives_its_markers_in_every_format() {
    let dir = lint_fixtures();
    for code in CODES {
        let file = format!("{code}.py");
        let source = fs::read_to_string(dir.join(&file)).expect("fixture");
        let want = markers(&source);

        let out = run_in(
            &dir,
            &[
                "lint",
                "--preview",
                "--select",
                code,
                "--format",
                "json",
                &file,
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(1), "{file}: {}", stderr(&out));
        let doc = json(&out);
        assert_eq!(doc["version"], 1);
        assert_eq!(doc["errors"], Value::Array(vec![]));
        let diags = doc["diagnostics"].as_array().expect("diagnostics");
        let mut got: Vec<(String, u64)> = diags
            .iter()
            .map(|d| {
                (
                    d["code"].as_str().expect("code").to_string(),
                    d["line"].as_u64().expect("line"),
                )
            })
            .collect();
        got.sort();
        assert_eq!(got, want, "{file} (json)");
        for d in diags {
            for key in ["name", "message", "fix", "path"] {
                assert!(
                    d[key].as_str().is_some_and(|s| !s.is_empty()),
                    "{file}: {key} in {d}"
                );
            }
            for key in ["column", "end_line", "end_column"] {
                assert!(
                    d[key].as_u64().is_some_and(|n| n > 0),
                    "{file}: {key} in {d}"
                );
            }
            assert_eq!(d["path"], file.as_str());
        }

        let out = run_in(&dir, &["lint", "--preview", "--select", code, &file], None);
        assert_eq!(out.status.code(), Some(1));
        let text = stdout(&out);
        let heads: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("{file}:")))
            .collect();
        let helps = text.lines().filter(|l| l.starts_with("  help: ")).count();
        assert_eq!(heads.len(), want.len(), "{file} (human):\n{text}");
        assert_eq!(helps, want.len(), "{file} (human)");
        for (h, (c, line)) in heads.iter().zip(&want) {
            assert!(
                h.starts_with(&format!("{file}:{line}:")) && h.contains(&format!(" {c} ")),
                "{h}"
            );
        }
        assert!(!text.contains('\u{1b}'), "no colour off a terminal");

        let out = run_in(
            &dir,
            &[
                "lint",
                "--preview",
                "--select",
                code,
                "--format",
                "sarif",
                &file,
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(1));
        let sarif = json(&out);
        assert_eq!(sarif["version"], "2.1.0");
        let results = sarif["runs"][0]["results"].as_array().expect("results");
        assert_eq!(results.len(), want.len(), "{file} (sarif)");
        for r in results {
            assert_eq!(r["ruleId"], *code);
            assert_eq!(
                r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                file.as_str()
            );
            assert!(
                r["locations"][0]["physicalLocation"]["region"]["startLine"]
                    .as_u64()
                    .is_some()
            );
        }
        let rules = sarif["runs"][0]["tool"]["driver"]["rules"]
            .as_array()
            .expect("rules");
        assert_eq!(rules.len(), CODES.len());

        let out = run_in(
            &dir,
            &[
                "lint",
                "--preview",
                "--select",
                code,
                "--format",
                "github",
                &file,
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(1));
        let text = stdout(&out);
        assert_eq!(text.lines().count(), want.len(), "{file} (github)");
        for (l, (c, line)) in text.lines().zip(&want) {
            assert!(
                l.starts_with("::warning ")
                    && l.contains(&format!("file={file},line={line},"))
                    && l.contains(&format!("::{c} ")),
                "{l}"
            );
        }
    }
}

#[test]
fn clean_corpus_exits_0() {
    let out = run_in(&lint_fixtures(), &["lint", "clean"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "All checks passed!\n");
}

#[test]
fn human_output_matches_snapshot() {
    let out = run_in(
        &lint_fixtures(),
        &[
            "lint",
            "--extend-select",
            "upgrade",
            "OOM102.py",
            "OOM109.py",
        ],
        None,
    );
    insta::assert_snapshot!(stdout(&out));
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, text).expect("write");
}

const LEAK: &str =
    "losses = []\nfor batch in loader:\n    loss = model(batch)\n    losses.append(loss)\n";

#[test]
fn a_syntax_error_is_an_error_not_a_rule_code_and_other_files_are_still_linted() {
    let tmp = tempfile::tempdir().expect("tmp");
    write(tmp.path(), "bad.py", "def f(:\n    pass\n");
    write(tmp.path(), "train.py", LEAK);
    write(tmp.path(), "latin1.py", "");
    fs::write(tmp.path().join("latin1.py"), b"x = '\xe9'\n").expect("write");
    let out = cli(&["lint", "--format", "json"]).cwd(tmp.path()).run();
    let doc = out.code(2).json();
    let diags = doc["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0]["code"], "OOM101");
    assert_eq!(diags[0]["path"], "train.py");
    let errors = doc["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0]["path"], "bad.py");
    assert_eq!(errors[0]["line"], 1);
    assert!(
        errors[0]["message"]
            .as_str()
            .expect("msg")
            .starts_with("syntax error")
    );
    assert_eq!(errors[1]["path"], "latin1.py");
    out.stderr_has("error: bad.py:1:7: syntax error")
        .stderr_has("error: latin1.py: not valid UTF-8");
}

/// Arguments the lint refuses: exit 2, one `error:` line naming the input.
#[test]
fn bad_arguments_are_one_error_line() {
    exit_2_says(
        &cli(&["lint"]).cwd(lint_fixtures()),
        &[
            (&["missing.py"], "missing.py: cannot read"),
            (
                &["--format", "json", "missing.py"],
                "missing.py: cannot read",
            ),
            (
                &["--select", "XYZ9", "OOM101.py"],
                "unknown rule selector `XYZ9`",
            ),
            (
                &["--ignore", "XYZ9", "OOM101.py"],
                "unknown rule selector `XYZ9`",
            ),
            (&["--explain", "OOM999"], "unknown rule `OOM999`"),
        ],
    );
}

#[test]
fn noqa_select_and_ignore() {
    let tmp = tempfile::tempdir().expect("tmp");
    write(
        tmp.path(),
        "t.py",
        "import torch.distributed as dist\nfor batch in loader:\n    loss = model(batch)\n    a.append(loss)  # noqa: OOM101\n    b.append(loss)  # noqa\n    c.append(loss)  # noqa: E501\nstate = torch.load('x.pt')\n",
    );
    let codes = |args: &[&str]| -> Vec<(String, u64)> {
        let mut a = vec!["lint", "--format", "json"];
        a.extend_from_slice(args);
        a.push("t.py");
        let doc = json(&run_in(tmp.path(), &a, None));
        doc["diagnostics"]
            .as_array()
            .expect("diags")
            .iter()
            .map(|d| {
                (
                    d["code"].as_str().expect("c").to_string(),
                    d["line"].as_u64().expect("l"),
                )
            })
            .collect()
    };
    assert_eq!(codes(&[]), vec![("OOM101".into(), 6), ("OOM202".into(), 7)]);
    assert_eq!(codes(&["--select", "OOM2"]), vec![("OOM202".into(), 7)]);
    assert_eq!(codes(&["--ignore", "OOM202"]), vec![("OOM101".into(), 6)]);
    assert_eq!(
        codes(&["--select", "OOM101,OOM202", "--ignore", "OOM1"]),
        vec![("OOM202".into(), 7)]
    );
    assert_eq!(
        codes(&["--select", "torch-load-without-map-location"]),
        vec![("OOM202".into(), 7)]
    );
    cli(&["lint", "--select", "XYZ9", "t.py"])
        .cwd(tmp.path())
        .run()
        .code(2)
        .stderr_has("unknown rule selector `XYZ9`");
}

#[test]
fn pyproject_config_selects_ignores_and_excludes_and_gitignore_is_respected() {
    let tmp = tempfile::tempdir().expect("tmp");
    write(
        tmp.path(),
        "pyproject.toml",
        "[project]\nname = \"x\"\n\n[tool.oomkit.lint]\nignore = [\"OOM202\"]\nexclude = [\"legacy/\"]\n",
    );
    write(
        tmp.path(),
        "train.py",
        &format!("import torch\nstate = torch.load('x.pt')\n{LEAK}"),
    );
    write(tmp.path(), "legacy/old.py", LEAK);
    write(tmp.path(), "build/gen.py", LEAK);
    write(tmp.path(), ".gitignore", "build/\n");
    write(tmp.path(), "notes.txt", LEAK);
    let out = run_in(tmp.path(), &["lint", "--format", "json"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc = json(&out);
    let got: Vec<(String, String)> = doc["diagnostics"]
        .as_array()
        .expect("diags")
        .iter()
        .map(|d| {
            (
                d["path"].as_str().expect("p").to_string(),
                d["code"].as_str().expect("c").to_string(),
            )
        })
        .collect();
    assert_eq!(got, vec![("train.py".to_string(), "OOM101".to_string())]);

    write(
        tmp.path(),
        "pyproject.toml",
        "[tool.oomkit.lint]\nselekt = [\"OOM1\"]\n",
    );
    cli(&["lint"])
        .cwd(tmp.path())
        .run()
        .code(2)
        .stderr_has("pyproject.toml");
}

#[test]
fn fix_rewrites_deprecated_amp_in_place_and_on_stdin() {
    let tmp = tempfile::tempdir().expect("tmp");
    let src = "import torch\nscaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    pass\n";
    let fixed = "import torch\nscaler = torch.amp.GradScaler(\"cuda\")\nwith torch.autocast(\"cuda\"):\n    pass\n";
    write(tmp.path(), "amp.py", src);
    let out = run_in(
        tmp.path(),
        &["lint", "--extend-select", "upgrade", "--fix", "amp.py"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("All checks passed! (2 fixed)"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        fs::read_to_string(tmp.path().join("amp.py")).expect("read"),
        fixed
    );

    let out = run_in(
        tmp.path(),
        &["lint", "--extend-select", "upgrade", "--fix", "-"],
        Some(src.as_bytes()),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), fixed);
}

#[test]
fn stdin_uses_the_given_file_name() {
    let out = run_in(
        &lint_fixtures(),
        &[
            "lint",
            "-",
            "--stdin-filename",
            "train.py",
            "--format",
            "json",
        ],
        Some(LEAK.as_bytes()),
    );
    assert_eq!(out.status.code(), Some(1));
    let doc = json(&out);
    assert_eq!(doc["diagnostics"][0]["path"], "train.py");
    assert_eq!(doc["diagnostics"][0]["line"], 4);
}

#[test]
fn explain_prints_the_rule_doc() {
    let out = run_in(&lint_fixtures(), &["lint", "--explain", "OOM101"], None);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.starts_with("tensor-appended-in-loop (OOM101)\n"),
        "{text}"
    );
    for s in [
        "## What it does",
        "## Why it costs memory",
        "## Example",
        "## Use instead",
        "release-references",
    ] {
        assert!(text.contains(s), "{s}");
    }
    let out = run_in(
        &lint_fixtures(),
        &[
            "lint",
            "--explain",
            "loss-accumulated-with-graph",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(json(&out)["code"], "OOM102");
    // `--explain OOM999`: in `bad_arguments_are_one_error_line`.
}

#[test]
fn statistics_count_per_rule() {
    let out = run_in(
        &lint_fixtures(),
        &[
            "lint",
            "--extend-select",
            "upgrade",
            "--statistics",
            "OOM101.py",
            "OOM109.py",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "    6\tOOM101\ttensor-appended-in-loop\n    8\tOOM109\t[*] deprecated-cuda-amp\n"
    );
}

#[test]
fn pre_commit_hook_runs_oomkit_lint_on_python_files() {
    let hooks = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.pre-commit-hooks.yaml"),
    )
    .expect(".pre-commit-hooks.yaml at the repository root");
    assert!(hooks.contains("id: oomkit-lint"));
    assert!(hooks.contains("entry: oomkit lint"));
    assert!(hooks.contains("types_or: [python, pyi]"));
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    let dir = lint_fixtures();
    let plain = run_in(&dir, &["lint", "--select", "advice", "OOM204.py"], None);
    assert!(!stdout(&plain).contains('\u{1b}'));
    let coloured = run_in(
        &dir,
        &[
            "--color",
            "always",
            "lint",
            "--select",
            "advice",
            "OOM204.py",
        ],
        None,
    );
    assert!(
        stdout(&coloured).contains("\u{1b}["),
        "{}",
        stdout(&coloured)
    );
}

#[test]
fn very_deep_expressions_do_not_crash_and_messages_stay_short() {
    let tmp = tempfile::tempdir().expect("tmp");
    // just under `oomkit_lint::MAX_EXPR_DEPTH` (100,000) with the loop and the call
    let chain = vec!["y"; 99_000].join(" + ");
    write(
        tmp.path(),
        "deep.py",
        &format!("for batch in loader:\n    y = model(batch)\n    xs.append({chain})\n"),
    );
    let out = run_in(tmp.path(), &["lint", "deep.py"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("keeps `y + y + y"),
        "{}",
        &text[..200.min(text.len())]
    );
    assert!(text.contains("Store `(y + y + y"), "parenthesised receiver");
    assert!(text.lines().all(|l| l.len() < 400), "messages are cut");
}

/// Only memory problems run by default; deprecations (`upgrade`) and general
/// advice (`advice`) are opt-in, from the command line or `[tool.oomkit.lint]`.
#[test]
fn only_memory_rules_run_by_default_and_the_other_categories_are_opt_in() {
    let dir = lint_fixtures();
    let files = ["OOM109.py", "OOM203.py", "OOM204.py"];
    let codes = |extra: &[&str]| -> Vec<String> {
        let mut a = vec!["lint", "--format", "json"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&files);
        let doc = json(&run_in(&dir, &a, None));
        let mut c: Vec<String> = doc["diagnostics"]
            .as_array()
            .expect("diags")
            .iter()
            .map(|d| d["code"].as_str().expect("code").to_string())
            .collect();
        c.dedup();
        c
    };
    let out = run_in(&dir, &["lint", "OOM109.py", "OOM203.py", "OOM204.py"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "All checks passed!\n");
    assert_eq!(
        codes(&["--extend-select", "upgrade"]),
        vec!["OOM109", "OOM203"]
    );
    assert_eq!(codes(&["--select", "advice"]), vec!["OOM204"]);
    assert_eq!(codes(&["--extend-select", "OOM204"]), vec!["OOM204"]);

    let tmp = tempfile::tempdir().expect("tmp");
    write(
        tmp.path(),
        "pyproject.toml",
        "[tool.oomkit.lint]\nextend-select = [\"advice\"]\npreview = true\n",
    );
    write(
        tmp.path(),
        "dp.py",
        "import torch\nnet = torch.nn.DataParallel(net)\n",
    );
    let out = run_in(tmp.path(), &["lint", "dp.py"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("OOM204"), "{}", stdout(&out));
}

#[test]
fn explain_states_the_category_and_the_evidence() {
    let out = run_in(&lint_fixtures(), &["lint", "--explain", "OOM109"], None);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("Category: upgrade (opt-in: `--extend-select upgrade` or `--select OOM109`)"),
        "{text}"
    );
    assert!(text.contains("## Evidence it needs"), "{text}");
    let out = run_in(&lint_fixtures(), &["lint", "--explain", "OOM101"], None);
    assert!(stdout(&out).contains("Category: memory (on by default)"));
    let out = run_in(
        &lint_fixtures(),
        &["lint", "--explain", "OOM204", "--format", "json"],
        None,
    );
    let doc = json(&out);
    assert_eq!(doc["category"], "advice");
    assert_eq!(doc["default"], false);
    assert_eq!(doc["preview"], false);
}

/// OOM201 is moot from transformers 5 on (`from_pretrained` keeps the
/// checkpoint's dtype); the project's pins are read from requirements files,
/// `pyproject.toml` and lock files.
#[test]
fn oom201_reads_the_projects_transformers_pin() {
    let tmp = tempfile::tempdir().expect("tmp");
    let script = "from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained(name)\nprint(model.generate(ids))\n";
    write(tmp.path(), "infer.py", script);
    let out = run_in(tmp.path(), &["lint", "infer.py"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("infer.py:2:9: OOM201"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("Found 1 problem."),
        "{}",
        stdout(&out)
    );

    write(tmp.path(), "requirements.txt", "torch\ntransformers>=5.0\n");
    let out = run_in(tmp.path(), &["lint", "infer.py"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    fs::remove_file(tmp.path().join("requirements.txt")).expect("rm");
    write(
        tmp.path(),
        "pyproject.toml",
        "[project]\nname = \"x\"\ndependencies = [\"transformers==5.1.0\"]\n",
    );
    let out = run_in(tmp.path(), &["lint", "infer.py"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    write(
        tmp.path(),
        "pyproject.toml",
        "[project]\nname = \"x\"\ndependencies = [\"transformers>=4.46,<5\"]\n",
    );
    let out = run_in(tmp.path(), &["lint", "infer.py"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
}

/// PyTorch rules never fire on JAX/Flax- or TensorFlow-only files.
#[test]
fn jax_and_tensorflow_files_are_not_checked_by_pytorch_rules() {
    let tmp = tempfile::tempdir().expect("tmp");
    let body =
        "losses = []\nfor batch in loader:\n    loss = model(batch)\n    losses.append(loss)\n";
    write(
        tmp.path(),
        "flax_train.py",
        &format!("import jax\nimport optax\n{body}"),
    );
    write(
        tmp.path(),
        "tf_train.py",
        &format!("import tensorflow as tf\n{body}"),
    );
    write(
        tmp.path(),
        "torch_train.py",
        &format!("import torch\n{body}"),
    );
    let out = run_in(tmp.path(), &["lint", "--select", "ALL", "."], None);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("torch_train.py:5:5: OOM101"), "{text}");
    assert!(
        !text.contains("flax_train.py") && !text.contains("tf_train.py"),
        "{text}"
    );
    // real files: Flax's MNIST example and keras-io's TensorFlow training loop
    let out = run_in(
        &lint_fixtures(),
        &["lint", "--select", "ALL", "--preview", "frameworks"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "All checks passed!\n");
}

/// OOM115 (objects recreated in the training loop) runs on TensorFlow/Keras
/// files, which every PyTorch rule skips: in a TensorFlow-only file with a PyTorch-looking
/// leak and a Keras `compile` in a loop, only OOM115 fires (a default rule since it met
/// the precision bar).
#[test]
fn object_recreated_in_loop_runs_on_tensorflow_files_without_the_pytorch_rules() {
    let tmp = tempfile::tempdir().expect("tmp");
    write(
        tmp.path(),
        "tf_train.py",
        "import tensorflow as tf\n\
         losses = []\n\
         for batch in loader:\n\
         \x20   loss = model(batch)\n\
         \x20   losses.append(loss)\n\
         for episode in range(episodes):\n\
         \x20   model.compile(optimizer=\"adam\", loss=\"mse\")\n\
         \x20   model.fit(x, y)\n",
    );
    let out = run_in(tmp.path(), &["lint", "."], None);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let out = run_in(
        tmp.path(),
        &[
            "lint",
            "--select",
            "ALL",
            "--preview",
            "--format",
            "json",
            ".",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let found: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let codes: Vec<(String, u64)> = found["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| {
            (
                d["code"].as_str().expect("code").to_string(),
                d["line"].as_u64().expect("line"),
            )
        })
        .collect();
    assert_eq!(codes, vec![("OOM115".to_string(), 7)], "{}", stdout(&out));
    // the fixtures: seven findings in OOM115.py, none in the PyTorch scenario
    let out = run_in(
        &lint_fixtures(),
        &[
            "lint",
            "--preview",
            "--select",
            "object-recreated-in-loop",
            "--statistics",
            "OOM115.py",
            "OOM115_pytorch_optimizer.py",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out)
            .trim_start()
            .starts_with("7\tOOM115\tobject-recreated-in-loop"),
        "{}",
        stdout(&out)
    );
    let out = run_in(tmp.path(), &["lint", "--explain", "OOM115"], None);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.starts_with("object-recreated-in-loop (OOM115)")
            && text.contains("## Evidence it needs")
            && text.contains("Category: memory (on by default)"),
        "{text}"
    );
}

/// The lint v2 recall set (`bench/lint/recall/`): a total summing what a same-file step
/// helper backpropagates and returns (transformers#6999) is OOM102, and
/// `torch.load(args.ckpt)` in a distributed script is OOM202 (stylegan2-pytorch#31).
#[test]
fn recall_fixes_find_helper_returned_losses_and_args_checkpoint_paths() {
    let dir = lint_fixtures();
    let out = run_in(
        &dir,
        &[
            "lint",
            "--format",
            "json",
            "OOM102_helper_returns_backpropagated.py",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let lines: Vec<(String, u64)> = doc["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| {
            (
                d["code"].as_str().expect("code").to_string(),
                d["line"].as_u64().expect("line"),
            )
        })
        .collect();
    assert_eq!(
        lines,
        vec![("OOM102".to_string(), 35), ("OOM102".to_string(), 65)],
        "{}",
        stdout(&out)
    );
    let out = run_in(&dir, &["lint", "OOM202_args_path.py"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("OOM202_args_path.py:35:16: OOM202") && text.contains("Found 1 problem."),
        "{text}"
    );
}

/// A `torch.load` in a loader helper that nothing calls (a script's leftover)
/// is not flagged; one that is called, in this file or from another file of the tree,
/// is. (OOM202 only: the script also builds DDP without `set_device`, OOM207.)
#[test]
fn a_loader_helper_nothing_calls_is_not_flagged() {
    let dir = lint_fixtures();
    let out = run_in(
        &dir,
        &["lint", "--select", "OOM202", "OOM202_uncalled_helper.py"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = run_in(
        &dir,
        &["lint", "--select", "OOM202", "OOM202_called_helper.py"],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("OOM202_called_helper.py:35:18: OOM202"),
        "{}",
        stdout(&out)
    );
    // another file of the tree imports the helper: it may be called, so it is flagged
    let tmp = tempfile::tempdir().expect("tmp");
    let helper = fs::read_to_string(dir.join("OOM202_uncalled_helper.py")).expect("fixture");
    write(tmp.path(), "train_elastic.py", &helper);
    let out = run_in(tmp.path(), &["lint", "--select", "OOM202", "."], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    write(
        tmp.path(),
        "resume.py",
        "from train_elastic import load_checkpoint\nstate = load_checkpoint('ckpt.pt')\n",
    );
    let out = run_in(tmp.path(), &["lint", "--select", "OOM202", "."], None);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("train_elastic.py:27:13: OOM202"),
        "{}",
        stdout(&out)
    );
}

/// A checkpoint written from CPU tensors in another file of the linted tree
/// (accelerate's FSDP utilities) is loaded without `map_location` by a test script:
/// flagged when the script is linted alone, not when the tree is.
#[test]
fn a_checkpoint_written_from_cpu_elsewhere_in_the_tree_is_not_flagged() {
    let dir = lint_fixtures().join("tree/accelerate_merge_weights");
    let out = run_in(&dir, &["lint", "test_merge_weights.py"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("test_merge_weights.py:50:26: OOM202"),
        "{}",
        stdout(&out)
    );
    let out = run_in(&dir, &["lint", "."], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = run_in(
        &dir,
        &["lint", "test_merge_weights.py", "fsdp_utils.py"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn the_summary_counts_in_the_singular_too() {
    let tmp = tempfile::tempdir().expect("tmp");
    write(tmp.path(), "t.py", LEAK);
    write(tmp.path(), "bad.py", "def f(:\n");
    cli(&["lint", "t.py", "bad.py"])
        .cwd(tmp.path())
        .run()
        .code(2)
        .stdout_has("Found 1 problem; 1 file could not be linted.");
}

/// New rules run only with `--preview` (or `preview = true`), even when selected.
#[test]
fn preview_rules_run_only_with_preview() {
    let dir = lint_fixtures();
    for code in ["OOM111", "OOM112", "OOM114", "OOM117"] {
        let file = format!("{code}.py");
        let out = run_in(&dir, &["lint", "--select", code, &file], None);
        assert_eq!(out.status.code(), Some(0), "{code}: {}", stdout(&out));
        let out = run_in(&dir, &["lint", &file], None);
        assert_eq!(out.status.code(), Some(0), "{code}: {}", stdout(&out));
        let out = run_in(&dir, &["lint", "--preview", &file], None);
        assert_eq!(out.status.code(), Some(1), "{code}: {}", stdout(&out));
        assert!(stdout(&out).contains(code), "{}", stdout(&out));
    }
    let out = run_in(&dir, &["lint", "--explain", "OOM114"], None);
    assert!(
        stdout(&out).contains("Category: memory (preview: runs only with `--preview`)"),
        "{}",
        stdout(&out)
    );
}

/// Notebooks are linted; findings name the cell and the line in it.
#[test]
fn notebooks_are_linted_cell_by_cell() {
    let tmp = tempfile::tempdir().expect("tmp");
    let nb = r##"{"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
         "source": ["%matplotlib inline\n", "import torch\n", "losses = []\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 2,
         "source": ["for batch in loader:\n", "    loss = model(batch)\n", "    losses.append(loss)\n"]}
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"##;
    write(tmp.path(), "nbs/train.ipynb", nb);
    write(tmp.path(), "broken.ipynb", "{\"cells\": 1}");
    let out = run_in(tmp.path(), &["lint", "nbs"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("nbs/train.ipynb:cell 3:3:5: OOM101"),
        "{}",
        stdout(&out)
    );
    let doc = json(&run_in(
        tmp.path(),
        &["lint", "--format", "json", "nbs/train.ipynb"],
        None,
    ));
    let d = &doc["diagnostics"][0];
    assert_eq!((d["cell"].as_u64(), d["line"].as_u64()), (Some(3), Some(3)));
    let sarif = json(&run_in(
        tmp.path(),
        &["lint", "--format", "sarif", "nbs/train.ipynb"],
        None,
    ));
    assert_eq!(sarif["runs"][0]["results"][0]["properties"]["cell"], 3);
    cli(&["lint", "broken.ipynb"])
        .cwd(tmp.path())
        .run()
        .code(2)
        .stderr_has("broken.ipynb: not a Jupyter notebook");
}

#[test]
fn default_rules_honour_the_evidence_of_issue_19s_false_classes() {
    // Reduced from real projects (each fixture cites its source): a checkpoint written
    // from CPU tensors, per-rank shards, a whole model reloaded on purpose, losses read
    // from `no_grad` outputs, evaluation under a project decorator or `no_grad` callers,
    // a DataParallel fallback next to DDP (advice, opt-in), LoRA bases under ZeRO/FSDP,
    // an FSDP config used only to load, an in-memory broadcast, a DDP setup whose device
    // is set by a helper (preview rules run too).
    let dir = lint_fixtures();
    let clean = [
        "OOM202_cpu_saved_checkpoint.py",
        "OOM202_per_rank_shards.py",
        "OOM202_whole_model.py",
        "OOM101_no_grad_output_in_eval_loop.py",
        "OOM204_ddp_fallback.py",
        "OOM201_peft_sharded.py",
        "OOM206_load_only.py",
        "OOM202_in_memory_broadcast.py",
        "OOM207_set_device_helper.py",
    ];
    let mut args = vec!["lint", "--preview"];
    args.extend_from_slice(&clean);
    let out = run_in(&dir, &args, None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "All checks passed!\n");

    // by default, exactly the marked lines: the helper that one caller runs with
    // gradients on, the accelerate-style evaluation loop of run_glue_no_trainer.py, the
    // FSDP full state dict gathered on every rank's GPU at save time, only the PyTorch
    // loads of a file that also loads TensorFlow and Flax models
    for file in [
        "OOM104_grad_off_decorator_and_callers.py",
        "OOM104_accelerate_no_trainer.py",
        "OOM206_accelerate_plugin.py",
        "OOM201_tf_flax_classes.py",
    ] {
        let doc = json(&run_in(&dir, &["lint", "--format", "json", file], None));
        let got: Vec<(String, u64)> = doc["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .map(|d| {
                (
                    d["code"].as_str().expect("code").to_string(),
                    d["line"].as_u64().expect("line"),
                )
            })
            .collect();
        let source = fs::read_to_string(dir.join(file)).expect("fixture");
        assert_eq!(got, markers(&source), "{file}");
    }

    let doc = json(&run_in(
        &dir,
        &[
            "lint",
            "--select",
            "advice",
            "--format",
            "json",
            "OOM204_ddp_fallback.py",
        ],
        None,
    ));
    assert_eq!(doc["diagnostics"].as_array().map(Vec::len), Some(2));
}
