//! What a value holds ([`Kind`]) and how the checker infers it: tensors with or without
//! an autograd graph, numbers, models, loss functions, optimizers.

use std::borrow::Cow;

use super::query::last_segment;
use super::{Checker, is_model_class, text_of};
use crate::parse::ast::{self, Expr};

/// What a value is, as far as memory is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing known: never flagged.
    Unknown,
    /// A Python number, bool or string (`.item()`, `len()`, `x.shape[0]`, a literal).
    Number,
    /// A tensor cut from the graph or moved to host (`.detach()`, `.cpu()`, `.data`).
    Host,
    /// A tensor; `graph` when it carries an autograd graph.
    Tensor {
        /// Built with grad enabled from a model, loss or such a tensor.
        graph: bool,
    },
    /// An `nn.Module` / loaded model: calling it yields a tensor.
    Model,
    /// A loss function object (`nn.CrossEntropyLoss()`): calling it yields a tensor.
    LossFn,
    /// A `torch.optim` optimizer.
    Optimizer,
    /// A parameter of `forward` (maybe a tensor).
    Param,
    /// A dict, list or tuple that holds tensors carrying an autograd graph (`{"loss":
    /// loss, "logits": out}`, `[a, b]`, what a function of the file returns so); `all`
    /// when every element does, so unpacking or indexing it gives such a tensor.
    Container {
        /// Every element carries a graph.
        all: bool,
    },
}

impl Kind {
    /// A tensor that keeps an autograd graph alive.
    pub fn has_graph(self) -> bool {
        matches!(self, Kind::Tensor { graph: true })
    }

    /// A tensor that keeps an autograd graph alive, or a container holding one.
    pub fn holds_graph(self) -> bool {
        matches!(self, Kind::Tensor { graph: true } | Kind::Container { .. })
    }

    /// What an element of this value is (unpacking, indexing): a graph-carrying tensor
    /// for a container whose elements all carry one; a tensor's slice is a tensor.
    pub fn element(self) -> Kind {
        match self {
            Kind::Container { all: true } => Kind::Tensor { graph: true },
            k @ (Kind::Tensor { .. } | Kind::Host | Kind::Number) => k,
            _ => Kind::Unknown,
        }
    }

    /// The kind after gradients were off where it was computed: no graph, and a
    /// container of graph-free tensors is nothing to track.
    pub fn without_graph(self) -> Kind {
        match self {
            Kind::Tensor { graph: true } => Kind::Tensor { graph: false },
            Kind::Container { .. } => Kind::Unknown,
            k => k,
        }
    }

    /// Either of two kinds a name may hold (two `return`s, two branches): a graph wins.
    pub fn either(self, other: Kind) -> Kind {
        if self == other {
            return self;
        }
        match (self, other) {
            (k @ Kind::Tensor { graph: true }, _) | (_, k @ Kind::Tensor { graph: true }) => k,
            (Kind::Container { .. }, _) | (_, Kind::Container { .. }) => {
                Kind::Container { all: false }
            }
            _ => Kind::Unknown,
        }
    }
}

/// What a function of the file returns, gathered from its `return`s as the walk leaves
/// it (a function summary): the value as a whole, and each element of a tuple that
/// every `return` builds with the same length (`return loss, logging_output`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Returns {
    /// The returned value.
    pub whole: Kind,
    /// The elements of a returned tuple literal, when every `return` has one of this
    /// length.
    pub elements: Option<Vec<Kind>>,
}

impl Returns {
    /// Both of two `return`s: a graph on either path wins.
    pub fn either(self, other: Returns) -> Returns {
        let elements = match (self.elements, other.elements) {
            (Some(a), Some(b)) if a.len() == b.len() => {
                Some(a.into_iter().zip(b).map(|(x, y)| x.either(y)).collect())
            }
            _ => None,
        };
        Returns {
            whole: self.whole.either(other.whole),
            elements,
        }
    }
}

/// The kind of a dict, list or tuple literal from its elements' kinds: a container
/// when one holds a graph.
pub(super) fn container_of(kinds: impl Iterator<Item = Kind>) -> Kind {
    let (mut any, mut all) = (false, true);
    for k in kinds {
        let g = k.holds_graph();
        any |= g;
        all &= k.has_graph() || k == Kind::Container { all: true };
    }
    if any {
        Kind::Container { all }
    } else {
        Kind::Unknown
    }
}

impl<'a> Checker<'a> {
    /// What `expr` holds here.
    pub fn kind(&self, expr: &Expr) -> Kind {
        let grad = self.grad_enabled();
        match expr {
            Expr::NumberLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::StringLiteral(_)
            | Expr::FString(_)
            | Expr::NoneLiteral(_)
            | Expr::Compare(_) => Kind::Number,
            Expr::Name(n) => self
                .scope()
                .env
                .get(n.id.as_str())
                .copied()
                .unwrap_or(Kind::Unknown),
            Expr::Attribute(a) => {
                let env = self.scope().env.get(&text_of(expr)).copied();
                if let Some(k) = env {
                    return k;
                }
                match a.attr.as_str() {
                    "shape" | "ndim" | "dtype" | "device" | "is_cuda" | "requires_grad" => {
                        Kind::Number
                    }
                    "data" => Kind::Host,
                    "grad" => Kind::Tensor { graph: false },
                    _ => match self.kind(&a.value) {
                        k @ (Kind::Tensor { .. } | Kind::Host | Kind::Number) => k,
                        _ => Kind::Unknown,
                    },
                }
            }
            Expr::Subscript(s) => self.kind(&s.value).element(),
            Expr::Dict(d) => container_of(
                d.items
                    .iter()
                    .filter(|i| i.key.is_some())
                    .map(|i| self.kind(&i.value)),
            ),
            Expr::List(l) => container_of(l.elts.iter().map(|e| self.kind(e))),
            Expr::Tuple(t) => container_of(t.elts.iter().map(|e| self.kind(e))),
            Expr::UnaryOp(u) => self.kind(&u.operand),
            Expr::BinOp(b) => {
                no_graph_unless(grad, combine(self.kind(&b.left), self.kind(&b.right)))
            }
            Expr::Call(c) => no_graph_unless(grad, self.call_kind(c, grad)),
            _ => Kind::Unknown,
        }
    }

    fn call_kind(&self, c: &ast::ExprCall, grad: bool) -> Kind {
        let func = &*c.func;
        if let Expr::Name(n) = func
            && !self.scope().env.contains_key(n.id.as_str())
        {
            match n.id.as_str() {
                "float" | "int" | "len" | "round" | "bool" | "str" | "abs" | "isinstance" => {
                    return Kind::Number;
                }
                _ => {}
            }
        }
        if let Some(q) = self.qualified(func)
            && let Some(k) = self.torch_call_kind(&q, c, grad)
        {
            return k;
        }
        // the receiver's kind, computed once (a chain `x.f().g()…` asks each link once)
        let recv = match func {
            Expr::Attribute(a) => self.kind(&a.value),
            _ => Kind::Unknown,
        };
        // a function of the file whose `return`s say what it gives
        if let Some(r) = self.summary_with_receiver(func, recv)
            && matches!(
                r.whole,
                Kind::Tensor { .. } | Kind::Container { .. } | Kind::Host | Kind::Number
            )
        {
            return if grad {
                r.whole
            } else {
                r.whole.without_graph()
            };
        }
        if let Expr::Attribute(a) = func {
            let m = a.attr.as_str();
            match recv {
                Kind::Tensor { .. } | Kind::Param => {
                    let graph = recv.has_graph() || (recv == Kind::Param && grad);
                    return match m {
                        "item" | "tolist" | "numpy" | "size" | "dim" | "numel" | "nelement"
                        | "element_size" | "get_device" | "is_contiguous" => Kind::Number,
                        "detach" | "cpu" | "detach_" => Kind::Host,
                        "argmax" | "argmin" | "eq" | "ne" | "gt" | "lt" | "ge" | "le"
                        | "nonzero" | "argsort" | "long" | "int" | "bool" | "sign" => {
                            Kind::Tensor { graph: false }
                        }
                        _ if recv == Kind::Param && !TENSOR_METHODS.contains(&m) => Kind::Unknown,
                        _ => Kind::Tensor { graph },
                    };
                }
                Kind::Host => {
                    return match m {
                        "item" | "tolist" | "numpy" | "size" | "dim" | "numel" => Kind::Number,
                        _ => Kind::Host,
                    };
                }
                Kind::Model | Kind::LossFn if m == "forward" => {
                    return Kind::Tensor { graph: grad };
                }
                // `Net().cuda()`, `model.to(device)`, `model.eval()` are the model
                Kind::Model if MODEL_RETURNING_METHODS.contains(&m) => return Kind::Model,
                _ => {}
            }
            // `self.layer(x)` inside forward, `layer` a submodule made in `__init__`
            if self.scope().is_forward
                && matches!(&*a.value, Expr::Name(n) if Some(n.id.as_str()) == self.scope().self_name.as_deref())
                && self.classes.last().is_some_and(|c| c.1.contains(m))
            {
                return Kind::Tensor { graph: grad };
            }
        }
        if self.is_model_callee(func) || self.is_loss_callee(func) {
            return Kind::Tensor { graph: grad };
        }
        // `Net()`: a class of this file that subclasses a module
        if let Expr::Name(n) = func
            && self.module_classes.contains(n.id.as_str())
        {
            return Kind::Model;
        }
        // `DDP(model)`, `FSDP(model)` under any import name
        if let Some(last) = last_segment(func)
            && matches!(
                last,
                "DDP" | "FSDP" | "DistributedDataParallel" | "FullyShardedDataParallel"
            )
        {
            return Kind::Model;
        }
        Kind::Unknown
    }

    /// The summary of the function that `func` calls: a module-level function of this
    /// file by its name (not shadowed by a local or an import), a method of the
    /// enclosing class called on `self`; else, once the other files of the tree are
    /// known ([`crate::tree::Returns`]), an imported function or a method of another
    /// object by its name, when every function of the tree with that name agrees.
    pub fn summary_of(&self, func: &Expr) -> Option<Cow<'_, Returns>> {
        let recv = match func {
            Expr::Attribute(a) => self.kind(&a.value),
            _ => Kind::Unknown,
        };
        self.summary_with_receiver(func, recv)
    }

    /// [`Self::summary_of`] with the receiver's kind already known (`recv`, for
    /// `obj.method`): a tensor's, a model's or an optimizer's own method is never a
    /// function of the tree.
    fn summary_with_receiver(&self, func: &Expr, recv: Kind) -> Option<Cow<'_, Returns>> {
        match func {
            Expr::Name(n) => {
                let name = n.id.as_str();
                if self.scope().env.contains_key(name) {
                    return None;
                }
                if self.imports.contains_key(name) {
                    return self.tree_summary(name).map(Cow::Owned);
                }
                self.summaries.get(name).map(Cow::Borrowed)
            }
            Expr::Attribute(a) => {
                let m = a.attr.as_str();
                if let Expr::Name(recv) = &*a.value
                    && Some(recv.id.as_str()) == self.scope().self_name.as_deref()
                    && let Some(class) = self.class_names.last()
                    && let Some(r) = self.method_summaries.get(class).and_then(|ms| ms.get(m))
                {
                    return Some(Cow::Borrowed(r));
                }
                // never a tensor's, a model's or an optimizer's own method
                if recv != Kind::Unknown {
                    return None;
                }
                if let Some(q) = self.qualified(&a.value)
                    && q.split('.').next() == Some("torch")
                {
                    return None;
                }
                self.tree_summary(m).map(Cow::Owned)
            }
            _ => None,
        }
    }

    /// What the tree's functions named `name` return ([`crate::tree::Returns`]).
    fn tree_summary(&self, name: &str) -> Option<Returns> {
        use crate::tree::Returned;
        if !crate::tree::resolvable(name) {
            return None;
        }
        let whole = match self.tree?.get(name)? {
            Returned::Graph => Kind::Tensor { graph: true },
            Returned::HoldsGraph { all } => Kind::Container { all },
            Returned::Other => return None,
        };
        Some(Returns {
            whole,
            elements: None,
        })
    }

    /// The kinds of the elements of `value` when it is unpacked: a tuple or list
    /// literal's, or those of the tuple a function of the file returns.
    pub(super) fn element_kinds(&self, value: &Expr) -> Option<Vec<Kind>> {
        match value {
            Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. })
                if !elts.iter().any(Expr::is_starred_expr) =>
            {
                Some(elts.iter().map(|e| self.kind(e)).collect())
            }
            Expr::Call(c) => {
                let elements = self.summary_of(&c.func)?.into_owned().elements?;
                Some(if self.grad_enabled() {
                    elements
                } else {
                    elements.into_iter().map(Kind::without_graph).collect()
                })
            }
            _ => None,
        }
    }

    fn torch_call_kind(&self, q: &str, c: &ast::ExprCall, grad: bool) -> Option<Kind> {
        let any_graph = || {
            grad && c
                .arguments
                .args
                .iter()
                .chain(c.arguments.keywords.iter().map(|k| &k.value))
                .any(|a| match a {
                    Expr::List(l) => l.elts.iter().any(|e| self.kind(e).has_graph()),
                    Expr::Tuple(t) => t.elts.iter().any(|e| self.kind(e).has_graph()),
                    a => self.kind(a).has_graph(),
                })
        };
        if let Some(f) = q.strip_prefix("torch.nn.functional.") {
            if f.contains('.') {
                return None;
            }
            return Some(Kind::Tensor { graph: any_graph() });
        }
        if let Some(rest) = q.strip_prefix("torch.nn.")
            && let Some(first) = rest.chars().next()
            && first.is_uppercase()
            && !rest.contains('.')
        {
            return Some(if rest.ends_with("Loss") {
                Kind::LossFn
            } else {
                Kind::Model
            });
        }
        if let Some(rest) = q.strip_prefix("torch.optim.")
            && rest.chars().next().is_some_and(char::is_uppercase)
        {
            return Some(Kind::Optimizer);
        }
        if q.ends_with(".from_pretrained") && is_model_class(q) {
            return Some(Kind::Model);
        }
        if is_model_constructor(q) {
            return Some(Kind::Model);
        }
        // `torch.compile(model)` is the model
        if q == "torch.compile" {
            return c.arguments.args.first().map(|a| match self.kind(a) {
                Kind::Model => Kind::Model,
                _ => Kind::Unknown,
            });
        }
        let f = q.strip_prefix("torch.")?;
        if f.contains('.') || !f.chars().next().is_some_and(char::is_lowercase) {
            return None;
        }
        if NOT_TENSOR_OPS.contains(&f) || f.starts_with("get_") || f.starts_with("set_") {
            return None;
        }
        if matches!(
            f,
            "is_tensor" | "numel" | "is_floating_point" | "is_grad_enabled"
        ) {
            return Some(Kind::Number);
        }
        Some(Kind::Tensor { graph: any_graph() })
    }

    /// A callee that is a model (by what it was bound to, or by its name): a variable
    /// or `self.x` named like a model (`model`, `net`, `ddp_model`), never a module
    /// attribute (`torch.Generator`), a class or a function named like a verb
    /// (`create_model`, `_wrap_model`).
    pub fn is_model_callee(&self, func: &Expr) -> bool {
        if let Expr::Name(n) = func
            && let Some(k) = self.scope().env.get(n.id.as_str())
        {
            return *k == Kind::Model;
        }
        let Some(last) = last_segment(func) else {
            return false;
        };
        if let Expr::Attribute(a) = func {
            let is_self = matches!(&*a.value, Expr::Name(n) if Some(n.id.as_str()) == self.scope().self_name.as_deref());
            let plain_var = matches!(&*a.value, Expr::Name(n) if !self.imports.contains_key(n.id.as_str()) && n.id.as_str() != "torch");
            if !is_self && !plain_var {
                return false;
            }
        } else if self.imports.contains_key(last) {
            return false;
        }
        if !last.starts_with(|c: char| c.is_ascii_lowercase()) {
            return false;
        }
        let l = last.to_ascii_lowercase();
        if MODEL_NAMES.contains(&l.as_str()) {
            return true;
        }
        let first_word = l.split('_').next().unwrap_or("");
        (l.ends_with("_model") || l.ends_with("_net")) && !VERBS.contains(&first_word)
    }

    /// A callee that is a loss function.
    pub fn is_loss_callee(&self, func: &Expr) -> bool {
        if let Expr::Name(n) = func
            && let Some(k) = self.scope().env.get(n.id.as_str())
        {
            return *k == Kind::LossFn;
        }
        let Some(last) = last_segment(func) else {
            return false;
        };
        let l = last.to_ascii_lowercase();
        l.contains("criterion")
            || matches!(
                l.as_str(),
                "loss_fn" | "loss_func" | "loss_function" | "lossfn" | "compute_loss"
            )
            || l.ends_with("_loss_fn")
    }
}

/// A new op under `no_grad` records no graph, whatever its inputs.
fn no_graph_unless(grad: bool, k: Kind) -> Kind {
    if !grad && k.has_graph() {
        Kind::Tensor { graph: false }
    } else {
        k
    }
}

pub(super) fn combine(a: Kind, b: Kind) -> Kind {
    use Kind::*;
    match (a, b) {
        (Tensor { graph: true }, _) | (_, Tensor { graph: true }) => Tensor { graph: true },
        (Tensor { graph: false }, _) | (_, Tensor { graph: false }) => Tensor { graph: false },
        (Host, _) | (_, Host) => Host,
        (Number, Number) => Number,
        _ => Unknown,
    }
}

/// Methods of a model that return the model itself.
const MODEL_RETURNING_METHODS: &[&str] = &[
    "cuda",
    "to",
    "cpu",
    "half",
    "float",
    "bfloat16",
    "eval",
    "train",
    "requires_grad_",
    "to_empty",
];

/// Qualified callables that build a model: torchvision/timm/hub constructors and the
/// distributed wrappers.
fn is_model_constructor(q: &str) -> bool {
    matches!(
        q,
        "timm.create_model"
            | "torch.hub.load"
            | "torch.nn.parallel.DistributedDataParallel"
            | "torch.nn.parallel.DataParallel"
            | "torch.distributed.fsdp.FullyShardedDataParallel"
    ) || [
        "torchvision.models.",
        "torchvision.models.detection.",
        "torchvision.models.segmentation.",
    ]
    .iter()
    .any(|p| {
        q.strip_prefix(p).is_some_and(|rest| {
            !rest.contains('.') && !rest.ends_with("Weights") && !rest.starts_with("get_")
        })
    })
}

const VERBS: &[&str] = &[
    "create", "get", "is", "has", "wrap", "unwrap", "load", "build", "make", "init", "prepare",
    "setup", "to", "from", "save", "compute", "update", "set", "check", "validate", "apply",
    "register", "convert", "find", "resolve", "patch", "copy", "push", "export",
];

const MODEL_NAMES: &[&str] = &[
    "model",
    "net",
    "network",
    "encoder",
    "decoder",
    "generator",
    "discriminator",
    "unet",
    "vae",
    "backbone",
    "teacher",
    "student",
    "classifier",
    "critic",
    "actor",
    "policy",
    "netg",
    "netd",
    "ddp_model",
    "raw_model",
    "rnn",
    "lstm",
    "gru",
];

const TENSOR_METHODS: &[&str] = &[
    "view",
    "reshape",
    "transpose",
    "permute",
    "softmax",
    "log_softmax",
    "matmul",
    "mm",
    "bmm",
    "flatten",
    "unsqueeze",
    "squeeze",
    "contiguous",
    "mean",
    "sum",
    "exp",
    "log",
    "relu",
    "sigmoid",
    "tanh",
    "norm",
    "expand",
    "repeat",
    "masked_fill",
    "pow",
    "sqrt",
    "abs",
    "clamp",
    "float",
    "half",
    "to",
    "cuda",
];

const NOT_TENSOR_OPS: &[&str] = &[
    "no_grad",
    "inference_mode",
    "enable_grad",
    "device",
    "save",
    "load",
    "manual_seed",
    "seed",
    "compile",
    "autocast",
    "use_deterministic_algorithms",
    "is_autocast_enabled",
    "typename",
    "dtype",
    "Generator",
    "finfo",
    "iinfo",
    "chunk",
    "split",
    "unbind",
    "broadcast_tensors",
    "meshgrid",
];

/// The optimizer stepped by a call (`optimizer.step()`, `scaler.step(optimizer)`), as text.
pub fn optimizer_step(ch: &Checker<'_>, call: &ast::ExprCall) -> Option<String> {
    let Expr::Attribute(a) = &*call.func else {
        return None;
    };
    if a.attr.as_str() != "step" {
        return None;
    }
    let recv = last_segment(&a.value)?.to_ascii_lowercase();
    if recv.contains("scaler") {
        return call.arguments.args.first().map(text_of);
    }
    if !call.arguments.args.is_empty() {
        return None;
    }
    let by_kind = matches!(&*a.value, Expr::Name(n) if ch.scope().env.get(n.id.as_str()) == Some(&Kind::Optimizer));
    let by_name = (recv.contains("optim")
        || recv == "opt"
        || recv.starts_with("opt_")
        || recv.ends_with("_opt"))
        && !recv.contains("sched")
        && !recv.contains("lr");
    (by_kind || by_name).then(|| text_of(&a.value))
}

#[cfg(test)]
mod tests {
    use crate::{Settings, lint_source};

    /// Codes found when `value` is appended in a training loop after `setup`.
    fn appended(setup: &str, value: &str) -> Vec<&'static str> {
        let src = format!(
            "import torch\nimport torch.nn as nn\n{setup}\nxs = []\nfor batch in loader:\n    out = model(batch)\n    loss = criterion(out, batch.y)\n    xs.append({value})\n"
        );
        lint_source("t.py", &src, &Settings::default())
            .expect("parses")
            .into_iter()
            .map(|d| d.code)
            .collect()
    }

    #[test]
    fn tensors_with_a_graph_are_told_apart_from_numbers() {
        for graph in [
            "loss",
            "out",
            "out.logits",
            "out[0]",
            "loss * 2",
            "loss.mean()",
            "torch.stack([loss, loss])",
            "nn.functional.mse_loss(out, batch.y)",
        ] {
            assert_eq!(appended("", graph), vec!["OOM101"], "{graph}");
        }
        for clean in [
            "loss.item()",
            "float(loss)",
            "int(loss)",
            "loss.detach()",
            "loss.cpu()",
            "loss.tolist()",
            "loss.detach().float()",
            "batch.shape[0]",
            "out.argmax(-1)",
            "len(batch)",
            "loss.item() * batch.size(0)",
            "step",
            "0.5",
            "loss.data",
        ] {
            assert_eq!(appended("", clean), Vec::<&str>::new(), "{clean}");
        }
    }
}
