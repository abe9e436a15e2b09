//! Feeds arbitrary bytes to the snapshot decoder and the analysis: any panic,
//! stack overflow, or allocation beyond libFuzzer's limit (-rss_limit_mb) is a bug.
//! Time is bounded too, without a clock: the decoder's work count (opcodes,
//! items moved, memo slots examined) must stay linear in the input's length,
//! with a hook that takes trace-entry records as the loader does (the path
//! where a quadratic memo rescan once hid).
#![no_main]

use libfuzzer_sys::fuzz_target;
use oomkit_snapshot::pickle::{self, FIELDS, Hook, Raw, Value};

struct TakeRecords;

impl Hook for TakeRecords {
    fn take(&mut self, _list: usize, _item: &Value) -> bool {
        false
    }
    fn field(&mut self, key: &str) -> Option<usize> {
        ["action", "addr", "size"].iter().position(|k| *k == key)
    }
    fn record(&mut self, fields: &[Raw<'_>; FIELDS]) -> bool {
        !matches!(fields[0], Raw::Absent)
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(snap) = oomkit_snapshot::load(|| Ok(data), data.len() as u64) {
        let _ = oomkit_snapshot::analyze(&snap, &oomkit_snapshot::Options::default());
    }
    let (_, work) = pickle::decode_counting(|| Ok(data), data.len() as u64, &mut TakeRecords);
    let bound = 4 * data.len() as u64 + 16;
    assert!(work <= bound, "work {work} for {} bytes", data.len());
});
