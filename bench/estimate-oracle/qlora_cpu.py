"""A real QLoRA training step on the CPU, measured with MemTracker: bitsandbytes (>= 0.50)
runs NF4 layers on the CPU, so QLoRA's memory can be measured without a GPU.

The model is built with random weights from a catalogue config, saved as safetensors to a
scratch folder, and loaded back with BitsAndBytesConfig(load_in_4bit=True, nf4, bf16
compute) on the CPU; then LoRA r=16 on q_proj/v_proj, optionally PEFT's
prepare_model_for_kbit_training (which casts every 16-bit parameter to fp32 and turns on
gradient checkpointing), and two AdamW steps under MemTracker, as oracle.py does.

MemTracker sees parameters and the tensors made inside it: the NF4 absmax constants
(fp32, one per 64 weights) live in each layer's quant_state, made at load time, and are not
counted; add 4 bytes per 64 quantized weights to compare with `oomkit estimate`.

Usage: python bench/estimate-oracle/qlora_cpu.py CONFIG.json BATCH SEQ [--prep] [--ckpt]
       [--scratch DIR]      (slow: SmolLM2-135M at 1 x 256 takes ~4-6 CPU minutes)
Needs: torch, transformers, peft, bitsandbytes >= 0.50 (pip, CPU wheels work).
"""

import argparse
import json
import pathlib
import tempfile

import torch
from torch.distributed._tools.mem_tracker import MemTracker


class _NoHook:
    def remove(self):
        pass


def _frozen_ok(register):
    # MemTracker hooks every parameter; frozen ones (the 4-bit base) refuse hooks.
    def wrapped(self, hook):
        return register(self, hook) if self.requires_grad else _NoHook()
    return wrapped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("batch", type=int)
    ap.add_argument("seq", type=int)
    ap.add_argument("--prep", action="store_true", help="peft.prepare_model_for_kbit_training")
    ap.add_argument("--ckpt", action="store_true", help="gradient checkpointing")
    ap.add_argument("--scratch", default="")
    a = ap.parse_args()
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import AutoConfig, AutoModelForCausalLM, BitsAndBytesConfig

    scratch = pathlib.Path(a.scratch or tempfile.mkdtemp(prefix="oomkit-qlora-"))
    if not (scratch / "model.safetensors").exists():
        torch.manual_seed(0)
        cfg = AutoConfig.from_pretrained(a.config)
        AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).save_pretrained(scratch)
    torch.Tensor.register_hook = _frozen_ok(torch.Tensor.register_hook)
    torch.Tensor.register_post_accumulate_grad_hook = _frozen_ok(
        torch.Tensor.register_post_accumulate_grad_hook)
    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                           bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(scratch, quantization_config=q,
                                                 dtype=torch.bfloat16, device_map="cpu")
    if a.prep:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=a.ckpt)
    elif a.ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                             lora_dropout=0.0))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, foreach=True)
    by_dtype = {}
    for p in model.parameters():
        by_dtype[str(p.dtype)] = by_dtype.get(str(p.dtype), 0) + p.numel() * p.element_size()
    mt = MemTracker()
    mt.track_external(model, opt)
    with mt:
        for i in range(2):
            ids = torch.randint(0, model.config.vocab_size, (a.batch, a.seq))
            out = model(input_ids=ids, labels=ids, use_cache=False)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del out
            if i == 0:
                mt.reset_mod_stats()
    peak = mt.get_tracker_snapshot("peak")
    cats = {}
    for _, c in peak.items():
        if c.get("Total", 0) > cats.get("Total", 0):
            cats = {str(k).split(".")[-1]: int(v) for k, v in c.items()}
    print(json.dumps(dict(config=a.config, batch=a.batch, seq=a.seq, prep=a.prep, ckpt=a.ckpt,
                          peak=cats, params_by_dtype=by_dtype)))


if __name__ == "__main__":
    main()
