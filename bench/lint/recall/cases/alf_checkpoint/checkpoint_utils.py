# recall case: HorizonRobotics/alf, alf/utils/checkpoint_utils.py (Checkpointer.load)
# bug: `map_location` is left `None` whenever CUDA is available, so a checkpoint is
#      loaded onto the GPUs it was saved from, with a surge of GPU memory on load; fixed
#      in HorizonRobotics/alf#1532 (always `torch.device('cpu')`).
# reproduction written here (the pattern, not the project's code); the map_location lines follow the diff quoted in the PR review; reduced.
# expect: OOM202
import os

import torch


class Checkpointer:
    def __init__(self, ckpt_dir, **modules):
        self._ckpt_dir = ckpt_dir
        self._modules = modules
        self._global_step = -1

    def load(self, global_step="latest"):
        f_path = os.path.join(self._ckpt_dir, "ckpt-{0}".format(global_step))
        if not os.path.isfile(f_path):
            return self._global_step
        map_location = None
        if not torch.cuda.is_available():
            map_location = torch.device("cpu")
        checkpoint = torch.load(f_path, map_location=map_location)  # bug
        for name, module in self._modules.items():
            module.load_state_dict(checkpoint[name])
        self._global_step = checkpoint["global_step"]
        return self._global_step
