//! `oomkit estimate --zero K` through the binary against DeepSpeed 0.19.8
//! run for real on its CPU accelerator over gloo
//! (`bench/estimate-oracle/deepspeed_oracle.py`: the peak of live tensor
//! storages on one rank over two training steps; the `OD-…` rows of
//! `crates/oomkit_estimate/tests/accuracy_sharded.json`). The buckets are
//! Hugging Face's `auto` values, passed as numbers.

use super::support::{cli, estimate_bytes};

/// The estimate for a bf16 full fine-tune with AdamW and SDPA.
fn zero(
    model: &str,
    stage: &str,
    gpus: &str,
    batch: &str,
    seq: &str,
    extra: &[&str],
) -> serde_json::Value {
    let mut args = vec![
        "estimate",
        model,
        "--task",
        "train",
        "--method",
        "full",
        "--precision",
        "bf16",
        "--optimizer",
        "adamw",
        "--attention",
        "sdpa",
        "--batch",
        batch,
        "--seq",
        seq,
        "--gpus",
        gpus,
        "--zero",
        stage,
        "--contiguous-gradients",
        "on",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    cli(&args).run().code(0).json()
}

/// Within `pct` % of the oracle's bytes, at the phase the oracle peaked in.
fn near(j: &serde_json::Value, measured: u64, pct: f64, phase: &str) {
    let got = estimate_bytes(j, "peak_allocated_bytes");
    let err = (got as f64 - measured as f64) / measured as f64 * 100.0;
    assert!(
        err.abs() < pct,
        "{got} vs {measured} measured ({err:+.2} %)"
    );
    assert_eq!(j["peak_phase"], phase, "{j}");
}

/// ZeRO-2 on Qwen2.5-0.5B (2 × 512 tokens, 2 ranks) peaks at the loss's
/// backward with neither the gradient partition nor the head's gradient
/// (both come at the first reduction); SmolLM2-135M at 1 × 256 peaks in the
/// step, where the flattened 16-bit partition sits next to its fp32 copy.
#[test]
fn zero2_matches_deepspeed_on_cpu() {
    let qwen = zero(
        "Qwen/Qwen2.5-0.5B",
        "2",
        "2",
        "2",
        "512",
        &["--reduce-bucket-size", "802816"],
    );
    near(&qwen, 7_548_759_320, 1.0, "backward");
    let smol = zero(
        "HuggingFaceTB/SmolLM2-135M",
        "2",
        "2",
        "1",
        "256",
        &["--reduce-bucket-size", "331776"],
    );
    near(&smol, 1_640_002_004, 1.0, "optimizer-step");
}

/// ZeRO-3 on Qwen2.5-0.5B: the partition and bucket buffers are allocated
/// at initialisation, the head's gradient only after the loss's
/// temporaries are freed.
#[test]
fn zero3_matches_deepspeed_on_cpu() {
    let qwen = zero(
        "Qwen/Qwen2.5-0.5B",
        "3",
        "2",
        "2",
        "512",
        &[
            "--reduce-bucket-size",
            "802816",
            "--prefetch-bucket-size",
            "722529",
            "--param-persistence-threshold",
            "8960",
        ],
    );
    near(&qwen, 8_538_430_493, 1.0, "backward");
}
