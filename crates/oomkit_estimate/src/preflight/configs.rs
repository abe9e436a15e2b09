//! Training config files: axolotl, LLaMA-Factory, torchtune recipe configs and
//! TRL/HF YAML or JSON, each read with its framework's defaults.

use serde_json::Value;

use super::train::{self, Framework, Train};
use super::{Derived, Files, PreflightError, Source, Style, as_bool, file_err, parse_tree, scalar};

/// Which framework a config file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Axolotl,
    LlamaFactory,
    Torchtune,
    Hf,
    Trl,
}

/// Which training framework's config `tree` is, when it is one: torchtune
/// (`_component_` builders), axolotl (`base_model`), LLaMA-Factory (`stage`,
/// `finetuning_type`, `cutoff_len`), TRL (its own keys) or HF
/// `TrainingArguments` keys.
pub fn kind(tree: &Value) -> Option<Kind> {
    let has = |k: &str| tree.get(k).is_some();
    if tree
        .get("model")
        .and_then(|m| m.get("_component_"))
        .is_some()
    {
        return Some(Kind::Torchtune);
    }
    if has("base_model") || has("micro_batch_size") || has("sequence_len") {
        return Some(Kind::Axolotl);
    }
    if has("finetuning_type") || has("cutoff_len") || (has("stage") && has("model_name_or_path")) {
        return Some(Kind::LlamaFactory);
    }
    let trl = [
        "use_peft",
        "max_length",
        "max_seq_length",
        "packing",
        "dataset_text_field",
        "lora_r",
        "load_in_4bit",
    ];
    if trl.iter().any(|k| has(k)) {
        return Some(Kind::Trl);
    }
    let hf = [
        "model_name_or_path",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
    ];
    hf.iter().any(|k| has(k)).then_some(Kind::Hf)
}

/// Whether `text` (the file at `path`) is a training config this module reads
/// rather than a model's `config.json`.
pub fn is_training_config(path: &str, text: &str) -> bool {
    parse_tree(path, text)
        .ok()
        .as_ref()
        .and_then(kind)
        .is_some()
}

/// Reads a training config file.
pub fn from_config(path: &str, files: &dyn Files) -> Result<Derived, PreflightError> {
    let text = files.read(path).map_err(|why| file_err(path, why))?;
    let tree = parse_tree(path, &text)?;
    if tree.get("zero_optimization").is_some() {
        return Err(file_err(
            path,
            "a DeepSpeed config names no model: give the training command that uses it (`oomkit estimate -- deepspeed train.py --deepspeed FILE …`)",
        ));
    }
    if tree.get("distributed_type").is_some() {
        return Err(file_err(
            path,
            "an accelerate config names no model: give the command (`oomkit estimate -- accelerate launch --config_file FILE train.py …`)",
        ));
    }
    let Some(k) = kind(&tree) else {
        return Err(file_err(
            path,
            "not a training config oomkit reads (axolotl, LLaMA-Factory, torchtune, TRL/HF TrainingArguments keys)",
        ));
    };
    let mut dd = match k {
        Kind::Axolotl => axolotl(&tree, path, files)?,
        Kind::LlamaFactory => llamafactory(&tree, path, files)?,
        Kind::Torchtune => torchtune(&tree, path)?,
        Kind::Hf | Kind::Trl => {
            let fw = if k == Kind::Trl {
                Framework::Trl
            } else {
                Framework::Hf
            };
            let mut dd = Derived::new(
                format!(
                    "{} config {path}",
                    if k == Kind::Trl {
                        "a TRL"
                    } else {
                        "a Hugging Face TrainingArguments"
                    }
                ),
                Style::HfYaml,
            );
            let mut t = Train::from_file(path);
            t.read_hf_tree(&tree, path, &mut dd);
            t.finish(fw, &mut dd, files)?;
            dd
        }
    };
    dd.config_file = Some(path.to_string());
    if dd.model().is_none() {
        dd.need(
            "model",
            format!("the model: {path} names none oomkit reads; give MODEL"),
        );
    }
    Ok(dd)
}

/// Keys of axolotl configs that do not change the memory.
const AXOLOTL_INERT: &[&str] = &[
    "model_type",
    "tokenizer_type",
    "base_model_config",
    "tokenizer_config",
    "trust_remote_code",
    "strict",
    "datasets",
    "dataset_prepared_path",
    "val_set_size",
    "output_dir",
    "chat_template",
    "pad_to_sequence_len",
    "eval_sample_packing",
    "wandb_project",
    "wandb_entity",
    "wandb_watch",
    "wandb_name",
    "wandb_log_model",
    "num_epochs",
    "learning_rate",
    "lr_scheduler",
    "train_on_inputs",
    "group_by_length",
    "tf32",
    "early_stopping_patience",
    "resume_from_checkpoint",
    "local_rank",
    "logging_steps",
    "xformers_attention",
    "warmup_steps",
    "warmup_ratio",
    "evals_per_epoch",
    "eval_table_size",
    "saves_per_epoch",
    "debug",
    "weight_decay",
    "special_tokens",
    "lora_alpha",
    "lora_dropout",
    "lora_fan_in_fan_out",
    "lora_model_dir",
    "gradient_checkpointing_kwargs",
    "max_steps",
    "save_strategy",
    "eval_steps",
    "save_steps",
    "hub_model_id",
    "seed",
    "loss_watchdog_threshold",
    "loss_watchdog_patience",
    "plugins",
    "liger_rope",
    "liger_rms_norm",
    "liger_glu_activation",
    "liger_layer_norm",
    "liger_fused_linear_cross_entropy",
    "shuffle_merged_datasets",
    "dataset_processes",
    "test_datasets",
    "save_total_limit",
    "max_grad_norm",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "bnb_4bit_quant_type",
    "bnb_4bit_use_double_quant",
    "save_safetensors",
    "auto_resume_from_checkpoints",
    "gptq",
    "lora_modules_to_save",
    "peft_use_dora",
    "peft_use_rslora",
    "sample_packing_eff_est",
    "total_num_tokens",
    "use_tensorboard",
    "s2_attention",
    "fsdp_version",
    "torch_compile",
    "embeddings_skip_upcast",
    "eval_max_new_tokens",
    "hub_strategy",
    "flash_attn_cross_entropy",
    "flash_attn_rms_norm",
    "flash_attn_fuse_qkv",
    "flash_attn_fuse_mlp",
    "cosine_min_lr_ratio",
    "unfrozen_parameters",
    "dataloader_num_workers",
    "dataloader_pin_memory",
    "dataloader_prefetch_factor",
    "chat_template_jinja",
    "default_system_message",
];

fn axolotl(tree: &Value, path: &str, files: &dyn Files) -> Result<Derived, PreflightError> {
    let mut dd = Derived::new(format!("an axolotl config, {path}"), Style::Axolotl);
    let mut t = Train::from_file(path);
    let src = || Source::File {
        path: path.to_string(),
    };
    let Some(map) = tree.as_object() else {
        return Ok(dd);
    };
    let mut inline_ds = None;
    let mut fsdp_on = None;
    for (k, v) in map {
        let s = scalar(v).unwrap_or_default();
        match k.as_str() {
            "base_model" => t.put_canon("model_name_or_path", &s, k, src()),
            "micro_batch_size" => t.put_canon("per_device_train_batch_size", &s, k, src()),
            "gradient_accumulation_steps" => {
                t.put_canon("gradient_accumulation_steps", &s, k, src())
            }
            "sequence_len" => t.put_canon("max_length", &s, k, src()),
            "bf16" => {
                let on = s != "false";
                t.put_as("bf16", if on { "true" } else { "false" }, k, &s, src());
            }
            "fp16" => t.put_canon("fp16", &s, k, src()),
            "gradient_checkpointing" => {
                // true, "offload" and "offload_disk" all recompute.
                let on = s != "false";
                t.put_canon(
                    "gradient_checkpointing",
                    if on { "true" } else { "false" },
                    k,
                    src(),
                );
            }
            "adapter" => match s.as_str() {
                "lora" => t.put_as("use_peft", "true", k, &s, src()),
                "qlora" => {
                    t.put_as("use_peft", "true", k, &s, src());
                    t.put_as("load_in_4bit", "true", k, &s, src());
                }
                "" => {}
                other => dd.ignore(format!("adapter {other}")),
            },
            "load_in_4bit" => {
                if as_bool(v) == Some(true) {
                    t.put_canon("load_in_4bit", "true", k, src());
                }
            }
            "load_in_8bit" => {
                if as_bool(v) == Some(true) {
                    t.put_canon("load_in_8bit", "true", k, src());
                }
            }
            "lora_r" => t.put_canon("lora_r", &s, k, src()),
            "lora_target_modules" => t.put_canon("lora_target_modules", &list(v), k, src()),
            "lora_target_linear" => {
                if as_bool(v) == Some(true) {
                    t.put_as("lora_target_modules", "all-linear", k, &s, src());
                }
            }
            "optimizer" => t.put_canon("optim", &s, k, src()),
            "deepspeed" => match v {
                Value::String(p) => t.put_canon("deepspeed", p, k, src()),
                Value::Object(_) => inline_ds = Some(v.clone()),
                _ => {}
            },
            "fsdp" => {
                let l = list(v);
                if !l.is_empty() {
                    fsdp_on = Some(l);
                }
            }
            "fsdp_config" => {
                if fsdp_on.is_none() {
                    fsdp_on = Some("full_shard".into());
                }
                let off = v
                    .get("offload_params")
                    .or_else(|| v.get("fsdp_offload_params"))
                    .and_then(as_bool);
                if off == Some(true) {
                    dd.set(
                        "offload",
                        Some("params".into()),
                        "fsdp_config.offload_params",
                        "true",
                        src(),
                    );
                }
                if v.get("activation_checkpointing")
                    .or_else(|| v.get("fsdp_activation_checkpointing"))
                    .and_then(as_bool)
                    == Some(true)
                {
                    t.put_canon(
                        "gradient_checkpointing",
                        "true",
                        "fsdp_config.activation_checkpointing",
                        src(),
                    );
                }
            }
            "flash_attention" if as_bool(v) == Some(true) => {
                t.put_as("attn_implementation", "flash_attention_2", k, &s, src())
            }
            "sdp_attention" if as_bool(v) == Some(true) => {
                t.put_as("attn_implementation", "sdpa", k, &s, src())
            }
            "eager_attention" if as_bool(v) == Some(true) => {
                t.put_as("attn_implementation", "eager", k, &s, src())
            }
            "attn_implementation" => t.put_canon("attn_implementation", &s, k, src()),
            "sample_packing" => {
                if as_bool(v) == Some(true) {
                    dd.assumed.push("sample_packing: every row is filled to sequence_len, so the estimate at sequence_len is what each step holds".into());
                }
            }
            "flash_attention" | "sdp_attention" | "eager_attention" => {}
            k if AXOLOTL_INERT.contains(&k) => {}
            k => dd.ignore(k.to_string()),
        }
    }
    if map.get("sample_packing").and_then(as_bool) != Some(true) {
        dd.assumed.push(format!(
            "sample_packing off (default, {}): rows are padded to the longest in each batch, at most sequence_len; the estimate takes every row at sequence_len",
            super::defaults::AXOLOTL_CONFIG
        ));
    }
    t.finish(Framework::Axolotl, &mut dd, files)?;
    if let Some(ds) = inline_ds {
        train::deepspeed_tree(&ds, &format!("{path} deepspeed"), &mut dd);
    }
    if let Some(f) = fsdp_on {
        train::fsdp_string(
            &f,
            "fsdp",
            Source::File {
                path: path.to_string(),
            },
            &mut dd,
        );
    }
    Ok(dd)
}

/// A YAML list or comma string as `a,b`.
fn list(v: &Value) -> String {
    match v {
        Value::Array(items) => items
            .iter()
            .filter_map(scalar)
            .collect::<Vec<_>>()
            .join(","),
        other => scalar(other).unwrap_or_default(),
    }
}

const LLAMAFACTORY_INERT: &[&str] = &[
    "stage",
    "do_train",
    "dataset",
    "dataset_dir",
    "template",
    "overwrite_cache",
    "preprocessing_num_workers",
    "dataloader_num_workers",
    "output_dir",
    "logging_steps",
    "save_steps",
    "plot_loss",
    "overwrite_output_dir",
    "save_only_model",
    "report_to",
    "learning_rate",
    "num_train_epochs",
    "lr_scheduler_type",
    "warmup_ratio",
    "ddp_timeout",
    "resume_from_checkpoint",
    "val_size",
    "per_device_eval_batch_size",
    "eval_strategy",
    "eval_steps",
    "max_samples",
    "trust_remote_code",
    "lora_alpha",
    "lora_dropout",
    "quantization_method",
    "image_max_pixels",
    "video_max_pixels",
    "max_steps",
    "weight_decay",
    "pref_beta",
    "pref_loss",
    "eval_dataset",
    "run_name",
    "save_strategy",
    "seed",
    "tokenized_path",
    "streaming",
    "buffer_size",
    "mix_strategy",
    "warmup_steps",
    "max_grad_norm",
    "push_to_hub",
    "hub_model_id",
    "adapter_name_or_path",
    "export_dir",
    "export_size",
];

fn llamafactory(tree: &Value, path: &str, files: &dyn Files) -> Result<Derived, PreflightError> {
    let mut dd = Derived::new(
        format!("a LLaMA-Factory config, {path}"),
        Style::LlamaFactory,
    );
    let mut t = Train::from_file(path);
    let src = || Source::File {
        path: path.to_string(),
    };
    let Some(map) = tree.as_object() else {
        return Ok(dd);
    };
    for (k, v) in map {
        let s = scalar(v).unwrap_or_default();
        match k.as_str() {
            "model_name_or_path"
            | "per_device_train_batch_size"
            | "gradient_accumulation_steps"
            | "bf16"
            | "fp16"
            | "optim"
            | "deepspeed"
            | "lora_target" => {
                let c = match k.as_str() {
                    "lora_target" => "lora_target_modules",
                    _ => k.as_str(),
                };
                if !t.put(c, &s, k, src()) && c == "lora_target_modules" {
                    t.put_canon("lora_target_modules", &s, k, src());
                }
            }
            "lora_rank" => t.put_canon("lora_r", &s, k, src()),
            "cutoff_len" => t.put_canon("max_length", &s, k, src()),
            "finetuning_type" => match s.as_str() {
                "lora" => t.put_as("use_peft", "true", k, &s, src()),
                "full" => t.put_as("use_peft", "false", k, &s, src()),
                other => {
                    dd.ignore(format!("finetuning_type {other}"));
                    dd.assumed.push(format!(
                        "finetuning_type {other} is not modelled: estimated as a full fine-tune"
                    ));
                    t.put_as("use_peft", "false", k, &s, src());
                }
            },
            "quantization_bit" => match s.as_str() {
                "4" => t.put_as("load_in_4bit", "true", k, &s, src()),
                "8" => t.put_as("load_in_8bit", "true", k, &s, src()),
                other => dd.ignore(format!("quantization_bit {other}")),
            },
            "double_quantization" => {
                if as_bool(v) != Some(false) {
                    t.put_canon("use_bnb_nested_quant", "true", k, src());
                }
            }
            "pure_bf16" => t.put_extra("pure_bf16", &s, k, src()),
            "disable_gradient_checkpointing" => {
                if as_bool(v) == Some(true) {
                    t.put_as("gradient_checkpointing", "false", k, &s, src());
                }
            }
            "flash_attn" => match s.as_str() {
                "fa2" | "fa3" => t.put_as("attn_implementation", "flash_attention_2", k, &s, src()),
                "sdpa" => t.put_as("attn_implementation", "sdpa", k, &s, src()),
                "disabled" => t.put_as("attn_implementation", "eager", k, &s, src()),
                _ => {}
            },
            k if LLAMAFACTORY_INERT.contains(&k) => {}
            k => dd.ignore(k.to_string()),
        }
    }
    // LLaMA-Factory's `double_quantization` defaults to True.
    if t.get("load_in_4bit").is_some() && map.get("double_quantization").is_none() {
        t.put_canon(
            "use_bnb_nested_quant",
            "true",
            "double_quantization",
            Source::Default {
                cite: super::defaults::LLAMAFACTORY_MODEL,
            },
        );
    }
    t.finish(Framework::LlamaFactory, &mut dd, files)?;
    Ok(dd)
}

/// torchtune model builders (`torchtune.models.<family>.[q]lora_<family>_<size>`)
/// and the catalogue model each builds.
const TORCHTUNE_MODELS: &[(&str, &str)] = &[
    ("llama3_1_8b", "meta-llama/Llama-3.1-8B"),
    ("llama3_1_70b", "meta-llama/Llama-3.1-70B"),
    ("llama3_1_405b", "meta-llama/Llama-3.1-405B"),
    ("llama3_8b", "meta-llama/Meta-Llama-3-8B"),
    ("llama3_70b", "meta-llama/Meta-Llama-3-70B"),
    ("llama3_2_1b", "meta-llama/Llama-3.2-1B"),
    ("llama3_2_3b", "meta-llama/Llama-3.2-3B"),
    ("llama3_3_70b", "meta-llama/Llama-3.3-70B-Instruct"),
    ("llama2_7b", "meta-llama/Llama-2-7b-hf"),
    ("llama2_13b", "meta-llama/Llama-2-13b-hf"),
    ("llama2_70b", "meta-llama/Llama-2-70b-hf"),
    ("mistral_7b", "mistralai/Mistral-7B-v0.1"),
    ("gemma_2b", "google/gemma-2b"),
    ("gemma_7b", "google/gemma-7b"),
    ("gemma2_2b", "google/gemma-2-2b"),
    ("gemma2_9b", "google/gemma-2-9b"),
    ("gemma2_27b", "google/gemma-2-27b"),
    ("qwen2_5_0_5b", "Qwen/Qwen2.5-0.5B"),
    ("qwen2_5_1_5b_base", "Qwen/Qwen2.5-1.5B"),
    ("qwen2_5_1_5b_instruct", "Qwen/Qwen2.5-1.5B"),
    ("qwen2_5_3b", "Qwen/Qwen2.5-3B"),
    ("qwen2_5_7b_base", "Qwen/Qwen2.5-7B"),
    ("qwen2_5_7b_instruct", "Qwen/Qwen2.5-7B"),
    ("qwen2_5_14b_base", "Qwen/Qwen2.5-14B"),
    ("qwen2_5_14b_instruct", "Qwen/Qwen2.5-14B"),
    ("qwen2_5_32b_base", "Qwen/Qwen2.5-32B"),
    ("qwen2_5_32b_instruct", "Qwen/Qwen2.5-32B"),
    ("qwen2_5_72b_base", "Qwen/Qwen2.5-72B"),
    ("qwen2_5_72b_instruct", "Qwen/Qwen2.5-72B"),
    ("qwen3_0_6b_base", "Qwen/Qwen3-0.6B"),
    ("qwen3_0_6b_instruct", "Qwen/Qwen3-0.6B"),
    ("qwen3_1_7b_base", "Qwen/Qwen3-1.7B"),
    ("qwen3_1_7b_instruct", "Qwen/Qwen3-1.7B"),
    ("qwen3_4b_base", "Qwen/Qwen3-4B"),
    ("qwen3_4b_instruct", "Qwen/Qwen3-4B"),
    ("qwen3_8b_base", "Qwen/Qwen3-8B"),
    ("qwen3_8b_instruct", "Qwen/Qwen3-8B"),
    ("qwen3_14b_base", "Qwen/Qwen3-14B"),
    ("qwen3_14b_instruct", "Qwen/Qwen3-14B"),
    ("qwen3_32b", "Qwen/Qwen3-32B"),
    ("phi3_mini", "microsoft/Phi-3-mini-4k-instruct"),
];

/// A torchtune recipe config with `key.sub=value` overrides (as `tune run`
/// takes them).
pub fn torchtune_file(
    path: &str,
    overrides: &[String],
    files: &dyn Files,
) -> Result<Derived, PreflightError> {
    let text = files.read(path).map_err(|why| file_err(path, why))?;
    let mut tree = parse_tree(path, &text)?;
    for o in overrides {
        let Some((k, v)) = o.split_once('=') else {
            continue;
        };
        let value: Value =
            serde_yaml_ng::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
        let mut node = &mut tree;
        let parts: Vec<&str> = k.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let Some(obj) = node.as_object_mut() else {
                break;
            };
            if i + 1 == parts.len() {
                obj.insert((*part).to_string(), value.clone());
                break;
            }
            node = obj
                .entry((*part).to_string())
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
        }
    }
    let mut dd = torchtune(&tree, path)?;
    if !overrides.is_empty() {
        for i in &mut dd.items {
            if overrides
                .iter()
                .any(|o| o.split_once('=').is_some_and(|(k, _)| k == i.key))
            {
                i.source = Source::Command;
            }
        }
    }
    dd.config_file = Some(path.to_string());
    if dd.model().is_none() {
        dd.need(
            "model",
            format!("the model: {path}'s model builder is not one oomkit maps; give MODEL"),
        );
    }
    Ok(dd)
}

fn torchtune(tree: &Value, path: &str) -> Result<Derived, PreflightError> {
    let mut dd = Derived::new(
        format!("a torchtune recipe config, {path}"),
        Style::Torchtune,
    );
    let mut t = Train::from_file(path);
    let src = || Source::File {
        path: path.to_string(),
    };
    let model = tree.get("model");
    let component = model
        .and_then(|m| m.get("_component_"))
        .and_then(scalar)
        .unwrap_or_default();
    let builder = component.rsplit('.').next().unwrap_or("").to_string();
    let (lora, q) = if let Some(b) = builder.strip_prefix("qlora_") {
        (Some(b.to_string()), true)
    } else if let Some(b) = builder.strip_prefix("lora_") {
        (Some(b.to_string()), false)
    } else {
        (None, false)
    };
    let base = lora.clone().unwrap_or_else(|| builder.clone());
    // The local checkpoint folder, when it is a Hugging Face one, is the model.
    match TORCHTUNE_MODELS.iter().find(|(b, _)| *b == base) {
        Some((_, id)) => t.put_as(
            "model_name_or_path",
            id,
            "model._component_",
            &component,
            src(),
        ),
        None => dd.ignore(format!("model._component_ {component}")),
    }
    if lora.is_some() {
        t.put_as("use_peft", "true", "model._component_", &builder, src());
        if q {
            t.put_as("load_in_4bit", "true", "model._component_", &builder, src());
        }
        let m = model.cloned().unwrap_or(Value::Null);
        if let Some(r) = m.get("lora_rank").and_then(scalar) {
            t.put_canon("lora_r", &r, "model.lora_rank", src());
        }
        let mut targets: Vec<String> = m
            .get("lora_attn_modules")
            .and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(scalar)
                    .map(|n| {
                        if n == "output_proj" {
                            "o_proj".to_string()
                        } else {
                            n
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        if m.get("apply_lora_to_mlp").and_then(as_bool) == Some(true) {
            targets.extend(["gate_proj", "up_proj", "down_proj"].map(String::from));
        }
        if !targets.is_empty() {
            t.put_canon(
                "lora_target_modules",
                &targets.join(","),
                "model.lora_attn_modules",
                src(),
            );
        }
    }
    if let Some(b) = tree.get("batch_size").and_then(scalar) {
        t.put_canon("per_device_train_batch_size", &b, "batch_size", src());
    }
    if let Some(g) = tree.get("gradient_accumulation_steps").and_then(scalar) {
        t.put_canon(
            "gradient_accumulation_steps",
            &g,
            "gradient_accumulation_steps",
            src(),
        );
    }
    if let Some(s) = tree
        .get("tokenizer")
        .and_then(|x| x.get("max_seq_len"))
        .and_then(scalar)
    {
        t.put_canon("max_length", &s, "tokenizer.max_seq_len", src());
    }
    match tree.get("dtype").and_then(scalar).as_deref() {
        Some("bf16") => t.put_as("bf16", "true", "dtype", "bf16", src()),
        Some("fp16") => t.put_as("fp16", "true", "dtype", "fp16", src()),
        Some("fp32") => t.put_as("bf16", "false", "dtype", "fp32", src()),
        _ => {}
    }
    if let Some(c) = tree
        .get("enable_activation_checkpointing")
        .and_then(as_bool)
    {
        t.put_canon(
            "gradient_checkpointing",
            if c { "true" } else { "false" },
            "enable_activation_checkpointing",
            src(),
        );
    }
    if let Some(o) = tree
        .get("optimizer")
        .and_then(|o| o.get("_component_"))
        .and_then(scalar)
    {
        t.put_canon("optim", &o, "optimizer._component_", src());
    }
    // Selective activation checkpointing (full_finetune_distributed.py:
    // `ac_mode`/`ac_option`) and activation offloading.
    for (key, canon) in [("ac_mode", "ac_mode"), ("ac_option", "ac_option")] {
        if let Some(v) = tree.get(key).and_then(scalar) {
            t.put_canon(canon, &v, key, src());
        }
    }
    if let Some(o) = tree.get("enable_activation_offloading").and_then(as_bool) {
        t.put_canon(
            "activation_offloading",
            if o { "true" } else { "false" },
            "enable_activation_offloading",
            src(),
        );
    }
    if tree
        .get("dataset")
        .and_then(|x| x.get("packed"))
        .and_then(as_bool)
        == Some(true)
    {
        dd.assumed
            .push("dataset.packed: every row is filled to tokenizer.max_seq_len".into());
    }
    t.finish(Framework::Torchtune, &mut dd, &NoFiles)?;
    Ok(dd)
}

/// torchtune configs name no other files oomkit reads.
struct NoFiles;

impl Files for NoFiles {
    fn read(&self, path: &str) -> Result<String, String> {
        Err(format!("{path}: not read"))
    }
    fn exists(&self, _: &str) -> bool {
        false
    }
}
