//! A llama.cpp estimate put together: the model loaded as llama.cpp loads
//! it, llama-server's knobs with its defaults, the buffers, the verdict on a
//! GPU and the plan; the JSON and the human text. The binary turns its flags
//! into [`Options`] and prints.

use oomkit_core::remedies::RemedyId;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use oomkit_core::Bytes;
use oomkit_core::gpus::Gpu;
use serde::Serialize;

use super::{
    Args, CTX_PAD, CacheType, DEFAULT_BATCH, DEFAULT_UBATCH, FALLBACK_CTX_TRAIN, FileType, Model,
    Plan, Report, buffers, plan, synthetic_tensors,
};
use crate::model::ModelConfig;
use crate::resolve::{ResolveError, read_gguf_file};

/// The most context cells taken (16 Mi, 128× the longest published
/// context); beyond it the sizes stop meaning anything.
pub const MAX_CTX: u64 = 1 << 24;
/// The most tokens per batch taken.
pub const MAX_BATCH: u64 = 1 << 20;
/// The most server slots taken.
pub const MAX_SLOTS: u64 = 256;

/// Why llama.cpp's knobs or file cannot be estimated. Never names a flag:
/// [`LlamaError::message`] names the settings as a front end spells them.
#[derive(Debug, thiserror::Error)]
pub enum LlamaError {
    /// The file could not be read.
    #[error(transparent)]
    Read(#[from] ResolveError),
    /// A GGUF `context_length` beyond [`MAX_CTX`].
    #[error("{file}: context_length {n} is above the limit of {MAX_CTX} cells (a corrupt header?)")]
    HeaderContext {
        /// The file.
        file: String,
        /// The value.
        n: u64,
    },
    /// The context size beyond [`MAX_CTX`].
    #[error("the context size {0} is above the limit of {MAX_CTX} cells")]
    Context(u64),
    /// More slots than [`MAX_SLOTS`].
    #[error("{0} parallel slots are above the limit of {MAX_SLOTS} slots")]
    Slots(u64),
    /// A batch beyond [`MAX_BATCH`].
    #[error("the batch size is above the limit of {MAX_BATCH} tokens")]
    Batch,
    /// A quantized V cache without flash attention.
    #[error(
        "a {} V cache needs flash attention: llama.cpp refuses a quantized V cache with flash attention off",
        .0.name()
    )]
    QuantizedV(CacheType),
}

impl LlamaError {
    /// The message of an error about a setting, with the setting named by
    /// `name` (the binary: its flag); `None` for the others, whose `Display`
    /// names no setting.
    pub fn message<'a>(
        &self,
        name: &dyn Fn(crate::knob::Knob) -> std::borrow::Cow<'a, str>,
    ) -> Option<String> {
        use crate::knob::Knob;
        Some(match self {
            LlamaError::Context(n) => format!(
                "{} {n} is above the limit of {MAX_CTX} cells",
                name(Knob::CtxSize)
            ),
            LlamaError::Slots(n) => format!(
                "{} {n} is above the limit of {MAX_SLOTS} slots",
                name(Knob::Parallel)
            ),
            LlamaError::Batch => format!(
                "{}/{} above the limit of {MAX_BATCH} tokens",
                name(Knob::BatchSize),
                name(Knob::UbatchSize)
            ),
            LlamaError::QuantizedV(t) => format!(
                "{} {} needs flash attention: llama.cpp refuses a quantized V cache with {} off",
                name(Knob::CacheTypeV),
                t.name(),
                name(Knob::FlashAttn)
            ),
            LlamaError::Read(_) | LlamaError::HeaderContext { .. } => return None,
        })
    }
}

/// How many layers go to the GPU (`-ngl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layers {
    /// Every layer and the output (`all`, `auto`, or not given).
    #[default]
    All,
    /// This many (the output layer counted), at most all.
    Count(u64),
}

/// llama-server's knobs as the user gave them; `None` takes llama.cpp's
/// default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `-c` (0 or `None`: the model's context).
    pub n_ctx: Option<u64>,
    /// `-ngl`.
    pub n_gpu_layers: Layers,
    /// `-fa` (`None`: auto, on where CUDA has the kernels).
    pub flash_attn: Option<bool>,
    /// `--cache-type-k` (f16).
    pub cache_type_k: Option<CacheType>,
    /// `--cache-type-v` (f16).
    pub cache_type_v: Option<CacheType>,
    /// `-b` ([`DEFAULT_BATCH`]).
    pub n_batch: Option<u64>,
    /// `-ub` ([`DEFAULT_UBATCH`]).
    pub n_ubatch: Option<u64>,
    /// `-np` (`None`: auto).
    pub n_parallel: Option<u64>,
}

impl Model {
    /// A `.gguf` file as llama.cpp loads it: its header's tensors.
    pub fn from_gguf(path: &Path) -> Result<Model, LlamaError> {
        let f = read_gguf_file(path)?;
        let file = path.display().to_string();
        if let Some(n) = f.context_length.filter(|n| *n > MAX_CTX) {
            return Err(LlamaError::HeaderContext { file, n });
        }
        Ok(Model {
            head_dim_v: f.value_length.unwrap_or(f.model.head_dim),
            n_ctx_train: f.context_length.unwrap_or(FALLBACK_CTX_TRAIN),
            tensors: f.tensors,
            cfg: f.model,
            file,
        })
    }

    /// A model without a file: the tensor types of the GGUF file type `ft`'s
    /// mix on `cfg`'s shapes.
    pub fn from_config(cfg: ModelConfig, ft: FileType) -> Model {
        let stem = cfg.id.rsplit('/').next().unwrap_or(&cfg.id).to_string();
        Model {
            tensors: synthetic_tensors(&cfg, ft),
            n_ctx_train: cfg.max_positions.unwrap_or(FALLBACK_CTX_TRAIN),
            head_dim_v: cfg.head_dim,
            file: format!("{stem}-{}.gguf", ft.name()),
            cfg,
        }
    }
}

impl Args {
    /// llama-server's knobs for `m`: what the user gave, else its defaults;
    /// checked against the limits and llama.cpp's own refusals.
    pub fn from_options(o: &Options, m: &Model) -> Result<Args, LlamaError> {
        let flash_attn = o.flash_attn != Some(false);
        let args = Args {
            n_ctx: o.n_ctx.unwrap_or(0),
            n_gpu_layers: match o.n_gpu_layers {
                Layers::All => m.all_layers(),
                Layers::Count(n) => n.min(m.all_layers()),
            },
            flash_attn,
            cache_type_k: o.cache_type_k.unwrap_or(CacheType::F16),
            cache_type_v: o.cache_type_v.unwrap_or(CacheType::F16),
            n_batch: o.n_batch.unwrap_or(DEFAULT_BATCH),
            n_ubatch: o.n_ubatch.unwrap_or(DEFAULT_UBATCH),
            n_parallel: o.n_parallel,
        };
        if args.n_ctx > MAX_CTX {
            return Err(LlamaError::Context(args.n_ctx));
        }
        // At most 256 slots: with at least 256 cells no slot is left empty
        // (llama.cpp refuses `n_ctx_seq == 0`).
        if let Some(n) = args.n_parallel.filter(|n| *n > MAX_SLOTS) {
            return Err(LlamaError::Slots(n));
        }
        if args.n_batch.max(args.n_ubatch) > MAX_BATCH {
            return Err(LlamaError::Batch);
        }
        if args.cache_type_v.quantized() && !flash_attn {
            return Err(LlamaError::QuantizedV(args.cache_type_v));
        }
        Ok(args)
    }
}

/// One plan step: what changes, the remedy id, the GPU total after it and
/// the command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// What changes (`-c 8192 (from 131072)`).
    pub change: String,
    /// The remedy id.
    pub remedy: RemedyId,
    /// The GPU's total after the change.
    pub after_bytes: Bytes,
    /// The `llama-server` line.
    pub config: String,
}

/// The estimate of `m` under `args`, with the verdict on a GPU when one
/// was named.
#[derive(Clone, Debug)]
pub struct Outcome<'a> {
    /// The model.
    pub model: &'a Model,
    /// The knobs.
    pub args: &'a Args,
    /// The buffers.
    pub report: Report,
    /// The GPU and the verdict with its plans.
    pub fit: Option<(&'a Gpu, Plan)>,
    /// Warnings that did not stop the estimate.
    pub warnings: Vec<String>,
    /// Stored weight bytes per tensor type.
    pub by_type: BTreeMap<&'static str, Bytes>,
}

impl<'a> Outcome<'a> {
    /// Runs the estimate (and the plan on `gpu`).
    pub fn new(m: &'a Model, args: &'a Args, gpu: Option<&'a Gpu>) -> Outcome<'a> {
        let report = buffers(m, args);
        let fit = gpu.map(|g| (g, plan(m, args, g.usable())));
        let mut warnings = Vec::new();
        if report.n_ctx > m.n_ctx_train {
            warnings.push(format!(
                "-c {} is beyond the model's training context ({}); llama.cpp allows it with a warning",
                report.n_ctx, m.n_ctx_train
            ));
        }
        let mut by_type: BTreeMap<&'static str, Bytes> = BTreeMap::new();
        for t in &m.tensors {
            let e = by_type.entry(t.ggml_type).or_default();
            *e = e.saturating_add(Bytes(t.bytes));
        }
        Outcome {
            model: m,
            args,
            report,
            fit,
            warnings,
            by_type,
        }
    }

    /// It does not fit the GPU named.
    pub fn fails(&self) -> bool {
        self.fit.as_ref().is_some_and(|(_, p)| !p.fits)
    }

    /// The plan's steps (either one makes it fit).
    pub fn steps(&self) -> Vec<Step> {
        let Some((_, p)) = &self.fit else {
            return Vec::new();
        };
        let r = &self.report;
        let mut v = Vec::new();
        if let Some(c) = p.max_ctx.as_ref().filter(|c| c.n_ctx < r.n_ctx) {
            v.push(Step {
                change: format!("-c {} (from {})", c.n_ctx, r.n_ctx),
                remedy: RemedyId::LlamacppContext,
                after_bytes: c.gpu_total_bytes,
                config: c.command.clone(),
            });
        }
        if let Some(t) = p.together.as_ref() {
            v.push(Step {
                change: format!(
                    "-c {} (from {}) and -ngl {} together ({} blocks on the GPU)",
                    t.n_ctx, r.n_ctx, t.n_gpu_layers, t.blocks_on_gpu
                ),
                remedy: RemedyId::LlamacppContext,
                after_bytes: t.gpu_total_bytes,
                config: t.command.clone(),
            });
        }
        if let Some(n) = p.max_ngl.as_ref() {
            v.push(Step {
                change: format!(
                    "-ngl {} of {} at -c {} ({} blocks on the GPU)",
                    n.n_gpu_layers,
                    r.n_gpu_layers.max(n.n_gpu_layers),
                    n.n_ctx,
                    n.blocks_on_gpu
                ),
                remedy: RemedyId::LlamacppGpuLayers,
                after_bytes: n.gpu_total_bytes,
                config: n.command.clone(),
            });
        }
        v
    }

    /// The JSON output (README "`oomkit estimate`", llama.cpp), in the
    /// contract's field order.
    pub fn json(&self) -> impl Serialize + '_ {
        let (m, r) = (self.model, &self.report);
        let weights: Bytes = self.by_type.values().copied().sum();
        let fit = self.fit.as_ref().map(|(g, p)| {
            serde_json::json!({
                "gpu": g.id,
                "usable_bytes": p.usable_bytes,
                "fits": p.fits,
                "headroom_bytes": p.headroom_bytes,
                "max_ctx": p.max_ctx.as_ref().map(|c| c.n_ctx),
                "max_n_gpu_layers": p.max_ngl.as_ref().map(|n| n.n_gpu_layers),
                "plan": self.steps().into_iter().map(|s| serde_json::json!({
                    "change": s.change,
                    "remedy": s.remedy,
                    "peak_after_bytes": s.after_bytes,
                    "config": s.config,
                })).collect::<Vec<_>>(),
                "plan_fits": p.fits || p.max_ctx.is_some() || p.max_ngl.is_some(),
            })
        });
        crate::json::Json {
            version: crate::json::VERSION,
            engine: Some("llama.cpp"),
            model: serde_json::json!({
                "id": m.cfg.id,
                "file": m.file,
                "model_type": m.cfg.model_type,
                "params": m.cfg.params(),
                "layers": m.cfg.layers,
                "n_ctx_train": m.n_ctx_train,
                "weights_bytes": weights,
                "weights_bytes_by_type": self.by_type,
            }),
            setup: self.args,
            components: std::borrow::Cow::Owned(crate::Components {
                weights_bytes: r.model_gpu_bytes,
                kv_cache_bytes: r.kv_gpu_bytes,
                activations_bytes: r.compute_gpu_bytes,
                cuda_context_bytes: r.overhead_bytes,
                ..Default::default()
            }),
            peak_allocated_bytes: None,
            peak_reserved_bytes: None,
            device_used_bytes: r.gpu_total_bytes,
            peak_phase: None,
            warnings: &self.warnings,
            assumed: &[],
            detail: Some(crate::json::Detail::Llamacpp(r)),
            fit,
        }
    }

    /// The human text (without the warnings, which the binary prints first).
    pub fn human(&self) -> String {
        let mut o = String::new();
        let (m, a, r) = (self.model, self.args, &self.report);
        let types: Vec<String> = self
            .by_type
            .iter()
            .rev()
            .filter(|(t, _)| **t != "F32")
            .map(|(t, b)| format!("{t} {b}"))
            .collect();
        let _ = writeln!(
            o,
            "{} ({}, {} layers, {}) with llama.cpp{}",
            m.file,
            m.cfg.model_type,
            m.cfg.layers,
            types.join(" · "),
            self.fit
                .as_ref()
                .map(|(g, _)| format!(" on {}", g.id))
                .unwrap_or_default()
        );
        let _ = writeln!(
            o,
            "  -c {}{} · -ngl {}/{} ({} blocks{}) · flash attention {} · cache {}/{} · -ub {}",
            r.n_ctx,
            if a.n_parallel.is_some() {
                format!(" ({} slots of {})", r.n_parallel, r.n_ctx_seq)
            } else {
                String::new()
            },
            r.n_gpu_layers,
            m.all_layers(),
            r.blocks_on_gpu,
            if r.output_on_gpu { " + output" } else { "" },
            if a.flash_attn { "on" } else { "off" },
            a.cache_type_k.name(),
            a.cache_type_v.name(),
            r.n_ubatch
        );
        let _ = writeln!(o);
        for (k, b, note) in [
            ("model", r.model_gpu_bytes, "CUDA0 model buffer"),
            ("KV cache", r.kv_gpu_bytes, "CUDA0 KV buffer"),
            ("compute", r.compute_gpu_bytes, "CUDA0 compute buffer"),
            ("overhead", r.overhead_bytes, "CUDA context, cuBLAS, pool"),
            ("total", r.gpu_total_bytes, "on the GPU"),
        ] {
            let _ = writeln!(o, "  {k:<10}{:>12}   ({note})", b.to_string());
        }
        let _ = writeln!(
            o,
            "  host: {} of weights, {} of KV cache, {} compute buffer (CUDA_Host)",
            r.model_cpu_bytes, r.kv_cpu_bytes, r.compute_host_bytes
        );
        let _ = writeln!(o);
        let _ = writeln!(o, "  {}", r.command);
        let Some((g, p)) = &self.fit else {
            return o;
        };
        let _ = writeln!(o);
        if p.fits {
            let _ = writeln!(
                o,
                "fits on {}: {} of {} usable ({} free)",
                g.id,
                r.gpu_total_bytes,
                p.usable_bytes,
                p.usable_bytes.saturating_sub(r.gpu_total_bytes)
            );
            return o;
        }
        let _ = writeln!(
            o,
            "does not fit on {}: needs {}, {} usable ({} short)",
            g.id,
            r.gpu_total_bytes,
            p.usable_bytes,
            r.gpu_total_bytes.saturating_sub(p.usable_bytes)
        );
        let s = self.steps();
        if s.is_empty() {
            let _ = writeln!(
                o,
                "  not even -c {CTX_PAD} or -ngl 0 fits: the compute buffer and overhead alone exceed the GPU"
            );
            return o;
        }
        let _ = writeln!(o);
        let _ = writeln!(o, "plan (either):");
        for (i, st) in s.iter().enumerate() {
            let _ = writeln!(
                o,
                "  {}. {} [{}]: then {}",
                i + 1,
                st.change,
                st.remedy,
                st.after_bytes
            );
            let _ = writeln!(o, "       {}", st.config);
        }
        o
    }
}
