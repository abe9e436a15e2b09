//! The message families `oomkit explain` knows, each with an example
//! (`oomkit explain --list-formats`). A unit test feeds every example to the
//! explainer and checks it is recognised as that format, so this list cannot
//! drift from the detectors.

/// One known message family.
#[derive(Debug, serde::Serialize)]
pub struct Format {
    /// The `format` value events of this family carry.
    pub id: &'static str,
    /// Who prints it.
    pub framework: &'static str,
    /// Whether it is a device OOM (`false` for look-alikes).
    pub is_oom: bool,
    /// A one-line example.
    pub example: &'static str,
}

/// Every family, grouped by framework.
pub static FORMATS: &[Format] = &[
    Format {
        id: "pytorch-caching-allocator-2.1",
        framework: "pytorch",
        is_oom: true,
        example: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 100.00 MiB. GPU 0 has a total capacity of 31.37 GiB of which 15.88 MiB is free. Including non-PyTorch memory, this process has 31.34 GiB memory in use. Of the allocated memory 30.74 GiB is allocated by PyTorch, and 19.41 MiB is reserved by PyTorch but unallocated.",
    },
    Format {
        id: "pytorch-caching-allocator-legacy",
        framework: "pytorch",
        is_oom: true,
        example: "RuntimeError: CUDA out of memory. Tried to allocate 10.84 GiB (GPU 0; 23.65 GiB total capacity; 1.06 GiB already allocated; 10.26 GiB free; 12.53 GiB reserved in total by PyTorch)",
    },
    Format {
        id: "pytorch-out-of-memory-bare",
        framework: "pytorch",
        is_oom: true,
        example: "torch.cuda.OutOfMemoryError: CUDA out of memory.",
    },
    Format {
        id: "pytorch-caching-allocator-1eb-guard",
        framework: "pytorch",
        is_oom: true,
        example: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.",
    },
    Format {
        id: "pytorch-cudamallocasync",
        framework: "pytorch",
        is_oom: true,
        example: "Allocation on device 0 would exceed allowed memory. (out of memory) Currently allocated : 15.16 GiB Requested : 512.00 KiB Device limit : 15.99 GiB Free (according to CUDA): 0 bytes",
    },
    Format {
        id: "pytorch-mps",
        framework: "pytorch",
        is_oom: true,
        example: "RuntimeError: MPS backend out of memory (MPS allocated: 7.23 GB, other allocations: 1.54 GB, max allowed: 9.07 GB). Tried to allocate 896.00 MB on private pool.",
    },
    Format {
        id: "ipex-single-allocation-limit",
        framework: "pytorch",
        is_oom: true,
        example: "RuntimeError: Current platform can NOT allocate memory block with size larger than 4GB! Tried to allocate 8.00 GiB (GPU  0; 15.11 GiB total capacity; 0 bytes already allocated; 0 bytes reserved in total by PyTorch)",
    },
    Format {
        id: "thc-cuda-runtime-error-2",
        framework: "pytorch, lua-torch",
        is_oom: true,
        example: "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCTensorRandom.cu:25",
    },
    Format {
        id: "cuda-error-out-of-memory",
        framework: "pytorch",
        is_oom: true,
        example: "torch.AcceleratorError: CUDA error: out of memory",
    },
    Format {
        id: "cublas-status-alloc-failed",
        framework: "pytorch",
        is_oom: true,
        example: "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    },
    Format {
        id: "cudnn-error",
        framework: "pytorch",
        is_oom: true,
        example: "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED",
    },
    Format {
        id: "pytorch-nvml-internal-assert",
        framework: "pytorch",
        is_oom: true,
        example: "RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at \"/opt/pytorch/c10/cuda/CUDACachingAllocator.cpp\":830, please report a bug to PyTorch.",
    },
    Format {
        id: "cuda-illegal-memory-access",
        framework: "pytorch",
        is_oom: false,
        example: "RuntimeError: CUDA error: an illegal memory access was encountered",
    },
    Format {
        id: "tensorflow-oom-when-allocating",
        framework: "tensorflow",
        is_oom: true,
        example: "ResourceExhaustedError: OOM when allocating tensor with shape[128,128,109,109] and type float on /job:localhost/replica:0/task:0/device:GPU:1 by allocator GPU_1_bfc",
    },
    Format {
        id: "tensorflow-bfc-allocator",
        framework: "tensorflow",
        is_oom: true,
        example: "Allocator (GPU_0_bfc) ran out of memory trying to allocate 18.00MiB (rounded to 18874368)requested by op Mul",
    },
    Format {
        id: "tensorflow-dst-tensor-not-initialized",
        framework: "tensorflow",
        is_oom: true,
        example: "InternalError: Failed copying input tensor from /job:localhost/replica:0/task:0/device:CPU:0 to /job:localhost/replica:0/task:0/device:GPU:0 in order to run _EagerConst: Dst tensor is not initialized.",
    },
    Format {
        id: "tensorflow-eager-failed-to-allocate",
        framework: "tensorflow",
        is_oom: true,
        example: "ResourceExhaustedError: failed to allocate memory [Op:AddV2]",
    },
    Format {
        id: "tensorflow-cudnn-handle",
        framework: "tensorflow",
        is_oom: true,
        example: "E tensorflow/stream_executor/cuda/cuda_dnn.cc:329] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
    },
    Format {
        id: "stream-executor-failed-to-allocate",
        framework: "tensorflow",
        is_oom: true,
        example: "failed to allocate 8.41G (9029127168 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    },
    Format {
        id: "tensorflow-host-allocation",
        framework: "tensorflow",
        is_oom: false,
        example: "could not allocate pinned host memory of size: 4294967296",
    },
    Format {
        id: "xla-resource-exhausted",
        framework: "jax",
        is_oom: true,
        example: "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.",
    },
    Format {
        id: "xla-failed-to-allocate-request",
        framework: "jax",
        is_oom: true,
        example: "Resource exhausted: Failed to allocate request for 128.00MiB (134217728B) on device ordinal 0",
    },
    Format {
        id: "xla-tpu-memory-space",
        framework: "jax, pytorch (torch_xla), tensorflow",
        is_oom: true,
        example: "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 21.95G of 15.48G hbm. Exceeded hbm capacity by 6.47G.",
    },
    Format {
        id: "xla-cuda-malloc-async",
        framework: "jax, tensorflow",
        is_oom: true,
        example: "gpu_async_0 cuMemAllocAsync failed to allocate 1225195446464 bytes: RESOURCE_EXHAUSTED: : CUDA_ERROR_OUT_OF_MEMORY: out of memory Reported by CUDA: Free memory/Total memory: 22635544576/85095874560",
    },
    Format {
        id: "nccl-cuda-failure-out-of-memory",
        framework: "nccl",
        is_oom: true,
        example: "host:1:2 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
    },
    Format {
        id: "nccl-unhandled-cuda-error",
        framework: "nccl",
        is_oom: false,
        example: "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
    },
    Format {
        id: "vllm-no-cache-blocks",
        framework: "vllm",
        is_oom: true,
        example: "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    },
    Format {
        id: "vllm-v0-max-seq-len",
        framework: "vllm",
        is_oom: true,
        example: "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (20464). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    },
    Format {
        id: "vllm-v1-kv-cache-needed",
        framework: "vllm",
        is_oom: true,
        example: "ValueError: To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is needed, which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the estimated maximum model length is 122080.",
    },
    Format {
        id: "ggml-failed-to-allocate-buffer",
        framework: "llama.cpp",
        is_oom: true,
        example: "ggml_gallocr_reserve_n: failed to allocate CUDA1 buffer of size 10345253120",
    },
    Format {
        id: "ggml-vulkan-device-memory",
        framework: "llama.cpp",
        is_oom: true,
        example: "ggml_vulkan: Device memory allocation of size 118497280 failed. ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
    },
    Format {
        id: "ggml-metal-insufficient-memory",
        framework: "llama.cpp",
        is_oom: true,
        example: "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
    },
    Format {
        id: "ggml-cuda-buffer-alloc",
        framework: "llama.cpp",
        is_oom: true,
        example: "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9866.00 MiB on device 1: cudaMalloc failed: out of memory",
    },
    Format {
        id: "ggml-cuda-error",
        framework: "llama.cpp",
        is_oom: true,
        example: "CUDA error 2 at /data/llama.cpp/ggml-cuda.cu:5509: out of memory current device: 0",
    },
    Format {
        id: "ggml-pinned-host-memory",
        framework: "llama.cpp",
        is_oom: false,
        example: "ggml_cuda_host_malloc: failed to allocate 512.00 MiB of pinned memory: out of memory",
    },
    Format {
        id: "paddle-resource-exhausted",
        framework: "paddle",
        is_oom: true,
        example: "Out of memory error on GPU 0. Cannot allocate 98.000244MB memory on GPU 0, 6.000000GB memory has been allocated and available memory is only 0.000000B.",
    },
    Format {
        id: "paddle-enforce-allocating",
        framework: "paddle",
        is_oom: true,
        example: "EnforceNotMet: enforce allocating <= available failed, 1835008 > 1572864",
    },
    Format {
        id: "cupy-out-of-memory",
        framework: "cupy",
        is_oom: true,
        example: "Out of memory allocating 25,600,000 bytes (allocated so far: 3,635,267,072 bytes).",
    },
    Format {
        id: "onnxruntime-bfc-arena",
        framework: "onnxruntime",
        is_oom: true,
        example: "BFCArena::AllocateRawInternal(size_t, bool) Failed to allocate memory for requested buffer of size 4585490524328388608",
    },
    Format {
        id: "onnxruntime-cuda-call",
        framework: "onnxruntime",
        is_oom: true,
        example: "[ONNXRuntimeError] : 1 : FAIL : cuda_call.cc:121 onnxruntime::CudaCall CUDA failure 2: out of memory ; GPU=0 ; hostname=host ; file=cuda_stream_handle.cc ; line=175 ; expr=cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);",
    },
    Format {
        id: "sglang-not-enough-memory",
        framework: "sglang",
        is_oom: true,
        example: "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    },
    Format {
        id: "tgi-warmup-not-enough-memory",
        framework: "tgi",
        is_oom: true,
        example: "Error: Warmup(Generation(\"Not enough memory to handle 4096 prefill tokens. You need to decrease `--max-batch-prefill-tokens`\"))",
    },
    Format {
        id: "comfyui-oom-tip",
        framework: "comfyui",
        is_oom: true,
        example: "This error means you ran out of memory on your GPU.",
    },
    Format {
        id: "comfyui-tiled-vae-fallback",
        framework: "comfyui",
        is_oom: false,
        example: "Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding.",
    },
    Format {
        id: "xla-tpu-device-buffer",
        framework: "jax, tensorflow, pytorch",
        is_oom: true,
        example: "ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)",
    },
    Format {
        id: "mlx-metal-insufficient-memory",
        framework: "mlx",
        is_oom: true,
        example: "libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
    },
    Format {
        id: "mlx-metal-malloc-buffer-size",
        framework: "mlx",
        is_oom: true,
        example: "RuntimeError: [metal::malloc] Attempting to allocate 48736917632 bytes which is greater than the maximum allowed buffer size of 30150672384 bytes.",
    },
    Format {
        id: "tensorrt-out-of-memory",
        framework: "tensorrt",
        is_oom: true,
        example: "[TRT] [E] 2: [executionContext.cpp::ExecutionContext::470] Error Code 2: OutOfMemory (no further information)",
    },
    Format {
        id: "ctranslate2-cuda-out-of-memory",
        framework: "ctranslate2",
        is_oom: true,
        example: "RuntimeError: CUDA failed with error out of memory",
    },
    Format {
        id: "torch-memory-saver-out-of-memory",
        framework: "pytorch",
        is_oom: true,
        example: "[torch_memory_saver.cpp] cudaError error: 2 (out of memory) file=csrc/core.cpp func=resume line=182",
    },
    Format {
        id: "rmm-out-of-memory",
        framework: "rapids",
        is_oom: true,
        example: "MemoryError: std::bad_alloc: out_of_memory: CUDA error at: rmm/mr/device/cuda_memory_resource.hpp:69: cudaErrorMemoryAllocation out of memory",
    },
    Format {
        id: "host-memory",
        framework: "host",
        is_oom: false,
        example: "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_is_recognised_as_its_format() {
        let ex = crate::Explainer::new();
        for f in FORMATS {
            let r = ex.explain_str(f.example);
            assert!(
                r.events
                    .iter()
                    .any(|e| e.format == f.id && e.is_oom == f.is_oom),
                "{}: got {:?}",
                f.id,
                r.events
                    .iter()
                    .map(|e| (e.format, e.is_oom))
                    .collect::<Vec<_>>()
            );
        }
    }
}
