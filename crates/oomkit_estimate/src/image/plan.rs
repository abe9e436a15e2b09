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
    format!(
        "{}pipe = DiffusionPipeline.from_pretrained({})",
        imports(m, s),
        args.join(", ")
    )
}

/// The imports a load line needs beyond what every diffusers script has
/// (`torch`, `DiffusionPipeline`, `PipelineQuantizationConfig`), on the same
/// line so the snippet runs as pasted: torchao's float8 config, and the
/// `diffusers`/`transformers` modules whose two `TorchAoConfig`s it names.
fn imports(m: &Model, s: &ImageSetup) -> String {
    if s.quant != Quant::Fp8 {
        return String::new();
    }
    let den = m.denoiser_name();
    let targets = m.quant_targets();
    let mut modules = vec!["diffusers"];
    if targets.iter().any(|t| *t != den) {
        modules.push("transformers");
    }
    format!(
        "import {}; from torchao.quantization import Float8WeightOnlyConfig; ",
        modules.join(", ")
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
        paste: crate::fit::paste(&plan),
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
            "images = pipe(prompt, num_images_per_prompt=1).images".into(),
        )
        .unwrap_or(false);
    }
    if !done {
        // One step to the largest size that fits, the aspect ratio kept: not a
        // ladder of ever smaller sizes.
        let k = m.size_multiple().max(1);
        let long = cur.width.max(cur.height);
        let scaled = |n: u64| {
            let side = |x: u64| {
                let v = u128::from(x) * u128::from(n) / u128::from(long.max(1));
                u64::try_from(v)
                    .unwrap_or(u64::MAX)
                    .max(1)
                    .saturating_mul(k)
            };
            ImageSetup {
                width: side(cur.width),
                height: side(cur.height),
                ..cur.clone()
            }
        };
        let n = largest_where((long / k).saturating_sub(1), |n| used(&scaled(n)) <= usable);
        if n > 0 {
            let t = scaled(n);
            let (w, h) = (t.width, t.height);
            done = push(
                &t,
                format!("{w}×{h} pixels"),
                RemedyId::ReduceInputSize,
                format!("images = pipe(prompt, width={w}, height={h}).images"),
            )
            .unwrap_or(false);
        }
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
        assert!(code.starts_with(
            "import diffusers; from torchao.quantization import Float8WeightOnlyConfig; pipe = "
        ));
        let (m, mut s) = base(Pipeline::Flux);
        s.quant = Quant::Fp8;
        let code = load_code(&m, &s);
        assert!(code.starts_with("import diffusers, transformers; from torchao"));
        assert!(code.contains("\"text_encoder_2\": transformers.TorchAoConfig("));
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

    /// Every snippet an image plan prints parses as Python and only uses
    /// what diffusers has: `DiffusionPipeline.from_pretrained`'s keywords
    /// (diffusers pipeline_utils.py: the `kwargs.pop` names, plus a
    /// component override such as `safety_checker=None`),
    /// `PipelineQuantizationConfig.__init__`'s
    /// (diffusers quantizers/pipe_quant_config.py), the pipeline's offload and
    /// slicing methods (pipeline_utils.py, pipeline_stable_diffusion.py) and
    /// `AutoencoderKL`'s (autoencoder_kl.py), and names a diffusers script has
    /// or the snippet imports itself. `bench/estimate/check_snippets.sh` runs
    /// them against diffusers itself.
    mod snippets {
        use ruff_python_ast::visitor::{self, Visitor};
        use ruff_python_ast::{self as ast, Expr, Stmt};

        use super::*;
        use crate::image::CpuOffload;

        const FROM_PRETRAINED: &[&str] = &["torch_dtype", "safety_checker", "quantization_config"];
        const PIPELINE_QUANT: &[&str] = &[
            "quant_backend",
            "quant_kwargs",
            "components_to_quantize",
            "quant_mapping",
        ];
        const PIPE_METHODS: &[&str] = &[
            "enable_model_cpu_offload",
            "enable_sequential_cpu_offload",
            "enable_attention_slicing",
        ];
        const VAE_METHODS: &[&str] = &["enable_slicing", "enable_tiling"];
        /// `__call__` arguments a reduce-input step may set.
        const CALL_ARGS: &[&str] = &["num_images_per_prompt", "width", "height"];
        /// Names every diffusers script has imported.
        const SCRIPT: &[&str] = &[
            "torch",
            "DiffusionPipeline",
            "PipelineQuantizationConfig",
            "pipe",
            "prompt",
        ];

        #[derive(Default)]
        struct Check {
            names: Vec<String>,
            errors: Vec<String>,
        }

        fn attr_chain(e: &Expr) -> Vec<&str> {
            match e {
                Expr::Name(n) => vec![n.id.as_str()],
                Expr::Attribute(a) => {
                    let mut v = attr_chain(&a.value);
                    v.push(a.attr.as_str());
                    v
                }
                _ => vec![],
            }
        }

        impl<'a> Visitor<'a> for Check {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                match stmt {
                    Stmt::Import(i) => {
                        for a in &i.names {
                            self.names.push(a.name.to_string());
                        }
                    }
                    Stmt::ImportFrom(i) => {
                        for a in &i.names {
                            self.names.push(a.name.to_string());
                        }
                    }
                    Stmt::Assign(a) => {
                        for t in &a.targets {
                            let chain = attr_chain(t);
                            let ok = chain == ["pipe"] || chain == ["images"];
                            if !ok {
                                self.errors.push(format!("assigns {chain:?}"));
                            }
                        }
                    }
                    _ => {}
                }
                visitor::walk_stmt(self, stmt);
            }

            fn visit_expr(&mut self, expr: &'a Expr) {
                match expr {
                    Expr::Name(n) if n.ctx == ast::ExprContext::Load => {
                        let id = n.id.as_str();
                        if !SCRIPT.contains(&id) && !self.names.iter().any(|k| k == id) {
                            self.errors.push(format!("undefined name {id}"));
                        }
                    }
                    Expr::Call(call) => {
                        let chain = attr_chain(&call.func);
                        let kw: Vec<&str> = call
                            .arguments
                            .keywords
                            .iter()
                            .filter_map(|k| k.arg.as_ref().map(ast::Identifier::as_str))
                            .collect();
                        let allowed: Option<&[&str]> = match chain.as_slice() {
                            ["DiffusionPipeline", "from_pretrained"] => Some(FROM_PRETRAINED),
                            ["PipelineQuantizationConfig"] => Some(PIPELINE_QUANT),
                            [_, "TorchAoConfig"] | ["Float8WeightOnlyConfig"] => Some(&[]),
                            ["pipe"] => Some(CALL_ARGS),
                            ["pipe", m] if PIPE_METHODS.contains(m) => Some(&[]),
                            ["pipe", "vae", m] if VAE_METHODS.contains(m) => Some(&[]),
                            _ => None,
                        };
                        match allowed {
                            None => self.errors.push(format!("unknown call {chain:?}")),
                            Some(a) => {
                                for k in kw.iter().filter(|k| !a.contains(k)) {
                                    self.errors.push(format!("{chain:?}({k}=…)"));
                                }
                            }
                        }
                    }
                    _ => {}
                }
                visitor::walk_expr(self, expr);
            }
        }

        fn check(code: &str) -> Result<(), String> {
            let parsed = ruff_python_parser::parse_module(code).map_err(|e| e.to_string())?;
            let mut c = Check::default();
            c.visit_body(&parsed.syntax().body);
            if c.errors.is_empty() {
                Ok(())
            } else {
                Err(c.errors.join("; "))
            }
        }

        #[test]
        fn every_image_plan_snippet_parses_and_names_only_diffusers_api() {
            let mut seen = std::collections::BTreeSet::new();
            for p in [Pipeline::Sd15, Pipeline::Sdxl, Pipeline::Flux] {
                for quant in [
                    Quant::None,
                    Quant::Int8,
                    Quant::Nf4,
                    Quant::Nf4Dq,
                    Quant::Fp8,
                ] {
                    for precision in [Precision::Fp32, Precision::Fp16, Precision::Bf16] {
                        for (images, side) in [(1, 0), (8, 0), (4, 2048)] {
                            for (gpu, attention) in [
                                ("rtx-2060", Attention::Eager),
                                ("rtx-2060", Attention::Sdpa),
                                ("rtx-3060", Attention::Sdpa),
                                ("rtx-4090", Attention::Sdpa),
                            ] {
                                let (m, mut s) = base(p);
                                s.attention = attention;
                                s.quant = quant;
                                s.precision = precision;
                                s.images = images;
                                if side > 0 {
                                    s.width = side;
                                    s.height = side;
                                }
                                s.cpu_offload = CpuOffload::None;
                                let Ok(g) = oomkit_core::gpus::find(gpu) else {
                                    panic!("{gpu}");
                                };
                                for step in fit(&m, &s, g).plan {
                                    seen.insert(step.config);
                                }
                            }
                        }
                    }
                }
            }
            // Every rung is reached, so every kind of snippet is checked.
            for want in [
                "enable_model_cpu_offload",
                "enable_sequential_cpu_offload",
                "enable_attention_slicing",
                "enable_slicing",
                "enable_tiling",
                "bitsandbytes_4bit",
                "bitsandbytes_8bit",
                "Float8WeightOnlyConfig",
                "num_images_per_prompt",
                "pipe(prompt, width=",
                "safety_checker=None",
            ] {
                assert!(
                    seen.iter().any(|c| c.contains(want)),
                    "no snippet has {want}"
                );
            }
            for code in &seen {
                assert_eq!(check(code), Ok(()), "{code}");
            }
            // The check rejects what the old fp8 line printed (the import in a
            // comment) and a misspelt keyword.
            assert!(check("pipe = DiffusionPipeline.from_pretrained(\"m\", quantization_config=PipelineQuantizationConfig(quant_mapping={\"unet\": diffusers.TorchAoConfig(Float8WeightOnlyConfig())}))  # from torchao.quantization import Float8WeightOnlyConfig").is_err());
            assert!(
                check("pipe = DiffusionPipeline.from_pretrained(\"m\", dtype_torch=torch.float16)")
                    .is_err()
            );
            assert!(check("pipe.vae.enable_tilling()").is_err());
        }
    }
}
