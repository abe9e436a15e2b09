"""Compare `oomkit estimate --zero K` with DeepSpeed ZeRO-1/2/3 run for real on
the CPU (DeepSpeed's CPU accelerator, `DS_ACCELERATOR=cpu`, over `gloo`).

Without offload, DeepSpeed puts every buffer it would put on the GPU on its
accelerator device; with the CPU accelerator that device is the CPU, so the
tensor storages alive in one rank's process during a training step are the
ones a GPU run holds on its device. Each rank counts them with a
TorchDispatchMode entered before the model is built: every storage an
operator returns (`torch.empty`/`torch.zeros` flat buffers, gathered
parameters, gradients, optimizer states, activations) is added when it
first appears and dropped by a weakref callback when it dies. Its peak over
two training steps is the counterpart of `torch.cuda.max_memory_allocated()`
reset after `deepspeed.initialize`, i.e. oomkit's `peak_allocated_bytes`.

The check that the counter sees DeepSpeed's buffers: right after
`deepspeed.initialize`, the counted total is printed beside the sum of the
engine's own flat buffers (16-bit groups or partitions, fp32 master
partitions, reduce buckets).

The real model code runs (Hugging Face transformers, random init from the
catalogue's config.json, bf16, SDPA), with `"bf16": {"enabled": true}`, the
`AdamW` optimizer (DeepSpeed's FusedAdam, built for the CPU by DeepSpeed's
op builder on first use) and explicit bucket sizes (Hugging Face's `auto`
values: reduce hidden², prefetch 0.9·hidden², persistence 10·hidden), the
same ones passed to oomkit. The training loop holds the model output through
backward (`out = engine(...)`; `engine.backward(out.loss)`), as oomkit
assumes by default.

Limits: CPU kernels (attention and loss may save slightly different tensors
than CUDA's); no CUDA streams, so DeepSpeed takes its synchronous paths
(`is_synchronized_device()`): overlap_comm's second reduce bucket is still
allocated, but nothing is kept alive for a stream (`record_stream`); no
offload rows (offloaded and device tensors are both on the CPU here and
cannot be told apart); gloo's own buffers are not counted (neither are
NCCL's on a GPU).

Usage: python bench/estimate-oracle/deepspeed_oracle.py [--oomkit target/debug/oomkit]
       [--only SUBSTRING] [--rows crates/oomkit_estimate/tests/accuracy_sharded.json]
Needs: torch, transformers, deepspeed (pip; CPU is enough). Results are cached in
bench/data/deepspeed-oracle-cache.json (keyed by the setup and the versions).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "crates" / "oomkit_estimate" / "models"
CACHE = pathlib.Path(os.environ.get("DS_ORACLE_CACHE",
                                    ROOT / "bench" / "data" / "deepspeed-oracle-cache.json"))
TABLE = ROOT / "crates" / "oomkit_estimate" / "tests" / "accuracy_sharded.json"
# Bumped whenever the child changes what it measures (invalidates the cache).
REVISION = 1


def S(model, zero, world=2, b=1, s=256, **kw):
    d = dict(model=model, zero=zero, world=world, batch=b, seq=s, ckpt=False,
             overlap_comm=None, calibration=False)
    d.update(kw)
    return d


# calibration=True: the rows whose figures drove the DeepSpeed model's
# changes (crates/oomkit_estimate/src/sharding/zero.rs); the others were kept
# out as a check.
GRID = [
    S("HuggingFaceTB/SmolLM2-135M", 1),
    S("HuggingFaceTB/SmolLM2-135M", 2, calibration=True),
    S("HuggingFaceTB/SmolLM2-135M", 3, calibration=True),
    S("Qwen/Qwen2.5-0.5B", 2, b=2, s=512, calibration=True),
    S("Qwen/Qwen2.5-0.5B", 3, b=2, s=512, calibration=True),
    S("Qwen/Qwen2.5-0.5B", 3, world=4, b=1, s=512, ckpt=True),
    S("HuggingFaceTB/SmolLM2-135M", 1, world=4),
    S("HuggingFaceTB/SmolLM2-135M", 2, world=4),
    S("Qwen/Qwen2.5-0.5B", 2, b=2, s=512, ckpt=True, overlap_comm=True),
    S("Qwen/Qwen3-0.6B", 3, b=1, s=1024),
    # An untied head (GPT-NeoX); ZeRO-3 showed the input embedding staying gathered.
    S("EleutherAI/pythia-160m", 2, b=2, s=512),
    S("EleutherAI/pythia-160m", 3, b=2, s=512, calibration=True),
]


# The per-rank program: argv[1] is the setup, argv[2] the config.json, argv[3] the rank,
# argv[4] the port. Prints one JSON line (rank's peak and the check at init).
CHILD = r'''
import json, os, sys, weakref
st = json.loads(sys.argv[1]); cfg_path = sys.argv[2]; rank = int(sys.argv[3])
os.environ.update(DS_ACCELERATOR="cpu", RANK=str(rank), LOCAL_RANK=str(rank),
                  WORLD_SIZE=str(st["world"]), MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[4])
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
torch.set_num_threads(1)


class Live(TorchDispatchMode):
    """Bytes of the tensor storages alive, counted from their first
    appearance as an operator's output until they are freed."""

    def __init__(self):
        super().__init__()
        self.sizes = {}  # storage key -> bytes counted
        self.refs = {}
        self.now = 0
        self.peak = 0
        self.snap = None

    def _gone(self, key):
        self.now -= self.sizes.pop(key, 0)
        self.refs.pop(key, None)

    def see(self, t):
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            return
        s = t.untyped_storage()
        key = s._cdata
        n = s.nbytes()
        old = self.sizes.get(key)
        if old is None:
            if n == 0:
                return
            self.sizes[key] = n
            self.refs[key] = weakref.ref(s, lambda _r, k=key: self._gone(k))
            self.now += n
        elif old != n:  # resized in place
            self.sizes[key] = n
            self.now += n - old
        if self.now > self.peak:
            self.peak = self.now
            if self.snap is not None:  # the largest storages at a new peak (diagnostics)
                self.snap = sorted(self.sizes.values(), reverse=True)[:24]

    def reset_peak(self):
        self.peak = self.now

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            self.see(t)
        if func._overloadpacket in (torch.ops.aten.resize_, torch.ops.aten.set_):
            for t in tree_flatten((args, kwargs))[0]:
                self.see(t)
        return out


live = Live()
live.__enter__()

import deepspeed, transformers
deepspeed.init_distributed(dist_backend="gloo")
cfg = transformers.AutoConfig.from_pretrained(cfg_path)
cfg.torch_dtype = torch.bfloat16
model = transformers.AutoModelForCausalLM.from_config(
    cfg, torch_dtype=torch.bfloat16, attn_implementation="sdpa")
if st["ckpt"]:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
model.config.use_cache = False
ds = dict(train_micro_batch_size_per_gpu=st["batch"], gradient_accumulation_steps=1,
          bf16={"enabled": True}, gradient_clipping=0.0, steps_per_print=10**9,
          optimizer={"type": "AdamW", "params": {"lr": 1e-5, "weight_decay": 0.0}},
          zero_optimization=st["zero_optimization"])
engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds)
after_init = live.now

# What the engine itself holds right after initialize (the check that the
# counter sees DeepSpeed's flat buffers).
def nb(ts):
    seen, n = set(), 0
    for t in ts:
        if t is None or t.numel() == 0:
            continue
        s = t.untyped_storage()
        if s._cdata not in seen:
            seen.add(s._cdata); n += s.nbytes()
    return n
o = opt
if st["zero"] < 3:
    held = dict(bit16=nb(o.bit16_groups_flat), fp32=nb(o.single_partition_of_fp32_groups),
                buckets=nb(getattr(o, "ipg_buffer", None) or []))
else:
    held = dict(bit16=nb([p.ds_tensor for g in o.fp16_groups for p in g]
                         + [p for g in o.fp16_groups for p in g if p.ds_persist]),
                fp32=nb(o.fp32_partitioned_groups_flat),
                buckets=nb([o.ipg_buckets[k].buffer for k in o.ipg_buckets])
                if hasattr(o, "ipg_buckets") else 0,
                grad_partitions=nb([getattr(o, "grad_partitions_flat_buffer", None)]))

live.reset_peak()
g = torch.Generator().manual_seed(rank)
ids = torch.randint(0, cfg.vocab_size, (st["batch"], st["seq"]), generator=g)
peaks, phases = [], []
for step in range(2):
    ph = {}
    out = engine(input_ids=ids, labels=ids)
    ph["forward"] = live.peak
    live.reset_peak()
    live.snap = [] if os.environ.get("DS_ORACLE_SNAP") else None
    engine.backward(out.loss)
    ph["backward"] = live.peak
    ph["backward_largest"] = live.snap
    live.reset_peak()
    live.snap = [] if os.environ.get("DS_ORACLE_SNAP") else None
    engine.step()
    del out
    ph["step"] = live.peak
    ph["step_largest"] = live.snap
    live.snap = None
    ph["end"] = live.now
    live.reset_peak()
    peaks.append(max(ph["forward"], ph["backward"], ph["step"]))
    phases.append(ph)
print(json.dumps(dict(rank=rank, after_init=after_init, held=held, peaks=peaks,
                      phases=phases, end=live.now)), flush=True)
'''


def versions(python):
    out = subprocess.run(
        [python, "-c", "import torch, transformers, deepspeed; "
                       "print(torch.__version__, transformers.__version__, deepspeed.__version__)"],
        env=dict(os.environ, DS_ACCELERATOR="cpu"), capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def ds_zero(cfg, st):
    """The zero_optimization section: Hugging Face's `auto` values for the buckets."""
    h = cfg["hidden_size"]
    z = dict(stage=st["zero"], contiguous_gradients=True,
             reduce_bucket_size=h * h, allgather_bucket_size=h * h)
    if st["overlap_comm"] is not None:
        z["overlap_comm"] = st["overlap_comm"]
    if st["zero"] == 3:
        z.update(stage3_prefetch_bucket_size=h * h // 10 * 9,
                 stage3_param_persistence_threshold=10 * h)
    return z


def oracle(python, st, cfg_path):
    port = str(29500 + (abs(hash(json.dumps(st, sort_keys=True))) % 2000))
    # DeepSpeed's op builder runs ninja from the environment's bin directory.
    env = dict(os.environ, PATH=f"{pathlib.Path(python).parent}{os.pathsep}{os.environ['PATH']}")
    procs = [subprocess.Popen([python, "-c", CHILD, json.dumps(st), str(cfg_path), str(r), port],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for r in range(st["world"])]
    res = []
    for p in procs:
        out, err = p.communicate(timeout=3600)
        if p.returncode != 0:
            last = [ln for ln in err.strip().splitlines() if ln.strip()] or ["?"]
            raise RuntimeError(" | ".join(last[-3:])[:600])
        res.append(json.loads(out.strip().splitlines()[-1]))
    return res


def estimate(binary, st, z):
    args = [binary, "estimate", st["model"], "--task", "train", "--method", "full",
            "--precision", "bf16", "--optimizer", "adamw", "--attention", "sdpa",
            "--batch", str(st["batch"]), "--seq", str(st["seq"]),
            "--gpus", str(st["world"]), "--zero", str(st["zero"]),
            "--reduce-bucket-size", str(z["reduce_bucket_size"]),
            "--contiguous-gradients", "on", "--format", "json"]
    if st["overlap_comm"] is not None:
        args += ["--overlap-comm", "on" if st["overlap_comm"] else "off"]
    if st["zero"] == 3:
        args += ["--prefetch-bucket-size", str(z["stage3_prefetch_bucket_size"]),
                 "--param-persistence-threshold", str(z["stage3_param_persistence_threshold"])]
    if st["ckpt"]:
        args.append("--grad-checkpointing")
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def model_file(binary, repo):
    out = subprocess.run([binary, "estimate", repo, "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return MODELS / (json.loads(out)["model"]["id"].replace("/", "__") + ".json")


model_file_cached = {}


def gib(n):
    return f"{n / 2**30:.2f} GiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oomkit", default=str(ROOT / "target" / "debug" / "oomkit"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--only", default="")
    ap.add_argument("--rows", default="", help="replace the DeepSpeed oracle rows (ids OD-…) of "
                    "this table (crates/oomkit_estimate/tests/accuracy_sharded.json)")
    ap.add_argument("--before", default="", help="another oomkit binary, printed beside")
    ap.add_argument("--verbose", action="store_true",
                    help="print the check at init and the per-phase peaks")
    a = ap.parse_args()
    ver = versions(a.python)
    cache = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    results = []
    for st in GRID:
        name = f"{st['model']} zero{st['zero']}x{st['world']} {st['batch']}x{st['seq']}" + \
            (" ckpt" if st["ckpt"] else "") + (" overlap" if st["overlap_comm"] else "")
        if a.only and a.only not in name:
            continue
        cfg_path = model_file_cached[st["model"]] = model_file(a.oomkit, st["model"])
        cfg = json.loads(cfg_path.read_text())
        run = dict(st, zero_optimization=ds_zero(cfg, st))
        run.pop("calibration")
        k = json.dumps([run, ver, REVISION], sort_keys=True)
        if k not in cache:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            cache[k] = oracle(a.python, run, cfg_path)
            CACHE.parent.mkdir(parents=True, exist_ok=True)
            CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
        ranks = cache[k]
        measured = max(max(r["peaks"]) for r in ranks)
        est = estimate(a.oomkit, st, run["zero_optimization"])
        got = est["peak_allocated_bytes"]
        err = (got - measured) / measured * 100
        results.append((st, name, measured, got, err, ranks))
        before = ""
        if a.before:
            b = estimate(a.before, st, run["zero_optimization"])["peak_allocated_bytes"]
            before = f"{gib(b)} ({(b - measured) / measured * 100:+.1f} %) | "
        print(f"| {name} | {'calibration' if st['calibration'] else 'check'} | {gib(measured)} | "
              f"{before}{gib(got)} ({err:+.1f} %) |", flush=True)
        if a.verbose:
            print(f"    init: {ranks[0]['after_init']} bytes counted, engine buffers "
                  f"{ranks[0]['held']}; per-rank peaks {[r['peaks'] for r in ranks]}; "
                  f"phases {ranks[0].get('phases')}", flush=True)
    if a.rows:
        write_rows(pathlib.Path(a.rows), results, ver)


def write_rows(path, results, ver):
    table = json.loads(path.read_text())
    rows = [r for r in table["rows"] if not r["id"].startswith("OD-")]
    for st, _, measured, _, _, _ in results:
        short = st["model"].split("/")[-1]
        z = ds_zero(json.loads(model_file_cached[st["model"]].read_text()), st)
        sharding = dict(reduce_bucket=z["reduce_bucket_size"])
        if st["zero"] == 3:
            sharding.update(prefetch_bucket=z["stage3_prefetch_bucket_size"],
                            persistence_threshold=z["stage3_param_persistence_threshold"])
        if st["overlap_comm"] is not None:
            sharding["overlap_comm"] = st["overlap_comm"]
        ckpt = ("-ckpt" if st["ckpt"] else "") + ("-overlap" if st["overlap_comm"] else "")
        rows.append(dict(
            id=f"OD-{short}-train-bf16-full-adamw{ckpt}-zero{st['zero']}x{st['world']}-sdpa-"
               f"{st['batch']}x{st['seq']}",
            source="CPU oracle (bench/estimate-oracle/deepspeed_oracle.py): DeepSpeed on its CPU "
                   "accelerator over gloo, the peak of live tensor storages on the most loaded "
                   f"rank over two training steps, torch/transformers/deepspeed {ver}",
            model=st["model"],
            setup=dict(task="train", precision="bf16", batch=st["batch"], seq=st["seq"],
                       attention="sdpa", method="full", optimizer="adamw",
                       grad_checkpointing=st["ckpt"], gpus=st["world"], zero=st["zero"],
                       sharding=sharding),
            metric="allocated", kind="train", grade="O", calibration=st["calibration"],
            measured_bytes=measured))
    table["rows"] = rows
    extra = (" DeepSpeed's rows run on its CPU accelerator (ids OD-…) are written by "
             "bench/estimate-oracle/deepspeed_oracle.py --rows; regenerate those too.")
    if extra not in table["note"]:
        table["note"] += extra
    path.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
