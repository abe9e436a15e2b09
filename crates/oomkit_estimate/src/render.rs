//! Human output: a breakdown table with bars, the verdict in one line, then
//! the plan. Plain text; the binary decides about colour.

use std::fmt::Write;

use oomkit_core::Bytes;

use oomkit_core::gpus::Gpu;

use crate::fit::Fit;
use crate::model::{ModelConfig, human_count};
use crate::serve::Served;
use crate::setup::Setup;
use crate::{Estimate, components};

const BAR: usize = 30;

/// Renders the estimate (and the fit, when a GPU was given).
pub fn human(cfg: &ModelConfig, s: &Setup, est: &Estimate, fit: Option<&Fit>) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} ({} params, {} trainable) · {} · {} · batch {} × seq {}{}",
        cfg.label(),
        human_count(est.params),
        if est.trainable_params == 0 {
            "0".to_string()
        } else {
            human_count(est.trainable_params)
        },
        match s.task {
            crate::setup::Task::Infer => "inference",
            crate::setup::Task::Train => "training",
        },
        components::precision_name(s.precision),
        s.batch,
        s.seq,
        if s.new_tokens > 0 {
            format!(" + {} new", s.new_tokens)
        } else {
            String::new()
        }
    );
    if let Some(ck) = cfg.checkpoint.as_ref().filter(|c| c.index_only) {
        let _ = writeln!(
            o,
            "  weights from the safetensors index: total_size {} over {} tensors (shard files not read)",
            Bytes(ck.bytes),
            ck.index_tensors.unwrap_or(0)
        );
    }
    if crate::sdpa_falls_back_to_eager(cfg, s) {
        let why = if cfg.attn_softcap {
            "attention soft-capping; --attention flash for flash-attention-2"
        } else if cfg.model_type == crate::arch::Arch::Mpt {
            "MPT's ALiBi attention"
        } else {
            "BLOOM's ALiBi attention"
        };
        let _ = writeln!(
            o,
            "  attention: eager (transformers has no SDPA path for {why})"
        );
    }
    if s.gpus > 1 || s.tp > 1 || s.pp > 1 {
        let _ = writeln!(o, "{}", parallel_line(s));
    }
    let c = &est.components;
    let rows = [
        ("weights", c.weights_bytes),
        ("gradients", c.gradients_bytes),
        ("optimizer", c.optimizer_bytes),
        ("activations", c.activations_bytes),
        ("logits", c.logits_bytes),
        ("kv cache", c.kv_cache_bytes),
        ("temporaries", c.temporaries_bytes),
        ("cuda context", c.cuda_context_bytes),
    ];
    let rows: Vec<(String, u64)> = rows
        .iter()
        .map(|(n, b)| ((*n).to_string(), b.get()))
        .collect();
    o.push('\n');
    bars(&mut o, &rows, est.device_used_bytes.get());
    let _ = writeln!(o);
    peaks(&mut o, est);
    if let Some(f) = fit {
        let _ = writeln!(o);
        let (used, usable, margin) = (
            est.device_used_bytes,
            f.usable_bytes,
            Bytes(f.headroom_bytes.unsigned_abs()),
        );
        let verdict = if f.fits {
            format!(
                "fits on {}: {used} of {usable} usable, {margin} headroom",
                f.gpu
            )
        } else {
            format!(
                "does not fit on {}: needs {used}, {usable} usable ({margin} short)",
                f.gpu
            )
        };
        let _ = writeln!(
            o,
            "{verdict}; max batch {}, max seq {}",
            f.max_batch, f.max_seq
        );
        if let Some(dm) = &f.device_map {
            let _ = writeln!(o, "\nsplit over {} GPUs:\n       {dm}", s.gpus);
        }
        crate::render::plan(&mut o, &f.plan, f.plan_fits);
    }
    o
}

/// How the GPUs are used; the numbers below are the busiest GPU's.
fn parallel_line(s: &Setup) -> String {
    let tp = s.tp.max(1);
    if s.task == crate::setup::Task::Infer {
        return format!(
            "per GPU (the busiest of {}): tensor parallel {tp} × {} layer-wise stages",
            s.gpus,
            s.gpus / tp
        );
    }
    let zero = if s.zero > 0 && s.sharding.fsdp() {
        let v = if s.sharding.framework == crate::sharding::Framework::Fsdp1 {
            1
        } else {
            2
        };
        format!(", FSDP{v} full shard over data parallel")
    } else if s.zero > 0 {
        format!(", ZeRO-{} over data parallel", s.zero)
    } else {
        String::new()
    };
    format!(
        "per GPU (the busiest of {}): tensor {} × pipeline {} × data {}{zero}",
        s.gpus,
        tp,
        s.pp,
        s.dp()
    )
}

/// The plan as people read it, shared by text and image models: one line per
/// step with its remedy id, bytes saved and the peak after it, then its config.
pub(crate) fn plan(o: &mut String, plan: &[crate::fit::Step], plan_fits: bool) {
    if plan.is_empty() {
        return;
    }
    let tail = if plan_fits {
        ""
    } else {
        " (still does not fit after every step)"
    };
    let _ = writeln!(o, "\nplan{tail}:");
    for (i, st) in plan.iter().enumerate() {
        let _ = writeln!(
            o,
            "  {}. {} [{}]: saves {}, then {}\n       {}",
            i + 1,
            st.change,
            st.remedy,
            st.saves_bytes,
            st.peak_after_bytes,
            st.config
        );
    }
    if let Some(p) = crate::fit::paste(plan) {
        let _ = writeln!(o, "\nall together (one paste):");
        for l in p.lines() {
            let _ = writeln!(o, "  {l}");
        }
    }
}

/// One bar per non-zero row, scaled to `total` (the nvidia-smi number), the
/// names padded to the longest.
pub(crate) fn bars(o: &mut String, rows: &[(String, u64)], total: u64) {
    let width = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0) + 1;
    for (name, b) in rows.iter().filter(|r| r.1 > 0) {
        let n = ((((*b as f64) / total.max(1) as f64) * BAR as f64).round() as usize).min(BAR);
        let _ = writeln!(
            o,
            "  {name:<width$}{:>11}  {}{}",
            Bytes(*b).to_string(),
            "█".repeat(n),
            "·".repeat(BAR - n)
        );
    }
}

/// The three numbers a user sees, each named after the tool that shows it.
pub(crate) fn peaks(o: &mut String, est: &Estimate) {
    let _ = writeln!(
        o,
        "  peak allocated {:>11}   (torch.cuda.max_memory_allocated, at {})",
        est.peak_allocated_bytes.to_string(),
        est.peak_phase
    );
    let _ = writeln!(
        o,
        "  peak reserved  {:>11}   (torch.cuda.max_memory_reserved)",
        est.peak_reserved_bytes.to_string()
    );
    let _ = writeln!(
        o,
        "  device used    {:>11}   (nvidia-smi)",
        est.device_used_bytes.to_string()
    );
}
/// Renders `vllm serve` on `gpu`: the pool, the verdict, the plan.
pub fn serve_human(cfg: &ModelConfig, setup: &Setup, gpu: &Gpu, sv: &Served) -> String {
    let mut o = String::new();
    let r = &sv.report;
    let u = sv.args.gpu_memory_utilization;
    let fits = sv.fits;
    let plan = &sv.plan;
    let per_gpu = if setup.tp * setup.pp > 1 {
        format!(
            ", tensor_parallel_size {} × pipeline_parallel_size {}; per GPU",
            setup.tp, setup.pp
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "{} on {} with vLLM (gpu_memory_utilization {u}{per_gpu})",
        cfg.label(),
        gpu.id
    );
    let _ = writeln!(o);
    for (k, b) in [
        ("requested", r.requested_bytes),
        ("weights", r.weights_bytes),
        ("activations", r.activation_bytes),
        ("non-torch", r.non_torch_bytes),
        ("KV pool", r.kv_pool_bytes),
    ] {
        let _ = writeln!(o, "  {k:<13}{:>11}", b.to_string());
    }
    if setup.tp * setup.pp > 1 {
        let _ = writeln!(
            o,
            "  {:<13}{:>11}",
            "KV, all GPUs",
            r.kv_pool_total_bytes.to_string()
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "  {} tokens in {} blocks of 16; max concurrency {:.2}x at max_model_len {}",
        r.kv_tokens, r.blocks, r.max_concurrency, r.max_model_len
    );
    let _ = writeln!(o, "  {}", r.command);
    let _ = writeln!(o);
    let non_kv = r
        .weights_bytes
        .saturating_add(r.activation_bytes)
        .saturating_add(r.non_torch_bytes);
    if fits {
        let _ = writeln!(o, "fits on {}", gpu.id);
    } else if non_kv >= r.requested_bytes {
        let _ = writeln!(
            o,
            "does not fit on {}: weights, activations and non-torch memory need {} of the {} requested; vLLM would refuse to start",
            gpu.id, non_kv, r.requested_bytes
        );
    } else {
        let _ = writeln!(
            o,
            "does not fit on {}: one request of max_model_len {}{} needs {} blocks of KV cache, the pool holds {} (one kept back); vLLM would refuse to start",
            gpu.id,
            r.max_model_len,
            if sv.default_len {
                " (the model's context, vLLM's default)"
            } else {
                ""
            },
            r.max_model_len.div_ceil(crate::serve::BLOCK_SIZE),
            r.blocks
        );
    }
    if !fits && plan.is_empty() {
        let _ = writeln!(
            o,
            "no plan on one node: a GPU with more memory, or pipeline parallelism over nodes [bigger-gpu]"
        );
    }
    if !plan.is_empty() {
        let _ = writeln!(
            o,
            "\nplan (cheapest first; each line starts vLLM as printed):"
        );
        for (i, st) in plan.iter().enumerate() {
            let t = &st.serve;
            let _ = writeln!(
                o,
                "  {}. {} [{}]: {} tokens, {:.2}x at max_model_len {}{}\n       {}",
                i + 1,
                st.change,
                st.remedy,
                t.kv_tokens,
                t.max_concurrency,
                t.max_model_len,
                if st.gpus > 1 {
                    format!(" on {} GPUs", st.gpus)
                } else {
                    String::new()
                },
                st.config
            );
        }
    }
    o
}
