//! Property tests: no input reaches a panic (release builds keep overflow
//! checks, debug tests have them too), and every call ends quickly. Parsers
//! get arbitrary bytes and structured hostile inputs (huge numbers, wrong
//! types, claimed lengths beyond the bytes); `estimate` and `fit` get
//! arbitrary setups, validated or not, on catalogue models and on configs at
//! the limits.
#![allow(clippy::indexing_slicing, clippy::string_slice)] // test code: a bad index is a failed test

use std::time::{Duration, Instant};

use oomkit_estimate::checkpoint::{parse_header, parse_index};
use oomkit_estimate::image;
use oomkit_estimate::serve::VllmArgs;
use oomkit_estimate::{
    Attention, LoraTargets, Method, ModelConfig, Offload, Optimizer, Precision, Quant, Setup, Task,
    catalogue, estimate, fit, gguf,
};
use proptest::prelude::*;

/// One call may take this long (debug build, a loaded machine).
const QUICK: Duration = Duration::from_secs(2);

fn quick<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    assert!(t.elapsed() < QUICK, "{what} took {:?}", t.elapsed());
    out
}

/// Numbers that find overflows: small, powers of two near the limits, 2^32,
/// 2^63, u64::MAX.
fn number() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..4,
        1u64..100_000,
        (0u32..64).prop_map(|k| 1u64 << k),
        (0u32..64).prop_map(|k| (1u64 << k).wrapping_sub(1)),
        Just(u64::MAX),
        Just(1_000_000_000_000),
        any::<u64>(),
    ]
}

/// A JSON value for a config key: integers of every size, wrong types.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    prop_oneof![
        4 => number().prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        1 => "[a-z_]{0,12}".prop_map(Value::from),
        1 => any::<bool>().prop_map(Value::from),
        1 => Just(Value::Null),
        1 => prop::collection::vec("[a-z_]{0,20}", 0..8).prop_map(Value::from),
    ]
}

const KEYS: &[&str] = &[
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "type_vocab_size",
    "n_positions",
    "num_local_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "n_shared_experts",
    "first_k_dense_replace",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "sliding_window",
    "sliding_window_pattern",
    "layer_types",
    "tie_word_embeddings",
    "hidden_act",
];

const TYPES: &[&str] = &[
    "llama",
    "gpt2",
    "bert",
    "qwen",
    "qwen2",
    "gemma2",
    "gemma3_text",
    "falcon",
    "phi",
    "deepseek_v3",
    "mixtral",
    "gpt_oss",
];

/// A config.json object: a plausible base with hostile overrides.
fn hf_config() -> impl Strategy<Value = String> {
    (
        prop::sample::select(TYPES),
        prop::collection::vec((prop::sample::select(KEYS), json_value()), 0..10),
        any::<bool>(),
    )
        .prop_map(|(mt, overrides, gemma3)| {
            let mut v = serde_json::json!({
                "model_type": mt,
                "hidden_size": 256,
                "num_hidden_layers": 4,
                "num_attention_heads": 8,
                "vocab_size": 1000,
            });
            if let Some(o) = v.as_object_mut() {
                for (k, val) in overrides {
                    o.insert(k.to_string(), val);
                }
            }
            if gemma3 {
                serde_json::json!({"model_type": "gemma3", "text_config": v,
                    "vision_config": {"hidden_size": u64::MAX, "num_hidden_layers": 1u64 << 40}})
                .to_string()
            } else {
                v.to_string()
            }
        })
}

fn gguf_string(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

/// A GGUF header: real structure, hostile counts, lengths and values.
fn gguf_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        number(),
        number(),
        prop::collection::vec((prop::sample::select(KEYS), 0u32..14, number()), 0..8),
        prop::collection::vec(
            (0u32..10, prop::collection::vec(number(), 0..4), 0u32..40),
            0..4,
        ),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(n_tensors, n_kv, kvs, tensors, tail)| {
            let mut b = b"GGUF".to_vec();
            b.extend(3u32.to_le_bytes());
            b.extend(n_tensors.to_le_bytes());
            b.extend(n_kv.to_le_bytes());
            gguf_string(&mut b, "general.architecture");
            b.extend(8u32.to_le_bytes());
            gguf_string(&mut b, "llama");
            for (k, t, v) in kvs {
                gguf_string(&mut b, &format!("llama.{k}"));
                b.extend(t.to_le_bytes());
                b.extend(v.to_le_bytes());
            }
            for (nd, dims, t) in tensors {
                gguf_string(&mut b, "blk.0.w");
                b.extend(nd.to_le_bytes());
                for d in dims {
                    b.extend(d.to_le_bytes());
                }
                b.extend(t.to_le_bytes());
                b.extend(0u64.to_le_bytes());
            }
            b.extend(tail);
            b
        })
}

fn task() -> impl Strategy<Value = Task> {
    prop::sample::select(vec![Task::Infer, Task::Train])
}

/// Any setup: each size from [`number`], so most are out of range.
fn setup() -> impl Strategy<Value = Setup> {
    (
        (
            task(),
            prop::sample::select(vec![Method::Full, Method::Lora, Method::Qlora]),
            prop::sample::select(vec![
                Precision::Fp32,
                Precision::Fp16,
                Precision::Bf16,
                Precision::MixedFp16,
                Precision::MixedBf16,
            ]),
            prop::sample::select(vec![
                Quant::None,
                Quant::Int8,
                Quant::Nf4,
                Quant::Nf4Dq,
                Quant::Int4,
                Quant::Fp8,
                Quant::Mxfp4,
            ]),
            prop::sample::select(vec![
                Optimizer::Adamw,
                Optimizer::Adamw8bit,
                Optimizer::Sgd,
                Optimizer::Adafactor,
                Optimizer::Lion,
            ]),
            prop::sample::select(vec![Attention::Eager, Attention::Sdpa, Attention::Flash]),
            prop::sample::select(vec![Offload::None, Offload::Optimizer, Offload::Params]),
        ),
        (number(), number(), number(), number(), number()),
        (
            number(),
            number(),
            number(),
            0u8..6,
            any::<bool>(),
            any::<bool>(),
        ),
        prop::sample::select(vec![
            "q,v",
            "all-linear",
            "",
            "x",
            "gate,up,down",
            "q_a,kv_b",
        ]),
    )
        .prop_map(
            |(
                (task, method, precision, quant, optimizer, attention, offload),
                (batch, seq, new_tokens, grad_accum, lora_rank),
                (gpus, tp, pp, zero, ckpt, foreach),
                targets,
            )| Setup {
                task,
                method,
                precision,
                quant,
                optimizer,
                attention,
                offload,
                batch,
                seq,
                new_tokens,
                grad_accum,
                lora_rank,
                gpus,
                tp,
                pp,
                zero,
                grad_checkpointing: ckpt,
                foreach,
                lora_targets: LoraTargets::parse(targets),
                ..Setup::default()
            },
        )
}

/// Shrinks a setup's sizes into the accepted ranges, so that estimates at
/// the edges (not just errors) are exercised.
fn in_range(mut s: Setup) -> Setup {
    s.seq = s.seq.clamp(1, 1 << 24);
    s.new_tokens = if s.task == Task::Infer {
        s.new_tokens % (1 << 24)
    } else {
        0
    };
    s.batch = (s.batch % (1 << 20))
        .max(1)
        .min((1u64 << 32) / (s.seq + s.new_tokens));
    s.grad_accum = s.grad_accum.clamp(1, 1 << 20);
    s.lora_rank = s.lora_rank.clamp(1, 1 << 16);
    s.tp = 1 << (s.tp % 4);
    s.pp = 1 << (s.pp % 3);
    s.gpus = s.tp * s.pp * (s.gpus % 8).max(1);
    s.zero %= 4;
    if s.offload == Offload::Params {
        s.zero = 3;
    }
    if s.task == Task::Train && s.method == Method::Full {
        s.quant = Quant::None;
    }
    if s.lora_targets == LoraTargets::Names(Vec::new()) {
        s.lora_targets = LoraTargets::AllLinear;
    }
    s
}

/// Catalogue models and configs at the limits.
fn model() -> impl Strategy<Value = ModelConfig> {
    let ids: Vec<&str> = catalogue::MODELS.iter().map(|(id, _)| *id).collect();
    prop_oneof![
        prop::sample::select(ids).prop_map(|id| catalogue::find(id).expect("catalogue")),
        Just(huge_model()),
        Just(huge_moe()),
    ]
}

/// A dense model at the largest accepted widths (~10^15 parameters).
fn huge_model() -> ModelConfig {
    ModelConfig::from_hf_json(
        "huge",
        r#"{"model_type":"llama","hidden_size":1048576,"num_hidden_layers":60,"num_attention_heads":8192,"num_key_value_heads":8192,"head_dim":128,"intermediate_size":4194304,"vocab_size":16777216,"max_position_embeddings":1000}"#,
    )
    .expect("at the limits")
}

/// An MoE model with many layers and experts within the limits.
fn huge_moe() -> ModelConfig {
    ModelConfig::from_hf_json(
        "huge-moe",
        r#"{"model_type":"deepseek_v3","hidden_size":4096,"num_hidden_layers":60000,"num_attention_heads":128,"vocab_size":16777216,"n_routed_experts":16384,"num_experts_per_tok":16384,"moe_intermediate_size":64,"n_shared_experts":2,"first_k_dense_replace":3,"kv_lora_rank":65536,"q_lora_rank":65536,"qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128}"#,
    )
    .expect("at the limits")
}

fn check_estimate(cfg: &ModelConfig, s: &Setup) {
    let Ok(s) = s.clone().validate() else {
        // Unvalidated setups go straight in too: an error, never a panic.
        let _ = quick("estimate (unvalidated)", || estimate(cfg, s));
        return;
    };
    let Ok(est) = quick("estimate", || estimate(cfg, &s)) else {
        return;
    };
    assert!(est.peak_allocated_bytes <= est.peak_reserved_bytes);
    assert!(est.peak_reserved_bytes <= est.device_used_bytes);
    assert!(est.device_used_bytes.get() <= oomkit_estimate::model::MAX_BYTES);
    let gpu = oomkit_core::gpus::find("h100-sxm").expect("gpu");
    let f = quick("fit", || fit::fit(cfg, &s, gpu, &est));
    assert_eq!(f.fits, est.device_used_bytes <= f.usable_bytes);
    let _ = oomkit_estimate::render::human(cfg, &s, &est, Some(&f));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn gguf_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = quick("gguf", || gguf::parse(&bytes, "x.gguf"));
        let mut magic = b"GGUF\x03\0\0\0".to_vec();
        magic.extend(&bytes);
        let _ = quick("gguf", || gguf::parse(&magic, "x.gguf"));
    }

    #[test]
    fn gguf_structured(bytes in gguf_bytes()) {
        let _ = quick("gguf", || gguf::parse(&bytes, "x.gguf"));
    }

    #[test]
    fn safetensors_header_arbitrary(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = quick("header", || parse_header(&bytes));
        let mut prefix = [0u8; 8];
        for (p, b) in prefix.iter_mut().zip(&bytes) {
            *p = *b;
        }
        let _ = oomkit_estimate::checkpoint::header_len(prefix);
    }

    #[test]
    fn safetensors_header_huge_numbers(
        tensors in prop::collection::vec((prop::collection::vec(number(), 0..4), number(), number(), "[A-Z0-9]{1,5}"), 0..6)
    ) {
        let mut o = serde_json::Map::new();
        for (i, (shape, a, b, dtype)) in tensors.into_iter().enumerate() {
            o.insert(format!("t{i}"), serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [a, b]}));
        }
        let text = serde_json::Value::Object(o).to_string();
        if let Ok(c) = quick("header", || parse_header(text.as_bytes())) {
            prop_assert!(c.bytes_by_dtype.values().all(|b| *b <= c.bytes));
        }
    }

    #[test]
    fn index_arbitrary(bytes in prop::collection::vec(any::<u8>(), 0..256), total in json_value(), names in prop::collection::vec(json_value(), 0..4)) {
        let _ = quick("index", || parse_index(&bytes));
        let map: serde_json::Map<String, serde_json::Value> =
            names.into_iter().enumerate().map(|(i, v)| (format!("w{i}"), v)).collect();
        let j = serde_json::json!({"metadata": {"total_size": total}, "weight_map": map}).to_string();
        if let Ok(ix) = quick("index", || parse_index(j.as_bytes())) {
            let _ = oomkit_estimate::checkpoint::Checkpoint::from_index(&ix, Some("bfloat16"), false);
        }
    }

    #[test]
    fn hf_config_arbitrary_text(text in ".{0,200}") {
        let _ = quick("config", || ModelConfig::from_hf_json("x", &text));
    }

    #[test]
    fn hf_config_hostile_numbers(text in hf_config(), s in setup()) {
        if let Ok(cfg) = quick("config", || ModelConfig::from_hf_json("x", &text)) {
            // Whatever parsed is within the limits, so every quantity is finite.
            prop_assert!(cfg.params() <= oomkit_estimate::model::limits::PARAMS);
            check_estimate(&cfg, &in_range(s));
        }
    }

    #[test]
    fn estimate_any_setup(cfg in model(), s in setup()) {
        check_estimate(&cfg, &s);
        check_estimate(&cfg, &in_range(s));
    }

    #[test]
    fn serve_any_arguments(cfg in model(), s in setup(), len in number(), tokens in number(), seqs in number()) {
        let s = Setup { task: Task::Infer, ..in_range(s) };
        let a = VllmArgs {
            gpu_memory_utilization: 0.9,
            max_model_len: len,
            max_num_batched_tokens: tokens,
            max_num_seqs: seqs,
        };
        if let Ok(s) = s.validate() && s.check_vllm(&cfg, &a).is_ok() {
            let r = quick("vllm", || oomkit_estimate::serve::vllm(&cfg, &s, &a, oomkit_core::Bytes::gib(80)));
            prop_assert!(r.kv_pool_bytes <= r.requested_bytes);
        }
    }

    #[test]
    fn bare_any_count(p in number(), layers in prop::option::of(number()), hidden in prop::option::of(number()), vocab in prop::option::of(number()), intermediate in prop::option::of(number())) {
        let shape = oomkit_estimate::BareShape { layers, hidden, vocab, intermediate, ..Default::default() };
        if let Ok(cfg) = quick("bare", || ModelConfig::bare(p, &shape)) {
            check_estimate(&cfg, &Setup::default());
        }
    }

    #[test]
    fn image_any_size(i in 0..oomkit_estimate::catalogue::IMAGE_MODELS.len(), w in number(), h in number(), n in number(), eager in any::<bool>()) {
        let m = image::Model::load(&oomkit_estimate::catalogue::IMAGE_MODELS[i]);
        let mut s = image::ImageSetup::default_for(&m);
        let k = m.size_multiple();
        s.width = w % (image::MAX_SIDE * 2) / k * k;
        s.height = h % (image::MAX_SIDE * 2) / k * k;
        s.images = n % (image::MAX_IMAGES * 2);
        if eager {
            s.attention = Attention::Eager;
        }
        if image::validate(&m, &s).is_ok() {
            let est = quick("image estimate", || image::estimate(&m, &s));
            prop_assert!(est.estimate.device_used_bytes.get() > 0);
            let gpu = oomkit_core::gpus::find("rtx-4090").expect("gpu");
            let _ = quick("image fit", || image::fit(&m, &s, gpu));
        }
    }
}

/// Deeply nested GGUF arrays end in an error naming the limit, not a stack
/// overflow.
#[test]
fn gguf_nested_arrays_hit_the_depth_limit() {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    gguf_string(&mut b, "k");
    b.extend(9u32.to_le_bytes());
    for _ in 0..100_000 {
        b.extend(9u32.to_le_bytes());
        b.extend(1u64.to_le_bytes());
    }
    let e = gguf::parse(&b, "x").expect_err("too deep");
    assert!(e.to_string().contains("nested more than 8 deep"), "{e}");
}

/// The image corner: every pipeline at the largest side and image count,
/// eager attention in fp32, estimated and fitted without overflow.
#[test]
fn image_models_at_the_limits() {
    for e in oomkit_estimate::catalogue::IMAGE_MODELS {
        let m = image::Model::load(e);
        let k = m.size_multiple();
        let s = image::ImageSetup {
            width: image::MAX_SIDE / k * k,
            height: image::MAX_SIDE / k * k,
            images: image::MAX_IMAGES,
            precision: Precision::Fp32,
            attention: Attention::Eager,
            ..image::ImageSetup::default_for(&m)
        };
        image::validate(&m, &s).expect("at the limits");
        let est = quick("image estimate", || image::estimate(&m, &s));
        assert!(
            est.estimate.device_used_bytes > oomkit_core::Bytes::gib(80),
            "{}",
            m.id
        );
        let gpu = oomkit_core::gpus::find("rtx-4090").expect("gpu");
        let f = quick("image fit", || image::fit(&m, &s, gpu));
        assert!(!f.fits);
    }
}

/// Found by `estimate_any_setup`: Gemma-2 falls back to eager attention
/// (soft-capping), and the size gate used to run before that fallback, so
/// batch × heads × seq² fp32 scores overflowed a phase sum.
#[test]
fn the_size_gate_sees_gemma2_eager_fallback() {
    let cfg = catalogue::find("google/gemma-2-27b").unwrap();
    let s = Setup {
        task: Task::Train,
        precision: Precision::Fp32,
        batch: 256,
        seq: 1 << 24,
        grad_checkpointing: true,
        ..Setup::default()
    };
    assert!(estimate(&cfg, &s).is_err());
}
