#!/usr/bin/env bash
# Runs every snippet `oomkit estimate` prints in its plans against transformers, PEFT,
# DeepSpeed and diffusers (with torchao) installed from PyPI (see check_snippets.py for what each check does).
# Usage: bash bench/estimate/check_snippets.sh        (VENV=... to reuse a venv)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${VENV:-$ROOT/target/snippet-venv}
OOMKIT=${OOMKIT:-$ROOT/target/debug/oomkit}
[ -x "$OOMKIT" ] || cargo build --locked -q -p oomkit --manifest-path "$ROOT/Cargo.toml"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import torch, transformers, peft, accelerate, bitsandbytes, diffusers, torchao" 2>/dev/null; then
  "$VENV/bin/pip" install -q torch transformers peft accelerate bitsandbytes diffusers torchao
fi
# DeepSpeed builds its CUDA ops lazily, so it installs without CUDA; it imports torch while
# building its wheel, hence no build isolation. Optional: without it the JSON is checked by
# transformers only.
"$VENV/bin/python" -c "import deepspeed" 2>/dev/null \
  || DS_BUILD_OPS=0 "$VENV/bin/pip" install -q --no-build-isolation deepspeed \
  || echo "deepspeed did not install: DeepSpeed JSON checked by transformers only"
"$VENV/bin/python" -c "import torch, transformers, peft, diffusers, torchao; print('torch', torch.__version__, '· transformers', transformers.__version__, '· peft', peft.__version__, '· diffusers', diffusers.__version__, '· torchao', torchao.__version__)"
"$VENV/bin/python" -c "import deepspeed; print('deepspeed', deepspeed.__version__)" 2>/dev/null || true
exec "$VENV/bin/python" "$ROOT/bench/estimate/check_snippets.py" "$OOMKIT"
