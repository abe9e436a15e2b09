//! Parameter counts walked from the component configs, module by module as
//! diffusers and transformers build them (sources in the parent module).

use serde_json::Value;

use super::{list, per_level, strs, u};

/// A parameter tally: the total and the largest single module (what
/// sequential offload keeps on the GPU at once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// All parameters.
    pub total: u64,
    /// Parameters of the largest leaf module (one linear, conv or embedding).
    pub largest: u64,
    /// Parameters in `nn.Linear` layers (what bitsandbytes and torchao
    /// quantize).
    pub linear: u64,
    /// Output rows of those linears (one fp32 scale each for int8 and fp8).
    pub rows: u64,
    /// Parameters of the largest `nn.Linear` (what a quantized forward
    /// dequantizes at once).
    pub largest_linear: u64,
}

impl Count {
    fn add(&mut self, n: u64) {
        self.total += n;
        self.largest = self.largest.max(n);
    }
    fn lin(&mut self, i: u64, o: u64, bias: bool) {
        let n = i * o + if bias { o } else { 0 };
        self.add(n);
        self.linear += n;
        self.rows += o;
        self.largest_linear = self.largest_linear.max(n);
    }
    fn conv(&mut self, i: u64, o: u64, k: u64) {
        self.add(i * o * k * k + o);
    }
    fn norm(&mut self, c: u64) {
        self.add(2 * c);
    }
}

/// diffusers `ResnetBlock2D`: GroupNorm, 3×3 conv, (time projection), GroupNorm,
/// 3×3 conv, 1×1 shortcut when the channels change.
fn resnet(c: &mut Count, i: u64, o: u64, temb: u64) {
    c.norm(i);
    c.conv(i, o, 3);
    if temb > 0 {
        c.lin(temb, o, true);
    }
    c.norm(o);
    c.conv(o, o, 3);
    if i != o {
        c.conv(i, o, 1);
    }
}

/// diffusers `Transformer2DModel` with `n` `BasicTransformerBlock`s: GroupNorm,
/// proj_in, per block self-attention (q,k,v without bias, out with bias),
/// cross-attention (k,v from `cross`), GEGLU feed-forward (C→8C, 4C→C), three
/// LayerNorms; proj_out. proj_in/proj_out are 1×1 convs (SD 1.5) unless the
/// config sets `use_linear_projection` (SDXL): same count, but only linears
/// are quantized.
fn transformer2d(c: &mut Count, ch: u64, n: u64, cross: u64, linear_proj: bool) {
    c.norm(ch);
    proj(c, ch, linear_proj);
    for _ in 0..n {
        c.norm(ch);
        for _ in 0..3 {
            c.lin(ch, ch, false);
        }
        c.lin(ch, ch, true);
        c.norm(ch);
        c.lin(ch, ch, false);
        c.lin(cross, ch, false);
        c.lin(cross, ch, false);
        c.lin(ch, ch, true);
        c.norm(ch);
        c.lin(ch, 8 * ch, true);
        c.lin(4 * ch, ch, true);
    }
    proj(c, ch, linear_proj);
}

/// A channel projection: `nn.Linear` or a 1×1 `nn.Conv2d`.
fn proj(c: &mut Count, ch: u64, linear: bool) {
    if linear {
        c.lin(ch, ch, true);
    } else {
        c.conv(ch, ch, 1);
    }
}

/// `UNet2DConditionModel` (diffusers `unet_2d_condition.py`), from its config.
pub fn unet_params(v: &Value) -> Count {
    let boc = list(v, "block_out_channels");
    let levels = boc.len();
    let lpb = u(v, "layers_per_block");
    let cross = u(v, "cross_attention_dim");
    let tl = per_level(v, "transformer_layers_per_block", levels, 1);
    let down = strs(v, "down_block_types");
    let up = strs(v, "up_block_types");
    let c0 = boc.first().copied().unwrap_or(0);
    let temb = 4 * c0;
    let lp = v.get("use_linear_projection").and_then(Value::as_bool) == Some(true);
    let mut c = Count::default();
    c.conv(u(v, "in_channels"), c0, 3);
    c.lin(c0, temb, true);
    c.lin(temb, temb, true);
    if v.get("addition_embed_type").and_then(Value::as_str) == Some("text_time") {
        c.lin(u(v, "projection_class_embeddings_input_dim"), temb, true);
        c.lin(temb, temb, true);
    }
    let mut out = c0;
    for (i, (t, &o)) in down.iter().zip(&boc).enumerate() {
        let inp = out;
        out = o;
        for j in 0..lpb {
            resnet(&mut c, if j == 0 { inp } else { o }, o, temb);
            if t.starts_with("CrossAttn") {
                transformer2d(&mut c, o, tl.get(i).copied().unwrap_or(1), cross, lp);
            }
        }
        if i + 1 < levels {
            c.conv(o, o, 3);
        }
    }
    let last = boc.last().copied().unwrap_or(0);
    resnet(&mut c, last, last, temb);
    transformer2d(&mut c, last, tl.last().copied().unwrap_or(1), cross, lp);
    resnet(&mut c, last, last, temb);
    let rev: Vec<u64> = boc.iter().rev().copied().collect();
    let rev_tl: Vec<u64> = tl.iter().rev().copied().collect();
    let mut prev = last;
    for (i, (t, &o)) in up.iter().zip(&rev).enumerate() {
        let inp = rev.get(i + 1).copied().unwrap_or(o);
        for j in 0..=lpb {
            let skip = if j == lpb { inp } else { o };
            let rin = if j == 0 { prev } else { o };
            resnet(&mut c, rin + skip, o, temb);
            if t.starts_with("CrossAttn") {
                transformer2d(&mut c, o, rev_tl.get(i).copied().unwrap_or(1), cross, lp);
            }
        }
        if i + 1 < levels {
            c.conv(o, o, 3);
        }
        prev = o;
    }
    c.norm(c0);
    c.conv(c0, u(v, "out_channels"), 3);
    c
}

/// VAE `Attention` in the mid block: GroupNorm, q/k/v/out linears with bias.
fn vae_attn(c: &mut Count, ch: u64) {
    c.norm(ch);
    for _ in 0..4 {
        c.lin(ch, ch, true);
    }
}

/// `AutoencoderKL` (encoder + decoder + quant convs), from its config. The
/// whole VAE is loaded even though text-to-image only decodes.
pub fn vae_params(v: &Value) -> Count {
    let boc = list(v, "block_out_channels");
    let n = boc.len();
    let lpb = u(v, "layers_per_block");
    let lat = u(v, "latent_channels");
    let c0 = boc.first().copied().unwrap_or(0);
    let last = boc.last().copied().unwrap_or(0);
    let mut c = Count::default();
    // Encoder.
    c.conv(u(v, "in_channels"), c0, 3);
    let mut out = c0;
    for (i, &o) in boc.iter().enumerate() {
        for j in 0..lpb {
            resnet(&mut c, if j == 0 { out } else { o }, o, 0);
        }
        if i + 1 < n {
            c.conv(o, o, 3);
        }
        out = o;
    }
    resnet(&mut c, last, last, 0);
    vae_attn(&mut c, last);
    resnet(&mut c, last, last, 0);
    c.norm(last);
    c.conv(last, 2 * lat, 3);
    if v.get("use_quant_conv").and_then(Value::as_bool) != Some(false) {
        c.conv(2 * lat, 2 * lat, 1);
    }
    if v.get("use_post_quant_conv").and_then(Value::as_bool) != Some(false) {
        c.conv(lat, lat, 1);
    }
    // Decoder.
    c.conv(lat, last, 3);
    resnet(&mut c, last, last, 0);
    vae_attn(&mut c, last);
    resnet(&mut c, last, last, 0);
    let mut prev = last;
    for (i, &o) in boc.iter().rev().enumerate() {
        for j in 0..=lpb {
            resnet(&mut c, if j == 0 { prev } else { o }, o, 0);
        }
        if i + 1 < n {
            c.conv(o, o, 3);
        }
        prev = o;
    }
    c.norm(c0);
    c.conv(c0, u(v, "out_channels"), 3);
    c
}

/// CLIP encoder layers (text and vision towers alike): two LayerNorms,
/// q/k/v/out and fc1/fc2, all with bias.
fn clip_layers(c: &mut Count, h: u64, f: u64, layers: u64) {
    for _ in 0..layers {
        c.norm(h);
        for _ in 0..4 {
            c.lin(h, h, true);
        }
        c.norm(h);
        c.lin(h, f, true);
        c.lin(f, h, true);
    }
}

/// transformers `CLIPTextModel` (+ `text_projection` without bias for
/// `CLIPTextModelWithProjection`): token and position embeddings, per layer two
/// LayerNorms, q/k/v/out and fc1/fc2 with bias; the final LayerNorm.
pub fn clip_text_params(v: &Value) -> Count {
    let h = u(v, "hidden_size");
    let f = u(v, "intermediate_size");
    let mut c = Count::default();
    c.add(u(v, "vocab_size") * h);
    c.add(u(v, "max_position_embeddings") * h);
    clip_layers(&mut c, h, f, u(v, "num_hidden_layers"));
    c.norm(h);
    if strs(v, "architectures")
        .iter()
        .any(|a| a.ends_with("WithProjection"))
    {
        c.lin(h, u(v, "projection_dim"), false);
    }
    c
}

/// diffusers `StableDiffusionSafetyChecker` (`pipelines/stable_diffusion/
/// safety_checker.py`): a transformers `CLIPVisionModel` — class embedding,
/// patch conv (no bias), (image/patch)² + 1 position embeddings, pre- and
/// post-LayerNorm, per layer two LayerNorms, q/k/v/out and fc1/fc2 with bias —
/// plus `visual_projection` (no bias) and the 17 + 3 concept embeddings and
/// their 17 + 3 weights.
pub fn safety_checker_params(v: &Value) -> Count {
    let vc = v.get("vision_config").unwrap_or(&Value::Null);
    let h = u(vc, "hidden_size");
    let f = u(vc, "intermediate_size");
    let proj = u(v, "projection_dim");
    let mut c = Count::default();
    c.add(h);
    c.add(u(vc, "num_channels") * h * u(vc, "patch_size").pow(2));
    c.add(vision_tokens(vc) * h);
    c.norm(h);
    clip_layers(&mut c, h, f, u(vc, "num_hidden_layers"));
    c.norm(h);
    c.lin(h, proj, false);
    c.add((17 + 3) * proj + 17 + 3);
    c
}

/// CLIP vision tokens: one per patch plus the class token.
pub(super) fn vision_tokens(vc: &Value) -> u64 {
    let side = u(vc, "image_size") / u(vc, "patch_size").max(1);
    side * side + 1
}

/// transformers `T5EncoderModel`: the shared embedding, per layer q/k/v/o
/// without bias (inner = heads·d_kv), gated FF (wi_0, wi_1, wo) and two RMS
/// norms (weight only); relative-position buckets in the first layer; the
/// final norm.
pub fn t5_encoder_params(v: &Value) -> Count {
    let d = u(v, "d_model");
    let inner = u(v, "num_heads") * u(v, "d_kv");
    let ff = u(v, "d_ff");
    let gated = v.get("is_gated_act").and_then(Value::as_bool) == Some(true);
    let mut c = Count::default();
    c.add(u(v, "vocab_size") * d);
    for l in 0..u(v, "num_layers") {
        c.add(d);
        for _ in 0..3 {
            c.lin(d, inner, false);
        }
        c.lin(inner, d, false);
        if l == 0 {
            c.add(u(v, "relative_attention_num_buckets") * u(v, "num_heads"));
        }
        c.add(d);
        c.lin(d, ff, false);
        if gated {
            c.lin(d, ff, false);
        }
        c.lin(ff, d, false);
    }
    c.add(d);
    c
}

/// `FluxTransformer2DModel` (diffusers `transformer_flux.py`): time/guidance/
/// pooled-text embedders, context and x embedders, `num_layers` dual-stream
/// blocks (two AdaLayerNormZero, image and context q/k/v/out with bias,
/// per-head RMS q/k norms, two GELU MLPs 4×), `num_single_layers`
/// single-stream blocks (AdaLayerNormZeroSingle, q/k/v, proj_mlp 4×,
/// proj_out from 5×), AdaLayerNormContinuous and proj_out.
pub fn flux_params(v: &Value) -> Count {
    let hd = u(v, "attention_head_dim");
    let inner = u(v, "num_attention_heads") * hd;
    let mut c = Count::default();
    let embedders = if v.get("guidance_embeds").and_then(Value::as_bool) == Some(true) {
        2
    } else {
        1
    };
    for _ in 0..embedders {
        c.lin(256, inner, true);
        c.lin(inner, inner, true);
    }
    c.lin(u(v, "pooled_projection_dim"), inner, true);
    c.lin(inner, inner, true);
    c.lin(u(v, "joint_attention_dim"), inner, true);
    c.lin(u(v, "in_channels"), inner, true);
    for _ in 0..u(v, "num_layers") {
        c.lin(inner, 6 * inner, true);
        c.lin(inner, 6 * inner, true);
        for _ in 0..8 {
            c.lin(inner, inner, true);
        }
        for _ in 0..4 {
            c.add(hd);
        }
        for _ in 0..2 {
            c.lin(inner, 4 * inner, true);
            c.lin(4 * inner, inner, true);
        }
    }
    for _ in 0..u(v, "num_single_layers") {
        c.lin(inner, 3 * inner, true);
        c.lin(inner, 4 * inner, true);
        c.lin(5 * inner, inner, true);
        for _ in 0..3 {
            c.lin(inner, inner, true);
        }
        c.add(hd);
        c.add(hd);
    }
    c.lin(inner, 2 * inner, true);
    let p = u(v, "patch_size").max(1);
    c.lin(inner, p * p * u(v, "in_channels"), true);
    c
}
