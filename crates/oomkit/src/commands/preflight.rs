//! `oomkit estimate -- COMMAND…` and `oomkit estimate CONFIG.yaml`: the
//! library reads what the user runs (`oomkit_estimate::preflight`), this file
//! turns it into `estimate` arguments (the user's own oomkit flags win), prints
//! the derived setup with its sources, runs the estimate, and prints the plan
//! as changes to the user's command or config.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use clap::{CommandFactory, FromArgMatches};
use oomkit_estimate::preflight::{self, Derived, Files, Source, edit};
use serde::Serialize;

use crate::cli::{Cli, ColorChoice, EstimateArgs, Format};
use crate::{input, output};

/// The most bytes read from a config file the command names.
const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// Whether the arguments ask for preflight: a command after `--`, or a
/// MODEL that is a training config file (YAML, or JSON with training keys).
pub fn applies(args: &EstimateArgs) -> bool {
    !args.command.is_empty()
        || args.deepspeed.is_some()
        || args.model.as_deref().is_some_and(is_config)
}

fn is_config(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".yaml") || lower.ends_with(".yml") {
        return true;
    }
    if !lower.ends_with(".json") || lower.ends_with("config.json") && !Path::new(path).is_file() {
        return false;
    }
    DiskFiles
        .read(path)
        .is_ok_and(|t| preflight::is_training_config(path, &t))
}

/// Files on disk, bounded.
struct DiskFiles;

/// Files on disk with some replaced: a plan's changed config, DeepSpeed
/// file, or new file, as text.
struct Overlay {
    files: Vec<(String, String)>,
}

impl Files for Overlay {
    fn read(&self, path: &str) -> Result<String, String> {
        match self.files.iter().find(|(p, _)| p == path) {
            Some((_, t)) => Ok(t.clone()),
            None => DiskFiles.read(path),
        }
    }
    fn exists(&self, path: &str) -> bool {
        self.files.iter().any(|(p, _)| p == path) || DiskFiles.exists(path)
    }
}

/// The plan's changed command or config read again and estimated: whether
/// what the user would paste fits. `None` when the rewrite changes nothing
/// oomkit can read again (a step elsewhere only).
fn check_rewrite(
    d: &Derived,
    r: &edit::Rewrite,
    user: &[String],
    user_model: Option<&str>,
) -> Option<edit::Check> {
    let not = |why: String| {
        Some(edit::Check {
            not_checked: Some(why),
            ..edit::Check::default()
        })
    };
    let mut files: Vec<(String, String)> = r.new_files.clone();
    for (path, keys) in &r.file_edits {
        match DiskFiles
            .read(path)
            .map_err(|e| format!("{path}: {e}"))
            .and_then(|t| edit::apply_keys(path, &t, keys).map_err(|e| e.to_string()))
        {
            Ok(t) => files.push((path.clone(), t)),
            Err(e) => return not(e),
        }
    }
    let derived = if !r.argv.is_empty() {
        let overlay = Overlay { files };
        preflight::from_command(&r.argv, &overlay)
    } else if let (Some(path), false) = (&d.config_file, r.keys.is_empty()) {
        let text = match DiskFiles.read(path) {
            Ok(t) => t,
            Err(e) => return not(format!("{path}: {e}")),
        };
        match edit::apply_keys(path, &text, &r.keys) {
            Ok(t) => files.push((path.clone(), t)),
            Err(e) => return not(e.to_string()),
        }
        let overlay = Overlay { files };
        preflight::from_config(path, &overlay)
    } else {
        return None;
    };
    let derived = match derived {
        Ok(d) => d,
        Err(e) => return not(e.to_string()),
    };
    let mut argv: Vec<String> = vec!["oomkit".into(), "estimate".into()];
    if user_model.is_none()
        && let Some(m) = derived.model()
    {
        argv.push(m.to_string());
    }
    argv.extend(derived.estimate_args());
    argv.extend(user.iter().cloned());
    argv.extend(["--format".to_string(), "json".to_string()]);
    let est = parse_estimate(&argv).and_then(|a| {
        let mut buf = Vec::new();
        super::estimate::run_to(a, &mut buf)?;
        Ok(serde_json::from_slice::<serde_json::Value>(&buf)?)
    });
    let est = match est {
        Ok(v) => v,
        Err(e) => return not(e.to_string()),
    };
    let u64_at = |p: &str| est.pointer(p).and_then(serde_json::Value::as_u64);
    Some(edit::Check {
        fits: est
            .pointer("/fit/fits")
            .and_then(serde_json::Value::as_bool),
        needs_bytes: u64_at("/serve/requested_bytes")
            .or_else(|| u64_at("/device_used_bytes"))
            .or_else(|| u64_at("/llamacpp/gpu_total_bytes")),
        usable_bytes: u64_at("/fit/usable_bytes"),
        not_checked: None,
    })
}

impl Files for DiskFiles {
    fn read(&self, path: &str) -> Result<String, String> {
        let bytes = input::read_file_limited(Path::new(path), MAX_CONFIG_BYTES).map_err(|e| {
            let parts: Vec<String> = e.chain().map(ToString::to_string).collect();
            parts.join(": ")
        })?;
        String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
    }
    fn exists(&self, path: &str) -> bool {
        Path::new(path).exists()
    }
}

/// The JSON output: what was read and the estimate as `estimate --format json`
/// prints it.
#[derive(Serialize)]
struct JsonOut<'a> {
    version: u32,
    preflight: JsonPreflight<'a>,
    estimate: serde_json::Value,
}

#[derive(Serialize)]
struct JsonPreflight<'a> {
    #[serde(flatten)]
    derived: &'a Derived,
    estimate_args: Vec<String>,
    plan: Vec<edit::Rewrite>,
}

pub fn run(args: EstimateArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let config_mode = args.command.is_empty();
    // `MODEL --deepspeed FILE`: the model as given, the file's settings.
    let deepspeed = args.deepspeed.clone();
    if deepspeed.is_some() && !config_mode {
        bail!(
            "--deepspeed with a command after `--`: the command's own --deepspeed file is read; drop oomkit's"
        );
    }
    let config_mode = config_mode && deepspeed.is_none();
    let derived = if let Some(path) = &deepspeed {
        preflight::from_deepspeed(path, &DiskFiles)?
    } else if config_mode {
        let path = args.model.clone().unwrap_or_default();
        preflight::from_config(&path, &DiskFiles)?
    } else {
        preflight::from_command(&args.command, &DiskFiles)
            .map_err(|e| anyhow::anyhow!("the command after `--`: {e}"))?
    };
    let user = user_tokens(config_mode, args.model.as_deref());
    let user_model = (!config_mode).then(|| args.model.clone()).flatten();
    if deepspeed.is_some() && user_model.is_none() {
        bail!("--deepspeed needs a MODEL: a DeepSpeed config names none");
    }
    // What the user's flags give is no longer needed.
    let given = |flag: &str| match flag {
        "model" => user_model.is_some(),
        f => user
            .iter()
            .any(|t| t == &format!("--{f}") || t.starts_with(&format!("--{f}="))),
    };
    let missing: Vec<&preflight::Need> = derived.needs.iter().filter(|n| !given(n.flag)).collect();
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|n| n.why.clone()).collect();
        bail!("cannot estimate what it runs without {}", list.join("; "));
    }
    let mut argv: Vec<String> = vec!["oomkit".into(), "estimate".into()];
    if user_model.is_none()
        && let Some(m) = derived.model()
    {
        argv.push(m.to_string());
    }
    argv.extend(derived.estimate_args());
    argv.extend(user.iter().cloned());
    let format = args.format;
    let est_args = parse_estimate(&argv)?;
    let printed_model = est_args.model.clone().unwrap_or_default();
    // The JSON always: the plan's steps come from it.
    let mut json_args = est_args.clone();
    json_args.format = Format::Json;
    let mut buf = Vec::new();
    let code = super::estimate::run_to(json_args, &mut buf)?;
    let est: serde_json::Value =
        serde_json::from_slice(&buf).context("reading the estimate's JSON")?;
    let mut plan = rewrites(&derived, &est);
    let before = plan.len();
    for r in &mut plan {
        r.check = check_rewrite(&derived, r, &user, user_model.as_deref());
    }
    // A plan is what fits: an alternative whose changed command or config,
    // read and estimated again, does not is left out.
    // (Training plans are one rewrite: it stays, and says so.)
    if matches!(
        derived.style,
        preflight::Style::Vllm | preflight::Style::LlamaCpp
    ) {
        plan.retain(|r| r.check.as_ref().is_none_or(|c| c.fits != Some(false)));
    }
    let dropped = before - plan.len();
    let shown_args: Vec<String> = argv.iter().skip(2).cloned().collect();
    let mut out = output::stdout(color);
    match format {
        Format::Json => {
            let j = JsonOut {
                version: 1,
                preflight: JsonPreflight {
                    derived: &derived,
                    estimate_args: shown_args,
                    plan,
                },
                estimate: est,
            };
            serde_json::to_writer_pretty(&mut out, &j)?;
            writeln!(out)?;
            out.flush()?;
            Ok(code)
        }
        Format::Human => {
            write_derived(&mut out, &derived, &printed_model, &shown_args)?;
            out.flush()?;
            let code = super::estimate::run_to(est_args, &mut out)?;
            write_plan(&mut out, &derived, &plan)?;
            if dropped > 0 {
                writeln!(
                    out,
                    "  ({dropped} more left out: estimated again from the changed command or config, it does not fit)"
                )?;
            }
            out.flush()?;
            Ok(code)
        }
    }
}

/// The oomkit arguments the user typed (after `estimate`, before `--`),
/// without the config file when it is the MODEL.
fn user_tokens(config_mode: bool, model: Option<&str>) -> Vec<String> {
    let all: Vec<String> = crate::cli::engine_spellings(std::env::args_os().collect())
        .into_iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let start = all
        .iter()
        .position(|t| t == "estimate")
        .map_or(0, |i| i + 1);
    let mut toks: Vec<String> = all
        .into_iter()
        .skip(start)
        .take_while(|t| t != "--")
        .collect();
    if config_mode
        && let Some(m) = model
        && let Some(i) = toks.iter().position(|t| t == m)
    {
        toks.remove(i);
    }
    // The DeepSpeed file has been read into the derived flags.
    if let Some(i) = toks.iter().position(|t| t == "--deepspeed") {
        toks.drain(i..(i + 2).min(toks.len()));
    }
    toks.retain(|t| !t.starts_with("--deepspeed="));
    toks
}

/// Parses `argv` as `oomkit estimate`, later flags overriding earlier ones
/// (the user's own flags come last).
fn parse_estimate(argv: &[String]) -> anyhow::Result<EstimateArgs> {
    let cmd = Cli::command().mut_subcommand("estimate", |c| c.args_override_self(true));
    let m = cmd.try_get_matches_from(argv).map_err(|e| {
        anyhow::anyhow!(
            "the setup read from the command: {}",
            first_line(&e.to_string())
        )
    })?;
    let Some(sub) = m.subcommand_matches("estimate") else {
        bail!("the setup read from the command is not an estimate");
    };
    Ok(EstimateArgs::from_arg_matches(sub)?)
}

fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_string()
}

fn label(flag: &str) -> &str {
    match flag {
        "task" => "task",
        "method" => "method",
        "batch" => "micro-batch",
        "grad-accum" => "grad accumulation",
        "seq" => "sequence",
        "precision" => "precision",
        "autocast" => "autocast",
        "grad-checkpointing" => "checkpointing",
        "checkpointing" => "checkpointing",
        "ac-option" => "AC option",
        "activation-offloading" => "act. offloading",
        "optimizer" => "optimizer",
        "trainer" => "training loop",
        "gpus" => "GPUs",
        "zero" => "ZeRO stage",
        "fsdp" => "FSDP",
        "offload" => "offload",
        "lora-rank" => "LoRA rank",
        "lora-targets" => "LoRA targets",
        "quant" => "quantization",
        "attention" => "attention",
        "engine" => "engine",
        "tp" => "tensor parallel",
        "pp" => "pipeline parallel",
        "kv-dtype" => "KV cache dtype",
        "ctx-size" => "context (-c)",
        "n-gpu-layers" => "GPU layers (-ngl)",
        "flash-attn" => "flash attention",
        "fsdp-version" => "FSDP version",
        "reduce-bucket-size" => "reduce bucket",
        "prefetch-bucket-size" => "prefetch bucket",
        "param-persistence-threshold" => "persistence",
        "max-live-parameters" => "max live params",
        "max-reuse-distance" => "reuse distance",
        "sub-group-size" => "sub-group",
        "overlap-comm" => "overlap comm",
        "contiguous-gradients" => "contiguous grads",
        other => other,
    }
}

fn write_derived(
    out: &mut impl Write,
    d: &Derived,
    model: &str,
    args: &[String],
) -> std::io::Result<()> {
    writeln!(out, "preflight: {}", d.understood)?;
    for i in &d.items {
        let value = if i.flag == "model" {
            model.to_string()
        } else {
            i.value.clone().unwrap_or_else(|| "on".into())
        };
        // A bare switch reads as written (`--bf16`, not `--bf16 true`).
        let shown = if i.key.starts_with('-') && i.shown == "true" {
            ""
        } else {
            i.shown.as_str()
        };
        let from = match &i.source {
            Source::Assumed => "assumed (below)".to_string(),
            s if i.key.is_empty() => format!("{shown} ({s})"),
            s if shown.is_empty() => format!("{} ({s})", i.key),
            s => format!("{} {shown} ({s})", i.key),
        };
        writeln!(out, "  {:<18} {:<12} {from}", label(i.flag), value)?;
    }
    if !d.ignored.is_empty() {
        writeln!(out, "  ignored: {}", d.ignored.join(", "))?;
    }
    for a in &d.assumed {
        writeln!(out, "  assumed: {a}")?;
    }
    writeln!(out, "  as oomkit flags: oomkit estimate {}", args.join(" "))?;
    writeln!(out)
}

/// The plan's steps, rewritten in the user's terms.
fn rewrites(d: &Derived, est: &serde_json::Value) -> Vec<edit::Rewrite> {
    let Some(plan) = est
        .pointer("/fit/plan")
        .and_then(serde_json::Value::as_array)
    else {
        return Vec::new();
    };
    let steps: Vec<edit::Step> = plan
        .iter()
        .filter_map(|s| {
            Some(edit::Step {
                remedy: s.get("remedy")?.as_str()?,
                config: s.get("config")?.as_str()?,
            })
        })
        .collect();
    if steps.is_empty() {
        return Vec::new();
    }
    let baseline = est
        .pointer("/llamacpp/command")
        .or_else(|| est.pointer("/serve/command"))
        .and_then(serde_json::Value::as_str);
    edit::rewrite_plan(d, &steps, baseline)
}

fn write_plan(out: &mut impl Write, d: &Derived, plan: &[edit::Rewrite]) -> std::io::Result<()> {
    if plan
        .iter()
        .all(|r| r.changes.is_empty() && r.elsewhere.is_empty())
    {
        return Ok(());
    }
    writeln!(out)?;
    let alternatives = plan.len() > 1;
    match (&d.config_file, d.style) {
        (Some(f), _) => writeln!(out, "the plan in {f} (changed keys):")?,
        (None, _) if alternatives => writeln!(
            out,
            "the plan as your command (each line starts on its own):"
        )?,
        (None, _) => writeln!(
            out,
            "the plan as your command (changed flags, then the whole line):"
        )?,
    }
    for (n, r) in plan.iter().enumerate() {
        let indent = if alternatives {
            write!(out, "  {}. ", n + 1)?;
            "     "
        } else {
            write!(out, "  ")?;
            "  "
        };
        if d.config_file.is_some() {
            writeln!(out, "{}", r.changes.first().map_or("", String::as_str))?;
            for c in r.changes.iter().skip(1) {
                writeln!(out, "{indent}{c}")?;
            }
        } else {
            writeln!(out, "{}", r.changes.join(", "))?;
            if let Some(c) = &r.command {
                writeln!(out, "{indent}{c}")?;
            }
        }
        for e in &r.elsewhere {
            writeln!(out, "{indent}{e}")?;
        }
        if let Some(c) = &r.check {
            let b = |x: Option<u64>| x.map(|v| oomkit_core::Bytes(v).to_string());
            match (c.fits, b(c.needs_bytes), b(c.usable_bytes), &c.not_checked) {
                (Some(true), Some(n), Some(u), _) => writeln!(
                    out,
                    "{indent}checked: read again and estimated, it fits ({n} of {u} usable)"
                )?,
                (Some(true), _, _, _) => {
                    writeln!(out, "{indent}checked: read again and estimated, it fits")?
                }
                (Some(false), n, u, _) => writeln!(
                    out,
                    "{indent}checked: read again and estimated, it still does not fit{}",
                    match (n, u) {
                        (Some(n), Some(u)) => format!(" ({n} of {u} usable)"),
                        _ => String::new(),
                    }
                )?,
                (_, _, _, Some(why)) => writeln!(out, "{indent}not checked: {why}")?,
                _ => {}
            }
        }
    }
    Ok(())
}

/// The verdict of a preflight check before `run` launches a command.
pub struct Verdict {
    /// Whether the estimate fits the GPU.
    pub fits: bool,
    /// One line for stderr.
    pub line: String,
}

/// Estimates `command` on `gpu` (else the first GPU the driver reports) when
/// oomkit reads the command and it names everything the estimate needs;
/// `None` when it does not (nothing to say), `Some(Err)` when the estimate
/// itself failed.
pub fn check(command: &[std::ffi::OsString], gpu: Option<&str>) -> Option<anyhow::Result<Verdict>> {
    let tokens: Vec<String> = command
        .iter()
        .map(|t| t.to_str().map(str::to_string))
        .collect::<Option<_>>()?;
    let derived = preflight::from_command(&tokens, &DiskFiles).ok()?;
    if !derived.needs.is_empty() {
        return None;
    }
    let gpu = match gpu {
        Some(g) => g.to_string(),
        None => driver_gpu()?,
    };
    Some(verdict(&derived, &gpu))
}

/// The catalogue id of the first GPU the driver reports.
fn driver_gpu() -> Option<String> {
    use oomkit_nvml::GpuReader;
    let mut r = oomkit_nvml::NvmlReader::open().ok()?;
    let name = r.read().into_iter().next()?.name?;
    oomkit_core::gpus::find_in_text(&name).map(|g| g.id.to_string())
}

fn verdict(derived: &Derived, gpu: &str) -> anyhow::Result<Verdict> {
    let mut argv: Vec<String> = vec!["oomkit".into(), "estimate".into()];
    argv.extend(derived.model().map(str::to_string));
    argv.extend(derived.estimate_args());
    argv.extend([
        "--gpu".to_string(),
        gpu.to_string(),
        "--format".into(),
        "json".into(),
    ]);
    let args = parse_estimate(&argv)?;
    let mut buf = Vec::new();
    super::estimate::run_to(args, &mut buf)?;
    let est: serde_json::Value =
        serde_json::from_slice(&buf).context("reading the estimate's JSON")?;
    let fits = est
        .pointer("/fit/fits")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(true);
    let bytes = |p: &str| {
        est.pointer(p)
            .and_then(serde_json::Value::as_u64)
            .map(oomkit_core::Bytes)
    };
    let used = bytes("/device_used_bytes").or_else(|| bytes("/serve/requested_bytes"));
    let usable = bytes("/fit/usable_bytes");
    let numbers = match (used, usable) {
        (Some(u), Some(a)) => format!(": {u} of {a} usable"),
        _ => String::new(),
    };
    let line = if fits {
        format!(
            "oomkit preflight: {} fits on {gpu}{numbers}",
            derived.understood
        )
    } else {
        format!(
            "oomkit preflight: {} does not fit on {gpu}{numbers}; `oomkit estimate --gpu {gpu} -- COMMAND` gives the plan",
            derived.understood
        )
    };
    Ok(Verdict { fits, line })
}

/// Prints the verdict of [`check`] on stderr before a launch; an error (exit
/// 2, nothing launched) when it does not fit and `mode` is strict.
pub fn before_launch(
    command: &[std::ffi::OsString],
    gpu: Option<&str>,
    mode: crate::cli::PreflightMode,
    color: ColorChoice,
) -> anyhow::Result<()> {
    let Some(v) = check(command, gpu) else {
        return Ok(());
    };
    let mut err = output::stderr(color);
    match v {
        Ok(v) => {
            if !v.fits && mode == crate::cli::PreflightMode::Strict {
                bail!("{} (--preflight=strict: not launched)", v.line);
            }
            writeln!(err, "{}", v.line)?;
        }
        Err(e) => writeln!(err, "oomkit preflight: not checked: {e}")?,
    }
    Ok(())
}
