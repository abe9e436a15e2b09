//! Command-line arguments (clap derive). Raw arguments only: validation and
//! conversion to library options happen in `commands/`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use oomkit_estimate::image::CpuOffload;
use oomkit_estimate::llamacpp::CacheType;
use oomkit_estimate::sharding::Count;
use oomkit_estimate::{
    Attention, BareShape, Engine, KvDtype, Method, Offload, OnOff, Optimizer, Options, Precision,
    QuantChoice, Workload, setup,
};

/// The version `--version` prints: the crate's, plus the git commit it was
/// built from when built from a checkout (`build.rs`), e.g. `0.1.0 (a91f5a7)`.
/// (`env!` is checked in every branch at compile time, so build.rs always sets
/// the whole string rather than an optional commit.)
pub const VERSION: &str = env!("OOMKIT_VERSION");

/// The GPU out-of-memory toolkit.
#[derive(Debug, Parser)]
#[command(name = "oomkit", version = VERSION, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// When to use colour: auto (only on a terminal, honouring NO_COLOR), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Find out-of-memory errors in logs and explain them: numbers, cause, fixes.
    ///
    /// Reads each FILE (or standard input when none is given or FILE is `-`).
    /// Exit status: 0 an OOM was found, 1 no OOM in the input, 2 bad input or I/O error.
    Explain(ExplainArgs),
    /// Find memory leaks and OOM traps in Python training code.
    ///
    /// Lints each PATH (files and directories, respecting .gitignore; default `.`;
    /// `-` reads standard input). Exit status: 0 clean, 1 findings, 2 a file could not
    /// be read or parsed (other files are still linted) or bad arguments/configuration.
    Lint(LintArgs),
    /// Predict peak GPU memory for a model and setup, whether it fits a GPU,
    /// and the cheapest change that makes it fit.
    ///
    /// MODEL is a catalogue id (Hugging Face repo id or alias, see --list-models),
    /// a config.json path or a folder holding one; or use --params.
    /// Exit status: 0 estimated (and fits the --gpu), 1 does not fit the --gpu, 2 error.
    Estimate(Box<EstimateArgs>),
    /// Find the largest batch size that fits, by running the command once per trial.
    ///
    /// `{batch}` in CMD (after `--`) is replaced by each trial's batch size, which is
    /// also exported as OOMKIT_BATCH_SIZE. Each trial runs in its own process group and
    /// is classified as oom (an OOM explain recognises, whatever the exit status), ok,
    /// error or timeout; the batch right above the answer is run twice.
    /// Exit status: 0 exact answer, 1 even --min does not fit, 2 a trial failed
    /// otherwise (error, timeout), 3 no out-of-memory up to --max, 4 flaky boundary,
    /// 125 oomkit's own failure or bad arguments, 126 the command cannot run,
    /// 127 not found; after SIGINT/SIGTERM/SIGHUP oomkit dies of that signal.
    Probe(ProbeArgs),
    /// Run a command with its output passed through; if it runs out of memory,
    /// end with explain's report and the memory timeline.
    ///
    /// Exit status: the command's own (128 + N when signal N killed it; oomkit dies
    /// of SIGINT/SIGTERM/SIGHUP itself when the command did or when it received
    /// one), 125 oomkit's own failure or bad arguments, 126 the command cannot run,
    /// 127 not found.
    Run(RunArgs),
    /// Find memory leaks by running a few steps of a PyTorch program: memory
    /// made in one step that is still alive and keeps growing, who holds it,
    /// the line that stores it, the kind and the fix.
    ///
    /// Steps are optimizer steps, else DataLoader batches (evaluation loops), or
    /// calls of --marker; after --steps of them the program is ended. The
    /// program's output passes through (dropped with --format json).
    /// Exit status: 0 no leak, 1 leaks found, 2 bad arguments or the program
    /// ended before its first steps (with its explanation), 125 oomkit's own
    /// failure, 126 the command cannot run, 127 not found.
    Leaks(LeaksArgs),
    /// Read a PyTorch memory snapshot (`torch.cuda.memory._dump_snapshot()`)
    /// without executing it: peak, what was alive at the peak by site,
    /// fragmentation, leak candidates; `snapshot diff A B` compares two.
    ///
    /// Exit status: 0 analysed, 1 leak candidates found, 2 bad input or I/O error.
    Snapshot(SnapshotArgs),
    /// Watch GPU memory live (NVML): per GPU and per process, with growth rate
    /// and a forecast of when memory runs out.
    ///
    /// On a terminal: an interactive view (q quits, p pauses, s sorts, / filters,
    /// g/Tab/0-9 pick a GPU). Otherwise, or with --once/--format/--count: one
    /// sample per --interval on stdout. Needs the NVIDIA driver's
    /// libnvidia-ml.so.1 (found through the loader path, LD_LIBRARY_PATH included).
    /// Exit status: 0 done (also after Ctrl-C), 2 NVML unavailable, bad arguments
    /// or I/O error.
    Monitor(MonitorArgs),
    /// Print a shell completion script: `oomkit completions bash > ~/.local/share/bash-completion/completions/oomkit`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a man page (roff): `oomkit man > ~/.local/share/man/man1/oomkit.1`,
    /// `oomkit man estimate` for oomkit-estimate(1), or every page with `--dir`.
    Man {
        /// The subcommand whose page to print (`explain`, `estimate`, …); none: oomkit(1).
        subcommand: Option<String>,
        /// Write every page (oomkit.1, oomkit-explain.1, …) into this folder instead.
        #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
        dir: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
pub struct MonitorArgs {
    /// Print one sample and exit (no growth or forecast: those need several).
    #[arg(long)]
    pub once: bool,
    /// Output: human text, json (JSON Lines, one sample per line), csv (one row
    /// per GPU per sample). Default: the interactive view on a terminal, human otherwise.
    #[arg(long, value_enum)]
    pub format: Option<MonitorFormat>,
    /// Time between samples: `200ms`, `1s`, `2` (seconds).
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub interval: String,
    /// Stop after N samples.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Span of history behind growth and the leak forecast: `60s`, `5m`, `1h`
    /// (every sample in it is used; old ones are thinned, never dropped).
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub window: String,
    /// Append every sample to FILE as JSON Lines (never torn; rotated at --log-max-size).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Rotate --log to FILE.1 when it would pass this size.
    #[arg(long, default_value = "64MiB", value_name = "SIZE")]
    pub log_max_size: String,
    /// Serve Prometheus metrics at http://ADDR/metrics: HOST:PORT, :PORT or PORT
    /// (loopback); alone, 127.0.0.1:19180. Port 0 picks a free one.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    pub prometheus: Option<String>,
    /// With --prometheus: add each process's command line as a `command` label
    /// (off by default: /metrics has no authentication).
    #[arg(long, requires = "prometheus")]
    pub metrics_command_lines: bool,
    /// Warn once per GPU when its used memory reaches this: `90%` or a size
    /// (`70GiB`); a bare number is an error.
    #[arg(long, value_name = "THRESHOLD")]
    pub alert_at: Option<String>,
    /// With --alert-at: run this shell command on each alert (env OOMKIT_ALERT_GPU,
    /// OOMKIT_ALERT_UUID, OOMKIT_ALERT_USED_BYTES, OOMKIT_ALERT_TOTAL_BYTES, OOMKIT_ALERT_MESSAGE).
    #[arg(long, value_name = "CMD", requires = "alert_at")]
    pub alert_cmd: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MonitorFormat {
    /// Text for people.
    Human,
    /// JSON Lines: one sample object per line (see README "monitor JSON").
    Json,
    /// CSV with a header: one row per GPU per sample.
    Csv,
}

#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// Smallest batch size to try.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub min: u64,
    /// Largest batch size to try (bisects [min, max]; without it the search doubles
    /// from --min until the first OOM, up to 65536).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max: Option<u64>,
    /// Kill a trial that runs longer than this (`90s`, `2m`, `1h30m` or plain seconds);
    /// it is reported as `timeout` and stops the search.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Also report a batch size this many percent below the largest that ran.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub margin: f64,
    /// Start at oomkit's own estimate of the largest batch and search around it:
    /// MODEL then any `oomkit estimate` flags, including --gpu (required). Put it
    /// last, just before `--`, e.g. `--estimate llama-3.2-1b --task train --gpu rtx-4090`.
    #[arg(long, num_args = 1.., allow_hyphen_values = true, value_terminator = "--", value_name = "MODEL [FLAGS]")]
    pub estimate: Option<Vec<String>>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Before the first trial, estimate the command at --min (when oomkit reads it,
    /// see docs/preflight.md) on this GPU (default: the first GPU the driver
    /// reports) and print the verdict.
    #[arg(long, value_name = "NAME")]
    pub gpu: Option<String>,
    /// `--preflight=strict` refuses to probe when even --min does not fit by the
    /// estimate (exit 2); `warn` (the default) prints the verdict and probes.
    #[arg(long, value_enum, default_value_t = PreflightMode::Warn, num_args = 0..=1, require_equals = true, default_missing_value = "warn")]
    pub preflight: PreflightMode,
    /// Probe without the preflight estimate.
    #[arg(long)]
    pub no_preflight: bool,
    /// After forwarding a signal to a trial, wait this long before killing its
    /// process tree (the schedulers' default: Kubernetes and SLURM give 30 s).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub grace: String,
    /// The command to probe, after `--` (required: without it the command's own
    /// flags would be read as oomkit's).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Also write everything the command prints to FILE.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Write a self-contained HTML report (timeline, explanation, fixes) to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// PyTorch programs: record the allocator's history and dump a memory snapshot
    /// at the first OOM (through a generated sitecustomize.py on PYTHONPATH).
    #[arg(long)]
    pub snapshot_on_oom: bool,
    /// Before launching, estimate what the command runs (when oomkit reads it, see
    /// docs/preflight.md) on this GPU (default: the first GPU the driver reports)
    /// and print the verdict.
    #[arg(long, value_name = "NAME")]
    pub gpu: Option<String>,
    /// `--preflight=strict` refuses to launch a command the estimate says does not
    /// fit (exit 2); `warn` (the default) prints the verdict and launches.
    #[arg(long, value_enum, default_value_t = PreflightMode::Warn, num_args = 0..=1, require_equals = true, default_missing_value = "warn")]
    pub preflight: PreflightMode,
    /// Launch without the preflight estimate.
    #[arg(long)]
    pub no_preflight: bool,
    /// With --snapshot-on-oom: keep the snapshot (and print its path) instead of
    /// removing it after the analysis.
    #[arg(long, requires = "snapshot_on_oom")]
    pub keep_snapshot: bool,
    /// After forwarding a signal to the command, wait this long before killing its
    /// process tree (the schedulers' default: Kubernetes and SLURM give 30 s).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub grace: String,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

#[derive(Debug, clap::Args)]
pub struct LeaksArgs {
    /// Step boundaries to run before the report (the program is then ended).
    #[arg(long, value_name = "N", default_value_t = oomkit_leaks::DEFAULT_STEPS,
          value_parser = clap::value_parser!(u64).range(oomkit_leaks::MIN_STEPS..=oomkit_leaks::MAX_STEPS))]
    pub steps: u64,
    /// Count calls of this function as the steps instead: `module:function`
    /// (`__main__:train_step`, `mypkg.loop:Trainer.step`).
    #[arg(long, value_name = "MODULE:FUNCTION", value_parser = parse_marker)]
    pub marker: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// After forwarding a signal to the command, wait this long before killing its
    /// process tree.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub grace: String,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `module:function`, both dotted Python identifiers.
fn parse_marker(s: &str) -> Result<String, String> {
    let dotted = |p: &str| {
        !p.is_empty()
            && p.split('.').all(|w| {
                let mut c = w.chars();
                c.next().is_some_and(|f| f == '_' || f.is_alphabetic())
                    && c.all(|x| x == '_' || x.is_alphanumeric())
            })
    };
    match s.split_once(':') {
        Some((m, f)) if dotted(m) && dotted(f) => Ok(s.to_owned()),
        _ => Err("expected MODULE:FUNCTION, e.g. __main__:train_step".to_owned()),
    }
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    pub command: Option<SnapshotCommand>,
    /// The snapshot pickle.
    #[arg(required = true)]
    pub file: Option<PathBuf>,
    /// Only this device.
    #[arg(long)]
    pub device: Option<i64>,
    /// How many sites and segments to list.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub top: u64,
    /// Also write a self-contained HTML report (timeline, segment map, sites) to this path.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// What grew between two snapshots, by site (bytes and counts, A → B).
    Diff(SnapshotDiffArgs),
}

#[derive(Debug, clap::Args)]
pub struct SnapshotDiffArgs {
    /// The earlier snapshot.
    pub a: PathBuf,
    /// The later snapshot.
    pub b: PathBuf,
    /// Only this device.
    #[arg(long)]
    pub device: Option<i64>,
    /// How many sites to list (human output).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub top: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Clone, clap::Args)]
pub struct EstimateArgs {
    /// Catalogue id or alias, config.json path, or a folder with a config.json.
    #[arg(required_unless_present_any = ["params", "list_models", "list_gpus", "command"])]
    pub model: Option<String>,
    /// The command you run (after `--`): its launcher, arguments and the config
    /// files it names are read as the setup (docs/preflight.md); oomkit flags
    /// given before `--` override what it says.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// A bare decoder of this many parameters (`7B`, `350M`) instead of MODEL.
    #[arg(long, conflicts_with = "model")]
    pub params: Option<String>,
    /// Fetch MODEL's config.json and safetensors headers (never the weights) from the
    /// Hugging Face Hub when it is not in the local cache; honours HF_ENDPOINT, HF_TOKEN
    /// and HF_HUB_OFFLINE.
    #[arg(long, conflicts_with = "params")]
    pub hub: bool,
    /// With --params: number of layers.
    #[arg(long)]
    pub layers: Option<u64>,
    /// With --params: hidden size.
    #[arg(long)]
    pub hidden: Option<u64>,
    /// With --params: attention heads.
    #[arg(long)]
    pub heads: Option<u64>,
    /// With --params: key/value heads (GQA).
    #[arg(long)]
    pub kv_heads: Option<u64>,
    /// With --params: vocabulary size.
    #[arg(long)]
    pub vocab: Option<u64>,
    /// With --params: MLP intermediate size.
    #[arg(long)]
    pub intermediate: Option<u64>,
    /// What runs.
    #[arg(long, value_enum, default_value_t = Workload::Infer)]
    pub task: Workload,
    /// Which parameters train (--task train; default full).
    #[arg(long, value_enum)]
    pub method: Option<Method>,
    /// Precision: pure half keeps weights, grads and states in half; mixed keeps fp32
    /// weights and states with autocast activations. Default for training: what
    /// transformers loads (4.x: fp32 weights, bf16 autocast assumed; 5.x: the config's
    /// dtype), else bf16; image models: the pipeline's `torch_dtype` (default fp16 for
    /// SD 1.5/SDXL, bf16 for FLUX).
    #[arg(long, value_enum)]
    pub precision: Option<Precision>,
    /// Training without --precision: the autocast the launch uses (bf16=True, fp16=True
    /// or none); the weights' dtype follows the transformers version.
    #[arg(long, value_enum, value_name = "DTYPE")]
    pub autocast: Option<oomkit_estimate::versions::Autocast>,
    /// Where the frameworks' versions come from: a lock file (uv.lock, poetry.lock,
    /// pylock.toml), pinned requirements or `pip freeze` output (`-`: standard input),
    /// or `python` (importlib.metadata of the python3 on PATH). Default: the active
    /// environment's packages (VIRTUAL_ENV, CONDA_PREFIX), then uv.lock, poetry.lock,
    /// pylock.toml, requirements.txt in the current directory.
    #[arg(long, value_name = "FILE|python")]
    pub versions: Option<String>,
    /// Weight quantization (qlora implies nf4; default: the checkpoint's own, e.g. FP8
    /// for DeepSeek-V3, MXFP4 for gpt-oss, else none). Image models: the UNet/transformer
    /// and the T5 encoder (int8, nf4, nf4-dq: bitsandbytes; fp8: torchao). --engine
    /// llama.cpp without a .gguf file: the GGUF type (f16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0).
    #[arg(long, value_enum)]
    pub quant: Option<QuantChoice>,
    /// Optimizer (--task train; default adamw).
    #[arg(long, value_enum)]
    pub optimizer: Option<Optimizer>,
    /// Micro-batch size.
    #[arg(long, alias = "per_device_train_batch_size", alias = "per-device-train-batch-size", default_value_t = setup::DEFAULT_BATCH, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
    /// Tokens per sample (training) or prompt tokens (inference).
    #[arg(long, alias = "max_seq_length", alias = "max_length", default_value_t = setup::DEFAULT_SEQ, value_parser = clap::value_parser!(u64).range(1..))]
    pub seq: u64,
    /// Generated tokens (--task infer; default 0).
    #[arg(long)]
    pub new_tokens: Option<u64>,
    /// Gradient (activation) checkpointing.
    #[arg(
        long,
        alias = "gradient_checkpointing",
        alias = "gradient-checkpointing"
    )]
    pub grad_checkpointing: bool,
    /// Activation checkpointing: none, full (what --grad-checkpointing means) or
    /// selective (torchtitan's and torchtune's; the policy is --ac-option).
    #[arg(long, value_enum, alias = "ac-mode", alias = "ac_mode")]
    pub checkpointing: Option<oomkit_estimate::selective::Checkpointing>,
    /// With --checkpointing selective: `op` (torchtitan's op-level policy: matmul and
    /// attention outputs saved, every second matmul recomputed; the default) or a number
    /// k (every k-th layer checkpointed: torchtune's `ac_option`).
    #[arg(long, alias = "ac_option", value_name = "op|K", value_parser = parse_ac_option)]
    pub ac_option: Option<oomkit_estimate::selective::SelectiveAc>,
    /// torchtune's activation offloading (`enable_activation_offloading`): saved
    /// activations move to the CPU; needs checkpointing.
    #[arg(
        long,
        alias = "enable_activation_offloading",
        alias = "enable-activation-offloading"
    )]
    pub activation_offloading: bool,
    /// The model code the setup runs on, where memory differs:
    /// `transformers@4.35` (before 4.36 generation rebuilds the KV cache each step;
    /// before 5 weights load in fp32 unless --precision is given), or `litgpt`
    /// (LitGPT's own model and fine-tuning loop: chunked head and cross-entropy in
    /// 16 bits, fused GELU, its LoRA, and bitsandbytes on every linear, the head's
    /// included). Default: the current transformers release.
    #[arg(long, value_name = "transformers[@VERSION]|litgpt", value_parser = parse_stack)]
    pub stack: Option<oomkit_estimate::stack::Stack>,
    /// The training loop is HF Trainer's, which drops the model output (and
    /// its logits) before backward; without it the loop is taken to hold
    /// `out = model(**batch)` through backward and the optimizer step.
    #[arg(long)]
    pub trainer: bool,
    /// PEFT's prepare_model_for_kbit_training ran on the bitsandbytes model
    /// (--method qlora or --quant int8/nf4): every 16-bit parameter cast to
    /// fp32 (embeddings, LM head, norms), fp32 residual stream and logits,
    /// and gradient checkpointing on, as its defaults do.
    #[arg(long)]
    pub kbit_upcast: bool,
    /// Gradient accumulation steps (--task train; default 1).
    #[arg(long, alias = "gradient_accumulation_steps", alias = "gradient-accumulation-steps", value_parser = clap::value_parser!(u64).range(1..))]
    pub grad_accum: Option<u64>,
    /// Attention kernel.
    #[arg(long, value_enum, default_value_t = Attention::Sdpa)]
    pub attention: Attention,
    /// LoRA rank (--method lora/qlora; default 8).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub lora_rank: Option<u64>,
    /// LoRA target modules: `q,v` (default), `all-linear` or a list (q,k,v,o,gate,up,down).
    #[arg(long)]
    pub lora_targets: Option<String>,
    /// KV-cache dtype (inference; default auto).
    #[arg(long, alias = "kv-cache-dtype", value_enum)]
    pub kv_dtype: Option<KvDtype>,
    /// The optimizer loops over parameters (torch `foreach=False`, torch 1.x) instead of
    /// the multi-tensor path.
    #[arg(long)]
    pub no_foreach: bool,
    /// CUDA version of the PyTorch build (`torch.version.cuda`, e.g. 11.8, 12.4; default:
    /// 12.2 or newer). Before 12.2 kernels load eagerly and the CUDA context takes about
    /// 1.3 GB instead of about 0.7 GiB.
    #[arg(long, value_name = "VERSION", value_parser = parse_cuda_version)]
    pub cuda: Option<(u64, u64)>,
    /// GPUs in all (default: tp × pp); the data-parallel degree is gpus / (tp × pp).
    /// Per-GPU numbers are reported.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub gpus: Option<u64>,
    /// Tensor-parallel degree (Megatron-style, with sequence parallelism; vLLM
    /// --tensor-parallel-size); must divide the attention heads.
    #[arg(long, visible_alias = "tensor-parallel-size", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub tp: u64,
    /// Pipeline-parallel degree (1F1B; micro-batches per step = --grad-accum).
    #[arg(long, visible_alias = "pipeline-parallel-size", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub pp: u64,
    /// DeepSpeed ZeRO stage (--task train; default 0).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub zero: Option<u8>,
    /// FSDP full shard (same memory as ZeRO-3).
    #[arg(long)]
    pub fsdp: bool,
    /// CPU offload (--task train; default none).
    #[arg(long, value_enum)]
    pub offload: Option<Offload>,
    /// FSDP's version with --fsdp: 2 (`fully_shard`, default) or 1
    /// (`FullyShardedDataParallel`).
    #[arg(long, value_name = "1|2", value_parser = clap::value_parser!(u8).range(1..=2))]
    pub fsdp_version: Option<u8>,
    /// A DeepSpeed config JSON (`zero_optimization`: stage, offload, buckets; the
    /// micro-batch and accumulation): its keys set the flags below unless given.
    #[arg(long, value_name = "FILE")]
    pub deepspeed: Option<String>,
    /// DeepSpeed `reduce_bucket_size` in elements (default 5e8; `auto`: hidden², as
    /// Hugging Face fills it).
    #[arg(long, value_name = "N|auto")]
    pub reduce_bucket_size: Option<Count>,
    /// DeepSpeed `stage3_prefetch_bucket_size` in elements (default 5e7; `auto`:
    /// 0.9·hidden²).
    #[arg(long, value_name = "N|auto")]
    pub prefetch_bucket_size: Option<Count>,
    /// DeepSpeed `stage3_param_persistence_threshold` in elements (default 1e5;
    /// `auto`: 10·hidden).
    #[arg(long, value_name = "N|auto")]
    pub param_persistence_threshold: Option<Count>,
    /// DeepSpeed `stage3_max_live_parameters` in elements (default 1e9).
    #[arg(long, value_name = "N")]
    pub max_live_parameters: Option<Count>,
    /// DeepSpeed `stage3_max_reuse_distance` in elements (default 1e9).
    #[arg(long, value_name = "N")]
    pub max_reuse_distance: Option<Count>,
    /// DeepSpeed `sub_group_size` in elements (default 1e9).
    #[arg(long, value_name = "N")]
    pub sub_group_size: Option<Count>,
    /// DeepSpeed `overlap_comm` (default: on for ZeRO-3, off for 1 and 2).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub overlap_comm: Option<bool>,
    /// DeepSpeed `contiguous_gradients` (default on).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub contiguous_gradients: Option<bool>,
    /// Inference engine (default: llama.cpp for a `.gguf` MODEL with --task infer/serve,
    /// else hf).
    #[arg(long, value_enum)]
    pub engine: Option<Engine>,
    /// llama.cpp: context size, llama-server's `-c` (default: the model's training
    /// context, as `-c 0`).
    #[arg(long, short = 'c', visible_alias = "n-ctx", value_parser = clap::value_parser!(u64).range(1..))]
    pub ctx_size: Option<u64>,
    /// llama.cpp: layers on the GPU, llama-server's `-ngl`: a number (the output layer
    /// counts as one) or `all` (default).
    #[arg(long, visible_alias = "ngl", alias = "gpu-layers")]
    pub n_gpu_layers: Option<String>,
    /// llama.cpp: flash attention, llama-server's `-fa` (default auto: on with CUDA).
    #[arg(long, value_enum)]
    pub flash_attn: Option<OnOff>,
    /// llama.cpp: KV cache type for K (default f16).
    #[arg(long, value_enum)]
    pub cache_type_k: Option<CacheType>,
    /// llama.cpp: KV cache type for V (default f16; quantized types need flash attention).
    #[arg(long, value_enum)]
    pub cache_type_v: Option<CacheType>,
    /// llama.cpp: logical batch, llama-server's `-b` (default 2048).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: Option<u64>,
    /// llama.cpp: physical batch, llama-server's `-ub` (default 512).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ubatch_size: Option<u64>,
    /// llama.cpp: server slots, llama-server's `-np` (default auto: 4 slots sharing one
    /// cache of --ctx-size cells; N splits it into N slots of --ctx-size / N).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub parallel: Option<u64>,
    /// vLLM: fraction of the GPU's memory the engine may use (default 0.9).
    #[arg(long)]
    pub gpu_memory_utilization: Option<f64>,
    /// vLLM: the context length each request may reach (default: the model's own
    /// context, as `vllm serve` takes it).
    #[arg(long)]
    pub max_model_len: Option<u64>,
    /// vLLM: sequences per step (default: vLLM's for the GPU, 1024 on H100/H200, else 256).
    #[arg(long)]
    pub max_num_seqs: Option<u64>,
    /// vLLM: tokens per step (default: vLLM's for the GPU, 8192 on H100/H200, else 2048).
    #[arg(long)]
    pub max_num_batched_tokens: Option<u64>,
    /// Image models: width in pixels (default: the model's native size).
    #[arg(long)]
    pub width: Option<u64>,
    /// Image models: height in pixels (default: the model's native size).
    #[arg(long)]
    pub height: Option<u64>,
    /// Image models: images per prompt (`num_images_per_prompt`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub images: Option<u64>,
    /// Image models: `pipe.enable_attention_slicing()`.
    #[arg(long)]
    pub attention_slicing: bool,
    /// Image models: `pipe.vae.enable_slicing()` (decode one image at a time).
    #[arg(long)]
    pub vae_slicing: bool,
    /// Image models: `pipe.vae.enable_tiling()` (decode in tiles).
    #[arg(long)]
    pub vae_tiling: bool,
    /// Image models: diffusers CPU offload (`model`: one component at a time;
    /// `sequential`: one module at a time).
    #[arg(long, value_enum)]
    pub cpu_offload: Option<CpuOffload>,
    /// Image models: load without the safety checker (`safety_checker=None`; SD 1.5).
    #[arg(long)]
    pub no_safety_checker: bool,
    /// GPU to check the fit against (see --list-gpus).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// List the embedded model catalogue and exit.
    #[arg(long)]
    pub list_models: bool,
    /// List the GPU catalogue and exit.
    #[arg(long)]
    pub list_gpus: bool,
}

impl EstimateArgs {
    /// The library's options: the flags as given, nothing defaulted.
    pub fn options(&self) -> Options {
        Options {
            model: self.model.clone(),
            params: self.params.clone(),
            shape: BareShape {
                layers: self.layers,
                hidden: self.hidden,
                heads: self.heads,
                kv_heads: self.kv_heads,
                vocab: self.vocab,
                intermediate: self.intermediate,
            },
            hub: self.hub,
            task: self.task,
            method: self.method,
            precision: self.precision,
            quant: self.quant,
            optimizer: self.optimizer,
            batch: self.batch,
            seq: self.seq,
            new_tokens: self.new_tokens,
            grad_checkpointing: self.grad_checkpointing,
            checkpointing: self.checkpointing,
            ac_option: self.ac_option,
            activation_offloading: self.activation_offloading,
            stack: self.stack,
            trainer: self.trainer,
            kbit_upcast: self.kbit_upcast,
            grad_accum: self.grad_accum,
            attention: self.attention,
            lora_rank: self.lora_rank,
            lora_targets: self.lora_targets.clone(),
            kv_dtype: self.kv_dtype,
            no_foreach: self.no_foreach,
            cuda: self.cuda,
            gpus: self.gpus,
            tp: self.tp,
            pp: self.pp,
            zero: self.zero,
            fsdp: self.fsdp,
            offload: self.offload,
            sharding: oomkit_estimate::sharding::ShardingFlags {
                fsdp_version: self.fsdp_version,
                reduce_bucket: self.reduce_bucket_size,
                prefetch_bucket: self.prefetch_bucket_size,
                persistence_threshold: self.param_persistence_threshold,
                max_live: self.max_live_parameters,
                max_reuse_distance: self.max_reuse_distance,
                sub_group: self.sub_group_size,
                overlap_comm: self.overlap_comm,
                contiguous_gradients: self.contiguous_gradients,
            },
            engine: self.engine,
            ctx_size: self.ctx_size,
            n_gpu_layers: self.n_gpu_layers.clone(),
            flash_attn: self.flash_attn,
            cache_type_k: self.cache_type_k,
            cache_type_v: self.cache_type_v,
            batch_size: self.batch_size,
            ubatch_size: self.ubatch_size,
            parallel: self.parallel,
            gpu_memory_utilization: self.gpu_memory_utilization,
            max_model_len: self.max_model_len,
            max_num_seqs: self.max_num_seqs,
            max_num_batched_tokens: self.max_num_batched_tokens,
            width: self.width,
            height: self.height,
            images: self.images,
            attention_slicing: self.attention_slicing,
            vae_slicing: self.vae_slicing,
            vae_tiling: self.vae_tiling,
            cpu_offload: self.cpu_offload,
            no_safety_checker: self.no_safety_checker,
            gpu: self.gpu.clone(),
            versions: oomkit_estimate::versions::Versions::default(),
            autocast: self.autocast,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Files or directories to lint; `-` reads standard input.
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,
    /// Rules to run: codes, prefixes (`OOM1`), names, categories (`memory`, `upgrade`,
    /// `advice`) or ALL (comma-separated or repeated); replaces the default set (the
    /// `memory` category).
    #[arg(long, value_delimiter = ',')]
    pub select: Option<Vec<String>>,
    /// Rules to run on top of the selected ones (`--extend-select upgrade`).
    #[arg(long, value_delimiter = ',')]
    pub extend_select: Vec<String>,
    /// Also run preview rules (new rules not yet proven on the precision benchmark).
    #[arg(long)]
    pub preview: bool,
    /// Rules to skip: codes, prefixes or names.
    #[arg(long, value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// Apply safe fixes in place (to standard output for `-`).
    #[arg(long)]
    pub fix: bool,
    /// Print a rule's documentation (`--explain OOM101`) and exit.
    #[arg(long, value_name = "CODE")]
    pub explain: Option<String>,
    /// Print a count per rule instead of each diagnostic.
    #[arg(long)]
    pub statistics: bool,
    /// The file name to report for standard input.
    #[arg(long, value_name = "PATH")]
    pub stdin_filename: Option<String>,
    /// Skip files larger than SIZE with a warning (`10MiB` by default, or
    /// `max-file-size` in `[tool.oomkit.lint]`); a device or FIFO longer than that is
    /// an error.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_file_size: Option<u64>,
}

fn parse_size(s: &str) -> Result<u64, String> {
    s.parse::<oomkit_core::Bytes>()
        .map(|b| b.0)
        .map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    /// `path:line:col: CODE message` and a `help:` line.
    Human,
    /// One JSON object (see README).
    Json,
    /// SARIF 2.1.0, for GitHub code scanning.
    Sarif,
    /// GitHub Actions workflow annotations.
    Github,
}

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// Log files to read; `-` or nothing reads standard input.
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Print the message families oomkit recognises, with an example of each.
    #[arg(long)]
    pub list_formats: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Text for people.
    Human,
    /// One JSON object (see README "JSON contract").
    Json,
}

/// What `run` does with a preflight estimate that does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PreflightMode {
    /// Print the verdict and launch.
    Warn,
    /// Refuse to launch (exit 2).
    Strict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// `11.8`, `12`, `12.4.1` → (major, minor).
fn parse_ac_option(v: &str) -> Result<oomkit_estimate::selective::SelectiveAc, String> {
    oomkit_estimate::selective::SelectiveAc::parse(v)
        .ok_or_else(|| format!("{v:?} is not `op` or a number of layers such as 2"))
}

fn parse_stack(v: &str) -> Result<oomkit_estimate::stack::Stack, String> {
    oomkit_estimate::stack::Stack::parse(v).ok_or_else(|| {
        format!("{v:?} is not a stack such as transformers, transformers@4.35 or litgpt")
    })
}

/// `on`/`off` (also `true`/`false`, as a DeepSpeed JSON writes them).
fn parse_on_off(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => Err(format!("{v:?} is not on or off")),
    }
}

fn parse_cuda_version(v: &str) -> Result<(u64, u64), String> {
    let mut parts = v.trim().split('.');
    let num = |p: Option<&str>| p.map(|p| p.parse::<u64>());
    match (num(parts.next()), num(parts.next())) {
        (Some(Ok(major)), None) => Ok((major, 0)),
        (Some(Ok(major)), Some(Ok(minor))) => Ok((major, minor)),
        _ => Err(format!("{v:?} is not a CUDA version such as 12.4")),
    }
}

/// The engines' single-dash spellings of `oomkit estimate`'s flags
/// (llama.cpp's `-ngl`, `-ub`, `-np`, `-ctk`, `-ctv`, `-fa`, `-b`; vLLM's `-tp`,
/// `-pp`), which clap cannot declare (a short flag is one character):
/// rewritten to the long flags within `estimate`'s own arguments, before a
/// `--` (what follows it is the user's command, untouched).
pub fn engine_spellings(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    const MAP: &[(&str, &str)] = &[
        ("-ngl", "--n-gpu-layers"),
        ("-ub", "--ubatch-size"),
        ("-np", "--parallel"),
        ("-ctk", "--cache-type-k"),
        ("-ctv", "--cache-type-v"),
        ("-fa", "--flash-attn"),
        ("-b", "--batch-size"),
        ("-tp", "--tp"),
        ("-pp", "--pp"),
    ];
    let mut in_estimate = false;
    let mut done = false;
    args.into_iter()
        .map(|a| {
            let Some(s) = a.to_str() else { return a };
            if done {
                return a;
            }
            if s == "--" {
                done = in_estimate;
                return a;
            }
            if !in_estimate {
                in_estimate = s == "estimate";
                return a;
            }
            let (flag, value) = match s.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (s, None),
            };
            match MAP.iter().find(|(from, _)| *from == flag) {
                Some((_, to)) => match value {
                    Some(v) => format!("{to}={v}").into(),
                    None => (*to).into(),
                },
                None => a,
            }
        })
        .collect()
}
