//! `oomkit snapshot` inputs through the binary: standard input, pipes,
//! `/dev/stdin` and process substitutions read as streams; crafted pickles
//! (`make_hostile.py`) decoded in bounded time; `diff --device` validated.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::support::cli;
use super::{oomkit, run_in, run_within, stderr, stdout};

fn snap_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_snapshot/tests/fixtures")
}

const FILE: &str = "small-training-step.pickle";

/// The report of the file read by path, with the input's name replaced.
fn by_path(name: &str) -> String {
    let o = run_in(&snap_fixtures(), &["snapshot", FILE], None);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).replacen(FILE, name, 1)
}

#[test]
fn standard_input_is_read_as_a_stream() {
    let bytes = std::fs::read(snap_fixtures().join(FILE)).expect("test setup");
    let o = run_in(&snap_fixtures(), &["snapshot", "-"], Some(&bytes));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), by_path("standard input"));
    // An empty stream is named and refused.
    let o = run_in(&snap_fixtures(), &["snapshot", "-"], Some(b""));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot read standard input: not a pickle of protocol 2-5 (it starts with nothing: it is empty)"),
        "{}",
        stderr(&o)
    );
}

/// Runs `script` under bash with the binary as `$OOMKIT`, in the fixtures folder.
fn bash(script: &str) -> std::process::Output {
    let exe = oomkit().get_program().to_owned();
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("OOMKIT", exe)
        .env("CLICOLOR", "0")
        .current_dir(snap_fixtures())
        .stdin(Stdio::null())
        .output()
        .expect("test setup")
}

#[test]
fn pipes_dev_stdin_and_process_substitution_are_streams() {
    let o = bash(&format!("cat {FILE} | \"$OOMKIT\" snapshot -"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), by_path("standard input"));
    let o = bash(&format!("cat {FILE} | \"$OOMKIT\" snapshot /dev/stdin"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), by_path("/dev/stdin"));
    let o = bash(&format!(
        "\"$OOMKIT\" snapshot <(gzip -c {FILE} | gzip -dc)"
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let first = text.lines().next().expect("a first line");
    assert!(
        first.starts_with("/dev/fd/") && first.ends_with(" · device 0"),
        "{first}"
    );
    assert_eq!(
        text.lines().skip(1).collect::<Vec<_>>(),
        by_path("x").lines().skip(1).collect::<Vec<_>>()
    );
    // A stream that stops early is a truncated pickle, named.
    let o = bash(&format!("head -c 5000 {FILE} | \"$OOMKIT\" snapshot -"));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: cannot read standard input: truncated pickle"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn crafted_pickles_decode_in_bounded_time() {
    // A hang guard, not a timing assertion: both decode in well under a
    // second; the quadratic decoder took minutes at these sizes' 100x.
    for (name, events) in [
        ("crafted-far-put.pickle", Some("4000 events")),
        ("crafted-huge-memo-index.pickle", None),
    ] {
        let o = run_within(
            &snap_fixtures(),
            &["snapshot", name],
            std::time::Duration::from_secs(120),
        );
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        match events {
            Some(e) => assert!(stdout(&o).contains(e), "{}", stdout(&o)),
            None => assert!(
                stdout(&o).contains("nothing was recorded"),
                "{}",
                stdout(&o)
            ),
        }
    }
}

#[test]
fn diff_device_must_be_in_either_snapshot() {
    let diff =
        cli(&["snapshot", "diff", FILE, "small-training-step-p2.pickle"]).cwd(snap_fixtures());
    let ran = diff.clone().args(&["--device", "7"]).run();
    ran.code(2).one_error_line().stderr_is(
        "error: cannot compare small-training-step.pickle and small-training-step-p2.pickle: neither snapshot has device 7 (devices: 0)\n",
    );
    assert!(ran.stdout().is_empty(), "{}", ran.stdout());
    diff.args(&["--device", "0"]).run().code(0);
}
