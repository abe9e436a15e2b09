//! `oomkit estimate --engine llama.cpp` through the binary: a GGUF file's
//! buffers (the default engine for `.gguf` inference), a catalogue model
//! with a GGUF `--quant`, the verdict and the `-c`/`-ngl` plans as
//! `llama-server` lines, the JSON, and bad flags (exit 2, one line).

use std::fs;
use std::path::Path;

use super::estimate::est;
use super::{json, stderr, stdout};

/// A GGUF v3 header for a small llama model: `layers` blocks of width 256
/// (8 heads, 4 KV heads of 32), FFN 512, vocabulary 1024, Q8_0 weights,
/// F32 norms, a separate output head, training context 4096.
fn gguf(layers: u32) -> Vec<u8> {
    gguf_ctx(layers, 4096)
}

/// [`gguf`] with another `context_length`.
fn gguf_ctx(layers: u32, ctx: u32) -> Vec<u8> {
    let s = |b: &mut Vec<u8>, x: &str| {
        b.extend((x.len() as u64).to_le_bytes());
        b.extend(x.as_bytes());
    };
    let (e, ff, v) = (256u64, 512u64, 1024u64);
    let mut tensors: Vec<(String, u64, u32)> = vec![
        ("token_embd.weight".into(), e * v, 8),
        ("output_norm.weight".into(), e, 0),
        ("output.weight".into(), e * v, 8),
    ];
    for i in 0..layers {
        for (n, el) in [
            ("attn_q", e * e),
            ("attn_k", e * 128),
            ("attn_v", e * 128),
            ("attn_output", e * e),
            ("ffn_gate", e * ff),
            ("ffn_up", e * ff),
            ("ffn_down", e * ff),
        ] {
            tensors.push((format!("blk.{i}.{n}.weight"), el, 8));
        }
        tensors.push((format!("blk.{i}.attn_norm.weight"), e, 0));
        tensors.push((format!("blk.{i}.ffn_norm.weight"), e, 0));
    }
    let kvs: &[(&str, u32)] = &[
        ("llama.block_count", layers),
        ("llama.embedding_length", 256),
        ("llama.attention.head_count", 8),
        ("llama.attention.head_count_kv", 4),
        ("llama.feed_forward_length", 512),
        ("llama.vocab_size", 1024),
        ("llama.context_length", ctx),
    ];
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((kvs.len() as u64 + 1).to_le_bytes());
    s(&mut b, "general.architecture");
    b.extend(8u32.to_le_bytes());
    s(&mut b, "llama");
    for (k, val) in kvs {
        s(&mut b, k);
        b.extend(4u32.to_le_bytes());
        b.extend(val.to_le_bytes());
    }
    let mut off = 0u64;
    for (name, el, ty) in &tensors {
        s(&mut b, name);
        b.extend(1u32.to_le_bytes());
        b.extend(el.to_le_bytes());
        b.extend(ty.to_le_bytes());
        b.extend(off.to_le_bytes());
        off += el * 4;
    }
    b
}

fn write(dir: &Path, layers: u32) -> String {
    let f = dir.join("tiny.gguf");
    fs::write(&f, gguf(layers)).expect("write");
    f.to_str().expect("utf8").to_string()
}

/// Q8_0 bytes of `n` elements.
fn q8(n: u64) -> u64 {
    n / 32 * 34
}

#[test]
fn gguf_defaults_to_llama_cpp_with_its_buffers() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = write(dir.path(), 4);
    let out = est(&[&f, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["engine"], "llama.cpp");
    let r = &v["llamacpp"];
    // -c 0: the GGUF's context_length; every layer and the head offloaded.
    assert_eq!(r["n_ctx"], 4096);
    assert_eq!(r["n_gpu_layers"], 5);
    assert_eq!(r["output_on_gpu"], true);
    // The token embedding stays on the CPU.
    assert_eq!(r["model_cpu_bytes"], q8(256 * 1024));
    let layer = q8(256 * 256) * 2 + q8(256 * 128) * 2 + q8(256 * 512) * 3 + 2 * 256 * 4;
    assert_eq!(
        r["model_gpu_bytes"],
        4 * layer + q8(256 * 1024) + 256 * 4,
        "blocks + head + final norm"
    );
    // KV: 4096 cells × 4 layers × (128 K + 128 V) × 2 B.
    assert_eq!(r["kv_gpu_bytes"], 4096 * 4 * 256 * 2);
    assert_eq!(v["components"]["kv_cache_bytes"], r["kv_gpu_bytes"]);
    assert!(
        r["command"]
            .as_str()
            .expect("command")
            .starts_with("llama-server -m ")
    );
    assert!(v.get("fit").is_none(), "no --gpu, no fit");
    // --engine hf still estimates the same file with PyTorch numbers.
    let hf = json(&est(&[&f, "--engine", "hf", "--format", "json"]));
    assert!(hf.get("llamacpp").is_none());
    assert_eq!(hf["model"]["layers"], 4);
}

#[test]
fn flags_change_the_buffers_as_llama_cpp_does() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = write(dir.path(), 4);
    let get = |extra: &[&str]| {
        let mut args = vec![f.as_str(), "--format", "json"];
        args.extend_from_slice(extra);
        let out = est(&args);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", stderr(&out));
        json(&out)["llamacpp"].clone()
    };
    // -c is padded to 256 cells.
    assert_eq!(get(&["--ctx-size", "1000"])["n_ctx"], 1024);
    // q8_0 cache: 34 bytes per 32 elements instead of 64.
    let f16 = get(&["--ctx-size", "1024"])["kv_gpu_bytes"]
        .as_u64()
        .expect("kv");
    let q = get(&[
        "--ctx-size",
        "1024",
        "--cache-type-k",
        "q8_0",
        "--cache-type-v",
        "q8_0",
    ]);
    assert_eq!(q["kv_gpu_bytes"].as_u64().expect("kv"), f16 / 64 * 34);
    assert!(
        q["command"]
            .as_str()
            .expect("cmd")
            .contains("--cache-type-k q8_0 --cache-type-v q8_0")
    );
    // -ngl 3: the head and the last 2 blocks; the KV of 2 of 4 layers.
    let p = get(&["--ctx-size", "1024", "--n-gpu-layers", "3"]);
    assert_eq!(p["blocks_on_gpu"], 2);
    assert_eq!(p["kv_gpu_bytes"].as_u64().expect("kv"), f16 / 2);
    assert_eq!(p["kv_cpu_bytes"].as_u64().expect("kv"), f16 / 2);
    assert!(p["command"].as_str().expect("cmd").contains("-ngl 3"));
    // Without flash attention the scores grow with the context.
    let off = get(&["--ctx-size", "4096", "--flash-attn", "off"])["compute_gpu_bytes"]
        .as_u64()
        .expect("compute");
    let on = get(&["--ctx-size", "4096", "--flash-attn", "on"])["compute_gpu_bytes"]
        .as_u64()
        .expect("compute");
    assert!(off > on + 4096 * 512 * 8 * 4 - 1, "{off} {on}");
    // -np 3 splits -c 2000 (2048 cells) into 3 slots of pad(682, 256) = 768.
    let np = get(&["--ctx-size", "2000", "--parallel", "3"]);
    assert_eq!(
        (np["n_ctx_seq"].as_u64(), np["n_ctx"].as_u64()),
        (Some(768), Some(2304))
    );
    assert!(np["command"].as_str().expect("cmd").ends_with("-np 3"));
    assert_eq!(get(&[])["n_parallel"], 4, "llama-server's auto: 4 slots");
    // A smaller -ub shrinks the compute buffer.
    let ub = get(&["--ctx-size", "4096", "--ubatch-size", "128"]);
    assert!(ub["compute_gpu_bytes"].as_u64().expect("c") < on);
    assert!(ub["command"].as_str().expect("cmd").contains("-ub 128"));
}

#[test]
fn human_output_verdict_and_plans() {
    let out = est(&[
        "llama-3.1-8b",
        "--engine",
        "llama.cpp",
        "--quant",
        "q4_k_m",
        "--gpu",
        "rtx-3060",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    for want in [
        "Llama-3.1-8B-Q4_K_M.gguf (llama, 32 layers",
        "-c 131072 · -ngl 33/33",
        "(CUDA0 model buffer)",
        "(CUDA0 KV buffer)",
        "(CUDA0 compute buffer)",
        "does not fit on rtx-3060",
        "[llamacpp-context]",
        "[llamacpp-gpu-layers]",
        "llama-server -m Llama-3.1-8B-Q4_K_M.gguf -c ",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
    insta::assert_snapshot!(text);
    // The plan's commands fit when run back through oomkit.
    let v = json(&est(&[
        "llama-3.1-8b",
        "--engine",
        "llamacpp",
        "--quant",
        "Q4_K_M",
        "--gpu",
        "rtx-3060",
        "--format",
        "json",
    ]));
    let plan = v["fit"]["plan"].as_array().expect("plan");
    assert_eq!(plan.len(), 2);
    let ctx = v["fit"]["max_ctx"].as_u64().expect("max ctx");
    let ngl = v["fit"]["max_n_gpu_layers"].as_u64().expect("max ngl");
    for args in [
        vec!["--ctx-size".to_string(), ctx.to_string()],
        vec!["--n-gpu-layers".to_string(), ngl.to_string()],
    ] {
        let mut full = vec![
            "llama-3.1-8b",
            "--engine",
            "llama.cpp",
            "--quant",
            "q4_k_m",
            "--gpu",
            "rtx-3060",
        ];
        full.extend(args.iter().map(String::as_str));
        let out = est(&full);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stdout(&out));
    }
    // One more cell block (or layer) no longer fits.
    let out = est(&[
        "llama-3.1-8b",
        "--engine",
        "llama.cpp",
        "--quant",
        "q4_k_m",
        "--gpu",
        "rtx-3060",
        "--ctx-size",
        &(ctx + 256).to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn fits_with_a_short_context() {
    let out = est(&[
        "llama-3.1-8b",
        "--engine",
        "llama.cpp",
        "--quant",
        "q4_k_m",
        "--ctx-size",
        "8192",
        "--gpu",
        "rtx-4090",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["fit"]["fits"], true);
    assert!(v["fit"]["headroom_bytes"].as_i64().expect("headroom") > 0);
    assert_eq!(v["fit"]["plan"], serde_json::json!([]));
    // The token embedding (128,256 × 4096, Q4_K: 144 B per 256) stays on
    // the CPU.
    assert_eq!(
        v["llamacpp"]["model_cpu_bytes"],
        128_256u64 * 4096 / 256 * 144
    );
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = write(dir.path(), 2);
    let huge = dir.path().join("huge.gguf");
    fs::write(&huge, gguf_ctx(2, u32::MAX)).expect("write");
    let huge = huge.to_str().expect("utf8").to_string();
    for (args, want) in [
        (
            vec!["llama-3.1-8b", "--ctx-size", "4096"],
            "--ctx-size applies to --engine llama.cpp",
        ),
        (
            vec!["llama-3.1-8b", "--quant", "q4_k_m"],
            "--quant q4_k_m is a GGUF file type",
        ),
        (
            vec!["llama-3.1-8b", "--engine", "llama.cpp"],
            "needs --quant",
        ),
        (
            vec!["llama-3.1-8b", "--engine", "llama.cpp", "--quant", "nf4"],
            "takes a GGUF file type",
        ),
        (
            vec![f.as_str(), "--n-gpu-layers", "lots"],
            "--n-gpu-layers \"lots\": expected a number",
        ),
        (
            vec![f.as_str(), "--cache-type-v", "q4_0", "--flash-attn", "off"],
            "needs flash attention",
        ),
        (
            vec![f.as_str(), "--quant", "q8_0"],
            "has its own tensor types",
        ),
        (
            vec![f.as_str(), "--engine", "llama.cpp", "--task", "train"],
            "not training",
        ),
        (
            vec![f.as_str(), "--tp", "2"],
            "does not apply to --engine llama.cpp",
        ),
        (
            vec![f.as_str(), "--max-model-len", "4096"],
            "does not apply to --engine llama.cpp",
        ),
        (
            vec![f.as_str(), "--ctx-size", "99999999999"],
            "above the limit",
        ),
        (
            vec![f.as_str(), "--ctx-size", "256", "--parallel", "257"],
            "--parallel 257 is above the limit of 256 slots",
        ),
        (
            vec!["gpt2", "--parallel", "2"],
            "--parallel applies to --engine llama.cpp",
        ),
        (
            vec![huge.as_str()],
            "context_length 4294967295 is above the limit",
        ),
        (vec![f.as_str(), "--cache-type-k", "q3_k"], "invalid value"),
    ] {
        let out = est(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        if !want.starts_with("invalid value") {
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        }
    }
}
