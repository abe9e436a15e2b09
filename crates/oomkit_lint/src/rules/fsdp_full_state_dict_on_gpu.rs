//! OOM206 `fsdp-full-state-dict-on-gpu` (out of preview since the precision benchmark
//! of the precision review: 1 finding, real).

use crate::context::{Checker, last_segment};
use crate::parse::Ranged;
use crate::parse::ast::{self, Expr};
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `FullStateDictConfig(...)` (FSDP) without both `offload_to_cpu=True` and
    /// `rank0_only=True`: both default to `False`.
    ///
    /// ## Evidence it needs
    /// The call, with `offload_to_cpu` or `rank0_only` missing or a literal `False` (a
    /// value that is not a literal, `rank0_only=args.rank0_only`, is not flagged), in a
    /// function (or script) that saves or gathers a state dict: `.state_dict()`,
    /// `optim_state_dict(...)`, `get_state_dict`, `*.save*(...)` (`accelerator.save_state`,
    /// `torch.save`, `save_pretrained`). A config used only to *load* (LeRobot's
    /// `train_utils.py` reads an optimizer state back with `rank0_only=False` on purpose,
    /// through `optim_state_dict_to_load`) gathers nothing and is not flagged.
    ///
    /// ## Why it costs memory
    /// A full state dict gathers every sharded parameter into one unsharded copy. Without
    /// `offload_to_cpu=True` that copy is built on the GPU, beside the sharded model and
    /// the optimizer state; without `rank0_only=True` every rank builds its own. Saving a
    /// checkpoint then needs the whole model's size free on every GPU, which is exactly
    /// what FSDP was used to avoid: the save OOMs after hours of training. PyTorch added
    /// both options for this (pytorch/pytorch#75908); dlrover (#840) and Lightning
    /// (#11207) report the OOM.
    ///
    /// ## Example
    /// ```python
    /// cfg = FullStateDictConfig(offload_to_cpu=False, rank0_only=False)
    /// with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
    ///     state = model.state_dict()
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
    /// ```
}

/// `FullStateDictConfig(...)` that gathers the full model on the GPU or on every rank.
pub(crate) struct FsdpFullStateDictOnGpu {
    /// Where the model is gathered (`on the GPU of every rank`).
    pub place: &'static str,
    /// The arguments it lacks, quoted (`` `offload_to_cpu=True` ``).
    pub missing: Vec<&'static str>,
}

impl Violation for FsdpFullStateDictOnGpu {
    const RULE: Rule = Rule::FsdpFullStateDictOnGpu;

    fn message(&self) -> String {
        let why = self.place;
        format!("`FullStateDictConfig(...)` gathers the whole unsharded model {why} when saving")
    }

    fn fix_title(&self) -> String {
        format!("Pass {}", self.missing.join(" and "))
    }
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::FsdpFullStateDictOnGpu)
        || last_segment(&call.func) != Some("FullStateDictConfig")
    {
        return;
    }
    let args = &call.arguments;
    if args.keywords.iter().any(|k| k.arg.is_none()) || !args.args.is_empty() {
        return;
    }
    // missing or literal False: on; literal True: off; anything else: unknown
    let off = |name: &str| match args.find_keyword(name).map(|k| &k.value) {
        None => Some(true),
        Some(Expr::BooleanLiteral(b)) => Some(!b.value),
        Some(_) => None,
    };
    let (Some(gpu), Some(every_rank)) = (off("offload_to_cpu"), off("rank0_only")) else {
        return;
    };
    // the config must serve a save: a state dict is gathered or saved in this function
    let saves = ch.scope().facts.calls().any(|c| {
        last_segment(&c.call.func).is_some_and(|l| {
            l.starts_with("save")
                || matches!(
                    l,
                    "state_dict"
                        | "optim_state_dict"
                        | "full_optim_state_dict"
                        | "get_state_dict"
                        | "get_model_state_dict"
                        | "get_optimizer_state_dict"
                )
        })
    });
    if !saves {
        return;
    }
    let why = match (gpu, every_rank) {
        (true, true) => "on the GPU of every rank",
        (true, false) => "on the GPU",
        (false, true) => "on every rank",
        (false, false) => return,
    };
    let mut fix = Vec::new();
    if gpu {
        fix.push("`offload_to_cpu=True`");
    }
    if every_rank {
        fix.push("`rank0_only=True`");
    }
    ch.report(
        call.range(),
        FsdpFullStateDictOnGpu {
            place: why,
            missing: fix,
        },
    );
}
