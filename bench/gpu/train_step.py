"""Two training steps of a catalogue model with random weights, for
`oomkit probe` and `oomkit run` on a real GPU (bench/gpu/run.sh).

Usage: python3 bench/gpu/train_step.py MODEL_FILE BATCH SEQ
MODEL_FILE names a config in crates/oomkit_estimate/models/. Pure bf16, AdamW,
SDPA; the loop holds the model output through backward, as oomkit estimate
assumes without --trainer.
"""

import pathlib
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

models = pathlib.Path(__file__).resolve().parents[2] / "crates" / "oomkit_estimate" / "models"
cfg = AutoConfig.from_pretrained(str(models / sys.argv[1]))
b, s = int(sys.argv[2]), int(sys.argv[3])
with torch.device("cuda"):
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
for step in range(2):
    ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
    out = model(input_ids=ids, labels=ids, use_cache=False)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del out
torch.cuda.synchronize()
print(f"batch {b} x {s}: peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, "
      f"reserved {torch.cuda.max_memory_reserved() / 2**30:.2f} GiB")
