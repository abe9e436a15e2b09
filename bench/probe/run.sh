#!/usr/bin/env bash
# Trial counts of `oomkit probe`'s search against Lightning's `power` and
# `binsearch` modes and accelerate's `find_executable_batch_size`, for every
# threshold 1..=8192 ("batch b fits iff b <= t"). oomkit's numbers come from
# the real search (crates/oomkit_probe/src/search.rs); the others are
# simulated from docs/reference/batch-size-probes.md §3.1-3.2.
#
#   bash bench/probe/run.sh          # prints the markdown table
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo run --release --locked -q -p oomkit_probe --example trial_counts
