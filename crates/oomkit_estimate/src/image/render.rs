//! Human output for image pipelines: the header with parameters per
//! component, the breakdown with bars, the peaks, the verdict and the plan.

use std::fmt::Write;

use oomkit_core::Bytes;

use super::{CpuOffload, ImageEstimate, ImageSetup, Model};
use crate::components;
use crate::fit::Fit;
use crate::model::human_count;
use crate::setup::Quant;

/// Human output.
pub fn human(m: &Model, s: &ImageSetup, e: &ImageEstimate, f: Option<&Fit>) -> String {
    let mut o = String::new();
    let est = &e.estimate;
    let _ = writeln!(
        o,
        "{} ({} params) · text-to-image · {}{} · {}×{} × {} image{}{}",
        m.id,
        human_count(est.params),
        components::precision_name(s.precision),
        match s.quant {
            Quant::None => String::new(),
            q => format!(" · {} {}", Quant::name(q), m.quant_targets().join("+")),
        },
        s.width,
        s.height,
        s.images,
        if s.images == 1 { "" } else { "s" },
        match s.cpu_offload {
            CpuOffload::None => "",
            CpuOffload::Model => " · model CPU offload",
            CpuOffload::Sequential => " · sequential CPU offload",
        }
    );
    let _ = writeln!(
        o,
        "  {}",
        e.params
            .iter()
            .map(|r| format!("{} {}", r.name, human_count(r.params)))
            .collect::<Vec<_>>()
            .join(" · ")
    );
    o.push('\n');
    let c = &est.components;
    let mut rows: Vec<(String, u64)> = e
        .weights
        .iter()
        .map(|p| (format!("{} weights", p.name), p.bytes))
        .collect();
    rows.push((e.activations.clone(), c.activations_bytes.get()));
    if c.temporaries_bytes > Bytes::ZERO {
        rows.push(("dequantized linear".into(), c.temporaries_bytes.get()));
    }
    rows.push(("cuda context".into(), c.cuda_context_bytes.get()));
    crate::render::bars(&mut o, &rows, est.device_used_bytes.get());
    let _ = writeln!(o);
    crate::render::peaks(&mut o, est);
    if let Some(f) = f {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{} {}: {} of {} usable ({} {}); max images {}, max size {}×{}",
            if f.fits { "fits on" } else { "does not fit on" },
            f.gpu,
            est.device_used_bytes,
            f.usable_bytes,
            Bytes(f.headroom_bytes.unsigned_abs()),
            if f.fits { "headroom" } else { "short" },
            f.max_batch,
            f.max_seq,
            f.max_seq
        );
        crate::render::plan(&mut o, &f.plan, f.plan_fits);
    }
    o
}
