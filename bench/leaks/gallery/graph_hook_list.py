"""Leak (graph): a Lightning-style module (no Lightning needed: a ten-line trainer
calls the hooks) keeps every training_step output in on_train_batch_end; the
outputs dict holds the loss and the predictions with their graph."""
# Seen in: Lightning-AI/pytorch-lightning#15514 and #8583 (step outputs kept for the
# epoch end), ashleve/lightning-hydra-template#458.
import torch
from torch import nn


class LitClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
        self.training_step_outputs = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        preds = self.net(x)
        return {"loss": nn.functional.cross_entropy(preds, y), "preds": preds}

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.training_step_outputs.append(outputs)  # leaks: expect graph

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class MiniTrainer:
    def __init__(self, max_steps):
        self.max_steps = max_steps

    def fit(self, module, loader):
        opt = module.configure_optimizers()
        for batch_idx, batch in enumerate(loader):
            if batch_idx >= self.max_steps:
                break
            out = module.training_step(batch, batch_idx)
            opt.zero_grad()
            out["loss"].backward()
            opt.step()
            module.on_train_batch_end(out, batch, batch_idx)


torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(30 * 64, 128), torch.randint(0, 10, (30 * 64,)))
loader = torch.utils.data.DataLoader(data, batch_size=64)
module = LitClassifier()
MiniTrainer(max_steps=30).fit(module, loader)
print(f"kept {len(module.training_step_outputs)} step outputs")
