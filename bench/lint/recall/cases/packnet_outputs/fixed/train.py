# The project's fix, restated here (see ../train.py).
import torch


def train(module, dataloader, optimizer):
    module.train()
    outputs = []
    for i, batch in enumerate(dataloader):
        optimizer.zero_grad()
        output = module.training_step(batch, i)
        output["loss"].backward()
        optimizer.step()
        outputs.append(output["loss"].detach())
    return module.training_epoch_end(outputs)
