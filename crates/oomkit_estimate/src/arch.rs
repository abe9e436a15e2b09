//! The architecture a config names (`model_type`), typed: one variant per
//! family the formulas treat specially or the catalogue holds, and
//! [`Arch::Other`] for the rest (read like Llama). Serializes as the
//! `model_type` string it was read from.

use serde::{Serialize, Serializer};

/// The families, each once: variant and `model_type`.
macro_rules! archs {
    ($($name:ident = $key:literal,)*) => {
        /// A `model_type`.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Arch {
            $(
                #[doc = concat!("`", $key, "`.")]
                $name,
            )*
            /// Any other `model_type`, as written.
            Other(String),
        }

        impl Arch {
            /// The architecture `model_type` names.
            pub fn from_model_type(model_type: &str) -> Arch {
                match model_type {
                    $($key => Arch::$name,)*
                    other => Arch::Other(other.to_string()),
                }
            }

            /// The `model_type` string.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Arch::$name => $key,)*
                    Arch::Other(s) => s,
                }
            }
        }
    };
}

archs! {
    Bert = "bert",
    Bloom = "bloom",
    Cohere = "cohere",
    DeepseekV2 = "deepseek_v2",
    DeepseekV3 = "deepseek_v3",
    Falcon = "falcon",
    Gemma = "gemma",
    Gemma2 = "gemma2",
    Gemma3 = "gemma3",
    Gemma3Text = "gemma3_text",
    Gpt2 = "gpt2",
    GptBigcode = "gpt_bigcode",
    GptNeox = "gpt_neox",
    GptOss = "gpt_oss",
    Gptj = "gptj",
    Granite = "granite",
    Llama = "llama",
    Mistral = "mistral",
    Mixtral = "mixtral",
    Mpt = "mpt",
    Olmo = "olmo",
    Olmo2 = "olmo2",
    Opt = "opt",
    Phi = "phi",
    Phi3 = "phi3",
    Qwen = "qwen",
    Qwen2 = "qwen2",
    Qwen2Moe = "qwen2_moe",
    Qwen3 = "qwen3",
    Qwen3Moe = "qwen3_moe",
    Roberta = "roberta",
    Smollm3 = "smollm3",
    Stablelm = "stablelm",
    Starcoder2 = "starcoder2",
}

impl Arch {
    /// Gemma of any generation (`gemma*`): GeGLU, fp32 norm scales.
    pub fn is_gemma(&self) -> bool {
        self.as_str().starts_with("gemma")
    }

    /// Gemma-2 or later variants of it (`gemma2*`).
    pub fn is_gemma2(&self) -> bool {
        self.as_str().starts_with("gemma2")
    }

    /// Gemma-3 and its variants (`gemma3*`): interleaved local layers, two
    /// rope sets.
    pub fn is_gemma3(&self) -> bool {
        self.as_str().starts_with("gemma3")
    }

    /// BERT-style encoders.
    pub fn is_encoder(&self) -> bool {
        matches!(self, Arch::Bert | Arch::Roberta)
    }

    /// ALiBi attention, which transformers computes eagerly.
    pub fn alibi(&self) -> bool {
        matches!(self, Arch::Bloom | Arch::Mpt)
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Arch {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_types_round_trip() {
        for t in [
            "llama",
            "gemma3_text",
            "qwen2_moe",
            "gpt_neox",
            "",
            "gemma3n_text",
        ] {
            assert_eq!(Arch::from_model_type(t).as_str(), t);
        }
        assert_eq!(Arch::from_model_type("mpt"), Arch::Mpt);
        assert!(Arch::from_model_type("gemma3n_text").is_gemma3());
        assert_eq!(
            serde_json::to_string(&Arch::from_model_type("qwen2")).ok(),
            Some("\"qwen2\"".into())
        );
    }
}
