//! The local Hugging Face hub cache: where `from_pretrained("org/name")` put
//! a downloaded model, so `oomkit estimate org/name` reads that model's own
//! `config.json` (and safetensors headers) instead of the catalogue's.
//!
//! Layout (huggingface_hub's `file_download.py`):
//! `<cache>/models--ORG--NAME/refs/main` holds the commit hash of the revision
//! `main` points at; `<cache>/models--ORG--NAME/snapshots/<hash>/config.json`
//! is that revision's file (a symlink into `blobs/`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The hub cache folder, in huggingface_hub's order (`constants.py`):
/// `HF_HUB_CACHE`, else `HF_HOME/hub`, else `XDG_CACHE_HOME/huggingface/hub`,
/// else `~/.cache/huggingface/hub`. Empty variables count as unset.
pub fn dir() -> Option<PathBuf> {
    dir_from(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
}

fn dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if let Some(p) = var("HF_HUB_CACHE") {
        return Some(p.into());
    }
    Some(home_from(var)?.join("hub"))
}

/// huggingface_hub's home folder (`constants.py` `HF_HOME`): `HF_HOME`, else
/// `XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`. The hub cache
/// and the login token (`token`) live there.
pub fn home_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if let Some(home) = var("HF_HOME") {
        return Some(PathBuf::from(home));
    }
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("huggingface"))
}

/// The snapshot folder holding `config.json` for hub id `id` in `cache`:
/// the revision `refs/main` names, else the most recently written snapshot
/// that has a `config.json`. The repo folder is matched case-insensitively
/// (the Hub's ids are). `None` when the model was never downloaded.
pub fn snapshot(cache: &Path, id: &str) -> Option<PathBuf> {
    let id = id.trim().trim_matches('/');
    if id.is_empty() || id.split('/').count() > 2 || id.split('/').any(|p| p == ".." || p == ".") {
        return None;
    }
    let folder = format!("models--{}", id.replace('/', "--"));
    let repo = std::fs::read_dir(cache)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.eq_ignore_ascii_case(&folder))
        })?;
    let snapshots = repo.join("snapshots");
    let main = std::fs::read_to_string(repo.join("refs").join("main")).unwrap_or_default();
    let main = main.trim();
    if !main.is_empty() && main.chars().all(|c| c.is_ascii_alphanumeric()) {
        let dir = snapshots.join(main);
        if dir.join("config.json").is_file() {
            return Some(dir);
        }
    }
    std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|d| d.join("config.json").is_file())
        .filter_map(|d| {
            let when = std::fs::metadata(d.join("config.json"))
                .and_then(|m| m.modified())
                .ok()?;
            Some((when, d))
        })
        .max()
        .map(|(_, d)| d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_follows_huggingface_hub_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        static ALL: [(&str, &str); 4] = [
            ("HF_HUB_CACHE", "/a"),
            ("HF_HOME", "/b"),
            ("XDG_CACHE_HOME", "/c"),
            ("HOME", "/d"),
        ];
        let all = &ALL;
        assert_eq!(dir_from(env(&all[..])), Some(PathBuf::from("/a")));
        assert_eq!(dir_from(env(&all[1..])), Some(PathBuf::from("/b/hub")));
        assert_eq!(
            dir_from(env(&all[2..])),
            Some(PathBuf::from("/c/huggingface/hub"))
        );
        assert_eq!(
            dir_from(env(&all[3..])),
            Some(PathBuf::from("/d/.cache/huggingface/hub"))
        );
        assert_eq!(dir_from(env(&[])), None);
    }

    #[test]
    fn hostile_ids_are_not_paths() {
        let cache = std::env::temp_dir();
        for id in ["", "/", "../x", "a/../b", "a/b/c"] {
            assert_eq!(snapshot(&cache, id), None, "{id}");
        }
    }
}
