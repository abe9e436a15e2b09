//! OOM103 `missing-zero-grad`.

use crate::context::{Checker, backward_loss, optimizer_step, zero_grad_receiver};
use crate::parse::Ranged;
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags a loop that calls `.backward()` and `optimizer.step()` but never
    /// `zero_grad()` (on the optimizer or the model) or sets `p.grad = None` in the loop.
    ///
    /// ## Evidence it needs
    /// The same loop must both backpropagate (`.backward()`, `accelerator.backward`,
    /// `manual_backward`) and step an optimizer, with no `zero_grad()` or `p.grad = None`
    /// anywhere in it.
    ///
    /// ## Why it costs memory
    /// `.backward()` adds into `.grad`; without zeroing, every step applies the sum of all
    /// previous gradients, so training silently diverges. Gradient buffers also stay
    /// allocated between steps instead of being freed with `set_to_none=True`.
    ///
    /// ## Example
    /// ```python
    /// for batch in loader:
    ///     loss = model(batch).loss
    ///     loss.backward()
    ///     optimizer.step()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for batch in loader:
    ///     optimizer.zero_grad(set_to_none=True)
    ///     loss = model(batch).loss
    ///     loss.backward()
    ///     optimizer.step()
    /// ```
}

/// A training loop that never clears the gradients.
pub(crate) struct MissingZeroGrad {
    /// The step call as written (`optimizer.step()`).
    pub step: String,
    /// The optimizer (`optimizer`).
    pub optimizer: String,
}

impl Violation for MissingZeroGrad {
    const RULE: Rule = Rule::MissingZeroGrad;

    fn message(&self) -> String {
        let step = &self.step;
        format!(
            "`{step}` runs in a loop that calls `.backward()` but never `zero_grad()`: gradients add up across iterations"
        )
    }

    fn fix_title(&self) -> String {
        let opt = &self.optimizer;
        format!("Call `{opt}.zero_grad(set_to_none=True)` once per optimizer step")
    }
}

/// Runs when a loop's body has been visited.
pub(crate) fn check(ch: &mut Checker<'_>) {
    if !ch.enabled(Rule::MissingZeroGrad) {
        return;
    }
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    let facts = &lp.facts;
    if facts.grad_none().next().is_some()
        || facts
            .step_calls()
            .any(|c| zero_grad_receiver(c.call).is_some())
        || !facts.step_calls().any(|c| backward_loss(c.call).is_some())
    {
        return;
    }
    let Some((site, opt)) = facts
        .step_calls()
        .find_map(|c| optimizer_step(ch, c.call).map(|o| (c.call, o)))
    else {
        return;
    };
    let step = ch.snippet(site.range()).to_string();
    ch.report(
        site.range(),
        MissingZeroGrad {
            step,
            optimizer: opt.to_string(),
        },
    );
}
