//! What NVML does not say about a process, read from `/proc`.
//!
//! NVML reports PIDs in the host's PID namespace. Inside a container those
//! PIDs usually do not exist (or, worse, name another process), so a PID whose
//! `/proc` entry is missing gets no command or user — shown as "not in this
//! PID namespace" — rather than a guess. Reads are bounded (a command line is
//! cut at [`MAX_CMDLINE`] bytes).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;

/// Longest command line kept, bytes.
pub const MAX_CMDLINE: u64 = 4096;

/// Command line of `pid` (arguments joined by spaces), if visible.
pub fn command(pid: u32) -> Option<String> {
    let file = fs::File::open(format!("/proc/{pid}/cmdline")).ok()?;
    let mut raw = Vec::new();
    file.take(MAX_CMDLINE).read_to_end(&mut raw).ok()?;
    let args: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if args.is_empty() {
        // Kernel threads and zombies have an empty cmdline: use the name.
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        return Some(format!("[{}]", comm.trim_end()));
    }
    Some(args.join(" "))
}

/// Owner uid of `pid`, if visible.
pub fn uid(pid: u32) -> Option<u32> {
    fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid())
}

/// User name for `uid` (the passwd database), or the number.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => uid.to_string(),
    }
}

/// Parent PID of `pid`, from `/proc/PID/stat` (the field after the
/// parenthesised command, which may itself hold spaces and parentheses).
pub fn parent(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let mut fields = after.split_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

/// `root` and every live descendant of it.
pub fn tree(root: u32) -> BTreeSet<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = parent(pid) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if out.insert(pid)
            && let Some(kids) = children.get(&pid)
        {
            stack.extend(kids.iter().copied());
        }
    }
    out
}

/// Per-sample cache of user and command: a PID's entry lives as long as the
/// PID keeps appearing in samples, so a busy 10 Hz monitor reads `/proc` once
/// per process, not ten times a second.
#[derive(Default)]
pub struct Lookup {
    cache: BTreeMap<u32, (Option<String>, Option<String>)>,
    users: BTreeMap<u32, String>,
    seen: BTreeSet<u32>,
}

impl Lookup {
    /// Starts a sample: PIDs not described during it are forgotten at its end.
    pub fn begin_sample(&mut self) {
        self.seen.clear();
    }

    /// Forgets PIDs that did not appear in this sample (a reused PID is read afresh).
    pub fn end_sample(&mut self) {
        let seen = &self.seen;
        self.cache.retain(|pid, _| seen.contains(pid));
    }

    /// (user, command) of `pid`; both `None` when the PID is not visible here.
    pub fn describe(&mut self, pid: u32) -> (Option<String>, Option<String>) {
        self.seen.insert(pid);
        if let Some(hit) = self.cache.get(&pid) {
            return hit.clone();
        }
        let command = command(pid);
        let user = command
            .as_ref()
            .and_then(|_| uid(pid))
            .map(|u| self.users.entry(u).or_insert_with(|| user_name(u)).clone());
        let value = (user, command);
        self.cache.insert(pid, value.clone());
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_visible() {
        let me = std::process::id();
        assert!(command(me).is_some());
        assert!(uid(me).is_some());
        assert!(tree(me).contains(&me));
        let parent_pid = parent(me).unwrap();
        assert!(tree(parent_pid).contains(&me));
    }

    #[test]
    fn missing_pid_is_none() {
        // PIDs are bounded by /proc/sys/kernel/pid_max (at most 2^22).
        let absent = u32::MAX - 1;
        assert_eq!(command(absent), None);
        let mut l = Lookup::default();
        assert_eq!(l.describe(absent), (None, None));
    }
}
