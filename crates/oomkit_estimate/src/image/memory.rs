//! Bytes per phase: weights (dtype, quantization, offload residency) and
//! the transient working sets; the peak phase becomes the crate's
//! [`Estimate`].

use super::params::Count;
use super::{CpuOffload, Denoiser, ImageEstimate, ImageSetup, Model, Part, Pipeline};
use crate::components;
use crate::setup::{Attention, Precision, Quant};
use oomkit_core::Bytes;

use crate::{Components, Estimate};

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
    let ctx = components::cuda_context_bytes(false, true);
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
        weights_bytes: Bytes(parts.iter().map(|r| r.bytes).sum()),
        activations_bytes: Bytes(p.activations.1),
        temporaries_bytes: Bytes(p.temporaries),
        cuda_context_bytes: Bytes(ctx),
        ..Components::default()
    };
    ImageEstimate {
        estimate: Estimate {
            components,
            peak_allocated_bytes: Bytes(alloc),
            peak_reserved_bytes: Bytes(reserved),
            device_used_bytes: Bytes(reserved + ctx),
            peak_phase: p.name,
            params: total,
            trainable_params: 0,
        },
        params,
        weights: parts,
        activations: p.activations.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{CpuOffload, Pipeline, base};

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
            with.estimate.components.weights_bytes.get()
                - without.estimate.components.weights_bytes.get(),
            sc * 2
        );
    }

    #[test]
    fn quantized_weights_follow_the_bits_per_weight() {
        let m = crate::image::test_model(Pipeline::Flux);
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
        let u = crate::image::test_model(Pipeline::Sd15).denoiser_params;
        assert!(u.linear * 10 < u.total * 8, "{} of {}", u.linear, u.total);
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
        assert!(small.estimate.device_used_bytes.get() < full.estimate.device_used_bytes.get() / 4);
    }

    #[test]
    fn offload_keeps_one_component() {
        let (m, mut s) = base(Pipeline::Flux);
        let all = estimate(&m, &s).estimate;
        s.cpu_offload = CpuOffload::Model;
        let model = estimate(&m, &s).estimate;
        s.cpu_offload = CpuOffload::Sequential;
        let seq = estimate(&m, &s).estimate;
        assert!(all.peak_allocated_bytes.get() > 33_000_000_000);
        assert_eq!(model.peak_phase, "denoise");
        assert!(model.peak_allocated_bytes.get() > 23_800_000_000);
        assert!(seq.peak_allocated_bytes.get() < 2_000_000_000);
    }
}
