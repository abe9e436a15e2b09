//! `oomkit completions SHELL` and `oomkit man`: generated from the clap
//! definition itself (clap_complete, clap_mangen), so they list exactly the
//! subcommands and flags that exist.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::{Cli, ColorChoice};
use crate::output;

pub fn completions(shell: clap_complete::Shell, color: ColorChoice) -> anyhow::Result<u8> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "oomkit", &mut out);
    let mut stdout = output::stdout(color);
    stdout.write_all(&out)?;
    stdout.flush()?;
    Ok(0)
}

pub fn man(color: ColorChoice) -> anyhow::Result<u8> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    let mut stdout = output::stdout(color);
    stdout.write_all(&out)?;
    stdout.flush()?;
    Ok(0)
}
