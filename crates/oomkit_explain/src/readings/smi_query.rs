//! `nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits]` and
//! `--query-compute-apps=…`: a header of field names (with ` [MiB]`/` [%]`
//! units unless `nounits`), then one comma-separated row per GPU or process.
//!
//! ```text
//! $ nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv
//! index, name, memory.used [MiB], memory.total [MiB]
//! 0, NVIDIA A100-SXM4-80GB, 1234 MiB, 81920 MiB
//! $ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
//! pid, process_name, used_gpu_memory [MiB]
//! 1234, python, 1200 MiB
//! ```
//!
//! The field list comes from the header, or from the command line when
//! `noheader` left none (so a `noheader` CSV is read only with its command).
//! Without an `index` column a GPU query's rows are in nvidia-smi's index
//! order (row n is GPU n; with `-i N`/`--id=N`, the one row is GPU N).
//! Compute-app rows name their GPU only by `gpu_uuid` (or bus id); they are
//! placed on the GPU of a query in the same paste with that UUID, or on the
//! only GPU of that query, and otherwise left unplaced.

use std::sync::LazyLock;

use oomkit_core::{GpuReading, ProcessReading};

use super::{
    Lazy, MAX_GPUS, MAX_PROCESSES, Reading, Source, Unplaced, leading_f64, leading_u32, mib_value,
    name, regex,
};
use crate::normalize::Doc;

static COMMAND: Lazy = LazyLock::new(|| {
    regex(r"--query-(gpu|compute-apps)[= ]([A-Za-z0-9_.,]+)(?:.*?--format[= ]([a-z,]+))?")
});
static DEVICE: Lazy = LazyLock::new(|| regex(r"(?:^|\s)(?:-i|--id)[= ]?(\d{1,3})(?:\s|$)"));
static FIELD: Lazy =
    LazyLock::new(|| regex(r"^([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)(?: \[[^\]]{1,12}\])?$"));

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gpu,
    Apps,
}

/// A table being read.
struct Table {
    kind: Kind,
    fields: Vec<String>,
    /// `-i N` on the command line.
    device: Option<u32>,
    reading: Reading,
    rows: usize,
}

/// Field names nvidia-smi knows, in either kind of query (enough to tell a
/// header from ordinary text that happens to contain commas).
fn known(f: &str) -> bool {
    f.starts_with("memory.")
        || f.starts_with("utilization.")
        || f.starts_with("temperature.")
        || f.starts_with("power.")
        || f.starts_with("pci.")
        || matches!(
            f,
            "index"
                | "name"
                | "gpu_name"
                | "uuid"
                | "gpu_uuid"
                | "gpu_bus_id"
                | "pid"
                | "process_name"
                | "used_memory"
                | "used_gpu_memory"
                | "driver_version"
                | "count"
                | "timestamp"
                | "serial"
                | "pstate"
        )
}

fn kind_of(fields: &[String]) -> Option<Kind> {
    if fields.iter().any(|f| f == "pid") {
        Some(Kind::Apps)
    } else if fields
        .iter()
        .any(|f| f.starts_with("memory.") || f == "index" || f == "utilization.gpu")
    {
        Some(Kind::Gpu)
    } else {
        None
    }
}

/// The field names of a header line, when it is one.
fn header(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for cell in line.split(',') {
        let c = FIELD.captures(cell.trim())?;
        out.push(c.get(1)?.as_str().to_string());
    }
    (out.len() >= 2 && out.iter().all(|f| known(f))).then_some(out)
}

/// Every query table in the region.
pub fn read(doc: &Doc) -> Vec<Reading> {
    let mut out: Vec<Reading> = Vec::new();
    let mut table: Option<Table> = None;
    // A command whose header (or first row, for `noheader`) is expected next.
    let mut command: Option<(Kind, Option<u32>, u64)> = None;
    for l in &doc.lines {
        let t = l.text.trim();
        if let Some(c) = COMMAND.captures(t) {
            close(&mut table, &mut out);
            let kind = if c.get(1).is_some_and(|m| m.as_str() == "gpu") {
                Kind::Gpu
            } else {
                Kind::Apps
            };
            let fields: Vec<String> = c
                .get(2)
                .map_or("", |m| m.as_str())
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect();
            let noheader = c
                .get(3)
                .is_some_and(|m| m.as_str().split(',').any(|o| o == "noheader"));
            let device = DEVICE
                .captures(t)
                .and_then(|d| d.get(1))
                .and_then(|m| m.as_str().parse().ok());
            if noheader {
                table = Some(Table {
                    kind,
                    fields,
                    device,
                    reading: Reading::new(Source::SmiQuery, l.line),
                    rows: 0,
                });
            } else {
                command = Some((kind, device, l.line));
            }
            continue;
        }
        if let Some(fields) = header(t) {
            close(&mut table, &mut out);
            let (kind, device, line) = match command.take() {
                Some((k, d, at)) => (Some(k), d, at),
                None => (kind_of(&fields), None, l.line),
            };
            if let Some(kind) = kind {
                table = Some(Table {
                    kind,
                    fields,
                    device,
                    reading: Reading::new(Source::SmiQuery, line),
                    rows: 0,
                });
            }
            continue;
        }
        let Some(tb) = table.as_mut() else {
            command = None;
            continue;
        };
        let cells: Vec<&str> = t.split(',').map(str::trim).collect();
        if cells.len() != tb.fields.len() || t.is_empty() {
            close(&mut table, &mut out);
            continue;
        }
        row(tb, &cells);
    }
    close(&mut table, &mut out);
    place(&mut out);
    out
}

fn close(table: &mut Option<Table>, out: &mut Vec<Reading>) {
    if let Some(t) = table.take()
        && t.rows > 0
    {
        out.push(t.reading);
    }
}

fn row(tb: &mut Table, cells: &[&str]) {
    let get = |f: &str| {
        tb.fields
            .iter()
            .position(|x| x == f)
            .and_then(|i| cells.get(i).copied())
    };
    let any = |fs: &[&str]| fs.iter().find_map(|f| get(f));
    match tb.kind {
        Kind::Gpu => {
            if tb.reading.gpus.len() >= MAX_GPUS {
                return;
            }
            let by_order = tb
                .device
                .filter(|_| tb.rows == 0)
                .unwrap_or_else(|| u32::try_from(tb.rows).unwrap_or(u32::MAX));
            let index = get("index")
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(by_order);
            let g = GpuReading {
                index,
                name: any(&["name", "gpu_name"]).and_then(name),
                uuid: any(&["uuid", "gpu_uuid"]).and_then(name),
                memory_total_bytes: get("memory.total").and_then(mib_value),
                memory_used_bytes: get("memory.used").and_then(mib_value),
                memory_reserved_bytes: get("memory.reserved").and_then(mib_value),
                utilization_pct: get("utilization.gpu").and_then(leading_u32),
                temperature_c: get("temperature.gpu").and_then(leading_u32),
                power_w: any(&["power.draw", "power.draw.instant", "power.draw.average"])
                    .and_then(leading_f64),
                ..GpuReading::default()
            };
            tb.reading.gpus.push(g);
            tb.rows += 1;
        }
        Kind::Apps => {
            tb.reading.process_list = true;
            if tb.reading.unplaced.len() >= MAX_PROCESSES {
                return;
            }
            let Some(pid) = get("pid").and_then(|v| v.parse::<u32>().ok()) else {
                return;
            };
            tb.reading.unplaced.push(Unplaced {
                gpu: get("gpu_uuid").and_then(name),
                process: ProcessReading {
                    pid,
                    command: any(&["process_name", "name"]).and_then(name),
                    used_bytes: any(&["used_memory", "used_gpu_memory"]).and_then(mib_value),
                    ..ProcessReading::default()
                },
            });
            tb.rows += 1;
        }
    }
}

/// Places compute-app rows on the GPUs of a GPU query in the same region.
fn place(out: &mut Vec<Reading>) {
    let Some(gi) = out.iter().position(|r| !r.gpus.is_empty()) else {
        return;
    };
    let mut moved: Vec<(u32, ProcessReading)> = Vec::new();
    let gpus: Vec<(u32, Option<String>)> = out
        .get(gi)
        .map(|r| r.gpus.iter().map(|g| (g.index, g.uuid.clone())).collect())
        .unwrap_or_default();
    for r in out.iter_mut().filter(|r| r.gpus.is_empty()) {
        r.unplaced.retain(|u| {
            let target = match (&u.gpu, gpus.as_slice()) {
                (Some(id), _) => gpus
                    .iter()
                    .find(|(_, uuid)| uuid.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(id)))
                    .map(|(i, _)| *i),
                (None, [(only, _)]) => Some(*only),
                (None, _) => None,
            };
            match target {
                Some(i) => {
                    moved.push((i, u.process.clone()));
                    false
                }
                None => true,
            }
        });
    }
    out.retain(|r| !r.gpus.is_empty() || !r.unplaced.is_empty());
    if let Some(r) = out.iter_mut().find(|r| !r.gpus.is_empty()) {
        if !moved.is_empty() {
            r.process_list = true;
        }
        for (i, p) in moved {
            r.add_process(i, p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::doc;
    use super::*;

    #[test]
    fn reads_gpu_and_apps_queries_and_places_processes() {
        let t = "\
$ nvidia-smi --query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu --format=csv
index, name, uuid, memory.used [MiB], memory.total [MiB], utilization.gpu [%]
0, NVIDIA A100-SXM4-80GB, GPU-aaaa, 80000 MiB, 81920 MiB, 100 %
1, NVIDIA A100-SXM4-80GB, GPU-bbbb, 4 MiB, 81920 MiB, 0 %
$ nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv
pid, process_name, gpu_uuid, used_gpu_memory [MiB]
4242, python, GPU-aaaa, 60000 MiB
4343, /opt/other, GPU-aaaa, 19000 MiB
";
        let r = read(&doc(t));
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(r.line, 1);
        assert_eq!(r.gpus[0].memory_used_bytes, Some(80000 << 20));
        assert_eq!(r.gpus[0].utilization_pct, Some(100));
        assert_eq!(r.gpus[0].processes.len(), 2);
        assert_eq!(r.gpus[0].processes[1].pid, 4343);
        assert!(r.gpus[1].processes.is_empty());
        assert!(r.unplaced.is_empty());
    }

    #[test]
    fn noheader_nounits_needs_the_command() {
        let t = "\
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits -i 3
1234, 16384
";
        let r = read(&doc(t));
        assert_eq!(r[0].gpus[0].index, 3);
        assert_eq!(r[0].gpus[0].memory_total_bytes, Some(16384 << 20));
        assert!(read(&doc("1234, 16384\n")).is_empty());
    }

    #[test]
    fn apps_alone_stay_unplaced_and_na_is_none() {
        let t = "\
pid, process_name, used_gpu_memory [MiB]
77, python, [N/A]
";
        let r = &read(&doc(t))[0];
        assert_eq!(r.unplaced.len(), 1);
        assert_eq!(r.unplaced[0].process.used_bytes, None);
    }

    #[test]
    fn ordinary_commas_are_not_a_header() {
        assert!(read(&doc("loss, acc, lr\n0.1, 0.9, 3e-4\n")).is_empty());
    }
}
