//! Inference servers: vLLM (v0 and v1), llama.cpp/ggml/Ollama, and TGI.
//!
//! Formats: `docs/reference/oom-messages.md` §1.9, §1.10 and §1.11.

use std::sync::LazyLock;

use oomkit_core::Bytes;
use regex::Captures;

use super::{
    Chain, Detector, Kind, Lazy, Signal, Span, Status, int_of, re, signal, size_of, u32_of,
};
use crate::detail::{BufferKind, Detail, SideApp, SizeDetail};
use crate::event::{Backend, Cause, Framework};

pub(super) static DETECTORS: &[Detector] = &[
    Detector {
        headline: &VLLM_NO_BLOCKS,
        max_span: 300,
        parse: vllm_no_blocks,
        defer_to: &[],
    },
    Detector {
        headline: &SGLANG_KV_POOL,
        max_span: 400,
        parse: sglang_kv_pool,
        defer_to: &[],
    },
    Detector {
        headline: &VLLM_V0_LEN,
        max_span: 400,
        parse: vllm_v0_len,
        defer_to: &[],
    },
    Detector {
        headline: &VLLM_V1_LEN,
        max_span: 600,
        parse: vllm_v1_len,
        defer_to: &[],
    },
    Detector {
        headline: &GGML_MALLOC,
        max_span: 300,
        parse: ggml_malloc,
        defer_to: &[],
    },
    Detector {
        headline: &GGML_BUFFER,
        max_span: 300,
        parse: ggml_buffer,
        defer_to: &[],
    },
    Detector {
        headline: &GGML_FAILED,
        max_span: 300,
        parse: ggml_failed,
        defer_to: &[],
    },
    Detector {
        headline: &GGML_VULKAN,
        max_span: 300,
        parse: ggml_vulkan,
        defer_to: &[],
    },
    Detector {
        headline: &GGML_METAL,
        max_span: 300,
        parse: ggml_metal,
        defer_to: &[],
    },
    Detector {
        headline: &MLX_MALLOC,
        max_span: 300,
        parse: mlx_malloc,
        defer_to: &[],
    },
    Detector {
        headline: &GGML_PINNED,
        max_span: 300,
        parse: ggml_pinned,
        defer_to: &[],
    },
    Detector {
        headline: &TGI,
        max_span: 400,
        parse: tgi,
        defer_to: &[],
    },
];

static VLLM_NO_BLOCKS: Lazy = LazyLock::new(|| re(r"No available memory for the cache blocks"));
/// SGLang's start-up check that the KV cache pool holds at least one token
/// (python/sglang/srt/model_executor/model_runner.py, `init_memory_pool`):
/// `RuntimeError: Not enough memory. Please try to increase
/// --mem-fraction-static.` (sgl-project/sglang#322, sgl-project/sglang#4330),
/// in later releases `ValueError: Loaded weights leave no GPU memory for the
/// KV cache under --mem-fraction-static=0.88.` (SemiAnalysisAI/InferenceX#2128).
static SGLANG_KV_POOL: Lazy = LazyLock::new(|| {
    re(
        r"Not enough memory\. Please try to increase --mem-fraction-static|leave no GPU memory for the KV cache under --mem-fraction-static=(\d+(?:\.\d+)?)",
    )
});
static VLLM_V0_LEN: Lazy = LazyLock::new(|| {
    re(
        r"The model's max seq len \({N}\) is larger than the maximum number of tokens that can be stored in KV cache \({N}\)",
    )
});
static VLLM_V1_LEN: Lazy = LazyLock::new(|| {
    re(
        r"To serve at least one request with the models?'s? max seq len \({N}\), \({SIZE} KV cache is needed, which is larger than the available KV cache memory \({SIZE}\)\.(?: Based on the available memory,? the estimated maximum model length is {N}\.)?",
    )
});
static PROFILE_TOTAL: Lazy = LazyLock::new(|| re(r"total_gpu_memory={SIZE}"));
static PROFILE_UTIL: Lazy = LazyLock::new(|| re(r"gpu_memory_utilization=([\d.]+)"));
static PROFILE_KV: Lazy = LazyLock::new(|| re(r"kv_cache_size={SIZE}"));
static PROFILE_NON_TORCH: Lazy = LazyLock::new(|| re(r"non_torch_memory={SIZE}"));
static AVAILABLE_KV: Lazy = LazyLock::new(|| re(r"Available KV cache memory: {SIZE}"));

fn vllm_context(sig: &mut Signal, s: &Span<'_>) {
    let f = &mut sig.fields;
    let sizes: [(SizeDetail, &Lazy); 4] = [
        (Detail::ProfiledTotalGpuMemory, &PROFILE_TOTAL),
        (Detail::ProfiledKvCacheSize, &PROFILE_KV),
        (Detail::ProfiledNonTorchMemory, &PROFILE_NON_TORCH),
        (Detail::AvailableKvCacheMemory, &AVAILABLE_KV),
    ];
    for (detail, r) in sizes {
        if let Some(v) = s.region.captures(r).and_then(|c| size_of(&c, 1)) {
            f.details.push(detail(v));
        }
    }
    if let Some(u) = s.region.captures(&PROFILE_UTIL).and_then(|c| c.get(1)) {
        f.details
            .push(Detail::GpuMemoryUtilization(u.as_str().to_string()));
    }
}

fn vllm_no_blocks(_m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::VllmNoBlocks,
        Chain::Vllm,
        Framework::Vllm,
        "vllm-no-cache-blocks",
    );
    sig.backend = Some(Backend::Cuda);
    sig.version_hint = Some(
        if s.region.contains("EngineCore") || s.region.contains("kv_cache_utils") {
            "vLLM v1 (≥ 0.8)"
        } else {
            "vLLM v0"
        },
    );
    sig.implied = Some((
        Cause::KvCache,
        "after loading the weights and profiling activations nothing was left for the KV cache within gpu_memory_utilization × total".into(),
    ));
    vllm_context(&mut sig, s);
    Some(sig)
}

fn sglang_kv_pool(m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::SglangKvPool,
        Chain::Sglang,
        Framework::Sglang,
        "sglang-not-enough-memory",
    );
    sig.backend = Some(Backend::Cuda);
    sig.version_hint = Some(if m.get(1).is_some() {
        "SGLang (2026)"
    } else {
        "SGLang"
    });
    let fraction = m.get(1).map(|g| g.as_str().to_string());
    sig.implied = Some((
        Cause::KvCache,
        match fraction {
            Some(f) => format!(
                "the weights took all of mem_fraction_static ({f}) x the GPU's memory: nothing was left for the KV cache pool"
            ),
            None => "the weights took all of mem_fraction_static x the GPU's memory: nothing was left for the KV cache pool".into(),
        },
    ));
    Some(sig)
}

fn vllm_v0_len(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::VllmV0MaxLen,
        Chain::Vllm,
        Framework::Vllm,
        "vllm-v0-max-seq-len",
    );
    sig.backend = Some(Backend::Cuda);
    sig.version_hint = Some("vLLM v0 (≥ 0.2.7)");
    let (len, tokens) = (int_of(m, 1), int_of(m, 2));
    if let Some(l) = len {
        sig.fields.details.push(Detail::MaxModelLen(l));
    }
    if let Some(t) = tokens {
        sig.fields.details.push(Detail::KvCacheTokens(t));
        sig.fields.details.push(Detail::SuggestedMaxModelLen(t));
    }
    sig.implied = Some((
        Cause::KvCache,
        format!(
            "the KV cache holds {} tokens but max_model_len is {}",
            tokens.map_or("fewer".into(), |t| t.to_string()),
            len.map_or("larger".into(), |l| l.to_string())
        ),
    ));
    vllm_context(&mut sig, s);
    Some(sig)
}

fn vllm_v1_len(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::VllmV1MaxLen,
        Chain::Vllm,
        Framework::Vllm,
        "vllm-v1-kv-cache-needed",
    );
    sig.backend = Some(Backend::Cuda);
    sig.rank = 3;
    let typo = m.get(0).is_some_and(|g| g.as_str().contains("models's"));
    sig.version_hint = Some(if typo {
        "vLLM v1, 2025 (\"models's\" typo)"
    } else {
        "vLLM v1 (≥ 0.8)"
    });
    let f = &mut sig.fields;
    f.requested = size_of(m, 2);
    f.free = size_of(m, 3);
    if let Some(l) = int_of(m, 1) {
        f.details.push(Detail::MaxModelLen(l));
    }
    if let Some(e) = int_of(m, 4) {
        f.details.push(Detail::SuggestedMaxModelLen(e));
    }
    sig.implied = Some((
        Cause::KvCache,
        format!(
            "one request at max_model_len {} needs {} of KV cache, but only {} is available",
            int_of(m, 1).map_or("?".into(), |l| l.to_string()),
            f.requested.unwrap_or_default(),
            f.free.unwrap_or_default()
        ),
    ));
    vllm_context(&mut sig, s);
    Some(sig)
}

static GGML_MALLOC: Lazy = LazyLock::new(|| {
    re(
        r"(?:allocating {SIZE} on device {N}: )?(cudaMalloc|hipMalloc|cuMemCreate|cudaMallocHost) failed: out of memory",
    )
});
static GGML_BUFFER: Lazy = LazyLock::new(|| {
    re(
        r"(alloc_tensor_range|ggml_gallocr_reserve_n(?:_impl)?|ggml_gallocr_\w+|\w+): failed to allocate (CUDA|ROCm|SYCL|Vulkan|Metal|CANN|MUSA)(\d+) buffer of size {N}",
    )
});
static GGML_FAILED: Lazy = LazyLock::new(|| {
    re(
        r"(?:unable to allocate (CUDA|ROCm|SYCL|Vulkan|Metal)(\d+) buffer|failed to allocate compute buffers|compute buffer allocation failed)",
    )
});
/// ggml's Vulkan backend: the driver refused a device-memory allocation
/// (`vk::Device::allocateMemory: ErrorOutOfDeviceMemory` on the next line).
static GGML_VULKAN: Lazy =
    LazyLock::new(|| re(r"ggml_vulkan: Device memory allocation of size {N} failed"));
/// ggml's Metal backend (Apple GPUs): a command buffer failed because the
/// GPU ran out of memory; no size is printed. MLX builds may print the
/// status without its code (`[METAL] Command buffer execution failed:
/// Insufficient Memory`, jjang-ai/vmlx#58): only after that prefix.
static GGML_METAL: Lazy = LazyLock::new(|| {
    re(
        r"Insufficient Memory \(0*8:kIOGPUCommandBufferCallbackErrorOutOfMemory\)|Command buffer execution failed: Insufficient Memory",
    )
});
/// MLX's Metal allocator refusing one buffer larger than the device's
/// maximum buffer length (mlx/backend/metal/allocator.cpp `malloc`:
/// "[metal::malloc] Attempting to allocate N bytes which is greater than
/// the maximum allowed buffer size of M bytes.", ml-explore/mlx#3327):
/// no setting raises that limit, so the request is impossible as made.
static MLX_MALLOC: Lazy = LazyLock::new(|| {
    re(
        r"\[metal::malloc\] Attempting to allocate {N} bytes which is greater than the maximum allowed buffer size of {N} bytes",
    )
});
static GGML_PINNED: Lazy =
    LazyLock::new(|| re(r"ggml_cuda_host_malloc: failed to allocate {SIZE} of pinned memory"));
static KV_SIZE: Lazy = LazyLock::new(|| re(r"(CUDA|ROCm)\d+ KV buffer size = ([\d.]+ MiB)"));
static MODEL_SIZE: Lazy = LazyLock::new(|| re(r"(CUDA|ROCm)\d+ model buffer size = ([\d.]+ MiB)"));
static COMPUTE_SIZE: Lazy =
    LazyLock::new(|| re(r"(CUDA|ROCm)\d+ compute buffer size = ([\d.]+ MiB)"));

fn ggml_backend(name: &str) -> Option<Backend> {
    match name {
        "CUDA" => Some(Backend::Cuda),
        "ROCm" => Some(Backend::Hip),
        "SYCL" => Some(Backend::Xpu),
        _ => None,
    }
}

/// llama.cpp's context setup (src/llama-context.cpp) answers a failed
/// compute-buffer reservation with pipeline parallelism by trying once more
/// without it (`sched_reserve: compute buffer allocation failed, retrying
/// without pipeline parallelism`), and goes on when that fits
/// (ggml-org/llama.cpp#26297). A failure after the retry line is still one.
fn ggml_recovered(s: &Span<'_>) -> bool {
    s.region.contains("retrying without pipeline parallelism")
        && s.region.captures(&GGML_RETRY_FAILED).is_none()
}
static GGML_RETRY_FAILED: Lazy = LazyLock::new(|| {
    re(
        r"(?s)retrying without pipeline parallelism.*?(?:failed to allocate|out of memory|failed with status)",
    )
});

fn ggml_context(sig: &mut Signal, s: &Span<'_>) {
    if ggml_recovered(s) {
        sig.status = Status::NotOom(
            "llama.cpp could not reserve its compute buffers with pipeline parallelism, retried without it and went on: the model loaded",
        );
    }
    let sizes: [(SizeDetail, &Lazy); 3] = [
        (Detail::KvBuffer, &KV_SIZE),
        (Detail::ModelBuffer, &MODEL_SIZE),
        (Detail::ComputeBuffer, &COMPUTE_SIZE),
    ];
    for (detail, r) in sizes {
        if let Some(v) = s.region.captures(r).and_then(|c| size_of(&c, 2)) {
            sig.fields.details.push(detail(v));
        }
    }
    if s.region.contains("llama runner")
        || s.region.contains("ollama")
        || s.region.contains("Ollama")
    {
        sig.fields.details.push(Detail::App(SideApp::Ollama));
    }
}

fn ggml_malloc(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::GgmlMalloc,
        Chain::Ggml,
        Framework::LlamaCpp,
        "ggml-cuda-buffer-alloc",
    );
    let api = m.get(3).map_or("", |g| g.as_str());
    sig.backend = Some(if api == "hipMalloc" {
        Backend::Hip
    } else {
        Backend::Cuda
    });
    if api == "cudaMallocHost" {
        sig.status = Status::NotOom("cudaMallocHost allocates pinned host RAM, not GPU memory");
    }
    sig.fields.requested = size_of(m, 1);
    sig.fields.device = u32_of(m, 2);
    sig.version_hint = Some(if s.region.contains("llama runner") {
        "Ollama"
    } else {
        "llama.cpp ≥ 2024"
    });
    if s.region.contains("ROCm") || s.region.contains("hipMalloc") {
        sig.backend = Some(Backend::Hip);
    }
    ggml_context(&mut sig, s);
    Some(sig)
}

fn ggml_buffer(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::GgmlBuffer,
        Chain::Ggml,
        Framework::LlamaCpp,
        "ggml-failed-to-allocate-buffer",
    );
    sig.rank = 3;
    let func = m.get(1).map_or("", |g| g.as_str());
    sig.backend = m.get(2).and_then(|g| ggml_backend(g.as_str()));
    sig.fields.device = u32_of(m, 3);
    sig.fields.requested = int_of(m, 4).map(Bytes);
    let kind = if func == "alloc_tensor_range" {
        BufferKind::ModelWeights
    } else if func.starts_with("ggml_gallocr") {
        BufferKind::ComputeBuffer
    } else {
        BufferKind::Other
    };
    sig.fields.details.push(Detail::Buffer(kind));
    sig.version_hint = Some("llama.cpp ≥ 2024");
    ggml_context(&mut sig, s);
    Some(sig)
}

fn ggml_failed(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::GgmlFailed,
        Chain::Ggml,
        Framework::LlamaCpp,
        "ggml-failed-to-allocate-buffer",
    );
    sig.rank = 1;
    if let Some(b) = m.get(1) {
        sig.backend = ggml_backend(b.as_str());
        sig.fields.device = u32_of(m, 2);
        sig.fields
            .details
            .push(Detail::Buffer(BufferKind::ModelWeights));
    } else {
        sig.fields
            .details
            .push(Detail::Buffer(BufferKind::ComputeBuffer));
    }
    ggml_context(&mut sig, s);
    Some(sig)
}

fn ggml_vulkan(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::GgmlVulkanAlloc,
        Chain::Ggml,
        Framework::LlamaCpp,
        "ggml-vulkan-device-memory",
    );
    sig.rank = 2;
    sig.fields.requested = int_of(m, 1).map(Bytes);
    sig.version_hint = Some("llama.cpp, Vulkan backend");
    if !s.region.contains("ErrorOutOfDeviceMemory") {
        // Without the driver's reason the size may exceed a per-allocation
        // limit (maxMemoryAllocationSize) rather than the free memory.
        sig.fields.details.push(Detail::Meaning(
            "the Vulkan driver refused one allocation; it may be larger than the driver's single-allocation limit (maxMemoryAllocationSize) rather than the free memory",
        ));
    }
    ggml_context(&mut sig, s);
    Some(sig)
}

fn mlx_malloc(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let requested = super::int_of(m, 1)?;
    let max = super::int_of(m, 2)?;
    let mut sig = signal(
        Kind::MlxMetal,
        Chain::Mlx,
        Framework::Mlx,
        "mlx-metal-malloc-buffer-size",
    );
    sig.backend = Some(Backend::Metal);
    sig.fields.requested = Some(Bytes(requested));
    sig.version_hint = Some(if super::region_has(s, &["mlx_lm", "mlx-lm"]) {
        "MLX (mlx-lm)"
    } else {
        "MLX, Metal backend (Apple GPU)"
    });
    sig.implied = Some((
        Cause::ImpossibleRequest,
        format!(
            "one buffer of {} is larger than the largest buffer Metal allows on this Mac ({}); no memory setting makes one allocation that big fit",
            Bytes(requested),
            Bytes(max)
        ),
    ));
    Some(sig)
}

fn ggml_metal(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    // The same Metal status text is printed by MLX (mlx/backend/metal/
    // eval.cpp check_error: `[METAL] Command buffer execution failed: `)
    // and by ggml (`ggml_metal_graph_compute: command buffer 0 failed with
    // status 5` / `error: Insufficient Memory …`): the prefix, or MLX's own
    // modules, decide; llama.cpp only with its own names.
    let ggml = super::region_has(
        s,
        &["ggml", "llama_", "llama.cpp", "llama-server", "ollama"],
    );
    let headline = m.get(0).map_or("", |g| g.as_str());
    let mlx = s.before.contains("[METAL] Command buffer execution failed")
        || (headline.starts_with("Command buffer") && s.before.trim_end().ends_with("[METAL]"))
        || (!ggml && super::region_has(s, &["mlx", "MLX"]));
    if mlx {
        let mut sig = signal(
            Kind::MlxMetal,
            Chain::Mlx,
            Framework::Mlx,
            "mlx-metal-insufficient-memory",
        );
        sig.backend = Some(Backend::Metal);
        sig.version_hint = Some(if super::region_has(s, &["mlx_lm", "mlx-lm"]) {
            "MLX (mlx-lm)"
        } else {
            "MLX, Metal backend (Apple GPU)"
        });
        return Some(sig);
    }
    let mut sig = signal(
        Kind::GgmlMetalOom,
        Chain::Ggml,
        Framework::LlamaCpp,
        "ggml-metal-insufficient-memory",
    );
    sig.rank = 2;
    sig.backend = Some(Backend::Metal);
    sig.version_hint = Some("llama.cpp, Metal backend (Apple GPU)");
    ggml_context(&mut sig, s);
    Some(sig)
}

fn ggml_pinned(m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::GgmlPinned,
        Chain::GgmlHost,
        Framework::LlamaCpp,
        "ggml-pinned-host-memory",
    );
    sig.fields.requested = size_of(m, 1);
    sig.status = Status::NotOom(
        "llama.cpp could not pin host RAM for faster transfers and fell back to pageable memory; this is a warning about system RAM",
    );
    Some(sig)
}

static TGI: Lazy = LazyLock::new(|| {
    re(
        r"Not enough memory to handle {N} (prefill tokens|total tokens)(?: with {N} prefill tokens)?",
    )
});

fn tgi(m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::TgiWarmup,
        Chain::Tgi,
        Framework::Tgi,
        "tgi-warmup-not-enough-memory",
    );
    sig.backend = Some(Backend::Cuda);
    let what = m.get(2).map_or("", |g| g.as_str());
    if let Some(n) = int_of(m, 1) {
        sig.fields.details.push(if what == "total tokens" {
            Detail::MaxBatchTotalTokens(n)
        } else {
            Detail::MaxBatchPrefillTokens(n)
        });
    }
    if let Some(n) = int_of(m, 3) {
        sig.fields.details.push(Detail::MaxBatchPrefillTokens(n));
    }
    Some(sig)
}
