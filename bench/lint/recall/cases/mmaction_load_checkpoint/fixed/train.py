# The project's fix, restated here (see ../train.py).
import torch
import torch.distributed as dist


def init_dist():
    dist.init_process_group(backend="nccl")
    torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())


def init_weights(model, pretrained):
    state_dict = torch.load(pretrained, map_location="cpu")
    model.load_state_dict(state_dict, strict=False)


def main(model, pretrained):
    init_dist()
    init_weights(model, pretrained)
    return torch.nn.parallel.DistributedDataParallel(model.cuda())
