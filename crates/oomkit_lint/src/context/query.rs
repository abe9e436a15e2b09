//! Small queries on syntax that every part of the checker and the rules share: name
//! and attribute chains (`text_of`, `last_segment`, `mentions`), guards (`is_modulo`),
//! scaling (`is_scaled`), and the shapes of training calls (`backward_loss`,
//! `zero_grad_receiver`), model classes (`is_model_class`). Pure functions of the AST:
//! no state.

use foldhash::HashSet;

use crate::parse::ast::{self, Expr, Stmt};
use crate::parse::visitor::{self, Visitor};

/// `a % b` where `a` is not a string (so not `%`-formatting), anywhere in `test`.
pub fn is_modulo(test: &Expr) -> bool {
    match test {
        Expr::BinOp(b) if matches!(b.op, ast::Operator::Mod) => {
            !matches!(*b.left, Expr::StringLiteral(_) | Expr::FString(_))
        }
        Expr::BinOp(b) => is_modulo(&b.left) || is_modulo(&b.right),
        Expr::Compare(c) => is_modulo(&c.left) || c.comparators.iter().any(is_modulo),
        Expr::BoolOp(b) => b.values.iter().any(is_modulo),
        Expr::UnaryOp(u) => is_modulo(&u.operand),
        _ => false,
    }
}

/// Name/attribute chains with more attributes than this (`a.b.c…`) are not tracked:
/// no variable or library API is that deep, and the cap keeps every query on a chain
/// O(1), so a 40,000-long `a.b.b…` is checked in linear time (each of its nodes asks).
pub const MAX_CHAIN_ATTRS: usize = 32;

/// A name/attribute chain split into its base name and attributes (innermost first);
/// `None` for any other expression or a chain longer than [`MAX_CHAIN_ATTRS`].
/// Iterative and O([`MAX_CHAIN_ATTRS`]).
pub(super) fn chain(expr: &Expr) -> Option<(&str, Vec<&str>)> {
    let mut attrs = Vec::new();
    let mut e = expr;
    loop {
        match e {
            Expr::Name(n) => {
                attrs.reverse();
                return Some((n.id.as_str(), attrs));
            }
            Expr::Attribute(a) if attrs.len() < MAX_CHAIN_ATTRS => {
                attrs.push(a.attr.as_str());
                e = &a.value;
            }
            _ => return None,
        }
    }
}

pub(super) fn join_chain(base: &str, attrs: &[&str]) -> String {
    let len = attrs.iter().fold(base.len(), |n, a| {
        n.saturating_add(a.len()).saturating_add(1)
    });
    let mut out = String::with_capacity(len);
    out.push_str(base);
    for a in attrs {
        out.push('.');
        out.push_str(a);
    }
    out
}

/// Dotted text of a name/attribute chain (`self.model`, `outputs.loss`); `""` otherwise
/// (and for chains longer than [`MAX_CHAIN_ATTRS`]).
pub fn text_of(expr: &Expr) -> String {
    let mut out = String::new();
    write_chain(expr, 0, &mut out);
    out
}

/// Appends the dotted text of `expr` (with `attrs` attributes after it) to `out`;
/// `false`, having written nothing, when it is no name/attribute chain or has more
/// than [`MAX_CHAIN_ATTRS`] attributes in all ([`text_of`] without [`chain`]'s vector).
fn write_chain(expr: &Expr, attrs: usize, out: &mut String) -> bool {
    match expr {
        Expr::Name(n) => {
            out.push_str(n.id.as_str());
            true
        }
        Expr::Attribute(a) if attrs < MAX_CHAIN_ATTRS => {
            if !write_chain(&a.value, attrs.saturating_add(1), out) {
                return false;
            }
            out.push('.');
            out.push_str(a.attr.as_str());
            true
        }
        _ => false,
    }
}

/// The last segment of a name/attribute chain (`model` for `self.model`).
pub fn last_segment(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::Attribute(a) => Some(a.attr.as_str()),
        _ => None,
    }
}

/// Whether `name` (a simple name or dotted text) occurs in `expr`.
pub fn mentions(expr: &Expr, name: &str) -> bool {
    find_chain(expr, &mut |text| text == name)
}

/// Whether `hit` holds for the text of a name/attribute chain in `expr` (each node
/// asks once, O([`MAX_CHAIN_ATTRS`]) each).
fn find_chain(expr: &Expr, hit: &mut dyn FnMut(&str) -> bool) -> bool {
    any_expr(expr, &mut |e| {
        matches!(e, Expr::Name(_) | Expr::Attribute(_))
            && chain(e).is_some_and(|(base, attrs)| hit(&join_chain(base, &attrs)))
    })
}

/// The visitor behind [`any_expr`] and [`any_stmt_expr`]: stops at the first
/// expression `hit` accepts and does not enter it.
struct Finder<'h> {
    hit: &'h mut dyn FnMut(&Expr) -> bool,
    found: bool,
}

impl<'a> Visitor<'a> for Finder<'_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.found {
            return;
        }
        if (self.hit)(expr) {
            self.found = true;
            return;
        }
        visitor::walk_expr(self, expr);
    }
}

/// Whether `hit` holds for `expr` or any expression inside it (outermost first;
/// the walk stops at the first hit and does not enter an expression that hit).
pub fn any_expr(expr: &Expr, hit: &mut dyn FnMut(&Expr) -> bool) -> bool {
    let mut f = Finder { hit, found: false };
    f.visit_expr(expr);
    f.found
}

/// Whether any expression in `stmt` (at any depth, nested statements included)
/// satisfies `hit`.
pub fn any_stmt_expr(stmt: &Stmt, hit: &mut dyn FnMut(&Expr) -> bool) -> bool {
    let mut f = Finder { hit, found: false };
    f.visit_stmt(stmt);
    f.found
}

/// Whether `expr` contains a division or multiplication (a scaled loss).
pub fn is_scaled(expr: &Expr) -> bool {
    match expr {
        Expr::BinOp(b) => {
            matches!(
                b.op,
                ast::Operator::Div | ast::Operator::Mult | ast::Operator::FloorDiv
            ) || is_scaled(&b.left)
                || is_scaled(&b.right)
        }
        Expr::Call(c) => {
            is_scaled(&c.func)
                || c.arguments.args.iter().any(is_scaled)
                || matches!(&*c.func, Expr::Attribute(a) if matches!(a.attr.as_str(), "div" | "div_" | "mul" | "mul_"))
        }
        Expr::Attribute(a) => is_scaled(&a.value),
        Expr::Subscript(s) => is_scaled(&s.value),
        Expr::UnaryOp(u) => is_scaled(&u.operand),
        _ => false,
    }
}

/// The texts of every name/attribute chain in `expr` ([`mentions`] is true for exactly
/// these), O(size × [`MAX_CHAIN_ATTRS`]).
pub(super) fn chain_texts(expr: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    find_chain(expr, &mut |text| {
        out.push(text.to_string());
        false
    });
    out
}

/// Whether a qualified or plain name is a transformers model class
/// (`AutoModelForCausalLM`, `LlamaForCausalLM`), not a tokenizer/processor/config nor
/// a TensorFlow/Flax class.
pub fn is_model_class(q: &str) -> bool {
    let class = q
        .trim_end_matches(".from_pretrained")
        .rsplit('.')
        .next()
        .unwrap_or("");
    // transformers' TensorFlow (`TFAutoModel…`) and Flax (`FlaxAutoModel…`) classes are
    // not PyTorch models, even in a file that also imports torch
    (class.starts_with("AutoModel") || class.ends_with("ForCausalLM"))
        && !class.starts_with("TF")
        && !class.starts_with("Flax")
        && !class.contains("Tokenizer")
        && !class.contains("Processor")
        && !class.contains("Config")
}

/// The receiver of a `zero_grad()` call (`optimizer`, `model`), as text.
pub fn zero_grad_receiver(call: &ast::ExprCall) -> Option<String> {
    match &*call.func {
        Expr::Attribute(a) if a.attr.as_str().contains("zero_grad") => Some(text_of(&a.value)),
        Expr::Name(n) if n.id.as_str().contains("zero_grad") => Some(String::new()),
        _ => None,
    }
}

/// The loss a backward call propagates: `loss.backward()`, `scaler.scale(loss).backward()`,
/// `accelerator.backward(loss)`.
pub fn backward_loss(call: &ast::ExprCall) -> Option<&Expr> {
    let Expr::Attribute(a) = &*call.func else {
        return None;
    };
    if !matches!(a.attr.as_str(), "backward" | "manual_backward") {
        return None;
    }
    let recv = &*a.value;
    let recv_name = last_segment(recv).unwrap_or("").to_ascii_lowercase();
    if let Some(first) = call.arguments.args.first()
        && (a.attr.as_str() == "manual_backward"
            || matches!(
                recv_name.as_str(),
                "accelerator" | "fabric" | "self" | "engine" | "model_engine" | "autograd"
            ))
    {
        return Some(first);
    }
    if let Expr::Call(inner) = recv
        && let Expr::Attribute(ia) = &*inner.func
        && ia.attr.as_str() == "scale"
        && let Some(first) = inner.arguments.args.first()
    {
        return Some(first);
    }
    Some(recv)
}

/// The names a backpropagated expression is computed from: `out` for
/// `out["loss"]`/`out.loss`/`out.loss.mean()`, both for `a + b`.
pub(super) fn roots(expr: &Expr, out: &mut HashSet<String>) {
    let mut e = expr;
    for _ in 0..MAX_CHAIN_ATTRS {
        match e {
            Expr::Name(n) => {
                out.insert(n.id.to_string());
                return;
            }
            Expr::Attribute(a) => e = &a.value,
            Expr::Subscript(s) => e = &s.value,
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) => e = &a.value,
                _ => return,
            },
            Expr::BinOp(b) => {
                roots(&b.left, out);
                e = &b.right;
            }
            _ => return,
        }
    }
}

/// The last dotted segment of a text (`model` for `self.model`).
pub fn last_segment_of_text(text: &str) -> &str {
    text.rsplit('.').next().unwrap_or(text)
}

/// The name a value is read from through attributes and subscripts (`outputs` for
/// `outputs.loss` and `outputs["loss"]`), if it is one.
pub(super) fn root_name(expr: &Expr) -> Option<&str> {
    let mut e = expr;
    for _ in 0..MAX_CHAIN_ATTRS {
        match e {
            Expr::Name(n) => return Some(n.id.as_str()),
            Expr::Attribute(a) => e = &a.value,
            Expr::Subscript(s) => e = &s.value,
            _ => return None,
        }
    }
    None
}
