//! The process contract of `run` and `probe`, through the real binary: the
//! terminal stays as the shell set it (checked on a pseudo-terminal, with
//! bash as the shell), each signal reaches the command once, `--grace`, and
//! death by the signal that stopped it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::oomkit;
use crate::probe::{gone, python, read_pid};

/// The longest any step here may take; far above what it needs, so only a
/// hang (a stopped job, a stolen terminal) reaches it.
const PATIENCE: Duration = Duration::from_secs(25);

/// A bash script running as the session leader of a fresh pseudo-terminal
/// (util-linux `setsid --ctty` makes it the controlling terminal), as in a
/// terminal window. `$OOMKIT` is the binary, `$PY` Python.
struct Pty {
    child: Child,
    master: File,
    out: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    fn bash(script: &str) -> Pty {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        let slave = File::from(pty.slave);
        let child = Command::new("setsid")
            .args(["--ctty", "bash", "--norc", "--noprofile", "-c", script])
            .env("OOMKIT", env!("CARGO_BIN_EXE_oomkit"))
            .env("PY", python())
            .env("TERM", "dumb")
            .stdin(Stdio::from(slave.try_clone().expect("dup")))
            .stdout(Stdio::from(slave.try_clone().expect("dup")))
            .stderr(Stdio::from(slave))
            .spawn()
            .expect("setsid(1) from util-linux runs bash");
        let master = File::from(pty.master);
        let out = Arc::new(Mutex::new(Vec::new()));
        let (mut reader, sink) = (master.try_clone().expect("dup"), Arc::clone(&out));
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once every slave descriptor is closed: the end.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().expect("lock").extend_from_slice(&buf[..n]);
            }
        });
        Pty { child, master, out }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().expect("lock")).into_owned()
    }

    /// Waits until the terminal shows `needle`.
    fn wait_for(&mut self, needle: &str) {
        let start = Instant::now();
        while !self.text().contains(needle) {
            if start.elapsed() > PATIENCE || self.child.try_wait().ok().flatten().is_some() {
                let _ = self.child.kill();
                panic!("the terminal never showed {needle:?}:\n{}", self.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `bytes` on the terminal's keyboard.
    fn type_keys(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).expect("write to the terminal");
    }

    /// Waits for the shell to end; its status and everything it showed.
    fn finish(mut self) -> (ExitStatus, String) {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                // Let the reader drain what is left.
                std::thread::sleep(Duration::from_millis(100));
                return (s, self.text());
            }
            if start.elapsed() > PATIENCE {
                let _ = self.child.kill();
                panic!("the shell hung:\n{}", self.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `oomkit run -- CMD | less`: the pager, in the same job, keeps reading the
/// terminal (the command is never made the foreground group in its place,
/// so the pager gets no SIGTTIN).
#[test]
fn a_pipeline_peer_keeps_the_terminal() {
    // The pager reads the terminal while the command still runs (oomkit
    // used to hand the terminal to the command: the pager's read then
    // failed or stopped it).
    let mut t = Pty::bash(
        r#""$OOMKIT" run -- sh -c 'echo from-the-command; sleep 2' | { IFS= read -r first; echo "pager got: $first"; IFS= read -r line </dev/tty; echo "pager read: $line"; cat; }; echo "status ${PIPESTATUS[*]}""#,
    );
    t.wait_for("pager got: from-the-command");
    t.type_keys(b"hello\n");
    let (status, text) = t.finish();
    assert!(text.contains("pager read: hello"), "{text}");
    assert!(!text.contains("error"), "{text}");
    assert!(text.contains("status 0 0"), "{text}");
    assert!(status.success(), "{status:?}\n{text}");
}

/// Started in the background (`&`), a command that reads the terminal is
/// stopped with oomkit, as any job is (SIGTTIN), and not continued behind the
/// shell's back; `fg` brings both back and the command reads its line.
#[test]
fn a_background_job_stops_as_one_and_fg_continues_it() {
    let mut t = Pty::bash(
        r#"set -m
"$OOMKIT" run -- sh -c 'IFS= read -r x; echo "command read: $x"' &
sleep 1; jobs -l; echo jobs-listed
fg %1; echo "fg status $?""#,
    );
    t.wait_for("jobs-listed");
    let listed = t.text();
    assert!(
        listed.contains("Stopped"),
        "the job was not stopped:\n{listed}"
    );
    t.type_keys(b"hello\n");
    let (status, text) = t.finish();
    assert!(text.contains("command read: hello"), "{text}");
    assert!(text.contains("fg status 0"), "{text}");
    assert!(status.success(), "{status:?}\n{text}");
}

/// Ctrl-C reaches the command once (the terminal's own SIGINT, not a
/// second forwarded copy); a program that handles it goes on and its
/// status is oomkit's.
#[test]
fn ctrl_c_on_a_terminal_reaches_the_command_once() {
    let mut t = Pty::bash(
        r#""$OOMKIT" run -- "$PY" -c '
import signal, sys, time
n = [0]
signal.signal(signal.SIGINT, lambda *a: n.__setitem__(0, n[0] + 1))
print("ready", flush=True)
time.sleep(3)
print("sigints: %d" % n[0], flush=True)
'; echo "status $?""#,
    );
    t.wait_for("ready");
    t.type_keys(b"\x03");
    let (status, text) = t.finish();
    assert!(text.contains("sigints: 1"), "{text}");
    assert!(text.contains("status 0"), "{text}");
    assert!(status.success(), "{status:?}\n{text}");
}

/// Ctrl-C during `for …; do oomkit run -- …; done` stops the loop: the
/// command dies of SIGINT, so does oomkit, so the shell stops too.
#[test]
fn ctrl_c_stops_a_shell_loop() {
    let mut t = Pty::bash(
        r#"for i in 1 2 3; do "$OOMKIT" run -- sh -c 'echo "started $0"; exec sleep 30' "$i"; echo "next after $i"; done; echo loop-ended"#,
    );
    t.wait_for("started 1");
    t.type_keys(b"\x03");
    let (status, text) = t.finish();
    assert_eq!(status.signal(), Some(2), "{status:?}\n{text}");
    assert!(!text.contains("next after 1"), "{text}");
    assert!(!text.contains("loop-ended"), "{text}");
}

/// Ctrl-Z stops the command with oomkit even when the command has its own
/// process group (stdin not the terminal), and `bg` continues both: the
/// command writes nothing while the job is stopped.
#[test]
fn ctrl_z_stops_a_command_in_its_own_group_too() {
    let dir = tempfile::tempdir().unwrap();
    let ticks = dir.path().join("ticks");
    let script = format!(
        r#"set -m
T={t}
"$OOMKIT" run -- sh -c 'echo ready; while :; do echo tick >> "$0"; sleep 0.05; done' "$T" </dev/null
sleep 0.5; a=$(wc -l < "$T"); sleep 1; b=$(wc -l < "$T"); echo "while stopped: $a $b"
bg %1; sleep 1; c=$(wc -l < "$T"); echo "grew after bg: $(( c > b ))"
kill -TERM %1; wait; echo finished"#,
        t = ticks.display()
    );
    let mut t = Pty::bash(&script);
    t.wait_for("ready");
    std::thread::sleep(Duration::from_millis(300));
    t.type_keys(b"\x1a");
    let (status, text) = t.finish();
    let line = text
        .lines()
        .find(|l| l.starts_with("while stopped: "))
        .unwrap_or_else(|| panic!("{text}"));
    let counts: Vec<&str> = line
        .trim_start_matches("while stopped: ")
        .split_whitespace()
        .collect();
    assert_eq!(counts.len(), 2, "{text}");
    assert_eq!(
        counts[0], counts[1],
        "the command ran on while stopped:\n{text}"
    );
    assert!(text.contains("grew after bg: 1"), "{text}");
    assert!(text.contains("finished"), "{text}");
    assert!(status.success(), "{status:?}\n{text}");
}

/// Spawns `oomkit ARGS` with pipes and no terminal; waits until its command
/// printed `ready` on stdout.
fn spawn_until_ready(args: &[&str]) -> (Child, String) {
    let mut child = oomkit()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oomkit");
    let mut out = child.stdout.take().expect("stdout");
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("ready") {
        let n = out.read(&mut buf).expect("read");
        assert!(n > 0, "the command ended before it was ready");
        seen.extend_from_slice(&buf[..n]);
    }
    let mut rest = Vec::new();
    let t = std::thread::spawn(move || {
        let _ = out.read_to_end(&mut rest);
        rest
    });
    child.stdout = None;
    let _ = t;
    (child, String::from_utf8_lossy(&seen).into_owned())
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, sig).expect("kill");
}

fn wait_within(child: &mut Child) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!("oomkit did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM from a scheduler: forwarded once; the default 30 s grace lets a
/// program save its checkpoint (4 s here, longer than the 3 s oomkit used to
/// give), then oomkit dies of SIGTERM itself.
#[test]
fn sigterm_is_forwarded_once_and_the_default_grace_lets_a_checkpoint_finish() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("out.log");
    let log_arg = log.to_string_lossy().into_owned();
    let script = r#"
import signal, sys, time
n = [0]
def term(*a):
    n[0] += 1
    if n[0] == 1:
        time.sleep(4)
        print("checkpoint saved; SIGTERMs: %d" % n[0], flush=True)
        sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
time.sleep(60)
"#;
    let (mut child, _) =
        spawn_until_ready(&["run", "--log", &log_arg, "--", python(), "-c", script]);
    signal(&child, nix::sys::signal::Signal::SIGTERM);
    let status = wait_within(&mut child);
    assert_eq!(status.signal(), Some(15), "{status:?}");
    let out = std::fs::read_to_string(&log).unwrap();
    assert!(out.contains("checkpoint saved; SIGTERMs: 1"), "{out}");
}

/// `--grace`: a command that ignores the forwarded signal is killed, with
/// every process it started, once the grace is over.
#[test]
fn after_grace_the_whole_tree_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let helper = dir.path().join("helper.pid");
    let script = format!(
        "trap '' TERM INT; {py} -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)' & echo $! > {h}; echo ready; while :; do sleep 1; done",
        py = python(),
        h = helper.display()
    );
    let (mut child, _) = spawn_until_ready(&["run", "--grace", "1s", "--", "sh", "-c", &script]);
    signal(&child, nix::sys::signal::Signal::SIGTERM);
    let status = wait_within(&mut child);
    assert_eq!(status.signal(), Some(15), "{status:?}");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("still running after --grace 1s, so its processes were killed"),
        "{err}"
    );
    assert!(gone(read_pid(&helper)), "the helper survived");
}

/// `probe` interrupted: the trial gets the signal once, and oomkit dies of
/// it after printing what it learned.
#[test]
fn probe_forwards_sigterm_and_dies_of_it() {
    let script = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: (print('trial got SIGTERM', file=sys.stderr, flush=True), sys.exit(1)))\nprint('ready', flush=True)\ntime.sleep(60)";
    let (mut child, _) = spawn_until_ready(&["probe", "--max", "4", "--", python(), "-c", script]);
    signal(&child, nix::sys::signal::Signal::SIGTERM);
    let status = wait_within(&mut child);
    assert_eq!(status.signal(), Some(15), "{status:?}");
}
