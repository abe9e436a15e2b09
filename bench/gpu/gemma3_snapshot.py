"""Where Gemma 3's batched generate peaks (bench/gpu/README.md: -17 % against
the estimate): one run of the peaks.py setup (gemma-3-1b-it, 4 x 4096 + 32 new,
SDPA) with PyTorch's allocator history on, dumped as a snapshot for
`oomkit snapshot`, plus the prefill alone under SDPA and eager.

Usage: python3 bench/gpu/gemma3_snapshot.py OUTDIR
"""
import json, pathlib, sys, torch
from transformers import AutoConfig, AutoModelForCausalLM

out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
models = pathlib.Path(__file__).resolve().parents[2] / "crates" / "oomkit_estimate" / "models"
cfg = AutoConfig.from_pretrained(str(models / "google__gemma-3-1b-it.json"))
res = {}
for attn in ("sdpa", "eager"):
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation=attn).eval()
    ids = torch.randint(0, cfg.vocab_size, (4, 4096), device="cuda")
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.no_grad():
        model(input_ids=ids, logits_to_keep=1)
    torch.cuda.synchronize()
    res[f"{attn}_prefill_over_weights"] = torch.cuda.max_memory_allocated() - base
    torch.cuda.reset_peak_memory_stats()
    if attn == "sdpa":
        torch.cuda.memory._record_memory_history(max_entries=200000)
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=32,
                       min_new_tokens=32, do_sample=False, pad_token_id=0, eos_token_id=None)
    torch.cuda.synchronize()
    res[f"{attn}_generate_peak"] = torch.cuda.max_memory_allocated()
    res[f"{attn}_weights"] = base
    if attn == "sdpa":
        torch.cuda.memory._dump_snapshot(str(out / "gemma3_generate.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
    del model, ids
    torch.cuda.empty_cache()
(out / "gemma3.json").write_text(json.dumps(res, indent=1))
print(json.dumps(res, indent=1))
