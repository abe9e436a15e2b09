#!/usr/bin/env bash
# CPU cost of `oomkit monitor` sampling at 10 Hz, against the stand-in NVML
# library (crates/oomkit_nvml_standin) with the two-GPU demo scenario.
#
#   bash bench/monitor/run.sh [SECONDS]     # default 60
#
# It runs the release binary three ways for SECONDS each — JSON Lines to
# /dev/null, --log to a file, and --prometheus scraped once a second — and
# prints user+system CPU seconds over wall seconds as a percentage of one core
# (GNU time). On a machine with a real GPU, set REAL=1 to also measure against
# the installed driver, next to `nvidia-smi -lms 100` and `nvitop` (if
# installed) for the same time: the anchors the issue names.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
count=$((secs * 10))
cargo build --release --locked -q -p oomkit -p oomkit_nvml_standin
bin=target/release/oomkit
lib=$(mktemp -d)
trap 'rm -rf "$lib"' EXIT
ln -s "$PWD/target/release/liboomkit_nvml_standin.so" "$lib/libnvidia-ml.so.1"
export OOMKIT_NVML_SCENARIO=$PWD/crates/oomkit_nvml_standin/scenarios/demo.json

cost() { # label, command...
  local label=$1; shift
  local out
  /usr/bin/time -o "$lib/time" -f "%U %S %e" "$@" >/dev/null 2>&1 || true
  out=$(tail -1 "$lib/time")
  awk -v l="$label" -v o="$out" 'BEGIN { split(o, a, " "); printf "| %s | %.2f | %.2f | %.3f %% |\n", l, a[1] + a[2], a[3], 100 * (a[1] + a[2]) / a[3] }'
}

echo "| run (${secs} s at 10 Hz) | CPU s | wall s | CPU / one core |"
echo "|---|---|---|---|"
LD_LIBRARY_PATH=$lib cost "oomkit monitor --format json (stand-in)" \
  "$bin" monitor --format json --interval 100ms --count "$count"
LD_LIBRARY_PATH=$lib cost "oomkit monitor --format csv --log FILE (stand-in)" \
  "$bin" monitor --format csv --interval 100ms --count "$count" --log "$lib/gpu.jsonl"
# Prometheus: scraped once a second while it runs.
port=$((20000 + RANDOM % 20000))
( for _ in $(seq "$secs"); do sleep 1; curl -s "http://127.0.0.1:$port/metrics" >/dev/null || true; done ) &
scraper=$!
LD_LIBRARY_PATH=$lib cost "oomkit monitor --prometheus, scraped at 1 Hz (stand-in)" \
  "$bin" monitor --format json --interval 100ms --count "$count" --prometheus "127.0.0.1:$port"
wait "$scraper" 2>/dev/null || true

if [ "${REAL:-0}" = 1 ]; then
  unset OOMKIT_NVML_SCENARIO
  cost "oomkit monitor --format json (real driver)" "$bin" monitor --format json --interval 100ms --count "$count"
  cost "nvidia-smi -lms 100 (real driver)" timeout "$secs" nvidia-smi --query-gpu=memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw --format=csv -lms 100
  if command -v nvitop >/dev/null; then
    cost "nvitop --once x ${count} (real driver)" bash -c "for i in \$(seq $count); do nvitop --once >/dev/null; done"
  fi
fi
