//! Extra facts a message states beside the standard fields: one typed
//! variant per fact, so a detector that writes a fact and the rule that reads
//! it name the same variant (a misspelt key cannot compile).
//!
//! The JSON keeps the `[key, value]` pairs of contract version 1: each
//! variant has its key, and its value is written as text.

use std::fmt;

use oomkit_core::Bytes;
use serde::ser::{Serialize, SerializeTuple, Serializer};

/// Which llama.cpp/ggml buffer failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferKind {
    /// The weights (`alloc_tensor_range`, `unable to allocate … buffer`).
    ModelWeights,
    /// The compute graph's scratch buffer (`ggml_gallocr_*`).
    ComputeBuffer,
    /// Some other buffer.
    Other,
}

/// An application named in a detail (below the framework, beside `Event::app`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SideApp {
    /// Ollama running llama.cpp.
    Ollama,
    /// Chainer running on CuPy.
    Chainer,
}

/// The MPS pool a request was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MpsPool {
    /// `on private pool`.
    Private,
    /// `on shared pool`.
    Shared,
}

/// cudaMallocAsync's user limit: none (SIZE_MAX), or a size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UserLimit {
    /// No limit set (printed as 17179869184.00 GiB).
    None,
    /// A limit from the memory fraction.
    Set(Bytes),
}

impl fmt::Display for BufferKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BufferKind::ModelWeights => "model weights",
            BufferKind::ComputeBuffer => "compute buffer",
            BufferKind::Other => "buffer",
        })
    }
}

impl fmt::Display for SideApp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SideApp::Ollama => "ollama",
            SideApp::Chainer => "chainer",
        })
    }
}

impl fmt::Display for MpsPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MpsPool::Private => "private",
            MpsPool::Shared => "shared",
        })
    }
}

impl fmt::Display for UserLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserLimit::None => f.write_str("none"),
            UserLimit::Set(b) => write!(f, "{b}"),
        }
    }
}

macro_rules! details {
    ($( $(#[$doc:meta])* $var:ident($ty:ty) = $key:literal, )*) => {
        /// One extra fact, typed.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Detail {
            $( $(#[$doc])* $var($ty), )*
        }

        impl Detail {
            /// The key in the JSON and (with spaces) in the human output.
            pub fn key(&self) -> &'static str {
                match self {
                    $( Detail::$var(_) => $key, )*
                }
            }

            /// The value as text.
            pub fn value(&self) -> String {
                match self {
                    $( Detail::$var(v) => v.to_string(), )*
                }
            }
        }

        /// Every key, for the tests.
        #[cfg(test)]
        pub const KEYS: &[&str] = &[$( $key, )*];
    };
}

details! {
    /// vLLM: the configured max_model_len.
    MaxModelLen(u64) = "max_model_len",
    /// vLLM: the longest max_model_len the KV cache can hold, as the message states it.
    SuggestedMaxModelLen(u64) = "suggested_max_model_len",
    /// vLLM v0: tokens the KV cache can store.
    KvCacheTokens(u64) = "kv_cache_tokens",
    /// vLLM's memory profile: total GPU memory.
    ProfiledTotalGpuMemory(Bytes) = "profiled_total_gpu_memory",
    /// vLLM's memory profile: KV cache size.
    ProfiledKvCacheSize(Bytes) = "profiled_kv_cache_size",
    /// vLLM's memory profile: memory outside torch.
    ProfiledNonTorchMemory(Bytes) = "profiled_non_torch_memory",
    /// vLLM: `Available KV cache memory`.
    AvailableKvCacheMemory(Bytes) = "available_kv_cache_memory",
    /// vLLM: gpu_memory_utilization as printed.
    GpuMemoryUtilization(String) = "gpu_memory_utilization",
    /// llama.cpp: the KV buffer size logged before the failure.
    KvBuffer(Bytes) = "kv_buffer",
    /// llama.cpp: the model buffer size logged before the failure.
    ModelBuffer(Bytes) = "model_buffer",
    /// llama.cpp: the compute buffer size logged before the failure.
    ComputeBuffer(Bytes) = "compute_buffer",
    /// An application below the framework (Ollama, Chainer).
    App(SideApp) = "app",
    /// llama.cpp: which buffer failed.
    Buffer(BufferKind) = "buffer",
    /// TGI: --max-batch-total-tokens.
    MaxBatchTotalTokens(u64) = "max_batch_total_tokens",
    /// TGI: --max-batch-prefill-tokens.
    MaxBatchPrefillTokens(u64) = "max_batch_prefill_tokens",
    /// cudaMallocAsync: the user-set limit line.
    PytorchLimit(UserLimit) = "pytorch_limit",
    /// MPS: the pool asked.
    Pool(MpsPool) = "pool",
    /// Source location `file:line`.
    At(String) = "at",
    /// cuDNN status name.
    CudnnStatus(String) = "cudnn_status",
    /// cuDNN found no algorithm.
    Cudnn(&'static str) = "cudnn",
    /// TF BFC dump: the pool limit.
    PoolLimit(Bytes) = "pool_limit",
    /// TF BFC dump: the pool's peak in use.
    PoolPeakInUse(Bytes) = "pool_peak_in_use",
    /// TF BFC dump: the largest free block.
    LargestFreeBlock(Bytes) = "largest_free_block",
    /// TF BFC dump: fragmentation of the free space, as text.
    PoolFragmentation(String) = "pool_fragmentation",
    /// Steady growth before the error (`oomkit run`'s timeline line).
    Growth(String) = "growth",
    /// The batch size the traceback or command line shows.
    BatchSize(u64) = "batch_size",
    /// `num_beams` in the traceback (beam search multiplies the batch).
    NumBeams(u64) = "num_beams",
    /// The model the log names (vLLM's `model='…'`, llama.cpp's `.gguf` path).
    Model(String) = "model",
    /// The model file's quantization (llama.cpp's file type or file name).
    Quantization(String) = "quantization",
    /// Why the per-process figures are missing (NVML's placeholder).
    ProcessMemory(&'static str) = "process_memory",
    /// What a disguised message means.
    Meaning(&'static str) = "meaning",
    /// XLA BufferAssignment: the program's total allocation.
    ProgramTotalAllocation(Bytes) = "program_total_allocation",
    /// XLA BufferAssignment: parameters.
    Parameters(Bytes) = "parameters",
    /// XLA BufferAssignment: maybe_live_out.
    MaybeLiveOut(Bytes) = "maybe_live_out",
    /// XLA BufferAssignment: preallocated temp.
    PreallocatedTemp(Bytes) = "preallocated_temp",
    /// XLA BufferAssignment: fragmentation as printed.
    XlaFragmentation(String) = "xla_fragmentation",
    /// XLA: the largest buffer at the peak.
    LargestBuffer(Bytes) = "largest_buffer",
    /// XLA: its shape as printed.
    LargestBufferShape(String) = "largest_buffer_shape",
    /// XLA: the allocator that refused (`GPU_0_bfc`: JAX's preallocated
    /// pool; `SE_0_space_0`: the platform allocator, straight to the driver).
    XlaAllocator(String) = "xla_allocator",
    /// XLA:TPU: the memory space that ran out (`hbm`, `vmem`, `smem`).
    TpuMemorySpace(String) = "tpu_memory_space",
    /// NCCL's version.
    NcclVersion(String) = "nccl_version",
    /// A1111's memory line: peak allocated.
    A1111PeakAllocated(Bytes) = "a1111_peak_allocated",
    /// A1111's memory line: peak reserved.
    A1111PeakReserved(Bytes) = "a1111_peak_reserved",
    /// A1111's memory line: system memory.
    A1111System(String) = "a1111_system",
    /// The kernel OOM killer's victim.
    KilledPid(u64) = "killed_pid",
    /// Another rank of the same job that failed the same way, folded into
    /// this event: its rank, GPU and free memory (`rank 1: GPU 1, 464.56 MiB free`).
    RankCopy(String) = "rank_copy",
    /// What the launcher printed about the failed ranks (DeepSpeed's
    /// `exits with return code`, torchelastic's `ChildFailedError` summary).
    Launcher(String) = "launcher",
    /// A joined nvidia-smi reading of this GPU.
    NvidiaSmi(String) = "nvidia_smi",
    /// A joined nvidia-smi reading's processes (when the own one is unknown).
    NvidiaSmiProcesses(String) = "nvidia_smi_processes",
    /// A joined nvidia-smi reading: memory no listed process holds.
    NvidiaSmiUnattributed(String) = "nvidia_smi_unattributed",
    /// A joined PyTorch reading: allocated.
    PytorchAllocated(Bytes) = "pytorch_allocated",
    /// A joined PyTorch reading: reserved.
    PytorchReserved(Bytes) = "pytorch_reserved",
    /// A joined PyTorch reading: peak allocated.
    PytorchPeakAllocated(Bytes) = "pytorch_peak_allocated",
    /// A joined PyTorch reading: peak reserved.
    PytorchPeakReserved(Bytes) = "pytorch_peak_reserved",
    /// A joined PyTorch reading: non-releasable memory.
    NonReleasable(Bytes) = "non_releasable",
    /// A joined PyTorch reading: OOMs so far.
    CudaOoms(u64) = "cuda_ooms",
    /// A joined PyTorch reading: cudaMalloc retries.
    CudamallocRetries(u64) = "cudamalloc_retries",
}

/// A size-valued detail's constructor (`Detail::KvBuffer`, …).
pub type SizeDetail = fn(Bytes) -> Detail;
/// A count-valued detail's constructor (`Detail::CudaOoms`, …).
pub type CountDetail = fn(u64) -> Detail;

impl Detail {
    /// Whether both are the same fact (same variant), whatever the values.
    pub fn same_fact(&self, other: &Detail) -> bool {
        match (self, other) {
            // Each rank's copy is a fact of its own.
            (Detail::RankCopy(a), Detail::RankCopy(b)) => a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl Serialize for Detail {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(self.key())?;
        t.serialize_element(&self.value())?;
        t.end()
    }
}

/// Adds `d` unless the same fact is already there (the first one stays).
pub fn add(list: &mut Vec<Detail>, d: Detail) {
    if !list.iter().any(|x| x.same_fact(&d)) {
        list.push(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for k in KEYS {
            assert!(seen.insert(k), "duplicate key {k}");
            assert!(
                k.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{k}"
            );
        }
    }

    #[test]
    fn serialises_as_a_key_value_pair() {
        let cases = [
            (Detail::MaxModelLen(32768), r#"["max_model_len","32768"]"#),
            (
                Detail::Buffer(BufferKind::ModelWeights),
                r#"["buffer","model weights"]"#,
            ),
            (
                Detail::PytorchLimit(UserLimit::None),
                r#"["pytorch_limit","none"]"#,
            ),
            (
                Detail::PoolLimit(Bytes::gib(2)),
                r#"["pool_limit","2.00 GiB"]"#,
            ),
            (Detail::App(SideApp::Ollama), r#"["app","ollama"]"#),
        ];
        for (d, want) in cases {
            assert_eq!(serde_json::to_string(&d).unwrap(), want);
        }
    }

    #[test]
    fn add_keeps_the_first_of_a_fact() {
        let mut v = vec![Detail::MaxModelLen(1)];
        add(&mut v, Detail::MaxModelLen(2));
        add(&mut v, Detail::KvCacheTokens(3));
        assert_eq!(v, vec![Detail::MaxModelLen(1), Detail::KvCacheTokens(3)]);
    }
}
