//! The Python hook: a generated `sitecustomize.py` in a temporary folder put
//! first on the child's `PYTHONPATH`. It chains to the `sitecustomize` it
//! shadows and, once `torch` is imported in the main process, reads PyTorch's
//! own counters (see the script's header) without changing what the program
//! sees — it never initialises CUDA itself:
//!
//! - the peak: `torch.cuda.max_memory_reserved()` at exit when CUDA was
//!   initialised, written to the file named by `OOMKIT_PEAK_FILE` (`oomkit
//!   probe`'s `peak_bytes`);
//! - on `--snapshot-on-oom`: queued with `torch.cuda._lazy_call`, so it runs
//!   when the program initialises CUDA, `torch.cuda.memory._record_memory_history`
//!   and, from `torch._C._cuda_attach_out_of_memory_observer`, one
//!   `torch.cuda.memory._dump_snapshot()` at the first OOM into the run's
//!   private [`SnapshotDir`], one file per rank (PyTorch's "Understanding CUDA
//!   Memory Usage" page documents both calls).
//!
//! A command that is not Python ignores the variables; the hook never prints.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::Error;

/// The script (also readable in the source tree next to this file).
pub const SITECUSTOMIZE: &str = include_str!("sitecustomize.py");

/// Variable naming the file the peak is written to.
pub const PEAK_ENV: &str = "OOMKIT_PEAK_FILE";
/// Variable naming the folder snapshots are dumped into.
pub const SNAPSHOT_ENV: &str = "OOMKIT_SNAPSHOT_DIR";
/// How the hook names a snapshot: `oom-snapshot-rank<RANK>-pid<PID>.pickle`.
pub const SNAPSHOT_PREFIX: &str = "oom-snapshot-rank";
/// Variable holding `max_entries` for the allocator history.
pub const MAX_ENTRIES_ENV: &str = "OOMKIT_SNAPSHOT_MAX_ENTRIES";
/// Allocator history entries kept by default (PyTorch's docs use 100,000).
pub const DEFAULT_MAX_ENTRIES: u64 = 100_000;

/// The hook's folder; removed when dropped.
#[derive(Debug)]
pub struct Hook {
    dir: tempfile::TempDir,
}

impl Hook {
    /// Writes the script to a fresh private temporary folder (mode 0700).
    /// `extra` is another capability's Python (`oomkit leaks`'), written
    /// before [`SITECUSTOMIZE`] in the same file: when it defines
    /// `_oomkit_extra_on_torch(torch)`, the hook calls it in the main process
    /// right after `import torch`, so it shares the chaining of the shadowed
    /// `sitecustomize`, the main-process test and the import watch.
    pub fn install(extra: Option<&str>) -> Result<Hook, Error> {
        let dir = tempfile::Builder::new()
            .prefix("oomkit-hook-")
            .tempdir()
            .map_err(Error::Hook)?;
        let script = match extra {
            Some(e) => format!("{e}\n{SITECUSTOMIZE}"),
            None => SITECUSTOMIZE.to_owned(),
        };
        std::fs::write(dir.path().join("sitecustomize.py"), script).map_err(Error::Hook)?;
        Ok(Hook { dir })
    }

    /// The hook's folder (files the child writes can go here too).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside the hook's folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The environment for a child: `PYTHONPATH` with the hook first (then
    /// the caller's own `PYTHONPATH`), plus the given variables.
    pub fn env(&self, vars: &[(&str, OsString)]) -> Vec<(OsString, OsString)> {
        let mut paths = vec![self.dir.path().to_path_buf()];
        if let Some(existing) = std::env::var_os("PYTHONPATH") {
            paths.extend(std::env::split_paths(&existing));
        }
        let pythonpath = std::env::join_paths(paths)
            .unwrap_or_else(|_| self.dir.path().as_os_str().to_os_string());
        let mut env = vec![(OsString::from("PYTHONPATH"), pythonpath)];
        env.extend(vars.iter().map(|(k, v)| (OsString::from(k), v.clone())));
        env
    }
}

/// A private folder for one run's snapshots (`mkdtemp`, mode 0700): no other
/// user can place a file there, and nothing from an earlier run is in it.
/// Removed when dropped unless [`SnapshotDir::keep`] is called.
#[derive(Debug)]
pub struct SnapshotDir {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    since: std::time::SystemTime,
}

impl SnapshotDir {
    /// Creates the folder in the temporary directory; files modified before
    /// this moment are never taken for this run's snapshots.
    pub fn create() -> Result<SnapshotDir, Error> {
        let since = std::time::SystemTime::now();
        let mut builder = tempfile::Builder::new();
        builder.prefix("oomkit-snapshot-");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o700));
        }
        let dir = builder.tempdir().map_err(Error::Hook)?;
        let path = dir.path().to_path_buf();
        Ok(SnapshotDir {
            dir: Some(dir),
            path,
            since,
        })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The snapshots the hook wrote during this run, one per rank, sorted by
    /// rank then PID. Only regular files named as the hook names them and
    /// modified since [`SnapshotDir::create`].
    pub fn snapshots(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return Vec::new();
        };
        let mut found: Vec<((u64, u64), PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_owned();
                let key = parse_snapshot_name(&name)?;
                // No symlink is followed: the file itself must be a new regular file.
                let meta = std::fs::symlink_metadata(e.path()).ok()?;
                let fresh = meta.modified().is_ok_and(|m| m >= self.since);
                (meta.is_file() && fresh).then(|| (key, e.path()))
            })
            .collect();
        found.sort();
        found.into_iter().map(|(_, p)| p).collect()
    }

    /// Keeps the folder and its files after this value is dropped.
    pub fn keep(mut self) -> PathBuf {
        if let Some(d) = self.dir.take() {
            return d.keep();
        }
        self.path.clone()
    }
}

/// `(rank, pid)` from `oom-snapshot-rank<RANK>-pid<PID>.pickle`.
fn parse_snapshot_name(name: &str) -> Option<(u64, u64)> {
    let rest = name
        .strip_prefix(SNAPSHOT_PREFIX)?
        .strip_suffix(".pickle")?;
    let (rank, pid) = rest.split_once("-pid")?;
    Some((rank.parse().ok()?, pid.parse().ok()?))
}

/// Reads a peak file the hook wrote (`None` when absent or unreadable).
pub fn read_peak(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_the_hook_first_on_pythonpath() {
        let h = Hook::install(None).unwrap();
        assert!(h.path("sitecustomize.py").is_file());
        let env = h.env(&[(PEAK_ENV, OsString::from("/x/peak"))]);
        let (k, v) = env.first().unwrap();
        assert_eq!(k, "PYTHONPATH");
        assert_eq!(std::env::split_paths(v).next().as_deref(), Some(h.dir()));
        assert_eq!(
            env.get(1),
            Some(&(OsString::from(PEAK_ENV), OsString::from("/x/peak")))
        );
    }

    #[test]
    fn snapshots_are_this_runs_files_named_by_rank() {
        let old = tempfile::tempdir().unwrap();
        std::fs::write(old.path().join("oom-snapshot-rank0-pid1.pickle"), b"x").unwrap();
        let d = SnapshotDir::create().unwrap();
        assert!(d.snapshots().is_empty());
        // A file dated before the run is not this run's snapshot.
        let stale = d.path().join("oom-snapshot-rank3-pid7.pickle");
        let f = std::fs::File::create(&stale).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
            .unwrap();
        drop(f);
        for name in [
            "oom-snapshot-rank1-pid20.pickle",
            "oom-snapshot-rank0-pid30.pickle",
            "notes.txt",
            "oom-snapshot-rankX-pid1.pickle",
        ] {
            std::fs::write(d.path().join(name), b"x").unwrap();
        }
        let names: Vec<String> = d
            .snapshots()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "oom-snapshot-rank0-pid30.pickle",
                "oom-snapshot-rank1-pid20.pickle"
            ]
        );
        let path = d.path().to_path_buf();
        drop(d);
        assert!(!path.exists(), "removed when dropped");
        let d = SnapshotDir::create().unwrap();
        let kept = d.keep();
        assert!(kept.is_dir());
        std::fs::remove_dir_all(kept).unwrap();
    }

    #[test]
    fn reads_a_peak_file_and_ignores_garbage() {
        let h = Hook::install(None).unwrap();
        std::fs::write(h.path("peak"), "123456\n").unwrap();
        assert_eq!(read_peak(&h.path("peak")), Some(123_456));
        std::fs::write(h.path("bad"), "n/a").unwrap();
        assert_eq!(read_peak(&h.path("bad")), None);
        assert_eq!(read_peak(&h.path("missing")), None);
    }
}
