//! PyTorch FSDP (full shard) on one GPU, as Hugging Face accelerate and
//! torchtitan wrap a decoder: one unit per block (accelerate's
//! `TRANSFORMER_BASED_WRAP` on `_no_split_modules`; torchtitan's
//! `fully_shard` per block) and the root unit holding the embedding, the
//! final norm and the LM head.
//!
//! - **States**: PyTorch's own layout sharded over dp — under mixed
//!   precision the sharded parameters stay fp32 and `param_dtype` (16-bit)
//!   is the gathered copy (FSDP2 `MixedPrecisionPolicy`, FSDP1
//!   `MixedPrecision`); gradients are sharded in the parameters' dtype and
//!   dropped by `zero_grad(set_to_none=True)`; the optimizer sees the shards.
//! - **The root stays gathered**: FSDP2's `fully_shard` sets the root's
//!   `reshard_after_forward` to False "since its parameters would typically
//!   be immediately all-gathered for backward" (torch/distributed/fsdp/
//!   _fully_shard/_fully_shard.py, torch 2.15), and FSDP1's
//!   `_post_forward_reshard` never frees the root's flat parameter
//!   (torch/distributed/fsdp/_runtime_utils.py). Its gradients are reduced
//!   only in the root's post-backward, after the embedding's backward: the
//!   LM head's unsharded gradient lives through all of backward.
//! - **Blocks**: gathered one at a time with one prefetched (FSDP2 always
//!   prefetches one unit in backward, `BACKWARD_PRE`; FSDP1's
//!   `limit_all_gathers=True`, the default, lets at most two all-gathers be
//!   in flight, `_runtime_utils._unshard`'s rate limiter): in the last block's
//!   backward (after its recompute under checkpointing), two blocks are
//!   gathered (FSDP2: the prefetched one as its all-gather output until it
//!   is copied out), with the block's unsharded gradient and its
//!   reduce-scatter input.
//! - **CPU offload** (FSDP2 `CPUOffloadPolicy`, FSDP1
//!   `CPUOffload(offload_params=True)`): shards, gradients and the optimizer
//!   step live on the CPU; the GPU holds the gathered units only.
//! - **The caching allocator's reserve**: all-gather outputs are allocated
//!   on the all-gather stream and reduce-scatter inputs on the
//!   reduce-scatter stream (FSDP2 `_fsdp_collectives.py`,
//!   `foreach_all_gather`/`foreach_reduce`); the allocator keeps a pool per
//!   stream that the compute stream cannot reuse, so both pools stay
//!   reserved on top of the compute stream's own: the all-gather pool holds
//!   the larger of the root and two blocks, the reduce-scatter pool the
//!   larger of the root's and one block's gradients. FSDP1 frees gathered
//!   parameters with `record_stream`, holding one more block until the
//!   compute stream is done with it (torchtitan docs/fsdp.md: FSDP2 "achieves
//!   lower and deterministic GPU memory by avoiding `recordStream`").

use super::{Framework, Sharded, gathered_bytes, head_params, largest_layer};
use crate::components as c;
use crate::model::ModelConfig;
use crate::setup::{Method, Offload, Setup};

/// Per-GPU states and buffers under FSDP full shard.
pub fn states(cfg: &ModelConfig, s: &Setup) -> Sharded {
    let n = s.dp().max(1);
    let tp = s.tp.max(1);
    let gb = gathered_bytes(s);
    // PyTorch's replicated layout (AMP's fp32 model under mixed precision),
    // then sharded over dp.
    let base = Setup {
        zero: 0,
        offload: Offload::None,
        ..s.clone()
    };
    let (w, g, o, step) = c::sharded_states(cfg, &base);
    // bitsandbytes' 4-bit quantization state is not a parameter: every GPU
    // keeps all of it, offloaded or not ([`c::bnb4_quant_state_bytes`]).
    let qstate = c::model_share(cfg, s.pp, tp, c::bnb4_quant_state_bytes(cfg, s));
    let offloaded = s.offload != Offload::None;
    let (weights, grads, optimizer, step) = if offloaded {
        (qstate, 0, 0, 0)
    } else {
        (
            w.saturating_sub(qstate) / n + qstate,
            g / n,
            o / n,
            step / n,
        )
    };
    let root = cfg.embedding_params().saturating_mul(gb) / tp;
    let block = block_bytes(cfg, s, gb) / tp;
    let head_grad = if s.method == Method::Full {
        head_params(cfg).saturating_mul(gb) / tp
    } else {
        0
    };
    let block_grad = if s.method == Method::Full {
        block
    } else {
        // Adapters only: their gradients are small.
        0
    };
    let two_blocks = block.saturating_mul(2);
    // The reduce-scatter pool: the root's gradients at the end of backward,
    // or a block's; adapters' gradients are small.
    let reduce_pool = if s.method == Method::Full {
        root.max(block_grad)
    } else {
        0
    };
    let mut reserved_extra = root.max(two_blocks).saturating_add(reduce_pool);
    if s.sharding.framework == Framework::Fsdp1 {
        reserved_extra = reserved_extra.saturating_add(block);
    }
    Sharded {
        weights,
        grads,
        live_grads: 0,
        optimizer,
        step,
        gathered: root,
        unreduced_grad: head_grad,
        head_backward: None,
        step_grads: None,
        block_backward: Some((
            // The root, the block and the prefetched block (FSDP2: its
            // all-gather output until `foreach_all_gather_copy_out` makes it
            // the unsharded parameters).
            root.saturating_add(two_blocks),
            // The head's and the block's unreduced gradients and the block's
            // reduce-scatter input.
            head_grad.saturating_add(block_grad.saturating_mul(2)),
        )),
        reserved_extra,
    }
}

/// One gathered block in bytes: its parameters in `param_dtype`, or with a
/// quantized base (QLoRA under FSDP, bitsandbytes' `bnb_4bit_quant_storage`)
/// its linears at the quantized width ([`c::quant_bits_x1000`]; 4 bits for
/// bitsandbytes 4-bit, whose quantization state stays on the module,
/// [`c::bnb4_quant_state_bytes`]) and the rest in 16-bit.
fn block_bytes(cfg: &ModelConfig, s: &Setup, gb: u64) -> u64 {
    let all = largest_layer(cfg);
    if s.quant == crate::setup::Quant::None {
        return all.saturating_mul(gb);
    }
    let i = cfg.layers.saturating_sub(1);
    let lin: u64 = cfg
        .layer_linears(i)
        .into_iter()
        .map(|(_, a, b, n)| a.saturating_mul(b).saturating_mul(n))
        .fold(0, u64::saturating_add)
        .min(all);
    let bits = match s.quant {
        crate::setup::Quant::Nf4 | crate::setup::Quant::Nf4Dq => 4_000,
        q => c::quant_bits_x1000(q),
    };
    let packed = u128::from(lin) * u128::from(bits) / 8_000;
    crate::model::sat(packed).saturating_add((all - lin).saturating_mul(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;
    use crate::setup::{Precision, Task};

    fn fsdp(gpus: u64, offload: Offload) -> Setup {
        let mut s = Setup {
            task: Task::Train,
            precision: Precision::MixedBf16,
            gpus,
            zero: 3,
            offload,
            ..Setup::default()
        };
        s.sharding.framework = Framework::Fsdp2;
        s
    }

    #[test]
    fn root_stays_gathered_and_states_shard_in_fp32() {
        let Ok(cfg) = catalogue::find("meta-llama/Llama-3.1-8B") else {
            return;
        };
        let sh = states(&cfg, &fsdp(8, Offload::None));
        let p = cfg.params();
        assert_eq!(sh.weights, p * 4 / 8);
        assert_eq!(sh.optimizer, p * 8 / 8);
        assert_eq!(sh.gathered, cfg.embedding_params() * 2);
        let off = states(&cfg, &fsdp(8, Offload::Params));
        assert_eq!((off.weights, off.optimizer, off.grads), (0, 0, 0));
        assert_eq!(off.gathered, sh.gathered);
    }
}
