//! Text-to-image (diffusers) pipelines: Stable Diffusion 1.5, SDXL base 1.0
//! and FLUX.1-dev, `--task infer` only.
//!
//! **Parameters** are counted from the component configs embedded from
//! `docs/reference/model-configs.md` (`models/image/*.json`, listed with the
//! text models in [`crate::catalogue::IMAGE_MODELS`]): the UNet
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
//! optimizer, logits or KV cache) and [`Fit`](crate::fit::Fit) (`max_batch` = most images,
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
//! weight of [`crate::components::quant_bits_x1000`] (`memory-estimation.md` §3.1).
//!
//! **Approximate** (no measured diffusion rows exist in
//! `memory-estimation.md`, so nothing here is checked against a measurement):
//! the working-set multipliers (17 hidden-size units in a UNet transformer
//! block, 16 in a FLUX block, 3 feature maps in a VAE decoder resnet), the
//! encoder activations, the sequential-offload residency (the largest single
//! module), fp8 scales (one fp32 per output row, like LLM.int8), and the
//! 10 % allocator slack of [`crate::components::reserved_bytes`]. Mechanisms (what
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
//! context and allocator slack: [`crate::components::cuda_context_bytes`],
//! [`crate::components::reserved_bytes`].
//!
//! **Layout.** This file: the parsed [`Model`] (from a catalogue entry), the
//! [`ImageSetup`] and its validation; `params.rs` the parameter walks;
//! `memory.rs` the bytes per phase and [`estimate`]; `plan.rs` [`fit`], the
//! ladder and the diffusers code; `render.rs` [`human`].

mod memory;
mod params;
mod plan;
mod render;

use serde::Serialize;
use serde_json::Value;

use crate::Estimate;
use crate::catalogue::ImageEntry;
use crate::knob::Knob;
use crate::setup::{Attention, Precision, Quant, SetupError};

pub use memory::{estimate, flux_transient, unet_transient, vae_transient};
pub use params::{
    Count, clip_text_params, flux_params, safety_checker_params, t5_encoder_params, unet_params,
    vae_params,
};
pub use plan::{fit, load_code, quant_config};
pub use render::human;

use params::vision_tokens;

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
/// `null` when a repo ships without it) and its config is embedded.
fn safety_checker(model_index: Option<&str>, config: Option<&str>) -> Option<Encoder> {
    let named = model_index
        .map(cfg)
        .and_then(|mi| mi.get("safety_checker").cloned())
        .is_some_and(|v| v.as_array().is_some_and(|a| a.iter().all(Value::is_string)));
    let v = cfg(config.filter(|_| named)?);
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
    /// Builds the model from a catalogue entry's embedded configs.
    pub fn load(t: &'static ImageEntry) -> Model {
        let p = t.pipeline;
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
            safety_checker: safety_checker(t.model_index, t.safety_checker),
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
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CpuOffload {
    /// Everything on the GPU (no flag: the default).
    #[cfg_attr(feature = "clap", value(skip))]
    None,
    /// One whole component on the GPU at a time.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Model,
    /// One leaf module on the GPU at a time.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
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

/// Checks the flags given for a text-to-image pipeline: only inference
/// with diffusers is modelled, one call of `--images` images on one GPU, so
/// training, serving, text-model sizes and parallel degrees mean nothing.
pub fn check_given(m: &Model, g: &crate::setup::Given) -> Result<(), SetupError> {
    if let Some(knob) = g.training_knob() {
        return Err(SetupError::NotApplicable {
            knob,
            applies_to: "⟨task⟩ train on text models",
            instead: "image models are estimated for inference only: drop it",
        });
    }
    let id = m.id;
    let conflict = |what: &str| {
        Err(SetupError::Conflict(format!(
            "{id} is an image model: {what}"
        )))
    };
    if g.train() || g.serve() || g.vllm() || g.has(Knob::Method) || g.vllm_knob().is_some() {
        return conflict("only ⟨task⟩ infer (text-to-image with diffusers) is modelled");
    }
    if g.batch() || g.has(Knob::NewTokens) || g.has(Knob::KvDtype) {
        return conflict("use ⟨images⟩ N instead of ⟨batch⟩/⟨new-tokens⟩/⟨kv-dtype⟩");
    }
    if g.parallel() {
        return conflict("⟨tp⟩/⟨pp⟩ are modelled for text models only");
    }
    if g.has(Knob::NoSafetyChecker) && m.safety_checker.is_none() {
        return Err(SetupError::Conflict(format!(
            "{id} loads no safety checker: drop ⟨no-safety-checker⟩"
        )));
    }
    Ok(())
}

/// Most images per call (`--images`), and the most `max_batch` searches.
pub const MAX_IMAGES: u64 = 4096;
/// Largest `--width`/`--height` in pixels (16 × SDXL's native side), and
/// the largest square side `max_seq` searches.
pub const MAX_SIDE: u64 = 16_384;

/// Invalid combinations, and sizes above [`MAX_IMAGES`] / [`MAX_SIDE`].
pub fn validate(m: &Model, s: &ImageSetup) -> Result<(), SetupError> {
    let invalid = |msg: String| Err(SetupError::Invalid(msg));
    let k = m.size_multiple();
    if s.width > MAX_SIDE || s.height > MAX_SIDE {
        return invalid(format!(
            "⟨width⟩/⟨height⟩ at most {MAX_SIDE} pixels (got {}×{})",
            s.width, s.height
        ));
    }
    if s.images > MAX_IMAGES {
        return invalid(format!(
            "⟨images⟩ {} is above the limit of {MAX_IMAGES}",
            s.images
        ));
    }
    if s.width == 0 || s.height == 0 || !s.width.is_multiple_of(k) || !s.height.is_multiple_of(k) {
        return invalid(format!(
            "⟨width⟩/⟨height⟩ must be positive multiples of {k} for {} (got {}×{})",
            m.id, s.width, s.height
        ));
    }
    if s.images == 0 {
        return invalid("⟨images⟩ must be at least 1".into());
    }
    if matches!(s.precision, Precision::MixedFp16 | Precision::MixedBf16) {
        return invalid(
            "diffusers pipelines load one dtype: use ⟨precision⟩ fp32, fp16 or bf16".into(),
        );
    }
    if s.quant == Quant::Int4 {
        return invalid("⟨quant⟩ int4 (GPTQ/AWQ) is not a diffusers from_pretrained quantization: use int8, nf4, nf4-dq or fp8".into());
    }
    if s.attention == Attention::Flash {
        return invalid("image models: ⟨attention⟩ sdpa (default) or eager".into());
    }
    if m.pipeline == Pipeline::Flux && s.attention_slicing {
        return invalid("FluxPipeline has no attention slicing; use SDPA (the default)".into());
    }
    if s.safety_checker && m.safety_checker.is_none() {
        return invalid(format!("{} has no safety checker", m.id));
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

/// The catalogue's pipeline of class `p`, for tests.
#[cfg(test)]
pub(crate) fn test_model(p: Pipeline) -> Model {
    let e = crate::catalogue::IMAGE_MODELS
        .iter()
        .find(|e| e.pipeline == p);
    Model::load(e.expect("one catalogue entry per pipeline"))
}

/// A pipeline and its default setup, for tests.
#[cfg(test)]
pub(crate) fn base(p: Pipeline) -> (Model, ImageSetup) {
    let m = test_model(p);
    let s = ImageSetup::default_for(&m);
    (m, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse() {
        for e in crate::catalogue::IMAGE_MODELS {
            let m = Model::load(e);
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
        let m = test_model(Pipeline::Sd15);
        // diffusers `unet.num_parameters()` for SD 1.5 / the SD VAE / CLIP ViT-L/14 text.
        assert_eq!(m.denoiser_params.total, 859_520_964);
        assert_eq!(m.vae_params.total, 83_653_863);
        assert_eq!(m.text_encoders[0].params.total, 123_060_480);
        assert_eq!(m.default_size, 512);
        assert_eq!(m.default_precision, Precision::Fp16);
    }

    #[test]
    fn sdxl_counts() {
        let m = test_model(Pipeline::Sdxl);
        assert_eq!(m.denoiser_params.total, 2_567_463_684);
        assert_eq!(m.vae_params.total, 83_653_863);
        assert_eq!(m.text_encoders[1].params.total, 694_659_840);
        assert_eq!(m.default_size, 1024);
    }

    #[test]
    fn flux_counts() {
        let m = test_model(Pipeline::Flux);
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
        let m = test_model(Pipeline::Sd15);
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
        assert!(test_model(Pipeline::Sdxl).safety_checker.is_none());
        assert!(test_model(Pipeline::Flux).safety_checker.is_none());
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
    }
}
