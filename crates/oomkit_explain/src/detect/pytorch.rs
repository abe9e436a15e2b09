//! PyTorch: the caching allocator in every era, cudaMallocAsync, MPS, XPU/IPEX,
//! and the OOMs in disguise (cuBLAS, cuDNN, NVML asserts, `CUDA error: out of memory`).
//!
//! Formats: `docs/reference/oom-messages.md` §1.1–§1.5 and Appendix B.

use std::sync::LazyLock;

use oomkit_core::Bytes;
use regex::Captures;

use super::{
    Chain, Detector, Kind, Lazy, Signal, Span, Status, re, region_has, signal, size_of, u32_of,
};
use crate::detail::{Detail, MpsPool, UserLimit};
use crate::event::{Backend, Cause, Framework, ProcessUse};

pub(super) static DETECTORS: &[Detector] = &[
    Detector {
        headline: &ALLOCATOR,
        max_span: 1600,
        parse: allocator,
        defer_to: &[],
    },
    Detector {
        headline: &HEADLESS,
        max_span: 1600,
        parse: headless,
        defer_to: &[&ALLOCATOR, &IPEX_4GB],
    },
    Detector {
        headline: &IPEX_4GB,
        max_span: 800,
        parse: ipex_4gb,
        defer_to: &[],
    },
    Detector {
        headline: &MALLOC_ASYNC,
        max_span: 800,
        parse: malloc_async,
        defer_to: &[],
    },
    Detector {
        headline: &MPS,
        max_span: 800,
        parse: mps,
        defer_to: &[],
    },
    Detector {
        headline: &THC,
        max_span: 300,
        parse: thc,
        defer_to: &[],
    },
    Detector {
        headline: &CUDA_ERROR,
        max_span: 600,
        parse: cuda_error,
        defer_to: &[],
    },
    Detector {
        headline: &CUBLAS,
        max_span: 300,
        parse: cublas,
        defer_to: &[],
    },
    Detector {
        headline: &CUDNN,
        max_span: 400,
        parse: cudnn,
        defer_to: &[],
    },
    Detector {
        headline: &NVML_ASSERT,
        max_span: 300,
        parse: nvml_assert,
        defer_to: &[],
    },
    Detector {
        headline: &ILLEGAL_ACCESS,
        max_span: 300,
        parse: illegal_access,
        defer_to: &[],
    },
];

// No word boundary: wrapper text is often glued on (`whyCUDA out of memory`).
// Case-insensitive: a legacy message retyped by hand arrives in lower case.
static ALLOCATOR: Lazy = LazyLock::new(|| re(r"(?i:(CUDA|HIP|XPU|NPU|MUSA|DPCPP) out of memory)"));
// A paste that starts mid-message, without `CUDA out of memory.`
// (ShannonAI/Self_Explaining_Structures_Improve_NLP_Models#6): the fields
// after "Tried to allocate" are the caching allocator's, of either era.
static HEADLESS: Lazy = LazyLock::new(|| {
    re(r"Tried to allocate {SIZE} ?(?:\((GPU|XPU|NPU) {N};|\. GPU (\d*) has a total capac)")
});
static IPEX_4GB: Lazy = LazyLock::new(|| {
    re(r"Current platform can NOT allocate memory block with size larger than 4GB!")
});
static MALLOC_ASYNC: Lazy =
    LazyLock::new(|| re(r"Allocation on device(?: {N})? ?(would exceed allowed memory)?"));
static MPS: Lazy = LazyLock::new(|| re(r"MPS backend out of memory"));
static THC: Lazy = LazyLock::new(|| {
    re(
        r"(?:cuda runtime error \(2\) : out of memory(?: at ([^\s:]+):(\d+))?|THCudaCheck FAIL file=(\S+) line=(\d+) error=2 : out of memory)",
    )
});
static CUDA_ERROR: Lazy = LazyLock::new(|| {
    re(r"\b(CUDA|HIP|cuda) (driver )?error(?: 2 at ([^\s:]+):(\d+))?: out of memory")
});
static CUBLAS: Lazy = LazyLock::new(|| re(r"CUBLAS_STATUS_ALLOC_FAILED"));
static CUDNN: Lazy = LazyLock::new(|| {
    re(
        r"(Could not create cudnn handle: )?CUDNN_STATUS_(NOT_INITIALIZED|INTERNAL_ERROR|EXECUTION_FAILED|ALLOC_FAILED)|Unable to find a valid cuDNN algorithm to run convolution",
    )
});
static NVML_ASSERT: Lazy = LazyLock::new(|| {
    re(
        r#"(?:NVML_SUCCESS ?== ?r|nvml\w+(?:\([^)]{0,80}\))?[^.]{0,40}?) INTERNAL ASSERT FAILED at "?([^"\s]*CUDACachingAllocator\.cpp)"?:(\d+)"#,
    )
});
static ILLEGAL_ACCESS: Lazy = LazyLock::new(|| re(r"an illegal memory access was encountered"));

static TRIED: Lazy = LazyLock::new(|| re(r"(?i:Tried to allocate {SIZE})"));
// Legacy (≤ 2.0) parenthesised fields, in either case (see ALLOCATOR).
static L_GPU: Lazy = LazyLock::new(|| re(r"(?i:\((?:GPU|NPU|XPU) {N};)"));
static L_TOTAL: Lazy = LazyLock::new(|| re(r"(?i:{SIZE} total capacity)"));
static L_ALLOC: Lazy = LazyLock::new(|| re(r"(?i:{SIZE} already allocated)"));
static L_FREE: Lazy = LazyLock::new(|| re(r"(?i:{SIZE} free[;)])"));
static L_ALLOWED: Lazy = LazyLock::new(|| re(r"(?i:{SIZE} allowed;)"));
static L_CACHED: Lazy = LazyLock::new(|| re(r"(?i:{SIZE} cached\b)"));
static L_RESERVED: Lazy = LazyLock::new(|| re(r"(?i:{SIZE} reserved in total by PyTorch)"));
static L_ACTIVE: Lazy = LazyLock::new(|| re(r"{SIZE} current active"));
// ≥ 2.1 sentences.
// The device number is missing in some builds' messages (`GPU  has a total
// capacity`, seen in torch.distributed's `_sync_params_and_buffers`): the
// device is then unknown and the other fields still read.
static N_TOTAL: Lazy = LazyLock::new(|| re(r"GPU (\d*) has a total capac(i?)ty of {SIZE}"));
// The caching allocator's guard before any cudaMalloc (c10/cuda/
// CUDACachingAllocator.cpp `one_exa_bytes`): the size is not printed.
static ONE_EB: Lazy = LazyLock::new(|| re(r"Tried to allocate more than 1EB memory"));
static N_FREE: Lazy = LazyLock::new(|| re(r"of which {SIZE} is free"));
static N_PROC: Lazy = LazyLock::new(|| re(r"Process {N} has {SIZE} memory in use"));
static N_SELF: Lazy = LazyLock::new(|| re(r"this process has {SIZE} memory in use"));
static N_ALLOWED: Lazy = LazyLock::new(|| re(r"{SIZE} allowed;"));
static N_ALLOC: Lazy =
    LazyLock::new(|| re(r"Of the allocated memory {SIZE} is allocated by PyTorch"));
static N_PRIVATE: Lazy = LazyLock::new(|| re(r"with {SIZE} allocated in private pools"));
static N_UNALLOC: Lazy = LazyLock::new(|| re(r"{SIZE} is reserved by PyTorch but unallocated"));

fn backend_of(word: &str) -> Option<Backend> {
    match word.to_ascii_uppercase().as_str() {
        "CUDA" => Some(Backend::Cuda),
        "HIP" => Some(Backend::Hip),
        "XPU" | "DPCPP" => Some(Backend::Xpu),
        _ => None,
    }
}

fn allocator(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let word = m.get(1).map_or("CUDA", |g| g.as_str()).to_ascii_uppercase();
    allocator_with(&word, s)
}

/// The allocator's fields without its headline. Where the headline is in the
/// paste too, the full message (rank 3) wins the merge of the chain.
fn headless(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let word = match m.get(2).map(|g| g.as_str()) {
        Some("XPU") => "XPU",
        Some("NPU") => "NPU",
        _ => "CUDA",
    };
    let mut sig = allocator_with(word, s)?;
    sig.kind = Kind::PytorchAllocatorHeadless;
    sig.rank = 2;
    if word == "CUDA" {
        // "GPU 0" alone does not say CUDA or ROCm.
        sig.backend = None;
    }
    Some(sig)
}

fn allocator_with(word: &str, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::PytorchAllocator,
        Chain::Pytorch,
        Framework::Pytorch,
        "pytorch-caching-allocator",
    );
    sig.backend = backend_of(word);
    sig.rank = 3;
    let f = &mut sig.fields;
    f.requested = s.size(&TRIED);
    if s.has(&ONE_EB) {
        sig.format = "pytorch-caching-allocator-1eb-guard";
        sig.implied = Some((
            Cause::SizeOverflow,
            "the allocator refused a request of more than 1 EB before asking the driver (PyTorch's one_exa_bytes guard): a negative or overflowed size (e.g. an int32 product) reached the allocator".into(),
        ));
        return Some(sig);
    }
    if let Some(c) = s.cap(&N_TOTAL) {
        // PyTorch ≥ 2.1 sentences.
        sig.format = "pytorch-caching-allocator-2.1";
        f.device = u32_of(&c, 1);
        f.total = size_of(&c, 3);
        let typo = c.get(2).is_some_and(|g| g.as_str().is_empty());
        f.free = s.size(&N_FREE);
        f.allocated = s.size(&N_ALLOC);
        f.unallocated = s.size(&N_UNALLOC);
        f.private_pool = s.size(&N_PRIVATE);
        f.limit = s.size(&N_ALLOWED);
        f.reserved = match (f.allocated, f.unallocated) {
            (Some(a), Some(u)) => Some(a.saturating_add(u)),
            _ => None,
        };
        let text = if s.has(&N_PROC) || s.has(&N_SELF) {
            pick(s, &N_PROC)
        } else {
            s.spaced
        };
        let mut unreported = false;
        for c in N_PROC.captures_iter(text) {
            if let (Some(pid), Some(b)) = (super::int_of(&c, 1), size_of(&c, 2)) {
                if super::nvml_unavailable(b) {
                    unreported = true;
                    continue;
                }
                f.processes.push(ProcessUse {
                    pid: Some(pid),
                    used_bytes: b,
                    is_self: false,
                });
            }
        }
        if let Some(b) = s.size(&N_SELF) {
            if super::nvml_unavailable(b) {
                unreported = true;
            } else {
                f.processes.push(ProcessUse {
                    pid: None,
                    used_bytes: b,
                    is_self: true,
                });
            }
        }
        if unreported {
            f.details.push(Detail::ProcessMemory(
                "not reported: NVML's \"not available\" value (printed as 17179869184.00 GiB, as under Windows WDDM and WSL), so per-process use is unknown",
            ));
        }
        sig.version_hint = Some(if s.spaced.contains("docs.pytorch.org") {
            "PyTorch ≥ 2.8 (docs.pytorch.org link)"
        } else if f.limit.is_some() {
            "PyTorch ≥ 2.5 (allowed field in the new format)"
        } else if f.private_pool.is_some() {
            "PyTorch ≥ 2.4 (private pools)"
        } else if typo {
            "PyTorch 2.1 (\"capacty\" typo)"
        } else if word == "XPU" {
            "PyTorch ≥ 2.5 (torch.xpu)"
        } else {
            "PyTorch ≥ 2.2"
        });
    } else if s.has(&L_TOTAL) || s.has(&L_GPU) {
        sig.format = "pytorch-caching-allocator-legacy";
        f.device = s.device(&L_GPU);
        f.total = s.size(&L_TOTAL);
        f.allocated = s.size(&L_ALLOC).or_else(|| s.size(&L_ACTIVE));
        f.free = s.size(&L_FREE);
        f.limit = s.size(&L_ALLOWED);
        if let Some(cached) = s.size(&L_CACHED) {
            // 1.0–1.3: `cached` is reserved − allocated.
            f.unallocated = Some(cached);
            f.reserved = f.allocated.map(|a| a.saturating_add(cached));
            sig.version_hint = Some("PyTorch 1.0–1.3 (cached)");
        } else if let Some(r) = s.size(&L_RESERVED) {
            f.reserved = Some(r);
            f.unallocated = f.allocated.map(|a| r.saturating_sub(a));
            sig.version_hint = Some(if s.spaced.contains("max_split_size_mb") {
                "PyTorch 1.10–2.0 (max_split_size_mb hint)"
            } else if word == "XPU" {
                "Intel Extension for PyTorch (legacy format)"
            } else {
                "PyTorch 1.4–1.9"
            });
        }
        if s.spaced.contains("(malloc at ") {
            sig.version_hint = Some("PyTorch ≈1.1–1.6 (malloc location)");
        }
    } else {
        if f.requested.is_none() && !super::error_shaped(s) {
            // Prose that mentions the error is not the error.
            return None;
        }
        sig.format = "pytorch-out-of-memory-bare";
    }
    if word == "XPU"
        && f.requested.is_some_and(|r| r > Bytes::gib(4))
        && (f.free.is_none()
            || (f.limit.is_none() && f.free.zip(f.requested).is_some_and(|(free, r)| free >= r)))
    {
        // A default limit of Intel's runtime, which can be lifted: a limit,
        // not an impossible request. Upstream torch.xpu (2.5+) prints the
        // free memory too: when it covers the request, the device did not
        // run out: 4.66 GiB with 5.65 GiB free in
        // https://github.com/intel/torch-xpu-ops/issues/3011, 16 GiB with
        // 16.07 GiB free in https://github.com/intel/torch-xpu-ops/issues/5046.
        f.limit = f.limit.or(Some(Bytes::gib(4)));
        sig.implied = Some((
            Cause::MemoryFractionLimit,
            format!(
                "one allocation of {} exceeds the 4 GiB single-allocation limit of Intel GPUs (a default of the Level Zero runtime that can be lifted, or kept by chunking)",
                f.requested.unwrap_or_default()
            ),
        ));
    }
    if word == "NPU" || word == "MUSA" {
        sig.backend = None;
    }
    Some(sig)
}

/// The ≥ 2.1 process list may sit in either view; prefer the one that has it.
fn pick<'a>(s: &'a Span<'_>, re: &regex::Regex) -> &'a str {
    if re.is_match(s.spaced) {
        s.spaced
    } else {
        s.tight
    }
}

fn ipex_4gb(_m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::Ipex4gb,
        Chain::Pytorch,
        Framework::Pytorch,
        "ipex-single-allocation-limit",
    );
    sig.backend = Some(Backend::Xpu);
    sig.rank = 3;
    sig.version_hint = Some("Intel Extension for PyTorch");
    let f = &mut sig.fields;
    f.requested = s.size(&TRIED);
    f.device = s.device(&L_GPU);
    f.total = s.size(&L_TOTAL);
    f.allocated = s.size(&L_ALLOC);
    f.reserved = s.size(&L_RESERVED);
    f.limit = Some(Bytes::gib(4));
    sig.implied = Some((
        Cause::MemoryFractionLimit,
        format!(
            "one allocation of {} is above the 4 GiB single-allocation limit of this Intel GPU platform (a default of the Level Zero runtime that can be lifted, or kept by chunking)",
            f.requested
                .map_or("more than 4 GiB".to_string(), |r| r.to_string())
        ),
    ));
    Some(sig)
}

static MA_ALLOC: Lazy = LazyLock::new(|| re(r"Currently allocated : {SIZE}"));
static MA_REQ: Lazy = LazyLock::new(|| re(r"Requested : {SIZE}"));
static MA_LIMIT: Lazy = LazyLock::new(|| re(r"Device limit : {SIZE}"));
static MA_FREE: Lazy = LazyLock::new(|| re(r"Free \(according to CUDA\) : {SIZE}"));
static MA_USER: Lazy =
    LazyLock::new(|| re(r"PyTorch limit \(set by user-supplied memory fraction\) : {SIZE}"));

fn malloc_async(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let exceeds = m.get(2).is_some();
    let has_fields = s.has(&MA_REQ) || s.has(&MA_ALLOC);
    // ComfyUI re-raises the cudaMallocAsync error cut to
    // `torch.OutOfMemoryError: Allocation on device ` (Comfy-Org/ComfyUI#13110):
    // the exception class says it is an OOM.
    // ComfyUI's console prints only `!!! Exception during processing !!!
    // Allocation on device ` before the traceback, then `Got an OOM,
    // unloading all loaded models.` (comfy execution.py): a paste cut before
    // the exception line is still that error.
    let raised = s.before.trim_end().ends_with("OutOfMemoryError:")
        || s.before.contains("Exception during processing")
        || region_has(s, &["Got an OOM, unloading all loaded models"]);
    if m.get(1).is_none() && !raised {
        return None;
    }
    if !exceeds && !has_fields && !raised && !s.spaced.contains("out of memory") {
        // "Allocation on device" with nothing else is ComfyUI's shortened form
        // only when an OOM tip follows; otherwise it is ordinary prose.
        if !region_has(s, &["ran out of memory", "out of memory"]) {
            return None;
        }
    }
    let mut sig = signal(
        Kind::CudaMallocAsync,
        Chain::Pytorch,
        Framework::Pytorch,
        "pytorch-cudamallocasync",
    );
    // ComfyUI's shortened form on an AMD GPU (its log names amdgpu or ROCm).
    sig.backend = Some(
        if !has_fields && region_has(s, &["amdgpu", "ROCm", "rocm", "HIP out"]) {
            Backend::Hip
        } else {
            Backend::Cuda
        },
    );
    sig.rank = 3;
    sig.version_hint = Some("PyTorch with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync");
    let f = &mut sig.fields;
    f.device = u32_of(m, 1);
    f.allocated = s.size(&MA_ALLOC);
    f.requested = s.size(&MA_REQ);
    f.total = s.size(&MA_LIMIT);
    f.free = s.size(&MA_FREE);
    // SIZE_MAX (printed as 17179869184.00 GiB) means no limit was set.
    f.limit = s.size(&MA_USER).filter(|l| *l != Bytes::MAX);
    if let Some(l) = s.size(&MA_USER) {
        let shown = if l == Bytes::MAX {
            UserLimit::None
        } else {
            UserLimit::Set(l)
        };
        f.details.push(Detail::PytorchLimit(shown));
    }
    Some(sig)
}

static MPS_ALLOC: Lazy = LazyLock::new(|| re(r"MPS allocated: {SIZE}"));
static MPS_OTHER: Lazy = LazyLock::new(|| re(r"other allocations: {SIZE}"));
static MPS_MAX: Lazy = LazyLock::new(|| re(r"max allowed: {SIZE}"));
static MPS_TRIED: Lazy =
    LazyLock::new(|| re(r"Tried to allocate {SIZE}(?: on (private|shared) pool)?"));

fn mps(_m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(Kind::Mps, Chain::Pytorch, Framework::Pytorch, "pytorch-mps");
    sig.backend = Some(Backend::Mps);
    sig.rank = 3;
    let f = &mut sig.fields;
    f.allocated = s.size(&MPS_ALLOC);
    f.others = s.size(&MPS_OTHER);
    f.total = s.size(&MPS_MAX);
    f.limit = f.total;
    if let Some(c) = s.cap(&MPS_TRIED) {
        f.requested = size_of(&c, 1);
        if let Some(p) = c.get(2) {
            f.details.push(Detail::Pool(if p.as_str() == "private" {
                MpsPool::Private
            } else {
                MpsPool::Shared
            }));
        }
    }
    sig.version_hint = Some(if s.spaced.contains(" GiB") || s.spaced.contains(" MiB") {
        "PyTorch ≥ 2.6 (GiB units)"
    } else {
        "PyTorch ≤ 2.5 (GB units, binary values)"
    });
    Some(sig)
}

fn thc(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    // Lua Torch's THC lives in cutorch; PyTorch ≤ 0.4 printed the same
    // `THCudaCheck FAIL` from its own copy (`/pytorch/torch/lib/THC/…`).
    let lua = region_has(s, &["luajit", ".lua", "cutorch", "qlua"]);
    let fw = if lua {
        Framework::LuaTorch
    } else {
        Framework::Pytorch
    };
    let kind = if m.get(3).is_some() {
        Kind::ThcCheck
    } else {
        Kind::ThcError
    };
    let mut sig = signal(kind, Chain::Thc, fw, "thc-cuda-runtime-error-2");
    sig.backend = Some(Backend::Cuda);
    sig.version_hint = Some(if lua {
        "Lua Torch (cutorch)"
    } else {
        "PyTorch ≤ 0.4 (THC)"
    });
    let file = m.get(1).or_else(|| m.get(3));
    let line = m.get(2).or_else(|| m.get(4));
    if let (Some(f), Some(l)) = (file, line) {
        sig.fields
            .details
            .push(Detail::At(format!("{}:{}", f.as_str(), l.as_str())));
    }
    Some(sig)
}

static CURRENT_DEVICE: Lazy = LazyLock::new(|| re(r"current device: {N}(?:, in function (\w+))?"));

fn cuda_error(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let ggml = s.has(&CURRENT_DEVICE)
        || m.get(3).is_some_and(|f| f.as_str().contains("ggml"))
        || region_has(
            s,
            &["ggml", "llama_", "llama runner", "llama.cpp", "GGML_ASSERT"],
        );
    let driver = m.get(2).is_some();
    let backend = if m.get(1).is_some_and(|w| w.as_str() == "HIP") {
        Backend::Hip
    } else {
        Backend::Cuda
    };
    let mut sig = if ggml {
        let mut sig = signal(
            Kind::GgmlCudaError,
            Chain::Ggml,
            Framework::LlamaCpp,
            "ggml-cuda-error",
        );
        if let Some(c) = s.cap(&CURRENT_DEVICE) {
            sig.fields.device = u32_of(&c, 1);
            if let Some(func) = c.get(2) {
                sig.fields.op = Some(func.as_str().to_string());
            }
        }
        sig.version_hint = Some(if m.get(3).is_some() {
            "llama.cpp 2023"
        } else {
            "llama.cpp ≥ 2024"
        });
        sig
    } else {
        let mut sig = signal(
            Kind::CudaErrorOom,
            Chain::PytorchCudaError,
            Framework::Pytorch,
            "cuda-error-out-of-memory",
        );
        sig.version_hint = if driver {
            Some("PyTorch ≥ 2.1 with expandable_segments (driver API)")
        } else if s.spaced.contains("cudaErrorMemoryAllocation")
            || region_has(s, &["AcceleratorError"])
        {
            Some("PyTorch ≥ 2.8")
        } else if s.spaced.contains("TORCH_USE_CUDA_DSA") {
            Some("PyTorch ≥ 2.0")
        } else {
            None
        };
        sig
    };
    sig.backend = Some(backend);
    sig.rank = 2;
    if let (Some(f), Some(l)) = (m.get(3), m.get(4)) {
        sig.fields
            .details
            .push(Detail::At(format!("{}:{}", f.as_str(), l.as_str())));
    }
    Some(sig)
}

fn tf_region(s: &Span<'_>) -> bool {
    region_has(s, &["tensorflow", "Tensorflow", "TensorFlow", "keras"])
}

fn cublas(_m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let fw = if tf_region(s) {
        Framework::Tensorflow
    } else {
        Framework::Pytorch
    };
    let mut sig = signal(
        Kind::CublasAllocFailed,
        Chain::Cublas,
        fw,
        "cublas-status-alloc-failed",
    );
    sig.backend = Some(Backend::Cuda);
    sig.fields.op = Some("cublasCreate / cuBLAS workspace".into());
    Some(sig)
}

fn cudnn(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let tf = m.get(1).is_some() || tf_region(s);
    let status = m.get(2).map(|g| g.as_str());
    let mut sig = if tf {
        let mut sig = signal(
            Kind::TfCudnnHandle,
            Chain::TfCudnn,
            Framework::Tensorflow,
            "tensorflow-cudnn-handle",
        );
        sig.implied = Some((
            Cause::Preallocation,
            "cuDNN could not create its handle: TensorFlow had already reserved the GPU for its own pool, leaving cuDNN nothing".into(),
        ));
        sig
    } else {
        signal(
            Kind::CudnnStatus,
            Chain::Cudnn,
            Framework::Pytorch,
            "cudnn-error",
        )
    };
    sig.backend = Some(Backend::Cuda);
    if let Some(st) = status {
        sig.fields
            .details
            .push(Detail::CudnnStatus(format!("CUDNN_STATUS_{st}")));
    } else {
        sig.fields.details.push(Detail::Cudnn(
            "no valid convolution algorithm (every workspace allocation failed)",
        ));
    }
    Some(sig)
}

fn nvml_assert(m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::NvmlAssert,
        Chain::Nvml,
        Framework::Pytorch,
        "pytorch-nvml-internal-assert",
    );
    sig.backend = Some(Backend::Cuda);
    sig.version_hint = Some("PyTorch ≥ 2.1 (NVML failed while building the OOM report)");
    if let (Some(f), Some(l)) = (m.get(1), m.get(2)) {
        sig.fields
            .details
            .push(Detail::At(format!("{}:{}", f.as_str(), l.as_str())));
    }
    Some(sig)
}

fn illegal_access(_m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::IllegalMemoryAccess,
        Chain::Illegal,
        Framework::Pytorch,
        "cuda-illegal-memory-access",
    );
    sig.backend = Some(Backend::Cuda);
    sig.status = Status::NotOom(
        "an illegal memory access is a kernel reading or writing outside its memory (out-of-bounds index, a custom kernel, NCCL), or fallout after an earlier OOM; it is not an allocation failure",
    );
    Some(sig)
}
