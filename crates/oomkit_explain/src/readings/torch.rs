//! PyTorch's allocator counters: `torch.cuda.memory_summary()` and
//! `torch.cuda.memory_stats()`.
//!
//! The summary (`torch/cuda/memory.py`, since PyTorch 1.4, pytorch#27361):
//!
//! ```text
//! |                  PyTorch CUDA memory summary, device ID 0                 |
//! |            CUDA OOMs: 1            |        cudaMalloc retries: 1         |
//! |        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
//! | Allocated memory      |    1062 MB |    4877 MB |   89299 MB |   88237 MB |
//! | Active memory         |  …
//! | Requested memory      |  …                                   (PyTorch ≥ 2.0)
//! | GPU reserved memory   |   12420 MB |   12420 MB |   16924 MB |    4504 MB |
//! | Non-releasable memory |  …
//! ```
//!
//! Sizes are binary whatever the label (`MB` before pytorch#91854, `MiB`
//! since). Rows are read from the spaced view, so a summary pasted without
//! line breaks reads too. `memory_stats()` prints a dict (or OrderedDict, or
//! a list of pairs) of `'allocated_bytes.all.current': N` entries; keys are
//! those of `CUDACachingAllocator`'s `DeviceStats` (`inactive_split_bytes` is
//! the summary's non-releasable memory). A key seen twice starts a new reading.

use std::sync::LazyLock;

use super::{Lazy, Reading, Source, TorchCounters, line_at, regex, size};
use crate::normalize::Doc;

static SUMMARY_HEADER: Lazy =
    LazyLock::new(|| regex(r"PyTorch (?:CUDA|XPU|MPS|HIP) memory summary, device ID (\d{1,3})"));

const SIZE: &str = r"\d{1,15} ?(?:B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|PiB)";

static SUMMARY_ROW: Lazy = LazyLock::new(|| {
    regex(&format!(
        r"\| ?(Allocated memory|Active memory|Requested memory|GPU reserved memory|CUDA reserved memory|Non-releasable memory) ?\| ?({SIZE}) ?\| ?({SIZE}) ?\|"
    ))
});
static OOMS: Lazy = LazyLock::new(|| regex(r"CUDA OOMs: ?(\d{1,15})"));
static RETRIES: Lazy = LazyLock::new(|| regex(r"cudaMalloc retries: ?(\d{1,15})"));

static STAT: Lazy =
    LazyLock::new(|| regex(r#"['"]([a-z_]{1,40}(?:\.[a-z_]{1,20}){0,2})['"] ?[,:] ?(\d{1,20})"#));

/// Every summary table in the region.
pub fn read_summary(doc: &Doc) -> Vec<Reading> {
    let text = doc.spaced.as_str();
    let mut starts: Vec<(usize, Option<u32>)> = SUMMARY_HEADER
        .captures_iter(text)
        .filter_map(|c| {
            let m = c.get(0)?;
            Some((m.start(), c.get(1).and_then(|d| d.as_str().parse().ok())))
        })
        .collect();
    if starts.first().is_none_or(|s| s.0 != 0) {
        starts.insert(0, (0, None));
    }
    let mut out = Vec::new();
    for (i, &(start, device)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(text.len(), |s| s.0);
        let Some(seg) = text.get(start..end) else {
            continue;
        };
        let mut t = TorchCounters {
            device,
            ..TorchCounters::default()
        };
        let mut first = None;
        for c in SUMMARY_ROW.captures_iter(seg) {
            first = first.or(c.get(0).map(|m| m.start()));
            let cur = c.get(2).and_then(|m| size(m.as_str()));
            let peak = c.get(3).and_then(|m| size(m.as_str()));
            match c.get(1).map_or("", |m| m.as_str()) {
                "Allocated memory" => {
                    t.allocated_bytes = t.allocated_bytes.or(cur);
                    t.allocated_peak_bytes = t.allocated_peak_bytes.or(peak);
                }
                "Active memory" => t.active_bytes = t.active_bytes.or(cur),
                "Requested memory" => t.requested_bytes = t.requested_bytes.or(cur),
                "GPU reserved memory" | "CUDA reserved memory" => {
                    t.reserved_bytes = t.reserved_bytes.or(cur);
                    t.reserved_peak_bytes = t.reserved_peak_bytes.or(peak);
                }
                _ => t.non_releasable_bytes = t.non_releasable_bytes.or(cur),
            }
        }
        let header = device.is_some();
        // Rows without a header are a summary only with its two main rows.
        if !header && (t.allocated_bytes.is_none() || t.reserved_bytes.is_none()) {
            continue;
        }
        t.oom_count = OOMS
            .captures(seg)
            .and_then(|c| c.get(1)?.as_str().parse().ok());
        t.alloc_retries = RETRIES
            .captures(seg)
            .and_then(|c| c.get(1)?.as_str().parse().ok());
        if t.is_empty() {
            continue;
        }
        let at = if header {
            start
        } else {
            start.saturating_add(first.unwrap_or(0))
        };
        let mut r = Reading::new(Source::TorchSummary, line_at(doc, at));
        r.torch = t;
        out.push(r);
    }
    out
}

/// Every `memory_stats()` dict in the region.
pub fn read_stats(doc: &Doc) -> Vec<Reading> {
    let text = doc.spaced.as_str();
    let mut out = Vec::new();
    let mut cur: Option<(usize, TorchCounters, Vec<String>)> = None;
    for c in STAT.captures_iter(text) {
        let (Some(all), Some(key), Some(v)) = (c.get(0), c.get(1), c.get(2)) else {
            continue;
        };
        let key = key.as_str();
        let Ok(v) = v.as_str().parse::<u64>() else {
            continue;
        };
        if cur
            .as_ref()
            .is_some_and(|(_, _, seen)| seen.iter().any(|k| k == key))
        {
            push_stats(doc, cur.take(), &mut out);
        }
        let (_, t, seen) =
            cur.get_or_insert_with(|| (all.start(), TorchCounters::default(), Vec::new()));
        if seen.len() < 512 {
            seen.push(key.to_string());
        }
        match key {
            "allocated_bytes.all.current" => t.allocated_bytes = Some(v),
            "allocated_bytes.all.peak" => t.allocated_peak_bytes = Some(v),
            "reserved_bytes.all.current" => t.reserved_bytes = Some(v),
            "reserved_bytes.all.peak" => t.reserved_peak_bytes = Some(v),
            "active_bytes.all.current" => t.active_bytes = Some(v),
            "requested_bytes.all.current" => t.requested_bytes = Some(v),
            "inactive_split_bytes.all.current" => t.non_releasable_bytes = Some(v),
            "num_ooms" => t.oom_count = Some(v),
            "num_alloc_retries" => t.alloc_retries = Some(v),
            _ => {}
        }
    }
    push_stats(doc, cur, &mut out);
    out
}

fn push_stats(doc: &Doc, cur: Option<(usize, TorchCounters, Vec<String>)>, out: &mut Vec<Reading>) {
    let Some((at, t, seen)) = cur else { return };
    // A dict that names no `*_bytes.all.*` key is some other dict.
    if !seen.iter().any(|k| k.contains("_bytes.all.")) || t.is_empty() {
        return;
    }
    let mut r = Reading::new(Source::TorchStats, line_at(doc, at));
    r.torch = t;
    out.push(r);
}

#[cfg(test)]
mod tests {
    use super::super::tests::doc;
    use super::*;

    const SUMMARY: &str = "\
|===========================================================================|
|                  PyTorch CUDA memory summary, device ID 0                 |
|---------------------------------------------------------------------------|
|            CUDA OOMs: 1            |        cudaMalloc retries: 1         |
|===========================================================================|
|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
|---------------------------------------------------------------------------|
| Allocated memory      |    1062 MB |    4877 MB |   89299 MB |   88237 MB |
|       from large pool |    1048 MB |    4865 MB |   89263 MB |   88215 MB |
|       from small pool |      14 MB |      14 MB |      35 MB |      21 MB |
|---------------------------------------------------------------------------|
| Active memory         |    1062 MB |    4877 MB |   89299 MB |   88237 MB |
|---------------------------------------------------------------------------|
| GPU reserved memory   |   12420 MB |   12420 MB |   16924 MB |    4504 MB |
|       from large pool |   12404 MB |   12404 MB |   16908 MB |    4504 MB |
|---------------------------------------------------------------------------|
| Non-releasable memory |  957217 KB |    2048 MB |   71290 MB |   70355 MB |
|===========================================================================|
";

    #[test]
    fn reads_a_summary_with_old_labels() {
        let r = read_summary(&doc(SUMMARY));
        assert_eq!(r.len(), 1);
        let t = &r[0].torch;
        assert_eq!(r[0].line, 2);
        assert_eq!(t.device, Some(0));
        assert_eq!(t.allocated_bytes, Some(1062 << 20));
        assert_eq!(t.allocated_peak_bytes, Some(4877 << 20));
        assert_eq!(t.reserved_bytes, Some(12420 << 20));
        assert_eq!(t.non_releasable_bytes, Some(957_217 << 10));
        assert_eq!(t.oom_count, Some(1));
        assert_eq!(t.alloc_retries, Some(1));
        assert_eq!(t.requested_bytes, None);
    }

    #[test]
    fn reads_a_flattened_summary_and_two_devices() {
        let flat = SUMMARY.replace('\n', "");
        assert_eq!(
            read_summary(&doc(&flat))[0].torch.reserved_bytes,
            Some(12420 << 20)
        );
        let two = format!("{SUMMARY}{}", SUMMARY.replace("device ID 0", "device ID 1"));
        let r = read_summary(&doc(&two));
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].torch.device, Some(1));
    }

    #[test]
    fn reads_stats_dicts() {
        let t = "OrderedDict([('active.all.allocated', 2), ('allocated_bytes.all.current', 1024), ('allocated_bytes.all.peak', 4096), ('inactive_split_bytes.all.current', 512), ('num_alloc_retries', 3), ('num_ooms', 0), ('reserved_bytes.all.current', 2097152), ('reserved_bytes.all.peak', 4194304)])\n{\"allocated_bytes.all.current\": 7, \"reserved_bytes.all.current\": 8}";
        let r = read_stats(&doc(t));
        assert_eq!(r.len(), 2);
        let c = &r[0].torch;
        assert_eq!(c.allocated_bytes, Some(1024));
        assert_eq!(c.allocated_peak_bytes, Some(4096));
        assert_eq!(c.reserved_bytes, Some(2_097_152));
        assert_eq!(c.non_releasable_bytes, Some(512));
        assert_eq!(c.alloc_retries, Some(3));
        assert_eq!(c.oom_count, Some(0));
        assert_eq!(r[1].torch.reserved_bytes, Some(8));
    }

    #[test]
    fn other_dicts_are_not_stats() {
        assert!(read_stats(&doc("{'lr': 3, 'epoch': 4}")).is_empty());
    }
}
