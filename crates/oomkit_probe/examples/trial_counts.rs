//! Trial counts of `oomkit probe`'s search (the real `search::search`)
//! against the batch-size finders of Lightning (`power`, `binsearch`) and
//! accelerate (`find_executable_batch_size`), simulated from their
//! descriptions in `docs/reference/batch-size-probes.md` §3.1–3.2, over
//! every threshold `t` in 1..=8192 ("batch b fits iff b ≤ t").
//!
//! `cargo run --release -p oomkit_probe --example trial_counts` (or
//! `bash bench/probe/run.sh`) prints the markdown table in bench/README.md.
#![allow(clippy::print_stdout)]

use oomkit_probe::search::{Bounds, Verdict, search};

const MAX_T: u64 = 8192;

/// One finder: (trials, answer) for threshold `t`.
type Finder = fn(u64) -> (u32, Option<u64>);

fn oomkit(bounds: Bounds, t: u64) -> (u32, Option<u64>) {
    let a = search(bounds, |b| {
        if b <= t {
            Verdict::Fits
        } else {
            Verdict::TooBig
        }
    });
    (a.trials, a.largest_fit)
}

fn oomkit_cold(t: u64) -> (u32, Option<u64>) {
    oomkit(
        Bounds {
            min: 1,
            max: None,
            estimate: None,
        },
        t,
    )
}

fn oomkit_max(t: u64) -> (u32, Option<u64>) {
    oomkit(
        Bounds {
            min: 1,
            max: Some(MAX_T),
            estimate: None,
        },
        t,
    )
}

/// With an estimate off by `pct` percent (positive: too high).
fn oomkit_estimate(t: u64, pct: i64) -> (u32, Option<u64>) {
    let e = (t as f64 * (1.0 + pct as f64 / 100.0)).round().max(1.0) as u64;
    oomkit(
        Bounds {
            min: 1,
            max: Some(MAX_T),
            estimate: Some(e),
        },
        t,
    )
}

/// Lightning `mode="power"`: init_val=2; ×2 on success; on OOM halve and
/// stop if any trial succeeded (else keep halving); max_trials=25,
/// max_val=8192. The halved value after the OOM is returned without a run.
fn lightning_power(t: u64) -> (u32, Option<u64>) {
    let (mut b, mut trials, mut any) = (2u64, 0u32, false);
    while trials < 25 {
        trials += 1;
        if b <= t {
            any = true;
            if b >= MAX_T {
                return (trials, Some(b));
            }
            b *= 2;
        } else {
            b /= 2;
            if any || b == 0 {
                break;
            }
        }
    }
    (trials, (b > 0 && b <= t).then_some(b))
}

/// Lightning `mode="binsearch"`: doubles from init_val=2 until the first OOM
/// (`high`), then bisects between the last success (`low`, initially 1,
/// never run) and `high` until `high − low ≤ 1`; margin 0 here (it is a
/// final scaling, not a trial). max_trials=25, max_val=8192.
fn lightning_binsearch(t: u64) -> (u32, Option<u64>) {
    let (mut low, mut high): (u64, Option<u64>) = (1, None);
    let (mut b, mut trials) = (2u64, 0u32);
    while trials < 25 {
        trials += 1;
        if b <= t {
            low = b;
            match high {
                Some(h) => {
                    if h - low <= 1 {
                        break;
                    }
                    b = (h + low) / 2;
                }
                None => {
                    if b >= MAX_T {
                        break;
                    }
                    b *= 2;
                }
            }
        } else {
            high = Some(b);
            let mid = (b + low) / 2;
            if b - low <= 1 {
                break;
            }
            b = mid;
        }
    }
    // `low` starts at 1 without a run; every t here is ≥ 1, so 1 fits.
    (trials, Some(low))
}

/// accelerate `find_executable_batch_size(starting_batch_size=128)`: on OOM
/// retry at int(0.9·b) (since PR #3684); only ever decreases.
fn accelerate(t: u64) -> (u32, Option<u64>) {
    let (mut b, mut trials) = (128u64, 0u32);
    loop {
        if b == 0 {
            return (trials, None);
        }
        trials += 1;
        if b <= t {
            return (trials, Some(b));
        }
        b = b * 9 / 10;
    }
}

fn main() {
    let finders: Vec<(&str, Finder)> = vec![
        ("oomkit, no --max (double, then bisect)", oomkit_cold),
        ("oomkit --max 8192 (budgeted bisection)", oomkit_max),
        ("oomkit --estimate, exact", |t| oomkit_estimate(t, 0)),
        ("oomkit --estimate, 1 % high", |t| oomkit_estimate(t, 1)),
        ("oomkit --estimate, 10 % high", |t| oomkit_estimate(t, 10)),
        ("oomkit --estimate, 10 % low", |t| oomkit_estimate(t, -10)),
        ("oomkit --estimate, 2× high", |t| oomkit_estimate(t, 100)),
        ("Lightning power", lightning_power),
        ("Lightning binsearch", lightning_binsearch),
        ("accelerate (start 128, ×0.9)", accelerate),
    ];
    let ranges: [(u64, u64); 3] = [(1, 16), (17, 512), (513, MAX_T)];
    println!(
        "| finder | t 1–16: mean / max trials | t 17–512 | t 513–8192 | answer exact (all t) | answer ÷ t (mean) |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, f) in &finders {
        let mut cells = Vec::new();
        for (lo, hi) in ranges {
            let counts: Vec<u32> = (lo..=hi).map(|t| f(t).0).collect();
            let mean = counts.iter().map(|&c| f64::from(c)).sum::<f64>() / counts.len() as f64;
            let max = counts.iter().copied().max().unwrap_or(0);
            cells.push(format!("{mean:.1} / {max}"));
        }
        let (mut exact, mut ratio) = (0u64, 0.0f64);
        for t in 1..=MAX_T {
            let got = f(t).1.unwrap_or(0);
            if got == t {
                exact += 1;
            }
            ratio += got as f64 / t as f64;
        }
        println!(
            "| {name} | {} | {:.1} % | {:.3} |",
            cells.join(" | "),
            exact as f64 * 100.0 / MAX_T as f64,
            ratio / MAX_T as f64
        );
    }
    println!(
        "\nBound check: oomkit --max 8192 never exceeds ⌈log2(8192/1)⌉ + 1 = {} trials: {}",
        14,
        (1..=MAX_T).all(|t| oomkit_max(t).0 <= 14)
    );
}
