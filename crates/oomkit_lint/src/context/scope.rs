//! Per-function state: the [`Scope`] of each function (or the module) and the
//! [`LoopFrame`] of each open loop.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::cell::RefCell;
use std::rc::Rc;

use super::loss::LossIndex;
use super::query::roots;
use super::{BodyFacts, Facts, Kind, backward_loss, last_segment};
use crate::parse::Ranged;
use crate::parse::ast::{Expr, Stmt};

/// One function (or the module) being checked.
pub struct Scope<'a> {
    /// Function name (`""` for the module).
    pub name: String,
    /// `forward` of a class with bases (an `nn.Module`).
    pub is_forward: bool,
    /// Name of the first parameter of a method (`self`).
    pub self_name: Option<String>,
    /// What each local name holds, updated in source order.
    pub env: HashMap<String, Kind>,
    /// Depth of `no_grad`/`inference_mode` regions (decorators included).
    pub no_grad: u32,
    /// Receivers of `.eval()` (text), until `.train()`.
    pub eval_models: Vec<String>,
    /// Decorators of the function (last segment of each callee: `evaluate` for
    /// `@evaluate(model)`).
    pub decorators: Vec<String>,
    /// Whether OOM104 was reported here already.
    pub reported_inference: bool,
    /// Names bound to a model loaded with `device_map=`.
    pub device_map_models: HashSet<String>,
    /// Facts about the whole body.
    pub facts: Facts<'a>,
    /// The scanned bodies whose loops this scope may enter: the function's, then any
    /// loop scanned on its own (in a class body), innermost last.
    pub(super) roots: Vec<Rc<BodyFacts<'a>>>,
    /// Loops currently open in this scope, innermost last.
    pub loops: Vec<LoopFrame<'a>>,
    /// Whether the body trains (backward, `.train()`, `enable_grad`…): not inference.
    pub trains: bool,
    /// Names whose value is backpropagated in the body (`loss.backward()`,
    /// `out["loss"].backward()`, `scaler.scale(loss).backward()`,
    /// `accelerator.backward(loss)`): whatever they are bound to carries a graph.
    pub backpropagated: HashSet<String>,
    /// Names bound here whose graph is known only from that evidence (their value came
    /// from an unknown call): rules that must know where a loss came from (OOM106: was
    /// it scaled inside?) skip them.
    pub graph_by_backward: HashSet<String>,
    /// Names bound while gradients were off (`with torch.no_grad(): outputs = model(x)`),
    /// or from such a name (`loss = outputs.loss` after the block): whatever they hold
    /// has no graph, so a later `loss.backward()` elsewhere in the body (the training
    /// loop) is no evidence that they carry one (accelerate's
    /// `megatron_lm_gpt_pretraining.py` evaluation loop).
    pub bound_without_grad: HashSet<String>,
    /// [`Checker::consumed_as_loss`](super::Checker::consumed_as_loss) answers so far.
    pub(super) loss_memo: RefCell<HashMap<String, bool>>,
    /// Built on the first [`Checker::consumed_as_loss`](super::Checker::consumed_as_loss) question.
    pub(super) loss_index: RefCell<Option<LossIndex>>,
    /// Names found to hold (or share a call with) a backpropagated value, per name:
    /// [`Checker::kept_after_backward`](super::Checker::kept_after_backward) asks once.
    pub(super) members_memo: RefCell<HashMap<String, bool>>,
    /// The key of this function's summary (`train_step`, `Trainer.train_step`): a
    /// module-level function or a method of a module-level class.
    pub(super) summary_key: Option<String>,
    /// What its `return`s so far give.
    pub(super) returns: Option<super::kind::Returns>,
    /// Whether the body yields (a generator: its calls return a generator).
    pub(super) yields: bool,
}

/// A loop currently being visited.
pub struct LoopFrame<'a> {
    /// Facts about its body (its `for` target included in `assigned`).
    pub facts: Facts<'a>,
    /// `if` depth inside this loop.
    pub if_depth: u32,
    /// `except` depth inside this loop.
    pub except_depth: u32,
    /// Whether it looks like a loop over data or training steps (`for batch in loader`,
    /// `for step in range(max_steps)`, `while True`), not over layers, heads or images.
    pub is_data_loop: bool,
    /// Names bound by the `for` target.
    pub targets: HashSet<String>,
    /// A `for` whose target or iterable is named like an epoch (`for epoch in …`).
    pub is_epoch_loop: bool,
}

impl LoopFrame<'_> {
    /// `total` is assigned in the loop only by `total = total + …` (not reset per
    /// iteration).
    pub fn only_accumulated(&self, name: &str) -> bool {
        self.facts.only_accumulated(name)
    }
}

const DATA_ITER_WORDS: &[&str] = &[
    "loader", "batches", "dataset", "data", "epoch", "step", "iter", "train", "eval", "valid",
    "test", "sample", "prompts",
];
const DATA_TARGET_WORDS: &[&str] = &[
    "batch",
    "step",
    "epoch",
    "iteration",
    "sample",
    "inputs",
    "update",
];

/// See [`LoopFrame::is_data_loop`].
pub(super) fn is_data_loop(iter: Option<&Expr>, target: Option<&Expr>, source: &str) -> bool {
    let (Some(iter), Some(target)) = (iter, target) else {
        return true; // `while`
    };
    // a loop over values written in the code (`for batch_size in [7, None]`) is a loop
    // over settings, not over data
    if matches!(iter, Expr::List(_) | Expr::Tuple(_) | Expr::Set(_)) {
        return false;
    }
    let text = |e: &Expr| {
        source
            .get(e.range().start().to_usize()..e.range().end().to_usize())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    let it = text(iter);
    let tg = text(target);
    DATA_ITER_WORDS.iter().any(|w| it.contains(w))
        || DATA_TARGET_WORDS.iter().any(|w| tg.contains(w))
}

impl<'a> Scope<'a> {
    pub(super) fn new(name: &str, body: &'a [Stmt]) -> Self {
        let root = Rc::new(BodyFacts::of(body));
        Self {
            name: name.to_string(),
            is_forward: false,
            self_name: None,
            env: HashMap::new(),
            no_grad: 0,
            eval_models: Vec::new(),
            decorators: Vec::new(),
            reported_inference: false,
            device_map_models: HashSet::new(),
            trains: false,
            backpropagated: HashSet::new(),
            graph_by_backward: HashSet::new(),
            bound_without_grad: HashSet::new(),
            facts: Facts::whole(Rc::clone(&root)),
            roots: vec![root],
            loops: Vec::new(),
            loss_memo: RefCell::new(HashMap::new()),
            loss_index: RefCell::new(None),
            members_memo: RefCell::new(HashMap::new()),
            summary_key: None,
            returns: None,
            yields: false,
        }
        .with_trains()
    }

    fn with_trains(mut self) -> Self {
        let mut trains = false;
        let mut backpropagated = HashSet::new();
        for c in self.facts.calls() {
            if let Some(loss) = backward_loss(c.call) {
                trains = true;
                roots(loss, &mut backpropagated);
            } else if matches!(
                last_segment(&c.call.func),
                Some("train" | "enable_grad" | "set_grad_enabled" | "requires_grad_")
            ) {
                trains = true;
            }
        }
        // `loss = losses` … `loss.backward()`: `losses` is the same tensor
        for _ in 0..4 {
            let mut more = Vec::new();
            for (targets, value, aug) in self.facts.assigns() {
                if let Expr::Name(v) = value
                    && !aug
                    && !backpropagated.contains(v.id.as_str())
                    && targets.iter().any(|t| backpropagated.contains(t))
                {
                    more.push(v.id.to_string());
                }
            }
            if more.is_empty() {
                break;
            }
            backpropagated.extend(more);
        }
        self.trains = trains;
        self.backpropagated = backpropagated;
        self
    }
}
