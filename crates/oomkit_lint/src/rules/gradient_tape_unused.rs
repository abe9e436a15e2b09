//! OOM117 `gradient-tape-unused` (preview; runs on TensorFlow/Keras-only files).

use crate::context::Checker;
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `with tf.GradientTape() as tape:` when the function never takes a gradient
    /// from `tape` (no `tape.gradient(...)`, `tape.jacobian(...)` or
    /// `tape.batch_jacobian(...)`) and never hands it on: an evaluation or inference step
    /// recorded on a tape it does not use.
    ///
    /// ## Evidence it needs
    /// A `GradientTape` (imported from `tensorflow` or `keras`, or `tf.GradientTape`)
    /// bound by `as NAME`, a block that calls something (a model), and, in the whole
    /// function, no use of `NAME` other than `NAME.watch(...)`/`NAME.stop_recording()`:
    /// not passed to a call (`optimizer.minimize(loss, vars, tape=tape)`), returned,
    /// stored or yielded. A tape made with `persistent=True` and a tape in a function
    /// that takes its gradient anywhere are not flagged.
    ///
    /// ## Why it costs memory
    /// A tape records every operation run in its block and keeps the tensors each
    /// backward formula needs (the activations) until it is garbage-collected: an
    /// evaluation step under a tape holds a training step's worth of activations for
    /// nothing, and the batch size that fits is the training one, not the inference one
    /// (`tf.GradientTape`'s documentation: "By default, the resources held by a
    /// GradientTape are released as soon as GradientTape.gradient() method is called",
    /// <https://www.tensorflow.org/api_docs/python/tf/GradientTape>).
    ///
    /// ## Example
    /// ```python
    /// def eval_step(model, x, y):
    ///     with tf.GradientTape() as tape:
    ///         pred = model(x, training=False)
    ///         loss = loss_fn(y, pred)
    ///     return loss
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// def eval_step(model, x, y):
    ///     pred = model(x, training=False)
    ///     return loss_fn(y, pred)
    /// ```
}

/// A gradient tape whose gradient is never taken.
pub(crate) struct GradientTapeUnused {
    /// The tape's name (`tape`).
    pub tape: String,
}

impl Violation for GradientTapeUnused {
    const RULE: Rule = Rule::GradientTapeUnused;

    fn message(&self) -> String {
        let t = &self.tape;
        format!(
            "`{t}` records every operation of the block but no gradient is ever taken from it: it keeps the block's activations alive for nothing"
        )
    }

    fn fix_title(&self) -> String {
        "Run the block without a `GradientTape`".to_string()
    }
}

/// Runs on every `with` statement.
pub(crate) fn check(ch: &mut Checker<'_>, w: &ast::StmtWith) {
    if !ch.enabled(Rule::GradientTapeUnused) {
        return;
    }
    for item in &w.items {
        let Expr::Call(c) = &item.context_expr else {
            continue;
        };
        let is_tape = match ch.qualified(&c.func) {
            Some(q) => {
                q.ends_with(".GradientTape")
                    && matches!(q.split('.').next(), Some("tensorflow" | "keras" | "tf_keras"))
            }
            None => false,
        };
        let persistent = c.arguments.find_keyword("persistent").is_some();
        let Some(Expr::Name(name)) = item.optional_vars.as_deref() else {
            continue;
        };
        if !is_tape || persistent {
            continue;
        }
        let tape = name.id.as_str();
        // the block runs something worth recording
        let records = w.body.iter().any(|s| {
            crate::context::any_stmt_expr(s, &mut |e| matches!(e, Expr::Call(_)))
        });
        if !records || used(ch, w, tape) {
            continue;
        }
        ch.report(
            item.range(),
            GradientTapeUnused {
                tape: tape.to_string(),
            },
        );
    }
}

/// Whether the function that holds the `with` (nested functions included: a `grad_fn`
/// closure that calls `tape.gradient`, as TF Model Garden's reversible blocks do) uses
/// `tape` for anything but recording: a gradient, or the tape handed on (an argument, a
/// return, a store). Read on the function's text: every mention of the name but the
/// `as tape` binding and `tape.watch(...)`/`tape.stop_recording()`/`tape.reset()`.
fn used(ch: &Checker<'_>, w: &ast::StmtWith, tape: &str) -> bool {
    let text = enclosing_function_text(ch, w.range());
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut uses = 0usize;
    for (at, _) in text.match_indices(tape) {
        let before = text.get(..at).and_then(|t| t.chars().next_back());
        let rest = text.get(at.saturating_add(tape.len())..).unwrap_or("");
        if before.is_some_and(word) || rest.chars().next().is_some_and(word) {
            continue;
        }
        let recording = [".watch(", ".stop_recording(", ".reset("]
            .iter()
            .any(|m| rest.trim_start().starts_with(m));
        let binding = text
            .get(..at)
            .is_some_and(|t| t.trim_end().ends_with(" as"));
        if !recording && !binding {
            uses = uses.saturating_add(1);
        }
    }
    uses > 0
}

/// The text of the innermost function whose body holds `at` (the module's text at
/// module level).
fn enclosing_function_text<'a>(ch: &Checker<'a>, at: crate::parse::TextRange) -> &'a str {
    let mut body: &[ast::Stmt] = &ch.module().body;
    let mut found = None;
    for _ in 0..crate::parse::depth::MAX_NESTING {
        let next = body.iter().find_map(|s| match s {
            ast::Stmt::FunctionDef(f) if f.range().contains_range(at) => {
                found = Some(f.range());
                Some(&f.body[..])
            }
            ast::Stmt::ClassDef(c) if c.range().contains_range(at) => Some(&c.body[..]),
            _ => None,
        });
        match next {
            Some(b) => body = b,
            None => break,
        }
    }
    match found {
        Some(range) => ch.text(range),
        None => ch.source,
    }
}
