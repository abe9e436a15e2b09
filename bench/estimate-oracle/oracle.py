"""Compare `oomkit estimate` with PyTorch's MemTracker on fake tensors (the CPU
oracle of docs/reference/memory-estimation.md §6) on a grid of setups.

Each setup runs the real Hugging Face model code, built from the catalogue's
config.json under FakeTensorMode (shapes and dtypes only: no data, no GPU),
in its own process, and reads MemTracker's peak:

- train: two steps of forward, backward, optimizer step, zero_grad; the
  training loop holds the model output (`out = model(...)`,
  `out.loss.backward()`) as most hand-written loops do, which keeps the
  half-precision logits alive through backward — the estimator assumes the
  same (HF `Trainer` drops them before backward and peaks lower by s·b·V·β).
  `mixed-*` runs the forward under `torch.autocast`; `lora` wraps the model
  with peft.
- transformers' packed-sequence check reads position_ids, which fake
  tensors cannot: the oracle answers "not packed", as a real run would, so
  no 4-D causal mask is built and SDPA keeps grouped KV heads.
- infer: `torch.no_grad()`; `new_tokens == 0` is one forward without a cache
  (`use_cache=False`); otherwise a prefill with `logits_to_keep=1` and a
  decode loop into a `DynamicCache`, as `generate` does (without its
  data-dependent stopping checks, which fake tensors cannot run).

MemTracker counts tensor storages: compare it with `peak_allocated_bytes`
(`torch.cuda.max_memory_allocated()`), which also excludes the CUDA context
and the allocator's caching. CPU kernels can save slightly different tensors
than CUDA ones (attention especially); the CPU SDPA kernel is a flash kernel
like the CUDA default.

Usage: python bench/estimate-oracle/oracle.py [--oomkit target/release/oomkit]
       [--only SUBSTRING] [--json OUT.json]
Needs: torch, transformers, peft (pip; the CUDA wheel works on a CPU-only
machine). Results are cached in bench/data/oracle-cache.json (or $ORACLE_CACHE; keyed
by the setup and the installed torch/transformers versions).
Generation under transformers 4.35 (a tuple KV cache): `--legacy --python PY` with a
Python whose transformers is 4.35.2.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "crates" / "oomkit_estimate" / "models"
CACHE = pathlib.Path(os.environ.get("ORACLE_CACHE", ROOT / "bench" / "data" / "oracle-cache.json"))
# Bumped whenever the child program changes what it measures (invalidates the cache).
ORACLE_REVISION = 2


def S(model, task="train", b=1, s=512, **kw):
    d = dict(model=model, task=task, batch=b, seq=s, ckpt=False, precision="bf16",
             method="full", attention="sdpa", optimizer="adamw", new_tokens=0,
             lora_rank=16, lora_targets="q,v", sac=None, stack=None)
    d.update(kw)
    return d


GRID = [
    # full fine-tuning, pure bf16, AdamW, SDPA
    S("Qwen/Qwen2.5-0.5B", b=1, s=512),
    S("Qwen/Qwen2.5-0.5B", b=2, s=2048),
    S("Qwen/Qwen2.5-0.5B", b=2, s=2048, ckpt=True),
    S("meta-llama/Llama-3.2-1B", b=1, s=1024),
    S("meta-llama/Llama-3.2-1B", b=4, s=1024, ckpt=True),
    S("meta-llama/Llama-3.2-3B", b=2, s=4096),
    S("Qwen/Qwen3-0.6B", b=2, s=1024),
    S("Qwen/Qwen3-1.7B", b=1, s=4096, ckpt=True),
    S("microsoft/phi-2", b=1, s=1024),
    S("microsoft/phi-1_5", b=4, s=1024),
    S("gpt2", b=8, s=1024),
    S("gpt2-xl", b=2, s=1024, ckpt=True),
    S("mistralai/Mistral-7B-v0.1", b=1, s=4096, ckpt=True),
    S("google/gemma-2-9b", b=1, s=2048, attention="eager"),
    S("microsoft/Phi-3-mini-4k-instruct", b=2, s=2048),
    # attention kernels
    S("Qwen/Qwen2.5-1.5B", b=2, s=1024, attention="eager"),
    S("meta-llama/Llama-3.2-1B", b=2, s=2048, attention="eager"),
    # precision and optimizers
    S("meta-llama/Llama-3.2-1B", b=2, s=1024, precision="mixed-bf16"),
    S("Qwen/Qwen2.5-0.5B", b=4, s=512, precision="mixed-bf16", ckpt=True),
    S("gpt2", b=4, s=512, precision="fp32"),
    S("Qwen/Qwen2.5-0.5B", b=2, s=1024, optimizer="sgd"),
    S("Qwen/Qwen2.5-0.5B", b=2, s=1024, optimizer="sgd-momentum"),
    # LoRA on a bf16 base
    S("meta-llama/Llama-3.2-1B", b=4, s=1024, method="lora"),
    S("meta-llama/Llama-3.2-3B", b=2, s=2048, method="lora", lora_rank=64,
      lora_targets="all-linear", ckpt=True),
    S("Qwen/Qwen2.5-1.5B", b=2, s=2048, method="lora", lora_targets="all-linear"),
    # reconstructed configs and other architectures
    S("stabilityai/stablelm-base-alpha-3b", b=2, s=1024),
    S("tiiuae/falcon-7b", b=1, s=2048, ckpt=True),
    S("mistralai/Mixtral-8x7B-v0.1", b=1, s=1024, ckpt=True),
    S("Qwen/Qwen3-30B-A3B", b=1, s=1024, ckpt=True),
    # inference
    S("meta-llama/Llama-3.2-1B", task="infer", b=4, s=2048),
    S("Qwen/Qwen2.5-1.5B", task="infer", b=8, s=1024, new_tokens=64),
    S("meta-llama/Llama-3.2-3B", task="infer", b=1, s=8192, new_tokens=32),
    S("mistralai/Mistral-7B-v0.1", task="infer", b=4, s=2048, new_tokens=128),
    S("gpt2", task="infer", b=16, s=512, new_tokens=64),
    S("microsoft/phi-2", task="infer", b=4, s=1024, new_tokens=32),
    S("google/gemma-2-9b", task="infer", b=1, s=4096, new_tokens=16, attention="eager"),
    S("Qwen/Qwen3-8B", task="infer", b=2, s=4096),
    # Mixed precision where activations set the peak: the fp32 stream's norms and per-linear casts.
    S("Qwen/Qwen2.5-1.5B", b=2, s=2048, precision="mixed-bf16"),
    # Gemma 3: two rotary sets and an explicit SDPA sliding-window mask in the prompt pass.
    S("google/gemma-3-1b-it", task="infer", b=4, s=4096, new_tokens=32),
    # Eager attention in training beside SDPA on the same setups (GPT-2 and BERT
    # are left out: their attention dropout saves a 2-byte mask on the CPU where
    # CUDA saves a 1-byte one, see the README).
    S("Qwen/Qwen2.5-0.5B", b=2, s=2048, attention="eager"),
    S("meta-llama/Llama-3.2-1B", b=2, s=2048, attention="eager", ckpt=True),
    # Selective activation checkpointing: torchtitan's op policy, every k-th layer.
    # Selective rows and the phi-1_5/transformers 4.35 rows are held out of calibration:
    # the formulas were written from the frameworks' source before they ran and
    # nothing was tuned on them (pythia and OPT were used to fix eager and ReLU).
    S("meta-llama/Llama-3.2-1B", b=2, s=2048, sac="op", holdout=True),
    S("meta-llama/Llama-3.2-1B", b=2, s=2048, sac="2", holdout=True),
    S("Qwen/Qwen2.5-1.5B", b=2, s=2048, sac="op", holdout=True),
    S("Qwen/Qwen2.5-1.5B", b=2, s=2048, sac="3", holdout=True),
    S("meta-llama/Llama-3.2-3B", b=1, s=4096, sac="op", attention="eager", holdout=True),
    S("Qwen/Qwen3-1.7B", b=2, s=2048, sac="op", method="lora", lora_targets="all-linear",
      holdout=True),
    # LayerNorm architectures whose eager code upcasts the softmax to fp32 (GPT-NeoX, OPT, Phi).
    S("EleutherAI/pythia-410m", b=4, s=1024, attention="eager"),
    S("facebook/opt-1.3b", b=2, s=1024, attention="eager"),
    S("microsoft/phi-1_5", b=2, s=1024, attention="eager", holdout=True),
]

# Generation under transformers 4.35 (tuple KV cache): run with a Python whose
# transformers is 4.35 (--python, --only legacy).
LEGACY = [
    # (Llama 3.x configs' rope_scaling postdates 4.35: SmolLM2 is the Llama architecture.)
    S("HuggingFaceTB/SmolLM2-1.7B", task="infer", b=8, s=1024, new_tokens=32, attention="eager",
      stack="transformers@4.35", holdout=True),
    S("mistralai/Mistral-7B-v0.1", task="infer", b=4, s=2048, new_tokens=16, attention="eager",
      stack="transformers@4.35", holdout=True),
    # Not held out: its first run (-9.0 %) found the prompt cache holding c_attn's
    # queries (stack.rs first_step_previous_cache_bytes).
    S("gpt2", task="infer", b=16, s=512, new_tokens=64, attention="eager",
      stack="transformers@4.35"),
]

# FSDP2 (`fully_shard` per decoder layer and on the root, as accelerate and
# torchtitan wrap a decoder) over a fake process group of `world` ranks
# (torch.testing._internal.distributed.fake_pg: collectives do nothing, every
# buffer is allocated with its real size), tracked by FSDPMemTracker. Setups
# with `offload` read the GPU-resident part of the peak: FSDP2's
# CPUOffloadPolicy keeps the sharded parameters, gradients and optimizer
# states on the CPU, so those categories are taken out (on this CPU-only
# oracle every tensor is on the CPU). DeepSpeed cannot run here: its ZeRO
# needs an accelerator (deepspeed.accelerator picks CUDA, or a CPU build
# with oneCCL), not gloo on fake tensors.
FSDP_GRID = [
    S("Qwen/Qwen2.5-0.5B", b=4, s=2048, precision="mixed-bf16", fsdp=2, world=2),
    S("meta-llama/Llama-3.2-1B", b=2, s=2048, fsdp=2, world=4),
    S("meta-llama/Llama-3.2-1B", b=4, s=2048, precision="mixed-bf16", ckpt=True, fsdp=2, world=8),
    S("Qwen/Qwen3-0.6B", b=2, s=2048, precision="mixed-bf16", fsdp=2, world=2),
    S("meta-llama/Llama-3.2-1B", b=2, s=2048, precision="mixed-bf16", fsdp=2, world=8, offload=True),
    S("Qwen/Qwen2.5-1.5B", b=2, s=2048, precision="mixed-bf16", ckpt=True, fsdp=2, world=8, offload=True),
    # untied embedding and head: the root unit holds both
    S("microsoft/phi-1_5", b=4, s=1024, precision="mixed-bf16", fsdp=2, world=4),
    S("mistralai/Mistral-7B-v0.1", b=1, s=4096, precision="mixed-bf16", ckpt=True, fsdp=2, world=8, offload=True),
]

# FSDP_GRID rows kept out while the sharding model was built (the others were
# consulted: the Mistral offload row showed the recompute in the last block's
# backward).
FSDP_CHECKS = {1, 3, 5, 6}


CHILD = r"""
import json, pathlib, sys, torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache
import transformers.masking_utils as mu
# Without a cache or an attention mask, transformers looks for packed
# sequences in position_ids: a data-dependent check that fake tensors cannot
# answer, so it assumes packing, builds a 4-D mask and SDPA repeats the KV
# heads. A real run finds no packing and calls SDPA with is_causal=True.
mu.find_packed_sequence_indices = lambda position_ids: None


# MemTracker installs gradient hooks on every parameter of every module it
# sees, and PyTorch refuses hooks on frozen ones (a LoRA base): those get a
# handle that does nothing, as they never receive a gradient.
class _NoHook:
    def remove(self):
        pass


def _frozen_ok(register):
    def wrapped(self, hook):
        return register(self, hook) if self.requires_grad else _NoHook()
    return wrapped


torch.Tensor.register_hook = _frozen_ok(torch.Tensor.register_hook)
torch.Tensor.register_post_accumulate_grad_hook = _frozen_ok(
    torch.Tensor.register_post_accumulate_grad_hook)
st = json.loads(sys.argv[1]); cfg_path = sys.argv[2]
cfg = AutoConfig.from_pretrained(cfg_path)
cfg._attn_implementation = st["attention"]
if st["attention"] == "sdpa":
    # CUDA's flash/efficient SDPA kernels apply attention dropout inside the
    # kernel; CPU's flash kernel cannot and falls back to the math kernel,
    # which materialises the s x s probabilities. Dropout off keeps the CPU on
    # the flash kernel, as CUDA would be.
    for k in ("attn_pdrop", "attention_dropout", "attention_probs_dropout_prob"):
        if hasattr(cfg, k):
            setattr(cfg, k, 0.0)
half = st["precision"] in ("bf16", "mixed-bf16") and torch.bfloat16 or torch.float16
store = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(st["precision"], torch.float32)
torch.set_default_dtype(store)
b, s = st["batch"], st["seq"]
with FakeTensorMode():
    # The dtype explicitly: from_config otherwise takes config.json's torch_dtype
    # (gemma-2-9b ships float32) over the default dtype.
    model = AutoModelForCausalLM.from_config(cfg, dtype=store)
    if st["method"] == "lora":
        from peft import LoraConfig, get_peft_model
        t = st["lora_targets"]
        targets = "all-linear" if t == "all-linear" else [m + "_proj" for m in t.split(",")]
        # peft moves each new adapter to its base layer's device, which
        # FakeTensor parameters cannot do in place (they only swap, and the
        # swap fails): they are on the "cpu" already, so the move is skipped.
        # Adapters are created in fp32, as peft's default
        # autocast_adapter_dtype upcasts them on a half-precision base.
        to = torch.nn.Module.to
        torch.nn.Module.to = lambda self, *a, **k: self
        torch.set_default_dtype(torch.float32)
        model = get_peft_model(model, LoraConfig(r=st["lora_rank"], lora_alpha=16,
                                                 target_modules=targets, lora_dropout=0.0))
        torch.nn.Module.to = to
        torch.set_default_dtype(store)
    if st.get("sac"):
        # Selective activation checkpointing as torchtitan and torchtune apply
        # it to each decoder layer (torchtitan distributed/activation_checkpoint.py
        # SelectiveAC._wrap_block; torchtune training/activations.py).
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            checkpoint_wrapper)
        from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
        from torch._functorch.partitioners import get_default_op_list
        base = model.base_model.model if st["method"] == "lora" else model
        layers = base.model.layers
        if st["sac"] == "op":
            save = {op.default for op in get_default_op_list().compute_intensive_ops}
            save |= {torch.ops.aten._scaled_dot_product_cudnn_attention.default,
                     torch.ops.aten._scaled_dot_product_attention_math.default,
                     torch.ops.aten.linear.default, torch.ops.aten.max.default,
                     # CUDA's flash SDPA op is in the list; the CPU kernel stands for it.
                     torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}
            mm_ops = (torch.ops.aten.mm.default, torch.ops.aten.linear.default)

            def policy():
                meta = {"forward": 0, "recompute": 0}

                def p(ctx, func, *args, **kwargs):
                    mode = "recompute" if ctx.is_recompute else "forward"
                    if func in mm_ops:
                        meta[mode] += 1
                    if func in save and not (func in mm_ops and meta[mode] % 2 == 0):
                        return CheckpointPolicy.MUST_SAVE
                    return CheckpointPolicy.PREFER_RECOMPUTE
                return p

            for i in range(len(layers)):
                layers[i] = checkpoint_wrapper(
                    layers[i], context_fn=lambda: create_selective_checkpoint_contexts(policy()),
                    preserve_rng_state=False)
        else:
            k = int(st["sac"])
            for i in range(len(layers)):
                if (i + 1) % k == 0:
                    layers[i] = checkpoint_wrapper(layers[i], preserve_rng_state=False)
        if st["method"] == "lora":
            model.enable_input_require_grads()
    mt = MemTracker()
    if st["task"] == "train":
        if st["ckpt"]:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if st["method"] == "lora":
                model.enable_input_require_grads()
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = {
            "adamw": lambda: torch.optim.AdamW(params, lr=1e-5, foreach=True),
            "sgd": lambda: torch.optim.SGD(params, lr=1e-5),
            "sgd-momentum": lambda: torch.optim.SGD(params, lr=1e-5, momentum=0.9),
        }[st["optimizer"]]()
        mt.track_external(model, opt)
        mixed = st["precision"].startswith("mixed")
        with mt:
            for i in range(2):
                ids = torch.randint(0, cfg.vocab_size, (b, s))
                with torch.autocast("cpu", dtype=half, enabled=mixed):
                    out = model(input_ids=ids, labels=ids, use_cache=False)
                out.loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del out
                if i == 0:
                    mt.reset_mod_stats()
    else:
        model.eval()
        mt.track_external(model)
        with mt, torch.no_grad():
            ids = torch.randint(0, cfg.vocab_size, (b, s))
            if st["new_tokens"] == 0:
                out = model(input_ids=ids, use_cache=False)
                del out
            else:
                cache = DynamicCache(config=cfg)
                out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
                mt.reset_mod_stats()
                for _ in range(st["new_tokens"]):
                    nxt = out.logits[:, -1:].argmax(-1)
                    mt.reset_mod_stats()
                    out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
                del out, cache
    peak = mt.get_tracker_snapshot("peak")
cats = {}
for dev, c in peak.items():
    if c.get("Total", 0) > cats.get("Total", 0):
        cats = {str(k).split(".")[-1]: int(v) for k, v in c.items()}
print(json.dumps(cats))
"""


# transformers 4.35: no DynamicCache, no attention-implementation switch (eager),
# `torch_dtype=`; generate's greedy loop keeps `outputs` (the previous cache and
# the prompt's logits) bound while the next forward runs.
LEGACY_CHILD = r"""
import json, sys, torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from transformers import AutoConfig, AutoModelForCausalLM
st = json.loads(sys.argv[1]); cfg_path = sys.argv[2]
cfg = AutoConfig.from_pretrained(cfg_path)
store = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(st["precision"], torch.float32)
torch.set_default_dtype(store)
b, s = st["batch"], st["seq"]
with FakeTensorMode():
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=store)
    model.eval()
    mt = MemTracker()
    mt.track_external(model)
    with mt, torch.no_grad():
        ids = torch.randint(0, cfg.vocab_size, (b, s))
        mask = torch.ones(b, s, dtype=torch.long)
        outputs = model(input_ids=ids, attention_mask=mask, use_cache=True)
        mt.reset_mod_stats()
        for _ in range(st["new_tokens"]):
            mt.reset_mod_stats()
            nxt = outputs.logits[:, -1, :].argmax(-1)[:, None]
            mask = torch.cat([mask, torch.ones(b, 1, dtype=torch.long)], dim=-1)
            outputs = model(input_ids=nxt, attention_mask=mask,
                            past_key_values=outputs.past_key_values, use_cache=True)
        del outputs
    peak = mt.get_tracker_snapshot("peak")
cats = {}
for dev, c in peak.items():
    if c.get("Total", 0) > cats.get("Total", 0):
        cats = {str(k).split(".")[-1]: int(v) for k, v in c.items()}
print(json.dumps(cats))
"""


CHILD_FSDP = r"""
import json, sys, torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch._subclasses.fake_tensor import FakeTensorMode
from transformers import AutoConfig, AutoModelForCausalLM
import transformers.masking_utils as mu
mu.find_packed_sequence_indices = lambda position_ids: None
st = json.loads(sys.argv[1]); cfg_path = sys.argv[2]
W = st["world"]
dist.init_process_group("fake", rank=0, world_size=W, store=FakeStore())
mesh = init_device_mesh("cpu", (W,))
cfg = AutoConfig.from_pretrained(cfg_path)
cfg._attn_implementation = st["attention"]
for k in ("attn_pdrop", "attention_dropout", "attention_probs_dropout_prob"):
    if hasattr(cfg, k):
        setattr(cfg, k, 0.0)
mixed = st["precision"].startswith("mixed")
half = torch.bfloat16
store = torch.float32 if mixed else {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[st["precision"]]
torch.set_default_dtype(store)
b, s = st["batch"], st["seq"]
with FakeTensorMode():
    model = AutoModelForCausalLM.from_config(cfg, dtype=store)
    mp = MixedPrecisionPolicy(param_dtype=half, reduce_dtype=half) if mixed else MixedPrecisionPolicy()
    if st["ckpt"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=False)
    mt = FSDPMemTracker(model, opt)
    ids0 = torch.randint(0, cfg.vocab_size, (b, s))
    mt.track_inputs((ids0,))
    with mt:
        for i in range(2):
            ids = torch.randint(0, cfg.vocab_size, (b, s))
            out = model(input_ids=ids, labels=ids, use_cache=False)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del out
            if i == 0:
                mt.reset_mod_stats()
    peak = mt.get_tracker_snapshot("peak")
    # With CPU offload the sharded parameters, gradients and optimizer states
    # live on the CPU: the GPU's peak is the largest remainder over every
    # module snapshot of the second step (forward and backward peaks).
    gpu_part = 0
    for stats in mt.memory_tracking.values():
        for snaps in stats.snapshots.values():
            for snap in snaps:
                for dev, c in snap.items():
                    c = {str(k).split(".")[-1]: int(v) for k, v in c.items()}
                    rest = c.get("Total", 0) - c.get("SHARDED_PARAM", 0) - c.get("SHARDED_GRAD", 0) - c.get("OPT", 0)
                    gpu_part = max(gpu_part, rest)
cats = {}
for dev, c in peak.items():
    if c.get("Total", 0) > cats.get("Total", 0):
        cats = {str(k).split(".")[-1]: int(v) for k, v in c.items()}
cats["GPU_PART"] = gpu_part
print(json.dumps(cats))
"""


# Bumped whenever the FSDP child changes what it measures for CPU-offload
# setups (their GPU part).
FSDP_REVISION = 2


def key(st, versions):
    # `holdout` marks a row kept out of calibration; it does not change the run.
    st = {k: v for k, v in st.items() if k != "holdout"}
    if st.get("offload"):
        return json.dumps([st, versions, ORACLE_REVISION, FSDP_REVISION], sort_keys=True)
    return json.dumps([st, versions, ORACLE_REVISION], sort_keys=True)


def oracle(st, python):
    cfg = MODELS / (st["model_file"])
    child = LEGACY_CHILD if st.get("stack") else CHILD_FSDP if st.get("fsdp") else CHILD
    p = subprocess.run([python, "-c", child, json.dumps(st), str(cfg)],
                       capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(last[:160])
    return json.loads(p.stdout.strip().splitlines()[-1])


def estimate(binary, st):
    args = [binary, "estimate", st["model"], "--task", st["task"], "--precision", st["precision"],
            "--batch", str(st["batch"]), "--seq", str(st["seq"]), "--attention", st["attention"],
            "--format", "json"]
    if st["task"] == "train":
        args += ["--method", st["method"], "--optimizer", st["optimizer"]]
        if st.get("fsdp"):  # the FSDP child steps AdamW(foreach=False)
            args.append("--no-foreach")
        if st["method"] == "lora":
            args += ["--lora-rank", str(st["lora_rank"]), "--lora-targets", st["lora_targets"]]
        if st["ckpt"]:
            args.append("--grad-checkpointing")
        if st.get("sac"):
            args += ["--checkpointing", "selective", "--ac-option", st["sac"]]
        if st.get("trainer"):  # bench/gpu's Trainer setups
            args.append("--trainer")
        if st.get("fsdp"):
            args += ["--fsdp", "--fsdp-version", str(st["fsdp"]), "--gpus", str(st["world"])]
            if st.get("offload"):
                args += ["--offload", "params"]
    else:
        args += ["--new-tokens", str(st["new_tokens"])]
    if st.get("stack"):
        args += ["--stack", st["stack"]]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def model_file(binary, repo):
    out = subprocess.run([binary, "estimate", repo, "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["model"]["id"].replace("/", "__") + ".json"


def label(st):
    x = f"{st['task']} {st['precision']}"
    if st["task"] == "train":
        x += f" {st['method']}" + (f" r{st['lora_rank']} {st['lora_targets']}" if st["method"] == "lora" else "")
        x += f" {st['optimizer']}" + (" ckpt" if st["ckpt"] else "")
        x += f" sac-{st['sac']}" if st.get("sac") else ""
    else:
        x += f" +{st['new_tokens']} new"
    if st.get("fsdp"):
        x += f" fsdp{st['fsdp']}x{st['world']}" + (" offload" if st.get("offload") else "")
    return x + f" {st['attention']}" + (f" {st['stack']}" if st.get("stack") else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oomkit", default=str(ROOT / "target" / "release" / "oomkit"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--cached-only", action="store_true",
                    help="skip setups the cache does not hold (no torch run)")
    ap.add_argument("--legacy", action="store_true",
                    help="the transformers 4.35 generation grid (LEGACY); --python must have 4.35")
    ap.add_argument("--append", action="store_true",
                    help="with --rows: add to the rows already in the file (replacing same ids)")
    ap.add_argument("--rows", default="",
                    help="write the oracle peaks as test rows (crates/oomkit_estimate/tests/oracle.json)")
    ap.add_argument("--sharded", action="store_true",
                    help="run the FSDP2 grid (FSDP_GRID) instead of the single-GPU one")
    ap.add_argument("--sharded-rows", default="",
                    help="with --sharded: replace the O- rows of this table "
                         "(crates/oomkit_estimate/tests/accuracy_sharded.json)")
    a = ap.parse_args()
    versions = subprocess.run(
        [a.python, "-c", "import torch, transformers\ntry:\n import peft; p = peft.__version__\nexcept ImportError:\n p = 'no peft'\nprint(torch.__version__, transformers.__version__, p)"],
        check=True, capture_output=True, text=True).stdout.strip()
    grid = LEGACY if a.legacy else GRID
    cache = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    rows, errs = [], []
    print(f"oracle: {versions}\n")
    print("| model | setup | batch × seq | oracle | estimate | error |")
    print("|---|---|---|---|---|---|")
    for st in (FSDP_GRID if a.sharded else grid):
        if a.only and a.only not in json.dumps(st):
            continue
        st = dict(st, model_file=model_file(a.oomkit, st["model"]))
        k = key(st, versions)
        if k not in cache and a.cached_only:
            continue
        if k not in cache:
            try:
                cache[k] = oracle(st, a.python)
            except Exception as e:  # an architecture the installed transformers cannot fake
                cache[k] = {"error": str(e)}
            CACHE.parent.mkdir(parents=True, exist_ok=True)
            CACHE.write_text(json.dumps(cache, indent=1))
        o = cache[k]
        if "error" in o:
            print(f"| {st['model']} | {label(st)} | {st['batch']} × {st['seq']} | failed: {o['error']} | | |")
            continue
        est = estimate(a.oomkit, st)
        e, m = est["peak_allocated_bytes"], measured(st, o)
        err = (e - m) / m * 100
        errs.append(abs(err))
        rows.append(dict(setup=st, oracle=o, estimate=est["peak_allocated_bytes"],
                         components=est["components"], peak_phase=est["peak_phase"]))
        print(f"| {st['model']} | {label(st)} | {st['batch']} × {st['seq']} | "
              f"{m / 2**30:.2f} GiB | {e / 2**30:.2f} GiB | {err:+.1f} % |")
        sys.stdout.flush()
    if errs:
        print(f"\n{len(errs)} setups, median |error| {statistics.median(errs):.1f} %, "
              f"worst {max(errs):.1f} %")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(dict(versions=versions, rows=rows), indent=1))
    if a.rows:
        out = []
        for r in rows:
            st = r["setup"]
            setup = {k: st[k] for k in ("task", "precision", "batch", "seq", "attention")}
            if st.get("stack"):
                setup["stack"] = st["stack"]
            if st["task"] == "train":
                setup.update(method=st["method"], optimizer=st["optimizer"],
                             grad_checkpointing=st["ckpt"])
                if st.get("sac"):
                    setup["selective_ac"] = st["sac"]
                if st["method"] == "lora":
                    setup.update(lora_rank=st["lora_rank"], lora_targets=st["lora_targets"])
            else:
                setup["new_tokens"] = st["new_tokens"]
            extra = {"holdout": True} if st.get("holdout") else {}
            out.append(dict(
                id=f"O-{st['model'].split('/')[-1]}-{label(st).replace(' ', '-')}-{st['batch']}x{st['seq']}",
                **extra,
                source=f"CPU oracle (bench/estimate-oracle/oracle.py): MemTracker peak on fake tensors, {versions}",
                model=st["model"], setup=setup, metric="allocated", kind=st["task"],
                grade="O", measured_bytes=r["oracle"]["Total"]))
        if a.append and pathlib.Path(a.rows).exists():
            ids = {r["id"] for r in out}
            old = json.loads(pathlib.Path(a.rows).read_text())["rows"]
            out = [r for r in old if r["id"] not in ids] + out
        pathlib.Path(a.rows).write_text(json.dumps(
            {"note": "Written by bench/estimate-oracle/oracle.py --rows; regenerate, do not edit.",
             "rows": out}, indent=1) + "\n")
    if a.sharded_rows:
        path = pathlib.Path(a.sharded_rows)
        table = json.loads(path.read_text())
        keep = [r for r in table["rows"] if not r["id"].startswith("O-")]
        out = []
        for r in rows:
            st = r["setup"]
            setup = {k: st[k] for k in ("task", "precision", "batch", "seq", "attention")}
            setup.update(method=st["method"], optimizer=st["optimizer"],
                         grad_checkpointing=st["ckpt"], foreach=False, gpus=st["world"], zero=3,
                         sharding={"framework": f"fsdp{st['fsdp']}"})
            if st.get("offload"):
                setup["offload"] = "params"
            what = ("GPU-resident peak (the largest Total - SHARDED_PARAM - SHARDED_GRAD - OPT "
                    "over the module snapshots)" if st.get("offload") else "peak")
            out.append(dict(
                id=f"O-{st['model'].split('/')[-1]}-{label(st).replace(' ', '-')}-{st['batch']}x{st['seq']}",
                source=f"CPU oracle (bench/estimate-oracle/oracle.py --sharded): FSDPMemTracker {what} "
                       f"on fake tensors over a fake process group of {st['world']} ranks, {versions}",
                model=st["model"], setup=setup, metric="allocated", kind="train", grade="O",
                calibration=FSDP_GRID.index({k: v for k, v in st.items() if k != "model_file"})
                not in FSDP_CHECKS,
                measured_bytes=measured(st, r["oracle"])))
        table["rows"] = keep + out
        path.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")


def measured(st, o):
    """The oracle's figure for `st`: the peak, or with CPU offload the largest
    GPU-resident remainder over the module snapshots (`GPU_PART`)."""
    if st.get("offload"):
        return o["GPU_PART"]
    return o["Total"]


if __name__ == "__main__":
    main()
