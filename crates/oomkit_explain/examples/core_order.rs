//! Orders `scan::CORES` for aho-corasick's Teddy search.
//!
//! Teddy (aho-corasick 1.1, "slim" form, up to 32 phrases) puts phrase `i`
//! in bucket `7 - i % 8` and, at every input position, tests the first three
//! bytes against each bucket's fingerprint: a set of low nibbles and a set
//! of high nibbles per byte, matched independently. A position that passes
//! for some bucket is a candidate, verified against that bucket's phrases
//! (about 10 ns each, measured); text is otherwise searched at memory speed.
//! So the order decides the speed: phrases that share first bytes belong in
//! one bucket. This counts the candidates an order makes on sample files
//! (the first `MB` MiB of each) and improves the order by swapping phrases
//! between buckets, keeping a swap when the worst file's rate (plus a tenth
//! of the sum) drops.
//!
//!   cargo run --release -p oomkit_explain --example core_order -- [--iters N] FILE...
//!
//! It prints each file's candidates per 1000 bytes before and after, then
//! the new order, one phrase per line (paste it into `CORES`). Pick sample
//! files from the logs to be sped up and check the order on others it was
//! not tuned on (bench/README.md, "explain: the search's phrase order").
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::indexing_slicing)]

use std::io::Read;

use oomkit_explain::scan::{CORES, teddy_candidates};

/// Candidates per 1000 bytes of `data`.
fn rate(order: &[&str], data: &[u8]) -> f64 {
    teddy_candidates(order, data) as f64 * 1000.0 / data.len().max(1) as f64
}

fn rates(order: &[&str], files: &[Vec<u8>]) -> Vec<f64> {
    files.iter().map(|d| rate(order, d)).collect()
}

fn score(r: &[f64]) -> f64 {
    r.iter().copied().fold(0.0, f64::max) + r.iter().sum::<f64>() * 0.1
}

fn main() -> std::io::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut iters = 3000usize;
    if args.first().map(String::as_str) == Some("--iters") && args.len() > 1 {
        iters = args[1].parse().unwrap_or(iters);
        args.drain(..2);
    }
    let mb: u64 = std::env::var("MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let mut files = Vec::new();
    for f in &args {
        let mut v = Vec::new();
        std::fs::File::open(f)?.take(mb << 20).read_to_end(&mut v)?;
        files.push(v);
    }
    if files.is_empty() {
        eprintln!("usage: core_order [--iters N] FILE...");
        std::process::exit(2);
    }
    let mut best: Vec<&str> = CORES.to_vec();
    let mut best_score = score(&rates(&best, &files));
    println!("before: {:?}", rates(&best, &files));
    // A fixed xorshift: the same files give the same order.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for _ in 0..iters {
        let (i, j) = (next(best.len()), next(best.len()));
        if i % 8 == j % 8 {
            continue;
        }
        let mut order = best.clone();
        order.swap(i, j);
        let s = score(&rates(&order, &files));
        if s < best_score {
            best_score = s;
            best = order;
        }
    }
    println!("after:  {:?}", rates(&best, &files));
    for phrase in best {
        println!("{phrase:?},");
    }
    Ok(())
}
