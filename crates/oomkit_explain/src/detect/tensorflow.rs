//! TensorFlow/Keras (BFC allocator, op kernels, stream executor) and JAX/XLA.
//!
//! Formats: `docs/reference/oom-messages.md` §1.6 and §1.7.

use std::sync::LazyLock;

use oomkit_core::Bytes;
use regex::Captures;

use super::{
    Chain, Detector, Kind, Lazy, Signal, Span, Status, int_of, re, region_has, signal, size_of,
    tensor_bytes, u32_of, xla_framework,
};
use crate::detail::{Detail, SizeDetail};
use crate::event::{Backend, Cause, Framework};

pub(super) static DETECTORS: &[Detector] = &[
    Detector {
        headline: &OOM_TENSOR,
        max_span: 1200,
        parse: oom_tensor,
        defer_to: &[],
    },
    Detector {
        headline: &BFC,
        max_span: 400_000,
        parse: bfc,
        defer_to: &[],
    },
    Detector {
        headline: &STREAM_EXECUTOR,
        max_span: 300,
        parse: stream_executor,
        defer_to: &[],
    },
    Detector {
        headline: &HOST,
        max_span: 300,
        parse: host,
        defer_to: &[],
    },
    Detector {
        headline: &DST_TENSOR,
        max_span: 300,
        parse: dst_tensor,
        defer_to: &[],
    },
    Detector {
        headline: &TF_CONV_ALGO,
        max_span: 300,
        parse: conv_algo,
        defer_to: &[],
    },
    Detector {
        headline: &TF_GPU_DEVICE,
        max_span: 600,
        parse: tf_gpu_device,
        defer_to: &[],
    },
    Detector {
        headline: &TF_EAGER,
        max_span: 300,
        parse: tf_eager,
        defer_to: &[],
    },
    Detector {
        headline: &JAX_OOM,
        max_span: 200_000,
        parse: jax_oom,
        defer_to: &[],
    },
    Detector {
        headline: &JAX_REQUEST,
        max_span: 400,
        parse: jax_request,
        defer_to: &[],
    },
    Detector {
        headline: &ASYNC_ALLOC,
        max_span: 400,
        parse: async_alloc,
        defer_to: &[],
    },
    Detector {
        headline: &TPU_BUFFER,
        max_span: 400,
        parse: tpu_buffer,
        defer_to: &[],
    },
    Detector {
        headline: &TPU_SPACE,
        max_span: 600,
        parse: tpu_space,
        defer_to: &[],
    },
];

static OOM_TENSOR: Lazy = LazyLock::new(|| {
    re(
        // Either case: issue titles and some loggers lower-case the line
        // (`resource exhausted: oom when allocating tensor … device:gpu:0 by
        // allocator gpu_0_bfc`, Azure/MachineLearningNotebooks#880).
        r"(?i)OOM when allocating tensor (?:with|of) shape ?\[([\d, ]*)\](?: and type (\w+))?(?: on (\S+?))?(?: by allocator (\w+))?(?:\s|$|\[)",
    )
});
static BFC: Lazy = LazyLock::new(|| {
    re(
        r"(?:Allocator \((\w+)\) ran|\bRan) out of memory trying to allocate {SIZE}(?: \(rounded to {N}\))?(?: ?requested by op[\t\x20]*([\w/.-]*))?",
    )
});
static STREAM_EXECUTOR: Lazy =
    LazyLock::new(|| re(r"failed to allocate {SIZE} from device: CUDA_ERROR_OUT_OF_MEMORY"));
static HOST: Lazy = LazyLock::new(|| {
    re(r"failed to alloc {N} bytes on host|could not allocate pinned host memory of size: ?{N}")
});
// TF 2 eager: `ResourceExhaustedError: failed to allocate memory [Op:AddV2]`
// (keras-ocr#195), the op's output could not be allocated; no size is printed.
static TF_EAGER: Lazy = LazyLock::new(|| {
    re(
        r"(?:ResourceExhaustedError|RESOURCE_EXHAUSTED|Resource exhausted):? failed to allocate memory",
    )
});
/// TF 1.x's GPU device (`gpu_device.cc`, the Eigen allocator of an op's
/// scratch space): `ResourceExhaustedError: Ran out of GPU memory when
/// allocating N bytes for OP` (Kyubyong/transformer#77), or without an op
/// context the fatal `EigenAllocator for GPU ran out of memory when
/// allocating N`.
static TF_GPU_DEVICE: Lazy = LazyLock::new(|| {
    re(r"(?:Ran out of GPU memory|EigenAllocator for GPU ran out of memory) when allocating {N}")
});
static DST_TENSOR: Lazy = LazyLock::new(|| re(r"Dst tensor is not initialized"));
static TF_CONV_ALGO: Lazy = LazyLock::new(|| {
    re(r"Failed to get convolution algorithm\. This is probably because cuDNN failed to initialize")
});
static JAX_OOM: Lazy = LazyLock::new(|| {
    re(
        r"(RESOURCE_EXHAUSTED|Resource exhausted): Out of memory while trying to allocate ({SIZE}|\d+(?: bytes)?)",
    )
});
/// XLA's and TF's `cuda_malloc_async` allocator (gpu_cudamallocasync_allocator.cc):
/// `gpu_async_N cuMemAllocAsync failed to allocate B bytes: … out of memory`,
/// then `Reported by CUDA: Free memory/Total memory: F/T`.
static ASYNC_ALLOC: Lazy =
    LazyLock::new(|| re(r"(?:gpu_async_(\d+) )?cuMemAllocAsync failed to allocate {N} bytes"));
/// XLA prints the exact byte count beside a rounded size on the lines around
/// its RESOURCE_EXHAUSTED (recorded with jax 0.11 on an H200,
/// bench/gpu/results): the platform allocator's `Failed to allocate device
/// memory of 63.18GiB (67839669040 bytes)` and the BFC allocator's
/// `63.18GiB (rounded to 67839669248)`.
static XLA_EXACT: Lazy =
    LazyLock::new(|| re(r"device memory of \S+ \({N} bytes\)|\(rounded to {N}\)"));
/// XLA's memory limit for a program: the GPU scheduler's `The byte size of
/// input/output arguments (A) exceeds the base limit (L)` and the
/// rematerializer's `Can't reduce memory use below 99.61GiB (106952812571
/// bytes) by rematerialization`. L is the allocator's pool (JAX
/// preallocates 75 % of the GPU unless `XLA_PYTHON_CLIENT_MEM_FRACTION` says
/// otherwise).
static XLA_LIMIT: Lazy = LazyLock::new(|| {
    re(
        r"exceeds the base limit \({N}\)|Can't reduce memory use below {SIZE} \({N} bytes\) by rematerialization",
    )
});
/// Today's jaxlib names the allocator: `… allocate 63.18GiB with allocator
/// GPU_0_bfc on device 0`.
static XLA_ALLOCATOR: Lazy = LazyLock::new(|| re(r"allocate \S+ with allocator (\w+)"));
static ASYNC_FREE_TOTAL: Lazy =
    LazyLock::new(|| re(r"Reported by CUDA: Free memory/Total memory: {N}/{N}"));

/// XLA's TPU compiler: the program does not fit a memory space of the chip
/// (HBM, or the on-chip scratch memories vmem/smem/…).
static TPU_SPACE: Lazy = LazyLock::new(|| {
    re(
        r"Ran out of memory in memory space (\w+)\. Used {SIZE} of {SIZE} (\w+)\.(?: Exceeded \w+ capacity by {SIZE})?",
    )
});
/// XLA:TPU's runtime allocator: a buffer (`jax.device_put`, a program's
/// outputs) found no block in HBM (openxla's error code 0100, "Runtime:
/// Buffer allocation failure"): `RESOURCE_EXHAUSTED: Error allocating device
/// buffer: Attempting to allocate 8.00M. That was not possible. There are
/// 6.43M free.; (0x0x1_HBM0)`.
static TPU_BUFFER: Lazy = LazyLock::new(|| {
    re(
        r"Error allocating device buffer: Attempting to allocate {SIZE}\. That was not possible\. There are {SIZE} free\.(?: ?; ?\((\w+)\))?",
    )
});
static JAX_REQUEST: Lazy = LazyLock::new(|| {
    re(
        r"(RESOURCE_EXHAUSTED|Resource exhausted): Failed to allocate request for {SIZE} on device ordinal {N}",
    )
});

// `device:GPU:1`, `GPU_1_bfc`, and TF 1.x's `/gpu:1` (tensorflow#13591).
static DEVICE_GPU: Lazy = LazyLock::new(|| re(r"(?:device:GPU:|device:gpu:|GPU_|gpu_|/gpu:)(\d+)"));
static NODE: Lazy =
    LazyLock::new(|| re(r"\[\[\{\{node ([^}]+)\}\}|\[\[Node: ([^ =]+)|\[Op:(\w+)\]"));
static STAT_LIMIT: Lazy = LazyLock::new(|| re(r"\bLimit: {N}"));
static STAT_INUSE: Lazy = LazyLock::new(|| re(r"\bInUse: {N}"));
static STAT_PEAK: Lazy = LazyLock::new(|| re(r"\bMaxInUse: {N}"));
static STAT_LARGEST_FREE: Lazy = LazyLock::new(|| re(r"\bLargestFreeBlock: {N}"));
static NOT_A_FAILURE: Lazy =
    LazyLock::new(|| re(r"The caller indicates that this is not a failure|freed_by_count="));

fn device_of(text: &str) -> Option<u32> {
    DEVICE_GPU
        .captures(text)
        .and_then(|c| int_of(&c, 1))
        .and_then(|d| u32::try_from(d).ok())
}

fn tf_version(s: &Span<'_>) -> Option<&'static str> {
    let r = s.region;
    if r.contains("external/local_xla/xla/tsl/framework/bfc_allocator") {
        Some("TensorFlow ≥ 2.16")
    } else if r.contains("external/local_tsl/tsl/framework") {
        Some("TensorFlow 2.15")
    } else if r.contains("tensorflow/tsl/framework") {
        Some("TensorFlow 2.12–2.14")
    } else if r.contains("Graph execution error") {
        Some("TensorFlow ≥ 2.8")
    } else if r.contains("tensorflow/core/common_runtime/bfc_allocator") {
        Some("TensorFlow ≤ 2.11")
    } else {
        None
    }
}

fn oom_tensor(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::TfOomTensor,
        Chain::Tf,
        Framework::Tensorflow,
        "tensorflow-oom-when-allocating",
    );
    sig.backend = Some(Backend::Cuda);
    sig.rank = 3;
    let shape = m.get(1).map_or("", |g| g.as_str());
    // TF 1.x printed some shapes without a type (`shape[]`, tensorflow#13591):
    // then neither the tensor's type nor its size is known.
    if let Some(dtype) = m.get(2).map(|g| g.as_str()) {
        let (tensor, size) = tensor_bytes(shape, dtype);
        sig.fields.requested = size;
        sig.fields.tensor = Some(tensor);
    }
    let dev_text = format!(
        "{} {}",
        m.get(3).map_or("", |g| g.as_str()),
        m.get(4).map_or("", |g| g.as_str())
    );
    // The device is in the headline (TF ≥ 1.5) or only in the node's `_device=` (TF 1.x).
    sig.fields.device = device_of(&dev_text).or_else(|| device_of(s.spaced));
    if let Some(c) = s.cap(&NODE) {
        sig.fields.op = c
            .get(1)
            .or_else(|| c.get(2))
            .or_else(|| c.get(3))
            .map(|g| g.as_str().to_string());
    }
    if m.get(3).is_some_and(|d| d.as_str().contains("CPU")) || dev_text.contains("cpu") {
        sig.status = Status::NotOom(
            "the tensor was to be allocated on the CPU: this is host RAM, not GPU memory",
        );
        sig.backend = None;
    }
    sig.version_hint = if s.spaced.contains("of shape") {
        Some("TensorFlow ≤ 1.4")
    } else {
        tf_version(s)
    };
    sig.format = if s.spaced.contains("of shape") {
        "tensorflow-oom-when-allocating-1.x"
    } else {
        "tensorflow-oom-when-allocating"
    };
    Some(sig)
}

fn bfc(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let jax = xla_framework(s, Framework::Tensorflow) == Framework::Jax;
    let fw = if jax {
        Framework::Jax
    } else {
        Framework::Tensorflow
    };
    // JAX logs the same BFC allocator lines before its own RESOURCE_EXHAUSTED.
    let chain = if jax { Chain::Xla } else { Chain::Tf };
    let mut sig = signal(Kind::TfBfc, chain, fw, "tensorflow-bfc-allocator");
    sig.backend = Some(Backend::Cuda);
    sig.rank = 2;
    let allocator = m.get(1).map(|g| g.as_str());
    sig.fields.device = allocator.and_then(device_of);
    // `cuda_host_bfc`, `gpu_host_bfc`, `cpu`: TF's pinned-host and CPU pools
    // (tensorflow#11915) are system RAM.
    if allocator.is_some_and(|a| {
        let a = a.to_ascii_lowercase();
        a.contains("host") || a.starts_with("cpu")
    }) {
        sig.status = Status::NotOom(
            "this BFC allocator is TensorFlow's pinned-host (or CPU) pool: it ran out of system RAM that can be locked for transfers, not GPU memory",
        );
        sig.backend = None;
    }
    sig.fields.requested = int_of(m, 3).map(Bytes).or_else(|| size_of(m, 2));
    // An empty op name joined to the next line's `File "…"` (the tight view) is no op.
    if let Some(op) = m
        .get(4)
        .filter(|g| !g.as_str().is_empty() && g.as_str() != "File")
    {
        sig.fields.op = Some(op.as_str().to_string());
    }
    // The head of the message (before the dump) tells fatal from non-fatal.
    let head = super::prefix(s.spaced, 400);
    if NOT_A_FAILURE.is_match(head) {
        sig.status = Status::NotOom(
            "TensorFlow says \"the caller indicates that this is not a failure\": it retried with less memory and went on (a performance warning)",
        );
        sig.kind = Kind::TfBfcWarning;
    }
    // The allocator dump's Stats block, when the log has it.
    let limit = s.int(&STAT_LIMIT).map(Bytes);
    let in_use = s.int(&STAT_INUSE).map(Bytes);
    if let Some(u) = in_use {
        sig.fields.allocated = Some(u);
    }
    if let Some(l) = limit {
        sig.fields.details.push(Detail::PoolLimit(l));
    }
    if let Some(p) = s.int(&STAT_PEAK) {
        sig.fields.details.push(Detail::PoolPeakInUse(Bytes(p)));
    }
    if let Some(lf) = s.int(&STAT_LARGEST_FREE).map(Bytes) {
        sig.fields.details.push(Detail::LargestFreeBlock(lf));
        if let (Some(l), Some(u)) = (limit, in_use) {
            let free = l.saturating_sub(u);
            if free.0 > 0 {
                // TF fragmentation = (free − largest free block) / free (oom-messages.md §1.6).
                let frag = free.saturating_sub(lf);
                sig.fields.details.push(Detail::PoolFragmentation(format!(
                    "{frag} of {free} free ({:.0}%)",
                    frag.0 as f64 * 100.0 / free.0 as f64
                )));
            }
        }
    }
    sig.version_hint = if s.spaced.starts_with("Ran out") {
        Some("TensorFlow ≤ 1.1")
    } else if s.spaced.contains("Current allocation summary follows")
        && !s.spaced.contains("rounded to")
    {
        Some("TensorFlow 1.2–2.3")
    } else {
        tf_version(s).or(Some("TensorFlow ≥ 2.4"))
    };
    Some(sig)
}

fn stream_executor(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let fw = match xla_framework(s, Framework::Tensorflow) {
        Framework::Pytorch => Framework::Tensorflow,
        fw => fw,
    };
    let mut sig = signal(
        Kind::StreamExecutorDevice,
        Chain::Tf,
        fw,
        "stream-executor-failed-to-allocate",
    );
    sig.backend = Some(Backend::Cuda);
    sig.rank = 1;
    sig.fields.requested = size_of(m, 1);
    sig.implied = Some((
        Cause::Preallocation,
        format!(
            "the framework could not reserve {} for its memory pool: the GPU is already held, usually by another process's preallocated pool (TF and JAX grab most of the GPU at start-up)",
            sig.fields.requested.unwrap_or_default()
        ),
    ));
    Some(sig)
}

fn host(m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::HostPinned,
        Chain::Host,
        Framework::Tensorflow,
        "tensorflow-host-allocation",
    );
    sig.fields.requested = int_of(m, 1).or_else(|| int_of(m, 2)).map(Bytes);
    sig.status = Status::NotOom(
        "pinned host memory could not be allocated: this is system RAM (page-locked), not GPU memory",
    );
    Some(sig)
}

fn tf_eager(_m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::TfEagerAlloc,
        Chain::Tf,
        Framework::Tensorflow,
        "tensorflow-eager-failed-to-allocate",
    );
    sig.rank = 3;
    if region_has(s, &["GPU_0_bfc", "device:GPU", "_bfc"]) {
        sig.backend = Some(Backend::Cuda);
    }
    if let Some(c) = s.cap(&NODE) {
        sig.fields.op = c
            .get(1)
            .or_else(|| c.get(2))
            .or_else(|| c.get(3))
            .map(|g| g.as_str().to_string());
    }
    sig.version_hint = tf_version(s).or(Some("TensorFlow 2 (eager)"));
    Some(sig)
}

fn tf_gpu_device(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::TfGpuDeviceAlloc,
        Chain::Tf,
        Framework::Tensorflow,
        "tensorflow-gpu-device-allocator",
    );
    sig.backend = Some(Backend::Cuda);
    sig.rank = 3;
    sig.fields.requested = int_of(m, 1).map(Bytes);
    sig.fields.device = device_of(s.spaced);
    if let Some(c) = s.cap(&NODE) {
        sig.fields.op = c
            .get(1)
            .or_else(|| c.get(2))
            .or_else(|| c.get(3))
            .map(|g| g.as_str().trim().to_string());
    }
    sig.version_hint = tf_version(s).or(Some("TensorFlow 1.x (gpu_device.cc)"));
    Some(sig)
}

fn dst_tensor(_m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::TfDstTensor,
        Chain::Tf,
        Framework::Tensorflow,
        "tensorflow-dst-tensor-not-initialized",
    );
    sig.backend = Some(Backend::Cuda);
    sig.version_hint = tf_version(s);
    sig.fields.details.push(Detail::Meaning(
        "copying an input to the GPU failed because the destination tensor could not be allocated (an OOM in disguise)",
    ));
    Some(sig)
}

fn conv_algo(_m: &Captures<'_>, _s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::TfCudnnAlgo,
        Chain::TfCudnn,
        Framework::Tensorflow,
        "tensorflow-cudnn-handle",
    );
    sig.backend = Some(Backend::Cuda);
    sig.implied = Some((
        Cause::Preallocation,
        "cuDNN failed to initialize: TensorFlow had already reserved the GPU for its own pool, leaving cuDNN nothing".into(),
    ));
    Some(sig)
}

static BA_TOTAL: Lazy = LazyLock::new(|| re(r"total allocation: {SIZE}"));
static BA_TEMP: Lazy = LazyLock::new(|| re(r"preallocated temp allocation: {SIZE}"));
static BA_PARAMS: Lazy = LazyLock::new(|| re(r"parameter allocation: {SIZE}"));
static BA_LIVE: Lazy = LazyLock::new(|| re(r"maybe_live_out allocation: {SIZE}"));
static BA_FRAG: Lazy = LazyLock::new(|| re(r"total fragmentation: {SIZE}(?: \(([\d.]+)%\))?"));
static BA_PEAK: Lazy = LazyLock::new(|| {
    re(r#"Buffer 1: Size: {SIZE}(?: Operator: op_name="([^"]+)")?(?:.{0,300}?Shape: (\S+))?"#)
});

fn jax_device(s: &Span<'_>) -> Option<u32> {
    static ORD: Lazy = LazyLock::new(|| re(r"device ordinal {N}|on device {N}|cuda:(\d+)"));
    ORD.captures(s.spaced).and_then(|c| {
        (1..=3)
            .find_map(|i| int_of(&c, i))
            .and_then(|d| u32::try_from(d).ok())
    })
}

fn jax_oom(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let tf = xla_framework(s, Framework::Jax) == Framework::Tensorflow;
    let fw = if tf {
        Framework::Tensorflow
    } else {
        Framework::Jax
    };
    let mut sig = signal(Kind::XlaOom, Chain::Xla, fw, "xla-resource-exhausted");
    sig.backend = Some(Backend::Cuda);
    sig.rank = 3;
    let raw = m.get(2).map_or("", |g| g.as_str());
    sig.fields.requested = raw.parse::<Bytes>().ok().map(|r| exact_near(r, s));
    // Both lines come before the headline: look in the whole region.
    sig.fields.limit = s
        .region
        .captures(&XLA_LIMIT)
        .and_then(|c| int_of(&c, 1).or_else(|| int_of(&c, 3)).map(Bytes));
    sig.fields.device = jax_device(s);
    if let Some(a) = s.cap(&XLA_ALLOCATOR).and_then(|c| c.get(1)) {
        sig.fields
            .details
            .push(Detail::XlaAllocator(a.as_str().to_string()));
    }
    sig.version_hint = Some(
        if m.get(1).is_some_and(|g| g.as_str() == "Resource exhausted") {
            "jaxlib ≤ 0.1.x (2019–21)"
        } else if s.region.contains("JaxRuntimeError") {
            "jax ≥ 0.4.3x (2024+)"
        } else {
            "jaxlib 0.3–0.4 (2022–24)"
        },
    );
    let f = &mut sig.fields;
    if let Some(t) = s.size(&BA_TOTAL) {
        f.details.push(Detail::ProgramTotalAllocation(t));
    }
    let sizes: [(SizeDetail, &Lazy); 3] = [
        (Detail::Parameters, &BA_PARAMS),
        (Detail::MaybeLiveOut, &BA_LIVE),
        (Detail::PreallocatedTemp, &BA_TEMP),
    ];
    for (detail, r) in sizes {
        if let Some(v) = s.size(r) {
            f.details.push(detail(v));
        }
    }
    if let Some(c) = s.cap(&BA_FRAG)
        && let Some(v) = size_of(&c, 1)
    {
        let pct = c
            .get(2)
            .map_or(String::new(), |p| format!(" ({}%)", p.as_str()));
        f.details
            .push(Detail::XlaFragmentation(format!("{v}{pct}")));
    }
    if let Some(c) = s.cap(&BA_PEAK) {
        if let Some(v) = size_of(&c, 1) {
            f.details.push(Detail::LargestBuffer(v));
        }
        if let Some(op) = c.get(2) {
            f.op = Some(op.as_str().to_string());
        }
        if let Some(shape) = c.get(3) {
            f.details
                .push(Detail::LargestBufferShape(shape.as_str().to_string()));
        }
    }
    jax_preallocation_hint(&mut sig);
    Some(sig)
}

/// The exact byte count XLA printed for a rounded size `r` (two decimals of
/// GiB are off by up to 5 MiB), when one within 1 % of it is in the span.
/// The lines come before the headline, so the region's first such figure is
/// the candidate.
fn exact_near(r: Bytes, s: &Span<'_>) -> Bytes {
    s.region
        .captures(&XLA_EXACT)
        .and_then(|c| int_of(&c, 1).or_else(|| int_of(&c, 2)))
        .filter(|&n| u128::from(n.abs_diff(r.0)) * 100 <= u128::from(r.0))
        .map_or(r, Bytes)
}

fn jax_request(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let mut sig = signal(
        Kind::XlaRequest,
        Chain::Xla,
        Framework::Jax,
        "xla-failed-to-allocate-request",
    );
    sig.backend = Some(Backend::Cuda);
    sig.rank = 2;
    sig.fields.requested = size_of(m, 2);
    sig.fields.device = u32_of(m, 3);
    sig.version_hint = Some(
        if m.get(1).is_some_and(|g| g.as_str() == "Resource exhausted") {
            "jaxlib ≤ 0.1.x (2019–21)"
        } else {
            "jaxlib ≥ 0.3"
        },
    );
    let _ = s;
    jax_preallocation_hint(&mut sig);
    Some(sig)
}

fn async_alloc(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let tf = xla_framework(s, Framework::Jax) == Framework::Tensorflow;
    let (fw, chain) = if tf {
        (Framework::Tensorflow, Chain::Tf)
    } else {
        (Framework::Jax, Chain::Xla)
    };
    let mut sig = signal(Kind::XlaCudaMallocAsync, chain, fw, "xla-cuda-malloc-async");
    sig.backend = Some(Backend::Cuda);
    sig.rank = 3;
    sig.version_hint = Some("cuda_malloc_async allocator (stream-ordered pool)");
    sig.fields.device = u32_of(m, 1);
    sig.fields.requested = int_of(m, 2).map(Bytes);
    if let Some(c) = s.cap(&ASYNC_FREE_TOTAL) {
        sig.fields.free = int_of(&c, 1).map(Bytes);
        sig.fields.total = int_of(&c, 2).map(Bytes);
    }
    Some(sig)
}

/// XLA's TPU compiler found the program larger than a memory space: HBM
/// (the chip's device memory: the program and its arguments need more than
/// the chip has) or an on-chip scratch memory (vmem, smem: a compiler
/// limit on one fused operation, not the model's size).
fn tpu_space(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let space = m.get(1).map_or("", |g| g.as_str());
    let fw = if region_has(s, &["Bad StatusOr access"]) {
        Framework::Pytorch
    } else {
        xla_framework(s, Framework::Jax)
    };
    let mut sig = signal(Kind::XlaTpuSpace, Chain::Xla, fw, "xla-tpu-memory-space");
    sig.backend = Some(Backend::Tpu);
    sig.rank = 3;
    sig.version_hint = Some("XLA:TPU compiler");
    let used = size_of(m, 2);
    let cap = size_of(m, 3);
    let over = size_of(m, 5);
    if let Some(u) = used {
        sig.fields.details.push(Detail::ProgramTotalAllocation(u));
    }
    sig.fields
        .details
        .push(Detail::TpuMemorySpace(space.to_string()));
    let by = over.map_or(String::new(), |o| format!(", {o} over"));
    if space.eq_ignore_ascii_case("hbm") {
        sig.fields.total = cap;
        if let (Some(u), Some(c)) = (used, cap) {
            sig.implied = Some((
                Cause::Capacity,
                format!(
                    "the compiled program needs {u} of the chip's HBM and the chip has {c}{by}: shard the model over more chips, or shrink the batch or sequence"
                ),
            ));
        }
    } else if let (Some(u), Some(c)) = (used, cap) {
        sig.implied = Some((
            Cause::Capacity,
            format!(
                "one fused operation needs {u} of the TPU core's on-chip {space} and the core has {c}{by}: this is a compiler limit on one operation, not the model's size in HBM; shrink that operation's tiles (batch or sequence) or report it to XLA"
            ),
        ));
    }
    Some(sig)
}

/// XLA:TPU's runtime could not place a buffer in the chip's HBM.
fn tpu_buffer(m: &Captures<'_>, s: &Span<'_>) -> Option<Signal> {
    let fw = xla_framework(s, Framework::Jax);
    let mut sig = signal(
        Kind::XlaTpuDeviceBuffer,
        Chain::Xla,
        fw,
        "xla-tpu-device-buffer",
    );
    sig.backend = Some(Backend::Tpu);
    sig.rank = 3;
    sig.version_hint = Some("XLA:TPU runtime (PJRT)");
    sig.fields.requested = size_of(m, 1);
    sig.fields.free = size_of(m, 2);
    sig.fields
        .details
        .push(Detail::TpuMemorySpace("hbm".to_string()));
    if let Some(mem) = m.get(3) {
        sig.fields
            .details
            .push(Detail::At(mem.as_str().to_string()));
    }
    Some(sig)
}

/// A tiny request failing means the pool was already full: XLA preallocated
/// 75 % of the GPU (90 % before jax 0.4.x) and the program filled it
/// (oom-messages.md §1.7).
fn jax_preallocation_hint(sig: &mut Signal) {
    if let Some(r) = sig.fields.requested
        && r <= Bytes::mib(16)
    {
        sig.implied = Some((
            Cause::Preallocation,
            format!(
                "a request of only {r} failed, so XLA's preallocated pool (75% of the GPU by default) was already full"
            ),
        ));
    }
}
