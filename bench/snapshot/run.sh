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
LOAD0=$(cut -d" " -f1-3 /proc/loadavg)

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

# Runs are interleaved round by round (A B C C C, A B C C C, …) so that a busy
# spell on this shared machine hits every command alike; each command keeps its
# best wall time (and that run's CPU and RSS). oomkit, the cheap one, runs 3× as
# often: its best of many is as close to uncontended as Python's best of few.
# time_one CMD...: prints "wall user sys rss_kb".
time_one() { /usr/bin/time -f "%e %U %S %M" "$@" 2>&1 > /dev/null | tail -1; }
better() { awk -v a="$1" -v b="$2" 'BEGIN{split(a,x," ");split(b,y," ");exit !(b=="" || x[1]<y[1])}'; }
A="" B="" C=""
for _ in $(seq "$RUNS"); do
    l=$(time_one "${PY_A[@]}"); better "$l" "$A" && A=$l
    l=$(time_one "${PY_B[@]}"); better "$l" "$B" && B=$l
    for _ in 1 2 3; do
        l=$(time_one "${OK[@]}"); better "$l" "$C" && C=$l
    done
done
BYTES=$(stat -c %s "$FILE")
EVENTS=$("$OOMKIT" snapshot --format json "$FILE" | "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['devices'][0]['events'])")

row() { # label "wall user sys rss"
    awk -v l="$1" -v r="$2" -v c="$C" 'BEGIN{split(r,x," ");split(c,o," ");
        printf "| %s | %.2f s | %.2f s | %.0f MiB | %.1f× | %.1f× |\n", l, x[1], x[2]+x[3], x[4]/1024, x[1]/o[1], (x[2]+x[3])/(o[2]+o[3])}'
}
echo "File: $FILE ($((BYTES / 1048576)) MiB, $EVENTS trace events); best of $RUNS interleaved rounds (oomkit: of $((RUNS * 3)) runs); $(nproc) cores; load before: $LOAD0"
echo
echo "| command | wall | CPU (user+sys) | peak RSS | oomkit faster (wall) | oomkit faster (CPU) |"
echo "|---|---|---|---|---|---|"
row "$LABEL_A" "$A"
row "Python \`pickle.load\` alone" "$B"
row "\`oomkit snapshot --format json\`" "$C"
