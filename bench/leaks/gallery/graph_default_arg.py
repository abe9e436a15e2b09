"""Leak (graph): a helper that collects losses in a mutable default argument
(`history=[]` is created once, when `def` runs, and kept by the function); it is
handed the loss tensor, not a number."""
# Pattern: Python's mutable-default gotcha (the Python tutorial, "Default Argument
# Values": "the default value is evaluated only once"), here holding what the loss
# tensor keeps alive, as the losses kept with their graph in facebookresearch/mmf#560.
import torch
from torch import nn


def track(loss, history=[]):
    history.append(loss)  # leaks: expect graph
    return sum(v.item() for v in history[-10:]) / min(len(history), 10)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 31):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y) + 0.01 * model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    avg = track(loss)
    if step % 10 == 0:
        print(f"step {step}: {avg:.4f}")
