//! `oomkit explain` through the binary on the patterns a held-out set of
//! real messages (bench/explain-field) found misread: Intel's 4 GiB limit
//! with a free figure, llama.cpp's recovered retry and its loading phase,
//! the backward frame as training, a lower-cased TensorFlow line, ONNX
//! Runtime's CUDA call check, and RMM's pool and legacy failures.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test's failure

use serde_json::Value;

use super::{fixtures, json, run_in};

/// The events of one fixture under `field/`, and the exit status.
fn events(name: &str) -> (Option<i32>, Vec<Value>) {
    let rel = format!("field/{name}");
    let out = run_in(&fixtures(), &["explain", "--format", "json", &rel], None);
    let got = json(&out);
    (
        out.status.code(),
        got["events"].as_array().cloned().unwrap_or_default(),
    )
}

fn human(name: &str) -> String {
    let rel = format!("field/{name}");
    let out = run_in(&fixtures(), &["explain", "--color", "never", &rel], None);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn xpu_over_4_gib_with_free_memory_is_the_runtime_limit() {
    let (code, ev) = events("xpu_free_covers_request.log");
    assert_eq!(code, Some(0));
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = &ev[0];
    assert_eq!(e["backend"], "xpu");
    assert_eq!(e["cause"], "memory_fraction_limit", "{e}");
    let ids: Vec<&str> = e["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert_eq!(
        ids.first(),
        Some(&"xpu-relaxed-allocation-limits"),
        "{ids:?}"
    );
    // A stated `allowed` limit is still the user's fraction.
    let out = run_in(
        &fixtures(),
        &[
            "explain",
            "--format",
            "json",
            "shapes/xpu_allowed_fraction.txt",
        ],
        None,
    );
    let e = &json(&out)["events"][0];
    assert_eq!(e["cause"], "memory_fraction_limit");
    assert_eq!(e["fixes"][0]["id"], "raise-memory-fraction", "{e}");
}

#[test]
fn llamacpp_retry_without_pipeline_parallelism_is_not_an_oom() {
    let (code, ev) = events("llamacpp_retry_without_pipeline_parallelism.log");
    // Nothing ran out: exit 1 (no OOM, no reading), every event a look-alike.
    assert_eq!(code, Some(1), "{ev:?}");
    assert!(!ev.is_empty());
    for e in &ev {
        assert_eq!(e["is_oom"], false, "{e}");
        assert_eq!(e["cause"], "not_oom", "{e}");
    }
    assert!(
        human("llamacpp_retry_without_pipeline_parallelism.log").contains("retried without it")
    );
    // When the retry fails too, it is an OOM.
    let (code, ev) = events("llamacpp_retry_then_fails.log");
    assert_eq!(code, Some(0));
    assert!(ev.iter().all(|e| e["is_oom"] == true), "{ev:?}");
}

#[test]
fn llamacpp_weights_are_loading() {
    let (_, ev) = events("llamacpp_weights_loading_phase.log");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["phase"], "loading");
    assert_eq!(ev[0]["requested_bytes"], 73_728_000_000_u64);
    assert!(human("llamacpp_weights_loading_phase.log").contains("· loading"));
}

#[test]
fn backward_engine_frame_is_training() {
    let (_, ev) = events("backward_engine_frame_training.log");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["phase"], "training");
}

#[test]
fn tensorflow_line_in_lower_case() {
    let (code, ev) = events("tensorflow_lower_case.log");
    assert_eq!(code, Some(0));
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = &ev[0];
    assert_eq!(e["framework"], "tensorflow");
    assert_eq!(e["device"], 1);
    assert_eq!(e["requested_bytes"], 32 * 64 * 128 * 128 * 4);
}

#[test]
fn onnxruntime_cuda_call_failure() {
    let (code, ev) = events("onnxruntime_cuda_call_failure.log");
    assert_eq!(code, Some(0));
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = &ev[0];
    assert_eq!(e["framework"], "onnxruntime");
    assert_eq!(e["format"], "onnxruntime-cuda-call");
    assert_eq!(e["device"], 1);
    // The failed CUDA call is the op (markdown clean-up drops the `**`).
    assert!(e["op"].as_str().unwrap().starts_with("cudaMalloc("), "{e}");
}

#[test]
fn rmm_pool_and_legacy_failures_are_device_ooms() {
    for name in ["rmm_pool_maximum_size.log", "rmm_legacy_cuda_error_at.log"] {
        let (code, ev) = events(name);
        assert_eq!(code, Some(0), "{name}");
        assert_eq!(ev.len(), 1, "{name}: {ev:?}");
        assert_eq!(ev[0]["is_oom"], true, "{name}");
        assert_eq!(ev[0]["framework"], "rapids", "{name}");
        assert_eq!(ev[0]["backend"], "cuda", "{name}");
    }
}

#[test]
fn sglang_start_up_check() {
    let (code, ev) = events("sglang_kv_pool_start.log");
    assert_eq!(code, Some(0));
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = &ev[0];
    assert_eq!(e["framework"], "sglang");
    assert_eq!(e["cause"], "kv_cache");
    assert_eq!(e["fixes"][0]["id"], "sglang-mem-fraction-static", "{e}");
    // No vLLM flag for an SGLang server.
    let text = e["fixes"].to_string();
    assert!(!text.contains("vllm"), "{text}");
    let out = human("sglang_kv_pool_start.log");
    assert!(
        out.starts_with("SGLang start-up check: no memory left for the KV cache pool"),
        "{out}"
    );
    assert!(out.contains("--mem-fraction-static 0.92"), "{out}");
}

#[test]
fn sglang_later_wording_and_mlx_without_its_code() {
    let (code, ev) = events("sglang_weights_leave_no_kv_cache.log");
    assert_eq!(code, Some(0));
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["framework"], "sglang");
    assert_eq!(ev[0]["cause"], "kv_cache");
    assert!(
        ev[0]["evidence"].as_str().unwrap().contains("(0.85)"),
        "{}",
        ev[0]
    );
    let (code, ev) = events("mlx_metal_without_code.log");
    assert_eq!(code, Some(0));
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["framework"], "mlx");
    assert_eq!(ev[0]["backend"], "metal");
    let text = ev[0]["fixes"].to_string();
    assert!(
        !text.contains("nvidia-smi") && !text.contains("llamacpp"),
        "{text}"
    );
}

#[test]
fn mlx_metal_malloc_over_the_buffer_limit_is_impossible_and_near_2_64_an_overflow() {
    let (code, ev) = events("mlx_metal_malloc_buffer_size.log");
    assert_eq!(code, Some(0));
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = &ev[0];
    assert_eq!(e["format"], "mlx-metal-malloc-buffer-size");
    assert_eq!(e["framework"], "mlx");
    assert_eq!(e["backend"], "metal");
    assert_eq!(e["cause"], "impossible_request", "{e}");
    let out = human("mlx_metal_malloc_buffer_size.log");
    assert!(
        out.contains("larger than the largest buffer Metal allows on this Mac (24.00 GiB)"),
        "{out}"
    );
    let (_, ev) = events("mlx_metal_malloc_overflow.log");
    assert_eq!(ev[0]["cause"], "size_overflow", "{:?}", ev[0]);
}
