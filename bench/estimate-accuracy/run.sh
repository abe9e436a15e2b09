#!/usr/bin/env bash
# Prints the estimate accuracy tables: the measured rows
# (crates/oomkit_estimate/tests/accuracy.json) and the CPU oracle's rows
# (tests/oracle.json): per row measured, estimated and error, then the median
# error. Exit 1 if a row is out of tolerance (the same check CI runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo test -q -p oomkit_estimate --test accuracy -- --nocapture --test-threads 1 2>&1 |
    grep -E '^\||rows with|out of tolerance|^[A-Za-z0-9-]+: '
