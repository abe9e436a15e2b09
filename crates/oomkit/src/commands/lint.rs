//! `oomkit lint`: find the files, read them, lint them in parallel with
//! `oomkit_lint`, print one format, return 0 clean / 1 findings / 2 errors.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use oomkit_lint::{Diagnostic, LintConfig, RULES, Settings, render, rule_set, sarif};
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
    },
    Failed(FileError),
}

pub fn run(args: LintArgs, color: ColorChoice) -> anyhow::Result<u8> {
    let mut out = output::stdout(color);
    if let Some(code) = &args.explain {
        return explain(&mut out, code, args.format);
    }
    let config = find_config()?;
    let select = args.select.clone().or(config.select.clone());
    let mut ignore = config.ignore.clone();
    ignore.extend(args.ignore.iter().cloned());
    let settings = Settings {
        rules: rule_set(select.as_deref(), &ignore)?,
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
        return stdin(&mut out, &args, &settings);
    }
    let (files, mut errors) = collect_files(&paths, &config.exclude)?;
    let outcomes: Vec<Outcome> = pool()?.install(|| {
        files
            .par_iter()
            .map(|path| lint_file(path, &settings, args.fix))
            .collect()
    });
    let mut diagnostics = Vec::new();
    let mut fixed = 0;
    for o in outcomes {
        match o {
            Outcome::Linted {
                diagnostics: d,
                fixed: f,
            } => {
                diagnostics.extend(d);
                fixed += f;
            }
            Outcome::Failed(e) => errors.push(e),
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
/// (a 200,000-term `a + b + …` chain), and the parser and the checker recurse. The stack
/// is virtual memory; only what is touched is committed.
fn pool() -> anyhow::Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .stack_size(STACK)
        .build()
        .context("cannot start worker threads")
}

const STACK: usize = 256 << 20;

fn describe(e: &FileError) -> String {
    match (e.line, e.column) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}: {}", e.path, e.message),
        _ => format!("{}: {}", e.path, e.message),
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
                    writeln!(
                        out,
                        "Found {} problems; {n} {files} could not be linted.",
                        diagnostics.len()
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
                "fixable": rule.fixable, "explanation": oomkit_lint::explain(rule)});
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)?;
        }
        _ => write!(out, "{}", oomkit_lint::explain(rule))?,
    }
    Ok(0)
}

/// `[tool.oomkit.lint]` from the nearest `pyproject.toml` at or above the working directory.
fn find_config() -> anyhow::Result<LintConfig> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    for dir in cwd.ancestors() {
        let file = dir.join("pyproject.toml");
        if file.is_file() {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let cfg = LintConfig::from_pyproject(&text)
                .with_context(|| format!("in {}", file.display()))?;
            return Ok(cfg.unwrap_or_default());
        }
    }
    Ok(LintConfig::default())
}

fn display(path: &Path) -> String {
    let s = path.to_string_lossy();
    s.strip_prefix("./").unwrap_or(&s).to_string()
}

/// Python files under `paths` (respecting .gitignore and `exclude`); explicitly named
/// files are always linted.
fn collect_files(
    paths: &[PathBuf],
    exclude: &[String],
) -> anyhow::Result<(Vec<PathBuf>, Vec<FileError>)> {
    let mut errors = Vec::new();
    let mut files = Vec::new();
    let mut overrides = ignore::overrides::OverrideBuilder::new(".");
    for pattern in exclude {
        overrides
            .add(&format!("!{pattern}"))
            .with_context(|| format!("invalid exclude pattern `{pattern}`"))?;
    }
    let overrides = overrides.build().context("invalid exclude patterns")?;
    let Some((first, rest)) = paths.split_first() else {
        return Ok((files, errors));
    };
    let mut builder = ignore::WalkBuilder::new(first);
    for p in rest {
        builder.add(p);
    }
    builder.require_git(false).overrides(overrides);
    for entry in builder.build() {
        match entry {
            Ok(e) => {
                let is_file = e.file_type().is_some_and(|t| t.is_file());
                let is_python = e
                    .path()
                    .extension()
                    .is_some_and(|x| x == "py" || x == "pyi");
                if is_file && (e.depth() == 0 || is_python) {
                    files.push(e.into_path());
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
    Ok((files, errors))
}

fn read_text(bytes: Vec<u8>) -> Result<String, String> {
    let text = String::from_utf8(bytes)
        .map_err(|_| "not valid UTF-8 (is it a Python file?)".to_string())?;
    Ok(text
        .strip_prefix('\u{feff}')
        .map(str::to_string)
        .unwrap_or(text))
}

fn lint_file(path: &Path, settings: &Settings, fix: bool) -> Outcome {
    let name = display(path);
    let fail = |message: String| {
        Outcome::Failed(FileError {
            path: name.clone(),
            line: None,
            column: None,
            message,
        })
    };
    let source = match std::fs::read(path)
        .map_err(|e| format!("cannot read: {e}"))
        .and_then(read_text)
    {
        Ok(s) => s,
        Err(m) => return fail(m),
    };
    let result = if fix {
        oomkit_lint::fix_source(&name, &source, settings).map(|f| {
            if f.fixed > 0
                && let Err(e) = std::fs::write(path, &f.source)
            {
                return Err(format!("cannot write the fixes: {e}"));
            }
            Ok((f.diagnostics, f.fixed))
        })
    } else {
        oomkit_lint::lint_source(&name, &source, settings).map(|d| Ok((d, 0)))
    };
    match result {
        Ok(Ok((diagnostics, fixed))) => Outcome::Linted { diagnostics, fixed },
        Ok(Err(m)) => fail(m),
        Err(oomkit_lint::Error::Syntax { error, .. }) => Outcome::Failed(FileError {
            path: name,
            line: Some(error.line),
            column: Some(error.column),
            message: format!("syntax error: {}", error.message),
        }),
        Err(e) => fail(e.to_string()),
    }
}

fn stdin(out: &mut impl Write, args: &LintArgs, settings: &Settings) -> anyhow::Result<u8> {
    let name = args
        .stdin_filename
        .clone()
        .unwrap_or_else(|| "-".to_string());
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .context("cannot read standard input")?;
    let source = match read_text(bytes) {
        Ok(s) => s,
        Err(m) => bail!("{name}: {m}"),
    };
    let mut errors = Vec::new();
    let mut diagnostics = Vec::new();
    let mut fixed_source = None;
    let result = pool()?.install(|| {
        if args.fix {
            oomkit_lint::fix_source(&name, &source, settings)
                .map(|f| (Some(f.source), f.diagnostics))
        } else {
            oomkit_lint::lint_source(&name, &source, settings).map(|d| (None, d))
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
        Err(e) => return Err(e.into()),
    }
    for e in &errors {
        output::print_input_error(&anyhow::anyhow!("{}", describe(e)));
    }
    if let Some(src) = fixed_source {
        // with --fix on stdin, stdout is the fixed file; remaining findings go to stderr
        out.write_all(src.as_bytes())?;
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
