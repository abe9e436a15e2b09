//! What a reading shows, the fixes it points at, and how it joins an OOM.
//!
//! Thresholds, each stated where it is used:
//! - a GPU is *full* at ≥ 90 % of its total used (PyTorch's allocator then
//!   has little room to grow a segment; torchtune's memory display treats
//!   85–90 % as the healthy ceiling, pytorch/torchtune#1360);
//! - used memory no listed process accounts for is *notable* at ≥ 1 GiB or
//!   ≥ 10 % of the total: below that it is the driver's reserve and the
//!   contexts' own (a CUDA context is 300–700 MB, pytorch#20532);
//! - cached (reserved − allocated) and non-releasable memory are notable at
//!   ≥ 512 MiB or ≥ 20 % of reserved; any cudaMalloc retry or OOM counted is
//!   pressure (the allocator freed its whole cache and tried again).

use oomkit_core::remedies::Flavor;
use oomkit_core::remedies::RemedyId;
use oomkit_core::{Bytes, GpuReading, gpus};

use super::{Reading, Source};
use crate::assemble::Finding;
use crate::detail::{CountDetail, Detail, SizeDetail};
use crate::detect::Status;
use crate::diagnose::{Plan, build_fixes};
use crate::event::{GpuGuess, ProcessUse};

/// Share of total at which a GPU counts as full, in percent.
const FULL_PCT: u128 = 90;
const NOTABLE: Bytes = Bytes::gib(1);
const CACHE_NOTABLE: Bytes = Bytes::mib(512);

fn b(v: u64) -> Bytes {
    Bytes(v)
}

/// `part` is at least `pct` percent of `whole`.
fn at_least(part: u64, whole: u64, pct: u128) -> bool {
    whole > 0 && u128::from(part) * 100 >= u128::from(whole) * pct
}

fn percent(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    u64::try_from(u128::from(part) * 100 / u128::from(whole)).unwrap_or(u64::MAX)
}

fn gpu_label(r: &Reading, g: &GpuReading) -> String {
    match &g.name {
        Some(n) => format!("{} ({n})", r.gpu_ref(g)),
        None => r.gpu_ref(g),
    }
}

fn is_full(g: &GpuReading) -> bool {
    match (g.memory_used_bytes, g.memory_total_bytes) {
        (Some(u), Some(t)) => at_least(
            u.saturating_add(g.memory_reserved_bytes.unwrap_or(0)),
            t,
            FULL_PCT,
        ),
        _ => false,
    }
}

/// Fills a reading's findings and fixes.
pub fn interpret(r: &mut Reading) {
    if r.source.is_smi() {
        smi(r);
    } else {
        torch(r);
    }
}

fn smi(r: &mut Reading) {
    let mut findings = Vec::new();
    let mut plan: Plan = Vec::new();
    for g in &r.gpus {
        let label = gpu_label(r, g);
        let at = r.gpu_ref(g);
        if let (Some(u), Some(t)) = (g.memory_used_bytes, g.memory_total_bytes) {
            let free = g.memory_free_bytes().unwrap_or(0);
            let busy = g
                .utilization_pct
                .map_or(String::new(), |p| format!(", {p}% busy"));
            let reserve = g.memory_reserved_bytes.map_or(String::new(), |v| {
                format!(" (plus {} the driver reserves)", b(v))
            });
            findings.push(format!(
                "{label}: {} of {} used ({}%){reserve}, {} free{busy}{}",
                b(u),
                b(t),
                percent(u, t),
                b(free),
                if is_full(g) { " — nearly full" } else { "" }
            ));
        }
        let mut procs: Vec<_> = g.processes.iter().collect();
        procs.sort_by_key(|p| std::cmp::Reverse(p.used_bytes));
        let held: Vec<String> = procs
            .iter()
            .take(4)
            .map(|p| {
                let who = p.command.as_deref().unwrap_or("?");
                match p.used_bytes {
                    Some(v) => format!("{who} (PID {}) holds {}", p.pid, b(v)),
                    None => format!("{who} (PID {}) holds an unreported amount", p.pid),
                }
            })
            .collect();
        if !held.is_empty() {
            let more = procs.len().saturating_sub(4);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            findings.push(format!("on {at}: {}{more}", held.join(", ")));
        }
        let unattributed = if r.process_list {
            g.unattributed_bytes()
        } else {
            None
        };
        let total = g.memory_total_bytes.unwrap_or(0);
        if let Some(u) = unattributed {
            let notable = u >= NOTABLE.get() || at_least(u, total, 10);
            if notable && g.processes.is_empty() {
                findings.push(format!(
                    "no process is listed on {at} yet {} is in use: its processes are in another container or PID namespace (nvidia-smi inside a container lists none), or exited while the driver still held their memory (check `lsof /dev/nvidia*`)",
                    b(u)
                ));
            } else if notable {
                findings.push(format!(
                    "{} used on {at} belongs to no listed process: processes in other containers or PID namespaces, a process that exited while its memory was still held, or graphics contexts",
                    b(u)
                ));
            } else if u > 0 {
                findings.push(format!(
                    "the {} of {at} not in the process list is the driver's and the contexts' own (normal)",
                    b(u)
                ));
            }
        }
        if is_full(g) {
            let others = procs.len() > 1
                || unattributed.is_some_and(|u| u >= NOTABLE.get() || at_least(u, total, 10));
            if others {
                let who: Vec<String> = procs
                    .iter()
                    .filter_map(|p| p.used_bytes.map(|v| format!("{} ({})", p.pid, b(v))))
                    .collect();
                let why = if who.is_empty() {
                    format!("{at} is nearly full with memory no listed process accounts for")
                } else {
                    format!("{at} is nearly full and shared: PID {}", who.join(", "))
                };
                plan.push((RemedyId::FreeOtherProcesses, Some(why), None));
            }
        }
    }
    let unknown: Vec<String> = r
        .gpus
        .iter()
        .filter(|g| g.memory_used_bytes.is_none() || g.memory_total_bytes.is_none())
        .map(|g| gpu_label(r, g))
        .collect();
    if !unknown.is_empty() {
        findings.push(format!(
            "{}: memory not reported (`Not Supported`/`N/A`): a unified-memory GPU (GB10, Jetson) has no memory of its own and uses the host's RAM, which `free -h` shows; nvidia-smi cannot say how full it is",
            unknown.join(", ")
        ));
    }
    if r.listed {
        findings.push(
            "this output prints no GPU index (no `index` column, `-i` with several GPUs, or part of a `-q` report), so its GPUs are numbered as listed, not by index; add `index` to `--query-gpu` to see which GPU is which".to_string(),
        );
    }
    if r.duplicate_rows > 0 {
        findings.push(format!(
            "{} process row{} repeated (the same PID on the same GPU, as WSL and a process in both the compute and the graphics list print it) counted once",
            r.duplicate_rows,
            if r.duplicate_rows == 1 { "" } else { "s" }
        ));
    }
    if r.samples > 1 {
        findings.push(format!(
            "{} samples (`nvidia-smi -l`): the last one is shown",
            r.samples
        ));
    }
    let full: Vec<&GpuReading> = r.gpus.iter().filter(|g| is_full(g)).collect();
    let roomy = r.gpus.iter().find(|g| {
        g.memory_used_bytes
            .zip(g.memory_total_bytes)
            .is_some_and(|(u, t)| !at_least(u, t, 50))
    });
    if let (Some(f), Some(free)) = (full.first(), roomy) {
        let run_there = if r.listed {
            "run there (its index is not in this output: `nvidia-smi --query-gpu=index,name,memory.used --format=csv` shows it)".to_string()
        } else {
            format!("run there (CUDA_VISIBLE_DEVICES={})", free.index)
        };
        findings.push(format!(
            "{} is nearly full while {} has {} free: {run_there} or spread the model across both",
            r.gpu_ref(f),
            r.gpu_ref(free),
            b(free.memory_free_bytes().unwrap_or(0)),
        ));
        plan.push((
            RemedyId::ModelParallel,
            Some(format!(
                "{} has room the full {} lacks",
                r.gpu_ref(free),
                r.gpu_ref(f)
            )),
            None,
        ));
    }
    for m in &r.mig {
        findings.push(format!(
            "MIG device {} (GPU {}, GI {}, CI {}): {} of {} used ({}%)",
            m.mig,
            m.gpu,
            m.gi,
            m.ci,
            b(m.memory_used_bytes),
            b(m.memory_total_bytes),
            percent(m.memory_used_bytes, m.memory_total_bytes)
        ));
    }
    for u in &r.unplaced {
        let on = u.gpu.as_deref().unwrap_or("an unnamed GPU");
        findings.push(format!(
            "{} (PID {}) holds {} on {on}",
            u.process.command.as_deref().unwrap_or("?"),
            u.process.pid,
            u.process
                .used_bytes
                .map_or("an unreported amount".to_string(), |v| b(v).to_string())
        ));
    }
    if full.is_empty() && !r.gpus.is_empty() && unknown.is_empty() {
        findings.push(
            "no GPU here is near full: if an OOM happened, the memory peaked between readings or was freed when the process died; watch the run (`oomkit monitor`, `nvidia-smi -l 1`)".to_string(),
        );
    } else if !full.is_empty() {
        for id in [
            RemedyId::ReduceBatch,
            RemedyId::MixedPrecision,
            RemedyId::GradientCheckpointing,
        ] {
            plan.push((id, None, None));
        }
    }
    r.findings = findings;
    r.fixes = build_fixes(
        plan,
        &[Flavor::Shell, Flavor::Pytorch],
        &oomkit_core::remedies::Situation::default(),
    );
}

fn torch(r: &mut Reading) {
    let t = &r.torch;
    let mut findings = Vec::new();
    let mut plan: Plan = Vec::new();
    let on = t
        .device
        .map_or(String::new(), |d| format!(" on device {d}"));
    if let (Some(a), Some(res)) = (t.allocated_bytes, t.reserved_bytes) {
        findings.push(format!(
            "PyTorch holds {} in tensors and {} reserved from the driver{on}",
            b(a),
            b(res)
        ));
    } else if let Some(a) = t.allocated_bytes {
        findings.push(format!("PyTorch holds {} in tensors{on}", b(a)));
    }
    let reserved = t.reserved_bytes.unwrap_or(0);
    let notable = |v: u64| v >= CACHE_NOTABLE.get() || at_least(v, reserved, 20);
    let cached = t
        .reserved_bytes
        .zip(t.allocated_bytes)
        .map(|(r, a)| r.saturating_sub(a));
    if let Some(c) = cached.filter(|&c| c > 0 && notable(c)) {
        findings.push(format!(
            "{} is reserved but not allocated ({}% of reserved): the caching allocator keeps freed blocks for reuse, and nvidia-smi counts them as used; `torch.cuda.empty_cache()` gives back the unfragmented part",
            b(c),
            percent(c, reserved)
        ));
    }
    let non_releasable = t.non_releasable_bytes.filter(|&v| v > 0 && notable(v));
    if let Some(n) = non_releasable {
        findings.push(format!(
            "{} is non-releasable: free pieces of blocks partly in use, which cannot be returned to the driver nor serve a larger request — fragmentation",
            b(n)
        ));
    }
    let peak_gap = t
        .allocated_peak_bytes
        .zip(t.allocated_bytes)
        .filter(|&(p, a)| p.saturating_sub(a) >= CACHE_NOTABLE.get() && at_least(p, a, 150));
    if let Some((p, a)) = peak_gap {
        findings.push(format!(
            "allocated memory peaked at {} against {} now: the peak of a step (activations kept for backward, a large intermediate) is what has to fit",
            b(p),
            b(a)
        ));
    } else if let Some(p) = t.allocated_peak_bytes {
        findings.push(format!("allocated memory peaked at {}", b(p)));
    }
    let ooms = t.oom_count.unwrap_or(0);
    let retries = t.alloc_retries.unwrap_or(0);
    if ooms > 0 {
        findings.push(format!(
            "the allocator has raised {ooms} out-of-memory error{} in this process",
            if ooms == 1 { "" } else { "s" }
        ));
    }
    if retries > 0 {
        findings.push(format!(
            "{retries} cudaMalloc retr{}: cudaMalloc failed and the allocator freed its cache and tried again — memory is at its limit, and each retry synchronises the GPU and slows the step",
            if retries == 1 { "y" } else { "ies" }
        ));
    }
    let pressure = ooms > 0 || retries > 0;
    if let Some(n) = non_releasable {
        plan.push((
            RemedyId::ExpandableSegments,
            Some(format!(
                "{} is stuck in split blocks; growing segments instead of splitting them lets the allocator reuse it",
                b(n)
            )),
            Some(b(n)),
        ));
        plan.push((RemedyId::MaxSplitSize, None, None));
    }
    if pressure {
        if peak_gap.is_some() {
            plan.push((
                RemedyId::GradientCheckpointing,
                Some(
                    "the peak, not the steady state, runs out: recomputing activations lowers it"
                        .to_string(),
                ),
                None,
            ));
        }
        for id in [
            RemedyId::ReduceBatch,
            RemedyId::MixedPrecision,
            RemedyId::GradientCheckpointing,
        ] {
            plan.push((id, None, None));
        }
        plan.push((RemedyId::RecordMemoryHistory, None, None));
    } else if let Some(c) = cached.filter(|&c| c > 0 && notable(c)) {
        plan.push((
            RemedyId::EmptyCacheBetweenPhases,
            Some(format!(
                "{} is cached: give it back when another phase or process needs the GPU",
                b(c)
            )),
            Some(b(c)),
        ));
    }
    if findings.is_empty() {
        findings.push("the counters show no memory pressure".to_string());
    }
    r.findings = findings;
    r.fixes = build_fixes(
        plan,
        &[Flavor::Pytorch, Flavor::Shell],
        &oomkit_core::remedies::Situation::default(),
    );
}

/// The GPU of a reading that device `device` means: the one with that
/// index, or, when the device is not named, the reading's only GPU. A
/// reading without printed indices names no device.
fn gpu_for(device: Option<u32>, r: &Reading) -> Option<&GpuReading> {
    match (device, r.gpus.as_slice()) {
        (Some(d), gs) if !r.listed => gs.iter().find(|g| g.index == d),
        (None, [g]) => Some(g),
        _ => None,
    }
}

/// Relates PyTorch counters to an nvidia-smi reading of the same GPU in the
/// same input: the process holding at least what PyTorch reserved (the
/// smallest such) is this one, and what it holds beyond that is outside the
/// allocator (CUDA context, cuBLAS/cuDNN workspaces, NCCL, other libraries).
pub fn relate(readings: &mut [Reading]) {
    let mut notes: Vec<(usize, String)> = Vec::new();
    for (i, t) in readings.iter().enumerate() {
        if t.source.is_smi() {
            continue;
        }
        let Some(res) = t.torch.reserved_bytes.filter(|&r| r > 0) else {
            continue;
        };
        let device = t.torch.device;
        let found = readings
            .iter()
            .filter(|r| r.source.is_smi())
            .filter_map(|r| {
                let g = gpu_for(device, r)?;
                let own = g
                    .processes
                    .iter()
                    .filter_map(|p| Some((p, p.used_bytes?)))
                    .filter(|(_, used)| *used >= res)
                    .min_by_key(|(_, used)| *used)?;
                Some((r.line, r.gpu_ref(g), own))
            })
            .min_by_key(|(line, _, _)| line.abs_diff(t.line));
        if let Some((line, gpu, (p, used))) = found {
            notes.push((
                i,
                format!(
                    "nvidia-smi (line {line}) shows PID {} holding {} on {gpu}, {} more than PyTorch reserved: the CUDA context, cuBLAS/cuDNN workspaces, NCCL and other libraries outside the allocator",
                    p.pid,
                    b(used),
                    b(used.saturating_sub(res))
                ),
            ));
        }
    }
    for (i, n) in notes {
        if let Some(r) = readings.get_mut(i) {
            r.findings.push(n);
        }
    }
}

/// Joins readings to an OOM of the same input: the processes an
/// nvidia-smi reading lists on the OOM's GPU (when the message lists none
/// and its own process can be told apart), the GPU's name, and the counters
/// of a PyTorch reading of the same device, as details. The nearest
/// matching reading of each kind is used; its line goes in `reading_lines`.
pub fn combine(f: &mut Finding, readings: &[Reading]) {
    if f.sig.status != Status::Oom {
        return;
    }
    let device = f.sig.fields.device;
    let line = f.line;
    let near = |r: &&Reading| r.line.abs_diff(line);
    let gpu_of = |r: &Reading| gpu_for(device, r).cloned();
    let smi = readings
        .iter()
        .filter(|r| r.source.is_smi() && gpu_of(r).is_some())
        .min_by_key(near);
    if let Some(r) = smi
        && let Some(g) = gpu_of(r)
    {
        f.reading_lines.push(r.line);
        if f.gpu.is_none()
            && let Some(c) = g.name.as_deref().and_then(gpus::find_in_text)
        {
            f.gpu = Some(GpuGuess {
                id: c.id,
                name: c.short_name,
                from: "log",
            });
        }
        if let (Some(u), Some(t)) = (g.memory_used_bytes, g.memory_total_bytes) {
            f.sig.fields.details.push(Detail::NvidiaSmi(format!(
                "{}: {} of {} used (line {})",
                r.gpu_ref(&g),
                b(u),
                b(t),
                r.line
            )));
        }
        let x = &mut f.sig.fields;
        let listed: Vec<(u32, u64)> = g
            .processes
            .iter()
            .filter_map(|p| Some((p.pid, p.used_bytes?)))
            .collect();
        // Our process is the smallest holding at least what the allocator
        // reserved (or allocated); without either it cannot be told apart.
        let floor = x.reserved.or(x.allocated);
        let own = floor.and_then(|fl| {
            listed
                .iter()
                .filter(|(_, used)| *used >= fl.get())
                .min_by_key(|(_, used)| *used)
                .map(|(pid, _)| *pid)
        });
        if x.processes.is_empty()
            && let Some(own) = own
        {
            x.processes = listed
                .iter()
                .map(|&(pid, used)| ProcessUse {
                    pid: Some(u64::from(pid)),
                    used_bytes: b(used),
                    is_self: pid == own,
                })
                .collect();
        } else if !listed.is_empty() && x.processes.is_empty() {
            let sum = listed.iter().fold(0u64, |s, (_, u)| s.saturating_add(*u));
            x.details.push(Detail::NvidiaSmiProcesses(format!(
                "{} processes hold {}",
                listed.len(),
                b(sum)
            )));
        }
        if r.process_list
            && let Some(u) = g.unattributed_bytes().filter(|&u| u >= NOTABLE.get())
        {
            x.details.push(Detail::NvidiaSmiUnattributed(format!(
                "{} used by no listed process",
                b(u)
            )));
        }
    }
    let torch = readings
        .iter()
        .filter(|r| {
            matches!(r.source, Source::TorchSummary | Source::TorchStats)
                && (r.torch.device.is_none() || device.is_none() || r.torch.device == device)
        })
        .min_by_key(near);
    if let Some(r) = torch {
        f.reading_lines.push(r.line);
        let t = &r.torch;
        let x = &mut f.sig.fields;
        let sizes: [(SizeDetail, Option<u64>); 5] = [
            (Detail::PytorchAllocated, t.allocated_bytes),
            (Detail::PytorchReserved, t.reserved_bytes),
            (Detail::PytorchPeakAllocated, t.allocated_peak_bytes),
            (Detail::PytorchPeakReserved, t.reserved_peak_bytes),
            (Detail::NonReleasable, t.non_releasable_bytes),
        ];
        let counts: [(CountDetail, Option<u64>); 2] = [
            (Detail::CudaOoms, t.oom_count),
            (Detail::CudamallocRetries, t.alloc_retries),
        ];
        for (detail, v) in sizes {
            if let Some(v) = v {
                x.details.push(detail(b(v)));
            }
        }
        for (detail, v) in counts {
            if let Some(v) = v {
                x.details.push(detail(v));
            }
        }
    }
    f.reading_lines.sort_unstable();
    f.reading_lines.dedup();
}

#[cfg(test)]
mod tests {
    use oomkit_core::remedies::RemedyId;

    use crate::{Cause, Detail, Explainer, Report};

    fn explain(text: &str) -> Report {
        Explainer::new().explain_str(text)
    }

    fn fix_ids(f: &[crate::Fix]) -> Vec<RemedyId> {
        f.iter().map(|f| f.id).collect()
    }

    const TABLE: &str = "\
| NVIDIA-SMI 535.104.05 Driver Version: 535.104.05 CUDA Version: 12.2 |
| 0 NVIDIA RTX 4090 On | 00000000:01:00.0 Off | Off |
| 30% 45C P2 75W / 450W | 24064MiB / 24564MiB | 85% Default |
| 1 NVIDIA RTX 4090 On | 00000000:02:00.0 Off | Off |
| 30% 45C P8 15W / 450W | 4MiB / 24564MiB | 0% Default |
| Processes: |
| 0 N/A N/A 4242 C python 10102MiB |
| 0 N/A N/A 5151 C python 13562MiB |
";

    #[test]
    fn a_full_shared_gpu_ranks_freeing_the_others_first() {
        let r = explain(TABLE);
        let reading = &r.readings[0];
        let ids = fix_ids(&reading.fixes);
        assert_eq!(ids[0], RemedyId::FreeOtherProcesses, "{ids:?}");
        assert!(ids.contains(&RemedyId::ModelParallel), "{ids:?}");
        assert!(reading.findings.iter().any(|f| f.contains("nearly full")));
        assert!(reading.findings.iter().any(|f| f.contains("GPU 1 has")));
    }

    #[test]
    fn memory_no_process_accounts_for_is_named() {
        let t = "\
| NVIDIA-SMI 535.104.05 Driver Version: 535.104.05 CUDA Version: 12.2 |
| 0 NVIDIA RTX 4090 On | 00000000:01:00.0 Off | Off |
| 30% 45C P2 75W / 450W | 20000MiB / 24564MiB | 85% Default |
| Processes: |
| No running processes found |
";
        let r = explain(t);
        assert!(
            r.readings[0]
                .findings
                .iter()
                .any(|f| f.contains("another container")),
            "{:?}",
            r.readings[0].findings
        );
    }

    #[test]
    fn retries_are_pressure_and_quiet_counters_get_no_ladder() {
        let busy = "{'allocated_bytes.all.current': 1073741824, 'reserved_bytes.all.current': 2147483648, 'num_alloc_retries': 3, 'num_ooms': 0}";
        let r = explain(busy);
        assert!(fix_ids(&r.readings[0].fixes).contains(&RemedyId::ReduceBatch));
        let quiet = "{'allocated_bytes.all.current': 1073741824, 'reserved_bytes.all.current': 1107296256, 'num_alloc_retries': 0, 'num_ooms': 0}";
        let r = explain(quiet);
        assert!(r.readings[0].fixes.is_empty(), "{:?}", r.readings[0].fixes);
    }

    #[test]
    fn an_oom_takes_the_processes_of_its_gpu_and_tells_its_own() {
        let oom = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; 9.10 GiB already allocated; 18.06 MiB free; 9.30 GiB reserved in total by PyTorch)\n";
        let r = explain(&format!("{oom}{TABLE}"));
        let e = &r.events[0];
        assert_eq!(e.cause, Cause::OtherProcesses);
        assert_eq!(e.reading_lines, vec![2]);
        let own: Vec<_> = e.processes.iter().filter(|p| p.is_self).collect();
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].pid, Some(4242));
    }

    #[test]
    fn without_reserved_the_own_process_is_unknown_and_only_details_join() {
        let oom = "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[128,128,109,109] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n";
        let r = explain(&format!("{oom}{TABLE}"));
        let e = &r.events[0];
        assert!(e.processes.is_empty());
        assert!(
            e.details
                .iter()
                .any(|d| matches!(d, Detail::NvidiaSmiProcesses(_)))
        );
        assert_ne!(e.cause, Cause::OtherProcesses);
    }
}
