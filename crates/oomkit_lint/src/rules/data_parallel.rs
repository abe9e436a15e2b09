//! OOM204 `data-parallel`.

use crate::context::Checker;
use crate::parse::Ranged;
use crate::parse::ast;
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `nn.DataParallel(...)` (through any alias).
    ///
    /// ## Evidence it needs
    /// The call itself. This is an `advice` rule (opt-in): `DataParallel` is often a
    /// deliberate single-node fallback next to a DDP path, so it does not run by default.
    ///
    /// ## Why it costs memory
    /// `DataParallel` replicates the model from GPU 0 every step and gathers all outputs
    /// (and the loss computation) on GPU 0, so GPU 0 needs far more memory than the others
    /// and runs out first. `DistributedDataParallel` keeps the load balanced and is faster.
    ///
    /// ## Example
    /// ```python
    /// model = nn.DataParallel(model)
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// # launched with torchrun; one process per GPU
    /// model = nn.parallel.DistributedDataParallel(model.to(local_rank), device_ids=[local_rank])
    /// ```
}

/// `nn.DataParallel(...)`.
pub(crate) struct DataParallel {
    /// The callee as written (`nn.DataParallel`).
    pub callee: String,
}

impl Violation for DataParallel {
    const RULE: Rule = Rule::DataParallel;

    fn message(&self) -> String {
        let t = &self.callee;
        format!("`{t}` gathers outputs on GPU 0, which runs out of memory first")
    }

    fn fix_title(&self) -> String {
        "Use `DistributedDataParallel` (one process per GPU)".to_string()
    }
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::DataParallel) {
        return;
    }
    let Some(q) = ch.qualified(&call.func) else {
        return;
    };
    if !matches!(
        q.as_str(),
        "torch.nn.DataParallel"
            | "torch.nn.parallel.DataParallel"
            | "torch.nn.parallel.data_parallel.DataParallel"
    ) {
        return;
    }
    let t = ch.snippet(call.func.range()).to_string();
    ch.report(call.range(), DataParallel { callee: t });
}
