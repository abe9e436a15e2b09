//! One estimate from [`Options`], whatever it asks for: a text model under
//! transformers, an image pipeline under diffusers, vLLM's pool or
//! llama.cpp's buffers ([`Options::estimate`]), with its verdict
//! ([`Estimated::fits`]), its text ([`Estimated::human`]) and its JSON
//! ([`Estimated::write_json`]). `oomkit estimate` prints it; a preflight
//! check in front of a launch reads the verdict.

use std::borrow::Cow;

use oomkit_core::gpus::{self, Gpu, UnknownGpu};

use crate::fit::{self, Fit};
use crate::image::{self, ImageEstimate, ImageSetup};
use crate::knob::Knob;
use crate::llamacpp::{self, LlamaError};
use crate::options::{Engine, LlamaModelError, ModelError, Options, Workload};
use crate::resolve::{Resolved, Sources};
use crate::serve::{self, Served};
use crate::{Estimate, ModelConfig, Setup, SetupError, json, render};

/// An estimate of the kind the options asked for.
#[derive(Clone, Debug)]
pub enum Estimated {
    /// A text model under transformers (inference or training).
    Text {
        /// The model.
        cfg: Box<ModelConfig>,
        /// The setup, defaults applied.
        setup: Box<Setup>,
        /// The memory.
        est: Box<Estimate>,
        /// The fit on the GPU given.
        fit: Option<Box<Fit>>,
        /// Warnings that do not stop the estimate.
        warnings: Vec<String>,
        /// What it assumed where the options said nothing.
        assumed: Vec<crate::versions::Assumption>,
    },
    /// A text-to-image pipeline under diffusers.
    Image {
        /// The pipeline.
        model: Box<image::Model>,
        /// Its setup.
        setup: Box<ImageSetup>,
        /// The memory.
        est: Box<ImageEstimate>,
        /// The fit on the GPU given.
        fit: Option<Box<Fit>>,
    },
    /// vLLM's pool on a GPU.
    Serve {
        /// The model.
        cfg: Box<ModelConfig>,
        /// The setup.
        setup: Box<Setup>,
        /// The pool and its verdict.
        served: Box<Served>,
        /// The GPU.
        gpu: &'static Gpu,
        /// Warnings that do not stop the estimate.
        warnings: Vec<String>,
        /// What it assumed where the options said nothing.
        assumed: Vec<crate::versions::Assumption>,
    },
    /// llama.cpp's buffers.
    LlamaCpp {
        /// The model as llama.cpp loads it.
        model: Box<llamacpp::Model>,
        /// llama-server's arguments.
        args: Box<llamacpp::Args>,
        /// The GPU given.
        gpu: Option<&'static Gpu>,
    },
}

/// Why an estimate could not be made. Messages name settings by
/// [`crate::knob`] markers (see [`SetupError::message`]).
#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    /// A setting out of range or in conflict.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The model could not be resolved.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// llama.cpp could not load the model.
    #[error(transparent)]
    LlamaModel(#[from] LlamaModelError),
    /// llama-server's arguments do not fit the model.
    #[error(transparent)]
    Llama(#[from] LlamaError),
    /// The GPU named is not in the catalogue.
    #[error(transparent)]
    Gpu(#[from] UnknownGpu),
}

impl Options {
    /// Estimates what the options ask for: checks which engine's settings
    /// were given, resolves the model through `sources`, applies the
    /// defaults, estimates and fits the GPU given. Warnings name settings by
    /// `name` (a front end: its flags).
    pub fn estimate<'a>(
        &self,
        sources: Sources,
        name: &dyn Fn(Knob) -> Cow<'a, str>,
    ) -> Result<Estimated, EstimateError> {
        self.check_engine()?;
        if self.engine() == Engine::LlamaCpp {
            let model = self.llamacpp_model(sources)?;
            let args = llamacpp::Args::from_options(&self.llamacpp()?, &model)?;
            let gpu = self.find_gpu()?;
            return Ok(Estimated::LlamaCpp {
                model: Box::new(model),
                args: Box::new(args),
                gpu,
            });
        }
        let cfg = match self.resolve(sources)? {
            Resolved::Image(m) => {
                let setup = self.image_setup(&m)?;
                let est = image::estimate(&m, &setup);
                let fit = self
                    .find_gpu()?
                    .map(|g| Box::new(image::fit(&m, &setup, g)));
                return Ok(Estimated::Image {
                    model: m,
                    setup: Box::new(setup),
                    est: Box::new(est),
                    fit,
                });
            }
            Resolved::Text(cfg) => cfg,
        };
        let setup = self.setup(&cfg)?;
        let mut warnings = setup.warnings_named(&cfg, name);
        if self.task == Workload::Serve {
            let Some(gpu) = self.find_gpu()? else {
                return Err(SetupError::Conflict(
                    "⟨task⟩ serve needs ⟨gpu⟩ (vLLM sizes its KV pool from the GPU's memory)"
                        .into(),
                )
                .into());
            };
            let served = serve::serve(&cfg, &setup, &self.vllm(), gpu)?;
            let assumed = self.assumptions(&cfg, &setup);
            return Ok(Estimated::Serve {
                cfg,
                setup: Box::new(setup),
                served: Box::new(served),
                gpu,
                warnings,
                assumed,
            });
        }
        warnings.extend(setup.transformers_warnings(&cfg));
        let assumed = self.assumptions(&cfg, &setup);
        let est = crate::estimate(&cfg, &setup)?;
        let fit = self
            .find_gpu()?
            .map(|g| Box::new(fit::fit(&cfg, &setup, g, &est)));
        Ok(Estimated::Text {
            cfg,
            setup: Box::new(setup),
            est: Box::new(est),
            fit,
            warnings,
            assumed,
        })
    }

    /// The largest batch that fits the GPU given ([`Options::max_batch`]),
    /// the model resolved through `sources` as [`Options::estimate`]
    /// resolves it, with the GPU; `Ok(None)` for a vLLM or llama.cpp
    /// server, which has no batch size.
    pub fn max_batch_on(
        &self,
        sources: Sources,
    ) -> Result<Option<(u64, &'static Gpu)>, EstimateError> {
        self.check_engine()?;
        let Some(gpu) = self.find_gpu()? else {
            return Err(
                SetupError::Invalid("the batch is sized for a GPU: give ⟨gpu⟩".into()).into(),
            );
        };
        if self.engine() == Engine::LlamaCpp {
            return Ok(None);
        }
        let model = self.resolve(sources)?;
        Ok(self.max_batch(&model, gpu)?.map(|b| (b, gpu)))
    }

    /// The GPU given, looked up.
    fn find_gpu(&self) -> Result<Option<&'static Gpu>, UnknownGpu> {
        self.gpu.as_deref().map(gpus::find).transpose()
    }
}

impl Estimated {
    /// Whether it fits the GPU: `None` when no GPU was given.
    pub fn fits(&self) -> Option<bool> {
        match self {
            Estimated::Text { fit, .. } | Estimated::Image { fit, .. } => {
                fit.as_ref().map(|f| f.fits)
            }
            Estimated::Serve { served, .. } => Some(served.fits),
            Estimated::LlamaCpp { model, args, gpu } => {
                gpu.map(|g| !llamacpp::Outcome::new(model, args, Some(g)).fails())
            }
        }
    }

    /// The text for people: a `warning: …` line per warning, then the
    /// estimate.
    pub fn human(&self) -> String {
        let with_warnings = |warnings: &[String], body: String| {
            let mut out: String = warnings.iter().map(|w| format!("warning: {w}\n")).collect();
            out.push_str(&body);
            out
        };
        match self {
            Estimated::Text {
                cfg,
                setup,
                est,
                fit,
                warnings,
                assumed,
            } => {
                let body =
                    under_first_line(&render::human(cfg, setup, est, fit.as_deref()), assumed);
                with_warnings(warnings, body)
            }
            Estimated::Image {
                model,
                setup,
                est,
                fit,
            } => image::human(model, setup, est, fit.as_deref()),
            Estimated::Serve {
                cfg,
                setup,
                served,
                gpu,
                warnings,
                assumed,
            } => with_warnings(
                warnings,
                under_first_line(&render::serve_human(cfg, setup, gpu, served), assumed),
            ),
            Estimated::LlamaCpp { model, args, gpu } => {
                let o = llamacpp::Outcome::new(model, args, *gpu);
                with_warnings(&o.warnings, o.human())
            }
        }
    }

    /// The JSON (the contract in `docs/estimate.md`), pretty-printed, and a
    /// newline.
    pub fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match self {
            Estimated::Text {
                cfg,
                setup,
                est,
                fit,
                warnings,
                assumed,
            } => serde_json::to_writer_pretty(
                &mut *out,
                &json::Json::text(cfg, setup, est, fit.as_deref(), warnings, assumed),
            )?,
            Estimated::Image {
                model,
                setup,
                est,
                fit,
            } => serde_json::to_writer_pretty(
                &mut *out,
                &json::Json::image(model, setup, est, fit.as_deref()),
            )?,
            Estimated::Serve {
                cfg,
                setup,
                served,
                gpu,
                warnings,
                assumed,
            } => serde_json::to_writer_pretty(
                &mut *out,
                &served.json(cfg, setup, gpu, warnings, assumed),
            )?,
            Estimated::LlamaCpp { model, args, gpu } => serde_json::to_writer_pretty(
                &mut *out,
                &llamacpp::Outcome::new(model, args, *gpu).json(),
            )?,
        }
        writeln!(out)
    }
}

/// `text` with one `  assumed: …` line per assumption under its first line
/// (the model and the setup), before the numbers.
fn under_first_line(text: &str, assumed: &[crate::versions::Assumption]) -> String {
    let (head, rest) = text.split_once('\n').unwrap_or((text, ""));
    let mut body = format!("{head}\n");
    for a in assumed {
        body.push_str(&format!("  assumed: {a}\n"));
    }
    body.push_str(rest);
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llamacpp::FileType;
    use crate::options::QuantChoice;

    fn run(f: impl FnOnce(&mut Options)) -> Result<Estimated, EstimateError> {
        let mut o = Options {
            model: Some("meta-llama/Llama-3.2-1B".into()),
            ..Options::default()
        };
        f(&mut o);
        o.estimate(Sources::default(), &|k| Cow::Borrowed(k.key()))
    }

    #[test]
    fn each_kind_estimates_and_gives_a_verdict() {
        let text = run(|o| o.gpu = Some("rtx-4090".into())).expect("estimated");
        assert!(matches!(text, Estimated::Text { .. }));
        assert_eq!(text.fits(), Some(true));
        let no_gpu = run(|_| {}).expect("estimated");
        assert_eq!(no_gpu.fits(), None);
        let big = run(|o| {
            o.model = Some("meta-llama/Llama-3.1-70B".into());
            o.task = Workload::Train;
            o.gpu = Some("rtx-4090".into());
        })
        .expect("estimated");
        assert_eq!(big.fits(), Some(false));
        let served = run(|o| {
            o.task = Workload::Serve;
            o.engine = Some(Engine::Vllm);
            o.gpu = Some("h100-sxm".into());
        })
        .expect("estimated");
        assert!(matches!(served, Estimated::Serve { .. }));
        assert_eq!(served.fits(), Some(true));
        let llama = run(|o| {
            o.engine = Some(Engine::LlamaCpp);
            o.quant = Some(QuantChoice::Gguf(FileType::Q4KM));
            o.gpu = Some("rtx-4090".into());
        })
        .expect("estimated");
        assert!(matches!(llama, Estimated::LlamaCpp { .. }));
        assert_eq!(llama.fits(), Some(true));
        let image = run(|o| o.model = Some("sdxl".into())).expect("estimated");
        assert!(matches!(image, Estimated::Image { .. }));
        for e in [&text, &served, &llama, &image] {
            let mut out = Vec::new();
            e.write_json(&mut out).expect("written");
            let v: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
            assert_eq!(v["version"], 2);
            assert!(!e.human().is_empty());
        }
    }

    #[test]
    fn errors_say_which_input() {
        assert!(matches!(
            run(|o| o.gpu = Some("no-such-gpu".into())),
            Err(EstimateError::Gpu(_))
        ));
        assert!(matches!(
            run(|o| o.model = Some("no-such-model-anywhere".into())),
            Err(EstimateError::Model(_))
        ));
        assert!(matches!(
            run(|o| o.ctx_size = Some(4096)),
            Err(EstimateError::Setup(SetupError::Conflict(_)))
        ));
    }
}
