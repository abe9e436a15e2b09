//! The setup's checks: sizes and their limits ([`Setup::check_sizes`]),
//! combinations ([`Setup::validate`], [`Setup::check_given`]), the model's
//! shape ([`Setup::check_model`]), the size gate
//! ([`Setup::check_footprint`]), vLLM's arguments ([`Setup::check_vllm`]),
//! and the warnings that do not stop an estimate.

use std::borrow::Cow;

use super::types::*;
use crate::knob::{self, Knob};

/// The largest LoRA rank accepted (ranks in use are 4–256; a rank above
/// the layer widths adds nothing).
pub const MAX_LORA_RANK: u64 = 1 << 16;
/// The most gradient-accumulation steps accepted.
pub const MAX_GRAD_ACCUM: u64 = 1 << 20;

impl Setup {
    /// Checks that the parallel degrees fit the model: tensor parallelism
    /// splits attention heads, so `tp` must divide the query heads, and the
    /// KV heads must split evenly or be replicated (`tp` a multiple of them,
    /// vLLM's and Megatron's rule); pipeline stages need a layer each.
    pub fn check_model(&self, cfg: &crate::model::ModelConfig) -> Result<(), SetupError> {
        let tp = self.tp;
        if tp > 1 && !cfg.heads.is_multiple_of(tp) {
            return Err(SetupError::Invalid(format!(
                "⟨tp⟩ {tp} does not divide the {} attention heads of {}",
                cfg.heads, cfg.id
            )));
        }
        let kv = cfg.kv_heads.max(1);
        if tp > 1 && cfg.mla.is_none() && !kv.is_multiple_of(tp) && !tp.is_multiple_of(kv) {
            return Err(SetupError::Invalid(format!(
                "⟨tp⟩ {tp} neither divides nor is a multiple of the {kv} KV heads of {}",
                cfg.id
            )));
        }
        if self.pp > cfg.layers.max(1) {
            return Err(SetupError::Invalid(format!(
                "⟨pp⟩ {} is more than the {} layers of {}",
                self.pp, cfg.layers, cfg.id
            )));
        }
        let groups = self.gpus / tp.max(1);
        if self.task == Task::Infer && groups > cfg.layers.max(1) {
            return Err(SetupError::Conflict(format!(
                "⟨gpus⟩ {} makes {groups} groups of ⟨tp⟩ {tp} for the {} layers of {}: layers are placed whole (device_map=\"auto\" or pipeline stages), so use at most ⟨gpus⟩ {}",
                self.gpus,
                cfg.layers,
                cfg.id,
                cfg.layers.max(1) * tp.max(1)
            )));
        }
        if cfg.encoder && self.new_tokens > 0 {
            return Err(SetupError::Conflict(format!(
                "{} is an encoder ({}): it does not generate; drop ⟨new-tokens⟩",
                cfg.id, cfg.model_type
            )));
        }
        if self.method != Method::Full
            && self.task == Task::Train
            && crate::components::lora_params_wide(cfg, self) == 0
        {
            let mut names: Vec<&str> = cfg
                .layer_groups(0, cfg.layers)
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .flat_map(|(i, _)| cfg.layer_linears(i))
                .map(|(name, ..)| name)
                .filter(|n| *n != "router")
                .collect();
            names.dedup();
            return Err(SetupError::Conflict(format!(
                "⟨lora-targets⟩ {} matches no linear layer of {} (it has {}; or use all-linear): nothing would train",
                serde_json::to_string(&self.lora_targets).unwrap_or_default(),
                cfg.id,
                names.join(", ")
            )));
        }
        self.check_footprint(cfg)
    }

    /// The size gate: the model within its limits, then every term of the
    /// estimate that grows with the setup (LoRA adapters, activations of all
    /// layers with every micro-batch in flight, the KV cache, the prefill
    /// working set, logits) computed in 128 bits and bounded by
    /// [`crate::model::MAX_BYTES`] before the 64-bit formulas run. The
    /// bounds ignore parallel splits, so they hold for every GPU and for
    /// every step of the plan.
    pub fn check_footprint(&self, cfg: &crate::model::ModelConfig) -> Result<(), SetupError> {
        use crate::components as c;
        use crate::model::{MAX_BYTES, limits};
        self.check_sizes()?;
        cfg.check()?;
        let max = u128::from(MAX_BYTES);
        let too_large = |what, v: u128| {
            if v > max {
                Err(SetupError::TooLarge { what })
            } else {
                Ok(())
            }
        };
        if c::lora_params_wide(cfg, self) > u128::from(limits::PARAMS) {
            return Err(SetupError::TooLarge {
                what: "LoRA adapters",
            });
        }
        let whole = Setup {
            tp: 1,
            pp: 1,
            gpus: 1,
            grad_checkpointing: false,
            ..self.clone()
        };
        let tokens = self.seq + self.new_tokens;
        let long = Setup {
            seq: tokens,
            ..whole.clone()
        };
        too_large(
            "activations",
            c::stage_activations_wide(cfg, &long, self.pp.max(1)),
        )?;
        too_large("KV cache", c::kv_cache_wide(cfg, &long, tokens))?;
        too_large("prefill working set", c::prefill_transient_wide(cfg, &long))?;
        let logits = u128::from(self.batch) * u128::from(tokens) * u128::from(cfg.vocab) * 16;
        too_large("logits", logits)
    }

    /// Checks vLLM's arguments (`--engine vllm --task serve`) and the
    /// profile run they imply (one sequence of `max_num_batched_tokens`
    /// tokens) against the size gate.
    pub fn check_vllm(
        &self,
        cfg: &crate::model::ModelConfig,
        a: &crate::serve::VllmArgs,
    ) -> Result<(), SetupError> {
        if cfg.encoder {
            return Err(SetupError::Conflict(format!(
                "{} is an encoder ({}): it does not generate, so there is nothing to serve with vLLM",
                cfg.id, cfg.model_type
            )));
        }
        let u = a.gpu_memory_utilization;
        if !(u > 0.0 && u <= 1.0) {
            return Err(SetupError::Invalid(format!(
                "⟨gpu-memory-utilization⟩ must be in (0, 1], got {u}"
            )));
        }
        for (flag, v, max) in [
            ("⟨max-model-len⟩", a.max_model_len, 1u64 << 24),
            (
                "⟨max-num-batched-tokens⟩",
                a.max_num_batched_tokens,
                1 << 24,
            ),
            ("⟨max-num-seqs⟩", a.max_num_seqs, 1 << 20),
        ] {
            if v == 0 {
                return Err(SetupError::Invalid(format!("{flag} must be positive")));
            }
            if v > max {
                return Err(SetupError::Invalid(format!(
                    "{flag} {v} is above the limit of {max}"
                )));
            }
        }
        crate::serve::check_quant(cfg, self)?;
        self.check_model(cfg)?;
        crate::serve::profile_setup(self, a).check_model(cfg)
    }

    /// Checks the flags the user gave explicitly against each other and the
    /// task (see README "Validation"); `self` is the setup built from them
    /// (`zero` is the `--zero` given, else 3 with `--fsdp`).
    pub fn check_given(&self, g: &Given) -> Result<(), SetupError> {
        let na = |knob, applies_to, instead| SetupError::NotApplicable {
            knob,
            applies_to,
            instead,
        };
        if self.task == Task::Infer {
            if let Some(flag) = g.training_knob() {
                return Err(na(
                    flag,
                    "⟨task⟩ train",
                    "drop it, or add ⟨task⟩ train to estimate training",
                ));
            }
            if g.has(Knob::Method) && self.method != Method::Full {
                return Err(na(
                    Knob::Method,
                    "⟨task⟩ train",
                    "for quantized inference use ⟨quant⟩ (nf4, int8, …) without ⟨method⟩",
                ));
            }
        }
        if let Some(flag) = g.image_knob() {
            return Err(na(
                flag,
                "image models only (see ⟨list-models⟩)",
                "drop it for a text model",
            ));
        }
        if g.serve() != g.vllm() {
            return Err(SetupError::Conflict(
                "serving is modelled for vLLM only: use ⟨engine⟩ vllm ⟨task⟩ serve".into(),
            ));
        }
        if let Some(flag) = g.vllm_knob().filter(|_| !g.serve()) {
            return Err(na(
                flag,
                "⟨engine⟩ vllm ⟨task⟩ serve",
                "drop it, or add ⟨engine⟩ vllm ⟨task⟩ serve to estimate vLLM's pool",
            ));
        }
        if g.has(Knob::Stack) && g.engine != crate::options::Engine::Hf {
            return Err(na(
                Knob::Stack,
                "Hugging Face transformers (⟨engine⟩ hf)",
                "drop it for this engine",
            ));
        }
        if g.has(Knob::KvDtype) && self.task == Task::Train {
            return Err(na(
                Knob::KvDtype,
                "inference (⟨task⟩ infer or serve)",
                "training keeps no KV cache: drop it",
            ));
        }
        if g.serve() && !g.has(Knob::Gpu) {
            return Err(SetupError::Conflict(
                "⟨task⟩ serve needs ⟨gpu⟩ (vLLM sizes its KV pool from the GPU's memory)".into(),
            ));
        }
        if self.task == Task::Train && g.has(Knob::NewTokens) && self.new_tokens > 0 {
            return Err(na(
                Knob::NewTokens,
                "⟨task⟩ infer (generation)",
                "training reads ⟨seq⟩ tokens per sample: drop ⟨new-tokens⟩",
            ));
        }
        if self.method == Method::Full {
            for (given, flag) in [
                (g.has(Knob::LoraRank), Knob::LoraRank),
                (g.has(Knob::LoraTargets), Knob::LoraTargets),
            ] {
                if given {
                    return Err(na(
                        flag,
                        "⟨method⟩ lora or qlora",
                        "add ⟨method⟩ lora (or qlora), or drop it",
                    ));
                }
            }
        }
        if g.has(Knob::LoraTargets) && self.lora_targets == LoraTargets::Names(Vec::new()) {
            return Err(SetupError::Conflict(
                "⟨lora-targets⟩ is empty: name the projections to adapt (q,v or q,k,v,o,gate,up,down) or use all-linear".into(),
            ));
        }
        if self.method == Method::Qlora
            && g.has(Knob::Quant)
            && !matches!(self.quant, Quant::Nf4 | Quant::Nf4Dq)
        {
            return Err(SetupError::Conflict(format!(
                "⟨method⟩ qlora quantizes the frozen base to NF4, not ⟨quant⟩ {q}: use ⟨quant⟩ nf4 or nf4-dq (or drop ⟨quant⟩), or ⟨method⟩ lora ⟨quant⟩ {q} to train LoRA on that quantized base",
                q = self.quant.name()
            )));
        }
        if g.has(Knob::Fsdp) && g.has(Knob::Zero) && self.zero != 3 {
            return Err(SetupError::Conflict(format!(
                "⟨fsdp⟩ (full shard) is ZeRO stage 3, not ⟨zero⟩ {}: drop ⟨zero⟩, or drop ⟨fsdp⟩ to use DeepSpeed ZeRO-{}",
                self.zero, self.zero
            )));
        }
        Ok(())
    }

    /// Warnings that do not stop the estimate: inputs longer than the
    /// model's context (`max_position_embeddings` and its aliases), and two
    /// techniques that do not combine ([`crate::fit::conflict`]); settings
    /// in words.
    pub fn warnings(&self, cfg: &crate::model::ModelConfig) -> Vec<String> {
        self.warnings_named(cfg, &|k| Cow::Borrowed(k.words()))
    }

    /// [`Setup::warnings`] with each setting named by `name` (the binary:
    /// its flag).
    pub fn warnings_named<'a>(
        &self,
        cfg: &crate::model::ModelConfig,
        name: &dyn Fn(Knob) -> Cow<'a, str>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(ctx) = cfg.max_positions {
            let (tokens, what) = match self.task {
                Task::Infer if self.new_tokens > 0 => (
                    self.seq.saturating_add(self.new_tokens),
                    format!(
                        "⟨seq⟩ {} + ⟨new-tokens⟩ {} = {} tokens",
                        self.seq,
                        self.new_tokens,
                        self.seq.saturating_add(self.new_tokens)
                    ),
                ),
                _ => (self.seq, format!("⟨seq⟩ {}", self.seq)),
            };
            if tokens > ctx {
                out.push(format!(
                    "{} is beyond the {ctx}-token context of {} (max_position_embeddings): the model was not trained for it and may fail or degrade; the estimate is for the length given",
                    knob::fill(&what, name),
                    cfg.id
                ));
            }
        }
        if cfg.resolved_to.is_some()
            && self.quant == Quant::None
            && let Some(q) = crate::catalogue::quantized_part(&cfg.id)
        {
            out.push(knob::fill(
                &format!(
                    "{} looks quantized before upload ({q}): the estimate is for 16-bit weights; set ⟨quant⟩ to the checkpoint's format",
                    cfg.id
                ),
                name,
            ));
        }
        if let Some(c) = crate::fit::conflict(self) {
            out.push(format!(
                "{} and {} do not combine as usually set up: {} ({}); the estimate is for the setup given",
                c.a, c.b, c.why, c.source
            ));
        }
        out
    }

    /// Warnings that hold for transformers (training and `generate`) but
    /// not for vLLM: bitsandbytes leaves an MoE model's routed experts in 16
    /// bits under transformers 5 ([`crate::components::bnb_unquantized_experts_bytes`]).
    pub fn transformers_warnings(&self, cfg: &crate::model::ModelConfig) -> Vec<String> {
        let skipped = crate::components::bnb_unquantized_experts_bytes(cfg, self);
        if skipped == 0 {
            return Vec::new();
        }
        vec![format!(
            "bitsandbytes quantizes only nn.Linear layers, and transformers 5 keeps {}'s routed experts as fused parameters: they stay 16-bit ({} more than if they were quantized, as under transformers 4; bitsandbytes#1849)",
            cfg.id,
            oomkit_core::Bytes(skipped)
        )]
    }

    /// The size bounds alone (no model): what [`Setup::validate`] checks
    /// and [`Setup::check_model`] repeats for setups built in code.
    pub fn check_sizes(&self) -> Result<(), SetupError> {
        for (name, v) in [
            ("⟨batch⟩", self.batch),
            ("⟨seq⟩", self.seq),
            ("⟨grad-accum⟩", self.grad_accum),
        ] {
            if v == 0 {
                return Err(SetupError::Invalid(format!("{name} must be at least 1")));
            }
        }
        if self.method != Method::Full && self.lora_rank == 0 {
            return Err(SetupError::Invalid("⟨lora-rank⟩ must be at least 1".into()));
        }
        if self.lora_rank > MAX_LORA_RANK {
            return Err(SetupError::Invalid(format!(
                "⟨lora-rank⟩ {} is above the limit of {MAX_LORA_RANK}",
                self.lora_rank
            )));
        }
        if self.grad_accum > MAX_GRAD_ACCUM {
            return Err(SetupError::Invalid(format!(
                "⟨grad-accum⟩ {} is above the limit of {MAX_GRAD_ACCUM}",
                self.grad_accum
            )));
        }
        if !matches!(self.kv_bits, 4 | 8 | 16 | 32) {
            return Err(SetupError::Invalid(
                "KV-cache dtype must be 4, 8, 16 or 32 bits".into(),
            ));
        }
        // Keeps the token counts small enough that their products with the
        // model's (bounded) widths are checked in 128 bits by check_model.
        if self.seq > 1 << 24 || self.new_tokens > 1 << 24 || self.batch > 1 << 20 {
            return Err(SetupError::Invalid(
                "sizes out of range: ⟨seq⟩ and ⟨new-tokens⟩ at most 16,777,216, ⟨batch⟩ at most 1,048,576".into(),
            ));
        }
        if self.batch * (self.seq + self.new_tokens) > 1 << 32 {
            return Err(SetupError::Invalid("⟨batch⟩ × tokens is above 2^32".into()));
        }
        if self.gpus == 0 {
            return Err(SetupError::Invalid("⟨gpus⟩ must be at least 1".into()));
        }
        if self.tp == 0 || self.pp == 0 {
            return Err(SetupError::Invalid(
                "⟨tp⟩ and ⟨pp⟩ must be at least 1".into(),
            ));
        }
        if self.tp > 1 << 10 || self.pp > 1 << 10 || self.gpus > 1 << 20 {
            return Err(SetupError::Invalid(
                "⟨tp⟩ and ⟨pp⟩ at most 1,024, ⟨gpus⟩ at most 1,048,576".into(),
            ));
        }
        if !self.gpus.is_multiple_of(self.tp * self.pp) {
            return Err(SetupError::Invalid(format!(
                "⟨gpus⟩ {} is not a multiple of ⟨tp⟩ {} × ⟨pp⟩ {} (data-parallel degree = gpus / (tp × pp))",
                self.gpus, self.tp, self.pp
            )));
        }
        if self.zero > 3 {
            return Err(SetupError::Invalid("⟨zero⟩ must be 0, 1, 2 or 3".into()));
        }
        Ok(())
    }

    /// Checks sizes and combinations; QLoRA forces NF4 weights.
    pub fn validate(mut self) -> Result<Setup, SetupError> {
        self.check_sizes()?;
        if self.offload == Offload::Params && self.zero < 3 {
            return Err(SetupError::Invalid(
                "⟨offload⟩ params needs parameter sharding: ⟨zero⟩ 3 or ⟨fsdp⟩".into(),
            ));
        }
        if self.selective_ac.is_some() && self.grad_checkpointing {
            return Err(SetupError::Conflict(
                "selective checkpointing (⟨checkpointing⟩ selective) and full checkpointing (⟨grad-checkpointing⟩) are two modes: give one".into(),
            ));
        }
        if self.activation_offloading && !self.recomputes() {
            // torchtune's recipes refuse it: "enable_activation_offloading
            // should only be True when enable_activation_checkpointing is True".
            return Err(SetupError::Invalid(
                "⟨activation-offloading⟩ needs activation checkpointing (⟨checkpointing⟩ full or selective), as torchtune requires".into(),
            ));
        }
        if self.method == Method::Qlora && matches!(self.quant, Quant::None) {
            self.quant = Quant::Nf4;
        }
        if self.stack.litgpt() {
            // What is modelled of LitGPT: its fine-tuning loop on one GPU
            // per process in 16-bit or fp32 weights. Its bitsandbytes path
            // (Lightning's `BitsandbytesPrecision`) peaks 20–33 % above what
            // its weights and saved tensors explain in LitGPT's own
            // published tables (config_hub/finetune/README.md): refused
            // rather than estimated low.
            if self.task != Task::Train {
                return Err(SetupError::Conflict(
                    "⟨stack⟩ litgpt models LitGPT's fine-tuning (⟨task⟩ train); its generation is not modelled".into(),
                ));
            }
            if !matches!(self.quant, Quant::None) {
                return Err(SetupError::Conflict(
                    "⟨stack⟩ litgpt with a quantized base (LitGPT's --quantize bnb.*) is not modelled: drop ⟨method⟩ qlora/⟨quant⟩, or estimate the transformers stack".into(),
                ));
            }
            if self.drops_output {
                return Err(SetupError::Conflict(
                    "⟨trainer⟩ is Hugging Face's training loop; ⟨stack⟩ litgpt runs LitGPT's, which holds the logits through backward: give one".into(),
                ));
            }
            if self.zero > 0 || self.tp > 1 || self.pp > 1 {
                return Err(SetupError::Conflict(
                    "⟨stack⟩ litgpt is modelled without sharding or model parallelism: drop ⟨zero⟩/⟨fsdp⟩/⟨tp⟩/⟨pp⟩".into(),
                ));
            }
        }
        if self.kbit_upcast {
            if self.task != Task::Train
                || !matches!(self.quant, Quant::Int8 | Quant::Nf4 | Quant::Nf4Dq)
            {
                return Err(SetupError::Invalid(
                    "⟨kbit-upcast⟩ is PEFT's prepare_model_for_kbit_training on a bitsandbytes model: it needs ⟨task⟩ train with ⟨method⟩ qlora, or ⟨quant⟩ int8, nf4 or nf4-dq".into(),
                ));
            }
            self.grad_checkpointing = true;
        }
        if self.task == Task::Train && self.method == Method::Full && self.quant != Quant::None {
            return Err(SetupError::Invalid(
                "quantized weights cannot be fully fine-tuned: use ⟨method⟩ lora or qlora".into(),
            ));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    //! One accept and one refuse case per rule, on catalogue models:
    //! Llama-3.2-1B (32 query heads, 8 KV heads, 16 layers, 131072-token
    //! context) and BERT-base (an encoder).

    use super::*;
    use crate::knob::KnobSet;
    use crate::model::ModelConfig;
    use crate::options::{Engine, Workload};

    fn llama() -> ModelConfig {
        crate::catalogue::find("meta-llama/Llama-3.2-1B").expect("in the catalogue")
    }

    fn bert() -> ModelConfig {
        crate::catalogue::find("google-bert/bert-base-uncased").expect("in the catalogue")
    }

    fn train() -> Setup {
        Setup {
            task: Task::Train,
            ..Setup::default()
        }
    }

    fn lora() -> Setup {
        Setup {
            method: Method::Lora,
            ..train()
        }
    }

    fn given(task: Workload, engine: Engine, knobs: &[Knob]) -> Given {
        Given {
            knobs: knobs.iter().copied().collect::<KnobSet>(),
            task,
            engine,
        }
    }

    fn infer_given(knobs: &[Knob]) -> Given {
        given(Workload::Infer, Engine::Hf, knobs)
    }

    fn train_given(knobs: &[Knob]) -> Given {
        given(Workload::Train, Engine::Hf, knobs)
    }

    /// The error's message with the settings as `--flags`.
    fn says(r: Result<impl std::fmt::Debug, SetupError>) -> String {
        match r {
            Ok(v) => panic!("accepted: {v:?}"),
            Err(e) => e.message(&|k| Cow::Owned(format!("--{}", k.key()))),
        }
    }

    #[test]
    fn sizes_must_be_positive_and_bounded() {
        assert!(Setup::default().check_sizes().is_ok());
        for (s, msg) in [
            (
                Setup {
                    batch: 0,
                    ..Setup::default()
                },
                "--batch must be at least 1",
            ),
            (
                Setup {
                    seq: 0,
                    ..Setup::default()
                },
                "--seq must be at least 1",
            ),
            (
                Setup {
                    grad_accum: 0,
                    ..Setup::default()
                },
                "--grad-accum must be at least 1",
            ),
            (
                Setup {
                    lora_rank: 0,
                    ..lora()
                },
                "--lora-rank must be at least 1",
            ),
            (
                Setup {
                    lora_rank: MAX_LORA_RANK + 1,
                    ..lora()
                },
                "--lora-rank 65537 is above the limit",
            ),
            (
                Setup {
                    grad_accum: MAX_GRAD_ACCUM + 1,
                    ..train()
                },
                "--grad-accum 1048577 is above the limit",
            ),
            (
                Setup {
                    kv_bits: 12,
                    ..Setup::default()
                },
                "KV-cache dtype must be 4, 8, 16 or 32 bits",
            ),
            (
                Setup {
                    seq: (1 << 24) + 1,
                    ..Setup::default()
                },
                "sizes out of range",
            ),
            (
                Setup {
                    batch: (1 << 20) + 1,
                    ..Setup::default()
                },
                "sizes out of range",
            ),
            (
                Setup {
                    batch: 1 << 10,
                    seq: 1 << 23,
                    ..Setup::default()
                },
                "--batch × tokens is above 2^32",
            ),
            (
                Setup {
                    gpus: 0,
                    ..Setup::default()
                },
                "--gpus must be at least 1",
            ),
            (
                Setup {
                    tp: 0,
                    ..Setup::default()
                },
                "--tp and --pp must be at least 1",
            ),
            (
                Setup {
                    tp: 2048,
                    gpus: 2048,
                    ..Setup::default()
                },
                "--tp and --pp at most 1,024",
            ),
            (
                Setup {
                    gpus: 3,
                    tp: 2,
                    ..Setup::default()
                },
                "--gpus 3 is not a multiple of --tp 2 × --pp 1",
            ),
            (Setup { zero: 4, ..train() }, "--zero must be 0, 1, 2 or 3"),
        ] {
            let got = says(s.check_sizes());
            assert!(got.contains(msg), "{got:?} lacks {msg:?}");
        }
        // The edges themselves are accepted.
        for s in [
            Setup {
                lora_rank: MAX_LORA_RANK,
                ..lora()
            },
            Setup {
                seq: 1 << 24,
                ..Setup::default()
            },
            Setup {
                gpus: 6,
                tp: 2,
                pp: 3,
                ..Setup::default()
            },
            Setup {
                kv_bits: 4,
                ..Setup::default()
            },
        ] {
            assert!(s.check_sizes().is_ok(), "{s:?}");
        }
    }

    #[test]
    fn validate_applies_the_combination_rules() {
        // Parameter offload needs stage 3.
        let offload = Setup {
            offload: Offload::Params,
            ..train()
        };
        assert!(says(offload.clone().validate()).contains("--offload params needs"));
        assert!(Setup { zero: 3, ..offload }.validate().is_ok());
        // QLoRA means NF4, and keeps NF4 with double quantization.
        let q = Setup {
            method: Method::Qlora,
            ..train()
        };
        assert_eq!(q.clone().validate().map(|s| s.quant), Ok(Quant::Nf4));
        let dq = Setup {
            quant: Quant::Nf4Dq,
            ..q.clone()
        };
        assert_eq!(dq.validate().map(|s| s.quant), Ok(Quant::Nf4Dq));
        // kbit-upcast: training on a bitsandbytes base, and it turns on
        // checkpointing.
        let up = Setup {
            kbit_upcast: true,
            ..q
        };
        assert_eq!(up.validate().map(|s| s.grad_checkpointing), Ok(true));
        assert!(
            says(
                Setup {
                    kbit_upcast: true,
                    ..lora()
                }
                .validate()
            )
            .contains("--kbit-upcast is PEFT's prepare_model_for_kbit_training")
        );
        assert!(
            Setup {
                kbit_upcast: true,
                quant: Quant::Int4,
                ..lora()
            }
            .validate()
            .is_err()
        );
        // Quantized weights do not train in full.
        let full_int8 = Setup {
            quant: Quant::Int8,
            ..train()
        };
        assert!(says(full_int8.validate()).contains("cannot be fully fine-tuned"));
        assert!(
            Setup {
                quant: Quant::Int8,
                ..Setup::default()
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn parallel_degrees_must_fit_the_model() {
        let cfg = llama();
        let ok = Setup {
            tp: 8,
            gpus: 8,
            ..Setup::default()
        };
        assert!(ok.check_model(&cfg).is_ok());
        let heads = Setup {
            tp: 3,
            gpus: 3,
            ..Setup::default()
        };
        assert!(
            says(heads.check_model(&cfg)).contains("--tp 3 does not divide the 32 attention heads")
        );
        // 16 ways: the 8 KV heads do not split, but 16 is a multiple of
        // them, so each is replicated.
        let replicated = Setup {
            tp: 16,
            gpus: 16,
            ..Setup::default()
        };
        assert!(replicated.check_model(&cfg).is_ok());
        let mut odd = cfg.clone();
        odd.kv_heads = 6;
        odd.heads = 24;
        let kv = Setup {
            tp: 4,
            gpus: 4,
            ..Setup::default()
        };
        assert!(
            says(kv.check_model(&odd))
                .contains("neither divides nor is a multiple of the 6 KV heads")
        );
        let pp = Setup {
            pp: 17,
            gpus: 17,
            ..train()
        };
        assert!(says(pp.check_model(&cfg)).contains("--pp 17 is more than the 16 layers"));
        let pp_ok = Setup {
            pp: 16,
            gpus: 16,
            ..train()
        };
        assert!(pp_ok.check_model(&cfg).is_ok());
        // Inference places whole layers: at most one group per layer.
        let groups = Setup {
            gpus: 32,
            ..Setup::default()
        };
        assert!(says(groups.check_model(&cfg)).contains("use at most --gpus 16"));
        let dp = Setup {
            gpus: 32,
            ..train()
        };
        assert!(dp.check_model(&cfg).is_ok());
    }

    #[test]
    fn encoders_do_not_generate_and_lora_must_adapt_something() {
        let enc = Setup {
            new_tokens: 8,
            ..Setup::default()
        };
        assert!(says(enc.check_model(&bert())).contains("is an encoder"));
        assert!(enc.check_model(&llama()).is_ok());
        let none = Setup {
            lora_targets: LoraTargets::Names(vec!["nonexistent".into()]),
            ..lora()
        };
        assert!(says(none.check_model(&llama())).contains("matches no linear layer"));
        let all = Setup {
            lora_targets: LoraTargets::AllLinear,
            ..lora()
        };
        assert!(all.check_model(&llama()).is_ok());
    }

    #[test]
    fn footprints_beyond_an_exbibyte_are_refused() {
        let cfg = llama();
        assert!(Setup::default().check_footprint(&cfg).is_ok());
        // Eager attention materialises batch · heads · seq² scores:
        // 2^8 · 2^5 · 2^48 · 2 bytes = 2^62, beyond 2^60.
        let scores = Setup {
            attention: Attention::Eager,
            batch: 1 << 8,
            seq: 1 << 24,
            ..Setup::default()
        };
        assert!(
            matches!(
                scores.check_footprint(&cfg),
                Err(SetupError::TooLarge { .. })
            ),
            "{:?}",
            scores.check_footprint(&cfg)
        );
        // The same tokens through a flash kernel stay below it.
        let flash = Setup {
            attention: Attention::Flash,
            ..scores
        };
        assert!(
            flash.check_footprint(&cfg).is_ok(),
            "{:?}",
            flash.check_footprint(&cfg)
        );
    }

    #[test]
    fn vllm_arguments_are_bounded() {
        use crate::serve::VllmArgs;
        let cfg = llama();
        let s = Setup::default();
        let gpu = oomkit_core::gpus::find("h100-sxm").expect("a GPU");
        let args = VllmArgs::with_defaults(&crate::serve::VllmOptions::default(), &cfg, gpu);
        assert!(s.check_vllm(&cfg, &args).is_ok());
        for (f, msg) in [
            (
                (|a: &mut VllmArgs| a.gpu_memory_utilization = 1.5) as fn(&mut VllmArgs),
                "--gpu-memory-utilization must be in (0, 1]",
            ),
            (|a| a.gpu_memory_utilization = 0.0, "must be in (0, 1]"),
            (|a| a.max_model_len = 0, "--max-model-len must be positive"),
            (
                |a| a.max_num_batched_tokens = (1 << 24) + 1,
                "--max-num-batched-tokens 16777217 is above the limit",
            ),
            (
                |a| a.max_num_seqs = (1 << 20) + 1,
                "--max-num-seqs 1048577 is above the limit",
            ),
        ] {
            let mut bad = args.clone();
            f(&mut bad);
            let got = says(s.check_vllm(&cfg, &bad));
            assert!(got.contains(msg), "{got:?} lacks {msg:?}");
        }
        assert!(says(s.check_vllm(&bert(), &args)).contains("nothing to serve with vLLM"));
    }

    #[test]
    fn given_settings_must_belong_to_the_task() {
        let infer = Setup::default();
        assert!(infer.check_given(&infer_given(&[Knob::Gpu])).is_ok());
        // Training-only settings on inference.
        for k in TRAINING_KNOBS {
            let got = says(infer.check_given(&infer_given(&[*k])));
            assert!(
                got.starts_with(&format!("--{} applies to --task train", k.key())),
                "{got}"
            );
            assert!(
                train().check_given(&train_given(&[*k])).is_ok()
                    || *k == Knob::LoraRank
                    || *k == Knob::LoraTargets
            );
        }
        // A method for quantized inference.
        let m = Setup {
            method: Method::Qlora,
            ..infer.clone()
        };
        assert!(
            says(m.check_given(&infer_given(&[Knob::Method])))
                .contains("for quantized inference use --quant")
        );
        assert!(infer.check_given(&infer_given(&[Knob::Method])).is_ok());
        // Image settings on a text model.
        for k in IMAGE_KNOBS {
            let got = says(infer.check_given(&infer_given(&[*k])));
            assert!(got.contains("applies to image models only"), "{got}");
        }
        // KV dtype is inference's; new tokens are generation's.
        assert!(
            says(train().check_given(&train_given(&[Knob::KvDtype])))
                .contains("training keeps no KV cache")
        );
        assert!(infer.check_given(&infer_given(&[Knob::KvDtype])).is_ok());
        let nt = Setup {
            new_tokens: 5,
            ..train()
        };
        assert!(
            says(nt.check_given(&train_given(&[Knob::NewTokens]))).contains("drop --new-tokens")
        );
        let nt0 = Setup {
            new_tokens: 0,
            ..train()
        };
        assert!(nt0.check_given(&train_given(&[Knob::NewTokens])).is_ok());
    }

    #[test]
    fn serving_is_vllm_with_a_gpu() {
        let s = Setup::default();
        let serve = |engine, knobs: &[Knob]| given(Workload::Serve, engine, knobs);
        assert!(s.check_given(&serve(Engine::Vllm, &[Knob::Gpu])).is_ok());
        assert!(
            says(s.check_given(&serve(Engine::Hf, &[Knob::Gpu])))
                .contains("serving is modelled for vLLM only")
        );
        assert!(
            says(s.check_given(&given(Workload::Infer, Engine::Vllm, &[])))
                .contains("serving is modelled for vLLM only")
        );
        assert!(
            says(s.check_given(&serve(Engine::Vllm, &[]))).contains("--task serve needs --gpu")
        );
        for k in VLLM_KNOBS {
            let got = says(s.check_given(&infer_given(&[*k])));
            assert!(
                got.contains("applies to --engine vllm --task serve"),
                "{got}"
            );
            assert!(
                s.check_given(&serve(Engine::Vllm, &[Knob::Gpu, *k]))
                    .is_ok()
            );
        }
    }

    #[test]
    fn lora_settings_need_lora_and_qlora_needs_nf4() {
        for k in [Knob::LoraRank, Knob::LoraTargets] {
            assert!(
                says(train().check_given(&train_given(&[k])))
                    .contains("applies to --method lora or qlora")
            );
            assert!(lora().check_given(&train_given(&[k])).is_ok());
        }
        let empty = Setup {
            lora_targets: LoraTargets::Names(Vec::new()),
            ..lora()
        };
        assert!(
            says(empty.check_given(&train_given(&[Knob::LoraTargets])))
                .contains("--lora-targets is empty")
        );
        let q = |quant| Setup {
            method: Method::Qlora,
            quant,
            ..train()
        };
        assert!(
            says(q(Quant::Int8).check_given(&train_given(&[Knob::Method, Knob::Quant])))
                .contains("not --quant int8")
        );
        assert!(
            q(Quant::Nf4Dq)
                .check_given(&train_given(&[Knob::Method, Knob::Quant]))
                .is_ok()
        );
        // A quantization from the checkpoint (not given) is not a conflict.
        assert!(
            q(Quant::Fp8)
                .check_given(&train_given(&[Knob::Method]))
                .is_ok()
        );
    }

    #[test]
    fn fsdp_is_stage_3() {
        let s = |zero| Setup { zero, ..train() };
        let g = train_given(&[Knob::Fsdp, Knob::Zero]);
        assert!(s(3).check_given(&g).is_ok());
        assert!(
            says(s(2).check_given(&g))
                .contains("--fsdp (full shard) is ZeRO stage 3, not --zero 2")
        );
        assert!(s(2).check_given(&train_given(&[Knob::Zero])).is_ok());
    }

    #[test]
    fn warnings_name_inputs_beyond_the_context() {
        let cfg = llama();
        assert!(Setup::default().warnings(&cfg).is_empty());
        let long = Setup {
            seq: 131_072,
            new_tokens: 1,
            ..Setup::default()
        };
        let w = long.warnings_named(&cfg, &|k| Cow::Owned(format!("--{}", k.key())));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with(
            "--seq 131072 + --new-tokens 1 = 131073 tokens is beyond the 131072-token context"
        ));
        let at = Setup {
            seq: 131_072,
            ..Setup::default()
        };
        assert!(at.warnings(&cfg).is_empty());
    }
}
