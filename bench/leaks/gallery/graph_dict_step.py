"""Leak (graph): per-step diagnostics kept in a dict keyed by the global step; the
logits and the loss in it still carry their autograd graph."""
# Seen in: facebookresearch/mmf#560 (meter_update_dict kept the losses with their graph).
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = {}
global_step = 0
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    global_step += 1
    history[global_step] = {"loss": loss, "logits": logits}  # leaks: expect graph
print(f"logged {len(history)} steps, last loss {history[global_step]['loss'].item():.4f}")
