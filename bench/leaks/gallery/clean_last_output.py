# leaks: clean
"""Clean: the last step's outputs (with their graph) are kept on the model for a
debugging print; each step replaces the previous one, so at most one step's graph
is alive: bounded, not a leak."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.last_logits = logits
    model.last_loss = loss
print(f"last loss {model.last_loss.item():.4f}, logits {tuple(model.last_logits.shape)}")
