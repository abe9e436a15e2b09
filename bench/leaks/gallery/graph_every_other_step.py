"""Leak (graph): the loss is logged every second step (a log interval), as a
tensor: the growth is a staircase, still a leak."""
# Same leak as graph_loss_list.py behind a log interval, the shape of the
# `if step % log_every == 0: history.append(loss)` loops in facebookresearch/mmf#560.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
log_every = 2
logged = []
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % log_every == 0:
        logged.append((step, loss, logits))  # leaks: expect graph
print(f"logged {len(logged)} times")
