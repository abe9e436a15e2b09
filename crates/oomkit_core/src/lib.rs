//! Shared facts for every oomkit capability: no files opened, no printing, no CLI types.
//!
//! - [`bytes`]: [`Bytes`], the only parser and formatter of sizes.
//! - [`dtype`]: element types and their sizes.
//! - [`duration`]: the one parser of command-line durations.
//! - [`gpus`]: the GPU catalogue ([`gpus::find`] resolves `4090`, `a100-40gb`, …).
//! - [`remedies`]: the fix ladder, one id per remedy ([`remedies::get`]).
//! - [`reading`]: one model of a GPU memory reading (NVML samples, pasted nvidia-smi tables).
//! - [`read_ahead`]: reads a large input on a second thread into recycled chunks
//!   (the reader is handed in; explain's log scan and snapshot's pickle decoder).
//!
//! ```
//! use oomkit_core::Bytes;
//! let b: Bytes = "17.79G (19104890880 bytes)".parse().unwrap();
//! assert_eq!(b.get(), 19_104_890_880);
//! assert_eq!(Bytes::gib(2).to_string(), "2.00 GiB");
//! ```
#![warn(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod bytes;
pub mod dtype;
pub mod duration;
pub mod gpus;
pub mod read_ahead;
pub mod reading;
pub mod remedies;
pub mod text;

pub use bytes::Bytes;
pub use dtype::DType;
pub use reading::{GpuReading, ProcessReading};
