//! Human output for `oomkit snapshot` and `oomkit snapshot diff`. Sizes are
//! formatted only through [`oomkit_core::Bytes`]; fixes are
//! [`oomkit_core::remedies`] ids.

use oomkit_core::remedies::RemedyId;
use std::fmt::Write as _;

use oomkit_core::text::escape;
use oomkit_core::{Bytes, remedies};

use crate::analyze::{DeviceReport, Report, Site};
use crate::diff::DeviceDiff;

fn b(v: u64) -> Bytes {
    Bytes(v)
}

fn remedy_line(out: &mut String, id: RemedyId) {
    if let Some(r) = remedies::get(id) {
        let _ = writeln!(out, "    fix: {} [{}]", r.title, r.id);
    }
}

fn sites(out: &mut String, list: &[Site], indent: &str) {
    for s in list {
        let _ = writeln!(
            out,
            "{indent}{:>12}  {:>5}×  {}",
            b(s.bytes).to_string(),
            s.count,
            escape(&s.frame)
        );
    }
}

/// The report as text; `name` names the input.
///
/// Text from the input (frame names, annotation names) and the input's name
/// pass through [`escape`]: control characters reach a terminal as text.
pub fn human(report: &Report, name: &str) -> String {
    let name = &*escape(name);
    let mut out = String::new();
    if report.devices.is_empty() {
        let _ = writeln!(
            out,
            "{name}: no segments and no trace: nothing was recorded"
        );
    }
    for (i, d) in report.devices.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        device(&mut out, d, name);
    }
    out
}

fn device(out: &mut String, d: &DeviceReport, name: &str) {
    let _ = writeln!(out, "{name} · device {}", d.device);
    let _ = writeln!(
        out,
        "  reserved     {}  ({} segments, {} blocks)",
        b(d.reserved_bytes),
        d.segments,
        d.blocks
    );
    let _ = writeln!(
        out,
        "  allocated    {}  (requested {})",
        b(d.allocated_bytes),
        b(d.requested_bytes)
    );
    if d.events == 0 {
        let _ = writeln!(
            out,
            "  trace        none (recorded without _record_memory_history): peak = what is alive now"
        );
    } else {
        let _ = writeln!(
            out,
            "  trace        {} events; {} alive before the first",
            d.events,
            b(d.baseline_bytes)
        );
        let at = if d.peak_event < 0 {
            "before the first event".to_string()
        } else {
            format!("at event {}", d.peak_event)
        };
        let _ = writeln!(out, "  peak         {}  {at}", b(d.peak_bytes));
        let _ = writeln!(out, "  end          {}", b(d.end_bytes));
        if d.segment_events == 0 {
            let _ = writeln!(
                out,
                "  reserved     {} throughout (no segment events in the trace)",
                b(d.reserved_peak_bytes)
            );
        } else {
            let at = if d.reserved_peak_event < 0 {
                "before the first event".to_string()
            } else {
                format!("at event {}", d.reserved_peak_event)
            };
            let _ = writeln!(
                out,
                "  reserved     peak {}  {at} ({} before the first event, {} segment events)",
                b(d.reserved_peak_bytes),
                b(d.reserved_baseline_bytes),
                d.segment_events
            );
        }
    }
    if !d.top_sites.is_empty() {
        let _ = writeln!(
            out,
            "\n  Alive at the peak, by site (first frame in user code):"
        );
        sites(out, &d.top_sites, "  ");
    }
    for o in &d.ooms {
        let _ = writeln!(
            out,
            "\n  Out of memory at event {}: asked for {} with {} free on the device; {} alive",
            o.event,
            b(o.requested_bytes),
            b(o.device_free_bytes),
            b(o.alive_bytes)
        );
        sites(out, &o.top_sites, "  ");
    }
    let f = &d.fragmentation;
    let _ = writeln!(
        out,
        "\n  Fragmentation: {} free inside segments (largest free block {}), {} rounding waste, {} pending free",
        b(f.free_bytes),
        b(f.largest_free_block_bytes),
        b(f.rounding_waste_bytes),
        b(f.pending_free_bytes)
    );
    if f.expandable_segments {
        let _ = writeln!(out, "    expandable segments are already on");
    } else if f.expandable_recoverable_bytes > 0 {
        let _ = writeln!(
            out,
            "    {} of it is whole pages between live blocks that expandable_segments:True would unmap and reuse for any request",
            b(f.expandable_recoverable_bytes)
        );
        remedy_line(out, RemedyId::ExpandableSegments);
    }
    if !d.leaks.is_empty() {
        let _ = writeln!(
            out,
            "\n  Leak candidates (allocated every iteration, never freed):"
        );
        for l in &d.leaks {
            let _ = writeln!(
                out,
                "  {:>12}/iteration × {} iterations  ({} in {} allocations)  {}",
                b(l.bytes_per_iteration).to_string(),
                l.iterations,
                b(l.bytes),
                l.count,
                escape(&l.frame)
            );
        }
        if let Some(l) = d.leaks.first() {
            let _ = writeln!(out, "    iterations from: {}", escape(&l.iterations_from));
        }
        remedy_line(out, RemedyId::ReleaseReferences);
    }
    if !d.annotations.is_empty() {
        let _ = writeln!(out, "\n  Annotated ranges: {}", d.annotations.len());
    }
    for w in &d.warnings {
        let _ = writeln!(out, "  warning: {}", escape(w));
    }
}

/// `diff A B` as text.
pub fn human_diff(diffs: &[DeviceDiff], a: &str, b_name: &str, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A = {}\nB = {}", escape(a), escape(b_name));
    for d in diffs {
        let _ = writeln!(
            out,
            "\ndevice {}: reserved {} → {}, allocated {} → {}",
            d.device,
            b(d.reserved_bytes[0]),
            b(d.reserved_bytes[1]),
            b(d.allocated_bytes[0]),
            b(d.allocated_bytes[1])
        );
        let _ = writeln!(
            out,
            "  {:>12}  {:>25}  {:>13}  site",
            "growth", "bytes A → B", "count A → B"
        );
        for s in d.sites.iter().take(top) {
            let sign = if s.growth_bytes < 0 { "-" } else { "+" };
            let _ = writeln!(
                out,
                "  {:>12}  {:>25}  {:>13}  {}",
                format!("{sign}{}", b(s.growth_bytes.unsigned_abs())),
                format!("{} → {}", b(s.a_bytes), b(s.b_bytes)),
                format!("{} → {}", s.a_count, s.b_count),
                escape(&s.frame)
            );
        }
    }
    out
}
