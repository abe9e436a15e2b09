# recall case: open-mmlab/mmaction2, a model's `init_weights` loading pretrained weights
# bug: `_load_checkpoint` without `map_location` in every process of a distributed run
#      loads the weights onto cuda:0 for all devices
#      (https://github.com/open-mmlab/mmaction2/pull/2254, merged: "specify map_location
#      to cpu").
# reproduction written here (the pattern, not the project's code).
# expect: OOM202
import torch
import torch.distributed as dist


def init_dist():
    dist.init_process_group(backend="nccl")
    torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())


def init_weights(model, pretrained):
    state_dict = torch.load(pretrained)  # bug
    model.load_state_dict(state_dict, strict=False)


def main(model, pretrained):
    init_dist()
    init_weights(model, pretrained)
    return torch.nn.parallel.DistributedDataParallel(model.cuda())
