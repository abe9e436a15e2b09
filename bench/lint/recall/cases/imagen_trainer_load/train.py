# recall case: lucidrains/imagen-pytorch, imagen_pytorch/trainer.py (ImagenTrainer.load)
# bug: `torch.load(str(path))` without `map_location` runs in every process of an
#      accelerate job, so each one puts the state dict on cuda:0
#      (https://github.com/lucidrains/imagen-pytorch/pull/132, merged: "load model to CPU
#      first").
# reproduction written here (the pattern, not the project's code).
# expect: OOM202
import torch
from accelerate import Accelerator


class ImagenTrainer(torch.nn.Module):
    def __init__(self, imagen):
        super().__init__()
        self.accelerator = Accelerator()
        self.imagen = imagen

    def load(self, path):
        loaded_obj = torch.load(str(path))  # bug
        self.imagen.load_state_dict(loaded_obj["model"])
        return loaded_obj
