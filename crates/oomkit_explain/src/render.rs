//! Human output: a headline, the numbers, the cause, the fixes with code.
//!
//! Always writes styled text; the binary strips the styles when stdout is not
//! a terminal (anstream), so this module never needs to know where it writes.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use oomkit_core::Bytes;
use oomkit_core::text::escape;

use crate::event::{Cause, Event, Fix, Framework, Report};
use crate::readings::Reading;

const BOLD: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();
const RED: Style = AnsiColor::Red.on_default().bold();
const YELLOW: Style = AnsiColor::Yellow.on_default().bold();
const GREEN: Style = AnsiColor::Green.on_default();
const CYAN: Style = AnsiColor::Cyan.on_default();

/// Renders a whole report for people. Text from the log (the quoted line,
/// process and GPU names) and the source's name pass through [`escape`], so
/// control characters reach a terminal as text.
pub fn human(report: &Report, source: &str) -> String {
    let source = &*escape(source);
    let mut out = String::new();
    if report.events.is_empty() && report.readings.is_empty() {
        let _ = writeln!(out, "no out-of-memory error found in {source}");
        return out;
    }
    for (i, e) in report.events.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        event(&mut out, e, source);
    }
    for (i, r) in report.readings.iter().enumerate() {
        if i > 0 || !report.events.is_empty() {
            out.push('\n');
        }
        reading(&mut out, r, source);
    }
    let ooms = report.events.iter().filter(|e| e.is_oom).count();
    if report.events.is_empty() {
        let _ = writeln!(
            out,
            "\n{DIM}{} memory reading(s) in {source}, no out-of-memory error{DIM:#}",
            report.readings.len()
        );
    } else if report.events.len() > 1 || !report.readings.is_empty() {
        let readings = if report.readings.is_empty() {
            String::new()
        } else {
            format!(", {} memory reading(s)", report.readings.len())
        };
        let _ = writeln!(
            out,
            "\n{DIM}{} event(s) in {source}: {ooms} out-of-memory, {} other{readings}{DIM:#}",
            report.events.len(),
            report.events.len() - ooms
        );
    }
    out
}

/// The one-line summary, e.g.
/// `CUDA out of memory on GPU 0 (RTX 4090, 23.65 GiB): asked for 2.00 GiB, 1.45 GiB free`.
pub fn headline(e: &Event) -> String {
    // vLLM's start-up check is not an allocation failure: the engine
    // measured what is left for the KV cache and refused to start.
    if e.is_oom && e.cause == Cause::KvCache && e.format.starts_with("vllm-") {
        let mut s = if e.format == "vllm-no-cache-blocks" {
            "vLLM start-up check: no memory left for the KV cache".to_string()
        } else {
            "vLLM start-up check: the KV cache cannot hold one request at max_model_len".to_string()
        };
        if let (Some(r), Some(f)) = (e.requested_bytes, e.free_bytes) {
            s.push_str(&format!(": needs {r} of KV cache, {f} available"));
        }
        return s;
    }
    // SGLang's is the same kind of check (its KV cache pool has no room).
    if e.is_oom && e.format == "sglang-not-enough-memory" {
        return "SGLang start-up check: no memory left for the KV cache pool".to_string();
    }
    let what = if e.is_oom {
        match (e.framework, e.backend) {
            (
                Framework::Pytorch | Framework::LuaTorch | Framework::Comfyui | Framework::A1111,
                Some(b),
            ) => {
                format!("{} out of memory", b.label())
            }
            (fw, Some(b)) => format!("{} {} out of memory", fw.label(), b.label()),
            (fw, None) => format!("{} out of memory", fw.label()),
        }
    } else if e.cause == Cause::Unknown {
        format!("Possible out-of-memory ({})", e.framework.label())
    } else {
        "Not a GPU out-of-memory error".to_string()
    };
    let mut s = what;
    if e.is_oom {
        let device = e.device.map(|d| format!("GPU {d}"));
        let mut inside = Vec::new();
        if let Some(g) = &e.gpu {
            inside.push(if g.from == "total" {
                format!("likely {}", g.name)
            } else {
                g.name.to_string()
            });
        }
        if let Some(t) = e.total_bytes {
            inside.push(t.to_string());
        }
        match (device, inside.is_empty()) {
            (Some(d), true) => s.push_str(&format!(" on {d}")),
            (Some(d), false) => s.push_str(&format!(" on {d} ({})", inside.join(", "))),
            (None, false) => s.push_str(&format!(" ({})", inside.join(", "))),
            (None, true) => {}
        }
        let mut tail = Vec::new();
        if let Some(r) = e.requested_bytes {
            tail.push(format!("asked for {r}"));
        }
        if let Some(f) = e.free_bytes {
            tail.push(format!("{f} free"));
        }
        if !tail.is_empty() {
            s.push_str(": ");
            s.push_str(&tail.join(", "));
        }
    } else {
        s.push_str(&format!(": {}", e.format));
    }
    s
}

fn event(out: &mut String, e: &Event, source: &str) {
    let style = if e.is_oom {
        RED
    } else if e.cause == Cause::Unknown {
        YELLOW
    } else {
        GREEN
    };
    let _ = writeln!(out, "{style}{}{style:#}", headline(e));
    let mut meta = vec![format!("{source}:{}", e.line)];
    meta.push(e.framework.label().to_string());
    if let Some(v) = e.version_hint {
        meta.push(v.to_string());
    }
    if let Some(app) = e.app {
        meta.push(format!("in {app}"));
    }
    if let Some(p) = e.phase {
        meta.push(p.to_string());
    }
    if e.repeats > 1 {
        meta.push(format!("seen {} times", e.repeats));
    }
    if !e.ranks.is_empty() {
        let ranks: Vec<String> = e.ranks.iter().map(u32::to_string).collect();
        meta.push(format!("rank {}", ranks.join(",")));
    }
    let _ = writeln!(out, "  {DIM}{}{DIM:#}", meta.join(" · "));
    if !e.message.is_empty() {
        let _ = writeln!(out, "  {DIM}> {}{DIM:#}", escape(&e.message));
    }

    let rows = number_rows(e);
    if !rows.is_empty() {
        out.push('\n');
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in rows {
            let _ = writeln!(out, "  {k:<width$}  {BOLD}{v}{BOLD:#}");
        }
    }

    out.push('\n');
    let label = if e.is_oom {
        "Cause"
    } else if e.cause == Cause::Unknown {
        "Undetermined"
    } else {
        "Why"
    };
    let _ = writeln!(
        out,
        "  {BOLD}{label}: {}{BOLD:#} — {}",
        e.cause.label(),
        e.evidence
    );

    if !e.reading_lines.is_empty() {
        let lines: Vec<String> = e.reading_lines.iter().map(u64::to_string).collect();
        let _ = writeln!(
            out,
            "  {DIM}(with the memory reading at line {} of {source}){DIM:#}",
            lines.join(", ")
        );
    }
    fixes(out, &e.fixes);
}

fn fixes(out: &mut String, fixes: &[Fix]) {
    if !fixes.is_empty() {
        let _ = writeln!(out, "\n  {BOLD}Fixes, most effective first:{BOLD:#}");
        for (i, f) in fixes.iter().enumerate() {
            let saves = f.saves_bytes.map_or(String::new(), |b| {
                format!(" {GREEN}(frees up to {b}){GREEN:#}")
            });
            let _ = writeln!(
                out,
                "  {}. {BOLD}{}{BOLD:#}{saves} {DIM}[{}]{DIM:#}",
                i + 1,
                f.title,
                f.id
            );
            let _ = writeln!(out, "     {}", f.why);
            for line in f.code.lines() {
                let _ = writeln!(out, "       {CYAN}{line}{CYAN:#}");
            }
        }
    }
}

/// One memory reading: what was read, what it shows, the fixes.
fn reading(out: &mut String, r: &Reading, source: &str) {
    let what = if r.source.is_smi() {
        let procs = r.processes().count();
        let procs = if r.process_list || procs > 0 {
            format!(", {procs} process(es)")
        } else {
            String::new()
        };
        let mig = if r.mig.is_empty() {
            String::new()
        } else {
            format!(", {} MIG device(s)", r.mig.len())
        };
        format!("{} GPU(s){mig}{procs}", r.gpus.len())
    } else {
        r.torch.device.map_or("PyTorch allocator".to_string(), |d| {
            format!("PyTorch allocator, device {d}")
        })
    };
    let _ = writeln!(
        out,
        "{YELLOW}Memory reading ({}): {what}{YELLOW:#}",
        r.source.label()
    );
    let mut meta = vec![format!("{source}:{}", r.line)];
    if let Some(d) = &r.driver_version {
        meta.push(format!("driver {d}"));
    }
    if let Some(c) = &r.cuda_version {
        meta.push(format!("CUDA {c}"));
    }
    let _ = writeln!(out, "  {DIM}{}{DIM:#}", meta.join(" · "));
    let mut rows: Vec<(String, String)> = Vec::new();
    for g in &r.gpus {
        let name = g
            .name
            .as_deref()
            .map_or(String::new(), |n| format!(" {}", escape(n)));
        let mem = match (g.memory_used_bytes, g.memory_total_bytes) {
            (Some(u), Some(t)) => format!(
                "{} / {} used, {} free",
                Bytes(u),
                Bytes(t),
                Bytes(g.memory_free_bytes().unwrap_or(0))
            ),
            _ => "memory not reported".to_string(),
        };
        let util = g
            .utilization_pct
            .map_or(String::new(), |p| format!(", {p}% busy"));
        rows.push((format!("{}{name}", r.gpu_ref(g)), format!("{mem}{util}")));
        for p in &g.processes {
            rows.push((
                format!(
                    "  PID {} {}",
                    p.pid,
                    escape(p.command.as_deref().unwrap_or("?"))
                ),
                p.used_bytes
                    .map_or("N/A".to_string(), |v| Bytes(v).to_string()),
            ));
        }
    }
    let t = &r.torch;
    for (k, v) in [
        ("allocated", t.allocated_bytes),
        ("allocated (peak)", t.allocated_peak_bytes),
        ("active", t.active_bytes),
        ("requested", t.requested_bytes),
        ("reserved", t.reserved_bytes),
        ("reserved (peak)", t.reserved_peak_bytes),
        ("non-releasable", t.non_releasable_bytes),
    ] {
        if let Some(v) = v {
            rows.push((k.to_string(), Bytes(v).to_string()));
        }
    }
    for (k, v) in [
        ("CUDA OOMs", t.oom_count),
        ("cudaMalloc retries", t.alloc_retries),
    ] {
        if let Some(v) = v {
            rows.push((k.to_string(), v.to_string()));
        }
    }
    if !rows.is_empty() {
        out.push('\n');
        let width = rows
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        for (k, v) in rows {
            let _ = writeln!(out, "  {k:<width$}  {BOLD}{v}{BOLD:#}");
        }
    }
    if !r.findings.is_empty() {
        let _ = writeln!(out, "\n  {BOLD}What it shows:{BOLD:#}");
        for f in &r.findings {
            let _ = writeln!(out, "  - {f}");
        }
    }
    fixes(out, &r.fixes);
}

fn number_rows(e: &Event) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: Option<Bytes>, note: &str| {
        if let Some(v) = v {
            let v = if v == Bytes::MAX {
                "SIZE_MAX".to_string()
            } else {
                v.to_string()
            };
            rows.push((k.to_string(), format!("{v}{note}")));
        }
    };
    add("requested", e.requested_bytes, "");
    add("free", e.free_bytes, "");
    add("total", e.total_bytes, "");
    add("allocated", e.allocated_bytes, "");
    add("reserved", e.reserved_bytes, "");
    let n = &e.numbers;
    add(
        "reserved but unallocated",
        n.reserved_unallocated_bytes,
        "  (fragmentation)",
    );
    add("this process (NVML)", n.this_process_bytes, "");
    add(
        "outside the allocator",
        n.non_framework_bytes,
        "  (context, libraries)",
    );
    // MPS's "other allocations": Metal memory outside PyTorch's heap, from
    // this process or others; not fragmentation, and not only processes.
    let (others, note) = if e.backend == Some(crate::event::Backend::Mps) {
        ("other allocations", "  (Metal, outside PyTorch's heap)")
    } else {
        ("other processes", "")
    };
    add(others, n.other_processes_bytes.filter(|o| o.0 > 0), note);
    add(
        "unaccounted",
        n.unaccounted_bytes.filter(|u| u.0 > 0),
        "  (driver, other processes, context)",
    );
    add("limit", n.limit_bytes, "");
    add("private pools", n.private_pool_bytes, "  (CUDA graphs)");
    add(
        "shortfall",
        n.shortfall_bytes.filter(|s| s.0 > 0),
        "  (requested − free)",
    );
    if let Some(t) = &e.tensor {
        let dims: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        rows.push((
            "tensor".into(),
            format!("[{}] {}", dims.join(", "), t.dtype),
        ));
    }
    if let Some(op) = &e.op {
        rows.push(("op".into(), op.clone()));
    }
    for p in e.processes.iter().filter(|p| p.pid.is_some()) {
        let who = match (p.pid, p.is_self) {
            (Some(pid), true) => format!("process {pid} (this one)"),
            (Some(pid), false) => format!("process {pid}"),
            (None, _) => "this process".to_string(),
        };
        rows.push((who, p.used_bytes.to_string()));
    }
    for d in &e.details {
        rows.push((d.key().replace('_', " "), d.value()));
    }
    rows
}
