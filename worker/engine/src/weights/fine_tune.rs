//! The spec of a fine-tune of a Hugging Face model directory (`config.json`, `model.safetensors`)
//! on token shards `tokenize` wrote: the model read from the config ([`super::hf_config`]), the
//! weights committed by their content root, the data blocks as `tokenize` printed them, and a
//! fine-tuning recipe (AdamW, decay on matrices only, clipping at 1) the caller sizes.
//!
//! Everything the job would trip on later is checked here, with the file and the field: a
//! tokenizer whose vocabulary is not the model's, windows longer than its position table, a
//! weights file with a missing, extra or mis-shaped tensor.

use std::path::{Path, PathBuf};

use ergon_job_spec::{
    Adapters, Bounded, BoundedString, DataFormat, Dataset, DecayScope, Gradients, Hash32,
    InitialWeights, JobSpec, Model as ModelSpec, Optimizer, Ppb, Precision, Schedule,
};

use super::hf_config::{model_of_config, HfModel};
use crate::{
    data,
    error::{io, Error, Result},
};

/// What the caller chooses of a fine-tune.
#[derive(Clone, Debug)]
pub struct Recipe {
    /// Where the spec says the weights are (an http(s) URL on a live chain); the local file's path
    /// when `None`.
    pub weights_url: Option<String>,
    /// Passes over the training data.
    pub epochs: u32,
    /// Samples per optimizer step.
    pub batch_size: u32,
    /// Micro-batches per step (gradient accumulation).
    pub micro_batches: u32,
    /// Peak learning rate.
    pub lr: f64,
    /// Linear warmup steps, then a cosine decay to a tenth (none: constant rate).
    pub warmup_steps: Option<u32>,
    /// LoRA adapters of this rank (alpha twice the rank) on attention and MLP, the base frozen.
    pub lora_rank: Option<u32>,
    /// The arithmetic.
    pub precision: Precision,
    /// Optimizer steps between checkpoints (`None`: the run's steps over 32, so that the chain's
    /// 30 segments fit).
    pub checkpoint_interval: Option<u32>,
}

/// Segments a default checkpoint interval aims at (the chain asks for at least 30).
const SEGMENTS: u64 = 32;

/// The fine-tune of the model in `dir` on `train` and `validation` (dataset blocks), and what its
/// config asks for that Ergon ignores.
pub fn fine_tune_spec(
    dir: &Path,
    train: Dataset,
    validation: Dataset,
    recipe: &Recipe,
) -> Result<(JobSpec, Vec<String>)> {
    let config_path = dir.join("config.json");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config_path).map_err(io("reading", &config_path))?)
            .map_err(|e| bad(&config_path, e.to_string()))?;
    let HfModel { layers, naming, context, ignored } =
        model_of_config(&config).map_err(|reason| bad(&config_path, reason))?;
    let vocab = match layers.first() {
        Some(ergon_job_spec::Layer::Embedding { vocab_size, .. }) => *vocab_size,
        _ => return Err(bad(&config_path, "no token embedding")),
    };
    for (what, set) in [("train", &train), ("validation", &validation)] {
        let DataFormat::Tokens { vocab_size, seq_len, .. } = set.format else {
            return Err(bad(Path::new(what), "a fine-tune reads token shards (`tokenize`)"));
        };
        if vocab_size != vocab {
            return Err(bad(
                Path::new(what),
                format!(
                    "the tokenizer's vocabulary has {vocab_size} tokens, the model's embedding \
                     {vocab}: they are not the same vocabulary"
                ),
            ));
        }
        if seq_len > context {
            return Err(bad(
                Path::new(what),
                format!("windows of {seq_len} tokens, longer than the model's {context} positions"),
            ));
        }
    }

    let weights_path = dir.join("model.safetensors");
    let bytes = std::fs::read(&weights_path).map_err(io("reading", &weights_path))?;
    let url = match &recipe.weights_url {
        Some(url) => url.clone(),
        None => absolute(&weights_path)?.display().to_string(),
    };
    let file = BoundedString::from_str(&url)
        .ok_or_else(|| bad(&weights_path, format!("the URL {url:?} is too long for a spec")))?;
    let init = InitialWeights::Safetensors {
        file,
        content_root: Hash32(data::content_root([bytes.as_slice()])),
        naming,
    };
    let mut spec = JobSpec {
        model: ModelSpec {
            layers: Bounded::new(layers)
                .map_err(|_| bad(&config_path, "more layers than a spec holds"))?,
        },
        init,
        train,
        validation,
        optimizer: Optimizer::AdamW {
            lr: ppb(recipe.lr, "lr")?,
            beta1: Ppb(900_000_000),
            beta2: Ppb(999_000_000),
            eps: Ppb(10),
            weight_decay: Ppb(10_000_000),
        },
        schedule: Schedule::Constant,
        adapters: match recipe.lora_rank {
            Some(rank) => Adapters::Lora { rank, alpha: 2 * rank, attention: true, mlp: true },
            None => Adapters::None,
        },
        gradients: Gradients {
            micro_batches: recipe.micro_batches,
            clip_norm: Some(Ppb(1_000_000_000)),
            decay: DecayScope::Matrices,
        },
        epochs: recipe.epochs,
        batch_size: recipe.batch_size,
        checkpoint_interval: 1,
        precision: recipe.precision,
    };
    let steps = spec.validate()?.total_steps;
    spec.checkpoint_interval = match recipe.checkpoint_interval {
        Some(interval) => interval,
        None => (steps / SEGMENTS).clamp(1, u32::MAX as u64) as u32,
    };
    if let Some(warmup_steps) = recipe.warmup_steps {
        spec.schedule = Schedule::WarmupCosine { warmup_steps, min_ratio: Ppb(100_000_000) };
    }
    spec.validate()?;
    // Every tensor present, shaped as the config says, nothing left over: the trainer's C0.
    super::from_safetensors(&spec, naming, &weights_path.display().to_string(), &bytes)?;
    Ok((spec, ignored))
}

fn ppb(v: f64, what: &str) -> Result<Ppb> {
    Ppb::from_f64(v).ok_or_else(|| Error::Data {
        file: what.into(),
        reason: format!("{v} is not a rate between 0 and 4.29"),
    })
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(path).map_err(io("resolving", path))
}

fn bad(file: &Path, reason: impl Into<String>) -> Error {
    Error::Data { file: file.display().to_string(), reason: reason.into() }
}
