# recall case: rosinality/stylegan2-pytorch, train.py
# bug: resuming loads the checkpoint with `torch.load(args.ckpt)` onto the GPU it was
#      saved from, in every process of a distributed run, and keeps it while training:
#      "too much GPU memory is used" (rosinality/stylegan2-pytorch#31); the maintainer's
#      fix is `map_location=lambda storage, loc: storage`.
# reproduction written here (the pattern, not the project's code); the load and its use follow the PR thread; the script is reduced.
# expect: OOM202
import argparse

import torch
from torch import distributed as dist
from torch import optim


def train(args, loader, generator, discriminator, g_optim, d_optim, device):
    for idx in range(args.iter):
        real_img = next(loader).to(device)
        fake_img = generator(torch.randn(args.batch, 512, device=device))
        d_loss = discriminator(fake_img).mean() - discriminator(real_img).mean()
        discriminator.zero_grad()
        d_loss.backward()
        d_optim.step()
        if idx % 10000 == 0:
            torch.save(
                {
                    "g": generator.state_dict(),
                    "d": discriminator.state_dict(),
                    "g_optim": g_optim.state_dict(),
                    "d_optim": d_optim.state_dict(),
                    "args": args,
                },
                f"checkpoint/{str(idx).zfill(6)}.pt",
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt", type=str, default=None)
    parser.add_argument("--local_rank", type=int, default=0)
    args = parser.parse_args()
    torch.cuda.set_device(args.local_rank)
    dist.init_process_group(backend="nccl", init_method="env://")
    device = "cuda"
    from model import Discriminator, Generator

    generator = Generator(args.size, 512, 8).to(device)
    discriminator = Discriminator(args.size).to(device)
    g_optim = optim.Adam(generator.parameters(), lr=0.002)
    d_optim = optim.Adam(discriminator.parameters(), lr=0.002)
    if args.ckpt is not None:
        ckpt = torch.load(args.ckpt)  # bug
        generator.load_state_dict(ckpt["g"])
        discriminator.load_state_dict(ckpt["d"])
        g_optim.load_state_dict(ckpt["g_optim"])
        d_optim.load_state_dict(ckpt["d_optim"])
    train(args, None, generator, discriminator, g_optim, d_optim, device)
