//! Text-to-image (diffusers) pipelines: Stable Diffusion 1.5, SDXL base 1.0
//! and FLUX.1-dev, `--task infer` only.
//!
//! **Parameters** are counted from the component configs embedded from
//! `shared/reference/model-configs/` (`models/image/*.json`): the UNet
//! (`UNet2DConditionModel`), the transformer (`FluxTransformer2DModel`), the
//! VAE (`AutoencoderKL`) and the text encoders (CLIP text towers, T5 encoder)
//! are walked module by module exactly as diffusers/transformers build them;
//! the unit tests pin the totals (SD 1.5 UNet 859,520,964; SDXL UNet
//! 2,567,463,684; FLUX transformer 11,901,408,320, which the reference sheet's
//! "12B params" / "23.8 GB (bf16)" for the FLUX transformer agrees with).
//! SD 1.5's `model_index.json` names a `StableDiffusionSafetyChecker`, loaded
//! by default: a CLIP ViT-L/14 vision tower plus projection and concept
//! embeddings, 303,981,588 parameters. The reference folder has no config for
//! it, so `models/image/…__safety_checker.json` is **reconstructed** from the
//! documented ViT-L/14 vision values (its `_oomkit_provenance` says how).
//!
//! **Result**: the crate's [`Estimate`] (the same `components`, peaks and
//! phase as text models: weights resident at the peak, the phase's
//! activations, the dequantized linear as temporaries; no gradients,
//! optimizer, logits or KV cache) and [`Fit`] (`max_batch` = most images,
//! `max_seq` = largest square side in pixels), plus per-component detail.
//!
//! **Peak** = weights resident in the phase (per offload mode) + the largest
//! transient of the phase, over the phases: prompt encoding (per text
//! encoder), denoising (one UNet/transformer forward; classifier-free
//! guidance doubles the batch for SD/SDXL, FLUX.1-dev is guidance-distilled),
//! VAE decode, and SD 1.5's safety check. The safety checker is excluded from
//! CPU offload (`StableDiffusionPipeline._exclude_from_cpu_offload`), so it
//! stays on the GPU in every phase.
//!
//! **Quantization** (`--quant`) applies to the denoiser and any T5 encoder,
//! as diffusers' `PipelineQuantizationConfig(components_to_quantize=…)` does:
//! bitsandbytes and torchao replace `nn.Linear` weights only, at the bits per
//! weight of [`components::quant_bits_x1000`] (`memory-estimation.md` §3.1).
//!
//! **Approximate** (no measured diffusion rows exist in
//! `memory-estimation.md`, so nothing here is checked against a measurement):
//! the working-set multipliers (17 hidden-size units in a UNet transformer
//! block, 16 in a FLUX block, 3 feature maps in a VAE decoder resnet), the
//! encoder activations, the sequential-offload residency (the largest single
//! module), fp8 scales (one fp32 per output row, like LLM.int8), and the
//! 10 % allocator slack of [`components::reserved_bytes`]. Mechanisms (what
//! is resident when, which attention kernel materialises an N² matrix)
//! follow diffusers' pipeline code.
//!
//! **Sources.** Parameter walks: diffusers `models/unets/unet_2d_condition.py`,
//! `unet_2d_blocks.py`, `resnet.py`, `attention.py`, `autoencoders/vae.py`,
//! `transformers/transformer_flux.py`, `pipelines/stable_diffusion/
//! safety_checker.py`; transformers `modeling_clip.py`, `modeling_t5.py`.
//! Eager attention keeps the scores and the softmax output, b·a·s² each:
//! `memory-estimation.md` §2.5 (the 5·a·s²·b attention term that
//! FlashAttention removes), §2.6 ("softmax output b·a·s²") and §2.2 (inference
//! activations b·(s·h·5·2 + s²·a·2)); SDPA/flash keep none. Slicing, tiling,
//! offload: diffusers `attention_processor.py` (`SlicedAttnProcessor`,
//! `set_attention_slice("auto")` = heads/2), `AutoencoderKL.enable_slicing` /
//! `enable_tiling` (`tile_sample_min_size` = `sample_size`),
//! `DiffusionPipeline.enable_model_cpu_offload` /
//! `enable_sequential_cpu_offload`; SDXL's fp16 VAE upcast:
//! `StableDiffusionXLPipeline.__call__` (`needs_upcasting`); quantization:
//! diffusers `quantizers/pipe_quant_config.py`, `quantizers/auto.py`
//! (backends `bitsandbytes_8bit`, `bitsandbytes_4bit`, `torchao`). CUDA
//! context and allocator slack: [`components::cuda_context_bytes`],
//! [`components::reserved_bytes`].

use std::fmt::Write;

use oomkit_core::Bytes;
use oomkit_core::gpus::Gpu;
use serde::Serialize;
use serde_json::Value;

use crate::components;
use crate::fit::{Fit, Step, largest_where};
use crate::model::human_count;
use crate::setup::{Attention, Precision, Quant};
use crate::{Components, Estimate};

const BAR: usize = 30;

/// One embedded pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pipeline {
    /// `StableDiffusionPipeline`.
    Sd15,
    /// `StableDiffusionXLPipeline`.
    Sdxl,
    /// `FluxPipeline`.
    Flux,
}

/// Catalogue ids, aliases and pipelines.
pub const MODELS: [(&str, &str, Pipeline); 3] = [
    ("runwayml/stable-diffusion-v1-5", "sd15", Pipeline::Sd15),
    (
        "stabilityai/stable-diffusion-xl-base-1.0",
        "sdxl",
        Pipeline::Sdxl,
    ),
    ("black-forest-labs/FLUX.1-dev", "flux-dev", Pipeline::Flux),
];

/// Finds an image model by id (case-insensitive), alias, or SD 1.5's current
/// id `stable-diffusion-v1-5/stable-diffusion-v1-5`.
pub fn find(name: &str) -> Option<(&'static str, Pipeline)> {
    let n = name.trim().to_ascii_lowercase();
    if n == "stable-diffusion-v1-5/stable-diffusion-v1-5" {
        return Some((MODELS[0].0, Pipeline::Sd15));
    }
    MODELS
        .iter()
        .find(|(id, alias, _)| id.to_ascii_lowercase() == n || *alias == n)
        .map(|(id, _, p)| (*id, *p))
}

fn cfg(text: &str) -> Value {
    // The embedded files are tested to parse (`configs_parse`).
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn list(v: &Value, k: &str) -> Vec<u64> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

fn strs(v: &Value, k: &str) -> Vec<String> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A per-level value that a config gives either as one number or a list.
fn per_level(v: &Value, k: &str, levels: usize, default: u64) -> Vec<u64> {
    match v.get(k) {
        Some(Value::Array(a)) => a.iter().map(|x| x.as_u64().unwrap_or(default)).collect(),
        Some(x) => vec![x.as_u64().unwrap_or(default); levels],
        None => vec![default; levels],
    }
}

/// A parameter tally: the total and the largest single module (what
/// sequential offload keeps on the GPU at once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// All parameters.
    pub total: u64,
    /// Parameters of the largest leaf module (one linear, conv or embedding).
    pub largest: u64,
    /// Parameters in `nn.Linear` layers (what bitsandbytes and torchao
    /// quantize).
    pub linear: u64,
    /// Output rows of those linears (one fp32 scale each for int8 and fp8).
    pub rows: u64,
    /// Parameters of the largest `nn.Linear` (what a quantized forward
    /// dequantizes at once).
    pub largest_linear: u64,
}

impl Count {
    fn add(&mut self, n: u64) {
        self.total += n;
        self.largest = self.largest.max(n);
    }
    fn lin(&mut self, i: u64, o: u64, bias: bool) {
        let n = i * o + if bias { o } else { 0 };
        self.add(n);
        self.linear += n;
        self.rows += o;
        self.largest_linear = self.largest_linear.max(n);
    }
    fn conv(&mut self, i: u64, o: u64, k: u64) {
        self.add(i * o * k * k + o);
    }
    fn norm(&mut self, c: u64) {
        self.add(2 * c);
    }
}

/// diffusers `ResnetBlock2D`: GroupNorm, 3×3 conv, (time projection), GroupNorm,
/// 3×3 conv, 1×1 shortcut when the channels change.
fn resnet(c: &mut Count, i: u64, o: u64, temb: u64) {
    c.norm(i);
    c.conv(i, o, 3);
    if temb > 0 {
        c.lin(temb, o, true);
    }
    c.norm(o);
    c.conv(o, o, 3);
    if i != o {
        c.conv(i, o, 1);
    }
}

/// diffusers `Transformer2DModel` with `n` `BasicTransformerBlock`s: GroupNorm,
/// proj_in, per block self-attention (q,k,v without bias, out with bias),
/// cross-attention (k,v from `cross`), GEGLU feed-forward (C→8C, 4C→C), three
/// LayerNorms; proj_out. proj_in/proj_out are 1×1 convs (SD 1.5) unless the
/// config sets `use_linear_projection` (SDXL): same count, but only linears
/// are quantized.
fn transformer2d(c: &mut Count, ch: u64, n: u64, cross: u64, linear_proj: bool) {
    c.norm(ch);
    proj(c, ch, linear_proj);
    for _ in 0..n {
        c.norm(ch);
        for _ in 0..3 {
            c.lin(ch, ch, false);
        }
        c.lin(ch, ch, true);
        c.norm(ch);
        c.lin(ch, ch, false);
        c.lin(cross, ch, false);
        c.lin(cross, ch, false);
        c.lin(ch, ch, true);
        c.norm(ch);
        c.lin(ch, 8 * ch, true);
        c.lin(4 * ch, ch, true);
    }
    proj(c, ch, linear_proj);
}

/// A channel projection: `nn.Linear` or a 1×1 `nn.Conv2d`.
fn proj(c: &mut Count, ch: u64, linear: bool) {
    if linear {
        c.lin(ch, ch, true);
    } else {
        c.conv(ch, ch, 1);
    }
}

/// `UNet2DConditionModel` (diffusers `unet_2d_condition.py`), from its config.
pub fn unet_params(v: &Value) -> Count {
    let boc = list(v, "block_out_channels");
    let levels = boc.len();
    let lpb = u(v, "layers_per_block");
    let cross = u(v, "cross_attention_dim");
    let tl = per_level(v, "transformer_layers_per_block", levels, 1);
    let down = strs(v, "down_block_types");
    let up = strs(v, "up_block_types");
    let c0 = boc.first().copied().unwrap_or(0);
    let temb = 4 * c0;
    let lp = v.get("use_linear_projection").and_then(Value::as_bool) == Some(true);
    let mut c = Count::default();
    c.conv(u(v, "in_channels"), c0, 3);
    c.lin(c0, temb, true);
    c.lin(temb, temb, true);
    if v.get("addition_embed_type").and_then(Value::as_str) == Some("text_time") {
        c.lin(u(v, "projection_class_embeddings_input_dim"), temb, true);
        c.lin(temb, temb, true);
    }
    let mut out = c0;
    for (i, (t, &o)) in down.iter().zip(&boc).enumerate() {
        let inp = out;
        out = o;
        for j in 0..lpb {
            resnet(&mut c, if j == 0 { inp } else { o }, o, temb);
            if t.starts_with("CrossAttn") {
                transformer2d(&mut c, o, tl.get(i).copied().unwrap_or(1), cross, lp);
            }
        }
        if i + 1 < levels {
            c.conv(o, o, 3);
        }
    }
    let last = boc.last().copied().unwrap_or(0);
    resnet(&mut c, last, last, temb);
    transformer2d(&mut c, last, tl.last().copied().unwrap_or(1), cross, lp);
    resnet(&mut c, last, last, temb);
    let rev: Vec<u64> = boc.iter().rev().copied().collect();
    let rev_tl: Vec<u64> = tl.iter().rev().copied().collect();
    let mut prev = last;
    for (i, (t, &o)) in up.iter().zip(&rev).enumerate() {
        let inp = rev.get(i + 1).copied().unwrap_or(o);
        for j in 0..=lpb {
            let skip = if j == lpb { inp } else { o };
            let rin = if j == 0 { prev } else { o };
            resnet(&mut c, rin + skip, o, temb);
            if t.starts_with("CrossAttn") {
                transformer2d(&mut c, o, rev_tl.get(i).copied().unwrap_or(1), cross, lp);
            }
        }
        if i + 1 < levels {
            c.conv(o, o, 3);
        }
        prev = o;
    }
    c.norm(c0);
    c.conv(c0, u(v, "out_channels"), 3);
    c
}

/// VAE `Attention` in the mid block: GroupNorm, q/k/v/out linears with bias.
fn vae_attn(c: &mut Count, ch: u64) {
    c.norm(ch);
    for _ in 0..4 {
        c.lin(ch, ch, true);
    }
}

/// `AutoencoderKL` (encoder + decoder + quant convs), from its config. The
/// whole VAE is loaded even though text-to-image only decodes.
pub fn vae_params(v: &Value) -> Count {
    let boc = list(v, "block_out_channels");
    let n = boc.len();
    let lpb = u(v, "layers_per_block");
    let lat = u(v, "latent_channels");
    let c0 = boc.first().copied().unwrap_or(0);
    let last = boc.last().copied().unwrap_or(0);
    let mut c = Count::default();
    // Encoder.
    c.conv(u(v, "in_channels"), c0, 3);
    let mut out = c0;
    for (i, &o) in boc.iter().enumerate() {
        for j in 0..lpb {
            resnet(&mut c, if j == 0 { out } else { o }, o, 0);
        }
        if i + 1 < n {
            c.conv(o, o, 3);
        }
        out = o;
    }
    resnet(&mut c, last, last, 0);
    vae_attn(&mut c, last);
    resnet(&mut c, last, last, 0);
    c.norm(last);
    c.conv(last, 2 * lat, 3);
    if v.get("use_quant_conv").and_then(Value::as_bool) != Some(false) {
        c.conv(2 * lat, 2 * lat, 1);
    }
    if v.get("use_post_quant_conv").and_then(Value::as_bool) != Some(false) {
        c.conv(lat, lat, 1);
    }
    // Decoder.
    c.conv(lat, last, 3);
    resnet(&mut c, last, last, 0);
    vae_attn(&mut c, last);
    resnet(&mut c, last, last, 0);
    let mut prev = last;
    for (i, &o) in boc.iter().rev().enumerate() {
        for j in 0..=lpb {
            resnet(&mut c, if j == 0 { prev } else { o }, o, 0);
        }
        if i + 1 < n {
            c.conv(o, o, 3);
        }
        prev = o;
    }
    c.norm(c0);
    c.conv(c0, u(v, "out_channels"), 3);
    c
}

/// transformers `CLIPTextModel` (+ `text_projection` without bias for
/// `CLIPTextModelWithProjection`): token and position embeddings, per layer two
/// LayerNorms, q/k/v/out and fc1/fc2 with bias; the final LayerNorm.
pub fn clip_text_params(v: &Value) -> Count {
    let h = u(v, "hidden_size");
    let f = u(v, "intermediate_size");
    let mut c = Count::default();
    c.add(u(v, "vocab_size") * h);
    c.add(u(v, "max_position_embeddings") * h);
    for _ in 0..u(v, "num_hidden_layers") {
        c.norm(h);
        for _ in 0..4 {
            c.lin(h, h, true);
        }
        c.norm(h);
        c.lin(h, f, true);
        c.lin(f, h, true);
    }
    c.norm(h);
    if strs(v, "architectures")
        .iter()
        .any(|a| a.ends_with("WithProjection"))
    {
        c.lin(h, u(v, "projection_dim"), false);
    }
    c
}

/// diffusers `StableDiffusionSafetyChecker` (`pipelines/stable_diffusion/
/// safety_checker.py`): a transformers `CLIPVisionModel` — class embedding,
/// patch conv (no bias), (image/patch)² + 1 position embeddings, pre- and
/// post-LayerNorm, per layer two LayerNorms, q/k/v/out and fc1/fc2 with bias —
/// plus `visual_projection` (no bias) and the 17 + 3 concept embeddings and
/// their 17 + 3 weights.
pub fn safety_checker_params(v: &Value) -> Count {
    let vc = v.get("vision_config").unwrap_or(&Value::Null);
    let h = u(vc, "hidden_size");
    let f = u(vc, "intermediate_size");
    let proj = u(v, "projection_dim");
    let mut c = Count::default();
    c.add(h);
    c.add(u(vc, "num_channels") * h * u(vc, "patch_size").pow(2));
    c.add(vision_tokens(vc) * h);
    c.norm(h);
    for _ in 0..u(vc, "num_hidden_layers") {
        c.norm(h);
        for _ in 0..4 {
            c.lin(h, h, true);
        }
        c.norm(h);
        c.lin(h, f, true);
        c.lin(f, h, true);
    }
    c.norm(h);
    c.lin(h, proj, false);
    c.add((17 + 3) * proj + 17 + 3);
    c
}

/// CLIP vision tokens: one per patch plus the class token.
fn vision_tokens(vc: &Value) -> u64 {
    let side = u(vc, "image_size") / u(vc, "patch_size").max(1);
    side * side + 1
}

/// transformers `T5EncoderModel`: the shared embedding, per layer q/k/v/o
/// without bias (inner = heads·d_kv), gated FF (wi_0, wi_1, wo) and two RMS
/// norms (weight only); relative-position buckets in the first layer; the
/// final norm.
pub fn t5_encoder_params(v: &Value) -> Count {
    let d = u(v, "d_model");
    let inner = u(v, "num_heads") * u(v, "d_kv");
    let ff = u(v, "d_ff");
    let gated = v.get("is_gated_act").and_then(Value::as_bool) == Some(true);
    let mut c = Count::default();
    c.add(u(v, "vocab_size") * d);
    for l in 0..u(v, "num_layers") {
        c.add(d);
        for _ in 0..3 {
            c.lin(d, inner, false);
        }
        c.lin(inner, d, false);
        if l == 0 {
            c.add(u(v, "relative_attention_num_buckets") * u(v, "num_heads"));
        }
        c.add(d);
        c.lin(d, ff, false);
        if gated {
            c.lin(d, ff, false);
        }
        c.lin(ff, d, false);
    }
    c.add(d);
    c
}

/// `FluxTransformer2DModel` (diffusers `transformer_flux.py`): time/guidance/
/// pooled-text embedders, context and x embedders, `num_layers` dual-stream
/// blocks (two AdaLayerNormZero, image and context q/k/v/out with bias,
/// per-head RMS q/k norms, two GELU MLPs 4×), `num_single_layers`
/// single-stream blocks (AdaLayerNormZeroSingle, q/k/v, proj_mlp 4×,
/// proj_out from 5×), AdaLayerNormContinuous and proj_out.
pub fn flux_params(v: &Value) -> Count {
    let hd = u(v, "attention_head_dim");
    let inner = u(v, "num_attention_heads") * hd;
    let mut c = Count::default();
    let embedders = if v.get("guidance_embeds").and_then(Value::as_bool) == Some(true) {
        2
    } else {
        1
    };
    for _ in 0..embedders {
        c.lin(256, inner, true);
        c.lin(inner, inner, true);
    }
    c.lin(u(v, "pooled_projection_dim"), inner, true);
    c.lin(inner, inner, true);
    c.lin(u(v, "joint_attention_dim"), inner, true);
    c.lin(u(v, "in_channels"), inner, true);
    for _ in 0..u(v, "num_layers") {
        c.lin(inner, 6 * inner, true);
        c.lin(inner, 6 * inner, true);
        for _ in 0..8 {
            c.lin(inner, inner, true);
        }
        for _ in 0..4 {
            c.add(hd);
        }
        for _ in 0..2 {
            c.lin(inner, 4 * inner, true);
            c.lin(4 * inner, inner, true);
        }
    }
    for _ in 0..u(v, "num_single_layers") {
        c.lin(inner, 3 * inner, true);
        c.lin(inner, 4 * inner, true);
        c.lin(5 * inner, inner, true);
        for _ in 0..3 {
            c.lin(inner, inner, true);
        }
        c.add(hd);
        c.add(hd);
    }
    c.lin(inner, 2 * inner, true);
    let p = u(v, "patch_size").max(1);
    c.lin(inner, p * p * u(v, "in_channels"), true);
    c
}

/// The denoiser's shape, read from its config.
#[derive(Clone, Debug)]
enum Denoiser {
    /// Per level: channels, attention heads, has attention; layers per block.
    Unet {
        levels: Vec<(u64, u64, bool)>,
        layers_per_block: u64,
    },
    /// Hidden size, heads, text tokens (FluxPipeline `max_sequence_length`
    /// default 512), patch size.
    Flux {
        inner: u64,
        heads: u64,
        txt: u64,
        patch: u64,
    },
}

/// A transformer encoder of the pipeline that runs once per prompt or image:
/// a text encoder, or SD 1.5's safety checker (a CLIP vision tower).
#[derive(Clone, Debug)]
pub struct Encoder {
    /// Pipeline component name (`text_encoder`, `text_encoder_2`,
    /// `safety_checker`).
    pub name: &'static str,
    /// Its parameters.
    pub params: Count,
    /// Tokens per sequence (CLIP text 77, T5 512, CLIP vision 257).
    pub tokens: u64,
    /// Hidden size.
    pub hidden: u64,
    /// Feed-forward size.
    pub ff: u64,
    /// A T5 encoder: `--quant` applies to it (FLUX's 4.76B `text_encoder_2`);
    /// the CLIP towers stay in the pipeline dtype.
    pub t5: bool,
}

impl Encoder {
    /// Activation bytes of one forward over `b` sequences: per token the
    /// residual stream and attention q/k/v/out (4·h) plus the feed-forward
    /// input and output of the MLP (2·f).
    fn transient(&self, b: u64, bytes: u64) -> u64 {
        b * self.tokens * (2 * self.ff + 4 * self.hidden) * bytes
    }
}

/// One pipeline's components, parsed.
#[derive(Clone, Debug)]
pub struct Model {
    /// Catalogue id.
    pub id: &'static str,
    /// Which pipeline.
    pub pipeline: Pipeline,
    denoiser: Denoiser,
    /// Denoiser parameters.
    pub denoiser_params: Count,
    /// VAE parameters.
    pub vae_params: Count,
    /// Text encoders, in the pipeline's order.
    pub text_encoders: Vec<Encoder>,
    /// The safety checker the pipeline loads by default (SD 1.5: named in its
    /// `model_index.json`), if any.
    pub safety_checker: Option<Encoder>,
    vae_channels: Vec<u64>,
    vae_tile: u64,
    vae_scale: u64,
    /// Default width and height (the denoiser's sample size × VAE scale).
    pub default_size: u64,
    /// The dtype diffusers' model cards load the pipeline in: fp16 for SD 1.5
    /// and SDXL (`torch_dtype=torch.float16`), bf16 for FLUX.1-dev
    /// (`torch_dtype=torch.bfloat16`).
    pub default_precision: Precision,
}

/// The embedded config texts of one pipeline: denoiser, VAE, text encoders,
/// `model_index.json` where the reference folder has it.
struct Texts {
    id: &'static str,
    denoiser: &'static str,
    vae: &'static str,
    text_encoders: [Option<&'static str>; 2],
    model_index: Option<&'static str>,
}

fn texts(p: Pipeline) -> Texts {
    match p {
        Pipeline::Sd15 => Texts {
            id: MODELS[0].0,
            denoiser: include_str!("../models/image/runwayml__stable-diffusion-v1-5__unet.json"),
            vae: include_str!("../models/image/runwayml__stable-diffusion-v1-5__vae.json"),
            text_encoders: [
                Some(include_str!(
                    "../models/image/runwayml__stable-diffusion-v1-5__text_encoder.json"
                )),
                None,
            ],
            model_index: Some(include_str!(
                "../models/image/runwayml__stable-diffusion-v1-5__model_index.json"
            )),
        },
        Pipeline::Sdxl => Texts {
            id: MODELS[1].0,
            denoiser: include_str!(
                "../models/image/stabilityai__stable-diffusion-xl-base-1.0__unet.json"
            ),
            vae: include_str!(
                "../models/image/stabilityai__stable-diffusion-xl-base-1.0__vae.json"
            ),
            text_encoders: [
                Some(include_str!(
                    "../models/image/stabilityai__stable-diffusion-xl-base-1.0__text_encoder.json"
                )),
                Some(include_str!(
                    "../models/image/stabilityai__stable-diffusion-xl-base-1.0__text_encoder_2.json"
                )),
            ],
            model_index: None,
        },
        Pipeline::Flux => Texts {
            id: MODELS[2].0,
            denoiser: include_str!(
                "../models/image/black-forest-labs__FLUX.1-dev__transformer.json"
            ),
            vae: include_str!("../models/image/black-forest-labs__FLUX.1-dev__vae.json"),
            text_encoders: [
                Some(include_str!(
                    "../models/image/black-forest-labs__FLUX.1-dev__text_encoder.json"
                )),
                Some(include_str!(
                    "../models/image/black-forest-labs__FLUX.1-dev__text_encoder_2.json"
                )),
            ],
            model_index: None,
        },
    }
}

/// The safety-checker config (reconstructed: see its `_oomkit_provenance`).
const SAFETY_CHECKER: &str =
    include_str!("../models/image/runwayml__stable-diffusion-v1-5__safety_checker.json");

/// A text encoder from its config: T5 (`d_model`) or CLIP text.
fn text_encoder(name: &'static str, t: &Value) -> Encoder {
    if u(t, "d_model") > 0 {
        // FluxPipeline pads T5 prompts to max_sequence_length = 512.
        Encoder {
            name,
            params: t5_encoder_params(t),
            tokens: 512,
            hidden: u(t, "d_model"),
            ff: u(t, "d_ff"),
            t5: true,
        }
    } else {
        Encoder {
            name,
            params: clip_text_params(t),
            tokens: u(t, "max_position_embeddings"),
            hidden: u(t, "hidden_size"),
            ff: u(t, "intermediate_size"),
            t5: false,
        }
    }
}

/// The safety checker when `model_index.json` names one (`[library, class]`,
/// `null` when a repo ships without it).
fn safety_checker(model_index: Option<&str>) -> Option<Encoder> {
    let named = model_index
        .map(cfg)
        .and_then(|mi| mi.get("safety_checker").cloned())
        .is_some_and(|v| v.as_array().is_some_and(|a| a.iter().all(Value::is_string)));
    if !named {
        return None;
    }
    let v = cfg(SAFETY_CHECKER);
    let vc = v.get("vision_config").cloned().unwrap_or(Value::Null);
    Some(Encoder {
        name: "safety_checker",
        params: safety_checker_params(&v),
        tokens: vision_tokens(&vc),
        hidden: u(&vc, "hidden_size"),
        ff: u(&vc, "intermediate_size"),
        t5: false,
    })
}

/// The UNet's attention levels: (channels, heads, has cross-attention).
fn unet_levels(den: &Value) -> Vec<(u64, u64, bool)> {
    let boc = list(den, "block_out_channels");
    let n = boc.len();
    // diffusers: `num_attention_heads = num_attention_heads or
    // attention_head_dim` (a naming mistake kept for compatibility), so
    // SD 1.5's `attention_head_dim: 8` means 8 heads.
    let heads = match den.get("num_attention_heads") {
        Some(Value::Null) | None => per_level(den, "attention_head_dim", n, 8),
        _ => per_level(den, "num_attention_heads", n, 8),
    };
    let down = strs(den, "down_block_types");
    boc.iter()
        .enumerate()
        .map(|(i, &ch)| {
            let attn = down.get(i).is_some_and(|t| t.starts_with("CrossAttn"));
            (ch, heads.get(i).copied().unwrap_or(8), attn)
        })
        .collect()
}

impl Model {
    /// Builds the model from the embedded configs.
    pub fn load(p: Pipeline) -> Model {
        let t = texts(p);
        let (den, vae) = (cfg(t.denoiser), cfg(t.vae));
        let vae_channels = list(&vae, "block_out_channels");
        let vae_scale = 1u64 << vae_channels.len().saturating_sub(1);
        let names = ["text_encoder", "text_encoder_2"];
        let text_encoders = names
            .iter()
            .zip(t.text_encoders)
            .filter_map(|(name, text)| text.map(|x| text_encoder(name, &cfg(x))))
            .collect();
        let (denoiser, denoiser_params, default_size) = if p == Pipeline::Flux {
            let hd = u(&den, "attention_head_dim");
            let heads = u(&den, "num_attention_heads");
            let d = Denoiser::Flux {
                inner: hd * heads,
                heads,
                txt: 512,
                patch: 2,
            };
            // FluxPipeline.default_sample_size = 128 (latent) × VAE scale 8.
            (d, flux_params(&den), 128 * vae_scale)
        } else {
            let d = Denoiser::Unet {
                levels: unet_levels(&den),
                layers_per_block: u(&den, "layers_per_block"),
            };
            (d, unet_params(&den), u(&den, "sample_size") * vae_scale)
        };
        Model {
            id: t.id,
            pipeline: p,
            denoiser,
            denoiser_params,
            vae_params: vae_params(&vae),
            text_encoders,
            safety_checker: safety_checker(t.model_index),
            vae_tile: u(&vae, "sample_size"),
            vae_channels,
            vae_scale,
            default_size,
            default_precision: if p == Pipeline::Flux {
                Precision::Bf16
            } else {
                Precision::Fp16
            },
        }
    }

    /// All parameters of the pipeline as `from_pretrained` loads it by
    /// default (with its safety checker).
    pub fn params(&self) -> u64 {
        self.param_rows(true).iter().map(|r| r.params).sum()
    }

    /// The denoiser's component name: `transformer` (FLUX) or `unet`.
    pub fn denoiser_name(&self) -> &'static str {
        match self.denoiser {
            Denoiser::Flux { .. } => "transformer",
            Denoiser::Unet { .. } => "unet",
        }
    }

    /// Parameters per loaded component, in the pipeline's order.
    pub fn param_rows(&self, safety_checker: bool) -> Vec<ParamRow> {
        let row = |name: &str, params: u64| ParamRow {
            name: name.into(),
            params,
        };
        let mut rows: Vec<ParamRow> = self
            .text_encoders
            .iter()
            .map(|e| row(e.name, e.params.total))
            .collect();
        rows.push(row(self.denoiser_name(), self.denoiser_params.total));
        rows.push(row("vae", self.vae_params.total));
        if let Some(sc) = self.safety_checker.as_ref().filter(|_| safety_checker) {
            rows.push(row(sc.name, sc.params.total));
        }
        rows
    }

    /// Width and height must be multiples of this (VAE scale; ×2 for FLUX's
    /// 2×2 latent packing).
    pub fn size_multiple(&self) -> u64 {
        match self.denoiser {
            Denoiser::Flux { patch, .. } => self.vae_scale * patch,
            Denoiser::Unet { .. } => self.vae_scale,
        }
    }

    /// The components `--quant` applies to: the denoiser and any T5 encoder.
    pub fn quant_targets(&self) -> Vec<&'static str> {
        let mut v = vec![self.denoiser_name()];
        v.extend(self.text_encoders.iter().filter(|e| e.t5).map(|e| e.name));
        v
    }
}

/// diffusers `enable_model_cpu_offload` / `enable_sequential_cpu_offload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuOffload {
    /// Everything on the GPU.
    None,
    /// One whole component on the GPU at a time.
    Model,
    /// One leaf module on the GPU at a time.
    Sequential,
}

/// The image setup.
#[derive(Clone, Debug, Serialize)]
pub struct ImageSetup {
    /// Image width in pixels.
    pub width: u64,
    /// Image height in pixels.
    pub height: u64,
    /// Images per prompt (`num_images_per_prompt`).
    pub images: u64,
    /// The pipeline's `torch_dtype`: fp32, fp16 or bf16 (SDXL upcasts its VAE
    /// to fp32 for the decode in fp16).
    pub precision: Precision,
    /// Quantization of the denoiser and the T5 encoder (`none`, `int8`,
    /// `nf4`, `nf4-dq`, `fp8`).
    pub quant: Quant,
    /// `eager` (`AttnProcessor`) or `sdpa` (`AttnProcessor2_0`, the default).
    pub attention: Attention,
    /// `pipe.enable_attention_slicing()`.
    pub attention_slicing: bool,
    /// `pipe.vae.enable_slicing()`.
    pub vae_slicing: bool,
    /// `pipe.vae.enable_tiling()`.
    pub vae_tiling: bool,
    /// CPU offload mode.
    pub cpu_offload: CpuOffload,
    /// The safety checker is loaded (SD 1.5's default; `safety_checker=None`
    /// turns it off). Always false for pipelines without one.
    pub safety_checker: bool,
}

impl ImageSetup {
    /// The model's defaults: native size, one image, its usual dtype, SDPA,
    /// nothing sliced or offloaded, the safety checker where it has one.
    pub fn default_for(m: &Model) -> ImageSetup {
        ImageSetup {
            width: m.default_size,
            height: m.default_size,
            images: 1,
            precision: m.default_precision,
            quant: Quant::None,
            attention: Attention::Sdpa,
            attention_slicing: false,
            vae_slicing: false,
            vae_tiling: false,
            cpu_offload: CpuOffload::None,
            safety_checker: m.safety_checker.is_some(),
        }
    }
}

/// Invalid combinations.
pub fn validate(m: &Model, s: &ImageSetup) -> Result<(), String> {
    let k = m.size_multiple();
    if s.width == 0 || s.height == 0 || !s.width.is_multiple_of(k) || !s.height.is_multiple_of(k) {
        return Err(format!(
            "--width/--height must be positive multiples of {k} for {} (got {}×{})",
            m.id, s.width, s.height
        ));
    }
    if s.images == 0 {
        return Err("--images must be at least 1".into());
    }
    if matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16) {
        return Err(
            "diffusers pipelines load one dtype: use --precision fp32, fp16 or bf16".into(),
        );
    }
    if s.quant == Quant::Int4 {
        return Err(
            "--quant int4 (GPTQ/AWQ) is not a diffusers from_pretrained quantization: use int8, nf4, nf4-dq or fp8"
                .into(),
        );
    }
    if s.attention == Attention::Flash {
        return Err("image models: --attention sdpa (default) or eager".into());
    }
    if m.pipeline == Pipeline::Flux && s.attention_slicing {
        return Err("FluxPipeline has no attention slicing; use SDPA (the default)".into());
    }
    if s.safety_checker && m.safety_checker.is_none() {
        return Err(format!("{} has no safety checker", m.id));
    }
    Ok(())
}

/// One row of the breakdown.
#[derive(Clone, Debug, Serialize)]
pub struct Part {
    /// What it is.
    pub name: String,
    /// Bytes at the peak phase.
    pub bytes: u64,
}

/// One component's parameter count.
#[derive(Clone, Debug, Serialize)]
pub struct ParamRow {
    /// Pipeline component (`unet`, `transformer`, `vae`, `text_encoder`, …).
    pub name: String,
    /// Its parameters.
    pub params: u64,
}

/// The result: the same [`Estimate`] as text models (the JSON `components`,
/// peaks and phase) plus the per-component detail.
#[derive(Clone, Debug)]
pub struct ImageEstimate {
    /// Components and peaks. Weights are every component resident at the
    /// peak; activations the phase's working set (encoder, denoiser or VAE
    /// decoder); temporaries the dequantized copy of one quantized linear;
    /// gradients, optimizer, logits and KV cache are 0.
    pub estimate: Estimate,
    /// Parameters per loaded component.
    pub params: Vec<ParamRow>,
    /// Weights resident at the peak, per component.
    pub weights: Vec<Part>,
    /// What the activations are (`unet activations`, …).
    pub activations: String,
}

/// Bytes of `c` stored at `bytes` per element with `q` on its `nn.Linear`
/// weights: bits per linear weight from [`components::quant_bits_x1000`]
/// (`memory-estimation.md` §3.1: bnb NF4 4 bits + one fp32 absmax per 64 =
/// 4.5; double-quantized 4.127; LLM.int8 and fp8 8) plus, for int8 and fp8,
/// one fp32 scale per output row (bitsandbytes `Int8Params.SCB`; torchao's
/// float8 weight-only scales counted the same way). Convolutions, norms and
/// embeddings stay in the pipeline dtype (bitsandbytes and torchao replace
/// linears only).
fn weight_bytes(c: &Count, bytes: u64, q: Quant) -> u64 {
    if q == Quant::None {
        return c.total * bytes;
    }
    let scales = if matches!(q, Quant::Int8 | Quant::Fp8) {
        c.rows * 4
    } else {
        0
    };
    (c.linear * components::quant_bits_x1000(q)).div_ceil(8_000)
        + scales
        + (c.total - c.linear) * bytes
}

/// The dequantized copy a quantized forward makes of one linear at a time
/// (bitsandbytes and torchao weight-only kernels run in the compute dtype):
/// the largest linear at `bytes`, as [`components::dequant_bytes`] for text
/// models; 0 unquantized.
fn dequant_bytes(c: &Count, bytes: u64, q: Quant) -> u64 {
    if q == Quant::None {
        0
    } else {
        c.largest_linear * bytes
    }
}

/// UNet transient of one forward at latent resolution, batch `b`:
/// the skip connections kept for the up path (conv_in output, every down
/// resnet/attention output and downsample output — diffusers
/// `down_block_res_samples`) plus, at each attention level, the transformer
/// block working set (17·N·C: residual, GEGLU 8C projection, 4C gate, 4C
/// product) and, for eager attention, the score and probability matrices
/// 2·b·heads·N² (sliced: `slice_size = heads/2` of the b·heads rows at once,
/// diffusers `set_attention_slice("auto")`; SDPA: none).
pub fn unet_transient(
    levels: &[(u64, u64, bool)],
    lpb: u64,
    b: u64,
    tokens0: u64,
    a: u64,
    eager: bool,
    slicing: bool,
) -> u64 {
    let mut skips = levels.first().map_or(0, |l| l.0) * tokens0;
    let mut work = 0u64;
    let n_levels = levels.len();
    for (i, &(ch, heads, attn)) in levels.iter().enumerate() {
        let n = tokens0 >> (2 * i);
        skips += lpb * ch * n;
        if i + 1 < n_levels {
            skips += ch * (n >> 2);
        }
        if attn {
            let mut w = 17 * ch * n * b;
            if slicing {
                w += 2 * (heads / 2).max(1) * n * n;
            } else if eager {
                w += 2 * b * heads * n * n;
            }
            work = work.max(w);
        }
    }
    (skips * b + work) * a
}

/// FLUX transformer transient, batch `b`, `s` = image + text tokens: the block
/// working set (16·s·inner: residual, norm, q, k, v, attention output, 4×
/// MLP and its activation, the 5× concat of the single-stream blocks) and, for
/// eager attention, 2·b·heads·s².
pub fn flux_transient(inner: u64, heads: u64, b: u64, s: u64, a: u64, eager: bool) -> u64 {
    let mut w = 16 * b * s * inner;
    if eager {
        w += 2 * b * heads * s * s;
    }
    w * a
}

/// VAE decode transient for `b` images of `h×w` pixels: the largest decoder
/// stage holds ~3 feature maps (the resnet input kept for the shortcut, the
/// normalised map, the conv output) of max(in, out) channels at its
/// resolution — for the SD/FLUX VAE the full-resolution stage, 3·256·H·W; plus,
/// for eager attention, the mid-block single-head scores 2·(h/8·w/8)².
/// Tiling bounds h and w by the tile (`tile_sample_min_size` = the VAE's
/// `sample_size`); slicing decodes one image at a time.
pub fn vae_transient(ch: &[u64], b: u64, h: u64, w: u64, a: u64, eager: bool) -> u64 {
    let n = ch.len() as u32;
    let mut units = 0u64;
    let mut prev = ch.last().copied().unwrap_or(0);
    for (i, &o) in ch.iter().rev().enumerate() {
        let res = (h >> (n - 1 - i as u32)) * (w >> (n - 1 - i as u32));
        units = units.max(3 * prev.max(o) * res);
        prev = o;
    }
    let sh = n.saturating_sub(1);
    let lat = (h >> sh) * (w >> sh);
    let attn = if eager { 2 * lat * lat } else { 0 };
    (units + attn) * b * a
}

/// One component's weights: name, bytes when whole on the GPU, bytes of its
/// largest leaf module (sequential offload), and whether offload leaves it
/// on the GPU (diffusers `_exclude_from_cpu_offload = ["safety_checker"]`:
/// both offload modes `.to(device)` it).
struct Weights {
    name: &'static str,
    full: u64,
    leaf: u64,
    pinned: bool,
}

/// One phase: its components, its activations and temporaries.
struct Phase {
    name: &'static str,
    components: Vec<&'static str>,
    activations: (String, u64),
    temporaries: u64,
}

/// The largest leaf module of `c` as a count of its own (a linear when no
/// other leaf is larger; its row scales are left out).
fn single(c: &Count) -> Count {
    let linear = if c.largest_linear == c.largest {
        c.largest
    } else {
        0
    };
    Count {
        total: c.largest,
        largest: c.largest,
        linear,
        rows: 0,
        largest_linear: linear,
    }
}

/// Every loaded component's weights under `s`.
fn weights(m: &Model, s: &ImageSetup) -> Vec<Weights> {
    let wb = s.precision.param_bytes();
    let w = |name, c: &Count, bytes, q, pinned| Weights {
        name,
        full: weight_bytes(c, bytes, q),
        leaf: weight_bytes(&single(c), bytes, q),
        pinned,
    };
    let mut v: Vec<Weights> = m
        .text_encoders
        .iter()
        .map(|e| {
            let q = if e.t5 { s.quant } else { Quant::None };
            w(e.name, &e.params, wb, q, false)
        })
        .collect();
    v.push(w(m.denoiser_name(), &m.denoiser_params, wb, s.quant, false));
    v.push(w("vae", &m.vae_params, vae_bytes(m, s), Quant::None, false));
    if let Some(sc) = m.safety_checker.as_ref().filter(|_| s.safety_checker) {
        v.push(w(sc.name, &sc.params, wb, Quant::None, true));
    }
    v
}

/// VAE bytes per element: the pipeline dtype, except SDXL in fp16, whose
/// pipeline upcasts the VAE to fp32 for the decode
/// (`StableDiffusionXLPipeline.__call__`, `needs_upcasting`).
fn vae_bytes(m: &Model, s: &ImageSetup) -> u64 {
    if m.pipeline == Pipeline::Sdxl && s.precision == Precision::Fp16 {
        4
    } else {
        s.precision.param_bytes()
    }
}

/// The phases in order: prompt encoding (one per text encoder), denoising,
/// VAE decode, the safety check.
fn phases(m: &Model, s: &ImageSetup) -> Vec<Phase> {
    let wb = s.precision.param_bytes();
    // Classifier-free guidance doubles the batch for SD/SDXL; FLUX.1-dev is
    // guidance-distilled.
    let cfg_b = if m.pipeline == Pipeline::Flux {
        s.images
    } else {
        2 * s.images
    };
    let mut v: Vec<Phase> = m
        .text_encoders
        .iter()
        .map(|e| {
            let q = if e.t5 { s.quant } else { Quant::None };
            Phase {
                name: "encode-prompt",
                components: vec![e.name],
                activations: (format!("{} activations", e.name), e.transient(cfg_b, wb)),
                temporaries: dequant_bytes(&e.params, wb, q),
            }
        })
        .collect();
    let den = m.denoiser_name();
    v.push(Phase {
        name: "denoise",
        components: vec![den],
        activations: (
            format!("{den} activations"),
            denoiser_transient(m, s, cfg_b),
        ),
        temporaries: dequant_bytes(&m.denoiser_params, wb, s.quant),
    });
    let decoded = s.images * 3 * s.width * s.height * vae_bytes(m, s);
    v.push(Phase {
        name: "vae-decode",
        components: vec!["vae"],
        activations: (
            "vae decode activations".into(),
            vae_decode_transient(m, s) + decoded,
        ),
        temporaries: 0,
    });
    if let Some(sc) = m.safety_checker.as_ref().filter(|_| s.safety_checker) {
        // The decoded images stay alive while the checker runs on 224² crops.
        v.push(Phase {
            name: "safety-check",
            components: vec![sc.name],
            activations: (
                format!("{} activations", sc.name),
                sc.transient(s.images, wb) + decoded,
            ),
            temporaries: 0,
        });
    }
    v
}

/// One UNet/transformer forward at the latent resolution.
fn denoiser_transient(m: &Model, s: &ImageSetup, b: u64) -> u64 {
    let wb = s.precision.param_bytes();
    let latent_tokens = (s.width / m.vae_scale) * (s.height / m.vae_scale);
    let eager = s.attention == Attention::Eager;
    match &m.denoiser {
        Denoiser::Unet {
            levels,
            layers_per_block,
        } => unet_transient(
            levels,
            *layers_per_block,
            b,
            latent_tokens,
            wb,
            eager,
            s.attention_slicing,
        ),
        Denoiser::Flux {
            inner,
            heads,
            txt,
            patch,
        } => flux_transient(
            *inner,
            *heads,
            b,
            latent_tokens / (patch * patch) + txt,
            wb,
            eager,
        ),
    }
}

/// The VAE decoder's working set, with slicing (one image) and tiling (one
/// tile) applied.
fn vae_decode_transient(m: &Model, s: &ImageSetup) -> u64 {
    let tile = m.vae_tile;
    let tiled = s.vae_tiling && (s.width > tile || s.height > tile);
    let (h, w) = if tiled {
        (s.height.min(tile), s.width.min(tile))
    } else {
        (s.height, s.width)
    };
    let b = if s.vae_slicing { 1 } else { s.images };
    let eager = s.attention == Attention::Eager;
    vae_transient(&m.vae_channels, b, h, w, vae_bytes(m, s), eager)
}

/// The weights resident during a phase that runs `names`: all of them
/// without offload; with `model` offload only those components (whole); with
/// `sequential` only their largest leaf module; pinned components always.
fn resident(all: &[Weights], names: &[&str], offload: CpuOffload) -> Vec<Part> {
    all.iter()
        .filter_map(|w| {
            let here = names.contains(&w.name);
            let bytes = match offload {
                _ if w.pinned => w.full,
                CpuOffload::None => w.full,
                CpuOffload::Model if here => w.full,
                CpuOffload::Sequential if here => w.leaf,
                _ => return None,
            };
            Some(Part {
                name: w.name.into(),
                bytes,
            })
        })
        .collect()
}

/// The estimate: each phase's resident weights, activations and
/// temporaries; the phase with the largest reserved memory is the peak.
pub fn estimate(m: &Model, s: &ImageSetup) -> ImageEstimate {
    let all = weights(m, s);
    let ctx = components::cuda_context_bytes();
    let mut best: Option<(u64, u64, Phase, Vec<Part>)> = None;
    for p in phases(m, s) {
        let parts = resident(&all, &p.components, s.cpu_offload);
        let transient = p.activations.1 + p.temporaries;
        let alloc = parts.iter().map(|r| r.bytes).sum::<u64>() + transient;
        let reserved = components::reserved_bytes(alloc, transient);
        if best.as_ref().is_none_or(|b| reserved > b.1) {
            best = Some((alloc, reserved, p, parts));
        }
    }
    let params = m.param_rows(s.safety_checker);
    let total: u64 = params.iter().map(|r| r.params).sum();
    let (alloc, reserved, p, parts) = best.unwrap_or((
        0,
        0,
        Phase {
            name: "denoise",
            components: Vec::new(),
            activations: (String::new(), 0),
            temporaries: 0,
        },
        Vec::new(),
    ));
    let components = Components {
        weights_bytes: parts.iter().map(|r| r.bytes).sum(),
        activations_bytes: p.activations.1,
        temporaries_bytes: p.temporaries,
        cuda_context_bytes: ctx,
        ..Components::default()
    };
    ImageEstimate {
        estimate: Estimate {
            components,
            peak_allocated_bytes: alloc,
            peak_reserved_bytes: reserved,
            device_used_bytes: reserved + ctx,
            peak_phase: p.name,
            params: total,
            trainable_params: 0,
        },
        params,
        weights: parts,
        activations: p.activations.0,
    }
}

/// Most images per call searched for `max_batch`.
const MAX_IMAGES: u64 = 4096;
/// Largest square side searched for `max_seq`, in pixels.
const MAX_SIDE: u64 = 16_384;

/// `torch_dtype=` as diffusers code.
fn torch_dtype(p: Precision) -> &'static str {
    match p {
        Precision::Fp32 => "torch.float32",
        Precision::Fp16 => "torch.float16",
        _ => "torch.bfloat16",
    }
}

/// Paste-ready diffusers code loading the pipeline as `s` says: its
/// `torch_dtype`, `safety_checker=None` when the checker is off, and the
/// quantization of [`quant_config`]. Plan steps print it for the setup they
/// reach, so it carries every earlier load-time step.
pub fn load_code(m: &Model, s: &ImageSetup) -> String {
    let mut args = vec![
        format!("\"{}\"", m.id),
        format!("torch_dtype={}", torch_dtype(s.precision)),
    ];
    if m.safety_checker.is_some() && !s.safety_checker {
        args.push("safety_checker=None".into());
    }
    if s.quant != Quant::None {
        args.push(format!("quantization_config={}", quant_config(m, s)));
    }
    let import = if s.quant == Quant::Fp8 {
        "  # from torchao.quantization import Float8WeightOnlyConfig"
    } else {
        ""
    };
    format!(
        "pipe = DiffusionPipeline.from_pretrained({}){import}",
        args.join(", ")
    )
}

/// `s.quant` on [`Model::quant_targets`] as a diffusers
/// `PipelineQuantizationConfig`: bitsandbytes through `quant_backend=…` (the
/// same kwargs fit diffusers' and transformers' `BitsAndBytesConfig`),
/// torchao float8 weight-only through a `quant_mapping` (diffusers' and
/// transformers' `TorchAoConfig` signatures differ, which `quant_backend`
/// rejects).
pub fn quant_config(m: &Model, s: &ImageSetup) -> String {
    let dtype = torch_dtype(s.precision);
    let targets = m.quant_targets();
    let list = targets
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(", ");
    match s.quant {
        Quant::Int8 => format!(
            "PipelineQuantizationConfig(quant_backend=\"bitsandbytes_8bit\", quant_kwargs={{\"load_in_8bit\": True}}, components_to_quantize=[{list}])"
        ),
        Quant::Nf4 | Quant::Nf4Dq => format!(
            "PipelineQuantizationConfig(quant_backend=\"bitsandbytes_4bit\", quant_kwargs={{\"load_in_4bit\": True, \"bnb_4bit_quant_type\": \"nf4\", \"bnb_4bit_compute_dtype\": {dtype}{}}}, components_to_quantize=[{list}])",
            if s.quant == Quant::Nf4Dq {
                ", \"bnb_4bit_use_double_quant\": True"
            } else {
                ""
            }
        ),
        _ => {
            let den = m.denoiser_name();
            let map = targets
                .iter()
                .map(|t| {
                    let lib = if *t == den {
                        "diffusers"
                    } else {
                        "transformers"
                    };
                    format!("\"{t}\": {lib}.TorchAoConfig(Float8WeightOnlyConfig())")
                })
                .collect::<Vec<_>>()
                .join(", ");
            format!("PipelineQuantizationConfig(quant_mapping={{{map}}})")
        }
    }
}

/// One rung of the plan: applies itself to a setup (false: does not apply),
/// describes the change, names the remedy and gives the code for the
/// resulting setup.
struct Rung {
    apply: fn(&Model, &mut ImageSetup) -> bool,
    change: fn(&Model, &ImageSetup) -> String,
    remedy: &'static str,
    config: fn(&Model, &ImageSetup) -> String,
}

/// Sets the quantization to `q` when it lowers the weight bits.
fn quantize(t: &mut ImageSetup, q: Quant) -> bool {
    let ok = components::quant_bits_x1000(q) < components::quant_bits_x1000(t.quant);
    if ok {
        t.quant = q;
    }
    ok
}

/// The ladder, cheapest first: attention slicing (eager UNet attention),
/// VAE slicing (several images) and tiling (larger than a tile) — remedy
/// `diffusers-slicing`; half-precision weights; dropping the safety checker
/// (`unload-models`); model CPU offload; 8-bit then 4-bit denoiser (and T5);
/// sequential CPU offload.
const LADDER: [Rung; 9] = [
    Rung {
        apply: |m, t| {
            let ok = m.pipeline != Pipeline::Flux
                && t.attention == Attention::Eager
                && !t.attention_slicing;
            t.attention_slicing |= ok;
            ok
        },
        change: |_, _| "attention slicing".into(),
        remedy: "diffusers-slicing",
        config: |_, _| "pipe.enable_attention_slicing()".into(),
    },
    Rung {
        apply: |_, t| {
            let ok = t.images > 1 && !t.vae_slicing;
            t.vae_slicing |= ok;
            ok
        },
        change: |_, _| "VAE slicing (decode one image at a time)".into(),
        remedy: "diffusers-slicing",
        config: |_, _| "pipe.vae.enable_slicing()".into(),
    },
    Rung {
        apply: |m, t| {
            let ok = (t.width > m.vae_tile || t.height > m.vae_tile) && !t.vae_tiling;
            t.vae_tiling |= ok;
            ok
        },
        change: |_, _| "VAE tiling".into(),
        remedy: "diffusers-slicing",
        config: |_, _| "pipe.vae.enable_tiling()".into(),
    },
    Rung {
        apply: |m, t| {
            let ok = t.precision == Precision::Fp32;
            if ok {
                t.precision = m.default_precision;
            }
            ok
        },
        change: |_, t| format!("{} weights", components::precision_name(t.precision)),
        remedy: "half-precision-weights",
        config: load_code,
    },
    Rung {
        apply: |_, t| {
            let ok = t.safety_checker;
            t.safety_checker = false;
            ok
        },
        change: |_, _| {
            "load without the safety checker (it stays on the GPU even with offload)".into()
        },
        remedy: "unload-models",
        config: load_code,
    },
    Rung {
        apply: |_, t| {
            let ok = t.cpu_offload == CpuOffload::None;
            if ok {
                t.cpu_offload = CpuOffload::Model;
            }
            ok
        },
        change: |_, _| "model CPU offload (one component on the GPU at a time)".into(),
        remedy: "diffusers-cpu-offload",
        config: |_, _| "pipe.enable_model_cpu_offload()".into(),
    },
    Rung {
        apply: |_, t| quantize(t, Quant::Int8),
        change: |m, _| format!("8-bit {} (bitsandbytes)", m.quant_targets().join(" and ")),
        remedy: "quantize-8bit",
        config: load_code,
    },
    Rung {
        apply: |_, t| quantize(t, Quant::Nf4),
        change: |m, _| {
            format!(
                "4-bit NF4 {} (bitsandbytes)",
                m.quant_targets().join(" and ")
            )
        },
        remedy: "quantize-4bit",
        config: load_code,
    },
    Rung {
        apply: |_, t| {
            let ok = t.cpu_offload != CpuOffload::Sequential;
            t.cpu_offload = CpuOffload::Sequential;
            ok
        },
        change: |_, _| "sequential CPU offload (one module at a time; slow)".into(),
        remedy: "diffusers-cpu-offload",
        config: |_, _| "pipe.enable_sequential_cpu_offload()".into(),
    },
];

/// Fit on `gpu` and the plan: the ladder (`LADDER`) applied cumulatively (a rung
/// that did not lower the peak is retried once the peak moves to another
/// phase), then one image per call and smaller sizes (`reduce-input-size`).
/// In the shared [`Fit`]: `max_batch` is the largest `--images` that fits and
/// `max_seq` the largest square `--width = --height` in pixels (a multiple of
/// [`Model::size_multiple`]; the image analogue of the longest input), other
/// settings unchanged, 0 when none fits.
pub fn fit(m: &Model, s: &ImageSetup, gpu: &'static Gpu) -> Fit {
    let usable = gpu.usable().get();
    let used = |t: &ImageSetup| estimate(m, t).estimate.device_used_bytes;
    let now = used(s);
    let fits = now <= usable;
    let max_images = largest_where(MAX_IMAGES, |n| {
        used(&ImageSetup {
            images: n,
            ..s.clone()
        }) <= usable
    });
    let k = m.size_multiple();
    let max_side = k * largest_where(MAX_SIDE / k, |n| {
        used(&ImageSetup {
            width: n * k,
            height: n * k,
            ..s.clone()
        }) <= usable
    });
    let (plan, plan_fits) = if fits {
        (Vec::new(), true)
    } else {
        plan(m, s, usable)
    };
    Fit {
        gpu: gpu.id,
        usable_bytes: usable,
        fits,
        headroom_bytes: usable as i64 - now as i64,
        max_batch: max_images,
        max_seq: max_side,
        plan,
        plan_fits,
        device_map: None,
    }
}

/// The plan for a setup that does not fit `usable` bytes, and whether it
/// reaches a fit.
fn plan(m: &Model, s: &ImageSetup, usable: u64) -> (Vec<Step>, bool) {
    let used = |t: &ImageSetup| estimate(m, t).estimate.device_used_bytes;
    let mut steps = Vec::new();
    let mut cur = s.clone();
    let mut last = used(s);
    let mut push = |cur: &ImageSetup, change: String, remedy: &'static str, config: String| {
        let after = used(cur);
        if after >= last {
            return None;
        }
        steps.push(Step {
            change,
            remedy,
            saves_bytes: last - after,
            peak_after_bytes: after,
            config,
        });
        last = after;
        Some(after <= usable)
    };
    let mut done = false;
    let mut taken = [false; LADDER.len()];
    'ladder: while !done {
        for (i, r) in LADDER.iter().enumerate() {
            let mut t = cur.clone();
            if taken[i] || !(r.apply)(m, &mut t) {
                continue;
            }
            if let Some(d) = push(&t, (r.change)(m, &t), r.remedy, (r.config)(m, &t)) {
                taken[i] = true;
                done = d;
                cur = t;
                continue 'ladder;
            }
        }
        break;
    }
    if !done && cur.images > 1 {
        cur.images = 1;
        done = push(
            &cur,
            "one image per call".into(),
            "reduce-input-size",
            "num_images_per_prompt=1".into(),
        )
        .unwrap_or(false);
    }
    let k = m.size_multiple();
    while !done && cur.width.max(cur.height) > 4 * k {
        cur.width = (cur.width * 3 / 4 / k).max(1) * k;
        cur.height = (cur.height * 3 / 4 / k).max(1) * k;
        let (w, h) = (cur.width, cur.height);
        done = push(
            &cur,
            format!("{w}×{h} pixels"),
            "reduce-input-size",
            format!("width={w}, height={h}"),
        )
        .unwrap_or(false);
    }
    (steps, done)
}

/// `--quant` as the user writes it.
fn quant_name(q: Quant) -> &'static str {
    match q {
        Quant::None => "none",
        Quant::Int8 => "int8",
        Quant::Nf4 => "nf4",
        Quant::Nf4Dq => "nf4-dq",
        Quant::Int4 => "int4",
        Quant::Fp8 => "fp8",
    }
}

/// Human output.
pub fn human(m: &Model, s: &ImageSetup, e: &ImageEstimate, f: Option<&Fit>) -> String {
    let mut o = String::new();
    let est = &e.estimate;
    let _ = writeln!(
        o,
        "{} ({} params) · text-to-image · {}{} · {}×{} × {} image{}{}",
        m.id,
        human_count(est.params),
        components::precision_name(s.precision),
        match s.quant {
            Quant::None => String::new(),
            q => format!(" · {} {}", quant_name(q), m.quant_targets().join("+")),
        },
        s.width,
        s.height,
        s.images,
        if s.images == 1 { "" } else { "s" },
        match s.cpu_offload {
            CpuOffload::None => "",
            CpuOffload::Model => " · model CPU offload",
            CpuOffload::Sequential => " · sequential CPU offload",
        }
    );
    let _ = writeln!(
        o,
        "  {}",
        e.params
            .iter()
            .map(|r| format!("{} {}", r.name, human_count(r.params)))
            .collect::<Vec<_>>()
            .join(" · ")
    );
    o.push('\n');
    let c = &est.components;
    let mut rows: Vec<(String, u64)> = e
        .weights
        .iter()
        .map(|p| (format!("{} weights", p.name), p.bytes))
        .collect();
    rows.push((e.activations.clone(), c.activations_bytes));
    if c.temporaries_bytes > 0 {
        rows.push(("dequantized linear".into(), c.temporaries_bytes));
    }
    rows.push(("cuda context".into(), c.cuda_context_bytes));
    let total = est.device_used_bytes.max(1);
    for (name, bytes) in rows {
        let n = (((bytes as f64 / total as f64) * BAR as f64).round() as usize).min(BAR);
        let _ = writeln!(
            o,
            "  {:<24}{:>11}  {}{}",
            name,
            Bytes(bytes).to_string(),
            "█".repeat(n),
            "·".repeat(BAR - n)
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "  peak allocated   {:>11}   (torch.cuda.max_memory_allocated, at {})",
        Bytes(est.peak_allocated_bytes).to_string(),
        est.peak_phase
    );
    let _ = writeln!(
        o,
        "  peak reserved    {:>11}   (torch.cuda.max_memory_reserved)",
        Bytes(est.peak_reserved_bytes).to_string()
    );
    let _ = writeln!(
        o,
        "  device used      {:>11}   (nvidia-smi)",
        Bytes(est.device_used_bytes).to_string()
    );
    if let Some(f) = f {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{} {}: {} of {} usable ({} {}); max images {}, max size {}×{}",
            if f.fits { "fits on" } else { "does not fit on" },
            f.gpu,
            Bytes(est.device_used_bytes),
            Bytes(f.usable_bytes),
            Bytes(f.headroom_bytes.unsigned_abs()),
            if f.fits { "headroom" } else { "short" },
            f.max_batch,
            f.max_seq,
            f.max_seq
        );
        crate::render::plan(&mut o, &f.plan, f.plan_fits);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(p: Pipeline) -> (Model, ImageSetup) {
        let m = Model::load(p);
        let s = ImageSetup::default_for(&m);
        (m, s)
    }

    #[test]
    fn configs_parse() {
        for (_, _, p) in MODELS {
            let m = Model::load(p);
            assert!(m.denoiser_params.total > 0 && m.vae_params.total > 0);
            assert!(!m.text_encoders.is_empty() && m.vae_channels.len() == 4);
            assert!(m.denoiser_params.largest_linear > 0);
        }
        // Empty configs count nothing and do not panic.
        assert_eq!(unet_params(&Value::Null).total, 0);
        assert_eq!(vae_params(&Value::Null).total, 0);
        assert_eq!(
            vae_transient(&[], 1, 64, 64, 2, true),
            2 * 64 * 64 * 64 * 64 * 2
        );
    }

    #[test]
    fn sd15_counts() {
        let m = Model::load(Pipeline::Sd15);
        // diffusers `unet.num_parameters()` for SD 1.5 / the SD VAE / CLIP ViT-L/14 text.
        assert_eq!(m.denoiser_params.total, 859_520_964);
        assert_eq!(m.vae_params.total, 83_653_863);
        assert_eq!(m.text_encoders[0].params.total, 123_060_480);
        assert_eq!(m.default_size, 512);
        assert_eq!(m.default_precision, Precision::Fp16);
    }

    #[test]
    fn sdxl_counts() {
        let m = Model::load(Pipeline::Sdxl);
        assert_eq!(m.denoiser_params.total, 2_567_463_684);
        assert_eq!(m.vae_params.total, 83_653_863);
        assert_eq!(m.text_encoders[1].params.total, 694_659_840);
        assert_eq!(m.default_size, 1024);
    }

    #[test]
    fn flux_counts() {
        let m = Model::load(Pipeline::Flux);
        assert_eq!(m.denoiser_params.total, 11_901_408_320);
        // 23.8 GB bf16 transformer safetensors (reference sheet).
        let gb = m.denoiser_params.total * 2 / 100_000_000;
        assert_eq!(gb, 238);
        assert_eq!(m.text_encoders[1].params.total, 4_762_310_656);
        assert_eq!(m.vae_params.total, 83_819_683);
        assert_eq!(m.size_multiple(), 16);
    }

    #[test]
    fn safety_checker_counts() {
        let m = Model::load(Pipeline::Sd15);
        let sc = m.safety_checker.as_ref().expect("SD 1.5 names one");
        // CLIP ViT-L/14 vision: embeddings (class, 3·1024·14² patch conv,
        // 257 positions), pre/post LayerNorm, 24 layers of 2 LayerNorms, 4
        // attention linears and a 4096 MLP; projection 1024→768; 20 concept
        // embeddings of 768 and their 20 weights.
        let (h, f) = (1024u64, 4096u64);
        let layer = 2 * 2 * h + 4 * (h * h + h) + (h * f + f) + (f * h + h);
        let vision = h + 3 * h * 14 * 14 + 257 * h + 4 * h + 24 * layer;
        assert_eq!(vision, 303_179_776);
        assert_eq!(sc.params.total, vision + h * 768 + 20 * 768 + 20);
        assert_eq!(sc.tokens, 257);
        assert!(Model::load(Pipeline::Sdxl).safety_checker.is_none());
        assert!(Model::load(Pipeline::Flux).safety_checker.is_none());
    }

    #[test]
    fn safety_checker_stays_on_the_gpu_with_offload() {
        let (m, mut s) = base(Pipeline::Sd15);
        s.cpu_offload = CpuOffload::Model;
        let with = estimate(&m, &s);
        assert!(with.weights.iter().any(|p| p.name == "safety_checker"));
        s.safety_checker = false;
        let without = estimate(&m, &s);
        let sc = m.safety_checker.as_ref().map_or(0, |e| e.params.total);
        assert_eq!(
            with.estimate.components.weights_bytes - without.estimate.components.weights_bytes,
            sc * 2
        );
    }

    #[test]
    fn quantized_weights_follow_the_bits_per_weight() {
        let m = Model::load(Pipeline::Flux);
        let c = m.denoiser_params;
        let full = weight_bytes(&c, 2, Quant::None);
        let rest = (c.total - c.linear) * 2;
        assert_eq!(
            weight_bytes(&c, 2, Quant::Nf4),
            (c.linear * 9).div_ceil(16) + rest
        );
        assert_eq!(
            weight_bytes(&c, 2, Quant::Int8),
            c.linear + c.rows * 4 + rest
        );
        assert_eq!(
            weight_bytes(&c, 2, Quant::Fp8),
            weight_bytes(&c, 2, Quant::Int8)
        );
        // Nearly all FLUX transformer weights are linears: ~4.5/16 of bf16.
        let r = weight_bytes(&c, 2, Quant::Nf4) as f64 / full as f64;
        assert!((0.28..0.30).contains(&r), "{r}");
        // SD 1.5's UNet keeps its convolutions (and 1×1 conv projections) in fp16.
        let u = Model::load(Pipeline::Sd15).denoiser_params;
        assert!(u.linear * 10 < u.total * 8, "{} of {}", u.linear, u.total);
    }

    #[test]
    fn load_code_names_the_components() {
        let (m, mut s) = base(Pipeline::Flux);
        s.quant = Quant::Nf4;
        let code = load_code(&m, &s);
        assert!(code.contains("components_to_quantize=[\"transformer\", \"text_encoder_2\"]"));
        assert!(code.contains("\"bnb_4bit_compute_dtype\": torch.bfloat16"));
        assert!(code.starts_with("pipe = DiffusionPipeline.from_pretrained(\"black-forest-labs/FLUX.1-dev\", torch_dtype=torch.bfloat16, quantization_config="));
        let (m, mut s) = base(Pipeline::Sd15);
        s.quant = Quant::Fp8;
        s.safety_checker = false;
        let code = load_code(&m, &s);
        assert!(code.contains("\"unet\": diffusers.TorchAoConfig(Float8WeightOnlyConfig())"));
        assert!(code.contains("safety_checker=None") && !code.contains("text_encoder"));
        assert!(code.ends_with("# from torchao.quantization import Float8WeightOnlyConfig"));
    }

    #[test]
    fn fit_reports_max_images_and_side() {
        let (m, s) = base(Pipeline::Sdxl);
        let g = oomkit_core::gpus::find("rtx-4090").unwrap();
        let f = fit(&m, &s, g);
        let used = |t: ImageSetup| estimate(&m, &t).estimate.device_used_bytes;
        assert!(f.fits && f.max_batch >= 1 && f.max_seq >= s.width);
        let k = m.size_multiple();
        let side = |n| ImageSetup {
            width: n,
            height: n,
            ..s.clone()
        };
        assert!(used(side(f.max_seq)) <= f.usable_bytes);
        assert!(used(side(f.max_seq + k)) > f.usable_bytes);
        let imgs = |n| ImageSetup {
            images: n,
            ..s.clone()
        };
        assert!(used(imgs(f.max_batch)) <= f.usable_bytes);
        assert!(used(imgs(f.max_batch + 1)) > f.usable_bytes);
    }

    #[test]
    fn eager_attention_is_quadratic_and_slicing_bounds_it() {
        // SD 1.5 levels: 320/640/1280 with attention, 1280 without; 8 heads.
        let lv = [
            (320, 8, true),
            (640, 8, true),
            (1280, 8, true),
            (1280, 8, false),
        ];
        let t = |eager, slicing| unet_transient(&lv, 2, 2, 4096, 2, eager, slicing);
        // Level 0: 4096 tokens, 8 heads, batch 2 (CFG), scores + probs in fp16.
        let scores = 2 * 2 * 8 * 4096 * 4096 * 2;
        assert_eq!(t(true, false) - t(false, false), scores);
        // Sliced: 4 of the 16 (batch × head) rows at once.
        assert_eq!(t(false, true) - t(false, false), scores / 4);
        let (m, mut s) = base(Pipeline::Sd15);
        s.attention = Attention::Eager;
        assert_eq!(estimate(&m, &s).estimate.peak_phase, "denoise");
    }

    #[test]
    fn vae_decode_slicing_and_tiling() {
        let ch = [128, 256, 512, 512];
        // Full-res stage: 3 × 256 channels × H × W.
        assert_eq!(
            vae_transient(&ch, 1, 512, 512, 2, false),
            3 * 256 * 512 * 512 * 2
        );
        let (m, mut s) = base(Pipeline::Sdxl);
        s.width = 2048;
        s.height = 2048;
        s.images = 4;
        let full = estimate(&m, &s);
        assert_eq!(full.estimate.peak_phase, "vae-decode");
        s.vae_slicing = true;
        s.vae_tiling = true;
        let small = estimate(&m, &s);
        assert!(small.estimate.device_used_bytes < full.estimate.device_used_bytes / 4);
    }

    #[test]
    fn offload_keeps_one_component() {
        let (m, mut s) = base(Pipeline::Flux);
        let all = estimate(&m, &s).estimate;
        s.cpu_offload = CpuOffload::Model;
        let model = estimate(&m, &s).estimate;
        s.cpu_offload = CpuOffload::Sequential;
        let seq = estimate(&m, &s).estimate;
        assert!(all.peak_allocated_bytes > 33_000_000_000);
        assert_eq!(model.peak_phase, "denoise");
        assert!(model.peak_allocated_bytes > 23_800_000_000);
        assert!(seq.peak_allocated_bytes < 2_000_000_000);
    }

    #[test]
    fn flux_plan_on_a_4090() {
        let (m, s) = base(Pipeline::Flux);
        let g = oomkit_core::gpus::find("rtx-4090").unwrap();
        let f = fit(&m, &s, g);
        assert!(!f.fits && f.plan_fits);
        let ids: Vec<_> = f.plan.iter().map(|p| p.remedy).collect();
        assert_eq!(ids, ["diffusers-cpu-offload", "quantize-8bit"]);
        for id in ids {
            assert!(oomkit_core::remedies::get(id).is_some());
        }
    }

    #[test]
    fn validation() {
        let (m, mut s) = base(Pipeline::Flux);
        s.width = 1000;
        assert!(validate(&m, &s).is_err());
        s.width = 1024;
        s.attention_slicing = true;
        assert!(validate(&m, &s).is_err());
        s.attention_slicing = false;
        s.quant = Quant::Int4;
        assert!(validate(&m, &s).is_err());
        s.quant = Quant::Nf4;
        s.safety_checker = true;
        assert!(validate(&m, &s).is_err());
        let (m, mut s) = base(Pipeline::Sd15);
        s.quant = Quant::Nf4;
        assert!(validate(&m, &s).is_ok());
        assert_eq!(find("SDXL").map(|x| x.1), Some(Pipeline::Sdxl));
        assert_eq!(
            find("stable-diffusion-v1-5/stable-diffusion-v1-5").map(|x| x.0),
            Some("runwayml/stable-diffusion-v1-5")
        );
    }
}
