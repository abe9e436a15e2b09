//! From a finding's numbers to the cause, the evidence and the ranked fixes.
//!
//! Let T = total, F = free, R = requested, A = allocated, U = reserved but
//! unallocated, S = this process's NVML usage, O = other processes, W = a
//! user limit. The rules follow `docs/reference/oom-messages.md` §2 and
//! its "Field conventions"; the first rule that applies wins:
//!
//! 1. R ≥ 2^48, or PyTorch's "more than 1EB" guard → `size_overflow` (a negative
//!    size cast to unsigned).
//! 2. R > T, or R larger than every GPU of the catalogue (`oomkit_core::gpus`)
//!    when the message states no total, or a family-declared impossible
//!    request → `impossible_request`; then a family-declared per-allocation
//!    limit (Intel's 4 GiB) → `memory_fraction_limit`.
//! 3. A > T or reserved > T → `wddm_sysmem_fallback`.
//! 4. a limit W is set, A + R > W and F ≥ R → `memory_fraction_limit`.
//! 5. a cause implied by the message family (vLLM → `kv_cache`, JAX tiny
//!    request or TF cuDNN → `preallocation`).
//! 6. U ≥ R and U ≥ 5 % of T → `fragmentation`.
//! 7. O ≥ 5 % of T and F + O ≥ R → `other_processes` (legacy format: memory
//!    outside PyTorch, T − F − reserved, minus ~512 MiB of context, ≥ R and ≥ 25 % of T).
//! 8. (S − reserved) − 512 MiB ≥ R − F and ≥ 10 % of T → `non_framework_memory`.
//! 9. any other message with numbers → `capacity`; none → `unknown`.
//!
//! 512 MiB is the usual CUDA context plus cuBLAS/cuDNN handles per process
//! (pytorch#20532, #28113 report 300–700 MB).

use oomkit_core::Bytes;
use oomkit_core::remedies::RemedyId;
use oomkit_core::remedies::{self, Flavor, Situation};

use crate::assemble::Finding;
use crate::detail::{BufferKind, Detail};
use crate::detect::{Fields, Kind, Status};
use crate::event::{App, Backend, Cause, Event, Fix, Framework, Numbers, Phase, ProcessUse};

const CONTEXT: Bytes = Bytes::mib(512);

/// Diagnoses one finding.
#[cfg(test)]
pub fn diagnose(f: Finding) -> Event {
    diagnose_with(f, &[])
}

/// Diagnoses one finding; `own` are PIDs of this job (never other processes).
pub fn diagnose_with(f: Finding, own: &[u64]) -> Event {
    let fields = &f.sig.fields;
    let (processes, numbers) = numbers(&f, own);
    let (cause, evidence) = cause(&f, &numbers);
    let mut fixes = match f.sig.status {
        Status::NotOom(_) => Vec::new(),
        _ => fixes(&f, cause, &numbers, &processes),
    };
    tailor(&mut fixes, &f, &processes);
    Event {
        line: f.line,
        is_oom: f.sig.status == Status::Oom,
        framework: f.sig.framework,
        backend: f.sig.backend,
        device: fields.device,
        requested_bytes: fields.requested,
        total_bytes: fields.total,
        free_bytes: fields.free,
        allocated_bytes: fields.allocated,
        reserved_bytes: fields.reserved,
        cause,
        evidence,
        fixes,
        format: f.sig.format,
        version_hint: f.sig.version_hint,
        message: f.sig.message.clone(),
        numbers,
        processes,
        tensor: fields.tensor.clone(),
        op: fields.op.clone(),
        gpu: f.gpu.clone(),
        app: f.app,
        phase: f.phase,
        os: f.os,
        repeats: f.repeats,
        ranks: f.ranks.clone(),
        follows_line: f.follows_line,
        reading_lines: f.reading_lines.clone(),
        details: fields.details.clone(),
    }
}

fn numbers(f: &Finding, own: &[u64]) -> (Vec<ProcessUse>, Numbers) {
    let x = &f.sig.fields;
    let mut procs = x.processes.clone();
    // The job's own PIDs (oomkit, the child under `oomkit run`) are this job.
    for p in &mut procs {
        if p.pid.is_some_and(|pid| own.contains(&pid)) {
            p.is_self = true;
        }
    }
    // In a container NVML returns host PIDs, so our own process is listed as
    // `Process N` and no "this process" line appears: take the smallest
    // process that holds at least what PyTorch has reserved.
    if !procs.is_empty()
        && !procs.iter().any(|p| p.is_self)
        && let Some(res) = x.reserved
        && let Some(i) = procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.used_bytes >= res)
            .min_by_key(|(_, p)| p.used_bytes)
            .map(|(i, _)| i)
        && let Some(p) = procs.get_mut(i)
    {
        p.is_self = true;
    }
    // The message's own "this process" line first, else a PID known to be this job.
    let this = procs
        .iter()
        .find(|p| p.is_self && p.pid.is_none())
        .or_else(|| procs.iter().find(|p| p.is_self))
        .map(|p| p.used_bytes);
    let others: Option<Bytes> = if procs.iter().any(|p| !p.is_self) {
        Some(Bytes(
            procs
                .iter()
                .filter(|p| !p.is_self)
                .map(|p| p.used_bytes.0)
                .sum(),
        ))
    } else if x.others.is_some() {
        x.others
    } else if !procs.is_empty() {
        Some(Bytes::ZERO)
    } else {
        None
    };
    let unallocated = x.unallocated.or_else(|| {
        x.reserved
            .zip(x.allocated)
            .map(|(r, a)| r.saturating_sub(a))
    });
    let non_framework = this.zip(x.reserved).map(|(s, r)| s.saturating_sub(r));
    let unaccounted = match (x.total, x.free) {
        (Some(t), Some(fr)) if !procs.is_empty() => Some(
            t.saturating_sub(fr)
                .saturating_sub(this.unwrap_or_default())
                .saturating_sub(others.unwrap_or_default()),
        ),
        (Some(t), Some(fr)) if x.reserved.is_some() && f.sig.backend != Some(Backend::Mps) => Some(
            t.saturating_sub(fr)
                .saturating_sub(x.reserved.unwrap_or_default()),
        ),
        _ => None,
    };
    let n = Numbers {
        shortfall_bytes: x.requested.zip(x.free).map(|(r, fr)| r.saturating_sub(fr)),
        reserved_unallocated_bytes: unallocated,
        non_framework_bytes: non_framework,
        other_processes_bytes: others,
        unaccounted_bytes: unaccounted,
        limit_bytes: x.limit,
        private_pool_bytes: x.private_pool,
        this_process_bytes: this,
    };
    (procs, n)
}

fn pct(part: Bytes, whole: Bytes) -> String {
    if whole.0 == 0 {
        return String::new();
    }
    format!("{:.0}%", part.0 as f64 * 100.0 / whole.0 as f64)
}

fn cause(f: &Finding, n: &Numbers) -> (Cause, String) {
    let x = &f.sig.fields;
    match f.sig.status {
        Status::NotOom(why) => {
            let mut e = why.to_string();
            if let Some(l) = f.follows_line {
                e.push_str(&format!(
                    "; here it follows the out-of-memory error at line {l}, so fix that first"
                ));
            }
            return (Cause::NotOom, e);
        }
        Status::Undetermined(why) => return (Cause::Unknown, why.to_string()),
        Status::Oom => {}
    }
    let (r, t, fr, a) = (x.requested, x.total, x.free, x.allocated);
    if let Some((c @ Cause::SizeOverflow, e)) = &f.sig.implied {
        return (*c, e.clone());
    }
    if let Some(r) = r
        && r.0 >= 1 << 48
    {
        return (
            Cause::SizeOverflow,
            format!(
                "the request of {r} ({} bytes) is impossibly large: a negative or overflowed size (e.g. an int32 product) reached the allocator",
                r.0
            ),
        );
    }
    if let Some((c @ Cause::ImpossibleRequest, e)) = &f.sig.implied {
        return (*c, e.clone());
    }
    if t.is_none()
        && let Some(r) = r
        && f.sig.backend != Some(Backend::Mps)
        && let Some(big) = oomkit_core::gpus::GPUS
            .iter()
            .max_by_key(|g| g.driver_total)
        && r > big.driver_total
    {
        return (
            Cause::ImpossibleRequest,
            format!(
                "a single allocation of {r} is larger than any GPU there is (the largest oomkit knows, {}, has {}); no setting makes it fit",
                big.short_name, big.driver_total
            ),
        );
    }
    if let (Some(r), Some(t)) = (r, t)
        && r > t
        && f.sig.backend != Some(Backend::Mps)
    {
        return (
            Cause::ImpossibleRequest,
            format!(
                "a single allocation of {r} is larger than the whole device ({t}); no setting makes it fit"
            ),
        );
    }
    if let Some((c @ Cause::MemoryFractionLimit, e)) = &f.sig.implied {
        return (*c, e.clone());
    }
    if let Some(t) = t {
        let over = [("allocated", a), ("reserved", x.reserved)]
            .into_iter()
            .find(|(_, v)| v.is_some_and(|v| v > t));
        if let (Some((what, Some(v))), Some(Backend::Cuda)) = (over, f.sig.backend) {
            return (
                Cause::WddmSysmemFallback,
                format!(
                    "{v} is {what} on a GPU of {t}: more than the card has, which happens when Windows' CUDA sysmem fallback spills into slow shared system memory until that runs out too"
                ),
            );
        }
    }
    if let (Some(w), Some(r), Framework::Jax) = (x.limit, r, f.sig.framework)
        && r > w
    {
        // XLA's limit is the allocator's pool, not the GPU: JAX preallocates
        // 75 % of the GPU (XLA_PYTHON_CLIENT_MEM_FRACTION) and compiles
        // programs against that figure (jax docs, "GPU memory allocation").
        return (
            Cause::MemoryFractionLimit,
            format!(
                "XLA's memory limit is {w} (the pool JAX takes: 75% of the GPU unless XLA_PYTHON_CLIENT_MEM_FRACTION says otherwise) and this single request of {r} is larger than all of it; a larger fraction helps only if the GPU itself has {r} to spare, otherwise the arrays must shrink"
            ),
        );
    }
    if let (Some(w), Some(r)) = (x.limit, r) {
        // The caching allocator grows by whole segments: requests of 1–10 MiB
        // take a 20 MiB segment (kLargeBuffer in CUDACachingAllocator.cpp),
        // so the limit bites up to 20 MiB before used + R reaches it.
        let used = x.reserved.or(a).unwrap_or_default();
        let room = fr.is_none_or(|fr| fr >= r);
        let needs = used.saturating_add(r).saturating_add(Bytes::mib(20));
        // The device had the request free and no split blocks explain the
        // failure: the limit refused it even where used + request looks
        // under it (allocators round requests up; XPU's does by more).
        let under_but_refused = needs <= w
            && fr.is_some_and(|fr| fr >= used.saturating_add(r))
            && n.reserved_unallocated_bytes.is_none_or(|u| u < r);
        if under_but_refused && f.sig.backend != Some(Backend::Mps) {
            let of_t = t.map_or(String::new(), |t| format!(" of the {t} device"));
            let fr = fr.unwrap_or_default();
            return (
                Cause::MemoryFractionLimit,
                format!(
                    "a limit of {w}{of_t} is set (set_per_process_memory_fraction or an allocator limit) and the device had {fr} free, more than the {r} request: the limit refused it (the allocator rounds a request up before it checks the limit)"
                ),
            );
        }
        if needs > w && room && f.sig.backend != Some(Backend::Mps) {
            let free = fr.map_or(String::new(), |fr| {
                format!(" while the device still had {fr} free")
            });
            let of_t = t.map_or(String::new(), |t| format!(" of the {t} device"));
            return (
                Cause::MemoryFractionLimit,
                format!(
                    "a limit of {w}{of_t} is set (set_per_process_memory_fraction or an allocator limit); {used} already reserved plus the {r} request does not fit under it{free}"
                ),
            );
        }
    }
    if let Some((c, e)) = &f.sig.implied {
        return (*c, e.clone());
    }
    if let (Some(u), Some(r)) = (n.reserved_unallocated_bytes, r) {
        let noticeable = t.is_none_or(|t| u128::from(u.0) * 20 >= u128::from(t.0));
        if u >= r && noticeable && u.0 > 0 {
            let share = t.map_or(String::new(), |t| {
                format!(" ({} of the {t} GPU)", pct(u, t))
            });
            return (
                Cause::Fragmentation,
                format!(
                    "{u} is reserved by the allocator but unallocated{share}, at least the {r} request: free space exists but is split across partly used blocks"
                ),
            );
        }
    }
    if let (Some(o), Some(t), Some(r)) = (n.other_processes_bytes, t, r) {
        let named = f.sig.fields.processes.iter().any(|p| p.pid.is_some()) || x.others.is_some();
        let free = fr.unwrap_or_default();
        if named
            && u128::from(o.0) * 20 >= u128::from(t.0)
            && free.saturating_add(o) >= r
            && f.sig.backend != Some(Backend::Mps)
        {
            return (
                Cause::OtherProcesses,
                format!(
                    "other processes hold {o} of the {t} GPU; without them the {r} request would have fit ({free} free now)"
                ),
            );
        }
    }
    if n.this_process_bytes.is_none()
        && x.reserved.is_some()
        && let (Some(out), Some(t), Some(r)) = (n.unaccounted_bytes, t, r)
        && out.saturating_sub(CONTEXT) >= r
        && u128::from(out.0) * 4 >= u128::from(t.0)
    {
        return (
            Cause::OtherProcesses,
            format!(
                "{out} of the {t} GPU is held outside PyTorch (other processes, or a display), far more than a CUDA context; without it the {r} request would fit"
            ),
        );
    }
    if let (Some(nf), Some(t), Some(r)) = (n.non_framework_bytes, t, r) {
        let short = r.saturating_sub(fr.unwrap_or_default());
        if nf.saturating_sub(CONTEXT) >= short && u128::from(nf.0) * 10 >= u128::from(t.0) {
            return (
                Cause::NonFrameworkMemory,
                format!(
                    "this process uses {} on the GPU but the allocator accounts for only {}: {nf} is held outside it (CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers, other libraries such as TensorRT or bitsandbytes)",
                    n.this_process_bytes.unwrap_or_default(),
                    x.reserved.unwrap_or_default()
                ),
            );
        }
    }
    // A timeline that climbed steadily to the error: the job did not need
    // more memory at once, it kept what it should have freed.
    if let Some(g) = x.details.iter().find_map(|d| match d {
        Detail::Growth(g) => Some(g),
        _ => None,
    }) {
        return (
            Cause::Leak,
            format!(
                "memory climbed steadily before the error ({g}): something is kept across steps (tensors with their graphs, a growing cache or list)"
            ),
        );
    }
    if r.is_some() || t.is_some() || a.is_some() || fr.is_some() {
        return (Cause::Capacity, capacity_evidence(f, n));
    }
    (Cause::Unknown, unknown_evidence(f))
}

/// What a capacity OOM's numbers show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shortage {
    /// A request under 0.2 % of the GPU failed with under 1 % free: the GPU
    /// was already full, often from memory building up across steps.
    SmallRequestOnFullGpu,
    /// Anything else: the step itself needs more than there is.
    JobTooBig,
}

fn shortage(x: &Fields) -> Shortage {
    if let (Some(r), Some(t), Some(fr)) = (x.requested, x.total, x.free)
        && u128::from(r.0) * 500 <= u128::from(t.0)
        && u128::from(fr.0) * 100 <= u128::from(t.0)
    {
        Shortage::SmallRequestOnFullGpu
    } else {
        Shortage::JobTooBig
    }
}

fn capacity_evidence(f: &Finding, n: &Numbers) -> String {
    let x = &f.sig.fields;
    let mut parts = Vec::new();
    match (x.requested, x.free) {
        (Some(r), Some(fr)) if fr < r => parts.push(format!("asked for {r} with only {fr} free")),
        (Some(r), Some(fr)) => parts.push(format!("asked for {r} while {fr} was reported free")),
        (Some(r), None) => parts.push(format!("asked for {r}")),
        _ => {}
    }
    if let Some(a) = x.allocated {
        let held = match (x.reserved, x.total) {
            (Some(res), Some(t)) => format!("{a} is already allocated ({res} reserved) of {t}"),
            (None, Some(t)) => format!("{a} is already allocated of {t}"),
            _ => format!("{a} is already allocated"),
        };
        parts.push(held);
    } else if let Some(t) = x.total {
        parts.push(format!("the device has {t}"));
    }
    if let Some(o) = n.other_processes_bytes.filter(|o| o.0 > 0) {
        parts.push(if f.sig.backend == Some(Backend::Mps) {
            format!("other allocations (Metal memory outside PyTorch's heap) hold {o}")
        } else {
            format!("other processes hold {o}")
        });
    }
    if let (Some(fr), Some(t)) = (x.free, x.total)
        && fr > t
    {
        // oom-messages.md §2 diagnosis 8: UMA/APU devices (Strix Halo, MI300A)
        // report the GTT/carve-out as total and system RAM as free.
        parts.push(format!(
            "free ({fr}) exceeds total ({t}): a unified-memory APU reports its GPU carve-out as the total, and that carve-out is the real limit (raise it in the BIOS or with the amdgpu.gttsize / ttm page limits)"
        ));
    }
    if let Some(v) = x.details.iter().find_map(|d| match d {
        Detail::ProgramTotalAllocation(v) => Some(v),
        _ => None,
    }) {
        parts.push(format!("the compiled program needs {v} in total"));
    }
    let mut e = parts.join("; ");
    if e.is_empty() {
        e = "the allocation did not fit".into();
    }
    if shortage(x) == Shortage::SmallRequestOnFullGpu {
        e.push_str(": a small request failed because the GPU was already full; if this happens only after many steps, memory is building up (tensors or graphs kept across steps)");
        return e;
    }
    if f.sig.framework == Framework::Jax && x.total.is_none() && xla_platform_allocator(x) {
        // XLA_PYTHON_CLIENT_ALLOCATOR=platform: no pool, the driver refused.
        e.push_str(": the GPU itself had no room (XLA's platform allocator asks the driver directly, without a pool)");
        return e;
    }
    if f.sig.framework == Framework::Jax && x.total.is_none() {
        // Without a total the device is unknown; what failed is XLA's pool.
        e.push_str(": the job needs more memory than XLA's allocator had (JAX takes 75% of the GPU at start-up unless XLA_PYTHON_CLIENT_MEM_FRACTION or XLA_PYTHON_CLIENT_PREALLOCATE=false says otherwise)");
        return e;
    }
    e.push_str(": the job needs more memory than the device offers");
    e
}

/// XLA named an allocator other than its BFC pool (`SE_0_space_0` under
/// `XLA_PYTHON_CLIENT_ALLOCATOR=platform`): the driver itself refused.
fn xla_platform_allocator(x: &Fields) -> bool {
    x.details
        .iter()
        .any(|d| matches!(d, Detail::XlaAllocator(a) if !a.contains("bfc")))
}

fn unknown_evidence(f: &Finding) -> String {
    let what = match f.sig.kind {
        Kind::CudaErrorOom => {
            "CUDA returned cudaErrorMemoryAllocation outside the caching allocator (context creation, a cuBLAS/cuDNN workspace, NCCL, or an extension's own cudaMalloc)"
        }
        Kind::CublasAllocFailed => {
            "cuBLAS could not allocate its handle or workspace: the GPU was already full when the first matrix multiply ran"
        }
        Kind::CudnnStatus => {
            "cuDNN failed to create its handle or load its kernels, which needs hundreds of MB (pytorch#81620): almost always the GPU was full"
        }
        Kind::NvmlAssert => {
            "PyTorch hit an OOM and then NVML failed while it built the report, so the real message was replaced by this assert"
        }
        Kind::TfEagerAlloc => {
            "TensorFlow could not allocate an op's output while running eagerly (the BFC pool was full)"
        }
        Kind::TfDstTensor => {
            "copying an input onto the GPU failed because the destination tensor could not be allocated"
        }
        Kind::ThcError | Kind::ThcCheck => "the CUDA runtime returned error 2 (out of memory)",
        Kind::ComfyuiTip => "ComfyUI reports that the GPU ran out of memory",
        Kind::GgmlCudaError | Kind::GgmlMalloc | Kind::GgmlFailed => {
            "llama.cpp could not allocate a GPU buffer"
        }
        Kind::NcclOom => "NCCL could not allocate its communication buffers on the GPU",
        Kind::TgiWarmup => "TGI's warm-up could not fit the configured batch of tokens",
        _ => "the device ran out of memory",
    };
    match f.reading_lines.first() {
        Some(l) => format!(
            "{what}; the message states no memory figures, but the memory reading at line {l} shows what held the GPU"
        ),
        None if matches!(f.sig.backend, Some(Backend::Mps | Backend::Metal)) => format!(
            "{what}; the message states no memory figures: on a Mac the GPU shares the system's unified memory, so check what else holds memory (Activity Monitor's Memory tab)"
        ),
        None => format!(
            "{what}; the message states no memory figures, so check what holds the GPU (`oomkit monitor --once`, or nvidia-smi)"
        ),
    }
}

/// The snippet flavors for this finding, best first. Only flavors of the
/// framework that raised the error (and shell commands) appear: a remedy with
/// no snippet among them gets no code rather than another framework's.
fn flavors(f: &Finding) -> Vec<Flavor> {
    use Flavor::*;
    let mut v = by_app(f);
    if f.sig.framework == Framework::Pytorch {
        // The rest of the PyTorch ecosystem, after the app's own.
        for fl in [Pytorch, Shell, Transformers, Peft, Accelerate, Deepspeed] {
            if !v.contains(&fl) {
                v.push(fl);
            }
        }
    }
    v
}

fn by_app(f: &Finding) -> Vec<Flavor> {
    use Flavor::*;
    match f.sig.framework {
        Framework::Pytorch => match f.app {
            Some(App::Diffusers) => vec![Diffusers, Pytorch, Shell],
            Some(App::A1111) => vec![A1111, Shell, Pytorch],
            Some(App::Comfyui) => vec![Comfyui, Shell, Pytorch],
            Some(App::TransformersTrainer | App::Transformers) => {
                vec![Transformers, Peft, Pytorch, Shell]
            }
            Some(App::Deepspeed) => vec![Deepspeed, Transformers, Pytorch, Shell],
            Some(App::Accelerate) => vec![Accelerate, Transformers, Pytorch, Shell],
            Some(App::Vllm) => vec![Vllm, Shell, Pytorch],
            Some(App::Lightning) | None => vec![Pytorch, Shell, Transformers],
        },
        Framework::Tensorflow => vec![Tensorflow, Shell],
        Framework::Jax => vec![Jax, Shell],
        Framework::Vllm => vec![Vllm, Shell],
        Framework::LlamaCpp => vec![LlamaCpp, Shell],
        Framework::Paddle => vec![Paddle, Shell],
        Framework::Cupy => vec![Cupy, Shell],
        Framework::Onnxruntime => vec![Onnxruntime, Shell],
        Framework::Tgi => vec![Tgi, Shell],
        Framework::Nccl => vec![Shell, Pytorch],
        Framework::LuaTorch => vec![Shell],
        Framework::A1111 => vec![A1111, Shell],
        Framework::Comfyui => vec![Comfyui, Shell],
        Framework::Mlx
        | Framework::Tensorrt
        | Framework::Ctranslate2
        | Framework::Rapids
        | Framework::Sglang => vec![Shell],
    }
}

/// The capacity ladder for this framework and situation (seed 000's
/// "Quick Reference: OOM Solutions by Situation", most effective first).
fn ladder(f: &Finding) -> Vec<RemedyId> {
    match f.sig.framework {
        Framework::Tensorflow => vec![
            RemedyId::ReduceBatch,
            RemedyId::MixedPrecision,
            RemedyId::TfMemoryGrowth,
            RemedyId::TfCudaMallocAsync,
            RemedyId::TfReportAllocations,
            RemedyId::ReduceInputSize,
        ],
        // A TPU program is compiled to fit the chip's HBM: the GPU pool's
        // preallocation settings (XLA_PYTHON_CLIENT_*) do not apply.
        Framework::Jax if f.sig.backend == Some(Backend::Tpu) => {
            vec![RemedyId::JaxRematerialize, RemedyId::ReduceBatch]
        }
        // The platform allocator has no pool to enlarge: only the program
        // can shrink.
        Framework::Jax if xla_platform_allocator(&f.sig.fields) => {
            vec![
                RemedyId::JaxRematerialize,
                RemedyId::ReduceBatch,
                RemedyId::FreeOtherProcesses,
            ]
        }
        Framework::Jax => vec![
            RemedyId::JaxMemFraction,
            RemedyId::JaxRematerialize,
            RemedyId::ReduceBatch,
            RemedyId::JaxNoPreallocate,
        ],
        Framework::Vllm => vec![
            RemedyId::VllmMaxModelLen,
            RemedyId::VllmGpuMemoryUtilization,
            RemedyId::VllmKvCacheDtype,
            RemedyId::VllmTensorParallel,
            RemedyId::VllmEnforceEager,
        ],
        Framework::LlamaCpp => {
            let weights = f
                .sig
                .fields
                .details
                .contains(&Detail::Buffer(BufferKind::ModelWeights));
            if weights {
                // A model already at 4 bits or fewer is not told to
                // quantize to 4 bits.
                let low_bit = model_quant(&f.sig.fields).is_some_and(|q| {
                    let q = q.to_ascii_uppercase();
                    ["Q2", "Q3", "Q4", "IQ1", "IQ2", "IQ3", "IQ4"]
                        .iter()
                        .any(|p| q.starts_with(p))
                });
                let mut v = vec![RemedyId::LlamacppGpuLayers];
                if !low_bit {
                    v.push(RemedyId::Quantize4bit);
                }
                v.extend([RemedyId::LlamacppContext, RemedyId::FreeOtherProcesses]);
                v
            } else {
                vec![
                    RemedyId::LlamacppContext,
                    RemedyId::LlamacppBatch,
                    RemedyId::LlamacppKvCacheQuant,
                    RemedyId::LlamacppGpuLayers,
                    RemedyId::FreeOtherProcesses,
                ]
            }
        }
        Framework::Paddle => vec![
            RemedyId::ReduceBatch,
            RemedyId::PaddleMemoryFlags,
            RemedyId::FreeOtherProcesses,
            RemedyId::MixedPrecision,
        ],
        Framework::Cupy => vec![
            RemedyId::CupyMemoryPool,
            RemedyId::ReduceBatch,
            RemedyId::FreeOtherProcesses,
        ],
        Framework::Onnxruntime => vec![
            RemedyId::OnnxruntimeArena,
            RemedyId::ReduceBatch,
            RemedyId::FreeOtherProcesses,
        ],
        Framework::Tgi => vec![
            RemedyId::TgiMaxBatchPrefillTokens,
            RemedyId::Quantize4bit,
            RemedyId::VllmTensorParallel,
        ],
        Framework::Nccl => vec![
            RemedyId::NcclReduceBuffers,
            RemedyId::FreeOtherProcesses,
            RemedyId::ReduceBatch,
            RemedyId::NcclDebug,
        ],
        Framework::LuaTorch => vec![RemedyId::ReduceBatch, RemedyId::FreeOtherProcesses],
        Framework::Comfyui | Framework::A1111 => {
            vec![
                RemedyId::ComfyuiLowvram,
                RemedyId::ReduceBatch,
                RemedyId::ReduceInputSize,
            ]
        }
        // MLX on a Mac: the model and its cache must fit the GPU's share of
        // unified memory (macOS wires at most about 75 % by default).
        Framework::Mlx => vec![
            RemedyId::ReduceInputSize,
            RemedyId::Quantize4bit,
            RemedyId::ReduceBatch,
            RemedyId::UnloadModels,
        ],
        // TensorRT plans memory for the optimisation profile's largest
        // shapes and the builder's workspace.
        Framework::Tensorrt => vec![
            RemedyId::ReduceInputSize,
            RemedyId::ReduceBatch,
            RemedyId::FreeOtherProcesses,
            RemedyId::UnloadModels,
        ],
        Framework::Ctranslate2 => vec![
            RemedyId::Quantize8bit,
            RemedyId::ReduceBatch,
            RemedyId::FreeOtherProcesses,
            RemedyId::ReduceInputSize,
        ],
        Framework::Rapids => vec![
            RemedyId::ReduceInputSize,
            RemedyId::FreeOtherProcesses,
            RemedyId::CupyMemoryPool,
        ],
        Framework::Sglang => vec![
            RemedyId::SglangMemFractionStatic,
            RemedyId::ModelParallel,
            RemedyId::Quantize4bit,
            RemedyId::FreeOtherProcesses,
        ],
        Framework::Pytorch => pytorch_ladder(f),
    }
}

fn pytorch_ladder(f: &Finding) -> Vec<RemedyId> {
    if f.sig.backend == Some(Backend::Mps) {
        let mut v = vec![
            RemedyId::ReduceBatch,
            RemedyId::HalfPrecisionWeights,
            RemedyId::UnloadModels,
        ];
        if f.app == Some(App::Diffusers) {
            v.insert(0, RemedyId::DiffusersSlicing);
        }
        v.push(RemedyId::MpsHighWatermark);
        return v;
    }
    match (f.app, f.phase) {
        (Some(App::A1111), _) => vec![
            RemedyId::A1111Medvram,
            RemedyId::A1111Lowvram,
            RemedyId::EfficientAttention,
            RemedyId::ReduceInputSize,
            RemedyId::ReduceBatch,
        ],
        (Some(App::Comfyui), _) => vec![
            RemedyId::ComfyuiLowvram,
            RemedyId::ReduceBatch,
            RemedyId::ReduceInputSize,
            RemedyId::UnloadModels,
        ],
        (Some(App::Diffusers), _) => vec![
            RemedyId::DiffusersCpuOffload,
            RemedyId::DiffusersSlicing,
            RemedyId::HalfPrecisionWeights,
            RemedyId::ReduceInputSize,
            RemedyId::ReduceBatch,
        ],
        (Some(App::Vllm), _) => vec![
            RemedyId::VllmGpuMemoryUtilization,
            RemedyId::VllmMaxModelLen,
            RemedyId::VllmEnforceEager,
            RemedyId::VllmTensorParallel,
        ],
        // Every rank loading a full copy (FSDP, DeepSpeed, device_map):
        // load once and shard, before making the model smaller.
        (Some(App::Deepspeed | App::Accelerate), Some(Phase::Loading)) => vec![
            RemedyId::RankZeroLoading,
            RemedyId::ZeroSharding,
            RemedyId::HalfPrecisionWeights,
            RemedyId::Quantize4bit,
            RemedyId::CpuOffload,
        ],
        (_, Some(Phase::Loading)) => vec![
            RemedyId::RankZeroLoading,
            RemedyId::HalfPrecisionWeights,
            RemedyId::Quantize4bit,
            RemedyId::Quantize8bit,
            RemedyId::ModelParallel,
            RemedyId::CpuOffload,
        ],
        (_, Some(Phase::Inference | Phase::Generation | Phase::Evaluation)) => vec![
            RemedyId::InferenceMode,
            RemedyId::HalfPrecisionWeights,
            RemedyId::ReduceBatch,
            RemedyId::EfficientAttention,
            RemedyId::Quantize4bit,
            RemedyId::CpuOffload,
        ],
        // A DeepSpeed job shards and offloads before it shrinks the batch.
        (Some(App::Deepspeed), Some(Phase::Training)) => vec![
            RemedyId::ZeroSharding,
            RemedyId::CpuOffload,
            RemedyId::ReduceBatch,
            RemedyId::GradientAccumulation,
            RemedyId::GradientCheckpointing,
            RemedyId::MixedPrecision,
        ],
        (_, Some(Phase::Training)) => vec![
            RemedyId::ReduceBatch,
            RemedyId::GradientAccumulation,
            RemedyId::MixedPrecision,
            RemedyId::GradientCheckpointing,
            RemedyId::Optimizer8bit,
            RemedyId::Lora,
            RemedyId::ZeroSharding,
        ],
        _ => vec![
            RemedyId::ReduceBatch,
            RemedyId::MixedPrecision,
            RemedyId::GradientCheckpointing,
            RemedyId::InferenceMode,
            RemedyId::Quantize4bit,
            RemedyId::CpuOffload,
        ],
    }
}

fn fixes(f: &Finding, cause: Cause, n: &Numbers, procs: &[ProcessUse]) -> Vec<Fix> {
    let x = &f.sig.fields;
    let pytorch_cuda = f.sig.framework == Framework::Pytorch
        && matches!(f.sig.backend, Some(Backend::Cuda | Backend::Hip));
    // (id, why override, saves)
    let mut plan: Plan = Vec::new();
    let push_all = |plan: &mut Plan, ids: Vec<RemedyId>| {
        for id in ids {
            plan.push((id, None, None));
        }
    };
    match cause {
        Cause::Fragmentation => {
            let u = n.reserved_unallocated_bytes.unwrap_or_default();
            let why = format!(
                "{u} is reserved but unallocated; growing segments instead of splitting them lets the allocator reuse it"
            );
            match f.sig.framework {
                Framework::Pytorch => {
                    plan.push((RemedyId::ExpandableSegments, Some(why), Some(u)));
                    plan.push((RemedyId::MaxSplitSize, None, None));
                    plan.push((RemedyId::EmptyCacheBetweenPhases, None, None));
                }
                Framework::Tensorflow => plan.push((RemedyId::TfCudaMallocAsync, None, None)),
                _ => {}
            }
            push_all(&mut plan, ladder(f).into_iter().take(3).collect());
        }
        Cause::OtherProcesses => {
            let o = n
                .other_processes_bytes
                .or(n.unaccounted_bytes)
                .unwrap_or_default();
            // After `numbers`: this job's own PIDs are marked and left out.
            let pids: Vec<String> = procs
                .iter()
                .filter(|p| !p.is_self)
                .filter_map(|p| p.pid.map(|pid| format!("{pid} ({})", p.used_bytes)))
                .collect();
            let who = if pids.is_empty() {
                String::new()
            } else {
                format!(": PID {}", pids.join(", "))
            };
            plan.push((
                RemedyId::FreeOtherProcesses,
                Some(format!("other processes hold {o}{who}")),
                Some(o),
            ));
            push_all(&mut plan, ladder(f).into_iter().take(4).collect());
        }
        Cause::NonFrameworkMemory => {
            let nf = n.non_framework_bytes.unwrap_or_default();
            plan.push((
                RemedyId::UnloadModels,
                Some(format!(
                    "{nf} is held outside the allocator: another library or model in this process"
                )),
                None,
            ));
            plan.push((RemedyId::CudnnWorkspace, None, None));
            plan.push((RemedyId::NcclReduceBuffers, None, None));
            push_all(&mut plan, ladder(f).into_iter().take(3).collect());
        }
        Cause::ImpossibleRequest => {
            if f.sig.backend == Some(Backend::Xpu) {
                plan.push((RemedyId::XpuRelaxedAllocationLimits, None, None));
            }
            plan.push((
                RemedyId::ReduceInputSize,
                Some(format!(
                    "one tensor of {} cannot fit: split or chunk the work that creates it",
                    x.requested.unwrap_or_default()
                )),
                None,
            ));
            push_all(
                &mut plan,
                vec![
                    RemedyId::FixAllocationSize,
                    RemedyId::ModelParallel,
                    RemedyId::CpuOffload,
                    RemedyId::BiggerGpu,
                ],
            );
        }
        Cause::MemoryFractionLimit => {
            let (w, t) = (x.limit.unwrap_or_default(), x.total.unwrap_or_default());
            // Intel's single-allocation limit comes with its family's
            // implied cause; an `allowed` figure is a per-process fraction.
            let per_allocation = matches!(f.sig.implied, Some((Cause::MemoryFractionLimit, _)));
            if f.sig.backend == Some(Backend::Xpu) && per_allocation {
                // A per-allocation limit: lifting it frees nothing, it lets
                // one larger tensor through; chunking keeps each under it.
                let r = x.requested.unwrap_or_default();
                plan.push((
                    RemedyId::XpuRelaxedAllocationLimits,
                    Some(format!(
                        "Intel's runtime refuses single allocations over {w} by default; this one was {r}"
                    )),
                    None,
                ));
                plan.push((
                    RemedyId::ReduceInputSize,
                    Some(format!(
                        "keep each tensor under {w}: split the work that creates the {r} one"
                    )),
                    None,
                ));
                push_all(&mut plan, ladder(f).into_iter().take(2).collect());
            } else {
                let saves = t.saturating_sub(w);
                let id = match f.sig.framework {
                    Framework::Jax => RemedyId::JaxMemFraction,
                    Framework::Tensorflow => RemedyId::TfMemoryLimit,
                    _ => RemedyId::RaiseMemoryFraction,
                };
                let why = if t.0 > 0 {
                    format!("the limit is {w}; the device has {t}")
                } else {
                    format!("the limit is {w}")
                };
                plan.push((id, Some(why), (saves.0 > 0).then_some(saves)));
                push_all(&mut plan, ladder(f).into_iter().take(3).collect());
            }
        }
        Cause::SizeOverflow => push_all(
            &mut plan,
            vec![RemedyId::FixAllocationSize, RemedyId::RecordMemoryHistory],
        ),
        Cause::WddmSysmemFallback => {
            plan.push((RemedyId::DisableSysmemFallback, None, None));
            push_all(&mut plan, ladder(f).into_iter().take(4).collect());
        }
        Cause::Preallocation => {
            let ids = match f.sig.framework {
                Framework::Jax => vec![
                    RemedyId::JaxNoPreallocate,
                    RemedyId::JaxMemFraction,
                    RemedyId::FreeOtherProcesses,
                    RemedyId::JaxRematerialize,
                    RemedyId::JaxPlatformAllocator,
                ],
                _ => vec![
                    RemedyId::TfMemoryGrowth,
                    RemedyId::TfMemoryLimit,
                    RemedyId::FreeOtherProcesses,
                    RemedyId::CudnnWorkspace,
                    RemedyId::ReduceBatch,
                ],
            };
            push_all(&mut plan, ids);
        }
        Cause::KvCache if f.sig.framework == Framework::Sglang => push_all(
            &mut plan,
            vec![
                RemedyId::SglangMemFractionStatic,
                RemedyId::ModelParallel,
                RemedyId::Quantize4bit,
                RemedyId::FreeOtherProcesses,
            ],
        ),
        Cause::KvCache => {
            let suggested = suggested_len(x);
            let why = suggested.map(|s| {
                format!("at most {s} tokens fit in the KV cache this engine can allocate")
            });
            plan.push((RemedyId::VllmMaxModelLen, why, None));
            push_all(
                &mut plan,
                vec![
                    RemedyId::VllmGpuMemoryUtilization,
                    RemedyId::VllmKvCacheDtype,
                    RemedyId::VllmTensorParallel,
                    RemedyId::FreeOtherProcesses,
                    RemedyId::VllmEnforceEager,
                ],
            );
        }
        Cause::Capacity => {
            if shortage(x) == Shortage::SmallRequestOnFullGpu {
                match (f.sig.framework, f.app, f.phase) {
                    // An image UI or a server holds models, not a training loop's leftovers.
                    (Framework::Pytorch, Some(App::Comfyui | App::A1111 | App::Diffusers), _) => {
                        plan.push((RemedyId::UnloadModels, None, None));
                    }
                    (Framework::Pytorch, Some(App::Vllm), _)
                    | (Framework::Pytorch, _, Some(Phase::Loading | Phase::Serving)) => {}
                    (Framework::Pytorch, _, _) => push_all(
                        &mut plan,
                        vec![RemedyId::ReleaseReferences, RemedyId::RecordMemoryHistory],
                    ),
                    _ => {}
                }
            }
            if let Some(s) = n.shortfall_bytes.filter(|s| s.0 > 0) {
                let ids = ladder(f);
                if let Some(first) = ids.first() {
                    plan.push((
                        *first,
                        Some(format!("the step needed {s} more than was free")),
                        None,
                    ));
                }
                push_all(&mut plan, ids.into_iter().skip(1).collect());
            } else {
                push_all(&mut plan, ladder(f));
            }
            if pytorch_cuda
                && n.reserved_unallocated_bytes
                    .is_some_and(|u| u >= Bytes::mib(256))
            {
                let u = n.reserved_unallocated_bytes.unwrap_or_default();
                plan.push((
                    RemedyId::ExpandableSegments,
                    Some(format!(
                        "{u} is reserved but unallocated and could be reused"
                    )),
                    Some(u),
                ));
            }
            if n.private_pool_bytes.is_some_and(|p| p.0 > 0) {
                plan.push((
                    RemedyId::DisableCudaGraphs,
                    Some(format!(
                        "{} sits in CUDA-graph private pools",
                        n.private_pool_bytes.unwrap_or_default()
                    )),
                    n.private_pool_bytes,
                ));
            }
        }
        Cause::Unknown => {
            let ids = match f.sig.kind {
                Kind::NcclUnhandled => {
                    vec![
                        RemedyId::NcclDebug,
                        RemedyId::NcclReduceBuffers,
                        RemedyId::FreeOtherProcesses,
                    ]
                }
                Kind::CudnnStatus => vec![
                    RemedyId::FreeOtherProcesses,
                    RemedyId::ReduceBatch,
                    RemedyId::CudnnWorkspace,
                    RemedyId::MixedPrecision,
                ],
                Kind::CublasAllocFailed | Kind::NvmlAssert | Kind::CudaErrorOom => {
                    let mut v = vec![RemedyId::FreeOtherProcesses, RemedyId::ReduceBatch];
                    v.extend(ladder(f).into_iter().skip(1).take(3));
                    v.push(RemedyId::RecordMemoryHistory);
                    v
                }
                _ => {
                    let mut v = ladder(f);
                    v.push(RemedyId::FreeOtherProcesses);
                    v
                }
            };
            push_all(&mut plan, ids);
        }
        Cause::Leak => {
            push_all(
                &mut plan,
                vec![RemedyId::ReleaseReferences, RemedyId::RecordMemoryHistory],
            );
            push_all(&mut plan, ladder(f).into_iter().take(3).collect());
        }
        Cause::NotOom => {}
    }
    // Fixes already in effect: a quantized model is not told to quantize
    // (or to load in 16 bits), a batch of 1 is not told to shrink.
    let in_effect = |id: RemedyId| match id {
        RemedyId::Quantize4bit
        | RemedyId::Quantize8bit
        | RemedyId::Qlora
        | RemedyId::HalfPrecisionWeights => {
            model_quant(x).is_some() && f.sig.framework == Framework::Pytorch
        }
        RemedyId::ReduceBatch => x.details.contains(&Detail::BatchSize(1)),
        _ => false,
    };
    plan.retain(|(id, _, _)| !in_effect(*id));
    build_fixes(plan, &flavors(f), &situation(f))
}

/// What the finding tells of where the job ran, in the remedy catalogue's
/// terms: a fix whose scope does not admit it is never offered.
pub(crate) fn situation(f: &Finding) -> Situation {
    use remedies::{App as A, Device as D, Phase as P, Runtime as R};
    let runtime = match f.sig.framework {
        Framework::Pytorch | Framework::A1111 | Framework::Comfyui => R::Pytorch,
        Framework::Tensorflow => R::Tensorflow,
        Framework::Jax => R::Jax,
        Framework::Vllm => R::Vllm,
        Framework::LlamaCpp => R::LlamaCpp,
        Framework::Paddle => R::Paddle,
        Framework::Cupy => R::Cupy,
        Framework::Onnxruntime => R::Onnxruntime,
        Framework::Tgi => R::Tgi,
        Framework::Nccl => R::Nccl,
        Framework::LuaTorch => R::LuaTorch,
        Framework::Mlx => R::Mlx,
        Framework::Tensorrt => R::Tensorrt,
        Framework::Ctranslate2 => R::Ctranslate2,
        Framework::Rapids => R::Rapids,
        Framework::Sglang => R::Sglang,
    };
    let device = f.sig.backend.map(|b| match b {
        Backend::Cuda => D::Cuda,
        Backend::Hip => D::Rocm,
        Backend::Mps => D::Mps,
        Backend::Xpu => D::Xpu,
        Backend::Metal => D::Metal,
        Backend::Tpu => D::Tpu,
    });
    let app = match (f.sig.framework, f.app) {
        (Framework::Vllm, _) => Some(A::Vllm),
        (Framework::A1111, _) => Some(A::A1111),
        (Framework::Comfyui, _) => Some(A::Comfyui),
        (_, Some(app)) => Some(match app {
            App::Comfyui => A::Comfyui,
            App::A1111 => A::A1111,
            App::Diffusers => A::Diffusers,
            App::Vllm => A::Vllm,
            App::Deepspeed => A::Deepspeed,
            App::TransformersTrainer | App::Transformers => A::Transformers,
            App::Accelerate => A::Accelerate,
            App::Lightning => A::Lightning,
        }),
        (_, None) => None,
    };
    let phase = f.phase.map(|p| match p {
        Phase::Training => P::Training,
        Phase::Loading => P::Loading,
        Phase::Inference => P::Inference,
        Phase::Serving => P::Serving,
        Phase::Generation => P::Generation,
        Phase::Evaluation => P::Evaluation,
        Phase::Compiling => P::Compiling,
    });
    Situation {
        os: f.os,
        device,
        runtime: Some(runtime),
        app,
        phase,
    }
}

/// The model the log names, if any.
fn model_name(x: &Fields) -> Option<&str> {
    x.details.iter().find_map(|d| match d {
        Detail::Model(m) => Some(m.as_str()),
        _ => None,
    })
}

/// The model file's quantization, if the log states it.
fn model_quant(x: &Fields) -> Option<&str> {
    x.details.iter().find_map(|d| match d {
        Detail::Quantization(q) => Some(q.as_str()),
        _ => None,
    })
}

/// The longest max_model_len the message says fits (vLLM v1's "estimated
/// maximum model length", v0's KV cache tokens).
fn suggested_len(x: &Fields) -> Option<u64> {
    x.details.iter().find_map(|d| match d {
        Detail::SuggestedMaxModelLen(v) => Some(*v),
        _ => None,
    })
}

/// The failing tensor's first dimension, when the message names a tensor of
/// at least two dimensions (TF's `OOM when allocating tensor with shape[128,…]`):
/// that dimension is the batch in nearly every layer's activations.
fn leading_dim(x: &Fields) -> Option<u64> {
    let t = x.tensor.as_ref()?;
    match t.shape.as_slice() {
        [first, _, ..] if *first > 1 => Some(*first),
        _ => None,
    }
}

/// Writes this event's own numbers into the snippets, so that the code says
/// what the prose and the message say (a vLLM fix that states 35,648 tokens
/// pastes `--max-model-len 35648`, a TF tensor of shape [128, …] gives
/// `batch_size=64`, the processes the message names are the ones to stop).
fn tailor(fixes: &mut [Fix], f: &Finding, procs: &[ProcessUse]) {
    let x = &f.sig.fields;
    // The device string of the backend that ran out (ROCm keeps "cuda").
    let device = match f.sig.backend {
        Some(Backend::Mps) => Some(("mps", "torch.mps")),
        Some(Backend::Xpu) => Some(("xpu", "torch.xpu")),
        _ => None,
    };
    // The allocator's variable as this build reads it: PyTorch ≥ 2.9 names
    // the backend-neutral PYTORCH_ALLOC_CONF in its message, ROCm builds
    // name PYTORCH_HIP_ALLOC_CONF (c10/cuda/CUDAAllocatorConfig.cpp).
    let alloc_env = if f.sig.message.contains("PYTORCH_ALLOC_CONF")
        && !f.sig.message.contains("PYTORCH_CUDA_ALLOC_CONF")
        && !f.sig.message.contains("PYTORCH_HIP_ALLOC_CONF")
    {
        Some("PYTORCH_ALLOC_CONF")
    } else if f.sig.backend == Some(Backend::Hip) {
        Some("PYTORCH_HIP_ALLOC_CONF")
    } else {
        None
    };
    for fix in fixes.iter_mut() {
        if let Some(env) = alloc_env {
            fix.code = fix.code.replace("PYTORCH_CUDA_ALLOC_CONF", env);
        }
        if let Some((dev, module)) = device {
            fix.code = fix
                .code
                .replace("device_map=\"cuda\"", &format!("device_map=\"{dev}\""))
                .replace(".to(\"cuda\"", &format!(".to(\"{dev}\""))
                .replace(
                    "torch.cuda.empty_cache()",
                    &format!("{module}.empty_cache()"),
                );
            if dev == "xpu" {
                // torch.xpu has the same call with a device argument (MPS's takes none).
                fix.code = fix.code.replace(
                    "torch.cuda.set_per_process_memory_fraction(",
                    "torch.xpu.set_per_process_memory_fraction(",
                );
            }
        }
        match fix.id {
            RemedyId::VllmMaxModelLen => {
                if let Some(s) = suggested_len(x) {
                    fix.code = format!(
                        "vllm serve MODEL --max-model-len {s}  # the longest that fits, from the message\n# Python: LLM(model=MODEL_ID, max_model_len={s})"
                    );
                }
            }
            RemedyId::ReduceBatch if f.sig.framework == Framework::Tensorflow => {
                if let Some(n) = leading_dim(x) {
                    let half = (n / 2).max(1);
                    fix.why = format!(
                        "the tensor that failed has {n} as its first dimension, usually the batch; halving the batch halves that tensor and most activations"
                    );
                    fix.code = format!(
                        "model.fit(x_train, y_train, batch_size={half})  # was {n}, the failing tensor's first dimension: halve until it fits"
                    );
                }
            }
            RemedyId::FreeOtherProcesses => {
                let others: Vec<(u64, Bytes)> = procs
                    .iter()
                    .filter(|p| !p.is_self)
                    .filter_map(|p| Some((p.pid?, p.used_bytes)))
                    .collect();
                if !others.is_empty() {
                    let mut code = String::from(
                        "oomkit monitor --once  # owners and command lines of these processes",
                    );
                    for (pid, used) in others {
                        code.push_str(&format!(
                            "\nkill {pid}  # holds {used}: only if you own it and no longer need it"
                        ));
                    }
                    code.push_str(
                        "\nCUDA_VISIBLE_DEVICES=1 python train.py  # or run on an idle GPU",
                    );
                    fix.code = code;
                }
            }
            RemedyId::XpuRelaxedAllocationLimits => {
                // Both ways out: the runtime switch and the chunking code.
                if let Some(r) = remedies::get(fix.id) {
                    fix.code = r
                        .snippets
                        .iter()
                        .map(|s| s.code)
                        .collect::<Vec<_>>()
                        .join("\n# or keep every tensor under the limit:\n");
                }
            }
            _ => {}
        }
        // A leak's first steps are oomkit's own finders.
        if f.sig.framework == Framework::Pytorch
            && x.details.iter().any(|d| matches!(d, Detail::Growth(_)))
        {
            match fix.id {
                RemedyId::ReleaseReferences => {
                    fix.code = format!(
                        "oomkit lint train.py  # finds tensors and graphs kept alive across steps\n{}",
                        fix.code
                    );
                }
                RemedyId::RecordMemoryHistory => {
                    fix.code = format!(
                        "oomkit run --snapshot-on-oom -- python train.py  # a snapshot at the OOM names who holds the memory\n{}",
                        fix.code
                    );
                }
                _ => {}
            }
        }
        // Beam search multiplies the batch by num_beams.
        if fix.id == RemedyId::ReduceBatch
            && let Some(b) = x.details.iter().find_map(|d| match d {
                Detail::NumBeams(b) if *b > 1 => Some(*b),
                _ => None,
            })
        {
            fix.why = format!(
                "generate runs num_beams={b} beams per prompt, so its activations and KV cache are {b} times a batch of one: fewer beams, or fewer prompts per call"
            );
            fix.code = format!(
                "outputs = model.generate(**inputs, num_beams={}, max_new_tokens=256)  # was num_beams={b}",
                (b / 2).max(1)
            );
        }
        // The log's own model in place of the catalogue's placeholders.
        if let Some(model) = model_name(x) {
            if model.ends_with(".gguf") {
                fix.code = fix.code.replace("-m model.gguf", &format!("-m {model}"));
            } else {
                fix.code = fix
                    .code
                    .replace("vllm serve MODEL ", &format!("vllm serve {model} "))
                    .replace("model=MODEL_ID", &format!("model=\"{model}\""));
            }
        }
        // Outside a Python training script, the way to an idle GPU is the
        // same variable in front of the job's own command.
        if !matches!(
            f.sig.framework,
            Framework::Pytorch | Framework::Tensorflow | Framework::Jax | Framework::Nccl
        ) {
            fix.code = fix.code.replace(
                "CUDA_VISIBLE_DEVICES=1 python train.py  # or run on an idle GPU",
                "CUDA_VISIBLE_DEVICES=1 <your command>  # or run on an idle GPU (its index)",
            );
        }
    }
}

/// A fix plan as `(remedy id, why for this case, how much it frees)`.
pub(crate) type Plan = Vec<(RemedyId, Option<String>, Option<Bytes>)>;

/// Turns a plan into at most six fixes, first mention of an id wins, each
/// with the remedy's code in the first of `prefs` it has a snippet for.
pub(crate) fn build_fixes(plan: Plan, prefs: &[Flavor], situation: &Situation) -> Vec<Fix> {
    let mut out: Vec<Fix> = Vec::new();
    for (id, why, saves) in plan {
        if out.iter().any(|x| x.id == id) || out.len() >= 6 || !id.scope().admits(situation) {
            continue;
        }
        let Some(r) = remedies::get(id) else { continue };
        let code = r
            .snippet_in(prefs)
            .map_or(String::new(), |s| s.code.to_string());
        out.push(Fix {
            id: r.id,
            title: r.title.to_string(),
            why: why.unwrap_or_else(|| r.why.to_string()),
            code,
            saves_bytes: saves,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    //! One row per cause rule of the module docs (and per branch of a rule),
    //! built from fields, so each rule is tested without a detector.
    use super::*;
    use crate::detect::{Chain, signal};

    const GIB: u64 = 1 << 30;

    fn g(x: f64) -> Option<Bytes> {
        Some(Bytes((x * GIB as f64) as u64))
    }

    fn finding(fw: Framework, backend: Option<Backend>, fields: Fields) -> Finding {
        let mut sig = signal(Kind::PytorchAllocator, Chain::Pytorch, fw, "test");
        sig.backend = backend;
        sig.fields = fields;
        Finding::new(sig, 1, 0)
    }

    fn cuda(fields: Fields) -> Finding {
        finding(Framework::Pytorch, Some(Backend::Cuda), fields)
    }

    fn proc(pid: Option<u64>, gib: f64, is_self: bool) -> ProcessUse {
        ProcessUse {
            pid,
            used_bytes: g(gib).unwrap_or_default(),
            is_self,
        }
    }

    #[test]
    fn every_cause_rule() {
        let cases: Vec<(&str, Finding, Cause)> = vec![
            (
                "1 overflow",
                cuda(Fields {
                    requested: Some(Bytes(1 << 60)),
                    total: g(24.0),
                    ..Fields::default()
                }),
                Cause::SizeOverflow,
            ),
            (
                "2 larger than the device",
                cuda(Fields {
                    requested: g(30.0),
                    total: g(24.0),
                    free: g(20.0),
                    ..Fields::default()
                }),
                Cause::ImpossibleRequest,
            ),
            (
                "2 larger than any GPU, no total stated",
                finding(
                    Framework::Onnxruntime,
                    Some(Backend::Cuda),
                    Fields {
                        requested: Some(Bytes::gib(4096)),
                        ..Fields::default()
                    },
                ),
                Cause::ImpossibleRequest,
            ),
            (
                "2 family limit",
                {
                    let mut f = cuda(Fields {
                        requested: g(5.0),
                        ..Fields::default()
                    });
                    f.sig.implied = Some((Cause::ImpossibleRequest, "4 GiB limit".into()));
                    f
                },
                Cause::ImpossibleRequest,
            ),
            (
                "2b Intel's 4 GiB single-allocation limit",
                {
                    let mut f = finding(
                        Framework::Pytorch,
                        Some(Backend::Xpu),
                        Fields {
                            requested: g(8.0),
                            total: g(15.11),
                            limit: g(4.0),
                            ..Fields::default()
                        },
                    );
                    f.sig.implied = Some((Cause::MemoryFractionLimit, "4 GiB".into()));
                    f
                },
                Cause::MemoryFractionLimit,
            ),
            (
                "3 allocated beyond total (WDDM)",
                cuda(Fields {
                    requested: g(1.0),
                    total: g(8.0),
                    allocated: g(11.0),
                    free: g(0.0),
                    ..Fields::default()
                }),
                Cause::WddmSysmemFallback,
            ),
            (
                "4 memory fraction",
                cuda(Fields {
                    requested: g(2.0),
                    total: g(24.0),
                    free: g(12.0),
                    allocated: g(9.5),
                    reserved: g(10.0),
                    limit: g(11.0),
                    ..Fields::default()
                }),
                Cause::MemoryFractionLimit,
            ),
            (
                "5 implied by the family",
                {
                    let mut f = finding(
                        Framework::Vllm,
                        Some(Backend::Cuda),
                        Fields {
                            requested: g(4.0),
                            free: g(2.0),
                            ..Fields::default()
                        },
                    );
                    f.sig.implied = Some((Cause::KvCache, "kv".into()));
                    f
                },
                Cause::KvCache,
            ),
            (
                "6 fragmentation",
                cuda(Fields {
                    requested: g(2.0),
                    total: g(24.0),
                    free: g(1.0),
                    allocated: g(14.0),
                    reserved: g(18.0),
                    unallocated: g(4.0),
                    ..Fields::default()
                }),
                Cause::Fragmentation,
            ),
            (
                "7 other processes named",
                cuda(Fields {
                    requested: g(2.0),
                    total: g(24.0),
                    free: g(0.5),
                    allocated: g(9.8),
                    reserved: g(10.0),
                    unallocated: g(0.2),
                    processes: vec![proc(Some(4242), 12.0, false), proc(None, 11.0, true)],
                    ..Fields::default()
                }),
                Cause::OtherProcesses,
            ),
            (
                "7 legacy: memory outside PyTorch",
                cuda(Fields {
                    requested: g(2.0),
                    total: g(24.0),
                    free: g(0.5),
                    allocated: g(5.8),
                    reserved: g(6.0),
                    unallocated: g(0.2),
                    ..Fields::default()
                }),
                Cause::OtherProcesses,
            ),
            (
                "8 memory outside the allocator",
                cuda(Fields {
                    requested: g(2.0),
                    total: g(24.0),
                    free: g(0.5),
                    allocated: g(9.8),
                    reserved: g(10.0),
                    unallocated: g(0.2),
                    processes: vec![proc(None, 23.0, true)],
                    ..Fields::default()
                }),
                Cause::NonFrameworkMemory,
            ),
            (
                "9 capacity",
                cuda(Fields {
                    requested: g(2.0),
                    total: g(24.0),
                    free: g(0.5),
                    allocated: g(22.8),
                    reserved: g(23.0),
                    unallocated: g(0.2),
                    ..Fields::default()
                }),
                Cause::Capacity,
            ),
            (
                "9 unknown: no numbers",
                cuda(Fields::default()),
                Cause::Unknown,
            ),
            (
                "status: not an OOM",
                {
                    let mut f = cuda(Fields::default());
                    f.sig.status = Status::NotOom("host RAM");
                    f
                },
                Cause::NotOom,
            ),
            (
                "status: undetermined",
                {
                    let mut f = cuda(Fields::default());
                    f.sig.status = Status::Undetermined("maybe");
                    f
                },
                Cause::Unknown,
            ),
            (
                "MPS: requested above max allowed is not impossible",
                finding(
                    Framework::Pytorch,
                    Some(Backend::Mps),
                    Fields {
                        requested: g(30.0),
                        total: g(18.0),
                        limit: g(18.0),
                        allocated: g(10.0),
                        others: g(6.0),
                        ..Fields::default()
                    },
                ),
                Cause::Capacity,
            ),
        ];
        for (name, f, want) in cases {
            let e = diagnose(f);
            assert_eq!(e.cause, want, "{name}: {}", e.evidence);
            assert!(!e.evidence.is_empty(), "{name}");
            if want != Cause::NotOom {
                assert!(!e.fixes.is_empty(), "{name}: no fixes");
            }
        }
    }

    /// A PID of this job (oomkit, the child of `oomkit run`) listed as
    /// `Process N` is this job, not another process to stop.
    #[test]
    fn own_pids_are_never_other_processes() {
        let fields = Fields {
            requested: g(2.0),
            total: g(24.0),
            free: g(0.5),
            allocated: g(9.8),
            reserved: g(10.0),
            unallocated: g(0.2),
            processes: vec![proc(Some(4242), 12.0, false), proc(None, 11.0, true)],
            ..Fields::default()
        };
        let e = diagnose(cuda(fields.clone()));
        assert_eq!(e.cause, Cause::OtherProcesses);
        let e = diagnose_with(cuda(fields), &[4242]);
        assert_ne!(e.cause, Cause::OtherProcesses, "{}", e.evidence);
        assert_eq!(e.numbers.other_processes_bytes, Some(Bytes::ZERO));
        assert_eq!(e.numbers.this_process_bytes, g(11.0));
        assert!(e.fixes.iter().all(|f| !f.code.contains("kill 4242")));
    }

    fn ids(e: &Event) -> Vec<RemedyId> {
        e.fixes.iter().map(|f| f.id).collect()
    }

    /// The small-request case (a full GPU) offers the leak fixes; the
    /// evidence and the fixes read the same typed [`Shortage`].
    #[test]
    fn a_small_request_on_a_full_gpu_offers_the_leak_fixes() {
        let full = Fields {
            requested: Some(Bytes::mib(20)),
            total: g(24.0),
            free: Some(Bytes::mib(10)),
            allocated: g(22.0),
            reserved: g(22.1),
            ..Fields::default()
        };
        assert_eq!(shortage(&full), Shortage::SmallRequestOnFullGpu);
        let e = diagnose(cuda(full.clone()));
        assert_eq!(e.cause, Cause::Capacity);
        assert!(
            e.evidence.contains("a small request failed"),
            "{}",
            e.evidence
        );
        assert_eq!(
            ids(&e).get(..2),
            Some(&[RemedyId::ReleaseReferences, RemedyId::RecordMemoryHistory][..])
        );
        let mut comfy = cuda(full.clone());
        comfy.app = Some(App::Comfyui);
        let e = diagnose(comfy);
        assert_eq!(ids(&e).first(), Some(&RemedyId::UnloadModels));
        assert!(!ids(&e).contains(&RemedyId::ReleaseReferences));
        let big = Fields {
            requested: g(4.0),
            free: g(1.0),
            ..full
        };
        assert_eq!(shortage(&big), Shortage::JobTooBig);
        let e = diagnose(cuda(big));
        assert!(!ids(&e).contains(&RemedyId::ReleaseReferences));
        assert!(
            e.evidence
                .ends_with("the job needs more memory than the device offers")
        );
    }
}

#[cfg(test)]
mod fit_tests {
    //! Fixes that fit the user: the framework that raised the error, and the
    //! numbers of the message in the snippets.
    use oomkit_core::remedies::RemedyId;

    use crate::{Explainer, Framework};

    fn event(text: &str) -> crate::Event {
        let r = Explainer::new().explain_str(text);
        r.events.into_iter().next().expect("one event")
    }

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{FIXTURES}{name}")).expect("fixture")
    }

    #[test]
    fn vllm_snippet_uses_the_length_the_message_estimates() {
        let e = event(&fixture("vllm_v1_fixed_typo.log"));
        let fix = e
            .fixes
            .iter()
            .find(|f| f.id == RemedyId::VllmMaxModelLen)
            .expect("max-model-len fix");
        assert!(fix.why.contains("21584"), "{}", fix.why);
        assert!(fix.code.contains("--max-model-len 21584"), "{}", fix.code);
        assert!(!fix.code.contains("8192"), "{}", fix.code);
    }

    #[test]
    fn tf_batch_snippet_matches_the_tensor_shape() {
        let e = event(&fixture("real/035.txt"));
        assert_eq!(e.framework, Framework::Tensorflow);
        let fix = e
            .fixes
            .iter()
            .find(|f| f.id == RemedyId::ReduceBatch)
            .expect("reduce-batch");
        assert!(fix.code.contains("batch_size=64"), "{}", fix.code);
        assert!(fix.code.contains("was 128"), "{}", fix.code);
        assert!(!fix.code.contains("32"), "{}", fix.code);
    }

    /// Rows: (fixture, framework, words no snippet may contain, a snippet
    /// that must be there).
    #[test]
    fn snippets_are_in_the_framework_that_raised_the_error() {
        let torch_words: &[&str] = &["torch", "DataLoader", "PYTORCH_", "from_pretrained"];
        let cases: &[(&str, Framework, &[&str], &str)] = &[
            (
                "jax_tiny_request_preallocation.log",
                Framework::Jax,
                torch_words,
                "XLA_PYTHON_CLIENT_PREALLOCATE",
            ),
            (
                "jax_2024_human_size.log",
                Framework::Jax,
                torch_words,
                "XLA_PYTHON_CLIENT_MEM_FRACTION",
            ),
            (
                "tensorflow_cudnn_handle.log",
                Framework::Tensorflow,
                torch_words,
                "tf.config.experimental.set_memory_growth",
            ),
            (
                "tensorflow_graph_execution_error.log",
                Framework::Tensorflow,
                torch_words,
                "tf.config.experimental.set_memory_growth",
            ),
        ];
        for (name, fw, banned, wanted) in cases {
            let e = event(&fixture(name));
            assert_eq!(e.framework, *fw, "{name}");
            for f in &e.fixes {
                for w in *banned {
                    assert!(!f.code.contains(w), "{name}: {} has {w}: {}", f.id, f.code);
                }
            }
            assert!(
                e.fixes.iter().any(|f| f.code.contains(wanted)),
                "{name}: no {wanted} in {:?}",
                e.fixes.iter().map(|f| f.id).collect::<Vec<_>>()
            );
        }
    }

    /// An MPS user's snippets name the MPS device, and the message's "other
    /// allocations" are not called other processes.
    #[test]
    fn mps_snippets_name_the_mps_device() {
        let e = event(&fixture("mps_gib_era.log"));
        for f in &e.fixes {
            assert!(!f.code.contains("cuda"), "{}: {}", f.id, f.code);
        }
        assert!(
            e.fixes
                .iter()
                .any(|f| f.code.contains("device_map=\"mps\"")),
            "{:?}",
            e.fixes.iter().map(|f| f.id).collect::<Vec<_>>()
        );
        assert!(!e.evidence.contains("other processes"), "{}", e.evidence);
    }

    #[test]
    fn named_processes_are_the_ones_to_stop() {
        let e = event(&fixture("pytorch_2_1_capacty_typo_other_process.log"));
        let fix = e
            .fixes
            .iter()
            .find(|f| f.id == RemedyId::FreeOtherProcesses)
            .expect("free-other-processes");
        for p in e.processes.iter().filter(|p| !p.is_self) {
            let pid = p.pid.expect("pid");
            assert!(fix.code.contains(&format!("kill {pid} ")), "{}", fix.code);
            assert!(fix.why.contains(&pid.to_string()), "{}", fix.why);
        }
        assert!(
            fix.code.starts_with("oomkit monitor --once"),
            "{}",
            fix.code
        );
    }

    /// jax 0.11 on an H200: the exact byte count beside the rounded size,
    /// XLA's limit from `exceeds the base limit (L)`, and a request over
    /// the limit is the pool's limit, fixed with JAX's own variable.
    #[test]
    fn jax_limit_and_exact_bytes_from_a_recorded_message() {
        let e = event(&fixture("recorded/jax_mem_fraction.log"));
        assert_eq!(e.framework, Framework::Jax);
        assert_eq!(e.requested_bytes, Some(oomkit_core::Bytes(22_613_223_168)));
        assert_eq!(
            e.numbers.limit_bytes,
            Some(oomkit_core::Bytes(15_011_414_016))
        );
        assert_eq!(e.cause, crate::Cause::MemoryFractionLimit);
        let first = e.fixes.first().expect("a fix");
        assert_eq!(first.id, RemedyId::JaxMemFraction);
        assert!(!first.why.contains("device has"), "{}", first.why);
        assert!(e.fixes.iter().all(|f| !f.code.contains("torch")));
    }

    /// The platform allocator has no pool: no "raise the fraction" fix, and
    /// the driver's own byte count is the request.
    #[test]
    fn jax_platform_allocator_gets_no_pool_fixes() {
        let e = event(&fixture("recorded/jax_platform_allocator.log"));
        assert_eq!(e.requested_bytes, Some(oomkit_core::Bytes(67_839_669_040)));
        assert!(e.evidence.contains("platform allocator"), "{}", e.evidence);
        assert!(
            e.fixes
                .iter()
                .all(|f| f.id != RemedyId::JaxMemFraction && f.id != RemedyId::JaxNoPreallocate),
            "{:?}",
            e.fixes.iter().map(|f| f.id).collect::<Vec<_>>()
        );
    }

    /// A forward in training shows module `__call__` frames too: they are
    /// no evidence of inference (recorded on an H200 through transformers).
    #[test]
    fn a_module_call_is_not_inference() {
        let e = event(&fixture("recorded/torch_transformers_forward.log"));
        assert_ne!(e.phase, Some(crate::Phase::Inference));
        assert_ne!(e.fixes.first().map(|f| f.id), Some(RemedyId::InferenceMode));
        let t = event(&fixture("pytorch_1_5_malloc_location.log"));
        assert_eq!(t.phase, Some(crate::Phase::Training));
    }
}
