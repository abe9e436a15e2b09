//! Facts about a whole file that a rule needs as *evidence* before it reports (issue
//! 19): which framework the file is written for, whether it trains at all, whether it
//! uses PEFT, runs distributed, which models it freezes, what each call's result is
//! bound to, and which blocks only rank 0 runs.
//!
//! Most files never need them: they are gathered in one walk of the module, on the
//! first question (a `from_pretrained` or `torch.load` call), and kept for the rest of
//! the file. The framework check reads the import table only, and runs on every file.

use std::collections::{HashMap, HashSet};

use crate::context::{last_segment, text_of};
use crate::parse::ast::{self, Expr, Stmt};
use crate::parse::visitor::{self, Visitor};
use crate::parse::{Module, Ranged, TextRange};

/// TRL's trainer configurations (`SFTConfig`, `DPOConfig`, `GRPOConfig`…).
const TRAINER_CONFIGS: &[&str] = &[
    "SFT", "DPO", "GRPO", "RLOO", "KTO", "ORPO", "PPO", "Reward", "CPO", "GKD", "Online",
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
}

impl FileFacts {
    /// Gathers the facts of `module` (imports already resolved by the checker).
    pub fn of(module: &Module, imports: &HashMap<String, String>) -> Self {
        let mut scan = Scan {
            facts: FileFacts::default(),
            depth: 0,
        };
        let tops: HashSet<&str> = imports
            .values()
            .map(|q| q.split('.').next().unwrap_or(""))
            .collect();
        scan.facts.peft = tops.contains("peft");
        scan.facts.distributed = tops.contains("deepspeed")
            || tops.contains("accelerate")
            || imports.values().any(|q| q.starts_with("torch.distributed"));
        scan.visit_body(&module.body);
        scan.facts
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

    /// Whether `range` lies in a block only rank 0 runs.
    pub fn rank_guarded(&self, range: TextRange) -> bool {
        self.rank_guarded.iter().any(|g| g.contains_range(range))
    }
}

struct Scan {
    facts: FileFacts,
    depth: usize,
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
            "set_device" => self.facts.sets_device = true,
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
                }
                Stmt::Delete(d) => {
                    let at = stmt.range();
                    self.facts
                        .released
                        .extend(d.targets.iter().map(|t| (text_of(t), at)));
                }
                Stmt::FunctionDef(f) => self.facts.functions.push(f.range()),
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
                Stmt::If(i) if is_rank_test(&i.test) => {
                    if let (Some(first), Some(last)) = (i.body.first(), i.body.last()) {
                        self.facts
                            .rank_guarded
                            .push(TextRange::new(first.start(), last.end()));
                    }
                }
                _ => {}
            }
            visitor::walk_stmt(self, stmt);
        }
        self.depth = self.depth.saturating_sub(1);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        self.depth = self.depth.saturating_add(1);
        if self.depth <= crate::context::MAX_WALK_DEPTH {
            match expr {
                Expr::Call(c) => self.note_call(c),
                Expr::StringLiteral(s) if s.value.to_str() == "CUDA_VISIBLE_DEVICES" => {
                    self.facts.sets_device = true;
                }
                Expr::Name(n) if n.id.as_str() == "local_rank" => self.facts.distributed = true,
                Expr::Attribute(a) if a.attr.as_str() == "local_rank" => {
                    self.facts.distributed = true;
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
        let mut imports = HashMap::new();
        crate::context::collect_imports(&module.body, &mut imports);
        FileFacts::of(&module, &imports)
    }

    #[test]
    fn other_frameworks_are_told_apart_from_pytorch() {
        let imports = |src: &str| {
            let lines = crate::parse::Lines::new(src);
            let module = crate::parse::parse_module(src, &lines).expect("parses");
            let mut imports = HashMap::new();
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
