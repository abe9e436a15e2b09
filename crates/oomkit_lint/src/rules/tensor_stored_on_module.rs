//! OOM110 `tensor-stored-on-module`.

use crate::context::Checker;
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `self.attr = <tensor>` inside `forward` of an `nn.Module` subclass when the
    /// tensor carries an autograd graph (it comes from a layer, a torch op or a tensor
    /// method on the inputs, outside `no_grad` and without `.detach()`).
    ///
    /// ## Evidence it needs
    /// In `forward` of a class with base classes, the stored value carries a graph (from a
    /// submodule, a torch op or a tensor method on the inputs, outside `no_grad`, without
    /// `.detach()`); attributes named like caches or states are excepted. An input on
    /// which `.retain_grad()` is called (directly or through the attribute it is stored
    /// in) carries a graph — `retain_grad` only works inside one (growingnet/gromo#135) —
    /// and the attribute it is retained in is kept for its gradient, on purpose.
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

/// A graph-carrying value stored on the module in `forward`.
pub(crate) struct TensorStoredOnModule {
    /// The attribute (`self.feat`).
    pub target: String,
    /// The value stored (`x`).
    pub value: String,
    /// The value's receiver, where `.detach()` goes.
    pub receiver: String,
}

impl Violation for TensorStoredOnModule {
    const RULE: Rule = Rule::TensorStoredOnModule;

    fn message(&self) -> String {
        let (t, v) = (&self.target, &self.value);
        format!("`{t} = {v}` in `forward` keeps the activation and its graph alive across steps")
    }

    fn fix_title(&self) -> String {
        format!("Store `{}.detach()` or return it instead", self.receiver)
    }
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
    // `self.input = x` … `self.input.retain_grad()`: kept for its gradient, on purpose
    let stored = format!("{self_name}.{}", target.attr.as_str());
    let retained = ch.scope().facts.calls().any(|site| {
        matches!(&*site.call.func, Expr::Attribute(r)
            if r.attr.as_str() == "retain_grad" && crate::context::text_of(&r.value) == stored)
    });
    if retained {
        return;
    }
    let t = ch.snippet(target.range()).to_string();
    let v = ch.snippet(a.value.range()).to_string();
    let receiver = ch.receiver_snippet(&a.value);
    ch.report(
        a.range(),
        TensorStoredOnModule {
            target: t,
            value: v,
            receiver,
        },
    );
}
