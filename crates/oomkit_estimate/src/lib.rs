//! `oomkit estimate`: a model's architecture and a setup → the peak GPU
//! memory PyTorch will report, whether it fits a GPU, and the cheapest
//! change that makes it fit.
//!
//! Every component is one function in [`components`] citing its source in
//! `docs/reference/memory-estimation.md`; [`estimate`] combines them into the
//! three numbers a user sees (allocated, reserved, nvidia-smi used) and the
//! phase of the peak; [`fit`] checks a GPU and builds the plan.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod arch;
pub mod catalogue;
pub mod checkpoint;
pub mod components;
pub mod estimated;
pub mod fit;
pub mod gguf;
pub mod image;
pub mod json;
pub mod knob;
pub mod llamacpp;
pub mod model;
pub mod options;
pub mod preflight;
pub mod render;
pub mod resolve;
pub mod selective;
pub mod serve;
pub mod setup;
pub mod sharding;
pub mod stack;
pub mod versions;

use oomkit_core::Bytes;
use serde::Serialize;

pub use estimated::{EstimateError, Estimated};
pub use model::{BareShape, ConfigError, ModelConfig};
pub use options::{Engine, KvDtype, OnOff, Options, QuantChoice, Workload};
pub use setup::{
    Attention, Given, LoraTargets, Method, Offload, Optimizer, Precision, Quant, Setup, SetupError,
    Task,
};

use components as c;

/// The memory components (the JSON `components` object: integers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Components {
    /// Weights (quantized where asked, with constants; LoRA adapters).
    pub weights_bytes: Bytes,
    /// Gradients of trainable parameters.
    pub gradients_bytes: Bytes,
    /// Optimizer states.
    pub optimizer_bytes: Bytes,
    /// Activations alive at the peak (training: saved for backward;
    /// inference: the prefill working set).
    pub activations_bytes: Bytes,
    /// Logits and loss tensors.
    pub logits_bytes: Bytes,
    /// KV cache at the peak.
    pub kv_cache_bytes: Bytes,
    /// Short-lived tensors at the peak (loss backward, optimizer step,
    /// dequantization, cache growth).
    pub temporaries_bytes: Bytes,
    /// CUDA context, library workspaces and NCCL buffers (not in PyTorch's
    /// counters).
    pub cuda_context_bytes: Bytes,
}

/// The result for one model and setup.
#[derive(Clone, Debug, Serialize)]
pub struct Estimate {
    /// Components at the peak phase.
    pub components: Components,
    /// `torch.cuda.max_memory_allocated()`.
    pub peak_allocated_bytes: Bytes,
    /// `torch.cuda.max_memory_reserved()`.
    pub peak_reserved_bytes: Bytes,
    /// nvidia-smi used: reserved + context and workspaces.
    pub device_used_bytes: Bytes,
    /// Where the peak happens: `forward`, `backward`, `optimizer-step`,
    /// `prefill` or `decode`.
    pub peak_phase: &'static str,
    /// Total parameters.
    pub params: u64,
    /// Trainable parameters.
    pub trainable_params: u64,
}

struct Phase {
    name: &'static str,
    parts: Components,
    /// Reserved-but-free bytes beyond the general slack.
    extra_reserved: u64,
}

impl Phase {
    fn allocated(&self) -> u64 {
        let p = &self.parts;
        [
            p.weights_bytes,
            p.gradients_bytes,
            p.optimizer_bytes,
            p.activations_bytes,
            p.logits_bytes,
            p.kv_cache_bytes,
            p.temporaries_bytes,
        ]
        .into_iter()
        .sum::<Bytes>()
        .get()
    }
    fn transient(&self) -> u64 {
        let p = &self.parts;
        p.activations_bytes
            .saturating_add(p.logits_bytes)
            .saturating_add(p.temporaries_bytes)
            .get()
    }
}

/// Estimates peak memory for `cfg` under `s` (validated with
/// [`Setup::validate`]) on the busiest GPU. The peak is the largest of the
/// phases (§3.7): training compares the start of backward (everything saved
/// plus the loss gradient) with the optimizer step (gradients plus step
/// temporaries); with pipeline parallelism the start of backward is checked
/// on the first stage (most micro-batches in flight) and on the last (one
/// micro-batch plus the logits). Inference compares prefill (prompt cache
/// plus one layer's working set) with the end of decoding (full cache plus
/// one layer's growth copy).
///
/// Errors when the setup does not fit the model or some term exceeds
/// [`model::MAX_BYTES`] ([`Setup::check_model`], which bounds every growing
/// term in 128 bits first): never a wrapped number.
pub fn estimate(cfg: &ModelConfig, s: &Setup) -> Result<Estimate, SetupError> {
    let eager;
    let s = if sdpa_falls_back_to_eager(cfg, s) {
        eager = Setup {
            attention: Attention::Eager,
            ..s.clone()
        };
        &eager
    } else {
        s
    };
    // The size gate sees the attention that really runs: Gemma-2's eager
    // fallback holds batch × heads × seq² scores that SDPA would not.
    s.check_model(cfg)?;
    let weights = c::weights_bytes(cfg, s);
    let ctx = c::cuda_context_bytes(s.task == Task::Train, s.cuda_lazy_loading)
        .saturating_add(c::nccl_bytes(s));
    let phases: Vec<Phase> = match s.task {
        Task::Train => {
            // Model states and ZeRO/FSDP buffers per GPU (`sharding`).
            let sh = sharding::states(cfg, s);
            let (weights, grads, opt, step_tmp) = (sh.weights, sh.grads, sh.optimizer, sh.step);
            // With accumulation, the previous micro-batches' gradients stay alive
            // through the forward and backward of the next ones (§3.7); flat
            // gradient buffers (ZeRO-2/3) are alive in every backward.
            let live_grads = if s.grad_accum > 1 {
                grads
            } else {
                sh.live_grads
            };
            let backward = |activations, logits, loss: u64| Phase {
                name: "backward",
                parts: Components {
                    // ZeRO-3/FSDP: the parameters still gathered at the loss.
                    weights_bytes: Bytes(weights.saturating_add(sh.gathered)),
                    gradients_bytes: Bytes(live_grads),
                    optimizer_bytes: Bytes(opt),
                    activations_bytes: Bytes(activations),
                    logits_bytes: Bytes(logits),
                    temporaries_bytes: Bytes(
                        loss.saturating_add(c::dequant_bytes(cfg, s))
                            .saturating_add(if loss > 0 { sh.unreduced_grad } else { 0 }),
                    ),
                    ..Components::default()
                },
                extra_reserved: sh.reserved_extra,
            };
            let logits = c::training_logits_bytes(cfg, s);
            let loss = c::loss_backward_bytes(cfg, s);
            let mut v = Vec::new();
            if s.pp > 1 {
                // First stage: pp micro-batches in flight, no head; last: one
                // micro-batch and the loss.
                v.push(backward(c::training_activations_bytes(cfg, s), 0, 0));
                v.push(backward(
                    c::stage_activations_bytes(cfg, s, 1),
                    logits,
                    loss,
                ));
            } else {
                v.push(backward(
                    c::training_activations_bytes(cfg, s),
                    logits,
                    loss,
                ));
            }
            if c::autocast_cache_bytes(cfg, s) > 0 {
                // End of a checkpointed forward under autocast: the cast cache
                // still holds every layer's half-precision weights.
                let mut fwd = backward(
                    c::training_activations_bytes(cfg, s)
                        .saturating_add(c::autocast_cache_bytes(cfg, s)),
                    logits,
                    0,
                );
                fwd.name = "forward";
                v.push(fwd);
            }
            if s.recomputes() {
                // Later in backward: one layer recomputed, the loss gone (only
                // the held head output remains).
                v.push(backward(
                    c::training_activations_bytes(cfg, s)
                        .saturating_add(c::recompute_bytes(cfg, s)),
                    c::held_logits_bytes(cfg, s),
                    0,
                ));
            }
            if let Some((buffers, head_grad)) = sh.head_backward {
                // DeepSpeed: the head's backward after the loss's: every
                // activation, the held output, the 16-bit gradient of the
                // logits and the head's gradient.
                let mut b = backward(
                    c::training_activations_bytes(cfg, s),
                    c::held_logits_bytes(cfg, s),
                    0,
                );
                let dlogits = c::held_logits_bytes(
                    cfg,
                    &Setup {
                        drops_output: false,
                        ..s.clone()
                    },
                );
                b.parts.gradients_bytes = Bytes(if s.grad_accum > 1 { grads } else { buffers });
                b.parts.temporaries_bytes = Bytes(
                    b.parts
                        .temporaries_bytes
                        .get()
                        .saturating_add(dlogits)
                        .saturating_add(head_grad),
                );
                v.push(b);
            }
            if let Some((gathered, grad_tmp)) = sh.block_backward {
                // FSDP: the last block's backward (after recomputing its
                // forward under checkpointing), its unit and the next one
                // gathered, the head's and the block's unreduced gradients.
                let recompute = if s.grad_checkpointing {
                    c::recompute_bytes(cfg, s)
                } else {
                    0
                };
                let mut b = backward(
                    c::training_activations_bytes(cfg, s).saturating_add(recompute),
                    c::held_logits_bytes(cfg, s),
                    0,
                );
                b.parts.weights_bytes = Bytes(weights.saturating_add(gathered));
                b.parts.temporaries_bytes =
                    Bytes(b.parts.temporaries_bytes.get().saturating_add(grad_tmp));
                v.push(b);
            }
            let step = Phase {
                name: "optimizer-step",
                parts: Components {
                    weights_bytes: Bytes(weights),
                    gradients_bytes: Bytes(sh.step_grads.unwrap_or(grads)),
                    optimizer_bytes: Bytes(opt),
                    logits_bytes: Bytes(c::held_logits_bytes(cfg, s)),
                    temporaries_bytes: Bytes(step_tmp),
                    ..Components::default()
                },
                extra_reserved: sh.reserved_extra,
            };
            v.push(step);
            v
        }
        Task::Infer => {
            let total = s.seq + s.new_tokens;
            // Tensor parallelism splits every layer over `tp` ranks; the GPUs
            // beyond it (`device_map="auto"`, or pipeline stages) place whole
            // layers in order: the busiest GPU holds 1/N of the blocks and of
            // the cache plus the embedding (or the head) — see [`split_share`].
            let weights = split_share(cfg, s, weights);
            let stages = s.gpus / s.tp.max(1);
            let kv = |tokens| c::kv_share(cfg, stages, s.tp, c::kv_cache_bytes(cfg, s, tokens));
            let kv_prompt = c::kv_share(cfg, stages, s.tp, c::kv_prefill_bytes(cfg, s, s.seq));
            // The prompt pass peaks either inside a layer (its working set)
            // or at the head (the logits beside the last hidden state), never
            // both: the layers' tensors are gone when the head runs (checked
            // against the CPU oracle: Llama-3.2-1B, 4 × 2048 tokens, forward).
            let prompt = |activations, logits| Phase {
                name: if s.new_tokens > 0 {
                    "prefill"
                } else {
                    "forward"
                },
                parts: Components {
                    weights_bytes: Bytes(weights),
                    activations_bytes: Bytes(activations),
                    logits_bytes: Bytes(logits),
                    kv_cache_bytes: Bytes(if s.new_tokens > 0 { kv_prompt } else { 0 }),
                    temporaries_bytes: Bytes(c::dequant_bytes(cfg, s)),
                    ..Components::default()
                },
                extra_reserved: 0,
            };
            let mut v = vec![
                prompt(
                    c::prefill_transient_bytes(cfg, s)
                        .saturating_add(c::prompt_shared_bytes(cfg, s)),
                    0,
                ),
                prompt(
                    c::head_input_bytes(cfg, s),
                    stack::prompt_logits_bytes(cfg, s)
                        .unwrap_or_else(|| c::inference_logits_bytes(cfg, s)),
                ),
            ];
            if s.new_tokens > 0 {
                v.push(Phase {
                    name: "decode",
                    parts: Components {
                        weights_bytes: Bytes(weights),
                        logits_bytes: Bytes(c::inference_logits_bytes(cfg, s)),
                        kv_cache_bytes: Bytes(kv(total)),
                        temporaries_bytes: Bytes(
                            stack::decode_cache_temporaries(cfg, s, total)
                                / c::kv_tp_divisor(cfg, s.tp)
                                + c::dequant_bytes(cfg, s),
                        ),
                        ..Components::default()
                    },
                    extra_reserved: c::cache_growth_slack_bytes(cfg, s, total)
                        / c::kv_tp_divisor(cfg, s.tp),
                });
            }
            if let Some(held) = stack::held_prompt_logits_bytes(cfg, s) {
                // The first step of a tuple cache: the prompt's cache, its
                // one-token-longer rebuild and the prompt's logits.
                let first = s.seq.saturating_add(1);
                v.push(Phase {
                    name: "decode",
                    parts: Components {
                        weights_bytes: Bytes(weights),
                        logits_bytes: Bytes(held),
                        kv_cache_bytes: Bytes(kv(first)),
                        temporaries_bytes: Bytes(
                            stack::first_step_previous_cache_bytes(cfg, s)
                                / c::kv_tp_divisor(cfg, s.tp)
                                + c::dequant_bytes(cfg, s),
                        ),
                        ..Components::default()
                    },
                    extra_reserved: 0,
                });
            }
            v
        }
    };
    // `max_memory_allocated` and `max_memory_reserved` are separate maxima
    // over time: the allocated peak's phase names the peak and gives the
    // components; the reserved peak may come from another phase (decoding's
    // freed cache blocks stay reserved after the prefill's larger allocation).
    let mut reserved = 0;
    let mut best: Option<(u64, Phase)> = None;
    for ph in phases {
        let alloc = ph.allocated();
        reserved = reserved
            .max(c::reserved_bytes(alloc, ph.transient()).saturating_add(ph.extra_reserved));
        if best.as_ref().is_none_or(|b| alloc > b.0) {
            best = Some((alloc, ph));
        }
    }
    let (allocated, phase) = best.unwrap_or((
        weights,
        Phase {
            name: "forward",
            parts: Components::default(),
            extra_reserved: 0,
        },
    ));
    let reserved = reserved.max(allocated);
    let device_used = reserved.saturating_add(ctx);
    if device_used > model::MAX_BYTES {
        return Err(SetupError::TooLarge { what: "the peak" });
    }
    let mut components = phase.parts;
    components.cuda_context_bytes = Bytes(ctx);
    Ok(Estimate {
        components,
        peak_allocated_bytes: Bytes(allocated),
        peak_reserved_bytes: Bytes(reserved),
        device_used_bytes: Bytes(device_used),
        peak_phase: phase.name,
        params: cfg.params(),
        trainable_params: c::trainable_params(cfg, s),
    })
}

/// Weights on the busiest GPU for inference: tensor parallelism divides
/// every layer by `tp`, and the `gpus / tp` groups split the layers in order
/// (accelerate's `device_map="auto"` or pipeline stages): ⌈L/N⌉ layers'
/// share of the block weights plus the larger of the input embedding and the
/// head ([`components::model_share`]). One GPU: all weights.
pub fn split_share(cfg: &ModelConfig, s: &Setup, weights: u64) -> u64 {
    if s.task != Task::Infer {
        return weights;
    }
    c::model_share(cfg, s.gpus / s.tp.max(1), s.tp, weights)
}

/// transformers has no SDPA path for attention soft-capping (Gemma-2
/// refuses `attn_implementation="sdpa"`) nor for BLOOM and MPT
/// (modeling_bloom.py and modeling_mpt.py always build the ALiBi scores and
/// a softmax over them): SDPA there means eager attention.
pub fn sdpa_falls_back_to_eager(cfg: &ModelConfig, s: &Setup) -> bool {
    (cfg.attn_softcap || alibi_eager(cfg)) && s.attention == Attention::Sdpa
}

/// BLOOM and MPT: transformers computes their ALiBi attention eagerly.
pub fn alibi_eager(cfg: &ModelConfig) -> bool {
    cfg.model_type.alibi()
}
