//! The search for the largest batch that fits, pure: it asks an oracle
//! (`FnMut(batch) -> Verdict`) and never runs anything itself, so it is
//! unit-tested with closures ("fits iff batch ≤ 37").
//!
//! Three shapes, all of which keep two facts — the largest batch that fit
//! (`lo`) and the smallest that did not (`hi`) — and stop when they are
//! neighbours:
//!
//! - **Unbounded (no `--max`)**: try `min`, then double until the first
//!   OOM, then bisect between the largest success and the smallest OOM
//!   (Lightning's `binsearch`, see `docs/reference/batch-size-probes.md`
//!   §3.1). For a threshold `t ≥ min` that is `2·⌊log2(t/min)⌋ + 2` trials
//!   at most. The doubling stops at [`DEFAULT_MAX`]: a command that never
//!   runs out of memory costs `log2(DEFAULT_MAX/min) + 1` trials, not 65.
//! - **Bounded (`--max`)**: try `min` (so "even the minimum does not fit" costs
//!   one trial), then each trial is the *smallest* batch that still keeps the
//!   worst case within `1 + ⌈log2(max − min + 1)⌉` trials — the information
//!   bound for an exact answer, which is `⌈log2(max/min)⌉ + 1` for `min = 1`.
//!   With no slack in the budget this is plain bisection; where the budget
//!   has slack the search grows from below (smaller batches are faster and
//!   safer).
//! - **From an estimate**: try the estimate `e`, then step away from it (up
//!   after a success, down after an OOM) by 1, 2, then `max(4, e/32)`
//!   doubling, and bisect the last gap. An estimate that is exact or off by
//!   one costs 2–3 trials; one off by 10 % about `log2(e/10) + 5`.

/// Where the doubling of an unbounded search stops (`--max`'s default):
/// 2^16, far above any per-device batch of samples (the largest in PyTorch
/// Lightning's and accelerate's batch-size finders' examples are in the
/// hundreds), and reached from 1 in 17 trials. A command that still fits
/// there gets "no out-of-memory up to 65536", not a bisection of 2^64.
pub const DEFAULT_MAX: u64 = 1 << 16;

/// What one trial said about a batch size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It ran.
    Fits,
    /// It ran out of memory.
    TooBig,
    /// Anything else (a crash, a timeout, Ctrl-C): stop searching.
    Stop,
}

/// Where to search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Smallest batch to try (≥ 1).
    pub min: u64,
    /// Largest batch to try (bisection within `[min, max]`); `None` doubles
    /// from `min` up to [`DEFAULT_MAX`].
    pub max: Option<u64>,
    /// Start here and search around it (clamped into `[min, max]`).
    pub estimate: Option<u64>,
}

/// What the search learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Answer {
    /// The largest batch that fit.
    pub largest_fit: Option<u64>,
    /// The smallest batch that ran out of memory.
    pub smallest_too_big: Option<u64>,
    /// A trial said [`Verdict::Stop`]: the answer is what was learned so far.
    pub stopped: bool,
    /// Trials asked of the oracle.
    pub trials: u32,
}

impl Answer {
    /// The search finished with an exact answer: the largest fit's neighbour
    /// ran out of memory, the largest fit is `max`, or `min` ran out of memory.
    pub fn is_exact(&self, min: u64, max: Option<u64>) -> bool {
        !self.stopped
            && match (self.largest_fit, self.smallest_too_big) {
                (Some(lo), Some(hi)) => hi == lo.saturating_add(1),
                (Some(lo), None) => Some(lo) == max,
                (None, Some(hi)) => hi <= min,
                (None, None) => false,
            }
    }

    /// No batch up to the search's top ([`Bounds::top`]) ran out of memory:
    /// the answer is only a lower bound.
    pub fn no_oom_up_to_top(&self, bounds: Bounds) -> bool {
        !self.stopped && self.smallest_too_big.is_none() && self.largest_fit == Some(bounds.top())
    }
}

impl Bounds {
    /// The largest batch the search may try: `max`, else [`DEFAULT_MAX`]
    /// (never below `min`).
    pub fn top(&self) -> u64 {
        self.max.unwrap_or(DEFAULT_MAX).max(self.min.max(1))
    }
}

/// `⌈log2(n)⌉` for `n ≥ 1` (0 for 0 and 1).
pub fn ceil_log2(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        u64::BITS - (n - 1).leading_zeros()
    }
}

/// The worst-case number of trials of a bounded cold search:
/// `1 + ⌈log2(max − min + 1)⌉`.
pub fn bounded_budget(min: u64, max: u64) -> u32 {
    1 + ceil_log2(max.saturating_sub(min).saturating_add(1))
}

/// Runs the search, asking `oracle` one batch size at a time.
pub fn search(bounds: Bounds, mut oracle: impl FnMut(u64) -> Verdict) -> Answer {
    let min = bounds.min.max(1);
    let max = bounds.max.map(|m| m.max(min));
    let mut s = State {
        answer: Answer::default(),
        max,
        cap: bounds.top(),
    };
    let mut ask = |s: &mut State, b: u64| -> bool {
        s.answer.trials = s.answer.trials.saturating_add(1);
        match oracle(b) {
            Verdict::Fits => {
                s.answer.largest_fit = Some(b);
                true
            }
            Verdict::TooBig => {
                s.answer.smallest_too_big = Some(b);
                true
            }
            Verdict::Stop => {
                s.answer.stopped = true;
                false
            }
        }
    };
    match bounds.estimate {
        Some(e) => {
            let e = e.clamp(min, s.cap);
            if !ask(&mut s, e) {
                return s.answer;
            }
            if !gallop(&mut s, e, min, &mut ask) {
                return s.answer;
            }
        }
        None => {
            if !ask(&mut s, min) || s.answer.largest_fit.is_none() {
                return s.answer;
            }
        }
    }
    // The budget that keeps a bounded cold search optimal; the estimate's
    // gallop already spent its own trials, so after it we simply bisect.
    let budget = match (bounds.estimate, max) {
        (None, Some(m)) => Some(bounded_budget(min, m)),
        _ => None,
    };
    while let Some(b) = s.next(budget) {
        if !ask(&mut s, b) {
            break;
        }
    }
    s.answer
}

struct State {
    answer: Answer,
    max: Option<u64>,
    /// Where unbounded doubling stops ([`Bounds::top`]).
    cap: u64,
}

impl State {
    /// The exclusive upper end of what may still fit: the smallest OOM, or
    /// `max + 1`, or `None` while unbounded.
    fn hi(&self) -> Option<u64> {
        self.answer
            .smallest_too_big
            .or_else(|| self.max.map(|m| m.saturating_add(1)))
    }

    /// The next batch to try, or `None` when the answer is exact.
    fn next(&self, budget: Option<u32>) -> Option<u64> {
        let lo = self.answer.largest_fit?;
        let Some(hi) = self.hi() else {
            // Unbounded growth: double, up to the cap.
            return (lo < self.cap).then(|| lo.saturating_mul(2).max(lo + 1).min(self.cap));
        };
        if hi <= lo.saturating_add(1) {
            return None;
        }
        let mid = lo + (hi - lo) / 2;
        let Some(budget) = budget else {
            return Some(mid);
        };
        // Trials left; the invariant hi − lo ≤ 2^left holds (see the module docs).
        let left = budget.saturating_sub(self.answer.trials);
        let half = 1u64.checked_shl(left.saturating_sub(1)).unwrap_or(u64::MAX);
        let lowest = hi.saturating_sub(half).max(lo + 1);
        let highest = lo.saturating_add(half).min(hi - 1);
        if lowest > highest {
            // Cannot happen while the invariant holds; bisect to stay correct.
            return Some(mid);
        }
        Some(lo.saturating_mul(2).clamp(lowest, highest))
    }
}

/// From the estimate `e`, step away until the answer is bracketed (or a
/// bound is reached): by 1 and 2 first — an estimate that is exact or off by
/// one costs 2–3 trials — then by `max(4, e/32)` doubling, because estimates
/// err by a fraction of the batch (≈3 % steps reach a 10 % error in a few
/// trials instead of 2·log2 of it). Returns false when a trial said stop.
fn gallop(s: &mut State, e: u64, min: u64, ask: &mut impl FnMut(&mut State, u64) -> bool) -> bool {
    let jump = (e / 32).max(4);
    let offset = |k: u32| -> u64 {
        match k {
            0 => 1,
            1 => 2,
            _ => jump.saturating_mul(1u64.checked_shl(k - 2).unwrap_or(u64::MAX)),
        }
    };
    let up = s.answer.largest_fit == Some(e);
    for k in 0.. {
        let b = if up {
            let b = e.saturating_add(offset(k)).min(s.cap);
            if s.answer.largest_fit.is_some_and(|lo| b <= lo) || s.hi().is_some_and(|hi| b >= hi) {
                // Past the bound: bisect what is left.
                return true;
            }
            b
        } else {
            if s.answer.smallest_too_big.is_none_or(|hi| hi <= min) {
                return true;
            }
            e.saturating_sub(offset(k)).max(min)
        };
        if !ask(s, b) {
            return false;
        }
        let bracketed = if up {
            s.answer.smallest_too_big.is_some()
        } else {
            s.answer.largest_fit.is_some()
        };
        if bracketed {
            return true;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against "fits iff batch ≤ t" and checks the answer.
    fn run(bounds: Bounds, t: u64) -> Answer {
        let mut seen = Vec::new();
        let a = search(bounds, |b| {
            assert!(b >= bounds.min, "tried {b} below min");
            if let Some(m) = bounds.max {
                assert!(b <= m, "tried {b} above max {m}");
            }
            assert!(!seen.contains(&b), "tried {b} twice");
            seen.push(b);
            if b <= t {
                Verdict::Fits
            } else {
                Verdict::TooBig
            }
        });
        let want = match bounds.max {
            _ if t < bounds.min => None,
            Some(m) => Some(t.min(m)),
            None => Some(t),
        };
        assert_eq!(a.largest_fit, want, "threshold {t}, {bounds:?}");
        assert!(
            a.is_exact(bounds.min, bounds.max),
            "threshold {t}, {bounds:?}: {a:?}"
        );
        a
    }

    #[test]
    fn bounded_search_is_exact_within_log2_max_over_min_plus_one() {
        for max in [1u64, 2, 3, 7, 8, 100, 1000, 1024, 4096] {
            let bound = ceil_log2(max) + 1;
            for t in 0..=max + 3 {
                let a = run(
                    Bounds {
                        min: 1,
                        max: Some(max),
                        estimate: None,
                    },
                    t,
                );
                assert!(
                    a.trials <= bound,
                    "max {max}, threshold {t}: {} trials > {bound}",
                    a.trials
                );
            }
        }
    }

    #[test]
    fn bounded_search_with_a_larger_min_keeps_the_information_bound() {
        for (min, max) in [(2u64, 8u64), (8, 64), (16, 1000), (5, 6), (7, 7)] {
            for t in 0..=max + 2 {
                let a = run(
                    Bounds {
                        min,
                        max: Some(max),
                        estimate: None,
                    },
                    t,
                );
                assert!(a.trials <= bounded_budget(min, max), "{min}..{max} t={t}");
            }
        }
    }

    #[test]
    fn unbounded_search_doubles_then_bisects() {
        for t in 1..=5000u64 {
            let a = run(
                Bounds {
                    min: 1,
                    max: None,
                    estimate: None,
                },
                t,
            );
            let k = u64::BITS - 1 - t.leading_zeros(); // ⌊log2 t⌋
            assert!(a.trials <= 2 * k + 2, "t={t}: {} trials", a.trials);
        }
    }

    #[test]
    fn unbounded_search_stops_after_one_trial_when_min_does_not_fit() {
        let a = run(
            Bounds {
                min: 4,
                max: None,
                estimate: None,
            },
            3,
        );
        assert_eq!(
            (a.trials, a.largest_fit, a.smallest_too_big),
            (1, None, Some(4))
        );
    }

    #[test]
    fn an_exact_estimate_costs_two_trials_and_one_off_at_most_three() {
        for t in [1u64, 2, 5, 37, 100, 999] {
            for (e, most) in [(t, 2), (t + 1, 2), (t.saturating_sub(1).max(1), 3)] {
                let a = run(
                    Bounds {
                        min: 1,
                        max: Some(1024),
                        estimate: Some(e),
                    },
                    t,
                );
                assert!(a.trials <= most, "t={t} e={e}: {} trials", a.trials);
            }
        }
    }

    #[test]
    fn a_wrong_estimate_still_finds_the_exact_answer() {
        for t in 0..=300u64 {
            for e in [1u64, 3, 17, 64, 150, 299, 300, 1000] {
                let a = run(
                    Bounds {
                        min: 1,
                        max: Some(512),
                        estimate: Some(e),
                    },
                    t,
                );
                // Gallop 2·log2|t−e| + bisect: never worse than ~3 log2 of the range.
                assert!(a.trials <= 3 * ceil_log2(512) + 2, "t={t} e={e}");
            }
        }
        for t in [0u64, 1, 9, 10_000] {
            run(
                Bounds {
                    min: 1,
                    max: None,
                    estimate: Some(50),
                },
                t,
            );
        }
    }

    #[test]
    fn a_stop_ends_the_search_with_what_was_learned() {
        let a = search(
            Bounds {
                min: 1,
                max: None,
                estimate: None,
            },
            |b| match b {
                1 | 2 => Verdict::Fits,
                _ => Verdict::Stop,
            },
        );
        assert!(a.stopped);
        assert_eq!(
            (a.largest_fit, a.smallest_too_big, a.trials),
            (Some(2), None, 3)
        );
        assert!(!a.is_exact(1, None));
    }

    #[test]
    fn unbounded_doubling_stops_at_the_default_max() {
        let mut tried = Vec::new();
        let bounds = Bounds {
            min: 1,
            max: None,
            estimate: None,
        };
        let a = search(bounds, |b| {
            tried.push(b);
            Verdict::Fits
        });
        assert_eq!(a.largest_fit, Some(DEFAULT_MAX));
        assert_eq!(a.trials, 17);
        assert_eq!(tried.last(), Some(&DEFAULT_MAX));
        assert!(a.no_oom_up_to_top(bounds));
        assert!(!a.is_exact(1, None));
        // From an estimate too, and from a min above the default.
        for bounds in [
            Bounds {
                min: 1,
                max: None,
                estimate: Some(60_000),
            },
            Bounds {
                min: 100_000,
                max: None,
                estimate: None,
            },
        ] {
            let a = search(bounds, |b| {
                assert!(b <= bounds.top(), "{b}");
                Verdict::Fits
            });
            assert_eq!(a.largest_fit, Some(bounds.top()));
            assert!(a.no_oom_up_to_top(bounds));
        }
    }

    #[test]
    fn ceil_log2_of_small_numbers() {
        let got: Vec<u32> = [0u64, 1, 2, 3, 4, 5, 8, 9, 1024, 1025]
            .iter()
            .map(|&n| ceil_log2(n))
            .collect();
        assert_eq!(got, [0, 0, 1, 2, 2, 3, 3, 4, 10, 11]);
    }
}
