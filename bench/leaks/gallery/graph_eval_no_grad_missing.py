"""Leak (graph): an evaluation loop over a DataLoader without torch.no_grad();
the logits kept for a confusion matrix carry the forward graph with every saved
activation (nothing is ever backpropagated, so nothing is freed)."""
# Seen in: yalesong/pvse#30 (memory grew during the forward passes of eval.py) and the
# PyTorch FAQ's advice to wrap evaluation in torch.no_grad().
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
data = torch.utils.data.TensorDataset(torch.randn(30 * 64, 128), torch.randint(0, 10, (30 * 64,)))
loader = torch.utils.data.DataLoader(data, batch_size=64)
model.eval()
all_logits = []
labels = []
for x, y in loader:
    logits = model(x)
    all_logits.append(logits)  # leaks: expect graph
    labels.append(y.tolist())
pred = torch.cat(all_logits).argmax(1)
print(f"eval batches {len(all_logits)}, predicted class 0: {(pred == 0).sum().item()}")
