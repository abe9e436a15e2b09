//! DeepSpeed ZeRO-1/2/3 on one GPU, from DeepSpeed's source (0.19.6):
//!
//! - **Stage 1/2** (`deepspeed/runtime/zero/stage_1_and_2.py`,
//!   `DeepSpeedZeroOptimizer`): with `contiguous_gradients` (default on),
//!   `setup_buckets` allocates one `reduce_bucket_size`-element buffer in the
//!   model's dtype, and a second one when `overlap_comm` is on ("double
//!   buffers", default off for stages 1–2). Stage 2 keeps its gradient
//!   partition in `grads_in_partition`, allocated at the first reduction and
//!   kept; with optimizer offload the partition lives in pinned CPU memory
//!   (`single_partition_of_fp32_groups[i].grad`).
//! - **Stage 3** (`stage3.py`, `DeepSpeedZeroOptimizer_Stage3`): the 16-bit
//!   parameter partition (`lp_param_buffer`); in `__init__`, the IPG bucket
//!   (`bucket.buffer = torch.empty(self.reduce_bucket_size, …)`) on the GPU
//!   always, and the gradient partition (`grad_partitions_flat_buffer`,
//!   16-bit) on `self.device` (the CPU under optimizer offload). The fp32
//!   gradient buffer `initialize_optimizer_states` allocates (`gradient_buffer`,
//!   the largest sub-group) is dropped at its end without optimizer offload
//!   (`group.grad = None` for every fp32 group, 0.14.2 to 0.19.6): it never
//!   meets the first backward. The step makes each sub-group's fp32 gradient
//!   afresh (`_prepare_fp32_grad_for_sub_group`) and frees it
//!   (`_release_sub_group`): a step temporary. Parameters of at
//!   most `stage3_param_persistence_threshold` elements are never
//!   partitioned (`ds_persist`): whole on every GPU.
//! - **Gathered parameters** (`partitioned_param_coordinator.py`,
//!   `PartitionedParameterCoordinator`): after the first step the module
//!   trace is complete, and `__params_to_release` keeps a module's parameters
//!   gathered when the trace uses them again within
//!   `stage3_max_reuse_distance` elements. Forward runs the modules in order
//!   and backward in reverse, so a module is used again after 2 × the
//!   parameters that follow it in forward: the LM head and the last blocks
//!   whose followers hold fewer than `max_reuse_distance / 2` elements are
//!   still gathered when backward starts (the head whole, however large).
//!   `fetch_sub_module` then prefetches up to `stage3_prefetch_bucket_size`
//!   more, while fewer than `stage3_max_live_parameters` are gathered.
//!
//! Hugging Face's `"auto"` values are resolved as transformers does
//! ([`super::Count`]).

use super::{Sharded, gathered_bytes, head_params};
use crate::components as c;
use crate::model::ModelConfig;
use crate::setup::{Method, Offload, Precision, Setup};

/// `reduce_bucket_size` in elements (`auto`: hidden²).
pub fn reduce_bucket(cfg: &ModelConfig, s: &Setup) -> u64 {
    s.sharding
        .reduce_bucket
        .get(|| cfg.hidden.saturating_mul(cfg.hidden))
}

/// `stage3_prefetch_bucket_size` in elements (`auto`: ⌊0.9·hidden²⌋).
pub fn prefetch_bucket(cfg: &ModelConfig, s: &Setup) -> u64 {
    s.sharding
        .prefetch_bucket
        .get(|| cfg.hidden.saturating_mul(cfg.hidden) / 10 * 9)
}

/// `stage3_param_persistence_threshold` in elements (`auto`: 10·hidden).
pub fn persistence_threshold(cfg: &ModelConfig, s: &Setup) -> u64 {
    s.sharding
        .persistence_threshold
        .get(|| cfg.hidden.saturating_mul(10))
}

/// The setup whose model states DeepSpeed keeps: a 16-bit model under ZeRO
/// always has an fp32 master copy and fp32 optimizer states
/// (`stage_1_and_2.py` builds `single_partition_of_fp32_groups` from the
/// 16-bit groups, `stage3.py` `fp32_partitioned_groups_flat`, and the
/// optimizer steps those), so `"bf16": {"enabled": true}` with a bf16 model
/// is DeepSpeed's mixed precision, not pure bf16 training.
fn deepspeed_layout(s: &Setup) -> Setup {
    let precision = match s.precision {
        Precision::Bf16 => Precision::MixedBf16,
        Precision::Fp16 => Precision::MixedFp16,
        p => p,
    };
    Setup {
        precision,
        ..s.clone()
    }
}

/// Per-GPU states and buffers under DeepSpeed ZeRO `s.zero` (1–3).
pub fn states(cfg: &ModelConfig, s: &Setup) -> Sharded {
    if s.zero >= 3 {
        return stage3(cfg, s);
    }
    let (w, g, o, step) = c::sharded_states(cfg, &deepspeed_layout(s));
    let gb = gathered_bytes(s);
    let overlap = s.sharding.overlap_comm.unwrap_or(false);
    let buckets = if s.sharding.contiguous_gradients {
        reduce_bucket(cfg, s)
            .saturating_mul(gb)
            .saturating_mul(if overlap { 2 } else { 1 })
    } else {
        0
    };
    // Stage 2's partition moves to pinned CPU memory with the optimizer.
    let g = if s.zero >= 2 && s.offload != Offload::None {
        0
    } else {
        g
    };
    let partition = if s.zero >= 2 { g } else { 0 };
    Sharded {
        weights: w,
        grads: g.saturating_add(buckets),
        live_grads: partition.saturating_add(buckets),
        optimizer: o,
        step,
        unreduced_grad: head_grad(cfg, s),
        ..Sharded::default()
    }
}

/// The LM head's gradient before it is reduced (full training): it is
/// computed whole, then copied into the bucket or reduced.
fn head_grad(cfg: &ModelConfig, s: &Setup) -> u64 {
    if s.method != Method::Full {
        return 0;
    }
    head_params(cfg).saturating_mul(gathered_bytes(s)) / s.tp.max(1)
}

fn stage3(cfg: &ModelConfig, s: &Setup) -> Sharded {
    let n = s.dp();
    let tp = s.tp.max(1);
    let gb = gathered_bytes(s);
    // The stage-2 shares (the 16-bit module unsharded, gradients and
    // optimizer states over dp) without offload; stage 3 then shards the
    // parameters and moves what offload moves.
    let base = crate::setup::Setup {
        zero: 2,
        offload: Offload::None,
        ..deepspeed_layout(s)
    };
    let (w_share, g_n, o_n, step_n) = c::sharded_states(cfg, &base);
    let persistent = persistent_params(cfg, persistence_threshold(cfg, s)).saturating_mul(gb) / tp;
    // bitsandbytes' 4-bit quantization state is not a parameter: ZeRO-3
    // neither partitions nor offloads it ([`c::bnb4_quant_state_bytes`]).
    let qstate = c::model_share(cfg, s.pp, s.tp, c::bnb4_quant_state_bytes(cfg, s));
    let partition = w_share.saturating_sub(qstate) / n.max(1);
    let weights = if s.offload == Offload::Params {
        persistent.saturating_add(qstate)
    } else {
        partition.saturating_add(persistent).saturating_add(qstate)
    };
    let offload_opt = s.offload != Offload::None;
    let ipg = if s.sharding.contiguous_gradients {
        reduce_bucket(cfg, s).saturating_mul(gb)
    } else {
        0
    };
    let (grads, optimizer, step) = if offload_opt {
        (0, 0, 0)
    } else {
        (g_n, o_n, step_n.min(s.sharding.sub_group.saturating_mul(4)))
    };
    let flat = grads.saturating_add(ipg);
    Sharded {
        weights,
        grads: flat,
        live_grads: flat,
        optimizer,
        step,
        gathered: gathered_at_backward(cfg, s).saturating_mul(gb) / tp,
        unreduced_grad: head_grad(cfg, s),
        ..Sharded::default()
    }
}

/// Parameters kept whole on every GPU (`ds_persist`: at most `threshold`
/// elements each): each block's norms and biases and its matrices no
/// larger than the threshold (a router), and the final norm — when a
/// hidden-wide vector is within the threshold.
pub fn persistent_params(cfg: &ModelConfig, threshold: u64) -> u64 {
    if cfg.hidden > threshold {
        return 0;
    }
    let per_layer = |i: u64| -> u128 {
        let big: u64 = cfg
            .layer_linears(i)
            .into_iter()
            .map(|(_, a, b, n)| a.saturating_mul(b).saturating_mul(n))
            .filter(|m| *m > threshold)
            .fold(0, u64::saturating_add);
        u128::from(cfg.layer_params(i).saturating_sub(big))
    };
    let layers = crate::model::sat(cfg.sum_layers(0, cfg.layers, per_layer));
    let outer = cfg
        .embedding_params()
        .saturating_sub(
            head_params(cfg).saturating_mul(if cfg.tied_embeddings || cfg.encoder {
                1
            } else {
                2
            }),
        )
        .min(cfg.hidden.saturating_mul(4));
    layers.saturating_add(outer)
}

/// Elements gathered when backward starts: the LM head and the trailing
/// modules within the reuse distance ([`states`]' module docs), plus the
/// prefetch bucket while fewer than `max_live` are gathered. Blocks are
/// taken as the last block's modules (closed form over any layer count);
/// the head counts as one module of vocabulary × width.
pub fn gathered_at_backward(cfg: &ModelConfig, s: &Setup) -> u64 {
    let d = u128::from(s.sharding.max_reuse_distance);
    let head = u128::from(head_params(cfg));
    let last = cfg.layers.saturating_sub(1);
    let modules: Vec<u128> = cfg
        .layer_linears(last)
        .into_iter()
        .map(|(_, a, b, n)| u128::from(a) * u128::from(b) * u128::from(n))
        .collect();
    let per_layer: u128 = modules.iter().sum::<u128>().max(1);
    let first = modules.first().copied().unwrap_or(0);
    let layers = u128::from(cfg.layers);
    // A module followed in forward by `after` elements is kept iff 2·after < d.
    let kept = |after: u128| 2 * after < d;
    let mut retained: u128 = 0;
    if kept(0) {
        retained = head;
        // Whole blocks j = 0, 1, … from the end: the block's first module
        // is followed by head + j·p + (p − first).
        let base = head + per_layer - first;
        let whole = if kept(base) {
            // Largest j with 2·(base + j·p) < d, plus one.
            ((d - 1) / 2 - base) / per_layer + 1
        } else {
            0
        }
        .min(layers);
        retained += whole * per_layer;
        if whole < layers {
            // The next block, module by module from its last.
            let mut after = head + whole * per_layer;
            for m in modules.iter().rev() {
                if kept(after) {
                    retained += m;
                }
                after += m;
            }
        }
    }
    let total = u128::from(cfg.params());
    // The module being fetched is the head itself, gathered whatever the
    // distance.
    let retained = retained.max(head).min(total);
    let live = u128::from(s.sharding.max_live).saturating_sub(retained);
    let prefetch = u128::from(prefetch_bucket(cfg, s))
        .min(live)
        .min(total - retained);
    crate::model::sat(retained + prefetch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;
    use crate::setup::{Precision, Task};
    use crate::sharding::Count;

    fn z3(gpus: u64) -> Setup {
        Setup {
            task: Task::Train,
            precision: Precision::MixedBf16,
            gpus,
            zero: 3,
            ..Setup::default()
        }
    }

    #[test]
    fn llama_8b_keeps_head_and_tail_within_the_reuse_distance() {
        let Ok(cfg) = catalogue::find("meta-llama/Llama-3.1-8B") else {
            return;
        };
        // Head 525M elements: a module followed by it is reused after
        // 1.05e9 > 1e9, so nothing of the last block is kept; the prefetch
        // bucket (5e7) comes on top.
        let g = gathered_at_backward(&cfg, &z3(8));
        assert_eq!(g, 128_256 * 4096 + 50_000_000);
        // A longer reuse distance keeps whole blocks (218M each).
        let mut s = z3(8);
        s.sharding.max_reuse_distance = 3_000_000_000;
        let g = gathered_at_backward(&cfg, &s);
        assert!(g > 128_256 * 4096 + 2 * 218_000_000, "{g}");
        // Distance 0 releases everything but the head being fetched.
        s.sharding.max_reuse_distance = 0;
        assert_eq!(gathered_at_backward(&cfg, &s), 128_256 * 4096 + 50_000_000);
    }

    #[test]
    fn stage3_buffers_follow_deepspeed_defaults() {
        let Ok(cfg) = catalogue::find("meta-llama/Llama-3.1-8B") else {
            return;
        };
        let sh = states(&cfg, &z3(8));
        let p = cfg.params();
        // 16-bit partition plus the persistent norms.
        assert!(sh.weights >= p * 2 / 8 && sh.weights < p * 2 / 8 + (10 << 20));
        // 16-bit gradient partition + the 5e8-element IPG bucket; the fp32
        // gradient of a sub-group (the partition, 1.004e9 elements, capped
        // at one 1e9-element sub-group) is a step temporary only.
        assert_eq!(sh.grads, p * 2 / 8 + 1_000_000_000);
        assert_eq!(sh.live_grads, sh.grads);
        assert!(sh.step >= 1_000_000_000 * 4, "{}", sh.step);
        // Optimizer offload leaves only the IPG bucket.
        let off = states(
            &cfg,
            &Setup {
                offload: Offload::Optimizer,
                ..z3(8)
            },
        );
        assert_eq!((off.grads, off.optimizer, off.step), (1_000_000_000, 0, 0));
        // Parameter offload: only persistent parameters stay.
        let off = states(
            &cfg,
            &Setup {
                offload: Offload::Params,
                ..z3(8)
            },
        );
        assert!(off.weights < 10 << 20);
    }

    #[test]
    fn a_bf16_model_keeps_deepspeeds_fp32_master_and_states() {
        let Ok(cfg) = catalogue::find("meta-llama/Llama-3.1-8B") else {
            return;
        };
        let pure = Setup {
            precision: Precision::Bf16,
            ..z3(8)
        };
        let p = cfg.params();
        // fp32 master + m + v, sharded: 12 B per parameter over 8 GPUs.
        assert_eq!(states(&cfg, &pure).optimizer, p * 12 / 8);
        assert_eq!(
            states(&cfg, &pure).optimizer,
            states(&cfg, &z3(8)).optimizer
        );
    }

    #[test]
    fn hf_auto_values_follow_the_hidden_size() {
        let Ok(cfg) = catalogue::find("meta-llama/Llama-3.1-8B") else {
            return;
        };
        let mut s = z3(8);
        s.sharding.reduce_bucket = Count::Auto;
        s.sharding.prefetch_bucket = Count::Auto;
        s.sharding.persistence_threshold = Count::Auto;
        assert_eq!(reduce_bucket(&cfg, &s), 4096 * 4096);
        assert_eq!(prefetch_bucket(&cfg, &s), 4096 * 4096 / 10 * 9);
        assert_eq!(persistence_threshold(&cfg, &s), 40_960);
    }

    #[test]
    fn huge_settings_do_not_overflow() {
        let Ok(cfg) = catalogue::find("gpt2") else {
            return;
        };
        let mut s = z3(2);
        s.sharding.max_reuse_distance = u64::MAX;
        s.sharding.max_live = u64::MAX;
        s.sharding.prefetch_bucket = Count::Elements(u64::MAX);
        s.sharding.reduce_bucket = Count::Elements(u64::MAX);
        assert_eq!(gathered_at_backward(&cfg, &s), cfg.params());
        let sh = states(&cfg, &s);
        assert_eq!(sh.grads, u64::MAX);
    }
}
