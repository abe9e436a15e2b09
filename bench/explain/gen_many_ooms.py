#!/usr/bin/env python3
"""Stress input: N distinct legacy-PyTorch OOM lines back to back (fixed seed, stdlib only).

Each line asks for a different size, so oomkit cannot fold them into repeats;
this probes how time and memory grow with the number of distinct events
(`oomkit_explain::MAX_EVENTS` keeps at most 2,000).

    python3 bench/explain/gen_many_ooms.py --count 5000 --out bench/data/many_ooms_5000.log
    /usr/bin/time -v target/release/oomkit explain --format json bench/data/many_ooms_5000.log > /dev/null
"""

import argparse
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, required=True, help="number of OOM lines")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    r = random.Random(args.seed)
    with open(args.out, "w") as f:
        f.writelines(
            f"RuntimeError: CUDA out of memory. Tried to allocate {r.randint(1, 99999) / 100:.2f} MiB "
            "(GPU 0; 23.65 GiB total capacity; 1.06 GiB already allocated; 10.26 GiB free; "
            "12.53 GiB reserved in total by PyTorch)\n"
            for _ in range(args.count)
        )


if __name__ == "__main__":
    main()
