//! The Python hook: a generated `sitecustomize.py` in a temporary folder put
//! first on the child's `PYTHONPATH`. It chains to the `sitecustomize` it
//! shadows and, once `torch` is imported in the main process and CUDA is
//! available, reads PyTorch's own counters (see the script's header):
//!
//! - the peak: `torch.cuda.max_memory_reserved()` at exit, written to the file
//!   named by `OOMKIT_PEAK_FILE` (`oomkit probe`'s `peak_bytes`);
//! - on `--snapshot-on-oom`: `torch.cuda.memory._record_memory_history` and,
//!   from `torch._C._cuda_attach_out_of_memory_observer`, one
//!   `torch.cuda.memory._dump_snapshot(OOMKIT_SNAPSHOT_PATH)` at the first OOM
//!   (PyTorch's "Understanding CUDA Memory Usage" page documents both).
//!
//! A command that is not Python ignores the variables; the hook never prints.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::Error;

/// The script (also readable in the source tree next to this file).
pub const SITECUSTOMIZE: &str = include_str!("sitecustomize.py");

/// Variable naming the file the peak is written to.
pub const PEAK_ENV: &str = "OOMKIT_PEAK_FILE";
/// Variable naming where the snapshot is dumped.
pub const SNAPSHOT_ENV: &str = "OOMKIT_SNAPSHOT_PATH";
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
    /// Writes the script to a fresh temporary folder.
    pub fn install() -> Result<Hook, Error> {
        let dir = tempfile::Builder::new()
            .prefix("oomkit-hook-")
            .tempdir()
            .map_err(Error::Hook)?;
        std::fs::write(dir.path().join("sitecustomize.py"), SITECUSTOMIZE).map_err(Error::Hook)?;
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

/// Reads a peak file the hook wrote (`None` when absent or unreadable).
pub fn read_peak(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_the_hook_first_on_pythonpath() {
        let h = Hook::install().unwrap();
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
    fn reads_a_peak_file_and_ignores_garbage() {
        let h = Hook::install().unwrap();
        std::fs::write(h.path("peak"), "123456\n").unwrap();
        assert_eq!(read_peak(&h.path("peak")), Some(123_456));
        std::fs::write(h.path("bad"), "n/a").unwrap();
        assert_eq!(read_peak(&h.path("bad")), None);
        assert_eq!(read_peak(&h.path("missing")), None);
    }
}
