//! The GPU catalogue: the one table of GPUs and their memory.
//!
//! Each entry carries the memory *as the driver reports it*, not the marketed
//! figure: `driver_total` is nvidia-smi's `Total` (rocm-smi's VRAM total for
//! AMD), and `visible` is what CUDA/HIP lets a process see
//! (`cudaDeviceProp.totalGlobalMem`, `torch.cuda.get_device_properties().total_memory`,
//! the `total capacity` of a PyTorch OOM message), which is `Total − Reserved`
//! on drivers ≥ R510. Values and their sources are in
//! `docs/reference/gpus.md`; each row cites its source in `source`.

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
    /// Other CUDA/HIP-visible totals seen in real captures of this card
    /// (older drivers, Colab, another HIP path) that differ from `visible` by
    /// more than PyTorch's 0.01 GiB print precision. Only
    /// [`by_visible_total`] uses them; [`Gpu::usable`] plans with `visible`.
    pub other_visible: &'static [Bytes],
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
    /// The CUDA compute capability (major, minor) of an NVIDIA GPU, from its
    /// architecture and, where one architecture spans several chips, its id
    /// (NVIDIA's table, <https://developer.nvidia.com/cuda-gpus>: Hopper 9.0;
    /// Blackwell 10.0 for B200/GB200, 12.0 for GeForce RTX 50; Ada 8.9;
    /// Ampere 8.0 for A100/A30, 8.7 for Jetson Orin, 8.6 otherwise; Turing
    /// 7.5; Volta 7.0, Jetson Xavier 7.2; Pascal P100 6.0; Kepler K80 3.7).
    /// `None` for other vendors. vLLM's FP8 kernels need 8.9 or newer.
    pub fn compute_capability(&self) -> Option<(u8, u8)> {
        if self.vendor != Vendor::Nvidia {
            return None;
        }
        let id = self.id;
        Some(match self.arch {
            "Hopper" => (9, 0),
            "Blackwell" if id.starts_with("rtx-") => (12, 0),
            "Blackwell" => (10, 0),
            "Ada Lovelace" => (8, 9),
            "Ampere" if id.starts_with("a100") || id == "a30" => (8, 0),
            "Ampere" if id.starts_with("jetson") => (8, 7),
            "Ampere" => (8, 6),
            "Turing" => (7, 5),
            "Volta" if id.starts_with("jetson") => (7, 2),
            "Volta" => (7, 0),
            "Pascal" => (6, 0),
            "Kepler" => (3, 7),
            _ => return None,
        })
    }

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

/// PyTorch's MPS cap: allocations may reach `PYTORCH_MPS_HIGH_WATERMARK_RATIO`
/// (default 1.7) × Metal's `recommendedMaxWorkingSetSize` (gpus.md §1.5).
/// Used where gpus.md gives the working set but no "max allowed" capture.
const fn mps_max_allowed(working_set: Bytes) -> Bytes {
    Bytes(working_set.0 / 10 * 17)
}

/// The inverse of [`mps_max_allowed`]: the working set behind a captured
/// "max allowed" figure (gpus.md lists these as "implied").
const fn mps_working_set(max_allowed: Bytes) -> Bytes {
    Bytes(max_allowed.0 / 17 * 10)
}

/// Every GPU oomkit knows. Names and ids are unique (checked by a test).
///
/// Conventions (all numbers from `docs/reference/gpus.md`):
/// - `driver_total` is nvidia-smi's `Total` on drivers ≥ R510 (MiB), with ECC
///   on for data-centre GDDR boards, or rocm-smi's VRAM byte count for AMD.
/// - `visible` is a `deviceQuery` figure where gpus.md has one; where it has
///   only a PyTorch OOM `total capacity` in GiB, it is `round(GiB × 1024)` MiB
///   and the `source` says so. No figure in gpus.md → `None`.
/// - Where two variants print the same driver name (RTX 3080 10/12 GB,
///   RTX 4060 Ti 8/16 GB), the bare name and number go to the original,
///   smaller variant, and the other's `name` carries its size in brackets.
pub static GPUS: &[Gpu] = &[
    // ── GeForce / TITAN (§1.1) ─────────────────────────────────────────
    Gpu {
        id: "rtx-2060",
        name: "NVIDIA GeForce RTX 2060",
        short_name: "RTX 2060",
        vendor: Vendor::Nvidia,
        arch: "Turing",
        marketed: "6 GB",
        driver_total: Bytes::mib(6144),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 336,
        aliases: &["2060"],
        source: "gpus.md: CI (new-format nvidia-smi rows, 5 hits)",
    },
    Gpu {
        id: "rtx-2070",
        name: "NVIDIA GeForce RTX 2070",
        short_name: "RTX 2070",
        vendor: Vendor::Nvidia,
        arch: "Turing",
        marketed: "8 GB",
        driver_total: Bytes::mib(8192),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 448,
        aliases: &["2070"],
        source: "gpus.md: TG dual_2070-v13 (8192 MiB, reserved 406, driver 590.44); CI",
    },
    Gpu {
        id: "rtx-2080",
        name: "NVIDIA GeForce RTX 2080",
        short_name: "RTX 2080",
        vendor: Vendor::Nvidia,
        arch: "Turing",
        marketed: "8 GB",
        driver_total: Bytes::mib(8192),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 448,
        aliases: &["2080"],
        source: "gpus.md: TG dual_2080-v13 (8192 MiB, reserved 406, driver 590.44); ND rtx-2080-win",
    },
    Gpu {
        id: "rtx-2080-ti",
        name: "NVIDIA GeForce RTX 2080 Ti",
        short_name: "RTX 2080 Ti",
        vendor: Vendor::Nvidia,
        arch: "Turing",
        marketed: "11 GB",
        driver_total: Bytes::mib(11264),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 616,
        aliases: &["2080ti"],
        source: "gpus.md: CI (11264 new drivers; 11019 pre-R510); 22.00 GiB in memoavatar/memo#33 is a modded 22 GB card, not used",
    },
    Gpu {
        id: "rtx-3060",
        name: "NVIDIA GeForce RTX 3060",
        short_name: "RTX 3060",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "12 GB",
        driver_total: Bytes::mib(12288),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 360,
        aliases: &["3060"],
        source: "gpus.md: geerlingguy/raspberry-pi-pcie-devices#790; TG rtx-3060-v12 (reserved 368)",
    },
    Gpu {
        id: "rtx-3060-ti",
        name: "NVIDIA GeForce RTX 3060 Ti",
        short_name: "RTX 3060 Ti",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "8 GB",
        driver_total: Bytes::mib(8192),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 448,
        aliases: &["3060ti"],
        source: "gpus.md: CI (new-format nvidia-smi rows, 5 hits)",
    },
    Gpu {
        id: "rtx-3070",
        name: "NVIDIA GeForce RTX 3070",
        short_name: "RTX 3070",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "8 GB",
        driver_total: Bytes::mib(8192),
        visible: Some(Bytes::mib(7964)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 448,
        aliases: &["3070"],
        source: "gpus.md: GLS RTX3070 (driver 550.54, reserved 227, deviceQuery 7964 MiB); meta-llama/codellama#82 (torch 7.78 GiB)",
    },
    // The bare "3080" is the original 10 GB card; the 12 GB is `rtx-3080-12gb`.
    Gpu {
        id: "rtx-3080-10gb",
        name: "NVIDIA GeForce RTX 3080",
        short_name: "RTX 3080 10GB",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "10 GB",
        driver_total: Bytes::mib(10240),
        visible: Some(Bytes::mib(10000)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 760,
        aliases: &["3080", "rtx-3080", "3080-10gb"],
        source: "gpus.md: GLS RTX3080 (driver 550.54, deviceQuery 10000 MiB); TG rtx-3080-v12/v13",
    },
    // The driver prints "NVIDIA GeForce RTX 3080" for this card too; the
    // bracketed size keeps names unique (and `find_in_text` on a bare
    // "RTX 3080" gives the 10 GB).
    Gpu {
        id: "rtx-3080-12gb",
        name: "NVIDIA GeForce RTX 3080 (12 GB)",
        short_name: "RTX 3080 12GB",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "12 GB",
        driver_total: Bytes::mib(12288),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 912,
        aliases: &["3080-12gb"],
        source: "gpus.md: CI (one paste, 370 W board)",
    },
    Gpu {
        id: "rtx-3080-ti",
        name: "NVIDIA GeForce RTX 3080 Ti",
        short_name: "RTX 3080 Ti",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "12 GB",
        driver_total: Bytes::mib(12288),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 912,
        aliases: &["3080ti"],
        source: "gpus.md: CI (12288 ×3, 12264 ×1); the 12.00 GiB torch total in nicolai256/Stable-textual-inversion_win#36 is Windows/WDDM, not used",
    },
    Gpu {
        id: "rtx-3090",
        name: "NVIDIA GeForce RTX 3090",
        short_name: "RTX 3090",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "24 GB",
        driver_total: Bytes::mib(24576),
        visible: Some(Bytes::mib(24154)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 936,
        aliases: &["3090"],
        source: "gpus.md: noonghunna/club-3090#1128; TG rtx-3090-v12, 3090-v13; NV RTX3090 (deviceQuery 24154 MiB); CI (24268 pre-R510)",
    },
    Gpu {
        id: "rtx-3090-ti",
        name: "NVIDIA GeForce RTX 3090 Ti",
        short_name: "RTX 3090 Ti",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "24 GB",
        driver_total: Bytes::mib(24564),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 1008,
        aliases: &["3090ti"],
        source: "gpus.md: CI (new-format nvidia-smi rows, 5 hits)",
    },
    Gpu {
        id: "rtx-4060",
        name: "NVIDIA GeForce RTX 4060",
        short_name: "RTX 4060",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "8 GB",
        driver_total: Bytes::mib(8188),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 272,
        aliases: &["4060"],
        source: "gpus.md: CI (new-format nvidia-smi rows, 5 hits)",
    },
    // Both 4060 Ti variants print "NVIDIA GeForce RTX 4060 Ti". As with the
    // 3080, the bare name and "4060 Ti" go to the original, smaller 8 GB card
    // (the safe side for a fit check); the 16 GB is `rtx-4060-ti-16gb`.
    Gpu {
        id: "rtx-4060-ti-8gb",
        name: "NVIDIA GeForce RTX 4060 Ti",
        short_name: "RTX 4060 Ti 8GB",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "8 GB",
        driver_total: Bytes::mib(8188),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 288,
        aliases: &["4060ti", "rtx-4060-ti", "4060ti-8gb"],
        source: "gpus.md: CI (one paste)",
    },
    Gpu {
        id: "rtx-4060-ti-16gb",
        name: "NVIDIA GeForce RTX 4060 Ti (16 GB)",
        short_name: "RTX 4060 Ti 16GB",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "16 GB",
        driver_total: Bytes::mib(16380),
        visible: Some(Bytes::mib(16076)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 288,
        aliases: &["4060ti-16gb"],
        source: "gpus.md: NV RTX4060Ti (driver 550.54, reserved 303, deviceQuery 16076 MiB); CI (16380 ×7)",
    },
    Gpu {
        id: "rtx-4070",
        name: "NVIDIA GeForce RTX 4070",
        short_name: "RTX 4070",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "12 GB",
        driver_total: Bytes::mib(12282),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 504,
        aliases: &["4070"],
        source: "gpus.md: CI (new-format nvidia-smi rows, 5 hits)",
    },
    Gpu {
        id: "rtx-4070-ti",
        name: "NVIDIA GeForce RTX 4070 Ti",
        short_name: "RTX 4070 Ti",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "12 GB",
        driver_total: Bytes::mib(12282),
        visible: Some(Bytes::mib(12012)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 504,
        aliases: &["4070ti"],
        source: "gpus.md: CI (12282); OpenLMLab/LOMO#17 (torch 11.73 GiB; visible = round(11.73 × 1024) MiB, derived from the printed GiB)",
    },
    Gpu {
        id: "rtx-4080",
        name: "NVIDIA GeForce RTX 4080",
        short_name: "RTX 4080",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "16 GB",
        driver_total: Bytes::mib(16376),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 717,
        aliases: &["4080"],
        source: "gpus.md: CI (16376 ×4, 16384 ×1); EX 4080-super capture (16376, reserved 434, driver 595.71)",
    },
    Gpu {
        id: "rtx-4090",
        name: "NVIDIA GeForce RTX 4090",
        short_name: "RTX 4090",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "24 GB",
        driver_total: Bytes::mib(24564),
        // 24210 MiB = 23.64 GiB; the 23.65 GiB OOM (pytorch/pytorch#35901) is within 0.01 GiB.
        visible: Some(Bytes::mib(24210)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 1008,
        aliases: &["4090", "geforce-rtx-4090"],
        source: "gpus.md: RLinf/RLinf#255; ND rtx-4090-driver-535; NV RTX4090 (deviceQuery 24210 MiB); pytorch/pytorch#35901 (OOM 23.65 GiB)",
    },
    Gpu {
        id: "rtx-5080",
        name: "NVIDIA GeForce RTX 5080",
        short_name: "RTX 5080",
        vendor: Vendor::Nvidia,
        arch: "Blackwell",
        marketed: "16 GB GDDR7",
        driver_total: Bytes::mib(16303),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 960,
        aliases: &["5080"],
        source: "gpus.md: CI (new-format nvidia-smi rows, 7 hits)",
    },
    Gpu {
        id: "rtx-5090",
        name: "NVIDIA GeForce RTX 5090",
        short_name: "RTX 5090",
        vendor: Vendor::Nvidia,
        arch: "Blackwell",
        marketed: "32 GB GDDR7",
        driver_total: Bytes::mib(32607),
        // deviceQuery's exact byte count (32120.19 MiB = 31.37 GiB).
        visible: Some(Bytes(33680457728)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 1792,
        aliases: &["5090"],
        source: "gpus.md: noonghunna/club-3090#1261; GLS RTX5090; NVIDIA/nccl#1637 (deviceQuery 33680457728 B); aikitoria/open-gpu-kernel-modules#1; Wan-Video/Wan2.1#465 (OOM 31.37 GiB)",
    },
    Gpu {
        id: "titan-rtx",
        name: "NVIDIA TITAN RTX",
        short_name: "TITAN RTX",
        vendor: Vendor::Nvidia,
        arch: "Turing",
        marketed: "24 GB",
        driver_total: Bytes::mib(24576),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 672,
        aliases: &[],
        source: "gpus.md: CI (new-format nvidia-smi rows, 6 hits)",
    },
    // ── Data-centre and workstation (§1.2); GDDR boards with ECC on ─────
    Gpu {
        id: "t4",
        name: "Tesla T4",
        short_name: "T4",
        vendor: Vendor::Nvidia,
        arch: "Turing",
        marketed: "16 GB GDDR6",
        driver_total: Bytes::mib(15360),
        visible: Some(Bytes::mib(14918)),
        // Old drivers: 15109 MiB = 14.76 GiB, and Colab's OOM prints 14.75 GiB.
        other_visible: &[Bytes::mib(15109)],
        unified: false,
        bf16: false,
        bandwidth_gbs: 320,
        aliases: &["t4-16gb"],
        source: "gpus.md: MO; TG tesla-t4 (15360, reserved 388); CI (deviceQuery 14918 MiB, CUDA 12.5 driver; 15109 old); hpcaitech/Open-Sora#697 (Colab OOM 14.75 GiB); NVIDIA/DALI#1813",
    },
    Gpu {
        id: "l4",
        name: "NVIDIA L4",
        short_name: "L4",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "24 GB GDDR6",
        driver_total: Bytes::mib(23034),
        visible: Some(Bytes::mib(22478)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 300,
        aliases: &["l4-24gb"],
        source: "gpus.md: MO; NV L4 (driver 550.90, reserved 556, deviceQuery 22478 MiB)",
    },
    Gpu {
        id: "l40s",
        name: "NVIDIA L40S",
        short_name: "L40S",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "48 GB GDDR6",
        driver_total: Bytes::mib(46068),
        visible: Some(Bytes::mib(45589)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 864,
        aliases: &["l40s-48gb"],
        source: "gpus.md: MO; EX l40s capture; NV L40S (deviceQuery 45589 MiB)",
    },
    Gpu {
        id: "a10",
        name: "NVIDIA A10",
        short_name: "A10",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "24 GB GDDR6",
        driver_total: Bytes::mib(23028),
        visible: Some(Bytes::mib(22503)),
        // The Lambda A10 OOM prints 21.99 GiB: round(21.99 × 1024) MiB.
        other_visible: &[Bytes::mib(22518)],
        unified: false,
        bf16: true,
        bandwidth_gbs: 600,
        aliases: &["a10-24gb"],
        source: "gpus.md: MO; GLS A10 (driver 550.90, reserved 526, deviceQuery 22503 MiB); zai-org/CogVLM#236 (OOM 21.99 GiB, other_visible derived from the printed GiB)",
    },
    Gpu {
        id: "a10g",
        name: "NVIDIA A10G",
        short_name: "A10G",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "24 GB GDDR6",
        driver_total: Bytes::mib(23028),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 600,
        aliases: &["a10g-24gb"],
        source: "gpus.md: TG a10g (driver 515.105, reserved 435); CI",
    },
    Gpu {
        id: "a16",
        name: "NVIDIA A16",
        short_name: "A16",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "16 GB per GPU (4 per board)",
        driver_total: Bytes::mib(15356),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 200,
        aliases: &[],
        source: "gpus.md: CI (per GPU; BW per GPU)",
    },
    Gpu {
        id: "a30",
        name: "NVIDIA A30",
        short_name: "A30",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "24 GB HBM2",
        driver_total: Bytes::mib(24576),
        visible: Some(Bytes::mib(24095)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 933,
        aliases: &["a30-24gb"],
        source: "gpus.md: CI (24576); google/RB-Modulation#5 (OOM 23.53 GiB; visible = round(23.53 × 1024) MiB, derived from the printed GiB)",
    },
    Gpu {
        id: "a40",
        name: "NVIDIA A40",
        short_name: "A40",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "48 GB GDDR6",
        driver_total: Bytes::mib(46068),
        visible: Some(Bytes::mib(45403)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 696,
        aliases: &["a40-48gb"],
        source: "gpus.md: NV A40 (driver 550.127, reserved 665, deviceQuery 45403 MiB)",
    },
    Gpu {
        id: "rtx-a4000",
        name: "NVIDIA RTX A4000",
        short_name: "RTX A4000",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "16 GB GDDR6",
        driver_total: Bytes::mib(16376),
        visible: Some(Bytes::mib(15985)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 448,
        aliases: &["a4000"],
        source: "gpus.md: CI (16376); DengKaiCQ/VGGT-Long#6 (OOM 15.61 GiB; visible = round(15.61 × 1024) MiB, derived from the printed GiB)",
    },
    Gpu {
        id: "rtx-a5000",
        name: "NVIDIA RTX A5000",
        short_name: "RTX A5000",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "24 GB GDDR6",
        // Only an ECC-off total is known for the A5000.
        driver_total: Bytes::mib(24564),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 768,
        aliases: &["a5000"],
        source: "gpus.md: TG dual_a5000-v13 at 74bae14 (24564 MiB ECC off, reserved 450, driver 590.44); CI",
    },
    Gpu {
        id: "rtx-a6000",
        name: "NVIDIA RTX A6000",
        short_name: "RTX A6000",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "48 GB GDDR6",
        driver_total: Bytes::mib(46068),
        visible: Some(Bytes::mib(45619)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 768,
        aliases: &["a6000"],
        source: "gpus.md: GLS RTX_A6000_x9 (ECC on: 46068 MiB, reserved 450, deviceQuery 45619 MiB, driver 550.127); ECC off = 49140 MiB (CI)",
    },
    Gpu {
        id: "rtx-6000-ada",
        name: "NVIDIA RTX 6000 Ada Generation",
        short_name: "RTX 6000 Ada",
        vendor: Vendor::Nvidia,
        arch: "Ada Lovelace",
        marketed: "48 GB GDDR6",
        // Only an ECC-off total is known.
        driver_total: Bytes::mib(49140),
        visible: Some(Bytes::mib(48640)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 960,
        aliases: &["6000-ada"],
        source: "gpus.md: NV RTX6000Ada_x8 (49140 MiB ECC off, reserved 500, deviceQuery 48640 MiB, driver 550.127); CI",
    },
    // "v100" alone is ambiguous (16 or 32 GB, SXM2 or PCIe): `find` lists them.
    Gpu {
        id: "v100-16gb",
        name: "Tesla V100-SXM2-16GB",
        short_name: "V100 SXM2 16GB",
        vendor: Vendor::Nvidia,
        arch: "Volta",
        marketed: "16 GB HBM2",
        driver_total: Bytes::mib(16384),
        visible: Some(Bytes::mib(16144)),
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 900,
        aliases: &["v100-sxm2"],
        source: "gpus.md: GLS V100_x8 (driver 550.127, reserved 240, deviceQuery 16144 MiB); CI (16160 / 16130 pre-R510)",
    },
    Gpu {
        id: "v100-32gb",
        name: "Tesla V100-SXM2-32GB",
        short_name: "V100 SXM2 32GB",
        vendor: Vendor::Nvidia,
        arch: "Volta",
        marketed: "32 GB HBM2",
        driver_total: Bytes::mib(32768),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 900,
        aliases: &[],
        source: "gpus.md: Wan-Video/Wan2.1#5 (32768, driver 525.105); CI (32510 pre-R510)",
    },
    Gpu {
        id: "v100-pcie-16gb",
        name: "Tesla V100-PCIE-16GB",
        short_name: "V100 PCIe 16GB",
        vendor: Vendor::Nvidia,
        arch: "Volta",
        marketed: "16 GB HBM2",
        driver_total: Bytes::mib(16384),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 900,
        aliases: &["v100-pcie"],
        source: "gpus.md: CI (16384 new; 16160 / 16130 old)",
    },
    Gpu {
        id: "v100-pcie-32gb",
        name: "Tesla V100-PCIE-32GB",
        short_name: "V100 PCIe 32GB",
        vendor: Vendor::Nvidia,
        arch: "Volta",
        marketed: "32 GB HBM2",
        driver_total: Bytes::mib(32768),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 900,
        aliases: &[],
        source: "gpus.md: CI (32768 new; 32510 old)",
    },
    Gpu {
        id: "p100",
        name: "Tesla P100-PCIE-16GB",
        short_name: "P100 16GB",
        vendor: Vendor::Nvidia,
        arch: "Pascal",
        marketed: "16 GB HBM2",
        driver_total: Bytes::mib(16384),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: false,
        bandwidth_gbs: 732,
        aliases: &["p100-16gb", "p100-pcie"],
        source: "gpus.md: wookayin/gpustat#130; ND tesla-p100 (16384, reserved 103, free 16280); CI (16280 pre-R510)",
    },
    Gpu {
        id: "k80",
        name: "Tesla K80",
        short_name: "K80",
        vendor: Vendor::Nvidia,
        arch: "Kepler",
        marketed: "12 GB per GPU (2 per board)",
        // K80 drivers predate R510, so this Total is already net of the reserve.
        driver_total: Bytes::mib(11441),
        visible: None,
        // 11.17 GiB in a 2019 OOM whose card is not named: round(11.17 × 1024) MiB.
        other_visible: &[Bytes::mib(11438)],
        unified: false,
        bf16: false,
        bandwidth_gbs: 240,
        aliases: &[],
        source: "gpus.md: CI (11441 / 11439 per GK210; BW per GPU); shllln/GenerativeGraph#5 (11.17 GiB OOM, card not named; other_visible derived from the printed GiB)",
    },
    Gpu {
        id: "a100-40gb",
        name: "NVIDIA A100-SXM4-40GB",
        short_name: "A100 SXM4 40GB",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "40 GB HBM2",
        driver_total: Bytes::mib(40960),
        visible: Some(Bytes::mib(40339)),
        // 40536 MiB = 39.59 GiB under driver 470; 39.50 GiB in one OOM: round(39.50 × 1024).
        other_visible: &[Bytes::mib(40536), Bytes::mib(40448)],
        unified: false,
        bf16: true,
        bandwidth_gbs: 1555,
        aliases: &["a100-40gb-sxm"],
        source: "gpus.md: MO; bottlerocket-os/bottlerocket-core-kit#834; bottlerocket-os/bottlerocket#3873 (deviceQuery 40339 MiB); nanopool/phoenix-miner#17; raoyongming/DenseCLIP#52 (39.59 GiB = 40536 MiB, driver 470.82); TianheWu/CoSeR#10 (39.50 GiB)",
    },
    Gpu {
        id: "a100-pcie-40gb",
        name: "NVIDIA A100-PCIE-40GB",
        short_name: "A100 PCIe 40GB",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "40 GB HBM2",
        driver_total: Bytes::mib(40960),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 1555,
        aliases: &["a100-40gb-pcie"],
        source: "gpus.md: CI (new-format nvidia-smi rows, 7 hits)",
    },
    // "a100" alone is ambiguous (40 or 80 GB): `find` lists the variants.
    Gpu {
        id: "a100-80gb",
        name: "NVIDIA A100-SXM4-80GB",
        short_name: "A100 SXM4 80GB",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "80 GB HBM2e",
        driver_total: Bytes::mib(81920),
        // 81158 MiB = 79.26 GiB; the 79.25 GiB OOM is within 0.01 GiB.
        visible: Some(Bytes::mib(81158)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 2039,
        aliases: &["a100-80gb-sxm"],
        source: "gpus.md: MO; NV A100SXMx4 (driver 555.42, reserved 763, deviceQuery 81158 MiB); keyu-tian/SparK#8 (81252 pre-R510); levihsu/OOTDiffusion#235 (OOM 79.25 GiB)",
    },
    Gpu {
        id: "a100-pcie-80gb",
        name: "NVIDIA A100 80GB PCIe",
        short_name: "A100 PCIe 80GB",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "80 GB HBM2e",
        driver_total: Bytes::mib(81920),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 1935,
        aliases: &[],
        source: "gpus.md: CI (new-format nvidia-smi rows, 6 hits)",
    },
    Gpu {
        id: "h100-pcie",
        name: "NVIDIA H100 PCIe",
        short_name: "H100 PCIe",
        vendor: Vendor::Nvidia,
        arch: "Hopper",
        marketed: "80 GB HBM2e",
        driver_total: Bytes::mib(81559),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 2000,
        aliases: &["h100-pcie-80gb"],
        source: "gpus.md: CI (81559; outliers 94514 and a mock 81920 ignored)",
    },
    // "h100" alone is H100 PCIe: its form factors share 80 GB and `find` takes
    // the smaller usable memory; the NVL (94 GB) is named by its id.
    Gpu {
        id: "h100-sxm",
        name: "NVIDIA H100 80GB HBM3",
        short_name: "H100 SXM",
        vendor: Vendor::Nvidia,
        arch: "Hopper",
        marketed: "80 GB HBM3",
        driver_total: Bytes::mib(81559),
        visible: Some(Bytes::mib(81106)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 3350,
        aliases: &["h100-80gb", "h100-sxm5"],
        source: "gpus.md: MO; modal-labs/modal-client#2797; NVIDIA/nccl#1264; wilicc/gpu-burn#114; EX h100 capture; NV H100SXMx8 (reserved 454, deviceQuery 81106 MiB)",
    },
    Gpu {
        id: "h100-nvl",
        name: "NVIDIA H100 NVL",
        short_name: "H100 NVL",
        vendor: Vendor::Nvidia,
        arch: "Hopper",
        marketed: "94 GB HBM3",
        driver_total: Bytes::mib(95830),
        visible: Some(Bytes::mib(95235)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 3900,
        aliases: &["h100-94gb"],
        source: "gpus.md: NVIDIA/gpu-admin-tools#4; NV H100NVLx2 (reserved 594, deviceQuery 95235 MiB)",
    },
    Gpu {
        id: "h200",
        name: "NVIDIA H200",
        short_name: "H200",
        vendor: Vendor::Nvidia,
        arch: "Hopper",
        marketed: "141 GB HBM3e",
        driver_total: Bytes::mib(143771),
        visible: Some(Bytes::mib(143072)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 4800,
        aliases: &["h200-141gb"],
        source: "gpus.md: EX h200 capture (590.48); GLS H200 (550.90, reserved 700, deviceQuery 143072 MiB)",
    },
    Gpu {
        id: "h20",
        name: "NVIDIA H20",
        short_name: "H20",
        vendor: Vendor::Nvidia,
        arch: "Hopper",
        marketed: "96 GB HBM3",
        driver_total: Bytes::mib(97871),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 4000,
        aliases: &["h20-96gb"],
        source: "gpus.md: NVIDIA/nvtrust#128 (driver 580.95); CI",
    },
    // The 96 GB HBM3 GH200 only: gpus.md has no total for the 144 GB HBM3e one.
    Gpu {
        id: "gh200",
        name: "NVIDIA GH200 480GB",
        short_name: "GH200 96GB",
        vendor: Vendor::Nvidia,
        arch: "Hopper",
        marketed: "96 GB HBM3",
        driver_total: Bytes::mib(97871),
        visible: Some(Bytes::mib(96768)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 4000,
        aliases: &["gh200-96gb"],
        source: "gpus.md: GLS GH200 (driver 550.127, reserved 1103, deviceQuery 96768 MiB)",
    },
    Gpu {
        id: "b200",
        name: "NVIDIA B200",
        short_name: "B200",
        vendor: Vendor::Nvidia,
        arch: "Blackwell",
        marketed: "180 GB HBM3e",
        driver_total: Bytes::mib(183359),
        visible: Some(Bytes::mib(182630)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 8000,
        aliases: &["b200-180gb", "b200-192gb"],
        source: "gpus.md: NVIDIA/TensorRT-LLM#10278 (183359, driver 580.95); pytorch/ao#4002 (178.35 GiB; visible = round(178.35 × 1024) MiB, derived from the printed figure)",
    },
    Gpu {
        id: "gb200",
        name: "NVIDIA GB200",
        short_name: "GB200",
        vendor: Vendor::Nvidia,
        arch: "Blackwell",
        marketed: "186 GB HBM3e per GPU",
        driver_total: Bytes::mib(189471),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 8000,
        aliases: &[],
        source: "gpus.md: CI (per GPU, driver 580.95; 7 hits, one from a stub NVML)",
    },
    // ── AMD (§1.4); driver_total is rocm-smi's byte count ──────────────
    Gpu {
        id: "mi100",
        name: "AMD Instinct MI100",
        short_name: "MI100",
        vendor: Vendor::Amd,
        arch: "CDNA",
        marketed: "32 GB HBM2",
        driver_total: Bytes(34342961152),
        visible: None,
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 1229,
        aliases: &[],
        source: "gpus.md: CI (rocm-smi CSV naming \"Arcturus GL-XL [Instinct MI100]\", one named hit)",
    },
    Gpu {
        id: "mi250",
        name: "AMD Instinct MI250",
        short_name: "MI250 (per GCD)",
        vendor: Vendor::Amd,
        arch: "CDNA 2",
        marketed: "64 GB HBM2e per GCD (128 GB per package)",
        driver_total: Bytes(68702699520),
        // mem_get_info total 63.984375 GiB per GCD = exactly the rocm-smi bytes.
        visible: Some(Bytes(68702699520)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 1638,
        aliases: &[],
        source: "gpus.md: jaglinux/pytorch-notes memory_stats.py (MI250, 63.984375 GiB per GCD); CI (Cray ACC 68702699520 B per GCD); BW per GCD",
    },
    Gpu {
        id: "mi250x",
        name: "AMD Instinct MI250X",
        short_name: "MI250X (per GCD)",
        vendor: Vendor::Amd,
        arch: "CDNA 2",
        marketed: "64 GB HBM2e per GCD (128 GB per package)",
        driver_total: Bytes(68702699520),
        visible: Some(Bytes(68702699520)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 1638,
        aliases: &[],
        source: "gpus.md: CI (Cray ACC \"Total GPU memory 68702699520\", MI250X, per GCD); MI250/MI250X row's 63.984375 GiB per GCD (jaglinux/pytorch-notes); BW per GCD",
    },
    // HIP's totalGlobalMem (196592 MiB, 191.98 GiB in most OOMs) exceeds
    // rocm-smi's VRAM total. `visible` keeps the rocm-smi bytes, which some
    // OOMs print as 191.69 GiB, so it stays ≤ driver_total and plans on the
    // safe side; the larger HIP figure is in `other_visible`.
    Gpu {
        id: "mi300x",
        name: "AMD Instinct MI300X",
        short_name: "MI300X",
        vendor: Vendor::Amd,
        arch: "CDNA 3",
        marketed: "192 GB HBM3",
        driver_total: Bytes(205822885888),
        visible: Some(Bytes(205822885888)),
        other_visible: &[Bytes::mib(196592)],
        unified: false,
        bf16: true,
        bandwidth_gbs: 5300,
        aliases: &["mi300x-192gb"],
        source: "gpus.md: thamada/nvidia-smi gls/MI300X_x4_deviceQuery.py (hipDeviceProp 196592 MiB); ROCm/legacy-rocm-build#4750; CI (rocm-smi 205822885888 B; torch 191.98 / 191.69 GiB)",
    },
    // No rocm-smi total in gpus.md: driver_total is set to the torch total.
    Gpu {
        id: "mi325x",
        name: "AMD Instinct MI325X",
        short_name: "MI325X",
        vendor: Vendor::Amd,
        arch: "CDNA 3",
        marketed: "256 GB HBM3e",
        driver_total: Bytes::mib(262124),
        visible: Some(Bytes::mib(262124)),
        other_visible: &[],
        unified: false,
        bf16: true,
        bandwidth_gbs: 6000,
        aliases: &["mi325x-256gb"],
        source: "gpus.md: ROCm/TheRock#2118; pytorch/FBGEMM#5605 (torch 255.98 GiB; round(255.98 × 1024) MiB, derived from the printed GiB; rocm-smi total not found, so driver_total = visible)",
    },
    Gpu {
        id: "rx-7900-xtx",
        name: "AMD Radeon RX 7900 XTX",
        short_name: "RX 7900 XTX",
        vendor: Vendor::Amd,
        arch: "RDNA 3",
        marketed: "24 GB GDDR6",
        driver_total: Bytes(25753026560),
        visible: None,
        // 23.98 GiB in a HIP OOM whose card is not named: round(23.98 × 1024) MiB.
        other_visible: &[Bytes::mib(24556)],
        unified: false,
        bf16: true,
        bandwidth_gbs: 960,
        aliases: &["7900xtx"],
        source: "gpus.md: CI (rocm-smi 25753026560 B, several); Tongyi-MAI/Z-Image#103 (HIP OOM 23.98 GiB, card not named; other_visible derived from the printed GiB)",
    },
    // ── Apple silicon (§1.5), one entry per RAM size ───────────────────
    // MPS reports no device total. `driver_total` is PyTorch's "max allowed"
    // (the "GB" it prints is GiB): the most MPS will ever hand out, = 1.7 ×
    // `recommendedMaxWorkingSetSize`, which can exceed RAM (it swaps).
    // `visible` is `recommendedMaxWorkingSetSize`, what Metal recommends a
    // process keep resident, so `usable()` plans with it. Where gpus.md gives
    // only one of the two, the other follows from the 1.7 ratio (gpus.md §1.5)
    // via `mps_max_allowed` / `mps_working_set`. The working set depends on
    // RAM, not on the M1–M4 chip; bandwidth does depend on the chip, so it is
    // that of the chip in the source capture (the lower one where two).
    // bf16 is emulated on M1/M2 (no speed-up), so `bf16: false`.
    Gpu {
        id: "apple-m-8gb",
        name: "Apple M-series (8 GB)",
        short_name: "Apple 8GB",
        vendor: Vendor::Apple,
        arch: "Apple silicon (M1/M2)",
        marketed: "8 GB unified",
        driver_total: Bytes::mib(9288),
        visible: Some(Bytes(5726630000)),
        other_visible: &[],
        unified: true,
        bf16: false,
        bandwidth_gbs: 68,
        // A bare "m1" / "m2" is the 8 GB base model.
        aliases: &[
            "m1",
            "m2",
            "apple-8gb",
            "mac-8gb",
            "m1-8gb",
            "m2-8gb",
            "mps-8gb",
        ],
        source: "gpus.md: h2oai/h2ogpt#1359 (working set 5726.63 MB, 10^6); lllyasviel/Fooocus#980 (max allowed 9.07 GB; round(9.07 × 1024) MiB); lllyasviel/Fooocus#1139 (M2, same figure); BW M1",
    },
    Gpu {
        id: "apple-m-16gb",
        name: "Apple M-series (16 GB)",
        short_name: "Apple 16GB",
        vendor: Vendor::Apple,
        arch: "Apple silicon (M1)",
        marketed: "16 GB unified",
        driver_total: Bytes::mib(18565),
        visible: Some(mps_working_set(Bytes::mib(18565))),
        other_visible: &[],
        unified: true,
        bf16: false,
        bandwidth_gbs: 68,
        aliases: &["apple-16gb", "mac-16gb", "m1-16gb", "mps-16gb"],
        source: "gpus.md: haoheliu/AudioLDM2#20 (MacBook Air 16 GB, max allowed 18.13 GB; round(18.13 × 1024) MiB); pinokiocomputer/pinokio#941; Comfy-Org/ComfyUI#7171; working set = max allowed / 1.7 (gpus.md: 10.67 GiB implied); BW M1",
    },
    Gpu {
        id: "apple-m-32gb",
        name: "Apple M-series (32 GB)",
        short_name: "Apple 32GB",
        vendor: Vendor::Apple,
        arch: "Apple silicon (M1 Max/M2 Max)",
        marketed: "32 GB unified",
        driver_total: mps_max_allowed(Bytes::mib(21845)),
        visible: Some(Bytes::mib(21845)),
        other_visible: &[],
        unified: true,
        bf16: false,
        bandwidth_gbs: 400,
        aliases: &[
            "apple-32gb",
            "mac-32gb",
            "m1-max-32gb",
            "m2-max-32gb",
            "mps-32gb",
        ],
        source: "gpus.md: ggml-org/llama.cpp#2011; ollama/ollama#434 (working set 21845.34 MiB, rounded down); max allowed = 1.7 × working set (gpus.md: ≈ 36.3 implied); BW M1/M2 Max",
    },
    Gpu {
        id: "apple-m-64gb",
        name: "Apple M-series (64 GB)",
        short_name: "Apple 64GB",
        vendor: Vendor::Apple,
        arch: "Apple silicon (M1 Max/M2 Max)",
        marketed: "64 GB unified",
        driver_total: Bytes::mib(83558),
        visible: Some(mps_working_set(Bytes::mib(83558))),
        other_visible: &[],
        unified: true,
        bf16: false,
        bandwidth_gbs: 400,
        aliases: &[
            "apple-64gb",
            "mac-64gb",
            "m1-max-64gb",
            "m2-max-64gb",
            "mps-64gb",
        ],
        source: "gpus.md: BoBo0037/bobo-fun#8 (M1 Max, max allowed 81.60 GB; round(81.60 × 1024) MiB); ggml-org/llama.cpp#1870; working set = max allowed / 1.7 (gpus.md: 48.0 GiB implied); BW M1/M2 Max",
    },
    Gpu {
        id: "apple-m-96gb",
        name: "Apple M-series (96 GB)",
        short_name: "Apple 96GB",
        vendor: Vendor::Apple,
        arch: "Apple silicon (M2 Max/M2 Ultra)",
        marketed: "96 GB unified",
        driver_total: mps_max_allowed(Bytes::mib(73728)),
        visible: Some(Bytes::mib(73728)),
        other_visible: &[],
        unified: true,
        bf16: false,
        bandwidth_gbs: 400,
        aliases: &[
            "apple-96gb",
            "mac-96gb",
            "m2-max-96gb",
            "m2-ultra-96gb",
            "mps-96gb",
        ],
        source: "gpus.md: ggml-org/llama.cpp#3213 (M2 Max, working set 73728.00 MB); max allowed = 1.7 × working set (no capture); BW M2 Max",
    },
    // ── Jetson (§1.3): unified LPDDR; driver_total = visible = deviceQuery ─
    // deviceQuery prints just "Orin" / "Xavier" for every module, so `name`
    // carries the module to stay unique (and to avoid matching "orin" inside
    // words in `find_in_text`). Bandwidths are rounded to whole GB/s.
    Gpu {
        id: "jetson-agx-orin-64gb",
        name: "NVIDIA Jetson AGX Orin 64GB",
        short_name: "AGX Orin 64GB",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "64 GB LPDDR5",
        driver_total: Bytes::mib(62841),
        visible: Some(Bytes::mib(62841)),
        other_visible: &[],
        unified: true,
        bf16: true,
        bandwidth_gbs: 205,
        aliases: &["agx-orin", "jetson-agx-orin", "agx-orin-64gb"],
        source: "gpus.md: CI (deviceQuery 62841 MiB, several docs); BW 204.8 rounded",
    },
    Gpu {
        id: "jetson-orin-nx-16gb",
        name: "NVIDIA Jetson Orin NX 16GB",
        short_name: "Orin NX 16GB",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "16 GB LPDDR5",
        driver_total: Bytes::mib(15388),
        visible: Some(Bytes::mib(15388)),
        other_visible: &[],
        unified: true,
        bf16: true,
        bandwidth_gbs: 102,
        aliases: &["orin-nx", "jetson-orin-nx", "orin-nx-16gb"],
        source: "gpus.md: CI (deviceQuery 15388 MiB, one paste); BW 102.4 rounded",
    },
    Gpu {
        id: "jetson-orin-nano-8gb",
        name: "NVIDIA Jetson Orin Nano 8GB",
        short_name: "Orin Nano 8GB",
        vendor: Vendor::Nvidia,
        arch: "Ampere",
        marketed: "8 GB LPDDR5",
        driver_total: Bytes::mib(7618),
        visible: Some(Bytes::mib(7618)),
        other_visible: &[],
        unified: true,
        bf16: true,
        bandwidth_gbs: 68,
        aliases: &["orin-nano", "jetson-orin-nano", "orin-nano-8gb"],
        source: "gpus.md: CI (deviceQuery 7618 MiB, JetPack 6; 7.16 \"GBytes\" on JetPack 5 not used); BW 68 (102 \"Super\")",
    },
    Gpu {
        id: "jetson-agx-xavier-16gb",
        name: "NVIDIA Jetson AGX Xavier 16GB",
        short_name: "AGX Xavier 16GB",
        vendor: Vendor::Nvidia,
        arch: "Volta",
        marketed: "16 GB LPDDR4x",
        driver_total: Bytes::mib(15700),
        visible: Some(Bytes::mib(15700)),
        // Also seen: 15815 MiB (15692 MiB is within 0.01 GiB of 15700).
        other_visible: &[Bytes::mib(15815)],
        unified: true,
        bf16: false,
        bandwidth_gbs: 137,
        aliases: &["agx-xavier", "jetson-agx-xavier"],
        source: "gpus.md: gist.github.com/r7vme/7276929c7ddcce41eb0872d389634e4d; CI (deviceQuery 15700 / 15815 / 15692 MiB); BW 136.5 rounded",
    },
    Gpu {
        id: "jetson-xavier-nx-8gb",
        name: "NVIDIA Jetson Xavier NX 8GB",
        short_name: "Xavier NX 8GB",
        vendor: Vendor::Nvidia,
        arch: "Volta",
        marketed: "8 GB LPDDR4x",
        driver_total: Bytes::mib(7770),
        visible: Some(Bytes::mib(7770)),
        other_visible: &[],
        unified: true,
        bf16: false,
        bandwidth_gbs: 60,
        aliases: &["xavier-nx", "jetson-xavier-nx"],
        source: "gpus.md: CI (deviceQuery 7770 MiB); BW 59.7 rounded",
    },
];

/// Why a GPU name did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", unknown_text(self))]
pub struct UnknownGpu {
    /// What the user typed.
    pub input: String,
    /// Close catalogue ids.
    pub suggestions: Vec<&'static str>,
    /// The name is the start of several catalogue ids (`a100`: the 40 GB
    /// and 80 GB boards), listed in `suggestions`: choose one.
    pub ambiguous: bool,
}

fn unknown_text(e: &UnknownGpu) -> String {
    if e.ambiguous {
        format!(
            "ambiguous GPU {:?}: {} (name one; see `oomkit estimate --list-gpus`)",
            e.input,
            e.suggestions.join(", ")
        )
    } else {
        format!(
            "unknown GPU {:?}{}",
            e.input,
            suggestion_text(&e.suggestions)
        )
    }
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
        if matches!(
            word,
            "nvidia" | "geforce" | "tesla" | "amd" | "radeon" | "instinct" | "apple" | ""
        ) {
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
            let mut keys = [gpu.id, gpu.name, gpu.short_name]
                .into_iter()
                .chain(gpu.aliases.iter().copied());
            if keys.any(|k| normalize_name(k) == want) {
                return Ok(gpu);
            }
        }
    }
    // A family name (`a100`, `h100`, `v100`) is the start of several ids.
    // When its form-factor variants alone (`h100-pcie`, `h100-sxm`: the id is
    // the family plus `pcie` or `sxm`) hold the same memory (within 2 %), the
    // name means any of them and resolves to the one with the least usable
    // memory, so a fit there is a fit on each; the output names the id taken.
    // Variants that differ in memory (`a100-40gb`/`a100-80gb`, `h100-nvl`)
    // are an error listing them, never a silent pick.
    let family: Vec<&'static Gpu> = GPUS
        .iter()
        .filter(|g| want.len() >= 2 && normalize_name(g.id).starts_with(&want))
        .collect();
    let forms: Vec<&'static Gpu> = family
        .iter()
        .copied()
        .filter(|g| {
            let rest = normalize_name(g.id);
            matches!(
                rest.strip_prefix(want.as_str()),
                Some("pcie" | "sxm" | "sxm5" | "sxm4")
            )
        })
        .collect();
    let smallest = forms.iter().copied().min_by_key(|g| g.usable().0);
    let largest = forms.iter().map(|g| g.usable().0).max();
    if let (true, Some(small), Some(large)) = (forms.len() > 1, smallest, largest) {
        // Within 2 %: large * 100 <= small * 102.
        if u128::from(large) * 100 <= u128::from(small.usable().0) * 102 {
            return Ok(small);
        }
    }
    let family: Vec<&'static str> = family.iter().map(|g| g.id).collect();
    if family.len() > 1 {
        return Err(UnknownGpu {
            input: name.to_string(),
            suggestions: family,
            ambiguous: true,
        });
    }
    let mut suggestions: Vec<&'static str> = GPUS
        .iter()
        .filter(|g| {
            !want.is_empty()
                && (normalize_name(g.id).contains(&want)
                    || want.contains(&normalize_name(g.short_name)))
        })
        .map(|g| g.id)
        .collect();
    suggestions.truncate(6);
    Err(UnknownGpu {
        input: name.to_string(),
        suggestions,
        ambiguous: false,
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

/// GPUs whose CUDA-visible total (`visible` or one of `other_visible`)
/// matches `total` to within 0.01 GiB (the precision of PyTorch's
/// `format_size`). Used to name the card behind a `total capacity of 23.65 GiB`
/// message; ambiguous totals give several.
pub fn by_visible_total(total: Bytes) -> Vec<&'static Gpu> {
    let tol = Bytes::mib(11).0; // 0.01 GiB ≈ 10.24 MiB, plus rounding
    GPUS.iter()
        .filter(|g| {
            g.visible
                .iter()
                .chain(g.other_visible)
                .any(|v| v.0.abs_diff(total.0) <= tol)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Every NVIDIA GPU has a capability, and the FP8 line (8.9) falls
    /// between Ampere and Ada as NVIDIA's table has it.
    #[test]
    fn compute_capabilities() {
        for g in GPUS {
            assert_eq!(
                g.compute_capability().is_some(),
                g.vendor == Vendor::Nvidia,
                "{}",
                g.id
            );
        }
        let cc = |id| find(id).ok().and_then(Gpu::compute_capability);
        assert_eq!(cc("h100-sxm"), Some((9, 0)));
        assert_eq!(cc("rtx-4090"), Some((8, 9)));
        assert_eq!(cc("l4"), Some((8, 9)));
        assert_eq!(cc("a100-80gb"), Some((8, 0)));
        assert_eq!(cc("rtx-3090"), Some((8, 6)));
        assert_eq!(cc("rtx-5090"), Some((12, 0)));
        assert_eq!(cc("b200"), Some((10, 0)));
        assert_eq!(cc("t4"), Some((7, 5)));
        assert_eq!(cc("mi300x"), None);
    }

    #[test]
    fn ids_names_and_aliases_are_unique() {
        let mut seen = HashSet::new();
        for g in GPUS {
            let mut keys: Vec<String> = vec![
                normalize_name(g.id),
                normalize_name(g.name),
                normalize_name(g.short_name),
            ];
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
                if g.vendor == Vendor::Apple {
                    // MPS: driver_total is "max allowed" = 1.7 × the working
                    // set in `visible` (gpus.md §1.5); allow 0.5 % for rounding.
                    let want = v.0 / 10 * 17;
                    assert!(
                        g.driver_total.0.abs_diff(want) * 200 <= want,
                        "{} not 1.7 × working set",
                        g.id
                    );
                } else {
                    assert!(
                        v.0 * 10 >= g.driver_total.0 * 9,
                        "{} visible too small",
                        g.id
                    );
                }
            }
            for o in g.other_visible {
                assert!(
                    o.0 * 10 >= g.driver_total.0 * 9,
                    "{} other_visible too small",
                    g.id
                );
                assert!(
                    o.0 * 10 <= g.driver_total.0 * 11,
                    "{} other_visible too large",
                    g.id
                );
                if let Some(v) = g.visible {
                    assert!(
                        o.0.abs_diff(v.0) > Bytes::mib(11).0,
                        "{} other_visible repeats visible",
                        g.id
                    );
                }
            }
            assert!(g.usable() <= g.driver_total);
            assert!(!g.source.is_empty());
            assert!(
                g.source.starts_with("gpus.md:"),
                "{} source must cite gpus.md",
                g.id
            );
            assert!(g.bandwidth_gbs > 0, "{}", g.id);
            assert_eq!(
                g.unified,
                matches!(g.vendor, Vendor::Apple) || g.id.starts_with("jetson-"),
                "{}",
                g.id
            );
        }
    }

    #[test]
    fn ids_are_lowercase_kebab() {
        for g in GPUS {
            assert!(
                g.id.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{}",
                g.id
            );
            assert!(
                !g.id.starts_with('-') && !g.id.ends_with('-') && !g.id.contains("--"),
                "{}",
                g.id
            );
        }
    }

    #[test]
    fn catalogue_is_large_enough() {
        assert!(GPUS.len() >= 40, "only {} GPUs", GPUS.len());
    }

    #[test]
    fn forgiving_names_resolve() {
        for n in [
            "4090",
            "rtx-4090",
            "RTX 4090",
            "NVIDIA GeForce RTX 4090",
            "rtx4090",
        ] {
            assert_eq!(find(n).unwrap().id, "rtx-4090", "{n}");
        }
        assert_eq!(find("h100-sxm").unwrap().id, "h100-sxm");
    }

    #[test]
    fn family_names_are_ambiguous() {
        for (n, want) in [
            (
                "a100",
                &["a100-40gb", "a100-pcie-40gb", "a100-80gb", "a100-pcie-80gb"][..],
            ),
            (
                "A100",
                &["a100-40gb", "a100-pcie-40gb", "a100-80gb", "a100-pcie-80gb"],
            ),
            (
                "v100",
                &["v100-16gb", "v100-32gb", "v100-pcie-16gb", "v100-pcie-32gb"],
            ),
        ] {
            let e = find(n).unwrap_err();
            assert!(e.ambiguous, "{n}");
            assert_eq!(e.suggestions, want, "{n}");
            assert!(
                e.to_string().starts_with(&format!("ambiguous GPU {n:?}: ")),
                "{e}"
            );
        }
        // Form factors with the same memory: the least usable of them.
        assert_eq!(find("h100").unwrap().id, "h100-pcie");
        assert_eq!(find("H100").unwrap().id, "h100-pcie");
        // Exact ids and aliases still resolve; an unknown name stays unknown.
        assert_eq!(find("a100-80gb").unwrap().id, "a100-80gb");
        assert_eq!(find("rtx-a6000").unwrap().id, "rtx-a6000");
        assert!(!find("z9000").unwrap_err().ambiguous);
    }

    #[test]
    fn required_names_resolve() {
        let cases = [
            ("4090", "rtx-4090"),
            ("rtx-4090", "rtx-4090"),
            ("RTX 4090", "rtx-4090"),
            ("a100-40gb", "a100-40gb"),
            ("A100-SXM4-40GB", "a100-40gb"),
            ("a100 80gb", "a100-80gb"),
            ("A100-SXM4-80GB", "a100-80gb"),
            ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
            ("A100 80GB PCIe", "a100-pcie-80gb"),
            ("a100-pcie-40gb", "a100-pcie-40gb"),
            ("H100 80GB HBM3", "h100-sxm"),
            ("h100 pcie", "h100-pcie"),
            ("H100 NVL", "h100-nvl"),
            ("t4", "t4"),
            ("Tesla T4", "t4"),
            ("3090", "rtx-3090"),
            ("RTX 3090 Ti", "rtx-3090-ti"),
            ("3080", "rtx-3080-10gb"),
            ("rtx 3080", "rtx-3080-10gb"),
            ("3080 12GB", "rtx-3080-12gb"),
            ("3080 Ti", "rtx-3080-ti"),
            ("4060 Ti", "rtx-4060-ti-8gb"),
            ("4060 Ti 16GB", "rtx-4060-ti-16gb"),
            ("titan rtx", "titan-rtx"),
            ("Tesla V100-SXM2-32GB", "v100-32gb"),
            ("v100-pcie-32gb", "v100-pcie-32gb"),
            ("mi300x", "mi300x"),
            ("AMD Instinct MI300X", "mi300x"),
            ("MI250X", "mi250x"),
            ("mi325x", "mi325x"),
            ("7900 XTX", "rx-7900-xtx"),
            ("h200", "h200"),
            ("b200", "b200"),
            ("GB200", "gb200"),
            ("l40s", "l40s"),
            ("L4", "l4"),
            ("a10", "a10"),
            ("a10g", "a10g"),
            ("NVIDIA A10G", "a10g"),
            ("a6000", "rtx-a6000"),
            ("RTX A6000", "rtx-a6000"),
            ("RTX 6000 Ada", "rtx-6000-ada"),
            ("jetson orin nano", "jetson-orin-nano-8gb"),
            ("Jetson AGX Orin", "jetson-agx-orin-64gb"),
            ("xavier nx", "jetson-xavier-nx-8gb"),
            ("m1", "apple-m-8gb"),
            ("apple 16gb", "apple-m-16gb"),
            ("Apple M-series (16 GB)", "apple-m-16gb"),
            ("mac 64gb", "apple-m-64gb"),
        ];
        for (input, id) in cases {
            assert_eq!(find(input).map(|g| g.id), Ok(id), "{input}");
        }
    }

    #[test]
    fn names_in_logs_resolve() {
        let cases = [
            (
                "|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |",
                "a100-80gb",
            ),
            ("|   0  NVIDIA GeForce RTX 3080 Ti     Off |", "rtx-3080-ti"),
            (
                "|   0  NVIDIA GeForce RTX 3080        Off |",
                "rtx-3080-10gb",
            ),
            ("|   0  NVIDIA GH200 480GB             On  |", "gh200"),
            ("|   0  NVIDIA H100 80GB HBM3          On  |", "h100-sxm"),
        ];
        for (line, id) in cases {
            assert_eq!(find_in_text(line).map(|g| g.id), Some(id), "{line}");
        }
    }

    #[test]
    fn unknown_names_say_so() {
        let e = find("voodoo5").unwrap_err();
        assert!(e.to_string().contains("voodoo5"));
    }

    #[test]
    fn h100_reports_driver_memory_not_marketing() {
        assert_eq!(
            find("h100-sxm").unwrap().driver_total.display_mib(),
            "81559MiB"
        );
    }

    #[test]
    fn visible_total_names_the_card() {
        let g = by_visible_total("23.64 GiB".parse().unwrap());
        assert!(g.iter().any(|g| g.id == "rtx-4090"));
    }

    #[test]
    fn real_pytorch_totals_name_the_card() {
        let cases = [
            ("23.65 GiB", "rtx-4090"),
            ("31.37 GiB", "rtx-5090"),
            ("79.25 GiB", "a100-80gb"),
            ("79.26 GiB", "a100-80gb"),
            ("79.20 GiB", "h100-sxm"),
            ("14.75 GiB", "t4"),
            ("14.57 GiB", "t4"),
            ("21.99 GiB", "a10"),
            ("21.98 GiB", "a10"),
            ("255.98 GiB", "mi325x"),
            ("191.98 GiB", "mi300x"),
            ("191.69 GiB", "mi300x"),
            ("39.59 GiB", "a100-40gb"),
            ("23.59 GiB", "rtx-3090"),
            ("7.78 GiB", "rtx-3070"),
        ];
        for (total, id) in cases {
            let ids: Vec<_> = by_visible_total(total.parse().unwrap())
                .iter()
                .map(|g| g.id)
                .collect();
            assert_eq!(ids, [id], "{total}");
        }
    }

    #[test]
    fn mi250_total_names_both_gcd_variants() {
        let ids: Vec<_> = by_visible_total("63.98 GiB".parse().unwrap())
            .iter()
            .map(|g| g.id)
            .collect();
        assert_eq!(ids, ["mi250", "mi250x"]);
    }

    #[test]
    fn apple_plans_with_the_working_set() {
        let m8 = find("apple 8gb").unwrap();
        assert!(m8.unified);
        assert_eq!(m8.usable(), Bytes(5726630000));
        assert_eq!(m8.driver_total.display_mib(), "9288MiB");
        for g in GPUS.iter().filter(|g| g.vendor == Vendor::Apple) {
            assert!(g.visible.is_some(), "{}", g.id);
        }
    }

    #[test]
    fn ecc_and_driver_totals_follow_gpus_md() {
        assert_eq!(
            find("a6000").unwrap().driver_total.display_mib(),
            "46068MiB"
        );
        assert_eq!(find("t4").unwrap().driver_total.display_mib(), "15360MiB");
        assert_eq!(find("mi300x").unwrap().driver_total, Bytes(205822885888));
        assert_eq!(find("3090").unwrap().driver_total.display_mib(), "24576MiB");
        assert!(find("rtx-2070").unwrap().visible.is_none());
    }
}
