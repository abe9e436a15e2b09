//! `oomkit lint`: configuration discovered per file (walking up from each linted file,
//! as ruff does) and the semantic model's rules, through the binary.

use std::fs;
use std::path::Path;

use crate::support::cli;

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(p, text).expect("write");
}

const LOAD: &str = "from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained(name)\nprint(model.generate(ids))\n";
const EMPTY_CACHE: &str = "import torch\nfor batch in loader:\n    loss = model(batch)\n    loss.backward()\n    torch.cuda.empty_cache()\n";
const LEAK: &str =
    "losses = []\nfor batch in loader:\n    loss = model(batch)\n    losses.append(loss)\n";

/// Two projects side by side, linted from their common parent (and from an unrelated
/// directory): each file reads the pins and `[tool.oomkit.lint]` of its own project,
/// not the working directory's.
#[test]
fn each_file_reads_the_configuration_of_its_own_project_from_any_directory() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path();
    // `new` requires transformers 5 (OOM201 moot) and ignores OOM101 except in tests/,
    // which has its own pyproject; `old` pins transformers 4
    write(root, "new/requirements.txt", "transformers>=5.0\n");
    write(
        root,
        "new/pyproject.toml",
        "[tool.oomkit.lint]\nignore = [\"OOM101\"]\nexclude = [\"legacy/\"]\n",
    );
    write(root, "new/src/infer.py", LOAD);
    write(root, "new/src/leak.py", LEAK);
    write(root, "new/legacy/old.py", EMPTY_CACHE);
    write(root, "new/tests/pyproject.toml", "[tool.oomkit.lint]\n");
    write(root, "new/tests/leak.py", LEAK);
    write(root, "old/requirements.txt", "transformers>=4.40,<5\n");
    write(root, "old/src/infer.py", LOAD);
    write(root, "elsewhere/README", "not a project\n");

    cli(&["lint", "new", "old"])
        .cwd(root)
        .run()
        .code(1)
        .stdout_has("new/tests/leak.py:4:5: OOM101")
        .stdout_has("old/src/infer.py:2:9: OOM201")
        .stdout_has("Found 2 problems.");

    // the same from an unrelated directory, by relative and by absolute paths
    let elsewhere = root.join("elsewhere");
    cli(&["lint", "../new"])
        .cwd(&elsewhere)
        .run()
        .code(1)
        .stdout_has("../new/tests/leak.py:4:5: OOM101")
        .stdout_has("Found 1 problem.");
    // a file named on the command line is linted even when excluded
    cli(&["lint", "../new/src", "../new/legacy/old.py"])
        .cwd(&elsewhere)
        .run()
        .code(1)
        .stdout_has("../new/legacy/old.py:5:5: OOM105")
        .stdout_has("Found 1 problem.");
    let old = root.join("old/src/infer.py");
    cli(&["lint", old.to_str().expect("utf-8")])
        .cwd(&elsewhere)
        .run()
        .code(1)
        .stdout_has("infer.py:2:9: OOM201");

    // standard input takes the configuration of `--stdin-filename`'s directory
    cli(&["lint", "-", "--stdin-filename", "../new/src/piped.py"])
        .stdin(LOAD)
        .cwd(&elsewhere)
        .run()
        .code(0);

    // a broken configuration fails only the files under it, naming it
    write(
        root,
        "old/pyproject.toml",
        "[tool.oomkit.lint]\nselekt = []\n",
    );
    cli(&["lint", "new", "old"])
        .cwd(root)
        .run()
        .code(2)
        .stderr_has("old/pyproject.toml")
        .stdout_has("new/tests/leak.py:4:5");
}

/// The lint v3 fixtures through the binary: each file's `# expect:` markers are exactly
/// the findings of its rule (with `--preview`, as every rule's fixture runs),
/// and the messages state the consequence that holds there.
#[test]
fn lint_v3_fixtures_give_their_markers_and_messages_through_the_binary() {
    let dir = crate::lint_fixtures();
    let cases: &[(&str, &str, &str)] = &[
        (
            "OOM102_periodic_reset.py",
            "OOM102",
            "stays alive until `running_loss` is next reset",
        ),
        (
            "OOM102_backpropagated_helper_value.py",
            "OOM102",
            "keeping every step's graph alive",
        ),
        (
            "OOM101_returned_outputs.py",
            "OOM101",
            "the function returns it",
        ),
        (
            "OOM101_lightning_epoch_outputs.py",
            "OOM101",
            "until the epoch ends",
        ),
        ("OOM104_grad_free_spellings.py", "OOM104", "autograd keeps"),
        ("OOM108.py", "OOM108", "retain_graph=True"),
        (
            "OOM202_single_process_path.py",
            "OOM202",
            "`checkpoint` stays alive on the GPU",
        ),
        ("OOM116.py", "OOM116", "without `.detach()`"),
    ];
    for (file, code, words) in cases {
        let source = fs::read_to_string(dir.join(file)).expect("fixture");
        let mut want: Vec<u64> = source
            .lines()
            .enumerate()
            .filter(|(_, l)| l.contains(&format!("# expect: {code}")))
            .map(|(i, _)| i as u64 + 1)
            .collect();
        want.sort_unstable();
        let doc = cli(&[
            "lint",
            "--preview",
            "--select",
            code,
            "--format",
            "json",
            file,
        ])
        .cwd(&dir)
        .run()
        .code(1)
        .json();
        let found = doc["diagnostics"].as_array().expect("diagnostics");
        let mut got: Vec<u64> = found
            .iter()
            .map(|d| d["line"].as_u64().expect("line"))
            .collect();
        got.sort_unstable();
        assert_eq!(got, want, "{file}");
        assert!(
            found
                .iter()
                .any(|d| d["message"].as_str().expect("message").contains(words)),
            "{file}: {found:?}"
        );
    }
    // the fix offered fits the value: a batch of logits is not `.item()`-able
    cli(&["lint", "--select", "OOM101", "OOM101_returned_outputs.py"])
        .cwd(&dir)
        .run()
        .code(1)
        .stdout_has("help: Store `out.logits.detach().cpu()`");
    // OOM116 runs by default (promoted from preview)
    cli(&["lint", "OOM116.py"])
        .cwd(&dir)
        .run()
        .code(1)
        .stdout_has("OOM116");
}
