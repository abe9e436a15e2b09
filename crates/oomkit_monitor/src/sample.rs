//! A sample: readings of every GPU at one moment, with growth and forecast.
//!
//! [`Sample`] is the JSON contract (`--format json`, `--log`, version
//! [`VERSION`]): one object per sample, fields in the documented order, `null`
//! for what a GPU cannot say. [`Tracker`] turns successive readings into
//! samples, keeping one [`Series`] per GPU and per (GPU, PID).

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use oomkit_core::{GpuReading, ProcessReading};
use serde::Serialize;

use crate::trend::{Growth, Series, Trend, eta};

/// Version of the JSON sample contract; bumped on any change to its fields.
pub const VERSION: u32 = 2;

/// Every GPU at one moment.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Always [`VERSION`].
    pub version: u32,
    /// Wall-clock time, RFC 3339 UTC with milliseconds.
    pub time: String,
    /// One entry per GPU.
    pub gpus: Vec<GpuSample>,
}

/// One GPU in a sample.
#[derive(Clone, Debug, Serialize)]
pub struct GpuSample {
    /// Driver index (of the physical GPU, for a MIG instance).
    pub index: u32,
    /// For a MIG instance: its index under GPU `index`; `null` for a whole GPU.
    pub mig: Option<u32>,
    /// Product name.
    pub name: Option<String>,
    /// `GPU-…` (or `MIG-…`) identifier.
    pub uuid: Option<String>,
    /// Where the memory figures come from: `nvml`, `nvml_v1` (driver < 510:
    /// used includes the driver's reserve), `system` (unified memory: the
    /// host's `/proc/meminfo`); `null` when memory is unknown.
    pub memory_source: Option<String>,
    /// Total memory, bytes.
    pub memory_total_bytes: Option<u64>,
    /// Used memory, bytes.
    pub memory_used_bytes: Option<u64>,
    /// The driver's reserve (not in the JSON contract v1; it makes `free` exact).
    #[serde(skip)]
    pub memory_reserved_bytes: Option<u64>,
    /// Utilisation, percent (`null`: not supported).
    pub utilization_pct: Option<u32>,
    /// Temperature, °C (`null`: not supported).
    pub temperature_c: Option<u32>,
    /// Power draw, W (`null`: not supported).
    pub power_w: Option<f64>,
    /// Robust slope of used memory over the window, bytes/s (`null` until
    /// enough samples).
    pub growth_bytes_per_s: Option<f64>,
    /// Seconds until free memory runs out at the leak's rate (`null`: no leak).
    pub oom_eta_s: Option<f64>,
    /// The evidence behind `oom_eta_s` (`null` with it).
    pub forecast: Option<Forecast>,
    /// Why this GPU could not be read at all.
    pub error: Option<String>,
    /// Queries the driver refused while the rest was read (those fields are `null`).
    pub refused: Vec<String>,
    /// Processes on this GPU, largest first.
    pub processes: Vec<ProcessSample>,
}

/// One process in a sample.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessSample {
    /// PID as the driver reports it (the host's PID namespace).
    pub pid: u32,
    /// Its PID inside its own PID namespace (a container), when it differs
    /// (`/proc/PID/status` `NSpid`, readable from the host's namespace).
    pub container_pid: Option<u32>,
    /// Owner (`null`: not visible in this PID namespace).
    pub user: Option<String>,
    /// Command line (`null`: not visible in this PID namespace).
    pub command: Option<String>,
    /// Memory held, bytes (`null`: the driver cannot say).
    pub used_bytes: Option<u64>,
    /// Robust slope of its memory, bytes/s.
    pub growth_bytes_per_s: Option<f64>,
    /// Seconds until the GPU's free memory is gone at this process's leak rate.
    pub oom_eta_s: Option<f64>,
    /// The evidence behind `oom_eta_s`.
    pub forecast: Option<Forecast>,
}

/// Why a forecast was made: the growth regime it extrapolates.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Forecast {
    /// The regime's rate (steps per second × step size), bytes/s.
    pub growth_bytes_per_s: f64,
    /// Steps (new highs) in the regime.
    pub steps: usize,
    /// Seconds since the regime's first step.
    pub regime_s: f64,
    /// Seconds since its latest step.
    pub since_last_step_s: f64,
}

impl From<Growth> for Forecast {
    fn from(g: Growth) -> Self {
        Forecast {
            growth_bytes_per_s: g.bytes_per_s,
            steps: g.steps,
            regime_s: g.regime_s,
            since_last_step_s: g.since_last_step_s,
        }
    }
}

impl GpuSample {
    /// Free memory, bytes: total − the driver's reserve − used.
    pub fn free_bytes(&self) -> Option<u64> {
        oomkit_core::reading::free_bytes(
            self.memory_total_bytes,
            self.memory_used_bytes,
            self.memory_reserved_bytes,
        )
    }

    /// Used / total in [0, 1].
    pub fn used_ratio(&self) -> Option<f64> {
        let total = self.memory_total_bytes?;
        (total > 0).then(|| self.memory_used_bytes.unwrap_or(0) as f64 / total as f64)
    }
}

/// Turns readings into samples, remembering each series' recent past.
pub struct Tracker {
    window_s: f64,
    gpus: BTreeMap<String, Series>,
    procs: BTreeMap<(String, u32), Series>,
}

impl Tracker {
    /// A tracker whose slopes cover the last `window_s` seconds.
    pub fn new(window_s: f64) -> Self {
        Tracker {
            window_s,
            gpus: BTreeMap::new(),
            procs: BTreeMap::new(),
        }
    }

    /// Records readings taken at `t` seconds (monotonic) and `wall` time.
    pub fn observe(&mut self, t: f64, wall: SystemTime, readings: Vec<GpuReading>) -> Sample {
        let mut live_procs = BTreeSet::new();
        let gpus = readings
            .into_iter()
            .map(|r| {
                let key = series_key(r.uuid.as_deref(), r.index, r.mig_index);
                let window = self.window_s;
                let (trend, growth) = match r.memory_used_bytes {
                    Some(used) if r.error.is_none() => {
                        let s = self
                            .gpus
                            .entry(key.clone())
                            .or_insert_with(|| Series::new(window));
                        s.push(t, used as f64);
                        (s.trend(), s.forecast())
                    }
                    _ => (None, None),
                };
                let free = r.memory_free_bytes();
                let mut processes: Vec<ProcessSample> = r
                    .processes
                    .into_iter()
                    .map(|p| {
                        let pk = (key.clone(), p.pid);
                        let (ptrend, pgrowth) = match p.used_bytes {
                            Some(used) => {
                                let s = self
                                    .procs
                                    .entry(pk.clone())
                                    .or_insert_with(|| Series::new(window));
                                s.push(t, used as f64);
                                (s.trend(), s.forecast())
                            }
                            None => (None, None),
                        };
                        live_procs.insert(pk);
                        process_sample(p, ptrend, pgrowth, free)
                    })
                    .collect();
                processes.sort_by(|a, b| b.used_bytes.cmp(&a.used_bytes).then(a.pid.cmp(&b.pid)));
                let oom_eta_s = free.and_then(|f| eta(f, growth));
                GpuSample {
                    index: r.index,
                    mig: r.mig_index,
                    name: r.name,
                    uuid: r.uuid,
                    memory_source: r
                        .memory_total_bytes
                        .map(|_| r.memory_source.clone().unwrap_or_else(|| "nvml".to_owned())),
                    memory_total_bytes: r.memory_total_bytes,
                    memory_used_bytes: r.memory_used_bytes,
                    memory_reserved_bytes: r.memory_reserved_bytes,
                    utilization_pct: r.utilization_pct,
                    temperature_c: r.temperature_c,
                    power_w: r.power_w,
                    growth_bytes_per_s: trend.map(|tr| tr.slope),
                    oom_eta_s,
                    forecast: oom_eta_s.and(growth.map(Forecast::from)),
                    error: r.error,
                    refused: r.refused,
                    processes,
                }
            })
            .collect();
        // A process that is gone starts afresh if its PID comes back.
        self.procs.retain(|k, _| live_procs.contains(k));
        Sample {
            version: VERSION,
            time: humantime::format_rfc3339_millis(wall).to_string(),
            gpus,
        }
    }

    /// Recent used-memory values of a GPU, oldest first (for sparklines).
    pub fn history(&self, gpu: &GpuSample) -> Vec<f64> {
        let key = series_key(gpu.uuid.as_deref(), gpu.index, gpu.mig);
        self.gpus
            .get(&key)
            .map(|s| s.values().collect())
            .unwrap_or_default()
    }
}

/// One series per GPU or MIG instance: the UUID, else its position.
fn series_key(uuid: Option<&str>, index: u32, mig: Option<u32>) -> String {
    match (uuid, mig) {
        (Some(u), _) => u.to_owned(),
        (None, Some(m)) => format!("#{index}/{m}"),
        (None, None) => format!("#{index}"),
    }
}

fn process_sample(
    p: ProcessReading,
    trend: Option<Trend>,
    growth: Option<Growth>,
    free: Option<u64>,
) -> ProcessSample {
    let oom_eta_s = free.and_then(|f| eta(f, growth));
    ProcessSample {
        pid: p.pid,
        container_pid: p.container_pid,
        user: p.user,
        command: p.command,
        used_bytes: p.used_bytes,
        growth_bytes_per_s: trend.map(|t| t.slope),
        oom_eta_s,
        forecast: oom_eta_s.and(growth.map(Forecast::from)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn reading(used: u64, proc_used: u64) -> GpuReading {
        GpuReading {
            index: 0,
            name: Some("Test GPU".into()),
            uuid: Some("GPU-test".into()),
            memory_total_bytes: Some(1000 << 20),
            memory_used_bytes: Some(used),
            processes: vec![ProcessReading {
                pid: 7,
                user: None,
                command: None,
                used_bytes: Some(proc_used),
                container_pid: None,
            }],
            ..GpuReading::default()
        }
    }

    #[test]
    fn forecast_from_steady_growth() {
        let mut tr = Tracker::new(60.0);
        let mut last = None;
        const M: u64 = 1 << 20;
        for i in 0..10u64 {
            let wall = UNIX_EPOCH + Duration::from_secs(i);
            last = Some(tr.observe(
                i as f64,
                wall,
                vec![reading((100 + 10 * i) * M, (50 + 10 * i) * M)],
            ));
        }
        let s = last.unwrap();
        let g = &s.gpus[0];
        assert_eq!(g.growth_bytes_per_s, Some(10.0 * M as f64));
        // used 190 MiB of 1000 MiB: 810 MiB free at 10 MiB/s.
        assert_eq!(g.oom_eta_s, Some(81.0));
        let f = g.forecast.unwrap();
        assert_eq!((f.steps, f.regime_s), (9, 8.0));
        assert_eq!(g.processes[0].growth_bytes_per_s, Some(10.0 * M as f64));
        assert_eq!(g.processes[0].oom_eta_s, Some(81.0));
        assert_eq!(s.time, "1970-01-01T00:00:09.000Z");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["version"], 2);
        assert_eq!(json["gpus"][0]["memory_source"], "nvml");
        assert!(json["gpus"][0]["temperature_c"].is_null());
    }

    #[test]
    fn lost_gpu_keeps_no_trend() {
        let mut tr = Tracker::new(60.0);
        let mut r = reading(100, 50);
        r.error = Some("GPU is lost".into());
        let s = tr.observe(0.0, UNIX_EPOCH, vec![r]);
        assert_eq!(s.gpus[0].growth_bytes_per_s, None);
        assert_eq!(s.gpus[0].error.as_deref(), Some("GPU is lost"));
    }
}
