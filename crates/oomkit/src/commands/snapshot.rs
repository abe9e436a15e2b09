//! `oomkit snapshot FILE` and `oomkit snapshot diff A B`: read the pickles
//! (streamed twice from disk through a buffer; never loaded whole), analyse,
//! render human text or JSON, and optionally write the HTML report.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, bail};
use oomkit_snapshot::{Options, Snapshot, html, render};

use crate::cli::{ColorChoice, Format, SnapshotArgs, SnapshotCommand, SnapshotDiffArgs};
use crate::output;

/// The JSON contract of `oomkit snapshot` (README "JSON contract").
#[derive(serde::Serialize)]
struct JsonReport<'a> {
    version: u32,
    file: &'a str,
    devices: &'a [oomkit_snapshot::DeviceReport],
}

/// The JSON contract of `oomkit snapshot diff`.
#[derive(serde::Serialize)]
struct JsonDiff<'a> {
    version: u32,
    a: &'a str,
    b: &'a str,
    devices: &'a [oomkit_snapshot::DeviceDiff],
}

/// Reads and decodes one snapshot: a regular file (its length known, streamed
/// through a buffer), or `-`, a pipe, `/dev/stdin` or `<(zcat …)`, read once as
/// a stream to its end. Errors name the input.
fn read(path: &Path) -> anyhow::Result<(String, Snapshot)> {
    if path.as_os_str() == "-" {
        let name = "standard input".to_string();
        let snap = oomkit_snapshot::load_stream(std::io::stdin())
            .with_context(|| format!("cannot read {name}"))?;
        return Ok((name, snap));
    }
    let name = path.display().to_string();
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {name}"))?;
    if meta.is_dir() {
        bail!("{name} is a directory, not a snapshot pickle");
    }
    let open = || File::open(path).map(|f| std::io::BufReader::with_capacity(1 << 16, f));
    let snap = if meta.is_file() {
        oomkit_snapshot::load(open, meta.len())
    } else {
        // A FIFO or a character device has no length: read it to its end.
        let f = open().with_context(|| format!("cannot read {name}"))?;
        oomkit_snapshot::load_stream(f)
    }
    .with_context(|| format!("cannot read {name}"))?;
    Ok((name, snap))
}

/// Bad input: one line on stderr naming the file, exit 2.
fn input_error(e: &anyhow::Error) -> u8 {
    output::print_input_error(e);
    2
}

pub fn run(args: SnapshotArgs, color: ColorChoice) -> anyhow::Result<u8> {
    if let Some(SnapshotCommand::Diff(d)) = args.command {
        return run_diff(d, color);
    }
    let Some(file) = args.file else {
        bail!("no snapshot file given");
    };
    let (name, snap) = match read(&file) {
        Ok(x) => x,
        Err(e) => return Ok(input_error(&e)),
    };
    let opts = Options {
        device: args.device,
        top: usize::try_from(args.top).unwrap_or(usize::MAX),
    };
    let report = match oomkit_snapshot::analyze(&snap, &opts) {
        Ok(r) => r,
        Err(e) => {
            return Ok(input_error(
                &anyhow::Error::new(e).context(format!("cannot analyse {name}")),
            ));
        }
    };
    drop(snap);
    if let Some(path) = &args.html {
        let f = File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
        let mut w = BufWriter::new(f);
        html::write(&report, &name, &mut w)
            .and_then(|()| w.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut out = output::stdout(color);
    match args.format {
        Format::Json => {
            let j = JsonReport {
                version: 1,
                file: &name,
                devices: &report.devices,
            };
            serde_json::to_writer_pretty(&mut out, &j)?;
            writeln!(out)?;
        }
        Format::Human => write!(out, "{}", render::human(&report, &name))?,
    }
    out.flush()?;
    Ok(if report.devices.iter().any(|d| !d.leaks.is_empty()) {
        1
    } else {
        0
    })
}

fn run_diff(args: SnapshotDiffArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let (an, a) = match read(&args.a) {
        Ok(x) => x,
        Err(e) => return Ok(input_error(&e)),
    };
    let (bn, b) = match read(&args.b) {
        Ok(x) => x,
        Err(e) => return Ok(input_error(&e)),
    };
    let diffs = match oomkit_snapshot::diff(&a, &b, args.device) {
        Ok(d) => d,
        Err(e) => {
            return Ok(input_error(
                &anyhow::Error::new(e).context(format!("cannot compare {an} and {bn}")),
            ));
        }
    };
    let mut out = output::stdout(color);
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(
                &mut out,
                &JsonDiff {
                    version: 1,
                    a: &an,
                    b: &bn,
                    devices: &diffs,
                },
            )?;
            writeln!(out)?;
        }
        Format::Human => write!(
            out,
            "{}",
            render::human_diff(
                &diffs,
                &an,
                &bn,
                usize::try_from(args.top).unwrap_or(usize::MAX)
            )
        )?,
    }
    out.flush()?;
    Ok(0)
}
