//! `oomkit estimate --engine llama.cpp` (the default for a `.gguf` MODEL when
//! inferring or serving): the library's llama.cpp errors in the command
//! line's words; the estimate itself is `oomkit_estimate::Options::estimate`.

use oomkit_estimate::Options;
use oomkit_estimate::llamacpp::LlamaError;
use oomkit_estimate::options::LlamaModelError;

use super::estimate::flag;

/// The library's error in the command line's words.
pub fn flagged(e: LlamaError) -> anyhow::Error {
    match e.message(&flag) {
        Some(m) => anyhow::anyhow!(m),
        None => e.into(),
    }
}

/// A model llama.cpp cannot load, in the command line's words.
pub fn model_error(e: LlamaModelError, opts: &Options) -> anyhow::Error {
    match e {
        LlamaModelError::Setup(e) => e.into(),
        LlamaModelError::Gguf(e) => flagged(e),
        LlamaModelError::Model(e) => super::estimate::model_error(e, opts.model.as_deref()),
    }
}
