"""Run every snippet `oomkit estimate` prints in its plans against the real libraries.

Usage: python check_snippets.py OOMKIT_BINARY   (see check_snippets.sh, which makes the venv)

For each setup below, oomkit prints its plan as JSON; every step's `config` is then:
- DeepSpeed JSON: passed to transformers' TrainingArguments(deepspeed=...), which fills the
  "auto" keys (HfTrainerDeepSpeedConfig.trainer_config_process), and the filled config is
  validated by DeepSpeed's own config classes (deepspeed.runtime.config.DeepSpeedConfig;
  pydantic models that reject unknown keys) when deepspeed is installed;
- Python: executed with the real transformers / peft objects (TrainingArguments,
  BitsAndBytesConfig, LoraConfig, a real fast tokenizer built in memory).
  `AutoModelForCausalLM.from_pretrained` is replaced by a stand-in that checks its keyword
  arguments against from_pretrained's documented ones and that quantization_config is a
  BitsAndBytesConfig, without downloading weights;
- `vllm serve` lines: parsed by vLLM's own argument parser when vllm is importable, else
  checked against the flags and quantization methods read from vLLM's source
  (vllm/engine/arg_utils.py EngineArgs; vllm/model_executor/layers/quantization
  QUANTIZATION_METHODS), since vllm does not install without CUDA;
- `torchrun ... pretrain_gpt.py` lines: Megatron-LM's flags (megatron/training/arguments.py);
- diffusers lines (image models): executed with the real diffusers objects. The
  `PipelineQuantizationConfig` is the real one (its constructor validates the backend and
  the backend's keyword arguments), torchao's `Float8WeightOnlyConfig` and diffusers' /
  transformers' `TorchAoConfig` are real; `DiffusionPipeline.from_pretrained` is a
  stand-in that checks its keywords against the ones diffusers' from_pretrained pops plus
  the pipeline class's components, that each quantized component is one of the
  pipeline's, and returns the pipeline class itself, so `pipe.enable_…()` and
  `pipe.vae.enable_…()` must exist on the real pipeline / AutoencoderKL classes and
  accept the call, and `pipe(prompt, …)` must match the pipeline's `__call__`.
Prints one line per snippet and a closing 'N passed, N failed'.
"""

import inspect
import json
import subprocess
import sys
import tempfile

OOMKIT = sys.argv[1] if len(sys.argv) > 1 else "target/debug/oomkit"

# (arguments to `oomkit estimate`, what it exercises)
SETUPS = [
    ("mistralai/Mistral-7B-v0.1 --task train --batch 32 --seq 1024 --gpu rtx-4090", "full FT: checkpointing, LoRA, 8 x 4"),
    ("meta-llama/Llama-3.1-70B --task train --seq 4096 --gpu h100-sxm", "LoRA, checkpointing, QLoRA"),
    ("meta-llama/Llama-3.1-8B --task train --method lora --batch 8 --seq 4096 --gpu rtx-4090", "QLoRA from LoRA"),
    ("meta-llama/Llama-3.1-8B --task train --precision fp32 --batch 8 --seq 2048 --gpu rtx-4090", "bf16 weights"),
    ("meta-llama/Llama-3.1-70B --task train --method lora --gpus 4 --seq 8192 --gpu a100-80gb", "multi-GPU"),
    ("meta-llama/Llama-3.1-8B --task train --optimizer adamw --gpus 4 --zero 2 --seq 8192 --batch 16 --gpu rtx-4090", "ZeRO-3, last resorts"),
    ("meta-llama/Llama-3.1-70B --task train --gpus 8 --seq 4096 --gpu h100-sxm", "ZeRO-3 before LoRA"),
    ("meta-llama/Llama-3.1-8B --task train --gpus 4 --seq 4096 --batch 8 --gpu a100-40gb", "ZeRO-3, 2 x 4"),
    ("meta-llama/Llama-3.1-70B --batch 8 --seq 4096 --new-tokens 512 --gpu h100-sxm", "inference: 8/4-bit"),
    ("Qwen/Qwen2.5-72B --seq 2048 --gpus 4 --gpu rtx-4090", "inference: device_map"),
    ("meta-llama/Llama-3.1-70B-Instruct --engine vllm --task serve --gpu h100-sxm", "vLLM: fp8, AWQ, bnb, TP"),
    ("meta-llama/Llama-3.1-8B-Instruct --engine vllm --task serve --gpu rtx-4090", "vLLM: max-model-len"),
    ("Qwen/Qwen2.5-72B-Instruct --engine vllm --task serve --gpu a100-80gb", "vLLM: no fp8 on Ampere"),
    ("flux-dev --gpu rtx-4090", "FLUX: model offload"),
    ("flux-dev --gpu rtx-2060", "FLUX: nf4, sequential offload"),
    ("flux-dev --quant fp8 --gpu rtx-3060", "FLUX: fp8 (torchao) on both quantized components"),
    ("flux-dev --gpu rtx-3060 --width 2048 --height 2048", "FLUX: VAE tiling, 8-bit"),
    ("sdxl --gpu rtx-2060 --images 4 --width 2048 --height 2048", "SDXL: slicing, tiling, smaller images"),
    ("sdxl --quant fp8 --precision fp32 --gpu rtx-2060", "SDXL: fp16 with fp8 kept"),
    ("sd15 --gpu rtx-2060 --precision fp32 --images 8 --attention eager", "SD 1.5: attention slicing, one image"),
    ("sd15 --gpu rtx-2060 --images 16 --width 1024 --height 1024", "SD 1.5: safety checker off, quantized"),
]

# diffusers pipeline classes by the `pipeline` key of oomkit's JSON.
PIPELINES = {"sd15": "StableDiffusionPipeline", "sdxl": "StableDiffusionXLPipeline", "flux": "FluxPipeline"}

# from_pretrained keyword arguments the snippets may use (transformers modeling_utils.py
# PreTrainedModel.from_pretrained docstring: torch_dtype, device_map, max_memory,
# quantization_config).
FROM_PRETRAINED = {"torch_dtype", "dtype", "device_map", "max_memory", "quantization_config"}

# vLLM's engine flags used and its quantization methods, from vLLM's source.
VLLM_FLAGS = {
    "--gpu-memory-utilization": float,
    "--max-model-len": int,
    "--quantization": {"fp8", "bitsandbytes", "awq", "gptq", "awq_marlin", "gptq_marlin"}.__contains__,
    "--tensor-parallel-size": int,
    "--pipeline-parallel-size": int,
    "--kv-cache-dtype": {"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}.__contains__,  # vllm/config/cache.py CacheDType
}
MEGATRON_FLAGS = {"--tensor-model-parallel-size", "--sequence-parallel"}


def plans():
    for args, what in SETUPS:
        out = subprocess.run([OOMKIT, "estimate", *args.split(), "--format", "json"],
                             capture_output=True, text=True)
        if out.returncode not in (0, 1):
            raise SystemExit(f"oomkit estimate {args}: exit {out.returncode}: {out.stderr}")
        v = json.loads(out.stdout)
        for step in v.get("fit", {}).get("plan", []):
            step["pipeline"] = v["model"].get("pipeline")
            yield args, what, step


def tokenizer_in_memory():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1, "hello": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]")


class FromPretrained:
    """Stands in for AutoModelForCausalLM: checks the call, loads nothing."""

    calls = []

    @classmethod
    def from_pretrained(cls, model_id, **kw):
        from transformers import BitsAndBytesConfig

        unknown = set(kw) - FROM_PRETRAINED
        if unknown:
            raise TypeError(f"from_pretrained: unknown arguments {sorted(unknown)}")
        q = kw.get("quantization_config")
        if q is not None and not isinstance(q, BitsAndBytesConfig):
            raise TypeError("quantization_config is not a BitsAndBytesConfig")
        if q is not None:
            q.to_dict()  # validates the combination (post_init ran in the constructor)
        cls.calls.append(kw)
        return cls


def check_deepspeed(cfg, outdir):
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=outdir, deepspeed=cfg, per_device_train_batch_size=2,
                             gradient_accumulation_steps=4, bf16=False)
    filled = args.hf_deepspeed_config.config
    try:
        import deepspeed.runtime.constants as ds_keys
        from deepspeed.runtime.config import DeepSpeedConfig
    except ImportError:
        return "filled by TrainingArguments (deepspeed not installed)"
    # DeepSpeed ignores unknown top-level keys; its sections reject them (pydantic
    # models with extra="forbid"). Top-level names are the constants of
    # deepspeed/runtime/constants.py, plus the ZeRO section.
    known = {v for k, v in vars(ds_keys).items() if k.isupper() and isinstance(v, str)}
    unknown = set(cfg) - known - {"zero_optimization"}
    if unknown:
        raise KeyError(f"not DeepSpeed config keys: {sorted(unknown)}")
    DeepSpeedConfig(filled)
    return "filled by TrainingArguments, accepted by DeepSpeedConfig"


def check_python(code, outdir):
    import peft
    import torch
    import transformers
    from transformers import BitsAndBytesConfig, TrainingArguments

    real_init = TrainingArguments.__init__

    env = {
        "torch": torch, "transformers": transformers, "peft": peft,
        "BitsAndBytesConfig": BitsAndBytesConfig, "TrainingArguments": TrainingArguments,
        "AutoModelForCausalLM": FromPretrained, "model_id": "org/model",
        "tokenizer": tokenizer_in_memory(), "texts": ["hello hello"], "prompts": ["hello"] * 16,
        "prompt": "hello",
    }
    # TrainingArguments wants an output directory before transformers 4.50 made it optional.
    if "TrainingArguments(" in code and "output_dir" not in code:
        def init(self, *a, **kw):
            kw.setdefault("output_dir", outdir)
            real_init(self, *a, **kw)
        env["TrainingArguments"] = type("TrainingArguments", (TrainingArguments,), {"__init__": init})
    # BitsAndBytesConfig takes **kwargs and only logs the ones it does not know.
    known_bnb = set(inspect.signature(BitsAndBytesConfig.__init__).parameters) - {"self", "kwargs"}

    def bnb(**kw):
        unknown = set(kw) - known_bnb
        if unknown:
            raise TypeError(f"BitsAndBytesConfig: unknown arguments {sorted(unknown)}")
        return BitsAndBytesConfig(**kw)

    env["BitsAndBytesConfig"] = bnb
    exec(compile(code, "<snippet>", "exec"), env)
    return "ran"


def check_vllm(line):
    words = line.split()
    assert words[:2] == ["vllm", "serve"] and len(words) > 2, line
    try:
        from vllm.engine.arg_utils import EngineArgs  # noqa: F401
        from vllm.entrypoints.openai.cli_args import make_arg_parser
        from vllm.utils import FlexibleArgumentParser

        make_arg_parser(FlexibleArgumentParser()).parse_args(words[2:])
        return "parsed by vLLM"
    except ImportError:
        pass
    rest = iter(words[3:])
    for flag in rest:
        value = next(rest)
        ok = VLLM_FLAGS[flag]
        if ok is int:
            int(value)
        elif ok is float:
            assert 0 < float(value) <= 1, line
        else:
            assert ok(value), f"{flag} {value}"
    return "flags from vLLM's source (vllm not installed)"


def check_megatron(line):
    code = line.split("#")[0].split()
    assert code[0] == "torchrun" and "pretrain_gpt.py" in code, line
    flags = {w for w in code[code.index("pretrain_gpt.py") + 1:] if w.startswith("--")}
    assert flags <= MEGATRON_FLAGS, flags - MEGATRON_FLAGS
    return "Megatron-LM flags"


class Checked:
    """Stands in for a diffusers class or instance: an attribute must exist on the real
    class, a method call must bind to its signature, a component (`pipe.vae`) is the class
    the pipeline's __init__ annotates."""

    def __init__(self, cls):
        self.cls = cls

    def __getattr__(self, name):
        import diffusers

        init = inspect.signature(self.cls.__init__).parameters
        if name in init:
            ann = init[name].annotation
            return Checked(getattr(diffusers, ann) if isinstance(ann, str) else ann)
        attr = getattr(self.cls, name)  # AttributeError: not on the real class
        if not callable(attr):
            return attr

        def call(*a, **kw):
            inspect.signature(attr).bind(self, *a, **kw)

        return call

    def __call__(self, *a, **kw):
        sig = inspect.signature(self.cls.__call__)
        if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            sig.bind(self, *a, **kw)
        else:
            unknown = set(kw) - set(sig.parameters)
            if unknown:
                raise TypeError(f"{self.cls.__name__}.__call__: unknown arguments {sorted(unknown)}")
        return type("Output", (), {"images": []})()


def from_pretrained_keywords():
    """The keywords diffusers' DiffusionPipeline.from_pretrained reads (`kwargs.pop`)."""
    import re

    from diffusers import DiffusionPipeline

    src = inspect.getsource(DiffusionPipeline.from_pretrained)
    return set(re.findall(r'kwargs\.pop\("(\w+)"', src))


def check_diffusers(code, pipeline):
    import diffusers
    import torch

    cls = getattr(diffusers, PIPELINES[pipeline])
    components = set(inspect.signature(cls.__init__).parameters) - {"self"}
    allowed = from_pretrained_keywords() | components

    class Pipeline:
        @staticmethod
        def from_pretrained(model_id, **kw):
            unknown = set(kw) - allowed
            if unknown:
                raise TypeError(f"from_pretrained: unknown arguments {sorted(unknown)}")
            q = kw.get("quantization_config")
            if q is not None:
                if not isinstance(q, diffusers.PipelineQuantizationConfig):
                    raise TypeError("quantization_config is not a PipelineQuantizationConfig")
                names = set(q.components_to_quantize or []) | set(q.quant_mapping or {})
                if not names <= components:
                    raise KeyError(f"not components of {cls.__name__}: {sorted(names - components)}")
            return Checked(cls)

    env = {"torch": torch, "DiffusionPipeline": Pipeline,
           "PipelineQuantizationConfig": diffusers.PipelineQuantizationConfig,
           "pipe": Checked(cls), "prompt": "a photo of a cat"}
    exec(compile(code, "<snippet>", "exec"), env)
    return f"ran against diffusers {diffusers.__version__} ({cls.__name__})"


# Snippets of the kind the issue found printed: each check must reject its own.
BROKEN = [
    ("py", 'TrainingArguments(per_device_batch_size=8)'),
    ("py", 'AutoModelForCausalLM.from_pretrained(model_id, load_in_4bit=True)'),
    ("py", 'AutoModelForCausalLM.from_pretrained(model_id, quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant="nf4"))'),
    ("py", 'peft.LoraConfig(rank=16)'),
    ("ds", {"zero_optimization": {"stage": 3, "overlap": True}, "train_micro_batch_size_per_gpu": "auto"}),
    ("ds", {"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto", "zero3": True}),
    ("vllm", "vllm serve m --quantization int8"),
    ("vllm", "vllm serve m --max-model-length 4096"),
    # The fp8 line as oomkit printed it before: its import in a comment.
    ("diffusers", 'pipe = DiffusionPipeline.from_pretrained("m", torch_dtype=torch.float16, quantization_config=PipelineQuantizationConfig(quant_mapping={"unet": diffusers.TorchAoConfig(Float8WeightOnlyConfig())}))  # from torchao.quantization import Float8WeightOnlyConfig'),
    ("diffusers", 'pipe = DiffusionPipeline.from_pretrained("m", quantization_config=PipelineQuantizationConfig(quant_backend="bitsandbytes_4bit", quant_kwargs={"load_in_4bit": True}, components_to_quantize=["transformer"]))'),
    ("diffusers", "pipe.vae.enable_tilling()"),
    ("diffusers", "images = pipe(prompt, num_images=1).images"),
    ("diffusers", "width=1152, height=1152"),
]


def self_test(outdir):
    check = {"py": lambda c: check_python(c, outdir), "ds": lambda c: check_deepspeed(c, outdir),
             "vllm": check_vllm, "diffusers": lambda c: check_diffusers(c, "sd15")}
    for kind, code in BROKEN:
        try:
            check[kind](code)
        except Exception:  # noqa: BLE001 - any rejection will do
            continue
        raise SystemExit(f"self-test: the {kind} check accepted a broken snippet: {code}")
    print(f"self-test: {len(BROKEN)} broken snippets rejected")


def main():
    passed = failed = 0
    seen = set()
    with tempfile.TemporaryDirectory() as outdir:
        self_test(outdir)
        for args, what, step in plans():
            code = step["config"]
            if code in seen:
                continue
            seen.add(code)
            try:
                if step.get("pipeline"):
                    how = check_diffusers(code, step["pipeline"])
                elif code.startswith("{"):
                    how = check_deepspeed(json.loads(code), outdir)
                elif code.startswith("vllm serve "):
                    how = check_vllm(code)
                elif code.startswith("torchrun "):
                    how = check_megatron(code)
                else:
                    how = check_python(code, outdir)
                passed += 1
                print(f"ok   [{step['remedy']}] {how}: {code}")
            except Exception as e:  # noqa: BLE001 - report every failure, keep going
                failed += 1
                print(f"FAIL [{step['remedy']}] {type(e).__name__}: {e}\n     {code}\n     from: oomkit estimate {args} ({what})")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
