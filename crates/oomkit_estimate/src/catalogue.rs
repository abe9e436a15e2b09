//! The embedded model catalogue: published `config.json` files copied from
//! `shared/reference/model-configs/` (see its README for each file's source
//! and confidence) into `models/`, compiled in with `include_str!`. No network.

use crate::model::{ConfigError, ModelConfig};

/// (Hugging Face repo id, config.json text).
pub static MODELS: &[(&str, &str)] = &[
    (
        "EleutherAI/gpt-neox-20b",
        include_str!("../models/EleutherAI__gpt-neox-20b.json"),
    ),
    (
        "FacebookAI/roberta-large",
        include_str!("../models/FacebookAI__roberta-large.json"),
    ),
    ("Qwen/Qwen-7B", include_str!("../models/Qwen__Qwen-7B.json")),
    (
        "Qwen/Qwen2.5-0.5B",
        include_str!("../models/Qwen__Qwen2.5-0.5B.json"),
    ),
    (
        "Qwen/Qwen2.5-1.5B",
        include_str!("../models/Qwen__Qwen2.5-1.5B.json"),
    ),
    (
        "Qwen/Qwen2.5-14B",
        include_str!("../models/Qwen__Qwen2.5-14B.json"),
    ),
    (
        "Qwen/Qwen2.5-32B",
        include_str!("../models/Qwen__Qwen2.5-32B.json"),
    ),
    (
        "Qwen/Qwen2.5-3B",
        include_str!("../models/Qwen__Qwen2.5-3B.json"),
    ),
    (
        "Qwen/Qwen2.5-72B",
        include_str!("../models/Qwen__Qwen2.5-72B.json"),
    ),
    (
        "Qwen/Qwen2.5-7B",
        include_str!("../models/Qwen__Qwen2.5-7B.json"),
    ),
    (
        "Qwen/Qwen3-0.6B",
        include_str!("../models/Qwen__Qwen3-0.6B.json"),
    ),
    (
        "Qwen/Qwen3-1.7B",
        include_str!("../models/Qwen__Qwen3-1.7B.json"),
    ),
    (
        "Qwen/Qwen3-14B",
        include_str!("../models/Qwen__Qwen3-14B.json"),
    ),
    (
        "Qwen/Qwen3-30B-A3B",
        include_str!("../models/Qwen__Qwen3-30B-A3B.json"),
    ),
    (
        "Qwen/Qwen3-32B",
        include_str!("../models/Qwen__Qwen3-32B.json"),
    ),
    (
        "Qwen/Qwen3-4B",
        include_str!("../models/Qwen__Qwen3-4B.json"),
    ),
    (
        "Qwen/Qwen3-8B",
        include_str!("../models/Qwen__Qwen3-8B.json"),
    ),
    (
        "codellama/CodeLlama-34b-hf",
        include_str!("../models/codellama__CodeLlama-34b-hf.json"),
    ),
    (
        "codellama/CodeLlama-7b-hf",
        include_str!("../models/codellama__CodeLlama-7b-hf.json"),
    ),
    (
        "deepseek-ai/DeepSeek-V3",
        include_str!("../models/deepseek-ai__DeepSeek-V3.json"),
    ),
    (
        "google-bert/bert-base-uncased",
        include_str!("../models/google-bert__bert-base-uncased.json"),
    ),
    (
        "google-bert/bert-large-uncased",
        include_str!("../models/google-bert__bert-large-uncased.json"),
    ),
    (
        "google/gemma-2-9b",
        include_str!("../models/google__gemma-2-9b.json"),
    ),
    (
        "google/gemma-2-27b",
        include_str!("../models/google__gemma-2-27b.json"),
    ),
    (
        "google/gemma-3-27b-it",
        include_str!("../models/google__gemma-3-27b-it.json"),
    ),
    (
        "meta-llama/Llama-2-13b-hf",
        include_str!("../models/meta-llama__Llama-2-13b-hf.json"),
    ),
    (
        "meta-llama/Llama-2-70b-hf",
        include_str!("../models/meta-llama__Llama-2-70b-hf.json"),
    ),
    (
        "meta-llama/Llama-2-7b-hf",
        include_str!("../models/meta-llama__Llama-2-7b-hf.json"),
    ),
    (
        "meta-llama/Llama-3.1-405B",
        include_str!("../models/meta-llama__Llama-3.1-405B.json"),
    ),
    (
        "meta-llama/Llama-3.1-70B",
        include_str!("../models/meta-llama__Llama-3.1-70B.json"),
    ),
    (
        "meta-llama/Llama-3.1-8B",
        include_str!("../models/meta-llama__Llama-3.1-8B.json"),
    ),
    (
        "meta-llama/Llama-3.2-1B",
        include_str!("../models/meta-llama__Llama-3.2-1B.json"),
    ),
    (
        "meta-llama/Llama-3.2-3B",
        include_str!("../models/meta-llama__Llama-3.2-3B.json"),
    ),
    (
        "meta-llama/Llama-3.3-70B-Instruct",
        include_str!("../models/meta-llama__Llama-3.3-70B-Instruct.json"),
    ),
    (
        "meta-llama/Meta-Llama-3-8B",
        include_str!("../models/meta-llama__Meta-Llama-3-8B.json"),
    ),
    (
        "microsoft/Phi-3-mini-4k-instruct",
        include_str!("../models/microsoft__Phi-3-mini-4k-instruct.json"),
    ),
    (
        "microsoft/phi-1_5",
        include_str!("../models/microsoft__phi-1_5.json"),
    ),
    (
        "microsoft/phi-2",
        include_str!("../models/microsoft__phi-2.json"),
    ),
    (
        "microsoft/phi-4",
        include_str!("../models/microsoft__phi-4.json"),
    ),
    (
        "mistralai/Mistral-7B-v0.1",
        include_str!("../models/mistralai__Mistral-7B-v0.1.json"),
    ),
    (
        "mistralai/Mixtral-8x7B-v0.1",
        include_str!("../models/mistralai__Mixtral-8x7B-v0.1.json"),
    ),
    (
        "openai-community/gpt2-xl",
        include_str!("../models/openai-community__gpt2-xl.json"),
    ),
    (
        "openai-community/gpt2",
        include_str!("../models/openai-community__gpt2.json"),
    ),
    (
        "openai/gpt-oss-120b",
        include_str!("../models/openai__gpt-oss-120b.json"),
    ),
    (
        "openai/gpt-oss-20b",
        include_str!("../models/openai__gpt-oss-20b.json"),
    ),
    (
        "stabilityai/stablelm-base-alpha-3b",
        include_str!("../models/stabilityai__stablelm-base-alpha-3b.json"),
    ),
    (
        "tiiuae/falcon-40b",
        include_str!("../models/tiiuae__falcon-40b.json"),
    ),
    (
        "tiiuae/falcon-7b",
        include_str!("../models/tiiuae__falcon-7b.json"),
    ),
];

/// Configs that are not a published file but were reconstructed from
/// documented values (confidence "reconstructed" in `models/SOURCES.md` and
/// `shared/reference/model-configs/README.md`). `--list-models` and the JSON
/// model object mark them.
pub static RECONSTRUCTED: &[&str] = &[
    "EleutherAI/gpt-neox-20b",
    "FacebookAI/roberta-large",
    "Qwen/Qwen2.5-72B",
    "codellama/CodeLlama-34b-hf",
    "google/gemma-2-27b",
    "google/gemma-3-27b-it",
    "stabilityai/stablelm-base-alpha-3b",
    "tiiuae/falcon-40b",
    "tiiuae/falcon-7b",
];

/// Short names beyond the automatic alias (the part after `/`), for repo ids
/// whose alias is long: (short name, repo id).
pub static SHORT_NAMES: &[(&str, &str)] = &[
    ("gemma-3-27b", "google/gemma-3-27b-it"),
    ("neox-20b", "EleutherAI/gpt-neox-20b"),
    ("stablelm-3b", "stabilityai/stablelm-base-alpha-3b"),
];

/// Whether a catalogue id's config was reconstructed rather than copied.
pub fn reconstructed(id: &str) -> bool {
    RECONSTRUCTED.contains(&id)
}

/// Why a model name did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownModel {
    /// Not in the catalogue.
    #[error("unknown model {input:?}{}", hint(.suggestions))]
    NotFound {
        /// What the user typed.
        input: String,
        /// Close catalogue ids.
        suggestions: Vec<&'static str>,
    },
    /// An embedded config that does not parse (a bug; caught by a test).
    #[error("embedded config for {0} is invalid: {1}")]
    Embedded(&'static str, ConfigError),
}

fn hint(s: &[&'static str]) -> String {
    if s.is_empty() {
        " (see `oomkit estimate --list-models`, or pass a config.json path or --params)".into()
    } else {
        format!(" (did you mean {}?)", s.join(", "))
    }
}

fn norm(s: &str) -> String {
    s.to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
        .collect()
}

/// The short alias of a repo id: its entry in [`SHORT_NAMES`], else the part
/// after `/`, lowercased.
pub fn alias(id: &str) -> String {
    match SHORT_NAMES.iter().find(|(_, full)| *full == id) {
        Some((short, _)) => (*short).to_string(),
        None => id.rsplit('/').next().unwrap_or(id).to_ascii_lowercase(),
    }
}

/// The part after `/`, lowercased (always accepted as a name).
fn base_name(id: &str) -> String {
    id.rsplit('/').next().unwrap_or(id).to_ascii_lowercase()
}

/// Finds a catalogue model by repo id (case-insensitive) or alias (the name
/// after the `/`). `-Instruct`/`-it`/`-chat` variants share their base
/// model's architecture and resolve to it.
pub fn find(name: &str) -> Result<ModelConfig, UnknownModel> {
    let want = norm(name.trim());
    let stripped: Vec<String> = ["instruct", "it", "chat"]
        .iter()
        .filter_map(|s| want.strip_suffix(s).map(str::to_string))
        .collect();
    for candidate in std::iter::once(&want).chain(stripped.iter()) {
        for (id, text) in MODELS {
            if norm(id) == *candidate
                || norm(&alias(id)) == *candidate
                || norm(&base_name(id)) == *candidate
            {
                return ModelConfig::from_hf_json(name.trim(), text)
                    .map(|mut c| {
                        c.reconstructed = reconstructed(id);
                        c.id = if candidate == &want {
                            (*id).to_string()
                        } else {
                            name.trim().to_string()
                        };
                        c
                    })
                    .map_err(|e| UnknownModel::Embedded(id, e));
            }
        }
    }
    Err(UnknownModel::NotFound {
        input: name.to_string(),
        suggestions: suggest(name),
    })
}

/// Catalogue ids (text and image models) close to `name`: those whose alias
/// contains what was typed (`flux` → FLUX.1-dev, `llama-3.1` → the three
/// Llama 3.1 models), else the nearest aliases by edit distance.
fn suggest(name: &str) -> Vec<&'static str> {
    let key = norm(&alias(name.trim()));
    let names = MODELS.iter().map(|(id, _)| (*id, norm(&alias(id)))).chain(
        crate::image::MODELS
            .iter()
            .map(|(id, short, _)| (*id, norm(short))),
    );
    let mut scored: Vec<(usize, &'static str)> = names
        .map(|(id, a)| {
            let d = if key.len() >= 3 && a.contains(&key) {
                0
            } else {
                strsim::levenshtein(&a, &key).max(1)
            };
            (d, id)
        })
        .collect();
    scored.sort();
    let best = scored.first().map_or(usize::MAX, |s| s.0);
    scored
        .into_iter()
        .filter(|(d, _)| *d <= best.max(1) && *d <= key.len() / 2 + 1)
        .map(|(_, id)| id)
        .take(3)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_config_parses() {
        for (id, text) in MODELS {
            let c = ModelConfig::from_hf_json(id, text).expect(id);
            assert!(c.params() > 1_000_000, "{id}");
        }
    }

    #[test]
    fn reconstructed_and_short_names_are_catalogue_ids() {
        for id in RECONSTRUCTED
            .iter()
            .chain(SHORT_NAMES.iter().map(|(_, id)| id))
        {
            assert!(MODELS.iter().any(|(m, _)| m == id), "{id}");
        }
    }

    #[test]
    fn names_resolve_forgivingly() {
        assert_eq!(
            find("META-LLAMA/llama-3.1-8b").expect("id").id,
            "meta-llama/Llama-3.1-8B"
        );
        assert_eq!(
            find("llama-3.1-8b").expect("alias").id,
            "meta-llama/Llama-3.1-8B"
        );
        assert_eq!(find("gpt2").expect("gpt2").id, "openai-community/gpt2");
        assert!(find("Qwen/Qwen2.5-7B-Instruct").is_ok());
        for (short, id) in SHORT_NAMES {
            assert_eq!(find(short).expect(short).id, *id);
            assert_eq!(find(&base_name(id)).expect(id).id, *id);
        }
        assert_eq!(find("falcon-7b").expect("falcon").id, "tiiuae/falcon-7b");
        assert!(find("gemma-2-27b-it").is_ok());
        assert!(find("falcon-40b").expect("40b").reconstructed);
        assert!(!find("gpt2").expect("gpt2").reconstructed);
        let err = find("llama-3.1-8c").expect_err("unknown").to_string();
        assert!(
            err.contains("did you mean meta-llama/Llama-3.1-8B"),
            "{err}"
        );
    }
}
