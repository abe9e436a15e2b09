//! What installing touches: `--version`, completions for every shell, the man
//! page, the documentation's commands (each one parses with today's flags) and
//! its references to files (each one exists). "The documentation" is the
//! README and `docs/*.md`.

use std::path::{Path, PathBuf};

use crate::{oomkit, stdout};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Each user-facing document (the README and `docs/*.md`; path relative to
/// the repository root) with its text.
fn documents() -> Vec<(PathBuf, String)> {
    crate::docs::documents()
        .into_iter()
        .filter(|d| d == Path::new("README.md") || d.starts_with("docs"))
        .map(|d| {
            let text = std::fs::read_to_string(root().join(&d)).expect("a document");
            (d, text)
        })
        .collect()
}

#[test]
fn version_names_the_crate_version() {
    let o = oomkit().arg("--version").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let v = stdout(&o);
    let want = format!("oomkit {}", env!("CARGO_PKG_VERSION"));
    assert!(v.starts_with(&want), "{v}");
    // From a git checkout the commit follows in parentheses.
    if let Some(rest) = v.trim().strip_prefix(&want)
        && !rest.is_empty()
    {
        let commit = rest.trim().trim_start_matches('(').trim_end_matches(')');
        assert!(
            commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{v}"
        );
    }
}

#[test]
fn completions_for_every_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _oomkit"),
        ("zsh", "#compdef oomkit"),
        ("fish", "complete -c oomkit"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[oomkit]"),
    ] {
        let o = oomkit().args(["completions", shell]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let s = stdout(&o);
        assert!(s.contains(marker), "{shell}: {}", &s[..s.len().min(300)]);
        // Every subcommand is offered.
        for sub in [
            "explain", "lint", "estimate", "snapshot", "monitor", "probe", "run",
        ] {
            assert!(s.contains(sub), "{shell} lacks {sub}");
        }
    }
    let o = oomkit().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn man_page_is_roff_with_every_subcommand() {
    let o = oomkit().arg("man").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let s = stdout(&o);
    assert!(s.contains(".TH oomkit 1"), "{}", &s[..s.len().min(300)]);
    for sub in SUBCOMMANDS {
        assert!(s.contains(&format!("oomkit\\-{sub}(1)")), "man lacks {sub}");
    }
}

const SUBCOMMANDS: [&str; 7] = [
    "explain", "lint", "estimate", "snapshot", "monitor", "probe", "run",
];

/// Every page the main page names exists: `oomkit man SUB` prints it, and
/// `oomkit man --dir` writes all of them under the names `man` looks for.
#[test]
fn every_man_page_the_main_page_names_is_generated() {
    for sub in SUBCOMMANDS {
        let o = oomkit().args(["man", sub]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{sub}: {}", crate::stderr(&o));
        let s = stdout(&o);
        assert!(
            s.contains(&format!(".TH oomkit-{sub} 1")),
            "{sub}: {}",
            &s[..s.len().min(200)]
        );
        assert!(s.contains(".SH OPTIONS"), "{sub}");
    }
    let o = oomkit().args(["man", "nope"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        crate::stderr(&o).contains("the subcommands are explain"),
        "{}",
        crate::stderr(&o)
    );

    let dir = tempfile::tempdir().unwrap();
    let o = oomkit()
        .args(["man", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", crate::stderr(&o));
    let main = std::fs::read_to_string(dir.path().join("oomkit.1")).unwrap();
    for sub in SUBCOMMANDS {
        assert!(main.contains(&format!("oomkit\\-{sub}(1)")));
        let page = std::fs::read_to_string(dir.path().join(format!("oomkit-{sub}.1"))).unwrap();
        assert!(page.contains(&format!(".TH oomkit-{sub} 1")), "{sub}");
    }
}

/// The completion scripts offer the catalogue's model names and the GPU ids
/// for `estimate` (and parsing still takes any other model path).
#[test]
fn completions_offer_model_and_gpu_names() {
    // clap_complete's fish script completes flags' values, not positionals:
    // fish gets the GPU names only.
    for (shell, names) in [
        (
            "bash",
            &[
                "rtx-4090",
                "h100-sxm",
                "meta-llama/Llama-3.1-8B",
                "llama-3.1-8b",
                "flux-dev",
            ][..],
        ),
        (
            "zsh",
            &[
                "rtx-4090",
                "h100-sxm",
                "meta-llama/Llama-3.1-8B",
                "llama-3.1-8b",
                "flux-dev",
            ][..],
        ),
        ("fish", &["rtx-4090", "h100-sxm"][..]),
    ] {
        let o = oomkit().args(["completions", shell]).output().unwrap();
        let s = stdout(&o);
        for name in names {
            assert!(s.contains(name), "{shell} completions lack {name}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, r#"{"model_type":"llama","hidden_size":256,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":512,"vocab_size":1000}"#).unwrap();
    let o = oomkit().arg("estimate").arg(&cfg).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", crate::stderr(&o));
}

/// Every `oomkit …` command in the documentation's code blocks (continuation
/// lines joined), split like a shell would for the simple lines the docs use.
/// Synopsis lines (`[--flag]`, `FILE…`) are not commands and are skipped.
pub fn readme_commands() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (_, text) in documents() {
        commands_of(&text, &mut out);
    }
    out
}

fn commands_of(text: &str, out: &mut Vec<Vec<String>>) {
    let mut in_block = false;
    let mut pending = String::new();
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            // Inline `oomkit …` spans in prose are commands too.
            for span in t.split('`').skip(1).step_by(2) {
                // `oomkit 0.2.0 (a91f5a7)` is output, not a command.
                let is_command = span
                    .strip_prefix("oomkit ")
                    .is_some_and(|r| !r.starts_with(|c: char| c.is_ascii_digit()));
                if is_command {
                    lines.push(span.to_owned());
                }
            }
            continue;
        }
        lines.push(t.to_owned());
    }
    for t in lines {
        let t = t.as_str();
        if let Some(cont) = t.strip_suffix('\\') {
            pending.push_str(cont);
            continue;
        }
        let full = format!("{pending}{t}");
        pending.clear();
        let t = full.trim_start_matches("$ ");
        let Some((at, len)) = [
            "target/release/oomkit ",
            "target/debug/oomkit ",
            "cargo run --release -- ",
            "oomkit ",
        ]
        .iter()
        .filter_map(|p| t.find(p).map(|i| (i, p.len())))
        .min() else {
            continue;
        };
        // A command starts the line, or follows environment assignments.
        let before = &t[..at];
        if !before.split_whitespace().all(|w| w.contains('=')) {
            continue;
        }
        let rest = &t[at + len..];
        let rest = rest.split(" #").next().unwrap_or(rest);
        let rest = rest.split(['|', '>']).next().unwrap_or(rest).trim();
        if rest.contains('[') || rest.contains('…') || rest.is_empty() {
            continue;
        }
        out.push(shell_words(rest));
    }
}

pub fn shell_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

#[test]
fn readme_commands_use_flags_that_exist() {
    let cmds = readme_commands();
    assert!(cmds.len() >= 40, "found only {} commands", cmds.len());
    let mut failures = Vec::new();
    for argv in &cmds {
        // `--help` after the subcommand makes clap validate every flag given
        // before it, then print help and exit 0, without running anything.
        // `probe --estimate` takes every token up to `--`: help goes before it.
        let mut args: Vec<String> = argv.clone();
        let at = args
            .iter()
            .position(|a| a == "--" || a == "--estimate")
            .unwrap_or(args.len());
        args.insert(at, "--help".to_owned());
        let o = oomkit().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        // Prose that names a flag without its value (`--html`) still names a real flag.
        let flag_named = err.contains("a value is required for");
        if o.status.code() != Some(0) && !flag_named {
            failures.push(format!(
                "oomkit {}\n  {}",
                argv.join(" "),
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .next()
                    .unwrap_or("")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "README commands that do not parse:\n{}",
        failures.join("\n")
    );
}

#[test]
fn readme_links_and_paths_exist() {
    let mut missing = Vec::new();
    for (doc, text) in documents() {
        links_and_paths(&doc, &text, &mut missing);
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "the documentation references files that are not in the repository: {missing:?}"
    );
}

/// Relative links (from the document's folder) and backticked repository paths
/// (from the root) that do not exist.
fn links_and_paths(doc: &Path, text: &str, missing: &mut Vec<String>) {
    let dir = root().join(doc.parent().unwrap_or(Path::new("")));
    // Markdown links and images to relative paths.
    for part in text.split("](").skip(1) {
        let target = part.split(')').next().unwrap_or("");
        let target = target.split('#').next().unwrap_or("");
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        if !dir.join(target).exists() {
            missing.push(format!("{}: {target}", doc.display()));
        }
    }
    // Backticked repository paths.
    for part in text.split('`').skip(1).step_by(2) {
        let p = part.split_whitespace().next().unwrap_or("");
        // The team's notes outside the repository are copied into docs/reference/.
        if p.starts_with("shared/") || p.starts_with("../shared/") {
            missing.push(format!("{}: {p} (outside the repository)", doc.display()));
            continue;
        }
        let is_repo_path = ["crates/", "docs/", "bench/", "examples/", "fuzz/", ".ci/"]
            .iter()
            .any(|d| p.starts_with(d));
        if !is_repo_path || p.contains('*') || p.contains('<') || p.contains('{') {
            continue;
        }
        let p = p.trim_end_matches([',', '.', ':', ';', ')']);
        if !root().join(p).exists() {
            missing.push(format!("{}: {p}", doc.display()));
        }
    }
}

/// Nothing in the repository cites a path outside it (the team's notes are
/// copied into `docs/reference/`) or an issue number a reader cannot open:
/// every text file under version control's usual folders is read.
#[test]
fn nothing_cites_a_path_outside_the_repository_or_an_issue_number() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !matches!(
                    name.as_str(),
                    "target" | ".git" | "corpus" | "artifacts" | "node_modules"
                ) {
                    walk(&p, out);
                }
            } else if [
                ".rs", ".md", ".py", ".sh", ".toml", ".tsv", ".yml", ".yaml", ".txt",
            ]
            .iter()
            .any(|x| name.ends_with(x))
            {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root(), &mut files);
    assert!(files.len() > 100, "found only {} files", files.len());
    // Spelled in pieces so this test does not find itself.
    let outside = [
        ["shared/", "reference"].concat(),
        ["shared/", "seeds"].concat(),
        ["shared/", "fixtures"].concat(),
        ["shared/", "design"].concat(),
    ];
    // The word, a space, then a digit.
    let issue = |line: &str| {
        let lower = line.to_ascii_lowercase();
        ["issue ", "issues "].iter().any(|w| {
            lower.match_indices(w).any(|(i, _)| {
                let word_start = i == 0 || !lower.as_bytes()[i - 1].is_ascii_alphanumeric();
                word_start
                    && lower
                        .as_bytes()
                        .get(i + w.len())
                        .is_some_and(u8::is_ascii_digit)
            })
        })
    };
    let mut bad = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(root())
            .unwrap_or(f)
            .to_string_lossy()
            .into_owned();
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if outside.iter().any(|o| line.contains(o.as_str())) {
                bad.push(format!("{rel}:{}: a path outside the repository", n + 1));
            }
            // The changelog records history; the reference notes cite other
            // projects' issues.
            if !rel.starts_with("CHANGELOG") && !rel.starts_with("docs/reference") && issue(line) {
                bad.push(format!("{rel}:{}: an issue number", n + 1));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
