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

use serde::Serialize;

use crate::components as c;
use crate::model::ModelConfig;
use crate::setup::Setup;

/// vLLM's default KV block size (tokens).
pub const BLOCK_SIZE: u64 = 16;

/// Engine knobs that decide the pool.
#[derive(Clone, Debug, Serialize)]
pub struct VllmArgs {
    /// `--gpu-memory-utilization` (default 0.9).
    pub gpu_memory_utilization: f64,
    /// `--max-model-len` (default: the model's context).
    pub max_model_len: u64,
    /// `--max-num-batched-tokens`: the profile run's forward pass.
    pub max_num_batched_tokens: u64,
    /// `--max-num-seqs`: the rows of the profile run's sampler.
    pub max_num_seqs: u64,
}

/// vLLM's defaults for `vllm serve` when the user sets neither
/// `--max-num-seqs` nor `--max-num-batched-tokens` (vllm/engine/arg_utils.py
/// `EngineArgs._set_default_args`, v0.10+): GPUs with at least 70 GiB that
/// are not A100s (H100, H200, MI300X) get 1024 sequences and 8192 batched
/// tokens; smaller GPUs and A100s get 256 and 2048. The llm-d report's
/// activation rows are taken at "8192 batched tokens" on H100 (§5.8 K8).
/// Returns (max_num_seqs, max_num_batched_tokens).
pub fn default_batching(gpu_id: &str, total_bytes: u64) -> (u64, u64) {
    if total_bytes >= 70 << 30 && !gpu_id.contains("a100") {
        (1024, 8192)
    } else {
        (256, 2048)
    }
}

/// The pool and what it holds.
#[derive(Clone, Debug, Serialize)]
pub struct ServeReport {
    /// total × utilization.
    pub requested_bytes: u64,
    /// Weights.
    pub weights_bytes: u64,
    /// The profile run's torch peak above the weights.
    pub activation_bytes: u64,
    /// CUDA context and allocations outside torch that vLLM counts.
    pub non_torch_bytes: u64,
    /// The KV-cache pool.
    pub kv_pool_bytes: u64,
    /// Bytes of one 16-token block across all layers.
    pub block_bytes: u64,
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
    pub kv_pool_total_bytes: u64,
    /// Requests of `max_model_len` tokens served at once.
    pub max_concurrency: f64,
    /// At least one request of `max_model_len` fits (vLLM refuses to start otherwise).
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

/// The pool on a GPU with `total_bytes` of memory.
pub fn vllm(cfg: &ModelConfig, s: &Setup, a: &VllmArgs, total_bytes: u64) -> ServeReport {
    let requested = (total_bytes as f64 * a.gpu_memory_utilization).ceil() as u64;
    let weights = c::model_share(cfg, s.pp, s.tp, c::weights_bytes(cfg, s));
    let activation = profile_activation_bytes(cfg, s, a);
    let non_torch = non_torch_bytes(s);
    let pool =
        requested.saturating_sub(weights.saturating_add(activation).saturating_add(non_torch));
    let bb = block_bytes(cfg, s).max(1);
    let blocks = pool / bb;
    let tokens = blocks * BLOCK_SIZE;
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
        kv_pool_total_bytes: pool * s.tp * s.pp,
        max_concurrency: tokens as f64 / a.max_model_len.max(1) as f64,
        fits: tokens >= a.max_model_len,
        command: command(cfg, s, a),
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
    total_bytes: u64,
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
        let r = vllm(cfg, &t, a, total_bytes);
        r.fits.then_some((tp, r))
    })
}

/// `vllm serve` with the flags that decide the pool.
fn command(cfg: &ModelConfig, s: &Setup, a: &VllmArgs) -> String {
    let mut cmd = format!(
        "vllm serve {} --gpu-memory-utilization {} --max-model-len {}",
        cfg.id, a.gpu_memory_utilization, a.max_model_len
    );
    if s.tp > 1 {
        cmd += &format!(" --tensor-parallel-size {}", s.tp);
    }
    if s.pp > 1 {
        cmd += &format!(" --pipeline-parallel-size {}", s.pp);
    }
    cmd
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
        let total = (79.19 * (1u64 << 30) as f64) as u64;
        for (id, gib, tokens) in [
            ("meta-llama/Llama-3.1-8B", 58.11, 476_016.0),
            ("Qwen/Qwen2.5-7B", 58.53, 1_096_000.0),
        ] {
            let cfg = catalogue::find(id).expect("model");
            let r = vllm(&cfg, &Setup::default(), &args(0.95), total);
            let pool = r.kv_pool_bytes as f64 / (1u64 << 30) as f64;
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
        let total = (79.19 * (1u64 << 30) as f64) as u64;
        let one = vllm(&cfg, &Setup::default(), &args(0.9), total);
        let s = Setup {
            gpus: 2,
            tp: 2,
            ..Setup::default()
        };
        let two = vllm(&cfg, &s, &args(0.9), total);
        assert_eq!(two.weights_bytes, one.weights_bytes / 2);
        assert_eq!(two.block_bytes, one.block_bytes / 2);
        assert_eq!(two.non_torch_bytes, one.non_torch_bytes + c::nccl_bytes(&s));
        assert_eq!(two.kv_pool_total_bytes, 2 * two.kv_pool_bytes);
        assert_eq!(
            two.kv_tokens,
            two.kv_pool_bytes / two.block_bytes * BLOCK_SIZE
        );
        assert!(two.kv_tokens > 2 * one.kv_tokens);
        assert!(two.command.contains("--tensor-parallel-size 2"));
        assert!(smallest_tp(&cfg, &Setup::default(), &args(0.9), total).is_some());
        let big = catalogue::find("meta-llama/Llama-3.1-70B").expect("model");
        let (tp, r) = smallest_tp(&big, &Setup::default(), &args(0.9), total).expect("tp");
        assert_eq!(tp, 2, "70B bf16 = 141 GB: two H100s");
        assert!(r.fits);
    }
}
