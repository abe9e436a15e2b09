#!/usr/bin/env bash
# End-to-end check of the two ways Python users get oomkit (issue: install it the
# way its users install tools). Needs network access to PyPI (maturin, pre-commit)
# and a Rust toolchain; takes a release build (minutes). Not part of CI's test
# command for that reason; run it before a release and after touching
# pyproject.toml or .pre-commit-hooks.yaml.
#
#   bash bench/install/check.sh
#
# 1. `pip install <repo>` into a fresh virtual environment puts a working `oomkit`
#    on PATH (`--version`, and explain on the bundled example).
# 2. `pre-commit try-repo <repo> oomkit-lint` on a scratch git repository fails on
#    a planted leak (and names the rule), and passes on a clean file.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== pip install $repo (fresh venv)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$repo"
"$work/venv/bin/oomkit" --version
"$work/venv/bin/oomkit" explain "$repo/examples/train_oom.log" | head -3
"$work/venv/bin/oomkit" completions bash | grep -q "complete -F _oomkit"
echo "ok: pip install gives a working oomkit"

echo "== pre-commit try-repo (scratch git repository)"
"$work/venv/bin/pip" install -q pre-commit
mkdir "$work/proj" && cd "$work/proj"
git init -q && git config user.email ci@example.invalid && git config user.name ci
cat > leak.py <<'PY'
import torch


def train(model, loader, optimizer, criterion):
    history = []
    for x, y in loader:
        optimizer.zero_grad()
        logits = model(x)
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        history.append(loss)  # keeps every step's graph alive
PY
cat > clean.py <<'PY'
def add(a, b):
    return a + b
PY
git add . && git commit -qm scratch
# One pinned ref, one pre-commit home: the hook's environment (a wheel build) is
# made once and reused by the second run.
ref=$(git -C "$repo" rev-parse HEAD)
export PRE_COMMIT_HOME="$work/pre-commit-home"
set +e
"$work/venv/bin/pre-commit" try-repo "$repo" oomkit-lint --ref "$ref" --files leak.py > "$work/leak.out" 2>&1
leak_rc=$?
"$work/venv/bin/pre-commit" try-repo "$repo" oomkit-lint --ref "$ref" --files clean.py > "$work/clean.out" 2>&1
clean_rc=$?
set -e
cat "$work/leak.out" | tail -8
if [ "$leak_rc" -eq 0 ] || ! grep -q "OOM101" "$work/leak.out"; then
  echo "FAIL: the hook did not report the planted leak (rc $leak_rc)"; exit 1
fi
if [ "$clean_rc" -ne 0 ]; then
  cat "$work/clean.out"; echo "FAIL: the hook failed on a clean file"; exit 1
fi
echo "ok: pre-commit reports the leak (rc $leak_rc) and passes the clean file"
