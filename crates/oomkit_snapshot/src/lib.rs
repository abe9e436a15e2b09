//! `oomkit snapshot`: read a PyTorch memory snapshot
//! (`torch.cuda.memory._dump_snapshot()`) **without executing it** and report,
//! per device, the figures MemoryViz computes (reserved, allocated, requested,
//! the trace replay's baseline, peak and end), what was alive at the peak by
//! allocation site, fragmentation, leak candidates and OOM events.
//!
//! Entry points: [`load()`] (bytes → [`Snapshot`]), [`analyze()`] (→ [`Report`]),
//! [`diff()`] (two snapshots → growth by site), and the renderers [`render::human`]
//! and [`html::write`]. The crate reads from readers it is given; it never opens
//! files and never prints.
//!
//! ```
//! // pickle.dumps({'segments': [], 'device_traces': []}, protocol=4)
//! let bytes: &[u8] = b"\x80\x04\x95\x24\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94\x8c\rdevice_traces\x94]\x94u.";
//! let snap = oomkit_snapshot::load(|| Ok(bytes), bytes.len() as u64).unwrap();
//! let report = oomkit_snapshot::analyze(&snap, &Default::default()).unwrap();
//! assert!(report.devices.is_empty());
//! ```
#![warn(missing_docs)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]
// Tests may index and unwrap: a panic there is a failing test.
#![cfg_attr(
    test,
    allow(
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unwrap_used,
        clippy::arithmetic_side_effects
    )
)]

pub mod analyze;
pub mod diff;
pub mod html;
pub mod load;
pub mod pairs;
pub mod pickle;
pub mod render;

pub use analyze::{DeviceReport, Options, Report, analyze};
pub use diff::{DeviceDiff, SiteDiff, diff};
pub use load::{Snapshot, load, load_stream};

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes are not a pickle this decoder reads (or it refused one).
    #[error(transparent)]
    Pickle(#[from] pickle::PickleError),
    /// The pickle decodes but is not shaped like a memory snapshot.
    #[error("not a memory snapshot: {0}")]
    Shape(String),
    /// `--device N` names a device the snapshot does not have.
    #[error("the snapshot has no device {device} (devices: {available})")]
    NoDevice {
        /// Asked for.
        device: i64,
        /// Present.
        available: String,
    },
    /// `snapshot diff --device N` names a device neither snapshot has.
    #[error("neither snapshot has device {device} (devices: {available})")]
    NoDeviceInEither {
        /// Asked for.
        device: i64,
        /// Present in either snapshot.
        available: String,
    },
}
