"""Leak (graph): a logging callback built by a factory keeps what it is given in a
list captured by its closure; it is handed the loss tensor, not a number."""
# Pattern: a closure-held history (the holder has no global name); the value logged is
# the one from facebookresearch/mmf#560 (losses logged with their graph).
import torch
from torch import nn


def make_logger(every):
    history = []

    def log(step, value):
        history.append(value)  # leaks: expect graph
        if step % every == 0:
            print(f"step {step}: {sum(v.item() for v in history[-every:]) / every:.4f}")

    return log


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
log = make_logger(every=10)
for step in range(1, 31):
    x = torch.randn(64, 128)
    y = torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y) + 0.01 * model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log(step, loss)
