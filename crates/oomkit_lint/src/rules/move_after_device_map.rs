//! OOM205 `move-after-device-map`.

use crate::context::{Checker, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `.cuda()` or `.to("cuda")` on a model that was loaded with
    /// `from_pretrained(..., device_map=...)`.
    ///
    /// ## Evidence it needs
    /// The receiver must be a name bound in the same function to `from_pretrained(...,
    /// device_map=...)`.
    ///
    /// ## Why it costs memory
    /// `device_map` already placed (and possibly split or offloaded) the weights across
    /// devices. Moving the whole model to one GPU undoes that: it needs the full model on
    /// that GPU, which is what `device_map` was avoiding, and fails for offloaded or
    /// quantized weights.
    ///
    /// ## Example
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained(name, device_map="auto", dtype="auto")
    /// model = model.to("cuda")
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// model = AutoModelForCausalLM.from_pretrained(name, device_map="auto", dtype="auto")
    /// inputs = inputs.to(model.device)  # move the inputs, not the model
    /// ```
}

/// A move of a model that `device_map=` placed.
pub(crate) struct MoveAfterDeviceMap {
    /// The move as written (`model.cuda()`).
    pub call: String,
}

impl Violation for MoveAfterDeviceMap {
    const RULE: Rule = Rule::MoveAfterDeviceMap;

    fn message(&self) -> String {
        let t = &self.call;
        format!("`{t}` moves a model loaded with `device_map=` onto one GPU, undoing its placement")
    }

    fn fix_title(&self) -> String {
        "Drop the move; send the inputs to `model.device` instead".to_string()
    }
}

fn is_cuda_target(ch: &Checker<'_>, e: &Expr) -> bool {
    match e {
        Expr::StringLiteral(s) => s.value.to_str().starts_with("cuda"),
        Expr::Call(c) => {
            ch.qualified(&c.func).as_deref() == Some("torch.device")
                && c.arguments
                    .args
                    .first()
                    .is_some_and(|a| is_cuda_target(ch, a))
        }
        _ => false,
    }
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::MoveAfterDeviceMap) {
        return;
    }
    let Expr::Attribute(a) = &*call.func else {
        return;
    };
    let recv = text_of(&a.value);
    if recv.is_empty() || !ch.scope().device_map_models.contains(&recv) {
        return;
    }
    let moves = match a.attr.as_str() {
        "cuda" => true,
        "to" => call
            .arguments
            .args
            .first()
            .or(call.arguments.find_keyword("device").map(|k| &k.value))
            .is_some_and(|t| is_cuda_target(ch, t)),
        _ => false,
    };
    if !moves {
        return;
    }
    let t = ch.snippet(call.range()).to_string();
    ch.report(call.range(), MoveAfterDeviceMap { call: t });
}
