//! OOM105 `empty-cache-in-loop`.

use crate::context::Checker;
use crate::parse::Ranged;
use crate::parse::ast;
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `torch.cuda.empty_cache()` called unconditionally in every step of a loop
    /// over data or steps (not under an `if` or in an `except` handler of that loop; a
    /// loop over models or phases, and an epoch loop, are fine).
    ///
    /// ## Evidence it needs
    /// The call must run every *step*: directly in the body of the innermost loop over data
    /// or steps (not under an `if`, not in an `except` handler), and that loop must contain
    /// no inner loop (an epoch loop around a batch loop empties the cache once per epoch,
    /// which is fine) and must not be named like an epoch loop (`for epoch in …`).
    ///
    /// ## Why it costs memory
    /// `empty_cache()` only returns *unused* cached blocks to the driver; it cannot free
    /// tensors that are still referenced, so it does not fix a leak. Every step then has to
    /// `cudaMalloc` its memory again, which synchronises the device and slows training,
    /// and memory fragmentation is unchanged.
    ///
    /// ## Example
    /// ```python
    /// for batch in loader:
    ///     loss = train_step(batch)
    ///     torch.cuda.empty_cache()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for batch in loader:
    ///     loss = train_step(batch)
    /// del model, optimizer  # between phases, after dropping references
    /// torch.cuda.empty_cache()
    /// ```
}

/// `torch.cuda.empty_cache()` in every step of a data loop.
pub(crate) struct EmptyCacheInLoop;

impl Violation for EmptyCacheInLoop {
    const RULE: Rule = Rule::EmptyCacheInLoop;

    fn message(&self) -> String {
        "`torch.cuda.empty_cache()` runs every step: it slows each step and cannot free tensors that are still referenced".to_string()
    }

    fn fix_title(&self) -> String {
        "Drop references to the tensors instead, and empty the cache once between phases"
            .to_string()
    }
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::EmptyCacheInLoop) {
        return;
    }
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    // per step only: an epoch loop (named so, or around an inner loop) is fine
    if !lp.is_data_loop
        || lp.if_depth > 0
        || lp.except_depth > 0
        || lp.is_epoch_loop
        || lp.facts.has_inner_loop()
    {
        return;
    }
    if ch.qualified(&call.func).as_deref() != Some("torch.cuda.empty_cache") {
        return;
    }
    ch.report(call.range(), EmptyCacheInLoop);
}
