//! The stack a job runs on and what an estimate assumes of it.
//!
//! [`Versions`]: the installed versions of the frameworks, read from a lock
//! file (`uv.lock`, `poetry.lock`, `pylock.toml`), pinned requirements
//! (`requirements*.txt`, `pip freeze` output) or `importlib.metadata` output
//! (`NAME==VERSION` lines): the binary finds and reads the text, this module
//! parses it. Defaults that changed between versions are picked from them
//! ([`transformers_load`]), else from the current release, and the answer says
//! which.
//!
//! [`Assumption`]: one setting the user did not give, the value the estimate
//! used, and where it came from (a framework's default with the file that
//! defines it, or oomkit's own assumption), in words; `oomkit estimate`
//! prints them before the numbers and in its JSON (`assumed`).

use serde::Serialize;

use crate::model::ModelConfig;
use crate::preflight::Source;
use crate::setup::Precision;

/// One package's version and where it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pinned {
    /// The package's normalized name (`transformers`, `trl`).
    pub package: String,
    /// The version as written (`4.57.1`).
    pub version: String,
    /// Where it was read (`uv.lock`, `requirements.txt`, `python`).
    pub from: String,
}

impl Pinned {
    /// The major version number, when the version starts with one.
    pub fn major(&self) -> Option<u64> {
        let digits: String = self
            .version
            .trim()
            .trim_start_matches(['v', '='])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
}

impl std::fmt::Display for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.package, self.version, self.from)
    }
}

/// The versions known of the packages that decide defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Versions {
    /// One entry per package, in the order read.
    pub pins: Vec<Pinned>,
}

/// The packages whose versions are kept (the rest of a lock file is not).
pub const PACKAGES: &[&str] = &[
    "transformers",
    "trl",
    "torch",
    "accelerate",
    "peft",
    "deepspeed",
    "vllm",
    "axolotl",
    "llamafactory",
    "torchtune",
    "bitsandbytes",
];

/// The most pins a text may give (a real lock file has a few hundred packages;
/// only [`PACKAGES`] are kept).
const MAX_LINES: usize = 1_000_000;

/// A package name as PEP 503 normalizes it (`Flash_Attn` → `flash-attn`).
fn normalize(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace(['_', '.'], "-")
}

/// A TOML line `key = "value"`'s value, when the line sets `key`.
fn toml_string<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(key)?.trim_start();
    let rest = rest.strip_prefix('=')?.trim();
    let rest = rest.strip_prefix('"')?;
    rest.split('"').next()
}

impl Versions {
    /// Parses `text`, named `name` (its file name decides the format: a
    /// `.lock` or `.toml` file is a lock file with `[[package]]` tables,
    /// anything else `NAME==VERSION` lines). Packages other than
    /// [`PACKAGES`] are skipped; a later pin of a package replaces an
    /// earlier one. Text with no pin gives no versions (not an error).
    pub fn parse(name: &str, text: &str) -> Versions {
        let lower = name.to_ascii_lowercase();
        let from = std::path::Path::new(name)
            .file_name()
            .map_or_else(|| name.to_string(), |f| f.to_string_lossy().into_owned());
        let mut v = Versions::default();
        if lower.ends_with(".lock") || lower.ends_with(".toml") {
            v.parse_lock(text, &from);
        } else {
            v.parse_pins(text, &from);
        }
        v
    }

    /// `[[package]]` (uv, poetry) or `[[packages]]` (PEP 751) tables with
    /// `name = "…"` and `version = "…"`.
    fn parse_lock(&mut self, text: &str, from: &str) {
        let mut in_table = false;
        let (mut name, mut version): (Option<&str>, Option<&str>) = (None, None);
        for line in text.lines().take(MAX_LINES) {
            let t = line.trim();
            if t.starts_with('[') {
                if let (Some(n), Some(ver)) = (name.take(), version.take()) {
                    self.add(n, ver, from);
                }
                in_table = t == "[[package]]" || t == "[[packages]]";
                continue;
            }
            if !in_table {
                continue;
            }
            if let Some(n) = toml_string(t, "name") {
                name = Some(n);
            } else if let Some(ver) = toml_string(t, "version") {
                version = Some(ver);
            }
        }
        if let (Some(n), Some(ver)) = (name, version) {
            self.add(n, ver, from);
        }
    }

    /// `name==version` lines (requirements files, `pip freeze`), with
    /// extras, markers and comments.
    fn parse_pins(&mut self, text: &str, from: &str) {
        for line in text.lines().take(MAX_LINES) {
            let t = line.split(" #").next().unwrap_or("").trim();
            if t.is_empty() || t.starts_with('#') || t.starts_with('-') {
                continue;
            }
            let t = t.split(';').next().unwrap_or("").trim();
            let Some((n, ver)) = t.split_once("==") else {
                continue;
            };
            let n = n.split('[').next().unwrap_or("");
            let ver = ver.trim_start_matches('=').trim();
            let ver = ver
                .split(|c: char| c.is_whitespace() || c == ',')
                .next()
                .unwrap_or("");
            self.add(n, ver, from);
        }
    }

    fn add(&mut self, name: &str, version: &str, from: &str) {
        let package = normalize(name);
        if version.is_empty() || !PACKAGES.contains(&package.as_str()) {
            return;
        }
        self.pins.retain(|p| p.package != package);
        self.pins.push(Pinned {
            package,
            version: version.to_string(),
            from: from.to_string(),
        });
    }

    /// The pin of `package`, if read.
    pub fn get(&self, package: &str) -> Option<&Pinned> {
        self.pins.iter().find(|p| p.package == package)
    }

    /// Pins from `other` for packages this one does not have.
    pub fn fill_from(&mut self, other: Versions) {
        for p in other.pins {
            if self.get(&p.package).is_none() {
                self.pins.push(p);
            }
        }
    }
}

/// The major version of transformers assumed when no version was read: the
/// current release line.
pub const TRANSFORMERS_CURRENT_MAJOR: u64 = 5;

/// transformers 4.x: `from_pretrained` loads float32 unless `torch_dtype` /
/// `dtype` says otherwise.
pub const TRANSFORMERS_V4_DTYPE: &str = "transformers 4.57 src/transformers/modeling_utils.py";
/// transformers 5.0: `from_pretrained`'s `dtype` defaults to `"auto"`, the
/// config's `dtype` (huggingface/transformers#42805).
pub const TRANSFORMERS_V5_DTYPE: &str =
    "transformers 5.0 src/transformers/modeling_utils.py, huggingface/transformers#42805";
/// `TrainingArguments`: `optim="adamw_torch"` (`adamw_torch_fused` on torch
/// ≥ 2.8), `gradient_checkpointing=False`.
pub const TRANSFORMERS_ARGS: &str = "transformers src/transformers/training_args.py";
/// transformers picks SDPA as `attn_implementation` where PyTorch has it.
pub const TRANSFORMERS_ATTN: &str = "transformers src/transformers/modeling_utils.py";
/// PEFT's `LoraConfig`: `r=8`; `q_proj`/`v_proj` for Llama-style models
/// (`TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING`).
pub const PEFT_LORA: &str = "peft src/peft/tuners/lora/config.py";
/// LitGPT's LoRA fine-tuning script: `lora_r=8`, `lora_query`/`lora_value`
/// on, `lora_dropout=0.05`, `torch.optim.AdamW` (bitsandbytes' paged AdamW
/// under `--quantize`), no activation checkpointing.
pub const LITGPT_LORA: &str = "litgpt litgpt/finetune/lora.py";
/// LitGPT's fine-tuning configs set `precision: bf16-true`.
pub const LITGPT_CONFIGS: &str = "litgpt config_hub/finetune/*/lora.yaml";
/// LitGPT's attention calls torch's `scaled_dot_product_attention`.
pub const LITGPT_MODEL: &str = "litgpt litgpt/model.py";

/// How `from_pretrained` loads weights when no dtype is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// float32 (transformers 4.x).
    Fp32,
    /// The config's own dtype (transformers ≥ 5).
    Config,
}

/// How transformers loads weights without a dtype, by the version read
/// (else the current release), with the pin that decided it.
pub fn transformers_load(v: &Versions) -> (Load, Option<&Pinned>, &'static str) {
    let pin = v.get("transformers");
    let major = pin
        .and_then(Pinned::major)
        .unwrap_or(TRANSFORMERS_CURRENT_MAJOR);
    if major < 5 {
        (Load::Fp32, pin, TRANSFORMERS_V4_DTYPE)
    } else {
        (Load::Config, pin, TRANSFORMERS_V5_DTYPE)
    }
}

/// A mixed-precision autocast the training runs under (`bf16=True`,
/// `fp16=True`, or none), as a launch says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Autocast {
    /// bf16 autocast (`TrainingArguments(bf16=True)`).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Bf16,
    /// fp16 autocast with a gradient scaler (`fp16=True`).
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Fp16,
    /// No autocast.
    #[cfg_attr(feature = "clap", value(help = None::<&str>))]
    Off,
}

/// One setting the user did not give, and what the estimate used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assumption {
    /// The setting, by its `oomkit estimate` flag without `--` (`precision`).
    pub setting: &'static str,
    /// The value used (`bf16`, `1`).
    pub value: String,
    /// Why, in words.
    pub why: String,
    /// Where it came from: a framework's default or oomkit's assumption.
    pub source: Source,
    /// The version read that decided it, when one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<Pinned>,
}

impl std::fmt::Display for Assumption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.setting, self.value, self.why)?;
        match &self.source {
            Source::Assumed => Ok(()),
            s => write!(f, " ({s})"),
        }
    }
}

/// The dtype a `config.json` states (`torch_dtype`, or `dtype` since
/// transformers 4.56), as the weights' precision.
pub fn config_dtype(cfg: &ModelConfig) -> Option<Precision> {
    match cfg.dtype.as_deref()? {
        "bfloat16" => Some(Precision::Bf16),
        "float16" => Some(Precision::Fp16),
        "float32" => Some(Precision::Fp32),
        _ => None,
    }
}

/// The training precision transformers gives where the user named none: the
/// weights as `from_pretrained` loads them (by the version in `v`), under
/// `autocast` (bf16 assumed where fp32 weights meet no stated autocast).
pub fn train_precision(
    cfg: &ModelConfig,
    v: &Versions,
    autocast: Option<Autocast>,
) -> (Precision, Assumption) {
    let (load, pin, cite) = transformers_load(v);
    let version_words = match pin {
        Some(p) => format!("transformers {} ({})", p.version, p.from),
        None => format!(
            "transformers {TRANSFORMERS_CURRENT_MAJOR} (the current release: no version of it was read)"
        ),
    };
    let (weights, weights_words, assumed_dtype) = match load {
        Load::Fp32 => (Precision::Fp32, "float32 weights".to_string(), false),
        Load::Config => match (config_dtype(cfg), cfg.dtype.as_deref()) {
            (Some(p), Some(d)) => (p, format!("the config's dtype ({d})"), false),
            _ => (
                Precision::Bf16,
                "the checkpoint's dtype, which the config does not state (bf16 assumed)"
                    .to_string(),
                true,
            ),
        },
    };
    let (precision, autocast_words) = match (weights, autocast) {
        (Precision::Fp32, Some(Autocast::Off)) => (Precision::Fp32, ", with no autocast"),
        (Precision::Fp32, Some(Autocast::Fp16)) => (
            Precision::MixedFp16,
            " under fp16 autocast: fp32 master weights, gradients and AdamW states, 16-bit activations",
        ),
        (Precision::Fp32, Some(Autocast::Bf16)) => (
            Precision::MixedBf16,
            " under bf16 autocast: fp32 master weights, gradients and AdamW states, 16-bit activations",
        ),
        (Precision::Fp32, None) => (
            Precision::MixedBf16,
            " under bf16 autocast (bf16=True assumed; --precision fp32 without it): fp32 master weights, gradients and AdamW states, 16-bit activations",
        ),
        (Precision::Fp16, _) => (
            weights,
            " and trains in it (weights, gradients, AdamW states); fp32 master weights are --precision mixed-fp16",
        ),
        (_, _) => (
            weights,
            " and trains in it (weights, gradients, AdamW states); fp32 master weights are --precision mixed-bf16",
        ),
    };
    let why = format!("{version_words} loads {weights_words}{autocast_words}");
    let source = if assumed_dtype {
        Source::Assumed
    } else {
        Source::Default { cite }
    };
    (
        precision,
        Assumption {
            setting: "precision",
            value: crate::components::precision_name(precision).to_string(),
            why,
            source,
            version: pin.cloned(),
        },
    )
}

impl crate::Options {
    /// What a text estimate under transformers assumed where these options
    /// say nothing (`setup` is [`crate::Options::setup`]'s), in the order
    /// printed: precision, micro-batch, sequence, method, optimizer,
    /// checkpointing, training loop, attention.
    pub fn assumptions(&self, cfg: &ModelConfig, setup: &crate::Setup) -> Vec<Assumption> {
        use crate::options::{Engine, Workload};
        use crate::setup::{DEFAULT_BATCH, DEFAULT_SEQ, Method};
        let mut out = Vec::new();
        if let Some(entry) = &cfg.resolved_to {
            out.push(Assumption {
                setting: "model",
                value: entry.clone(),
                why: match &cfg.variant_note {
                    Some(note) => format!(
                        "{}'s own config.json was not read (not in the Hugging Face cache; --hub fetches it): RoPE scaling, vocabulary and tied embeddings are the catalogue entry's; {note}",
                        cfg.id
                    ),
                    None => format!(
                        "{}'s own config.json was not read (not in the Hugging Face cache; --hub fetches it): context length, RoPE scaling, vocabulary and tied embeddings are the catalogue entry's",
                        cfg.id
                    ),
                },
                source: Source::Assumed,
                version: None,
            });
        }
        if self.engine() != Engine::Hf || self.task == Workload::Serve || self.params.is_some() {
            return out;
        }
        let train = self.task == Workload::Train;
        let oomkit = |setting, value: String, why: &str| Assumption {
            setting,
            value,
            why: why.to_string(),
            source: Source::Assumed,
            version: None,
        };
        let default = |setting, value: String, why: &str, cite| Assumption {
            setting,
            value,
            why: why.to_string(),
            source: Source::Default { cite },
            version: None,
        };
        let litgpt = setup.stack.litgpt();
        if self.precision.is_none() && litgpt {
            out.push(default(
                "precision",
                crate::components::precision_name(setup.precision).to_string(),
                "LitGPT's bf16-true: weights, adapters and optimizer states in bf16",
                LITGPT_CONFIGS,
            ));
        } else if self.precision.is_none() {
            if train {
                out.push(train_precision(cfg, &self.versions, self.autocast).1);
            } else {
                out.push(oomkit(
                    "precision",
                    crate::components::precision_name(setup.precision).to_string(),
                    "16-bit weights, as from_pretrained(..., dtype=torch.bfloat16) loads them (--precision to change)",
                ));
            }
        }
        if self.batch == DEFAULT_BATCH {
            out.push(oomkit(
                "batch",
                setup.batch.to_string(),
                "oomkit's default (--batch)",
            ));
        }
        if self.seq == DEFAULT_SEQ {
            out.push(oomkit(
                "seq",
                setup.seq.to_string(),
                "oomkit's default (--seq)",
            ));
        }
        if train {
            if self.method.is_none() {
                out.push(oomkit(
                    "method",
                    "full".into(),
                    "every weight trains (--method lora for adapters)",
                ));
            }
            if matches!(setup.method, Method::Lora | Method::Qlora) {
                if self.lora_rank.is_none() && litgpt {
                    out.push(default(
                        "lora-rank",
                        setup.lora_rank.to_string(),
                        "lora_r",
                        LITGPT_LORA,
                    ));
                } else if self.lora_rank.is_none() {
                    out.push(default(
                        "lora-rank",
                        setup.lora_rank.to_string(),
                        "LoraConfig r",
                        PEFT_LORA,
                    ));
                }
                if self.lora_targets.is_none() && litgpt {
                    out.push(default(
                        "lora-targets",
                        "q,v".into(),
                        "lora_query and lora_value on the fused q/k/v linear, lora_dropout 0.05",
                        LITGPT_LORA,
                    ));
                } else if self.lora_targets.is_none() {
                    out.push(default(
                        "lora-targets",
                        "q,v".into(),
                        "PEFT's target modules for Llama-style models (q_proj, v_proj)",
                        PEFT_LORA,
                    ));
                }
            }
            if self.optimizer.is_none() && litgpt {
                out.push(default(
                    "optimizer",
                    "adamw".into(),
                    "torch.optim.AdamW, two states per trained weight",
                    LITGPT_LORA,
                ));
            } else if self.optimizer.is_none() {
                out.push(default(
                    "optimizer",
                    "adamw".into(),
                    "AdamW, two states per trained weight (optim adamw_torch)",
                    TRANSFORMERS_ARGS,
                ));
            }
            if !self.grad_checkpointing && !setup.grad_checkpointing && !litgpt {
                out.push(default(
                    "grad-checkpointing",
                    "off".into(),
                    "gradient_checkpointing=False: every layer's activations kept for backward",
                    TRANSFORMERS_ARGS,
                ));
            }
            if !self.trainer && !litgpt {
                out.push(oomkit(
                    "trainer",
                    "off".into(),
                    "a plain loop keeps the model output through backward (--trainer: the HF Trainer drops it)",
                ));
            }
        }
        if self.attention == crate::setup::Attention::Sdpa && litgpt {
            out.push(default(
                "attention",
                "sdpa".into(),
                "LitGPT's CausalSelfAttention calls torch's scaled_dot_product_attention",
                LITGPT_MODEL,
            ));
        } else if self.attention == crate::setup::Attention::Sdpa {
            out.push(default(
                "attention",
                "sdpa".into(),
                "attn_implementation's default, torch's scaled_dot_product_attention",
                TRANSFORMERS_ATTN,
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_files_and_pins_give_versions() {
        let uv = "version = 1\n[[package]]\nname = \"torch\"\nversion = \"2.8.0\"\nsource = { registry = \"https://pypi.org/simple\" }\n\n[[package]]\nname = \"transformers\"\nversion = \"4.57.1\"\n[package.optional-dependencies]\nx = [\"y\"]\n\n[[package]]\nname = \"numpy\"\nversion = \"2.0\"\n";
        let v = Versions::parse("proj/uv.lock", uv);
        assert_eq!(
            v.get("transformers").map(|p| p.version.as_str()),
            Some("4.57.1")
        );
        assert_eq!(
            v.get("transformers").map(|p| p.from.as_str()),
            Some("uv.lock")
        );
        assert_eq!(v.get("torch").and_then(Pinned::major), Some(2));
        assert!(
            v.get("numpy").is_none(),
            "only the packages that decide defaults"
        );
        let req = "# pins\nTransformers[torch]==5.2.0 ; python_version >= '3.10'  # ok\n-e .\ntrl>=0.20\nPEFT===0.17.1\n";
        let v = Versions::parse("requirements-train.txt", req);
        assert_eq!(
            v.get("transformers").map(|p| p.version.as_str()),
            Some("5.2.0")
        );
        assert!(v.get("trl").is_none(), "a range is not a version");
        assert_eq!(v.get("peft").map(|p| p.version.as_str()), Some("0.17.1"));
        assert!(
            Versions::parse("x.txt", "\u{0}garbage\n==\n")
                .pins
                .is_empty()
        );
    }

    #[test]
    fn the_transformers_version_decides_the_training_precision() {
        let mut cfg = crate::catalogue::find("meta-llama/Llama-3.1-8B").expect("catalogue");
        let v4 = Versions::parse("requirements.txt", "transformers==4.57.1\n");
        let (p, a) = train_precision(&cfg, &v4, None);
        assert_eq!(p, Precision::MixedBf16);
        assert!(
            a.why.contains("float32 weights") && a.why.contains("4.57.1"),
            "{a}"
        );
        assert_eq!(
            train_precision(&cfg, &v4, Some(Autocast::Off)).0,
            Precision::Fp32
        );
        let (p, a) = train_precision(&cfg, &Versions::default(), Some(Autocast::Bf16));
        assert_eq!(
            p,
            Precision::Bf16,
            "transformers 5 keeps the config's bfloat16"
        );
        assert!(a.why.contains("current release"), "{a}");
        cfg.dtype = Some("float32".into());
        assert_eq!(
            train_precision(&cfg, &Versions::default(), Some(Autocast::Bf16)).0,
            Precision::MixedBf16
        );
        cfg.dtype = None;
        let (p, a) = train_precision(&cfg, &Versions::default(), None);
        assert_eq!((p, a.source), (Precision::Bf16, Source::Assumed));
    }

    #[test]
    fn a_configs_own_rope_scaling_and_dtype_are_read() {
        let base = crate::catalogue::MODELS
            .iter()
            .find(|(id, _)| *id == "Qwen/Qwen2.5-7B")
            .map(|(_, t)| *t)
            .expect("catalogue");
        let mut v: serde_json::Value = serde_json::from_str(base).expect("json");
        v["max_position_embeddings"] = 32768.into();
        v["rope_scaling"] = serde_json::json!({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768});
        let cfg = ModelConfig::from_hf_json("ft", &v.to_string()).expect("config");
        assert_eq!(cfg.vllm_context(), Some(131_072));
        assert_eq!(cfg.dtype.as_deref(), Some("bfloat16"));
        // Llama 3's scaling keeps the positions as they are (vLLM).
        v["rope_scaling"] = serde_json::json!({"rope_type": "llama3", "factor": 8.0});
        let cfg = ModelConfig::from_hf_json("ft", &v.to_string()).expect("config");
        assert_eq!(cfg.vllm_context(), Some(32_768));
        v["rope_scaling"] = serde_json::json!({"type": "linear", "factor": 2.0});
        let cfg = ModelConfig::from_hf_json("ft", &v.to_string()).expect("config");
        assert_eq!(cfg.vllm_context(), Some(65_536));
        v["rope_scaling"] = serde_json::json!({"type": "linear", "factor": 1e300});
        let cfg = ModelConfig::from_hf_json("ft", &v.to_string()).expect("config");
        assert_eq!(
            cfg.vllm_context(),
            Some(32_768),
            "an absurd factor is ignored"
        );
    }
}
