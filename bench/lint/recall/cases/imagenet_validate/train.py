# recall case: pytorch/examples, imagenet/main.py (validate)
# bug: after `volatile=True` stopped having any effect, validation ran the model with
#      gradients on and GPU memory grew through the validation phase
#      (https://github.com/pytorch/pytorch/issues/4932, pointing at
#      https://github.com/pytorch/examples/issues/280; the script was updated to
#      `with torch.no_grad():`).
# reproduction written here (the pattern, not the project's code).
# expect: OOM104
import torch


def validate(val_loader, model, criterion):
    model.eval()
    correct = 0
    for i, (images, target) in enumerate(val_loader):
        images, target = images.cuda(non_blocking=True), target.cuda(non_blocking=True)
        output = model(images)  # bug
        loss = criterion(output, target)
        correct += (output.argmax(1) == target).sum().item()
    return correct / len(val_loader.dataset)
