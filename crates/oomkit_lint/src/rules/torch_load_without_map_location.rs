//! OOM202 `torch-load-without-map-location`.

use crate::context::Checker;
use crate::parse::Ranged;
use crate::parse::ast;
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `torch.load(...)` (through any alias) without `map_location` (keyword or second
    /// positional argument) where the loaded tensors land on a GPU and cost memory there.
    ///
    /// ## Evidence it needs
    /// One of:
    /// - the file runs one process per GPU (`torch.distributed`, `init_process_group`,
    ///   DDP/FSDP, `Accelerator`, DeepSpeed, `local_rank`) and the load is not inside an
    ///   `if` on the rank (`if rank == 0:`, `if accelerator.is_main_process:`) nor in a
    ///   pytest `test_*` function (pytest runs it in one process): every rank
    ///   loads a full copy onto the GPU the checkpoint was saved from, usually GPU 0;
    /// - the result is bound to a name (`ckpt = torch.load(path)`) in a function (or
    ///   script) that trains, and the name is never released (`del ckpt`, `ckpt = None`):
    ///   the checkpoint's GPU tensors stay alive beside the model for the whole training.
    ///
    /// A single-process `model.load_state_dict(torch.load(path))`, whose result dies at
    /// once, is not flagged, nor is state that holds no CUDA tensors: a file or target
    /// named like an LR scheduler, AMP scaler, RNG state, sampler, arguments, config,
    /// vocabulary, tokenizer, metadata or metrics (a path that is an argparse field,
    /// `torch.load(args.ckpt)`, is named by its field, not by `args`), or an in-memory `io.BytesIO` round
    /// trip (also through a name: `buffer = io.BytesIO(...)` … `torch.load(buffer)`) (transformers' `Trainer` and Lightning's strategies load these without
    /// `map_location`, correctly). Nor is a checkpoint that the file itself writes from
    /// CPU tensors (every `torch.save` saves a value moved to the CPU, or the state dicts
    /// are gathered with `offload_to_cpu`, as accelerate's FSDP utilities do), a per-rank
    /// shard whose path names the rank (each process reads back what it saved from its
    /// own GPU), or a whole model reloaded into a name the file saves whole or uses as a
    /// model (`torch.save(model, f)` … `model = torch.load(f)`: the loaded object is the
    /// model, not a second copy).
    ///
    /// Evidence from the other files of the linted tree (`oomkit lint DIR`): a file that
    /// writes no checkpoint itself is not flagged when every checkpoint the tree writes
    /// holds CPU tensors (`torch.save(model.cpu().state_dict(), …)` in `save.py`, the
    /// load in `train.py`); nor is a load in a module-level helper that no file of the
    /// tree names (a call, an import, a mention), when the helper's file is a script
    /// (`if __name__ == "__main__":`) or the helper is private (`_load`): dead code.
    /// Decorated helpers and pytest's `test_*` functions are always taken as called.
    ///
    /// ## Why it costs memory
    /// Without `map_location`, every tensor goes back to the device it was saved from,
    /// usually GPU 0: every rank of a multi-GPU job then loads a full copy onto GPU 0, and a
    /// checkpoint kept in a variable holds a second copy of the weights (and optimizer
    /// state) on the GPU.
    ///
    /// ## Example
    /// ```python
    /// dist.init_process_group("nccl")
    /// state = torch.load("checkpoint.pt")
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// state = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
    /// ```
}

/// `torch.load(...)` without `map_location` where the loaded tensors stay on a GPU.
pub(crate) struct TorchLoadWithoutMapLocation {
    /// The callee as written (`torch.load`).
    pub callee: String,
    /// Why it costs memory here.
    pub why: String,
}

impl Violation for TorchLoadWithoutMapLocation {
    const RULE: Rule = Rule::TorchLoadWithoutMapLocation;

    fn message(&self) -> String {
        let (t, why) = (&self.callee, &self.why);
        format!("`{t}(...)` without `map_location`: {why}")
    }

    fn fix_title(&self) -> String {
        "Pass `map_location=\"cpu\"` (or the target device)".to_string()
    }
}

/// Words in a loaded file's name or its destination that mark state without CUDA tensors.
const HOST_STATES: &[&str] = &[
    "sched",
    "scaler",
    "rng",
    "random",
    "sampler",
    "args",
    "config",
    "vocab",
    "tokenizer",
    "metadata",
    "metrics",
    "bytesio",
];

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::TorchLoadWithoutMapLocation) {
        return;
    }
    if ch.qualified(&call.func).as_deref() != Some("torch.load") {
        return;
    }
    let args = &call.arguments;
    if args.args.len() >= 2
        || args.args.iter().any(ast::Expr::is_starred_expr)
        || args
            .keywords
            .iter()
            .any(|k| k.arg.as_ref().is_none_or(|a| a.as_str() == "map_location"))
    {
        return;
    }
    let trains = ch.scope().trains;
    let file = ch.file();
    // states that hold no CUDA tensors: LR schedulers, AMP scalers, RNG states, samplers,
    // arguments (transformers' Trainer loads these without `map_location`, correctly)
    let mut texts: Vec<String> = args
        .args
        .iter()
        .map(|a| ch.text(a.range()).to_string())
        .collect();
    texts.extend(file.loaded_into.get(&call.range()).cloned());
    texts.extend(
        file.bound_to
            .get(&call.range())
            .into_iter()
            .flatten()
            .cloned(),
    );
    // a path that is an argparse field (`torch.load(args.ckpt)`, stylegan2-pytorch's
    // resume) names the file, not saved arguments: the namespace's name does not count
    if texts.iter().any(|t| {
        let t = t.to_ascii_lowercase();
        let t = t.strip_prefix("args.").unwrap_or(&t);
        HOST_STATES.iter().any(|w| t.contains(w))
    }) {
        return;
    }
    // The checkpoint holds no CUDA tensors, or lands where it should: every
    // `torch.save` of this file saves CPU tensors (`{k: v.cpu() …}`, `offload_to_cpu`),
    // or the path names the rank (each process reads back the shard it saved from its
    // own GPU).
    if file.saves_cpu_state()
        || file.per_rank_loads.contains(&call.range())
        || file.buffer_loads.contains(&call.range())
    {
        return;
    }
    // a pytest test function runs in pytest's own single process (distributed tests
    // spawn workers that run other functions): not on every rank
    let pytest_test = ch.scope().name.starts_with("test_");
    let why = if file.distributed
        && !pytest_test
        && !file.rank_guarded(call.range())
        && !file.single_process(call.range())
    {
        "every rank loads its tensors onto the device they were saved from (often GPU 0)"
            .to_string()
    } else if let Some(name) = file.bound_to.get(&call.range()).and_then(|targets| {
        targets.iter().find(|t| {
            !t.contains('.')
                && !file.released_near(t, call.range())
                && !file.used_as_model.contains(t.as_str())
        })
    }) && trains
    {
        format!(
            "`{name}` stays alive on the GPU it was saved from (its tensors are loaded there) for the whole training"
        )
    } else {
        return;
    };
    // evidence from the other files of the tree: a checkpoint written elsewhere from
    // CPU tensors, or a helper that nothing calls
    let file = ch.file();
    let pending = crate::tree::Pending {
        unless_tree_saves_cpu: file.saves_nothing(),
        unless_unused: file.unused_helper(call.range()).map(str::to_string),
    };
    let t = ch.snippet(call.func.range()).to_string();
    ch.report_pending(
        call.range(),
        TorchLoadWithoutMapLocation { callee: t, why },
        pending,
    );
}
