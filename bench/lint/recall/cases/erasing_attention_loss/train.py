# recall case: zyh-uaiaaaa/Erasing-Attention-Consistency, src/main.py (train)
# bug: the epoch's running loss adds the loss tensor itself, which prints as
#      `<add_backward>`: memory grows every batch
#      (https://github.com/zyh-uaiaaaa/Erasing-Attention-Consistency/issues/11; the
#      reporter's fix detaches and moves to the CPU).
# reproduction written here (the pattern, not the project's code).
# expect: OOM102
import torch


def train(model, loader, optimizer, criterion, device):
    running_loss = 0.0
    iter_cnt = 0
    model.train()
    for imgs, labels in loader:
        imgs, labels = imgs.to(device), labels.to(device)
        output = model(imgs)
        loss = criterion(output, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        iter_cnt += 1
        running_loss += loss  # bug
    return running_loss / iter_cnt
