# leaks: clean
"""Clean (bounded): detached step outputs are kept for the epoch and cleared at
each epoch end (every 5 steps), as Lightning's docs suggest for
on_train_epoch_end: memory saws up and down but does not grow."""
# The clearing pattern is the one Lightning-AI/pytorch-lightning#16520 asks users to write.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
epoch_outputs = []
epoch_means = []
for step in range(30):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    epoch_outputs.append(logits.detach())
    if (step + 1) % 5 == 0:
        epoch_means.append(torch.cat(epoch_outputs).mean().item())
        epoch_outputs.clear()
print(f"epochs {len(epoch_means)}")
