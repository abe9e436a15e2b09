#!/usr/bin/env bash
# Makes docs/monitor-tui.png: the real TUI in tmux against the stand-in NVML
# library, with two GPUs and three processes whose PIDs are real processes
# here (so user and command come from /proc as they would on a GPU box).
#
#   bash docs/monitor-screenshot.sh
#
# Needs tmux, chromium and `pip install ansi2html` (for the ANSI → HTML step).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked -q -p oomkit -p oomkit_nvml_standin
work=$(mktemp -d)
pids=()
cleanup() { tmux kill-session -t oomkit-shot 2>/dev/null || true; kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ln -s "$PWD/target/debug/liboomkit_nvml_standin.so" "$work/libnvidia-ml.so.1"
py=$(python3 -c "import sys; print(sys.executable)")
printf 'import time\ntime.sleep(600)\n' > "$work/idle.py"
for s in train eval serve; do cp "$work/idle.py" "$work/$s.py"; done
fake() { # pidfile, script and arguments (a real python3 process that idles)
  local pidfile=$1; shift
  (cd "$work" && exec "$py" "$@") & pids+=($!); echo $! > "$pidfile"
}
fake "$work/train.pid" train.py --model llama-3.1-8b --batch-size 8 --grad-accum 4
fake "$work/eval.pid" eval.py --checkpoint runs/llama/step-12000
fake "$work/serve.pid" serve.py --model Qwen/Qwen2.5-7B-Instruct --port 8000
cat > "$work/scenario.json" <<JSON
{ "driver_version": "580.65.06", "devices": [
  { "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5f3b6c1e-8d2a-4c7e-9b1f-0a2d3e4f5a6b",
    "total_bytes": 85520809984, "base_used_bytes": 566231040,
    "utilization_pct": 97, "temperature_c": 63, "power_mw": 644000,
    "processes": [
      { "pid_file": "$work/train.pid", "used_bytes": 52613349376, "growth_bytes_per_s": 31457280 },
      { "pid_file": "$work/eval.pid", "used_bytes": 6442450944 } ] },
  { "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
    "total_bytes": 85520809984, "base_used_bytes": 566231040,
    "utilization_pct": 41, "temperature_c": 48, "power_mw": 301000,
    "processes": [ { "pid_file": "$work/serve.pid", "used_bytes": 69793218560 } ] } ] }
JSON
tmux new-session -d -s oomkit-shot -x 118 -y 26 \
  "LD_LIBRARY_PATH=$work OOMKIT_NVML_SCENARIO=$work/scenario.json target/debug/oomkit monitor --interval 250ms"
sleep 12
tmux capture-pane -t oomkit-shot -e -p > "$work/screen.ansi"
cp "$work/screen.ansi" docs/monitor-tui.ansi
python3 -m ansi2html < "$work/screen.ansi" \
  | sed 's#</style>#.ansi2html-content { font-family: "DejaVu Sans Mono", monospace; font-size: 15px; line-height: 1.15; white-space: pre; } body { margin: 8px; }</style>#' \
  > "$work/screen.html"
chromium --headless --no-sandbox --hide-scrollbars --window-size=1100,600 \
  --screenshot="$PWD/docs/monitor-tui.png" "file://$work/screen.html" 2>/dev/null
echo "wrote docs/monitor-tui.png"
