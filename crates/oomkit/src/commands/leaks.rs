//! `oomkit leaks`: run the command under `oomkit_probe`'s runner with the
//! leaks hook (`oomkit_leaks::HOOK`) in front of the `sitecustomize.py`
//! hook, read what the hook wrote, print the report. Exit status: 0 no leak,
//! 1 leaks, 2 bad arguments or a program that ended before its first steps
//! (with `oomkit explain`'s report of its output), 125 oomkit's own failure,
//! 126/127 the command cannot run / was not found; after SIGINT, SIGTERM or
//! SIGHUP it dies of that signal once the command is gone (as `run` does).

use std::ffi::OsString;
use std::io::{Read, Write};

use anyhow::Context;
use oomkit_leaks::trace::{MAX_TRACE_BYTES, Trace};
use oomkit_probe::CommandLine;
use oomkit_probe::hook::Hook;
use oomkit_probe::runner::{self, Exit, Finished, Killed};

use crate::cli::{ColorChoice, Format, LeaksArgs};
use crate::{interrupt, output};

/// Leaks found.
const LEAKS: u8 = 1;
/// Bad arguments, or the program ended before the steps could be counted.
const UNUSABLE: u8 = 2;

pub fn run(args: LeaksArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let grace = match crate::commands::probe::parse_duration("--grace", &args.grace) {
        Ok(g) => g,
        Err(e) => {
            output::print_error(&e);
            return Ok(UNUSABLE);
        }
    };
    let shown = CommandLine::new(args.command.clone()).display();
    let mut cmd = CommandLine::new(args.command);
    if std::env::var_os("PYTHONUNBUFFERED").is_none() {
        cmd.env
            .push((OsString::from("PYTHONUNBUFFERED"), OsString::from("1")));
    }
    let hook = Hook::install(Some(oomkit_leaks::HOOK))?;
    let record = hook.path("leaks.jsonl");
    let mut vars = vec![
        (oomkit_leaks::FILE_ENV, OsString::from(record.as_os_str())),
        (
            oomkit_leaks::STEPS_ENV,
            OsString::from(args.steps.to_string()),
        ),
    ];
    if let Some(m) = &args.marker {
        vars.push((oomkit_leaks::MARKER_ENV, OsString::from(m)));
    }
    cmd.env.extend(hook.env(&vars));
    let interrupts = interrupt::supervise()?;
    let json = args.format == Format::Json;
    let finished = match runner::run(
        &cmd,
        runner::Options {
            // JSON owns stdout: the program's output is not passed through.
            passthrough: !json,
            inherit_stdin: true,
            interrupt: Some(&interrupts),
            grace,
            ..runner::Options::default()
        },
    ) {
        Ok(f) => f,
        Err(e) => match super::run::spawn_failure(&e) {
            Some(code) => return Ok(code),
            None => return Err(e.into()),
        },
    };
    let trace = read_trace(&record)?;
    drop(hook);
    if let Some(s) = died_of_signal(&finished) {
        interrupt::die_of(s);
    }
    let mut err = output::stderr(color);
    if !trace.errors.is_empty() && trace.boundaries.is_empty() {
        for e in &trace.errors {
            writeln!(err, "oomkit leaks: the hook failed: {e}")?;
        }
    }
    let seen = trace.boundaries.len();
    let minimum = usize::try_from(oomkit_leaks::MIN_STEPS).unwrap_or(4);
    if seen < minimum {
        let why = if !trace.started {
            "it never imported torch or tensorflow in its main process (oomkit leaks follows PyTorch programs, and TensorFlow/Keras ones at a coarser grain)"
                .to_owned()
        } else if seen == 0 {
            "no step was seen: no optimizer step, no batch drawn from a DataLoader, no Keras batch, no call of --marker".to_owned()
        } else {
            format!(
                "only {seen} step(s) were seen, too few to tell growth from warm-up (at least {minimum}): give the program more steps or use --marker"
            )
        };
        writeln!(err, "oomkit leaks: `{shown}` {}; {why}", ended(&finished))?;
        explain_failure(&mut err, &finished)?;
        err.flush()?;
        return Ok(UNUSABLE);
    }
    let mut report = oomkit_leaks::analyse(&trace);
    relative_paths(&mut report);
    if !report.completed && finished.exit != Exit::Code(0) {
        writeln!(
            err,
            "oomkit leaks: `{shown}` {} after {seen} step(s); the report covers those",
            ended(&finished)
        )?;
        explain_failure(&mut err, &finished)?;
    }
    err.flush()?;
    drop(err);
    let mut out = output::stdout(color);
    if json {
        serde_json::to_writer_pretty(&mut out, &oomkit_leaks::render::json(&report, &shown))?;
        writeln!(out)?;
    } else {
        if !finished.tail.is_empty() && !finished.tail.ends_with(b"\n") {
            writeln!(out)?;
        }
        write!(out, "{}", oomkit_leaks::render::human(&report, &shown))?;
    }
    out.flush()?;
    Ok(if report.leaks.is_empty() { 0 } else { LEAKS })
}

/// Files under the working directory are shown relative to it, as typed.
fn relative_paths(report: &mut oomkit_leaks::Report) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let prefix = format!("{}/", cwd.display());
    let strip = |f: &mut String| {
        if let Some(rest) = f.strip_prefix(&prefix) {
            *f = rest.to_owned();
        }
    };
    for l in &mut report.leaks {
        strip(&mut l.file);
        for s in &mut l.sites {
            strip(&mut s.file);
        }
        if let Some(h) = &mut l.holder {
            strip(&mut h.file);
            if let Some(s) = &mut h.store {
                strip(&mut s.file);
            }
        }
    }
}

/// The hook's record, bounded.
fn read_trace(path: &std::path::Path) -> anyhow::Result<Trace> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Trace::default()),
        Err(e) => return Err(e).context("cannot read the hook's record"),
    };
    let mut bytes = Vec::new();
    file.take(MAX_TRACE_BYTES)
        .read_to_end(&mut bytes)
        .context("cannot read the hook's record")?;
    Ok(Trace::parse(&String::from_utf8_lossy(&bytes)))
}

/// `exited 1`, `was killed by signal 9`.
fn ended(f: &Finished) -> String {
    match f.exit {
        Exit::Code(c) => format!("exited {c}"),
        Exit::Signal(s) => format!("was killed by signal {s}"),
    }
}

/// What `oomkit explain` finds in the program's output, when it failed with
/// an error it recognises (an OOM, a traceback's exception).
fn explain_failure(err: &mut impl Write, f: &Finished) -> anyhow::Result<()> {
    if f.exit == Exit::Code(0) || f.report.events.is_empty() {
        return Ok(());
    }
    writeln!(err)?;
    write!(
        err,
        "{}",
        oomkit_explain::render::human(&f.report, "the program's output")
    )?;
    Ok(())
}

fn died_of_signal(f: &Finished) -> Option<i32> {
    match (f.killed, f.exit) {
        (Some(Killed::Interrupt(s)), _) if interrupt::reraised(s) => Some(s),
        (_, Exit::Signal(s)) if interrupt::reraised(s) => Some(s),
        _ => None,
    }
}
