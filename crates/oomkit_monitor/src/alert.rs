//! `--alert-at 90%` / `--alert-at 70GiB`: warn once per GPU when its used
//! memory reaches a threshold, optionally running a command.
//!
//! Once per GPU per run: an alert that repeats every 100 ms is noise, and a
//! command (a Slack webhook, `kill -USR1` to a trainer that checkpoints) must
//! not be fired ten times a second.

use std::collections::BTreeSet;

use oomkit_core::Bytes;

use crate::sample::GpuSample;

/// The threshold: a share of total or an absolute size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    /// Fraction of total, (0, 1].
    Ratio(f64),
    /// Bytes used.
    Bytes(u64),
}

impl std::str::FromStr for Threshold {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.parse::<f64>().is_ok() {
            return Err(format!(
                "{s:?} has no unit: write a percentage of total ({s}%) or a size ({s}GiB)"
            ));
        }
        if let Some(pct) = s.strip_suffix('%') {
            let v: f64 = pct
                .trim()
                .parse()
                .map_err(|_| format!("invalid percentage {s:?} (expected e.g. 90%)"))?;
            if !(v > 0.0 && v <= 100.0) {
                return Err(format!("percentage {s:?} must be in (0, 100]"));
            }
            return Ok(Threshold::Ratio(v / 100.0));
        }
        let b: Bytes = s
            .parse()
            .map_err(|e| format!("invalid threshold {s:?}: {e} (expected 90% or 70GiB)"))?;
        if b.get() == 0 {
            return Err(format!("threshold {s:?} must be above zero"));
        }
        Ok(Threshold::Bytes(b.get()))
    }
}

/// One fired alert.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    /// GPU index.
    pub gpu: u32,
    /// GPU UUID.
    pub uuid: Option<String>,
    /// Used bytes when it fired.
    pub used: u64,
    /// Total bytes.
    pub total: u64,
    /// The warning line.
    pub message: String,
}

/// Remembers which GPUs already alerted.
#[derive(Debug)]
pub struct Alerter {
    threshold: Threshold,
    fired: BTreeSet<String>,
}

impl Alerter {
    /// An alerter for `threshold`.
    pub fn new(threshold: Threshold) -> Self {
        Alerter {
            threshold,
            fired: BTreeSet::new(),
        }
    }

    /// Alerts newly due in this sample's GPUs.
    pub fn check(&mut self, gpus: &[GpuSample]) -> Vec<Alert> {
        let mut out = Vec::new();
        for g in gpus {
            let (Some(used), Some(total)) = (g.memory_used_bytes, g.memory_total_bytes) else {
                continue;
            };
            let hit = match self.threshold {
                Threshold::Ratio(r) => total > 0 && used as f64 >= r * total as f64,
                Threshold::Bytes(b) => used >= b,
            };
            let key = g.uuid.clone().unwrap_or_else(|| format!("#{}", g.index));
            if !hit || !self.fired.insert(key) {
                continue;
            }
            let pct = if total > 0 {
                used as f64 * 100.0 / total as f64
            } else {
                0.0
            };
            let limit = match self.threshold {
                Threshold::Ratio(r) => format!("{:.0}%", r * 100.0),
                Threshold::Bytes(b) => Bytes(b).to_string(),
            };
            out.push(Alert {
                gpu: g.index,
                uuid: g.uuid.clone(),
                used,
                total,
                message: format!(
                    "GPU {} ({}) memory at {pct:.1}%: {} of {} used, alert threshold {limit}",
                    g.index,
                    g.name.as_deref().unwrap_or("unknown"),
                    Bytes(used),
                    Bytes(total)
                ),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(used: u64) -> GpuSample {
        GpuSample {
            index: 0,
            name: Some("G".into()),
            uuid: Some("GPU-0".into()),
            memory_total_bytes: Some(1000),
            memory_used_bytes: Some(used),
            memory_reserved_bytes: None,
            utilization_pct: None,
            temperature_c: None,
            power_w: None,
            growth_bytes_per_s: None,
            oom_eta_s: None,
            error: None,
            mig: None,
            memory_source: None,
            forecast: None,
            refused: vec![],
            processes: vec![],
        }
    }

    #[test]
    fn parse_and_fire_once() {
        assert_eq!("90%".parse::<Threshold>(), Ok(Threshold::Ratio(0.9)));
        assert_eq!("1GiB".parse::<Threshold>(), Ok(Threshold::Bytes(1 << 30)));
        assert!("0%".parse::<Threshold>().is_err());
        assert!("150%".parse::<Threshold>().is_err());
        assert!("lots".parse::<Threshold>().is_err());
        let bare = "95".parse::<Threshold>().unwrap_err();
        assert!(bare.contains("95%") && bare.contains("95GiB"), "{bare}");
        assert!("70GiB".parse::<Threshold>().is_ok());
        let mut a = Alerter::new(Threshold::Ratio(0.9));
        assert!(a.check(&[gpu(800)]).is_empty());
        let fired = a.check(&[gpu(950)]);
        assert_eq!(fired.len(), 1);
        assert!(fired[0].message.contains("95.0%"), "{}", fired[0].message);
        assert!(a.check(&[gpu(990)]).is_empty());
    }
}
