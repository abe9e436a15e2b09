//! `oomkit explain` v3 through the binary: fixes that fit where the job ran
//! (every fix the catalogue scopes is checked against every fixture's
//! event), the allocator variable of the build, and the terminal case.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test's failure

use std::path::{Path, PathBuf};

use oomkit_core::remedies::{App, Device, Os, Phase, RemedyId, Runtime, Situation};
use serde_json::Value;

use super::{fixtures, json, run_in};

fn all_fixtures(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            all_fixtures(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("log" | "txt")) {
            out.push(p);
        }
    }
}

/// Every fixture's events, explained in one run of the binary.
fn every_event() -> Vec<Value> {
    let root = fixtures().canonicalize().unwrap();
    let mut files = Vec::new();
    all_fixtures(&root, &mut files);
    files.sort();
    assert!(files.len() > 150, "{} fixtures", files.len());
    let args: Vec<String> = std::iter::once("explain".to_string())
        .chain(["--format".into(), "json".into()])
        .chain(files.iter().map(|p| p.to_string_lossy().into_owned()))
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_in(&root, &args, None);
    json(&out)["events"].as_array().cloned().unwrap_or_default()
}

/// The situation an event states, in the remedy catalogue's terms.
fn situation(e: &Value) -> Situation {
    let runtime = match e["framework"].as_str().unwrap() {
        "pytorch" | "a1111" | "comfyui" => Runtime::Pytorch,
        "tensorflow" => Runtime::Tensorflow,
        "jax" => Runtime::Jax,
        "vllm" => Runtime::Vllm,
        "llama.cpp" => Runtime::LlamaCpp,
        "paddle" => Runtime::Paddle,
        "cupy" => Runtime::Cupy,
        "onnxruntime" => Runtime::Onnxruntime,
        "tgi" => Runtime::Tgi,
        "nccl" => Runtime::Nccl,
        "lua-torch" => Runtime::LuaTorch,
        "mlx" => Runtime::Mlx,
        "tensorrt" => Runtime::Tensorrt,
        "ctranslate2" => Runtime::Ctranslate2,
        "rapids" => Runtime::Rapids,
        "sglang" => Runtime::Sglang,
        other => panic!("framework {other}"),
    };
    let device = e["backend"].as_str().map(|b| match b {
        "cuda" => Device::Cuda,
        "hip" => Device::Rocm,
        "mps" => Device::Mps,
        "xpu" => Device::Xpu,
        "metal" => Device::Metal,
        "tpu" => Device::Tpu,
        other => panic!("backend {other}"),
    });
    let app = match (e["framework"].as_str(), e["app"].as_str()) {
        (Some("vllm"), _) => Some(App::Vllm),
        (Some("a1111"), _) => Some(App::A1111),
        (Some("comfyui"), _) => Some(App::Comfyui),
        (_, Some(a)) => Some(match a {
            "comfyui" => App::Comfyui,
            "a1111" => App::A1111,
            "diffusers" => App::Diffusers,
            "vllm" => App::Vllm,
            "deepspeed" => App::Deepspeed,
            "transformers" | "transformers-trainer" => App::Transformers,
            "accelerate" => App::Accelerate,
            "lightning" => App::Lightning,
            other => panic!("app {other}"),
        }),
        _ => None,
    };
    let phase = e["phase"].as_str().map(|p| match p {
        "training" => Phase::Training,
        "loading" => Phase::Loading,
        "inference" => Phase::Inference,
        "serving" => Phase::Serving,
        "generation" => Phase::Generation,
        "evaluation" => Phase::Evaluation,
        "compiling" => Phase::Compiling,
        other => panic!("phase {other}"),
    });
    let os = e["os"].as_str().map(|o| match o {
        "linux" => Os::Linux,
        "windows" => Os::Windows,
        "macos" => Os::Macos,
        other => panic!("os {other}"),
    });
    Situation {
        os,
        device,
        runtime: Some(runtime),
        app,
        phase,
    }
}

fn fix_ids(e: &Value) -> Vec<String> {
    e["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn no_fix_is_offered_outside_where_it_applies() {
    let events = every_event();
    let mut offered = 0;
    let mut errs = Vec::new();
    for e in &events {
        let s = situation(e);
        for id in fix_ids(e) {
            let rid = RemedyId::parse(&id).unwrap_or_else(|| panic!("unknown fix {id}"));
            offered += 1;
            if !rid.scope().admits(&s) {
                errs.push(format!(
                    "{} line {}: {id} offered to {s:?}",
                    e["source"], e["line"]
                ));
            }
        }
    }
    assert!(offered > 300, "only {offered} fixes offered");
    assert!(errs.is_empty(), "{}", errs.join("\n"));
    // The cases the scopes exist for, each seen at least once.
    let seen = |pred: &dyn Fn(&Value) -> bool| events.iter().filter(|e| pred(e)).count();
    assert!(seen(&|e| e["os"] == "windows" && e["framework"] == "pytorch") > 0);
    assert!(seen(&|e| e["framework"] == "mlx") > 0);
    assert!(seen(&|e| e["backend"] == "hip") > 0);
    for e in &events {
        let ids = fix_ids(e);
        if e["os"] == "windows" {
            assert!(
                !ids.iter().any(|i| i == "expandable-segments"),
                "{}",
                e["source"]
            );
        }
        if e["framework"] == "mlx" || e["backend"] == "metal" || e["backend"] == "mps" {
            assert!(
                !ids.iter()
                    .any(|i| i.starts_with("llamacpp-") && e["framework"] != "llama.cpp"),
                "{}",
                e["source"]
            );
            assert!(
                !ids.iter().any(|i| i == "free-other-processes"),
                "{}",
                e["source"]
            );
            assert!(
                !e["evidence"].as_str().unwrap().contains("nvidia-smi"),
                "{}",
                e["source"]
            );
        }
        if ids.iter().any(|i| i.starts_with("a1111-")) {
            assert!(
                e["app"] == "a1111" || e["framework"] == "a1111",
                "{}",
                e["source"]
            );
        }
    }
}

#[test]
fn rocm_snippets_set_the_hip_variable_the_message_names() {
    let root = fixtures().canonicalize().unwrap();
    let out = run_in(
        &root,
        &["explain", "--format", "json", "rocm_hip_2_3.log"],
        None,
    );
    let got = json(&out);
    let e = &got["events"][0];
    assert_eq!(e["backend"], "hip");
    let codes: Vec<&str> = e["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(
        codes.iter().any(|c| c.contains("PYTORCH_HIP_ALLOC_CONF")),
        "{codes:?}"
    );
    assert!(
        !codes.iter().any(|c| c.contains("PYTORCH_CUDA_ALLOC_CONF")),
        "{codes:?}"
    );
}

#[test]
fn windows_gets_no_expandable_segments_but_the_split_size() {
    let dir = tempfile::tempdir().unwrap();
    let log = concat!(
        "  File \"C:\\Users\\me\\train.py\", line 40, in <module>\n",
        "    loss.backward()\n",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 11.99 GiB of which 512.00 MiB is free. Of the allocated memory 8.00 GiB is allocated by PyTorch, and 2.00 GiB is reserved by PyTorch but unallocated.\n",
    );
    let out = run_in(
        dir.path(),
        &["explain", "--format", "json", "-"],
        Some(log.as_bytes()),
    );
    let got = json(&out);
    let e = &got["events"][0];
    assert_eq!(e["os"], "windows");
    assert_eq!(e["cause"], "fragmentation");
    let ids = fix_ids(e);
    assert!(!ids.iter().any(|i| i == "expandable-segments"), "{ids:?}");
    assert_eq!(
        ids.first().map(String::as_str),
        Some("max-split-size"),
        "{ids:?}"
    );
}

#[test]
fn a_terminal_on_standard_input_gets_usage_instead_of_a_wait() {
    // `script` gives the child a pseudo-terminal as standard input.
    let bin = env!("CARGO_BIN_EXE_oomkit");
    let out = std::process::Command::new("script")
        .args(["-qec", &format!("{bin} explain"), "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output();
    let Ok(out) = out else {
        // No util-linux `script` here: the terminal case cannot be staged.
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("standard input is a terminal"), "{text}");
    assert!(text.contains("oomkit explain train.log"), "{text}");
    assert_eq!(out.status.code(), Some(2), "{text}");
}

fn explain_json(rel: &str) -> Value {
    let root = fixtures().canonicalize().unwrap();
    json(&run_in(&root, &["explain", "--format", "json", rel], None))
}

fn codes(e: &Value) -> String {
    e["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn vllm_snippets_name_the_logs_model_and_the_headline_names_the_check() {
    let got = explain_json("v3/vllm_v1_model_in_log.log");
    let e = &got["events"][0];
    let code = codes(e);
    assert!(
        code.contains("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 21584"),
        "{code}"
    );
    assert!(
        code.contains("model=\"Qwen/Qwen2.5-7B-Instruct\""),
        "{code}"
    );
    assert!(!code.contains("vllm serve MODEL"), "{code}");
    let root = fixtures().canonicalize().unwrap();
    let human = run_in(
        &root,
        &["explain", "--color", "never", "v3/vllm_v1_model_in_log.log"],
        None,
    );
    let text = String::from_utf8_lossy(&human.stdout);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("vLLM start-up check"), "{first}");
    assert!(!first.contains("CUDA out of memory"), "{first}");
}

#[test]
fn a_q4_k_m_gguf_is_not_told_to_quantize_and_snippets_use_its_path() {
    let got = explain_json("v3/llamacpp_q4_k_m_weights.log");
    let e = &got["events"][0];
    let ids = fix_ids(e);
    assert!(!ids.iter().any(|i| i == "quantize-4bit"), "{ids:?}");
    assert_eq!(ids.first().map(String::as_str), Some("llamacpp-gpu-layers"));
    let code = codes(e);
    assert!(
        code.contains("llama-server -m /models/Meta-Llama-3-70B-Instruct-Q4_K_M.gguf -ngl 20"),
        "{code}"
    );
    assert!(!code.contains("model.gguf "), "{code}");
    assert!(!code.contains("python train.py"), "{code}");
}

#[test]
fn placeholders_and_guards_are_unknown_not_numbers() {
    // NVML's "not available" is not 16 EiB held outside the allocator.
    let got = explain_json("v3/nvml_placeholder_this_process_wsl.log");
    let e = &got["events"][0];
    assert_eq!(e["processes"], serde_json::json!([]));
    assert!(e["numbers"]["non_framework_bytes"].is_null());
    assert!(e["numbers"]["this_process_bytes"].is_null());
    // PyTorch's 1 EB guard is an overflowed size, with no figure.
    let got = explain_json("v3/pytorch_1eb_guard.log");
    assert_eq!(got["events"][0]["cause"], "size_overflow");
    assert!(got["events"][0]["requested_bytes"].is_null());
    // No device number: device unknown, the rest read.
    let got = explain_json("v3/pytorch_gpu_without_number.log");
    let e = &got["events"][0];
    assert!(e["device"].is_null());
    assert!(e["total_bytes"].is_u64() && e["reserved_bytes"].is_u64());
}

#[test]
fn loading_under_fsdp_gets_loading_fixes_not_training_ones() {
    let got = explain_json("v3/fsdp_qlora_loading.log");
    let e = &got["events"][0];
    assert_eq!(e["phase"], "loading");
    let ids = fix_ids(e);
    assert_eq!(
        ids.first().map(String::as_str),
        Some("rank-zero-loading"),
        "{ids:?}"
    );
    for training_only in ["reduce-batch", "gradient-accumulation", "lora", "qlora"] {
        assert!(
            !ids.iter().any(|i| i == training_only),
            "{training_only} in {ids:?}"
        );
    }
    let code = codes(e);
    assert!(
        code.contains("fsdp_cpu_ram_efficient_loading: true"),
        "{code}"
    );
}

#[test]
fn a_steady_climb_is_a_leak_with_the_leak_finders_first() {
    let got = explain_json("v3/run_timeline_steady_growth.log");
    let e = &got["events"][0];
    assert_eq!(e["cause"], "leak");
    let ids = fix_ids(e);
    assert_eq!(
        ids.get(..2),
        Some(
            &[
                "release-references".to_string(),
                "record-memory-history".to_string()
            ][..]
        ),
        "{ids:?}"
    );
    let code = codes(e);
    assert!(code.contains("oomkit lint train.py"), "{code}");
    assert!(
        code.contains("oomkit run --snapshot-on-oom -- python train.py"),
        "{code}"
    );
}
