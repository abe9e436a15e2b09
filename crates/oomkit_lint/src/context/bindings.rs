//! What names are bound to: [`Checker::bind`] on each assignment, the results of
//! `accelerator.prepare(…)`, the file's imports, and the classes that are modules.

use foldhash::{HashMap, HashSet, HashSetExt};

use super::{BodyFacts, Checker, Kind, last_segment, text_of};
use crate::parse::ast::{self, Expr, Stmt};

impl<'a> Checker<'a> {
    pub(super) fn bind(&mut self, target: &Expr, kind: Kind) {
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
                let k = match kind {
                    Kind::Tensor { .. } => kind,
                    k => k.element(),
                };
                for e in &t.elts {
                    self.bind(e, k);
                }
            }
            Expr::List(t) => {
                let k = match kind {
                    Kind::Container { .. } => kind.element(),
                    _ => Kind::Unknown,
                };
                for e in &t.elts {
                    self.bind(e, k);
                }
            }
            Expr::Starred(s) => self.bind(&s.value, Kind::Unknown),
            _ => {}
        }
    }

    /// `accelerator.prepare(model, opt, …)` / `fabric.setup(model, opt)`: each result is
    /// what the argument in its position was (a model stays a model).
    pub(super) fn prepared_kinds(&self, value: &Expr) -> Option<Vec<Kind>> {
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
}

/// Names of the classes of a module body whose bases name a module or model
/// (`nn.Module`, `pl.LightningModule`, `PreTrainedModel`, `Net`).
pub(super) fn module_classes(body: &[Stmt]) -> HashSet<String> {
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

/// `self.x = SomeClass(...)` / `self.x = nn.Linear(...)` in a class's `__init__`.
pub(super) fn submodules(body: &[Stmt]) -> HashSet<String> {
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

#[cfg(test)]
mod tests {
    use crate::{Settings, lint_source};

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
}
