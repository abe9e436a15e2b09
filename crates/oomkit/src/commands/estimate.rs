//! `oomkit estimate`: the flags become the library's `Options`, which
//! estimates whatever they ask for (`Options::estimate`: a text model, an
//! image pipeline, vLLM's pool or llama.cpp); this prints it, names the
//! library's settings by their flags in errors, and exits 1 when it does not
//! fit the chosen GPU.

use anyhow::bail;
use oomkit_estimate::knob::Knob;
use oomkit_estimate::options::ModelError;
use oomkit_estimate::resolve::{self, ResolveError, hub::HubError};
use oomkit_estimate::versions::{self, Versions};
use oomkit_estimate::{EstimateError, Options, catalogue};
use std::borrow::Cow;
use std::io::Write;

use crate::cli::{ColorChoice, EstimateArgs, Format};
use crate::output;

/// Runs the subcommand; errors come back as one line (the cause chain joined
/// with `: `), broken pipes untouched.
pub fn run(args: EstimateArgs, color: ColorChoice) -> anyhow::Result<u8> {
    run_to(args, output::stdout(color))
}

/// [`run`] writing to `out` (preflight reads the JSON it prints).
pub fn run_to(args: EstimateArgs, out: impl Write) -> anyhow::Result<u8> {
    run_inner(args, out).map_err(|e| {
        if output::is_broken_pipe(&e) {
            return e;
        }
        let parts: Vec<String> = e.chain().map(says).collect();
        anyhow::anyhow!(parts.join(": "))
    })
}

/// How the command line names a setting: its flag (README "`oomkit
/// estimate`"); the library's messages carry [`Knob`] markers.
pub fn flag(k: Knob) -> Cow<'static, str> {
    match k {
        Knob::ListModels => Cow::Borrowed("`oomkit estimate --list-models`"),
        k => Cow::Owned(format!("--{}", k.key())),
    }
}

/// One cause of an error, with the library's settings named by their flags.
fn says(e: &(dyn std::error::Error + 'static)) -> String {
    if let Some(e) = e.downcast_ref::<oomkit_estimate::SetupError>() {
        return e.message(&flag);
    }
    if let Some(e) = e.downcast_ref::<oomkit_estimate::ConfigError>() {
        return e.message(&flag);
    }
    if let Some(e) = e.downcast_ref::<catalogue::UnknownModel>() {
        return e.message(&flag);
    }
    if let Some(ResolveError::Unknown(e)) = e.downcast_ref::<ResolveError>() {
        return e.message(&flag);
    }
    e.to_string()
}

/// The error with the library's settings named by their flags, the causes
/// joined into one line where one of them needed it.
pub fn flagged(e: anyhow::Error) -> anyhow::Error {
    let parts: Vec<String> = e.chain().map(says).collect();
    if e.chain().map(ToString::to_string).eq(parts.iter().cloned()) {
        return e;
    }
    anyhow::anyhow!(parts.join(": "))
}

fn run_inner(args: EstimateArgs, mut out: impl Write) -> anyhow::Result<u8> {
    if args.list_models {
        for m in catalogue::list()? {
            writeln!(
                out,
                "{:<40} {:<16} {:>8}{}",
                m.id,
                m.alias,
                oomkit_estimate::model::human_count(m.params),
                if m.reconstructed {
                    "  (reconstructed config)"
                } else {
                    ""
                }
            )?;
        }
        out.flush()?;
        return Ok(0);
    }
    if args.list_gpus {
        for g in oomkit_core::gpus::GPUS {
            writeln!(
                out,
                "{:<22} {:<28} {:>10}",
                g.id,
                g.short_name,
                g.usable().to_string()
            )?;
        }
        out.flush()?;
        return Ok(0);
    }
    let mut opts = args.options();
    opts.versions = versions(args.versions.as_deref())?;
    let e = opts
        .estimate(sources(opts.hub), &flag)
        .map_err(|e| estimate_error(e, &opts))?;
    match args.format {
        Format::Json => e.write_json(&mut out)?,
        Format::Human => write!(out, "{}", e.human())?,
    }
    out.flush()?;
    Ok(if e.fits() == Some(false) { 1 } else { 0 })
}

/// The most bytes read from a lock file or a requirements file.
const MAX_VERSIONS_BYTES: u64 = 16 << 20;

/// The lock files read from the current directory when `--versions` is not
/// given, in this order (an earlier file's pin wins).
const LOCK_FILES: &[&str] = &["uv.lock", "poetry.lock", "pylock.toml", "requirements.txt"];

/// The frameworks' versions: from `--versions FILE` (`-`: standard input),
/// `--versions python` (importlib.metadata of the python3 on PATH), else the
/// active environment's installed packages (`VIRTUAL_ENV`, `CONDA_PREFIX`),
/// then the lock files of the current directory for what it does not have
/// (one that cannot be read is skipped: nobody named it).
pub fn versions(arg: Option<&str>) -> anyhow::Result<Versions> {
    match arg {
        Some("python") => python_versions(),
        Some("-") => {
            let bytes = crate::input::read_limited(
                "--versions - (standard input)",
                std::io::stdin().lock(),
                MAX_VERSIONS_BYTES,
            )?;
            let text = String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("--versions -: standard input is not UTF-8 text"))?;
            Ok(Versions::parse("pip freeze (standard input)", &text))
        }
        Some(path) => {
            let bytes =
                crate::input::read_file_limited(std::path::Path::new(path), MAX_VERSIONS_BYTES)
                    .map_err(|e| {
                        let parts: Vec<String> = e.chain().map(ToString::to_string).collect();
                        anyhow::anyhow!("--versions: {}", parts.join(": "))
                    })?;
            let text = String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("--versions: {path} is not UTF-8 text"))?;
            Ok(Versions::parse(path, &text))
        }
        None => {
            let mut v = active_environment().unwrap_or_default();
            for f in LOCK_FILES {
                let p = std::path::Path::new(f);
                if !p.is_file() {
                    continue;
                }
                if let Ok(bytes) = crate::input::read_file_limited(p, MAX_VERSIONS_BYTES)
                    && let Ok(text) = String::from_utf8(bytes)
                {
                    v.fill_from(Versions::parse(f, &text));
                }
            }
            Ok(v)
        }
    }
}

/// The most directory entries read while looking for installed packages.
const MAX_ENTRIES: usize = 200_000;

/// The versions installed in the active Python environment (`VIRTUAL_ENV`,
/// else `CONDA_PREFIX`), read from the names of its
/// `lib/python*/site-packages/NAME-VERSION.dist-info` folders (the layout
/// `importlib.metadata` reads; nothing runs); `None` without one.
fn active_environment() -> Option<Versions> {
    let (var, prefix) = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .find_map(|v| std::env::var_os(v).map(|p| (*v, p)))?;
    let lib = std::path::Path::new(&prefix).join("lib");
    let mut pins = String::new();
    for py in std::fs::read_dir(&lib).ok()?.flatten().take(64) {
        if !py.file_name().to_string_lossy().starts_with("python") {
            continue;
        }
        let Ok(site) = std::fs::read_dir(py.path().join("site-packages")) else {
            continue;
        };
        for e in site.flatten().take(MAX_ENTRIES) {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some((pkg, version)) = name
                .strip_suffix(".dist-info")
                .and_then(|stem| stem.rsplit_once('-'))
            {
                pins.push_str(&format!("{pkg}=={version}\n"));
            }
        }
    }
    let mut v = Versions::parse("site-packages", &pins);
    for p in &mut v.pins {
        p.from = format!("the active environment, {var}");
    }
    Some(v)
}

/// The script `--versions python` runs: one `NAME==VERSION` line per
/// installed package of [`versions::PACKAGES`].
const PYTHON_VERSIONS: &str = "import importlib.metadata as m, sys\nfor n in sys.argv[1:]:\n    try:\n        print(n + '==' + m.version(n))\n    except Exception:\n        pass\n";

/// How long `--versions python` waits for the interpreter.
const PYTHON_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

fn python_versions() -> anyhow::Result<Versions> {
    use std::process::{Command, Stdio};
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(PYTHON_VERSIONS)
        .args(versions::PACKAGES)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| anyhow::anyhow!("--versions python: cannot run python3: {e}"))?;
    let mut pipe = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("--versions python: no output pipe"))?;
    let reader = std::thread::spawn(move || {
        crate::input::read_limited("python3's output", &mut pipe, MAX_VERSIONS_BYTES)
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if start.elapsed() > PYTHON_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "--versions python: python3 did not answer within {} s",
                PYTHON_LIMIT.as_secs()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let out = reader
        .join()
        .map_err(|_| anyhow::anyhow!("--versions python: reading its output failed"))??;
    if !status.success() {
        bail!("--versions python: python3 exited with {status}");
    }
    let text = String::from_utf8_lossy(&out);
    let mut v = Versions::parse("python3", &text);
    for p in &mut v.pins {
        p.from = "python3 importlib.metadata".into();
    }
    Ok(v)
}

/// The library's error in the command line's words.
pub fn estimate_error(e: EstimateError, opts: &Options) -> anyhow::Error {
    match e {
        EstimateError::Setup(e) => e.into(),
        EstimateError::Model(e) => model_error(e, opts.model.as_deref()),
        EstimateError::LlamaModel(e) => super::llamacpp::model_error(e, opts),
        EstimateError::Llama(e) => super::llamacpp::flagged(e),
        EstimateError::Gpu(e) => e.into(),
    }
}

/// Where a model name is looked up: the local Hugging Face cache, and the
/// Hub when `hub` (its client is the binary's: the network is I/O).
pub fn sources(hub: bool) -> resolve::Sources {
    resolve::Sources {
        cache: resolve::hf_cache::dir(),
        // Asked for: the Hub's own config, before the catalogue's.
        hub: hub.then(|| Box::new(super::hub_client::Ureq::new()) as Box<dyn resolve::hub::Fetch>),
    }
}

/// A resolution error in the command line's words: `--hub` named where the
/// Hub was asked for or could help.
pub fn model_error(e: ModelError, name: Option<&str>) -> anyhow::Error {
    let e = match e {
        ModelError::Setup(e) => return e.into(),
        ModelError::Resolve(e) => e,
    };
    match e {
        ResolveError::Hub(HubError::Offline { var }) => anyhow::anyhow!(
            "--hub: {var} is set, so the Hugging Face Hub is not contacted (unset it, or download the model first: the local cache is read without --hub)"
        ),
        ResolveError::Hub(e @ HubError::InvalidRepo { .. }) => anyhow::anyhow!("--hub: {e}"),
        // A Hub-style id: say how to get its own config.
        ResolveError::Unknown(e @ catalogue::UnknownModel::NotFound { .. })
            if name.is_some_and(|n| n.contains('/')) =>
        {
            anyhow::anyhow!(
                "{}; or add --hub to fetch its config.json from the Hugging Face Hub",
                e.message(&flag)
            )
        }
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every setting the library names is a real `estimate` flag, so a
    /// message never points at a flag that does not exist.
    #[test]
    fn every_knob_is_an_estimate_flag() {
        let cli = crate::cli::Cli::command();
        let est = cli.find_subcommand("estimate");
        let longs: Vec<String> = est
            .map(|c| {
                c.get_arguments()
                    .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
                    .collect()
            })
            .unwrap_or_default();
        for k in Knob::ALL {
            let f = flag(*k);
            assert!(
                longs.iter().any(|l| f.contains(l.as_str())),
                "{k:?} is named {f}, not an estimate flag"
            );
        }
    }
}
