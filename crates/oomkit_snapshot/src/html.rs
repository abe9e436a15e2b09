//! The `--html` report: one self-contained file (inline CSS and SVG, no script,
//! no network) per snapshot, with, per device, memory over time stacked by
//! allocation site (the top sites and "other", like MemoryViz's Active Memory
//! Timeline, with annotated ranges, the peak and OOMs marked), the segment map
//! (every segment's blocks: allocated, rounding waste, pending free, free), and
//! the tables of sites, leak candidates and warnings.

use std::fmt::Write as _;
use std::io;

use oomkit_core::Bytes;

use crate::analyze::{DeviceReport, Report, family};
use crate::load::BlockState;

const PALETTE: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#86bcb6", "#d4a6c8", "#8cd17d",
];
const OTHER: &str = "#bab0ac";

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

fn color(i: usize, other: usize) -> &'static str {
    if i == other {
        OTHER
    } else {
        PALETTE
            .get(i.checked_rem(PALETTE.len()).unwrap_or(0))
            .copied()
            .unwrap_or(OTHER)
    }
}

#[allow(clippy::cast_precision_loss)]
fn f(v: u64) -> f64 {
    v as f64
}

/// Writes the report as one HTML page.
pub fn write(report: &Report, name: &str, out: &mut impl io::Write) -> io::Result<()> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>oomkit snapshot · {}</title>\n<style>{CSS}</style></head><body>\n<h1>oomkit snapshot <span class=\"file\">{}</span></h1>\n",
        esc(name),
        esc(name)
    );
    if report.devices.is_empty() {
        h.push_str("<p>No segments and no trace: nothing was recorded.</p>\n");
    }
    for d in &report.devices {
        device(&mut h, d);
    }
    h.push_str("<p class=\"foot\">Figures as PyTorch's MemoryViz computes them; made by oomkit without executing the pickle.</p></body></html>\n");
    out.write_all(h.as_bytes())
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}h1{font-size:20px;margin:0 0 12px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #ddd}h3{font-size:15px;margin:18px 0 6px}.file{font-weight:normal;color:#555;font-family:monospace;font-size:15px}.figs{display:flex;flex-wrap:wrap;gap:8px}.fig{background:#f4f5f7;border-radius:6px;padding:6px 12px}.fig b{display:block;font-size:16px}.fig span{color:#666;font-size:12px}table{border-collapse:collapse;margin:4px 0}td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #eee;font-size:13px}td.n{text-align:right;font-variant-numeric:tabular-nums}td.m{font-family:monospace;font-size:12px}.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}.warn{color:#a33}.foot{color:#888;font-size:12px;margin-top:24px}svg text{font:11px system-ui,sans-serif;fill:#444}";

fn fig(h: &mut String, label: &str, value: &str, note: &str) {
    let _ = write!(
        h,
        "<div class=\"fig\"><span>{}</span><b>{}</b><span>{}</span></div>",
        esc(label),
        esc(value),
        esc(note)
    );
}

fn device(h: &mut String, d: &DeviceReport) {
    let _ = writeln!(h, "<h2>Device {}</h2>\n<div class=\"figs\">", d.device);
    fig(
        h,
        "reserved",
        &Bytes(d.reserved_bytes).to_string(),
        &format!("{} segments", d.segments),
    );
    fig(
        h,
        "allocated",
        &Bytes(d.allocated_bytes).to_string(),
        &format!("{} blocks", d.blocks),
    );
    fig(
        h,
        "requested",
        &Bytes(d.requested_bytes).to_string(),
        "live tensors",
    );
    fig(
        h,
        "baseline",
        &Bytes(d.baseline_bytes).to_string(),
        "alive before the trace",
    );
    let at = if d.peak_event < 0 {
        "before the first event".to_string()
    } else {
        format!("at event {}", d.peak_event)
    };
    fig(h, "peak", &Bytes(d.peak_bytes).to_string(), &at);
    fig(
        h,
        "end",
        &Bytes(d.end_bytes).to_string(),
        &format!("{} events", d.events),
    );
    if d.events > 0 {
        let at = if d.reserved_peak_event < 0 {
            "before the first event".to_string()
        } else {
            format!("at event {}", d.reserved_peak_event)
        };
        fig(
            h,
            "reserved peak",
            &Bytes(d.reserved_peak_bytes).to_string(),
            &format!(
                "{at}; {} before the trace, {} segment events",
                Bytes(d.reserved_baseline_bytes),
                d.segment_events
            ),
        );
    }
    fig(
        h,
        "free inside segments",
        &Bytes(d.fragmentation.free_bytes).to_string(),
        &format!(
            "largest block {}",
            Bytes(d.fragmentation.largest_free_block_bytes)
        ),
    );
    h.push_str("</div>\n");
    timeline(h, d);
    sites_table(h, d);
    for o in &d.ooms {
        let _ = writeln!(
            h,
            "<h3 class=\"warn\">Out of memory at event {}: asked for {} with {} free on the device; {} alive</h3>",
            o.event,
            Bytes(o.requested_bytes),
            Bytes(o.device_free_bytes),
            Bytes(o.alive_bytes)
        );
    }
    if !d.leaks.is_empty() {
        h.push_str("<h3>Leak candidates</h3><table><tr><th>site</th><th>per iteration</th><th>iterations</th><th>never freed</th></tr>");
        for l in &d.leaks {
            let _ = write!(
                h,
                "<tr><td class=\"m\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{} in {}</td></tr>",
                esc(&l.frame),
                Bytes(l.bytes_per_iteration),
                l.iterations,
                Bytes(l.bytes),
                l.count
            );
        }
        h.push_str("</table>\n");
    }
    segment_map(h, d);
    for w in &d.warnings {
        let _ = writeln!(h, "<p class=\"warn\">warning: {}</p>", esc(w));
    }
}

fn timeline(h: &mut String, d: &DeviceReport) {
    let t = &d.timeline;
    if d.events == 0 || t.points.len() < 2 {
        return;
    }
    let (w, ht, left, top) = (1220.0f64, 320.0f64, 130.0f64, 10.0f64);
    let max = t
        .points
        .iter()
        .map(|(_, v)| v.iter().copied().fold(0u64, u64::saturating_add))
        .chain(t.reserved.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1);
    let n = f(d.events);
    let x = |ev: i64| left + w * (f(u64::try_from(ev.saturating_add(1)).unwrap_or(0)) / n);
    let y = |b: u64| top + ht * (1.0 - f(b) / f(max));
    let lanes = annotation_lanes(d);
    let strip = 14.0 * f(u64::try_from(lanes.len()).unwrap_or(0)) + 8.0;
    let total_h = top + ht + 30.0 + strip;
    let _ = writeln!(
        h,
        "<h3>Memory over time by allocation site; the line is reserved memory</h3><svg width=\"{:.0}\" height=\"{total_h:.0}\" viewBox=\"0 0 {:.0} {total_h:.0}\" role=\"img\">",
        left + w + 10.0,
        left + w + 10.0
    );
    // Grid and axis labels.
    for k in 0..=4u64 {
        let b = max.saturating_mul(k) / 4;
        let yy = y(b);
        let _ = writeln!(
            h,
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e5e5e5\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + w,
            left - 6.0,
            yy + 4.0,
            Bytes(b)
        );
    }
    // Stacked areas, bottom series first.
    let nseries = t.series.len();
    let other = nseries.saturating_sub(1);
    let mut lower = vec![0u64; t.points.len()];
    for s in 0..nseries {
        let upper: Vec<u64> = t
            .points
            .iter()
            .zip(&lower)
            .map(|((_, v), lo)| lo.saturating_add(v.get(s).copied().unwrap_or(0)))
            .collect();
        let mut pts = String::new();
        for ((ev, _), u) in t.points.iter().zip(&upper) {
            let _ = write!(pts, "{:.1},{:.1} ", x(*ev), y(*u));
        }
        for ((ev, _), lo) in t.points.iter().zip(&lower).rev() {
            let _ = write!(pts, "{:.1},{:.1} ", x(*ev), y(*lo));
        }
        let name = t.series.get(s).map_or("", String::as_str);
        let _ = writeln!(
            h,
            "<polygon points=\"{}\" fill=\"{}\" stroke=\"none\"><title>{}</title></polygon>",
            pts.trim_end(),
            color(s, other),
            esc(name)
        );
        lower = upper;
    }
    // Reserved memory (segments), as a step line over the areas.
    if t.reserved.len() == t.points.len() {
        let mut pts = String::new();
        let mut last: Option<f64> = None;
        for ((ev, _), r) in t.points.iter().zip(&t.reserved) {
            let (xx, yy) = (x(*ev), y(*r));
            if let Some(prev) = last {
                let _ = write!(pts, "{xx:.1},{prev:.1} ");
            }
            let _ = write!(pts, "{xx:.1},{yy:.1} ");
            last = Some(yy);
        }
        let _ = writeln!(
            h,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#222\" stroke-width=\"1.5\"><title>reserved (segments): peak {}</title></polyline>",
            pts.trim_end(),
            Bytes(d.reserved_peak_bytes)
        );
    }
    // Peak and OOM markers.
    if d.peak_event >= 0 {
        let px = x(d.peak_event);
        let right = px > left + w - 220.0;
        let anchor = if right { "end" } else { "start" };
        let _ = writeln!(
            h,
            "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{top}\" y2=\"{:.1}\" stroke=\"#222\" stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">peak {} (event {})</text>",
            top + ht,
            if right { px - 5.0 } else { px + 5.0 },
            top + 12.0,
            Bytes(d.peak_bytes),
            d.peak_event
        );
    }
    for o in &d.ooms {
        let ox = x(i64::try_from(o.event).unwrap_or(0));
        let _ = writeln!(
            h,
            "<line x1=\"{ox:.1}\" x2=\"{ox:.1}\" y1=\"{top}\" y2=\"{:.1}\" stroke=\"#d00\" stroke-width=\"2\"><title>OOM: asked for {}</title></line>",
            top + ht,
            Bytes(o.requested_bytes)
        );
    }
    let _ = writeln!(
        h,
        "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#888\"/><text x=\"{left}\" y=\"{:.1}\">event 0</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">event {}</text>",
        left + w,
        top + ht,
        top + ht,
        top + ht + 16.0,
        left + w,
        top + ht + 16.0,
        d.events.saturating_sub(1)
    );
    // Annotated ranges under the axis: one lane per range name (digits as #),
    // the most frequent names first.
    for (lane, fam) in lanes.iter().enumerate() {
        let yy = top + ht + 26.0 + f(u64::try_from(lane).unwrap_or(0)) * 14.0;
        let short: String = if fam.chars().count() > 18 {
            fam.chars().take(17).chain(['…']).collect()
        } else {
            fam.clone()
        };
        let _ = writeln!(
            h,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\"><title>{}</title>{}</text>",
            left - 6.0,
            yy + 9.5,
            esc(fam),
            esc(&short)
        );
        for s in d.annotations.iter().filter(|s| &family(&s.name) == fam) {
            let x0 = x(s.start_event.saturating_sub(1));
            let x1 = x(s.end_event).max(x0 + 1.5);
            let _ = writeln!(
                h,
                "<rect x=\"{x0:.1}\" y=\"{yy:.1}\" width=\"{:.1}\" height=\"11\" fill=\"#9fb3c8\"><title>{} (events {}–{})</title></rect>",
                x1 - x0,
                esc(&s.name),
                s.start_event,
                s.end_event
            );
        }
    }
    h.push_str("</svg>\n");
}

/// The range names to draw (digits as `#`), most frequent first, at most 6.
fn annotation_lanes(d: &DeviceReport) -> Vec<String> {
    let mut count: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for s in &d.annotations {
        let e = count.entry(family(&s.name)).or_default();
        *e = e.saturating_add(1);
    }
    let mut v: Vec<(String, usize)> = count.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.into_iter().take(6).map(|(n, _)| n).collect()
}

fn sites_table(h: &mut String, d: &DeviceReport) {
    if d.top_sites.is_empty() {
        return;
    }
    let at = if d.peak_event < 0 {
        "at the peak (the state before the trace)".to_string()
    } else {
        format!("at the peak (event {})", d.peak_event)
    };
    let _ = write!(
        h,
        "<h3>Alive {at}, by first frame in user code</h3><table><tr><th>site</th><th>bytes</th><th>allocations</th><th>share of peak</th></tr>"
    );
    let other = d.timeline.series.len().saturating_sub(1);
    for (i, s) in d.top_sites.iter().enumerate() {
        let share = if d.peak_bytes == 0 {
            0.0
        } else {
            100.0 * f(s.bytes) / f(d.peak_bytes)
        };
        let _ = write!(
            h,
            "<tr><td class=\"m\"><span class=\"sw\" style=\"background:{}\"></span>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{share:.1}%</td></tr>",
            color(i, other),
            esc(&s.frame),
            Bytes(s.bytes),
            s.count
        );
    }
    let _ = writeln!(
        h,
        "<tr><td class=\"m\"><span class=\"sw\" style=\"background:{OTHER}\"></span>other</td><td></td><td></td><td></td></tr></table>"
    );
}

/// Most segments drawn in the map (the largest ones).
const MAP_ROWS: usize = 120;

fn segment_map(h: &mut String, d: &DeviceReport) {
    if d.segment_map.is_empty() {
        return;
    }
    let mut segs: Vec<_> = d.segment_map.iter().collect();
    segs.sort_by(|a, b| b.total.cmp(&a.total).then(a.address.cmp(&b.address)));
    let shown = segs.len().min(MAP_ROWS);
    let biggest = segs.first().map_or(1, |s| s.total).max(1);
    let (left, w, row) = (90.0f64, 1190.0f64, 13.0f64);
    let height = row * f(u64::try_from(shown).unwrap_or(0)) + 24.0;
    let _ = write!(
        h,
        "<h3>Segment map</h3><p><span class=\"sw\" style=\"background:#4e79a7\"></span>allocated <span class=\"sw\" style=\"background:#e15759\"></span>rounding waste <span class=\"sw\" style=\"background:#f28e2b\"></span>pending free <span class=\"sw\" style=\"background:#e8e8e8;border:1px solid #ccc\"></span>free (inactive) — each row is one segment, widths to scale ({} of {} segments, largest first)</p>\n<svg width=\"{:.0}\" height=\"{height:.0}\" role=\"img\">",
        shown,
        segs.len(),
        left + w + 10.0
    );
    for (r, s) in segs.iter().take(shown).enumerate() {
        let yy = f(u64::try_from(r).unwrap_or(0)) * row;
        let scale = w / f(biggest);
        let _ = write!(
            h,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            yy + 10.0,
            Bytes(s.total)
        );
        let _ = write!(
            h,
            "<rect x=\"{left}\" y=\"{yy:.1}\" width=\"{:.2}\" height=\"{:.0}\" fill=\"#e8e8e8\" stroke=\"#ccc\" stroke-width=\"0.5\"/>",
            (f(s.total) * scale).max(1.0),
            row - 3.0
        );
        let mut off = 0u64;
        for &(size, req, state) in &s.blocks {
            let bx = left + f(off) * scale;
            let (fill, used) = match state {
                BlockState::Allocated => ("#4e79a7", req.min(size)),
                BlockState::PendingFree => ("#f28e2b", size),
                _ => ("", 0),
            };
            if !fill.is_empty() {
                let _ = write!(
                    h,
                    "<rect x=\"{bx:.2}\" y=\"{yy:.1}\" width=\"{:.2}\" height=\"{:.0}\" fill=\"{fill}\"><title>{} {}</title></rect>",
                    (f(used) * scale).max(0.5),
                    row - 3.0,
                    if state == BlockState::Allocated {
                        "allocated"
                    } else {
                        "pending free"
                    },
                    Bytes(size)
                );
                let waste = size.saturating_sub(used);
                if waste > 0 {
                    let _ = write!(
                        h,
                        "<rect x=\"{:.2}\" y=\"{yy:.1}\" width=\"{:.2}\" height=\"{:.0}\" fill=\"#e15759\"/>",
                        bx + f(used) * scale,
                        (f(waste) * scale).max(0.5),
                        row - 3.0
                    );
                }
            }
            off = off.saturating_add(size);
        }
    }
    h.push_str("</svg>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_in_names() {
        assert_eq!(esc("<string>:3 f&g"), "&lt;string&gt;:3 f&amp;g");
    }
}
