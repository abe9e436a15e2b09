//! llama.cpp's own numbers: `tests/llamacpp_logs.json` holds buffer sizes
//! llama.cpp printed at start-up in public threads (each row cites its URL)
//! with the setup they ran. For each row this writes the model's GGUF header
//! (the real file is not here: the tensor list llama-quantize writes for the
//! row's file type, from the architecture), parses it with
//! `gguf::parse_file`, runs `llamacpp::buffers` with the same flags and
//! checks every printed buffer:
//! - model buffers within 0.5 % (the printed figure covers the same tensors;
//!   alignment padding is all that differs);
//! - KV buffers exactly (to the printed 0.01 MiB);
//! - compute buffers within 1 %;
//! - the file size within 1 % (the header is not counted).
//!
//! `cargo test -p oomkit_estimate --test llamacpp_logs -- --nocapture`
//! prints the table (README "Accuracy").
#![allow(clippy::indexing_slicing, clippy::print_stdout, clippy::unwrap_used)]

use std::collections::BTreeMap;

use oomkit_estimate::gguf;
use oomkit_estimate::llamacpp::{self, Args, CacheType, FileType, Model};
use oomkit_estimate::model::ModelConfig;
use serde::Deserialize;

#[derive(Deserialize)]
struct Table {
    rows: Vec<Row>,
}

#[derive(Deserialize)]
struct Row {
    id: String,
    source: String,
    log: Vec<String>,
    config: serde_json::Value,
    file_type: String,
    n_ctx: u64,
    flash_attn: bool,
    n_batch: u64,
    n_ubatch: u64,
    cache_type: String,
    file_gib: Option<f64>,
    printed_mib: BTreeMap<String, f64>,
}

fn file_type(s: &str) -> FileType {
    match s {
        "F16" => FileType::F16,
        "Q8_0" => FileType::Q8_0,
        "Q6_K" => FileType::Q6K,
        "Q5_K_M" => FileType::Q5KM,
        "Q4_K_M" => FileType::Q4KM,
        "Q4_0" => FileType::Q4_0,
        other => panic!("file type {other}"),
    }
}

/// ggml's type ids (`ggml.h` `enum ggml_type`).
fn type_id(name: &str) -> u32 {
    match name {
        "F32" => 0,
        "F16" => 1,
        "Q4_0" => 2,
        "Q8_0" => 8,
        "Q4_K" => 12,
        "Q5_K" => 13,
        "Q6_K" => 14,
        other => panic!("type {other}"),
    }
}

/// A GGUF v3 header: the architecture's metadata and the tensor infos
/// (1-D, which gives the same block count for rows of whole blocks).
fn header(cfg: &ModelConfig, ctx_train: u64, tensors: &[gguf::GgufTensor]) -> Vec<u8> {
    let s = |b: &mut Vec<u8>, x: &str| {
        b.extend((x.len() as u64).to_le_bytes());
        b.extend(x.as_bytes());
    };
    let arch = cfg.model_type.as_str();
    let kvs = [
        ("block_count", cfg.layers),
        ("embedding_length", cfg.hidden),
        ("attention.head_count", cfg.heads),
        ("attention.head_count_kv", cfg.kv_heads),
        ("feed_forward_length", cfg.intermediate),
        ("vocab_size", cfg.vocab),
        ("context_length", ctx_train),
    ];
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((kvs.len() as u64 + 1).to_le_bytes());
    s(&mut b, "general.architecture");
    b.extend(8u32.to_le_bytes());
    s(&mut b, arch);
    for (k, v) in kvs {
        s(&mut b, &format!("{arch}.{k}"));
        b.extend(4u32.to_le_bytes());
        b.extend(u32::try_from(v).unwrap().to_le_bytes());
    }
    let mut offset = 0u64;
    for t in tensors {
        s(&mut b, &t.name);
        b.extend(1u32.to_le_bytes());
        b.extend(t.elements.to_le_bytes());
        b.extend(type_id(t.ggml_type).to_le_bytes());
        b.extend(offset.to_le_bytes());
        offset += t.bytes.next_multiple_of(32);
    }
    b
}

struct Check {
    id: String,
    buffer: String,
    printed: f64,
    ours: f64,
    tolerance: f64,
}

fn checks() -> Vec<Check> {
    let table: Table =
        serde_json::from_str(include_str!("llamacpp_logs.json")).expect("llamacpp_logs.json");
    let mut out = Vec::new();
    for row in table.rows {
        assert!(row.source.starts_with("https://github.com/"), "{}", row.id);
        assert!(!row.log.is_empty(), "{}: quote the printed lines", row.id);
        let shape = ModelConfig::from_hf_json(&row.id, &row.config.to_string()).expect("config");
        let ctx_train = row.config["max_position_embeddings"].as_u64().unwrap();
        let tensors = llamacpp::synthetic_tensors(&shape, file_type(&row.file_type));
        let parsed = gguf::parse_file(&header(&shape, ctx_train, &tensors), &row.id)
            .expect("the synthetic header parses");
        assert_eq!(parsed.tensors, tensors, "{}: header round trip", row.id);
        let m = Model {
            head_dim_v: parsed.value_length.unwrap_or(parsed.model.head_dim),
            n_ctx_train: parsed.context_length.unwrap(),
            tensors: parsed.tensors,
            cfg: parsed.model,
            file: format!("{}.gguf", row.id),
        };
        let cache = match row.cache_type.as_str() {
            "f16" => CacheType::F16,
            "q8_0" => CacheType::Q8_0,
            other => panic!("cache type {other}"),
        };
        let a = Args {
            n_ctx: row.n_ctx,
            n_gpu_layers: m.all_layers(),
            flash_attn: row.flash_attn,
            cache_type_k: cache,
            cache_type_v: cache,
            n_batch: row.n_batch,
            n_ubatch: row.n_ubatch,
            // One sequence (llama-cli and the bindings); for these models
            // (no sliding window) auto and one slot give the same cache.
            n_parallel: Some(1),
        };
        let r = llamacpp::buffers(&m, &a);
        let mib = |b: oomkit_core::Bytes| b.get() as f64 / f64::from(1u32 << 20);
        for (buffer, printed) in &row.printed_mib {
            let (ours, tolerance) = match buffer.as_str() {
                "model_gpu" => (mib(r.model_gpu_bytes), 0.005),
                "model_cpu" => (mib(r.model_cpu_bytes), 0.005),
                "kv" => (mib(r.k_bytes.saturating_add(r.v_bytes)), 0.0),
                // The device that runs the output layer: CUDA0, or the CPU
                // backend when nothing is offloaded (same graph allocator).
                "compute_gpu" | "compute_cpu" => (mib(r.compute_gpu_bytes), 0.01),
                "compute_host" => (mib(r.compute_host_bytes), 0.01),
                other => panic!("{}: unknown buffer {other}", row.id),
            };
            out.push(Check {
                id: row.id.clone(),
                buffer: buffer.clone(),
                printed: *printed,
                ours,
                tolerance,
            });
        }
        if let Some(gib) = row.file_gib {
            let total: oomkit_core::Bytes =
                m.tensors.iter().map(|t| oomkit_core::Bytes(t.bytes)).sum();
            out.push(Check {
                id: row.id.clone(),
                buffer: "file".into(),
                printed: gib * 1024.0,
                ours: mib(total),
                tolerance: 0.01,
            });
        }
    }
    out
}

#[test]
fn buffers_match_what_llama_cpp_printed() {
    let checks = checks();
    assert!(checks.len() >= 10, "the table shrank: {}", checks.len());
    println!(
        "| {:<28} | {:<12} | {:>10} | {:>10} | {:>7} |",
        "row", "buffer", "llama.cpp", "oomkit", "error"
    );
    let mut bad = Vec::new();
    for c in &checks {
        let err = (c.ours - c.printed) / c.printed;
        println!(
            "| {:<28} | {:<12} | {:>10.2} | {:>10.2} | {:>+6.2}% |",
            c.id,
            c.buffer,
            c.printed,
            c.ours,
            err * 100.0
        );
        // Printed figures have two decimals: half a hundredth is rounding.
        if (c.ours - c.printed).abs() > c.printed * c.tolerance + 0.005 {
            bad.push(format!(
                "{} {}: llama.cpp {:.2} MiB, oomkit {:.2} MiB (tolerance {}%)",
                c.id,
                c.buffer,
                c.printed,
                c.ours,
                c.tolerance * 100.0
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
