//! `oomkit run`: run the command with its output passed through byte for
//! byte; when it dies of an OOM, end (on stderr) with the report `oomkit
//! explain` gives for that output, then the memory timeline. Exits with the
//! command's own status (`timeout`'s and `env`'s contract: 125 oomkit's own
//! failure, 126 the command cannot run, 127 not found); after SIGINT, SIGTERM
//! or SIGHUP it dies of that signal once the command is gone.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use oomkit_explain::render;
use oomkit_nvml::{GpuReader, NvmlReader};
use oomkit_probe::CommandLine;
use oomkit_probe::hook::{self, Hook, SnapshotDir};
use oomkit_probe::report::{self, Page};
use oomkit_probe::runner::{self, Exit, Killed};

use crate::cli::{ColorChoice, RunArgs};
use crate::{interrupt, output};

/// The command was found but cannot be run (`timeout`, `env`, POSIX shells).
pub const CANNOT_RUN: u8 = 126;
/// The command was not found.
pub const NOT_FOUND: u8 = 127;

/// 126 or 127 for a command that could not be started, after saying why;
/// `None` for any other error (oomkit's own: 125).
pub fn spawn_failure(err: &oomkit_probe::Error) -> Option<u8> {
    let oomkit_probe::Error::Spawn { program, source } = err else {
        return None;
    };
    let code = if source.kind() == std::io::ErrorKind::NotFound {
        NOT_FOUND
    } else {
        CANNOT_RUN
    };
    let mut e = anstream::stderr();
    let _ = writeln!(e, "error: cannot run {program}: {source}");
    Some(code)
}

pub fn run(args: RunArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let grace = crate::commands::probe::parse_duration("--grace", &args.grace)?;
    if !args.no_preflight {
        super::preflight::before_launch(&args.command, args.gpu.as_deref(), args.preflight, color)?;
    }
    let cmd_shown = CommandLine::new(args.command.clone()).display();
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
    // A private folder per run (mkdtemp): every rank writes its own file there.
    let (hook, snapshot_dir) = if args.snapshot_on_oom {
        let h = Hook::install(None)?;
        let dir = SnapshotDir::create()?;
        cmd.env.extend(h.env(&[
            (hook::SNAPSHOT_ENV, OsString::from(dir.path().as_os_str())),
            (
                hook::MAX_ENTRIES_ENV,
                OsString::from(hook::DEFAULT_MAX_ENTRIES.to_string()),
            ),
        ]));
        (Some(h), Some(dir))
    } else {
        (None, None)
    };
    let interrupts = interrupt::supervise()?;
    // NVML when the driver is there: the process tree's GPU memory becomes the timeline.
    let gpu = NvmlReader::open().ok().map(RefCell::new);
    let finished = match runner::run(
        &cmd,
        runner::Options {
            passthrough: true,
            inherit_stdin: true,
            log: log.as_mut().map(|w| w as &mut dyn Write),
            interrupt: Some(&interrupts),
            grace,
            gpu: gpu.as_ref().map(|g| g as &RefCell<dyn GpuReader>),
            ..runner::Options::default()
        },
    ) {
        Ok(f) => f,
        Err(e) => match spawn_failure(&e) {
            Some(code) => return Ok(code),
            None => return Err(e.into()),
        },
    };
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
    // This run's snapshots, one per rank that ran out of memory; the first
    // (lowest rank) is analysed. They are removed with their folder unless
    // --keep-snapshot keeps it.
    let snapshots = snapshot_dir
        .as_ref()
        .map(SnapshotDir::snapshots)
        .unwrap_or_default();
    let snapshot = snapshots.first().cloned();
    let snapshot_text = match &snapshot {
        Some(p) => analyse_snapshot(p),
        None => Err(anyhow::anyhow!("no snapshot")),
    };
    let kept = match snapshot_dir {
        Some(d) if args.keep_snapshot && snapshot.is_some() => Some(d.keep()),
        _ => None,
    };
    let snapshot_cmd = snapshot
        .as_ref()
        .filter(|_| kept.is_some())
        .map(|p| format!("oomkit snapshot {}", p.display()));
    let oom = finished.report.events.iter().find(|e| e.is_oom);
    let failed = finished.exit != Exit::Code(0);
    let mut err = output::stderr(color);
    if let Some(Killed::Interrupt(sig)) = finished.killed {
        writeln!(
            err,
            "oomkit: signal {sig} forwarded to the command; {}",
            match finished.exit {
                Exit::Code(c) => format!("it exited {c}"),
                Exit::Signal(9) => format!(
                    "it was still running after --grace {}, so its processes were killed",
                    args.grace
                ),
                Exit::Signal(s) => format!("it died of signal {s}"),
            }
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
        if timeline.growth().is_some() {
            // Memory that climbs step after step until the OOM is a leak's shape.
            writeln!(
                err,
                "  a steady climb to the OOM is the shape of a leak: find what holds it with\n    oomkit leaks -- {}",
                cmd_shown
            )?;
        }
    }
    if let Some(p) = &snapshot {
        writeln!(
            err,
            "\nmemory snapshot (PyTorch allocator history at the OOM): {}",
            p.display()
        )?;
        for other in snapshots.iter().skip(1) {
            writeln!(err, "  another rank's snapshot: {}", other.display())?;
        }
        // Which lines of the program held the memory, from `oomkit snapshot`'s library.
        match &snapshot_text {
            Ok(text) => write!(err, "{text}")?,
            Err(e) => writeln!(err, "  cannot analyse it: {e:#}")?,
        }
        match &snapshot_cmd {
            Some(c) => writeln!(err, "  more (HTML, --top, diff): {c} --html snapshot.html")?,
            None => writeln!(
                err,
                "  the snapshot was removed after this analysis; --keep-snapshot keeps it"
            )?,
        }
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
                .and_then(|p| p.to_str())
                .map(|p| (p, snapshot_cmd.as_deref())),
            snapshot_report: snapshot_text.as_deref().ok(),
        });
        std::fs::write(path, page).with_context(|| format!("cannot write {}", path.display()))?;
    }
    // Stopped by a signal (oomkit's, forwarded, or the terminal's, which the
    // command shared): die of it, so the shell sees what it would have seen.
    let signal = match (finished.killed, finished.exit) {
        (Some(Killed::Interrupt(s)), _) if interrupt::reraised(s) => Some(s),
        (_, Exit::Signal(s)) if interrupt::reraised(s) => Some(s),
        _ => None,
    };
    if let Some(s) = signal {
        interrupt::die_of(s);
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
