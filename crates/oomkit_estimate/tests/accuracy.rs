//! The accuracy tables:
//! - `tests/accuracy*.json` (every file so named): measured rows with their
//!   source and metric — `accuracy.json` those of
//!   `docs/reference/memory-estimation.md` §5 and the published rows added
//!   since, `accuracy_sharded.json` ZeRO and FSDP, `accuracy_litgpt.json`
//!   LitGPT's published fine-tuning peaks under `--stack litgpt`;
//! - `tests/gpu.json`: peaks measured on a real GPU (`bench/gpu/`), compared
//!   with `peak_allocated_bytes` (grade A);
//! - `tests/oracle.json`: the CPU oracle's peaks (PyTorch `MemTracker` on fake
//!   tensors running the real transformers code, written by
//!   `bench/estimate-oracle/oracle.py --rows`), compared with
//!   `peak_allocated_bytes` (grade O).
//!
//! Fails when a row leaves its tolerance: weights ≤ 2 %, KV ≤ 3 %, inference
//! peak ≤ 5 %, training peak ≤ 10 %, and every OOM row must not fit.
//! A row may be marked `"holdout": true`: a measurement kept out of
//! calibration (nobody tuned a formula on it), checked like the others and
//! reported apart. `accuracy_by_family` prints every table's rows by setup
//! family (single GPU, LoRA/QLoRA, ZeRO, FSDP, offload, attention kernel,
//! selective checkpointing, generation, old transformers, LitGPT) with the median
//! and worst |error|, and fails when a family the docs report has no row.
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
    /// Kept out of calibration: a check on measurements nobody fitted to
    /// ([`Row::held_out`]).
    #[serde(default)]
    holdout: bool,
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

impl Row {
    /// Held out of calibration: `"holdout": true`, or `"calibration": false`
    /// as `accuracy_sharded.json` writes it.
    fn held_out(&self) -> bool {
        self.holdout || self.calibration == Some(false)
    }
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

/// Every `tests/accuracy*.json`, by name.
fn accuracy_files() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("accuracy") && n.ends_with(".json"))
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(&n)).unwrap();
            (n, text)
        })
        .collect();
    files.sort();
    assert!(files.iter().any(|(n, _)| n == "accuracy.json"));
    files
}

/// Every `tests/accuracy*.json`: `accuracy.json` and the ZeRO/FSDP rows of
/// `accuracy_sharded.json` (DeepSpeed, FSDP1/2, with and without CPU
/// offload: published measurements and the FSDP2 CPU oracle,
/// `bench/estimate-oracle/oracle.py --sharded`).
#[test]
fn accuracy_table() {
    for (name, text) in accuracy_files() {
        println!("\n{name}\n");
        check(&text, "a measured value");
    }
}

/// Peaks measured on a real GPU (an H200, `bench/gpu/peaks.py`, written by
/// `bench/gpu/compare.py --rows`).
#[test]
fn gpu_table() {
    check(include_str!("gpu.json"), "a peak measured on a GPU");
}

#[test]
fn oracle_table() {
    check(include_str!("oracle.json"), "an oracle peak");
}

/// The rows of one table.
fn parse(json: &str) -> Vec<Row> {
    serde_json::from_str::<Table>(json).unwrap().rows
}

/// What one row gives: its signed error in %, or for an OOM row whether
/// the estimate (wrongly) fits; with the printed table line.
enum Outcome {
    Error(f64),
    Oom { fits: bool },
}

fn evaluate(row: &Row) -> (Outcome, String) {
    let cfg = catalogue::find(&row.model).unwrap();
    let s = row.setup.clone().validate().unwrap();
    let est = estimate(&cfg, &s).expect("estimate");
    if row.kind == "oom" {
        let gpu = oomkit_core::gpus::find(row.gpu.as_deref().unwrap()).unwrap();
        let f = fit::fit(&cfg, &s, gpu, &est);
        let line = format!(
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
        return (Outcome::Oom { fits: f.fits }, line);
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
    // `vllm_tokens` rows count tokens; every other row counts bytes.
    let show = |v: u64| {
        if row.metric == "vllm_tokens" {
            format!("{v} tokens")
        } else {
            oomkit_core::Bytes(v).to_string()
        }
    };
    let line = format!(
        "| {}{} | {} | {} | {} | {} | {:+.1} % |",
        row.id,
        if row.held_out() { " (held out)" } else { "" },
        row.grade,
        row.metric,
        show(row.measured_bytes),
        show(got),
        err
    );
    (Outcome::Error(err), line)
}

/// Prints the table of `json` and fails on any row out of tolerance.
fn check(json: &str, what: &str) {
    let rows = parse(json);
    let mut errors = Vec::new();
    let mut failures = Vec::new();
    println!("| row | grade | metric | measured | estimated | error |");
    println!("|---|---|---|---|---|---|");
    for row in &rows {
        let (outcome, line) = evaluate(row);
        println!("{line}");
        match outcome {
            Outcome::Oom { fits } => {
                if fits {
                    failures.push(format!("{}: predicted to fit", row.id));
                }
            }
            Outcome::Error(err) => {
                errors.push(err.abs());
                if err.abs() > tolerance(&row.kind, &row.grade) {
                    failures.push(format!(
                        "{}: {:+.1} % (tolerance {} %)",
                        row.id,
                        err,
                        tolerance(&row.kind, &row.grade)
                    ));
                }
            }
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

/// The setup families a row belongs to (a row may be in several: a LoRA
/// row with eager attention is in both).
fn families(row: &Row) -> Vec<&'static str> {
    let s = &row.setup;
    let mut f = Vec::new();
    if row.metric.starts_with("vllm_") {
        f.push("vLLM serving");
    } else if s.zero > 0 && s.sharding.fsdp() {
        f.push("FSDP");
    } else if s.zero > 0 {
        f.push("ZeRO");
    } else if s.gpus <= 1 {
        f.push("single GPU");
    } else {
        f.push("tensor/pipeline parallel");
    }
    if s.offload != oomkit_estimate::Offload::None || s.activation_offloading {
        f.push("offload");
    }
    if s.task == oomkit_estimate::Task::Train {
        if s.method != oomkit_estimate::Method::Full {
            f.push("LoRA/QLoRA");
        }
        f.push(match s.attention {
            oomkit_estimate::Attention::Eager => "eager attention (training)",
            _ => "SDPA/flash attention (training)",
        });
        if s.selective_ac.is_some() {
            f.push("selective checkpointing");
        }
    } else if s.new_tokens > 0 && !row.metric.starts_with("vllm_") && row.kind != "kv" {
        f.push("generation");
    }
    match s.stack {
        oomkit_estimate::stack::Stack::Transformers(_) => f.push("older transformers"),
        oomkit_estimate::stack::Stack::LitGpt => f.push("LitGPT model code"),
        oomkit_estimate::stack::Stack::Current => {}
    }
    f
}

/// Families the docs' accuracy table reports: each needs a row.
const REQUIRED: &[&str] = &[
    "single GPU",
    "ZeRO",
    "FSDP",
    "offload",
    "LoRA/QLoRA",
    "eager attention (training)",
    "SDPA/flash attention (training)",
    "selective checkpointing",
    "generation",
    "older transformers",
    "LitGPT model code",
];

/// Every table's rows by setup family: rows, median and worst |error|,
/// and how many of them are held out of calibration.
#[test]
fn accuracy_by_family() {
    let mut tables: Vec<(String, String)> = accuracy_files();
    for extra in ["gpu.json", "oracle.json"] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
        tables.push((
            extra.to_string(),
            std::fs::read_to_string(dir.join(extra)).unwrap(),
        ));
    }
    let mut by: std::collections::BTreeMap<&str, (Vec<f64>, Vec<f64>)> = Default::default();
    for (_, text) in &tables {
        for row in parse(text) {
            let Outcome::Error(err) = evaluate(&row).0 else {
                continue;
            };
            for fam in families(&row) {
                let e = by.entry(fam).or_default();
                if row.held_out() { &mut e.1 } else { &mut e.0 }.push(err.abs());
            }
        }
    }
    // The median (the mean of the middle two for an even count) and the worst.
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => 0.0,
            _ if n % 2 == 1 => v[n / 2],
            _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        (median, v.last().copied().unwrap_or_default())
    };
    println!("| family | rows | median abs. error | worst | held out: rows, median |");
    println!("|---|---|---|---|---|");
    for (fam, (cal, held)) in &mut by {
        let n = cal.len() + held.len();
        let mut all: Vec<f64> = cal.iter().chain(held.iter()).copied().collect();
        let (median, worst) = stats(&mut all);
        let (held_median, _) = stats(held);
        println!(
            "| {fam} | {n} | {median:.1} % | {worst:.1} % | {}, {} |",
            held.len(),
            if held.is_empty() {
                "—".to_string()
            } else {
                format!("{held_median:.1} %")
            }
        );
    }
    for fam in REQUIRED {
        assert!(by.contains_key(fam), "no accuracy row for the family {fam}");
    }
}
