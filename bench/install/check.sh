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
# 2. `pre-commit try-repo <repo> oomkit-lint --all-files` on a scratch git
#    repository fails on a planted leak (naming the file and rule) and reports
#    nothing in a clean file.
# 3. `cargo install --path crates/oomkit` gives the same working binary.
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
# One run over both files: pre-commit builds the hook's environment (a wheel,
# i.e. a release build) per try-repo, so a second run would double the time.
ref=$(git -C "$repo" rev-parse HEAD)
export PRE_COMMIT_HOME="$work/pre-commit-home"
set +e
"$work/venv/bin/pre-commit" try-repo "$repo" oomkit-lint --ref "$ref" --all-files > "$work/hook.out" 2>&1
leak_rc=$?
set -e
tail -8 "$work/hook.out"
if [ "$leak_rc" -eq 0 ] || ! grep -q "leak.py:.*OOM101" "$work/hook.out"; then
  echo "FAIL: the hook did not report the planted leak (rc $leak_rc)"; exit 1
fi
if grep -q "clean.py:" "$work/hook.out"; then
  echo "FAIL: the hook reported the clean file"; exit 1
fi
echo "ok: pre-commit reports the leak (rc $leak_rc) and nothing in the clean file"

echo "== cargo install --path crates/oomkit"
cargo install -q --path "$repo/crates/oomkit" --locked --root "$work/cargo"
"$work/cargo/bin/oomkit" --version
# Exit status 1: the bundled example has a finding, which must be named.
set +e
"$work/cargo/bin/oomkit" lint "$repo/examples/train.py" > "$work/lint.out"
lint_rc=$?
set -e
if [ "$lint_rc" -ne 1 ] || ! grep -q "train.py:14:5: OOM101" "$work/lint.out"; then
  echo "FAIL: the cargo-installed oomkit did not report examples/train.py (rc $lint_rc)"; exit 1
fi
echo "ok: cargo install gives a working oomkit"
