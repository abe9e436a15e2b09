"""Leak (graph): embeddings collected for a later plot with `.cpu()`; `.cpu()` is not
`.detach()`, so each kept tensor still has a grad_fn and holds the encoder's graph
(and its saved activations: these were never backpropagated)."""
# Seen in: pytorch/pytorch#16303 (results moved to the CPU with requires_grad kept the
# device memory alive) and pytorch/pytorch#13613 (torch.cat of `.cpu()` predictions).
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(128, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh())
head = nn.Linear(256, 10)
opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.01)
embeddings = []
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(head(encoder(x)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    probe = encoder(torch.randn(32, 128))
    embeddings.append(probe.cpu())  # leaks: expect graph
print(f"collected {len(embeddings)} embedding batches, grad_fn kept: {embeddings[-1].grad_fn is not None}")
