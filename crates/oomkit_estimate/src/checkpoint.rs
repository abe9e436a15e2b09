//! Exact tensor sizes from `*.safetensors` headers (never the data): the
//! format is an 8-byte little-endian header length, then a JSON object
//! `{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": …}`
//! (huggingface/safetensors README). The binary reads the header bytes; this
//! module only parses them.
//!
//! A sharded checkpoint also has `model.safetensors.index.json`
//! (transformers `modeling_utils.py`, `SAFE_WEIGHTS_INDEX_NAME`):
//! `{"metadata": {"total_size": BYTES}, "weight_map": {tensor: shard file}}`.
//! When the shards are not beside it, its `total_size` (the stored bytes of
//! all tensors) stands in for the headers: [`parse_index`], [`Checkpoint::from_index`].

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// The largest header we accept: real headers are about 100 bytes per
/// tensor, well under 1 MiB even for a shard of a 671B model (the format
/// itself caps them at 100 MB).
pub const MAX_HEADER: u64 = 16 << 20;

/// The most header bytes read over all the shards of one folder (DeepSeek-V3's
/// 163 shards hold about 10 MiB of headers).
pub const MAX_HEADERS_TOTAL: u64 = 64 << 20;

/// The largest `model.safetensors.index.json` we read: about 80 bytes per
/// tensor name, under 10 MiB even for DeepSeek-V3's 91k tensors.
pub const MAX_INDEX: u64 = 32 << 20;

/// What the headers say about the stored tensors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// Elements over all tensors.
    pub elements: u64,
    /// Stored bytes over all tensors.
    pub bytes: u64,
    /// Stored bytes per safetensors dtype (`BF16`, `F8_E4M3`, `I32`, …);
    /// `unknown` for an index whose config states no float `torch_dtype`.
    pub bytes_by_dtype: BTreeMap<String, u64>,
    /// Read from `model.safetensors.index.json` alone: `bytes` is its
    /// `metadata.total_size` and `elements` is derived from the config's
    /// `torch_dtype` (0 when unknown); the shard headers were not read.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub index_only: bool,
    /// Tensors named in the index's `weight_map` (index only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_tensors: Option<u64>,
}

impl Checkpoint {
    /// Whether any tensor is stored in an integer or 8-bit float type (a
    /// pre-quantized checkpoint: GPTQ/AWQ packs, bnb, FP8): its weights take
    /// the stored bytes rather than elements × precision.
    pub fn prequantized(&self) -> bool {
        self.bytes_by_dtype
            .keys()
            .any(|d| !matches!(d.as_str(), "F16" | "BF16" | "F32" | "F64" | "BOOL"))
    }

    /// Adds another shard.
    pub fn merge(&mut self, other: Checkpoint) -> Result<(), HeaderError> {
        let overflow = || HeaderError("the shards' sizes add up beyond 2^64".into());
        self.elements = self
            .elements
            .checked_add(other.elements)
            .ok_or_else(overflow)?;
        self.bytes = self.bytes.checked_add(other.bytes).ok_or_else(overflow)?;
        for (k, v) in other.bytes_by_dtype {
            let by = self.bytes_by_dtype.entry(k).or_default();
            *by = by.checked_add(v).ok_or_else(overflow)?;
        }
        Ok(())
    }
}

/// What `model.safetensors.index.json` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    /// `metadata.total_size`: stored bytes of every tensor.
    pub total_size: u64,
    /// `weight_map` keys: tensor names.
    pub tensors: Vec<String>,
    /// Distinct shard file names the `weight_map` points to, sorted.
    pub shards: Vec<String>,
}

/// Parses a safetensors index. Errors say what is wrong, not where the file is
/// (the binary names it).
pub fn parse_index(json: &[u8]) -> Result<Index, IndexError> {
    let bad = |what: &str| IndexError(what.to_string());
    let v: Value = serde_json::from_slice(json).map_err(|e| bad(&e.to_string()))?;
    let total_size = v
        .get("metadata")
        .and_then(|m| m.get("total_size"))
        .and_then(|t| {
            // Some writers store it as a float (`1.5e10`) or a string.
            t.as_u64()
                .or_else(|| {
                    t.as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                        .map(|f| f as u64)
                })
                .or_else(|| t.as_str().and_then(|s| s.parse().ok()))
        })
        .filter(|n| *n > 0)
        .ok_or_else(|| bad("no positive metadata.total_size"))?;
    let map = v
        .get("weight_map")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("no weight_map object"))?;
    let mut shards = std::collections::BTreeSet::new();
    for (name, file) in map {
        let file = file
            .as_str()
            .filter(|f| !f.is_empty())
            .ok_or_else(|| bad(&format!("weight_map[{name:?}] is not a file name")))?;
        shards.insert(file.to_string());
    }
    Ok(Index {
        total_size,
        tensors: map.keys().cloned().collect(),
        shards: shards.into_iter().collect(),
    })
}

impl Checkpoint {
    /// A checkpoint known only from its index: `total_size` stored bytes in
    /// the config's `torch_dtype` (`bfloat16`/`float16`/`float32`), which gives
    /// the element count. A config with a `quantization_config` or without a
    /// float dtype keeps the stored bytes as they are (`unknown`).
    pub fn from_index(index: &Index, torch_dtype: Option<&str>, quantized: bool) -> Checkpoint {
        let dtype = match torch_dtype {
            _ if quantized => None,
            Some("bfloat16") => Some(("BF16", 2)),
            Some("float16") => Some(("F16", 2)),
            Some("float32") => Some(("F32", 4)),
            _ => None,
        };
        let (name, elements) = match dtype {
            Some((name, size)) => (name, index.total_size / size),
            None => ("unknown", 0),
        };
        Checkpoint {
            elements,
            bytes: index.total_size,
            bytes_by_dtype: BTreeMap::from([(name.to_string(), index.total_size)]),
            index_only: true,
            index_tensors: Some(index.tensors.len() as u64),
        }
    }
}

/// A `model.safetensors.index.json` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed safetensors index: {0}")]
pub struct IndexError(pub String);

/// A header that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed safetensors header: {0}")]
pub struct HeaderError(pub String);

/// Reads the header length from the first 8 bytes.
pub fn header_len(prefix: [u8; 8]) -> Result<u64, HeaderError> {
    let n = u64::from_le_bytes(prefix);
    if n == 0 {
        return Err(HeaderError("header length 0".into()));
    }
    if n > MAX_HEADER {
        return Err(HeaderError(format!(
            "the file claims a {n}-byte header, over the {} limit (safetensors headers are small: about 100 bytes per tensor)",
            oomkit_core::Bytes(MAX_HEADER)
        )));
    }
    Ok(n)
}

/// Parses the JSON header of one file.
pub fn parse_header(json: &[u8]) -> Result<Checkpoint, HeaderError> {
    let v: Value = serde_json::from_slice(json).map_err(|e| HeaderError(e.to_string()))?;
    let obj = v
        .as_object()
        .ok_or_else(|| HeaderError("not a JSON object".into()))?;
    let mut c = Checkpoint::default();
    for (name, t) in obj {
        if name == "__metadata__" {
            continue;
        }
        let bad = |what: &str| HeaderError(format!("tensor {name:?}: {what}"));
        let dtype = t
            .get("dtype")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no dtype"))?;
        let shape = t
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no shape"))?;
        let mut elems: u64 = 1;
        for d in shape {
            let d = d
                .as_u64()
                .ok_or_else(|| bad("shape is not unsigned integers"))?;
            elems = elems.checked_mul(d).ok_or_else(|| bad("shape overflows"))?;
        }
        let off = t
            .get("data_offsets")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no data_offsets"))?;
        let (Some(a), Some(b)) = (
            off.first().and_then(Value::as_u64),
            off.get(1).and_then(Value::as_u64),
        ) else {
            return Err(bad("data_offsets are not two integers"));
        };
        if b < a {
            return Err(bad("data_offsets end before they begin"));
        }
        let mut one = Checkpoint {
            elements: elems,
            bytes: b - a,
            ..Checkpoint::default()
        };
        one.bytes_by_dtype.insert(dtype.to_string(), b - a);
        c.merge(one).map_err(|_| bad("sizes add up beyond 2^64"))?;
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_tensors() {
        let h = br#"{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[8],"data_offsets":[64,96]}}"#;
        let c = parse_header(h).expect("header");
        assert_eq!(c.elements, 40);
        assert_eq!(c.bytes, 96);
        assert!(!c.prequantized());
    }

    #[test]
    fn index_gives_total_size() {
        let j = br#"{"metadata":{"total_size":32},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}}"#;
        let i = parse_index(j).expect("index");
        assert_eq!(i.total_size, 32);
        assert_eq!(i.tensors.len(), 3);
        assert_eq!(i.shards.len(), 2);
        let c = Checkpoint::from_index(&i, Some("bfloat16"), false);
        assert_eq!((c.bytes, c.elements), (32, 16));
        assert!(!c.prequantized() && c.index_only);
        let q = Checkpoint::from_index(&i, Some("bfloat16"), true);
        assert!(q.prequantized());
        assert_eq!(q.bytes, 32);
    }

    #[test]
    fn rejects_bad_indexes() {
        for bad in [
            &b"{"[..],
            b"[]",
            br#"{"weight_map":{"a":"x.safetensors"}}"#,
            br#"{"metadata":{"total_size":0},"weight_map":{"a":"x.safetensors"}}"#,
            br#"{"metadata":{"total_size":-5},"weight_map":{"a":"x.safetensors"}}"#,
            br#"{"metadata":{"total_size":10},"weight_map":{}}"#,
            br#"{"metadata":{"total_size":10},"weight_map":{"a":3}}"#,
        ] {
            assert!(
                parse_index(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_header(b"{").is_err());
        assert!(
            parse_header(br#"{"a":{"dtype":"BF16","shape":[2],"data_offsets":[8,0]}}"#).is_err()
        );
        assert!(header_len([0; 8]).is_err());
        assert!(header_len(u64::MAX.to_le_bytes()).is_err());
    }
}
