//! `oomkit estimate` through the binary: selective activation checkpointing
//! and activation offloading, eager attention's saved scores in training,
//! `--stack transformers@VERSION` for older generation code, and
//! `gpt_bigcode` configs read as tied.

use super::support::estimate_bytes as bytes;
use super::support::{cli, exit_2_says, exit_2_usage};

fn train(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "estimate",
        "meta-llama/Llama-3.2-1B",
        "--task",
        "train",
        "--batch",
        "2",
        "--seq",
        "2048",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    cli(&args).run().code(0).json()
}

/// Selective checkpointing saves less than none and more than full; every
/// layer checkpointed is full checkpointing; the op policy agrees with the
/// CPU oracle's peak for this setup (tests/oracle.json: 17,060,279,120 B).
#[test]
fn selective_checkpointing_sits_between_none_and_full() {
    let none = train(&[]);
    let full = train(&["--grad-checkpointing"]);
    let full2 = train(&["--checkpointing", "full"]);
    let op = train(&["--checkpointing", "selective"]);
    let every2 = train(&["--checkpointing", "selective", "--ac-option", "2"]);
    let every1 = train(&["--ac_mode", "selective", "--ac_option", "1"]);
    let act = |j: &serde_json::Value| bytes(j, "activations_bytes");
    assert_eq!(act(&full), act(&full2));
    assert_eq!(act(&every1), act(&full));
    assert!(act(&full) < act(&op) && act(&op) < act(&every2) && act(&every2) < act(&none));
    assert_eq!(op["setup"]["selective_ac"], "op");
    assert_eq!(every2["setup"]["selective_ac"], "2");
    assert_eq!(none["setup"]["selective_ac"], serde_json::Value::Null);
    let peak = bytes(&op, "peak_allocated_bytes") as f64;
    let oracle = 17_060_279_120.0;
    assert!((peak - oracle).abs() / oracle < 0.01, "{peak} vs {oracle}");
}

/// torchtune's activation offloading leaves at most its forward stash of
/// saved tensors on the GPU, and needs checkpointing.
#[test]
fn activation_offloading_needs_checkpointing_and_lowers_activations() {
    let ck = train(&["--grad-checkpointing"]);
    let off = train(&["--grad-checkpointing", "--activation-offloading"]);
    assert!(bytes(&off, "activations_bytes") < bytes(&ck, "activations_bytes"));
    assert_eq!(off["setup"]["activation_offloading"], true);
    let sel = train(&["--checkpointing", "selective", "--ac-option", "2"]);
    let sel_off = train(&[
        "--checkpointing",
        "selective",
        "--ac-option",
        "2",
        "--enable_activation_offloading",
    ]);
    assert!(bytes(&sel_off, "activations_bytes") < bytes(&sel, "activations_bytes"));
}

#[test]
fn checkpointing_settings_that_cannot_hold_exit_2() {
    let base = cli(&["estimate", "meta-llama/Llama-3.2-1B", "--task", "train"]);
    exit_2_says(
        &base,
        &[
            (
                &["--activation-offloading"],
                "--activation-offloading needs activation checkpointing (--checkpointing full or selective)",
            ),
            (
                &["--ac-option", "2"],
                "--ac-option applies to --checkpointing selective",
            ),
            (
                &["--checkpointing", "full", "--ac-option", "op"],
                "--ac-option applies to --checkpointing selective",
            ),
            (
                &["--grad-checkpointing", "--checkpointing", "selective"],
                "--grad-checkpointing is full checkpointing",
            ),
            (
                &["--grad-checkpointing", "--checkpointing", "none"],
                "--grad-checkpointing is full checkpointing",
            ),
        ],
    );
    exit_2_says(
        &cli(&["estimate", "meta-llama/Llama-3.2-1B"]),
        &[
            (
                &["--checkpointing", "selective"],
                "--checkpointing applies to --task train",
            ),
            (
                &[
                    "--stack",
                    "transformers@4.35",
                    "--engine",
                    "vllm",
                    "--task",
                    "serve",
                    "--gpu",
                    "h100",
                ],
                "--stack applies to Hugging Face transformers",
            ),
        ],
    );
    exit_2_usage(
        &base,
        &[
            (
                &["--ac-option", "every"],
                "is not `op` or a number of layers",
            ),
            (&["--ac-option=-1"], "is not `op` or a number of layers"),
            (&["--checkpointing", "partial"], "invalid value 'partial'"),
            (
                &["--stack", "litgpt@0.5"],
                "is not a stack such as transformers",
            ),
            (
                &["--stack", "transformers@4"],
                "is not a stack such as transformers",
            ),
            (
                &["--stack", "transformers@4.x"],
                "is not a stack such as transformers",
            ),
        ],
    );
}

/// Eager attention saves about 6 bytes per score element in bf16 training
/// (the fp32 softmax output and its bf16 cast for the probabilities·V
/// matmul), over SDPA's per-token tensors.
#[test]
fn eager_attention_counts_its_saved_scores() {
    let sdpa = train(&[]);
    let eager = train(&["--attention", "eager"]);
    let diff = bytes(&eager, "activations_bytes") - bytes(&sdpa, "activations_bytes");
    // 16 layers × 32 heads × 2048² scores × batch 2.
    let scores = 16u64 * 32 * 2048 * 2048 * 2;
    let per = diff as f64 / scores as f64;
    assert!((6.0..6.5).contains(&per), "{per} bytes per score");
}

fn generate(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "estimate",
        "meta-llama/Llama-3.2-1B",
        "--batch",
        "8",
        "--seq",
        "1024",
        "--new-tokens",
        "256",
        "--precision",
        "bf16",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    cli(&args).run().code(0).json()
}

/// Before transformers 4.36 each decoding step rebuilt the cache as a new
/// tuple while the previous one was still held, and the prompt pass made
/// logits for every position (fp32 for Llama): more memory than today's
/// `DynamicCache`. From 4.36 on, generation is today's.
#[test]
fn older_transformers_generation_holds_two_caches() {
    let now = generate(&[]);
    let old = generate(&["--stack", "transformers@4.35.2"]);
    let v436 = generate(&["--stack", "transformers@4.36"]);
    assert_eq!(old["setup"]["stack"], "transformers@4.35");
    assert_eq!(now["setup"]["stack"], "transformers");
    assert!(bytes(&old, "peak_allocated_bytes") > bytes(&now, "peak_allocated_bytes"));
    assert_eq!(
        bytes(&v436, "peak_allocated_bytes"),
        bytes(&now, "peak_allocated_bytes")
    );
    // A long generation peaks while decoding: the previous cache is a
    // temporary beside the current one.
    let long = |extra: &[&str]| {
        let mut a = vec![
            "estimate",
            "meta-llama/Llama-3.2-1B",
            "--batch",
            "4",
            "--seq",
            "128",
            "--new-tokens",
            "8192",
            "--format",
            "json",
            "--precision",
            "bf16",
        ];
        a.extend_from_slice(extra);
        cli(&a).run().code(0).json()
    };
    let old = long(&["--stack", "transformers@4.35"]);
    assert_eq!(old["peak_phase"], "decode");
    let kv = bytes(&old, "kv_cache_bytes");
    let tmp = bytes(&old, "temporaries_bytes");
    assert!(tmp * 100 > kv * 99, "{tmp} vs {kv}");
}

/// transformers before 5 loads weights in fp32 unless a dtype is given.
#[test]
fn transformers_4_defaults_to_fp32() {
    let j = cli(&[
        "estimate",
        "meta-llama/Llama-3.2-1B",
        "--stack",
        "transformers@4.57",
        "--format",
        "json",
    ])
    .run()
    .code(0)
    .json();
    assert_eq!(j["setup"]["precision"], "fp32");
    let j = cli(&[
        "estimate",
        "meta-llama/Llama-3.2-1B",
        "--stack",
        "transformers@4.57",
        "--precision",
        "bf16",
        "--format",
        "json",
    ])
    .run()
    .code(0)
    .json();
    assert_eq!(j["setup"]["precision"], "bf16");
    cli(&[
        "estimate",
        "meta-llama/Llama-3.2-1B",
        "--stack",
        "transformers@5.2",
    ])
    .run()
    .code(0)
    .stdout_has("· bf16 ·");
}

/// A StarCoder-shaped `gpt_bigcode` config without `tie_word_embeddings`
/// is tied (GPTBigCodeConfig's default): about 15.5B parameters.
#[test]
fn gpt_bigcode_without_the_tie_key_is_tied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.json");
    std::fs::write(
        &path,
        r#"{"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "n_inner": 24576,
            "n_layer": 40, "n_positions": 8192, "vocab_size": 49152, "multi_query": true,
            "activation_function": "gelu_pytorch_tanh"}"#,
    )
    .expect("write");
    cli(&["estimate", path.to_str().expect("utf-8")])
        .run()
        .code(0)
        .stdout_has("(15.52B params");
}

/// A transformers pin read by `--versions` names the stack: 4.35.2 is the
/// tuple cache; `--stack` given on the command line wins over the file.
#[test]
fn a_transformers_pin_names_the_stack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let req = dir.path().join("requirements.txt");
    std::fs::write(&req, "transformers==4.35.2\ntorch==2.1.0\n").expect("write");
    let req = req.to_str().expect("utf-8");
    let run = |extra: &[&str]| {
        let mut a = vec![
            "estimate",
            "meta-llama/Llama-3.2-1B",
            "--versions",
            req,
            "--new-tokens",
            "16",
            "--precision",
            "bf16",
            "--format",
            "json",
        ];
        a.extend_from_slice(extra);
        cli(&a).run().code(0).json()
    };
    assert_eq!(run(&[])["setup"]["stack"], "transformers@4.35");
    assert_eq!(
        run(&["--stack", "transformers@4.40"])["setup"]["stack"],
        "transformers@4.40"
    );
}
