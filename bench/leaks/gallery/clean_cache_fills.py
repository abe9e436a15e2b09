# leaks: clean
"""Clean (warm-up): positional tables are cached per sequence length; the lengths
cycle through three values, so the cache fills in the first three steps and then
stops growing."""
import math

import torch
from torch import nn

_tables = {}


def positions(length, width):
    if length not in _tables:
        pos = torch.arange(length).unsqueeze(1)
        freq = torch.exp(torch.arange(0, width, 2) * (-math.log(10000.0) / width))
        table = torch.zeros(length, width)
        table[:, 0::2] = torch.sin(pos * freq)
        table[:, 1::2] = torch.cos(pos * freq)
        _tables[length] = table
    return _tables[length]


torch.manual_seed(0)
embed = nn.Embedding(1000, 256)
head = nn.Linear(256, 10)
opt = torch.optim.SGD([*embed.parameters(), *head.parameters()], lr=0.01)
lengths = [128, 256, 384]
for step in range(30):
    length = lengths[step % len(lengths)]
    tokens = torch.randint(0, 1000, (16, length))
    y = torch.randint(0, 10, (16,))
    h = embed(tokens) + positions(length, 256)
    loss = nn.functional.cross_entropy(head(h.mean(1)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"cached tables {len(_tables)}, last loss {loss.item():.4f}")
