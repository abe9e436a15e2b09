//! End-to-end tests: every test runs the real `oomkit` binary.
//! One integration-test binary made of modules (ripgrep's and ruff's layout).

mod estimate;
mod explain;
mod lint;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The binary under test.
pub fn oomkit() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_oomkit"));
    c.env_remove("NO_COLOR").env("CLICOLOR", "0");
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
