"""Leak (tensors): a sampler keeps a replay buffer in a list that is a class
attribute (shared by every instance, set in the class body), appended through
self; nothing ever trims it."""
# Pattern: a mutable class attribute used as per-instance state (a common Python
# pitfall); the kept tensors are detached.
import torch
from torch import nn


class Replay:
    buffer = []

    def add(self, states):
        self.buffer.append(states)  # leaks: expect tensors

    def sample(self, n):
        idx = torch.randint(0, len(self.buffer), (n,))
        return torch.stack([self.buffer[i][0] for i in idx.tolist()])


torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 128))
opt = torch.optim.SGD(policy.parameters(), lr=0.01)
replay = Replay()
for step in range(30):
    x = torch.randn(64, 128)
    nxt = policy(x)
    replay.add(nxt.detach())
    target = replay.sample(8)
    loss = (policy(target) - target).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"buffer {len(Replay.buffer)}")
