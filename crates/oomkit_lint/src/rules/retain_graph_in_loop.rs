//! OOM108 `retain-graph-in-loop`.

use crate::context::{Checker, backward_loss, mentions};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `.backward(retain_graph=True)` (also `accelerator.backward(loss,
    /// retain_graph=True)`) inside a loop over data or steps (not a loop over several
    /// losses of one step).
    ///
    /// ## Evidence it needs
    /// A literal `retain_graph=True` on a backward call directly inside a loop over data or
    /// steps, in a loop that carries a value from one iteration to the next (`hidden =
    /// model(x, hidden)`, `total += loss`) without ever detaching it there. A loop that
    /// rebuilds its graph every iteration — from fresh inputs, or from carried state it
    /// detaches (`state = state.detach()`, `repackage_hidden(h)`) — frees each graph when
    /// the next iteration drops it, whatever `retain_graph` says.
    ///
    /// ## Why it costs memory
    /// `retain_graph=True` keeps the saved activations of the graph after the backward
    /// pass. In a loop, if anything links one iteration's graph to the next (a hidden state,
    /// a running loss), every iteration's activations stay alive and memory grows until
    /// the run fails.
    ///
    /// ## Example
    /// ```python
    /// for batch in loader:
    ///     loss = model(batch).loss
    ///     loss.backward(retain_graph=True)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for batch in loader:
    ///     loss = model(batch).loss
    ///     loss.backward()  # detach any state carried to the next step
    /// ```
}

/// `.backward(retain_graph=True)` in a data loop.
pub(crate) struct RetainGraphInLoop {
    /// The callee as written (`loss.backward`).
    pub callee: String,
}

impl Violation for RetainGraphInLoop {
    const RULE: Rule = Rule::RetainGraphInLoop;

    fn message(&self) -> String {
        let t = &self.callee;
        format!("`{t}(retain_graph=True)` in a loop keeps each iteration's saved activations alive")
    }

    fn fix_title(&self) -> String {
        "Drop `retain_graph=True` and detach state carried across iterations".to_string()
    }
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::RetainGraphInLoop) || !ch.innermost_loop().is_some_and(|l| l.is_data_loop)
    {
        return;
    }
    if backward_loss(call).is_none() {
        return;
    }
    let Some(kw) = call.arguments.find_keyword("retain_graph") else {
        return;
    };
    if !matches!(&kw.value, Expr::BooleanLiteral(b) if b.value) {
        return;
    }
    if !carries_graph(ch) {
        return;
    }
    let t = ch.snippet(call.func.range()).to_string();
    ch.report(call.range(), RetainGraphInLoop { callee: t });
}

/// Whether the innermost loop carries a value across iterations (assigned from itself)
/// and never detaches or re-creates it in the loop.
fn carries_graph(ch: &Checker<'_>) -> bool {
    let Some(lp) = ch.innermost_loop() else {
        return false;
    };
    let assigns = lp.facts.assigns();
    let detaches = |v: &Expr| {
        let text = ch.snippet(v.range());
        text.contains("detach") || text.contains("repackage") || text.contains(".item()")
    };
    assigns.iter().any(|(targets, value, aug)| {
        targets.iter().any(|t| {
            (*aug || mentions(value, t))
                && !detaches(value)
                && !lp.targets.contains(t)
                && !lp.facts.calls().any(|site| {
                    matches!(&*site.call.func, Expr::Attribute(a)
                        if a.attr.as_str() == "detach_" && crate::context::text_of(&a.value) == *t)
                })
                && assigns.iter().all(|(other, v, a)| {
                    !other.contains(t) || ((*a || mentions(v, t)) && !detaches(v))
                })
        })
    })
}
