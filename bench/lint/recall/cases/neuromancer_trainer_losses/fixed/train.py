# The project's fix, restated here (see ../train.py).
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
                losses.append(output[self.train_metric].detach())
            print(epoch, torch.mean(torch.stack(losses)))
