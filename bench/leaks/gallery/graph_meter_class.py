"""Leak (graph): a running-average meter (not called AverageMeter) is fed the loss
tensor; `self.total += value * n` chains every step's graph onto the previous one."""
# Seen in: visionml/pytracking#313 (AverageMeter fed a tensor with gradients) and
# pytorch/pytorch#6925 (ImageNet example's AverageMeter updated with `loss`).
import torch
from torch import nn


class RunningStat:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def push(self, value, n=1):
        self.total += value * n  # leaks: expect graph
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
    train_loss.push(loss, x.shape[0])
print(f"mean loss {float(train_loss.mean):.4f}")
