//! `oomkit explain`: find every out-of-memory error in a log and say what
//! happened, why, and what to do.
//!
//! Pipeline (one pass, bounded memory):
//! 1. [`scan`] streams the input and cuts out regions around anchor phrases;
//! 2. [`normalize`] cleans each region (prefixes, ANSI, wraps, JSON escapes);
//! 3. `detect` reads each message family's fields into signals;
//! 4. `assemble` merges multi-line messages, attaches context, folds repeats;
//! 5. `diagnose` computes what the numbers mean, the cause and the fixes.
//!
//! Beside errors, [`readings`] reads the memory readings users paste
//! (nvidia-smi's table, CSV and `-q` report; PyTorch's memory_summary and
//! memory_stats), says what they show, and joins them to the OOMs of the
//! same input.
//!
//! Entry points: [`Explainer::explain_reader`] for streams and
//! [`Explainer::explain_str`] for text; [`render::human`] and serde for output.
//!
//! ```
//! let ex = oomkit_explain::Explainer::new();
//! let report = ex.explain_str(
//!     "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; \
//!      1.06 GiB already allocated; 1.45 GiB free; 12.53 GiB reserved in total by PyTorch)",
//! );
//! let e = &report.events[0];
//! assert_eq!(e.requested_bytes, Some(oomkit_core::Bytes::gib(2)));
//! assert_eq!(e.cause, oomkit_explain::Cause::Fragmentation);
//! ```
#![warn(missing_docs)]
// No panics reachable from input: indexing and string slicing are
// denied for every crate in `[workspace.lints]`; `get` and char-boundary
// helpers instead.

mod assemble;
pub mod detail;
mod detect;
mod diagnose;
mod event;
pub mod formats;
pub mod normalize;
pub mod pattern;
pub mod readings;
pub mod render;
pub mod scan;

use std::io::Read;

pub use detail::Detail;
pub use event::{
    App, Backend, Cause, Event, Fix, Framework, GpuGuess, Numbers, Phase, ProcessUse, Report,
    TensorInfo,
};
pub use readings::{Reading, Source as ReadingSource, TorchCounters};

/// Lines kept around the anchors of a region that holds only readings.
const READING_CONTEXT: usize = 12;

/// At most this many distinct events are kept; the rest are counted as repeats
/// of the last one so memory stays bounded on pathological input.
pub const MAX_EVENTS: usize = 2_000;

/// Errors reading the input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The explainer: compiled automata and regexes, built once.
pub struct Explainer {
    scanner: scan::Scanner,
    /// PIDs that are this job, never "other processes" (see [`Explainer::with_own_pids`]).
    own_pids: Vec<u64>,
}

impl Default for Explainer {
    fn default() -> Self {
        Self::new()
    }
}

impl Explainer {
    /// Builds the scanner; detector regexes compile lazily on first use.
    pub fn new() -> Explainer {
        Explainer {
            scanner: scan::Scanner::new(),
            own_pids: Vec::new(),
        }
    }

    /// PIDs that belong to the job being explained, as the GPU driver sees
    /// them: oomkit's own process and, under `oomkit run`/`probe`, the child
    /// it supervises. A message or reading that lists one of them as
    /// `Process N` counts it as this job, never as another process to stop.
    /// (Not for pasted logs: their PIDs are another machine's.)
    pub fn with_own_pids(mut self, pids: impl IntoIterator<Item = u64>) -> Explainer {
        self.own_pids.extend(pids);
        self
    }

    /// Explains a whole stream, reading it once in fixed-size chunks.
    pub fn explain_reader<R: Read + Send>(&self, reader: R) -> Result<Report, Error> {
        let mut findings = Vec::new();
        let mut found: Vec<Reading> = Vec::new();
        let mut more_readings = 0usize;
        self.scanner.scan(reader, |region| {
            // A region opened only by readings needs only a few lines around
            // them (headers sit just above the rows): normalising the whole
            // context window made logs that print memory_summary() every few
            // thousand lines 4× slower.
            let raw = match (region.errors, region.hits) {
                (false, Some((first, last))) => {
                    let start = first.saturating_sub(READING_CONTEXT);
                    // A `-q` report is read to its end (its processes come
                    // ~150 lines below the FB section that is the hit).
                    let end = if region.long {
                        region.lines.len()
                    } else {
                        last.saturating_add(READING_CONTEXT + 1)
                            .min(region.lines.len())
                    };
                    region.lines.get(start..end).unwrap_or(&region.lines)
                }
                _ => region.lines.as_slice(),
            };
            let lines = normalize::clean(raw);
            let doc = normalize::build(lines);
            if region.readings {
                for r in readings::read(&doc) {
                    if found.len() < readings::MAX_READINGS {
                        found.push(r);
                    } else {
                        more_readings = more_readings.saturating_add(1);
                    }
                }
            }
            // A region opened only by reading anchors holds no error message
            // (before readings, no region was opened there at all).
            if !region.errors {
                return;
            }
            let signals = detect::detect(&doc);
            if signals.is_empty() {
                return;
            }
            findings.extend(assemble::findings(&doc, signals));
            if findings.len() > MAX_EVENTS + 2048 {
                // fold() keeps at most MAX_EVENTS and counts the rest as repeats.
                findings = assemble::fold(std::mem::take(&mut findings));
            }
        })?;
        for r in &mut found {
            readings::interpret(r);
        }
        readings::relate(&mut found);
        if more_readings > 0
            && let Some(last) = found.last_mut()
        {
            last.findings.push(format!(
                "{more_readings} more readings follow in the input; only the first {} are read",
                readings::MAX_READINGS
            ));
        }
        let folded = assemble::fold(findings);
        Ok(Report {
            version: 1,
            events: folded
                .into_iter()
                .take(MAX_EVENTS)
                .map(|mut f| {
                    readings::combine(&mut f, &found);
                    diagnose::diagnose_with(f, &self.own_pids)
                })
                .collect(),
            readings: found,
        })
    }

    /// Explains text already in memory.
    pub fn explain_str(&self, text: &str) -> Report {
        match self.explain_reader(text.as_bytes()) {
            Ok(r) => r,
            Err(_) => Report {
                version: 1,
                events: Vec::new(),
                readings: Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_events_are_capped_and_counted() {
        let mut log = String::new();
        for i in 0..MAX_EVENTS + 500 {
            log.push_str(&format!(
                "RuntimeError: CUDA out of memory. Tried to allocate {}.00 MiB (GPU 0; 23.65 GiB total capacity; 1.06 GiB already allocated; 10.26 GiB free; 12.53 GiB reserved in total by PyTorch)\n",
                i + 1
            ));
        }
        let r = Explainer::new().explain_str(&log);
        assert_eq!(r.events.len(), MAX_EVENTS);
        let total: u64 = r.events.iter().map(|e| u64::from(e.repeats)).sum();
        assert_eq!(total, (MAX_EVENTS + 500) as u64);
    }

    #[test]
    fn copies_fold_across_intermediate_folds() {
        // More findings than the intermediate fold threshold, all close
        // together: one event, whatever the region and fold boundaries.
        let n = MAX_EVENTS + 2048 + 500;
        let log = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 23.65 GiB total capacity; 1.06 GiB already allocated; 10.26 GiB free; 12.53 GiB reserved in total by PyTorch)\n".repeat(n);
        let r = Explainer::new().explain_str(&log);
        assert_eq!(r.events.len(), 1);
        assert_eq!(r.events[0].repeats as usize, n);
    }

    mod properties {
        //! Arbitrary input never panics the explainer. Fixture
        //! messages cut, spliced and sprinkled with odd bytes reach deep into
        //! the detectors; plain random bytes cover the scanner.
        use proptest::prelude::*;

        use super::*;

        fn fixtures() -> Vec<Vec<u8>> {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
            let mut out = Vec::new();
            for sub in [dir.clone(), dir.join("real")] {
                for e in std::fs::read_dir(sub).into_iter().flatten().flatten() {
                    let p = e.path();
                    if p.extension().is_some_and(|x| x == "log" || x == "txt") {
                        out.extend(std::fs::read(p).ok());
                    }
                }
            }
            out.sort();
            out
        }

        /// Pieces that are sharp for parsers: multi-byte characters, huge
        /// numbers, separators, line ends, control bytes.
        const SHARDS: &[&str] = &[
            "é",
            "清理显存",
            "👍",
            "\u{301}",
            "\r",
            "\n",
            "\r\n",
            "\x1b[31m",
            "\\n",
            "\t",
            "18446744073709551616",
            "99999999999999999999.99 GiB",
            "-1.00 MiB",
            "0 bytes",
            "NaN GiB",
            "1e308 GB",
            "(GPU 4294967296; ",
            "[rank99999999999]: ",
            "``",
            "**",
            " │ ",
            "\u{0}",
            "\u{feff}",
            "Tried to allocate ",
            " of which ",
            "CUDA out of memory.",
            "shape[",
            "]",
            ",",
            "9999999999",
            "total capacity",
            "\u{1e}",
            // Memory readings.
            "MiB |",
            " B |",
            "| 0 N/A N/A ",
            "| NVIDIA-SMI 535.104.05 Driver Version: 535.104.05 CUDA Version: 12.2 |",
            "| 0 NVIDIA RTX 4090 On | 00000000:01:00.0 Off | Off |",
            "| 30% 45C P2 75W / 450W | 18432MiB / 24564MiB | 85% Default |",
            "| Processes: |",
            "| MIG devices: |",
            "FB Memory Usage\nTotal : ",
            "GPU 00000000:01:00.0\n",
            "--query-gpu=index,memory.used --format=csv,noheader\n",
            "'allocated_bytes.all.current': ",
            "PyTorch CUDA memory summary, device ID ",
            "| Allocated memory | ",
        ];

        fn assert_sane(r: &Report) {
            assert!(r.events.len() <= MAX_EVENTS);
            for e in &r.events {
                assert!(e.line >= 1);
                assert!(e.repeats >= 1);
            }
        }

        proptest! {
            // 64 cases in CI; PROPTEST_CASES=5000 for a deep run.
            #![proptest_config(ProptestConfig {
                cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
                ..ProptestConfig::default()
            })]

            #[test]
            fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
                let r = Explainer::new().explain_reader(bytes.as_slice()).unwrap();
                assert_sane(&r);
            }

            #[test]
            fn mangled_messages_never_panic(
                pick in any::<prop::sample::Index>(),
                cuts in proptest::collection::vec((any::<prop::sample::Index>(), 0..SHARDS.len()), 1..12),
                truncate in any::<prop::sample::Index>(),
            ) {
                let all = fixtures();
                prop_assume!(!all.is_empty());
                let mut text = pick.get(&all).clone();
                for (at, shard) in cuts {
                    let i = at.index(text.len() + 1);
                    let piece = SHARDS[shard].as_bytes();
                    text.splice(i..i, piece.iter().copied());
                }
                text.truncate(truncate.index(text.len() + 1));
                let r = Explainer::new().explain_reader(text.as_slice()).unwrap();
                assert_sane(&r);
            }
        }
    }
}
