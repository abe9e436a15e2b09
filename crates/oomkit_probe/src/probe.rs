//! `oomkit probe`: one fresh process per trial, classified by
//! `oomkit_explain`, driven by [`crate::search`].
//!
//! A trial is
//! - `oom` when `oomkit_explain` finds a device out-of-memory error anywhere
//!   in its output — every format explain knows — whatever its exit status: a
//!   program that catches its OOM and exits 0 (accelerate's
//!   `find_executable_batch_size`, Lightning's batch-size finder, a loop that
//!   skips the batch) still ran out of memory at this size;
//! - `ok` when the command exits 0 with no OOM in its output;
//! - `timeout` when it outlives `--timeout` (its group is killed);
//! - `error` for any other failure (a `ValueError`, a segfault, a host-RAM
//!   `MemoryError`): never taken for an OOM, never for "works".
//!
//! `timeout` and `error` stop the search; so does an interrupt. When the
//! search ends with neighbours (`b` fit, `b + 1` ran out of memory), `b + 1` is
//! run once more: the answer is `exact` only when both runs of it ran out of
//! memory, else the boundary is `flaky` (one transient OOM — fragmentation, a
//! neighbour's job on the GPU — must not decide the answer alone).

use std::ffi::OsString;
use std::time::Duration;

use serde::Serialize;

use std::cell::RefCell;

use oomkit_nvml::GpuReader;

use crate::Error;
use crate::command::CommandLine;
use crate::hook::{self, Hook};
use crate::runner::{self, Exit, Finished, Interrupts, Killed};
use crate::search::{self, Answer, Bounds, Verdict};

/// How one trial ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Exit status 0.
    Ok,
    /// Failed with a device out-of-memory error in its output.
    Oom,
    /// Failed otherwise.
    Error,
    /// Killed after `--timeout`.
    Timeout,
    /// Killed because oomkit was interrupted.
    Interrupted,
}

impl Outcome {
    /// The word used in output.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Oom => "oom",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::Interrupted => "interrupted",
        }
    }
}

/// One trial, as reported (the JSON's `trials[]`).
#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    /// The batch size tried.
    pub batch: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Peak GPU memory: PyTorch's `max_memory_reserved()` through the hook,
    /// else (OOM trials) the memory the OOM message says the process held;
    /// `null` when neither is known.
    pub peak_bytes: Option<u64>,
    /// Peak GPU memory of the trial's process tree as NVML reports it (what
    /// nvidia-smi shows: the allocator's reserve plus the CUDA context), any
    /// framework; `null` without NVML or when no sample caught the tree on a GPU.
    pub gpu_peak_bytes: Option<u64>,
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal that killed it, when one did.
    pub signal: Option<i32>,
    /// One line on what happened: the OOM headline, or the last line of
    /// output of a failed trial.
    pub detail: Option<String>,
    /// This trial re-ran the batch right above the answer to confirm the
    /// boundary.
    pub confirmation: bool,
}

/// Options of a probe.
pub struct ProbeOptions<'a> {
    /// Batch range and estimate.
    pub bounds: Bounds,
    /// Per-trial time limit.
    pub timeout: Option<Duration>,
    /// Report a batch this many percent below the largest success.
    pub margin_pct: f64,
    /// Set by the caller's signal handler.
    pub interrupt: Option<&'a Interrupts>,
    /// After a forwarded signal, how long a trial gets before its tree is
    /// killed.
    pub grace: Duration,
    /// NVML, when available: each trial's process tree is sampled.
    pub gpu: Option<&'a RefCell<dyn GpuReader>>,
}

impl std::fmt::Debug for ProbeOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeOptions")
            .field("bounds", &self.bounds)
            .field("timeout", &self.timeout)
            .field("margin_pct", &self.margin_pct)
            .field("grace", &self.grace)
            .field("gpu", &self.gpu.is_some())
            .finish_non_exhaustive()
    }
}

/// What a caller hears while the probe runs.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A trial is starting (1-based index).
    Start {
        /// Trial number.
        index: u32,
        /// Batch size.
        batch: u64,
    },
    /// A trial finished.
    Done(&'a Trial),
}

/// How the probe ended (the JSON's `result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Conclusion {
    /// `max_batch` fit and `max_batch + 1` ran out of memory twice.
    Exact,
    /// `max_batch + 1` ran out of memory once and fit once: the limit moves
    /// from run to run.
    Flaky,
    /// Nothing ran out of memory up to `max` (the answer is a lower bound).
    NoOomUpToMax,
    /// Even `--min` ran out of memory.
    MinDoesNotFit,
    /// A trial ended in `error` or `timeout`; what was learned is reported.
    Stopped,
    /// oomkit was interrupted.
    Interrupted,
}

impl Conclusion {
    /// The exit status of `oomkit probe` for this conclusion (an
    /// interrupted probe dies of its signal instead; 130 stands for that).
    pub fn exit_code(self) -> u8 {
        match self {
            Conclusion::Exact => 0,
            Conclusion::MinDoesNotFit => 1,
            Conclusion::Stopped => 2,
            Conclusion::NoOomUpToMax => 3,
            Conclusion::Flaky => 4,
            Conclusion::Interrupted => 130,
        }
    }
}

/// The answer (the JSON of `oomkit probe --format json`).
#[derive(Debug, Serialize)]
pub struct ProbeReport {
    /// Contract version.
    pub version: u32,
    /// How the probe ended.
    pub result: Conclusion,
    /// The largest batch that ran (and never ran out of memory); `null` when
    /// none did.
    pub max_batch: Option<u64>,
    /// `max_batch` less `--margin` percent (never below `--min`).
    pub recommended_batch: Option<u64>,
    /// The margin applied.
    pub margin_pct: f64,
    /// The smallest batch that ran out of memory.
    pub min_oom_batch: Option<u64>,
    /// Whether `max_batch` is exact: `result` is `exact`.
    pub exact: bool,
    /// The largest batch the search could try: `--max`, else its default.
    pub max: u64,
    /// Where the search started when `--estimate` was given.
    pub estimate: Option<u64>,
    /// Whether oomkit was interrupted.
    pub interrupted: bool,
    /// The signal that interrupted it.
    #[serde(skip)]
    pub signal: Option<i32>,
    /// Every trial in order.
    pub trials: Vec<Trial>,
}

impl ProbeReport {
    /// 0 exact, 1 even `--min` does not fit, 2 a trial failed otherwise
    /// (error, timeout), 3 no out-of-memory up to `max`, 4 flaky boundary;
    /// 130 interrupted (the binary dies of the signal instead).
    pub fn exit_code(&self) -> u8 {
        self.result.exit_code()
    }
}

/// Runs the probe.
pub fn probe(
    cmd: &CommandLine,
    opts: &ProbeOptions<'_>,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<ProbeReport, Error> {
    if cmd.argv.is_empty() {
        return Err(Error::NoCommand);
    }
    let hook = Hook::install(None)?;
    let mut trials: Vec<Trial> = Vec::new();
    let mut failure: Option<Error> = None;
    let mut interrupted = false;
    let was_interrupted = || opts.interrupt.is_some_and(|i| i.count() > 0);
    let mut one =
        |batch: u64, confirmation: bool, trials: &mut Vec<Trial>| -> Result<Outcome, Error> {
            // Interrupted between trials: start no new one.
            if was_interrupted() {
                return Ok(Outcome::Interrupted);
            }
            let index = u32::try_from(trials.len())
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            progress(Progress::Start { index, batch });
            let mut trial = run_trial(cmd, &hook, opts, batch, index)?;
            trial.confirmation = confirmation;
            let outcome = trial.outcome;
            if outcome != Outcome::Interrupted {
                progress(Progress::Done(&trial));
                trials.push(trial);
            }
            Ok(outcome)
        };
    let answer: Answer =
        search::search(opts.bounds, |batch| match one(batch, false, &mut trials) {
            Ok(Outcome::Ok) => Verdict::Fits,
            Ok(Outcome::Oom) => Verdict::TooBig,
            Ok(Outcome::Interrupted) => {
                interrupted = true;
                Verdict::Stop
            }
            Ok(Outcome::Error | Outcome::Timeout) => Verdict::Stop,
            Err(e) => {
                failure = Some(e);
                Verdict::Stop
            }
        });
    if let Some(e) = failure {
        return Err(e);
    }
    let mut conclusion = if interrupted {
        Conclusion::Interrupted
    } else if answer.stopped {
        Conclusion::Stopped
    } else if answer.no_oom_up_to_top(opts.bounds) {
        Conclusion::NoOomUpToMax
    } else if answer.largest_fit.is_none() {
        Conclusion::MinDoesNotFit
    } else {
        Conclusion::Exact
    };
    // Confirm the boundary: the batch right above the answer runs again.
    if conclusion == Conclusion::Exact
        && let (Some(lo), Some(hi)) = (answer.largest_fit, answer.smallest_too_big)
        && hi == lo.saturating_add(1)
    {
        conclusion = match one(hi, true, &mut trials)? {
            Outcome::Oom => Conclusion::Exact,
            Outcome::Ok => Conclusion::Flaky,
            Outcome::Interrupted => {
                interrupted = true;
                Conclusion::Interrupted
            }
            Outcome::Error | Outcome::Timeout => Conclusion::Stopped,
        };
    } else if conclusion == Conclusion::Exact {
        // An answer that is not a pair of neighbours cannot be exact.
        conclusion = Conclusion::Stopped;
    }
    let recommended = answer
        .largest_fit
        .map(|b| with_margin(b, opts.margin_pct, opts.bounds.min));
    Ok(ProbeReport {
        version: 2,
        result: conclusion,
        max_batch: answer.largest_fit,
        recommended_batch: recommended,
        margin_pct: opts.margin_pct,
        min_oom_batch: answer.smallest_too_big,
        exact: conclusion == Conclusion::Exact,
        max: opts.bounds.top(),
        estimate: opts.bounds.estimate,
        interrupted,
        signal: if interrupted {
            opts.interrupt.and_then(Interrupts::last).map(|(s, _)| s)
        } else {
            None
        },
        trials,
    })
}

/// `batch · (1 − pct/100)` rounded down, never below `min` (which ran).
pub fn with_margin(batch: u64, pct: f64, min: u64) -> u64 {
    if pct.is_nan() || pct <= 0.0 {
        return batch;
    }
    let keep = (100.0 - pct.min(100.0)) / 100.0;
    // Batches are far below 2^53, so the float round trip is exact.
    let reduced = (batch as f64 * keep).floor();
    let reduced = if reduced.is_finite() && reduced >= 0.0 {
        reduced as u64
    } else {
        0
    };
    reduced.clamp(min.min(batch), batch)
}

fn run_trial(
    cmd: &CommandLine,
    hook: &Hook,
    opts: &ProbeOptions<'_>,
    batch: u64,
    index: u32,
) -> Result<Trial, Error> {
    let peak_file = hook.path(&format!("peak-{index}"));
    let mut c = cmd.for_batch(batch);
    c.env
        .extend(hook.env(&[(hook::PEAK_ENV, OsString::from(peak_file.as_os_str()))]));
    let f = runner::run(
        &c,
        runner::Options {
            timeout: opts.timeout,
            interrupt: opts.interrupt,
            grace: opts.grace,
            gpu: opts.gpu,
            ..runner::Options::default()
        },
    )?;
    let outcome = classify(&f);
    let oom_event = f.report.events.iter().find(|e| e.is_oom);
    let peak_bytes = hook::read_peak(&peak_file)
        .filter(|&b| b > 0)
        .or_else(|| match outcome {
            Outcome::Oom => oom_event.and_then(|e| {
                e.numbers
                    .this_process_bytes
                    .or(e.reserved_bytes)
                    .map(oomkit_core::Bytes::get)
            }),
            _ => None,
        });
    let detail = match outcome {
        Outcome::Oom if f.exit == Exit::Code(0) => Some(format!(
            "{} (exit status 0: the program caught the out-of-memory error)",
            oom_event
                .map(oomkit_explain::render::headline)
                .unwrap_or_default()
        )),
        Outcome::Oom => oom_event.map(oomkit_explain::render::headline),
        Outcome::Ok => None,
        Outcome::Timeout => opts
            .timeout
            .map(|t| format!("killed after {:.1}s", t.as_secs_f64())),
        // stderr first: stdout and stderr interleave in any order.
        Outcome::Error | Outcome::Interrupted => {
            last_line(&f.stderr_tail).or_else(|| last_line(&f.tail))
        }
    };
    let (exit_code, signal) = match f.exit {
        Exit::Code(c) => (Some(c), None),
        Exit::Signal(s) => (None, Some(s)),
    };
    Ok(Trial {
        batch,
        outcome,
        seconds: (f.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
        peak_bytes,
        gpu_peak_bytes: f.gpu_timeline.peak(),
        exit_code,
        signal,
        detail,
        confirmation: false,
    })
}

/// The trial's outcome from how it ended and what explain found.
pub fn classify(f: &Finished) -> Outcome {
    match f.killed {
        Some(Killed::Timeout) => return Outcome::Timeout,
        Some(Killed::Interrupt(_)) => return Outcome::Interrupted,
        None => {}
    }
    // An OOM anywhere in the output counts, whatever the exit status: a
    // program that caught it and exited 0 still ran out of memory.
    if f.report.has_oom() {
        Outcome::Oom
    } else if f.exit == Exit::Code(0) {
        Outcome::Ok
    } else {
        Outcome::Error
    }
}

/// The last non-empty line of the output, trimmed to 200 characters.
pub fn last_line(tail: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(tail);
    let line = text
        .split(['\n', '\r'])
        .map(str::trim)
        .rfind(|l| !l.is_empty())?;
    Some(line.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margin_rounds_down_and_keeps_min() {
        assert_eq!(with_margin(100, 5.0, 1), 95);
        assert_eq!(with_margin(37, 10.0, 1), 33);
        assert_eq!(with_margin(37, 0.0, 1), 37);
        assert_eq!(with_margin(3, 90.0, 2), 2);
        assert_eq!(with_margin(3, 100.0, 1), 1);
    }

    #[test]
    fn last_line_skips_blank_lines_and_progress_redraws() {
        assert_eq!(
            last_line(b"a\nValueError: odd batch\n\n").as_deref(),
            Some("ValueError: odd batch")
        );
        assert_eq!(last_line(b" 10%\r 20%\r").as_deref(), Some("20%"));
        assert_eq!(last_line(b"\n \n"), None);
    }

    #[test]
    fn a_probe_of_a_shell_stand_in_finds_the_threshold() {
        // Fits iff OOMKIT_BATCH_SIZE <= 12; prints a real PyTorch message above.
        let script = r#"if [ "$OOMKIT_BATCH_SIZE" -gt 12 ]; then echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 20.00 MiB is free. Including non-PyTorch memory, this process has 23.61 GiB memory in use.' >&2; exit 1; fi"#;
        let cmd = runner::argv(["sh", "-c", script]);
        let r = probe(
            &cmd,
            &ProbeOptions {
                bounds: Bounds {
                    min: 1,
                    max: Some(64),
                    estimate: None,
                },
                timeout: None,
                margin_pct: 10.0,
                interrupt: None,
                grace: runner::DEFAULT_GRACE,
                gpu: None,
            },
            |_| {},
        )
        .unwrap();
        assert_eq!(r.max_batch, Some(12));
        assert_eq!(r.recommended_batch, Some(10));
        assert!(r.exact);
        assert_eq!(r.result, Conclusion::Exact);
        assert_eq!(r.exit_code(), 0);
        // The boundary was confirmed: 13 ran twice, the second time as a
        // confirmation.
        let last = r.trials.last().unwrap();
        assert_eq!((last.batch, last.confirmation), (13, true));
        let oom = r.trials.iter().find(|t| t.outcome == Outcome::Oom).unwrap();
        let held: oomkit_core::Bytes = "23.61 GiB".parse().unwrap();
        assert_eq!(oom.peak_bytes, Some(held.get()));
    }
}
