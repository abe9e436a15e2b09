# recall case: marcoamonteiro/pi-GAN, train.py
# bug: every process creates its DDP model without `torch.cuda.set_device(rank)`, so
#      seven extra processes hold 500+ MB each on GPU 0 (marcoamonteiro/pi-GAN#22); the
#      fix confirmed in the thread is `torch.cuda.set_device(rank)` at the start of
#      `train`.
# reproduction written here (the pattern, not the project's code); described in the issue; the set-up is reconstructed.
# expect: OOM207
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = port
    dist.init_process_group("nccl", rank=rank, world_size=world_size)


def train(rank, world_size, opt):
    setup(rank, world_size, opt.port)
    device = torch.device(rank)
    generator = getattr(__import__("generators"), opt.generator)().to(device)
    discriminator = getattr(__import__("discriminators"), opt.discriminator)().to(device)
    generator_ddp = DDP(generator, device_ids=[rank], find_unused_parameters=True)  # bug
    discriminator_ddp = DDP(discriminator, device_ids=[rank], find_unused_parameters=True)
    return generator_ddp, discriminator_ddp


if __name__ == "__main__":
    num_gpus = torch.cuda.device_count()
    mp.spawn(train, args=(num_gpus, None), nprocs=num_gpus, join=True)
