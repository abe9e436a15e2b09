"""Leak (graph): a helper registered as a forward hook stores each output on an
attribute of the module; the outputs keep their autograd graph."""
# Seen in: growingnet/gromo#135 (a module stored its activity without .detach()).
import torch
from torch import nn


def remember_output(module, inputs, output):
    module.recorded.append(output)  # leaks: expect graph


def build():
    net = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
    net[1].recorded = []
    net[1].register_forward_hook(remember_output)
    return net


torch.manual_seed(0)
model = build()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"recorded {len(model[1].recorded)} activations")
