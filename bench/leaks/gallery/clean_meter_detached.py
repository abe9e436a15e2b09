# leaks: clean
"""Clean: the meter of graph_meter_class.py fed `loss.detach()`: its running total
is a new 0-d tensor every step and the old one is freed."""
import torch
from torch import nn


class RunningStat:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def push(self, value, n=1):
        self.total += value * n
        self.count += n

    @property
    def mean(self):
        return self.total / max(self.count, 1)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train_loss = RunningStat()
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    train_loss.push(loss.detach(), x.shape[0])
print(f"mean loss {float(train_loss.mean):.4f}")
