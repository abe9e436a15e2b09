//! `oomkit lint` on hostile input, through the real binary: one test per bug of
//! the hostile-input review (a panic, a stack overflow, a never-ending run, unbounded memory, wrong
//! answers on devices, FIFOs, binary and non-UTF-8 files). Big inputs are generated in
//! a tempdir at test time; every test asserts the exit code and the message.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{oomkit, run_in, stderr, stdout};

/// A file with one OOM101 finding (line 4).
const LEAK: &str =
    "losses = []\nfor batch in loader:\n    loss = model(batch)\n    losses.append(loss)\n";

/// Deprecated AMP: fixable (OOM109), line 2.
const AMP: &str = "import torch\nscaler = torch.cuda.amp.GradScaler()\n";

fn lint_in(dir: &Path, args: &[&str]) -> (Option<i32>, String, String, Duration) {
    let start = Instant::now();
    let out = run_in(dir, args, None);
    (
        out.status.code(),
        stdout(&out),
        stderr(&out),
        start.elapsed(),
    )
}

/// A generous bound for the debug binary on a busy 2-core CI: the quadratic and
/// exponential versions took minutes or never ended.
const QUICK: Duration = Duration::from_secs(30);

#[test]
fn chinese_comment_after_a_finding_is_linted_not_a_panic() {
    let tmp = tempfile::tempdir().expect("tmp");
    fs::write(
        tmp.path().join("zh.py"),
        "import torch\nfor x in loader:\n    torch.cuda.empty_cache()  # 清理显存\n    y = 1  # 清 noqa\n",
    )
    .expect("write");
    let (code, out, err, _) = lint_in(tmp.path(), &["lint", "zh.py"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("zh.py:3:5: OOM105"), "{out}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn deep_nesting_is_refused_per_file_and_the_others_are_still_linted() {
    let tmp = tempfile::tempdir().expect("tmp");
    let n = 100_000;
    let cases = [
        (
            "parens.py",
            format!("x = {}1{}\n", "(".repeat(n), ")".repeat(n)),
        ),
        (
            "lists.py",
            format!("x = {}{}\n", "[".repeat(n), "]".repeat(n)),
        ),
        (
            "sums.py",
            format!("x = {}a{}\n", "a+(".repeat(n), ")".repeat(n)),
        ),
        ("lambdas.py", format!("f = {}0\n", "lambda: ".repeat(n))),
        (
            "calls.py",
            format!("x = {}{}\n", "f(".repeat(n), ")".repeat(n)),
        ),
        ("minus.py", format!("x = {}a\n", "-".repeat(n))),
        // under oomkit_lint's PARSE_FIRST_MAX: parsed before it is refused
        (
            "small_lists.py",
            format!("x = {}{}\n", "[".repeat(30_000), "]".repeat(30_000)),
        ),
    ];
    for (name, text) in &cases {
        fs::write(tmp.path().join(name), text).expect("write");
    }
    fs::write(tmp.path().join("train.py"), LEAK).expect("write");
    let (code, out, err, took) = lint_in(tmp.path(), &["lint", "."]);
    assert_eq!(code, Some(2), "{err}");
    for (name, _) in &cases {
        assert!(
            err.contains(&format!(
                "error: {name}: nesting deeper than {} levels",
                oomkit_lint::MAX_NESTING
            )),
            "{name}: {err}"
        );
    }
    assert!(out.contains("train.py:4:5: OOM101"), "{out}");
    assert!(took < QUICK, "{took:?}");
}

/// Files just under the limits go through the parser and the checker on the worker
/// threads (256 MiB stacks) without overflowing, whatever recurses.
#[test]
fn files_just_under_the_depth_limits_are_linted_without_overflow() {
    let tmp = tempfile::tempdir().expect("tmp");
    let nest = oomkit_lint::MAX_NESTING - 10;
    let depth = oomkit_lint::MAX_EXPR_DEPTH - 1_000;
    let mut blocks = String::new();
    for i in 0..90 {
        blocks.push_str(&format!("{}if x:\n", " ".repeat(i)));
    }
    blocks.push_str(&format!("{}y = model(x)\n", " ".repeat(90)));
    let cases = [
        (
            "parens.py",
            format!("x = {}1{}\n", "(".repeat(nest), ")".repeat(nest)),
        ),
        ("nots.py", format!("x = {}a\n", "not ".repeat(nest))),
        ("blocks.py", blocks),
        ("chain.py", format!("x = a{}\n", ".b".repeat(depth))),
        ("sum.py", format!("x = a{}\n", "+a".repeat(depth))),
        (
            "deep_then_chain.py",
            format!(
                "x = {}a{}{}\n",
                "(".repeat(nest),
                "+a".repeat(depth - nest - 10),
                ")".repeat(nest)
            ),
        ),
    ];
    for (name, text) in &cases {
        fs::write(tmp.path().join(name), text).expect("write");
    }
    let (code, out, err, took) = lint_in(tmp.path(), &["lint", "."]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("All checks passed!"), "{out}");
    assert!(took < QUICK, "{took:?}");
}

#[test]
fn a_40k_attribute_chain_is_linted_in_linear_time() {
    let tmp = tempfile::tempdir().expect("tmp");
    let chain = ".b".repeat(40_000);
    fs::write(
        tmp.path().join("chain.py"),
        format!("for batch in loader:\n    x = a{chain}\n    xs.append(x{chain})\n"),
    )
    .expect("write");
    let (code, out, err, took) = lint_in(tmp.path(), &["lint", "chain.py"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("All checks passed!"), "{out}");
    assert!(took < QUICK, "{took:?}");
}

/// Every loop of a 95-deep nest reads its facts from one scan of the function (they
/// were gathered again per loop: 95 times the body, 1.3 GB for 60,000 lines).
#[test]
fn deeply_nested_loops_around_a_big_body_are_scanned_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut src = String::from("xs = []\n");
    for i in 0..95 {
        src.push_str(&format!("{}for batch{i} in loader:\n", " ".repeat(i)));
    }
    let body = format!("{}y = f(a, b) + g(c)\n", " ".repeat(95));
    src.push_str(&body.repeat(20_000));
    src.push_str(&format!("{}xs.append(model(batch0))\n", " ".repeat(95)));
    fs::write(tmp.path().join("nest.py"), src).expect("write");
    let (code, out, err, took) = lint_in(tmp.path(), &["lint", "nest.py"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("nest.py:20097:96: OOM101"), "{out}");
    assert!(took < QUICK, "{took:?}");
}

/// "Is this list backpropagated later?" and "is this total only accumulated?" were
/// answered by re-walking the function for every name: 40,000 distinct accumulators
/// took 35 s in release. They now read an index built once per function.
#[test]
fn a_loop_body_of_many_distinct_accumulators_is_linted_in_linear_time() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut src =
        String::from("def train():\n    for batch in loader:\n        loss = model(batch)\n");
    for i in 0..20_000 {
        src.push_str(&format!(
            "        xs{i}.append(loss)\n        t{i} = t{i} + loss\n"
        ));
    }
    fs::write(tmp.path().join("many.py"), src).expect("write");
    let (code, out, err, took) = lint_in(tmp.path(), &["lint", "--statistics", "many.py"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        out.contains("20000\tOOM102\tloss-accumulated-with-graph"),
        "{out}"
    );
    assert!(took < QUICK, "{took:?}");
}

#[test]
fn two_megabytes_of_parentheses_are_refused_at_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let n = 1 << 20;
    fs::write(
        tmp.path().join("parens.py"),
        format!("{}{}\n", "(".repeat(n), ")".repeat(n)),
    )
    .expect("write");
    let (code, _, err, took) = lint_in(tmp.path(), &["lint", "parens.py"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("error: parens.py: nesting deeper than 200 levels"),
        "{err}"
    );
    assert!(err.contains("not linted"), "{err}");
    assert!(took < QUICK, "{took:?}");
}

#[test]
fn dev_zero_is_an_error_that_names_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (code, out, err, took) = lint_in(
        tmp.path(),
        &["lint", "--max-file-size", "1MiB", "/dev/zero"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("error: /dev/zero: is larger than the 1.00 MiB limit"),
        "{err}"
    );
    assert!(!out.contains("All checks passed"), "{out}");
    assert!(took < QUICK, "{took:?}");
    // the default limit (10 MiB) ends it as well
    let (code, _, err, _) = lint_in(tmp.path(), &["lint", "/dev/zero"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("/dev/zero: is larger than the 10.00 MiB limit"),
        "{err}"
    );
}

fn mkfifo(path: &Path) -> bool {
    Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_fifo_named_on_the_command_line_is_read_and_one_in_a_directory_is_never_opened() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fifo = tmp.path().join("pipe.py");
    if !mkfifo(&fifo) {
        eprintln!("mkfifo is not available: skipped");
        return;
    }
    // named explicitly: read like a file (a writer feeds it)
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::write(fifo, LEAK).expect("write the fifo"))
    };
    let (code, out, err, _) = lint_in(tmp.path(), &["lint", "pipe.py"]);
    writer.join().expect("writer");
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("pipe.py:4:5: OOM101"), "{out}");

    // in a walked directory: not opened (opening it would block with no writer)
    fs::write(tmp.path().join("ok.py"), "x = 1\n").expect("write");
    let (code, out, err, took) = lint_in(tmp.path(), &["lint", "."]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("All checks passed!"), "{out}");
    assert!(took < QUICK, "{took:?}");
}

#[test]
fn process_substitution_keeps_working() {
    let has_bash = Command::new("bash")
        .arg("-c")
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    if !has_bash {
        eprintln!("bash is not available: skipped");
        return;
    }
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#""$OOMKIT" lint <(printf 'losses = []\nfor batch in loader:\n    loss = model(batch)\n    losses.append(loss)\n')"#)
        .env("OOMKIT", env!("CARGO_BIN_EXE_oomkit"))
        .env("CLICOLOR", "0")
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains(":4:5: OOM101"), "{}", stdout(&out));
}

#[test]
fn explicit_non_python_paths_and_binary_files_are_errors() {
    let tmp = tempfile::tempdir().expect("tmp");
    fs::write(tmp.path().join("model.pt"), b"PK\x03\x04\0\0binary").expect("write");
    fs::write(tmp.path().join("notes.txt"), "xs.append(loss)\n").expect("write");
    fs::write(tmp.path().join("weights.py"), b"\x80\x02}q\0(X\0\0").expect("write");
    fs::write(tmp.path().join("README"), "just text\n").expect("write");
    fs::write(
        tmp.path().join("train"),
        format!("#!/usr/bin/env python3\n{LEAK}"),
    )
    .expect("write");
    let (code, out, err, _) = lint_in(
        tmp.path(),
        &[
            "lint",
            "model.pt",
            "notes.txt",
            "weights.py",
            "README",
            "train",
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    for name in ["model.pt", "notes.txt"] {
        assert!(
            err.contains(&format!("error: {name}: not a Python file (expected .py")),
            "{name}: {err}"
        );
    }
    assert!(
        err.contains("error: README: not a Python file (no .py, .pyi or .pyw extension and no `#!…python` line)"),
        "{err}"
    );
    assert!(
        err.contains("error: weights.py: a binary file (it contains NUL bytes)"),
        "{err}"
    );
    // an extensionless script with a python shebang is linted
    assert!(out.contains("train:5:5: OOM101"), "{out}");
    // a directory walk takes .py/.pyi/.pyw only: the others are not even read
    fs::remove_file(tmp.path().join("weights.py")).expect("rm");
    let (code, _, err, _) = lint_in(tmp.path(), &["lint", "."]);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn latin_1_with_a_pep_263_declaration_is_decoded_and_columns_count_characters() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut src =
        b"# -*- coding: latin-1 -*-\nlosses = []\nfor batch in loader:\n    loss = model(batch)\n"
            .to_vec();
    // columns count characters of the decoded text: `é` is one (it would be two UTF-8
    // bytes, which would give 15)
    src.extend_from_slice(b"    s = '\xe9'; losses.append(loss)\n");
    fs::write(tmp.path().join("latin.py"), &src).expect("write");
    let (code, out, err, _) = lint_in(tmp.path(), &["lint", "latin.py"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("latin.py:5:14: OOM101"), "{out}");

    fs::write(tmp.path().join("klingon.py"), "# coding: klingon\nx = 1\n").expect("write");
    let (code, _, err, _) = lint_in(tmp.path(), &["lint", "klingon.py"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("error: klingon.py: unknown encoding `klingon` in the coding declaration"),
        "{err}"
    );
}

#[test]
fn fix_writes_a_latin_1_file_back_in_latin_1() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut src = b"# -*- coding: latin-1 -*-\n# caf\xe9\n".to_vec();
    src.extend_from_slice(AMP.as_bytes());
    fs::write(tmp.path().join("amp.py"), &src).expect("write");
    let (code, out, err, _) = lint_in(
        tmp.path(),
        &["lint", "--extend-select", "upgrade", "--fix", "amp.py"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("(1 fixed)"), "{out}");
    let written = fs::read(tmp.path().join("amp.py")).expect("read");
    let mut want = b"# -*- coding: latin-1 -*-\n# caf\xe9\n".to_vec();
    want.extend_from_slice(b"import torch\nscaler = torch.amp.GradScaler(\"cuda\")\n");
    assert_eq!(written, want);
}

#[test]
fn fix_never_touches_an_unparsable_or_undecodable_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    let broken = format!("{AMP}def (:\n");
    let mut not_utf8 = AMP.as_bytes().to_vec();
    not_utf8.extend_from_slice(b"s = '\xe9'\n");
    let deep = format!("{AMP}x = {}1{}\n", "(".repeat(500), ")".repeat(500));
    let files: [(&str, &[u8]); 3] = [
        ("broken.py", broken.as_bytes()),
        ("latin.py", &not_utf8),
        ("deep.py", deep.as_bytes()),
    ];
    for (name, bytes) in files {
        fs::write(tmp.path().join(name), bytes).expect("write");
    }
    let (code, _, err, _) = lint_in(
        tmp.path(),
        &["lint", "--fix", "broken.py", "latin.py", "deep.py"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("error: broken.py:3:") && err.contains("syntax error"),
        "{err}"
    );
    assert!(err.contains("error: latin.py: not valid UTF-8"), "{err}");
    assert!(err.contains("error: deep.py: nesting deeper than"), "{err}");
    for (name, bytes) in files {
        assert_eq!(
            fs::read(tmp.path().join(name)).expect("read"),
            bytes,
            "{name} was modified"
        );
    }
}

#[test]
fn files_over_the_size_limit_are_skipped_with_a_warning() {
    let tmp = tempfile::tempdir().expect("tmp");
    let big = LEAK.repeat(100);
    fs::write(tmp.path().join("big.py"), &big).expect("write");
    fs::write(tmp.path().join("small.py"), "x = 1\n").expect("write");
    let (code, out, err, _) = lint_in(tmp.path(), &["lint", "--max-file-size", "4KiB", "."]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "warning: big.py: skipped, {} is over the 4.00 KiB file size limit",
            oomkit_core::Bytes(big.len() as u64)
        )),
        "{err}"
    );
    assert!(out.contains("All checks passed!"), "{out}");
    // the same from pyproject.toml; the flag wins over it
    fs::write(
        tmp.path().join("pyproject.toml"),
        "[tool.oomkit.lint]\nmax-file-size = \"4KiB\"\n",
    )
    .expect("write");
    let (code, _, err, _) = lint_in(tmp.path(), &["lint", "big.py"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning: big.py: skipped"), "{err}");
    let (code, out, err, _) = lint_in(tmp.path(), &["lint", "--max-file-size", "1MiB", "big.py"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("big.py:4:5: OOM101"), "{out}");
    // standard input is bounded too
    let mut child = oomkit()
        .current_dir(tmp.path())
        .args(["lint", "--max-file-size", "100", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut si = child.stdin.take().expect("stdin");
        let _ = si.write_all(big.as_bytes());
    }
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("standard input is larger than the 100 bytes limit"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn boms_are_handled_and_utf_16_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice(LEAK.as_bytes());
    fs::write(tmp.path().join("bom.py"), &bom).expect("write");
    let mut utf16 = vec![0xFF, 0xFE];
    for u in LEAK.encode_utf16() {
        utf16.extend_from_slice(&u.to_le_bytes());
    }
    fs::write(tmp.path().join("utf16.py"), &utf16).expect("write");
    let (code, out, err, _) = lint_in(tmp.path(), &["lint", "bom.py", "utf16.py"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(out.contains("bom.py:4:5: OOM101"), "{out}");
    assert!(
        err.contains("error: utf16.py: UTF-16 or UTF-32 text: Python only reads ASCII-compatible source encodings"),
        "{err}"
    );
}
