//! NVML's first memory query, for drivers older than 510.
//!
//! `nvml-wrapper` 0.13 wraps only `nvmlDeviceGetMemoryInfo_v2` (driver 510
//! and newer). Older drivers have only `nvmlDeviceGetMemoryInfo`, whose
//! `used` includes the driver's reserve (NVIDIA's `nvml.h`, `nvmlMemory_t`:
//! "used: Allocated device memory (in bytes)"; v2 split out `reserved`). This
//! is the one call oomkit makes without the wrapper: through the library
//! `nvml-wrapper` already loaded, with the struct layout from
//! `nvml-wrapper-sys` (generated from `nvml.h`).
#![allow(unsafe_code)]

use nvml_wrapper::Device;
use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper_sys::bindings::nvmlMemory_t;

/// (total, used) bytes from `nvmlDeviceGetMemoryInfo`.
pub fn memory_info(device: &Device) -> Result<(u64, u64), NvmlError> {
    let f = device
        .nvml()
        .lib()
        .nvmlDeviceGetMemoryInfo
        .as_ref()
        .map_err(|_| NvmlError::FunctionNotFound)?;
    let mut m = nvmlMemory_t {
        total: 0,
        free: 0,
        used: 0,
    };
    // SAFETY: `f` is NVML's `nvmlDeviceGetMemoryInfo(nvmlDevice_t,
    // nvmlMemory_t*)`, resolved by libloading from the library NVML was
    // initialised from; the handle comes from that same NVML (the `Device`
    // borrows it, so it is still initialised); `m` is a valid, writable
    // `nvmlMemory_t` for the duration of the call.
    let rc = unsafe { f(device.handle(), &mut m) };
    nvml_try(rc)?;
    Ok((m.total, m.used))
}
