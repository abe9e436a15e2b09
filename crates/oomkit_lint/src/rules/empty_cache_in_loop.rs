//! OOM105 `empty-cache-in-loop`.

use crate::context::Checker;
use crate::parse::Ranged;
use crate::parse::ast;
use crate::rules::Rule;

rule_doc! {
    /// ## What it does
    /// Flags `torch.cuda.empty_cache()` called unconditionally in the body of a loop over
    /// data or steps (not under an `if` or in an `except` handler of that loop; a loop
    /// over models or phases is fine).
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

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::EmptyCacheInLoop) {
        return;
    }
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    if !lp.is_data_loop || lp.if_depth > 0 || lp.except_depth > 0 {
        return;
    }
    if ch.qualified(&call.func).as_deref() != Some("torch.cuda.empty_cache") {
        return;
    }
    ch.report(
        Rule::EmptyCacheInLoop,
        call.range(),
        "`torch.cuda.empty_cache()` runs every iteration: it slows each step and cannot free tensors that are still referenced".to_string(),
        "Drop references to the tensors instead, and empty the cache once between phases".to_string(),
        Vec::new(),
    );
}
