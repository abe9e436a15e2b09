# The project's fix, restated here (see ../train.py).
import torch
from accelerate import Accelerator


class ImagenTrainer(torch.nn.Module):
    def __init__(self, imagen):
        super().__init__()
        self.accelerator = Accelerator()
        self.imagen = imagen

    def load(self, path):
        loaded_obj = torch.load(str(path), map_location="cpu")
        self.imagen.load_state_dict(loaded_obj["model"])
        return loaded_obj
