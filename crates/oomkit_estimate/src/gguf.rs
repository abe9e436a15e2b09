//! GGUF headers (llama.cpp `gguf.h`/`ggml.c`, GGUF v2/v3): the metadata that
//! gives the architecture and the tensor infos that give exact sizes and
//! quantization types. The binary hands over a prefix of the file; the data
//! section is never read.

use std::collections::BTreeMap;

use crate::checkpoint::Checkpoint;
use crate::model::{ConfigError, ModelConfig};

/// Why a GGUF header cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    /// The prefix ends inside the header: read more.
    #[error("GGUF header is longer than the bytes read")]
    NeedMore,
    /// Not a GGUF file or a corrupt header.
    #[error("malformed GGUF header: {0}")]
    Malformed(String),
    /// The metadata lacks what the estimate needs.
    #[error("GGUF metadata: {0}")]
    Config(#[from] ConfigError),
}

/// A metadata value (only what the estimate reads is kept).
#[derive(Debug, Clone, PartialEq)]
enum Val {
    Int(u64),
    Str(String),
    /// Array length and, for integer arrays, the largest element.
    Array(u64, Option<u64>),
    Other,
}

/// The most of a GGUF file read for its header: real headers are a few
/// MiB (the tokenizer's vocabulary and merges are the bulk; Llama-3's are
/// under 10 MiB); a file whose header claims more is refused.
pub const MAX_HEADER: u64 = 64 << 20;

/// Arrays nested deeper than this are refused (real files nest at most 2:
/// an array of strings or numbers); the parser recurses once per level.
pub const MAX_DEPTH: u32 = 8;

/// Bytes per tensor info at least: name length, dims count, one dim, type, offset.
const MIN_TENSOR_INFO: u64 = 8 + 4 + 8 + 4 + 8;
/// Bytes per key-value pair at least: key length, type, one byte of value.
const MIN_KV: u64 = 8 + 4 + 1;

fn malformed(what: String) -> GgufError {
    GgufError::Malformed(what)
}

/// The fewest bytes one value of type `t` takes (for checking a claimed
/// array length against the header limit before reading it).
fn min_size(t: u32) -> u64 {
    match t {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        9 => 12,
        _ => 8,
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], GgufError> {
        let end = self.at.checked_add(n).ok_or(GgufError::NeedMore)?;
        let s = self.b.get(self.at..end).ok_or(GgufError::NeedMore)?;
        self.at = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], GgufError> {
        self.take(N)?.try_into().map_err(|_| GgufError::NeedMore)
    }
    fn u32(&mut self) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn string(&mut self) -> Result<String, GgufError> {
        let n = self.u64()?;
        if n > MAX_HEADER {
            return Err(malformed(format!(
                "string length {n} is beyond the {} header limit (GGUF headers are a few MiB)",
                oomkit_core::Bytes(MAX_HEADER)
            )));
        }
        let n = usize::try_from(n).map_err(|_| GgufError::NeedMore)?;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
    /// Reads one value of GGUF type `t`, `depth` arrays deep.
    fn value(&mut self, t: u32, depth: u32) -> Result<Val, GgufError> {
        Ok(match t {
            0 | 1 | 7 => Val::Int(u64::from(u8::from_le_bytes(self.array()?))),
            2 | 3 => Val::Int(u64::from(u16::from_le_bytes(self.array()?))),
            4 | 5 => Val::Int(u64::from(self.u32()?)),
            6 => {
                self.take(4)?;
                Val::Other
            }
            8 => Val::Str(self.string()?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(malformed(format!(
                        "arrays nested more than {MAX_DEPTH} deep"
                    )));
                }
                let et = self.u32()?;
                let n = self.u64()?;
                if n.saturating_mul(min_size(et)) > MAX_HEADER {
                    return Err(malformed(format!(
                        "an array of {n} elements is larger than the {} header limit",
                        oomkit_core::Bytes(MAX_HEADER)
                    )));
                }
                let mut max = None;
                for _ in 0..n {
                    if let Val::Int(v) = self.value(et, depth + 1)? {
                        max = Some(max.map_or(v, |m: u64| m.max(v)));
                    }
                }
                Val::Array(n, max)
            }
            10 | 11 => Val::Int(self.u64()?),
            12 => {
                self.take(8)?;
                Val::Other
            }
            _ => return Err(GgufError::Malformed(format!("unknown value type {t}"))),
        })
    }
}

/// (block bytes, elements per block) of a ggml tensor type (`ggml.c`
/// `type_traits`), or `None` for an unknown type.
pub fn ggml_type_size(t: u32) -> Option<(u64, u64, &'static str)> {
    Some(match t {
        0 => (4, 1, "F32"),
        1 => (2, 1, "F16"),
        2 => (18, 32, "Q4_0"),
        3 => (20, 32, "Q4_1"),
        6 => (22, 32, "Q5_0"),
        7 => (24, 32, "Q5_1"),
        8 => (34, 32, "Q8_0"),
        9 => (36, 32, "Q8_1"),
        10 => (84, 256, "Q2_K"),
        11 => (110, 256, "Q3_K"),
        12 => (144, 256, "Q4_K"),
        13 => (176, 256, "Q5_K"),
        14 => (210, 256, "Q6_K"),
        15 => (292, 256, "Q8_K"),
        16 => (66, 256, "IQ2_XXS"),
        17 => (74, 256, "IQ2_XS"),
        18 => (98, 256, "IQ3_XXS"),
        19 => (50, 256, "IQ1_S"),
        20 => (18, 32, "IQ4_NL"),
        21 => (110, 256, "IQ3_S"),
        22 => (82, 256, "IQ2_S"),
        23 => (136, 256, "IQ4_XS"),
        24 => (1, 1, "I8"),
        25 => (2, 1, "I16"),
        26 => (4, 1, "I32"),
        27 => (8, 1, "I64"),
        28 => (8, 1, "F64"),
        29 => (56, 256, "IQ1_M"),
        30 => (2, 1, "BF16"),
        34 => (54, 256, "TQ1_0"),
        35 => (66, 256, "TQ2_0"),
        39 => (17, 32, "MXFP4"),
        _ => return None,
    })
}

/// One tensor of a GGUF file: its name, ggml type and stored size.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GgufTensor {
    /// The tensor's name (`blk.3.attn_v.weight`, `token_embd.weight`, …).
    pub name: String,
    /// The ggml type's name (`Q4_K`, `F32`, …).
    pub ggml_type: &'static str,
    /// Elements.
    pub elements: u64,
    /// Bytes in the file (whole quantization blocks).
    pub bytes: u64,
}

/// A parsed GGUF header: the architecture, every tensor, and the metadata
/// llama.cpp sizes its context from.
#[derive(Clone, Debug)]
pub struct GgufFile {
    /// The architecture with the exact sizes attached.
    pub model: ModelConfig,
    /// Every tensor, in file order.
    pub tensors: Vec<GgufTensor>,
    /// `{arch}.context_length`: llama.cpp's `n_ctx_train`.
    pub context_length: Option<u64>,
    /// `{arch}.attention.value_length` (the V head size when it differs from K).
    pub value_length: Option<u64>,
}

/// Parses a GGUF prefix into an architecture (from the metadata) with the
/// exact tensor sizes attached.
pub fn parse(bytes: &[u8], id: &str) -> Result<ModelConfig, GgufError> {
    parse_file(bytes, id).map(|f| f.model)
}

/// Parses a GGUF prefix into the architecture, the tensor list and the
/// context metadata.
pub fn parse_file(bytes: &[u8], id: &str) -> Result<GgufFile, GgufError> {
    let mut c = Cursor { b: bytes, at: 0 };
    if c.take(4)
        .map_err(|_| GgufError::Malformed("shorter than 4 bytes".into()))?
        != b"GGUF"
    {
        return Err(GgufError::Malformed("no GGUF magic".into()));
    }
    let version = c.u32()?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::Malformed(format!(
            "unsupported version {version}"
        )));
    }
    let n_tensors = c.u64()?;
    let n_kv = c.u64()?;
    let least = n_tensors
        .saturating_mul(MIN_TENSOR_INFO)
        .saturating_add(n_kv.saturating_mul(MIN_KV));
    if least > MAX_HEADER {
        return Err(malformed(format!(
            "the header claims {n_tensors} tensors and {n_kv} key-value pairs, more than fit the {} header limit (GGUF headers are a few MiB)",
            oomkit_core::Bytes(MAX_HEADER)
        )));
    }
    let mut meta: BTreeMap<String, Val> = BTreeMap::new();
    for _ in 0..n_kv {
        let k = c.string()?;
        let t = c.u32()?;
        let v = c.value(t, 0)?;
        meta.insert(k, v);
    }
    let mut ck = Checkpoint::default();
    let mut tensors = Vec::new();
    let mut has_output = false;
    for _ in 0..n_tensors {
        let name = c.string()?;
        has_output |= name == "output.weight";
        let nd = c.u32()?;
        if nd > 8 {
            return Err(GgufError::Malformed(format!(
                "tensor {name:?}: {nd} dimensions"
            )));
        }
        let mut elems: u64 = 1;
        for _ in 0..nd {
            elems = elems
                .checked_mul(c.u64()?)
                .ok_or_else(|| GgufError::Malformed(format!("tensor {name:?}: size overflows")))?;
        }
        let t = c.u32()?;
        let _offset = c.u64()?;
        let (bb, per, tname) = ggml_type_size(t)
            .ok_or_else(|| GgufError::Malformed(format!("tensor {name:?}: unknown type {t}")))?;
        let overflow = || malformed(format!("tensor {name:?}: sizes overflow"));
        let bytes = elems.div_ceil(per).checked_mul(bb).ok_or_else(overflow)?;
        ck.elements = ck.elements.checked_add(elems).ok_or_else(overflow)?;
        ck.bytes = ck.bytes.checked_add(bytes).ok_or_else(overflow)?;
        let by = ck.bytes_by_dtype.entry(tname.to_string()).or_default();
        *by = by.checked_add(bytes).ok_or_else(overflow)?;
        tensors.push(GgufTensor {
            name,
            ggml_type: tname,
            elements: elems,
            bytes,
        });
    }
    let arch = match meta.get("general.architecture") {
        Some(Val::Str(s)) => s.clone(),
        _ => return Err(GgufError::Malformed("no general.architecture".into())),
    };
    let int = |k: &str| match meta.get(&format!("{arch}.{k}")) {
        Some(Val::Int(v)) => Some(*v),
        Some(Val::Array(_, max)) => *max,
        _ => None,
    };
    let vocab = int("vocab_size").or(match meta.get("tokenizer.ggml.tokens") {
        Some(Val::Array(n, _)) => Some(*n),
        _ => None,
    });
    let mut cfg = serde_json::json!({
        "model_type": arch,
        "hidden_size": int("embedding_length"),
        "num_hidden_layers": int("block_count"),
        "num_attention_heads": int("attention.head_count"),
        "num_key_value_heads": int("attention.head_count_kv"),
        "intermediate_size": int("feed_forward_length"),
        "vocab_size": vocab,
        // llama.cpp writes `output.weight` only when the head is not tied.
        "tie_word_embeddings": !has_output,
    });
    let mut set = |k: &str, v: Option<u64>| {
        if let (Some(o), Some(v)) = (cfg.as_object_mut(), v) {
            o.insert(k.into(), v.into());
        }
    };
    if let Some(e) = int("expert_count").filter(|e| *e > 1) {
        set("num_local_experts", Some(e));
        set(
            "num_experts_per_tok",
            Some(int("expert_used_count").unwrap_or(2)),
        );
        set("moe_intermediate_size", int("expert_feed_forward_length"));
    }
    set("head_dim", int("attention.key_length"));
    set("sliding_window", int("attention.sliding_window"));
    let mut model = ModelConfig::from_hf_json(id, &cfg.to_string())?;
    model.checkpoint = Some(ck);
    Ok(GgufFile {
        model,
        tensors,
        context_length: int("context_length"),
        value_length: int("attention.value_length"),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal GGUF v3 header with a llama architecture and two tensors.
    pub fn sample() -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(2u64.to_le_bytes()); // tensors
        let kvs: &[(&str, u32)] = &[
            ("llama.block_count", 2),
            ("llama.embedding_length", 64),
            ("llama.attention.head_count", 4),
            ("llama.attention.head_count_kv", 2),
            ("llama.feed_forward_length", 128),
            ("llama.vocab_size", 100),
        ];
        b.extend((kvs.len() as u64 + 1).to_le_bytes());
        let s = |b: &mut Vec<u8>, x: &str| {
            b.extend((x.len() as u64).to_le_bytes());
            b.extend(x.as_bytes());
        };
        s(&mut b, "general.architecture");
        b.extend(8u32.to_le_bytes());
        s(&mut b, "llama");
        for (k, v) in kvs {
            s(&mut b, k);
            b.extend(4u32.to_le_bytes());
            b.extend(v.to_le_bytes());
        }
        // token_embd: 64 x 100 Q8_0; blk.0.ffn: 64 x 128 Q4_K (2 blocks of 256 -> 32 x 256)
        s(&mut b, "token_embd.weight");
        b.extend(2u32.to_le_bytes());
        b.extend(64u64.to_le_bytes());
        b.extend(100u64.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        s(&mut b, "blk.0.ffn_up.weight");
        b.extend(2u32.to_le_bytes());
        b.extend(256u64.to_le_bytes());
        b.extend(32u64.to_le_bytes());
        b.extend(12u32.to_le_bytes());
        b.extend(6400u64.to_le_bytes());
        b
    }

    #[test]
    fn reads_architecture_and_exact_sizes() {
        let m = parse(&sample(), "x.gguf").expect("parse");
        assert_eq!((m.layers, m.hidden, m.heads, m.kv_heads), (2, 64, 4, 2));
        let ck = m.checkpoint.expect("sizes");
        assert_eq!(ck.bytes, 6400 / 32 * 34 + 32 * 144);
        assert!(ck.prequantized());
        let f = parse_file(&sample(), "x.gguf").expect("parse");
        let names: Vec<(&str, &str, u64)> = f
            .tensors
            .iter()
            .map(|t| (t.name.as_str(), t.ggml_type, t.bytes))
            .collect();
        assert_eq!(
            names,
            [
                ("token_embd.weight", "Q8_0", 6400 / 32 * 34),
                ("blk.0.ffn_up.weight", "Q4_K", 32 * 144)
            ]
        );
        assert_eq!((f.context_length, f.value_length), (None, None));
    }

    #[test]
    fn truncated_and_garbage() {
        let b = sample();
        assert_eq!(parse(&b[..b.len() - 3], "x"), Err(GgufError::NeedMore));
        assert!(matches!(
            parse(b"GGML....", "x"),
            Err(GgufError::Malformed(_))
        ));
    }
}
