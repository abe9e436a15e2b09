//! `oomkit lint`: find the files, read them, lint them in parallel with
//! `oomkit_lint`, print one format, return 0 clean / 1 findings / 2 errors.
//!
//! Hostile input: every read is bounded by `--max-file-size` (`input::read_limited`);
//! a regular file over it is skipped with a warning, a device or FIFO that goes on
//! past it is an error. A directory walk opens regular `.py`/`.pyi`/`.pyw` files only.
#![deny(clippy::indexing_slicing, clippy::string_slice)]

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use oomkit_lint::{
    Diagnostic, LintConfig, Project, RULES, Selection, Settings, render, rule_set, sarif,
};
use rayon::prelude::*;
use serde_json::json;

use crate::cli::{ColorChoice, LintArgs, LintFormat};
use crate::output;

/// A file that could not be linted.
struct FileError {
    path: String,
    line: Option<usize>,
    column: Option<usize>,
    message: String,
}

enum Outcome {
    Linted {
        diagnostics: Vec<Diagnostic>,
        fixed: usize,
        summary: oomkit_lint::tree::Summary,
    },
    Failed(FileError),
    /// A regular file over the size limit: a warning, not an error (as ruff does).
    Skipped(String),
}

/// The extensions of Python files and Jupyter notebooks: a directory walk lints these
/// only.
const PYTHON_EXTENSIONS: &[&str] = &["py", "pyi", "pyw", "ipynb"];

fn has_python_extension(path: &Path) -> bool {
    path.extension()
        .is_some_and(|x| PYTHON_EXTENSIONS.iter().any(|p| x == *p))
}

fn is_notebook(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "ipynb")
}

pub fn run(args: LintArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let mut out = output::stdout(color);
    if let Some(code) = &args.explain {
        return explain(&mut out, code, args.format);
    }
    let (config, project) = find_config()?;
    let select = args.select.clone().or(config.select.clone());
    let mut extend_select = config.extend_select.clone();
    extend_select.extend(args.extend_select.iter().cloned());
    let mut ignore = config.ignore.clone();
    ignore.extend(args.ignore.iter().cloned());
    let settings = Settings {
        rules: rule_set(Selection {
            select: select.as_deref(),
            extend_select: &extend_select,
            ignore: &ignore,
            preview: args.preview || config.preview.unwrap_or(false),
        })?,
        project,
    };
    let limit = match args.max_file_size {
        Some(n) => n,
        None => config
            .max_file_size()?
            .unwrap_or(oomkit_lint::DEFAULT_MAX_FILE_SIZE),
    };

    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    if paths.iter().any(|p| p.as_os_str() == "-") {
        if paths.len() > 1 {
            bail!("`-` (standard input) cannot be combined with other paths");
        }
        return stdin(&mut out, &args, &settings, limit);
    }
    // the walk runs on its own thread and each file is linted as soon as it is found
    // (the walk took a tenth of the run before any file was linted); the
    // outcomes come in any order, and everything printed is sorted
    let walk = Walk::new(&paths, &config.exclude)?;
    let pool = pool()?;
    let (send, found) = std::sync::mpsc::channel();
    let (linted, mut errors) = std::thread::scope(|scope| {
        let walker = scope.spawn(move || {
            walk.run(&mut |path| {
                // the receiver lives until the walk ends
                let _ = send.send(path);
            })
        });
        let linted: Vec<(PathBuf, Outcome)> = pool.install(|| {
            sent_paths(found)
                .par_bridge()
                .map(|path| {
                    let outcome = lint_file(&path, &settings, args.fix, limit);
                    (path, outcome)
                })
                .collect()
        });
        let errors = walker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (linted, errors)
    });
    let (files, outcomes): (Vec<PathBuf>, Vec<Outcome>) = linted.into_iter().unzip();
    let mut diagnostics = Vec::new();
    let mut fixed = 0usize;
    let mut warnings = Vec::new();
    let mut tree = oomkit_lint::tree::Tree::default();
    for o in outcomes {
        match o {
            Outcome::Linted {
                diagnostics: d,
                fixed: f,
                summary,
            } => {
                diagnostics.extend(d);
                fixed = fixed.saturating_add(f);
                tree.add(summary);
            }
            Outcome::Failed(e) => errors.push(e),
            Outcome::Skipped(w) => warnings.push(w),
        }
    }
    // the project pass: evidence from the other files of the tree
    let helpers = oomkit_lint::tree::pending_helpers(&diagnostics);
    if !helpers.is_empty() {
        let named: Vec<Vec<&str>> = pool.install(|| {
            files
                .par_iter()
                .map(|path| helpers_named_in(path, &helpers, limit))
                .collect()
        });
        for h in named.into_iter().flatten() {
            tree.mentioned(h);
        }
    }
    oomkit_lint::tree::settle(&mut diagnostics, &tree);
    warnings.sort();
    {
        let mut err = anstream::stderr();
        for w in &warnings {
            let _ = writeln!(err, "warning: {w}");
        }
    }
    diagnostics.sort_by(|a, b| {
        (&a.path, a.line, a.column, a.code).cmp(&(&b.path, b.line, b.column, b.code))
    });
    errors.sort_by(|a, b| a.path.cmp(&b.path));
    for e in &errors {
        output::print_input_error(&anyhow::anyhow!("{}", describe(e)));
    }
    print_results(&mut out, &args, &diagnostics, &errors, fixed)?;
    out.flush()?;
    Ok(if !errors.is_empty() {
        2
    } else if diagnostics.is_empty() {
        0
    } else {
        1
    })
}

/// Worker threads with a large stack: syntax trees of generated code can be very deep
/// (a 100,000-term `a + b + …` chain), and the parser, the checker and the tree's drop
/// recurse. `oomkit_lint` refuses files deeper than `MAX_NESTING` / `MAX_EXPR_DEPTH`
/// before parsing, and a file at those limits needs about 50 MiB of this stack in a
/// release build (about 130 MiB in a debug build, which the tests use). The stack is
/// virtual memory; only what is touched is committed.
fn pool() -> anyhow::Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .stack_size(STACK)
        .build()
        .context("cannot start worker threads")
}

const STACK: usize = 256 << 20;

fn describe(e: &FileError) -> String {
    // The path and the parser's message (which may quote the source) are input.
    let (path, message) = (
        oomkit_core::text::escape(&e.path),
        oomkit_core::text::escape(&e.message),
    );
    match (e.line, e.column) {
        (Some(l), Some(c)) => format!("{path}:{l}:{c}: {message}"),
        _ => format!("{path}: {message}"),
    }
}

fn print_results(
    out: &mut impl Write,
    args: &LintArgs,
    diagnostics: &[Diagnostic],
    errors: &[FileError],
    fixed: usize,
) -> anyhow::Result<()> {
    match args.format {
        LintFormat::Human => {
            if args.statistics {
                write!(out, "{}", render::statistics(diagnostics))?;
            } else {
                write!(out, "{}", render::human(diagnostics))?;
                if errors.is_empty() {
                    writeln!(out, "{}", render::summary(diagnostics, fixed))?;
                } else {
                    let n = errors.len();
                    let files = if n == 1 { "file" } else { "files" };
                    let d = diagnostics.len();
                    let problems = if d == 1 { "problem" } else { "problems" };
                    writeln!(
                        out,
                        "Found {d} {problems}; {n} {files} could not be linted."
                    )?;
                }
            }
        }
        LintFormat::Json => {
            let errs: Vec<_> = errors
                .iter()
                .map(|e| json!({"path": e.path, "line": e.line, "column": e.column, "message": e.message}))
                .collect();
            let doc = if args.statistics {
                let mut counts = std::collections::BTreeMap::<&str, (usize, &str)>::new();
                for d in diagnostics {
                    counts.entry(d.code).or_insert((0, d.name)).0 += 1;
                }
                let stats: Vec<_> = counts
                    .into_iter()
                    .map(
                        |(code, (count, name))| json!({"code": code, "name": name, "count": count}),
                    )
                    .collect();
                json!({"version": 1, "statistics": stats, "errors": errs})
            } else {
                json!({"version": 1, "diagnostics": diagnostics, "errors": errs})
            };
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)?;
        }
        LintFormat::Sarif => {
            let doc = sarif::to_sarif(diagnostics, env!("CARGO_PKG_VERSION"));
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)?;
        }
        LintFormat::Github => write!(out, "{}", render::github(diagnostics))?,
    }
    Ok(())
}

fn explain(out: &mut impl Write, code: &str, format: LintFormat) -> anyhow::Result<u8> {
    let Some(rule) = RULES
        .iter()
        .find(|r| r.code.eq_ignore_ascii_case(code) || r.name == code)
    else {
        bail!("unknown rule `{code}` (expected a code like OOM101 or a rule name)");
    };
    match format {
        LintFormat::Json => {
            let doc = json!({"code": rule.code, "name": rule.name, "remedy": rule.remedy,
                "fixable": rule.fixable, "category": rule.category.name(),
                "default": rule.category.is_default() && !rule.preview,
                "preview": rule.preview, "explanation": oomkit_lint::explain(rule)});
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)?;
        }
        _ => write!(out, "{}", oomkit_lint::explain(rule))?,
    }
    Ok(0)
}

/// The files that say which library versions a project uses (with `requirements*.txt`),
/// read from the nearest directory at or above the working directory that has any.
const VERSION_FILES: &[&str] = &["pyproject.toml", "uv.lock", "poetry.lock"];

/// `[tool.oomkit.lint]` from the nearest `pyproject.toml` at or above the working
/// directory, and the library versions pinned in the nearest directory with version
/// files (`pyproject.toml`, `requirements*.txt`, `uv.lock`, `poetry.lock`). Version
/// files are small; one over 1 MiB or unreadable adds nothing.
fn find_config() -> anyhow::Result<(LintConfig, Project)> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let mut config = None;
    let mut project = None;
    for dir in cwd.ancestors() {
        let file = dir.join("pyproject.toml");
        if config.is_none() && file.is_file() {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let cfg = LintConfig::from_pyproject(&text)
                .with_context(|| format!("in {}", file.display()))?;
            config = Some(cfg.unwrap_or_default());
        }
        if project.is_none() {
            let files: Vec<PathBuf> = VERSION_FILES
                .iter()
                .map(|n| dir.join(n))
                .filter(|p| p.is_file())
                .chain(requirement_files(dir))
                .collect();
            if !files.is_empty() {
                let mut p = Project::default();
                for path in files {
                    let small = std::fs::metadata(&path).is_ok_and(|m| m.len() <= 1 << 20);
                    if let (true, Ok(text)) = (small, std::fs::read_to_string(&path)) {
                        let name = path.file_name().unwrap_or_default().to_string_lossy();
                        p.read(&name, &text);
                    }
                }
                project = Some(p);
            }
        }
        if config.is_some() && project.is_some() {
            break;
        }
    }
    Ok((config.unwrap_or_default(), project.unwrap_or_default()))
}

/// `requirements*.txt` in `dir`.
fn requirement_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("requirements") && n.ends_with(".txt"))
        })
        .collect();
    out.sort();
    out
}

fn display(path: &Path) -> String {
    let s = path.to_string_lossy();
    s.strip_prefix("./").unwrap_or(&s).to_string()
}

/// The paths a [`Walk`] sends, as they come.
fn sent_paths(found: std::sync::mpsc::Receiver<PathBuf>) -> impl Iterator<Item = PathBuf> + Send {
    found.into_iter()
}

/// Python files under `paths` (respecting .gitignore and `exclude`); explicitly named
/// files are always linted (a FIFO, a device or `<(…)` included: they are read, never
/// past the size limit). An explicit file is Python when it ends in `.py`, `.pyi` or
/// `.pyw`, or has no extension (a script: checked for a `#!…python` line once read);
/// any other extension (`model.pt`, `notes.txt`) is an error. The walk of a directory
/// takes regular files with those extensions only, so it never opens a device or FIFO.
struct Walk {
    paths: Vec<PathBuf>,
    overrides: ignore::overrides::Override,
}

impl Walk {
    /// Checks the `exclude` patterns before any file is found (and maybe fixed).
    fn new(paths: &[PathBuf], exclude: &[String]) -> anyhow::Result<Self> {
        let mut overrides = ignore::overrides::OverrideBuilder::new(".");
        for pattern in exclude {
            overrides
                .add(&format!("!{pattern}"))
                .with_context(|| format!("invalid exclude pattern `{pattern}`"))?;
        }
        let overrides = overrides.build().context("invalid exclude patterns")?;
        Ok(Self {
            paths: paths.to_vec(),
            overrides,
        })
    }

    /// Hands each file to `found`, explicit files first, and returns what could not be
    /// read.
    fn run(self, found: &mut dyn FnMut(PathBuf)) -> Vec<FileError> {
        let mut errors = Vec::new();
        let mut dirs = Vec::new();
        for p in &self.paths {
            let error = |message: String| FileError {
                path: display(p),
                line: None,
                column: None,
                message,
            };
            match std::fs::metadata(p) {
                Err(e) => errors.push(error(format!("cannot read: {e}"))),
                Ok(m) if m.is_dir() => dirs.push(p.clone()),
                Ok(_) if p.extension().is_none() || has_python_extension(p) => found(p.clone()),
                Ok(_) => errors.push(error(
                    "not a Python file (expected .py, .pyi, .pyw or .ipynb, or no extension and a `#!…python` line); not linted"
                        .into(),
                )),
            }
        }
        let Some((first, rest)) = dirs.split_first() else {
            return errors;
        };
        let mut builder = ignore::WalkBuilder::new(first);
        for p in rest {
            builder.add(p);
        }
        builder.require_git(false).overrides(self.overrides);
        for entry in builder.build() {
            match entry {
                Ok(e) => {
                    // regular files only: never a device, a FIFO or a socket
                    let is_file = e.file_type().is_some_and(|t| t.is_file());
                    if is_file && has_python_extension(e.path()) {
                        found(e.into_path());
                    }
                }
                Err(err) => {
                    let (path, message) = match &err {
                        ignore::Error::WithPath { path, err } => (
                            display(path),
                            err.io_error()
                                .map_or_else(|| err.to_string(), |io| format!("cannot read: {io}")),
                        ),
                        _ => (String::new(), err.to_string()),
                    };
                    errors.push(FileError {
                        path,
                        line: None,
                        column: None,
                        message,
                    });
                }
            }
        }
        errors
    }
}

/// A `#!` first line that runs Python (`#!/usr/bin/env python3`).
fn has_python_shebang(bytes: &[u8]) -> bool {
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    first.starts_with(b"#!") && first.windows(6).any(|w| w == b"python")
}

/// The bytes of one file, bounded by `limit`: `Err(Ok(warning))` for a regular file
/// over the limit (skipped), `Err(Err(message))` for an error.
fn read_source(path: &Path, name: &str, limit: u64) -> Result<Vec<u8>, Result<String, String>> {
    let meta = std::fs::metadata(path).map_err(|e| Err(format!("cannot read: {e}")))?;
    if meta.is_file() && meta.len() > limit {
        return Err(Ok(format!(
            "{name}: skipped, {} is over the {} file size limit (--max-file-size, or max-file-size in [tool.oomkit.lint])",
            oomkit_core::Bytes(meta.len()),
            oomkit_core::Bytes(limit)
        )));
    }
    let read = if meta.is_file() {
        crate::input::read_file_limited(path, limit)
    } else {
        std::fs::File::open(path)
            .map_err(anyhow::Error::from)
            .and_then(|f| crate::input::read_limited(name, f, limit))
    };
    read.map_err(|e| {
        let text = format!("{e:#}");
        // input's messages start with the path, which `describe` prints already
        let text = text
            .strip_prefix(&format!("{} ", path.display()))
            .or_else(|| text.strip_prefix(&format!("{name} ")))
            .unwrap_or(&text)
            .to_string();
        Err(text)
    })
}

/// The pending helpers (name, defining file) that `path`, another file of the tree,
/// names. The file is read again (bounded by `limit`); one that cannot be read names
/// nothing.
fn helpers_named_in<'h>(path: &Path, helpers: &'h [(String, String)], limit: u64) -> Vec<&'h str> {
    let name = display(path);
    let Ok(bytes) = read_source(path, &name, limit) else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    helpers
        .iter()
        .filter(|(h, home)| *home != name && oomkit_lint::tree::mentions(&text, h))
        .map(|(h, _)| h.as_str())
        .collect()
}

fn lint_file(path: &Path, settings: &Settings, fix: bool, limit: u64) -> Outcome {
    let name = display(path);
    let fail = |message: String| {
        Outcome::Failed(FileError {
            path: name.clone(),
            line: None,
            column: None,
            message,
        })
    };
    let bytes = match read_source(path, &name, limit) {
        Ok(b) => b,
        Err(Ok(warning)) => return Outcome::Skipped(warning),
        Err(Err(m)) => return fail(m),
    };
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    if regular && !has_python_extension(path) && !has_python_shebang(&bytes) {
        return fail(
            "not a Python file (no .py, .pyi or .pyw extension and no `#!…python` line); not linted"
                .into(),
        );
    }
    let decoded = match oomkit_lint::source::decode(&bytes) {
        Ok(d) => d,
        Err(e) => return fail(e.to_string()),
    };
    let source = decoded.text.as_str();
    // a FIFO or a device is read, never written; notebooks are linted, never rewritten
    let result = if is_notebook(path) {
        oomkit_lint::lint_notebook_file(&name, source, settings).map(|l| Ok((l, 0)))
    } else if fix && regular {
        oomkit_lint::fix_file(&name, source, settings).map(|f| {
            if f.fixed > 0 {
                let Some(out) = oomkit_lint::source::encode(&bytes, &decoded, &f.source) else {
                    return Err(format!(
                        "cannot write the fixes back in its encoding ({}) without changing other bytes; the file is left as it was",
                        decoded.declared.as_deref().unwrap_or("UTF-8")
                    ));
                };
                if let Err(e) = std::fs::write(path, out) {
                    return Err(format!("cannot write the fixes: {e}"));
                }
            }
            let linted = oomkit_lint::Linted {
                diagnostics: f.diagnostics,
                summary: f.summary,
            };
            Ok((linted, f.fixed))
        })
    } else {
        oomkit_lint::lint_file(&name, source, settings).map(|l| Ok((l, 0)))
    };
    match result {
        Ok(Ok((linted, fixed))) => Outcome::Linted {
            diagnostics: linted.diagnostics,
            fixed,
            summary: linted.summary,
        },
        Ok(Err(m)) => fail(m),
        Err(oomkit_lint::Error::Syntax { error, .. }) => Outcome::Failed(FileError {
            path: name,
            line: Some(error.line),
            column: Some(error.column),
            message: format!("syntax error: {}", error.message),
        }),
        Err(oomkit_lint::Error::TooDeep { reason, .. }) => fail(format!("{reason}; not linted")),
        Err(oomkit_lint::Error::Notebook { message, .. }) => fail(message),
        Err(e) => fail(e.to_string()),
    }
}

fn stdin(
    out: &mut impl Write,
    args: &LintArgs,
    settings: &Settings,
    limit: u64,
) -> anyhow::Result<u8> {
    let name = args
        .stdin_filename
        .clone()
        .unwrap_or_else(|| "-".to_string());
    let bytes = crate::input::read_limited("standard input", std::io::stdin(), limit)?;
    let decoded = match oomkit_lint::source::decode(&bytes) {
        Ok(d) => d,
        Err(m) => bail!("{name}: {m}"),
    };
    let source = decoded.text.as_str();
    let mut errors = Vec::new();
    let mut diagnostics = Vec::new();
    let mut fixed_source = None;
    let result = pool()?.install(|| {
        if args.fix {
            oomkit_lint::fix_source(&name, source, settings)
                .map(|f| (Some(f.source), f.diagnostics))
        } else {
            oomkit_lint::lint_source(&name, source, settings).map(|d| (None, d))
        }
    });
    let result = result.map(|(fixed, d)| {
        fixed_source = fixed;
        d
    });
    match result {
        Ok(d) => diagnostics = d,
        Err(oomkit_lint::Error::Syntax { error, .. }) => errors.push(FileError {
            path: name.clone(),
            line: Some(error.line),
            column: Some(error.column),
            message: format!("syntax error: {}", error.message),
        }),
        Err(oomkit_lint::Error::TooDeep { reason, .. }) => errors.push(FileError {
            path: name.clone(),
            line: None,
            column: None,
            message: format!("{reason}; not linted"),
        }),
        Err(e) => return Err(e.into()),
    }
    for e in &errors {
        output::print_input_error(&anyhow::anyhow!("{}", describe(e)));
    }
    if let Some(src) = fixed_source {
        // with --fix on stdin, stdout is the fixed file; remaining findings go to stderr
        let Some(bytes) = oomkit_lint::source::encode(&bytes, &decoded, &src) else {
            bail!(
                "{name}: cannot write the fixes in its encoding ({}) without changing other bytes",
                decoded.declared.as_deref().unwrap_or("UTF-8")
            );
        };
        out.write_all(&bytes)?;
        let mut err = anstream::stderr();
        write!(err, "{}", render::human(&diagnostics))?;
    } else if errors.is_empty() || args.format != LintFormat::Human {
        print_results(out, args, &diagnostics, &errors, 0)?;
    }
    out.flush()?;
    Ok(if !errors.is_empty() {
        2
    } else if diagnostics.is_empty() {
        0
    } else {
        1
    })
}
