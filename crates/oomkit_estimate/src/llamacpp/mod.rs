//! llama.cpp (`--engine llama.cpp`): the buffers `llama-server` allocates on
//! the GPU, as it prints them at start-up, and the plans that make a model
//! fit (the largest `-c`, the largest `-ngl`), each a `llama-server` line.
//!
//! Sources (ggml-org/llama.cpp, read at commit 001d906a and its neighbours):
//! - weights: the GGUF tensor sizes, placed per layer by
//!   `src/llama-model.cpp` `llama_model_base::load_tensors`:
//!   `i_gpu_start = max(n_layer + 1 − n_gpu_layers, 0)`; layer `il` (the
//!   output layer is `il = n_layer`) is on the GPU when `il ≥ i_gpu_start`,
//!   so `-ngl k` offloads the output layer first and then the last `k − 1`
//!   blocks; the input layer (`token_embd`) always stays on the CPU ("there is
//!   very little benefit to offloading the input layer"). A model without
//!   `output.weight` (tied embeddings) loads `token_embd` a second time as
//!   the output layer's weight.
//! - KV cache: `src/llama-kv-cache.cpp`: one K and one V tensor per layer of
//!   `n_ctx` cells, on the layer's device (`--kv-offload`, the default);
//!   `n_ctx` padded to a multiple of 256 (`src/llama-context.cpp`,
//!   `llama_context::llama_context`: `cparams.n_ctx = GGML_PAD(cparams.n_ctx,
//!   256)`); sliding-window layers keep `min(n_ctx, pad(n_swa + n_ubatch,
//!   256))` cells (`src/llama-kv-cache-iswa.cpp`) unless `--swa-full`.
//!   llama-server's default `-np auto` runs 4 slots sharing one unified
//!   cache of `n_ctx` cells (`tools/server/server.cpp`: "n_parallel is set
//!   to auto, using n_parallel = 4 and kv_unified = true"), and the
//!   sliding-window cache then holds `n_swa · 4 + n_ubatch` cells; an
//!   explicit `-np N` without `-kvu` splits the cache into N streams of
//!   `pad(n_ctx / N, 256)` cells (`llama_context`: `n_ctx_seq`).
//! - compute buffer: the ggml graph allocator's peak over the worst-case
//!   graph of `n_ubatch` tokens against the full cache (all intermediate
//!   tensors are f32): see [`compute_bytes`].
//! - element sizes: ggml's type table (`ggml/src/ggml.c` `type_traits`:
//!   block bytes / elements per block), also in [`crate::gguf::ggml_type_size`].

use oomkit_core::Bytes;
use serde::Serialize;

mod outcome;
pub use outcome::{Layers, LlamaError, MAX_BATCH, MAX_CTX, MAX_SLOTS, Options, Outcome, Step};

use crate::gguf::GgufTensor;
use crate::model::ModelConfig;

/// llama.cpp pads the context to this many cells (`llama-context.cpp`).
pub const CTX_PAD: u64 = 256;

/// Slots of llama-server's `-np auto` (sharing one unified cache).
pub const AUTO_SLOTS: u64 = 4;

/// `-ub` / `--ubatch-size` default (`common/common.h`: `n_ubatch = 512`).
pub const DEFAULT_UBATCH: u64 = 512;
/// `-b` / `--batch-size` default (`common/common.h`: `n_batch = 2048`).
pub const DEFAULT_BATCH: u64 = 2048;
/// `-c 0` means the model's training context (`common/common.h`:
/// `n_ctx = 0; // context size, 0 == context the model was trained with`,
/// llama-server's `-c` help: "default: 0, 0 = loaded from model"); when the
/// GGUF names none, llama.cpp's hparams default `n_ctx_train` is 4096 — not
/// reached for real files, which all carry `context_length`.
pub const FALLBACK_CTX_TRAIN: u64 = 4096;

/// GPU memory outside llama.cpp's buffers: CUDA context, cuBLAS handles and
/// the CUDA pool. llama.cpp's own memory breakdown (PR #15860, quoted in
/// `memory-estimation.md` §llama.cpp) reports it as "unaccounted": 451 MiB per
/// RTX 4090 (24080 = 9436 free + 14193 self + 451 unaccounted MiB).
pub const OVERHEAD_BYTES: u64 = 451 << 20;

/// `--cache-type-k` / `--cache-type-v` (the values llama-server accepts:
/// f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CacheType {
    F32,
    F16,
    Bf16,
    #[cfg_attr(feature = "clap", value(name = "q8_0"))]
    Q8_0,
    #[cfg_attr(feature = "clap", value(name = "q4_0"))]
    Q4_0,
    #[cfg_attr(feature = "clap", value(name = "q4_1"))]
    Q4_1,
    #[cfg_attr(feature = "clap", value(name = "iq4_nl"))]
    Iq4Nl,
    #[cfg_attr(feature = "clap", value(name = "q5_0"))]
    Q5_0,
    #[cfg_attr(feature = "clap", value(name = "q5_1"))]
    Q5_1,
}

impl CacheType {
    /// (block bytes, elements per block) from ggml's type table.
    pub fn block(self) -> (u64, u64) {
        match self {
            CacheType::F32 => (4, 1),
            CacheType::F16 | CacheType::Bf16 => (2, 1),
            CacheType::Q8_0 => (34, 32),
            CacheType::Q4_0 | CacheType::Iq4Nl => (18, 32),
            CacheType::Q4_1 => (20, 32),
            CacheType::Q5_0 => (22, 32),
            CacheType::Q5_1 => (24, 32),
        }
    }
    /// llama.cpp's spelling.
    pub fn name(self) -> &'static str {
        match self {
            CacheType::F32 => "f32",
            CacheType::F16 => "f16",
            CacheType::Bf16 => "bf16",
            CacheType::Q8_0 => "q8_0",
            CacheType::Q4_0 => "q4_0",
            CacheType::Q4_1 => "q4_1",
            CacheType::Iq4Nl => "iq4_nl",
            CacheType::Q5_0 => "q5_0",
            CacheType::Q5_1 => "q5_1",
        }
    }
    /// A block-quantized type (needs flash attention for V).
    pub fn quantized(self) -> bool {
        self.block().1 > 1
    }
    /// Bytes of `n` elements (whole blocks).
    pub fn bytes(self, n: u64) -> u64 {
        let (b, per) = self.block();
        n.div_ceil(per).saturating_mul(b)
    }
}

/// A GGUF file type users name (`Q4_K_M`): the mix of tensor types
/// llama-quantize writes for it (`src/llama-quant.cpp`
/// `llama_tensor_get_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum FileType {
    #[cfg_attr(
        feature = "clap",
        value(
            name = "f16",
            alias = "F16",
            help = "GGUF file types (--engine llama.cpp without a .gguf file)"
        )
    )]
    F16,
    #[cfg_attr(feature = "clap", value(name = "q8_0", alias = "Q8_0"))]
    Q8_0,
    #[cfg_attr(feature = "clap", value(name = "q6_k", alias = "Q6_K"))]
    Q6K,
    #[cfg_attr(feature = "clap", value(name = "q5_k_m", alias = "Q5_K_M"))]
    Q5KM,
    #[cfg_attr(feature = "clap", value(name = "q4_k_m", alias = "Q4_K_M"))]
    Q4KM,
    #[cfg_attr(feature = "clap", value(name = "q4_0", alias = "Q4_0"))]
    Q4_0,
}

impl FileType {
    /// The name llama.cpp and GGUF file names use.
    pub fn name(self) -> &'static str {
        match self {
            FileType::F16 => "F16",
            FileType::Q8_0 => "Q8_0",
            FileType::Q6K => "Q6_K",
            FileType::Q5KM => "Q5_K_M",
            FileType::Q4KM => "Q4_K_M",
            FileType::Q4_0 => "Q4_0",
        }
    }
}

/// The engine's knobs (llama-server's flags).
#[derive(Clone, Debug, Serialize)]
pub struct Args {
    /// `-c`: context cells (before padding); 0 = the model's.
    pub n_ctx: u64,
    /// `-ngl`: layers on the GPU, the output layer counted (n_layer + 1 = all).
    pub n_gpu_layers: u64,
    /// `-fa on|off` (auto resolves to on where CUDA has the kernels).
    pub flash_attn: bool,
    /// `--cache-type-k`.
    pub cache_type_k: CacheType,
    /// `--cache-type-v`.
    pub cache_type_v: CacheType,
    /// `-b`.
    pub n_batch: u64,
    /// `-ub`.
    pub n_ubatch: u64,
    /// `-np`: `None` is llama-server's auto ([`AUTO_SLOTS`] slots, one
    /// unified cache); `Some(n)` splits the cache into n streams.
    pub n_parallel: Option<u64>,
}

/// A model as llama.cpp loads it: its shape and its tensors.
#[derive(Clone, Debug)]
pub struct Model {
    /// The architecture (heads, layers, vocabulary, sliding window).
    pub cfg: ModelConfig,
    /// Every tensor with its stored size.
    pub tensors: Vec<GgufTensor>,
    /// `n_ctx_train` (the GGUF `context_length`).
    pub n_ctx_train: u64,
    /// V head size (GGUF `attention.value_length`, else the K head size).
    pub head_dim_v: u64,
    /// What `-m` names in the printed commands.
    pub file: String,
}

impl Model {
    /// Blocks (repeating layers).
    pub fn n_layer(&self) -> u64 {
        self.cfg.layers
    }
    /// `-ngl` that puts everything on the GPU.
    pub fn all_layers(&self) -> u64 {
        self.cfg.layers.saturating_add(1)
    }
}

/// Where a tensor lives in llama.cpp's layer placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Input,
    Block(u64),
    Output,
}

fn slot(name: &str) -> Slot {
    if let Some(rest) = name.strip_prefix("blk.")
        && let Some(i) = rest.split('.').next().and_then(|n| n.parse().ok())
    {
        return Slot::Block(i);
    }
    // The input layer: token, position and token-type embeddings
    // (`LLM_TENSOR_TOKEN_EMBD`, `POS_EMBD`, `TOKEN_TYPES`, `per_layer_token_embd`).
    if name.starts_with("token_embd")
        || name.starts_with("position_embd")
        || name.starts_with("token_types")
        || name.starts_with("per_layer_token_embd")
    {
        return Slot::Input;
    }
    Slot::Output
}

/// The buffers llama.cpp allocates, in bytes.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `CUDA0 model buffer size`.
    pub model_gpu_bytes: Bytes,
    /// The weights left in host memory (`CPU_Mapped model buffer`).
    pub model_cpu_bytes: Bytes,
    /// `CUDA0 KV buffer size` (K and V of the layers on the GPU).
    pub kv_gpu_bytes: Bytes,
    /// KV of the layers left on the CPU.
    pub kv_cpu_bytes: Bytes,
    /// All K (`K (f16): X MiB` in `llama_kv_cache: size = …`).
    pub k_bytes: Bytes,
    /// All V.
    pub v_bytes: Bytes,
    /// `CUDA0 compute buffer size`.
    pub compute_gpu_bytes: Bytes,
    /// `CUDA_Host compute buffer size` (pinned host memory).
    pub compute_host_bytes: Bytes,
    /// CUDA context, cuBLAS and pool ([`OVERHEAD_BYTES`]), plus the f16 copy
    /// of one layer's quantized K/V that the CUDA flash-attention kernel
    /// converts into the pool.
    pub overhead_bytes: Bytes,
    /// Everything on the GPU.
    pub gpu_total_bytes: Bytes,
    /// Context cells after padding (all slots).
    pub n_ctx: u64,
    /// Cells one slot can reach (`n_ctx_seq`).
    pub n_ctx_seq: u64,
    /// Server slots.
    pub n_parallel: u64,
    /// `-ngl` as given (n_layer + 1 = all).
    pub n_gpu_layers: u64,
    /// Blocks on the GPU.
    pub blocks_on_gpu: u64,
    /// The output layer (head and final norm) is on the GPU.
    pub output_on_gpu: bool,
    /// Physical batch used by the worst-case graph.
    pub n_ubatch: u64,
    /// Flash attention.
    pub flash_attn: bool,
    /// `llama-server` with these flags.
    pub command: String,
}

/// Cells of a sliding-window layer's cache per stream
/// (`llama-kv-cache-iswa.cpp`: `GGML_PAD(std::min(size_base,
/// hparams.n_swa*(unified ? n_seq_max : 1) + n_ubatch), 256)`).
fn swa_cells(seq_cells: u64, window: u64, seqs: u64, ubatch: u64) -> u64 {
    seq_cells.min(pad(window.saturating_mul(seqs).saturating_add(ubatch)))
}

/// The cache layout for `n_ctx` padded cells: (streams, cells per stream,
/// sequences sharing a stream's sliding window).
fn layout(n_ctx: u64, a: &Args) -> (u64, u64, u64) {
    match a.n_parallel {
        None => (1, n_ctx, AUTO_SLOTS),
        Some(n) => {
            let n = n.max(1);
            (n, pad(n_ctx / n), 1)
        }
    }
}

/// K and V elements per token per layer: `n_embd_k_gqa = n_head_kv ·
/// head_dim_k`, `n_embd_v_gqa = n_head_kv · head_dim_v`; MLA models
/// (DeepSeek-V2/V3) cache the compressed latent and the rope part as K and
/// no separate V.
fn kv_widths(m: &Model) -> (u64, u64) {
    match &m.cfg.mla {
        Some(mla) => (mla.kv_lora_rank.saturating_add(mla.rope_dim), 0),
        None => (
            m.cfg.kv_heads.saturating_mul(m.cfg.head_dim),
            m.cfg.kv_heads.saturating_mul(m.head_dim_v),
        ),
    }
}

/// The context after `-c 0` and the 256-cell padding.
pub fn effective_ctx(m: &Model, a: &Args) -> u64 {
    let c = if a.n_ctx == 0 { m.n_ctx_train } else { a.n_ctx };
    pad(c)
}

/// `GGML_PAD(x, 256)` for x ≥ 1, saturating (a hostile header's context
/// length never wraps).
fn pad(x: u64) -> u64 {
    x.max(1).div_ceil(CTX_PAD).saturating_mul(CTX_PAD)
}

/// The physical batch of the worst-case graph: `n_ubatch = min(n_batch,
/// n_ubatch)` (`llama_context`), and never more tokens than cells.
pub fn ubatch(a: &Args, n_ctx: u64) -> u64 {
    a.n_ubatch.min(a.n_batch).min(n_ctx).max(1)
}

/// The peak of the compute buffer (f32 intermediates, ggml-alloc reusing
/// freed tensors; T = n_ubatch tokens, E = n_embd, V = n_vocab, H = heads,
/// n_kv = the context's cells):
/// - the output layer: the logits T·V plus the final normed hidden state
///   T·E (every row is an output in the worst-case graph). Real logs:
///   Qwen2.5-3B (V = 151,936, E = 2048) prints 300.75 MiB = 512·(151,936 +
///   2048)·4 B, TriLM (V = 50,688, E = 3072) 105.00 MiB, Llama 3 8B 258.50
///   MiB (`tests/llamacpp_logs.json`);
/// - attention without flash attention: the scores KQ = n_kv·T·H·4 B — "the
///   `K*Q` tensor … of size n_ctx x n_ubatch x n_head x sizeof(float). One
///   also needs softmax(K*Q) (of the same size), but the back-end is
///   fortunately clever enough to reuse the same buffer" (ikawrakow,
///   ik_llama.cpp PR #237) — plus the mask copied to the GPU (n_kv·T·4 B)
///   and four T·E rows beside them (the layer input, Q, the attention
///   output and its projection). Mistral-7B without flash attention prints
///   164.00 MiB at `-c 2048` and 2144.00 MiB at `-c 32768`: 128 + 4 + 32 and
///   2048 + 64 + 32 (fedora-copr/logdetective PR #106);
/// - attention with flash attention: no scores; the f16 mask (n_kv·T·2 B)
///   and the same four T·E rows;
/// - the feed-forward: gate and up (2·T·n_ff) beside the input and output
///   (2·T·E).
///
/// The output-layer term counts only where the output layer runs on the
/// GPU; the block terms whenever a block does.
pub fn compute_bytes(m: &Model, a: &Args, n_ctx: u64, output_on_gpu: bool) -> u64 {
    let t = ubatch(a, n_ctx);
    let e = m.cfg.hidden;
    let f32b = 4u64;
    let row = t.saturating_mul(f32b);
    let out = row.saturating_mul(m.cfg.vocab.saturating_add(e));
    let rows = row.saturating_mul(4 * e);
    let attn = if a.flash_attn {
        n_ctx
            .saturating_mul(t)
            .saturating_mul(2)
            .saturating_add(rows)
    } else {
        row.saturating_mul(n_ctx)
            .saturating_mul(m.cfg.heads.saturating_add(1))
            .saturating_add(rows)
    };
    let ff_width = match &m.cfg.moe {
        Some(moe) => moe.intermediate.saturating_mul(moe.active.max(1)),
        None => m.cfg.intermediate,
    };
    let ffn = row.saturating_mul(ff_width.saturating_mul(2).saturating_add(2 * e));
    let blocks = attn.max(ffn);
    if output_on_gpu {
        blocks.max(out)
    } else {
        blocks
    }
}

/// The host-side compute buffer: the input embeddings (T·E f32) and the
/// attention mask (n_kv·T, f32; f16 with flash attention). Qwen2.5-3B at
/// `-c 4096` without flash attention prints 12.01 MiB = 4 + 8 MiB.
pub fn compute_host_bytes(m: &Model, a: &Args, n_ctx: u64) -> u64 {
    let t = ubatch(a, n_ctx);
    let mask = if a.flash_attn { 2 } else { 4 };
    t.saturating_mul(m.cfg.hidden)
        .saturating_mul(4)
        .saturating_add(n_ctx.saturating_mul(t).saturating_mul(mask))
}

/// Every buffer for `a` (see the module docs for the rules and sources).
pub fn buffers(m: &Model, a: &Args) -> Report {
    let n_layer = m.n_layer();
    let ngl = a.n_gpu_layers.min(m.all_layers());
    let i_gpu_start = m.all_layers().saturating_sub(ngl);
    // The output layer is `il = n_layer`: on the GPU as soon as ngl ≥ 1.
    let output_on_gpu = ngl > 0;
    let blocks_on_gpu = n_layer.saturating_sub(i_gpu_start.min(n_layer));
    let (mut gpu, mut cpu) = (0u64, 0u64);
    let tied = !m.tensors.iter().any(|t| t.name == "output.weight");
    for t in &m.tensors {
        let here = match slot(&t.name) {
            Slot::Input => false,
            Slot::Block(i) => i >= i_gpu_start,
            Slot::Output => output_on_gpu,
        };
        if here {
            gpu = gpu.saturating_add(t.bytes);
        } else {
            cpu = cpu.saturating_add(t.bytes);
        }
        // Tied embeddings: the output layer loads token_embd a second time
        // (on the CPU it is the same mapping, no second copy).
        if tied && output_on_gpu && t.name == "token_embd.weight" {
            gpu = gpu.saturating_add(t.bytes);
        }
    }
    let (streams, seq, swa_seqs) = layout(effective_ctx(m, a), a);
    // llama.cpp resets n_ctx to n_ctx_seq × n_seq_max when they differ.
    let n_ctx = seq.saturating_mul(streams);
    let t = ubatch(a, seq);
    let (wk, wv) = kv_widths(m);
    let swa_layers = match m.cfg.sliding_window {
        Some(_) => m.cfg.sliding_layers.min(n_layer),
        None => 0,
    };
    let cells_swa = m
        .cfg
        .sliding_window
        .map_or(seq, |w| swa_cells(seq, w, swa_seqs, t));
    // Sliding-window layers are spread through the stack (Gemma-2: every
    // other layer, Gemma-3: five of six); the GPU's share of them follows
    // its share of the blocks.
    let swa_gpu = swa_layers
        .saturating_mul(blocks_on_gpu)
        .checked_div(n_layer)
        .unwrap_or(0);
    let per_layer = |cells: u64| {
        (
            a.cache_type_k
                .bytes(cells.saturating_mul(wk))
                .saturating_mul(streams),
            a.cache_type_v
                .bytes(cells.saturating_mul(wv))
                .saturating_mul(streams),
        )
    };
    let (kf, vf) = per_layer(seq);
    let (ks, vs) = per_layer(cells_swa);
    let kv = |full: u64, swa: u64| {
        (kf.saturating_add(vf))
            .saturating_mul(full)
            .saturating_add(ks.saturating_add(vs).saturating_mul(swa))
    };
    let full_layers = n_layer - swa_layers;
    let full_gpu = blocks_on_gpu.saturating_sub(swa_gpu);
    let kv_gpu = kv(full_gpu, swa_gpu);
    let kv_all = kv(full_layers, swa_layers);
    let k_bytes = kf
        .saturating_mul(full_layers)
        .saturating_add(ks.saturating_mul(swa_layers));
    let v_bytes = vf
        .saturating_mul(full_layers)
        .saturating_add(vs.saturating_mul(swa_layers));
    let compute = compute_bytes(m, a, seq, output_on_gpu);
    // CUDA's flash attention converts a quantized K or V view (one layer,
    // n_ctx cells) to f16 in the CUDA pool before its prompt kernels
    // (`ggml/src/ggml-cuda/fattn-common.cuh` `launch_fattn`:
    // `K_f16.alloc(ggml_nelements(K))`); the pool keeps its peak.
    let dequant = if a.flash_attn && (a.cache_type_k.quantized() || a.cache_type_v.quantized()) {
        seq.saturating_mul(wk.saturating_add(wv)).saturating_mul(2)
    } else {
        0
    };
    let overhead = OVERHEAD_BYTES.saturating_add(dequant);
    let total = gpu
        .saturating_add(kv_gpu)
        .saturating_add(compute)
        .saturating_add(overhead);
    Report {
        model_gpu_bytes: Bytes(gpu),
        model_cpu_bytes: Bytes(cpu),
        kv_gpu_bytes: Bytes(kv_gpu),
        kv_cpu_bytes: Bytes(kv_all.saturating_sub(kv_gpu)),
        k_bytes: Bytes(k_bytes),
        v_bytes: Bytes(v_bytes),
        compute_gpu_bytes: Bytes(compute),
        compute_host_bytes: Bytes(compute_host_bytes(m, a, seq)),
        overhead_bytes: Bytes(overhead),
        gpu_total_bytes: Bytes(total),
        n_ctx,
        n_ctx_seq: seq,
        n_parallel: a.n_parallel.unwrap_or(AUTO_SLOTS),
        n_gpu_layers: ngl,
        blocks_on_gpu,
        output_on_gpu,
        n_ubatch: t,
        flash_attn: a.flash_attn,
        command: command(m, a, n_ctx, ngl),
    }
}

/// `llama-server` with the flags that decide the buffers (spellings from
/// `common/arg.cpp`: `-c`, `-ngl`, `-fa on|off`, `--cache-type-k/-v`, `-ub`,
/// `-b`, `-np`).
pub fn command(m: &Model, a: &Args, n_ctx: u64, ngl: u64) -> String {
    let mut c = format!(
        "llama-server -m {} -c {n_ctx} -ngl {ngl} -fa {}",
        m.file,
        if a.flash_attn { "on" } else { "off" }
    );
    if a.cache_type_k != CacheType::F16 {
        c += &format!(" --cache-type-k {}", a.cache_type_k.name());
    }
    if a.cache_type_v != CacheType::F16 {
        c += &format!(" --cache-type-v {}", a.cache_type_v.name());
    }
    if a.n_batch != DEFAULT_BATCH {
        c += &format!(" -b {}", a.n_batch);
    }
    if a.n_ubatch != DEFAULT_UBATCH {
        c += &format!(" -ub {}", a.n_ubatch);
    }
    if let Some(n) = a.n_parallel {
        c += &format!(" -np {n}");
    }
    c
}

/// The verdict on a GPU and the plans.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// Everything fits in `usable_bytes`.
    pub fits: bool,
    /// The GPU's usable memory.
    pub usable_bytes: Bytes,
    /// usable − needed (negative: missing).
    pub headroom_bytes: i64,
    /// The largest `-c` (a multiple of 256, at most the model's context)
    /// that fits with the given `-ngl`, and its buffers.
    pub max_ctx: Option<Report>,
    /// The largest `-ngl` that fits at the given context, when not every
    /// layer does, and its buffers.
    pub max_ngl: Option<Report>,
    /// `-c` and `-ngl` lowered together: the largest `-ngl` at
    /// [`WORKING_CTX`], when the context asked for is longer, lowering `-c`
    /// alone does not reach [`WORKING_CTX`], and it keeps more layers on the
    /// GPU than [`Plan::max_ngl`].
    pub together: Option<Report>,
}

/// The context a plan that lowers `-c` and `-ngl` together keeps: 8192
/// tokens, twice llama.cpp's `n_ctx` default of 4096 (`common/common.h`) and
/// what most chat turns fit in.
pub const WORKING_CTX: u64 = 8192;

/// Checks `a` against `usable` memory and searches the largest context and
/// the largest `-ngl` that fit. Both are monotone (more cells or more
/// layers never need less memory), so a bisection finds them.
pub fn plan(m: &Model, a: &Args, usable: Bytes) -> Plan {
    let r = buffers(m, a);
    let fits = r.gpu_total_bytes <= usable;
    let headroom = i64::try_from(usable.get())
        .unwrap_or(i64::MAX)
        .saturating_sub(i64::try_from(r.gpu_total_bytes.get()).unwrap_or(i64::MAX));
    let with_ctx = |cells: u64| {
        buffers(
            m,
            &Args {
                n_ctx: cells,
                ..a.clone()
            },
        )
    };
    let top = m.n_ctx_train.max(CTX_PAD).div_ceil(CTX_PAD);
    let max_ctx = largest(1, top, |k| {
        with_ctx(k.saturating_mul(CTX_PAD)).gpu_total_bytes <= usable
    })
    .map(|k| with_ctx(k.saturating_mul(CTX_PAD)));
    let with_ngl = |n: u64| {
        buffers(
            m,
            &Args {
                n_gpu_layers: n,
                n_ctx: r.n_ctx,
                ..a.clone()
            },
        )
    };
    let max_ngl = if fits {
        None
    } else {
        largest(0, m.all_layers(), |n| with_ngl(n).gpu_total_bytes <= usable).map(with_ngl)
    };
    let together =
        if !fits && r.n_ctx > WORKING_CTX && max_ctx.as_ref().is_none_or(|c| c.n_ctx < WORKING_CTX)
        {
            let at = |n: u64| {
                buffers(
                    m,
                    &Args {
                        n_gpu_layers: n,
                        n_ctx: WORKING_CTX,
                        ..a.clone()
                    },
                )
            };
            largest(0, m.all_layers(), |n| at(n).gpu_total_bytes <= usable)
                .map(at)
                .filter(|t| {
                    max_ngl
                        .as_ref()
                        .is_none_or(|n| t.n_gpu_layers > n.n_gpu_layers)
                })
        } else {
            None
        };
    Plan {
        fits,
        usable_bytes: usable,
        headroom_bytes: headroom,
        max_ctx,
        max_ngl,
        together,
    }
}

/// The largest `k` in `lo..=hi` with `ok(k)`, for a monotone `ok`.
fn largest(lo: u64, hi: u64, ok: impl Fn(u64) -> bool) -> Option<u64> {
    if lo > hi || !ok(lo) {
        return None;
    }
    let (mut good, mut bad) = (lo, hi.saturating_add(1));
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if ok(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(good)
}

/// The tensors llama-quantize writes for `cfg` at file type `ft`, without a
/// GGUF file: the shapes from the architecture (`llama.cpp`'s tensor names)
/// and the types from `src/llama-quant.cpp` `llama_tensor_get_type`:
/// - norms and other 1-D tensors stay F32;
/// - `output.weight` is Q6_K for the k-quant and Q4_0 types (Q8_0 for Q8_0,
///   F16 for F16);
/// - Q4_K_M and Q5_K_M give `attn_v` and `ffn_down` Q6_K in the layers
///   `use_more_bits` picks (the first and last eighth of the layers and
///   every third in between), Q4_K/Q5_K elsewhere; `token_embd` takes the
///   base type, or the head's when the head is tied.
///
/// Checked against real files (unit tests): Qwen2.5-14B Q4_K_M prints
/// `type f32: 241`, `type q4_K: 289`, `type q6_K: 49` and 8.37 GiB
/// (gpustack/gpustack#1681) — the same counts; Llama 3.1 70B Q4_0 37.22 GiB
/// (ollama/ollama#6279); Mistral-7B-Instruct-v0.2 Q4_K_M 4.37 GB and Q8_0
/// 7.70 GB (TheBloke's model card) — each within 1 %.
///
/// Dense llama-style blocks only (q, k, v, o, gate, up, down); a MoE's
/// experts get the base type.
pub fn synthetic_tensors(cfg: &ModelConfig, ft: FileType) -> Vec<GgufTensor> {
    let base: (&'static str, u64, u64) = match ft {
        FileType::F16 => ("F16", 2, 1),
        FileType::Q8_0 => ("Q8_0", 34, 32),
        FileType::Q6K => ("Q6_K", 210, 256),
        FileType::Q5KM => ("Q5_K", 176, 256),
        FileType::Q4KM => ("Q4_K", 144, 256),
        FileType::Q4_0 => ("Q4_0", 18, 32),
    };
    let q6k: (&'static str, u64, u64) = ("Q6_K", 210, 256);
    let f32t: (&'static str, u64, u64) = ("F32", 4, 1);
    let head = match ft {
        FileType::F16 | FileType::Q8_0 => base,
        _ => q6k,
    };
    let more_bits = |i: u64, n: u64| i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
    let mixed = matches!(ft, FileType::Q4KM | FileType::Q5KM);
    let mut out = Vec::new();
    let mut push = |name: String, elems: u64, ty: (&'static str, u64, u64)| {
        // k-quants need rows that are whole 256-blocks; llama-quantize falls
        // back to a 32-block type otherwise (`llama_tensor_get_type`'s
        // "fallback" branch: Q5_0/Q5_1/Q8_0); a row of width 256k never does.
        out.push(GgufTensor {
            name,
            ggml_type: ty.0,
            elements: elems,
            bytes: elems.div_ceil(ty.2).saturating_mul(ty.1),
        });
    };
    let e = cfg.hidden;
    let v = cfg.vocab;
    // A tied head: llama-quantize treats `token_embd` as the output tensor
    // (`!qs.has_output && name == token_embd`), so it gets the head's type.
    push(
        "token_embd.weight".into(),
        e.saturating_mul(v),
        if cfg.tied_embeddings { head } else { base },
    );
    push("output_norm.weight".into(), e, f32t);
    if !cfg.tied_embeddings {
        push("output.weight".into(), e.saturating_mul(v), head);
    }
    let n = cfg.layers;
    for i in 0..n {
        for (hf, fan_in, fan_out, count) in cfg.layer_linears(i) {
            let elems = fan_in.saturating_mul(fan_out).saturating_mul(count);
            // llama.cpp's tensor names (`LLM_TENSOR_NAMES`).
            let name = match hf {
                "q_proj" => "attn_q",
                "k_proj" => "attn_k",
                "v_proj" => "attn_v",
                "o_proj" => "attn_output",
                "gate_proj" => "ffn_gate",
                "up_proj" => "ffn_up",
                "down_proj" => "ffn_down",
                "router" => "ffn_gate_inp",
                other => other,
            };
            let hot = mixed && more_bits(i, n) && (name == "attn_v" || name == "ffn_down");
            push(
                format!("blk.{i}.{name}.weight"),
                elems,
                if hot { q6k } else { base },
            );
            // Biases stay F32: every linear's where the architecture has
            // them, q/k/v only for Qwen2 (`LLM_ARCH_QWEN2`'s `attn_q.bias` …).
            let qkv = matches!(name, "attn_q" | "attn_k" | "attn_v");
            let qwen2 = cfg.model_type == crate::arch::Arch::Qwen2;
            if (qwen2 && qkv) || (cfg.bias && !qwen2) {
                push(format!("blk.{i}.{name}.bias"), fan_out, f32t);
            }
        }
        for norm in ["attn_norm", "ffn_norm"] {
            push(format!("blk.{i}.{norm}.weight"), e, f32t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;

    fn args() -> Args {
        Args {
            n_ctx: 0,
            n_gpu_layers: u64::MAX,
            flash_attn: true,
            cache_type_k: CacheType::F16,
            cache_type_v: CacheType::F16,
            n_batch: DEFAULT_BATCH,
            n_ubatch: DEFAULT_UBATCH,
            n_parallel: None,
        }
    }

    fn model(id: &str, ft: FileType) -> Model {
        let cfg = catalogue::find(id).expect("model");
        Model {
            tensors: synthetic_tensors(&cfg, ft),
            n_ctx_train: cfg.max_positions.unwrap_or(FALLBACK_CTX_TRAIN),
            head_dim_v: cfg.head_dim,
            file: "m.gguf".into(),
            cfg,
        }
    }

    #[test]
    fn cache_type_sizes_are_ggml_blocks() {
        assert_eq!(CacheType::F16.bytes(64), 128);
        assert_eq!(CacheType::Q8_0.bytes(64), 68);
        assert_eq!(CacheType::Q4_0.bytes(64), 36);
        assert_eq!(CacheType::Q5_1.bytes(32), 24);
        assert!(CacheType::Iq4Nl.quantized() && !CacheType::Bf16.quantized());
    }

    /// Llama-3.1-8B, f16 cache: 32 layers × 8 KV heads × 128 × 2 B × 2 =
    /// 128 KiB per cell; 8192 cells = 1 GiB; q8_0 is 34/64 of it.
    #[test]
    fn kv_cache_per_cell() {
        let m = model("meta-llama/Llama-3.1-8B", FileType::Q4KM);
        let a = Args {
            n_ctx: 8192,
            ..args()
        };
        let r = buffers(&m, &a);
        assert_eq!(r.kv_gpu_bytes, Bytes::gib(1));
        assert_eq!(r.k_bytes, r.v_bytes);
        let q = buffers(
            &m,
            &Args {
                cache_type_k: CacheType::Q8_0,
                cache_type_v: CacheType::Q8_0,
                ..a.clone()
            },
        );
        assert_eq!(q.kv_gpu_bytes, Bytes((1u64 << 30) / 64 * 34));
        // -c 0: the model's context (131,072 for Llama 3.1), padded to 256.
        assert_eq!(buffers(&m, &args()).n_ctx, 131_072);
        assert_eq!(
            buffers(
                &m,
                &Args {
                    n_ctx: 35_000,
                    ..args()
                }
            )
            .n_ctx,
            35_072
        );
    }

    /// `-ngl k`: the output layer first, then the last k − 1 blocks; the
    /// input embedding never.
    #[test]
    fn partial_offload_places_layers_from_the_top() {
        let m = model("meta-llama/Llama-3.1-8B", FileType::Q4KM);
        let all = buffers(&m, &args());
        assert!(all.output_on_gpu && all.blocks_on_gpu == 32);
        let embd = m
            .tensors
            .iter()
            .find(|t| t.name == "token_embd.weight")
            .expect("embd")
            .bytes;
        assert_eq!(all.model_cpu_bytes, Bytes(embd));
        let one = buffers(
            &m,
            &Args {
                n_gpu_layers: 1,
                ..args()
            },
        );
        assert!(one.output_on_gpu && one.blocks_on_gpu == 0);
        let ten = buffers(
            &m,
            &Args {
                n_gpu_layers: 10,
                ..args()
            },
        );
        assert_eq!(ten.blocks_on_gpu, 9);
        assert_eq!(ten.kv_gpu_bytes.get() * 32, all.kv_gpu_bytes.get() * 9);
        let none = buffers(
            &m,
            &Args {
                n_gpu_layers: 0,
                ..args()
            },
        );
        assert_eq!(
            (none.model_gpu_bytes, none.kv_gpu_bytes),
            (Bytes::ZERO, Bytes::ZERO)
        );
        assert!(ten.model_gpu_bytes < all.model_gpu_bytes);
    }

    /// Without flash attention the scores grow with the context: 32 heads ×
    /// 512 tokens × 8192 cells × 4 B = 512 MiB for Llama-3.1-8B, plus the
    /// mask and four rows; with it the logits (128,256 + 4096) × 512 × 4 B =
    /// 258.5 MiB dominate.
    #[test]
    fn compute_buffer_with_and_without_flash_attention() {
        let m = model("meta-llama/Llama-3.1-8B", FileType::Q4KM);
        let a = Args {
            n_ctx: 8192,
            ..args()
        };
        let fa = buffers(&m, &a).compute_gpu_bytes.get();
        assert_eq!(fa, 512 * (128_256 + 4096) * 4);
        let no = buffers(
            &m,
            &Args {
                flash_attn: false,
                ..a
            },
        )
        .compute_gpu_bytes
        .get();
        assert_eq!(no, (512u64 << 20) + 8192 * 512 * 4 + 4 * 512 * 4096 * 4);
    }

    /// Q4_K_M from the mix: Mistral-7B-Instruct-v0.2's Q4_K_M file is
    /// 4.37 GB (TheBloke/Mistral-7B-Instruct-v0.2-GGUF model card,
    /// https://huggingface.co/TheBloke/Mistral-7B-Instruct-v0.2-GGUF), its
    /// Q8_0 7.70 GB; the tensors are all but a few MiB of header.
    #[test]
    fn k_quant_mix_matches_published_file_sizes() {
        for (ft, gb) in [(FileType::Q4KM, 4.37), (FileType::Q8_0, 7.70)] {
            let m = model("mistralai/Mistral-7B-Instruct-v0.2", ft);
            let total: u64 = m.tensors.iter().map(|t| t.bytes).sum();
            let got = total as f64 / 1e9;
            assert!((got - gb).abs() / gb < 0.01, "{ft:?}: {got} GB vs {gb}");
        }
    }

    /// Type counts and size of a real Q4_K_M file: Qwen2.5-14B in
    /// https://github.com/gpustack/gpustack/issues/1681 prints
    /// `type  f32:  241 tensors`, `type q4_K:  289 tensors`,
    /// `type q6_K:   49 tensors`, `file size   = 8.37 GiB (4.87 BPW)`.
    #[test]
    fn q4_k_m_mix_matches_a_real_files_type_counts() {
        let m = model("Qwen/Qwen2.5-14B", FileType::Q4KM);
        let count = |ty: &str| m.tensors.iter().filter(|t| t.ggml_type == ty).count();
        assert_eq!((count("F32"), count("Q4_K"), count("Q6_K")), (241, 289, 49));
        let gib = m.tensors.iter().map(|t| t.bytes).sum::<u64>() as f64 / (1u64 << 30) as f64;
        assert!((gib - 8.37).abs() / 8.37 < 0.01, "{gib} GiB");
    }

    /// `-np`: auto shares one cache; `-np 3` splits `-c 10000` into 3
    /// streams of pad(3333, 256) = 3584 cells. Gemma-2's sliding layers keep
    /// min(cells, pad(4096 · seqs + 512, 256)).
    #[test]
    fn parallel_slots_and_sliding_window() {
        let m = model("meta-llama/Llama-3.1-8B", FileType::Q4KM);
        let three = buffers(
            &m,
            &Args {
                n_ctx: 10_000,
                n_parallel: Some(3),
                ..args()
            },
        );
        assert_eq!((three.n_ctx_seq, three.n_ctx), (3584, 3 * 3584));
        assert_eq!(three.kv_gpu_bytes, Bytes(3 * 3584 * (128 << 10)));
        assert!(three.command.ends_with("-np 3"));
        let g = model("google/gemma-2-9b", FileType::Q4KM);
        assert_eq!((g.cfg.layers, g.cfg.sliding_layers), (42, 21));
        let per_cell = 2 * 8 * 256 * 2; // K and V, 8 KV heads of 256, f16
        let at = |n_parallel| {
            buffers(
                &g,
                &Args {
                    n_ctx: 32_768,
                    n_parallel,
                    ..args()
                },
            )
            .kv_gpu_bytes
            .get()
        };
        // auto: 4 slots share the window: pad(4 · 4096 + 512) = 16,896 cells.
        assert_eq!(at(None), 21 * per_cell * (32_768 + 16_896));
        // -np 1: one sequence, pad(4096 + 512) = 4608 cells.
        assert_eq!(at(Some(1)), 21 * per_cell * (32_768 + 4608));
    }

    /// Numbers from a hostile header never wrap or panic.
    #[test]
    fn extreme_values_saturate() {
        let mut m = model("google/gemma-2-9b", FileType::Q4KM);
        m.n_ctx_train = u64::MAX;
        m.cfg.sliding_window = Some(u64::MAX);
        for n_parallel in [None, Some(1), Some(u64::MAX)] {
            let a = Args {
                n_parallel,
                n_ubatch: u64::MAX,
                n_batch: u64::MAX,
                ..args()
            };
            let r = buffers(&m, &a);
            assert!(r.gpu_total_bytes >= r.kv_gpu_bytes);
            let p = plan(&m, &a, Bytes::gib(24));
            assert!(!p.fits);
        }
    }

    /// Q4_0: Llama 3.1 70B Instruct prints `model size = 37.22 GiB (4.53
    /// BPW)` (https://github.com/ollama/ollama/pull/6279).
    #[test]
    fn q4_0_mix_matches_a_real_files_size() {
        let m = model("meta-llama/Llama-3.1-70B", FileType::Q4_0);
        let gib = m.tensors.iter().map(|t| t.bytes).sum::<u64>() as f64 / (1u64 << 30) as f64;
        assert!((gib - 37.22).abs() / 37.22 < 0.005, "{gib} GiB");
    }

    #[test]
    fn plans_find_the_largest_context_and_layers() {
        let m = model("meta-llama/Llama-3.1-8B", FileType::Q4KM);
        let usable = Bytes::mib(16_000);
        let p = plan(&m, &args(), usable);
        // 131,072 cells of f16 cache are 16 GiB on top of 4.6 GiB of weights.
        assert!(!p.fits && p.headroom_bytes < 0);
        let c = p.max_ctx.expect("a context fits");
        assert!(c.gpu_total_bytes <= usable && c.n_ctx.is_multiple_of(CTX_PAD));
        let next = buffers(
            &m,
            &Args {
                n_ctx: c.n_ctx + CTX_PAD,
                ..args()
            },
        );
        assert!(next.gpu_total_bytes > usable);
        let n = p.max_ngl.expect("some layers fit");
        assert!(n.n_gpu_layers < m.all_layers() && n.gpu_total_bytes <= usable);
        assert!(n.command.contains(&format!("-ngl {}", n.n_gpu_layers)));
        let small = plan(
            &m,
            &Args {
                n_ctx: 4096,
                ..args()
            },
            usable,
        );
        assert!(small.fits && small.max_ngl.is_none());
    }
}
