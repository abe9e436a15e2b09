//! The documentation's examples run: every ```` ```console ```` block of the
//! README (and of any `docs/*.md`, `CONTRIBUTING.md`, `bench/README.md`) is a
//! shell session whose `oomkit` commands this test executes through the real
//! binary, comparing what they print with what the block shows. The syntax is
//! trycmd's, so the blocks read as ordinary terminal sessions:
//!
//! - `$ oomkit ARGS…` runs the binary (words split as a shell splits them;
//!   `NAME=value` before it sets an environment variable; a line ending in `\`
//!   continues on the next; `target/debug/oomkit` is the same binary).
//!   `LD_LIBRARY_PATH=/tmp/nvml` is the stand-in NVML library that the
//!   README's "Testing without a GPU" links there (the test links a private
//!   copy). `$ cd DIR` changes the directory for the rest of the block; every
//!   block starts at the repository root. Nothing else runs: no pipes,
//!   redirections or `$` expansions.
//! - `? N` right after a command: its exit status (default 0).
//! - The lines after it, up to the next `$` line or the block's end: its
//!   standard output followed by its standard error. Trailing spaces and
//!   trailing blank lines do not count. A line that is only `...` stands for
//!   any number of lines (abridged output); `[..]` inside a line stands for any
//!   text (a time, a path that differs between machines).
//! - Output that starts with `{` or `[` and is not the same text is compared
//!   as JSON with standard output alone, so the docs may reflow it and leave
//!   parts out with `…`: a value `…` is any value, an element `…` any run of
//!   elements, a member `…` any further members, a string ending in `…` any
//!   string it starts. Everything else must be there, and nothing more: an
//!   object without a `…` member has exactly the keys shown.
//! - `<!-- docs-test: skip: REASON -->` on the line before a block: the block
//!   is not run (it needs a GPU, a network, or a user's own files), and the
//!   reason says why. Blocks of other kinds (`text`, `sh`, `json`) are not
//!   run; `install.rs` checks that their commands parse.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::install::shell_words;
use crate::oomkit;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents whose console blocks run.
pub(crate) fn documents() -> Vec<PathBuf> {
    let mut docs = vec![
        PathBuf::from("README.md"),
        PathBuf::from("CONTRIBUTING.md"),
        PathBuf::from("bench/README.md"),
    ];
    let mut more: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter_map(|p| p.strip_prefix(root()).ok().map(Path::to_path_buf))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// One `$` line of a console block, with what it must print.
#[derive(Debug)]
struct Step {
    /// Where the `$` line is, `README.md:709`.
    at: String,
    /// Directory relative to the repository root.
    cwd: PathBuf,
    env: Vec<(String, String)>,
    /// The binary's arguments (after `oomkit`).
    args: Vec<String>,
    status: i32,
    expected: Vec<String>,
}

/// A console block (its steps), or a block of any kind marked skipped.
#[derive(Debug)]
struct Block {
    skip: Option<String>,
    steps: Vec<Step>,
    /// The block's lines, `$ ` removed.
    lines: Vec<String>,
}

const SKIP: &str = "<!-- docs-test: skip:";

/// The console blocks of one document. Malformed blocks are errors, not
/// silently ignored examples.
fn console_blocks(doc: &Path) -> Result<Vec<Block>, String> {
    let text = std::fs::read_to_string(root().join(doc)).map_err(|e| format!("{doc:?}: {e}"))?;
    let name = doc.display().to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_start();
        let Some(info) = t.strip_prefix("```") else {
            if t.starts_with(SKIP)
                && !lines
                    .get(i + 1)
                    .is_some_and(|l| l.trim_start().starts_with("```"))
            {
                return Err(format!(
                    "{name}:{}: a skip marker must stand right before a code block",
                    i + 1
                ));
            }
            i += 1;
            continue;
        };
        let indent = line.len() - t.len();
        let start = i;
        let skip = match i.checked_sub(1).map(|p| lines[p].trim()) {
            Some(prev) if prev.starts_with(SKIP) => {
                let reason = prev.trim_start_matches(SKIP).trim_end_matches("-->").trim();
                if reason.is_empty() {
                    return Err(format!("{name}:{start}: a skipped block needs its reason"));
                }
                Some(reason.to_owned())
            }
            _ => None,
        };
        // The block's body, without the fence's indentation.
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            let l = lines[i];
            body.push((
                i + 1,
                l.get(indent.min(l.len() - l.trim_start().len())..)
                    .unwrap_or(""),
            ));
            i += 1;
        }
        i += 1;
        let lines = body
            .iter()
            .map(|(_, l)| l.trim().trim_start_matches("$ ").to_owned())
            .collect();
        if info.trim() != "console" {
            if skip.is_some() {
                blocks.push(Block {
                    skip,
                    steps: Vec::new(),
                    lines,
                });
            }
            continue;
        }
        let at = format!("{name}:{}", start + 1);
        let steps = if skip.is_some() {
            Vec::new()
        } else {
            parse_session(&name, &body)?
        };
        if skip.is_none() && steps.is_empty() {
            return Err(format!("{at}: a console block without a `$ oomkit` line"));
        }
        blocks.push(Block { skip, steps, lines });
    }
    Ok(blocks)
}

/// The `$` lines of one block and the output each must print.
fn parse_session(name: &str, body: &[(usize, &str)]) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut cwd = PathBuf::new();
    let mut k = 0;
    while k < body.len() {
        let (n, line) = body[k];
        let Some(first) = line.strip_prefix("$ ") else {
            match steps.last_mut() {
                Some(step) => step.expected.push(line.trim_end().to_owned()),
                None => return Err(format!("{name}:{n}: output before the first `$` line")),
            }
            k += 1;
            continue;
        };
        let at = format!("{name}:{n}");
        // Continuation lines.
        let mut command = first.to_owned();
        while let Some(cont) = command.strip_suffix('\\') {
            command = cont.to_owned();
            k += 1;
            let (_, next) = body
                .get(k)
                .ok_or_else(|| format!("{at}: `\\` at the block's end"))?;
            command.push(' ');
            command.push_str(next.trim());
        }
        k += 1;
        if let Some(op) = shell_operator(&command) {
            return Err(format!(
                "{at}: `{op}` is shell syntax the docs test does not run"
            ));
        }
        let words = shell_words(&command);
        let assignments = words.iter().take_while(|w| is_assignment(w)).count();
        let env: Vec<(String, String)> = words[..assignments]
            .iter()
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let rest = &words[assignments..];
        match rest.split_first() {
            Some((program, args)) if program == "cd" && env.is_empty() && args.len() == 1 => {
                cwd = cwd.join(&args[0]);
                if !root().join(&cwd).is_dir() {
                    return Err(format!("{at}: no directory {}", cwd.display()));
                }
            }
            Some((program, args)) if BINARIES.contains(&program.as_str()) => {
                let mut status = 0;
                if let Some(s) = body.get(k).and_then(|(_, l)| l.strip_prefix("? ")) {
                    status = s
                        .trim()
                        .parse()
                        .map_err(|_| format!("{at}: `? {s}` is not an exit status"))?;
                    k += 1;
                }
                steps.push(Step {
                    at,
                    cwd: cwd.clone(),
                    env,
                    args: args.to_vec(),
                    status,
                    expected: Vec::new(),
                });
                continue;
            }
            _ => {
                return Err(format!(
                    "{at}: only `oomkit …` and `cd DIR` run in a console block"
                ));
            }
        }
        // `cd` prints nothing.
        if body
            .get(k)
            .is_some_and(|(_, l)| !l.starts_with("$ ") && !l.trim().is_empty())
        {
            return Err(format!("{at}: output after `cd`"));
        }
    }
    Ok(steps)
}

/// What runs the binary under test in a console block.
const BINARIES: [&str; 3] = ["oomkit", "target/debug/oomkit", "target/release/oomkit"];

/// The folder the README's "Testing without a GPU" links the stand-in NVML
/// library into; a step that puts it on `LD_LIBRARY_PATH` gets a private one.
const STANDIN_DIR: &str = "/tmp/nvml";

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The first shell operator or expansion outside quotes, if any.
fn shell_operator(command: &str) -> Option<char> {
    let mut quote: Option<char> = None;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '$' | '`') => return Some(c),
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '|' | '>' | '<' | ';' | '&' | '$' | '`' | '*' | '~') => return Some(c),
            (None, _) => {}
        }
    }
    None
}

/// What one step printed.
struct Ran {
    status: Option<i32>,
    stdout: String,
    /// Standard output then standard error, as lines without trailing spaces.
    lines: Vec<String>,
}

/// Runs one step.
fn run(step: &Step) -> Ran {
    let nvml = tempfile::tempdir().expect("tmp");
    let mut env = step.env.clone();
    for (k, v) in &mut env {
        if k == "LD_LIBRARY_PATH" && v == STANDIN_DIR {
            // Test binaries live in target/<profile>/deps/, beside the cdylib.
            let exe = std::env::current_exe().expect("test binary");
            let so = exe.with_file_name("liboomkit_nvml_standin.so");
            std::os::unix::fs::symlink(&so, nvml.path().join("libnvidia-ml.so.1"))
                .expect("link the stand-in");
            *v = nvml.path().to_string_lossy().into_owned();
        }
    }
    let mut child = oomkit()
        .current_dir(root().join(&step.cwd))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(&step.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oomkit");
    let mut out_pipe = child.stdout.take().expect("stdout");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut out_pipe, &mut buf).map(|_| buf)
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut err_pipe, &mut buf).map(|_| buf)
    });
    let start = Instant::now();
    let limit = Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{}: ran past {limit:?}", step.at);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout =
        String::from_utf8_lossy(&out.join().expect("stdout").expect("read stdout")).into_owned();
    let mut text = stdout.clone();
    text.push_str(&String::from_utf8_lossy(
        &err.join().expect("stderr").expect("read stderr"),
    ));
    Ran {
        status: status.code(),
        stdout,
        lines: trimmed(text.lines().map(str::to_owned).collect()),
    }
}

/// The docs' JSON, with `…` read as "left out": a value `…` (or a string
/// `"…"`) is any value, a member `…` any further members, an element `…` any
/// run of elements, a string ending in `…` any string it starts.
fn docs_json(text: &str) -> Option<serde_json::Value> {
    // Outside strings, `…` becomes a string the matcher knows; in an object's
    // member position it becomes a member named `…`.
    let mut out = String::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut stack: Vec<char> = Vec::new();
    let mut after_colon = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => {
                stack.push(c);
                after_colon = false;
            }
            '}' | ']' => {
                stack.pop();
            }
            ':' => after_colon = true,
            ',' => after_colon = false,
            '…' => {
                // `-…`: a negative number left out.
                if out.ends_with('-') {
                    out.pop();
                }
                let member = stack.last() == Some(&'{') && !after_colon;
                out.push_str(if member {
                    "\"…\": \"…\""
                } else {
                    "\"…\""
                });
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    serde_json::from_str(&out).ok()
}

/// `actual` has what `docs` shows (see `docs_json`); objects without a `…`
/// member have exactly the keys shown, arrays without a `…` element exactly
/// the elements shown.
fn json_matches(docs: &serde_json::Value, actual: &serde_json::Value) -> bool {
    let mut diffs = Vec::new();
    json_diff(docs, actual, "", &mut diffs);
    diffs.is_empty()
}

/// Where `actual` differs from `docs`, one line per place (JSON pointer).
fn json_diff(
    docs: &serde_json::Value,
    actual: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    const ANY: &str = "…";
    let short = |v: &Value| {
        let t = v.to_string();
        match t.char_indices().nth(120) {
            Some((i, _)) => format!("{}…", &t[..i]),
            None => t,
        }
    };
    let same = match (docs, actual) {
        (Value::String(d), _) if d == ANY => true,
        (Value::String(d), Value::String(a)) => match d.strip_suffix(ANY) {
            Some(prefix) => a.starts_with(prefix),
            None => d == a,
        },
        (Value::Number(d), Value::Number(a)) => d.as_f64() == a.as_f64(),
        (Value::Object(d), Value::Object(a)) => {
            for (k, v) in d.iter().filter(|(k, _)| k.as_str() != ANY) {
                match a.get(k) {
                    Some(av) => json_diff(v, av, &format!("{at}/{k}"), out),
                    None => out.push(format!("{at}/{k}: in the docs, not printed")),
                }
            }
            if !d.contains_key(ANY) {
                for (k, v) in a.iter().filter(|(k, _)| !d.contains_key(*k)) {
                    out.push(format!(
                        "{at}/{k}: printed ({}), not in the docs (show it, or `…`)",
                        short(v)
                    ));
                }
            }
            true
        }
        (Value::Array(d), Value::Array(a)) => {
            if d.len() == a.len() && !d.iter().any(|e| e == ANY) {
                for (i, (de, ae)) in d.iter().zip(a).enumerate() {
                    json_diff(de, ae, &format!("{at}/{i}"), out);
                }
                true
            } else if elements_match(d, a) {
                true
            } else {
                // Point at the shown elements that match none printed, against
                // the element printed at the same place.
                for (i, de) in d.iter().enumerate().filter(|(_, e)| *e != ANY) {
                    if !a.iter().any(|ae| json_matches(de, ae)) {
                        match a.get(i) {
                            Some(ae) => json_diff(de, ae, &format!("{at}/{i}"), out),
                            None => out.push(format!("{at}/{i}: in the docs, not printed")),
                        }
                    }
                }
                false
            }
        }
        (d, a) => d == a,
    };
    if !same {
        out.push(format!(
            "{at}: the docs show {}, the binary printed {}",
            short(docs),
            short(actual)
        ));
    }
}

fn elements_match(docs: &[serde_json::Value], actual: &[serde_json::Value]) -> bool {
    match docs.split_first() {
        None => actual.is_empty(),
        Some((serde_json::Value::String(s), rest)) if s == "…" => {
            (0..=actual.len()).any(|skip| elements_match(rest, &actual[skip..]))
        }
        Some((d, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| json_matches(d, a) && elements_match(rest, more)),
    }
}

/// Trailing spaces and trailing blank lines removed.
fn trimmed(mut lines: Vec<String>) -> Vec<String> {
    for l in &mut lines {
        l.truncate(l.trim_end().len());
    }
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

/// One line against a pattern with `[..]` wildcards.
fn line_matches(pattern: &str, line: &str) -> bool {
    let mut parts = pattern.split("[..]");
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// All lines against the expected ones, `...` matching any run of lines.
fn output_matches(expected: &[String], actual: &[String]) -> bool {
    // can[i][j]: expected[i..] matches actual[j..].
    let (n, m) = (expected.len(), actual.len());
    let mut can = vec![vec![false; m + 1]; n + 1];
    can[n][m] = true;
    for i in (0..n).rev() {
        for j in (0..=m).rev() {
            can[i][j] = if expected[i].trim() == "..." {
                can[i + 1][j] || (j < m && can[i][j + 1])
            } else {
                j < m && line_matches(&expected[i], &actual[j]) && can[i + 1][j + 1]
            };
        }
    }
    can[0][0]
}

/// Where matching fails: the first expected line that can stand after no
/// prefix of the output, with the output line it was compared to.
fn first_mismatch(expected: &[String], actual: &[String]) -> String {
    // reach[j]: expected[..i] matches actual[..j].
    let mut reach = vec![false; actual.len() + 1];
    reach[0] = true;
    for (i, e) in expected.iter().enumerate() {
        let mut next = vec![false; actual.len() + 1];
        if e.trim() == "..." {
            let from = reach.iter().position(|r| *r).unwrap_or(actual.len());
            next[from..].fill(true);
        } else {
            for (j, a) in actual.iter().enumerate() {
                next[j + 1] = reach[j] && line_matches(e, a);
            }
        }
        if !next.contains(&true) {
            let j = reach.iter().position(|r| *r).unwrap_or(0);
            return match actual.get(j) {
                Some(a) => format!(
                    "output line {}: the docs show (their line {})\n    {e}\n  the binary printed\n    {a}",
                    j + 1,
                    i + 1
                ),
                None => format!("the output ends before the docs' line {}:\n    {e}", i + 1),
            };
        }
        reach = next;
    }
    format!(
        "the output goes on past what the docs show ({} lines)",
        expected.len()
    )
}

fn all_blocks() -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut errors = Vec::new();
    for doc in documents() {
        match console_blocks(&doc) {
            Ok(b) => blocks.extend(b),
            Err(e) => errors.push(e),
        }
    }
    assert!(
        errors.is_empty(),
        "malformed console blocks:\n{}",
        errors.join("\n")
    );
    blocks
}

#[test]
fn readme_examples_print_what_the_docs_show() {
    let blocks = all_blocks();
    let steps: Vec<&Step> = blocks.iter().flat_map(|b| &b.steps).collect();
    assert!(
        steps.len() >= 8,
        "only {} documented commands run",
        steps.len()
    );
    // Two at a time: the probe and run examples spend most of their time waiting.
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = steps
            .chunks(steps.len().div_ceil(2))
            .map(|chunk| {
                s.spawn(move || {
                    let mut failures = Vec::new();
                    for step in chunk {
                        let ran = run(step);
                        let (status, actual) = (ran.status, &ran.lines);
                        let expected = trimmed(step.expected.clone());
                        // JSON the docs reflowed or abridged with `…` is compared as
                        // JSON, with standard output alone.
                        let is_json = expected.first().is_some_and(|l| l.starts_with(['{', '[']));
                        let json_diffs = || {
                            let Some(docs) = docs_json(&expected.join("\n")) else {
                                return vec!["the docs' JSON does not parse".to_owned()];
                            };
                            let Ok(out) = serde_json::from_str(&ran.stdout) else {
                                return vec!["standard output is not JSON".to_owned()];
                            };
                            let mut diffs = Vec::new();
                            json_diff(&docs, &out, "", &mut diffs);
                            diffs
                        };
                        let diffs = if output_matches(&expected, actual) {
                            Vec::new()
                        } else if is_json {
                            json_diffs()
                        } else {
                            vec![first_mismatch(&expected, actual)]
                        };
                        let same = diffs.is_empty();
                        if status != Some(step.status) || !same {
                            failures.push(format!(
                                "{}: $ oomkit {} (in ./{})\n  exit status {status:?}{}\n  {}\n  --- full output ---\n{}",
                                step.at,
                                step.args.join(" "),
                                step.cwd.display(),
                                if status == Some(step.status) {
                                    " as documented".to_owned()
                                } else {
                                    format!(", the docs say {}", step.status)
                                },
                                diffs.join("\n  "),
                                actual.join("\n")
                            ));
                        }
                    }
                    failures
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("docs thread"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} documented example(s) print something else:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Every README command that names a file of this repository (a bundled
/// input) is one the test above runs, or stands in a block skipped with a reason.
#[test]
fn readme_commands_on_bundled_inputs_are_run() {
    let blocks = all_blocks();
    let run: Vec<&Vec<String>> = blocks
        .iter()
        .flat_map(|b| &b.steps)
        .map(|s| &s.args)
        .collect();
    let skipped_lines: Vec<&String> = blocks
        .iter()
        .filter(|b| b.skip.is_some())
        .flat_map(|b| &b.lines)
        .collect();
    let mut missing = Vec::new();
    for argv in crate::install::readme_commands() {
        let names_bundled_file = argv.iter().any(|a| {
            let a = a.split_once('=').map_or(a.as_str(), |(_, v)| v);
            a.contains('/') && root().join(a).is_file()
        });
        if !names_bundled_file || run.contains(&&argv) {
            continue;
        }
        let shown = argv.join(" ");
        if skipped_lines.iter().any(|l| l.contains(&shown)) {
            continue;
        }
        missing.push(format!("oomkit {shown}"));
    }
    assert!(
        missing.is_empty(),
        "README commands on bundled inputs that no console block runs (make them `console` \
         blocks with their output, or mark the block skipped with a reason):\n{}",
        missing.join("\n")
    );
}

#[test]
fn docs_harness_matches_like_trycmd() {
    let v = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    assert!(line_matches("a [..] c", "a b c"));
    assert!(line_matches("[..]", ""));
    assert!(line_matches("x[..]y[..]z", "xyyz"));
    assert!(!line_matches("a [..] c", "a b d"));
    assert!(!line_matches("abc", "abcd"));
    assert!(output_matches(
        &v(&["a", "...", "d"]),
        &v(&["a", "b", "c", "d"])
    ));
    assert!(output_matches(&v(&["a", "...", "b"]), &v(&["a", "b"])));
    assert!(output_matches(
        &v(&["...", "b", "..."]),
        &v(&["a", "b", "b", "c"])
    ));
    assert!(!output_matches(
        &v(&["a", "...", "d"]),
        &v(&["a", "b", "c"])
    ));
    assert!(!output_matches(&v(&["a"]), &v(&["a", "b"])));
    let j = |s: &str| serde_json::from_str::<serde_json::Value>(s).expect("json");
    let d = |s: &str| docs_json(s).expect("docs json");
    let cases = [
        (r#"{"a": 1, "b": […]}"#, r#"{"b": [1, 2], "a": 1.0}"#, true),
        (r#"{"a": 1}"#, r#"{"a": 1, "b": 2}"#, false),
        (r#"{"a": 1, …}"#, r#"{"a": 1, "b": 2}"#, true),
        (
            r#"{"a": …, "s": "x…"}"#,
            r#"{"a": {"z": 0}, "s": "xyz"}"#,
            true,
        ),
        (r#"[1, …, 4]"#, r#"[1, 2, 3, 4]"#, true),
        (r#"[1, …, 4]"#, r#"[1, 2, 3]"#, false),
        (r#"[{"a": "…"}, …]"#, r#"[{"a": [1]}, {"b": 2}]"#, true),
        (r#"{"s": "a … b"}"#, r#"{"s": "a x b"}"#, false),
    ];
    for (docs, actual, want) in cases {
        assert_eq!(
            json_matches(&d(docs), &j(actual)),
            want,
            "{docs} vs {actual}"
        );
    }
    assert_eq!(shell_operator("oomkit x | head"), Some('|'));
    assert_eq!(shell_operator("oomkit --alert-cmd 'kill $(cat p)'"), None);
    assert_eq!(shell_operator("oomkit \"$HOME\""), Some('$'));
}
