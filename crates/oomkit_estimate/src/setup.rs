//! What the user runs: task, method, precision, quantization, optimizer and
//! input sizes. Validated here so the formulas can trust it.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::knob::{self, Knob};

/// What the model does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// `model.generate` (or one forward pass for encoders).
    Infer,
    /// Forward, backward and an optimizer step.
    Train,
}

/// Which parameters train.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Every parameter.
    Full,
    /// Frozen base, trainable low-rank adapters.
    Lora,
    /// LoRA on an NF4-quantized base.
    Qlora,
}

/// Numeric precision of weights, gradients, optimizer states and activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    /// Everything fp32.
    Fp32,
    /// Pure fp16: weights, grads and states in fp16.
    Fp16,
    /// Pure bf16 (torchtune/LitGPT "bf16-true").
    Bf16,
    /// fp32 weights and states, fp16 autocast activations.
    MixedFp16,
    /// fp32 weights and states, bf16 autocast activations.
    MixedBf16,
}

impl Precision {
    /// Bytes per stored weight, gradient and optimizer element.
    pub fn param_bytes(self) -> u64 {
        match self {
            Precision::Fp16 | Precision::Bf16 => 2,
            _ => 4,
        }
    }
    /// Bytes per activation element.
    pub fn act_bytes(self) -> u64 {
        match self {
            Precision::Fp32 => 4,
            _ => 2,
        }
    }
}

/// Weight quantization of the frozen base.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Quant {
    /// Unquantized.
    None,
    /// bitsandbytes LLM.int8.
    Int8,
    /// bitsandbytes NF4 (blocksize 64, fp32 absmax).
    Nf4,
    /// NF4 with double quantization of the absmax constants.
    Nf4Dq,
    /// GPTQ/AWQ 4-bit, group size 128.
    Int4,
    /// FP8 weights with per-tensor scales.
    Fp8,
    /// OCP MXFP4 on the MoE experts only, as a checkpoint ships it
    /// (gpt-oss `quantization_config.quant_method: "mxfp4"`): not a `--quant`
    /// choice, only read from a config.
    Mxfp4,
}

impl Quant {
    /// The name as the user writes it (and as JSON prints it).
    pub fn name(self) -> &'static str {
        match self {
            Quant::None => "none",
            Quant::Int8 => "int8",
            Quant::Nf4 => "nf4",
            Quant::Nf4Dq => "nf4-dq",
            Quant::Int4 => "int4",
            Quant::Fp8 => "fp8",
            Quant::Mxfp4 => "mxfp4",
        }
    }
}

/// Optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimizer {
    /// torch AdamW: two states per parameter.
    Adamw,
    /// bitsandbytes 8-bit AdamW.
    #[serde(rename = "adamw-8bit")]
    Adamw8bit,
    /// bitsandbytes paged 8-bit AdamW (states may page to the CPU).
    #[serde(rename = "paged-adamw-8bit")]
    PagedAdamw8bit,
    /// Plain SGD: no state.
    Sgd,
    /// SGD with momentum: one state.
    SgdMomentum,
    /// Adafactor: factored second moment, no first moment (HF defaults).
    Adafactor,
    /// Lion: one state.
    Lion,
}

/// Attention kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// Materialises the a·s² score and probability matrices.
    Eager,
    /// PyTorch SDPA (flash or memory-efficient kernel on GPU).
    Sdpa,
    /// FlashAttention-2.
    Flash,
}

/// What DeepSpeed/FSDP moves to the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Offload {
    /// Nothing.
    None,
    /// Optimizer states and the step (ZeRO-Offload).
    Optimizer,
    /// Optimizer and parameters (ZeRO-Infinity / FSDP CPU offload; needs stage 3).
    Params,
}

/// Which linears LoRA adapts. Serializes as `"all-linear"` or `"q,v"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoraTargets {
    /// Every linear inside the blocks (`all-linear`).
    AllLinear,
    /// Named projections (`q`, `v`, `o_proj`, `gate_proj`, …).
    Names(Vec<String>),
}

impl Serialize for LoraTargets {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            LoraTargets::AllLinear => ser.serialize_str("all-linear"),
            LoraTargets::Names(v) => ser.serialize_str(&v.join(",")),
        }
    }
}

impl<'de> Deserialize<'de> for LoraTargets {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let s = String::deserialize(de)?;
        Ok(LoraTargets::parse(&s))
    }
}

impl LoraTargets {
    /// `all-linear` (or `all`), else a comma-separated list of names.
    pub fn parse(s: &str) -> LoraTargets {
        match s.trim() {
            "all-linear" | "all" => LoraTargets::AllLinear,
            list => LoraTargets::Names(
                list.split(',')
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect(),
            ),
        }
    }

    /// Does this target list adapt the linear named `name` (e.g. `q_proj`)?
    pub fn matches(&self, name: &str) -> bool {
        match self {
            LoraTargets::AllLinear => name != "router",
            LoraTargets::Names(list) => list.iter().any(|t| {
                let t = t.trim().to_ascii_lowercase();
                name == t || name.strip_suffix("_proj") == Some(t.as_str())
            }),
        }
    }
}

/// One complete setup. Deserializes with defaults for missing fields.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Setup {
    /// Task.
    pub task: Task,
    /// Training method.
    pub method: Method,
    /// Precision.
    pub precision: Precision,
    /// Weight quantization (QLoRA implies NF4).
    pub quant: Quant,
    /// Optimizer (training only).
    pub optimizer: Optimizer,
    /// Micro-batch size.
    pub batch: u64,
    /// Tokens per sample (training) or prompt tokens (inference).
    pub seq: u64,
    /// Generated tokens (inference).
    pub new_tokens: u64,
    /// HF gradient checkpointing (per layer).
    pub grad_checkpointing: bool,
    /// The training loop drops the model output before backward (HF
    /// `Trainer`, torchtune's `del logits`); otherwise it is held through
    /// backward and the optimizer step (`out = model(**batch)`).
    pub drops_output: bool,
    /// PEFT's `prepare_model_for_kbit_training` ran on the bitsandbytes
    /// model (peft `utils/other.py`): every fp16/bf16 parameter (embeddings,
    /// LM head, norms; MoE experts under transformers 5) is cast to fp32, so
    /// the residual stream and the logits are fp32, and gradient
    /// checkpointing is on (its default `use_gradient_checkpointing=True`).
    pub kbit_upcast: bool,
    /// Gradient accumulation steps.
    pub grad_accum: u64,
    /// Attention kernel.
    pub attention: Attention,
    /// LoRA rank.
    pub lora_rank: u64,
    /// LoRA targets.
    pub lora_targets: LoraTargets,
    /// KV-cache element bits (16 by default; 8 for an int8/fp8 cache).
    pub kv_bits: u64,
    /// The optimizer uses torch's multi-tensor (foreach) path.
    pub foreach: bool,
    /// GPUs in all: tensor × pipeline × data-parallel degree ([`Setup::dp`]).
    pub gpus: u64,
    /// Tensor-parallel degree (Megatron-style; vLLM `tensor_parallel_size`;
    /// transformers `tp_plan="auto"`).
    pub tp: u64,
    /// Pipeline-parallel degree (stages of ⌈L/pp⌉ layers).
    pub pp: u64,
    /// ZeRO stage (0–3); FSDP full shard is stage 3.
    pub zero: u8,
    /// CPU offload.
    pub offload: Offload,
    /// The CUDA runtime loads kernels lazily (CUDA ≥ 12.2, the default of
    /// today's PyTorch wheels): the context takes about 0.7 GiB instead of
    /// about 1.3 GB ([`crate::components::cuda_context_bytes`]).
    pub cuda_lazy_loading: bool,
}

/// Micro-batch size when none is given.
pub const DEFAULT_BATCH: u64 = 1;
/// Tokens per sample (or prompt tokens) when none are given.
pub const DEFAULT_SEQ: u64 = 512;

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            task: Task::Infer,
            method: Method::Full,
            precision: Precision::Bf16,
            quant: Quant::None,
            optimizer: Optimizer::Adamw,
            batch: DEFAULT_BATCH,
            seq: DEFAULT_SEQ,
            new_tokens: 0,
            grad_checkpointing: false,
            drops_output: false,
            kbit_upcast: false,
            grad_accum: 1,
            attention: Attention::Sdpa,
            lora_rank: 8,
            lora_targets: LoraTargets::Names(vec!["q".into(), "v".into()]),
            kv_bits: 16,
            foreach: true,
            gpus: 1,
            tp: 1,
            pp: 1,
            zero: 0,
            offload: Offload::None,
            cuda_lazy_loading: true,
        }
    }
}

/// A setup that cannot be estimated. Messages name settings by
/// [`crate::knob`] markers: `Display` words them, [`SetupError::message`]
/// names them as a front end spells them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// A size out of range or a combination that cannot run.
    #[error("{}", knob::words(.0))]
    Invalid(String),
    /// A setting that means nothing for this task or method.
    #[error("{} applies to {}; {}", .knob.words(), knob::words(.applies_to), knob::words(.instead))]
    NotApplicable {
        /// The setting given.
        knob: Knob,
        /// Where it means something.
        applies_to: &'static str,
        /// What to do instead.
        instead: &'static str,
    },
    /// Two settings that contradict each other.
    #[error("{}", knob::words(.0))]
    Conflict(String),
    /// The model's numbers are out of range.
    #[error(transparent)]
    Model(#[from] crate::model::ConfigError),
    /// Some term of the estimate exceeds [`crate::model::MAX_BYTES`] on one GPU.
    #[error(
        "this configuration needs more than 1 EiB (2^60 bytes) on one GPU ({what}); nothing that large can be estimated or run"
    )]
    TooLarge {
        /// Which term.
        what: &'static str,
    },
}

impl SetupError {
    /// The message with each setting named by `name` (the binary: its flag).
    pub fn message<'a>(&self, name: &dyn Fn(Knob) -> Cow<'a, str>) -> String {
        match self {
            SetupError::Invalid(m) | SetupError::Conflict(m) => knob::fill(m, name),
            SetupError::NotApplicable {
                knob,
                applies_to,
                instead,
            } => format!(
                "{} applies to {}; {}",
                name(*knob),
                knob::fill(applies_to, name),
                knob::fill(instead, name)
            ),
            SetupError::Model(e) => e.message(name),
            SetupError::TooLarge { .. } => self.to_string(),
        }
    }
}

/// The largest LoRA rank accepted (ranks in use are 4–256; a rank above
/// the layer widths adds nothing).
pub const MAX_LORA_RANK: u64 = 1 << 16;
/// The most gradient-accumulation steps accepted.
pub const MAX_GRAD_ACCUM: u64 = 1 << 20;

/// Which setup flags the user gave explicitly. Combination errors
/// ([`Setup::check_given`]) concern only these: a default never triggers one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Given {
    /// `--method`.
    pub method: bool,
    /// `--quant`.
    pub quant: bool,
    /// `--optimizer`.
    pub optimizer: bool,
    /// `--grad-checkpointing`.
    pub grad_checkpointing: bool,
    /// `--trainer`.
    pub trainer: bool,
    /// `--grad-accum`.
    pub grad_accum: bool,
    /// `--lora-rank`.
    pub lora_rank: bool,
    /// `--lora-targets`.
    pub lora_targets: bool,
    /// `--no-foreach`.
    pub no_foreach: bool,
    /// `--zero`.
    pub zero: bool,
    /// `--fsdp`.
    pub fsdp: bool,
    /// `--offload`.
    pub offload: bool,
    /// `--new-tokens`.
    pub new_tokens: bool,
    /// `--task train`.
    pub train: bool,
    /// `--task serve`.
    pub serve: bool,
    /// `--engine vllm`.
    pub vllm: bool,
    /// `--gpu`.
    pub gpu: bool,
    /// `--batch` other than 1.
    pub batch: bool,
    /// `--tp` or `--pp` other than 1.
    pub parallel: bool,
    /// `--no-safety-checker`.
    pub no_safety_checker: bool,
    /// `--kv-dtype`.
    pub kv_dtype: bool,
    /// The first vLLM-only setting given (`max_model_len`, …), if any.
    pub vllm_knob: Option<Knob>,
    /// The first image-only setting given (width, images, …), if any.
    pub image_knob: Option<Knob>,
}

impl Given {
    /// The first training-only flag given, if any: they mean nothing for
    /// inference (text or image).
    pub fn training_knob(&self) -> Option<Knob> {
        [
            (self.optimizer, Knob::Optimizer),
            (self.grad_checkpointing, Knob::GradCheckpointing),
            (self.trainer, Knob::Trainer),
            (self.grad_accum, Knob::GradAccum),
            (self.lora_rank, Knob::LoraRank),
            (self.lora_targets, Knob::LoraTargets),
            (self.no_foreach, Knob::NoForeach),
            (self.zero, Knob::Zero),
            (self.fsdp, Knob::Fsdp),
            (self.offload, Knob::Offload),
        ]
        .into_iter()
        .find_map(|(given, knob)| given.then_some(knob))
    }
}

impl Setup {
    /// Whether the optimizer keeps any state.
    pub fn optimizer_bytes_nonzero(&self) -> bool {
        self.optimizer != Optimizer::Sgd
    }

    /// Data-parallel degree: `gpus / (tp · pp)` (ZeRO shards over it).
    pub fn dp(&self) -> u64 {
        (self.gpus / (self.tp * self.pp).max(1)).max(1)
    }

    /// Whether more than one GPU talks over NCCL.
    pub fn multi_gpu(&self) -> bool {
        self.gpus > 1 || self.tp > 1 || self.pp > 1
    }

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
            if g.method && self.method != Method::Full {
                return Err(na(
                    Knob::Method,
                    "⟨task⟩ train",
                    "for quantized inference use ⟨quant⟩ (nf4, int8, …) without ⟨method⟩",
                ));
            }
        }
        if let Some(flag) = g.image_knob {
            return Err(na(
                flag,
                "image models only (see ⟨list-models⟩)",
                "drop it for a text model",
            ));
        }
        if g.serve != g.vllm {
            return Err(SetupError::Conflict(
                "serving is modelled for vLLM only: use ⟨engine⟩ vllm ⟨task⟩ serve".into(),
            ));
        }
        if let Some(flag) = g.vllm_knob.filter(|_| !g.serve) {
            return Err(na(
                flag,
                "⟨engine⟩ vllm ⟨task⟩ serve",
                "drop it, or add ⟨engine⟩ vllm ⟨task⟩ serve to estimate vLLM's pool",
            ));
        }
        if g.kv_dtype && self.task == Task::Train {
            return Err(na(
                Knob::KvDtype,
                "inference (⟨task⟩ infer or serve)",
                "training keeps no KV cache: drop it",
            ));
        }
        if g.serve && !g.gpu {
            return Err(SetupError::Conflict(
                "⟨task⟩ serve needs ⟨gpu⟩ (vLLM sizes its KV pool from the GPU's memory)".into(),
            ));
        }
        if self.task == Task::Train && g.new_tokens && self.new_tokens > 0 {
            return Err(na(
                Knob::NewTokens,
                "⟨task⟩ infer (generation)",
                "training reads ⟨seq⟩ tokens per sample: drop ⟨new-tokens⟩",
            ));
        }
        if self.method == Method::Full {
            for (given, flag) in [
                (g.lora_rank, Knob::LoraRank),
                (g.lora_targets, Knob::LoraTargets),
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
        if g.lora_targets && self.lora_targets == LoraTargets::Names(Vec::new()) {
            return Err(SetupError::Conflict(
                "⟨lora-targets⟩ is empty: name the projections to adapt (q,v or q,k,v,o,gate,up,down) or use all-linear".into(),
            ));
        }
        if self.method == Method::Qlora
            && g.quant
            && !matches!(self.quant, Quant::Nf4 | Quant::Nf4Dq)
        {
            return Err(SetupError::Conflict(format!(
                "⟨method⟩ qlora quantizes the frozen base to NF4, not ⟨quant⟩ {q}: use ⟨quant⟩ nf4 or nf4-dq (or drop ⟨quant⟩), or ⟨method⟩ lora ⟨quant⟩ {q} to train LoRA on that quantized base",
                q = self.quant.name()
            )));
        }
        if g.fsdp && g.zero && self.zero != 3 {
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
        if self.method == Method::Qlora && matches!(self.quant, Quant::None) {
            self.quant = Quant::Nf4;
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
