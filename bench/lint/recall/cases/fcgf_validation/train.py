# recall case: chrischoy/FCGF, lib/trainer.py (the trainer's validation)
# bug: validation runs the model after `.eval()` with gradients on, costing memory and
#      time (https://github.com/chrischoy/FCGF/issues/15; the author updated the
#      evaluation code to run under `torch.no_grad()`).
# reproduction written here (the pattern, not the project's code).
# expect: OOM104
import torch


class ContrastiveLossTrainer:
    def __init__(self, model, val_data_loader, device):
        self.model = model
        self.val_data_loader = val_data_loader
        self.device = device

    def _valid_epoch(self):
        self.model.eval()
        hit_ratio = 0.0
        for batch in self.val_data_loader:
            feats = self.model(batch['sinput0'].to(self.device))  # bug
            hit_ratio += (feats.norm(dim=1) > 0.5).float().mean().item()
        return hit_ratio / len(self.val_data_loader)
