//! The figures, per device, computed as PyTorch's tools compute them
//! (`docs/reference/memory-snapshots.md` §2.3–2.5):
//!
//! - **reserved** = Σ `total_size` of the device's segments; **allocated** = Σ
//!   `size` of `active_allocated` blocks; **requested** = Σ `requested_size` of
//!   those blocks (`_memory_viz.py` `segsum`: "reserved", "allocated");
//! - the **trace replay** of MemoryViz.js's Active Memory Timeline: an `alloc`
//!   adds its size, a `free_completed` removes it; frees of addresses never
//!   allocated in the trace, and blocks alive at the end that no `alloc` created,
//!   are the **baseline** ("initially allocated", alive before the trace starts).
//!   The running total starts at the baseline; **peak** is its maximum and
//!   **peak_event** the 0-based index of the first event that reaches it (−1 when
//!   no event rises above the baseline, e.g. without a trace); **end** is the
//!   total after the last event. Sizes in alloc/free events are requested bytes,
//!   so on a consistent file the end equals **requested** (§2.2);
//! - what is alive at the peak (and at each `oom` event), grouped by the first
//!   frame in user code ([`site_label`]);
//! - fragmentation per segment, leak candidates (see `leaks` below).
//!
//! Sums are done in `u128` and saturate at `u64::MAX`; a file that breaks the
//! invariants real files keep (blocks tiling their segment, `allocated_size`,
//! replay end = requested) gets a warning, never an error.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt};

use serde::Serialize;

use crate::Error;
use crate::load::{Action, BlockState, Event, Frame, Segment, Snapshot};
use crate::pairs::Pairs;

/// What to report.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only this device.
    pub device: Option<i64>,
    /// How many sites (and segments) to list.
    pub top: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            device: None,
            top: 10,
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// One entry per device.
    pub devices: Vec<DeviceReport>,
}

/// Figures for one device.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceReport {
    /// Device index.
    pub device: i64,
    /// Σ segment sizes.
    pub reserved_bytes: u64,
    /// Σ sizes of `active_allocated` blocks.
    pub allocated_bytes: u64,
    /// Σ requested sizes of `active_allocated` blocks.
    pub requested_bytes: u64,
    /// Number of segments.
    pub segments: u64,
    /// Number of blocks (all states).
    pub blocks: u64,
    /// Number of trace events.
    pub events: u64,
    /// Bytes alive before the trace starts.
    pub baseline_bytes: u64,
    /// Highest running total of the replay.
    pub peak_bytes: u64,
    /// Index of the first event reaching the peak; −1 when none rises above the baseline.
    pub peak_event: i64,
    /// Running total after the last event.
    pub end_bytes: u64,
    /// Reserved bytes before the first event: `reserved_bytes` minus what the
    /// trace's segment events added (see [`ReservedReplay`]).
    pub reserved_baseline_bytes: u64,
    /// Highest reserved total over the trace (`reserved_bytes` without one).
    pub reserved_peak_bytes: u64,
    /// First event reaching `reserved_peak_bytes`; −1 when no event rises
    /// above the reserved baseline.
    pub reserved_peak_event: i64,
    /// `segment_alloc`, `segment_free`, `segment_map` and `segment_unmap`
    /// events in the trace.
    pub segment_events: u64,
    /// Largest groups of allocations alive at the peak.
    pub top_sites: Vec<Site>,
    /// Free space and waste inside segments.
    pub fragmentation: Fragmentation,
    /// Allocations never freed that repeat each iteration from one site.
    pub leaks: Vec<Leak>,
    /// `oom` events in the trace.
    pub ooms: Vec<Oom>,
    /// `record_function` ranges from `external_annotations`, placed on the event axis.
    pub annotations: Vec<Span>,
    /// Inconsistencies in the file (the figures are still computed).
    pub warnings: Vec<String>,
    /// Memory over time per site, for the HTML report.
    #[serde(skip)]
    pub timeline: Timeline,
    /// Every segment's blocks, for the HTML segment map.
    #[serde(skip)]
    pub segment_map: Vec<SegmentView>,
}

/// Allocations alive at one moment that share a site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Site {
    /// `file:line function` of the first frame in user code.
    pub frame: String,
    /// Bytes (requested).
    pub bytes: u64,
    /// Allocations.
    pub count: u64,
}

/// Fragmentation summary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Fragmentation {
    /// Σ inactive blocks: free space inside segments.
    pub free_bytes: u64,
    /// Largest inactive block.
    pub largest_free_block_bytes: u64,
    /// Σ (size − requested_size) of active blocks: rounding waste.
    pub rounding_waste_bytes: u64,
    /// Σ blocks freed but waiting on a stream (`active_pending_free`).
    pub pending_free_bytes: u64,
    /// Whether this snapshot already uses expandable segments.
    pub expandable_segments: bool,
    /// What `expandable_segments:True` would recover that the allocator
    /// cannot: free bytes inside **partly used** segments, in whole pages
    /// (20 MiB large pool, 2 MiB small pool) aligned within their segment,
    /// as `ExpandableSegment::unmap` releases them; wholly free segments are
    /// not counted (the allocator frees those itself before an OOM). 0 when
    /// expandable segments are already on.
    pub expandable_recoverable_bytes: u64,
    /// Segments with the most free space (up to --top).
    pub segments: Vec<SegmentFrag>,
}

/// One segment's fragmentation.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentFrag {
    /// Base address.
    pub address: u64,
    /// Segment size.
    pub total_bytes: u64,
    /// Σ active blocks.
    pub allocated_bytes: u64,
    /// Σ inactive blocks.
    pub free_bytes: u64,
    /// Largest inactive block.
    pub largest_free_bytes: u64,
    /// Rounding waste of active blocks.
    pub waste_bytes: u64,
    /// Number of blocks.
    pub blocks: u64,
    /// `large`, `small` or `unknown`.
    pub pool: &'static str,
    /// `is_expandable`.
    pub expandable: bool,
}

/// A leak candidate.
#[derive(Debug, Clone, Serialize)]
pub struct Leak {
    /// The site.
    pub frame: String,
    /// Bytes never freed per iteration (total / iterations).
    pub bytes_per_iteration: u64,
    /// Iterations in which the site left allocations behind.
    pub iterations: u64,
    /// Bytes never freed from this site.
    pub bytes: u64,
    /// Allocations never freed from this site.
    pub count: u64,
    /// How iterations were told apart.
    pub iterations_from: String,
}

/// An `oom` event.
#[derive(Debug, Clone, Serialize)]
pub struct Oom {
    /// Event index.
    pub event: u64,
    /// Bytes the failed allocation asked for.
    pub requested_bytes: u64,
    /// `device_free` at that moment.
    pub device_free_bytes: u64,
    /// Replay total at that moment.
    pub alive_bytes: u64,
    /// What was alive, by site.
    pub top_sites: Vec<Site>,
}

/// An annotated range on the event axis.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    /// Range name.
    pub name: String,
    /// First event at or after its START.
    pub start_event: i64,
    /// Last event at or before its END (−1 if none).
    pub end_event: i64,
}

/// Memory over time by site (sampled).
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Series names: the top sites, then "other".
    pub series: Vec<String>,
    /// (event index, bytes per series); event −1 is before the trace.
    pub points: Vec<(i64, Vec<u64>)>,
    /// Reserved bytes at each point.
    pub reserved: Vec<u64>,
}

/// One segment's blocks for the map.
#[derive(Debug, Clone)]
pub struct SegmentView {
    /// Base address.
    pub address: u64,
    /// Segment size.
    pub total: u64,
    /// (size, requested, state) in address order.
    pub blocks: Vec<(u64, u64, BlockState)>,
}

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// The site of allocations whose snapshot recorded no stack.
pub const NO_STACK: &str = "<no stack>";
/// The site of allocations whose stack has no Python frame.
pub const CPP_ONLY: &str = "<C++ only>";

/// Is this the file of a Python frame (not C++)?
fn is_python(f: &str) -> bool {
    f.ends_with(".py") || (f.starts_with('<') && f.ends_with('>'))
}

/// Library code: torch, transformers, anything installed, the standard library,
/// frozen modules and FX-generated code.
fn is_library(f: &str) -> bool {
    const MARKERS: [&str; 7] = [
        "/site-packages/",
        "/dist-packages/",
        "/torch/",
        "/transformers/",
        "/lib/python3",
        "/lib64/python3",
        "/lib/python2",
    ];
    MARKERS.iter().any(|m| f.contains(m))
        || f.starts_with("<frozen")
        || f.starts_with("<eval_with_key")
}

fn frame_label(f: &Frame) -> String {
    let line = match f.line {
        Some(l) if l != u64::MAX => l.to_string(),
        _ => "?".to_string(),
    };
    format!("{}:{line} {}", f.filename, f.name)
}

/// The site of a stack: the first (innermost) frame in user code; else the
/// innermost Python frame; else `<C++ only>`; `<no stack>` when none was recorded.
pub fn site_label(snap: &Snapshot, stack: Option<u32>) -> String {
    let Some(frames) = stack.and_then(|s| snap.stacks.get(s as usize)) else {
        return NO_STACK.to_string();
    };
    let frames: Vec<&Frame> = frames
        .iter()
        .filter_map(|&f| snap.frames.get(f as usize))
        .collect();
    let py = || frames.iter().filter(|f| is_python(&f.filename));
    if let Some(f) = py().find(|f| !is_library(&f.filename)) {
        return frame_label(f);
    }
    match py().next() {
        Some(f) => frame_label(f),
        None if frames.is_empty() => NO_STACK.to_string(),
        None => CPP_ONLY.to_string(),
    }
}

/// Site ids per stack, computed once for every stack before the replays (which
/// look a site up per event, on several threads). Stack ids are dense, so the
/// table is a vector.
struct Sites {
    /// Site id per stack id; the last slot is for events without a stack.
    by_stack: Vec<usize>,
    labels: Vec<String>,
    index: HashMap<String, usize>,
}

impl Sites {
    fn new(snap: &Snapshot) -> Self {
        let n = snap.stacks.len();
        let mut sites = Sites {
            by_stack: Vec::with_capacity(n.saturating_add(1)),
            labels: Vec::new(),
            index: HashMap::new(),
        };
        for stack in (0..n)
            .map(|i| u32::try_from(i).ok())
            .chain(std::iter::once(None))
        {
            let label = site_label(snap, stack);
            let next = sites.labels.len();
            let id = *sites.index.entry(label.clone()).or_insert(next);
            if id == next {
                sites.labels.push(label);
            }
            sites.by_stack.push(id);
        }
        sites
    }

    #[inline]
    fn id(&self, stack: Option<u32>) -> usize {
        let none = self.by_stack.len().saturating_sub(1);
        let slot = stack
            .and_then(|s| usize::try_from(s).ok())
            .filter(|&s| s < none)
            .unwrap_or(none);
        self.by_stack.get(slot).copied().unwrap_or(0)
    }

    fn label(&self, id: usize) -> String {
        self.labels.get(id).cloned().unwrap_or_default()
    }
}

/// An allocation alive before the trace starts.
struct Initial {
    size: u64,
    stack: Option<u32>,
    /// Index of the unmatched `free_completed` that ends it; None = alive at the end.
    freed_at: Option<usize>,
}

/// The replay of one device's trace.
struct Replay<'a> {
    baseline: u128,
    initial: Vec<Initial>,
    peak: u128,
    peak_event: i64,
    end: u128,
    went_negative: bool,
    /// Which free ends which allocation (the loader's, or computed here).
    pairs: Cow<'a, Pairs>,
}

impl Replay<'_> {
    /// The partner of event `i` (see [`Pairs`]).
    fn partner(&self, i: usize) -> Option<usize> {
        self.pairs.partner(i)
    }
}

fn replay<'a>(events: &[Event], segs: &[&Segment], pairs: Option<&'a Pairs>) -> Replay<'a> {
    let pairs = match pairs {
        Some(p) if p.pair.len() == events.len() => Cow::Borrowed(p),
        _ => Cow::Owned(Pairs::of(events)),
    };
    let mut initial: Vec<Initial> = pairs
        .unmatched_frees
        .iter()
        .filter_map(|&i| {
            events.get(i).map(|e| Initial {
                size: e.size,
                stack: e.stack(),
                freed_at: Some(i),
            })
        })
        .collect();
    let alive = &pairs.alive;
    for s in segs {
        for b in &s.blocks {
            if b.state == BlockState::Allocated && !alive.contains_key(&b.address) {
                initial.push(Initial {
                    size: b.requested,
                    stack: b.stack,
                    freed_at: None,
                });
            }
        }
    }
    let baseline: u128 = initial.iter().map(|x| u128::from(x.size)).sum();
    let mut cur = i128::try_from(baseline).unwrap_or(i128::MAX);
    let mut peak = cur;
    let mut peak_event = -1i64;
    let mut went_negative = false;
    for (i, e) in events.iter().enumerate() {
        match e.action {
            Action::Alloc => cur = cur.saturating_add(i128::from(e.size)),
            Action::FreeCompleted => cur = cur.saturating_sub(i128::from(e.size)),
            _ => continue,
        }
        if cur < 0 {
            went_negative = true;
            cur = 0;
        }
        if cur > peak {
            peak = cur;
            peak_event = i64::try_from(i).unwrap_or(i64::MAX);
        }
    }
    let to_u = |v: i128| u128::try_from(v).unwrap_or(0);
    Replay {
        baseline,
        initial,
        peak: to_u(peak),
        peak_event,
        end: to_u(cur),
        went_negative,
        pairs,
    }
}

/// Allocations alive just after event `at` (−1: before the first event), as
/// (stack, requested size).
fn alive_at(events: &[Event], rp: &Replay, at: i64) -> Vec<(Option<u32>, u64)> {
    let upto = usize::try_from(at.saturating_add(1)).unwrap_or(0);
    // Allocated by `at` and not ended by then.
    let mut out: Vec<(Option<u32>, u64)> = events
        .iter()
        .enumerate()
        .take(upto)
        .filter(|(i, e)| e.action == Action::Alloc && rp.partner(*i).is_none_or(|p| p >= upto))
        .map(|(_, e)| (e.stack(), e.size))
        .collect();
    for x in &rp.initial {
        let still = match x.freed_at {
            None => true,
            Some(f) => i64::try_from(f).unwrap_or(i64::MAX) > at,
        };
        if still {
            out.push((x.stack, x.size));
        }
    }
    out
}

/// Groups allocations by site: all groups, largest first (ties by label).
fn group(sites: &Sites, allocs: &[(Option<u32>, u64)]) -> Vec<Site> {
    let mut by: HashMap<usize, (u128, u64)> = HashMap::new();
    for &(stack, size) in allocs {
        let e = by.entry(sites.id(stack)).or_default();
        e.0 = e.0.saturating_add(u128::from(size));
        e.1 = e.1.saturating_add(1);
    }
    let mut v: Vec<Site> = by
        .into_iter()
        .map(|(id, (b, c))| Site {
            frame: sites.label(id),
            bytes: sat(b),
            count: c,
        })
        .collect();
    v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.frame.cmp(&b.frame)));
    v
}

/// Page sizes in which expandable segments map memory: 20 MiB in the large
/// pool, 2 MiB in the small pool (CUDACachingAllocator.cpp,
/// `get_expandable_segment`: `segment_size = pool->is_small ? kSmallBuffer :
/// kLargeBuffer`; every `segment_map` in `h100-oom-expandable.pickle` is a
/// multiple of one of them).
const LARGE_PAGE: u64 = 20 << 20;
const SMALL_PAGE: u64 = 2 << 20;

/// The bytes of a free block at `offset` (from its segment's base) that an
/// expandable segment could unmap: the whole `page`-sized pages inside it,
/// aligned to the segment's base — CUDACachingAllocator.cpp's
/// `ExpandableSegment::unmap` ("unmaps all the completely empty segment_size_
/// segments between [begin, begin + size)": `segmentRight(ptr)` to
/// `segmentLeft(ptr + size)`).
///
/// Only partly used segments count. Before raising an OOM the allocator
/// already returns every *wholly* free segment to the driver
/// (`release_cached_blocks` → `release_block`, cudaFree), with or without
/// expandable segments; what it cannot return is free space between live
/// blocks of a fixed segment, which an expandable segment unmaps page by page
/// and maps again wherever a request needs it.
fn recoverable_pages(offset: u64, size: u64, page: u64) -> u64 {
    let Some(first) = offset.div_ceil(page).checked_mul(page) else {
        return 0;
    };
    let last = offset
        .saturating_add(size)
        .checked_div(page)
        .unwrap_or(0)
        .saturating_mul(page);
    last.saturating_sub(first)
}

fn fragmentation(
    segs: &[&Segment],
    expandable_on: bool,
    top: usize,
) -> (Fragmentation, Vec<String>) {
    let mut f = Fragmentation {
        expandable_segments: expandable_on,
        ..Fragmentation::default()
    };
    let (mut free, mut waste, mut pending, mut recover) = (0u128, 0u128, 0u128, 0u128);
    let mut rows = Vec::new();
    let mut untiled = Vec::new();
    let mut alloc_mismatch = Vec::new();
    for s in segs {
        let partly_used = s.blocks.iter().any(|b| b.state != BlockState::Inactive);
        let (mut sf, mut sw, mut sa, mut largest, mut covered) = (0u128, 0u128, 0u128, 0u64, 0u128);
        let mut next = s.address;
        let mut contiguous = true;
        for b in &s.blocks {
            covered = covered.saturating_add(u128::from(b.size));
            contiguous &= b.address == next;
            next = b.address.saturating_add(b.size);
            match b.state {
                BlockState::Inactive => {
                    sf = sf.saturating_add(u128::from(b.size));
                    largest = largest.max(b.size);
                    if !expandable_on && !s.expandable && partly_used {
                        let page = if s.large == Some(false) {
                            SMALL_PAGE
                        } else {
                            LARGE_PAGE
                        };
                        if let Some(offset) = b.address.checked_sub(s.address) {
                            let whole = recoverable_pages(offset, b.size, page);
                            recover = recover.saturating_add(u128::from(whole));
                        }
                    }
                }
                BlockState::Allocated => {
                    sa = sa.saturating_add(u128::from(b.size));
                    sw = sw.saturating_add(u128::from(b.size.saturating_sub(b.requested)));
                }
                BlockState::PendingFree => {
                    pending = pending.saturating_add(u128::from(b.size));
                }
                BlockState::Other => {}
            }
        }
        if covered != u128::from(s.total_size) || !contiguous {
            untiled.push(s.address);
        }
        if s.allocated_size.is_some_and(|a| u128::from(a) != sa) {
            alloc_mismatch.push(s.address);
        }
        free = free.saturating_add(sf);
        waste = waste.saturating_add(sw);
        f.largest_free_block_bytes = f.largest_free_block_bytes.max(largest);
        rows.push(SegmentFrag {
            address: s.address,
            total_bytes: s.total_size,
            allocated_bytes: sat(sa),
            free_bytes: sat(sf),
            largest_free_bytes: largest,
            waste_bytes: sat(sw),
            blocks: u64::try_from(s.blocks.len()).unwrap_or(u64::MAX),
            pool: match s.large {
                Some(true) => "large",
                Some(false) => "small",
                None => "unknown",
            },
            expandable: s.expandable,
        });
    }
    rows.sort_by(|a, b| {
        b.free_bytes
            .cmp(&a.free_bytes)
            .then(b.total_bytes.cmp(&a.total_bytes))
            .then(a.address.cmp(&b.address))
    });
    rows.truncate(top);
    f.free_bytes = sat(free);
    f.rounding_waste_bytes = sat(waste);
    f.pending_free_bytes = sat(pending);
    f.expandable_recoverable_bytes = sat(recover);
    f.segments = rows;
    let mut warnings = Vec::new();
    if let Some(first) = untiled.first() {
        warnings.push(format!(
            "{} segment(s) whose blocks do not tile the segment (sizes do not add up to total_size or addresses are not contiguous; first at 0x{first:x}): free space is computed from the blocks",
            untiled.len()
        ));
    }
    if let Some(first) = alloc_mismatch.first() {
        warnings.push(format!(
            "{} segment(s) whose allocated_size differs from the sum of their active_allocated blocks (first at 0x{first:x})",
            alloc_mismatch.len()
        ));
    }
    (f, warnings)
}

/// Replaces each run of digits with `#`: `forward_12` → `forward_#`.
pub fn family(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// Annotation ranges on the event axis and the START events of the iteration
/// family: the annotation family (name with digits as `#`) with the most
/// STARTs, at least 3 (ties: alphabetical).
fn annotations(
    snap: &Snapshot,
    device: i64,
    events: &[Event],
) -> (Vec<Span>, Option<(String, Vec<usize>)>) {
    // Times map to event indices by binary search, so they must all be there
    // and sorted (they are in real files).
    let sorted = events.first().is_some_and(|e| e.time().is_some())
        && events.windows(2).all(|w| match w {
            [a, b] => b.time().is_some() && a.time_us <= b.time_us,
            _ => true,
        });
    if !sorted {
        return (Vec::new(), None);
    }
    let first_at = |t: i64| events.partition_point(|e| e.time_us < t);
    let mut spans = Vec::new();
    let mut open: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut starts: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for a in snap
        .annotations
        .iter()
        .filter(|a| a.device.is_none_or(|d| d == device))
    {
        let Some(t) = a.time_us else { continue };
        if a.start {
            let e = first_at(t);
            open.entry(&a.name).or_default().push(e);
            starts.entry(family(&a.name)).or_default().push(e);
        } else if let Some(s) = open.get_mut(&*a.name).and_then(Vec::pop) {
            let end = events.partition_point(|e| e.time_us <= t);
            spans.push(Span {
                name: a.name.to_string(),
                start_event: i64::try_from(s).unwrap_or(i64::MAX),
                end_event: i64::try_from(end).unwrap_or(i64::MAX).saturating_sub(1),
            });
        }
    }
    spans.sort_by_key(|s| (s.start_event, s.end_event));
    let best = starts
        .into_iter()
        .filter(|(_, v)| v.len() >= 3)
        .max_by(|a, b| a.1.len().cmp(&b.1.len()).then_with(|| b.0.cmp(&a.0)));
    (spans, best)
}

/// Minimum number of iterations a site must leave allocations behind in.
pub const LEAK_MIN_ITERATIONS: u64 = 3;

/// Leak candidates: allocations never freed (alive at the end, created by an
/// `alloc` in the trace) grouped by site, where the site left some behind in at
/// least [`LEAK_MIN_ITERATIONS`] different iterations. The site must be a Python
/// line: allocations with only C++ frames (the autograd engine's thread making
/// gradients) or none are not attributable to code the user can change.
///
/// An **iteration** is, in this order of preference:
/// 1. when the trace has timestamps and a `record_function` family repeats at
///    least 3 times (`forward_0`, `forward_1`, … or `Optimizer.step#AdamW.step`
///    ×10), the stretch between two STARTs of the most frequent family;
/// 2. else the trace's own **period** ([`period_marker`]): a training loop runs
///    the same lines once per step, so the Python sites that allocate a
///    regular number of times across the whole trace agree on the number of
///    steps; each allocation of the first such site starts an iteration. It
///    reads only the order of events, never their sizes, so a leak of any
///    length (one that grows the range a hundredfold) leaves the
///    iterations as they are;
/// 3. else the allocations memory curve of the replay: an iteration ends when
///    the running total has risen by at least a threshold above its last low
///    and then fallen back by at least half of that rise — a forward pass
///    followed by backward and the optimizer step. The threshold is a tenth of
///    the trace's range or half of its deepest fall from a high, whichever is
///    smaller (≥ 1 MiB): memory that is never freed raises the range but not
///    the falls. Loading weights, creating optimizer state or a forward pass
///    cut short by an OOM only rise, so they stay in one iteration.
///
/// Optimizer state created once, or the last step's tensors, then fall in one
/// iteration; a list that gains a tensor each step is in every iteration.
fn leaks(
    sites: &Sites,
    events: &[Event],
    rp: &Replay,
    family: Option<&(String, Vec<usize>)>,
) -> Vec<Leak> {
    let survivor_idx: BTreeSet<usize> = rp.pairs.alive.values().map(|&(_, i)| i).collect();
    let mut iter_of = vec![0u32; events.len()];
    let starts_to_iterations = |iter_of: &mut [u32], starts: &[usize]| {
        for (i, slot) in iter_of.iter_mut().enumerate() {
            *slot = u32::try_from(starts.partition_point(|&s| s <= i)).unwrap_or(u32::MAX);
        }
    };
    let marker = if family.is_none() {
        period_marker(sites, events)
    } else {
        None
    };
    let from = match (family, marker) {
        (Some((name, starts)), _) => {
            starts_to_iterations(&mut iter_of, starts);
            format!("record_function {name}")
        }
        (None, Some((site, starts))) => {
            starts_to_iterations(&mut iter_of, &starts);
            format!(
                "the trace's period: {} steps, each starting at an allocation by {}",
                starts.len(),
                sites.label(site)
            )
        }
        (None, None) => {
            // A step: the running total rises by at least the threshold
            // above the last low, then falls back by at least half of that
            // rise.
            let mut cur = i128::try_from(rp.baseline).unwrap_or(i128::MAX);
            let (mut top, mut deepest) = (cur, 0i128);
            for e in events {
                match e.action {
                    Action::Alloc => cur = cur.saturating_add(i128::from(e.size)),
                    Action::FreeCompleted => cur = cur.saturating_sub(i128::from(e.size)).max(0),
                    _ => {}
                }
                top = top.max(cur);
                deepest = deepest.max(top.saturating_sub(cur));
            }
            let min_swing = i128::try_from(rp.peak.saturating_sub(rp.baseline) / 10)
                .unwrap_or(i128::MAX)
                .min(deepest / 2)
                .max(1 << 20);
            let mut cur = i128::try_from(rp.baseline).unwrap_or(i128::MAX);
            let (mut low, mut high, mut it) = (cur, cur, 0u32);
            for (i, e) in events.iter().enumerate() {
                match e.action {
                    Action::Alloc => cur = cur.saturating_add(i128::from(e.size)),
                    Action::FreeCompleted => cur = cur.saturating_sub(i128::from(e.size)).max(0),
                    _ => {}
                }
                high = high.max(cur);
                let rise = high.saturating_sub(low);
                if rise >= min_swing && cur <= low.saturating_add(rise / 2) {
                    it = it.saturating_add(1);
                    (low, high) = (cur, cur);
                }
                low = low.min(cur);
                if let Some(slot) = iter_of.get_mut(i) {
                    *slot = it;
                }
            }
            "memory swings".to_string()
        }
    };
    let mut by: HashMap<usize, (u128, u64, BTreeSet<u32>)> = HashMap::new();
    for &i in &survivor_idx {
        let Some(e) = events.get(i) else { continue };
        let entry = by.entry(sites.id(e.stack())).or_default();
        entry.0 = entry.0.saturating_add(u128::from(e.size));
        entry.1 = entry.1.saturating_add(1);
        entry.2.insert(iter_of.get(i).copied().unwrap_or(0));
    }
    let mut out: Vec<Leak> = by
        .into_iter()
        .filter(|(id, (_, _, its))| {
            let label = sites.label(*id);
            u64::try_from(its.len()).unwrap_or(0) >= LEAK_MIN_ITERATIONS
                && label != NO_STACK
                && label != CPP_ONLY
        })
        .map(|(id, (bytes, count, its))| {
            let n = u64::try_from(its.len()).unwrap_or(1);
            Leak {
                frame: sites.label(id),
                bytes_per_iteration: sat(bytes.checked_div(u128::from(n)).unwrap_or(0)),
                iterations: n,
                bytes: sat(bytes),
                count,
                iterations_from: from.clone(),
            }
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.frame.cmp(&b.frame)));
    out
}

/// The trace's period: the Python site whose allocations mark the start of
/// each step, and the event indices of those allocations.
///
/// A site is a **candidate** when it allocates at least
/// [`LEAK_MIN_ITERATIONS`] times, its allocations span at least half of the
/// trace, and they are regular: the gaps between consecutive ones vary little
/// (standard deviation at most half their mean). Lines of a training loop are
/// such sites, each allocating once per step, or k times for a line inside a
/// loop over k layers; a line run only while loading (all its allocations
/// close together) spans too little. The number of steps is the allocation
/// count held by the most candidates (ties: the smaller count), and the marker
/// is the candidate with that count whose first allocation comes first.
/// `None` when no site qualifies.
fn period_marker(sites: &Sites, events: &[Event]) -> Option<(usize, Vec<usize>)> {
    #[derive(Default, Clone, Copy)]
    struct Stat {
        count: u64,
        first: usize,
        last: usize,
        gap_sum: f64,
        gap_sq: f64,
    }
    let mut stats: Vec<Stat> = vec![Stat::default(); sites.labels.len()];
    for (i, e) in events.iter().enumerate() {
        if e.action != Action::Alloc {
            continue;
        }
        let Some(st) = stats.get_mut(sites.id(e.stack())) else {
            continue;
        };
        if st.count > 0 {
            let gap = i.saturating_sub(st.last) as f64;
            st.gap_sum += gap;
            st.gap_sq += gap * gap;
        } else {
            st.first = i;
        }
        st.last = i;
        st.count = st.count.saturating_add(1);
    }
    let half = events.len() / 2;
    let candidates: Vec<(usize, Stat)> = stats
        .iter()
        .copied()
        .enumerate()
        .filter(|(id, st)| {
            let label = sites.labels.get(*id).map_or("", String::as_str);
            if st.count < LEAK_MIN_ITERATIONS || label == NO_STACK || label == CPP_ONLY {
                return false;
            }
            let gaps = st.count.saturating_sub(1) as f64;
            let mean = st.gap_sum / gaps;
            let var = (st.gap_sq / gaps - mean * mean).max(0.0);
            st.last.saturating_sub(st.first) >= half && var.sqrt() <= mean / 2.0
        })
        .collect();
    let mut votes: BTreeMap<u64, u64> = BTreeMap::new();
    for (_, st) in &candidates {
        let v = votes.entry(st.count).or_default();
        *v = v.saturating_add(1);
    }
    let steps = votes
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(&c, _)| c)?;
    let (site, _) = candidates
        .iter()
        .filter(|(_, st)| st.count == steps)
        .min_by_key(|(_, st)| st.first)?;
    let starts: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.action == Action::Alloc && sites.id(e.stack()) == *site)
        .map(|(i, _)| i)
        .collect();
    Some((*site, starts))
}

/// Reserved memory over time, replayed from the trace's segment events as
/// MemoryViz.js replays them for its segment timeline (`torch/utils/viz/MemoryViz.js`,
/// `segment_alloc`/`segment_free` add and remove a cudaMalloc'ed segment,
/// `segment_map`/`segment_unmap` grow and shrink an expandable one; sizes in
/// bytes). The trace may start after the first segments were made (the hook
/// keeps the last N events), so the total is replayed backwards from the end
/// state: before the first event, reserved = Σ segment sizes at the dump − Σ
/// alloc/map sizes + Σ free/unmap sizes in the trace.
#[derive(Debug, Clone, Copy)]
pub struct ReservedReplay {
    /// Before the first event.
    pub baseline: u64,
    /// Highest total.
    pub peak: u64,
    /// First event reaching the peak (−1: before the first event).
    pub peak_event: i64,
    /// Segment events seen.
    pub events: u64,
    /// How far below zero the baseline came out (segment events the end
    /// state does not account for); it was held at 0. 0 on real files.
    pub shortfall: u64,
}

/// How a segment event changes reserved memory (+ adds, − removes).
fn reserved_delta(e: &Event) -> Option<i128> {
    match e.action {
        Action::SegmentAlloc | Action::SegmentMap => Some(i128::from(e.size)),
        Action::SegmentFree | Action::SegmentUnmap => Some(i128::from(e.size).saturating_neg()),
        _ => None,
    }
}

fn reserved_replay(events: &[Event], reserved_end: u128) -> ReservedReplay {
    let (mut net, mut n) = (0i128, 0u64);
    for d in events.iter().filter_map(reserved_delta) {
        net = net.saturating_add(d);
        n = n.saturating_add(1);
    }
    let start = i128::try_from(reserved_end)
        .unwrap_or(i128::MAX)
        .saturating_sub(net);
    let mut cur = start.max(0);
    let (mut peak, mut peak_event) = (cur, -1i64);
    for (i, e) in events.iter().enumerate() {
        if let Some(d) = reserved_delta(e) {
            cur = cur.saturating_add(d).max(0);
            if cur > peak {
                peak = cur;
                peak_event = i64::try_from(i).unwrap_or(i64::MAX);
            }
        }
    }
    let narrow = |v: i128| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
    ReservedReplay {
        baseline: narrow(start),
        peak: narrow(peak),
        peak_event,
        events: n,
        shortfall: narrow(start.saturating_neg()),
    }
}

/// Memory over time stacked by the top sites (plus "other"), sampled at about
/// 600 points, with reserved memory at each; the peak and the reserved peak
/// are always among them.
fn timeline(
    sites: &Sites,
    events: &[Event],
    rp: &Replay,
    top: &[Site],
    rr: &ReservedReplay,
) -> Timeline {
    let series: Vec<String> = top
        .iter()
        .map(|s| s.frame.clone())
        .chain(["other".to_string()])
        .collect();
    let other = top.len();
    // Series per site id, and per allocation event the series it was added
    // to (read back when it is freed: a small vector instead of a random
    // access into the whole trace).
    let mut by_site = vec![other; sites.labels.len()];
    for (i, s) in top.iter().enumerate() {
        if let Some(slot) = sites
            .index
            .get(&s.frame)
            .and_then(|&id| by_site.get_mut(id))
        {
            *slot = i;
        }
    }
    let series_of =
        |sites: &Sites, stack: Option<u32>| by_site.get(sites.id(stack)).copied().unwrap_or(other);
    let narrow = |k: usize| u16::try_from(k).unwrap_or(u16::MAX);
    let mut series_at: Vec<u16> = vec![u16::MAX; events.len()];
    let mut cur = vec![0u64; series.len()];
    let mut freed_initial: HashMap<usize, usize> = HashMap::new();
    for x in &rp.initial {
        let k = series_of(sites, x.stack);
        if let Some(c) = cur.get_mut(k) {
            *c = c.saturating_add(x.size);
        }
        if let Some(f) = x.freed_at {
            freed_initial.insert(f, k);
        }
    }
    let mut points = vec![(-1i64, cur.clone())];
    let mut reserved_now = i128::from(rr.baseline);
    let mut reserved = vec![rr.baseline];
    let stride = (events.len() / 600).max(1);
    for (i, e) in events.iter().enumerate() {
        if let Some(d) = reserved_delta(e) {
            reserved_now = reserved_now.saturating_add(d).max(0);
        }
        match e.action {
            Action::Alloc => {
                let k = series_of(sites, e.stack());
                if let Some(slot) = series_at.get_mut(i) {
                    *slot = narrow(k);
                }
                if let Some(c) = cur.get_mut(k) {
                    *c = c.saturating_add(e.size);
                }
            }
            Action::FreeCompleted => {
                let k = match rp.partner(i) {
                    Some(a) => match series_at.get(a) {
                        Some(&k) if k != u16::MAX => Some(usize::from(k)),
                        // More series than u16 holds (never with --top ≤ 65534).
                        _ => events.get(a).map(|a| series_of(sites, a.stack())),
                    },
                    None => freed_initial.get(&i).copied(),
                };
                if let Some(c) = k.and_then(|k| cur.get_mut(k)) {
                    *c = c.saturating_sub(e.size);
                }
            }
            _ => {}
        }
        let idx = i64::try_from(i).unwrap_or(i64::MAX);
        if i.checked_rem(stride) == Some(stride.saturating_sub(1))
            || idx == rp.peak_event
            || idx == rr.peak_event
            || i.saturating_add(1) == events.len()
        {
            points.push((idx, cur.clone()));
            reserved.push(u64::try_from(reserved_now).unwrap_or(u64::MAX));
        }
    }
    Timeline {
        series,
        points,
        reserved,
    }
}

/// Analyses every device (or the one asked for).
pub fn analyze(snap: &Snapshot, opts: &Options) -> Result<Report, Error> {
    let mut devices: BTreeSet<i64> = snap.segments.iter().map(|s| s.device).collect();
    for (i, t) in snap.traces.iter().enumerate() {
        if !t.is_empty() {
            devices.insert(i64::try_from(i).unwrap_or(i64::MAX));
        }
    }
    if let Some(d) = opts.device {
        if !devices.contains(&d) {
            let have: Vec<String> = devices.iter().map(i64::to_string).collect();
            return Err(Error::NoDevice {
                device: d,
                available: if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                },
            });
        }
        devices = BTreeSet::from([d]);
    }
    let sites = Sites::new(snap);
    let reports = devices
        .into_iter()
        .map(|d| device(snap, d, opts, &sites))
        .collect();
    Ok(Report { devices: reports })
}

fn device(snap: &Snapshot, d: i64, opts: &Options, sites: &Sites) -> DeviceReport {
    let segs: Vec<&Segment> = snap.segments.iter().filter(|s| s.device == d).collect();
    let empty = Vec::new();
    let events = usize::try_from(d)
        .ok()
        .and_then(|i| snap.traces.get(i))
        .unwrap_or(&empty);
    let reserved: u128 = segs.iter().map(|s| u128::from(s.total_size)).sum();
    let active = || {
        segs.iter()
            .flat_map(|s| s.blocks.iter())
            .filter(|b| b.state == BlockState::Allocated)
    };
    let allocated: u128 = active().map(|b| u128::from(b.size)).sum();
    let requested: u128 = active().map(|b| u128::from(b.requested)).sum();
    let nblocks: usize = segs.iter().map(|s| s.blocks.len()).sum();
    let rp = replay(
        events,
        &segs,
        usize::try_from(d)
            .ok()
            .and_then(|i| snap.pairs.get(i))
            .and_then(Option::as_ref),
    );
    let mut warnings = Vec::new();
    if !events.is_empty() && rp.end != requested {
        warnings.push(format!(
            "the trace replay ends at {} bytes but the live blocks requested {} bytes (real files agree; this one was edited, synthesized, or its trace lost events)",
            rp.end, requested
        ));
    }
    if rp.went_negative {
        warnings.push("the replay total went below zero (frees larger than the allocations they free); it was held at 0".to_string());
    }
    if rp.pairs.realloc > 0 {
        warnings.push(format!(
            "{} allocation(s) at an address that was already allocated and not freed",
            rp.pairs.realloc
        ));
    }
    let rr = reserved_replay(events, reserved);
    if rr.shortfall > 0 {
        warnings.push(format!(
            "the trace's segment events add {} bytes more than the segments hold at the dump; reserved memory before the first event was held at 0",
            rr.shortfall
        ));
    }
    let expandable_on =
        snap.expandable_setting.unwrap_or(false) || segs.iter().any(|s| s.expandable);
    let (fragmentation, frag_warnings) = fragmentation(&segs, expandable_on, opts.top);
    warnings.extend(frag_warnings);
    let (spans, fam) = annotations(snap, d, events);
    // The leak replay needs nothing from the peak: it runs on the second core
    // while this one finds the sites at the peak and replays the timeline.
    let (leaks, top_sites, timeline) = std::thread::scope(|scope| {
        let leaks = scope.spawn(|| leaks(sites, events, &rp, fam.as_ref()));
        let all_at_peak = group(sites, &alive_at(events, &rp, rp.peak_event));
        let top_sites: Vec<Site> = all_at_peak.into_iter().take(opts.top).collect();
        let timeline = timeline(sites, events, &rp, &top_sites, &rr);
        let leaks = match leaks.join() {
            Ok(l) => l,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        (leaks, top_sites, timeline)
    });
    let ooms = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.action == Action::Oom)
        .take(16)
        .map(|(i, e)| {
            let at = i64::try_from(i).unwrap_or(i64::MAX);
            let alive = alive_at(events, &rp, at);
            let total: u128 = alive.iter().map(|&(_, s)| u128::from(s)).sum();
            let mut top = group(sites, &alive);
            top.truncate(opts.top.min(5));
            Oom {
                event: u64::try_from(i).unwrap_or(u64::MAX),
                requested_bytes: e.size,
                device_free_bytes: e.addr,
                alive_bytes: sat(total),
                top_sites: top,
            }
        })
        .collect();
    let segment_map = segs
        .iter()
        .map(|s| SegmentView {
            address: s.address,
            total: s.total_size,
            blocks: s
                .blocks
                .iter()
                .map(|b| (b.size, b.requested, b.state))
                .collect(),
        })
        .collect();
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    DeviceReport {
        device: d,
        reserved_bytes: sat(reserved),
        allocated_bytes: sat(allocated),
        requested_bytes: sat(requested),
        segments: count(segs.len()),
        blocks: count(nblocks),
        events: count(events.len()),
        baseline_bytes: sat(rp.baseline),
        peak_bytes: sat(rp.peak),
        peak_event: rp.peak_event,
        end_bytes: sat(rp.end),
        reserved_baseline_bytes: rr.baseline,
        reserved_peak_bytes: rr.peak,
        reserved_peak_event: rr.peak_event,
        segment_events: rr.events,
        top_sites,
        fragmentation,
        leaks,
        ooms,
        annotations: spans,
        warnings,
        timeline,
        segment_map,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn recoverable_pages_are_whole_aligned_pages_inside_the_block() {
        const MIB: u64 = 1 << 20;
        let page = 20 * MIB;
        // A 30 MiB hole at offset 10 MiB holds the page [20, 40).
        assert_eq!(super::recoverable_pages(10 * MIB, 30 * MIB, page), 20 * MIB);
        // 39 MiB at offset 1 MiB: only [20, 40) is whole; [0, 20) is not empty.
        assert_eq!(super::recoverable_pages(MIB, 39 * MIB, page), 20 * MIB);
        // Smaller than a page, or straddling a boundary: nothing.
        assert_eq!(super::recoverable_pages(15 * MIB, 10 * MIB, page), 0);
        assert_eq!(super::recoverable_pages(0, 60 * MIB, page), 60 * MIB);
        assert_eq!(super::recoverable_pages(u64::MAX - 5, 10, page), 0);
    }

    use super::*;

    #[test]
    fn families_replace_digit_runs() {
        assert_eq!(family("forward_12"), "forward_#");
        assert_eq!(
            family("Optimizer.step#AdamW.step"),
            "Optimizer.step#AdamW.step"
        );
    }

    #[test]
    fn user_frames_win_over_library_frames() {
        let mk = |f: &str, l: u64, n: &str| Frame {
            filename: f.into(),
            line: Some(l),
            name: n.into(),
        };
        let snap = Snapshot {
            frames: vec![
                mk("??", 0, "c10::alloc"),
                mk(
                    "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py",
                    125,
                    "forward",
                ),
                mk("/home/me/train.py", 40, "step"),
            ],
            stacks: vec![vec![0, 1, 2], vec![0, 1], vec![0], vec![]],
            ..Snapshot::default()
        };
        assert_eq!(site_label(&snap, Some(0)), "/home/me/train.py:40 step");
        assert!(site_label(&snap, Some(1)).ends_with("linear.py:125 forward"));
        assert_eq!(site_label(&snap, Some(2)), "<C++ only>");
        assert_eq!(site_label(&snap, Some(3)), "<no stack>");
        assert_eq!(site_label(&snap, None), "<no stack>");
    }

    fn ev(action: Action, addr: u64, size: u64) -> Event {
        Event::bare(action, addr, size)
    }

    /// Five steps without annotations: each makes a 100 MiB temporary and
    /// frees it; `train.py:10` keeps 1 MiB per step (the leak), `train.py:30`
    /// makes five tensors in the first step only (optimizer state).
    fn steps(leak_every_step: bool) -> Snapshot {
        let mk = |l: u64| Frame {
            filename: "/w/train.py".into(),
            line: Some(l),
            name: "step".into(),
        };
        let mut events = Vec::new();
        let mut add = |a: Action, addr: u64, size: u64, stack: u32| {
            events.push(Event {
                addr,
                size,
                time_us: i64::MIN,
                stack,
                action: a,
            });
        };
        for step in 0..5u64 {
            add(Action::Alloc, 1000 + step, 100 << 20, 1);
            if leak_every_step || step == 0 {
                add(Action::Alloc, 2000 + step, 1 << 20, 0);
            }
            if step == 0 {
                for k in 0..5 {
                    add(Action::Alloc, 3000 + k, 4 << 20, 2);
                }
            }
            add(Action::FreeCompleted, 1000 + step, 100 << 20, 1);
        }
        Snapshot {
            frames: vec![mk(10), mk(20), mk(30)],
            stacks: vec![vec![0], vec![1], vec![2]],
            traces: vec![events],
            ..Snapshot::default()
        }
    }

    #[test]
    fn memory_swings_tell_iterations_apart_without_annotations() {
        let r = analyze(&steps(true), &Options::default()).unwrap();
        let leaks = &r.devices[0].leaks;
        assert_eq!(leaks.len(), 1, "{leaks:?}");
        assert_eq!(leaks[0].frame, "/w/train.py:10 step");
        assert_eq!(leaks[0].iterations, 5);
        assert_eq!(leaks[0].bytes_per_iteration, 1 << 20);
        assert_eq!(leaks[0].iterations_from, "memory swings");
        let r = analyze(&steps(false), &Options::default()).unwrap();
        assert!(r.devices[0].leaks.is_empty(), "{:?}", r.devices[0].leaks);
    }

    #[test]
    fn replay_counts_unmatched_frees_as_baseline() {
        let events = [
            ev(Action::FreeCompleted, 1, 100),
            ev(Action::Alloc, 2, 50),
            ev(Action::Alloc, 3, 70),
            ev(Action::FreeCompleted, 2, 50),
        ];
        let rp = replay(&events, &[], None);
        assert_eq!(rp.baseline, 100);
        assert_eq!(rp.peak, 120);
        assert_eq!(rp.peak_event, 2);
        assert_eq!(rp.end, 70);
    }
}
