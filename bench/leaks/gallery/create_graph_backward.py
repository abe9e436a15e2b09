"""Leak (create_graph): parameter importances (EWC-style Fisher estimate) are
accumulated in .grad over batches, with backward(create_graph=True) left on: every
accumulated .grad keeps the graph of every batch so far."""
# Seen in: pytorch/pytorch#4661 and #78622 (PyTorch's warning: "Using backward() with
# create_graph=True will create a reference cycle between the parameter and its
# gradient"), pytorch/pytorch#1346 (".grad is never detached and keeps accumulating").
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.Tanh(), nn.Linear(256, 10))
data = torch.utils.data.TensorDataset(torch.randn(30 * 64, 128), torch.randint(0, 10, (30 * 64,)))
loader = torch.utils.data.DataLoader(data, batch_size=64)
model.zero_grad()
batches = 0
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward(create_graph=True)  # leaks: expect create_graph
    batches += 1
fisher = [p.grad.detach() ** 2 / batches for p in model.parameters()]
print(f"batches {batches}, fisher mean {sum(f.mean().item() for f in fisher):.6f}")
