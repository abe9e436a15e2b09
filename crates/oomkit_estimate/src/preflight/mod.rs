//! Preflight: what users already run, read as an estimate's setup.
//!
//! Two inputs: a launch command (`torchrun … train.py --per_device_train_batch_size 4
//! …`, `accelerate launch --config_file fsdp.yaml …`, `trl sft …`, `tune run …`,
//! `vllm serve …`, `llama-server …`: [`from_command`]) and a training config file
//! (axolotl, LLaMA-Factory, torchtune, TRL/HF YAML or JSON: [`from_config`]). Either
//! gives a [`Derived`]: every setting the estimate needs, each with where it came
//! from (the command, a config file, or a framework's documented default, with the
//! file and version that define it), the arguments it did not use, what it could
//! not know, and the words it assumed. [`Derived::estimate_args`] spells the setup
//! as `oomkit estimate` flags; [`edit`] turns a plan step back into changes of the
//! user's own command line or config keys.
//!
//! Files the command names (a DeepSpeed JSON, an accelerate YAML, a torchtune or
//! TRL config) are read through [`Files`], so the caller bounds the reads.

mod argv;
mod configs;
mod defaults;
pub mod edit;
mod launch;
mod train;

use serde::Serialize;

pub use configs::{from_config, is_training_config};

/// A DeepSpeed config JSON given beside a model (`oomkit estimate MODEL
/// --deepspeed FILE`): training, with its ZeRO stage, offload, buckets,
/// micro-batch and accumulation (the keys `train::read_deepspeed` reads).
pub fn from_deepspeed(path: &str, files: &dyn Files) -> Result<Derived, PreflightError> {
    let mut d = Derived::new(format!("a DeepSpeed config, {path}"), Style::HfArgs);
    d.set(
        "task",
        Some("train".into()),
        "",
        "training",
        Source::File {
            path: path.to_string(),
        },
    );
    train::read_deepspeed(path, &mut d, files)?;
    Ok(d)
}
pub use launch::from_command;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// The command line, as the user wrote it.
    Command,
    /// A file the command or the config names (its path as written).
    File {
        /// The path.
        path: String,
    },
    /// A framework's default where the user said nothing.
    Default {
        /// Where the default is defined: project, version, file.
        cite: &'static str,
    },
    /// Nothing says; oomkit assumed it (the words say why).
    Assumed,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Command => f.write_str("command line"),
            Source::File { path } => f.write_str(path),
            Source::Default { cite } => write!(f, "default, {cite}"),
            Source::Assumed => f.write_str("assumed"),
        }
    }
}

/// One derived setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    /// The `oomkit estimate` flag it sets, without `--` (`batch`, `seq`, …);
    /// `model` for the model.
    pub flag: &'static str,
    /// The flag's value; `None` for a switch (`grad-checkpointing`).
    pub value: Option<String>,
    /// The user's own name for it (`--per_device_train_batch_size`,
    /// `micro_batch_size`, `-c`), or the default's name.
    pub key: String,
    /// The value as the user's tool spells it (`True`, `bf16`, `8`).
    pub shown: String,
    /// Where it came from.
    pub source: Source,
}

/// Something the command or config does not say and the estimate needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Need {
    /// The `oomkit estimate` flag that gives it (`model` for MODEL).
    pub flag: &'static str,
    /// Why it is not known, in words.
    pub why: String,
}

/// The tool whose spelling the plan's edits use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    /// `--key value` arguments of a script parsed by `HfArgumentParser`
    /// (TrainingArguments, TRL's configs).
    HfArgs,
    /// A TRL or HF YAML config (`trl sft --config`): the same key names.
    HfYaml,
    /// An axolotl YAML config.
    Axolotl,
    /// A LLaMA-Factory YAML config.
    LlamaFactory,
    /// A torchtune recipe config.
    Torchtune,
    /// `vllm serve` flags.
    Vllm,
    /// llama-server / llama-cli flags.
    LlamaCpp,
}

/// What the command or config says, as an estimate's setup.
#[derive(Debug, Clone, Serialize)]
pub struct Derived {
    /// What was understood, in words ("torchrun, 8 processes per node · a Hugging
    /// Face Trainer script, train.py").
    pub understood: String,
    /// The settings, in the order they are printed; a later one for the same
    /// flag replaces an earlier one.
    pub items: Vec<Item>,
    /// Arguments or keys it did not use, as written (`--my_flag`).
    pub ignored: Vec<String>,
    /// What it cannot know and needs.
    pub needs: Vec<Need>,
    /// What it assumed where nothing said, in words.
    pub assumed: Vec<String>,
    /// Whose spelling the plan's edits use.
    pub style: Style,
    /// The command as given (empty for a config file).
    pub command: Vec<String>,
    /// The config file the edits change (YAML styles).
    pub config_file: Option<String>,
}

impl Derived {
    fn new(understood: String, style: Style) -> Derived {
        Derived {
            understood,
            items: Vec::new(),
            ignored: Vec::new(),
            needs: Vec::new(),
            assumed: Vec::new(),
            style,
            command: Vec::new(),
            config_file: None,
        }
    }

    /// Sets `flag`, replacing an earlier value for it.
    fn set(
        &mut self,
        flag: &'static str,
        value: Option<String>,
        key: &str,
        shown: &str,
        source: Source,
    ) {
        self.items.retain(|i| i.flag != flag);
        self.items.push(Item {
            flag,
            value,
            key: key.to_string(),
            shown: shown.to_string(),
            source,
        });
    }

    /// Sets `flag` only when nothing set it yet (a default).
    fn default(
        &mut self,
        flag: &'static str,
        value: Option<String>,
        key: &str,
        shown: &str,
        cite: &'static str,
    ) {
        if !self.has(flag) {
            self.set(flag, value, key, shown, Source::Default { cite });
        }
    }

    /// Removes `flag` (a switch turned off).
    fn unset(&mut self, flag: &str) {
        self.items.retain(|i| i.flag != flag);
    }

    /// Whether `flag` is set.
    pub fn has(&self, flag: &str) -> bool {
        self.items.iter().any(|i| i.flag == flag)
    }

    /// `flag`'s value.
    pub fn value(&self, flag: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|i| i.flag == flag)
            .and_then(|i| i.value.as_deref())
    }

    /// The model, when the command or config names it.
    pub fn model(&self) -> Option<&str> {
        self.value("model")
    }

    /// The setup as `oomkit estimate` arguments (the model not included).
    pub fn estimate_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        for i in &self.items {
            if i.flag == "model" {
                continue;
            }
            out.push(format!("--{}", i.flag));
            if let Some(v) = &i.value {
                out.push(v.clone());
            }
        }
        out
    }

    fn need(&mut self, flag: &'static str, why: impl Into<String>) {
        self.needs.push(Need {
            flag,
            why: why.into(),
        });
    }

    fn ignore(&mut self, what: impl Into<String>) {
        let w = what.into();
        if !self.ignored.contains(&w) {
            self.ignored.push(w);
        }
    }
}

/// Reads the files a command or config names (bounded by the caller).
pub trait Files {
    /// The file's text, or why it could not be read (one line).
    fn read(&self, path: &str) -> Result<String, String>;
    /// Whether the path exists (a `.gguf` file, a model folder).
    fn exists(&self, path: &str) -> bool;
}

/// Why a command or config could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PreflightError {
    /// The command is empty or names no launcher or script it knows.
    #[error("{0}")]
    Command(String),
    /// A file the command names could not be read or parsed.
    #[error("{path}: {why}")]
    File {
        /// The path as written.
        path: String,
        /// Why, in one line.
        why: String,
    },
}

fn file_err(path: &str, why: impl Into<String>) -> PreflightError {
    PreflightError::File {
        path: path.to_string(),
        why: why.into(),
    }
}

/// Parses a JSON or YAML text into one value tree (YAML is a superset of
/// JSON, but JSON files are parsed as JSON for exact error positions).
fn parse_tree(path: &str, text: &str) -> Result<serde_json::Value, PreflightError> {
    let lower = path.to_ascii_lowercase();
    let v: serde_json::Value = if lower.ends_with(".json") {
        serde_json::from_str(text).map_err(|e| file_err(path, format!("not valid JSON: {e}")))?
    } else {
        // libyaml's flow parser is quadratic in nesting depth (100,000
        // nested `[` take minutes): refuse what no config needs before it.
        if flow_depth(text) > MAX_DEPTH {
            return Err(file_err(
                path,
                format!("nested deeper than {MAX_DEPTH} levels: not a training config"),
            ));
        }
        serde_yaml_ng::from_str(text).map_err(|e| file_err(path, format!("not valid YAML: {e}")))?
    };
    if !v.is_object() {
        return Err(file_err(
            path,
            "expected a mapping of keys at the top level",
        ));
    }
    Ok(v)
}

/// The deepest nesting a config may have.
const MAX_DEPTH: usize = 64;

/// The deepest `[`/`{` nesting in `text` (brackets inside quotes counted
/// too: only a bound, never a parse).
fn flow_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut max = 0usize;
    for c in text.chars() {
        match c {
            '[' | '{' => {
                depth = depth.saturating_add(1);
                max = max.max(depth);
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A YAML/JSON scalar as text (`true`, `8`, `bf16`); `None` for null, lists
/// and mappings.
fn scalar(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A truthy YAML/CLI value (`true`, `True`, `1`, `yes`).
fn truthy(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "y" | "on" => Some(true),
        "false" | "0" | "no" | "n" | "off" | "none" | "null" => Some(false),
        _ => None,
    }
}

fn as_bool(v: &serde_json::Value) -> Option<bool> {
    match v {
        serde_json::Value::Bool(b) => Some(*b),
        serde_json::Value::Null => Some(false),
        other => scalar(other).and_then(|s| truthy(&s)),
    }
}

/// A positive count (`8`, `"8"`).
fn count(s: &str) -> Option<u64> {
    s.trim().parse::<u64>().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests;
