# leaks: clean
"""Clean: the loss is logged with .item() (a Python float), into a list and a
running total; nothing from the step survives it."""
# The fix the PyTorch FAQ gives for `total_loss += loss` (pytorch/pytorch#6017).
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
total = 0.0
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    total += loss.item()
print(f"mean loss {total / len(losses):.4f}")
