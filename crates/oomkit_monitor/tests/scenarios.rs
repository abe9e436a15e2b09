//! The forecast's scenario benchmark: scripted memory series with their truth
//! (`bench/monitor/scenarios/*.json`), fed sample by sample to the library's
//! [`Tracker`] — the code every output of `oomkit monitor` goes through — and
//! scored. Deterministic (no clock, no randomness but a fixed hash) and fast,
//! so it runs in `cargo test`; `cargo test -p oomkit_monitor --test scenarios
//! -- --nocapture` prints the table that docs/monitor.md shows.
//!
//! Definitions (docs/monitor.md, "Scenario benchmark"):
//! - a *flag* is a sample with a forecast (`oom_eta_s` set);
//! - an *alert* is a forecast held for [`ALERT_FOR_S`] seconds in a row, what
//!   the alert rule in `deploy/prometheus/oomkit-rules.yml` waits for;
//! - a leak is *detectable* from its first step or the fifth sample,
//!   whichever is later (no slope exists before five samples); the latency
//!   is the number of the leak's steps (its period, or one sampling interval
//!   for a linear leak) from then to the first flag;
//! - the true time to OOM at a sample is when the scripted series first
//!   reaches the GPU's usable memory (total − the driver's reserve).
#![allow(clippy::indexing_slicing)] // test code: a bad index is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use oomkit_core::{GpuReading, ProcessReading};
use oomkit_monitor::sample::Tracker;
use serde::Deserialize;

/// How long a forecast must hold to count as an alert (the rule's `for: 1m`).
const ALERT_FOR_S: f64 = 60.0;
/// Goals: steps from detectable to the first flag, and forecast error.
const MAX_LATENCY_STEPS: f64 = 3.0;
const MAX_ETA_ERROR: f64 = 0.20;
/// Samples a forecast may outlive the end of growth (a ramp that went flat).
const MAX_STALE_SAMPLES: usize = 3;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    name: String,
    #[allow(dead_code)]
    about: String,
    interval_s: f64,
    duration_s: f64,
    window_s: f64,
    total_bytes: u64,
    reserved_bytes: u64,
    base_used_bytes: u64,
    #[serde(default)]
    growth_stops_s: Option<f64>,
    processes: Vec<Process>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Process {
    pid: u32,
    leak: bool,
    start_bytes: u64,
    parts: Vec<Part>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Part {
    /// `rate` bytes/s from `start_s` to `end_s`.
    Linear {
        rate_bytes_per_s: f64,
        start_s: f64,
        #[serde(default)]
        end_s: Option<f64>,
    },
    /// `size` bytes at `start_s` and every `period_s` after.
    Steps {
        size_bytes: u64,
        period_s: f64,
        start_s: f64,
    },
    /// Rises from 0 to `amplitude` over `period_s`, drops back, repeats.
    Saw { amplitude_bytes: u64, period_s: f64 },
    /// `amplitude` for `width_s` every `period_s` from `start_s`.
    Spikes {
        amplitude_bytes: u64,
        period_s: f64,
        width_s: f64,
        start_s: f64,
    },
    /// Uniform jitter in [0, amplitude] per sample (a fixed hash, not a RNG).
    Noise { amplitude_bytes: u64 },
    /// Grows `steps` × `size` every `step_s`, then frees it all; every `period_s`.
    Cycles {
        size_bytes: u64,
        step_s: f64,
        steps: u32,
        period_s: f64,
        start_s: f64,
    },
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl Part {
    fn at(&self, t: f64, sample: u64, pid: u32) -> f64 {
        match *self {
            Part::Linear {
                rate_bytes_per_s,
                start_s,
                end_s,
            } => rate_bytes_per_s * (t.min(end_s.unwrap_or(f64::MAX)) - start_s).max(0.0),
            Part::Steps {
                size_bytes,
                period_s,
                start_s,
            } => {
                if t < start_s {
                    0.0
                } else {
                    size_bytes as f64 * (((t - start_s) / period_s).floor() + 1.0)
                }
            }
            Part::Saw {
                amplitude_bytes,
                period_s,
            } => amplitude_bytes as f64 * ((t % period_s) / period_s),
            Part::Spikes {
                amplitude_bytes,
                period_s,
                width_s,
                start_s,
            } => {
                if t >= start_s && (t - start_s) % period_s < width_s {
                    amplitude_bytes as f64
                } else {
                    0.0
                }
            }
            Part::Noise { amplitude_bytes } => {
                let h = splitmix((u64::from(pid) << 40) ^ sample);
                amplitude_bytes as f64 * (h as f64 / u64::MAX as f64)
            }
            Part::Cycles {
                size_bytes,
                step_s,
                steps,
                period_s,
                start_s,
            } => {
                if t < start_s {
                    return 0.0;
                }
                let phase = (t - start_s) % period_s;
                let k = (phase / step_s).floor() + 1.0;
                if k > f64::from(steps) {
                    0.0
                } else {
                    size_bytes as f64 * k
                }
            }
        }
    }

    /// The leak's step period, for latencies (`None`: not a leak part).
    fn step_s(&self, interval: f64) -> Option<(f64, f64)> {
        match *self {
            Part::Linear {
                start_s,
                end_s: None,
                ..
            } => Some((start_s + interval, interval)),
            Part::Steps {
                period_s, start_s, ..
            } => Some((start_s, period_s)),
            _ => None,
        }
    }
}

impl Process {
    fn used(&self, t: f64, sample: u64) -> u64 {
        let v = self.start_bytes as f64
            + self
                .parts
                .iter()
                .map(|p| p.at(t, sample, self.pid))
                .sum::<f64>();
        v.max(0.0) as u64
    }
}

impl Scenario {
    fn usable(&self) -> u64 {
        self.total_bytes - self.reserved_bytes
    }

    fn used(&self, t: f64, sample: u64) -> u64 {
        self.processes
            .iter()
            .map(|p| p.used(t, sample))
            .fold(self.base_used_bytes, u64::saturating_add)
    }

    /// When the scripted series first fills the GPU (within two days), at
    /// sampling resolution: a scan every `stride` samples (about a second),
    /// then every sample of the stride where it crossed.
    fn oom_at(&self) -> Option<f64> {
        let n = (2.0 * 86_400.0 / self.interval_s) as u64;
        let stride = ((1.0 / self.interval_s).round() as u64).max(1);
        let full = |i: u64| self.used(i as f64 * self.interval_s, i) >= self.usable();
        let coarse = (0..n).step_by(stride as usize).find(|&i| full(i))?;
        let fine = (coarse.saturating_sub(stride)..=coarse).find(|&i| full(i))?;
        Some(fine as f64 * self.interval_s)
    }

    fn reading(&self, t: f64, i: u64) -> GpuReading {
        GpuReading {
            index: 0,
            name: Some("NVIDIA H100 80GB HBM3".into()),
            uuid: Some("GPU-bench".into()),
            memory_total_bytes: Some(self.total_bytes),
            memory_used_bytes: Some(self.used(t, i).min(self.usable())),
            memory_reserved_bytes: Some(self.reserved_bytes),
            processes: self
                .processes
                .iter()
                .map(|p| ProcessReading {
                    pid: p.pid,
                    used_bytes: Some(p.used(t, i)),
                    ..ProcessReading::default()
                })
                .collect(),
            ..GpuReading::default()
        }
    }
}

/// One scored series: a GPU, or a process on it.
#[derive(Default)]
struct Row {
    scenario: String,
    series: String,
    leak: bool,
    /// (time, forecast present, eta) per sample.
    flags: Vec<(f64, Option<f64>)>,
    /// (first step time, step period) of a leak.
    leak_steps: Option<(f64, f64)>,
}

struct Score {
    alert: bool,
    flagged_samples: usize,
    latency_steps: Option<f64>,
    eta_median: Option<f64>,
    eta_p90: Option<f64>,
    stale_samples: Option<usize>,
}

fn quantile(v: &mut [f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v.get(i).copied()
}

fn score(row: &Row, sc: &Scenario, oom_at: Option<f64>) -> Score {
    let mut streak_from: Option<f64> = None;
    let mut alert = false;
    for &(t, eta) in &row.flags {
        match (eta, streak_from) {
            (Some(_), None) => streak_from = Some(t),
            (None, _) => streak_from = None,
            _ => {}
        }
        if streak_from.is_some_and(|s| t - s >= ALERT_FOR_S) {
            alert = true;
        }
    }
    let flagged_samples = row.flags.iter().filter(|f| f.1.is_some()).count();
    let fifth = 4.0 * sc.interval_s;
    let latency_steps = row.leak_steps.and_then(|(first, period)| {
        let detectable = first.max(fifth);
        row.flags
            .iter()
            .find(|f| f.0 >= detectable && f.1.is_some())
            .map(|f| (f.0 - detectable) / period)
    });
    let mut errors: Vec<f64> = match (row.leak, oom_at) {
        (true, Some(oom)) => row
            .flags
            .iter()
            .filter_map(|&(t, eta)| {
                let truth = oom - t;
                Some((eta? - truth).abs() / truth)
            })
            .collect(),
        _ => Vec::new(),
    };
    let stale_samples = sc.growth_stops_s.map(|stop| {
        // Samples with a forecast after growth stopped and before the next
        // leak (if any) began.
        let next = row.leak_steps.map_or(f64::MAX, |(first, _)| first);
        row.flags
            .iter()
            .filter(|f| f.0 > stop && f.0 < next && f.1.is_some())
            .count()
    });
    Score {
        alert,
        flagged_samples,
        latency_steps,
        eta_median: quantile(&mut errors, 0.5),
        eta_p90: quantile(&mut errors, 0.9),
        stale_samples,
    }
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/monitor/scenarios")
}

fn run(sc: &Scenario, file: &str) -> Vec<Row> {
    let mut tracker = Tracker::new(sc.window_s);
    let n = (sc.duration_s / sc.interval_s).round() as u64;
    let leak_steps = |p: &Process| {
        p.parts
            .iter()
            .filter_map(|part| part.step_s(sc.interval_s))
            .next_back()
    };
    let mut gpu = Row {
        scenario: file.to_owned(),
        series: "GPU".into(),
        leak: sc.processes.iter().any(|p| p.leak),
        leak_steps: sc
            .processes
            .iter()
            .filter(|p| p.leak)
            .filter_map(leak_steps)
            .next(),
        ..Row::default()
    };
    let mut procs: BTreeMap<u32, Row> = sc
        .processes
        .iter()
        .map(|p| {
            (
                p.pid,
                Row {
                    scenario: file.to_owned(),
                    series: format!("process {}", p.pid),
                    leak: p.leak,
                    leak_steps: if p.leak { leak_steps(p) } else { None },
                    ..Row::default()
                },
            )
        })
        .collect();
    for i in 0..n {
        let t = i as f64 * sc.interval_s;
        let wall = UNIX_EPOCH + Duration::from_secs_f64(t);
        let s = tracker.observe(t, wall, vec![sc.reading(t, i)]);
        let g = &s.gpus[0];
        assert_eq!(g.oom_eta_s.is_some(), g.forecast.is_some());
        gpu.flags.push((t, g.oom_eta_s));
        for p in &g.processes {
            if let Some(row) = procs.get_mut(&p.pid) {
                row.flags.push((t, p.oom_eta_s));
            }
        }
    }
    let mut rows = vec![gpu];
    if sc.processes.len() > 1 {
        rows.extend(procs.into_values());
    }
    rows
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{:.1} %", v * 100.0))
}

#[test]
fn scenario_benchmark_meets_its_goals() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .expect("bench/monitor/scenarios")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    let mut table = String::from(
        "| scenario | series | truth | alert | flagged samples | first flag (steps after detectable) | after growth stopped | time-to-OOM error, median / p90 |\n|---|---|---|---|---|---|---|---|\n",
    );
    let (mut tp, mut fp, mut fn_) = (0, 0, 0);
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("scenario");
        let sc: Scenario = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{f:?}: {e}"));
        let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
        let oom_at = sc.oom_at();
        for row in run(&sc, &stem) {
            let s = score(&row, &sc, oom_at);
            match (row.leak, s.alert) {
                (true, true) => tp += 1,
                (false, true) => fp += 1,
                (true, false) => fn_ += 1,
                _ => {}
            }
            let name = format!("{} / {}", row.scenario, row.series);
            if row.leak {
                match s.latency_steps {
                    Some(l) if l <= MAX_LATENCY_STEPS => {}
                    other => failures.push(format!("{name}: first flag {other:?} steps")),
                }
                if oom_at.is_none() {
                    failures.push(format!("{name}: a leak scenario must reach OOM"));
                }
                if s.eta_median.is_none_or(|e| e > MAX_ETA_ERROR) {
                    failures.push(format!("{name}: median ETA error {:?}", s.eta_median));
                }
            } else if s.alert {
                failures.push(format!("{name}: false alert"));
            }
            if s.stale_samples.is_some_and(|n| n > MAX_STALE_SAMPLES) {
                failures.push(format!("{name}: {:?} stale samples", s.stale_samples));
            }
            table.push_str(&format!(
                "| {} | {} | {} | {} | {} / {} | {} | {} | {} / {} |\n",
                sc.name,
                row.series,
                if row.leak { "leak" } else { "no leak" },
                if s.alert { "yes" } else { "no" },
                s.flagged_samples,
                row.flags.len(),
                s.latency_steps
                    .map_or_else(|| "–".to_owned(), |l| format!("{l:.1}")),
                s.stale_samples
                    .map_or_else(|| "–".to_owned(), |n| format!("{n} samples")),
                pct(s.eta_median),
                pct(s.eta_p90),
            ));
        }
    }
    let precision = f64::from(tp) / f64::from((tp + fp).max(1));
    let recall = f64::from(tp) / f64::from((tp + fn_).max(1));
    table.push_str(&format!(
        "\nAlert precision {:.0} % ({tp} of {}), recall {:.0} % ({tp} of {}).\n",
        precision * 100.0,
        tp + fp,
        recall * 100.0,
        tp + fn_
    ));
    println!("{table}");
    assert!(failures.is_empty(), "{failures:#?}\n{table}");
    assert_eq!(fp, 0);
    assert_eq!(fn_, 0);
}
