# recall case: MultimediaTechLab/YOLO (WongKinYiu/YOLO), yolo/tools/solver.py
# bug: per-component losses returned by `train_one_batch` are summed into a dict of GPU
#      tensors (`total_loss[loss_name] += loss_val * batch_size`), keeping every
#      batch's graph; fixed in MultimediaTechLab/YOLO#83 (`defaultdict(float)` and
#      `loss_val.item()`).
# reproduction written here (the pattern, not the project's code); the dict and the `+=` line follow the PR discussion; the batch step is reduced.
# expect: OOM102
from collections import defaultdict

import torch
from torch.cuda.amp import GradScaler, autocast


class ModelTrainer:
    def __init__(self, model, loss_fn, optimizer, device):
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.device = device
        self.scaler = GradScaler()

    def train_one_batch(self, images, targets):
        images, targets = images.to(self.device), targets.to(self.device)
        self.optimizer.zero_grad()
        with autocast():
            aux_predicts, main_predicts = self.model(images)
            loss, loss_item = self.loss_fn(aux_predicts, main_predicts, targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss_item

    def train_one_epoch(self, dataloader):
        self.model.train()
        total_loss = defaultdict(lambda: torch.tensor(0.0, device=self.device))
        total_samples = 0
        for batch_size, images, targets, *_ in dataloader:
            loss_each = self.train_one_batch(images, targets)
            for loss_name, loss_val in loss_each.items():
                total_loss[loss_name] += loss_val * batch_size  # bug
            total_samples += batch_size
        return {name: value / total_samples for name, value in total_loss.items()}
