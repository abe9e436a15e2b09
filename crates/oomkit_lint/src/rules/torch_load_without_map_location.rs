//! OOM202 `torch-load-without-map-location`.

use crate::context::Checker;
use crate::parse::Ranged;
use crate::parse::ast;
use crate::rules::Rule;

rule_doc! {
    /// ## What it does
    /// Flags `torch.load(...)` (through any alias) without `map_location` (keyword or second
    /// positional argument).
    ///
    /// ## Why it costs memory
    /// Without `map_location`, every tensor goes back to the device it was saved from,
    /// usually GPU 0: every rank of a multi-GPU job then loads a full copy onto GPU 0, and a
    /// checkpoint meant to be inspected on the CPU takes GPU memory.
    ///
    /// ## Example
    /// ```python
    /// state = torch.load("checkpoint.pt")
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// state = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
    /// ```
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::TorchLoadWithoutMapLocation) {
        return;
    }
    if ch.qualified(&call.func).as_deref() != Some("torch.load") {
        return;
    }
    let args = &call.arguments;
    if args.args.len() >= 2
        || args.args.iter().any(ast::Expr::is_starred_expr)
        || args
            .keywords
            .iter()
            .any(|k| k.arg.as_ref().is_none_or(|a| a.as_str() == "map_location"))
    {
        return;
    }
    let t = ch.snippet(call.func.range()).to_string();
    ch.report(
        Rule::TorchLoadWithoutMapLocation,
        call.range(),
        format!("`{t}(...)` without `map_location` puts tensors back on the device they were saved from (often GPU 0)"),
        "Pass `map_location=\"cpu\"` (or the target device)".to_string(),
        Vec::new(),
    );
}
