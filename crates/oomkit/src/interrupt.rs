//! Ctrl-C and friends for the commands that supervise a child (`probe`,
//! `run`): SIGINT, SIGTERM and SIGHUP set a flag instead of killing oomkit,
//! and the supervisor forwards the signal to the child's process group
//! (which, in its own group, does not get the terminal's Ctrl-C itself).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Registers the handlers; the flag holds the last signal's number (0: none).
pub fn install() -> anyhow::Result<Arc<AtomicUsize>> {
    let flag = Arc::new(AtomicUsize::new(0));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        let value = usize::try_from(sig).context("signal number")?;
        signal_hook::flag::register_usize(sig, Arc::clone(&flag), value)
            .with_context(|| format!("cannot handle signal {sig}"))?;
    }
    Ok(flag)
}
