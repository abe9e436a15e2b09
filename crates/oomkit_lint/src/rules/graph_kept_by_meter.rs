//! OOM113 `graph-kept-by-meter`.

use crate::context::{Checker, last_segment, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `meter.update(value, …)` inside a loop over data or steps when `meter` is an
    /// averaging meter created outside the loop (`losses = AverageMeter()`, any class
    /// whose name ends in `Meter`) and `value` carries an autograd graph (a loss or model
    /// output not reduced by `.item()`, `.detach()`, `float()`…).
    ///
    /// ## Evidence it needs
    /// The value must carry a graph (it comes from a model call or a loss, outside
    /// `no_grad`, or it is backpropagated); the meter must outlive the iteration; and the
    /// meter's class must keep what it is given. A meter class defined in the file whose
    /// `update` converts its argument itself (`val.item()`, `float(val)`, `val.detach()`,
    /// an `isinstance(val, torch.Tensor)` branch) is not flagged — nor are loggers that
    /// convert (TensorBoard's `add_scalar`, DETR/torchvision's `MetricLogger.update`,
    /// Lightning's `self.log`, torchmetrics metrics, whose updates run without
    /// gradients): they are not meters by this rule's name test.
    ///
    /// ## Why it costs memory
    /// The classic `AverageMeter.update(val, n)` stores `val` and adds `val * n` to a
    /// running sum: with a tensor, every step's graph (all its saved activations) stays
    /// reachable from the meter, and the running sum chains them together, so memory
    /// grows until the epoch ends or the GPU runs out. Real bug: lyq133/LIC-HPCM, fixed
    /// in commit 6d88b8a ("Fix AverageMeter": `val = val.detach().item()` in `update`).
    ///
    /// ## Example
    /// ```python
    /// losses = AverageMeter()
    /// for x, y in loader:
    ///     loss = criterion(model(x), y)
    ///     loss.backward()
    ///     losses.update(loss, x.size(0))
    /// ```
    ///
    /// ## Use instead
    /// ```python
    ///     losses.update(loss.item(), x.size(0))
    /// ```
}

/// A graph-carrying value handed to an averaging meter that outlives the step.
pub(crate) struct GraphKeptByMeter {
    /// The meter's class (`AverageMeter`).
    pub class: String,
    /// The meter (`losses`).
    pub meter: String,
    /// The value as written (`loss`).
    pub value: String,
    /// The value's receiver, where `.item()` goes.
    pub receiver: String,
}

impl Violation for GraphKeptByMeter {
    const RULE: Rule = Rule::GraphKeptByMeter;

    fn message(&self) -> String {
        let (class, m, v) = (&self.class, &self.meter, &self.value);
        format!(
            "the `{class}` `{m}` keeps `{v}` and its autograd graph alive across the loop's steps"
        )
    }

    fn fix_title(&self) -> String {
        let (class, r) = (&self.class, &self.receiver);
        format!("Pass `{r}.item()` to the meter (or convert in `{class}.update`)")
    }
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::GraphKeptByMeter) {
        return;
    }
    let Expr::Attribute(a) = &*call.func else {
        return;
    };
    if a.attr.as_str() != "update" {
        return;
    }
    let Some(value) = call.arguments.args.first() else {
        return;
    };
    let Expr::Name(meter) = &*a.value else {
        return;
    };
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    if !lp.is_data_loop || lp.facts.assigned(meter.id.as_str()) {
        return;
    }
    if !ch.kind(value).has_graph() {
        return;
    }
    let file = ch.file();
    let Some(class) = file.meters.get(meter.id.as_str()) else {
        return;
    };
    if file.converting_meters.contains(class.as_str()) {
        return;
    }
    let m = text_of(&a.value);
    let v = ch.snippet(value.range()).to_string();
    let r = ch.receiver_snippet(value);
    ch.report(
        call.range(),
        GraphKeptByMeter {
            class: class.to_string(),
            meter: m,
            value: v,
            receiver: r,
        },
    );
}

/// The meter class a call builds (`AverageMeter()`, `utils.AvgMeter(...)`): a class
/// name ending in `Meter`.
pub(crate) fn meter_class(value: &Expr) -> Option<&str> {
    let Expr::Call(c) = value else {
        return None;
    };
    last_segment(&c.func).filter(|n| n.ends_with("Meter") && n.len() > "Meter".len())
}
