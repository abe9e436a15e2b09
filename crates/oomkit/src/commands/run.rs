//! `oomkit run`: run the command with its output passed through byte for
//! byte; when it dies of an OOM, end (on stderr) with the report `oomkit
//! explain` gives for that output, then the memory timeline. Exits with the
//! command's own status.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use oomkit_explain::render;
use oomkit_nvml::{GpuReader, NvmlReader};
use oomkit_probe::CommandLine;
use oomkit_probe::hook::{self, Hook};
use oomkit_probe::report::{self, Page};
use oomkit_probe::runner::{self, Exit, Killed};

use crate::cli::{ColorChoice, RunArgs};
use crate::{interrupt, output};

pub fn run(args: RunArgs, color: ColorChoice) -> anyhow::Result<u8> {
    if !args.no_preflight {
        super::preflight::before_launch(&args.command, args.gpu.as_deref(), args.preflight, color)?;
    }
    let mut cmd = CommandLine::new(args.command);
    // Python block-buffers a pipe; unbuffered keeps the pass-through live.
    if std::env::var_os("PYTHONUNBUFFERED").is_none() {
        cmd.env
            .push((OsString::from("PYTHONUNBUFFERED"), OsString::from("1")));
    }
    let mut log = match &args.log {
        Some(p) => Some(BufWriter::new(
            File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => None,
    };
    let (hook, snapshot) = if args.snapshot_on_oom {
        let h = Hook::install()?;
        let path = snapshot_path();
        cmd.env.extend(h.env(&[
            (hook::SNAPSHOT_ENV, OsString::from(path.as_os_str())),
            (
                hook::MAX_ENTRIES_ENV,
                OsString::from(hook::DEFAULT_MAX_ENTRIES.to_string()),
            ),
        ]));
        (Some(h), Some(path))
    } else {
        (None, None)
    };
    let flag = interrupt::install()?;
    // NVML when the driver is there: the process tree's GPU memory becomes the timeline.
    let gpu = NvmlReader::open().ok().map(RefCell::new);
    let finished = runner::run(
        &cmd,
        runner::Options {
            passthrough: true,
            inherit_stdin: true,
            log: log.as_mut().map(|w| w as &mut dyn Write),
            interrupt: Some(&flag),
            gpu: gpu.as_ref().map(|g| g as &RefCell<dyn GpuReader>),
            ..runner::Options::default()
        },
    )?;
    // Measured beats printed: NVML's timeline when it caught the tree on a GPU.
    let timeline = if finished.gpu_timeline.samples.is_empty() {
        &finished.timeline
    } else {
        &finished.gpu_timeline
    };
    drop(hook);
    if let Some(mut w) = log {
        w.flush()
            .with_context(|| format!("cannot write {}", display(args.log.as_deref())))?;
    }
    let snapshot = snapshot.filter(|p| p.is_file());
    let snapshot_cmd = snapshot
        .as_ref()
        .map(|p| format!("oomkit snapshot {}", p.display()));
    let snapshot_text = match &snapshot {
        Some(p) => analyse_snapshot(p),
        None => Err(anyhow::anyhow!("no snapshot")),
    };
    let oom = finished.report.events.iter().find(|e| e.is_oom);
    let failed = finished.exit != Exit::Code(0);
    let mut err = output::stderr(color);
    if let Some(Killed::Interrupt(sig)) = finished.killed {
        writeln!(
            err,
            "oomkit: interrupted (signal {sig}); the command's processes were stopped"
        )?;
    }
    if failed && oom.is_some() {
        writeln!(err, "\n── oomkit: the command ran out of memory ──")?;
        write!(
            err,
            "{}",
            render::human(&finished.report, "the command's output")
        )?;
        writeln!(err)?;
        write!(err, "{}", report::timeline_text(timeline, oom))?;
    }
    if let (Some(p), Some(c)) = (&snapshot, &snapshot_cmd) {
        writeln!(
            err,
            "\nmemory snapshot (PyTorch allocator history at the OOM): {}",
            p.display()
        )?;
        // Which lines of the program held the memory, from `oomkit snapshot`'s library.
        match &snapshot_text {
            Ok(text) => write!(err, "{text}")?,
            Err(e) => writeln!(err, "  cannot analyse it: {e:#}")?,
        }
        writeln!(err, "  more (HTML, --top, diff): {c} --html snapshot.html")?;
    } else if args.snapshot_on_oom && failed && oom.is_some() {
        writeln!(
            err,
            "no memory snapshot was written (not a PyTorch program, CUDA unavailable, or the OOM was not the CUDA caching allocator's)"
        )?;
    }
    err.flush()?;
    if let Some(path) = &args.report {
        let status = match (finished.killed, finished.exit) {
            (Some(Killed::Interrupt(s)), _) => format!("interrupted (signal {s})"),
            (_, Exit::Code(c)) => format!("exit {c}"),
            (_, Exit::Signal(s)) => format!("killed by signal {s}"),
        };
        let tail = String::from_utf8_lossy(&finished.tail);
        let tail = last_lines(&tail, 80);
        let page = report::html(&Page {
            command: &cmd.display(),
            status: &status,
            seconds: finished.elapsed.as_secs_f64(),
            report: &finished.report,
            timeline,
            tail,
            snapshot: snapshot
                .as_ref()
                .zip(snapshot_cmd.as_deref())
                .and_then(|(p, c)| p.to_str().map(|p| (p, c))),
            snapshot_report: snapshot_text.as_deref().ok(),
        });
        std::fs::write(path, page).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(u8::try_from(finished.exit.shell_code() & 0xff).unwrap_or(1))
}

/// `oomkit snapshot`'s human report on the dumped file (streamed from disk).
fn analyse_snapshot(path: &Path) -> anyhow::Result<String> {
    let len = std::fs::metadata(path)?.len();
    let open = || File::open(path).map(|f| std::io::BufReader::with_capacity(1 << 16, f));
    let snap = oomkit_snapshot::load(open, len)?;
    let report = oomkit_snapshot::analyze(&snap, &oomkit_snapshot::Options::default())?;
    Ok(oomkit_snapshot::render::human(
        &report,
        &path.display().to_string(),
    ))
}

/// Where the snapshot goes: the temp folder, named so runs do not collide.
fn snapshot_path() -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "oomkit-oom-snapshot-{stamp}-{}.pickle",
        std::process::id()
    ))
}

fn display(p: Option<&Path>) -> String {
    p.map(|p| p.display().to_string()).unwrap_or_default()
}

/// The last `n` lines of `s`.
fn last_lines(s: &str, n: usize) -> &str {
    let mut count = 0;
    for (i, c) in s.char_indices().rev() {
        if c == '\n' && i + 1 < s.len() {
            count += 1;
            if count == n {
                return s.get(i + 1..).unwrap_or(s);
            }
        }
    }
    s
}
