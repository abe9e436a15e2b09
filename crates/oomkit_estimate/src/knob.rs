//! The settings a user chooses ([`Knob`]), named in messages without
//! knowing how a front end spells them.
//!
//! Library messages (errors, warnings) write a setting as a marker,
//! `⟨tp⟩`; `Display` words it for a reader of the library ("the
//! tensor-parallel size"), and a front end names it its own way with
//! [`fill`] (the `oomkit` binary: `--tp`). A marker's key is
//! [`Knob::key`].

use std::borrow::Cow;

/// The knobs, each once: variant, marker key, words.
macro_rules! knobs {
    ($($(#[$doc:meta])* $name:ident = $key:literal, $words:literal;)*) => {
        /// A setting of an estimate that the user chooses.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Knob {
            $($(#[$doc])* $name,)*
        }

        impl Knob {
            /// Every knob.
            pub const ALL: &'static [Knob] = &[$(Knob::$name),*];

            /// The marker's key (`tp` in `⟨tp⟩`).
            pub const fn key(self) -> &'static str {
                match self {
                    $(Knob::$name => $key,)*
                }
            }

            /// The knob in words, for `Display`.
            pub const fn words(self) -> &'static str {
                match self {
                    $(Knob::$name => $words,)*
                }
            }
        }
    };
}

knobs! {
    /// What runs: training, inference or serving.
    Task = "task", "the task";
    /// Which parameters train.
    Method = "method", "the method";
    /// Weight quantization.
    Quant = "quant", "the quantization";
    /// The optimizer.
    Optimizer = "optimizer", "the optimizer";
    /// Activation checkpointing.
    GradCheckpointing = "grad-checkpointing", "gradient checkpointing";
    /// Activation checkpointing's mode (none, full, selective).
    Checkpointing = "checkpointing", "the checkpointing mode";
    /// Selective checkpointing's policy (op, or every k-th layer).
    AcOption = "ac-option", "the selective checkpointing option";
    /// torchtune's activation offloading.
    ActivationOffloading = "activation-offloading", "activation offloading";
    /// The software stack (transformers release).
    Stack = "stack", "the stack";
    /// HF Trainer's loop.
    Trainer = "trainer", "HF Trainer's loop";
    /// PEFT's `prepare_model_for_kbit_training`.
    KbitUpcast = "kbit-upcast", "PEFT's prepare_model_for_kbit_training";
    /// Gradient-accumulation steps.
    GradAccum = "grad-accum", "gradient accumulation";
    /// The LoRA rank.
    LoraRank = "lora-rank", "the LoRA rank";
    /// The LoRA target modules.
    LoraTargets = "lora-targets", "the LoRA targets";
    /// The per-parameter optimizer loop.
    NoForeach = "no-foreach", "the per-parameter optimizer loop";
    /// The DeepSpeed ZeRO stage.
    Zero = "zero", "ZeRO stage";
    /// FSDP full shard.
    Fsdp = "fsdp", "FSDP";
    /// CPU offload of training state.
    Offload = "offload", "offload";
    /// FSDP's version.
    FsdpVersion = "fsdp-version", "the FSDP version";
    /// DeepSpeed `reduce_bucket_size`.
    ReduceBucketSize = "reduce-bucket-size", "DeepSpeed's reduce_bucket_size";
    /// DeepSpeed `stage3_prefetch_bucket_size`.
    PrefetchBucketSize = "prefetch-bucket-size", "DeepSpeed's stage3_prefetch_bucket_size";
    /// DeepSpeed `stage3_param_persistence_threshold`.
    ParamPersistenceThreshold = "param-persistence-threshold", "DeepSpeed's stage3_param_persistence_threshold";
    /// DeepSpeed `stage3_max_live_parameters`.
    MaxLiveParameters = "max-live-parameters", "DeepSpeed's stage3_max_live_parameters";
    /// DeepSpeed `stage3_max_reuse_distance`.
    MaxReuseDistance = "max-reuse-distance", "DeepSpeed's stage3_max_reuse_distance";
    /// DeepSpeed `sub_group_size`.
    SubGroupSize = "sub-group-size", "DeepSpeed's sub_group_size";
    /// DeepSpeed `overlap_comm`.
    OverlapComm = "overlap-comm", "DeepSpeed's overlap_comm";
    /// DeepSpeed `contiguous_gradients`.
    ContiguousGradients = "contiguous-gradients", "DeepSpeed's contiguous_gradients";
    /// Generated tokens.
    NewTokens = "new-tokens", "the new tokens";
    /// Tokens per sample (prompt tokens).
    Seq = "seq", "the sequence length";
    /// The micro-batch size.
    Batch = "batch", "the batch size";
    /// GPUs in all.
    Gpus = "gpus", "the GPU count";
    /// The tensor-parallel degree.
    Tp = "tp", "the tensor-parallel size";
    /// The pipeline-parallel degree.
    Pp = "pp", "the pipeline-parallel size";
    /// The GPU.
    Gpu = "gpu", "a GPU";
    /// The KV-cache dtype.
    KvDtype = "kv-dtype", "the KV-cache dtype";
    /// The training launch's autocast.
    Autocast = "autocast", "the autocast";
    /// The inference engine.
    Engine = "engine", "the engine";
    /// vLLM's `gpu_memory_utilization`.
    GpuMemoryUtilization = "gpu-memory-utilization", "gpu_memory_utilization";
    /// vLLM's `max_model_len`.
    MaxModelLen = "max-model-len", "max_model_len";
    /// vLLM's `max_num_seqs`.
    MaxNumSeqs = "max-num-seqs", "max_num_seqs";
    /// vLLM's `max_num_batched_tokens`.
    MaxNumBatchedTokens = "max-num-batched-tokens", "max_num_batched_tokens";
    /// llama.cpp: context cells.
    CtxSize = "ctx-size", "the context size";
    /// llama.cpp: layers on the GPU.
    NGpuLayers = "n-gpu-layers", "the GPU layers";
    /// llama.cpp: flash attention.
    FlashAttn = "flash-attn", "flash attention";
    /// llama.cpp: the K cache type.
    CacheTypeK = "cache-type-k", "the K cache type";
    /// llama.cpp: the V cache type.
    CacheTypeV = "cache-type-v", "the V cache type";
    /// llama.cpp: the logical batch.
    BatchSize = "batch-size", "the logical batch";
    /// llama.cpp: the physical batch.
    UbatchSize = "ubatch-size", "the physical batch";
    /// llama.cpp: server slots.
    Parallel = "parallel", "the server slots";
    /// A bare model's parameter count.
    Params = "params", "the parameter count";
    /// A bare model's layers.
    Layers = "layers", "the layer count";
    /// A bare model's hidden size.
    Hidden = "hidden", "the hidden size";
    /// A bare model's attention heads.
    Heads = "heads", "the head count";
    /// A bare model's KV heads.
    KvHeads = "kv-heads", "the KV head count";
    /// A bare model's vocabulary.
    Vocab = "vocab", "the vocabulary size";
    /// A bare model's MLP intermediate size.
    Intermediate = "intermediate", "the intermediate size";
    /// Image width.
    Width = "width", "the width";
    /// Image height.
    Height = "height", "the height";
    /// Images per prompt.
    Images = "images", "the image count";
    /// The precision.
    Precision = "precision", "the precision";
    /// The attention kernel.
    Attention = "attention", "the attention kernel";
    /// Skipping the safety checker.
    NoSafetyChecker = "no-safety-checker", "no safety checker";
    /// diffusers' attention slicing.
    AttentionSlicing = "attention-slicing", "attention slicing";
    /// The VAE decoding one image at a time.
    VaeSlicing = "vae-slicing", "VAE slicing";
    /// The VAE decoding in tiles.
    VaeTiling = "vae-tiling", "VAE tiling";
    /// diffusers' CPU offload.
    CpuOffload = "cpu-offload", "CPU offload";
    /// The list of catalogue models.
    ListModels = "list-models", "the catalogue";
}

impl Knob {
    /// The knob whose key is `key`.
    pub fn from_key(key: &str) -> Option<Knob> {
        Knob::ALL.iter().copied().find(|k| k.key() == key)
    }
}

/// A set of knobs: the settings a user gave explicitly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KnobSet(u128);

const _: () = assert!(Knob::ALL.len() <= 128, "KnobSet holds 128 knobs");

impl KnobSet {
    /// No knob.
    pub const EMPTY: KnobSet = KnobSet(0);

    const fn bit(k: Knob) -> u128 {
        1 << (k as u32)
    }

    /// Adds `k`.
    pub fn insert(&mut self, k: Knob) {
        self.0 |= KnobSet::bit(k);
    }

    /// This set, with `k` added when `given`.
    #[must_use]
    pub fn with(mut self, k: Knob, given: bool) -> KnobSet {
        if given {
            self.insert(k);
        }
        self
    }

    /// Is `k` in the set?
    pub const fn contains(self, k: Knob) -> bool {
        self.0 & KnobSet::bit(k) != 0
    }

    /// The first of `order` in the set.
    pub fn first_of(self, order: &[Knob]) -> Option<Knob> {
        order.iter().copied().find(|k| self.contains(*k))
    }

    /// The knobs in the set, in [`Knob::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Knob> {
        Knob::ALL.iter().copied().filter(move |k| self.contains(*k))
    }
}

impl FromIterator<Knob> for KnobSet {
    fn from_iter<I: IntoIterator<Item = Knob>>(it: I) -> KnobSet {
        let mut s = KnobSet::EMPTY;
        for k in it {
            s.insert(k);
        }
        s
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

    #[test]
    fn knob_sets_hold_every_knob() {
        let all: KnobSet = Knob::ALL.iter().copied().collect();
        assert!(all.iter().eq(Knob::ALL.iter().copied()));
        let s = KnobSet::EMPTY.with(Knob::Tp, true).with(Knob::Pp, false);
        assert!(s.contains(Knob::Tp) && !s.contains(Knob::Pp));
        assert_eq!(s.first_of(&[Knob::Pp, Knob::Tp]), Some(Knob::Tp));
        assert_eq!(KnobSet::EMPTY.first_of(Knob::ALL), None);
    }
}
