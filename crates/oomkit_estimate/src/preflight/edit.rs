//! A plan step, as changes to what the user runs: their command line's flags
//! (HF/TRL arguments, `vllm serve`, llama-server) or their config's keys
//! (axolotl, LLaMA-Factory, torchtune, TRL/HF YAML).

use serde::Serialize;

use super::argv;
use super::{Derived, Style};

/// One plan step as the estimate gives it (`fit.plan[]`).
#[derive(Debug, Clone)]
pub struct Step<'a> {
    /// The `oomkit_core::remedies` id.
    pub remedy: &'a str,
    /// The paste-ready config the estimate printed for it.
    pub config: &'a str,
}

/// The plan in the user's terms.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Rewrite {
    /// Each change, in the user's spelling (`--per_device_train_batch_size 1`,
    /// `micro_batch_size: 1`).
    pub changes: Vec<String>,
    /// The whole command with the changes made, for command styles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Steps with no spelling in the user's tool, with oomkit's own config.
    pub elsewhere: Vec<String>,
    /// The estimate of the changed command or config, read again from the
    /// changed text (set by the caller that estimates it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// The changed command's words (command styles).
    #[serde(skip)]
    pub argv: Vec<String>,
    /// The changed keys of the config file (YAML styles), as `(dotted key,
    /// value)`.
    #[serde(skip)]
    pub keys: Vec<(String, String)>,
    /// Files the plan changes or adds besides: `(path, key edits)` of a
    /// DeepSpeed file the command passes, `(path, whole text)` of a new one.
    #[serde(skip)]
    pub file_edits: Vec<(String, Vec<(String, String)>)>,
    /// New files the plan asks to write, `(path, text)`.
    #[serde(skip)]
    pub new_files: Vec<(String, String)>,
}

/// The changed setup estimated again.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Check {
    /// Whether it fits the GPU; `None` when it could not be estimated.
    pub fits: Option<bool>,
    /// What it needs (nvidia-smi's figure; vLLM: what it requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_bytes: Option<u64>,
    /// The GPU's usable memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usable_bytes: Option<u64>,
    /// Why it could not be estimated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_checked: Option<String>,
}

/// `text` (a YAML or JSON config named `path`) with `keys` set: a dotted key
/// (`optimizer._component_`) sets a nested one, creating the mappings on
/// the way; a value is read as a YAML scalar (`4`, `true`, `bf16`). The
/// result is JSON, which the YAML reader reads too.
pub fn apply_keys(
    path: &str,
    text: &str,
    keys: &[(String, String)],
) -> Result<String, super::PreflightError> {
    let mut tree = super::parse_tree(path, text)?;
    for (k, v) in keys {
        let value: serde_json::Value = serde_yaml_ng::from_str(v)
            .ok()
            .filter(|x: &serde_json::Value| !x.is_object() && !x.is_array() && !x.is_null())
            .unwrap_or_else(|| serde_json::Value::String(v.clone()));
        let mut node = &mut tree;
        let parts: Vec<&str> = k.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            if !node.is_object() {
                *node = serde_json::Value::Object(serde_json::Map::new());
            }
            let Some(map) = node.as_object_mut() else {
                break;
            };
            if i + 1 == parts.len() {
                map.insert((*part).to_string(), value.clone());
                break;
            }
            node = map
                .entry((*part).to_string())
                .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        }
    }
    serde_json::to_string_pretty(&tree)
        .map_err(|e| super::file_err(path, format!("cannot write the changed config: {e}")))
}

/// One setting in Hugging Face names (`TrainingArguments`, TRL's
/// `ModelConfig`), or a whole flag of an engine's command line.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Hf(String, String),
    /// An engine flag (`--max-model-len`, `-c`) and its value.
    Flag(String, String),
    /// A different model (vLLM's prequantized checkpoint).
    Model(String),
    /// A DeepSpeed config (ZeRO stage, optimizer offload).
    DeepSpeed {
        stage: String,
        offload: bool,
        json: String,
    },
}

/// `inner` (a call's arguments) split at its top-level commas.
pub fn top_level_split(inner: &str) -> Vec<String> {
    let mut depth = 0i32;
    let mut cur = String::new();
    let mut parts = Vec::new();
    let mut quote: Option<char> = None;
    for c in inner.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    parts
}

/// The `k=v` arguments of the first call `name(…)` in `text`.
fn kwargs(text: &str, name: &str) -> Option<Vec<(String, String)>> {
    let start = text.find(&format!("{name}("))?;
    let rest = text.get(start + name.len() + 1..)?;
    let mut depth = 0i32;
    let mut end = None;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => {
                end = Some(i);
                break;
            }
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    let inner = rest.get(..end?)?;
    let mut out = Vec::new();
    for p in top_level_split(inner) {
        if let Some((k, v)) = p.split_once('=') {
            out.push((k.trim().to_string(), v.trim().trim_matches('"').to_string()));
        }
    }
    Some(out)
}

/// What a step's config changes, in Hugging Face names or engine flags.
fn changes(step: &Step) -> Option<Vec<Change>> {
    let c = step.config.trim();
    if let Some(rest) = c
        .strip_prefix("vllm serve ")
        .or_else(|| c.strip_prefix("llama-server "))
    {
        let toks: Vec<String> = rest.split_whitespace().map(String::from).collect();
        let mut out = Vec::new();
        let mut it = toks.iter().peekable();
        if c.starts_with("vllm")
            && let Some(m) = it.next()
        {
            out.push(Change::Model(m.clone()));
        }
        while let Some(t) = it.next() {
            if t.starts_with('-') {
                let v = match it.peek() {
                    Some(n) if !n.starts_with('-') => it.next().cloned().unwrap_or_default(),
                    _ => String::new(),
                };
                if t != "-m" {
                    out.push(Change::Flag(t.clone(), v));
                }
            }
        }
        return Some(out);
    }
    if c.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(c).ok()?;
        let zero = v.get("zero_optimization")?;
        let stage = zero.get("stage").map(ToString::to_string)?;
        let offload = zero.get("offload_optimizer").is_some();
        return Some(vec![Change::DeepSpeed {
            stage,
            offload,
            json: c.to_string(),
        }]);
    }
    if let Some(kw) = kwargs(c, "TrainingArguments") {
        return Some(kw.into_iter().map(|(k, v)| Change::Hf(k, v)).collect());
    }
    if let Some(kw) = kwargs(c, "LoraConfig") {
        let mut out = vec![Change::Hf("use_peft".into(), "True".into())];
        for (k, v) in kw {
            match k.as_str() {
                "r" => out.push(Change::Hf("lora_r".into(), v)),
                "target_modules" => out.push(Change::Hf("lora_target_modules".into(), v)),
                _ => {}
            }
        }
        return Some(out);
    }
    if let Some(kw) = kwargs(c, "BitsAndBytesConfig") {
        let mut out = Vec::new();
        for (k, v) in kw {
            match k.as_str() {
                "load_in_4bit" | "load_in_8bit" => out.push(Change::Hf(k, v)),
                "bnb_4bit_use_double_quant" => {
                    out.push(Change::Hf("use_bnb_nested_quant".into(), v))
                }
                _ => {}
            }
        }
        return Some(out);
    }
    if let Some(kw) = kwargs(c, "SFTConfig").or_else(|| kwargs(c, "tokenizer"))
        && let Some((_, n)) = kw.iter().find(|(k, _)| k == "max_length")
    {
        return Some(vec![Change::Hf("max_length".into(), n.clone())]);
    }
    if c.contains("torch_dtype=torch.bfloat16") {
        return Some(vec![Change::Hf("dtype".into(), "bfloat16".into())]);
    }
    None
}

fn is_true(v: &str) -> bool {
    super::truthy(v) == Some(true)
}

/// An HF setting in the style's own key and value (`None`: no spelling).
fn spell(d: &Derived, k: &str, v: &str) -> Option<Vec<(String, String)>> {
    let style = d.style;
    let one = |k: &str, v: &str| Some(vec![(k.to_string(), v.to_string())]);
    // The sequence length under the key the user's own command or config
    // set it with (`--block_size`, `max_seq_length`), else the tool's name.
    if k == "max_length" {
        let own = d
            .items
            .iter()
            .find(|i| {
                i.flag == "seq"
                    && matches!(
                        i.source,
                        super::Source::Command | super::Source::File { .. }
                    )
            })
            .map(|i| i.key.trim_start_matches('-').to_string())
            .filter(|k| !k.is_empty() && !k.contains(' '));
        let name = match (own, style) {
            (Some(o), _) => o,
            (None, Style::Axolotl) => "sequence_len".into(),
            (None, Style::LlamaFactory) => "cutoff_len".into(),
            (None, Style::Torchtune) => "tokenizer.max_seq_len".into(),
            (None, Style::Vllm | Style::LlamaCpp) => return None,
            (None, _) => "max_length".into(),
        };
        return one(&name, v);
    }
    let yaml_bool = |v: &str| {
        if is_true(v) {
            "true".to_string()
        } else {
            "false".to_string()
        }
    };
    match style {
        Style::HfArgs | Style::HfYaml => match k {
            "dtype" => one("dtype", v),
            _ => one(k, v),
        },
        Style::Axolotl => match k {
            "per_device_train_batch_size" => one("micro_batch_size", v),
            "gradient_accumulation_steps" => one(k, v),
            "gradient_checkpointing" => one(k, &yaml_bool(v)),
            "optim" => one("optimizer", v),
            "use_peft" => one("adapter", "lora"),
            "lora_r" => one("lora_r", v),
            "lora_target_modules" if v == "all-linear" => one("lora_target_linear", "true"),
            "lora_target_modules" => one("lora_target_modules", v),
            "load_in_4bit" => Some(vec![
                ("adapter".into(), "qlora".into()),
                ("load_in_4bit".into(), "true".into()),
            ]),
            "load_in_8bit" => one("load_in_8bit", "true"),
            "dtype" => one("bf16", "true"),
            "use_bnb_nested_quant" => None,
            _ => None,
        },
        Style::LlamaFactory => match k {
            "per_device_train_batch_size" | "gradient_accumulation_steps" | "optim" => one(k, v),
            "gradient_checkpointing" => one(
                "disable_gradient_checkpointing",
                if is_true(v) { "false" } else { "true" },
            ),
            "use_peft" => one("finetuning_type", "lora"),
            "lora_r" => one("lora_rank", v),
            "lora_target_modules" if v == "all-linear" => one("lora_target", "all"),
            "lora_target_modules" => one("lora_target", v),
            "load_in_4bit" => one("quantization_bit", "4"),
            "load_in_8bit" => one("quantization_bit", "8"),
            "dtype" => one("bf16", "true"),
            "use_bnb_nested_quant" => one("double_quantization", &yaml_bool(v)),
            _ => None,
        },
        Style::Torchtune => match k {
            "per_device_train_batch_size" => one("batch_size", v),
            "gradient_accumulation_steps" => one(k, v),
            "gradient_checkpointing" => one(
                "enable_activation_checkpointing",
                if is_true(v) { "True" } else { "False" },
            ),
            "optim" if v == "paged_adamw_8bit" => {
                one("optimizer._component_", "bitsandbytes.optim.PagedAdamW8bit")
            }
            "optim" if v == "adamw_bnb_8bit" => {
                one("optimizer._component_", "bitsandbytes.optim.AdamW8bit")
            }
            "lora_r" => one("model.lora_rank", v),
            "dtype" => one("dtype", "bf16"),
            // torchtune's QLoRA and LoRA are model builders: `qlora_X`
            // for `lora_X` (or `X`), in the same module.
            "load_in_4bit" | "use_peft" => {
                let prefix = if k == "load_in_4bit" {
                    "qlora_"
                } else {
                    "lora_"
                };
                let component = d
                    .items
                    .iter()
                    .find(|i| i.flag == "model" && i.key == "model._component_")
                    .map(|i| i.shown.clone())?;
                let (module, builder) = component.rsplit_once('.')?;
                let base = builder
                    .strip_prefix("qlora_")
                    .or_else(|| builder.strip_prefix("lora_"))
                    .unwrap_or(builder);
                if k == "use_peft" && builder.starts_with("qlora_") {
                    return Some(Vec::new());
                }
                one("model._component_", &format!("{module}.{prefix}{base}"))
            }
            // Part of torchtune's NF4 (its scales are quantized too).
            "use_bnb_nested_quant" => Some(Vec::new()),
            _ => None,
        },
        Style::Vllm | Style::LlamaCpp => None,
    }
}

/// The plan in the user's terms: for training, every step's change merged
/// into one rewrite (the plan is the cheapest set that fits together); for
/// vLLM and llama.cpp, one rewrite per step (each is a complete
/// alternative). `baseline` is the engine command the estimate printed for
/// the setup as given: a step's flag with the same value there is no change.
pub fn rewrite_plan(d: &Derived, steps: &[Step], baseline: Option<&str>) -> Vec<Rewrite> {
    if !matches!(d.style, Style::Vllm | Style::LlamaCpp) {
        return vec![rewrite(d, steps, None)];
    }
    steps
        .iter()
        .map(|s| rewrite(d, std::slice::from_ref(s), baseline))
        .collect()
}

fn rewrite(d: &Derived, steps: &[Step], baseline: Option<&str>) -> Rewrite {
    let base: Vec<Change> = baseline
        .and_then(|b| {
            changes(&Step {
                remedy: "",
                config: b,
            })
        })
        .unwrap_or_default();
    let mut out = Rewrite::default();
    let mut edits: Vec<(String, String)> = Vec::new();
    let mut model = None;
    let mut deepspeed = None;
    for s in steps {
        let Some(cs) = changes(s) else {
            out.elsewhere.push(format!("[{}] {}", s.remedy, s.config));
            continue;
        };
        for c in cs {
            match c {
                Change::Model(m) => model = Some(m),
                Change::Flag(f, v) => {
                    if !base.contains(&Change::Flag(f.clone(), v.clone())) {
                        push(&mut edits, f, v);
                    }
                }
                Change::DeepSpeed {
                    stage,
                    offload,
                    json,
                } => deepspeed = Some((stage, offload, json)),
                Change::Hf(k, v) => match spell(d, &k, &v) {
                    Some(kvs) => {
                        for (k, v) in kvs {
                            push(&mut edits, k, v);
                        }
                    }
                    None => {
                        let e = format!("[{}] {}", s.remedy, s.config);
                        if !out.elsewhere.contains(&e) {
                            out.elsewhere.push(e);
                        }
                    }
                },
            }
        }
    }
    if let Some((stage, offload, json)) = deepspeed {
        deepspeed_edit(d, &stage, offload, &json, &mut edits, &mut out);
    }
    match d.style {
        Style::HfArgs | Style::Vllm | Style::LlamaCpp => {
            let (cmd, changes, argv) = rewrite_command(d, &edits, model.as_deref());
            out.changes = changes;
            if !out.changes.is_empty() {
                out.command = Some(cmd);
                out.argv = argv;
            }
        }
        _ => {
            for (k, v) in &edits {
                out.changes.push(format!("{k}: {v}"));
            }
            out.keys = edits;
        }
    }
    out
}

fn push(edits: &mut Vec<(String, String)>, k: String, v: String) {
    edits.retain(|(x, _)| x != &k);
    edits.push((k, v));
}

/// ZeRO in the user's terms: the DeepSpeed file they already pass (its key
/// changed), else a new file to pass.
fn deepspeed_edit(
    d: &Derived,
    stage: &str,
    offload: bool,
    json: &str,
    edits: &mut Vec<(String, String)>,
    out: &mut Rewrite,
) {
    let file = d
        .items
        .iter()
        .find(|i| i.key.starts_with("zero_optimization"))
        .and_then(|i| match &i.source {
            super::Source::File { path } => Some(path.clone()),
            _ => None,
        });
    if let Some(f) = file {
        let mut s = format!("in {f}: \"zero_optimization\": {{\"stage\": {stage}");
        if offload {
            s.push_str(", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}");
        }
        s.push('}');
        out.elsewhere.push(s);
        let mut keys = vec![("zero_optimization.stage".to_string(), stage.to_string())];
        if offload {
            keys.push((
                "zero_optimization.offload_optimizer.device".into(),
                "cpu".into(),
            ));
        }
        out.file_edits.push((f, keys));
        return;
    }
    let name = if offload {
        format!("ds_zero{stage}_offload.json")
    } else {
        format!("ds_zero{stage}.json")
    };
    match d.style {
        Style::HfArgs | Style::HfYaml | Style::LlamaFactory | Style::Axolotl => {
            push(edits, "deepspeed".into(), name.clone());
            out.elsewhere.push(format!("write {name}: {json}"));
            out.new_files.push((name, json.to_string()));
        }
        _ => out
            .elsewhere
            .push(format!("DeepSpeed ZeRO-{stage}: {json}")),
    }
}

/// The user's command with `edits` made: an existing flag's value replaced
/// (any `-`/`_` spelling, `--k v` or `--k=v`), a new one appended.
fn rewrite_command(
    d: &Derived,
    edits: &[(String, String)],
    model: Option<&str>,
) -> (String, Vec<String>, Vec<String>) {
    let mut toks: Vec<String> = d.command.clone();
    let mut changes = Vec::new();
    if let (Some(m), Some(old)) = (model, d.model())
        && m != old
        && let Some(t) = toks.iter_mut().find(|t| t.as_str() == old)
    {
        *t = m.to_string();
        changes.push(format!("model {m}"));
    }
    let engine = matches!(d.style, Style::Vllm | Style::LlamaCpp);
    for (k, v) in edits {
        // The user's spelling of this flag, when their command has one.
        let aliases = aliases(d.style, k);
        let want = |t: &str| {
            let name = t.split_once('=').map_or(t, |(n, _)| n);
            name.starts_with('-') && aliases.iter().any(|a| argv::key(a) == argv::key(name))
        };
        let (flag, value) = if engine {
            (k.clone(), v.clone())
        } else {
            // Python's spelling of a boolean keyword (`gradient_checkpointing=True`).
            let bool_v = match v.as_str() {
                "True" | "true" => Some(true),
                "False" | "false" => Some(false),
                _ => None,
            };
            (
                format!("--{k}"),
                match bool_v {
                    Some(true) if super::train::hf_switch(&format!("--{k}")) => String::new(),
                    Some(true) => "True".into(),
                    Some(false) => "False".into(),
                    None => v.clone(),
                },
            )
        };
        match toks.iter().position(|t| want(t)) {
            Some(i) => {
                let user_flag = toks
                    .get(i)
                    .map(|t| t.split_once('=').map_or(t.as_str(), |(n, _)| n).to_string())
                    .unwrap_or_default();
                let inline = toks.get(i).is_some_and(|t| t.contains('='));
                let has_value = !inline
                    && toks
                        .get(i + 1)
                        .is_some_and(|n| !n.starts_with('-') || n.parse::<f64>().is_ok());
                let is_switch = !engine && super::train::hf_switch(&user_flag);
                let next_is_bool = toks.get(i + 1).is_some_and(|n| super::truthy(n).is_some());
                if inline {
                    if let Some(t) = toks.get_mut(i) {
                        *t = if value.is_empty() {
                            user_flag.clone()
                        } else {
                            format!("{user_flag}={value}")
                        };
                    }
                } else if has_value && (!is_switch || next_is_bool) {
                    if value.is_empty() {
                        toks.remove(i + 1);
                    } else if let Some(t) = toks.get_mut(i + 1) {
                        *t = value.clone();
                    }
                } else if !value.is_empty() {
                    toks.insert(i + 1, value.clone());
                }
                changes.push(format!("{user_flag} {value}").trim_end().to_string());
            }
            None => {
                toks.push(flag.clone());
                if !value.is_empty() {
                    toks.push(value.clone());
                }
                changes.push(format!("{flag} {value}").trim_end().to_string());
            }
        }
    }
    (
        toks.iter().map(|t| quote(t)).collect::<Vec<_>>().join(" "),
        changes,
        toks,
    )
}

/// The spellings one flag has in the user's tool.
fn aliases(style: Style, k: &str) -> Vec<String> {
    let extra: &[&str] = match (style, k) {
        (Style::LlamaCpp, "-c") => &["--ctx-size"],
        (Style::LlamaCpp, "-ngl") => &["--n-gpu-layers", "--gpu-layers"],
        (Style::LlamaCpp, "-fa") => &["--flash-attn"],
        (Style::LlamaCpp, "-ctk") => &["--cache-type-k"],
        (Style::LlamaCpp, "-ctv") => &["--cache-type-v"],
        (Style::Vllm, "--tensor-parallel-size") => &["-tp"],
        (Style::Vllm, "--quantization") => &["-q"],
        (Style::HfArgs, "per_device_train_batch_size") => &["per_gpu_train_batch_size"],
        (Style::HfArgs, "dtype") => &["torch_dtype"],
        (Style::HfArgs, "lora_r") => &["lora_rank"],
        _ => &[],
    };
    let mut v = vec![k.to_string()];
    v.extend(extra.iter().map(|s| (*s).to_string()));
    v
}

/// A token as a POSIX shell reads it back.
fn quote(t: &str) -> String {
    if !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c))
    {
        t.to_string()
    } else {
        format!("'{}'", t.replace('\'', "'\\''"))
    }
}
