//! `--log FILE`: JSON Lines appended so that no line is ever torn.
//!
//! Each sample is serialised into one buffer ending in `\n` and written with a
//! single `write` on a file opened with `O_APPEND`, so concurrent readers
//! (`tail -f`, a log shipper) and even a second monitor appending to the same
//! file see whole lines; a crash between samples loses at most the sample in
//! flight, never half of one. When the file would pass `max_bytes` it is
//! renamed to `FILE.1` (replacing an older one) and a fresh `FILE` is started:
//! disk use stays under twice the limit.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// An append-only JSON Lines file that rotates at a size.
pub struct JsonLog {
    path: PathBuf,
    file: File,
    size: u64,
    max_bytes: u64,
}

impl JsonLog {
    /// Opens (creating) `path` for appending.
    pub fn open(path: &Path, max_bytes: u64) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(JsonLog {
            path: path.to_owned(),
            file,
            size,
            max_bytes,
        })
    }

    /// Appends one line (`line` must not contain a newline; one is added).
    pub fn append(&mut self, line: &str) -> io::Result<()> {
        let mut buf = Vec::with_capacity(line.len().saturating_add(1));
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let len = buf.len() as u64;
        if self.size > 0 && self.size.saturating_add(len) > self.max_bytes {
            self.rotate()?;
        }
        // One write call: the kernel appends it whole with O_APPEND. A short
        // write (disk full) is an error, not a retry that would tear the line.
        let n = self.file.write(&buf)?;
        if n != buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write to {} (disk full?)", self.path.display()),
            ));
        }
        self.file.flush()?;
        self.size = self.size.saturating_add(len);
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&self.path, PathBuf::from(old))?;
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu.jsonl");
        let mut log = JsonLog::open(&path, 100).unwrap();
        for i in 0..10 {
            log.append(&format!("{{\"i\":{i},\"pad\":\"0123456789\"}}"))
                .unwrap();
        }
        let cur = std::fs::read_to_string(&path).unwrap();
        let old = std::fs::read_to_string(dir.path().join("gpu.jsonl.1")).unwrap();
        for text in [&cur, &old] {
            assert!(text.len() <= 100);
            for line in text.lines() {
                serde_json::from_str::<serde_json::Value>(line).unwrap();
            }
        }
        assert!(cur.contains("\"i\":9"));
    }
}
