//! Text taken from an input reaches the terminal with its control characters
//! escaped (`oomkit_core::text::escape`): snapshot frame names, explain's
//! quoted log line and paths, lint's paths and parser messages, and the one
//! error line of any command.

use std::path::Path;

use super::{run_in, stderr, stdout};

/// No byte a terminal acts on (C0 except newline, DEL, C1 as UTF-8).
fn assert_no_controls(what: &str, text: &str) {
    for c in text.chars() {
        assert!(
            c == '\n' || !c.is_control(),
            "{what}: control {c:?} in {text:?}"
        );
    }
}

#[test]
fn snapshot_frame_names_are_escaped() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../oomkit_snapshot/tests/fixtures");
    let o = run_in(&dir, &["snapshot", "escape-frames.pickle"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_no_controls("snapshot", &out);
    assert!(
        out.contains("1×  \\u{1b}]0;pwned\\u{7}train.py:3 \\u{1b}[2Jstep\\u{9b}31m"),
        "{out}"
    );
}

#[test]
fn explain_log_lines_and_paths_are_escaped() {
    let dir = tempfile::tempdir().expect("test setup");
    let name = "log\u{1b}[2J.txt";
    std::fs::write(
        dir.path().join(name),
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; 20.1 GiB already allocated; 1.45 GiB free; 21.0 GiB reserved in total by PyTorch) x\u{9b}2Jy\u{7}z\n",
    )
    .expect("test setup");
    let o = run_in(dir.path(), &["explain", name], None);
    let out = stdout(&o);
    assert_no_controls("explain", &out);
    assert!(out.contains("  log\\u{1b}[2J.txt:1 · PyTorch"), "{out}");
    assert!(out.contains("by PyTorch) x\\u{9b}2Jy\\u{7}z\n"), "{out}");
    // The error line names the input, escaped, on one line.
    let o = run_in(dir.path(), &["explain", "missing\u{1b}[2J\n.log"], None);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_no_controls("explain error", &err);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cannot read missing\\u{1b}[2J\\n.log"),
        "{err}"
    );
}

#[test]
fn lint_paths_and_parser_messages_are_escaped() {
    let dir = tempfile::tempdir().expect("test setup");
    std::fs::write(
        dir.path().join("a\u{1b}[2Jb.py"),
        "losses = []\nfor batch in dataloader:\n    loss = model(batch)\n    losses.append(loss)\n",
    )
    .expect("test setup");
    std::fs::write(dir.path().join("c.py"), "x = (\n\u{1b}]0;t\u{7}\n").expect("test setup");
    let o = run_in(dir.path(), &["lint", "."], None);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_no_controls("lint", &out);
    assert_no_controls("lint errors", &err);
    assert!(out.contains("a\\u{1b}[2Jb.py:4:5: OOM101"), "{out}");
    assert!(
        format!("{out}{err}").contains("c.py:2:1: syntax error: Got unexpected token \\u{1b}"),
        "{out}{err}"
    );
}
