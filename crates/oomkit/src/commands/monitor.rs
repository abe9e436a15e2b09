//! `oomkit monitor`: open NVML, then either the TUI (stdout is a terminal and
//! no scripting flag) or a sampling loop that prints each sample; in both,
//! every sample also goes to `--log`, `/metrics` and the `--alert-at` check.

use std::io::{IsTerminal, Write};
use std::process::Command as Process;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, anyhow};
use oomkit_core::Bytes;
use oomkit_monitor::alert::{Alerter, Threshold};
use oomkit_monitor::log::JsonLog;
use oomkit_monitor::render::{self, CsvOut};
use oomkit_monitor::sample::{Sample, Tracker};
use oomkit_monitor::{parse_interval, prometheus, tui};
use oomkit_nvml::{GpuReader, NvmlReader};

use crate::cli::{ColorChoice, MonitorArgs, MonitorFormat};
use crate::{interrupt, output};

/// What every sample goes to besides the screen.
struct Sinks {
    log: Option<JsonLog>,
    metrics: Option<prometheus::Shared>,
    alerter: Option<Alerter>,
    alert_cmd: Option<String>,
}

impl Sinks {
    /// Logs, publishes and checks a sample; returns the alerts it fired
    /// (the caller shows them: stderr, or the TUI's status line).
    fn take(&mut self, sample: &Sample) -> std::io::Result<Vec<String>> {
        if let Some(log) = &mut self.log {
            let line = serde_json::to_string(sample).map_err(std::io::Error::other)?;
            log.append(&line)?;
        }
        if let Some(shared) = &self.metrics
            && let Ok(mut latest) = shared.lock()
        {
            *latest = Some(sample.clone());
        }
        let mut fired = Vec::new();
        if let Some(alerter) = &mut self.alerter {
            for alert in alerter.check(&sample.gpus) {
                if let Some(cmd) = &self.alert_cmd {
                    spawn_alert(cmd, &alert)?;
                }
                fired.push(alert.message);
            }
        }
        Ok(fired)
    }
}

/// The node's name for the `Hostname` label: `$NODE_NAME` when set (the
/// DaemonSet in deploy/ sets it from the downward API's `spec.nodeName`, since
/// a pod's own hostname is the pod's name), else the kernel's hostname.
fn hostname() -> String {
    if let Ok(n) = std::env::var("NODE_NAME")
        && !n.trim().is_empty()
    {
        return n.trim().to_owned();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// Runs the alert command without waiting for it; a thread reaps it.
fn spawn_alert(cmd: &str, alert: &oomkit_monitor::alert::Alert) -> std::io::Result<()> {
    let mut child = Process::new("sh")
        .arg("-c")
        .arg(cmd)
        .env("OOMKIT_ALERT_GPU", alert.gpu.to_string())
        .env("OOMKIT_ALERT_UUID", alert.uuid.clone().unwrap_or_default())
        .env("OOMKIT_ALERT_USED_BYTES", alert.used.to_string())
        .env("OOMKIT_ALERT_TOTAL_BYTES", alert.total.to_string())
        .env("OOMKIT_ALERT_MESSAGE", &alert.message)
        .spawn()?;
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

pub fn run(args: MonitorArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let json = args.format == Some(MonitorFormat::Json);
    match monitor(args, color) {
        Ok(code) => Ok(code),
        Err(err) if json => {
            // Scripts reading JSON Lines get the failure as a line too.
            let mut msg = err.to_string();
            for cause in err.chain().skip(1) {
                msg.push_str(": ");
                msg.push_str(&cause.to_string());
            }
            let line =
                serde_json::json!({ "version": oomkit_monitor::sample::VERSION, "error": msg });
            let mut out = output::stdout(ColorChoice::Never);
            writeln!(out, "{line}")?;
            Err(err)
        }
        Err(err) => Err(err),
    }
}

fn monitor(args: MonitorArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let interval = parse_interval(&args.interval).map_err(|e| anyhow!("--interval: {e}"))?;
    let window = oomkit_core::duration::parse(&args.window)
        .ok()
        .filter(|w| *w >= Duration::from_secs(1) && *w <= Duration::from_secs(86_400))
        .ok_or_else(|| {
            anyhow!(
                "--window: invalid duration {:?} (between 1s and 24h, e.g. 60s, 5m)",
                args.window
            )
        })?;
    let log_max: Bytes = args
        .log_max_size
        .parse()
        .map_err(|e| anyhow!("--log-max-size: {e}"))?;
    if log_max.get() < 4096 {
        return Err(anyhow!(
            "--log-max-size: {log_max} is too small (at least 4 KiB, one sample must fit)"
        ));
    }
    let threshold = args
        .alert_at
        .as_deref()
        .map(str::parse::<Threshold>)
        .transpose()
        .map_err(|e| anyhow!("--alert-at: {e}"))?;

    let metrics_addr = args
        .prometheus
        .as_deref()
        .map(prometheus::parse_addr)
        .transpose()
        .map_err(|e| anyhow!("--prometheus: {e}"))?;

    let mut reader = NvmlReader::open()?;

    let log = match &args.log {
        Some(path) => Some(
            JsonLog::open(path, log_max.get())
                .with_context(|| format!("cannot open log file {}", path.display()))?,
        ),
        None => None,
    };
    let metrics = match &metrics_addr {
        Some(addr) => {
            let shared: prometheus::Shared = Arc::new(Mutex::new(None));
            let opts = prometheus::Options {
                hostname: hostname(),
                command_lines: args.metrics_command_lines,
            };
            let bound =
                prometheus::serve(addr, Arc::clone(&shared), opts).map_err(|e| anyhow!(e))?;
            writeln!(
                output::stderr(color),
                "serving Prometheus metrics on http://{bound}/metrics"
            )?;
            Some(shared)
        }
        None => None,
    };
    let mut sinks = Sinks {
        log,
        metrics,
        alerter: threshold.map(Alerter::new),
        alert_cmd: args.alert_cmd.clone(),
    };
    let mut tracker = Tracker::new(window.as_secs_f64());
    let stop = interrupt::install()?;

    let scripted = args.once || args.format.is_some() || args.count.is_some();
    if !scripted && std::io::stdout().is_terminal() {
        tui::run(&mut reader, &mut tracker, interval, &stop, |s| {
            sinks.take(s)
        })
        .context("terminal interface failed")?;
        return Ok(0);
    }
    let count = if args.once { Some(1) } else { args.count };
    let format = args.format.unwrap_or(MonitorFormat::Human);
    sample_loop(
        &mut reader,
        &mut tracker,
        &mut sinks,
        interval,
        count,
        format,
        &stop,
        color,
    )?;
    Ok(0)
}

#[allow(clippy::too_many_arguments)]
fn sample_loop(
    reader: &mut dyn GpuReader,
    tracker: &mut Tracker,
    sinks: &mut Sinks,
    interval: Duration,
    count: Option<u64>,
    format: MonitorFormat,
    stop: &AtomicUsize,
    color: ColorChoice,
) -> anyhow::Result<()> {
    let driver = reader.driver_version();
    let start = Instant::now();
    let mut next = start;
    let mut taken: u64 = 0;
    let mut csv = CsvOut::new(output::stdout(color));
    loop {
        let sample = tracker.observe(
            start.elapsed().as_secs_f64(),
            SystemTime::now(),
            reader.read(),
        );
        match format {
            MonitorFormat::Json => {
                let mut out = output::stdout(color);
                writeln!(out, "{}", serde_json::to_string(&sample)?)?;
                out.flush()?;
            }
            MonitorFormat::Csv => csv.write(&sample)?,
            MonitorFormat::Human => {
                let mut out = output::stdout(color);
                let sep = if taken > 0 { "\n" } else { "" };
                write!(out, "{sep}{}", render::human(&sample, driver.as_deref()))?;
                out.flush()?;
            }
        }
        for message in sinks.take(&sample)? {
            writeln!(output::stderr(color), "warning: {message}")?;
        }
        taken = taken.saturating_add(1);
        if count.is_some_and(|c| taken >= c) {
            return Ok(());
        }
        next += interval;
        // Sleep in short steps so a signal ends the loop promptly.
        loop {
            if stop.load(Ordering::Relaxed) != 0 {
                return Ok(());
            }
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
        // Behind schedule (a slow driver call): skip ahead rather than burst.
        let now = Instant::now();
        if next + interval < now {
            next = now;
        }
    }
}
