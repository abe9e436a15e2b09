//! The accuracy tables:
//! - `tests/accuracy.json`: every usable measured row of
//!   `docs/reference/memory-estimation.md` §5, with its source and metric;
//! - `tests/gpu.json`: peaks measured on a real GPU (`bench/gpu/`), compared
//!   with `peak_allocated_bytes` (grade A);
//! - `tests/oracle.json`: the CPU oracle's peaks (PyTorch `MemTracker` on fake
//!   tensors running the real transformers code, written by
//!   `bench/estimate-oracle/oracle.py --rows`), compared with
//!   `peak_allocated_bytes` (grade O).
//!
//! Fails when a row leaves its tolerance: weights ≤ 2 %, KV ≤ 3 %, inference
//! peak ≤ 5 %, training peak ≤ 10 %, and every OOM row must not fit.
//! `bash bench/estimate-accuracy/run.sh` prints the tables.
#![allow(clippy::indexing_slicing, clippy::string_slice)] // test code: a bad index is a failed test
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use oomkit_estimate::{Setup, catalogue, components, estimate, fit, serve};
use serde::Deserialize;

#[derive(Deserialize)]
struct Table {
    rows: Vec<Row>,
}

#[derive(Deserialize)]
struct Row {
    id: String,
    #[allow(dead_code)]
    source: String,
    model: String,
    setup: Setup,
    metric: String,
    kind: String,
    /// Bytes, or tokens for `vllm_tokens` rows.
    measured_bytes: u64,
    gpu: Option<String>,
    grade: String,
    vllm_util: Option<f64>,
    /// `tests/accuracy_sharded.json`: whether the row was consulted while
    /// the sharding model was built (`true`) or kept out as a check (`false`).
    calibration: Option<bool>,
}

/// The tolerance; doubled for grade-B rows whose metric is unstated.
fn tolerance(kind: &str, grade: &str) -> f64 {
    let factor = if grade == "B" { 2.0 } else { 1.0 };
    factor
        * match kind {
            "weights" => 2.0,
            "kv" => 3.0,
            "infer" => 5.0,
            "train" => 10.0,
            _ => 0.0,
        }
}

#[test]
fn accuracy_table() {
    check(include_str!("accuracy.json"), "a measured value");
}

/// Peaks measured on a real GPU (an H200, `bench/gpu/peaks.py`, written by
/// `bench/gpu/compare.py --rows`).
#[test]
fn gpu_table() {
    check(include_str!("gpu.json"), "a peak measured on a GPU");
}

/// ZeRO/FSDP rows (DeepSpeed, FSDP1/2, with and without CPU offload):
/// published measurements and the FSDP2 CPU oracle
/// (`bench/estimate-oracle/oracle.py --sharded`).
#[test]
fn sharded_table() {
    check(
        include_str!("accuracy_sharded.json"),
        "a sharded measurement",
    );
}

#[test]
fn oracle_table() {
    check(include_str!("oracle.json"), "an oracle peak");
}

/// Prints the table of `json` and fails on any row out of tolerance.
fn check(json: &str, what: &str) {
    let table: Table = serde_json::from_str(json).unwrap();
    let mut errors = Vec::new();
    let mut failures = Vec::new();
    println!("| row | grade | metric | measured | estimated | error |");
    println!("|---|---|---|---|---|---|");
    for row in &table.rows {
        let cfg = catalogue::find(&row.model).unwrap();
        let s = row.setup.clone().validate().unwrap();
        let est = estimate(&cfg, &s).expect("estimate");
        if row.kind == "oom" {
            let gpu = oomkit_core::gpus::find(row.gpu.as_deref().unwrap()).unwrap();
            let f = fit::fit(&cfg, &s, gpu, &est);
            println!(
                "| {} | {} | oom on {} | OOM | {} | {} |",
                row.id,
                row.grade,
                gpu.id,
                est.device_used_bytes,
                if f.fits {
                    "FITS (wrong)"
                } else {
                    "does not fit"
                }
            );
            if f.fits {
                failures.push(format!("{}: predicted to fit", row.id));
            }
            continue;
        }
        let got = match row.metric.as_str() {
            "allocated" => est.peak_allocated_bytes.get(),
            "reserved" => est.peak_reserved_bytes.get(),
            "device_used" => est.device_used_bytes.get(),
            "weights" => components::weights_bytes(&cfg, &s),
            "kv" => components::kv_cache_bytes(&cfg, &s, s.seq + s.new_tokens),
            m if m.starts_with("vllm_") => {
                let gpu = oomkit_core::gpus::find(row.gpu.as_deref().unwrap()).unwrap();
                let (max_num_seqs, max_num_batched_tokens) =
                    serve::default_batching(gpu.id, gpu.usable());
                let args = serve::VllmArgs {
                    gpu_memory_utilization: row.vllm_util.unwrap(),
                    max_model_len: 8192,
                    max_num_batched_tokens,
                    max_num_seqs,
                };
                let r = serve::vllm(&cfg, &s, &args, gpu.usable());
                match m {
                    "vllm_pool" => r.kv_pool_bytes.get(),
                    "vllm_tokens" => r.kv_tokens,
                    "vllm_weights" => r.weights_bytes.get(),
                    "vllm_activation" => r.activation_bytes.get(),
                    _ => panic!("unknown metric {m}"),
                }
            }
            m => panic!("unknown metric {m}"),
        };
        let err = (got as f64 - row.measured_bytes as f64) / row.measured_bytes as f64 * 100.0;
        errors.push(err.abs());
        // `vllm_tokens` rows count tokens; every other row counts bytes.
        let show = |v: u64| {
            if row.metric == "vllm_tokens" {
                format!("{v} tokens")
            } else {
                oomkit_core::Bytes(v).to_string()
            }
        };
        let id = match row.calibration {
            Some(false) => format!("{} (check)", row.id),
            _ => row.id.clone(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {:+.1} % |",
            id,
            row.grade,
            row.metric,
            show(row.measured_bytes),
            show(got),
            err
        );
        if err.abs() > tolerance(&row.kind, &row.grade) {
            failures.push(format!(
                "{}: {:+.1} % (tolerance {} %)",
                row.id,
                err,
                tolerance(&row.kind, &row.grade)
            ));
        }
    }
    errors.sort_by(f64::total_cmp);
    let median = errors.get(errors.len() / 2).copied().unwrap_or_default();
    println!(
        "\n{} rows with {what}, median |error| {:.1} %, worst {:.1} %\n",
        errors.len(),
        median,
        errors.last().copied().unwrap_or(0.0)
    );
    assert!(
        failures.is_empty(),
        "rows out of tolerance:\n{}",
        failures.join("\n")
    );
}
