//! OOM114 `outputs-kept-on-gpu`.

use crate::context::{Checker, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `outputs.append(out)` in a loop over data under `torch.no_grad()` /
    /// `inference_mode()` (or in a function decorated so) when `out` is a model's output
    /// still on the device: predictions gathered batch by batch over a whole loader on
    /// the GPU, to be concatenated after the loop.
    ///
    /// ## Evidence it needs
    /// Gradients are off (so this is not OOM101's graph leak); the value is the result
    /// of a model or `forward` call, not moved by `.cpu()`, `.tolist()`, `.numpy()` or
    /// `.item()`; the list is created outside the loop; the loop is over data; and the
    /// file uses CUDA (`cuda` appears in it). A list re-created in the loop, or outputs
    /// moved to the CPU first, are not flagged.
    ///
    /// ## Why it costs memory
    /// Every batch's outputs (logits, features, generated images) stay on the GPU until
    /// the loop ends: memory grows with the size of the evaluation set, and large
    /// validation sets fail with an out-of-memory error long after training fit. Real
    /// bug: SPOClab-ca/dn3 issue #38, fixed in commit 407459a ("Offloads
    /// prediction/evaluations from GPU"), which moves each batch to the CPU.
    ///
    /// ## Example
    /// ```python
    /// with torch.no_grad():
    ///     for x, _ in loader:
    ///         preds.append(model(x.cuda()))
    /// ```
    ///
    /// ## Use instead
    /// ```python
    ///         preds.append(model(x.cuda()).cpu())
    /// ```
}

/// A model's outputs collected on the GPU over a whole loop under `no_grad`.
pub(crate) struct OutputsKeptOnGpu {
    /// The list (`preds`).
    pub list: String,
    /// The value appended (`model(x)`).
    pub value: String,
}

impl Violation for OutputsKeptOnGpu {
    const RULE: Rule = Rule::OutputsKeptOnGpu;

    fn message(&self) -> String {
        let (l, v) = (&self.list, &self.value);
        format!("`{l}` keeps every batch's `{v}` on the GPU until the loop over the data ends")
    }

    fn fix_title(&self) -> String {
        format!(
            "Append `{}.cpu()` (or the reduced numbers) instead",
            self.value
        )
    }
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::OutputsKeptOnGpu) || ch.grad_enabled() {
        return;
    }
    let Expr::Attribute(a) = &*call.func else {
        return;
    };
    let ("append", [value]) = (a.attr.as_str(), &*call.arguments.args) else {
        return;
    };
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    let list = text_of(&a.value);
    if !lp.is_data_loop || list.is_empty() || lp.facts.assigned(&list) {
        return;
    }
    if !is_model_output(ch, value) || !ch.source_mentions_cuda() {
        return;
    }
    let l = ch.snippet(a.value.range()).to_string();
    let v = ch.snippet(value.range()).to_string();
    ch.report(call.range(), OutputsKeptOnGpu { list: l, value: v });
}

/// A model or `forward` call, or a name last bound to one ([`note_assign`]).
fn is_model_output(ch: &Checker<'_>, value: &Expr) -> bool {
    match value {
        Expr::Call(c) => is_model_call(ch, c),
        Expr::Name(n) => ch.model_outputs.contains(n.id.as_str()),
        _ => false,
    }
}

fn is_model_call(ch: &Checker<'_>, c: &ast::ExprCall) -> bool {
    ch.is_model_callee(&c.func)
        || matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "forward")
}

/// Runs on every assignment: remembers the names bound to a model's output
/// (`out = model(x)`), forgets names bound to anything else.
pub(crate) fn note_assign(ch: &mut Checker<'_>, a: &ast::StmtAssign) {
    if !ch.enabled(Rule::OutputsKeptOnGpu) {
        return;
    }
    let output = matches!(&*a.value, Expr::Call(c) if is_model_call(ch, c));
    for t in &a.targets {
        if let Expr::Name(n) = t {
            if output {
                ch.model_outputs.insert(n.id.to_string());
            } else {
                ch.model_outputs.remove(n.id.as_str());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    fn codes(src: &str) -> Vec<(&'static str, usize)> {
        let settings = crate::Settings {
            rules: crate::RuleSet::matching("OOM114").expect("code"),
            ..crate::Settings::default()
        };
        crate::lint_source("t.py", src, &settings)
            .expect("parses")
            .iter()
            .map(|d| (d.code, d.line))
            .collect()
    }

    #[test]
    fn follows_names_bound_to_outputs_and_needs_no_grad_cuda_and_an_outer_list() {
        let body = "import torch\ndef evaluate(model, loader):\n    preds = []\n    with torch.no_grad():\n        for x, _ in loader:\n            out = model(x.cuda())\n            preds.append(out)\n    return torch.cat(preds)\n";
        assert_eq!(codes(body), vec![("OOM114", 7)]);
        // moved to the CPU, or rebound to something else first
        assert!(codes(&body.replace("append(out)", "append(out.cpu())")).is_empty());
        assert!(codes(&body.replace("append(out)", "append(out.argmax(1).tolist())")).is_empty());
        let rebound = body.replace(
            "            preds.append",
            "            out = out.cpu()\n            preds.append",
        );
        assert!(codes(&rebound).is_empty());
        // gradients on (OOM101's case), no CUDA in the file, a list made per batch
        assert!(codes(&body.replace("with torch.no_grad():", "if loader:")).is_empty());
        assert!(codes(&body.replace(".cuda()", "")).is_empty());
        let per_batch = body.replace(
            "            out = model",
            "            preds = []\n            out = model",
        );
        assert!(codes(&per_batch).is_empty());
    }
}
