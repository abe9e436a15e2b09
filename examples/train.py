"""A training loop with the leak `oomkit lint` exists for (the README's lint example).

`losses` keeps every step's `loss` tensor, and with it each step's autograd graph:
memory grows until CUDA runs out. Run `oomkit lint examples/train.py`.
"""
import torch
from torch import nn

model = nn.Linear(512, 10).cuda()
optimizer = torch.optim.AdamW(model.parameters())
losses = []
for x, y in loader:  # noqa: F821 (any DataLoader)
    loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    losses.append(loss)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(sum(losses) / len(losses))
