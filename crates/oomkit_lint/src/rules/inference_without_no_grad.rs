//! OOM104 `inference-without-no-grad`.

use crate::context::{Checker, backward_loss, text_of};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags a call of the model outside `torch.no_grad()`/`torch.inference_mode()` (as a
    /// `with` block or a decorator) after `model.eval()`, or inside a function named like
    /// an inference routine (`evaluate`, `validate`, `predict`, `infer`, `generate`…) that
    /// does no training itself. Lightning's `*_step` hooks are not flagged: Lightning
    /// disables grad for them.
    ///
    /// ## Evidence it needs
    /// A call of the model with gradients on (no `with torch.no_grad()`/`inference_mode()`
    /// around it, no such decorator, project wrappers named after them included:
    /// YOLOv5's `@smart_inference_mode()`; no `stack.enter_context(torch.no_grad())` on
    /// an `ExitStack` before it, no `torch.set_grad_enabled(False)`), whose result is
    /// kept (a warm-up `model(example)` on a line of its own drops its graph at once),
    /// where the code shows inference:
    /// - after `model.eval()` (on that same model, with no `model.train()` in between, in
    ///   source order), inside a loop over data that does not backpropagate: this holds
    ///   even in a function that trains in another loop;
    /// - or, in a function that does no training itself (no backward, `.train()`,
    ///   `enable_grad`), after `model.eval()` or in a function named like an inference
    ///   routine.
    ///
    /// The call may also be a method of the same class that runs the model put in eval
    /// mode (`self.module_.eval()`, then `self.infer(x)` whose body calls
    /// `self.module_(x)`) and never turns gradients off itself: skorch's
    /// `validation_step` before skorch-dev/skorch#219.
    ///
    /// Not flagged where gradients are off around the function after all: a decorator
    /// defined in the same file whose body turns them off (a wrapper with
    /// `with torch.no_grad():` or an inner `@torch.no_grad()`), or a function that the
    /// file calls only from `no_grad` regions (`with torch.no_grad(): evaluate(...)`).
    /// Lightning's `*_step` hooks are not flagged; JAX/TensorFlow-only files are not
    /// checked at all.
    ///
    /// ## Why it costs memory
    /// `model.eval()` only switches dropout and batch-norm behaviour; autograd still
    /// records the graph and keeps every activation of the forward pass alive until the
    /// output is freed. Under `no_grad`/`inference_mode` activations are freed layer by
    /// layer, which typically cuts inference memory several times.
    ///
    /// ## Example
    /// ```python
    /// model.eval()
    /// for batch in loader:
    ///     preds = model(batch)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// model.eval()
    /// with torch.inference_mode():
    ///     for batch in loader:
    ///         preds = model(batch)
    /// ```
}

/// A model called for inference with gradients on.
pub(crate) struct InferenceWithoutNoGrad {
    /// The model called.
    pub callee: String,
    /// Where (`after `model.eval()``, `in `evaluate``).
    pub why: String,
}

impl Violation for InferenceWithoutNoGrad {
    const RULE: Rule = Rule::InferenceWithoutNoGrad;

    fn message(&self) -> String {
        let (callee, why) = (&self.callee, &self.why);
        format!(
            "`{callee}` is called {why} outside `torch.no_grad()`/`torch.inference_mode()`: autograd keeps every activation"
        )
    }

    fn fix_title(&self) -> String {
        "Wrap inference in `with torch.inference_mode():`".to_string()
    }
}

const INFERENCE_WORDS: &[&str] = &[
    "eval",
    "evaluate",
    "evaluation",
    "validate",
    "validation",
    "val",
    "predict",
    "prediction",
    "infer",
    "inference",
    "generate",
    "generation",
];

fn inference_named(name: &str) -> bool {
    !name.ends_with("_step")
        && name
            .to_ascii_lowercase()
            .split('_')
            .any(|w| INFERENCE_WORDS.contains(&w))
}

/// Whether `func` is `self.method` of the enclosing class whose body calls one of the
/// models in eval mode (`self.module_(x)`, `self.module_.forward(x)`) and never turns
/// gradients off itself.
fn runs_eval_model(ch: &Checker<'_>, func: &Expr, eval_models: &[String]) -> Option<String> {
    let me = ch.scope().self_name.as_deref()?;
    let Expr::Attribute(a) = func else {
        return None;
    };
    if !matches!(&*a.value, Expr::Name(n) if n.id.as_str() == me) || eval_models.is_empty() {
        return None;
    }
    let at = func.range();
    let method = ch.module().body.iter().find_map(|s| match s {
        ast::Stmt::ClassDef(c) if c.range().contains_range(at) => {
            c.body.iter().find_map(|m| match m {
                ast::Stmt::FunctionDef(f) if f.name.as_str() == a.attr.as_str() => Some(f),
                _ => None,
            })
        }
        _ => None,
    })?;
    let param = method
        .parameters
        .posonlyargs
        .iter()
        .chain(method.parameters.args.iter())
        .next()?;
    let own = param.parameter.name.as_str();
    let text = ch.text(method.range());
    if text.contains("no_grad") || text.contains("inference_mode") || text.contains("set_grad_enabled")
    {
        return None;
    }
    let facts = crate::context::BodyFacts::of(&method.body);
    facts.all_calls().find_map(|c| {
        let callee = match &*c.func {
            Expr::Attribute(f) if f.attr.as_str() == "forward" => text_of(&f.value),
            f => text_of(f),
        };
        // the same attribute through the method's own `self`
        let rest = callee.strip_prefix(own)?;
        eval_models
            .iter()
            .find(|m| m.strip_prefix(me) == Some(rest))
            .cloned()
    })
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::InferenceWithoutNoGrad) {
        return;
    }
    // track `.eval()` / `.train()` on the receiver
    if let Expr::Attribute(a) = &*call.func {
        let recv = text_of(&a.value);
        match a.attr.as_str() {
            "eval" if call.arguments.is_empty() && !recv.is_empty() => {
                let scope = ch.scope_mut();
                scope.eval_models.push(recv);
                return;
            }
            "train" => {
                let scope = ch.scope_mut();
                scope.eval_models.retain(|m| *m != recv);
                return;
            }
            _ => {}
        }
    }
    let scope = ch.scope();
    if !ch.grad_enabled() || scope.reported_inference {
        return;
    }
    // a call whose result is dropped at once (a warm-up `model(example)`): its graph is
    // freed as soon as the statement ends
    if ch.discarded == Some(call.range()) {
        return;
    }
    let callee = text_of(&call.func);
    if callee.is_empty() {
        return;
    }
    // `self.infer(x)` whose body runs the model put in eval mode here (`self.module_`):
    // the helper's forward records the graph (skorch's `validation_step` before
    // skorch-dev/skorch#219)
    let through_helper = if scope.eval_models.contains(&callee) {
        None
    } else {
        runs_eval_model(ch, &call.func, &scope.eval_models)
    };
    let after_eval = scope.eval_models.contains(&callee) || through_helper.is_some();
    // methods and private helpers are called by frameworks that may disable grad
    let named = scope.self_name.is_none()
        && !scope.name.starts_with('_')
        && inference_named(&scope.name)
        && ch.is_model_callee(&call.func);
    if !after_eval && !named {
        return;
    }
    // Flow-sensitive after `.eval()`: in a loop that does not backpropagate, the
    // `.eval()` before it is the evidence, even in a function that trains elsewhere
    // (a `model.train()` later or in another loop does not hide it). Outside a loop,
    // or by name only, a function that trains (backward, .train(), enable_grad) is not
    // inference.
    let in_eval_loop = after_eval
        && ch.innermost_loop().is_some_and(|l| {
            l.is_data_loop
                && !l
                    .facts
                    .step_calls()
                    .any(|c| backward_loss(c.call).is_some())
        });
    if scope.trains && !in_eval_loop {
        return;
    }
    // Gradients are off around this function after all: a decorator of this file
    // that wraps it in `no_grad`, or every call of it in the file runs under `no_grad`.
    let scope = ch.scope();
    if !scope.name.is_empty() {
        let name = scope.name.clone();
        let decorators = scope.decorators.clone();
        let file = ch.file();
        if decorators
            .iter()
            .any(|d| file.grad_off_functions.contains(d))
            || file.called_only_without_grad(&name)
        {
            return;
        }
    }
    let why = if let Some(model) = &through_helper {
        format!("(it runs `{model}`) after `{model}.eval()`")
    } else if after_eval {
        format!("after `{callee}.eval()`")
    } else {
        format!("in `{}`", scope.name)
    };
    ch.scope_mut().reported_inference = true;
    ch.report(
        call.range(),
        InferenceWithoutNoGrad {
            callee: callee.to_string(),
            why,
        },
    );
}
