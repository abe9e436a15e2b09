//! Feeds arbitrary bytes to the snapshot decoder and the analysis: any panic,
//! stack overflow, or allocation beyond libFuzzer's limit (-rss_limit_mb) is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(snap) = oomkit_snapshot::load(|| Ok(data), data.len() as u64) {
        let _ = oomkit_snapshot::analyze(&snap, &oomkit_snapshot::Options::default());
    }
});
