//! `oomkit estimate --engine llama.cpp` (the default for a `.gguf` MODEL when
//! inferring or serving): the model and llama-server's arguments from the
//! library's options (`oomkit_estimate::options`) → `oomkit_estimate::llamacpp`
//! → the buffers, the verdict and the plans, printed.

use std::io::Write;

use oomkit_estimate::Options;
use oomkit_estimate::llamacpp::{Args, LlamaError, MAX_BATCH, MAX_CTX, MAX_SLOTS, Outcome};
use oomkit_estimate::options::LlamaModelError;

use super::estimate::{model_error, sources};
use crate::cli::Format;

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

/// Runs the estimate and prints it; exit 1 when `--gpu` is given and it
/// does not fit.
pub fn run(opts: &Options, format: Format, out: &mut impl Write) -> anyhow::Result<u8> {
    let m = opts
        .llamacpp_model(sources(opts.hub))
        .map_err(|e| match e {
            LlamaModelError::Setup(e) => e.into(),
            LlamaModelError::Gguf(e) => flagged(e),
            LlamaModelError::Model(e) => model_error(e, opts.model.as_deref()),
        })?;
    let args = Args::from_options(&opts.llamacpp()?, &m).map_err(flagged)?;
    let gpu = match &opts.gpu {
        Some(name) => Some(oomkit_core::gpus::find(name)?),
        None => None,
    };
    let o = Outcome::new(&m, &args, gpu);
    match format {
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
