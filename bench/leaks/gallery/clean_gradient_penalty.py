# leaks: clean
"""Clean: a gradient penalty built with torch.autograd.grad(create_graph=True),
backpropagated and dropped; only its value is logged with .item()."""
import torch
from torch import nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(128, 256), nn.Tanh(), nn.Linear(256, 1))
opt = torch.optim.SGD(critic.parameters(), lr=0.01)
penalties = []
for step in range(30):
    x = torch.randn(64, 128, requires_grad=True)
    score = critic(x)
    (g,) = torch.autograd.grad(score.sum(), x, create_graph=True)
    penalty = ((g.norm(dim=1) - 1) ** 2).mean()
    loss = -score.mean() + 10 * penalty
    opt.zero_grad()
    loss.backward()
    opt.step()
    penalties.append(penalty.item())
print(f"mean penalty {sum(penalties) / len(penalties):.4f}")
