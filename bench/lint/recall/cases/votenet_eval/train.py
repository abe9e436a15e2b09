# recall case: facebookresearch/votenet, train.py (evaluate_one_epoch)
# bug: the evaluation every 10 epochs runs the network after `net.eval()` with gradients
#      on: about 2.3 GB more GPU memory at batch size 8
#      (https://github.com/facebookresearch/votenet/issues/30; the maintainer updated
#      train.py to run it under `torch.no_grad()`).
# reproduction written here (the pattern, not the project's code).
# expect: OOM104
import torch


def evaluate_one_epoch(net, loader, criterion, device):
    stat_dict = {}
    net.eval()
    for batch_idx, batch in enumerate(loader):
        inputs = {"point_clouds": batch["point_clouds"].to(device)}
        end_points = net(inputs)  # bug
        loss, end_points = criterion(end_points, batch)
        stat_dict["loss"] = stat_dict.get("loss", 0) + loss.item()
    return stat_dict["loss"] / (batch_idx + 1)
