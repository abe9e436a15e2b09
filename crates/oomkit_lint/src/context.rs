//! The semantic model every rule queries, built in the same single pass that runs
//! the rules (the body facts are in `facts`, the pure syntax queries in `query`): import aliases (`import torch.nn as nn`), which names hold tensors (and
//! whether they carry an autograd graph) or plain numbers, loops, `no_grad` regions,
//! `.eval()` state and the facts of each function body.
//!
//! The tensor inference is deliberately conservative (precision before recall): a value
//! is a tensor with a graph only when it comes from a model, a loss function or a torch op
//! on such a tensor, outside `torch.no_grad()`/`torch.inference_mode()`; `.item()`,
//! `.detach()`, `.cpu()`, `float()`, `.shape[...]`… make it safe, and anything unknown is
//! never flagged.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::cell::RefCell;
use std::rc::Rc;

mod facts;
mod query;

pub(crate) use facts::collect_targets;
pub use facts::{BodyFacts, Facts};
pub use query::{
    MAX_CHAIN_ATTRS, backward_loss, is_model_class, is_scaled, last_segment, last_segment_of_text,
    mentions, text_of, zero_grad_receiver,
};
pub(crate) use query::{any_expr, any_stmt_expr};
use query::{chain, chain_texts, join_chain, root_name, roots};

use crate::diagnostic::Finding;
use crate::file_facts::{self, FileFacts};
use crate::parse::ast::{self, Expr, Stmt};
use crate::parse::visitor::{self, Visitor};
use crate::parse::{Module, Ranged, TextRange};
use crate::project::Project;
use crate::rules::{self, Rule, RuleSet};

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
}

impl Kind {
    /// A tensor that keeps an autograd graph alive.
    pub fn has_graph(self) -> bool {
        matches!(self, Kind::Tensor { graph: true })
    }
}

/// One function (or the module) being checked.
pub struct Scope<'a> {
    /// Function name (`""` for the module).
    pub name: String,
    /// `forward` of a class with bases (an `nn.Module`).
    pub is_forward: bool,
    /// Name of the first parameter of a method (`self`).
    pub self_name: Option<String>,
    /// What each local name holds, updated in source order.
    pub env: HashMap<String, Kind>,
    /// Depth of `no_grad`/`inference_mode` regions (decorators included).
    pub no_grad: u32,
    /// Receivers of `.eval()` (text), until `.train()`.
    pub eval_models: Vec<String>,
    /// Decorators of the function (last segment of each callee: `evaluate` for
    /// `@evaluate(model)`).
    pub decorators: Vec<String>,
    /// Whether OOM104 was reported here already.
    pub reported_inference: bool,
    /// Names bound to a model loaded with `device_map=`.
    pub device_map_models: HashSet<String>,
    /// Facts about the whole body.
    pub facts: Facts<'a>,
    /// The scanned bodies whose loops this scope may enter: the function's, then any
    /// loop scanned on its own (in a class body), innermost last.
    roots: Vec<Rc<BodyFacts<'a>>>,
    /// Loops currently open in this scope, innermost last.
    pub loops: Vec<LoopFrame<'a>>,
    /// Whether the body trains (backward, `.train()`, `enable_grad`…): not inference.
    pub trains: bool,
    /// Names whose value is backpropagated in the body (`loss.backward()`,
    /// `out["loss"].backward()`, `scaler.scale(loss).backward()`,
    /// `accelerator.backward(loss)`): whatever they are bound to carries a graph.
    pub backpropagated: HashSet<String>,
    /// Names bound here whose graph is known only from that evidence (their value came
    /// from an unknown call): rules that must know where a loss came from (OOM106: was
    /// it scaled inside?) skip them.
    pub graph_by_backward: HashSet<String>,
    /// Names bound while gradients were off (`with torch.no_grad(): outputs = model(x)`),
    /// or from such a name (`loss = outputs.loss` after the block): whatever they hold
    /// has no graph, so a later `loss.backward()` elsewhere in the body (the training
    /// loop) is no evidence that they carry one (accelerate's
    /// `megatron_lm_gpt_pretraining.py` evaluation loop).
    pub bound_without_grad: HashSet<String>,
    /// [`Checker::consumed_as_loss`] answers so far.
    loss_memo: RefCell<HashMap<String, bool>>,
    /// Built on the first [`Checker::consumed_as_loss`] question.
    loss_index: RefCell<Option<LossIndex>>,
}

/// What [`Checker::consumed_as_loss`] reads, gathered in one walk of a function's facts.
#[derive(Debug, Default)]
struct LossIndex {
    /// Name text → the assignments whose value mentions it (ascending).
    by_value: HashMap<String, Vec<usize>>,
    /// Each assignment's target texts.
    targets: Vec<Vec<String>>,
    /// Texts returned or yielded as is (or in a returned tuple).
    returned: HashSet<String>,
    /// Name text → for each backward-like call (`backward`, `manual_backward`, `scale`,
    /// `append`, `extend`) that mentions it: the receiver of an `append`/`extend`.
    sinks: HashMap<String, Vec<Option<String>>>,
}

impl LossIndex {
    fn of(facts: &Facts<'_>) -> Self {
        let mut index = LossIndex::default();
        for (i, (targets, value, _)) in facts.assigns().iter().enumerate() {
            for text in chain_texts(value) {
                let at = index.by_value.entry(text).or_default();
                if at.last() != Some(&i) {
                    at.push(i);
                }
            }
            index.targets.push(targets.clone());
        }
        for e in facts.returns() {
            match e {
                Expr::Tuple(t) => index.returned.extend(t.elts.iter().map(text_of)),
                e => {
                    index.returned.insert(text_of(e));
                }
            }
        }
        index.returned.remove("");
        for cs in facts.calls() {
            let c = cs.call;
            let Expr::Attribute(a) = &*c.func else {
                continue;
            };
            let m = a.attr.as_str();
            if !matches!(
                m,
                "backward" | "manual_backward" | "scale" | "append" | "extend"
            ) {
                continue;
            }
            let receiver = matches!(m, "append" | "extend").then(|| text_of(&a.value));
            let mut texts: HashSet<String> = chain_texts(&c.func).into_iter().collect();
            for arg in &c.arguments.args {
                texts.extend(chain_texts(arg));
            }
            for t in texts {
                index.sinks.entry(t).or_default().push(receiver.clone());
            }
        }
        index
    }
}

/// A loop currently being visited.
pub struct LoopFrame<'a> {
    /// Facts about its body (its `for` target included in `assigned`).
    pub facts: Facts<'a>,
    /// `if` depth inside this loop.
    pub if_depth: u32,
    /// `except` depth inside this loop.
    pub except_depth: u32,
    /// Whether it looks like a loop over data or training steps (`for batch in loader`,
    /// `for step in range(max_steps)`, `while True`), not over layers, heads or images.
    pub is_data_loop: bool,
    /// Names bound by the `for` target.
    pub targets: HashSet<String>,
    /// A `for` whose target or iterable is named like an epoch (`for epoch in …`).
    pub is_epoch_loop: bool,
}

impl LoopFrame<'_> {
    /// `total` is assigned in the loop only by `total = total + …` (not reset per
    /// iteration).
    pub fn only_accumulated(&self, name: &str) -> bool {
        self.facts.only_accumulated(name)
    }
}

const DATA_ITER_WORDS: &[&str] = &[
    "loader", "batches", "dataset", "data", "epoch", "step", "iter", "train", "eval", "valid",
    "test", "sample", "prompts",
];
const DATA_TARGET_WORDS: &[&str] = &["batch", "step", "epoch", "iteration", "sample", "inputs"];

/// See [`LoopFrame::is_data_loop`].
fn is_data_loop(iter: Option<&Expr>, target: Option<&Expr>, source: &str) -> bool {
    let (Some(iter), Some(target)) = (iter, target) else {
        return true; // `while`
    };
    let text = |e: &Expr| {
        source
            .get(e.range().start().to_usize()..e.range().end().to_usize())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    let it = text(iter);
    let tg = text(target);
    DATA_ITER_WORDS.iter().any(|w| it.contains(w))
        || DATA_TARGET_WORDS.iter().any(|w| tg.contains(w))
}

impl<'a> Scope<'a> {
    fn new(name: &str, body: &'a [Stmt]) -> Self {
        let root = Rc::new(BodyFacts::of(body));
        Self {
            name: name.to_string(),
            is_forward: false,
            self_name: None,
            env: HashMap::new(),
            no_grad: 0,
            eval_models: Vec::new(),
            decorators: Vec::new(),
            reported_inference: false,
            device_map_models: HashSet::new(),
            trains: false,
            backpropagated: HashSet::new(),
            graph_by_backward: HashSet::new(),
            bound_without_grad: HashSet::new(),
            facts: Facts::whole(Rc::clone(&root)),
            roots: vec![root],
            loops: Vec::new(),
            loss_memo: RefCell::new(HashMap::new()),
            loss_index: RefCell::new(None),
        }
        .with_trains()
    }

    fn with_trains(mut self) -> Self {
        let mut trains = false;
        let mut backpropagated = HashSet::new();
        for c in self.facts.calls() {
            if let Some(loss) = backward_loss(c.call) {
                trains = true;
                roots(loss, &mut backpropagated);
            } else if matches!(
                last_segment(&c.call.func),
                Some("train" | "enable_grad" | "set_grad_enabled" | "requires_grad_")
            ) {
                trains = true;
            }
        }
        self.trains = trains;
        self.backpropagated = backpropagated;
        self
    }
}

/// The checker: walks the module once, keeps the context, runs the rules.
pub struct Checker<'a> {
    /// The file's text.
    pub source: &'a str,
    /// Local name → qualified name, from every import in the file.
    pub imports: HashMap<String, String>,
    /// The innermost open scope (the module's when outside every function).
    current: Scope<'a>,
    /// The scopes around it, the module's first.
    outer: Vec<Scope<'a>>,
    /// Enclosing classes: whether each has base classes, and the `self.x = Class(...)`
    /// attributes its `__init__` creates (submodules).
    classes: Vec<(bool, HashSet<String>)>,
    /// Classes defined in this file whose bases name a module (`nn.Module`,
    /// `LightningModule`, `PreTrainedModel`): calling one builds a model.
    module_classes: HashSet<String>,
    /// Ranges already reported by OOM109 (a call's callee).
    pub handled: HashSet<TextRange>,
    rules: RuleSet,
    /// The project's library versions.
    pub project: Project,
    /// The module, for [`Checker::file`].
    module: &'a Module,
    /// Whole-file evidence, gathered on the first question.
    file: std::cell::OnceCell<FileFacts>,
    /// What the rules found.
    pub violations: Vec<Finding>,
    /// Names last bound to a model's output (`out = model(x)`; OOM114).
    pub model_outputs: HashSet<String>,
    /// How deep the walk is (statements and expressions).
    depth: usize,
    /// Set when the tree is deeper than [`MAX_WALK_DEPTH`]: the walk stops descending.
    too_deep: bool,
    /// While an assignment binds its targets: its value was computed with gradients off
    /// or from a name bound so ([`Scope::bound_without_grad`]).
    value_without_grad: bool,
}

/// The walk's own guard: the nesting pre-check (`parse::depth`) already refuses
/// deeper files, so this only holds if that check and the parser ever disagree.
pub const MAX_WALK_DEPTH: usize = crate::parse::depth::MAX_EXPR_DEPTH + 1_000;

impl<'a> Checker<'a> {
    /// Checks a parsed module with the given rules.
    /// `Err` when the tree is deeper than [`MAX_WALK_DEPTH`].
    /// A file that imports another framework and nothing of PyTorch's (JAX/Flax,
    /// TensorFlow) is checked only by the rules marked `tensorflow` in the registry,
    /// and only when that framework is TensorFlow/Keras: every other rule is a PyTorch
    /// rule.
    pub fn check(
        module: &'a Module,
        source: &'a str,
        settings: &crate::Settings,
    ) -> Result<(Vec<Finding>, crate::tree::Summary), ()> {
        let mut imports = HashMap::new();
        collect_imports(&module.body, &mut imports);
        let mut rules = settings.rules;
        if file_facts::is_other_framework_only(&imports) {
            rules = if file_facts::imports_tensorflow(&imports) {
                rules.intersect(RuleSet::tensorflow())
            } else {
                RuleSet::empty()
            };
            if rules.is_empty() {
                return Ok((Vec::new(), crate::tree::Summary::default()));
            }
        }
        let mut ch = Checker {
            source,
            imports,
            current: Scope::new("", &module.body),
            outer: Vec::new(),
            classes: Vec::new(),
            handled: HashSet::new(),
            module_classes: module_classes(&module.body),
            rules,
            project: settings.project,
            module,
            file: std::cell::OnceCell::new(),
            violations: Vec::new(),
            model_outputs: HashSet::new(),
            depth: 0,
            too_deep: false,
            value_without_grad: false,
        };
        ch.visit_body(&module.body);
        if ch.too_deep {
            return Err(());
        }
        // what the other files need to know: only a file that saves can say it (the
        // text test spares the facts' walk to most files)
        let summary = if ch.file.get().is_some()
            || source.contains("torch.save")
            || source.contains("offload_to_cpu")
        {
            ch.file().summary()
        } else {
            crate::tree::Summary::default()
        };
        Ok((ch.violations, summary))
    }

    /// Enters a node: `false` (and the walk stops descending) past [`MAX_WALK_DEPTH`].
    fn enter(&mut self) -> bool {
        self.depth = self.depth.saturating_add(1);
        if self.depth > MAX_WALK_DEPTH {
            self.too_deep = true;
        }
        !self.too_deep
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Whole-file evidence ([`FileFacts`]), gathered in one walk on first use.
    pub fn file(&self) -> &FileFacts {
        self.file
            .get_or_init(|| FileFacts::of(self.module, &self.imports))
    }

    /// Whether the file mentions CUDA at all (`.cuda()`, `"cuda"`, `torch.cuda`).
    pub fn source_mentions_cuda(&self) -> bool {
        self.source.contains("cuda")
    }

    /// The module being checked.
    pub fn module(&self) -> &'a Module {
        self.module
    }

    /// Whether a rule is selected.
    pub fn enabled(&self, rule: Rule) -> bool {
        self.rules.contains(rule)
    }

    /// The innermost scope.
    pub fn scope(&self) -> &Scope<'a> {
        &self.current
    }

    /// The innermost scope, to update.
    pub fn scope_mut(&mut self) -> &mut Scope<'a> {
        &mut self.current
    }

    /// The innermost open loop of the current function.
    pub fn innermost_loop(&self) -> Option<&LoopFrame<'a>> {
        self.scope().loops.last()
    }

    /// Whether autograd is recording here.
    pub fn grad_enabled(&self) -> bool {
        self.scope().no_grad == 0
    }

    /// Source text of a node.
    pub fn text(&self, range: TextRange) -> &'a str {
        self.source
            .get(range.start().to_usize()..range.end().to_usize())
            .unwrap_or("")
    }

    /// Source text of a node for a message: whitespace runs collapsed, at most 60
    /// characters (cut with `…`).
    pub fn snippet(&self, range: TextRange) -> String {
        const MAX: usize = 60;
        let mut out = String::new();
        for word in self.text(range).split_whitespace() {
            if !out.is_empty()
                && !out.ends_with(['(', '[', '{'])
                && !word.starts_with([')', ']', '}'])
            {
                out.push(' ');
            }
            out.push_str(word);
            if out.chars().count() > MAX {
                let cut: String = out.chars().take(MAX - 1).collect();
                return format!("{cut}…");
            }
        }
        out
    }

    /// [`Self::snippet`] of an expression, parenthesised when a method call on it would
    /// need it (`(a + b).item()`).
    pub fn receiver_snippet(&self, expr: &Expr) -> String {
        let s = self.snippet(expr.range());
        match expr {
            Expr::BinOp(_)
            | Expr::UnaryOp(_)
            | Expr::BoolOp(_)
            | Expr::Compare(_)
            | Expr::If(_) => {
                format!("({s})")
            }
            _ => s,
        }
    }

    /// The qualified name of a name/attribute chain through the file's imports
    /// (`nn.DataParallel` → `torch.nn.DataParallel`). A bare `torch` counts even
    /// without its import (snippets often omit it).
    pub fn qualified(&self, expr: &Expr) -> Option<String> {
        let (base, attrs) = chain(expr)?;
        let base = match self.imports.get(base) {
            Some(q) => q.as_str(),
            None if base == "torch" => "torch",
            None => return None,
        };
        Some(join_chain(base, &attrs))
    }

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
            Expr::Subscript(s) => match self.kind(&s.value) {
                k @ (Kind::Tensor { .. } | Kind::Host | Kind::Number) => k,
                _ => Kind::Unknown,
            },
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
        if let Expr::Attribute(a) = func {
            let recv = self.kind(&a.value);
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

    /// Whether `value`'s graph was already used by `.backward()` in this function
    /// while `container` itself never is: a running total or list of losses that
    /// were each backpropagated cannot be meant for a later backward (their
    /// graphs' buffers are freed), so returning it is no excuse — it is the
    /// PyTorch FAQ's `total_loss += loss` leak ("My model reports cuda runtime
    /// error(2): out of memory", <https://pytorch.org/docs/stable/notes/faq.html>).
    pub fn kept_after_backward(&self, container: &str, value: &Expr) -> bool {
        let v = text_of(value);
        let b = &self.scope().backpropagated;
        !v.is_empty() && b.contains(&v) && !b.contains(container)
    }

    /// Whether the accumulator `name` is consumed as a loss in this function
    /// (backpropagated or returned, directly or through a simple assignment).
    /// Memoised per function: a loop body of 100,000 `xs.append(loss)` asks once.
    pub fn consumed_as_loss(&self, name: &str) -> bool {
        let memo = &self.scope().loss_memo;
        if let Some(known) = memo.try_borrow().ok().and_then(|m| m.get(name).copied()) {
            return known;
        }
        let found = self.consumed_as_loss_uncached(name);
        if let Ok(mut m) = memo.try_borrow_mut() {
            m.insert(name.to_string(), found);
        }
        found
    }

    /// Alias propagation in source order (`loss = sum(losses)` makes `loss` stand for
    /// `losses` from there on), then: is one of the names returned as is, or
    /// backpropagated / scaled / appended somewhere (not by `name.append` itself)?
    /// Reads the function's [`LossIndex`], built once: the cost is the names reached,
    /// not the size of the function.
    fn consumed_as_loss_uncached(&self, name: &str) -> bool {
        let scope = self.scope();
        if let Ok(mut index) = scope.loss_index.try_borrow_mut()
            && index.is_none()
        {
            *index = Some(LossIndex::of(&scope.facts));
        }
        let Ok(index) = scope.loss_index.try_borrow() else {
            return false;
        };
        let Some(index) = index.as_ref() else {
            return false;
        };
        // earliest assignment from which each name stands for `name`
        let mut from: HashMap<&str, usize> = [(name, 0)].into_iter().collect();
        let mut queue = std::collections::BinaryHeap::from([std::cmp::Reverse((0usize, name))]);
        while let Some(std::cmp::Reverse((at, n))) = queue.pop() {
            if from.get(n).is_some_and(|&f| f < at) {
                continue;
            }
            if index.returned.contains(n)
                || index.sinks.get(n).is_some_and(|calls| {
                    calls
                        .iter()
                        .any(|receiver| receiver.as_deref() != Some(name))
                })
            {
                return true;
            }
            let Some(assigns) = index.by_value.get(n) else {
                continue;
            };
            for &i in assigns
                .get(assigns.partition_point(|&i| i < at)..)
                .unwrap_or_default()
            {
                let next = i.saturating_add(1);
                for t in index.targets.get(i).into_iter().flatten() {
                    if from.get(t.as_str()).is_none_or(|&f| f > next) {
                        from.insert(t, next);
                        queue.push(std::cmp::Reverse((next, t)));
                    }
                }
            }
        }
        false
    }

    fn bind(&mut self, target: &Expr, kind: Kind) {
        // a name that is backpropagated later carries a graph, whatever made it
        // (`loss = compute_loss(batch)` … `loss.backward()`)
        let kind = match target {
            Expr::Name(n) => {
                let name = n.id.as_str();
                let without_grad = self.value_without_grad || !self.grad_enabled();
                let by_backward = kind == Kind::Unknown
                    && !without_grad
                    && self.grad_enabled()
                    && self.scope().backpropagated.contains(name);
                let s = self.scope_mut();
                if without_grad {
                    s.bound_without_grad.insert(name.to_string());
                } else {
                    s.bound_without_grad.remove(name);
                }
                if by_backward {
                    s.graph_by_backward.insert(name.to_string());
                    Kind::Tensor { graph: true }
                } else {
                    s.graph_by_backward.remove(name);
                    kind
                }
            }
            _ => kind,
        };
        match target {
            Expr::Name(_) | Expr::Attribute(_) => {
                let t = text_of(target);
                if !t.is_empty() {
                    self.scope_mut().env.insert(t, kind);
                }
            }
            Expr::Tuple(t) => {
                let k = if matches!(kind, Kind::Tensor { .. }) {
                    kind
                } else {
                    Kind::Unknown
                };
                for e in &t.elts {
                    self.bind(e, k);
                }
            }
            Expr::List(t) => {
                for e in &t.elts {
                    self.bind(e, Kind::Unknown);
                }
            }
            Expr::Starred(s) => self.bind(&s.value, Kind::Unknown),
            _ => {}
        }
    }

    /// `accelerator.prepare(model, opt, …)` / `fabric.setup(model, opt)`: each result is
    /// what the argument in its position was (a model stays a model).
    fn prepared_kinds(&self, value: &Expr) -> Option<Vec<Kind>> {
        let Expr::Call(c) = value else { return None };
        let Expr::Attribute(a) = &*c.func else {
            return None;
        };
        let recv = last_segment(&a.value)?.to_ascii_lowercase();
        let wraps = matches!(a.attr.as_str(), "prepare" | "setup" | "prepare_model")
            && (recv.contains("accelerator") || recv.contains("fabric"));
        if !wraps || c.arguments.args.iter().any(Expr::is_starred_expr) {
            return None;
        }
        Some(
            c.arguments
                .args
                .iter()
                .map(|arg| match self.kind(arg) {
                    Kind::Model => Kind::Model,
                    _ if self.is_model_callee(arg) => Kind::Model,
                    _ => Kind::Unknown,
                })
                .collect(),
        )
    }

    fn is_grad_off(&self, expr: &Expr) -> bool {
        let call_target = match expr {
            Expr::Call(c) => &*c.func,
            e => e,
        };
        match self.qualified(call_target).as_deref() {
            Some("torch.no_grad" | "torch.inference_mode" | "torch.autograd.no_grad") => true,
            Some("torch.set_grad_enabled" | "torch.autograd.set_grad_enabled") => {
                matches!(expr, Expr::Call(c) if matches!(c.arguments.args.first(), Some(Expr::BooleanLiteral(b)) if !b.value))
            }
            // `no_grad()`, `inference_mode()` and project wrappers named after them
            // (YOLOv5's `@smart_inference_mode()`, `@torch_no_grad`)
            _ => file_facts::is_grad_off_syntax(expr),
        }
    }

    fn visit_function(&mut self, f: &'a ast::StmtFunctionDef) {
        for d in &f.decorator_list {
            self.visit_expr(&d.expression);
        }
        let outer_no_grad = self.scope().no_grad;
        let mut scope = Scope::new(f.name.as_str(), &f.body);
        scope.no_grad = outer_no_grad.saturating_add(u32::from(
            f.decorator_list
                .iter()
                .any(|d| self.is_grad_off(&d.expression)),
        ));
        scope.decorators = f
            .decorator_list
            .iter()
            .filter_map(|d| {
                last_segment(match &d.expression {
                    Expr::Call(c) => &c.func,
                    e => e,
                })
                .map(str::to_string)
            })
            .collect();
        let in_class = self.classes.last().map(|c| c.0);
        let first_param = f
            .parameters
            .posonlyargs
            .iter()
            .chain(f.parameters.args.iter())
            .next()
            .map(|p| p.parameter.name.to_string());
        if in_class.is_some() {
            scope.self_name.clone_from(&first_param);
        }
        if in_class == Some(true) && f.name.as_str() == "forward" {
            scope.is_forward = true;
            for p in f.parameters.iter_non_variadic_params().skip(1) {
                scope.env.insert(p.parameter.name.to_string(), Kind::Param);
            }
        }
        let outer = std::mem::replace(&mut self.current, scope);
        self.outer.push(outer);
        self.visit_body(&f.body);
        if let Some(outer) = self.outer.pop() {
            self.current = outer;
        }
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

fn combine(a: Kind, b: Kind) -> Kind {
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

/// Names of the classes of a module body whose bases name a module or model
/// (`nn.Module`, `pl.LightningModule`, `PreTrainedModel`, `Net`).
fn module_classes(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::new();
    for stmt in body {
        let Stmt::ClassDef(c) = stmt else { continue };
        let is_module = c.arguments.as_ref().is_some_and(|a| {
            a.args.iter().any(|b| {
                last_segment(b).is_some_and(|l| {
                    (l.ends_with("Module") || l.ends_with("Model") || out.contains(l))
                        && l != "BaseModel"
                })
            })
        });
        if is_module {
            out.insert(c.name.to_string());
        }
    }
    out
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

/// `self.x = SomeClass(...)` / `self.x = nn.Linear(...)` in a class's `__init__`.
fn submodules(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::new();
    for stmt in body {
        let Stmt::FunctionDef(f) = stmt else { continue };
        if f.name.as_str() != "__init__" {
            continue;
        }
        let facts = BodyFacts::of(&f.body);
        for (targets, value, _) in &facts.assigns {
            let Expr::Call(c) = value else { continue };
            let class_like = last_segment(&c.func)
                .is_some_and(|l| l.starts_with(|ch: char| ch.is_ascii_uppercase()));
            if !class_like {
                continue;
            }
            for t in targets {
                if let Some(attr) = t.strip_prefix("self.") {
                    out.insert(attr.to_string());
                }
            }
        }
    }
    out
}

pub(crate) fn collect_imports(body: &[Stmt], out: &mut HashMap<String, String>) {
    for stmt in body {
        match stmt {
            Stmt::Import(i) => {
                for a in &i.names {
                    let full = a.name.as_str();
                    match &a.asname {
                        Some(asn) => {
                            out.insert(asn.to_string(), full.to_string());
                        }
                        None => {
                            let first = full.split('.').next().unwrap_or(full);
                            out.insert(first.to_string(), first.to_string());
                        }
                    }
                }
            }
            Stmt::ImportFrom(i) if i.level == 0 => {
                let Some(m) = &i.module else { continue };
                for a in &i.names {
                    if a.name.as_str() == "*" {
                        continue;
                    }
                    let local = a.asname.as_ref().unwrap_or(&a.name);
                    out.insert(
                        local.to_string(),
                        format!("{}.{}", m.as_str(), a.name.as_str()),
                    );
                }
            }
            Stmt::FunctionDef(f) => collect_imports(&f.body, out),
            Stmt::ClassDef(c) => collect_imports(&c.body, out),
            Stmt::If(s) => {
                collect_imports(&s.body, out);
                for c in &s.elif_else_clauses {
                    collect_imports(&c.body, out);
                }
            }
            Stmt::Try(t) => {
                collect_imports(&t.body, out);
                for h in &t.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    collect_imports(&h.body, out);
                }
                collect_imports(&t.orelse, out);
            }
            Stmt::With(w) => collect_imports(&w.body, out),
            _ => {}
        }
    }
}

impl<'a> Visitor<'a> for Checker<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.enter() {
            self.visit_stmt_inner(stmt);
        }
        self.leave();
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.enter() {
            self.visit_expr_inner(expr);
        }
        self.leave();
    }
}

impl<'a> Checker<'a> {
    fn visit_stmt_inner(&mut self, stmt: &'a Stmt) {
        rules::on_stmt(self, stmt);
        match stmt {
            Stmt::FunctionDef(f) => self.visit_function(f),
            Stmt::ClassDef(c) => {
                for d in &c.decorator_list {
                    self.visit_expr(&d.expression);
                }
                let has_bases = c.arguments.as_ref().is_some_and(|a| !a.args.is_empty());
                self.classes.push((has_bases, submodules(&c.body)));
                // a class body is its own namespace; its methods get their own scopes
                self.visit_body(&c.body);
                self.classes.pop();
            }
            Stmt::For(s) => {
                self.visit_expr(&s.iter);
                self.bind(&s.target, Kind::Unknown);
                self.run_loop(stmt, &s.body, Some(&s.iter), Some(&s.target));
                self.visit_body(&s.orelse);
            }
            Stmt::While(s) => {
                self.visit_expr(&s.test);
                self.run_loop(stmt, &s.body, None, None);
                self.visit_body(&s.orelse);
            }
            Stmt::If(s) => {
                self.visit_expr(&s.test);
                self.loop_counter(|l| l.if_depth = l.if_depth.saturating_add(1));
                self.visit_body(&s.body);
                for clause in &s.elif_else_clauses {
                    if let Some(t) = &clause.test {
                        self.visit_expr(t);
                    }
                    self.visit_body(&clause.body);
                }
                self.loop_counter(|l| l.if_depth = l.if_depth.saturating_sub(1));
            }
            Stmt::Try(t) => {
                self.visit_body(&t.body);
                self.loop_counter(|l| l.except_depth = l.except_depth.saturating_add(1));
                for h in &t.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    self.visit_body(&h.body);
                }
                self.loop_counter(|l| l.except_depth = l.except_depth.saturating_sub(1));
                self.visit_body(&t.orelse);
                self.visit_body(&t.finalbody);
            }
            Stmt::With(w) => {
                let off = w.items.iter().any(|i| self.is_grad_off(&i.context_expr));
                for item in &w.items {
                    self.visit_expr(&item.context_expr);
                    if let Some(v) = &item.optional_vars {
                        self.bind(v, Kind::Unknown);
                    }
                }
                let grad_off = u32::from(off);
                let s = self.scope_mut();
                s.no_grad = s.no_grad.saturating_add(grad_off);
                self.visit_body(&w.body);
                let s = self.scope_mut();
                s.no_grad = s.no_grad.saturating_sub(grad_off);
            }
            Stmt::Assign(a) => {
                self.visit_expr(&a.value);
                let kind = self.kind(&a.value);
                self.value_without_grad = !self.grad_enabled()
                    || root_name(&a.value)
                        .is_some_and(|r| self.scope().bound_without_grad.contains(r));
                if let Expr::Call(c) = &*a.value
                    && text_of(&c.func).ends_with(".from_pretrained")
                    && c.arguments.find_keyword("device_map").is_some()
                {
                    for t in &a.targets {
                        let name = text_of(t);
                        self.scope_mut().device_map_models.insert(name);
                    }
                }
                let prepared = self.prepared_kinds(&a.value);
                for t in &a.targets {
                    if !matches!(t, Expr::Name(_) | Expr::Tuple(_) | Expr::List(_)) {
                        self.visit_expr(t);
                    }
                    match (&prepared, t) {
                        (Some(kinds), Expr::Tuple(tt)) if kinds.len() == tt.elts.len() => {
                            for (e, k) in tt.elts.iter().zip(kinds) {
                                self.bind(e, *k);
                            }
                        }
                        (Some(kinds), Expr::Name(_)) if kinds.len() == 1 => {
                            self.bind(t, kinds.first().copied().unwrap_or(Kind::Unknown));
                        }
                        // `loss, metrics = loss_fn(...)`: the loss carries the graph; the
                        // other results of a loss function are usually detached metrics
                        // (torchtune's DPOLoss returns detached rewards)
                        (_, Expr::Tuple(tt))
                            if kind.has_graph()
                                && matches!(&*a.value, Expr::Call(c) if self.is_loss_callee(&c.func)) =>
                        {
                            for (i, e) in tt.elts.iter().enumerate() {
                                self.bind(e, if i == 0 { kind } else { Kind::Unknown });
                            }
                        }
                        // `x = x.to(...)` of a device_map model keeps it one
                        _ => self.bind(t, kind),
                    }
                }
                self.value_without_grad = false;
            }
            Stmt::AugAssign(a) => {
                self.visit_expr(&a.value);
                let k = combine(self.kind(&a.target), self.kind(&a.value));
                self.bind(&a.target, k);
            }
            Stmt::AnnAssign(a) => {
                if let Some(v) = &a.value {
                    self.visit_expr(v);
                    let k = self.kind(v);
                    self.bind(&a.target, k);
                }
            }
            Stmt::Expr(e) => {
                self.visit_expr(&e.value);
                // `torch.set_grad_enabled(False)` as a statement: grad is off from here on
                if let Expr::Call(c) = &*e.value
                    && matches!(
                        self.qualified(&c.func).as_deref(),
                        Some("torch.set_grad_enabled" | "torch.autograd.set_grad_enabled")
                    )
                    && self.is_grad_off(&e.value)
                {
                    let s = self.scope_mut();
                    s.no_grad = s.no_grad.saturating_add(1);
                }
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    fn visit_expr_inner(&mut self, expr: &'a Expr) {
        if let Expr::Call(c) = expr {
            rules::on_call(self, c);
        }
        if let Expr::Attribute(_) = expr
            && !self.handled.contains(&expr.range())
        {
            rules::on_attribute(self, expr);
        }
        visitor::walk_expr(self, expr);
    }
}

impl<'a> Checker<'a> {
    fn loop_counter(&mut self, f: impl FnOnce(&mut LoopFrame<'a>)) {
        if let Some(l) = self.scope_mut().loops.last_mut() {
            f(l);
        }
    }

    fn run_loop(
        &mut self,
        stmt: &'a Stmt,
        body: &'a [Stmt],
        iter: Option<&Expr>,
        target: Option<&Expr>,
    ) {
        let mut targets = HashSet::new();
        if let Some(t) = target {
            collect_targets(t, &mut targets);
        }
        // the loop's span in a scanned body, or a scan of this loop alone
        let key = stmt.range();
        let found = self
            .scope()
            .roots
            .iter()
            .rev()
            .find_map(|root| root.loops.get(&key).map(|&span| (Rc::clone(root), span)));
        let own_root = found.is_none();
        let (all, span) = found.unwrap_or_else(|| {
            let root = Rc::new(BodyFacts::of_loop(stmt));
            let span = root
                .loops
                .get(&key)
                .copied()
                .unwrap_or_else(|| root.whole());
            (root, span)
        });
        if own_root {
            self.scope_mut().roots.push(Rc::clone(&all));
        }
        let facts = Facts {
            all,
            span,
            targets: targets.clone(),
        };
        let frame = LoopFrame {
            // a loop inside `forward` is model computation, never a loop over data
            is_data_loop: !self.scope().is_forward && is_data_loop(iter, target, self.source),
            is_epoch_loop: target
                .is_some_and(|t| self.text(t.range()).to_ascii_lowercase().contains("epoch"))
                || iter.is_some_and(|i| {
                    let text = self.text(i.range()).to_ascii_lowercase();
                    text.contains("epoch") && !text.contains("loader")
                }),
            targets,
            facts,
            if_depth: 0,
            except_depth: 0,
        };
        self.scope_mut().loops.push(frame);
        self.visit_body(body);
        rules::on_loop_exit(self);
        self.scope_mut().loops.pop();
        if own_root {
            self.scope_mut().roots.pop();
        }
    }
}

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

    fn all_rules() -> Settings {
        Settings {
            rules: crate::rules::RuleSet::all(),
            ..Settings::default()
        }
    }

    /// The walk's own guard, behind the nesting pre-check: a tree deeper than
    /// `MAX_WALK_DEPTH` (parsed here without the pre-check) is refused, not overflowed.
    #[test]
    fn the_walk_refuses_a_tree_deeper_than_its_guard() {
        let run = || {
            let deep = format!("x = a{}\n", ".b".repeat(super::MAX_WALK_DEPTH + 10));
            let lines = crate::parse::Lines::new(&deep);
            let module = crate::parse::parse_module(&deep, &lines).expect("parses");
            let result = super::Checker::check(&module, &deep, &all_rules()).map(|v| v.0.len());
            // the tree is dropped on this big stack too
            drop(module);
            result
        };
        let out = std::thread::Builder::new()
            .stack_size(1 << 30)
            .spawn(run)
            .expect("thread")
            .join()
            .expect("no panic");
        assert_eq!(out, Err(()));
        let shallow = "x = a.b.c\n";
        let lines = crate::parse::Lines::new(shallow);
        let module = crate::parse::parse_module(shallow, &lines).expect("parses");
        assert_eq!(
            super::Checker::check(&module, shallow, &all_rules()).map(|v| v.0.len()),
            Ok(0)
        );
    }

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

    #[test]
    fn assignments_and_aliases_are_followed() {
        let src = "xs = []\nfor batch in loader:\n    loss = model(batch)\n    kept = loss\n    xs.append(kept)\n";
        let codes: Vec<_> = lint_source("t.py", src, &Settings::default())
            .expect("ok")
            .into_iter()
            .map(|d| d.code)
            .collect();
        assert_eq!(codes, vec!["OOM101"]);
        // a loss object built from torch.nn through an alias
        let src = "import torch.nn as nn\nloss_obj = nn.CrossEntropyLoss()\nxs = []\nfor batch in loader:\n    l = loss_obj(batch.x, batch.y)\n    xs.append(l)\n";
        let codes: Vec<_> = lint_source("t.py", src, &Settings::default())
            .expect("ok")
            .into_iter()
            .map(|d| d.code)
            .collect();
        assert_eq!(codes, vec!["OOM101"]);
    }

    #[test]
    fn no_grad_regions_and_decorators_drop_the_graph() {
        let src = "import torch\nxs = []\nwith torch.no_grad():\n    for batch in loader:\n        xs.append(model(batch))\n@torch.inference_mode()\ndef f(loader):\n    ys = []\n    for batch in loader:\n        ys.append(model(batch))\n        def inner():\n            return model(batch)\n    return ys\n";
        assert!(
            lint_source("t.py", src, &Settings::default())
                .expect("ok")
                .is_empty()
        );
    }
}
