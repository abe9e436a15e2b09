//! One model of a GPU memory reading: what a GPU and the processes on it hold.
//!
//! The same structs describe a live NVML sample (`oomkit monitor`, `oomkit_nvml`)
//! and a reading pasted into a log (`oomkit explain` on an nvidia-smi table or
//! a `--query-gpu` CSV). Every field a source cannot give is `None` and
//! serialises as `null`: NVML answers "Not Supported" for temperature or power on
//! some boards and nvidia-smi prints `N/A`; a made-up zero would be a wrong
//! reading, so there is none.
//!
//! Sizes are bytes. nvidia-smi and NVML both count in binary units (nvidia-smi's
//! "MiB" is 2^20 bytes; NVML returns bytes), so a reading converts exactly.

use serde::{Deserialize, Serialize};

/// One GPU at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuReading {
    /// The index the driver gives (NVML's, nvidia-smi's; not `CUDA_VISIBLE_DEVICES`'s).
    pub index: u32,
    /// Product name as the driver prints it (`NVIDIA H100 80GB HBM3`).
    pub name: Option<String>,
    /// `GPU-…` or `MIG-…` identifier, stable across reboots and renumbering.
    pub uuid: Option<String>,
    /// Memory the driver reports as total (framebuffer, what nvidia-smi prints).
    pub memory_total_bytes: Option<u64>,
    /// Memory in use, as nvidia-smi's "Used" (on drivers ≥ 510 this excludes
    /// the driver's reserve, which is [`GpuReading::memory_reserved_bytes`]).
    pub memory_used_bytes: Option<u64>,
    /// Memory the driver reserves for itself and reports apart from used
    /// (NVML v2 `reserved`, `nvidia-smi -q`'s FB "Reserved", drivers ≥ 510).
    /// When it is known, used does not include it: total = reserved + used + free.
    /// Omitted from JSON when unknown, so sources without it serialise as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_reserved_bytes: Option<u64>,
    /// GPU utilisation over the driver's last sample period, percent.
    pub utilization_pct: Option<u32>,
    /// Core temperature, degrees Celsius.
    pub temperature_c: Option<u32>,
    /// Board power draw, watts.
    pub power_w: Option<f64>,
    /// Why this GPU could not be read (`GPU is lost`); the other fields then
    /// hold the last values known, or nothing.
    pub error: Option<String>,
    /// Processes holding memory on this GPU.
    pub processes: Vec<ProcessReading>,
    /// For a MIG instance: its index under the physical GPU [`GpuReading::index`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_index: Option<u32>,
    /// Where the memory figures come from when it is not the usual source:
    /// `nvml_v1` (a driver older than 510: used includes the driver's
    /// reserve), `system` (a unified-memory GPU: the host's `/proc/meminfo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_source: Option<String>,
    /// Queries the driver refused while the rest of the GPU was read
    /// (`processes: Insufficient Permissions`); those fields are `None`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// Free memory from a GPU's figures: total − used − the driver's reserve (when
/// reported separately), never negative; `None` unless total and used are
/// known. The one definition for every reading and sample.
pub fn free_bytes(total: Option<u64>, used: Option<u64>, reserved: Option<u64>) -> Option<u64> {
    Some(
        total?
            .saturating_sub(used?)
            .saturating_sub(reserved.unwrap_or(0)),
    )
}

impl GpuReading {
    /// Free memory, when total and used are both known (never negative: a
    /// driver that reports used > total gives zero free). A separately
    /// reported driver reserve is not free either.
    pub fn memory_free_bytes(&self) -> Option<u64> {
        free_bytes(
            self.memory_total_bytes,
            self.memory_used_bytes,
            self.memory_reserved_bytes,
        )
    }

    /// Used memory no listed process accounts for: the driver's own reserve,
    /// processes in other containers (their PIDs are hidden), graphics
    /// contexts. `None` when used is unknown or any process's size is.
    pub fn unattributed_bytes(&self) -> Option<u64> {
        let used = self.memory_used_bytes?;
        let mut listed: u64 = 0;
        for p in &self.processes {
            listed = listed.saturating_add(p.used_bytes?);
        }
        Some(used.saturating_sub(listed))
    }
}

/// One process holding memory on one GPU.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessReading {
    /// Process id as the driver reports it: the host's PID namespace, which in a
    /// container is not the container's (see [`ProcessReading::command`]).
    pub pid: u32,
    /// Owner's user name, when the process is visible here.
    pub user: Option<String>,
    /// Command line (or the driver's/nvidia-smi's process name). `None` when
    /// the PID is not visible in this PID namespace (a container seeing the
    /// host's PIDs, or a process that has already exited).
    pub command: Option<String>,
    /// Device memory the process holds. `None` where the driver cannot say
    /// (NVML's "not available", Windows WDDM, some containers).
    pub used_bytes: Option<u64>,
    /// The process's PID inside its own PID namespace (a container), when it
    /// differs from [`ProcessReading::pid`] (`/proc/PID/status` `NSpid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_pid: Option<u32>,
}
