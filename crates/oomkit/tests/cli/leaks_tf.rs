//! `oomkit leaks` on a TensorFlow/Keras program, through the binary, with the
//! stand-in `tensorflow`/`keras` (`crates/oomkit_leaks/tests/fixtures/fake_tf`):
//! the hook's coarse grain runs for real (the Keras callback it adds to
//! `Model.fit`, eager `apply_gradients`, `--marker`, the walk from the
//! program's names, the store line); only TensorFlow is a stand-in.

use std::path::{Path, PathBuf};

use crate::probe::python;
use crate::support::{Cli, cli};

fn fake() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_leaks/tests/fixtures/fake_tf")
}

fn leaks(extra: &[&str], mode: &str) -> Cli {
    cli(&["leaks"])
        .args(extra)
        .args(&["--", python(), "train.py", mode])
        .cwd(fake())
        .env("PYTHONPATH", fake())
}

#[test]
fn a_keras_callback_keeping_outputs_is_a_tensors_leak_at_the_coarse_grain() {
    leaks(&[], "fit-leak")
        .run()
        .code(1)
        .stdout_has("start fit-leak\n")
        .stdout_has("leaks after 10 Keras steps of `")
        .stdout_has("TensorFlow, coarse grain: bytes of tensors, variables, Keras models and numpy arrays per named holder")
        .stdout_has("leak 1 of 1: +512 bytes per step")
        .stdout_has("holder:  `kept` (a global of __main__)")
        .stdout_has("stored:  train.py:28: kept.append(self.model(tf.zeros((8, 16))))")
        .stdout_has("kind:    tensors — ");
    let j = leaks(&["--format", "json"], "fit-leak")
        .run()
        .code(1)
        .json();
    assert_eq!(j["framework"], "tensorflow");
    assert_eq!(j["grain"], "holders");
    assert_eq!(j["clock"], "keras");
    assert_eq!(j["steps"], 10);
    assert_eq!(j["completed"], true);
    assert_eq!(j["versions"]["tensorflow"], "0.0+stand-in");
    let all = j["leaks"].as_array().unwrap();
    assert_eq!(all.len(), 1, "{j}");
    let l = &all[0];
    assert_eq!(l["file"], "train.py");
    assert_eq!(l["line"], 28);
    assert_eq!(l["kind"], "tensors");
    assert_eq!(l["bytes_per_step"], 512, "8×16 float32 per batch");
    assert_eq!(l["holder"]["text"], "kept");
    assert_eq!(
        l["lint"],
        serde_json::Value::Null,
        "the lint rules are PyTorch's"
    );
    assert_eq!(
        l["sites"].as_array().map(Vec::len),
        Some(0),
        "no creation sites"
    );
}

#[test]
fn a_model_built_every_step_is_params_and_kept_arrays_are_host() {
    let j = leaks(&["--format", "json"], "params").run().code(1).json();
    assert_eq!(
        j["clock"], "optimizer",
        "eager apply_gradients counts steps"
    );
    let l = &j["leaks"][0];
    assert_eq!(l["kind"], "params");
    assert_eq!(l["line"], 43);
    assert_eq!(l["holder"]["text"], "snapshots");
    assert_eq!(
        l["bytes_per_step"], 1024,
        "a 16×16 float32 kernel per model"
    );
    let j = leaks(&["--format", "json"], "host").run().code(1).json();
    let l = &j["leaks"][0];
    assert_eq!(l["kind"], "host");
    assert_eq!(l["line"], 45);
    assert_eq!(l["holder"]["text"], "arrays");
}

#[test]
fn a_float_per_batch_is_clean_and_the_marker_counts_steps() {
    leaks(&[], "fit-clean")
        .run()
        .code(0)
        .stdout_has("no leak: no memory made in one step stayed alive and kept growing");
    let j = leaks(&["--marker", "__main__:step", "--format", "json"], "marker")
        .run()
        .code(1)
        .json();
    assert_eq!(j["clock"], "marker");
    assert_eq!(j["leaks"][0]["holder"]["text"], "cache");
    assert_eq!(j["leaks"][0]["bytes_per_step"], 256);
}

#[test]
fn keras_2_is_hooked_as_keras_3_is() {
    // `import tf_keras` (Keras 2; `tf.keras` under TF_USE_LEGACY_KERAS=1):
    // its own Model.fit gets the step callback, its optimizer counts steps.
    let j = leaks(&["--format", "json"], "keras2-fit-leak")
        .run()
        .code(1)
        .json();
    assert_eq!(j["clock"], "keras");
    assert_eq!(j["steps"], 10);
    let l = &j["leaks"][0];
    assert_eq!(
        (l["kind"].as_str(), l["line"].as_u64()),
        (Some("tensors"), Some(28))
    );
    assert_eq!(l["holder"]["text"], "kept");
    let j = leaks(&["--format", "json"], "keras2-params")
        .run()
        .code(1)
        .json();
    assert_eq!(j["clock"], "optimizer");
    assert_eq!(j["leaks"][0]["kind"], "params");
    assert_eq!(j["leaks"][0]["line"], 43);
    leaks(&[], "keras2-fit-clean")
        .run()
        .code(0)
        .stdout_has("no leak");
}

#[test]
fn a_program_with_no_step_exits_2_saying_so() {
    leaks(&[], "none")
        .run()
        .code(2)
        .stdout_has("end none")
        .stderr_has("no step was seen: no optimizer step, no batch drawn from a DataLoader, no Keras batch, no call of --marker");
}
