# recall case: a custom batch-norm layer (https://github.com/pytorch/pytorch/issues/20275)
# bug: `forward` updates `self.running_mean` from the batch mean without detaching it, so
#      each step's graph is chained to the next one: host memory grew to 64 GB overnight;
#      the fix given there (ptrblck) updates the buffer from detached statistics.
# reproduction written here (the pattern, not the project's code).
# expect: OOM110
import torch


class MyBatchNorm(torch.nn.BatchNorm1d):
    def forward(self, x):
        if self.training:
            mean = x.mean(0)
            self.running_mean = 0.9 * self.running_mean + 0.1 * mean  # bug
        return (x - self.running_mean) / torch.sqrt(self.running_var + self.eps)
