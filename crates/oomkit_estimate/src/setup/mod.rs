//! What the user runs: task, method, precision, quantization, optimizer and
//! input sizes (`types.rs`), validated (`validate.rs`) so the formulas can
//! trust it.

mod types;
mod validate;

pub use types::*;
pub use validate::{MAX_GRAD_ACCUM, MAX_LORA_RANK};
