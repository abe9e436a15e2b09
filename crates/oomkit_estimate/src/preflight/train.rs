//! Training settings in the Hugging Face spelling (`TrainingArguments`, TRL's
//! configs and `ModelConfig`), whoever wrote them: a script's arguments, a
//! TRL/HF YAML, or an axolotl / LLaMA-Factory / torchtune key mapped onto the
//! same names. [`Train::finish`] applies the framework's defaults and turns
//! them into [`Derived`] items; the DeepSpeed and accelerate files a command
//! names are read here too.

use std::collections::BTreeMap;

use super::argv::{self, Arg};
use super::defaults as d;
use super::{
    Derived, Files, PreflightError, Source, as_bool, count, file_err, parse_tree, scalar, truthy,
};

/// Whose defaults apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    /// A script on `TrainingArguments` (`run_clm.py`, a custom Trainer script).
    Hf,
    /// TRL (`trl sft`, a TRL script, TRL's YAML).
    Trl,
    /// axolotl.
    Axolotl,
    /// LLaMA-Factory.
    LlamaFactory,
    /// torchtune recipes.
    Torchtune,
}

/// One value with the key that gave it and where it was written.
#[derive(Debug, Clone)]
pub struct Val {
    pub v: String,
    /// The value as the user wrote it (`qlora` for `adapter: qlora`).
    pub shown: String,
    pub key: String,
    pub src: Source,
}

/// The settings read so far, by their Hugging Face name.
#[derive(Debug, Default)]
pub struct Train {
    pub(super) vals: BTreeMap<&'static str, Val>,
    /// Where the launch itself was read (the command, or a config file).
    pub origin: Option<Source>,
}

/// `HfArgumentParser`/TRL keys that set memory, by canonical name; the
/// second list is accepted spellings.
const KEYS: &[(&str, &[&str])] = &[
    (
        "model_name_or_path",
        &[
            "model_name_or_path",
            "model_name",
            "model_id",
            "model",
            "base_model",
            "pretrained_model_name_or_path",
        ],
    ),
    (
        "per_device_train_batch_size",
        &[
            "per_device_train_batch_size",
            "per_gpu_train_batch_size",
            "train_batch_size",
            "batch_size",
        ],
    ),
    (
        "gradient_accumulation_steps",
        &["gradient_accumulation_steps"],
    ),
    (
        "max_length",
        &[
            "max_length",
            "max_seq_length",
            "max_seq_len",
            "block_size",
            "seq_length",
            "max_source_length",
            "model_max_length",
        ],
    ),
    ("bf16", &["bf16"]),
    ("fp16", &["fp16"]),
    ("dtype", &["dtype", "torch_dtype"]),
    ("gradient_checkpointing", &["gradient_checkpointing"]),
    ("optim", &["optim"]),
    ("adafactor", &["adafactor"]),
    ("use_peft", &["use_peft", "use_lora", "lora"]),
    ("lora_r", &["lora_r", "lora_rank"]),
    ("lora_target_modules", &["lora_target_modules"]),
    ("load_in_4bit", &["load_in_4bit"]),
    ("load_in_8bit", &["load_in_8bit"]),
    ("use_bnb_nested_quant", &["use_bnb_nested_quant"]),
    ("deepspeed", &["deepspeed"]),
    ("fsdp", &["fsdp"]),
    ("attn_implementation", &["attn_implementation"]),
    ("packing", &["packing"]),
];

/// Keys that do not change the memory (read and not reported as ignored).
const INERT: &[&str] = &[
    "output_dir",
    "overwrite_output_dir",
    "do_train",
    "do_eval",
    "do_predict",
    "eval_strategy",
    "evaluation_strategy",
    "per_device_eval_batch_size",
    "learning_rate",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "max_grad_norm",
    "num_train_epochs",
    "max_steps",
    "lr_scheduler_type",
    "warmup_ratio",
    "warmup_steps",
    "logging_dir",
    "logging_strategy",
    "logging_steps",
    "save_strategy",
    "save_steps",
    "save_total_limit",
    "seed",
    "data_seed",
    "report_to",
    "run_name",
    "push_to_hub",
    "hub_model_id",
    "dataset_name",
    "dataset_config_name",
    "dataset_config",
    "dataset_text_field",
    "train_file",
    "validation_file",
    "eval_steps",
    "dataloader_num_workers",
    "remove_unused_columns",
    "label_names",
    "load_best_model_at_end",
    "metric_for_best_model",
    "greater_is_better",
    "lora_alpha",
    "lora_dropout",
    "lora_task_type",
    "tf32",
    "trust_remote_code",
    "model_revision",
    "revision",
    "cache_dir",
    "logging_first_step",
    "disable_tqdm",
    "bnb_4bit_quant_type",
    "bnb_4bit_compute_dtype",
    "bnb_4bit_quant_storage",
    "warmup",
    "save_only_model",
    "streaming",
    "dataset_train_split",
    "dataset_test_split",
    "preprocessing_num_workers",
    "gradient_checkpointing_kwargs",
    "ddp_find_unused_parameters",
    "local_rank",
    "resume_from_checkpoint",
    "use_rslora",
    "use_dora",
    "lora_modules_to_save",
    "completion_only_loss",
    "assistant_only_loss",
    "eos_token",
    "pad_token",
    "chat_template_path",
    "config",
    "accelerate_config",
    "num_processes",
    "torch_compile",
    "group_by_length",
];

fn canonical(key: &str) -> Option<&'static str> {
    KEYS.iter()
        .find(|(_, names)| names.contains(&key))
        .map(|(c, _)| *c)
}

/// HF options that `HfArgumentParser` reads as booleans (`--bf16`,
/// `--bf16 True`).
pub fn hf_switch(name: &str) -> bool {
    let k = argv::key(name);
    matches!(
        canonical(&k),
        Some(
            "bf16"
                | "fp16"
                | "gradient_checkpointing"
                | "adafactor"
                | "use_peft"
                | "load_in_4bit"
                | "load_in_8bit"
                | "use_bnb_nested_quant"
                | "packing"
        )
    ) || matches!(
        k.as_str(),
        "do_train"
            | "do_eval"
            | "do_predict"
            | "overwrite_output_dir"
            | "push_to_hub"
            | "trust_remote_code"
            | "tf32"
            | "use_rslora"
            | "use_dora"
            | "streaming"
            | "remove_unused_columns"
            | "logging_first_step"
            | "disable_tqdm"
            | "torch_compile"
            | "save_only_model"
            | "load_best_model_at_end"
            | "group_by_length"
    )
}

impl Train {
    /// The settings of a config file: what is read from it comes from `path`.
    pub fn from_file(path: &str) -> Train {
        Train {
            origin: Some(Source::File {
                path: path.to_string(),
            }),
            ..Train::default()
        }
    }

    /// Records `key` (any accepted spelling) = `value`; false when the key is
    /// not one that sets memory.
    pub fn put(&mut self, key: &str, value: &str, shown_key: &str, src: Source) -> bool {
        let Some(c) = canonical(key) else {
            return false;
        };
        self.put_canon(c, value, shown_key, src);
        true
    }

    /// Records a canonical key.
    pub fn put_canon(&mut self, c: &'static str, value: &str, shown_key: &str, src: Source) {
        self.put_as(c, value, shown_key, value, src);
    }

    /// Records a canonical key whose value the user wrote as `raw`.
    pub fn put_as(
        &mut self,
        c: &'static str,
        value: &str,
        shown_key: &str,
        raw: &str,
        src: Source,
    ) {
        self.vals.insert(
            c,
            Val {
                shown: raw.to_string(),
                v: value.to_string(),
                key: shown_key.to_string(),
                src,
            },
        );
    }

    /// The value of a canonical key.
    pub fn get(&self, c: &str) -> Option<&Val> {
        self.vals.get(c)
    }

    fn flag(&self, c: &str) -> Option<(bool, &Val)> {
        let v = self.vals.get(c)?;
        Some((truthy(&v.v).unwrap_or(true), v))
    }

    /// Reads script arguments (HF spelling); unknown ones go to `ignored`.
    pub fn read_args(
        &mut self,
        args: &[Arg],
        d: &mut Derived,
        files: &dyn Files,
    ) -> Result<(), PreflightError> {
        let mut positional_model = None;
        for a in args {
            match a {
                Arg::Pos(p) => {
                    // TRL's YAML configs are named by `--config`; a bare
                    // positional is some script's own (never guessed).
                    if positional_model.is_none() {
                        positional_model = Some(p.clone());
                    }
                    d.ignore(p.clone());
                }
                Arg::Opt { name, value } => {
                    let k = argv::key(name);
                    if k == "config" {
                        if let Some(path) = value {
                            self.read_hf_yaml(path, d, files)?;
                        }
                        continue;
                    }
                    let v = value.clone().unwrap_or_else(|| "true".to_string());
                    let Some(c) = canonical(&k) else {
                        if !INERT.contains(&k.as_str()) {
                            d.ignore(name.clone());
                        }
                        continue;
                    };
                    self.put_canon(c, &v, name, Source::Command);
                }
            }
        }
        Ok(())
    }

    /// A TRL/HF YAML (`trl sft --config file.yaml`): the same keys.
    pub fn read_hf_yaml(
        &mut self,
        path: &str,
        d: &mut Derived,
        files: &dyn Files,
    ) -> Result<(), PreflightError> {
        let text = files.read(path).map_err(|why| file_err(path, why))?;
        let tree = parse_tree(path, &text)?;
        self.read_hf_tree(&tree, path, d);
        Ok(())
    }

    /// A TRL/HF mapping's keys, read before the command line's (which win).
    pub fn read_hf_tree(&mut self, tree: &serde_json::Value, path: &str, d: &mut Derived) {
        let Some(map) = tree.as_object() else { return };
        for (k, v) in map {
            let shown = match v {
                serde_json::Value::Array(list) => {
                    list.iter().filter_map(scalar).collect::<Vec<_>>().join(",")
                }
                other => match scalar(other) {
                    Some(s) => s,
                    None => continue,
                },
            };
            if self
                .vals
                .get(canonical(k).unwrap_or(""))
                .is_some_and(|x| x.src == Source::Command)
            {
                continue;
            }
            let src = Source::File {
                path: path.to_string(),
            };
            if !self.put(k, &shown, k, src) && !INERT.contains(&k.as_str()) {
                d.ignore(format!("{k} ({path})"));
            }
        }
    }

    /// Turns the settings into items with `fw`'s defaults, reading the
    /// DeepSpeed JSON a `deepspeed` key names.
    pub fn finish(
        &self,
        fw: Framework,
        d: &mut Derived,
        files: &dyn Files,
    ) -> Result<(), PreflightError> {
        let origin = self.origin.clone().unwrap_or(Source::Command);
        d.set(
            "task",
            Some("train".into()),
            "",
            "a training launch",
            origin.clone(),
        );
        if let Some(m) = self.get("model_name_or_path") {
            d.set("model", Some(m.v.clone()), &m.key, &m.shown, m.src.clone());
        }
        self.batch(fw, d);
        self.seq(fw, d);
        self.method(fw, d);
        self.precision(fw, d);
        self.checkpointing(fw, d);
        self.optimizer(fw, d);
        if let Some(a) = self.get("attn_implementation") {
            let att = match a.v.as_str() {
                "eager" => Some("eager"),
                "sdpa" => Some("sdpa"),
                v if v.starts_with("flash") || v.contains("flash_attention") => Some("flash"),
                _ => None,
            };
            match att {
                Some(att) => d.set(
                    "attention",
                    Some(att.into()),
                    &a.key,
                    &a.shown,
                    a.src.clone(),
                ),
                None => d.ignore(format!("{} {}", a.key, a.shown)),
            }
        }
        if let Some((true, p)) = self.flag("packing") {
            d.assumed.push(format!(
                "{} ({}): every row is filled to the sequence length, so the estimate at that length is what each step holds",
                p.key, p.src
            ));
        }
        if let Some(ds) = self.get("deepspeed") {
            read_deepspeed(&ds.v, d, files)?;
        }
        if let Some(f) = self.get("fsdp") {
            fsdp_string(&f.v, &f.key, f.src.clone(), d);
        }
        // Every framework read here runs the Hugging Face Trainer (axolotl,
        // LLaMA-Factory, TRL) or a torchtune recipe, which drop the model
        // output before backward.
        let loop_by = match fw {
            Framework::Torchtune => "a torchtune recipe (drops the logits before backward)",
            _ => "the Hugging Face Trainer (drops the model output before backward)",
        };
        d.set("trainer", None, "", loop_by, origin);
        Ok(())
    }

    fn batch(&self, fw: Framework, d: &mut Derived) {
        let (batch_cite, batch_default) = match fw {
            Framework::Axolotl => (d::AXOLOTL_TRAINING, Some(1)),
            Framework::Torchtune => (d::TORCHTUNE_RECIPE, None),
            _ => (d::TRANSFORMERS, Some(8)),
        };
        match self.get("per_device_train_batch_size") {
            Some(b) => match count(&b.v) {
                Some(n) => d.set(
                    "batch",
                    Some(n.to_string()),
                    &b.key,
                    &b.shown,
                    b.src.clone(),
                ),
                None => d.ignore(format!("{} {}", b.key, b.shown)),
            },
            None => match batch_default {
                Some(n) => d.default(
                    "batch",
                    Some(n.to_string()),
                    batch_key(fw),
                    &n.to_string(),
                    batch_cite,
                ),
                None => d.need(
                    "batch",
                    "the batch size (the recipe requires `batch_size`): give --batch N",
                ),
            },
        }
        match self.get("gradient_accumulation_steps") {
            Some(g) => match count(&g.v) {
                Some(n) => d.set(
                    "grad-accum",
                    Some(n.to_string()),
                    &g.key,
                    &g.shown,
                    g.src.clone(),
                ),
                None => d.ignore(format!("{} {}", g.key, g.shown)),
            },
            None => {
                let cite = match fw {
                    Framework::Axolotl => d::AXOLOTL_TRAINING,
                    Framework::Torchtune => d::TORCHTUNE_RECIPE,
                    _ => d::TRANSFORMERS,
                };
                d.default(
                    "grad-accum",
                    Some("1".into()),
                    "gradient_accumulation_steps",
                    "1",
                    cite,
                );
            }
        }
    }

    fn seq(&self, fw: Framework, d: &mut Derived) {
        if let Some(s) = self.get("max_length")
            && let Some(n) = count(&s.v)
        {
            d.set("seq", Some(n.to_string()), &s.key, &s.shown, s.src.clone());
            return;
        }
        if framework_default(fw, "seq", d) {
            return;
        }
        match fw {
            Framework::Trl | Framework::Axolotl | Framework::LlamaFactory => {}
            Framework::Hf | Framework::Torchtune => {
                d.set(
                    "seq",
                    Some("1024".into()),
                    "sequence length",
                    "1024",
                    Source::Assumed,
                );
                d.assumed.push(
                    "sequence length 1024 tokens per sample: nothing here bounds it (a script's own `--block_size`/`--max_seq_length`, torchtune's `tokenizer.max_seq_len`); give --seq N for your data's longest padded sample".into(),
                );
            }
        }
    }

    fn method(&self, fw: Framework, d: &mut Derived) {
        let q4 = self.flag("load_in_4bit").filter(|(on, _)| *on);
        let q8 = self.flag("load_in_8bit").filter(|(on, _)| *on);
        let peft = self.flag("use_peft");
        let lora_on = match (fw, peft) {
            (_, Some((on, v))) => {
                if on {
                    d.set(
                        "method",
                        Some("lora".into()),
                        &v.key,
                        &v.shown,
                        v.src.clone(),
                    );
                }
                on
            }
            (Framework::LlamaFactory, None) => {
                d.default(
                    "method",
                    Some("lora".into()),
                    "finetuning_type",
                    "lora",
                    d::LLAMAFACTORY_FINETUNING,
                );
                true
            }
            _ => false,
        };
        if !lora_on {
            if let Some((_, v)) = q4.or(q8) {
                d.ignore(format!(
                    "{} (bitsandbytes without LoRA: the model cannot train)",
                    v.key
                ));
            }
            if !d.has("method") {
                d.set(
                    "method",
                    Some("full".into()),
                    "",
                    "no LoRA/PEFT setting: every weight trains",
                    self.origin.clone().unwrap_or(Source::Command),
                );
            }
            return;
        }
        if let Some((_, v)) = q4 {
            d.set(
                "method",
                Some("qlora".into()),
                &v.key,
                &v.shown,
                v.src.clone(),
            );
            let nested = self.flag("use_bnb_nested_quant").is_some_and(|(on, _)| on);
            let q = if nested { "nf4-dq" } else { "nf4" };
            d.set("quant", Some(q.into()), &v.key, &v.shown, v.src.clone());
        } else if let Some((_, v)) = q8 {
            d.set(
                "quant",
                Some("int8".into()),
                &v.key,
                &v.shown,
                v.src.clone(),
            );
        }
        match self.get("lora_r") {
            Some(r) => match count(&r.v) {
                Some(n) => d.set(
                    "lora-rank",
                    Some(n.to_string()),
                    &r.key,
                    &r.shown,
                    r.src.clone(),
                ),
                None => d.ignore(format!("{} {}", r.key, r.shown)),
            },
            None => {
                framework_default(fw, "lora-rank", d);
            }
        }
        match self.get("lora_target_modules") {
            Some(t) => d.set(
                "lora-targets",
                Some(lora_targets(&t.v)),
                &t.key,
                &t.shown,
                t.src.clone(),
            ),
            None => {
                framework_default(fw, "lora-targets", d);
            }
        }
    }

    fn precision(&self, fw: Framework, d: &mut Derived) {
        let bf16 = self.flag("bf16");
        let fp16 = self.flag("fp16");
        let dtype = self.get("dtype");
        // The autocast: bf16/fp16 switches, else the framework's default.
        let (autocast, ac_key, ac_shown, ac_src) = match (bf16, fp16) {
            (Some((true, v)), _) => (Some("bf16"), v.key.clone(), v.shown.clone(), v.src.clone()),
            (_, Some((true, v))) => (Some("fp16"), v.key.clone(), v.shown.clone(), v.src.clone()),
            (Some((false, v)), _) | (_, Some((false, v))) => {
                (None, v.key.clone(), v.v.clone(), v.src.clone())
            }
            (None, None) => match fw {
                Framework::Trl => (
                    Some("bf16"),
                    "bf16".into(),
                    "not fp16".into(),
                    Source::Default { cite: d::TRL_BASE },
                ),
                Framework::Axolotl => (
                    Some("bf16"),
                    "bf16".into(),
                    "auto".into(),
                    Source::Default {
                        cite: d::AXOLOTL_CONFIG,
                    },
                ),
                _ => (
                    None,
                    "bf16".into(),
                    "False".into(),
                    Source::Default {
                        cite: d::TRANSFORMERS,
                    },
                ),
            },
        };
        let half = |ac: &str| if ac == "fp16" { "fp16" } else { "bf16" };
        let (p, key, shown, src) = match fw {
            Framework::Axolotl | Framework::Torchtune => {
                // Both load the model in the training dtype and keep the
                // optimizer states in it: pure half precision.
                match autocast {
                    Some(ac) => (half(ac).to_string(), ac_key, ac_shown, ac_src),
                    None => ("fp32".to_string(), ac_key, ac_shown, ac_src),
                }
            }
            Framework::LlamaFactory => {
                let pure = self.flag("pure_bf16").is_some_and(|(on, _)| on);
                match autocast {
                    Some(ac) if pure || d.value("method") != Some("full") => {
                        (half(ac).to_string(), ac_key, ac_shown, ac_src)
                    }
                    Some(ac) => {
                        d.assumed.push(format!("LLaMA-Factory upcasts the trained weights to fp32 for a full fine-tune without `pure_bf16` ({}): mixed precision", d::LLAMAFACTORY_ADAPTER));
                        (format!("mixed-{}", half(ac)), ac_key, ac_shown, ac_src)
                    }
                    None => ("fp32".to_string(), ac_key, ac_shown, ac_src),
                }
            }
            Framework::Hf | Framework::Trl => {
                let (weights, wkey, wshown, wsrc) = match dtype {
                    Some(v) => (
                        dtype_name(&v.v),
                        v.key.clone(),
                        v.shown.clone(),
                        v.src.clone(),
                    ),
                    None if fw == Framework::Trl => (
                        "fp32",
                        "dtype".into(),
                        "float32".into(),
                        Source::Default { cite: d::TRL_MODEL },
                    ),
                    None => {
                        // The weights are what `from_pretrained` loads,
                        // which depends on the transformers version: the
                        // estimate decides with the versions it reads, from
                        // the autocast said here.
                        let ac = autocast.unwrap_or("off");
                        d.set("autocast", Some(ac.into()), &ac_key, &ac_shown, ac_src);
                        return;
                    }
                };
                match (weights, autocast) {
                    ("fp32", Some(ac)) => {
                        d.assumed.push(format!(
                            "precision: fp32 weights ({wkey} {wshown}, {wsrc}) under {ac} autocast ({ac_key} {ac_shown}, {ac_src}): fp32 master weights, gradients and AdamW states, 16-bit activations"
                        ));
                        (
                            format!("mixed-{}", half(ac)),
                            wkey,
                            format!("{wshown} + {ac_key}"),
                            wsrc,
                        )
                    }
                    ("fp32", None) => ("fp32".to_string(), wkey, wshown, wsrc),
                    (w, _) => (w.to_string(), wkey, wshown, wsrc),
                }
            }
        };
        // QLoRA computes in the bitsandbytes compute dtype; the estimate's
        // precision is the unquantized parts'.
        d.set("precision", Some(p), &key, &shown, src);
    }

    fn checkpointing(&self, fw: Framework, d: &mut Derived) {
        if let Some((true, v)) = self.flag("activation_offloading") {
            d.set(
                "activation-offloading",
                None,
                &v.key,
                &v.shown,
                v.src.clone(),
            );
        }
        if let Some(mode) = self.get("ac_mode") {
            self.ac_mode(mode, d);
            return;
        }
        match self.flag("gradient_checkpointing") {
            Some((on, v)) => {
                if on {
                    d.set("grad-checkpointing", None, &v.key, &v.shown, v.src.clone());
                } else {
                    d.unset("grad-checkpointing");
                    d.assumed.push(format!("gradient checkpointing off ({} {})", v.key, v.shown));
                }
            }
            None => match fw {
                Framework::Trl => d.set("grad-checkpointing", None, "gradient_checkpointing", "True", Source::Default { cite: d::TRL_BASE }),
                Framework::LlamaFactory => {
                    if self.flag("disable_gradient_checkpointing").is_none() {
                        d.set("grad-checkpointing", None, "disable_gradient_checkpointing", "False", Source::Default { cite: d::LLAMAFACTORY_MODEL });
                    }
                }
                Framework::Hf => d.assumed.push(format!("gradient checkpointing off (gradient_checkpointing False, default, {})", d::TRANSFORMERS)),
                Framework::Axolotl => d.assumed.push(format!("gradient checkpointing off (gradient_checkpointing false, default, {})", d::AXOLOTL_CONFIG)),
                Framework::Torchtune => d.assumed.push(format!("activation checkpointing off (enable_activation_checkpointing False, default, {})", d::TORCHTUNE_RECIPE)),
            },
        }
    }

    /// torchtune's `ac_mode`, as `full_finetune_distributed.py` (torchtune
    /// main of 2026-04, `_setup_model`) reads it: only when
    /// `enable_activation_checkpointing` is off does it apply
    /// `apply_selective_activation_checkpointing(model, ac_mode, ac_option)`
    /// (`training/activations.py`: `full` every layer, `selective` every
    /// `ac_option`-th layer, an integer); with both set, neither runs.
    fn ac_mode(&self, mode: &Val, d: &mut Derived) {
        if let Some((true, v)) = self.flag("gradient_checkpointing") {
            d.unset("grad-checkpointing");
            d.assumed.push(format!(
                "no activation checkpointing: {} {} with {} {} applies neither (full_finetune_distributed.py)",
                v.key, v.shown, mode.key, mode.shown
            ));
            return;
        }
        match mode.v.trim() {
            "full" => d.set(
                "checkpointing",
                Some("full".into()),
                &mode.key,
                &mode.shown,
                mode.src.clone(),
            ),
            "selective" => {
                d.set(
                    "checkpointing",
                    Some("selective".into()),
                    &mode.key,
                    &mode.shown,
                    mode.src.clone(),
                );
                match self.get("ac_option") {
                    Some(o) if o.v.trim().parse::<u64>().is_ok() => d.set(
                        "ac-option",
                        Some(o.v.trim().to_string()),
                        &o.key,
                        &o.shown,
                        o.src.clone(),
                    ),
                    Some(o) => {
                        d.ignore(format!("{} {}", o.key, o.shown));
                        d.assumed.push(format!("{} {} is not a number of layers, which torchtune's selective mode needs: every layer checkpointed assumed", o.key, o.shown));
                        d.set(
                            "ac-option",
                            Some("1".into()),
                            &o.key,
                            &o.shown,
                            o.src.clone(),
                        );
                    }
                    None => {
                        d.assumed.push(format!("{} selective without ac_option: the recipe fails on it (`int(None)`); every layer checkpointed assumed", mode.key));
                        d.set(
                            "ac-option",
                            Some("1".into()),
                            &mode.key,
                            &mode.shown,
                            Source::Assumed,
                        );
                    }
                }
            }
            _ => {
                d.ignore(format!("{} {}", mode.key, mode.shown));
                d.assumed.push(format!(
                    "activation checkpointing off ({} {})",
                    mode.key, mode.shown
                ));
            }
        }
    }

    fn optimizer(&self, fw: Framework, d: &mut Derived) {
        if let Some((true, v)) = self.flag("adafactor") {
            d.set(
                "optimizer",
                Some("adafactor".into()),
                &v.key,
                &v.shown,
                v.src.clone(),
            );
            return;
        }
        match self.get("optim") {
            Some(o) => match optimizer(&o.v) {
                Some(x) => d.set("optimizer", Some(x.into()), &o.key, &o.shown, o.src.clone()),
                None => {
                    d.ignore(format!("{} {}", o.key, o.shown));
                    d.assumed.push(format!(
                        "optimizer {} is not modelled: AdamW's two fp32 states assumed",
                        o.v
                    ));
                    d.set(
                        "optimizer",
                        Some("adamw".into()),
                        &o.key,
                        &o.shown,
                        Source::Assumed,
                    );
                }
            },
            None => {
                let (key, shown, cite) = match fw {
                    Framework::Axolotl => ("optimizer", "adamw_torch_fused", d::AXOLOTL_TRAINING),
                    Framework::Torchtune => (
                        "optimizer._component_",
                        "torch.optim.AdamW",
                        d::TORCHTUNE_RECIPE,
                    ),
                    _ => (
                        "optim",
                        "adamw_torch (adamw_torch_fused on torch >= 2.8)",
                        d::TRANSFORMERS,
                    ),
                };
                d.default("optimizer", Some("adamw".into()), key, shown, cite);
            }
        }
    }

    /// Records `pure_bf16`/`disable_gradient_checkpointing`-style switches
    /// that only config formats use (not in [`KEYS`]).
    pub fn put_extra(&mut self, c: &'static str, value: &str, key: &str, src: Source) {
        self.put_canon(c, value, key, src);
    }
}

/// A framework's documented default for a setting its config leaves out.
struct FrameworkDefault {
    /// The estimate's flag it sets.
    flag: &'static str,
    frameworks: &'static [Framework],
    value: &'static str,
    /// The framework's own key, and its value as the framework prints it.
    key: &'static str,
    shown: &'static str,
    /// Where the default is defined (crate::preflight::defaults).
    cite: &'static str,
}

/// The defaults preflight applies by framework, one row per setting and
/// framework (the first row that names the framework wins).
const FRAMEWORK_DEFAULTS: &[FrameworkDefault] = &[
    FrameworkDefault {
        flag: "seq",
        frameworks: &[Framework::Trl],
        value: "1024",
        key: "max_length",
        shown: "1024",
        cite: d::TRL_SFT,
    },
    FrameworkDefault {
        flag: "seq",
        frameworks: &[Framework::Axolotl],
        value: "512",
        key: "sequence_len",
        shown: "512",
        cite: d::AXOLOTL_CONFIG,
    },
    FrameworkDefault {
        flag: "seq",
        frameworks: &[Framework::LlamaFactory],
        value: "2048",
        key: "cutoff_len",
        shown: "2048",
        cite: d::LLAMAFACTORY_DATA,
    },
    FrameworkDefault {
        flag: "lora-rank",
        frameworks: &[Framework::Trl, Framework::Hf],
        value: "16",
        key: "lora_r",
        shown: "16",
        cite: d::TRL_MODEL,
    },
    FrameworkDefault {
        flag: "lora-rank",
        frameworks: &[Framework::LlamaFactory],
        value: "8",
        key: "lora_rank",
        shown: "8",
        cite: d::LLAMAFACTORY_FINETUNING,
    },
    FrameworkDefault {
        flag: "lora-rank",
        frameworks: &[Framework::Axolotl],
        value: "8",
        key: "lora_r",
        shown: "8 (PEFT's LoraConfig.r)",
        cite: d::AXOLOTL_PEFT,
    },
    FrameworkDefault {
        flag: "lora-targets",
        frameworks: &[Framework::LlamaFactory],
        value: "all-linear",
        key: "lora_target",
        shown: "all",
        cite: d::LLAMAFACTORY_FINETUNING,
    },
    FrameworkDefault {
        flag: "lora-targets",
        frameworks: &[
            Framework::Hf,
            Framework::Trl,
            Framework::Axolotl,
            Framework::Torchtune,
        ],
        value: "q,v",
        key: "lora_target_modules",
        shown: "None (PEFT's default for the architecture: q_proj, v_proj)",
        cite: d::TRL_MODEL,
    },
];

/// Applies `fw`'s default for `flag` from [`FRAMEWORK_DEFAULTS`] (unless
/// the flag is set already); false when the framework has none.
fn framework_default(fw: Framework, flag: &'static str, d: &mut Derived) -> bool {
    let Some(row) = FRAMEWORK_DEFAULTS
        .iter()
        .find(|r| r.flag == flag && r.frameworks.contains(&fw))
    else {
        return false;
    };
    d.default(flag, Some(row.value.into()), row.key, row.shown, row.cite);
    true
}

fn batch_key(fw: Framework) -> &'static str {
    match fw {
        Framework::Axolotl => "micro_batch_size",
        Framework::Torchtune => "batch_size",
        _ => "per_device_train_batch_size",
    }
}

/// A torch dtype name as the estimate's precision of the weights.
fn dtype_name(v: &str) -> &'static str {
    match v
        .trim()
        .trim_start_matches("torch.")
        .to_ascii_lowercase()
        .as_str()
    {
        "bfloat16" | "bf16" => "bf16",
        "float16" | "fp16" | "half" => "fp16",
        // `auto`: the checkpoint's own dtype, 16-bit for every catalogue model.
        "auto" => "bf16",
        _ => "fp32",
    }
}

/// An HF `optim` / axolotl `optimizer` / torchtune component as the
/// estimate's optimizer.
pub fn optimizer(v: &str) -> Option<&'static str> {
    let l = v.to_ascii_lowercase();
    let l = l.rsplit('.').next().unwrap_or(&l).to_string();
    Some(match l.as_str() {
        "adamw_torch"
        | "adamw_torch_fused"
        | "adamw_hf"
        | "adamw_apex_fused"
        | "adamw"
        | "adam"
        | "adamw_torch_xla"
        | "adamw_torch_npu_fused"
        | "paged_adamw_32bit"
        | "adamw_32bit"
        | "pagedadamw"
        | "pagedadamw32bit" => "adamw",
        "adamw_bnb_8bit" | "adamw_8bit" | "adamw8bit" | "adam8bit" => "adamw-8bit",
        "paged_adamw_8bit" | "pagedadamw8bit" => "paged-adamw-8bit",
        "adafactor" => "adafactor",
        "sgd" => "sgd",
        "lion_32bit" | "paged_lion_32bit" | "lion" => "lion",
        _ => return None,
    })
}

/// A LoRA target list (`q_proj,v_proj`, `["q_proj", "v_proj"]`,
/// `all-linear`, `all`) as `--lora-targets`.
pub fn lora_targets(v: &str) -> String {
    let t = v.trim().trim_matches(['[', ']']);
    if t == "all-linear" || t == "all" {
        return "all-linear".into();
    }
    t.split(',')
        .map(|x| x.trim().trim_matches(['"', '\'']))
        .filter(|x| !x.is_empty())
        .collect::<Vec<_>>()
        .join(",")
}

/// `--fsdp "full_shard auto_wrap offload"`: full and hybrid shards are
/// ZeRO-3's memory, `shard_grad_op` ZeRO-2's; `offload` puts the parameters
/// on the CPU.
pub fn fsdp_string(v: &str, key: &str, src: Source, d: &mut Derived) {
    let words: Vec<String> = v
        .split([' ', ','])
        .map(|w| w.trim().to_ascii_lowercase())
        .collect();
    let has = |w: &str| words.iter().any(|x| x == w);
    if has("full_shard") || has("hybrid_shard") || has("1") || has("true") {
        d.set("fsdp", None, key, v, src.clone());
    } else if has("shard_grad_op") {
        d.set("zero", Some("2".into()), key, v, src.clone());
    } else if !v.trim().is_empty() && !has("false") && !has("no_shard") {
        d.ignore(format!("{key} {v}"));
    }
    if has("offload") {
        d.set("offload", Some("params".into()), key, v, src);
    }
}

/// DeepSpeed's offload settings, in whichever spelling a file gives them
/// (`offload_param`, `offload_optimizer`): offloading the parameters takes the
/// optimizer state along (oomkit's `--offload params`), so it wins over
/// optimizer-only offload when both are set. Each pair is (key, device).
pub fn set_offload(
    d: &mut Derived,
    param: Option<(&str, String)>,
    optimizer: Option<(&str, String)>,
    src: &Source,
) {
    if let Some((key, dev)) = param {
        d.set("offload", Some("params".into()), key, &dev, src.clone());
    } else if let Some((key, dev)) = optimizer {
        d.set("offload", Some("optimizer".into()), key, &dev, src.clone());
    }
}

/// A DeepSpeed JSON: `zero_optimization.stage`, `offload_optimizer.device`,
/// `offload_param.device` (deepspeed.ai/docs/config-json).
pub fn read_deepspeed(
    path: &str,
    d: &mut Derived,
    files: &dyn Files,
) -> Result<(), PreflightError> {
    let text = files.read(path).map_err(|why| file_err(path, why))?;
    let tree = parse_tree(path, &text)?;
    deepspeed_tree(&tree, path, d);
    Ok(())
}

/// The DeepSpeed keys of a parsed config (a file, or axolotl's inline dict).
pub fn deepspeed_tree(tree: &serde_json::Value, path: &str, d: &mut Derived) {
    let src = Source::File {
        path: path.to_string(),
    };
    let zero = tree.get("zero_optimization");
    let stage = zero.and_then(|z| z.get("stage")).and_then(scalar);
    match stage.as_deref() {
        Some(s @ ("0" | "1" | "2" | "3")) => d.set(
            "zero",
            Some(s.into()),
            "zero_optimization.stage",
            s,
            src.clone(),
        ),
        Some(other) => d.ignore(format!("zero_optimization.stage {other} ({path})")),
        None => d.assumed.push(format!(
            "{path} names no zero_optimization.stage: DeepSpeed's default, stage 0"
        )),
    }
    let device = |k: &str| {
        zero.and_then(|z| z.get(k))
            .and_then(|o| o.get("device"))
            .and_then(scalar)
            .filter(|v| v != "none")
    };
    set_offload(
        d,
        device("offload_param").map(|v| ("zero_optimization.offload_param.device", v)),
        device("offload_optimizer").map(|v| ("zero_optimization.offload_optimizer.device", v)),
        &src,
    );
    deepspeed_buffers(zero, path, d);
    if let Some(b) = tree
        .get("train_micro_batch_size_per_gpu")
        .and_then(scalar)
        .and_then(|s| count(&s))
    {
        d.set(
            "batch",
            Some(b.to_string()),
            "train_micro_batch_size_per_gpu",
            &b.to_string(),
            src.clone(),
        );
    }
    if let Some(g) = tree
        .get("gradient_accumulation_steps")
        .and_then(scalar)
        .and_then(|s| count(&s))
    {
        d.set(
            "grad-accum",
            Some(g.to_string()),
            "gradient_accumulation_steps",
            &g.to_string(),
            src,
        );
    }
}

/// `zero_optimization`'s bucket and threshold keys (DeepSpeed
/// `deepspeed/runtime/zero/config.py`, `DeepSpeedZeroConfig`, with the
/// `stage3_` names it accepts as aliases) as `oomkit estimate` flags. A value
/// that is not an element count is ignored with a note; `auto` is kept for
/// the three keys Hugging Face fills from the hidden size.
fn deepspeed_buffers(zero: Option<&serde_json::Value>, path: &str, d: &mut Derived) {
    use crate::sharding::Count;
    let Some(zero) = zero else {
        return;
    };
    let src = Source::File {
        path: path.to_string(),
    };
    const COUNTS: &[(&str, &str, &str, bool)] = &[
        ("reduce-bucket-size", "reduce_bucket_size", "", true),
        (
            "prefetch-bucket-size",
            "stage3_prefetch_bucket_size",
            "prefetch_bucket_size",
            true,
        ),
        (
            "param-persistence-threshold",
            "stage3_param_persistence_threshold",
            "param_persistence_threshold",
            true,
        ),
        (
            "max-live-parameters",
            "stage3_max_live_parameters",
            "max_live_parameters",
            false,
        ),
        (
            "max-reuse-distance",
            "stage3_max_reuse_distance",
            "max_reuse_distance",
            false,
        ),
        ("sub-group-size", "sub_group_size", "", false),
    ];
    for &(flag, key, alias, auto_ok) in COUNTS {
        let found = zero
            .get(key)
            .map(|v| (key, v))
            .or_else(|| zero.get(alias).map(|v| (alias, v)));
        let Some((k, v)) = found else {
            continue;
        };
        let Some(raw) = scalar(v) else {
            d.ignore(format!("zero_optimization.{k} ({path}: not a number)"));
            continue;
        };
        match Count::parse(&raw) {
            Some(c) if auto_ok || c != Count::Auto => d.set(
                flag,
                Some(c.to_string()),
                &format!("zero_optimization.{k}"),
                &raw,
                src.clone(),
            ),
            _ => d.ignore(format!(
                "zero_optimization.{k} {raw} ({path}: not an element count)"
            )),
        }
    }
    for (flag, key) in [
        ("overlap-comm", "overlap_comm"),
        ("contiguous-gradients", "contiguous_gradients"),
    ] {
        let Some(v) = zero.get(key) else {
            continue;
        };
        match v.as_bool() {
            Some(b) => d.set(
                flag,
                Some(if b { "on" } else { "off" }.into()),
                &format!("zero_optimization.{key}"),
                &b.to_string(),
                src.clone(),
            ),
            None => d.ignore(format!(
                "zero_optimization.{key} ({path}: not true or false)"
            )),
        }
    }
}

/// An accelerate config YAML: processes, machines, DeepSpeed and FSDP
/// settings (accelerate `commands/config/config_args.py` key names).
pub fn read_accelerate(
    path: &str,
    d: &mut Derived,
    files: &dyn Files,
) -> Result<Option<String>, PreflightError> {
    let text = files.read(path).map_err(|why| file_err(path, why))?;
    let tree = parse_tree(path, &text)?;
    accelerate_tree(&tree, path, d, files)
}

/// The keys of a parsed accelerate config; returns its `mixed_precision`
/// (the autocast the Trainer takes from accelerate) when not `no`.
pub fn accelerate_tree(
    tree: &serde_json::Value,
    path: &str,
    d: &mut Derived,
    files: &dyn Files,
) -> Result<Option<String>, PreflightError> {
    let src = Source::File {
        path: path.to_string(),
    };
    let n = |k: &str| tree.get(k).and_then(scalar).and_then(|s| count(&s));
    let procs = n("num_processes");
    let machines = n("num_machines").unwrap_or(1);
    if let Some(p) = procs {
        // accelerate's num_processes is the total over all machines.
        d.set(
            "gpus",
            Some(p.to_string()),
            "num_processes",
            &p.to_string(),
            src.clone(),
        );
    } else if machines > 1 {
        d.ignore(format!("num_machines {machines} ({path})"));
    }
    let kind = tree
        .get("distributed_type")
        .and_then(scalar)
        .unwrap_or_default();
    if kind.eq_ignore_ascii_case("DEEPSPEED") {
        if let Some(ds) = tree.get("deepspeed_config") {
            if let Some(f) = ds.get("deepspeed_config_file").and_then(scalar) {
                read_deepspeed(&f, d, files)?;
            } else {
                if let Some(s) = ds.get("zero_stage").and_then(scalar)
                    && matches!(s.as_str(), "0" | "1" | "2" | "3")
                {
                    d.set(
                        "zero",
                        Some(s.clone()),
                        "deepspeed_config.zero_stage",
                        &s,
                        src.clone(),
                    );
                }
                let dev = |k: &str| ds.get(k).and_then(scalar).filter(|v| v != "none");
                set_offload(
                    d,
                    dev("offload_param_device")
                        .map(|v| ("deepspeed_config.offload_param_device", v)),
                    dev("offload_optimizer_device")
                        .map(|v| ("deepspeed_config.offload_optimizer_device", v)),
                    &src,
                );
                if let Some(g) = ds
                    .get("gradient_accumulation_steps")
                    .and_then(scalar)
                    .and_then(|s| count(&s))
                {
                    d.set(
                        "grad-accum",
                        Some(g.to_string()),
                        "deepspeed_config.gradient_accumulation_steps",
                        &g.to_string(),
                        src.clone(),
                    );
                }
            }
        }
    } else if kind.eq_ignore_ascii_case("FSDP") {
        let fsdp = tree.get("fsdp_config");
        let strategy = fsdp
            .and_then(|f| {
                f.get("fsdp_sharding_strategy")
                    .or_else(|| f.get("fsdp_reshard_after_forward"))
            })
            .and_then(scalar)
            .unwrap_or_else(|| "FULL_SHARD".into());
        let s = strategy.to_ascii_lowercase();
        if s == "shard_grad_op" || s == "2" || s == "false" {
            d.set(
                "zero",
                Some("2".into()),
                "fsdp_config.fsdp_sharding_strategy",
                &strategy,
                src.clone(),
            );
        } else if s == "no_shard" || s == "3" {
            d.ignore(format!("fsdp_sharding_strategy {strategy} ({path})"));
        } else {
            d.set("fsdp", None, "distributed_type", "FSDP", src.clone());
            match fsdp
                .and_then(|f| f.get("fsdp_version"))
                .and_then(scalar)
                .as_deref()
            {
                Some(v @ ("1" | "2")) => d.set(
                    "fsdp-version",
                    Some(v.to_string()),
                    "fsdp_config.fsdp_version",
                    v,
                    src.clone(),
                ),
                Some(other) => d.ignore(format!("fsdp_config.fsdp_version {other} ({path})")),
                // accelerate's FullyShardedDataParallelPlugin reads
                // FSDP_VERSION, default "1" (utils/dataclasses.py).
                None => d.default(
                    "fsdp-version",
                    Some("1".into()),
                    "fsdp_version",
                    "1",
                    "accelerate 1.x, utils/dataclasses.py FullyShardedDataParallelPlugin",
                ),
            }
        }
        if fsdp
            .and_then(|f| f.get("fsdp_offload_params"))
            .and_then(as_bool)
            == Some(true)
        {
            d.set(
                "offload",
                Some("params".into()),
                "fsdp_config.fsdp_offload_params",
                "true",
                src.clone(),
            );
        }
    }
    Ok(tree
        .get("mixed_precision")
        .and_then(scalar)
        .filter(|m| m == "bf16" || m == "fp16"))
}
