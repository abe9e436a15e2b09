//! The [`Checker`]: its state, its entry point ([`Checker::check`]) and the accessors
//! the rules read (scope, source text, qualified names).

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use super::bindings::module_classes;
use super::kind::Returns;
use super::query::{chain, join_chain};
use super::{LoopFrame, Scope, collect_imports};
use crate::diagnostic::Finding;
use crate::file_facts::{self, FileFacts};
use crate::parse::ast::Expr;
use crate::parse::visitor::Visitor;
use crate::parse::{Module, Ranged, TextRange};
use crate::project::Project;
use crate::rules::{Rule, RuleSet};

/// The checker: walks the module once, keeps the context, runs the rules.
pub struct Checker<'a> {
    /// The file's text.
    pub source: &'a str,
    /// Local name → qualified name, from every import in the file.
    pub imports: HashMap<String, String>,
    /// The innermost open scope (the module's when outside every function).
    pub(super) current: Scope<'a>,
    /// The scopes around it, the module's first.
    pub(super) outer: Vec<Scope<'a>>,
    /// Enclosing classes: whether each has base classes, and the `self.x = Class(...)`
    /// attributes its `__init__` creates (submodules).
    pub(super) classes: Vec<(bool, HashSet<String>)>,
    /// The names of the enclosing classes (same order as `classes`).
    pub(super) class_names: Vec<String>,
    /// What each function of the file returns (`train_step`, `Trainer.train_step`),
    /// recorded as the walk leaves it: calls after its definition read it.
    pub summaries: HashMap<String, Returns>,
    /// The same summaries for methods, by class then method (looked up without
    /// building a key).
    pub(super) method_summaries: HashMap<String, HashMap<String, Returns>>,
    /// The summarised functions that backpropagate in their body (a training step):
    /// only their graphs are told to the other files of the tree.
    pub(super) backprop_functions: HashSet<String>,
    /// What the functions of the other files of the tree return, when known (the
    /// tree's second pass).
    pub(super) tree: Option<&'a crate::tree::Returns>,
    /// Classes defined in this file whose bases name a module (`nn.Module`,
    /// `LightningModule`, `PreTrainedModel`): calling one builds a model.
    pub(super) module_classes: HashSet<String>,
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
    pub(super) value_without_grad: bool,
    /// The value of the expression statement being visited (`model(example)` on a line
    /// of its own): its result is dropped at once, and with it any graph.
    pub(crate) discarded: Option<crate::parse::TextRange>,
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
        tree: Option<&'a crate::tree::Returns>,
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
            class_names: Vec::new(),
            summaries: HashMap::new(),
            method_summaries: HashMap::new(),
            backprop_functions: HashSet::new(),
            tree,
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
            discarded: None,
        };
        ch.visit_body(&module.body);
        if ch.too_deep {
            return Err(());
        }
        // what the other files need to know: only a file that saves can say it (the
        // text test spares the facts' walk to most files)
        let mut summary = if ch.file.get().is_some()
            || source.contains("torch.save")
            || source.contains("offload_to_cpu")
        {
            ch.file().summary()
        } else {
            crate::tree::Summary::default()
        };
        summary.returns = ch.exported_returns();
        Ok((ch.violations, summary))
    }

    /// What the file's functions return, by name, for the other files of the tree.
    fn exported_returns(&self) -> Vec<(String, crate::tree::Returned)> {
        use crate::tree::Returned;
        // only the functions that backpropagate: training steps, whose results are
        // what other files sum or keep (every other function stays in its file)
        let mut out: Vec<(String, Returned)> = self
            .summaries
            .iter()
            .filter(|(key, _)| self.backprop_functions.contains(key.as_str()))
            .filter_map(|(key, r)| {
                let name = key.rsplit('.').next().unwrap_or(key);
                crate::tree::resolvable(name).then(|| {
                    let returned = match r.whole {
                        super::Kind::Tensor { graph: true } => Returned::Graph,
                        super::Kind::Container { all } => Returned::HoldsGraph { all },
                        _ => Returned::Other,
                    };
                    (name.to_string(), returned)
                })
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Enters a node: `false` (and the walk stops descending) past [`MAX_WALK_DEPTH`].
    pub(super) fn enter(&mut self) -> bool {
        self.depth = self.depth.saturating_add(1);
        if self.depth > MAX_WALK_DEPTH {
            self.too_deep = true;
        }
        !self.too_deep
    }

    pub(super) fn leave(&mut self) {
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
}

#[cfg(test)]
mod tests {
    use crate::Settings;

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
            let result =
                super::Checker::check(&module, &deep, &all_rules(), None).map(|v| v.0.len());
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
            super::Checker::check(&module, shallow, &all_rules(), None).map(|v| v.0.len()),
            Ok(0)
        );
    }
}
