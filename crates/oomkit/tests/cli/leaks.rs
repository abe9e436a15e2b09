//! `oomkit leaks` through the binary, on the stand-in torch
//! (`crates/oomkit_leaks/tests/fixtures/fake_torch`): the hook's Python runs
//! for real (creation sites through its TorchDispatchMode, step boundaries,
//! the holder walk, the store line), only torch is a stand-in.

use std::path::{Path, PathBuf};

use crate::probe::python;
use crate::support::{Cli, cli, exit_2_usage};

fn fake() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_leaks/tests/fixtures/fake_torch")
}

/// `oomkit leaks [extra] -- python train.py MODE`, run in the fake's folder.
fn leaks(extra: &[&str], mode: &str) -> Cli {
    let mut c = cli(&["leaks"])
        .args(extra)
        .args(&["--", python(), "train.py", mode]);
    c = c.cwd(fake()).env("PYTHONPATH", fake());
    c
}

#[test]
fn a_list_of_losses_is_a_graph_leak_with_its_store_line_and_fix() {
    leaks(&[], "leak")
        .run()
        .code(1)
        .stdout_has("leaks after 10 optimizer steps of `")
        .stdout_has("holder:  `losses` (a global of __main__)")
        .stdout_has("stored:  train.py:45: losses.append(loss)")
        .stdout_has("created: train.py:41 (<module>) +4 bytes per step")
        .stdout_has("kind:    graph — ")
        .stdout_has("train.py:45: losses.append(loss.item())")
        .stdout_has("lint:    OOM101");
    let j = leaks(&["--format", "json"], "leak").run().code(1).json();
    assert_eq!(j["version"], 1);
    assert_eq!(j["steps"], 10);
    assert_eq!(j["clock"], "optimizer");
    assert_eq!(j["completed"], true);
    let l = &j["leaks"][0];
    assert_eq!(l["file"], "train.py");
    assert_eq!(l["line"], 45);
    assert_eq!(l["kind"], "graph");
    assert_eq!(l["bytes_per_step"], 4);
    assert_eq!(l["holder"]["text"], "losses");
    assert_eq!(l["fix"]["code"], "losses.append(loss.item())");
    assert_eq!(l["lint"], "OOM101");
    assert_eq!(j["leaks"].as_array().unwrap().len(), 1);
}

#[test]
fn item_accumulation_and_a_bounded_window_are_clean() {
    leaks(&[], "clean")
        .run()
        .code(0)
        .stdout_has("no leak: no memory made in one step stayed alive and kept growing");
    leaks(&[], "window")
        .run()
        .code(0)
        .stdout_has("no leak")
        .stdout_has("1 creation site(s) grew and then stopped");
    let j = leaks(&["--format", "json"], "clean").run().code(0).json();
    assert_eq!(j["leaks"], serde_json::json!([]));
}

#[test]
fn a_running_total_keeps_a_growing_graph() {
    leaks(&[], "graph")
        .run()
        .code(1)
        .stdout_has("holder:  `total` (a global of __main__), through the autograd graph")
        .stdout_has("stored:  train.py:51: total = total + loss")
        .stdout_has("autograd nodes per step")
        .stdout_has("train.py:51: total = (total + loss).item()")
        .stdout_has("lint:    OOM102");
}

#[test]
fn a_functions_mutable_default_is_the_holder_and_its_body_the_store_line() {
    leaks(&[], "default")
        .run()
        .code(1)
        .stdout_has("holder:  `track.__defaults__[0]`")
        .stdout_has("stored:  helpers.py:6: history.append(loss)")
        .stdout_has("helpers.py:6: history.append(loss.item())");
    let j = leaks(&["--format", "json"], "default").run().code(1).json();
    let l = &j["leaks"][0];
    assert_eq!(l["holder"]["text"], "track.__defaults__[0]");
    assert_eq!(l["holder"]["store"]["line"], 6);
    assert_eq!(l["line"], 6);
}

#[test]
fn dataloader_batches_are_the_steps_of_an_evaluation_loop() {
    leaks(&["--steps", "6"], "eval")
        .run()
        .code(1)
        .stdout_has("leaks after 6 DataLoader batches of `")
        .stdout_has("stored:  train.py:32: outputs.append(out)");
}

#[test]
fn a_marker_function_counts_the_steps() {
    leaks(&["--marker", "__main__:train_step"], "marker")
        .run()
        .code(1)
        .stdout_has("10 calls of the marker function")
        .stdout_has("holder:  `kept`")
        .stdout_has("stored:  train.py:37: kept.append(loss)");
}

#[test]
fn the_hook_prints_nothing_and_the_output_passes_through() {
    // Two steps: too few (exit 2), the program's own lines are untouched.
    let ran = leaks(&[], "few").run();
    ran.code(2)
        .stdout_is("start few\nend\n")
        .stderr_has("only 2 step(s) were seen, too few to tell growth from warm-up");
    let plain = std::process::Command::new(python())
        .args(["train.py", "few"])
        .current_dir(fake())
        .env("PYTHONPATH", fake())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "start few\nend\n");
}

#[test]
fn a_program_that_fails_before_its_first_step_is_exit_2_with_its_explanation() {
    leaks(&[], "fail")
        .run()
        .code(2)
        .stderr_has("exited 1; no step was seen")
        .stderr_has("ValueError");
    // Not a PyTorch program.
    cli(&["leaks", "--", python(), "-c", "print(1)"])
        .run()
        .code(2)
        .stderr_has("it never imported torch or tensorflow in its main process");
    cli(&["leaks", "--", "/nonexistent/oomkit-no-such-program"])
        .run()
        .code(127);
}

#[test]
fn bad_arguments_exit_2() {
    exit_2_usage(
        &cli(&["leaks"]),
        &[
            (&["--steps", "3", "--", "python3", "x.py"], "--steps"),
            (&["--steps", "0", "--", "python3", "x.py"], "--steps"),
            (&["--steps", "many", "--", "python3", "x.py"], "--steps"),
            (&["--steps", "1001", "--", "python3", "x.py"], "--steps"),
            (
                &["--marker", "train_step", "--", "python3", "x.py"],
                "MODULE:FUNCTION",
            ),
            (
                &["--marker", "a:b:c", "--", "python3", "x.py"],
                "MODULE:FUNCTION",
            ),
            (&["--format", "xml", "--", "python3", "x.py"], "--format"),
            (&[], "CMD"),
        ],
    );
    cli(&["leaks", "--grace", "0s", "--", "python3", "x.py"])
        .run()
        .code(2)
        .stderr_one_line()
        .stderr_has("--grace");
}

#[test]
fn a_failure_inside_the_hook_never_reaches_the_program() {
    // The optimizer-hook API raises: the hook records it and turns that clock
    // off; the program runs to its end as it would without oomkit.
    leaks(&[], "leak")
        .env("FAKE_TORCH_BROKEN_HOOKS", "1")
        .run()
        .code(2)
        .stdout_is("start leak\nend\n")
        .stderr_has(
            "the hook failed: optimizer hook: RuntimeError: step hooks are not supported here",
        )
        .stderr_has("no step was seen");
}

#[test]
fn a_program_that_ends_before_the_steps_is_reported_from_what_it_ran() {
    // Six steps of ten: the program ends by itself, its output is whole, and
    // the leak is found from the steps it ran (one leak, one holder).
    let j = cli(&[
        "leaks",
        "--format",
        "json",
        "--",
        python(),
        "train.py",
        "leak",
        "6",
    ])
    .cwd(fake())
    .env("PYTHONPATH", fake())
    .run()
    .code(1)
    .json();
    assert_eq!(j["steps"], 6);
    assert_eq!(j["completed"], false);
    assert_eq!(j["leaks"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(j["leaks"][0]["line"], 45);
    assert_eq!(j["leaks"][0]["holder"]["scope"], "global");
}
