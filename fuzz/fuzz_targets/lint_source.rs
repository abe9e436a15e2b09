//! `oomkit lint` on arbitrary bytes: decoding (PEP 263, BOMs), the nesting pre-check,
//! parsing, every rule, `--fix` and writing back must never panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oomkit_lint::{Settings, fix_source, lint_source, source};

fuzz_target!(|data: &[u8]| {
    let settings = Settings::default();
    if let Ok(decoded) = source::decode(data) {
        let _ = lint_source("fuzz.py", &decoded.text, &settings);
        if let Ok(fixed) = fix_source("fuzz.py", &decoded.text, &settings) {
            let _ = source::encode(data, &decoded, &fixed.source);
        }
    }
    // the same bytes as text, whatever their encoding
    let _ = lint_source("fuzz.py", &String::from_utf8_lossy(data), &settings);
});
