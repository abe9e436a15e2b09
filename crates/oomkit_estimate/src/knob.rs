//! The settings a user chooses ([`Knob`]), named in messages without
//! knowing how a front end spells them.
//!
//! Library messages (errors, warnings) write a setting as a marker,
//! `⟨tp⟩`; `Display` words it for a reader of the library ("the
//! tensor-parallel size"), and a front end names it its own way with
//! [`fill`] (the `oomkit` binary: `--tp`). A marker's key is
//! [`Knob::key`].

use std::borrow::Cow;

/// A setting of an estimate that the user chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Knob {
    /// What runs: training, inference or serving.
    Task,
    /// Which parameters train.
    Method,
    /// Weight quantization.
    Quant,
    /// The optimizer.
    Optimizer,
    /// Activation checkpointing.
    GradCheckpointing,
    /// HF Trainer's loop.
    Trainer,
    /// PEFT's `prepare_model_for_kbit_training`.
    KbitUpcast,
    /// Gradient-accumulation steps.
    GradAccum,
    /// The LoRA rank.
    LoraRank,
    /// The LoRA target modules.
    LoraTargets,
    /// The per-parameter optimizer loop.
    NoForeach,
    /// The DeepSpeed ZeRO stage.
    Zero,
    /// FSDP full shard.
    Fsdp,
    /// CPU offload of training state.
    Offload,
    /// Generated tokens.
    NewTokens,
    /// Tokens per sample (prompt tokens).
    Seq,
    /// The micro-batch size.
    Batch,
    /// GPUs in all.
    Gpus,
    /// The tensor-parallel degree.
    Tp,
    /// The pipeline-parallel degree.
    Pp,
    /// The GPU.
    Gpu,
    /// The KV-cache dtype.
    KvDtype,
    /// The inference engine.
    Engine,
    /// vLLM's `gpu_memory_utilization`.
    GpuMemoryUtilization,
    /// vLLM's `max_model_len`.
    MaxModelLen,
    /// vLLM's `max_num_seqs`.
    MaxNumSeqs,
    /// vLLM's `max_num_batched_tokens`.
    MaxNumBatchedTokens,
    /// A bare model's parameter count.
    Params,
    /// A bare model's layers.
    Layers,
    /// A bare model's hidden size.
    Hidden,
    /// A bare model's attention heads.
    Heads,
    /// A bare model's KV heads.
    KvHeads,
    /// A bare model's vocabulary.
    Vocab,
    /// A bare model's MLP intermediate size.
    Intermediate,
    /// Image width.
    Width,
    /// Image height.
    Height,
    /// Images per prompt.
    Images,
    /// The precision.
    Precision,
    /// The attention kernel.
    Attention,
    /// Skipping the safety checker.
    NoSafetyChecker,
    /// diffusers' attention slicing.
    AttentionSlicing,
    /// The VAE decoding one image at a time.
    VaeSlicing,
    /// The VAE decoding in tiles.
    VaeTiling,
    /// diffusers' CPU offload.
    CpuOffload,
    /// The list of catalogue models.
    ListModels,
}

impl Knob {
    /// Every knob.
    pub const ALL: &'static [Knob] = &[
        Knob::Task,
        Knob::Method,
        Knob::Quant,
        Knob::Optimizer,
        Knob::GradCheckpointing,
        Knob::Trainer,
        Knob::KbitUpcast,
        Knob::GradAccum,
        Knob::LoraRank,
        Knob::LoraTargets,
        Knob::NoForeach,
        Knob::Zero,
        Knob::Fsdp,
        Knob::Offload,
        Knob::NewTokens,
        Knob::Seq,
        Knob::Batch,
        Knob::Gpus,
        Knob::Tp,
        Knob::Pp,
        Knob::Gpu,
        Knob::KvDtype,
        Knob::Engine,
        Knob::GpuMemoryUtilization,
        Knob::MaxModelLen,
        Knob::MaxNumSeqs,
        Knob::MaxNumBatchedTokens,
        Knob::Params,
        Knob::Layers,
        Knob::Hidden,
        Knob::Heads,
        Knob::KvHeads,
        Knob::Vocab,
        Knob::Intermediate,
        Knob::Width,
        Knob::Height,
        Knob::Images,
        Knob::Precision,
        Knob::Attention,
        Knob::NoSafetyChecker,
        Knob::AttentionSlicing,
        Knob::VaeSlicing,
        Knob::VaeTiling,
        Knob::CpuOffload,
        Knob::ListModels,
    ];

    /// The marker's key (`tp` in `⟨tp⟩`).
    pub const fn key(self) -> &'static str {
        match self {
            Knob::Task => "task",
            Knob::Method => "method",
            Knob::Quant => "quant",
            Knob::Optimizer => "optimizer",
            Knob::GradCheckpointing => "grad-checkpointing",
            Knob::Trainer => "trainer",
            Knob::KbitUpcast => "kbit-upcast",
            Knob::GradAccum => "grad-accum",
            Knob::LoraRank => "lora-rank",
            Knob::LoraTargets => "lora-targets",
            Knob::NoForeach => "no-foreach",
            Knob::Zero => "zero",
            Knob::Fsdp => "fsdp",
            Knob::Offload => "offload",
            Knob::NewTokens => "new-tokens",
            Knob::Seq => "seq",
            Knob::Batch => "batch",
            Knob::Gpus => "gpus",
            Knob::Tp => "tp",
            Knob::Pp => "pp",
            Knob::Gpu => "gpu",
            Knob::KvDtype => "kv-dtype",
            Knob::Engine => "engine",
            Knob::GpuMemoryUtilization => "gpu-memory-utilization",
            Knob::MaxModelLen => "max-model-len",
            Knob::MaxNumSeqs => "max-num-seqs",
            Knob::MaxNumBatchedTokens => "max-num-batched-tokens",
            Knob::Params => "params",
            Knob::Layers => "layers",
            Knob::Hidden => "hidden",
            Knob::Heads => "heads",
            Knob::KvHeads => "kv-heads",
            Knob::Vocab => "vocab",
            Knob::Intermediate => "intermediate",
            Knob::Width => "width",
            Knob::Height => "height",
            Knob::Images => "images",
            Knob::Precision => "precision",
            Knob::Attention => "attention",
            Knob::NoSafetyChecker => "no-safety-checker",
            Knob::AttentionSlicing => "attention-slicing",
            Knob::VaeSlicing => "vae-slicing",
            Knob::VaeTiling => "vae-tiling",
            Knob::CpuOffload => "cpu-offload",
            Knob::ListModels => "list-models",
        }
    }

    /// The knob in words, for `Display`.
    pub const fn words(self) -> &'static str {
        match self {
            Knob::Task => "the task",
            Knob::Method => "the method",
            Knob::Quant => "the quantization",
            Knob::Optimizer => "the optimizer",
            Knob::GradCheckpointing => "gradient checkpointing",
            Knob::Trainer => "HF Trainer's loop",
            Knob::KbitUpcast => "PEFT's prepare_model_for_kbit_training",
            Knob::GradAccum => "gradient accumulation",
            Knob::LoraRank => "the LoRA rank",
            Knob::LoraTargets => "the LoRA targets",
            Knob::NoForeach => "the per-parameter optimizer loop",
            Knob::Zero => "ZeRO stage",
            Knob::Fsdp => "FSDP",
            Knob::Offload => "offload",
            Knob::NewTokens => "the new tokens",
            Knob::Seq => "the sequence length",
            Knob::Batch => "the batch size",
            Knob::Gpus => "the GPU count",
            Knob::Tp => "the tensor-parallel size",
            Knob::Pp => "the pipeline-parallel size",
            Knob::Gpu => "a GPU",
            Knob::KvDtype => "the KV-cache dtype",
            Knob::Engine => "the engine",
            Knob::GpuMemoryUtilization => "gpu_memory_utilization",
            Knob::MaxModelLen => "max_model_len",
            Knob::MaxNumSeqs => "max_num_seqs",
            Knob::MaxNumBatchedTokens => "max_num_batched_tokens",
            Knob::Params => "the parameter count",
            Knob::Layers => "the layer count",
            Knob::Hidden => "the hidden size",
            Knob::Heads => "the head count",
            Knob::KvHeads => "the KV head count",
            Knob::Vocab => "the vocabulary size",
            Knob::Intermediate => "the intermediate size",
            Knob::Width => "the width",
            Knob::Height => "the height",
            Knob::Images => "the image count",
            Knob::Precision => "the precision",
            Knob::Attention => "the attention kernel",
            Knob::NoSafetyChecker => "no safety checker",
            Knob::AttentionSlicing => "attention slicing",
            Knob::VaeSlicing => "VAE slicing",
            Knob::VaeTiling => "VAE tiling",
            Knob::CpuOffload => "CPU offload",
            Knob::ListModels => "the catalogue",
        }
    }

    /// The knob whose key is `key`.
    pub fn from_key(key: &str) -> Option<Knob> {
        Knob::ALL.iter().copied().find(|k| k.key() == key)
    }
}

/// `text` with each `⟨key⟩` marker replaced by `name(knob)`; unknown keys
/// stay as written.
pub fn fill<'a>(text: &str, name: &dyn Fn(Knob) -> Cow<'a, str>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('⟨') {
        let (before, after) = rest.split_at(i);
        out.push_str(before);
        let inner = after.get('⟨'.len_utf8()..).unwrap_or_default();
        match inner.find('⟩').and_then(|j| {
            let key = inner.get(..j)?;
            Some((Knob::from_key(key)?, j))
        }) {
            Some((k, j)) => {
                out.push_str(&name(k));
                rest = inner.get(j + '⟩'.len_utf8()..).unwrap_or_default();
            }
            None => {
                out.push('⟨');
                rest = inner;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `text` with its markers in words (what `Display` shows).
pub fn words(text: &str) -> String {
    fill(text, &|k| Cow::Borrowed(k.words()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_filled_and_keys_are_unique() {
        let flag = |k: Knob| Cow::Owned(format!("--{}", k.key()));
        assert_eq!(fill("⟨tp⟩ 3 and ⟨pp⟩", &flag), "--tp 3 and --pp");
        assert_eq!(words("⟨tp⟩ 3"), "the tensor-parallel size 3");
        assert_eq!(fill("⟨nope⟩ ⟨", &flag), "⟨nope⟩ ⟨");
        for k in Knob::ALL {
            assert_eq!(Knob::from_key(k.key()), Some(*k));
        }
    }
}
