#!/usr/bin/env bash
# Checks oomkit's Python hook (run --snapshot-on-oom, probe's peak) against a
# real PyTorch installed from PyPI into a throwaway venv: importing torch under
# the hook must not initialise CUDA, the program must see the same thing with
# and without the hook, and torch.cuda._lazy_call (which the hook relies on)
# must exist and queue while CUDA is uninitialised.
#
#   bash bench/probe/real_torch_hook.sh            # venv in /tmp/oomkit-torch-venv
#   VENV=/path TORCH_SPEC='torch==2.5.1' bash bench/probe/real_torch_hook.sh
#
# On Linux x86_64, PyPI's torch is the CUDA build (the wheel and its nvidia-*
# dependencies are several GB); on a machine without a GPU, CUDA is never
# initialised and the hook's queued call never runs, which is what is checked.
# Exit status 0 when every check passes, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${VENV:-/tmp/oomkit-torch-venv}
spec=${TORCH_SPEC:-torch}
oomkit=${OOMKIT:-$root/target/debug/oomkit}
[ -x "$oomkit" ] || (cd "$root" && cargo build -q -p oomkit)

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$spec"
fi
py=$venv/bin/python
"$py" -c 'import torch, sys; print("torch", torch.__version__, "cuda build:", torch.version.cuda, "python", sys.version.split()[0])'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/train.py" <<'PY'
# A small CPU training step that reports what CUDA looks like after import.
import os, sys
import torch
print("after import: cuda initialised", torch.cuda.is_initialized())
print("lazy_call exists", hasattr(torch.cuda, "_lazy_call"))
queued = getattr(torch.cuda, "_queued_calls", [])
print("queued by oomkit's hook", sum(1 for c in queued if "sitecustomize" in getattr(getattr(c[0], "__code__", None), "co_filename", "")))
os.environ["CUDA_VISIBLE_DEVICES"] = "7"   # chosen after import, must still be read later
torch.manual_seed(0)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 16)
loss = model(x).pow(2).mean()
loss.backward()
opt.step()
print("loss %.6f" % loss.item())
print("at exit: cuda initialised", torch.cuda.is_initialized())
PY

fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

without=$("$py" "$work/train.py")
with=$("$oomkit" run --snapshot-on-oom -- "$py" "$work/train.py")
echo "--- with the hook"
echo "$with"
check "CUDA not initialised at import under the hook" '[[ "$with" == *"after import: cuda initialised False"* ]]'
check "torch.cuda._lazy_call exists" '[[ "$with" == *"lazy_call exists True"* ]]'
check "the hook queued one call in torch.cuda._queued_calls (memory history, for when CUDA initialises)" '[[ "$with" == *"queued by oomkit'"'"'s hook 1"* ]]'
check "without the hook nothing of it is queued" '[[ "$without" == *"queued by oomkit'"'"'s hook 0"* ]]'
# Apart from that line, the program's output is byte-identical.
strip() { grep -v '^queued by' <<<"$1"; }
check "same output with and without the hook" '[ "$(strip "$with")" = "$(strip "$without")" ]'
check "CUDA still not initialised at exit (the peak file is written only after CUDA use)" '[[ "$with" == *"at exit: cuda initialised False"* ]]'

# The hook's code against real torch's API, with CUDA's entry points counted:
# torch is imported first, its entry points wrapped, then the hook's source is
# executed (it sees torch already imported and hooks it at once). HOOK may name
# another version of the script (e.g. an older one, to see what it did).
hook=${HOOK:-$root/crates/oomkit_probe/src/hook/sitecustomize.py}
counts=$(OOMKIT_SNAPSHOT_DIR="$work" OOMKIT_PEAK_FILE="$work/peak" "$py" - "$hook" <<'PY'
import sys, types
import torch
calls = {"is_available": 0, "_cuda_getDeviceCount": 0, "_lazy_init": 0, "_record_memory_history": 0}
def counted(owner, name):
    real = getattr(owner, name)
    def wrapper(*a, **k):
        calls[name] += 1
        return real(*a, **k)
    setattr(owner, name, wrapper)
counted(torch.cuda, "is_available")
counted(torch._C, "_cuda_getDeviceCount")
counted(torch.cuda, "_lazy_init")
counted(torch.cuda.memory, "_record_memory_history")
before = len(torch.cuda._queued_calls)
src = open(sys.argv[1]).read()
exec(compile(src, sys.argv[1], "exec"), {"__name__": "oomkit_hook", "__file__": sys.argv[1]})
print("at hook time:", " ".join("%s=%d" % kv for kv in sorted(calls.items())), "queued=%d" % (len(torch.cuda._queued_calls) - before))
# What CUDA's initialisation would run: the queued call must not raise on a
# machine without CUDA (an exception there would fail the program's init).
raised = 0
for c in torch.cuda._queued_calls[before:]:
    try:
        c[0]()
    except Exception as e:
        raised += 1
print("queued call raised=%d record_memory_history=%d" % (raised, calls["_record_memory_history"]))
PY
)
echo "--- the hook's code on real torch"
echo "$counts"
check "the hook calls no CUDA entry point at import" '[[ "$counts" == *"at hook time: _cuda_getDeviceCount=0 _lazy_init=0 _record_memory_history=0 is_available=0 queued=1"* ]]'
check "the queued call runs _record_memory_history and never raises" '[[ "$counts" == *"queued call raised=0 record_memory_history=1"* ]]'
exit $fail
