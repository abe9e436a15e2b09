//! GGUF header bytes → `gguf::parse` → the estimate and fit of any model
//! that parses: no panic, no stack overflow, no unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oomkit_estimate::{Setup, estimate, fit, gguf};

fuzz_target!(|data: &[u8]| {
    if let Ok(cfg) = gguf::parse(data, "fuzz.gguf") {
        if let Ok(est) = estimate(&cfg, &Setup::default()) {
            if let Ok(gpu) = oomkit_core::gpus::find("rtx-4090") {
                let _ = fit::fit(&cfg, &Setup::default(), gpu, &est);
            }
        }
    }
});
