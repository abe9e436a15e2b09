# recall case: BatsResearch/labelmodels, labelmodels/label_model.py (the training loop)
# bug: `running_loss` is the sum of non-detached losses over the epoch, so every batch's
#      graph is kept (https://github.com/BatsResearch/labelmodels/issues/4); the
#      maintainers merged `running_loss += loss.item()`.
# reproduction written here (the pattern, not the project's code).
# expect: OOM102
import torch


class LabelModel(torch.nn.Module):
    def _do_estimate(self, batches, epochs, lr):
        optimizer = torch.optim.SGD(self.parameters(), lr=lr)
        for epoch in range(epochs):
            running_loss = 0.0
            for i_batch, inputs in enumerate(batches):
                optimizer.zero_grad()
                loss = -1 * torch.mean(self(*inputs))
                loss.backward()
                optimizer.step()
                running_loss += loss  # bug
            print(epoch, running_loss / len(batches))
