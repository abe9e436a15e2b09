//! `[tool.oomkit.lint]` in `pyproject.toml` and rule selection.

use serde::Deserialize;

use crate::Error;
use crate::rules::RuleSet;

/// The `[tool.oomkit.lint]` table.
#[derive(Debug, Default, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LintConfig {
    /// Rules to run (codes, prefixes, names or `ALL`); default all.
    pub select: Option<Vec<String>>,
    /// Rules to skip.
    #[serde(default)]
    pub ignore: Vec<String>,
    /// gitignore-style patterns of paths not to lint.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Files larger than this are skipped with a warning (`max-file-size = "10MiB"` or
    /// a number of bytes); see [`LintConfig::max_file_size`].
    pub max_file_size: Option<FileSize>,
}

/// A size in `pyproject.toml`: a number of bytes or text such as `"10MiB"`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum FileSize {
    /// Bytes.
    Bytes(u64),
    /// `"10MiB"`, `"512KiB"`, `"1000000"`.
    Text(String),
}

/// The default for `--max-file-size` / `max-file-size`: 10 MiB (ruff skips large files
/// too; generated code of that size is not worth linting).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 10 << 20;

#[derive(Deserialize)]
struct Pyproject {
    tool: Option<Tool>,
}

#[derive(Deserialize)]
struct Tool {
    oomkit: Option<Oomkit>,
}

#[derive(Deserialize)]
struct Oomkit {
    lint: Option<LintConfig>,
}

impl LintConfig {
    /// Reads `[tool.oomkit.lint]` from a `pyproject.toml`'s text (`None` when absent).
    pub fn from_pyproject(text: &str) -> Result<Option<Self>, Error> {
        let p: Pyproject = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        Ok(p.tool.and_then(|t| t.oomkit).and_then(|o| o.lint))
    }

    /// `max-file-size` in bytes (`None` when unset).
    pub fn max_file_size(&self) -> Result<Option<u64>, Error> {
        match &self.max_file_size {
            None => Ok(None),
            Some(FileSize::Bytes(n)) => Ok(Some(*n)),
            Some(FileSize::Text(t)) => t
                .parse::<oomkit_core::Bytes>()
                .map(|b| Some(b.0))
                .map_err(|e| Error::Config(format!("max-file-size: {e}"))),
        }
    }
}

/// The rules chosen by `select` (default all) minus `ignore`.
pub fn rule_set(select: Option<&[String]>, ignore: &[String]) -> Result<RuleSet, Error> {
    let lookup = |s: &String| RuleSet::matching(s).ok_or_else(|| Error::UnknownSelector(s.clone()));
    let mut set = match select {
        None => RuleSet::all(),
        Some(list) => {
            let mut set = RuleSet::empty();
            for s in list {
                set = set.union(lookup(s)?);
            }
            set
        }
    };
    for s in ignore {
        set = set.minus(lookup(s)?);
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::Rule;

    #[test]
    fn reads_the_lint_table_and_ignores_other_tools() {
        let c = LintConfig::from_pyproject(
            "[tool.ruff]\nline-length = 100\n[tool.oomkit.lint]\nselect = [\"OOM1\"]\nignore = [\"OOM105\"]\nexclude = [\"legacy/\"]\n",
        )
        .expect("valid")
        .expect("present");
        assert_eq!(c.exclude, vec!["legacy/".to_string()]);
        let set = rule_set(c.select.as_deref(), &c.ignore).expect("known");
        assert!(set.contains(Rule::TensorAppendedInLoop));
        assert!(!set.contains(Rule::EmptyCacheInLoop));
        assert!(!set.contains(Rule::DataParallel));
        assert_eq!(
            LintConfig::from_pyproject("[project]\nname='x'\n").expect("ok"),
            None
        );
        assert!(LintConfig::from_pyproject("[tool.oomkit.lint]\nselct = []\n").is_err());
        assert!(rule_set(None, &["NOPE".into()]).is_err());
        for (value, want) in [("1048576", Some(1 << 20)), ("\"2MiB\"", Some(2 << 20))] {
            let c = LintConfig::from_pyproject(&format!(
                "[tool.oomkit.lint]\nmax-file-size = {value}\n"
            ))
            .expect("valid")
            .expect("present");
            assert_eq!(c.max_file_size().expect("size"), want, "{value}");
        }
        let c = LintConfig::from_pyproject("[tool.oomkit.lint]\nmax-file-size = \"big\"\n")
            .expect("valid")
            .expect("present");
        assert!(c.max_file_size().is_err());
    }
}
