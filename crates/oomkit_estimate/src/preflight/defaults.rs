//! The frameworks' defaults preflight applies where the user said nothing,
//! each with the file and version that define it (read from the projects'
//! sources; `docs/preflight.md` lists them).

/// transformers `TrainingArguments`: `per_device_train_batch_size = 8`,
/// `gradient_accumulation_steps = 1`, `gradient_checkpointing = False`,
/// `bf16 = fp16 = False`, `optim = "adamw_torch"` (`"adamw_torch_fused"` with
/// torch >= 2.8: AdamW either way).
pub const TRANSFORMERS: &str = "transformers 4.57 src/transformers/training_args.py";
/// TRL's `SFTConfig`: `max_length = 1024`, `packing = False`.
pub const TRL_SFT: &str = "TRL 1.10 trl/trainer/sft_config.py";
/// TRL's `_BaseConfig` over `TrainingArguments`: `gradient_checkpointing =
/// True`, `bf16 = not fp16`.
pub const TRL_BASE: &str = "TRL 1.10 trl/trainer/base_config.py";
/// TRL's `ModelConfig`: `dtype = "float32"`, `lora_r = 16`,
/// `lora_target_modules = None` (PEFT's per-architecture default: q and v),
/// `load_in_4bit = load_in_8bit = False`, `bnb_4bit_quant_type = "nf4"`.
pub const TRL_MODEL: &str = "TRL 1.10 trl/trainer/model_config.py";
/// axolotl: `micro_batch_size = 1`, `gradient_accumulation_steps = 1`,
/// `optimizer = "adamw_torch_fused"`.
pub const AXOLOTL_TRAINING: &str = "axolotl 0.18 src/axolotl/utils/schemas/training.py";
/// axolotl: `sequence_len = 512`, `gradient_checkpointing = False`,
/// `bf16 = "auto"`, `sample_packing = None` (off).
pub const AXOLOTL_CONFIG: &str = "axolotl 0.18 src/axolotl/utils/schemas/config.py";
/// axolotl: `adapter = None` (full fine-tune), `lora_r` (PEFT's 8 when unset).
pub const AXOLOTL_PEFT: &str = "axolotl 0.18 src/axolotl/utils/schemas/peft.py";
/// LLaMA-Factory: `cutoff_len = 2048`.
pub const LLAMAFACTORY_DATA: &str = "LLaMA-Factory 0.9.6 src/llamafactory/hparams/data_args.py";
/// LLaMA-Factory: `finetuning_type = "lora"`, `lora_rank = 8`, `lora_target =
/// "all"`, `pure_bf16 = False`.
pub const LLAMAFACTORY_FINETUNING: &str =
    "LLaMA-Factory 0.9.6 src/llamafactory/hparams/finetuning_args.py";
/// LLaMA-Factory: `disable_gradient_checkpointing = False` (checkpointing on).
pub const LLAMAFACTORY_MODEL: &str = "LLaMA-Factory 0.9.6 src/llamafactory/hparams/model_args.py";
/// LLaMA-Factory upcasts trainable parameters to fp32 unless `pure_bf16`
/// (`_setup_full_tuning`, `cast_trainable_params_to_fp32`).
pub const LLAMAFACTORY_ADAPTER: &str = "LLaMA-Factory 0.9.6 src/llamafactory/model/adapter.py";
/// torchtune recipes: `cfg.get("enable_activation_checkpointing", False)`.
pub const TORCHTUNE_RECIPE: &str = "torchtune 0.7 recipes/lora_finetune_single_device.py";
/// accelerate: one process, no mixed precision without a config file.
pub const ACCELERATE: &str = "accelerate 1.x src/accelerate/commands/launch.py";
/// torchrun: `--nproc_per_node 1`, `--nnodes 1`.
pub const TORCHRUN: &str = "PyTorch 2.x torch/distributed/run.py";
/// vLLM: `gpu_memory_utilization = 0.9`, `max_model_len` = the model's
/// context, `tensor_parallel_size = 1`.
pub const VLLM: &str = "vLLM vllm/engine/arg_utils.py";
/// llama.cpp: `-c 0` (the model's context), `-ngl` all on recent builds,
/// `-b 2048`, `-ub 512`, `-np` auto.
pub const LLAMACPP: &str = "llama.cpp common/common.h";
