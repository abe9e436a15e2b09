//! `oomkit monitor`: live GPU memory, its growth and when it runs out.
//!
//! Readings come from a [`oomkit_nvml::GpuReader`] (NVML, or a stand-in in
//! tests); this crate turns them into samples and everything users do with
//! them:
//!
//! - [`trend`]: Theil–Sen slope over a sliding window, steadiness, OOM ETA;
//! - [`sample`]: the versioned JSON sample and the [`sample::Tracker`] that
//!   keeps one series per GPU and per process;
//! - [`render`]: the human table and CSV rows;
//! - [`log`]: `--log` JSON Lines that are never torn, rotated at a size;
//! - [`prometheus`]: `/metrics` text and its HTTP server;
//! - [`alert`]: `--alert-at` thresholds, once per GPU;
//! - [`tui`]: the ratatui interface.
#![warn(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod alert;
pub mod log;
pub mod prometheus;
pub mod render;
pub mod sample;
pub mod trend;
pub mod tui;

use std::time::Duration;

/// Shortest sampling interval accepted (NVML's own counters update at about
/// this rate; faster sampling only repeats values and burns CPU).
pub const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// Parses `--interval`: `200ms`, `1s`, `1m`, or plain seconds (`2`, `0.5`).
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = oomkit_core::duration::parse(s)?;
    if d < MIN_INTERVAL {
        return Err(format!(
            "interval {s:?} is shorter than {}ms: NVML does not update faster",
            MIN_INTERVAL.as_millis()
        ));
    }
    if d > Duration::from_secs(86_400) {
        return Err(format!("interval {s:?} is longer than a day"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_interval("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_interval("10ms").is_err());
        assert!(parse_interval("-1").is_err());
        assert!(parse_interval("NaN").is_err());
        assert!(parse_interval("1e300").is_err());
        assert!(parse_interval("soon").is_err());
        assert!(parse_interval("2d").is_err());
    }
}
