//! Facts about a whole file that a rule needs as *evidence* before it reports (issue
//! 19): which framework the file is written for, whether it trains at all, whether it
//! uses PEFT, runs distributed, which models it freezes, what each call's result is
//! bound to, and which blocks only rank 0 runs.
//!
//! Most files never need them: they are gathered in one walk of the module, on the
//! first question (a `from_pretrained` or `torch.load` call), and kept for the rest of
//! the file. The framework check reads the import table only, and runs on every file.

use foldhash::{HashMap, HashSet};

use crate::context::{any_expr, last_segment, text_of};
use crate::parse::ast::{self, Expr, Stmt};
use crate::parse::visitor::{self, Visitor};
use crate::parse::{Module, Ranged, TextRange};

/// TRL's trainer configurations (`SFTConfig`, `DPOConfig`, `GRPOConfig`…).
const TRAINER_CONFIGS: &[&str] = &[
    "SFT", "DPO", "GRPO", "RLOO", "KTO", "ORPO", "PPO", "Reward", "CPO", "GKD", "Online",
];

/// Names that show a file shards its model with DeepSpeed ZeRO or FSDP.
const SHARDING_NAMES: &[&str] = &[
    "deepspeed_plugin",
    "zero_stage",
    "HfDeepSpeedConfig",
    "is_deepspeed_zero3_enabled",
    "fsdp_plugin",
    "fsdp_auto_wrap_policy",
    "FullyShardedDataParallel",
    "FSDP",
    "FullyShardedDataParallelPlugin",
    "fully_shard",
];

/// Top-level packages that show a file is PyTorch code.
const TORCH_PACKAGES: &[&str] = &[
    "torch",
    "torchvision",
    "torchaudio",
    "lightning",
    "pytorch_lightning",
    "accelerate",
    "deepspeed",
    "peft",
    "trl",
    "timm",
    "bitsandbytes",
    "fairscale",
];

/// Top-level packages of other frameworks. `transformers` and `diffusers` ship Flax and
/// TensorFlow models too, so they prove nothing either way.
const OTHER_PACKAGES: &[&str] = &[
    "jax",
    "flax",
    "optax",
    "haiku",
    "tensorflow",
    "keras",
    "tf_keras",
    "mlx",
    "paddle",
    "mindspore",
    "mxnet",
];

/// Whether a file imports another framework (JAX/Flax, TensorFlow/Keras…) and nothing
/// of PyTorch's: every rule is a PyTorch rule, so such a file is not checked. A file
/// without imports (a snippet) is checked.
pub fn is_other_framework_only(imports: &HashMap<String, String>) -> bool {
    let top = |q: &String| q.split('.').next().unwrap_or("").to_string();
    let tops: HashSet<String> = imports.values().map(top).collect();
    let torch = TORCH_PACKAGES.iter().any(|p| tops.contains(*p));
    let other = OTHER_PACKAGES.iter().any(|p| tops.contains(*p));
    other && !torch
}

/// Whether a file imports TensorFlow or Keras (`tensorflow`, `keras`, `tf_keras`): the
/// rules marked `tensorflow` in the registry run on such a file even when it imports
/// nothing of PyTorch's.
pub fn imports_tensorflow(imports: &HashMap<String, String>) -> bool {
    imports.values().any(|q| {
        let top = q.split('.').next().unwrap_or("");
        matches!(top, "tensorflow" | "keras" | "tf_keras")
    })
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct FileFacts {
    /// The file trains something: a `.backward()`/`manual_backward()`, a `*Trainer(...)`
    /// or an optimizer is built.
    pub trains: bool,
    /// The file uses PEFT (`import peft`, `get_peft_model`, `LoraConfig`…): the base
    /// model's weights are frozen.
    pub peft: bool,
    /// The file runs one process per GPU (`torch.distributed`, `init_process_group`,
    /// `DistributedDataParallel`, `Accelerator`, DeepSpeed, `local_rank`).
    pub distributed: bool,
    /// The file shards its model with DeepSpeed ZeRO or FSDP (`import deepspeed`,
    /// `deepspeed_plugin`/`zero_stage`/`HfDeepSpeedConfig`, `fsdp_plugin`,
    /// `fsdp_auto_wrap_policy`, `FSDP(...)`/`FullyShardedDataParallel(...)`): the engine
    /// owns the parameters' dtype and placement on the GPU.
    pub sharded: bool,
    /// Names (texts) whose parameters are frozen: `m.requires_grad_(False)`,
    /// `for p in m.parameters(): p.requires_grad = False`, `m.eval()` chained on the
    /// load itself.
    pub frozen: HashSet<String>,
    /// Calls whose own result is frozen (`X.from_pretrained(...).eval()`).
    pub frozen_calls: HashSet<TextRange>,
    /// A call's range → the targets its result is bound to (`x = f(...)`, also through
    /// a chain `x = f(...).to(device)`).
    pub bound_to: HashMap<TextRange, Vec<String>>,
    /// `torch.load(...)` calls passed straight to `X.load_state_dict(...)`: the call's
    /// range → `X`'s text (`self.lr_scheduler`).
    pub loaded_into: HashMap<TextRange, String>,
    /// Names deleted (`del x`) or reset to `None`, with where.
    pub released: Vec<(String, TextRange)>,
    /// Every function body's range.
    pub functions: Vec<TextRange>,
    /// `torch.cuda.set_device(...)` is called (or `CUDA_VISIBLE_DEVICES` is set, or a
    /// `torch.cuda.device(...)` block is used): each process picks its own GPU.
    pub sets_device: bool,
    /// `init_process_group(...)` is called here.
    pub inits_process_group: bool,
    /// …with the `gloo` backend only (CPU training).
    pub gloo: bool,
    /// Functions registered as forward hooks (`m.register_forward_hook(hook)`), and
    /// hook factories (`register_forward_hook(get_activation("fc"))` → `get_activation`).
    pub forward_hooks: HashSet<String>,
    /// Bodies of `if`s whose test names a rank (`if rank == 0:`,
    /// `if accelerator.is_main_process:`): only one process runs them.
    pub rank_guarded: Vec<TextRange>,
    /// The bodies of the single-process side of a distributed test (`if not
    /// args.distributed:`, the `else` of `if world_size > 1:`): one process runs them.
    pub single_process: Vec<TextRange>,
    /// Names whose value names a rank (`f"model_rank{accelerator.process_index}.bin"`),
    /// directly or through another such name, in source order.
    per_rank_names: HashSet<String>,
    /// `torch.load(...)` calls whose path names a rank: each process reads back the
    /// file it saved from its own GPU.
    pub per_rank_loads: HashSet<TextRange>,
    /// Names bound to an in-memory buffer (`buffer = io.BytesIO(...)`).
    buffer_names: HashSet<String>,
    /// `torch.load(...)` calls that read an in-memory buffer (an object sent between
    /// processes, deserialised where it was serialised: Lightning's XLA broadcast).
    pub buffer_loads: HashSet<TextRange>,
    /// Names bound to a value moved to the CPU (`{k: v.cpu() for …}`, `x.to("cpu")`).
    cpu_names: HashSet<String>,
    /// `torch.save(...)` calls, and how many of them save a CPU value.
    saves: u32,
    cpu_saves: u32,
    /// State dicts are gathered to the CPU before saving (`offload_to_cpu=True`, or
    /// `….offload_to_cpu = flag`).
    offloads_to_cpu: bool,
    /// Names saved whole (`torch.save(model, f)`) or used as a model (`model.eval()`,
    /// `model.parameters()`, `model(x)`): a `torch.load` bound to one reloads the model
    /// itself, kept on the device on purpose.
    pub used_as_model: HashSet<String>,
    /// Functions whose body turns gradients off (`with torch.no_grad():`,
    /// `@torch.no_grad()` on an inner wrapper): used as a decorator, they wrap the
    /// decorated function in `no_grad`.
    pub grad_off_functions: HashSet<String>,
    /// Module-level functions without decorators: name and range. A `test_*` function
    /// is left out (pytest calls it).
    top_functions: Vec<(String, TextRange)>,
    /// Every name the file reads (`x`), every attribute (`obj.x`) and every string
    /// that is an identifier (`getattr(m, "x")`): what might call a function.
    mentions: HashSet<String>,
    /// The file is a script: `if __name__ == "__main__":` at module level.
    pub script: bool,
    /// Names bound to a meter (`losses = AverageMeter()`) → the meter's class.
    pub meters: HashMap<String, String>,
    /// Classes defined in the file whose `update` converts its value itself
    /// (`.item()`, `float(...)`, `.detach()`, an `isinstance(…, torch.Tensor)` test).
    pub converting_meters: HashSet<String>,
    /// Function name → (calls with gradients off, calls with gradients on), for calls
    /// by name (`evaluate(...)`, `self.evaluate(...)`).
    calls: HashMap<String, (u32, u32)>,
    /// Depth of `with torch.no_grad()` blocks and grad-off-decorated functions.
    no_grad: u32,
}

impl FileFacts {
    /// Gathers the facts of `module` (imports already resolved by the checker).
    pub fn of(module: &Module, imports: &HashMap<String, String>) -> Self {
        let mut scan = Scan {
            facts: FileFacts::default(),
            depth: 0,
            functions: Vec::new(),
        };
        let tops: HashSet<&str> = imports
            .values()
            .map(|q| q.split('.').next().unwrap_or(""))
            .collect();
        scan.facts.peft = tops.contains("peft");
        scan.facts.sharded = tops.contains("deepspeed");
        scan.facts.distributed = tops.contains("deepspeed")
            || tops.contains("accelerate")
            || imports.values().any(|q| q.starts_with("torch.distributed"));
        for stmt in &module.body {
            match stmt {
                Stmt::FunctionDef(f)
                    if f.decorator_list.is_empty() && !f.name.starts_with("test") =>
                {
                    scan.facts
                        .top_functions
                        .push((f.name.to_string(), f.range()));
                }
                Stmt::If(i) if is_main_test(&i.test) => scan.facts.script = true,
                _ => {}
            }
        }
        scan.visit_body(&module.body);
        scan.facts
    }

    /// What this file tells the others ([`crate::tree`]).
    pub fn summary(&self) -> crate::tree::Summary {
        crate::tree::Summary {
            saves: self.saves,
            cpu_saves: self.cpu_saves,
            offloads_to_cpu: self.offloads_to_cpu,
            returns: Vec::new(),
        }
    }

    /// Whether the file writes no checkpoint itself.
    pub fn saves_nothing(&self) -> bool {
        self.saves == 0 && !self.offloads_to_cpu
    }

    /// The module-level helper that holds `at` when nothing in this file names it and
    /// the file is a script (or the helper is private: `_load`): code that may be
    /// dead. Whether another file names it is the tree's question.
    pub fn unused_helper(&self, at: TextRange) -> Option<&str> {
        let (name, _) = self
            .top_functions
            .iter()
            .find(|(_, r)| r.contains_range(at))?;
        (!self.mentions.contains(name) && (self.script || name.starts_with('_')))
            .then_some(name.as_str())
    }

    /// Whether `name` is released (`del name`, `name = None`) in the function that holds
    /// `at` (the module for top-level code; not in nested functions' own code).
    pub fn released_near(&self, name: &str, at: TextRange) -> bool {
        let innermost = |r: TextRange| {
            self.functions
                .iter()
                .filter(|f| f.contains_range(r))
                .min_by_key(|f| f.len())
                .copied()
        };
        let home = innermost(at);
        self.released
            .iter()
            .any(|(n, where_)| n == name && innermost(*where_) == home)
    }

    /// Whether every checkpoint this file writes holds CPU tensors: it saves at least
    /// once, and each `torch.save` saves a value moved to the CPU, or the file gathers
    /// its state dicts to the CPU (`offload_to_cpu`).
    pub fn saves_cpu_state(&self) -> bool {
        self.saves > 0 && (self.cpu_saves == self.saves || self.offloads_to_cpu)
    }

    /// Whether the file calls `name` and only ever with gradients off (inside
    /// `with torch.no_grad():` or a function decorated so).
    pub fn called_only_without_grad(&self, name: &str) -> bool {
        self.calls
            .get(name)
            .is_some_and(|&(off, on)| off > 0 && on == 0)
    }

    /// Whether `range` lies in a block only rank 0 runs.
    pub fn single_process(&self, range: TextRange) -> bool {
        self.single_process.iter().any(|g| g.contains_range(range))
    }

    /// Whether `range` is under an `if rank == 0:`-style guard.
    pub fn rank_guarded(&self, range: TextRange) -> bool {
        self.rank_guarded.iter().any(|g| g.contains_range(range))
    }
}

struct Scan {
    facts: FileFacts,
    depth: usize,
    /// The functions being walked, innermost last, and whether their body turns
    /// gradients off somewhere (a `with` block or a decorator of an inner function).
    functions: Vec<(String, bool)>,
}

/// Whether a meter's `update(self, val, …)` converts `val` to a number or cuts its
/// graph itself: `val.item()`, `float(val)`, `val.detach()`, `isinstance(val, torch.Tensor)`.
fn update_converts(f: &ast::StmtFunctionDef) -> bool {
    let Some(val) = f.parameters.args.get(1).map(|p| p.parameter.name.as_str()) else {
        return false;
    };
    let is_val = |e: &Expr| matches!(e, Expr::Name(n) if n.id.as_str() == val);
    f.body.iter().any(|s| {
        let mut found = false;
        crate::context::any_stmt_expr(s, &mut |e| {
            let hit = match e {
                Expr::Call(c) => match (&*c.func, c.arguments.args.first()) {
                    (Expr::Attribute(a), _) => {
                        matches!(a.attr.as_str(), "item" | "detach" | "tolist" | "cpu")
                            && is_val(&a.value)
                    }
                    (Expr::Name(n), Some(arg)) => {
                        matches!(n.id.as_str(), "float" | "int" | "isinstance") && is_val(arg)
                    }
                    _ => false,
                },
                _ => false,
            };
            found |= hit;
            hit
        });
        found
    })
}

/// `__name__ == "__main__"` (either way round).
fn is_main_test(test: &Expr) -> bool {
    let Expr::Compare(c) = test else {
        return false;
    };
    let sides = std::iter::once(&*c.left).chain(c.comparators.iter());
    let mut name = false;
    let mut main = false;
    for e in sides {
        match e {
            Expr::Name(n) if n.id.as_str() == "__name__" => name = true,
            Expr::StringLiteral(s) if s.value.to_str() == "__main__" => main = true,
            _ => {}
        }
    }
    name && main
}

/// `Some(true)` for a test that holds when several processes run (`args.distributed`,
/// `world_size > 1`, `dist.is_initialized()`), `Some(false)` for its negation (`not
/// args.distributed`, `world_size == 1`), `None` for anything else.
fn distributed_test(test: &Expr) -> Option<bool> {
    let names_multi = |e: &Expr| {
        last_segment(match e {
            Expr::Call(c) => &c.func,
            e => e,
        })
        .is_some_and(|l| {
            let l = l.to_ascii_lowercase();
            l == "distributed"
                || l == "is_initialized"
                || l == "ddp"
                || l == "multi_gpu"
                || l == "is_distributed"
                || l == "use_ddp"
        })
    };
    let world =
        |e: &Expr| last_segment(e).is_some_and(|l| l.to_ascii_lowercase().contains("world_size"));
    let one = |e: &Expr| matches!(e, Expr::NumberLiteral(n) if matches!(n.value, ast::Number::Int(ref i) if i.as_u8() == Some(1)));
    match test {
        Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) => {
            distributed_test(&u.operand).map(|m| !m)
        }
        Expr::Compare(c) if world(&c.left) && c.comparators.len() == 1 => {
            let (op, right) = (c.ops.first()?, c.comparators.first()?);
            if !one(right) {
                return None;
            }
            match op {
                ast::CmpOp::Gt | ast::CmpOp::NotEq => Some(true),
                ast::CmpOp::Eq | ast::CmpOp::LtE => Some(false),
                _ => None,
            }
        }
        e if names_multi(e) => Some(true),
        _ => None,
    }
}

fn is_rank_test(test: &Expr) -> bool {
    let mut found = false;
    let mut v = RankFinder { found: &mut found };
    v.visit_expr(test);
    found
}

struct RankFinder<'f> {
    found: &'f mut bool,
}

impl<'a> Visitor<'a> for RankFinder<'_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if *self.found {
            return;
        }
        if let Some(last) = last_segment(expr) {
            let l = last.to_ascii_lowercase();
            if l.contains("rank")
                || l.contains("main_process")
                || l.contains("is_master")
                || l == "master_process"
                || l == "is_main"
            {
                *self.found = true;
                return;
            }
        }
        visitor::walk_expr(self, expr);
    }
}

/// Whether `expr` names a rank (`process_index`, `local_rank`, `rank`) or one of
/// `names`.
fn mentions_rank_or(expr: &Expr, names: &HashSet<String>) -> bool {
    any_expr(expr, &mut |e| {
        last_segment(e).is_some_and(|last| {
            let l = last.to_ascii_lowercase();
            l.contains("rank") || l == "process_index" || names.contains(last)
        })
    })
}

/// Whether `expr` moves a value to the CPU (`.cpu()`, `.to("cpu")`) or reads one of
/// `names` (bound to such a value).
fn moved_to_cpu_or(expr: &Expr, names: &HashSet<String>) -> bool {
    any_expr(expr, &mut |e| match e {
        Expr::Call(c) if last_segment(&c.func) == Some("cpu") => true,
        Expr::Call(c) => {
            last_segment(&c.func) == Some("to")
                && matches!(c.arguments.args.first(), Some(Expr::StringLiteral(s)) if s.value.to_str() == "cpu")
        }
        Expr::Name(n) => names.contains(n.id.as_str()),
        _ => false,
    })
}

/// Whether `expr` is `torch.<name>` (`torch.load`, `torch.save`; the module's own
/// name, not an alias: enough for evidence, which only ever skips a report).
fn is_torch_fn(func: &Expr, name: &str) -> bool {
    matches!(func, Expr::Attribute(a) if a.attr.as_str() == name && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "torch"))
}

/// `torch.no_grad()`, `torch.inference_mode()`, project wrappers named after them,
/// `torch.set_grad_enabled(False)`: read from the syntax alone.
pub fn is_grad_off_syntax(expr: &Expr) -> bool {
    let (func, call) = match expr {
        Expr::Call(c) => (&*c.func, Some(c)),
        e => (e, None),
    };
    let Some(last) = last_segment(func) else {
        return false;
    };
    let l = last.to_ascii_lowercase();
    if l == "set_grad_enabled" {
        return call.is_some_and(
            |c| matches!(c.arguments.args.first(), Some(Expr::BooleanLiteral(b)) if !b.value),
        );
    }
    (l.contains("no_grad") || l.contains("inference_mode"))
        && !l.starts_with("is_")
        && !l.contains("enable")
}

/// `torch.cuda.device` / `cuda.device` (a device context).
fn is_cuda_device(func: &Expr) -> bool {
    matches!(func, Expr::Attribute(a) if a.attr.as_str() == "device" && last_segment(&a.value) == Some("cuda"))
}

/// The calls in a receiver chain: `f(...).to(d).eval()` → the three calls.
fn chained_calls(expr: &Expr) -> Vec<&ast::ExprCall> {
    let mut out = Vec::new();
    let mut e = expr;
    for _ in 0..crate::context::MAX_CHAIN_ATTRS {
        match e {
            Expr::Call(c) => {
                out.push(c);
                e = &c.func;
            }
            Expr::Attribute(a) => e = &a.value,
            _ => break,
        }
    }
    out
}

impl Scan {
    fn note_call(&mut self, c: &ast::ExprCall) {
        let callee = match &*c.func {
            Expr::Name(n) => Some(n.id.as_str()),
            Expr::Attribute(a) if matches!(&*a.value, Expr::Name(_)) => Some(a.attr.as_str()),
            _ => None,
        };
        if let Some(callee) = callee {
            let entry = self.facts.calls.entry(callee.to_string()).or_default();
            if self.facts.no_grad > 0 {
                entry.0 = entry.0.saturating_add(1);
            } else {
                entry.1 = entry.1.saturating_add(1);
            }
        }
        if let Expr::Name(n) = &*c.func {
            // `model(x)`: only models (and functions) are called
            self.facts.used_as_model.insert(n.id.to_string());
        }
        if let Expr::Attribute(a) = &*c.func
            && let Expr::Name(n) = &*a.value
            && matches!(
                a.attr.as_str(),
                "eval" | "train" | "parameters" | "named_parameters" | "forward"
            )
        {
            self.facts.used_as_model.insert(n.id.to_string());
        }
        if c.arguments
            .find_keyword("offload_to_cpu")
            .is_some_and(|k| !matches!(&k.value, Expr::BooleanLiteral(b) if !b.value))
        {
            self.facts.offloads_to_cpu = true;
        }
        if is_torch_fn(&c.func, "load")
            && c.arguments
                .args
                .first()
                .is_some_and(|a| mentions_rank_or(a, &self.facts.per_rank_names))
        {
            self.facts.per_rank_loads.insert(c.range());
        }
        if is_torch_fn(&c.func, "load")
            && let Some(Expr::Name(n)) = c.arguments.args.first()
            && self.facts.buffer_names.contains(n.id.as_str())
        {
            self.facts.buffer_loads.insert(c.range());
        }
        if is_torch_fn(&c.func, "save")
            && let Some(saved) = c.arguments.args.first()
        {
            self.facts.saves = self.facts.saves.saturating_add(1);
            if moved_to_cpu_or(saved, &self.facts.cpu_names) {
                self.facts.cpu_saves = self.facts.cpu_saves.saturating_add(1);
            }
            if let Expr::Name(n) = saved {
                // `torch.save(model, f)`: the whole model object is saved
                self.facts.used_as_model.insert(n.id.to_string());
            }
        }
        let Some(last) = last_segment(&c.func) else {
            return;
        };
        match last {
            "backward" | "manual_backward" => self.facts.trains = true,
            "AdamW" | "Adam" | "SGD" | "RMSprop" | "Adafactor" | "Lion" | "Adagrad" => {
                self.facts.trains = true;
            }
            "get_peft_model" | "LoraConfig" | "prepare_model_for_kbit_training" | "PeftModel" => {
                self.facts.peft = true;
            }
            "init_process_group" => {
                self.facts.distributed = true;
                self.facts.inits_process_group = true;
                let gloo =
                    |e: &Expr| matches!(e, Expr::StringLiteral(s) if s.value.to_str() == "gloo");
                if c.arguments.args.first().is_some_and(gloo)
                    || c.arguments
                        .find_keyword("backend")
                        .is_some_and(|k| gloo(&k.value))
                {
                    self.facts.gloo = true;
                }
            }
            "load_state_dict" => {
                if let (Expr::Attribute(a), Some(Expr::Call(inner))) =
                    (&*c.func, c.arguments.args.first())
                {
                    self.facts
                        .loaded_into
                        .insert(inner.range(), text_of(&a.value));
                }
            }
            // `torch.cuda.set_device`, `torch.accelerator.set_device_index`, and project
            // helpers named after them (transformers' tests: `_set_rank_device(rank)`)
            l if {
                let l = l.to_ascii_lowercase();
                // not `set_default_device("cuda")`: that is GPU 0 for every rank
                l.contains("set")
                    && l.contains("device")
                    && !l.contains("reset")
                    && !l.contains("default")
            } =>
            {
                self.facts.sets_device = true;
            }
            "device" if is_cuda_device(&c.func) => self.facts.sets_device = true,
            "register_forward_hook" => {
                let hook = match c.arguments.args.first() {
                    Some(Expr::Call(inner)) => match last_segment(&inner.func) {
                        Some("partial") => inner.arguments.args.first().and_then(last_segment),
                        l => l,
                    },
                    Some(e) => last_segment(e),
                    None => None,
                };
                if let Some(h) = hook {
                    self.facts.forward_hooks.insert(h.to_string());
                }
            }
            "DistributedDataParallel"
            | "Accelerator"
            | "FullyShardedDataParallel"
            | "FSDP"
            | "DDP" => self.facts.distributed = true,
            "requires_grad_" | "eval" => {
                let freezes = last == "eval"
                    || matches!(c.arguments.args.first(), Some(Expr::BooleanLiteral(b)) if !b.value);
                if let Expr::Attribute(a) = &*c.func
                    && freezes
                {
                    if matches!(&*a.value, Expr::Call(_)) {
                        // `X.from_pretrained(...).eval()`: that load is frozen
                        for call in chained_calls(&a.value) {
                            self.facts.frozen_calls.insert(call.range());
                        }
                    } else if last == "requires_grad_" {
                        // `m.eval()` alone is not evidence: training scripts evaluate too
                        self.freeze(&a.value);
                    }
                }
            }
            // a trainer, its arguments (`TrainingArguments`, TRL's `SFTConfig`…) or
            // DeepSpeed's engine: this file sets up training
            "TrainingArguments" | "Seq2SeqTrainingArguments" | "initialize" => {
                self.facts.trains = true;
            }
            l if (l.ends_with("Trainer")
                || (l.ends_with("Config") && TRAINER_CONFIGS.iter().any(|p| l.starts_with(p))))
                && l.starts_with(|ch: char| ch.is_ascii_uppercase()) =>
            {
                self.facts.trains = true;
            }
            _ => {}
        }
    }

    /// `m` or `m.parameters()` frozen: `m` goes into `frozen`.
    fn freeze(&mut self, e: &Expr) {
        let target = match e {
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) if a.attr.as_str() == "parameters" => &*a.value,
                _ => e,
            },
            e => e,
        };
        let t = text_of(target);
        if !t.is_empty() {
            self.facts.frozen.insert(t);
        }
    }
}

impl<'a> Visitor<'a> for Scan {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        self.depth = self.depth.saturating_add(1);
        if self.depth <= crate::context::MAX_WALK_DEPTH {
            match stmt {
                Stmt::Assign(a) => {
                    let targets: Vec<String> = a
                        .targets
                        .iter()
                        .map(text_of)
                        .filter(|t| !t.is_empty())
                        .collect();
                    if a.value.is_none_literal_expr() {
                        let at = stmt.range();
                        self.facts
                            .released
                            .extend(targets.iter().map(|t| (t.clone(), at)));
                    }
                    // `p.requires_grad = False` in `for p in m.parameters():` is handled
                    // in the For arm; here only the binding.
                    for c in chained_calls(&a.value) {
                        self.facts.bound_to.insert(c.range(), targets.clone());
                    }
                    if let Expr::Call(c) = &*a.value
                        && last_segment(&c.func) == Some("BytesIO")
                    {
                        self.facts.buffer_names.extend(targets.iter().cloned());
                    }
                    if let Some(class) = crate::rules::graph_kept_by_meter::meter_class(&a.value) {
                        for t in &targets {
                            self.facts.meters.insert(t.clone(), class.to_string());
                        }
                    }
                    let per_rank = mentions_rank_or(&a.value, &self.facts.per_rank_names);
                    let cpu = moved_to_cpu_or(&a.value, &self.facts.cpu_names);
                    for t in &targets {
                        if per_rank {
                            self.facts.per_rank_names.insert(t.clone());
                        }
                        if cpu {
                            self.facts.cpu_names.insert(t.clone());
                        }
                    }
                    if a.targets.iter().any(|t| {
                        matches!(t, Expr::Attribute(at) if at.attr.as_str() == "offload_to_cpu")
                    }) && !matches!(&*a.value, Expr::BooleanLiteral(b) if !b.value)
                    {
                        self.facts.offloads_to_cpu = true;
                    }
                }
                Stmt::Delete(d) => {
                    let at = stmt.range();
                    self.facts
                        .released
                        .extend(d.targets.iter().map(|t| (text_of(t), at)));
                }
                Stmt::FunctionDef(f) => self.facts.functions.push(f.range()),
                Stmt::ClassDef(c) if c.body.iter().any(|s| matches!(s, Stmt::FunctionDef(f) if f.name.as_str() == "update" && update_converts(f))) => {
                    self.facts.converting_meters.insert(c.name.to_string());
                }
                Stmt::For(f) => {
                    let freezes = f.body.iter().any(|s| {
                        matches!(s, Stmt::Assign(a)
                            if matches!(&a.value, e if matches!(&**e, Expr::BooleanLiteral(b) if !b.value))
                            && a.targets.iter().any(|t| matches!(t, Expr::Attribute(at) if at.attr.as_str() == "requires_grad")))
                    });
                    if freezes {
                        self.freeze(&f.iter);
                    }
                }
                Stmt::If(i) if distributed_test(&i.test).is_some() => {
                    let multi = distributed_test(&i.test) == Some(true);
                    let single: Option<&[Stmt]> = if multi {
                        i.elif_else_clauses
                            .iter()
                            .find(|c| c.test.is_none())
                            .map(|c| c.body.as_slice())
                    } else {
                        Some(i.body.as_slice())
                    };
                    if let Some(body) = single
                        && let (Some(first), Some(last)) = (body.first(), body.last())
                    {
                        self.facts
                            .single_process
                            .push(TextRange::new(first.start(), last.end()));
                    }
                }
                Stmt::If(i) if is_rank_test(&i.test) => {
                    if let (Some(first), Some(last)) = (i.body.first(), i.body.last()) {
                        self.facts
                            .rank_guarded
                            .push(TextRange::new(first.start(), last.end()));
                    }
                }
                _ => {}
            }
            let grad_off = match stmt {
                Stmt::With(w) => w.items.iter().any(|i| is_grad_off_syntax(&i.context_expr)),
                Stmt::FunctionDef(f) => f.decorator_list.iter().any(|d| {
                    is_grad_off_syntax(&d.expression)
                        || last_segment(match &d.expression {
                            Expr::Call(c) => &c.func,
                            e => e,
                        })
                        .is_some_and(|n| self.facts.grad_off_functions.contains(n))
                }),
                _ => false,
            };
            // every enclosing function's body turns gradients off (a grad-off `with`, or
            // an inner function decorated so)
            let syntax_off = match stmt {
                Stmt::With(w) => w.items.iter().any(|i| is_grad_off_syntax(&i.context_expr)),
                Stmt::FunctionDef(f) => f
                    .decorator_list
                    .iter()
                    .any(|d| is_grad_off_syntax(&d.expression)),
                _ => false,
            };
            if syntax_off {
                for frame in &mut self.functions {
                    frame.1 = true;
                }
            }
            if let Stmt::FunctionDef(f) = stmt {
                self.functions.push((f.name.to_string(), false));
            }
            let add = u32::from(grad_off);
            self.facts.no_grad = self.facts.no_grad.saturating_add(add);
            visitor::walk_stmt(self, stmt);
            self.facts.no_grad = self.facts.no_grad.saturating_sub(add);
            if matches!(stmt, Stmt::FunctionDef(_))
                && let Some((name, true)) = self.functions.pop()
            {
                self.facts.grad_off_functions.insert(name);
            }
        }
        self.depth = self.depth.saturating_sub(1);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        self.depth = self.depth.saturating_add(1);
        if self.depth <= crate::context::MAX_WALK_DEPTH {
            match expr {
                Expr::Name(n) => {
                    self.facts.mentions.insert(n.id.to_string());
                }
                Expr::Attribute(a) => {
                    self.facts.mentions.insert(a.attr.to_string());
                }
                Expr::StringLiteral(s) => {
                    let v = s.value.to_str();
                    if !v.is_empty()
                        && v.len() <= 64
                        && v.chars().all(|c| c.is_alphanumeric() || c == '_')
                    {
                        self.facts.mentions.insert(v.to_string());
                    }
                }
                _ => {}
            }
            match expr {
                Expr::Call(c) => self.note_call(c),
                Expr::Name(n) if n.id.as_str() == "local_rank" => self.facts.distributed = true,
                Expr::Attribute(a) if a.attr.as_str() == "local_rank" => {
                    self.facts.distributed = true;
                }
                Expr::Name(_) | Expr::Attribute(_)
                    if last_segment(expr).is_some_and(|l| SHARDING_NAMES.contains(&l)) =>
                {
                    self.facts.sharded = true;
                    self.facts.distributed = true;
                }
                Expr::StringLiteral(s) if s.value.to_str() == "CUDA_VISIBLE_DEVICES" => {
                    self.facts.sets_device = true;
                }
                _ => {}
            }
            visitor::walk_expr(self, expr);
        }
        self.depth = self.depth.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(src: &str) -> FileFacts {
        let lines = crate::parse::Lines::new(src);
        let module = crate::parse::parse_module(src, &lines).expect("parses");
        let mut imports = HashMap::default();
        crate::context::collect_imports(&module.body, &mut imports);
        FileFacts::of(&module, &imports)
    }

    #[test]
    fn grad_off_decorators_callers_cpu_saves_and_per_rank_loads() {
        let f = facts(
            "import torch\ndef deco(fn):\n    def inner(*a):\n        with torch.no_grad():\n            return fn(*a)\n    return inner\ndef plain(fn):\n    return fn\ndef ev(m, xs):\n    return [m(x) for x in xs]\nwith torch.no_grad():\n    ev(m, xs)\n@torch.inference_mode()\ndef run():\n    ev(m, ys)\n    both(m)\nboth(m)\nstate = {k: v.cpu() for k, v in sd.items()}\ntorch.save(state, 'a.pt')\nname = f'shard_rank{rank}.pt'\ns = torch.load(name)\n",
        );
        assert!(f.grad_off_functions.contains("deco") && f.grad_off_functions.contains("inner"));
        assert!(!f.grad_off_functions.contains("plain"));
        assert!(f.called_only_without_grad("ev"));
        assert!(!f.called_only_without_grad("both") && !f.called_only_without_grad("missing"));
        assert!(f.saves_cpu_state());
        assert_eq!(f.per_rank_loads.len(), 1);
        let f = facts("import torch\ntorch.save(model.state_dict(), 'a.pt')\nx = torch.load(p)\n");
        assert!(!f.saves_cpu_state() && f.per_rank_loads.is_empty());
    }

    #[test]
    fn other_frameworks_are_told_apart_from_pytorch() {
        let imports = |src: &str| {
            let lines = crate::parse::Lines::new(src);
            let module = crate::parse::parse_module(src, &lines).expect("parses");
            let mut imports = HashMap::default();
            crate::context::collect_imports(&module.body, &mut imports);
            imports
        };
        for (src, other_only) in [
            ("import jax\nimport flax.linen as nn\n", true),
            (
                "import tensorflow as tf\nfrom transformers import TFAutoModel\n",
                true,
            ),
            (
                "from transformers import FlaxAutoModel\nimport optax\n",
                true,
            ),
            ("import torch\nimport jax\n", false),
            ("from transformers import AutoModel\n", false),
            ("x = 1\n", false),
        ] {
            assert_eq!(is_other_framework_only(&imports(src)), other_only, "{src}");
        }
        // real files (tests/fixtures/frameworks/SOURCES.md)
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/frameworks");
        for file in [
            "flax_mnist_train.py",
            "keras_tf_custom_loop.py",
            "mxnet_gluon_evaluate.py",
        ] {
            let src = std::fs::read_to_string(dir.join(file)).expect("fixture");
            assert!(is_other_framework_only(&imports(&src)), "{file}");
            let torch = format!("import torch\n{src}");
            assert!(!is_other_framework_only(&imports(&torch)), "{file}");
        }
    }

    #[test]
    fn gathers_training_peft_frozen_models_bindings_and_rank_guards() {
        let f = facts(
            "import torch\nref = M.from_pretrained('x').eval()\nteacher = load()\nteacher.requires_grad_(False)\nfor p in base.parameters():\n    p.requires_grad = False\nckpt = torch.load('c').to(d)\nif rank == 0:\n    torch.save(x, 'y')\ndel ckpt\nloss.backward()\n",
        );
        assert!(f.trains && !f.peft && !f.distributed);
        assert!(f.frozen.contains("teacher") && f.frozen.contains("base"));
        assert_eq!(f.frozen_calls.len(), 1);
        assert!(f.bound_to.values().any(|t| t == &vec!["ckpt".to_string()]));
        assert!(f.released.iter().any(|(n, _)| n == "ckpt"));
        assert_eq!(f.rank_guarded.len(), 1);
        let f = facts("from peft import LoraConfig\nimport torch.distributed as dist\n");
        assert!(f.peft && f.distributed && !f.trains);
    }
}
