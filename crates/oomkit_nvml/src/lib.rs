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

pub mod procs;

use std::collections::BTreeMap;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use oomkit_core::{GpuReading, ProcessReading};

/// The library file NVML is loaded from (the soname the driver installs; the
/// unversioned `libnvidia-ml.so` only exists with development packages).
pub const LIBRARY: &str = "libnvidia-ml.so.1";

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
        "cannot load {LIBRARY} ({0}): no NVIDIA driver is installed here, or its library is not on the loader path (set LD_LIBRARY_PATH to the folder holding {LIBRARY})"
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

    fn read_one(&mut self, index: u32) -> GpuReading {
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
                return r;
            }
        };
        if r.name.is_none() {
            r.name = device.name().ok();
        }
        if r.uuid.is_none() {
            r.uuid = device.uuid().ok();
        }
        match device.memory_info() {
            Ok(m) => {
                r.memory_total_bytes = Some(m.total);
                r.memory_used_bytes = Some(m.used);
                r.memory_reserved_bytes = Some(m.reserved);
            }
            Err(e) => r.error = Some(format!("memory: {}", describe(&e))),
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
                Err(e) if r.error.is_none() => {
                    r.error = Some(format!("processes: {}", describe(&e)));
                }
                Err(_) => {}
            }
        }
        r.processes = seen
            .into_iter()
            .map(|(pid, used_bytes)| {
                let (user, command) = self.procs.describe(pid);
                ProcessReading {
                    pid,
                    user,
                    command,
                    used_bytes,
                    local_pid: None,
                }
            })
            .collect();
        self.known.insert(index, (r.name.clone(), r.uuid.clone()));
        r
    }
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
        let readings = (0..count).map(|i| self.read_one(i)).collect();
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
