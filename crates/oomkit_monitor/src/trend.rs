//! Growth rate and forecast: a robust slope over a sliding window.
//!
//! Memory in a training run is a staircase: the allocator grabs a block,
//! holds it, frees a cached one. A least-squares line through that jumps with
//! every step; the Theil–Sen estimator — the median of the slopes between all
//! pairs of points (Sen 1968, "Estimates of the regression coefficient based
//! on Kendall's tau", JASA 63(324):1379–1389) — ignores up to ~29 % of
//! outlying points and is what leak detectors in the wild use for the same
//! reason. Pairs cost O(n²), so a window is thinned to at most
//! [`MAX_POINTS`] evenly spaced points (2 016 pairs).
//!
//! "Steady" growth — the only kind a forecast is given for — means at least
//! [`STEADY_AGREEMENT`] of the pairwise slopes share the median's sign: a
//! process that allocated once and stays flat has slope 0; one that goes up
//! and down has a split vote; one that leaks has nearly every pair rising.

use std::collections::VecDeque;

/// Fewest points a slope is computed from.
pub const MIN_POINTS: usize = 5;
/// Most points a slope is computed from (the window is thinned evenly).
pub const MAX_POINTS: usize = 64;
/// Share of pairwise slopes that must agree with the median's sign.
pub const STEADY_AGREEMENT: f64 = 0.75;
/// Most points a series keeps, whatever the window (bounded memory at any rate).
pub const MAX_KEPT: usize = 4096;

/// A robust slope and whether it is steady.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trend {
    /// Median pairwise slope, bytes per second.
    pub slope: f64,
    /// True when the slope is nonzero and [`STEADY_AGREEMENT`] of pairs agree.
    pub steady: bool,
}

/// Theil–Sen slope of `(t seconds, bytes)` points; `None` below
/// [`MIN_POINTS`] points or when all points share one time.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<Trend> {
    if points.len() < MIN_POINTS {
        return None;
    }
    let mut slopes = Vec::with_capacity(points.len().saturating_mul(points.len()) / 2);
    for (i, &(t1, y1)) in points.iter().enumerate() {
        for &(t2, y2) in points.iter().skip(i.saturating_add(1)) {
            let dt = t2 - t1;
            if dt > 0.0 {
                slopes.push((y2 - y1) / dt);
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    slopes.sort_by(f64::total_cmp);
    let n = slopes.len();
    let mid = n / 2;
    let median = if n % 2 == 1 {
        *slopes.get(mid)?
    } else {
        (*slopes.get(mid.checked_sub(1)?)? + *slopes.get(mid)?) / 2.0
    };
    let agree = if median > 0.0 {
        slopes.iter().filter(|s| **s > 0.0).count()
    } else if median < 0.0 {
        slopes.iter().filter(|s| **s < 0.0).count()
    } else {
        0
    };
    let steady = median != 0.0 && agree as f64 >= STEADY_AGREEMENT * n as f64;
    Some(Trend {
        slope: median,
        steady,
    })
}

/// Seconds until `free` bytes are used up at `trend`, when it is steady and rising.
pub fn eta(free: u64, trend: Option<Trend>) -> Option<f64> {
    let t = trend?;
    (t.steady && t.slope > 0.0).then(|| free as f64 / t.slope)
}

/// A time series of one quantity over a sliding window.
#[derive(Clone, Debug)]
pub struct Series {
    points: VecDeque<(f64, f64)>,
    window: f64,
}

impl Series {
    /// An empty series keeping `window_s` seconds.
    pub fn new(window_s: f64) -> Self {
        Series {
            points: VecDeque::new(),
            window: window_s,
        }
    }

    /// Adds a point at `t` seconds and drops those older than the window.
    pub fn push(&mut self, t: f64, value: f64) {
        self.points.push_back((t, value));
        while self
            .points
            .front()
            .is_some_and(|&(t0, _)| t - t0 > self.window)
            || self.points.len() > MAX_KEPT
        {
            self.points.pop_front();
        }
    }

    /// The trend over the window (thinned to [`MAX_POINTS`]).
    pub fn trend(&self) -> Option<Trend> {
        let n = self.points.len();
        if n <= MAX_POINTS {
            let pts: Vec<(f64, f64)> = self.points.iter().copied().collect();
            return theil_sen(&pts);
        }
        // Evenly spaced indices, first and last included.
        let last = n.saturating_sub(1);
        let steps = MAX_POINTS.saturating_sub(1);
        let pts: Vec<(f64, f64)> = (0..MAX_POINTS)
            .filter_map(|k| {
                let i = k.saturating_mul(last) / steps.max(1);
                self.points.get(i).copied()
            })
            .collect();
        theil_sen(&pts)
    }

    /// The most recent values, oldest first (for sparklines).
    pub fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.points.iter().map(|&(_, v)| v)
    }

    /// Time of the latest point.
    pub fn last_time(&self) -> Option<f64> {
        self.points.back().map(|&(t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_line() {
        let pts: Vec<_> = (0..10)
            .map(|i| (i as f64, 100.0 + 5.0 * i as f64))
            .collect();
        let t = theil_sen(&pts).unwrap();
        assert_eq!(t.slope, 5.0);
        assert!(t.steady);
        assert_eq!(eta(50, Some(t)), Some(10.0));
    }

    #[test]
    fn outliers_ignored() {
        // A leak of 1 MB/s with two allocator spikes and one drop.
        let mut pts: Vec<_> = (0..20).map(|i| (i as f64, 1e6 * i as f64)).collect();
        pts[5].1 += 5e8;
        pts[12].1 += 7e8;
        pts[16].1 -= 3e8;
        let t = theil_sen(&pts).unwrap();
        assert!((t.slope - 1e6).abs() < 1e3, "{t:?}");
        assert!(t.steady);
    }

    #[test]
    fn flat_and_noisy_are_not_steady() {
        let flat: Vec<_> = (0..10).map(|i| (i as f64, 42.0)).collect();
        let t = theil_sen(&flat).unwrap();
        assert_eq!(t.slope, 0.0);
        assert!(!t.steady);
        assert_eq!(eta(100, Some(t)), None);
        let saw: Vec<_> = (0..20)
            .map(|i| (i as f64, if i % 2 == 0 { 0.0 } else { 1e9 }))
            .collect();
        assert!(!theil_sen(&saw).unwrap().steady);
    }

    #[test]
    fn too_few_points() {
        assert_eq!(theil_sen(&[(0.0, 1.0), (1.0, 2.0)]), None);
        assert_eq!(theil_sen(&[(1.0, 1.0); 6]), None);
    }

    #[test]
    fn window_and_thinning() {
        let mut s = Series::new(10.0);
        for i in 0..1000 {
            s.push(i as f64 * 0.1, 3.0 * i as f64);
        }
        assert!(s.values().count() <= 101);
        let t = s.trend().unwrap();
        assert!((t.slope - 30.0).abs() < 1e-6);
        let mut big = Series::new(1e9);
        for i in 0..10_000 {
            big.push(i as f64, i as f64);
        }
        assert_eq!(big.values().count(), MAX_KEPT);
    }
}
