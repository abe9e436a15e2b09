# recall case: pnnl/neuromancer, src/neuromancer/trainer.py (Trainer.train)
# bug: the per-batch training metric is stored without detaching it, so every batch's
#      graph is kept for the epoch ("hundreds of MB or a few GB of autograd graph" per
#      run; https://github.com/pnnl/neuromancer/pull/292, merged).
# reproduction written here (the pattern, not the project's code).
# expect: OOM101
import torch


class Trainer:
    def __init__(self, problem, optimizer, train_data, train_metric="train_loss"):
        self.model = problem
        self.optimizer = optimizer
        self.train_data = train_data
        self.train_metric = train_metric

    def train(self, epochs):
        for epoch in range(epochs):
            losses = []
            for t_batch in self.train_data:
                output = self.model(t_batch)
                self.optimizer.zero_grad()
                output[self.train_metric].backward()
                self.optimizer.step()
                losses.append(output[self.train_metric])  # bug
            print(epoch, torch.mean(torch.stack(losses)))
