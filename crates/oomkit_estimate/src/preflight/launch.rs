//! Launch commands: the launcher's own options (processes, config files),
//! then the program's arguments in its tool's spelling.

use super::argv::{self, Arg};
use super::defaults as d;
use super::train::{self, Framework, Train};
use super::{Derived, Files, PreflightError, Source, Style, count};

fn err(msg: impl Into<String>) -> PreflightError {
    PreflightError::Command(msg.into())
}

/// The last path component (`./build/bin/llama-server` → `llama-server`).
fn base(p: &str) -> &str {
    p.rsplit(['/', '\\']).next().unwrap_or(p)
}

const KNOWN: &str = "python, python -m, torchrun, accelerate launch, deepspeed, trl, tune run, vllm serve, llama-server, llama-cli";

/// Reads a launch command (`torchrun --nproc_per_node 8 train.py …`).
pub fn from_command(tokens: &[String], files: &dyn Files) -> Result<Derived, PreflightError> {
    let mut rest = tokens;
    // Leading environment assignments (`CUDA_VISIBLE_DEVICES=0,1 torchrun …`).
    let mut visible = None;
    while let Some((first, tail)) = rest.split_first() {
        match first.split_once('=') {
            Some((k, v))
                if !k.is_empty()
                    && !k.starts_with('-')
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                if k == "CUDA_VISIBLE_DEVICES" {
                    visible = Some(v.split(',').filter(|x| !x.trim().is_empty()).count() as u64);
                }
                rest = tail;
            }
            _ => break,
        }
    }
    let Some((prog, args)) = rest.split_first() else {
        return Err(err(
            "no command after `--`: give the command you run, e.g. `-- torchrun --nproc_per_node 8 train.py …`",
        ));
    };
    let mut l = Launch::default();
    if let Some(n) = visible.filter(|&n| n > 0) {
        l.gpus = Some((n, "CUDA_VISIBLE_DEVICES".into(), n.to_string()));
    }
    let mut dd = l.program(prog, args, files)?;
    dd.command = tokens.to_vec();
    Ok(dd)
}

/// What the launchers in front of the program said.
#[derive(Default)]
struct Launch {
    /// Processes in all, the key that said so and its value as written.
    gpus: Option<(u64, String, String)>,
    gpus_src: Option<Source>,
    /// Words for what was understood, outermost first.
    words: Vec<String>,
    /// Settings from launcher config files (accelerate, DeepSpeed), applied
    /// before the program's own arguments.
    pre: Derived,
    /// accelerate's `mixed_precision`, the Trainer's autocast.
    mixed: Option<(String, String, Source)>,
    /// A launcher that starts every visible GPU (deepspeed without
    /// --num_gpus).
    all_visible: bool,
}

impl Default for Derived {
    fn default() -> Self {
        Derived::new(String::new(), Style::HfArgs)
    }
}

impl Launch {
    fn program(
        &mut self,
        prog: &str,
        args: &[String],
        files: &dyn Files,
    ) -> Result<Derived, PreflightError> {
        let name = base(prog);
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("python") {
            return self.python(args, files);
        }
        match lower.as_str() {
            "torchrun" => self.torchrun(args, files),
            "accelerate" => match args.split_first() {
                Some((sub, rest)) if sub == "launch" => self.accelerate(rest, files),
                _ => Err(err(
                    "`accelerate` without `launch`: only `accelerate launch …` starts a training",
                )),
            },
            "deepspeed" => self.deepspeed(args, files),
            "trl" => self.trl(args, files),
            "tune" => match args.split_first() {
                Some((sub, rest)) if sub == "run" => self.tune(rest, files),
                _ => Err(err(
                    "`tune` without `run`: only `tune run RECIPE --config FILE` starts a training",
                )),
            },
            "vllm" => match args.split_first() {
                Some((sub, rest)) if sub == "serve" => vllm(rest, true),
                _ => Err(err(
                    "`vllm` without `serve`: only `vllm serve MODEL …` is read",
                )),
            },
            "llama-server" | "llama-cli" | "llama-cli.exe" | "llama-server.exe" | "server"
            | "main" => llama(name, args, files),
            _ if lower.ends_with(".py") => self.script(prog, args, files),
            _ => Err(err(format!(
                "`{name}` is not a launcher oomkit reads ({KNOWN})"
            ))),
        }
    }

    fn python(&mut self, args: &[String], files: &dyn Files) -> Result<Derived, PreflightError> {
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "-m" => {
                    let Some(module) = it.next() else {
                        return Err(err("`python -m` without a module"));
                    };
                    let rest: Vec<String> = it.cloned().collect();
                    return self.module(module, &rest, files);
                }
                "-W" | "-X" | "-c" => {
                    if a == "-c" {
                        return Err(err(
                            "`python -c CODE` runs inline code: give the script's command instead",
                        ));
                    }
                    it.next();
                }
                s if s.starts_with('-') => {}
                script => {
                    let rest: Vec<String> = it.cloned().collect();
                    return self.script(script, &rest, files);
                }
            }
        }
        Err(err("`python` without a script or `-m MODULE`"))
    }

    fn module(
        &mut self,
        module: &str,
        args: &[String],
        files: &dyn Files,
    ) -> Result<Derived, PreflightError> {
        match module {
            "torch.distributed.run" | "torch.distributed.launch" => self.torchrun(args, files),
            "accelerate.commands.launch" => self.accelerate(args, files),
            "deepspeed" | "deepspeed.launcher.runner" => self.deepspeed(args, files),
            "trl" | "trl.cli" => self.trl(args, files),
            "vllm.entrypoints.openai.api_server" => vllm(args, false),
            m if m.starts_with("trl.scripts.") => {
                self.words.push(format!("python -m {m}"));
                self.hf_program(m, args, Framework::Trl, files)
            }
            m => self.script(m, args, files),
        }
    }

    fn set_gpus(&mut self, n: u64, key: &str, shown: &str, src: Source) {
        self.gpus = Some((n, key.to_string(), shown.to_string()));
        self.gpus_src = Some(src);
    }

    fn torchrun(&mut self, args: &[String], files: &dyn Files) -> Result<Derived, PreflightError> {
        let switches = [
            "--standalone",
            "--no_python",
            "--no-python",
            "--run_path",
            "--run-path",
            "-m",
            "--module",
        ];
        let (opts, prog, rest) = launcher_split(args, &switches);
        let mut per_node = None;
        let mut nodes = 1u64;
        let mut module = false;
        for a in &opts {
            if let Arg::Opt { name, value } = a {
                match argv::key(name).as_str() {
                    "nproc_per_node" => {
                        if let Some(v) = value.as_deref() {
                            match count(v) {
                        Some(n) => per_node = Some((n, name.clone(), v.to_string())),
                        None => self.pre.need("gpus", format!("the GPU count ({name} {v} counts them at launch): give --gpus N")),
                    }
                        }
                    }
                    "nnodes" => {
                        if let Some(v) = value {
                            // `MIN:MAX` elastic ranges: the most nodes.
                            let max = v.rsplit(':').next().unwrap_or(v);
                            nodes = count(max).unwrap_or(1);
                        }
                    }
                    "m" | "module" => module = true,
                    _ => {}
                }
            }
        }
        let (n, key, shown) =
            per_node
                .clone()
                .unwrap_or((1, "--nproc_per_node".into(), "1".into()));
        let total = n.saturating_mul(nodes);
        let src = if per_node.is_some() {
            Source::Command
        } else {
            Source::Default { cite: d::TORCHRUN }
        };
        let shown = if nodes > 1 {
            format!("{shown} × --nnodes {nodes}")
        } else {
            shown
        };
        self.set_gpus(total, &key, &shown, src);
        self.words.push(format!(
            "torchrun, {total} process{}",
            if total == 1 { "" } else { "es" }
        ));
        let Some(prog) = prog else {
            return Err(err("torchrun without a script"));
        };
        if module {
            return self.module(&prog, &rest, files);
        }
        self.script(&prog, &rest, files)
    }

    fn accelerate(
        &mut self,
        args: &[String],
        files: &dyn Files,
    ) -> Result<Derived, PreflightError> {
        let switches = [
            "--multi_gpu",
            "--multi-gpu",
            "--use_deepspeed",
            "--use-deepspeed",
            "--use_fsdp",
            "--use-fsdp",
            "--cpu",
            "-m",
            "--module",
            "--no_python",
            "--no-python",
            "--debug",
            "-q",
            "--quiet",
            "--use_megatron_lm",
            "--tpu",
            "--use_xpu",
        ];
        let (opts, prog, rest) = launcher_split(args, &switches);
        let mut config = None;
        let mut module = false;
        for a in &opts {
            if let Arg::Opt {
                name,
                value: Some(v),
            } = a
                && matches!(argv::key(name).as_str(), "config_file")
            {
                config = Some(v.clone());
            }
            if let Arg::Opt { name, .. } = a
                && matches!(name.as_str(), "-m" | "--module")
            {
                module = true;
            }
        }
        match &config {
            Some(path) => {
                let mp = train::read_accelerate(path, &mut self.pre, files)?;
                if let Some(m) = mp {
                    self.mixed = Some((m, "mixed_precision".into(), Source::File { path: path.clone() }));
                }
                if let Some(g) = self.pre.value("gpus").and_then(count) {
                    self.set_gpus(g, "num_processes", &g.to_string(), Source::File { path: path.clone() });
                    self.pre.unset("gpus");
                }
            }
            None => self.pre.assumed.push(
                "accelerate's default config (`accelerate config`, ~/.cache/huggingface/accelerate/default_config.yaml) is not read: one process unless --num_processes says; pass --config_file to read yours".into(),
            ),
        }
        for a in &opts {
            let Arg::Opt { name, value } = a else {
                continue;
            };
            let v = value.clone().unwrap_or_default();
            match argv::key(name).as_str() {
                "num_processes" => {
                    if let Some(n) = count(&v) {
                        self.set_gpus(n, name, &v, Source::Command);
                    }
                }
                "mixed_precision" => {
                    self.mixed = (v == "bf16" || v == "fp16")
                        .then(|| (v.clone(), name.clone(), Source::Command));
                }
                "zero_stage" => {
                    if matches!(v.as_str(), "0" | "1" | "2" | "3") {
                        self.pre
                            .set("zero", Some(v.clone()), name, &v, Source::Command);
                    }
                }
                // The flags come one at a time, in any order: parameter
                // offload set by an earlier flag is not lowered to
                // optimizer-only by a later one (`train::set_offload`'s rule).
                "offload_optimizer_device"
                    if v != "none" && self.pre.value("offload") != Some("params") =>
                {
                    train::set_offload(
                        &mut self.pre,
                        None,
                        Some((name.as_str(), v.clone())),
                        &Source::Command,
                    );
                }
                "offload_param_device" if v != "none" => train::set_offload(
                    &mut self.pre,
                    Some((name.as_str(), v.clone())),
                    None,
                    &Source::Command,
                ),
                "deepspeed_config_file" => train::read_deepspeed(&v, &mut self.pre, files)?,
                "use_fsdp" => self.pre.set("fsdp", None, name, "true", Source::Command),
                "fsdp_sharding_strategy" => train::fsdp_string(
                    &v.replace('_', " ")
                        .replace("FULL SHARD", "full_shard")
                        .to_ascii_lowercase()
                        .replace(' ', "_"),
                    name,
                    Source::Command,
                    &mut self.pre,
                ),
                "gradient_accumulation_steps" => {
                    if let Some(n) = count(&v) {
                        self.pre
                            .set("grad-accum", Some(n.to_string()), name, &v, Source::Command);
                    }
                }
                _ => {}
            }
        }
        if self.gpus.is_none() {
            self.set_gpus(
                1,
                "num_processes",
                "1",
                Source::Default {
                    cite: d::ACCELERATE,
                },
            );
        }
        let n = self.gpus.as_ref().map_or(1, |g| g.0);
        self.words.push(format!(
            "accelerate launch, {n} process{}",
            if n == 1 { "" } else { "es" }
        ));
        let Some(prog) = prog else {
            return Err(err("accelerate launch without a script"));
        };
        if module {
            return self.module(&prog, &rest, files);
        }
        self.script(&prog, &rest, files)
    }

    fn deepspeed(&mut self, args: &[String], files: &dyn Files) -> Result<Derived, PreflightError> {
        let switches = [
            "--module",
            "--no_python",
            "--no_local_rank",
            "--force_multi",
            "--autotuning",
            "--no_ssh_check",
        ];
        let (opts, prog, rest) = launcher_split(args, &switches);
        let mut gpus = None;
        let mut nodes = 1;
        for a in &opts {
            if let Arg::Opt {
                name,
                value: Some(v),
            } = a
            {
                match argv::key(name).as_str() {
                    "num_gpus" => gpus = count(v).map(|n| (n, name.clone(), v.clone())),
                    "num_nodes" => nodes = count(v).unwrap_or(1),
                    "include" => {
                        // `localhost:0,1`: the listed GPUs.
                        let list = v.rsplit(':').next().unwrap_or(v);
                        let n = list.split(',').filter(|x| !x.is_empty()).count() as u64;
                        if n > 0 {
                            gpus = Some((n, name.clone(), v.clone()));
                        }
                    }
                    _ => {}
                }
            }
        }
        match gpus {
            Some((n, key, shown)) => {
                self.set_gpus(n.saturating_mul(nodes), &key, &shown, Source::Command)
            }
            None => self.all_visible = true,
        }
        self.words.push("deepspeed".into());
        let Some(prog) = prog else {
            return Err(err("deepspeed without a script"));
        };
        self.script(&prog, &rest, files)
    }

    fn trl(&mut self, args: &[String], files: &dyn Files) -> Result<Derived, PreflightError> {
        let Some((sub, rest)) = args.split_first() else {
            return Err(err("`trl` without a command (sft, dpo, grpo, …)"));
        };
        if sub == "vllm-serve" {
            return vllm(rest, false);
        }
        if !matches!(
            sub.as_str(),
            "sft" | "dpo" | "kto" | "reward" | "grpo" | "rloo"
        ) {
            return Err(err(format!(
                "`trl {sub}` is not a training command oomkit reads (sft, dpo, kto, reward, grpo, rloo)"
            )));
        }
        self.words.push(format!("trl {sub}"));
        if sub != "sft" {
            self.pre.assumed.push(format!(
                "trl {sub}: one policy model is estimated; a reference, reward or generation model it also loads is not"
            ));
        }
        // `trl` passes --num_processes and --accelerate_config to accelerate.
        let parsed = argv::split(rest, &train::hf_switch);
        let mut script_args = Vec::new();
        for a in parsed {
            match &a {
                Arg::Opt {
                    name,
                    value: Some(v),
                } if argv::key(name) == "accelerate_config" => {
                    self.trl_accelerate(v, files)?;
                }
                Arg::Opt {
                    name,
                    value: Some(v),
                } if argv::key(name) == "num_processes" => {
                    if let Some(n) = count(v) {
                        self.set_gpus(n, name, v, Source::Command);
                    }
                }
                _ => script_args.push(a),
            }
        }
        self.finish_hf(Framework::Trl, &script_args, "TRL".into(), files)
    }

    /// `--accelerate_config zero3`: a TRL-shipped config by name, or a path.
    fn trl_accelerate(&mut self, v: &str, files: &dyn Files) -> Result<(), PreflightError> {
        let named = match v {
            "zero1" | "zero2" | "zero3" => Some(serde_json::json!({
                "distributed_type": "DEEPSPEED", "num_processes": 8, "mixed_precision": "bf16",
                "deepspeed_config": {"zero_stage": v.trim_start_matches("zero").parse::<u64>().unwrap_or(0),
                    "offload_optimizer_device": "none", "offload_param_device": "none"}})),
            "fsdp1" | "fsdp2" => Some(serde_json::json!({
                "distributed_type": "FSDP", "num_processes": 8, "mixed_precision": "bf16",
                "fsdp_config": {"fsdp_offload_params": false}})),
            "multi_gpu" => Some(
                serde_json::json!({"distributed_type": "MULTI_GPU", "num_processes": 8, "mixed_precision": "bf16"}),
            ),
            "single_gpu" => Some(
                serde_json::json!({"distributed_type": "NO", "num_processes": 1, "mixed_precision": "bf16"}),
            ),
            _ => None,
        };
        let (mp, path) = match named {
            Some(tree) => {
                let path = format!("trl/accelerate_configs/{v}.yaml (TRL 1.10)");
                (
                    train::accelerate_tree(&tree, &path, &mut self.pre, files)?,
                    path,
                )
            }
            None => (
                train::read_accelerate(v, &mut self.pre, files)?,
                v.to_string(),
            ),
        };
        if let Some(m) = mp {
            self.mixed = Some((
                m,
                "mixed_precision".into(),
                Source::File { path: path.clone() },
            ));
        }
        if let Some(g) = self.pre.value("gpus").and_then(count) {
            self.set_gpus(g, "num_processes", &g.to_string(), Source::File { path });
            self.pre.unset("gpus");
        }
        Ok(())
    }

    fn tune(&mut self, args: &[String], files: &dyn Files) -> Result<Derived, PreflightError> {
        // `tune run [TORCHRUN-OPTIONS] RECIPE --config CONFIG [key=value …]`.
        let (opts, recipe, rest) = launcher_split(args, &["--standalone"]);
        let mut per_node = None;
        let mut nodes = 1;
        for a in &opts {
            if let Arg::Opt {
                name,
                value: Some(v),
            } = a
            {
                match argv::key(name).as_str() {
                    "nproc_per_node" => per_node = count(v).map(|n| (n, name.clone(), v.clone())),
                    "nnodes" => nodes = count(v.rsplit(':').next().unwrap_or(v)).unwrap_or(1),
                    _ => {}
                }
            }
        }
        let Some(recipe) = recipe else {
            return Err(err("`tune run` without a recipe"));
        };
        let mut config = None;
        let mut overrides = Vec::new();
        let mut it = rest.iter();
        while let Some(a) = it.next() {
            if a == "--config" || a == "-c" {
                config = it.next().cloned();
            } else if let Some(c) = a.strip_prefix("--config=") {
                config = Some(c.to_string());
            } else if a.contains('=') && !a.starts_with('-') {
                overrides.push(a.clone());
            } else {
                self.pre.ignore(a.clone());
            }
        }
        let Some(config) = config else {
            return Err(err("`tune run` without --config"));
        };
        if !files.exists(&config) {
            return Err(err(format!(
                "torchtune config {config}: not a file here (a built-in config name?); copy it with `tune cp {config} my_config.yaml` and give that file"
            )));
        }
        let mut dd = super::configs::torchtune_file(&config, &overrides, files)?;
        if let Some((n, key, v)) = per_node {
            let total = n.saturating_mul(nodes);
            dd.set("gpus", Some(total.to_string()), &key, &v, Source::Command);
        }
        dd.understood = format!("tune run {recipe} · {}", dd.understood);
        dd.ignored.append(&mut self.pre.ignored);
        Ok(dd)
    }

    /// A Python script or module run directly or by a launcher.
    fn script(
        &mut self,
        prog: &str,
        args: &[String],
        files: &dyn Files,
    ) -> Result<Derived, PreflightError> {
        let name = base(prog);
        // TRL's own scripts (trl/scripts/sft.py) and SFT scripts on TRL.
        let fw = if prog.contains("trl/scripts") || prog.starts_with("trl.") {
            Framework::Trl
        } else {
            Framework::Hf
        };
        self.hf_program(name, args, fw, files)
    }

    fn hf_program(
        &mut self,
        name: &str,
        args: &[String],
        fw: Framework,
        files: &dyn Files,
    ) -> Result<Derived, PreflightError> {
        let parsed = argv::split(args, &train::hf_switch);
        // TRL-only argument names make a script a TRL one.
        let trl_keys = [
            "use_peft",
            "lora_r",
            "load_in_4bit",
            "max_length",
            "max_seq_length",
            "packing",
            "dataset_text_field",
            "use_bnb_nested_quant",
        ];
        let fw = if fw == Framework::Hf
            && parsed.iter().any(|a| matches!(a, Arg::Opt { name, .. } if trl_keys.contains(&argv::key(name).as_str())))
        {
            Framework::Trl
        } else {
            fw
        };
        let what = match fw {
            Framework::Trl => format!("a TRL script, {name}"),
            _ => format!("a Hugging Face Trainer script, {name}"),
        };
        self.finish_hf(fw, &parsed, what, files)
    }

    fn finish_hf(
        &mut self,
        fw: Framework,
        parsed: &[Arg],
        what: String,
        files: &dyn Files,
    ) -> Result<Derived, PreflightError> {
        let mut words = std::mem::take(&mut self.words);
        words.push(what);
        let mut dd = Derived::new(words.join(" · "), Style::HfArgs);
        let mut t = Train::default();
        if let Some((m, key, src)) = &self.mixed {
            t.put(m, "true", key, src.clone());
        }
        t.read_args(parsed, &mut dd, files)?;
        t.finish(fw, &mut dd, files)?;
        // Launcher config files first; the script's arguments win where both
        // speak (the Trainer's `--deepspeed` file is the one that runs).
        for i in std::mem::take(&mut self.pre.items) {
            if !dd.has(i.flag) {
                dd.items.push(i);
            }
        }
        dd.ignored.append(&mut self.pre.ignored);
        dd.needs.append(&mut self.pre.needs);
        dd.assumed.append(&mut self.pre.assumed);
        match (&self.gpus, self.all_visible) {
            (Some((n, key, shown)), _) => {
                let src = self.gpus_src.clone().unwrap_or(Source::Command);
                dd.set("gpus", Some(n.to_string()), key, shown, src);
            }
            (None, true) => dd.need("gpus", "the GPU count (deepspeed without --num_gpus starts one process per visible GPU): give --gpus N"),
            (None, false) => {}
        }
        if dd.model().is_none() {
            dd.need("model", "the model: the script's own arguments name none oomkit knows (--model_name_or_path): give MODEL before `--`");
        }
        Ok(dd)
    }
}

/// Splits a launcher's argv into its options, the program, and the
/// program's arguments (everything after the first positional).
fn launcher_split(args: &[String], switches: &[&str]) -> (Vec<Arg>, Option<String>, Vec<String>) {
    let mut opts = Vec::new();
    let mut i = 0;
    while let Some(tok) = args.get(i) {
        if tok == "--" {
            i += 1;
            continue;
        }
        if !tok.starts_with('-') {
            let rest = args
                .get(i + 1..)
                .map(<[String]>::to_vec)
                .unwrap_or_default();
            return (opts, Some(tok.clone()), rest);
        }
        if let Some((n, v)) = tok.split_once('=') {
            opts.push(Arg::Opt {
                name: n.to_string(),
                value: Some(v.to_string()),
            });
            i += 1;
            continue;
        }
        if switches.contains(&tok.as_str()) {
            opts.push(Arg::Opt {
                name: tok.clone(),
                value: None,
            });
            i += 1;
            continue;
        }
        let value = args.get(i + 1).cloned();
        opts.push(Arg::Opt {
            name: tok.clone(),
            value,
        });
        i += 2;
    }
    (opts, None, Vec::new())
}

/// `vllm serve MODEL [flags]` (`serve` true), or the OpenAI server module
/// with `--model`.
fn vllm(args: &[String], serve: bool) -> Result<Derived, PreflightError> {
    let switches = |n: &str| {
        matches!(
            n,
            "--enforce-eager"
                | "--trust-remote-code"
                | "--enable-prefix-caching"
                | "--no-enable-prefix-caching"
                | "--disable-log-requests"
                | "--disable-log-stats"
                | "--enable-chunked-prefill"
                | "--no-enable-chunked-prefill"
                | "--enable-auto-tool-choice"
                | "--enable-lora"
                | "--disable-custom-all-reduce"
                | "--async-scheduling"
                | "--enable-expert-parallel"
                | "--headless"
                | "--disable-frontend-multiprocessing"
                | "--api-server-count"
        )
    };
    let parsed = argv::split(args, &switches);
    let mut dd = Derived::new("vllm serve".into(), Style::Vllm);
    dd.set(
        "task",
        Some("serve".into()),
        "vllm serve",
        "serving",
        Source::Command,
    );
    dd.set(
        "engine",
        Some("vllm".into()),
        "vllm serve",
        "vLLM",
        Source::Command,
    );
    let cmd = Source::Command;
    for a in &parsed {
        match a {
            Arg::Pos(p) if serve && dd.model().is_none() => {
                dd.set("model", Some(p.clone()), "MODEL", p, cmd.clone())
            }
            Arg::Pos(p) => dd.ignore(p.clone()),
            Arg::Opt { name, value } => {
                let v = value.clone().unwrap_or_default();
                let k = argv::key(name);
                let num = |dd: &mut Derived, flag: &'static str| match count(&v) {
                    Some(n) => dd.set(flag, Some(n.to_string()), name, &v, Source::Command),
                    None => dd.ignore(format!("{name} {v}")),
                };
                match k.as_str() {
                    "model" => dd.set("model", Some(v.clone()), name, &v, cmd.clone()),
                    "max_model_len" => num(&mut dd, "max-model-len"),
                    "tensor_parallel_size" | "tp" => num(&mut dd, "tp"),
                    "pipeline_parallel_size" | "pp" => num(&mut dd, "pp"),
                    "max_num_seqs" => num(&mut dd, "max-num-seqs"),
                    "max_num_batched_tokens" => num(&mut dd, "max-num-batched-tokens"),
                    "gpu_memory_utilization" => match v.parse::<f64>() {
                        Ok(f) if f > 0.0 && f <= 1.0 => dd.set(
                            "gpu-memory-utilization",
                            Some(v.clone()),
                            name,
                            &v,
                            cmd.clone(),
                        ),
                        _ => dd.ignore(format!("{name} {v}")),
                    },
                    "kv_cache_dtype" => match v.as_str() {
                        "auto" => {}
                        s if s.starts_with("fp8") => {
                            dd.set("kv-dtype", Some("fp8".into()), name, &v, cmd.clone())
                        }
                        _ => dd.ignore(format!("{name} {v}")),
                    },
                    "quantization" | "q" => match v.as_str() {
                        "fp8" => dd.set("quant", Some("fp8".into()), name, &v, cmd.clone()),
                        "bitsandbytes" => {
                            dd.set("quant", Some("nf4".into()), name, &v, cmd.clone())
                        }
                        "awq" | "awq_marlin" | "gptq" | "gptq_marlin" => {
                            dd.set("quant", Some("int4".into()), name, &v, cmd.clone())
                        }
                        _ => dd.ignore(format!("{name} {v}")),
                    },
                    "dtype" => match v.as_str() {
                        "bfloat16" | "bf16" => {
                            dd.set("precision", Some("bf16".into()), name, &v, cmd.clone())
                        }
                        "float16" | "half" | "fp16" => {
                            dd.set("precision", Some("fp16".into()), name, &v, cmd.clone())
                        }
                        "float32" | "float" => {
                            dd.set("precision", Some("fp32".into()), name, &v, cmd.clone())
                        }
                        _ => {}
                    },
                    "host"
                    | "port"
                    | "served_model_name"
                    | "api_key"
                    | "download_dir"
                    | "tokenizer"
                    | "chat_template"
                    | "uvicorn_log_level"
                    | "seed"
                    | "revision"
                    | "enforce_eager"
                    | "trust_remote_code"
                    | "disable_log_requests"
                    | "disable_log_stats"
                    | "enable_prefix_caching"
                    | "enable_chunked_prefill" => {}
                    _ => dd.ignore(name.clone()),
                }
            }
        }
    }
    if !dd.has("gpu-memory-utilization") {
        dd.default(
            "gpu-memory-utilization",
            Some("0.9".into()),
            "--gpu-memory-utilization",
            "0.9",
            d::VLLM,
        );
    }
    if !dd.has("max-model-len") {
        dd.assumed.push(format!("--max-model-len: the model's own context (its config.json's max_position_embeddings, scaled by its rope_scaling), as vLLM takes it ({})", d::VLLM));
    }
    if dd.model().is_none() {
        dd.need("model", "the model: `vllm serve MODEL`");
    }
    Ok(dd)
}

/// GGUF file-type suffixes of file names (`-Q4_K_M.gguf`), as `--quant`.
const GGUF_TYPES: &[(&str, &str)] = &[
    ("q4_k_m", "q4_k_m"),
    ("q5_k_m", "q5_k_m"),
    ("q6_k", "q6_k"),
    ("q8_0", "q8_0"),
    ("q4_0", "q4_0"),
    ("f16", "f16"),
];

/// `llama-server` / `llama-cli` flags (`common/arg.cpp` spellings).
fn llama(name: &str, args: &[String], files: &dyn Files) -> Result<Derived, PreflightError> {
    let switches = |n: &str| {
        matches!(
            n,
            "--no-mmap"
                | "--mlock"
                | "-cb"
                | "--cont-batching"
                | "--metrics"
                | "--jinja"
                | "-v"
                | "--verbose"
                | "--embedding"
                | "--embeddings"
                | "-cnv"
                | "--conversation"
                | "-i"
                | "--interactive"
                | "--no-webui"
                | "-nkvo"
                | "--no-kv-offload"
                | "--swa-full"
                | "--cpu-moe"
                | "-cmoe"
        )
    };
    let mut dd = Derived::new(name.to_string(), Style::LlamaCpp);
    dd.set(
        "engine",
        Some("llama.cpp".into()),
        name,
        "llama.cpp",
        Source::Command,
    );
    dd.set(
        "task",
        Some("infer".into()),
        name,
        "inference",
        Source::Command,
    );
    let mut it = args.iter().peekable();
    let cmd = Source::Command;
    while let Some(tok) = it.next() {
        let (flag, inline) = match tok.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f.to_string(), Some(v.to_string())),
            _ => (tok.clone(), None),
        };
        if !flag.starts_with('-') {
            dd.ignore(tok.clone());
            continue;
        }
        // `-fa` takes on|off|auto in current builds and nothing in older ones.
        let optional = matches!(flag.as_str(), "-fa" | "--flash-attn");
        let value = if inline.is_some() {
            inline
        } else if switches(&flag) {
            None
        } else if optional {
            match it.peek() {
                Some(n) if matches!(n.as_str(), "on" | "off" | "auto") => it.next().cloned(),
                _ => Some("on".into()),
            }
        } else {
            it.next().cloned()
        };
        let v = value.clone().unwrap_or_default();
        let num = |dd: &mut Derived, f: &'static str| match count(&v) {
            Some(n) => dd.set(f, Some(n.to_string()), &flag, &v, Source::Command),
            None => dd.ignore(format!("{flag} {v}")),
        };
        match flag.as_str() {
            "-m" | "--model" => {
                if files.exists(&v) || !v.to_ascii_lowercase().ends_with(".gguf") {
                    dd.set("model", Some(v.clone()), &flag, &v, cmd.clone());
                } else {
                    // Not here: the catalogue model the file name names, in
                    // the GGUF type it names (`Llama-3.1-8B-Q4_K_M.gguf`).
                    let stem = base(&v).trim_end_matches(".gguf").trim_end_matches(".GGUF");
                    let lower = stem.to_ascii_lowercase();
                    let found = GGUF_TYPES
                        .iter()
                        .find(|(suffix, _)| lower.ends_with(suffix));
                    match found {
                        Some((suffix, q)) => {
                            let cut = stem.len().saturating_sub(suffix.len());
                            let model: String = stem.chars().take(cut).collect();
                            let model = model.trim_end_matches(['-', '.', '_']).to_string();
                            dd.set("model", Some(model.clone()), &flag, &v, cmd.clone());
                            dd.set("quant", Some((*q).into()), &flag, &v, cmd.clone());
                            dd.assumed.push(format!("{v} is not here: the catalogue model {model} in {} (the file name's type)", q.to_ascii_uppercase()));
                        }
                        None => dd.need("model", format!("the model: {v} is not here and its name gives no GGUF type; give MODEL (a .gguf path, or a catalogue id with --quant q4_k_m)")),
                    }
                }
            }
            "-hf" | "--hf-repo" | "-hfr" => dd.need(
                "model",
                format!("the model: {flag} {v} downloads it; give the .gguf file as MODEL"),
            ),
            "-c" | "--ctx-size" => num(&mut dd, "ctx-size"),
            "-ngl" | "--n-gpu-layers" | "--gpu-layers" => {
                if v == "all" || count(&v).is_some() || v == "0" {
                    dd.set("n-gpu-layers", Some(v.clone()), &flag, &v, cmd.clone());
                } else {
                    dd.ignore(format!("{flag} {v}"));
                }
            }
            "-b" | "--batch-size" => num(&mut dd, "batch-size"),
            "-ub" | "--ubatch-size" => num(&mut dd, "ubatch-size"),
            "-np" | "--parallel" => num(&mut dd, "parallel"),
            "-ctk" | "--cache-type-k" => dd.set(
                "cache-type-k",
                Some(v.to_ascii_lowercase()),
                &flag,
                &v,
                cmd.clone(),
            ),
            "-ctv" | "--cache-type-v" => dd.set(
                "cache-type-v",
                Some(v.to_ascii_lowercase()),
                &flag,
                &v,
                cmd.clone(),
            ),
            "-fa" | "--flash-attn" => dd.set("flash-attn", Some(v.clone()), &flag, &v, cmd.clone()),
            "--host" | "--port" | "-t" | "--threads" | "-a" | "--alias" | "--temp" | "-n"
            | "--n-predict" | "-p" | "--prompt" | "--api-key" | "-s" | "--seed"
            | "--chat-template" => {}
            _ => dd.ignore(flag.clone()),
        }
    }
    if !dd.has("ctx-size") {
        dd.assumed.push(format!(
            "-c: the model's training context, as `-c 0` ({})",
            d::LLAMACPP
        ));
    }
    if !dd.has("n-gpu-layers") {
        dd.assumed.push(format!(
            "-ngl: every layer on the GPU, recent builds' default ({})",
            d::LLAMACPP
        ));
    }
    if dd.model().is_none() && dd.needs.is_empty() {
        dd.need("model", "the model: `-m FILE.gguf`");
    }
    Ok(dd)
}
