//! OOM112 `hidden-state-not-detached` (preview).

use crate::context::{Checker, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags a recurrent state carried from one batch to the next with its graph:
    /// `out, hidden = model(x, hidden)` in a loop over data where `hidden` is never
    /// detached or re-created in the loop.
    ///
    /// ## Evidence it needs
    /// In a loop over data or steps, with gradients on: one statement binds a name from
    /// a model call (a model, or a module named like one: `rnn`, `lstm`, `gru`) that
    /// takes that same name as an argument (`(h, c)` tuples included), and nothing else
    /// in the loop assigns it (`hidden = repackage_hidden(hidden)`,
    /// `hidden = hidden.detach()`, `hidden = model.init_hidden(bs)`) or calls
    /// `hidden.detach_()`.
    ///
    /// ## Why it costs memory
    /// The new state is computed from the old one, so its autograd graph reaches back
    /// through every batch since the start: memory grows each step until it runs out
    /// (pytorch/pytorch#2198: "out and hidden will hold the whole history"), and
    /// `backward` walks the whole history too. pytorch/examples' word_language_model
    /// detaches the state at the start of each batch (`repackage_hidden`) for this.
    ///
    /// ## Example
    /// ```python
    /// hidden = model.init_hidden(batch_size)
    /// for batch, (x, y) in enumerate(loader):
    ///     output, hidden = model(x, hidden)
    ///     criterion(output, y).backward()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// for batch, (x, y) in enumerate(loader):
    ///     hidden = repackage_hidden(hidden)  # detach from the previous batch
    ///     output, hidden = model(x, hidden)
    /// ```
}

/// A recurrent state fed back into the model every batch without `.detach()`.
pub(crate) struct HiddenStateNotDetached {
    /// The carried state (`hidden`).
    pub carried: String,
    /// The model called (`model`).
    pub model: String,
}

impl Violation for HiddenStateNotDetached {
    const RULE: Rule = Rule::HiddenStateNotDetached;

    fn message(&self) -> String {
        let (carried, m) = (&self.carried, &self.model);
        format!(
            "`{carried}` is fed back into `{m}` every batch without `.detach()`: its graph grows through every batch since the start"
        )
    }

    fn fix_title(&self) -> String {
        let carried = &self.carried;
        format!(
            "Detach it at the start of each batch (`{carried} = {carried}.detach()`, or `repackage_hidden` for tuples)"
        )
    }
}

/// Whether `arg` is `name` itself or a tuple/list holding it.
fn passes(arg: &Expr, name: &str) -> bool {
    match arg {
        Expr::Name(n) => n.id.as_str() == name,
        Expr::Tuple(t) => t.elts.iter().any(|e| passes(e, name)),
        Expr::List(t) => t.elts.iter().any(|e| passes(e, name)),
        _ => false,
    }
}

/// The names bound by a target (`out, (h, c)` → `out`, `h`, `c`); tuples nested deeper
/// than a few levels are not state.
fn bound_names<'e>(target: &'e Expr, out: &mut Vec<&'e str>, depth: u8) {
    match target {
        Expr::Name(n) => out.push(n.id.as_str()),
        Expr::Tuple(t) if depth < 4 => t
            .elts
            .iter()
            .for_each(|e| bound_names(e, out, depth.saturating_add(1))),
        _ => {}
    }
}

/// Runs on every assignment.
pub(crate) fn check(ch: &mut Checker<'_>, a: &ast::StmtAssign) {
    if !ch.enabled(Rule::HiddenStateNotDetached) {
        return;
    }
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    let [target] = &*a.targets else { return };
    let Expr::Call(call) = &*a.value else { return };
    if !lp.is_data_loop || !ch.kind(&a.value).has_graph() {
        return;
    }
    let mut names = Vec::new();
    bound_names(target, &mut names, 0);
    let args = || {
        call.arguments
            .args
            .iter()
            .chain(call.arguments.keywords.iter().map(|k| &k.value))
    };
    let Some(carried) = names.into_iter().find(|n| args().any(|arg| passes(arg, n))) else {
        return;
    };
    // another assignment to it in the loop (detached, re-created) or `h.detach_()`
    let reset = lp.facts.assigns().iter().any(|(targets, value, _)| {
        !std::ptr::eq(*value, &*a.value) && targets.iter().any(|t| t == carried)
    }) || lp.facts.calls().any(|c| {
        matches!(&*c.call.func, Expr::Attribute(at)
            if at.attr.as_str() == "detach_" && text_of(&at.value) == carried)
    });
    if reset {
        return;
    }
    let m = ch.snippet(call.func.range());
    ch.report(
        a.range(),
        HiddenStateNotDetached {
            carried: carried.to_string(),
            model: m.to_string(),
        },
    );
}
