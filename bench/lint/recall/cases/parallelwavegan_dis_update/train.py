# recall case: kan-bayashi/ParallelWaveGAN, parallel_wavegan/bin/train.py (Trainer._train_step)
# bug: the discriminator update reuses the generator's output `y_`, still attached to the
#      generator's graph (https://github.com/kan-bayashi/ParallelWaveGAN/pull/132, merged,
#      labelled bug: re-compute the fake output under `torch.no_grad()` for the
#      discriminator update).
# reproduction written here (the pattern, not the project's code).
# expect: OOM116
import torch


class Trainer:
    def __init__(self, model, optimizer, criterion):
        self.model = model
        self.optimizer = optimizer
        self.criterion = criterion

    def train(self, loader):
        for x, y in loader:
            y_ = self.model["generator"](x)
            gen_loss = self.criterion["stft"](y_, y)
            self.optimizer["generator"].zero_grad()
            gen_loss.backward()
            self.optimizer["generator"].step()

            p = self.model["discriminator"](y)
            p_ = self.model["discriminator"](y_)  # bug
            dis_loss = self.criterion["mse"](p, torch.ones_like(p)) + self.criterion["mse"](p_, torch.zeros_like(p_))
            self.optimizer["discriminator"].zero_grad()
            dis_loss.backward()
            self.optimizer["discriminator"].step()
