//! What a rule reports, as ruff does it: each rule defines a `Violation` type whose
//! fields are the names taken from the code, and the type alone knows how to word its
//! message and its fix title. The checker formats them only for a selected rule.

use crate::context::Checker;
use crate::diagnostic::{Edit, Finding};
use crate::parse::TextRange;
use crate::rules::Rule;
use crate::tree::Pending;

/// One rule's finding, before it is placed in a file.
pub(crate) trait Violation {
    /// The rule it belongs to: its code, name, category, remedy and docs are its
    /// registry entry (`Self::RULE.info()`, from `RULES`).
    const RULE: Rule;

    /// States the problem with the names from the code.
    fn message(&self) -> String;

    /// Imperative: what to do instead.
    fn fix_title(&self) -> String;
}

impl Checker<'_> {
    /// Reports a violation (if its rule is selected).
    pub(crate) fn report<V: Violation>(&mut self, range: TextRange, violation: V) {
        self.report_with(range, &violation, Vec::new(), Pending::default());
    }

    /// Reports a violation with the edits of its safe fix.
    pub(crate) fn report_fix<V: Violation>(
        &mut self,
        range: TextRange,
        violation: V,
        edits: Vec<Edit>,
    ) {
        self.report_with(range, &violation, edits, Pending::default());
    }

    /// Reports a violation that still needs evidence from the other files of the tree.
    pub(crate) fn report_pending<V: Violation>(
        &mut self,
        range: TextRange,
        violation: V,
        pending: Pending,
    ) {
        self.report_with(range, &violation, Vec::new(), pending);
    }

    fn report_with<V: Violation>(
        &mut self,
        range: TextRange,
        violation: &V,
        edits: Vec<Edit>,
        pending: Pending,
    ) {
        if self.enabled(V::RULE) {
            self.violations.push(Finding {
                rule: V::RULE,
                message: violation.message(),
                fix_title: violation.fix_title(),
                range,
                edits,
                pending,
            });
        }
    }
}
