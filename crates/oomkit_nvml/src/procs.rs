//! What NVML does not say about a process, read from `/proc`.
//!
//! NVML reports PIDs in the host's PID namespace. Inside a container (a child
//! PID namespace, [`in_child_pid_namespace`]) those numbers mean nothing
//! here, or worse name another process, so `/proc` is never consulted for
//! them: the command is NVML's own process name, the user unknown. In the
//! host's namespace, `/proc/PID/status` `NSpid` gives a containerised
//! process's PID inside its container too. Reads are bounded (a command line
//! is cut at [`MAX_CMDLINE`] bytes).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Read;

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

/// The inode of the initial PID namespace (`PROC_PID_INIT_INO` in the
/// kernel's `include/linux/proc_ns.h`): `/proc/self/ns/pid` links to
/// `pid:[4026531836]` on the host and to another inode in a container.
pub const INIT_PID_NAMESPACE: &str = "pid:[4026531836]";

/// True when this process runs in a child PID namespace (a container), where
/// the host PIDs NVML reports cannot be looked up in `/proc`.
pub fn in_child_pid_namespace() -> bool {
    fs::read_link("/proc/self/ns/pid")
        .map(|l| l.to_string_lossy() != INIT_PID_NAMESPACE)
        .unwrap_or(false)
}

/// The PID of `pid` inside its own (innermost) PID namespace, when that
/// differs from `pid`: the last field of `NSpid` in `/proc/PID/status`.
pub fn container_pid(pid: u32) -> Option<u32> {
    let file = fs::File::open(format!("/proc/{pid}/status")).ok()?;
    let mut text = String::new();
    file.take(64 * 1024).read_to_string(&mut text).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    let inner: u32 = line.split_whitespace().last()?.parse().ok()?;
    (inner != pid).then_some(inner)
}

/// Host memory from `/proc/meminfo` as (total, available) bytes, for GPUs
/// that allocate from it (unified memory).
pub fn system_memory() -> Option<(u64, u64)> {
    let file = fs::File::open("/proc/meminfo").ok()?;
    let mut text = String::new();
    file.take(64 * 1024).read_to_string(&mut text).ok()?;
    parse_meminfo(&text)
}

/// `MemTotal` and `MemAvailable` of a `/proc/meminfo` text, in bytes.
pub fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| -> Option<u64> {
        let rest = text.lines().find_map(|l| l.strip_prefix(name))?;
        let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        kib.checked_mul(1024)
    };
    Some((field("MemTotal:")?, field("MemAvailable:")?))
}

/// Owner uid of `pid`, if visible (`None` where there is no `/proc`, and on
/// Windows, which has no uids).
#[cfg(unix)]
pub fn uid(pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid())
}

/// Owner uid of `pid`: Windows has no uids.
#[cfg(not(unix))]
pub fn uid(_pid: u32) -> Option<u32> {
    None
}

/// User name for `uid` (the passwd database), or the number.
pub fn user_name(uid: u32) -> String {
    #[cfg(unix)]
    if let Ok(Some(u)) = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        return u.name;
    }
    uid.to_string()
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
pub struct Lookup {
    cache: BTreeMap<u32, Described>,
    users: BTreeMap<u32, String>,
    seen: BTreeSet<u32>,
    /// In a child PID namespace: host PIDs are never looked up in `/proc`.
    foreign: bool,
}

/// (user, command, PID inside its container).
type Described = (Option<String>, Option<String>, Option<u32>);

impl Default for Lookup {
    fn default() -> Self {
        Lookup {
            cache: BTreeMap::new(),
            users: BTreeMap::new(),
            seen: BTreeSet::new(),
            foreign: in_child_pid_namespace(),
        }
    }
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

    /// (user, command, PID inside its container) of a host `pid`; user and
    /// command `None` when it is not visible here. In a child PID namespace
    /// `/proc` is not consulted (the number would name another process):
    /// the command is `fallback(pid)` (NVML's process name), the user `None`.
    pub fn describe(
        &mut self,
        pid: u32,
        fallback: impl FnOnce(u32) -> Option<String>,
    ) -> Described {
        self.seen.insert(pid);
        if let Some(hit) = self.cache.get(&pid) {
            return hit.clone();
        }
        let value = if self.foreign {
            (None, fallback(pid), None)
        } else {
            let command = command(pid);
            let user = command
                .as_ref()
                .and_then(|_| uid(pid))
                .map(|u| self.users.entry(u).or_insert_with(|| user_name(u)).clone());
            let inner = command.as_ref().and_then(|_| container_pid(pid));
            (user, command, inner)
        };
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
        assert_eq!(l.describe(absent, |_| None), (None, None, None));
        // Our own PID is the same inside and out (no container here, or
        // we are its init's namespace).
        assert_eq!(container_pid(std::process::id()), None);
    }

    #[test]
    fn meminfo() {
        let text =
            "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   65536000 kB\n";
        assert_eq!(
            parse_meminfo(text),
            Some((131_072_000 * 1024, 65_536_000 * 1024))
        );
        assert_eq!(parse_meminfo("MemTotal: lots\n"), None);
        assert!(system_memory().is_some());
    }
}
