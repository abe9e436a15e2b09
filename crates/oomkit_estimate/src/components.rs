//! One small pure function per memory component. Formula references are to
//! `docs/reference/memory-estimation.md` (§3 is the consolidated formula
//! sheet); each function says which item it implements.

use crate::model::{ModelConfig, sat};
use crate::setup::{Attention, Method, Optimizer, Precision, Quant, Setup, Task};

/// Bits per quantized linear weight, including quantization constants
/// (§3.1): bnb NF4 stores one fp32 absmax per 64 weights (+0.5 bit); double
/// quantization stores it as 8 bits plus one fp32 per 256 blocks (+0.127);
/// GPTQ/AWQ group 128 stores an fp16 scale and zero per group (+0.25);
/// LLM.int8 and FP8 store one scale per row or tensor (negligible here, the
/// row scales are added by [`weights_bytes`]). MXFP4 (OCP Microscaling
/// spec v1.0: 32 FP4 E2M1 values share one 8-bit E8M0 scale; transformers'
/// `Mxfp4GptOssExperts` stores `*_blocks` as two values per uint8 and
/// `*_scales` as one uint8 per 32) is 4 + 8/32 = 4.25 bits.
pub fn quant_bits_x1000(q: Quant) -> u64 {
    match q {
        Quant::None => 16_000,
        Quant::Int8 | Quant::Fp8 => 8_000,
        Quant::Nf4 => 4_500,
        Quant::Nf4Dq => 4_127,
        Quant::Int4 | Quant::Mxfp4 => 4_250,
    }
}

/// Trainable adapter parameters: r·(in + out) per adapted linear (LoRA
/// paper §4.1), for every matching linear of every layer.
pub fn lora_params(cfg: &ModelConfig, s: &Setup) -> u64 {
    sat(lora_params_wide(cfg, s))
}

/// [`lora_params`] in 128 bits (what setup validation bounds).
pub fn lora_params_wide(cfg: &ModelConfig, s: &Setup) -> u128 {
    cfg.sum_layers(0, cfg.layers, |i| {
        cfg.layer_linears(i)
            .into_iter()
            .filter(|(name, ..)| s.lora_targets.matches(name))
            .map(|(_, a, b, n)| u128::from(s.lora_rank) * u128::from(a + b) * u128::from(n))
            .sum()
    })
}

/// Parameters that receive gradients and optimizer state.
pub fn trainable_params(cfg: &ModelConfig, s: &Setup) -> u64 {
    match (s.task, s.method) {
        (Task::Infer, _) => 0,
        (Task::Train, Method::Full) => cfg.params(),
        (Task::Train, _) => lora_params(cfg, s),
    }
}

/// Weights on the GPU (§3.1). Unquantized: P × bytes of the precision (fp32
/// for mixed precision, which keeps fp32 master weights as the model).
/// Quantized: the block linears at [`quant_bits_x1000`], embeddings, LM head
/// and norms in 16-bit (QLoRA Fig. 6: a 4-bit 7B takes 5 GB, not 3.5),
/// plus LoRA adapters at the precision's bytes when training adapters.
/// MXFP4 covers only the MoE experts' matrices (transformers
/// `integrations/mxfp4.py`: `replace_with_mxfp4_linear` swaps only
/// `GptOssExperts` for `Mxfp4GptOssExperts`, whose biases are fp32; gpt-oss's
/// `modules_to_not_convert` keeps attention, router, embeddings and LM head
/// in bf16), which is how gpt-oss-20b/120b weigh 12.8/60.8 GiB (gpt-oss
/// model card, arXiv 2508.10925, Table 1) and not a 4-bit total.
pub fn weights_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    quantized_weights_bytes(cfg, s).saturating_add(bnb_unquantized_experts_bytes(cfg, s))
}

/// [`weights_bytes`] as vLLM loads them: its bitsandbytes method quantizes
/// MoE experts too (`BitsAndBytesMoEMethod`).
pub fn vllm_weights_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    quantized_weights_bytes(cfg, s)
}

/// The weights with every block linear, MoE experts included, in the
/// chosen format.
fn quantized_weights_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let untied = litgpt_untied_head_params(cfg, s);
    let p = cfg.params().saturating_add(untied);
    let base = if let Some(ck) = cfg.checkpoint.as_ref().filter(|_| s.quant == Quant::None) {
        // Exact sizes from the safetensors headers: stored bytes for a
        // pre-quantized checkpoint, else every element at the precision.
        if ck.prequantized() {
            ck.bytes
        } else {
            ck.elements.saturating_add(untied) * s.precision.param_bytes()
        }
    } else if s.quant == Quant::None {
        p * s.precision.param_bytes()
    } else if s.quant == Quant::Mxfp4 {
        let (experts, expert_biases) = cfg.expert_params();
        experts * quant_bits_x1000(s.quant) / 8_000
            + expert_biases * 4
            + (p - experts - expert_biases) * 2
    } else {
        let lin = cfg.block_linear_params();
        let rows: u64 = if s.quant == Quant::Int8 {
            sat(cfg.sum_layers(0, cfg.layers, |i| {
                cfg.layer_linears(i)
                    .into_iter()
                    .map(|(_, _, out, n)| u128::from(out * n * 4))
                    .sum()
            }))
        } else {
            0
        };
        lin * quant_bits_x1000(s.quant) / 8_000 + rows + (p - lin) * unquantized_bytes(s)
    };
    let adapters = if s.task == Task::Train && s.method != Method::Full {
        lora_params(cfg, s) * trainable_bytes(s)
    } else {
        0
    };
    base + adapters
}

/// What bitsandbytes leaves in 16 bits under transformers 5 beyond what
/// [`weights_bytes`] quantizes: transformers' `replace_with_bnb_linear`
/// (integrations/bitsandbytes.py, 5.17) replaces only `nn.Linear`/`Conv1D`
/// modules, and transformers 5 stores an MoE layer's routed experts as fused
/// 3-D `nn.Parameter`s (`MixtralExperts`, `Qwen3MoeExperts`,
/// `DeepseekV3…Experts`: `gate_up_proj`, `down_proj`) and its router as a
/// parameter of its own module, so `load_in_4bit`/`load_in_8bit` (and QLoRA)
/// skip them silently (bitsandbytes#1849, open; PR #1965 proposes
/// `Experts4bit`). Shared experts are `nn.Linear` and are quantized. vLLM
/// quantizes MoE experts itself (`BitsAndBytesMoEMethod`): its serving
/// estimate uses [`vllm_weights_bytes`]. Zero for dense models and other
/// formats.
pub fn bnb_unquantized_experts_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let Some(m) = &cfg.moe else {
        return 0;
    };
    if !matches!(s.quant, Quant::Int8 | Quant::Nf4 | Quant::Nf4Dq) {
        return 0;
    }
    let w = u128::from;
    let moe_layers = w(cfg.layers.saturating_sub(m.dense_layers));
    let h = w(cfg.hidden);
    let f = w(m.intermediate);
    let mats = if cfg.glu { 3 } else { 2 };
    let routed = moe_layers * w(m.experts) * w(mats) * h * f;
    let router = moe_layers * w(m.experts) * h;
    // What weights_bytes counted for them, as for every block linear: the
    // quantized weights and, for LLM.int8, one fp32 scale per output row
    // (per expert gate and up f rows each, down h rows; the router one row
    // per expert).
    let out_rows = if cfg.glu { 2 * f + h } else { f + h };
    let row_scales = if s.quant == Quant::Int8 {
        moe_layers * w(m.experts) * (out_rows + 1) * 4
    } else {
        0
    };
    let counted = (routed + router) * w(quant_bits_x1000(s.quant)) / 8_000 + row_scales;
    let kept = (routed + router) * w(unquantized_bytes(s));
    sat(kept.saturating_sub(counted))
}

/// bitsandbytes 4-bit quantization state (`--quant nf4|nf4-dq`): the
/// blockwise absmax (fp32 per 64 weights, or uint8 with fp32 per 256 blocks
/// under double quantization) beyond the packed 4 bits, for every linear
/// bitsandbytes quantizes. It is held in a `QuantState` object on the module
/// (`Linear4bit.quant_state`), not in a parameter or buffer: FSDP flattens,
/// shards and offloads only the packed weight (`bnb_4bit_quant_storage`), and
/// bitsandbytes restores the state from the module in every forward
/// (bitsandbytes 0.49 `nn/modules.py`, `fix_4bit_weight_quant_state_from_module`:
/// "the quant state got lost when the parameter got converted. This happens
/// for example for fsdp"). So each GPU keeps all of it, CPU offload or not.
/// Zero for other formats.
pub fn bnb4_quant_state_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    if !matches!(s.quant, Quant::Nf4 | Quant::Nf4Dq) {
        return 0;
    }
    let quantized =
        u128::from(cfg.block_linear_params()).saturating_sub(bnb_skipped_expert_params(cfg));
    let extra = u128::from(quant_bits_x1000(s.quant).saturating_sub(4_000));
    sat(quantized * extra / 8_000)
}

/// The routed experts' and routers' elements of an MoE that bitsandbytes
/// leaves unquantized under transformers 5 ([`bnb_unquantized_experts_bytes`]).
fn bnb_skipped_expert_params(cfg: &ModelConfig) -> u128 {
    let Some(m) = &cfg.moe else {
        return 0;
    };
    let w = u128::from;
    let moe_layers = w(cfg.layers.saturating_sub(m.dense_layers));
    let mats = if cfg.glu { 3 } else { 2 };
    let routed = moe_layers * w(m.experts) * w(mats) * w(cfg.hidden) * w(m.intermediate);
    let router = moe_layers * w(m.experts) * w(cfg.hidden);
    routed + router
}

/// Bytes of each parameter a quantized load leaves unquantized (embeddings,
/// LM head, norms, biases; bitsandbytes' skipped MoE experts): the 16-bit
/// dtype, or fp32 after PEFT's `prepare_model_for_kbit_training`
/// ([`Setup::kbit_upcast`]).
fn unquantized_bytes(s: &Setup) -> u64 {
    if s.kbit_upcast { 4 } else { 2 }
}

/// Bytes per trainable parameter (and per gradient and AdamW state element):
/// the precision's for full training; fp32 for LoRA adapters, which PEFT
/// upcasts from fp16/bf16 by default (`autocast_adapter_dtype=True`, PEFT ≥ 0.12).
pub fn trainable_bytes(s: &Setup) -> u64 {
    if s.method == Method::Full {
        s.precision.param_bytes()
    } else {
        4
    }
}

/// Gradients (§3.2): one per trainable parameter, in the parameters' dtype
/// (fp32 under mixed precision, since autocast keeps fp32 parameters; fp32
/// for PEFT adapters).
pub fn gradients_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    trainable_params(cfg, s) * trainable_bytes(s)
}

/// Optimizer state (§3.3), on trainable parameters only: AdamW keeps m and v
/// in the parameter dtype (8 B fp32, 4 B pure bf16); bnb 8-bit AdamW 2 B;
/// SGD+momentum and Lion one state; Adafactor (HF defaults, no momentum) a
/// row and a column vector per matrix, fp32.
pub fn optimizer_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let t = trainable_params(cfg, s);
    let pb = trainable_bytes(s);
    match s.optimizer {
        Optimizer::Adamw => 2 * pb * t,
        Optimizer::Adamw8bit | Optimizer::PagedAdamw8bit => 2 * t,
        Optimizer::Sgd => 0,
        Optimizer::SgdMomentum | Optimizer::Lion => pb * t,
        Optimizer::Adafactor => adafactor_bytes(cfg, s),
    }
}

/// Adafactor's factored second moment: (rows + cols) fp32 per matrix, and a
/// full fp32 vector for 1-D parameters (Shazeer & Stern 2018, §3).
fn adafactor_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    if s.task != Task::Train {
        return 0;
    }
    let sum_linears = |f: &dyn Fn(&str, u64, u64, u64) -> u64| {
        sat(cfg.sum_layers(0, cfg.layers, |i| {
            cfg.layer_linears(i)
                .into_iter()
                .map(|(name, a, b, n)| u128::from(f(name, a, b, n)))
                .sum()
        }))
    };
    let elems: u64 = if s.method == Method::Full {
        let mats = sum_linears(&|_, a, b, n| (a + b) * n);
        // Saturating: a narrower embedding (OPT-350m's 512 wide, projected
        // to 1024) makes vocab × hidden more than the embedding holds.
        let vectors = cfg
            .params()
            .saturating_sub(cfg.block_linear_params())
            .saturating_sub(cfg.vocab * cfg.hidden);
        mats + cfg.vocab + cfg.hidden + vectors.min(cfg.layers * 8 * cfg.hidden)
    } else {
        sum_linears(&|name, a, b, n| {
            if s.lora_targets.matches(name) {
                (a + 2 * s.lora_rank + b) * n
            } else {
                0
            }
        })
    };
    elems * 4
}

/// Does the MLP run transformers' composite `gelu_new`
/// ([`ModelConfig::composite_gelu`])? LitGPT's `GptNeoxMLP.forward`
/// (`litgpt/model.py`) calls the fused `F.gelu(x, approximate="tanh")`,
/// which saves only its input.
fn composite_gelu(cfg: &ModelConfig, s: &Setup) -> bool {
    cfg.composite_gelu && !s.stack.litgpt()
}

/// Does the base linear `name` save its input for backward? Only when its
/// weight gets a gradient (full training): a frozen linear's backward needs
/// only its weight. A LoRA adapter on it saves its own fp32 copy of the
/// input instead ([`lora_input_copies_bytes`]), not the base's β input
/// (checked against the CPU oracle's saved tensors: Qwen2.5-1.5B, LoRA on
/// all linears, was +9.7 % when both were counted).
fn trains(s: &Setup, _name: &str) -> bool {
    s.method == Method::Full
}

/// Activation elements one token saves for backward in one layer, in units
/// of the activation dtype (§3.5, Korthikanti et al. 2022 restated for
/// PyTorch autograd without dropout):
/// - attention: SDPA/flash save q, k, v (after RoPE) and their output
///   (2q + 2·kv), which is also `o_proj`'s input; eager saves q, k, v and
///   `o_proj`'s input copy (when `o_proj` trains); the q/k/v projections'
///   input (h) is saved only when those weights train — one shared tensor,
///   or under autocast on an fp32 stream one 16-bit cast per projection
///   (`per_linear_casts`; checked against the CPU oracle per layer:
///   Llama-3.2-3B bf16 131,176 B per token, Qwen2.5-1.5B mixed-bf16);
/// - MLP, gated: gate output, SiLU output and up output (3f) always, the
///   input (h) and the product (f, `down_proj`'s input) when they train;
///   fc1/GELU: fc1 output (f), plus input h and GELU output f when trained;
///   a composite `gelu_new` saves four f-wide tensors ([`ModelConfig::composite_gelu`]);
///   MoE tokens pass through `active` experts, plus fp32 router logits;
/// - norms: counted in bytes by [`layer_norm_token_bytes`].
pub fn layer_token_elems(cfg: &ModelConfig, s: &Setup, layer: u64) -> u64 {
    let h = cfg.hidden;
    let kv = match &cfg.mla {
        Some(m) => cfg.heads * (m.nope_dim + m.rope_dim),
        None => cfg.kv_heads * cfg.head_dim,
    };
    let q = (cfg.heads * cfg.head_dim).max(h);
    let full = s.method == Method::Full;
    // Flash kernels (SDPA's and FlashAttention-2) return their output laid
    // out as (b, s, heads, d): the reshape for `o_proj` is a view of the
    // tensor the kernel saved. Eager attention (transformers
    // `eager_attention_forward`) saves q, k and v after `repeat_kv` (every
    // query head's copy, so 2q rather than 2·kv under GQA) and no output (its
    // probabilities·V matmul saves the probabilities and v); the transpose
    // before `o_proj` copies. A fused q/k/v projection with rotary keeps its
    // whole output alive through v ([`ModelConfig::fused_qkv_rope`]).
    let heads_width = cfg.heads * cfg.head_dim;
    // Under eager attention with more than one sample, v (a strided chunk of
    // the fused output) cannot be reshaped for the probabilities·V matmul
    // as a view: the matmul saves a copy of v and the fused output is freed
    // (checked with saved-tensor hooks on GPT-NeoX, transformers 5.24: at
    // batch 1 the fused output is saved through v, at batch 4 q, k and a
    // copy of v are).
    let fused = if s.stack.litgpt() && s.attention != Attention::Eager {
        // LitGPT (`CausalSelfAttention.forward`, `litgpt/model.py` 0.5.13)
        // splits q, k and v from one fused output: under GQA
        // `repeat_interleave` copies k and v to every query head and the
        // kernel saves those copies (2q, not 2·kv; the fused output is
        // freed); otherwise v stays a view of the fused output, which the
        // kernel's saved v keeps alive.
        if cfg.kv_heads < cfg.heads {
            2 * q.saturating_sub(kv)
        } else {
            q + kv
        }
    } else if cfg.fused_qkv_rope && !(s.attention == Attention::Eager && s.batch > 1) {
        q + kv
    } else {
        0
    };
    // The inputs the q/k/v (and gate/up) projections save: one tensor, or
    // one cast per projection that trains ([`per_linear_casts`]).
    let casts = |names: &[&str]| -> u64 {
        let n = names.iter().filter(|n| trains(s, n)).count() as u64;
        if per_linear_casts(cfg, s) {
            n
        } else {
            u64::from(n > 0)
        }
    };
    // One fused projection: Phi-3's `qkv_proj`, Falcon's and GPT-NeoX's
    // `query_key_value`, GPT-2's `c_attn` (checked against the CPU oracle per
    // layer: GPT-2 mixed-bf16), BLOOM's `query_key_value` and MPT's `Wqkv`
    // (no rotary: q, k and v stay views of their output).
    let qkv_inputs = if cfg.fused_qkv_rope
        || matches!(
            cfg.model_type,
            crate::arch::Arch::Gpt2 | crate::arch::Arch::Bloom | crate::arch::Arch::Mpt
        ) {
        casts(&["qkv_proj"])
    } else if cfg.mla.is_some() {
        casts(&["q_a_proj", "kv_a_proj"])
    } else {
        casts(&["q_proj", "k_proj", "v_proj"])
    };
    let attn = fused
        + match s.attention {
            Attention::Sdpa | Attention::Flash => 2 * q + 2 * kv,
            Attention::Eager => {
                let rep = if cfg.mla.is_some() { kv } else { heads_width };
                q + 2 * rep + if trains(s, "o_proj") { q } else { 0 }
            }
        }
        + qkv_inputs * h;
    let mlp_inputs = if cfg.glu {
        casts(&["gate_proj", "up_proj"])
    } else {
        casts(&["gate_proj"])
    };
    let mlp_one = |f: u64| {
        let down = if trains(s, "down_proj") { f } else { 0 };
        if cfg.glu {
            3 * f + down
        } else if composite_gelu(cfg, s) {
            4 * f + down
        } else if cfg.relu_mlp {
            // ReLU's output: what its backward reads and fc2's input.
            f
        } else {
            f + down + if full || down > 0 { f } else { 0 }
        }
    };
    let input = mlp_inputs * h;
    let mlp = match &cfg.moe {
        Some(m) if layer >= m.dense_layers => {
            input
                + m.active * (h + mlp_one(m.intermediate))
                + m.shared * mlp_one(m.shared_intermediate)
                + 2 * m.experts
        }
        _ => input + mlp_one(cfg.intermediate),
    };
    attn + mlp
}

/// Is this a LayerNorm (not RMSNorm) architecture?
fn layer_norm(cfg: &ModelConfig) -> bool {
    cfg.layer_norm()
}

/// Is the residual stream fp32? Under autocast LayerNorm runs in fp32 and
/// its output promotes the residual additions to fp32 (PyTorch autocast op
/// lists: `layer_norm` is an fp32 op); in plain fp32 it is fp32 anyway.
/// RMSNorm models under autocast with fp32 weights too: the embedding (not
/// an autocast op) returns fp32, transformers' RMSNorm returns its input's
/// dtype, and each residual addition of a 16-bit branch to it promotes to
/// fp32 (checked against the CPU oracle per layer: Qwen2.5-1.5B, Llama-3.2-1B
/// and Qwen3-0.6B mixed-bf16). Not under ZeRO/FSDP mixed precision, which
/// holds the module itself in 16 bits.
fn fp32_stream(cfg: &ModelConfig, s: &Setup) -> bool {
    let mixed = matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16);
    s.precision.act_bytes() == 4 || (mixed && (layer_norm(cfg) || s.zero == 0)) || s.kbit_upcast
}

/// Bytes per element of the residual stream: fp32 on an fp32 stream (fp32
/// training, autocast without ZeRO/FSDP or on a LayerNorm model, PEFT's
/// k-bit upcast), else the activation dtype's.
pub fn stream_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    if fp32_stream(cfg, s) {
        4
    } else {
        s.precision.act_bytes()
    }
}

/// Autocast casts an fp32 input to 16 bits per op, without caching (its
/// cache holds only leaf tensors: the weights): on an fp32 residual stream
/// under mixed precision every linear that reads the norm's output saves a
/// cast of its own (q, k and v three; gate and up two), not one shared
/// tensor.
fn per_linear_casts(cfg: &ModelConfig, s: &Setup) -> bool {
    fp32_stream(cfg, s) && s.precision.act_bytes() < 4
}

/// Bytes one token's norms save in one layer: RMSNorm saves its fp32-upcast
/// input (4h), its fp32 `rsqrt` row (4 B) and, when its weight trains, the
/// normalized tensor (β·h; 4h on an fp32 stream, `fp32_stream`);
/// LayerNorm saves its input (β·h, or 4h on an fp32 residual stream); per-head
/// q/k norms ([`ModelConfig::qk_norm`]) save the same over q and k.
pub fn layer_norm_token_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let h = cfg.hidden;
    let beta = s.precision.act_bytes();
    // The normalized tensor the weight multiply saves: β, or fp32 where the
    // scale is applied before the cast ([`ModelConfig::fp32_norm_scale`]) or
    // the input is the fp32 stream ([`fp32_stream`]: RMSNorm returns its
    // input's dtype).
    let scaled = if cfg.fp32_norm_scale || fp32_stream(cfg, s) {
        4
    } else {
        beta
    };
    // RMSNorm also saves its fp32 `rsqrt(variance + eps)`, one per row.
    let per = if layer_norm(cfg) {
        if fp32_stream(cfg, s) { 4 * h } else { beta * h }
    } else if s.method == Method::Full {
        4 * h + scaled * h + 4
    } else {
        4 * h + 4
    };
    // Per-head q/k RMSNorms (Qwen3, Gemma-3) save the same per element of q
    // and k, on the 16-bit projection outputs, and an `rsqrt` per head.
    let qk = if cfg.qk_norm {
        let el = if s.method == Method::Full {
            4 + if cfg.fp32_norm_scale { 4 } else { beta }
        } else {
            4
        };
        (cfg.heads + cfg.kv_heads) * (cfg.head_dim * el + 4)
    } else {
        0
    };
    cfg.norms_per_layer * per + qk
}

/// Bytes eager attention saves per score element. transformers 5.24's
/// `eager_attention_forward` (`modeling_llama.py` and its copies) computes
/// `matmul(q, kᵀ) * scaling + mask`, `softmax(…, dtype=float32).to(q.dtype)`,
/// `dropout`, `matmul(probs, v)`; PyTorch's autograd (`derivatives.yaml`)
/// saves `_softmax`'s output (its backward reads `result`),
/// `native_dropout`'s 1-byte mask (CUDA's fused kernel) and both operands
/// of `bmm`; scaling by a number, adding the mask and the casts save
/// nothing. So: the softmax output (fp32 under autocast, in fp32 training,
/// and in code that calls `softmax(dtype=float32)`:
/// [`ModelConfig::eager_softmax_fp32`], which covers GPT-NeoX, Phi, OPT and
/// the other LayerNorm models that do; they were counted at the activation
/// dtype's 2 B), with attention dropout its 1-byte mask and output, the
/// cast back to β that the probabilities·V matmul saves, and soft-capping's
/// `tanh` output (Gemma-2; checked against the CPU oracle's saved tensors:
/// 2 + 4 + 2 B per score). 6 B per score for Llama-family code in bf16.
pub fn eager_score_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let beta = s.precision.act_bytes();
    let mixed = matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16);
    let sm = if mixed || beta == 4 || cfg.eager_softmax_fp32() {
        4
    } else {
        beta
    };
    let drop = if cfg.attn_dropout { 1 + sm } else { 0 };
    let cast = if sm != beta { beta } else { 0 };
    let softcap = if cfg.attn_softcap { beta } else { 0 };
    sm + drop + cast + softcap
}

/// Autocast keeps a half-precision copy of every weight a matmul uses,
/// saved for backward until the layer's backward runs (mixed precision only).
/// Not under ZeRO/FSDP: their mixed precision holds the module itself in
/// 16-bit (DeepSpeed's layout, FSDP's `param_dtype`; see [`sharded_states`]).
pub fn autocast_weight_copies_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    if !matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16) || s.zero >= 1 {
        return 0;
    }
    let head = if cfg.encoder {
        0
    } else {
        cfg.vocab * cfg.hidden
    };
    // Checkpointed layers run their forward without saving anything, the
    // copies included: only the head's copy is saved, and the recomputed
    // layer's own copies come with [`recompute_bytes`] (checked against the
    // CPU oracle: Qwen2.5-0.5B mixed-bf16 with checkpointing).
    // Under selective checkpointing only the layers saving everything keep
    // theirs ([`crate::selective::layers_saving_casts`]).
    let layers = cfg.layers.max(1);
    let saving =
        crate::selective::layers_saving_casts(s.selective_ac, s.grad_checkpointing, layers);
    let blocks =
        sat(u128::from(cfg.block_linear_params()) * u128::from(saving) / u128::from(layers));
    (blocks + head) * 2
}

/// Autocast's weight-cast cache at the end of a checkpointed forward: every
/// half-precision weight copy made inside `torch.autocast` stays cached
/// until the context exits (PyTorch autocast docs, `cache_enabled=True`),
/// even when checkpointing saves none of them for backward. Zero without
/// mixed precision, under ZeRO/FSDP, and without checkpointing (then the
/// copies are saved anyway and counted in [`autocast_weight_copies_bytes`]).
pub fn autocast_cache_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    if !s.recomputes()
        || !matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16)
        || s.zero >= 1
    {
        return 0;
    }
    model_share(cfg, s.pp, s.tp, cfg.block_linear_params() * 2)
}

/// Per token: PEFT casts each adapted linear's input to the fp32 adapter
/// dtype (a separate copy per adapter, saved by `lora_A`) and saves the
/// fp32 rank-r output for `lora_B`. Nothing when β is already fp32.
///
/// Under autocast (mixed precision, or HF `Trainer` with `bf16=True`/
/// `fp16=True`, which `--trainer` on a half-precision model assumes) the
/// adapter's linear casts that fp32 copy back to 16 bits and saves the
/// 16-bit one: 2 bytes an element, not 4. Measured on an H200 (bench/gpu,
/// 2026-11-26): Qwen2.5-1.5B LoRA r16 on all linears, batch 2 × 2048, peaks
/// at 26.90 GiB in a plain loop and 21.87 GiB under `Trainer`; the logits
/// the Trainer drops explain 1.16 GiB of the 5.03, these copies the rest.
pub fn lora_input_copies_bytes(cfg: &ModelConfig, s: &Setup, layer: u64) -> u64 {
    if s.method == Method::Full || s.task != Task::Train {
        return 0;
    }
    if s.stack.litgpt() {
        return litgpt_lora_saved_bytes(cfg, s, layer);
    }
    if s.precision.act_bytes() == 4 {
        return 0;
    }
    let autocast =
        s.drops_output || matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16);
    let elem = if autocast { 2 } else { 4 };
    let adapted: Vec<(&str, u64)> = cfg
        .layer_linears(layer)
        .into_iter()
        .filter(|(name, ..)| s.lora_targets.matches(name))
        .map(|(name, input, ..)| (name, input))
        .collect();
    let ranks = elem * s.lora_rank * adapted.len() as u64;
    if s.kbit_upcast && !autocast {
        // After prepare_model_for_kbit_training the norms' outputs are
        // already fp32: PEFT's cast to the adapter dtype is a no-op and
        // q/k/v (gate/up) save the one tensor they read; o_proj and
        // down_proj read 16-bit outputs and still get fp32 copies.
        const NORM_READERS: [&[&str]; 2] =
            [&["q_proj", "k_proj", "v_proj"], &["gate_proj", "up_proj"]];
        let shared: u64 = NORM_READERS
            .iter()
            .filter_map(|group| adapted.iter().find(|(n, _)| group.contains(n)))
            .map(|(_, input)| 4 * input)
            .sum();
        let copies: u64 = adapted
            .iter()
            .filter(|(n, _)| !NORM_READERS.iter().any(|g| g.contains(n)))
            .map(|(_, input)| 4 * input)
            .sum();
        return shared + copies + ranks;
    }
    adapted.iter().map(|(_, input)| elem * input).sum::<u64>() + ranks
}

/// Per token under LitGPT's LoRA (`litgpt/lora.py`): the adapters keep the
/// model's dtype (no fp32 copy); each adapted module applies `lora_dropout`
/// (0.05, `litgpt/finetune/lora.py`) to its input, saving the 1-byte mask,
/// and `lora_A` saves the dropped-out input (β); `lora_B` saves the
/// rank-wide output of `lora_A`. q, k and v are one fused linear
/// (`LoRAQKVLinear`): one input for all three, `r` columns each enabled.
fn litgpt_lora_saved_bytes(cfg: &ModelConfig, s: &Setup, layer: u64) -> u64 {
    let beta = s.precision.act_bytes();
    let mut qkv: Option<(u64, u64)> = None;
    let mut total = 0u64;
    for (name, input, ..) in cfg.layer_linears(layer) {
        if !s.lora_targets.matches(name) {
            continue;
        }
        if matches!(name, "q_proj" | "k_proj" | "v_proj") {
            let e = qkv.get_or_insert((input, 0));
            e.1 += 1;
        } else {
            total = total.saturating_add((beta + 1) * input + beta * s.lora_rank);
        }
    }
    if let Some((input, n)) = qkv {
        total = total.saturating_add((beta + 1) * input + beta * s.lora_rank * n);
    }
    total
}

/// Bytes of one layer's saved activations for `b` samples of `s` tokens:
/// [`layer_token_elems`] × β and [`layer_norm_token_bytes`], plus the a·s²
/// probability matrices with eager attention ([`eager_score_bytes`]; the
/// Korthikanti 5·a·s²·b term), or the O(s) log-sum-exp with flash/SDPA
/// kernels, plus 1-byte residual dropout masks when the config enables dropout.
pub fn layer_activation_bytes(cfg: &ModelConfig, s: &Setup, layer: u64, b: u64, seq: u64) -> u64 {
    sat(layer_activation_wide(cfg, s, layer, b, seq))
}

/// [`layer_activation_bytes`] in 128 bits: the per-token widths are
/// bounded by the model's limits, the token and score counts are not.
fn layer_activation_wide(cfg: &ModelConfig, s: &Setup, layer: u64, b: u64, seq: u64) -> u128 {
    let w = u128::from;
    let beta = s.precision.act_bytes();
    let t = w(b) * w(seq);
    let mut bytes = w(layer_token_elems(cfg, s, layer) * beta + layer_norm_token_bytes(cfg, s)) * t;
    if cfg.hidden_dropout {
        bytes += 2 * t * w(cfg.hidden); // two residual dropout masks, 1 B each
    }
    bytes += w(lora_input_copies_bytes(cfg, s, layer)) * t;
    let scores = w(cfg.heads) * w(seq) * w(seq) * w(b);
    bytes += match s.attention {
        Attention::Eager => scores * w(eager_score_bytes(cfg, s)),
        Attention::Sdpa | Attention::Flash => w(cfg.heads) * t * 4,
    };
    bytes
}

/// Training activations kept alive at the end of the forward pass on the
/// busiest GPU: the first pipeline stage with
/// [`in_flight_micro_batches`] micro-batches saved (see
/// [`stage_activations_bytes`]).
pub fn training_activations_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    stage_activations_bytes(cfg, s, in_flight_micro_batches(s))
}

/// Micro-batches whose activations the first pipeline stage holds at once
/// under the 1F1B schedule: `pp`, or fewer when a step has fewer
/// micro-batches (`--grad-accum`, the micro-batches per step). Narayanan et
/// al. 2021 §2.2 (PipeDream-Flush: "at most p micro-batches in flight");
/// Korthikanti et al. 2022 §4.2.3: the first stage holds L layers' worth of
/// activations whatever p is; Megatron's `theoretical_memory_usage.py`
/// discounts by min(1, micro-batches/PP) (§2.5). One without pipelining.
pub fn in_flight_micro_batches(s: &Setup) -> u64 {
    if s.pp > 1 { s.pp.min(s.grad_accum) } else { 1 }
}

/// Layers on one pipeline stage: ⌈L/pp⌉ (Megatron and vLLM split the layers
/// evenly; the busiest stage takes the remainder).
pub fn stage_layers(cfg: &ModelConfig, s: &Setup) -> u64 {
    cfg.layers.div_ceil(s.pp.max(1))
}

/// Activations one GPU keeps alive at the end of the forward pass (§3.5)
/// with `micro_batches` micro-batches in flight: every layer of its pipeline
/// stage ([`stage_layers`]), the embedding output and the final norm; with HF
/// gradient checkpointing only each layer's input (h per token; the layer
/// being recomputed is [`recompute_bytes`], a later moment). Tensor parallelism is
/// taken with sequence parallelism (Megatron's recommended setting, and the
/// one its `theoretical_memory_usage.py` assumes): every saved tensor is
/// split over the `tp` ranks, Korthikanti et al. 2022 §4.2.2,
/// (sbh/t)·(34 + 5·a·s/h). Autocast's weight copies follow the weights.
pub fn stage_activations_bytes(cfg: &ModelConfig, s: &Setup, micro_batches: u64) -> u64 {
    sat(stage_activations_wide(cfg, s, micro_batches))
}

/// [`stage_activations_bytes`] in 128 bits, closed-form over the layers.
pub fn stage_activations_wide(cfg: &ModelConfig, s: &Setup, micro_batches: u64) -> u128 {
    let w = u128::from;
    let stream = if fp32_stream(cfg, s) {
        4
    } else {
        s.precision.act_bytes()
    };
    let t = w(s.batch) * w(s.seq);
    // The embedding output, the final norm's input and its output. Under
    // autocast on an RMSNorm model's fp32 stream: the final norm's fp32 input
    // and fp32 normalized tensor, and the head's 16-bit cast of it (the
    // embedding output is the first layer's norm input, counted there;
    // checked against the CPU oracle: Qwen2.5-1.5B and Qwen3-0.6B
    // mixed-bf16, one and two layers).
    let edges = if per_linear_casts(cfg, s) && !layer_norm(cfg) {
        t * w(cfg.hidden * (4 + 4 + s.precision.act_bytes()))
    } else {
        3 * t * w(cfg.hidden * stream)
    };
    let copies = model_share(cfg, s.pp, s.tp, autocast_weight_copies_bytes(cfg, s));
    let layers = stage_layers(cfg, s);
    let saved = if s.grad_checkpointing {
        w(layers) * t * w(cfg.hidden * stream)
    } else if let Some(sac) = s.selective_ac {
        crate::selective::stage_saved_wide(cfg, s, sac, layers)
    } else {
        cfg.sum_layers(0, layers, |i| {
            layer_activation_wide(cfg, s, i, s.batch, s.seq)
        })
    };
    // Activation offloading moves the saved tensors to the CPU but for its
    // forward stash ([`crate::selective::offloaded_wide`]).
    let saved = if s.activation_offloading {
        crate::selective::offloaded_wide(cfg, s, saved)
    } else {
        saved
    };
    (saved + edges).saturating_mul(w(micro_batches)) / w(s.tp.max(1)) + w(copies)
}

/// With gradient checkpointing, the activations of the one layer being
/// recomputed during backward (the largest layer; split over `tp`). They
/// never coexist with the loss's logits: the loss backward runs first and
/// frees them before the first layer is recomputed (checked against the CPU
/// oracle, whose checkpointed peaks sit at the loss backward). Zero without
/// checkpointing.
pub fn recompute_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    if let Some(sac) = s.selective_ac.filter(|_| !s.grad_checkpointing) {
        let layer = crate::selective::recompute_wide(cfg, s, sac, stage_layers(cfg, s));
        return sat(layer / u128::from(s.tp.max(1)));
    }
    if !s.grad_checkpointing {
        return 0;
    }
    let copies =
        if matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16) && s.zero == 0 {
            cfg.block_linear_params() / cfg.layers.max(1) * 2
        } else {
            0
        };
    (cfg.layer_groups(0, stage_layers(cfg, s))
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(i, _)| layer_activation_bytes(cfg, s, i, s.batch, s.seq))
        .max()
        .unwrap_or(0)
        + copies)
        / s.tp.max(1)
}

/// Output rows the head produces per token: the vocabulary for causal LMs,
/// two labels for an encoder's classification head.
fn head_width(cfg: &ModelConfig) -> u64 {
    if cfg.encoder { 2 } else { cfg.vocab }
}

/// Bytes per logit element the loss works in: fp32. transformers'
/// `ForCausalLMLoss` upcasts; models whose own code does not (Qwen v1's
/// remote code calls `CrossEntropyLoss()` on bf16 logits) still get fp32
/// under HF `Trainer`/accelerate with `bf16=True`, whose autocast runs
/// `cross_entropy` in fp32 (PyTorch's autocast fp32 op list). Checked on
/// the Qwen-7B LoRA rows (§5.3 C5): within 6.6 % at 256–8192 tokens with an
/// fp32 loss, −18 % at 4096 with a bf16 one.
pub const LOSS_BYTES: u64 = 4;

/// Extra vocabulary-wide β tensors of final-logit soft-capping
/// (modeling_gemma2.py `Gemma2ForCausalLM.forward`: `logits / cap`,
/// `tanh`, `* cap`): in training `tanh` saves its output for backward, one
/// more β tensor than the plain head; in a full forward two of the three
/// are alive at each step.
fn softcap_copies(cfg: &ModelConfig) -> u64 {
    u64::from(cfg.logit_softcap)
}

/// The head output the training loop still holds after backward: a loop
/// written `out = model(**batch); out.loss.backward(); optimizer.step()`
/// keeps `out.logits` (β, V/t columns per rank) alive through the optimizer
/// step (checked against the CPU oracle: Qwen2.5-0.5B at 1 × 512 tokens peaks
/// in the step with exactly these 0.14 GiB on top of the model states).
/// HF `Trainer` drops them before backward ([`Setup::drops_output`]), and
/// pipeline schedules return only the loss: none held.
pub fn held_logits_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    if s.pp > 1 || s.drops_output {
        return 0;
    }
    s.batch * s.seq * head_width(cfg).div_ceil(s.tp.max(1)) * head_bytes(s)
}

/// Bytes per logit the head writes: the activation dtype, or fp32 when
/// `prepare_model_for_kbit_training` made the head fp32.
fn head_bytes(s: &Setup) -> u64 {
    if s.kbit_upcast {
        4
    } else {
        s.precision.act_bytes()
    }
}

/// Logits alive after the forward (§3.6): the head output in β (held by the
/// loop's `out`), log-softmax's fp32 output saved by cross-entropy, and
/// soft-capping's saved `tanh` output. The fp32 copy the loss works on
/// (`logits.float()`) is freed when the loss returns: nothing saves it.
///
/// With tensor parallelism the head and the cross-entropy are vocabulary
/// parallel (Megatron `VocabParallelEmbedding`/`vocab_parallel_cross_entropy`):
/// each rank holds V/t of every row (Korthikanti et al. 2022 §4.3: s·b·V/t).
pub fn training_logits_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let tv = s.batch * s.seq * head_width(cfg).div_ceil(s.tp.max(1));
    let beta = head_bytes(s);
    let held = if s.drops_output { 0 } else { beta };
    tv * (held + loss_bytes(s) + softcap_copies(cfg) * beta)
}

/// Bytes per logit element the loss saves: [`LOSS_BYTES`], or under LitGPT
/// without autocast the activation dtype: `chunked_cross_entropy`
/// (`litgpt/utils.py`) calls `cross_entropy` on the 16-bit head chunks,
/// whose log-softmax output is 16-bit (autocast, `bf16-mixed`, would run it
/// in fp32).
fn loss_bytes(s: &Setup) -> u64 {
    if s.stack.litgpt() && !matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16) {
        head_bytes(s)
    } else {
        LOSS_BYTES
    }
}

/// LitGPT's LoRA loop runs the head and the loss in chunks of this many
/// tokens (`model(input_ids, lm_head_chunk_size=128)`,
/// `litgpt/finetune/lora.py`; `chunked_cross_entropy`'s `chunk_size=128`).
pub const LITGPT_CHUNK: u64 = 128;

/// The first backward steps through the loss (§3.6): log-softmax's backward
/// allocates the gradient of its input while the gradient of its output and
/// its saved output are alive — two fp32 vocabulary-wide temporaries (V/t
/// columns per rank under tensor parallelism, as [`training_logits_bytes`];
/// checked against the CPU oracle, in bf16 and in fp32 training).
pub fn loss_backward_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    // LitGPT's LoRA loop chunks the head too: each chunk is a graph of its
    // own and the backward frees one chunk's temporaries before the next.
    // Its full fine-tuning (`litgpt/finetune/full.py`) runs the head whole
    // and chunks only the loss: `split`'s backward gathers every chunk's
    // gradient and concatenates them, two whole copies.
    let tokens = if s.stack.litgpt() && s.method != Method::Full {
        s.seq.min(LITGPT_CHUNK)
    } else {
        s.seq
    };
    2 * s.batch * tokens * head_width(cfg).div_ceil(s.tp.max(1)) * loss_bytes(s)
}

/// Optimizer-step temporaries (§3.7): torch's foreach AdamW/Lion/SGD
/// (the default on CUDA since torch 2.0) allocate one intermediate per
/// parameter tensor of the group at once (one extra copy of the trainable
/// parameters); the per-parameter loop (`foreach=False`, torch 1.x,
/// transformers' old `adamw_hf`) needs only the largest tensor's worth; bnb
/// 8-bit optimizers update in place.
pub fn optimizer_step_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    match s.optimizer {
        Optimizer::Adamw | Optimizer::Lion | Optimizer::SgdMomentum => {
            let pb = trainable_bytes(s);
            if !s.foreach {
                return largest_tensor(cfg, s) * pb;
            }
            trainable_params(cfg, s) * pb
        }
        _ => 0,
    }
}

/// The largest trainable tensor (elements): the embedding for full
/// training, else the largest adapter matrix.
fn largest_tensor(cfg: &ModelConfig, s: &Setup) -> u64 {
    if s.method == Method::Full {
        cfg.vocab * cfg.hidden
    } else {
        (0..cfg.layers.min(4))
            .flat_map(|i| cfg.layer_linears(i))
            .filter(|(name, ..)| s.lora_targets.matches(name))
            .map(|(_, a, b, _)| s.lora_rank * a.max(b))
            .max()
            .unwrap_or(0)
    }
}

/// bitsandbytes dequantizes one linear at a time to the compute dtype during
/// forward and backward: the largest linear in 16-bit.
pub fn dequant_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    if s.quant == Quant::None {
        return 0;
    }
    (0..cfg.layers.min(4))
        .flat_map(|i| cfg.layer_linears(i))
        .map(|(_, a, b, _)| a * b * 2)
        .max()
        .unwrap_or(0)
}

/// Parameters LitGPT holds beyond [`ModelConfig::params`]: it never ties
/// the LM head to the embedding (`GPT.__init__`, `litgpt/model.py`: its own
/// `lm_head`; `scripts/convert_hf_checkpoint.py` copies a tied embedding
/// into it, `state_dict["lm_head.weight"] = state_dict["transformer.wte.weight"]`;
/// its fine-tuning scripts refuse `tie_embeddings`), so
/// a tied model keeps a second vocabulary × width matrix. Zero for other
/// stacks and untied models.
pub fn litgpt_untied_head_params(cfg: &ModelConfig, s: &Setup) -> u64 {
    if s.stack.litgpt() && cfg.tied_embeddings && !cfg.encoder {
        crate::sharding::head_params(cfg)
    } else {
        0
    }
}

/// Bytes per KV-cache element.
pub fn kv_elem_bits(s: &Setup) -> u64 {
    s.kv_bits
}

/// KV cache for `tokens` tokens per sequence (§3.8): 2·n_kv·d_head per token
/// per layer, capped at the window on sliding-window layers; MLA models in
/// transformers cache the decompressed per-head keys (nope + rope) and values.
pub fn kv_cache_bytes(cfg: &ModelConfig, s: &Setup, tokens: u64) -> u64 {
    sat(kv_cache_wide(cfg, s, tokens))
}

/// The cache right after the prompt pass of transformers' `DynamicCache`:
/// a sliding-window layer (`DynamicSlidingWindowLayer`) keeps its last
/// window of the prompt as a slice of the full-length key/value tensor, so
/// the whole prompt's storage stays alive until the first decoding step
/// replaces it (transformers 5.17 `cache_utils.py`; on an H200, Gemma 3 1B
/// at 4 × 4096 tokens peaked 0.55 GiB above a window-sized cache, and a
/// sliding layer's 511-token keys held the storage of all 1024 prompt
/// tokens on the CPU). Every layer counts the prompt in full.
pub fn kv_prefill_bytes(cfg: &ModelConfig, s: &Setup, tokens: u64) -> u64 {
    sat(kv_wide(cfg, s, tokens, false))
}

/// [`kv_cache_bytes`] in 128 bits.
pub fn kv_cache_wide(cfg: &ModelConfig, s: &Setup, tokens: u64) -> u128 {
    kv_wide(cfg, s, tokens, true)
}

/// The cache of `tokens` tokens; `windowed`: sliding-window layers hold
/// only their window.
fn kv_wide(cfg: &ModelConfig, s: &Setup, tokens: u64, windowed: bool) -> u128 {
    let w = u128::from;
    if cfg.encoder {
        return 0;
    }
    let per_token_layer = match &cfg.mla {
        Some(m) => cfg.heads * (m.nope_dim + m.rope_dim + m.v_dim),
        None => 2 * cfg.kv_heads * cfg.head_dim,
    };
    let full_layers = cfg.layers.saturating_sub(cfg.sliding_layers);
    let window = if windowed {
        cfg.sliding_window.unwrap_or(tokens).min(tokens)
    } else {
        tokens
    };
    let elems = w(per_token_layer)
        * (w(full_layers) * w(tokens) + w(cfg.sliding_layers) * w(window))
        * w(s.batch);
    // A quantized cache (HF QuantizedCache, Qwen `use_cache_quantization`) keeps a
    // scale and a zero point (fp32) per token, head and head_dim group.
    let constants = if kv_elem_bits(s) < 16 {
        elems / w(cfg.head_dim.max(1)) * 2 * 32
    } else {
        0
    };
    (elems * w(kv_elem_bits(s)) + constants) / 8
}

/// Allocator slack of a cache grown by concatenation (§3.8 and §3.9): each
/// decoding step frees every layer's cache and allocates one a token longer;
/// the freed blocks stay reserved by the caching allocator but are too small
/// for the next, larger request, so by the end reserved memory holds about
/// one more cache's worth of freed blocks.
pub fn cache_growth_slack_bytes(cfg: &ModelConfig, s: &Setup, tokens: u64) -> u64 {
    if s.new_tokens == 0 {
        return 0;
    }
    kv_cache_bytes(cfg, s, tokens)
}

/// The prefill transient of one layer at `seq` prompt tokens (§3.8): the
/// residual stream and norm output plus the larger of the attention working
/// set (q, k, v, output; eager adds the a·s² scores and their softmax)
/// and the MLP working set (gate, up and their product: 3f; fc1 and GELU: 2f;
/// a composite `gelu_new`: 4f).
/// Tensor parallelism splits the heads and the intermediate over `tp` ranks
/// (Megatron column/row-parallel linears); the residual stream stays whole.
pub fn prefill_transient_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    sat(prefill_transient_wide(cfg, s))
}

/// [`prefill_transient_bytes`] in 128 bits.
pub fn prefill_transient_wide(cfg: &ModelConfig, s: &Setup) -> u128 {
    let w = u128::from;
    let beta = w(s.precision.act_bytes());
    let t = w(s.batch) * w(s.seq);
    let h = w(cfg.hidden);
    let q = w(cfg.heads * cfg.head_dim);
    let kv = w(cfg.kv_heads * cfg.head_dim);
    let mut attn = t * (2 * q + 2 * kv) * beta;
    if s.attention == Attention::Eager {
        // The scores in β, and the softmax: code that calls
        // `softmax(dtype=float32)` ([`ModelConfig::eager_softmax_fp32`])
        // upcasts first (a 4-byte copy) and writes a 4-byte output while the
        // β scores are still referenced; GPT-2, BERT and Falcon take the
        // softmax in β. `repeat_kv` copies k and
        // v to every query head under GQA (checked against the CPU oracle:
        // Gemma-2-9B prefill of 4096 tokens).
        let per_score = if beta == 4 || cfg.eager_softmax_fp32() {
            beta + if beta == 4 { 0 } else { 4 } + 4
        } else {
            2 * beta
        };
        attn += w(cfg.heads) * w(s.seq) * w(s.seq) * w(s.batch) * per_score;
        if cfg.kv_heads < cfg.heads {
            attn += 2 * t * q * beta;
        }
    }
    let f = match &cfg.moe {
        Some(m) => m.intermediate * m.active.max(1) + m.shared_intermediate * m.shared,
        None => cfg.intermediate,
    };
    let live = if cfg.glu || composite_gelu(cfg, s) {
        3 + u128::from(composite_gelu(cfg, s))
    } else {
        2
    };
    let mlp = t * w(f) * live * beta;
    2 * t * h * beta + attn.max(mlp) / w(s.tp.max(1))
}

/// What the model's forward builds once and keeps through every layer of
/// the prompt pass, beside each layer's working set (checked against the CPU
/// oracle, `bench/estimate-oracle/`: Gemma 3 1B, 4 × 4096 tokens, prefill —
/// the oracle's peak was above the estimate by exactly these, to 0.2 MB):
/// - the rotary tables, cos and sin per set, b·s·rope_dims in β each
///   (transformers' `*RotaryEmbedding.forward` returns them in the
///   activation dtype; Gemma 3 builds a global and a local set);
/// - with SDPA, the boolean sliding-window mask, b·s·s bytes, when a
///   sliding layer's window is shorter than the prompt: transformers'
///   `create_sliding_window_causal_mask` can then not leave the masking to
///   SDPA's `is_causal` (masking_utils.py `_ignore_causal_mask_sdpa`), and
///   one `[b, 1, s, s]` bool mask serves every sliding layer. Full-attention
///   layers of an unpadded prompt get `is_causal` and no mask.
///
/// The tables and the mask are locals of the decoder's forward, gone when
/// the head runs.
pub fn prompt_shared_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let w = u128::from;
    let t = w(s.batch) * w(s.seq);
    let tables = 2 * w(cfg.rope_sets) * t * w(cfg.rope_dims) * w(s.precision.act_bytes());
    let windowed = cfg.sliding_layers > 0
        && cfg.sliding_window.is_some_and(|win| win < s.seq)
        && s.attention == Attention::Sdpa;
    let mask = if windowed { t * w(s.seq) } else { 0 };
    sat(tables + mask)
}

/// What is alive beside the logits when the head runs on the prompt: the
/// last layer's output and the final norm's output, every position (β each;
/// `logits_to_keep=1` slices a view, which keeps the whole tensor).
pub fn head_input_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    2 * s.batch * s.seq * cfg.hidden * s.precision.act_bytes()
}

/// Logits during inference (§3.8): `generate` keeps only the last position
/// (`logits_to_keep=1`) in β plus its fp32 copy for sampling; a plain
/// forward (no new tokens) produces every position.
pub fn inference_logits_bytes(cfg: &ModelConfig, s: &Setup) -> u64 {
    let beta = s.precision.act_bytes();
    let v = head_width(cfg);
    if s.new_tokens > 0 {
        s.batch * v * (beta + 4)
    } else {
        s.batch * s.seq * v * beta * (1 + softcap_copies(cfg))
    }
}

/// `DynamicCache` grows with `torch.cat`: appending a token briefly holds a
/// second copy of one layer's cache (§3.8).
pub fn cache_growth_bytes(cfg: &ModelConfig, s: &Setup, tokens: u64) -> u64 {
    kv_cache_bytes(cfg, s, tokens) / cfg.layers.max(1)
}

/// CUDA context, kernels and library handles as nvidia-smi shows them before
/// any tensor, measured on an H200 with driver 580, CUDA 13.0 and torch
/// 2.11 (bench/gpu/peaks.py, 2026-11-26): 648,871,936 bytes for the context
/// alone (CUDA 12.2+ loads kernels lazily, so the figure no longer grows
/// with every library's kernels: the HF "model training anatomy" doc
/// measured 1,343 MB on a V100 with CUDA 11, §2.5), plus 69,206,016 for the
/// first cuBLAS handle's workspace. Training runs backward on autograd's
/// device thread, whose cuBLAS handle takes a second workspace: the
/// measured NVML "used" minus PyTorch's reserved was 0.68 GiB in inference
/// and 0.75 GiB in training on every setup of that run.
///
/// Without lazy loading (CUDA before 12.2, `CUDA_MODULE_LOADING=EAGER`)
/// every kernel of every library is loaded at start-up: the V100 figure,
/// 1,343 MB, plus PyTorch's default cuBLAS workspace (`:4096:8`, 32 MiB).
pub fn cuda_context_bytes(training: bool, lazy_loading: bool) -> u64 {
    const CONTEXT: u64 = 648_871_936;
    const CUBLAS_WORKSPACE: u64 = 69_206_016;
    if !lazy_loading {
        return 1_343_000_000 + 32 * 1024 * 1024;
    }
    CONTEXT + CUBLAS_WORKSPACE * if training { 2 } else { 1 }
}

/// NCCL communication buffers on each GPU when GPUs run collectives
/// (tensor parallelism's all-reduces; data-parallel DDP/ZeRO/FSDP gradient
/// reductions in training). NCCL allocates them with `cudaMalloc`/cuMem
/// outside PyTorch's caching allocator, so nvidia-smi shows them and
/// `max_memory_allocated` does not. We take 2 GiB per GPU:
/// `memory-estimation.md` §2.8 and §3.9 ("NCCL about 2 GiB/GPU at TP ≥ 2":
/// the llm-d planner report measured 2.07/2.13 GiB non-torch per GPU at TP 2/4
/// on H100 with vLLM v0.19, §5.8 K3; vLLM PR #10511 logs non-torch memory
/// going from 1.79 to 3.58 GiB between TP=1 and TP=2). Pipeline parallelism
/// alone only sends activations point to point: the same report measured
/// 0.07 GiB non-torch per GPU at PP 2/4 (K4), so it adds nothing here.
/// Assumption: data-parallel communicators take the same size as
/// tensor-parallel ones (NCCL sizes buffers per channel and peer, not per
/// parameter). HF inference split with `device_map` copies tensors between
/// GPUs without NCCL.
pub fn nccl_bytes(s: &Setup) -> u64 {
    let nccl = s.tp > 1 || (s.task == Task::Train && s.dp() > 1);
    if nccl { 2 << 30 } else { 0 }
}

/// PyTorch's caching allocator reserves more than is allocated (§3.9:
/// reserved/allocated 1.0–1.3): freed transient blocks of one size cannot
/// always serve another, and blocks round up to 2 MiB. We take the static
/// tensors at face value and 10 % on top of the transient working set.
pub fn reserved_bytes(allocated: u64, transient: u64) -> u64 {
    let slack = transient / 10;
    allocated
        .saturating_add(slack)
        .div_ceil(2 << 20)
        .saturating_mul(2 << 20)
}

/// Weights for precision labels in outputs.
pub fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::Fp32 => "fp32",
        Precision::Fp16 => "fp16",
        Precision::Bf16 => "bf16",
        Precision::MixedFp16 => "mixed-fp16",
        Precision::MixedBf16 => "mixed-bf16",
    }
}

/// Parameters on the busiest GPU when the layers are split into `stages`
/// consecutive groups (pipeline stages, or accelerate's `device_map="auto"`):
/// ⌈L/stages⌉ layers' share of the block parameters plus the input
/// embedding or the head (first and last stage; a tied embedding is held by
/// both, as Megatron keeps a copy on the last stage). One stage: everything.
pub fn stage_params(cfg: &ModelConfig, stages: u64) -> u64 {
    let p = cfg.params();
    if stages <= 1 {
        return p;
    }
    let emb = cfg.embedding_params().min(p);
    let per_layer = (p - emb) / cfg.layers.max(1);
    let edge = if cfg.tied_embeddings { emb } else { emb / 2 };
    per_layer * cfg.layers.div_ceil(stages) + edge
}

/// The busiest GPU's share of a model-sized quantity `total` (weights,
/// gradients, optimizer states, autocast copies) under `stages` layer-wise
/// stages and tensor parallelism `tp`: [`stage_params`] / P, then / tp
/// (Megatron splits every block linear and the vocabulary over the tp ranks;
/// norms are replicated but negligible). `memory-estimation.md` §2.5
/// (Transformer Math 101, 3D parallel: model/(PP·TP)) and §2.3 (llm-analysis:
/// weights per layer / t, embedding / t).
pub fn model_share(cfg: &ModelConfig, stages: u64, tp: u64, total: u64) -> u64 {
    let p = cfg.params().max(1);
    let here = stage_params(cfg, stages).min(p);
    (u128::from(total) * u128::from(here) / u128::from(p) / u128::from(tp.max(1))) as u64
}

/// Is this autocast mixed precision (fp32 model, half-precision compute)?
fn mixed(s: &Setup) -> bool {
    matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16)
}

/// Whole-model states (weights, gradients, optimizer, step temporaries)
/// before any sharding. Mixed precision under ZeRO (any stage, or FSDP)
/// uses DeepSpeed's layout (ZeRO paper, Rajbhandari et al. 2020 §3 and
/// §5: K = 12, 16 B/param = 2 fp16 weights + 2 fp16 gradients + 12 of fp32
/// master weights, m and v in the optimizer): the module in 16-bit, 16-bit
/// gradients, and the fp32 master copy counted with the optimizer states so
/// that ZeRO-1 shards it. Without ZeRO, PyTorch AMP keeps the fp32 model
/// itself (§3.1–3.3: 4 + 4 + 8).
fn model_states(cfg: &ModelConfig, s: &Setup) -> (u64, u64, u64, u64) {
    let step = optimizer_step_bytes(cfg, s);
    if s.zero == 0 || !mixed(s) {
        return (
            weights_bytes(cfg, s),
            gradients_bytes(cfg, s),
            optimizer_bytes(cfg, s),
            step,
        );
    }
    let half = Setup {
        precision: Precision::Bf16,
        ..s.clone()
    };
    let t = trainable_params(cfg, s);
    let master = 4 * t;
    (
        weights_bytes(cfg, &half),
        2 * t,
        master + optimizer_bytes(cfg, s),
        step,
    )
}

/// DeepSpeed ZeRO-3's `sub_group_size` default (elements): the optimizer
/// steps its partition one sub-group at a time, each with an fp32 copy of the
/// sub-group's gradients (`stage3.py` `_prepare_fp32_grad_for_sub_group`,
/// freed after the sub-group's step). Under ZeRO-1/2 the step holds the fp32
/// gradient partition at once (4P/N): the fp32 grads in DeepSpeed's own
/// estimators (`estimate_zero2/3_model_states_mem_needs`, §2.4: 16P/N and 18P/N).
pub const ZERO3_SUB_GROUP: u64 = 1_000_000_000;

/// Per-GPU model states under tensor/pipeline parallelism and ZeRO/FSDP.
/// First the busiest GPU's share of the model ([`model_share`]: 1/(tp·pp) of
/// the blocks, the embedding or head / tp), then ZeRO over the data-parallel
/// degree `dp = gpus/(tp·pp)` only (§2.4, §3.4: ZeRO-1 shards the
/// optimizer, ZeRO-2 also the gradients, ZeRO-3/FSDP also the weights, which
/// are gathered a layer at a time in 16-bit: the gathered layer plus the
/// prefetched next one, DeepSpeed's 4·LL). Optimizer offload removes states
/// and the step from the GPU; parameter offload leaves only the gathered
/// layers. Returns (weights, gradients, optimizer, step temporaries) per GPU.
pub fn sharded_states(cfg: &ModelConfig, s: &Setup) -> (u64, u64, u64, u64) {
    let n = s.dp();
    let share = |b| model_share(cfg, s.pp, s.tp, b);
    let (w, g, o, step) = model_states(cfg, s);
    let (mut w, mut g, mut o, mut step) = (share(w), share(g), share(o), share(step));
    if s.zero >= 1 {
        o /= n;
        step /= n;
    }
    if s.zero >= 2 {
        g /= n;
    }
    if s.zero >= 3 && mixed(s) {
        step = step.min(ZERO3_SUB_GROUP * 4);
    }
    if s.zero >= 3 {
        let largest = cfg
            .layer_groups(0, cfg.layers)
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(i, _)| cfg.layer_params(i))
            .max()
            .unwrap_or(0);
        let gathered_bytes = if mixed(s) {
            2
        } else {
            s.precision.param_bytes()
        };
        let gathered = 2 * largest * gathered_bytes / s.tp.max(1);
        w = w / n + gathered;
        if s.offload == crate::setup::Offload::Params {
            w = gathered;
        }
    }
    if s.offload != crate::setup::Offload::None {
        o = 0;
        step = 0;
    }
    (w, g, o, step)
}

/// Bytes of KV cache per GPU for a whole-model cache of `bytes` split over
/// `stages` layer-wise stages and `tp` tensor-parallel ranks: each rank
/// holds its KV heads (Megatron/vLLM give each rank n_kv/t heads and
/// replicate them when n_kv < t: llm-analysis's max(n_kv/t, 1), §2.3; MLA in
/// transformers caches per-head keys, split like the heads).
pub fn kv_share(cfg: &ModelConfig, stages: u64, tp: u64, bytes: u64) -> u64 {
    bytes.div_ceil(stages.max(1)) / kv_tp_divisor(cfg, tp)
}

/// By how much tensor parallelism divides the cache: `tp`, capped at the
/// number of KV heads (replicated beyond it).
pub fn kv_tp_divisor(cfg: &ModelConfig, tp: u64) -> u64 {
    let heads = if cfg.mla.is_some() {
        cfg.heads
    } else {
        cfg.kv_heads
    };
    tp.min(heads.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;
    use crate::setup::LoraTargets;

    /// OPT, BLOOM and MPT estimate sanely: full bf16 AdamW training holds
    /// the 16-bit weights, gradients and two moments (8 B per parameter) and
    /// peaks below 12 B per parameter at batch 1 × 512; BLOOM and MPT run
    /// eager attention even when SDPA is asked for (no SDPA path in
    /// transformers), OPT learned positions (no rotary tables); BLOOM's
    /// fused `query_key_value` saves one input cast.
    #[test]
    fn opt_bloom_and_mpt_estimates_are_sane() {
        let train = Setup {
            task: Task::Train,
            precision: Precision::Bf16,
            batch: 1,
            seq: 512,
            ..Setup::default()
        };
        for id in [
            "facebook/opt-1.3b",
            "facebook/opt-350m",
            "bigscience/bloom-560m",
            "mosaicml/mpt-7b",
        ] {
            let cfg = catalogue::find(id).expect(id);
            let est = crate::estimate(&cfg, &train).expect(id);
            let c = &est.components;
            assert_eq!(c.weights_bytes.0, 2 * cfg.params(), "{id}");
            let peak = est.peak_allocated_bytes.0;
            let p = cfg.params();
            assert!(peak > 8 * p && peak < 12 * p, "{id}: {peak}");
        }
        let bloom = catalogue::find("bigscience/bloom-560m").expect("bloom");
        assert!(crate::sdpa_falls_back_to_eager(&bloom, &train));
        let mpt = catalogue::find("mosaicml/mpt-7b").expect("mpt");
        assert!(crate::sdpa_falls_back_to_eager(&mpt, &train));
        let eager = Setup {
            attention: Attention::Eager,
            ..train.clone()
        };
        let (a, b) = (
            crate::estimate(&bloom, &train).expect("sdpa"),
            crate::estimate(&bloom, &eager).expect("eager"),
        );
        assert_eq!(a.components, b.components);
        assert_eq!(a.peak_allocated_bytes, b.peak_allocated_bytes);
        let opt = catalogue::find("facebook/opt-1.3b").expect("opt");
        assert!(!crate::sdpa_falls_back_to_eager(&opt, &train));
        assert_eq!(prompt_shared_bytes(&opt, &train), 0);
        // Mixed bf16 (fp32 LayerNorm stream): one cast for the fused
        // projection, three for OPT's separate q/k/v.
        let mixed = Setup {
            precision: Precision::MixedBf16,
            ..train
        };
        let h = bloom.hidden;
        let plain = ModelConfig {
            model_type: crate::arch::Arch::GptNeox,
            ..bloom.clone()
        };
        assert_eq!(
            layer_token_elems(&plain, &mixed, 0) - layer_token_elems(&bloom, &mixed, 0),
            2 * h
        );
    }

    /// The prompt pass's shared tensors: rotary tables per set (Gemma 3 has
    /// two), the rotated width only (GPT-NeoX rotates a quarter of a head,
    /// phi-2 40 %), none with learned positions, and the SDPA sliding-window
    /// mask only when a window is shorter than the prompt.
    #[test]
    fn prompt_pass_keeps_rotary_tables_and_the_sliding_mask() {
        let s = |batch, seq, attention| Setup {
            batch,
            seq,
            attention,
            new_tokens: 1,
            ..Setup::default()
        };
        let g3 = catalogue::find("google/gemma-3-1b-it").expect("gemma 3");
        assert_eq!((g3.rope_sets, g3.rope_dims), (2, 256));
        let (b, n) = (4u64, 4096u64);
        assert_eq!(
            prompt_shared_bytes(&g3, &s(b, n, Attention::Sdpa)),
            2 * 2 * b * n * 256 * 2 + b * n * n
        );
        // Eager attention builds its own masks; the window covers 512 tokens.
        assert_eq!(
            prompt_shared_bytes(&g3, &s(b, n, Attention::Eager)),
            2 * 2 * b * n * 256 * 2
        );
        assert_eq!(
            prompt_shared_bytes(&g3, &s(1, 512, Attention::Sdpa)),
            2 * 2 * 512 * 256 * 2
        );
        let llama = catalogue::find("meta-llama/Llama-3.2-1B").expect("llama");
        assert_eq!((llama.rope_sets, llama.rope_dims), (1, 64));
        assert_eq!(
            prompt_shared_bytes(&llama, &s(2, 1024, Attention::Sdpa)),
            2 * 2 * 1024 * 64 * 2
        );
        let neox = catalogue::find("EleutherAI/pythia-1b").expect("pythia");
        assert_eq!(neox.rope_dims, neox.head_dim / 4);
        let phi2 = catalogue::find("microsoft/phi-2").expect("phi-2");
        assert_eq!(phi2.rope_dims, 32);
        let gpt2 = catalogue::find("gpt2").expect("gpt2");
        assert_eq!(prompt_shared_bytes(&gpt2, &s(1, 1024, Attention::Sdpa)), 0);
        // Mistral v0.1's 4096-token window: a mask only past it.
        let m = catalogue::find("mistralai/Mistral-7B-v0.1").expect("mistral");
        let tables = |seq: u64| 2 * seq * 128 * 2;
        assert_eq!(
            prompt_shared_bytes(&m, &s(1, 4096, Attention::Sdpa)),
            tables(4096)
        );
        assert_eq!(
            prompt_shared_bytes(&m, &s(1, 8192, Attention::Sdpa)),
            tables(8192) + 8192 * 8192
        );
    }

    /// Mixed precision on an RMSNorm model: the fp32 stream's norms save
    /// fp32 outputs and every projection saves its own 16-bit cast. One
    /// layer's saved tensors against the CPU oracle (MemTracker on fake
    /// tensors, `bench/estimate-oracle/`): the ACT difference between a one-
    /// and a two-layer model at batch 2 × 2048, mixed-bf16, full fine-tuning.
    #[test]
    fn mixed_precision_layers_match_the_oracle() {
        let s = Setup {
            task: Task::Train,
            precision: Precision::MixedBf16,
            batch: 2,
            seq: 2048,
            ..Setup::default()
        };
        for (id, oracle) in [
            ("Qwen/Qwen2.5-1.5B", 580_354_048u64),
            ("meta-llama/Llama-3.2-1B", 650_674_176),
        ] {
            let cfg = catalogue::find(id).expect(id);
            // The layer's autocast weight copies are saved too.
            let copies: u64 = cfg
                .layer_linears(1)
                .into_iter()
                .map(|(_, input, output, n)| input * output * n * 2)
                .sum();
            let got = layer_activation_bytes(&cfg, &s, 1, 2, 2048) + copies;
            assert!(got.abs_diff(oracle) <= 64, "{id}: {got} vs {oracle}");
        }
        // Pure bf16 is one shared input per projection group, 16-bit norms.
        let bf16 = Setup {
            precision: Precision::Bf16,
            ..s.clone()
        };
        let cfg = catalogue::find("Qwen/Qwen2.5-1.5B").expect("qwen");
        let h = cfg.hidden;
        let per_token = |st: &Setup| layer_activation_bytes(&cfg, st, 1, 1, 1);
        // Norms: +2h each (fp32 normalized tensor); casts: +2 for q/k/v and
        // +1 for gate/up, 2 bytes each.
        assert_eq!(per_token(&s) - per_token(&bf16), 2 * 2 * h + 3 * 2 * h);
    }

    /// bitsandbytes under transformers 5 leaves routed experts (fused 3-D
    /// parameters) and routers in 16 bits; vLLM quantizes them.
    #[test]
    fn bitsandbytes_skips_fused_moe_experts_under_transformers() {
        let m = catalogue::find("mistralai/Mixtral-8x7B-v0.1").expect("mixtral");
        let s = |quant| Setup {
            quant,
            ..Setup::default()
        };
        let (layers, experts, h, f) = (32u64, 8u64, 4096u64, 14_336u64);
        let routed = layers * experts * 3 * h * f;
        let router = layers * experts * h;
        for q in [Quant::Nf4, Quant::Nf4Dq, Quant::Int8] {
            let extra = weights_bytes(&m, &s(q)) - vllm_weights_bytes(&m, &s(q));
            assert_eq!(extra, bnb_unquantized_experts_bytes(&m, &s(q)));
            assert!(extra > 0);
        }
        // NF4: the experts and routers back at 2 bytes instead of 4.127 bits.
        assert_eq!(
            bnb_unquantized_experts_bytes(&m, &s(Quant::Nf4)),
            (routed + router) * 2 - (routed + router) * quant_bits_x1000(Quant::Nf4) / 8_000
        );
        // Everything but the 16-bit rest is what a 16-bit load weighs.
        let full = weights_bytes(&m, &s(Quant::None));
        let nf4 = weights_bytes(&m, &s(Quant::Nf4));
        assert!(nf4 < full && nf4 > full * 9 / 10, "{nf4} vs {full}");
        // Dense models, GPTQ/AWQ and FP8 checkpoints: nothing added.
        let dense = catalogue::find("meta-llama/Llama-3.1-8B").expect("llama");
        assert_eq!(bnb_unquantized_experts_bytes(&dense, &s(Quant::Nf4)), 0);
        for q in [Quant::None, Quant::Int4, Quant::Fp8] {
            assert_eq!(bnb_unquantized_experts_bytes(&m, &s(q)), 0);
        }
        // DeepSeek-V2-Lite: the first layer is dense, shared experts are nn.Linear.
        let ds = catalogue::find("deepseek-ai/DeepSeek-V2-Lite").expect("ds");
        let moe = ds.moe.clone().expect("moe");
        let mats = (ds.layers - moe.dense_layers) * moe.experts;
        assert_eq!(bnb_unquantized_experts_bytes(&ds, &s(Quant::Nf4)), {
            let w = mats * (3 * ds.hidden * moe.intermediate + ds.hidden);
            w * 2 - w * quant_bits_x1000(Quant::Nf4) / 8_000
        });
    }

    #[test]
    fn softcapping_keeps_one_more_logits_copy() {
        let g = crate::catalogue::find("gemma-2-27b").expect("gemma");
        assert!(g.logit_softcap);
        let plain = ModelConfig {
            logit_softcap: false,
            ..g.clone()
        };
        let s = Setup {
            task: Task::Train,
            batch: 2,
            seq: 1024,
            ..Setup::default()
        };
        let tv_beta = 2 * 1024 * g.vocab * s.precision.act_bytes();
        assert_eq!(
            training_logits_bytes(&g, &s) - training_logits_bytes(&plain, &s),
            tv_beta
        );
        assert!(
            !crate::catalogue::find("gemma-3-27b")
                .expect("g3")
                .logit_softcap
        );
    }

    /// MXFP4 covers the experts only: gpt-oss-20b is 12.8 GiB and -120b
    /// 60.8 GiB on disk (gpt-oss model card, Table 1), not a 4-bit total.
    #[test]
    fn mxfp4_quantizes_only_experts() {
        for (name, gib) in [("gpt-oss-20b", 12.8), ("gpt-oss-120b", 60.8)] {
            let cfg = crate::catalogue::find(name).expect(name);
            assert_eq!(cfg.native_quant, Some(Quant::Mxfp4));
            let s = Setup {
                quant: Quant::Mxfp4,
                ..Setup::default()
            };
            let w = weights_bytes(&cfg, &s) as f64 / (1u64 << 30) as f64;
            assert!((w - gib).abs() / gib < 0.02, "{name}: {w:.2} GiB");
            let (experts, _) = cfg.expert_params();
            assert!(experts > cfg.params() * 9 / 10, "{name}");
        }
    }

    #[test]
    fn mixed_adamw_is_16_bytes_per_param_plus_activations() {
        let cfg = catalogue::find("meta-llama/Llama-2-7b-hf").expect("model");
        let s = Setup {
            task: Task::Train,
            precision: Precision::MixedBf16,
            ..Setup::default()
        };
        let p = cfg.params();
        assert_eq!(weights_bytes(&cfg, &s), 4 * p);
        assert_eq!(gradients_bytes(&cfg, &s), 4 * p);
        assert_eq!(optimizer_bytes(&cfg, &s), 8 * p);
    }

    #[test]
    fn llama3_8b_kv_cache_matches_hf_blog() {
        // HF Llama 3.1 blog (§5.9): 8B KV at 1k tokens ≈ 0.125 GB (16-bit).
        let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
        let kv = kv_cache_bytes(&cfg, &Setup::default(), 1024);
        assert_eq!(kv, 2 * 32 * 8 * 128 * 1024 * 2);
        assert_eq!(kv, 134_217_728);
    }

    #[test]
    fn lora_q_v_rank_8_on_llama2_7b() {
        let cfg = catalogue::find("meta-llama/Llama-2-7b-hf").expect("model");
        let s = Setup {
            task: Task::Train,
            method: Method::Lora,
            lora_rank: 8,
            lora_targets: LoraTargets::Names(vec!["q".into(), "v".into()]),
            ..Setup::default()
        };
        // PEFT prints "trainable params: 4,194,304" for this setup.
        assert_eq!(lora_params(&cfg, &s), 4_194_304);
    }

    #[test]
    fn nf4_llama_7b_weights_near_qlora_paper() {
        // QLoRA Fig. 6 (§5.6 F3): 4-bit LLaMA-7B footprint 5,046 MB (incl. LoRA, context).
        let cfg = catalogue::find("meta-llama/Llama-2-7b-hf").expect("model");
        let s = Setup {
            quant: Quant::Nf4Dq,
            ..Setup::default()
        };
        let w = weights_bytes(&cfg, &s) as f64 / 1e6;
        assert!((3_600.0..4_200.0).contains(&w), "{w}");
    }

    #[test]
    fn zero_stages_shard_model_states() {
        let cfg = catalogue::find("meta-llama/Llama-2-7b-hf").expect("model");
        let base = Setup {
            task: Task::Train,
            precision: Precision::MixedBf16,
            gpus: 8,
            ..Setup::default()
        };
        let p = cfg.params();
        let z = |zero| {
            sharded_states(
                &cfg,
                &Setup {
                    zero,
                    ..base.clone()
                },
            )
        };
        assert_eq!(z(0).2, 8 * p);
        // DeepSpeed's mixed-precision layout: fp32 master + m + v (12 B) sharded.
        assert_eq!(z(1).0, 2 * p);
        assert_eq!(z(1).1, 2 * p);
        assert_eq!(z(1).2, 12 * p / 8);
        assert_eq!(z(2).1, 2 * p / 8);
        assert!(z(3).0 < 4 * p / 4);
        let off = sharded_states(
            &cfg,
            &Setup {
                zero: 2,
                offload: crate::setup::Offload::Optimizer,
                ..base.clone()
            },
        );
        assert_eq!(off.2, 0);
    }

    fn train(gpus: u64, tp: u64, pp: u64, zero: u8) -> Setup {
        Setup {
            task: Task::Train,
            precision: Precision::MixedBf16,
            gpus,
            tp,
            pp,
            zero,
            ..Setup::default()
        }
    }

    #[test]
    fn zero_over_16_bytes_per_param_matches_the_zero_paper() {
        // Rajbhandari et al. 2020 §3/§5: P_os+g+p = 16Ψ/N_d; P_os = 4Ψ + 12Ψ/N_d.
        let cfg = catalogue::find("meta-llama/Llama-2-7b-hf").expect("model");
        let p = cfg.params();
        let sum = |s: &Setup| {
            let (w, g, o, _) = sharded_states(&cfg, s);
            w + g + o
        };
        assert_eq!(sum(&train(8, 1, 1, 1)), 4 * p + 12 * p / 8);
        let z3 = sum(&train(8, 1, 1, 3));
        let largest = (0..cfg.layers).map(|i| cfg.layer_params(i)).max().unwrap();
        assert_eq!(z3, 2 * p / 8 + 2 * largest * 2 + 2 * p / 8 + 12 * p / 8);
    }

    #[test]
    fn tensor_parallel_divides_model_states() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-70B").expect("model");
        let one = sharded_states(&cfg, &train(1, 1, 1, 0));
        let tp8 = sharded_states(&cfg, &train(8, 8, 1, 0));
        assert_eq!(tp8.0, one.0 / 8);
        assert_eq!(tp8.2, one.2 / 8);
        let tp2 = sharded_states(&cfg, &train(2, 2, 1, 0));
        assert_eq!(tp2.0, one.0 / 2);
    }

    #[test]
    fn pipeline_stage_holds_its_layers_and_one_edge() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
        let p = cfg.params();
        let emb = cfg.embedding_params();
        let per_layer = (p - emb) / cfg.layers;
        // 32 layers over 4 stages: 8 layers plus the embedding (or the head).
        assert_eq!(stage_params(&cfg, 4), 8 * per_layer + emb / 2);
        assert_eq!(stage_params(&cfg, 1), p);
        let s = train(4, 1, 4, 0);
        assert_eq!(stage_layers(&cfg, &s), 8);
        let w = sharded_states(&cfg, &s).0;
        assert_eq!(w, model_share(&cfg, 4, 1, weights_bytes(&cfg, &s)));
        assert!(w < weights_bytes(&cfg, &s) / 3);
    }

    #[test]
    fn zero_shards_over_data_parallel_only() {
        // 16 GPUs as tp 2 × pp 1 × dp 8: ZeRO-1 divides the optimizer by 8, not 16.
        let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
        let s = train(16, 2, 1, 1);
        assert_eq!(s.dp(), 8);
        let (_, _, o, _) = sharded_states(&cfg, &s);
        let whole = 12 * cfg.params();
        assert_eq!(o, model_share(&cfg, 1, 2, whole) / 8);
    }

    #[test]
    fn activations_follow_korthikanti_with_sequence_parallelism() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
        let s = |tp, pp, accum| Setup {
            grad_accum: accum,
            seq: 2048,
            ..train(tp * pp, tp, pp, 0)
        };
        let one = training_activations_bytes(&cfg, &s(1, 1, 1));
        let tp4 = training_activations_bytes(&cfg, &s(4, 1, 1));
        // Everything saved splits over the tp ranks (SP); weight copies too.
        assert!((tp4 as i128 - one as i128 / 4).abs() <= 2, "{tp4} {one}");
        // 1F1B: the first of 4 stages keeps 4 micro-batches of its 8 layers,
        // about the whole model's activations (Korthikanti §4.2.3).
        let pp4 = training_activations_bytes(&cfg, &s(1, 4, 8));
        let last = stage_activations_bytes(&cfg, &s(1, 4, 8), 1);
        let copies = model_share(&cfg, 4, 1, autocast_weight_copies_bytes(&cfg, &s(1, 4, 8)));
        assert_eq!(pp4 - copies, 4 * (last - copies));
        assert!(pp4 < one, "{pp4} {one}");
        // One micro-batch per step: nothing else in flight.
        assert_eq!(in_flight_micro_batches(&s(1, 4, 1)), 1);
    }

    #[test]
    fn tensor_parallel_splits_kv_heads_until_replicated() {
        let cfg = catalogue::find("meta-llama/Llama-3.1-8B").expect("model");
        assert_eq!(cfg.kv_heads, 8);
        assert_eq!(kv_share(&cfg, 1, 2, 1 << 20), 1 << 19);
        // 16 ranks, 8 KV heads: each head lives on two ranks.
        assert_eq!(kv_share(&cfg, 1, 16, 1 << 20), 1 << 17);
    }

    #[test]
    fn nccl_buffers_only_with_collectives() {
        assert_eq!(nccl_bytes(&Setup::default()), 0);
        assert_eq!(nccl_bytes(&train(8, 1, 1, 0)), 2 << 30);
        let split = Setup {
            gpus: 2,
            ..Setup::default()
        };
        assert_eq!(nccl_bytes(&split), 0, "device_map copies without NCCL");
        let tp = Setup {
            gpus: 2,
            tp: 2,
            ..Setup::default()
        };
        assert_eq!(nccl_bytes(&tp), 2 << 30);
        let pp = Setup {
            gpus: 2,
            pp: 2,
            ..Setup::default()
        };
        assert_eq!(
            nccl_bytes(&pp),
            0,
            "pipeline stages only send point to point"
        );
    }

    #[test]
    fn sliding_window_caps_gpt_oss_cache() {
        let cfg = catalogue::find("openai/gpt-oss-20b").expect("model");
        let s = Setup::default();
        let long = kv_cache_bytes(&cfg, &s, 100_000);
        let per = 2 * cfg.kv_heads * cfg.head_dim * 2;
        assert_eq!(long, per * (12 * 100_000 + 12 * 128));
    }

    /// Saved bytes per token of one layer, checked against the CPU oracle's
    /// saved tensors (bench/estimate-oracle: one layer under
    /// `saved_tensors_hooks`, bf16, full training).
    fn per_token(model: &str, attention: Attention) -> u64 {
        let cfg = catalogue::find(model).expect("model");
        let s = Setup {
            task: Task::Train,
            attention,
            ..Setup::default()
        };
        layer_activation_bytes(&cfg, &s, 0, 1, 512) / 512
    }

    #[test]
    fn per_layer_saved_bytes_match_the_oracle() {
        // Llama-3.2-3B, SDPA: the oracle's per-layer difference (4 vs 2
        // layers) is 131,176 B per token (with the two norms' fp32 `rsqrt`
        // rows, 8 B, exactly).
        assert_eq!(
            per_token("meta-llama/Llama-3.2-3B", Attention::Sdpa),
            131_176
        );
        // Gemma-2-9B, eager with soft-capping: q, repeated k and v, o_proj's
        // input, the q/k/v input, fp32-scaled norms (4 × (8h + an fp32
        // `rsqrt`)), the MLP (h + 4f) and 2 + 4 + 2 B per score (16 heads ×
        // 512 keys).
        let h = 3584;
        let linear = 4 * 8192 + 7168 + 4 * (8 * h + 4) + 7168 + 4 * 28_672;
        assert_eq!(
            per_token("google/gemma-2-9b", Attention::Eager),
            linear + 16 * 512 * 8
        );
        // Phi-3-mini: the fused qkv output stays alive through v.
        let fused = per_token("microsoft/Phi-3-mini-4k-instruct", Attention::Sdpa);
        let mut cfg = catalogue::find("microsoft/Phi-3-mini-4k-instruct").expect("model");
        cfg.fused_qkv_rope = false;
        let s = Setup {
            task: Task::Train,
            ..Setup::default()
        };
        let split = layer_activation_bytes(&cfg, &s, 0, 1, 512) / 512;
        assert_eq!(fused - split, 2 * (3072 + 3072));
    }
}
