# leaks: clean
"""Clean (warm-up): Adam creates its state (exp_avg, exp_avg_sq: twice the
parameters) at the first step, then reuses it."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"last loss {loss.item():.4f}, state entries {len(opt.state)}")
