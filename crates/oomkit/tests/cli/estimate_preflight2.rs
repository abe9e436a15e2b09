//! What an estimate assumes and the plans it gives, through the binary: the
//! assumptions stated before the numbers with their sources (text and JSON),
//! training precision by the transformers version read from a lock file,
//! pinned requirements, `pip freeze` output or the Python on PATH; plans as
//! one paste (one `TrainingArguments` call; llama.cpp's `-c` and `-ngl`
//! together; vLLM's utilization with a shorter context), each changed command
//! or config read again and estimated; a fine-tune's own config (RoPE
//! scaling) over the catalogue's; `probe --estimate` resolving as `estimate`.

use std::path::{Path, PathBuf};

use super::support::{cli, exit_2_says};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_estimate/tests/fixtures/preflight")
}

fn catalogue_config(stem: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../oomkit_estimate/models")
            .join(format!("{stem}.json")),
    )
    .expect("catalogue config")
}

fn used(j: &serde_json::Value) -> u64 {
    j["device_used_bytes"].as_u64().expect("device_used_bytes")
}

const TRAIN_8B: &[&str] = &[
    "estimate",
    "meta-llama/Llama-3.1-8B",
    "--task",
    "train",
    "--gpu",
    "h100-sxm",
];

/// Plain `--task train` says what it assumed, with sources, under the model
/// line and before the numbers; with no version anywhere the precision is
/// transformers 5's (the config's dtype) and it says so.
#[test]
fn plain_training_states_its_assumptions_before_the_numbers() {
    let dir = tempfile::tempdir().expect("tmp");
    let r = cli(TRAIN_8B).cwd(dir.path()).run();
    let out = r.stdout();
    r.code(0)
        .stdout_has("  assumed: precision bf16: transformers 5 (the current release: no version of it was read) loads the config's dtype (bfloat16) and trains in it")
        .stdout_has("(default, transformers 5.0 src/transformers/modeling_utils.py, huggingface/transformers#42805)")
        .stdout_has("  assumed: batch 1: oomkit's default (--batch)\n")
        .stdout_has("  assumed: seq 512: oomkit's default (--seq)\n")
        .stdout_has("  assumed: optimizer adamw: ")
        .stdout_has("  assumed: grad-checkpointing off: ")
        .stdout_has("  assumed: trainer off: ")
        .stdout_has("  assumed: attention sdpa: ");
    let first = out.lines().next().unwrap_or_default();
    assert!(first.starts_with("meta-llama/Llama-3.1-8B ("), "{first}");
    let assumed = out.find("assumed:").expect("assumed");
    assert!(
        assumed < out.find("peak allocated").expect("numbers"),
        "{out}"
    );
    // What is given is not assumed.
    let given = cli(&[
        "estimate",
        "meta-llama/Llama-3.1-8B",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--optimizer",
        "adamw-8bit",
        "--batch",
        "2",
    ])
    .cwd(dir.path())
    .run();
    let text = given.stdout();
    for not in ["assumed: precision", "assumed: optimizer", "assumed: batch"] {
        assert!(!text.contains(not), "{not}: {text}");
    }
    assert!(text.contains("assumed: seq 512"), "{text}");
    let mut args = TRAIN_8B.to_vec();
    args.extend(["--format", "json"]);
    let j = cli(&args).cwd(dir.path()).run().code(0).json();
    assert_eq!(j["version"], 2);
    let a = &j["assumed"];
    assert_eq!(a[0]["setting"], "precision");
    assert_eq!(a[0]["value"], "bf16");
    assert_eq!(a[0]["source"]["kind"], "default");
    assert!(a[0].get("version").is_none(), "no version was read: {a}");
    let settings: Vec<&str> = a
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|x| x["setting"].as_str())
        .collect();
    for s in [
        "batch",
        "seq",
        "method",
        "optimizer",
        "grad-checkpointing",
        "trainer",
        "attention",
    ] {
        assert!(settings.contains(&s), "{s} in {settings:?}");
    }
    assert_eq!(
        a.as_array()
            .and_then(|v| v.iter().find(|x| x["setting"] == "trainer"))
            .map(|x| x["source"]["kind"].clone()),
        Some("assumed".into())
    );
}

/// The transformers version in a lock file, pinned requirements, `pip
/// freeze` output or the Python on PATH picks the default that changed in
/// 5.0: 4.x loads fp32 weights (mixed precision under bf16 autocast, fp32
/// master weights and states), and the answer names the version and file.
#[test]
fn the_installed_transformers_version_picks_the_training_default() {
    let v5 = tempfile::tempdir().expect("tmp");
    let mut args = TRAIN_8B.to_vec();
    args.extend(["--format", "json"]);
    let j5 = cli(&args).cwd(v5.path()).run().code(0).json();
    assert_eq!(j5["setup"]["precision"], "bf16");

    let lock = "version = 1\nrequires-python = \">=3.10\"\n\n[[package]]\nname = \"torch\"\nversion = \"2.8.0\"\nsource = { registry = \"https://pypi.org/simple\" }\n\n[[package]]\nname = \"transformers\"\nversion = \"4.57.1\"\nsource = { registry = \"https://pypi.org/simple\" }\ndependencies = [\n    { name = \"torch\" },\n]\n";
    let poetry = "[[package]]\nname = \"transformers\"\nversion = \"4.46.3\"\ndescription = \"State-of-the-art Machine Learning\"\noptional = false\n\n[metadata]\nlock-version = \"2.0\"\n";
    for (file, text, version) in [
        ("uv.lock", lock, "4.57.1"),
        ("poetry.lock", poetry, "4.46.3"),
        (
            "requirements.txt",
            "torch==2.8.0\ntransformers[torch]==4.44.2 ; python_version >= \"3.9\"\n",
            "4.44.2",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join(file), text).expect("write");
        let j4 = cli(&args).cwd(dir.path()).run().code(1).json();
        assert_eq!(j4["setup"]["precision"], "mixed-bf16", "{file}");
        let a = &j4["assumed"][0];
        assert_eq!(a["version"]["package"], "transformers", "{file}");
        assert_eq!(a["version"]["version"], version, "{file}");
        assert_eq!(a["version"]["from"], file, "{file}");
        // fp32 master weights, gradients and AdamW states: twice the bytes.
        assert!(
            used(&j4) > used(&j5) * 3 / 2,
            "{file}: {} vs {}",
            used(&j4),
            used(&j5)
        );
        cli(TRAIN_8B)
            .cwd(dir.path())
            .run()
            .code(1)
            .stdout_has(&format!(
                "  assumed: precision mixed-bf16: transformers {version} ({file}) loads float32 weights under bf16 autocast (bf16=True assumed; --precision fp32 without it)"
            ));
    }

    // Named on the command line: a file, or `pip freeze` on standard input.
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("pins.txt"), "transformers==4.57.1\n").expect("write");
    let mut named = args.clone();
    named.extend(["--versions", "pins.txt"]);
    let j = cli(&named).cwd(dir.path()).run().code(1).json();
    assert_eq!(j["assumed"][0]["version"]["from"], "pins.txt");
    let mut stdin = args.clone();
    stdin.extend(["--versions", "-"]);
    let j = cli(&stdin)
        .cwd(dir.path())
        .stdin("accelerate==1.10.0\ntransformers==4.57.1\n")
        .run()
        .code(1)
        .json();
    assert_eq!(j["setup"]["precision"], "mixed-bf16");
    // A given file wins over the lock files of the directory.
    std::fs::write(dir.path().join("uv.lock"), lock.replace("4.57.1", "5.1.0")).expect("write");
    let j = cli(&named).cwd(dir.path()).run().code(1).json();
    assert_eq!(j["assumed"][0]["version"]["version"], "4.57.1");
    let j = cli(&args).cwd(dir.path()).run().code(0).json();
    assert_eq!(j["assumed"][0]["version"]["version"], "5.1.0");
    assert_eq!(j["setup"]["precision"], "bf16");
    // --autocast: fp32 weights with no autocast train in fp32.
    let mut off = named.clone();
    off.extend(["--autocast", "off"]);
    let j = cli(&off).cwd(dir.path()).run().code(1).json();
    assert_eq!(j["setup"]["precision"], "fp32");
}

/// `--versions python` asks the python3 on PATH (a stand-in here) through
/// importlib.metadata, only when asked.
#[cfg(unix)]
#[test]
fn versions_from_the_python_on_path_only_when_asked() {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().expect("tmp");
    let py = bin.path().join("python3");
    // A stand-in interpreter: prints what importlib.metadata would.
    std::fs::write(
        &py,
        "#!/bin/sh\necho transformers==4.46.0\necho torch==2.5.1\n",
    )
    .expect("write");
    std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let work = tempfile::tempdir().expect("tmp");
    let mut args = TRAIN_8B.to_vec();
    args.extend(["--format", "json"]);
    let j = cli(&args)
        .cwd(work.path())
        .env("PATH", &path)
        .run()
        .code(0)
        .json();
    assert!(j["assumed"][0].get("version").is_none(), "not asked: {j}");
    args.extend(["--versions", "python"]);
    let j = cli(&args)
        .cwd(work.path())
        .env("PATH", &path)
        .run()
        .code(1)
        .json();
    assert_eq!(j["assumed"][0]["version"]["version"], "4.46.0");
    assert_eq!(
        j["assumed"][0]["version"]["from"],
        "python3 importlib.metadata"
    );
    // A failing interpreter is one line, exit 2.
    std::fs::write(&py, "#!/bin/sh\nexit 3\n").expect("write");
    cli(&args)
        .cwd(work.path())
        .env("PATH", &path)
        .run()
        .code(2)
        .one_error_line()
        .stderr_has("--versions python: python3 exited with");
}

/// The active environment's installed packages (their `.dist-info` folder
/// names; nothing runs) come before the directory's lock files.
#[test]
fn the_active_environment_is_read_before_the_lock_files() {
    let venv = tempfile::tempdir().expect("tmp");
    let site = venv.path().join("lib/python3.12/site-packages");
    for d in [
        "transformers-4.57.1.dist-info",
        "torch-2.8.0.dist-info",
        "numpy-2.1.0.dist-info",
        "transformers",
    ] {
        std::fs::create_dir_all(site.join(d)).expect("mkdir");
    }
    let work = tempfile::tempdir().expect("tmp");
    std::fs::write(
        work.path().join("requirements.txt"),
        "transformers==5.1.0
",
    )
    .expect("write");
    let mut args = TRAIN_8B.to_vec();
    args.extend(["--format", "json"]);
    let j = cli(&args)
        .cwd(work.path())
        .env("VIRTUAL_ENV", venv.path())
        .run()
        .code(1)
        .json();
    let v = &j["assumed"][0]["version"];
    assert_eq!(v["version"], "4.57.1", "{j}");
    assert_eq!(v["from"], "the active environment, VIRTUAL_ENV");
    assert_eq!(j["setup"]["precision"], "mixed-bf16");
    let j = cli(&args).cwd(work.path()).run().code(0).json();
    assert_eq!(j["assumed"][0]["version"]["from"], "requirements.txt");
    // A prefix with no packages: the lock file.
    let empty = tempfile::tempdir().expect("tmp");
    let j = cli(&args)
        .cwd(work.path())
        .env("CONDA_PREFIX", empty.path())
        .run()
        .code(0)
        .json();
    assert_eq!(j["assumed"][0]["version"]["version"], "5.1.0");
}

#[test]
fn bad_version_sources_are_one_line() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("bin.lock"), [0xff, 0xfe, 0x00, 0x80]).expect("write");
    let base = cli(&["estimate"]).cwd(dir.path());
    exit_2_says(
        &base,
        &[
            (
                &["gpt2", "--task", "train", "--versions", "missing.lock"],
                "--versions: cannot read missing.lock",
            ),
            (
                &["gpt2", "--task", "train", "--versions", "bin.lock"],
                "--versions: bin.lock is not UTF-8 text",
            ),
            (
                &["gpt2", "--task", "train", "--versions", "."],
                "is a directory",
            ),
            (
                &["gpt2", "--autocast", "bf16"],
                "--autocast applies to training (--task train)",
            ),
        ],
    );
    // A lock file nobody named that cannot be read is skipped.
    std::fs::write(dir.path().join("uv.lock"), [0xff, 0xfe]).expect("write");
    cli(&["estimate", "gpt2", "--task", "train"])
        .cwd(dir.path())
        .run()
        .code(0);
}

/// Preflight of a Trainer script passes its autocast; the version read
/// beside it decides the weights (the fixtures' requirements.txt pins
/// transformers 4.57.1; a 5.x pin trains the bf16 checkpoint in bf16).
#[test]
fn preflight_precision_follows_the_version_beside_the_command() {
    let line = std::fs::read_to_string(fixtures().join("torchrun_ds.cmd")).expect("cmd");
    let mut args = vec!["estimate", "--gpu", "h100-sxm", "--format", "json", "--"];
    args.extend(line.split_whitespace());
    let j = cli(&args).cwd(fixtures()).run().code(0).json();
    assert_eq!(j["estimate"]["setup"]["precision"], "mixed-bf16");
    let items = j["preflight"]["items"].as_array().expect("items");
    let ac = items
        .iter()
        .find(|i| i["flag"] == "autocast")
        .expect("autocast");
    assert_eq!(ac["value"], "bf16");
    assert_eq!(ac["key"], "--bf16");
    assert!(items.iter().all(|i| i["flag"] != "precision"), "{items:?}");
    // The same command in a project pinned to transformers 5.
    let dir = tempfile::tempdir().expect("tmp");
    for f in ["run_clm.py", "ds_z3.json"] {
        if fixtures().join(f).exists() {
            std::fs::copy(fixtures().join(f), dir.path().join(f)).expect("copy");
        }
    }
    std::fs::write(dir.path().join("requirements.txt"), "transformers==5.2.0\n").expect("write");
    let j = cli(&args).cwd(dir.path()).run().code(0).json();
    assert_eq!(j["estimate"]["setup"]["precision"], "bf16");
    assert_eq!(j["estimate"]["assumed"][0]["version"]["version"], "5.2.0");
}

/// A training plan of several steps is one paste: every TrainingArguments
/// change in one call, the other snippets once.
#[test]
fn a_training_plan_is_one_paste() {
    let dir = tempfile::tempdir().expect("tmp");
    let args = [
        "estimate",
        "meta-llama/Llama-3.1-8B",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--batch",
        "8",
        "--seq",
        "2048",
        "--gpu",
        "rtx-4090",
    ];
    let r = cli(&args).cwd(dir.path()).run();
    r.code(1).stdout_has("\nall together (one paste):\n  TrainingArguments(gradient_checkpointing=True, optim=\"paged_adamw_8bit\", per_device_train_batch_size=1, gradient_accumulation_steps=8)\n");
    let out = r.stdout();
    let paste = out
        .split("all together (one paste):")
        .nth(1)
        .unwrap_or_default();
    assert_eq!(paste.matches("TrainingArguments(").count(), 1, "{paste}");
    let mut json_args = args.to_vec();
    json_args.extend(["--format", "json"]);
    let j = cli(&json_args).cwd(dir.path()).run().code(1).json();
    let p = j["fit"]["paste"].as_str().expect("paste");
    assert_eq!(p.matches("TrainingArguments(").count(), 1, "{p}");
    assert!(
        p.contains("LoraConfig(") && p.contains("BitsAndBytesConfig("),
        "{p}"
    );
    assert_eq!(j["fit"]["plan_fits"], true);
    // One step, or a fit: no paste.
    let j = cli(&["estimate", "gpt2", "--gpu", "h100-sxm", "--format", "json"])
        .cwd(dir.path())
        .run()
        .code(0)
        .json();
    assert!(j["fit"]["paste"].is_null());
}

/// llama.cpp: a 70B Q4_K_M on a 24 GB card lowers `-c` and `-ngl` together
/// (44 layers at -c 8192, where -c 131072 keeps 23), each alternative read
/// again from the changed command and estimated.
#[test]
fn llamacpp_lowers_the_context_and_the_layers_together() {
    let dir = tempfile::tempdir().expect("tmp");
    let args = [
        "estimate",
        "--gpu",
        "rtx-3090",
        "--",
        "llama-server",
        "-m",
        "Llama-3.1-70B-Q4_K_M.gguf",
        "-c",
        "131072",
    ];
    cli(&args)
        .cwd(dir.path())
        .run()
        .code(1)
        .stdout_has("  1. -c 8192, -ngl 44\n     llama-server -m Llama-3.1-70B-Q4_K_M.gguf -c 8192 -ngl 44\n     checked: read again and estimated, it fits (")
        .stdout_has("  2. -ngl 23\n");
    let mut j_args = args.to_vec();
    j_args.splice(1..1, ["--format", "json"]);
    let j = cli(&j_args).cwd(dir.path()).run().code(1).json();
    let plan = j["preflight"]["plan"].as_array().expect("plan");
    assert!(plan.len() >= 2, "{plan:?}");
    for p in plan {
        assert_eq!(p["check"]["fits"], true, "{p}");
        assert!(p["check"]["needs_bytes"].as_u64() <= p["check"]["usable_bytes"].as_u64());
    }
    let est_plan = j["estimate"]["fit"]["plan"]
        .as_array()
        .expect("estimate plan");
    assert!(
        est_plan.iter().any(|s| s["change"]
            .as_str()
            .is_some_and(|c| c.contains("-c 8192 (from 131072) and -ngl 44 together"))),
        "{est_plan:?}"
    );
}

/// vLLM: the utilization raised together with a shorter `--max-model-len`,
/// a longer context than shortening alone, and it starts when read again.
#[test]
fn vllm_raises_the_utilization_with_a_shorter_context() {
    let dir = tempfile::tempdir().expect("tmp");
    let args = [
        "estimate",
        "--gpu",
        "l4",
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        "meta-llama/Llama-3.1-8B-Instruct",
    ];
    let j = cli(&args).cwd(dir.path()).run().code(1).json();
    let plan = j["preflight"]["plan"].as_array().expect("plan");
    let len = |p: &serde_json::Value| {
        let c = p["command"].as_str().unwrap_or_default();
        let mut it = c.split_whitespace().skip_while(|t| *t != "--max-model-len");
        it.nth(1).and_then(|v| v.parse::<u64>().ok())
    };
    let alone = plan
        .iter()
        .find(|p| {
            p["changes"].as_array().is_some_and(|c| c.len() == 1)
                && len(p).is_some()
                && !p["command"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("--gpu-memory-utilization")
        })
        .and_then(len)
        .expect("a shorter context alone");
    let both = plan
        .iter()
        .find(|p| {
            let c = p["command"].as_str().unwrap_or_default();
            c.contains("--gpu-memory-utilization 0.95") && c.contains("--max-model-len")
        })
        .expect("both together");
    assert!(len(both).expect("length") > alone, "{both}");
    assert_eq!(both["check"]["fits"], true, "{both}");
}

/// A config's plan is checked by reading the changed keys again: torchtune's
/// QLoRA is its `qlora_` builder; axolotl's sequence cut is `sequence_len`.
#[test]
fn config_plans_are_read_again_with_their_changed_keys() {
    cli(&["estimate", "torchtune_lora.yaml", "--gpu", "rtx-3060"])
        .cwd(fixtures())
        .run()
        .code(1)
        .stdout_has("  model._component_: torchtune.models.llama3_1.qlora_llama3_1_8b\n")
        .stdout_has("  checked: read again and estimated, it fits (");
    cli(&["estimate", "axolotl_qlora.yaml", "--gpu", "rtx-3060"])
        .cwd(fixtures())
        .run()
        .code(1)
        .stdout_has("  sequence_len: ")
        .stdout_has("  checked: read again and estimated, it fits (");
    let j = cli(&[
        "estimate",
        "llamafactory_lora.yaml",
        "--gpu",
        "rtx-3060",
        "--format",
        "json",
    ])
    .cwd(fixtures())
    .run()
    .code(1)
    .json();
    assert_eq!(j["preflight"]["plan"][0]["check"]["fits"], true, "{j}");
}

/// A fine-tune's own config.json wins: a local fine-tune with YaRN scaling
/// serves its scaled context by default; a name resolved to a catalogue
/// entry says its own file was not read.
#[test]
fn a_fine_tunes_own_config_wins_and_the_answer_says_whose() {
    let dir = tempfile::tempdir().expect("tmp");
    let ft = dir.path().join("my-qwen-ft");
    std::fs::create_dir(&ft).expect("mkdir");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&catalogue_config("Qwen__Qwen2.5-7B")).expect("json");
    cfg["max_position_embeddings"] = 32768.into();
    cfg["rope_scaling"] = serde_json::json!({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768});
    std::fs::write(ft.join("config.json"), cfg.to_string()).expect("write");
    let j = cli(&[
        "estimate",
        "my-qwen-ft",
        "--task",
        "serve",
        "--engine",
        "vllm",
        "--gpu",
        "h200",
        "--format",
        "json",
    ])
    .cwd(dir.path())
    .run()
    .json();
    assert_eq!(j["serve"]["max_model_len"], 131_072, "{j}");
    assert!(j["assumed"].as_array().is_some_and(Vec::is_empty), "{j}");
    // The catalogue entry's own length without the scaling.
    cfg.as_object_mut().map(|o| o.remove("rope_scaling"));
    std::fs::write(ft.join("config.json"), cfg.to_string()).expect("write");
    let j = cli(&[
        "estimate",
        "my-qwen-ft",
        "--task",
        "serve",
        "--engine",
        "vllm",
        "--gpu",
        "h200",
        "--format",
        "json",
    ])
    .cwd(dir.path())
    .run()
    .json();
    assert_eq!(j["serve"]["max_model_len"], 32_768, "{j}");
    // Known only by name: the base's config, and the answer says so.
    let r = cli(&[
        "estimate",
        "--gpu",
        "h100-sxm",
        "--",
        "vllm",
        "serve",
        "NousResearch/Hermes-3-Llama-3.1-8B",
    ])
    .cwd(dir.path())
    .run();
    r.stdout_has("  assumed: model meta-llama/Llama-3.1-8B: NousResearch/Hermes-3-Llama-3.1-8B's own config.json was not read (not in the Hugging Face cache; --hub fetches it): context length, RoPE scaling, vocabulary and tied embeddings are the catalogue entry's\n");
    let j = cli(&[
        "estimate",
        "NousResearch/Hermes-3-Llama-3.1-8B",
        "--format",
        "json",
    ])
    .cwd(dir.path())
    .run()
    .code(0)
    .json();
    assert_eq!(j["assumed"][0]["setting"], "model");
    assert_eq!(j["assumed"][0]["value"], "meta-llama/Llama-3.1-8B");
    assert_eq!(j["assumed"][0]["source"]["kind"], "assumed");
    // The Qwen2.5 Instruct configs state 32,768 positions where their bases
    // state 131,072 (their model cards): vLLM's default context is theirs.
    let serve = |name: &str| {
        cli(&[
            "estimate", name, "--task", "serve", "--engine", "vllm", "--gpu", "l4", "--format",
            "json",
        ])
        .cwd(dir.path())
        .run()
        .json()
    };
    let instruct = serve("Qwen/Qwen2.5-7B-Instruct");
    assert_eq!(instruct["serve"]["max_model_len"], 32_768, "{instruct}");
    assert_eq!(instruct["fit"]["fits"], true);
    assert!(
        instruct["assumed"][0]["why"]
            .as_str()
            .is_some_and(|w| w.ends_with(
                "its context is 32768 positions, as the Qwen2.5-7B-Instruct model card states"
            )),
        "{instruct}"
    );
    let base = serve("Qwen/Qwen2.5-7B");
    assert_eq!(base["serve"]["max_model_len"], 131_072);
    assert_eq!(base["fit"]["fits"], false);
    assert!(base["assumed"].as_array().is_some_and(Vec::is_empty));
}

/// `probe --estimate` resolves and sets up as `estimate` does: a local
/// config folder, and the versions read, give estimate's own max batch.
#[test]
fn probe_estimate_resolves_as_estimate_does() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join("m")).expect("mkdir");
    std::fs::write(
        dir.path().join("m/config.json"),
        catalogue_config("Qwen__Qwen2.5-0.5B"),
    )
    .expect("write");
    std::fs::write(dir.path().join("pins.txt"), "transformers==4.57.1\n").expect("write");
    for extra in [&[][..], &["--versions", "pins.txt"][..]] {
        let mut est = vec!["m", "--task", "train", "--gpu", "rtx-4090"];
        est.extend_from_slice(extra);
        let mut e = vec!["estimate", "--format", "json"];
        e.extend_from_slice(&est);
        let want = cli(&e).cwd(dir.path()).run().code(0).json()["fit"]["max_batch"].clone();
        let mut p = vec!["probe", "--format", "json", "--max", "64", "--estimate"];
        p.extend_from_slice(&est);
        p.extend(["--", "true"]);
        let j = cli(&p).cwd(dir.path()).run().json();
        assert_eq!(j["estimate"], want, "{extra:?}: {j}");
    }
}
