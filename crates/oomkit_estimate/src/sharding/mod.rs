//! Sharded data parallelism: what DeepSpeed ZeRO-1/2/3 ([`zero`]) and
//! PyTorch FSDP1/FSDP2 ([`fsdp`]) keep on each GPU beyond the sharded
//! model states — communication buckets, gathered parameters, persistent
//! parameters, flat gradient buffers — and what the caching allocator
//! reserves for them.
//!
//! [`Sharding`] holds the framework and its settings (DeepSpeed's
//! `zero_optimization` keys, with DeepSpeed's defaults), [`states`] the
//! per-GPU result the estimate's phases use. Without ZeRO or FSDP it is the
//! replicated (or tensor/pipeline-split) model states of
//! [`crate::components::sharded_states`], unchanged.

pub mod fsdp;
pub mod zero;

use serde::{Deserialize, Serialize};

use crate::components as c;
use crate::knob::Knob;
use crate::model::ModelConfig;
use crate::setup::{Precision, Setup};

/// Which implementation shards the model states.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Framework {
    /// DeepSpeed ZeRO (`--zero 1|2|3`).
    #[default]
    Deepspeed,
    /// PyTorch `FullyShardedDataParallel` (FSDP1, flat parameters).
    Fsdp1,
    /// PyTorch `fully_shard` (FSDP2, per-parameter DTensor shards).
    Fsdp2,
}

/// A DeepSpeed element count that Hugging Face's integration may leave as
/// `"auto"`: transformers' `HfTrainerDeepSpeedConfig.trainer_config_finalize`
/// (integrations/deepspeed.py) fills `reduce_bucket_size` with hidden²,
/// `stage3_prefetch_bucket_size` with ⌊0.9·hidden²⌋ and
/// `stage3_param_persistence_threshold` with 10·hidden.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// This many elements.
    Elements(u64),
    /// Hugging Face's `"auto"`: from the model's hidden size.
    Auto,
}

impl Count {
    /// Parses `5e8`, `500000000`, `5_0000_0000` or `auto` (what a DeepSpeed
    /// JSON and the flags accept). Fractions, negatives and values beyond
    /// 2^60 are refused.
    pub fn parse(s: &str) -> Option<Count> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Some(Count::Auto);
        }
        let t: String = t.chars().filter(|c| *c != '_').collect();
        if let Ok(n) = t.parse::<u64>() {
            return (n <= 1 << 60).then_some(Count::Elements(n));
        }
        let f: f64 = t.parse().ok()?;
        if !f.is_finite() || f < 0.0 || f.fract() != 0.0 || f > (1u64 << 60) as f64 {
            return None;
        }
        Some(Count::Elements(f as u64))
    }

    /// The elements, `auto` resolved as `hidden_rule` does.
    pub fn get(self, hidden_rule: impl Fn() -> u64) -> u64 {
        match self {
            Count::Elements(n) => n,
            Count::Auto => hidden_rule(),
        }
    }
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Count::Elements(n) => write!(f, "{n}"),
            Count::Auto => f.write_str("auto"),
        }
    }
}

impl std::str::FromStr for Count {
    type Err = String;
    fn from_str(s: &str) -> Result<Count, String> {
        Count::parse(s).ok_or_else(|| {
            format!("{s:?} is not an element count (an integer such as 500000000 or 5e8, or auto)")
        })
    }
}

impl Serialize for Count {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            Count::Elements(n) => ser.serialize_u64(*n),
            Count::Auto => ser.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Count, D::Error> {
        let v = serde_json::Value::deserialize(de)?;
        let text = match &v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        Count::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("bad count {text}")))
    }
}

/// DeepSpeed's defaults, deepspeed/runtime/zero/config.py
/// (`DeepSpeedZeroConfig`, DeepSpeed 0.19.6): `reduce_bucket_size` 5e8,
/// `stage3_prefetch_bucket_size` 5e7, `stage3_param_persistence_threshold`
/// 1e5, `stage3_max_live_parameters` 1e9, `stage3_max_reuse_distance` 1e9,
/// `sub_group_size` 1e9, `contiguous_gradients` true, `overlap_comm` true
/// for stage 3 and false otherwise (`overlap_comm_valid`).
pub mod defaults {
    /// `reduce_bucket_size`.
    pub const REDUCE_BUCKET: u64 = 500_000_000;
    /// `stage3_prefetch_bucket_size`.
    pub const PREFETCH_BUCKET: u64 = 50_000_000;
    /// `stage3_param_persistence_threshold`.
    pub const PERSISTENCE_THRESHOLD: u64 = 100_000;
    /// `stage3_max_live_parameters`.
    pub const MAX_LIVE: u64 = 1_000_000_000;
    /// `stage3_max_reuse_distance`.
    pub const MAX_REUSE_DISTANCE: u64 = 1_000_000_000;
    /// `sub_group_size`.
    pub const SUB_GROUP: u64 = 1_000_000_000;
}

/// The sharding framework and its settings (the setup's `sharding`; JSON
/// rows may leave any field out for its default).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sharding {
    /// DeepSpeed (with `--zero`) or FSDP (with `--fsdp`).
    pub framework: Framework,
    /// `reduce_bucket_size` (elements): the contiguous-gradient (IPG) bucket.
    pub reduce_bucket: Count,
    /// `stage3_prefetch_bucket_size` (elements).
    pub prefetch_bucket: Count,
    /// `stage3_param_persistence_threshold` (elements): smaller parameters
    /// stay gathered on every GPU.
    pub persistence_threshold: Count,
    /// `stage3_max_live_parameters` (elements): a cap on prefetching.
    pub max_live: u64,
    /// `stage3_max_reuse_distance` (elements): a parameter used again within
    /// this many elements is not released.
    pub max_reuse_distance: u64,
    /// `sub_group_size` (elements): ZeRO-3 steps the optimizer one sub-group
    /// at a time.
    pub sub_group: u64,
    /// `contiguous_gradients`.
    pub contiguous_gradients: bool,
    /// `overlap_comm`; `None` is DeepSpeed's default (on for stage 3 only).
    pub overlap_comm: Option<bool>,
}

impl Default for Sharding {
    fn default() -> Sharding {
        Sharding {
            framework: Framework::Deepspeed,
            reduce_bucket: Count::Elements(defaults::REDUCE_BUCKET),
            prefetch_bucket: Count::Elements(defaults::PREFETCH_BUCKET),
            persistence_threshold: Count::Elements(defaults::PERSISTENCE_THRESHOLD),
            max_live: defaults::MAX_LIVE,
            max_reuse_distance: defaults::MAX_REUSE_DISTANCE,
            sub_group: defaults::SUB_GROUP,
            contiguous_gradients: true,
            overlap_comm: None,
        }
    }
}

impl Sharding {
    /// DeepSpeed with DeepSpeed's defaults (left out of a setup's JSON).
    pub fn is_default(&self) -> bool {
        *self == Sharding::default()
    }

    /// Is this FSDP (either version)?
    pub fn fsdp(&self) -> bool {
        matches!(self.framework, Framework::Fsdp1 | Framework::Fsdp2)
    }
}

/// The sharding settings as a front end parsed them (`None`: not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardingFlags {
    /// FSDP's version (1 or 2; `--fsdp` alone is FSDP2).
    pub fsdp_version: Option<u8>,
    /// `reduce_bucket_size`.
    pub reduce_bucket: Option<Count>,
    /// `stage3_prefetch_bucket_size`.
    pub prefetch_bucket: Option<Count>,
    /// `stage3_param_persistence_threshold`.
    pub persistence_threshold: Option<Count>,
    /// `stage3_max_live_parameters`.
    pub max_live: Option<Count>,
    /// `stage3_max_reuse_distance`.
    pub max_reuse_distance: Option<Count>,
    /// `sub_group_size`.
    pub sub_group: Option<Count>,
    /// `overlap_comm`.
    pub overlap_comm: Option<bool>,
    /// `contiguous_gradients`.
    pub contiguous_gradients: Option<bool>,
}

impl ShardingFlags {
    /// The DeepSpeed-only knobs given, in the order errors name them.
    pub fn deepspeed_knobs(&self) -> Vec<Knob> {
        [
            (Knob::ReduceBucketSize, self.reduce_bucket.is_some()),
            (Knob::PrefetchBucketSize, self.prefetch_bucket.is_some()),
            (
                Knob::ParamPersistenceThreshold,
                self.persistence_threshold.is_some(),
            ),
            (Knob::MaxLiveParameters, self.max_live.is_some()),
            (Knob::MaxReuseDistance, self.max_reuse_distance.is_some()),
            (Knob::SubGroupSize, self.sub_group.is_some()),
            (Knob::OverlapComm, self.overlap_comm.is_some()),
            (
                Knob::ContiguousGradients,
                self.contiguous_gradients.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(k, given)| given.then_some(k))
        .collect()
    }

    /// Every knob given (for [`crate::setup::Given`]).
    pub fn knobs(&self) -> Vec<Knob> {
        let mut v = self.deepspeed_knobs();
        if self.fsdp_version.is_some() {
            v.push(Knob::FsdpVersion);
        }
        v
    }

    /// The setup's [`Sharding`]: `fsdp` picks FSDP (version 2 unless
    /// given), the rest DeepSpeed's keys over its defaults. The three counts
    /// that Hugging Face may leave `auto` keep it; the others need a number.
    pub fn resolve(&self, fsdp: bool) -> Result<Sharding, crate::setup::SetupError> {
        let d = Sharding::default();
        if let Some(k) = self.deepspeed_knobs().first().filter(|_| fsdp) {
            return Err(crate::setup::SetupError::Conflict(format!(
                "⟨{}⟩ is a DeepSpeed setting, not FSDP's: drop it, or use ⟨zero⟩ 3 instead of ⟨fsdp⟩",
                k.key()
            )));
        }
        if self.fsdp_version.is_some() && !fsdp {
            return Err(crate::setup::SetupError::Conflict(
                "⟨fsdp-version⟩ needs ⟨fsdp⟩".into(),
            ));
        }
        let framework = match (fsdp, self.fsdp_version) {
            (false, _) => Framework::Deepspeed,
            (true, Some(1)) => Framework::Fsdp1,
            (true, None | Some(2)) => Framework::Fsdp2,
            (true, Some(_)) => {
                return Err(crate::setup::SetupError::Invalid(
                    "⟨fsdp-version⟩ must be 1 or 2".into(),
                ));
            }
        };
        let number = |c: Option<Count>, knob: Knob, default: u64| match c {
            None => Ok(default),
            Some(Count::Elements(n)) => Ok(n),
            Some(Count::Auto) => Err(crate::setup::SetupError::Invalid(format!(
                "⟨{}⟩ takes a number of elements; only the bucket sizes and the persistence threshold accept auto",
                knob.key()
            ))),
        };
        Ok(Sharding {
            framework,
            reduce_bucket: self.reduce_bucket.unwrap_or(d.reduce_bucket),
            prefetch_bucket: self.prefetch_bucket.unwrap_or(d.prefetch_bucket),
            persistence_threshold: self
                .persistence_threshold
                .unwrap_or(d.persistence_threshold),
            max_live: number(self.max_live, Knob::MaxLiveParameters, d.max_live)?,
            max_reuse_distance: number(
                self.max_reuse_distance,
                Knob::MaxReuseDistance,
                d.max_reuse_distance,
            )?,
            sub_group: number(self.sub_group, Knob::SubGroupSize, d.sub_group)?,
            contiguous_gradients: self.contiguous_gradients.unwrap_or(d.contiguous_gradients),
            overlap_comm: self.overlap_comm,
        })
    }
}

/// What the sharded model states take on the busiest GPU, per phase.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sharded {
    /// Parameters on the GPU in every phase: the local shards (or the whole
    /// model without sharding) and parameters kept whole on every GPU.
    pub weights: u64,
    /// Gradients in the optimizer step (and through backward while
    /// accumulating).
    pub grads: u64,
    /// Gradient memory alive through every backward even without
    /// accumulation: flat buffers allocated once (DeepSpeed's gradient
    /// partition and reduce buckets).
    pub live_grads: u64,
    /// Optimizer states (with a fp32 master copy where the framework keeps one).
    pub optimizer: u64,
    /// Optimizer-step temporaries.
    pub step: u64,
    /// Parameters gathered whole when backward starts (at the loss).
    pub gathered: u64,
    /// A full-size gradient that exists before it is reduced and sharded
    /// (the LM head's, at the start of backward).
    pub unreduced_grad: u64,
    /// DeepSpeed: the LM head's backward, right after the loss's: (gradient
    /// buffers alive by then, the head's unreduced gradient). Its gradient
    /// is made there, after the loss's temporaries are freed, next to the
    /// 16-bit gradient of the logits; ZeRO-1/2 allocate their gradient
    /// partition and reduce buckets at this first reduction.
    pub head_backward: Option<(u64, u64)>,
    /// Gradients alive in the optimizer step when fewer than `grads`
    /// (ZeRO-1 frees the gradients outside its partition first).
    pub step_grads: Option<u64>,
    /// FSDP: the backward of the last block, where the units it needs are
    /// gathered: (gathered parameters, gradient temporaries).
    pub block_backward: Option<(u64, u64)>,
    /// Reserved but free: caching-allocator pools of the communication
    /// streams, which the compute stream cannot reuse.
    pub reserved_extra: u64,
}

/// Is this autocast mixed precision (fp32 model, half-precision compute)?
pub(crate) fn mixed(s: &Setup) -> bool {
    matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16)
}

/// Bytes of a gathered (compute-dtype) parameter: 16-bit under mixed
/// precision (DeepSpeed's fp16/bf16 module, FSDP's `param_dtype`), else the
/// precision's.
pub(crate) fn gathered_bytes(s: &Setup) -> u64 {
    if mixed(s) {
        2
    } else {
        s.precision.param_bytes()
    }
}

/// Per-GPU model states and sharding buffers for `s` ([`Sharded`]).
pub fn states(cfg: &ModelConfig, s: &Setup) -> Sharded {
    if s.zero == 0 {
        let (weights, grads, optimizer, step) = c::sharded_states(cfg, s);
        return Sharded {
            weights,
            grads,
            optimizer,
            step,
            ..Sharded::default()
        };
    }
    if s.sharding.fsdp() {
        fsdp::states(cfg, s)
    } else {
        zero::states(cfg, s)
    }
}

/// The LM head's parameters (the embedding's when tied): one module of
/// vocabulary × width.
pub(crate) fn head_params(cfg: &ModelConfig) -> u64 {
    let width = if cfg.embed_proj > 0 {
        cfg.embed_proj
    } else {
        cfg.hidden
    };
    cfg.vocab.saturating_mul(width).min(cfg.params())
}

/// The largest block's parameters.
pub(crate) fn largest_layer(cfg: &ModelConfig) -> u64 {
    cfg.layer_groups(0, cfg.layers)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(i, _)| cfg.layer_params(i))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_as_deepspeed_writes_them() {
        assert_eq!(Count::parse("5e8"), Some(Count::Elements(500_000_000)));
        assert_eq!(
            Count::parse("500000000"),
            Some(Count::Elements(500_000_000))
        );
        assert_eq!(Count::parse("5e8 "), Some(Count::Elements(500_000_000)));
        assert_eq!(Count::parse("AUTO"), Some(Count::Auto));
        assert_eq!(Count::parse("1.5"), None);
        assert_eq!(Count::parse("-1"), None);
        assert_eq!(Count::parse("1e300"), None);
        assert_eq!(Count::parse("nan"), None);
        assert_eq!(Count::parse(""), None);
        let c: Count = serde_json::from_str("5e8").unwrap_or(Count::Auto);
        assert_eq!(c, Count::Elements(500_000_000));
        let c: Count = serde_json::from_str("\"auto\"").unwrap_or(Count::Elements(0));
        assert_eq!(c, Count::Auto);
    }
}
