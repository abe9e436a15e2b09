//! OOM115 `object-recreated-in-loop` (also runs on TensorFlow/Keras-only files; out of
//! preview since lint v3: no finding on the precision benchmark, 2/2 on the recall one).

use crate::context::{Checker, last_segment};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr, Stmt};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags TensorFlow/Keras objects that are meant to be built once but are built again
    /// on every iteration of a training loop: `model.compile(...)`, a `@tf.function`
    /// (or `tf.function(f)`) defined in the loop or in a helper the loop calls, a Keras
    /// metric (`tf.keras.metrics.Mean()`) or a Keras optimizer
    /// (`tf.keras.optimizers.Adam()`) constructed in every step.
    ///
    /// ## Evidence it needs
    /// The file imports TensorFlow or Keras (this rule runs on TensorFlow-only files,
    /// which the PyTorch rules skip), and, in the same function:
    /// - `X.compile(...)` with Keras's `optimizer=` or `loss=` keyword inside a loop
    ///   (`for`/`while`), unless the loop also calls `clear_session()` (a
    ///   hyperparameter search that rebuilds its models and frees the old ones) or `X`
    ///   is the loop's own target (`for model in models:` compiles each model once);
    /// - a function decorated `@tf.function`/`@tf.function(...)` defined, or
    ///   `tf.function(f)` called, inside a loop over data, steps or epochs; or a call,
    ///   in such a loop, of a function of the same file (module level) whose body
    ///   defines a `@tf.function`;
    /// - `…keras.metrics.<Class>(...)` or `…keras.optimizers.<Class>(...)` (a class,
    ///   resolved through the file's imports) constructed in a loop over batches or
    ///   steps (not in an epoch loop, where a fresh metric per epoch is a choice) that
    ///   does a step's work — a call besides building Keras objects and filling lists
    ///   (a loop over top-k settings that builds one metric each is set-up: TF Model
    ///   Garden's `build_metrics`). A loop over a literal list (`for batch_size in [7,
    ///   None]`) is a loop over settings, never over data, for every rule.
    ///
    /// PyTorch optimizers re-created per batch reset their state (a training bug) but
    /// free the old state, so they are not flagged here.
    ///
    /// ## Why it costs memory
    /// Each `compile` builds new train/predict functions and optimizer state that the
    /// Keras session keeps; called in a loop, memory grows on every iteration until the
    /// process runs out (keras-team/keras#9151, whose fix is to compile once or call
    /// `clear_session()`; tensorflow/tensorflow#26108: about 20 MB per `compile`). A
    /// `tf.function` created in a loop traces a new graph each time, and traced graphs
    /// are cached rather than freed (TensorFlow's own retracing warning names "creating
    /// @tf.function repeatedly in a loop"; instadeepai/Mava#346 ran out of RAM from
    /// repeated retracing; DLPerf's reports such as amirgholami/adahessian#32 flag a
    /// `@tf.function` defined inside a function called in a loop). A metric or
    /// optimizer built every step creates new variables every step (metric objects are
    /// not freed promptly: tensorflow/tensorflow#44756), and inside a `tf.function` a
    /// new optimizer fails outright ("tried to create variables on non-first call",
    /// tensorflow/tensorflow#27120).
    ///
    /// ## Example
    /// ```python
    /// for episode in range(episodes):
    ///     model.compile(optimizer="rmsprop", loss="mse")
    ///     model.fit(x, y)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// model.compile(optimizer="rmsprop", loss="mse")
    /// for episode in range(episodes):
    ///     model.fit(x, y)
    /// ```
}

/// What is built again on every iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recreated {
    /// `model.compile(...)`.
    Compile,
    /// A `@tf.function` defined in the loop.
    TfFunction,
    /// `tf.function(f)` called in the loop.
    TfFunctionCall,
    /// A helper of the file that defines a `@tf.function` each time it is called.
    TfFunctionHelper,
    /// A Keras metric object.
    Metric,
    /// A Keras optimizer.
    Optimizer,
}

/// An object built again on every iteration of a loop.
pub(crate) struct ObjectRecreatedInLoop {
    /// Which kind of object.
    pub what: Recreated,
    /// The code that builds it (`model.compile`, `train_step`, `tf.keras.metrics.Mean`).
    pub code: String,
    /// For [`Recreated::TfFunctionHelper`]: the `@tf.function` the helper defines.
    pub inner: String,
}

impl Violation for ObjectRecreatedInLoop {
    const RULE: Rule = Rule::ObjectRecreatedInLoop;

    fn message(&self) -> String {
        let c = &self.code;
        match self.what {
            Recreated::Compile => format!(
                "`{c}(...)` runs on every iteration of the loop: each call builds new training functions and optimizer state that Keras keeps, so memory grows every iteration"
            ),
            Recreated::TfFunction => format!(
                "the `tf.function` `{c}` is created on every iteration of the loop: each one traces a new graph, and traced graphs are kept"
            ),
            Recreated::TfFunctionCall => format!(
                "`{c}` runs on every iteration of the loop: each call makes a new function that traces a new graph, and traced graphs are kept"
            ),
            Recreated::TfFunctionHelper => format!(
                "`{c}(...)` defines the `tf.function` `{}` each time it is called, and it is called on every iteration of the loop: each call traces a new graph",
                self.inner
            ),
            Recreated::Metric => format!(
                "`{c}(...)` builds a new Keras metric (new variables) on every step of the loop"
            ),
            Recreated::Optimizer => format!(
                "`{c}(...)` builds a new optimizer (new slot variables, state reset to zero) on every step of the loop"
            ),
        }
    }

    fn fix_title(&self) -> String {
        match self.what {
            Recreated::Compile => "Compile once before the loop (when each iteration builds a new model, call `keras.backend.clear_session()` at its end)".to_string(),
            Recreated::TfFunction => format!(
                "Define `{}` once, outside the loop, and pass what changes as tensors",
                self.code
            ),
            Recreated::TfFunctionCall => {
                "Wrap the function once, outside the loop, and call that in the loop".to_string()
            }
            Recreated::TfFunctionHelper => format!(
                "Define `{}` once (at module level, or build it once and pass it in)",
                self.inner
            ),
            Recreated::Metric => {
                "Create the metric once before the loop and call `.reset_state()` where a fresh one is wanted".to_string()
            }
            Recreated::Optimizer => "Create the optimizer once before the loop".to_string(),
        }
    }
}

/// Top-level packages whose objects this rule knows.
fn is_keras_path(q: &str, module: &str) -> bool {
    ["tensorflow.keras.", "keras.", "tf_keras.", "tensorflow."]
        .iter()
        .any(|p| {
            q.strip_prefix(p)
                .is_some_and(|rest| rest.starts_with(module))
        })
}

/// Whether `expr` (a decorator, or a callee) is `tf.function` / `tf.function(...)`.
fn is_tf_function(ch: &Checker<'_>, expr: &Expr) -> bool {
    let callee = match expr {
        Expr::Call(c) => &*c.func,
        e => e,
    };
    ch.qualified(callee)
        .is_some_and(|q| q == "tensorflow.function")
}

/// Runs on every function definition (before its body is visited): a `@tf.function`
/// defined inside a loop of the enclosing function.
pub(crate) fn check_function(ch: &mut Checker<'_>, f: &ast::StmtFunctionDef) {
    if !ch.enabled(Rule::ObjectRecreatedInLoop)
        || !ch.innermost_loop().is_some_and(|l| l.is_data_loop)
        || !f
            .decorator_list
            .iter()
            .any(|d| is_tf_function(ch, &d.expression))
    {
        return;
    }
    let v = ObjectRecreatedInLoop {
        what: Recreated::TfFunction,
        code: f.name.to_string(),
        inner: String::new(),
    };
    ch.report(f.name.range(), v);
}

/// Runs on every call.
pub(crate) fn check_call(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::ObjectRecreatedInLoop) {
        return;
    }
    let Some(lp) = ch.innermost_loop() else {
        return;
    };
    let per_step = lp.is_data_loop && !lp.is_epoch_loop;
    let found = if let Some(v) = compile_in_loop(ch, call) {
        Some(v)
    } else if lp.is_data_loop && is_tf_function(ch, &call.func) {
        Some(ObjectRecreatedInLoop {
            what: Recreated::TfFunctionCall,
            code: ch.snippet(call.range()),
            inner: String::new(),
        })
    } else if per_step
        && let Some(what) = keras_object(ch, &call.func)
        && runs_steps(ch)
    {
        Some(ObjectRecreatedInLoop {
            what,
            code: ch.snippet(call.func.range()),
            inner: String::new(),
        })
    } else if lp.is_data_loop
        && let Expr::Name(n) = &*call.func
        && let Some(inner) = helper_defining_tf_function(ch, n.id.as_str())
    {
        Some(ObjectRecreatedInLoop {
            what: Recreated::TfFunctionHelper,
            code: n.id.to_string(),
            inner,
        })
    } else {
        None
    };
    if let Some(v) = found {
        ch.report(call.range(), v);
    }
}

/// Whether the innermost loop does a step's work: some call besides building Keras
/// objects and filling containers (`metrics.append(Mean(...))` over a list of top-k
/// settings is set-up, as in TF Model Garden's `build_metrics`).
fn runs_steps(ch: &Checker<'_>) -> bool {
    let Some(lp) = ch.innermost_loop() else {
        return false;
    };
    lp.facts.calls().any(|site| {
        let setup = match &*site.call.func {
            Expr::Name(n) => matches!(
                n.id.as_str(),
                "print" | "len" | "range" | "str" | "int" | "float" | "zip" | "enumerate"
                    | "list" | "dict" | "tuple" | "isinstance" | "getattr" | "format"
            ),
            Expr::Attribute(a) => matches!(
                a.attr.as_str(),
                "append" | "extend" | "insert" | "update" | "format" | "get" | "items"
                    | "keys" | "values" | "setdefault"
            ),
            _ => false,
        };
        !setup && keras_object(ch, &site.call.func).is_none()
    })
}

/// `X.compile(..., optimizer=…/loss=…)` in a loop that neither clears the session nor
/// iterates over the models themselves.
fn compile_in_loop(ch: &Checker<'_>, call: &ast::ExprCall) -> Option<ObjectRecreatedInLoop> {
    let Expr::Attribute(a) = &*call.func else {
        return None;
    };
    if a.attr.as_str() != "compile"
        || !call.arguments.keywords.iter().any(|k| {
            k.arg
                .as_ref()
                .is_some_and(|n| matches!(n.as_str(), "optimizer" | "loss"))
        })
        || !crate::file_facts::imports_tensorflow(&ch.imports)
    {
        return None;
    }
    let lp = ch.innermost_loop()?;
    let receiver = crate::context::text_of(&a.value);
    if lp.targets.contains(receiver.as_str())
        || lp
            .facts
            .calls()
            .any(|c| last_segment(&c.call.func) == Some("clear_session"))
    {
        return None;
    }
    Some(ObjectRecreatedInLoop {
        what: Recreated::Compile,
        code: ch.snippet(call.func.range()),
        inner: String::new(),
    })
}

/// A Keras metric or optimizer class, through the file's imports.
fn keras_object(ch: &Checker<'_>, func: &Expr) -> Option<Recreated> {
    let q = ch.qualified(func)?;
    let class = q.rsplit('.').next()?;
    if !class.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    if is_keras_path(&q, "metrics.") {
        Some(Recreated::Metric)
    } else if is_keras_path(&q, "optimizers.") {
        Some(Recreated::Optimizer)
    } else {
        None
    }
}

/// The `@tf.function` defined in the body of the module-level function `name`, if any.
fn helper_defining_tf_function(ch: &Checker<'_>, name: &str) -> Option<String> {
    if !crate::file_facts::imports_tensorflow(&ch.imports) {
        return None;
    }
    let helper = ch.module().body.iter().find_map(|s| match s {
        Stmt::FunctionDef(f) if f.name.as_str() == name => Some(f),
        _ => None,
    })?;
    inner_tf_function(ch, &helper.body, 0)
}

fn inner_tf_function(ch: &Checker<'_>, body: &[Stmt], depth: usize) -> Option<String> {
    if depth > crate::parse::depth::MAX_NESTING {
        return None;
    }
    let deeper = depth.saturating_add(1);
    body.iter().find_map(|s| match s {
        Stmt::FunctionDef(f)
            if f.decorator_list
                .iter()
                .any(|d| is_tf_function(ch, &d.expression)) =>
        {
            Some(f.name.to_string())
        }
        Stmt::If(i) => inner_tf_function(ch, &i.body, deeper).or_else(|| {
            i.elif_else_clauses
                .iter()
                .find_map(|c| inner_tf_function(ch, &c.body, deeper))
        }),
        Stmt::With(w) => inner_tf_function(ch, &w.body, deeper),
        Stmt::Try(t) => inner_tf_function(ch, &t.body, deeper),
        _ => None,
    })
}
