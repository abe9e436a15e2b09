//! The typed result of `oomkit explain`: one [`Event`] per error found.
//!
//! The JSON contract (`--format json`) is the serde form of [`Report`]; the
//! field meanings follow "Field conventions" in
//! `docs/reference/oom-messages.md`: byte fields come from the primary
//! error message only, and a field the message does not state is `null`.

use oomkit_core::Bytes;
use serde::Serialize;

use crate::detail::Detail;
use crate::readings::Reading;

/// The whole answer for one input.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Contract version; bumped only on incompatible changes.
    pub version: u32,
    /// Every error event, in input order, duplicates folded.
    pub events: Vec<Event>,
    /// Every memory reading (nvidia-smi, PyTorch counters), in input order.
    pub readings: Vec<Reading>,
}

impl Report {
    /// True when at least one event is a device out-of-memory error.
    pub fn has_oom(&self) -> bool {
        self.events.iter().any(|e| e.is_oom)
    }

    /// True when there is something to explain: an OOM or a reading
    /// (`explain` exits 0 then, 1 otherwise).
    pub fn explained(&self) -> bool {
        self.has_oom() || !self.readings.is_empty()
    }
}

/// The software that printed the message (a PyTorch message inside ComfyUI,
/// A1111, diffusers or vLLM output is `pytorch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[allow(missing_docs)]
pub enum Framework {
    #[serde(rename = "pytorch")]
    Pytorch,
    #[serde(rename = "tensorflow")]
    Tensorflow,
    #[serde(rename = "jax")]
    Jax,
    #[serde(rename = "vllm")]
    Vllm,
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    #[serde(rename = "paddle")]
    Paddle,
    #[serde(rename = "cupy")]
    Cupy,
    #[serde(rename = "onnxruntime")]
    Onnxruntime,
    #[serde(rename = "tgi")]
    Tgi,
    #[serde(rename = "nccl")]
    Nccl,
    #[serde(rename = "lua-torch")]
    LuaTorch,
    #[serde(rename = "a1111")]
    A1111,
    #[serde(rename = "comfyui")]
    Comfyui,
    /// Apple's MLX (`mlx`, `mlx-lm`) on Metal.
    #[serde(rename = "mlx")]
    Mlx,
    /// NVIDIA TensorRT (engine build or execution context).
    #[serde(rename = "tensorrt")]
    Tensorrt,
    /// CTranslate2 (faster-whisper, OpenNMT).
    #[serde(rename = "ctranslate2")]
    Ctranslate2,
    /// RAPIDS (cuDF, cuML) through the RMM memory manager.
    #[serde(rename = "rapids")]
    Rapids,
    /// The SGLang serving engine (its own start-up checks; a PyTorch
    /// OOM inside it is `pytorch`).
    #[serde(rename = "sglang")]
    Sglang,
}

impl Framework {
    /// Display name.
    pub fn label(self) -> &'static str {
        match self {
            Framework::Pytorch => "PyTorch",
            Framework::Tensorflow => "TensorFlow",
            Framework::Jax => "JAX/XLA",
            Framework::Vllm => "vLLM",
            Framework::LlamaCpp => "llama.cpp",
            Framework::Paddle => "PaddlePaddle",
            Framework::Cupy => "CuPy",
            Framework::Onnxruntime => "ONNX Runtime",
            Framework::Tgi => "TGI",
            Framework::Nccl => "NCCL",
            Framework::LuaTorch => "Lua Torch",
            Framework::A1111 => "A1111",
            Framework::Comfyui => "ComfyUI",
            Framework::Mlx => "MLX",
            Framework::Tensorrt => "TensorRT",
            Framework::Ctranslate2 => "CTranslate2",
            Framework::Rapids => "RAPIDS (RMM)",
            Framework::Sglang => "SGLang",
        }
    }
}

/// The device API the allocation went through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Backend {
    Cuda,
    Hip,
    Mps,
    Xpu,
    /// Apple's Metal, outside PyTorch (MLX, llama.cpp's Metal backend).
    Metal,
    /// Google TPU (XLA:TPU).
    Tpu,
}

impl Backend {
    /// Display name.
    pub fn label(self) -> &'static str {
        match self {
            Backend::Cuda => "CUDA",
            Backend::Hip => "HIP",
            Backend::Mps => "MPS",
            Backend::Xpu => "XPU",
            Backend::Metal => "Metal",
            Backend::Tpu => "TPU",
        }
    }
}

/// The primary cause, one of a closed set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The job needs more memory than the device offers.
    Capacity,
    /// Reserved-but-unallocated memory (split blocks) would have covered the request.
    Fragmentation,
    /// Other processes hold enough memory to make the difference.
    OtherProcesses,
    /// This process holds a lot of memory outside the framework's allocator.
    NonFrameworkMemory,
    /// The request is larger than the device (or a per-allocation limit).
    ImpossibleRequest,
    /// A user-set fraction/limit, not the device, stopped the allocation.
    MemoryFractionLimit,
    /// The requested size is a negative or overflowed number.
    SizeOverflow,
    /// Memory was preallocated (JAX/XLA, TensorFlow) and the pool is full.
    Preallocation,
    /// The serving engine cannot fit the KV cache for the configured length.
    KvCache,
    /// Windows WDDM spilled into shared system memory until it could not.
    WddmSysmemFallback,
    /// Memory grew steadily until it ran out (a timeline or readings show it).
    Leak,
    /// A look-alike: not a device out-of-memory error.
    NotOom,
    /// The message does not carry enough to tell.
    Unknown,
}

impl Cause {
    /// Short human label.
    pub fn label(self) -> &'static str {
        match self {
            Cause::Capacity => "not enough memory on the device",
            Cause::Fragmentation => "fragmentation",
            Cause::OtherProcesses => "other processes",
            Cause::NonFrameworkMemory => "memory outside the framework",
            Cause::ImpossibleRequest => "impossible request",
            Cause::MemoryFractionLimit => "memory limit",
            Cause::SizeOverflow => "overflowed size",
            Cause::Preallocation => "preallocation",
            Cause::KvCache => "KV cache does not fit",
            Cause::WddmSysmemFallback => "WDDM system-memory fallback",
            Cause::Leak => "memory grew steadily (a leak)",
            Cause::NotOom => "not a device OOM",
            Cause::Unknown => "undetermined",
        }
    }
}

/// One process in PyTorch's ≥2.1 per-process list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessUse {
    /// PID as NVML reports it (host PID inside containers); `None` for "this process".
    pub pid: Option<u64>,
    /// Memory in use by that process.
    pub used_bytes: Bytes,
    /// Whether it is the process that raised the error.
    pub is_self: bool,
}

/// A tensor named in the message (TensorFlow, JAX).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TensorInfo {
    /// Shape as printed.
    pub shape: Vec<u64>,
    /// Element type as printed.
    pub dtype: String,
}

/// What the numbers mean, derived from the fields (`null` when not computable).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Numbers {
    /// requested − free: how much more was needed at that moment.
    pub shortfall_bytes: Option<Bytes>,
    /// reserved − allocated: cached memory stuck in partly used blocks.
    pub reserved_unallocated_bytes: Option<Bytes>,
    /// Memory this process holds outside the framework's allocator (context, cuBLAS, NCCL).
    pub non_framework_bytes: Option<Bytes>,
    /// Memory held by other processes on the device.
    pub other_processes_bytes: Option<Bytes>,
    /// total − free − everything named: driver reservations, processes NVML cannot see.
    pub unaccounted_bytes: Option<Bytes>,
    /// A user-set limit (memory fraction, MPS high watermark, pool limit).
    pub limit_bytes: Option<Bytes>,
    /// Memory in CUDA-graph private pools (included in allocated).
    pub private_pool_bytes: Option<Bytes>,
    /// Memory in use by this process as NVML saw it.
    pub this_process_bytes: Option<Bytes>,
}

/// A fix, ranked, with the code to paste.
#[derive(Clone, Debug, Serialize)]
pub struct Fix {
    /// Remedy id from `oomkit_core::remedies`.
    pub id: oomkit_core::remedies::RemedyId,
    /// Imperative title.
    pub title: String,
    /// Why it helps here (may quote this event's numbers).
    pub why: String,
    /// Paste-ready code for this framework.
    pub code: String,
    /// How much it frees, when the numbers allow saying so.
    pub saves_bytes: Option<Bytes>,
}

/// One error event.
#[derive(Debug, Serialize)]
pub struct Event {
    /// 1-based line of the message's first line in the input.
    pub line: u64,
    /// Whether this is a device out-of-memory error.
    pub is_oom: bool,
    /// The software that printed it.
    pub framework: Framework,
    /// The device API, when known.
    pub backend: Option<Backend>,
    /// Device index, when printed.
    pub device: Option<u32>,
    /// The allocation that failed.
    pub requested_bytes: Option<Bytes>,
    /// Device capacity as printed.
    pub total_bytes: Option<Bytes>,
    /// Free memory as printed.
    pub free_bytes: Option<Bytes>,
    /// Memory allocated by the framework's allocator.
    pub allocated_bytes: Option<Bytes>,
    /// Memory reserved by the framework in total.
    pub reserved_bytes: Option<Bytes>,
    /// The primary cause.
    pub cause: Cause,
    /// One sentence of evidence with the numbers.
    pub evidence: String,
    /// Ranked fixes.
    pub fixes: Vec<Fix>,
    /// The message format recognised, e.g. `pytorch-caching-allocator-2.1`.
    pub format: &'static str,
    /// Which version printed it, when the text tells.
    pub version_hint: Option<&'static str>,
    /// The message's headline, cleaned of prefixes.
    pub message: String,
    /// Derived numbers.
    pub numbers: Numbers,
    /// Per-process memory (PyTorch ≥ 2.1).
    pub processes: Vec<ProcessUse>,
    /// The tensor that failed, when named.
    pub tensor: Option<TensorInfo>,
    /// The op or kernel that asked, when named.
    pub op: Option<String>,
    /// The GPU model, from the log or inferred from the total.
    pub gpu: Option<GpuGuess>,
    /// The application around the framework (`diffusers`, `comfyui`, `a1111`, `transformers`, …).
    pub app: Option<App>,
    /// What the program was doing (`training`, `inference`, `loading`, `serving`).
    pub phase: Option<Phase>,
    /// The operating system, when the log shows it (paths, drivers); left
    /// out of the JSON when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<oomkit_core::remedies::Os>,
    /// How many times this same error appears in the input.
    pub repeats: u32,
    /// Distributed ranks that printed it, from `[rankN]:` prefixes.
    pub ranks: Vec<u32>,
    /// For a follow-on error, the line of the OOM it follows.
    pub follows_line: Option<u64>,
    /// Lines of the readings in the same input joined to this diagnosis
    /// (an nvidia-smi reading of its GPU, PyTorch counters of its device).
    pub reading_lines: Vec<u64>,
    /// Extra facts from the message (max model length, buffer kind, …),
    /// serialised as `[key, value]` pairs.
    pub details: Vec<Detail>,
}

/// The application around the framework, read from the log around the
/// message (paths, banners, exception text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[allow(missing_docs)]
pub enum App {
    #[serde(rename = "comfyui")]
    Comfyui,
    #[serde(rename = "a1111")]
    A1111,
    #[serde(rename = "diffusers")]
    Diffusers,
    #[serde(rename = "vllm")]
    Vllm,
    #[serde(rename = "deepspeed")]
    Deepspeed,
    #[serde(rename = "transformers-trainer")]
    TransformersTrainer,
    #[serde(rename = "accelerate")]
    Accelerate,
    #[serde(rename = "lightning")]
    Lightning,
    #[serde(rename = "transformers")]
    Transformers,
}

impl App {
    /// The name in the JSON and the human output.
    pub fn name(self) -> &'static str {
        match self {
            App::Comfyui => "comfyui",
            App::A1111 => "a1111",
            App::Diffusers => "diffusers",
            App::Vllm => "vllm",
            App::Deepspeed => "deepspeed",
            App::TransformersTrainer => "transformers-trainer",
            App::Accelerate => "accelerate",
            App::Lightning => "lightning",
            App::Transformers => "transformers",
        }
    }
}

impl std::fmt::Display for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the program was doing when memory ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Phase {
    Training,
    Loading,
    Inference,
    Serving,
    /// Autoregressive generation (`generate`), already gradient-free.
    Generation,
    /// An evaluation loop.
    Evaluation,
    /// Compiling the model (torch.compile's Inductor, XLA).
    Compiling,
}

impl Phase {
    /// The name in the JSON and the human output.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Training => "training",
            Phase::Loading => "loading",
            Phase::Inference => "inference",
            Phase::Serving => "serving",
            Phase::Generation => "generation",
            Phase::Evaluation => "evaluation",
            Phase::Compiling => "compiling",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A GPU model named for an event.
#[derive(Clone, Debug, Serialize)]
pub struct GpuGuess {
    /// Catalogue id.
    pub id: &'static str,
    /// Short display name.
    pub name: &'static str,
    /// `log` when the log names the card, `total` when inferred from the printed total.
    pub from: &'static str,
}
