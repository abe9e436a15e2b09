//! OOM101 `tensor-appended-in-loop`.

use crate::context::{Checker, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `xs.append(t)` (also `xs.extend([t])`, `xs += [t]` and `d[step] = t`) inside a
    /// loop over data or steps (`for batch in loader`, `for step in range(n)`, `while`) when `t` is a tensor that carries an autograd graph: a loss, logits or model
    /// outputs not reduced by `.item()`, `.detach()`, `.cpu()`, `.tolist()`, `.numpy()`,
    /// `float()` or `int()`.
    ///
    /// ## Evidence it needs
    /// The value must carry a graph: it comes from a model call, a loss function or a torch
    /// op on such a value, outside `no_grad`/`inference_mode`; the container must outlive
    /// the iteration (created outside the loop), and the loop must be over data or steps. A
    /// container that is itself backpropagated or returned as a loss (`losses.append(l)`
    /// then `sum(losses).backward()`) is not flagged — unless each value was already
    /// backpropagated in the loop, when returning the list cannot be for a backward, or
    /// the values are outputs (logits, predictions: not named like a loss) that a
    /// function which trains nothing only returns (`all_logits.append(out.logits)` …
    /// `return all_logits`): every graph then leaves the function with the list. The
    /// fix offered fits the value: `.item()` for a loss, `.detach().cpu()` for a batch
    /// of outputs (`.item()` raises on more than one element), each tensor of a dict. A
    /// dict, list or tuple that holds such a tensor counts as one (`store.append({"loss":
    /// loss, "log_probs": lp})`, verl-project/verl#7874), and so does the second result
    /// of a call whose first result is backpropagated (`loss, logging_output =
    /// criterion(...)`, when the criterion's summary shows a graph in its logging dict:
    /// facebookresearch/fairseq#2255): kept after that backward, it cannot be meant for
    /// a later one. Lightning's
    /// `training_step` runs once per batch, so `self.outputs.append(logits)` there (a list
    /// on the module, emptied at the epoch's end) and a returned dict's tensors other
    /// than `"loss"` in a class with `training_epoch_end` (Lightning keeps every step's
    /// dict for it and detaches only the loss) keep each step's graph for the epoch.
    ///
    /// ## Why it costs memory
    /// The list keeps every step's tensor on the GPU and, through its `grad_fn`, the whole
    /// computation graph of that step (all saved activations). Memory grows with every
    /// iteration until the run fails with an out-of-memory error.
    ///
    /// ## Example
    /// ```python
    /// losses = []
    /// for batch in loader:
    ///     loss = criterion(model(batch), batch.y)
    ///     loss.backward()
    ///     losses.append(loss)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// losses = []
    /// for batch in loader:
    ///     loss = criterion(model(batch), batch.y)
    ///     loss.backward()
    ///     losses.append(loss.item())
    /// ```
}

/// A graph-carrying value kept in a container for every iteration of a data loop.
pub(crate) struct TensorAppendedInLoop {
    /// The container (`losses`).
    pub container: String,
    /// The value kept (`loss`).
    pub value: String,
    /// The value's receiver, where `.item()` goes.
    pub receiver: String,
    /// The container is returned by the function: it outlives the loop.
    pub returned: bool,
    /// The value is a scalar (a loss), so `.item()` works; otherwise (logits,
    /// outputs) only `.detach()`/`.cpu()` do.
    pub scalar: bool,
    /// The value is a dict, list or tuple holding such tensors: each one needs
    /// detaching.
    pub holds: bool,
    /// Kept by a Lightning step method for the epoch (`self.outputs.append(preds)` in
    /// `training_step`, or returned to `*_epoch_end`), not by a loop of this file.
    pub per_epoch: bool,
}

impl Violation for TensorAppendedInLoop {
    const RULE: Rule = Rule::TensorAppendedInLoop;

    fn message(&self) -> String {
        let (c, v) = (&self.container, &self.value);
        if self.per_epoch {
            return format!(
                "`{c}` keeps `{v}` and its autograd graph alive from every step until the epoch ends"
            );
        }
        let kept = if self.holds {
            format!("the tensors in `{v}` and their autograd graph")
        } else {
            format!("`{v}` and its autograd graph")
        };
        if self.returned {
            format!(
                "`{c}` keeps {kept} alive for every iteration of the loop, and the function returns it: every graph outlives the loop"
            )
        } else {
            format!("`{c}` keeps {kept} alive for every iteration of the loop")
        }
    }

    fn fix_title(&self) -> String {
        let r = &self.receiver;
        if self.holds {
            return format!(
                "Store detached tensors in `{r}` (`.item()` for a loss, `.detach().cpu()` for outputs) instead"
            );
        }
        if self.scalar {
            format!("Store `{r}.item()` (or `{r}.detach()`) instead")
        } else {
            format!("Store `{r}.detach().cpu()` (or `{r}.detach()` to keep it on the GPU) instead")
        }
    }
}

/// Whether `value` reads as a scalar loss (`.item()` works on it) rather than a
/// batch of outputs.
fn is_scalar(ch: &Checker<'_>, value: &Expr) -> bool {
    let text = ch.snippet(value.range()).to_ascii_lowercase();
    text.contains("loss")
        || matches!(value, Expr::Call(c) if ch.is_loss_callee(&c.func))
}

/// `Some(returned)` when the container keeps the value past the iteration.
fn in_loop_and_kept(ch: &Checker<'_>, container: &Expr, value: &Expr) -> Option<bool> {
    let lp = ch.innermost_loop()?;
    if !lp.is_data_loop {
        return None;
    }
    let name = text_of(container);
    // a list re-created inside the loop is dropped every iteration
    if name.is_empty() || lp.facts.assigned(&name) {
        return None;
    }
    if !ch.consumed_as_loss(&name) || ch.kept_after_backward(&name, value) {
        return Some(false);
    }
    // a list of outputs (logits, predictions: not a loss) that the function only
    // returns, in a function that does not train: the caller gets every graph
    (!ch.scope().trains && !is_scalar(ch, value) && ch.only_returned(&name)).then_some(true)
}

fn report(
    ch: &mut Checker<'_>,
    stmt_range: crate::parse::TextRange,
    container: &Expr,
    value: &Expr,
    returned: bool,
) {
    let c = ch.snippet(container.range()).to_string();
    let v = ch.snippet(value.range()).to_string();
    let r = ch.receiver_snippet(value);
    let scalar = is_scalar(ch, value);
    let holds = matches!(ch.kind(value), crate::context::Kind::Container { .. });
    ch.report(
        stmt_range,
        TensorAppendedInLoop {
            container: c,
            value: v,
            receiver: r,
            returned,
            scalar,
            holds,
            per_epoch: false,
        },
    );
}

/// The Lightning step method that runs with gradients on (Lightning runs
/// `validation_step`, `test_step` and `predict_step` without them).
const STEP_METHODS: &[&str] = &["training_step"];

/// `self.outputs.append(preds)` in a Lightning step method: the list lives on the
/// module across steps (emptied at the epoch's end), so each kept graph lives with it.
fn check_step_method_append(ch: &mut Checker<'_>, call: &ast::ExprCall, container: &Expr, value: &Expr) {
    let scope = ch.scope();
    let Some(me) = scope.self_name.as_deref() else {
        return;
    };
    if !STEP_METHODS.contains(&scope.name.as_str()) || ch.innermost_loop().is_some() {
        return;
    }
    let Expr::Attribute(a) = container else {
        return;
    };
    if !matches!(&*a.value, Expr::Name(n) if n.id.as_str() == me) || !ch.kind(value).has_graph() {
        return;
    }
    let c = ch.snippet(container.range()).to_string();
    let v = ch.snippet(value.range()).to_string();
    let r = ch.receiver_snippet(value);
    let scalar = is_scalar(ch, value);
    ch.report(
        call.range(),
        TensorAppendedInLoop {
            container: c,
            value: v,
            receiver: r,
            returned: false,
            scalar,
            holds: false,
            per_epoch: true,
        },
    );
}

/// `return {"loss": loss, "preds": out}` from `training_step` in a class that defines
/// `training_epoch_end` (Lightning 1.x): Lightning keeps every step's returned dict for
/// that hook and detaches only `"loss"`, so the other tensors keep their graphs.
pub(crate) fn check_step_return(ch: &mut Checker<'_>, ret: &ast::StmtReturn) {
    if !ch.enabled(Rule::TensorAppendedInLoop) {
        return;
    }
    let scope = ch.scope();
    if scope.self_name.is_none() || scope.name != "training_step" {
        return;
    }
    let Some(Expr::Dict(d)) = ret.value.as_deref() else {
        return;
    };
    let at = ret.range();
    let hook = ch.module().body.iter().any(|s| match s {
        ast::Stmt::ClassDef(c) if c.range().contains_range(at) => c.body.iter().any(|m| {
            matches!(m, ast::Stmt::FunctionDef(f) if f.name.as_str() == "training_epoch_end")
        }),
        _ => false,
    });
    if !hook {
        return;
    }
    for item in &d.items {
        let Some(Expr::StringLiteral(key)) = &item.key else {
            continue;
        };
        if key.value.to_str() == "loss" || !ch.kind(&item.value).has_graph() {
            continue;
        }
        let v = ch.snippet(item.value.range()).to_string();
        let r = ch.receiver_snippet(&item.value);
        let scalar = is_scalar(ch, &item.value);
        ch.report(
            item.value.range(),
            TensorAppendedInLoop {
                container: "training_epoch_end".to_string(),
                value: v,
                receiver: r,
                returned: false,
                scalar,
                holds: false,
                per_epoch: true,
            },
        );
    }
}

/// `xs.append(t)` / `xs.extend([t])`.
pub(crate) fn check_call(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::TensorAppendedInLoop) {
        return;
    }
    let Expr::Attribute(a) = &*call.func else {
        return;
    };
    let value = match (a.attr.as_str(), &*call.arguments.args) {
        ("append", [v]) => v,
        ("extend", [Expr::List(ast::ExprList { elts, .. })])
        | ("extend", [Expr::Tuple(ast::ExprTuple { elts, .. })]) => match &elts[..] {
            [v] => v,
            _ => return,
        },
        _ => return,
    };
    if ch.innermost_loop().is_none() {
        check_step_method_append(ch, call, &a.value, value);
        return;
    }
    if ch.kind(value).holds_graph()
        && let Some(returned) = in_loop_and_kept(ch, &a.value, value)
    {
        report(ch, call.range(), &a.value, value, returned);
    }
}

/// `xs += [t]`.
pub(crate) fn check_aug_assign(ch: &mut Checker<'_>, a: &ast::StmtAugAssign) {
    if !ch.enabled(Rule::TensorAppendedInLoop) || !matches!(a.op, ast::Operator::Add) {
        return;
    }
    let Expr::List(l) = &*a.value else { return };
    if let [v] = &*l.elts
        && ch.kind(v).holds_graph()
        && let Some(returned) = in_loop_and_kept(ch, &a.target, v)
    {
        report(ch, a.range(), &a.target, v, returned);
    }
}

/// `d[step] = t` where the key changes with the loop.
pub(crate) fn check_subscript_store(ch: &mut Checker<'_>, a: &ast::StmtAssign) {
    if !ch.enabled(Rule::TensorAppendedInLoop) {
        return;
    }
    let [Expr::Subscript(s)] = &*a.targets else {
        return;
    };
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    // a new key per step (the loop variable), not a running sum per key
    let key_is_step = matches!(&*s.slice, Expr::Name(n) if lp.targets.contains(n.id.as_str()));
    let container = text_of(&s.value);
    if key_is_step
        && !crate::context::mentions(&a.value, &container)
        && ch.kind(&a.value).holds_graph()
        && let Some(returned) = in_loop_and_kept(ch, &s.value, &a.value)
    {
        report(ch, a.range(), &s.value, &a.value, returned);
    }
}
