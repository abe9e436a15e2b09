# recall case: huggingface/pytorch-image-models (rwightman/pytorch-image-models),
#              timm/models/helpers.py (load_checkpoint)
# bug: `torch.load(checkpoint_path)` loads the checkpoint onto the GPU it was saved from
#      before the state dict is copied into the model: "out of memory" on load; fixed in
#      huggingface/pytorch-image-models#23 (load onto the CPU).
# reproduction written here (the pattern, not the project's code); described in the PR; the helper is reconstructed.
# expect: OOM202
import os
from collections import OrderedDict

import torch


def load_checkpoint(model, checkpoint_path, use_ema=False):
    if checkpoint_path and os.path.isfile(checkpoint_path):
        checkpoint = torch.load(checkpoint_path)  # bug
        state_dict_key = "state_dict_ema" if use_ema else "state_dict"
        if isinstance(checkpoint, dict) and state_dict_key in checkpoint:
            new_state_dict = OrderedDict()
            for k, v in checkpoint[state_dict_key].items():
                name = k[7:] if k.startswith("module") else k
                new_state_dict[name] = v
            model.load_state_dict(new_state_dict)
        else:
            model.load_state_dict(checkpoint)
    else:
        raise FileNotFoundError(checkpoint_path)
