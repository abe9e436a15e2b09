//! `[tool.oomkit.lint]` in `pyproject.toml` and rule selection.

use serde::Deserialize;

use crate::Error;
use crate::rules::RuleSet;

/// The `[tool.oomkit.lint]` table.
#[derive(Debug, Default, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LintConfig {
    /// Rules to run (codes, prefixes, names, categories or `ALL`); default the
    /// `memory` category.
    pub select: Option<Vec<String>>,
    /// Rules to run on top of `select` (or of the default set).
    #[serde(default)]
    pub extend_select: Vec<String>,
    /// Run preview rules (new rules not yet proven on the precision benchmark).
    pub preview: Option<bool>,
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

/// Which rules a run selects, as ruff reads them: `select` replaces the default set
/// (the `memory` category), `extend_select` adds to it, `ignore` removes, and preview
/// rules stay off unless `preview` is set, whatever selects them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Selection<'s> {
    /// `--select` / `select` (`None`: the default set).
    pub select: Option<&'s [String]>,
    /// `--extend-select` / `extend-select`.
    pub extend_select: &'s [String],
    /// `--ignore` / `ignore`.
    pub ignore: &'s [String],
    /// `--preview` / `preview`.
    pub preview: bool,
}

/// The rules a [`Selection`] chooses.
pub fn rule_set(selection: Selection<'_>) -> Result<RuleSet, Error> {
    let lookup = |s: &String| RuleSet::matching(s).ok_or_else(|| Error::UnknownSelector(s.clone()));
    let mut set = match selection.select {
        None => RuleSet::default_set().union(if selection.preview {
            RuleSet::matching("memory")
                .unwrap_or_else(RuleSet::empty)
                .minus(RuleSet::default_set())
        } else {
            RuleSet::empty()
        }),
        Some(list) => {
            let mut set = RuleSet::empty();
            for s in list {
                set = set.union(lookup(s)?);
            }
            set
        }
    };
    for s in selection.extend_select {
        set = set.union(lookup(s)?);
    }
    for s in selection.ignore {
        set = set.minus(lookup(s)?);
    }
    if !selection.preview {
        set = set.minus(RuleSet::preview());
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
        let set = rule_set(Selection {
            select: c.select.as_deref(),
            ignore: &c.ignore,
            ..Selection::default()
        })
        .expect("known");
        assert!(set.contains(Rule::TensorAppendedInLoop));
        assert!(!set.contains(Rule::EmptyCacheInLoop));
        assert!(!set.contains(Rule::DataParallel));
        assert_eq!(
            LintConfig::from_pyproject("[project]\nname='x'\n").expect("ok"),
            None
        );
        assert!(LintConfig::from_pyproject("[tool.oomkit.lint]\nselct = []\n").is_err());
        let nope = ["NOPE".to_string()];
        assert!(
            rule_set(Selection {
                ignore: &nope,
                ..Selection::default()
            })
            .is_err()
        );
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

    #[test]
    fn categories_extend_select_and_preview_combine_as_in_ruff() {
        let c = LintConfig::from_pyproject(
            "[tool.oomkit.lint]\nextend-select = [\"upgrade\"]\npreview = true\n",
        )
        .expect("valid")
        .expect("present");
        assert_eq!(c.preview, Some(true));
        let set = rule_set(Selection {
            extend_select: &c.extend_select,
            ..Selection::default()
        })
        .expect("known");
        assert!(set.contains(Rule::DeprecatedCudaAmp) && set.contains(Rule::TensorAppendedInLoop));
        assert!(!set.contains(Rule::DataParallel));
        let default = rule_set(Selection::default()).expect("default");
        assert_eq!(default, RuleSet::default_set());
        assert!(!default.contains(Rule::DeprecatedCudaAmp));
        let all = rule_set(Selection {
            select: Some(&["ALL".to_string()]),
            ..Selection::default()
        })
        .expect("all");
        assert!(all.contains(Rule::DataParallel));
        assert_eq!(all.minus(RuleSet::preview()), all);
    }
}
