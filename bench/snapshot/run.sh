#!/usr/bin/env bash
# Benchmark `oomkit snapshot` against PyTorch's own reader on a ~1 GiB snapshot.
#
#   bash bench/snapshot/run.sh            # 1024 MiB (generated on first use)
#   bash bench/snapshot/run.sh 256        # another size, in MiB
#
# Environment:
#   PYTHON=python3   an interpreter; torch is used when it imports
#                    (`pip install torch`), else the script falls back to the
#                    same work without torch: pickle.load + segsum-style stats
#   RUNS=3           timed runs per command; the best wall time is kept
#   OOMKIT=path      benchmark this binary instead of building target/release/oomkit
#
# It writes bench/data/snapshot_<N>m.pickle with make_big.py (scaling the real
# h100-hook-leak.pickle fixture's trace), reads it once to warm the page cache,
# then times, with GNU time -v (wall, user+sys CPU, peak RSS):
#   (a) python -m torch.cuda._memory_viz stats FILE   (pickle.load + segsum)
#   (b) python -c 'pickle.load(FILE)'                  (the load alone, no torch import)
#   (c) oomkit snapshot --format json FILE             (decode + every figure:
#       replay, sites at the peak, fragmentation, leaks, OOMs, timeline)
# and prints a markdown table. Exit status: 0 ok, 2 setup error.
set -euo pipefail

cd "$(dirname "$0")/../.."
DATA=bench/data
RUNS=${RUNS:-3}
SIZE=${1:-1024}
PYTHON=${PYTHON:-python3}
FILE=$DATA/snapshot_${SIZE}m.pickle
SRC=crates/oomkit_snapshot/tests/fixtures/h100-hook-leak.pickle

die() { echo "run.sh: $*" >&2; exit 2; }
[ -x /usr/bin/time ] || die "GNU time (/usr/bin/time) is required"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found"

if [ -z "${OOMKIT:-}" ]; then
    cargo build --release --locked -q -p oomkit
    OOMKIT=${CARGO_TARGET_DIR:-target}/release/oomkit
fi
mkdir -p "$DATA"
[ -f "$FILE" ] || "$PYTHON" bench/snapshot/make_big.py "$SRC" "$FILE" "$SIZE"
cat "$FILE" > /dev/null

if "$PYTHON" -c "import torch" 2>/dev/null; then
    TORCH=$("$PYTHON" -c "import torch; print(torch.__version__)")
    PY_A=("$PYTHON" -m torch.cuda._memory_viz stats "$FILE")
    LABEL_A="\`python -m torch.cuda._memory_viz stats\` (torch $TORCH)"
else
    # No torch: the same work _memory_viz stats does, without the torch import.
    PY_A=("$PYTHON" -c "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); print(sum(s['total_size'] for s in d['segments']), sum(b['size'] for s in d['segments'] for b in s['blocks'] if b['state']=='active_allocated'))" "$FILE")
    LABEL_A="pickle.load + stats in Python (torch not installed)"
fi
PY_B=("$PYTHON" -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$FILE")
OK=("$OOMKIT" snapshot --format json "$FILE")

# best_of CMD...: prints "wall cpu rss_kb" of the run with the best wall time.
best_of() {
    local best="" line
    for _ in $(seq "$RUNS"); do
        line=$( /usr/bin/time -f "%e %U %S %M" "$@" 2>&1 > /dev/null | tail -1 )
        if [ -z "$best" ] || awk -v a="$line" -v b="$best" 'BEGIN{split(a,x," ");split(b,y," ");exit !(x[1]<y[1])}'; then
            best=$line
        fi
    done
    echo "$best"
}

A=$(best_of "${PY_A[@]}")
B=$(best_of "${PY_B[@]}")
C=$(best_of "${OK[@]}")
BYTES=$(stat -c %s "$FILE")
EVENTS=$("$OOMKIT" snapshot --format json "$FILE" | "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['devices'][0]['events'])")

row() { # label "wall user sys rss"
    awk -v l="$1" -v r="$2" -v c="$C" 'BEGIN{split(r,x," ");split(c,o," ");
        printf "| %s | %.2f s | %.2f s | %.0f MiB | %.1f× | %.1f× |\n", l, x[1], x[2]+x[3], x[4]/1024, x[1]/o[1], (x[2]+x[3])/(o[2]+o[3])}'
}
echo "File: $FILE ($((BYTES / 1048576)) MiB, $EVENTS trace events); best of $RUNS runs; $(nproc) cores"
echo
echo "| command | wall | CPU (user+sys) | peak RSS | oomkit faster (wall) | oomkit faster (CPU) |"
echo "|---|---|---|---|---|---|"
row "$LABEL_A" "$A"
row "Python \`pickle.load\` alone" "$B"
row "\`oomkit snapshot --format json\`" "$C"
