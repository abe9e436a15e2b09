"""Leak (host): every batch drawn from the DataLoader is kept on the host (for
"hard example" mining at the end of the run that never trims the list)."""
# Seen in: kaiko-ai/eva#172 (every predicted batch accumulated in memory) and
# chemprop/chemprop#32 (a cache of inputs that filled the RAM).
import torch
from torch import nn

torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(30 * 64, 512), torch.randint(0, 10, (30 * 64,)))
loader = torch.utils.data.DataLoader(data, batch_size=64)
model = nn.Sequential(nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
seen = []
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    seen.append((x, y))  # leaks: expect host
print(f"kept {len(seen)} batches")
