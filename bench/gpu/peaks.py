"""Measure real peak GPU memory for a grid of setups, on a CUDA GPU.

The GPU counterpart of bench/estimate-oracle/oracle.py: the same kinds of
setups (the real Hugging Face model code, built from oomkit's catalogue
config.json with random weights, so nothing is downloaded), but run on the
GPU with real CUDA kernels, each in its own process. Per setup it records

- peak_allocated: torch.cuda.max_memory_allocated() (tensor storages),
- peak_reserved: torch.cuda.max_memory_reserved() (the caching allocator),
- device_used: NVML's used memory after the run minus before the process
  touched CUDA (what nvidia-smi would show for this process: the CUDA
  context, cuBLAS workspaces and everything reserved),

plus one "context" row: the device memory a process takes for its CUDA
context alone, and after its first cuBLAS matrix product.

Training loops are the oracle's (two steps of forward, backward, optimizer
step, zero_grad; the loop holds `out` through backward) unless the setup
says `trainer`, which runs transformers' Trainer for two steps instead (its
default AdamW, its own loop). Inference with new tokens calls the real
`model.generate` (greedy, min_new_tokens = max_new_tokens, so random weights
cannot stop early).

Usage: python3 bench/gpu/peaks.py OUT.jsonl [--only SUBSTRING] [--budget SECONDS]
Rows are appended to OUT.jsonl as each setup finishes (a killed run keeps
what it measured). Needs torch with CUDA, transformers, peft, pynvml.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "crates" / "oomkit_estimate" / "models"


def S(model, task="train", b=1, s=512, **kw):
    d = dict(model=model, task=task, batch=b, seq=s, ckpt=False, precision="bf16",
             method="full", attention="sdpa", optimizer="adamw", new_tokens=0,
             lora_rank=16, lora_targets="q,v", trainer=False)
    d.update(kw)
    return d


# Ordered by what the estimator is least sure of (the estimate v2 "accuracy where
# it is still off"), so a run cut short still measures those first.
GRID = [
    # mixed precision: fp32 weights + autocast
    S("meta-llama/Llama-3.2-1B", b=2, s=1024, precision="mixed-bf16"),
    S("Qwen/Qwen2.5-1.5B", b=2, s=2048, precision="mixed-bf16"),
    S("Qwen/Qwen2.5-0.5B", b=4, s=512, precision="mixed-bf16", ckpt=True),
    # batched generate
    S("Qwen/Qwen2.5-1.5B", task="infer", b=8, s=1024, new_tokens=64),
    S("mistralai/Mistral-7B-v0.1", task="infer", b=4, s=2048, new_tokens=128),
    S("meta-llama/Llama-3.2-3B", task="infer", b=16, s=512, new_tokens=256),
    # Trainer + LoRA, Trainer full
    S("meta-llama/Llama-3.2-1B", b=4, s=1024, method="lora", trainer=True),
    S("Qwen/Qwen2.5-1.5B", b=2, s=2048, method="lora", lora_targets="all-linear", trainer=True),
    S("Qwen/Qwen2.5-0.5B", b=4, s=1024, trainer=True),
    # sliding-window / hybrid attention KV
    S("google/gemma-2-9b", task="infer", b=1, s=4096, new_tokens=16, attention="eager"),
    S("google/gemma-3-1b-it", task="infer", b=4, s=4096, new_tokens=32),
    # the oracle's core grid, for a GPU-vs-oracle comparison
    S("Qwen/Qwen2.5-0.5B", b=2, s=2048),
    S("meta-llama/Llama-3.2-1B", b=1, s=1024),
    S("meta-llama/Llama-3.2-1B", b=4, s=1024, ckpt=True),
    S("meta-llama/Llama-3.2-1B", b=2, s=2048, attention="eager"),
    S("Qwen/Qwen3-0.6B", b=2, s=1024),
    S("meta-llama/Llama-3.2-1B", b=4, s=1024, method="lora"),
    S("Qwen/Qwen2.5-1.5B", b=2, s=2048, method="lora", lora_targets="all-linear"),
    S("gpt2", b=8, s=1024),
    S("gpt2", b=4, s=512, precision="fp32"),
    S("microsoft/phi-2", b=1, s=1024),
    S("meta-llama/Llama-3.2-3B", b=2, s=4096),
    S("meta-llama/Llama-3.2-1B", task="infer", b=4, s=2048),
    S("Qwen/Qwen3-8B", task="infer", b=2, s=4096),
]

CONTEXT = r"""
import json, pynvml, torch
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
used = lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used
base = used()
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
ctx = used() - base - torch.cuda.memory_reserved()
a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
(a @ a).sum().item(); torch.cuda.synchronize()
blas = used() - base - torch.cuda.memory_reserved() - ctx
info = pynvml.nvmlDeviceGetMemoryInfo(h)
print(json.dumps(dict(context_bytes=ctx, cublas_bytes=blas, reserved=torch.cuda.memory_reserved(),
                      total=info.total, baseline_used=base, torch=torch.__version__,
                      cuda=torch.version.cuda, driver=pynvml.nvmlSystemGetDriverVersion(),
                      gpu=pynvml.nvmlDeviceGetName(h))))
"""

CHILD = r"""
import json, os, sys, time, torch, pynvml
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
used = lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used
base = used()
st = json.loads(sys.argv[1]); cfg_path = sys.argv[2]
import transformers
from transformers import AutoConfig, AutoModelForCausalLM
cfg = AutoConfig.from_pretrained(cfg_path)
half = torch.float16 if st["precision"] in ("fp16", "mixed-fp16") else torch.bfloat16
store = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(st["precision"], torch.float32)
b, s = st["batch"], st["seq"]
t0 = time.time()
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(cfg, dtype=store, attn_implementation=st["attention"])
if st["method"] == "lora":
    from peft import LoraConfig, get_peft_model
    t = st["lora_targets"]
    targets = "all-linear" if t == "all-linear" else [m + "_proj" for m in t.split(",")]
    model = get_peft_model(model, LoraConfig(r=st["lora_rank"], lora_alpha=16,
                                             target_modules=targets, lora_dropout=0.0))
torch.cuda.synchronize()
weights_alloc = torch.cuda.memory_allocated()
mixed = st["precision"].startswith("mixed")
if st["task"] == "train" and st["trainer"]:
    from transformers import Trainer, TrainingArguments
    class Rand(torch.utils.data.Dataset):
        def __len__(self):
            return 4 * b
        def __getitem__(self, i):
            ids = torch.randint(0, cfg.vocab_size, (s,))
            return {"input_ids": ids, "labels": ids.clone()}
    args = TrainingArguments(output_dir="/tmp/oomkit-peaks-trainer", per_device_train_batch_size=b,
                             max_steps=2, learning_rate=1e-5, save_strategy="no", report_to=[],
                             logging_strategy="no", bf16=(half == torch.bfloat16),
                             fp16=(half == torch.float16),
                             gradient_checkpointing=st["ckpt"], dataloader_num_workers=0)
    Trainer(model=model, args=args, train_dataset=Rand()).train()
elif st["task"] == "train":
    if st["ckpt"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if st["method"] == "lora":
            model.enable_input_require_grads()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = {
        "adamw": lambda: torch.optim.AdamW(params, lr=1e-5),
        "sgd": lambda: torch.optim.SGD(params, lr=1e-5),
        "sgd-momentum": lambda: torch.optim.SGD(params, lr=1e-5, momentum=0.9),
    }[st["optimizer"]]()
    for i in range(2):
        ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
        with torch.autocast("cuda", dtype=half, enabled=mixed):
            out = model(input_ids=ids, labels=ids, use_cache=False)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del out
else:
    model.eval()
    with torch.no_grad():
        ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
        if st["new_tokens"] == 0:
            out = model(input_ids=ids, use_cache=False)
            del out
        else:
            n = st["new_tokens"]
            gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                 pad_token_id=0, eos_token_id=None)
            assert gen.shape == (b, s + n), gen.shape
            del gen
torch.cuda.synchronize()
print(json.dumps(dict(
    peak_allocated=torch.cuda.max_memory_allocated(),
    peak_reserved=torch.cuda.max_memory_reserved(),
    reserved_end=torch.cuda.memory_reserved(),
    device_used=used() - base,
    weights_allocated=weights_alloc,
    seconds=round(time.time() - t0, 2),
    torch=torch.__version__, transformers=transformers.__version__)))
"""


def model_file(binary, repo):
    out = subprocess.run([binary, "estimate", repo, "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["model"]["id"].replace("/", "__") + ".json"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--oomkit", default=str(ROOT / "target" / "release" / "oomkit"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--only", default="")
    ap.add_argument("--budget", type=float, default=1e9, help="stop starting setups after this many seconds")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--from", dest="first", type=int, default=0, help="start at this GRID index")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    start = time.time()

    def emit(row):
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)

    p = subprocess.run([a.python, "-c", CONTEXT], capture_output=True, text=True, timeout=a.timeout)
    emit(dict(kind="context", result=json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0
              else {"error": p.stderr.strip().splitlines()[-1:]}))
    for st in GRID[a.first:]:
        if a.only and a.only not in json.dumps(st):
            continue
        if time.time() - start > a.budget:
            emit(dict(kind="skipped", setup=st, why="budget"))
            continue
        st = dict(st, model_file=model_file(a.oomkit, st["model"]))
        try:
            p = subprocess.run([a.python, "-c", CHILD, json.dumps(st), str(MODELS / st["model_file"])],
                               capture_output=True, text=True, timeout=a.timeout)
            if p.returncode == 0:
                res = json.loads(p.stdout.strip().splitlines()[-1])
            else:
                res = {"error": "\n".join(p.stderr.strip().splitlines()[-6:])}
        except subprocess.TimeoutExpired:
            res = {"error": f"timeout after {a.timeout} s"}
        emit(dict(kind="setup", setup=st, result=res))


if __name__ == "__main__":
    main()
