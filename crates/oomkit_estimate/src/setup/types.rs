//! The setup's types: task, method, precision, quantization, optimizer,
//! input sizes and parallelism ([`Setup`]), the settings a user gave
//! ([`Given`]) and what can be wrong with them ([`SetupError`]). The checks
//! are in `validate.rs`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::knob::{self, Knob, KnobSet};
use crate::options::{Engine, Workload};

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
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Method {
    /// Every parameter.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Full,
    /// Frozen base, trainable low-rank adapters.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Lora,
    /// LoRA on an NF4-quantized base.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Qlora,
}

/// Numeric precision of weights, gradients, optimizer states and activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Precision {
    /// Everything fp32.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Fp32,
    /// Pure fp16: weights, grads and states in fp16.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Fp16,
    /// Pure bf16 (torchtune/LitGPT "bf16-true").
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Bf16,
    /// fp32 weights and states, fp16 autocast activations.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    MixedFp16,
    /// fp32 weights and states, bf16 autocast activations.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
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
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Quant {
    /// Unquantized.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    None,
    /// bitsandbytes LLM.int8.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Int8,
    /// bitsandbytes NF4 (blocksize 64, fp32 absmax).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Nf4,
    /// NF4 with double quantization of the absmax constants.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Nf4Dq,
    /// GPTQ/AWQ 4-bit, group size 128.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Int4,
    /// FP8 weights with per-tensor scales.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Fp8,
    /// OCP MXFP4 on the MoE experts only, as a checkpoint ships it
    /// (gpt-oss `quantization_config.quant_method: "mxfp4"`): not a `--quant`
    /// choice, only read from a config.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    #[cfg_attr(feature = "clap", value(skip))]
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
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Optimizer {
    /// torch AdamW: two states per parameter.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Adamw,
    /// bitsandbytes 8-bit AdamW.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    #[serde(rename = "adamw-8bit")]
    #[cfg_attr(feature = "clap", value(name = "adamw-8bit"))]
    Adamw8bit,
    /// bitsandbytes paged 8-bit AdamW (states may page to the CPU).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    #[serde(rename = "paged-adamw-8bit")]
    #[cfg_attr(feature = "clap", value(name = "paged-adamw-8bit"))]
    PagedAdamw8bit,
    /// Plain SGD: no state.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Sgd,
    /// SGD with momentum: one state.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    SgdMomentum,
    /// Adafactor: factored second moment, no first moment (HF defaults).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Adafactor,
    /// Lion: one state.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Lion,
}

/// Attention kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Attention {
    /// Materialises the a·s² score and probability matrices.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Eager,
    /// PyTorch SDPA (flash or memory-efficient kernel on GPU).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Sdpa,
    /// FlashAttention-2.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Flash,
}

/// What DeepSpeed/FSDP moves to the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Offload {
    /// Nothing.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    None,
    /// Optimizer states and the step (ZeRO-Offload).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Optimizer,
    /// Optimizer and parameters (ZeRO-Infinity / FSDP CPU offload; needs stage 3).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
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
    /// Selective activation checkpointing (torchtitan's op-level policy or
    /// every k-th layer: [`crate::selective`]); `None` when off.
    pub selective_ac: Option<crate::selective::SelectiveAc>,
    /// torchtune's activation offloading: saved tensors move to the CPU
    /// (needs checkpointing, full or selective).
    pub activation_offloading: bool,
    /// The software stack whose generation sets the memory ([`crate::stack`]).
    pub stack: crate::stack::Stack,
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
    /// The ZeRO/FSDP implementation and its settings (DeepSpeed's defaults;
    /// left out of the JSON when they are the defaults).
    #[serde(skip_serializing_if = "crate::sharding::Sharding::is_default")]
    pub sharding: crate::sharding::Sharding,
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
            selective_ac: None,
            activation_offloading: false,
            stack: crate::stack::Stack::Current,
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
            sharding: crate::sharding::Sharding::default(),
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

/// Which settings the user gave explicitly, and for what. Combination
/// errors ([`Setup::check_given`]) concern only these: a default never
/// triggers one. `knobs` holds a knob when its flag was given; for `batch`
/// only when other than [`DEFAULT_BATCH`], for `tp` and `pp` only when other
/// than 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Given {
    /// The settings given.
    pub knobs: KnobSet,
    /// What runs.
    pub task: Workload,
    /// The engine (given, or chosen from the model and the task).
    pub engine: Engine,
}

impl Default for Given {
    fn default() -> Given {
        Given {
            knobs: KnobSet::EMPTY,
            task: Workload::Infer,
            engine: Engine::Hf,
        }
    }
}

/// The settings that only training reads, in the order errors name them.
pub const TRAINING_KNOBS: &[Knob] = &[
    Knob::Optimizer,
    Knob::GradCheckpointing,
    Knob::Checkpointing,
    Knob::AcOption,
    Knob::ActivationOffloading,
    Knob::Trainer,
    Knob::GradAccum,
    Knob::LoraRank,
    Knob::LoraTargets,
    Knob::NoForeach,
    Knob::Zero,
    Knob::Fsdp,
    Knob::Offload,
    Knob::FsdpVersion,
    Knob::ReduceBucketSize,
    Knob::PrefetchBucketSize,
    Knob::ParamPersistenceThreshold,
    Knob::MaxLiveParameters,
    Knob::MaxReuseDistance,
    Knob::SubGroupSize,
    Knob::OverlapComm,
    Knob::ContiguousGradients,
];

/// vLLM's own settings.
pub const VLLM_KNOBS: &[Knob] = &[
    Knob::GpuMemoryUtilization,
    Knob::MaxModelLen,
    Knob::MaxNumSeqs,
    Knob::MaxNumBatchedTokens,
];

/// The settings of text-to-image pipelines.
pub const IMAGE_KNOBS: &[Knob] = &[
    Knob::Width,
    Knob::Height,
    Knob::Images,
    Knob::AttentionSlicing,
    Knob::VaeSlicing,
    Knob::VaeTiling,
    Knob::CpuOffload,
    Knob::NoSafetyChecker,
];

impl Given {
    /// Was `k` given?
    pub fn has(&self, k: Knob) -> bool {
        self.knobs.contains(k)
    }

    /// The first training-only setting given, if any: they mean nothing for
    /// inference (text or image).
    pub fn training_knob(&self) -> Option<Knob> {
        self.knobs.first_of(TRAINING_KNOBS)
    }

    /// The first vLLM-only setting given, if any.
    pub fn vllm_knob(&self) -> Option<Knob> {
        self.knobs.first_of(VLLM_KNOBS)
    }

    /// The first image-only setting given, if any.
    pub fn image_knob(&self) -> Option<Knob> {
        self.knobs.first_of(IMAGE_KNOBS)
    }

    /// Training asked for.
    pub fn train(&self) -> bool {
        self.task == Workload::Train
    }

    /// Serving asked for.
    pub fn serve(&self) -> bool {
        self.task == Workload::Serve
    }

    /// The engine is vLLM.
    pub fn vllm(&self) -> bool {
        self.engine == Engine::Vllm
    }

    /// A batch other than the default.
    pub fn batch(&self) -> bool {
        self.has(Knob::Batch)
    }

    /// A tensor- or pipeline-parallel degree other than 1.
    pub fn parallel(&self) -> bool {
        self.has(Knob::Tp) || self.has(Knob::Pp)
    }
}

impl Setup {
    /// Whether backward recomputes activations (full or selective
    /// checkpointing).
    pub fn recomputes(&self) -> bool {
        self.grad_checkpointing || self.selective_ac.is_some()
    }

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
}
