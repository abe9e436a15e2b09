//! What the user runs: task, method, precision, quantization, optimizer and
//! input sizes. Validated here so the formulas can trust it.

use serde::{Deserialize, Serialize};

/// What the model does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// `model.generate` (or one forward pass for encoders).
    Infer,
    /// Forward, backward and an optimizer step.
    Train,
}

/// Which parameters train.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Every parameter.
    Full,
    /// Frozen base, trainable low-rank adapters.
    Lora,
    /// LoRA on an NF4-quantized base.
    Qlora,
}

/// Numeric precision of weights, gradients, optimizer states and activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    /// Everything fp32.
    Fp32,
    /// Pure fp16: weights, grads and states in fp16.
    Fp16,
    /// Pure bf16 (torchtune/LitGPT "bf16-true").
    Bf16,
    /// fp32 weights and states, fp16 autocast activations.
    MixedFp16,
    /// fp32 weights and states, bf16 autocast activations.
    MixedBf16,
}

impl Precision {
    /// Bytes per stored weight, gradient and optimizer element.
    pub fn param_bytes(self) -> u64 {
        match self {
            Precision::Fp16 | Precision::Bf16 => 2,
            _ => 4,
        }
    }
    /// Bytes per activation element.
    pub fn act_bytes(self) -> u64 {
        match self {
            Precision::Fp32 => 4,
            _ => 2,
        }
    }
}

/// Weight quantization of the frozen base.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Quant {
    /// Unquantized.
    None,
    /// bitsandbytes LLM.int8.
    Int8,
    /// bitsandbytes NF4 (blocksize 64, fp32 absmax).
    Nf4,
    /// NF4 with double quantization of the absmax constants.
    Nf4Dq,
    /// GPTQ/AWQ 4-bit, group size 128.
    Int4,
    /// FP8 weights with per-tensor scales.
    Fp8,
    /// OCP MXFP4 on the MoE experts only, as a checkpoint ships it
    /// (gpt-oss `quantization_config.quant_method: "mxfp4"`): not a `--quant`
    /// choice, only read from a config.
    Mxfp4,
}

impl Quant {
    /// The name as the user writes it (and as JSON prints it).
    pub fn name(self) -> &'static str {
        match self {
            Quant::None => "none",
            Quant::Int8 => "int8",
            Quant::Nf4 => "nf4",
            Quant::Nf4Dq => "nf4-dq",
            Quant::Int4 => "int4",
            Quant::Fp8 => "fp8",
            Quant::Mxfp4 => "mxfp4",
        }
    }
}

/// Optimizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimizer {
    /// torch AdamW: two states per parameter.
    Adamw,
    /// bitsandbytes 8-bit AdamW.
    #[serde(rename = "adamw-8bit")]
    Adamw8bit,
    /// bitsandbytes paged 8-bit AdamW (states may page to the CPU).
    #[serde(rename = "paged-adamw-8bit")]
    PagedAdamw8bit,
    /// Plain SGD: no state.
    Sgd,
    /// SGD with momentum: one state.
    SgdMomentum,
    /// Adafactor: factored second moment, no first moment (HF defaults).
    Adafactor,
    /// Lion: one state.
    Lion,
}

/// Attention kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    /// Materialises the a·s² score and probability matrices.
    Eager,
    /// PyTorch SDPA (flash or memory-efficient kernel on GPU).
    Sdpa,
    /// FlashAttention-2.
    Flash,
}

/// What DeepSpeed/FSDP moves to the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Offload {
    /// Nothing.
    None,
    /// Optimizer states and the step (ZeRO-Offload).
    Optimizer,
    /// Optimizer and parameters (ZeRO-Infinity / FSDP CPU offload; needs stage 3).
    Params,
}

/// Which linears LoRA adapts. Serializes as `"all-linear"` or `"q,v"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoraTargets {
    /// Every linear inside the blocks (`all-linear`).
    AllLinear,
    /// Named projections (`q`, `v`, `o_proj`, `gate_proj`, …).
    Names(Vec<String>),
}

impl Serialize for LoraTargets {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            LoraTargets::AllLinear => ser.serialize_str("all-linear"),
            LoraTargets::Names(v) => ser.serialize_str(&v.join(",")),
        }
    }
}

impl<'de> Deserialize<'de> for LoraTargets {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let s = String::deserialize(de)?;
        Ok(LoraTargets::parse(&s))
    }
}

impl LoraTargets {
    /// `all-linear` (or `all`), else a comma-separated list of names.
    pub fn parse(s: &str) -> LoraTargets {
        match s.trim() {
            "all-linear" | "all" => LoraTargets::AllLinear,
            list => LoraTargets::Names(
                list.split(',')
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect(),
            ),
        }
    }

    /// Does this target list adapt the linear named `name` (e.g. `q_proj`)?
    pub fn matches(&self, name: &str) -> bool {
        match self {
            LoraTargets::AllLinear => name != "router",
            LoraTargets::Names(list) => list.iter().any(|t| {
                let t = t.trim().to_ascii_lowercase();
                name == t || name.strip_suffix("_proj") == Some(t.as_str())
            }),
        }
    }
}

/// One complete setup. Deserializes with defaults for missing fields.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Setup {
    /// Task.
    pub task: Task,
    /// Training method.
    pub method: Method,
    /// Precision.
    pub precision: Precision,
    /// Weight quantization (QLoRA implies NF4).
    pub quant: Quant,
    /// Optimizer (training only).
    pub optimizer: Optimizer,
    /// Micro-batch size.
    pub batch: u64,
    /// Tokens per sample (training) or prompt tokens (inference).
    pub seq: u64,
    /// Generated tokens (inference).
    pub new_tokens: u64,
    /// HF gradient checkpointing (per layer).
    pub grad_checkpointing: bool,
    /// The training loop drops the model output before backward (HF
    /// `Trainer`, torchtune's `del logits`); otherwise it is held through
    /// backward and the optimizer step (`out = model(**batch)`).
    pub drops_output: bool,
    /// Gradient accumulation steps.
    pub grad_accum: u64,
    /// Attention kernel.
    pub attention: Attention,
    /// LoRA rank.
    pub lora_rank: u64,
    /// LoRA targets.
    pub lora_targets: LoraTargets,
    /// KV-cache element bits (16 by default; 8 for an int8/fp8 cache).
    pub kv_bits: u64,
    /// The optimizer uses torch's multi-tensor (foreach) path.
    pub foreach: bool,
    /// GPUs in all: tensor × pipeline × data-parallel degree ([`Setup::dp`]).
    pub gpus: u64,
    /// Tensor-parallel degree (Megatron-style; vLLM `tensor_parallel_size`;
    /// transformers `tp_plan="auto"`).
    pub tp: u64,
    /// Pipeline-parallel degree (stages of ⌈L/pp⌉ layers).
    pub pp: u64,
    /// ZeRO stage (0–3); FSDP full shard is stage 3.
    pub zero: u8,
    /// CPU offload.
    pub offload: Offload,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            task: Task::Infer,
            method: Method::Full,
            precision: Precision::Bf16,
            quant: Quant::None,
            optimizer: Optimizer::Adamw,
            batch: 1,
            seq: 512,
            new_tokens: 0,
            grad_checkpointing: false,
            drops_output: false,
            grad_accum: 1,
            attention: Attention::Sdpa,
            lora_rank: 8,
            lora_targets: LoraTargets::Names(vec!["q".into(), "v".into()]),
            kv_bits: 16,
            foreach: true,
            gpus: 1,
            tp: 1,
            pp: 1,
            zero: 0,
            offload: Offload::None,
        }
    }
}

/// A setup that cannot be estimated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(pub String);

impl Setup {
    /// Whether the optimizer keeps any state.
    pub fn optimizer_bytes_nonzero(&self) -> bool {
        self.optimizer != Optimizer::Sgd
    }

    /// Data-parallel degree: `gpus / (tp · pp)` (ZeRO shards over it).
    pub fn dp(&self) -> u64 {
        (self.gpus / (self.tp * self.pp).max(1)).max(1)
    }

    /// Whether more than one GPU talks over NCCL.
    pub fn multi_gpu(&self) -> bool {
        self.gpus > 1 || self.tp > 1 || self.pp > 1
    }

    /// Checks that the parallel degrees fit the model: tensor parallelism
    /// splits attention heads, so `tp` must divide the query heads, and the
    /// KV heads must split evenly or be replicated (`tp` a multiple of them,
    /// vLLM's and Megatron's rule); pipeline stages need a layer each.
    pub fn check_model(&self, cfg: &crate::model::ModelConfig) -> Result<(), SetupError> {
        let tp = self.tp;
        if tp > 1 && !cfg.heads.is_multiple_of(tp) {
            return Err(SetupError(format!(
                "--tp {tp} does not divide the {} attention heads of {}",
                cfg.heads, cfg.id
            )));
        }
        let kv = cfg.kv_heads.max(1);
        if tp > 1 && cfg.mla.is_none() && !kv.is_multiple_of(tp) && !tp.is_multiple_of(kv) {
            return Err(SetupError(format!(
                "--tp {tp} neither divides nor is a multiple of the {kv} KV heads of {}",
                cfg.id
            )));
        }
        if self.pp > cfg.layers.max(1) {
            return Err(SetupError(format!(
                "--pp {} is more than the {} layers of {}",
                self.pp, cfg.layers, cfg.id
            )));
        }
        Ok(())
    }

    /// Checks sizes and combinations; QLoRA forces NF4 weights.
    pub fn validate(mut self) -> Result<Setup, SetupError> {
        for (name, v) in [
            ("--batch", self.batch),
            ("--seq", self.seq),
            ("--grad-accum", self.grad_accum),
        ] {
            if v == 0 {
                return Err(SetupError(format!("{name} must be at least 1")));
            }
        }
        if self.method != Method::Full && self.lora_rank == 0 {
            return Err(SetupError("--lora-rank must be at least 1".into()));
        }
        if !matches!(self.kv_bits, 4 | 8 | 16 | 32) {
            return Err(SetupError(
                "KV-cache dtype must be 4, 8, 16 or 32 bits".into(),
            ));
        }
        // Keeps every product of sizes inside u64 (a·s²·b for eager attention).
        if self.seq > 1 << 24 || self.new_tokens > 1 << 24 || self.batch > 1 << 20 {
            return Err(SetupError(
                "sizes out of range: --seq and --new-tokens at most 16,777,216, --batch at most 1,048,576".into(),
            ));
        }
        if self.batch * (self.seq + self.new_tokens) > 1 << 32 {
            return Err(SetupError("--batch × tokens is above 2^32".into()));
        }
        if self.gpus == 0 {
            return Err(SetupError("--gpus must be at least 1".into()));
        }
        if self.tp == 0 || self.pp == 0 {
            return Err(SetupError("--tp and --pp must be at least 1".into()));
        }
        if self.tp > 1 << 10 || self.pp > 1 << 10 || self.gpus > 1 << 20 {
            return Err(SetupError(
                "--tp and --pp at most 1,024, --gpus at most 1,048,576".into(),
            ));
        }
        if !self.gpus.is_multiple_of(self.tp * self.pp) {
            return Err(SetupError(format!(
                "--gpus {} is not a multiple of --tp {} × --pp {} (data-parallel degree = gpus / (tp × pp))",
                self.gpus, self.tp, self.pp
            )));
        }
        if self.zero > 3 {
            return Err(SetupError("--zero must be 0, 1, 2 or 3".into()));
        }
        if self.offload == Offload::Params && self.zero < 3 {
            return Err(SetupError(
                "--offload params needs parameter sharding: --zero 3 or --fsdp".into(),
            ));
        }
        if self.method == Method::Qlora && matches!(self.quant, Quant::None) {
            self.quant = Quant::Nf4;
        }
        if self.task == Task::Train && self.method == Method::Full && self.quant != Quant::None {
            return Err(SetupError(
                "quantized weights cannot be fully fine-tuned: use --method lora or qlora".into(),
            ));
        }
        Ok(self)
    }
}
