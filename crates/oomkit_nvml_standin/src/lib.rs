//! A scripted stand-in for `libnvidia-ml.so.1`.
//!
//! oomkit talks to the NVIDIA driver only through NVML, loaded at run time
//! (`oomkit_nvml`, via `nvml-wrapper`). To run that real path — `dlopen`
//! through the loader's search path, symbol lookup, the C structs, the error
//! codes — on machines without a GPU, tests build this crate as a shared
//! library, link it into a temporary folder as `libnvidia-ml.so.1` and put the
//! folder on `LD_LIBRARY_PATH`. It exports the NVML functions oomkit calls and
//! answers them from a scenario file named by `OOMKIT_NVML_SCENARIO` (JSON,
//! see [`Scenario`]): devices, processes, memory that changes with time since
//! `nvmlInit_v2`, fields the board does not support, errors, a GPU that falls
//! off the bus after a while.
//!
//! Struct layouts and return codes come from `nvml-wrapper-sys` (the bindings
//! `nvml-wrapper` itself is built on, generated from NVIDIA's `nvml.h`), so
//! the stand-in and the real library share one ABI description.
//!
//! This crate is test equipment: it is never linked into the `oomkit` binary.

use std::ffi::{CStr, c_char, c_uint};
use std::sync::Mutex;
use std::time::Instant;

use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlMemory_t, nvmlMemory_v2_t, nvmlProcessInfo_t, nvmlReturn_t, nvmlUtilization_t,
};
use serde::Deserialize;

// Return codes (nvml.h, `nvmlReturn_t`).
const SUCCESS: nvmlReturn_t = 0;
const ERROR_UNINITIALIZED: nvmlReturn_t = 1;
const ERROR_INVALID_ARGUMENT: nvmlReturn_t = 2;
const ERROR_NOT_SUPPORTED: nvmlReturn_t = 3;
const ERROR_NO_PERMISSION: nvmlReturn_t = 4;
const ERROR_INSUFFICIENT_SIZE: nvmlReturn_t = 7;
const ERROR_NOT_FOUND: nvmlReturn_t = 6;
const ERROR_DRIVER_NOT_LOADED: nvmlReturn_t = 9;
const ERROR_FUNCTION_NOT_FOUND: nvmlReturn_t = 13;
const ERROR_LIB_RM_VERSION_MISMATCH: nvmlReturn_t = 18;
const ERROR_GPU_IS_LOST: nvmlReturn_t = 15;
const ERROR_UNKNOWN: nvmlReturn_t = 999;

/// `NVML_VALUE_NOT_AVAILABLE` as an `unsigned long long` (nvml.h: `(-1)`).
const VALUE_NOT_AVAILABLE: u64 = u64::MAX;
/// `gpuInstanceId`/`computeInstanceId` when the GPU is not in MIG mode.
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;

/// The scenario file: what the fake driver reports.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Make `nvmlInit_v2` fail with this code name (`DRIVER_NOT_LOADED`,
    /// `NO_PERMISSION`, `LIB_RM_VERSION_MISMATCH`, `UNKNOWN`).
    #[serde(default)]
    pub init_error: Option<String>,
    /// What `nvmlSystemGetDriverVersion` returns.
    #[serde(default = "default_driver")]
    pub driver_version: String,
    /// The GPUs, in index order.
    #[serde(default)]
    pub devices: Vec<Device>,
}

fn default_driver() -> String {
    "580.00.00-standin".to_owned()
}

/// One GPU.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// Product name.
    pub name: String,
    /// `GPU-…` identifier.
    pub uuid: String,
    /// Total framebuffer memory, bytes.
    pub total_bytes: u64,
    /// The driver's own reserve (NVML v2 `reserved`): part of total, not of used.
    #[serde(default)]
    pub reserved_bytes: u64,
    /// Memory used besides the listed processes (driver reserve, hidden
    /// processes), bytes.
    #[serde(default)]
    pub base_used_bytes: u64,
    /// Percent; absent or null: "Not Supported".
    #[serde(default)]
    pub utilization_pct: Option<u32>,
    /// Celsius; absent or null: "Not Supported".
    #[serde(default)]
    pub temperature_c: Option<u32>,
    /// Milliwatts; absent or null: "Not Supported".
    #[serde(default)]
    pub power_mw: Option<u32>,
    /// Every call on this device returns GPU_IS_LOST from this many seconds
    /// after init on.
    #[serde(default)]
    pub lost_after_s: Option<f64>,
    /// `nvmlDeviceGetMemoryInfo_v2` fails with this code name
    /// (`NOT_SUPPORTED`: a unified-memory GPU such as GB10 or Jetson).
    #[serde(default)]
    pub memory_error: Option<String>,
    /// A driver older than 510: `nvmlDeviceGetMemoryInfo_v2` answers
    /// FUNCTION_NOT_FOUND (a real one lacks the symbol), only the v1 query
    /// works, and its `used` includes the driver's reserve.
    #[serde(default)]
    pub pre_510: bool,
    /// The process-list calls fail with this code name (`NO_PERMISSION`: a
    /// non-root user on a MIG parent, some containers).
    #[serde(default)]
    pub processes_error: Option<String>,
    /// Processes with a context on this GPU.
    #[serde(default)]
    pub processes: Vec<Process>,
    /// MIG devices (the GPU is in MIG mode when any is listed): each answers
    /// like a device of its own through `nvmlDeviceGetMigDeviceHandleByIndex`.
    #[serde(default)]
    pub mig: Vec<Device>,
}

/// One process on one GPU; its memory grows linearly from `start_s`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    /// Process id reported.
    #[serde(default)]
    pub pid: u32,
    /// Read the PID from this file at each call instead (a test's child writes
    /// its own); while the file is missing or holds no number, the process is absent.
    #[serde(default)]
    pub pid_file: Option<String>,
    /// Bytes at `start_s`; null: NVML's "not available".
    #[serde(default)]
    pub used_bytes: Option<u64>,
    /// Bytes per second added after `start_s`.
    #[serde(default)]
    pub growth_bytes_per_s: f64,
    /// Seconds after init when the process appears.
    #[serde(default)]
    pub start_s: f64,
    /// Seconds after init when it exits.
    #[serde(default)]
    pub end_s: Option<f64>,
    /// `compute` (default) or `graphics`.
    #[serde(default)]
    pub kind: Option<String>,
    /// What `nvmlSystemGetProcessName` answers for this PID (absent: NOT_FOUND).
    #[serde(default)]
    pub name: Option<String>,
}

struct State {
    scenario: Scenario,
    start: Instant,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn code(name: &str) -> nvmlReturn_t {
    match name {
        "DRIVER_NOT_LOADED" => ERROR_DRIVER_NOT_LOADED,
        "NO_PERMISSION" => ERROR_NO_PERMISSION,
        "LIB_RM_VERSION_MISMATCH" => ERROR_LIB_RM_VERSION_MISMATCH,
        "NOT_SUPPORTED" => ERROR_NOT_SUPPORTED,
        "GPU_IS_LOST" => ERROR_GPU_IS_LOST,
        _ => ERROR_UNKNOWN,
    }
}

fn load() -> Result<Scenario, nvmlReturn_t> {
    let path = std::env::var_os("OOMKIT_NVML_SCENARIO").ok_or(ERROR_DRIVER_NOT_LOADED)?;
    let text = std::fs::read(path).map_err(|_| ERROR_UNKNOWN)?;
    serde_json::from_slice(&text).map_err(|_| ERROR_UNKNOWN)
}

/// Runs `f` on the device behind `handle` at the current scenario time.
fn with_device(handle: nvmlDevice_t, f: impl FnOnce(&Device, f64) -> nvmlReturn_t) -> nvmlReturn_t {
    let Ok(guard) = STATE.lock() else {
        return ERROR_UNKNOWN;
    };
    let Some(state) = guard.as_ref() else {
        return ERROR_UNINITIALIZED;
    };
    let (index, mig) = decode(handle);
    let Some(parent) = index.and_then(|i| state.scenario.devices.get(i)) else {
        return ERROR_INVALID_ARGUMENT;
    };
    let t = state.start.elapsed().as_secs_f64();
    if parent.lost_after_s.is_some_and(|lost| t >= lost) {
        return ERROR_GPU_IS_LOST;
    }
    match mig {
        None => f(parent, t),
        Some(m) => match parent.mig.get(m) {
            Some(instance) => f(instance, t),
            None => ERROR_INVALID_ARGUMENT,
        },
    }
}

/// Handles are opaque to callers: a GPU's is its index + 1; a MIG device's
/// adds (its index + 1) << 16.
fn encode(index: usize, mig: Option<usize>) -> nvmlDevice_t {
    let m = mig.map_or(0, |m| m.saturating_add(1));
    (index.saturating_add(1) | (m << 16)) as nvmlDevice_t
}

fn decode(handle: nvmlDevice_t) -> (Option<usize>, Option<usize>) {
    let h = handle as usize;
    let index = (h & 0xFFFF).checked_sub(1);
    let mig = (h >> 16).checked_sub(1);
    (index, mig)
}

fn pid_of(p: &Process) -> Option<u32> {
    match &p.pid_file {
        Some(path) => std::fs::read_to_string(path).ok()?.trim().parse().ok(),
        None => Some(p.pid),
    }
}

fn alive(p: &Process, t: f64) -> bool {
    t >= p.start_s && p.end_s.is_none_or(|end| t < end) && pid_of(p).is_some()
}

fn process_used(p: &Process, t: f64) -> Option<u64> {
    let grown = (p.growth_bytes_per_s * (t - p.start_s).max(0.0)).max(0.0);
    // `as` saturates for floats; the sum saturates too.
    p.used_bytes.map(|b| b.saturating_add(grown as u64))
}

fn device_used(d: &Device, t: f64) -> u64 {
    let procs = d
        .processes
        .iter()
        .filter(|p| alive(p, t))
        .filter_map(|p| process_used(p, t))
        .fold(0u64, u64::saturating_add);
    d.base_used_bytes
        .saturating_add(procs)
        .min(d.total_bytes.saturating_sub(d.reserved_bytes))
}

/// Copies `s` and a NUL into `buf` of `len` bytes.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes.
unsafe fn write_str(s: &str, buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    let bytes = s.as_bytes();
    if buf.is_null() || bytes.len() >= len as usize {
        return ERROR_INSUFFICIENT_SIZE;
    }
    // SAFETY: the caller guarantees `len` writable bytes; we write len(s)+1 < len+1.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, bytes.len());
        *buf.add(bytes.len()) = 0;
    }
    SUCCESS
}

/// Writes `value` through `out` when it is not null.
///
/// # Safety
/// `out` must be null or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> nvmlReturn_t {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: checked non-null; validity is the caller's contract.
    unsafe { out.write(value) };
    SUCCESS
}

/// # Safety
/// NVML's C contract.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    let scenario = match load() {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Some(name) = &scenario.init_error {
        return code(name);
    }
    let Ok(mut guard) = STATE.lock() else {
        return ERROR_UNKNOWN;
    };
    *guard = Some(State {
        scenario,
        start: Instant::now(),
    });
    SUCCESS
}

/// # Safety
/// NVML's C contract.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    if let Ok(mut guard) = STATE.lock() {
        *guard = None;
    }
    SUCCESS
}

/// # Safety
/// NVML's C contract: returns a static string.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static CStr = match result {
        SUCCESS => c"Success",
        ERROR_UNINITIALIZED => c"Uninitialized",
        ERROR_INVALID_ARGUMENT => c"Invalid Argument",
        ERROR_NOT_SUPPORTED => c"Not Supported",
        ERROR_NO_PERMISSION => c"Insufficient Permissions",
        ERROR_INSUFFICIENT_SIZE => c"Insufficient Size",
        ERROR_DRIVER_NOT_LOADED => c"Driver Not Loaded",
        ERROR_NOT_FOUND => c"Not Found",
        ERROR_FUNCTION_NOT_FOUND => c"Function Not Found",
        ERROR_GPU_IS_LOST => c"GPU is lost",
        _ => c"Unknown Error",
    };
    s.as_ptr()
}

/// # Safety
/// `version` must be valid for `length` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    let Ok(guard) = STATE.lock() else {
        return ERROR_UNKNOWN;
    };
    let Some(state) = guard.as_ref() else {
        return ERROR_UNINITIALIZED;
    };
    // SAFETY: forwarded contract.
    unsafe { write_str(&state.scenario.driver_version, version, length) }
}

/// # Safety
/// `count` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    let Ok(guard) = STATE.lock() else {
        return ERROR_UNKNOWN;
    };
    let Some(state) = guard.as_ref() else {
        return ERROR_UNINITIALIZED;
    };
    let n = c_uint::try_from(state.scenario.devices.len()).unwrap_or(c_uint::MAX);
    // SAFETY: forwarded contract.
    unsafe { put(count, n) }
}

/// # Safety
/// `device` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let Ok(guard) = STATE.lock() else {
        return ERROR_UNKNOWN;
    };
    let Some(state) = guard.as_ref() else {
        return ERROR_UNINITIALIZED;
    };
    let i = index as usize;
    let Some(d) = state.scenario.devices.get(i) else {
        return ERROR_INVALID_ARGUMENT;
    };
    let t = state.start.elapsed().as_secs_f64();
    if d.lost_after_s.is_some_and(|lost| t >= lost) {
        return ERROR_GPU_IS_LOST;
    }
    let handle = encode(i, None);
    // SAFETY: forwarded contract.
    unsafe { put(device, handle) }
}

/// # Safety
/// `name` must be valid for `length` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    // SAFETY: forwarded contract.
    with_device(device, |d, _| unsafe { write_str(&d.name, name, length) })
}

/// # Safety
/// `uuid` must be valid for `length` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    // SAFETY: forwarded contract.
    with_device(device, |d, _| unsafe { write_str(&d.uuid, uuid, length) })
}

/// # Safety
/// `memory` must be valid for a read and write of `nvmlMemory_v2_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    with_device(device, |d, t| {
        if let Some(name) = &d.memory_error {
            return code(name);
        }
        if d.pre_510 {
            return ERROR_FUNCTION_NOT_FOUND;
        }
        if memory.is_null() {
            return ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: checked non-null; the caller's contract covers the rest.
        let version = unsafe { (*memory).version };
        let expected = (std::mem::size_of::<nvmlMemory_v2_t>() | (2 << 24)) as c_uint;
        if version != expected {
            // nvml.h: NVML_ERROR_ARGUMENT_VERSION_MISMATCH.
            return 25;
        }
        let used = device_used(d, t);
        let value = nvmlMemory_v2_t {
            version,
            total: d.total_bytes,
            reserved: d.reserved_bytes,
            free: d
                .total_bytes
                .saturating_sub(d.reserved_bytes)
                .saturating_sub(used),
            used,
        };
        // SAFETY: as above.
        unsafe { put(memory, value) }
    })
}

/// NVML's first memory query (before driver 510): `used` includes the
/// driver's reserve.
///
/// # Safety
/// `memory` must be valid for a write of `nvmlMemory_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_t,
) -> nvmlReturn_t {
    with_device(device, |d, t| {
        if let Some(name) = &d.memory_error {
            return code(name);
        }
        let used = device_used(d, t).saturating_add(d.reserved_bytes);
        let value = nvmlMemory_t {
            total: d.total_bytes,
            free: d.total_bytes.saturating_sub(used),
            used,
        };
        // SAFETY: forwarded contract.
        unsafe { put(memory, value) }
    })
}

/// # Safety
/// `utilization` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    with_device(device, |d, _| match d.utilization_pct {
        // SAFETY: forwarded contract.
        Some(gpu) => unsafe {
            put(
                utilization,
                nvmlUtilization_t {
                    gpu,
                    memory: gpu / 2,
                },
            )
        },
        None => ERROR_NOT_SUPPORTED,
    })
}

/// # Safety
/// `temp` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    _sensor: c_uint,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    with_device(device, |d, _| match d.temperature_c {
        // SAFETY: forwarded contract.
        Some(c) => unsafe { put(temp, c) },
        None => ERROR_NOT_SUPPORTED,
    })
}

/// # Safety
/// `power` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: nvmlDevice_t,
    power: *mut c_uint,
) -> nvmlReturn_t {
    with_device(device, |d, _| match d.power_mw {
        // SAFETY: forwarded contract.
        Some(mw) => unsafe { put(power, mw) },
        None => ERROR_NOT_SUPPORTED,
    })
}

/// NVML's two-call protocol for process lists: `*count == 0` (or too small)
/// asks for the size and gets INSUFFICIENT_SIZE with the count written.
///
/// # Safety
/// `count` must be valid for a read and write; `infos` for `*count` entries.
unsafe fn processes(
    device: nvmlDevice_t,
    kind: &str,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    with_device(device, |d, t| {
        if let Some(name) = &d.processes_error {
            return code(name);
        }
        if count.is_null() {
            return ERROR_INVALID_ARGUMENT;
        }
        let list: Vec<nvmlProcessInfo_t> = d
            .processes
            .iter()
            .filter(|p| p.kind.as_deref().unwrap_or("compute") == kind && alive(p, t))
            .map(|p| nvmlProcessInfo_t {
                pid: pid_of(p).unwrap_or(0),
                usedGpuMemory: process_used(p, t).unwrap_or(VALUE_NOT_AVAILABLE),
                gpuInstanceId: NO_INSTANCE,
                computeInstanceId: NO_INSTANCE,
            })
            .collect();
        let n = c_uint::try_from(list.len()).unwrap_or(c_uint::MAX);
        // SAFETY: checked non-null; caller's contract.
        let room = unsafe { *count };
        // SAFETY: as above.
        unsafe { *count = n };
        if room < n || (n > 0 && infos.is_null()) {
            return ERROR_INSUFFICIENT_SIZE;
        }
        for (i, info) in list.into_iter().enumerate() {
            // SAFETY: i < n <= room entries, the caller's buffer size.
            unsafe { infos.add(i).write(info) };
        }
        SUCCESS
    })
}

/// # Safety
/// See `processes` (NVML's two-call protocol).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: forwarded contract.
    unsafe { processes(device, "compute", count, infos) }
}

/// # Safety
/// See `processes` (NVML's two-call protocol).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    // SAFETY: forwarded contract.
    unsafe { processes(device, "graphics", count, infos) }
}

/// The scripted `name` of a process any device lists with this PID.
///
/// # Safety
/// `name` must be valid for `length` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    let Ok(guard) = STATE.lock() else {
        return ERROR_UNKNOWN;
    };
    let Some(state) = guard.as_ref() else {
        return ERROR_UNINITIALIZED;
    };
    let found = state
        .scenario
        .devices
        .iter()
        .flat_map(|d| d.processes.iter())
        .find(|p| pid_of(p) == Some(pid))
        .and_then(|p| p.name.clone());
    match found {
        // SAFETY: forwarded contract.
        Some(n) => unsafe { write_str(&n, name, length) },
        None => ERROR_NOT_FOUND,
    }
}

/// MIG mode: enabled (current and pending) when the scenario lists MIG
/// devices, else NOT_SUPPORTED (a GPU without MIG).
///
/// # Safety
/// `current` and `pending` must be valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    if decode(device).1.is_some() {
        return ERROR_NOT_SUPPORTED;
    }
    with_device(device, |d, _| {
        if d.mig.is_empty() {
            return ERROR_NOT_SUPPORTED;
        }
        // SAFETY: forwarded contract.
        unsafe {
            let rc = put(current, 1);
            if rc != SUCCESS {
                return rc;
            }
            put(pending, 1)
        }
    })
}

/// # Safety
/// `count` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    with_device(device, |d, _| {
        if d.mig.is_empty() {
            return ERROR_NOT_SUPPORTED;
        }
        let n = c_uint::try_from(d.mig.len()).unwrap_or(c_uint::MAX);
        // SAFETY: forwarded contract.
        unsafe { put(count, n) }
    })
}

/// # Safety
/// `mig_device` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig_device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let (Some(parent), None) = decode(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    with_device(device, |d, _| {
        let m = index as usize;
        if m >= d.mig.len() {
            return ERROR_NOT_FOUND;
        }
        // SAFETY: forwarded contract.
        unsafe { put(mig_device, encode(parent, Some(m))) }
    })
}
