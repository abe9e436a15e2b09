//! config.json text → `ModelConfig::from_hf_json` → estimate and fit for
//! training and inference: no panic, no hang (loops over layers are
//! closed-form), no wrapped size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oomkit_estimate::{ModelConfig, Setup, Task, estimate, fit};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cfg) = ModelConfig::from_hf_json("fuzz", text) else {
        return;
    };
    let Ok(gpu) = oomkit_core::gpus::find("h100-sxm") else {
        return;
    };
    for task in [Task::Infer, Task::Train] {
        let s = Setup {
            task,
            new_tokens: if task == Task::Infer { 128 } else { 0 },
            ..Setup::default()
        };
        if let Ok(est) = estimate(&cfg, &s) {
            let _ = fit::fit(&cfg, &s, gpu, &est);
        }
    }
});
