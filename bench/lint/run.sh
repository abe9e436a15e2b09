#!/usr/bin/env bash
# Benchmark `oomkit lint` against TorchFix and `ruff check --no-cache` on real code, and
# run the real-code false-positive check.
#
#   bash bench/lint/run.sh            # set up (first use), corpus check, timings
#
# Environment:
#   WORK=/tmp/oomkit-lint-bench   venv (torchfix, ruff) and unpacked wheels go here
#   RUNS=5                        timed runs per fast command (the minimum is kept)
#   TORCHFIX_RUNS=1               timed runs of TorchFix (it takes minutes); 0 skips it
#   TORCHFIX_BIG=1                also time TorchFix on the big tree (20+ minutes)
#   OOMKIT=path                   benchmark this binary instead of target/release/oomkit
#
# Corpus: every .py file of the transformers, accelerate, lightning, peft and
# torchvision wheels from PyPI (unpacked, not installed). The timed tree ("big") is
# transformers + accelerate + lightning, as in the issue; TorchFix is also timed on the
# "small" tree accelerate + lightning, because on the big tree it runs for many minutes.
# All three tools see exactly the same files. ruff runs its default rules.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${WORK:-/tmp/oomkit-lint-bench}
RUNS=${RUNS:-5}
TORCHFIX_RUNS=${TORCHFIX_RUNS:-1}
mkdir -p "$WORK"

if [[ ! -x "$WORK/venv/bin/torchfix" ]]; then
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q torchfix ruff
fi
if [[ ! -d "$WORK/corpus" ]]; then
    "$WORK/venv/bin/pip" download -q --no-deps -d "$WORK/wheels" \
        transformers accelerate lightning peft torchvision
    mkdir -p "$WORK/corpus"
    for w in "$WORK"/wheels/*.whl; do
        n=$(basename "$w" .whl); mkdir -p "$WORK/corpus/$n"; unzip -q -o "$w" -d "$WORK/corpus/$n"
    done
fi
big="$WORK/big"; small="$WORK/small"
rm -rf "$big" "$small"; mkdir -p "$big" "$small"
for pkg in transformers accelerate lightning; do
    src=$(ls -d "$WORK"/corpus/"$pkg"-*/"$pkg")
    cp -r "$src" "$big/"
    [[ $pkg != transformers ]] && cp -r "$src" "$small/"
done
find "$big" "$small" -type f ! -name '*.py' -delete

if [[ -z "${OOMKIT:-}" ]]; then
    cargo build --release --locked -q
    OOMKIT=target/release/oomkit
fi
OOMKIT=$(realpath "$OOMKIT")
export PATH="$WORK/venv/bin:$PATH"

echo "== versions"
"$OOMKIT" --version; ruff --version; echo "torchfix $(pip show torchfix 2>/dev/null | awk '/^Version/{print $2}')"
echo "== corpus check (every finding on real code; review for false positives)"
(cd "$WORK/corpus" && "$OOMKIT" lint . --statistics) || true

count() { find "$1" -name '*.py' | wc -l; }
lines() { find "$1" -name '*.py' -exec cat {} + | wc -l; }
timeit() { # runs, dir, command... -> best wall seconds
    local runs=$1 dir=$2; shift 2
    python3 - "$runs" "$dir" "$@" <<'PY'
import subprocess, sys, time
runs, cwd, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
best = None
for _ in range(runs):
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    d = time.perf_counter() - t
    best = d if best is None else min(best, d)
print(f"{best:.3f}")
PY
}

echo "== timings (best of N wall-clock seconds; $(nproc) cores)"
for tree in small big; do
    dir="$WORK/$tree"
    n=$(count "$dir"); l=$(lines "$dir")
    o=$(timeit "$RUNS" "$dir" "$OOMKIT" lint .)
    r=$(timeit "$RUNS" "$dir" ruff check --no-cache --isolated --exit-zero -q .)
    if [[ $TORCHFIX_RUNS -gt 0 && ( $tree == small || ${TORCHFIX_BIG:-0} == 1 ) ]]; then
        t=$(timeit "$TORCHFIX_RUNS" "$dir" torchfix .)
    else
        t=""
    fi
    python3 - "$tree" "$n" "$l" "$o" "$r" "$t" <<'PY'
import sys
tree, n, l, o, r, t = sys.argv[1:]
n, l, o, r = int(n), int(l), float(o), float(r)
print(f"{tree}: {n} files, {l} lines")
print(f"  oomkit lint        {o:8.3f} s  {n / o:9.0f} files/s")
print(f"  ruff check         {r:8.3f} s  {n / r:9.0f} files/s   oomkit/ruff = {o / r:.2f}x")
if t:
    t = float(t)
    print(f"  torchfix           {t:8.3f} s  {n / t:9.1f} files/s   torchfix/oomkit = {t / o:.0f}x")
PY
done
