//! The report as text and as JSON (`oomkit leaks --format json`, schema
//! [`SCHEMA_VERSION`]).

use std::fmt::Write as _;

use oomkit_core::Bytes;
use serde_json::{Value, json};

use crate::analyse::{Leak, Report};

/// The JSON contract's version.
pub const SCHEMA_VERSION: u64 = 1;

fn clock_text(r: &Report) -> String {
    let unit = match r.clock.as_deref() {
        Some("optimizer") => "optimizer steps",
        Some("dataloader") => "DataLoader batches",
        Some("marker") => "calls of the marker function",
        Some("keras") => "Keras steps",
        _ => "steps",
    };
    format!("{} {unit}", r.steps)
}

/// The human report. `command` is the program as typed.
pub fn human(r: &Report, command: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "leaks after {} of `{command}`", clock_text(r));
    if r.grain == "holders" {
        let _ = writeln!(
            out,
            "TensorFlow, coarse grain: bytes of tensors, variables, Keras models and numpy arrays per named holder at each step (no creation sites, nothing inside tf.function)"
        );
    }
    if r.leaks.is_empty() {
        let _ = writeln!(
            out,
            "no leak: no memory made in one step stayed alive and kept growing"
        );
    }
    let n = r.leaks.len();
    for (i, l) in r.leaks.iter().enumerate() {
        let _ = writeln!(out);
        leak(&mut out, l, i.saturating_add(1), n);
    }
    if r.plateaus > 0 {
        let _ = writeln!(
            out,
            "{}{} {} grew and then stopped (warm-up, caches, bounded windows): not leaks",
            if n > 0 { "\n" } else { "" },
            r.plateaus,
            if r.grain == "holders" {
                "named holder(s)"
            } else {
                "creation site(s)"
            }
        );
    }
    for e in &r.hook_errors {
        let _ = writeln!(
            out,
            "note: the hook failed ({e}); the report may miss leaks"
        );
    }
    out
}

fn leak(out: &mut String, l: &Leak, i: usize, n: usize) {
    let rate = match (l.bytes_per_step, l.nodes_per_step) {
        (0, n) => format!("+{n} autograd nodes per step (their saved tensors were freed)"),
        (b, 0) => format!("+{} per step", Bytes(b)),
        (b, n) => format!("+{} and {n} autograd nodes per step", Bytes(b)),
    };
    let _ = writeln!(
        out,
        "leak {i} of {n}: {rate} ({} from earlier steps alive after {} steps)",
        Bytes(l.held_bytes),
        l.steps
    );
    match &l.holder {
        Some(h) => {
            let place = match h.scope.as_str() {
                "global" => format!("a global of {}", h.function),
                _ => format!("named in {}", h.function),
            };
            let via = if h.via == "graph" {
                format!(
                    ", through the autograd graph of what it holds ({} nodes)",
                    h.graph_nodes
                )
            } else {
                String::new()
            };
            let _ = writeln!(out, "  holder:  `{}` ({place}){via}", h.text);
            match &h.store {
                Some(s) => {
                    let _ = writeln!(out, "  stored:  {}:{}: {}", s.file, s.line, s.code);
                }
                None if h.grad_graph => {
                    let _ = writeln!(
                        out,
                        "  stored:  by backward() into each parameter's .grad, at {}:{}",
                        l.file, l.line
                    );
                }
                None => {
                    let _ = writeln!(out, "  stored:  no line storing into it was found");
                }
            }
        }
        None => {
            let _ = writeln!(
                out,
                "  holder:  not found from the program's names (a C++ object, a thread or an unnamed object keeps it)"
            );
        }
    }
    for s in l.sites.iter().take(3) {
        let _ = writeln!(
            out,
            "  created: {}:{} ({}) +{} per step",
            s.file,
            s.line,
            s.function,
            Bytes(s.bytes_per_step)
        );
    }
    if l.sites.len() > 3 {
        let _ = writeln!(out, "  created: … {} more site(s)", l.sites.len() - 3);
    }
    let _ = writeln!(out, "  kind:    {} — {}", l.kind.name(), l.kind.what());
    let _ = writeln!(out, "  fix:     {}", l.fix.text);
    if let Some(code) = &l.fix.code {
        let _ = writeln!(out, "           {}:{}: {code}", l.file, l.line);
    }
    if let Some(rule) = l.lint {
        let _ = writeln!(out, "  lint:    {rule} (`oomkit lint --explain {rule}`)");
    }
}

/// The JSON document.
pub fn json(r: &Report, command: &str) -> Value {
    json!({
        "version": SCHEMA_VERSION,
        "command": command,
        "steps": r.steps,
        "clock": r.clock,
        "completed": r.completed,
        "leaks": r.leaks,
        "plateaus": r.plateaus,
        "sites_seen": r.sites_seen,
        "hook_errors": r.hook_errors,
        "framework": r.framework,
        "grain": r.grain,
        "versions": r.versions.as_ref().map(|(p, t)| {
            if r.framework == "tensorflow" {
                json!({"python": p, "tensorflow": t})
            } else {
                json!({"python": p, "torch": t})
            }
        }),
    })
}
