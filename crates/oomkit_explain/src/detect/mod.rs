//! Detectors: one file per source of errors, each turning message text into [`Signal`]s.
//!
//! A detector owns one headline regex (the phrase that starts a message) and
//! a parser that reads the message's fields from the text that follows, up
//! to the next headline. Field regexes are written with single spaces that
//! [`re`] turns into `\s*`, so one pattern matches both joined views of a
//! [`Doc`](crate::normalize::Doc): the `spaced` view first, the `tight` view
//! (line breaks deleted, for messages wrapped mid-word) when a field is missing.
//!
//! Formats, eras and field meanings: `docs/reference/oom-messages.md`.

mod others;
mod pytorch;
mod serving;
mod tensorflow;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;

use oomkit_core::Bytes;
use oomkit_core::bytes::SIZE_PATTERN;
use regex::{Captures, Regex};

use crate::detail::Detail;
use crate::event::{Backend, Cause, Framework, ProcessUse, TensorInfo};
use crate::normalize::{Doc, Line};

/// Fields read from one message. `None` = not stated.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fields {
    pub device: Option<u32>,
    pub requested: Option<Bytes>,
    pub total: Option<Bytes>,
    pub free: Option<Bytes>,
    pub allocated: Option<Bytes>,
    pub reserved: Option<Bytes>,
    /// PyTorch ≥ 2.1 "reserved by PyTorch but unallocated", legacy `cached`.
    pub unallocated: Option<Bytes>,
    /// A user-set limit (PyTorch `allowed`, cudaMallocAsync "PyTorch limit", MPS max allowed).
    pub limit: Option<Bytes>,
    pub private_pool: Option<Bytes>,
    /// Memory used by others that the message names directly (MPS "other allocations").
    pub others: Option<Bytes>,
    pub processes: Vec<ProcessUse>,
    pub tensor: Option<TensorInfo>,
    pub op: Option<String>,
    pub details: Vec<Detail>,
}

/// The message shape a detector branch recognised; one variant per branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Kind {
    // PyTorch (pytorch.rs)
    PytorchAllocator,
    PytorchAllocatorHeadless,
    Ipex4gb,
    CudaMallocAsync,
    Mps,
    ThcError,
    ThcCheck,
    CudaErrorOom,
    CublasAllocFailed,
    CudnnStatus,
    NvmlAssert,
    IllegalMemoryAccess,
    // TensorFlow and XLA (tensorflow.rs, and TF's cuDNN texts in pytorch.rs)
    TfOomTensor,
    TfBfc,
    TfBfcWarning,
    StreamExecutorDevice,
    HostPinned,
    TfDstTensor,
    TfEagerAlloc,
    TfGpuDeviceAlloc,
    TfCudnnHandle,
    TfCudnnAlgo,
    XlaOom,
    XlaRequest,
    XlaTpuSpace,
    XlaCudaMallocAsync,
    XlaTpuDeviceBuffer,
    // Serving (serving.rs, and ggml's CUDA error in pytorch.rs)
    VllmNoBlocks,
    VllmV0MaxLen,
    VllmV1MaxLen,
    GgmlCudaError,
    GgmlMalloc,
    GgmlBuffer,
    GgmlFailed,
    GgmlPinned,
    GgmlVulkanAlloc,
    GgmlMetalOom,
    MlxMetal,
    TgiWarmup,
    /// SGLang's start-up check: no room left for the KV cache pool.
    SglangKvPool,
    // Others (others.rs)
    NcclOom,
    NcclUnhandled,
    PaddleOom,
    PaddleEnforce,
    CupyOom,
    OrtBfcArena,
    /// ONNX Runtime's CUDA provider: `CUDA failure 2: out of memory ; GPU=N`.
    OrtCudaCall,
    ComfyuiTip,
    ComfyuiTiledVae,
    A1111Summary,
    CpuAllocator,
    OomKiller,
    PythonMemoryError,
    TensorrtOom,
    Ctranslate2Oom,
    TorchMemorySaver,
    RmmOom,
}

/// Signals of one chain that follow each other describe one error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Chain {
    Pytorch,
    PytorchCudaError,
    Thc,
    Cublas,
    Cudnn,
    Nvml,
    Illegal,
    /// TensorFlow: the BFC log, the dump, the exception.
    Tf,
    TfCudnn,
    /// XLA/JAX: the BFC log JAX prints, then RESOURCE_EXHAUSTED.
    Xla,
    Vllm,
    /// ggml's three lines for one failure.
    Ggml,
    GgmlHost,
    Tgi,
    Sglang,
    Host,
    Nccl,
    Paddle,
    Cupy,
    Ort,
    Comfyui,
    ComfyuiVae,
    A1111,
    Tensorrt,
    Ctranslate2,
    MemorySaver,
    Rmm,
    Mlx,
}

/// Whether a signal is an OOM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// A device out-of-memory error.
    Oom,
    /// A look-alike: the reason it is not a device OOM.
    NotOom(&'static str),
    /// May hide an OOM, but the text cannot tell.
    Undetermined(&'static str),
}

/// One recognised message (or one line of a multi-line family).
#[derive(Debug, Clone)]
pub struct Signal {
    /// Message shape, unique per detector branch.
    pub kind: Kind,
    /// Signals of one chain that follow each other describe one error
    /// (ggml's three lines, TF's BFC log then the exception).
    pub chain: Chain,
    /// Which signal's numbers win when a chain disagrees (higher wins).
    pub rank: u8,
    /// Index of the headline's line in the doc.
    pub line_idx: usize,
    pub framework: Framework,
    pub backend: Option<Backend>,
    pub status: Status,
    /// Context that belongs to a neighbouring error (ComfyUI's tip).
    pub context_only: bool,
    pub fields: Fields,
    pub format: &'static str,
    pub version_hint: Option<&'static str>,
    /// The headline text, cleaned.
    pub message: String,
    /// A cause the message's family implies by itself, with evidence.
    pub implied: Option<(Cause, String)>,
}

/// Text a detector reads: the message span in the spaced view, and the same
/// lines in the tight view for fields lost to mid-word wraps.
pub struct Span<'a> {
    pub spaced: &'a str,
    pub tight: &'a str,
    /// The whole region, spaced, for context hints.
    pub region: &'a RegionText<'a>,
    /// The headline's line before the headline (empty for a headline found
    /// only across a line break).
    pub before: &'a str,
    /// The headline's line after the headline.
    pub after: &'a str,
}

/// The whole region (spaced view) with memoised lookups. A dense log puts
/// thousands of messages in one region; looking through the region once per
/// message made `explain` quadratic (4 MB of TensorFlow errors took 6 s).
/// Each needle and each regex is now searched once per region.
pub struct RegionText<'a> {
    text: &'a str,
    found: RefCell<HashMap<&'static str, bool>>,
    /// Where each regex first matches (its captures are re-read there).
    first: RefCell<HashMap<usize, Option<usize>>>,
}

impl<'a> RegionText<'a> {
    /// Wraps a region's spaced text.
    pub fn new(text: &'a str) -> Self {
        RegionText {
            text,
            found: RefCell::default(),
            first: RefCell::default(),
        }
    }

    /// Whether the region contains `needle` (searched once per region).
    pub fn contains(&self, needle: &'static str) -> bool {
        *self
            .found
            .borrow_mut()
            .entry(needle)
            .or_insert_with(|| self.text.contains(needle))
    }

    /// The first match of `re` in the region (searched once per region).
    pub fn captures(&self, re: &'static Regex) -> Option<Captures<'a>> {
        let key = std::ptr::from_ref(re) as usize;
        let at = *self
            .first
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| re.find(self.text).map(|m| m.start()));
        re.captures_at(self.text, at?)
    }
}

impl Span<'_> {
    /// First match of `re` in the spaced span, else in the tight span.
    pub fn cap(&self, re: &Regex) -> Option<Captures<'_>> {
        re.captures(self.spaced).or_else(|| re.captures(self.tight))
    }

    /// A size captured by group 1 of `re`.
    pub fn size(&self, re: &Regex) -> Option<Bytes> {
        self.cap(re).and_then(|c| size_of(&c, 1))
    }

    /// A device index captured by group 1 of `re`.
    pub fn device(&self, re: &Regex) -> Option<u32> {
        self.cap(re).and_then(|c| u32_of(&c, 1))
    }

    /// An integer captured by group 1 of `re`.
    pub fn int(&self, re: &Regex) -> Option<u64> {
        self.cap(re).and_then(|c| int_of(&c, 1))
    }

    /// Whether `re` matches anywhere in the span.
    pub fn has(&self, re: &Regex) -> bool {
        re.is_match(self.spaced) || re.is_match(self.tight)
    }
}

/// Whether a size is NVML's "not available" value rather than a figure:
/// `NVML_VALUE_NOT_AVAILABLE` is `0xFFFFFFFFFFFFFFFF` (nvml.h), which PyTorch
/// prints as `17179869184.00 GiB` (16 EiB) and which saturates [`Bytes`].
/// No memory of 1 EiB or more exists, so anything that large is unknown.
pub fn nvml_unavailable(b: Bytes) -> bool {
    b.0 >= 1 << 60
}

/// Parses group `i` as a size. Units typed in lower case (`20.00 mib`, a
/// message retyped by hand) read as their binary spelling.
pub fn size_of(c: &Captures<'_>, i: usize) -> Option<Bytes> {
    c.get(i).and_then(|m| parse_size(m.as_str()))
}

fn parse_size(text: &str) -> Option<Bytes> {
    text.parse::<Bytes>().ok().or_else(|| {
        let fixed = text
            .replace("kib", "KiB")
            .replace("mib", "MiB")
            .replace("gib", "GiB")
            .replace("tib", "TiB")
            .replace("kb", "KB")
            .replace("mb", "MB")
            .replace("gb", "GB");
        fixed.parse::<Bytes>().ok()
    })
}

/// The framework an XLA message comes from, decided by evidence that names
/// it, never by generic words: torch_xla's module; JAX's modules, its
/// libraries (flax, optax, numpyro, equinox), its runtime errors and the
/// `external/xla/` source paths of jaxlib's build (TensorFlow ≥ 2.16 builds
/// XLA as `external/local_xla/`); TensorFlow's modules and Keras. Without
/// any, `default`.
pub fn xla_framework(span: &Span<'_>, default: Framework) -> Framework {
    const JAX: &[&str] = &[
        "jax",
        "jaxlib",
        "XlaRuntimeError",
        "JaxRuntimeError",
        "flax",
        "optax",
        "numpyro",
        "equinox",
        "external/xla/",
        "xla/pjrt",
    ];
    const TF: &[&str] = &[
        "tensorflow/",
        "tensorflow.",
        "keras",
        "external/local_xla",
        "external/local_tsl",
    ];
    if region_has(span, &["torch_xla", "pytorch/xla"]) {
        Framework::Pytorch
    } else if region_has(span, JAX) {
        Framework::Jax
    } else if region_has(span, TF) {
        Framework::Tensorflow
    } else {
        default
    }
}

/// Parses group `i` as a device index.
pub fn u32_of(c: &Captures<'_>, i: usize) -> Option<u32> {
    int_of(c, i).and_then(|d| u32::try_from(d).ok())
}

/// Parses group `i` as an integer (commas allowed).
pub fn int_of(c: &Captures<'_>, i: usize) -> Option<u64> {
    c.get(i)
        .and_then(|m| m.as_str().replace(',', "").parse().ok())
}

/// Compiles a field template: `{SIZE}` becomes a size capture, `{N}` an
/// integer capture, and each literal space `\s*`.
pub fn re(template: &str) -> Regex {
    let size = format!("({SIZE_PATTERN})");
    let pat = template
        .replace(' ', r"\s*")
        .replace("{SIZE}", &size)
        .replace("{N}", r"(\d+)");
    crate::pattern::compile(&pat).unwrap_or_else(|e| panic!("bad detector regex {template:?}: {e}"))
}

/// A compiled template, built on first use.
pub type Lazy = LazyLock<Regex>;

/// One detector.
pub struct Detector {
    /// Headline regex, matched on the spaced and tight views.
    pub headline: &'static Lazy,
    /// How far past the headline the message may reach, in bytes.
    pub max_span: usize,
    /// Reads the message; `m` is the headline match.
    pub parse: fn(m: &Captures<'_>, span: &Span<'_>) -> Option<Signal>,
    /// Headlines this one is part of: a hit is dropped when one of them is
    /// found on its line or up to two lines before (PyTorch's `Tried to
    /// allocate …` is a message of its own only without its headline).
    pub defer_to: &'static [&'static Lazy],
}

/// Every detector, in no particular order (each headline is distinct).
pub fn detectors() -> impl Iterator<Item = &'static Detector> {
    pytorch::DETECTORS
        .iter()
        .chain(tensorflow::DETECTORS)
        .chain(serving::DETECTORS)
        .chain(others::DETECTORS)
}

/// A signal with defaults for the common fields.
pub fn signal(kind: Kind, chain: Chain, framework: Framework, format: &'static str) -> Signal {
    Signal {
        kind,
        chain,
        rank: 1,
        line_idx: 0,
        framework,
        backend: None,
        status: Status::Oom,
        context_only: false,
        fields: Fields::default(),
        format,
        version_hint: None,
        message: String::new(),
        implied: None,
    }
}

/// Detectors whose message is at most this long stop at the next log record.
const SHORT_SPAN: usize = 2000;

/// A line that starts a new log record or traceback, ending the message before it.
static RECORD_START: LazyLock<Regex> = LazyLock::new(|| {
    // … or where a pasted table (nvidia-smi, memory_summary, crate::readings)
    // or a shell or Python prompt begins.
    crate::pattern::compile(r#"^(?:(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\b|Traceback \(most recent call last\)|File "|During handling of the above|The above exception was the direct cause|[IWEF]\d{4} \d|Memory summary:|[|+][=-]{20}|\$ |>>> )"#)
        .expect("valid")
});

static CODE_CONTEXT: LazyLock<Regex> = LazyLock::new(|| {
    crate::pattern::compile(
        r#"(?:\braise\b|\bif\b[^:]*["']$|\bin str\(|\bexcept\b.*["']$|\bprint\(["']$)"#,
    )
    .expect("valid")
});

/// Runs every detector over a doc. Headlines found in the tight view only
/// (wrapped mid-phrase) are added when no spaced match covers that line.
pub fn detect(doc: &Doc) -> Vec<Signal> {
    struct Hit<'d> {
        det: &'d Detector,
        start: usize,
        end: usize,
        tight: bool,
        line_idx: usize,
    }
    let mut hits: Vec<Hit<'_>> = Vec::new();
    // `raise X("…message…")` quoted by a traceback frame: the error itself
    // when the paste ends before its exception line (kept below only then).
    let mut raised: Vec<Hit<'_>> = Vec::new();
    for det in detectors() {
        for m in det.headline.find_iter(&doc.spaced) {
            let line_idx = doc.line_index_spaced(m.start());
            let line_start = doc.spaced_starts.get(line_idx).copied().unwrap_or(0);
            let before = doc.spaced.get(line_start..m.start()).unwrap_or_default();
            let hit = Hit {
                det,
                start: m.start(),
                end: m.end(),
                tight: false,
                line_idx,
            };
            if !is_code(before) {
                hits.push(hit);
            } else if raised_in_frame(doc, line_idx, before) {
                raised.push(hit);
            }
        }
    }
    for r in raised {
        if !hits.iter().any(|h| std::ptr::eq(h.det, r.det)) {
            hits.push(r);
        }
    }
    // Tight-view headlines: a phrase broken across lines.
    for det in detectors() {
        for m in det.headline.find_iter(&doc.tight) {
            let line_idx = doc
                .tight_starts
                .partition_point(|&s| s <= m.start())
                .saturating_sub(1);
            let end_line = doc
                .tight_starts
                .partition_point(|&s| s < m.end())
                .saturating_sub(1);
            if end_line == line_idx {
                continue; // on one line: the spaced view saw it
            }
            if hits.iter().any(|h| {
                !h.tight && std::ptr::eq(h.det, det) && (line_idx..=end_line).contains(&h.line_idx)
            }) {
                continue;
            }
            hits.push(Hit {
                det,
                start: m.start(),
                end: m.end(),
                tight: true,
                line_idx,
            });
        }
    }
    // A hit that is part of a longer message found just before it is not a
    // message of its own (its span would cut the longer one short).
    let deferred = |h: &Hit<'_>, all: &[Hit<'_>]| {
        all.iter().any(|o| {
            h.det
                .defer_to
                .iter()
                .any(|d| std::ptr::eq(*d, o.det.headline))
                && o.line_idx <= h.line_idx
                && h.line_idx <= o.line_idx + 2
                && (o.line_idx < h.line_idx || o.start < h.start)
        })
    };
    let keep: Vec<bool> = hits.iter().map(|h| !deferred(h, &hits)).collect();
    let mut k = keep.into_iter();
    hits.retain(|_| k.next().unwrap_or(true));
    hits.sort_by_key(|h| (h.line_idx, h.start));
    let mut spaced_starts: Vec<usize> = hits.iter().filter(|h| !h.tight).map(|h| h.start).collect();
    spaced_starts.sort_unstable();
    let region = RegionText::new(&doc.spaced);
    let mut out = Vec::new();
    for (i, h) in hits.iter().enumerate() {
        // The message runs to the next headline on a later line (or the cap).
        let next_line = hits
            .get(i + 1..)
            .unwrap_or_default()
            .iter()
            .find(|n| n.line_idx > h.line_idx || (!n.tight && !h.tight && n.start >= h.end))
            .map(|n| n.line_idx);
        let mut stop_line = next_line.unwrap_or(doc.lines.len());
        // A rank's message ends where a line of another rank, or of the
        // launcher (no rank prefix), begins: PyTorch prefixes every line a
        // rank prints with `[rankN]:`, so an unprefixed SIGTERM notice or
        // ChildFailedError summary is not part of it.
        if let Some(rank) = doc.lines.get(h.line_idx).and_then(|l| l.rank)
            && let Some(other) = (h.line_idx + 1..stop_line)
                .find(|&i| doc.lines.get(i).is_some_and(|l| l.rank != Some(rank)))
        {
            stop_line = other;
        }
        // A short message ends where the next log record starts; dump readers
        // (BFC, XLA) read on to their summary.
        if h.det.max_span <= SHORT_SPAN
            && let Some(end) = (h.line_idx + 1..stop_line).find(|&i| {
                doc.lines
                    .get(i)
                    .is_some_and(|l| RECORD_START.is_match(&l.text))
            })
        {
            stop_line = end;
        }
        let (spaced, tight, anchor_text) = if h.tight {
            let r = doc.tight_range(h.line_idx, stop_line.max(h.line_idx + 1));
            let tspan = doc.tight.get(h.start.min(r.end)..r.end).unwrap_or_default();
            (tspan, tspan, doc.tight.get(h.start..).unwrap_or_default())
        } else {
            let k = spaced_starts.partition_point(|&st| st < h.end);
            let end = spaced_starts
                .get(k)
                .copied()
                .unwrap_or(doc.spaced.len())
                .min(
                    doc.spaced_starts
                        .get(stop_line)
                        .copied()
                        .unwrap_or(doc.spaced.len()),
                );
            let end = floor_char(&doc.spaced, end.min(h.start + h.det.max_span).max(h.end));
            let r = doc.tight_range(h.line_idx, stop_line.max(h.line_idx + 1));
            (
                doc.spaced.get(h.start..end).unwrap_or_default(),
                doc.tight.get(r).unwrap_or_default(),
                doc.spaced.get(h.start..).unwrap_or_default(),
            )
        };
        let Some(caps) = h.det.headline.captures(anchor_text) else {
            continue;
        };
        let (before, after) = if h.tight {
            ("", "")
        } else {
            let line_start = doc.spaced_starts.get(h.line_idx).copied().unwrap_or(0);
            let line_end = doc
                .spaced_starts
                .get(h.line_idx + 1)
                .map_or(doc.spaced.len(), |&e| e.saturating_sub(1));
            (
                doc.spaced.get(line_start..h.start).unwrap_or_default(),
                doc.spaced
                    .get(h.end..line_end.max(h.end))
                    .unwrap_or_default(),
            )
        };
        let span = Span {
            spaced,
            tight,
            region: &region,
            before,
            after,
        };
        if let Some(mut s) = (h.det.parse)(&caps, &span) {
            s.line_idx = h.line_idx;
            if s.message.is_empty() {
                s.message = if fixed_width_wrap(doc, h.line_idx, stop_line) {
                    // Hard-wrapped at a fixed width (mid-word): show it unwrapped.
                    let t = doc
                        .tight
                        .get(doc.tight_range(h.line_idx, stop_line))
                        .unwrap_or_default();
                    let lead = t.find(|c: char| c.is_alphanumeric()).unwrap_or(0);
                    clip(t.get(lead..).unwrap_or_default().trim())
                } else {
                    headline_text(doc, h.line_idx, (!h.tight).then_some(h.start), spaced)
                };
            }
            out.push(s);
        }
    }
    out
}

/// The first at most `n` bytes of `s`, cut on a character boundary.
pub fn prefix(s: &str, n: usize) -> &str {
    s.get(..floor_char(s, n.min(s.len()))).unwrap_or_default()
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn is_code(before_on_line: &str) -> bool {
    CODE_CONTEXT.is_match(before_on_line.trim_end())
}

/// Whether a headline quoted in `raise X("…` is the source line of a
/// traceback frame (`File "…", line N, in f` on the line before): Python
/// prints the statement that raised, so it states the error.
fn raised_in_frame(doc: &Doc, line_idx: usize, before_on_line: &str) -> bool {
    static RAISE: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern::compile(r#"^\s*raise \w+(?:\.\w+)*\(\s*["']$"#).expect("valid")
    });
    static FRAME: LazyLock<Regex> = LazyLock::new(|| {
        crate::pattern::compile(r#"File "[^"]+", line \d+, in \S+\s*$"#).expect("valid")
    });
    if !RAISE.is_match(before_on_line) {
        return false;
    }
    let Some(prev) = line_idx.checked_sub(1) else {
        return false;
    };
    let start = doc.spaced_starts.get(prev).copied().unwrap_or(0);
    let end = doc.spaced_starts.get(line_idx).copied().unwrap_or(start);
    FRAME.is_match(doc.spaced.get(start..end).unwrap_or_default())
}

/// The message as a person would quote it: the exception name before the
/// headline on its line, then the message, at most ~400 characters.
fn headline_text(doc: &Doc, line_idx: usize, anchor_start: Option<usize>, span: &str) -> String {
    let prefix = match anchor_start {
        Some(a) => {
            let ls = doc.spaced_starts.get(line_idx).copied().unwrap_or(a).min(a);
            let p = doc.spaced.get(ls..a).unwrap_or_default();
            if p.len() <= 100 { p } else { "" }
        }
        None => "",
    };
    let body = span
        .split(" Traceback (most recent call last)")
        .next()
        .unwrap_or(span);
    clip(format!("{prefix}{body}").trim())
}

/// At most ~400 characters, cut on a character boundary.
fn clip(text: &str) -> String {
    let mut text = text.to_string();
    if text.len() > 400 {
        let cut = floor_char(&text, 400);
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Whether lines `from..to` look hard-wrapped at a fixed width: every line but
/// the last has the same length, at least 60 characters (Windows consoles,
/// `docker logs` and CI viewers wrap at 80/100/120 columns), and at least one
/// break falls inside a word, and no line starts a new record with the first
/// line's tag. Two log lines that happen to be equally long (ggml's two
/// 63-character `ggml_vulkan:` lines) are shown with a space between them.
fn fixed_width_wrap(doc: &Doc, from: usize, to: usize) -> bool {
    if to < from + 2 || to > doc.lines.len() {
        return false;
    }
    let lines = doc.lines.get(from..to).unwrap_or_default();
    let lens: Vec<usize> = lines
        .iter()
        .take(lines.len().saturating_sub(1))
        .map(|l| l.text.chars().count())
        .collect();
    let same_width = lens
        .first()
        .is_some_and(|&first| first >= 60 && lens.iter().all(|&n| n == first));
    let last = |l: &Line| l.text.chars().next_back();
    let mid_word = lines.windows(2).any(|w| match w {
        [a, b] => {
            last(a).is_some_and(char::is_alphanumeric)
                && b.text.chars().next().is_some_and(char::is_alphanumeric)
        }
        _ => false,
    });
    // A line that starts with the first line's tag (`ggml_vulkan:`) is a new
    // record, not a row of a wrapped one.
    let tag = |l: &Line| {
        l.text
            .split_once(|c: char| c == ':' || c.is_whitespace())
            .map(|(t, _)| t.to_string())
            .filter(|t| t.len() >= 3)
    };
    let first_tag = lines.first().and_then(tag);
    let new_record = first_tag.is_some_and(|t| {
        lines
            .iter()
            .skip(1)
            .any(|l| tag(l).as_deref() == Some(t.as_str()))
    });
    same_width && mid_word && !new_record
}

static ERROR_WORD: LazyLock<Regex> = LazyLock::new(|| {
    crate::pattern::compile(r"(?i)(error|exception|fatal|failed|failure|critical|oom)\W*$")
        .expect("valid")
});

/// Whether a phrase without numbers stands where an error message stands,
/// not inside a sentence ("to avoid CUDA out of memory errors, …"): after an
/// exception name or an error word (`RuntimeError: `, `ERROR `), or on its
/// own between punctuation (`[WARNING] CUDA out of memory, retrying`).
pub fn error_shaped(s: &Span<'_>) -> bool {
    let before = s.before.trim_end();
    let after = s.after.trim_start();
    let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
    ERROR_WORD.is_match(before)
        || (boundary(before.chars().next_back()) && boundary(after.chars().next()))
}

/// Whether the region (spaced) mentions any of these words.
pub fn region_has(span: &Span<'_>, needles: &[&'static str]) -> bool {
    needles.iter().any(|n| span.region.contains(n))
}

/// Builds a `TensorInfo` and its size from TF/XLA shape text like `128,128,109,109`.
pub fn tensor_bytes(shape: &str, dtype: &str) -> (TensorInfo, Option<Bytes>) {
    let dims: Vec<u64> = shape
        .split(',')
        .filter_map(|d| d.trim().parse().ok())
        .collect();
    let elems = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let size = oomkit_core::DType::from_name(dtype)
        .zip(elems)
        .map(|(t, n)| Bytes(t.bytes_for(n)));
    (
        TensorInfo {
            shape: dims,
            dtype: dtype.to_string(),
        },
        size,
    )
}

#[cfg(test)]
mod table {
    //! One row per message shape (`Kind`): the text, what the detector must
    //! read from it, and nothing it must not. The texts are the formats'
    //! examples (`formats.rs`, from `docs/reference/oom-messages.md` and the
    //! fixtures' public sources).
    use super::*;
    use crate::detail::BufferKind;
    use crate::normalize;
    use crate::scan::RawLine;

    /// Every kind; `index` is an exhaustive match, so a new `Kind` does not
    /// compile until it is listed here (and then needs a row).
    const ALL: [Kind; 57] = [
        Kind::PytorchAllocator,
        Kind::PytorchAllocatorHeadless,
        Kind::Ipex4gb,
        Kind::CudaMallocAsync,
        Kind::Mps,
        Kind::ThcError,
        Kind::ThcCheck,
        Kind::CudaErrorOom,
        Kind::CublasAllocFailed,
        Kind::CudnnStatus,
        Kind::NvmlAssert,
        Kind::IllegalMemoryAccess,
        Kind::TfOomTensor,
        Kind::TfBfc,
        Kind::TfBfcWarning,
        Kind::StreamExecutorDevice,
        Kind::HostPinned,
        Kind::TfDstTensor,
        Kind::TfEagerAlloc,
        Kind::TfCudnnHandle,
        Kind::TfCudnnAlgo,
        Kind::XlaOom,
        Kind::XlaRequest,
        Kind::VllmNoBlocks,
        Kind::VllmV0MaxLen,
        Kind::VllmV1MaxLen,
        Kind::GgmlCudaError,
        Kind::GgmlMalloc,
        Kind::GgmlBuffer,
        Kind::GgmlFailed,
        Kind::GgmlPinned,
        Kind::TgiWarmup,
        Kind::NcclOom,
        Kind::NcclUnhandled,
        Kind::PaddleOom,
        Kind::PaddleEnforce,
        Kind::CupyOom,
        Kind::OrtBfcArena,
        Kind::ComfyuiTip,
        Kind::ComfyuiTiledVae,
        Kind::A1111Summary,
        Kind::CpuAllocator,
        Kind::OomKiller,
        Kind::PythonMemoryError,
        Kind::XlaTpuSpace,
        Kind::GgmlVulkanAlloc,
        Kind::GgmlMetalOom,
        Kind::XlaCudaMallocAsync,
        Kind::TfGpuDeviceAlloc,
        Kind::XlaTpuDeviceBuffer,
        Kind::MlxMetal,
        Kind::TensorrtOom,
        Kind::Ctranslate2Oom,
        Kind::TorchMemorySaver,
        Kind::RmmOom,
        Kind::OrtCudaCall,
        Kind::SglangKvPool,
    ];

    fn index(k: Kind) -> usize {
        match k {
            Kind::PytorchAllocator => 0,
            Kind::Ipex4gb => 1,
            Kind::CudaMallocAsync => 2,
            Kind::Mps => 3,
            Kind::ThcError => 4,
            Kind::ThcCheck => 5,
            Kind::CudaErrorOom => 6,
            Kind::CublasAllocFailed => 7,
            Kind::CudnnStatus => 8,
            Kind::NvmlAssert => 9,
            Kind::IllegalMemoryAccess => 10,
            Kind::TfOomTensor => 11,
            Kind::TfBfc => 12,
            Kind::TfBfcWarning => 13,
            Kind::StreamExecutorDevice => 14,
            Kind::HostPinned => 15,
            Kind::TfDstTensor => 16,
            Kind::TfCudnnHandle => 17,
            Kind::TfCudnnAlgo => 18,
            Kind::XlaOom => 19,
            Kind::XlaRequest => 20,
            Kind::VllmNoBlocks => 21,
            Kind::VllmV0MaxLen => 22,
            Kind::VllmV1MaxLen => 23,
            Kind::GgmlCudaError => 24,
            Kind::GgmlMalloc => 25,
            Kind::GgmlBuffer => 26,
            Kind::GgmlFailed => 27,
            Kind::GgmlPinned => 28,
            Kind::TgiWarmup => 29,
            Kind::NcclOom => 30,
            Kind::NcclUnhandled => 31,
            Kind::PaddleOom => 32,
            Kind::PaddleEnforce => 33,
            Kind::CupyOom => 34,
            Kind::OrtBfcArena => 35,
            Kind::ComfyuiTip => 36,
            Kind::ComfyuiTiledVae => 37,
            Kind::A1111Summary => 38,
            Kind::CpuAllocator => 39,
            Kind::OomKiller => 40,
            Kind::PythonMemoryError => 41,
            Kind::TfEagerAlloc => 42,
            Kind::PytorchAllocatorHeadless => 43,
            Kind::XlaTpuSpace => 44,
            Kind::GgmlVulkanAlloc => 45,
            Kind::GgmlMetalOom => 46,
            Kind::XlaCudaMallocAsync => 47,
            Kind::TfGpuDeviceAlloc => 48,
            Kind::XlaTpuDeviceBuffer => 49,
            Kind::MlxMetal => 50,
            Kind::TensorrtOom => 51,
            Kind::Ctranslate2Oom => 52,
            Kind::TorchMemorySaver => 53,
            Kind::RmmOom => 54,
            Kind::OrtCudaCall => 55,
            Kind::SglangKvPool => 56,
        }
    }

    /// `text`'s lines (numbered from 1), cleaned and joined as a region.
    fn doc(text: &str) -> Doc {
        let raw: Vec<RawLine> = text
            .lines()
            .zip(1u64..)
            .map(|(l, number)| RawLine {
                number,
                bytes: l.as_bytes().to_vec(),
            })
            .collect();
        normalize::build(normalize::clean(&raw))
    }

    fn signals(text: &str) -> Vec<Signal> {
        detect(&doc(text))
    }

    #[test]
    fn only_real_fixed_width_wraps_are_joined_without_spaces() {
        // An 80-column console cut mid-word (real/104: "ha|s", "10.|11").
        let wrapped = doc(concat!(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.93 GiB. GPU 0 ha\n",
            "s a total capacity of 11.76 GiB of which 712.44 MiB is free. Including non-PyTor\n",
            "ch memory."
        ));
        assert!(fixed_width_wrap(&wrapped, 0, 3));
        // Two ggml records that happen to be 63 characters long.
        let records = doc(concat!(
            "ggml_vulkan: Device memory allocation of size 118497280 failed.\n",
            "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory\n",
            "double free or corruption (out)"
        ));
        assert!(!fixed_width_wrap(&records, 0, 3));
        // Equal widths, but every break falls after punctuation.
        let sentences = doc(concat!(
            "Warning: Ran out of memory when regular VAE decoding, retrying.\n",
            "Prompt executed in 41.27 seconds"
        ));
        assert!(!fixed_width_wrap(&sentences, 0, 2));
    }

    /// `O` OOM, `N` not an OOM, `U` undetermined, `C` context only.
    struct Row {
        text: &'static str,
        kind: Kind,
        fw: Framework,
        status: char,
        requested: Option<&'static str>,
        total: Option<&'static str>,
        free: Option<&'static str>,
        device: Option<u32>,
        detail: Option<Detail>,
    }

    const fn row(text: &'static str, kind: Kind, fw: Framework, status: char) -> Row {
        Row {
            text,
            kind,
            fw,
            status,
            requested: None,
            total: None,
            free: None,
            device: None,
            detail: None,
        }
    }

    fn b(s: &str) -> Bytes {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e:?}"))
    }

    #[test]
    fn every_detector_reads_its_shape() {
        use Framework as F;
        let rows = vec![
            Row {
                requested: Some("100.00 MiB"),
                total: Some("31.37 GiB"),
                free: Some("15.88 MiB"),
                device: Some(0),
                ..row(
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 100.00 MiB. GPU 0 has a total capacity of 31.37 GiB of which 15.88 MiB is free. Including non-PyTorch memory, this process has 31.34 GiB memory in use. Of the allocated memory 30.74 GiB is allocated by PyTorch, and 19.41 MiB is reserved by PyTorch but unallocated.",
                    Kind::PytorchAllocator,
                    F::Pytorch,
                    'O',
                )
            },
            Row {
                requested: Some("10.84 GiB"),
                total: Some("23.65 GiB"),
                free: Some("10.26 GiB"),
                device: Some(0),
                ..row(
                    "RuntimeError: CUDA out of memory. Tried to allocate 10.84 GiB (GPU 0; 23.65 GiB total capacity; 1.06 GiB already allocated; 10.26 GiB free; 12.53 GiB reserved in total by PyTorch)",
                    Kind::PytorchAllocator,
                    F::Pytorch,
                    'O',
                )
            },
            // ShannonAI/Self_Explaining_Structures_Improve_NLP_Models#6.
            Row {
                requested: Some("20.00 MiB"),
                total: Some("1.96 GiB"),
                free: Some("2.88 MiB"),
                device: Some(0),
                ..row(
                    "Tried to allocate 20.00 MiB (GPU 0; 1.96 GiB total capacity; 1.24 GiB already allocated; 2.88 MiB free; 1.25 GiB reserved in total by PyTorch)",
                    Kind::PytorchAllocatorHeadless,
                    F::Pytorch,
                    'O',
                )
            },
            Row {
                requested: Some("8.00 GiB"),
                total: Some("15.11 GiB"),
                device: Some(0),
                ..row(
                    "RuntimeError: Current platform can NOT allocate memory block with size larger than 4GB! Tried to allocate 8.00 GiB (GPU  0; 15.11 GiB total capacity; 0 bytes already allocated; 0 bytes reserved in total by PyTorch)",
                    Kind::Ipex4gb,
                    F::Pytorch,
                    'O',
                )
            },
            Row {
                requested: Some("512.00 KiB"),
                total: Some("15.99 GiB"),
                free: Some("0 bytes"),
                device: Some(0),
                ..row(
                    "Allocation on device 0 would exceed allowed memory. (out of memory) Currently allocated : 15.16 GiB Requested : 512.00 KiB Device limit : 15.99 GiB Free (according to CUDA): 0 bytes",
                    Kind::CudaMallocAsync,
                    F::Pytorch,
                    'O',
                )
            },
            Row {
                requested: Some("896.00 MB"),
                total: Some("9.07 GB"),
                detail: Some(Detail::Pool(crate::detail::MpsPool::Private)),
                ..row(
                    "RuntimeError: MPS backend out of memory (MPS allocated: 7.23 GB, other allocations: 1.54 GB, max allowed: 9.07 GB). Tried to allocate 896.00 MB on private pool.",
                    Kind::Mps,
                    F::Pytorch,
                    'O',
                )
            },
            Row {
                detail: Some(Detail::At(
                    "/pytorch/aten/src/THC/THCTensorRandom.cu:25".into(),
                )),
                ..row(
                    "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCTensorRandom.cu:25",
                    Kind::ThcError,
                    F::Pytorch,
                    'O',
                )
            },
            // jiesutd/NCRFpp#121: PyTorch ≤ 0.4 prints THCudaCheck too.
            row(
                "THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 error=2 : out of memory",
                Kind::ThcCheck,
                F::Pytorch,
                'O',
            ),
            // torch/torch7#1140: Lua Torch (cutorch).
            row(
                "THCudaCheck FAIL file=/home/gpu/torch/extra/cutorch/lib/THC/generic/THCStorage.cu line=66 error=2 : out of memory",
                Kind::ThcCheck,
                F::LuaTorch,
                'O',
            ),
            row(
                "torch.AcceleratorError: CUDA error: out of memory",
                Kind::CudaErrorOom,
                F::Pytorch,
                'O',
            ),
            row(
                "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
                Kind::CublasAllocFailed,
                F::Pytorch,
                'O',
            ),
            Row {
                detail: Some(Detail::CudnnStatus("CUDNN_STATUS_NOT_INITIALIZED".into())),
                ..row(
                    "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED",
                    Kind::CudnnStatus,
                    F::Pytorch,
                    'O',
                )
            },
            row(
                "RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at \"/opt/pytorch/c10/cuda/CUDACachingAllocator.cpp\":830, please report a bug to PyTorch.",
                Kind::NvmlAssert,
                F::Pytorch,
                'O',
            ),
            row(
                "RuntimeError: CUDA error: an illegal memory access was encountered",
                Kind::IllegalMemoryAccess,
                F::Pytorch,
                'N',
            ),
            Row {
                // 128·128·109·109 float32 elements.
                requested: Some("778633216 bytes"),
                device: Some(1),
                ..row(
                    "ResourceExhaustedError: OOM when allocating tensor with shape[128,128,109,109] and type float on /job:localhost/replica:0/task:0/device:GPU:1 by allocator GPU_1_bfc",
                    Kind::TfOomTensor,
                    F::Tensorflow,
                    'O',
                )
            },
            // tensorflow#13591: TF 1.x, no type, `/gpu:1` in the node.
            Row {
                device: Some(1),
                ..row(
                    "ResourceExhaustedError: OOM when allocating tensor with shape[]\n [[Node: Sum_1 = Sum[T=DT_FLOAT, Tidx=DT_INT32, keep_dims=false, _device=\"/job:localhost/replica:0/task:0/gpu:1\"](ones_1,",
                    Kind::TfOomTensor,
                    F::Tensorflow,
                    'O',
                )
            },
            Row {
                requested: Some("18874368 bytes"),
                device: Some(0),
                ..row(
                    "Allocator (GPU_0_bfc) ran out of memory trying to allocate 18.00MiB (rounded to 18874368)requested by op Mul",
                    Kind::TfBfc,
                    F::Tensorflow,
                    'O',
                )
            },
            Row {
                requested: Some("2.26GiB"),
                device: Some(0),
                ..row(
                    "Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.26GiB with freed_by_count=0. The caller indicates that this is not a failure, but may mean that there could be performance gains if more memory were available.",
                    Kind::TfBfcWarning,
                    F::Tensorflow,
                    'N',
                )
            },
            // Kyubyong/transformer#77 (TF 1.x, gpu_device.cc's EigenAllocator).
            Row {
                requested: Some("1294336000 bytes"),
                device: Some(0),
                ..row(
                    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Ran out of GPU memory when allocating 1294336000 bytes for \n\t [[{{node softmax_cross_entropy_with_logits}} = SoftmaxCrossEntropyWithLogits[T=DT_FLOAT, _device=\"/job:localhost/replica:0/task:0/device:GPU:0\"](a, b)]]",
                    Kind::TfGpuDeviceAlloc,
                    F::Tensorflow,
                    'O',
                )
            },
            // keras-ocr#195 (TF 2 eager).
            Row {
                ..row(
                    "ResourceExhaustedError: failed to allocate memory [Op:AddV2]",
                    Kind::TfEagerAlloc,
                    F::Tensorflow,
                    'O',
                )
            },
            // tensorflow#11915: the pinned-host pool is system RAM.
            Row {
                requested: Some("3.72GiB"),
                ..row(
                    "W tensorflow/core/common_runtime/bfc_allocator.cc:273] Allocator (cuda_host_bfc) ran out of memory trying to allocate 3.72GiB.  Current allocation summary follows.",
                    Kind::TfBfc,
                    F::Tensorflow,
                    'N',
                )
            },
            // chineseocr_lite#355: `_nchwc` nodes run on the CPU provider.
            Row {
                requested: Some("285081600 bytes"),
                ..row(
                    "[E:onnxruntime:, sequential_executor.cc:339 onnxruntime::SequentialExecutor::Execute] Non-zero status code returned while running Conv node. Name:'347_nchwc' Status Message: D:\\a\\_work\\1\\s\\onnxruntime\\core\\framework\\bfc_arena.cc:330 onnxruntime::BFCArena::AllocateRawInternal Failed to allocate memory for requested buffer of size 285081600",
                    Kind::OrtBfcArena,
                    F::Onnxruntime,
                    'N',
                )
            },
            Row {
                requested: Some("9029127168 bytes"),
                ..row(
                    "failed to allocate 8.41G (9029127168 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
                    Kind::StreamExecutorDevice,
                    F::Tensorflow,
                    'O',
                )
            },
            Row {
                requested: Some("4294967296 bytes"),
                ..row(
                    "could not allocate pinned host memory of size: 4294967296",
                    Kind::HostPinned,
                    F::Tensorflow,
                    'N',
                )
            },
            row(
                "InternalError: Failed copying input tensor from /job:localhost/replica:0/task:0/device:CPU:0 to /job:localhost/replica:0/task:0/device:GPU:0 in order to run _EagerConst: Dst tensor is not initialized.",
                Kind::TfDstTensor,
                F::Tensorflow,
                'O',
            ),
            row(
                "E tensorflow/stream_executor/cuda/cuda_dnn.cc:329] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
                Kind::TfCudnnHandle,
                F::Tensorflow,
                'O',
            ),
            row(
                "UnknownError: Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, so try looking to see if a warning log message was printed above.",
                Kind::TfCudnnAlgo,
                F::Tensorflow,
                'O',
            ),
            Row {
                requested: Some("4770354232 bytes"),
                ..row(
                    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.",
                    Kind::XlaOom,
                    F::Jax,
                    'O',
                )
            },
            Row {
                requested: Some("128.00 MiB"),
                device: Some(0),
                ..row(
                    "Resource exhausted: Failed to allocate request for 128.00MiB (134217728B) on device ordinal 0",
                    Kind::XlaRequest,
                    F::Jax,
                    'O',
                )
            },
            Row {
                total: Some("15.48G"),
                detail: Some(Detail::TpuMemorySpace("hbm".into())),
                ..row(
                    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 21.95G of 15.48G hbm. Exceeded hbm capacity by 6.47G.",
                    Kind::XlaTpuSpace,
                    F::Jax,
                    'O',
                )
            },
            Row {
                requested: Some("118497280 bytes"),
                ..row(
                    "ggml_vulkan: Device memory allocation of size 118497280 failed.\nggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
                    Kind::GgmlVulkanAlloc,
                    F::LlamaCpp,
                    'O',
                )
            },
            Row {
                requested: Some("1225195446464 bytes"),
                total: Some("85095874560 bytes"),
                free: Some("22635544576 bytes"),
                device: Some(3),
                ..row(
                    "E1103 18:23:55.101761 3413773 gpu_cudamallocasync_allocator.cc:361] gpu_async_3 cuMemAllocAsync failed to allocate 1225195446464 bytes: RESOURCE_EXHAUSTED: : CUDA_ERROR_OUT_OF_MEMORY: out of memory\n Reported by CUDA: Free memory/Total memory: 22635544576/85095874560",
                    Kind::XlaCudaMallocAsync,
                    F::Jax,
                    'O',
                )
            },
            row(
                "ggml_metal_graph_compute: command buffer 6 failed with status 5\nerror: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
                Kind::GgmlMetalOom,
                F::LlamaCpp,
                'O',
            ),
            row(
                "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
                Kind::VllmNoBlocks,
                F::Vllm,
                'O',
            ),
            Row {
                detail: Some(Detail::SuggestedMaxModelLen(20464)),
                ..row(
                    "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (20464). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
                    Kind::VllmV0MaxLen,
                    F::Vllm,
                    'O',
                )
            },
            Row {
                requested: Some("10.12 GiB"),
                free: Some("5.59 GiB"),
                detail: Some(Detail::SuggestedMaxModelLen(122080)),
                ..row(
                    "ValueError: To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is needed, which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the estimated maximum model length is 122080.",
                    Kind::VllmV1MaxLen,
                    F::Vllm,
                    'O',
                )
            },
            Row {
                device: Some(0),
                ..row(
                    "CUDA error 2 at /data/llama.cpp/ggml-cuda.cu:5509: out of memory current device: 0",
                    Kind::GgmlCudaError,
                    F::LlamaCpp,
                    'O',
                )
            },
            Row {
                requested: Some("9866.00 MiB"),
                device: Some(1),
                ..row(
                    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9866.00 MiB on device 1: cudaMalloc failed: out of memory",
                    Kind::GgmlMalloc,
                    F::LlamaCpp,
                    'O',
                )
            },
            Row {
                requested: Some("10345253120 bytes"),
                device: Some(1),
                detail: Some(Detail::Buffer(BufferKind::ComputeBuffer)),
                ..row(
                    "ggml_gallocr_reserve_n: failed to allocate CUDA1 buffer of size 10345253120",
                    Kind::GgmlBuffer,
                    F::LlamaCpp,
                    'O',
                )
            },
            Row {
                device: Some(0),
                detail: Some(Detail::Buffer(BufferKind::ModelWeights)),
                ..row(
                    "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
                    Kind::GgmlFailed,
                    F::LlamaCpp,
                    'O',
                )
            },
            Row {
                requested: Some("512.00 MiB"),
                ..row(
                    "ggml_cuda_host_malloc: failed to allocate 512.00 MiB of pinned memory: out of memory",
                    Kind::GgmlPinned,
                    F::LlamaCpp,
                    'N',
                )
            },
            Row {
                detail: Some(Detail::MaxBatchPrefillTokens(4096)),
                ..row(
                    "Error: Warmup(Generation(\"Not enough memory to handle 4096 prefill tokens. You need to decrease `--max-batch-prefill-tokens`\"))",
                    Kind::TgiWarmup,
                    F::Tgi,
                    'O',
                )
            },
            Row {
                device: Some(3),
                ..row(
                    "host:1:2 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
                    Kind::NcclOom,
                    F::Nccl,
                    'O',
                )
            },
            Row {
                detail: Some(Detail::NcclVersion("2.20.5".into())),
                ..row(
                    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
                    Kind::NcclUnhandled,
                    F::Nccl,
                    'U',
                )
            },
            Row {
                requested: Some("98.000244MB"),
                free: Some("0 bytes"),
                device: Some(0),
                ..row(
                    "Out of memory error on GPU 0. Cannot allocate 98.000244MB memory on GPU 0, 6.000000GB memory has been allocated and available memory is only 0.000000B.",
                    Kind::PaddleOom,
                    F::Paddle,
                    'O',
                )
            },
            Row {
                requested: Some("1835008 bytes"),
                free: Some("1572864 bytes"),
                ..row(
                    "EnforceNotMet: enforce allocating <= available failed, 1835008 > 1572864",
                    Kind::PaddleEnforce,
                    F::Paddle,
                    'O',
                )
            },
            Row {
                requested: Some("25600000 bytes"),
                ..row(
                    "Out of memory allocating 25,600,000 bytes (allocated so far: 3,635,267,072 bytes).",
                    Kind::CupyOom,
                    F::Cupy,
                    'O',
                )
            },
            Row {
                requested: Some("4585490524328388608 bytes"),
                ..row(
                    "BFCArena::AllocateRawInternal(size_t, bool) Failed to allocate memory for requested buffer of size 4585490524328388608",
                    Kind::OrtBfcArena,
                    F::Onnxruntime,
                    'O',
                )
            },
            row(
                "This error means you ran out of memory on your GPU.",
                Kind::ComfyuiTip,
                F::Comfyui,
                'C',
            ),
            row(
                "Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding.",
                Kind::ComfyuiTiledVae,
                F::Comfyui,
                'N',
            ),
            Row {
                detail: Some(Detail::A1111PeakReserved(b("7.42 GB"))),
                ..row(
                    "A: 7.04 GB, R: 7.42 GB, Sys: 8.0/8 GB (100.0%)",
                    Kind::A1111Summary,
                    F::A1111,
                    'C',
                )
            },
            Row {
                requested: Some("1073741824 bytes"),
                ..row(
                    "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)",
                    Kind::CpuAllocator,
                    F::Pytorch,
                    'N',
                )
            },
            Row {
                detail: Some(Detail::KilledPid(1234)),
                ..row(
                    "[183452.113307] Out of memory: Killed process 1234 (python) total-vm:98234112kB, anon-rss:61203456kB, file-rss:123456kB, shmem-rss:0kB, UID:1000 pgtables:121344kB oom_score_adj:0",
                    Kind::OomKiller,
                    F::Pytorch,
                    'N',
                )
            },
            row(
                "Traceback (most recent call last):\n  File \"prep.py\", line 3, in <module>\n    x = [0] * 10**12\nMemoryError",
                Kind::PythonMemoryError,
                F::Pytorch,
                'N',
            ),
            // openxla error code 0100 (XLA:TPU runtime).
            Row {
                requested: Some("8.00M"),
                free: Some("6.43M"),
                ..row(
                    "ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 8.00M. That was not possible. There are 6.43M free.; (0x0x1_HBM0)",
                    Kind::XlaTpuDeviceBuffer,
                    F::Jax,
                    'O',
                )
            },
            // mlx/backend/metal/eval.cpp check_error.
            row(
                "libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
                Kind::MlxMetal,
                F::Mlx,
                'O',
            ),
            // TensorRT 10's execution context.
            Row {
                requested: Some("20132809216"),
                ..row(
                    "[E] [executionContext.cpp::initializeExecutionContext::625] Error Code 2: OutOfMemory (Requested size was 20132809216 bytes.)",
                    Kind::TensorrtOom,
                    F::Tensorrt,
                    'O',
                )
            },
            // CTranslate2's CUDA_CHECK (src/cuda/utils.h).
            row(
                "RuntimeError: CUDA failed with error out of memory",
                Kind::Ctranslate2Oom,
                F::Ctranslate2,
                'O',
            ),
            // torch_memory_saver's resume (csrc/core.cpp).
            row(
                "[torch_memory_saver.cpp] cudaError error: 2 (out of memory) file=csrc/core.cpp func=resume line=182",
                Kind::TorchMemorySaver,
                F::Pytorch,
                'O',
            ),
            // librmm cuda_memory_resource.hpp, raised as MemoryError.
            Row {
                requested: Some("33295450768"),
                ..row(
                    "MemoryError: std::bad_alloc: out_of_memory: CUDA error (failed to allocate 33295450768 bytes) at: /x/librmm/include/rmm/mr/device/cuda_memory_resource.hpp:62: cudaErrorMemoryAllocation out of memory",
                    Kind::RmmOom,
                    F::Rapids,
                    'O',
                )
            },
            // SGLang's model_runner (sgl-project/sglang#4330).
            row(
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
                Kind::SglangKvPool,
                F::Sglang,
                'O',
            ),
            // onnxruntime/core/providers/cuda/cuda_call.cc CudaCall.
            Row {
                device: Some(0),
                ..row(
                    "[ONNXRuntimeError] : 1 : FAIL : cuda_call.cc:121 onnxruntime::CudaCall CUDA failure 2: out of memory ; GPU=0 ; hostname=host ; file=cuda_stream_handle.cc ; line=175 ; expr=cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);",
                    Kind::OrtCudaCall,
                    F::Onnxruntime,
                    'O',
                )
            },
        ];
        let mut seen = [false; ALL.len()];
        for r in &rows {
            let sigs = signals(r.text);
            let Some(s) = sigs.iter().find(|s| s.kind == r.kind) else {
                panic!(
                    "{:?} not found in {:?}: got {:?}",
                    r.kind,
                    r.text,
                    sigs.iter().map(|s| s.kind).collect::<Vec<_>>()
                )
            };
            if let Some(x) = seen.get_mut(index(r.kind)) {
                *x = true;
            }
            let name = format!("{:?} in {:?}", r.kind, r.text);
            assert_eq!(s.framework, r.fw, "{name}");
            let status = match (s.context_only, s.status) {
                (true, _) => 'C',
                (false, Status::Oom) => 'O',
                (false, Status::NotOom(_)) => 'N',
                (false, Status::Undetermined(_)) => 'U',
            };
            assert_eq!(status, r.status, "{name}");
            let f = &s.fields;
            assert_eq!(f.requested, r.requested.map(b), "{name}: requested");
            assert_eq!(f.total, r.total.map(b), "{name}: total");
            assert_eq!(f.free, r.free.map(b), "{name}: free");
            assert_eq!(f.device, r.device, "{name}: device");
            if let Some(d) = &r.detail {
                assert!(
                    f.details.contains(d),
                    "{name}: {d:?} not in {:?}",
                    f.details
                );
            }
        }
        for (k, seen) in ALL.iter().zip(seen) {
            assert!(seen, "no row for {k:?}");
        }
    }

    /// `Tried to allocate …` is a message of its own only without its
    /// headline on its line or the two before; with it, the full message
    /// keeps its whole span (its hint, its version).
    #[test]
    fn the_headless_shape_defers_to_the_full_message() {
        for text in [
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; 9.10 GiB already allocated; 18.06 MiB free; 9.30 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
            "RuntimeError: CUDA out of memory.\nTried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; 9.10 GiB already allocated; 18.06 MiB free; 9.30 GiB reserved in total by PyTorch)",
        ] {
            let sigs = signals(text);
            let kinds: Vec<Kind> = sigs.iter().map(|s| s.kind).collect();
            assert_eq!(kinds, vec![Kind::PytorchAllocator], "{text}");
            let s = sigs.first().expect("one");
            assert_eq!(s.fields.total, Some(b("23.65 GiB")), "{text}");
        }
    }

    /// A traceback that ends at the frame's `raise` line (the exception
    /// line cut from the paste) states the error; with the exception line
    /// as well there is still one signal, from the exception line.
    #[test]
    fn a_raise_line_in_a_traceback_frame_is_the_error() {
        let frame = "  File \"/x/vllm/v1/core/kv_cache_utils.py\", line 699, in check_enough_kv_cache_memory\n    raise ValueError(\"No available memory for the cache blocks. \"\n";
        let sigs = signals(frame);
        let kinds: Vec<Kind> = sigs.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, vec![Kind::VllmNoBlocks]);
        let full = format!(
            "{frame}ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n"
        );
        let sigs = signals(&full);
        assert_eq!(sigs.len(), 1);
        assert_eq!(sigs.first().map(|s| s.line_idx), Some(2));
    }

    /// Prose that mentions an error is not the error; code quoting it is not either.
    #[test]
    fn prose_and_code_are_not_messages() {
        for text in [
            "To avoid CUDA out of memory errors, lower the batch size.",
            "    raise ValueError(\"No available memory for the cache blocks\")",
            "if \"CUDA out of memory\" in str(e):",
        ] {
            let sigs = signals(text);
            assert!(
                sigs.iter().all(|s| s.status != Status::Oom),
                "{text}: {:?}",
                sigs.iter().map(|s| s.kind).collect::<Vec<_>>()
            );
        }
    }
}
