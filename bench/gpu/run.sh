#!/usr/bin/env bash
# Every measurement oomkit needs a real NVIDIA GPU for, in one run (about
# 7 minutes on an H200): real OOM messages (ooms.py), real peaks against
# estimate (peaks.py), NVML through `oomkit monitor`, `oomkit probe
# --estimate` on a real training step, `oomkit run --snapshot-on-oom` on a
# real OOM. Results are packed into $OUT/gpu-results.tar.gz after each part,
# so a run cut short still returns what it measured. bench/gpu/README.md
# says how the results became fixtures and table rows.
#
# Usage: OOMKIT=path/to/oomkit OUT=dir bash bench/gpu/run.sh
set -u
cd "$(dirname "$0")/../.."
OOMKIT=${OOMKIT:-$PWD/target/release/oomkit}
OUT=${OUT:-/tmp/oomkit-gpu-out}
PY=${PYTHON:-python3}
R=/tmp/oomkit-gpu
rm -rf "$R"; mkdir -p "$R/tmp" "$OUT"
export TMPDIR=$R/tmp PYTHONUNBUFFERED=1
pack() { echo "== $(date +%T) $1" | tee -a "$R/parts.txt"; tar -czf "$OUT/gpu-results.tar.gz" -C "$R" --exclude=./tmp . ; }

{ nvidia-smi; nvidia-smi -q -d MEMORY; uname -a
  $PY -c "import torch, transformers, peft; print('torch', torch.__version__, torch.version.cuda, 'transformers', transformers.__version__, 'peft', peft.__version__)"
  $PY -c "import jax, jaxlib; print('jax', jax.__version__, jaxlib.__version__)"
  $PY -c "import cupy; print('cupy', cupy.__version__)"; } > "$R/env.txt" 2>&1
# NVML against the real driver, idle and with a process holding 20 GiB.
"$OOMKIT" monitor --once > "$R/monitor_idle.txt" 2>&1
$PY -c "import torch, time; x = torch.empty(20 * 2**30, dtype=torch.uint8, device='cuda'); print('held', flush=True); time.sleep(30)" > "$R/holder.txt" 2>&1 &
HOLD=$!
for _ in $(seq 60); do grep -q held "$R/holder.txt" && break; sleep 0.5; done
"$OOMKIT" monitor --once > "$R/monitor_held.txt" 2>&1
"$OOMKIT" monitor --once --format json > "$R/monitor_held.json" 2>&1
timeout 5 "$OOMKIT" monitor --interval 500ms --count 6 --format csv > "$R/monitor_held.csv" 2>&1
kill $HOLD; wait $HOLD 2>/dev/null
pack monitor

timeout 170 $PY bench/gpu/ooms.py "$R/ooms" --oomkit "$OOMKIT" --timeout 60 > "$R/ooms.txt" 2>&1
pack ooms

timeout 100 "$OOMKIT" probe --timeout 60s --format json \
    --estimate Qwen/Qwen2.5-0.5B --task train --seq 2048 --gpu "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
    -- $PY bench/gpu/train_step.py Qwen__Qwen2.5-0.5B.json '{batch}' 2048 > "$R/probe.json" 2> "$R/probe.stderr"
pack probe

timeout 60 "$OOMKIT" run --snapshot-on-oom --report "$R/run_report.html" -- \
    $PY bench/gpu/train_step.py Qwen__Qwen2.5-0.5B.json 64 4096 > "$R/run.txt" 2>&1
echo "rc $?" >> "$R/run.txt"
for f in "$R"/tmp/oomkit-oom-snapshot-*.pickle; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 40000000 ] && cp "$f" "$R/run_snapshot.pickle"
done
pack run

timeout "${PEAKS_SECONDS:-200}" $PY bench/gpu/peaks.py "$R/peaks.jsonl" --oomkit "$OOMKIT" \
    --budget "$(( ${PEAKS_SECONDS:-200} - 30 ))" --timeout 60 > "$R/peaks.txt" 2>&1
pack peaks
