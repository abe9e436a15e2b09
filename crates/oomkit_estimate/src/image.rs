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
//!
//! **Peak** = weights resident in the phase (per offload mode) + the largest
//! transient of the phase, over three phases: prompt encoding, denoising
//! (one UNet/transformer forward; classifier-free guidance doubles the batch
//! for SD/SDXL, FLUX.1-dev is guidance-distilled), VAE decode.
//!
//! **Approximate** (no measured diffusion rows exist in
//! `memory-estimation.md`, so nothing here is checked against a measurement):
//! the working-set multipliers (17 hidden-size units in a UNet transformer
//! block, 16 in a FLUX block, 3 feature maps in a VAE decoder resnet), the
//! sequential-offload residency (the largest single module), the int8/nf4
//! weight sizes (bitsandbytes linears only, constants ~0.5 bit/weight for
//! nf4), and the 10 % allocator slack of [`components::reserved_bytes`].
//! Mechanisms (what is resident when, which attention kernel materialises an
//! N² matrix) follow diffusers' pipeline code.
//!
//! **Sources.** Parameter walks: diffusers `models/unets/unet_2d_condition.py`,
//! `unet_2d_blocks.py`, `resnet.py`, `attention.py`, `autoencoders/vae.py`,
//! `transformers/transformer_flux.py`; transformers `modeling_clip.py`,
//! `modeling_t5.py`. Eager attention keeps the scores and the softmax output,
//! b·a·s² each: `memory-estimation.md` §2.5 (the 5·a·s²·b attention term that
//! FlashAttention removes), §2.6 ("softmax output b·a·s²") and §2.2 (inference
//! activations b·(s·h·5·2 + s²·a·2)); SDPA/flash keep none. Slicing, tiling,
//! offload: diffusers `attention_processor.py` (`SlicedAttnProcessor`,
//! `set_attention_slice("auto")` = heads/2), `AutoencoderKL.enable_slicing` /
//! `enable_tiling` (`tile_sample_min_size` = `sample_size`),
//! `DiffusionPipeline.enable_model_cpu_offload` /
//! `enable_sequential_cpu_offload`; SDXL's fp16 VAE upcast:
//! `StableDiffusionXLPipeline.__call__` (`needs_upcasting`). CUDA context and
//! allocator slack: [`components::cuda_context_bytes`],
//! [`components::reserved_bytes`].

use std::fmt::Write;

use oomkit_core::Bytes;
use oomkit_core::gpus::Gpu;
use serde::Serialize;
use serde_json::Value;

use crate::components;
use crate::fit::Step;
use crate::model::human_count;

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
    /// Parameters in `nn.Linear` layers (what bitsandbytes quantizes).
    pub linear: u64,
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
/// LayerNorms; proj_out. A 1×1 conv proj (SD 1.5) has the same count as the
/// linear one (SDXL `use_linear_projection`).
fn transformer2d(c: &mut Count, ch: u64, n: u64, cross: u64) {
    c.norm(ch);
    c.lin(ch, ch, true);
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
    c.lin(ch, ch, true);
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
                transformer2d(&mut c, o, tl.get(i).copied().unwrap_or(1), cross);
            }
        }
        if i + 1 < levels {
            c.conv(o, o, 3);
        }
    }
    let last = boc.last().copied().unwrap_or(0);
    resnet(&mut c, last, last, temb);
    transformer2d(&mut c, last, tl.last().copied().unwrap_or(1), cross);
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
                transformer2d(&mut c, o, rev_tl.get(i).copied().unwrap_or(1), cross);
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
    /// Text encoders: (name, parameters, tokens, hidden, FF size).
    pub text_encoders: Vec<(&'static str, Count, u64, u64, u64)>,
    vae_channels: Vec<u64>,
    vae_tile: u64,
    vae_scale: u64,
    /// Default width and height (the denoiser's sample size × VAE scale).
    pub default_size: u64,
}

impl Model {
    /// Builds the model from the embedded configs.
    pub fn load(p: Pipeline) -> Model {
        let (id, den, vae, te1, te2) = match p {
            Pipeline::Sd15 => (
                MODELS[0].0,
                include_str!("../models/image/runwayml__stable-diffusion-v1-5__unet.json"),
                include_str!("../models/image/runwayml__stable-diffusion-v1-5__vae.json"),
                include_str!("../models/image/runwayml__stable-diffusion-v1-5__text_encoder.json"),
                None,
            ),
            Pipeline::Sdxl => (
                MODELS[1].0,
                include_str!(
                    "../models/image/stabilityai__stable-diffusion-xl-base-1.0__unet.json"
                ),
                include_str!("../models/image/stabilityai__stable-diffusion-xl-base-1.0__vae.json"),
                include_str!(
                    "../models/image/stabilityai__stable-diffusion-xl-base-1.0__text_encoder.json"
                ),
                Some(include_str!(
                    "../models/image/stabilityai__stable-diffusion-xl-base-1.0__text_encoder_2.json"
                )),
            ),
            Pipeline::Flux => (
                MODELS[2].0,
                include_str!("../models/image/black-forest-labs__FLUX.1-dev__transformer.json"),
                include_str!("../models/image/black-forest-labs__FLUX.1-dev__vae.json"),
                include_str!("../models/image/black-forest-labs__FLUX.1-dev__text_encoder.json"),
                Some(include_str!(
                    "../models/image/black-forest-labs__FLUX.1-dev__text_encoder_2.json"
                )),
            ),
        };
        let (den, vae) = (cfg(den), cfg(vae));
        let vae_channels = list(&vae, "block_out_channels");
        let vae_scale = 1u64 << vae_channels.len().saturating_sub(1);
        let mut text_encoders = Vec::new();
        for (name, t) in [("text_encoder", Some(te1)), ("text_encoder_2", te2)] {
            let Some(t) = t else { continue };
            let t = cfg(t);
            if u(&t, "d_model") > 0 {
                // FluxPipeline pads T5 prompts to max_sequence_length = 512.
                let n = t5_encoder_params(&t);
                text_encoders.push((name, n, 512, u(&t, "d_model"), u(&t, "d_ff")));
            } else {
                let n = clip_text_params(&t);
                let tokens = u(&t, "max_position_embeddings");
                let (h, f) = (u(&t, "hidden_size"), u(&t, "intermediate_size"));
                text_encoders.push((name, n, tokens, h, f));
            }
        }
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
            let boc = list(&den, "block_out_channels");
            let n = boc.len();
            // diffusers: `num_attention_heads = num_attention_heads or
            // attention_head_dim` (a naming mistake kept for compatibility), so
            // SD 1.5's `attention_head_dim: 8` means 8 heads.
            let heads = match den.get("num_attention_heads") {
                Some(Value::Null) | None => per_level(&den, "attention_head_dim", n, 8),
                _ => per_level(&den, "num_attention_heads", n, 8),
            };
            let down = strs(&den, "down_block_types");
            let levels = boc
                .iter()
                .enumerate()
                .map(|(i, &ch)| {
                    let attn = down.get(i).is_some_and(|t| t.starts_with("CrossAttn"));
                    (ch, heads.get(i).copied().unwrap_or(8), attn)
                })
                .collect();
            let d = Denoiser::Unet {
                levels,
                layers_per_block: u(&den, "layers_per_block"),
            };
            (d, unet_params(&den), u(&den, "sample_size") * vae_scale)
        };
        Model {
            id,
            pipeline: p,
            denoiser,
            denoiser_params,
            vae_params: vae_params(&vae),
            text_encoders,
            vae_tile: u(&vae, "sample_size"),
            vae_channels,
            vae_scale,
            default_size,
        }
    }

    /// All parameters of the pipeline.
    pub fn params(&self) -> u64 {
        self.denoiser_params.total
            + self.vae_params.total
            + self.text_encoders.iter().map(|t| t.1.total).sum::<u64>()
    }

    /// Width and height must be multiples of this (VAE scale; ×2 for FLUX's
    /// 2×2 latent packing).
    pub fn size_multiple(&self) -> u64 {
        match self.denoiser {
            Denoiser::Flux { patch, .. } => self.vae_scale * patch,
            Denoiser::Unet { .. } => self.vae_scale,
        }
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

/// Weight format of the denoiser and the T5 encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageQuant {
    /// Unquantized.
    None,
    /// bitsandbytes LLM.int8 linears.
    Int8,
    /// bitsandbytes NF4 linears.
    Nf4,
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
    /// Weights in fp32 (else fp16/bf16).
    pub fp32: bool,
    /// fp16 (not bf16): SDXL upcasts its VAE to fp32 for the decode.
    pub fp16: bool,
    /// Quantization of the FLUX transformer and T5 encoder.
    pub quant: ImageQuant,
    /// Eager attention (`AttnProcessor`) instead of SDPA (`AttnProcessor2_0`).
    pub eager: bool,
    /// `pipe.enable_attention_slicing()`.
    pub attention_slicing: bool,
    /// `pipe.vae.enable_slicing()`.
    pub vae_slicing: bool,
    /// `pipe.vae.enable_tiling()`.
    pub vae_tiling: bool,
    /// CPU offload mode.
    pub cpu_offload: CpuOffload,
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
    if m.pipeline != Pipeline::Flux && s.quant != ImageQuant::None {
        return Err(format!(
            "quantization is modelled for FLUX.1-dev (transformer and T5 linears) only, not {}",
            m.id
        ));
    }
    if m.pipeline == Pipeline::Flux && s.attention_slicing {
        return Err("FluxPipeline has no attention slicing; use SDPA (the default)".into());
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

/// The result.
#[derive(Clone, Debug, Serialize)]
pub struct ImageEstimate {
    /// Parameters per component.
    pub params: Vec<ParamRow>,
    /// Rows at the peak phase (weights resident, transient, context).
    pub components: Vec<Part>,
    /// `encode-prompt`, `denoise` or `vae-decode`.
    pub peak_phase: &'static str,
    /// `torch.cuda.max_memory_allocated()`.
    pub peak_allocated_bytes: u64,
    /// `torch.cuda.max_memory_reserved()`.
    pub peak_reserved_bytes: u64,
    /// nvidia-smi used.
    pub device_used_bytes: u64,
}

/// Bytes of `c` in the given format: int8 8 bits, nf4 4.5 bits (4-bit codes +
/// one fp32 absmax per 64) on linears; everything else 2 or 4 bytes.
fn weight_bytes(c: &Count, bytes: u64, q: ImageQuant) -> u64 {
    let (lin, rest) = (c.linear, c.total - c.linear);
    match q {
        ImageQuant::None => c.total * bytes,
        ImageQuant::Int8 => lin + rest * bytes,
        ImageQuant::Nf4 => (lin * 9).div_ceil(16) + rest * bytes,
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

struct Phase {
    name: &'static str,
    resident: Vec<(String, u64)>,
    transient: (String, u64),
}

/// The estimate: each phase's resident weights and transient; the peak phase.
pub fn estimate(m: &Model, s: &ImageSetup) -> ImageEstimate {
    let wb = if s.fp32 { 4 } else { 2 };
    let cfg_b = if m.pipeline == Pipeline::Flux {
        s.images
    } else {
        2 * s.images
    };
    let mut weights: Vec<(String, u64, u64)> = Vec::new();
    for (name, c, ..) in &m.text_encoders {
        let q = if c.total > 1_000_000_000 {
            s.quant
        } else {
            ImageQuant::None
        };
        weights.push((
            name.to_string(),
            weight_bytes(c, wb, q),
            weight_bytes(&single(c.largest), wb, q),
        ));
    }
    let den = if m.pipeline == Pipeline::Flux {
        "transformer"
    } else {
        "unet"
    };
    let dc = m.denoiser_params;
    weights.push((
        den.into(),
        weight_bytes(&dc, wb, s.quant),
        weight_bytes(&single(dc.largest), wb, s.quant),
    ));
    let vae_up = m.pipeline == Pipeline::Sdxl && s.fp16;
    let vb = if vae_up { 4 } else { wb };
    weights.push((
        "vae".into(),
        m.vae_params.total * vb,
        m.vae_params.largest * vb,
    ));
    let resident = |names: &[&str]| -> Vec<(String, u64)> {
        weights
            .iter()
            .filter_map(|(n, full, leaf)| match s.cpu_offload {
                CpuOffload::None => Some((n.clone(), *full)),
                CpuOffload::Model => names.contains(&n.as_str()).then(|| (n.clone(), *full)),
                CpuOffload::Sequential => names.contains(&n.as_str()).then(|| (n.clone(), *leaf)),
            })
            .collect()
    };
    let mut phases = Vec::new();
    for (name, _, tokens, h, f) in &m.text_encoders {
        let t = cfg_b * tokens * (2 * f + 4 * h) * wb;
        phases.push(Phase {
            name: "encode-prompt",
            resident: resident(&[name]),
            transient: (format!("{name} activations"), t),
        });
    }
    let latent_tokens = (s.width / m.vae_scale) * (s.height / m.vae_scale);
    let den_t = match &m.denoiser {
        Denoiser::Unet {
            levels,
            layers_per_block,
        } => unet_transient(
            levels,
            *layers_per_block,
            cfg_b,
            latent_tokens,
            wb,
            s.eager,
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
            cfg_b,
            latent_tokens / (patch * patch) + txt,
            wb,
            s.eager,
        ),
    };
    phases.push(Phase {
        name: "denoise",
        resident: resident(&[den]),
        transient: (format!("{den} activations"), den_t),
    });
    let tile = m.vae_tile;
    let tiled = s.vae_tiling && (s.width > tile || s.height > tile);
    let (h, w) = if tiled {
        (s.height.min(tile), s.width.min(tile))
    } else {
        (s.height, s.width)
    };
    let b = if s.vae_slicing { 1 } else { s.images };
    let dec = vae_transient(&m.vae_channels, b, h, w, vb, s.eager)
        + s.images * 3 * s.width * s.height * vb;
    phases.push(Phase {
        name: "vae-decode",
        resident: resident(&["vae"]),
        transient: ("vae decode activations".into(), dec),
    });
    let ctx = components::cuda_context_bytes();
    let mut best: Option<(u64, u64, u64, &Phase)> = None;
    for p in &phases {
        let w: u64 = p.resident.iter().map(|r| r.1).sum();
        let alloc = w + p.transient.1;
        let reserved = components::reserved_bytes(alloc, p.transient.1);
        if best.is_none_or(|b| reserved > b.1) {
            best = Some((alloc, reserved, p.transient.1, p));
        }
    }
    let row = |name: &str, params: u64| ParamRow {
        name: name.into(),
        params,
    };
    let mut params: Vec<ParamRow> = m
        .text_encoders
        .iter()
        .map(|t| row(t.0, t.1.total))
        .collect();
    params.push(row(den, dc.total));
    params.push(row("vae", m.vae_params.total));
    let Some((alloc, reserved, _, p)) = best else {
        return ImageEstimate {
            params,
            components: Vec::new(),
            peak_phase: "denoise",
            peak_allocated_bytes: 0,
            peak_reserved_bytes: 0,
            device_used_bytes: ctx,
        };
    };
    let mut parts: Vec<Part> = p
        .resident
        .iter()
        .map(|(n, b)| Part {
            name: format!("{n} weights"),
            bytes: *b,
        })
        .collect();
    parts.push(Part {
        name: p.transient.0.clone(),
        bytes: p.transient.1,
    });
    parts.push(Part {
        name: "cuda context".into(),
        bytes: ctx,
    });
    ImageEstimate {
        params,
        components: parts,
        peak_phase: p.name,
        peak_allocated_bytes: alloc,
        peak_reserved_bytes: reserved,
        device_used_bytes: reserved + ctx,
    }
}

fn single(n: u64) -> Count {
    Count {
        total: n,
        largest: n,
        linear: n,
    }
}

/// The `fit` object for image pipelines.
#[derive(Clone, Debug, Serialize)]
pub struct ImageFit {
    /// GPU catalogue id.
    pub gpu: &'static str,
    /// Memory a process can use.
    pub usable_bytes: u64,
    /// `device_used_bytes <= usable_bytes`.
    pub fits: bool,
    /// `usable − device_used`.
    pub headroom_bytes: i64,
    /// Largest `--images` that fits, other settings unchanged (0: none).
    pub max_images: u64,
    /// Cheapest changes that make it fit (empty when it fits).
    pub plan: Vec<Step>,
    /// Whether the plan reaches a fit.
    pub plan_fits: bool,
}

/// Fit on `gpu` and the plan: attention slicing (eager UNet attention only),
/// VAE slicing (several images) and tiling (larger than a tile) — remedy
/// `diffusers-slicing`; half-precision weights; model CPU offload; 8-bit then
/// 4-bit (FLUX); sequential CPU offload; then fewer images and smaller sizes
/// (`reduce-input-size`), applied cumulatively until it fits.
pub fn fit(m: &Model, s: &ImageSetup, gpu: &'static Gpu) -> ImageFit {
    let usable = gpu.usable().get();
    let used = |t: &ImageSetup| estimate(m, t).device_used_bytes;
    let now = used(s);
    let fits = now <= usable;
    let mut lo = 0u64;
    let mut hi = 1u64;
    while hi <= 4096
        && used(&ImageSetup {
            images: hi,
            ..s.clone()
        }) <= usable
    {
        lo = hi;
        hi *= 2;
    }
    while hi - lo > 1 && hi <= 4096 {
        let mid = (lo + hi) / 2;
        if used(&ImageSetup {
            images: mid,
            ..s.clone()
        }) <= usable
        {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut plan = Vec::new();
    let mut cur = s.clone();
    let mut last = now;
    let mut push = |cur: &ImageSetup, change: String, remedy: &'static str, config: String| {
        let after = used(cur);
        if after >= last {
            return None;
        }
        plan.push(Step {
            change,
            remedy,
            saves_bytes: last - after,
            peak_after_bytes: after,
            config,
        });
        last = after;
        Some(after <= usable)
    };
    let mut done = fits;
    type Try = (
        fn(&Model, &mut ImageSetup) -> bool,
        &'static str,
        &'static str,
        &'static str,
    );
    let ladder: [Try; 8] = [
        (
            |m, t| {
                let ok = m.pipeline != Pipeline::Flux && t.eager && !t.attention_slicing;
                t.attention_slicing |= ok;
                ok
            },
            "attention slicing",
            "diffusers-slicing",
            "pipe.enable_attention_slicing()",
        ),
        (
            |_, t| {
                let ok = t.images > 1 && !t.vae_slicing;
                t.vae_slicing |= ok;
                ok
            },
            "VAE slicing (decode one image at a time)",
            "diffusers-slicing",
            "pipe.vae.enable_slicing()",
        ),
        (
            |m, t| {
                let ok = (t.width > m.vae_tile || t.height > m.vae_tile) && !t.vae_tiling;
                t.vae_tiling |= ok;
                ok
            },
            "VAE tiling",
            "diffusers-slicing",
            "pipe.vae.enable_tiling()",
        ),
        (
            |_, t| {
                let ok = t.fp32;
                t.fp32 = false;
                t.fp16 = true;
                ok
            },
            "fp16 weights",
            "half-precision-weights",
            "torch_dtype=torch.float16",
        ),
        (
            |_, t| {
                let ok = t.cpu_offload == CpuOffload::None;
                if ok {
                    t.cpu_offload = CpuOffload::Model;
                }
                ok
            },
            "model CPU offload (one component on the GPU at a time)",
            "diffusers-cpu-offload",
            "pipe.enable_model_cpu_offload()",
        ),
        (
            |m, t| {
                let ok = m.pipeline == Pipeline::Flux && t.quant == ImageQuant::None;
                if ok {
                    t.quant = ImageQuant::Int8;
                }
                ok
            },
            "8-bit transformer and T5 (bitsandbytes)",
            "quantize-8bit",
            "quantization_config=BitsAndBytesConfig(load_in_8bit=True)",
        ),
        (
            |m, t| {
                let ok = m.pipeline == Pipeline::Flux && t.quant != ImageQuant::Nf4;
                if ok {
                    t.quant = ImageQuant::Nf4;
                }
                ok
            },
            "4-bit NF4 transformer and T5 (bitsandbytes)",
            "quantize-4bit",
            "quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\")",
        ),
        (
            |_, t| {
                let ok = t.cpu_offload != CpuOffload::Sequential;
                t.cpu_offload = CpuOffload::Sequential;
                ok
            },
            "sequential CPU offload (one module at a time; slow)",
            "diffusers-cpu-offload",
            "pipe.enable_sequential_cpu_offload()",
        ),
    ];
    // The first step (cheapest) that lowers the peak now; a step that did not
    // help earlier (the peak was in another phase) is tried again later.
    let mut taken = [false; 8];
    'ladder: while !done {
        for (i, (apply, change, remedy, config)) in ladder.iter().enumerate() {
            let mut t = cur.clone();
            if taken[i] || !apply(m, &mut t) {
                continue;
            }
            if let Some(d) = push(&t, (*change).into(), remedy, (*config).into()) {
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
    ImageFit {
        gpu: gpu.id,
        usable_bytes: usable,
        fits,
        headroom_bytes: usable as i64 - now as i64,
        max_images: lo,
        plan_fits: fits || done,
        plan: if fits { Vec::new() } else { plan },
    }
}

/// Human output.
pub fn human(m: &Model, s: &ImageSetup, e: &ImageEstimate, f: Option<&ImageFit>) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} ({} params) · text-to-image · {} · {}×{} × {} image{}{}",
        m.id,
        human_count(m.params()),
        if s.fp32 {
            "fp32"
        } else if s.fp16 {
            "fp16"
        } else {
            "bf16"
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
    let total = e.device_used_bytes.max(1);
    for p in &e.components {
        let n = (((p.bytes as f64 / total as f64) * BAR as f64).round() as usize).min(BAR);
        let _ = writeln!(
            o,
            "  {:<24}{:>11}  {}{}",
            p.name,
            Bytes(p.bytes).to_string(),
            "█".repeat(n),
            "·".repeat(BAR - n)
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "  peak allocated   {:>11}   (torch.cuda.max_memory_allocated, at {})",
        Bytes(e.peak_allocated_bytes).to_string(),
        e.peak_phase
    );
    let _ = writeln!(
        o,
        "  peak reserved    {:>11}   (torch.cuda.max_memory_reserved)",
        Bytes(e.peak_reserved_bytes).to_string()
    );
    let _ = writeln!(
        o,
        "  device used      {:>11}   (nvidia-smi)",
        Bytes(e.device_used_bytes).to_string()
    );
    if let Some(f) = f {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{} {}: {} of {} usable ({} {}); max images {}",
            if f.fits { "fits on" } else { "does not fit on" },
            f.gpu,
            Bytes(e.device_used_bytes),
            Bytes(f.usable_bytes),
            Bytes(f.headroom_bytes.unsigned_abs()),
            if f.fits { "headroom" } else { "short" },
            f.max_images
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
        let s = ImageSetup {
            width: m.default_size,
            height: m.default_size,
            images: 1,
            fp32: false,
            fp16: true,
            quant: ImageQuant::None,
            eager: false,
            attention_slicing: false,
            vae_slicing: false,
            vae_tiling: false,
            cpu_offload: CpuOffload::None,
        };
        (m, s)
    }

    #[test]
    fn configs_parse() {
        for (_, _, p) in MODELS {
            let m = Model::load(p);
            assert!(m.denoiser_params.total > 0 && m.vae_params.total > 0);
            assert!(!m.text_encoders.is_empty() && m.vae_channels.len() == 4);
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
        assert_eq!(m.text_encoders[0].1.total, 123_060_480);
        assert_eq!(m.default_size, 512);
    }

    #[test]
    fn sdxl_counts() {
        let m = Model::load(Pipeline::Sdxl);
        assert_eq!(m.denoiser_params.total, 2_567_463_684);
        assert_eq!(m.vae_params.total, 83_653_863);
        assert_eq!(m.text_encoders[1].1.total, 694_659_840);
        assert_eq!(m.default_size, 1024);
    }

    #[test]
    fn flux_counts() {
        let m = Model::load(Pipeline::Flux);
        assert_eq!(m.denoiser_params.total, 11_901_408_320);
        // 23.8 GB bf16 transformer safetensors (reference sheet).
        let gb = m.denoiser_params.total * 2 / 100_000_000;
        assert_eq!(gb, 238);
        assert_eq!(m.text_encoders[1].1.total, 4_762_310_656);
        assert_eq!(m.vae_params.total, 83_819_683);
        assert_eq!(m.size_multiple(), 16);
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
        s.eager = true;
        assert_eq!(estimate(&m, &s).peak_phase, "denoise");
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
        assert_eq!(full.peak_phase, "vae-decode");
        s.vae_slicing = true;
        s.vae_tiling = true;
        let small = estimate(&m, &s);
        assert!(small.device_used_bytes < full.device_used_bytes / 4);
    }

    #[test]
    fn offload_keeps_one_component() {
        let (m, mut s) = base(Pipeline::Flux);
        s.fp16 = false;
        let all = estimate(&m, &s);
        s.cpu_offload = CpuOffload::Model;
        let model = estimate(&m, &s);
        s.cpu_offload = CpuOffload::Sequential;
        let seq = estimate(&m, &s);
        assert!(all.peak_allocated_bytes > 33_000_000_000);
        assert_eq!(model.peak_phase, "denoise");
        assert!(model.peak_allocated_bytes > 23_800_000_000);
        assert!(seq.peak_allocated_bytes < 2_000_000_000);
    }

    #[test]
    fn flux_plan_on_a_4090() {
        let (m, mut s) = base(Pipeline::Flux);
        s.fp16 = false;
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
        let (m, mut s) = base(Pipeline::Sd15);
        s.quant = ImageQuant::Nf4;
        assert!(validate(&m, &s).is_err());
        assert_eq!(find("SDXL").map(|x| x.1), Some(Pipeline::Sdxl));
        assert_eq!(
            find("stable-diffusion-v1-5/stable-diffusion-v1-5").map(|x| x.0),
            Some("runwayml/stable-diffusion-v1-5")
        );
    }
}
