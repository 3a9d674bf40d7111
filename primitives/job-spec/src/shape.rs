//! Validation of a [`JobSpec`]: bounds, shape inference through the layers, parameter and FLOP counts.

use alloc::vec::Vec;
use codec::{Decode, Encode};
use scale_info::TypeInfo;

use crate::{
    flops, Adapters, DataFormat, Dataset, Gradients, InitialWeights, JobSpec, Layer, Optimizer,
    Ppb, SpecSummary, WeightNaming, BYTE_VOCAB, MAX_BATCH_SIZE, MAX_CHECKPOINTS, MAX_DATA_FILES,
    MAX_EPOCHS, MAX_MODEL_PARAMETERS, MAX_PARAMETERS,
};

/// Why a spec is invalid. Each variant names what is wrong; `layer` is the 0-based layer index.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Encode, Decode, TypeInfo)]
#[scale_info(capture_docs = "always")]
pub enum SpecError {
    /// The model has no layers.
    EmptyModel,
    /// A size, count or hyper-parameter is zero or beyond its bound.
    OutOfBounds,
    /// A dataset lists the wrong number of files for its format.
    WrongFileCount,
    /// A file URI is empty, not UTF-8, or neither a path nor an http(s) URL.
    BadUri,
    /// Training and validation data have different formats.
    FormatMismatch,
    /// A dataset has no samples (or a text sample does not fit).
    NoSamples,
    /// A layer cannot take the shape the previous layer produces.
    ShapeMismatch {
        /// Index of the offending layer.
        layer: u32,
    },
    /// Embedding is only allowed as the first layer, on token input; other layers need float input.
    TokenInputMismatch {
        /// Index of the offending layer.
        layer: u32,
    },
    /// The model's output does not match the target (classes, or `[seq_len, 256]` for text).
    OutputMismatch,
    /// Too many trainable parameters.
    TooManyParameters,
    /// Too many checkpoints: raise the checkpoint interval.
    TooManyCheckpoints,
    /// A hyper-parameter is out of its range (learning rate 0, β ≥ 1, ε = 0, momentum ≥ 1).
    BadHyperParameter,
    /// The FLOP count overflows 128 bits.
    Overflow,
    /// The learning-rate schedule is longer than the run (warmup and decay steps), or a ratio is
    /// above 1.
    ScheduleTooLong,
    /// LoRA adapters that cannot be: no weights file to freeze, a rank of 0 or wider than an
    /// adapted projection's narrower side, an alpha of 0, or no projection to adapt.
    BadAdapters,
    /// The initial weights' naming does not fit the model (Hugging Face GPT-2 naming needs
    /// `Embedding, PositionalEmbedding, TransformerBlock × n, LayerNorm`, Llama naming
    /// `Embedding, LlamaBlock × n, RMSNorm`, each then a tied or bias-free head).
    WeightNamingMismatch,
    /// Gradient accumulation or clipping that cannot be: 0 micro-batches or a count that does not
    /// divide the batch size, or a clipping norm of 0.
    BadGradients,
}

#[cfg(feature = "std")]
impl core::fmt::Display for SpecError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SpecError::EmptyModel => write!(f, "the model has no layers"),
            SpecError::OutOfBounds => write!(f, "a size, count or hyper-parameter is zero or too large"),
            SpecError::WrongFileCount => write!(f, "wrong number of dataset files for the format (IDX: images, labels; CSV and text: one; tokens: 1 to {MAX_DATA_FILES})"),
            SpecError::BadUri => write!(f, "a dataset URI is empty, not UTF-8, or neither a path nor an http(s) URL"),
            SpecError::FormatMismatch => write!(f, "training and validation data have different formats"),
            SpecError::NoSamples => write!(f, "a dataset has no samples"),
            SpecError::ShapeMismatch { layer } => write!(f, "layer {layer} does not accept the shape of its input"),
            SpecError::TokenInputMismatch { layer } => write!(f, "layer {layer}: embeddings take token input (first layer only); other layers take float input"),
            SpecError::OutputMismatch => write!(f, "the model output does not match the training target"),
            SpecError::TooManyParameters => write!(f, "more than {MAX_PARAMETERS} trainable parameters"),
            SpecError::TooManyCheckpoints => write!(f, "more than {MAX_CHECKPOINTS} checkpoints: raise checkpoint_interval"),
            SpecError::BadHyperParameter => write!(f, "a hyper-parameter is out of range (lr > 0, momentum and betas < 1, eps > 0)"),
            SpecError::Overflow => write!(f, "the FLOP count overflows"),
            SpecError::BadGradients => write!(f, "gradients: micro_batches must be at least 1 and divide batch_size, and clip_norm must be above 0"),
            SpecError::BadAdapters => write!(f, "LoRA needs initial weights from a file, a rank from 1 to each adapted projection's narrower side, alpha > 0, and a transformer block to adapt"),
            SpecError::ScheduleTooLong => write!(f, "the learning-rate schedule does not fit the run (warmup + decay steps ≤ total steps, warmup < total steps for a cosine, min_ratio ≤ 1)"),
            SpecError::WeightNamingMismatch => write!(f, "the initial weights' naming does not fit the model (HfGpt2: Embedding, PositionalEmbedding, TransformerBlock × n, LayerNorm; HfLlama: Embedding, LlamaBlock × n, RMSNorm; each then TiedEmbeddingHead or a Linear without bias)"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SpecError {}

/// The per-sample activation flowing between layers.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Activation {
    /// Token ids of a sequence (before an embedding).
    Tokens {
        /// Sequence length.
        len: u32,
        /// Token ids are below this.
        vocab: u32,
    },
    /// A float tensor of this shape.
    Float(Vec<u32>),
}

impl DataFormat {
    /// Whether a dataset of this format may be made of `files` files.
    pub fn takes_files(&self, files: usize) -> bool {
        match self {
            DataFormat::Idx { .. } => files == 2,
            DataFormat::Csv { .. } | DataFormat::Text { .. } => files == 1,
            DataFormat::Tokens { .. } => (1..=MAX_DATA_FILES as usize).contains(&files),
        }
    }

    /// The per-sample input of the model.
    pub fn input(&self) -> Activation {
        match self {
            DataFormat::Idx { height, width, .. } => {
                Activation::Float(alloc::vec![1, *height, *width])
            }
            DataFormat::Csv { features, .. } => Activation::Float(alloc::vec![*features]),
            DataFormat::Text { seq_len } => Activation::Tokens { len: *seq_len, vocab: BYTE_VOCAB },
            DataFormat::Tokens { seq_len, vocab_size, .. } => {
                Activation::Tokens { len: *seq_len, vocab: *vocab_size }
            }
        }
    }

    /// The per-sample output the model must produce (logits).
    pub fn output(&self) -> Vec<u32> {
        match self {
            DataFormat::Idx { classes, .. } | DataFormat::Csv { classes, .. } => {
                alloc::vec![*classes]
            }
            DataFormat::Text { seq_len } => alloc::vec![*seq_len, BYTE_VOCAB],
            DataFormat::Tokens { seq_len, vocab_size, .. } => alloc::vec![*seq_len, *vocab_size],
        }
    }
}

fn product(shape: &[u32]) -> Option<u128> {
    shape.iter().try_fold(1u128, |acc, d| acc.checked_mul(*d as u128))
}

fn positive(values: &[u32]) -> Result<(), SpecError> {
    if values.iter().all(|v| *v > 0) {
        Ok(())
    } else {
        Err(SpecError::OutOfBounds)
    }
}

fn check_uri(uri: &crate::BoundedString<{ crate::MAX_URI_LEN }>) -> Result<(), SpecError> {
    let s = uri.as_str().ok_or(SpecError::BadUri)?;
    let s_trim = s.trim();
    if s_trim.is_empty() || s_trim.len() != s.len() || s.chars().any(|c| c.is_control()) {
        return Err(SpecError::BadUri);
    }
    match s.split_once("://") {
        None => Ok(()), // a local path
        Some((scheme, rest)) if (scheme == "http" || scheme == "https") && !rest.is_empty() => {
            Ok(())
        }
        Some(("file", rest)) if !rest.is_empty() => Ok(()),
        Some(_) => Err(SpecError::BadUri),
    }
}

fn check_dataset(data: &Dataset) -> Result<(), SpecError> {
    if !data.format.takes_files(data.files.len()) {
        return Err(SpecError::WrongFileCount);
    }
    data.files.iter().try_for_each(check_uri)?;
    if data.samples == 0 {
        return Err(SpecError::NoSamples);
    }
    match data.format {
        DataFormat::Idx { height, width, classes } => positive(&[height, width, classes])?,
        DataFormat::Csv { features, classes } => positive(&[features, classes])?,
        DataFormat::Text { seq_len } => positive(&[seq_len])?,
        DataFormat::Tokens { seq_len, vocab_size, width } => {
            positive(&[seq_len, vocab_size])?;
            if width == crate::TokenWidth::U16 && vocab_size > 1 << 16 {
                return Err(SpecError::OutOfBounds);
            }
        }
    }
    match data.format {
        DataFormat::Idx { classes, .. } | DataFormat::Csv { classes, .. } if classes < 2 => {
            Err(SpecError::OutOfBounds)
        }
        _ => Ok(()),
    }
}

fn check_optimizer(opt: &Optimizer) -> Result<(), SpecError> {
    let below_one = |p: Ppb| p.0 < Ppb::ONE.0;
    let ok = match *opt {
        Optimizer::Sgd { lr, momentum, weight_decay: _ } => lr.0 > 0 && below_one(momentum),
        Optimizer::AdamW { lr, beta1, beta2, eps, weight_decay: _ } => {
            lr.0 > 0 && below_one(beta1) && below_one(beta2) && eps.0 > 0
        }
    };
    ok.then_some(()).ok_or(SpecError::BadHyperParameter)
}

/// The initial weights' file is a valid URI and their naming fits the model.
fn check_init(spec: &JobSpec) -> Result<(), SpecError> {
    let InitialWeights::Safetensors { file, naming, .. } = &spec.init else {
        return Ok(());
    };
    check_uri(file)?;
    let fits = match naming {
        WeightNaming::Ergon => true,
        WeightNaming::HfGpt2 => is_gpt2(&spec.model.layers),
        WeightNaming::HfLlama => is_llama(&spec.model.layers),
    };
    fits.then_some(()).ok_or(SpecError::WeightNamingMismatch)
}

/// Whether `layers` is a GPT-2: `Embedding, PositionalEmbedding, TransformerBlock × n (n ≥ 1),
/// LayerNorm`, then a tied head or a bias-free `Linear` — the models Hugging Face's GPT-2 names fit.
pub fn is_gpt2(layers: &[Layer]) -> bool {
    use Layer::*;
    let [Embedding { .. }, PositionalEmbedding { .. }, middle @ .., LayerNorm { .. }, head] =
        layers
    else {
        return false;
    };
    !middle.is_empty()
        && middle.iter().all(|l| matches!(l, TransformerBlock { .. }))
        && matches!(head, TiedEmbeddingHead | Linear { bias: false, .. })
}

/// Whether `layers` is a Llama: `Embedding, LlamaBlock × n (n ≥ 1), RMSNorm`, then a tied head or
/// a bias-free `Linear` — the models Hugging Face's Llama names fit.
pub fn is_llama(layers: &[Layer]) -> bool {
    use Layer::*;
    let [Embedding { .. }, middle @ .., RMSNorm { .. }, head] = layers else {
        return false;
    };
    !middle.is_empty()
        && middle.iter().all(|l| matches!(l, LlamaBlock { .. }))
        && matches!(head, TiedEmbeddingHead | Linear { bias: false, .. })
}

/// Shape, parameter count and forward FLOPs of one layer on `input`.
/// `embedding` is the model's token embedding (`vocab`, `dim`) when layer 0 is one: what a tied head
/// projects onto.
fn apply_layer(
    index: u32,
    layer: &Layer,
    input: &Activation,
    embedding: Option<(u32, u32)>,
) -> Result<(Activation, u128, u128), SpecError> {
    use Activation::*;
    let mismatch = SpecError::ShapeMismatch { layer: index };
    let overflow = |v: Option<u128>| v.ok_or(SpecError::Overflow);

    if let (Tokens { .. }, l) = (input, layer) {
        if !matches!(l, Layer::Embedding { .. }) {
            return Err(SpecError::TokenInputMismatch { layer: index });
        }
    }
    match layer {
        Layer::Embedding { vocab_size, dim } => {
            positive(&[*vocab_size, *dim])?;
            let Tokens { len: t, vocab } = input else {
                return Err(SpecError::TokenInputMismatch { layer: index });
            };
            // Every token id of the data must have an embedding row.
            if vocab_size < vocab {
                return Err(mismatch);
            }
            let params = (*vocab_size as u128) * (*dim as u128);
            Ok((Float(alloc::vec![*t, *dim]), params, overflow(flops::embedding())?))
        }
        _ => {
            let Float(shape) = input else {
                return Err(SpecError::TokenInputMismatch { layer: index });
            };
            let elements = overflow(product(shape))?;
            match *layer {
                Layer::Linear { in_features, out_features, bias } => {
                    positive(&[in_features, out_features])?;
                    let (last, lead) = shape.split_last().ok_or(mismatch)?;
                    if *last != in_features {
                        return Err(mismatch);
                    }
                    let rows = overflow(product(lead))?;
                    let mut out = shape.clone();
                    *out.last_mut().ok_or(mismatch)? = out_features;
                    let params = in_features as u128 * out_features as u128
                        + if bias { out_features as u128 } else { 0 };
                    let f = flops::linear(rows, in_features as u128, out_features as u128, bias);
                    Ok((Float(out), params, overflow(f)?))
                }
                Layer::Conv2d {
                    in_channels,
                    out_channels,
                    kernel_size: k,
                    stride,
                    padding,
                    bias,
                } => {
                    positive(&[in_channels, out_channels, k, stride])?;
                    let [c, h, w] = shape[..] else {
                        return Err(mismatch);
                    };
                    let (hp, wp) = (h as u64 + 2 * padding as u64, w as u64 + 2 * padding as u64);
                    if c != in_channels || hp < k as u64 || wp < k as u64 {
                        return Err(mismatch);
                    }
                    let ho =
                        u32::try_from((hp - k as u64) / stride as u64 + 1).map_err(|_| mismatch)?;
                    let wo =
                        u32::try_from((wp - k as u64) / stride as u64 + 1).map_err(|_| mismatch)?;
                    let weights = product(&[out_channels, in_channels, k, k]);
                    let params =
                        overflow(weights.and_then(|w| {
                            w.checked_add(if bias { out_channels as u128 } else { 0 })
                        }))?;
                    let f = flops::conv2d(
                        in_channels as u128,
                        out_channels as u128,
                        k as u128,
                        ho as u128,
                        wo as u128,
                        bias,
                    );
                    Ok((Float(alloc::vec![out_channels, ho, wo]), params, overflow(f)?))
                }
                Layer::MaxPool2d { kernel_size: k, stride } => {
                    positive(&[k, stride])?;
                    let [c, h, w] = shape[..] else {
                        return Err(mismatch);
                    };
                    if h < k || w < k {
                        return Err(mismatch);
                    }
                    let (ho, wo) = ((h - k) / stride + 1, (w - k) / stride + 1);
                    let f = flops::max_pool2d(c as u128, ho as u128, wo as u128, k as u128);
                    Ok((Float(alloc::vec![c, ho, wo]), 0, overflow(f)?))
                }
                Layer::Flatten => {
                    let n = u32::try_from(elements).map_err(|_| mismatch)?;
                    Ok((Float(alloc::vec![n]), 0, 0))
                }
                Layer::ReLU => Ok((input.clone(), 0, overflow(flops::relu(elements))?)),
                Layer::GELU => Ok((input.clone(), 0, overflow(flops::gelu(elements))?)),
                Layer::LayerNorm { dim } => {
                    positive(&[dim])?;
                    if shape.last() != Some(&dim) {
                        return Err(mismatch);
                    }
                    Ok((input.clone(), 2 * dim as u128, overflow(flops::layer_norm(elements))?))
                }
                Layer::PositionalEmbedding { max_len, dim } => {
                    positive(&[max_len, dim])?;
                    let [t, d] = shape[..] else {
                        return Err(mismatch);
                    };
                    if d != dim || t > max_len {
                        return Err(mismatch);
                    }
                    let params = max_len as u128 * dim as u128;
                    let f = flops::positional_embedding(t as u128, d as u128);
                    Ok((input.clone(), params, overflow(f)?))
                }
                Layer::TransformerBlock { dim, heads, hidden } => {
                    positive(&[dim, heads, hidden])?;
                    let [t, d] = shape[..] else {
                        return Err(mismatch);
                    };
                    if d != dim || dim % heads != 0 {
                        return Err(mismatch);
                    }
                    let (d, h) = (dim as u128, hidden as u128);
                    // LN ×2, QKV, output projection, MLP in and out.
                    let params =
                        2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * h + h) + (h * d + d);
                    let f = flops::transformer_block(t as u128, d, heads as u128, h);
                    Ok((input.clone(), params, overflow(f)?))
                }
                Layer::RMSNorm { dim } => {
                    positive(&[dim])?;
                    if shape.last() != Some(&dim) {
                        return Err(mismatch);
                    }
                    Ok((input.clone(), dim as u128, overflow(flops::rms_norm(elements))?))
                }
                Layer::LlamaBlock { dim, heads, kv_heads, hidden, rope_theta } => {
                    positive(&[dim, heads, kv_heads, hidden, rope_theta])?;
                    let [t, d] = shape[..] else {
                        return Err(mismatch);
                    };
                    // Whole heads of even width (RoPE rotates halves), whole groups of heads.
                    if d != dim
                        || dim % heads != 0
                        || (dim / heads) % 2 != 0
                        || heads % kv_heads != 0
                    {
                        return Err(mismatch);
                    }
                    let (d, h) = (dim as u128, hidden as u128);
                    let kv_width = kv_heads as u128 * (d / heads as u128);
                    // Two gains, Q, K, V, O, gate, up, down.
                    let params = 2 * d + d * d + 2 * d * kv_width + d * d + 3 * d * h;
                    let f = flops::llama_block(t as u128, d, heads as u128, kv_heads as u128, h);
                    Ok((input.clone(), params, overflow(f)?))
                }
                Layer::TiedEmbeddingHead => {
                    let (vocab, dim) = embedding.ok_or(mismatch)?;
                    let [t, d] = shape[..] else {
                        return Err(mismatch);
                    };
                    if d != dim {
                        return Err(mismatch);
                    }
                    let f = flops::linear(t as u128, dim as u128, vocab as u128, false);
                    Ok((Float(alloc::vec![t, vocab]), 0, overflow(f)?))
                }
                Layer::Embedding { .. } => unreachable!("handled above"),
            }
        }
    }
}

/// Runs the model's layers over `input`: the output activation, parameters and forward FLOPs.
pub fn infer(layers: &[Layer], input: Activation) -> Result<(Activation, u128, u128), SpecError> {
    let mut act = input;
    let (mut params, mut fwd) = (0u128, 0u128);
    let embedding = match layers.first() {
        Some(Layer::Embedding { vocab_size, dim }) => Some((*vocab_size, *dim)),
        _ => None,
    };
    for (i, layer) in layers.iter().enumerate() {
        let (next, p, f) = apply_layer(i as u32, layer, &act, embedding)?;
        params = params.checked_add(p).ok_or(SpecError::Overflow)?;
        fwd = fwd.checked_add(f).ok_or(SpecError::Overflow)?;
        act = next;
    }
    Ok((act, params, fwd))
}

/// `Ok` if the spec's micro-batches divide its batches and its clipping norm is positive.
fn check_gradients(spec: &JobSpec) -> Result<(), SpecError> {
    let Gradients { micro_batches, clip_norm, .. } = spec.gradients;
    let divides = micro_batches >= 1 && spec.batch_size.is_multiple_of(micro_batches);
    if !divides || clip_norm == Some(Ppb(0)) {
        return Err(SpecError::BadGradients);
    }
    Ok(())
}

pub(crate) fn validate(spec: &JobSpec) -> Result<SpecSummary, SpecError> {
    if spec.model.layers.is_empty() {
        return Err(SpecError::EmptyModel);
    }
    check_dataset(&spec.train)?;
    check_dataset(&spec.validation)?;
    if spec.train.format != spec.validation.format {
        return Err(SpecError::FormatMismatch);
    }
    check_optimizer(&spec.optimizer)?;
    check_gradients(spec)?;
    check_init(spec)?;
    if spec.epochs == 0 || spec.epochs > MAX_EPOCHS {
        return Err(SpecError::OutOfBounds);
    }
    if spec.batch_size == 0 || spec.batch_size > MAX_BATCH_SIZE || spec.checkpoint_interval == 0 {
        return Err(SpecError::OutOfBounds);
    }

    let input = spec.train.format.input();
    let (output, params, forward) = infer(&spec.model.layers, input.clone())?;
    let expected = spec.train.format.output();
    if output != Activation::Float(expected.clone()) {
        return Err(SpecError::OutputMismatch);
    }
    // LoRA: the base (from the weights file) is frozen, the adapters are what trains.
    let lora = spec.adapters != Adapters::None;
    let tokens = match input {
        Activation::Tokens { len, .. } => len,
        Activation::Float(_) => 0,
    };
    if lora && (spec.init == InitialWeights::Seed || tokens == 0) {
        return Err(SpecError::BadAdapters);
    }
    let (adapter_params, adapter_forward) =
        crate::lora::cost(&spec.model.layers, &spec.adapters, tokens)?;
    let (trainable, frozen) = if lora { (adapter_params, params) } else { (params, 0) };
    let total = params.checked_add(adapter_params).ok_or(SpecError::Overflow)?;
    if trainable > MAX_PARAMETERS as u128 || total > MAX_MODEL_PARAMETERS as u128 {
        return Err(SpecError::TooManyParameters);
    }
    let (rows, classes) = match expected[..] {
        [classes] => (1u128, classes as u128),
        [t, vocab] => (t as u128, vocab as u128),
        _ => return Err(SpecError::OutputMismatch),
    };
    let forward =
        [forward, adapter_forward, flops::cross_entropy(rows, classes).ok_or(SpecError::Overflow)?]
            .iter()
            .try_fold(0u128, |acc, v| acc.checked_add(*v))
            .ok_or(SpecError::Overflow)?;
    // Per sample: a full run's forward and backward (3 forwards); LoRA's forward, the backward's
    // input gradients through the frozen base (one forward) and the adapters' weight gradients.
    let per_sample = if lora {
        forward.checked_mul(2).and_then(|f| f.checked_add(adapter_forward))
    } else {
        forward.checked_mul(3)
    }
    .ok_or(SpecError::Overflow)?;

    let steps_per_epoch = spec.steps_per_epoch();
    let total_steps = steps_per_epoch.checked_mul(spec.epochs as u64).ok_or(SpecError::Overflow)?;
    // C0 plus one checkpoint per interval; checked, as every other count here (issue 34).
    let checkpoints = total_steps
        .div_ceil(spec.checkpoint_interval as u64)
        .checked_add(1)
        .ok_or(SpecError::Overflow)?;
    if checkpoints > MAX_CHECKPOINTS {
        return Err(SpecError::TooManyCheckpoints);
    }
    crate::schedule::check(&spec.schedule, total_steps)?;
    let training_flops = [per_sample, spec.train.samples as u128, spec.epochs as u128]
        .iter()
        .try_fold(1u128, |acc, v| acc.checked_mul(*v))
        .ok_or(SpecError::Overflow)?;

    Ok(SpecSummary {
        parameters: trainable as u64,
        frozen_parameters: frozen as u64,
        forward_flops_per_sample: forward,
        training_flops,
        steps_per_epoch,
        total_steps,
        checkpoints,
    })
}
