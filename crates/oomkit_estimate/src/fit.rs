//! Fit on one GPU: the verdict, the headroom, the largest batch and sequence
//! that fit, and the plan — the cheapest ladder of changes (§3.10 of
//! `memory-estimation.md`: checkpointing → smaller micro-batch with
//! accumulation → 8-bit optimizer → LoRA → QLoRA → shorter context; for
//! inference half precision → 8-bit → 4-bit → smaller batch → shorter
//! context) applied cumulatively until the estimate fits. Each step names an
//! `oomkit_core::remedies` id.

use oomkit_core::Bytes;
use oomkit_core::gpus::Gpu;
use oomkit_core::remedies::RemedyId;
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
    pub remedy: RemedyId,
    /// nvidia-smi bytes this step saves given the previous steps.
    pub saves_bytes: Bytes,
    /// nvidia-smi bytes after this step (what `fits` compares).
    pub peak_after_bytes: Bytes,
    /// Paste-ready configuration.
    pub config: String,
}

/// The `fit` object.
#[derive(Clone, Debug, Serialize)]
pub struct Fit {
    /// GPU catalogue id.
    pub gpu: &'static str,
    /// Memory a process can use ([`Gpu::usable`]).
    pub usable_bytes: Bytes,
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
    /// The plan as one paste, when it has several steps: every
    /// `TrainingArguments(...)` change in one call, the other snippets once
    /// each ([`paste`]); `null` otherwise.
    pub paste: Option<String>,
    /// With several GPUs for inference (no tensor or pipeline parallelism): a
    /// balanced `from_pretrained` placement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_map: Option<String>,
}

const MAX_SEARCH: u64 = 1 << 22;

/// The largest value of `field` (1..=2^22) for which the setup fits
/// (memory grows monotonically with batch and sequence).
fn largest(cfg: &ModelConfig, s: &Setup, usable: Bytes, set: impl Fn(&mut Setup, u64)) -> u64 {
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

type Apply = fn(&Setup, &ModelConfig, Bytes) -> Option<(Setup, String, String)>;

fn checkpointing(s: &Setup, _: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
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

/// A smaller micro-batch with gradient accumulation, keeping the effective
/// batch (`batch × grad_accum`): the largest divisor of `--batch` below it
/// that fits with the rest of the setup (so `--batch 32` that fits at 8
/// becomes 8 × 4), or 1 when none does (a later rung must then help, and
/// [`plan`] chooses again once the other steps are known).
fn micro_batch(s: &Setup, cfg: &ModelConfig, usable: Bytes) -> Option<(Setup, String, String)> {
    if s.task != Task::Train || s.batch <= 1 {
        return None;
    }
    let at = |b: u64| {
        let mut t = s.clone();
        t.grad_accum = s.grad_accum * (s.batch / b);
        t.batch = b;
        t
    };
    let fits = |t: &Setup| estimate(cfg, t).is_ok_and(|e| e.device_used_bytes <= usable);
    let b = (1..s.batch)
        .rev()
        .filter(|b| s.batch.is_multiple_of(*b))
        .find(|&b| fits(&at(b)))
        .unwrap_or(1);
    let t = at(b);
    Some((
        t.clone(),
        format!(
            "micro-batch {b} with gradient accumulation {} (same effective batch {})",
            t.grad_accum,
            t.batch * t.grad_accum
        ),
        format!(
            "TrainingArguments(per_device_train_batch_size={b}, gradient_accumulation_steps={})",
            t.grad_accum
        ),
    ))
}

fn half_weights(s: &Setup, _: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
    (s.precision == Precision::Fp32 || (s.task == Task::Infer && s.precision.param_bytes() == 4))
        .then(|| {
            let mut t = s.clone();
            t.precision = Precision::Bf16;
            (
                t,
                "load the weights in bf16".into(),
                "AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=torch.bfloat16, device_map=\"auto\")".into(),
            )
        })
}

fn optimizer_8bit(s: &Setup, _: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
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

fn lora(s: &Setup, _: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
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

fn qlora(s: &Setup, _: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
    (s.task == Task::Train && s.method == Method::Lora).then(|| {
        let mut t = s.clone();
        t.method = Method::Qlora;
        t.quant = Quant::Nf4Dq;
        (
            t,
            "quantize the frozen base to NF4 (QLoRA)".into(),
            from_pretrained_quantized(BNB_4BIT),
        )
    })
}

/// A DeepSpeed config as the Hugging Face Trainer takes it
/// (`TrainingArguments(deepspeed=...)`): ZeRO `stage`, optionally the
/// optimizer on the CPU, and the batch and precision keys left `"auto"` for
/// the Trainer to fill from its own arguments (transformers
/// `integrations/deepspeed.py` `HfTrainerDeepSpeedConfig.trainer_config_process`).
/// Under ZeRO-Offload the optimizer is DeepSpeed's own (`"optimizer"`:
/// DeepSpeed builds its CPU Adam for it; a client optimizer is refused,
/// `deepspeed/runtime/engine.py`). Keys: deepspeed.ai/docs/config-json.
fn deepspeed_json(stage: u8, offload_optimizer: bool) -> String {
    let mut zero = format!("\"stage\": {stage}, \"overlap_comm\": true");
    let mut optimizer = String::new();
    if offload_optimizer {
        zero += ", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}";
        optimizer = ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", \"weight_decay\": \"auto\"}}".into();
    }
    format!(
        "{{\"zero_optimization\": {{{zero}}}{optimizer}, \"bf16\": {{\"enabled\": \"auto\"}}, \"train_micro_batch_size_per_gpu\": \"auto\", \"gradient_accumulation_steps\": \"auto\", \"train_batch_size\": \"auto\"}}"
    )
}

fn zero3(s: &Setup, _: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
    (s.task == Task::Train && s.gpus > 1 && s.zero < 3).then(|| {
        let mut t = s.clone();
        t.zero = 3;
        (
            t.clone(),
            format!(
                "shard weights, gradients and optimizer over the {} GPUs (DeepSpeed ZeRO-3; TrainingArguments(deepspeed=this JSON))",
                s.gpus
            ),
            deepspeed_json(3, t.offload != Offload::None),
        )
    })
}

fn offload(s: &Setup, _: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
    (s.task == Task::Train && s.offload == Offload::None && s.optimizer_bytes_nonzero()).then(|| {
        let mut t = s.clone();
        if s.sharding.fsdp() && s.zero >= 3 {
            // FSDP offloads parameters, gradients and the optimizer step
            // together (`CPUOffloadPolicy`, FSDP1 `CPUOffload(offload_params=True)`).
            t.offload = Offload::Params;
            return (
                t,
                "offload parameters, gradients and the optimizer step to the CPU (FSDP CPU offload; accelerate fsdp_config)".into(),
                "fsdp_offload_params: true".into(),
            );
        }
        t.offload = Offload::Optimizer;
        if t.zero < 2 {
            t.zero = 2;
        }
        (
            t.clone(),
            "offload the optimizer states and step to the CPU (DeepSpeed ZeRO-Offload; TrainingArguments(deepspeed=this JSON))".into(),
            deepspeed_json(t.zero, true),
        )
    })
}

/// Tensor parallelism over the GPUs already given (training, no tp or pp
/// yet): the largest power of two up to 8 (one NVLink node) that divides
/// `--gpus` and that the heads allow ([`Setup::check_model`]). It also
/// splits the activations, which ZeRO does not.
fn tensor_parallel(s: &Setup, cfg: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
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

/// `from_pretrained` with a bitsandbytes config, as transformers takes it
/// (`quantization_config=`; a bare `BitsAndBytesConfig` does nothing).
fn from_pretrained_quantized(bnb: &str) -> String {
    format!(
        "AutoModelForCausalLM.from_pretrained(model_id, quantization_config={bnb}, device_map=\"auto\")"
    )
}

fn quant8(s: &Setup, _: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
    (s.task == Task::Infer && s.quant == Quant::None).then(|| {
        let mut t = s.clone();
        t.quant = Quant::Int8;
        (
            t,
            "load the weights in 8-bit (LLM.int8)".into(),
            from_pretrained_quantized("BitsAndBytesConfig(load_in_8bit=True)"),
        )
    })
}

fn quant4(s: &Setup, _: &ModelConfig, _: Bytes) -> Option<(Setup, String, String)> {
    (s.task == Task::Infer && matches!(s.quant, Quant::None | Quant::Int8 | Quant::Fp8)).then(
        || {
            let mut t = s.clone();
            t.quant = Quant::Nf4Dq;
            (
                t,
                "load the weights in 4-bit NF4".into(),
                from_pretrained_quantized(BNB_4BIT),
            )
        },
    )
}

fn smaller_batch(s: &Setup, cfg: &ModelConfig, usable: Bytes) -> Option<(Setup, String, String)> {
    if s.task != Task::Infer || s.batch <= 1 {
        return None;
    }
    let b = largest(cfg, s, usable, |t, v| t.batch = v).clamp(1, s.batch - 1);
    let mut t = s.clone();
    t.batch = b;
    Some((
        t,
        format!("generate with batch {b} instead of {}", s.batch),
        format!(
            "inputs = tokenizer(prompts[:{b}], return_tensors=\"pt\", padding=True)  # generate {b} prompts at a time"
        ),
    ))
}

/// The shortest sequence the plan proposes.
const SHORTEST_USEFUL_SEQ: u64 = 64;

fn shorter(s: &Setup, cfg: &ModelConfig, usable: Bytes) -> Option<(Setup, String, String)> {
    if s.seq <= 1 {
        return None;
    }
    let n = largest(cfg, s, usable, |t, v| t.seq = v).clamp(1, s.seq - 1);
    // Below 64 tokens (or an eighth of the input) a shorter context is no
    // plan: nothing useful trains or generates at that length.
    if n < SHORTEST_USEFUL_SEQ.min(s.seq / 8).max(2) {
        return None;
    }
    let n = if n >= 64 { n / 64 * 64 } else { n };
    let mut t = s.clone();
    t.seq = n.max(1);
    let config = if s.task == Task::Train {
        format!(
            "tokenizer(texts, truncation=True, max_length={})  # or SFTConfig(max_length={})",
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

fn more_gpus(s: &Setup, cfg: &ModelConfig, usable: Bytes) -> Option<(Setup, String, String)> {
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

/// The ladder, cheapest first: (remedy id, step). ZeRO-3 over GPUs the
/// user already has comes before the 8-bit optimizer and LoRA: it keeps the
/// full fine-tune and its optimizer exact, for communication only.
pub const LADDER: &[(RemedyId, Apply)] = &[
    (RemedyId::GradientCheckpointing, checkpointing),
    (RemedyId::GradientAccumulation, micro_batch),
    (RemedyId::HalfPrecisionWeights, half_weights),
    (RemedyId::ZeroSharding, zero3),
    (RemedyId::Optimizer8bit, optimizer_8bit),
    (RemedyId::Lora, lora),
    (RemedyId::Qlora, qlora),
    (RemedyId::CpuOffload, offload),
    (RemedyId::ModelParallel, tensor_parallel),
    (RemedyId::Quantize8bit, quant8),
    (RemedyId::Quantize4bit, quant4),
    (RemedyId::ReduceBatch, smaller_batch),
    (RemedyId::ReduceInputSize, shorter),
    (RemedyId::ModelParallel, more_gpus),
];

/// The remedies a setup relies on that [`oomkit_core::remedies::INCOMPATIBLE`]
/// speaks about.
fn techniques(s: &Setup) -> Vec<RemedyId> {
    let mut t = Vec::new();
    if s.task != Task::Train {
        return t;
    }
    if s.method == Method::Qlora
        || (s.method == Method::Lora && matches!(s.quant, Quant::Nf4 | Quant::Nf4Dq | Quant::Int8))
    {
        t.push(RemedyId::Qlora);
    }
    if s.method == Method::Lora {
        t.push(RemedyId::Lora);
    }
    if matches!(
        s.optimizer,
        Optimizer::Adamw8bit | Optimizer::PagedAdamw8bit
    ) {
        t.push(RemedyId::Optimizer8bit);
    }
    if s.zero >= 3 {
        t.push(RemedyId::ZeroSharding);
    }
    if s.offload != Offload::None {
        t.push(RemedyId::CpuOffload);
    }
    if s.tp > 1 {
        t.push(RemedyId::ModelParallel);
    }
    t
}

/// The first pair of techniques in `s` that do not combine.
pub fn conflict(s: &Setup) -> Option<&'static oomkit_core::remedies::Incompatible> {
    let t = techniques(s);
    t.iter().enumerate().find_map(|(i, a)| {
        t.iter()
            .skip(i + 1)
            .find_map(|b| oomkit_core::remedies::incompatible(*a, *b))
    })
}

/// The micro-batch rung: replayed after the others, so that it picks the
/// largest micro-batch they leave room for.
const GRAD_ACCUM_RUNG: RemedyId = RemedyId::GradientAccumulation;

/// The last resorts: they shrink the job itself (the batch generated at
/// once, the sequence length) to what fits, so they are replayed last and a
/// plan is only pruned where they do not have to shrink it more.
const LAST_RESORTS: &[RemedyId] = &[RemedyId::ReduceBatch, RemedyId::ReduceInputSize];

/// Replays the ladder rungs `rungs` (indices into [`LADDER`]) from `s` in
/// the order a climb restricted to them takes: at each point the cheapest
/// remaining rung that saves something, else the cheapest that applies; the
/// micro-batch rung last, so that it picks the largest micro-batch the
/// other steps leave room for. `None` when a rung no longer applies, the
/// model cannot take it, or the result combines techniques that do not
/// combine (and `s` did not already).
fn replay(
    cfg: &ModelConfig,
    s: &Setup,
    usable: Bytes,
    rungs: &[usize],
) -> Option<(Vec<Step>, Setup, Bytes)> {
    let is_accum = |i: &usize| LADDER.get(*i).is_some_and(|r| r.0 == GRAD_ACCUM_RUNG);
    let is_last = |i: &usize| LADDER.get(*i).is_some_and(|r| LAST_RESORTS.contains(&r.0));
    let mut left: Vec<usize> = rungs
        .iter()
        .copied()
        .filter(|i| !is_accum(i) && !is_last(i))
        .collect();
    left.sort_unstable();
    let mut order = Vec::new();
    {
        let mut cur = s.clone();
        let mut used = estimate(cfg, s).ok()?.device_used_bytes;
        while !left.is_empty() {
            let next = |i: &usize| {
                let (_, apply) = LADDER.get(*i)?;
                let (t, _, _) = apply(&cur, cfg, usable)?;
                let after = estimate(cfg, &t).ok()?.device_used_bytes;
                Some((t, after))
            };
            let pick = left
                .iter()
                .position(|i| next(i).is_some_and(|(_, after)| after < used))
                .or_else(|| left.iter().position(|i| next(i).is_some()))?;
            let i = left.remove(pick);
            let (t, after) = next(&i)?;
            order.push(i);
            cur = t;
            used = after;
        }
    }
    order.extend(rungs.iter().copied().filter(is_accum));
    order.extend(rungs.iter().copied().filter(is_last));
    let mut cur = s.clone();
    let mut used = estimate(cfg, s).ok()?.device_used_bytes;
    let mut steps = Vec::new();
    for i in order {
        let (remedy, apply) = LADDER.get(i)?;
        let (next, change, config) = apply(&cur, cfg, usable)?;
        let after = estimate(cfg, &next).ok()?.device_used_bytes;
        steps.push(Step {
            change,
            remedy: *remedy,
            saves_bytes: used.saturating_sub(after),
            peak_after_bytes: after,
            config,
        });
        cur = next;
        used = after;
    }
    if conflict(&cur).is_some() && conflict(s).is_none() {
        return None;
    }
    Some((steps, cur, used))
}

/// The greedy walk up the ladder until the estimate fits: after each
/// change the ladder is read again from its cheapest rung (a change can
/// make an earlier one worth it: after LoRA shrinks the optimizer step, the
/// peak moves to the activations, and gradient checkpointing, skipped
/// before, now saves the most for the least). A rung is taken when it saves
/// at least 0.5 % of the GPU and combines with what is there; the last
/// resorts (smaller batch, shorter inputs) only when they reach a fit.
/// Returns the rungs taken (indices into [`LADDER`]) and whether it fits.
fn climb(cfg: &ModelConfig, s: &Setup, usable: Bytes, used: Bytes) -> (Vec<usize>, bool) {
    let mut rungs = Vec::new();
    let mut cur = s.clone();
    let mut cur_used = used;
    while rungs.len() < LADDER.len() {
        let mut changed = false;
        for (i, (remedy, apply)) in LADDER.iter().enumerate() {
            let Some((next, _, _)) = apply(&cur, cfg, usable) else {
                continue;
            };
            let Ok(after) = estimate(cfg, &next).map(|e| e.device_used_bytes) else {
                continue;
            };
            if conflict(&next).is_some() && conflict(&cur).is_none() {
                continue;
            }
            let last_resort = LAST_RESORTS.contains(remedy);
            if after.saturating_add(Bytes(usable.get() / 200)) >= cur_used
                || (last_resort && after > usable)
            {
                continue;
            }
            rungs.push(i);
            cur = next;
            cur_used = after;
            changed = true;
            break;
        }
        if !changed || cur_used <= usable {
            break;
        }
    }
    (rungs, cur_used <= usable)
}

/// What a replayed plan keeps of the job: its micro-batch (the setup's
/// batch) and sequence length; a pruned plan must keep as much.
fn keeps(r: &(Vec<Step>, Setup, Bytes)) -> (u64, u64) {
    (r.1.batch, r.1.seq)
}

/// The cheapest set: from the rungs the climb took, drop every step the
/// others make unnecessary, the most expensive (highest on the ladder)
/// first, as long as the rest still fits and keeps as large a micro-batch
/// and as long sequences.
/// (Greedy climbs overshoot: once LoRA is on, the 8-bit optimizer taken
/// before it saves next to nothing.)
fn prune(cfg: &ModelConfig, s: &Setup, usable: Bytes, mut rungs: Vec<usize>) -> Vec<Step> {
    let fits = |r: &(Vec<Step>, Setup, Bytes)| r.2 <= usable;
    let Some(mut best) = replay(cfg, s, usable, &rungs).filter(fits) else {
        return replay(cfg, s, usable, &rungs).map_or_else(Vec::new, |r| r.0);
    };
    let mut by_cost = rungs.clone();
    by_cost.sort_unstable_by(|a, b| b.cmp(a));
    for drop in by_cost {
        let trial: Vec<usize> = rungs.iter().copied().filter(|&i| i != drop).collect();
        if let Some(r) = replay(cfg, s, usable, &trial).filter(fits)
            && keeps(&r).0 >= keeps(&best).0
            && keeps(&r).1 >= keeps(&best).1
        {
            rungs = trial;
            best = r;
        }
    }
    best.0
}

/// Checks `cfg` under `s` against `gpu` and plans the cheapest fix: the
/// ladder climbed until it fits (`climb`), then cut down to the cheapest
/// set of steps (`prune`), with the micro-batch as large as the other
/// steps allow and no two techniques that do not combine.
pub fn fit(cfg: &ModelConfig, s: &Setup, gpu: &'static Gpu, est: &Estimate) -> Fit {
    let usable = gpu.usable();
    let used = est.device_used_bytes;
    let fits = used <= usable;
    let (plan, plan_fits) = if fits {
        (Vec::new(), true)
    } else {
        let (rungs, reached) = climb(cfg, s, usable, used);
        let plan = if reached {
            prune(cfg, s, usable, rungs)
        } else {
            replay(cfg, s, usable, &rungs).map_or_else(Vec::new, |r| r.0)
        };
        let end = plan.last().map_or(used, |st| st.peak_after_bytes);
        (plan, end <= usable)
    };
    Fit {
        gpu: gpu.id,
        usable_bytes: usable,
        fits,
        headroom_bytes: usable.signed_sub(used),
        max_batch: largest(cfg, s, usable, |t, v| t.batch = v),
        max_seq: {
            let m = largest(cfg, s, usable, |t, v| t.seq = v);
            cfg.max_positions
                .map_or(m, |p| m.min(p.saturating_sub(s.new_tokens)))
        },
        paste: paste(&plan),
        plan,
        plan_fits,
        device_map: (s.task == Task::Infer && s.gpus > 1 && s.tp == 1 && s.pp == 1)
            .then(|| device_map(s.gpus, usable)),
    }
}

/// The plan's snippets as one paste: the `TrainingArguments(...)` keyword
/// arguments of every step merged into one call (a later step's value for
/// the same keyword wins: it was planned with the earlier ones made), at the
/// place of the first; every other snippet once, in order. `None` for fewer
/// than two steps or a plan with no `TrainingArguments` (image pipelines:
/// their snippets are steps on one pipeline already).
pub fn paste(plan: &[Step]) -> Option<String> {
    const TA: &str = "TrainingArguments(";
    if plan.len() < 2 || !plan.iter().any(|st| st.config.trim().starts_with(TA)) {
        return None;
    }
    let mut lines: Vec<String> = Vec::new();
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut ta_at = None;
    for st in plan {
        let c = st.config.trim();
        match c.strip_prefix(TA).and_then(|r| r.strip_suffix(')')) {
            Some(inner) => {
                for part in crate::preflight::edit::top_level_split(inner) {
                    if let Some((k, v)) = part.split_once('=') {
                        let k = k.trim().to_string();
                        merged.retain(|(x, _)| x != &k);
                        merged.push((k, v.trim().to_string()));
                    }
                }
                if ta_at.is_none() {
                    ta_at = Some(lines.len());
                    lines.push(String::new());
                }
            }
            None => {
                if !lines.iter().any(|l| l == c) {
                    lines.push(c.to_string());
                }
            }
        }
    }
    if let Some(i) = ta_at {
        let args: Vec<String> = merged.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if let Some(l) = lines.get_mut(i) {
            *l = format!("{TA}{})", args.join(", "));
        }
    }
    Some(lines.join("\n"))
}

/// `max_memory` leaves each GPU the same budget so accelerate balances the
/// layers; the budget keeps 10 % of the usable memory for activations and the
/// cache (accelerate's own default reserves a share for the same reason).
fn device_map(gpus: u64, usable: Bytes) -> String {
    let gib = usable.get() as f64 * 0.9 / (1u64 << 30) as f64;
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
            assert!(oomkit_core::remedies::get(*id).is_some(), "{id}");
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

    /// LADDER indices of a plan's steps (remedy ids are unique there but for
    /// `model-parallel`, whose two rungs apply to different tasks).
    fn rungs_of(plan: &[Step], task: Task) -> Vec<usize> {
        let ids = || LADDER.iter().map(|r| r.0);
        plan.iter()
            .filter_map(|st| {
                let mut same = ids().enumerate().filter(|(_, id)| *id == st.remedy);
                // model-parallel: tensor parallelism (training) comes first,
                // more GPUs (inference) last.
                if task == Task::Train {
                    same.next()
                } else {
                    same.next_back()
                }
                .map(|(i, _)| i)
            })
            .collect()
    }

    /// The cheapest set, not every step: a 70B full fine-tune on one H100
    /// climbs through the 8-bit optimizer (while the optimizer step holds the
    /// peak), LoRA, checkpointing (skipped before, worth it once LoRA moves
    /// the peak to the activations) and QLoRA; LoRA makes the 8-bit optimizer
    /// unnecessary, so the plan drops it. Without any one remaining step it
    /// no longer fits.
    #[test]
    fn plan_is_the_cheapest_set_not_every_step() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-70B").expect("model");
        let s = Setup {
            task: Task::Train,
            seq: 4096,
            ..Setup::default()
        };
        let gpu = oomkit_core::gpus::find("h100-sxm").expect("gpu");
        let usable = gpu.usable();
        let est = estimate(&cfg, &s).expect("estimate");
        let (climbed, reached) = climb(&cfg, &s, usable, est.device_used_bytes);
        assert!(reached);
        let f = fit(&cfg, &s, gpu, &est);
        let ids: Vec<RemedyId> = f.plan.iter().map(|st| st.remedy).collect();
        assert!(ids.contains(&RemedyId::GradientCheckpointing), "{ids:?}");
        assert!(!ids.contains(&RemedyId::Optimizer8bit), "{ids:?}");
        assert!(f.plan_fits, "{ids:?}");
        assert!(climbed.len() > f.plan.len(), "{climbed:?} vs {ids:?}");
        // Every step saves memory where it stands, and each is needed.
        assert!(
            f.plan.iter().all(|st| st.saves_bytes > Bytes::ZERO),
            "{:?}",
            f.plan
        );
        let rungs = rungs_of(&f.plan, s.task);
        assert_eq!(rungs.len(), f.plan.len());
        for drop in &rungs {
            let rest: Vec<usize> = rungs.iter().copied().filter(|r| r != drop).collect();
            assert!(
                replay(&cfg, &s, usable, &rest).is_none_or(|r| r.2 > usable),
                "{:?} fits without {}",
                ids,
                LADDER[*drop].0
            );
        }
    }

    /// With GPUs to shard over, a full fine-tune stays a full fine-tune:
    /// ZeRO-3 (with checkpointing and the 8-bit optimizer) before LoRA. 16
    /// GPUs: DeepSpeed keeps an fp32 master copy and fp32 states for a bf16
    /// model (16 B/param, 70.6 GB each over 16), which 8 H100s cannot hold.
    #[test]
    fn multi_gpu_full_fine_tune_shards_before_lora() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-70B").expect("model");
        let s = Setup {
            task: Task::Train,
            gpus: 16,
            seq: 4096,
            ..Setup::default()
        };
        let gpu = oomkit_core::gpus::find("h100-sxm").expect("gpu");
        let f = fit(&cfg, &s, gpu, &estimate(&cfg, &s).expect("estimate"));
        let ids: Vec<RemedyId> = f.plan.iter().map(|st| st.remedy).collect();
        assert!(f.plan_fits, "{ids:?}");
        assert!(ids.contains(&RemedyId::ZeroSharding), "{ids:?}");
        assert!(
            !ids.contains(&RemedyId::Lora) && !ids.contains(&RemedyId::Qlora),
            "{ids:?}"
        );
    }

    /// The last resorts shrink the job only as far as needed, after the
    /// other steps: never "shorten to 1 token" in front of LoRA.
    #[test]
    fn last_resorts_come_last_and_stay_useful() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
        let s = Setup {
            task: Task::Train,
            gpus: 4,
            zero: 2,
            seq: 8192,
            batch: 16,
            ..Setup::default()
        };
        let gpu = oomkit_core::gpus::find("rtx-4090").expect("gpu");
        let f = fit(&cfg, &s, gpu, &estimate(&cfg, &s).expect("estimate"));
        assert!(f.plan_fits);
        let last = f.plan.len() - 1;
        for (i, st) in f.plan.iter().enumerate() {
            if LAST_RESORTS.contains(&st.remedy) {
                assert_eq!(i, last, "{:?}", f.plan);
                assert!(!st.config.contains("max_length=1)"), "{}", st.config);
            }
        }
    }

    /// `--batch 32` that fits at micro-batch 8 gets 8 × 4, not 1 × 32.
    #[test]
    fn micro_batch_keeps_the_effective_batch() {
        let cfg = catalogue::find("mistralai/Mistral-7B-v0.1").expect("model");
        let s = Setup {
            task: Task::Train,
            batch: 32,
            seq: 1024,
            ..Setup::default()
        };
        let gpu = oomkit_core::gpus::find("rtx-4090").expect("gpu");
        let est = estimate(&cfg, &s).expect("estimate");
        let f = fit(&cfg, &s, gpu, &est);
        assert!(f.plan_fits);
        let step = f
            .plan
            .iter()
            .find(|st| st.remedy == RemedyId::GradientAccumulation)
            .expect("accumulation step");
        let (micro, accum) = (8, 4);
        assert_eq!(
            step.config,
            format!(
                "TrainingArguments(per_device_train_batch_size={micro}, gradient_accumulation_steps={accum})"
            )
        );
        // The largest: micro-batch 16 with the same other steps does not fit.
        let mut t = s.clone();
        for st in &f.plan {
            match st.remedy {
                RemedyId::GradientCheckpointing => t.grad_checkpointing = true,
                RemedyId::Lora => {
                    t.method = Method::Lora;
                    t.lora_rank = 16;
                    t.lora_targets = LoraTargets::AllLinear;
                }
                RemedyId::GradientAccumulation => {}
                other => panic!("unexpected step {other}"),
            }
        }
        let at = |b: u64| {
            let mut u = t.clone();
            u.batch = b;
            u.grad_accum = 32 / b;
            estimate(&cfg, &u).expect("estimate").device_used_bytes
        };
        assert!(at(8) <= f.usable_bytes);
        assert!(at(16) > f.usable_bytes);
    }

    /// QLoRA over 8 GPUs at 32k tokens: the plan never adds ZeRO-3 or
    /// Megatron tensor parallelism to bitsandbytes weights (the
    /// incompatibility table), and no plan of these setups combines two
    /// techniques that do not combine.
    #[test]
    fn plan_never_combines_incompatible_techniques() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-70B").expect("model");
        let gpu = oomkit_core::gpus::find("h100-sxm").expect("gpu");
        let qlora = Setup {
            task: Task::Train,
            method: Method::Qlora,
            quant: Quant::Nf4Dq,
            grad_checkpointing: true,
            gpus: 8,
            seq: 32768,
            ..Setup::default()
        };
        let full8 = Setup {
            task: Task::Train,
            gpus: 8,
            seq: 4096,
            batch: 8,
            ..Setup::default()
        };
        let adam8 = Setup {
            task: Task::Train,
            optimizer: Optimizer::PagedAdamw8bit,
            gpus: 4,
            seq: 8192,
            ..Setup::default()
        };
        for s in [qlora, full8, adam8] {
            let est = estimate(&cfg, &s).expect("estimate");
            let f = fit(&cfg, &s, gpu, &est);
            let ids: Vec<RemedyId> = f.plan.iter().map(|st| st.remedy).collect();
            let rungs = rungs_of(&f.plan, s.task);
            let (_, end, _) = replay(&cfg, &s, gpu.usable(), &rungs).expect("replay");
            assert!(conflict(&end).is_none(), "{ids:?}: {:?}", conflict(&end));
            if s.method == Method::Qlora {
                assert!(
                    !ids.contains(&RemedyId::ZeroSharding)
                        && !ids.contains(&RemedyId::ModelParallel),
                    "{ids:?}"
                );
            }
        }
        // The table itself: a setup that combines them is reported.
        let both = Setup {
            task: Task::Train,
            method: Method::Qlora,
            quant: Quant::Nf4,
            zero: 3,
            gpus: 2,
            ..Setup::default()
        };
        assert_eq!(
            conflict(&both).map(|c| (c.a, c.b)),
            Some((RemedyId::Qlora, RemedyId::ZeroSharding))
        );
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

    /// Every snippet a plan prints is well-formed as what it is (the
    /// libraries themselves run them in `bench/estimate/check_snippets.sh`):
    /// JSON parses and uses DeepSpeed's config keys; Python parses and calls
    /// `TrainingArguments`, `BitsAndBytesConfig`, `LoraConfig`,
    /// `from_pretrained` and the tokenizer with real argument names only, a
    /// `BitsAndBytesConfig` always as `quantization_config=`; `vllm serve`
    /// and `torchrun` lines use flags those tools define.
    mod snippets {
        use super::*;
        use ruff_python_ast::visitor::{self, Visitor};
        use ruff_python_ast::{self as ast, Expr};

        /// DeepSpeed config keys used (deepspeed.ai/docs/config-json:
        /// batch size, optimizer, bf16 and ZeRO sections).
        const DS_TOP: &[&str] = &[
            "zero_optimization",
            "optimizer",
            "bf16",
            "train_micro_batch_size_per_gpu",
            "gradient_accumulation_steps",
            "train_batch_size",
        ];
        const DS_ZERO: &[&str] = &[
            "stage",
            "overlap_comm",
            "offload_optimizer",
            "offload_param",
        ];
        const DS_OFFLOAD: &[&str] = &["device", "pin_memory"];

        /// `TrainingArguments` fields used (transformers/training_args.py).
        const TRAINING_ARGS: &[&str] = &[
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "gradient_checkpointing",
            "optim",
            "deepspeed",
            "bf16",
        ];
        /// transformers/utils/quantization_config.py `BitsAndBytesConfig.__init__`.
        const BNB_ARGS: &[&str] = &[
            "load_in_8bit",
            "load_in_4bit",
            "bnb_4bit_quant_type",
            "bnb_4bit_use_double_quant",
            "bnb_4bit_compute_dtype",
            "bnb_4bit_quant_storage",
        ];
        /// peft/tuners/lora/config.py `LoraConfig` fields.
        const LORA_ARGS: &[&str] = &[
            "r",
            "lora_alpha",
            "target_modules",
            "task_type",
            "lora_dropout",
        ];
        /// `PreTrainedModel.from_pretrained` keyword arguments (transformers
        /// modeling_utils.py).
        const FROM_PRETRAINED_ARGS: &[&str] = &[
            "torch_dtype",
            "quantization_config",
            "device_map",
            "max_memory",
        ];
        /// `PreTrainedTokenizerBase.__call__` (tokenization_utils_base.py).
        const TOKENIZER_ARGS: &[&str] = &["truncation", "max_length", "return_tensors", "padding"];
        /// vLLM's engine flags used (vllm/engine/arg_utils.py `EngineArgs`:
        /// gpu_memory_utilization, max_model_len, quantization,
        /// tensor_parallel_size, pipeline_parallel_size; `--kv-cache-dtype`
        /// from vllm/config/cache.py `CacheDType`), and the
        /// `--quantization` methods (vllm/model_executor/layers/quantization
        /// `QUANTIZATION_METHODS`).
        const VLLM_FLAGS: &[&str] = &[
            "--gpu-memory-utilization",
            "--max-model-len",
            "--quantization",
            "--tensor-parallel-size",
            "--pipeline-parallel-size",
            "--kv-cache-dtype",
        ];
        const VLLM_QUANT: &[&str] = &["fp8", "bitsandbytes", "awq", "gptq"];
        /// torchrun's `--nproc-per-node`; Megatron-LM's
        /// megatron/training/arguments.py `--tensor-model-parallel-size`,
        /// `--sequence-parallel`.
        const TORCHRUN_FLAGS: &[&str] = &[
            "--nproc-per-node",
            "--tensor-model-parallel-size",
            "--sequence-parallel",
        ];

        fn keys_in(v: &serde_json::Value, allowed: &[&str], what: &str) -> Result<(), String> {
            let obj = v.as_object().ok_or(format!("{what} is not an object"))?;
            match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
                Some(k) => Err(format!("{what}: unknown key {k}")),
                None => Ok(()),
            }
        }

        fn check_json(code: &str) -> Result<(), String> {
            let v: serde_json::Value = serde_json::from_str(code).map_err(|e| e.to_string())?;
            keys_in(&v, DS_TOP, "top level")?;
            let zero = v.get("zero_optimization").ok_or("no zero_optimization")?;
            keys_in(zero, DS_ZERO, "zero_optimization")?;
            if let Some(off) = zero.get("offload_optimizer") {
                keys_in(off, DS_OFFLOAD, "offload_optimizer")?;
                // ZeRO-Offload needs DeepSpeed's own optimizer (the table).
                v.get("optimizer")
                    .ok_or("offload without a DeepSpeed optimizer")?;
            }
            Ok(())
        }

        fn check_flags(words: &[&str], flags: &[&str], takes_value: bool) -> Result<(), String> {
            let mut it = words.iter();
            while let Some(w) = it.next() {
                if !flags.contains(w) {
                    return Err(format!("unknown flag {w}"));
                }
                if takes_value && *w != "--sequence-parallel" {
                    let v = it.next().ok_or(format!("{w} without a value"))?;
                    if *w == "--quantization" && !VLLM_QUANT.contains(v) {
                        return Err(format!("--quantization {v}"));
                    }
                    if *w == "--kv-cache-dtype" && *v != "fp8" {
                        return Err(format!("--kv-cache-dtype {v}"));
                    }
                    if v.starts_with("--") {
                        return Err(format!("{w} without a value"));
                    }
                }
            }
            Ok(())
        }

        struct Calls {
            errors: Vec<String>,
        }

        fn name_of(e: &Expr) -> Option<&str> {
            match e {
                Expr::Name(n) => Some(n.id.as_str()),
                Expr::Attribute(a) => Some(a.attr.as_str()),
                _ => None,
            }
        }

        impl<'a> Visitor<'a> for Calls {
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Call(call) = expr {
                    let allowed = match name_of(&call.func) {
                        Some("TrainingArguments") => Some(TRAINING_ARGS),
                        Some("BitsAndBytesConfig") => Some(BNB_ARGS),
                        Some("LoraConfig") => Some(LORA_ARGS),
                        Some("from_pretrained") => Some(FROM_PRETRAINED_ARGS),
                        Some("tokenizer") => Some(TOKENIZER_ARGS),
                        _ => None,
                    };
                    for k in call.arguments.keywords.iter() {
                        let Some(arg) = k.arg.as_ref().map(ast::Identifier::as_str) else {
                            self.errors.push("**kwargs".into());
                            continue;
                        };
                        if allowed.is_some_and(|a| !a.contains(&arg)) {
                            self.errors
                                .push(format!("{:?}({arg}=…)", name_of(&call.func)));
                        }
                        let bnb = matches!(&k.value, Expr::Call(c) if name_of(&c.func) == Some("BitsAndBytesConfig"));
                        if bnb != (arg == "quantization_config") {
                            self.errors
                                .push(format!("{arg}= with BitsAndBytesConfig: {bnb}"));
                        }
                    }
                }
                visitor::walk_expr(self, expr);
            }
        }

        fn check_python(code: &str) -> Result<(), String> {
            let parsed = ruff_python_parser::parse_module(code).map_err(|e| e.to_string())?;
            let body = &parsed.syntax().body;
            // A bare BitsAndBytesConfig(...) statement does nothing.
            if body.iter().any(|st| matches!(st, ast::Stmt::Expr(e) if matches!(&*e.value, Expr::Call(c) if name_of(&c.func) == Some("BitsAndBytesConfig")))) {
                return Err("BitsAndBytesConfig outside quantization_config=".into());
            }
            let mut v = Calls { errors: Vec::new() };
            v.visit_body(body);
            if v.errors.is_empty() {
                Ok(())
            } else {
                Err(v.errors.join("; "))
            }
        }

        /// Checks one snippet by its kind.
        pub(crate) fn check(code: &str) -> Result<(), String> {
            let words: Vec<&str> = code.split_whitespace().collect();
            if code.starts_with('{') {
                check_json(code)
            } else if let Some(rest) = code.strip_prefix("vllm serve ") {
                let w: Vec<&str> = rest.split_whitespace().skip(1).collect();
                check_flags(&w, VLLM_FLAGS, true)
            } else if code.starts_with("torchrun ") {
                let flags: Vec<&str> = words
                    .iter()
                    .copied()
                    .take_while(|w| !w.starts_with('#'))
                    .filter(|w| w.starts_with("--"))
                    .collect();
                check_flags(&flags, TORCHRUN_FLAGS, false)
            } else {
                check_python(code)
            }
        }

        /// Setups that reach every rung, text and vLLM.
        fn setups() -> Vec<(&'static str, Setup)> {
            let train = Setup {
                task: Task::Train,
                ..Setup::default()
            };
            vec![
                (
                    "mistralai/Mistral-7B-v0.1",
                    Setup {
                        batch: 32,
                        seq: 1024,
                        ..train.clone()
                    },
                ),
                (
                    "meta-llama/Llama-3.1-70B",
                    Setup {
                        seq: 4096,
                        ..train.clone()
                    },
                ),
                (
                    "meta-llama/Llama-3.1-8B",
                    Setup {
                        method: Method::Lora,
                        batch: 8,
                        seq: 4096,
                        ..train.clone()
                    },
                ),
                (
                    "meta-llama/Llama-3.1-8B",
                    Setup {
                        precision: Precision::Fp32,
                        batch: 8,
                        seq: 2048,
                        ..train.clone()
                    },
                ),
                (
                    "meta-llama/Llama-3.1-70B",
                    Setup {
                        gpus: 8,
                        batch: 4,
                        seq: 4096,
                        ..train.clone()
                    },
                ),
                (
                    "meta-llama/Llama-3.1-70B",
                    Setup {
                        method: Method::Qlora,
                        quant: Quant::Nf4Dq,
                        gpus: 8,
                        seq: 32768,
                        ..train
                    },
                ),
                (
                    "meta-llama/Llama-3.1-70B",
                    Setup {
                        batch: 8,
                        seq: 4096,
                        new_tokens: 512,
                        ..Setup::default()
                    },
                ),
                (
                    "Qwen/Qwen2.5-72B",
                    Setup {
                        precision: Precision::Fp32,
                        seq: 2048,
                        ..Setup::default()
                    },
                ),
            ]
        }

        #[test]
        fn every_rung_and_every_plan_prints_well_formed_snippets() {
            let gpus = ["rtx-4090", "h100-sxm", "a100-80gb"];
            let mut seen = std::collections::BTreeSet::new();
            let mut rungs_seen = std::collections::BTreeSet::new();
            for (id, s) in setups() {
                let cfg = catalogue::find(id).expect("model");
                for g in gpus {
                    let gpu = oomkit_core::gpus::find(g).expect("gpu");
                    let usable = gpu.usable();
                    // Every rung that applies, on its own.
                    for (i, (_, apply)) in LADDER.iter().enumerate() {
                        if let Some((_, _, config)) = apply(&s, &cfg, usable) {
                            rungs_seen.insert(i);
                            seen.insert(config);
                        }
                    }
                    if let Ok(est) = estimate(&cfg, &s) {
                        seen.extend(
                            fit(&cfg, &s, gpu, &est)
                                .plan
                                .into_iter()
                                .map(|st| st.config),
                        );
                    }
                }
            }
            // ZeRO-3 over a setup that already offloads the optimizer:
            let zero = Setup {
                task: Task::Train,
                gpus: 4,
                offload: Offload::Optimizer,
                zero: 2,
                ..Setup::default()
            };
            let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
            for (_, apply) in LADDER {
                if let Some((_, _, c)) = apply(&zero, &cfg, Bytes::gib(1)) {
                    seen.insert(c);
                }
            }
            assert_eq!(rungs_seen.len(), LADDER.len(), "{rungs_seen:?}");
            // vLLM plans.
            for (id, g) in [
                ("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm"),
                ("meta-llama/Llama-3.1-8B-Instruct", "rtx-4090"),
                ("Qwen/Qwen2.5-72B-Instruct", "a100-80gb"),
            ] {
                let mut cfg = catalogue::find(id).expect("model");
                cfg.id = id.into();
                let a = crate::serve::VllmArgs {
                    gpu_memory_utilization: 0.9,
                    max_model_len: cfg.max_positions.unwrap_or(2048),
                    max_num_batched_tokens: 8192,
                    max_num_seqs: 256,
                };
                let gpu = oomkit_core::gpus::find(g).expect("gpu");
                let plan = crate::serve::plan(&cfg, &Setup::default(), &a, gpu);
                assert!(!plan.is_empty(), "{id} on {g}");
                seen.extend(plan.into_iter().map(|st| st.config));
            }
            let bad: Vec<String> = seen
                .iter()
                .filter_map(|c| check(c).err().map(|e| format!("{c}\n    -> {e}")))
                .collect();
            assert!(bad.is_empty(), "{}", bad.join("\n"));
            assert!(seen.len() > 15, "{seen:#?}");
        }

        /// The checker rejects what the issue found printed.
        #[test]
        fn checker_rejects_broken_snippets() {
            for broken in [
                "BitsAndBytesConfig(load_in_4bit=True)",
                "TrainingArguments(per_device_batch_size=8)",
                "AutoModelForCausalLM.from_pretrained(model_id, load_in_4bit=True)",
                "{\"zero_optimization\": {\"stage\": 3}}  # DeepSpeed JSON",
                "{\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"}}}",
                "{\"zero\": {\"stage\": 3}}",
                "tokenizer(..., truncation=True, max_length=512",
                "vllm serve m --quantization int8",
                "vllm serve m --max-model-len",
                "torchrun --nproc-per-node 8 pretrain_gpt.py --tp 8",
            ] {
                assert!(check(broken).is_err(), "{broken}");
            }
            assert!(check("tokenizer(texts, truncation=True, max_length=512)").is_ok());
        }
    }
}
