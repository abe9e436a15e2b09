//! `oomkit estimate --engine llama.cpp` (the default for a `.gguf` MODEL when
//! inferring or serving): llama-server's flags → `oomkit_estimate::llamacpp`
//! → the buffers, the verdict and the plans, printed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::bail;
use oomkit_core::Bytes;
use oomkit_estimate::llamacpp::{
    self, Args, CacheType, DEFAULT_BATCH, DEFAULT_UBATCH, FALLBACK_CTX_TRAIN, FileType, Model,
    Plan, Report,
};

use oomkit_estimate::resolve::read_gguf_file;

use super::estimate::{engine, given, resolve_model};
use crate::cli::{EstCacheType, EstEngine, EstOnOff, EstQuant, EstTask, EstimateArgs, Format};

/// The most context cells taken (16 Mi, 128× the longest published
/// context); beyond it the sizes stop meaning anything.
const MAX_CTX: u64 = 1 << 24;
/// The most tokens per batch taken.
const MAX_BATCH: u64 = 1 << 20;
/// The most server slots taken.
const MAX_SLOTS: u64 = 256;

fn gguf_type(q: EstQuant) -> Option<FileType> {
    Some(match q {
        EstQuant::GgufF16 => FileType::F16,
        EstQuant::GgufQ8_0 => FileType::Q8_0,
        EstQuant::GgufQ6K => FileType::Q6K,
        EstQuant::GgufQ5KM => FileType::Q5KM,
        EstQuant::GgufQ4KM => FileType::Q4KM,
        EstQuant::GgufQ4_0 => FileType::Q4_0,
        EstQuant::None
        | EstQuant::Int8
        | EstQuant::Nf4
        | EstQuant::Nf4Dq
        | EstQuant::Int4
        | EstQuant::Fp8 => return None,
    })
}

fn cache_type(t: EstCacheType) -> CacheType {
    match t {
        EstCacheType::F32 => CacheType::F32,
        EstCacheType::F16 => CacheType::F16,
        EstCacheType::Bf16 => CacheType::Bf16,
        EstCacheType::Q8_0 => CacheType::Q8_0,
        EstCacheType::Q4_0 => CacheType::Q4_0,
        EstCacheType::Q4_1 => CacheType::Q4_1,
        EstCacheType::Iq4Nl => CacheType::Iq4Nl,
        EstCacheType::Q5_0 => CacheType::Q5_0,
        EstCacheType::Q5_1 => CacheType::Q5_1,
    }
}

/// Refuses llama.cpp's flags on the other engines and the other engines'
/// flags on llama.cpp (one line, exit 2).
pub fn check_flags(a: &EstimateArgs) -> anyhow::Result<()> {
    let llama_flags = [
        (a.ctx_size.is_some(), "--ctx-size"),
        (a.n_gpu_layers.is_some(), "--n-gpu-layers"),
        (a.flash_attn.is_some(), "--flash-attn"),
        (a.cache_type_k.is_some(), "--cache-type-k"),
        (a.cache_type_v.is_some(), "--cache-type-v"),
        (a.batch_size.is_some(), "--batch-size"),
        (a.ubatch_size.is_some(), "--ubatch-size"),
        (a.parallel.is_some(), "--parallel"),
    ];
    let gguf_quant = a.quant.and_then(gguf_type);
    if engine(a) != EstEngine::LlamaCpp {
        if let Some((_, flag)) = llama_flags.iter().find(|(g, _)| *g) {
            bail!("{flag} applies to --engine llama.cpp (llama-server's flags)");
        }
        if let Some(ft) = gguf_quant {
            bail!(
                "--quant {} is a GGUF file type: it applies to --engine llama.cpp",
                ft.name().to_ascii_lowercase()
            );
        }
        return Ok(());
    }
    if a.task == EstTask::Train {
        bail!(
            "--engine llama.cpp estimates inference and serving (--task infer or serve), not training"
        );
    }
    let g = given(a);
    let foreign = [
        (a.params.is_some(), "--params"),
        (g.method, "--method"),
        (g.optimizer, "--optimizer"),
        (g.grad_checkpointing, "--grad-checkpointing"),
        (g.trainer, "--trainer"),
        (g.grad_accum, "--grad-accum"),
        (g.lora_rank, "--lora-rank"),
        (g.lora_targets, "--lora-targets"),
        (g.no_foreach, "--no-foreach"),
        (g.zero, "--zero"),
        (g.fsdp, "--fsdp"),
        (g.offload, "--offload"),
        (g.new_tokens, "--new-tokens"),
        (g.batch, "--batch (llama.cpp: --batch-size/--ubatch-size)"),
        (g.parallel, "--tp/--pp"),
        (a.gpus.is_some(), "--gpus"),
        (
            g.kv_dtype,
            "--kv-dtype (llama.cpp: --cache-type-k/--cache-type-v)",
        ),
    ];
    if let Some((_, flag)) = foreign.iter().find(|(g, _)| *g) {
        bail!("{flag} does not apply to --engine llama.cpp");
    }
    if let Some(flag) = g.vllm_flag.or(g.image_flag) {
        bail!("{flag} does not apply to --engine llama.cpp");
    }
    if a.quant.is_some() && gguf_quant.is_none() {
        bail!(
            "--quant with --engine llama.cpp takes a GGUF file type: f16, q8_0, q6_k, q5_k_m, q4_k_m or q4_0"
        );
    }
    Ok(())
}

/// The model as llama.cpp loads it: a `.gguf` file's own tensors, or a
/// catalogue model with the tensor types of `--quant`'s mix.
fn load_model(a: &EstimateArgs) -> anyhow::Result<Model> {
    let Some(name) = a.model.as_deref() else {
        bail!("give a MODEL: a .gguf file or a catalogue model with --quant");
    };
    if name.to_ascii_lowercase().ends_with(".gguf") {
        if a.quant.is_some() {
            bail!("--quant: a .gguf file has its own tensor types (drop --quant)");
        }
        let f = read_gguf_file(Path::new(name))?;
        if let Some(n) = f.context_length.filter(|n| *n > MAX_CTX) {
            bail!(
                "{name}: context_length {n} is above the limit of {MAX_CTX} cells (a corrupt header?)"
            );
        }
        return Ok(Model {
            head_dim_v: f.value_length.unwrap_or(f.model.head_dim),
            n_ctx_train: f.context_length.unwrap_or(FALLBACK_CTX_TRAIN),
            tensors: f.tensors,
            cfg: f.model,
            file: name.to_string(),
        });
    }
    let Some(ft) = a.quant.and_then(gguf_type) else {
        bail!(
            "--engine llama.cpp with a model that is not a .gguf file needs --quant: the GGUF type (f16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0)"
        );
    };
    let cfg = resolve_model(a)?;
    let stem = cfg.id.rsplit('/').next().unwrap_or(&cfg.id).to_string();
    Ok(Model {
        tensors: llamacpp::synthetic_tensors(&cfg, ft),
        n_ctx_train: cfg.max_positions.unwrap_or(FALLBACK_CTX_TRAIN),
        head_dim_v: cfg.head_dim,
        file: format!("{stem}-{}.gguf", ft.name()),
        cfg,
    })
}

/// llama-server's knobs from the flags, with its defaults.
fn engine_args(a: &EstimateArgs, m: &Model) -> anyhow::Result<Args> {
    let n_gpu_layers = match a.n_gpu_layers.as_deref().map(str::trim) {
        None | Some("all" | "auto") => m.all_layers(),
        Some(n) => match n.parse::<u64>() {
            Ok(v) => v.min(m.all_layers()),
            Err(_) => bail!("--n-gpu-layers {n:?}: expected a number of layers or `all`"),
        },
    };
    let flash_attn = a.flash_attn != Some(EstOnOff::Off);
    let args = Args {
        n_ctx: a.ctx_size.unwrap_or(0),
        n_gpu_layers,
        flash_attn,
        cache_type_k: a.cache_type_k.map_or(CacheType::F16, cache_type),
        cache_type_v: a.cache_type_v.map_or(CacheType::F16, cache_type),
        n_batch: a.batch_size.unwrap_or(DEFAULT_BATCH),
        n_ubatch: a.ubatch_size.unwrap_or(DEFAULT_UBATCH),
        n_parallel: a.parallel,
    };
    if args.n_ctx > MAX_CTX {
        bail!(
            "--ctx-size {} is above the limit of {MAX_CTX} cells",
            args.n_ctx
        );
    }
    // At most 256 slots: with at least 256 cells no slot is left empty
    // (llama.cpp refuses `n_ctx_seq == 0`).
    if let Some(n) = args.n_parallel.filter(|n| *n > MAX_SLOTS) {
        bail!("--parallel {n} is above the limit of {MAX_SLOTS} slots");
    }
    if args.n_batch.max(args.n_ubatch) > MAX_BATCH {
        bail!("--batch-size/--ubatch-size above the limit of {MAX_BATCH} tokens");
    }
    if args.cache_type_v.quantized() && !flash_attn {
        bail!(
            "--cache-type-v {} needs flash attention: llama.cpp refuses a quantized V cache with --flash-attn off",
            args.cache_type_v.name()
        );
    }
    Ok(args)
}

/// The JSON output.
#[derive(serde::Serialize)]
struct JsonOut<'a> {
    version: u32,
    engine: &'static str,
    model: serde_json::Value,
    setup: &'a Args,
    components: oomkit_estimate::Components,
    device_used_bytes: u64,
    warnings: &'a [String],
    llamacpp: &'a Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    fit: Option<serde_json::Value>,
}

/// One plan step: what changes, the remedy id, the GPU total after it and
/// the command.
fn steps(p: &Plan, r: &Report) -> Vec<(String, &'static str, u64, String)> {
    let mut v = Vec::new();
    if let Some(c) = p.max_ctx.as_ref().filter(|c| c.n_ctx < r.n_ctx) {
        v.push((
            format!("-c {} (from {})", c.n_ctx, r.n_ctx),
            "llamacpp-context",
            c.gpu_total_bytes,
            c.command.clone(),
        ));
    }
    if let Some(n) = p.max_ngl.as_ref() {
        v.push((
            format!(
                "-ngl {} of {} at -c {} ({} blocks on the GPU)",
                n.n_gpu_layers,
                r.n_gpu_layers.max(n.n_gpu_layers),
                n.n_ctx,
                n.blocks_on_gpu
            ),
            "llamacpp-gpu-layers",
            n.gpu_total_bytes,
            n.command.clone(),
        ));
    }
    v
}

/// Runs the estimate and prints it; exit 1 when `--gpu` is given and it
/// does not fit.
pub fn run(a: &EstimateArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    let m = load_model(a)?;
    let args = engine_args(a, &m)?;
    let gpu = match &a.gpu {
        Some(name) => Some(oomkit_core::gpus::find(name)?),
        None => None,
    };
    let r = llamacpp::buffers(&m, &args);
    let plan = gpu.map(|g| llamacpp::plan(&m, &args, g.usable().get()));
    let mut warnings = Vec::new();
    if r.n_ctx > m.n_ctx_train {
        warnings.push(format!(
            "-c {} is beyond the model's training context ({}); llama.cpp allows it with a warning",
            r.n_ctx, m.n_ctx_train
        ));
    }
    let mut by_type: BTreeMap<&str, u64> = BTreeMap::new();
    for t in &m.tensors {
        let e = by_type.entry(t.ggml_type).or_default();
        *e = e.saturating_add(t.bytes);
    }
    let weights: u64 = by_type.values().fold(0, |s, b| s.saturating_add(*b));
    match a.format {
        Format::Json => {
            let fit = match (gpu, &plan) {
                (Some(g), Some(p)) => Some(serde_json::json!({
                    "gpu": g.id,
                    "usable_bytes": p.usable_bytes,
                    "fits": p.fits,
                    "headroom_bytes": p.headroom_bytes,
                    "max_ctx": p.max_ctx.as_ref().map(|c| c.n_ctx),
                    "max_n_gpu_layers": p.max_ngl.as_ref().map(|n| n.n_gpu_layers),
                    "plan": steps(p, &r).into_iter().map(|(change, remedy, after, config)| serde_json::json!({
                        "change": change,
                        "remedy": remedy,
                        "peak_after_bytes": after,
                        "config": config,
                    })).collect::<Vec<_>>(),
                    "plan_fits": p.fits || p.max_ctx.is_some() || p.max_ngl.is_some(),
                })),
                _ => None,
            };
            let j = JsonOut {
                version: 1,
                engine: "llama.cpp",
                model: serde_json::json!({
                    "id": m.cfg.id,
                    "file": m.file,
                    "model_type": m.cfg.model_type,
                    "params": m.cfg.params(),
                    "layers": m.cfg.layers,
                    "n_ctx_train": m.n_ctx_train,
                    "weights_bytes": weights,
                    "weights_bytes_by_type": by_type,
                }),
                setup: &args,
                components: oomkit_estimate::Components {
                    weights_bytes: r.model_gpu_bytes,
                    kv_cache_bytes: r.kv_gpu_bytes,
                    activations_bytes: r.compute_gpu_bytes,
                    cuda_context_bytes: r.overhead_bytes,
                    ..Default::default()
                },
                device_used_bytes: r.gpu_total_bytes,
                warnings: &warnings,
                llamacpp: &r,
                fit,
            };
            serde_json::to_writer_pretty(&mut *out, &j)?;
            writeln!(out)?;
        }
        Format::Human => {
            for w in &warnings {
                writeln!(out, "warning: {w}")?;
            }
            human(out, &m, &args, &r, &by_type, gpu.zip(plan.as_ref()))?;
        }
    }
    out.flush()?;
    Ok(if plan.is_some_and(|p| !p.fits) { 1 } else { 0 })
}

fn human(
    out: &mut impl Write,
    m: &Model,
    a: &Args,
    r: &Report,
    by_type: &BTreeMap<&str, u64>,
    fit: Option<(&oomkit_core::gpus::Gpu, &Plan)>,
) -> std::io::Result<()> {
    let types: Vec<String> = by_type
        .iter()
        .rev()
        .filter(|(t, _)| **t != "F32")
        .map(|(t, b)| format!("{t} {}", Bytes(*b)))
        .collect();
    writeln!(
        out,
        "{} ({}, {} layers, {}) with llama.cpp{}",
        m.file,
        m.cfg.model_type,
        m.cfg.layers,
        types.join(" · "),
        fit.map(|(g, _)| format!(" on {}", g.id))
            .unwrap_or_default()
    )?;
    writeln!(
        out,
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
    )?;
    writeln!(out)?;
    for (k, b, note) in [
        ("model", r.model_gpu_bytes, "CUDA0 model buffer"),
        ("KV cache", r.kv_gpu_bytes, "CUDA0 KV buffer"),
        ("compute", r.compute_gpu_bytes, "CUDA0 compute buffer"),
        ("overhead", r.overhead_bytes, "CUDA context, cuBLAS, pool"),
        ("total", r.gpu_total_bytes, "on the GPU"),
    ] {
        writeln!(out, "  {k:<10}{:>12}   ({note})", Bytes(b).to_string())?;
    }
    writeln!(
        out,
        "  host: {} of weights, {} of KV cache, {} compute buffer (CUDA_Host)",
        Bytes(r.model_cpu_bytes),
        Bytes(r.kv_cpu_bytes),
        Bytes(r.compute_host_bytes)
    )?;
    writeln!(out)?;
    writeln!(out, "  {}", r.command)?;
    let Some((g, p)) = fit else {
        return Ok(());
    };
    writeln!(out)?;
    if p.fits {
        writeln!(
            out,
            "fits on {}: {} of {} usable ({} free)",
            g.id,
            Bytes(r.gpu_total_bytes),
            Bytes(p.usable_bytes),
            Bytes(p.usable_bytes.saturating_sub(r.gpu_total_bytes))
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "does not fit on {}: needs {}, {} usable ({} short)",
        g.id,
        Bytes(r.gpu_total_bytes),
        Bytes(p.usable_bytes),
        Bytes(r.gpu_total_bytes.saturating_sub(p.usable_bytes))
    )?;
    let s = steps(p, r);
    if s.is_empty() {
        writeln!(
            out,
            "  not even -c {} or -ngl 0 fits: the compute buffer and overhead alone exceed the GPU",
            llamacpp::CTX_PAD
        )?;
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "plan (either):")?;
    for (i, (change, remedy, after, config)) in s.iter().enumerate() {
        writeln!(
            out,
            "  {}. {change} [{remedy}]: then {}",
            i + 1,
            Bytes(*after)
        )?;
        writeln!(out, "       {config}")?;
    }
    Ok(())
}
