//! CLI assertions: build a run of the binary, then check what it did.
//!
//! ```ignore
//! use super::support::{cli, exit_2_says};
//! cli(&["estimate", "gpt2", "--format", "json"]).run().code(0).json();
//! cli(&["lint", "-"]).stdin("x = 1\n").cwd(dir).run().code(0).stdout_has("All checks passed");
//! cli(&["monitor", "--once"]).env("LD_LIBRARY_PATH", dir).within(limit).run().code(2);
//! // Table-driven bad input: every row exits 2 with one `error: …` line containing its fragment.
//! exit_2_says(&cli(&["estimate"]), &[(&["gpt2", "--gpu", "rtx-409"], "unknown GPU")]);
//! // `exit_2_is`: stderr is exactly the row's text; `exit_2_usage`: clap's
//! // several-line usage errors (`error:` first, the fragment somewhere).
//! ```
//!
//! Every failed check panics with the command line, the exit status and both
//! streams, so a failure reads without re-running anything. The table helpers
//! run every row before failing and name every failed row.

#![allow(dead_code)] // a helper module: not every test file uses every check

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use super::oomkit;

/// A run of the binary to be made: arguments, standard input, working
/// directory and environment. Without `cwd`, it runs in the system's
/// temporary directory (no project configuration is found there).
#[derive(Clone, Debug)]
pub struct Cli {
    args: Vec<OsString>,
    stdin: Option<Vec<u8>>,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, Option<OsString>)>,
    limit: Option<Duration>,
}

/// `oomkit ARGS…`.
pub fn cli(args: &[&str]) -> Cli {
    Cli {
        args: args.iter().map(OsString::from).collect(),
        stdin: None,
        cwd: None,
        env: Vec::new(),
        limit: None,
    }
}

impl Cli {
    /// One more argument (a path need not be UTF-8).
    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }

    /// More arguments.
    pub fn args(mut self, more: &[&str]) -> Self {
        self.args.extend(more.iter().map(OsString::from));
        self
    }

    /// Feeds `bytes` on standard input (otherwise it is `/dev/null`).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Runs in `dir`.
    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Self {
        self.cwd = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Sets an environment variable (on top of the hermetic set of [`oomkit`]).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env.push((key.into(), None));
        self
    }

    /// Kills the run and fails past `limit`: a hang fails the test instead
    /// of stalling the suite.
    pub fn within(mut self, limit: Duration) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The command line, for messages.
    pub fn line(&self) -> String {
        let mut s = String::from("oomkit");
        for a in &self.args {
            let _ = write!(s, " {}", a.to_string_lossy());
        }
        s
    }

    /// Runs it to the end and keeps what it printed.
    pub fn run(&self) -> Ran {
        let mut cmd = oomkit();
        cmd.args(&self.args)
            .current_dir(self.cwd.clone().unwrap_or_else(std::env::temp_dir))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{}: spawn: {e}", self.line()));
        // Write standard input on a thread: a large input and a large output
        // must not wait on each other.
        let feeder = self.stdin.clone().map(|input| {
            let mut pipe = child.stdin.take().expect("stdin");
            std::thread::spawn(move || {
                // The binary may exit before reading all of it (a refused input).
                let _ = pipe.write_all(&input);
            })
        });
        let out = match self.limit {
            None => child.wait_with_output(),
            Some(limit) => {
                // Drain both pipes on threads so a large output cannot block
                // the child while the clock runs.
                let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
                    std::thread::spawn(move || {
                        let mut buf = Vec::new();
                        if let Some(mut p) = pipe {
                            let _ = std::io::Read::read_to_end(&mut p, &mut buf);
                        }
                        buf
                    })
                };
                let out_pipe = drain(child.stdout.take().map(|p| Box::new(p) as _));
                let err_pipe = drain(child.stderr.take().map(|p| Box::new(p) as _));
                let start = Instant::now();
                let status = loop {
                    match child.try_wait() {
                        Ok(Some(status)) => break Ok(status),
                        Ok(None) if start.elapsed() > limit => {
                            let _ = child.kill();
                            let _ = child.wait();
                            panic!("{}: ran past {limit:?}", self.line());
                        }
                        Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                        Err(e) => break Err(e),
                    }
                };
                status.map(|status| Output {
                    status,
                    stdout: out_pipe.join().expect("stdout reader"),
                    stderr: err_pipe.join().expect("stderr reader"),
                })
            }
        }
        .unwrap_or_else(|e| panic!("{}: wait: {e}", self.line()));
        if let Some(f) = feeder {
            f.join().expect("stdin feeder");
        }
        Ran {
            line: self.line(),
            out,
        }
    }
}

/// A finished run: its exit status and both streams.
#[derive(Debug)]
pub struct Ran {
    line: String,
    /// The raw output.
    pub out: Output,
}

impl Ran {
    /// Standard output as text.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    /// Standard error as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    /// The exit code (`None` when a signal ended it).
    pub fn status(&self) -> Option<i32> {
        self.out.status.code()
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "{}\n  {what}\n  exit: {:?}\n  stdout: {}\n  stderr: {}",
            self.line,
            self.out.status.code(),
            self.stdout(),
            self.stderr()
        )
    }

    /// Exits with `code`.
    #[track_caller]
    pub fn code(&self, code: i32) -> &Self {
        if self.out.status.code() != Some(code) {
            self.fail(&format!("expected exit {code}"));
        }
        self
    }

    /// Standard output contains `part`.
    #[track_caller]
    pub fn stdout_has(&self, part: &str) -> &Self {
        if !self.stdout().contains(part) {
            self.fail(&format!("expected stdout to contain {part:?}"));
        }
        self
    }

    /// Standard output is exactly `text`.
    #[track_caller]
    pub fn stdout_is(&self, text: &str) -> &Self {
        if self.stdout() != text {
            self.fail(&format!("expected stdout to be {text:?}"));
        }
        self
    }

    /// Standard error contains `part`.
    #[track_caller]
    pub fn stderr_has(&self, part: &str) -> &Self {
        if !self.stderr().contains(part) {
            self.fail(&format!("expected stderr to contain {part:?}"));
        }
        self
    }

    /// Standard error is exactly `text`.
    #[track_caller]
    pub fn stderr_is(&self, text: &str) -> &Self {
        if self.stderr() != text {
            self.fail(&format!("expected stderr to be {text:?}"));
        }
        self
    }

    /// Standard error is one line.
    #[track_caller]
    pub fn stderr_one_line(&self) -> &Self {
        if self.stderr().trim_end().lines().count() != 1 {
            self.fail("expected one line on stderr");
        }
        self
    }

    /// Standard error is one `error: …` line.
    #[track_caller]
    pub fn one_error_line(&self) -> &Self {
        if !self.stderr().starts_with("error") {
            self.fail("expected stderr to start with `error`");
        }
        self.stderr_one_line()
    }

    /// Standard output parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.out.stdout)
            .unwrap_or_else(|e| self.fail(&format!("expected JSON on stdout ({e})")))
    }
}

/// Runs every row's arguments after `base`'s and returns the failures.
fn table(base: &Cli, rows: &[(&[&str], &str)], check: impl Fn(&Ran, &str) -> bool) {
    let mut failed = String::new();
    for (args, want) in rows {
        let ran = base.clone().args(args).run();
        if !check(&ran, want) {
            let _ = writeln!(
                failed,
                "{}\n    wanted: {want:?}\n    exit {:?}, stderr: {:?}",
                ran.line,
                ran.status(),
                ran.stderr()
            );
        }
    }
    assert!(failed.is_empty(), "rows failed:\n{failed}");
}

/// Bad input, table-driven: each row (arguments after `base`'s, fragment)
/// exits 2 with one `error: …` line on stderr that contains the fragment.
#[track_caller]
pub fn exit_2_says(base: &Cli, rows: &[(&[&str], &str)]) {
    table(base, rows, |ran, want| {
        let e = ran.stderr();
        ran.status() == Some(2)
            && e.starts_with("error")
            && e.trim_end().lines().count() == 1
            && e.contains(want)
    });
}

/// Like [`exit_2_says`], but stderr is exactly the row's text.
#[track_caller]
pub fn exit_2_is(base: &Cli, rows: &[(&[&str], &str)]) {
    table(base, rows, |ran, want| {
        ran.status() == Some(2) && ran.stderr() == want
    });
}

/// Arguments the parser refuses (clap's usage errors are several lines):
/// each row exits 2 with stderr starting `error:` and containing the fragment.
#[track_caller]
pub fn exit_2_usage(base: &Cli, rows: &[(&[&str], &str)]) {
    table(base, rows, |ran, want| {
        let e = ran.stderr();
        ran.status() == Some(2) && e.starts_with("error:") && e.contains(want)
    });
}

/// A byte figure of an estimate's JSON: a top-level key, else one of its
/// `components`.
pub fn estimate_bytes(j: &serde_json::Value, key: &str) -> u64 {
    j[key]
        .as_u64()
        .or_else(|| j["components"][key].as_u64())
        .unwrap_or_else(|| panic!("{key} in {j}"))
}
