# The project's fix, restated here (see ../train.py).
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
                running_loss += loss.item()
            print(epoch, running_loss / len(batches))
