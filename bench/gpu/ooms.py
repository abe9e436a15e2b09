"""Record real out-of-memory messages on a CUDA GPU: PyTorch (native
allocator, expandable segments, cudaMallocAsync, memory fraction, another
process holding memory, fragmentation, a real transformers traceback), JAX
(preallocation, no preallocation, the platform and cuda_malloc_async
allocators, a memory fraction, a jit program) and CuPy.

Each scenario runs in its own process; everything it prints (stdout and
stderr together, as a terminal shows it) is written to DIR/<name>.log,
untouched, and `oomkit explain DIR/<name>.log --format json` to
DIR/<name>.explain.json. These logs become explain's fixtures under
crates/oomkit_explain/tests/fixtures/recorded/.

Sizes are in GiB of the GPU at hand: scenarios scale to its total memory, so
an "impossible" request is 1.5x the card and a "capacity" one fills it.

Usage: python3 bench/gpu/ooms.py DIR [--oomkit BIN] [--only NAME]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "crates" / "oomkit_estimate" / "models"

TORCH_FILL = """
import torch
GiB = 2**30
total = torch.cuda.get_device_properties(0).total_memory
keep = torch.empty(int(total * 0.70) // GiB * GiB, dtype=torch.uint8, device="cuda")
more = torch.empty(int(total * 0.45) // GiB * GiB, dtype=torch.uint8, device="cuda")
"""

SCENARIOS = {
    # PyTorch, native caching allocator
    "torch_impossible_request": ({}, """
import torch
total = torch.cuda.get_device_properties(0).total_memory
x = torch.empty(int(total * 1.5), dtype=torch.uint8, device="cuda")
"""),
    "torch_capacity_this_process": ({}, TORCH_FILL),
    "torch_fragmentation_hint": ({}, """
import torch
MiB, GiB = 2**20, 2**30
total = torch.cuda.get_device_properties(0).total_memory
n = int(total * 0.70) // (6 * MiB)
xs = [torch.empty(6 * MiB, dtype=torch.uint8, device="cuda") for _ in range(n)]
del xs[1::3], xs[1::2]   # keep one 6 MiB block in each 20 MiB segment
big = torch.empty(int(total * 0.45) // GiB * GiB, dtype=torch.uint8, device="cuda")
"""),
    "torch_memory_fraction": ({}, """
import torch
GiB = 2**30
torch.cuda.set_per_process_memory_fraction(0.25)
total = torch.cuda.get_device_properties(0).total_memory
a = torch.empty(int(total * 0.15) // GiB * GiB, dtype=torch.uint8, device="cuda")
b = torch.empty(int(total * 0.15) // GiB * GiB, dtype=torch.uint8, device="cuda")
"""),
    "torch_expandable_segments": ({"PYTORCH_ALLOC_CONF": "expandable_segments:True"}, TORCH_FILL),
    "torch_cuda_malloc_async": ({"PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"}, TORCH_FILL),
    "torch_cuda_malloc_async_fraction": ({"PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"}, """
import torch
GiB = 2**30
torch.cuda.set_per_process_memory_fraction(0.25)
total = torch.cuda.get_device_properties(0).total_memory
a = torch.empty(int(total * 0.15) // GiB * GiB, dtype=torch.uint8, device="cuda")
b = torch.empty(int(total * 0.15) // GiB * GiB, dtype=torch.uint8, device="cuda")
"""),
    "torch_other_process": ({}, """
import subprocess, sys, time, torch
GiB = 2**30
total = torch.cuda.get_device_properties(0).total_memory
hold = subprocess.Popen([sys.executable, "-c",
    "import torch, sys, time; x = torch.empty(%d, dtype=torch.uint8, device='cuda');"
    "print('held', flush=True); time.sleep(120)" % (int(total * 0.55) // GiB * GiB)],
    stdout=subprocess.PIPE, text=True)
hold.stdout.readline()
try:
    mine = torch.empty(int(total * 0.10) // GiB * GiB, dtype=torch.uint8, device="cuda")
    more = torch.empty(int(total * 0.40) // GiB * GiB, dtype=torch.uint8, device="cuda")
finally:
    hold.kill()
"""),
    "torch_transformers_forward": ({}, """
import torch
from transformers import AutoConfig, AutoModelForCausalLM
cfg = AutoConfig.from_pretrained(%r)
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
ids = torch.randint(0, cfg.vocab_size, (256, 4096), device="cuda")
out = model(input_ids=ids, labels=ids)
out.loss.backward()
""" % str(MODELS / "Qwen__Qwen2.5-0.5B.json")),
    # JAX / XLA
    "jax_impossible_request": ({}, """
import jax, jax.numpy as jnp
total = jax.devices()[0].memory_stats()["bytes_limit"]
x = jnp.ones((int(total * 2) // 4,), jnp.float32)
x.block_until_ready()
"""),
    "jax_preallocated_pool": ({}, """
import jax, jax.numpy as jnp
GiB = 2**30
limit = jax.devices()[0].memory_stats()["bytes_limit"]
a = jnp.ones((int(limit * 0.6) // 4,), jnp.float32).block_until_ready()
b = jnp.ones((int(limit * 0.6) // 4,), jnp.float32).block_until_ready()
"""),
    "jax_no_preallocate": ({"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, """
import jax, jax.numpy as jnp
import subprocess
total = int(subprocess.check_output(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]).split()[0]) * 2**20
a = jnp.ones((int(total * 0.7) // 4,), jnp.float32).block_until_ready()
b = jnp.ones((int(total * 0.45) // 4,), jnp.float32).block_until_ready()
"""),
    "jax_platform_allocator": ({"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}, """
import jax, jax.numpy as jnp
import subprocess
total = int(subprocess.check_output(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]).split()[0]) * 2**20
a = jnp.ones((int(total * 0.7) // 4,), jnp.float32).block_until_ready()
b = jnp.ones((int(total * 0.45) // 4,), jnp.float32).block_until_ready()
"""),
    "jax_cuda_malloc_async": ({"TF_GPU_ALLOCATOR": "cuda_malloc_async"}, """
import jax, jax.numpy as jnp
import subprocess
total = int(subprocess.check_output(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]).split()[0]) * 2**20
a = jnp.ones((int(total * 0.7) // 4,), jnp.float32).block_until_ready()
b = jnp.ones((int(total * 0.45) // 4,), jnp.float32).block_until_ready()
"""),
    "jax_mem_fraction": ({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".10"}, """
import jax, jax.numpy as jnp
import subprocess
total = int(subprocess.check_output(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]).split()[0]) * 2**20
a = jnp.ones((int(total * 0.15) // 4,), jnp.float32).block_until_ready()
"""),
    "jax_jit_temporaries": ({}, """
import jax, jax.numpy as jnp
n = 400_000
@jax.jit
def f(x):
    return jnp.sort(jnp.outer(x, x).ravel())[:10]
print(f(jnp.arange(n, dtype=jnp.float32)))
"""),
    # CuPy
    "cupy_impossible_request": ({}, """
import cupy as cp
total = cp.cuda.Device(0).mem_info[1]
x = cp.empty(int(total * 1.5), dtype=cp.uint8)
"""),
    "cupy_capacity": ({}, """
import cupy as cp
GiB = 2**30
total = cp.cuda.Device(0).mem_info[1]
a = cp.empty(int(total * 0.7) // GiB * GiB, dtype=cp.uint8)
b = cp.empty(int(total * 0.45) // GiB * GiB, dtype=cp.uint8)
"""),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--oomkit", default=str(ROOT / "target" / "release" / "oomkit"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=90)
    a = ap.parse_args()
    out = pathlib.Path(a.dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, (env, code) in SCENARIOS.items():
        if a.only and a.only not in name:
            continue
        t0 = time.time()
        log = out / f"{name}.log"
        with log.open("wb") as f:
            try:
                p = subprocess.run([a.python, "-c", code], stdout=f, stderr=subprocess.STDOUT,
                                   env=dict(os.environ, PYTHONUNBUFFERED="1", **env),
                                   timeout=a.timeout)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        (out / f"{name}.meta.json").write_text(json.dumps(dict(
            env=env, code=code, rc=rc, seconds=round(time.time() - t0, 1))))
        e = subprocess.run([a.oomkit, "explain", str(log), "--format", "json"],
                           capture_output=True, text=True)
        (out / f"{name}.explain.json").write_text(e.stdout or e.stderr)
        print(f"{name}: rc {rc}, {time.time() - t0:.1f} s, explain rc {e.returncode}", flush=True)


if __name__ == "__main__":
    main()
