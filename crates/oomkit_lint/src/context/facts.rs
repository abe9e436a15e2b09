//! The facts of a function (or module) body, gathered in one scan when it is entered:
//! assignments, calls with their `if`/`%` guards and loop depth, returns, `p.grad =
//! None`; each loop's facts are the contiguous range gathered while its body was
//! scanned, so nested loops cost nothing more. Rules read these ([`Facts`]) instead
//! of re-walking the tree.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::rc::Rc;

use super::MAX_WALK_DEPTH;
use super::query::{is_modulo, mentions, text_of};
use crate::parse::ast::{self, Expr, Stmt};
use crate::parse::visitor::{self, Visitor};
use crate::parse::{Ranged, TextRange};

/// Where a call sits inside a loop or function body.
#[derive(Debug, Clone, Copy)]
pub struct CallSite<'a> {
    /// The call.
    pub call: &'a ast::ExprCall,
    /// Under any `if`.
    pub in_if: bool,
    /// Under an `if` whose test uses `%` (an accumulation guard).
    pub modulo: bool,
    /// Inside a loop nested in the scanned body.
    pub nested_loop: bool,
}

/// Where a fact sits in the scanned body: under how many `if`s, the deepest of them
/// whose test uses `%` (0 for none), inside how many loops.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Place {
    if_depth: u32,
    mod_level: u32,
    loop_depth: u32,
}

/// The facts of one loop body: ranges into its function's [`BodyFacts`] (a loop's
/// facts are the contiguous run gathered while its body was scanned), and where the
/// loop itself sits, so guards are read relative to it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Span {
    assigned: (usize, usize),
    assigns: (usize, usize),
    calls: (usize, usize),
    returns: (usize, usize),
    grad_none: (usize, usize),
    /// `if`s around the loop (guards deeper than this are inside it).
    if_base: u32,
    /// The loop depth of the loop's body (deeper calls are in nested loops).
    loop_base: u32,
    /// Whether the body holds another loop.
    inner_loop: bool,
}

fn run<T>(v: &[T], (start, end): (usize, usize)) -> &[T] {
    v.get(start..end).unwrap_or_default()
}

/// Facts about a function's (or the module's) body, gathered once when it is entered,
/// in one pass: the facts of every loop inside are sub-ranges of these, so nested
/// loops cost nothing more (95 nested loops around 60,000 statements are scanned once,
/// not 95 times). Nested function and class bodies are not part of it.
#[derive(Debug, Default)]
pub struct BodyFacts<'a> {
    /// Name (or `self.x` text) → the ordinal of each assignment to it, ascending.
    assigned_at: HashMap<String, Vec<usize>>,
    assigned_count: usize,
    /// Every assignment: target texts and value (augmented ones included).
    pub(super) assigns: Vec<(Vec<String>, &'a Expr, bool)>,
    /// Where each of `assigns` sits (same index).
    assign_places: Vec<Place>,
    calls: Vec<(&'a ast::ExprCall, Place)>,
    /// Indices in `calls` of the training-step calls (see [`Facts::step_calls`]).
    step_calls: Vec<usize>,
    returns: Vec<&'a Expr>,
    /// `p.grad = None` assignments.
    grad_none: Vec<Place>,
    /// Each loop statement of the body → its span.
    pub(super) loops: HashMap<TextRange, Span>,
    /// Target text → the assignments to it that do not accumulate (neither augmented
    /// nor mentioning the target in their value), ascending; built on first use by
    /// [`Facts::only_accumulated`].
    resets: std::cell::OnceCell<HashMap<String, Vec<usize>>>,
}

impl<'a> BodyFacts<'a> {
    /// Scans a function's or the module's `body`.
    pub fn of(body: &'a [Stmt]) -> Self {
        let mut scan = BodyScan::default();
        scan.visit_body(body);
        scan.facts
    }

    /// Every call in the body (nested function and class bodies excluded).
    pub fn all_calls(&self) -> impl Iterator<Item = &'a ast::ExprCall> + '_ {
        self.calls.iter().map(|&(call, _)| call)
    }

    /// Scans one loop statement on its own (a loop outside any scanned body: in a
    /// class body).
    pub(super) fn of_loop(stmt: &'a Stmt) -> Self {
        let mut scan = BodyScan::default();
        scan.visit_stmt(stmt);
        scan.facts
    }

    pub(super) fn whole(&self) -> Span {
        Span {
            assigned: (0, self.assigned_count),
            assigns: (0, self.assigns.len()),
            calls: (0, self.calls.len()),
            returns: (0, self.returns.len()),
            grad_none: (0, self.grad_none.len()),
            if_base: 0,
            loop_base: 0,
            inner_loop: !self.loops.is_empty(),
        }
    }
}

/// The facts of a function body or of one loop body within it (a view, O(1) to make).
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub(super) all: Rc<BodyFacts<'a>>,
    pub(super) span: Span,
    /// Names bound by the loop's own `for` target.
    pub(super) targets: HashSet<String>,
}

impl<'a> Facts<'a> {
    pub(super) fn whole(all: Rc<BodyFacts<'a>>) -> Self {
        let span = all.whole();
        Self {
            all,
            span,
            targets: HashSet::new(),
        }
    }

    /// Whether `name` (or `self.x` text) is assigned in the body (a loop's `for`
    /// target included).
    pub fn assigned(&self, name: &str) -> bool {
        let (start, end) = self.span.assigned;
        self.targets.contains(name)
            || self.all.assigned_at.get(name).is_some_and(|at| {
                at.get(at.partition_point(|&i| i < start))
                    .is_some_and(|&i| i < end)
            })
    }

    /// Every assignment: target texts and value (augmented ones included).
    pub fn assigns(&self) -> &[(Vec<String>, &'a Expr, bool)] {
        run(&self.all.assigns, self.span.assigns)
    }

    /// `return` / `yield` values.
    pub fn returns(&self) -> &[&'a Expr] {
        run(&self.all.returns, self.span.returns)
    }

    /// Every call, with its guard relative to this body.
    pub fn calls(&self) -> impl Iterator<Item = CallSite<'a>> + '_ {
        run(&self.all.calls, self.span.calls)
            .iter()
            .map(|&(call, place)| self.site(call, place))
    }

    /// The calls that the loop-exit rules look at: `*.step`, `*.backward`,
    /// `*.manual_backward`, `*zero_grad*`, `*.div_`, `*.mul_`. Each loop exit reads
    /// only these (through an index), so checking every loop of a deep nest costs the
    /// number of such calls times the nesting, not the size of the code.
    pub fn step_calls(&self) -> impl Iterator<Item = CallSite<'a>> + '_ {
        let (start, end) = self.span.calls;
        let marked = &self.all.step_calls;
        let from = marked.partition_point(|&i| i < start);
        let to = marked.partition_point(|&i| i < end);
        marked
            .get(from..to)
            .unwrap_or_default()
            .iter()
            .filter_map(|&i| self.all.calls.get(i))
            .map(|&(call, place)| self.site(call, place))
    }

    /// `name` is assigned in the body only by `name = name + …` / `name += …` (not
    /// reset per iteration). O(log n) after a one-time index of the function.
    pub fn only_accumulated(&self, name: &str) -> bool {
        let resets = self.all.resets.get_or_init(|| {
            let mut index: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, (targets, value, aug)) in self.all.assigns.iter().enumerate() {
                for t in targets {
                    if !*aug && !mentions(value, t) {
                        index.entry(t.clone()).or_default().push(i);
                    }
                }
            }
            index
        });
        let (start, end) = self.span.assigns;
        resets.get(name).is_none_or(|at| {
            at.get(at.partition_point(|&i| i < start))
                .is_none_or(|&i| i >= end)
        })
    }

    /// `name` is accumulated in the body and otherwise only reset to a constant under
    /// an `if` (`if step % 100 == 0: running_loss = 0.0`): a reset every N steps, which
    /// still keeps N steps' worth of whatever is accumulated.
    pub fn reset_only_under_guard(&self, name: &str) -> bool {
        let (start, end) = self.span.assigns;
        let mut accumulates = false;
        for i in start..end {
            let (Some((targets, value, aug)), Some(place)) =
                (self.all.assigns.get(i), self.all.assign_places.get(i))
            else {
                continue;
            };
            if !targets.iter().any(|t| t == name) {
                continue;
            }
            if *aug || mentions(value, name) {
                accumulates = true;
                continue;
            }
            let (in_if, _, _) = self.relative(*place);
            let constant = match value {
                Expr::NumberLiteral(_) | Expr::NoneLiteral(_) => true,
                Expr::UnaryOp(u) => matches!(&*u.operand, Expr::NumberLiteral(_)),
                Expr::Call(c) => {
                    c.arguments
                        .args
                        .iter()
                        .all(|a| matches!(a, Expr::NumberLiteral(_)))
                        && c.arguments.keywords.is_empty()
                }
                _ => false,
            };
            if !(in_if && constant) {
                return false;
            }
        }
        accumulates
    }

    /// Whether the body holds another loop (an epoch loop around a batch loop).
    pub fn has_inner_loop(&self) -> bool {
        self.span.inner_loop
    }

    /// `p.grad = None` assignments: (in_if, modulo).
    pub fn grad_none(&self) -> impl Iterator<Item = (bool, bool)> + '_ {
        run(&self.all.grad_none, self.span.grad_none)
            .iter()
            .map(|&place| {
                let (in_if, modulo, _) = self.relative(place);
                (in_if, modulo)
            })
    }

    /// A call placed relative to this body.
    fn site(&self, call: &'a ast::ExprCall, place: Place) -> CallSite<'a> {
        let (in_if, modulo, nested_loop) = self.relative(place);
        CallSite {
            call,
            in_if,
            modulo,
            nested_loop,
        }
    }

    fn relative(&self, place: Place) -> (bool, bool, bool) {
        (
            place.if_depth > self.span.if_base,
            place.mod_level > self.span.if_base,
            place.loop_depth > self.span.loop_base,
        )
    }
}

#[derive(Default)]
struct BodyScan<'a> {
    facts: BodyFacts<'a>,
    /// How deep the scan is; it stops descending past [`MAX_WALK_DEPTH`] (the checker
    /// then refuses the file).
    depth: usize,
    /// For each open `if`: the deepest `%` guard level at and above it (0 for none).
    guards: Vec<u32>,
    loop_depth: u32,
}

impl<'a> BodyScan<'a> {
    fn place(&self) -> Place {
        Place {
            if_depth: u32::try_from(self.guards.len()).unwrap_or(u32::MAX),
            mod_level: self.guards.last().copied().unwrap_or(0),
            loop_depth: self.loop_depth,
        }
    }

    fn push_guard(&mut self, modulo: bool) {
        let level = u32::try_from(self.guards.len().saturating_add(1)).unwrap_or(u32::MAX);
        let outer = self.guards.last().copied().unwrap_or(0);
        self.guards.push(if modulo { level } else { outer });
    }

    fn note_assigned(&mut self, names: impl IntoIterator<Item = String>) {
        for name in names {
            let n = self.facts.assigned_count;
            self.facts.assigned_at.entry(name).or_default().push(n);
            self.facts.assigned_count = n.saturating_add(1);
        }
    }

    fn note_targets(&mut self, target: &Expr) {
        let mut names = HashSet::new();
        collect_targets(target, &mut names);
        self.note_assigned(names);
    }

    /// Visits a loop's body, recording the span of facts it produced.
    fn loop_body(&mut self, stmt: &'a Stmt, body: &'a [Stmt]) {
        let f = &self.facts;
        let start = (
            f.assigned_count,
            f.assigns.len(),
            f.calls.len(),
            f.returns.len(),
            f.grad_none.len(),
        );
        let if_base = self.place().if_depth;
        let loops_before = self.facts.loops.len();
        self.loop_depth = self.loop_depth.saturating_add(1);
        let loop_base = self.loop_depth;
        self.visit_body(body);
        self.loop_depth = self.loop_depth.saturating_sub(1);
        let f = &self.facts;
        let span = Span {
            assigned: (start.0, f.assigned_count),
            assigns: (start.1, f.assigns.len()),
            calls: (start.2, f.calls.len()),
            returns: (start.3, f.returns.len()),
            grad_none: (start.4, f.grad_none.len()),
            if_base,
            loop_base,
            inner_loop: self.facts.loops.len() > loops_before,
        };
        self.facts.loops.insert(stmt.range(), span);
    }
}

impl<'a> Visitor<'a> for BodyScan<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        self.depth = self.depth.saturating_add(1);
        if self.depth <= MAX_WALK_DEPTH {
            self.scan_stmt(stmt);
        }
        self.depth = self.depth.saturating_sub(1);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        self.depth = self.depth.saturating_add(1);
        if self.depth <= MAX_WALK_DEPTH {
            self.scan_expr(expr);
        }
        self.depth = self.depth.saturating_sub(1);
    }
}

impl<'a> BodyScan<'a> {
    fn scan_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
            Stmt::For(s) => {
                self.visit_expr(&s.iter);
                self.note_targets(&s.target);
                self.loop_body(stmt, &s.body);
                self.visit_body(&s.orelse);
            }
            Stmt::While(s) => {
                self.visit_expr(&s.test);
                self.loop_body(stmt, &s.body);
                self.visit_body(&s.orelse);
            }
            Stmt::If(s) => {
                self.visit_expr(&s.test);
                self.push_guard(is_modulo(&s.test));
                self.visit_body(&s.body);
                self.guards.pop();
                for clause in &s.elif_else_clauses {
                    if let Some(t) = &clause.test {
                        self.visit_expr(t);
                    }
                    self.push_guard(false);
                    self.visit_body(&clause.body);
                    self.guards.pop();
                }
            }
            Stmt::Return(r) => {
                if let Some(v) = &r.value {
                    self.facts.returns.push(v);
                }
                visitor::walk_stmt(self, stmt);
            }
            Stmt::Assign(a) => {
                let mut names = HashSet::new();
                for t in &a.targets {
                    collect_targets(t, &mut names);
                    if let Expr::Attribute(at) = t
                        && at.attr.as_str() == "grad"
                        && a.value.is_none_literal_expr()
                    {
                        let g = self.place();
                        self.facts.grad_none.push(g);
                    }
                }
                self.note_assigned(names.iter().cloned());
                let place = self.place();
                self.facts.assign_places.push(place);
                self.facts
                    .assigns
                    .push((names.into_iter().collect(), &a.value, false));
                visitor::walk_stmt(self, stmt);
            }
            Stmt::AugAssign(a) => {
                let mut names = HashSet::new();
                collect_targets(&a.target, &mut names);
                let place = self.place();
                self.facts.assign_places.push(place);
                self.facts
                    .assigns
                    .push((names.into_iter().collect(), &a.value, true));
                visitor::walk_stmt(self, stmt);
            }
            Stmt::AnnAssign(a) => {
                if let Some(v) = &a.value {
                    let mut names = HashSet::new();
                    collect_targets(&a.target, &mut names);
                    self.note_assigned(names.iter().cloned());
                    let place = self.place();
                    self.facts.assign_places.push(place);
                    self.facts
                        .assigns
                        .push((names.into_iter().collect(), v, false));
                }
                visitor::walk_stmt(self, stmt);
            }
            Stmt::With(w) => {
                for item in &w.items {
                    if let Some(v) = &item.optional_vars {
                        self.note_targets(v);
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    fn scan_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Lambda(_) => {}
            Expr::Call(call) => {
                let place = self.place();
                let step = match &*call.func {
                    Expr::Attribute(a) => {
                        let m = a.attr.as_str();
                        matches!(m, "step" | "backward" | "manual_backward" | "div_" | "mul_")
                            || m.contains("zero_grad")
                    }
                    Expr::Name(n) => n.id.as_str().contains("zero_grad"),
                    _ => false,
                };
                if step {
                    self.facts.step_calls.push(self.facts.calls.len());
                }
                self.facts.calls.push((call, place));
                visitor::walk_expr(self, expr);
            }
            Expr::Yield(y) => {
                if let Some(v) = &y.value {
                    self.facts.returns.push(v);
                }
                visitor::walk_expr(self, expr);
            }
            Expr::Named(n) => {
                self.note_targets(&n.target);
                self.facts
                    .assigns
                    .push((vec![text_of(&n.target)], &n.value, false));
                visitor::walk_expr(self, expr);
            }
            _ => visitor::walk_expr(self, expr),
        }
    }
}

pub(crate) fn collect_targets(target: &Expr, out: &mut HashSet<String>) {
    match target {
        Expr::Tuple(t) => t.elts.iter().for_each(|e| collect_targets(e, out)),
        Expr::List(t) => t.elts.iter().for_each(|e| collect_targets(e, out)),
        Expr::Starred(s) => collect_targets(&s.value, out),
        Expr::Name(_) | Expr::Attribute(_) => {
            out.insert(text_of(target));
        }
        _ => {}
    }
}
