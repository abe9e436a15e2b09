//! OOM108 `retain-graph-in-loop`.

use crate::context::{Checker, backward_loss};
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
    /// steps.
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
    let t = ch.snippet(call.func.range()).to_string();
    ch.report(call.range(), RetainGraphInLoop { callee: t });
}
