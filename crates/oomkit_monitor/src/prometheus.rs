//! `/metrics` in Prometheus' text exposition format (version 0.0.4,
//! <https://prometheus.io/docs/instrumenting/exposition_formats/>), served
//! over HTTP by `tiny_http` on a thread of its own.
//!
//! Each scrape gets the latest sample rendered afresh: series of processes that
//! have exited simply stop appearing (Prometheus marks them stale), which a
//! registry of long-lived gauges would have to track by hand. That is why the
//! text is written here rather than through a metrics registry crate: there is
//! no state to keep, only escaping (`\\`, `"`, newline in label values).
//!
//! Names follow Prometheus' conventions: base units (bytes, seconds, ratios
//! 0–1), `_bytes`/`_seconds`/`_ratio` suffixes. GPU labels are NVIDIA
//! DCGM exporter's (`gpu`, `UUID`, `modelName`, `Hostname`; dcgm-exporter's
//! `pkg/dcgmexporter` label names), plus `mig_index` for a MIG device (its
//! index under the GPU; DCGM's `GPU_I_ID` is the GPU-instance id, which
//! `nvml-wrapper` does not read), so
//! the two join without relabelling. Process series add `pid`, and
//! `command` only when [`Options::command_lines`] is set (cut to
//! [`COMMAND_LABEL_CHARS`] characters): a command line can hold paths,
//! tokens and other users' business, and `/metrics` has no authentication.
//!
//! [`DEFAULT_ADDR`] is loopback on a port outside the 9100–9999 range the
//! Prometheus wiki's "Default port allocations" list hands to exporters (9835,
//! the first monitor's choice, is taken there by a GPU exporter).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::sample::{GpuSample, Sample};

/// Longest `command` label, characters.
pub const COMMAND_LABEL_CHARS: usize = 120;

/// The port `--prometheus` serves on when none is given.
pub const DEFAULT_PORT: u16 = 19180;
/// The address `--prometheus` serves on when none is given: loopback only.
pub const DEFAULT_ADDR: &str = "127.0.0.1:19180";

/// What `/metrics` carries besides the figures.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The `Hostname` label (DCGM exporter's): the node's name.
    pub hostname: String,
    /// Add each process's command line as a `command` label (off by default).
    pub command_lines: bool,
}

/// `--prometheus` address: `HOST:PORT`, `:PORT` or `PORT` (loopback), or
/// nothing ([`DEFAULT_ADDR`]).
pub fn parse_addr(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(DEFAULT_ADDR.to_owned());
    }
    let port_only = s.strip_prefix(':').unwrap_or(s);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(format!("127.0.0.1:{port}"));
    }
    s.parse::<SocketAddr>()
        .map(|a| a.to_string())
        .map_err(|_| format!("invalid address {s:?} (expected HOST:PORT, :PORT or PORT, e.g. 127.0.0.1:{DEFAULT_PORT})"))
}

/// Every metric: name, type, help. The README's table is checked against this list.
pub const METRICS: [(&str, &str, &str); 12] = [
    (
        "oomkit_gpu_up",
        "gauge",
        "1 when the GPU answered, 0 when it could not be read at all (lost); a refused query leaves its metric absent, not this 0",
    ),
    (
        "oomkit_gpu_memory_used_bytes",
        "gauge",
        "GPU memory in use as NVML reports it, bytes (drivers >= 510: without the driver's reserve; unified memory: the host's used memory)",
    ),
    (
        "oomkit_gpu_memory_total_bytes",
        "gauge",
        "GPU memory total, bytes",
    ),
    (
        "oomkit_gpu_memory_free_bytes",
        "gauge",
        "GPU memory free, bytes",
    ),
    (
        "oomkit_gpu_utilization_ratio",
        "gauge",
        "GPU utilisation over the driver's sample period, 0-1",
    ),
    (
        "oomkit_gpu_temperature_celsius",
        "gauge",
        "GPU temperature, degrees Celsius",
    ),
    (
        "oomkit_gpu_power_watts",
        "gauge",
        "GPU board power draw, watts",
    ),
    (
        "oomkit_gpu_memory_growth_bytes_per_second",
        "gauge",
        "Theil-Sen slope of used memory over the window, bytes/s (any sign; not a forecast)",
    ),
    (
        "oomkit_gpu_oom_eta_seconds",
        "gauge",
        "Seconds until free memory is gone at the current leak's rate (absent when no leak is forecast)",
    ),
    (
        "oomkit_process_gpu_memory_bytes",
        "gauge",
        "GPU memory held by a process, bytes",
    ),
    (
        "oomkit_process_gpu_memory_growth_bytes_per_second",
        "gauge",
        "Theil-Sen slope of a process's GPU memory, bytes/s",
    ),
    (
        "oomkit_process_oom_eta_seconds",
        "gauge",
        "Seconds until the GPU's free memory is gone at this process's leak rate (absent when no leak is forecast)",
    ),
];

/// A label value escaped per the exposition format.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn gpu_labels(g: &GpuSample, opts: &Options) -> String {
    let mut l = format!(
        "gpu=\"{}\",UUID=\"{}\",modelName=\"{}\",Hostname=\"{}\"",
        g.index,
        escape(g.uuid.as_deref().unwrap_or("")),
        escape(g.name.as_deref().unwrap_or("")),
        escape(&opts.hostname)
    );
    if let Some(m) = g.mig {
        l.push_str(&format!(",mig_index=\"{m}\""));
    }
    l
}

/// The metrics text for one sample.
pub fn render(sample: &Sample, opts: &Options) -> String {
    let mut out = String::new();
    for (name, kind, help) in METRICS {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for g in &sample.gpus {
            let labels = gpu_labels(g, opts);
            let value: Option<f64> = match name {
                "oomkit_gpu_up" => Some(if g.error.is_none() { 1.0 } else { 0.0 }),
                "oomkit_gpu_memory_used_bytes" => g.memory_used_bytes.map(|b| b as f64),
                "oomkit_gpu_memory_total_bytes" => g.memory_total_bytes.map(|b| b as f64),
                "oomkit_gpu_memory_free_bytes" => g.free_bytes().map(|b| b as f64),
                "oomkit_gpu_utilization_ratio" => g.utilization_pct.map(|p| f64::from(p) / 100.0),
                "oomkit_gpu_temperature_celsius" => g.temperature_c.map(f64::from),
                "oomkit_gpu_power_watts" => g.power_w,
                "oomkit_gpu_memory_growth_bytes_per_second" => g.growth_bytes_per_s,
                "oomkit_gpu_oom_eta_seconds" => g.oom_eta_s,
                _ => None,
            };
            if let Some(v) = value {
                let _ = writeln!(out, "{name}{{{labels}}} {v}");
            }
            if !name.starts_with("oomkit_process_") {
                continue;
            }
            for p in &g.processes {
                let value = match name {
                    "oomkit_process_gpu_memory_bytes" => p.used_bytes.map(|b| b as f64),
                    "oomkit_process_gpu_memory_growth_bytes_per_second" => p.growth_bytes_per_s,
                    "oomkit_process_oom_eta_seconds" => p.oom_eta_s,
                    _ => None,
                };
                let Some(v) = value else { continue };
                let command = if opts.command_lines {
                    let c: String = p
                        .command
                        .as_deref()
                        .unwrap_or("")
                        .chars()
                        .take(COMMAND_LABEL_CHARS)
                        .collect();
                    format!(",command=\"{}\"", escape(&c))
                } else {
                    String::new()
                };
                let _ = writeln!(out, "{name}{{{labels},pid=\"{}\"{command}}} {v}", p.pid);
            }
        }
    }
    out
}

/// The latest sample, shared between the sampler and the HTTP thread. The
/// text is rendered per scrape (seconds apart), not per sample (10 Hz): the
/// sampler only swaps in a new sample.
pub type Shared = Arc<Mutex<Option<Sample>>>;

/// Serves `/metrics` from `shared` on `addr` in a background thread; returns
/// the bound address (port 0 picks a free one).
pub fn serve(addr: &str, shared: Shared, opts: Options) -> Result<SocketAddr, String> {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| format!("cannot serve Prometheus metrics on {addr}: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| format!("cannot serve Prometheus metrics on {addr}: not an IP address"))?;
    std::thread::spawn(move || {
        for request in server.incoming_requests() {
            let path = request.url().split('?').next().unwrap_or("").to_owned();
            let response = match path.as_str() {
                "/metrics" => {
                    let body = shared
                        .lock()
                        .ok()
                        .and_then(|s| s.as_ref().map(|s| render(s, &opts)))
                        .unwrap_or_default();
                    let mut r = tiny_http::Response::from_string(body);
                    if let Ok(h) = tiny_http::Header::from_bytes(
                        &b"Content-Type"[..],
                        &b"text/plain; version=0.0.4; charset=utf-8"[..],
                    ) {
                        r.add_header(h);
                    }
                    r
                }
                "/" => tiny_http::Response::from_string(
                    "oomkit monitor: metrics at /metrics\n".to_owned(),
                ),
                _ => {
                    tiny_http::Response::from_string("not found\n".to_owned()).with_status_code(404)
                }
            };
            // A client that hung up is its own problem, not the monitor's.
            let _ = request.respond(response);
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::ProcessSample;

    #[test]
    fn labels_escaped_and_nulls_absent() {
        let s = Sample {
            version: 1,
            time: "t".into(),
            gpus: vec![GpuSample {
                index: 0,
                name: Some("A \"quoted\" GPU".into()),
                uuid: Some("GPU-1".into()),
                memory_total_bytes: Some(100),
                memory_used_bytes: Some(40),
                memory_reserved_bytes: None,
                utilization_pct: Some(50),
                temperature_c: None,
                power_w: None,
                growth_bytes_per_s: None,
                oom_eta_s: None,
                error: None,
                mig: None,
                memory_source: None,
                forecast: None,
                refused: vec![],
                processes: vec![ProcessSample {
                    pid: 9,
                    user: None,
                    command: Some("python a\\b.py\n".into()),
                    used_bytes: Some(30),
                    growth_bytes_per_s: Some(1.5),
                    oom_eta_s: None,
                    container_pid: None,
                    forecast: None,
                }],
            }],
        };
        let mut opts = Options {
            hostname: "node-1".into(),
            command_lines: false,
        };
        let text = render(&s, &opts);
        let labels =
            "gpu=\"0\",UUID=\"GPU-1\",modelName=\"A \\\"quoted\\\" GPU\",Hostname=\"node-1\"";
        assert!(
            text.contains(&format!("oomkit_gpu_memory_used_bytes{{{labels}}} 40\n")),
            "{text}"
        );
        assert!(text.contains(&format!("oomkit_gpu_utilization_ratio{{{labels}}} 0.5\n")));
        assert!(!text.contains("oomkit_gpu_temperature_celsius{"));
        assert!(text.contains(",pid=\"9\"} 30\n"), "{text}");
        assert!(!text.contains("command="));
        opts.command_lines = true;
        let text = render(&s, &opts);
        assert!(text.contains("pid=\"9\",command=\"python a\\\\b.py\\n\"} 30\n"));
        assert!(text.contains("oomkit_process_gpu_memory_growth_bytes_per_second{"));
        assert!(!text.contains("oomkit_process_oom_eta_seconds{"));
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("").unwrap(), DEFAULT_ADDR);
        assert_eq!(parse_addr("9000").unwrap(), "127.0.0.1:9000");
        assert_eq!(parse_addr(":0").unwrap(), "127.0.0.1:0");
        assert_eq!(parse_addr("0.0.0.0:19180").unwrap(), "0.0.0.0:19180");
        assert!(parse_addr("example").is_err());
        assert!(parse_addr("1.2.3.4:99999").is_err());
    }
}
