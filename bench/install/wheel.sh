#!/usr/bin/env bash
# The wheel users install without Rust, built as the release workflow builds it
# (.github/workflows/release.yml) and checked the way a user would use it:
#
#   bash bench/install/wheel.sh
#
# 1. maturin (from PyPI, with ziglang as the linker) builds
#    `--release --zig --compatibility manylinux2014` for this machine's target
#    (glibc >= 2.17: the wheel runs on any Linux of the last decade);
# 2. the wheel's binary is stripped (no .debug_* sections) — its size and the
#    build time are printed for bench/README.md;
# 3. it installs into a fresh virtual environment and runs: --version, explain
#    on the bundled log (exit 0), estimate, lint, completions and man.
# Needs PyPI (maturin, ziglang) and a Rust toolchain; takes a release build.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/build"
"$work/build/bin/pip" install -q maturin ziglang
start=$(date +%s)
(cd "$repo" && PATH="$work/build/bin:$PATH" maturin build --release --locked --zig \
    --compatibility manylinux2014 --out "$work/dist")
end=$(date +%s)
wheel=$(ls "$work"/dist/oomkit-*.whl)
echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes), built in $((end - start)) s"
case "$(basename "$wheel")" in
  *manylinux2014*|*manylinux_2_17*) ;;
  *) echo "FAIL: not a manylinux2014 wheel"; exit 1 ;;
esac

python3 -m venv "$work/user"
"$work/user/bin/pip" install -q "$wheel"
bin="$work/user/bin/oomkit"
echo "installed binary: $(stat -c %s "$bin") bytes"
if readelf -S -W "$bin" | grep -qE '\.debug_(info|line|str)'; then
  echo "FAIL: the wheel's binary carries debug sections"; exit 1
fi
# The highest glibc symbol version it needs must be within manylinux2014's 2.17.
need=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -u | tail -1)
echo "newest glibc symbol: $need"
"$bin" --version
"$bin" explain "$repo/examples/train_oom.log" | head -2
"$bin" estimate gpt2 --gpu rtx-4090 > /dev/null
status=0; "$bin" lint "$repo/examples/train.py" > /dev/null || status=$?
[ "$status" = 1 ] || { echo "FAIL: lint exit $status (expected 1: one finding)"; exit 1; }
"$bin" completions bash | grep -q 'complete -F _oomkit'
"$bin" man estimate | grep -q '^.TH oomkit-estimate 1'
echo "ok: the manylinux2014 wheel installs and runs in a fresh virtual environment"
