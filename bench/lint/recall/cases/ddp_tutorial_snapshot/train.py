# recall case: pytorch/examples, distributed/ddp-tutorial-series/multigpu_torchrun.py (Trainer._load_snapshot)
# bug: every torchrun process resumes with `torch.load(snapshot_path)`, so GPU 0 holds a
#      copy per process (https://github.com/pytorch/examples/issues/1078; the fix maps
#      to the process's own device).
# reproduction written here (the pattern, not the project's code).
# expect: OOM202
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, snapshot_path):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model.to(self.gpu_id)
        if os.path.exists(snapshot_path):
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model, device_ids=[self.gpu_id])

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path)  # bug
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]


if __name__ == "__main__":
    dist.init_process_group(backend="nccl")
    trainer = Trainer(torch.nn.Linear(20, 1), "snapshot.pt")
