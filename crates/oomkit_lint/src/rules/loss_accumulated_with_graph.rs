//! OOM102 `loss-accumulated-with-graph`.

use crate::context::{Checker, text_of};
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
    /// one, outside `no_grad`), and the total must only be accumulated in the loop (never
    /// reset per iteration) and never backpropagated or returned — except that returning
    /// it is no excuse when each added value was itself backpropagated in the loop (the
    /// PyTorch FAQ's `total_loss += loss`: those graphs cannot be used again).
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
}

impl Violation for LossAccumulatedWithGraph {
    const RULE: Rule = Rule::LossAccumulatedWithGraph;

    fn message(&self) -> String {
        let (t, v) = (&self.total, &self.value);
        format!("`{t}` accumulates `{v}` with its autograd graph, keeping every step's graph alive")
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
    if name.is_empty() || (lp.facts.assigned(&name) && !lp.only_accumulated(&name)) {
        return;
    }
    if !ch.kind(value).has_graph()
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
    let Expr::BinOp(b) = &*a.value else { return };
    if !matches!(b.op, ast::Operator::Add) {
        return;
    }
    let name = text_of(target);
    let other = if text_of(&b.left) == name {
        &b.right
    } else if text_of(&b.right) == name {
        &b.left
    } else {
        return;
    };
    flag(ch, a.range(), target, other);
}
