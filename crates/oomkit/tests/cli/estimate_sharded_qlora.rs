//! QLoRA under FSDP and ZeRO-3 through the binary: bitsandbytes' 4-bit
//! quantization state is a module attribute, not a parameter, so neither
//! shards nor offloads it and every GPU keeps all of it.

use super::support::cli;

fn weights(quant: &str, gpus: &str, offload: &str) -> u64 {
    weights_with(quant, gpus, offload, &["--fsdp", "--fsdp-version", "1"])
}

fn weights_with(quant: &str, gpus: &str, offload: &str, sharding: &[&str]) -> u64 {
    let mut args = vec![
        "estimate",
        "meta-llama/Llama-3.1-8B",
        "--task",
        "train",
        "--method",
        "qlora",
        "--quant",
        quant,
        "--precision",
        "bf16",
        "--batch",
        "1",
        "--seq",
        "1024",
        "--grad-checkpointing",
        "--gpus",
        gpus,
        "--offload",
        offload,
        "--format",
        "json",
    ];
    args.extend_from_slice(sharding);
    let v = cli(&args).run().code(0).json();
    v["components"]["weights_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("weights_bytes in {v}"))
}

/// NF4 keeps an fp32 absmax per 64 weights (0.5 bit a weight); double
/// quantization a uint8 per 64 and an fp32 per 256 blocks (0.127 bit).
/// The difference is the state of all 6,979,321,856 block-linear weights of
/// Llama-3.1-8B on every GPU, with or without CPU offload and whatever the
/// number of GPUs: the gathered blocks are 4-bit in both.
#[test]
fn fsdp_keeps_the_whole_4bit_quant_state_on_every_gpu() {
    let lin: u64 = 6_979_321_856;
    let diff = lin * 500 / 8000 - lin * 127 / 8000;
    for gpus in ["2", "8"] {
        for offload in ["none", "params"] {
            let nf4 = weights("nf4", gpus, offload);
            let dq = weights("nf4-dq", gpus, offload);
            assert_eq!(nf4 - dq, diff, "{gpus} GPUs, offload {offload}");
        }
    }
    // Offloaded, what stays is the state plus the gathered units: more than
    // the state alone, less than the unsharded 4-bit model.
    let off = weights("nf4", "8", "params");
    assert!(off > lin / 16, "{off}");
    assert!(off < lin / 2, "{off}");
}

/// ZeRO-3 partitions parameters only: with parameter offload the state is
/// all that stays of the base weights (besides persistent parameters and
/// the gathered ones, which do not depend on the format); without offload it
/// is whole next to the 1/8 partition.
#[test]
fn zero3_keeps_the_whole_4bit_quant_state_on_every_gpu() {
    let lin: u64 = 6_979_321_856;
    let diff = lin * 500 / 8000 - lin * 127 / 8000;
    let z3 = ["--zero", "3"];
    let off = weights_with("nf4", "8", "params", &z3) - weights_with("nf4-dq", "8", "params", &z3);
    assert_eq!(off, diff);
    let on = weights_with("nf4", "8", "none", &z3) - weights_with("nf4-dq", "8", "none", &z3);
    assert!(on >= diff, "{on} < {diff}");
}
