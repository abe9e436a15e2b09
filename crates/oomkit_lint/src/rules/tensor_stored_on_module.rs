//! OOM110 `tensor-stored-on-module`.

use crate::context::Checker;
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::Rule;

rule_doc! {
    /// ## What it does
    /// Flags `self.attr = <tensor>` inside `forward` of an `nn.Module` subclass when the
    /// tensor carries an autograd graph (it comes from a layer, a torch op or a tensor
    /// method on the inputs, outside `no_grad` and without `.detach()`).
    ///
    /// ## Evidence it needs
    /// In `forward` of a class with base classes, the stored value carries a graph (from a
    /// submodule, a torch op or a tensor method on the inputs, outside `no_grad`, without
    /// `.detach()`); attributes named like caches or states are excepted.
    ///
    /// ## Why it costs memory
    /// The module outlives the step: the stored tensor keeps its activations and its whole
    /// graph alive until the next forward overwrites it, so the peak holds two steps'
    /// graphs, and a list or dict on `self` grows without bound.
    ///
    /// ## Example
    /// ```python
    /// class Net(nn.Module):
    ///     def forward(self, x):
    ///         h = self.encoder(x)
    ///         self.last_hidden = h
    ///         return self.head(h)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// class Net(nn.Module):
    ///     def forward(self, x):
    ///         h = self.encoder(x)
    ///         self.last_hidden = h.detach()  # or return it
    ///         return self.head(h)
    /// ```
}

/// Runs on every assignment.
pub(crate) fn check(ch: &mut Checker<'_>, a: &ast::StmtAssign) {
    if !ch.enabled(Rule::TensorStoredOnModule) || !ch.scope().is_forward {
        return;
    }
    let Some(self_name) = ch.scope().self_name.clone() else {
        return;
    };
    let [Expr::Attribute(target)] = &*a.targets else {
        return;
    };
    if !matches!(&*target.value, Expr::Name(n) if n.id.as_str() == self_name) {
        return;
    }
    // decode caches and recurrent state are kept on purpose
    let attr = target.attr.as_str().to_ascii_lowercase();
    if attr.contains("cache") || attr.ends_with("state") || attr.ends_with("states") {
        return;
    }
    if !ch.kind(&a.value).has_graph() {
        return;
    }
    let t = ch.snippet(target.range()).to_string();
    let v = ch.snippet(a.value.range()).to_string();
    ch.report(
        Rule::TensorStoredOnModule,
        a.range(),
        format!("`{t} = {v}` in `forward` keeps the activation and its graph alive across steps"),
        format!(
            "Store `{}.detach()` or return it instead",
            ch.receiver_snippet(&a.value)
        ),
        Vec::new(),
    );
}
