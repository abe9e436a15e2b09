//! nvidia-smi's default table, both layouts:
//!
//! - up to driver ~510 (`| GPU  Name        Persistence-M| Bus-Id  Disp.A |`,
//!   process rows `|    0      1234      C   python    1234MiB |`);
//! - since (`| GPU  Name                 Persistence-M | Bus-Id …`, a third
//!   `MIG M.` line, process rows with `GI`/`CI` columns:
//!   `|    0   N/A  N/A     12345      C   python    1234MiB |`);
//! - Windows (`WDDM`/`TCC` in place of persistence, `N/A` process memory),
//!   a `MIG devices:` table, truncated names (`GeForce RTX 208...`).
//!
//! Rows are matched in the spaced view (lines joined by one space), so a
//! table whose line breaks were lost in a paste, or whose borders were
//! mangled, still reads: each pattern needs only the cells, not the lines.
//! A table starts at its `NVIDIA-SMI x Driver Version: y` header; rows before
//! any header form a table of their own (a paste that cut the header).

use std::sync::LazyLock;

use oomkit_core::{GpuReading, ProcessReading};

use super::{
    Lazy, MAX_GPUS, MigDevice, Reading, Source, leading_f64, leading_u32, line_at, mib, name, regex,
};
use crate::normalize::Doc;

static HEADER: Lazy = LazyLock::new(|| {
    regex(
        r"NVIDIA-SMI ([0-9][\w.-]*)(?: \|)?(?: Driver Version: ([0-9][\w.-]*))?(?: \|)?(?: CUDA Version: ([0-9][\w.-]*))?",
    )
});

/// `|   0  NVIDIA A100-SXM4-80GB  On  | 00000000:07:00.0 Off |`
static GPU_ROW: Lazy = LazyLock::new(|| {
    regex(
        r"\| ?(\d{1,3}) ([^|]*?) ?(On|Off|N/A|WDDM|TCC) ?\| ?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])",
    )
});

/// `| N/A   32C    P0    61W / 400W |   4MiB / 81920MiB |   0%   Default |`;
/// a unified-memory GPU (GB10, driver 580) prints `Not Supported` in the
/// memory cell (snowflakedb/ArcticTraining#345), read as unknown memory.
static STATS_ROW: Lazy = LazyLock::new(|| {
    regex(
        r"(\d{1,3}%|N/A|ERR!) (\d{1,3}C|N/A|ERR!) (P\d{1,2}|N/A|ERR!) ([^|]{0,40}?) ?\| ?(?:(\d{1,9}) ?MiB ?/ ?(\d{1,9}) ?MiB|Not Supported|N/A|\[N/A\]) ?\| ?(\d{1,3} ?%|N/A|ERR!)?",
    )
});

/// `|  0    1   0   0  |  11MiB / 40192MiB | …` (MIG devices table).
static MIG_ROW: Lazy = LazyLock::new(|| {
    regex(r"\| ?(\d{1,3}) (\d{1,3}) (\d{1,3}) (\d{1,3}) ?\| ?(\d{1,9}) ?MiB ?/ ?(\d{1,9}) ?MiB")
});

/// `|    0   N/A  N/A   12345   C   python   1234MiB |` (GI/CI optional).
static PROCESS_ROW: Lazy = LazyLock::new(|| {
    regex(
        r"\| ?(\d{1,3}) (?:(N/A|\d{1,4}) (N/A|\d{1,4}) )?(\d{1,10}) (C\+G|M\+C|C|G|M) (\S(?:[^|]{0,200}?\S)?) ?(?:(\d{1,9}) ?MiB|N/A)",
    )
});

/// Every table in the region.
pub fn read(doc: &Doc) -> Vec<Reading> {
    let text = doc.spaced.as_str();
    let mut starts: Vec<usize> = HEADER.find_iter(text).map(|m| m.start()).collect();
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    let mut out = Vec::new();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let Some(seg) = text.get(start..end) else {
            continue;
        };
        if let Some(r) = table(doc, seg, start) {
            out.push(r);
        }
    }
    out
}

fn table(doc: &Doc, seg: &str, base: usize) -> Option<Reading> {
    let header = HEADER
        .captures(seg)
        .filter(|c| c.get(0).is_some_and(|m| m.start() == 0));
    let (gpu_part, proc_part) = match seg.find("Processes:") {
        Some(p) => (seg.get(..p).unwrap_or(seg), seg.get(p..)),
        None => (seg, None),
    };
    let (gpu_part, mig_part) = match gpu_part.find("MIG devices:") {
        Some(p) => (gpu_part.get(..p).unwrap_or(gpu_part), gpu_part.get(p..)),
        None => (gpu_part, None),
    };
    let mut first = None::<usize>;
    let mut gpus: Vec<GpuReading> = Vec::new();
    // Pair each stats row with the GPU row before it.
    let ids: Vec<_> = GPU_ROW.captures_iter(gpu_part).collect();
    for st in STATS_ROW.captures_iter(gpu_part) {
        let at = st.get(0).map_or(0, |m| m.start());
        let Some(id) = ids
            .iter()
            .rev()
            .find(|c| c.get(0).is_some_and(|m| m.end() <= at))
        else {
            continue;
        };
        let Some(index) = id.get(1).and_then(|m| m.as_str().parse::<u32>().ok()) else {
            continue;
        };
        if gpus.iter().any(|g| g.index == index) || gpus.len() >= MAX_GPUS {
            continue;
        }
        first = first.or(id.get(0).map(|m| m.start()));
        let cell = |i: usize| st.get(i).map_or("", |m| m.as_str());
        gpus.push(GpuReading {
            index,
            name: id.get(2).and_then(|m| name(m.as_str())),
            memory_used_bytes: cell(5).parse::<u64>().ok().map(mib),
            memory_total_bytes: cell(6).parse::<u64>().ok().map(mib),
            utilization_pct: leading_u32(cell(7)),
            temperature_c: leading_u32(cell(2)),
            power_w: cell(4).split('/').next().and_then(leading_f64),
            ..GpuReading::default()
        });
    }
    let mut r = Reading::new(Source::SmiTable, 0);
    if let Some(h) = &header {
        r.driver_version = h.get(2).map(|m| m.as_str().to_string());
        r.cuda_version = h.get(3).map(|m| m.as_str().to_string());
    }
    r.gpus = gpus;
    if let Some(mig) = mig_part {
        for c in MIG_ROW.captures_iter(mig) {
            let n = |i: usize| {
                c.get(i)
                    .and_then(|m| m.as_str().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            if r.mig.len() < MAX_GPUS * 7 {
                r.mig.push(MigDevice {
                    gpu: u32::try_from(n(1)).unwrap_or(0),
                    gi: u32::try_from(n(2)).unwrap_or(0),
                    ci: u32::try_from(n(3)).unwrap_or(0),
                    mig: u32::try_from(n(4)).unwrap_or(0),
                    memory_used_bytes: mib(n(5)),
                    memory_total_bytes: mib(n(6)),
                });
            }
        }
    }
    if let Some(procs) = proc_part {
        r.process_list = true;
        for c in PROCESS_ROW.captures_iter(procs) {
            let (Some(gpu), Some(pid)) = (
                c.get(1).and_then(|m| m.as_str().parse::<u32>().ok()),
                c.get(4).and_then(|m| m.as_str().parse::<u32>().ok()),
            ) else {
                continue;
            };
            r.add_process(
                gpu,
                ProcessReading {
                    pid,
                    command: c.get(6).and_then(|m| name(m.as_str())),
                    used_bytes: c
                        .get(7)
                        .and_then(|m| m.as_str().parse::<u64>().ok())
                        .map(mib),
                    ..ProcessReading::default()
                },
            );
        }
    }
    if r.gpus.is_empty() && r.mig.is_empty() {
        // A process table alone is a reading only under a header.
        if header.is_none() || !r.process_list {
            return None;
        }
    }
    let at = if header.is_some() {
        base
    } else {
        base.saturating_add(first.unwrap_or(0))
    };
    r.line = line_at(doc, at);
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::super::tests::doc;
    use super::*;

    const NEW: &str = "\
Wed Nov 12 03:22:39 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.163.01             Driver Version: 550.163.01     CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090        Off |   00000000:4E:00.0 Off |                  Off |
| 30%   29C    P8             22W /  450W |     507MiB /  24564MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA GeForce RTX 4090        Off |   00000000:4F:00.0 Off |                  Off |
| 30%   29C    P2            121W /  450W |   23459MiB /  24564MiB |     97%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    1   N/A  N/A    123456      C   ...niconda3/envs/train/bin/python3.10       23440MiB |
+-----------------------------------------------------------------------------------------+
";

    #[test]
    fn reads_the_new_layout_with_processes() {
        let r = read(&doc(NEW));
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(r.line, 3);
        assert_eq!(r.driver_version.as_deref(), Some("550.163.01"));
        assert_eq!(r.cuda_version.as_deref(), Some("12.4"));
        assert_eq!(r.gpus.len(), 2);
        let g = &r.gpus[1];
        assert_eq!(g.index, 1);
        assert_eq!(g.name.as_deref(), Some("NVIDIA GeForce RTX 4090"));
        assert_eq!(g.memory_used_bytes, Some(23459 << 20));
        assert_eq!(g.memory_total_bytes, Some(24564 << 20));
        assert_eq!(g.utilization_pct, Some(97));
        assert_eq!(g.temperature_c, Some(29));
        assert_eq!(g.power_w, Some(121.0));
        assert_eq!(g.processes.len(), 1);
        assert_eq!(g.processes[0].pid, 123456);
        assert_eq!(g.processes[0].used_bytes, Some(23440 << 20));
        assert_eq!(
            g.processes[0].command.as_deref(),
            Some("...niconda3/envs/train/bin/python3.10")
        );
        assert!(r.gpus[0].processes.is_empty());
    }

    #[test]
    fn reads_a_table_whose_line_breaks_were_lost() {
        let flat = NEW.replace('\n', "");
        let r = read(&doc(&flat));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].gpus.len(), 2);
        assert_eq!(r[0].gpus[1].processes.len(), 1);
    }

    #[test]
    fn reads_the_old_layout_and_windows_rows() {
        let t = "\
| NVIDIA-SMI 410.48                 Driver Version: 410.48                    |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla V100-DGXS...  Off  | 00000000:82:00.0 Off |                    0 |
| N/A   38C    P0    49W / 300W |    449MiB / 32478MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
|   1  GeForce RTX 3080   WDDM  | 00000000:01:00.0  On |                  N/A |
| 30%   50C    P2   N/A /  N/A  |   9000MiB / 10240MiB |     N/A      Default |
+-------------------------------+----------------------+----------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|    0     87315      C   python                                       439MiB |
|    1      4321    C+G   C:\\Windows\\explorer.exe                   N/A      |
+-----------------------------------------------------------------------------+
";
        let r = read(&doc(t));
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(r.cuda_version, None);
        assert_eq!(r.gpus[0].name.as_deref(), Some("Tesla V100-DGXS..."));
        assert_eq!(r.gpus[0].temperature_c, Some(38));
        assert_eq!(r.gpus[1].utilization_pct, None);
        assert_eq!(r.gpus[1].power_w, None);
        assert_eq!(r.gpus[0].processes[0].pid, 87315);
        assert_eq!(r.gpus[1].processes[0].used_bytes, None);
        assert_eq!(r.gpus[1].unattributed_bytes(), None);
    }

    #[test]
    fn reads_mig_devices_and_gi_ci_process_rows() {
        let t = "\
| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |
|   0  NVIDIA A100-SXM...  On   | 00000000:36:00.0 Off |                   On |
| N/A   29C    P0    43W / 400W |     24MiB / 81251MiB |     N/A      Default |
| MIG devices:                                                                |
| GPU  GI  CI  MIG |         Memory-Usage |        Vol|         Shared        |
|  0    1   0   0  |     11MiB / 40192MiB | 42      0 |  3   0    2    0    0 |
|                  |      0MiB / 65535MiB |           |                       |
|  0    2   0   1  |     13MiB / 40192MiB | 42      0 |  3   0    2    0    0 |
| Processes:                                                                  |
|    0    1    0      5555      C   python                          9000MiB |
";
        let r = &read(&doc(t))[0];
        assert_eq!(r.mig.len(), 2);
        assert_eq!(r.mig[1].gi, 2);
        assert_eq!(r.mig[1].memory_total_bytes, 40192 << 20);
        assert_eq!(r.gpus[0].processes[0].pid, 5555);
    }

    #[test]
    fn no_running_processes_is_an_empty_known_list() {
        let t = "\
| NVIDIA-SMI 535.104.05 Driver Version: 535.104.05 CUDA Version: 12.2 |
| 0 NVIDIA RTX 4090 On | 00000000:01:00.0 Off | Off |
| 30% 45C P2 75W / 450W | 18432MiB / 24564MiB | 85% Default |
| Processes: |
|  No running processes found |
";
        let r = &read(&doc(t))[0];
        assert!(r.process_list);
        assert!(r.gpus[0].processes.is_empty());
        assert_eq!(r.gpus[0].unattributed_bytes(), Some(18432 << 20));
    }

    #[test]
    fn two_tables_are_two_readings() {
        let both = format!("{NEW}\nlater:\n{NEW}");
        assert_eq!(read(&doc(&both)).len(), 2);
    }
}
