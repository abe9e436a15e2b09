//! The project's library versions, read from the texts of `pyproject.toml`,
//! `requirements*.txt` and lock files (`uv.lock`, `poetry.lock`): version-dependent
//! rules fire only for the versions they apply to (OOM201 is moot from transformers 5
//! on, where `from_pretrained` loads the checkpoint's own dtype). The binary finds and
//! reads the files; this module only parses text.

use serde::Deserialize;

/// What a project pins, as far as the rules care.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Project {
    /// The lowest major version of `transformers` the project allows, when it says
    /// (`transformers>=5.0`, `==5.1.0`, `~=5.0`, `^5`, a lock file's `5.0.2`).
    pub transformers_min_major: Option<u64>,
}

impl Project {
    /// Whether the project requires transformers `major` or newer.
    pub fn transformers_at_least(self, major: u64) -> bool {
        self.transformers_min_major.is_some_and(|m| m >= major)
    }

    /// Adds what one file says: a `pyproject.toml` or lock file (`name` ends in
    /// `.toml` or `.lock`), or a requirements file (anything else). Unreadable text
    /// adds nothing.
    pub fn read(&mut self, name: &str, text: &str) {
        let found = if name.ends_with(".toml") || name.ends_with(".lock") {
            toml_requirements(text)
        } else {
            text.lines()
                .filter_map(|l| requirement_min_major(l, "transformers"))
                .max()
        };
        if let Some(m) = found {
            self.transformers_min_major = Some(self.transformers_min_major.map_or(m, |o| o.max(m)));
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Toml {
    project: Option<toml::Value>,
    #[serde(rename = "dependency-groups")]
    dependency_groups: Option<toml::Value>,
    tool: Option<toml::Value>,
    package: Vec<LockPackage>,
}

#[derive(Deserialize)]
struct LockPackage {
    name: String,
    version: Option<String>,
}

/// The strings of every array (or nested table of arrays) in `v`.
fn strings(v: &toml::Value, out: &mut Vec<String>) {
    match v {
        toml::Value::String(s) => out.push(s.clone()),
        toml::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        toml::Value::Table(t) => t.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

fn toml_requirements(text: &str) -> Option<u64> {
    let t: Toml = toml::from_str(text).ok()?;
    let mut found = Vec::new();
    for p in &t.package {
        if p.name.eq_ignore_ascii_case("transformers")
            && let Some(v) = &p.version
            && let Some(m) = major(v)
        {
            found.push(m);
        }
    }
    let mut reqs = Vec::new();
    if let Some(p) = &t.project {
        for key in ["dependencies", "optional-dependencies"] {
            if let Some(v) = p.get(key) {
                strings(v, &mut reqs);
            }
        }
    }
    if let Some(g) = &t.dependency_groups {
        strings(g, &mut reqs);
    }
    found.extend(
        reqs.iter()
            .filter_map(|r| requirement_min_major(r, "transformers")),
    );
    // poetry: `transformers = "^5.0"` or `{ version = ">=5" }`
    if let Some(deps) = t
        .tool
        .as_ref()
        .and_then(|t| t.get("poetry"))
        .and_then(|p| p.get("dependencies"))
        .and_then(|d| d.get("transformers"))
    {
        let spec = match deps {
            toml::Value::String(s) => Some(s.as_str()),
            v => v.get("version").and_then(toml::Value::as_str),
        };
        if let Some(m) = spec.and_then(spec_min_major) {
            found.push(m);
        }
    }
    found.into_iter().max()
}

/// `transformers[torch]>=5.0,<6 ; python_version>"3.9"  # comment` → `Some(5)`.
fn requirement_min_major(line: &str, package: &str) -> Option<u64> {
    let line = line.split('#').next().unwrap_or("").trim();
    let line = line.split(';').next().unwrap_or("").trim();
    let rest = line.get(..package.len()).and_then(|head| {
        head.eq_ignore_ascii_case(package)
            .then(|| line.get(package.len()..))
            .flatten()
    })?;
    // the name must end here: `transformers-stream-generator` is another package
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix('[') {
        Some(r) => r.split_once(']').map(|(_, after)| after)?,
        None => rest,
    };
    if rest
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return None;
    }
    spec_min_major(rest)
}

/// The lowest major version a specifier set allows: `>=5.0,<6` → 5, `==5.1` → 5,
/// `~=5.0` → 5, `^5` / `5.*` → 5, `>4.57` → 4; `<5` alone says nothing.
fn spec_min_major(spec: &str) -> Option<u64> {
    spec.split(',')
        .filter_map(|clause| {
            let c = clause.trim();
            let v = ["===", "==", ">=", "~=", "^", "~", ">"]
                .iter()
                .find_map(|op| c.strip_prefix(op))
                .or_else(|| c.starts_with(|ch: char| ch.is_ascii_digit()).then_some(c))?;
            major(v.trim())
        })
        .max()
}

fn major(version: &str) -> Option<u64> {
    let v = version.trim().trim_start_matches(['v', 'V']);
    let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn min(name: &str, text: &str) -> Option<u64> {
        let mut p = Project::default();
        p.read(name, text);
        p.transformers_min_major
    }

    #[test]
    fn reads_the_lowest_allowed_transformers_major_from_every_kind_of_file() {
        for (line, want) in [
            ("transformers>=5.0", Some(5)),
            ("transformers==5.1.0", Some(5)),
            (
                "transformers[torch] ~= 5.0 ; python_version > '3.9'",
                Some(5),
            ),
            ("Transformers>=4.46,<5", Some(4)),
            ("transformers<5", None),
            ("transformers", None),
            ("transformers-stream-generator>=9", None),
            ("# transformers>=5", None),
            (
                "transformers @ git+https://github.com/huggingface/transformers",
                None,
            ),
        ] {
            assert_eq!(min("requirements.txt", line), want, "{line}");
        }
        let pyproject =
            "[project]\nname = \"x\"\ndependencies = [\"torch\", \"transformers>=5.0.0\"]\n";
        assert_eq!(min("pyproject.toml", pyproject), Some(5));
        let extras = "[project.optional-dependencies]\ntrain = [\"transformers==4.57.1\"]\n[dependency-groups]\ndev = [\"transformers>=5\"]\n";
        assert_eq!(min("pyproject.toml", extras), Some(5));
        let poetry = "[tool.poetry.dependencies]\ntransformers = { version = \"^5.0\" }\n";
        assert_eq!(min("pyproject.toml", poetry), Some(5));
        let lock = "version = 1\n[[package]]\nname = \"transformers\"\nversion = \"5.0.2\"\n";
        assert_eq!(min("uv.lock", lock), Some(5));
        assert_eq!(min("pyproject.toml", "not [toml"), None);
        let mut p = Project::default();
        p.read("requirements.txt", "transformers>=4.40\n");
        p.read("uv.lock", lock);
        assert!(p.transformers_at_least(5));
    }
}
