//! Runs one command as a supervised child and reads everything it prints.
//!
//! The process contract (what `timeout`, `env` and a shell promise, kept):
//! - **The terminal is left as the shell set it.** oomkit never calls
//!   `tcsetpgrp`. When the command may use the terminal (`run` with a
//!   terminal on stdin) it stays in oomkit's process group — the shell's job —
//!   so it reads the terminal when the job is in the foreground, is stopped
//!   with the job by Ctrl-Z or SIGTTIN, gets the terminal's Ctrl-C itself, and
//!   a pipeline peer (`oomkit run -- CMD | less`) keeps the terminal. Otherwise
//!   (`probe`, whose trials read `/dev/null`, and `run` without a terminal on
//!   stdin) it gets its own process group (`process_group(0)`), which the
//!   terminal never signals, so each signal reaches it once: forwarded by oomkit.
//! - **Stops are left alone.** A stopped command is not continued behind the
//!   user's back; a forwarded signal is followed by SIGCONT (as `timeout`
//!   does) so that a stopped command can act on it. Ctrl-Z reaches a command
//!   in its own group through [`Interrupts::suspend`], which stops it with
//!   oomkit and continues it with oomkit.
//! - **Each signal is forwarded once.** A signal oomkit receives is sent on to
//!   the command's processes, except one the terminal sent to the job the
//!   command shares with oomkit (it had it already). After a forwarded signal
//!   the command gets [`Options::grace`] (default [`DEFAULT_GRACE`]), then the
//!   whole tree is killed.
//! - **No process is left behind.** oomkit is a child subreaper (Linux,
//!   `PR_SET_CHILD_SUBREAPER`), so orphaned descendants are re-parented to it
//!   rather than to init. When the main process exits — noticed with
//!   `waitid(WNOWAIT)`, so it stays a zombie and its PID and group id cannot be
//!   reused — every descendant of oomkit (found through `/proc`) is killed, and
//!   its own group too when it has one, so helpers that inherited the pipes
//!   (data-loader workers) neither stall us nor survive; adopted zombies are
//!   reaped.
//! - **Bounded memory.** Output is read in 64 KiB chunks through bounded
//!   channels; only the last `tail_bytes` are kept. `oomkit_explain` reads
//!   the whole stream (its own memory is bounded), so an OOM is recognised
//!   however much the child printed after it.

// Windows has no supervisor (see `run`): the output plumbing is unused there.
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{self, IsTerminal, Read, Write};
#[cfg(unix)]
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStderr, ChildStdout, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::thread;
use std::time::{Duration, Instant};

#[cfg(unix)]
use nix::sys::signal::{Signal, kill, killpg};
#[cfg(unix)]
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
#[cfg(unix)]
use nix::unistd::Pid;
use oomkit_explain::{Explainer, Report};
use oomkit_nvml::GpuReader;

use crate::Error;
use crate::command::CommandLine;
use crate::timeline::{LineSplitter, Timeline};

/// Label of the NVML timeline.
pub const GPU_LABEL: &str = "GPU memory of the process tree (NVML)";

/// Default for [`Options::tail_bytes`]: the last 4 MiB of output.
pub const DEFAULT_TAIL_BYTES: usize = 4 << 20;

/// After the main process exits and its group is killed, the pipes hold what
/// was written before; read until they close, or until they have been quiet
/// this long (a process that left the group with `setsid` may hold them
/// forever) — quiet, not total, so a loaded machine does not lose the end of
/// the output, which is where the OOM message is.
pub const DRAIN_IDLE: Duration = Duration::from_secs(2);

/// The most time spent draining after the main process exited.
pub const DRAIN_MAX: Duration = Duration::from_secs(10);

/// After a forwarded signal, the command gets this long to exit before its
/// whole tree is killed: the default grace of the schedulers that send the
/// same SIGTERM — Kubernetes' `terminationGracePeriodSeconds` (30 s) and
/// SLURM's `KillWait` (30 s).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// Rounds of "list the descendants, kill them" after the main process exits:
/// a process that forks between the listing and the kill is caught by the
/// next round.
const KILL_ROUNDS: usize = 8;

/// How much of stderr alone is kept, besides the interleaved tail.
pub const STDERR_TAIL: usize = 64 * 1024;

/// Time between NVML samples of the process tree (NVML's own counters
/// update at about this rate; each sample also walks `/proc` once).
pub const GPU_INTERVAL: Duration = Duration::from_millis(200);

const CHUNK: usize = 64 * 1024;
/// Chunks in flight per channel (reader → supervisor, supervisor →
/// explainer): at most 1 MiB each, so a chatty command costs oomkit a few
/// MiB, not the output's size.
const CHANNEL_CHUNKS: usize = 16;
const POLL: Duration = Duration::from_millis(20);

/// How to run.
pub struct Options<'a> {
    /// Kill the group when the command runs longer than this.
    pub timeout: Option<Duration>,
    /// Copy the child's stdout/stderr to ours, byte for byte, as it arrives.
    pub passthrough: bool,
    /// Give the child our standard input (else `/dev/null`).
    pub inherit_stdin: bool,
    /// Also write everything the child prints here (`--log`).
    pub log: Option<&'a mut dyn Write>,
    /// Signals oomkit received (filled by the caller's signal handling); each
    /// is forwarded to the command once.
    pub interrupt: Option<&'a Interrupts>,
    /// After a forwarded signal, how long the command gets before its whole
    /// tree is killed.
    pub grace: Duration,
    /// How much of the output to keep (the tail).
    pub tail_bytes: usize,
    /// NVML, when the driver is there: the GPU memory of the command's process
    /// tree is sampled every [`GPU_INTERVAL`] into [`Finished::gpu_timeline`].
    pub gpu: Option<&'a RefCell<dyn GpuReader>>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            timeout: None,
            passthrough: false,
            inherit_stdin: false,
            log: None,
            interrupt: None,
            grace: DEFAULT_GRACE,
            tail_bytes: DEFAULT_TAIL_BYTES,
            gpu: None,
        }
    }
}

/// The signals oomkit received while supervising, written by its signal
/// handling (any thread) and read by the supervisor.
#[derive(Debug, Default)]
pub struct Interrupts {
    received: AtomicUsize,
    last: AtomicUsize,
    /// The process group of a command running in its own group (0: none),
    /// for [`Interrupts::suspend`].
    own_group: std::sync::atomic::AtomicI32,
}

/// Marks, in [`Interrupts`]' last signal, one the terminal sent (the kernel's
/// `SI_KERNEL` origin: Ctrl-C, Ctrl-\\, a hang-up) rather than a process.
const FROM_TERMINAL: usize = 1 << 16;

impl Interrupts {
    /// Records one received signal; `from_terminal` when the kernel sent it on
    /// the terminal's behalf (it then went to the whole foreground job).
    pub fn record(&self, signal: i32, from_terminal: bool) {
        let value = usize::try_from(signal).unwrap_or(0) & 0xffff;
        let value = if from_terminal {
            value | FROM_TERMINAL
        } else {
            value
        };
        self.last.store(value, Ordering::SeqCst);
        self.received.fetch_add(1, Ordering::SeqCst);
    }

    /// Ctrl-Z (SIGTSTP) for oomkit's caller: stops the command with oomkit,
    /// as one job. A command in its own group is not in the terminal's job,
    /// so it is stopped here (SIGTSTP to its group), oomkit stops itself
    /// (SIGSTOP, SIGTSTP's default action), and once continued (`fg`, `bg`)
    /// it continues the command's group. A command sharing oomkit's group was
    /// stopped by the terminal already. Call it from the thread that handles
    /// signals.
    pub fn suspend(&self) {
        #[cfg(unix)]
        self.suspend_unix();
    }

    #[cfg(unix)]
    fn suspend_unix(&self) {
        let group = self.own_group.load(Ordering::SeqCst);
        let group = (group > 0).then(|| Pid::from_raw(group));
        if let Some(g) = group {
            let _ = killpg(g, Signal::SIGTSTP);
        }
        let _ = nix::sys::signal::raise(Signal::SIGSTOP);
        if let Some(g) = group {
            let _ = killpg(g, Signal::SIGCONT);
        }
    }

    /// How many signals were received so far.
    pub fn count(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }

    /// The last signal received and whether the terminal sent it.
    pub fn last(&self) -> Option<(i32, bool)> {
        if self.count() == 0 {
            return None;
        }
        let v = self.last.load(Ordering::SeqCst);
        let signal = i32::try_from(v & 0xffff).ok()?;
        Some((signal, v & FROM_TERMINAL != 0))
    }
}

/// How the main process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl Exit {
    /// The status a shell would report: the code, or 128 + signal.
    pub fn shell_code(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => s.saturating_add(128),
        }
    }
}

/// Why oomkit killed the command, if it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Killed {
    /// It outlived the timeout.
    Timeout,
    /// oomkit received this signal and forwarded it (the command may still
    /// have exited by itself within the grace).
    Interrupt(i32),
}

/// Everything learned from one run.
#[derive(Debug)]
pub struct Finished {
    /// How the main process ended.
    pub exit: Exit,
    /// Set when oomkit killed it.
    pub killed: Option<Killed>,
    /// Wall-clock time from spawn to the main process's exit.
    pub elapsed: Duration,
    /// What `oomkit explain` finds in the whole output.
    pub report: Report,
    /// The last bytes of stdout and stderr, interleaved as they arrived.
    pub tail: Vec<u8>,
    /// The last bytes of stderr alone (at most [`STDERR_TAIL`]): where a
    /// failure's last words are, whatever the interleaving with stdout.
    pub stderr_tail: Vec<u8>,
    /// Total bytes the child printed.
    pub output_bytes: u64,
    /// Memory figures the child printed, with their times.
    pub timeline: Timeline,
    /// GPU memory of the command's process tree per NVML (empty without NVML,
    /// or when the tree held no GPU memory, or its PIDs are in another PID
    /// namespace than the driver's).
    pub gpu_timeline: Timeline,
}

enum Chunk {
    Data(usize, Vec<u8>),
    Eof,
}

/// Runs `cmd` to completion under `opts`: on Windows, [`Error::Unsupported`]
/// (the supervision above is built on POSIX process groups, signals and
/// `waitid`).
#[cfg(not(unix))]
pub fn run(_cmd: &CommandLine, _opts: Options<'_>) -> Result<Finished, Error> {
    Err(Error::Unsupported)
}

/// Runs `cmd` to completion under `opts`.
#[cfg(unix)]
pub fn run(cmd: &CommandLine, opts: Options<'_>) -> Result<Finished, Error> {
    let Some((program, args)) = cmd.argv.split_first() else {
        return Err(Error::NoCommand);
    };
    // The command shares the terminal's job only where it may use the
    // terminal; anywhere else its own group makes killing it atomic.
    let own_group = !(opts.inherit_stdin && io::stdin().is_terminal());
    become_subreaper();
    let mut command = std::process::Command::new(program);
    if own_group {
        command.process_group(0);
    }
    command
        .args(args)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .stdin(if opts.inherit_stdin {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = command.spawn().map_err(|source| Error::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    })?;
    let pid = match i32::try_from(child.id()) {
        Ok(p) => Pid::from_raw(p),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Pid(child.id()));
        }
    };
    let (tx, rx) = sync_channel::<Chunk>(CHANNEL_CHUNKS);
    let hang_up = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    spawn_readers(&mut child, &tx, &hang_up);
    drop(tx);
    let (etx, erx) = sync_channel::<Vec<u8>>(CHANNEL_CHUNKS);
    // oomkit and its child are this job: never "other processes" to stop.
    let own = [u64::from(std::process::id()), u64::from(child.id())];
    let explainer = thread::spawn(move || {
        Explainer::new()
            .with_own_pids(own)
            .explain_reader(ChannelReader::new(erx))
    });
    let mut sup = Supervisor {
        pid,
        own_group,
        pgid: if own_group {
            pid
        } else {
            nix::unistd::getpgrp()
        },
        adopted: Vec::new(),
        forwarded: 0,
        opts,
        start,
        etx: Some(etx),
        tail: VecDeque::new(),
        stderr_tail: VecDeque::new(),
        output_bytes: 0,
        lines: [LineSplitter::default(), LineSplitter::default()],
        closed: [false; 2],
        hang_up: Arc::clone(&hang_up),
        timeline: Timeline::default(),
        gpu_timeline: Timeline::default(),
        next_gpu: start,
        killed: None,
        interrupted_at: None,
        exited_at: None,
    };
    if let (true, Some(i)) = (own_group, sup.opts.interrupt) {
        i.own_group.store(pid.as_raw(), Ordering::SeqCst);
    }
    sup.supervise(&rx);
    if let Some(i) = sup.opts.interrupt {
        i.own_group.store(0, Ordering::SeqCst);
    }
    // Reap the main process; its tree was killed when it exited.
    let status = child.wait().map_err(Error::Wait)?;
    reap(&sup.adopted);
    let exit = match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    };
    let elapsed = sup.exited_at.unwrap_or_else(Instant::now) - start;
    for (i, s) in sup.lines.iter_mut().enumerate() {
        if let Some(line) = s.finish() {
            sup.timeline.observe(elapsed.as_secs_f64(), i, &line);
        }
    }
    drop(sup.etx.take());
    let report = explainer
        .join()
        .map_err(|_| Error::Explain)?
        .map_err(|_| Error::Explain)?;
    Ok(Finished {
        exit,
        killed: sup.killed,
        elapsed,
        report,
        tail: sup.tail.into_iter().collect(),
        stderr_tail: sup.stderr_tail.into_iter().collect(),
        output_bytes: sup.output_bytes,
        timeline: sup.timeline,
        gpu_timeline: sup.gpu_timeline,
    })
}

#[cfg(unix)]
struct Supervisor<'a> {
    pid: Pid,
    /// The command has its own process group (else it shares oomkit's).
    own_group: bool,
    /// The command's process group: its own, or oomkit's.
    pgid: Pid,
    /// Orphans of the command that oomkit adopted as a subreaper and killed:
    /// reaped at the end.
    adopted: Vec<Pid>,
    /// Received signals already dealt with.
    forwarded: usize,
    opts: Options<'a>,
    start: Instant,
    etx: Option<SyncSender<Vec<u8>>>,
    tail: VecDeque<u8>,
    stderr_tail: VecDeque<u8>,
    output_bytes: u64,
    lines: [LineSplitter; 2],
    /// Our stdout/stderr closed under us (broken pipe).
    closed: [bool; 2],
    /// Tells the pump of that stream to drop the command's pipe.
    hang_up: Arc<[AtomicBool; 2]>,
    timeline: Timeline,
    gpu_timeline: Timeline,
    next_gpu: Instant,
    killed: Option<Killed>,
    interrupted_at: Option<Instant>,
    exited_at: Option<Instant>,
}

#[cfg(unix)]
impl Supervisor<'_> {
    /// Reads output until both pipes close (or stay quiet, see [`DRAIN_IDLE`],
    /// after the main process exited), watching exit, timeout and interrupt.
    fn supervise(&mut self, rx: &Receiver<Chunk>) {
        let mut open = 2u8;
        let mut last_data = Instant::now();
        loop {
            match rx.recv_timeout(POLL) {
                Ok(Chunk::Data(stream, bytes)) => {
                    last_data = Instant::now();
                    self.output(stream, bytes);
                }
                Ok(Chunk::Eof) => open = open.saturating_sub(1),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => open = 0,
            }
            match self.exited_at {
                None => self.watch(),
                Some(t) => {
                    let quiet = last_data.max(t).elapsed() > DRAIN_IDLE;
                    if open == 0 || quiet || t.elapsed() > DRAIN_MAX {
                        return;
                    }
                }
            }
            if open == 0 && self.exited_at.is_none() {
                // Pipes closed before the process exited: keep watching it
                // without busy-waiting on a dead channel.
                thread::sleep(POLL);
            }
        }
    }

    /// One NVML sample of the process tree's GPU memory, when due.
    fn sample_gpu(&mut self) {
        let Some(reader) = self.opts.gpu else { return };
        let now = Instant::now();
        if now < self.next_gpu {
            return;
        }
        self.next_gpu = now + GPU_INTERVAL;
        let Ok(root) = u32::try_from(self.pid.as_raw()) else {
            return;
        };
        let tree = oomkit_nvml::procs::tree(root);
        let Ok(mut reader) = reader.try_borrow_mut() else {
            return;
        };
        let mut held: Option<u64> = None;
        for gpu in reader.read() {
            for p in gpu.processes {
                if tree.contains(&p.pid)
                    && let Some(b) = p.used_bytes
                {
                    held = Some(held.unwrap_or(0).saturating_add(b));
                }
            }
        }
        if let Some(b) = held {
            if self.gpu_timeline.label.is_none() {
                self.gpu_timeline.label = Some(GPU_LABEL.to_owned());
            }
            self.gpu_timeline
                .push(self.start.elapsed().as_secs_f64(), b);
        }
    }

    /// One step of watching the main process.
    fn watch(&mut self) {
        self.sample_gpu();
        // Exits only: a stopped command is left stopped (job control is the
        // shell's, and continuing it would fight a SIGTTIN).
        let exited = exited_unreaped(self.pid);
        if exited {
            self.exited_at = Some(Instant::now());
            self.kill_tree();
            return;
        }
        if self.killed.is_none() && self.opts.timeout.is_some_and(|t| self.start.elapsed() >= t) {
            self.killed = Some(Killed::Timeout);
            self.kill_tree();
            return;
        }
        self.forward_signals();
        if self
            .interrupted_at
            .is_some_and(|t| t.elapsed() >= self.opts.grace)
        {
            self.kill_tree();
        }
    }

    /// Forwards each signal received since the last look, once.
    fn forward_signals(&mut self) {
        let Some(interrupts) = self.opts.interrupt else {
            return;
        };
        let count = interrupts.count();
        if count <= self.forwarded {
            return;
        }
        self.forwarded = count;
        let Some((sig, from_terminal)) = interrupts.last() else {
            return;
        };
        // The terminal signals its whole foreground job: a command in our
        // group had this one already, and it decides what it means (a
        // debugger's Ctrl-C is no request to stop).
        if from_terminal && !self.own_group {
            return;
        }
        let signal = Signal::try_from(sig).unwrap_or(Signal::SIGTERM);
        if self.killed.is_none() {
            self.killed = Some(Killed::Interrupt(signal as i32));
        }
        if self.interrupted_at.is_none() {
            self.interrupted_at = Some(Instant::now());
        }
        self.signal_tree(signal);
        if !matches!(signal, Signal::SIGKILL | Signal::SIGCONT) {
            // A stopped command acts on the signal only once continued.
            self.signal_tree(Signal::SIGCONT);
        }
    }

    /// Sends `signal` to the command and all its descendants: its group
    /// when it has one, and each process of [`Procs::tree`] (also those
    /// that left the group, or were re-parented to oomkit).
    fn signal_tree(&self, signal: Signal) {
        if self.own_group {
            let _ = killpg(self.pid, signal);
        }
        let procs = Procs::read();
        for p in procs.tree(self.pid, self.pgid) {
            // Each process gets the signal once: the group's members had it
            // from `killpg`.
            let in_group = self.own_group && procs.group(p) == Some(self.pgid);
            if in_group || (p == self.pid && self.exited_at.is_some()) {
                continue;
            }
            let _ = kill(p, signal);
        }
    }

    /// Kills the command's whole tree, repeating while new processes appear
    /// (a fork between listing and killing). The main process, a zombie held
    /// by `WNOWAIT` once it exited, keeps its PID and group id reserved.
    fn kill_tree(&mut self) {
        if self.own_group {
            let _ = killpg(self.pid, Signal::SIGKILL);
        }
        let me = Pid::this();
        for _ in 0..KILL_ROUNDS {
            let procs = Procs::read();
            let alive: Vec<Pid> = procs
                .tree(self.pid, self.pgid)
                .into_iter()
                .filter(|&p| p != self.pid || self.exited_at.is_none())
                .filter(|&p| !procs.zombie(p))
                .collect();
            if alive.is_empty() {
                break;
            }
            for p in alive {
                let _ = kill(p, Signal::SIGKILL);
                if p != self.pid && procs.parent(p) == Some(me) && !self.adopted.contains(&p) {
                    self.adopted.push(p);
                }
            }
            if self.own_group {
                let _ = killpg(self.pid, Signal::SIGKILL);
            }
        }
    }

    /// One chunk of output: pass it through, log it, keep its tail, read
    /// memory figures from its lines, and feed the explainer.
    fn output(&mut self, stream: usize, bytes: Vec<u8>) {
        self.output_bytes = self
            .output_bytes
            .saturating_add(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
        if self.opts.passthrough && !self.closed.get(stream).copied().unwrap_or(true) {
            let written = if stream == 0 {
                write_now(&mut io::stdout().lock(), &bytes)
            } else {
                write_now(&mut io::stderr().lock(), &bytes)
            };
            // Our reader went away (`oomkit run -- yes | head -1`): close the
            // command's pipe too, so its next write fails (SIGPIPE or EPIPE) as
            // in a shell pipe — else it would write forever.
            if written.is_err_and(|e| e.kind() == io::ErrorKind::BrokenPipe) {
                if let Some(c) = self.closed.get_mut(stream) {
                    *c = true;
                }
                if let Some(flag) = self.hang_up.get(stream) {
                    flag.store(true, Ordering::SeqCst);
                }
            }
        }
        if let Some(log) = self.opts.log.as_mut() {
            let _ = log.write_all(&bytes);
        }
        keep_tail(&mut self.tail, &bytes, self.opts.tail_bytes);
        if stream == 1 {
            keep_tail(&mut self.stderr_tail, &bytes, STDERR_TAIL);
        }
        let t = self.start.elapsed().as_secs_f64();
        if let Some(splitter) = self.lines.get_mut(stream) {
            for line in splitter.push(&bytes) {
                self.timeline.observe(t, stream, &line);
            }
        }
        if let Some(etx) = &self.etx
            && etx.send(bytes).is_err()
        {
            self.etx = None;
        }
    }
}

#[cfg(unix)]
/// Makes oomkit a child subreaper (Linux): an orphaned descendant of the
/// command is re-parented to oomkit instead of init, so it is still found
/// (and killed) as oomkit's descendant. Elsewhere a no-op.
/// Whether `pid` (our child) has exited, leaving it a zombie
/// (`waitid(P_PID, WEXITED | WNOHANG | WNOWAIT)`, POSIX): its PID and group
/// id stay reserved until it is reaped. An error (no such child) counts as
/// exited.
fn exited_unreaped(pid: Pid) -> bool {
    use rustix::process::{WaitIdOptions, waitid};
    let Some(pid) = rustix::process::Pid::from_raw(pid.as_raw()) else {
        return true;
    };
    let flags = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    match waitid(rustix::process::WaitId::Pid(pid), flags) {
        Ok(Some(status)) => status.exited() || status.killed() || status.dumped(),
        Ok(None) => false,
        Err(_) => true,
    }
}

#[cfg(unix)]
fn become_subreaper() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
}

#[cfg(unix)]
/// One reading of `/proc`: each process's parent, group and whether it is
/// a zombie. Empty where there is no `/proc`.
struct Procs {
    /// pid → (ppid, pgid, zombie)
    table: std::collections::HashMap<i32, (i32, i32, bool)>,
}

#[cfg(unix)]
impl Procs {
    fn read() -> Procs {
        let mut table = std::collections::HashMap::new();
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for entry in dir.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<i32>().ok())
                else {
                    continue;
                };
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    continue;
                };
                // After the command name (which may hold spaces and parentheses):
                // state, ppid, pgrp.
                let Some((_, rest)) = stat.rsplit_once(')') else {
                    continue;
                };
                let mut f = rest.split_whitespace();
                let (Some(state), Some(ppid), Some(pgrp)) = (f.next(), f.next(), f.next()) else {
                    continue;
                };
                if let (Ok(ppid), Ok(pgrp)) = (ppid.parse(), pgrp.parse()) {
                    table.insert(pid, (ppid, pgrp, state == "Z"));
                }
            }
        }
        Procs { table }
    }

    fn parent(&self, pid: Pid) -> Option<Pid> {
        self.table
            .get(&pid.as_raw())
            .map(|&(pp, _, _)| Pid::from_raw(pp))
    }

    fn group(&self, pid: Pid) -> Option<Pid> {
        self.table
            .get(&pid.as_raw())
            .map(|&(_, g, _)| Pid::from_raw(g))
    }

    fn zombie(&self, pid: Pid) -> bool {
        self.table.get(&pid.as_raw()).is_some_and(|&(_, _, z)| z)
    }

    /// `root`, its descendants, and the descendants of oomkit's other
    /// children in group `pgid` (orphans of the command re-parented to
    /// oomkit). The command's other processes without `/proc`: `root` alone.
    fn tree(&self, root: Pid, pgid: Pid) -> Vec<Pid> {
        let me = std::process::id();
        let me = i32::try_from(me).unwrap_or(0);
        let mut children: std::collections::HashMap<i32, Vec<i32>> =
            std::collections::HashMap::new();
        for (&pid, &(ppid, _, _)) in &self.table {
            children.entry(ppid).or_default().push(pid);
        }
        let mut stack = vec![root.as_raw()];
        stack.extend(
            children
                .get(&me)
                .into_iter()
                .flatten()
                .copied()
                .filter(|&p| p != root.as_raw())
                .filter(|p| {
                    self.table
                        .get(p)
                        .is_some_and(|&(_, g, _)| g == pgid.as_raw())
                }),
        );
        let mut seen = std::collections::BTreeSet::new();
        while let Some(pid) = stack.pop() {
            if pid != me && seen.insert(pid) {
                stack.extend(children.get(&pid).into_iter().flatten().copied());
            }
        }
        seen.into_iter().map(Pid::from_raw).collect()
    }
}

#[cfg(unix)]
/// Reaps the adopted orphans that were killed (each by its PID, so no other
/// child of oomkit's is ever taken from its owner); one that has not died
/// yet after a short wait is left to the next run or to oomkit's exit.
fn reap(adopted: &[Pid]) {
    for &p in adopted {
        for _ in 0..20 {
            match waitpid(p, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => thread::sleep(Duration::from_millis(5)),
                _ => break,
            }
        }
    }
}

/// Appends `bytes` and keeps only the last `cap`. Room is made before the
/// append, so the deque never holds more than `cap` bytes and, reserved once
/// at `cap`, never reallocates (a doubling deque would peak at twice `cap`).
fn keep_tail(tail: &mut VecDeque<u8>, bytes: &[u8], cap: usize) {
    let bytes = bytes
        .get(bytes.len().saturating_sub(cap)..)
        .unwrap_or_default();
    let excess = tail
        .len()
        .saturating_add(bytes.len())
        .saturating_sub(cap)
        .min(tail.len());
    tail.drain(..excess);
    if tail.capacity() < cap {
        // A cap too large to reserve just grows as needed.
        let _ = tail.try_reserve_exact(cap.saturating_sub(tail.len()));
    }
    tail.extend(bytes.iter().copied());
}

fn write_now(w: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    w.write_all(bytes)?;
    w.flush()
}

fn spawn_readers(child: &mut Child, tx: &SyncSender<Chunk>, hang_up: &Arc<[AtomicBool; 2]>) {
    if let Some(out) = child.stdout.take() {
        let (tx, hang_up) = (tx.clone(), Arc::clone(hang_up));
        thread::spawn(move || pump::<ChildStdout>(out, 0, &tx, &hang_up));
    }
    if let Some(err) = child.stderr.take() {
        let (tx, hang_up) = (tx.clone(), Arc::clone(hang_up));
        thread::spawn(move || pump::<ChildStderr>(err, 1, &tx, &hang_up));
    }
}

/// Copies one pipe into the channel in chunks until EOF, until nobody
/// listens any more, or until told to hang up (dropping the pipe).
fn pump<R: Read>(mut r: R, stream: usize, tx: &SyncSender<Chunk>, hang_up: &[AtomicBool; 2]) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        if hang_up
            .get(stream)
            .is_some_and(|h| h.load(Ordering::SeqCst))
        {
            break;
        }
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let data = buf.get(..n).map(<[u8]>::to_vec).unwrap_or_default();
                if tx.send(Chunk::Data(stream, data)).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = tx.send(Chunk::Eof);
}

/// A `Read` over a channel of chunks, so the explainer streams the output.
struct ChannelReader {
    rx: Receiver<Vec<u8>>,
    buf: Vec<u8>,
    pos: usize,
}

impl ChannelReader {
    fn new(rx: Receiver<Vec<u8>>) -> Self {
        ChannelReader {
            rx,
            buf: Vec::new(),
            pos: 0,
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.buf.len() {
            match self.rx.recv() {
                Ok(b) => {
                    self.buf = b;
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let n = rest.len().min(out.len());
        if let (Some(dst), Some(src)) = (out.get_mut(..n), rest.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.pos = self.pos.saturating_add(n);
        Ok(n)
    }
}

/// Builds a [`CommandLine`] from strings (tests and examples).
pub fn argv<I, S>(args: I) -> CommandLine
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    CommandLine::new(args.into_iter().map(Into::into).collect())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str) -> CommandLine {
        argv(["sh", "-c", script])
    }

    #[test]
    fn exit_codes_and_signals_are_reported() {
        let f = run(&sh("exit 3"), Options::default()).unwrap();
        assert_eq!(f.exit, Exit::Code(3));
        let f = run(&sh("kill -SEGV $$"), Options::default()).unwrap();
        assert_eq!(f.exit, Exit::Signal(11));
        assert_eq!(f.exit.shell_code(), 139);
    }

    #[test]
    fn keeps_only_a_bounded_tail_of_a_chatty_child() {
        let f = run(
            &sh("i=0; while [ $i -lt 3000 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done"),
            Options {
                tail_bytes: 1000,
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(f.tail.len(), 1000);
        assert!(f.output_bytes > 100_000);
        assert!(
            String::from_utf8_lossy(&f.tail)
                .ends_with("line-2999-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n")
        );
    }

    #[test]
    fn the_tail_never_holds_or_reserves_more_than_its_cap() {
        let mut tail = VecDeque::new();
        for i in 0..100u8 {
            keep_tail(&mut tail, &[i; 7], 20);
            assert!(tail.len() <= 20);
            assert!(tail.capacity() < 40, "{}", tail.capacity());
        }
        assert_eq!(tail.iter().copied().collect::<Vec<_>>().len(), 20);
        assert_eq!(tail.back(), Some(&99));
        assert_eq!(tail.front(), Some(&97));
        // One chunk larger than the cap keeps only its own end.
        keep_tail(&mut tail, &(0..50).collect::<Vec<u8>>(), 20);
        assert_eq!(
            tail.iter().copied().collect::<Vec<_>>(),
            (30..50).collect::<Vec<u8>>()
        );
        // A cap too large to reserve is no panic.
        keep_tail(&mut tail, b"x", usize::MAX);
        assert_eq!(tail.back(), Some(&b'x'));
    }

    #[test]
    fn a_helper_holding_the_pipes_does_not_stall_the_run() {
        let t = Instant::now();
        let f = run(&sh("sleep 30 & echo started; exit 0"), Options::default()).unwrap();
        assert_eq!(f.exit, Exit::Code(0));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_forwarded_signal_reaches_a_stopped_command() {
        // The command stops itself; oomkit leaves it stopped until a signal
        // comes, which it forwards followed by SIGCONT, as `timeout` does.
        let interrupts = Interrupts::default();
        let f = thread::scope(|s| {
            s.spawn(|| {
                thread::sleep(Duration::from_millis(300));
                interrupts.record(15, false);
            });
            run(
                &sh("kill -STOP $$; echo resumed"),
                Options {
                    interrupt: Some(&interrupts),
                    ..Options::default()
                },
            )
            .unwrap()
        });
        assert_eq!(f.killed, Some(Killed::Interrupt(15)));
        assert_eq!(f.exit, Exit::Signal(15));
        assert!(f.tail.is_empty(), "{:?}", String::from_utf8_lossy(&f.tail));
    }

    #[test]
    fn after_the_grace_the_whole_tree_is_killed() {
        // The command ignores SIGTERM; after the grace it is killed.
        let interrupts = Interrupts::default();
        interrupts.record(15, false);
        let f = run(
            &sh("trap '' TERM; sleep 30 & wait; wait"),
            Options {
                interrupt: Some(&interrupts),
                grace: Duration::from_millis(300),
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(f.killed, Some(Killed::Interrupt(15)));
        assert_eq!(f.exit, Exit::Signal(9));
    }

    #[test]
    fn a_timeout_kills_the_group() {
        let f = run(
            &sh("sleep 30"),
            Options {
                timeout: Some(Duration::from_millis(200)),
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(f.killed, Some(Killed::Timeout));
        assert_eq!(f.exit, Exit::Signal(9));
    }

    #[test]
    fn an_interrupt_is_forwarded_to_the_group() {
        let interrupts = Interrupts::default();
        interrupts.record(2, false);
        let f = run(
            &sh("sleep 30"),
            Options {
                interrupt: Some(&interrupts),
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(f.killed, Some(Killed::Interrupt(2)));
        assert_eq!(f.exit, Exit::Signal(2));
    }

    #[test]
    fn the_explainer_reads_the_whole_output() {
        let f = run(
            &sh("echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 20.00 MiB is free.' >&2; exit 1"),
            Options::default(),
        )
        .unwrap();
        assert!(f.report.has_oom());
    }

    #[test]
    fn a_missing_program_is_an_error() {
        let e = run(&argv(["/nonexistent/oomkit-test"]), Options::default()).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/oomkit-test"), "{e}");
    }
}
