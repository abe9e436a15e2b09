# recall case: pfnet/pytorch-pfn-extras, the reporter
# bug: reported values were `clone()`d, which keeps the graph of each reported tensor for
#      the whole report interval (https://github.com/pfnet/pytorch-pfn-extras/pull/49,
#      merged: "Use detach instead of clone").
# reproduction written here (the pattern, not the project's code).
# expect: OOM101
import torch


def train(model, loader, optimizer, criterion):
    observations = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        observations.append(loss.clone())  # bug
    return sum(o.item() for o in observations) / len(observations)
