//! The hook's record: JSON lines in the order the hook wrote them. Every
//! field is optional on reading (a program killed mid-write leaves a cut
//! line, which is skipped and counted); sizes are kept as `u64`.
//!
//! Lines, by their first key:
//! - `{"hook":1,"pid":…,"steps":…,"marker":…,"python":…,"torch":…}` — started;
//!   TensorFlow's coarse grain writes `"framework":"tensorflow","grain":"holders",
//!   "tensorflow":…` instead of `torch`, and each of its sites is a named holder
//!   (`file` the file that names it, `line` 0, `function` `function|holder`);
//! - `{"site":N,"file":…,"line":…,"function":…}` — creation site `N`;
//! - `{"boundary":B,"source":…,"alive":{"N":bytes…},"graphs":{"key":nodes…}}`
//!   — at step boundary `B` (1 after a change of clock: the earlier ones are
//!   then setup), bytes still alive per site that were created before step
//!   `B-1`, and autograd nodes reachable from each named holder;
//! - `{"candidate":N,…,"holder":{…}}` — at the end, who holds the surviving
//!   bytes of site `N`; `{"graph_holder":key,"holder":{…}}` — the same for a
//!   holder whose graph grew;
//! - `{"error":where,"detail":…}` — the hook failed there and turned itself off;
//! - `{"end":B,"reason":"steps"|"exit"}` — it ended the program after `B`
//!   boundaries, or the program ended first.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// Largest record read (the binary stops reading there).
pub const MAX_TRACE_BYTES: u64 = 64 << 20;
/// Most boundaries kept (the hook stops at the requested steps anyway).
pub const MAX_BOUNDARIES: usize = 10_000;
/// Most sites kept (the hook caps its own at 4096).
pub const MAX_SITES: usize = 100_000;

/// A creation site: the first frame in the user's code that made a tensor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Site {
    /// The file (as Python names it).
    #[serde(default)]
    pub file: String,
    /// The line.
    #[serde(default)]
    pub line: u64,
    /// The function's qualified name.
    #[serde(default)]
    pub function: String,
}

/// One step boundary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Boundary {
    /// 1, 2, … since the clock was chosen.
    pub index: u64,
    /// `optimizer`, `dataloader`, `marker` or `keras`.
    pub source: String,
    /// Bytes still alive per site id that were created in earlier steps.
    pub alive: BTreeMap<u64, u64>,
    /// Bytes alive per site id that were created in the step just ended.
    pub young: BTreeMap<u64, u64>,
    /// Autograd nodes reachable from each named holder.
    pub graphs: BTreeMap<String, u64>,
    /// `torch.cuda.memory_allocated()` when CUDA was initialised.
    pub cuda_allocated: Option<u64>,
}

/// The line that stores into a holder.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Store {
    /// File.
    #[serde(default)]
    pub file: String,
    /// Line.
    #[serde(default)]
    pub line: u64,
    /// Its code (comments removed, stripped).
    #[serde(default)]
    pub code: String,
}

/// Who keeps surviving tensors: a named place in the user's code.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct Holder {
    /// `losses`, `self.history`, `stats["loss"]`, `store` (a closure cell).
    pub text: String,
    /// `local` (a frame's variable) or `global` (a module's).
    pub scope: String,
    /// The file of the frame or module that names it.
    pub file: String,
    /// The function (or module) that names it.
    pub function: String,
    /// The census key (`scope|file|function|text`).
    pub key: String,
    /// `held` (the tensors themselves) or `graph` (saved by their autograd graph).
    pub via: String,
    /// Surviving bytes of the site it holds.
    pub bytes: u64,
    /// Autograd nodes reachable from its tensors.
    pub graph_nodes: u64,
    /// Bytes the graph's saved tensors hold.
    pub saved_bytes: u64,
    /// Some tensor has a `grad_fn`.
    pub grad_fn: bool,
    /// Some tensor requires grad.
    pub requires_grad: bool,
    /// Tensors reached.
    pub tensors: u64,
    /// Elements of the largest tensor reached (1: a scalar such as a loss).
    pub numel: u64,
    /// Some tensor is an `nn.Parameter`.
    pub param: bool,
    /// Reached through an optimizer's `state`/`param_groups`.
    pub optimizer: bool,
    /// A parameter's `.grad` carries an autograd graph (accumulated by
    /// `backward(create_graph=True)`).
    pub grad_graph: bool,
    /// Numpy arrays (host memory) reached (TensorFlow's coarse grain).
    pub host: bool,
    /// The store line, when found.
    pub store: Option<Store>,
}

/// What held the surviving bytes of one site at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct Candidate {
    /// The site id.
    pub candidate: u64,
    /// Its surviving bytes from earlier steps.
    pub bytes: u64,
    /// Bytes no named holder reached.
    pub unheld_bytes: u64,
    /// Made inside `backward`/`autograd.grad` with `create_graph=True`.
    pub create_graph: bool,
    /// Made while a DataLoader produced a batch.
    pub loader: bool,
    /// Device types of its storages.
    pub devices: Vec<String>,
    /// The main holder.
    pub holder: Option<Holder>,
}

/// The whole record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// The hook started (`import torch` happened in the main process).
    pub started: bool,
    /// Python and framework (PyTorch or TensorFlow) versions, as the hook saw them.
    pub versions: Option<(String, String)>,
    /// `tensorflow` when the coarse TensorFlow/Keras hook ran (bytes per
    /// named holder, no creation sites); `None` for PyTorch.
    pub framework: Option<String>,
    /// Sites by id.
    pub sites: BTreeMap<u64, Site>,
    /// Boundaries of the last clock, in order.
    pub boundaries: Vec<Boundary>,
    /// End-of-run holders per site.
    pub candidates: Vec<Candidate>,
    /// End-of-run holders whose graphs grew, by census key.
    pub graph_holders: BTreeMap<String, Holder>,
    /// The hook's own failures (`where: detail`).
    pub errors: Vec<String>,
    /// Boundaries when the hook ended the program, or `None` when the
    /// program ended (or was killed) first.
    pub ended_after: Option<u64>,
    /// Whether the program ended by itself (the hook's exit handler ran).
    pub program_exited: bool,
    /// Lines that were not JSON objects (a cut last line).
    pub bad_lines: u64,
}

impl Trace {
    /// Reads the record.
    pub fn parse(text: &str) -> Trace {
        let mut t = Trace::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(line) {
                Ok(Value::Object(map)) => t.line(&map),
                _ => t.bad_lines = t.bad_lines.saturating_add(1),
            }
        }
        t
    }

    fn line(&mut self, m: &serde_json::Map<String, Value>) {
        let v = Value::Object(m.clone());
        if m.contains_key("hook") {
            self.started = true;
            let s = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
            let framework = m
                .get("framework")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let version = match framework.as_deref() {
                Some("tensorflow") => s("tensorflow"),
                _ => s("torch"),
            };
            self.versions = Some((s("python"), version));
            self.framework = framework;
        } else if let Some(id) = m.get("site").and_then(Value::as_u64) {
            if self.sites.len() < MAX_SITES
                && let Ok(site) = serde_json::from_value::<Site>(v)
            {
                self.sites.insert(id, site);
            }
        } else if let Some(index) = m.get("boundary").and_then(Value::as_u64) {
            if index <= 1 {
                // A new clock: what came before was setup.
                self.boundaries.clear();
            }
            if self.boundaries.len() >= MAX_BOUNDARIES {
                return;
            }
            let by_site = |v: Option<&Value>| {
                numbers(v)
                    .into_iter()
                    .filter_map(|(k, n)| Some((k.parse::<u64>().ok()?, n)))
                    .collect()
            };
            let alive = by_site(m.get("alive"));
            let young = by_site(m.get("young"));
            self.boundaries.push(Boundary {
                index,
                source: m
                    .get("source")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                alive,
                young,
                graphs: numbers(m.get("graphs")).into_iter().collect(),
                cuda_allocated: m.get("cuda_allocated").and_then(Value::as_u64),
            });
        } else if m.contains_key("candidate") {
            if let Ok(c) = serde_json::from_value::<Candidate>(v) {
                self.candidates.push(c);
            }
        } else if let Some(key) = m.get("graph_holder").and_then(Value::as_str) {
            if let Some(h) = m
                .get("holder")
                .and_then(|h| serde_json::from_value::<Holder>(h.clone()).ok())
            {
                self.graph_holders.insert(key.to_owned(), h);
            }
        } else if let Some(at) = m.get("error").and_then(Value::as_str) {
            let detail = m
                .get("detail")
                .and_then(Value::as_str)
                .and_then(|d| d.trim_end().lines().last())
                .unwrap_or("");
            if self.errors.len() < 16 {
                self.errors.push(format!("{at}: {detail}"));
            }
        } else if let Some(b) = m.get("end").and_then(Value::as_u64) {
            match m.get("reason").and_then(Value::as_str) {
                Some("steps") => self.ended_after = Some(b),
                _ => self.program_exited = true,
            }
        }
    }

    /// The clock that counted the steps (`optimizer`, `dataloader`, …).
    pub fn source(&self) -> Option<&str> {
        self.boundaries.last().map(|b| b.source.as_str())
    }
}

/// `{"key": n, …}` with non-negative integer values; anything else is skipped.
fn numbers(v: Option<&Value>) -> Vec<(String, u64)> {
    match v {
        Some(Value::Object(m)) => m
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_kind_of_line_and_skips_a_cut_one() {
        let t = Trace::parse(concat!(
            r#"{"hook":1,"pid":1,"steps":4,"python":"3.11.7","torch":"2.5.0"}"#,
            "\n",
            r#"{"site":0,"file":"t.py","line":3,"function":"main"}"#,
            "\n",
            r#"{"boundary":1,"source":"dataloader","alive":{}}"#,
            "\n",
            r#"{"boundary":1,"source":"optimizer","alive":{}}"#,
            "\n",
            r#"{"boundary":2,"source":"optimizer","alive":{"0":8,"x":3,"1":-1},"graphs":{"local|t.py|main|losses":4}}"#,
            "\n",
            r#"{"candidate":0,"bytes":8,"holder":{"text":"losses","store":{"file":"t.py","line":9,"code":"losses.append(loss)"}}}"#,
            "\n",
            r#"{"error":"tag","detail":"Traceback\n  x\nValueError: boom\n"}"#,
            "\n",
            r#"{"end":2,"reason":"steps"}"#,
            "\n",
            r#"{"boundary":3,"sou"#,
        ));
        assert!(t.started);
        assert_eq!(t.versions, Some(("3.11.7".into(), "2.5.0".into())));
        assert_eq!(t.sites.get(&0).map(|s| s.line), Some(3));
        assert_eq!(t.boundaries.len(), 2, "the dataloader clock was replaced");
        assert_eq!(t.source(), Some("optimizer"));
        let b = t.boundaries.last().unwrap();
        assert_eq!(b.alive.iter().collect::<Vec<_>>(), [(&0, &8)]);
        assert_eq!(b.graphs.get("local|t.py|main|losses"), Some(&4));
        let h = t.candidates[0].holder.as_ref().unwrap();
        assert_eq!(h.store.as_ref().unwrap().line, 9);
        assert_eq!(t.errors, ["tag: ValueError: boom"]);
        assert_eq!(t.ended_after, Some(2));
        assert_eq!(t.bad_lines, 1);
    }
}
