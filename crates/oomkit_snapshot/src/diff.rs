//! `oomkit snapshot diff A B`: what grew between two snapshots, by site. Each
//! side counts the `active_allocated` blocks at dump time (their rounded sizes,
//! as `_memory_viz.py compare` and `segsum` count allocated memory), grouped by
//! the first frame in user code ([`crate::analyze::site_label`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::Error;
use crate::analyze::site_label;
use crate::load::{BlockState, Snapshot};

/// One site in both snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SiteDiff {
    /// `file:line function`.
    pub frame: String,
    /// Bytes in A.
    pub a_bytes: u64,
    /// Bytes in B.
    pub b_bytes: u64,
    /// Allocations in A.
    pub a_count: u64,
    /// Allocations in B.
    pub b_count: u64,
    /// B − A (saturating at the i64 range).
    pub growth_bytes: i64,
}

/// One device in both snapshots.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceDiff {
    /// Device index.
    pub device: i64,
    /// Reserved bytes in A and B.
    pub reserved_bytes: [u64; 2],
    /// Allocated bytes in A and B.
    pub allocated_bytes: [u64; 2],
    /// Sites, most growth first (then largest B, then name).
    pub sites: Vec<SiteDiff>,
}

/// Per device and site: (reserved, allocated, site → (bytes, count)).
type Side = BTreeMap<i64, (u128, u128, BTreeMap<String, (u128, u64)>)>;

fn side(s: &Snapshot) -> Side {
    let mut out: Side = BTreeMap::new();
    for seg in &s.segments {
        let e = out.entry(seg.device).or_default();
        e.0 = e.0.saturating_add(u128::from(seg.total_size));
        for b in seg
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Allocated)
        {
            e.1 = e.1.saturating_add(u128::from(b.size));
            let site = e.2.entry(site_label(s, b.stack)).or_default();
            site.0 = site.0.saturating_add(u128::from(b.size));
            site.1 = site.1.saturating_add(1);
        }
    }
    out
}

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Compares two snapshots device by device (`device` limits it to one, and
/// must be a device of A or B, as `oomkit snapshot --device` must be one of
/// its snapshot's).
pub fn diff(a: &Snapshot, b: &Snapshot, device: Option<i64>) -> Result<Vec<DeviceDiff>, Error> {
    let (sa, sb) = (side(a), side(b));
    let devices: BTreeSet<i64> = sa.keys().chain(sb.keys()).copied().collect();
    if let Some(d) = device
        && !devices.contains(&d)
    {
        let have: Vec<String> = devices.iter().map(i64::to_string).collect();
        return Err(Error::NoDeviceInEither {
            device: d,
            available: if have.is_empty() {
                "none".to_string()
            } else {
                have.join(", ")
            },
        });
    }
    let empty = (0u128, 0u128, BTreeMap::new());
    Ok(devices
        .into_iter()
        .filter(|d| device.is_none_or(|x| x == *d))
        .map(|d| {
            let da = sa.get(&d).unwrap_or(&empty);
            let db = sb.get(&d).unwrap_or(&empty);
            let names: BTreeSet<&String> = da.2.keys().chain(db.2.keys()).collect();
            let mut sites: Vec<SiteDiff> = names
                .into_iter()
                .map(|n| {
                    let (ab, ac) = da.2.get(n).copied().unwrap_or_default();
                    let (bb, bc) = db.2.get(n).copied().unwrap_or_default();
                    let growth = i128::try_from(bb)
                        .unwrap_or(i128::MAX)
                        .saturating_sub(i128::try_from(ab).unwrap_or(i128::MAX));
                    SiteDiff {
                        frame: n.clone(),
                        a_bytes: sat(ab),
                        b_bytes: sat(bb),
                        a_count: ac,
                        b_count: bc,
                        growth_bytes: i64::try_from(growth).unwrap_or(if growth < 0 {
                            i64::MIN
                        } else {
                            i64::MAX
                        }),
                    }
                })
                .collect();
            sites.sort_by(|x, y| {
                y.growth_bytes
                    .cmp(&x.growth_bytes)
                    .then(y.b_bytes.cmp(&x.b_bytes))
                    .then_with(|| x.frame.cmp(&y.frame))
            });
            DeviceDiff {
                device: d,
                reserved_bytes: [sat(da.0), sat(db.0)],
                allocated_bytes: [sat(da.1), sat(db.1)],
                sites,
            }
        })
        .collect())
}
