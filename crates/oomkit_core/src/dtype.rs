//! Element types and their sizes, counted in bits so that 4-bit types are exact.
//!
//! Names are accepted as TensorFlow (`float`, `DT_HALF`, `bfloat16`), PyTorch
//! (`torch.float16`, `bf16`) and NumPy/JAX (`f32`, `float64`) print them, so
//! `OOM when allocating tensor with shape[…] and type float` can be turned
//! into bytes.

use serde::{Deserialize, Serialize};

/// A tensor element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum DType {
    F64,
    F32,
    Tf32,
    F16,
    Bf16,
    Fp8,
    I64,
    I32,
    I16,
    I8,
    U8,
    Bool,
    C64,
    C128,
    Int4,
    Nf4,
}

impl DType {
    /// Size of one element in bits.
    pub const fn bits(self) -> u64 {
        match self {
            DType::F64 | DType::I64 | DType::C64 => 64,
            DType::C128 => 128,
            DType::F32 | DType::Tf32 | DType::I32 => 32,
            DType::F16 | DType::Bf16 | DType::I16 => 16,
            DType::Fp8 | DType::I8 | DType::U8 | DType::Bool => 8,
            DType::Int4 | DType::Nf4 => 4,
        }
    }

    /// Bytes taken by `elements` elements, rounded up to a whole byte.
    pub const fn bytes_for(self, elements: u64) -> u64 {
        (elements.saturating_mul(self.bits())).div_ceil(8)
    }

    /// The canonical short name (`f32`, `bf16`, …).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::Tf32 => "tf32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::Fp8 => "fp8",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::Bool => "bool",
            DType::C64 => "c64",
            DType::C128 => "c128",
            DType::Int4 => "int4",
            DType::Nf4 => "nf4",
        }
    }

    /// Looks a type up by any of the names frameworks print, case-insensitively.
    pub fn from_name(name: &str) -> Option<DType> {
        let n = name.trim().to_ascii_lowercase();
        let n = n
            .strip_prefix("torch.")
            .or_else(|| n.strip_prefix("dt_"))
            .or_else(|| n.strip_prefix("np."))
            .or_else(|| n.strip_prefix("jnp."))
            .unwrap_or(&n);
        Some(match n {
            "float" | "float32" | "f32" | "fp32" | "single" => DType::F32,
            "double" | "float64" | "f64" | "fp64" => DType::F64,
            "tf32" => DType::Tf32,
            "half" | "float16" | "f16" | "fp16" => DType::F16,
            "bfloat16" | "bf16" => DType::Bf16,
            "float8" | "fp8" | "float8_e4m3fn" | "float8_e5m2" | "f8e4m3fn" | "f8e5m2" => {
                DType::Fp8
            }
            "int64" | "long" | "i64" | "s64" | "uint64" | "u64" => DType::I64,
            "int32" | "int" | "i32" | "s32" | "uint32" | "u32" | "qint32" => DType::I32,
            "int16" | "short" | "i16" | "s16" | "uint16" | "u16" | "qint16" | "quint16" => {
                DType::I16
            }
            "int8" | "i8" | "s8" | "qint8" | "char" => DType::I8,
            "uint8" | "u8" | "quint8" | "byte" => DType::U8,
            "bool" | "pred" => DType::Bool,
            "complex64" | "c64" => DType::C64,
            "complex128" | "c128" => DType::C128,
            "int4" | "s4" | "u4" | "uint4" => DType::Int4,
            "nf4" => DType::Nf4,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_every_framework_resolve() {
        assert_eq!(DType::from_name("float"), Some(DType::F32));
        assert_eq!(DType::from_name("DT_HALF"), Some(DType::F16));
        assert_eq!(DType::from_name("torch.bfloat16"), Some(DType::Bf16));
        assert_eq!(DType::from_name("f32"), Some(DType::F32));
        assert_eq!(DType::from_name("pred"), Some(DType::Bool));
        assert_eq!(DType::from_name("nonsense"), None);
    }

    #[test]
    fn four_bit_sizes_are_exact() {
        assert_eq!(DType::Int4.bytes_for(3), 2);
        assert_eq!(DType::Nf4.bytes_for(4096), 2048);
        assert_eq!(DType::F32.bytes_for(128 * 128 * 109 * 109), 778_633_216);
    }
}
