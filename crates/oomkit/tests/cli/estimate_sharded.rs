//! ZeRO and FSDP through the binary: the sharding flags, a DeepSpeed JSON
//! given with `--deepspeed`, and preflight of a `deepspeed` launch picking
//! up its buckets.

use super::support::{cli, exit_2_says, exit_2_usage};

const MODEL: &str = "meta-llama/Llama-3.1-8B";

fn train(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "estimate",
        MODEL,
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--batch",
        "1",
        "--seq",
        "2048",
        "--grad-checkpointing",
        "--gpus",
        "8",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    cli(&args).run().code(0).json()
}

fn bytes(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .or_else(|| v["components"][key].as_u64())
        .unwrap_or_else(|| panic!("{key} in {v}"))
}

/// ZeRO-3 counts DeepSpeed's buffers: the reduce bucket (5e8 elements of
/// bf16 by default) follows `--reduce-bucket-size`, gathered parameters
/// follow the reuse distance and the prefetch bucket; offload leaves the
/// bucket and the gathered parameters on the GPU.
#[test]
fn zero3_buffers_follow_deepspeeds_keys() {
    let base = train(&["--zero", "3"]);
    let small = train(&["--zero", "3", "--reduce-bucket-size", "1e8"]);
    // 4e8 fewer bf16 elements in the flat gradient buffers.
    assert_eq!(
        bytes(&base, "gradients_bytes") - bytes(&small, "gradients_bytes"),
        800_000_000
    );
    // `auto` is Hugging Face's hidden² (4096² for Llama-3.1-8B).
    let auto = train(&["--zero", "3", "--reduce-bucket-size", "auto"]);
    assert_eq!(
        bytes(&base, "gradients_bytes") - bytes(&auto, "gradients_bytes"),
        (500_000_000 - 4096 * 4096) * 2
    );
    // A longer reuse distance keeps whole blocks gathered into backward.
    let far = train(&["--zero", "3", "--max-reuse-distance", "3e9"]);
    assert!(bytes(&far, "weights_bytes") > bytes(&base, "weights_bytes") + 400_000_000);
    // No prefetch: 5e7 bf16 elements fewer.
    let none = train(&["--zero", "3", "--prefetch-bucket-size", "0"]);
    assert_eq!(
        bytes(&base, "weights_bytes") - bytes(&none, "weights_bytes"),
        100_000_000
    );
    // Offload: the optimizer and partitions leave, the bucket stays.
    let opt = train(&["--zero", "3", "--offload", "optimizer"]);
    let params = train(&["--zero", "3", "--offload", "params"]);
    assert_eq!(bytes(&opt, "optimizer_bytes"), 0);
    assert_eq!(bytes(&opt, "gradients_bytes"), 1_000_000_000);
    assert!(bytes(&params, "weights_bytes") < bytes(&opt, "weights_bytes"));
    assert!(bytes(&params, "peak_allocated_bytes") < bytes(&opt, "peak_allocated_bytes"));
    assert!(bytes(&opt, "peak_allocated_bytes") < bytes(&base, "peak_allocated_bytes"));
}

/// ZeRO-2's double buffer with `--overlap-comm on`, and no buffer without
/// contiguous gradients. The buckets exist from the head's backward to the
/// end of backward: without checkpointing that is where the peak sits.
#[test]
fn zero2_overlap_comm_doubles_the_bucket() {
    let no_ckpt = |extra: &[&str]| {
        let mut args = vec![
            "estimate",
            MODEL,
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--batch",
            "1",
            "--seq",
            "2048",
            "--gpus",
            "8",
            "--zero",
            "2",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let j = cli(&args).run().code(0).json();
        assert_eq!(j["peak_phase"], "backward", "{j}");
        j
    };
    let off = no_ckpt(&[]);
    let on = no_ckpt(&["--overlap-comm", "on"]);
    let none = no_ckpt(&["--contiguous-gradients", "off"]);
    assert_eq!(
        bytes(&on, "peak_allocated_bytes") - bytes(&off, "peak_allocated_bytes"),
        1_000_000_000
    );
    assert_eq!(
        bytes(&off, "peak_allocated_bytes") - bytes(&none, "peak_allocated_bytes"),
        1_000_000_000
    );
}

/// FSDP keeps the root unit (embedding, norm, head) gathered, shards the
/// fp32 states, reserves the communication streams' pools, and with CPU
/// offload leaves the gathered units only; FSDP1 reserves one block more.
#[test]
fn fsdp_versions_and_offload() {
    let v2 = train(&["--fsdp"]);
    let v1 = train(&["--fsdp", "--fsdp-version", "1"]);
    let off = train(&["--fsdp", "--offload", "params"]);
    assert_eq!(
        bytes(&v1, "peak_allocated_bytes"),
        bytes(&v2, "peak_allocated_bytes")
    );
    assert!(bytes(&v1, "peak_reserved_bytes") > bytes(&v2, "peak_reserved_bytes"));
    // The reserve over allocated is the streams' pools, not 10 % slack.
    assert!(bytes(&v2, "peak_reserved_bytes") - bytes(&v2, "peak_allocated_bytes") > 2_000_000_000);
    assert_eq!(bytes(&off, "optimizer_bytes"), 0);
    // Root gathered in bf16: 2 × 128256 × 4096 + the final norm, × 2 bytes.
    assert!(bytes(&off, "weights_bytes") >= 2 * 128_256 * 4096 * 2);
    assert!(bytes(&off, "peak_allocated_bytes") < 10 << 30);
    // Human output names the peak as usual.
    cli(&[
        "estimate",
        MODEL,
        "--task",
        "train",
        "--gpus",
        "8",
        "--fsdp",
        "--offload",
        "params",
    ])
    .run()
    .code(0)
    .stdout_has("peak allocated");
}

/// `--deepspeed FILE` reads the stage, offload, buckets, micro-batch and
/// accumulation from the JSON (the flags given win), and prints where each
/// came from.
#[test]
fn deepspeed_json_sets_the_setup() {
    let tmp = tempfile::tempdir().expect("tmp");
    std::fs::write(
        tmp.path().join("ds.json"),
        r#"{"bf16": {"enabled": "auto"},
            "train_micro_batch_size_per_gpu": 2,
            "gradient_accumulation_steps": 4,
            "zero_optimization": {"stage": 3,
              "offload_optimizer": {"device": "cpu", "pin_memory": true},
              "reduce_bucket_size": "auto",
              "stage3_prefetch_bucket_size": 2e7,
              "stage3_param_persistence_threshold": "auto",
              "stage3_max_live_parameters": 1e9,
              "stage3_max_reuse_distance": 1e9,
              "overlap_comm": true,
              "contiguous_gradients": true}}"#,
    )
    .expect("write");
    let ran = cli(&[
        "estimate",
        MODEL,
        "--deepspeed",
        "ds.json",
        "--gpus",
        "8",
        "--precision",
        "mixed-bf16",
    ])
    .cwd(tmp.path())
    .run();
    ran.code(0)
        .stdout_has("preflight: a DeepSpeed config, ds.json")
        .stdout_has("zero_optimization.reduce_bucket_size auto (ds.json)")
        .stdout_has("--zero 3")
        .stdout_has("--offload optimizer")
        .stdout_has("--prefetch-bucket-size 20000000")
        .stdout_has("--overlap-comm on");
    let out = ran.stdout();
    assert!(out.contains("micro-batch"), "{out}");
    // The same setup as flags gives the same estimate.
    let from_file = cli(&[
        "estimate",
        MODEL,
        "--deepspeed",
        "ds.json",
        "--gpus",
        "8",
        "--precision",
        "mixed-bf16",
        "--format",
        "json",
    ])
    .cwd(tmp.path())
    .run()
    .code(0)
    .json();
    let flags = cli(&[
        "estimate",
        MODEL,
        "--task",
        "train",
        "--gpus",
        "8",
        "--precision",
        "mixed-bf16",
        "--zero",
        "3",
        "--offload",
        "optimizer",
        "--batch",
        "2",
        "--grad-accum",
        "4",
        "--reduce-bucket-size",
        "auto",
        "--prefetch-bucket-size",
        "2e7",
        "--param-persistence-threshold",
        "auto",
        "--overlap-comm",
        "on",
        "--format",
        "json",
    ])
    .run()
    .code(0)
    .json();
    assert_eq!(
        from_file["estimate"]["peak_allocated_bytes"],
        flags["peak_allocated_bytes"]
    );
    // A flag given beside the file wins.
    let b1 = cli(&[
        "estimate",
        MODEL,
        "--deepspeed",
        "ds.json",
        "--gpus",
        "8",
        "--batch",
        "1",
        "--format",
        "json",
    ])
    .cwd(tmp.path())
    .run()
    .code(0)
    .json();
    assert_eq!(b1["estimate"]["setup"]["batch"], 1);
}

/// Preflight of a `deepspeed` launch reads the buckets from the
/// `--deepspeed` file the command passes.
#[test]
fn preflight_of_a_deepspeed_launch_reads_the_buckets() {
    let tmp = tempfile::tempdir().expect("tmp");
    std::fs::write(
        tmp.path().join("z3.json"),
        r#"{"zero_optimization": {"stage": 3, "reduce_bucket_size": 2e8,
             "stage3_max_reuse_distance": 0, "sub_group_size": 1e8}}"#,
    )
    .expect("write");
    let v = cli(&[
        "estimate",
        "--format",
        "json",
        "--",
        "deepspeed",
        "--num_gpus",
        "8",
        "train.py",
        "--model_name_or_path",
        MODEL,
        "--deepspeed",
        "z3.json",
        "--bf16",
    ])
    .cwd(tmp.path())
    .run()
    .code(0)
    .json();
    let args: Vec<String> = v["preflight"]["estimate_args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().unwrap_or_default().to_string())
        .collect();
    let joined = args.join(" ");
    for want in [
        "--zero 3",
        "--reduce-bucket-size 200000000",
        "--max-reuse-distance 0",
        "--sub-group-size 100000000",
    ] {
        assert!(joined.contains(want), "{want} in {joined}");
    }
    assert_eq!(v["estimate"]["setup"]["zero"], 3);
}

/// Bad values are one line and exit 2.
#[test]
fn bad_sharding_input_is_refused() {
    exit_2_says(
        &cli(&["estimate", MODEL, "--task", "train", "--gpus", "8"]),
        &[
            (
                &["--fsdp", "--reduce-bucket-size", "1e8"],
                "--reduce-bucket-size is a DeepSpeed setting, not FSDP's",
            ),
            (
                &["--zero", "3", "--fsdp-version", "1"],
                "--fsdp-version needs --fsdp",
            ),
            (
                &["--zero", "3", "--max-live-parameters", "auto"],
                "--max-live-parameters takes a number of elements",
            ),
            (&["--deepspeed", "missing.json"], "missing.json"),
        ],
    );
    exit_2_says(
        &cli(&["estimate", MODEL, "--zero", "3"]),
        &[(&["--prefetch-bucket-size", "0"], "applies to --task train")],
    );
    exit_2_usage(
        &cli(&["estimate", MODEL, "--task", "train", "--zero", "3"]),
        &[
            (&["--reduce-bucket-size", "1.5"], "not an element count"),
            (&["--overlap-comm", "maybe"], "not on or off"),
            (&["--fsdp", "--fsdp-version", "3"], "--fsdp-version"),
        ],
    );
    let tmp = tempfile::tempdir().expect("tmp");
    std::fs::write(tmp.path().join("bad.json"), "{\"zero_optimization\": ").expect("write");
    cli(&["estimate", MODEL, "--deepspeed", "bad.json"])
        .cwd(tmp.path())
        .run()
        .code(2)
        .one_error_line()
        .stderr_has("bad.json");
}

/// An FSDP setup's plan offloads as FSDP does (parameters, gradients and the
/// step together), with accelerate's key — the PEFT docs' 70B QLoRA on two
/// 24 GB GPUs, which fits only with `fsdp_offload_params`.
#[test]
fn fsdp_plan_offloads_as_fsdp_does() {
    cli(&[
        "estimate",
        "meta-llama/Llama-2-70b-hf",
        "--task",
        "train",
        "--method",
        "qlora",
        "--quant",
        "nf4-dq",
        "--lora-rank",
        "8",
        "--lora-targets",
        "all-linear",
        "--batch",
        "2",
        "--seq",
        "2048",
        "--grad-checkpointing",
        "--attention",
        "flash",
        "--trainer",
        "--gpus",
        "2",
        "--fsdp",
        "--gpu",
        "rtx-4090",
    ])
    .run()
    .code(1)
    .stdout_has("FSDP CPU offload")
    .stdout_has("fsdp_offload_params: true");
}

/// Preflight of `accelerate launch` reads `fsdp_config.fsdp_version` (and
/// says when accelerate's default, FSDP1, applies) and its offload key.
#[test]
fn preflight_reads_accelerates_fsdp_version() {
    let tmp = tempfile::tempdir().expect("tmp");
    let yaml = |version: &str| {
        format!(
            "distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: true\n  fsdp_sharding_strategy: FULL_SHARD\n{version}mixed_precision: bf16\nnum_machines: 1\nnum_processes: 4\n"
        )
    };
    std::fs::write(tmp.path().join("v2.yaml"), yaml("  fsdp_version: 2\n")).expect("write");
    std::fs::write(tmp.path().join("v1.yaml"), yaml("")).expect("write");
    let args = |file: &str| -> String {
        let v = cli(&[
            "estimate",
            "--format",
            "json",
            "--",
            "accelerate",
            "launch",
            "--config_file",
            file,
            "train.py",
            "--model_name_or_path",
            "Qwen/Qwen2.5-7B",
        ])
        .cwd(tmp.path())
        .run()
        .code(0)
        .json();
        v["preflight"]["estimate_args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let v2 = args("v2.yaml");
    assert!(v2.contains("--fsdp --fsdp-version 2"), "{v2}");
    assert!(v2.contains("--offload params"), "{v2}");
    let v1 = args("v1.yaml");
    assert!(v1.contains("--fsdp --fsdp-version 1"), "{v1}");
}
