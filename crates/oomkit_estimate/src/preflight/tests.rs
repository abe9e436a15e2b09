//! Unit tests: the fixtures in `tests/fixtures/preflight/` are checked by
//! `tests/preflight.rs`; these cover the parsing rules one by one.

use super::argv::{Arg, split};
use super::*;

struct Mem(Vec<(&'static str, &'static str)>);

impl Files for Mem {
    fn read(&self, path: &str) -> Result<String, String> {
        self.0
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, t)| (*t).to_string())
            .ok_or_else(|| "no such file".to_string())
    }
    fn exists(&self, path: &str) -> bool {
        self.0.iter().any(|(p, _)| *p == path)
    }
}

fn toks(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn hf_switches_take_only_boolean_values() {
    let a = split(
        &toks("--bf16 --per_device_train_batch_size 4 --gradient_checkpointing True x"),
        &train::hf_switch,
    );
    assert_eq!(
        a,
        vec![
            Arg::Opt {
                name: "--bf16".into(),
                value: None
            },
            Arg::Opt {
                name: "--per_device_train_batch_size".into(),
                value: Some("4".into())
            },
            Arg::Opt {
                name: "--gradient_checkpointing".into(),
                value: Some("True".into())
            },
            Arg::Pos("x".into()),
        ]
    );
}

#[test]
fn torchrun_counts_processes_over_nodes() {
    let d = from_command(
        &toks("torchrun --nproc_per_node 4 --nnodes 1:2 train.py --model_name_or_path gpt2"),
        &Mem(vec![]),
    )
    .unwrap();
    assert_eq!(d.value("gpus"), Some("8"));
    assert_eq!(d.model(), Some("gpt2"));
    assert_eq!(d.value("batch"), Some("8"));
}

#[test]
fn unknown_script_flags_are_listed_and_the_model_is_asked_for() {
    let d = from_command(
        &toks("python train.py --my_flag 3 --per_device_train_batch_size 2"),
        &Mem(vec![]),
    )
    .unwrap();
    assert_eq!(d.ignored, vec!["--my_flag".to_string()]);
    assert!(d.needs.iter().any(|n| n.flag == "model"));
    assert_eq!(d.value("batch"), Some("2"));
}

#[test]
fn deepspeed_file_sets_zero_and_offload() {
    let files = Mem(vec![(
        "ds.json",
        r#"{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}"#,
    )]);
    let d = from_command(
        &toks("deepspeed --num_gpus 2 train.py --model_name_or_path gpt2 --deepspeed ds.json"),
        &files,
    )
    .unwrap();
    assert_eq!(d.value("zero"), Some("3"));
    assert_eq!(d.value("offload"), Some("optimizer"));
    assert_eq!(d.value("gpus"), Some("2"));
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let e = from_command(
        &toks("python t.py --deepspeed nope.json --model_name_or_path gpt2"),
        &Mem(vec![]),
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("nope.json: "), "{e}");
}

#[test]
fn llama_server_file_name_gives_model_and_type() {
    let d = from_command(
        &toks("llama-server -m Llama-3.1-8B-Q4_K_M.gguf -c 8192 -ngl 20"),
        &Mem(vec![]),
    )
    .unwrap();
    assert_eq!(d.model(), Some("Llama-3.1-8B"));
    assert_eq!(d.value("quant"), Some("q4_k_m"));
    assert_eq!(d.value("ctx-size"), Some("8192"));
    assert_eq!(d.value("n-gpu-layers"), Some("20"));
}

#[test]
fn training_plan_becomes_the_users_flags() {
    let d = from_command(
        &toks("python train.py --model_name_or_path gpt2 --per_device_train_batch_size 4"),
        &Mem(vec![]),
    )
    .unwrap();
    let steps = [
        edit::Step {
            remedy: "gradient-checkpointing",
            config: "TrainingArguments(gradient_checkpointing=True)",
        },
        edit::Step {
            remedy: "gradient-accumulation",
            config: "TrainingArguments(per_device_train_batch_size=1, gradient_accumulation_steps=4)",
        },
    ];
    let r = edit::rewrite_plan(&d, &steps, None);
    assert_eq!(
        r.first().and_then(|r| r.command.clone()).as_deref(),
        Some(
            "python train.py --model_name_or_path gpt2 --per_device_train_batch_size 1 --gradient_checkpointing --gradient_accumulation_steps 4"
        )
    );
}

#[test]
fn yaml_styles_spell_their_own_keys() {
    let files = Mem(vec![("a.yaml", "base_model: gpt2\nmicro_batch_size: 4\n")]);
    let d = from_config("a.yaml", &files).unwrap();
    let steps = [edit::Step {
        remedy: "lora",
        config: "peft.LoraConfig(r=16, lora_alpha=32, target_modules=\"all-linear\", task_type=\"CAUSAL_LM\")",
    }];
    let r = edit::rewrite_plan(&d, &steps, None);
    assert_eq!(
        r.first().map(|r| r.changes.clone()).unwrap_or_default(),
        vec!["adapter: lora", "lora_r: 16", "lora_target_linear: true"]
    );
}

#[test]
fn parameter_offload_is_not_lowered_by_a_later_optimizer_flag() {
    // Both orders of accelerate's flags, and both keys in one DeepSpeed file:
    // parameter offload (which takes the optimizer state along) wins.
    for cmd in [
        "accelerate launch --use_deepspeed --zero_stage 3 --offload_param_device cpu \
         --offload_optimizer_device cpu train.py --model_name_or_path gpt2",
        "accelerate launch --use_deepspeed --zero_stage 3 --offload_optimizer_device cpu \
         --offload_param_device cpu train.py --model_name_or_path gpt2",
    ] {
        let d = from_command(&toks(cmd), &Mem(vec![])).unwrap();
        assert_eq!(d.value("offload"), Some("params"), "{cmd}");
    }
    let files = Mem(vec![(
        "ds.json",
        r#"{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
            "offload_param": {"device": "cpu"}}}"#,
    )]);
    let d = from_command(
        &toks("deepspeed train.py --model_name_or_path gpt2 --deepspeed ds.json"),
        &files,
    )
    .unwrap();
    assert_eq!(d.value("offload"), Some("params"));
}
