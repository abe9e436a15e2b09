# leaks: clean
"""Clean: two losses share one forward; the first backward keeps the graph with
retain_graph=True for the second, and the graph is gone at the end of the step."""
import torch
from torch import nn

torch.manual_seed(0)
body = nn.Sequential(nn.Linear(128, 256), nn.ReLU())
head_a = nn.Linear(256, 10)
head_b = nn.Linear(256, 1)
opt = torch.optim.SGD([*body.parameters(), *head_a.parameters(), *head_b.parameters()], lr=0.01)
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    h = body(x)
    loss_a = nn.functional.cross_entropy(head_a(h), y)
    loss_b = head_b(h).pow(2).mean()
    opt.zero_grad()
    loss_a.backward(retain_graph=True)
    loss_b.backward()
    opt.step()
print(f"last losses {loss_a.item():.4f} {loss_b.item():.4f}")
