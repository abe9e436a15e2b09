//! Fit on one GPU: the verdict, the headroom, the largest batch and sequence
//! that fit, and the plan — the cheapest ladder of changes (§3.10 of
//! `memory-estimation.md`: checkpointing → smaller micro-batch with
//! accumulation → 8-bit optimizer → LoRA → QLoRA → shorter context; for
//! inference half precision → 8-bit → 4-bit → smaller batch → shorter
//! context) applied cumulatively until the estimate fits. Each step names an
//! `oomkit_core::remedies` id.

use oomkit_core::gpus::Gpu;
use serde::Serialize;

use crate::model::ModelConfig;
use crate::setup::{LoraTargets, Method, Offload, Optimizer, Precision, Quant, Setup, Task};
use crate::{Estimate, estimate};

/// One step of the plan.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// What changes, in words.
    pub change: String,
    /// The `oomkit_core::remedies` id.
    pub remedy: &'static str,
    /// nvidia-smi bytes this step saves given the previous steps.
    pub saves_bytes: u64,
    /// nvidia-smi bytes after this step (what `fits` compares).
    pub peak_after_bytes: u64,
    /// Paste-ready configuration.
    pub config: String,
}

/// The `fit` object.
#[derive(Clone, Debug, Serialize)]
pub struct Fit {
    /// GPU catalogue id.
    pub gpu: &'static str,
    /// Memory a process can use ([`Gpu::usable`]).
    pub usable_bytes: u64,
    /// `device_used_bytes <= usable_bytes`.
    pub fits: bool,
    /// `usable − device_used` (negative when it does not fit).
    pub headroom_bytes: i64,
    /// Largest `--batch` that fits, other settings unchanged (0: none).
    pub max_batch: u64,
    /// Longest `--seq` that fits, other settings unchanged, capped at the
    /// model's context length when the config states it (0: none).
    pub max_seq: u64,
    /// Cheapest changes that make it fit (empty when it fits).
    pub plan: Vec<Step>,
    /// Whether the plan reaches a fit.
    pub plan_fits: bool,
    /// With several GPUs for inference (no tensor or pipeline parallelism): a
    /// balanced `from_pretrained` placement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_map: Option<String>,
}

const MAX_SEARCH: u64 = 1 << 22;

/// The largest value of `field` (1..=2^22) for which the setup fits
/// (memory grows monotonically with batch and sequence).
fn largest(cfg: &ModelConfig, s: &Setup, usable: u64, set: impl Fn(&mut Setup, u64)) -> u64 {
    largest_where(MAX_SEARCH, |v: u64| {
        let mut t = s.clone();
        set(&mut t, v);
        t.validate()
            .and_then(|t| estimate(cfg, &t))
            .is_ok_and(|e| e.device_used_bytes <= usable)
    })
}

/// The largest `v` in 1..=`limit` with `ok(v)` (0: none) for a monotone
/// `ok` (true up to a boundary, false after), by doubling then bisection.
/// Shared with the image pipelines' `max_batch` / `max_seq`.
pub(crate) fn largest_where(limit: u64, ok: impl Fn(u64) -> bool) -> u64 {
    if limit == 0 || !ok(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1u64, 2u64);
    while hi <= limit && ok(hi) {
        lo = hi;
        hi *= 2;
    }
    let mut hi = hi.min(limit + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) { lo = mid } else { hi = mid }
    }
    lo
}

type Apply = fn(&Setup, &ModelConfig, u64) -> Option<(Setup, String, String)>;

fn checkpointing(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.task == Task::Train && !s.grad_checkpointing).then(|| {
        let mut t = s.clone();
        t.grad_checkpointing = true;
        (
            t,
            "turn on gradient checkpointing".into(),
            "TrainingArguments(gradient_checkpointing=True)".into(),
        )
    })
}

fn micro_batch(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.task == Task::Train && s.batch > 1).then(|| {
        let mut t = s.clone();
        t.grad_accum = s.grad_accum * s.batch;
        t.batch = 1;
        (
            t.clone(),
            format!(
                "micro-batch 1 with gradient accumulation {} (same effective batch)",
                t.grad_accum
            ),
            format!(
                "TrainingArguments(per_device_train_batch_size=1, gradient_accumulation_steps={})",
                t.grad_accum
            ),
        )
    })
}

fn half_weights(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.precision == Precision::Fp32 || (s.task == Task::Infer && s.precision.param_bytes() == 4))
        .then(|| {
            let mut t = s.clone();
            t.precision = Precision::Bf16;
            (
                t,
                "load the weights in bf16".into(),
                "AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=torch.bfloat16)".into(),
            )
        })
}

fn optimizer_8bit(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.task == Task::Train
        && matches!(
            s.optimizer,
            Optimizer::Adamw | Optimizer::Lion | Optimizer::SgdMomentum
        ))
    .then(|| {
        let mut t = s.clone();
        t.optimizer = Optimizer::PagedAdamw8bit;
        (
            t,
            "use the paged 8-bit AdamW optimizer".into(),
            "TrainingArguments(optim=\"paged_adamw_8bit\")".into(),
        )
    })
}

fn lora(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.task == Task::Train && s.method == Method::Full).then(|| {
        let mut t = s.clone();
        t.method = Method::Lora;
        t.lora_rank = 16;
        t.lora_targets = LoraTargets::AllLinear;
        (
            t,
            "train LoRA adapters (r=16, all linear layers) instead of every weight".into(),
            "peft.LoraConfig(r=16, lora_alpha=32, target_modules=\"all-linear\", task_type=\"CAUSAL_LM\")".into(),
        )
    })
}

fn qlora(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.task == Task::Train && s.method == Method::Lora).then(|| {
        let mut t = s.clone();
        t.method = Method::Qlora;
        t.quant = Quant::Nf4Dq;
        (
            t,
            "quantize the frozen base to NF4 (QLoRA)".into(),
            BNB_4BIT.into(),
        )
    })
}

fn zero3(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.task == Task::Train && s.gpus > 1 && s.zero < 3).then(|| {
        let mut t = s.clone();
        t.zero = 3;
        (
            t,
            format!("shard weights, gradients and optimizer over the {} GPUs (ZeRO-3 / FSDP)", s.gpus),
            "{\"zero_optimization\": {\"stage\": 3, \"overlap_comm\": true}, \"bf16\": {\"enabled\": true}}  # DeepSpeed JSON; or FSDP full_shard".into(),
        )
    })
}

fn offload(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.task == Task::Train && s.offload == Offload::None && s.optimizer_bytes_nonzero()).then(|| {
        let mut t = s.clone();
        t.offload = Offload::Optimizer;
        if t.zero < 2 {
            t.zero = 2;
        }
        (
            t.clone(),
            "offload the optimizer states and step to the CPU (ZeRO-Offload)".into(),
            format!(
                "{{\"zero_optimization\": {{\"stage\": {}, \"offload_optimizer\": {{\"device\": \"cpu\", \"pin_memory\": true}}}}}}  # DeepSpeed JSON",
                t.zero
            ),
        )
    })
}

/// Tensor parallelism over the GPUs already given (training, no tp or pp
/// yet): the largest power of two up to 8 (one NVLink node) that divides
/// `--gpus` and that the heads allow ([`Setup::check_model`]). It also
/// splits the activations, which ZeRO does not.
fn tensor_parallel(s: &Setup, cfg: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    if s.task != Task::Train || s.gpus < 2 || s.tp > 1 || s.pp > 1 {
        return None;
    }
    let tp = [8, 4, 2].into_iter().find(|&tp| {
        let t = Setup { tp, ..s.clone() };
        s.gpus.is_multiple_of(tp) && t.check_model(cfg).is_ok()
    })?;
    let t = Setup { tp, ..s.clone() };
    Some((
        t,
        format!(
            "tensor parallelism over {tp} of the {} GPUs (Megatron-style, sequence parallel)",
            s.gpus
        ),
        format!(
            "torchrun --nproc-per-node {} pretrain_gpt.py --tensor-model-parallel-size {tp} --sequence-parallel  # Megatron-LM",
            s.gpus
        ),
    ))
}

const BNB_4BIT: &str = "BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)";

fn quant8(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.task == Task::Infer && s.quant == Quant::None).then(|| {
        let mut t = s.clone();
        t.quant = Quant::Int8;
        (
            t,
            "load the weights in 8-bit (LLM.int8)".into(),
            "BitsAndBytesConfig(load_in_8bit=True)".into(),
        )
    })
}

fn quant4(s: &Setup, _: &ModelConfig, _: u64) -> Option<(Setup, String, String)> {
    (s.task == Task::Infer && matches!(s.quant, Quant::None | Quant::Int8 | Quant::Fp8)).then(
        || {
            let mut t = s.clone();
            t.quant = Quant::Nf4Dq;
            (t, "load the weights in 4-bit NF4".into(), BNB_4BIT.into())
        },
    )
}

fn smaller_batch(s: &Setup, cfg: &ModelConfig, usable: u64) -> Option<(Setup, String, String)> {
    if s.task != Task::Infer || s.batch <= 1 {
        return None;
    }
    let b = largest(cfg, s, usable, |t, v| t.batch = v).clamp(1, s.batch - 1);
    let mut t = s.clone();
    t.batch = b;
    Some((
        t,
        format!("generate with batch {b} instead of {}", s.batch),
        format!("reduce the batch you pass to generate to {b} sequences"),
    ))
}

fn shorter(s: &Setup, cfg: &ModelConfig, usable: u64) -> Option<(Setup, String, String)> {
    if s.seq <= 1 {
        return None;
    }
    let n = largest(cfg, s, usable, |t, v| t.seq = v).clamp(1, s.seq - 1);
    let n = if n >= 64 { n / 64 * 64 } else { n };
    let mut t = s.clone();
    t.seq = n.max(1);
    let config = if s.task == Task::Train {
        format!(
            "tokenizer(..., truncation=True, max_length={})  # or SFTConfig(max_length={})",
            t.seq, t.seq
        )
    } else {
        format!("tokenizer(prompt, truncation=True, max_length={})", t.seq)
    };
    Some((
        t.clone(),
        format!("shorten sequences to {} tokens", t.seq),
        config,
    ))
}

fn more_gpus(s: &Setup, cfg: &ModelConfig, usable: u64) -> Option<(Setup, String, String)> {
    if s.task != Task::Infer || s.tp > 1 || s.pp > 1 {
        return None;
    }
    let n = (s.gpus + 1..=16).find(|&n| {
        let t = Setup {
            gpus: n,
            ..s.clone()
        };
        estimate(cfg, &t).is_ok_and(|e| e.device_used_bytes <= usable)
    })?;
    let t = Setup {
        gpus: n,
        ..s.clone()
    };
    Some((
        t,
        format!("split the layers over {n} GPUs of this kind"),
        device_map(n, usable),
    ))
}

/// The ladder, cheapest first: (remedy id, step).
pub const LADDER: &[(&str, Apply)] = &[
    ("gradient-checkpointing", checkpointing),
    ("gradient-accumulation", micro_batch),
    ("half-precision-weights", half_weights),
    ("optimizer-8bit", optimizer_8bit),
    ("lora", lora),
    ("qlora", qlora),
    ("zero-sharding", zero3),
    ("cpu-offload", offload),
    ("model-parallel", tensor_parallel),
    ("quantize-8bit", quant8),
    ("quantize-4bit", quant4),
    ("reduce-batch", smaller_batch),
    ("reduce-input-size", shorter),
    ("model-parallel", more_gpus),
];

/// Checks `cfg` under `s` against `gpu` and plans the cheapest fix.
pub fn fit(cfg: &ModelConfig, s: &Setup, gpu: &'static Gpu, est: &Estimate) -> Fit {
    let usable = gpu.usable().get();
    let used = est.device_used_bytes;
    let fits = used <= usable;
    let mut plan = Vec::new();
    let mut plan_fits = fits;
    if !fits {
        let mut cur = s.clone();
        let mut cur_used = used;
        // After each change the ladder is read again from its cheapest rung: a
        // change can make an earlier one worth it (after LoRA shrinks the
        // optimizer step, the peak moves to the activations, and gradient
        // checkpointing, skipped before, now saves the most for the least).
        // Every rung applies at most once to a setup it has already changed,
        // so the plan is bounded by the ladder's length.
        while plan.len() < LADDER.len() {
            let mut changed = false;
            for (remedy, apply) in LADDER {
                let Some((next, change, config)) = apply(&cur, cfg, usable) else {
                    continue;
                };
                // A change the model cannot take (or too large) is no step.
                let Ok(after) = estimate(cfg, &next).map(|e| e.device_used_bytes) else {
                    continue;
                };
                // A step must save something worth its cost (0.5 % of the GPU),
                // and the last resorts (smaller batch, shorter inputs) only count
                // when they reach a fit: shrinking the job without fitting helps
                // nobody.
                let last_resort = matches!(*remedy, "reduce-batch" | "reduce-input-size");
                if after + usable / 200 >= cur_used || (last_resort && after > usable) {
                    continue;
                }
                plan.push(Step {
                    change,
                    remedy,
                    saves_bytes: cur_used - after,
                    peak_after_bytes: after,
                    config,
                });
                cur = next;
                cur_used = after;
                changed = true;
                break;
            }
            if !changed || cur_used <= usable {
                plan_fits = cur_used <= usable;
                break;
            }
        }
    }
    Fit {
        gpu: gpu.id,
        usable_bytes: usable,
        fits,
        headroom_bytes: usable as i64 - used as i64,
        max_batch: largest(cfg, s, usable, |t, v| t.batch = v),
        max_seq: {
            let m = largest(cfg, s, usable, |t, v| t.seq = v);
            cfg.max_positions
                .map_or(m, |p| m.min(p.saturating_sub(s.new_tokens)))
        },
        plan,
        plan_fits,
        device_map: (s.task == Task::Infer && s.gpus > 1 && s.tp == 1 && s.pp == 1)
            .then(|| device_map(s.gpus, usable)),
    }
}

/// `max_memory` leaves each GPU the same budget so accelerate balances the
/// layers; the budget keeps 10 % of the usable memory for activations and the
/// cache (accelerate's own default reserves a share for the same reason).
fn device_map(gpus: u64, usable: u64) -> String {
    let gib = usable as f64 * 0.9 / (1u64 << 30) as f64;
    let entries: Vec<String> = (0..gpus).map(|i| format!("{i}: \"{gib:.0}GiB\"")).collect();
    format!(
        "AutoModelForCausalLM.from_pretrained(model_id, device_map=\"auto\", max_memory={{{}}})",
        entries.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;

    #[test]
    fn ladder_ids_are_remedies() {
        for (id, _) in LADDER {
            assert!(oomkit_core::remedies::get(id).is_some(), "{id}");
        }
    }

    #[test]
    fn lora_8b_on_a_4090_gets_a_plan_that_fits() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
        let s = Setup {
            task: Task::Train,
            method: Method::Lora,
            batch: 8,
            seq: 2048,
            ..Setup::default()
        };
        let gpu = oomkit_core::gpus::find("rtx-4090").expect("gpu");
        let est = estimate(&cfg, &s).expect("estimate");
        let f = fit(&cfg, &s, gpu, &est);
        assert!(!f.fits);
        assert!(f.plan_fits, "{:?}", f.plan);
        let last = f.plan.last().expect("steps");
        assert!(last.peak_after_bytes <= f.usable_bytes);
    }

    /// A rung skipped early (checkpointing, while the optimizer step held the
    /// peak) is taken once a later change moves the peak to the activations.
    #[test]
    fn plan_reads_the_ladder_again_after_each_change() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-70B").expect("model");
        let s = Setup {
            task: Task::Train,
            seq: 4096,
            ..Setup::default()
        };
        let gpu = oomkit_core::gpus::find("h100-sxm").expect("gpu");
        let est = estimate(&cfg, &s).expect("estimate");
        let f = fit(&cfg, &s, gpu, &est);
        let ids: Vec<&str> = f.plan.iter().map(|st| st.remedy).collect();
        assert_eq!(ids[0], "optimizer-8bit", "{ids:?}");
        assert!(ids.contains(&"gradient-checkpointing"), "{ids:?}");
        assert!(f.plan_fits, "{ids:?}");
    }

    #[test]
    fn plan_suggests_tensor_parallelism_over_the_gpus() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-70B").expect("model");
        let s = Setup {
            task: Task::Train,
            method: Method::Qlora,
            quant: Quant::Nf4Dq,
            grad_checkpointing: true,
            gpus: 8,
            seq: 32768,
            ..Setup::default()
        };
        let gpu = oomkit_core::gpus::find("h100-sxm").expect("gpu");
        let est = estimate(&cfg, &s).expect("estimate");
        let f = fit(&cfg, &s, gpu, &est);
        assert!(!f.fits);
        let step = f
            .plan
            .iter()
            .find(|st| st.config.contains("--tensor-model-parallel-size 8"));
        assert!(step.is_some(), "{:?}", f.plan);
    }

    #[test]
    fn largest_where_finds_the_boundary() {
        assert_eq!(largest_where(100, |n| n <= 37), 37);
        assert_eq!(largest_where(100, |_| true), 100);
        assert_eq!(largest_where(100, |_| false), 0);
        assert_eq!(largest_where(5, |n| n <= 4), 4);
        assert_eq!(largest_where(MAX_SEARCH, |_| true), MAX_SEARCH);
    }

    #[test]
    fn max_batch_is_the_boundary() {
        let cfg = catalogue::find("Qwen/Qwen2.5-0.5B").expect("model");
        let s = Setup {
            task: Task::Train,
            seq: 1024,
            ..Setup::default()
        };
        let gpu = oomkit_core::gpus::find("rtx-4090").expect("gpu");
        let est = estimate(&cfg, &s).expect("estimate");
        let f = fit(&cfg, &s, gpu, &est);
        let at = |b| {
            let mut t = s.clone();
            t.batch = b;
            estimate(&cfg, &t).expect("estimate").device_used_bytes
        };
        assert!(f.max_batch >= 1);
        assert!(at(f.max_batch) <= f.usable_bytes);
        assert!(at(f.max_batch + 1) > f.usable_bytes);
    }
}
