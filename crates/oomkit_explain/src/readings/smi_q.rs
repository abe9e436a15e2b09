//! `nvidia-smi -q` and `nvidia-smi -q -d MEMORY`: `Key : value` lines under
//! indented section names, one `GPU 00000000:01:00.0` block per GPU.
//!
//! ```text
//! ==============NVSMI LOG==============
//! Driver Version                            : 535.104.05
//! CUDA Version                              : 12.2
//! Attached GPUs                             : 1
//! GPU 00000000:01:00.0
//!     Product Name                          : NVIDIA GeForce RTX 4090
//!     FB Memory Usage
//!         Total                             : 24564 MiB
//!         Reserved                          : 346 MiB      (drivers ≥ 510)
//!         Used                              : 18432 MiB
//!         Free                              : 5785 MiB
//!     BAR1 Memory Usage                                   (not device memory)
//!     Processes
//!         Process ID                        : 1234
//!             Name                          : python
//!             Used GPU Memory               : 17000 MiB
//! ```
//!
//! The report names GPUs by bus id, never by index. Its blocks come in
//! nvidia-smi's index order, so when the report holds as many blocks as its
//! `Attached GPUs` line counts, the n-th block is GPU n; otherwise (`-i`
//! picked some, the paste starts inside a block) the GPUs are "as listed"
//! ([`Reading::listed`]). Every section is read where it is printed, with
//! the names of drivers up to 580 (`Gpu`/`GPU` utilisation, `Power Draw`,
//! `Instantaneous Power Draw`, `Average Power Draw`; the Confidential
//! Compute and BAR1 sections' `Total`/`Used` are not the framebuffer's).
//! A unified-memory GPU (GB10) prints `N/A` for its FB memory: the GPU is
//! kept with unknown memory. A report without an FB section is not a
//! memory reading.

use std::sync::LazyLock;

use oomkit_core::{GpuReading, ProcessReading};

use super::{Lazy, MAX_GPUS, Reading, Source, leading_f64, leading_u32, mib_value, name, regex};
use crate::normalize::Doc;

static GPU_BLOCK: Lazy = LazyLock::new(|| {
    regex(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
});

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Other,
    Fb,
    Utilization,
    Temperature,
    Power,
    Processes,
}

/// Every `-q` report in the region.
pub fn read(doc: &Doc) -> Vec<Reading> {
    if !doc.spaced.contains("FB Memory Usage") {
        return Vec::new();
    }
    let mut out: Vec<Reading> = Vec::new();
    let mut cur: Option<Reading> = None;
    let mut section = Section::Other;
    let mut pending: Option<ProcessReading> = None;
    let mut driver: Option<String> = None;
    let mut cuda: Option<String> = None;
    let mut attached: Option<usize> = None;
    // Whether the current reading has an FB section (with figures or `N/A`).
    let mut fb = false;
    let finish = |cur: &mut Option<Reading>,
                  pending: &mut Option<ProcessReading>,
                  out: &mut Vec<Reading>,
                  attached: Option<usize>,
                  fb: bool| {
        if let Some(mut r) = cur.take() {
            flush(&mut r, pending);
            if attached != Some(r.gpus.len()) {
                r.listed = true;
            }
            if fb {
                out.push(r);
            }
        }
    };
    for l in &doc.lines {
        let t = l.text.trim();
        if t.contains("NVSMI LOG") {
            finish(&mut cur, &mut pending, &mut out, attached, fb);
            driver = None;
            cuda = None;
            attached = None;
            fb = false;
            continue;
        }
        if GPU_BLOCK.is_match(t) {
            flush_opt(&mut cur, &mut pending);
            let r = cur.get_or_insert_with(|| {
                let mut r = Reading::new(Source::SmiQ, l.line);
                r.driver_version.clone_from(&driver);
                r.cuda_version.clone_from(&cuda);
                r
            });
            if r.gpus.len() < MAX_GPUS {
                let index = u32::try_from(r.gpus.len()).unwrap_or(u32::MAX);
                r.gpus.push(GpuReading {
                    index,
                    ..GpuReading::default()
                });
            }
            section = Section::Other;
            continue;
        }
        let Some((key, value)) = t.split_once(':').map(|(k, v)| (k.trim(), v.trim())) else {
            if t == "FB Memory Usage" && cur.as_ref().is_none_or(|r| r.gpus.is_empty()) {
                // A full `-q` puts ~80 lines between a GPU's `GPU 0000:…` line
                // and its FB section, more than the context kept before it.
                let r = cur.get_or_insert_with(|| {
                    let mut r = Reading::new(Source::SmiQ, l.line);
                    r.driver_version.clone_from(&driver);
                    r.cuda_version.clone_from(&cuda);
                    r
                });
                r.listed = true;
                r.gpus.push(GpuReading::default());
            }
            section = match t {
                "FB Memory Usage" => Section::Fb,
                "Utilization" => Section::Utilization,
                "Temperature" => Section::Temperature,
                "Power Readings" | "GPU Power Readings" => Section::Power,
                "Processes" => Section::Processes,
                _ if !t.is_empty() => Section::Other,
                _ => section,
            };
            continue;
        };
        if value.is_empty() {
            // `Processes :` with nothing after it never happens; a bare
            // heading followed by a colon is another section.
            section = Section::Other;
            continue;
        }
        match key {
            "Driver Version" => driver = Some(value.to_string()),
            "CUDA Version" => cuda = Some(value.to_string()),
            "Attached GPUs" => attached = value.parse().ok(),
            _ => {}
        }
        let Some(r) = cur.as_mut() else { continue };
        if matches!(key, "Driver Version" | "CUDA Version") {
            r.driver_version.clone_from(&driver);
            r.cuda_version.clone_from(&cuda);
        }
        if section == Section::Processes {
            match key {
                "Process ID" => {
                    flush(r, &mut pending);
                    pending = value.parse::<u32>().ok().map(|pid| ProcessReading {
                        pid,
                        ..ProcessReading::default()
                    });
                }
                "Name" => {
                    if let Some(p) = pending.as_mut() {
                        p.command = name(value);
                    }
                }
                "Used GPU Memory" => {
                    if let Some(p) = pending.as_mut() {
                        p.used_bytes = mib_value(value);
                    }
                }
                _ => {}
            }
            continue;
        }
        if key == "Processes" && value == "None" {
            r.process_list = true;
            continue;
        }
        let Some(g) = r.gpus.last_mut() else { continue };
        if section == Section::Fb && matches!(key, "Total" | "Used") {
            fb = true;
        }
        match (section, key) {
            (_, "Product Name") => g.name = name(value),
            (_, "GPU UUID") => g.uuid = name(value),
            (Section::Fb, "Total") => g.memory_total_bytes = mib_value(value),
            (Section::Fb, "Reserved") => g.memory_reserved_bytes = mib_value(value),
            (Section::Fb, "Used") => g.memory_used_bytes = mib_value(value),
            // Drivers up to 560 print `Gpu`, 570 and later `GPU`.
            (Section::Utilization, "Gpu" | "GPU") => g.utilization_pct = leading_u32(value),
            (Section::Temperature, "GPU Current Temp") => g.temperature_c = leading_u32(value),
            // The draw nvidia-smi's table shows: `Power Draw` before 535,
            // `Instantaneous Power Draw` since; the average only without either.
            (Section::Power, "Power Draw" | "Instantaneous Power Draw") => {
                g.power_w = leading_f64(value).or(g.power_w);
            }
            (Section::Power, "Average Power Draw") if g.power_w.is_none() => {
                g.power_w = leading_f64(value);
            }
            _ => {}
        }
    }
    finish(&mut cur, &mut pending, &mut out, attached, fb);
    out
}

fn flush_opt(cur: &mut Option<Reading>, pending: &mut Option<ProcessReading>) {
    if let Some(r) = cur.as_mut() {
        flush(r, pending);
    }
}

/// Puts the process being read on the current GPU (a repeated row once).
fn flush(r: &mut Reading, pending: &mut Option<ProcessReading>) {
    if let Some(p) = pending.take() {
        r.process_list = true;
        if let Some(last) = r.gpus.len().checked_sub(1) {
            r.push_once(last, p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::doc;
    use super::*;

    #[test]
    fn reads_fb_memory_reserved_and_processes() {
        let t = "\
==============NVSMI LOG==============

Timestamp                                 : Mon Jun 10 12:00:00 2024
Driver Version                            : 535.104.05
CUDA Version                              : 12.2

Attached GPUs                             : 2
GPU 00000000:01:00.0
    Product Name                          : NVIDIA GeForce RTX 4090
    GPU UUID                              : GPU-0200523e-f473-3a45-9b4a-fbbe0e41ccf8
    FB Memory Usage
        Total                             : 24564 MiB
        Reserved                          : 346 MiB
        Used                              : 18432 MiB
        Free                              : 5785 MiB
    BAR1 Memory Usage
        Total                             : 256 MiB
        Used                              : 3 MiB
        Free                              : 253 MiB
    Utilization
        Gpu                               : 85 %
        Memory                            : 40 %
    Processes
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 1234
            Type                          : C
            Name                          : python
            Used GPU Memory               : 17000 MiB
        Process ID                        : 99
            Type                          : C
            Name                          : /usr/bin/other
            Used GPU Memory               : 1000 MiB
GPU 00000000:02:00.0
    FB Memory Usage
        Total                             : 24564 MiB
        Used                              : 4 MiB
        Free                              : 24560 MiB
    Processes                             : None
";
        let r = read(&doc(t));
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(r.line, 8);
        assert_eq!(r.driver_version.as_deref(), Some("535.104.05"));
        assert_eq!(r.gpus.len(), 2);
        let g = &r.gpus[0];
        assert_eq!(g.name.as_deref(), Some("NVIDIA GeForce RTX 4090"));
        assert_eq!(g.memory_total_bytes, Some(24564 << 20));
        assert_eq!(g.memory_reserved_bytes, Some(346 << 20));
        assert_eq!(g.memory_used_bytes, Some(18432 << 20));
        assert_eq!(g.memory_free_bytes(), Some((24564 - 346 - 18432) << 20));
        assert_eq!(g.utilization_pct, Some(85));
        assert_eq!(g.processes.len(), 2);
        assert_eq!(g.processes[1].command.as_deref(), Some("/usr/bin/other"));
        assert_eq!(g.unattributed_bytes(), Some(432 << 20));
        assert_eq!(r.gpus[1].index, 1);
        assert!(r.gpus[1].processes.is_empty());
        assert!(r.process_list);
    }

    #[test]
    fn an_fb_section_far_below_its_gpu_line_reads_as_gpu_0() {
        let t = "    Fan Speed : 30 %\n    FB Memory Usage\n        Total : 24564 MiB\n        Reserved : 346 MiB\n        Used : 100 MiB\n        Free : 24117 MiB\n";
        let r = &read(&doc(t))[0];
        assert!(r.listed);
        assert_eq!(r.gpus[0].index, 0);
        assert_eq!(r.gpus[0].memory_used_bytes, Some(100 << 20));
    }

    #[test]
    fn a_report_without_fb_memory_is_no_reading() {
        let t = "GPU 00000000:01:00.0\n    Product Name : X\n    FB Memory Usage\n";
        assert!(read(&doc(t)).is_empty());
    }
}
