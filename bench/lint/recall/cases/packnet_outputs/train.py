# recall case: TRI-ML/packnet-sfm, packnet_sfm/trainers/horovod_trainer.py (train)
# bug: every batch's output dict, whose "loss" still carries the graph, is appended to the
#      epoch's outputs list: memory grows from 21 to 38 GB in an epoch
#      (https://github.com/TRI-ML/packnet-sfm/issues/47); fixed by
#      https://github.com/TRI-ML/packnet-sfm/pull/51 ("Detach loss before appending it").
# reproduction written here (the pattern, not the project's code).
# expect: OOM101
import torch


def train(module, dataloader, optimizer):
    module.train()
    outputs = []
    for i, batch in enumerate(dataloader):
        optimizer.zero_grad()
        output = module.training_step(batch, i)
        output["loss"].backward()
        optimizer.step()
        outputs.append(output["loss"])  # bug
    return module.training_epoch_end(outputs)
