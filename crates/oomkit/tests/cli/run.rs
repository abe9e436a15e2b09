//! `oomkit run` end to end: byte-exact pass-through, exit statuses, the OOM
//! report appended, `--log`, `--report`, `--snapshot-on-oom` with a fake
//! `torch`, and no process left behind.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::probe::{gone, interrupt, probe_fixtures, python, read_pid};
use crate::{fixtures, oomkit, run_in, stderr, stdout};

/// `oomkit run ARGS -- python3 -c CODE`, from `dir`.
fn run_py(dir: &Path, args: &[&str], code: &str) -> Output {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", python(), "-c", code]);
    run_in(dir, &all, None)
}

/// `oomkit run ARGS -- python3 fake_train.py SCRIPT`, from `dir`.
fn run_fake(dir: &Path, args: &[&str], script: &[&str]) -> Output {
    let fake = probe_fixtures().join("fake_train.py");
    let fake = fake.to_string_lossy();
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", python(), &fake]);
    all.extend_from_slice(script);
    run_in(dir, &all, None)
}

/// Waits up to 20 s for `child`; kills it and fails with `why` after that.
fn wait_within(child: &mut std::process::Child, why: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("{why}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes raw bytes: partial lines, `\r` progress, invalid UTF-8, on both streams.
const NOISY: &str = r#"
import sys, os
out, err = sys.stdout.buffer, sys.stderr.buffer
for i in range(5):
    out.write(b"\rprogress %d%%" % (i * 25)); out.flush()
out.write(b"\nbinary \xff\xfe\x00 bytes, no newline at the end"); out.flush()
err.write(b"warning: half a line"); err.flush()
err.write(b" ... finished\n\xc3\x28 bad utf-8\r\n")
"#;

#[test]
fn passes_output_through_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let direct = Command::new(python()).args(["-c", NOISY]).output().unwrap();
    let o = run_py(dir.path(), &[], NOISY);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(o.stdout, direct.stdout);
    assert_eq!(o.stderr, direct.stderr);
}

#[test]
fn exits_with_the_commands_status_and_128_plus_a_killing_signal() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let o = run_py(dir.path(), &[], "import sys; sys.exit(3)");
    assert_eq!(o.status.code(), Some(3));
    // argparse's status for bad arguments is the command's, not oomkit's.
    let o = run_py(dir.path(), &[], "import sys; sys.exit(2)");
    assert_eq!(o.status.code(), Some(2));
    let o = run_py(
        dir.path(),
        &[],
        "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
    );
    assert_eq!(o.status.code(), Some(128 + 11));
    // SIGTERM, SIGINT, SIGHUP: oomkit dies of the same signal, as the shell
    // would have seen the command die.
    let o = run_py(
        dir.path(),
        &[],
        "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
    );
    assert_eq!(o.status.signal(), Some(15), "{:?}", o.status);
    let o = run_in(dir.path(), &["run", "--", "/nonexistent/train"], None);
    assert_eq!(o.status.code(), Some(127));
    assert!(stderr(&o).contains("cannot run /nonexistent/train"));
    let o = run_in(dir.path(), &["run", "--", "/etc/passwd"], None);
    assert_eq!(o.status.code(), Some(126));
    assert!(stderr(&o).contains("cannot run /etc/passwd"));
    // oomkit's own failures: 125.
    let o = run_in(
        dir.path(),
        &["run", "--log", "/nonexistent/dir/log", "--", "true"],
        None,
    );
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    let o = run_in(dir.path(), &["run", "--grace", "soon", "--", "true"], None);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    let o = run_in(dir.path(), &["run", "--bogus", "--", "true"], None);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
}

/// The same report `oomkit explain` prints for the same text, after the
/// child's own stderr, then the timeline.
#[test]
fn an_oom_ends_with_explains_report_and_the_timeline() {
    let dir = tempfile::tempdir().unwrap();
    for log in [
        "pytorch_2_3_non_pytorch_memory.log",
        "tensorflow_2_4_bfc_with_stats_dump.log",
        "jax_2024_human_size.log",
    ] {
        let path = fixtures().join(log);
        let text = std::fs::read(&path).unwrap();
        let code = format!(
            "import sys; sys.stderr.buffer.write(open({:?}, 'rb').read()); sys.exit(1)",
            path.to_string_lossy()
        );
        let o = run_py(dir.path(), &[], &code);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            o.stderr.starts_with(&text),
            "{log}: the child's stderr comes first, unchanged"
        );
        let err = stderr(&o);
        let explained = run_in(dir.path(), &["explain", &path.to_string_lossy()], None);
        let explained = stdout(&explained);
        // Same headline, numbers, cause and fixes; only the source line differs.
        let mut lines = explained.lines();
        let headline = lines.next().unwrap();
        lines.next(); // `FILE:LINE · framework …`
        let body: Vec<&str> = lines.collect();
        assert!(
            err.contains("── oomkit: the command ran out of memory ──"),
            "{log}"
        );
        assert!(err.contains(headline), "{log}: {err}");
        assert!(
            err.contains(&body.join("\n")),
            "{log}: report differs\n{err}"
        );
        assert!(
            err.contains("memory timeline\n  no GPU samples (NVML unavailable)"),
            "{log}: {err}"
        );
    }
}

#[test]
fn memory_figures_the_program_printed_make_the_timeline_and_growth_rate() {
    let dir = tempfile::tempdir().unwrap();
    let log = fixtures().join("pytorch_2_3_non_pytorch_memory.log");
    let o = run_fake(
        dir.path(),
        &[],
        &[
            "--batch",
            "8",
            "--threshold",
            "4",
            "--leak",
            "6",
            "--oom-log",
            &log.to_string_lossy(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("6 figure(s) the program printed as `mem`"),
        "{err}"
    );
    assert!(err.contains("memory climbed steadily: +"), "{err}");
    assert!(
        err.contains("per printed figure (1.50 GiB → 9.00 GiB)"),
        "{err}"
    );
    // The climb's shape points to the command that finds the leak.
    assert!(err.contains("the shape of a leak"), "{err}");
    assert!(err.contains("    oomkit leaks -- "), "{err}");
}

#[test]
fn a_successful_run_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_py(dir.path(), &[], "print('mem: 1 GiB'); print('done')");
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "mem: 1 GiB\ndone\n");
    assert_eq!(stderr(&o), "");
}

#[test]
fn log_tees_the_output_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("train.log");
    let o = run_py(
        dir.path(),
        &["--log", &log.to_string_lossy()],
        "import sys\nfor i in range(1000): print('line', i)",
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read(&log).unwrap(), o.stdout);
    assert!(o.stdout.len() > 8000);
}

#[test]
fn report_writes_a_self_contained_page() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let log = fixtures().join("pytorch_2_3_non_pytorch_memory.log");
    let o = run_fake(
        dir.path(),
        &["--report", &page.to_string_lossy()],
        &[
            "--batch",
            "8",
            "--threshold",
            "4",
            "--leak",
            "5",
            "--oom-log",
            &log.to_string_lossy(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<svg") && html.contains("<polyline"));
    assert!(html.contains("CUDA out of memory on GPU 0"));
    assert!(html.contains("Fixes, best first") && html.contains("<ol class=\"fixes\">"));
    assert!(html.contains("memory climbed steadily"));
    for banned in ["<script", "<link", "@import", " src=", "url("] {
        assert!(
            !html.contains(banned),
            "{banned} makes the page depend on something"
        );
    }
}

#[test]
fn snapshot_on_oom_dumps_through_the_hook_and_chains_sitecustomize() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("chained");
    let fake = probe_fixtures().join("fake_torch");
    let o = oomkit()
        .current_dir(dir.path())
        .env("PYTHONPATH", probe_fixtures().join("chained_site"))
        .env("CHAINED_SITE_MARKER", &marker)
        .args([
            "run",
            "--snapshot-on-oom",
            "--keep-snapshot",
            "--report",
            "page.html",
            "--",
            python(),
        ])
        .arg(fake.join("train.py"))
        .arg("9")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("torch.OutOfMemoryError") || err.contains("OutOfMemoryError"));
    assert!(
        err.contains("── oomkit: the command ran out of memory ──"),
        "{err}"
    );
    let line = err
        .lines()
        .find(|l| l.starts_with("memory snapshot"))
        .unwrap_or_else(|| panic!("no snapshot line: {err}"));
    let path = line.rsplit(": ").next().unwrap().trim();
    assert!(
        err.contains(&format!("more (HTML, --top, diff): oomkit snapshot {path}")),
        "{err}"
    );
    // The snapshot's analysis names the line of the program that held the memory.
    assert!(err.contains("Alive at the peak, by site"), "{err}");
    assert!(err.contains("train.py:42 forward"), "{err}");
    let page = std::fs::read_to_string(dir.path().join("page.html")).unwrap();
    assert!(page.contains("Memory snapshot") && page.contains("train.py:42 forward"));
    let dumped = std::fs::read(path).unwrap();
    // A private folder per run, one file per rank (RANK unset: rank 0).
    let folder = Path::new(path).parent().unwrap();
    assert!(
        Path::new(path)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("oom-snapshot-rank0-pid"),
        "{path}"
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(folder).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }
    std::fs::remove_dir_all(folder).unwrap();
    assert_eq!(dumped, std::fs::read(fake.join("snapshot.pickle")).unwrap());
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran");
    // Without an OOM, nothing is dumped and nothing is said.
    let o = oomkit()
        .current_dir(dir.path())
        .args(["run", "--snapshot-on-oom", "--", python()])
        .arg(fake.join("train.py"))
        .arg("2")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stderr(&o), "");
}

#[test]
fn helpers_do_not_stall_run_or_survive_it() {
    let dir = tempfile::tempdir().unwrap();
    let helper = dir.path().join("helper.pid");
    let start = Instant::now();
    let o = run_fake(
        dir.path(),
        &[],
        &["--batch", "1", "--helper", &helper.to_string_lossy()],
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(o.status.code(), Some(0));
    let pid = read_pid(&helper);
    assert!(gone(pid), "helper {pid} survived oomkit run");
}

#[test]
fn ctrl_c_is_forwarded_and_oomkit_dies_of_it() {
    use std::os::unix::process::ExitStatusExt;
    let (o, pid) = interrupt("run", &["--batch", "2", "--threshold", "1"], "2");
    // Python turns SIGINT into KeyboardInterrupt and dies of it; so does oomkit.
    assert_eq!(o.status.signal(), Some(2), "{:?} {}", o.status, stderr(&o));
    assert!(
        stderr(&o).contains("oomkit: signal 2 forwarded to the command; it died of signal 2"),
        "{}",
        stderr(&o)
    );
    assert!(gone(pid), "the command survived");
}

/// oomkit's peak resident memory (VmHWM, read while it still runs) once the
/// command has printed `mib` MiB of output and is idle.
#[allow(clippy::unwrap_used)] // a test helper: a failure is the test's failure
fn run_hwm_kib_after_printing(mib: u32) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("printed");
    let code = format!(
        "import sys, time\nline = b'x' * 1023 + b'\\n'\nfor _ in range({mib} * 1024):\n    sys.stdout.buffer.write(line)\nsys.stdout.flush()\nopen({:?}, 'w').close()\ntime.sleep(30)",
        flag.to_string_lossy()
    );
    let mut child = oomkit()
        .args(["run", "--", python(), "-c", &code])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !flag.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never printed it all"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The pass-through may still be draining the pipe: give it a moment.
    std::thread::sleep(Duration::from_millis(300));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let oomkit_pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(oomkit_pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    child.wait().unwrap();
    hwm_kib
}

/// Bounded output buffering: after the command printed 64 MiB, oomkit's peak
/// resident memory is a few MiB over what it is for a silent command (the
/// 4 MiB tail, two 1 MiB channels, the explainer's window), not the output's
/// size. Compared with a silent run, so the build profile and the allocator's
/// own footprint do not matter.
#[test]
fn a_chatty_command_does_not_grow_oomkits_memory() {
    let quiet = run_hwm_kib_after_printing(0);
    let chatty = run_hwm_kib_after_printing(64);
    assert!(
        chatty.saturating_sub(quiet) < 24 * 1024,
        "oomkit run peaked at {chatty} KiB after the command printed 64 MiB, {quiet} KiB after it printed nothing"
    );
}

/// On a terminal the command gets the terminal (it is made the foreground
/// process group), so a program that reads it is not stopped by SIGTTIN.
/// `script` (Debian's bsdutils, in the base image) provides the terminal.
#[test]
fn a_command_on_a_terminal_can_read_it() {
    assert!(
        Path::new("/usr/bin/script").exists(),
        "this test needs script(1) from bsdutils"
    );
    let inner = format!(
        "{} run -- {} -c 'print(\"got\", input())'",
        env!("CARGO_BIN_EXE_oomkit"),
        python()
    );
    let mut child = Command::new("/usr/bin/script")
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"hello\n").unwrap();
    }
    let status = wait_within(&mut child, "the command was stopped reading the terminal");
    let out = child.wait_with_output().unwrap();
    assert!(status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("got hello"), "{}", stdout(&out));
}

/// `oomkit run -- yes | head -1`: when our reader goes away the command gets
/// SIGPIPE, as in a shell pipe, instead of writing forever.
#[test]
fn a_closed_pipe_ends_the_command() {
    let mut child = oomkit()
        .args(["run", "--", python(), "-c", "while True: print('y')"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Read;
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 2];
        out.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"y\n");
    }
    let status = wait_within(
        &mut child,
        "oomkit run kept the command writing into a closed pipe",
    );
    // Python reports the broken pipe itself, or dies of SIGPIPE: 1 or 128 + 13.
    assert!(matches!(status.code(), Some(1 | 141)), "{status:?}");
}

/// The child that `oomkit run` supervises is this job: when its message
/// lists it as `Process N` (its host PID, as in a container), the report
/// never tells the user to stop it, and names the real other process.
#[test]
fn the_supervised_child_is_never_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let code = "import os, sys\npid = os.getpid()\nsys.stderr.write(f'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 512.00 MiB is free. Process {pid} has 12.00 GiB memory in use. Process 999999 has 11.00 GiB memory in use. Of the allocated memory 9.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.\\n{pid}\\n')\nsys.exit(1)";
    let o = run_py(dir.path(), &[], code);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let pid = err
        .lines()
        .find(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit()))
        .expect("the child printed its pid");
    assert!(err.contains("kill 999999 "), "{err}");
    assert!(!err.contains(&format!("kill {pid} ")), "{err}");
    assert!(!err.contains(&format!("PID {pid} ")), "{err}");
}
