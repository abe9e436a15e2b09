# The project's fix, restated here (see ../train.py).
import torch


class MyBatchNorm(torch.nn.BatchNorm1d):
    def forward(self, x):
        if self.training:
            mean = x.mean(0).detach()
            self.running_mean = 0.9 * self.running_mean + 0.1 * mean
        return (x - self.running_mean) / torch.sqrt(self.running_var + self.eps)
