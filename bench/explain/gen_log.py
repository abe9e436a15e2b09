#!/usr/bin/env python3
"""Generate a large, realistic training log with exactly 5 GPU OOM errors inside.

Deterministic (fixed seed, Python stdlib only): the same arguments always give
the same bytes. Writes in multi-megabyte chunks, so 1 GiB takes well under a
minute.

    python3 bench/explain/gen_log.py --size-mb 1024 --out bench/data/train_1g.log

Besides the log, writes OUT.manifest.json describing what is inside: the
5 inserted OOM messages (line of the headline, first/last line of their
block, the oomkit `format` ids that would be right for them), the number of
lines containing "out of memory" (what `grep -c "out of memory"` must print),
and the number of lines and bytes.

The ordinary lines mimic a long distributed fine-tuning run that restarts
(torchrun elastic) after each failure: python-logging step lines, `[rankN]:`
prefixed lines from other ranks, tqdm progress bars redrawn with `\\r`,
NCCL INFO lines, torch/DeepSpeed memory statistics (`memory_allocated=12.3GB`,
`see_memory_usage`, `torch.cuda.memory_summary()` tables), UserWarnings,
glog-style torch.distributed lines, HF-Trainer eval dicts, checkpoint/wandb
lines, and occasional tracebacks that are not OOMs (KeyError in a DataLoader
worker, a wandb ConnectionError, an NCCL watchdog timeout). After each restart
the config is printed again; one of its lines mentions "out of memory"
innocently (an `oom_policy` comment), and the vLLM rollout engine prints its
normal "Available KV cache memory" start-up lines, so a scanner meets a few
harmless anchor phrases too.

The 5 OOMs sit at 10 %, 30 %, 50 %, 70 % and 90 % of the file:
  1. PyTorch 2.x `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...
     GPU 3 has a total capacity of ...` in a `[rank3]:` traceback;
  2. legacy PyTorch `RuntimeError: CUDA out of memory. Tried to allocate ... (GPU 0;
     ... total capacity; ... already allocated; ... free; ... reserved in total by PyTorch)`;
  3. TensorFlow 2 `ResourceExhaustedError: Graph execution error:` ... `OOM when
     allocating tensor with shape[64,256,112,112] and type float ...`;
  4. vLLM v1 `ValueError: To serve at least one request with the models's max seq
     len (131072), (16.00 GiB KV cache is needed, ...` behind `(EngineCore_0 pid=...)` prefixes;
  5. llama.cpp `ggml_backend_cuda_buffer_type_alloc_buffer: ... cudaMalloc failed:
     out of memory` / `ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of
     size 10345253120` / `graph_reserve: failed to allocate compute buffers`.
"""

import argparse
import json
import os
import random
import sys
import time

NEEDLE = "out of memory"
BASE_EPOCH = 1748944800  # 2025-06-03 10:00:00 UTC
BATCH_LINES = 4000  # ordinary lines generated per write (a few hundred KiB)
WRITE_BYTES = 8 << 20  # flush to disk in chunks of about this size
OOM_FRACTIONS = (0.10, 0.30, 0.50, 0.70, 0.90)
HOST = "node-07"
PID = 41873

TQDM_BLOCKS = " ▏▎▍▌▋▊▉█"


class Log:
    """Builds lines; tracks line numbers, bytes and 'out of memory' lines."""

    def __init__(self, out, seed):
        self.out = out
        self.rng = random.Random(seed)
        self.lines = 0  # lines written or buffered so far
        self.bytes = 0
        self.needle_lines = 0
        self.buf = []
        self.buf_bytes = 0
        self.t = 0.0  # seconds since BASE_EPOCH
        self._sec = -1
        self._stamp = ""
        self.step = 0
        self.epoch = 0
        self.run = 0  # restart counter
        self.steps_per_epoch = 25000
        self.kv_metrics_every = 0
        self.progress_only = False

    # ---------- output ----------
    def add(self, lines):
        """Appends complete lines (each without its '\\n')."""
        text = "\n".join(lines) + "\n"
        data = text.encode("utf-8")
        if NEEDLE in text:
            self.needle_lines += sum(1 for l in lines if NEEDLE in l)
        self.lines += len(lines)
        self.bytes += len(data)
        self.buf.append(data)
        self.buf_bytes += len(data)
        if self.buf_bytes >= WRITE_BYTES:
            self.flush()

    def flush(self):
        if self.buf:
            self.out.write(b"".join(self.buf))
            self.buf = []
            self.buf_bytes = 0

    # ---------- helpers ----------
    def stamp(self):
        """python-logging time `2025-06-03 14:22:07,118` (date part cached per second)."""
        sec = int(self.t)
        if sec != self._sec:
            self._sec = sec
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(BASE_EPOCH + sec))
        return "%s,%03d" % (self._stamp, int((self.t - sec) * 1000))

    def glog_stamp(self):
        tm = time.gmtime(BASE_EPOCH + int(self.t))
        return "%02d%02d %02d:%02d:%02d.%06d" % (
            tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
            int((self.t % 1) * 1e6),
        )

    def loss(self):
        base = 2.9 * (0.9997 ** (self.step / 50)) + 1.4
        return base + self.rng.uniform(-0.08, 0.08)

    def lr(self):
        warm = min(1.0, self.step / 2000)
        return 2e-5 * warm + 1e-7

    def advance(self):
        self.t += self.rng.uniform(0.35, 0.55)
        self.step += 1
        if self.step % self.steps_per_epoch == 0:
            self.epoch += 1

    # ---------- ordinary line kinds ----------
    def k_step(self):
        self.advance()
        r = self.rng
        return (
            f"{self.stamp()} - INFO - trainer - epoch {self.epoch} step {self.step} "
            f"loss {self.loss():.4f} lr {self.lr():.3e} grad_norm {r.uniform(0.4, 1.6):.3f} "
            f"tokens/s {r.randint(41000, 52000)}"
        )

    def k_rank(self):
        r = self.rng
        rank = r.randint(1, 7)
        return (
            f"[rank{rank}]:[{self.stamp()}] INFO trainer.py:412 step {self.step} "
            f"loss {self.loss():.4f} micro_batch {r.randint(0, 7)}/8 "
            f"data_time {r.uniform(0.001, 0.02):.4f}s"
        )

    def k_tqdm(self):
        r = self.rng
        total = 1000
        n = r.randint(2, 12)
        done = 0
        parts = []
        rate = r.uniform(30, 40)
        for _ in range(n):
            pct = done * 100 // total
            filled = done * 10 / total
            full = int(filled)
            frac = int((filled - full) * 8)
            bar = "█" * full + (TQDM_BLOCKS[frac] if full < 10 else "")
            bar = bar.ljust(10)
            el = int(done / rate)
            rem = int((total - done) / rate)
            parts.append(
                f"Epoch {self.epoch}: {pct:3d}%|{bar}| {done}/{total} "
                f"[{el // 60:02d}:{el % 60:02d}<{rem // 60:02d}:{rem % 60:02d}, "
                f"{rate:.2f}it/s, loss={self.loss():.3f}]"
            )
            done = min(total, done + r.randint(5, 90))
        return "\r".join(parts)

    def k_nccl(self):
        r = self.rng
        rank = r.randint(0, 7)
        tid = PID + 60 + rank
        c = r.randint(0, 31)
        kind = r.random()
        if kind < 0.6:
            peer = (rank + 1) % 8
            via = r.choice(("P2P/CUMEM/read", "P2P/IPC", "NVLS", "P2P/CUMEM"))
            msg = f"Channel {c:02d}/0 : {rank}[{rank}] -> {peer}[{peer}] via {via}"
        elif kind < 0.8:
            msg = f"Connected all rings, use ring PXN 0 GDR 1"
        elif kind < 0.9:
            msg = f"comm 0x{r.getrandbits(40):x} rank {rank} nranks 8 cudaDev {rank} nvmlDev {rank} busId {rank + 0x18:x}000 commId 0x{r.getrandbits(60):x} - Init COMPLETE"
        else:
            msg = f"NCCL_P2P_LEVEL set by environment to NVL"
        return f"{HOST}:{PID + rank}:{tid} [{rank}] NCCL INFO {msg}"

    def k_mem(self):
        r = self.rng
        a = r.uniform(11.5, 13.5)
        return (
            f"{self.stamp()} - INFO - memory - step {self.step} "
            f"memory_allocated={a:.1f}GB max_memory_allocated={a + r.uniform(4, 7):.1f}GB "
            f"memory_reserved={a + r.uniform(7, 9):.1f}GB"
        )

    def k_ds_mem(self):
        r = self.rng
        ma = r.uniform(10, 12)
        return [
            f"[{self.stamp()}] [INFO] [utils.py:782:see_memory_usage] after backward",
            f"[{self.stamp()}] [INFO] [utils.py:783:see_memory_usage] MA {ma:.2f} GB         "
            f"Max_MA {ma + r.uniform(1, 2):.2f} GB         CA {ma + 2.3:.2f} GB         Max_CA {int(ma + 3)} GB ",
            f"[{self.stamp()}] [INFO] [utils.py:790:see_memory_usage] CPU Virtual Memory:  "
            f"used = {r.uniform(55, 70):.2f} GB, percent = {r.uniform(10, 14):.1f}%",
        ]

    def k_warning(self):
        r = self.rng
        w = r.randrange(3)
        if w == 0:
            return [
                "/usr/local/lib/python3.11/site-packages/torch/utils/checkpoint.py:464: UserWarning: "
                "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In "
                "version 2.5 we will raise an exception if use_reentrant is not passed. use_reentrant=False "
                "is recommended, but if you need to preserve the current default behavior, you can pass "
                "use_reentrant=True. Refer to docs for more details on the differences between the two variants.",
                "  warnings.warn(",
            ]
        if w == 1:
            return [
                "/usr/local/lib/python3.11/site-packages/torch/optim/lr_scheduler.py:224: UserWarning: "
                "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
                "later, you should call them in the opposite order: `optimizer.step()` before "
                "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
                "value of the learning rate schedule.",
                "  warnings.warn(",
            ]
        return [
            f"[rank{r.randint(0, 7)}]:W{self.glog_stamp()} {PID + 5} torch/_dynamo/convert_frame.py:844] "
            "[0/8] torch._dynamo hit config.cache_size_limit (8)",
        ]

    def k_glog(self):
        r = self.rng
        return (
            f"I{self.glog_stamp()} {PID} torch/distributed/elastic/agent/server/api.py:"
            f"{r.choice((525, 680, 702))}] [default] monitoring workers: 8 healthy, "
            f"restart_count={self.run}"
        )

    def k_eval(self):
        r = self.rng
        return (
            f"{{'eval_loss': {self.loss():.4f}, 'eval_runtime': {r.uniform(38, 45):.4f}, "
            f"'eval_samples_per_second': {r.uniform(230, 250):.3f}, 'eval_steps_per_second': "
            f"{r.uniform(7, 8):.3f}, 'epoch': {self.epoch + self.step % self.steps_per_epoch / self.steps_per_epoch:.2f}}}"
        )

    def k_ckpt(self):
        r = self.rng
        if r.random() < 0.5:
            return (
                f"{self.stamp()} - INFO - checkpoint - Saving model checkpoint to "
                f"/ckpt/run-{self.run}/checkpoint-{self.step} (shard {r.randint(0, 7)}/8, "
                f"{r.uniform(1.9, 2.1):.2f} GB)"
            )
        return (
            f"wandb: logged step {self.step}: train/loss={self.loss():.4f} "
            f"train/learning_rate={self.lr():.3e} gpu.0.memoryAllocated={r.uniform(60, 92):.1f}"
        )

    def k_vllm_metrics(self):
        r = self.rng
        tm = time.gmtime(BASE_EPOCH + int(self.t))
        return (
            f"(EngineCore_0 pid={PID + 900 + self.run}) INFO {tm.tm_mon:02d}-{tm.tm_mday:02d} "
            f"{tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d} [loggers.py:118] Engine 000: "
            f"Avg prompt throughput: {r.uniform(300, 1500):.1f} tokens/s, Avg generation throughput: "
            f"{r.uniform(800, 2500):.1f} tokens/s, Running: {r.randint(0, 64)} reqs, Waiting: "
            f"{r.randint(0, 8)} reqs, GPU KV cache usage: {r.uniform(0, 95):.1f}%, Prefix cache hit "
            f"rate: {r.uniform(20, 80):.1f}%"
        )

    def memory_summary(self):
        r = self.rng
        alloc = r.randint(11000, 13500)
        rows = [
            "|===========================================================================|",
            "|                  PyTorch CUDA memory summary, device ID 0                 |",
            "|---------------------------------------------------------------------------|",
            "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |",
            "|===========================================================================|",
            "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
            "|---------------------------------------------------------------------------|",
        ]
        for name in ("Allocated memory", "Active memory", "Requested memory", "GPU reserved memory"):
            peak = alloc + r.randint(3000, 6000)
            rows.append(
                f"| {name:<21} | {alloc:6d} MiB | {peak:6d} MiB | {r.randint(100, 900):6d} TiB | {r.randint(100, 900):6d} TiB |"
            )
        rows += [
            "|---------------------------------------------------------------------------|",
            f"| Non-releasable memory |  {r.randint(200, 900):5d} MiB |   {r.randint(1000, 3000):4d} MiB |  {r.randint(10, 99):5d} TiB |  {r.randint(10, 99):5d} TiB |",
            "|===========================================================================|",
        ]
        return [f"{self.stamp()} - INFO - memory - torch.cuda.memory_summary():"] + rows

    def traceback_not_oom(self):
        r = self.rng
        kind = r.randrange(3)
        if kind == 0:
            return [
                f"{self.stamp()} - ERROR - data - DataLoader worker 5 failed on sample {r.randint(0, 10**7)}; skipping",
                "Traceback (most recent call last):",
                '  File "/workspace/data/collate.py", line 58, in __call__',
                '    labels = [ex["labels"] for ex in batch]',
                '  File "/workspace/data/collate.py", line 58, in <listcomp>',
                '    labels = [ex["labels"] for ex in batch]',
                "KeyError: 'labels'",
            ]
        if kind == 1:
            return [
                "wandb: Network error (ConnectionError), entering retry loop.",
                "Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.11/site-packages/urllib3/connectionpool.py", line 793, in urlopen',
                "    response = self._make_request(",
                '  File "/usr/local/lib/python3.11/site-packages/requests/adapters.py", line 519, in send',
                "    raise ConnectionError(e, request=request)",
                "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.wandb.ai', port=443): "
                "Max retries exceeded with url: /files/team/run/file_stream (Caused by "
                "NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3c2a1b9d50>: "
                "Failed to establish a new connection: [Errno 101] Network is unreachable'))",
                "wandb: Network error resolved after 0:00:41.207433, resuming normal operation.",
            ]
        rank = r.randint(0, 7)
        seq = self.step * 3
        return [
            f"[rank{rank}]:[E{self.glog_stamp()} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4194304, "
            f"NumelOut=4194304, Timeout(ms)=600000) ran for 600041 milliseconds before timing out.",
            f"[rank{rank}]:[E{self.glog_stamp()} ProcessGroupNCCL.cpp:1785] [PG 0 (default_pg) Rank {rank}] "
            f"Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued "
            f"NCCL work: {seq}, last completed NCCL work: {seq - 1}.",
            f"{self.stamp()} - WARNING - trainer - collective timed out at step {self.step}; "
            "straggler recovered, continuing",
        ]

    def ordinary(self, n):
        """`n`-ish ordinary lines (multi-line items count fully)."""
        r = self.rng
        out = []
        kinds = r.choices(
            range(11),
            weights=(46, 16, 3, 7, 6, 1.2, 1.5, 1.0, 1.8, 1.0, 0.004),
            k=n,
        )
        if self.progress_only:
            kinds = [2] * n
        every = self.kv_metrics_every
        for k in kinds:
            if every and r.random() * every < 1:
                out.append(self.k_vllm_metrics())
            if k == 0:
                out.append(self.k_step())
            elif k == 1:
                out.append(self.k_rank())
            elif k == 2:
                out.append(self.k_tqdm())
            elif k == 3:
                out.append(self.k_nccl())
            elif k == 4:
                out.append(self.k_mem())
            elif k == 5:
                out.extend(self.k_ds_mem())
            elif k == 6:
                out.extend(self.k_warning())
            elif k == 7:
                out.append(self.k_glog())
            elif k == 8:
                out.append(self.k_eval() if r.random() < 0.5 else self.k_ckpt())
            elif k == 9:
                if r.random() < 0.02:
                    out.extend(self.memory_summary())
                else:
                    out.append(self.k_step())
            else:
                out.extend(self.traceback_not_oom())
        return out

    # ---------- start-up / restart ----------
    def startup(self):
        self.run += 1
        s = self.stamp
        lines = [
            f"{s()} - INFO - launcher - ===== run {self.run}: torchrun --nnodes 1 --nproc-per-node 8 train.py --config configs/sft_8b.yaml =====",
            f"{s()} - INFO - config - model: meta-llama/Llama-3.1-8B",
            f"{s()} - INFO - config -   micro_batch_size: 4",
            f"{s()} - INFO - config -   gradient_accumulation_steps: 8",
            f"{s()} - INFO - config -   max_seq_len: 8192",
            f"{s()} - INFO - config -   gradient_checkpointing: true",
            f"{s()} - INFO - config -   oom_policy: halve_batch            # action after an out of memory error",
            f"{s()} - INFO - config -   rollout_engine: vllm (gpu_memory_utilization=0.35)",
            f"{s()} - INFO - config -   resume_from: {'none' if self.run == 1 else f'/ckpt/run-{self.run - 1}/checkpoint-{self.step}'}",
        ]
        for rank in range(8):
            lines.append(
                f"{HOST}:{PID + rank}:{PID + rank} [{rank}] NCCL INFO cudaDriverVersion 12040"
            )
            lines.append(
                f"{HOST}:{PID + rank}:{PID + rank} [{rank}] NCCL INFO NCCL version 2.21.5+cuda12.4"
            )
        ep = PID + 900 + self.run
        lines += [
            f"(EngineCore_0 pid={ep}) INFO 06-03 10:0{self.run}:12 [gpu_model_runner.py:1843] Model loading took 14.9889 GiB and 6.102 seconds",
            f"(EngineCore_0 pid={ep}) INFO 06-03 10:0{self.run}:19 [gpu_worker.py:232] Available KV cache memory: 11.84 GiB",
            f"(EngineCore_0 pid={ep}) INFO 06-03 10:0{self.run}:19 [kv_cache_utils.py:716] GPU KV cache size: 97,008 tokens",
            f"(EngineCore_0 pid={ep}) INFO 06-03 10:0{self.run}:19 [kv_cache_utils.py:720] Maximum concurrency for 8,192 tokens per request: 11.84x",
            f"{s()} - INFO - trainer - ***** Running training *****",
        ]
        self.add(lines)

    def teardown(self, rank):
        self.t += 3.0
        gs = self.glog_stamp()
        self.add([
            f"W{gs} {PID} torch/distributed/elastic/multiprocessing/api.py:897] Sending process {PID + (rank + 1) % 8} closing signal SIGTERM",
            f"W{gs} {PID} torch/distributed/elastic/multiprocessing/api.py:897] Sending process {PID + (rank + 2) % 8} closing signal SIGTERM",
            f"E{gs} {PID} torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: {rank} (pid: {PID + rank}) of binary: /usr/bin/python3",
            f"I{gs} {PID} torch/distributed/elastic/agent/server/api.py:708] [default] Worker group FAILED. 7/8 restart attempts left; will restart worker group",
        ])
        # Other ranks keep printing for a while before the restart.
        self.add(self.ordinary(300))
        self.t += 60.0
        self.step = max(0, self.step - self.rng.randint(200, 900))  # resume from the last checkpoint
        self.startup()


# ---------------------------------------------------------------------------
# The five OOM messages. Each returns (lines, headline index within lines).
# ---------------------------------------------------------------------------

def oom_pytorch2(log):
    p = "[rank3]: "
    site = "/usr/local/lib/python3.11/site-packages"
    lines = [
        f"{p}Traceback (most recent call last):",
        f'{p}  File "/workspace/train.py", line 214, in <module>',
        f"{p}    main()",
        f'{p}  File "/workspace/train.py", line 188, in main',
        f"{p}    loss.backward()",
        f'{p}  File "{site}/torch/_tensor.py", line 626, in backward',
        f"{p}    torch.autograd.backward(",
        f'{p}  File "{site}/torch/autograd/__init__.py", line 347, in backward',
        f"{p}    _engine_run_backward(",
        f'{p}  File "{site}/torch/autograd/graph.py", line 823, in _engine_run_backward',
        f"{p}    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
        f"{p}           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f"{p}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
        "capacity of 79.14 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has "
        "77.94 GiB memory in use. Of the allocated memory 71.02 GiB is allocated by PyTorch, and 5.37 GiB "
        "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
        "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
    ]
    return lines, 12, 3, ["pytorch-caching-allocator-2.1"]


def oom_pytorch_legacy(log):
    lines = [
        "Traceback (most recent call last):",
        '  File "/workspace/legacy/train_v100.py", line 301, in <module>',
        "    train(args)",
        '  File "/workspace/legacy/train_v100.py", line 233, in train',
        "    outputs = model(input_ids, attention_mask=mask, labels=labels)",
        '  File "/opt/conda/lib/python3.8/site-packages/torch/nn/modules/module.py", line 1110, in _call_impl',
        "    return forward_call(*input, **kwargs)",
        '  File "/opt/conda/lib/python3.8/site-packages/transformers/models/gpt2/modeling_gpt2.py", line 198, in _attn',
        "    attn_weights = torch.matmul(query, key.transpose(-1, -2))",
        "RuntimeError: CUDA out of memory. Tried to allocate 1.53 GiB (GPU 0; 31.75 GiB total capacity; "
        "27.41 GiB already allocated; 1.12 GiB free; 29.84 GiB reserved in total by PyTorch) If reserved "
        "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See "
        "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
    ]
    return lines, 9, 0, ["pytorch-caching-allocator-legacy"]


def oom_tensorflow(log):
    site = "/usr/local/lib/python3.10/dist-packages"
    lines = [
        "Traceback (most recent call last):",
        '  File "/workspace/tf/finetune_resnet.py", line 141, in <module>',
        "    history = model.fit(train_ds, epochs=10, validation_data=val_ds)",
        f'  File "{site}/keras/src/utils/traceback_utils.py", line 70, in error_handler',
        "    raise e.with_traceback(filtered_tb) from None",
        f'  File "{site}/tensorflow/python/eager/execute.py", line 53, in quick_execute',
        "    tensors = pywrap_tfe.TFE_Py_Execute(ctx._handle, device_name, op_name,",
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Graph execution error:",
        "",
        "Detected at node 'model/conv2d_3/Conv2D' defined at (most recent call last):",
        '    File "/workspace/tf/finetune_resnet.py", line 141, in <module>',
        "      history = model.fit(train_ds, epochs=10, validation_data=val_ds)",
        "Node: 'model/conv2d_3/Conv2D'",
        "OOM when allocating tensor with shape[64,256,112,112] and type float on "
        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
        "\t [[{{node model/conv2d_3/Conv2D}}]]",
        "Hint: If you want to see a list of allocated tensors when OOM happens, add "
        "report_tensor_allocations_upon_oom to RunOptions for current allocation info. This isn't "
        "available when running in Eager mode.",
        " [Op:__inference_train_function_8812]",
    ]
    return lines, 13, 0, ["tensorflow-oom-when-allocating"]


def oom_vllm(log):
    ep = PID + 990
    p = f"(EngineCore_0 pid={ep}) ERROR 06-03 20:11:05 [core.py:700] "
    lines = [
        f"(EngineCore_0 pid={ep}) INFO 06-03 20:11:04 [gpu_worker.py:232] Available KV cache memory: 9.43 GiB",
        f"{p}EngineCore failed to start.",
        f"{p}Traceback (most recent call last):",
        f'{p}  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 691, in run_engine_core',
        f"{p}    engine_core = EngineCoreProc(*args, **kwargs)",
        f'{p}  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 142, in _initialize_kv_caches',
        f"{p}    get_kv_cache_config(vllm_config, kv_cache_spec_one_worker,",
        f'{p}  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 624, in check_enough_kv_cache_memory',
        f"{p}    raise ValueError(",
        f"{p}ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB "
        "KV cache is needed, which is larger than the available KV cache memory (9.43 GiB). Based on the "
        "available memory, the estimated maximum model length is 77232. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    return lines, 9, 0, ["vllm-v1-kv-cache-needed"]


def oom_llamacpp(log):
    lines = [
        "llama_context: constructing llama_context",
        "llama_context: n_seq_max     = 1",
        "llama_context: n_ctx         = 131072",
        "llama_context: n_batch       = 2048",
        "llama_kv_cache_unified:      CUDA0 KV buffer size = 16384.00 MiB",
        "llama_kv_cache_unified: KV self size  = 16384.00 MiB, K (f16): 8192.00 MiB, V (f16): 8192.00 MiB",
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9866.00 MiB on device 0: cudaMalloc failed: out of memory",
        "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 10345253120",
        "graph_reserve: failed to allocate compute buffers",
        "llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers",
        "common_init_from_params: failed to create context with model '/ckpt/export/model-q8_0.gguf'",
        f"{log.stamp()} - ERROR - eval - llama.cpp evaluation of /ckpt/export/model-q8_0.gguf failed (exit 1); skipping GGUF eval",
    ]
    return lines, 7, 0, ["ggml-failed-to-allocate-buffer", "ggml-cuda-buffer-alloc"]


OOMS = (
    ("pytorch-2.x", oom_pytorch2),
    ("pytorch-legacy", oom_pytorch_legacy),
    ("tensorflow", oom_tensorflow),
    ("vllm-v1", oom_vllm),
    ("llama.cpp", oom_llamacpp),
)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=1024, help="target size in MiB (default 1024)")
    ap.add_argument("--out", required=True, help="log file to write")
    ap.add_argument("--seed", type=int, default=20250603)
    ap.add_argument("--manifest", help="manifest path (default OUT.manifest.json)")
    ap.add_argument(
        "--kv-metrics-every", type=int, default=0, metavar="N",
        help="stress variant: about every N lines, print vLLM's periodic metrics line "
        "(`... GPU KV cache usage: 41.2%%, ...`), as an RL run with vLLM rollouts does; "
        "it holds the anchor phrase `KV cache` (default 0: never)",
    )
    ap.add_argument(
        "--progress-only", action="store_true",
        help="stress variant: every ordinary line is a tqdm bar with metrics redrawn with `\\r` "
        "(a fine-tuning run's console captured to a file); the OOMs, restarts and configs stay",
    )
    args = ap.parse_args()

    target = int(args.size_mb * (1 << 20))
    manifest_path = args.manifest or args.out + ".manifest.json"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    started = time.time()
    events = []
    with open(tmp, "wb") as f:
        log = Log(f, args.seed)
        log.kv_metrics_every = args.kv_metrics_every
        log.progress_only = args.progress_only
        log.startup()
        next_oom = 0
        while log.bytes < target or next_oom < len(OOMS):
            if next_oom < len(OOMS) and log.bytes >= OOM_FRACTIONS[next_oom] * target:
                name, make = OOMS[next_oom]
                lines, head, rank, formats = make(log)
                first = log.lines + 1
                needle_before = log.needle_lines
                log.add(lines)
                events.append({
                    "name": name,
                    "first_line": first,
                    "headline_line": first + head,
                    "last_line": first + len(lines) - 1,
                    "formats": formats,
                    "headline": lines[head],
                    "out_of_memory_lines": log.needle_lines - needle_before,
                })
                next_oom += 1
                log.teardown(rank)
                continue
            log.add(log.ordinary(BATCH_LINES))
        log.flush()
    os.replace(tmp, args.out)
    manifest = {
        "generator": "bench/explain/gen_log.py",
        "seed": args.seed,
        "kv_metrics_every": args.kv_metrics_every,
        "progress_only": args.progress_only,
        "size_mb_requested": args.size_mb,
        "bytes": log.bytes,
        "lines": log.lines,
        "out_of_memory_lines": log.needle_lines,
        "oom_events": events,
    }
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(
        f"wrote {args.out}: {log.bytes} bytes, {log.lines} lines, "
        f"{log.needle_lines} lines containing {NEEDLE!r}, {len(events)} OOMs "
        f"({time.time() - started:.1f}s)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
