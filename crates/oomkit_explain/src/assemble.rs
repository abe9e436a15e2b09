//! Turns a region's signals into findings: chains merged, context attached,
//! app/phase/GPU read from the surrounding log, duplicates folded.

use oomkit_core::gpus;

use crate::detect::{Fields, Signal, Status};
use crate::event::{Framework, GpuGuess};
use crate::normalize::Doc;

/// An error before diagnosis: the merged signals of one message.
#[derive(Debug, Clone)]
pub struct Finding {
    pub sig: Signal,
    /// Signal kinds merged into this finding.
    pub kinds: Vec<&'static str>,
    /// 1-based input line of the first signal.
    pub line: u64,
    /// 1-based input line of the latest signal or copy folded in.
    pub last_line: u64,
    pub last_idx: usize,
    pub ranks: Vec<u32>,
    pub repeats: u32,
    pub app: Option<&'static str>,
    pub phase: Option<&'static str>,
    pub gpu: Option<GpuGuess>,
    pub follows_line: Option<u64>,
    /// Lines of the readings (nvidia-smi, PyTorch counters) joined to it.
    pub reading_lines: Vec<u64>,
}

/// How many lines may separate two signals of one chain. TensorFlow prints
/// the BFC log, a dump of thousands of lines, then the Python exception.
fn chain_gap(chain: &str) -> usize {
    match chain {
        "tf" | "xla" => 6000,
        _ => 16,
    }
}

fn compatible(a: &Signal, b: &Signal) -> bool {
    if let (Some(x), Some(y)) = (a.fields.device, b.fields.device)
        && x != y
    {
        return false;
    }
    if let (Some(x), Some(y)) = (a.fields.requested, b.fields.requested)
        && x != y
        && a.rank == b.rank
    {
        return false;
    }
    !matches!(
        (a.status, b.status),
        (Status::NotOom(_), Status::Oom) | (Status::Oom, Status::NotOom(_))
    )
}

fn merge_opt<T: Clone>(old: &mut Option<T>, new: &Option<T>, new_wins: bool) {
    if new.is_some() && (old.is_none() || new_wins) {
        old.clone_from(new);
    }
}

fn merge(into: &mut Finding, s: Signal) {
    let wins = s.rank > into.sig.rank;
    let (a, b): (&mut Fields, &Fields) = (&mut into.sig.fields, &s.fields);
    merge_opt(&mut a.device, &b.device, wins);
    merge_opt(&mut a.requested, &b.requested, wins);
    merge_opt(&mut a.total, &b.total, wins);
    merge_opt(&mut a.free, &b.free, wins);
    merge_opt(&mut a.allocated, &b.allocated, wins);
    merge_opt(&mut a.reserved, &b.reserved, wins);
    merge_opt(&mut a.unallocated, &b.unallocated, wins);
    merge_opt(&mut a.limit, &b.limit, wins);
    merge_opt(&mut a.private_pool, &b.private_pool, wins);
    merge_opt(&mut a.others, &b.others, wins);
    merge_opt(&mut a.tensor, &b.tensor, wins);
    merge_opt(&mut a.op, &b.op, wins);
    if a.processes.is_empty() {
        a.processes.clone_from(&b.processes);
    }
    for d in &b.details {
        if !a.details.iter().any(|x| x.0 == d.0) {
            a.details.push(d.clone());
        }
    }
    if s.implied.is_some() && (into.sig.implied.is_none() || wins) {
        into.sig.implied.clone_from(&s.implied);
    }
    if matches!(into.sig.status, Status::Undetermined(_)) && s.status == Status::Oom {
        into.sig.status = Status::Oom;
    }
    if wins {
        into.sig.framework = s.framework;
        into.sig.format = s.format;
        into.sig.kind = s.kind;
        into.sig.message.clone_from(&s.message);
        into.sig.rank = s.rank;
        if s.version_hint.is_some() {
            into.sig.version_hint = s.version_hint;
        }
        if s.backend.is_some() {
            into.sig.backend = s.backend;
        }
    } else {
        if into.sig.version_hint.is_none() {
            into.sig.version_hint = s.version_hint;
        }
        if into.sig.backend.is_none() {
            into.sig.backend = s.backend;
        }
    }
    into.kinds.push(s.kind);
    into.last_idx = into.last_idx.max(s.line_idx);
}

/// Builds the findings of one region.
pub fn findings(doc: &Doc, signals: Vec<Signal>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let mut context: Vec<Signal> = Vec::new();
    for s in signals {
        if s.context_only {
            context.push(s);
            continue;
        }
        if let Some(cur) = out.last_mut() {
            // An undetermined message that names its phrase twice ("unhandled cuda
            // error … ncclUnhandledCudaError") is one message.
            let restated = cur.sig.kind == s.kind
                && matches!(s.status, Status::Undetermined(_))
                && s.line_idx <= cur.last_idx + 2;
            let s_line = doc.lines.get(s.line_idx).map_or(0, |l| l.line);
            if restated {
                cur.last_idx = cur.last_idx.max(s.line_idx);
                cur.last_line = cur.last_line.max(s_line);
                continue;
            }
            if cur.sig.chain == s.chain
                && !cur.kinds.contains(&s.kind)
                && s.line_idx <= cur.last_idx + chain_gap(s.chain)
                && compatible(&cur.sig, &s)
            {
                cur.last_line = cur.last_line.max(s_line);
                merge(cur, s);
                continue;
            }
        }
        let line = doc.lines.get(s.line_idx).map_or(0, |l| l.line);
        let rank = doc.lines.get(s.line_idx).and_then(|l| l.rank);
        out.push(Finding {
            kinds: vec![s.kind],
            line,
            last_line: line,
            last_idx: s.line_idx,
            ranks: rank.into_iter().collect(),
            repeats: 1,
            app: None,
            phase: None,
            gpu: None,
            follows_line: None,
            reading_lines: Vec::new(),
            sig: s,
        });
    }
    // Context (ComfyUI's tip, A1111's memory line) joins the nearest OOM.
    for c in context {
        let nearest = out
            .iter_mut()
            .filter(|f| f.sig.status == Status::Oom)
            .min_by_key(|f| f.last_idx.abs_diff(c.line_idx));
        match nearest {
            Some(f) => {
                f.app = Some(match c.framework {
                    Framework::A1111 => "a1111",
                    _ => "comfyui",
                });
                for d in c.fields.details {
                    f.sig.fields.details.push(d);
                }
            }
            None if c.framework == Framework::Comfyui => {
                let line = doc.lines.get(c.line_idx).map_or(0, |l| l.line);
                let mut sig = c;
                sig.context_only = false;
                out.push(Finding {
                    kinds: vec![sig.kind],
                    line,
                    last_line: line,
                    last_idx: sig.line_idx,
                    ranks: Vec::new(),
                    repeats: 1,
                    app: Some("comfyui"),
                    phase: Some("inference"),
                    gpu: None,
                    follows_line: None,
                    reading_lines: Vec::new(),
                    sig,
                });
            }
            None => {}
        }
    }
    out.sort_by_key(|f| f.line);
    let region = doc.spaced.as_str();
    let gpu_in_log = gpu_named_in(doc);
    // Hints are read once per region (they describe the whole traceback).
    let app = app_hint(region);
    let phase = phase_hint(region);
    for f in &mut out {
        if f.app.is_none() && f.sig.framework == Framework::Pytorch {
            f.app = app;
        }
        f.phase = f.phase.or(match f.sig.framework {
            Framework::Vllm | Framework::Tgi => Some("serving"),
            Framework::LlamaCpp => Some("inference"),
            _ => phase,
        });
        f.gpu = gpu_in_log.clone().or_else(|| gpu_from_total(&f.sig));
    }
    out
}

fn app_hint(region: &str) -> Option<&'static str> {
    const HINTS: &[(&[&str], &str)] = &[
        (
            &[
                "ComfyUI",
                "comfy/",
                "comfy\\",
                "comfy_extras",
                "Error occurred when executing",
            ],
            "comfyui",
        ),
        (
            &[
                "stable-diffusion-webui",
                "modules/processing.py",
                "modules\\processing.py",
                "webui",
                "COMMANDLINE_ARGS",
            ],
            "a1111",
        ),
        (&["diffusers"], "diffusers"),
        (&["vllm/", "vllm\\", "EngineCore", "VllmWorker"], "vllm"),
        (&["deepspeed"], "deepspeed"),
        (
            &[
                "transformers/trainer.py",
                "transformers\\trainer.py",
                "trainer.train(",
            ],
            "transformers-trainer",
        ),
        (&["accelerate/", "accelerate\\"], "accelerate"),
        (&["lightning"], "lightning"),
        (
            &["transformers/", "transformers\\", "from_pretrained"],
            "transformers",
        ),
    ];
    HINTS
        .iter()
        .find(|(needles, _)| needles.iter().any(|n| region.contains(n)))
        .map(|(_, app)| *app)
}

fn phase_hint(region: &str) -> Option<&'static str> {
    const HINTS: &[(&[&str], &str)] = &[
        (
            &[
                ".backward(",
                "backward()",
                "torch/autograd",
                "optimizer.step",
                "training_step",
                "train_step",
                "trainer.py",
                "train_function",
                "fit(",
            ],
            "training",
        ),
        (
            &[
                "from_pretrained",
                "load_state_dict",
                "modeling_utils.py",
                "load_checkpoint",
                "torch.load(",
                "llama_model_load",
            ],
            "loading",
        ),
        (
            &[
                "generate(",
                "generation/utils.py",
                "inference_mode",
                "no_grad",
                "pipeline_",
                "__call__",
                "predict",
                "sample(",
                "decode(",
            ],
            "inference",
        ),
    ];
    HINTS
        .iter()
        .find(|(needles, _)| needles.iter().any(|n| region.contains(n)))
        .map(|(_, p)| *p)
}

fn gpu_named_in(doc: &Doc) -> Option<GpuGuess> {
    doc.lines
        .iter()
        .filter(|l| {
            let t = &l.text;
            t.contains("NVIDIA")
                || t.contains("GeForce")
                || t.contains("Tesla")
                || t.contains("Radeon")
                || t.contains("Instinct")
                || t.contains("name:")
        })
        .find_map(|l| gpus::find_in_text(&l.text))
        .map(|g| GpuGuess {
            id: g.id,
            name: g.short_name,
            from: "log",
        })
}

fn gpu_from_total(sig: &Signal) -> Option<GpuGuess> {
    if sig.backend == Some(crate::event::Backend::Mps) {
        return None;
    }
    let total = sig.fields.total?;
    let found = gpus::by_visible_total(total);
    match found.as_slice() {
        [g] => Some(GpuGuess {
            id: g.id,
            name: g.short_name,
            from: "total",
        }),
        _ => None,
    }
}

/// Whether two findings are the same error printed twice (every rank, a
/// retry, a logger and the exception, a truncated copy): same format and
/// status, and no stated number that differs.
fn same_error(a: &Finding, b: &Finding) -> bool {
    fn agree<T: PartialEq>(x: &Option<T>, y: &Option<T>) -> bool {
        match (x, y) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
    }
    let (x, y) = (&a.sig.fields, &b.sig.fields);
    a.sig.format == b.sig.format
        && a.sig.status == b.sig.status
        && a.sig.framework == b.sig.framework
        && a.sig.backend == b.sig.backend
        && agree(&x.device, &y.device)
        && agree(&x.requested, &y.requested)
        && agree(&x.total, &y.total)
        && agree(&x.free, &y.free)
        && agree(&x.allocated, &y.allocated)
        && agree(&x.reserved, &y.reserved)
        && agree(&x.tensor, &y.tensor)
        && (x.processes.is_empty() || y.processes.is_empty() || x.processes == y.processes)
}

/// How many recent distinct errors a near copy is compared with.
const NEAR_WINDOW: usize = 64;

/// A copy folds into an earlier error only when it starts at most this many
/// lines after that error's latest copy: every rank's traceback of one crash,
/// or a retry loop that hits the same OOM step after step, is one event; the
/// same OOM again an hour (a million lines) later is a new event.
pub const FOLD_WINDOW: u64 = 5000;

/// Folds repeated findings (every rank, every retry) into one with a count,
/// and marks look-alikes that follow an OOM as its fallout.
pub fn fold(all: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    // Exact copies are found by key in O(1); near copies (a truncated paste, a
    // copy without the device) only among the last few distinct errors, which
    // keeps folding linear on logs with thousands of different OOMs.
    let mut exact: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for f in all {
        let key = format!(
            "{}|{:?}|{:?}|{:?}",
            f.sig.format, f.sig.status, f.sig.framework, f.sig.fields
        );
        let near = |i: &usize| {
            out.get(*i)
                .is_some_and(|e| f.line.saturating_sub(e.last_line) <= FOLD_WINDOW)
        };
        let found = exact.get(&key).copied().filter(near).or_else(|| {
            let from = out.len().saturating_sub(NEAR_WINDOW);
            (from..out.len())
                .rev()
                .filter(near)
                .find(|&i| out.get(i).is_some_and(|o| same_error(o, &f)))
        });
        if let Some(e) = found.and_then(|i| out.get_mut(i)) {
            e.last_line = e.last_line.max(f.last_line);
            e.repeats = e.repeats.saturating_add(f.repeats);
            for r in f.ranks {
                if !e.ranks.contains(&r) {
                    e.ranks.push(r);
                }
            }
            // A fuller copy fills what a truncated one missed.
            let (a, b) = (&mut e.sig.fields, f.sig.fields);
            a.device = a.device.or(b.device);
            a.requested = a.requested.or(b.requested);
            a.total = a.total.or(b.total);
            a.free = a.free.or(b.free);
            a.allocated = a.allocated.or(b.allocated);
            a.reserved = a.reserved.or(b.reserved);
            a.unallocated = a.unallocated.or(b.unallocated);
            a.limit = a.limit.or(b.limit);
            a.op = a.op.take().or(b.op);
            a.tensor = a.tensor.take().or(b.tensor);
            if a.processes.is_empty() {
                a.processes = b.processes;
            }
            continue;
        }
        if out.len() >= crate::MAX_EVENTS {
            // Bounded: further distinct errors count on the last one.
            if let Some(last) = out.last_mut() {
                last.repeats = last.repeats.saturating_add(f.repeats);
            }
            continue;
        }
        exact.insert(key, out.len());
        out.push(f);
    }
    let mut last_oom: Option<u64> = None;
    for f in &mut out {
        match f.sig.status {
            Status::Oom => last_oom = Some(f.line),
            Status::NotOom(_) if f.kinds.contains(&"illegal-memory-access") => {
                f.follows_line = last_oom
            }
            _ => {}
        }
        f.ranks.sort_unstable();
    }
    out
}
