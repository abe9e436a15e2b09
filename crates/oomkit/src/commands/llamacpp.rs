//! `oomkit estimate --engine llama.cpp` (the default for a `.gguf` MODEL when
//! inferring or serving): llama-server's flags → `oomkit_estimate::llamacpp`
//! → the buffers, the verdict and the plans, printed.

use std::io::Write;
use std::path::Path;

use anyhow::bail;
use oomkit_estimate::llamacpp::{
    Args, CacheType, FileType, Layers, LlamaError, MAX_BATCH, MAX_CTX, MAX_SLOTS, Model, Options,
    Outcome,
};

use oomkit_estimate::resolve::Resolved;

use super::estimate::{engine, given, resolve_model};
use crate::cli::{EstCacheType, EstEngine, EstOnOff, EstQuant, EstTask, EstimateArgs, Format};

fn gguf_type(q: EstQuant) -> Option<FileType> {
    Some(match q {
        EstQuant::GgufF16 => FileType::F16,
        EstQuant::GgufQ8_0 => FileType::Q8_0,
        EstQuant::GgufQ6K => FileType::Q6K,
        EstQuant::GgufQ5KM => FileType::Q5KM,
        EstQuant::GgufQ4KM => FileType::Q4KM,
        EstQuant::GgufQ4_0 => FileType::Q4_0,
        EstQuant::None
        | EstQuant::Int8
        | EstQuant::Nf4
        | EstQuant::Nf4Dq
        | EstQuant::Int4
        | EstQuant::Fp8 => return None,
    })
}

fn cache_type(t: EstCacheType) -> CacheType {
    match t {
        EstCacheType::F32 => CacheType::F32,
        EstCacheType::F16 => CacheType::F16,
        EstCacheType::Bf16 => CacheType::Bf16,
        EstCacheType::Q8_0 => CacheType::Q8_0,
        EstCacheType::Q4_0 => CacheType::Q4_0,
        EstCacheType::Q4_1 => CacheType::Q4_1,
        EstCacheType::Iq4Nl => CacheType::Iq4Nl,
        EstCacheType::Q5_0 => CacheType::Q5_0,
        EstCacheType::Q5_1 => CacheType::Q5_1,
    }
}

/// Refuses llama.cpp's flags on the other engines and the other engines'
/// flags on llama.cpp (one line, exit 2).
pub fn check_flags(a: &EstimateArgs) -> anyhow::Result<()> {
    let llama_flags = [
        (a.ctx_size.is_some(), "--ctx-size"),
        (a.n_gpu_layers.is_some(), "--n-gpu-layers"),
        (a.flash_attn.is_some(), "--flash-attn"),
        (a.cache_type_k.is_some(), "--cache-type-k"),
        (a.cache_type_v.is_some(), "--cache-type-v"),
        (a.batch_size.is_some(), "--batch-size"),
        (a.ubatch_size.is_some(), "--ubatch-size"),
        (a.parallel.is_some(), "--parallel"),
    ];
    let gguf_quant = a.quant.and_then(gguf_type);
    if engine(a) != EstEngine::LlamaCpp {
        if let Some((_, flag)) = llama_flags.iter().find(|(g, _)| *g) {
            bail!("{flag} applies to --engine llama.cpp (llama-server's flags)");
        }
        if let Some(ft) = gguf_quant {
            bail!(
                "--quant {} is a GGUF file type: it applies to --engine llama.cpp",
                ft.name().to_ascii_lowercase()
            );
        }
        return Ok(());
    }
    if a.task == EstTask::Train {
        bail!(
            "--engine llama.cpp estimates inference and serving (--task infer or serve), not training"
        );
    }
    let g = given(a);
    let foreign = [
        (a.params.is_some(), "--params"),
        (g.method, "--method"),
        (g.optimizer, "--optimizer"),
        (g.grad_checkpointing, "--grad-checkpointing"),
        (g.trainer, "--trainer"),
        (g.grad_accum, "--grad-accum"),
        (g.lora_rank, "--lora-rank"),
        (g.lora_targets, "--lora-targets"),
        (g.no_foreach, "--no-foreach"),
        (g.zero, "--zero"),
        (g.fsdp, "--fsdp"),
        (g.offload, "--offload"),
        (g.new_tokens, "--new-tokens"),
        (g.batch, "--batch (llama.cpp: --batch-size/--ubatch-size)"),
        (g.parallel, "--tp/--pp"),
        (a.gpus.is_some(), "--gpus"),
        (
            g.kv_dtype,
            "--kv-dtype (llama.cpp: --cache-type-k/--cache-type-v)",
        ),
    ];
    if let Some((_, flag)) = foreign.iter().find(|(g, _)| *g) {
        bail!("{flag} does not apply to --engine llama.cpp");
    }
    if let Some(knob) = g.vllm_knob.or(g.image_knob) {
        bail!(
            "{} does not apply to --engine llama.cpp",
            super::estimate::flag(knob)
        );
    }
    if a.quant.is_some() && gguf_quant.is_none() {
        bail!(
            "--quant with --engine llama.cpp takes a GGUF file type: f16, q8_0, q6_k, q5_k_m, q4_k_m or q4_0"
        );
    }
    Ok(())
}

/// The model as llama.cpp loads it: a `.gguf` file's own tensors, or a
/// catalogue model with the tensor types of `--quant`'s mix.
fn load_model(a: &EstimateArgs) -> anyhow::Result<Model> {
    let Some(name) = a.model.as_deref() else {
        bail!("give a MODEL: a .gguf file or a catalogue model with --quant");
    };
    if oomkit_estimate::resolve::is_gguf(name) {
        if a.quant.is_some() {
            bail!("--quant: a .gguf file has its own tensor types (drop --quant)");
        }
        return Model::from_gguf(Path::new(name)).map_err(flagged);
    }
    let Some(ft) = a.quant.and_then(gguf_type) else {
        bail!(
            "--engine llama.cpp with a model that is not a .gguf file needs --quant: the GGUF type (f16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0)"
        );
    };
    match resolve_model(a)? {
        Resolved::Text(cfg) => Ok(Model::from_config(*cfg, ft)),
        Resolved::Image(m) => bail!(
            "{} is an image model: llama.cpp runs text models (drop --engine llama.cpp to estimate it with diffusers)",
            m.id
        ),
    }
}

/// The library's error in the command line's words.
fn flagged(e: LlamaError) -> anyhow::Error {
    match e {
        LlamaError::Context(n) => {
            anyhow::anyhow!("--ctx-size {n} is above the limit of {MAX_CTX} cells")
        }
        LlamaError::Slots(n) => {
            anyhow::anyhow!("--parallel {n} is above the limit of {MAX_SLOTS} slots")
        }
        LlamaError::Batch => {
            anyhow::anyhow!("--batch-size/--ubatch-size above the limit of {MAX_BATCH} tokens")
        }
        LlamaError::QuantizedV(t) => anyhow::anyhow!(
            "--cache-type-v {} needs flash attention: llama.cpp refuses a quantized V cache with --flash-attn off",
            t.name()
        ),
        e => e.into(),
    }
}

/// llama-server's knobs from the flags.
fn options(a: &EstimateArgs) -> anyhow::Result<Options> {
    Ok(Options {
        n_ctx: a.ctx_size,
        n_gpu_layers: match a.n_gpu_layers.as_deref().map(str::trim) {
            None | Some("all" | "auto") => Layers::All,
            Some(n) => match n.parse::<u64>() {
                Ok(v) => Layers::Count(v),
                Err(_) => bail!("--n-gpu-layers {n:?}: expected a number of layers or `all`"),
            },
        },
        flash_attn: a.flash_attn.map(|f| f != EstOnOff::Off),
        cache_type_k: a.cache_type_k.map(cache_type),
        cache_type_v: a.cache_type_v.map(cache_type),
        n_batch: a.batch_size,
        n_ubatch: a.ubatch_size,
        n_parallel: a.parallel,
    })
}

/// Runs the estimate and prints it; exit 1 when `--gpu` is given and it
/// does not fit.
pub fn run(a: &EstimateArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    let m = load_model(a)?;
    let args = Args::from_options(&options(a)?, &m).map_err(flagged)?;
    let gpu = match &a.gpu {
        Some(name) => Some(oomkit_core::gpus::find(name)?),
        None => None,
    };
    let o = Outcome::new(&m, &args, gpu);
    match a.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &o.json())?;
            writeln!(out)?;
        }
        Format::Human => {
            for w in &o.warnings {
                writeln!(out, "warning: {w}")?;
            }
            write!(out, "{}", o.human())?;
        }
    }
    out.flush()?;
    Ok(if o.fails() { 1 } else { 0 })
}
