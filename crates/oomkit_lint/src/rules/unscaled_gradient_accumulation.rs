//! OOM106 `unscaled-gradient-accumulation`.

use foldhash::{HashSet, HashSetExt};

use crate::context::{Checker, backward_loss, is_scaled, text_of};
use crate::parse::Ranged;
use crate::parse::ast::Expr;
use crate::rules::zero_grad_every_micro_step::accumulating_optimizers;
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags gradient accumulation (the optimizer steps only under a `%` guard, every k
    /// iterations) where the loss that is backpropagated every iteration is not divided by
    /// the number of accumulation steps. `accelerator.backward(loss)` and DeepSpeed's
    /// `engine.backward(loss)` scale the loss themselves and are not flagged.
    ///
    /// ## Evidence it needs
    /// `optimizer.step()` only under a `%` guard in the loop, `backward` on a loss in every
    /// iteration, and that loss not divided or multiplied anywhere on its way (`loss / k`,
    /// `loss.div_(k)`).
    ///
    /// ## Why it costs memory
    /// Accumulation is how a large effective batch fits in memory; without scaling, the
    /// accumulated gradient is k times too large, the effective learning rate is k times
    /// too high, and users "fix" the divergence by going back to a large per-step batch
    /// that does not fit.
    ///
    /// ## Example
    /// ```python
    /// for i, batch in enumerate(loader):
    ///     loss = model(batch).loss
    ///     loss.backward()
    ///     if (i + 1) % accum_steps == 0:
    ///         optimizer.step()
    ///         optimizer.zero_grad()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for i, batch in enumerate(loader):
    ///     loss = model(batch).loss / accum_steps
    ///     loss.backward()
    ///     if (i + 1) % accum_steps == 0:
    ///         optimizer.step()
    ///         optimizer.zero_grad()
    /// ```
}

/// Gradient accumulation with a loss that is not divided by the accumulation steps.
pub(crate) struct UnscaledGradientAccumulation {
    /// The backpropagated loss (`loss`).
    pub loss: String,
}

impl Violation for UnscaledGradientAccumulation {
    const RULE: Rule = Rule::UnscaledGradientAccumulation;

    fn message(&self) -> String {
        let l = &self.loss;
        format!(
            "`{l}` is backpropagated every iteration but the optimizer steps only under a `%` guard: the accumulated gradient is not divided by the accumulation steps"
        )
    }

    fn fix_title(&self) -> String {
        let l = &self.loss;
        format!("Divide `{l}` by the number of accumulation steps before `.backward()`")
    }
}

/// Runs when a loop's body has been visited.
pub(crate) fn check(ch: &mut Checker<'_>) {
    if !ch.enabled(Rule::UnscaledGradientAccumulation) || accumulating_optimizers(ch).is_none() {
        return;
    }
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    // names scaled in the loop (`loss = loss / k`, `loss /= k`, `loss.div_(k)`), gathered
    // once so that each backward call asks in O(1)
    let mut scaled: HashSet<String> = HashSet::new();
    for (targets, value, aug) in lp.facts.assigns() {
        if *aug || is_scaled(value) {
            scaled.extend(targets.iter().cloned());
        }
    }
    for c in lp.facts.step_calls() {
        if let Expr::Attribute(a) = &*c.call.func
            && matches!(a.attr.as_str(), "div_" | "mul_")
        {
            scaled.insert(text_of(&a.value));
        }
    }
    let mut found = None;
    for site in lp
        .facts
        .step_calls()
        .filter(|c| !c.nested_loop && !c.modulo)
    {
        let Some(loss) = backward_loss(site.call) else {
            continue;
        };
        // accelerate's and DeepSpeed's backward divide by their accumulation steps
        if let Expr::Attribute(a) = &*site.call.func
            && matches!(
                crate::context::last_segment(&a.value),
                Some("accelerator" | "engine" | "model_engine")
            )
        {
            continue;
        }
        if is_scaled(loss) || !ch.kind(loss).has_graph() {
            continue;
        }
        // a loss from an unknown helper may be scaled inside it
        if let Expr::Name(n) = loss
            && ch.scope().graph_by_backward.contains(n.id.as_str())
        {
            continue;
        }
        if let Expr::Name(_) = loss
            && scaled.contains(&text_of(loss))
        {
            continue;
        }
        found = Some((site.call, loss));
        break;
    }
    let Some((call, loss)) = found else { return };
    let l = ch.snippet(loss.range()).to_string();
    ch.report(call.range(), UnscaledGradientAccumulation { loss: l });
}
