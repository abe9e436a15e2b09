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
//! The field list comes from the header — in any order, any subset, with
//! or without units (`nounits`) — or from the command line when `noheader`
//! left none. A header is recognised alone, without its command, when every
//! cell is a field name and one of them is a memory field (`memory.used`,
//! `used_gpu_memory`, …). Rows without either are only numbers and names:
//! which column is used and which total cannot be told, so they are not read.
//!
//! GPU numbers are never invented: with an `index` column each row says its
//! own; with the command line pasted and no `-i`, rows are in nvidia-smi's
//! index order (row n is GPU n), and with `-i N` the one row is GPU N; in
//! every other case (no command, `-i 2,3`, `-i` by UUID) the rows are "as
//! listed" ([`Reading::listed`]). Output of `-l`/`--loop` (the same GPUs
//! again, each sample with its `timestamp`, or an index seen twice) is read
//! as samples, and the last one is the reading. A `[N/A]` or
//! `[Not Supported]` figure (a unified-memory GB10, XuehaiPan/nvitop#208)
//! keeps the row with that figure unknown. A process row repeated (same PID
//! on the same GPU) is counted once.
//!
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
/// `-i 3`, `--id=3`, `-i 2,3`, `-i GPU-…`: the value as printed.
static DEVICE: Lazy = LazyLock::new(|| regex(r"(?:^|\s)(?:-i|--id)[= ]?([^\s-]\S*)"));
static FIELD: Lazy =
    LazyLock::new(|| regex(r"^([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)(?: \[[^\]]{1,12}\])?$"));

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gpu,
    Apps,
}

/// How the rows of a GPU query are numbered when there is no `index` column.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// The command is pasted without `-i`: row n is GPU n.
    All,
    /// `-i N`: the one row is GPU N.
    One(u32),
    /// Nothing says which GPUs these are.
    Listed,
}

/// A table being read.
struct Table {
    kind: Kind,
    fields: Vec<String>,
    order: Order,
    reading: Reading,
    rows: usize,
    /// Rows of the current sample (`-l` output repeats the GPUs).
    sample_rows: usize,
    /// The current sample's timestamp, to the second.
    sample_at: Option<String>,
}

impl Table {
    fn new(kind: Kind, fields: Vec<String>, order: Order, line: u64) -> Table {
        let mut reading = Reading::new(Source::SmiQuery, line);
        reading.listed =
            kind == Kind::Gpu && order == Order::Listed && !fields.iter().any(|f| f == "index");
        Table {
            kind,
            fields,
            order,
            reading,
            rows: 0,
            sample_rows: 0,
            sample_at: None,
        }
    }
}

/// The order a command line gives (`None` for no command).
fn order_of(command: &str) -> Order {
    match DEVICE.captures(command).and_then(|c| c.get(1)) {
        None => Order::All,
        Some(v) => v.as_str().parse::<u32>().map_or(Order::Listed, Order::One),
    }
}

/// A field that makes a header a memory reading (and not ordinary text
/// that happens to hold commas).
fn memory_field(f: &str) -> bool {
    f.starts_with("memory.") || matches!(f, "used_memory" | "used_gpu_memory")
}

/// Field names nvidia-smi knows, in either kind of query (`nvidia-smi
/// --help-query-gpu`, `--help-query-compute-apps`): a header may hold any
/// of them beside its memory fields.
fn known(f: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "memory.",
        "utilization.",
        "temperature.",
        "power.",
        "pci.",
        "clocks.",
        "clocks_throttle_reasons.",
        "clocks_event_reasons.",
        "fan.",
        "ecc.",
        "enforced.",
        "encoder.",
        "fbc.",
        "mig.",
        "retired_pages.",
        "remapped_rows.",
        "driver_model.",
        "inforom.",
        "gom.",
        "accounting.",
        "compute_",
        "display_",
        "reset_status.",
        "protected_memory.",
        "module.",
    ];
    PREFIXES.iter().any(|p| f.starts_with(p))
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
                | "persistence_mode"
                | "vbios_version"
                | "compute_cap"
                | "addressing_mode"
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
    (out.len() >= 2 && out.iter().all(|f| known(f)) && out.iter().any(|f| memory_field(f)))
        .then_some(out)
}

/// Every query table in the region.
pub fn read(doc: &Doc) -> Vec<Reading> {
    let mut out: Vec<Reading> = Vec::new();
    let mut table: Option<Table> = None;
    // A command whose header (or first row, for `noheader`) is expected next.
    let mut command: Option<(Kind, Order, u64)> = None;
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
            let order = order_of(t);
            if noheader {
                table = Some(Table::new(kind, fields, order, l.line));
            } else {
                command = Some((kind, order, l.line));
            }
            continue;
        }
        if let Some(fields) = header(t) {
            close(&mut table, &mut out);
            let (kind, order, line) = match command.take() {
                Some((k, o, at)) => (Some(k), o, at),
                None => (kind_of(&fields), Order::Listed, l.line),
            };
            if let Some(kind) = kind {
                table = Some(Table::new(kind, fields, order, line));
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
            let printed = get("index").and_then(|v| v.parse::<u32>().ok());
            // `-l` output: a new timestamp (to the second), or a GPU the
            // current sample already has, starts the next sample.
            let at = get("timestamp").map(|v| v.rsplit_once('.').map_or(v, |(s, _)| s));
            let new_time = at.is_some_and(|a| tb.sample_at.as_deref().is_some_and(|s| s != a));
            let seen = printed.is_some_and(|i| tb.reading.gpus.iter().any(|g| g.index == i))
                || get("uuid")
                    .is_some_and(|u| tb.reading.gpus.iter().any(|g| g.uuid.as_deref() == Some(u)));
            if tb.sample_rows > 0 && (new_time || seen) {
                tb.reading.gpus.clear();
                tb.sample_rows = 0;
                tb.reading.samples = tb.reading.samples.saturating_add(1).max(2);
            }
            if let Some(a) = at {
                tb.sample_at = Some(a.to_string());
            }
            if tb.reading.gpus.len() >= MAX_GPUS {
                return;
            }
            let position = u32::try_from(tb.sample_rows).unwrap_or(u32::MAX);
            let index = match (printed, tb.order) {
                (Some(i), _) => i,
                (None, Order::One(n)) if tb.sample_rows == 0 => n,
                (None, Order::One(_)) => {
                    tb.reading.listed = true;
                    position
                }
                (None, _) => position,
            };
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
            tb.sample_rows += 1;
        }
        Kind::Apps => {
            tb.reading.process_list = true;
            if tb.reading.unplaced.len() >= MAX_PROCESSES {
                return;
            }
            let Some(pid) = get("pid").and_then(|v| v.parse::<u32>().ok()) else {
                return;
            };
            let gpu = any(&["gpu_uuid", "gpu_bus_id"]).and_then(name);
            let used = any(&["used_memory", "used_gpu_memory"]).and_then(mib_value);
            tb.rows += 1;
            if let Some(u) = tb
                .reading
                .unplaced
                .iter_mut()
                .find(|u| u.process.pid == pid && u.gpu == gpu)
            {
                tb.reading.duplicate_rows = tb.reading.duplicate_rows.saturating_add(1);
                u.process.used_bytes = u.process.used_bytes.max(used);
                return;
            }
            tb.reading.unplaced.push(Unplaced {
                gpu,
                process: ProcessReading {
                    pid,
                    command: any(&["process_name", "name"]).and_then(name),
                    used_bytes: used,
                    ..ProcessReading::default()
                },
            });
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
    let dups: usize = out
        .iter()
        .filter(|r| r.gpus.is_empty() && r.unplaced.is_empty())
        .map(|r| r.duplicate_rows)
        .sum();
    out.retain(|r| !r.gpus.is_empty() || !r.unplaced.is_empty());
    if let Some(r) = out.iter_mut().find(|r| !r.gpus.is_empty()) {
        if !moved.is_empty() {
            r.process_list = true;
        }
        r.duplicate_rows = r.duplicate_rows.saturating_add(dups);
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
