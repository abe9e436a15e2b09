//! Growth and forecast on allocator-shaped memory.
//!
//! GPU memory under PyTorch is a staircase: the caching allocator reserves a
//! segment (`cudaMalloc`, 2 MiB granularity), holds it for many seconds, and
//! frees activations inside its own pool, where NVML never sees them. A leak
//! is a staircase that keeps climbing; a model load is a ramp that stops; a
//! sawtooth, evaluation spikes and a process that frees its cache go up and
//! come back down. Two numbers come out of a [`Series`]:
//!
//! - [`Series::trend`]: the Theil–Sen slope over the whole window (the median
//!   of the slopes between pairs of points; Sen 1968, "Estimates of the
//!   regression coefficient based on Kendall's tau", JASA 63(324):1379–1389),
//!   thinned to [`MAX_POINTS`] points. It is the "growth" figure: any sign,
//!   never a forecast by itself.
//! - [`Series::forecast`]: a [`Growth`] only when the series is leaking now,
//!   from a **step model**:
//!   1. *Steps* are new highs: a point above the highest point before it in
//!      the window by more than [`STEP_TOLERANCE`] and more than the series'
//!      own [`jitter`] (how far it falls back between samples). Memory that goes up and comes
//!      back (sawtooth, spikes, a cache that is emptied) sets no new high the
//!      second time; a leak sets one at every step; ties (the flat treads of
//!      a staircase) neither help nor hurt. A rise under [`MINOR_STEP`] of the
//!      steps beside it is jitter on a tread and not counted.
//!   2. *The regime* is the latest run of steps at a regular pace: walking
//!      back from the newest step, a gap between steps joins the run while it
//!      is within a factor [`PACE_FACTOR`] of the run's median gap. A load
//!      ramp (steps every sample) followed by a slow leak (a step a minute)
//!      is two regimes, and only the second is forecast.
//!   3. *A change point ends the regime*: when the time since the last step
//!      reaches [`PACE_FACTOR`] × the median gap, growth has stopped (a ramp
//!      that went flat loses its forecast after [`PACE_FACTOR`] sampling
//!      intervals); when memory drops back by half of what the regime gained
//!      (within the last median gap), it was freed.
//!   4. The regime must hold at least [`MIN_STEPS`] steps and pass the
//!      Mann–Kendall trend test with the tie correction (Kendall 1975, *Rank
//!      Correlation Methods*; Gilbert 1987, *Statistical Methods for
//!      Environmental Pollution Monitoring*, ch. 16: the variance of S less
//!      Σ t(t−1)(2t+5)/18 over groups of tied values) at one-sided 5 %
//!      (Z > [`MK_Z`]).
//!
//!   The rate is the regime's steps per unit time × their size: the rise
//!   from its first step to its last over the time between them.
//!   [`eta`] is free memory over that rate.
//!
//! A window keeps every sample it spans ([`Series::push`]): up to
//! [`MAX_KEPT`] at full resolution, then the older half is thinned by merging
//! neighbours (keeping the higher of two, so no step is lost), never cut.

use std::collections::VecDeque;

/// Fewest points a slope or a forecast is computed from.
pub const MIN_POINTS: usize = 5;
/// Most points the Theil–Sen slope and the Mann–Kendall test use (a window
/// is thinned evenly to this: 2 016 pairs).
pub const MAX_POINTS: usize = 64;
/// Most points a series keeps; past it, older points are merged in pairs.
pub const MAX_KEPT: usize = 4096;
/// A new high counts as a step only when it passes the previous high by more
/// than this: 1 MiB, half the CUDA allocation granularity (2 MiB pages), so
/// one real segment always counts and jitter of a few KiB never does.
pub const STEP_TOLERANCE: f64 = 1_048_576.0;
/// Fewest steps in a regime before it is forecast.
pub const MIN_STEPS: usize = 3;
/// How irregular a regime's pace may be, and how many median gaps without a
/// step end it.
pub const PACE_FACTOR: f64 = 3.0;
/// A rise below this share of the steps beside it is not counted as a step.
pub const MINOR_STEP: f64 = 0.25;
/// Newest gaps of a regime that set its reference pace.
const PACE_SAMPLE: usize = 8;
/// One-sided 5 % critical value of the standard normal (Mann–Kendall's Z).
pub const MK_Z: f64 = 1.645;

/// A robust slope over the window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trend {
    /// Median pairwise slope, bytes per second.
    pub slope: f64,
}

/// Evidence for a leak: the current growth regime.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Growth {
    /// The regime's rate, bytes per second (steps per second × step size).
    pub bytes_per_s: f64,
    /// Steps in the regime.
    pub steps: usize,
    /// Seconds since the regime's first step.
    pub regime_s: f64,
    /// Seconds since its latest step.
    pub since_last_step_s: f64,
    /// Mann–Kendall Z (tie-corrected) over the regime.
    pub mann_kendall_z: f64,
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
    let slope = median(&mut slopes)?;
    Some(Trend { slope })
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mid = v.len() / 2;
    let odd = v.len() % 2 == 1;
    // Linear-time selection: the slopes of 64 points are 2 016 values, every sample.
    let (low, upper, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if odd {
        return Some(upper);
    }
    let lower = low.iter().copied().max_by(f64::total_cmp)?;
    Some((lower + upper) / 2.0)
}

/// Mann–Kendall's Z with the tie correction (values within
/// [`STEP_TOLERANCE`] of each other are ties: the tread of a step).
pub fn mann_kendall_z(values: &[f64]) -> Option<f64> {
    let n = values.len();
    if n < 3 {
        return None;
    }
    let mut s: i64 = 0;
    for (i, a) in values.iter().enumerate() {
        for b in values.iter().skip(i.saturating_add(1)) {
            if b - a > STEP_TOLERANCE {
                s = s.saturating_add(1);
            } else if a - b > STEP_TOLERANCE {
                s = s.saturating_sub(1);
            }
        }
    }
    // Tie groups: runs of values within the tolerance once sorted.
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut group = 1.0f64;
    let mut anchor = sorted.first().copied().unwrap_or(0.0);
    for &v in sorted.iter().skip(1) {
        if v - anchor <= STEP_TOLERANCE {
            group += 1.0;
        } else {
            ties += group * (group - 1.0) * (2.0 * group + 5.0);
            group = 1.0;
            anchor = v;
        }
    }
    ties += group * (group - 1.0) * (2.0 * group + 5.0);
    let nf = n as f64;
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - ties) / 18.0;
    if var <= 0.0 {
        return Some(0.0);
    }
    let s = s as f64;
    // Continuity correction.
    let z = if s > 0.0 {
        (s - 1.0) / var.sqrt()
    } else if s < 0.0 {
        (s + 1.0) / var.sqrt()
    } else {
        0.0
    };
    Some(z)
}

/// The step model (module docs) on time-ordered points.
pub fn growth(points: &[(f64, f64)]) -> Option<Growth> {
    if points.len() < MIN_POINTS {
        return None;
    }
    let &(now, _) = points.last()?;
    // 1. Steps: new highs that clear the series' own jitter (index, time,
    //    high after the step).
    let tolerance = jitter(points).max(STEP_TOLERANCE);
    let mut high = points.first()?.1;
    let mut steps: Vec<(usize, f64, f64, f64)> = Vec::new();
    for (i, &(t, y)) in points.iter().enumerate().skip(1) {
        // Creep below the tolerance leaves the high where it was, so it
        // adds up to the next step.
        if y - high > tolerance {
            steps.push((i, t, y, y - high));
            high = y;
        }
    }
    // A rise much smaller than the steps beside it is jitter riding on a
    // tread (a neighbour's noise on the sum), not a step of its own.
    let sizes: Vec<f64> = steps.iter().map(|s| s.3).collect();
    let steps: Vec<(usize, f64, f64)> = steps
        .iter()
        .enumerate()
        .filter(|&(k, s)| {
            let before = k.checked_sub(1).and_then(|j| sizes.get(j));
            let after = sizes.get(k.saturating_add(1));
            let beside = match (before, after) {
                (Some(&a), Some(&b)) => a.min(b),
                (Some(&a), None) | (None, Some(&a)) => a,
                (None, None) => 0.0,
            };
            s.3 >= MINOR_STEP * beside
        })
        .map(|(_, &(i, t, y, _))| (i, t, y))
        .collect();
    if steps.len() < MIN_STEPS {
        return None;
    }
    // 2. The regime: walk back while the pace holds.
    // The pace a gap is compared with: the median of the newest gaps of the
    // run (at most PACE_SAMPLE of them, so the walk stays linear).
    let mut first = steps.len().checked_sub(1)?;
    let mut gaps: Vec<f64> = Vec::new();
    let mut reference: Option<f64> = None;
    while first > 0 {
        let (_, t_prev, _) = *steps.get(first.checked_sub(1)?)?;
        let (_, t_this, _) = *steps.get(first)?;
        let gap = t_this - t_prev;
        if let Some(m) = reference
            && (gap > PACE_FACTOR * m || gap * PACE_FACTOR < m)
        {
            break;
        }
        gaps.push(gap);
        if gaps.len() <= PACE_SAMPLE {
            reference = median(&mut gaps.clone());
        }
        first -= 1;
    }
    let count = steps.len().checked_sub(first)?;
    if count < MIN_STEPS {
        return None;
    }
    let pace = median(&mut gaps)?;
    let (i_first, t_first, y_first) = *steps.get(first)?;
    let (_, t_last, y_last) = *steps.last()?;
    // 3. Change points: growth stopped, or memory given back.
    let since_last = now - t_last;
    if pace <= 0.0 || since_last >= PACE_FACTOR * pace {
        return None;
    }
    let recent = points
        .iter()
        .rev()
        .take_while(|&&(t, _)| now - t <= pace)
        .map(|&(_, y)| y)
        .fold(f64::MIN, f64::max);
    let gained = y_last - y_first;
    if recent < y_last - 0.5 * gained.max(0.0) {
        return None;
    }
    let rate = gained / (t_last - t_first);
    if !(rate.is_finite() && rate > 0.0) {
        return None;
    }
    // 4. Mann–Kendall over the regime, from the level before its first step.
    let from = i_first.saturating_sub(1);
    let regime = points.get(from..)?;
    let thinned = thin(regime, MAX_POINTS);
    let values: Vec<f64> = thinned.iter().map(|&(_, y)| y).collect();
    let z = mann_kendall_z(&values)?;
    if z <= MK_Z {
        return None;
    }
    Some(Growth {
        bytes_per_s: rate,
        steps: count,
        regime_s: now - t_first,
        since_last_step_s: since_last,
        mann_kendall_z: z,
    })
}

/// How far the series falls back between consecutive points, at the 90th
/// percentile of its falls (0 for a series that never falls): a rise smaller
/// than that is jitter, not a step. A leak never falls; noise falls as far as
/// it rises; a sawtooth falls by its whole height, so it never steps.
pub fn jitter(points: &[(f64, f64)]) -> f64 {
    let mut falls: Vec<f64> = points
        .windows(2)
        .filter_map(|w| match w {
            [(_, a), (_, b)] if b < a => Some(a - b),
            _ => None,
        })
        .collect();
    if falls.is_empty() {
        return 0.0;
    }
    falls.sort_by(f64::total_cmp);
    let i = (falls.len().saturating_sub(1) as f64 * 0.9).round() as usize;
    falls.get(i).copied().unwrap_or(0.0)
}

/// Evenly spaced points, first and last included, at most `max`.
fn thin(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    let n = points.len();
    if n <= max {
        return points.to_vec();
    }
    let last = n.saturating_sub(1);
    let steps = max.saturating_sub(1).max(1);
    (0..max)
        .filter_map(|k| points.get(k.saturating_mul(last) / steps).copied())
        .collect()
}

/// Seconds until `free` bytes are used up at a leak's rate.
pub fn eta(free: u64, growth: Option<Growth>) -> Option<f64> {
    let g = growth?;
    (g.bytes_per_s > 0.0).then(|| free as f64 / g.bytes_per_s)
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
    /// Past [`MAX_KEPT`] points, the older half is merged in pairs (the
    /// later time, the higher value): old samples get coarser, the window's
    /// span stays what was asked.
    pub fn push(&mut self, t: f64, value: f64) {
        self.points.push_back((t, value));
        while self
            .points
            .front()
            .is_some_and(|&(t0, _)| t - t0 > self.window)
        {
            self.points.pop_front();
        }
        if self.points.len() > MAX_KEPT {
            let half = self.points.len() / 2;
            let mut merged: VecDeque<(f64, f64)> = VecDeque::with_capacity(MAX_KEPT);
            let mut old = self.points.drain(..half);
            // Keep the oldest point as is: it marks the window's start.
            if let Some(p) = old.next() {
                merged.push_back(p);
            }
            while let Some(a) = old.next() {
                match old.next() {
                    Some(b) => merged.push_back((b.0, a.1.max(b.1))),
                    None => merged.push_back(a),
                }
            }
            drop(old);
            merged.extend(self.points.drain(..));
            self.points = merged;
        }
    }

    /// The Theil–Sen slope over the window (thinned to [`MAX_POINTS`]).
    pub fn trend(&mut self) -> Option<Trend> {
        theil_sen(&thin(self.points.make_contiguous(), MAX_POINTS))
    }

    /// The leak forecast's evidence, when the series is leaking now.
    pub fn forecast(&mut self) -> Option<Growth> {
        growth(self.points.make_contiguous())
    }

    /// The values, oldest first (for sparklines).
    pub fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.points.iter().map(|&(_, v)| v)
    }

    /// Time of the oldest point kept.
    pub fn first_time(&self) -> Option<f64> {
        self.points.front().map(|&(t, _)| t)
    }

    /// Time of the latest point.
    pub fn last_time(&self) -> Option<f64> {
        self.points.back().map(|&(t, _)| t)
    }

    /// Points kept.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True when no point is kept.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1_048_576.0;

    fn series(f: impl Fn(f64) -> f64, n: usize, dt: f64) -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| {
                let t = i as f64 * dt;
                (t, f(t))
            })
            .collect()
    }

    #[test]
    fn exact_line() {
        let pts = series(|t| 100.0 * MIB + 5.0 * MIB * t, 10, 1.0);
        assert_eq!(theil_sen(&pts).unwrap().slope, 5.0 * MIB);
        let g = growth(&pts).unwrap();
        assert!((g.bytes_per_s - 5.0 * MIB).abs() < 1.0, "{g:?}");
        assert_eq!(eta((50.0 * MIB) as u64, Some(g)), Some(10.0));
    }

    #[test]
    fn staircase_is_a_leak_with_its_evidence() {
        // 20 MiB every 20 s, sampled every second: flat treads, regular risers.
        let pts = series(|t| 1e9 + 20.0 * MIB * (t / 20.0).floor(), 70, 1.0);
        let g = growth(&pts).expect("a staircase leaks");
        assert_eq!(g.steps, 3);
        assert!((g.bytes_per_s - MIB).abs() < 1e-6, "{g:?}");
        assert!((g.regime_s - 49.0).abs() < 1e-9, "{g:?}");
        assert!(g.mann_kendall_z > MK_Z);
    }

    #[test]
    fn a_ramp_that_stops_loses_its_forecast() {
        let ramp = |t: f64| 1e9 + 500.0 * MIB * t.min(10.0);
        assert!(growth(&series(ramp, 10, 1.0)).is_some(), "growing now");
        // Flat from t=10: gone once PACE_FACTOR intervals pass without a step.
        assert!(growth(&series(ramp, 14, 1.0)).is_none());
    }

    #[test]
    fn sawtooth_spikes_and_noise_are_not_leaks() {
        let saw = |t: f64| 1e9 + 400.0 * MIB * ((t % 4.0) / 4.0);
        let spikes = |t: f64| 1e9 + if t % 30.0 < 5.0 { 4e9 } else { 0.0 };
        let noise = |t: f64| 1e9 + 8.0 * MIB * ((t * 12.9898).sin() * 43758.5453).fract();
        for (name, f) in [
            ("saw", &saw as &dyn Fn(f64) -> f64),
            ("spikes", &spikes),
            ("noise", &noise),
        ] {
            for n in [20, 60, 200] {
                let pts = series(f, n, 1.0);
                for k in MIN_POINTS..=n {
                    assert!(growth(&pts[..k]).is_none(), "{name} at {k}");
                }
            }
        }
    }

    #[test]
    fn too_few_points() {
        assert_eq!(theil_sen(&[(0.0, 1.0), (1.0, 2.0)]), None);
        assert_eq!(theil_sen(&[(1.0, 1.0); 6]), None);
        assert_eq!(growth(&[(1.0, 1.0); 3]), None);
    }

    #[test]
    fn mann_kendall_ties() {
        // All tied: no trend, no division by zero.
        assert_eq!(mann_kendall_z(&[5.0; 10]), Some(0.0));
        let up: Vec<f64> = (0..10).map(|i| i as f64 * 10.0 * MIB).collect();
        assert!(mann_kendall_z(&up).unwrap() > 3.0);
        let down: Vec<f64> = up.iter().rev().copied().collect();
        assert!(mann_kendall_z(&down).unwrap() < -3.0);
    }

    #[test]
    fn window_is_honoured_past_the_point_cap() {
        // 20 000 samples at 50 ms in a 1000 s window: kept all the way back.
        let mut s = Series::new(1000.0);
        for i in 0..20_000 {
            let t = i as f64 * 0.05;
            s.push(t, 1e9 + 3.0 * MIB * t);
        }
        assert!(s.len() <= MAX_KEPT, "{}", s.len());
        assert_eq!(s.first_time(), Some(0.0));
        let mut short = Series::new(10.0);
        for i in 0..1000 {
            short.push(i as f64 * 0.1, 3.0 * MIB * i as f64);
        }
        assert!(short.len() <= 101);
        assert!((short.trend().unwrap().slope - 30.0 * MIB).abs() < 1e-3);
        assert!((s.forecast().unwrap().bytes_per_s - 3.0 * MIB).abs() < 0.01 * MIB);
    }
}
