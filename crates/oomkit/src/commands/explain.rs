//! `oomkit explain`: read logs, explain every OOM, print human text or JSON.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use oomkit_explain::{Explainer, Report, formats, render};
use serde_json::json;

use crate::cli::{ColorChoice, ExplainArgs, Format};
use crate::{input, output};

/// The JSON contract: the report, each event tagged with the input it came
/// from (`source`), each reading too (`input`: a reading's `source` is the
/// output it was read from, `nvidia-smi`, `torch-memory-summary`, …).
#[derive(serde::Serialize)]
struct JsonReport<'a> {
    version: u32,
    events: Vec<SourcedEvent<'a>>,
    readings: Vec<SourcedReading<'a>>,
}

#[derive(serde::Serialize)]
struct SourcedEvent<'a> {
    #[serde(flatten)]
    event: &'a oomkit_explain::Event,
    source: &'a str,
}

#[derive(serde::Serialize)]
struct SourcedReading<'a> {
    #[serde(flatten)]
    reading: &'a oomkit_explain::Reading,
    input: &'a str,
}

const USAGE: &str = "oomkit explain: no log given, and standard input is a terminal.
  oomkit explain train.log            explain a log file (several files, or - for standard input)
  python train.py 2>&1 | oomkit explain
  pbpaste | oomkit explain            or paste, then Ctrl-D:  oomkit explain -
  oomkit explain --list-formats       the messages it recognises";

pub fn run(args: ExplainArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let mut out = output::stdout(color);
    if args.list_formats {
        list_formats(&mut out, args.format)?;
        return Ok(0);
    }
    // No file and standard input from a terminal: nothing is piped in, and
    // waiting for a paste without saying so looks like a hang. Say how to
    // use it (`-` still reads a paste from the terminal).
    if args.files.is_empty() && std::io::stdin().is_terminal() {
        let mut err = output::stderr(color);
        writeln!(err, "{USAGE}")?;
        return Ok(2);
    }
    let files = if args.files.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        args.files
    };
    let explainer = Explainer::new();
    let mut reports: Vec<(String, Report)> = Vec::new();
    let mut failed = false;
    for path in &files {
        let result = input::open(path).and_then(|inp| {
            let name = inp.name.clone();
            explainer
                .explain_reader(inp.reader)
                .with_context(|| format!("cannot read {name}"))
                .map(|r| (name, r))
        });
        match result {
            Ok(r) => reports.push(r),
            Err(e) => {
                output::print_input_error(&e);
                failed = true;
            }
        }
    }
    match args.format {
        Format::Json => {
            let events = reports
                .iter()
                .flat_map(|(name, r)| {
                    r.events.iter().map(move |event| SourcedEvent {
                        event,
                        source: name,
                    })
                })
                .collect();
            let readings = reports
                .iter()
                .flat_map(|(name, r)| {
                    r.readings.iter().map(move |reading| SourcedReading {
                        reading,
                        input: name,
                    })
                })
                .collect();
            let report = JsonReport {
                version: 1,
                events,
                readings,
            };
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        Format::Human => {
            for (i, (name, r)) in reports.iter().enumerate() {
                if i > 0 {
                    writeln!(out)?;
                }
                write!(out, "{}", render::human(r, name))?;
            }
        }
    }
    out.flush()?;
    if failed {
        return Ok(2);
    }
    // 0 when an OOM or a memory reading was explained, 1 when neither was found.
    Ok(if reports.iter().any(|(_, r)| r.explained()) {
        0
    } else {
        1
    })
}

fn list_formats(out: &mut impl Write, format: Format) -> anyhow::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(
                &mut *out,
                &json!({ "version": 1, "formats": formats::FORMATS }),
            )?;
            writeln!(out)?;
        }
        Format::Human => {
            let mut last = "";
            for f in formats::FORMATS {
                if f.framework != last {
                    writeln!(out, "\n{}", f.framework)?;
                    last = f.framework;
                }
                let tag = if f.is_oom {
                    ""
                } else {
                    "  (look-alike: not a device OOM)"
                };
                writeln!(out, "  {}{tag}\n      {}", f.id, f.example)?;
            }
        }
    }
    Ok(())
}
