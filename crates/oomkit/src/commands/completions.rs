//! `oomkit completions SHELL` and `oomkit man`: generated from the clap
//! definition itself (clap_complete, clap_mangen), so they list exactly the
//! subcommands and flags that exist.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use clap::CommandFactory;
use clap::builder::PossibleValuesParser;

use crate::cli::{Cli, ColorChoice};
use crate::output;

/// The command line as the completion scripts see it: clap's definition, plus
/// the names `estimate` accepts for its model and `--gpu` (the catalogue's ids
/// and short names, the GPU catalogue's ids) as the values to offer. Only the
/// scripts get these lists: parsing still accepts any path or hub id. Bash
/// falls back to file names when no name matches (`-o default`), so
/// `oomkit estimate ./conf<TAB>` still completes a path.
fn completion_command() -> clap::Command {
    let mut models: Vec<String> = Vec::new();
    if let Ok(listed) = oomkit_estimate::catalogue::list() {
        for m in listed {
            models.push(m.id.to_owned());
            models.push(m.alias);
        }
    }
    models.sort();
    models.dedup();
    let gpus: Vec<&'static str> = oomkit_core::gpus::GPUS.iter().map(|g| g.id).collect();
    Cli::command().mut_subcommand("estimate", |s| {
        s.mut_arg("model", |a| {
            a.value_parser(PossibleValuesParser::new(models))
        })
        .mut_arg("gpu", |a| a.value_parser(PossibleValuesParser::new(gpus)))
    })
}

pub fn completions(shell: clap_complete::Shell, color: ColorChoice) -> anyhow::Result<u8> {
    let mut cmd = completion_command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "oomkit", &mut out);
    let mut stdout = output::stdout(color);
    stdout.write_all(&out)?;
    stdout.flush()?;
    Ok(0)
}

/// The page of `oomkit` (no subcommand) or of one subcommand, named as the
/// main page's SEE ALSO names it (`oomkit-estimate(1)`).
fn page(subcommand: Option<&str>) -> anyhow::Result<clap_mangen::Man> {
    let mut cmd = Cli::command();
    cmd.build();
    let Some(name) = subcommand else {
        return Ok(clap_mangen::Man::new(cmd));
    };
    let Some(sub) = cmd.find_subcommand(name).cloned() else {
        let names: Vec<&str> = cmd
            .get_subcommands()
            .map(clap::Command::get_name)
            .filter(|n| *n != "help")
            .collect();
        bail!(
            "no man page for \"{name}\": the subcommands are {}",
            names.join(", ")
        );
    };
    let full = format!("oomkit-{}", sub.get_name());
    Ok(clap_mangen::Man::new(sub.name(full.clone()).bin_name(full)))
}

pub fn man(subcommand: Option<&str>, dir: Option<&Path>, color: ColorChoice) -> anyhow::Result<u8> {
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        let mut cmd = Cli::command();
        cmd.build();
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .filter(|n| n != "help")
            .collect();
        let mut written = vec![(None, "oomkit.1".to_owned())];
        written.extend(names.into_iter().map(|n| {
            let file = format!("oomkit-{n}.1");
            (Some(n), file)
        }));
        for (sub, file) in &written {
            let mut out = Vec::new();
            page(sub.as_deref())?.render(&mut out)?;
            let path = dir.join(file);
            std::fs::write(&path, out).with_context(|| format!("{}", path.display()))?;
        }
        return Ok(0);
    }
    let mut out = Vec::new();
    page(subcommand)?.render(&mut out)?;
    let mut stdout = output::stdout(color);
    stdout.write_all(&out)?;
    stdout.flush()?;
    Ok(0)
}
