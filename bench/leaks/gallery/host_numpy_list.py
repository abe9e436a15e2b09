"""Leak (host): predicted probabilities are converted to numpy every step and kept
for an AUC computed at the end of the run."""
# Seen in: pytorch/pytorch#13613 (`result.append(output.data.cpu().numpy())` in a
# long inference loop).
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
all_probs = []
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 256, (64,))
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    all_probs.append(logits.detach().softmax(dim=1).cpu().numpy())  # leaks: expect host
print(f"kept {len(all_probs)} arrays of shape {all_probs[0].shape}")
