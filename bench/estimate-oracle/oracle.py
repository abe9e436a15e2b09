"""Compare `oomkit estimate` with PyTorch's MemTracker on fake tensors (the CPU
oracle of shared/reference/memory-estimation.md §6) on a grid of setups.

Runs the real Hugging Face model code built from the catalogue's config.json
files under FakeTensorMode (shapes and dtypes only, no data, no GPU), two
training steps with AdamW, and reads MemTracker's peak. MemTracker counts
tensors only: compare it with `peak_allocated_bytes` minus nothing else (no
CUDA context, no allocator slack). CPU kernels may save slightly different
tensors than CUDA ones (attention especially).

Usage: python bench/estimate-oracle/oracle.py [--oomkit target/debug/oomkit]
Needs: torch, transformers (pip).
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "crates" / "oomkit_estimate" / "models"

GRID = [
    # (catalogue file, repo id, batch, seq, gradient checkpointing)
    ("Qwen__Qwen2.5-0.5B.json", "Qwen/Qwen2.5-0.5B", 1, 512, False),
    ("Qwen__Qwen2.5-0.5B.json", "Qwen/Qwen2.5-0.5B", 2, 2048, False),
    ("Qwen__Qwen2.5-0.5B.json", "Qwen/Qwen2.5-0.5B", 2, 2048, True),
    ("meta-llama__Llama-3.2-1B.json", "meta-llama/Llama-3.2-1B", 1, 1024, False),
    ("meta-llama__Llama-3.2-1B.json", "meta-llama/Llama-3.2-1B", 4, 1024, True),
    ("meta-llama__Llama-3.2-3B.json", "meta-llama/Llama-3.2-3B", 2, 4096, False),
    ("Qwen__Qwen3-0.6B.json", "Qwen/Qwen3-0.6B", 2, 1024, False),
    ("microsoft__phi-2.json", "microsoft/phi-2", 1, 1024, False),
]


def oracle(cfg_file, batch, seq, ckpt):
    cfg = AutoConfig.from_pretrained(str(MODELS / cfg_file))
    cfg._attn_implementation = "sdpa"
    torch.set_default_dtype(torch.bfloat16)
    with FakeTensorMode():
        with torch.device("cpu"):
            model = AutoModelForCausalLM.from_config(cfg)
        if ckpt:
            model.gradient_checkpointing_enable()
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
        mt = MemTracker()
        mt.track_external(model, opt)
        with mt:
            for i in range(2):
                ids = torch.randint(0, cfg.vocab_size, (batch, seq))
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                if i == 0:
                    mt.reset_mod_stats()
        peak = mt.get_tracker_snapshot("peak")
    torch.set_default_dtype(torch.float32)
    total = 0
    for dev, cats in peak.items():
        total = max(total, cats.get("Total", 0) if isinstance(cats, dict) else 0)
    return total


def estimate(binary, repo, batch, seq, ckpt):
    args = [binary, "estimate", repo, "--task", "train", "--precision", "bf16",
            "--batch", str(batch), "--seq", str(seq), "--attention", "sdpa", "--format", "json"]
    if ckpt:
        args.append("--grad-checkpointing")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["peak_allocated_bytes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oomkit", default=str(ROOT / "target" / "debug" / "oomkit"))
    a = ap.parse_args()
    errs = []
    print("| model | batch × seq | ckpt | oracle | estimate | error |")
    print("|---|---|---|---|---|---|")
    for f, repo, b, s, ck in GRID:
        try:
            o = oracle(f, b, s, ck)
        except Exception as e:  # an architecture the installed transformers cannot fake
            print(f"| {repo} | {b} × {s} | {ck} | failed: {type(e).__name__}: {e} | | |")
            continue
        e = estimate(a.oomkit, repo, b, s, ck)
        err = (e - o) / o * 100 if o else float("nan")
        errs.append(abs(err))
        print(f"| {repo} | {b} × {s} | {ck} | {o / 2**30:.2f} GiB | {e / 2**30:.2f} GiB | {err:+.1f} % |")
        sys.stdout.flush()
    if errs:
        print(f"\n{len(errs)} setups, median |error| {statistics.median(errs):.1f} %, worst {max(errs):.1f} %")


if __name__ == "__main__":
    main()
