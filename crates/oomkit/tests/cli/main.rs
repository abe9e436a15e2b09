//! End-to-end tests: every test runs the real `oomkit` binary.
//! One integration-test binary made of modules (ripgrep's and ruff's layout).
#![allow(clippy::indexing_slicing, clippy::string_slice)] // test code: a bad index is a failed test

mod docs;
mod escape;
mod estimate;
mod estimate_hub;
mod estimate_litgpt;
mod estimate_llamacpp;
mod estimate_preflight;
mod estimate_preflight2;
mod estimate_sharded;
mod estimate_sharded_qlora;
mod estimate_v3;
mod estimate_zero_measured;
mod estimate_zero_oracle;
mod explain;
mod explain_field;
mod explain_readings;
mod explain_v3;
mod explain_v3b;
mod install;
mod leaks;
mod leaks_tf;
mod lint;
mod lint_summaries;
mod lint_v3;
mod monitor;
mod monitor_v2;
mod probe;
mod probe_v2;
mod process_contract;
mod robust_any;
mod robust_estimate;
mod robust_explain;
mod robust_lint;
mod run;
mod run_hook;
mod snapshot;
mod snapshot_expandable;
mod snapshot_input;
mod snapshot_leaks;
mod snapshot_reserved;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The binary under test.
pub fn oomkit() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_oomkit"));
    c.env_remove("NO_COLOR").env("CLICOLOR", "0");
    // Hermetic: no model the machine happens to have downloaded replaces a
    // catalogue entry (`estimate` reads the Hugging Face cache first).
    c.env(
        "HF_HUB_CACHE",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-hf-cache"),
    );
    // Nor does the machine's Hub setup (`estimate --hub`).
    // Nor the Python environment it runs in (`estimate` reads the versions
    // installed there).
    for k in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        c.env_remove(k);
    }
    for k in [
        "HF_TOKEN",
        "HF_ENDPOINT",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
    ] {
        c.env_remove(k);
    }
    c.env(
        "HF_TOKEN_PATH",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-hf-token"),
    );
    c
}

/// Runs the binary with `args` in `dir`, feeding `stdin`.
pub fn run_in(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    use std::io::Write;
    let mut cmd = oomkit();
    cmd.current_dir(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().expect("spawn oomkit");
    if let Some(input) = stdin {
        let mut si = child.stdin.take().expect("stdin");
        si.write_all(input).expect("write stdin");
    }
    child.wait_with_output().expect("wait oomkit")
}

/// Runs the binary with `args` in `dir` (no stdin) and kills it past `limit`:
/// a hang fails the test instead of stalling the suite.
pub fn run_within(dir: &Path, args: &[&str], limit: std::time::Duration) -> Output {
    let mut child = oomkit()
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oomkit");
    let start = std::time::Instant::now();
    // Drain stdout on a thread so a large output cannot block the child.
    let mut out_pipe = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut out_pipe, &mut buf).map(|_| buf)
    });
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("oomkit {args:?} ran past {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut out = child.wait_with_output().expect("wait oomkit");
    out.stdout = reader.join().expect("reader").expect("read stdout");
    out
}

/// The explain fixtures folder.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_explain/tests/fixtures")
}

/// The lint fixtures folder.
pub fn lint_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_lint/tests/fixtures")
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard output parsed as JSON (panics with the text when it is not).
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

/// A reader that goes away (`oomkit … | head -1`) is not an error: exit 0 and
/// nothing on stderr, whether the output is text or JSON. The explain run
/// writes more than a pipe buffer, so it always meets the closed pipe.
#[test]
fn closed_pipe_is_not_an_error() {
    let logs: Vec<String> = std::fs::read_dir(fixtures())
        .expect("fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let mut explain_text = vec!["explain"];
    explain_text.extend(logs.iter().map(String::as_str));
    let mut explain_json = explain_text.clone();
    explain_json.splice(1..1, ["--format", "json"]);
    let cases: [&[&str]; 4] = [
        &explain_text,
        &explain_json,
        &["estimate", "gpt2", "--format", "json"],
        &["estimate", "--list-models"],
    ];
    for args in cases {
        let mut child = oomkit()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn oomkit");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait oomkit");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{:?}: {}",
            &args[..1],
            stderr(&out)
        );
        assert_eq!(stderr(&out), "", "{:?}", &args[..1]);
    }
}
