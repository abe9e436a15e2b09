//! The remedy catalogue: the seeds' whole fix ladder, written once.
//!
//! Every oomkit command that recommends a change (explain's ranked fixes,
//! estimate's plan, lint's help, snapshot's advice) points at a [`Remedy`] by
//! its `id`. A remedy carries a one-line title, a one-line *why*, and a
//! paste-ready snippet per framework ([`Flavor`]) where one applies.
//!
//! Sources: `shared/seeds/000_*.txt` (Quick Fixes, Advanced Solutions,
//! Framework-Specific Solutions, Quick Reference) and `001_*.txt` (§1–§6), and
//! `shared/reference/oom-messages.md` §2 for the allocator, TF, JAX, vLLM and
//! llama.cpp switches.

use serde::Serialize;

/// The tool or framework a snippet is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flavor {
    /// Plain PyTorch code.
    Pytorch,
    /// Hugging Face transformers (`from_pretrained`, `TrainingArguments`).
    Transformers,
    /// Hugging Face accelerate.
    Accelerate,
    /// DeepSpeed JSON config.
    Deepspeed,
    /// Hugging Face PEFT.
    Peft,
    /// Hugging Face diffusers pipelines.
    Diffusers,
    /// TensorFlow / Keras.
    Tensorflow,
    /// JAX / XLA.
    Jax,
    /// vLLM engine arguments.
    Vllm,
    /// llama.cpp / Ollama command-line flags.
    LlamaCpp,
    /// AUTOMATIC1111 stable-diffusion-webui `COMMANDLINE_ARGS`.
    A1111,
    /// ComfyUI launch flags.
    Comfyui,
    /// Hugging Face text-generation-inference launcher flags.
    Tgi,
    /// ONNX Runtime session options.
    Onnxruntime,
    /// CuPy.
    Cupy,
    /// PaddlePaddle.
    Paddle,
    /// A shell command or environment variable, framework-independent.
    Shell,
}

/// A paste-ready piece of code for one flavor.
#[derive(Debug, Serialize)]
pub struct Snippet {
    /// What it is written for.
    pub flavor: Flavor,
    /// The code, ready to paste.
    pub code: &'static str,
}

/// One fix from the ladder.
#[derive(Debug, Serialize)]
pub struct Remedy {
    /// Stable kebab-case id, e.g. `expandable-segments`.
    pub id: &'static str,
    /// Imperative one-line title.
    pub title: &'static str,
    /// One line: why it lowers memory, and what it costs.
    pub why: &'static str,
    /// Snippets, most common flavor first.
    pub snippets: &'static [Snippet],
}

impl Remedy {
    /// The first snippet whose flavor appears in `preferred` (in that order),
    /// else the first snippet.
    pub fn snippet_for(&self, preferred: &[Flavor]) -> Option<&'static Snippet> {
        preferred
            .iter()
            .find_map(|f| self.snippets.iter().find(|s| s.flavor == *f))
            .or_else(|| self.snippets.first())
    }
}

/// Looks a remedy up by id.
pub fn get(id: &str) -> Option<&'static Remedy> {
    REMEDIES.iter().find(|r| r.id == id)
}

/// Every remedy; ids are unique (checked by a test).
pub static REMEDIES: &[Remedy] = &[
    Remedy {
        id: "expandable-segments",
        title: "Let the caching allocator grow segments instead of splitting them",
        why: "Reserved-but-unallocated memory is stuck in partly used blocks; expandable segments map new pages into one growing segment so that free space can be reused (Linux, CUDA >= 11.4).",
        snippets: &[
            Snippet {
                flavor: Flavor::Shell,
                code: "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            },
            Snippet {
                flavor: Flavor::Pytorch,
                code: "import os\nos.environ[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"expandable_segments:True\"  # before the first CUDA call\nimport torch",
            },
        ],
    },
    Remedy {
        id: "reduce-batch",
        title: "Reduce the batch size",
        why: "Activations grow linearly with the batch; halving it roughly halves activation memory.",
        snippets: &[
            Snippet {
                flavor: Flavor::Pytorch,
                code: "train_loader = DataLoader(dataset, batch_size=8)  # was 32: halve until it fits",
            },
            Snippet {
                flavor: Flavor::Transformers,
                code: "TrainingArguments(per_device_train_batch_size=4, gradient_accumulation_steps=8)",
            },
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_kebab_case() {
        let mut seen = HashSet::new();
        for r in REMEDIES {
            assert!(seen.insert(r.id), "duplicate remedy id {}", r.id);
            assert!(
                r.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{} is not kebab-case",
                r.id
            );
            assert!(!r.title.is_empty() && !r.why.is_empty(), "{}", r.id);
        }
    }

    #[test]
    fn snippet_choice_follows_preference() {
        let r = get("expandable-segments").unwrap();
        assert_eq!(r.snippet_for(&[Flavor::Pytorch]).unwrap().flavor, Flavor::Pytorch);
        assert_eq!(r.snippet_for(&[Flavor::Jax]).unwrap().flavor, Flavor::Shell);
    }
}
