//! The architecture numbers the estimator needs, read from a Hugging Face
//! `config.json` (`transformers` `PretrainedConfig` key names, with the
//! per-architecture aliases GPT-2, BERT, Qwen v1 and DeepSeek use), and the
//! parameter count derived from them.
//!
//! This lives in `oomkit_estimate`, not `oomkit_core`, because only `estimate`
//! reads model configs (see ARCHITECTURE.md).

use crate::arch::Arch;
use serde::Serialize;
use serde_json::Value;

/// Multi-head latent attention (DeepSeek-V2/V3 `config.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mla {
    /// `q_lora_rank` (0 = no query compression).
    pub q_lora_rank: u64,
    /// `kv_lora_rank`: the compressed latent cached per token.
    pub kv_lora_rank: u64,
    /// `qk_rope_head_dim`.
    pub rope_dim: u64,
    /// `qk_nope_head_dim`.
    pub nope_dim: u64,
    /// `v_head_dim`.
    pub v_dim: u64,
}

/// Mixture-of-experts MLP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub experts: u64,
    /// Experts each token uses.
    pub active: u64,
    /// Intermediate size of one expert.
    pub intermediate: u64,
    /// Always-on shared experts (DeepSeek; Qwen2-MoE's one shared expert).
    pub shared: u64,
    /// Intermediate size of one shared expert: `intermediate` (DeepSeek),
    /// or Qwen2-MoE's `shared_expert_intermediate_size`.
    pub shared_intermediate: u64,
    /// Leading layers that keep a dense MLP (`first_k_dense_replace`).
    pub dense_layers: u64,
}

/// One causal-LM or encoder architecture.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelConfig {
    /// Repo id or the name the user gave.
    pub id: String,
    /// `model_type`, typed.
    pub model_type: Arch,
    /// Decoder (or encoder) layers.
    pub layers: u64,
    /// Hidden size h.
    pub hidden: u64,
    /// Attention heads a.
    pub heads: u64,
    /// Key/value heads (GQA/MQA); equals `heads` for MHA.
    pub kv_heads: u64,
    /// Per-head dimension.
    pub head_dim: u64,
    /// Dense MLP intermediate size f (per projection).
    pub intermediate: u64,
    /// Vocabulary V.
    pub vocab: u64,
    /// Input embedding and LM head share one matrix.
    pub tied_embeddings: bool,
    /// Gated MLP (SwiGLU/GeGLU: gate, up, down) rather than fc1/fc2.
    pub glu: bool,
    /// The MLP activation is transformers' `NewGELUActivation` (`gelu_new`:
    /// GPT-2, Phi-1/1.5/2), written as eight elementwise Python ops rather
    /// than one fused kernel: autograd saves four f-wide tensors (the input,
    /// `tanh`'s output, `0.5·x` and `1 + tanh`) where a fused GELU saves one,
    /// and inference holds four at once (transformers `activations.py`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub composite_gelu: bool,
    /// The MLP's activation is ReLU (OPT: `activation_function: "relu"`):
    /// autograd's `threshold_backward` reads ReLU's output, which is also the
    /// second linear's input, so one f-wide tensor is saved where GELU saves
    /// its input as well (checked with saved-tensor hooks on OPT-1.3b,
    /// transformers 5.24: fc1's output is freed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub relu_mlp: bool,
    /// Linear layers carry biases.
    pub bias: bool,
    /// Learned absolute position (and token-type) embedding rows.
    pub position_rows: u64,
    /// OPT's `word_embed_proj_dim` where it differs from `hidden_size`
    /// (opt-350m: 512 vs 1024): the token embedding and the tied head are
    /// that wide, with bias-free `project_in`/`project_out` between them and
    /// the blocks (modeling_opt.py). 0 otherwise.
    #[serde(skip_serializing_if = "is_zero")]
    pub embed_proj: u64,
    /// Norms outside the blocks: 1 (the final norm); BLOOM 2 (its
    /// `word_embeddings_layernorm` and `ln_f`); OPT 0 when its LayerNorms
    /// come after each sublayer (`do_layer_norm_before` false, opt-350m) or
    /// `_remove_final_layer_norm` is set.
    #[serde(skip_serializing_if = "is_one")]
    pub outer_norms: u64,
    /// Norms per layer (2; Gemma-2 has 4; Phi-1/2 and Falcon-7B's parallel
    /// block have 1).
    pub norms_per_layer: u64,
    /// `final_logit_softcapping` is set (Gemma-2): the head output goes
    /// through `/cap`, `tanh`, `*cap`, each a new vocabulary-wide tensor.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub logit_softcap: bool,
    /// `attn_logit_softcapping` is set (Gemma-2): eager attention passes the
    /// scores through `tanh` (one more saved a·s² tensor), and transformers
    /// has no SDPA path for it, so SDPA means eager (flash-attention-2 can
    /// soft-cap inside the kernel).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub attn_softcap: bool,
    /// One fused q/k/v projection whose output is split into views, with
    /// rotary embeddings applied to q and k (Phi-3 `qkv_proj`, Falcon and
    /// GPT-NeoX `query_key_value`): v stays a view of the fused output, so the
    /// whole q + 2·kv output lives as long as attention saves v, beside the
    /// new rotated q and k (checked against the CPU oracle's saved tensors).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fused_qkv_rope: bool,
    /// Gemma-style RMSNorm: the `(1 + weight)` scale is applied in fp32
    /// before the cast back (`output * (1.0 + self.weight.float())`), so the
    /// normalized tensor autograd saves is fp32, not the activation dtype.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fp32_norm_scale: bool,
    /// Per-head RMSNorms on queries and keys (`q_norm`/`k_norm`: Gemma-3, Qwen3).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub qk_norm: bool,
    /// Rotary (cos, sin) tables the model's forward builds once and hands to
    /// every layer: 0 with learned or ALiBi positions (GPT-2, BERT, BLOOM,
    /// MPT), 2 for Gemma 3 (one for its global layers, one for its local
    /// layers: `rope_theta` and `rope_local_base_freq`), else 1.
    #[serde(skip)]
    pub rope_sets: u64,
    /// Width of each rotary table: the rotated part of a head
    /// (`partial_rotary_factor`/`rotary_pct` of `head_dim`; MLA's
    /// `qk_rope_head_dim`).
    #[serde(skip)]
    pub rope_dims: u64,
    /// Sliding-window size, when some layers use one.
    pub sliding_window: Option<u64>,
    /// How many layers are sliding-window layers.
    pub sliding_layers: u64,
    /// MoE MLP, when present.
    pub moe: Option<Moe>,
    /// MLA attention, when present.
    pub mla: Option<Mla>,
    /// Encoder-only (BERT-style): no KV cache, no generation.
    pub encoder: bool,
    /// Attention-probability dropout is on (saves a 1-byte mask and a copy of the probabilities).
    pub attn_dropout: bool,
    /// Hidden/residual dropout is on (saves 1-byte masks).
    pub hidden_dropout: bool,
    /// The longest context the model supports (`max_position_embeddings`,
    /// `n_positions`, `seq_length`), when the config states it.
    pub max_positions: Option<u64>,
    /// The published checkpoint's quantization (`quantization_config.quant_method`:
    /// `fp8` → FP8, `gptq`/`awq` → 4-bit at 4.25 bits, `mxfp4` → MXFP4 on the
    /// MoE experts only), used when the user does not choose `--quant`.
    pub native_quant: Option<crate::setup::Quant>,
    /// Parameters outside the decoder stack: the vision tower and the
    /// multimodal projector of a vision-language wrapper (Gemma-3's SigLIP
    /// tower). They count in the weights; they hold no KV cache and, for a
    /// text-only workload, no activations.
    #[serde(skip_serializing_if = "is_zero")]
    pub vision_params: u64,
    /// A catalogue config reconstructed from documented values rather than
    /// copied from the published file (see `models/SOURCES.md`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reconstructed: bool,
    /// The catalogue entry whose config this is, when the name given is not
    /// that entry's own id (a fine-tune's hub id, `…-Instruct`, `…-chat-hf`):
    /// the fine-tune shares the entry's architecture.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_to: Option<String>,
    /// The `config.json` read for a hub id from the local Hugging Face cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_file: Option<String>,
    /// The dtype the config states (`torch_dtype`, or `dtype` since
    /// transformers 4.56): `bfloat16`, `float16`, `float32`; what
    /// transformers ≥ 5 loads without a dtype ([`crate::versions`]).
    #[serde(skip)]
    pub dtype: Option<String>,
    /// The context vLLM derives from the config when `--max-model-len` is
    /// not given: the positions scaled by `rope_scaling` (or transformers
    /// 5's `rope_parameters`) `factor`, from `original_max_position_embeddings`
    /// for YaRN; `su`, `longrope` and `llama3` scaling leave it (vLLM
    /// `vllm/config/model.py` `_get_and_verify_max_len`). `None` without a
    /// scaling that changes it.
    #[serde(skip)]
    pub scaled_positions: Option<u64>,
    /// A value the catalogue applied for a variant resolved to an entry
    /// (its documented context), in words.
    #[serde(skip)]
    pub variant_note: Option<String>,
    /// Exact sizes from safetensors headers beside the config, when read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<crate::checkpoint::Checkpoint>,
}

/// A `config.json` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not JSON at all.
    #[error("not valid JSON: {0}")]
    Json(String),
    /// A key the estimate needs is missing or not a positive integer.
    #[error("missing or invalid `{0}` (a positive integer)")]
    Missing(&'static str),
    /// Numbers that contradict each other.
    #[error("{}", crate::knob::words(.0))]
    Invalid(String),
    /// A number above the documented limit ([`limits`]).
    #[error(
        "{} is {value}, above the limit of {max} (far beyond any published model; see README \"Limits\")",
        crate::knob::words(.key)
    )]
    Limit {
        /// The `config.json` key (or flag) that states it.
        key: &'static str,
        /// What the input says.
        value: u128,
        /// The largest accepted.
        max: u64,
    },
}

impl ConfigError {
    /// The message with each setting named by `name` (a bare model's
    /// numbers are settings; see [`crate::knob`]).
    pub fn message<'a>(
        &self,
        name: &dyn Fn(crate::knob::Knob) -> std::borrow::Cow<'a, str>,
    ) -> String {
        match self {
            ConfigError::Invalid(m) => crate::knob::fill(m, name),
            ConfigError::Limit { key, value, max } => format!(
                "{} is {value}, above the limit of {max} (far beyond any published model; see README \"Limits\")",
                crate::knob::fill(key, name)
            ),
            e => e.to_string(),
        }
    }
}

/// Upper bounds on what a config may state, each far above any published
/// model (the largest today: 126 layers, hidden 16,384 and 128 heads in
/// Llama-3.1-405B, head_dim 256, intermediate 53,248, vocabulary 262,144 in
/// Gemma-3, 384 routed experts in Kimi-K2, 1T parameters). They keep every
/// product the estimate forms inside 64 bits; the totals are still computed
/// with checked (128-bit) arithmetic before anything multiplies them.
pub mod limits {
    /// Layers.
    pub const LAYERS: u64 = 100_000;
    /// Hidden size.
    pub const HIDDEN: u64 = 1 << 20;
    /// Attention heads and key/value heads.
    pub const HEADS: u64 = 1 << 14;
    /// Per-head dimension (and MLA's per-head dims).
    pub const HEAD_DIM: u64 = 1 << 14;
    /// MLP intermediate size (dense or per expert).
    pub const INTERMEDIATE: u64 = 1 << 22;
    /// Vocabulary.
    pub const VOCAB: u64 = 1 << 24;
    /// Routed (and shared) experts per layer.
    pub const EXPERTS: u64 = 1 << 14;
    /// MLA's compressed ranks (`q_lora_rank`, `kv_lora_rank`).
    pub const MLA_RANK: u64 = 1 << 16;
    /// Learned position rows (BERT/GPT-2 `max_position_embeddings`).
    pub const POSITION_ROWS: u64 = 1 << 32;
    /// Total parameters (≈ 1.1 × 10^15, a thousand times the largest model).
    pub const PARAMS: u64 = 1 << 50;
}

/// Bytes above which an estimate is refused rather than computed: 1 EiB on
/// one GPU. Every term the estimate adds is checked against it (in 128-bit
/// arithmetic) before the 64-bit formulas run, so their sums cannot wrap.
pub const MAX_BYTES: u64 = 1 << 60;

/// `x` as u64, saturating (the callers compare it with a limit).
pub(crate) fn sat(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

fn limit(key: &'static str, value: impl Into<u128>, max: u64) -> Result<(), ConfigError> {
    let value = value.into();
    if value > u128::from(max) {
        return Err(ConfigError::Limit { key, value, max });
    }
    Ok(())
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

fn int(v: &Value, keys: &[&'static str]) -> Option<u64> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_u64))
}

fn need(v: &Value, keys: &[&'static str]) -> Result<u64, ConfigError> {
    match int(v, keys) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(ConfigError::Missing(keys.first().copied().unwrap_or("?"))),
    }
}

impl ModelConfig {
    /// The context vLLM serves without `--max-model-len`: the RoPE-scaled
    /// one ([`ModelConfig::scaled_positions`]), else the positions.
    pub fn vllm_context(&self) -> Option<u64> {
        self.scaled_positions.or(self.max_positions)
    }

    /// The model's name for headlines: its id, plus where its config came
    /// from when that is not the id itself (`Llama-2-7b-chat-hf, config of
    /// catalogue entry meta-llama/Llama-2-7b-hf`, or the cached file); the
    /// headline adds the parameter count in brackets after it.
    pub fn label(&self) -> String {
        match (&self.resolved_to, &self.config_file) {
            (Some(entry), _) => format!("{}, config of catalogue entry {entry}", self.id),
            (None, Some(file)) if file.starts_with("http") => {
                format!("{}, config from the Hugging Face Hub: {file}", self.id)
            }
            (None, Some(file)) => {
                format!("{}, config from the Hugging Face cache: {file}", self.id)
            }
            (None, None) => self.id.clone(),
        }
    }

    /// Parses a Hugging Face `config.json` text. `id` names it in outputs.
    pub fn from_hf_json(id: &str, text: &str) -> Result<ModelConfig, ConfigError> {
        let v: Value = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
        if !v.is_object() {
            return Err(ConfigError::Json("expected a JSON object".into()));
        }
        let vision_params = vision_params(&v)?;
        let top_dtype = config_dtype(&v);
        // Multimodal wrappers (Gemma-3, Llava) keep the LM under `text_config`.
        let v = match v.get("text_config") {
            Some(t) if t.is_object() => t.clone(),
            _ => v,
        };
        let model_type =
            Arch::from_model_type(v.get("model_type").and_then(Value::as_str).unwrap_or(""));
        let mt = &model_type;
        // BLOOM-560m's config states its width as `n_embed` (BloomConfig
        // maps it to `hidden_size`).
        let hidden = need(&v, &["hidden_size", "n_embd", "d_model", "n_embed"])?;
        // MPT: `n_layers`, `n_heads` (MptConfig).
        let layers = need(
            &v,
            &["num_hidden_layers", "n_layer", "num_layers", "n_layers"],
        )?;
        let heads = need(&v, &["num_attention_heads", "n_head", "n_heads"])?;
        let vocab = need(&v, &["vocab_size"])?;
        let flag = |k: &str| v.get(k).and_then(Value::as_bool);
        // Falcon (modeling_falcon.py, FalconAttention): the new decoder
        // architecture (40B/180B) has `num_kv_heads` KV heads; otherwise
        // `multi_query` (FalconConfig default true) means one KV head.
        let new_decoder = *mt == Arch::Falcon && flag("new_decoder_architecture") == Some(true);
        let multi_query = flag("multi_query").unwrap_or(*mt == Arch::Falcon) && !new_decoder;
        let kv_heads = if multi_query {
            1
        } else {
            int(&v, &["num_key_value_heads", "num_kv_heads", "n_head_kv"]).unwrap_or(heads)
        };
        if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
            return Err(ConfigError::Invalid(format!(
                "num_key_value_heads {kv_heads} does not divide num_attention_heads {heads}"
            )));
        }
        let head_dim = int(&v, &["head_dim", "kv_channels"]).unwrap_or(hidden / heads);
        let mut intermediate = int(
            &v,
            &["intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim"],
        )
        .unwrap_or(hidden.saturating_mul(4));
        let act = v
            .get("hidden_act")
            .or_else(|| v.get("activation_function"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let glu = match mt {
            Arch::Gpt2
            | Arch::Bert
            | Arch::Roberta
            | Arch::Phi
            | Arch::GptNeox
            | Arch::Falcon
            | Arch::GptBigcode
            | Arch::Starcoder2
            | Arch::Gptj
            | Arch::Opt
            | Arch::Bloom
            | Arch::Mpt => false,
            Arch::Qwen => {
                // Qwen v1 states the sum of w1 and w2 (modeling_qwen.py: ff_dim_in = intermediate_size // 2).
                intermediate /= 2;
                true
            }
            _ => act != "gelu" && act != "gelu_new" || mt.is_gemma(),
        };
        let bias = matches!(mt, Arch::Gpt2 | Arch::GptBigcode | Arch::Bert | Arch::Roberta | Arch::Phi | Arch::GptNeox | Arch::Gptj | Arch::Bloom)
            // OPTConfig: `enable_bias` defaults to true.
            || (*mt == Arch::Opt && flag("enable_bias") != Some(false))
            || (*mt == Arch::Falcon && flag("bias") == Some(true))
            || v.get("attention_bias").and_then(Value::as_bool) == Some(true)
            || *mt == Arch::Qwen2
            || *mt == Arch::Qwen2Moe
            // StableLmConfig: q/k/v biases when `use_qkv_bias`.
            || (*mt == Arch::Stablelm && flag("use_qkv_bias") == Some(true))
            // Starcoder2Config: use_bias defaults to true (q/k/v/o and c_fc/c_proj).
            || (*mt == Arch::Starcoder2 && flag("use_bias") != Some(false))
            || (*mt == Arch::Qwen && v.get("no_bias").and_then(Value::as_bool) == Some(false));
        // The config class's own `tie_word_embeddings` default: true unless
        // the class says otherwise (Llama-style configs default to false).
        // GPTBigCodeConfig declares `tie_word_embeddings: bool = True`
        // (transformers 5.24 `configuration_gpt_bigcode.py`): StarCoder's
        // config.json states no key and its head is the embedding.
        let tied_default = matches!(
            mt,
            Arch::Gpt2
                | Arch::GptBigcode
                | Arch::Bert
                | Arch::Roberta
                | Arch::Gemma
                | Arch::Gemma2
                | Arch::Gemma3Text
                | Arch::Falcon
                | Arch::Starcoder2
                | Arch::Cohere
                | Arch::Opt
                | Arch::Bloom
                | Arch::Mpt
        );
        let tied_embeddings = v
            .get("tie_word_embeddings")
            .and_then(Value::as_bool)
            .unwrap_or(tied_default);
        let position_rows = match mt {
            // GPTBigCodeModel: `wpe = nn.Embedding(max_position_embeddings, …)`,
            // `n_positions` in its config (default 1024).
            Arch::Gpt2 | Arch::GptBigcode => int(&v, &["n_positions"]).unwrap_or(1024),
            // OPTLearnedPositionalEmbedding: max_position_embeddings + 2 rows
            // (positions start at offset 2).
            Arch::Opt => int(&v, &["max_position_embeddings"])
                .unwrap_or(2048)
                .saturating_add(2),
            Arch::Bert | Arch::Roberta => int(&v, &["max_position_embeddings"])
                .unwrap_or(512)
                .saturating_add(int(&v, &["type_vocab_size"]).unwrap_or(2)),
            _ => 0,
        };
        let norms_per_layer = match mt {
            // Phi-1/2, GPT-J (ln_1) and Cohere (input_layernorm) feed one
            // norm to attention and MLP in parallel.
            Arch::Phi | Arch::Gptj | Arch::Cohere => 1,
            // FalconDecoderLayer: one input_layernorm for the parallel block,
            // ln_attn + ln_mlp for the new decoder architecture.
            Arch::Falcon if !new_decoder && flag("parallel_attn") != Some(false) => 1,
            m if m.is_gemma2() || m.is_gemma3() => 4,
            _ => 2,
        };
        let embed_proj = match int(&v, &["word_embed_proj_dim"]) {
            Some(p) if *mt == Arch::Opt && p != hidden => p,
            _ => 0,
        };
        let outer_norms = match mt {
            Arch::Bloom => 2,
            Arch::Opt
                if flag("do_layer_norm_before") == Some(false)
                    || flag("_remove_final_layer_norm") == Some(true) =>
            {
                0
            }
            _ => 1,
        };
        let experts = int(
            &v,
            &["num_local_experts", "num_experts", "n_routed_experts"],
        )
        .unwrap_or(0);
        // Qwen2-MoE (modeling_qwen2_moe.py): one shared expert of
        // `shared_expert_intermediate_size` with a 1-output sigmoid gate.
        let qwen_shared = int(&v, &["shared_expert_intermediate_size"]).filter(|n| *n > 0);
        let moe = if experts > 1 {
            let routed = int(&v, &["moe_intermediate_size"]).unwrap_or(intermediate);
            Some(Moe {
                experts,
                active: int(&v, &["num_experts_per_tok", "experts_per_token"]).unwrap_or(2),
                intermediate: routed,
                shared: int(&v, &["n_shared_experts"]).unwrap_or(u64::from(qwen_shared.is_some())),
                shared_intermediate: qwen_shared.unwrap_or(routed),
                dense_layers: int(&v, &["first_k_dense_replace"]).unwrap_or(0),
            })
        } else {
            None
        };
        let mla = int(&v, &["kv_lora_rank"]).map(|kv_lora_rank| Mla {
            q_lora_rank: int(&v, &["q_lora_rank"]).unwrap_or(0),
            kv_lora_rank,
            rope_dim: int(&v, &["qk_rope_head_dim"]).unwrap_or(64),
            nope_dim: int(&v, &["qk_nope_head_dim"]).unwrap_or(128),
            v_dim: int(&v, &["v_head_dim"]).unwrap_or(128),
        });
        let window = int(&v, &["sliding_window"]).filter(|w| *w > 0);
        let use_sw = v.get("use_sliding_window").and_then(Value::as_bool);
        let sliding_layers = match (window, v.get("layer_types").and_then(Value::as_array)) {
            (Some(_), Some(types)) => (types
                .iter()
                .filter(|t| t.as_str() == Some("sliding_attention"))
                .count() as u64)
                .min(layers),
            (Some(_), None) if use_sw == Some(false) => 0,
            // Gemma-2 alternates local and global layers (modeling_gemma2.py).
            (Some(_), None) if *mt == Arch::Gemma2 => layers / 2,
            // Gemma-3: layer i is global when (i + 1) % sliding_window_pattern == 0
            // (Gemma3TextConfig, pattern default 6).
            (Some(_), None) if mt.is_gemma3() => {
                let pattern = int(&v, &["sliding_window_pattern"]).unwrap_or(6).max(1);
                layers - layers / pattern
            }
            (Some(_), None) if matches!(mt, Arch::Mistral | Arch::Phi3) => layers,
            _ => 0,
        };
        let encoder = matches!(mt, Arch::Bert | Arch::Roberta);
        let positive = |keys: &[&str]| {
            keys.iter()
                .any(|k| v.get(*k).and_then(Value::as_f64).is_some_and(|p| p > 0.0))
        };
        let attn_dropout = positive(&[
            "attention_probs_dropout_prob",
            "attn_pdrop",
            "attention_dropout",
        ]);
        let native_quant = v
            .get("quantization_config")
            .and_then(|q| q.get("quant_method"))
            .and_then(Value::as_str)
            .and_then(|m| match m {
                "fp8" | "fbgemm_fp8" | "compressed-tensors" => Some(crate::setup::Quant::Fp8),
                "mxfp4" => Some(crate::setup::Quant::Mxfp4),
                "gptq" | "awq" => Some(crate::setup::Quant::Int4),
                "bitsandbytes" => None,
                _ => None,
            });
        let hidden_dropout = positive(&["hidden_dropout_prob", "resid_pdrop", "hidden_dropout"]);
        let fp32_norm_scale = mt.is_gemma();
        let fused_qkv_rope = matches!(mt, Arch::Phi3 | Arch::Falcon | Arch::GptNeox);
        let qk_norm = matches!(
            mt,
            Arch::Gemma3Text | Arch::Gemma3 | Arch::Qwen3 | Arch::Qwen3Moe | Arch::Olmo2
        );
        let alibi = matches!(mt, Arch::Bloom | Arch::Mpt) || flag("alibi") == Some(true);
        let rope_sets = if encoder || position_rows > 0 || alibi {
            0
        } else if mt.is_gemma3() {
            2
        } else {
            1
        };
        let partial = v
            .get("partial_rotary_factor")
            .or_else(|| v.get("rotary_pct"))
            .and_then(Value::as_f64)
            .filter(|f| *f > 0.0 && *f <= 1.0)
            .unwrap_or(1.0);
        let rope_dims = match &mla {
            Some(m) => m.rope_dim,
            // transformers: int(head_dim * partial_rotary_factor).
            None => (head_dim as f64 * partial) as u64,
        };
        let cfg = ModelConfig {
            id: id.to_string(),
            model_type,
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            intermediate,
            vocab,
            tied_embeddings,
            glu,
            composite_gelu: !glu && act == "gelu_new",
            relu_mlp: !glu && act == "relu",
            bias,
            position_rows,
            embed_proj,
            outer_norms,
            norms_per_layer,
            qk_norm,
            attn_softcap: v
                .get("attn_logit_softcapping")
                .and_then(Value::as_f64)
                .is_some_and(|c| c > 0.0),
            fp32_norm_scale,
            fused_qkv_rope,
            logit_softcap: v
                .get("final_logit_softcapping")
                .and_then(Value::as_f64)
                .is_some_and(|c| c > 0.0),
            rope_sets,
            rope_dims,
            sliding_window: if sliding_layers > 0 { window } else { None },
            sliding_layers,
            moe,
            mla,
            encoder,
            attn_dropout,
            hidden_dropout,
            max_positions: int(
                &v,
                &[
                    "max_position_embeddings",
                    "n_positions",
                    "seq_length",
                    "max_seq_len",
                ],
            ),
            native_quant,
            vision_params,
            reconstructed: false,
            resolved_to: None,
            config_file: None,
            dtype: config_dtype(&v).or(top_dtype),
            scaled_positions: scaled_positions(
                &v,
                int(
                    &v,
                    &[
                        "max_position_embeddings",
                        "n_positions",
                        "seq_length",
                        "max_seq_len",
                    ],
                ),
            ),
            variant_note: None,
            checkpoint: None,
        };
        cfg.check()?;
        Ok(cfg)
    }

    /// Checks every number against [`limits`] and the parameter total
    /// (computed in 128 bits, closed-form over the layers) against
    /// [`limits::PARAMS`]; checkpoint sizes from headers against
    /// [`MAX_BYTES`]. After it, the 64-bit parameter and size formulas
    /// cannot overflow. Keys are named as `config.json` states them.
    pub fn check(&self) -> Result<(), ConfigError> {
        use limits as l;
        limit("num_hidden_layers", self.layers, l::LAYERS)?;
        limit("hidden_size", self.hidden, l::HIDDEN)?;
        limit("num_attention_heads", self.heads, l::HEADS)?;
        limit("num_key_value_heads", self.kv_heads, l::HEADS)?;
        limit("head_dim", self.head_dim, l::HEAD_DIM)?;
        limit("intermediate_size", self.intermediate, l::INTERMEDIATE)?;
        limit("vocab_size", self.vocab, l::VOCAB)?;
        limit(
            "learned position rows (max_position_embeddings + type_vocab_size)",
            self.position_rows,
            l::POSITION_ROWS,
        )?;
        limit("norms per layer", self.norms_per_layer, 8)?;
        limit("sliding layers", self.sliding_layers, self.layers)?;
        if let Some(m) = &self.moe {
            limit("num_experts", m.experts, l::EXPERTS)?;
            limit("num_experts_per_tok", m.active, m.experts)?;
            limit("n_shared_experts", m.shared, l::EXPERTS)?;
            limit("moe_intermediate_size", m.intermediate, l::INTERMEDIATE)?;
            limit(
                "shared_expert_intermediate_size",
                m.shared_intermediate,
                l::INTERMEDIATE,
            )?;
        }
        if let Some(m) = &self.mla {
            limit("q_lora_rank", m.q_lora_rank, l::MLA_RANK)?;
            limit("kv_lora_rank", m.kv_lora_rank, l::MLA_RANK)?;
            limit("qk_rope_head_dim", m.rope_dim, l::HEAD_DIM)?;
            limit("qk_nope_head_dim", m.nope_dim, l::HEAD_DIM)?;
            limit("v_head_dim", m.v_dim, l::HEAD_DIM)?;
        }
        limit("vision_config parameters", self.vision_params, l::PARAMS)?;
        limit("parameters", self.params_wide(), l::PARAMS)?;
        if let Some(ck) = &self.checkpoint {
            limit("checkpoint tensor elements", ck.elements, l::PARAMS)?;
            limit("checkpoint bytes", ck.bytes, MAX_BYTES)?;
        }
        Ok(())
    }

    /// The layers `lo..hi` grouped by kind, as (a representative index,
    /// count): every per-layer quantity depends only on whether a layer is
    /// one of an MoE model's leading dense layers, so sums over layers are
    /// `count × value` — closed-form, whatever the layer count.
    pub fn layer_groups(&self, lo: u64, hi: u64) -> [(u64, u64); 2] {
        let hi = hi.max(lo);
        let split = self
            .moe
            .as_ref()
            .map_or(hi, |m| m.dense_layers.clamp(lo, hi));
        [(lo, split - lo), (split, hi - split)]
    }

    /// Σ over layers `lo..hi` of `f(layer)`, closed-form ([`Self::layer_groups`]),
    /// in 128 bits.
    pub fn sum_layers(&self, lo: u64, hi: u64, f: impl Fn(u64) -> u128) -> u128 {
        self.layer_groups(lo, hi)
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(i, n)| f(i).saturating_mul(u128::from(n)))
            .fold(0u128, u128::saturating_add)
    }

    /// Total parameters in 128 bits (what [`Self::check`] bounds).
    fn params_wide(&self) -> u128 {
        u128::from(self.embedding_params())
            .saturating_add(self.sum_layers(0, self.layers, |i| u128::from(self.layer_params(i))))
            .saturating_add(u128::from(self.vision_params))
    }

    /// A bare decoder from a parameter count (`--params 7B`) and optional shape
    /// overrides. Missing numbers follow Llama proportions: 128-wide heads,
    /// SwiGLU f ≈ 8/3·h rounded to 256, vocab 32000, untied, and the hidden size
    /// solved from P ≈ 2·V·h + L·(4h² + 3·h·f) with L = h/128.
    pub fn bare(params: u64, shape: &BareShape) -> Result<ModelConfig, ConfigError> {
        if params == 0 {
            return Err(ConfigError::Invalid("⟨params⟩ must be positive".into()));
        }
        use limits as l;
        limit("⟨params⟩", params, l::PARAMS)?;
        for (key, v, max) in [
            ("⟨layers⟩", shape.layers, l::LAYERS),
            ("⟨hidden⟩", shape.hidden, l::HIDDEN),
            ("⟨heads⟩", shape.heads, l::HEADS),
            ("⟨kv-heads⟩", shape.kv_heads, l::HEADS),
            ("⟨vocab⟩", shape.vocab, l::VOCAB),
            ("⟨intermediate⟩", shape.intermediate, l::INTERMEDIATE),
        ] {
            if v == Some(0) {
                return Err(ConfigError::Invalid(format!("{key} must be positive")));
            }
            limit(key, v.unwrap_or(0), max)?;
        }
        let vocab = shape.vocab.unwrap_or(32000);
        let p = params as f64;
        let hidden = shape.hidden.unwrap_or_else(|| {
            // Solve L·12h² + 2Vh = P with L = h/128 (Llama shapes): 12h³/128 + 2Vh − P = 0.
            let mut h = 1024.0f64;
            for _ in 0..60 {
                let f = 12.0 * h * h * h / 128.0 + 2.0 * vocab as f64 * h - p;
                let df = 36.0 * h * h / 128.0 + 2.0 * vocab as f64;
                h -= f / df;
            }
            ((h / 128.0).round().max(1.0) as u64) * 128
        });
        let heads = shape.heads.unwrap_or((hidden / 128).max(1));
        let kv_heads = shape.kv_heads.unwrap_or(heads);
        let intermediate = shape
            .intermediate
            .unwrap_or((hidden * 8 / 3).div_ceil(256) * 256);
        let mut cfg = ModelConfig {
            id: format!("{} params", human_count(params)),
            model_type: Arch::Llama,
            layers: 1,
            hidden,
            heads,
            kv_heads,
            head_dim: hidden / heads.max(1),
            intermediate,
            vocab,
            tied_embeddings: false,
            glu: true,
            bias: false,
            position_rows: 0,
            embed_proj: 0,
            outer_norms: 1,
            norms_per_layer: 2,
            qk_norm: false,
            logit_softcap: false,
            attn_softcap: false,
            fp32_norm_scale: false,
            fused_qkv_rope: false,
            composite_gelu: false,
            relu_mlp: false,
            rope_sets: 1,
            rope_dims: hidden / heads.max(1),
            sliding_window: None,
            sliding_layers: 0,
            moe: None,
            mla: None,
            encoder: false,
            attn_dropout: false,
            hidden_dropout: false,
            max_positions: None,
            native_quant: None,
            vision_params: 0,
            reconstructed: false,
            resolved_to: None,
            config_file: None,
            dtype: None,
            scaled_positions: None,
            variant_note: None,
            checkpoint: None,
        };
        if heads == 0
            || kv_heads == 0
            || !heads.is_multiple_of(kv_heads)
            || !hidden.is_multiple_of(heads)
        {
            return Err(ConfigError::Invalid(format!(
                "⟨heads⟩ {heads}, ⟨kv-heads⟩ {kv_heads} and ⟨hidden⟩ {hidden} do not fit together"
            )));
        }
        cfg.layers = match shape.layers {
            Some(l) => l,
            None => {
                let per_layer = cfg.layer_params(0).max(1);
                let rest = p - cfg.embedding_params() as f64;
                (rest / per_layer as f64).round().max(1.0) as u64
            }
        };
        if cfg.layers == 0 {
            return Err(ConfigError::Invalid("⟨layers⟩ must be positive".into()));
        }
        cfg.check()?;
        Ok(cfg)
    }

    /// Embedding, LM head and final norm parameters.
    pub fn embedding_params(&self) -> u64 {
        // OPT-350m: a narrower embedding and head, projected in and out.
        let (width, projections) = match self.embed_proj {
            0 => (self.hidden, 0),
            p => (p, 2 * p * self.hidden),
        };
        let emb = self.vocab * width;
        let head = if self.tied_embeddings || self.encoder {
            0
        } else {
            self.vocab * width
        };
        // Phi-1/2's and GPT-J's LM heads carry a bias (modeling_phi.py,
        // modeling_gptj.py).
        let head_bias = if matches!(self.model_type, Arch::Phi | Arch::Gptj) {
            self.vocab
        } else {
            0
        };
        let final_norm = if self.encoder {
            self.hidden
        } else {
            self.outer_norms * self.norm_width()
        };
        emb + head + head_bias + projections + self.position_rows * self.hidden + final_norm
    }

    /// Does eager attention take its softmax in fp32 (a 4-byte saved
    /// output and a cast back for the probabilities·V matmul)? transformers
    /// 5.24's `eager_attention_forward` calls `softmax(…, dtype=torch.float32)
    /// .to(query.dtype)` for the Llama family and also for the LayerNorm
    /// architectures GPT-NeoX, Phi, OPT, StableLM, GPT-BigCode, StarCoder2
    /// and Cohere; GPT-J and MPT upcast the scores first (`.float()`), BLOOM
    /// with `dtype=torch.float32`. GPT-2, BERT, RoBERTa (`softmax(attn_weights,
    /// dim=-1)`) and Falcon (`dtype=hidden_states.dtype`) stay in the
    /// activation dtype.
    pub fn eager_softmax_fp32(&self) -> bool {
        !matches!(
            self.model_type,
            Arch::Gpt2 | Arch::Bert | Arch::Roberta | Arch::Falcon
        )
    }

    /// LayerNorm (weight and bias) rather than RMSNorm.
    pub fn layer_norm(&self) -> bool {
        matches!(
            self.model_type,
            Arch::Gpt2
                | Arch::Bert
                | Arch::Roberta
                | Arch::Phi
                | Arch::GptNeox
                | Arch::Falcon
                | Arch::Starcoder2
                | Arch::Gptj
                | Arch::Stablelm
                | Arch::Opt
                | Arch::Bloom
                | Arch::Mpt
        )
    }

    /// Parameters of one norm: LayerNorm has a weight and a bias; OLMo's
    /// LayerNorm has neither (modeling_olmo.py: `OlmoLayerNorm`, no
    /// parameters; it normalizes in fp32 and casts back, so its saved
    /// activations are counted as an RMSNorm's); MPT's has a weight only
    /// (modeling_mpt.py sets each LayerNorm's `bias` to None).
    fn norm_width(&self) -> u64 {
        if self.model_type == Arch::Olmo {
            0
        } else if self.model_type == Arch::Mpt {
            self.hidden
        } else if self.layer_norm() {
            2 * self.hidden
        } else {
            self.hidden
        }
    }

    /// The linear layers of layer `i` as (in, out, count) triples: the
    /// matrices LoRA can target and quantization compresses. MoE experts are
    /// counted with their multiplicity.
    pub fn layer_linears(&self, i: u64) -> Vec<(&'static str, u64, u64, u64)> {
        let h = self.hidden;
        let mut out = Vec::new();
        match &self.mla {
            Some(m) => {
                let qk = m.nope_dim + m.rope_dim;
                if m.q_lora_rank > 0 {
                    out.push(("q_a_proj", h, m.q_lora_rank, 1));
                    out.push(("q_b_proj", m.q_lora_rank, self.heads * qk, 1));
                } else {
                    out.push(("q_proj", h, self.heads * qk, 1));
                }
                out.push(("kv_a_proj", h, m.kv_lora_rank + m.rope_dim, 1));
                out.push((
                    "kv_b_proj",
                    m.kv_lora_rank,
                    self.heads * (m.nope_dim + m.v_dim),
                    1,
                ));
                out.push(("o_proj", self.heads * m.v_dim, h, 1));
            }
            None => {
                let q = self.heads * self.head_dim;
                let kv = self.kv_heads * self.head_dim;
                out.push(("q_proj", h, q, 1));
                out.push(("k_proj", h, kv, 1));
                out.push(("v_proj", h, kv, 1));
                out.push(("o_proj", q, h, 1));
            }
        }
        let mlp = |out: &mut Vec<(&'static str, u64, u64, u64)>, f: u64, n: u64| {
            if self.glu {
                out.push(("gate_proj", h, f, n));
                out.push(("up_proj", h, f, n));
            } else {
                out.push(("up_proj", h, f, n));
            }
            out.push(("down_proj", f, h, n));
        };
        match &self.moe {
            Some(moe) if i >= moe.dense_layers => {
                if moe.shared_intermediate == moe.intermediate {
                    mlp(&mut out, moe.intermediate, moe.experts + moe.shared);
                } else {
                    mlp(&mut out, moe.intermediate, moe.experts);
                    mlp(&mut out, moe.shared_intermediate, moe.shared);
                }
                out.push(("router", h, moe.experts, 1));
                if self.model_type == Arch::Qwen2Moe && moe.shared > 0 {
                    out.push(("shared_expert_gate", h, 1, 1));
                }
            }
            _ => mlp(&mut out, self.intermediate, 1),
        }
        out
    }

    /// Does the block linear `name` ([`Self::layer_linears`]) carry a bias?
    /// Qwen2 (modeling_qwen2.py) has biases on q/k/v only; GPT-J
    /// (modeling_gptj.py) on its MLP's fc_in/fc_out only; other biased
    /// architectures on every linear.
    pub fn linear_has_bias(&self, name: &str) -> bool {
        self.bias
            && match self.model_type {
                Arch::Qwen2 | Arch::Qwen2Moe | Arch::Stablelm => {
                    matches!(name, "q_proj" | "k_proj" | "v_proj")
                }
                Arch::Gptj => matches!(name, "up_proj" | "down_proj"),
                _ => true,
            }
    }

    /// All parameters of layer `i`: its linears, their biases and the norms.
    pub fn layer_params(&self, i: u64) -> u64 {
        let lin = self.layer_linears(i);
        let weights: u64 = lin.iter().map(|(_, a, b, n)| a * b * n).sum();
        let biases: u64 = if self.bias {
            lin.iter()
                .filter(|(name, ..)| self.linear_has_bias(name))
                .map(|(_, _, b, n)| b * n)
                .sum()
        } else {
            0
        };
        let norm_width = self.norm_width();
        // Per-head q/k norms (Qwen3, Gemma-3) have head_dim weights each;
        // OLMo 2's span all of q and k (modeling_olmo2.py: q_norm over
        // heads × head_dim, k_norm over kv_heads × head_dim).
        let qk_norms = match (self.qk_norm, &self.model_type) {
            (false, _) => 0,
            (true, Arch::Olmo2) => (self.heads + self.kv_heads) * self.head_dim,
            (true, _) => 2 * self.head_dim,
        };
        // gpt-oss keeps one learned attention-sink logit per head (`sinks`).
        let sinks = if self.model_type == Arch::GptOss {
            self.heads
        } else {
            0
        };
        let mla_norms = self
            .mla
            .as_ref()
            .map_or(0, |m| m.q_lora_rank + m.kv_lora_rank);
        weights + biases + self.norms_per_layer * norm_width + qk_norms + sinks + mla_norms
    }

    /// Total parameters P (tied embeddings counted once), with the vision
    /// tower of a multimodal wrapper.
    pub fn params(&self) -> u64 {
        sat(self.params_wide())
    }

    /// Parameters in linear layers inside the blocks (what bitsandbytes
    /// quantizes; embeddings, the LM head and norms stay 16-bit).
    pub fn block_linear_params(&self) -> u64 {
        sat(self.sum_layers(0, self.layers, |i| {
            self.layer_linears(i)
                .into_iter()
                .map(|(_, a, b, n)| u128::from(a * b * n))
                .sum()
        }))
    }

    /// The MoE expert matrices (gate/up/down of every routed and shared
    /// expert; not the router) and their biases: what MXFP4 quantizes.
    pub fn expert_params(&self) -> (u64, u64) {
        let Some(moe) = &self.moe else {
            return (0, 0);
        };
        let lo = moe.dense_layers.min(self.layers);
        let (w, b) = self
            .layer_groups(lo, self.layers)
            .into_iter()
            .flat_map(|(i, count)| {
                self.layer_linears(i)
                    .into_iter()
                    .map(move |lin| (lin, u128::from(count)))
            })
            .filter(|((name, ..), _)| matches!(*name, "gate_proj" | "up_proj" | "down_proj"))
            .fold((0u128, 0u128), |(w, b), ((_, a, out, n), count)| {
                let bias = if self.bias { out * n } else { 0 };
                (
                    w + u128::from(a * out * n) * count,
                    b + u128::from(bias) * count,
                )
            });
        (sat(w), sat(b))
    }

    /// Parameters one token actually uses in an MoE layer's MLP relative to
    /// all experts: `(active + shared) / (experts + shared)`; 1 for dense.
    pub fn active_expert_fraction(&self) -> f64 {
        self.moe.as_ref().map_or(1.0, |m| {
            let (routed, shared) = (m.intermediate as f64, m.shared_intermediate as f64);
            (m.active as f64 * routed + m.shared as f64 * shared)
                / (m.experts as f64 * routed + m.shared as f64 * shared)
        })
    }
}

/// Parameters of a Gemma-3 wrapper's vision side: the SigLIP vision tower
/// (`vision_config`, modeling_siglip.py: patch-embedding conv with bias,
/// one learned position row per patch, per layer q/k/v/o and fc1/fc2 with
/// biases and two LayerNorms, a post LayerNorm, and the attention-pooling
/// head when `vision_use_head`) plus `Gemma3MultiModalProjector` (a
/// vision × text matrix and an RMSNorm of vision width). Missing keys take
/// `SiglipVisionConfig`'s defaults. 0 for every other config.
fn vision_params(top: &Value) -> Result<u64, ConfigError> {
    let is_gemma3 = top.get("model_type").and_then(Value::as_str) == Some("gemma3");
    let (Some(vc), Some(text_hidden)) = (
        top.get("vision_config").filter(|_| is_gemma3),
        top.get("text_config")
            .and_then(|t| int(t, &["hidden_size"])),
    ) else {
        return Ok(0);
    };
    let field = |key: &'static str, default: u64, max: u64| -> Result<u128, ConfigError> {
        let v = int(vc, &[key]).unwrap_or(default);
        limit(key, v, max)?;
        Ok(u128::from(v))
    };
    // Bounded first, then multiplied in 128 bits.
    let h = field("hidden_size", 768, limits::HIDDEN)?;
    let f = field("intermediate_size", 3072, limits::INTERMEDIATE)?;
    let layers = field("num_hidden_layers", 12, limits::LAYERS)?;
    let channels = field("num_channels", 3, 1 << 10)?;
    let image = field("image_size", 224, 1 << 20)?;
    let patch = field("patch_size", 16, 1 << 20)?.max(1);
    limit("text_config.hidden_size", text_hidden, limits::HIDDEN)?;
    let text_hidden = u128::from(text_hidden);
    let patches = (image / patch) * (image / patch);
    let embeddings = channels * patch * patch * h + h + patches * h;
    let mlp = h * f + f + f * h + h;
    let layer = 4 * (h * h + h) + mlp + 2 * 2 * h;
    let head = if vc.get("vision_use_head").and_then(Value::as_bool) != Some(false) {
        // SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention
        // (in_proj 3h×h + 3h, out_proj h×h + h), LayerNorm, MLP.
        h + 4 * (h * h + h) + 2 * h + mlp
    } else {
        0
    };
    let projector = h * text_hidden + h;
    let total = embeddings + layers * layer + 2 * h + head + projector;
    limit("vision_config parameters", total, limits::PARAMS)?;
    Ok(sat(total))
}

/// Shape overrides for `--params`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BareShape {
    /// `--layers`.
    pub layers: Option<u64>,
    /// `--hidden`.
    pub hidden: Option<u64>,
    /// `--heads`.
    pub heads: Option<u64>,
    /// `--kv-heads`.
    pub kv_heads: Option<u64>,
    /// `--vocab`.
    pub vocab: Option<u64>,
    /// `--intermediate`.
    pub intermediate: Option<u64>,
}

/// `7000000000` → `7B`, `1500000000` → `1.5B`.
pub fn human_count(n: u64) -> String {
    let (v, unit) = if n >= 1_000_000_000 {
        (n as f64 / 1e9, "B")
    } else if n >= 1_000_000 {
        (n as f64 / 1e6, "M")
    } else {
        (n as f64 / 1e3, "K")
    };
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{unit}")
}

/// Parses `7B`, `1.5b`, `350M`, `124000000`.
pub fn parse_count(s: &str) -> Option<u64> {
    let t = s.trim();
    let (at, last) = t.char_indices().last()?;
    let (head, _) = t.split_at(at);
    let (num, mult) = match last.to_ascii_uppercase() {
        'B' | 'G' => (head, 1e9),
        'M' => (head, 1e6),
        'K' => (head, 1e3),
        'T' => (head, 1e12),
        _ => (t, 1.0),
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v > 0.0).then(|| (v * mult).round() as u64)
}

/// The positions vLLM derives under the config's RoPE scaling
/// ([`ModelConfig::scaled_positions`]); `None` when there is no scaling that
/// changes `positions`.
fn scaled_positions(v: &Value, positions: Option<u64>) -> Option<u64> {
    let rs = v
        .get("rope_scaling")
        .filter(|r| r.is_object())
        .or_else(|| v.get("rope_parameters").filter(|r| r.is_object()))?;
    let kind = rs
        .get("rope_type")
        .or_else(|| rs.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    if matches!(kind, "su" | "longrope" | "llama3") {
        return None;
    }
    let factor = rs.get("factor").and_then(Value::as_f64)?;
    if !(factor.is_finite() && factor > 0.0) {
        return None;
    }
    let base = if kind == "yarn" {
        rs.get("original_max_position_embeddings")
            .and_then(Value::as_u64)
            .or(positions)?
    } else {
        positions?
    };
    let scaled = (base as f64 * factor).floor();
    // A scaled context beyond any model's is not one: leave it.
    if !(1.0..=(limits::POSITION_ROWS as f64)).contains(&scaled) {
        return None;
    }
    let scaled = scaled as u64;
    (Some(scaled) != positions).then_some(scaled)
}

/// A config's `torch_dtype` / `dtype` (`"bfloat16"`, `"torch.float16"`),
/// lower-cased and without `torch.`.
fn config_dtype(v: &Value) -> Option<String> {
    let d = v
        .get("torch_dtype")
        .or_else(|| v.get("dtype"))
        .and_then(Value::as_str)?;
    Some(d.trim().trim_start_matches("torch.").to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;

    fn p(id: &str) -> u64 {
        catalogue::find(id).expect(id).params()
    }

    /// Published parameter counts (model cards / safetensors totals).
    #[test]
    fn parameter_counts_match_published_totals() {
        let cases: &[(&str, f64)] = &[
            ("meta-llama/Llama-2-7b-hf", 6.738e9),
            ("meta-llama/Llama-3.1-8B", 8.030e9),
            ("meta-llama/Llama-3.2-1B", 1.236e9),
            ("meta-llama/Llama-3.2-3B", 3.213e9),
            ("meta-llama/Llama-3.1-70B", 70.55e9),
            ("mistralai/Mistral-7B-v0.1", 7.242e9),
            ("mistralai/Mixtral-8x7B-v0.1", 46.70e9),
            ("Qwen/Qwen2.5-7B", 7.616e9),
            ("Qwen/Qwen2.5-0.5B", 0.494e9),
            ("Qwen/Qwen3-30B-A3B", 30.53e9),
            ("gpt2", 0.1244e9),
            ("bert-large-uncased", 0.3349e9),
            ("Qwen/Qwen-7B", 7.721e9),
            ("deepseek-ai/DeepSeek-V3", 671.0e9),
            ("microsoft/phi-2", 2.78e9),
        ];
        for (id, want) in cases {
            let got = p(id) as f64;
            let err = (got - want).abs() / want;
            assert!(err < 0.015, "{id}: {got} vs {want} ({:.2} %)", err * 100.0);
        }
    }

    /// The reconstructed configs give exactly what transformers builds from
    /// them (sum of `p.numel()` on the meta device, transformers 5.23:
    /// bench/estimate-oracle/param_counts.py), and those counts agree with
    /// the published totals: GPT-NeoX-20B 20.55B (paper), Falcon-7B 6.92B
    /// (tied head), StableLM-Alpha 3B 3.6B, Gemma-2 27B 27.2B, Gemma-3 27B
    /// 27.4B with its SigLIP tower.
    #[test]
    fn reconstructed_configs_match_transformers_exactly() {
        let cases: &[(&str, u64)] = &[
            ("EleutherAI/gpt-neox-20b", 20_554_567_680),
            ("stabilityai/stablelm-base-alpha-3b", 3_637_321_728),
            ("tiiuae/falcon-7b", 6_921_720_704),
            ("tiiuae/falcon-40b", 41_303_293_952),
            ("google/gemma-2-27b", 27_227_128_320),
            ("google/gemma-3-27b-it", 27_432_406_640),
            // Fixed alongside (Qwen2 q/k/v-only biases, gpt-oss sinks, Phi head bias).
            ("Qwen/Qwen2.5-0.5B", 494_032_768),
            ("openai/gpt-oss-20b", 20_914_757_184),
            ("microsoft/phi-2", 2_779_683_840),
            ("Qwen/Qwen3-8B", 8_190_735_360),
        ];
        for (id, want) in cases {
            assert_eq!(p(id), *want, "{id}");
        }
    }

    /// A `gpt_bigcode` config without `tie_word_embeddings` (StarCoder's
    /// published config.json: 40 layers, 6144 wide, 24576 inner, 49152
    /// tokens, 8192 positions, multi-query) is tied, as GPTBigCodeConfig's
    /// default says: 15.52B parameters (the model card's 15.5B; learned
    /// positions and biased linears as GPTBigCodeModel builds them), not the
    /// untied 15.77B it was read as.
    #[test]
    fn gpt_bigcode_ties_by_default() {
        let json = r#"{"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48,
            "n_inner": 24576, "n_layer": 40, "n_positions": 8192, "vocab_size": 49152,
            "multi_query": true, "activation_function": "gelu_pytorch_tanh"}"#;
        let c = ModelConfig::from_hf_json("starcoder", json).expect("starcoder");
        assert!(c.tied_embeddings);
        let p = c.params() as f64;
        assert!((p - 15.517e9).abs() / 15.517e9 < 0.001, "{p}");
        let untied = json.replacen('{', r#"{"tie_word_embeddings": false, "#, 1);
        let u = ModelConfig::from_hf_json("untied", &untied).expect("untied");
        assert_eq!(u.params() - c.params(), 49152 * 6144);
    }

    /// Qwen2-MoE's one shared expert has its own size and a 1-output gate
    /// (modeling_qwen2_moe.py), q/k/v carry biases; Qwen3-MoE's
    /// `shared_expert_intermediate_size: 0` means no shared expert.
    #[test]
    fn qwen2_moe_shared_expert() {
        let q = catalogue::find("Qwen/Qwen1.5-MoE-A2.7B-Chat").expect("qwen1.5-moe");
        let m = q.moe.as_ref().expect("moe");
        assert_eq!((m.experts, m.active, m.shared), (60, 4, 1));
        assert_eq!((m.intermediate, m.shared_intermediate), (1408, 5632));
        // (4 × 1408 + 5632) / (60 × 1408 + 5632) = 1/8.
        assert!((q.active_expert_fraction() - 0.125).abs() < 1e-12);
        let lin = q.layer_linears(0);
        assert!(lin.contains(&("shared_expert_gate", 2048, 1, 1)));
        assert!(lin.contains(&("up_proj", 2048, 5632, 1)));
        assert!(lin.contains(&("up_proj", 2048, 1408, 60)));
        let coder = catalogue::find("Qwen/Qwen3-Coder-480B-A35B-Instruct").expect("coder");
        assert_eq!(coder.moe.as_ref().expect("moe").shared, 0);
    }

    /// OPT (modeling_opt.py): learned positions with 2 extra rows, biased
    /// q/k/v/out_proj and fc1/fc2 (ReLU, not gated), LayerNorms with bias, a
    /// tied head; opt-350m's 512-wide embedding with `project_in`/`project_out`
    /// and no final LayerNorm (post-LN). Counts from transformers
    /// (`bench/estimate-oracle/param_counts.py`).
    #[test]
    fn opt_parameters() {
        let small = catalogue::find("facebook/opt-125m").expect("opt-125m");
        assert!(!small.glu && small.bias && small.tied_embeddings && small.layer_norm());
        assert_eq!((small.position_rows, small.rope_sets), (2050, 0));
        assert_eq!((small.embed_proj, small.outer_norms), (0, 1));
        // 12 × (4 × (768² + 768) + 2 × 768 × 3072 + 3072 + 768 + 2 × 1536)
        // + 50272 × 768 + 2050 × 768 + 1536.
        assert_eq!(small.params(), 125_239_296);
        let mid = catalogue::find("facebook/opt-350m").expect("opt-350m");
        assert_eq!((mid.embed_proj, mid.outer_norms), (512, 0));
        // The embedding is 50272 × 512, plus 2 × 512 × 1024 projections.
        assert_eq!(
            mid.embedding_params(),
            50_272 * 512 + 2 * 512 * 1024 + 2050 * 1024
        );
        assert_eq!(mid.params(), 331_196_416);
        let json = r#"{"model_type":"opt","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"ffn_dim":256,"vocab_size":100,"max_position_embeddings":32,"enable_bias":false,"_remove_final_layer_norm":true}"#;
        let bare = ModelConfig::from_hf_json("o", json).expect("opt");
        assert!(!bare.bias);
        assert_eq!(bare.outer_norms, 0);
        // 2 × (4 × 64² + 2 × 64 × 256 + 4 × 64) + 100 × 64 + 34 × 64.
        assert_eq!(
            bare.params(),
            2 * (4 * 4096 + 2 * 64 * 256 + 256) + 134 * 64
        );
    }

    /// BLOOM (modeling_bloom.py): ALiBi (no position table, no rotary), one
    /// biased `query_key_value` (3h) and `dense`, a biased 4h GELU MLP,
    /// LayerNorms with bias, an embedding LayerNorm before the blocks and a
    /// tied head. bloom-560m states its width as `n_embed`.
    #[test]
    fn bloom_parameters() {
        let b = catalogue::find("bigscience/bloom-560m").expect("bloom-560m");
        assert_eq!((b.hidden, b.intermediate, b.layers), (1024, 4096, 24));
        assert!(!b.glu && b.bias && b.tied_embeddings && b.layer_norm());
        assert_eq!((b.position_rows, b.rope_sets, b.outer_norms), (0, 0, 2));
        let h = 1024;
        let layer = 4 * h * h + 4 * h + 8 * h * h + 5 * h + 4 * h;
        assert_eq!(b.layer_params(0), layer);
        assert_eq!(b.params(), 24 * layer + 250_880 * h + 4 * h);
        assert_eq!(b.params(), 559_214_592);
        assert_eq!(
            catalogue::find("bigscience/bloom").expect("bloom").params(),
            176_247_271_424
        );
    }

    /// MPT (modeling_mpt.py): `d_model`/`n_heads`/`n_layers`, ALiBi, a
    /// bias-free fused `Wqkv` and `out_proj`, a bias-free 4h GELU MLP,
    /// LayerNorms with a weight only, a tied head.
    #[test]
    fn mpt_parameters() {
        let m = catalogue::find("mosaicml/mpt-7b").expect("mpt-7b");
        assert_eq!(
            (m.hidden, m.heads, m.layers, m.intermediate),
            (4096, 32, 32, 16384)
        );
        assert!(!m.glu && !m.bias && m.tied_embeddings && m.layer_norm());
        assert_eq!(
            (m.position_rows, m.rope_sets, m.max_positions),
            (0, 0, Some(2048))
        );
        let h = 4096;
        assert_eq!(m.layer_params(0), 12 * h * h + 2 * h);
        assert_eq!(m.params(), 32 * (12 * h * h + 2 * h) + 50_432 * h + h);
        assert_eq!(m.params(), 6_649_286_656);
    }

    #[test]
    fn falcon_attention_variants() {
        let base = r#""model_type":"falcon","hidden_size":256,"num_hidden_layers":2,"num_attention_heads":8,"vocab_size":100"#;
        let kv = |extra: &str| {
            ModelConfig::from_hf_json("f", &format!("{{{base}{extra}}}"))
                .expect("falcon")
                .kv_heads
        };
        // FalconConfig defaults to multi_query = true.
        assert_eq!(kv(""), 1);
        assert_eq!(kv(r#","multi_query":false"#), 8);
        assert_eq!(
            kv(r#","new_decoder_architecture":true,"num_kv_heads":2"#),
            2
        );
        assert_eq!(kv(r#","new_decoder_architecture":true"#), 8);
    }

    #[test]
    fn gemma3_vision_tower_only_for_gemma3() {
        let g3 = catalogue::find("gemma-3-27b").expect("g3");
        assert_eq!(g3.vision_params, 416_866_032 + 6_193_152 + 1152);
        assert_eq!(g3.sliding_layers, 52);
        assert_eq!(catalogue::find("gemma-2-27b").expect("g2").vision_params, 0);
    }

    #[test]
    fn bare_model_is_close_to_requested_size() {
        let cfg = ModelConfig::bare(7_000_000_000, &BareShape::default()).expect("bare");
        let err = (cfg.params() as f64 - 7e9).abs() / 7e9;
        assert!(err < 0.1, "{}", cfg.params());
        assert!(ModelConfig::bare(0, &BareShape::default()).is_err());
    }

    #[test]
    fn counts_parse() {
        assert_eq!(parse_count("7B"), Some(7_000_000_000));
        assert_eq!(parse_count("1.5b"), Some(1_500_000_000));
        assert_eq!(parse_count("350M"), Some(350_000_000));
        assert_eq!(parse_count("-7B"), None);
        assert_eq!(parse_count("0"), None);
        assert_eq!(human_count(7_000_000_000), "7B");
    }

    #[test]
    fn malformed_configs_are_errors() {
        assert!(ModelConfig::from_hf_json("x", "{").is_err());
        assert!(ModelConfig::from_hf_json("x", "[]").is_err());
        assert!(ModelConfig::from_hf_json("x", r#"{"hidden_size": 8}"#).is_err());
        assert!(
            ModelConfig::from_hf_json(
                "x",
                r#"{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":3,"vocab_size":10}"#
            )
            .is_err()
        );
    }
}
