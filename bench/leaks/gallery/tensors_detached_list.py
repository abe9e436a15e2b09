"""Leak (tensors): hidden features are detached (no graph) but still kept, one
batch per step, for an analysis at the end of the run."""
# Seen in: Lightning-AI/pytorch-lightning#1510 ("we detach everything" -- "Yes, but they
# (tensors) are still on the GPU after detach").
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(128, 256), nn.ReLU())
head = nn.Linear(256, 10)
opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.01)
features = []
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    hidden = encoder(x)
    loss = nn.functional.cross_entropy(head(hidden), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    features.append(hidden.detach())  # leaks: expect tensors
print(f"kept {len(features)} feature batches")
