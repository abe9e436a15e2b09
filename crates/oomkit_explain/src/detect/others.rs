//! NCCL, PaddlePaddle, CuPy/Chainer, ONNX Runtime, ComfyUI's and A1111's own
//! texts, and host-memory look-alikes (CPU allocator, the kernel OOM killer).
//!
//! Formats: `docs/reference/oom-messages.md` §1.8 and §1.11.

use std::sync::LazyLock;

use oomkit_core::Bytes;
use regex::Captures;

use super::{
    Chain, Detector, Kind, Lazy, Signal, Span, Status, int_of, re, signal, size_of, u32_of,
};
use crate::detail::{Detail, SideApp};
use crate::event::{Backend, Framework};

pub(super) static DETECTORS: &[Detector] = &[
    Detector {
        headline: &NCCL_OOM,
        max_span: 600,
        parse: nccl_oom,
        defer_to: &[],
    },
    Detector {
        headline: &NCCL_UNHANDLED,
        max_span: 600,
        parse: nccl_unhandled,
        defer_to: &[],
    },
    Detector {
        headline: &PADDLE,
        max_span: 500,
        parse: paddle,
        defer_to: &[],
    },
    Detector {
        headline: &PADDLE_2018,
        max_span: 200,
        parse: paddle_2018,
        defer_to: &[],
    },
    Detector {
        headline: &CUPY,
        max_span: 300,
        parse: cupy,
        defer_to: &[],
    },
    Detector {
        headline: &ORT,
        max_span: 300,
        parse: ort,
        defer_to: &[],
    },
    Detector {
        headline: &ORT_CUDA_CALL,
        max_span: 300,
        parse: ort_cuda_call,
        defer_to: &[],
    },
    Detector {
        headline: &COMFY_TIP,
        max_span: 300,
        parse: comfy_tip,
        defer_to: &[],
    },
    Detector {
        headline: &COMFY_VAE,
        max_span: 200,
        parse: comfy_vae,
        defer_to: &[],
    },
    Detector {
        headline: &A1111_SUMMARY,
        max_span: 200,
        parse: a1111_summary,
        defer_to: &[],
    },
    Detector {
        headline: &TENSORRT,
        max_span: 300,
        parse: tensorrt,
        defer_to: &[],
    },
    Detector {
        headline: &CTRANSLATE2,
        max_span: 300,
        parse: ctranslate2,
        defer_to: &[],
    },
    Detector {
        headline: &MEMORY_SAVER,
        max_span: 300,
        parse: memory_saver,
        defer_to: &[],
    },
    Detector {
        headline: &RMM,
        max_span: 400,
        parse: rmm,
        defer_to: &[],
    },
    Detector {
        headline: &HOST_RAM,
        max_span: 300,
        parse: host_ram,
        defer_to: &[],
    },
];

static NCCL_OOM: Lazy = LazyLock::new(|| re(r"Cuda failure (?:2 )?'out of memory'"));
static NCCL_UNHANDLED: Lazy = LazyLock::new(|| re(r"unhandled cuda error|ncclUnhandledCudaError"));
static NCCL_CALLOC: Lazy =
    LazyLock::new(|| re(r"Failed to CUDA (?:calloc|malloc|host alloc) {N} bytes"));
static NCCL_DEV: Lazy = LazyLock::new(|| re(r"\S+:\d+:\d+ \[(\d+)\] \S+ NCCL WARN Cuda failure"));
static NCCL_VERSION: Lazy = LazyLock::new(|| re(r"NCCL version ([\d.+a-z]+)"));

fn nccl_oom(_m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::NcclOom,
        Chain::Nccl,
        Framework::Nccl,
        "nccl-cuda-failure-out-of-memory",
    );
    sig.backend = Some(Backend::Cuda);
    sig.rank = 2;
    sig.fields.requested = s.int(&NCCL_CALLOC).map(Bytes);
    sig.fields.device = s
        .region
        .captures(&NCCL_DEV)
        .and_then(|c| int_of(&c, 1))
        .and_then(|d| u32::try_from(d).ok());
    if let Some(v) = s.region.captures(&NCCL_VERSION).and_then(|c| c.get(1)) {
        sig.fields
            .details
            .push(Detail::NcclVersion(v.as_str().to_string()));
    }
    Some(sig)
}

fn nccl_unhandled(_m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::NcclUnhandled,
        Chain::Nccl,
        Framework::Nccl,
        "nccl-unhandled-cuda-error",
    );
    sig.backend = Some(Backend::Cuda);
    sig.status = Status::Undetermined(
        "NCCL reports an unhandled CUDA error without saying which; it is often an out-of-memory while NCCL allocates its buffers: rerun with NCCL_DEBUG=INFO to see the CUDA call that failed",
    );
    if let Some(v) = NCCL_VERSION.captures(s.spaced).and_then(|c| c.get(1)) {
        sig.fields
            .details
            .push(Detail::NcclVersion(v.as_str().to_string()));
    }
    Some(sig)
}

static PADDLE: Lazy = LazyLock::new(|| re(r"Out of memory error on GPU {N}\."));
// 2019 (PaddlePaddle 1.5–1.6): "Cannot allocate 145.468994MB GPU memory,
// available memory is 72.312500MB."; later: "… memory on GPU 0, … only …".
static PADDLE_REQ: Lazy =
    LazyLock::new(|| re(r"Cannot allocate {SIZE} (?:GPU memory|memory on GPU)"));
static PADDLE_ALLOC: Lazy = LazyLock::new(|| re(r"{SIZE} memory has been allocated"));
static PADDLE_FREE: Lazy = LazyLock::new(|| re(r"available memory is (?:only )?{SIZE}"));
static PADDLE_2018: Lazy =
    LazyLock::new(|| re(r"enforce allocating ?<= ?available failed, {N} > {N}"));

fn paddle(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::PaddleOom,
        Chain::Paddle,
        Framework::Paddle,
        "paddle-resource-exhausted",
    );
    sig.backend = Some(Backend::Cuda);
    let f = &mut sig.fields;
    f.device = u32_of(m, 1);
    f.requested = s.size(&PADDLE_REQ);
    f.allocated = s.size(&PADDLE_ALLOC);
    f.free = s.size(&PADDLE_FREE);
    sig.version_hint = Some(if f.allocated.is_some() {
        "PaddlePaddle ≥ 2.0"
    } else if s.spaced.contains("GPU memory, available memory is") {
        "PaddlePaddle 1.5–1.6 (2019 wording)"
    } else {
        "PaddlePaddle 1.x (BadAlloc)"
    });
    Some(sig)
}

fn paddle_2018(m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::PaddleEnforce,
        Chain::Paddle,
        Framework::Paddle,
        "paddle-enforce-allocating",
    );
    sig.backend = Some(Backend::Cuda);
    sig.version_hint = Some("PaddlePaddle 2018 (EnforceNotMet)");
    sig.fields.requested = int_of(m, 1).map(Bytes);
    sig.fields.free = int_of(m, 2).map(Bytes);
    Some(sig)
}

static CUPY: Lazy = LazyLock::new(|| {
    re(
        r"(?:out of memory to allocate ([\d,]+) bytes \(total ([\d,]+) bytes\)|Out of memory allocating ([\d,]+) bytes \(allocated so far: ([\d,]+) bytes\))",
    )
});

fn cupy(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::CupyOom,
        Chain::Cupy,
        Framework::Cupy,
        "cupy-out-of-memory",
    );
    sig.backend = Some(Backend::Cuda);
    sig.fields.requested = int_of(m, 1).or_else(|| int_of(m, 3)).map(Bytes);
    sig.fields.allocated = int_of(m, 2).or_else(|| int_of(m, 4)).map(Bytes);
    sig.version_hint = Some(if m.get(3).is_some() {
        "CuPy ≥ 7 / Chainer"
    } else {
        "CuPy ≤ 6"
    });
    if s.region.contains("chainer") {
        sig.fields.details.push(Detail::App(SideApp::Chainer));
    }
    Some(sig)
}

static ORT: Lazy =
    LazyLock::new(|| re(r"Failed to allocate memory for requested buffer of size {N}"));
static ORT_NODE: Lazy = LazyLock::new(|| re(r"while running (\w+) node\. Name:'([^']*)'"));

fn ort(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::OrtBfcArena,
        Chain::Ort,
        Framework::Onnxruntime,
        "onnxruntime-bfc-arena",
    );
    sig.backend = Some(Backend::Cuda);
    sig.fields.requested = int_of(m, 1).map(Bytes);
    // The CPU provider's arena (`BFCArena for Cpu`; `_nchwc` nodes exist only
    // on the CPU provider) is host memory.
    let cpu = (s.region.contains("BFCArena for Cpu") || s.region.contains("_nchwc"))
        && !s.region.contains("BFCArena for Cuda")
        && !s.region.contains("CUDAExecutionProvider");
    if cpu {
        sig.status = Status::NotOom(
            "ONNX Runtime's CPU arena could not grow: this is system RAM on the CPU execution provider, not GPU memory",
        );
        sig.backend = None;
    }
    if let Some(c) = s.region.captures(&ORT_NODE) {
        sig.fields.op = Some(format!(
            "{} {}",
            c.get(1).map_or("", |g| g.as_str()),
            c.get(2).map_or("", |g| g.as_str())
        ));
    }
    Some(sig)
}

/// ONNX Runtime's CUDA execution provider checks every CUDA call
/// (onnxruntime/core/providers/cuda/cuda_call.cc `CudaCall`): `CUDA failure
/// 2: out of memory ; GPU=0 ; hostname=… ; file=… ; line=… ; expr=…;`.
/// Error 2 is cudaErrorMemoryAllocation; the failed call names no size.
static ORT_CUDA_CALL: Lazy = LazyLock::new(|| {
    re(
        r"CUDA failure 2: out of memory ; GPU=(\d+)(?: ; [^;]*; file=[^;]*; line=\d+ ; expr=([^;]*);)?",
    )
});

fn ort_cuda_call(m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::OrtCudaCall,
        Chain::Ort,
        Framework::Onnxruntime,
        "onnxruntime-cuda-call",
    );
    sig.backend = Some(Backend::Cuda);
    sig.fields.device = int_of(m, 1).and_then(|d| u32::try_from(d).ok());
    sig.fields.op = m.get(2).map(|g| g.as_str().trim().to_string());
    sig.version_hint = Some("ONNX Runtime, CUDA execution provider");
    Some(sig)
}

static COMFY_TIP: Lazy = LazyLock::new(|| {
    re(
        r"This error means you ran out of memory on your GPU|Got an OOM, unloading all loaded models",
    )
});
static COMFY_VAE: Lazy = LazyLock::new(|| {
    re(r"Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding")
});

fn comfy_tip(_m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::ComfyuiTip,
        Chain::Comfyui,
        Framework::Comfyui,
        "comfyui-oom-tip",
    );
    sig.context_only = true;
    Some(sig)
}

fn comfy_vae(_m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::ComfyuiTiledVae,
        Chain::ComfyuiVae,
        Framework::Comfyui,
        "comfyui-tiled-vae-fallback",
    );
    sig.status = Status::NotOom(
        "ComfyUI ran out of memory in the regular VAE decode and recovered by retrying with tiled decoding; nothing failed",
    );
    Some(sig)
}

static A1111_SUMMARY: Lazy =
    LazyLock::new(|| re(r"\bA: ?{SIZE}, R: ?{SIZE}, Sys: ?([\d.]+)/([\d.]+) ?GB \(([\d.]+)%\)"));

fn a1111_summary(m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::A1111Summary,
        Chain::A1111,
        Framework::A1111,
        "a1111-memory-summary",
    );
    sig.context_only = true;
    let f = &mut sig.fields;
    if let Some(a) = size_of(m, 1) {
        f.details.push(Detail::A1111PeakAllocated(a));
    }
    if let Some(r) = size_of(m, 2) {
        f.details.push(Detail::A1111PeakReserved(r));
    }
    if let (Some(u), Some(t), Some(p)) = (m.get(3), m.get(4), m.get(5)) {
        f.details.push(Detail::A1111System(format!(
            "{}/{} GiB used ({}%)",
            u.as_str(),
            t.as_str(),
            p.as_str()
        )));
    }
    Some(sig)
}

/// TensorRT's default GPU allocator (`defaultAllocator.cpp`), then the
/// builder or the execution context that needed the memory:
/// `Requested amount of GPU memory (3887181312 bytes) could not be
/// allocated. There may not be enough free memory for allocation to
/// succeed.` and `Error Code 2: OutOfMemory (no further information)` or
/// (TensorRT 10) `… (Requested size was 20132809216 bytes.)`.
static TENSORRT: Lazy = LazyLock::new(|| {
    re(
        r"Requested amount of GPU memory \({N} bytes\) could not be allocated|Error Code 2: OutOfMemory(?: \((?:Requested size was {N} bytes\.|[^)]{0,60})\))?",
    )
});

fn tensorrt(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::TensorrtOom,
        Chain::Tensorrt,
        Framework::Tensorrt,
        "tensorrt-out-of-memory",
    );
    sig.backend = Some(Backend::Cuda);
    sig.rank = if m.get(1).is_some() { 2 } else { 1 };
    sig.fields.requested = int_of(m, 1).or_else(|| int_of(m, 2)).map(Bytes);
    if region_has_any(s, &["executionContext.cpp", "ExecutionContext"]) {
        sig.fields.op = Some("execution context (activations for the profile's shapes)".into());
    } else if region_has_any(s, &["Builder", "buildSerializedNetwork", "builder"]) {
        sig.fields.op = Some("engine build (tactic workspace)".into());
    }
    sig.version_hint = Some(if region_has_any(s, &["Requested size was"]) {
        "TensorRT ≥ 10"
    } else {
        "TensorRT"
    });
    Some(sig)
}

fn region_has_any(s: &Span<'_>, needles: &[&'static str]) -> bool {
    super::region_has(s, needles)
}

/// CTranslate2's CUDA_CHECK (src/cuda/utils.h): `CUDA failed with error `
/// and cudaGetErrorString's text; raised as a RuntimeError by faster-whisper
/// and OpenNMT's translators.
static CTRANSLATE2: Lazy = LazyLock::new(|| re(r"CUDA failed with error out of memory"));

fn ctranslate2(_m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::Ctranslate2Oom,
        Chain::Ctranslate2,
        Framework::Ctranslate2,
        "ctranslate2-cuda-out-of-memory",
    );
    sig.backend = Some(Backend::Cuda);
    if region_has_any(s, &["faster_whisper", "faster-whisper", "WhisperModel"]) {
        sig.version_hint = Some("CTranslate2 (faster-whisper)");
    }
    Some(sig)
}

/// torch_memory_saver (used by SGLang and RL trainers that pause an
/// inference engine while the trainer runs): `[torch_memory_saver.cpp]
/// cudaError error: 2 (out of memory) file=csrc/core.cpp func=resume
/// line=182`. `resume` maps back the pages the engine released: the trainer
/// side still holds them.
static MEMORY_SAVER: Lazy = LazyLock::new(|| {
    re(
        r"\[torch_memory_saver\.cpp\] cudaError error: 2 \(out of memory\)(?: file=(\S+) func=(\w+) line=(\d+))?",
    )
});

fn memory_saver(m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::TorchMemorySaver,
        Chain::MemorySaver,
        Framework::Pytorch,
        "torch-memory-saver-out-of-memory",
    );
    sig.backend = Some(Backend::Cuda);
    sig.version_hint = Some("torch_memory_saver (SGLang's pause/resume of GPU memory)");
    if let Some(func) = m.get(2) {
        sig.fields.op = Some(func.as_str().to_string());
        if func.as_str() == "resume" {
            sig.fields.details.push(Detail::Meaning(
                "the engine could not map back the memory it released before the training step: what the trainer still holds (weights, gradients, optimizer state, cache) leaves too little",
            ));
        }
    }
    if let (Some(f), Some(l)) = (m.get(1), m.get(3)) {
        sig.fields
            .details
            .push(Detail::At(format!("{}:{}", f.as_str(), l.as_str())));
    }
    Some(sig)
}

/// RAPIDS Memory Manager (librmm `cuda_memory_resource.hpp`): a device
/// allocation failure raised to Python as `MemoryError: std::bad_alloc:
/// out_of_memory: CUDA error (failed to allocate N bytes) at: …
/// cudaErrorMemoryAllocation out of memory` (cuDF, cuML).
///
/// Two more shapes of the same failure: a pool resource at its maximum
/// (`std::bad_alloc: RMM failure at:…/pool_memory_resource.hpp:179:
/// Maximum pool size exceeded`, neka-nat/cupoch#98), and RMM before 0.19
/// (`std::bad_alloc: CUDA error at: …/rmm/mr/device/cuda_memory_resource.hpp:68:
/// cudaErrorMemoryAllocation out of memory`, NVIDIA/cudf#6746).
static RMM: Lazy = LazyLock::new(|| {
    re(
        r"std::bad_alloc: (?:out_of_memory: CUDA error(?: \(failed to allocate {N} bytes\))?|RMM failure at: ?\S*pool_memory_resource\.hpp:\d+: Maximum pool size exceeded|CUDA error at: \S*rmm/\S+ cudaErrorMemoryAllocation out of memory)",
    )
});

/// Whether RMM's device failure is in the text (raised as Python's `MemoryError`).
fn rmm_failure(region: &super::RegionText<'_>) -> bool {
    region.contains("bad_alloc: out_of_memory: CUDA error")
        || (region.contains("bad_alloc")
            && (region.contains("Maximum pool size exceeded")
                || region.contains("cudaErrorMemoryAllocation")))
}

fn rmm(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::RmmOom,
        Chain::Rmm,
        Framework::Rapids,
        "rmm-out-of-memory",
    );
    sig.backend = Some(Backend::Cuda);
    sig.fields.requested = int_of(m, 1).map(Bytes);
    sig.version_hint = Some(if region_has_any(s, &["cudf", "pylibcudf"]) {
        "RAPIDS cuDF (RMM)"
    } else if region_has_any(s, &["cuml"]) {
        "RAPIDS cuML (RMM)"
    } else {
        "RAPIDS Memory Manager"
    });
    Some(sig)
}

static HOST_RAM: Lazy = LazyLock::new(|| {
    re(
        r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate {N} bytes|Out of memory: Kill(?:ed)? process {N}|(?:^|\s)MemoryError(?::|\s|$)",
    )
});

fn host_ram(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let text = m.get(0).map_or("", |g| g.as_str());
    if text.trim_start().starts_with("MemoryError") && s.region.contains("OutOfMemoryError") {
        return None;
    }
    // RMM raises a device allocation failure as Python's MemoryError:
    // that one is the GPU (the `rmm` detector reads it; its headline starts
    // inside this line, so this span ends before it).
    if text.trim_start().starts_with("MemoryError") && rmm_failure(s.region) {
        return None;
    }
    let (kind, why) = if text.contains("DefaultCPUAllocator") {
        (
            Kind::CpuAllocator,
            "PyTorch's CPU allocator ran out of system RAM; the GPU was not involved",
        )
    } else if text.contains("Kill") {
        (
            Kind::OomKiller,
            "the Linux kernel's OOM killer ended a process because system RAM ran out; GPU memory was not the problem",
        )
    } else {
        (
            Kind::PythonMemoryError,
            "Python's MemoryError means system RAM ran out, not GPU memory",
        )
    };
    let mut sig = signal(kind, Chain::Host, Framework::Pytorch, "host-memory");
    sig.status = Status::NotOom(why);
    sig.fields.requested = int_of(m, 1).map(Bytes);
    if let Some(pid) = int_of(m, 2) {
        sig.fields.details.push(Detail::KilledPid(pid));
    }
    Some(sig)
}
