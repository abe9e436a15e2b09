"""Check `oomkit estimate`'s parameter count against transformers itself.

Builds every embedded catalogue config (crates/oomkit_estimate/models/*.json)
with the real transformers model class on the meta device (shapes only, no
memory, no download) and compares sum(p.numel() for p in model.parameters())
- which counts tied weights once - with the `params` that
`oomkit estimate MODEL --format json` prints. Prints one row per model and
exits 1 if any count differs.

Usage: python bench/estimate-oracle/param_counts.py [--oomkit target/debug/oomkit] [FILE ...]
Needs: torch, transformers (pip).
"""

import argparse
import json
import pathlib
import subprocess
import sys

import torch
from transformers import (
    CONFIG_MAPPING,
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "crates" / "oomkit_estimate" / "models"


def torch_count(path):
    model_type = json.loads(path.read_text()).get("model_type")
    if model_type not in CONFIG_MAPPING:  # Qwen v1: remote code only
        raise NotImplementedError(f"model_type {model_type!r} is not in transformers")
    cfg = AutoConfig.from_pretrained(str(path))
    arch = (getattr(cfg, "architectures", None) or [""])[0]
    with torch.device("meta"):
        if "ConditionalGeneration" in arch:
            model = AutoModelForImageTextToText.from_config(cfg)
        elif arch.endswith("ForCausalLM") or arch.endswith("LMHeadModel"):
            model = AutoModelForCausalLM.from_config(cfg)
        else:
            model = AutoModel.from_config(cfg)
    return sum(p.numel() for p in model.parameters())


def oomkit_count(exe, path):
    out = subprocess.run(
        [exe, "estimate", str(path), "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)["model"]["params"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oomkit", default=str(ROOT / "target" / "debug" / "oomkit"))
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = [pathlib.Path(f) for f in a.files] or sorted(MODELS.glob("*.json"))
    bad = 0
    print("| config | transformers | oomkit | diff |")
    print("|---|---:|---:|---:|")
    for f in files:
        try:
            want = torch_count(f)
        except Exception as e:  # remote-code models (Qwen v1) have no class in transformers
            print(f"| {f.name} | skipped: {type(e).__name__}: {str(e)[:60]} | | |")
            continue
        got = oomkit_count(a.oomkit, f)
        diff = got - want
        bad += diff != 0
        print(f"| {f.name} | {want:,} | {got:,} | {diff:+,} |")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
