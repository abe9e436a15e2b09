//! Steady growth, warm-up and bounded windows, from one series of figures
//! (bytes still alive from earlier steps, or autograd nodes a holder reaches)
//! taken at consecutive step boundaries.
//!
//! - **Growing** (a leak): the figure still rises at the end — the last
//!   third of the steps (at least 2) adds up to more than zero — and it rose
//!   in at least half of the steps of the last two thirds (at least 3). A
//!   leak that stores every second step qualifies; a figure that jumps once
//!   and stays does not.
//! - **Plateau**: it rose and then stopped for the last third of the steps
//!   (at least 2): warm-up (optimizer state made at the first step, lazy
//!   modules, a cache that filled) or a bounded window (a `deque(maxlen=k)`
//!   of the last `k` steps, `k` under two thirds of the steps).
//! - **Flat**: anything else (constant, falling, or up and down: a cache
//!   cleared every few steps).
//!
//! A window longer than two thirds of the steps is still filling at the end
//! and reads as growth: run more steps (`--steps`) to see it stop.

/// What a series does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    /// It keeps rising: `per_step` is its average rise over the last two
    /// thirds of the steps (at least 1).
    Growing {
        /// Average rise per step.
        per_step: u64,
    },
    /// It rose, then stopped.
    Plateau,
    /// No rise that lasts.
    Flat,
}

/// Fewest figures classified; shorter series are [`Trend::Flat`].
pub const MIN_POINTS: usize = 4;

/// Classifies a series taken at consecutive step boundaries.
pub fn classify(series: &[u64]) -> Trend {
    let n = series.len();
    if n < MIN_POINTS {
        return Trend::Flat;
    }
    let steps: Vec<i128> = series
        .windows(2)
        .map(|w| match w {
            [a, b] => i128::from(*b) - i128::from(*a),
            _ => 0,
        })
        .collect();
    let m = steps.len();
    let tail = (m / 3).max(2).min(m);
    let body = (m * 2 / 3).max(3).min(m);
    let tail_sum: i128 = steps.iter().skip(m - tail).sum();
    let first = series.first().copied().unwrap_or(0);
    let last = series.last().copied().unwrap_or(0);
    if tail_sum <= 0 {
        return if last > first {
            Trend::Plateau
        } else {
            Trend::Flat
        };
    }
    let rising = steps.iter().skip(m - body).filter(|&&d| d > 0).count();
    if rising * 2 < body {
        return Trend::Flat;
    }
    let start = series.get(n - 1 - body).copied().unwrap_or(first);
    let rise = last.saturating_sub(start);
    let per_step = rise / u64::try_from(body).unwrap_or(1).max(1);
    if per_step == 0 {
        return Trend::Flat;
    }
    Trend::Growing { per_step }
}

/// What one step made and still holds at its end, when it rises at **every**
/// step of the last two thirds (at least 4): a tensor replaced each step by a
/// bigger one (`x = torch.cat([x, new])`), where nothing outlives a step but
/// the one tensor keeps growing. Stricter than [`classify`], since this
/// step's memory also varies with the batch (a random size rises four times
/// in a row about once in 120 runs).
pub fn classify_replaced(series: &[u64]) -> Trend {
    let n = series.len();
    let body = (n.saturating_sub(1) * 2 / 3).max(4);
    if n < body + 1 {
        return Trend::Flat;
    }
    let tail = series.iter().skip(n - body - 1);
    let pairs: Vec<(u64, u64)> = tail
        .clone()
        .zip(tail.skip(1))
        .map(|(a, b)| (*a, *b))
        .collect();
    if pairs.iter().any(|(a, b)| b <= a) {
        return Trend::Flat;
    }
    let (first, last) = match (pairs.first(), pairs.last()) {
        (Some(f), Some(l)) => (f.0, l.1),
        _ => return Trend::Flat,
    };
    let per_step = (last - first) / u64::try_from(pairs.len()).unwrap_or(1).max(1);
    if per_step == 0 {
        return Trend::Flat;
    }
    Trend::Growing { per_step }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grows(s: &[u64]) -> Option<u64> {
        match classify(s) {
            Trend::Growing { per_step } => Some(per_step),
            _ => None,
        }
    }

    #[test]
    fn steady_growth_is_a_leak_with_its_rate() {
        let s: Vec<u64> = (0..10).map(|i| i * 4096).collect();
        assert_eq!(grows(&s), Some(4096));
        // Stored every second step (a log interval): still a leak.
        let s = [0, 0, 100, 100, 200, 200, 300, 300, 400, 400, 500];
        assert_eq!(grows(&s), Some(50));
        // Setup first, then growth.
        let s = [0, 5000, 5000, 5010, 5020, 5030, 5040, 5050, 5060, 5070];
        assert_eq!(grows(&s), Some(10));
    }

    #[test]
    fn warm_up_that_stops_is_a_plateau() {
        // Optimizer state made at the first step, then nothing.
        let s = [0, 0, 8192, 8192, 8192, 8192, 8192, 8192, 8192, 8192];
        assert_eq!(classify(&s), Trend::Plateau);
        // A cache filling for four steps.
        let s = [0, 10, 20, 30, 40, 40, 40, 40, 40, 40];
        assert_eq!(classify(&s), Trend::Plateau);
    }

    #[test]
    fn a_bounded_window_plateaus() {
        // deque(maxlen=3): three steps kept, each step replacing the oldest.
        let s = [0, 100, 200, 300, 300, 300, 300, 300, 300, 300];
        assert_eq!(classify(&s), Trend::Plateau);
        // A window of 5 still shows its plateau in 10 steps.
        let s = [0, 100, 200, 300, 400, 500, 500, 500, 500, 500];
        assert_eq!(classify(&s), Trend::Plateau);
    }

    #[test]
    fn create_graph_pile_up_grows_in_nodes_with_few_bytes() {
        // Autograd nodes a holder reaches when each step's graph of a
        // gradient penalty built with create_graph=True is kept.
        let nodes = [0, 37, 74, 111, 148, 185, 222, 259, 296, 333];
        assert_eq!(grows(&nodes), Some(37));
    }

    #[test]
    fn flat_falling_and_sawtooth_are_not_leaks() {
        assert_eq!(classify(&[7; 10]), Trend::Flat);
        assert_eq!(classify(&[90, 80, 70, 60, 50, 40]), Trend::Flat);
        // A cache cleared every third step.
        let s = [0, 10, 20, 0, 10, 20, 0, 10, 20, 0];
        assert_eq!(classify(&s), Trend::Flat);
        // Too short to tell.
        assert_eq!(classify(&[0, 1, 2]), Trend::Flat);
        assert_eq!(classify(&[]), Trend::Flat);
    }

    #[test]
    fn a_tensor_replaced_by_a_bigger_one_every_step_grows() {
        let s: Vec<u64> = (1..=9).map(|i| i * 16384).collect();
        assert_eq!(classify_replaced(&s), Trend::Growing { per_step: 16384 });
        // Batches of varying size: not every step rises.
        let s = [300, 500, 400, 600, 650, 500, 700, 800, 900];
        assert_eq!(classify_replaced(&s), Trend::Flat);
        assert_eq!(classify_replaced(&[1, 2, 3, 4]), Trend::Flat);
        assert_eq!(classify_replaced(&[5; 9]), Trend::Flat);
    }

    #[test]
    fn huge_figures_do_not_overflow() {
        let s = [0, u64::MAX / 4, u64::MAX / 2, u64::MAX / 4 * 3, u64::MAX];
        assert!(grows(&s).is_some());
        let s = [u64::MAX, 0, u64::MAX, 0, u64::MAX];
        assert_eq!(classify(&s), Trend::Flat);
    }
}
