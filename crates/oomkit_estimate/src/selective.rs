//! Selective activation checkpointing and activation offloading: what a
//! training step saves for backward when only some layers, or only some ops
//! of every layer, are recomputed, and what stays on the GPU when the saved
//! tensors move to the CPU.
//!
//! Two frameworks ship the policies modelled here:
//! - torchtitan (`torchtitan/distributed/activation_checkpoint.py`,
//!   `SelectiveAC._wrap_block`, main of 2026-08): the op-level policy saves
//!   the outputs of the compute-intensive ops (`get_default_op_list()`'s
//!   `compute_intensive_ops`: `mm`, `addmm`, `bmm`, the SDPA kernels, …)
//!   except every second `mm`/`linear` of a block, counted per block
//!   (`forward_mm_count`), and recomputes everything else. Before
//!   2026-03 (`_apply_layer_sac`, removed by pytorch/torchtitan#2357) a
//!   number `k` as `selective_ac_option` checkpointed every k-th block.
//! - torchtune (`torchtune/training/activations.py`,
//!   `apply_selective_activation_checkpointing`): `ac_mode: selective` with
//!   an integer `ac_option` checkpoints every k-th layer (a counter over the
//!   layers, `_count % every_x_layer == 0`; 0 checkpoints all). Its
//!   `OffloadActivations` (`torchtune/training/_activation_offloading.py`)
//!   moves every saved tensor of at least 1 KiB to the CPU and keeps at
//!   most `max_fwd_stash_size = 5` of them on the GPU while their copies
//!   run; the recipes refuse it without activation checkpointing.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::components::{layer_activation_bytes, layer_norm_token_bytes};
use crate::model::ModelConfig;
use crate::setup::{Attention, Method, Setup};

/// Activation checkpointing's mode, as torchtitan's
/// `activation_checkpoint.mode` and torchtune's `ac_mode` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Checkpointing {
    /// Every activation saved.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    None,
    /// Every layer recomputed (HF `gradient_checkpointing`).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Full,
    /// Some ops or some layers recomputed (see the policy option).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Selective,
}

/// What selective activation checkpointing recomputes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectiveAc {
    /// torchtitan's op-level policy: matmul and attention outputs saved
    /// (every second bias-free matmul of a block recomputed), the rest
    /// recomputed.
    Op,
    /// Every k-th layer fully checkpointed (the k-th, 2k-th, …), the others
    /// saving everything (torchtune's and older torchtitan's integer option).
    EveryLayers(u64),
}

impl SelectiveAc {
    /// `op`, or a whole number of layers `k` (0 means every layer, as in
    /// torchtune).
    pub fn parse(s: &str) -> Option<SelectiveAc> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("op") {
            return Some(SelectiveAc::Op);
        }
        let k: u64 = s.parse().ok()?;
        Some(SelectiveAc::EveryLayers(k.max(1)))
    }

    /// Is layer `i` (0-based) of a stage checkpointed whole? The k-th, 2k-th,
    /// … layer, counting from 1 as both frameworks' counters do.
    fn whole(self, i: u64) -> bool {
        match self {
            SelectiveAc::Op => false,
            SelectiveAc::EveryLayers(k) => (i + 1).is_multiple_of(k.max(1)),
        }
    }
}

impl fmt::Display for SelectiveAc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectiveAc::Op => f.write_str("op"),
            SelectiveAc::EveryLayers(k) => write!(f, "{k}"),
        }
    }
}

impl Serialize for SelectiveAc {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for SelectiveAc {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let s = String::deserialize(de)?;
        SelectiveAc::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("selective_ac {s:?}: expected op or a number"))
        })
    }
}

/// Saved tensors OffloadActivations keeps on the GPU while their copies to
/// the CPU run (`max_fwd_stash_size`'s default).
pub const OFFLOAD_STASH: u64 = 5;

use crate::components::stream_bytes;

/// Bytes one layer saves for `b` × `seq` tokens under the op-level policy:
/// the block's input (what the checkpoint keeps), the outputs of the saved
/// matmuls and the attention kernel's output with its fp32 log-sum-exp (or,
/// with eager attention, the scores and the probabilities·V product, both
/// `bmm`s in the save list).
///
/// Matmuls follow the block's order (q, k, v, o, gate, up, down): a
/// bias-free projection runs as `aten.mm` and counts, so the 1st, 3rd, 5th
/// and 7th are saved; a biased one runs as `aten.addmm`, which is in the
/// save list but not counted, so it is always saved. Norms, rotary,
/// activations and residual additions are recomputed. An MoE layer's
/// routed experts run in grouped kernels whose op order is not modelled:
/// such a layer is counted as saving everything (an upper bound).
pub fn op_layer_bytes(cfg: &ModelConfig, s: &Setup, layer: u64, b: u64, seq: u64) -> u128 {
    let w = u128::from;
    let t = w(b) * w(seq);
    if cfg.moe.as_ref().is_some_and(|m| layer >= m.dense_layers) {
        return w(layer_activation_bytes(cfg, s, layer, b, seq));
    }
    let beta = w(s.precision.act_bytes());
    // A PEFT adapter runs `lora_A` then `lora_B` right after its base
    // linear, both bias-free `mm`s in the count, with fp32 outputs unless
    // autocast runs them in 16 bits ([`crate::components::lora_input_copies_bytes`]).
    let adapter_bytes = if s.drops_output
        || matches!(
            s.precision,
            crate::setup::Precision::MixedBf16 | crate::setup::Precision::MixedFp16
        ) {
        2
    } else {
        4
    };
    let mut count = 0u64;
    let mut saved: u128 = 0;
    let mut mm = |width: u128, bytes: u128, counted: bool| {
        let keep = if counted {
            count += 1;
            count % 2 == 1
        } else {
            true
        };
        if keep {
            saved += width * t * bytes;
        }
    };
    for (name, _, out, n) in cfg.layer_linears(layer) {
        mm(w(out) * w(n), beta, !cfg.linear_has_bias(name));
        if s.method != Method::Full && s.lora_targets.matches(name) {
            mm(w(s.lora_rank) * w(n), adapter_bytes, true);
            mm(w(out) * w(n), adapter_bytes, true);
        }
    }
    let q = w(cfg.heads * cfg.head_dim);
    let attn = match s.attention {
        Attention::Sdpa | Attention::Flash => t * q * beta + w(cfg.heads) * t * 4,
        // q·kᵀ and probabilities·V are `bmm`s: the β scores and the output.
        Attention::Eager => w(cfg.heads) * w(seq) * w(seq) * w(b) * beta + t * q * beta,
    };
    let input = t * w(cfg.hidden) * w(stream_bytes(cfg, s));
    input + saved + attn
}

/// What one layer saves under `sac` for `b` × `seq` tokens: the input alone
/// for a whole checkpointed layer, [`op_layer_bytes`] under the op policy,
/// else every saved tensor ([`layer_activation_bytes`]).
fn layer_saved(
    cfg: &ModelConfig,
    s: &Setup,
    sac: SelectiveAc,
    layer: u64,
    b: u64,
    seq: u64,
) -> u128 {
    let w = u128::from;
    if sac.whole(layer) {
        w(b) * w(seq) * w(cfg.hidden) * w(stream_bytes(cfg, s))
    } else if sac == SelectiveAc::Op {
        op_layer_bytes(cfg, s, layer, b, seq)
    } else {
        w(layer_activation_bytes(cfg, s, layer, b, seq))
    }
}

/// Σ over the stage's `layers` of what each saves under `sac`. Layer
/// groups ([`ModelConfig::layer_groups`]: dense, then MoE) are uniform, so
/// each group is its count of whole-checkpointed layers times the input
/// plus the rest times one layer's saved set.
pub fn stage_saved_wide(cfg: &ModelConfig, s: &Setup, sac: SelectiveAc, layers: u64) -> u128 {
    let w = u128::from;
    let (b, seq) = (s.batch, s.seq);
    cfg.layer_groups(0, layers)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(lo, n)| {
            let whole = match sac {
                SelectiveAc::Op => 0,
                SelectiveAc::EveryLayers(k) => {
                    let k = k.max(1);
                    (lo + n) / k - lo / k
                }
            };
            let input = w(b) * w(seq) * w(cfg.hidden) * w(stream_bytes(cfg, s));
            // The first layer of the group that is not checkpointed whole
            // stands for the others (a group is uniform).
            let rest = (lo..lo + n)
                .find(|i| !sac.whole(*i))
                .map_or(0, |i| layer_saved(cfg, s, sac, i, b, seq));
            w(whole) * input + w(n - whole) * rest
        })
        .fold(0u128, u128::saturating_add)
}

/// The largest layer recomputed in backward under `sac`: a whole
/// checkpointed layer's full set; under the op policy what the policy did
/// not save (the saved outputs are reused, not recomputed).
pub fn recompute_wide(cfg: &ModelConfig, s: &Setup, sac: SelectiveAc, layers: u64) -> u128 {
    let w = u128::from;
    cfg.layer_groups(0, layers)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(i, _)| {
            let full = w(layer_activation_bytes(cfg, s, i, s.batch, s.seq));
            match sac {
                SelectiveAc::Op => full.saturating_sub(op_layer_bytes(cfg, s, i, s.batch, s.seq)),
                SelectiveAc::EveryLayers(_) => full,
            }
        })
        .max()
        .unwrap_or(0)
}

/// Layers of the stage that keep autocast's weight copies saved (those not
/// checkpointed at all): none under the op policy (the casts are
/// recomputed), the layers between the k-th ones otherwise.
pub fn layers_saving_casts(sac: Option<SelectiveAc>, checkpointing: bool, layers: u64) -> u64 {
    match sac {
        _ if checkpointing => 0,
        None => layers,
        Some(SelectiveAc::Op) => 0,
        Some(SelectiveAc::EveryLayers(k)) => layers - layers / k.max(1),
    }
}

/// With activation offloading, the saved bytes that stay on the GPU: the
/// forward stash of [`OFFLOAD_STASH`] tensors, each at most the largest
/// tensor a layer saves (the layer input under full checkpointing; an MLP
/// intermediate otherwise), never more than what was saved. Norm
/// statistics and other tensors under 1 KiB stay too; they are small.
pub fn offloaded_wide(cfg: &ModelConfig, s: &Setup, saved: u128) -> u128 {
    let w = u128::from;
    let t = w(s.batch) * w(s.seq);
    let widest = if s.grad_checkpointing {
        w(cfg.hidden) * w(stream_bytes(cfg, s))
    } else {
        let f = cfg.moe.as_ref().map_or(cfg.intermediate, |m| {
            m.intermediate.max(m.shared_intermediate)
        });
        w(cfg.hidden.max(f).max(cfg.heads * cfg.head_dim)) * w(s.precision.act_bytes().max(4))
            + w(layer_norm_token_bytes(cfg, s))
    };
    (w(OFFLOAD_STASH) * t * widest).min(saved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;
    use crate::components::stage_activations_bytes;
    use crate::setup::Task;

    fn train(model: &str) -> (ModelConfig, Setup) {
        let cfg = catalogue::find(model).expect("model");
        let s = Setup {
            task: Task::Train,
            batch: 2,
            seq: 2048,
            ..Setup::default()
        };
        (cfg, s)
    }

    #[test]
    fn parse_and_print() {
        assert_eq!(SelectiveAc::parse("op"), Some(SelectiveAc::Op));
        assert_eq!(SelectiveAc::parse(" 2 "), Some(SelectiveAc::EveryLayers(2)));
        assert_eq!(SelectiveAc::parse("0"), Some(SelectiveAc::EveryLayers(1)));
        assert_eq!(SelectiveAc::parse("two"), None);
        assert_eq!(SelectiveAc::parse("-1"), None);
        assert_eq!(SelectiveAc::EveryLayers(3).to_string(), "3");
    }

    /// Selective sits between no checkpointing and full checkpointing;
    /// every layer checkpointed is full checkpointing.
    #[test]
    fn selective_sits_between_none_and_full() {
        let (cfg, s) = train("meta-llama/Llama-3.2-1B");
        let none = stage_activations_bytes(&cfg, &s, 1);
        let full = stage_activations_bytes(
            &cfg,
            &Setup {
                grad_checkpointing: true,
                ..s.clone()
            },
            1,
        );
        let with = |sac| {
            stage_activations_bytes(
                &cfg,
                &Setup {
                    selective_ac: Some(sac),
                    ..s.clone()
                },
                1,
            )
        };
        let op = with(SelectiveAc::Op);
        let every2 = with(SelectiveAc::EveryLayers(2));
        let every1 = with(SelectiveAc::EveryLayers(1));
        assert!(full < op && op < none, "{full} {op} {none}");
        assert!(full < every2 && every2 < none);
        assert_eq!(every1, full);
        // Every second of 16 layers checkpointed: half the layers save all.
        let per_layer = (none - full) / 16;
        assert!((every2 - full).abs_diff(8 * per_layer) < per_layer / 100);
    }
}
