//! `oomkit probe` end to end, against the stand-in training script
//! `crates/oomkit_probe/tests/fixtures/fake_train.py` (standard-library
//! Python) printing real OOM messages from explain's fixtures.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{fixtures, json, oomkit, run_in, stderr, stdout};

/// The probe/run fixtures folder.
pub fn probe_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_probe/tests/fixtures")
}

/// `python3`, which these tests need: Debian's `python3` package is in the
/// base image. `/usr/bin/python3` is preferred over a version-manager shim
/// on PATH (pyenv's adds ~0.4 s per start). Missing, the tests fail loudly
/// instead of passing.
pub fn python() -> &'static str {
    static PYTHON: OnceLock<&'static str> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let py = if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3"
        } else {
            "python3"
        };
        let ok = Command::new(py)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "these tests need python3 (apt-get install python3)");
        py
    })
}

/// `oomkit probe ARGS -- python3 fake_train.py --batch {batch} SCRIPT_ARGS`.
fn probe(args: &[&str], script: &[&str]) -> Output {
    let fake = probe_fixtures().join("fake_train.py");
    let fake = fake.to_string_lossy();
    let mut all = vec!["probe"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", python(), &fake, "--batch", "{batch}"]);
    all.extend_from_slice(script);
    run_in(&probe_fixtures(), &all, None)
}

/// Whether a process is still there (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Whether a process is gone (or a zombie) within 5 s: a SIGKILL is
/// delivered when the target next runs, which on a loaded machine is not
/// instantly.
pub fn gone(pid: u32) -> bool {
    let start = Instant::now();
    while alive(pid) {
        if start.elapsed() > Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Waits up to 5 s for a pid file and reads it.
pub fn read_pid(path: &Path) -> u32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no pid in {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks a JSON report against "fits iff batch ≤ threshold".
fn assert_trials_agree(j: &serde_json::Value, threshold: u64) {
    for t in j["trials"].as_array().expect("trials") {
        let b = t["batch"].as_u64().expect("batch");
        let want = if b <= threshold { "ok" } else { "oom" };
        assert_eq!(t["outcome"], want, "batch {b}: {t}");
        assert!(t["seconds"].as_f64().is_some_and(|s| s >= 0.0), "{t}");
    }
}

#[test]
fn finds_the_threshold_through_each_frameworks_real_oom_message() {
    // (explain fixture, threshold): PyTorch, TensorFlow, JAX, llama.cpp, CuPy.
    let cases = [
        ("pytorch_2_3_non_pytorch_memory.log", 13u64),
        ("tensorflow_1_x_root_errors_found.log", 21),
        ("jax_2024_human_size.log", 5),
        ("llamacpp_2024_vmm.log", 40),
        ("cupy_out_of_memory_to_allocate.log", 1),
    ];
    for (log, threshold) in cases {
        let log_path = fixtures().join(log);
        let t = threshold.to_string();
        let o = probe(
            &["--max", "64", "--format", "json"],
            &["--threshold", &t, "--oom-log", &log_path.to_string_lossy()],
        );
        assert_eq!(o.status.code(), Some(0), "{log}: {}", stderr(&o));
        let j = json(&o);
        assert_eq!(j["version"], 2);
        assert_eq!(j["max_batch"], threshold, "{log}: {j}");
        assert_eq!(j["exact"], true);
        assert_eq!(j["result"], "exact");
        assert_trials_agree(&j, threshold);
        // ⌈log2(64/1)⌉ + 1 trials at most, and one to confirm the boundary.
        let trials = j["trials"].as_array().unwrap();
        assert!(trials.len() <= 8, "{log}: {} trials", trials.len());
        let last = trials.last().unwrap();
        assert_eq!(last["batch"], threshold + 1, "{log}: {j}");
        assert_eq!(last["confirmation"], true, "{log}: {j}");
    }
}

#[test]
fn human_output_lists_each_trial_then_the_answer() {
    let log = fixtures().join("pytorch_2_3_non_pytorch_memory.log");
    let o = probe(
        &["--max", "16", "--margin", "20"],
        &["--threshold", "10", "--oom-log", &log.to_string_lossy()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("probing ") && lines[0].contains("python3 "),
        "{out}"
    );
    assert!(
        lines[0].contains("fake_train.py --batch {batch} --threshold 10"),
        "{out}"
    );
    assert!(
        out.contains("batch 1..=16: bisection, at most 5 trials"),
        "{out}"
    );
    assert!(
        out.contains(" oom ") && out.contains("CUDA out of memory on GPU 0"),
        "{out}"
    );
    // The OOM trials' peak is what the message says the process held.
    assert!(out.contains("23.61 GiB"), "{out}");
    assert!(
        out.contains("largest batch that fits: 10  (11 ran out of memory, twice;"),
        "{out}"
    );
    assert!(
        out.contains("with --margin 20%: use 8 (largest 10)"),
        "{out}"
    );
}

#[test]
fn the_batch_is_substituted_and_exported() {
    let o = probe(&["--max", "8", "--format", "json"], &["--check-env"]);
    // Nothing ran out of memory up to --max: its own outcome and status.
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["max_batch"], 8);
    assert_eq!(j["result"], "no_oom_up_to_max");
    assert_eq!(j["min_oom_batch"], serde_json::Value::Null);
}

#[test]
fn exits_1_when_even_min_does_not_fit() {
    let log = fixtures().join("pytorch_2_3_non_pytorch_memory.log");
    let o = probe(
        &["--min", "4", "--format", "json"],
        &["--threshold", "3", "--oom-log", &log.to_string_lossy()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["max_batch"], serde_json::Value::Null);
    assert_eq!(j["trials"].as_array().unwrap().len(), 1);
    assert_eq!(j["trials"][0]["outcome"], "oom");
}

#[test]
fn other_failures_stop_the_search_as_errors() {
    for (fail, exit, signal) in [
        ("value-error", Some(1), None),
        ("memory-error", Some(1), None),
        ("segfault", None, Some(11)),
    ] {
        let o = probe(&["--format", "json"], &["--threshold", "6", "--fail", fail]);
        assert_eq!(o.status.code(), Some(2), "{fail}: {}", stderr(&o));
        let j = json(&o);
        let trials = j["trials"].as_array().unwrap();
        let last = trials.last().unwrap();
        assert_eq!(last["outcome"], "error", "{fail}: {j}");
        assert_eq!(last["batch"], 8, "{fail}: grows 1, 2, 4, 8");
        assert_eq!(last["exit_code"].as_i64(), exit.map(i64::from));
        assert_eq!(last["signal"].as_i64(), signal.map(i64::from));
        assert!(trials.iter().all(|t| t["outcome"] != "oom"), "{fail}: {j}");
        assert_eq!(j["max_batch"], 4);
        assert_eq!(j["exact"], false);
    }
    let o = probe(&[], &["--threshold", "1", "--fail", "value-error"]);
    assert!(
        stdout(&o).contains("ValueError: batch size 2 is not a multiple of the number of GPUs"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("the search stopped: batch 2 ended in error"));
}

#[test]
fn a_hanging_trial_times_out_and_its_group_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("trial.pid");
    let start = Instant::now();
    let o = probe(
        &["--timeout", "2", "--format", "json"],
        &[
            "--threshold",
            "2",
            "--fail",
            "hang",
            "--pidfile",
            &pidfile.to_string_lossy(),
        ],
    );
    assert!(start.elapsed() < Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let j = json(&o);
    let trials = j["trials"].as_array().unwrap();
    let (last, before) = trials.split_last().unwrap();
    assert_eq!(last["outcome"], "timeout", "{j}");
    assert_eq!(last["signal"], 9);
    assert!(last["seconds"].as_f64().unwrap() >= 2.0);
    // Batch 4 hangs; on a loaded machine a slow start of 1 or 2 may time out first.
    assert!(last["batch"].as_u64().unwrap() <= 4);
    assert!(before.iter().all(|t| t["outcome"] == "ok"), "{j}");
    assert_eq!(
        j["max_batch"],
        before
            .last()
            .map_or(serde_json::Value::Null, |t| t["batch"].clone())
    );
    assert!(gone(read_pid(&pidfile)), "the hanging trial survived");
}

#[test]
fn helpers_holding_the_pipes_neither_stall_the_probe_nor_survive_it() {
    let dir = tempfile::tempdir().unwrap();
    let helper = dir.path().join("helper.pid");
    let start = Instant::now();
    let o = probe(
        &["--max", "2", "--format", "json"],
        &["--helper", &helper.to_string_lossy()],
    );
    // Each trial's helper sleeps 60 s holding stdout/stderr.
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(json(&o)["max_batch"], 2);
    let pid = read_pid(&helper);
    assert!(gone(pid), "helper {pid} survived the probe");
}

/// Runs `oomkit SUBCOMMAND -- python3 fake_train.py --fail hang --pidfile F
/// SCRIPT`, waits until the pid in F is a process whose command line has
/// `ready` (an argument), sends oomkit SIGINT, and returns the output and
/// that process's pid.
pub fn interrupt(subcommand: &str, script: &[&str], ready: &str) -> (Output, u32) {
    let dir = tempfile::tempdir().expect("temp dir");
    let pidfile = dir.path().join("child.pid");
    let child = oomkit()
        .args([subcommand, "--", python()])
        .arg(probe_fixtures().join("fake_train.py"))
        .args(script)
        .args(["--fail", "hang", "--pidfile"])
        .arg(&pidfile)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oomkit");
    let start = Instant::now();
    let ready = format!("\u{0}{ready}\u{0}");
    let pid = loop {
        let pid = read_pid(&pidfile);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&ready) {
            break pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{ready:?} never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let oomkit_pid = i32::try_from(child.id()).expect("pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(oomkit_pid),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    (child.wait_with_output().expect("wait oomkit"), pid)
}

#[test]
fn ctrl_c_kills_the_trial_and_prints_what_was_learned() {
    // Trials 1 and 2 write the pid too; interrupt the hanging one (batch 4).
    let (o, trial) = interrupt("probe", &["--batch", "{batch}", "--threshold", "2"], "4");
    // oomkit dies of the SIGINT it was sent, once the trial is gone.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(o.status.signal(), Some(2), "{:?} {}", o.status, stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("interrupted"), "{out}");
    assert!(out.contains("largest batch that ran so far: 2"), "{out}");
    assert!(gone(trial), "the interrupted trial survived");
}

#[test]
fn starts_from_the_estimate_and_needs_few_trials_when_it_is_right() {
    let est = [
        "llama-3.2-1b",
        "--task",
        "train",
        "--method",
        "lora",
        "--seq",
        "1024",
        "--gpu",
        "rtx-4090",
    ];
    let mut args = vec!["estimate", "--format", "json"];
    args.extend_from_slice(&est);
    let e = run_in(&probe_fixtures(), &args, None);
    let expected = json(&e)["fit"]["max_batch"].as_u64().unwrap();
    assert!(expected > 1, "{}", stdout(&e));
    let threshold = expected.to_string();
    let log = fixtures().join("pytorch_2_3_non_pytorch_memory.log");
    let fake = probe_fixtures().join("fake_train.py");
    let mut all = vec!["probe", "--format", "json", "--estimate"];
    all.extend_from_slice(&est);
    let (fake, log) = (fake.to_string_lossy(), log.to_string_lossy());
    all.extend_from_slice(&[
        "--",
        python(),
        &fake,
        "--batch",
        "{batch}",
        "--threshold",
        &threshold,
        "--oom-log",
        &log,
    ]);
    let o = run_in(&probe_fixtures(), &all, None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["estimate"], expected);
    assert_eq!(j["max_batch"], expected);
    assert_eq!(j["trials"][0]["batch"], expected);
    // Two trials for an exact estimate, and one to confirm the boundary.
    assert!(j["trials"].as_array().unwrap().len() <= 3, "{j}");
}

#[test]
fn bad_arguments_exit_125_with_a_message() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["probe", "--timeout", "soon", "--", "true"],
            "invalid --timeout",
        ),
        (&["probe", "--margin", "120", "--", "true"], "--margin"),
        (
            &["probe", "--min", "8", "--max", "4", "--", "true"],
            "--max 4 is below --min 8",
        ),
        (
            &["probe", "--estimate", "llama-3.2-1b", "--", "true"],
            "--estimate needs --gpu",
        ),
        (
            &["probe", "sh", "-c", "exit 0", "--max", "4"],
            "the command to probe goes after `--`",
        ),
    ];
    for (args, want) in cases {
        let o = run_in(&probe_fixtures(), args, None);
        assert_eq!(o.status.code(), Some(125), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    // A command that cannot be found: 127, as `timeout` and `env` say.
    let o = run_in(
        &probe_fixtures(),
        &["probe", "--", "/nonexistent/train"],
        None,
    );
    assert_eq!(o.status.code(), Some(127));
    assert!(stderr(&o).contains("cannot run /nonexistent/train"));
}

/// The human and JSON outputs as snapshots (times and the interpreter's path
/// filtered): the executable spec of both formats.
#[test]
fn output_formats_snapshot() {
    let log = "../../../oomkit_explain/tests/fixtures/pytorch_2_3_non_pytorch_memory.log";
    let script = [
        "fake_train.py",
        "--batch",
        "{batch}",
        "--threshold",
        "5",
        "--oom-log",
        log,
    ];
    let filters = vec![
        (r"(?m)^probing \S+", "probing [PYTHON]"),
        (r"(?m)^(\s+\d+\s+\d+\s+\w+\s+)\d+\.\d\d", "${1}[SECS]"),
        (r#""seconds": [0-9.]+"#, r#""seconds": "[SECS]""#),
    ];
    for format in ["human", "json"] {
        let mut args = vec!["probe", "--max", "8", "--margin", "10", "--format", format];
        args.extend_from_slice(&["--", python()]);
        args.extend_from_slice(&script);
        let o = run_in(&probe_fixtures(), &args, None);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        insta::with_settings!({ filters => filters.clone() }, {
            insta::assert_snapshot!(format!("probe_{format}"), stdout(&o));
        });
    }
}
