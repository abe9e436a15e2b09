"""Leak (create_graph): a gradient penalty takes input gradients with
torch.autograd.grad(create_graph=True); the gradients are also kept for logging,
and each one carries the double-backward graph."""
# Seen in: pytorch/pytorch#51978 and pytorch/pytorch#16303 (memory kept by graphs built
# with create_graph=True).
import torch
from torch import nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(128, 256), nn.Tanh(), nn.Linear(256, 1))
opt = torch.optim.SGD(critic.parameters(), lr=0.01)
input_grads = []
for step in range(30):
    x = torch.randn(64, 128, requires_grad=True)
    score = critic(x)
    (g,) = torch.autograd.grad(score.sum(), x, create_graph=True)
    penalty = ((g.norm(dim=1) - 1) ** 2).mean()
    loss = -score.mean() + 10 * penalty
    opt.zero_grad()
    loss.backward()
    opt.step()
    input_grads.append(g)  # leaks: expect create_graph
print(f"kept {len(input_grads)} gradients, last norm {input_grads[-1].norm().item():.4f}")
