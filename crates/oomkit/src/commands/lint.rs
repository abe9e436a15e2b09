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
    let discovery = Discovery::new(&args)?;

    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    if paths.iter().any(|p| p.as_os_str() == "-") {
        if paths.len() > 1 {
            bail!("`-` (standard input) cannot be combined with other paths");
        }
        let dir = args
            .stdin_filename
            .as_ref()
            .and_then(|n| std::path::absolute(n).ok())
            .and_then(|p| p.parent().map(Path::to_path_buf));
        let found = discovery.at(&dir.unwrap_or_else(|| discovery.cwd.clone()));
        let (settings, limit) = match &found.settings {
            Ok(s) => *s,
            Err(e) => bail!("{e}"),
        };
        return stdin(&mut out, &args, &settings, limit);
    }
    // the walk runs on its own thread and each file is linted as soon as it is found
    // (the walk took a tenth of the run before any file was linted); the
    // outcomes come in any order, and everything printed is sorted
    let walk = Walk::new(&paths);
    let pool = pool()?;
    let (send, found) = std::sync::mpsc::channel();
    let (linted, mut errors) = std::thread::scope(|scope| {
        let walker = scope.spawn(move || {
            walk.run(&mut |path, explicit| {
                // the receiver lives until the walk ends
                let _ = send.send((path, explicit));
            })
        });
        let linted: Vec<(PathBuf, Outcome)> = pool.install(|| {
            sent_paths(found)
                .par_bridge()
                .filter_map(|(path, explicit)| {
                    let found = discovery.of_file(&path);
                    let outcome = match &found.settings {
                        // a walked file that its configuration excludes is not linted
                        // (a file named on the command line always is)
                        Ok(_) if !explicit && found.excludes(&path) => return None,
                        Ok((settings, limit)) => lint_file(&path, settings, args.fix, *limit),
                        Err(e) => Outcome::Failed(FileError {
                            path: display(&path),
                            line: None,
                            column: None,
                            message: e.clone(),
                        }),
                    };
                    Some((path, outcome))
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
    let mut linted_files = Vec::new();
    for (path, o) in files.iter().zip(outcomes) {
        match o {
            Outcome::Linted {
                diagnostics: d,
                fixed: f,
                summary,
            } => {
                diagnostics.extend(d);
                fixed = fixed.saturating_add(f);
                tree.add(summary);
                linted_files.push(path);
            }
            Outcome::Failed(e) => errors.push(e),
            Outcome::Skipped(w) => warnings.push(w),
        }
    }
    // the tree's functions that return a graph (`train_step` of another module): the
    // files that name one are linted again knowing it
    let graph_names = tree.returns.graph_names();
    if !graph_names.is_empty() {
        let again: Vec<(String, Vec<Diagnostic>)> = pool.install(|| {
            linted_files
                .par_iter()
                .filter_map(|path| {
                    let found = discovery.of_file(path);
                    let (settings, limit) = found.settings.as_ref().ok()?;
                    relint_in_tree(path, settings, *limit, &tree.returns, &graph_names)
                })
                .collect()
        });
        let relinted: std::collections::HashSet<&str> =
            again.iter().map(|(name, _)| name.as_str()).collect();
        diagnostics.retain(|x| !relinted.contains(x.path.as_str()));
        diagnostics.extend(again.into_iter().flat_map(|(_, d)| d));
    }
    // the project pass: evidence from the other files of the tree
    let helpers = oomkit_lint::tree::pending_helpers(&diagnostics);
    if !helpers.is_empty() {
        let named: Vec<Vec<&str>> = pool.install(|| {
            files
                .par_iter()
                .map(|path| {
                    let limit = discovery
                        .of_file(path)
                        .settings
                        .as_ref()
                        .map_or(oomkit_lint::DEFAULT_MAX_FILE_SIZE, |s| s.1);
                    helpers_named_in(path, &helpers, limit)
                })
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
                for d in diagnostics {
                    write!(out, "{}", render::human(std::slice::from_ref(d)))?;
                    if let Some(cmd) = oomkit_leaks::command_for_lint(d.code, &d.path) {
                        // Shell-quoted by `command_for_lint`; control characters escaped.
                        writeln!(out, "  confirm: {}", oomkit_core::text::escape(&cmd))?;
                    }
                }
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
                // A leak finding carries the command that confirms it at run time.
                let diagnostics: Vec<serde_json::Value> = diagnostics
                    .iter()
                    .map(|d| {
                        let mut v = serde_json::to_value(d).unwrap_or(serde_json::Value::Null);
                        if let (Some(cmd), Some(o)) = (
                            oomkit_leaks::command_for_lint(d.code, &d.path),
                            v.as_object_mut(),
                        ) {
                            o.insert("leaks_command".to_owned(), json!(cmd));
                        }
                        v
                    })
                    .collect();
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

/// The files that say which library versions a project uses (with `requirements*.txt`).
const VERSION_FILES: &[&str] = &["pyproject.toml", "uv.lock", "poetry.lock"];

/// Configuration discovered per file, as ruff does: each file takes `[tool.oomkit.lint]`
/// from the nearest `pyproject.toml` at or above its own directory, and the library
/// versions from the nearest directory at or above it with version files
/// (`pyproject.toml`, `requirements*.txt`, `uv.lock`, `poetry.lock`) — not from the
/// working directory, so `oomkit lint path/to/project` reads that project's pins from
/// anywhere. Each directory is resolved once (a cache shared by the worker threads), so
/// a tree costs a few `stat`s per directory. Flags on the command line apply on top of
/// every file's configuration. Version files are small; one over 1 MiB or unreadable
/// adds nothing.
struct Discovery<'a> {
    args: &'a LintArgs,
    cwd: PathBuf,
    cache: std::sync::Mutex<std::collections::HashMap<PathBuf, std::sync::Arc<Found>>>,
}

/// What holds for the files of one directory.
struct Found {
    /// The nearest `pyproject.toml` (its directory and its `[tool.oomkit.lint]`).
    config: Option<(PathBuf, LintConfig)>,
    /// The nearest directory's version pins (`None`: no version file up to the root).
    project: Option<Project>,
    /// The rules and the file size limit, or why the configuration is unusable.
    settings: Result<(Settings, u64), String>,
    /// The configuration's `exclude` patterns, rooted at its directory.
    exclude: Option<ignore::overrides::Override>,
}

impl Found {
    fn excludes(&self, path: &Path) -> bool {
        let Some(ov) = &self.exclude else {
            return false;
        };
        let Ok(abs) = std::path::absolute(path) else {
            return false;
        };
        // a pattern may name the file or any directory above it, up to the root
        abs.ancestors()
            .enumerate()
            .take_while(|(_, a)| self.config.as_ref().is_some_and(|(d, _)| a.starts_with(d)))
            .any(|(i, a)| ov.matched(a, i > 0).is_ignore())
    }
}

impl<'a> Discovery<'a> {
    fn new(args: &'a LintArgs) -> anyhow::Result<Self> {
        let cwd = std::env::current_dir().context("cannot read the working directory")?;
        Ok(Self {
            args,
            cwd,
            cache: std::sync::Mutex::default(),
        })
    }

    /// What holds for `path`, a file (its directory is looked up).
    fn of_file(&self, path: &Path) -> std::sync::Arc<Found> {
        let abs = std::path::absolute(path).unwrap_or_else(|_| self.cwd.join(path));
        let dir = abs
            .parent()
            .map_or_else(|| self.cwd.clone(), Path::to_path_buf);
        self.at(&dir)
    }

    /// What holds in directory `dir` (absolute).
    fn at(&self, dir: &Path) -> std::sync::Arc<Found> {
        if let Some(f) = self.lock().get(dir) {
            return f.clone();
        }
        let config = read_pyproject(dir);
        let project = read_versions(dir);
        let (config, project) = if config.is_some() && project.is_some() {
            (config, project)
        } else {
            match dir.parent() {
                Some(parent) => {
                    let up = self.at(parent);
                    let config = config.or_else(|| {
                        up.config
                            .as_ref()
                            .map(|(d, c)| Ok((d.clone(), c.clone())))
                            .or_else(|| up.settings.as_ref().err().map(|e| Err(e.clone())))
                    });
                    (config, project.or(up.project))
                }
                None => (config, project),
            }
        };
        let found = std::sync::Arc::new(self.settle(config, project));
        self.lock().insert(dir.to_path_buf(), found.clone());
        found
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<PathBuf, std::sync::Arc<Found>>> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The command line's flags on top of a configuration.
    fn settle(
        &self,
        config: Option<Result<(PathBuf, LintConfig), String>>,
        project: Option<Project>,
    ) -> Found {
        let config = match config.transpose() {
            Ok(c) => c,
            Err(e) => {
                return Found {
                    config: None,
                    project,
                    settings: Err(e),
                    exclude: None,
                };
            }
        };
        let args = self.args;
        let empty = LintConfig::default();
        let (dir, cfg) = match &config {
            Some((d, c)) => (Some(d), c),
            None => (None, &empty),
        };
        let name = |e: &dyn std::fmt::Display| match dir {
            Some(d) => format!("{}: {e}", d.join("pyproject.toml").display()),
            None => e.to_string(),
        };
        let select = args.select.clone().or(cfg.select.clone());
        let mut extend_select = cfg.extend_select.clone();
        extend_select.extend(args.extend_select.iter().cloned());
        let mut ignore = cfg.ignore.clone();
        ignore.extend(args.ignore.iter().cloned());
        let settings = rule_set(Selection {
            select: select.as_deref(),
            extend_select: &extend_select,
            ignore: &ignore,
            preview: args.preview || cfg.preview.unwrap_or(false),
        })
        .map_err(|e| name(&e))
        .and_then(|rules| {
            let limit = match args.max_file_size {
                Some(n) => n,
                None => cfg
                    .max_file_size()
                    .map_err(|e| name(&e))?
                    .unwrap_or(oomkit_lint::DEFAULT_MAX_FILE_SIZE),
            };
            Ok((
                Settings {
                    rules,
                    project: project.unwrap_or_default(),
                },
                limit,
            ))
        });
        let mut exclude = None;
        let settings = match (dir, settings) {
            (Some(d), Ok(s)) if !cfg.exclude.is_empty() => {
                let mut b = ignore::overrides::OverrideBuilder::new(d);
                let built = cfg
                    .exclude
                    .iter()
                    .try_for_each(|p| {
                        b.add(&format!("!{p}"))
                            .map(|_| ())
                            .map_err(|e| name(&format!("invalid exclude pattern `{p}`: {e}")))
                    })
                    .and_then(|()| b.build().map_err(|e| name(&e)));
                match built {
                    Ok(o) => {
                        exclude = Some(o);
                        Ok(s)
                    }
                    Err(e) => Err(e),
                }
            }
            (_, s) => s,
        };
        Found {
            config,
            project,
            settings,
            exclude,
        }
    }
}

/// `[tool.oomkit.lint]` of `dir/pyproject.toml` when there is one (the default
/// configuration when the file has no such table), or why it cannot be read.
fn read_pyproject(dir: &Path) -> Option<Result<(PathBuf, LintConfig), String>> {
    let file = dir.join("pyproject.toml");
    if !file.is_file() {
        return None;
    }
    let read = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))
        .and_then(|text| {
            LintConfig::from_pyproject(&text).map_err(|e| format!("in {}: {e}", file.display()))
        });
    Some(read.map(|c| (dir.to_path_buf(), c.unwrap_or_default())))
}

/// The version pins of `dir`'s own version files (`None` when it has none).
fn read_versions(dir: &Path) -> Option<Project> {
    let files: Vec<PathBuf> = VERSION_FILES
        .iter()
        .map(|n| dir.join(n))
        .filter(|p| p.is_file())
        .chain(requirement_files(dir))
        .collect();
    if files.is_empty() {
        return None;
    }
    let mut p = Project::default();
    for path in files {
        let small = std::fs::metadata(&path).is_ok_and(|m| m.len() <= 1 << 20);
        if let (true, Ok(text)) = (small, std::fs::read_to_string(&path)) {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            p.read(&name, &text);
        }
    }
    Some(p)
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
fn sent_paths(
    found: std::sync::mpsc::Receiver<(PathBuf, bool)>,
) -> impl Iterator<Item = (PathBuf, bool)> + Send {
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
}

impl Walk {
    fn new(paths: &[PathBuf]) -> Self {
        Self {
            paths: paths.to_vec(),
        }
    }

    /// Hands each file to `found`, explicit files first, and returns what could not be
    /// read. Each file comes with whether it was named on the command line (`exclude`
    /// patterns, which each file's configuration applies, never skip those).
    fn run(self, found: &mut dyn FnMut(PathBuf, bool)) -> Vec<FileError> {
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
                Ok(_) if p.extension().is_none() || has_python_extension(p) => found(p.clone(), true),
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
        builder.require_git(false);
        for entry in builder.build() {
            match entry {
                Ok(e) => {
                    // regular files only: never a device, a FIFO or a socket
                    let is_file = e.file_type().is_some_and(|t| t.is_file());
                    if is_file && has_python_extension(e.path()) {
                        found(e.into_path(), false);
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

/// Lints a regular `.py` file again with what the tree's functions return, if it names
/// one of `names` (the functions that return a graph); `None` when it names none (its
/// first findings stand).
fn relint_in_tree(
    path: &Path,
    settings: &Settings,
    limit: u64,
    returns: &oomkit_lint::tree::Returns,
    names: &[&str],
) -> Option<(String, Vec<Diagnostic>)> {
    if is_notebook(path) || !path.is_file() {
        return None;
    }
    let name = display(path);
    let bytes = read_source(path, &name, limit).ok()?;
    let decoded = oomkit_lint::source::decode(&bytes).ok()?;
    let source = decoded.text.as_str();
    if !names.iter().any(|n| oomkit_lint::tree::mentions(source, n)) {
        return None;
    }
    oomkit_lint::lint_file_in_tree(&name, source, settings, Some(returns))
        .ok()
        .map(|l| (name, l.diagnostics))
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
