//! Signals for the commands that run something: `monitor` stops on a flag;
//! `probe` and `run` (which supervise a child) record each signal with its
//! origin, so that the supervisor forwards it once, and after the child is
//! gone oomkit dies of the same signal (the shell then sees a death by
//! signal, and stops a `for` loop, as it would for the program itself).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use anyhow::Context;
use oomkit_probe::runner::Interrupts;
use signal_hook::consts::{SIGINT, SIGTERM};
#[cfg(unix)]
use signal_hook::{
    consts::{SIGHUP, SIGQUIT, SIGTSTP},
    iterator::{SignalsInfo, exfiltrator::WithOrigin},
    low_level::siginfo::Cause,
};

/// The signals that end `monitor` (Windows has SIGINT and SIGTERM only).
#[cfg(unix)]
const STOP: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];
#[cfg(not(unix))]
const STOP: [i32; 2] = [SIGINT, SIGTERM];

/// Registers the handlers; the flag holds the last signal's number (0: none).
pub fn install() -> anyhow::Result<Arc<AtomicUsize>> {
    let flag = Arc::new(AtomicUsize::new(0));
    for sig in STOP {
        let value = usize::try_from(sig).context("signal number")?;
        signal_hook::flag::register_usize(sig, Arc::clone(&flag), value)
            .with_context(|| format!("cannot handle signal {sig}"))?;
    }
    Ok(flag)
}

/// For a supervisor: SIGINT, SIGTERM, SIGHUP and SIGQUIT no longer end
/// oomkit; a thread records each one, and whether the terminal sent it (the
/// kernel's `SI_KERNEL` origin: the terminal signals its whole foreground
/// job, so a child in that job had it already). SIGTSTP (Ctrl-Z) stops the
/// command with oomkit ([`Interrupts::suspend`]).
#[cfg(unix)]
pub fn supervise() -> anyhow::Result<Arc<Interrupts>> {
    let interrupts = Arc::new(Interrupts::default());
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP])
        .context("cannot handle signals")?;
    let sink = Arc::clone(&interrupts);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for info in signals.forever() {
                if info.signal == SIGTSTP {
                    sink.suspend();
                } else {
                    sink.record(info.signal, matches!(info.cause, Cause::Kernel));
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(interrupts)
}

/// On Windows nothing is supervised (the runner says so), so nothing is
/// recorded.
#[cfg(not(unix))]
pub fn supervise() -> anyhow::Result<Arc<Interrupts>> {
    Ok(Arc::new(Interrupts::default()))
}

/// Signals after which oomkit dies of the same signal: those whose default
/// action is to terminate without a core dump, which a shell reads as "the
/// user stopped this" (bash stops a loop when its command dies of SIGINT).
pub fn reraised(signal: i32) -> bool {
    STOP.contains(&signal)
}

/// Flushes what oomkit printed and dies of `signal` (its default action);
/// returns only if that failed.
pub fn die_of(signal: i32) {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let _ = signal_hook::low_level::emulate_default_handler(signal);
}
