//! What `oomkit run` says after the command: the memory timeline as text
//! (after explain's own report, which the binary prints with
//! `oomkit_explain::render::human`), and the `--report` HTML page: one
//! self-contained file (inline CSS and SVG, no script, no network).

use std::fmt::Write as _;

use oomkit_core::Bytes;
use oomkit_explain::{Event, Report, render};

use crate::timeline::{Growth, Timeline};

/// Said when there is no timeline.
pub const NO_SAMPLES: &str =
    "no GPU samples (NVML unavailable) and the program printed no memory figures";

/// The timeline as text: the figures the program printed (at most a dozen,
/// evenly spread), the growth rate when memory climbed steadily, and the
/// memory held at the OOM when its message states it.
pub fn timeline_text(t: &Timeline, oom: Option<&Event>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "memory timeline");
    if t.samples.is_empty() {
        let _ = writeln!(out, "  {NO_SAMPLES}");
    } else {
        let _ = writeln!(
            out,
            "  {}{}:",
            source_text(t, "`"),
            if t.samples.len() > 12 {
                ", 12 shown"
            } else {
                ""
            }
        );
        for s in spread(&t.samples, 12) {
            let _ = writeln!(
                out,
                "  {:>9.1}s  {:>12}  {}",
                s.seconds,
                Bytes(s.bytes).to_string(),
                bar(s.bytes, t.peak().unwrap_or(1))
            );
        }
        match t.growth() {
            Some(g) => {
                let _ = writeln!(out, "  {}", growth_text(&g, is_measured(t)));
            }
            None => {
                let _ = writeln!(out, "  no steady climb");
            }
        }
    }
    if let Some(e) = oom
        && let Some(held) = e.reserved_bytes.or(e.numbers.this_process_bytes)
    {
        let _ = write!(out, "  at the OOM: {held} held");
        if let Some(r) = e.requested_bytes {
            let _ = write!(out, ", {r} more asked for");
        }
        if let Some(total) = e.total_bytes {
            let _ = write!(out, " (device {total})");
        }
        let _ = writeln!(out);
    }
    out
}

/// True for NVML's timeline, false for figures the program printed.
fn is_measured(t: &Timeline) -> bool {
    t.label.as_deref() == Some(crate::runner::GPU_LABEL)
}

/// Where the samples came from: `6 figure(s) the program printed as `mem``,
/// or `40 NVML sample(s) of the GPU memory of the command's process tree`.
/// `quote` wraps the printed key (a backtick in text, `<code>` in HTML).
fn source_text(t: &Timeline, quote: &str) -> String {
    match t.label.as_deref() {
        _ if is_measured(t) => format!(
            "{} NVML sample(s) of the GPU memory of the command's process tree",
            t.seen
        ),
        label => {
            let label = label.unwrap_or("memory");
            let (close, label) = if quote == "<code>" {
                ("</code>", esc(label))
            } else {
                (quote, label.to_owned())
            };
            format!(
                "{} figure(s) the program printed as {quote}{label}{close}",
                t.seen
            )
        }
    }
}

/// `memory climbed steadily: +1.20 GiB/min, +40.00 MiB per printed figure (2.00 GiB → 9.50 GiB)`
/// (no per-minute rate when the figures came out within a second).
pub fn growth_text(g: &Growth, measured: bool) -> String {
    let per_min = g
        .bytes_per_second
        .map(|r| format!("+{}/min, ", Bytes(to_u64(r * 60.0))))
        .unwrap_or_default();
    format!(
        "memory climbed steadily: {per_min}+{} per {} ({} → {})",
        Bytes(to_u64(g.bytes_per_sample)),
        if measured { "sample" } else { "printed figure" },
        Bytes(g.from_bytes),
        Bytes(g.to_bytes)
    )
}

fn to_u64(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 {
        // Saturating float-to-int conversion.
        x as u64
    } else {
        0
    }
}

fn bar(v: u64, peak: u64) -> String {
    let width = 30u64;
    let n = v
        .saturating_mul(width)
        .checked_div(peak.max(1))
        .unwrap_or(0);
    "█".repeat(usize::try_from(n.min(width)).unwrap_or(0))
}

/// At most `n` items, evenly spread, always including the last.
fn spread<T>(items: &[T], n: usize) -> Vec<&T> {
    if items.len() <= n || n < 2 {
        return items.iter().collect();
    }
    let last = items.len() - 1;
    (0..n)
        .filter_map(|i| items.get(i.saturating_mul(last) / (n - 1)))
        .collect()
}

/// What the page shows.
pub struct Page<'a> {
    /// The command as typed.
    pub command: &'a str,
    /// `exit 1`, `killed by signal 9`, …
    pub status: &'a str,
    /// Seconds the command ran.
    pub seconds: f64,
    /// Explain's report on the output.
    pub report: &'a Report,
    /// The memory timeline.
    pub timeline: &'a Timeline,
    /// The end of the output.
    pub tail: &'a str,
    /// A memory snapshot dumped at the OOM, and how to read it (`None` when
    /// it was removed after the analysis).
    pub snapshot: Option<(&'a str, Option<&'a str>)>,
    /// `oomkit snapshot`'s report on it, as text.
    pub snapshot_report: Option<&'a str>,
}

/// The self-contained HTML page.
pub fn html(p: &Page<'_>) -> String {
    let mut h = String::new();
    let oom = p.report.events.iter().find(|e| e.is_oom);
    let title = match oom {
        Some(e) => render::headline(e),
        None if p.report.events.is_empty() => "no out-of-memory error".to_string(),
        None => p
            .report
            .events
            .first()
            .map(render::headline)
            .unwrap_or_default(),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>oomkit run: {}</title><style>{CSS}</style></head><body>\n",
        esc(&title)
    );
    let _ = writeln!(
        h,
        "<header><div class=\"brand\">oomkit run</div><h1 class=\"{}\">{}</h1>\
         <p class=\"cmd\"><code>$ {}</code></p><p class=\"meta\">{} · {:.1} s</p></header>",
        if oom.is_some() { "bad" } else { "ok" },
        esc(&title),
        esc(p.command),
        esc(p.status),
        p.seconds
    );
    h.push_str("<main>\n");
    section_timeline(&mut h, p.timeline, oom);
    for e in &p.report.events {
        section_event(&mut h, e);
    }
    if let Some((path, cmd)) = p.snapshot {
        let how = match cmd {
            Some(cmd) => format!(
                "Read it with <code>{}</code>, or drop the file on pytorch.org/memory_viz.",
                esc(cmd)
            ),
            None => "It was removed after this analysis (<code>--keep-snapshot</code> keeps it)."
                .to_owned(),
        };
        let _ = write!(
            h,
            "<section><h2>Memory snapshot</h2><p>PyTorch's allocator history was dumped at the OOM to \
             <code>{}</code>. {how}</p>",
            esc(path),
        );
        if let Some(text) = p.snapshot_report {
            let _ = write!(h, "<pre class=\"tail\">{}</pre>", esc(text));
        }
        h.push_str("</section>\n");
    }
    let _ = writeln!(
        h,
        "<section><h2>End of the output</h2><pre class=\"tail\">{}</pre></section>",
        esc(p.tail)
    );
    h.push_str("</main><footer>Written by oomkit run · self-contained: no scripts, no network</footer></body></html>\n");
    h
}

fn section_event(h: &mut String, e: &Event) {
    let _ = write!(
        h,
        "<section><h2>{}</h2><p class=\"msg\"><code>{}</code></p>",
        if e.is_oom {
            "What happened"
        } else {
            "Other error"
        },
        esc(&e.message)
    );
    let rows: [(&str, Option<Bytes>); 9] = [
        ("requested", e.requested_bytes),
        ("free", e.free_bytes),
        ("total", e.total_bytes),
        ("allocated", e.allocated_bytes),
        ("reserved", e.reserved_bytes),
        ("shortfall", e.numbers.shortfall_bytes),
        (
            "reserved but unallocated",
            e.numbers.reserved_unallocated_bytes,
        ),
        ("outside the framework", e.numbers.non_framework_bytes),
        ("other processes", e.numbers.other_processes_bytes),
    ];
    if rows.iter().any(|(_, v)| v.is_some()) {
        h.push_str("<table class=\"nums\">");
        for (k, v) in rows {
            if let Some(v) = v {
                let _ = write!(h, "<tr><th>{k}</th><td>{v}</td></tr>");
            }
        }
        h.push_str("</table>");
    }
    let _ = write!(
        h,
        "<p class=\"cause\"><b>Cause: {}</b> — {}</p>",
        esc(e.cause.label()),
        esc(&e.evidence)
    );
    if !e.fixes.is_empty() {
        h.push_str("<h3>Fixes, best first</h3><ol class=\"fixes\">");
        for f in &e.fixes {
            let _ = write!(
                h,
                "<li><b>{}</b>{}<p>{}</p><pre>{}</pre></li>",
                esc(&f.title),
                f.saves_bytes
                    .map(|b| format!(" <span class=\"saves\">saves ~{b}</span>"))
                    .unwrap_or_default(),
                esc(&f.why),
                esc(&f.code)
            );
        }
        h.push_str("</ol>");
    }
    h.push_str("</section>\n");
}

fn section_timeline(h: &mut String, t: &Timeline, oom: Option<&Event>) {
    h.push_str("<section><h2>Memory timeline</h2>");
    let at_oom = oom.and_then(|e| e.reserved_bytes.or(e.numbers.this_process_bytes));
    let total = oom.and_then(|e| e.total_bytes);
    if t.samples.is_empty() {
        let _ = write!(h, "<p class=\"none\">{}</p>", esc(NO_SAMPLES));
        if let Some(held) = at_oom {
            let _ = write!(h, "<p>At the OOM the process held {held}.</p>");
        }
        h.push_str("</section>\n");
        return;
    }
    h.push_str(&svg(t, at_oom.map(Bytes::get), total.map(Bytes::get)));
    let _ = write!(
        h,
        "<p>{}.{}</p>",
        source_text(t, "<code>"),
        t.growth()
            .map(|g| format!(" <b>{}</b>.", esc(&growth_text(&g, is_measured(t)))))
            .unwrap_or_else(|| " No steady climb.".to_string())
    );
    h.push_str("</section>\n");
}

/// A line chart: the samples, the device total (dashed) and the memory held
/// at the OOM (a red dot at the end).
fn svg(t: &Timeline, at_oom: Option<u64>, total: Option<u64>) -> String {
    const W: f64 = 900.0;
    const H: f64 = 260.0;
    const L: f64 = 70.0;
    const B: f64 = 30.0;
    // By time when the figures span a second or more, else by their order.
    let by_time = t.span_seconds() >= crate::timeline::MIN_SPAN_SECONDS;
    let pos: Vec<f64> = t
        .samples
        .iter()
        .enumerate()
        .map(|(i, s)| if by_time { s.seconds } else { i as f64 })
        .collect();
    let t_end = pos.last().copied().unwrap_or(1.0).max(1e-3);
    let top = [t.peak(), at_oom, total]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.08;
    let x = |s: f64| L + (s / t_end) * (W - L - 20.0);
    let y = |b: f64| (H - B) - (b / top) * (H - B - 10.0);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg viewBox=\"0 0 {W} {H}\" width=\"100%\" role=\"img\" aria-label=\"memory over time\">"
    );
    for i in 0..=4 {
        let v = top / 1.08 * f64::from(i) / 4.0;
        let _ = write!(
            s,
            "<line x1=\"{L}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" class=\"grid\"/>\
             <text x=\"{}\" y=\"{:.1}\" class=\"ax\" text-anchor=\"end\">{}</text>",
            W - 20.0,
            L - 6.0,
            y(v) + 4.0,
            Bytes(to_u64(v)),
            y = y(v)
        );
    }
    let (start_label, end_label) = if by_time {
        ("0 s".to_string(), format!("{t_end:.1} s"))
    } else {
        ("figure 1".to_string(), format!("figure {}", pos.len()))
    };
    let _ = write!(
        s,
        "<text x=\"{L}\" y=\"{}\" class=\"ax\">{start_label}</text><text x=\"{}\" y=\"{}\" class=\"ax\" text-anchor=\"end\">{end_label}</text>",
        H - 8.0,
        W - 20.0,
        H - 8.0
    );
    if let Some(tot) = total {
        let _ = write!(
            s,
            "<line x1=\"{L}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" class=\"total\"/>\
             <text x=\"{}\" y=\"{:.1}\" class=\"ax total-t\" text-anchor=\"end\">device {}</text>",
            W - 20.0,
            W - 24.0,
            y(tot as f64) - 5.0,
            Bytes(tot),
            yy = y(tot as f64)
        );
    }
    let points: Vec<String> = t
        .samples
        .iter()
        .zip(&pos)
        .map(|(p, &at)| format!("{:.1},{:.1}", x(at), y(p.bytes as f64)))
        .collect();
    let _ = write!(
        s,
        "<polyline points=\"{}\" class=\"line\"/>",
        points.join(" ")
    );
    if let Some(b) = at_oom {
        let _ = write!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"6\" class=\"oom\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"ax oom-t\" text-anchor=\"end\">OOM: {} held</text>",
            x(t_end),
            y(b as f64),
            x(t_end) - 10.0,
            y(b as f64) + 18.0,
            Bytes(b)
        );
    }
    s.push_str("</svg>");
    s
}

/// HTML-escapes text.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const CSS: &str = "\
body{margin:0;font:15px/1.5 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1d2330;background:#f4f6fa}\
header{background:#1d2330;color:#fff;padding:22px 40px}\
.brand{font-size:12px;letter-spacing:.12em;text-transform:uppercase;color:#9aa6bd}\
h1{margin:6px 0;font-size:22px}h1.bad{color:#ff8a80}h1.ok{color:#9be39b}\
.cmd code{color:#d6dceb}.meta{color:#9aa6bd;margin:0}\
main{max-width:1000px;margin:0 auto;padding:10px 40px 40px}\
section{background:#fff;border-radius:10px;box-shadow:0 1px 3px #0002;padding:14px 24px;margin:18px 0}\
h2{font-size:17px;margin:4px 0 10px}h3{font-size:15px}\
code,pre{font:13px/1.45 ui-monospace,'DejaVu Sans Mono',monospace}\
pre{background:#f0f2f7;padding:10px 12px;border-radius:6px;overflow-x:auto;white-space:pre-wrap}\
.msg code{color:#b3261e}.cause{border-left:4px solid #e0a100;padding-left:10px}\
table.nums{border-collapse:collapse}table.nums th{text-align:left;font-weight:500;color:#5b6479;padding:2px 24px 2px 0}\
table.nums td{font-variant-numeric:tabular-nums;text-align:right}\
.fixes li{margin-bottom:10px}.fixes p{margin:2px 0;color:#5b6479}.saves{color:#1b7f3b;font-size:13px}\
.grid{stroke:#e3e7ef}.ax{font-size:12px;fill:#5b6479}.line{fill:none;stroke:#2f6fde;stroke-width:2.5}\
.total{stroke:#1d2330;stroke-dasharray:6 5}.oom{fill:#d93025}.oom-t{fill:#d93025;font-weight:600}\
.none{color:#5b6479;font-style:italic}.tail{max-height:360px;overflow:auto}\
footer{text-align:center;color:#8a93a6;font-size:12px;padding:0 0 30px}";

#[cfg(test)]
mod tests {
    use super::*;
    use oomkit_explain::Explainer;

    const OOM: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 20.00 MiB is free. Including non-PyTorch memory, this process has 23.61 GiB memory in use. Of the allocated memory 15.21 GiB is allocated by PyTorch, and 210.00 MiB is reserved by PyTorch but unallocated.";

    fn climbing() -> Timeline {
        let mut t = Timeline::default();
        for i in 1..=6u32 {
            t.observe(f64::from(i), 0, &format!("step {i} mem: {} GiB", i * 3));
        }
        t
    }

    #[test]
    fn the_text_timeline_shows_figures_growth_and_the_oom() {
        let r = Explainer::new().explain_str(OOM);
        let s = timeline_text(&climbing(), r.events.first());
        assert!(
            s.contains("6 figure(s) the program printed as `mem`"),
            "{s}"
        );
        assert!(
            s.contains("memory climbed steadily: +180.00 GiB/min"),
            "{s}"
        );
        // allocated 15.21 GiB + 210 MiB reserved-but-unallocated = reserved.
        let held = r.events.first().and_then(|e| e.reserved_bytes).unwrap();
        assert_eq!(held.to_string(), "15.42 GiB");
        assert!(
            s.contains("at the OOM: 15.42 GiB held, 2.00 GiB more asked for (device 23.65 GiB)"),
            "{s}"
        );
        let none = timeline_text(&Timeline::default(), None);
        assert!(none.contains(NO_SAMPLES));
    }

    #[test]
    fn the_page_is_self_contained_and_escaped() {
        let r = Explainer::new().explain_str(OOM);
        let page = html(&Page {
            command: "python train.py --bs 64 <x>",
            status: "exit 1",
            seconds: 3.2,
            report: &r,
            timeline: &climbing(),
            tail: "a < b",
            snapshot: None,
            snapshot_report: None,
        });
        assert!(page.contains("<svg") && page.contains("<polyline"));
        assert!(page.contains("--bs 64 &lt;x&gt;"));
        assert!(page.contains("a &lt; b"));
        for banned in ["<script", "<link", "@import", " src=", "url("] {
            assert!(!page.contains(banned), "{banned} in page");
        }
    }

    #[test]
    fn spread_keeps_the_ends() {
        let v: Vec<u32> = (0..100).collect();
        let s = spread(&v, 5);
        assert_eq!(
            s.into_iter().copied().collect::<Vec<_>>(),
            [0, 24, 49, 74, 99]
        );
    }
}
