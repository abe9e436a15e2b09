//! Local model files: `config.json`, safetensors headers and indexes, GGUF
//! headers; every read bounded.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::ResolveError;
use crate::checkpoint::{self, Checkpoint};
use crate::gguf;
use crate::model::ModelConfig;

/// The most of a `config.json` read: real ones are a few KiB (the largest in
/// the catalogue, a vision-language model's, is under 20 KiB).
pub const CONFIG_LIMIT: u64 = 4 << 20;

/// The index file transformers writes beside sharded safetensors.
pub const INDEX_NAME: &str = "model.safetensors.index.json";

/// Reads at most `limit` bytes; more is an error.
fn read_limited(name: &str, reader: impl Read, limit: u64) -> Result<Vec<u8>, ResolveError> {
    let mut buf = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|source| ResolveError::Read {
            name: name.to_string(),
            source,
        })?;
    if buf.len() as u64 > limit {
        return Err(ResolveError::Endless {
            name: name.to_string(),
            limit,
        });
    }
    Ok(buf)
}

/// [`read_limited`] for a path: a directory or a regular file over the limit
/// is refused before anything is read.
fn read_file_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ResolveError> {
    let name = path.display().to_string();
    let read_err = |source| ResolveError::Read {
        name: name.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if meta.is_dir() {
        return Err(ResolveError::Directory { name });
    }
    if meta.is_file() && meta.len() > limit {
        return Err(ResolveError::TooLong {
            name,
            len: meta.len(),
            limit,
        });
    }
    let file = std::fs::File::open(path).map_err(read_err)?;
    read_limited(&name, file, limit)
}

/// Reads a `config.json` given as a file, its folder, or the safetensors
/// index beside it, with the safetensors headers (or index) found there.
pub fn read_config_files(path: &Path, name: &str) -> Result<ModelConfig, ResolveError> {
    // A bare `model.safetensors.index.json` stands for its folder: the
    // config.json beside it, and the index itself for the weights.
    let index = is_index(path).then(|| path.to_path_buf());
    let file = if path.is_dir() {
        path.join("config.json")
    } else if index.is_some() {
        let config = path.with_file_name("config.json");
        if !config.is_file() {
            return Err(ResolveError::NoConfigBesideIndex {
                index: path.display().to_string(),
            });
        }
        config
    } else {
        path.to_path_buf()
    };
    let bytes = read_file_limited(&file, CONFIG_LIMIT)?;
    let text = String::from_utf8(bytes).map_err(|source| ResolveError::NotText {
        file: file.display().to_string(),
        source,
    })?;
    let id = if path.is_dir() {
        name
    } else {
        file.to_str().unwrap_or(name)
    };
    let mut cfg = ModelConfig::from_hf_json(id, &text).map_err(|source| ResolveError::Config {
        file: file.display().to_string(),
        source,
    })?;
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let index = index.or_else(|| {
        let p = dir.join(INDEX_NAME);
        p.is_file().then_some(p)
    });
    cfg.checkpoint = match index {
        Some(ix) => read_index(&ix, dir, &text)?,
        None => read_safetensors(dir)?,
    };
    Ok(cfg)
}

/// Reads a GGUF header with its tensor list: a growing prefix of the file
/// (one open handle, so a FIFO works too) until the header parses, never
/// more than [`gguf::MAX_HEADER`].
pub fn read_gguf_file(path: &Path) -> Result<gguf::GgufFile, ResolveError> {
    let name = path.display().to_string();
    let read_err = |source| ResolveError::Read {
        name: name.clone(),
        source,
    };
    let mut fh = std::fs::File::open(path).map_err(read_err)?;
    let mut buf = Vec::new();
    let mut want: u64 = 1 << 20;
    loop {
        let have = buf.len() as u64;
        let got = (&mut fh)
            .take(want.saturating_sub(have))
            .read_to_end(&mut buf)
            .map_err(read_err)?;
        match gguf::parse_file(&buf, &name) {
            Ok(f) => return Ok(f),
            Err(gguf::GgufError::NeedMore) if (got as u64) < want.saturating_sub(have) => {
                return Err(ResolveError::GgufTruncated { name });
            }
            Err(gguf::GgufError::NeedMore) if want >= gguf::MAX_HEADER => {
                return Err(ResolveError::GgufTooLong { name });
            }
            Err(gguf::GgufError::NeedMore) => want = (want * 4).min(gguf::MAX_HEADER),
            Err(e) => return Err(ResolveError::from(e).within(name)),
        }
    }
}

/// Is this path a safetensors index (`*.safetensors.index.json`)?
fn is_index(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.to_ascii_lowercase().ends_with(".safetensors.index.json"))
}

/// The element type and whether the config declares a quantization: what
/// an index's byte total needs to become a parameter count.
pub(crate) fn index_dtype(config: &str) -> (Option<String>, bool) {
    let v: serde_json::Value = serde_json::from_str(config).unwrap_or_default();
    let dtype = v
        .get("torch_dtype")
        .or_else(|| v.get("dtype"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_string);
    (dtype, v.get("quantization_config").is_some())
}

/// Reads a safetensors index: when every shard it names is in `dir`, their
/// headers (exact); otherwise its `metadata.total_size`, with the config's
/// `torch_dtype` for the element count.
fn read_index(index: &Path, dir: &Path, config: &str) -> Result<Option<Checkpoint>, ResolveError> {
    let bytes = read_file_limited(index, checkpoint::MAX_INDEX)?;
    let ix = checkpoint::parse_index(&bytes)
        .map_err(|e| ResolveError::from(e).within(index.display().to_string()))?;
    let shards: Vec<_> = ix.shards.iter().map(|s| dir.join(s)).collect();
    if shards.iter().all(|s| s.is_file()) {
        return read_headers(shards);
    }
    let (dtype, quantized) = index_dtype(config);
    Ok(Some(Checkpoint::from_index(
        &ix,
        dtype.as_deref(),
        quantized,
    )))
}

/// Sums the headers of every `*.safetensors` file in `dir` (never the data).
fn read_safetensors(dir: &Path) -> Result<Option<Checkpoint>, ResolveError> {
    let files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|source| ResolveError::Read {
            name: dir.display().to_string(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    read_headers(files)
}

/// One file's header, charged to `budget`.
fn read_header(f: &Path, budget: &mut u64) -> Result<Checkpoint, ResolveError> {
    let name = f.display().to_string();
    let mut fh = std::fs::File::open(f).map_err(|source| ResolveError::Read {
        name: name.clone(),
        source,
    })?;
    let mut prefix = [0u8; 8];
    fh.read_exact(&mut prefix)
        .map_err(|source| ResolveError::ShortHeader { source })?;
    let n = checkpoint::header_len(prefix)?;
    *budget = budget.checked_sub(n).ok_or(ResolveError::HeadersTooLarge)?;
    let buf = read_limited(&name, fh, n)?;
    if buf.len() as u64 != n {
        return Err(
            checkpoint::HeaderError(format!("truncated ({} of {n} bytes)", buf.len())).into(),
        );
    }
    Ok(checkpoint::parse_header(&buf)?)
}

/// Sums the headers of these `*.safetensors` files (never the data).
fn read_headers(mut files: Vec<PathBuf>) -> Result<Option<Checkpoint>, ResolveError> {
    if files.is_empty() {
        return Ok(None);
    }
    files.sort();
    let mut total = Checkpoint::default();
    let mut budget = checkpoint::MAX_HEADERS_TOTAL;
    for f in files {
        let within = |e: ResolveError| e.within(f.display().to_string());
        let c = read_header(&f, &mut budget).map_err(within)?;
        total.merge(c).map_err(|e| within(ResolveError::from(e)))?;
    }
    Ok(Some(total))
}
