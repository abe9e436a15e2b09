//! Text output of samples: the human table (`--once`, or each sample when
//! stdout is not a terminal) and CSV rows (`--format csv`).
//!
//! Sizes print as PyTorch prints them ([`oomkit_core::Bytes`], binary GiB),
//! growth per minute (a leak of 3 MiB/s reads better as 180 MiB/min), and
//! forecasts as durations.

use std::fmt::Write as _;
use std::time::Duration;

use oomkit_core::Bytes;

use crate::sample::{Forecast, GpuSample, ProcessSample, Sample};

/// `+180.00 MiB/min`, `-1.20 GiB/min`, `0` for a flat series.
pub fn growth(bytes_per_s: f64) -> String {
    let per_min = bytes_per_s * 60.0;
    if per_min.abs() < 1.0 {
        return "flat".to_owned();
    }
    let sign = if per_min > 0.0 { '+' } else { '-' };
    // `as` saturates; a slope past u64::MAX bytes/min is not a real reading.
    format!("{sign}{}/min", Bytes(per_min.abs() as u64))
}

/// The evidence of a forecast: `leaking +20.00 MiB/min, 5 steps over 1m 20s,
/// last 12s ago`.
pub fn evidence(f: &Forecast) -> String {
    format!(
        "leaking {}, {} steps over {}, last {} ago",
        growth(f.growth_bytes_per_s),
        f.steps,
        eta(f.regime_s),
        eta(f.since_last_step_s)
    )
}

/// `12m 3s` (rounded to whole seconds; hours and days as humantime prints them).
pub fn eta(seconds: f64) -> String {
    let secs = if seconds.is_finite() && seconds > 0.0 {
        seconds.round() as u64
    } else {
        0
    };
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

fn opt<T: std::fmt::Display>(v: Option<T>, unit: &str) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v}{unit}"))
}

/// The command of a process for display (the program's file name, then its
/// arguments: `python3 train.py --lr 3e-4`, not the interpreter's full path),
/// or why it is unknown. JSON keeps the full command line.
pub fn command(p: &ProcessSample) -> String {
    let Some(cmd) = &p.command else {
        return "(not in this PID namespace)".to_owned();
    };
    let (program, rest) = cmd.split_once(' ').unwrap_or((cmd.as_str(), ""));
    let name = program.rsplit('/').next().unwrap_or(program);
    if rest.is_empty() {
        name.to_owned()
    } else {
        format!("{name} {rest}")
    }
}

/// One GPU as text lines.
pub fn gpu(out: &mut String, g: &GpuSample) {
    let name = g.name.as_deref().unwrap_or("(unknown GPU)");
    let mig = g.mig.map_or_else(String::new, |m| format!(" MIG {m}"));
    let _ = writeln!(
        out,
        "GPU {}{mig}  {name}  {}",
        g.index,
        g.uuid.as_deref().unwrap_or("")
    );
    if let Some(err) = &g.error {
        let _ = writeln!(out, "  error: {err}");
    }
    if !g.refused.is_empty() {
        let _ = writeln!(out, "  refused: {}", g.refused.join("; "));
    }
    if let (Some(used), Some(total)) = (g.memory_used_bytes, g.memory_total_bytes) {
        let pct = g.used_ratio().unwrap_or(0.0) * 100.0;
        let _ = writeln!(
            out,
            "  memory   {} / {} used ({pct:.1}%), {} free{}",
            Bytes(used),
            Bytes(total),
            Bytes(g.free_bytes().unwrap_or(0)),
            match (g.memory_source.as_deref(), g.memory_reserved_bytes) {
                (Some("system"), _) =>
                    " (unified memory: the host's, from /proc/meminfo)".to_owned(),
                (Some("nvml_v1"), _) =>
                    " (driver < 510: used includes the driver's reserve)".to_owned(),
                (_, Some(r)) if r > 0 => format!(", {} reserved by the driver", Bytes(r)),
                _ => String::new(),
            }
        );
    }
    if g.error.is_none() {
        let _ = writeln!(
            out,
            "  util {}   temp {}   power {}",
            opt(g.utilization_pct, "%"),
            opt(g.temperature_c, " °C"),
            opt(g.power_w.map(|w| format!("{w:.1}")), " W"),
        );
    }
    if let Some(rate) = g.growth_bytes_per_s {
        let _ = writeln!(out, "  growth   {} over the window", growth(rate));
    }
    if let (Some(s), Some(f)) = (g.oom_eta_s, &g.forecast) {
        let _ = writeln!(
            out,
            "  forecast out of memory in {}: {}",
            eta(s),
            evidence(f)
        );
    }
    if g.processes.is_empty() {
        if g.error.is_none() {
            let _ = writeln!(out, "  no processes");
        }
        return;
    }
    let _ = writeln!(
        out,
        "  {:>8}  {:<10} {:>12}  {:>16}  COMMAND",
        "PID", "USER", "MEMORY", "GROWTH"
    );
    for p in &g.processes {
        let _ = writeln!(
            out,
            "  {:>8}  {:<10} {:>12}  {:>16}  {}",
            p.pid,
            p.user.as_deref().unwrap_or("?"),
            p.used_bytes
                .map_or_else(|| "n/a".to_owned(), |b| Bytes(b).to_string()),
            p.growth_bytes_per_s.map_or_else(String::new, growth),
            command(p),
        );
        if let (Some(s), Some(f)) = (p.oom_eta_s, &p.forecast) {
            let _ = writeln!(
                out,
                "  {:>8}  GPU out of memory in {} at this process's rate: {}",
                "",
                eta(s),
                evidence(f)
            );
        }
    }
    let listed = g
        .processes
        .iter()
        .try_fold(0u64, |acc, p| p.used_bytes.map(|b| acc.saturating_add(b)));
    if let (Some(listed), Some(used)) = (listed, g.memory_used_bytes) {
        let rest = used.saturating_sub(listed);
        if rest > 0 {
            let _ = writeln!(
                out,
                "  ({} used outside these processes: the driver's reserve, other containers, graphics)",
                Bytes(rest)
            );
        }
    }
}

/// A whole sample as text.
pub fn human(sample: &Sample, driver: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}{}",
        sample.time,
        driver.map_or_else(String::new, |d| format!("  driver {d}"))
    );
    if sample.gpus.is_empty() {
        let _ = writeln!(out, "no NVIDIA GPU found");
    }
    for g in &sample.gpus {
        gpu(&mut out, g);
    }
    out
}

/// CSV header (one row per GPU per sample; processes are in the JSON output).
pub const CSV_HEADER: [&str; 13] = [
    "time",
    "gpu",
    "uuid",
    "name",
    "memory_used_bytes",
    "memory_total_bytes",
    "utilization_pct",
    "temperature_c",
    "power_w",
    "growth_bytes_per_s",
    "oom_eta_s",
    "processes",
    "error",
];

fn cell<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// CSV rows of a sample, one per GPU (empty cell: not supported / unknown).
pub fn csv_rows(sample: &Sample) -> Vec<[String; 13]> {
    sample
        .gpus
        .iter()
        .map(|g| {
            [
                sample.time.clone(),
                g.index.to_string(),
                cell(g.uuid.as_ref()),
                cell(g.name.as_ref()),
                cell(g.memory_used_bytes),
                cell(g.memory_total_bytes),
                cell(g.utilization_pct),
                cell(g.temperature_c),
                cell(g.power_w),
                cell(g.growth_bytes_per_s.map(|v| format!("{v:.1}"))),
                cell(g.oom_eta_s.map(|v| format!("{v:.1}"))),
                g.processes.len().to_string(),
                cell(g.error.as_ref()),
            ]
        })
        .collect()
}

/// `--format csv` on any writer: the header once, then rows, flushed per sample.
pub struct CsvOut<W: std::io::Write> {
    w: csv::Writer<W>,
    header_done: bool,
}

impl<W: std::io::Write> CsvOut<W> {
    /// A CSV writer over `w`.
    pub fn new(w: W) -> Self {
        CsvOut {
            w: csv::Writer::from_writer(w),
            header_done: false,
        }
    }

    /// Writes a sample's rows (the header before the first).
    pub fn write(&mut self, sample: &Sample) -> std::io::Result<()> {
        if !self.header_done {
            self.w.write_record(CSV_HEADER)?;
            self.header_done = true;
        }
        for row in csv_rows(sample) {
            self.w.write_record(&row)?;
        }
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_shows_the_program_name() {
        let mut p = ProcessSample {
            pid: 1,
            user: None,
            command: Some("/usr/bin/python3 train.py --lr 3e-4".into()),
            used_bytes: None,
            growth_bytes_per_s: None,
            oom_eta_s: None,
            container_pid: None,
            forecast: None,
        };
        assert_eq!(command(&p), "python3 train.py --lr 3e-4");
        p.command = Some("/opt/venv/bin/torchrun".into());
        assert_eq!(command(&p), "torchrun");
        p.command = None;
        assert_eq!(command(&p), "(not in this PID namespace)");
    }

    #[test]
    fn growth_and_eta_text() {
        assert_eq!(growth(3.0 * 1024.0 * 1024.0), "+180.00 MiB/min");
        assert_eq!(
            growth(-2.0 * 1024.0 * 1024.0 * 1024.0 / 60.0),
            "-2.00 GiB/min"
        );
        assert_eq!(growth(0.001), "flat");
        assert_eq!(eta(723.4), "12m 3s");
        assert_eq!(eta(f64::NAN), "0s");
    }
}
