//! Memory readings users paste beside (or instead of) an error: nvidia-smi's
//! table, its `--query-gpu`/`--query-compute-apps` CSV and `-q` report, and
//! PyTorch's `torch.cuda.memory_summary()` table and `memory_stats()` dict.
//!
//! Each reader turns a region's [`Doc`] into [`Reading`]s; GPUs and processes
//! are [`oomkit_core::GpuReading`] and [`oomkit_core::ProcessReading`], the
//! same structs the monitor's NVML samples use. [`interpret`] says what a
//! reading shows (who holds the memory, cached versus allocated, pressure)
//! and ranks fixes from `oomkit_core::remedies`; [`combine`] gives an OOM the
//! processes of an nvidia-smi reading of its GPU and the counters of a
//! PyTorch reading of its device, so one diagnosis uses both.
//!
//! Sizes: nvidia-smi's `MiB` is 2^20 bytes (NVML counts bytes and nvidia-smi
//! divides by 2^20); PyTorch's summary prints binary units, labelled `KB`/`MB`
//! before PyTorch 2.0 (pytorch#91854) and `KiB`/`MiB` since, all read as
//! binary by `oomkit_core::Bytes`.

mod interpret;
mod smi_q;
mod smi_query;
mod smi_table;
mod torch;

use std::sync::LazyLock;

use oomkit_core::{Bytes, GpuReading, ProcessReading};
use regex::Regex;
use serde::{Serialize, Serializer};

use crate::event::Fix;
use crate::normalize::Doc;

pub use interpret::{combine, interpret, relate};

/// At most this many readings are kept per input (the rest are counted).
pub const MAX_READINGS: usize = 1_000;
/// At most this many GPUs per reading (the largest nodes have 16).
pub const MAX_GPUS: usize = 64;
/// At most this many processes per reading.
pub const MAX_PROCESSES: usize = 1_024;

/// Which output a reading was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Source {
    /// nvidia-smi's default table (GPUs, MIG devices, processes).
    #[serde(rename = "nvidia-smi")]
    SmiTable,
    /// `nvidia-smi --query-gpu=… --format=csv` or `--query-compute-apps=…`.
    #[serde(rename = "nvidia-smi-query")]
    SmiQuery,
    /// `nvidia-smi -q` (or `-q -d MEMORY`).
    #[serde(rename = "nvidia-smi-q")]
    SmiQ,
    /// `torch.cuda.memory_summary()`.
    #[serde(rename = "torch-memory-summary")]
    TorchSummary,
    /// `torch.cuda.memory_stats()` printed as a dict or OrderedDict.
    #[serde(rename = "torch-memory-stats")]
    TorchStats,
}

impl Source {
    /// Display name.
    pub fn label(self) -> &'static str {
        match self {
            Source::SmiTable => "nvidia-smi",
            Source::SmiQuery => "nvidia-smi --query",
            Source::SmiQ => "nvidia-smi -q",
            Source::TorchSummary => "torch.cuda.memory_summary()",
            Source::TorchStats => "torch.cuda.memory_stats()",
        }
    }

    /// Whether the source describes GPUs and processes (nvidia-smi) rather
    /// than one process's allocator (PyTorch).
    pub fn is_smi(self) -> bool {
        matches!(self, Source::SmiTable | Source::SmiQuery | Source::SmiQ)
    }
}

/// A MIG device row of nvidia-smi's table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MigDevice {
    /// Physical GPU index.
    pub gpu: u32,
    /// GPU instance id.
    pub gi: u32,
    /// Compute instance id.
    pub ci: u32,
    /// MIG device index.
    pub mig: u32,
    /// Memory in use on this instance.
    pub memory_used_bytes: u64,
    /// Memory of this instance.
    pub memory_total_bytes: u64,
}

/// A process whose GPU the output names only by UUID or bus id
/// (`--query-compute-apps` without a matching `--query-gpu` row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unplaced {
    /// `gpu_uuid` or `gpu_bus_id` as printed, when printed.
    pub gpu: Option<String>,
    /// The process.
    pub process: ProcessReading,
}

/// PyTorch's caching-allocator counters (memory_summary, memory_stats).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TorchCounters {
    /// Device index (`device ID N` in the summary; memory_stats does not print it).
    pub device: Option<u32>,
    /// Memory in tensors now (`Allocated memory`, `allocated_bytes.all.current`).
    pub allocated_bytes: Option<u64>,
    /// Highest allocated since start or the last peak reset.
    pub allocated_peak_bytes: Option<u64>,
    /// Memory the caching allocator holds from the driver (`GPU reserved memory`).
    pub reserved_bytes: Option<u64>,
    /// Highest reserved.
    pub reserved_peak_bytes: Option<u64>,
    /// Free pieces of partly used blocks, which `empty_cache()` cannot return
    /// (`Non-releasable memory`, `inactive_split_bytes.all.current`).
    pub non_releasable_bytes: Option<u64>,
    /// Allocated plus freed-but-awaiting-stream-use (`Active memory`).
    pub active_bytes: Option<u64>,
    /// What the program asked for before rounding (`Requested memory`, PyTorch ≥ 2.0).
    pub requested_bytes: Option<u64>,
    /// `CUDA OOMs` / `num_ooms`: OOMs the allocator raised.
    pub oom_count: Option<u64>,
    /// `cudaMalloc retries` / `num_alloc_retries`: times cudaMalloc failed and
    /// the allocator freed its cache and tried again.
    pub alloc_retries: Option<u64>,
}

impl TorchCounters {
    /// Whether any counter was read.
    pub fn is_empty(&self) -> bool {
        self == &TorchCounters {
            device: self.device,
            ..TorchCounters::default()
        }
    }
}

/// One reading found in the input.
#[derive(Clone, Debug)]
pub struct Reading {
    /// The output it was read from.
    pub source: Source,
    /// 1-based input line where it starts.
    pub line: u64,
    /// GPUs with their processes (nvidia-smi sources).
    pub gpus: Vec<GpuReading>,
    /// Whether the output had a process list (an empty list then means no
    /// process is visible; without one nothing is known about processes).
    pub process_list: bool,
    /// Processes not placed on a GPU.
    pub unplaced: Vec<Unplaced>,
    /// MIG devices (nvidia-smi's table).
    pub mig: Vec<MigDevice>,
    /// The output does not print GPU indices (a query without an `index`
    /// column, `-i 2,3`, a `-q` of some of the GPUs): each GPU's `index` is
    /// then its position in the listing (0-based), never offered as the
    /// driver's index (the JSON says `"index": null`, the text "as listed").
    pub listed: bool,
    /// Process rows the output printed more than once (WSL; a process in
    /// both the compute and the graphics list), counted once.
    pub duplicate_rows: usize,
    /// `nvidia-smi -l`/`--loop` output: how many samples the paste holds
    /// (the last one is the reading); 0 or 1 for a single sample.
    pub samples: usize,
    /// Driver version as printed.
    pub driver_version: Option<String>,
    /// CUDA version the driver supports, as printed.
    pub cuda_version: Option<String>,
    /// PyTorch counters (PyTorch sources).
    pub torch: TorchCounters,
    /// What the reading shows, one sentence each, most telling first.
    pub findings: Vec<String>,
    /// Ranked fixes (empty when nothing points at memory pressure).
    pub fixes: Vec<Fix>,
}

impl Reading {
    fn new(source: Source, line: u64) -> Reading {
        Reading {
            source,
            line,
            gpus: Vec::new(),
            process_list: false,
            unplaced: Vec::new(),
            mig: Vec::new(),
            listed: false,
            duplicate_rows: 0,
            samples: 0,
            driver_version: None,
            cuda_version: None,
            torch: TorchCounters::default(),
            findings: Vec::new(),
            fixes: Vec::new(),
        }
    }

    /// Every process with the GPU it is on (`None`: not placed).
    pub fn processes(&self) -> impl Iterator<Item = (Option<u32>, &ProcessReading)> {
        let listed = self.listed;
        self.gpus
            .iter()
            .flat_map(move |g| {
                g.processes
                    .iter()
                    .map(move |p| ((!listed).then_some(g.index), p))
            })
            .chain(self.unplaced.iter().map(|u| (None, &u.process)))
    }

    fn process_count(&self) -> usize {
        self.gpus.iter().map(|g| g.processes.len()).sum::<usize>() + self.unplaced.len()
    }

    /// How a GPU of this reading is named: `GPU 3`, or `GPU #2 as listed`
    /// when the output printed no index.
    pub fn gpu_ref(&self, g: &GpuReading) -> String {
        if self.listed {
            format!("GPU #{} as listed", u64::from(g.index).saturating_add(1))
        } else {
            format!("GPU {}", g.index)
        }
    }

    /// Counts a process row once: a second row of the same PID on the same
    /// GPU is a repeat (the larger figure is kept).
    fn push_once(&mut self, gpu: usize, p: ProcessReading) {
        let Some(g) = self.gpus.get_mut(gpu) else {
            return;
        };
        if let Some(q) = g.processes.iter_mut().find(|q| q.pid == p.pid) {
            self.duplicate_rows = self.duplicate_rows.saturating_add(1);
            if p.used_bytes > q.used_bytes {
                q.used_bytes = p.used_bytes;
            }
            if q.command.is_none() {
                q.command = p.command;
            }
        } else if g.processes.len() < MAX_PROCESSES {
            g.processes.push(p);
        }
    }

    /// Adds a process to GPU `gpu` (created when the output lists processes
    /// of a GPU it has no row for), within [`MAX_PROCESSES`]; a repeated row
    /// is counted once.
    fn add_process(&mut self, gpu: u32, p: ProcessReading) {
        if self.process_count() >= MAX_PROCESSES {
            return;
        }
        if let Some(i) = self.gpus.iter().position(|g| g.index == gpu) {
            self.push_once(i, p);
        } else if self.gpus.len() < MAX_GPUS {
            self.gpus.push(GpuReading {
                index: gpu,
                processes: vec![p],
                ..GpuReading::default()
            });
        }
    }
}

/// The JSON form: `gpus` and `processes` for nvidia-smi sources, the
/// counters for PyTorch sources (README, "explain reads memory readings").
impl Serialize for Reading {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Gpu<'a> {
            index: Option<u32>,
            /// 1-based position in the listing, when no index was printed.
            #[serde(skip_serializing_if = "Option::is_none")]
            position: Option<u64>,
            name: &'a Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            uuid: &'a Option<String>,
            memory_used_bytes: Option<u64>,
            memory_total_bytes: Option<u64>,
            memory_free_bytes: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            memory_reserved_bytes: Option<u64>,
            utilization_pct: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            temperature_c: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            power_w: Option<f64>,
            /// Used memory no listed process accounts for.
            unattributed_bytes: Option<u64>,
        }
        #[derive(Serialize)]
        struct Process<'a> {
            gpu: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            gpu_uuid: Option<&'a str>,
            pid: u32,
            name: &'a Option<String>,
            used_bytes: Option<u64>,
        }
        #[derive(Serialize)]
        struct Json<'a> {
            source: Source,
            line: u64,
            #[serde(skip_serializing_if = "Option::is_none")]
            gpus: Option<Vec<Gpu<'a>>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            processes: Option<Vec<Process<'a>>>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            mig_devices: &'a [MigDevice],
            #[serde(skip_serializing_if = "Option::is_none")]
            driver_version: &'a Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            cuda_version: &'a Option<String>,
            #[serde(skip_serializing_if = "is_zero")]
            duplicate_rows: usize,
            #[serde(skip_serializing_if = "is_zero")]
            samples: usize,
            #[serde(flatten, skip_serializing_if = "Option::is_none")]
            torch: Option<&'a TorchCounters>,
            findings: &'a [String],
            fixes: &'a [Fix],
        }
        let smi = self.source.is_smi();
        let gpus = smi.then(|| {
            self.gpus
                .iter()
                .map(|g| Gpu {
                    index: (!self.listed).then_some(g.index),
                    position: self.listed.then(|| u64::from(g.index).saturating_add(1)),
                    name: &g.name,
                    uuid: &g.uuid,
                    memory_used_bytes: g.memory_used_bytes,
                    memory_total_bytes: g.memory_total_bytes,
                    memory_free_bytes: g.memory_free_bytes(),
                    memory_reserved_bytes: g.memory_reserved_bytes,
                    utilization_pct: g.utilization_pct,
                    temperature_c: g.temperature_c,
                    power_w: g.power_w,
                    unattributed_bytes: self.process_list.then(|| g.unattributed_bytes()).flatten(),
                })
                .collect()
        });
        let processes = smi.then(|| {
            let placed = self.gpus.iter().flat_map(|g| {
                g.processes.iter().map(move |p| Process {
                    gpu: (!self.listed).then_some(g.index),
                    gpu_uuid: None,
                    pid: p.pid,
                    name: &p.command,
                    used_bytes: p.used_bytes,
                })
            });
            let unplaced = self.unplaced.iter().map(|u| Process {
                gpu: None,
                gpu_uuid: u.gpu.as_deref(),
                pid: u.process.pid,
                name: &u.process.command,
                used_bytes: u.process.used_bytes,
            });
            placed.chain(unplaced).collect()
        });
        Json {
            source: self.source,
            line: self.line,
            gpus,
            processes,
            mig_devices: &self.mig,
            driver_version: &self.driver_version,
            cuda_version: &self.cuda_version,
            duplicate_rows: self.duplicate_rows,
            samples: if self.samples > 1 { self.samples } else { 0 },
            torch: (!smi).then_some(&self.torch),
            findings: &self.findings,
            fixes: &self.fixes,
        }
        .serialize(s)
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Reads every reading in a region, in input order.
pub fn read(doc: &Doc) -> Vec<Reading> {
    let text = doc.spaced.as_str();
    let mut out = Vec::new();
    if text.contains("MiB") || text.contains("Memory-Usage") {
        out.extend(smi_table::read(doc));
    }
    if text.contains("FB Memory Usage") {
        out.extend(smi_q::read(doc));
    }
    if text.contains("--query-") || text.contains(", ") {
        out.extend(smi_query::read(doc));
    }
    if text.contains("B |") {
        out.extend(torch::read_summary(doc));
    }
    if text.contains("_bytes.all.") {
        out.extend(torch::read_stats(doc));
    }
    out.retain(|r| {
        !r.gpus.is_empty() || !r.mig.is_empty() || !r.unplaced.is_empty() || !r.torch.is_empty()
    });
    out.sort_by_key(|r| r.line);
    out
}

/// The input line holding byte `off` of the spaced view.
fn line_at(doc: &Doc, off: usize) -> u64 {
    doc.lines
        .get(doc.line_index_spaced(off))
        .map_or(1, |l| l.line)
}

/// Compiles one of this module's patterns (all are literals, tested).
fn regex(p: &str) -> Regex {
    crate::pattern::compile(p).unwrap_or_else(|e| panic!("bad reading regex {p:?}: {e}"))
}

type Lazy = LazyLock<Regex>;

/// `N` MiB as bytes (nvidia-smi's unit), saturating.
fn mib(n: u64) -> u64 {
    n.saturating_mul(1 << 20)
}

/// A number of MiB as printed (`1234`, `1234MiB`, `1234 MiB`); `None` for
/// `N/A`, `[N/A]`, `[Not Supported]` and anything else.
fn mib_value(s: &str) -> Option<u64> {
    let t = s.trim().trim_end_matches("MiB").trim();
    t.parse::<u64>().ok().map(mib)
}

/// A size as PyTorch prints it (`14281 MiB`, `1062 MB`, `0 B`).
fn size(s: &str) -> Option<u64> {
    s.trim().parse::<Bytes>().ok().map(Bytes::get)
}

/// A leading integer (`85 %`, `45C`, `37%`).
fn leading_u32(s: &str) -> Option<u32> {
    let t = s.trim();
    let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    t.get(..end).and_then(|d| d.parse().ok())
}

/// A leading decimal (`75W`, `59.32 W`).
fn leading_f64(s: &str) -> Option<f64> {
    let t = s.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    t.get(..end)
        .and_then(|d| d.parse::<f64>().ok())
        .filter(|v| v.is_finite())
}

/// A printed name, `None` for nvidia-smi's placeholders.
fn name(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty() && !matches!(t, "N/A" | "[N/A]" | "[Not Supported]")).then(|| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize;
    use crate::scan::RawLine;

    pub(crate) fn doc(text: &str) -> Doc {
        let raw: Vec<RawLine> = text
            .lines()
            .zip(1..)
            .map(|(l, number)| RawLine {
                number,
                bytes: l.as_bytes().to_vec(),
            })
            .collect();
        normalize::build(normalize::clean(&raw))
    }

    #[test]
    fn values_parse_and_placeholders_are_none() {
        assert_eq!(mib_value("1234MiB"), Some(1234 << 20));
        assert_eq!(mib_value(" 1234 MiB "), Some(1234 << 20));
        assert_eq!(mib_value("[N/A]"), None);
        assert_eq!(mib_value("99999999999999999999"), None);
        assert_eq!(mib(u64::MAX), u64::MAX);
        assert_eq!(size("1062 MB"), Some(1062 << 20));
        assert_eq!(size("957217 KiB"), Some(957_217 << 10));
        assert_eq!(size("0 B"), Some(0));
        assert_eq!(leading_u32("85 %"), Some(85));
        assert_eq!(leading_u32("N/A"), None);
        assert_eq!(leading_f64("59.32 W"), Some(59.32));
        assert_eq!(name("[Not Supported]"), None);
    }

    #[test]
    fn plain_text_has_no_reading() {
        assert!(read(&doc("epoch 1, loss 0.5\nB | x\n")).is_empty());
    }
}
