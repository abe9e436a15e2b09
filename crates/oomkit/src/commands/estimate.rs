//! `oomkit estimate`: resolve the model (the library decides: an image
//! pipeline, or a text model from the catalogue, a config.json or --params),
//! build the setup, run the estimate and the fit, print, and exit 1 when it
//! does not fit the chosen GPU.

use anyhow::bail;
use oomkit_estimate::fit::{self, Fit};
use oomkit_estimate::image;
use oomkit_estimate::knob::Knob;
use oomkit_estimate::options::ModelError;
use oomkit_estimate::resolve::{self, ResolveError, Resolved, hub::HubError};
use oomkit_estimate::serve;
use oomkit_estimate::{
    Engine, Estimate, ModelConfig, Options, Setup, Workload, catalogue, estimate, render,
};
use serde::Serialize;
use std::borrow::Cow;
use std::io::Write;

use crate::cli::{ColorChoice, EstimateArgs, Format};
use crate::output;

/// The JSON contract (README "`oomkit estimate`"), one shape for text and
/// image models: `model` and `setup` differ per kind, everything else is the
/// same [`Estimate`] and [`Fit`]; image models add `image`.
#[derive(Serialize)]
struct JsonOut<'a, M, S> {
    version: u32,
    model: M,
    setup: S,
    components: &'a oomkit_estimate::Components,
    peak_allocated_bytes: oomkit_core::Bytes,
    peak_reserved_bytes: oomkit_core::Bytes,
    device_used_bytes: oomkit_core::Bytes,
    peak_phase: &'a str,
    /// Warnings that did not stop the estimate (input beyond the model's
    /// context); always present, `[]` when none.
    warnings: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<ImageDetail<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fit: Option<&'a Fit>,
}

impl<'a, M: Serialize, S: Serialize> JsonOut<'a, M, S> {
    /// The shared fields from the estimate and the fit; no `image`.
    fn new(
        model: M,
        setup: S,
        est: &'a Estimate,
        fit: Option<&'a Fit>,
        warnings: &'a [String],
    ) -> Self {
        JsonOut {
            version: 1,
            model,
            setup,
            components: &est.components,
            peak_allocated_bytes: est.peak_allocated_bytes,
            peak_reserved_bytes: est.peak_reserved_bytes,
            device_used_bytes: est.device_used_bytes,
            peak_phase: est.peak_phase,
            warnings,
            image: None,
            fit,
        }
    }
}

/// `model` for an image pipeline.
#[derive(Serialize)]
struct ImageModelOut {
    id: &'static str,
    pipeline: image::Pipeline,
    params: u64,
    trainable_params: u64,
}

/// `setup` for an image pipeline: `task` as for text models, then the image
/// switches.
#[derive(Serialize)]
struct ImageSetupOut<'a> {
    task: &'static str,
    #[serde(flatten)]
    setup: &'a image::ImageSetup,
}

/// `image`: parameters per loaded component and the weights each keeps on
/// the GPU at the peak.
#[derive(Serialize)]
struct ImageDetail<'a> {
    params: &'a [image::ParamRow],
    weights: &'a [image::Part],
}

#[derive(Serialize)]
struct JsonModel<'a> {
    params: u64,
    trainable_params: u64,
    #[serde(flatten)]
    config: &'a ModelConfig,
}

/// Runs the subcommand; errors come back as one line (the cause chain joined
/// with `: `), broken pipes untouched.
pub fn run(args: EstimateArgs, color: ColorChoice) -> anyhow::Result<u8> {
    run_inner(args, color).map_err(|e| {
        if output::is_broken_pipe(&e) {
            return e;
        }
        let parts: Vec<String> = e.chain().map(says).collect();
        anyhow::anyhow!(parts.join(": "))
    })
}

/// How the command line names a setting: its flag (README "`oomkit
/// estimate`"); the library's messages carry [`Knob`] markers.
pub fn flag(k: Knob) -> Cow<'static, str> {
    match k {
        Knob::ListModels => Cow::Borrowed("`oomkit estimate --list-models`"),
        k => Cow::Owned(format!("--{}", k.key())),
    }
}

/// One cause of an error, with the library's settings named by their flags.
fn says(e: &(dyn std::error::Error + 'static)) -> String {
    if let Some(e) = e.downcast_ref::<oomkit_estimate::SetupError>() {
        return e.message(&flag);
    }
    if let Some(e) = e.downcast_ref::<oomkit_estimate::ConfigError>() {
        return e.message(&flag);
    }
    if let Some(e) = e.downcast_ref::<catalogue::UnknownModel>() {
        return e.message(&flag);
    }
    if let Some(ResolveError::Unknown(e)) = e.downcast_ref::<ResolveError>() {
        return e.message(&flag);
    }
    e.to_string()
}

/// The error with the library's settings named by their flags, the causes
/// joined into one line where one of them needed it.
pub fn flagged(e: anyhow::Error) -> anyhow::Error {
    let parts: Vec<String> = e.chain().map(says).collect();
    if e.chain().map(ToString::to_string).eq(parts.iter().cloned()) {
        return e;
    }
    anyhow::anyhow!(parts.join(": "))
}

fn run_inner(args: EstimateArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let mut out = output::stdout(color);
    if args.list_models {
        for m in catalogue::list()? {
            writeln!(
                out,
                "{:<40} {:<16} {:>8}{}",
                m.id,
                m.alias,
                oomkit_estimate::model::human_count(m.params),
                if m.reconstructed {
                    "  (reconstructed config)"
                } else {
                    ""
                }
            )?;
        }
        out.flush()?;
        return Ok(0);
    }
    if args.list_gpus {
        for g in oomkit_core::gpus::GPUS {
            writeln!(
                out,
                "{:<22} {:<28} {:>10}",
                g.id,
                g.short_name,
                g.usable().to_string()
            )?;
        }
        out.flush()?;
        return Ok(0);
    }
    let opts = args.options();
    opts.check_engine()?;
    if opts.engine() == Engine::LlamaCpp {
        return super::llamacpp::run(&opts, args.format, &mut out);
    }
    let cfg = match resolve_model(&opts)? {
        Resolved::Image(m) => return image_run(&opts, args.format, &m, &mut out),
        Resolved::Text(cfg) => *cfg,
    };
    let setup = opts.setup(&cfg)?;
    let mut warnings = setup.warnings_named(&cfg, &flag);
    if opts.task == Workload::Serve {
        return serve(&opts, args.format, &cfg, &setup, &warnings, &mut out);
    }
    warnings.extend(setup.transformers_warnings(&cfg));
    let est = estimate(&cfg, &setup)?;
    let gpu = match &opts.gpu {
        Some(name) => Some(oomkit_core::gpus::find(name)?),
        None => None,
    };
    let fit = gpu.map(|g| fit::fit(&cfg, &setup, g, &est));
    match args.format {
        Format::Json => {
            let j = json(&cfg, &setup, &est, fit.as_ref(), &warnings);
            serde_json::to_writer_pretty(&mut out, &j)?;
            writeln!(out)?;
        }
        Format::Human => {
            write_warnings(&mut out, &warnings)?;
            write!(out, "{}", render::human(&cfg, &setup, &est, fit.as_ref()))?;
        }
    }
    out.flush()?;
    Ok(if fit.is_some_and(|f| !f.fits) { 1 } else { 0 })
}

/// Text-to-image pipelines (`oomkit_estimate::image`): the same JSON as text
/// models, with the per-component detail under `image`.
fn image_run(
    opts: &Options,
    format: Format,
    m: &image::Model,
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    let s = opts.image_setup(m)?;
    let est = image::estimate(m, &s);
    let fit = match &opts.gpu {
        Some(name) => Some(image::fit(m, &s, oomkit_core::gpus::find(name)?)),
        None => None,
    };
    match format {
        Format::Json => {
            let model = ImageModelOut {
                id: m.id,
                pipeline: m.pipeline,
                params: est.estimate.params,
                trainable_params: 0,
            };
            let setup = ImageSetupOut {
                task: "infer",
                setup: &s,
            };
            let mut j = JsonOut::new(model, setup, &est.estimate, fit.as_ref(), &[]);
            j.image = Some(ImageDetail {
                params: &est.params,
                weights: &est.weights,
            });
            serde_json::to_writer_pretty(&mut *out, &j)?;
            writeln!(out)?;
        }
        Format::Human => write!(out, "{}", image::human(m, &s, &est, fit.as_ref()))?,
    }
    out.flush()?;
    Ok(if fit.is_some_and(|f| !f.fits) { 1 } else { 0 })
}

/// `--engine vllm --task serve`: the pool on the chosen GPU.
fn serve(
    opts: &Options,
    format: Format,
    cfg: &ModelConfig,
    setup: &Setup,
    warnings: &[String],
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    let Some(name) = &opts.gpu else {
        bail!("--task serve needs --gpu (vLLM sizes its KV pool from the GPU's memory)");
    };
    let gpu = oomkit_core::gpus::find(name)?;
    let served = serve::serve(cfg, setup, &opts.vllm(), gpu)?;
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &served.json(cfg, setup, gpu, warnings))?;
            writeln!(out)?;
        }
        Format::Human => {
            write_warnings(&mut *out, warnings)?;
            write!(out, "{}", render::serve_human(cfg, setup, gpu, &served))?;
        }
    }
    out.flush()?;
    Ok(if served.fits { 0 } else { 1 })
}

fn json<'a>(
    cfg: &'a ModelConfig,
    setup: &'a Setup,
    est: &'a Estimate,
    fit: Option<&'a Fit>,
    warnings: &'a [String],
) -> JsonOut<'a, JsonModel<'a>, &'a Setup> {
    let model = JsonModel {
        params: est.params,
        trainable_params: est.trainable_params,
        config: cfg,
    };
    JsonOut::new(model, setup, est, fit, warnings)
}

/// One `warning: …` line each, before the human output.
fn write_warnings(out: &mut impl Write, warnings: &[String]) -> std::io::Result<()> {
    for w in warnings {
        writeln!(out, "warning: {w}")?;
    }
    Ok(())
}

/// Where a model name is looked up: the local Hugging Face cache, and the
/// Hub when `hub` (its client is the binary's: the network is I/O).
pub fn sources(hub: bool) -> resolve::Sources {
    resolve::Sources {
        cache: resolve::hf_cache::dir(),
        // Asked for: the Hub's own config, before the catalogue's.
        hub: hub.then(|| Box::new(super::hub_client::Ureq::new()) as Box<dyn resolve::hub::Fetch>),
    }
}

/// The model the options name ([`Options::resolve`]), its errors in the
/// command line's words.
pub fn resolve_model(opts: &Options) -> anyhow::Result<Resolved> {
    opts.resolve(sources(opts.hub))
        .map_err(|e| model_error(e, opts.model.as_deref()))
}

/// A resolution error in the command line's words: `--hub` named where the
/// Hub was asked for or could help.
pub fn model_error(e: ModelError, name: Option<&str>) -> anyhow::Error {
    let e = match e {
        ModelError::Setup(e) => return e.into(),
        ModelError::Resolve(e) => e,
    };
    match e {
        ResolveError::Hub(HubError::Offline { var }) => anyhow::anyhow!(
            "--hub: {var} is set, so the Hugging Face Hub is not contacted (unset it, or download the model first: the local cache is read without --hub)"
        ),
        ResolveError::Hub(e @ HubError::InvalidRepo { .. }) => anyhow::anyhow!("--hub: {e}"),
        // A Hub-style id: say how to get its own config.
        ResolveError::Unknown(e @ catalogue::UnknownModel::NotFound { .. })
            if name.is_some_and(|n| n.contains('/')) =>
        {
            anyhow::anyhow!(
                "{}; or add --hub to fetch its config.json from the Hugging Face Hub",
                e.message(&flag)
            )
        }
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every setting the library names is a real `estimate` flag, so a
    /// message never points at a flag that does not exist.
    #[test]
    fn every_knob_is_an_estimate_flag() {
        let cli = crate::cli::Cli::command();
        let est = cli.find_subcommand("estimate");
        let longs: Vec<String> = est
            .map(|c| {
                c.get_arguments()
                    .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
                    .collect()
            })
            .unwrap_or_default();
        for k in Knob::ALL {
            let f = flag(*k);
            assert!(
                longs.iter().any(|l| f.contains(l.as_str())),
                "{k:?} is named {f}, not an estimate flag"
            );
        }
    }
}
