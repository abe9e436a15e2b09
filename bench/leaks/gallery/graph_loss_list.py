"""Leak (graph): every step's loss tensor is appended to a list without .item(),
so each step's autograd graph (its nodes) stays alive."""
# Seen in: TRI-ML/packnet-sfm#47 (outputs list kept output['loss'] with its graph) and
# the PyTorch FAQ note on `total_loss += loss` (pytorch/pytorch#6017).
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)  # leaks: expect graph
print(f"steps {len(losses)} last loss {losses[-1].item():.4f}")
