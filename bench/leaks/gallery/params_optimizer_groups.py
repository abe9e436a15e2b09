"""Leak (params): a projection head is rebuilt and handed to the optimizer with
add_param_group on every step (meant to happen once per growth stage), so the
optimizer keeps every old head and its momentum buffers."""
# Seen in: NVIDIA/apex#292 (a growing model adds a param group at each growth);
# here the growth runs every step by mistake.
import torch
from torch import nn

torch.manual_seed(0)
body = nn.Sequential(nn.Linear(128, 256), nn.ReLU())
opt = torch.optim.SGD(body.parameters(), lr=0.01, momentum=0.9)
for step in range(30):
    head = nn.Linear(256, 256)
    opt.add_param_group({"params": list(head.parameters())})  # leaks: expect params
    x = torch.randn(64, 128)
    loss = head(body(x)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"param groups {len(opt.param_groups)}")
