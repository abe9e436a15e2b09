//! Growth + holders → leaks: each growing creation site (and each holder
//! whose autograd graph grows) is classified ([`crate::classify`]); sites
//! kept by the same holder are one leak; its [`Kind`] follows from what the
//! hook saw of the held tensors, and its fix is written on the store line.

use std::collections::BTreeMap;

use oomkit_core::remedies::RemedyId;
use serde::Serialize;

use crate::classify::{Trend, classify, classify_replaced};
use crate::trace::{Candidate, Holder, Site, Trace};

/// What kind of leak: what is kept, which decides the fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A held tensor keeps its autograd graph alive (it has a `grad_fn`, or
    /// only the graph's saved tensors or nodes survive).
    Graph,
    /// Tensors kept without a graph.
    Tensors,
    /// Graphs built with `create_graph=True` (double backward) that pile up.
    CreateGraph,
    /// Parameters or optimizer state growing (modules or parameter groups
    /// added each step).
    Params,
    /// CPU-side tensors or batches growing (`.cpu()` copies, DataLoader
    /// batches kept).
    Host,
}

impl Kind {
    /// The name used in text and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Graph => "graph",
            Kind::Tensors => "tensors",
            Kind::CreateGraph => "create_graph",
            Kind::Params => "params",
            Kind::Host => "host",
        }
    }

    /// One line: what is kept.
    pub fn what(self) -> &'static str {
        match self {
            Kind::Graph => "a kept tensor keeps its autograd graph (nodes and saved tensors) alive",
            Kind::Tensors => "tensors are kept from step to step (no graph)",
            Kind::CreateGraph => {
                "graphs built with create_graph=True are kept and pile up step after step"
            }
            Kind::Params => "parameters or optimizer state are added every step",
            Kind::Host => "CPU-side tensors or whole batches are kept from step to step",
        }
    }

    /// The fix catalogue's entry, when one applies.
    pub fn remedy(self) -> Option<RemedyId> {
        match self {
            Kind::Graph | Kind::Tensors | Kind::CreateGraph => Some(RemedyId::ReleaseReferences),
            Kind::Params | Kind::Host => None,
        }
    }
}

/// A creation site that grew, with its own rate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GrowingSite {
    /// File.
    pub file: String,
    /// Line.
    pub line: u64,
    /// Function.
    pub function: String,
    /// Bytes per step it adds.
    pub bytes_per_step: u64,
}

/// The fix: a sentence, and the line rewritten when it can be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fix {
    /// What to do.
    pub text: String,
    /// The store line rewritten.
    pub code: Option<String>,
}

/// One leak.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Leak {
    /// The holder's store line, else the largest creation site.
    pub file: String,
    /// Its line.
    pub line: u64,
    /// What is kept.
    pub kind: Kind,
    /// Bytes added per step (sum over its sites).
    pub bytes_per_step: u64,
    /// Autograd nodes added per step (0 when the holder's graph did not grow
    /// or none was reached).
    pub nodes_per_step: u64,
    /// Step boundaries observed.
    pub steps: u64,
    /// Bytes from earlier steps still alive at the last boundary.
    pub held_bytes: u64,
    /// Who keeps it.
    pub holder: Option<Holder>,
    /// Where its tensors were made, largest first.
    pub sites: Vec<GrowingSite>,
    /// The fix.
    pub fix: Fix,
    /// The `oomkit lint` rule for this pattern, when one exists.
    pub lint: Option<&'static str>,
    /// The fix catalogue's entry.
    pub remedy: Option<RemedyId>,
}

/// Everything `oomkit leaks` reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Step boundaries observed.
    pub steps: u64,
    /// What counted them (`optimizer`, `dataloader`, `marker`).
    pub clock: Option<String>,
    /// Leaks, largest first.
    pub leaks: Vec<Leak>,
    /// Sites whose memory rose and stopped (warm-up, bounded windows).
    pub plateaus: u64,
    /// Creation sites seen.
    pub sites_seen: u64,
    /// The hook's own failures.
    pub hook_errors: Vec<String>,
    /// `(python, torch)` versions (`(python, tensorflow)` for TensorFlow).
    pub versions: Option<(String, String)>,
    /// `pytorch`, or `tensorflow` for the coarse TensorFlow/Keras grain.
    pub framework: String,
    /// `sites` (PyTorch: bytes per creation site) or `holders` (TensorFlow:
    /// bytes per named holder at each step, no creation sites).
    pub grain: String,
    /// The hook ended the program after the requested steps.
    pub completed: bool,
}

/// Joins a trace into leaks.
pub fn analyse(trace: &Trace) -> Report {
    let steps = u64::try_from(trace.boundaries.len()).unwrap_or(u64::MAX);
    let mut report = Report {
        steps,
        clock: trace.source().map(str::to_owned),
        sites_seen: u64::try_from(trace.sites.len()).unwrap_or(u64::MAX),
        hook_errors: trace.errors.clone(),
        versions: trace.versions.clone(),
        framework: trace
            .framework
            .clone()
            .unwrap_or_else(|| "pytorch".to_owned()),
        grain: if trace.framework.is_some() {
            "holders".to_owned()
        } else {
            "sites".to_owned()
        },
        completed: trace.ended_after.is_some(),
        ..Report::default()
    };
    let cuda = trace.boundaries.iter().any(|b| b.cuda_allocated.is_some());
    // The first boundary has no earlier step by construction: it starts the
    // series at zero and would make everything made before it look like a
    // rise that stopped.
    let boundaries: Vec<&crate::trace::Boundary> =
        trace.boundaries.iter().filter(|b| b.index > 1).collect();
    // Bytes per site.
    let mut ids: Vec<u64> = boundaries
        .iter()
        .flat_map(|b| b.alive.keys().chain(b.young.keys()).copied())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let candidates: BTreeMap<u64, &Candidate> =
        trace.candidates.iter().map(|c| (c.candidate, c)).collect();
    // Groups by holder key (or by site when no holder is known).
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for id in ids {
        let series: Vec<u64> = boundaries
            .iter()
            .map(|b| b.alive.get(&id).copied().unwrap_or(0))
            .collect();
        let young: Vec<u64> = boundaries
            .iter()
            .map(|b| b.young.get(&id).copied().unwrap_or(0))
            .collect();
        let (trend, series) = match classify(&series) {
            // Nothing outlives a step, but what each step makes keeps growing.
            Trend::Flat => (classify_replaced(&young), young),
            t => (t, series),
        };
        match trend {
            Trend::Growing { per_step } => {
                let cand = candidates.get(&id).copied();
                let holder = cand.and_then(|c| c.holder.as_ref());
                let key = holder
                    .map(|h| h.key.clone())
                    .filter(|k| !k.is_empty())
                    .unwrap_or_else(|| format!("site {id}"));
                let g = groups.entry(key).or_default();
                if g.holder.is_none() {
                    g.holder = holder.cloned();
                }
                g.bytes_per_step = g.bytes_per_step.saturating_add(per_step);
                g.held_bytes = g
                    .held_bytes
                    .saturating_add(series.last().copied().unwrap_or(0));
                let site = trace.sites.get(&id).cloned().unwrap_or_default();
                g.sites
                    .push((site, per_step, cand.is_some_and(|c| c.create_graph)));
                if let Some(c) = cand {
                    g.create_graph |= c.create_graph;
                    g.loader |= c.loader;
                    g.cpu_only &= !c.devices.is_empty() && c.devices.iter().all(|d| d == "cpu");
                }
            }
            Trend::Plateau => report.plateaus = report.plateaus.saturating_add(1),
            Trend::Flat => {}
        }
    }
    // Autograd nodes per named holder.
    let mut keys: Vec<&String> = boundaries.iter().flat_map(|b| b.graphs.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        let series: Vec<u64> = boundaries
            .iter()
            .map(|b| b.graphs.get(key).copied().unwrap_or(0))
            .collect();
        if let Trend::Growing { per_step } = classify(&series) {
            let g = groups.entry(key.clone()).or_default();
            g.nodes_per_step = per_step;
            g.graph_grew = true;
            if g.holder.is_none() {
                g.holder = trace
                    .graph_holders
                    .get(key)
                    .cloned()
                    .or_else(|| holder_from_key(key));
            }
        }
    }
    report.leaks = merge(
        groups
            .into_values()
            .map(|g| g.into_leak(steps, cuda))
            .collect(),
    );
    if trace.framework.is_some() {
        for l in &mut report.leaks {
            coarse(l);
        }
    }
    report.leaks.sort_by(|a, b| {
        (b.bytes_per_step, b.nodes_per_step).cmp(&(a.bytes_per_step, a.nodes_per_step))
    });
    report
}

/// One leak per place: leaks of one kind at the same line (each parameter's
/// `.grad` of one model, several fields of one record) and parameter leaks
/// held through the same object (an optimizer's `param_groups` and `state`)
/// are one.
fn merge(leaks: Vec<Leak>) -> Vec<Leak> {
    let root = |l: &Leak| {
        l.holder.as_ref().map(|h| {
            let end = h.text.find(['.', '[']).unwrap_or(h.text.len());
            (
                h.text.get(..end).unwrap_or("").to_owned(),
                h.function.clone(),
            )
        })
    };
    let mut out: Vec<Leak> = Vec::new();
    // Sites whose holder was not found, in a run where others' was: most
    // often tensors the found holder's graph keeps through C++ objects the
    // walk cannot name; listed under it rather than as a leak of their own.
    let (held, unheld): (Vec<Leak>, Vec<Leak>) =
        leaks.into_iter().partition(|l| l.holder.is_some());
    let leaks = if held.is_empty() {
        unheld
    } else {
        let mut held = held;
        if let Some(top) = held.iter_mut().max_by_key(|l| l.bytes_per_step) {
            for l in unheld {
                top.bytes_per_step = top.bytes_per_step.saturating_add(l.bytes_per_step);
                top.held_bytes = top.held_bytes.saturating_add(l.held_bytes);
                top.sites.extend(l.sites);
            }
        }
        held
    };
    for l in leaks {
        let same = out.iter_mut().find(|o| {
            o.kind == l.kind
                && ((o.file == l.file && o.line == l.line)
                    || (l.kind == Kind::Params && root(o).is_some() && root(o) == root(&l)))
        });
        match same {
            Some(o) => {
                if let (Some(h), Some((r, _)), Some(other)) =
                    (o.holder.as_mut(), root(&l), l.holder.as_ref())
                    && h.text != other.text
                    && l.kind == Kind::Params
                {
                    // `model.adapter_1`, `model.adapter_2`, …: the object they are added to.
                    h.text = r;
                }
                if o.holder.as_ref().and_then(|h| h.store.as_ref()).is_none()
                    && l.holder.as_ref().and_then(|h| h.store.as_ref()).is_some()
                {
                    o.file.clone_from(&l.file);
                    o.line = l.line;
                    o.holder.clone_from(&l.holder);
                    o.fix = l.fix.clone();
                    o.lint = l.lint;
                }
                o.bytes_per_step = o.bytes_per_step.saturating_add(l.bytes_per_step);
                o.nodes_per_step = o.nodes_per_step.saturating_add(l.nodes_per_step);
                o.held_bytes = o.held_bytes.saturating_add(l.held_bytes);
                for s in l.sites {
                    if !o.sites.iter().any(|x| x.file == s.file && x.line == s.line) {
                        o.sites.push(s);
                    }
                }
                o.sites.sort_by_key(|s| std::cmp::Reverse(s.bytes_per_step));
            }
            None => out.push(l),
        }
    }
    out
}

#[derive(Debug)]
struct Group {
    holder: Option<Holder>,
    bytes_per_step: u64,
    nodes_per_step: u64,
    held_bytes: u64,
    /// Site, bytes per step, made under create_graph=True.
    sites: Vec<(Site, u64, bool)>,
    create_graph: bool,
    loader: bool,
    cpu_only: bool,
    graph_grew: bool,
}

impl Default for Group {
    fn default() -> Self {
        Group {
            holder: None,
            bytes_per_step: 0,
            nodes_per_step: 0,
            held_bytes: 0,
            sites: Vec::new(),
            create_graph: false,
            loader: false,
            cpu_only: true,
            graph_grew: false,
        }
    }
}

impl Group {
    fn into_leak(mut self, steps: u64, cuda: bool) -> Leak {
        self.sites.sort_by_key(|s| std::cmp::Reverse(s.1));
        let kind = kind_of(&self, cuda);
        let store = self.holder.as_ref().and_then(|h| h.store.clone());
        // Without a store line: the call that built the kept graph
        // (create_graph=True), else the largest creation site.
        let flagged = self
            .sites
            .iter()
            .find(|s| s.2 && kind == Kind::CreateGraph)
            .or(self.sites.first());
        let (file, line) = match (&store, flagged) {
            (Some(s), _) => (s.file.clone(), s.line),
            (None, Some((site, _, _))) => (site.file.clone(), site.line),
            (None, None) => (
                self.holder
                    .as_ref()
                    .map(|h| h.file.clone())
                    .unwrap_or_default(),
                0,
            ),
        };
        let scalar = self.holder.as_ref().is_some_and(|h| h.numel == 1);
        let mut fix = fix(kind, store.as_ref().map(|s| s.code.as_str()), scalar, cuda);
        if self.holder.as_ref().is_some_and(|h| h.grad_graph) {
            // PyTorch's own warning for backward(create_graph=True) (engine.cpp):
            // a reference cycle between each parameter and its gradient.
            fix.text = "call backward() without create_graph=True (torch.autograd.grad for the higher-order part), or set every .grad to None after use: PyTorch warns that backward(create_graph=True) makes a cycle between each parameter and its gradient".to_owned();
        }
        let lint = lint_rule(
            kind,
            store.as_ref().map(|s| s.code.as_str()),
            self.holder.as_ref(),
        );
        Leak {
            file,
            line,
            kind,
            bytes_per_step: self.bytes_per_step,
            nodes_per_step: self.nodes_per_step,
            steps,
            held_bytes: self.held_bytes,
            holder: self.holder,
            sites: self
                .sites
                .into_iter()
                .map(|(s, b, _)| GrowingSite {
                    file: s.file,
                    line: s.line,
                    function: s.function,
                    bytes_per_step: b,
                })
                .collect(),
            fix,
            lint,
            remedy: kind.remedy(),
        }
    }
}

/// The kind, from the most specific evidence down.
fn kind_of(g: &Group, cuda: bool) -> Kind {
    let h = g.holder.as_ref();
    if g.create_graph {
        return Kind::CreateGraph;
    }
    if h.is_some_and(|h| h.grad_graph) {
        // A `.grad` with a graph: backward(create_graph=True) accumulated it.
        return Kind::CreateGraph;
    }
    if h.is_some_and(|h| h.param || h.optimizer) {
        return Kind::Params;
    }
    if g.graph_grew || h.is_some_and(|h| h.via == "graph" || h.grad_fn) {
        return Kind::Graph;
    }
    if h.is_some_and(|h| h.host) {
        return Kind::Host;
    }
    let to_host = h
        .and_then(|h| h.store.as_ref())
        .is_some_and(|s| moves_to_host(&s.code));
    if g.loader || to_host || (cuda && g.cpu_only) {
        return Kind::Host;
    }
    Kind::Tensors
}

fn moves_to_host(code: &str) -> bool {
    [
        ".cpu()",
        ".numpy()",
        ".tolist()",
        "to(\"cpu\")",
        "to('cpu')",
        "device=\"cpu\"",
        "device='cpu'",
    ]
    .iter()
    .any(|p| code.contains(p))
}

/// TensorFlow's coarse grain: each "site" is the holder itself (no creation
/// site is known), the PyTorch lint rules do not apply, and the fix is
/// TensorFlow's.
fn coarse(l: &mut Leak) {
    l.sites.clear();
    l.lint = None;
    let scalar = l.holder.as_ref().is_some_and(|h| h.numel == 1);
    let store = l.holder.as_ref().and_then(|h| h.store.as_ref());
    let text = match l.kind {
        Kind::Params => {
            "build or load models and variables once, before the loop (and reuse them), or drop each one after use"
        }
        Kind::Host => {
            "reduce each step's arrays to what you need (a running sum, metrics as numbers) or keep a bounded `collections.deque(maxlen=k)`"
        }
        _ if scalar => "store a Python number (`float(x)`) instead of the tensor",
        _ => {
            "keep only what you need (a running sum, a metric, a bounded `collections.deque(maxlen=k)`) instead of every step's tensors"
        }
    };
    let code = match l.kind {
        Kind::Tensors | Kind::Graph if scalar => store.and_then(|s| {
            rewrite(&s.code, &|e: &str| {
                let e = e.trim();
                (!e.is_empty()).then(|| format!("float({e})"))
            })
        }),
        _ => None,
    };
    l.fix = Fix {
        text: text.to_owned(),
        code,
    };
}

/// A holder known only by its census key `scope|file|function|text`.
fn holder_from_key(key: &str) -> Option<Holder> {
    let mut parts = key.splitn(4, '|');
    let scope = parts.next()?.to_owned();
    let file = parts.next()?.to_owned();
    let function = parts.next()?.to_owned();
    let text = parts.next()?.to_owned();
    Some(Holder {
        text,
        scope,
        file,
        function,
        key: key.to_owned(),
        via: "graph".to_owned(),
        grad_fn: true,
        ..Holder::default()
    })
}

/// The `oomkit lint` rule that matches the pattern at the store line.
fn lint_rule(kind: Kind, store: Option<&str>, holder: Option<&Holder>) -> Option<&'static str> {
    let code = store.unwrap_or("");
    let appends = [".append(", ".extend(", ".insert(", ".appendleft("]
        .iter()
        .any(|p| code.contains(p));
    let accumulates = ["+=", "-=", "*="].iter().any(|p| code.contains(p))
        || holder.is_some_and(|h| reads_itself(code, &h.text));
    let on_module = holder.is_some_and(|h| h.text.starts_with("self."));
    match kind {
        Kind::CreateGraph => Some("OOM108"),
        Kind::Params => Some("OOM115"),
        Kind::Graph if appends => Some("OOM101"),
        Kind::Graph if accumulates => Some("OOM102"),
        Kind::Graph | Kind::Tensors if on_module => Some("OOM110"),
        Kind::Tensors if appends => Some("OOM114"),
        _ => None,
    }
}

/// `x = x + loss`: the assignment reads its own target.
fn reads_itself(code: &str, target: &str) -> bool {
    match code.split_once('=') {
        Some((lhs, rhs)) if !target.is_empty() => {
            lhs.trim() == target && rhs.contains(target) && !rhs.starts_with('=')
        }
        _ => false,
    }
}

/// The fix sentence and, when the store line has a recognisable shape, the
/// line rewritten (the stored value detached, or reduced to a number).
fn fix(kind: Kind, store: Option<&str>, scalar: bool, cuda: bool) -> Fix {
    let wrap = |e: &str| -> Option<String> {
        let e = e.trim();
        if e.is_empty() {
            return None;
        }
        let simple = e
            .chars()
            .all(|c| c.is_alphanumeric() || "_.[]()'\"".contains(c));
        let e = if simple {
            e.to_owned()
        } else {
            format!("({e})")
        };
        match kind {
            Kind::Graph | Kind::CreateGraph if scalar => Some(format!("{e}.item()")),
            Kind::Graph | Kind::CreateGraph => Some(format!("{e}.detach()")),
            Kind::Tensors if scalar => Some(format!("{e}.item()")),
            Kind::Tensors if cuda => Some(format!("{e}.cpu()")),
            _ => None,
        }
    };
    let code = store.and_then(|s| rewrite(s, &wrap));
    let text = match kind {
        Kind::Graph if scalar => {
            "store a Python number (`.item()`): the kept tensor holds its whole autograd graph"
        }
        Kind::Graph => {
            "store a detached tensor (`.detach()`): the kept tensor holds its whole autograd graph"
        }
        Kind::CreateGraph => {
            "keep only detached results (`.detach()`/`.item()`) of what create_graph=True built, and drop the graph before the next step"
        }
        Kind::Tensors if scalar => "store a Python number (`.item()`) instead of the tensor",
        Kind::Tensors => {
            "keep only what you need (a running sum, `.item()`, a bounded `collections.deque(maxlen=k)`), or move it off the GPU (`.cpu()`)"
        }
        Kind::Params => {
            "create modules, parameters and optimizer parameter groups once, before the loop"
        }
        Kind::Host => {
            "reduce each step to what you need (a running sum, metrics as numbers) or keep a bounded `collections.deque(maxlen=k)`"
        }
    };
    Fix {
        text: text.to_owned(),
        code,
    }
}

/// `losses.append(loss)` → `losses.append(W(loss))`; `t += x` → `t += W(x)`;
/// `a[k] = x` / `a = x` → `… = W(x)`.
fn rewrite(code: &str, wrap: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let code = code.trim();
    for m in [
        ".append(",
        ".appendleft(",
        ".extend(",
        ".add(",
        ".put(",
        ".push(",
    ] {
        if let Some(at) = code.rfind(m)
            && code.ends_with(')')
        {
            let open = at.checked_add(m.len())?;
            let inner = code.get(open..code.len().checked_sub(1)?)?;
            let head = code.get(..open)?;
            return Some(format!("{head}{})", wrap(inner)?));
        }
    }
    for op in ["+=", "-=", "*=", "|="] {
        if let Some((lhs, rhs)) = code.split_once(op) {
            return Some(format!("{} {op} {}", lhs.trim_end(), wrap(rhs)?));
        }
    }
    let (lhs, rhs) = code.split_once('=')?;
    if rhs.starts_with('=') || lhs.ends_with(['!', '<', '>']) {
        return None;
    }
    Some(format!("{} = {}", lhs.trim_end(), wrap(rhs)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(lines: &[&str]) -> Trace {
        Trace::parse(&lines.join("\n"))
    }

    fn boundaries(site: u64, per_step: u64, n: u64) -> Vec<String> {
        (1..=n)
            .map(|b| {
                format!(
                    r#"{{"boundary":{b},"source":"optimizer","alive":{{"{site}":{}, "9":4096}}}}"#,
                    per_step * b.saturating_sub(1)
                )
            })
            .collect()
    }

    #[test]
    fn a_list_of_losses_is_a_graph_leak_fixed_with_item_on_its_store_line() {
        let mut lines = vec![
            r#"{"hook":1,"python":"3.11","torch":"2.5"}"#.to_owned(),
            r#"{"site":3,"file":"train.py","line":21,"function":"main"}"#.to_owned(),
            r#"{"site":9,"file":"train.py","line":5,"function":"main"}"#.to_owned(),
        ];
        lines.extend(boundaries(3, 4, 10));
        lines.push(r#"{"candidate":3,"bytes":36,"holder":{"text":"losses","scope":"local","file":"train.py","function":"main","key":"local|train.py|main|losses","via":"held","grad_fn":true,"tensors":9,"numel":1,"store":{"file":"train.py","line":25,"code":"losses.append(loss)"}}}"#.to_owned());
        lines.push(r#"{"end":10,"reason":"steps"}"#.to_owned());
        let r = analyse(&trace(
            &lines.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        assert!(r.completed);
        assert_eq!(r.steps, 10);
        assert_eq!(r.leaks.len(), 1, "the constant site is not a leak");
        let l = &r.leaks[0];
        assert_eq!((l.file.as_str(), l.line), ("train.py", 25));
        assert_eq!(l.kind, Kind::Graph);
        assert_eq!(l.bytes_per_step, 4);
        assert_eq!(l.fix.code.as_deref(), Some("losses.append(loss.item())"));
        assert_eq!(l.lint, Some("OOM101"));
        assert_eq!(l.sites[0].line, 21);
    }

    #[test]
    fn tensorflow_holders_are_coarse_with_tensorflow_fixes_and_no_lint() {
        let run = |holder: &str| {
            let mut lines = vec![
                r#"{"hook":1,"python":"3.11","framework":"tensorflow","grain":"holders","tensorflow":"2.21.0"}"#.to_owned(),
                r#"{"site":3,"file":"fit.py","line":0,"function":"__main__|kept"}"#.to_owned(),
                r#"{"site":9,"file":"fit.py","line":0,"function":"__main__|model"}"#.to_owned(),
            ];
            lines.extend(boundaries(3, 4, 10));
            lines.push(format!(r#"{{"candidate":3,"bytes":36,"holder":{holder}}}"#));
            analyse(&trace(
                &lines.iter().map(String::as_str).collect::<Vec<_>>(),
            ))
        };
        let r = run(
            r#"{"text":"kept","scope":"global","file":"fit.py","function":"__main__","key":"global|fit.py|__main__|kept","via":"held","tensors":9,"numel":1,"store":{"file":"fit.py","line":16,"code":"kept.append(loss)"}}"#,
        );
        assert_eq!(
            (r.framework.as_str(), r.grain.as_str()),
            ("tensorflow", "holders")
        );
        assert_eq!(r.versions, Some(("3.11".into(), "2.21.0".into())));
        let l = &r.leaks[0];
        assert_eq!((l.kind, l.line, l.lint), (Kind::Tensors, 16, None));
        assert!(l.sites.is_empty());
        assert_eq!(l.fix.code.as_deref(), Some("kept.append(float(loss))"));
        let r = run(
            r#"{"text":"preds","key":"k","host":true,"numel":64,"store":{"file":"fit.py","line":20,"code":"preds.append(p)"}}"#,
        );
        assert_eq!(
            (r.leaks[0].kind, r.leaks[0].fix.code.as_deref()),
            (Kind::Host, None)
        );
        let r = run(r#"{"text":"models","key":"k","param":true,"host":true,"numel":256}"#);
        assert_eq!(r.leaks[0].kind, Kind::Params);
        let torch = analyse(&trace(&[r#"{"hook":1,"python":"3.11","torch":"2.5"}"#]));
        assert_eq!(
            (torch.framework.as_str(), torch.grain.as_str()),
            ("pytorch", "sites")
        );
    }

    #[test]
    fn a_graph_that_grows_in_nodes_alone_is_a_leak() {
        let lines: Vec<String> = (1..=10u64)
            .map(|b| format!(
                r#"{{"boundary":{b},"source":"optimizer","alive":{{}},"graphs":{{"local|t.py|Trainer.fit|self.total":{},"local|t.py|Trainer.fit|loss":3}}}}"#,
                8 * b
            ))
            .chain([r#"{"graph_holder":"local|t.py|Trainer.fit|self.total","holder":{"text":"self.total","scope":"local","file":"t.py","function":"Trainer.fit","via":"graph","grad_fn":true,"numel":1,"store":{"file":"t.py","line":19,"code":"self.total = self.total + loss"}}}"#.to_owned()])
            .collect();
        let r = analyse(&trace(
            &lines.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        assert_eq!(r.leaks.len(), 1);
        let l = &r.leaks[0];
        assert_eq!(
            (l.kind, l.nodes_per_step, l.bytes_per_step),
            (Kind::Graph, 8, 0)
        );
        assert_eq!(l.line, 19);
        assert_eq!(
            l.fix.code.as_deref(),
            Some("self.total = (self.total + loss).item()")
        );
        assert_eq!(l.lint, Some("OOM102"));
    }

    #[test]
    fn a_tensor_replaced_by_a_bigger_one_is_found_from_what_each_step_made() {
        // `self.per_sample = torch.cat([self.per_sample, …])`: nothing made in
        // an earlier step survives; what each step made grows.
        let mut lines =
            vec![r#"{"site":7,"file":"s.py","line":14,"function":"Stats.update"}"#.to_owned()];
        lines.extend((1..=10u64).map(|b| {
            format!(
                r#"{{"boundary":{b},"source":"optimizer","alive":{{"0":100}},"young":{{"7":{},"2":512}}}}"#,
                65536 * b
            )
        }));
        lines.push(r#"{"candidate":7,"bytes":655360,"holder":{"text":"stats.per_sample","key":"local|s.py|<module>|stats.per_sample","via":"held","numel":10240,"store":{"file":"s.py","line":14,"code":"self.per_sample = torch.cat([self.per_sample, new])"}}}"#.to_owned());
        let r = analyse(&trace(
            &lines.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        assert_eq!(r.leaks.len(), 1, "{r:?}");
        let l = &r.leaks[0];
        assert_eq!(
            (l.kind, l.line, l.bytes_per_step),
            (Kind::Tensors, 14, 65536)
        );
        assert_eq!(l.held_bytes, 655360);
    }

    #[test]
    fn kinds_follow_the_evidence() {
        let g = |f: &dyn Fn(&mut Group)| {
            let mut g = Group {
                holder: Some(Holder::default()),
                ..Group::default()
            };
            f(&mut g);
            kind_of(&g, false)
        };
        assert_eq!(g(&|g| g.create_graph = true), Kind::CreateGraph);
        assert_eq!(
            g(&|g| g.holder.as_mut().unwrap().optimizer = true),
            Kind::Params
        );
        assert_eq!(
            g(&|g| g.holder.as_mut().unwrap().param = true),
            Kind::Params
        );
        assert_eq!(
            g(&|g| g.holder.as_mut().unwrap().via = "graph".into()),
            Kind::Graph
        );
        assert_eq!(g(&|g| g.loader = true), Kind::Host);
        assert_eq!(
            g(&|g| {
                g.holder.as_mut().unwrap().store = Some(crate::trace::Store {
                    code: "preds.append(out.detach().cpu())".into(),
                    ..Default::default()
                })
            }),
            Kind::Host
        );
        assert_eq!(g(&|_| {}), Kind::Tensors);
        let on_gpu = Group {
            cpu_only: true,
            ..Group::default()
        };
        assert_eq!(kind_of(&on_gpu, true), Kind::Host);
    }

    #[test]
    fn rewrites_the_common_store_shapes() {
        let w = |e: &str| Some(format!("W({})", e.trim()));
        assert_eq!(
            rewrite("out.append(x)", &w).as_deref(),
            Some("out.append(W(x))")
        );
        assert_eq!(
            rewrite("total += loss * 2", &w).as_deref(),
            Some("total += W(loss * 2)")
        );
        assert_eq!(
            rewrite("h[step] = y", &w).as_deref(),
            Some("h[step] = W(y)")
        );
        assert_eq!(rewrite("if a == b", &w), None);
        assert_eq!(rewrite("", &w), None);
    }
}
