//! The single walk: the [`Visitor`] over statements and expressions that keeps the
//! context up to date (functions, classes, loops, `no_grad` regions, assignments) and
//! calls the rules at each statement, call, attribute and loop exit.

use foldhash::{HashSet, HashSetExt};
use std::rc::Rc;

use super::bindings::submodules;
use super::kind::{Returns, combine};
use super::query::root_name;
use super::scope::is_data_loop;
use super::{
    BodyFacts, Checker, Facts, Kind, LoopFrame, Scope, collect_targets, last_segment, text_of,
};
use crate::file_facts;
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr, Stmt};
use crate::parse::visitor::{self, Visitor};
use crate::rules;

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
                self.class_names.push(c.name.to_string());
                // a class body is its own namespace; its methods get their own scopes
                self.visit_body(&c.body);
                self.classes.pop();
                self.class_names.pop();
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
                // contexts entered on an `ExitStack` end with its `with`
                let exit_stack = w.items.iter().any(|i| {
                    matches!(&i.context_expr, Expr::Call(c) if last_segment(&c.func) == Some("ExitStack"))
                });
                let s = self.scope_mut();
                let before = s.no_grad;
                s.no_grad = s.no_grad.saturating_add(grad_off);
                self.visit_body(&w.body);
                let s = self.scope_mut();
                s.no_grad = if exit_stack {
                    before
                } else {
                    s.no_grad.saturating_sub(grad_off)
                };
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
                let elements = if a.targets.iter().any(|t| matches!(t, Expr::Tuple(_))) {
                    self.element_kinds(&a.value)
                } else {
                    None
                };
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
                        // `loss, logs = x, y`, or the tuple a function of the file returns
                        (_, Expr::Tuple(tt))
                            if elements.as_ref().is_some_and(|e| e.len() == tt.elts.len()) =>
                        {
                            for (e, k) in tt.elts.iter().zip(elements.iter().flatten()) {
                                self.bind(e, *k);
                            }
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
                let outer = self.discarded.replace(e.value.range());
                self.visit_expr(&e.value);
                self.discarded = outer;
                // `stack.enter_context(torch.no_grad())` (an `ExitStack`): grad is off from
                // here on, until the stack's `with` ends
                if let Expr::Call(c) = &*e.value
                    && let Expr::Attribute(a) = &*c.func
                    && a.attr.as_str() == "enter_context"
                    && c.arguments
                        .args
                        .first()
                        .is_some_and(|x| self.is_grad_off(x))
                {
                    let s = self.scope_mut();
                    s.no_grad = s.no_grad.saturating_add(1);
                }
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
            Stmt::Return(r) => {
                visitor::walk_stmt(self, stmt);
                if self.scope().summary_key.is_some() {
                    let returned = r.value.as_deref().map_or(
                        Returns {
                            whole: Kind::Unknown,
                            elements: None,
                        },
                        |v| self.returns_of(v),
                    );
                    let s = self.scope_mut();
                    s.returns = Some(match s.returns.take() {
                        Some(before) => before.either(returned),
                        None => returned,
                    });
                }
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    /// What `return value` gives, element by element for a tuple literal.
    fn returns_of(&self, value: &Expr) -> Returns {
        let elements = match value {
            Expr::Tuple(t) if !t.elts.iter().any(Expr::is_starred_expr) => {
                Some(t.elts.iter().map(|e| self.kind(e)).collect())
            }
            _ => None,
        };
        Returns {
            whole: self.kind(value),
            elements,
        }
    }

    fn visit_expr_inner(&mut self, expr: &'a Expr) {
        if let Expr::Call(c) = expr {
            rules::on_call(self, c);
        }
        if matches!(expr, Expr::Yield(_) | Expr::YieldFrom(_)) {
            self.scope_mut().yields = true;
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
            let retained = retained_names(&scope.facts);
            for p in f.parameters.iter_non_variadic_params().skip(1) {
                let name = p.parameter.name.to_string();
                // `x.retain_grad()` (or on the attribute `x` is stored in) only works on
                // a tensor inside a graph: that input carries one
                let kind = if retained.contains(&name) {
                    Kind::Tensor { graph: true }
                } else {
                    Kind::Param
                };
                scope.env.insert(name, kind);
            }
        }
        // a summary for module-level functions and the methods of module-level classes
        if self.outer.is_empty() {
            scope.summary_key = Some(match self.class_names.as_slice() {
                [] => f.name.to_string(),
                [class] => format!("{class}.{}", f.name.as_str()),
                _ => String::new(),
            })
            .filter(|k| !k.is_empty());
        }
        let outer = std::mem::replace(&mut self.current, scope);
        self.outer.push(outer);
        self.visit_body(&f.body);
        let key = self.scope_mut().summary_key.take();
        let returns = self.scope_mut().returns.take();
        let backprops = !self.scope().backpropagated.is_empty();
        let generator = self.scope().yields;
        if let Some(outer) = self.outer.pop() {
            self.current = outer;
        }
        // a generator's calls return a generator, not what it yields
        if let (Some(key), Some(returns)) = (key, returns)
            && !generator
        {
            if backprops {
                self.backprop_functions.insert(key.clone());
            }
            if let Some(class) = self.class_names.last() {
                self.method_summaries
                    .entry(class.clone())
                    .or_default()
                    .insert(f.name.to_string(), returns.clone());
            }
            self.summaries.insert(key, returns);
        }
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

/// The names `.retain_grad()` is called on in a body, directly or through the attribute
/// or name they were assigned to (`self.input = x` … `self.input.retain_grad()`).
fn retained_names(facts: &Facts<'_>) -> HashSet<String> {
    let mut out = HashSet::new();
    for site in facts.calls() {
        if let Expr::Attribute(a) = &*site.call.func
            && a.attr.as_str() == "retain_grad"
        {
            let receiver = text_of(&a.value);
            if receiver.is_empty() {
                continue;
            }
            for (targets, value, aug) in facts.assigns() {
                if !aug
                    && let Expr::Name(n) = value
                    && targets.contains(&receiver)
                {
                    out.insert(n.id.to_string());
                }
            }
            out.insert(receiver);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::{Settings, lint_source};

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
