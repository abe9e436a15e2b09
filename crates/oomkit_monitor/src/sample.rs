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

use crate::trend::{Series, Trend, eta};

/// Version of the JSON sample contract; bumped on any change to its fields.
pub const VERSION: u32 = 1;

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
    /// Driver index.
    pub index: u32,
    /// Product name.
    pub name: Option<String>,
    /// `GPU-…` identifier.
    pub uuid: Option<String>,
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
    /// Seconds until free memory runs out at a steady positive growth.
    pub oom_eta_s: Option<f64>,
    /// Why this GPU could not be read.
    pub error: Option<String>,
    /// Processes on this GPU, largest first.
    pub processes: Vec<ProcessSample>,
}

/// One process in a sample.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessSample {
    /// Host PID.
    pub pid: u32,
    /// Owner (`null`: not visible in this PID namespace).
    pub user: Option<String>,
    /// Command line (`null`: not visible in this PID namespace).
    pub command: Option<String>,
    /// Memory held, bytes (`null`: the driver cannot say).
    pub used_bytes: Option<u64>,
    /// Robust slope of its memory, bytes/s.
    pub growth_bytes_per_s: Option<f64>,
    /// Seconds until the GPU's free memory is gone at this process's steady growth.
    pub oom_eta_s: Option<f64>,
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
                let key = r.uuid.clone().unwrap_or_else(|| format!("#{}", r.index));
                let window = self.window_s;
                let trend = match r.memory_used_bytes {
                    Some(used) if r.error.is_none() => {
                        let s = self
                            .gpus
                            .entry(key.clone())
                            .or_insert_with(|| Series::new(window));
                        s.push(t, used as f64);
                        s.trend()
                    }
                    _ => None,
                };
                let free = r.memory_free_bytes();
                let mut processes: Vec<ProcessSample> = r
                    .processes
                    .into_iter()
                    .map(|p| {
                        let pk = (key.clone(), p.pid);
                        let ptrend = p.used_bytes.and_then(|used| {
                            let s = self
                                .procs
                                .entry(pk.clone())
                                .or_insert_with(|| Series::new(window));
                            s.push(t, used as f64);
                            s.trend()
                        });
                        live_procs.insert(pk);
                        process_sample(p, ptrend, free)
                    })
                    .collect();
                processes.sort_by(|a, b| b.used_bytes.cmp(&a.used_bytes).then(a.pid.cmp(&b.pid)));
                GpuSample {
                    index: r.index,
                    name: r.name,
                    uuid: r.uuid,
                    memory_total_bytes: r.memory_total_bytes,
                    memory_used_bytes: r.memory_used_bytes,
                    memory_reserved_bytes: r.memory_reserved_bytes,
                    utilization_pct: r.utilization_pct,
                    temperature_c: r.temperature_c,
                    power_w: r.power_w,
                    growth_bytes_per_s: trend.map(|tr| tr.slope),
                    oom_eta_s: free.and_then(|f| eta(f, trend)),
                    error: r.error,
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
        let key = gpu
            .uuid
            .clone()
            .unwrap_or_else(|| format!("#{}", gpu.index));
        self.gpus
            .get(&key)
            .map(|s| s.values().collect())
            .unwrap_or_default()
    }
}

fn process_sample(p: ProcessReading, trend: Option<Trend>, free: Option<u64>) -> ProcessSample {
    ProcessSample {
        pid: p.pid,
        user: p.user,
        command: p.command,
        used_bytes: p.used_bytes,
        growth_bytes_per_s: trend.map(|t| t.slope),
        oom_eta_s: free.and_then(|f| eta(f, trend)),
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
            memory_total_bytes: Some(1000),
            memory_used_bytes: Some(used),
            processes: vec![ProcessReading {
                pid: 7,
                user: None,
                command: None,
                used_bytes: Some(proc_used),
            }],
            ..GpuReading::default()
        }
    }

    #[test]
    fn forecast_from_steady_growth() {
        let mut tr = Tracker::new(60.0);
        let mut last = None;
        for i in 0..10u64 {
            let wall = UNIX_EPOCH + Duration::from_secs(i);
            last = Some(tr.observe(i as f64, wall, vec![reading(100 + 10 * i, 50 + 10 * i)]));
        }
        let s = last.unwrap();
        let g = &s.gpus[0];
        assert_eq!(g.growth_bytes_per_s, Some(10.0));
        // used 190 of 1000: 810 free at 10 B/s.
        assert_eq!(g.oom_eta_s, Some(81.0));
        assert_eq!(g.processes[0].growth_bytes_per_s, Some(10.0));
        assert_eq!(g.processes[0].oom_eta_s, Some(81.0));
        assert_eq!(s.time, "1970-01-01T00:00:09.000Z");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["version"], 1);
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
