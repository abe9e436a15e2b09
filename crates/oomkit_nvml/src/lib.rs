//! The only oomkit code that talks to the NVIDIA driver.
//!
//! NVML (`libnvidia-ml.so.1`, installed with the driver) is loaded at run time
//! by `nvml-wrapper` through the dynamic loader's normal search path, so
//! nothing CUDA is needed at build time, the binary runs on machines without a
//! driver (and says so), and `LD_LIBRARY_PATH` chooses the library — which is
//! how the tests load a scripted stand-in (`oomkit_nvml_standin`).
//!
//! Readers implement [`GpuReader`] and return [`oomkit_core::GpuReading`]s,
//! the one model of a GPU reading that `explain` also fills from pasted
//! nvidia-smi output. Per-GPU failures (a GPU "lost" off the bus, a query the
//! board refuses) land in that GPU's `error` and never stop the others;
//! "Not Supported" fields are `None`.
//!
//! [`procs`] reads `/proc` for what NVML does not say: a PID's command line,
//! its owner, and a process tree (for `probe` and `run`).
#![warn(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod memory_v1;
pub mod procs;

use std::collections::BTreeMap;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use oomkit_core::{GpuReading, ProcessReading};

/// The library file NVML is loaded from (the soname the driver installs; the
/// unversioned `libnvidia-ml.so` only exists with development packages).
#[cfg(not(windows))]
pub const LIBRARY: &str = "libnvidia-ml.so.1";
/// The library file NVML is loaded from (the driver installs it in System32).
#[cfg(windows)]
pub const LIBRARY: &str = "nvml.dll";

/// Where the loader looks for [`LIBRARY`], for the error that says how to fix it.
#[cfg(not(windows))]
const LOADER_PATH: &str = "LD_LIBRARY_PATH";
#[cfg(windows)]
const LOADER_PATH: &str = "PATH";

/// Anything that produces GPU readings: NVML, or a test double.
pub trait GpuReader {
    /// One reading per GPU, in index order. Never fails as a whole once open:
    /// what cannot be read is in the GPU's `error`.
    fn read(&mut self) -> Vec<GpuReading>;
    /// The driver version, when known.
    fn driver_version(&self) -> Option<String>;
}

/// Why NVML could not be opened. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The shared library is not on the loader's path.
    #[error(
        "cannot load {LIBRARY} ({0}): no NVIDIA driver is installed here, or its library is not on the loader path (add the folder holding {LIBRARY} to {LOADER_PATH})"
    )]
    NoLibrary(String),
    /// The library loaded but the kernel driver is not running.
    #[error(
        "the NVIDIA driver is not loaded (NVML: Driver Not Loaded): is there a GPU, and does `nvidia-smi` work?"
    )]
    DriverNotLoaded,
    /// The user may not query the driver (containers without the device nodes).
    #[error(
        "permission denied by the NVIDIA driver (NVML: Insufficient Permissions): run with access to /dev/nvidia* (in Docker: --gpus all)"
    )]
    NoPermission,
    /// The user-space library and the kernel module differ in version.
    #[error(
        "NVML library and kernel driver versions differ (a driver update without a reboot?): {0}"
    )]
    VersionMismatch(String),
    /// Anything else NVML reported.
    #[error("NVML failed to initialise: {0}")]
    Other(String),
}

impl From<NvmlError> for OpenError {
    fn from(e: NvmlError) -> Self {
        match e {
            NvmlError::LibloadingError(inner) => OpenError::NoLibrary(inner.to_string()),
            NvmlError::DriverNotLoaded => OpenError::DriverNotLoaded,
            NvmlError::NoPermission => OpenError::NoPermission,
            NvmlError::LibRmVersionMismatch => OpenError::VersionMismatch(e.to_string()),
            other => OpenError::Other(other.to_string()),
        }
    }
}

/// NVML opened once; read with [`GpuReader::read`].
pub struct NvmlReader {
    nvml: Nvml,
    driver: Option<String>,
    /// Names and UUIDs seen before, so a GPU that is lost later keeps them.
    known: BTreeMap<u32, (Option<String>, Option<String>)>,
    procs: procs::Lookup,
}

impl NvmlReader {
    /// Loads [`LIBRARY`] and initialises NVML.
    pub fn open() -> Result<Self, OpenError> {
        let nvml = Nvml::init()?;
        let driver = nvml.sys_driver_version().ok();
        Ok(NvmlReader {
            nvml,
            driver,
            known: BTreeMap::new(),
            procs: procs::Lookup::default(),
        })
    }

    /// GPU `index`, then its MIG devices (when it is in MIG mode), each a row.
    fn read_one(&mut self, index: u32) -> Vec<GpuReading> {
        let (known_name, known_uuid) = self.known.get(&index).cloned().unwrap_or_default();
        let mut r = GpuReading {
            index,
            name: known_name,
            uuid: known_uuid,
            ..GpuReading::default()
        };
        let device = match self.nvml.device_by_index(index) {
            Ok(d) => d,
            Err(e) => {
                r.error = Some(describe(&e));
                return vec![r];
            }
        };
        if r.name.is_none() {
            r.name = device.name().ok();
        }
        if r.uuid.is_none() {
            r.uuid = device.uuid().ok();
        }
        fill(&self.nvml, &device, &mut r, &mut self.procs);
        self.known.insert(index, (r.name.clone(), r.uuid.clone()));
        let mut rows = vec![r];
        // MIG: each instance is a row of its own under its parent (its own
        // memory, processes and forecast). This works when only the instances
        // are accessible: the parent's refusals are in its `refused`.
        let in_mig = device.mig_mode().is_ok_and(|m| m.current == 1);
        if in_mig {
            let max = device.mig_device_count().unwrap_or(0);
            for m in 0..max {
                let Ok(mig) = device.mig_device_by_index(m) else {
                    continue; // an empty slot: NOT_FOUND
                };
                let mut row = GpuReading {
                    index,
                    mig_index: Some(m),
                    name: mig.name().ok(),
                    uuid: mig.uuid().ok(),
                    ..GpuReading::default()
                };
                fill(&self.nvml, &mig, &mut row, &mut self.procs);
                rows.push(row);
            }
        }
        rows
    }
}

/// Reads memory, utilisation, temperature, power and processes of `device`
/// (a GPU or a MIG device) into `r`: what is refused goes to `r.refused`,
/// a lost GPU to `r.error`.
fn fill(
    nvml: &Nvml,
    device: &nvml_wrapper::Device,
    r: &mut GpuReading,
    lookup: &mut procs::Lookup,
) {
    match device.memory_info() {
        Ok(m) => {
            r.memory_total_bytes = Some(m.total);
            r.memory_used_bytes = Some(m.used);
            r.memory_reserved_bytes = Some(m.reserved);
        }
        // Unified memory (GB10/DGX Spark, Jetson): the GPU has no memory
        // of its own to report; it allocates from the host's, as nvtop
        // and gpud read it.
        Err(NvmlError::NotSupported) => match procs::system_memory() {
            Some((total, available)) => {
                r.memory_total_bytes = Some(total);
                r.memory_used_bytes = Some(total.saturating_sub(available));
                r.memory_source = Some("system".to_owned());
            }
            None => r.refused.push("memory: Not Supported".to_owned()),
        },
        // A driver older than 510: no v2 query. v1's used includes the
        // driver's reserve, so it is marked.
        Err(NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)) => {
            match memory_v1::memory_info(device) {
                Ok((total, used)) => {
                    r.memory_total_bytes = Some(total);
                    r.memory_used_bytes = Some(used);
                    r.memory_source = Some("nvml_v1".to_owned());
                }
                Err(e) => r.refused.push(format!("memory: {}", describe(&e))),
            }
        }
        Err(e @ NvmlError::GpuLost) => {
            r.error = Some(describe(&e));
            return;
        }
        Err(e) => r.refused.push(format!("memory: {}", describe(&e))),
    }
    // Optional fields: "Not Supported" (and any other refusal) is None.
    r.utilization_pct = device.utilization_rates().ok().map(|u| u.gpu);
    r.temperature_c = device.temperature(TemperatureSensor::Gpu).ok();
    r.power_w = device.power_usage().ok().map(|mw| f64::from(mw) / 1000.0);

    let mut seen: BTreeMap<u32, Option<u64>> = BTreeMap::new();
    let lists = [
        device.running_compute_processes(),
        device.running_graphics_processes(),
    ];
    for list in lists {
        match list {
            Ok(list) => {
                for p in list {
                    let used = match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => Some(b),
                        UsedGpuMemory::Unavailable => None,
                    };
                    // A process with compute and graphics contexts is listed
                    // twice with the same figure: keep one.
                    seen.entry(p.pid).or_insert(used);
                }
            }
            Err(NvmlError::NotSupported) => {}
            Err(e) => {
                let what = format!("processes: {}", describe(&e));
                if !r.refused.contains(&what) {
                    r.refused.push(what);
                }
            }
        }
    }
    r.processes = seen
        .into_iter()
        .map(|(pid, used_bytes)| {
            let (user, command, container_pid) = lookup.describe(pid, |pid| {
                // NVML's own name for a PID it reported (the driver
                // resolves it in the host's namespace).
                nvml.sys_process_name(pid, 256)
                    .ok()
                    .filter(|n| !n.is_empty())
            });
            ProcessReading {
                pid,
                user,
                command,
                used_bytes,
                container_pid,
            }
        })
        .collect();
}

impl GpuReader for NvmlReader {
    fn read(&mut self) -> Vec<GpuReading> {
        let count = match self.nvml.device_count() {
            Ok(n) => n,
            Err(e) => {
                // Nothing per GPU can be said; report it on every GPU seen before.
                let msg = describe(&e);
                return self
                    .known
                    .iter()
                    .map(|(&index, (name, uuid))| GpuReading {
                        index,
                        name: name.clone(),
                        uuid: uuid.clone(),
                        error: Some(msg.clone()),
                        ..GpuReading::default()
                    })
                    .collect();
            }
        };
        self.procs.begin_sample();
        let readings = (0..count).flat_map(|i| self.read_one(i)).collect();
        self.procs.end_sample();
        readings
    }

    fn driver_version(&self) -> Option<String> {
        self.driver.clone()
    }
}

/// NVML's error as users know it from nvidia-smi ("GPU is lost", "Not Supported").
fn describe(e: &NvmlError) -> String {
    match e {
        NvmlError::GpuLost => "GPU is lost (fell off the bus; check `dmesg` for Xid errors)".into(),
        NvmlError::NoPermission => "Insufficient Permissions".into(),
        NvmlError::NotSupported => "Not Supported".into(),
        NvmlError::Uninitialized => "NVML not initialised".into(),
        NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_) => {
            "this driver's NVML lacks a function oomkit needs (driver 510 or newer is required)"
                .into()
        }
        other => other.to_string(),
    }
}
