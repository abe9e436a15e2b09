//! The remedy catalogue: the whole fix ladder of the usual CUDA OOM
//! troubleshooting guides, written once.
//!
//! Every oomkit command that recommends a change (explain's ranked fixes,
//! estimate's plan, lint's help, snapshot's advice) points at a [`Remedy`] by
//! its `id`. A remedy carries a one-line title, a one-line *why*, and a
//! paste-ready snippet per framework ([`Flavor`]) where one applies.
//!
//! Sources: the fix ladders of the two troubleshooting guides the product
//! started from (quick fixes, advanced solutions, framework switches, leak
//! patterns; each remedy's snippet follows the framework's own documentation),
//! and `docs/reference/oom-messages.md` §2 for the allocator, TF, JAX, vLLM and
//! llama.cpp switches.

use serde::Serialize;

/// The tool or framework a snippet is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flavor {
    /// Plain PyTorch code.
    Pytorch,
    /// Hugging Face transformers (`from_pretrained`, `TrainingArguments`).
    Transformers,
    /// Hugging Face accelerate.
    Accelerate,
    /// DeepSpeed JSON config.
    Deepspeed,
    /// Hugging Face PEFT.
    Peft,
    /// Hugging Face diffusers pipelines.
    Diffusers,
    /// TensorFlow / Keras.
    Tensorflow,
    /// JAX / XLA.
    Jax,
    /// vLLM engine arguments.
    Vllm,
    /// llama.cpp / Ollama command-line flags.
    LlamaCpp,
    /// AUTOMATIC1111 stable-diffusion-webui `COMMANDLINE_ARGS`.
    A1111,
    /// ComfyUI launch flags.
    Comfyui,
    /// Hugging Face text-generation-inference launcher flags.
    Tgi,
    /// ONNX Runtime session options.
    Onnxruntime,
    /// CuPy.
    Cupy,
    /// PaddlePaddle.
    Paddle,
    /// A shell command or environment variable, framework-independent.
    Shell,
}

/// Where a fix applies: the operating system, the device backend, the
/// runtime (framework or engine), the application and the phase of the job.
/// An empty list means "any". A fix is offered only where every dimension
/// the situation states admits it ([`Scope::admits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Scope {
    /// Operating systems it works on.
    pub os: &'static [Os],
    /// Device backends it works on.
    pub devices: &'static [Device],
    /// Frameworks or engines it is written for.
    pub runtimes: &'static [Runtime],
    /// Applications it is a setting of: unlike the other dimensions, an
    /// application-specific fix needs the application to be known.
    pub apps: &'static [App],
    /// Phases of the job where it helps.
    pub phases: &'static [Phase],
}

/// An operating system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum Os {
    Linux,
    Windows,
    Macos,
}

/// A device backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum Device {
    Cuda,
    /// AMD ROCm (PyTorch's HIP).
    Rocm,
    /// PyTorch's Apple backend.
    Mps,
    /// Intel GPUs.
    Xpu,
    /// Apple Metal outside PyTorch (MLX, llama.cpp).
    Metal,
    Tpu,
}

/// A framework or engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum Runtime {
    Pytorch,
    Tensorflow,
    Jax,
    Vllm,
    LlamaCpp,
    Tgi,
    Onnxruntime,
    Cupy,
    Paddle,
    Nccl,
    LuaTorch,
    Mlx,
    Tensorrt,
    Ctranslate2,
    Rapids,
    Sglang,
}

/// An application on top of a framework.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum App {
    A1111,
    Comfyui,
    Diffusers,
    Vllm,
    Deepspeed,
    Fsdp,
    Transformers,
    Accelerate,
    Lightning,
}

/// The phase of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum Phase {
    Loading,
    Compiling,
    Training,
    Evaluation,
    Inference,
    Generation,
    Serving,
}

/// What is known of the job that failed; `None` where the log does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Situation {
    /// Operating system.
    pub os: Option<Os>,
    /// Device backend.
    pub device: Option<Device>,
    /// Framework or engine.
    pub runtime: Option<Runtime>,
    /// Application.
    pub app: Option<App>,
    /// Phase.
    pub phase: Option<Phase>,
}

impl Scope {
    /// Everywhere.
    pub const ANY: Scope = Scope {
        os: &[],
        devices: &[],
        runtimes: &[],
        apps: &[],
        phases: &[],
    };

    /// Only on these operating systems.
    pub const fn os(self, os: &'static [Os]) -> Scope {
        Scope { os, ..self }
    }

    /// Only on these device backends.
    pub const fn devices(self, devices: &'static [Device]) -> Scope {
        Scope { devices, ..self }
    }

    /// Only in these frameworks or engines.
    pub const fn runtimes(self, runtimes: &'static [Runtime]) -> Scope {
        Scope { runtimes, ..self }
    }

    /// Only in these applications (which must be known).
    pub const fn apps(self, apps: &'static [App]) -> Scope {
        Scope { apps, ..self }
    }

    /// Only in these phases.
    pub const fn phases(self, phases: &'static [Phase]) -> Scope {
        Scope { phases, ..self }
    }

    /// Whether a fix of this scope fits `s`: each dimension `s` states is
    /// one the scope lists (or the scope lists none), and an application
    /// scope names the application `s` states.
    pub fn admits(&self, s: &Situation) -> bool {
        fn fits<T: PartialEq>(list: &[T], v: Option<T>) -> bool {
            list.is_empty() || v.is_none_or(|v| list.contains(&v))
        }
        fits(self.os, s.os)
            && fits(self.devices, s.device)
            && fits(self.runtimes, s.runtime)
            && fits(self.phases, s.phase)
            && (self.apps.is_empty() || s.app.is_some_and(|a| self.apps.contains(&a)))
    }
}

/// Runtimes that run a job batch by batch (not a serving engine with its own
/// scheduler).
const BATCHED: &[Runtime] = &[
    Runtime::Pytorch,
    Runtime::Tensorflow,
    Runtime::Jax,
    Runtime::Onnxruntime,
    Runtime::Cupy,
    Runtime::Paddle,
    Runtime::Nccl,
    Runtime::LuaTorch,
    Runtime::Mlx,
    Runtime::Tensorrt,
    Runtime::Ctranslate2,
];
/// PyTorch, and NCCL errors raised inside PyTorch jobs.
const TORCH: &[Runtime] = &[Runtime::Pytorch, Runtime::Nccl];
/// Backends that nvidia-smi, rocm-smi or xpu-smi can list processes on.
const DISCRETE: &[Device] = &[Device::Cuda, Device::Rocm, Device::Xpu];
/// PyTorch's caching allocator configuration (CUDA and ROCm builds).
const CACHING: &[Device] = &[Device::Cuda, Device::Rocm];
/// Every phase that runs the model on data.
const RUNNING: &[Phase] = &[
    Phase::Compiling,
    Phase::Training,
    Phase::Evaluation,
    Phase::Inference,
    Phase::Generation,
];
const TRAINING: &[Phase] = &[Phase::Training, Phase::Compiling];
const NOT_TRAINING: &[Phase] = &[
    Phase::Loading,
    Phase::Inference,
    Phase::Generation,
    Phase::Serving,
];

/// The one table of remedy ids: the variant, its stable kebab-case id (the
/// JSON contracts' form; ids are never renamed, estimate and lint keep them
/// in their output) and where the fix applies.
macro_rules! remedy_ids {
    ($( $var:ident = $name:literal, $scope:expr; )*) => {
        /// A remedy's id: one variant per entry of [`REMEDIES`], so an id that does
        /// not exist cannot be written (explain's fixes, estimate's plans, lint's
        /// rules all name remedies with it). Serialises and prints as the stable
        /// kebab-case string (`expandable-segments`), the JSON contracts' form.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum RemedyId {
            $( #[doc = concat!("`", $name, "`.")] $var, )*
        }

        impl RemedyId {
            /// Every id, in [`REMEDIES`]' order.
            pub const ALL: &'static [RemedyId] = &[$( RemedyId::$var, )*];

            /// The kebab-case id.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( RemedyId::$var => $name, )*
                }
            }

            /// Where the fix applies.
            pub const fn scope(self) -> Scope {
                match self {
                    $( RemedyId::$var => $scope, )*
                }
            }
        }
    };
}

remedy_ids! {
    ReduceBatch = "reduce-batch", Scope::ANY.runtimes(BATCHED).phases(RUNNING);
    GradientAccumulation = "gradient-accumulation", Scope::ANY.runtimes(TORCH).phases(TRAINING);
    MixedPrecision = "mixed-precision",
        Scope::ANY.runtimes(&[Runtime::Pytorch, Runtime::Nccl, Runtime::Tensorflow, Runtime::Paddle]).phases(TRAINING);
    HalfPrecisionWeights = "half-precision-weights", Scope::ANY.runtimes(TORCH);
    GradientCheckpointing = "gradient-checkpointing",
        Scope::ANY.runtimes(&[Runtime::Pytorch, Runtime::Nccl, Runtime::Jax]).phases(TRAINING);
    Optimizer8bit = "optimizer-8bit", Scope::ANY.runtimes(TORCH).devices(DISCRETE).phases(TRAINING);
    Lora = "lora", Scope::ANY.runtimes(TORCH).phases(TRAINING);
    Qlora = "qlora", Scope::ANY.runtimes(TORCH).devices(DISCRETE).phases(TRAINING);
    Quantize8bit = "quantize-8bit",
        Scope::ANY.runtimes(&[Runtime::Pytorch, Runtime::LlamaCpp, Runtime::Ctranslate2]).phases(NOT_TRAINING);
    Quantize4bit = "quantize-4bit",
        Scope::ANY
            .runtimes(&[
                Runtime::Pytorch,
                Runtime::LlamaCpp,
                Runtime::Vllm,
                Runtime::Tgi,
                Runtime::Mlx,
                Runtime::Sglang,
            ])
            .phases(NOT_TRAINING);
    CpuOffload = "cpu-offload", Scope::ANY.runtimes(TORCH);
    RankZeroLoading = "rank-zero-loading",
        Scope::ANY.runtimes(TORCH).devices(DISCRETE).phases(&[Phase::Loading]);
    ZeroSharding = "zero-sharding",
        Scope::ANY.runtimes(TORCH).devices(DISCRETE).phases(&[Phase::Training, Phase::Loading]);
    ModelParallel = "model-parallel",
        Scope::ANY
            .runtimes(&[
                Runtime::Pytorch,
                Runtime::Nccl,
                Runtime::Vllm,
                Runtime::LlamaCpp,
                Runtime::Tgi,
                Runtime::Sglang,
            ])
            .devices(DISCRETE);
    EfficientAttention = "efficient-attention", Scope::ANY.runtimes(&[Runtime::Pytorch, Runtime::Jax]);
    // PyTorch does not support expandable segments on Windows
    // (c10/cuda/CUDAAllocatorConfig.cpp warns "expandable_segments not
    // supported on this platform").
    ExpandableSegments = "expandable-segments",
        Scope::ANY.runtimes(TORCH).devices(CACHING).os(&[Os::Linux]);
    MaxSplitSize = "max-split-size", Scope::ANY.runtimes(TORCH).devices(CACHING);
    EmptyCacheBetweenPhases = "empty-cache-between-phases",
        Scope::ANY.runtimes(&[Runtime::Pytorch, Runtime::Nccl, Runtime::Tensorflow]);
    // Already in effect where the phase is generation (`generate` runs
    // under no_grad) or serving.
    InferenceMode = "inference-mode",
        Scope::ANY.runtimes(&[Runtime::Pytorch]).phases(&[Phase::Evaluation, Phase::Inference]);
    ReleaseReferences = "release-references", Scope::ANY.runtimes(TORCH).phases(RUNNING);
    RecordMemoryHistory = "record-memory-history",
        Scope::ANY.runtimes(&[Runtime::Pytorch, Runtime::Nccl, Runtime::Jax]).devices(&[Device::Cuda, Device::Rocm, Device::Tpu]);
    ReduceInputSize = "reduce-input-size", Scope::ANY;
    DiffusersSlicing = "diffusers-slicing", Scope::ANY.runtimes(&[Runtime::Pytorch]).apps(&[App::Diffusers]);
    DiffusersCpuOffload = "diffusers-cpu-offload", Scope::ANY.runtimes(&[Runtime::Pytorch]).apps(&[App::Diffusers]);
    A1111Medvram = "a1111-medvram", Scope::ANY.apps(&[App::A1111]);
    A1111Lowvram = "a1111-lowvram", Scope::ANY.apps(&[App::A1111]);
    ComfyuiLowvram = "comfyui-lowvram", Scope::ANY.apps(&[App::Comfyui]);
    VllmGpuMemoryUtilization = "vllm-gpu-memory-utilization", Scope::ANY.apps(&[App::Vllm]);
    VllmMaxModelLen = "vllm-max-model-len", Scope::ANY.apps(&[App::Vllm]);
    VllmKvCacheDtype = "vllm-kv-cache-dtype", Scope::ANY.apps(&[App::Vllm]);
    VllmTensorParallel = "vllm-tensor-parallel", Scope::ANY.runtimes(&[Runtime::Pytorch, Runtime::Vllm, Runtime::Tgi]).devices(DISCRETE);
    VllmEnforceEager = "vllm-enforce-eager", Scope::ANY.apps(&[App::Vllm]);
    SglangMemFractionStatic = "sglang-mem-fraction-static", Scope::ANY.runtimes(&[Runtime::Sglang]);
    LlamacppGpuLayers = "llamacpp-gpu-layers", Scope::ANY.runtimes(&[Runtime::LlamaCpp]);
    LlamacppContext = "llamacpp-context", Scope::ANY.runtimes(&[Runtime::LlamaCpp]);
    LlamacppKvCacheQuant = "llamacpp-kv-cache-quant", Scope::ANY.runtimes(&[Runtime::LlamaCpp]);
    LlamacppBatch = "llamacpp-batch", Scope::ANY.runtimes(&[Runtime::LlamaCpp]);
    TfMemoryGrowth = "tf-memory-growth", Scope::ANY.runtimes(&[Runtime::Tensorflow]);
    TfMemoryLimit = "tf-memory-limit", Scope::ANY.runtimes(&[Runtime::Tensorflow]);
    TfCudaMallocAsync = "tf-cuda-malloc-async", Scope::ANY.runtimes(&[Runtime::Tensorflow]).devices(&[Device::Cuda]);
    TfReportAllocations = "tf-report-allocations", Scope::ANY.runtimes(&[Runtime::Tensorflow]);
    // The GPU pool's settings (XLA_PYTHON_CLIENT_*): not TPU.
    JaxNoPreallocate = "jax-no-preallocate", Scope::ANY.runtimes(&[Runtime::Jax]).devices(CACHING);
    JaxMemFraction = "jax-mem-fraction", Scope::ANY.runtimes(&[Runtime::Jax]).devices(CACHING);
    JaxPlatformAllocator = "jax-platform-allocator", Scope::ANY.runtimes(&[Runtime::Jax]).devices(CACHING);
    JaxRematerialize = "jax-rematerialize", Scope::ANY.runtimes(&[Runtime::Jax]);
    FreeOtherProcesses = "free-other-processes", Scope::ANY.devices(DISCRETE);
    RaiseMemoryFraction = "raise-memory-fraction", Scope::ANY.runtimes(TORCH);
    FixAllocationSize = "fix-allocation-size", Scope::ANY;
    DisableSysmemFallback = "disable-sysmem-fallback", Scope::ANY.os(&[Os::Windows]).devices(&[Device::Cuda]);
    DisableCudaGraphs = "disable-cuda-graphs",
        Scope::ANY.runtimes(&[Runtime::Pytorch, Runtime::Nccl, Runtime::Vllm]).devices(CACHING);
    NcclDebug = "nccl-debug", Scope::ANY.runtimes(TORCH).devices(CACHING);
    NcclReduceBuffers = "nccl-reduce-buffers", Scope::ANY.runtimes(TORCH).devices(CACHING);
    TgiMaxBatchPrefillTokens = "tgi-max-batch-prefill-tokens", Scope::ANY.runtimes(&[Runtime::Tgi]);
    OnnxruntimeArena = "onnxruntime-arena", Scope::ANY.runtimes(&[Runtime::Onnxruntime]);
    CupyMemoryPool = "cupy-memory-pool", Scope::ANY.runtimes(&[Runtime::Cupy, Runtime::Rapids]);
    PaddleMemoryFlags = "paddle-memory-flags", Scope::ANY.runtimes(&[Runtime::Paddle]);
    MpsHighWatermark = "mps-high-watermark", Scope::ANY.runtimes(&[Runtime::Pytorch]).devices(&[Device::Mps]);
    XpuRelaxedAllocationLimits = "xpu-relaxed-allocation-limits", Scope::ANY.devices(&[Device::Xpu]);
    CudnnWorkspace = "cudnn-workspace",
        Scope::ANY.runtimes(&[Runtime::Pytorch, Runtime::Nccl, Runtime::Tensorflow]).devices(&[Device::Cuda]);
    UnloadModels = "unload-models", Scope::ANY;
    BiggerGpu = "bigger-gpu", Scope::ANY;
}

impl RemedyId {
    /// The id spelled `s`, if there is one.
    pub fn parse(s: &str) -> Option<RemedyId> {
        RemedyId::ALL.iter().copied().find(|id| id.as_str() == s)
    }

    /// Its entry in [`REMEDIES`] (every id has one: checked by a test).
    pub fn remedy(self) -> Option<&'static Remedy> {
        get(self)
    }
}

impl std::fmt::Display for RemedyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RemedyId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl PartialEq<&str> for RemedyId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A paste-ready piece of code for one flavor.
#[derive(Debug, Serialize)]
pub struct Snippet {
    /// What it is written for.
    pub flavor: Flavor,
    /// The code, ready to paste.
    pub code: &'static str,
}

/// One fix from the ladder.
#[derive(Debug, Serialize)]
pub struct Remedy {
    /// Stable kebab-case id, e.g. `expandable-segments`.
    pub id: RemedyId,
    /// Imperative one-line title.
    pub title: &'static str,
    /// One line: why it lowers memory, and what it costs.
    pub why: &'static str,
    /// Snippets, most common flavor first.
    pub snippets: &'static [Snippet],
}

impl Remedy {
    /// The first snippet whose flavor appears in `preferred` (in that order),
    /// with no fallback: a JAX user must not get a PyTorch snippet.
    pub fn snippet_in(&self, preferred: &[Flavor]) -> Option<&'static Snippet> {
        preferred
            .iter()
            .find_map(|f| self.snippets.iter().find(|s| s.flavor == *f))
    }

    /// The first snippet whose flavor appears in `preferred` (in that order),
    /// else the first snippet.
    pub fn snippet_for(&self, preferred: &[Flavor]) -> Option<&'static Snippet> {
        preferred
            .iter()
            .find_map(|f| self.snippets.iter().find(|s| s.flavor == *f))
            .or_else(|| self.snippets.first())
    }
}

/// Looks a remedy up by id.
pub fn get(id: RemedyId) -> Option<&'static Remedy> {
    REMEDIES.iter().find(|r| r.id == id)
}

/// Looks a remedy up by its kebab-case id (ids read from JSON or a user).
pub fn find(id: &str) -> Option<&'static Remedy> {
    RemedyId::parse(id).and_then(get)
}

/// Two remedies a plan never combines, and why.
#[derive(Debug, Serialize)]
pub struct Incompatible {
    /// One remedy id.
    pub a: RemedyId,
    /// The other.
    pub b: RemedyId,
    /// What goes wrong together, in one sentence.
    pub why: &'static str,
    /// Where that is stated.
    pub source: &'static str,
}

/// THE incompatibility table: pairs of remedies that do not run together as
/// the snippets of this catalogue write them. Order within a pair does not
/// matter ([`incompatible`]).
pub static INCOMPATIBLE: &[Incompatible] = &[
    Incompatible {
        a: RemedyId::Qlora,
        b: RemedyId::ZeroSharding,
        why: "bitsandbytes 4-bit weights are not partitioned by ZeRO-3 unless stored in the compute dtype (bnb_4bit_quant_storage, PEFT 0.10+ with accelerate's ZeRO-3 setup), which the QLoRA snippet does not set",
        source: "https://huggingface.co/docs/peft/accelerate/deepspeed (\"DeepSpeed-Zero3 and bitsandbytes are currently not compatible\" before PEFT 0.10; the QLoRA + ZeRO-3 section)",
    },
    Incompatible {
        a: RemedyId::Qlora,
        b: RemedyId::ModelParallel,
        why: "Megatron-LM's tensor parallelism trains its own model classes and loads neither bitsandbytes-quantized weights nor PEFT adapters",
        source: "https://github.com/NVIDIA/Megatron-LM (pretrain_gpt.py: Megatron's GPTModel, no bitsandbytes or PEFT)",
    },
    Incompatible {
        a: RemedyId::Lora,
        b: RemedyId::ModelParallel,
        why: "Megatron-LM's tensor parallelism trains its own model classes; PEFT's LoRA adapters wrap Hugging Face modules",
        source: "https://github.com/NVIDIA/Megatron-LM (pretrain_gpt.py: Megatron's GPTModel, no PEFT)",
    },
    Incompatible {
        a: RemedyId::Optimizer8bit,
        b: RemedyId::CpuOffload,
        why: "ZeRO-Offload runs the optimizer step on the CPU with DeepSpeed's CPU Adam; a bitsandbytes optimizer keeps its states on the GPU, and DeepSpeed refuses a client optimizer under offload",
        source: "deepspeed/runtime/engine.py _configure_basic_optimizer: \"You are using ZeRO-Offload with a client provided optimizer … Please either use deepspeed.ops.adam.DeepSpeedCPUAdam or set an optimizer in your ds-config\"",
    },
    Incompatible {
        a: RemedyId::Optimizer8bit,
        b: RemedyId::ModelParallel,
        why: "Megatron-LM builds its own (distributed) optimizer; bitsandbytes optimizers plug into PyTorch or the Hugging Face Trainer",
        source: "https://github.com/NVIDIA/Megatron-LM (megatron/core/optimizer: Adam/SGD only)",
    },
];

/// The entry for `a` and `b` (either order), when they do not combine.
pub fn incompatible(a: RemedyId, b: RemedyId) -> Option<&'static Incompatible> {
    INCOMPATIBLE
        .iter()
        .find(|i| (i.a == a && i.b == b) || (i.a == b && i.b == a))
}

/// Every remedy; ids are unique (checked by a test).
pub static REMEDIES: &[Remedy] = &[
    // ---- Capacity: make the job itself smaller ----
    Remedy {
        id: RemedyId::ReduceBatch,
        title: "Reduce the batch size",
        why: "Activations grow linearly with the batch, so halving it roughly halves activation memory; costs throughput (and changes the optimisation unless you add gradient accumulation).",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "train_loader = DataLoader(dataset, batch_size=batch_size // 2)  # halve until it fits\n# the largest batch that fits, found by running the step: oomkit probe --max 256 -- python train.py --batch-size {batch}",
            },
            Snippet {
                flavor: Flavor::Transformers,
                code: "TrainingArguments(output_dir=\"out\", per_device_train_batch_size=4, gradient_accumulation_steps=8)",
            },
            Snippet {
                flavor: Flavor::Tensorflow,
                code: "model.fit(x_train, y_train, batch_size=batch_size // 2)  # halve until it fits",
            },
            Snippet {
                flavor: Flavor::Jax,
                code: "# split each step's batch into micro-batches and average their gradients\nmicro = jnp.array_split(batch, 4)  # a quarter of the activations at a time\ngrads = [jax.grad(loss_fn)(params, m) for m in micro]\ngrads = jax.tree_util.tree_map(lambda *g: sum(g) / len(g), *grads)",
            },
            Snippet {
                flavor: Flavor::Diffusers,
                code: "images = pipe(prompt, num_images_per_prompt=1).images  # generate one image per call",
            },
        ],
    },
    Remedy {
        id: RemedyId::GradientAccumulation,
        title: "Accumulate gradients over several small micro-batches",
        why: "Only one micro-batch's activations are alive at a time while the optimizer still sees micro-batch x steps samples; costs wall-clock time, and the loss must be divided by the step count so gradients average instead of sum.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "TrainingArguments(output_dir=\"out\", per_device_train_batch_size=4, gradient_accumulation_steps=8)  # effective batch 32",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "accum_steps = 8\noptimizer.zero_grad(set_to_none=True)\nfor i, (x, y) in enumerate(loader):\n    loss = criterion(model(x), y) / accum_steps  # scale so the gradients average\n    loss.backward()\n    if (i + 1) % accum_steps == 0:\n        optimizer.step()\n        optimizer.zero_grad(set_to_none=True)",
            },
            Snippet {
                flavor: Flavor::Accelerate,
                code: "accelerator = Accelerator(gradient_accumulation_steps=8)\nmodel, optimizer, loader = accelerator.prepare(model, optimizer, loader)\nfor x, y in loader:\n    with accelerator.accumulate(model):\n        accelerator.backward(criterion(model(x), y))  # scales the loss for you\n        optimizer.step()\n        optimizer.zero_grad()",
            },
            Snippet {
                flavor: Flavor::Deepspeed,
                code: "{\n  \"train_micro_batch_size_per_gpu\": 4,\n  \"gradient_accumulation_steps\": 8\n}",
            },
        ],
    },
    Remedy {
        id: RemedyId::MixedPrecision,
        title: "Train with mixed precision (bf16 or fp16 autocast)",
        why: "Matmuls and convolutions run in 16-bit, so the activations saved for backward take about half the bytes while master weights stay fp32; fp16 needs a GradScaler against underflow, bf16 needs an Ampere or newer GPU.",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "scaler = torch.amp.GradScaler(\"cuda\")  # fp16 only; not needed with bfloat16\nfor x, y in loader:\n    optimizer.zero_grad(set_to_none=True)\n    with torch.autocast(\"cuda\", dtype=torch.float16):  # torch.bfloat16 on Ampere+\n        loss = criterion(model(x), y)\n    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()",
            },
            Snippet {
                flavor: Flavor::Transformers,
                code: "TrainingArguments(output_dir=\"out\", bf16=True)  # fp16=True on GPUs before Ampere",
            },
            Snippet {
                flavor: Flavor::Accelerate,
                code: "accelerator = Accelerator(mixed_precision=\"bf16\")  # or: accelerate launch --mixed_precision bf16 train.py",
            },
            Snippet {
                flavor: Flavor::Tensorflow,
                code: "import keras\n\nkeras.mixed_precision.set_global_policy(\"mixed_float16\")  # fit() adds loss scaling\n# keep the output layer in float32: layers.Activation(\"softmax\", dtype=\"float32\")",
            },
            Snippet {
                flavor: Flavor::Deepspeed,
                code: "{\n  \"bf16\": {\"enabled\": true}\n}",
            },
        ],
    },
    Remedy {
        id: RemedyId::HalfPrecisionWeights,
        title: "Load the weights in bf16 or fp16 instead of fp32",
        why: "Each parameter takes 2 bytes instead of 4, halving weight memory (a 7B model: about 28 GB to 14 GB); fp16 can overflow in some models (prefer bf16), and training pure-half weights without fp32 master copies loses precision.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "model = AutoModelForCausalLM.from_pretrained(\n    MODEL_ID,\n    dtype=torch.bfloat16,  # torch.float16 on GPUs before Ampere; torch_dtype= before transformers 4.56\n    device_map=\"cuda\",\n)",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "model = model.half().to(\"cuda\")  # fp16 weights, for inference\n# or: model.to(\"cuda\", dtype=torch.bfloat16)",
            },
            Snippet {
                flavor: Flavor::Diffusers,
                code: "pipe = DiffusionPipeline.from_pretrained(MODEL_ID, torch_dtype=torch.float16, variant=\"fp16\")",
            },
            Snippet {
                flavor: Flavor::A1111,
                code: "REM webui-user.bat: drop --no-half and --precision full, they keep the weights in fp32\nset COMMANDLINE_ARGS=--xformers",
            },
        ],
    },
    Remedy {
        id: RemedyId::GradientCheckpointing,
        title: "Enable gradient checkpointing (activation recomputation)",
        why: "Only activations at checkpoint boundaries are kept and the rest are recomputed during backward, cutting activation memory by roughly 50-70% on transformers at about 20-30% more compute.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={\"use_reentrant\": False})\nmodel.config.use_cache = False  # the KV cache conflicts with checkpointing in training\n# or with Trainer: TrainingArguments(output_dir=\"out\", gradient_checkpointing=True)",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "from torch.utils.checkpoint import checkpoint\n\ndef forward(self, x):\n    for block in self.blocks:\n        x = checkpoint(block, x, use_reentrant=False)  # recomputed in backward\n    return x",
            },
            Snippet {
                flavor: Flavor::Jax,
                code: "block = jax.checkpoint(block)  # see jax-rematerialize",
            },
        ],
    },
    Remedy {
        id: RemedyId::Optimizer8bit,
        title: "Use an 8-bit (optionally paged) AdamW optimizer",
        why: "AdamW keeps two fp32 states per parameter (8 bytes); bitsandbytes' block-wise 8-bit states take about 2 bytes, saving ~6 bytes per parameter, and paged variants spill to CPU RAM on spikes; needs bitsandbytes, with a small accuracy risk.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "TrainingArguments(output_dir=\"out\", optim=\"paged_adamw_8bit\")  # or \"adamw_bnb_8bit\"",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "import bitsandbytes as bnb\n\noptimizer = bnb.optim.AdamW8bit(model.parameters(), lr=2e-5)\n# paged: bnb.optim.PagedAdamW8bit(model.parameters(), lr=2e-5)",
            },
        ],
    },
    Remedy {
        id: RemedyId::Lora,
        title: "Fine-tune LoRA adapters instead of all weights",
        why: "The base weights are frozen and only small low-rank adapters train, so gradients and optimizer state exist for well under 1% of the parameters; frozen weights and activations still need memory, and quality can trail full fine-tuning slightly.",
        snippets: &[Snippet {
            flavor: Flavor::Peft,
            code: "from peft import LoraConfig, get_peft_model\n\nconfig = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=\"all-linear\", task_type=\"CAUSAL_LM\")\nmodel = get_peft_model(model, config)\nmodel.print_trainable_parameters()",
        }],
    },
    Remedy {
        id: RemedyId::Qlora,
        title: "Fine-tune with QLoRA (4-bit NF4 base model plus LoRA)",
        why: "The frozen base model is stored in 4-bit NF4 with double quantization (about 0.5 byte per parameter) while LoRA adapters train in bf16, so a model four times larger fits; slower than LoRA on 16-bit weights because weights are dequantized on the fly.",
        snippets: &[Snippet {
            flavor: Flavor::Peft,
            code: "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\nfrom peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training\n\nbnb_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)\nmodel = AutoModelForCausalLM.from_pretrained(MODEL_ID, quantization_config=bnb_config, device_map=\"auto\")\nmodel = prepare_model_for_kbit_training(model)  # also enables gradient checkpointing\nmodel = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=\"all-linear\", task_type=\"CAUSAL_LM\"))",
        }],
    },
    Remedy {
        id: RemedyId::Quantize8bit,
        title: "Load the model with 8-bit weights",
        why: "LLM.int8() stores linear-layer weights in 1 byte per parameter, half of fp16 (a 7B model: about 14 GB to 7 GB); inference is slower than fp16 and needs bitsandbytes on a CUDA GPU.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\n\nmodel = AutoModelForCausalLM.from_pretrained(\n    MODEL_ID,\n    quantization_config=BitsAndBytesConfig(load_in_8bit=True),\n    device_map=\"auto\",\n)",
            },
            Snippet {
                flavor: Flavor::LlamaCpp,
                code: "llama-quantize model-f16.gguf model-Q8_0.gguf Q8_0\nllama-server -m model-Q8_0.gguf -ngl 99",
            },
        ],
    },
    Remedy {
        id: RemedyId::Quantize4bit,
        title: "Load the model with 4-bit weights (NF4, GGUF Q4_K_M, AWQ/GPTQ)",
        why: "4-bit weights take about 0.5-0.6 byte per parameter, a quarter of fp16 (a 7B model: about 14 GB to 4 GB); costs some quality and dequantization overhead.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "bnb_config = BitsAndBytesConfig(\n    load_in_4bit=True,\n    bnb_4bit_quant_type=\"nf4\",\n    bnb_4bit_use_double_quant=True,\n    bnb_4bit_compute_dtype=torch.bfloat16,\n)\nmodel = AutoModelForCausalLM.from_pretrained(MODEL_ID, quantization_config=bnb_config, device_map=\"auto\")",
            },
            Snippet {
                flavor: Flavor::LlamaCpp,
                code: "llama-quantize model-f16.gguf model-Q4_K_M.gguf Q4_K_M\nllama-server -m model-Q4_K_M.gguf -ngl 99",
            },
            Snippet {
                flavor: Flavor::Vllm,
                code: "vllm serve MODEL-AWQ --quantization awq  # a pre-quantized AWQ or GPTQ checkpoint",
            },
            Snippet {
                flavor: Flavor::Tgi,
                code: "text-generation-launcher --model-id MODEL --quantize bitsandbytes-nf4",
            },
        ],
    },
    Remedy {
        id: RemedyId::CpuOffload,
        title: "Offload layers or optimizer state to CPU RAM",
        why: "What does not fit stays in CPU RAM (or on disk) and is moved to the GPU when needed, so large models fit; every offloaded byte crosses PCIe each step, often several times slower.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "model = AutoModelForCausalLM.from_pretrained(\n    MODEL_ID,\n    dtype=torch.bfloat16,\n    device_map=\"auto\",\n    max_memory={0: \"20GiB\", \"cpu\": \"64GiB\"},  # below the card's size: leave room for activations\n    offload_folder=\"offload\",  # disk, if CPU RAM runs out too\n)",
            },
            Snippet {
                flavor: Flavor::Deepspeed,
                code: "{\n  \"zero_optimization\": {\n    \"stage\": 3,\n    \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true},\n    \"offload_param\": {\"device\": \"cpu\", \"pin_memory\": true}\n  }\n}",
            },
            Snippet {
                flavor: Flavor::Accelerate,
                code: "from accelerate import init_empty_weights, load_checkpoint_and_dispatch\n\nwith init_empty_weights():\n    model = MyModel(config)\nmodel = load_checkpoint_and_dispatch(\n    model, checkpoint=\"ckpt_dir\", device_map=\"auto\", max_memory={0: \"20GiB\", \"cpu\": \"64GiB\"}\n)",
            },
        ],
    },
    Remedy {
        id: RemedyId::RankZeroLoading,
        title: "Load the weights once and shard them, not a full copy per rank",
        why: "Under FSDP or DeepSpeed every rank that calls from_pretrained (or .to(device)) first materialises the whole model; loading on rank 0 only (the others on the meta device) and broadcasting into the shards keeps one copy in CPU RAM and only a shard on each GPU; costs a broadcast at start-up.",
        snippets: &[
            Snippet {
                flavor: Flavor::Accelerate,
                code: "# accelerate config (FSDP): only rank 0 reads the checkpoint, then broadcasts into the shards\nfsdp_config:\n  fsdp_cpu_ram_efficient_loading: true\n  fsdp_sync_module_states: true",
            },
            Snippet {
                flavor: Flavor::Transformers,
                code: "model = AutoModelForCausalLM.from_pretrained(\n    MODEL_ID,\n    dtype=torch.bfloat16,\n    low_cpu_mem_usage=True,  # no full fp32 copy before the weights load\n)  # no device_map and no .to(\"cuda\") under FSDP/DeepSpeed: let the wrapper place the shards",
            },
            Snippet {
                flavor: Flavor::Deepspeed,
                code: "import deepspeed\n\nwith deepspeed.zero.Init(config_dict_or_path=\"ds_config.json\"):  # ZeRO-3: parameters are partitioned as they are created\n    model = AutoModelForCausalLM.from_pretrained(MODEL_ID, dtype=torch.bfloat16)",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "rank0 = torch.distributed.get_rank() == 0\nwith torch.device(\"cpu\" if rank0 else \"meta\"):\n    model = build_model()  # real weights on rank 0 only\nmodel = FSDP(model, device_id=torch.cuda.current_device(), sync_module_states=True,\n             param_init_fn=None if rank0 else (lambda m: m.to_empty(device=torch.cuda.current_device(), recurse=False)))",
            },
        ],
    },
    Remedy {
        id: RemedyId::ZeroSharding,
        title: "Shard optimizer state, gradients and weights across GPUs (ZeRO / FSDP)",
        why: "Each of N data-parallel GPUs keeps about 1/N of the optimizer state (ZeRO-1), gradients (ZeRO-2) and parameters (ZeRO-3 / FSDP full shard) instead of a full replica; costs extra communication and only helps with more than one GPU.",
        snippets: &[
            Snippet {
                flavor: Flavor::Deepspeed,
                code: "{\n  \"train_micro_batch_size_per_gpu\": 4,\n  \"bf16\": {\"enabled\": true},\n  \"zero_optimization\": {\"stage\": 2, \"overlap_comm\": true, \"contiguous_gradients\": true}\n}",
            },
            Snippet {
                flavor: Flavor::Transformers,
                code: "TrainingArguments(output_dir=\"out\", deepspeed=\"ds_config.json\")  # or fsdp=\"full_shard auto_wrap\"",
            },
            Snippet {
                flavor: Flavor::Accelerate,
                code: "accelerate launch --num_processes 4 --use_fsdp --fsdp_sharding_strategy FULL_SHARD \\\n  --fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP train.py",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "from torch.distributed.fsdp import fully_shard  # run under torchrun\n\nfor block in model.layers:\n    fully_shard(block)\nfully_shard(model)\noptimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # create after sharding",
            },
        ],
    },
    Remedy {
        id: RemedyId::ModelParallel,
        title: "Split the model across several GPUs with a balanced device map",
        why: "Layers (pipeline) or each layer's matrices (tensor parallel) are spread over GPUs so each holds only its share of the weights; `device_map=\"auto\"` alone can overload one GPU, so cap each with max_memory; needs several GPUs, and naive layer splitting runs them one at a time.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "model = AutoModelForCausalLM.from_pretrained(\n    MODEL_ID,\n    dtype=torch.bfloat16,\n    device_map=\"auto\",  # or \"balanced_low_0\" to keep GPU 0 light for generate()\n    max_memory={0: \"18GiB\", 1: \"22GiB\"},  # caps below each card's size\n)",
            },
            Snippet {
                flavor: Flavor::Accelerate,
                code: "from accelerate import infer_auto_device_map, init_empty_weights\n\nwith init_empty_weights():\n    empty = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(MODEL_ID))\ndevice_map = infer_auto_device_map(empty, max_memory={0: \"18GiB\", 1: \"22GiB\"}, no_split_module_classes=[\"LlamaDecoderLayer\"], dtype=torch.bfloat16)\nmodel = AutoModelForCausalLM.from_pretrained(MODEL_ID, device_map=device_map, dtype=torch.bfloat16)",
            },
            Snippet {
                flavor: Flavor::Transformers,
                code: "device_map = {  # every module must be placed\n    \"transformer.wte\": 0, \"transformer.wpe\": 0, \"transformer.h.0\": 0, \"transformer.h.1\": 0,\n    \"transformer.h.2\": 1, \"transformer.h.3\": 1, \"transformer.ln_f\": 1, \"lm_head\": 1,\n}\nmodel = AutoModelForCausalLM.from_pretrained(MODEL_ID, device_map=device_map)",
            },
            Snippet {
                flavor: Flavor::Vllm,
                code: "vllm serve MODEL --tensor-parallel-size 2",
            },
            Snippet {
                flavor: Flavor::LlamaCpp,
                code: "llama-server -m model.gguf -ngl 99 --split-mode layer --tensor-split 3,1",
            },
            Snippet {
                flavor: Flavor::Tgi,
                code: "text-generation-launcher --model-id MODEL --num-shard 2",
            },
        ],
    },
    Remedy {
        id: RemedyId::EfficientAttention,
        title: "Use a memory-efficient attention kernel (SDPA, FlashAttention, xformers)",
        why: "Fused kernels never materialize the seq x seq attention-score matrix, so attention memory grows linearly instead of quadratically with sequence length or image size; FlashAttention-2 needs fp16/bf16 on an Ampere or newer GPU.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "model = AutoModelForCausalLM.from_pretrained(\n    MODEL_ID,\n    dtype=torch.bfloat16,\n    attn_implementation=\"sdpa\",  # or \"flash_attention_2\" (pip install flash-attn)\n)",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # not softmax(q @ k.T) @ v",
            },
            Snippet {
                flavor: Flavor::Diffusers,
                code: "pipe.enable_xformers_memory_efficient_attention()  # PyTorch 2 already uses SDPA by default",
            },
            Snippet {
                flavor: Flavor::A1111,
                code: "REM webui-user.bat\nset COMMANDLINE_ARGS=--xformers\n# webui-user.sh (or --opt-sdp-attention without xformers)\nexport COMMANDLINE_ARGS=\"--opt-sdp-attention\"",
            },
            Snippet {
                flavor: Flavor::Jax,
                code: "out = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=\"cudnn\")  # q, k, v: [batch, seq, heads, dim]",
            },
        ],
    },
    // ---- Allocator and fragmentation ----
    Remedy {
        id: RemedyId::ExpandableSegments,
        title: "Let the caching allocator grow segments instead of splitting them",
        why: "Reserved-but-unallocated memory is stuck in partly used blocks; expandable segments map new pages into one growing segment so that free space can be reused (Linux, CUDA >= 11.4).",
        snippets: &[
            Snippet {
                flavor: Flavor::Shell,
                code: "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "import os\nos.environ[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"expandable_segments:True\"  # before the first CUDA call\nimport torch",
            },
        ],
    },
    Remedy {
        id: RemedyId::MaxSplitSize,
        title: "Stop the allocator splitting large blocks and reclaim cache early",
        why: "Blocks over max_split_size_mb are never split, so large free blocks stay whole for large requests, and garbage_collection_threshold frees unused cached blocks before the limit is hit; a little slower from extra cudaMalloc calls (prefer expandable_segments where it works; this also works on Windows).",
        snippets: &[
            Snippet {
                flavor: Flavor::Shell,
                code: "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,garbage_collection_threshold:0.6\n# Windows: set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,garbage_collection_threshold:0.6",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "import os\nos.environ[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"max_split_size_mb:128,garbage_collection_threshold:0.6\"  # before the first CUDA call\nimport torch",
            },
        ],
    },
    Remedy {
        id: RemedyId::EmptyCacheBetweenPhases,
        title: "Drop references and empty the cache between phases",
        why: "empty_cache() returns cached-but-unused blocks to the driver so the next phase, another process or a non-PyTorch library (cuDNN, NCCL) can use them; it cannot free tensors that Python still references, and calling it every step only slows training.",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "import gc\n\ndel outputs, loss  # drop the references first: empty_cache cannot free live tensors\ngc.collect()  # break reference cycles\ntorch.cuda.empty_cache()  # hand the now-unused cache back to the driver",
            },
            Snippet {
                flavor: Flavor::Tensorflow,
                code: "import gc\n\ntf.keras.backend.clear_session()  # drop Keras graphs and models you no longer use\ngc.collect()  # TF's pool keeps the memory, but the freed space is reusable inside it",
            },
        ],
    },
    // ---- Leaks and inference ----
    Remedy {
        id: RemedyId::InferenceMode,
        title: "Run evaluation and inference without autograd",
        why: "Without autograd no activations are saved for a backward pass, so inference needs roughly the weights plus one layer's activations; tensors created under inference_mode cannot be used in autograd later.",
        snippets: &[Snippet {
            flavor: Flavor::Pytorch,
            code: "model.eval()  # eval behaviour for dropout and batch norm\nwith torch.inference_mode():  # or torch.no_grad()\n    for x, y in val_loader:\n        val_loss += criterion(model(x), y).item()\nmodel.train()",
        }],
    },
    Remedy {
        id: RemedyId::ReleaseReferences,
        title: "Stop keeping CUDA tensors and their graphs alive across steps",
        why: "A loss appended to a list, a running total built from tensors or stored outputs keep the tensor and often its whole autograd graph alive, so memory climbs step by step; store Python floats or detached CPU copies instead, at no cost.",
        snippets: &[Snippet {
            flavor: Flavor::Pytorch,
            code: "losses.append(loss.item())  # not losses.append(loss): that keeps the graph\ntotal_loss += loss.item()  # not total_loss += loss\npreds.append(logits.detach().cpu())  # not the CUDA tensor\ndel outputs, loss  # before the next large allocation\noptimizer.zero_grad(set_to_none=True)  # every step",
        }],
    },
    Remedy {
        id: RemedyId::RecordMemoryHistory,
        title: "Record a memory snapshot to see what holds the memory",
        why: "The allocator records a stack trace for every allocation, so the snapshot at the OOM shows which code owns each block; recording costs some speed and host RAM, so enable it only for a reproduction.",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "torch.cuda.memory._record_memory_history(max_entries=100000)\ntry:\n    train()  # run until the OOM\nfinally:\n    torch.cuda.memory._dump_snapshot(\"oom.pickle\")\n    torch.cuda.memory._record_memory_history(enabled=None)\n# then: oomkit snapshot oom.pickle  (what held the memory at the peak, by source line)",
            },
            Snippet {
                flavor: Flavor::Shell,
                code: "oomkit snapshot oom.pickle  # or drop the file on https://pytorch.org/memory_viz",
            },
            Snippet {
                flavor: Flavor::Jax,
                code: "jax.profiler.save_device_memory_profile(\"memory.prof\")  # view with: pprof --web memory.prof",
            },
        ],
    },
    Remedy {
        id: RemedyId::ReduceInputSize,
        title: "Shrink the input: shorter sequences, lower resolution, or chunks",
        why: "Activations scale with sequence length (quadratically in naive attention) and with image area, so halving length or resolution halves or quarters them; costs context or detail, which processing the input in chunks recovers at the price of more passes.",
        snippets: &[
            Snippet {
                flavor: Flavor::Transformers,
                code: "batch = tokenizer(texts, truncation=True, max_length=512, padding=\"longest\", return_tensors=\"pt\")",
            },
            Snippet {
                flavor: Flavor::Diffusers,
                code: "image = pipe(prompt, height=768, width=768).images[0]  # was 1024x1024",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "with torch.inference_mode():\n    out = torch.cat([model(chunk) for chunk in x.split(4)])  # 4 samples at a time",
            },
            Snippet {
                flavor: Flavor::Tensorflow,
                code: "images = tf.image.resize(images, (256, 256))  # was 512x512: a quarter of the activations",
            },
        ],
    },
    // ---- Image generation front-ends ----
    Remedy {
        id: RemedyId::DiffusersSlicing,
        title: "Slice attention and slice or tile the VAE",
        why: "Attention is computed in slices and the VAE decodes one image (slicing) or one tile (tiling) at a time, so the decode peak no longer grows with batch size and resolution; a little slower, and tiling can leave faint seams.",
        snippets: &[Snippet {
            flavor: Flavor::Diffusers,
            code: "pipe.enable_attention_slicing()\npipe.vae.enable_slicing()  # batches of images (older: pipe.enable_vae_slicing())\npipe.vae.enable_tiling()  # large resolutions (older: pipe.enable_vae_tiling())",
        }],
    },
    Remedy {
        id: RemedyId::DiffusersCpuOffload,
        title: "Offload pipeline components to CPU RAM",
        why: "Components stay in CPU RAM and move to the GPU only while they run: model offload moves whole models (small slowdown), sequential offload moves submodule by submodule (lowest VRAM, much slower); needs accelerate and enough system RAM.",
        snippets: &[Snippet {
            flavor: Flavor::Diffusers,
            code: "pipe = DiffusionPipeline.from_pretrained(MODEL_ID, torch_dtype=torch.float16)\npipe.enable_model_cpu_offload()  # and do not call pipe.to(\"cuda\")\n# lowest VRAM, much slower: pipe.enable_sequential_cpu_offload()",
        }],
    },
    Remedy {
        id: RemedyId::A1111Medvram,
        title: "Start the WebUI with --medvram",
        why: "Keeps only one of the text encoder, UNet and VAE on the GPU at a time and parks the others in CPU RAM; a modest slowdown (--medvram-sdxl applies it to SDXL models only).",
        snippets: &[Snippet {
            flavor: Flavor::A1111,
            code: "REM webui-user.bat\nset COMMANDLINE_ARGS=--medvram --xformers\n# webui-user.sh\nexport COMMANDLINE_ARGS=\"--medvram --xformers\"",
        }],
    },
    Remedy {
        id: RemedyId::A1111Lowvram,
        title: "Start the WebUI with --lowvram",
        why: "Splits the UNet into parts and keeps only the running part on the GPU, enough for 4 GB cards; much slower than --medvram, so use it only when --medvram still fails.",
        snippets: &[Snippet {
            flavor: Flavor::A1111,
            code: "REM webui-user.bat\nset COMMANDLINE_ARGS=--lowvram --xformers\n# webui-user.sh\nexport COMMANDLINE_ARGS=\"--lowvram --xformers\"",
        }],
    },
    Remedy {
        id: RemedyId::ComfyuiLowvram,
        title: "Start ComfyUI in low-VRAM mode and decode the VAE in tiles",
        why: "--lowvram splits the UNet and offloads parts to CPU RAM, --novram offloads even more, and --disable-smart-memory moves idle models to RAM instead of caching them in VRAM; all trade speed for memory, and tiled VAE decoding caps the decode peak.",
        snippets: &[Snippet {
            flavor: Flavor::Comfyui,
            code: "python main.py --lowvram\n# still OOM: python main.py --novram\n# free VRAM between runs: python main.py --disable-smart-memory\n# in the workflow: replace \"VAE Decode\" with \"VAE Decode (Tiled)\"",
        }],
    },
    // ---- vLLM ----
    Remedy {
        id: RemedyId::VllmGpuMemoryUtilization,
        title: "Tune vLLM's gpu_memory_utilization",
        why: "vLLM claims gpu_memory_utilization x total VRAM (default 0.9) for weights, activations and KV cache; raising it enlarges the KV cache, lowering it leaves room for other processes, which also count against the budget; too high and CUDA graphs or sampling OOM later.",
        snippets: &[
            Snippet {
                flavor: Flavor::Vllm,
                code: "vllm serve MODEL --gpu-memory-utilization 0.95",
            },
            Snippet {
                flavor: Flavor::Vllm,
                code: "from vllm import LLM\n\nllm = LLM(model=MODEL_ID, gpu_memory_utilization=0.95)",
            },
        ],
    },
    Remedy {
        id: RemedyId::VllmMaxModelLen,
        title: "Cap vLLM's max_model_len",
        why: "The KV cache must hold at least one sequence of max_model_len tokens, which defaults to the model's full context (often 32k-128k); a smaller cap fits in less memory at the cost of shorter prompt plus output.",
        snippets: &[
            Snippet {
                flavor: Flavor::Vllm,
                code: "vllm serve MODEL --max-model-len 8192",
            },
            Snippet {
                flavor: Flavor::Vllm,
                code: "from vllm import LLM\n\nllm = LLM(model=MODEL_ID, max_model_len=8192)",
            },
        ],
    },
    Remedy {
        id: RemedyId::VllmKvCacheDtype,
        title: "Store vLLM's KV cache in FP8",
        why: "An FP8 KV cache takes half the bytes of fp16/bf16, so about twice as many tokens fit; a small accuracy cost, and support depends on the GPU and attention backend.",
        snippets: &[
            Snippet {
                flavor: Flavor::Vllm,
                code: "vllm serve MODEL --kv-cache-dtype fp8",
            },
            Snippet {
                flavor: Flavor::Vllm,
                code: "from vllm import LLM\n\nllm = LLM(model=MODEL_ID, kv_cache_dtype=\"fp8\")",
            },
        ],
    },
    Remedy {
        id: RemedyId::VllmTensorParallel,
        title: "Shard the model across GPUs with vLLM tensor parallelism",
        why: "Weights and KV cache are split across N GPUs, so each holds about 1/N; needs N GPUs (N must divide the attention heads) and benefits from a fast interconnect.",
        snippets: &[
            Snippet {
                flavor: Flavor::Vllm,
                code: "vllm serve MODEL --tensor-parallel-size 2",
            },
            Snippet {
                flavor: Flavor::Vllm,
                code: "from vllm import LLM\n\nllm = LLM(model=MODEL_ID, tensor_parallel_size=2)",
            },
        ],
    },
    Remedy {
        id: RemedyId::VllmEnforceEager,
        title: "Run vLLM in eager mode (no CUDA graphs)",
        why: "Skips CUDA-graph capture, whose graphs and private memory pools cost from hundreds of MiB to a few GiB; decoding gets slower, especially at small batch sizes.",
        snippets: &[
            Snippet {
                flavor: Flavor::Vllm,
                code: "vllm serve MODEL --enforce-eager",
            },
            Snippet {
                flavor: Flavor::Vllm,
                code: "from vllm import LLM\n\nllm = LLM(model=MODEL_ID, enforce_eager=True)",
            },
        ],
    },
    // ---- SGLang ----
    Remedy {
        id: RemedyId::SglangMemFractionStatic,
        title: "Give SGLang's weights and KV cache pool a larger --mem-fraction-static",
        why: "SGLang sizes its KV cache pool as what is left of mem_fraction_static x the GPU's memory once the weights are loaded (python/sglang/srt/model_executor/model_runner.py, profile_max_num_token); when the weights take all of it, no token fits and start-up stops. Raise it in small steps: the rest of the GPU holds activations and CUDA graphs, so an OOM while serving is fixed the other way, by lowering it.",
        snippets: &[Snippet {
            flavor: Flavor::Shell,
            code: "python -m sglang.launch_server --model-path MODEL --mem-fraction-static 0.92
# or spread the weights over more GPUs: --tp 2
# an OOM while serving instead: lower it (0.8), or cap --chunked-prefill-size / --max-running-requests",
        }],
    },
    // ---- llama.cpp / Ollama ----
    Remedy {
        id: RemedyId::LlamacppGpuLayers,
        title: "Offload fewer layers to the GPU (-ngl)",
        why: "Only N transformer layers are placed in VRAM and the rest run on the CPU, so GPU weight memory shrinks layer by layer; every layer left on the CPU slows generation noticeably.",
        snippets: &[Snippet {
            flavor: Flavor::LlamaCpp,
            code: "llama-server -m model.gguf -ngl 20  # lower until it loads; 99 = all layers\n# Ollama: /set parameter num_gpu 20, or \"options\": {\"num_gpu\": 20} in the API request",
        }],
    },
    Remedy {
        id: RemedyId::LlamacppContext,
        title: "Use a smaller context (-c)",
        why: "The KV cache grows linearly with the context size, and a large -c (or -c 0, the model's full trained length) can need many GiB; a smaller context frees it at the cost of shorter conversations.",
        snippets: &[Snippet {
            flavor: Flavor::LlamaCpp,
            code: "llama-server -m model.gguf -ngl 99 -c 4096\n# Ollama: /set parameter num_ctx 4096, or OLLAMA_CONTEXT_LENGTH=4096 ollama serve",
        }],
    },
    Remedy {
        id: RemedyId::LlamacppKvCacheQuant,
        title: "Quantize the KV cache to q8_0",
        why: "A q8_0 KV cache takes about half the memory of f16 (q4_0 about a quarter) with little quality loss; a quantized V cache needs flash attention.",
        snippets: &[Snippet {
            flavor: Flavor::LlamaCpp,
            code: "llama-server -m model.gguf -ngl 99 --cache-type-k q8_0 --cache-type-v q8_0\n# the V cache needs flash attention: -fa on (older builds: -fa)\n# Ollama: OLLAMA_FLASH_ATTENTION=1 OLLAMA_KV_CACHE_TYPE=q8_0 ollama serve",
        }],
    },
    Remedy {
        id: RemedyId::LlamacppBatch,
        title: "Lower the batch and micro-batch sizes (-b / -ub)",
        why: "The compute buffer scales with the physical batch (-ub, default 512); -ub 256 -b 256 shrinks it at the cost of slower prompt processing.",
        snippets: &[Snippet {
            flavor: Flavor::LlamaCpp,
            code: "llama-server -m model.gguf -ngl 99 -ub 256 -b 256\n# Ollama: /set parameter num_batch 256",
        }],
    },
    // ---- TensorFlow ----
    Remedy {
        id: RemedyId::TfMemoryGrowth,
        title: "Let TensorFlow allocate GPU memory on demand",
        why: "By default TF maps nearly all VRAM at start-up, starving cuDNN, other processes and other frameworks; memory growth allocates as needed instead. It does not lower the model's own peak, and grown memory is never given back.",
        snippets: &[
            Snippet {
                flavor: Flavor::Tensorflow,
                code: "import tensorflow as tf\n\nfor gpu in tf.config.list_physical_devices(\"GPU\"):\n    tf.config.experimental.set_memory_growth(gpu, True)  # before any op runs",
            },
            Snippet {
                flavor: Flavor::Shell,
                code: "export TF_FORCE_GPU_ALLOW_GROWTH=true",
            },
        ],
    },
    Remedy {
        id: RemedyId::TfMemoryLimit,
        title: "Cap TensorFlow's GPU memory",
        why: "A fixed limit on TF's pool leaves the rest of the GPU to other processes or frameworks sharing it; the model itself gets less, so this only helps with contention.",
        snippets: &[Snippet {
            flavor: Flavor::Tensorflow,
            code: "gpus = tf.config.list_physical_devices(\"GPU\")\ntf.config.set_logical_device_configuration(\n    gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=8192)]  # MiB\n)",
        }],
    },
    Remedy {
        id: RemedyId::TfCudaMallocAsync,
        title: "Use CUDA's async allocator in TensorFlow",
        why: "Replaces TF's BFC allocator with the driver's stream-ordered cudaMallocAsync pool, which fragments less; TF suggests it itself when an OOM looks like fragmentation (CUDA 11.2+).",
        snippets: &[
            Snippet {
                flavor: Flavor::Shell,
                code: "export TF_GPU_ALLOCATOR=cuda_malloc_async",
            },
            Snippet {
                flavor: Flavor::Tensorflow,
                code: "import os\nos.environ[\"TF_GPU_ALLOCATOR\"] = \"cuda_malloc_async\"  # before importing tensorflow\nimport tensorflow as tf",
            },
        ],
    },
    Remedy {
        id: RemedyId::TfReportAllocations,
        title: "Make TensorFlow list live tensors when it runs out of memory",
        why: "With report_tensor_allocations_upon_oom the OOM error lists the tensors allocated at the time and their sizes, showing what filled the pool; diagnostic only, for session-style (tf.compat.v1) runs.",
        snippets: &[Snippet {
            flavor: Flavor::Tensorflow,
            code: "run_options = tf.compat.v1.RunOptions(report_tensor_allocations_upon_oom=True)\nsess.run(train_op, feed_dict=feed, options=run_options)",
        }],
    },
    // ---- JAX ----
    Remedy {
        id: RemedyId::JaxNoPreallocate,
        title: "Stop JAX preallocating most of the GPU",
        why: "JAX grabs 75% of VRAM (90% in older releases) at the first operation; with preallocation off it allocates on demand, so other processes fit; more fragmentation, can be slower, and does not lower JAX's own peak.",
        snippets: &[
            Snippet {
                flavor: Flavor::Shell,
                code: "export XLA_PYTHON_CLIENT_PREALLOCATE=false",
            },
            Snippet {
                flavor: Flavor::Jax,
                code: "import os\nos.environ[\"XLA_PYTHON_CLIENT_PREALLOCATE\"] = \"false\"  # before importing jax\nimport jax",
            },
        ],
    },
    Remedy {
        id: RemedyId::JaxMemFraction,
        title: "Raise the share of VRAM JAX preallocates",
        why: "JAX's pool is XLA_PYTHON_CLIENT_MEM_FRACTION of the GPU (default .75 in current JAX), so a program can OOM with a quarter of the card idle; raising it gives the program that room, leaving less for other processes.",
        snippets: &[
            Snippet {
                flavor: Flavor::Shell,
                code: "export XLA_PYTHON_CLIENT_MEM_FRACTION=.95",
            },
            Snippet {
                flavor: Flavor::Jax,
                code: "import os\nos.environ[\"XLA_PYTHON_CLIENT_MEM_FRACTION\"] = \".95\"  # before importing jax\nimport jax",
            },
        ],
    },
    Remedy {
        id: RemedyId::JaxPlatformAllocator,
        title: "Debug with JAX's platform allocator",
        why: "Allocates and frees exactly what is needed with no pool, so memory is returned at once and leaks or other processes are easy to see; very slow, use only while debugging.",
        snippets: &[Snippet {
            flavor: Flavor::Shell,
            code: "export XLA_PYTHON_CLIENT_ALLOCATOR=platform  # debugging only: very slow",
        }],
    },
    Remedy {
        id: RemedyId::JaxRematerialize,
        title: "Rematerialize activations with jax.checkpoint",
        why: "jax.checkpoint (alias jax.remat) saves only a function's inputs and recomputes its intermediates in the backward pass, trading extra FLOPs for less activation memory.",
        snippets: &[Snippet {
            flavor: Flavor::Jax,
            code: "@jax.checkpoint  # same as jax.remat\ndef block(params, x):\n    return jax.nn.gelu(x @ params[\"w1\"]) @ params[\"w2\"]\n# keep matmul outputs, recompute the rest:\n# jax.checkpoint(block, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)\n# Flax: nn.remat(Block)",
        }],
    },
    // ---- Contention and limits ----
    Remedy {
        id: RemedyId::FreeOtherProcesses,
        title: "Free the GPU memory other processes hold",
        why: "Memory held by other processes (another notebook kernel, a stale training run, DataLoader workers that initialised CUDA) is invisible to your allocator; ending them or moving to an idle GPU gives it back at no cost.",
        snippets: &[
            Snippet {
                flavor: Flavor::Shell,
                code: "oomkit monitor --once  # every GPU process with its memory, owner and command line\nkill PID  # one from that list that you own and no longer need\nCUDA_VISIBLE_DEVICES=1 python train.py  # or run on an idle GPU",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "# DataLoader workers must not touch CUDA: return CPU tensors from Dataset.__getitem__\nloader = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True)\nfor x, y in loader:\n    x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)  # in the main process",
            },
        ],
    },
    Remedy {
        id: RemedyId::RaiseMemoryFraction,
        title: "Raise or remove the per-process memory cap",
        why: "A per-process cap (PyTorch memory fraction, JAX or TF fraction) makes the OOM fire while the GPU still has free memory; raising it lets the process use that memory, so keep some headroom if the GPU is shared.",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "torch.cuda.set_per_process_memory_fraction(0.9, device=0)  # or delete the call that set a lower one",
            },
            Snippet {
                flavor: Flavor::Jax,
                code: "export XLA_PYTHON_CLIENT_MEM_FRACTION=.95",
            },
            Snippet {
                flavor: Flavor::Tensorflow,
                code: "gpu_options = tf.compat.v1.GPUOptions(per_process_gpu_memory_fraction=0.95)\nsess = tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(gpu_options=gpu_options))",
            },
        ],
    },
    Remedy {
        id: RemedyId::FixAllocationSize,
        title: "Fix the negative or overflowed allocation size",
        why: "A request near 2^64 bytes (17179869184 GiB) or of exabytes is a negative or overflowed size cast to unsigned: a bug in the caller (a bad shape, an int32 overflow), not a lack of memory, so no memory setting helps.",
        snippets: &[Snippet {
            flavor: Flavor::Pytorch,
            code: "import math\n\nshape = (batch, seq_len, hidden)\nassert all(d > 0 for d in shape), f\"bad shape {shape}\"  # a -1 or negative dim slipped through\nnbytes = math.prod(int(d) for d in shape) * 2  # Python ints: no int32 overflow\nassert nbytes < torch.cuda.get_device_properties(0).total_memory, f\"{nbytes} B for {shape}\"\nx = torch.empty(shape, dtype=torch.float16, device=\"cuda\")",
        }],
    },
    Remedy {
        id: RemedyId::DisableSysmemFallback,
        title: "Turn off the Windows sysmem fallback so VRAM limits are real",
        why: "On Windows (WDDM) drivers since 536.40 spill CUDA allocations into slow shared system memory instead of failing, which is why allocated can exceed total and everything crawls; with the fallback off the job fails fast with a clean OOM you can fix.",
        snippets: &[Snippet {
            flavor: Flavor::Shell,
            code: "NVIDIA Control Panel > Manage 3D settings > Program Settings > add your python.exe\n  > CUDA - Sysmem Fallback Policy > Prefer No Sysmem Fallback > Apply, then restart the app",
        }],
    },
    Remedy {
        id: RemedyId::DisableCudaGraphs,
        title: "Turn off CUDA graphs",
        why: "CUDA graphs (torch.compile mode=\"reduce-overhead\", vLLM capture) keep private memory pools per captured shape that the rest of the program cannot reuse; turning them off frees that memory at some kernel-launch overhead.",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "model = torch.compile(model)  # mode=\"default\": no CUDA graphs, unlike \"reduce-overhead\"\n# autotuning without graphs: torch.compile(model, mode=\"max-autotune-no-cudagraphs\")\n# graphs switched on through the config rather than mode=:\ntorch._inductor.config.triton.cudagraphs = False",
            },
            Snippet {
                flavor: Flavor::Vllm,
                code: "vllm serve MODEL --enforce-eager",
            },
        ],
    },
    // ---- Multi-GPU communication ----
    Remedy {
        id: RemedyId::NcclDebug,
        title: "Rerun with NCCL debug logging to confirm an OOM",
        why: "NCCL's `unhandled cuda error` hides the cause; NCCL_DEBUG=INFO with the ALLOC subsystem logs each NCCL allocation and the `Cuda failure 'out of memory'` line; diagnostic only, and verbose.",
        snippets: &[Snippet {
            flavor: Flavor::Shell,
            code: "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALLOC torchrun --nproc_per_node 4 train.py",
        }],
    },
    Remedy {
        id: RemedyId::NcclReduceBuffers,
        title: "Shrink NCCL's communication buffers",
        why: "NCCL cudaMallocs its buffers (NCCL_BUFFSIZE, 4 MiB by default, per channel and per peer) outside PyTorch's allocator, so they show as non-PyTorch memory; smaller buffers and fewer channels free VRAM at some bandwidth cost.",
        snippets: &[Snippet {
            flavor: Flavor::Shell,
            code: "export NCCL_BUFFSIZE=2097152  # 2 MiB per buffer (default 4 MiB)\nexport NCCL_MAX_NCHANNELS=4  # fewer channels, fewer buffers\nexport NCCL_NVLS_ENABLE=0  # NVLink SHARP buffers are large on NVSwitch systems",
        }],
    },
    // ---- Other serving stacks and libraries ----
    Remedy {
        id: RemedyId::TgiMaxBatchPrefillTokens,
        title: "Lower TGI's token budgets (or quantize the model)",
        why: "TGI warms up with --max-batch-prefill-tokens and sizes its KV cache from --max-batch-total-tokens; lowering them and the per-request --max-total-tokens makes warm-up fit at lower throughput, and --quantize shrinks the weights.",
        snippets: &[
            Snippet {
                flavor: Flavor::Tgi,
                code: "text-generation-launcher --model-id MODEL \\\n  --max-input-tokens 2048 --max-total-tokens 4096 \\\n  --max-batch-prefill-tokens 2048 --max-batch-total-tokens 16384",
            },
            Snippet {
                flavor: Flavor::Tgi,
                code: "text-generation-launcher --model-id MODEL --quantize bitsandbytes-nf4 --max-batch-prefill-tokens 2048",
            },
        ],
    },
    Remedy {
        id: RemedyId::OnnxruntimeArena,
        title: "Limit ONNX Runtime's CUDA memory arena",
        why: "ORT's BFC arena grows in powers of two by default (kNextPowerOfTwo) and keeps what it took; kSameAsRequested grows only by what is asked and gpu_mem_limit caps the arena, leaving room for others.",
        snippets: &[Snippet {
            flavor: Flavor::Onnxruntime,
            code: "import onnxruntime as ort\n\nproviders = [(\"CUDAExecutionProvider\", {\n    \"gpu_mem_limit\": 4 * 1024**3,  # bytes\n    \"arena_extend_strategy\": \"kSameAsRequested\",\n}), \"CPUExecutionProvider\"]\nsess = ort.InferenceSession(\"model.onnx\", providers=providers)",
        }],
    },
    Remedy {
        id: RemedyId::CupyMemoryPool,
        title: "Release and cap CuPy's memory pool",
        why: "CuPy keeps freed blocks in its pool for reuse, so PyTorch or another library on the same GPU sees them as used; free_all_blocks returns them to the driver and set_limit caps the pool.",
        snippets: &[Snippet {
            flavor: Flavor::Cupy,
            code: "import cupy as cp\n\ndel arr  # drop references first\npool = cp.get_default_memory_pool()\npool.free_all_blocks()\ncp.get_default_pinned_memory_pool().free_all_blocks()\npool.set_limit(size=8 * 1024**3)  # or CUPY_GPU_MEMORY_LIMIT=\"50%\"",
        }],
    },
    Remedy {
        id: RemedyId::PaddleMemoryFlags,
        title: "Tune PaddlePaddle's allocator flags",
        why: "With the naive_best_fit strategy Paddle preallocates FLAGS_fraction_of_gpu_memory_to_use of the GPU; auto_growth (the 2.x default) allocates on demand and a zero FLAGS_eager_delete_tensor_gb frees dead tensors at once, so peaks drop and other processes fit.",
        snippets: &[
            Snippet {
                flavor: Flavor::Paddle,
                code: "import os\nos.environ[\"FLAGS_allocator_strategy\"] = \"auto_growth\"  # before importing paddle\nos.environ[\"FLAGS_eager_delete_tensor_gb\"] = \"0.0\"\nimport paddle",
            },
            Snippet {
                flavor: Flavor::Shell,
                code: "export FLAGS_allocator_strategy=auto_growth\nexport FLAGS_eager_delete_tensor_gb=0.0\n# with naive_best_fit, preallocate less: export FLAGS_fraction_of_gpu_memory_to_use=0.5",
            },
        ],
    },
    // ---- Other backends ----
    Remedy {
        id: RemedyId::MpsHighWatermark,
        title: "Try fp16 and a smaller batch on Apple MPS before lifting the watermark",
        why: "PyTorch MPS stops at a high watermark of the recommended working set to protect macOS; PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 disables that safety limit, so the process can take all unified memory, swap heavily or freeze the system: prefer a smaller batch or fp16.",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "model = model.to(\"mps\", dtype=torch.float16)  # and a smaller batch, before touching the watermark\ntorch.mps.empty_cache()  # between phases",
            },
            Snippet {
                flavor: Flavor::Shell,
                code: "# last resort: disables the safety limit and may freeze macOS\nexport PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0",
            },
        ],
    },
    Remedy {
        id: RemedyId::XpuRelaxedAllocationLimits,
        title: "Allow single allocations over 4 GiB on Intel GPUs, or split the tensor",
        why: "Intel's Level Zero runtime refuses any single allocation over 4 GiB by default; the relaxed-limits switch lifts that (support varies by driver), or keep each tensor below 4 GiB by chunking.",
        snippets: &[
            Snippet {
                flavor: Flavor::Shell,
                code: "export UR_L0_USE_RELAXED_ALLOCATION_LIMITS=1\n# older oneAPI runtimes: export SYCL_PI_LEVEL_ZERO_USE_RELAXED_ALLOCATION_LIMITS=1",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "out = torch.cat([model(chunk) for chunk in x.split(2)])  # keep every intermediate under 4 GiB",
            },
        ],
    },
    Remedy {
        id: RemedyId::CudnnWorkspace,
        title: "Leave room for cuDNN's workspace",
        why: "cuDNN needs handle and workspace memory on top of the tensors: benchmark mode tries algorithms with large workspaces, and TF preallocation can leave cuDNN nothing (CUDNN_STATUS_INTERNAL_ERROR / NOT_INITIALIZED); turning benchmark off or letting TF grow leaves room, possibly with slower kernels.",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "torch.backends.cudnn.benchmark = False  # skip the workspace-hungry algorithm search\n# still failing: lower the batch size; the cuDNN handle itself needs a few hundred MiB",
            },
            Snippet {
                flavor: Flavor::Tensorflow,
                code: "for gpu in tf.config.list_physical_devices(\"GPU\"):\n    tf.config.experimental.set_memory_growth(gpu, True)  # so cuDNN can still get memory",
            },
            Snippet {
                flavor: Flavor::Shell,
                code: "export TF_FORCE_GPU_ALLOW_GROWTH=true",
            },
        ],
    },
    Remedy {
        id: RemedyId::UnloadModels,
        title: "Unload models you are not using and load one at a time",
        why: "Each loaded model keeps its weights on the GPU until every reference to it is gone; dropping the ones you are done with frees that memory, at the cost of reloading them later.",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "import gc\n\ndel model, optimizer  # and every pipeline, trainer or closure that holds them\ngc.collect()\ntorch.cuda.empty_cache()\n# to keep it for later instead: model.to(\"cpu\")",
            },
            Snippet {
                flavor: Flavor::Comfyui,
                code: "curl -X POST http://127.0.0.1:8188/free -H \"Content-Type: application/json\" -d '{\"unload_models\": true, \"free_memory\": true}'",
            },
            Snippet {
                flavor: Flavor::A1111,
                code: "curl -X POST http://127.0.0.1:7860/sdapi/v1/unload-checkpoint  # WebUI started with --api",
            },
            Snippet {
                flavor: Flavor::Tensorflow,
                code: "del model\ntf.keras.backend.clear_session()\ngc.collect()",
            },
        ],
    },
    Remedy {
        id: RemedyId::BiggerGpu,
        title: "Move to a GPU with more memory, or to more GPUs",
        why: "Last resort: when weights plus the minimum activations exceed the card even after quantization and offload, only more VRAM helps (a larger card, or several GPUs with sharding); it costs money, not code.",
        snippets: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn incompatible_pairs_name_remedies() {
        for i in INCOMPATIBLE {
            assert!(get(i.a).is_some() && get(i.b).is_some(), "{i:?}");
            assert_ne!(i.a, i.b);
            assert!(!i.why.is_empty() && !i.source.is_empty());
            assert!(incompatible(i.b, i.a).is_some());
        }
        assert!(incompatible(RemedyId::Qlora, RemedyId::ZeroSharding).is_some());
        assert!(incompatible(RemedyId::Lora, RemedyId::GradientCheckpointing).is_none());
    }

    fn all_snippets() -> impl Iterator<Item = (&'static Remedy, &'static Snippet)> {
        REMEDIES
            .iter()
            .flat_map(|r| r.snippets.iter().map(move |s| (r, s)))
    }

    #[test]
    fn ids_are_unique_kebab_case() {
        let mut seen = HashSet::new();
        for r in REMEDIES {
            assert!(seen.insert(r.id), "duplicate remedy id {}", r.id);
            assert!(
                r.id.as_str()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{} is not kebab-case",
                r.id
            );
            assert!(!r.title.is_empty() && !r.why.is_empty(), "{}", r.id);
        }
    }

    #[test]
    fn snippet_choice_follows_preference() {
        let r = get(RemedyId::ExpandableSegments).unwrap();
        assert_eq!(
            r.snippet_for(&[Flavor::Pytorch]).unwrap().flavor,
            Flavor::Pytorch
        );
        assert_eq!(r.snippet_for(&[Flavor::Jax]).unwrap().flavor, Flavor::Shell);
    }

    #[test]
    fn every_id_has_a_remedy_and_a_scope() {
        for id in RemedyId::ALL {
            assert!(find(id.as_str()).is_some(), "missing remedy {id}");
        }
        assert!(find("no-such-remedy").is_none());
        // The enum and the table are the same list, in the same order.
        assert_eq!(RemedyId::ALL.len(), REMEDIES.len());
        for (id, r) in RemedyId::ALL.iter().zip(REMEDIES) {
            assert_eq!(*id, r.id);
            assert_eq!(RemedyId::parse(id.as_str()), Some(*id));
            assert!(id.remedy().is_some());
        }
    }

    #[test]
    fn titles_and_whys_are_single_lines() {
        for r in REMEDIES {
            assert!(!r.title.contains('\n') && !r.why.contains('\n'), "{}", r.id);
            assert!(
                !r.title.ends_with('.'),
                "{}: title ends with a period",
                r.id
            );
            assert!(
                r.title.chars().next().is_some_and(char::is_uppercase),
                "{}",
                r.id
            );
        }
    }

    #[test]
    fn every_remedy_but_bigger_gpu_has_a_snippet() {
        for r in REMEDIES {
            if r.id == "bigger-gpu" {
                assert!(r.snippets.is_empty());
                assert!(r.snippet_for(&[Flavor::Pytorch]).is_none());
            } else {
                assert!(!r.snippets.is_empty(), "{} has no snippet", r.id);
                assert!(r.snippet_for(&[]).is_some(), "{}", r.id);
            }
        }
    }

    #[test]
    fn snippets_are_short_and_clean() {
        for (r, s) in all_snippets() {
            let lines = s.code.lines().count();
            assert!(
                (1..=8).contains(&lines),
                "{}: {:?} snippet has {lines} lines",
                r.id,
                s.flavor
            );
            assert!(!s.code.contains('\t'), "{}: tab in snippet", r.id);
            assert_eq!(s.code.trim(), s.code, "{}: untrimmed snippet", r.id);
        }
    }

    #[test]
    fn snippets_use_current_apis() {
        for (r, s) in all_snippets() {
            assert!(
                !s.code.contains("torch.cuda.amp"),
                "{}: deprecated torch.cuda.amp",
                r.id
            );
            // `load_in_8bit=True` / `load_in_4bit=True` belong inside a
            // BitsAndBytesConfig, never as a bare from_pretrained argument.
            for (at, _) in s.code.match_indices("load_in_") {
                let before = s.code.get(..at).unwrap_or_default();
                let config = before.rfind("BitsAndBytesConfig(");
                let call = before.rfind("from_pretrained(");
                assert!(
                    config.is_some() && config > call,
                    "{}: load_in_* passed directly to from_pretrained",
                    r.id
                );
            }
        }
    }

    #[test]
    fn scopes_admit_what_they_name_and_refuse_the_rest() {
        let mac_mlx = Situation {
            os: Some(Os::Macos),
            device: Some(Device::Metal),
            runtime: Some(Runtime::Mlx),
            ..Situation::default()
        };
        for id in [
            RemedyId::LlamacppContext,
            RemedyId::LlamacppGpuLayers,
            RemedyId::FreeOtherProcesses,
            RemedyId::ExpandableSegments,
        ] {
            assert!(!id.scope().admits(&mac_mlx), "{id} offered to MLX on a Mac");
        }
        let windows = Situation {
            os: Some(Os::Windows),
            device: Some(Device::Cuda),
            runtime: Some(Runtime::Pytorch),
            ..Situation::default()
        };
        assert!(!RemedyId::ExpandableSegments.scope().admits(&windows));
        assert!(RemedyId::MaxSplitSize.scope().admits(&windows));
        assert!(RemedyId::DisableSysmemFallback.scope().admits(&windows));
        // An application's setting needs the application.
        let comfy = Situation {
            runtime: Some(Runtime::Pytorch),
            app: Some(App::Comfyui),
            ..Situation::default()
        };
        assert!(!RemedyId::A1111Medvram.scope().admits(&comfy));
        assert!(!RemedyId::A1111Medvram.scope().admits(&Situation::default()));
        assert!(RemedyId::ComfyuiLowvram.scope().admits(&comfy));
        // Unknown dimensions admit; known ones must be listed.
        assert!(RemedyId::ReduceBatch.scope().admits(&Situation::default()));
        let generating = Situation {
            runtime: Some(Runtime::Pytorch),
            phase: Some(Phase::Generation),
            ..Situation::default()
        };
        assert!(!RemedyId::InferenceMode.scope().admits(&generating));
        // Every scope admits at least one situation, and the ids are kebab-case.
        for id in RemedyId::ALL {
            let sc = id.scope();
            let s = Situation {
                os: sc.os.first().copied(),
                device: sc.devices.first().copied(),
                runtime: sc.runtimes.first().copied(),
                app: sc.apps.first().copied(),
                phase: sc.phases.first().copied(),
            };
            assert!(sc.admits(&s), "{id}");
        }
    }

    #[test]
    fn flavors_serialize_kebab_case() {
        let json = serde_json::to_value(get(RemedyId::LlamacppContext).unwrap()).unwrap();
        assert_eq!(json["id"], "llamacpp-context");
        assert_eq!(json["snippets"][0]["flavor"], "llama-cpp");
        assert_eq!(serde_json::to_value(Flavor::A1111).unwrap(), "a1111");
    }
}
