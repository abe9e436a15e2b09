//! `oomkit estimate --stack litgpt` through the binary: LitGPT's own model
//! code and fine-tuning loop (`crates/oomkit_estimate/src/stack.rs`),
//! checked against LitGPT's published peaks
//! (config_hub/finetune/README.md; the rows of
//! `crates/oomkit_estimate/tests/accuracy_litgpt.json`).

use super::support::estimate_bytes as bytes;
use super::support::{cli, exit_2_says};

fn lora(model: &str, stack: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "estimate", model, "--task", "train", "--method", "lora", "--seq", "512", "--stack", stack,
        "--format", "json",
    ];
    args.extend_from_slice(extra);
    cli(&args).run().code(0).json()
}

/// phi-2 LoRA (config_hub phi-2/lora.yaml: r 8 on every linear, micro-batch
/// 4): LitGPT measured 13.98 GB; transformers' model code (composite
/// `gelu_new`, fp32 loss) would say far more, LitGPT's (fused GELU, 16-bit
/// chunked loss) within 10 %.
#[test]
fn litgpt_phi2_lora_matches_its_published_peak() {
    let extra = [
        "--lora-rank",
        "8",
        "--lora-targets",
        "all-linear",
        "--batch",
        "4",
    ];
    let lit = lora("microsoft/phi-2", "litgpt", &extra);
    let hf = lora("microsoft/phi-2", "transformers", &extra);
    let measured = 13.98e9;
    let got = bytes(&lit, "peak_allocated_bytes") as f64;
    assert!((got - measured).abs() / measured < 0.10, "{got}");
    assert!(bytes(&hf, "peak_allocated_bytes") as f64 > measured * 1.3);
    assert!(bytes(&lit, "activations_bytes") < bytes(&hf, "activations_bytes"));
    assert!(bytes(&lit, "logits_bytes") < bytes(&hf, "logits_bytes"));
    assert_eq!(lit["setup"]["stack"], "litgpt");
    assert_eq!(lit["setup"]["precision"], "bf16");
}

/// A tied model keeps a second head under LitGPT; the text output says
/// where the defaults come from (LitGPT's scripts and configs).
#[test]
fn litgpt_unties_the_head_and_cites_its_defaults() {
    let lit = lora("meta-llama/Llama-3.2-1B", "litgpt", &[]);
    let hf = lora(
        "meta-llama/Llama-3.2-1B",
        "transformers",
        &["--precision", "bf16"],
    );
    let head = 128_256u64 * 2048 * 2;
    assert_eq!(
        bytes(&lit, "weights_bytes") - bytes(&hf, "weights_bytes"),
        head
    );
    cli(&[
        "estimate",
        "meta-llama/Llama-3.2-1B",
        "--task",
        "train",
        "--method",
        "lora",
        "--stack",
        "litgpt",
    ])
    .run()
    .code(0)
    .stdout_has("assumed: precision bf16: LitGPT's bf16-true")
    .stdout_has("(default, litgpt litgpt/finetune/lora.py)")
    .stdout_has("LitGPT's CausalSelfAttention calls torch's scaled_dot_product_attention");
}

/// What is not modelled of LitGPT is refused, one line, exit 2.
#[test]
fn litgpt_refuses_what_it_does_not_model() {
    exit_2_says(
        &cli(&["estimate", "microsoft/phi-2", "--stack", "litgpt"]),
        &[
            (
                &["--task", "train", "--method", "qlora"],
                "--stack litgpt with a quantized base",
            ),
            (&[], "--stack litgpt models LitGPT's fine-tuning"),
            (
                &["--task", "train", "--trainer"],
                "--trainer is Hugging Face's training loop",
            ),
            (
                &["--task", "train", "--zero", "3", "--gpus", "2"],
                "--stack litgpt is modelled without sharding",
            ),
        ],
    );
}
