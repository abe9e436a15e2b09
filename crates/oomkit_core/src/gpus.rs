//! The GPU catalogue: the one table of GPUs and their memory.
//!
//! Each entry carries the memory *as the driver reports it*, not the marketed
//! figure: `driver_total` is nvidia-smi's `Total` (rocm-smi's VRAM total for
//! AMD), and `visible` is what CUDA/HIP lets a process see
//! (`cudaDeviceProp.totalGlobalMem`, `torch.cuda.get_device_properties().total_memory`,
//! the `total capacity` of a PyTorch OOM message), which is `Total − Reserved`
//! on drivers ≥ R510. Values and their sources are in
//! `shared/reference/gpus.md`; each row cites its source in `source`.

use crate::bytes::Bytes;

/// Who makes the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Vendor {
    Nvidia,
    Amd,
    Apple,
    Intel,
}

/// One GPU model.
#[derive(Debug, serde::Serialize)]
pub struct Gpu {
    /// Stable identifier used on the command line, e.g. `rtx-4090`.
    pub id: &'static str,
    /// The name as the driver prints it, e.g. `NVIDIA GeForce RTX 4090`.
    pub name: &'static str,
    /// A short display name, e.g. `RTX 4090`.
    pub short_name: &'static str,
    /// Maker.
    pub vendor: Vendor,
    /// Architecture, e.g. `Ada Lovelace`.
    pub arch: &'static str,
    /// The marketed capacity, e.g. `24 GB`.
    pub marketed: &'static str,
    /// nvidia-smi `Total` (current drivers), or rocm-smi's VRAM total; for
    /// unified-memory devices, the memory the GPU can address.
    pub driver_total: Bytes,
    /// What CUDA/HIP/MPS lets one process see, when a real capture gives it.
    pub visible: Option<Bytes>,
    /// Memory shared with the CPU (Apple, Jetson, APUs).
    pub unified: bool,
    /// Native bf16 math.
    pub bf16: bool,
    /// Peak memory bandwidth from the spec sheet, GB/s.
    pub bandwidth_gbs: u32,
    /// Other names users type (`4090`, `a100-40gb`); matching is forgiving anyway.
    pub aliases: &'static [&'static str],
    /// Where the numbers come from.
    pub source: &'static str,
}

impl Gpu {
    /// Memory a process can plan with: the CUDA-visible total when known,
    /// else the driver total minus the typical driver reservation (§2.3 of
    /// `gpus.md`: 454 MiB on an H100, 300–500 MiB on GeForce cards; we take
    /// 1/64 of the total, at least 256 MiB).
    pub fn usable(&self) -> Bytes {
        self.visible.unwrap_or_else(|| {
            let reserve = Bytes((self.driver_total.0 / 64).max(Bytes::mib(256).0));
            self.driver_total.saturating_sub(reserve)
        })
    }
}

/// Every GPU oomkit knows. Names and ids are unique (checked by a test).
pub static GPUS: &[Gpu] = &[
    Gpu {
        id: "rtx-4090",
        name: "NVIDIA GeForce RTX 4090",
        short_name: "RTX 4090",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "24 GB",
        driver_total: Bytes::mib(24564),
        visible: Some(Bytes::mib(24210)),
        unified: false,
        bf16: true,
        bandwidth_gbs: 1008,
        aliases: &["4090", "geforce-rtx-4090"],
        source: "RLinf/RLinf#255; netdata rtx-4090-driver-535.xml; thamada/nvidia-smi RTX4090",
    },
    Gpu {
        id: "h100-sxm",
        name: "NVIDIA H100 80GB HBM3",
        short_name: "H100 SXM",
        vendor: Vendor::Nvidia,
        arch: "Hopper",
        marketed: "80 GB",
        driver_total: Bytes::mib(81559),
        visible: Some(Bytes::mib(81106)),
        unified: false,
        bf16: true,
        bandwidth_gbs: 3350,
        aliases: &["h100", "h100-80gb", "h100-sxm5"],
        source: "modal-labs/modal-client#2797; NVIDIA/nccl#1264; thamada/nvidia-smi H100SXMx8",
    },
];

/// Why a GPU name did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown GPU {input:?}{}", suggestion_text(.suggestions))]
pub struct UnknownGpu {
    /// What the user typed.
    pub input: String,
    /// Close catalogue ids.
    pub suggestions: Vec<&'static str>,
}

fn suggestion_text(s: &[&'static str]) -> String {
    if s.is_empty() {
        " (see `oomkit estimate --list-gpus`)".to_string()
    } else {
        format!(" (did you mean {}?)", s.join(", "))
    }
}

/// Reduces a name to lowercase alphanumerics, dropping vendor words, so that
/// `NVIDIA GeForce RTX 4090`, `rtx-4090`, `RTX4090` and `4090` compare equal.
pub fn normalize_name(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let mut out = String::with_capacity(lower.len());
    for word in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
        if matches!(word, "nvidia" | "geforce" | "tesla" | "amd" | "radeon" | "instinct" | "apple" | "") {
            continue;
        }
        out.push_str(word);
    }
    out
}

/// Finds a GPU by id, name, short name or alias, forgivingly.
pub fn find(name: &str) -> Result<&'static Gpu, UnknownGpu> {
    let want = normalize_name(name);
    if !want.is_empty() {
        for gpu in GPUS {
            let mut keys = [gpu.id, gpu.name, gpu.short_name].into_iter().chain(gpu.aliases.iter().copied());
            if keys.any(|k| normalize_name(k) == want) {
                return Ok(gpu);
            }
        }
    }
    let mut suggestions: Vec<&'static str> = GPUS
        .iter()
        .filter(|g| {
            !want.is_empty()
                && (normalize_name(g.id).contains(&want) || want.contains(&normalize_name(g.short_name)))
        })
        .map(|g| g.id)
        .collect();
    suggestions.truncate(6);
    Err(UnknownGpu {
        input: name.to_string(),
        suggestions,
    })
}

/// Finds the GPU whose driver-reported name appears in a log line (nvidia-smi
/// tables, TF's `Created TensorFlow device … name: NVIDIA Tegra X1`).
/// Returns the longest match so `RTX 4090 D` is not taken for `RTX 4090`.
pub fn find_in_text(text: &str) -> Option<&'static Gpu> {
    let hay = normalize_name(text);
    GPUS.iter()
        .filter(|g| {
            let n = normalize_name(g.name);
            n.len() >= 4 && hay.contains(&n)
        })
        .max_by_key(|g| normalize_name(g.name).len())
}

/// GPUs whose CUDA-visible total matches `total` to within 0.01 GiB (the
/// precision of PyTorch's `format_size`). Used to name the card behind a
/// `total capacity of 23.65 GiB` message; ambiguous totals give several.
pub fn by_visible_total(total: Bytes) -> Vec<&'static Gpu> {
    let tol = Bytes::mib(11).0; // 0.01 GiB ≈ 10.24 MiB, plus rounding
    GPUS.iter()
        .filter(|g| g.visible.is_some_and(|v| v.0.abs_diff(total.0) <= tol))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_names_and_aliases_are_unique() {
        let mut seen = HashSet::new();
        for g in GPUS {
            let mut keys: Vec<String> = vec![normalize_name(g.id), normalize_name(g.name), normalize_name(g.short_name)];
            keys.extend(g.aliases.iter().map(|a| normalize_name(a)));
            keys.sort();
            keys.dedup();
            for k in keys {
                assert!(seen.insert(k.clone()), "{k} names two GPUs");
            }
        }
    }

    #[test]
    fn every_entry_is_sane() {
        for g in GPUS {
            assert!(g.driver_total >= Bytes::gib(2), "{}", g.id);
            if let Some(v) = g.visible {
                assert!(v <= g.driver_total, "{} visible exceeds total", g.id);
                assert!(v.0 * 10 >= g.driver_total.0 * 9, "{} visible too small", g.id);
            }
            assert!(g.usable() <= g.driver_total);
            assert!(!g.source.is_empty());
        }
    }

    #[test]
    fn forgiving_names_resolve() {
        for n in ["4090", "rtx-4090", "RTX 4090", "NVIDIA GeForce RTX 4090", "rtx4090"] {
            assert_eq!(find(n).unwrap().id, "rtx-4090", "{n}");
        }
        assert_eq!(find("h100").unwrap().id, "h100-sxm");
    }

    #[test]
    fn unknown_names_say_so() {
        let e = find("voodoo5").unwrap_err();
        assert!(e.to_string().contains("voodoo5"));
    }

    #[test]
    fn h100_reports_driver_memory_not_marketing() {
        assert_eq!(find("h100").unwrap().driver_total.display_mib(), "81559MiB");
    }

    #[test]
    fn visible_total_names_the_card() {
        let g = by_visible_total("23.64 GiB".parse().unwrap());
        assert!(g.iter().any(|g| g.id == "rtx-4090"));
    }
}
