"""Leak (tensors): a statistics tensor grows by torch.cat every step and is filled
in place with .add_; only one tensor is alive at a time, but it gets bigger."""
# Seen in: NVIDIA/DeepLearningExamples#1102 (a device statistic updated in place with
# `.add_(loss)` kept growing memory) and pytorch/pytorch#13613 (torch.cat accumulation).
import torch
from torch import nn


class ActivationStats:
    def __init__(self, width):
        self.per_sample = torch.zeros(0, width)

    def update(self, hidden):
        self.per_sample = torch.cat([self.per_sample, torch.zeros(hidden.shape[0], hidden.shape[1])])  # leaks: expect tensors
        self.per_sample[-hidden.shape[0]:].add_(hidden.detach().abs())


torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(128, 256), nn.ReLU())
head = nn.Linear(256, 10)
opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.01)
stats = ActivationStats(256)
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    hidden = encoder(x)
    loss = nn.functional.cross_entropy(head(hidden), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    stats.update(hidden)
print(f"stats rows {stats.per_sample.shape[0]}, mean {stats.per_sample.mean().item():.4f}")
