//! OOM102 `loss-accumulated-with-graph`.

use crate::context::{BodyFacts, Checker, backward_loss, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `total += loss` (or `total = total + loss`) inside a loop when `loss` carries an
    /// autograd graph and the running total is only used for logging (it is not
    /// backpropagated or returned as a loss).
    ///
    /// ## Evidence it needs
    /// The added value must carry a graph (model output, loss function, or a torch op on
    /// one, outside `no_grad`), and the total must only be accumulated in the loop (not
    /// reset on every iteration; a reset to a constant under an `if` — `if step % 100 ==
    /// 99: running_loss = 0.0` — still keeps every graph until the reset, and is flagged
    /// saying so, unless the loop steps its optimizer under a `%` guard: a total over one
    /// gradient-accumulation window, as torchtune's recipes keep, spans a few
    /// micro-batches whose buffers their backward freed) and never backpropagated or
    /// returned — except that returning
    /// it is no excuse when each added value was itself backpropagated in the loop (the
    /// PyTorch FAQ's `total_loss += loss`: those graphs cannot be used again). The added
    /// value may also be the result of a step helper of the same file —
    /// `self.training_step(...)` (a method of a class of the file, called on `self`) or
    /// `train_step(...)` (a module-level function) — called with gradients on, whose body
    /// backpropagates the very name it returns (`loss.backward()` … `return loss`), as
    /// transformers' `Trainer` did before huggingface/transformers#6999 — or any function
    /// whose summary returns a graph in this file, or, by its name, a training step of
    /// another module of the linted tree that backpropagates and returns a graph
    /// (`trainer.train_step(...)`, bubbliiiing/faster-rcnn-pytorch#35).
    /// A total started by its first value (`total = loss if total is None else total +
    /// loss`, RUCAIBox/RecBole#307) accumulates the same way, and a name assigned to the
    /// backpropagated one (`loss = losses`) is backpropagated too.
    ///
    /// ## Why it costs memory
    /// Adding a graph-carrying tensor to a running total chains every step's graph onto the
    /// total: nothing from any step can be freed, and memory grows until the run fails.
    ///
    /// ## Example
    /// ```python
    /// total_loss = 0
    /// for batch in loader:
    ///     loss = model(batch).loss
    ///     loss.backward()
    ///     total_loss += loss
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// total_loss = 0
    /// for batch in loader:
    ///     loss = model(batch).loss
    ///     loss.backward()
    ///     total_loss += loss.item()
    /// ```
}

/// A graph-carrying value summed into a total that outlives the step.
pub(crate) struct LossAccumulatedWithGraph {
    /// The total (`total_loss`).
    pub total: String,
    /// The value added (`loss`).
    pub value: String,
    /// The value's receiver, where `.item()` goes.
    pub receiver: String,
    /// The total is reset now and then (`if step % 100 == 0: total = 0`).
    pub until_reset: bool,
}

impl Violation for LossAccumulatedWithGraph {
    const RULE: Rule = Rule::LossAccumulatedWithGraph;

    fn message(&self) -> String {
        let (t, v) = (&self.total, &self.value);
        if self.until_reset {
            format!(
                "`{t}` accumulates `{v}` with its autograd graph: every step's graph stays alive until `{t}` is next reset"
            )
        } else {
            format!(
                "`{t}` accumulates `{v}` with its autograd graph, keeping every step's graph alive"
            )
        }
    }

    fn fix_title(&self) -> String {
        format!("Accumulate `{}.item()` instead", self.receiver)
    }
}

fn flag(ch: &mut Checker<'_>, range: crate::parse::TextRange, target: &Expr, value: &Expr) {
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    if !lp.is_data_loop {
        return;
    }
    // `totals[name] += loss` accumulates into the dict `totals`
    let name = match target {
        Expr::Subscript(s) => text_of(&s.value),
        t => text_of(t),
    };
    if name.is_empty() {
        return;
    }
    let until_reset = lp.facts.assigned(&name)
        && !lp.only_accumulated(&name)
        && !lp.targets.contains(&name);
    if until_reset && !lp.facts.reset_only_under_guard(&name) {
        return;
    }
    // a total over one gradient-accumulation window (the optimizer steps under a `%`
    // guard, where the total is reset: torchtune's `running_loss`) spans a few
    // micro-batches whose graphs' buffers their backward already freed: bounded
    if until_reset
        && lp
            .facts
            .step_calls()
            .any(|site| site.modulo && crate::context::optimizer_step(ch, site.call).is_some())
    {
        return;
    }
    // a value that is backpropagated in this function carries a graph, whatever
    // computed it (`loss = agent.loss(batch)`; `loss.backward()`)
    let backpropagated = matches!(value, Expr::Name(n) if ch.scope().backpropagated.contains(n.id.as_str()));
    if !(ch.kind(value).has_graph() || backpropagated || returns_backpropagated(ch, value))
        || (ch.consumed_as_loss(&name) && !ch.kept_after_backward(&name, value))
    {
        return;
    }
    let t = ch.snippet(target.range()).to_string();
    let v = ch.snippet(value.range()).to_string();
    let receiver = ch.receiver_snippet(value);
    ch.report(
        range,
        LossAccumulatedWithGraph {
            total: t,
            value: v,
            receiver,
            until_reset,
        },
    );
}

/// `total += loss`.
pub(crate) fn check_aug_assign(ch: &mut Checker<'_>, a: &ast::StmtAugAssign) {
    if ch.enabled(Rule::LossAccumulatedWithGraph)
        && matches!(a.op, ast::Operator::Add)
        && !matches!(&*a.value, Expr::List(_))
    {
        flag(ch, a.range(), &a.target, &a.value);
    }
}

/// `total = total + loss`.
pub(crate) fn check_assign(ch: &mut Checker<'_>, a: &ast::StmtAssign) {
    if !ch.enabled(Rule::LossAccumulatedWithGraph) {
        return;
    }
    let [target @ Expr::Name(_)] = &*a.targets else {
        return;
    };
    let name = text_of(target);
    // `total = x if total is None else total + x`: the first step starts the sum
    // (RecBole's `Trainer._train_epoch` before RUCAIBox/RecBole#307)
    let sum = match &*a.value {
        Expr::BinOp(b) => Some(b),
        Expr::If(i) => [&*i.orelse, &*i.body].into_iter().find_map(|e| match e {
            Expr::BinOp(b) if text_of(&b.left) == name || text_of(&b.right) == name => Some(b),
            _ => None,
        }),
        _ => None,
    };
    let Some(b) = sum else { return };
    if !matches!(b.op, ast::Operator::Add) {
        return;
    }
    let other = if text_of(&b.left) == name {
        &b.right
    } else if text_of(&b.right) == name {
        &b.left
    } else {
        return;
    };
    flag(ch, a.range(), target, other);
}

/// `self.training_step(...)` / `train_step(...)` with gradients on: a method of a class
/// of this file called on `self`, or a module-level function of this file, that
/// backpropagates the name it returns (`loss.backward()` … `return loss`): its result
/// carries the step's graph whatever computed it (transformers' `Trainer.train` summed
/// `self.training_step(...)` this way, huggingface/transformers#6999).
pub(crate) fn returns_backpropagated(ch: &Checker<'_>, value: &Expr) -> bool {
    let Expr::Call(c) = value else {
        return false;
    };
    if !ch.grad_enabled() {
        return false;
    }
    let module = &ch.module().body;
    let helper = match &*c.func {
        Expr::Name(n) => module.iter().find_map(|s| match s {
            ast::Stmt::FunctionDef(f) if f.name.as_str() == n.id.as_str() => Some(f),
            _ => None,
        }),
        Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self") => {
            module.iter().find_map(|s| match s {
                ast::Stmt::ClassDef(class) => class.body.iter().find_map(|m| match m {
                    ast::Stmt::FunctionDef(f) if f.name.as_str() == a.attr.as_str() => Some(f),
                    _ => None,
                }),
                _ => None,
            })
        }
        _ => None,
    };
    let Some(helper) = helper else {
        return false;
    };
    let facts = BodyFacts::of(&helper.body);
    let backpropagated: Vec<String> = facts
        .all_calls()
        .filter_map(backward_loss)
        .map(text_of)
        .collect();
    let mut returned = Vec::new();
    returned_names(&helper.body, &mut returned, 0);
    returned.iter().any(|r| backpropagated.contains(r))
}

/// The names `return x` returns in `body` (at any nesting of `if`/`with`/`try`).
fn returned_names(body: &[ast::Stmt], out: &mut Vec<String>, depth: usize) {
    if depth > crate::parse::depth::MAX_NESTING {
        return;
    }
    let deeper = depth.saturating_add(1);
    for s in body {
        match s {
            ast::Stmt::Return(r) => {
                if let Some(v) = &r.value
                    && let Expr::Name(n) = &**v
                {
                    out.push(n.id.to_string());
                }
            }
            ast::Stmt::If(i) => {
                returned_names(&i.body, out, deeper);
                for c in &i.elif_else_clauses {
                    returned_names(&c.body, out, deeper);
                }
            }
            ast::Stmt::With(w) => returned_names(&w.body, out, deeper),
            ast::Stmt::Try(t) => {
                returned_names(&t.body, out, deeper);
                returned_names(&t.orelse, out, deeper);
                returned_names(&t.finalbody, out, deeper);
            }
            _ => {}
        }
    }
}
