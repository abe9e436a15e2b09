//! Exact tensor sizes from `*.safetensors` headers (never the data): the
//! format is an 8-byte little-endian header length, then a JSON object
//! `{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": …}`
//! (huggingface/safetensors README). The binary reads the header bytes; this
//! module only parses them.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// The largest header we accept (the format caps it at 100 MB).
pub const MAX_HEADER: u64 = 100_000_000;

/// What the headers say about the stored tensors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// Elements over all tensors.
    pub elements: u64,
    /// Stored bytes over all tensors.
    pub bytes: u64,
    /// Stored bytes per safetensors dtype (`BF16`, `F8_E4M3`, `I32`, …).
    pub bytes_by_dtype: BTreeMap<String, u64>,
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
    pub fn merge(&mut self, other: Checkpoint) {
        self.elements += other.elements;
        self.bytes += other.bytes;
        for (k, v) in other.bytes_by_dtype {
            *self.bytes_by_dtype.entry(k).or_default() += v;
        }
    }
}

/// A header that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed safetensors header: {0}")]
pub struct HeaderError(pub String);

/// Reads the header length from the first 8 bytes.
pub fn header_len(prefix: [u8; 8]) -> Result<u64, HeaderError> {
    let n = u64::from_le_bytes(prefix);
    if n == 0 || n > MAX_HEADER {
        return Err(HeaderError(format!("header length {n} is out of range")));
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
        c.elements += elems;
        c.bytes += b - a;
        *c.bytes_by_dtype.entry(dtype.to_string()).or_default() += b - a;
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
    fn rejects_garbage() {
        assert!(parse_header(b"{").is_err());
        assert!(
            parse_header(br#"{"a":{"dtype":"BF16","shape":[2],"data_offsets":[8,0]}}"#).is_err()
        );
        assert!(header_len([0; 8]).is_err());
        assert!(header_len(u64::MAX.to_le_bytes()).is_err());
    }
}
