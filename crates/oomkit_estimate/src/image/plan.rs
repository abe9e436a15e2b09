//! Fit on a GPU and the plan: the ladder of diffusers switches with
//! paste-ready code, `max_batch` (images) and `max_seq` (square side).

use oomkit_core::Bytes;
use oomkit_core::gpus::Gpu;
use oomkit_core::remedies::RemedyId;

use super::{CpuOffload, ImageSetup, Model, Pipeline, estimate};
use crate::components;
use crate::fit::{Fit, Step, largest_where};
use crate::setup::{Attention, Precision, Quant};

use super::{MAX_IMAGES, MAX_SIDE};

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
    remedy: RemedyId,
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
        remedy: RemedyId::DiffusersSlicing,
        config: |_, _| "pipe.enable_attention_slicing()".into(),
    },
    Rung {
        apply: |_, t| {
            let ok = t.images > 1 && !t.vae_slicing;
            t.vae_slicing |= ok;
            ok
        },
        change: |_, _| "VAE slicing (decode one image at a time)".into(),
        remedy: RemedyId::DiffusersSlicing,
        config: |_, _| "pipe.vae.enable_slicing()".into(),
    },
    Rung {
        apply: |m, t| {
            let ok = (t.width > m.vae_tile || t.height > m.vae_tile) && !t.vae_tiling;
            t.vae_tiling |= ok;
            ok
        },
        change: |_, _| "VAE tiling".into(),
        remedy: RemedyId::DiffusersSlicing,
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
        remedy: RemedyId::HalfPrecisionWeights,
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
        remedy: RemedyId::UnloadModels,
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
        remedy: RemedyId::DiffusersCpuOffload,
        config: |_, _| "pipe.enable_model_cpu_offload()".into(),
    },
    Rung {
        apply: |_, t| quantize(t, Quant::Int8),
        change: |m, _| format!("8-bit {} (bitsandbytes)", m.quant_targets().join(" and ")),
        remedy: RemedyId::Quantize8bit,
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
        remedy: RemedyId::Quantize4bit,
        config: load_code,
    },
    Rung {
        apply: |_, t| {
            let ok = t.cpu_offload != CpuOffload::Sequential;
            t.cpu_offload = CpuOffload::Sequential;
            ok
        },
        change: |_, _| "sequential CPU offload (one module at a time; slow)".into(),
        remedy: RemedyId::DiffusersCpuOffload,
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
    let usable = gpu.usable();
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
        headroom_bytes: usable.signed_sub(now),
        max_batch: max_images,
        max_seq: max_side,
        plan,
        plan_fits,
        device_map: None,
    }
}

/// The plan for a setup that does not fit `usable` bytes, and whether it
/// reaches a fit.
fn plan(m: &Model, s: &ImageSetup, usable: Bytes) -> (Vec<Step>, bool) {
    let used = |t: &ImageSetup| estimate(m, t).estimate.device_used_bytes;
    let mut steps = Vec::new();
    let mut cur = s.clone();
    let mut last = used(s);
    let mut push = |cur: &ImageSetup, change: String, remedy: RemedyId, config: String| {
        let after = used(cur);
        if after >= last {
            return None;
        }
        steps.push(Step {
            change,
            remedy,
            saves_bytes: last.saturating_sub(after),
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
            if taken.get(i).copied().unwrap_or(true) || !(r.apply)(m, &mut t) {
                continue;
            }
            if let Some(d) = push(&t, (r.change)(m, &t), r.remedy, (r.config)(m, &t)) {
                if let Some(done) = taken.get_mut(i) {
                    *done = true;
                }
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
            RemedyId::ReduceInputSize,
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
            RemedyId::ReduceInputSize,
            format!("width={w}, height={h}"),
        )
        .unwrap_or(false);
    }
    (steps, done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{Pipeline, base};

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
    fn flux_plan_on_a_4090() {
        let (m, s) = base(Pipeline::Flux);
        let g = oomkit_core::gpus::find("rtx-4090").unwrap();
        let f = fit(&m, &s, g);
        assert!(!f.fits && f.plan_fits);
        let ids: Vec<_> = f.plan.iter().map(|p| p.remedy).collect();
        // Model offload alone: the 22.2 GiB transformer, 0.67 GiB of CUDA
        // context (measured on an H200 with CUDA 13) and the activations
        // fit the 4090, as diffusers' Flux docs run it.
        assert_eq!(ids, [RemedyId::DiffusersCpuOffload]);
        for id in ids {
            assert!(oomkit_core::remedies::get(id).is_some());
        }
    }
}
