//! Hostile input to `oomkit estimate` through the real binary: one
//! test per bug seen by users, each checking the exit status and the message.
//! Hostile files are written at test time into a temporary folder.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use super::estimate::est;
use super::{json, stderr, stdout};

/// Exit 2 with `needle` in the one-line error.
#[track_caller]
fn refused(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(2), "{}{}", stdout(out), stderr(out));
    let err = stderr(out);
    assert!(err.contains(needle), "wanted {needle:?} in: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert_eq!(stdout(out), "");
}

/// A small llama config.json with `key` replaced by `value`.
fn config_with(dir: &Path, extra: &str) -> String {
    let text = format!(
        r#"{{"model_type":"llama","hidden_size":256,"num_hidden_layers":4,"num_attention_heads":8,"vocab_size":1000,"intermediate_size":688,"max_position_embeddings":2048{extra}}}"#
    );
    let path = dir.join("config.json");
    std::fs::write(&path, text).expect("write config");
    path.to_string_lossy().into_owned()
}

fn gguf_string(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

fn gguf_head(n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(n_tensors.to_le_bytes());
    b.extend(n_kv.to_le_bytes());
    b
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write");
    p.to_string_lossy().into_owned()
}

// --- silent integer overflow → "fits" -------------------------------------

/// `--params 1e19` printed savings of "1254815.65 GiB" and a plan; now the
/// count is refused against the documented limit.
#[test]
fn params_1e19_is_refused_not_a_fit() {
    let out = est(&["--params", "1e19", "--gpu", "rtx-4090"]);
    refused(
        &out,
        "--params 1e19 is above the limit of 1125899906842624 parameters",
    );
    // Past u64 the message still names what was written, not a saturated number.
    let out = est(&["--params", "1e30", "--gpu", "rtx-4090"]);
    refused(
        &out,
        "--params 1e30 is above the limit of 1125899906842624 parameters",
    );
}

#[test]
fn lora_rank_near_2_pow_64_is_refused() {
    let out = est(&[
        "gpt2",
        "--task",
        "train",
        "--method",
        "lora",
        "--lora-rank",
        "18446744073709551615",
        "--gpu",
        "rtx-4090",
    ]);
    refused(
        &out,
        "--lora-rank 18446744073709551615 is above the limit of 65536",
    );
}

#[test]
fn bare_shape_near_2_pow_64_is_refused() {
    for (flag, limit) in [
        ("--vocab", "16777216"),
        ("--intermediate", "4194304"),
        ("--hidden", "1048576"),
        ("--layers", "100000"),
    ] {
        let out = est(&[
            "--params",
            "7B",
            flag,
            "18446744073709551615",
            "--gpu",
            "rtx-4090",
        ]);
        refused(
            &out,
            &format!("{flag} is 18446744073709551615, above the limit of {limit}"),
        );
    }
}

#[test]
fn vllm_batched_tokens_near_2_pow_64_is_refused() {
    let out = est(&[
        "gpt2",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "h100-sxm",
        "--max-num-batched-tokens",
        "18446744073709551615",
    ]);
    refused(
        &out,
        "--max-num-batched-tokens 18446744073709551615 is above the limit of 16777216",
    );
}

#[test]
fn huge_image_sizes_are_refused() {
    refused(
        &est(&["sd15", "--images", "1000000000", "--gpu", "rtx-4090"]),
        "--images 1000000000 is above the limit of 4096",
    );
    refused(
        &est(&["sdxl", "--width", "1099511627776", "--height", "1024"]),
        "--width/--height at most 16384 pixels",
    );
}

/// Eager attention at the largest accepted sequence: the a·s²·b scores pass
/// 2^64; the size gate says so instead of wrapping.
#[test]
fn eager_scores_beyond_u64_are_refused() {
    let out = est(&[
        "llama-3.1-8b",
        "--attention",
        "eager",
        "--seq",
        "16777216",
        "--batch",
        "256",
        "--gpu",
        "h100-sxm",
    ]);
    refused(&out, "this configuration needs more than 1 EiB");
}

/// config.json numbers around 10^12 wrapped to a small model that "fit".
#[test]
fn config_fields_around_1e12_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (extra, needle) in [
        (
            r#","hidden_size":1000000000000"#,
            "hidden_size is 1000000000000",
        ),
        (
            r#","num_hidden_layers":1000000000000"#,
            "num_hidden_layers is 1000000000000",
        ),
        (
            r#","vocab_size":1000000000000"#,
            "vocab_size is 1000000000000",
        ),
        (
            r#","intermediate_size":1000000000000"#,
            "intermediate_size is 1000000000000",
        ),
        (
            r#","num_attention_heads":1000000000000,"num_key_value_heads":1"#,
            "num_attention_heads is 1000000000000",
        ),
        (
            r#","num_local_experts":1000000000000"#,
            "num_experts is 1000000000000",
        ),
        (
            r#","model_type":"bert","max_position_embeddings":1000000000000"#,
            "learned position rows (max_position_embeddings + type_vocab_size) is 1000000000002",
        ),
    ] {
        let cfg = config_with(dir.path(), extra);
        let out = est(&[&cfg, "--gpu", "rtx-4090"]);
        refused(&out, needle);
    }
}

// --- hangs ----------------------------------------------------------------

/// Four billion layers: an error at once, not a loop per layer.
#[test]
fn billions_of_layers_end_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config_with(dir.path(), r#","num_hidden_layers":4000000000"#);
    let t = Instant::now();
    let out = est(&[&cfg, "--task", "train", "--gpu", "rtx-4090"]);
    refused(
        &out,
        "num_hidden_layers is 4000000000, above the limit of 100000",
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

/// At the layer limit, with MoE (per-layer sums), a fit and a plan: every
/// loop over layers and plan steps is closed-form or capped.
#[test]
fn hundred_thousand_layers_estimate_quickly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config_with(
        dir.path(),
        r#","num_hidden_layers":100000,"num_local_experts":64,"num_experts_per_tok":8,"moe_intermediate_size":64"#,
    );
    for task in ["train", "infer"] {
        let t = Instant::now();
        let out = est(&[
            &cfg, "--task", task, "--gpu", "rtx-4090", "--format", "json",
        ]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let j = json(&out);
        assert_eq!(j["model"]["layers"], 100_000);
        assert_eq!(j["fit"]["fits"], false);
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{task}: {:?}",
            t.elapsed()
        );
    }
}

/// A million GPUs for inference printed a million-entry `max_memory` map
/// (14 s, 17 MB): more layer groups than layers is refused.
#[test]
fn more_gpu_groups_than_layers_is_refused() {
    let t = Instant::now();
    let out = est(&["gpt2", "--gpus", "1048576", "--gpu", "rtx-4090"]);
    refused(
        &out,
        "--gpus 1048576 makes 1048576 groups of --tp 1 for the 12 layers of openai-community/gpt2",
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

// --- stack overflow and header sizes ---------------------------------------

#[test]
fn gguf_deeply_nested_arrays_hit_the_depth_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = gguf_head(0, 1);
    gguf_string(&mut b, "general.architecture");
    b.extend(9u32.to_le_bytes());
    for _ in 0..1_000_000 {
        b.extend(9u32.to_le_bytes());
        b.extend(1u64.to_le_bytes());
    }
    let f = write(dir.path(), "nested.gguf", &b);
    refused(&est(&[&f]), "arrays nested more than 8 deep");
}

#[test]
fn gguf_claimed_counts_and_lengths_beyond_the_bytes_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(dir.path(), "tensors.gguf", &gguf_head(1 << 62, 0));
    refused(
        &est(&[&f]),
        "the header claims 4611686018427387904 tensors and 0 key-value pairs, more than fit the 64.00 MiB header limit",
    );
    let f = write(dir.path(), "kv.gguf", &gguf_head(0, 1 << 62));
    refused(&est(&[&f]), "4611686018427387904 key-value pairs");
    let mut b = gguf_head(0, 1);
    b.extend((1u64 << 63).to_le_bytes());
    let f = write(dir.path(), "string.gguf", &b);
    refused(
        &est(&[&f]),
        "string length 9223372036854775808 is beyond the 64.00 MiB header limit",
    );
}

#[test]
fn safetensors_length_prefix_of_2_pow_60_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config_with(dir.path(), "");
    let mut b = (1u64 << 60).to_le_bytes().to_vec();
    b.extend(b"{}");
    write(dir.path(), "model.safetensors", &b);
    refused(
        &est(&[&cfg]),
        "claims a 1152921504606846976-byte header, over the 16.00 MiB limit",
    );
}

// --- unbounded memory ------------------------------------------------------

#[cfg(unix)]
#[test]
fn endless_devices_are_refused_within_the_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A GGUF name on an endless device: the header read stops at its limit.
    let gguf = dir.path().join("zero.gguf");
    std::os::unix::fs::symlink("/dev/zero", &gguf).expect("symlink");
    refused(&est(&[&gguf.to_string_lossy()]), "no GGUF magic");
    // An index on an endless device beside a config.json.
    config_with(dir.path(), "");
    let index = dir.path().join("model.safetensors.index.json");
    std::os::unix::fs::symlink("/dev/zero", &index).expect("symlink");
    refused(
        &est(&[&index.to_string_lossy()]),
        "is larger than the 32.00 MiB limit",
    );
}

/// A FIFO (what `<(cat config.json)` gives) is still read.
#[cfg(unix)]
#[test]
fn config_from_a_fifo_still_works() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("config.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            std::fs::write(
                &fifo,
                r#"{"model_type":"llama","hidden_size":256,"num_hidden_layers":4,"num_attention_heads":8,"vocab_size":1000}"#,
            )
        })
    };
    let out = est(&[&fifo.to_string_lossy(), "--format", "json"]);
    writer.join().expect("writer").expect("write fifo");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json(&out)["model"]["layers"], 4);
}

// --- nonsense flag combinations --------------------------------------------

#[test]
fn empty_lora_targets_are_refused() {
    let out = est(&[
        "gpt2",
        "--task",
        "train",
        "--method",
        "lora",
        "--lora-targets",
        "",
    ]);
    refused(&out, "--lora-targets is empty");
    let out = est(&[
        "gpt2",
        "--task",
        "train",
        "--method",
        "lora",
        "--lora-targets",
        "nope",
    ]);
    refused(&out, "--lora-targets \"nope\" matches no linear layer");
}

#[test]
fn qlora_with_int8_is_refused() {
    let out = est(&[
        "gpt2", "--task", "train", "--method", "qlora", "--quant", "int8",
    ]);
    refused(
        &out,
        "--method qlora quantizes the frozen base to NF4, not --quant int8: use --quant nf4 or nf4-dq",
    );
}

#[test]
fn fsdp_with_another_zero_stage_is_refused() {
    let out = est(&["gpt2", "--task", "train", "--fsdp", "--zero", "1"]);
    refused(&out, "--fsdp (full shard) is ZeRO stage 3, not --zero 1");
    // --fsdp with --zero 3 says the same thing twice: fine.
    let out = est(&["gpt2", "--task", "train", "--fsdp", "--zero", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn training_flags_with_inference_are_refused() {
    for flags in [
        &["--optimizer", "adamw"][..],
        &["--grad-checkpointing"],
        &["--lora-rank", "16"],
        &["--zero", "2"],
        &["--grad-accum", "4"],
        &["--offload", "optimizer"],
        &["--trainer"],
    ] {
        let mut args = vec!["gpt2", "--task", "infer"];
        args.extend_from_slice(flags);
        refused(
            &est(&args),
            &format!("{} applies to --task train", flags[0]),
        );
    }
    refused(
        &est(&["sd15", "--optimizer", "sgd"]),
        "--optimizer applies to --task train on text models",
    );
    refused(
        &est(&["gpt2", "--task", "train", "--new-tokens", "64"]),
        "--new-tokens applies to --task infer",
    );
    refused(
        &est(&["gpt2", "--task", "train", "--kv-dtype", "fp8"]),
        "--kv-dtype applies to inference",
    );
    refused(
        &est(&["gpt2", "--max-model-len", "4096"]),
        "--max-model-len applies to --engine vllm --task serve",
    );
}

/// Defaults never trigger a combination error.
#[test]
fn defaults_are_not_combination_errors() {
    for args in [
        &["gpt2"][..],
        &["gpt2", "--task", "train"],
        &["gpt2", "--task", "train", "--method", "lora"],
        &["gpt2", "--task", "train", "--method", "qlora"],
        &["gpt2", "--task", "train", "--fsdp", "--gpus", "2"],
        &["sd15"],
    ] {
        let out = est(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn seq_beyond_the_context_is_a_warning() {
    let out = est(&[
        "gpt2",
        "--seq",
        "1000",
        "--new-tokens",
        "100",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = json(&out);
    let w = j["warnings"].as_array().expect("warnings array");
    assert_eq!(w.len(), 1, "{w:?}");
    let w = w[0].as_str().expect("string");
    assert!(
        w.contains("--seq 1000 + --new-tokens 100 = 1100 tokens is beyond the 1024-token context"),
        "{w}"
    );
    let out = est(&["gpt2", "--seq", "2048"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("warning: --seq 2048 is beyond the 1024-token context"),
        "{}",
        stdout(&out)
    );
    // Within the context: an empty array, always present.
    let j = json(&est(&["gpt2", "--seq", "1024", "--format", "json"]));
    assert_eq!(j["warnings"], serde_json::json!([]));
    let j = json(&est(&["sd15", "--format", "json"]));
    assert_eq!(j["warnings"], serde_json::json!([]));
}

#[test]
fn ambiguous_gpu_names_list_the_variants() {
    refused(
        &est(&["gpt2", "--gpu", "a100"]),
        "ambiguous GPU \"a100\": a100-40gb, a100-pcie-40gb, a100-80gb, a100-pcie-80gb",
    );
    // H100 PCIe and SXM share 80 GB: the family name takes the smaller.
    let h100 = est(&["gpt2", "--gpu", "h100"]);
    assert_eq!(h100.status.code(), Some(0), "{}", stderr(&h100));
    assert!(stdout(&h100).contains("on h100-pcie"), "{}", stdout(&h100));
    refused(
        &est(&["gpt2", "--gpu", "v100"]),
        "ambiguous GPU \"v100\": v100-16gb, v100-32gb, v100-pcie-16gb, v100-pcie-32gb",
    );
    for exact in ["a100-80gb", "rtx-a6000", "4090", "H100 80GB HBM3"] {
        let out = est(&["gpt2", "--gpu", exact]);
        assert_eq!(out.status.code(), Some(0), "{exact}: {}", stderr(&out));
    }
}
