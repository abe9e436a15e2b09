//! Model resolution: what the user named → a text model's [`ModelConfig`]
//! or an image pipeline ([`Resolved`]); the one place that decides which.
//!
//! In order: an image pipeline of the catalogue ([`catalogue::image`]: its
//! repo has no `config.json` for the later steps to read, so it comes
//! first); a `.gguf` file (its header); a `config.json`, its folder or the
//! safetensors index beside it (with the safetensors headers found there); a
//! model downloaded to the local Hugging Face cache ([`hf_cache`]: its own
//! config is the truth for that id, so it comes before the catalogue); the
//! Hub, when asked ([`hub`]); then the embedded [`catalogue`]'s text models
//! (an unknown name gets suggestions from both kinds).
//!
//! This module reads local files (bounded: [`CONFIG_LIMIT`],
//! [`crate::checkpoint::MAX_HEADERS_TOTAL`], [`crate::gguf::MAX_HEADER`]); the network is
//! reached only through the [`hub::Fetch`] the caller passes in, so the
//! library has no HTTP client. Errors never name command-line flags.

pub mod files;
pub mod hf_cache;
pub mod hub;

use std::path::{Path, PathBuf};

use crate::catalogue::{self, UnknownModel};
use crate::checkpoint::{HeaderError, IndexError};
use crate::gguf::{self, GgufError};
use crate::image;
use crate::model::{ConfigError, ModelConfig};

pub use files::{CONFIG_LIMIT, read_gguf_file};

/// Why a model could not be resolved. The cause chain (`source()`) carries
/// the detail; each level's `Display` is one phrase.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// A file could not be read.
    #[error("cannot read {name}")]
    Read {
        /// The file.
        name: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A folder given where a file was wanted.
    #[error("{name} is a directory, not a file")]
    Directory {
        /// The path.
        name: String,
    },
    /// A regular file over the limit for its kind.
    #[error(
        "{name} is {} long, over the {} limit for this kind of input",
        oomkit_core::Bytes(*len),
        oomkit_core::Bytes(*limit)
    )]
    TooLong {
        /// The file.
        name: String,
        /// Its length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// A stream that went on past the limit.
    #[error(
        "{name} is larger than the {} limit for this kind of input (an endless device or the wrong file?)",
        oomkit_core::Bytes(*limit)
    )]
    Endless {
        /// The file.
        name: String,
        /// The limit.
        limit: u64,
    },
    /// A `config.json` that is not UTF-8.
    #[error("{file}: not a text config.json")]
    NotText {
        /// The file or URL.
        file: String,
        /// The decoding error.
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// A `config.json` the parser refuses.
    #[error("{file}: not a usable Hugging Face config.json")]
    Config {
        /// The file or URL.
        file: String,
        /// Why.
        #[source]
        source: ConfigError,
    },
    /// A safetensors index given alone, with no `config.json` beside it.
    #[error(
        "{index}: no config.json beside this safetensors index (it gives the weights' size, not the architecture)"
    )]
    NoConfigBesideIndex {
        /// The index file.
        index: String,
    },
    /// A safetensors header that cannot be used.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// A safetensors file shorter than its 8-byte length prefix.
    #[error("malformed safetensors header: file shorter than 8 bytes")]
    ShortHeader {
        /// What the read said.
        #[source]
        source: std::io::Error,
    },
    /// A safetensors index that cannot be used.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The safetensors headers of one model add up to more than
    /// [`crate::checkpoint::MAX_HEADERS_TOTAL`].
    #[error(
        "the safetensors headers in this folder add up to more than {}",
        oomkit_core::Bytes(crate::checkpoint::MAX_HEADERS_TOTAL)
    )]
    HeadersTooLarge,
    /// A GGUF header that cannot be used.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// A GGUF file that ends inside its header.
    #[error("{name}: malformed GGUF header: the file ends inside it")]
    GgufTruncated {
        /// The file.
        name: String,
    },
    /// A GGUF header longer than [`gguf::MAX_HEADER`].
    #[error(
        "{name}: the GGUF header does not end within {} (real headers are a few MiB; a corrupt or hostile file?)",
        oomkit_core::Bytes(gguf::MAX_HEADER)
    )]
    GgufTooLong {
        /// The file.
        name: String,
    },
    /// Neither a model name nor a bare parameter count was given.
    #[error("no model was named")]
    NoModel,
    /// Not in the catalogue (nor the cache).
    #[error(transparent)]
    Unknown(#[from] UnknownModel),
    /// The Hub could not give the model.
    #[error(transparent)]
    Hub(#[from] hub::HubError),
    /// A failure inside the file or URL named here.
    #[error("{what}")]
    In {
        /// The file or URL.
        what: String,
        /// What went wrong there.
        #[source]
        source: Box<ResolveError>,
    },
}

impl ResolveError {
    /// This error, said to have happened inside `what` (a file or URL).
    pub fn within(self, what: impl Into<String>) -> ResolveError {
        ResolveError::In {
            what: what.into(),
            source: Box::new(self),
        }
    }
}

/// What a model name resolved to.
#[derive(Clone, Debug)]
pub enum Resolved {
    /// A text model: a catalogue entry, a `config.json`, a GGUF header, the
    /// cache's or the Hub's config.
    Text(Box<ModelConfig>),
    /// A text-to-image pipeline of the catalogue ([`crate::image`]).
    Image(Box<image::Model>),
}

/// Where a name may be looked up besides the catalogue.
#[derive(Default)]
pub struct Sources {
    /// The local Hugging Face hub cache folder ([`hf_cache::dir`]), if any.
    pub cache: Option<PathBuf>,
    /// The client for the Hub, when the user asked for it; the environment
    /// ([`hub::Hub::from_env`]) is read only when the name gets that far.
    pub hub: Option<Box<dyn hub::Fetch>>,
}

/// Is `name` a GGUF file name (what llama.cpp loads)?
pub fn is_gguf(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".gguf")
}

/// Resolves a model name: an image pipeline of the catalogue, a `.gguf`
/// file, a `config.json` (file, folder or safetensors index), a model in the
/// local cache, the Hub (when `sources.hub` is given), else a text model of
/// the catalogue.
pub fn resolve(name: &str, sources: Sources) -> Result<Resolved, ResolveError> {
    if let Some(e) = catalogue::image(name) {
        return Ok(Resolved::Image(Box::new(image::Model::load(e))));
    }
    text(name, sources).map(|c| Resolved::Text(Box::new(c)))
}

/// [`resolve`]'s steps for text models.
fn text(name: &str, sources: Sources) -> Result<ModelConfig, ResolveError> {
    let path = Path::new(name);
    if is_gguf(name) {
        return read_gguf_file(path).map(|f| f.model);
    }
    if path.exists() || name.ends_with(".json") {
        return files::read_config_files(path, name);
    }
    if let Some(snapshot) = sources
        .cache
        .as_deref()
        .and_then(|c| hf_cache::snapshot(c, name))
    {
        let mut cfg = files::read_config_files(&snapshot, name.trim())?;
        cfg.config_file = Some(snapshot.join("config.json").display().to_string());
        return Ok(cfg);
    }
    if let Some(client) = sources.hub {
        return Ok(hub::Hub::from_env(client)?.model(name)?);
    }
    Ok(catalogue::find(name)?)
}
