//! Whether an accumulated value is consumed as a loss (backpropagated, scaled or
//! returned), answered from a [`LossIndex`] built once per function.

use foldhash::{HashMap, HashSet};

use super::query::{chain_texts, roots};
use super::{Checker, Facts, text_of};
use crate::parse::ast::Expr;

/// What [`Checker::consumed_as_loss`] reads, gathered in one walk of a function's facts.
#[derive(Debug, Default)]
pub(super) struct LossIndex {
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

impl<'a> Checker<'a> {
    /// Whether `value`'s graph was already used by `.backward()` in this function
    /// while `container` itself never is: a running total or list of losses that
    /// were each backpropagated cannot be meant for a later backward (their
    /// graphs' buffers are freed), so returning it is no excuse — it is the
    /// PyTorch FAQ's `total_loss += loss` leak ("My model reports cuda runtime
    /// error(2): out of memory", <https://pytorch.org/docs/stable/notes/faq.html>).
    /// A dict, list or tuple counts by its elements (`{"loss": loss, "logits": out}`,
    /// or a name bound to such a literal in this function): keeping it after `loss`
    /// was backpropagated is the same leak (verl's per-micro-batch `model_output`).
    pub fn kept_after_backward(&self, container: &str, value: &Expr) -> bool {
        let b = &self.scope().backpropagated;
        if b.contains(container) {
            return false;
        }
        let v = text_of(value);
        if !v.is_empty() && b.contains(&v) {
            return true;
        }
        if let Expr::Name(n) = value {
            let name = n.id.as_str();
            let memo = &self.scope().members_memo;
            if let Some(known) = memo.try_borrow().ok().and_then(|m| m.get(name).copied()) {
                return known;
            }
            let found = self.shares_backpropagated(value);
            if let Ok(mut m) = memo.try_borrow_mut() {
                m.insert(name.to_string(), found);
            }
            return found;
        }
        self.shares_backpropagated(value)
    }

    /// Whether `value` (a literal, or a name bound to one or unpacked beside a
    /// backpropagated name in this function) holds a backpropagated value.
    fn shares_backpropagated(&self, value: &Expr) -> bool {
        let b = &self.scope().backpropagated;
        let mut members = HashSet::default();
        let mut literal = |e: &Expr| match e {
            Expr::Dict(d) => d.items.iter().for_each(|i| roots(&i.value, &mut members)),
            Expr::List(l) => l.elts.iter().for_each(|x| roots(x, &mut members)),
            Expr::Tuple(t) => t.elts.iter().for_each(|x| roots(x, &mut members)),
            _ => {}
        };
        match value {
            Expr::Name(n) => {
                for (targets, bound, _) in self.scope().facts.assigns() {
                    if !targets.iter().any(|t| t == n.id.as_str()) {
                        continue;
                    }
                    if targets.len() == 1 {
                        literal(bound);
                    } else if targets.iter().any(|t| b.contains(t)) {
                        // `loss, logging_output = criterion(...)` … `loss.backward()`: one
                        // call's results share its graph (fairseq#2255's logging dict)
                        return true;
                    }
                }
            }
            e => literal(e),
        }
        members.iter().any(|m| b.contains(m))
    }

    /// Whether the accumulator `name` is consumed as a loss in this function
    /// (backpropagated or returned, directly or through a simple assignment).
    /// Memoised per function: a loop body of 100,000 `xs.append(loss)` asks once.
    pub fn consumed_as_loss(&self, name: &str) -> bool {
        let memo = &self.scope().loss_memo;
        if let Some(known) = memo.try_borrow().ok().and_then(|m| m.get(name).copied()) {
            return known;
        }
        let found = self.consumed_as_loss_uncached(name, true);
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
    /// Whether `name` leaves the function by `return` and is otherwise never
    /// backpropagated, scaled or handed on (a list of outputs the function returns).
    pub fn only_returned(&self, name: &str) -> bool {
        self.consumed_as_loss(name) && !self.consumed_as_loss_uncached(name, false)
    }

    fn consumed_as_loss_uncached(&self, name: &str, returns: bool) -> bool {
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
            if (returns && index.returned.contains(n))
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
}
