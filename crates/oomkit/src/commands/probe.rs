//! `oomkit probe`: validate the arguments, optionally start from the
//! estimate, run the search through `oomkit_probe`, show each trial live
//! (with a spinner when stderr is a terminal) and the answer last.

use std::cell::RefCell;
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use oomkit_core::Bytes;
use oomkit_nvml::{GpuReader, NvmlReader};
use oomkit_probe::probe::{self, Conclusion, Outcome, ProbeOptions, ProbeReport, Progress, Trial};
use oomkit_probe::search::{Bounds, DEFAULT_MAX, bounded_budget};
use oomkit_probe::{CommandLine, command};

use crate::cli::{Cli, ColorChoice, Command, Format, ProbeArgs};
use crate::commands::estimate;
use crate::{interrupt, output};

pub fn run(args: ProbeArgs, color: ColorChoice) -> anyhow::Result<u8> {
    after_double_dash(&args.command, std::env::args_os().collect())?;
    let timeout = args
        .timeout
        .as_deref()
        .map(|t| parse_duration("--timeout", t))
        .transpose()?;
    let grace = parse_duration("--grace", &args.grace)?;
    if !(0.0..100.0).contains(&args.margin) {
        bail!(
            "--margin must be a percentage in [0, 100), got {}",
            args.margin
        );
    }
    if let Some(max) = args.max
        && max < args.min
    {
        bail!("--max {max} is below --min {}", args.min);
    }
    let estimate = match &args.estimate {
        Some(tokens) => Some(estimated_max_batch(tokens)?),
        None => None,
    };
    if !args.no_preflight {
        // The command as the first trial runs it: `{batch}` is --min.
        let first: Vec<std::ffi::OsString> = args
            .command
            .iter()
            .map(|t| match t.to_str() {
                Some(s) => s
                    .replace(command::PLACEHOLDER, &args.min.to_string())
                    .into(),
                None => t.clone(),
            })
            .collect();
        super::preflight::before_launch(&first, args.gpu.as_deref(), args.preflight, color)?;
    }
    let cmd = CommandLine::new(args.command);
    let human = args.format == Format::Human;
    // Trial lines are results in human mode (stdout) and chatter in JSON mode (stderr).
    let mut lines: Box<dyn Write> = if human {
        Box::new(output::stdout(color))
    } else {
        Box::new(output::stderr(color))
    };
    if !cmd.has_placeholder() {
        writeln!(
            output::stderr(color),
            "note: the command has no {}; it gets the batch size only as ${}",
            command::PLACEHOLDER,
            command::BATCH_ENV
        )?;
    }
    let bounds = Bounds {
        min: args.min,
        max: args.max,
        estimate: estimate.map(|(b, _)| b),
    };
    writeln!(lines, "probing {}", cmd.display())?;
    writeln!(lines, "  {}", plan(&bounds, estimate.map(|(_, g)| g)))?;
    writeln!(
        lines,
        "  {:>5}  {:>7}  {:<8} {:>8}  {:>11}  detail",
        "trial", "batch", "outcome", "seconds", "peak"
    )?;
    let interrupts = interrupt::supervise()?;
    // NVML when the driver is there; without it, peaks come from PyTorch alone.
    let gpu = NvmlReader::open().ok().map(RefCell::new);
    let spinner = std::io::stderr().is_terminal().then(|| {
        let pb = ProgressBar::new_spinner();
        pb.set_style(
            ProgressStyle::with_template("  {spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        pb.enable_steady_tick(Duration::from_millis(120));
        pb
    });
    let mut index = 0;
    let mut write_err: Option<std::io::Error> = None;
    let report = probe::probe(
        &cmd,
        &ProbeOptions {
            bounds,
            timeout,
            margin_pct: args.margin,
            interrupt: Some(&interrupts),
            grace,
            gpu: gpu.as_ref().map(|g| g as &RefCell<dyn GpuReader>),
        },
        |p| match p {
            Progress::Start { index: i, batch } => {
                index = i;
                if let Some(pb) = &spinner {
                    pb.reset_elapsed();
                    pb.set_message(format!("trial {i}: batch {batch}"));
                }
            }
            Progress::Done(t) => {
                let line = trial_line(index, t);
                let mut write = || writeln!(lines, "{line}").and_then(|()| lines.flush());
                let r = match &spinner {
                    Some(pb) => pb.suspend(write),
                    None => write(),
                };
                if let Err(e) = r {
                    write_err.get_or_insert(e);
                }
            }
        },
    );
    if let Some(pb) = &spinner {
        pb.finish_and_clear();
    }
    let report = match report {
        Ok(r) => r,
        Err(e) => match super::run::spawn_failure(&e) {
            Some(code) => return Ok(code),
            None => return Err(e.into()),
        },
    };
    if let Some(e) = write_err {
        return Err(e.into());
    }
    match args.format {
        Format::Human => write!(lines, "{}", answer(&report, args.min))?,
        Format::Json => {
            let mut out = output::stdout(color);
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
            out.flush()?;
        }
    }
    lines.flush()?;
    if let Some(s) = report.signal.filter(|&s| interrupt::reraised(s)) {
        interrupt::die_of(s);
    }
    Ok(report.exit_code())
}

/// The command must follow `--`, as `run`'s does: without it, flags after
/// the program (`oomkit probe sh -c 'exit 0' --max 4`) would be taken for
/// the command's. `--estimate`'s list ends at that `--` too. The command is
/// the end of the raw arguments; the one before it must be `--`.
fn after_double_dash(command: &[OsString], argv: Vec<OsString>) -> anyhow::Result<()> {
    let before = argv
        .len()
        .checked_sub(command.len())
        .and_then(|i| i.checked_sub(1))
        .and_then(|i| argv.get(i));
    if before.is_some_and(|a| a == "--") {
        return Ok(());
    }
    let program = command
        .first()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    bail!(
        "the command to probe goes after `--`: oomkit probe [OPTIONS] -- CMD [ARGS]... (got `{program}` without `--`)"
    )
}

/// `90s`, `2m`, `1h30m` (humantime) or plain (possibly fractional) seconds,
/// for the flag `flag`.
pub fn parse_duration(flag: &str, s: &str) -> anyhow::Result<Duration> {
    let d = oomkit_core::duration::parse(s).map_err(|e| anyhow::anyhow!("invalid {flag}: {e}"))?;
    if d.is_zero() {
        bail!("{flag} must be positive, got {s}");
    }
    Ok(d)
}

/// Parses `MODEL [estimate flags]` as `oomkit estimate` would and returns
/// the largest batch it fits on `--gpu`.
fn estimated_max_batch(tokens: &[String]) -> anyhow::Result<(u64, &'static str)> {
    let argv = ["oomkit", "estimate"]
        .into_iter()
        .map(str::to_string)
        .chain(tokens.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        anyhow::anyhow!(
            "in --estimate {}: {}",
            tokens.join(" "),
            e.to_string().trim()
        )
    })?;
    let Command::Estimate(est) = cli.command else {
        bail!("--estimate takes a model and `oomkit estimate` flags");
    };
    let mut opts = est.options();
    let mut found = || -> anyhow::Result<(u64, &'static str)> {
        if opts.gpu.is_none() {
            bail!(
                "--estimate needs --gpu: the GPU to size the batch for (see `oomkit estimate --list-gpus`)"
            );
        }
        opts.versions = estimate::versions(est.versions.as_deref())?;
        // The library's resolution and setup, as `oomkit estimate` uses them.
        match opts
            .max_batch_on(estimate::sources(opts.hub))
            .map_err(|e| estimate::estimate_error(e, &opts))?
        {
            Some((batch, gpu)) => Ok((batch, gpu.id)),
            None => bail!(
                "--estimate sizes training and inference batches; a vLLM or llama.cpp server has no batch size to probe"
            ),
        }
    };
    found()
        .map_err(estimate::flagged)
        .with_context(|| format!("in --estimate {}", tokens.join(" ")))
}

fn plan(b: &Bounds, gpu: Option<&str>) -> String {
    match (b.estimate, b.max) {
        (Some(e), _) => format!(
            "starting at oomkit's estimate, {e} on {}, then stepping away from it and bisecting",
            gpu.unwrap_or("the GPU")
        ),
        (None, Some(max)) => format!(
            "batch {}..={max}: bisection, at most {} trials (and 1 more to confirm the boundary)",
            b.min,
            bounded_budget(b.min, max)
        ),
        (None, None) => format!(
            "from batch {}: doubling until the first OOM (at most {}), then bisecting",
            b.min,
            b.top()
        ),
    }
}

fn trial_line(index: u32, t: &Trial) -> String {
    // PyTorch's own peak when the hook gave it, else NVML's for the process tree.
    let peak = t
        .peak_bytes
        .or(t.gpu_peak_bytes)
        .map_or_else(|| "—".to_string(), |b| Bytes(b).to_string());
    let mut detail = t.detail.clone().unwrap_or_default();
    if t.outcome == Outcome::Error {
        let status = match (t.exit_code, t.signal) {
            (_, Some(s)) => format!("killed by signal {s}"),
            (Some(c), _) => format!("exit {c}"),
            _ => String::new(),
        };
        detail = if detail.is_empty() {
            status
        } else {
            format!("{status}: {detail}")
        };
    }
    if t.confirmation {
        detail = if detail.is_empty() {
            "run again to confirm the boundary".to_string()
        } else {
            format!("run again to confirm the boundary: {detail}")
        };
    }
    format!(
        "  {index:>5}  {:>7}  {:<8} {:>8.2}  {peak:>11}  {detail}",
        t.batch,
        t.outcome.label(),
        t.seconds
    )
    .trim_end()
    .to_string()
}

fn answer(r: &ProbeReport, min: u64) -> String {
    let n = r.trials.len();
    let stopped_by = r
        .trials
        .iter()
        .find(|t| matches!(t.outcome, Outcome::Error | Outcome::Timeout));
    let mut s = String::new();
    if r.interrupted {
        s.push_str("interrupted: the trial in progress was stopped and its processes killed\n");
    }
    if let Some(t) = stopped_by {
        s.push_str(&format!(
            "the search stopped: batch {} ended in {} (not an out-of-memory error)\n",
            t.batch,
            t.outcome.label()
        ));
    }
    match (r.result, r.max_batch, r.min_oom_batch) {
        (Conclusion::Exact, Some(b), Some(oom)) => s.push_str(&format!(
            "largest batch that fits: {b}  ({oom} ran out of memory, twice; {n} trials)\n"
        )),
        (Conclusion::Flaky, Some(b), Some(oom)) => s.push_str(&format!(
            "flaky boundary: {oom} ran out of memory once and fit once; {b} fit  ({n} trials)\n\
             largest batch that never ran out of memory: {b} (not exact: memory at this size varies \
             between runs — fragmentation, other processes on the GPU; leave a --margin)\n"
        )),
        (Conclusion::NoOomUpToMax, Some(b), _) => s.push_str(&format!(
            "no out-of-memory up to {b}{}: the limit is higher  ({n} trials)\n",
            if r.max == b && r.estimate.is_none() && b == DEFAULT_MAX {
                " (the default --max)"
            } else {
                " (--max)"
            }
        )),
        (_, Some(b), oom) => s.push_str(&format!(
            "largest batch that ran so far: {b}{}  ({n} trials; not a final answer)\n",
            oom.map(|o| format!(", {o} ran out of memory"))
                .unwrap_or_default()
        )),
        (_, None, Some(_)) => s.push_str(&format!(
            "even --min {min} does not fit: it ran out of memory\n"
        )),
        (_, None, None) => s.push_str("no batch size was confirmed\n"),
    }
    if let (Some(rec), Some(b)) = (r.recommended_batch, r.max_batch)
        && r.margin_pct > 0.0
    {
        s.push_str(&format!(
            "with --margin {}%: use {rec} (largest {b})\n",
            r.margin_pct
        ));
    }
    if r.trials
        .iter()
        .all(|t| t.peak_bytes.is_none() && t.gpu_peak_bytes.is_none())
        && n > 0
    {
        s.push_str(
            "peak memory: unknown (not a PyTorch program with CUDA, and NVML saw none of its processes on a GPU)\n",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_must_follow_a_double_dash() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let cmd = os(&["sh", "-c", "exit 0"]);
        assert!(
            after_double_dash(&cmd, os(&["oomkit", "probe", "--", "sh", "-c", "exit 0"])).is_ok()
        );
        assert!(after_double_dash(&cmd, os(&["oomkit", "probe", "sh", "-c", "exit 0"])).is_err());
        // A `--` inside the command is not the separator.
        let cmd = os(&["sh", "--", "x"]);
        assert!(after_double_dash(&cmd, os(&["oomkit", "probe", "sh", "--", "x"])).is_err());
    }

    #[test]
    fn durations_in_humantime_or_seconds() {
        let p = |s| parse_duration("--timeout", s);
        assert_eq!(p("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(p("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(p("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(p("45").unwrap(), Duration::from_secs(45));
        for bad in ["0", "-3", "soon", "0s"] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }
}
