//! OOM107 `zero-grad-every-micro-step`.

use crate::context::{Checker, optimizer_step, zero_grad_receiver};
use crate::parse::Ranged;
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags gradient accumulation (the optimizer steps only under a `%` guard, every k
    /// iterations) where `zero_grad()` still runs unconditionally in every iteration.
    ///
    /// ## Evidence it needs
    /// `optimizer.step()` only under a `%` guard in the loop, and a `zero_grad()` (or
    /// `p.grad = None`) that runs unconditionally in the same loop.
    ///
    /// ## Why it costs memory
    /// Zeroing every micro-step throws away the gradients of the previous micro-batches, so
    /// the optimizer only ever sees the last one: the accumulation that was meant to allow
    /// a small per-step batch (and so a smaller activation peak) does not happen, and the
    /// run behaves like training with a k× smaller batch.
    ///
    /// ## Example
    /// ```python
    /// for i, batch in enumerate(loader):
    ///     optimizer.zero_grad()
    ///     loss = model(batch).loss / accum_steps
    ///     loss.backward()
    ///     if (i + 1) % accum_steps == 0:
    ///         optimizer.step()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for i, batch in enumerate(loader):
    ///     loss = model(batch).loss / accum_steps
    ///     loss.backward()
    ///     if (i + 1) % accum_steps == 0:
    ///         optimizer.step()
    ///         optimizer.zero_grad(set_to_none=True)
    /// ```
}

/// `zero_grad()` every micro-step of gradient accumulation.
pub(crate) struct ZeroGradEveryMicroStep {
    /// The call as written (`optimizer.zero_grad()`).
    pub zero_grad: String,
}

impl Violation for ZeroGradEveryMicroStep {
    const RULE: Rule = Rule::ZeroGradEveryMicroStep;

    fn message(&self) -> String {
        let z = &self.zero_grad;
        format!(
            "`{z}` runs every iteration while the optimizer steps only under a `%` guard, so gradients never accumulate"
        )
    }

    fn fix_title(&self) -> String {
        "Move `zero_grad()` under the same guard, right after `step()`".to_string()
    }
}

/// The optimizers of an accumulation loop: every step in the loop body (outside nested
/// loops) sits under a `%` guard. `None` when the loop is not an accumulation loop.
pub(crate) fn accumulating_optimizers(ch: &Checker<'_>) -> Option<Vec<String>> {
    let lp = ch.innermost_loop()?;
    let steps: Vec<_> = lp
        .facts
        .step_calls()
        .filter(|c| !c.nested_loop)
        .filter_map(|c| optimizer_step(ch, c.call).map(|o| (o, c.modulo)))
        .collect();
    if steps.is_empty() || steps.iter().any(|(_, m)| !m) {
        return None;
    }
    Some(steps.into_iter().map(|(o, _)| o).collect())
}

/// Runs when a loop's body has been visited; returns whether the loop zeroes every
/// micro-step (so OOM106 is moot).
pub(crate) fn check(ch: &mut Checker<'_>) -> bool {
    let Some(opts) = accumulating_optimizers(ch) else {
        return false;
    };
    let Some(lp) = ch.innermost_loop() else {
        return false;
    };
    let hit = lp.facts.step_calls().find(|c| {
        !c.nested_loop
            && !c.in_if
            && zero_grad_receiver(c.call).is_some_and(|r| {
                opts.contains(&r) || crate::context::last_segment_of_text(&r).contains("model")
            })
    });
    let Some(site) = hit else { return false };
    let call = site.call;
    let z = ch.snippet(call.range()).to_string();
    ch.report(call.range(), ZeroGradEveryMicroStep { zero_grad: z });
    true
}
