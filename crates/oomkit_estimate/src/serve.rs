//! vLLM serving (`--engine vllm --task serve`): the KV-cache pool, following
//! vLLM's own start-up accounting (`memory-estimation.md` §2.8:
//! `gpu_worker.determine_available_memory`, `mem_utils.memory_profiling`):
//!
//! requested = total × gpu_memory_utilization;
//! non-KV = weights + the profile run's activation peak + non-torch memory;
//! pool = requested − non-KV; blocks = ⌊pool / block bytes⌋ with
//! block bytes = 2 · block_size(16) · n_kv · d_head · dtype bytes · L;
//! tokens = blocks · 16; max concurrency = tokens / max_model_len.
//!
//! With `--tensor-parallel-size t` and `--pipeline-parallel-size p` every
//! number is per GPU (vLLM profiles each worker and takes the smallest pool):
//! the GPU holds 1/t of ⌈L/p⌉ layers' weights and KV heads, so a block on it
//! is 1/(t·p) of a whole block and a token's cache is spread over all t·p
//! GPUs: tokens = per-GPU blocks · 16.
//!
//! The verdict is vLLM's own start-up check (`vllm/v1/core/kv_cache_utils.py`
//! `check_enough_kv_cache_memory`): the pool must hold one request of
//! `max_model_len` tokens, ⌈max_model_len / 16⌉ blocks; since vLLM main in
//! 2026 the check plans against the pool less the null block that `BlockPool`
//! keeps back (`available_memory - _pool_bytes_per_block(groups)`), and
//! earlier releases (e.g. commit 001cabc) against the whole pool. We take the
//! stricter: the longest `--max-model-len` that starts is (blocks − 1) · 16,
//! what vLLM's error calls "the estimated maximum model length" (its
//! `estimate_max_model_len` bisects the same inequality).
//!
//! When it does not start, [`plan`] lists `vllm serve` lines that do, cheapest
//! first: the model as it is (a higher `--gpu-memory-utilization`, a shorter
//! `--max-model-len`), then quantized on the same GPUs (FP8, a published
//! AWQ checkpoint, bitsandbytes 4-bit), then more GPUs (tensor parallelism).

use oomkit_core::Bytes;
use oomkit_core::gpus::Gpu;
use oomkit_core::remedies::RemedyId;
use serde::Serialize;

use crate::components as c;
use crate::model::ModelConfig;
use crate::setup::{Quant, Setup, SetupError};

/// vLLM's default KV block size (tokens).
pub const BLOCK_SIZE: u64 = 16;

/// `gpu_memory_utilization` when not given: vLLM's default
/// (`vllm/config/cache.py` `CacheConfig.gpu_memory_utilization = 0.9`).
pub const DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.9;

/// `max_model_len` when the config names no context length: vLLM assumes
/// 2048 then (`_get_and_verify_max_len`: "Assuming the model's maximum length
/// is 2048"); the value used is shown in every output.
pub const FALLBACK_MAX_MODEL_LEN: u64 = 2048;

/// The engine knobs the user set; `None` takes vLLM's default
/// ([`VllmArgs::with_defaults`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VllmOptions {
    /// `gpu_memory_utilization`.
    pub gpu_memory_utilization: Option<f64>,
    /// `max_model_len`.
    pub max_model_len: Option<u64>,
    /// `max_num_batched_tokens`.
    pub max_num_batched_tokens: Option<u64>,
    /// `max_num_seqs`.
    pub max_num_seqs: Option<u64>,
}

/// Engine knobs that decide the pool.
#[derive(Clone, Debug, Serialize)]
pub struct VllmArgs {
    /// `--gpu-memory-utilization` ([`DEFAULT_GPU_MEMORY_UTILIZATION`]).
    pub gpu_memory_utilization: f64,
    /// `--max-model-len` (default: the model's context).
    pub max_model_len: u64,
    /// `--max-num-batched-tokens`: the profile run's forward pass.
    pub max_num_batched_tokens: u64,
    /// `--max-num-seqs`: the rows of the profile run's sampler.
    pub max_num_seqs: u64,
}

impl VllmArgs {
    /// The knobs as `vllm serve` sets them on `gpu` for `cfg`: what the user
    /// gave, else vLLM's defaults. vLLM's default `max_model_len` is the
    /// model's own context (vllm/config `_get_and_verify_max_len` over
    /// `max_position_embeddings` and its aliases), not a round number:
    /// `vllm serve MODEL` refuses to start when the pool cannot hold one
    /// request of that length.
    pub fn with_defaults(o: &VllmOptions, cfg: &ModelConfig, gpu: &Gpu) -> VllmArgs {
        let (seqs, tokens) = default_batching(gpu.id, gpu.usable());
        VllmArgs {
            gpu_memory_utilization: o
                .gpu_memory_utilization
                .unwrap_or(DEFAULT_GPU_MEMORY_UTILIZATION),
            max_model_len: o
                .max_model_len
                .unwrap_or(cfg.vllm_context().unwrap_or(FALLBACK_MAX_MODEL_LEN)),
            max_num_batched_tokens: o.max_num_batched_tokens.unwrap_or(tokens),
            max_num_seqs: o.max_num_seqs.unwrap_or(seqs),
        }
    }
}

/// vLLM's defaults for `vllm serve` when the user sets neither
/// `--max-num-seqs` nor `--max-num-batched-tokens` (vllm/engine/arg_utils.py
/// `EngineArgs._set_default_args`, v0.10+): GPUs with at least 70 GiB that
/// are not A100s (H100, H200, MI300X) get 1024 sequences and 8192 batched
/// tokens; smaller GPUs and A100s get 256 and 2048. The llm-d report's
/// activation rows are taken at "8192 batched tokens" on H100 (§5.8 K8).
/// Returns (max_num_seqs, max_num_batched_tokens).
pub fn default_batching(gpu_id: &str, total: Bytes) -> (u64, u64) {
    if total >= Bytes::gib(70) && !gpu_id.contains("a100") {
        (1024, 8192)
    } else {
        (256, 2048)
    }
}

/// The pool and what it holds.
#[derive(Clone, Debug, Serialize)]
pub struct ServeReport {
    /// total × utilization.
    pub requested_bytes: Bytes,
    /// Weights.
    pub weights_bytes: Bytes,
    /// The profile run's torch peak above the weights.
    pub activation_bytes: Bytes,
    /// CUDA context and allocations outside torch that vLLM counts.
    pub non_torch_bytes: Bytes,
    /// The KV-cache pool.
    pub kv_pool_bytes: Bytes,
    /// Bytes of one 16-token block across all layers.
    pub block_bytes: Bytes,
    /// Blocks in the pool.
    pub blocks: u64,
    /// Tokens the pool holds.
    pub kv_tokens: u64,
    /// `--max-model-len` used.
    pub max_model_len: u64,
    /// Tensor-parallel size.
    pub tensor_parallel_size: u64,
    /// Pipeline-parallel size.
    pub pipeline_parallel_size: u64,
    /// The KV pool over all `tp · pp` GPUs.
    pub kv_pool_total_bytes: Bytes,
    /// Requests of `max_model_len` tokens served at once.
    pub max_concurrency: f64,
    /// The longest `--max-model-len` vLLM's start-up check accepts with this
    /// pool: (blocks − 1) · 16 (one block is the null block).
    pub max_fit_len: u64,
    /// One request of `max_model_len` fits (`max_model_len <= max_fit_len`);
    /// vLLM refuses to start otherwise.
    pub fits: bool,
    /// Paste-ready `vllm serve` flags for this setup.
    pub command: String,
}

/// vLLM's non-torch memory on one GPU without tensor parallelism: 0.25 GiB on an
/// H100 at v0.19 (llm-d report, §2.8 K2/K5: 0.24–0.25 GiB); with tensor
/// parallelism plus the NCCL buffers ([`c::nccl_bytes`]), which vLLM's
/// profiler counts as non-torch memory.
pub fn non_torch_bytes(s: &Setup) -> u64 {
    (256 << 20) + c::nccl_bytes(s)
}

/// Block bytes: 2 (K and V) · 16 tokens · n_kv · d_head · dtype · L; sliding
/// layers are ignored here (vLLM allocates them from the same pool by block);
/// MLA caches the latent (kv_lora_rank + rope dim) once per layer.
/// Per GPU: the ⌈L/pp⌉ layers of its stage and n_kv/t KV heads (replicated
/// when n_kv < t, [`c::kv_tp_divisor`]); the MLA latent is not split by
/// tensor parallelism (every rank keeps the whole latent).
pub fn block_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let per_token_layer = match &cfg.mla {
        Some(m) => m.kv_lora_rank + m.rope_dim,
        None => 2 * cfg.kv_heads * cfg.head_dim / c::kv_tp_divisor(cfg, s.tp),
    };
    BLOCK_SIZE * per_token_layer * c::stage_layers(cfg, s) * s.kv_bits / 8
}

/// Bytes per sampler element at the profile run's peak: the fp32 logits, and
/// the top-k/top-p sort's fp32 values and int64 indices
/// (vllm/v1/sample/ops/topk_topp_sampler.py `apply_top_k_top_p`:
/// `logits.sort(dim=-1)`), alive together — 4 + 4 + 8. The dummy sampler
/// run enables top-k/top-p so that this peak is profiled.
pub const SAMPLER_BYTES_PER_LOGIT: u64 = 16;

/// The setup of vLLM's profile run: one sequence of
/// `max_num_batched_tokens` tokens on an unsplit model.
pub fn profile_setup(s: &Setup, a: &VllmArgs) -> Setup {
    Setup {
        tp: 1,
        pp: 1,
        gpus: 1,
        batch: 1,
        seq: a.max_num_batched_tokens,
        new_tokens: 0,
        ..s.clone()
    }
}

/// The profile run's activation peak: the larger of the dummy forward
/// (one layer's prefill working set at `max_num_batched_tokens` tokens) and
/// the dummy sampler run (`max_num_seqs` rows of the vocabulary at
/// [`SAMPLER_BYTES_PER_LOGIT`]); the two run one after the other, so their
/// peaks do not add. With the H100 defaults (1024 sequences) the sampler
/// dominates: the llm-d report measured 1.89 GiB for Llama-3.1-8B
/// (V = 128,256), 2.21 GiB for Qwen2.5-7B and 2.23 GiB for Qwen3-14B
/// (V ≈ 152k) — in proportion to the vocabulary, not to the model (§5.8 K2,
/// K5, K7); this gives 1.96, 2.32 and 2.32 GiB. Taken without the
/// tensor-parallel split: vLLM PR #10511 logs the same activation peak per
/// GPU at TP=1 and TP=2 (§2.8), and K3 the same 1.89 GiB at TP 2 and 4.
pub fn profile_activation_bytes(cfg: &ModelConfig, s: &Setup, a: &VllmArgs) -> u64 {
    let forward = c::prefill_transient_bytes(cfg, &profile_setup(s, a));
    let sampler =
        a.max_num_seqs.min(a.max_num_batched_tokens) * cfg.vocab * SAMPLER_BYTES_PER_LOGIT;
    forward.max(sampler)
}

/// The pool on a GPU with `total` memory.
pub fn vllm(cfg: &ModelConfig, s: &Setup, a: &VllmArgs, total: Bytes) -> ServeReport {
    let requested = Bytes((total.get() as f64 * a.gpu_memory_utilization).ceil() as u64);
    let weights = Bytes(c::model_share(
        cfg,
        s.pp,
        s.tp,
        c::vllm_weights_bytes(cfg, s),
    ));
    let activation = Bytes(profile_activation_bytes(cfg, s, a));
    let non_torch = Bytes(non_torch_bytes(s));
    let pool =
        requested.saturating_sub(weights.saturating_add(activation).saturating_add(non_torch));
    let bb = Bytes(block_bytes(cfg, s).max(1));
    let blocks = pool.get().checked_div(bb.get()).unwrap_or(0);
    let tokens = blocks.saturating_mul(BLOCK_SIZE);
    let max_fit_len = blocks.saturating_sub(1).saturating_mul(BLOCK_SIZE);
    ServeReport {
        requested_bytes: requested,
        weights_bytes: weights,
        activation_bytes: activation,
        non_torch_bytes: non_torch,
        kv_pool_bytes: pool,
        block_bytes: bb,
        blocks,
        kv_tokens: tokens,
        max_model_len: a.max_model_len,
        tensor_parallel_size: s.tp,
        pipeline_parallel_size: s.pp,
        kv_pool_total_bytes: pool.saturating_mul(s.tp.saturating_mul(s.pp)),
        max_concurrency: tokens as f64 / a.max_model_len.max(1) as f64,
        max_fit_len,
        fits: a.max_model_len <= max_fit_len,
        command: command(cfg, s, a),
    }
}

impl ServeReport {
    /// `usable − requested` when vLLM starts; when it does not, minus what
    /// the request lacks: weights, activations, non-torch memory and the
    /// ⌈max_model_len / 16⌉ blocks of one request plus the null block, less
    /// the requested memory (never positive then).
    pub fn headroom_bytes(&self, usable: Bytes) -> i64 {
        if self.fits && self.requested_bytes <= usable {
            return usable.signed_sub(self.requested_bytes);
        }
        let kv = self
            .block_bytes
            .saturating_mul(self.max_model_len.div_ceil(BLOCK_SIZE).saturating_add(1));
        let need = self
            .weights_bytes
            .saturating_add(self.activation_bytes)
            .saturating_add(self.non_torch_bytes)
            .saturating_add(kv);
        let short = need
            .saturating_sub(self.requested_bytes.min(usable))
            .max(Bytes(1));
        -i64::try_from(short.get()).unwrap_or(i64::MAX)
    }
}

/// The smallest `--tensor-parallel-size` (2, 4 or 8: one node) that the
/// heads allow ([`Setup::check_model`]) and at which one request of
/// `max_model_len` fits, for a setup without tensor or pipeline parallelism
/// that does not fit; with its report (per GPU).
pub fn smallest_tp(
    cfg: &ModelConfig,
    s: &Setup,
    a: &VllmArgs,
    total: Bytes,
) -> Option<(u64, ServeReport)> {
    if s.tp > 1 || s.pp > 1 {
        return None;
    }
    [2, 4, 8].into_iter().find_map(|tp| {
        let t = Setup {
            tp,
            gpus: tp,
            ..s.clone()
        };
        t.check_model(cfg).ok()?;
        let r = vllm(cfg, &t, a, total);
        r.fits.then_some((tp, r))
    })
}

/// `vllm serve` with the flags that decide the pool; 4-bit AWQ/GPTQ weights
/// load the published checkpoint ([`prequantized`]), whose config names its
/// quantization, so it needs no `--quantization`.
fn command(cfg: &ModelConfig, s: &Setup, a: &VllmArgs) -> String {
    let model = match (s.quant, prequantized(&cfg.id)) {
        (Quant::Int4, Some(p)) => p.repo,
        _ => cfg.id.as_str(),
    };
    let mut cmd = format!(
        "vllm serve {model} --gpu-memory-utilization {} --max-model-len {}",
        a.gpu_memory_utilization, a.max_model_len
    );
    if let Some(q) = quantization_flag(cfg, s) {
        cmd += &format!(" --quantization {q}");
    }
    if s.kv_bits == 8 {
        cmd += " --kv-cache-dtype fp8";
    }
    if s.tp > 1 {
        cmd += &format!(" --tensor-parallel-size {}", s.tp);
    }
    if s.pp > 1 {
        cmd += &format!(" --pipeline-parallel-size {}", s.pp);
    }
    cmd
}

/// A published 4-bit checkpoint of a model, as vLLM loads it.
#[derive(Debug)]
pub struct Prequantized {
    /// The model it quantizes (Hugging Face id).
    pub model: &'static str,
    /// The checkpoint's Hugging Face id.
    pub repo: &'static str,
    /// Its `quantization_config.quant_method`.
    pub method: &'static str,
    /// Where it is published.
    pub source: &'static str,
}

/// Pre-quantized AWQ checkpoints of catalogue models, published by the model's
/// makers or Hugging Face's own quantization team (4-bit weights, group size
/// 128: [`Quant::Int4`]'s 4.25 bits). Each repo id is checked on the Hub.
pub static PREQUANTIZED: &[Prequantized] = &[
    Prequantized {
        model: "meta-llama/Llama-3.1-8B-Instruct",
        repo: "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4",
        method: "awq",
        source: "https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4",
    },
    Prequantized {
        model: "meta-llama/Llama-3.1-70B-Instruct",
        repo: "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
        method: "awq",
        source: "https://huggingface.co/hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
    },
    Prequantized {
        model: "Qwen/Qwen2.5-7B-Instruct",
        repo: "Qwen/Qwen2.5-7B-Instruct-AWQ",
        method: "awq",
        source: "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct-AWQ",
    },
    Prequantized {
        model: "Qwen/Qwen2.5-72B-Instruct",
        repo: "Qwen/Qwen2.5-72B-Instruct-AWQ",
        method: "awq",
        source: "https://huggingface.co/Qwen/Qwen2.5-72B-Instruct-AWQ",
    },
];

/// The published 4-bit checkpoint of `id` (case-insensitive; the
/// `Meta-Llama-3.1-…` spelling of Llama 3.1 ids counts too).
pub fn prequantized(id: &str) -> Option<&'static Prequantized> {
    let id = id
        .to_ascii_lowercase()
        .replace("/meta-llama-3.1-", "/llama-3.1-");
    PREQUANTIZED
        .iter()
        .find(|p| p.model.eq_ignore_ascii_case(&id))
}

/// vLLM's `--quantization` for the weights of `s`: none for unquantized
/// weights, for a checkpoint published quantized (vLLM reads its
/// `quantization_config`) and for a pre-quantized AWQ checkpoint; `fp8` for
/// in-flight FP8; `bitsandbytes` for in-flight 4-bit (docs.vllm.ai
/// features/quantization/bnb: "For inflight 4bit quantization with
/// BitsAndBytes, you need to explicitly specify the quantization argument";
/// v0.6 also wanted `--load-format bitsandbytes`, no longer needed).
pub fn quantization_flag(cfg: &ModelConfig, s: &Setup) -> Option<&'static str> {
    if cfg.native_quant == Some(s.quant) {
        return None;
    }
    match s.quant {
        Quant::Fp8 => Some("fp8"),
        Quant::Nf4 | Quant::Nf4Dq => Some("bitsandbytes"),
        Quant::None | Quant::Int4 | Quant::Int8 | Quant::Mxfp4 => None,
    }
}

/// `--quant` values vLLM can serve: in-flight FP8 and bitsandbytes 4-bit, a
/// checkpoint's own format, and 4-bit AWQ when a checkpoint is known; and
/// KV caches it keeps: the model's dtype or FP8 (`--kv-cache-dtype`,
/// vllm/config/cache.py `CacheDType`: auto, fp8 and its variants).
pub fn check_quant(cfg: &ModelConfig, s: &Setup) -> Result<(), SetupError> {
    if s.kv_bits == 4 {
        return Err(SetupError::Invalid(
            "vLLM keeps the KV cache in the model's dtype or in FP8 (--kv-cache-dtype fp8): use ⟨kv-dtype⟩ fp8".into(),
        ));
    }
    if cfg.native_quant == Some(s.quant) {
        return Ok(());
    }
    match s.quant {
        Quant::Int8 => Err(SetupError::Invalid(
            "vLLM does not quantize to 8-bit integers while loading: use ⟨quant⟩ fp8 (in-flight FP8) or ⟨quant⟩ nf4 (bitsandbytes 4-bit)".into(),
        )),
        Quant::Int4 if prequantized(&cfg.id).is_none() => Err(SetupError::Invalid(format!(
            "vLLM serves 4-bit AWQ/GPTQ weights only from a pre-quantized checkpoint, and none is known for {}: use ⟨quant⟩ nf4 (bitsandbytes 4-bit, quantized while loading)",
            cfg.id
        ))),
        Quant::Mxfp4 => Err(SetupError::Invalid(format!(
            "{} is not published in MXFP4",
            cfg.id
        ))),
        _ => Ok(()),
    }
}

/// The smallest `--max-model-len` offered as a fix: a model that can only
/// take a few hundred tokens does not serve.
pub const SHORTEST_USEFUL_LEN: u64 = 512;

/// The highest `--gpu-memory-utilization` a plan proposes. vLLM refuses to
/// start when the free memory is below total × utilization
/// (`vllm/v1/worker/gpu_worker.py` `init_device`: "Free memory on device …
/// is less than desired GPU memory utilization"), and the CUDA context
/// alone takes ~0.5 GiB before that check, so 0.95 is what an otherwise
/// empty GPU can grant.
pub const MAX_UTILIZATION: f64 = 0.95;

/// One way to start: a `vllm serve` line that passes the start-up check.
#[derive(Clone, Debug, Serialize)]
pub struct ServeStep {
    /// What changes, in words.
    pub change: String,
    /// The `oomkit_core::remedies` id.
    pub remedy: RemedyId,
    /// Weights bytes per GPU saved against the setup as given.
    pub saves_bytes: Bytes,
    /// The memory vLLM requests per GPU under this step.
    pub peak_after_bytes: Bytes,
    /// The paste-ready `vllm serve` line.
    pub config: String,
    /// GPUs it uses.
    pub gpus: u64,
    /// The pool under this step (per GPU).
    pub serve: ServeReport,
}

/// `a` with `--max-model-len` lowered to the longest that starts (at least
/// [`SHORTEST_USEFUL_LEN`]); `None` when the full length starts or nothing
/// useful does.
fn capped(cfg: &ModelConfig, s: &Setup, a: &VllmArgs, total: Bytes) -> Option<ServeReport> {
    let r = vllm(cfg, s, a, total);
    if r.fits || r.max_fit_len < SHORTEST_USEFUL_LEN {
        return None;
    }
    let a = VllmArgs {
        max_model_len: r.max_fit_len,
        ..a.clone()
    };
    Some(vllm(cfg, s, &a, total)).filter(|r| r.fits)
}

/// The report at the full length when it starts, else capped ([`capped`]).
fn full_or_capped(cfg: &ModelConfig, s: &Setup, a: &VllmArgs, total: Bytes) -> Option<ServeReport> {
    let r = vllm(cfg, s, a, total);
    if r.fits {
        Some(r)
    } else {
        capped(cfg, s, a, total)
    }
}

/// The ways to make `vllm serve` start on `gpu`, cheapest first (empty when
/// it starts as given). Each is a complete alternative, not a step to stack:
/// 1. the model as it is: `--gpu-memory-utilization 0.95` when that alone
///    holds one full-length request, then `--max-model-len` lowered to the
///    longest that starts;
/// 2. quantized, on the same GPUs: the KV cache in FP8
///    (`--kv-cache-dtype fp8`, compute capability 8.9+), then the weights
///    while loading (unquantized checkpoints only): `--quantization fp8` on compute capability 8.9+ (vLLM's FP8
///    W8A8 kernels), the published AWQ checkpoint when [`prequantized`]
///    knows one (compute capability 7.5+), `--quantization bitsandbytes` (4-bit); each at the full
///    length when it starts there, else capped;
/// 3. more GPUs: the smallest `--tensor-parallel-size` ([`smallest_tp`]) at
///    the full length.
pub fn plan(cfg: &ModelConfig, s: &Setup, a: &VllmArgs, gpu: &Gpu) -> Vec<ServeStep> {
    let total = gpu.usable();
    let base = vllm(cfg, s, a, total);
    if base.fits {
        return Vec::new();
    }
    let gpus = s.tp.saturating_mul(s.pp);
    let step = |change: String, remedy, r: ServeReport, gpus| ServeStep {
        change,
        remedy,
        saves_bytes: base.weights_bytes.saturating_sub(r.weights_bytes),
        peak_after_bytes: r.requested_bytes,
        config: r.command.clone(),
        gpus,
        serve: r,
    };
    let cap_note = |r: &ServeReport| {
        if r.max_model_len < a.max_model_len {
            format!(", context capped at {} tokens", r.max_model_len)
        } else {
            String::new()
        }
    };
    let mut steps = Vec::new();
    if a.gpu_memory_utilization < MAX_UTILIZATION {
        let up = VllmArgs {
            gpu_memory_utilization: MAX_UTILIZATION,
            ..a.clone()
        };
        let r = vllm(cfg, s, &up, total);
        if r.fits {
            steps.push(step(
                format!(
                    "raise --gpu-memory-utilization to {MAX_UTILIZATION} (only on a GPU no other process uses)"
                ),
                RemedyId::VllmGpuMemoryUtilization,
                r,
                gpus,
            ));
        }
    }
    if let Some(r) = capped(cfg, s, a, total) {
        steps.push(step(
            format!(
                "cap the context at {} tokens (from {}), the longest that starts",
                r.max_model_len, a.max_model_len
            ),
            RemedyId::VllmMaxModelLen,
            r,
            gpus,
        ));
    }
    // Both at once: the utilization raised and the context capped to the
    // longest that starts there, when the raise alone does not start and
    // the pair keeps a longer context than capping alone.
    if a.gpu_memory_utilization < MAX_UTILIZATION {
        let up = VllmArgs {
            gpu_memory_utilization: MAX_UTILIZATION,
            ..a.clone()
        };
        let alone = capped(cfg, s, a, total).map_or(0, |r| r.max_model_len);
        if let Some(r) = capped(cfg, s, &up, total).filter(|r| r.max_model_len > alone) {
            steps.push(step(
                format!(
                    "raise --gpu-memory-utilization to {MAX_UTILIZATION} (only on a GPU no other process uses) and cap the context at {} tokens (from {})",
                    r.max_model_len, a.max_model_len
                ),
                RemedyId::VllmMaxModelLen,
                r,
                gpus,
            ));
        }
    }
    let fp8 = gpu.compute_capability().is_some_and(|cc| cc >= (8, 9));
    if fp8 && s.kv_bits > 8 {
        let t = Setup {
            kv_bits: 8,
            ..s.clone()
        };
        if let Some(r) = full_or_capped(cfg, &t, a, total) {
            let change = format!("store the KV cache in FP8{}", cap_note(&r));
            steps.push(step(change, RemedyId::VllmKvCacheDtype, r, gpus));
        }
    }
    if s.quant == Quant::None && cfg.native_quant.is_none() {
        // vLLM's AWQ kernels need Turing or newer (`AWQConfig.get_min_capability`: 75).
        let awq = prequantized(&cfg.id)
            .filter(|_| gpu.compute_capability().is_some_and(|cc| cc >= (7, 5)));
        let options = [
            (
                fp8,
                Quant::Fp8,
                "quantize the weights to FP8 while loading".to_string(),
                RemedyId::Quantize8bit,
            ),
            (
                awq.is_some(),
                Quant::Int4,
                awq.map_or_else(String::new, |p| {
                    format!(
                        "serve the published 4-bit {} checkpoint {}",
                        p.method.to_ascii_uppercase(),
                        p.repo
                    )
                }),
                RemedyId::Quantize4bit,
            ),
            (
                true,
                Quant::Nf4,
                "quantize the weights to 4-bit with bitsandbytes while loading".to_string(),
                RemedyId::Quantize4bit,
            ),
        ];
        for (offered, quant, change, remedy) in options {
            if !offered {
                continue;
            }
            let t = Setup { quant, ..s.clone() };
            if let Some(r) = full_or_capped(cfg, &t, a, total) {
                let change = format!("{change}{}", cap_note(&r));
                steps.push(step(change, remedy, r, gpus));
            }
        }
    }
    if let Some((tp, r)) = smallest_tp(cfg, s, a, total) {
        steps.push(step(
            format!("tensor parallelism over {tp} GPUs at the full context"),
            RemedyId::VllmTensorParallel,
            r,
            tp,
        ));
    }
    steps
}

/// vLLM on one GPU kind: the knobs used, the pool, the verdict and, when it
/// does not start, the plan.
#[derive(Clone, Debug)]
pub struct Served {
    /// The knobs with vLLM's defaults filled in.
    pub args: VllmArgs,
    /// Whether `max_model_len` is vLLM's default (the model's context).
    pub default_len: bool,
    /// The pool.
    pub report: ServeReport,
    /// The GPU's usable bytes.
    pub usable_bytes: Bytes,
    /// vLLM's start-up check passes and the request fits the GPU.
    pub fits: bool,
    /// The ways to start, cheapest first; each passes vLLM's start-up check
    /// (empty when it fits).
    pub plan: Vec<ServeStep>,
    /// What is left over; negative when it does not fit (what is missing,
    /// never a positive headroom).
    pub headroom_bytes: i64,
}

/// `vllm serve` of `cfg` with `s` on `gpu`: checks the knobs, sizes the
/// pool, gives vLLM's verdict and the plan.
pub fn serve(
    cfg: &ModelConfig,
    s: &Setup,
    o: &VllmOptions,
    gpu: &Gpu,
) -> Result<Served, SetupError> {
    let args = VllmArgs::with_defaults(o, cfg, gpu);
    s.check_vllm(cfg, &args)?;
    let usable = gpu.usable();
    let report = vllm(cfg, s, &args, usable);
    let fits = report.fits && report.requested_bytes <= usable;
    let plan = if fits {
        Vec::new()
    } else {
        plan(cfg, s, &args, gpu)
    };
    Ok(Served {
        headroom_bytes: report.headroom_bytes(usable),
        default_len: o.max_model_len.is_none(),
        args,
        report,
        usable_bytes: usable,
        fits,
        plan,
    })
}

impl Served {
    /// The JSON output (README "`oomkit estimate`"): the text models' shape,
    /// with the pool under `serve`.
    pub fn json(
        &self,
        cfg: &ModelConfig,
        s: &Setup,
        gpu: &Gpu,
        warnings: &[String],
        assumed: &[crate::versions::Assumption],
    ) -> serde_json::Value {
        let r = &self.report;
        let components = crate::Components {
            weights_bytes: r.weights_bytes,
            activations_bytes: r.activation_bytes,
            kv_cache_bytes: r.kv_pool_bytes,
            cuda_context_bytes: r.non_torch_bytes,
            ..Default::default()
        };
        let allocated = r
            .weights_bytes
            .saturating_add(r.activation_bytes)
            .saturating_add(r.kv_pool_bytes);
        let mut model = serde_json::json!({"id": cfg.id, "params": cfg.params()});
        for (k, v) in [
            ("resolved_to", &cfg.resolved_to),
            ("config_file", &cfg.config_file),
        ] {
            if let (Some(v), Some(m)) = (v, model.as_object_mut()) {
                m.insert(k.into(), v.clone().into());
            }
        }
        let fit = serde_json::json!({
            "gpu": gpu.id,
            "usable_bytes": self.usable_bytes,
            "fits": self.fits,
            "headroom_bytes": self.headroom_bytes,
            // Requests of max_model_len served at once, and the longest
            // max_model_len one request can reach in the pool.
            "max_batch": r.max_concurrency.floor() as u64,
            "max_seq": cfg.vllm_context().map_or(r.max_fit_len, |m| m.min(r.max_fit_len)),
            "plan": self.plan,
            "plan_fits": self.fits || !self.plan.is_empty(),
        });
        let j = crate::json::Json {
            version: crate::json::VERSION,
            engine: None,
            model,
            setup: s,
            components: std::borrow::Cow::Owned(components),
            peak_allocated_bytes: Some(allocated),
            peak_reserved_bytes: Some(allocated),
            device_used_bytes: r.requested_bytes,
            peak_phase: Some("serve"),
            warnings,
            assumed,
            detail: Some(crate::json::Detail::Serve(r)),
            fit: Some(fit),
        };
        // A value: its objects print their keys in order.
        serde_json::to_value(j).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;

    fn args(util: f64) -> VllmArgs {
        VllmArgs {
            gpu_memory_utilization: util,
            max_model_len: 8192,
            max_num_batched_tokens: 8192,
            max_num_seqs: 256,
        }
    }

    /// §5.8 K2: Llama-3.1-8B on an H100 (79.19 GiB), util 0.95: KV 58.11 GiB =
    /// 476,016 tokens; K5: Qwen2.5-7B 58.53 GiB = 1,096,000 tokens.
    #[test]
    fn pools_match_llm_d_measurements() {
        let total = Bytes((79.19 * (1u64 << 30) as f64) as u64);
        for (id, gib, tokens) in [
            ("meta-llama/Llama-3.1-8B", 58.11, 476_016.0),
            ("Qwen/Qwen2.5-7B", 58.53, 1_096_000.0),
        ] {
            let cfg = catalogue::find(id).expect("model");
            let r = vllm(&cfg, &Setup::default(), &args(0.95), total);
            let pool = r.kv_pool_bytes.get() as f64 / (1u64 << 30) as f64;
            assert!((pool - gib).abs() / gib < 0.03, "{id}: {pool} GiB vs {gib}");
            let t = r.kv_tokens as f64;
            assert!(
                (t - tokens).abs() / tokens < 0.03,
                "{id}: {t} tokens vs {tokens}"
            );
        }
    }

    /// `--tensor-parallel-size 2`: half the weights and half of each block per
    /// GPU (vLLM PR #10511: Llama-3-8B weights 14.96 → 7.48 GiB per GPU), NCCL
    /// buffers in the non-torch memory, and tokens spread over both GPUs.
    #[test]
    fn tensor_parallel_pool_per_gpu() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
        let total = Bytes((79.19 * (1u64 << 30) as f64) as u64);
        let one = vllm(&cfg, &Setup::default(), &args(0.9), total);
        let s = Setup {
            gpus: 2,
            tp: 2,
            ..Setup::default()
        };
        let two = vllm(&cfg, &s, &args(0.9), total);
        assert_eq!(two.weights_bytes.get(), one.weights_bytes.get() / 2);
        assert_eq!(two.block_bytes.get(), one.block_bytes.get() / 2);
        assert_eq!(
            two.non_torch_bytes.get(),
            one.non_torch_bytes.get() + c::nccl_bytes(&s)
        );
        assert_eq!(two.kv_pool_total_bytes.get(), 2 * two.kv_pool_bytes.get());
        assert_eq!(
            two.kv_tokens,
            two.kv_pool_bytes.get() / two.block_bytes.get() * BLOCK_SIZE
        );
        assert!(two.kv_tokens > 2 * one.kv_tokens);
        assert!(two.command.contains("--tensor-parallel-size 2"));
        assert!(smallest_tp(&cfg, &Setup::default(), &args(0.9), total).is_some());
        let big = catalogue::find("meta-llama/Llama-3.1-70B").expect("model");
        let (tp, r) = smallest_tp(&big, &Setup::default(), &args(0.9), total).expect("tp");
        assert_eq!(tp, 2, "70B bf16 = 141 GB: two H100s");
        assert!(r.fits);
    }

    fn full_len(id: &str) -> (ModelConfig, VllmArgs) {
        let cfg = catalogue::find(id).expect("model");
        let a = VllmArgs {
            max_model_len: cfg.max_positions.expect("context"),
            ..args(0.9)
        };
        (cfg, a)
    }

    fn gpu(id: &str) -> &'static Gpu {
        oomkit_core::gpus::find(id).expect("gpu")
    }

    /// vLLM's check: ⌈len / 16⌉ blocks plus the null block. The longest
    /// length that starts is (blocks − 1) · 16; one block more does not.
    #[test]
    fn start_up_check_keeps_the_null_block() {
        let (cfg, a) = full_len("meta-llama/Llama-3.1-8B");
        let total = gpu("rtx-4090").usable();
        let r = vllm(&cfg, &Setup::default(), &a, total);
        assert!(!r.fits);
        assert_eq!(r.max_fit_len, (r.blocks - 1) * BLOCK_SIZE);
        assert!(r.headroom_bytes(total) < 0);
        let at = |len| {
            let a = VllmArgs {
                max_model_len: len,
                ..a.clone()
            };
            vllm(&cfg, &Setup::default(), &a, total)
        };
        let ok = at(r.max_fit_len);
        assert!(ok.fits && ok.headroom_bytes(total) > 0);
        let short = at(r.max_fit_len + 1);
        assert!(!short.fits && short.headroom_bytes(total) < 0);
    }

    /// 70B bf16 on one H100: the weights alone exceed the request, so
    /// nothing keeps the model as is; FP8 (Hopper), the AWQ checkpoint and
    /// bitsandbytes run on the one GPU, tensor parallelism last. Every line
    /// passes the check it was planned against.
    #[test]
    fn plan_for_70b_on_one_h100_quantizes_before_adding_gpus() {
        let (mut cfg, a) = full_len("meta-llama/Llama-3.1-70B");
        cfg.id = "meta-llama/Llama-3.1-70B-Instruct".into();
        let h100 = gpu("h100-sxm");
        let base = vllm(&cfg, &Setup::default(), &a, h100.usable());
        assert!(base.headroom_bytes(h100.usable()) < 0);
        let p = plan(&cfg, &Setup::default(), &a, h100);
        let ids: Vec<RemedyId> = p.iter().map(|st| st.remedy).collect();
        assert_eq!(
            ids,
            [
                RemedyId::Quantize8bit,
                RemedyId::Quantize4bit,
                RemedyId::Quantize4bit,
                RemedyId::VllmTensorParallel
            ]
        );
        assert!(
            p.iter()
                .all(|st| st.serve.fits && st.peak_after_bytes <= h100.usable())
        );
        assert!(
            p[0].config.ends_with("--quantization fp8"),
            "{}",
            p[0].config
        );
        assert!(
            p[1].config
                .starts_with("vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 ")
                && !p[1].config.contains("--quantization"),
            "{}",
            p[1].config
        );
        assert!(p[2].config.ends_with("--quantization bitsandbytes"));
        assert!(p[3].config.contains("--tensor-parallel-size 4") && p[3].gpus == 4);
        // Quantized lines cap the context where the full one does not start.
        for st in &p[..3] {
            assert!(st.serve.max_model_len <= a.max_model_len);
            assert!(st.saves_bytes > Bytes::ZERO);
        }
        // Ampere has no FP8 kernels: no FP8 line on an A100.
        let a100 = plan(&cfg, &Setup::default(), &a, gpu("a100-80gb"));
        assert!(a100.iter().all(|st| !st.config.contains("fp8")), "{a100:?}");
        // The base model has no published AWQ checkpoint of its own.
        cfg.id = "meta-llama/Llama-3.1-70B".into();
        let base_plan = plan(&cfg, &Setup::default(), &a, h100);
        assert!(base_plan.iter().all(|st| !st.config.contains("AWQ")));
    }

    /// A pool a little short at 0.9 that 0.95 fills: the cheapest line is
    /// the higher utilization, then the capped context.
    #[test]
    fn plan_raises_utilization_first_when_that_is_enough() {
        let (cfg, a) = full_len("meta-llama/Llama-3.1-8B");
        let g = gpu("rtx-4090");
        let at95 = vllm(
            &cfg,
            &Setup::default(),
            &VllmArgs {
                gpu_memory_utilization: MAX_UTILIZATION,
                ..a.clone()
            },
            g.usable(),
        );
        let a = VllmArgs {
            max_model_len: at95.max_fit_len,
            ..a
        };
        let p = plan(&cfg, &Setup::default(), &a, g);
        assert_eq!(p[0].remedy, RemedyId::VllmGpuMemoryUtilization);
        assert!(p[0].config.contains("--gpu-memory-utilization 0.95"));
        assert_eq!(p[1].remedy, RemedyId::VllmMaxModelLen);
        assert!(p.iter().all(|st| st.serve.fits));
        // As given it starts after all at 0.95: no plan.
        let ok = VllmArgs {
            gpu_memory_utilization: MAX_UTILIZATION,
            ..a
        };
        assert!(plan(&cfg, &Setup::default(), &ok, g).is_empty());
    }

    #[test]
    fn quantization_flags_and_checks() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
        let q = |quant| Setup {
            quant,
            ..Setup::default()
        };
        assert_eq!(quantization_flag(&cfg, &q(Quant::None)), None);
        assert_eq!(quantization_flag(&cfg, &q(Quant::Fp8)), Some("fp8"));
        assert_eq!(
            quantization_flag(&cfg, &q(Quant::Nf4)),
            Some("bitsandbytes")
        );
        assert!(check_quant(&cfg, &q(Quant::Int8)).is_err());
        assert!(
            check_quant(&cfg, &q(Quant::Int4)).is_err(),
            "no AWQ of the base"
        );
        let mut inst = cfg.clone();
        inst.id = "meta-llama/Meta-Llama-3.1-8B-Instruct".into();
        assert!(check_quant(&inst, &q(Quant::Int4)).is_ok());
        let r = vllm(&inst, &q(Quant::Int4), &args(0.9), Bytes::gib(24));
        assert!(
            r.command
                .starts_with("vllm serve hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4 ")
        );
        // A checkpoint published in FP8 needs no flag: vLLM reads its config.
        let v3 = catalogue::find("deepseek-ai/DeepSeek-V3").expect("model");
        assert_eq!(quantization_flag(&v3, &q(Quant::Fp8)), None);
    }

    /// Every known checkpoint quantizes a model the catalogue resolves.
    #[test]
    fn prequantized_models_resolve() {
        for p in PREQUANTIZED {
            assert!(catalogue::find(p.model).is_ok(), "{}", p.model);
            assert_eq!(prequantized(p.model).map(|x| x.repo), Some(p.repo));
            assert!(p.source.ends_with(p.repo), "{}", p.source);
        }
    }
}
