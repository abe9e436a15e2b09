//! What a user asks for, as a front end parsed it ([`Options`]: every
//! setting `None` or `false` where the user said nothing), and the rules that
//! turn it into something to estimate: which engine runs
//! ([`Options::engine`]), which settings were given ([`Options::given`]), the
//! defaults and the text setup ([`Options::setup`]), the image setup
//! ([`Options::image_setup`]), vLLM's and llama-server's arguments
//! ([`Options::vllm`], [`Options::llamacpp`]) and which settings belong to
//! which engine ([`Options::check_engine`]). The `oomkit` binary fills it
//! from its flags; a launch command or a training config can fill it too.
//!
//! Errors name settings by [`crate::knob`] markers, as the setup's do.

use crate::image::{self, CpuOffload, ImageSetup};
use crate::knob::{Knob, KnobSet};
use crate::llamacpp::{self, CacheType, FileType, Layers, LlamaError};
use crate::model::{BareShape, ModelConfig, limits, parse_count};
use crate::resolve::{self, ResolveError, Resolved};
use crate::serve::VllmOptions;
use crate::setup::{
    Attention, DEFAULT_BATCH, DEFAULT_SEQ, Given, LoraTargets, Method, Offload, Optimizer,
    Precision, Quant, Setup, SetupError, Task,
};
use crate::versions::{self, Autocast, Versions};

/// What runs: the setup's [`Task`], plus serving (vLLM's pool).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Workload {
    /// Inference (`model.generate`, or one forward pass).
    #[default]
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Infer,
    /// Training: forward, backward and an optimizer step.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Train,
    /// Serving with vLLM: the KV-cache pool on a GPU.
    #[cfg_attr(
        feature = "clap",
        value(help = "Serving with --engine vllm: the KV-cache pool (needs --gpu)")
    )]
    Serve,
}

impl Workload {
    /// The setup's task: serving is inference.
    pub fn task(self) -> Task {
        match self {
            Workload::Infer | Workload::Serve => Task::Infer,
            Workload::Train => Task::Train,
        }
    }
}

/// The engine that runs the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Engine {
    /// Hugging Face transformers (and PyTorch training loops).
    #[cfg_attr(feature = "clap", value(help = "Hugging Face transformers"))]
    Hf,
    /// vLLM (serving only).
    #[cfg_attr(feature = "clap", value(help = "vLLM (only with --task serve)"))]
    Vllm,
    /// llama.cpp's `llama-server`.
    #[cfg_attr(
        feature = "clap",
        value(
            name = "llama.cpp",
            alias = "llamacpp",
            help = "llama.cpp / llama-server (GGUF files, or a catalogue model with a GGUF --quant)"
        )
    )]
    LlamaCpp,
}

/// The KV-cache dtype asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum KvDtype {
    /// The activations' dtype (16-bit; 32-bit under fp32 precision).
    #[default]
    #[cfg_attr(
        feature = "clap",
        value(help = "Same as the activations (16-bit; 32 with --precision fp32)")
    )]
    Auto,
    /// fp16.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Fp16,
    /// bf16.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Bf16,
    /// fp8.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Fp8,
    /// int8.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Int8,
    /// int4.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Int4,
}

impl KvDtype {
    /// Bits per cached element under `precision`.
    pub fn bits(self, precision: Precision) -> u64 {
        match self {
            KvDtype::Auto => 8 * precision.act_bytes(),
            KvDtype::Fp16 | KvDtype::Bf16 => 16,
            KvDtype::Fp8 | KvDtype::Int8 => 8,
            KvDtype::Int4 => 4,
        }
    }
}

/// An on/off/auto switch (llama-server's `-fa`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum OnOff {
    /// On.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    On,
    /// Off.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Off,
    /// The engine decides.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Auto,
}

/// A weight quantization as a user names it: a PyTorch one ([`Quant`]) or,
/// for llama.cpp, a GGUF file type ([`FileType`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantChoice {
    /// bitsandbytes, GPTQ/AWQ, FP8.
    Torch(Quant),
    /// A GGUF file type (llama.cpp).
    Gguf(FileType),
}

impl QuantChoice {
    /// Every choice a user can name, PyTorch's first.
    pub const ALL: &'static [QuantChoice] = &[
        QuantChoice::Torch(Quant::None),
        QuantChoice::Torch(Quant::Int8),
        QuantChoice::Torch(Quant::Nf4),
        QuantChoice::Torch(Quant::Nf4Dq),
        QuantChoice::Torch(Quant::Int4),
        QuantChoice::Torch(Quant::Fp8),
        QuantChoice::Gguf(FileType::F16),
        QuantChoice::Gguf(FileType::Q8_0),
        QuantChoice::Gguf(FileType::Q6K),
        QuantChoice::Gguf(FileType::Q5KM),
        QuantChoice::Gguf(FileType::Q4KM),
        QuantChoice::Gguf(FileType::Q4_0),
    ];

    /// The PyTorch quantization, if this is one.
    pub fn torch(self) -> Option<Quant> {
        match self {
            QuantChoice::Torch(q) => Some(q),
            QuantChoice::Gguf(_) => None,
        }
    }

    /// The GGUF file type, if this is one.
    pub fn gguf(self) -> Option<FileType> {
        match self {
            QuantChoice::Gguf(t) => Some(t),
            QuantChoice::Torch(_) => None,
        }
    }
}

#[cfg(feature = "clap")]
impl clap::ValueEnum for QuantChoice {
    fn value_variants<'a>() -> &'a [Self] {
        QuantChoice::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        match self {
            QuantChoice::Torch(q) => q.to_possible_value(),
            QuantChoice::Gguf(t) => t.to_possible_value(),
        }
    }
}

/// Everything a user can ask of an estimate. `None` (or `false`) is "not
/// given": the defaults are applied by [`Options::setup`] and its siblings,
/// and only what was given can conflict ([`Options::given`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// A model name: catalogue id or alias, Hub repo id, `config.json` path
    /// or folder, `.gguf` file.
    pub model: Option<String>,
    /// A bare decoder of this many parameters (`7B`), instead of `model`.
    pub params: Option<String>,
    /// The bare decoder's shape, where given.
    pub shape: BareShape,
    /// Fetch the model's config from the Hugging Face Hub.
    pub hub: bool,
    /// What runs.
    pub task: Workload,
    /// Which parameters train.
    pub method: Option<Method>,
    /// Precision.
    pub precision: Option<Precision>,
    /// Weight quantization.
    pub quant: Option<QuantChoice>,
    /// Optimizer.
    pub optimizer: Option<Optimizer>,
    /// Micro-batch size.
    pub batch: u64,
    /// Tokens per sample (training) or prompt tokens (inference).
    pub seq: u64,
    /// Generated tokens.
    pub new_tokens: Option<u64>,
    /// Activation checkpointing.
    pub grad_checkpointing: bool,
    /// Activation checkpointing's mode (`--checkpointing`; full is
    /// `grad_checkpointing`'s too).
    pub checkpointing: Option<crate::selective::Checkpointing>,
    /// Selective checkpointing's policy (`op` or every k-th layer).
    pub ac_option: Option<crate::selective::SelectiveAc>,
    /// torchtune's activation offloading.
    pub activation_offloading: bool,
    /// The software stack (transformers release).
    pub stack: Option<crate::stack::Stack>,
    /// HF Trainer's loop (drops the output before backward).
    pub trainer: bool,
    /// PEFT's `prepare_model_for_kbit_training`.
    pub kbit_upcast: bool,
    /// Gradient-accumulation steps.
    pub grad_accum: Option<u64>,
    /// Attention kernel.
    pub attention: Attention,
    /// LoRA rank.
    pub lora_rank: Option<u64>,
    /// LoRA targets, as written (`q,v`, `all-linear`).
    pub lora_targets: Option<String>,
    /// KV-cache dtype.
    pub kv_dtype: Option<KvDtype>,
    /// The optimizer loops over parameters.
    pub no_foreach: bool,
    /// The CUDA version of the PyTorch build (major, minor).
    pub cuda: Option<(u64, u64)>,
    /// GPUs in all.
    pub gpus: Option<u64>,
    /// Tensor-parallel degree.
    pub tp: u64,
    /// Pipeline-parallel degree.
    pub pp: u64,
    /// DeepSpeed ZeRO stage.
    pub zero: Option<u8>,
    /// FSDP full shard.
    pub fsdp: bool,
    /// CPU offload of training state.
    pub offload: Option<Offload>,
    /// FSDP's version and DeepSpeed's ZeRO settings.
    pub sharding: crate::sharding::ShardingFlags,
    /// The engine.
    pub engine: Option<Engine>,
    /// llama.cpp: context cells (`-c`).
    pub ctx_size: Option<u64>,
    /// llama.cpp: layers on the GPU (`-ngl`): a number, `all` or `auto`.
    pub n_gpu_layers: Option<String>,
    /// llama.cpp: flash attention (`-fa`).
    pub flash_attn: Option<OnOff>,
    /// llama.cpp: K cache type.
    pub cache_type_k: Option<CacheType>,
    /// llama.cpp: V cache type.
    pub cache_type_v: Option<CacheType>,
    /// llama.cpp: logical batch (`-b`).
    pub batch_size: Option<u64>,
    /// llama.cpp: physical batch (`-ub`).
    pub ubatch_size: Option<u64>,
    /// llama.cpp: server slots (`-np`).
    pub parallel: Option<u64>,
    /// vLLM: `gpu_memory_utilization`.
    pub gpu_memory_utilization: Option<f64>,
    /// vLLM: `max_model_len`.
    pub max_model_len: Option<u64>,
    /// vLLM: `max_num_seqs`.
    pub max_num_seqs: Option<u64>,
    /// vLLM: `max_num_batched_tokens`.
    pub max_num_batched_tokens: Option<u64>,
    /// Image models: width in pixels.
    pub width: Option<u64>,
    /// Image models: height in pixels.
    pub height: Option<u64>,
    /// Image models: images per prompt.
    pub images: Option<u64>,
    /// Image models: attention slicing.
    pub attention_slicing: bool,
    /// Image models: VAE slicing.
    pub vae_slicing: bool,
    /// Image models: VAE tiling.
    pub vae_tiling: bool,
    /// Image models: diffusers CPU offload.
    pub cpu_offload: Option<CpuOffload>,
    /// Image models: no safety checker.
    pub no_safety_checker: bool,
    /// The GPU to check the fit against (a name [`oomkit_core::gpus::find`]
    /// resolves).
    pub gpu: Option<String>,
    /// The frameworks' versions read from a lock file or the environment
    /// (defaults that changed between versions are picked by them).
    pub versions: Versions,
    /// The autocast a training launch states, where its weights' dtype is
    /// left to `from_pretrained` (the precision then follows the
    /// transformers version: [`crate::versions::train_precision`]).
    pub autocast: Option<Autocast>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            model: None,
            params: None,
            shape: BareShape::default(),
            hub: false,
            task: Workload::Infer,
            method: None,
            precision: None,
            quant: None,
            optimizer: None,
            batch: DEFAULT_BATCH,
            seq: DEFAULT_SEQ,
            new_tokens: None,
            grad_checkpointing: false,
            checkpointing: None,
            ac_option: None,
            activation_offloading: false,
            stack: None,
            trainer: false,
            kbit_upcast: false,
            grad_accum: None,
            attention: Attention::Sdpa,
            lora_rank: None,
            lora_targets: None,
            kv_dtype: None,
            no_foreach: false,
            cuda: None,
            gpus: None,
            tp: 1,
            pp: 1,
            zero: None,
            fsdp: false,
            offload: None,
            sharding: crate::sharding::ShardingFlags::default(),
            engine: None,
            ctx_size: None,
            n_gpu_layers: None,
            flash_attn: None,
            cache_type_k: None,
            cache_type_v: None,
            batch_size: None,
            ubatch_size: None,
            parallel: None,
            gpu_memory_utilization: None,
            max_model_len: None,
            max_num_seqs: None,
            max_num_batched_tokens: None,
            width: None,
            height: None,
            images: None,
            attention_slicing: false,
            vae_slicing: false,
            vae_tiling: false,
            cpu_offload: None,
            no_safety_checker: false,
            gpu: None,
            versions: Versions::default(),
            autocast: None,
        }
    }
}

/// A model that could not be resolved: a bad bare model, or a name that
/// names nothing usable.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A bad `params` or bare shape.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The name could not be resolved.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
}

/// llama.cpp's settings: those only it reads, in the order errors name them.
const LLAMACPP_KNOBS: &[Knob] = &[
    Knob::CtxSize,
    Knob::NGpuLayers,
    Knob::FlashAttn,
    Knob::CacheTypeK,
    Knob::CacheTypeV,
    Knob::BatchSize,
    Knob::UbatchSize,
    Knob::Parallel,
];

impl Options {
    /// The engine: the one given, else llama.cpp for a `.gguf` model when
    /// inferring or serving (what runs GGUF files), else Hugging Face.
    pub fn engine(&self) -> Engine {
        self.engine.unwrap_or_else(|| {
            let gguf = self.model.as_deref().is_some_and(resolve::is_gguf);
            if gguf && self.task != Workload::Train {
                Engine::LlamaCpp
            } else {
                Engine::Hf
            }
        })
    }

    /// Which settings were given (the combination checks concern only
    /// these).
    pub fn given(&self) -> Given {
        let knobs = KnobSet::EMPTY
            .with(Knob::Params, self.params.is_some())
            .with(Knob::Method, self.method.is_some())
            .with(Knob::Quant, self.quant.is_some())
            .with(Knob::Optimizer, self.optimizer.is_some())
            .with(Knob::GradCheckpointing, self.grad_checkpointing)
            .with(Knob::Checkpointing, self.checkpointing.is_some())
            .with(Knob::AcOption, self.ac_option.is_some())
            .with(Knob::ActivationOffloading, self.activation_offloading)
            .with(Knob::Stack, self.stack.is_some())
            .with(Knob::Trainer, self.trainer)
            .with(Knob::KbitUpcast, self.kbit_upcast)
            .with(Knob::GradAccum, self.grad_accum.is_some())
            .with(Knob::LoraRank, self.lora_rank.is_some())
            .with(Knob::LoraTargets, self.lora_targets.is_some())
            .with(Knob::NoForeach, self.no_foreach)
            .with(Knob::Zero, self.zero.is_some())
            .with(Knob::Fsdp, self.fsdp)
            .with(Knob::Offload, self.offload.is_some())
            .with(Knob::NewTokens, self.new_tokens.is_some())
            .with(Knob::Gpu, self.gpu.is_some())
            .with(Knob::Gpus, self.gpus.is_some())
            .with(Knob::Batch, self.batch != DEFAULT_BATCH)
            .with(Knob::Tp, self.tp != 1)
            .with(Knob::Pp, self.pp != 1)
            .with(Knob::KvDtype, self.kv_dtype.is_some())
            .with(Knob::Engine, self.engine.is_some())
            .with(Knob::CtxSize, self.ctx_size.is_some())
            .with(Knob::NGpuLayers, self.n_gpu_layers.is_some())
            .with(Knob::FlashAttn, self.flash_attn.is_some())
            .with(Knob::CacheTypeK, self.cache_type_k.is_some())
            .with(Knob::CacheTypeV, self.cache_type_v.is_some())
            .with(Knob::BatchSize, self.batch_size.is_some())
            .with(Knob::UbatchSize, self.ubatch_size.is_some())
            .with(Knob::Parallel, self.parallel.is_some())
            .with(
                Knob::GpuMemoryUtilization,
                self.gpu_memory_utilization.is_some(),
            )
            .with(Knob::MaxModelLen, self.max_model_len.is_some())
            .with(Knob::MaxNumSeqs, self.max_num_seqs.is_some())
            .with(
                Knob::MaxNumBatchedTokens,
                self.max_num_batched_tokens.is_some(),
            )
            .with(Knob::Width, self.width.is_some())
            .with(Knob::Height, self.height.is_some())
            .with(Knob::Images, self.images.is_some())
            .with(Knob::AttentionSlicing, self.attention_slicing)
            .with(Knob::VaeSlicing, self.vae_slicing)
            .with(Knob::VaeTiling, self.vae_tiling)
            .with(Knob::CpuOffload, self.cpu_offload.is_some())
            .with(Knob::NoSafetyChecker, self.no_safety_checker);
        let knobs = self
            .sharding
            .knobs()
            .into_iter()
            .fold(knobs, |k, knob| k.with(knob, true));
        Given {
            knobs,
            task: self.task,
            engine: self.engine(),
        }
    }

    /// Refuses llama.cpp's settings on the other engines and the other
    /// engines' settings on llama.cpp.
    pub fn check_engine(&self) -> Result<(), SetupError> {
        let g = self.given();
        let gguf_quant = self.quant.and_then(QuantChoice::gguf);
        if g.engine != Engine::LlamaCpp {
            if let Some(k) = g.knobs.first_of(LLAMACPP_KNOBS) {
                return Err(SetupError::Conflict(format!(
                    "⟨{}⟩ applies to ⟨engine⟩ llama.cpp (llama-server's flags)",
                    k.key()
                )));
            }
            if let Some(ft) = gguf_quant {
                return Err(SetupError::Conflict(format!(
                    "⟨quant⟩ {} is a GGUF file type: it applies to ⟨engine⟩ llama.cpp",
                    ft.name().to_ascii_lowercase()
                )));
            }
            return Ok(());
        }
        if self.task == Workload::Train {
            return Err(SetupError::Conflict(
                "⟨engine⟩ llama.cpp estimates inference and serving (⟨task⟩ infer or serve), not training".into(),
            ));
        }
        let foreign = [
            (Knob::Params, "⟨params⟩"),
            (Knob::Method, "⟨method⟩"),
            (Knob::Optimizer, "⟨optimizer⟩"),
            (Knob::GradCheckpointing, "⟨grad-checkpointing⟩"),
            (Knob::Trainer, "⟨trainer⟩"),
            (Knob::GradAccum, "⟨grad-accum⟩"),
            (Knob::LoraRank, "⟨lora-rank⟩"),
            (Knob::LoraTargets, "⟨lora-targets⟩"),
            (Knob::NoForeach, "⟨no-foreach⟩"),
            (Knob::Zero, "⟨zero⟩"),
            (Knob::Fsdp, "⟨fsdp⟩"),
            (Knob::Offload, "⟨offload⟩"),
            (Knob::NewTokens, "⟨new-tokens⟩"),
            (
                Knob::Batch,
                "⟨batch⟩ (llama.cpp: ⟨batch-size⟩/⟨ubatch-size⟩)",
            ),
            (Knob::Tp, "⟨tp⟩/⟨pp⟩"),
            (Knob::Pp, "⟨tp⟩/⟨pp⟩"),
            (Knob::Gpus, "⟨gpus⟩"),
            (
                Knob::KvDtype,
                "⟨kv-dtype⟩ (llama.cpp: ⟨cache-type-k⟩/⟨cache-type-v⟩)",
            ),
        ];
        if let Some((_, what)) = foreign.iter().find(|(k, _)| g.has(*k)) {
            return Err(SetupError::Conflict(format!(
                "{what} does not apply to ⟨engine⟩ llama.cpp"
            )));
        }
        if let Some(k) = g.vllm_knob().or(g.image_knob()) {
            return Err(SetupError::Conflict(format!(
                "⟨{}⟩ does not apply to ⟨engine⟩ llama.cpp",
                k.key()
            )));
        }
        if self.quant.is_some() && gguf_quant.is_none() {
            return Err(SetupError::Conflict(
                "⟨quant⟩ with ⟨engine⟩ llama.cpp takes a GGUF file type: f16, q8_0, q6_k, q5_k_m, q4_k_m or q4_0".into(),
            ));
        }
        Ok(())
    }

    /// The bare model `params` names, if given: a count like `7B` within
    /// [`limits::PARAMS`], with the shape given.
    pub fn bare_model(&self) -> Result<Option<ModelConfig>, SetupError> {
        let Some(p) = &self.params else {
            return Ok(None);
        };
        let Some(n) = parse_count(p) else {
            return Err(SetupError::Invalid(format!(
                "⟨params⟩ {p:?}: expected a positive count like 7B or 350M"
            )));
        };
        // parse_count saturates at u64::MAX: name what the user wrote.
        if n > limits::PARAMS {
            return Err(SetupError::Invalid(format!(
                "⟨params⟩ {p} is above the limit of {} parameters (far beyond any published model; see README \"Limits\")",
                limits::PARAMS
            )));
        }
        Ok(Some(ModelConfig::bare(n, &self.shape)?))
    }

    /// The model: the bare one of `params`, else what `model` resolves to
    /// through `sources` ([`resolve::resolve`]).
    pub fn resolve(&self, sources: resolve::Sources) -> Result<Resolved, ModelError> {
        if let Some(cfg) = self.bare_model()? {
            return Ok(Resolved::Text(Box::new(cfg)));
        }
        let Some(name) = self.model.as_deref() else {
            return Err(SetupError::Invalid("give a MODEL or ⟨params⟩".into()).into());
        };
        Ok(resolve::resolve(name, sources)?)
    }

    /// The text setup, defaults applied and validated against `cfg`:
    /// FSDP (full shard) is ZeRO stage 3; the GPU count defaults to
    /// tp × pp; the weights keep the checkpoint's own quantization unless
    /// the whole model trains; the KV cache follows the activations.
    pub fn setup(&self, cfg: &ModelConfig) -> Result<Setup, SetupError> {
        let d = Setup::default();
        // `--stack transformers@X.Y` is a transformers pin; else a pin read
        // from the environment or a lock file names the stack.
        let versions = crate::stack::with_stack_pin(&self.versions, self.stack);
        let stack = self
            .stack
            .or_else(|| crate::stack::from_versions(&versions))
            .unwrap_or(d.stack);
        let (grad_checkpointing, selective_ac) = self.checkpointing_mode()?;
        let task = self.task.task();
        if self.autocast.is_some() && task != Task::Train {
            return Err(SetupError::Conflict(
                "⟨autocast⟩ applies to training (⟨task⟩ train): inference takes ⟨precision⟩".into(),
            ));
        }
        let precision = self.precision.unwrap_or_else(|| {
            if stack.litgpt() {
                // LitGPT's fine-tuning configs: `precision: bf16-true`.
                Precision::Bf16
            } else if task == Task::Train && self.engine() == Engine::Hf {
                versions::train_precision(cfg, &versions, self.autocast).0
            } else if self.stack.is_some_and(crate::stack::Stack::fp32_default) {
                // transformers before 5 loads fp32 unless given a dtype.
                Precision::Fp32
            } else {
                d.precision
            }
        });
        let method = self.method.unwrap_or(d.method);
        let s = Setup {
            task,
            method,
            precision,
            quant: match self.quant {
                None if task == Task::Train && method == Method::Full => Quant::None,
                None => cfg.native_quant.unwrap_or(Quant::None),
                // GGUF types never reach the PyTorch paths: check_engine
                // refuses them without llama.cpp.
                Some(q) => q.torch().unwrap_or(Quant::None),
            },
            optimizer: self.optimizer.unwrap_or(d.optimizer),
            batch: self.batch,
            seq: self.seq,
            new_tokens: self.new_tokens.unwrap_or(d.new_tokens),
            grad_checkpointing,
            selective_ac,
            activation_offloading: self.activation_offloading,
            stack,
            drops_output: self.trainer,
            kbit_upcast: self.kbit_upcast,
            grad_accum: self.grad_accum.unwrap_or(d.grad_accum),
            attention: self.attention,
            lora_rank: self.lora_rank.unwrap_or(d.lora_rank),
            lora_targets: self
                .lora_targets
                .as_deref()
                .map_or(d.lora_targets, LoraTargets::parse),
            kv_bits: self.kv_dtype.unwrap_or_default().bits(precision),
            foreach: !self.no_foreach,
            // CUDA 12.2 made lazy kernel loading the default.
            cuda_lazy_loading: self.cuda.is_none_or(|v| v >= (12, 2)),
            gpus: self.gpus.unwrap_or(self.tp.saturating_mul(self.pp)),
            tp: self.tp,
            pp: self.pp,
            // FSDP full shard is stage 3; an explicit ZeRO stage beside it
            // is checked by check_given.
            zero: self.zero.unwrap_or(if self.fsdp { 3 } else { d.zero }),
            offload: self.offload.unwrap_or(d.offload),
            sharding: self.sharding.resolve(self.fsdp)?,
        };
        s.check_given(&self.given())?;
        let s = s.validate()?;
        s.check_model(cfg)?;
        Ok(s)
    }

    /// Full checkpointing and the selective policy from `--grad-checkpointing`,
    /// `--checkpointing` and `--ac-option` (default policy: torchtitan's
    /// `op`).
    fn checkpointing_mode(
        &self,
    ) -> Result<(bool, Option<crate::selective::SelectiveAc>), SetupError> {
        use crate::selective::{Checkpointing as C, SelectiveAc};
        let mode = match (self.checkpointing, self.grad_checkpointing) {
            (Some(C::None | C::Selective), true) => {
                return Err(SetupError::Conflict(
                    "⟨grad-checkpointing⟩ is full checkpointing: drop it, or use ⟨checkpointing⟩ full".into(),
                ));
            }
            (Some(m), _) => m,
            (None, true) => C::Full,
            (None, false) => C::None,
        };
        if self.ac_option.is_some() && mode != C::Selective {
            return Err(SetupError::NotApplicable {
                knob: Knob::AcOption,
                applies_to: "⟨checkpointing⟩ selective",
                instead: "add ⟨checkpointing⟩ selective, or drop it",
            });
        }
        Ok(match mode {
            C::None => (false, None),
            C::Full => (true, None),
            C::Selective => (false, Some(self.ac_option.unwrap_or(SelectiveAc::Op))),
        })
    }

    /// The image setup for pipeline `m`, defaults from the pipeline,
    /// validated.
    pub fn image_setup(&self, m: &image::Model) -> Result<ImageSetup, SetupError> {
        image::check_given(m, &self.given())?;
        let d = ImageSetup::default_for(m);
        let s = ImageSetup {
            width: self.width.unwrap_or(d.width),
            height: self.height.unwrap_or(d.height),
            images: self.images.unwrap_or(d.images),
            precision: self.precision.unwrap_or(d.precision),
            quant: self
                .quant
                .and_then(QuantChoice::torch)
                .unwrap_or(Quant::None),
            attention: self.attention,
            attention_slicing: self.attention_slicing,
            vae_slicing: self.vae_slicing,
            vae_tiling: self.vae_tiling,
            cpu_offload: self.cpu_offload.unwrap_or(CpuOffload::None),
            safety_checker: d.safety_checker && !self.no_safety_checker,
        };
        image::validate(m, &s)?;
        Ok(s)
    }

    /// vLLM's arguments as given.
    pub fn vllm(&self) -> VllmOptions {
        VllmOptions {
            gpu_memory_utilization: self.gpu_memory_utilization,
            max_model_len: self.max_model_len,
            max_num_batched_tokens: self.max_num_batched_tokens,
            max_num_seqs: self.max_num_seqs,
        }
    }

    /// llama-server's arguments as given (`-ngl all` and `auto` offload
    /// every layer; `-fa auto` counts as on, as with CUDA).
    pub fn llamacpp(&self) -> Result<llamacpp::Options, SetupError> {
        Ok(llamacpp::Options {
            n_ctx: self.ctx_size,
            n_gpu_layers: match self.n_gpu_layers.as_deref().map(str::trim) {
                None | Some("all" | "auto") => Layers::All,
                Some(n) => match n.parse::<u64>() {
                    Ok(v) => Layers::Count(v),
                    Err(_) => {
                        return Err(SetupError::Invalid(format!(
                            "⟨n-gpu-layers⟩ {n:?}: expected a number of layers or `all`"
                        )));
                    }
                },
            },
            flash_attn: self.flash_attn.map(|f| f != OnOff::Off),
            cache_type_k: self.cache_type_k,
            cache_type_v: self.cache_type_v,
            n_batch: self.batch_size,
            n_ubatch: self.ubatch_size,
            n_parallel: self.parallel,
        })
    }

    /// The model as llama.cpp loads it: a `.gguf` file's own tensors, or a
    /// text model (resolved through `sources`) with the tensor types of the
    /// GGUF file type given as `quant`.
    pub fn llamacpp_model(
        &self,
        sources: resolve::Sources,
    ) -> Result<llamacpp::Model, LlamaModelError> {
        let Some(name) = self.model.as_deref() else {
            return Err(SetupError::Invalid(
                "give a MODEL: a .gguf file or a catalogue model with ⟨quant⟩".into(),
            )
            .into());
        };
        if resolve::is_gguf(name) {
            if self.quant.is_some() {
                return Err(SetupError::Invalid(
                    "⟨quant⟩: a .gguf file has its own tensor types (drop ⟨quant⟩)".into(),
                )
                .into());
            }
            return Ok(llamacpp::Model::from_gguf(std::path::Path::new(name))?);
        }
        let Some(ft) = self.quant.and_then(QuantChoice::gguf) else {
            return Err(SetupError::Invalid(
                "⟨engine⟩ llama.cpp with a model that is not a .gguf file needs ⟨quant⟩: the GGUF type (f16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0)".into(),
            )
            .into());
        };
        match self.resolve(sources)? {
            Resolved::Text(cfg) => Ok(llamacpp::Model::from_config(*cfg, ft)),
            Resolved::Image(m) => Err(SetupError::Conflict(format!(
                "{} is an image model: llama.cpp runs text models (drop ⟨engine⟩ llama.cpp to estimate it with diffusers)",
                m.id
            ))
            .into()),
        }
    }

    /// The largest batch that fits `gpu` (text models: the micro-batch;
    /// image models: the images per call), for `model` as [`Options::resolve`]
    /// gave it; `None` for a vLLM or llama.cpp server, which has no batch
    /// size.
    pub fn max_batch(
        &self,
        model: &Resolved,
        gpu: &'static oomkit_core::gpus::Gpu,
    ) -> Result<Option<u64>, SetupError> {
        let cfg = match model {
            Resolved::Image(m) => {
                let s = self.image_setup(m)?;
                return Ok(Some(image::fit(m, &s, gpu).max_batch));
            }
            Resolved::Text(cfg) => cfg,
        };
        if self.task == Workload::Serve || self.engine() != Engine::Hf {
            return Ok(None);
        }
        let setup = self.setup(cfg)?;
        let est = crate::estimate(cfg, &setup)?;
        Ok(Some(crate::fit::fit(cfg, &setup, gpu, &est).max_batch))
    }
}

/// A model llama.cpp cannot load.
#[derive(Debug, thiserror::Error)]
pub enum LlamaModelError {
    /// A setting that does not fit.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The `.gguf` file could not be read.
    #[error(transparent)]
    Gguf(#[from] LlamaError),
    /// The name could not be resolved.
    #[error(transparent)]
    Model(#[from] ModelError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(f: impl FnOnce(&mut Options)) -> Options {
        let mut o = Options {
            model: Some("meta-llama/Llama-3.2-1B".into()),
            ..Options::default()
        };
        f(&mut o);
        o
    }

    fn cfg() -> ModelConfig {
        crate::catalogue::find("meta-llama/Llama-3.2-1B").expect("in the catalogue")
    }

    #[test]
    fn engine_is_llamacpp_for_gguf_unless_training() {
        let gguf = |task| {
            opts(|o| {
                o.model = Some("m.Q4_K_M.GGUF".into());
                o.task = task;
            })
        };
        assert_eq!(gguf(Workload::Infer).engine(), Engine::LlamaCpp);
        assert_eq!(gguf(Workload::Serve).engine(), Engine::LlamaCpp);
        assert_eq!(gguf(Workload::Train).engine(), Engine::Hf);
        assert_eq!(opts(|_| {}).engine(), Engine::Hf);
        assert_eq!(
            opts(|o| o.engine = Some(Engine::Vllm)).engine(),
            Engine::Vllm
        );
    }

    #[test]
    fn fsdp_is_zero_3_and_gpus_default_to_tp_times_pp() {
        let s = opts(|o| {
            o.task = Workload::Train;
            o.fsdp = true;
            o.tp = 2;
            o.pp = 2;
        })
        .setup(&cfg())
        .expect("valid");
        assert_eq!((s.zero, s.gpus, s.dp()), (3, 4, 1));
        let err = opts(|o| {
            o.task = Workload::Train;
            o.fsdp = true;
            o.zero = Some(2);
        })
        .setup(&cfg());
        assert!(matches!(err, Err(SetupError::Conflict(_))), "{err:?}");
    }

    #[test]
    fn quantization_defaults_to_the_checkpoints_except_full_training() {
        let mut c = cfg();
        c.native_quant = Some(Quant::Fp8);
        let infer = opts(|_| {}).setup(&c).expect("valid");
        assert_eq!(infer.quant, Quant::Fp8);
        let lora = opts(|o| {
            o.task = Workload::Train;
            o.method = Some(Method::Lora);
        })
        .setup(&c)
        .expect("valid");
        assert_eq!(lora.quant, Quant::Fp8);
        let full = opts(|o| o.task = Workload::Train).setup(&c).expect("valid");
        assert_eq!(full.quant, Quant::None);
    }

    #[test]
    fn kv_cache_follows_the_activations_unless_given() {
        let fp32 = opts(|o| o.precision = Some(Precision::Fp32))
            .setup(&cfg())
            .expect("valid");
        assert_eq!(fp32.kv_bits, 32);
        let fp8 = opts(|o| o.kv_dtype = Some(KvDtype::Fp8))
            .setup(&cfg())
            .expect("valid");
        assert_eq!(fp8.kv_bits, 8);
    }

    #[test]
    fn engine_settings_stay_with_their_engine() {
        let hf_with_ctx = opts(|o| o.ctx_size = Some(4096)).check_engine();
        assert!(
            matches!(&hf_with_ctx, Err(e) if e.to_string().contains("the context size applies to the engine llama.cpp")),
            "{hf_with_ctx:?}"
        );
        let gguf_on_hf = opts(|o| o.quant = Some(QuantChoice::Gguf(FileType::Q4KM))).check_engine();
        assert!(gguf_on_hf.is_err());
        let llama = |f: fn(&mut Options)| {
            opts(|o| {
                o.engine = Some(Engine::LlamaCpp);
                o.quant = Some(QuantChoice::Gguf(FileType::Q4KM));
                f(o);
            })
            .check_engine()
        };
        assert!(llama(|_| {}).is_ok());
        assert!(llama(|o| o.ctx_size = Some(4096)).is_ok());
        assert!(llama(|o| o.task = Workload::Train).is_err());
        assert!(llama(|o| o.tp = 2).is_err());
        assert!(llama(|o| o.max_model_len = Some(4096)).is_err());
        assert!(llama(|o| o.quant = Some(QuantChoice::Torch(Quant::Nf4))).is_err());
    }

    #[test]
    fn llamacpp_layers_parse_or_refuse() {
        let layers = |s: &str| {
            opts(|o| o.n_gpu_layers = Some(s.into()))
                .llamacpp()
                .map(|a| a.n_gpu_layers)
        };
        assert_eq!(layers("all"), Ok(Layers::All));
        assert_eq!(layers(" auto "), Ok(Layers::All));
        assert_eq!(layers("12"), Ok(Layers::Count(12)));
        assert!(layers("twelve").is_err());
        let fa = |f| {
            opts(|o| o.flash_attn = Some(f))
                .llamacpp()
                .map(|a| a.flash_attn)
        };
        assert_eq!(fa(OnOff::Off), Ok(Some(false)));
        assert_eq!(fa(OnOff::Auto), Ok(Some(true)));
    }

    #[test]
    fn bare_params_are_bounded() {
        let bare = |p: &str| opts(|o| o.params = Some(p.into())).bare_model();
        assert!(matches!(bare("7B"), Ok(Some(_))));
        assert!(bare("seven").is_err());
        assert!(bare("1e30").is_err());
        assert!(matches!(opts(|_| {}).bare_model(), Ok(None)));
    }
}
