//! `oomkit estimate -- COMMAND…` and `oomkit estimate CONFIG` through the
//! binary: one fixture per launcher and config format
//! (`crates/oomkit_estimate/tests/fixtures/preflight/`), each with its expected
//! derived setup (`NAME.expect`: the `oomkit estimate` flags it reads as), the
//! sources and defaults printed, the plan as the user's own flags or keys, the
//! JSON, overrides, and bad input (exit 2, one line).

use std::path::{Path, PathBuf};

use super::support::cli;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_estimate/tests/fixtures/preflight")
}

fn expected(name: &str) -> String {
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    std::fs::read_to_string(dir().join(format!("{stem}.expect")))
        .expect("expect file")
        .trim()
        .to_string()
}

/// Every fixture reads as its expected setup: commands (`*.cmd`, run after
/// `--`) and config files (given as MODEL).
#[test]
fn every_fixture_reads_as_its_expected_setup() {
    let mut seen = 0;
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("fixtures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| {
            std::fs::metadata(
                dir().join(
                    n.rsplit_once('.')
                        .map_or(n.as_str(), |(s, _)| s)
                        .to_string()
                        + ".expect",
                ),
            )
            .is_ok()
        })
        .filter(|n| !n.ends_with(".expect"))
        .collect();
    names.sort();
    for name in names {
        let c = if name.ends_with(".cmd") {
            let line = std::fs::read_to_string(dir().join(&name)).expect("cmd");
            let mut args = vec!["estimate", "--gpu", "rtx-4090", "--"];
            args.extend(line.split_whitespace());
            cli(&args).cwd(dir())
        } else {
            cli(&["estimate", &name, "--gpu", "rtx-4090"]).cwd(dir())
        };
        let r = c.run();
        let want = format!(
            "  as oomkit flags: oomkit estimate {} --gpu rtx-4090\n",
            expected(&name)
        );
        assert!(
            r.stdout().contains(&want),
            "{name}: expected\n{want}in\n{}\n{}",
            r.stdout(),
            r.stderr()
        );
        seen += 1;
    }
    // axolotl, LLaMA-Factory, torchtune, TRL YAML, HF JSON; torchrun,
    // accelerate, deepspeed, trl, python -m, tune run, vllm serve, llama-server.
    assert!(seen >= 13, "only {seen} fixtures ran");
}

#[test]
fn sources_defaults_and_ignored_arguments_are_printed_before_the_numbers() {
    let line = std::fs::read_to_string(dir().join("torchrun_ds.cmd")).expect("cmd");
    let mut args = vec!["estimate", "--gpu", "h100-sxm", "--"];
    args.extend(line.split_whitespace());
    let r = cli(&args).cwd(dir()).run();
    let out = r.stdout();
    r.code(0)
        .stdout_has("preflight: torchrun, 8 processes · a Hugging Face Trainer script, run_clm.py\n")
        .stdout_has("  micro-batch        4            --per_device_train_batch_size 4 (command line)\n")
        .stdout_has("gradient_accumulation_steps 1 (default, transformers 4.57 src/transformers/training_args.py)")
        .stdout_has("  ZeRO stage         3            zero_optimization.stage 3 (ds_z3.json)\n")
        .stdout_has("  ignored: --my_flag\n")
        .stdout_has("  autocast           bf16         --bf16 (command line)\n")
        // requirements.txt beside the fixtures pins transformers 4.57.1,
        // which loads fp32 weights.
        .stdout_has("  assumed: precision mixed-bf16: transformers 4.57.1 (requirements.txt) loads float32 weights under bf16 autocast");
    let assumed = out.find("assumed:").expect("assumed");
    let numbers = out.find("peak allocated").expect("numbers");
    assert!(assumed < numbers, "{out}");
}

#[test]
fn the_plan_is_the_users_command_with_changed_flags() {
    let line = std::fs::read_to_string(dir().join("torchrun_ds.cmd")).expect("cmd");
    let mut args = vec!["estimate", "--gpu", "rtx-4090", "--"];
    args.extend(line.split_whitespace());
    cli(&args).cwd(dir()).run().code(1).stdout_has(
        "the plan as your command (changed flags, then the whole line):\n  --optim paged_adamw_8bit, --per_device_train_batch_size 2, --gradient_accumulation_steps 2\n  torchrun --nproc_per_node 8 run_clm.py --model_name_or_path meta-llama/Llama-3.1-8B --per_device_train_batch_size 2 --bf16",
    );
}

#[test]
fn the_plan_for_a_config_is_its_own_keys() {
    cli(&["estimate", "llamafactory_lora.yaml", "--gpu", "rtx-3060"])
        .cwd(dir())
        .run()
        .stdout_has("the plan in llamafactory_lora.yaml (changed keys):\n");
    let r = cli(&[
        "estimate",
        "axolotl_qlora.yaml",
        "--gpu",
        "rtx-3060",
        "--format",
        "json",
    ])
    .cwd(dir())
    .run();
    let j = r.json();
    assert_eq!(j["preflight"]["style"], "axolotl", "{j}");
    assert_eq!(j["preflight"]["config_file"], "axolotl_qlora.yaml");
    let plan = j["preflight"]["plan"][0]["changes"]
        .as_array()
        .expect("changes");
    assert!(
        plan.iter()
            .all(|c| !c.as_str().unwrap_or("").starts_with("per_device")),
        "{plan:?}"
    );
    assert!(
        plan.iter()
            .any(|c| c.as_str().unwrap_or("").starts_with("micro_batch_size: ")),
        "{plan:?}"
    );
}

#[test]
fn engine_plans_are_alternative_lines_of_the_users_command() {
    let r = cli(&[
        "estimate",
        "--gpu",
        "rtx-4090",
        "--",
        "vllm",
        "serve",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu-memory-utilization",
        "0.85",
        "--port",
        "8000",
    ])
    .run();
    r.code(1)
        .stdout_has("the plan as your command (each line starts on its own):\n  1. --max-model-len ")
        .stdout_has("     vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.85 --port 8000 --max-model-len ");
}

#[test]
fn json_carries_every_value_with_its_source_and_the_estimate() {
    let r = cli(&[
        "estimate",
        "--gpu",
        "rtx-4090",
        "--format",
        "json",
        "--",
        "trl",
        "sft",
        "--model_name_or_path",
        "Qwen/Qwen2.5-0.5B",
        "--use_peft",
        "--my_flag",
    ])
    .run();
    let j = r.json();
    let items = j["preflight"]["items"].as_array().expect("items");
    let seq = items.iter().find(|i| i["flag"] == "seq").expect("seq");
    assert_eq!(seq["value"], "1024");
    assert_eq!(seq["source"]["kind"], "default");
    assert_eq!(seq["source"]["cite"], "TRL 1.10 trl/trainer/sft_config.py");
    assert_eq!(j["preflight"]["ignored"][0], "--my_flag");
    assert_eq!(j["estimate"]["setup"]["method"], "lora");
    assert!(
        j["estimate"]["peak_allocated_bytes"].as_u64().is_some(),
        "{j}"
    );
}

#[test]
fn oomkit_flags_before_the_separator_override_the_command() {
    cli(&[
        "estimate",
        "--batch",
        "2",
        "--seq",
        "512",
        "--",
        "python",
        "train.py",
        "--model_name_or_path",
        "gpt2",
        "--per_device_train_batch_size",
        "16",
    ])
    .run()
    .code(0)
    .stdout_has("· batch 2 × seq 512\n");
    // A custom script's model flag is unknown: MODEL before `--` gives it.
    cli(&[
        "estimate",
        "gpt2",
        "--",
        "python",
        "my_train.py",
        "--net",
        "small",
    ])
    .run()
    .code(0)
    .stdout_has("  ignored: --net\n");
}

#[test]
fn what_cannot_be_known_or_read_is_one_line_exit_2() {
    cli(&["estimate", "--", "python", "my_train.py", "--net", "small"])
        .run()
        .code(2)
        .one_error_line()
        .stderr_has("give MODEL before `--`");
    cli(&[
        "estimate",
        "--",
        "python",
        "t.py",
        "--model_name_or_path",
        "gpt2",
        "--deepspeed",
        "missing.json",
    ])
    .run()
    .code(2)
    .one_error_line()
    .stderr_has("missing.json");
    cli(&["estimate", "--", "make", "train"])
        .run()
        .code(2)
        .one_error_line()
        .stderr_has("`make` is not a launcher oomkit reads");
    let tmp = tempfile::tempdir().expect("tmp");
    std::fs::write(tmp.path().join("bad.yaml"), "base_model: [unclosed\n").expect("write");
    cli(&["estimate", "bad.yaml"])
        .cwd(tmp.path())
        .run()
        .code(2)
        .one_error_line()
        .stderr_has("bad.yaml: not valid YAML");
}

/// `estimate` takes the engines' and the Trainer's own spellings: each pair
/// prints the same estimate.
#[test]
fn engine_and_trainer_spellings_are_estimates_own_flags() {
    let rows: &[(&[&str], &[&str])] = &[
        (
            &[
                "meta-llama/Llama-3.1-8B",
                "--engine",
                "llama.cpp",
                "--quant",
                "q4_k_m",
                "-c",
                "8192",
                "-ngl",
                "20",
                "-ub",
                "256",
                "-np",
                "2",
                "-ctk",
                "q8_0",
                "-fa",
                "on",
            ],
            &[
                "meta-llama/Llama-3.1-8B",
                "--engine",
                "llama.cpp",
                "--quant",
                "q4_k_m",
                "--ctx-size",
                "8192",
                "--n-gpu-layers",
                "20",
                "--ubatch-size",
                "256",
                "--parallel",
                "2",
                "--cache-type-k",
                "q8_0",
                "--flash-attn",
                "on",
            ],
        ),
        (
            &[
                "meta-llama/Llama-3.1-70B",
                "--engine",
                "vllm",
                "--task",
                "serve",
                "--tensor-parallel-size",
                "4",
                "--max-model-len",
                "8192",
                "--gpu-memory-utilization",
                "0.95",
                "--kv-cache-dtype",
                "fp8",
                "--gpu",
                "h100-sxm",
            ],
            &[
                "meta-llama/Llama-3.1-70B",
                "--engine",
                "vllm",
                "--task",
                "serve",
                "--tp",
                "4",
                "--max-model-len",
                "8192",
                "--gpu-memory-utilization",
                "0.95",
                "--kv-dtype",
                "fp8",
                "--gpu",
                "h100-sxm",
            ],
        ),
        (
            &[
                "gpt2",
                "--task",
                "train",
                "--per_device_train_batch_size",
                "4",
                "--gradient_accumulation_steps",
                "2",
                "--gradient_checkpointing",
                "--max_seq_length",
                "256",
            ],
            &[
                "gpt2",
                "--task",
                "train",
                "--batch",
                "4",
                "--grad-accum",
                "2",
                "--grad-checkpointing",
                "--seq",
                "256",
            ],
        ),
    ];
    for (theirs, ours) in rows {
        let mut a = vec!["estimate"];
        a.extend(theirs.iter());
        let mut b = vec!["estimate"];
        b.extend(ours.iter());
        let (ra, rb) = (cli(&a).run(), cli(&b).run());
        assert_eq!(ra.status(), Some(0), "{theirs:?}: {}", ra.stderr());
        assert_eq!(ra.stdout(), rb.stdout(), "{theirs:?}");
    }
}

/// Hostile configs (alias expansion, deep nesting, another encoding) are one
/// line, exit 2, promptly.
#[test]
fn hostile_yaml_is_one_line_exit_2() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 10].join(", ");
        laughs.push_str(&format!("{0}: &{0} [{refs}]\n", w[1]));
    }
    laughs.push_str("base_model: gpt2\n");
    let deep = format!(
        "base_model: gpt2\nx: {}{}\n",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let rows: [(&str, Vec<u8>, &str); 3] = [
        (
            "laughs.yaml",
            laughs.into_bytes(),
            "laughs.yaml: not valid YAML: repetition limit exceeded",
        ),
        (
            "deep.yaml",
            deep.into_bytes(),
            "deep.yaml: nested deeper than 64 levels",
        ),
        (
            "latin1.yaml",
            b"base_model: caf\xe9\n".to_vec(),
            "latin1.yaml: not UTF-8 text",
        ),
    ];
    for (name, bytes, says) in rows {
        std::fs::write(tmp.path().join(name), bytes).expect("write");
        cli(&["estimate", name])
            .cwd(tmp.path())
            .run()
            .code(2)
            .one_error_line()
            .stderr_has(says);
    }
}

/// `oomkit run`: a command oomkit reads is estimated before it starts; the
/// verdict goes to stderr; `--preflight=strict` refuses what does not fit
/// (exit 125, oomkit's own failure: the command never runs); `--no-preflight` skips the check; a
/// command it does not read runs as before, with nothing added.
#[test]
fn run_checks_the_command_before_launching() {
    let tmp = tempfile::tempdir().expect("tmp");
    std::fs::write(
        tmp.path().join("train.py"),
        "open('ran.txt', 'w').write('yes')\nprint('training')\n",
    )
    .expect("write");
    let py = super::probe::python();
    let ran = || std::fs::read_to_string(tmp.path().join("ran.txt")).is_ok();
    let small = [
        "train.py",
        "--model_name_or_path",
        "gpt2",
        "--per_device_train_batch_size",
        "4",
    ];
    let big = [
        "train.py",
        "--model_name_or_path",
        "meta-llama/Llama-3.1-70B",
    ];
    let run = |flags: &[&str], script: &[&str]| {
        let mut a = vec!["run"];
        a.extend(flags);
        a.push("--");
        a.push(py);
        a.extend(script);
        cli(&a).cwd(tmp.path()).run()
    };
    run(&["--gpu", "rtx-4090"], &small)
        .code(0)
        .stdout_has("training\n")
        .stderr_has("oomkit preflight: a Hugging Face Trainer script, train.py fits on rtx-4090: ");
    assert!(ran());
    std::fs::remove_file(tmp.path().join("ran.txt")).expect("rm");
    run(&["--gpu", "rtx-3060", "--preflight=strict"], &big)
        .code(125)
        .one_error_line()
        .stderr_has("does not fit on rtx-3060: ")
        .stderr_has("(--preflight=strict: not launched)");
    assert!(!ran(), "a refused command ran");
    run(&["--gpu", "rtx-3060"], &big)
        .code(0)
        .stderr_has("does not fit on rtx-3060: ");
    assert!(ran());
    std::fs::remove_file(tmp.path().join("ran.txt")).expect("rm");
    let r = run(
        &["--gpu", "rtx-3060", "--preflight=strict", "--no-preflight"],
        &big,
    );
    r.code(0);
    assert!(!r.stderr().contains("preflight"), "{}", r.stderr());
    assert!(ran());
    // Not a command oomkit reads: launched, nothing added.
    let r = run(
        &["--gpu", "rtx-3060", "--preflight=strict"],
        &["train.py", "--net", "big"],
    );
    r.code(0);
    assert!(!r.stderr().contains("preflight"), "{}", r.stderr());
}

/// `oomkit probe`: the command is estimated as its first trial runs it
/// (`{batch}` = --min) before any trial; strict refuses when even --min does
/// not fit (exit 125, no trial runs).
#[test]
fn probe_checks_the_first_trial_before_probing() {
    let tmp = tempfile::tempdir().expect("tmp");
    std::fs::write(
        tmp.path().join("train.py"),
        "open('ran.txt', 'a').write('x')\n",
    )
    .expect("write");
    let py = super::probe::python();
    let probe = |flags: &[&str], model: &str| {
        let mut a = vec!["probe", "--max", "2"];
        a.extend(flags);
        a.extend([
            "--",
            py,
            "train.py",
            "--model_name_or_path",
            model,
            "--per_device_train_batch_size",
            "{batch}",
        ]);
        cli(&a).cwd(tmp.path()).run()
    };
    probe(
        &["--gpu", "rtx-3060", "--preflight=strict"],
        "meta-llama/Llama-3.1-70B",
    )
    .code(125)
    .one_error_line()
    .stderr_has("does not fit on rtx-3060: ")
    .stderr_has("(--preflight=strict: not launched)");
    assert!(
        std::fs::read_to_string(tmp.path().join("ran.txt")).is_err(),
        "a trial ran"
    );
    probe(&["--gpu", "rtx-4090"], "gpt2")
        .code(3) // no OOM up to --max: the limit is higher
        .stderr_has("oomkit preflight: a Hugging Face Trainer script, train.py fits on rtx-4090: ");
    assert!(
        std::fs::read_to_string(tmp.path().join("ran.txt")).is_ok(),
        "no trial ran"
    );
}
