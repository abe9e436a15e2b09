//! The software stack a setup runs on, where its generation changes the
//! memory: which transformers release builds the model and runs
//! `generate`.
//!
//! - **transformers before 4.36** kept the KV cache as a tuple of per-layer
//!   `(key, value)` tensors that each decoding step rebuilds:
//!   `LlamaAttention.forward` (transformers 4.35.2 `modeling_llama.py`)
//!   does `key_states = torch.cat([past_key_value[0], key_states], dim=2)`
//!   and returns a new tuple, while `greedy_search` (`generation/utils.py`)
//!   still holds the previous step's `past_key_values` in `model_kwargs`
//!   until the forward returns: at the end of every step two caches are
//!   alive. 4.36 introduced `DynamicCache` (`cache_utils.py`), which
//!   appends to the one cache in place of the old. The same releases run
//!   the prompt pass through the LM head for every position (no
//!   `logits_to_keep`), and Llama and Mistral upcast those logits to fp32
//!   (`logits = logits.float()` in `LlamaForCausalLM.forward`, 4.35.2).
//! - **transformers before 5** loaded weights in fp32 unless told
//!   otherwise: `from_pretrained`'s `torch_dtype` "If not specified — the
//!   model will get loaded in `torch.float` (fp32)" (4.35.2
//!   `modeling_utils.py`); transformers 5 defaults to `dtype="auto"`, the
//!   checkpoint's own dtype (5.24 `PreTrainedModel.from_pretrained`).
//!   Without `--precision`, such a stack is estimated in fp32.
//! - **LitGPT** (`litgpt`, Lightning-AI/litgpt 0.5.13; the same code since
//!   lit-gpt of October 2023) runs its own model code, not transformers':
//!   its LoRA loop calls `model(input_ids, lm_head_chunk_size=128)` and
//!   `chunked_cross_entropy` (`litgpt/finetune/lora.py`, `litgpt/utils.py`),
//!   so the head writes 128-token chunks in the activation dtype (full
//!   fine-tuning, `finetune/full.py`, writes them whole) and the loss never
//!   upcasts them to fp32 ([`crate::components::training_logits_bytes`]);
//!   its MLPs call the fused `F.gelu(x, approximate="tanh")` where
//!   transformers' `gelu_new` is composite (`GptNeoxMLP.forward`,
//!   `litgpt/model.py`); its LoRA (`litgpt/lora.py`, `LoRALinear`,
//!   `LoRAQKVLinear`) keeps 16-bit adapters on a fused q/k/v linear with
//!   `lora_dropout` 0.05; and `--quantize bnb.*` (Lightning's
//!   `BitsandbytesPrecision`) replaces every `nn.Linear`, the LM head's
//!   included, which LitGPT never ties to the embedding.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::components::kv_cache_bytes;
use crate::model::ModelConfig;
use crate::setup::Setup;

/// The software stack of a setup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stack {
    /// Hugging Face transformers of this (major, minor) release.
    Transformers((u64, u64)),
    /// The default: the current transformers (5.x).
    #[default]
    Current,
    /// LitGPT's own model code and fine-tuning loop.
    LitGpt,
}

impl Stack {
    /// `transformers` (the current release), `transformers@MAJOR.MINOR[.PATCH]`
    /// or `litgpt`.
    pub fn parse(s: &str) -> Option<Stack> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("litgpt") {
            return Some(Stack::LitGpt);
        }
        let (name, version) = match s.split_once('@') {
            Some((n, v)) => (n, Some(v)),
            None => (s, None),
        };
        if !name.eq_ignore_ascii_case("transformers") {
            return None;
        }
        let Some(v) = version else {
            return Some(Stack::Current);
        };
        let mut parts = v.trim().split('.');
        let major: u64 = parts.next()?.parse().ok()?;
        let minor: u64 = parts.next()?.parse().ok()?;
        // A patch level, if any, must be a number; it changes nothing here.
        if let Some(p) = parts.next() {
            p.parse::<u64>().ok()?;
        }
        if parts.next().is_some() || !(1..=99).contains(&major) || minor > 999 {
            return None;
        }
        Some(Stack::Transformers((major, minor)))
    }

    fn version(self) -> Option<(u64, u64)> {
        match self {
            Stack::Transformers(v) => Some(v),
            Stack::Current | Stack::LitGpt => None,
        }
    }

    /// LitGPT's model code and fine-tuning loop.
    pub fn litgpt(self) -> bool {
        self == Stack::LitGpt
    }

    /// Decoding keeps the cache as a tuple rebuilt each step (before 4.36).
    pub fn tuple_cache(self) -> bool {
        self.version().is_some_and(|v| v < (4, 36))
    }

    /// `from_pretrained` loads fp32 unless a dtype is given (before 5).
    pub fn fp32_default(self) -> bool {
        self.version().is_some_and(|v| v < (5, 0))
    }
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stack::Transformers((a, b)) => write!(f, "transformers@{a}.{b}"),
            Stack::Current => f.write_str("transformers"),
            Stack::LitGpt => f.write_str("litgpt"),
        }
    }
}

impl Serialize for Stack {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Stack {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let s = String::deserialize(de)?;
        Stack::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "stack {s:?}: expected transformers, transformers@MAJOR.MINOR or litgpt"
            ))
        })
    }
}

/// The versions with `stack`'s transformers release as the transformers pin
/// (given on the command line, it wins over one read from a file).
pub fn with_stack_pin(
    v: &crate::versions::Versions,
    stack: Option<Stack>,
) -> crate::versions::Versions {
    let Some((major, minor)) = stack.and_then(Stack::version) else {
        return v.clone();
    };
    let mut out = crate::versions::Versions {
        pins: vec![crate::versions::Pinned {
            package: "transformers".into(),
            version: format!("{major}.{minor}"),
            from: "--stack".into(),
        }],
    };
    out.fill_from(v.clone());
    out
}

/// The stack a transformers pin names (`4.35.2` → `transformers@4.35`).
pub fn from_versions(v: &crate::versions::Versions) -> Option<Stack> {
    let pin = v.get("transformers")?;
    Stack::parse(&format!(
        "transformers@{}",
        pin.version.trim().trim_start_matches(['v', '='])
    ))
}

/// What a decoding step holds beside the cache: under a tuple cache the
/// previous step's whole cache (one token shorter), else `DynamicCache`'s
/// `torch.cat` copy of one layer ([`crate::components::cache_growth_bytes`]).
pub fn decode_cache_temporaries(cfg: &ModelConfig, s: &Setup, tokens: u64) -> u64 {
    if s.stack.tuple_cache() {
        kv_cache_bytes(cfg, s, tokens.saturating_sub(1))
    } else {
        crate::components::cache_growth_bytes(cfg, s, tokens)
    }
}

/// The previous step's cache during the first decoding step under a tuple
/// cache: the prompt's. GPT-2's prompt keys and values are views of its
/// fused `c_attn` output (4.35.2 `GPT2Attention.forward`: `query, key, value
/// = self.c_attn(hidden_states).split(…)`, `present = (key, value)`), so
/// that cache holds the queries' storage too until the first step rebuilds
/// it with `torch.cat` (checked against the CPU oracle running 4.35.2:
/// GPT-2, 16 × 512 + 64, 0.14 GiB).
pub fn first_step_previous_cache_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let prompt = kv_cache_bytes(cfg, s, s.seq);
    if cfg.model_type != Arch::Gpt2 {
        return prompt;
    }
    let kv = u128::from(cfg.kv_heads * cfg.head_dim);
    let q = u128::from(cfg.heads * cfg.head_dim);
    crate::model::sat(u128::from(prompt) * (q + 2 * kv) / (2 * kv).max(1))
}

/// Does the model's forward upcast its logits to fp32 (a copy)? Llama's
/// and Mistral's under transformers before 4.36; `.float()` of fp32
/// logits returns them.
fn upcasts(cfg: &ModelConfig, s: &Setup) -> bool {
    matches!(cfg.model_type, Arch::Llama | Arch::Mistral) && s.precision.act_bytes() < 4
}

/// The prompt's logits at every position, `per` bytes each.
fn all_positions(cfg: &ModelConfig, s: &Setup, per: u64) -> u64 {
    crate::model::sat(
        u128::from(s.batch) * u128::from(s.seq) * u128::from(cfg.vocab) * u128::from(per),
    )
}

/// Logits of the prompt pass before `generate` kept only the last
/// position: every position's in the activation dtype, and the fp32
/// upcast beside them where the model makes one. `None` for the current
/// code (the caller's own one-position logits apply).
pub fn prompt_logits_bytes(cfg: &ModelConfig, s: &Setup) -> Option<u64> {
    if !s.stack.tuple_cache() || s.new_tokens == 0 || cfg.encoder {
        return None;
    }
    let upcast = if upcasts(cfg, s) { 4 } else { 0 };
    Some(all_positions(cfg, s, s.precision.act_bytes() + upcast))
}

/// What the prompt pass's output still holds during the first decoding
/// step under a tuple cache: `greedy_search` rebinds `outputs` only when
/// the next forward returns, so the prompt's logits (fp32 where upcast,
/// else in the activation dtype) live through that step beside both caches.
pub fn held_prompt_logits_bytes(cfg: &ModelConfig, s: &Setup) -> Option<u64> {
    prompt_logits_bytes(cfg, s)?;
    let per = if upcasts(cfg, s) {
        4
    } else {
        s.precision.act_bytes()
    };
    Some(all_positions(cfg, s, per))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_versions() {
        assert_eq!(Stack::parse("transformers"), Some(Stack::Current));
        assert_eq!(
            Stack::parse("transformers@4.35.2"),
            Some(Stack::Transformers((4, 35)))
        );
        assert_eq!(
            Stack::parse("Transformers@4.36"),
            Some(Stack::Transformers((4, 36)))
        );
        assert_eq!(Stack::parse(" LitGPT "), Some(Stack::LitGpt));
        assert_eq!(Stack::LitGpt.to_string(), "litgpt");
        assert!(!Stack::LitGpt.tuple_cache() && !Stack::LitGpt.fp32_default());
        for bad in [
            "litgpt@0.5",
            "lit-gpt",
            "transformers@4",
            "transformers@x.1",
            "transformers@4.35.2.1",
            "transformers@4.35.x",
            "transformers@0.1",
            "",
        ] {
            assert_eq!(Stack::parse(bad), None, "{bad}");
        }
        let old = Stack::parse("transformers@4.35").unwrap_or_default();
        assert!(old.tuple_cache() && old.fp32_default());
        let four = Stack::parse("transformers@4.57").unwrap_or_default();
        assert!(!four.tuple_cache() && four.fp32_default());
        assert!(!Stack::Current.tuple_cache() && !Stack::Current.fp32_default());
        assert_eq!(old.to_string(), "transformers@4.35");
    }
}
