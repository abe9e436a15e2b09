#!/usr/bin/env bash
# Prints the estimate accuracy tables: the measured rows
# (crates/oomkit_estimate/tests/accuracy.json), the ZeRO/FSDP rows
# (tests/accuracy_sharded.json, "(check)" marks rows kept out of calibration)
# and the CPU oracle's rows (tests/oracle.json): per row measured, estimated and error, then the median
# error; then the llama.cpp table (tests/llamacpp_logs.json: buffer sizes
# llama.cpp printed, against oomkit's). Exit 1 if a row is out of tolerance
# (the same checks CI runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo test -q -p oomkit_estimate --test accuracy -- --nocapture --test-threads 1 2>&1 |
    grep -E '^\||rows with|out of tolerance|^[A-Za-z0-9-]+: '
# llama.cpp (--engine llama.cpp): the buffer sizes llama.cpp printed in public
# logs (tests/llamacpp_logs.json) against oomkit's.
cargo test -q -p oomkit_estimate --test llamacpp_logs -- --nocapture 2>&1 | grep -E '^\|'
