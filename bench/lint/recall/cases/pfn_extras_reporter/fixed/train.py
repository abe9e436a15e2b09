# The project's fix, restated here (see ../train.py).
import torch


def train(model, loader, optimizer, criterion):
    observations = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        observations.append(loss.detach())
    return sum(o.item() for o in observations) / len(observations)
