"""The overhead benchmark's program: a small CNN trained for a fixed number of
steps (default 10) on random 32x32 images from a DataLoader. Clean: nothing leaks.
With OVERHEAD_TIMES set, it appends the wall and CPU time at the start of each step to that file
(oomkit leaks ends the program inside the last step's optimizer step, so the span
from the first to the last start is what both runs have in common)."""
import os
import sys
import time

import torch
from torch import nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(steps * 32, 3, 32, 32), torch.randint(0, 10, (steps * 32,)))
loader = torch.utils.data.DataLoader(data, batch_size=32)
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(32 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10),
)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
losses = []
times = open(os.environ["OVERHEAD_TIMES"], "a", buffering=1) if os.environ.get("OVERHEAD_TIMES") else None
for x, y in loader:
    if times:
        times.write(f"{time.perf_counter()} {time.process_time()}\n")
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(f"steps {len(losses)} loss {losses[-1]:.4f}")
