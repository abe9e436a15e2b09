//! Turns a region's signals into findings: chains merged, context attached,
//! app/phase/GPU read from the surrounding log, duplicates folded.

use std::sync::LazyLock;

use oomkit_core::gpus;
use oomkit_core::remedies::Os;
use regex::Regex;

use crate::detail;
use crate::detect::{Chain, Fields, Kind, Signal, Status};
use crate::event::{App, Backend, Framework, GpuGuess, Phase};
use crate::normalize::Doc;

/// An error before diagnosis: the merged signals of one message.
#[derive(Debug, Clone)]
pub struct Finding {
    pub sig: Signal,
    /// Signal kinds merged into this finding.
    pub kinds: Vec<Kind>,
    /// 1-based input line of the first signal.
    pub line: u64,
    /// 1-based input line of the latest signal or copy folded in.
    pub last_line: u64,
    pub last_idx: usize,
    pub ranks: Vec<u32>,
    pub repeats: u32,
    pub app: Option<App>,
    pub phase: Option<Phase>,
    pub os: Option<Os>,
    pub gpu: Option<GpuGuess>,
    pub follows_line: Option<u64>,
    /// Lines of the readings (nvidia-smi, PyTorch counters) joined to it.
    pub reading_lines: Vec<u64>,
}

impl Finding {
    /// A finding of one signal, first seen at input line `line` (index `idx`
    /// in the document), before anything is folded into it.
    pub fn new(sig: Signal, line: u64, idx: usize) -> Finding {
        Finding {
            kinds: vec![sig.kind],
            line,
            last_line: line,
            last_idx: idx,
            ranks: Vec::new(),
            repeats: 1,
            app: None,
            phase: None,
            os: None,
            gpu: None,
            follows_line: None,
            reading_lines: Vec::new(),
            sig,
        }
    }
}

/// How many lines may separate two signals of one chain. TensorFlow prints
/// the BFC log, a dump of thousands of lines, then the Python exception.
fn chain_gap(chain: Chain) -> usize {
    match chain {
        Chain::Tf | Chain::Xla => 6000,
        _ => 16,
    }
}

fn compatible(a: &Signal, b: &Signal) -> bool {
    if let (Some(x), Some(y)) = (a.fields.device, b.fields.device)
        && x != y
    {
        return false;
    }
    if let (Some(x), Some(y)) = (a.fields.requested, b.fields.requested)
        && x != y
        && a.rank == b.rank
    {
        return false;
    }
    !matches!(
        (a.status, b.status),
        (Status::NotOom(_), Status::Oom) | (Status::Oom, Status::NotOom(_))
    )
}

fn merge_opt<T: Clone>(old: &mut Option<T>, new: &Option<T>, new_wins: bool) {
    if new.is_some() && (old.is_none() || new_wins) {
        old.clone_from(new);
    }
}

/// Merges `b` into `a`: a field `a` lacks is taken from `b`, and a field
/// both state is `b`'s when `b_wins` (the primary message's numbers win).
/// Processes are taken whole when `a` has none; details are added per fact.
/// `b` is destructured, so a new field of [`Fields`] must be handled here
/// before this compiles (the fold once dropped private pools and details).
fn merge_fields(a: &mut Fields, b: &Fields, b_wins: bool) {
    let Fields {
        device,
        requested,
        total,
        free,
        allocated,
        reserved,
        unallocated,
        limit,
        private_pool,
        others,
        processes,
        tensor,
        op,
        details,
    } = b;
    merge_opt(&mut a.device, device, b_wins);
    merge_opt(&mut a.requested, requested, b_wins);
    merge_opt(&mut a.total, total, b_wins);
    merge_opt(&mut a.free, free, b_wins);
    merge_opt(&mut a.allocated, allocated, b_wins);
    merge_opt(&mut a.reserved, reserved, b_wins);
    merge_opt(&mut a.unallocated, unallocated, b_wins);
    merge_opt(&mut a.limit, limit, b_wins);
    merge_opt(&mut a.private_pool, private_pool, b_wins);
    merge_opt(&mut a.others, others, b_wins);
    merge_opt(&mut a.tensor, tensor, b_wins);
    merge_opt(&mut a.op, op, b_wins);
    if a.processes.is_empty() {
        a.processes.clone_from(processes);
    }
    for d in details {
        detail::add(&mut a.details, d.clone());
    }
}

fn merge(into: &mut Finding, s: Signal) {
    let wins = s.rank > into.sig.rank;
    merge_fields(&mut into.sig.fields, &s.fields, wins);
    if s.implied.is_some() && (into.sig.implied.is_none() || wins) {
        into.sig.implied.clone_from(&s.implied);
    }
    if matches!(into.sig.status, Status::Undetermined(_)) && s.status == Status::Oom {
        into.sig.status = Status::Oom;
    }
    if wins {
        into.sig.framework = s.framework;
        into.sig.format = s.format;
        into.sig.kind = s.kind;
        into.sig.message.clone_from(&s.message);
        into.sig.rank = s.rank;
        if s.version_hint.is_some() {
            into.sig.version_hint = s.version_hint;
        }
        if s.backend.is_some() {
            into.sig.backend = s.backend;
        }
    } else {
        if into.sig.version_hint.is_none() {
            into.sig.version_hint = s.version_hint;
        }
        if into.sig.backend.is_none() {
            into.sig.backend = s.backend;
        }
    }
    into.kinds.push(s.kind);
    into.last_idx = into.last_idx.max(s.line_idx);
}

/// Builds the findings of one region.
pub fn findings(doc: &Doc, signals: Vec<Signal>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let mut context: Vec<Signal> = Vec::new();
    for s in signals {
        if s.context_only {
            context.push(s);
            continue;
        }
        if let Some(cur) = out.last_mut() {
            // An undetermined message that names its phrase twice ("unhandled cuda
            // error … ncclUnhandledCudaError") is one message.
            let restated = cur.sig.kind == s.kind
                && matches!(s.status, Status::Undetermined(_))
                && s.line_idx <= cur.last_idx + 2;
            let s_line = doc.lines.get(s.line_idx).map_or(0, |l| l.line);
            if restated {
                cur.last_idx = cur.last_idx.max(s.line_idx);
                cur.last_line = cur.last_line.max(s_line);
                continue;
            }
            if cur.sig.chain == s.chain
                && !cur.kinds.contains(&s.kind)
                && s.line_idx <= cur.last_idx + chain_gap(s.chain)
                && compatible(&cur.sig, &s)
            {
                cur.last_line = cur.last_line.max(s_line);
                merge(cur, s);
                continue;
            }
        }
        let line = doc.lines.get(s.line_idx).map_or(0, |l| l.line);
        let rank = doc.lines.get(s.line_idx).and_then(|l| l.rank);
        let idx = s.line_idx;
        let mut f = Finding::new(s, line, idx);
        f.ranks = rank.into_iter().collect();
        out.push(f);
    }
    // Context (ComfyUI's tip, A1111's memory line) joins the nearest OOM.
    for c in context {
        let nearest = out
            .iter_mut()
            .filter(|f| f.sig.status == Status::Oom)
            .min_by_key(|f| f.last_idx.abs_diff(c.line_idx));
        match nearest {
            Some(f) => {
                f.app = Some(match c.framework {
                    Framework::A1111 => App::A1111,
                    _ => App::Comfyui,
                });
                for d in c.fields.details {
                    detail::add(&mut f.sig.fields.details, d);
                }
            }
            None if c.framework == Framework::Comfyui => {
                let line = doc.lines.get(c.line_idx).map_or(0, |l| l.line);
                let mut sig = c;
                sig.context_only = false;
                out.push(Finding {
                    kinds: vec![sig.kind],
                    line,
                    last_line: line,
                    last_idx: sig.line_idx,
                    ranks: Vec::new(),
                    repeats: 1,
                    app: Some(App::Comfyui),
                    phase: Some(Phase::Inference),
                    os: None,
                    gpu: None,
                    follows_line: None,
                    reading_lines: Vec::new(),
                    sig,
                });
            }
            None => {}
        }
    }
    out.sort_by_key(|f| f.line);
    let region = doc.spaced.as_str();
    let gpu_in_log = gpu_named_in(doc);
    // Hints are read once per region (they describe the whole traceback).
    let app = app_hint(region);
    let phase = phase_hint(region);
    let os = os_hint(region);
    let model = model_hint(region);
    let growth = growth_hint(region);
    let batch = int_hint(region, &BATCH);
    let beams = int_hint(region, &BEAMS);
    let quantized = QUANTIZED.iter().any(|n| region.contains(n));
    let quant = quant_hint(region, model.as_deref());
    let launcher = launcher_hint(region);
    for f in &mut out {
        let d = &mut f.sig.fields.details;
        if let Some(l) = &launcher
            && !f.ranks.is_empty()
        {
            detail::add(d, detail::Detail::Launcher(l.clone()));
        }
        if let Some(g) = &growth {
            detail::add(d, detail::Detail::Growth(g.clone()));
        }
        if f.sig.framework == Framework::Pytorch {
            if let Some(b) = batch {
                detail::add(d, detail::Detail::BatchSize(b));
            }
            if let Some(b) = beams {
                detail::add(d, detail::Detail::NumBeams(b));
            }
            if quantized {
                detail::add(d, detail::Detail::Quantization("bitsandbytes".into()));
            }
        }
        if matches!(
            f.sig.framework,
            Framework::Vllm | Framework::LlamaCpp | Framework::Tgi | Framework::Mlx
        ) || f.app == Some(App::Vllm)
        {
            if let Some(m) = &model {
                detail::add(&mut f.sig.fields.details, detail::Detail::Model(m.clone()));
            }
            if let Some(q) = &quant {
                detail::add(
                    &mut f.sig.fields.details,
                    detail::Detail::Quantization(q.clone()),
                );
            }
        }
        f.os = os.or(match f.sig.backend {
            Some(Backend::Mps | Backend::Metal) => Some(Os::Macos),
            _ => None,
        });
        if f.app.is_none() && f.sig.framework == Framework::Pytorch {
            f.app = app;
        }
        f.phase = f.phase.or(match f.sig.framework {
            Framework::Vllm | Framework::Tgi => Some(Phase::Serving),
            // ggml allocating the model's weights (`alloc_tensor_range`,
            // `unable to allocate CUDA0 buffer` under `load_tensors`) is
            // loading; its compute and KV buffers are inference. Not the
            // `llama_model_load` hint: `llama_model_loader:` lines begin
            // every llama.cpp log.
            Framework::LlamaCpp => Some(
                if f.sig
                    .fields
                    .details
                    .contains(&detail::Detail::Buffer(detail::BufferKind::ModelWeights))
                {
                    Phase::Loading
                } else {
                    Phase::Inference
                },
            ),
            _ => phase,
        });
        f.gpu = gpu_in_log.clone().or_else(|| gpu_from_total(&f.sig));
    }
    out
}

/// What the launcher printed about the ranks that failed, kept apart from
/// the ranks' own lines: DeepSpeed's `launch.py` (`[ERROR]
/// [launch.py:325:sigkill_handler] ['…', '--local_rank=1', …] exits with
/// return code = 1`, deepspeedai/DeepSpeedExamples#380), torchelastic's
/// `ChildFailedError` summary with its root cause (`rank : 2 (local_rank:
/// 2)`, `exitcode : 1`; torch/distributed/elastic/multiprocessing/errors,
/// hiyouga/LlamaFactory#6827) and the ranks it sent SIGTERM.
fn launcher_hint(region: &str) -> Option<String> {
    // Small patterns applied to a window after a fixed phrase: a bounded
    // repetition over the whole region would cost more to compile than the
    // scan of a large log.
    static DS_RANK: LazyLock<Option<Regex>> =
        LazyLock::new(|| crate::pattern::compile(r"'--local_rank=(\d{1,5})'").ok());
    static DS_CODE: LazyLock<Option<Regex>> =
        LazyLock::new(|| crate::pattern::compile(r"^exits with return code = (-?\d{1,4})").ok());
    static ROOT: LazyLock<Option<Regex>> = LazyLock::new(|| {
        crate::pattern::compile(
            r"rank ?: (\d{1,5}) \(local_rank: \d{1,5}\) exitcode ?: (-?\d{1,4})",
        )
        .ok()
    });
    const EXITS: &str = "exits with return code = ";
    if let Some(at) = region.find(EXITS) {
        let line_start = region
            .get(..at)
            .and_then(|b| b.rfind("sigkill_handler]"))
            .unwrap_or(at);
        let rank = region
            .get(line_start..at)
            .and_then(|w| DS_RANK.as_ref()?.captures_iter(w).last())
            .and_then(|c| c.get(1))
            .map(|m| m.as_str().to_string());
        let code = region
            .get(at..)
            .and_then(|w| DS_CODE.as_ref()?.captures(w))
            .and_then(|c| c.get(1))
            .map(|m| m.as_str().to_string());
        if let (Some(rank), Some(code)) = (rank, code) {
            return Some(format!(
                "deepspeed launcher: local rank {rank} exited with return code {code}; the other ranks were killed"
            ));
        }
    }
    if region.contains("ChildFailedError") {
        let sigterms = region.matches("closing signal SIGTERM").count();
        let mut s = "torchrun (torchelastic): ChildFailedError".to_string();
        let root = region
            .find("Root Cause (first observed failure)")
            .and_then(|at| region.get(at..))
            .map(|w| crate::detect::prefix(w, 600))
            .and_then(|w| ROOT.as_ref()?.captures(w));
        if let Some(c) = root {
            s.push_str(&format!(
                ", first failure rank {} (exit code {})",
                c.get(1).map_or("", |m| m.as_str()),
                c.get(2).map_or("", |m| m.as_str())
            ));
        }
        if sigterms > 0 {
            s.push_str(&format!(", {sigterms} other rank(s) sent SIGTERM"));
        }
        return Some(s);
    }
    None
}

fn app_hint(region: &str) -> Option<App> {
    const HINTS: &[(&[&str], App)] = &[
        (
            &[
                "ComfyUI",
                "comfy/",
                "comfy\\",
                "comfy_extras",
                "Error occurred when executing",
            ],
            App::Comfyui,
        ),
        (
            &[
                "stable-diffusion-webui",
                "modules/processing.py",
                "modules\\processing.py",
                "webui",
                "COMMANDLINE_ARGS",
            ],
            App::A1111,
        ),
        (&["diffusers"], App::Diffusers),
        (&["vllm/", "vllm\\", "EngineCore", "VllmWorker"], App::Vllm),
        (&["deepspeed"], App::Deepspeed),
        (
            &[
                "transformers/trainer.py",
                "transformers\\trainer.py",
                "trainer.train(",
            ],
            App::TransformersTrainer,
        ),
        (&["accelerate/", "accelerate\\"], App::Accelerate),
        (&["lightning"], App::Lightning),
        (
            &["transformers/", "transformers\\", "from_pretrained"],
            App::Transformers,
        ),
    ];
    HINTS
        .iter()
        .find(|(needles, _)| needles.iter().any(|n| region.contains(n)))
        .map(|(_, app)| *app)
}

/// `oomkit run`'s line when memory climbed steadily before the error
/// (`memory climbed steadily: +1.20 GiB/min, +40.00 MiB per printed figure
/// (2.00 GiB → 9.50 GiB)`).
fn growth_hint(region: &str) -> Option<String> {
    let at = region.find("memory climbed steadily: ")?;
    let rest = region.get(at + "memory climbed steadily: ".len()..)?;
    let end = rest.find(')').map_or(rest.len().min(120), |e| e + 1);
    rest.get(..end).map(str::to_string)
}

/// The batch size a traceback frame or command line shows.
static BATCH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    crate::pattern::compile(
        r"\b(?:per_device_(?:train|eval)_batch_size|batch_size|batch-size)\s*[=: ]\s*(\d{1,6})\b",
    )
    .ok()
});
/// `num_beams=N` in a `generate` call.
static BEAMS: LazyLock<Option<Regex>> =
    LazyLock::new(|| crate::pattern::compile(r"\bnum_beams\s*=\s*(\d{1,4})\b").ok());
/// A model loaded quantized by bitsandbytes.
const QUANTIZED: &[&str] = &[
    "load_in_4bit=True",
    "load_in_8bit=True",
    "BitsAndBytesConfig(",
    "bnb_config",
    "bnb_4bit",
];

fn int_hint(region: &str, re: &LazyLock<Option<Regex>>) -> Option<u64> {
    re.as_ref()?.captures(region)?.get(1)?.as_str().parse().ok()
}

/// The model a serving log names: vLLM's config dump (`model='org/name'`),
/// an `LLM(model="…")` call, llama.cpp's loader (`… from /path/x.gguf`),
/// or the command line (`-m`, `--model`, `vllm serve`).
fn model_hint(region: &str) -> Option<String> {
    // Unbounded, with the longest name checked below: a bounded repetition
    // of a Unicode class compiles one automaton per repeat (crate::pattern).
    static RES: LazyLock<Vec<(Regex, usize)>> = LazyLock::new(|| {
        [
            (r#"\bmodel=['"]([^'"\s]+)['"]"#, 200),
            (r"\bfrom (\S+\.gguf)\b", 300),
            (r"(?:^|\s)(?:-m|--model) (\S+)", 300),
            (r"\bvllm serve (\S+)", 200),
        ]
        .iter()
        .filter_map(|&(p, max)| Some((crate::pattern::compile(p).ok()?, max)))
        .collect()
    });
    RES.iter()
        .find_map(|(re, max)| {
            re.captures_iter(region)
                .filter_map(|c| c.get(1))
                .find(|m| m.as_str().chars().count() <= *max)
        })
        .map(|m| m.as_str().to_string())
}

/// A GGUF model's quantization: llama.cpp's `file type = Q4_K - Medium`
/// (read as `Q4_K_M`), else the tag in the model's file name.
fn quant_hint(region: &str, model: Option<&str>) -> Option<String> {
    static FTYPE: LazyLock<Option<Regex>> = LazyLock::new(|| {
        crate::pattern::compile(
            r"(?:file type|model ftype)\s*=\s*([A-Z0-9_]+)(?: - (Small|Medium|Large))?",
        )
        .ok()
    });
    static TAG: LazyLock<Option<Regex>> = LazyLock::new(|| {
        crate::pattern::compile(r"(?i)(?:^|[-_.])(IQ[1-4]_[A-Z]{1,3}|Q[2-8]_K(?:_[SML])?|Q[4-8]_[01]|BF16|F16|F32)\.gguf").ok()
    });
    if let Some(c) = FTYPE.as_ref().and_then(|re| re.captures(region))
        && let Some(t) = c.get(1)
    {
        let size = c.get(2).map_or("", |s| match s.as_str() {
            "Small" => "_S",
            "Medium" => "_M",
            _ => "_L",
        });
        return Some(format!("{}{size}", t.as_str()));
    }
    let m = model?;
    TAG.as_ref()
        .and_then(|re| re.captures(m))
        .and_then(|c| c.get(1))
        .map(|t| t.as_str().to_ascii_uppercase())
}

/// The operating system, from what only it prints: Windows drive paths and
/// batch files, macOS home and Homebrew paths, Linux home and system paths.
/// WSL counts as Linux (its paths are Linux paths).
fn os_hint(region: &str) -> Option<Os> {
    const HINTS: &[(&[&str], Os)] = &[
        (
            &[
                ":\\Users\\",
                "C:\\",
                "D:\\",
                "E:\\",
                "\\site-packages\\",
                "webui-user.bat",
                "python.exe",
                "ComfyUI_windows_portable",
            ],
            Os::Windows,
        ),
        (
            &[
                "/Users/",
                "/opt/homebrew/",
                "/Library/Frameworks/",
                "Darwin",
            ],
            Os::Macos,
        ),
        (
            &[
                "/home/",
                "/usr/lib/python",
                "/usr/local/lib/python",
                "/opt/conda/",
                "/root/",
            ],
            Os::Linux,
        ),
    ];
    HINTS
        .iter()
        .find(|(needles, _)| needles.iter().any(|n| region.contains(n)))
        .map(|(_, os)| *os)
}

fn phase_hint(region: &str) -> Option<Phase> {
    // Strongest evidence first: a backward pass or an optimizer step is
    // training whatever else the traceback shows; a frame in `generate`,
    // the compiler or the loader names the phase better than a script
    // called train.py does.
    const HINTS: &[(&[&str], Phase)] = &[
        (
            &[
                ".backward(",
                "backward()",
                "torch/autograd",
                // autograd's engine frame, `Variable._execution_engine.run_backward(`
                // (torch/autograd/graph.py), when the paste starts there.
                "run_backward(",
                "optimizer.step",
                "training_step",
                "train_step",
            ],
            Phase::Training,
        ),
        (
            &["generation/utils.py", "generation\\utils.py", ".generate("],
            Phase::Generation,
        ),
        (
            &[
                "torch/_inductor",
                "torch/_dynamo",
                "compile_fx",
                "XLA:TPU compile",
            ],
            Phase::Compiling,
        ),
        (
            &[
                "from_pretrained",
                "load_state_dict",
                "modeling_utils.py",
                "load_checkpoint",
                "torch.load(",
                "llama_model_load",
            ],
            Phase::Loading,
        ),
        (
            &[
                "evaluation_loop",
                "prediction_step",
                "validation_step",
                "eval_step",
                "evaluate(",
            ],
            Phase::Evaluation,
        ),
        (
            &[
                // a function or script named for training: `in train`,
                // `in train_one_epoch`, `train.py`, `train_cls.py`
                ", in train",
                "train.py",
                "train_",
                "trainer.py",
                "train_function",
                "fit(",
            ],
            Phase::Training,
        ),
        (
            &[
                "generate(",
                "inference_mode",
                "no_grad",
                "pipeline_",
                // transformers' pipelines; not a bare `__call__`, which every
                // module call in a training forward shows too (transformers'
                // GradientCheckpointingLayer.__call__, recorded on an H200:
                // bench/gpu/results/h200-2026-11-26/ooms/torch_transformers_forward.log).
                "pipelines/",
                "pipelines\\",
                "predict",
                "sample(",
                "decode(",
            ],
            Phase::Inference,
        ),
    ];
    HINTS
        .iter()
        .find(|(needles, _)| needles.iter().any(|n| region.contains(n)))
        .map(|(_, p)| *p)
}

fn gpu_named_in(doc: &Doc) -> Option<GpuGuess> {
    doc.lines
        .iter()
        .filter(|l| {
            let t = &l.text;
            t.contains("NVIDIA")
                || t.contains("GeForce")
                || t.contains("Tesla")
                || t.contains("Radeon")
                || t.contains("Instinct")
                || t.contains("name:")
        })
        .find_map(|l| gpus::find_in_text(&l.text))
        .map(|g| GpuGuess {
            id: g.id,
            name: g.short_name,
            from: "log",
        })
}

fn gpu_from_total(sig: &Signal) -> Option<GpuGuess> {
    if sig.backend == Some(crate::event::Backend::Mps) {
        return None;
    }
    let total = sig.fields.total?;
    let found = gpus::by_visible_total(total);
    match found.as_slice() {
        [g] => Some(GpuGuess {
            id: g.id,
            name: g.short_name,
            from: "total",
        }),
        _ => None,
    }
}

/// Whether two findings are the same error printed twice (every rank, a
/// retry, a logger and the exception, a truncated copy): same format and
/// status, and no stated number that differs.
fn same_error(a: &Finding, b: &Finding) -> bool {
    fn agree<T: PartialEq>(x: &Option<T>, y: &Option<T>) -> bool {
        match (x, y) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
    }
    let (x, y) = (&a.sig.fields, &b.sig.fields);
    a.sig.format == b.sig.format
        && a.sig.status == b.sig.status
        && a.sig.framework == b.sig.framework
        && a.sig.backend == b.sig.backend
        && agree(&x.device, &y.device)
        && agree(&x.requested, &y.requested)
        && agree(&x.total, &y.total)
        && agree(&x.free, &y.free)
        && agree(&x.allocated, &y.allocated)
        && agree(&x.reserved, &y.reserved)
        && agree(&x.tensor, &y.tensor)
        && (x.processes.is_empty() || y.processes.is_empty() || x.processes == y.processes)
}

/// Whether `b` is another rank of the job that raised `a`: both carry
/// rank prefixes, of different ranks, and state the same error with the
/// same request on a GPU of the same size, with as many processes listed
/// (another process on one rank's GPU is a different diagnosis). Each rank
/// has its own GPU, so
/// the device and the free figures may differ (DeepSpeed and torchrun
/// print every rank's traceback, one after the other).
fn same_job(a: &Finding, b: &Finding) -> bool {
    let (x, y) = (&a.sig.fields, &b.sig.fields);
    !a.ranks.is_empty()
        && !b.ranks.is_empty()
        && !b.ranks.iter().any(|r| a.ranks.contains(r))
        && a.sig.format == b.sig.format
        && a.sig.status == b.sig.status
        && a.sig.framework == b.sig.framework
        && a.sig.backend == b.sig.backend
        && x.requested.is_some()
        && x.requested == y.requested
        && x.total == y.total
        // A rank whose GPU another process shares is a case of its own.
        && x.processes.len() == y.processes.len()
}

/// At most this many ranks' figures are listed on one event (every rank
/// is still counted in `ranks`).
const MAX_RANK_COPIES: usize = 16;

/// `rank 1: GPU 1, 464.56 MiB free` for a rank's copy.
fn rank_copy(f: &Finding) -> Option<detail::Detail> {
    let rank = f.ranks.first()?;
    let x = &f.sig.fields;
    let mut s = format!("rank {rank}");
    if let Some(d) = x.device {
        s.push_str(&format!(": GPU {d}"));
    }
    if let Some(free) = x.free {
        s.push_str(&format!(", {free} free"));
    }
    Some(detail::Detail::RankCopy(s))
}

/// How many recent distinct errors a near copy is compared with.
const NEAR_WINDOW: usize = 64;

/// A copy folds into an earlier error only when it starts at most this many
/// lines after that error's latest copy: every rank's traceback of one crash,
/// or a retry loop that hits the same OOM step after step, is one event; the
/// same OOM again an hour (a million lines) later is a new event.
pub const FOLD_WINDOW: u64 = 5000;

/// Folds repeated findings (every rank, every retry) into one with a count,
/// and marks look-alikes that follow an OOM as its fallout.
pub fn fold(all: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    // Exact copies are found by key in O(1); near copies (a truncated paste, a
    // copy without the device) only among the last few distinct errors, which
    // keeps folding linear on logs with thousands of different OOMs.
    let mut exact: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for f in all {
        let key = format!(
            "{}|{:?}|{:?}|{:?}",
            f.sig.format, f.sig.status, f.sig.framework, f.sig.fields
        );
        let near = |i: &usize| {
            out.get(*i)
                .is_some_and(|e| f.line.saturating_sub(e.last_line) <= FOLD_WINDOW)
        };
        let found = exact.get(&key).copied().filter(near).or_else(|| {
            let from = out.len().saturating_sub(NEAR_WINDOW);
            (from..out.len())
                .rev()
                .filter(near)
                .find(|&i| out.get(i).is_some_and(|o| same_error(o, &f)))
        });
        let found = found.map(|i| (i, false)).or_else(|| {
            let from = out.len().saturating_sub(NEAR_WINDOW);
            (from..out.len())
                .rev()
                .filter(near)
                .find(|&i| out.get(i).is_some_and(|o| same_job(o, &f)))
                .map(|i| (i, true))
        });
        if let Some((e, other_rank)) = found.and_then(|(i, o)| Some((out.get_mut(i)?, o))) {
            e.last_line = e.last_line.max(f.last_line);
            e.repeats = e.repeats.saturating_add(f.repeats);
            if other_rank {
                // Another rank's GPU: its figures are its own, listed
                // beside the first rank's, not merged into them.
                if let Some(own) = rank_copy(e)
                    && !e
                        .sig
                        .fields
                        .details
                        .iter()
                        .any(|d| matches!(d, detail::Detail::RankCopy(_)))
                {
                    detail::add(&mut e.sig.fields.details, own);
                }
                let copies = e
                    .sig
                    .fields
                    .details
                    .iter()
                    .filter(|d| matches!(d, detail::Detail::RankCopy(_)))
                    .count();
                if copies < MAX_RANK_COPIES
                    && let Some(copy) = rank_copy(&f)
                {
                    detail::add(&mut e.sig.fields.details, copy);
                }
            } else {
                // A fuller copy fills what a truncated one missed.
                merge_fields(&mut e.sig.fields, &f.sig.fields, false);
            }
            for r in f.ranks {
                if !e.ranks.contains(&r) {
                    e.ranks.push(r);
                }
            }
            continue;
        }
        if out.len() >= crate::MAX_EVENTS {
            // Bounded: further distinct errors count on the last one.
            if let Some(last) = out.last_mut() {
                last.repeats = last.repeats.saturating_add(f.repeats);
            }
            continue;
        }
        exact.insert(key, out.len());
        out.push(f);
    }
    let mut last_oom: Option<u64> = None;
    for f in &mut out {
        match f.sig.status {
            Status::Oom => last_oom = Some(f.line),
            Status::NotOom(_) if f.kinds.contains(&Kind::IllegalMemoryAccess) => {
                f.follows_line = last_oom
            }
            _ => {}
        }
        f.ranks.sort_unstable();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detail::Detail;
    use crate::event::ProcessUse;
    use oomkit_core::Bytes;

    fn finding(line: u64, fields: Fields) -> Finding {
        let mut sig = crate::detect::signal(
            Kind::PytorchAllocator,
            Chain::Pytorch,
            Framework::Pytorch,
            "pytorch-caching-allocator-2.1",
        );
        sig.fields = fields;
        Finding::new(sig, line, 0)
    }

    /// A truncated first copy and a full second copy fold into one event
    /// that keeps every field of the full one (the fold once dropped
    /// private pools, other processes' figures and details).
    #[test]
    fn the_fold_keeps_every_field() {
        let cut = Fields {
            requested: Some(Bytes::mib(20)),
            device: Some(0),
            ..Fields::default()
        };
        let full = Fields {
            requested: Some(Bytes::mib(20)),
            device: Some(0),
            total: Some(Bytes::gib(24)),
            free: Some(Bytes::mib(10)),
            allocated: Some(Bytes::gib(20)),
            reserved: Some(Bytes::gib(21)),
            unallocated: Some(Bytes::gib(1)),
            limit: Some(Bytes::gib(22)),
            private_pool: Some(Bytes::gib(3)),
            others: Some(Bytes::gib(2)),
            processes: vec![ProcessUse {
                pid: Some(7),
                used_bytes: Bytes::gib(2),
                is_self: false,
            }],
            tensor: None,
            op: Some("matmul".into()),
            details: vec![Detail::At("x.cpp:1".into())],
        };
        let folded = fold(vec![finding(1, cut), finding(9, full.clone())]);
        assert_eq!(folded.len(), 1);
        let f = folded.first().expect("one");
        assert_eq!(f.repeats, 2);
        assert_eq!(f.sig.fields, full);
    }

    /// Merging a chain: the higher-ranked signal's numbers win, the other
    /// fills the gaps, details are added once per fact.
    #[test]
    fn merge_fields_rank_and_gaps() {
        let mut a = Fields {
            requested: Some(Bytes(1)),
            details: vec![Detail::MaxModelLen(1)],
            ..Fields::default()
        };
        let b = Fields {
            requested: Some(Bytes(2)),
            total: Some(Bytes(3)),
            details: vec![Detail::MaxModelLen(2), Detail::KvCacheTokens(5)],
            ..Fields::default()
        };
        let mut c = a.clone();
        merge_fields(&mut a, &b, false);
        assert_eq!(a.requested, Some(Bytes(1)));
        assert_eq!(a.total, Some(Bytes(3)));
        assert_eq!(
            a.details,
            vec![Detail::MaxModelLen(1), Detail::KvCacheTokens(5)]
        );
        merge_fields(&mut c, &b, true);
        assert_eq!(c.requested, Some(Bytes(2)));
    }
}
