//! The semantic model every rule queries, built in the same single pass that runs
//! the rules: import aliases (`import torch.nn as nn`), which names hold tensors (and
//! whether they carry an autograd graph) or plain numbers, loops, `no_grad` regions,
//! `.eval()` state and the facts of each function body.
//!
//! This file only wires the parts together: `checker` (the [`Checker`], its entry point
//! and accessors), `visit` (the walk), `scope` (per-function state and open loops),
//! `kind` (what a value holds and how it is inferred), `bindings` (what names are bound
//! to), `loss` (whether a value is consumed as a loss), `facts` (one scan of each
//! function body) and `query` (pure syntax queries).
//!
//! The tensor inference is deliberately conservative (precision before recall): a value
//! is a tensor with a graph only when it comes from a model, a loss function or a torch op
//! on such a tensor, outside `torch.no_grad()`/`torch.inference_mode()`; `.item()`,
//! `.detach()`, `.cpu()`, `float()`, `.shape[...]`… make it safe, and anything unknown is
//! never flagged.

mod bindings;
mod checker;
mod facts;
mod kind;
mod loss;
mod query;
mod scope;
mod visit;

pub(crate) use bindings::collect_imports;
pub use checker::{Checker, MAX_WALK_DEPTH};
pub(crate) use facts::collect_targets;
pub use facts::{BodyFacts, Facts};
pub use kind::{Kind, optimizer_step};
pub use query::{
    MAX_CHAIN_ATTRS, backward_loss, is_model_class, is_scaled, last_segment, last_segment_of_text,
    mentions, text_of, zero_grad_receiver,
};
pub(crate) use query::{any_expr, any_stmt_expr};
pub use scope::{LoopFrame, Scope};
