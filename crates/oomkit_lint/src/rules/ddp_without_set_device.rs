//! OOM207 `ddp-without-set-device` (out of preview since lint v3: 1 finding on the
//! precision benchmark, real).

use crate::context::{Checker, last_segment};
use crate::parse::Ranged;
use crate::parse::ast;
use crate::rules::{Rule, Violation};

rule_doc! {
    /// ## What it does
    /// Flags `DistributedDataParallel(...)` (also imported as `DDP`) in a file that starts
    /// the process group itself (`init_process_group`) but never calls
    /// `torch.cuda.set_device(...)`.
    ///
    /// ## Evidence it needs
    /// In the same file: an `init_process_group(...)` call (not with the `gloo` backend
    /// alone), a DDP wrapper, and no `torch.cuda.set_device(...)` (nor
    /// `torch.accelerator.set_device_index(...)` or a helper named like them, such as
    /// transformers' `_set_rank_device(rank)`), no
    /// `with torch.cuda.device(...)` and no `CUDA_VISIBLE_DEVICES` (each of which gives
    /// every process its own GPU). Launchers that set the device themselves (accelerate,
    /// Lightning) do not construct DDP in user code and are not flagged.
    ///
    /// ## Why it costs memory
    /// Every process starts with GPU 0 as its current device. Without `set_device`, each
    /// rank creates a CUDA context, NCCL buffers and any default-device tensors on GPU 0:
    /// GPU 0 carries hundreds of MiB per process more than the others and runs out first
    /// (or collectives hang). pytorch/examples#969 reports it, pytorch/examples#1142 adds
    /// `torch.cuda.set_device` to every DDP example for it, and
    /// dptech-corp/deepmd-pytorch#76 fixes the same extra memory on rank 0.
    ///
    /// ## Example
    /// ```python
    /// init_process_group(backend="nccl")
    /// model = DDP(model.to(local_rank), device_ids=[local_rank])
    /// ```
    ///
    /// ## Use instead
    /// ```python
    /// init_process_group(backend="nccl")
    /// torch.cuda.set_device(local_rank)
    /// model = DDP(model.to(local_rank), device_ids=[local_rank])
    /// ```
}

/// A DDP wrapper in a file that never sets each process's device.
pub(crate) struct DdpWithoutSetDevice {
    /// The callee as written (`DDP`, `torch.nn.parallel.DistributedDataParallel`).
    pub callee: String,
}

impl Violation for DdpWithoutSetDevice {
    const RULE: Rule = Rule::DdpWithoutSetDevice;

    fn message(&self) -> String {
        let t = &self.callee;
        format!(
            "`{t}(...)` without `torch.cuda.set_device(local_rank)`: every process also uses GPU 0, which runs out first"
        )
    }

    fn fix_title(&self) -> String {
        "Call `torch.cuda.set_device(local_rank)` right after `init_process_group`".to_string()
    }
}

/// Runs on every call.
pub(crate) fn check(ch: &mut Checker<'_>, call: &ast::ExprCall) {
    if !ch.enabled(Rule::DdpWithoutSetDevice)
        || !matches!(
            last_segment(&call.func),
            Some("DistributedDataParallel" | "DDP")
        )
    {
        return;
    }
    let file = ch.file();
    if !file.inits_process_group || file.gloo || file.sets_device {
        return;
    }
    let t = ch.snippet(call.func.range());
    ch.report(
        call.range(),
        DdpWithoutSetDevice {
            callee: t.to_string(),
        },
    );
}
