//! The memory timeline of a run: measured by NVML (the GPU memory of the
//! command's process tree, see `runner`), or else from the memory figures the
//! child printed itself (`mem: 10.2 GiB`, `max_memory_allocated=8123 MiB`, a
//! tqdm postfix `gpu_mem=3.1G`). Without either there is no timeline — and the
//! output says so rather than inventing one.
//!
//! Memory is bounded: at most [`MAX_SAMPLES`] samples are kept; when full,
//! every other one is dropped (the shape of the curve survives).

use std::str::FromStr;
use std::sync::LazyLock;

use oomkit_core::Bytes;
use regex::Regex;
use serde::Serialize;

/// Samples kept at most.
pub const MAX_SAMPLES: usize = 4096;

/// Figures printed within less time than this have no per-time rate, and
/// are plotted by their order instead of their time.
pub const MIN_SPAN_SECONDS: f64 = 1.0;

/// Longest line looked at; the rest of a longer line is ignored.
pub const MAX_LINE: usize = 64 * 1024;

/// A key that names GPU memory, then an optional `:`/`=`, then a size with a
/// unit. Lines of OOM messages themselves are skipped (their numbers are the
/// explanation's, not a sample).
static FIGURE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    oomkit_explain::pattern::compile(&format!(
        r"(?i:\b((?:gpu|cuda|vram)?[ _-]?(?:max[ _-]?)?(?:mem(?:ory)?|vram|alloc(?:ated)?|reserved)(?:[ _-]?(?:allocated|reserved|used|usage|alloc))?))\b\s*[:=]?\s*({})",
        oomkit_core::bytes::SIZE_PATTERN
    ))
    .ok()
});

/// One memory figure the child printed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the command started.
    pub seconds: f64,
    /// The figure.
    pub bytes: u64,
}

/// The figures of one series (the first key seen: `allocated`, `mem`, …).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Timeline {
    /// The key the figures were printed under, lower-cased.
    pub label: Option<String>,
    /// Samples in time order (thinned when long).
    pub samples: Vec<Sample>,
    /// Every figure seen, before thinning.
    pub seen: u64,
}

/// A steady climb: what [`Timeline::growth`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Growth {
    /// Least-squares slope, bytes per second; `None` when the figures were
    /// printed within [`MIN_SPAN_SECONDS`] (a rate over no time means nothing).
    pub bytes_per_second: Option<f64>,
    /// Average increase from one printed figure to the next.
    pub bytes_per_sample: f64,
    /// First and last figure.
    pub from_bytes: u64,
    /// Last figure.
    pub to_bytes: u64,
}

impl Timeline {
    /// Reads one line of output (from `stream`: 0 stdout, 1 stderr).
    pub fn observe(&mut self, seconds: f64, _stream: usize, line: &str) {
        let Some(re) = FIGURE.as_ref() else { return };
        if line.contains("out of memory") || line.contains("Tried to allocate") {
            return;
        }
        let Some(c) = re.captures(line) else { return };
        let (Some(key), Some(size)) = (c.get(1), c.get(2)) else {
            return;
        };
        let Ok(bytes) = Bytes::from_str(size.as_str()) else {
            return;
        };
        let key = key.as_str().trim_matches([' ', '_', '-']).to_lowercase();
        match &self.label {
            Some(l) if *l != key => return,
            Some(_) => {}
            None => self.label = Some(key),
        }
        self.push(seconds, bytes.get());
    }

    /// Adds a sample measured rather than printed (NVML): thinned like the others.
    pub fn push(&mut self, seconds: f64, bytes: u64) {
        self.seen = self.seen.saturating_add(1);
        if self.samples.len() >= MAX_SAMPLES {
            let mut i = 0usize;
            self.samples.retain(|_| {
                i = i.wrapping_add(1);
                i % 2 == 1
            });
        }
        self.samples.push(Sample { seconds, bytes });
    }

    /// Seconds between the first and the last figure.
    pub fn span_seconds(&self) -> f64 {
        match (self.samples.first(), self.samples.last()) {
            (Some(a), Some(b)) => b.seconds - a.seconds,
            _ => 0.0,
        }
    }

    /// The highest figure.
    pub fn peak(&self) -> Option<u64> {
        self.samples.iter().map(|s| s.bytes).max()
    }

    /// The growth rate when memory climbed steadily: at least 4 figures, the
    /// last above the first, and at least three quarters of the steps not
    /// going down.
    pub fn growth(&self) -> Option<Growth> {
        let n = self.samples.len();
        let (first, last) = (self.samples.first()?, self.samples.last()?);
        if n < 4 || last.bytes <= first.bytes {
            return None;
        }
        let up = self
            .samples
            .windows(2)
            .filter(|w| matches!(w, [a, b] if b.bytes >= a.bytes))
            .count();
        if up.saturating_mul(4) < (n - 1).saturating_mul(3) {
            return None;
        }
        let nf = n as f64;
        let mean_t = self.samples.iter().map(|s| s.seconds).sum::<f64>() / nf;
        let mean_b = self.samples.iter().map(|s| s.bytes as f64).sum::<f64>() / nf;
        let (mut num, mut den) = (0.0, 0.0);
        for s in &self.samples {
            num += (s.seconds - mean_t) * (s.bytes as f64 - mean_b);
            den += (s.seconds - mean_t).powi(2);
        }
        Some(Growth {
            bytes_per_second: (self.span_seconds() >= MIN_SPAN_SECONDS && den > 0.0)
                .then(|| num / den),
            bytes_per_sample: (last.bytes - first.bytes) as f64 / (nf - 1.0),
            from_bytes: first.bytes,
            to_bytes: last.bytes,
        })
    }
}

/// Cuts a byte stream into lines at `\n` and `\r` (progress bars redraw with
/// `\r`), keeping at most [`MAX_LINE`] bytes of a line.
#[derive(Debug, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    /// Feeds bytes; returns the lines they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for &b in bytes {
            if b == b'\n' || b == b'\r' {
                if !self.partial.is_empty() {
                    lines.push(String::from_utf8_lossy(&self.partial).into_owned());
                    self.partial.clear();
                }
            } else if self.partial.len() < MAX_LINE {
                self.partial.push(b);
            }
        }
        lines
    }

    /// The last line when the stream ended without a newline.
    pub fn finish(&mut self) -> Option<String> {
        if self.partial.is_empty() {
            return None;
        }
        let line = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline(lines: &[&str]) -> Timeline {
        let mut t = Timeline::default();
        for (i, l) in lines.iter().enumerate() {
            t.observe(i as f64, 0, l);
        }
        t
    }

    #[test]
    fn reads_the_common_ways_of_printing_memory() {
        let t = timeline(&[
            "step 1 loss 2.31 mem: 1.50 GiB",
            "step 2 loss 2.12 mem=2 GiB",
            "step 3 | loss 2.0 | MEM 2.50GiB",
        ]);
        assert_eq!(t.label.as_deref(), Some("mem"));
        let got: Vec<u64> = t.samples.iter().map(|s| s.bytes).collect();
        assert_eq!(got, [3 << 29, 2 << 30, 5 << 29]);
        let t = timeline(&["max_memory_allocated: 8123 MiB", "gpu_mem=3.1G"]);
        assert_eq!(t.label.as_deref(), Some("max_memory_allocated"));
        assert_eq!(t.samples.len(), 1);
    }

    #[test]
    fn ignores_oom_messages_and_numbers_without_a_memory_key() {
        let t = timeline(&[
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
            "downloaded 3.2 GiB of weights",
            "memory 12 (no unit)",
        ]);
        assert!(t.samples.is_empty());
    }

    #[test]
    fn a_steady_climb_has_a_growth_rate_and_a_flat_line_none() {
        let t = timeline(&[
            "mem: 1 GiB",
            "mem: 2 GiB",
            "mem: 3 GiB",
            "mem: 4 GiB",
            "mem: 5 GiB",
        ]);
        let g = t.growth().unwrap();
        let rate = g.bytes_per_second.unwrap();
        assert!((rate - f64::from(1u32 << 30)).abs() < 1.0);
        assert_eq!((g.from_bytes, g.to_bytes), (1 << 30, 5 << 30));
        let mut burst = Timeline::default();
        for i in 1..=5 {
            burst.observe(0.25, 0, &format!("mem: {i} GiB"));
        }
        let g = burst.growth().unwrap();
        assert_eq!(g.bytes_per_second, None);
        assert_eq!(g.bytes_per_sample, f64::from(1u32 << 30));
        let flat = timeline(&["mem: 1 GiB", "mem: 1 GiB", "mem: 1 GiB", "mem: 1 GiB"]);
        assert!(flat.growth().is_none());
        let saw = timeline(&[
            "mem: 1 GiB",
            "mem: 3 GiB",
            "mem: 1 GiB",
            "mem: 3 GiB",
            "mem: 1 GiB",
            "mem: 3 GiB",
        ]);
        assert!(saw.growth().is_none());
    }

    #[test]
    fn keeps_a_bounded_number_of_samples() {
        let mut t = Timeline::default();
        for i in 0..(MAX_SAMPLES * 3) {
            t.observe(i as f64, 0, &format!("mem: {} MiB", i + 1));
        }
        assert!(t.samples.len() <= MAX_SAMPLES);
        assert_eq!(t.seen, (MAX_SAMPLES * 3) as u64);
        assert_eq!(
            t.samples.last().map(|s| s.bytes),
            Some((MAX_SAMPLES as u64 * 3) << 20)
        );
    }

    #[test]
    fn splits_lines_at_newlines_and_carriage_returns_across_chunks() {
        let mut s = LineSplitter::default();
        assert_eq!(s.push(b"ab"), Vec::<String>::new());
        assert_eq!(s.push(b"c\r 50%\rde\n"), ["abc", " 50%", "de"]);
        assert_eq!(s.push(b"tail"), Vec::<String>::new());
        assert_eq!(s.finish().as_deref(), Some("tail"));
    }
}
