//! OOM111 `hook-stores-activation` (preview).

use crate::context::{BodyFacts, Checker, mentions};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags a forward hook that stores its input or output tensor (`acts.append(out)`,
    /// `acts[name] = out`, `self.feat = out`) without `.detach()`.
    ///
    /// ## Evidence it needs
    /// The function is registered in the same file with `register_forward_hook(f)`
    /// (directly, through `functools.partial`, or as the inner function of a factory:
    /// `register_forward_hook(get_activation("fc"))`), it takes `(module, input,
    /// output)`, and it appends, extends or assigns into a subscript or an attribute a
    /// value that mentions `input` or `output` without `.detach()`, `.cpu()`, `.data`,
    /// `.item()`, `.numpy()` or `.tolist()`.
    ///
    /// ## Why it costs memory
    /// A forward hook runs inside the forward pass, where the output still carries the
    /// autograd graph of the whole model up to that layer. Storing it keeps that graph
    /// (every activation it depends on) alive until the container is cleared; collected
    /// over an epoch, it grows until the GPU runs out (meta-pytorch/opacus#176: forward
    /// hooks that keep activations leak; chr5tphr/zennit#13 fixed hooks holding tensor
    /// references).
    ///
    /// ## Example
    /// ```python
    /// def hook(module, inputs, output):
    ///     features.append(output)
    /// model.layer4.register_forward_hook(hook)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// def hook(module, inputs, output):
    ///     features.append(output.detach())
    /// ```
}

/// A forward hook that stores its input or output with the graph.
pub(crate) struct HookStoresActivation {
    /// The hook function's name.
    pub name: String,
}

impl Violation for HookStoresActivation {
    const RULE: Rule = Rule::HookStoresActivation;

    fn message(&self) -> String {
        let name = &self.name;
        format!(
            "forward hook `{name}` stores a tensor with its autograd graph: every stored activation keeps the graph of the model up to that layer alive"
        )
    }

    fn fix_title(&self) -> String {
        "Store `output.detach()` (or `.cpu()` to keep it off the GPU)".to_string()
    }
}

/// Text that cuts the graph or moves a value to the host.
const SAFE: &[&str] = &[
    ".detach(", ".cpu(", ".data", ".item(", ".numpy(", ".tolist(",
];

/// Runs on every function definition (before its body is visited).
pub(crate) fn check<'a>(ch: &mut Checker<'a>, f: &'a ast::StmtFunctionDef) {
    if !ch.enabled(Rule::HookStoresActivation) {
        return;
    }
    let name = f.name.as_str();
    let hooks = &ch.file().forward_hooks;
    // the hook itself, or the function defined inside a registered factory
    if !hooks.contains(name) && !hooks.contains(ch.scope().name.as_str()) {
        return;
    }
    let params: Vec<&str> = f
        .parameters
        .posonlyargs
        .iter()
        .chain(f.parameters.args.iter())
        .map(|p| p.parameter.name.as_str())
        .collect();
    let tensors: Vec<&str> = match params.as_slice() {
        ["self", _, i, o] | [_, i, o] => vec![*i, *o],
        _ => return,
    };
    let facts = BodyFacts::of(&f.body);
    let stores = |value: &Expr| {
        let text = ch.text(value.range());
        tensors.iter().any(|t| mentions(value, t)) && !SAFE.iter().any(|s| text.contains(s))
    };
    let mut found = None;
    for call in facts.all_calls() {
        if let Expr::Attribute(a) = &*call.func
            && matches!(a.attr.as_str(), "append" | "extend")
            && call.arguments.args.iter().any(&stores)
        {
            found = Some(call.range());
            break;
        }
    }
    if found.is_none() {
        found = stored_assignment(&f.body, &stores, 0);
    }
    let Some(range) = found else { return };
    ch.report(
        range,
        HookStoresActivation {
            name: name.to_string(),
        },
    );
}

/// The first `x[k] = v` / `x.attr = v` in `body` (at any nesting of `if`/`with`/`for`/
/// `try`) whose value `stores`.
fn stored_assignment(
    body: &[ast::Stmt],
    stores: &dyn Fn(&Expr) -> bool,
    depth: usize,
) -> Option<crate::parse::TextRange> {
    if depth > crate::parse::depth::MAX_NESTING {
        return None;
    }
    let deeper = depth.saturating_add(1);
    body.iter().find_map(|s| match s {
        ast::Stmt::Assign(a)
            if a.targets
                .iter()
                .any(|t| matches!(t, Expr::Subscript(_) | Expr::Attribute(_)))
                && stores(&a.value) =>
        {
            Some(a.range())
        }
        ast::Stmt::If(i) => stored_assignment(&i.body, stores, deeper).or_else(|| {
            i.elif_else_clauses
                .iter()
                .find_map(|c| stored_assignment(&c.body, stores, deeper))
        }),
        ast::Stmt::With(w) => stored_assignment(&w.body, stores, deeper),
        ast::Stmt::For(l) => stored_assignment(&l.body, stores, deeper),
        ast::Stmt::Try(t) => stored_assignment(&t.body, stores, deeper),
        _ => None,
    })
}
