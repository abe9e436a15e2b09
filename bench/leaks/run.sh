#!/usr/bin/env bash
# End-to-end check of `oomkit leaks` with a real PyTorch: runs every script in
# bench/leaks/gallery/ under `oomkit leaks --format json` and compares the report
# with the expectation marked in the script (`# leaks: expect KIND` on the holder
# line, `# leaks: clean` at the top of a clean look-alike), then measures the
# overhead of `oomkit leaks` against the plain run of a small CNN for 10 steps.
# A venv with tensorflow and no torch runs the TensorFlow/Keras scripts (tf_*.py)
# instead, without the overhead measurement; a torch venv skips them.
#
#   bash bench/leaks/run.sh                          # venv in /tmp/oomkit-torch-venv
#   VENV=/path/to/venv bash bench/leaks/run.sh       # a venv that already has torch
#   OOMKIT=/path/to/oomkit bash bench/leaks/run.sh graph_ clean_   # only matching scripts
#   RUNS=5 bash bench/leaks/run.sh                   # overhead: best of 5 interleaved rounds
#   NO_OVERHEAD=1 LEAKS_ARGS="--steps 12" bash bench/leaks/run.sh
#   VENV=/path/to/tf-venv NO_OVERHEAD=1 bash bench/leaks/run.sh tf_   # TensorFlow/Keras scripts
#
# If VENV has no torch, a venv is created there and `pip install torch numpy` runs
# from PyPI (TORCH_SPEC overrides the torch requirement). On Linux x86_64 PyPI's
# torch is the CUDA build: the wheel and its nvidia-* dependencies download several
# GB (5.3 GB installed); everything here runs on the CPU.
# Prints a markdown table (script, expected, got, ok), a summary, the overhead table,
# and the stdout/stderr of every mismatch. Exit status 1 on any mismatch or when the
# overhead is over budget (3x the plain run's wall time), 0 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${VENV:-/tmp/oomkit-torch-venv}
spec=${TORCH_SPEC:-torch}
oomkit=${OOMKIT:-$root/target/debug/oomkit}
[ -x "$oomkit" ] || (cd "$root" && cargo build -q -p oomkit)

# The TensorFlow scripts (tf_*) run with a venv that has tensorflow instead.
framework=torch
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c 'import torch' 2>/dev/null \
  && "$venv/bin/python" -c 'import tensorflow, numpy' 2>/dev/null; then
  framework=tensorflow
elif [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
  echo "installing $spec and numpy from PyPI into $venv (several GB on Linux x86_64)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$spec" numpy
fi
py=$venv/bin/python
"$py" -c "import $framework, sys; print('$framework', $framework.__version__, 'python', sys.version.split()[0])" 2>/dev/null
echo "oomkit: $oomkit ($("$oomkit" --version 2>/dev/null || echo 'version unknown'))"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo

mkdir -p "$root/bench/data"
extra=()
[ -n "${NO_OVERHEAD:-}" ] && extra+=(--no-overhead)
cd "$root"
exec python3 "$here/check.py" --oomkit "$oomkit" --python "$py" --framework "$framework" \
  --runs "${RUNS:-3}" --leaks-args="${LEAKS_ARGS:-}" \
  --json-out "$root/bench/data/leaks-results.json" "${extra[@]}" --only "$@"
