//! The JSON output of `oomkit estimate` (the contract in `docs/estimate.md`),
//! built in one place for every kind of estimate: text models
//! ([`Json::text`]), image pipelines ([`Json::image`]), vLLM's pool
//! ([`crate::serve::Served::json`]) and llama.cpp
//! ([`crate::llamacpp::Outcome::json`]). Every kind has the same fields, in
//! the same order; a kind adds its detail (`image`, `serve` or `llamacpp`)
//! before `fit`.

use std::borrow::Cow;

use oomkit_core::Bytes;
use serde::Serialize;

use crate::fit::Fit;
use crate::image::{self, ImageEstimate, ImageSetup};
use crate::{Components, Estimate, ModelConfig, Setup};

/// The contract's version: 2 added `assumed`.
pub const VERSION: u32 = 2;

/// One estimate's JSON. `M`, `S` and `F` are the kind's `model`, `setup`
/// and `fit` objects.
#[derive(Serialize)]
pub struct Json<'a, M, S, F> {
    /// The contract's version ([`VERSION`]).
    pub version: u32,
    /// The engine, where it is not PyTorch (`llama.cpp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<&'static str>,
    /// The model.
    pub model: M,
    /// The setup it was estimated for.
    pub setup: S,
    /// Memory by component at the peak.
    pub components: Cow<'a, Components>,
    /// `torch.cuda.max_memory_allocated()` (PyTorch engines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_allocated_bytes: Option<Bytes>,
    /// `torch.cuda.max_memory_reserved()` (PyTorch engines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_reserved_bytes: Option<Bytes>,
    /// What nvidia-smi shows in use.
    pub device_used_bytes: Bytes,
    /// Where the peak happens (PyTorch engines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_phase: Option<&'a str>,
    /// Warnings that did not stop the estimate; `[]` when none.
    pub warnings: &'a [String],
    /// What the estimate assumed where the user said nothing (text models
    /// under transformers); `[]` when nothing or another kind.
    pub assumed: &'a [crate::versions::Assumption],
    /// The kind's own detail, under its name.
    #[serde(flatten)]
    pub detail: Option<Detail<'a>>,
    /// The fit on the GPU asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<F>,
}

/// A kind's own detail.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Detail<'a> {
    /// Image pipelines: parameters per loaded component and the weights each
    /// keeps on the GPU at the peak.
    Image(ImageDetail<'a>),
    /// vLLM: the pool.
    Serve(&'a crate::serve::ServeReport),
    /// llama.cpp: the buffers.
    Llamacpp(&'a crate::llamacpp::Report),
}

/// `image`.
#[derive(Serialize)]
pub struct ImageDetail<'a> {
    params: &'a [image::ParamRow],
    weights: &'a [image::Part],
}

/// `model` for a text model: the counts, then the config.
#[derive(Serialize)]
pub struct TextModel<'a> {
    params: u64,
    trainable_params: u64,
    #[serde(flatten)]
    config: &'a ModelConfig,
}

/// `model` for an image pipeline.
#[derive(Serialize)]
pub struct ImageModel {
    id: &'static str,
    pipeline: image::Pipeline,
    params: u64,
    trainable_params: u64,
}

/// `setup` for an image pipeline: `task` as for text models, then the image
/// switches.
#[derive(Serialize)]
pub struct ImageSetupJson<'a> {
    task: &'static str,
    #[serde(flatten)]
    setup: &'a ImageSetup,
}

impl<'a, M, S, F> Json<'a, M, S, F> {
    /// The PyTorch shape: the peaks and phase from `est`.
    fn pytorch(
        model: M,
        setup: S,
        est: &'a Estimate,
        fit: Option<F>,
        warnings: &'a [String],
    ) -> Self {
        Json {
            version: VERSION,
            engine: None,
            model,
            setup,
            components: Cow::Borrowed(&est.components),
            peak_allocated_bytes: Some(est.peak_allocated_bytes),
            peak_reserved_bytes: Some(est.peak_reserved_bytes),
            device_used_bytes: est.device_used_bytes,
            peak_phase: Some(est.peak_phase),
            warnings,
            assumed: &[],
            detail: None,
            fit,
        }
    }
}

impl<'a> Json<'a, TextModel<'a>, &'a Setup, &'a Fit> {
    /// A text model under transformers.
    pub fn text(
        cfg: &'a ModelConfig,
        setup: &'a Setup,
        est: &'a Estimate,
        fit: Option<&'a Fit>,
        warnings: &'a [String],
        assumed: &'a [crate::versions::Assumption],
    ) -> Self {
        let model = TextModel {
            params: est.params,
            trainable_params: est.trainable_params,
            config: cfg,
        };
        let mut j = Json::pytorch(model, setup, est, fit, warnings);
        j.assumed = assumed;
        j
    }
}

impl<'a> Json<'a, ImageModel, ImageSetupJson<'a>, &'a Fit> {
    /// A text-to-image pipeline under diffusers (no warnings).
    pub fn image(
        m: &image::Model,
        setup: &'a ImageSetup,
        est: &'a ImageEstimate,
        fit: Option<&'a Fit>,
    ) -> Self {
        let model = ImageModel {
            id: m.id,
            pipeline: m.pipeline,
            params: est.estimate.params,
            trainable_params: 0,
        };
        let setup = ImageSetupJson {
            task: "infer",
            setup,
        };
        let mut j = Json::pytorch(model, setup, &est.estimate, fit, &[]);
        j.detail = Some(Detail::Image(ImageDetail {
            params: &est.params,
            weights: &est.weights,
        }));
        j
    }
}
