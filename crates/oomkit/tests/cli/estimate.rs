//! `oomkit estimate` through the binary: human and JSON output for a few setups
//! (snapshots), the JSON contract, fit and exit codes, config.json paths,
//! --params, the lists, and bad input (exit 2, one-line errors).

use std::fs;
use std::process::Output;

use super::support::{cli, exit_2_is, exit_2_says, exit_2_usage};
use super::{json, oomkit, run_in, stderr, stdout};

pub fn est(args: &[&str]) -> Output {
    let mut full = vec!["estimate"];
    full.extend_from_slice(args);
    run_in(&std::env::temp_dir(), &full, None)
}

#[test]
fn human_lora_8b_on_4090() {
    let out = est(&[
        "meta-llama/Llama-3.1-8B",
        "--task",
        "train",
        "--method",
        "lora",
        "--batch",
        "4",
        "--seq",
        "2048",
        "--gpu",
        "rtx-4090",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("does not fit on rtx-4090"), "{text}");
    assert!(text.contains("[gradient-checkpointing]"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn human_inference_fits() {
    let out = est(&[
        "qwen2.5-7b",
        "--seq",
        "1024",
        "--new-tokens",
        "512",
        "--gpu",
        "a100-80gb",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!(stdout(&out));
}

#[test]
fn json_full_training_3b() {
    let out = est(&[
        "meta-llama/Llama-3.2-3B",
        "--task",
        "train",
        "--batch",
        "2",
        "--seq",
        "4096",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    insta::assert_json_snapshot!(v);
}

#[test]
fn json_contract_shape_with_fit_and_plan() {
    let out = est(&[
        "meta-llama/Llama-3.1-8B",
        "--task",
        "train",
        "--method",
        "lora",
        "--batch",
        "8",
        "--seq",
        "2048",
        "--gpu",
        "4090",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["version"], 2);
    for k in [
        "weights_bytes",
        "gradients_bytes",
        "optimizer_bytes",
        "activations_bytes",
        "logits_bytes",
        "kv_cache_bytes",
        "temporaries_bytes",
        "cuda_context_bytes",
    ] {
        assert!(v["components"][k].is_u64(), "{k}");
    }
    for k in [
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "device_used_bytes",
    ] {
        assert!(v[k].is_u64(), "{k}");
    }
    assert!(v["peak_phase"].is_string());
    let fit = &v["fit"];
    assert_eq!(fit["gpu"], "rtx-4090");
    assert_eq!(fit["fits"], false);
    assert!(fit["usable_bytes"].is_u64());
    assert!(fit["headroom_bytes"].as_i64().is_some_and(|h| h < 0));
    let plan = fit["plan"].as_array().expect("plan");
    assert!(!plan.is_empty());
    let last = plan.last().expect("step");
    assert!(last["peak_after_bytes"].as_u64() <= fit["usable_bytes"].as_u64());
    for step in plan {
        assert!(step["change"].is_string() && step["config"].is_string());
        assert!(step["saves_bytes"].as_u64().is_some_and(|b| b > 0));
        let id = step["remedy"].as_str().expect("remedy");
        assert!(oomkit_core::remedies::find(id).is_some(), "{id}");
    }
}

#[test]
fn no_fit_object_without_gpu() {
    let v = json(&est(&["gpt2", "--format", "json"]));
    assert!(v.get("fit").is_none());
    assert_eq!(v["model"]["id"], "openai-community/gpt2");
}

#[test]
fn config_json_path_and_folder() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = r#"{"model_type":"llama","hidden_size":2048,"intermediate_size":5632,
        "num_hidden_layers":22,"num_attention_heads":32,"num_key_value_heads":4,"vocab_size":32000}"#;
    fs::write(dir.path().join("config.json"), cfg).expect("write");
    let file = dir.path().join("config.json");
    let a = json(&est(&[file.to_str().expect("utf8"), "--format", "json"]));
    let b = json(&est(&[
        dir.path().to_str().expect("utf8"),
        "--format",
        "json",
    ]));
    assert_eq!(a["model"]["params"], b["model"]["params"]);
    // TinyLlama-1.1B has 1,100,048,384 parameters.
    assert_eq!(a["model"]["params"], 1_100_048_384u64);
}

#[test]
fn bare_params() {
    let out = est(&["--params", "7B", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let p = json(&out)["model"]["params"].as_u64().expect("params");
    assert!((6_300_000_000..7_700_000_000).contains(&p), "{p}");
}

#[test]
fn lists() {
    let m = stdout(&est(&["--list-models"]));
    assert!(m.contains("meta-llama/Llama-3.1-405B"));
    let g = stdout(&est(&["--list-gpus"]));
    assert!(g.contains("rtx-4090"));
}

#[test]
fn unknown_model_suggests() {
    exit_2_says(
        &cli(&["estimate"]),
        &[
            (
                &["meta-llama/Llama-3.1-8C"],
                "did you mean meta-llama/Llama-3.1-8B",
            ),
            // A partial name suggests every model it is part of, image models included.
            (&["flux"], "did you mean black-forest-labs/FLUX.1-dev"),
            (
                &["llama-3.1"],
                "is ambiguous: it fits meta-llama/Llama-3.1-405B, meta-llama/Llama-3.1-70B",
            ),
            // The first three Gemma 3 entries by id (12b-it, 1b-it, 270m).
            (&["gemma3"], "did you mean google/gemma-3-12b-it"),
        ],
    );
}

#[test]
fn unknown_gpu_suggests() {
    exit_2_says(
        &cli(&["estimate"]),
        &[(&["gpt2", "--gpu", "rtx-409"], "unknown GPU")],
    );
}

#[test]
fn bad_sizes_exit_2() {
    exit_2_says(
        &cli(&["estimate"]),
        &[
            (&["--params", "0"], "--params \"0\""),
            (
                &["--params", "7B", "--layers", "0"],
                "--layers must be positive",
            ),
            (
                &["gpt2", "--task", "train", "--quant", "nf4"],
                "cannot be fully fine-tuned",
            ),
            (
                &["gpt2", "--batch", "1000000", "--seq", "1000000"],
                "above 2^32",
            ),
            (
                &["bert-base-uncased", "--new-tokens", "10"],
                "does not generate",
            ),
        ],
    );
    // Refused by the argument parser, before the estimator sees them.
    exit_2_usage(
        &cli(&["estimate"]),
        &[
            (&["gpt2", "--batch", "0"], "--batch"),
            (&["gpt2", "--seq", "-5"], "'-5'"),
            (&["--params", "-7B"], "'-7'"),
        ],
    );
}

#[test]
fn malformed_config_json_is_one_line_error() {
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("config.json");
    fs::write(&bad, "{\"hidden_size\": 64,").expect("write");
    let run = cli(&["estimate"]).arg(&bad);
    run.run()
        .code(2)
        .one_error_line()
        .stderr_has("not a usable Hugging Face config.json");
    fs::write(&bad, "{\"hidden_size\": 64}").expect("write");
    run.run().code(2).stderr_has("num_hidden_layers");
}

/// Llama-3.1-8B on a 24 GB card: `vllm serve` with defaults refuses to start
/// (the pool cannot hold one 131,072-token request), which users meet as
/// "the estimated maximum model length is N". oomkit says so, with negative
/// headroom, and gives the --max-model-len that starts.
#[test]
fn vllm_serve_full_context_does_not_fit_a_24gb_card() {
    let out = est(&[
        "llama-3.1-8b",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "rtx-4090",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["serve"]["max_model_len"], 131_072);
    assert_eq!(v["fit"]["fits"], false);
    assert!(v["fit"]["headroom_bytes"].as_i64().unwrap() < 0);
    let tokens = v["serve"]["kv_tokens"].as_u64().unwrap();
    assert!((16_384..131_072).contains(&tokens), "{tokens}");
    // vLLM's check keeps one block back (the null block): the longest
    // --max-model-len that starts is one block short of the pool.
    let tokens = v["serve"]["max_fit_len"].as_u64().unwrap();
    assert_eq!(tokens, v["serve"]["kv_tokens"].as_u64().unwrap() - 16);
    let step = &v["fit"]["plan"][0];
    assert_eq!(step["remedy"], "vllm-max-model-len");
    assert_eq!(
        step["config"],
        format!(
            "vllm serve meta-llama/Llama-3.1-8B --gpu-memory-utilization 0.9 --max-model-len {tokens}"
        )
    );
    // The capped command fits: run it through oomkit again.
    let again = est(&[
        "llama-3.1-8b",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "rtx-4090",
        "--max-model-len",
        &tokens.to_string(),
    ]);
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
    assert!(stdout(&again).contains("fits on rtx-4090"));
}

#[test]
fn vllm_serve_pool() {
    let out = est(&[
        "llama-3.1-8b",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "h100-sxm",
        "--gpu-memory-utilization",
        "0.95",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let tokens = v["serve"]["kv_tokens"].as_u64().expect("tokens");
    // llm-d measured 476,016 tokens (memory-estimation.md §5.8 K2).
    assert!((471_000..481_000).contains(&tokens), "{tokens}");
    // max_model_len defaults to the model's own context, as in vLLM (131,072
    // for Llama 3.1). The fit object has the text models' shape: requests of
    // max_model_len at once, and the longest context one request can reach.
    assert_eq!(v["serve"]["max_model_len"], 131_072);
    assert_eq!(v["fit"]["max_batch"].as_u64(), Some(tokens / 131_072));
    assert_eq!(v["fit"]["max_seq"].as_u64(), Some(131_072));
    assert_eq!(v["serve"]["block_bytes"], 16 * 2 * 8 * 128 * 32 * 2);
    // The profile run's peak is the sampler: 1024 sequences (vLLM's H100
    // default) × V × 16 B; `--max-num-seqs 256` shrinks it to a quarter, and
    // then the dummy forward at 8192 tokens is the larger.
    let act = |extra: &[&str]| {
        let mut a = vec![
            "llama-3.1-8b",
            "--engine",
            "vllm",
            "--task",
            "serve",
            "--gpu",
            "h100-sxm",
            "--format",
            "json",
        ];
        a.extend_from_slice(extra);
        let out = est(&a);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        json(&out)["components"]["activations_bytes"]
            .as_u64()
            .expect("activations")
    };
    assert_eq!(act(&[]), 1024 * 128_256 * 16);
    let small = act(&["--max-num-seqs", "256"]);
    assert!(
        small > 256 * 128_256 * 16 && small < 1024 * 128_256 * 16,
        "{small}"
    );
    assert_eq!(
        act(&["--max-num-seqs", "256", "--max-num-batched-tokens", "2048"]),
        256 * 128_256 * 16
    );
    cli(&[
        "estimate",
        "llama-3.1-8b",
        "--engine",
        "vllm",
        "--task",
        "serve",
    ])
    .args(&["--gpu", "h100-sxm", "--max-num-seqs", "0"])
    .run()
    .code(2)
    .one_error_line()
    .stderr_has("--max-num-seqs must be positive");
    insta::assert_snapshot!(stdout(&est(&[
        "llama-3.1-8b",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "h100-sxm",
        "--gpu-memory-utilization",
        "0.95",
    ])));
}

#[test]
fn vllm_serve_errors_and_no_fit() {
    let out = est(&[
        "llama-3.1-70b",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "rtx-4090",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("does not fit"));
    exit_2_says(
        &cli(&["estimate", "gpt2", "--task", "serve"]),
        &[
            (&["--engine", "vllm"], "needs --gpu"),
            (&["--gpu", "h100-sxm"], "modelled for vLLM only"),
            (
                &[
                    "--engine",
                    "vllm",
                    "--gpu",
                    "h100-sxm",
                    "--gpu-memory-utilization",
                    "1.5",
                ],
                "--gpu-memory-utilization must be in (0, 1]",
            ),
        ],
    );
}

fn safetensors(header: &str) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v
}

#[test]
fn safetensors_headers_give_exact_weights() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = r#"{"model_type":"llama","hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100}"#;
    fs::write(dir.path().join("config.json"), cfg).expect("write");
    // One 1000 x 1000 bf16 tensor in the header; no data needed.
    let h = r#"{"w":{"dtype":"BF16","shape":[1000,1000],"data_offsets":[0,2000000]}}"#;
    fs::write(dir.path().join("model.safetensors"), safetensors(h)).expect("write");
    let v = json(&est(&[
        dir.path().to_str().expect("utf8"),
        "--format",
        "json",
    ]));
    assert_eq!(v["components"]["weights_bytes"], 2_000_000);
    let v = json(&est(&[
        dir.path().to_str().expect("utf8"),
        "--precision",
        "fp32",
        "--format",
        "json",
    ]));
    assert_eq!(v["components"]["weights_bytes"], 4_000_000);
}

#[test]
fn malformed_safetensors_is_an_error() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = r#"{"model_type":"llama","hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100}"#;
    fs::write(dir.path().join("config.json"), cfg).expect("write");
    let mut bad = 500u64.to_le_bytes().to_vec();
    bad.extend_from_slice(b"{\"w\":");
    fs::write(dir.path().join("model.safetensors"), bad).expect("write");
    cli(&["estimate"])
        .arg(dir.path())
        .run()
        .code(2)
        .stderr_has("malformed safetensors header");
}

#[test]
fn sharding_lowers_per_gpu_memory() {
    let used = |extra: &[&str]| {
        let mut a = vec!["llama-2-7b-hf", "--task", "train", "--format", "json"];
        a.extend_from_slice(extra);
        json(&est(&a))["device_used_bytes"].as_u64().expect("bytes")
    };
    let one = used(&[]);
    let z2 = used(&["--gpus", "8", "--zero", "2"]);
    let z3 = used(&["--gpus", "8", "--fsdp"]);
    assert!(z3 < z2 && z2 < one, "{one} {z2} {z3}");
    cli(&["estimate", "gpt2", "--task", "train", "--offload", "params"])
        .run()
        .code(2)
        .one_error_line()
        .stderr_has("--zero 3");
}

/// A GGUF v3 header: llama, 2 layers, one Q8_0 and one Q4_K tensor.
fn gguf_bytes() -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(2u64.to_le_bytes());
    let kvs: &[(&str, u32)] = &[
        ("llama.block_count", 2),
        ("llama.embedding_length", 64),
        ("llama.attention.head_count", 4),
        ("llama.attention.head_count_kv", 2),
        ("llama.feed_forward_length", 128),
        ("llama.vocab_size", 100),
    ];
    b.extend((kvs.len() as u64 + 1).to_le_bytes());
    let s = |b: &mut Vec<u8>, x: &str| {
        b.extend((x.len() as u64).to_le_bytes());
        b.extend(x.as_bytes());
    };
    s(&mut b, "general.architecture");
    b.extend(8u32.to_le_bytes());
    s(&mut b, "llama");
    for (k, v) in kvs {
        s(&mut b, k);
        b.extend(4u32.to_le_bytes());
        b.extend(v.to_le_bytes());
    }
    for (name, d0, d1, t, off) in [
        ("token_embd.weight", 64u64, 100u64, 8u32, 0u64),
        ("blk.0.ffn_up.weight", 256, 32, 12, 6400),
    ] {
        s(&mut b, name);
        b.extend(2u32.to_le_bytes());
        b.extend(d0.to_le_bytes());
        b.extend(d1.to_le_bytes());
        b.extend(t.to_le_bytes());
        b.extend(off.to_le_bytes());
    }
    b
}

#[test]
fn gguf_header_gives_architecture_and_sizes() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("tiny.gguf");
    fs::write(&f, gguf_bytes()).expect("write");
    let out = est(&[
        f.to_str().expect("utf8"),
        "--engine",
        "hf",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["model"]["layers"], 2);
    assert_eq!(v["components"]["weights_bytes"], 6400 / 32 * 34 + 32 * 144);
    let mut bad = gguf_bytes();
    bad.truncate(bad.len() - 5);
    fs::write(&f, bad).expect("write");
    let run = cli(&["estimate"]).arg(&f);
    run.run().code(2).stderr_has("malformed GGUF header");
    fs::write(&f, b"not a gguf at all").expect("write");
    run.run().code(2).stderr_has("malformed GGUF header");
}

#[test]
fn inference_split_over_gpus() {
    let one = json(&est(&[
        "llama-3.1-70b",
        "--gpu",
        "a100-80gb",
        "--format",
        "json",
    ]));
    assert_eq!(one["fit"]["fits"], false);
    let out = est(&[
        "llama-3.1-70b",
        "--gpus",
        "2",
        "--gpu",
        "a100-80gb",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let two = json(&out);
    assert!(
        two["fit"]["device_map"]
            .as_str()
            .is_some_and(|d| d.contains("device_map=\"auto\""))
    );
}

#[test]
fn image_flux_on_4090_plan() {
    let out = est(&["black-forest-labs/FLUX.1-dev", "--gpu", "rtx-4090"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("transformer 11.9B"), "{text}");
    // Model offload alone fits: the transformer, a CUDA 12.2+ context and
    // the activations (diffusers' Flux docs run it so on 24 GB cards).
    assert!(text.contains("[diffusers-cpu-offload]"), "{text}");
    assert!(!text.contains("[quantize-8bit]"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn image_sdxl_eager_fp32_big_batch_plan() {
    let out = est(&[
        "sdxl",
        "--precision",
        "fp32",
        "--attention",
        "eager",
        "--images",
        "4",
        "--width",
        "1536",
        "--height",
        "1536",
        "--gpu",
        "rtx-3060",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("[diffusers-slicing]"), "{text}");
    insta::assert_snapshot!(text);
}

/// An image too large for the card: one step to the largest size that fits
/// (aspect ratio kept, a multiple of 8), not a ladder of ever smaller sizes,
/// and every step's code is a statement that runs (`images = pipe(…)`).
#[test]
fn image_plan_shrinks_the_size_in_one_step_to_the_largest_that_fits() {
    let args = [
        "sd15", "--gpu", "rtx-2060", "--width", "4096", "--height", "2048", "--images", "16",
        "--format", "json",
    ];
    let out = est(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json(&out);
    let plan = v["fit"]["plan"].as_array().unwrap();
    let sizes: Vec<&serde_json::Value> = plan
        .iter()
        .filter(|s| s["config"].as_str().unwrap().contains("width="))
        .collect();
    assert_eq!(sizes.len(), 1, "{plan:?}");
    let code = sizes[0]["config"].as_str().unwrap();
    let dims: Vec<u64> = code
        .trim_start_matches("images = pipe(prompt, width=")
        .trim_end_matches(").images")
        .split(", height=")
        .map(|d| d.parse().unwrap())
        .collect();
    let (w, h) = (dims[0], dims[1]);
    // Multiples of 8 (SD 1.5's VAE), about 2:1 as asked, smaller than asked.
    let ratio = w as f64 / h as f64;
    assert!(
        w % 8 == 0 && h % 8 == 0 && (ratio - 2.0).abs() < 0.02 && w < 4096,
        "{code}"
    );
    assert_eq!(v["fit"]["plan_fits"], true);
    // The size is the largest: 8 pixels more per side does not fit.
    let images_step = plan.iter().any(|s| {
        s["config"]
            .as_str()
            .unwrap()
            .contains("num_images_per_prompt=1")
    });
    assert!(images_step, "{plan:?}");
    let mut rest: Vec<String> = plan
        .iter()
        .filter_map(|s| match s["remedy"].as_str().unwrap() {
            "diffusers-cpu-offload" if s["config"].as_str().unwrap().contains("sequential") => {
                Some("--cpu-offload=sequential".to_string())
            }
            "diffusers-cpu-offload" => Some("--cpu-offload=model".to_string()),
            _ => None,
        })
        .collect();
    rest.dedup();
    let bigger = |w: u64, h: u64| {
        let (ws, hs) = (w.to_string(), h.to_string());
        let mut a: Vec<&str> = vec![
            "sd15", "--gpu", "rtx-2060", "--width", &ws, "--height", &hs, "--format", "json",
        ];
        for step in plan {
            let c = step["config"].as_str().unwrap();
            if c.contains("vae.enable_slicing") {
                a.push("--vae-slicing");
            } else if c.contains("vae.enable_tiling") {
                a.push("--vae-tiling");
            } else if c.contains("enable_attention_slicing") {
                a.push("--attention-slicing");
            } else if c.contains("safety_checker=None") && !a.contains(&"--no-safety-checker") {
                a.push("--no-safety-checker");
            }
            if c.contains("bitsandbytes_4bit") {
                a.retain(|x| !x.starts_with("--quant"));
                a.push("--quant=nf4");
            } else if c.contains("bitsandbytes_8bit") {
                a.retain(|x| !x.starts_with("--quant"));
                a.push("--quant=int8");
            }
        }
        for r in &rest {
            a.retain(|x| !x.starts_with("--cpu-offload"));
            a.push(r);
        }
        json(&est(&a))["fit"]["fits"].as_bool().unwrap()
    };
    assert!(bigger(w, h), "the step's own size does not fit");
    // The torchao fp8 load line carries its own imports, so it runs as pasted.
    let fp8 = json(&est(&[
        "sdxl",
        "--quant",
        "fp8",
        "--precision",
        "fp32",
        "--gpu",
        "rtx-2060",
        "--format",
        "json",
    ]));
    let loads: Vec<&str> = fp8["fit"]["plan"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["config"].as_str())
        .filter(|c| c.contains("Float8WeightOnlyConfig"))
        .collect();
    assert!(!loads.is_empty(), "{fp8}");
    for c in loads {
        assert!(
            c.starts_with("import diffusers; from torchao.quantization import Float8WeightOnlyConfig; pipe = DiffusionPipeline.from_pretrained("),
            "{c}"
        );
    }
    assert!(!bigger(w + 8, h + 8), "a larger size fits too");
}

#[test]
fn image_sd15_json_contract() {
    let out = est(&[
        "runwayml/stable-diffusion-v1-5",
        "--precision",
        "fp16",
        "--images",
        "2",
        "--vae-slicing",
        "--cpu-offload",
        "model",
        "--gpu",
        "rtx-4090",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["model"]["pipeline"], "sd15");
    // UNet + VAE + CLIP text + the safety checker (CLIP ViT-L/14 vision).
    assert_eq!(
        j["model"]["params"],
        859_520_964u64 + 83_653_863 + 123_060_480 + 303_981_588
    );
    assert_eq!(j["setup"]["width"], 512);
    assert_eq!(j["setup"]["cpu_offload"], "model");
    assert_eq!(j["fit"]["fits"], true);
    let used = j["device_used_bytes"].as_u64().unwrap_or(0);
    assert!(used > j["peak_reserved_bytes"].as_u64().unwrap_or(u64::MAX));
    insta::assert_json_snapshot!(j);
}

#[test]
fn image_offload_lowers_the_peak() {
    let used = |extra: &[&str]| {
        let mut a = vec!["flux-dev", "--format", "json"];
        a.extend_from_slice(extra);
        let o = est(&a);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        json(&o)["device_used_bytes"].as_u64().unwrap_or(0)
    };
    let none = used(&[]);
    let model = used(&["--cpu-offload", "model"]);
    let seq = used(&["--cpu-offload", "sequential"]);
    let nf4 = used(&["--cpu-offload", "model", "--quant", "nf4"]);
    assert!(
        none > model && model > nf4 && nf4 > seq,
        "{none} {model} {nf4} {seq}"
    );
}

#[test]
fn image_bad_input() {
    let rows: &[(&[&str], &str)] = &[
        (&["flux-dev", "--width", "1000"][..], "multiples of 16"),
        (&["sd15", "--task", "train"][..], "only --task infer"),
        (&["sd15", "--quant", "int4"][..], "not a diffusers"),
        (
            &["sdxl", "--no-safety-checker"][..],
            "loads no safety checker",
        ),
        (
            &["qwen2.5-7b", "--no-safety-checker"][..],
            "image models only",
        ),
        (
            &["flux-dev", "--attention-slicing"][..],
            "no attention slicing",
        ),
        (&["qwen2.5-7b", "--width", "512"][..], "image models only"),
        (&["sdxl", "--precision", "mixed-fp16"][..], "one dtype"),
        (&["sdxl", "--batch", "2"][..], "--images N"),
    ];
    exit_2_says(&cli(&["estimate"]), rows);
}

#[test]
fn image_models_listed() {
    let o = est(&["--list-models"]);
    let t = stdout(&o);
    for id in [
        "runwayml/stable-diffusion-v1-5",
        "stabilityai/stable-diffusion-xl-base-1.0",
        "black-forest-labs/FLUX.1-dev",
    ] {
        assert!(t.contains(id), "{t}");
    }
}

/// Image pipelines answer to the names text models do (the repo id, its
/// part after `/`, the short name, punctuation ignored), a typo gets a
/// suggestion, and an engine for text models refuses them by name.
#[test]
fn image_models_resolve_like_text_models() {
    for (typed, id) in [
        (
            "stable-diffusion-xl-base-1.0",
            "stabilityai/stable-diffusion-xl-base-1.0",
        ),
        ("FLUX.1-dev", "black-forest-labs/FLUX.1-dev"),
        ("SD-15", "runwayml/stable-diffusion-v1-5"),
    ] {
        let o = est(&[typed, "--format", "json"]);
        assert_eq!(o.status.code(), Some(0), "{typed}: {}", stderr(&o));
        assert_eq!(json(&o)["model"]["id"], id, "{typed}");
    }
    exit_2_is(
        &cli(&["estimate"]),
        &[
            (
                &["stable-diffusion-xl-bas"],
                "error: unknown model \"stable-diffusion-xl-bas\" (did you mean stabilityai/stable-diffusion-xl-base-1.0?)\n",
            ),
            (
                &["sd15", "--engine", "llama.cpp", "--quant", "q4_k_m"],
                "error: runwayml/stable-diffusion-v1-5 is an image model: llama.cpp runs text models (drop --engine llama.cpp to estimate it with diffusers)\n",
            ),
        ],
    );
}

/// The reconstructed catalogue configs: listed and marked, reachable by their
/// short names, with the parameter counts transformers builds from them
/// (bench/estimate-oracle/param_counts.py: sum of p.numel() on the meta device).
#[test]
fn reconstructed_models_listed_with_exact_params() {
    let list = stdout(&est(&["--list-models"]));
    let cases: &[(&str, &str, u64)] = &[
        // `falcon-7b` alone also fits Falcon3-7B (listed, not picked).
        ("tiiuae/falcon-7b", "tiiuae/falcon-7b", 6_921_720_704),
        ("tiiuae/falcon-40b", "falcon-40b", 41_303_293_952),
        ("EleutherAI/gpt-neox-20b", "neox-20b", 20_554_567_680),
        (
            "stabilityai/stablelm-base-alpha-3b",
            "stablelm-3b",
            3_637_321_728,
        ),
        ("google/gemma-2-27b", "gemma-2-27b", 27_227_128_320),
        ("google/gemma-3-27b-it", "gemma-3-27b", 27_432_406_640),
    ];
    for (id, short, params) in cases {
        let line = list
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("{id} not listed:\n{list}"));
        assert!(line.contains(short), "{line}");
        assert!(line.contains("(reconstructed config)"), "{line}");
        let out = est(&[short, "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v = json(&out);
        assert_eq!(v["model"]["id"], *id);
        assert_eq!(v["model"]["params"], *params, "{id}");
        assert_eq!(v["model"]["reconstructed"], true, "{id}");
    }
    let gpt2 = json(&est(&["gpt2", "--format", "json"]));
    assert!(gpt2["model"].get("reconstructed").is_none());
}

#[test]
fn falcon_and_gemma_shapes() {
    let m = |name: &str| json(&est(&[name, "--format", "json"]))["model"].clone();
    let f7 = m("tiiuae/falcon-7b");
    assert_eq!(
        (f7["kv_heads"].as_u64(), f7["norms_per_layer"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(f7["bias"], false);
    assert_eq!(f7["tied_embeddings"], true);
    let f40 = m("falcon-40b");
    assert_eq!(
        (f40["kv_heads"].as_u64(), f40["norms_per_layer"].as_u64()),
        (Some(8), Some(2))
    );
    let neox = m("neox-20b");
    assert_eq!(neox["tied_embeddings"], false);
    assert_eq!(neox["bias"], true);
    let g2 = m("gemma-2-27b");
    assert_eq!(
        (g2["head_dim"].as_u64(), g2["sliding_layers"].as_u64()),
        (Some(128), Some(23))
    );
    let g3 = m("gemma-3-27b");
    // 62 layers, every 6th global: 52 sliding-window layers of 1024.
    assert_eq!(
        (g3["sliding_layers"].as_u64(), g3["sliding_window"].as_u64()),
        (Some(52), Some(1024))
    );
    // SigLIP tower + projector: 416,866,032 + 6,194,304.
    assert_eq!(g3["vision_params"], 423_060_336u64);
}

/// gpt-oss ships MXFP4 experts and bf16 everything else; the model card gives
/// the checkpoints as 12.8 GiB (20b) and 60.8 GiB (120b).
#[test]
fn gpt_oss_weights_match_published_checkpoints() {
    for (name, gib) in [("gpt-oss-20b", 12.8), ("gpt-oss-120b", 60.8)] {
        let v = json(&est(&[name, "--format", "json"]));
        assert_eq!(v["setup"]["quant"], "mxfp4");
        let w = v["components"]["weights_bytes"].as_f64().expect("weights") / (1u64 << 30) as f64;
        assert!((w - gib).abs() / gib < 0.02, "{name}: {w:.2} GiB vs {gib}");
    }
}

fn index_dir(index: &str, torch_dtype: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = format!(
        r#"{{"model_type":"llama","hidden_size":64,"intermediate_size":128,
        "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"torch_dtype":"{torch_dtype}"}}"#
    );
    fs::write(dir.path().join("config.json"), cfg).expect("write");
    fs::write(dir.path().join("model.safetensors.index.json"), index).expect("write");
    dir
}

const INDEX: &str = r#"{"metadata":{"total_size":3000000},"weight_map":{
    "model.embed_tokens.weight":"model-00001-of-00002.safetensors",
    "lm_head.weight":"model-00002-of-00002.safetensors"}}"#;

#[test]
fn bare_safetensors_index_gives_weights() {
    let dir = index_dir(INDEX, "bfloat16");
    let ix = dir.path().join("model.safetensors.index.json");
    let ix = ix.to_str().expect("utf8");
    let out = est(&[ix, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["components"]["weights_bytes"], 3_000_000);
    assert_eq!(v["model"]["checkpoint"]["index_only"], true);
    assert_eq!(v["model"]["checkpoint"]["index_tensors"], 2);
    assert_eq!(v["model"]["checkpoint"]["elements"], 1_500_000);
    // fp32 doubles the bf16 elements; the folder finds the index too.
    let v = json(&est(&[
        dir.path().to_str().expect("utf8"),
        "--precision",
        "fp32",
        "--format",
        "json",
    ]));
    assert_eq!(v["components"]["weights_bytes"], 6_000_000);
    let text = stdout(&est(&[ix]));
    assert!(
        text.contains("weights from the safetensors index"),
        "{text}"
    );
    // An unknown dtype keeps total_size as the weights.
    let dir = index_dir(INDEX, "auto");
    let v = json(&est(&[
        dir.path().to_str().expect("utf8"),
        "--format",
        "json",
    ]));
    assert_eq!(v["components"]["weights_bytes"], 3_000_000);
}

#[test]
fn index_with_its_shards_reads_the_headers() {
    let dir = index_dir(INDEX, "bfloat16");
    let h = r#"{"w":{"dtype":"BF16","shape":[1000,1000],"data_offsets":[0,2000000]}}"#;
    for shard in [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ] {
        fs::write(dir.path().join(shard), safetensors(h)).expect("write");
    }
    let v = json(&est(&[
        dir.path().to_str().expect("utf8"),
        "--format",
        "json",
    ]));
    assert_eq!(v["components"]["weights_bytes"], 4_000_000);
    assert!(v["model"]["checkpoint"].get("index_only").is_none());
}

#[test]
fn bad_safetensors_index_is_one_line_error() {
    for bad in [
        "{",
        r#"{"weight_map":{"a":"x.safetensors"}}"#,
        r#"{"metadata":{"total_size":10},"weight_map":{"a":7}}"#,
    ] {
        let dir = index_dir(bad, "bfloat16");
        let ix = dir.path().join("model.safetensors.index.json");
        cli(&["estimate"])
            .arg(&ix)
            .run()
            .code(2)
            .stderr_one_line()
            .stderr_has("model.safetensors.index.json")
            .stderr_has("malformed safetensors index");
    }
    // An index with no config.json beside it.
    let dir = tempfile::tempdir().expect("tmp");
    let ix = dir.path().join("model.safetensors.index.json");
    fs::write(&ix, INDEX).expect("write");
    cli(&["estimate"])
        .arg(&ix)
        .run()
        .code(2)
        .stderr_one_line()
        .stderr_has("no config.json");
}

/// `estimate --format json` for `args`, asserting exit 0.
fn est_json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--format", "json"]);
    let out = est(&a);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    json(&out)
}

fn bytes(v: &serde_json::Value, key: &str) -> u64 {
    v["components"][key].as_u64().expect(key)
}

#[test]
fn tensor_parallel_training_divides_weights_per_gpu() {
    let base = ["meta-llama/Llama-3.1-70B", "--task", "train"];
    let one = est_json(&base);
    let tp8 = est_json(&[&base[..], &["--gpus", "8", "--tp", "8"]].concat());
    assert_eq!(tp8["setup"]["tp"], 8);
    assert_eq!(tp8["setup"]["pp"], 1);
    assert_eq!(tp8["setup"]["gpus"], 8);
    let (w1, w8) = (bytes(&one, "weights_bytes"), bytes(&tp8, "weights_bytes"));
    assert!(w8.abs_diff(w1 / 8) <= 1, "{w1} {w8}");
    // NCCL buffers sit with the CUDA context, outside PyTorch's counters.
    let ctx = |v: &serde_json::Value| bytes(v, "cuda_context_bytes");
    assert_eq!(ctx(&tp8) - ctx(&one), 2 << 30);
    // --gpus defaults to tp × pp.
    let dflt = est_json(&[&base[..], &["--tp", "8"]].concat());
    assert_eq!(dflt["setup"]["gpus"], 8);
    let text = stdout(&est(&[&base[..], &["--tp", "8"]].concat()));
    assert!(
        text.contains("per GPU (the busiest of 8): tensor 8"),
        "{text}"
    );
}

#[test]
fn pipeline_and_zero_over_data_parallel() {
    let base = [
        "llama-3.1-8b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
    ];
    let one = est_json(&base);
    let pp = est_json(&[&base[..], &["--pp", "4", "--grad-accum", "8"]].concat());
    assert!(bytes(&pp, "weights_bytes") < bytes(&one, "weights_bytes") / 3);
    // 8 GPUs = pp 4 × dp 2: ZeRO-1 shards the optimizer (with the fp32 master) over 2.
    let z1 = est_json(&[&base[..], &["--pp", "4", "--gpus", "8", "--zero", "1"]].concat());
    let z1_16 = est_json(&[&base[..], &["--pp", "4", "--gpus", "16", "--zero", "1"]].concat());
    let o = |v: &serde_json::Value| bytes(v, "optimizer_bytes");
    assert!(
        o(&z1_16).abs_diff(o(&z1) / 2) <= 1,
        "{} {}",
        o(&z1),
        o(&z1_16)
    );
}

#[test]
fn tensor_parallel_inference_splits_weights_and_cache() {
    let base = ["llama-3.1-8b", "--seq", "4096", "--new-tokens", "512"];
    let one = est_json(&base);
    let two = est_json(&[&base[..], &["--tp", "2"]].concat());
    for key in ["weights_bytes", "kv_cache_bytes"] {
        let (a, b) = (bytes(&one, key), bytes(&two, key));
        assert!(b.abs_diff(a / 2) <= 1, "{key}: {a} {b}");
    }
}

#[test]
fn bad_parallel_degrees_exit_2() {
    let rows: &[(&[&str], &str)] = &[
        (&["llama-3.1-8b", "--tp", "3"][..], "32 attention heads"),
        (
            &["llama-3.1-8b", "--gpus", "6", "--tp", "4"][..],
            "not a multiple",
        ),
        (&["llama-3.1-8b", "--pp", "64"][..], "32 layers"),
        (&["sdxl", "--tp", "2"][..], "--tp/--pp"),
    ];
    exit_2_says(&cli(&["estimate"]), rows);
    // clap rejects 0 before the estimator sees it.
    exit_2_usage(
        &cli(&["estimate"]),
        &[(&["llama-3.1-8b", "--pp", "0"], "--pp")],
    );
}

#[test]
fn vllm_tensor_parallel_pool() {
    let base = [
        "llama-3.1-70b",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "h100-sxm",
        "--format",
        "json",
    ];
    let out = est(&base);
    assert_eq!(out.status.code(), Some(1), "70B bf16 does not fit one H100");
    let one = json(&out);
    // Quantized lines on the one GPU come first; tensor parallelism last.
    let plan = one["fit"]["plan"].as_array().expect("plan");
    let step = plan.last().expect("steps");
    assert_eq!(step["remedy"], "vllm-tensor-parallel", "{one}");
    // At vLLM's default max_model_len (the model's 131,072 tokens) two H100s
    // hold the weights but not one full-length request's KV cache: four.
    assert!(
        step["config"]
            .as_str()
            .is_some_and(|c| c.contains("--max-model-len 131072 --tensor-parallel-size 4")),
        "{step}"
    );
    assert_eq!(one["fit"]["plan_fits"], true);
    let out = est(&[&base[..], &["--tp", "4"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let s = &v["serve"];
    let w = |v: &serde_json::Value| v["serve"]["weights_bytes"].as_u64().expect("w");
    assert!(w(&v).abs_diff(w(&one) / 4) <= 1);
    let pool = s["kv_pool_bytes"].as_u64().expect("pool");
    assert_eq!(s["kv_pool_total_bytes"].as_u64(), Some(4 * pool));
    let block = s["block_bytes"].as_u64().expect("block");
    // 8 KV heads over 4 ranks: 2 heads × 128 × 80 layers × 16 tokens × K,V × 2 B.
    assert_eq!(block, 16 * 2 * 2 * 128 * 80 * 2);
    assert_eq!(s["kv_tokens"].as_u64(), Some(pool / block * 16));
    assert!(
        s["command"]
            .as_str()
            .is_some_and(|c| c.contains("--tensor-parallel-size 4")),
        "{s}"
    );
    let text = stdout(&est(&base[..7]));
    assert!(!text.contains("per GPU"), "{text}");
    let text = stdout(&est(&[&base[..7], &["--tp", "4"]].concat()));
    assert!(text.contains("tensor_parallel_size 4"), "{text}");
    assert!(text.contains("--tensor-parallel-size 4"), "{text}");
}

/// The JSON type of `v` ("u64", "i64", "string", …), for comparing shapes.
fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(n) if n.is_u64() => "u64",
        serde_json::Value::Number(n) if n.is_i64() => "i64",
        serde_json::Value::Number(_) => "f64",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// Asserts that every key of `text` is in `img` with the same JSON type,
/// recursively into objects and into the first element of arrays; keys in
/// `skip` (per-kind contents such as the model config) only compare types.
fn same_shape(text: &serde_json::Value, img: &serde_json::Value, path: &str, skip: &[&str]) {
    match (text, img) {
        (serde_json::Value::Object(t), serde_json::Value::Object(i)) if !skip.contains(&path) => {
            for (k, tv) in t {
                let p = format!("{path}.{k}");
                let iv = i.get(k).unwrap_or_else(|| panic!("{p} missing"));
                same_shape(tv, iv, &p, skip);
            }
        }
        (serde_json::Value::Array(t), serde_json::Value::Array(i)) => {
            if let (Some(t0), Some(i0)) = (t.first(), i.first()) {
                same_shape(t0, i0, &format!("{path}[0]"), skip);
            }
        }
        // The one-paste plan is a string, or null where there is none.
        _ if path.ends_with(".fit.paste") => {
            assert!(img.is_null() || img.is_string(), "{path}: {img}");
        }
        // A signed headroom serialises as u64 when positive.
        _ if path.ends_with("headroom_bytes") => {
            assert!(img.as_i64().is_some(), "{path}: {img}");
        }
        _ => assert_eq!(kind(text), kind(img), "{path}: {text} vs {img}"),
    }
}

#[test]
fn image_json_has_the_text_model_shape() {
    let run = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--format", "json"]);
        let o = est(&a);
        assert!(o.status.code().is_some_and(|c| c < 2), "{}", stderr(&o));
        json(&o)
    };
    let text = run(&[
        "meta-llama/Llama-3.1-8B",
        "--task",
        "train",
        "--method",
        "lora",
        "--batch",
        "8",
        "--gpu",
        "rtx-4090",
    ]);
    let model_keys = ["id", "params", "trainable_params"];
    let setup_keys = ["task", "precision", "quant", "attention"];
    for img in [
        run(&[
            "sd15", "--images", "4", "--width", "768", "--height", "768", "--gpu", "rtx-2060",
        ]),
        run(&["sdxl", "--gpu", "rtx-3060"]),
        run(&["flux-dev", "--gpu", "rtx-4090"]),
    ] {
        same_shape(&text, &img, "", &[".model", ".setup"]);
        let tk: Vec<&String> = text
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        for k in tk {
            assert!(img.get(k).is_some(), "{k}");
        }
        for k in model_keys {
            assert_eq!(kind(&text["model"][k]), kind(&img["model"][k]), "model.{k}");
        }
        for k in setup_keys {
            assert_eq!(kind(&text["setup"][k]), kind(&img["setup"][k]), "setup.{k}");
        }
        assert_eq!(img["components"].as_object().map(|o| o.len()), Some(8));
        for k in [
            "gradients_bytes",
            "optimizer_bytes",
            "logits_bytes",
            "kv_cache_bytes",
        ] {
            assert_eq!(img["components"][k], 0, "{k}");
        }
        let c = &img["components"];
        let allocated: u64 = ["weights_bytes", "activations_bytes", "temporaries_bytes"]
            .iter()
            .filter_map(|k| c[k].as_u64())
            .sum();
        assert_eq!(img["peak_allocated_bytes"].as_u64(), Some(allocated));
        let phase = img["peak_phase"].as_str().unwrap_or("");
        assert!(
            ["encode-prompt", "denoise", "vae-decode", "safety-check"].contains(&phase),
            "{phase}"
        );
        let weights: u64 = img["image"]["weights"]
            .as_array()
            .map(|a| a.iter().filter_map(|w| w["bytes"].as_u64()).sum())
            .unwrap_or(0);
        assert_eq!(c["weights_bytes"].as_u64(), Some(weights));
        let fit = &img["fit"];
        assert!(fit["max_batch"].as_u64().is_some() && fit["max_seq"].as_u64().is_some());
    }
}

/// The bytes of one component in `image.weights`.
fn component_bytes(j: &serde_json::Value, name: &str) -> u64 {
    j["image"]["weights"]
        .as_array()
        .and_then(|a| a.iter().find(|w| w["name"] == name))
        .and_then(|w| w["bytes"].as_u64())
        .unwrap_or_else(|| panic!("{name} not in {}", j["image"]))
}

#[test]
fn image_quant_shrinks_flux_weights_by_bits_per_weight() {
    let weights = |q: &str| {
        let o = est(&["flux-dev", "--quant", q, "--format", "json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        json(&o)
    };
    let bf16 = weights("none");
    // memory-estimation.md §3.1: int8/fp8 8 bits, NF4 4.5 bits per linear weight
    // (vs 16); convolutions, norms and embeddings stay bf16.
    for (q, lo, hi) in [
        ("int8", 0.49, 0.52),
        ("fp8", 0.49, 0.52),
        ("nf4", 0.27, 0.31),
        ("nf4-dq", 0.25, 0.29),
    ] {
        let j = weights(q);
        assert_eq!(j["setup"]["quant"], q);
        for name in ["transformer", "text_encoder_2"] {
            let r = component_bytes(&j, name) as f64 / component_bytes(&bf16, name) as f64;
            assert!((lo..hi).contains(&r), "{q} {name}: {r}");
        }
        // The CLIP text encoder and the VAE are not quantized.
        for name in ["text_encoder", "vae"] {
            assert_eq!(component_bytes(&j, name), component_bytes(&bf16, name));
        }
    }
}

#[test]
fn image_precision_defaults_follow_the_model_cards() {
    let setup = |m: &str| json(&est(&[m, "--format", "json"]))["setup"]["precision"].clone();
    assert_eq!(setup("sd15"), "fp16");
    assert_eq!(setup("sdxl"), "fp16");
    assert_eq!(setup("flux-dev"), "bf16");
    let fp32 = json(&est(&["sd15", "--precision", "fp32", "--format", "json"]));
    let fp16 = json(&est(&["sd15", "--format", "json"]));
    assert_eq!(
        component_bytes(&fp32, "unet"),
        2 * component_bytes(&fp16, "unet")
    );
}

#[test]
fn image_safety_checker_switch_changes_weights_by_its_size() {
    // 303,981,588 parameters (CLIP ViT-L/14 vision + projection + concepts), fp16.
    let sc_params = 303_981_588u64;
    for extra in [&[][..], &["--cpu-offload", "model"][..]] {
        let run = |more: &[&str]| {
            let mut a = vec!["sd15", "--format", "json"];
            a.extend_from_slice(extra);
            a.extend_from_slice(more);
            json(&est(&a))
        };
        let with = run(&[]);
        let without = run(&["--no-safety-checker"]);
        assert_eq!(with["setup"]["safety_checker"], true);
        assert_eq!(without["setup"]["safety_checker"], false);
        let p = |j: &serde_json::Value| j["model"]["params"].as_u64().unwrap_or(0);
        assert_eq!(p(&with) - p(&without), sc_params);
        assert_eq!(component_bytes(&with, "safety_checker"), 2 * sc_params);
        // Offload leaves the checker on the GPU, so every phase carries it.
        assert_eq!(with["peak_phase"], without["peak_phase"], "{extra:?}");
        let w = |j: &serde_json::Value| j["components"]["weights_bytes"].as_u64().unwrap_or(0);
        assert_eq!(w(&with) - w(&without), 2 * sc_params, "{extra:?}");
    }
}

#[test]
fn image_sd15_fp32_plan_drops_the_safety_checker() {
    let out = est(&[
        "sd15",
        "--precision",
        "fp32",
        "--attention",
        "eager",
        "--images",
        "2",
        "--width",
        "832",
        "--height",
        "832",
        "--gpu",
        "rtx-2060",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("safety_checker 303.98M"), "{text}");
    assert!(text.contains("[unload-models]"), "{text}");
    // The load line of a later step keeps the earlier load-time choices.
    assert!(
        text.contains("torch_dtype=torch.float16, safety_checker=None)"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

/// transformers refuses SDPA for Gemma-2 (attention soft-capping): the
/// estimate says so and counts eager attention's a·s² tensors, which grow
/// with the square of the sequence; `--attention flash` does not.
#[test]
fn gemma2_sdpa_means_eager() {
    let run = |extra: &[&str]| {
        let mut a = vec!["google/gemma-2-9b", "--task", "train", "--seq", "4096"];
        a.extend_from_slice(extra);
        est(&a)
    };
    let text = stdout(&run(&[]));
    assert!(
        text.contains("attention: eager (transformers has no SDPA path"),
        "{text}"
    );
    let act = |extra: &[&str]| {
        let mut a = extra.to_vec();
        a.extend_from_slice(&["--format", "json"]);
        json(&run(&a))["components"]["activations_bytes"]
            .as_u64()
            .expect("activations")
    };
    let sdpa = act(&[]);
    assert_eq!(sdpa, act(&["--attention", "eager"]));
    let flash = act(&["--attention", "flash"]);
    // 42 layers × 16 heads × 4096² scores × (tanh 2 + softmax 4 + cast 2 B).
    assert!(sdpa - flash >= 42 * 16 * 4096 * 4096 * 8, "{sdpa} {flash}");
    assert!(!stdout(&run(&["--attention", "flash"])).contains("attention: eager"));
}

/// `--trainer`: HF Trainer drops the model output before backward, so the
/// half-precision logits (tokens × vocabulary × 2 B) are not held; the JSON
/// setup says so.
#[test]
fn trainer_loop_drops_the_held_logits() {
    let base = [
        "Qwen/Qwen2.5-0.5B",
        "--task",
        "train",
        "--batch",
        "2",
        "--seq",
        "2048",
        "--grad-checkpointing",
        "--format",
        "json",
    ];
    let held = json(&est(&base));
    let dropped = json(&est(&[&base[..], &["--trainer"]].concat()));
    assert_eq!(held["setup"]["drops_output"], false);
    assert_eq!(dropped["setup"]["drops_output"], true);
    let peak = |v: &serde_json::Value| v["peak_allocated_bytes"].as_u64().expect("peak");
    assert_eq!(peak(&held) - peak(&dropped), 2 * 2048 * 151_936 * 2);
}

/// `--kbit-upcast` (PEFT's prepare_model_for_kbit_training): the unquantized
/// parameters in fp32 and checkpointing on; only for a bitsandbytes model.
/// The measured rows are in tests/oracle.json (a real QLoRA step on the CPU).
#[test]
fn kbit_upcast_casts_unquantized_parameters_to_fp32() {
    let base = [
        "meta-llama/Llama-3.1-8B",
        "--task",
        "train",
        "--method",
        "qlora",
        "--format",
        "json",
    ];
    let plain = json(&est(&base));
    let up = json(&est(&[&base[..], &["--kbit-upcast"]].concat()));
    assert_eq!(up["setup"]["kbit_upcast"], true);
    assert_eq!(up["setup"]["grad_checkpointing"], true);
    assert_eq!(plain["setup"]["kbit_upcast"], false);
    let w = |v: &serde_json::Value| v["components"]["weights_bytes"].as_u64().unwrap();
    // Embeddings and the untied head (2 × 128,256 × 4,096) and the norms go
    // from 2 to 4 bytes.
    let unquantized: u64 = 2 * 128_256 * 4096 + (2 * 32 + 1) * 4096;
    assert_eq!(w(&up) - w(&plain), 2 * unquantized);
    let says = "--kbit-upcast is PEFT's prepare_model_for_kbit_training on a bitsandbytes model";
    exit_2_says(
        &cli(&["estimate", "gpt2", "--kbit-upcast"]),
        &[
            (&[], says),
            (&["--task", "train", "--method", "lora"], says),
        ],
    );
}

/// bitsandbytes under transformers 5 leaves an MoE's routed experts in 16
/// bits (fused parameters, not nn.Linear): the transformers estimate keeps
/// them and says so; vLLM's own bitsandbytes method quantizes them.
#[test]
fn bitsandbytes_keeps_moe_experts_16_bit_under_transformers_not_vllm() {
    let id = "mistralai/Mixtral-8x7B-v0.1";
    let hf = json(&est(&[id, "--quant", "nf4", "--format", "json"]));
    let warnings = hf["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("routed experts as fused parameters: they stay 16-bit")),
        "{warnings:?}"
    );
    let plain = json(&est(&[id, "--format", "json"]));
    let w = |v: &serde_json::Value| v["components"]["weights_bytes"].as_u64().unwrap();
    // Only attention, shared parts and norms shrink: well over 90 % remains.
    assert!(
        w(&hf) > w(&plain) * 9 / 10 && w(&hf) < w(&plain),
        "{} vs {}",
        w(&hf),
        w(&plain)
    );
    let vllm = json(&est(&[
        id, "--task", "serve", "--engine", "vllm", "--quant", "nf4", "--gpu", "h100-sxm",
        "--format", "json",
    ]));
    assert!(
        w(&vllm) < w(&plain) * 4 / 10,
        "{} vs {}",
        w(&vllm),
        w(&plain)
    );
    assert!(!vllm.to_string().contains("fused parameters"));
    // A dense model quantizes as before, with no such warning.
    let dense = json(&est(&[
        "meta-llama/Llama-3.1-8B",
        "--quant",
        "nf4",
        "--format",
        "json",
    ]));
    assert!(!dense.to_string().contains("fused parameters"));
}

/// Community fine-tunes resolve by the base in their name; a pre-quantized
/// re-packaging says the estimate is 16-bit until --quant is set.
#[test]
fn community_fine_tunes_resolve_and_prequantized_names_warn() {
    let v = json(&est(&[
        "NousResearch/Hermes-3-Llama-3.1-8B",
        "--format",
        "json",
    ]));
    assert_eq!(v["model"]["resolved_to"], "meta-llama/Llama-3.1-8B");
    assert_eq!(v["model"]["params"], 8_030_261_248u64);
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(0), "{v}");
    let out = est(&["unsloth/llama-3-8b-bnb-4bit"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("warning: unsloth/llama-3-8b-bnb-4bit looks quantized before upload (bnb): the estimate is for 16-bit weights; set --quant to the checkpoint's format\nunsloth/llama-3-8b-bnb-4bit, config of catalogue entry meta-llama/Meta-Llama-3-8B"),
        "{text}"
    );
    let quiet = est(&["unsloth/llama-3-8b-bnb-4bit", "--quant", "nf4"]);
    assert!(
        !stdout(&quiet).contains("quantized before upload"),
        "{}",
        stdout(&quiet)
    );
    cli(&["estimate", "teknium/OpenHermes-2.5-Mistral-7B"])
        .run()
        .code(2)
        .stderr_has("is ambiguous: it fits")
        .stderr_has("mistralai/Mistral-7B-v0.1");
}

/// The hub ids a new user tries first: fine-tunes resolve to the
/// catalogue entry with their architecture, and the output names it.
#[test]
fn fine_tune_ids_resolve_and_say_to_what() {
    for (id, entry, params) in [
        ("mistralai/Mistral-7B-Instruct-v0.2", None, 7_241_732_096u64),
        (
            "meta-llama/Llama-2-7b-chat-hf",
            Some("meta-llama/Llama-2-7b-hf"),
            6_738_415_616,
        ),
        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", None, 1_100_048_384),
        (
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
            None,
            7_615_616_512,
        ),
        (
            "mistralai/Mistral-7B-Instruct-v0.3",
            Some("mistralai/Mistral-7B-v0.3"),
            7_248_023_552,
        ),
    ] {
        let v = json(&est(&[id, "--format", "json"]));
        assert_eq!(v["model"]["id"], id);
        assert_eq!(v["model"]["params"], params, "{id}");
        assert_eq!(v["model"]["resolved_to"].as_str(), entry, "{id}");
        let human = stdout(&est(&[id]));
        let first = human.lines().next().unwrap_or_default();
        assert!(first.starts_with(id), "{first}");
        if let Some(e) = entry {
            assert!(
                first.contains(&format!("config of catalogue entry {e}")),
                "{first}"
            );
        }
    }
}

#[test]
fn ambiguous_short_names_list_candidates() {
    cli(&["estimate", "qwen-7b"])
        .run()
        .code(2)
        .one_error_line()
        .stderr_has("is ambiguous")
        .stderr_has("Qwen/Qwen-7B")
        .stderr_has("Qwen/Qwen2.5-7B")
        .stderr_has("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B");
    let e = stderr(&est(&["mistral-7b"]));
    assert!(
        e.contains("mistralai/Mistral-7B-v0.1") && e.contains("mistralai/Mistral-7B-v0.3"),
        "{e}"
    );
}

/// A fake Hugging Face cache: `models--ORG--NAME/{refs/main, snapshots/<rev>/config.json}`.
fn fake_cache(root: &std::path::Path, id: &str, revs: &[(&str, &str)], main: Option<&str>) {
    let repo = root.join(format!("models--{}", id.replace('/', "--")));
    for (rev, config) in revs {
        let snap = repo.join("snapshots").join(rev);
        fs::create_dir_all(&snap).expect("mkdir");
        fs::write(snap.join("config.json"), config).expect("write");
    }
    if let Some(m) = main {
        fs::create_dir_all(repo.join("refs")).expect("mkdir");
        fs::write(repo.join("refs").join("main"), m).expect("write");
    }
}

/// `estimate` with the Hugging Face cache variables set for the binary.
fn est_env(args: &[&str], vars: &[(&str, &std::path::Path)]) -> Output {
    let mut c = oomkit();
    c.current_dir(std::env::temp_dir())
        .arg("estimate")
        .args(args);
    c.env_remove("HF_HUB_CACHE")
        .env_remove("HF_HOME")
        .env_remove("XDG_CACHE_HOME");
    for (k, v) in vars {
        c.env(k, v);
    }
    c.output().expect("run oomkit")
}

const TINY: &str = r#"{"model_type":"llama","hidden_size":2048,"intermediate_size":5632,
    "num_hidden_layers":22,"num_attention_heads":32,"num_key_value_heads":4,"vocab_size":32000}"#;
const TINY_2L: &str = r#"{"model_type":"llama","hidden_size":2048,"intermediate_size":5632,
    "num_hidden_layers":2,"num_attention_heads":32,"num_key_value_heads":4,"vocab_size":32000}"#;

#[test]
fn downloaded_models_are_read_from_the_hf_cache() {
    let tmp = tempfile::tempdir().expect("tmp");
    let hub = tmp.path().join("hub");
    // A community fine-tune no catalogue knows; refs/main picks the revision.
    fake_cache(
        &hub,
        "someone/my-tiny-chat",
        &[("aaa111", TINY_2L), ("bbb222", TINY)],
        Some("bbb222\n"),
    );
    for vars in [
        vec![("HF_HUB_CACHE", hub.as_path())],
        vec![("HF_HOME", tmp.path())],
    ] {
        let out = est_env(&["someone/my-tiny-chat", "--format", "json"], &vars);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v = json(&out);
        assert_eq!(v["model"]["id"], "someone/my-tiny-chat");
        assert_eq!(v["model"]["params"], 1_100_048_384u64);
        let file = v["model"]["config_file"].as_str().unwrap_or_default();
        assert!(file.ends_with("bbb222/config.json"), "{file}");
    }
    // ~/.cache/huggingface/hub when neither variable is set.
    let home = tmp.path().join("home");
    fake_cache(
        &home.join(".cache/huggingface/hub"),
        "someone/other",
        &[("c0ffee", TINY)],
        None,
    );
    let out = est_env(&["someone/other"], &[("HOME", home.as_path())]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = stdout(&out).lines().next().unwrap_or_default().to_string();
    assert!(
        first.contains("config from the Hugging Face cache"),
        "{first}"
    );
    // refs/main naming a revision that is not there: the newest snapshot.
    fake_cache(
        &hub,
        "someone/stale-ref",
        &[("fff555", TINY)],
        Some("0000000000"),
    );
    let v = json(&est_env(
        &["someone/stale-ref", "--format", "json"],
        &[("HF_HUB_CACHE", &hub)],
    ));
    assert_eq!(v["model"]["params"], 1_100_048_384u64);
    // The hub's layout: config.json is a symlink into blobs/; ids are
    // matched case-insensitively.
    let repo = hub.join("models--Org--Linked");
    fs::create_dir_all(repo.join("blobs")).expect("mkdir");
    fs::create_dir_all(repo.join("snapshots/abc123")).expect("mkdir");
    fs::write(repo.join("blobs/0123abcd"), TINY).expect("write");
    std::os::unix::fs::symlink(
        "../../blobs/0123abcd",
        repo.join("snapshots/abc123/config.json"),
    )
    .expect("symlink");
    let v = json(&est_env(
        &["org/linked", "--format", "json"],
        &[("HF_HUB_CACHE", &hub)],
    ));
    assert_eq!(v["model"]["params"], 1_100_048_384u64);
    // The cached config is the truth for its id, before the catalogue.
    fake_cache(
        &hub,
        "meta-llama/Llama-2-7b-hf",
        &[("ddd333", TINY)],
        Some("ddd333"),
    );
    let v = json(&est_env(
        &["meta-llama/Llama-2-7b-hf", "--format", "json"],
        &[("HF_HUB_CACHE", &hub)],
    ));
    assert_eq!(v["model"]["params"], 1_100_048_384u64);
}

#[test]
fn corrupt_cached_config_is_one_line_error_naming_the_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    fake_cache(
        tmp.path(),
        "org/broken",
        &[("eee444", "{\"hidden_size\": 64,")],
        Some("eee444"),
    );
    cli(&["estimate", "org/broken"])
        .env_remove("HF_HOME")
        .env_remove("XDG_CACHE_HOME")
        .env("HF_HUB_CACHE", tmp.path())
        .run()
        .code(2)
        .stderr_one_line()
        .stderr_has("eee444/config.json")
        .stderr_has("not a usable Hugging Face config.json");
}

/// The oomkit flags that estimate a `vllm serve` line the plan printed:
/// `--quantization fp8` is `--quant fp8`, `bitsandbytes` is `--quant nf4`,
/// `--kv-cache-dtype fp8` is `--kv-dtype fp8`, a published AWQ checkpoint
/// of `model` is `model --quant int4`.
fn replay_vllm_line(model: &str, gpu: &str, line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.get(..2), Some(&["vllm", "serve"][..]), "{line}");
    let served = words.get(2).expect("model");
    let mut a: Vec<String> = [model, "--engine", "vllm", "--task", "serve", "--gpu", gpu]
        .map(String::from)
        .to_vec();
    if !served.eq_ignore_ascii_case(model) {
        assert!(served.to_ascii_lowercase().contains("awq"), "{line}");
        a.extend(["--quant".into(), "int4".into()]);
    }
    let mut rest = words.iter().skip(3);
    while let (Some(flag), Some(value)) = (rest.next(), rest.next()) {
        let (flag, value) = match (*flag, *value) {
            ("--quantization", "fp8") => ("--quant", "fp8"),
            ("--quantization", "bitsandbytes") => ("--quant", "nf4"),
            ("--kv-cache-dtype", "fp8") => ("--kv-dtype", "fp8"),
            ("--tensor-parallel-size", v) => ("--tp", v),
            (f @ ("--gpu-memory-utilization" | "--max-model-len"), v) => (f, v),
            other => panic!("unexpected vllm flag {other:?} in {line}"),
        };
        a.extend([flag.to_string(), value.to_string()]);
    }
    a
}

/// A 70B in bf16 on one H100: the weights alone exceed vLLM's request, so the
/// plan quantizes on the one GPU (FP8 on Hopper, the published AWQ
/// checkpoint, bitsandbytes 4-bit, each with the longest context that
/// starts) before it adds GPUs. Every printed line, run back through
/// oomkit, starts (exit 0).
#[test]
fn vllm_plan_quantizes_a_70b_on_one_h100() {
    let model = "meta-llama/Llama-3.1-70B-Instruct";
    let base = [
        model, "--engine", "vllm", "--task", "serve", "--gpu", "h100-sxm",
    ];
    let out = est(&base);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("vLLM would refuse to start"), "{text}");
    // The pool line as given, then the quantized ones and tensor parallelism.
    assert!(
        text.contains("[quantize-8bit]") && text.contains("--quantization fp8"),
        "{text}"
    );
    assert!(
        text.contains("vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 "),
        "{text}"
    );
    assert!(text.contains("--quantization bitsandbytes"), "{text}");
    assert!(text.contains("--tensor-parallel-size 4"), "{text}");
    let steps: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("vllm serve "))
        .skip(1)
        .collect();
    assert_eq!(steps.len(), 4, "{text}");
    for line in steps {
        let args = replay_vllm_line(model, "h100-sxm", line);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let again = est(&args);
        assert_eq!(again.status.code(), Some(0), "{line}\n{}", stdout(&again));
    }
    // JSON: the same plan; the headroom is what is missing, never positive.
    let out = est(&[&base[..], &["--format", "json"]].concat());
    let v = json(&out);
    assert!(v["fit"]["headroom_bytes"].as_i64().expect("headroom") < 0);
    let plan = v["fit"]["plan"].as_array().expect("plan");
    let ids: Vec<&str> = plan.iter().filter_map(|p| p["remedy"].as_str()).collect();
    assert_eq!(
        ids,
        [
            "quantize-8bit",
            "quantize-4bit",
            "quantize-4bit",
            "vllm-tensor-parallel"
        ]
    );
    for p in plan {
        assert_eq!(p["serve"]["fits"], true, "{p}");
        assert_eq!(p["config"], p["serve"]["command"], "{p}");
    }
    assert_eq!(plan[3]["gpus"], 4);
}

/// An A100 (compute capability 8.0) has no FP8 line; the base model (no
/// published AWQ checkpoint of its own) gets bitsandbytes only.
#[test]
fn vllm_plan_fp8_only_on_ada_and_newer() {
    let out = est(&[
        "meta-llama/Llama-3.1-70B",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "a100-80gb",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json(&out);
    let configs: Vec<&str> = v["fit"]["plan"]
        .as_array()
        .expect("plan")
        .iter()
        .filter_map(|p| p["config"].as_str())
        .collect();
    assert!(
        configs
            .iter()
            .all(|c| !c.contains("fp8") && !c.contains("AWQ")),
        "{configs:?}"
    );
    assert!(
        configs
            .iter()
            .any(|c| c.contains("--quantization bitsandbytes")),
        "{configs:?}"
    );
}

/// Short only by what 0.95 adds: the first line keeps everything and raises
/// `--gpu-memory-utilization`; the capped context comes second.
#[test]
fn vllm_plan_raises_utilization_when_that_is_enough() {
    let base = [
        "llama-3.1-8b",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "rtx-4090",
    ];
    let at95 = est(&[
        &base[..],
        &["--gpu-memory-utilization", "0.95", "--format", "json"],
    ]
    .concat());
    let len = json(&at95)["serve"]["max_fit_len"]
        .as_u64()
        .expect("len")
        .to_string();
    let out = est(&[&base[..], &["--max-model-len", &len]].concat());
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    let want = "  1. raise --gpu-memory-utilization to 0.95 (only on a GPU no other process uses) [vllm-gpu-memory-utilization]";
    assert!(text.contains(want), "{text}");
    assert!(
        text.contains(&format!(
            "vllm serve meta-llama/Llama-3.1-8B --gpu-memory-utilization 0.95 --max-model-len {len}\n"
        )),
        "{text}"
    );
    assert!(text.contains("  2. cap the context at "), "{text}");
}

/// `--quant` values vLLM cannot load in flight are one-line errors (exit 2);
/// the ones it can print their `--quantization`.
#[test]
fn vllm_quant_flags() {
    let base = [
        "llama-3.1-8b",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "h100-sxm",
    ];
    exit_2_says(
        &cli(&["estimate"]).args(&base),
        &[
            (
                &["--quant", "int8"],
                "vLLM does not quantize to 8-bit integers",
            ),
            (&["--quant", "int4"], "from a pre-quantized checkpoint"),
        ],
    );
    for (q, flag) in [
        ("fp8", "--quantization fp8"),
        ("nf4", "--quantization bitsandbytes"),
    ] {
        let out = est(&[&base[..], &["--quant", q]].concat());
        assert_eq!(out.status.code(), Some(0), "{q}: {}", stderr(&out));
        assert!(stdout(&out).contains(flag), "{}", stdout(&out));
    }
    let out = est(&[
        "meta-llama/Llama-3.1-8B-Instruct",
        "--engine",
        "vllm",
        "--task",
        "serve",
        "--gpu",
        "h100-sxm",
        "--quant",
        "int4",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("vllm serve hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4 "),
        "{}",
        stdout(&out)
    );
}

/// `--batch 32` keeps its effective batch: the plan's micro-batch is the
/// largest divisor that fits with the other steps (8 × 4 here), and the
/// cheapest set has no 8-bit optimizer once LoRA is on.
#[test]
fn train_plan_keeps_the_effective_batch() {
    let args = [
        "mistralai/Mistral-7B-v0.1",
        "--task",
        "train",
        "--batch",
        "32",
        "--seq",
        "1024",
        "--gpu",
        "rtx-4090",
    ];
    let out = est(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("micro-batch 8 with gradient accumulation 4 (same effective batch 32) [gradient-accumulation]"),
        "{text}"
    );
    assert!(!text.contains("per_device_train_batch_size=1,"), "{text}");
    let v = json(&est(&[&args[..], &["--format", "json"]].concat()));
    let plan = v["fit"]["plan"].as_array().expect("plan");
    let ids: Vec<&str> = plan.iter().filter_map(|p| p["remedy"].as_str()).collect();
    assert_eq!(
        ids,
        ["gradient-checkpointing", "lora", "gradient-accumulation"]
    );
    assert_eq!(
        plan[2]["config"],
        "TrainingArguments(per_device_train_batch_size=8, gradient_accumulation_steps=4)"
    );
    assert_eq!(v["fit"]["plan_fits"], true);
    let last = plan[2]["peak_after_bytes"].as_u64().expect("peak");
    assert!(last <= v["fit"]["usable_bytes"].as_u64().expect("usable"));
}

/// A 70B full fine-tune on one H100: QLoRA's snippet loads the model with
/// `quantization_config=`, and the 8-bit optimizer the climb took before
/// LoRA is not in the cheapest set.
#[test]
fn train_plan_is_the_cheapest_set() {
    let out = est(&[
        "meta-llama/Llama-3.1-70B",
        "--task",
        "train",
        "--seq",
        "4096",
        "--gpu",
        "h100-sxm",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json(&out);
    let plan = v["fit"]["plan"].as_array().expect("plan");
    let ids: Vec<&str> = plan.iter().filter_map(|p| p["remedy"].as_str()).collect();
    assert!(!ids.contains(&"optimizer-8bit"), "{ids:?}");
    let qlora = plan.iter().find(|p| p["remedy"] == "qlora").expect("qlora");
    assert_eq!(
        qlora["config"],
        "AutoModelForCausalLM.from_pretrained(model_id, quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16), device_map=\"auto\")"
    );
    assert!(
        plan.iter().all(|p| p["saves_bytes"].as_u64() > Some(0)),
        "{plan:?}"
    );
}

/// QLoRA over 8 GPUs: no ZeRO-3 and no Megatron tensor parallelism in the
/// plan; a setup that asks for QLoRA with ZeRO-3 is estimated with a warning
/// that names the incompatibility and its source.
#[test]
fn train_plan_never_combines_qlora_with_zero3_or_megatron() {
    let out = est(&[
        "meta-llama/Llama-3.1-70B",
        "--task",
        "train",
        "--method",
        "qlora",
        "--grad-checkpointing",
        "--gpus",
        "8",
        "--seq",
        "32768",
        "--gpu",
        "h100-sxm",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json(&out);
    for p in v["fit"]["plan"].as_array().expect("plan") {
        assert!(
            p["remedy"] != "zero-sharding" && p["remedy"] != "model-parallel",
            "{p}"
        );
    }
    let out = est(&[
        "meta-llama/Llama-3.1-8B",
        "--task",
        "train",
        "--method",
        "qlora",
        "--zero",
        "3",
        "--gpus",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("warning: qlora and zero-sharding do not combine"),
        "{text}"
    );
}

/// Inference plans load quantized weights through `quantization_config=`.
#[test]
fn infer_plan_quantizes_with_quantization_config() {
    let out = est(&[
        "meta-llama/Llama-3.1-70B",
        "--seq",
        "4096",
        "--gpu",
        "h100-sxm",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json(&out);
    let plan = v["fit"]["plan"].as_array().expect("plan");
    let q = plan
        .iter()
        .find(|p| p["remedy"] == "quantize-8bit" || p["remedy"] == "quantize-4bit")
        .expect("a quantized step");
    let c = q["config"].as_str().expect("config");
    assert!(
        c.starts_with(
            "AutoModelForCausalLM.from_pretrained(model_id, quantization_config=BitsAndBytesConfig("
        ) && c.ends_with(", device_map=\"auto\")"),
        "{c}"
    );
}

/// Llama-3.1-8B on an RTX 4090 (Ada, 8.9): the capped context first, then the
/// KV cache in FP8 (`--kv-cache-dtype fp8`), then quantized weights and two
/// GPUs; every line, run back through oomkit, starts. `--kv-dtype int4`
/// is not a vLLM cache (exit 2).
#[test]
fn vllm_plan_lines_on_a_4090_all_start() {
    let model = "meta-llama/Llama-3.1-8B-Instruct";
    let out = est(&[
        model, "--engine", "vllm", "--task", "serve", "--gpu", "rtx-4090",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("[vllm-kv-cache-dtype]"), "{text}");
    let steps: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("vllm serve "))
        .skip(1)
        .collect();
    assert!(steps.len() >= 5, "{text}");
    assert!(
        steps.iter().any(|l| l.ends_with("--kv-cache-dtype fp8")),
        "{text}"
    );
    for line in steps {
        let args = replay_vllm_line(model, "rtx-4090", line);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let again = est(&args);
        assert_eq!(again.status.code(), Some(0), "{line}\n{}", stdout(&again));
    }
    cli(&["estimate", model, "--engine", "vllm", "--task", "serve"])
        .args(&["--gpu", "rtx-4090", "--kv-dtype", "int4"])
        .run()
        .code(2)
        .one_error_line()
        .stderr_has("use --kv-dtype fp8");
}

/// The library names settings without flags (`oomkit_estimate::knob`); the
/// binary puts its own flags back, so every message still names what to type.
#[test]
fn library_errors_come_back_with_flag_names() {
    let rows: &[(&[&str], &str)] = &[
        (
            &["llama-3.1-8b", "--width", "512"][..],
            "error: --width applies to image models only (see `oomkit estimate --list-models`); drop it for a text model\n",
        ),
        (
            &["llama-3.1-8b", "--tp", "3"][..],
            "error: --tp 3 does not divide the 32 attention heads of meta-llama/Llama-3.1-8B\n",
        ),
        (
            &[
                "--params",
                "7B",
                "--heads",
                "7",
                "--kv-heads",
                "3",
                "--hidden",
                "100",
            ][..],
            "error: --heads 7, --kv-heads 3 and --hidden 100 do not fit together\n",
        ),
        (
            &["nosuchmodel"][..],
            "error: unknown model \"nosuchmodel\" (see `oomkit estimate --list-models`, or pass a config.json path or --params)\n",
        ),
        (
            &[
                "meta-llama/Llama-3.1-8B",
                "--engine",
                "vllm",
                "--task",
                "serve",
                "--gpu",
                "h100-sxm",
                "--gpu-memory-utilization",
                "1.5",
            ][..],
            "error: --gpu-memory-utilization must be in (0, 1], got 1.5\n",
        ),
        (
            &[
                "llama-3.1-8b",
                "--engine",
                "llama.cpp",
                "--quant",
                "q4_k_m",
                "--ctx-size",
                "99999999",
            ][..],
            "error: --ctx-size 99999999 is above the limit of 16777216 cells\n",
        ),
    ];
    exit_2_is(&cli(&["estimate"]), rows);
}

/// Warnings too: `--seq`/`--new-tokens` in the JSON `warnings`.
#[test]
fn warnings_name_flags() {
    let out = est(&[
        "llama-3.1-8b",
        "--seq",
        "100000",
        "--new-tokens",
        "40000",
        "--format",
        "json",
    ]);
    let w = json(&out)["warnings"][0].as_str().map(str::to_string);
    assert!(
        w.as_deref()
            .is_some_and(|w| w.starts_with("--seq 100000 + --new-tokens 40000 = 140000 tokens")),
        "{w:?}"
    );
}

/// Models added to the catalogue resolve through the binary with their
/// published parameter counts; fine-tune ids map to them.
#[test]
fn added_models_resolve_with_their_sizes() {
    for (name, id, params) in [
        (
            "tiiuae/Falcon3-7B-Instruct",
            "tiiuae/Falcon3-7B-Instruct",
            7_455_550_464u64,
        ),
        ("gemma-3-4b", "google/gemma-3-4b-it", 4_300_079_472),
        ("qwq-32b", "Qwen/QwQ-32B", 32_763_876_352),
        (
            "granite-3.3-8b-instruct",
            "ibm-granite/granite-3.3-8b-instruct",
            8_170_864_640,
        ),
        ("Qwen/Qwen2-57B-A14B", "Qwen/Qwen2-57B-A14B", 57_408_658_944),
        ("gpt-j-6b", "EleutherAI/gpt-j-6b", 6_050_882_784),
    ] {
        let out = est(&[name, "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        let v = json(&out);
        assert_eq!(v["model"]["id"], id, "{name}");
        assert_eq!(v["model"]["params"], params, "{name}");
    }
    let v = json(&est(&[
        "Qwen/Qwen2.5-Coder-1.5B-Instruct",
        "--format",
        "json",
    ]));
    assert_eq!(v["model"]["resolved_to"], "Qwen/Qwen2.5-Coder-1.5B");
    let v = json(&est(&["google/gemma-3-270m-it", "--format", "json"]));
    assert_eq!(v["model"]["resolved_to"], "google/gemma-3-270m");
    assert_eq!(v["model"]["params"], 268_098_176u64);
    cli(&["estimate", "falcon-7b"])
        .run()
        .code(2)
        .stderr_has("is ambiguous")
        .stderr_has("tiiuae/Falcon3-7B-Base")
        .stderr_has("tiiuae/falcon-7b");
}

/// `--cuda`: builds before CUDA 12.2 load every kernel at start-up, so the
/// context (and device used) is larger; allocated is unchanged. The default
/// is the context measured on an H200 with CUDA 13 (bench/gpu).
#[test]
fn cuda_version_sets_the_context() {
    let run = |extra: &[&str]| {
        let mut args = vec!["meta-llama/Llama-3.2-1B", "--format", "json"];
        args.extend_from_slice(extra);
        let out = est(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        json(&out)
    };
    let ctx = |v: &serde_json::Value| v["components"]["cuda_context_bytes"].as_u64().unwrap();
    let modern = run(&[]);
    assert_eq!(ctx(&modern), 648_871_936 + 69_206_016);
    assert_eq!(ctx(&run(&["--cuda", "12.4"])), ctx(&modern));
    let old = run(&["--cuda", "11.8"]);
    assert_eq!(ctx(&old), 1_343_000_000 + 32 * 1024 * 1024);
    assert_eq!(old["peak_allocated_bytes"], modern["peak_allocated_bytes"]);
    assert!(old["device_used_bytes"].as_u64() > modern["device_used_bytes"].as_u64());
    exit_2_usage(
        &cli(&["estimate", "meta-llama/Llama-3.2-1B"]),
        &[(&["--cuda", "twelve"], "not a CUDA version")],
    );
}

/// Measured on an H200 (bench/gpu/results/h200-2026-11-26/peaks.jsonl):
/// Qwen2.5-1.5B, LoRA r16 on all linears, 2 × 2048 tokens, peaked at
/// 23,482,417,152 bytes allocated under HF Trainer (bf16=True) and
/// 28,884,887,040 in a plain loop; the binary's estimates stay within 1 %.
#[test]
fn trainer_lora_matches_the_h200_measurement() {
    let run = |trainer: bool| {
        let mut args = vec![
            "Qwen/Qwen2.5-1.5B",
            "--task",
            "train",
            "--method",
            "lora",
            "--lora-rank",
            "16",
            "--lora-targets",
            "all-linear",
            "--batch",
            "2",
            "--seq",
            "2048",
            "--format",
            "json",
        ];
        if trainer {
            args.push("--trainer");
        }
        let out = est(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        json(&out)["peak_allocated_bytes"].as_u64().unwrap() as f64
    };
    for (trainer, measured) in [(true, 23_482_417_152.0), (false, 28_884_887_040.0)] {
        let got = run(trainer);
        let err = (got - measured).abs() / measured;
        assert!(err < 0.01, "trainer {trainer}: {got} vs {measured}");
    }
}

/// After the prompt pass, transformers' sliding-window cache layers keep
/// their window as a slice of the full prompt tensor, so the prefill peak
/// holds every layer's whole prompt (Gemma 3 1B: 26 layers × 4 × 4096 tokens
/// × K and V × 1 KV head × 256 × 2 bytes); decoding holds only the windows.
#[test]
fn sliding_window_layers_pin_the_prompt_after_prefill() {
    let out = est(&[
        "google/gemma-3-1b-it",
        "--batch",
        "4",
        "--seq",
        "4096",
        "--new-tokens",
        "32",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["peak_phase"], "prefill");
    assert_eq!(
        v["components"]["kv_cache_bytes"].as_u64(),
        Some(26 * 4 * 4096 * 2 * 256 * 2)
    );
}
