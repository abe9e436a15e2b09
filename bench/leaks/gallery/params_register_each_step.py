"""Leak (params): a module registers a new parameter on every forward (an adapter
keyed by a call counter instead of by task), so the model grows each step."""
# Pattern: a parameter created inside forward under a fresh name; no public report
# found for this exact shape (it is the module-side twin of optimizer groups added
# every step, see params_optimizer_groups.py).
import torch
from torch import nn


class AdaptedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(128, 256), nn.ReLU())
        self.head = nn.Linear(256, 10)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        name = f"adapter_{self.calls}"
        self.register_parameter(name, nn.Parameter(torch.zeros(256, 256)))  # leaks: expect params
        h = self.body(x)
        return self.head(h + h @ getattr(self, name))


torch.manual_seed(0)
model = AdaptedNet()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"parameters now {sum(p.numel() for p in model.parameters())}")
