//! `oomkit estimate`: resolve the model (the library decides: an image
//! pipeline, or a text model from the catalogue, a config.json or --params),
//! build the setup, run the estimate and the fit, print, and exit 1 when it
//! does not fit the chosen GPU.

use anyhow::{Context, bail};
use oomkit_estimate::fit::{self, Fit};
use oomkit_estimate::image;
use oomkit_estimate::knob::Knob;
use oomkit_estimate::model::parse_count;
use oomkit_estimate::resolve::{self, ResolveError, Resolved, hub::HubError};
use oomkit_estimate::serve;
use oomkit_estimate::{
    Attention, BareShape, Estimate, Given, LoraTargets, Method, ModelConfig, Offload, Optimizer,
    Precision, Quant, Setup, Task, catalogue, estimate, render,
};
use serde::Serialize;
use std::borrow::Cow;
use std::io::Write;

use crate::cli::{
    ColorChoice, EstAttention, EstCpuOffload, EstEngine, EstKvDtype, EstMethod, EstOffload,
    EstOptimizer, EstPrecision, EstQuant, EstTask, EstimateArgs, Format,
};
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
    run_to(args, output::stdout(color))
}

/// [`run`] writing to `out` (preflight reads the JSON it prints).
pub fn run_to(args: EstimateArgs, out: impl Write) -> anyhow::Result<u8> {
    run_inner(args, out).map_err(|e| {
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
fn flagged(e: anyhow::Error) -> anyhow::Error {
    let parts: Vec<String> = e.chain().map(says).collect();
    if e.chain().map(ToString::to_string).eq(parts.iter().cloned()) {
        return e;
    }
    anyhow::anyhow!(parts.join(": "))
}

fn run_inner(args: EstimateArgs, mut out: impl Write) -> anyhow::Result<u8> {
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
    super::llamacpp::check_flags(&args)?;
    if engine(&args) == EstEngine::LlamaCpp {
        return super::llamacpp::run(&args, &mut out);
    }
    let cfg = match resolve_model(&args)? {
        Resolved::Image(m) => return image_run(&args, &m, &mut out),
        Resolved::Text(cfg) => *cfg,
    };
    let setup = build_setup(&args, &cfg)?;
    let mut warnings = setup.warnings_named(&cfg, &flag);
    if args.task == EstTask::Serve {
        return serve(&args, &cfg, &setup, &warnings, &mut out);
    }
    warnings.extend(setup.transformers_warnings(&cfg));
    let est = estimate(&cfg, &setup)?;
    let gpu = match &args.gpu {
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

/// The engine: `--engine`, else llama.cpp for a `.gguf` MODEL when
/// inferring or serving (what runs GGUF files), else Hugging Face.
pub fn engine(args: &EstimateArgs) -> EstEngine {
    args.engine.unwrap_or_else(|| {
        let gguf = args
            .model
            .as_deref()
            .is_some_and(|m| m.to_ascii_lowercase().ends_with(".gguf"));
        if gguf && args.task != EstTask::Train {
            EstEngine::LlamaCpp
        } else {
            EstEngine::Hf
        }
    })
}

/// The largest batch the estimate fits on `--gpu`, and the GPU's id: where
/// `oomkit probe --estimate` starts (text models: `--batch`; image models:
/// `--images`).
pub fn max_batch(args: &EstimateArgs) -> anyhow::Result<(u64, &'static str)> {
    max_batch_inner(args).map_err(flagged)
}

fn max_batch_inner(args: &EstimateArgs) -> anyhow::Result<(u64, &'static str)> {
    let Some(name) = &args.gpu else {
        bail!(
            "--estimate needs --gpu: the GPU to size the batch for (see `oomkit estimate --list-gpus`)"
        );
    };
    let gpu = oomkit_core::gpus::find(name)?;
    let cfg = match resolve_model(args)? {
        Resolved::Image(m) => {
            let s = image_setup(args, &m)?;
            return Ok((image::fit(&m, &s, gpu).max_batch, gpu.id));
        }
        Resolved::Text(cfg) => *cfg,
    };
    if args.task == EstTask::Serve || engine(args) != EstEngine::Hf {
        bail!(
            "--estimate sizes training and inference batches; a vLLM or llama.cpp server has no batch size to probe"
        );
    }
    let setup = build_setup(args, &cfg)?;
    let est = estimate(&cfg, &setup)?;
    Ok((fit::fit(&cfg, &setup, gpu, &est).max_batch, gpu.id))
}

/// Text-to-image pipelines (`oomkit_estimate::image`): the same JSON as text
/// models, with the per-component detail under `image`.
fn image_run(args: &EstimateArgs, m: &image::Model, out: &mut impl Write) -> anyhow::Result<u8> {
    let s = image_setup(args, m)?;
    let est = image::estimate(m, &s);
    let fit = match &args.gpu {
        Some(name) => Some(image::fit(m, &s, oomkit_core::gpus::find(name)?)),
        None => None,
    };
    match args.format {
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

/// The image setup from the arguments, validated.
fn image_setup(args: &EstimateArgs, m: &image::Model) -> anyhow::Result<image::ImageSetup> {
    image::check_given(m, &given(args))?;
    let d = image::ImageSetup::default_for(m);
    let s = image::ImageSetup {
        width: args.width.unwrap_or(d.width),
        height: args.height.unwrap_or(d.height),
        images: args.images.unwrap_or(d.images),
        precision: args.precision.map_or(d.precision, precision),
        quant: args.quant.map_or(Quant::None, quant),
        attention: attention(args.attention),
        attention_slicing: args.attention_slicing,
        vae_slicing: args.vae_slicing,
        vae_tiling: args.vae_tiling,
        cpu_offload: match args.cpu_offload {
            None => image::CpuOffload::None,
            Some(EstCpuOffload::Model) => image::CpuOffload::Model,
            Some(EstCpuOffload::Sequential) => image::CpuOffload::Sequential,
        },
        safety_checker: d.safety_checker && !args.no_safety_checker,
    };
    image::validate(m, &s)?;
    Ok(s)
}

/// `--engine vllm --task serve`: the pool on the chosen GPU.
fn serve(
    args: &EstimateArgs,
    cfg: &ModelConfig,
    setup: &Setup,
    warnings: &[String],
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    let Some(name) = &args.gpu else {
        bail!("--task serve needs --gpu (vLLM sizes its KV pool from the GPU's memory)");
    };
    let gpu = oomkit_core::gpus::find(name)?;
    let opts = serve::VllmOptions {
        gpu_memory_utilization: args.gpu_memory_utilization,
        max_model_len: args.max_model_len,
        max_num_batched_tokens: args.max_num_batched_tokens,
        max_num_seqs: args.max_num_seqs,
    };
    let served = serve::serve(cfg, setup, &opts, gpu)?;
    match args.format {
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

fn precision(p: EstPrecision) -> Precision {
    match p {
        EstPrecision::Fp32 => Precision::Fp32,
        EstPrecision::Fp16 => Precision::Fp16,
        EstPrecision::Bf16 => Precision::Bf16,
        EstPrecision::MixedFp16 => Precision::MixedFp16,
        EstPrecision::MixedBf16 => Precision::MixedBf16,
    }
}

fn quant(q: EstQuant) -> Quant {
    match q {
        EstQuant::None => Quant::None,
        EstQuant::Int8 => Quant::Int8,
        EstQuant::Nf4 => Quant::Nf4,
        EstQuant::Nf4Dq => Quant::Nf4Dq,
        EstQuant::Int4 => Quant::Int4,
        EstQuant::Fp8 => Quant::Fp8,
        // GGUF types never reach the PyTorch paths: `llamacpp::check_flags`
        // refuses them without --engine llama.cpp.
        EstQuant::GgufF16
        | EstQuant::GgufQ8_0
        | EstQuant::GgufQ6K
        | EstQuant::GgufQ5KM
        | EstQuant::GgufQ4KM
        | EstQuant::GgufQ4_0 => Quant::None,
    }
}

fn attention(a: EstAttention) -> Attention {
    match a {
        EstAttention::Eager => Attention::Eager,
        EstAttention::Sdpa => Attention::Sdpa,
        EstAttention::Flash => Attention::Flash,
    }
}

/// The model named: `--params` (a bare text model), else what the library
/// resolves MODEL to (an image pipeline or a text model).
pub(super) fn resolve_model(args: &EstimateArgs) -> anyhow::Result<Resolved> {
    if let Some(p) = &args.params {
        let n = parse_count(p).with_context(|| {
            format!("--params {p:?}: expected a positive count like 7B or 350M")
        })?;
        // parse_count saturates at u64::MAX: name what the user wrote.
        if n > oomkit_estimate::model::limits::PARAMS {
            bail!(
                "--params {p} is above the limit of {} parameters (far beyond any published model; see README \"Limits\")",
                oomkit_estimate::model::limits::PARAMS
            );
        }
        let shape = BareShape {
            layers: args.layers,
            hidden: args.hidden,
            heads: args.heads,
            kv_heads: args.kv_heads,
            vocab: args.vocab,
            intermediate: args.intermediate,
        };
        return Ok(Resolved::Text(Box::new(ModelConfig::bare(n, &shape)?)));
    }
    let Some(name) = args.model.as_deref() else {
        bail!("give a MODEL or --params");
    };
    let sources = resolve::Sources {
        cache: resolve::hf_cache::dir(),
        // Asked for: the Hub's own config, before the catalogue's.
        hub: args
            .hub
            .then(|| Box::new(super::hub_client::Ureq::new()) as Box<dyn resolve::hub::Fetch>),
    };
    resolve::resolve(name, sources).map_err(|e| match e {
        ResolveError::Hub(HubError::Offline { var }) => anyhow::anyhow!(
            "--hub: {var} is set, so the Hugging Face Hub is not contacted (unset it, or download the model first: the local cache is read without --hub)"
        ),
        ResolveError::Hub(e @ HubError::InvalidRepo { .. }) => anyhow::anyhow!("--hub: {e}"),
        // A Hub-style id: say how to get its own config.
        ResolveError::Unknown(e @ catalogue::UnknownModel::NotFound { .. })
            if name.contains('/') =>
        {
            anyhow::anyhow!(
                "{}; or add --hub to fetch its config.json from the Hugging Face Hub",
                e.message(&flag)
            )
        }
        e => e.into(),
    })
}

/// Which setup flags were given on the command line (the library's
/// combination checks concern only these).
pub(super) fn given(a: &EstimateArgs) -> Given {
    Given {
        method: a.method.is_some(),
        quant: a.quant.is_some(),
        optimizer: a.optimizer.is_some(),
        grad_checkpointing: a.grad_checkpointing,
        trainer: a.trainer,
        grad_accum: a.grad_accum.is_some(),
        lora_rank: a.lora_rank.is_some(),
        lora_targets: a.lora_targets.is_some(),
        no_foreach: a.no_foreach,
        zero: a.zero.is_some(),
        fsdp: a.fsdp,
        offload: a.offload.is_some(),
        new_tokens: a.new_tokens.is_some(),
        train: a.task == EstTask::Train,
        serve: a.task == EstTask::Serve,
        vllm: engine(a) == EstEngine::Vllm,
        gpu: a.gpu.is_some(),
        batch: a.batch != oomkit_estimate::setup::DEFAULT_BATCH,
        parallel: a.tp != 1 || a.pp != 1,
        no_safety_checker: a.no_safety_checker,
        kv_dtype: a.kv_dtype.is_some(),
        vllm_knob: [
            (
                a.gpu_memory_utilization.is_some(),
                Knob::GpuMemoryUtilization,
            ),
            (a.max_model_len.is_some(), Knob::MaxModelLen),
            (a.max_num_seqs.is_some(), Knob::MaxNumSeqs),
            (
                a.max_num_batched_tokens.is_some(),
                Knob::MaxNumBatchedTokens,
            ),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag)),
        image_knob: [
            (a.width.is_some(), Knob::Width),
            (a.height.is_some(), Knob::Height),
            (a.images.is_some(), Knob::Images),
            (a.attention_slicing, Knob::AttentionSlicing),
            (a.vae_slicing, Knob::VaeSlicing),
            (a.vae_tiling, Knob::VaeTiling),
            (a.cpu_offload.is_some(), Knob::CpuOffload),
            (a.no_safety_checker, Knob::NoSafetyChecker),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag)),
    }
}

fn build_setup(a: &EstimateArgs, cfg: &ModelConfig) -> anyhow::Result<Setup> {
    let d = Setup::default();
    let precision = a.precision.map_or(d.precision, precision);
    let targets = a
        .lora_targets
        .as_deref()
        .map_or(d.lora_targets, LoraTargets::parse);
    let kv_bits = match a.kv_dtype.unwrap_or(EstKvDtype::Auto) {
        EstKvDtype::Auto => 8 * precision.act_bytes(),
        EstKvDtype::Fp16 | EstKvDtype::Bf16 => 16,
        EstKvDtype::Fp8 | EstKvDtype::Int8 => 8,
        EstKvDtype::Int4 => 4,
    };
    let task = match a.task {
        EstTask::Infer | EstTask::Serve => Task::Infer,
        EstTask::Train => Task::Train,
    };
    let method = match a.method {
        None => d.method,
        Some(EstMethod::Full) => Method::Full,
        Some(EstMethod::Lora) => Method::Lora,
        Some(EstMethod::Qlora) => Method::Qlora,
    };
    let s = Setup {
        task,
        method,
        precision,
        quant: match a.quant {
            None if task == Task::Train && method == Method::Full => Quant::None,
            None => cfg.native_quant.unwrap_or(Quant::None),
            Some(q) => quant(q),
        },
        optimizer: match a.optimizer {
            None => d.optimizer,
            Some(EstOptimizer::Adamw) => Optimizer::Adamw,
            Some(EstOptimizer::Adamw8bit) => Optimizer::Adamw8bit,
            Some(EstOptimizer::PagedAdamw8bit) => Optimizer::PagedAdamw8bit,
            Some(EstOptimizer::Sgd) => Optimizer::Sgd,
            Some(EstOptimizer::SgdMomentum) => Optimizer::SgdMomentum,
            Some(EstOptimizer::Adafactor) => Optimizer::Adafactor,
            Some(EstOptimizer::Lion) => Optimizer::Lion,
        },
        batch: a.batch,
        seq: a.seq,
        new_tokens: a.new_tokens.unwrap_or(d.new_tokens),
        grad_checkpointing: a.grad_checkpointing,
        drops_output: a.trainer,
        kbit_upcast: a.kbit_upcast,
        grad_accum: a.grad_accum.unwrap_or(d.grad_accum),
        attention: attention(a.attention),
        lora_rank: a.lora_rank.unwrap_or(d.lora_rank),
        lora_targets: targets,
        kv_bits,
        foreach: !a.no_foreach,
        // CUDA 12.2 made lazy kernel loading the default.
        cuda_lazy_loading: a.cuda.is_none_or(|v| v >= (12, 2)),
        gpus: a.gpus.unwrap_or(a.tp.saturating_mul(a.pp)),
        tp: a.tp,
        pp: a.pp,
        // --fsdp is stage 3; an explicit --zero beside it is checked below.
        zero: a.zero.unwrap_or(if a.fsdp { 3 } else { d.zero }),
        offload: match a.offload {
            None => d.offload,
            Some(EstOffload::None) => Offload::None,
            Some(EstOffload::Optimizer) => Offload::Optimizer,
            Some(EstOffload::Params) => Offload::Params,
        },
    };
    s.check_given(&given(a))?;
    let s = s.validate()?;
    s.check_model(cfg)?;
    Ok(s)
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
