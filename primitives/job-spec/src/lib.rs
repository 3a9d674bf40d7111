//! # Ergon job specification
//!
//! What a user asks trainers to train, in a form both the runtime (`no_std`, SCALE) and the worker
//! (JSON, candle) read the same way:
//!
//! - [`Layer`]: a small sequential layer DSL (Linear, Conv2d, MaxPool2d, Flatten, ReLU, GELU, LayerNorm,
//!   Embedding, PositionalEmbedding, TransformerBlock with causal self-attention, an output head tied
//!   to the token embedding) — a GPT-2 is `Embedding, PositionalEmbedding, TransformerBlock × n,
//!   LayerNorm, TiedEmbeddingHead`;
//! - [`Dataset`]: training and validation data (format, URIs, content root, sample count);
//! - [`InitialWeights`]: C0 from the job seed, or from a safetensors file committed by its content
//!   root (fine-tuning), in Ergon's or Hugging Face's GPT-2 tensor naming;
//! - [`Optimizer`] and [`Schedule`]: SGD with momentum or AdamW, hyper-parameters in parts per billion
//!   ([`Ppb`]) so the runtime never touches floats, and a learning-rate schedule in integer steps;
//! - [`JobSpec::validate`]: bounds and shape compatibility, and the exact integer FLOP count of the whole
//!   training run ([`flops`]), from which the chain credits training work in micro-ut.
//!
//! Bounds live in the types ([`Bounded`]), so decoding an oversized spec fails before allocating.
//!
//! Versions: v1 (no `init`, no `schedule`) is [`v1::JobSpec`], v2 (no `precision`) is
//! [`v2::JobSpec`]; their JSON still reads as the current spec (seeded weights, constant learning
//! rate, f32) and the job market migrates jobs stored under them.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod bounded;
pub mod chunks;
pub mod flops;
pub mod lora;
pub mod schedule;
pub mod shape;
pub mod v1;
pub mod v2;

pub use bounded::{Bounded, BoundedString};
pub use chunks::{file_digest, ChunkList, DataGap};
pub use shape::{Activation, SpecError};

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

/// Most layers in a model.
pub const MAX_LAYERS: u32 = 64;
/// Longest data URI, in bytes.
pub const MAX_URI_LEN: u32 = 256;
/// Most files a dataset is made of (IDX: images + labels; token shards: up to this many).
pub const MAX_DATA_FILES: u32 = 64;
/// Most trainable parameters in a model (2^28 ≈ 268 M).
pub const MAX_PARAMETERS: u64 = 1 << 28;
/// Most parameters of a model with a frozen base (LoRA: base and adapters, 2^33 ≈ 8.6 B).
pub const MAX_MODEL_PARAMETERS: u64 = 1 << 33;
/// Most checkpoints in a bundle.
pub const MAX_CHECKPOINTS: u64 = 4096;
/// Most epochs.
pub const MAX_EPOCHS: u32 = 1000;
/// Largest batch.
pub const MAX_BATCH_SIZE: u32 = 8192;
/// Vocabulary of the byte-level text format: one token per byte value.
pub const BYTE_VOCAB: u32 = 256;
/// One unit of work (ut) is 432·10^9 floating-point operations (1 GFLOP/s for 1/200 of a day).
pub const FLOPS_PER_UT: u128 = 432_000_000_000;
/// Largest data file a dataset may name (4 GiB): what the worker loads (validators' offchain workers
/// read only its chunk list and sampled chunks, [`chunks`]).
pub const MAX_DATA_FILE_BYTES: u64 = 4 << 30;

/// Content root of a dataset from its files' digests ([`chunks::file_digest`]: SHA-256 of each
/// file's chunk list), in spec order: `SHA-256(digest₀ ‖ digest₁ ‖ …)`. The one definition the
/// worker and the runtime share.
pub fn content_root(file_digests: impl IntoIterator<Item = [u8; 32]>) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut outer = Sha256::new();
    for digest in file_digests {
        outer.update(digest);
    }
    outer.finalize().into()
}

/// A 32-byte hash (content roots). JSON: `0x`-prefixed hex.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Default,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[scale_info(capture_docs = "always")]
pub struct Hash32(pub [u8; 32]);

/// A non-negative real number in parts per billion: `Ppb(1_000_000)` is 0.001. JSON: a plain number.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Default,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[scale_info(capture_docs = "always")]
pub struct Ppb(pub u32);

impl Ppb {
    /// One billion parts: 1.0.
    pub const ONE: Ppb = Ppb(1_000_000_000);

    /// The value as a float (worker side; the runtime never uses floats).
    #[cfg(feature = "std")]
    pub fn to_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// The nearest representable value, or `None` outside [0, 4.294967295].
    #[cfg(feature = "std")]
    pub fn from_f64(x: f64) -> Option<Ppb> {
        let scaled = (x * 1e9).round();
        (x.is_finite() && (0.0..=u32::MAX as f64).contains(&scaled)).then_some(Ppb(scaled as u32))
    }
}

/// One layer of a sequential model. Shapes are per sample (no batch dimension).
#[derive(
    Clone, PartialEq, Eq, Debug, Encode, Decode, DecodeWithMemTracking, TypeInfo, MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(tag = "type", deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub enum Layer {
    /// `y = x·Wᵀ + b` over the last dimension: `[…, in] → […, out]`.
    Linear {
        /// Input features.
        in_features: u32,
        /// Output features.
        out_features: u32,
        /// Whether there is a bias.
        bias: bool,
    },
    /// 2-D convolution: `[in, H, W] → [out, H', W']`, `H' = (H + 2·padding − kernel) / stride + 1`.
    Conv2d {
        /// Input channels.
        in_channels: u32,
        /// Output channels.
        out_channels: u32,
        /// Square kernel side.
        kernel_size: u32,
        /// Stride.
        stride: u32,
        /// Zero padding on each side.
        padding: u32,
        /// Whether there is a bias.
        bias: bool,
    },
    /// Max pooling: `[C, H, W] → [C, (H − kernel) / stride + 1, …]`.
    MaxPool2d {
        /// Square window side.
        kernel_size: u32,
        /// Stride.
        stride: u32,
    },
    /// Flattens a sample to one dimension.
    Flatten,
    /// `max(x, 0)`.
    ReLU,
    /// GELU, tanh approximation.
    GELU,
    /// Layer normalization over the last dimension (`dim`), with a learned scale and shift.
    LayerNorm {
        /// Size of the normalized (last) dimension.
        dim: u32,
    },
    /// Token embedding: `[T]` token ids → `[T, dim]`. Must be the first layer.
    Embedding {
        /// Number of distinct tokens.
        vocab_size: u32,
        /// Embedding width.
        dim: u32,
    },
    /// Learned absolute position embedding added to `[T, dim]`, `T ≤ max_len`.
    PositionalEmbedding {
        /// Longest sequence.
        max_len: u32,
        /// Embedding width.
        dim: u32,
    },
    /// Pre-norm transformer block on `[T, dim]`: `x + Attn(LN(x))`, then `x + MLP(LN(x))`, where Attn is
    /// causal multi-head self-attention and MLP is `Linear(dim, hidden) → GELU → Linear(hidden, dim)`.
    TransformerBlock {
        /// Model width.
        dim: u32,
        /// Attention heads (`dim` must be a multiple).
        heads: u32,
        /// Hidden width of the MLP.
        hidden: u32,
    },
    /// Output head tied to the token embedding (layer 0, `[vocab, dim]`): `[T, dim] → [T, vocab]`,
    /// `y = x·Eᵀ`, no bias and no parameters of its own (GPT-2's `lm_head`).
    TiedEmbeddingHead,
    /// Root-mean-square normalization over the last dimension (`dim`) with a learned gain, ε = 10⁻⁵:
    /// `x / √(mean(x²) + ε) · g` (Llama's).
    RMSNorm {
        /// Size of the normalized (last) dimension.
        dim: u32,
    },
    /// Llama-style pre-norm block on `[T, dim]`: `x + O(Attn(RoPE(Q·n), RoPE(K·n), V·n))` with
    /// `n = RMSNorm(x)`, then `x + Down(SiLU(Gate·n′) ⊙ Up·n′)` with `n′ = RMSNorm(x)`. Causal
    /// attention with `heads` query heads sharing `kv_heads` key/value heads (grouped-query
    /// attention: query head `h` reads key/value head `h / (heads / kv_heads)`), rotary positions
    /// on each head's two halves (`rope_theta`: the base of the frequencies), bias-free projections.
    LlamaBlock {
        /// Model width.
        dim: u32,
        /// Query heads (`dim` must be a multiple, the head width even).
        heads: u32,
        /// Key/value heads (`heads` must be a multiple).
        kv_heads: u32,
        /// Hidden width of the SwiGLU MLP.
        hidden: u32,
        /// Base of the rotary frequencies (10 000 for Llama 2, 500 000 for Llama 3).
        rope_theta: u32,
    },
}

/// A sequential model.
#[derive(
    Clone, PartialEq, Eq, Debug, Encode, Decode, DecodeWithMemTracking, TypeInfo, MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub struct Model {
    /// The layers, applied in order.
    pub layers: Bounded<Layer, MAX_LAYERS>,
}

/// How a dataset's files are laid out, which fixes the input shape and the training target.
#[derive(
    Clone, PartialEq, Eq, Debug, Encode, Decode, DecodeWithMemTracking, TypeInfo, MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(tag = "type", deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub enum DataFormat {
    /// IDX files (MNIST format; gzip allowed): `files = [images, labels]`; samples are `[1, height, width]`
    /// images scaled to [0, 1], targets class labels `< classes`.
    Idx {
        /// Image height.
        height: u32,
        /// Image width.
        width: u32,
        /// Number of classes.
        classes: u32,
    },
    /// One CSV file without header: the first column is the class label, then `features` numbers.
    Csv {
        /// Number of feature columns.
        features: u32,
        /// Number of classes.
        classes: u32,
    },
    /// One plain-text file, byte-level tokens (vocabulary 256): sample `i` is the window of `seq_len`
    /// bytes at `i·seq_len`, its targets the same window shifted by one byte.
    Text {
        /// Context length.
        seq_len: u32,
    },
    /// Pre-tokenized shards: each file a flat array of little-endian token ids (nanoGPT's
    /// `train.bin`, what `ergon-worker tokenize` writes), 1 to [`MAX_DATA_FILES`] files in order.
    /// A file of `n` tokens holds `⌊(n − 1) / seq_len⌋` samples: sample `j` is the `seq_len` tokens at
    /// `j·seq_len`, its targets the same window shifted by one token (causal LM); windows never
    /// cross files. Samples are numbered through the files in order.
    Tokens {
        /// Bytes per token id.
        width: TokenWidth,
        /// Token ids are `< vocab_size`; the model's output is `[seq_len, vocab_size]`.
        vocab_size: u32,
        /// Context length.
        seq_len: u32,
    },
}

/// Bytes per token id in a token shard.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[scale_info(capture_docs = "always")]
pub enum TokenWidth {
    /// `u16`, little-endian (vocabularies up to 65,536: GPT-2's 50,257).
    U16,
    /// `u32`, little-endian.
    U32,
}

impl TokenWidth {
    /// Bytes per id.
    pub fn bytes(self) -> usize {
        match self {
            TokenWidth::U16 => 2,
            TokenWidth::U32 => 4,
        }
    }
}

/// Where C0's weights come from.
#[derive(
    Clone,
    PartialEq,
    Eq,
    Debug,
    Default,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(tag = "type", deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub enum InitialWeights {
    /// Drawn from the job seed, one stream per parameter (training from scratch).
    #[default]
    Seed,
    /// Read from one safetensors file (fine-tuning): C0's parameters equal its tensors bit for bit
    /// (f16 and bf16 tensors widened exactly to f32); the optimizer state starts at zero. Every
    /// parameter must be in the file with its shape; a tensor the model has no place for is an error.
    Safetensors {
        /// Path or http(s) URL of the file.
        file: BoundedString<MAX_URI_LEN>,
        /// Content root of the file as a one-file set: `SHA-256(SHA-256(bytes))` ([`content_root`]).
        content_root: Hash32,
        /// How the file names its tensors.
        naming: WeightNaming,
    },
}

/// How a weights file names its tensors.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[scale_info(capture_docs = "always")]
pub enum WeightNaming {
    /// Ergon's parameter names (`layers.3.attn.qkv.weight`), as in a bundle's checkpoints
    /// (`param.` prefixes and `opt.` tensors allowed): a job continues from another's final model.
    Ergon,
    /// Hugging Face `transformers`' GPT-2 (`wte`, `wpe`, `h.N.attn.c_attn`, …, `ln_f`, with or
    /// without the `transformer.` prefix; `Conv1D` weights stored `[in, out]`). The model must be
    /// `Embedding, PositionalEmbedding, TransformerBlock × n, LayerNorm` and then
    /// `TiedEmbeddingHead` or a bias-free `Linear` (`lm_head.weight`).
    HfGpt2,
    /// Hugging Face `transformers`' Llama (`model.embed_tokens`, `model.layers.N.self_attn.q_proj`,
    /// …, `model.norm`, `lm_head`; every weight stored `[out, in]`). The model must be
    /// `Embedding, LlamaBlock × n, RMSNorm` and then `TiedEmbeddingHead` or a bias-free `Linear`.
    HfLlama,
}

/// A dataset: its format, where its files are, and what their content must hash to.
#[derive(
    Clone, PartialEq, Eq, Debug, Encode, Decode, DecodeWithMemTracking, TypeInfo, MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub struct Dataset {
    /// Layout of the files.
    pub format: DataFormat,
    /// Paths or http(s) URLs of the files, in the order the format names them.
    pub files: Bounded<BoundedString<MAX_URI_LEN>, MAX_DATA_FILES>,
    /// Content root: SHA-256 over the concatenated digests of the files ([`chunks::file_digest`]:
    /// SHA-256 of each file's chunk list, which an http(s) file's server also serves at
    /// [`chunks::chunk_list_url`]), in order.
    pub content_root: Hash32,
    /// Number of samples.
    pub samples: u64,
}

/// The optimizer and its hyper-parameters. `lr` is the peak learning rate; [`Schedule`] scales it
/// per step.
#[derive(
    Clone, PartialEq, Eq, Debug, Encode, Decode, DecodeWithMemTracking, TypeInfo, MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(tag = "type", deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub enum Optimizer {
    /// SGD with (heavy-ball) momentum and L2 weight decay: `v = μ·v + g + λ·w; w -= lr·v`.
    Sgd {
        /// Learning rate.
        lr: Ppb,
        /// Momentum μ (< 1).
        momentum: Ppb,
        /// Weight decay λ.
        weight_decay: Ppb,
    },
    /// AdamW (decoupled weight decay, bias-corrected moments).
    AdamW {
        /// Learning rate.
        lr: Ppb,
        /// First-moment decay β₁ (< 1).
        beta1: Ppb,
        /// Second-moment decay β₂ (< 1).
        beta2: Ppb,
        /// ε added to the denominator (> 0).
        eps: Ppb,
        /// Decoupled weight decay λ.
        weight_decay: Ppb,
    },
}

/// What the run trains: every parameter, or low-rank adapters over a frozen base.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Default,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(tag = "type", deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub enum Adapters {
    /// Every parameter is trained (and checkpointed).
    #[default]
    None,
    /// LoRA: the base model (the spec's initial weights, by content root) is frozen; each adapted
    /// projection `W` (`[out, in]`) gains `A` (`[rank, in]`, drawn from the seed like a linear
    /// layer's weight) and `B` (`[out, rank]`, zero) and computes `x·Wᵀ + (alpha/rank)·x·Aᵀ·Bᵀ`.
    /// Only the adapters and their optimizer state are trained and checkpointed. Which projections
    /// ([`lora`]): a transformer block's attention (`qkv`, `proj`; Llama `q`, `k`, `v`, `o`) and/or
    /// its MLP (`fc1`, `fc2`; Llama `gate`, `up`, `down`).
    Lora {
        /// Rank of every adapter (at most the narrower side of each adapted projection).
        rank: u32,
        /// Scale numerator: the update is `alpha / rank` times `B·A`.
        alpha: u32,
        /// Adapt the attention's projections.
        attention: bool,
        /// Adapt the MLP's projections.
        mlp: bool,
    },
}

/// How the learning rate changes over the run: the factor applied to [`Optimizer::lr`] at each
/// optimizer step, from integer step counts and ppb only ([`schedule`] computes it).
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Default,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(tag = "type", deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub enum Schedule {
    /// The same learning rate at every step.
    #[default]
    Constant,
    /// Linear warmup over `warmup_steps` (step `s` < warmup: factor `(s + 1) / warmup_steps`), then
    /// cosine decay to `min_ratio` at the last step (GPT-2 and Llama recipes).
    WarmupCosine {
        /// Steps of linear warmup.
        warmup_steps: u32,
        /// Factor at the end of the decay (≤ 1).
        min_ratio: Ppb,
    },
    /// Warmup, a stable phase at the peak, then linear decay to `min_ratio` over the last
    /// `decay_steps` steps (warmup-stable-decay, as MiniCPM and DeepSeek train).
    WarmupStableDecay {
        /// Steps of linear warmup.
        warmup_steps: u32,
        /// Steps of linear decay at the end of the run.
        decay_steps: u32,
        /// Factor at the last step (≤ 1).
        min_ratio: Ppb,
    },
}

/// How each optimizer step turns its batch into the update: gradient accumulation over
/// micro-batches, global-norm clipping and which parameters weight decay shrinks — GPT-2's and
/// Llama's recipes (JSON: optional; by default one pass, no clipping, every parameter decays).
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(default, deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub struct Gradients {
    /// Micro-batches per optimizer step (≥ 1, dividing `batch_size`). A batch of `n` samples is
    /// cut, in order, into micro-batches of `batch_size / micro_batches` samples (an epoch's last,
    /// shorter batch into fewer, the last of them shorter); each runs its own forward and backward
    /// pass, and the step's gradient is `Σᵢ (nᵢ / n)·gᵢ`, summed in f32 in micro-batch order
    /// (the loss likewise): the full batch's mean in exact arithmetic, with the activation memory
    /// of one micro-batch. With 1, the whole batch in one pass.
    pub micro_batches: u32,
    /// Global-norm clipping (`None`: off). After accumulation, with `N` = √(Σ over trainable
    /// parameters, in order, of Σ g²) in f32, every gradient is multiplied by
    /// `min(1, clip_norm / (N + 10⁻⁶))` — PyTorch's `clip_grad_norm_`. Typical: 1.0.
    pub clip_norm: Option<Ppb>,
    /// Which parameters weight decay shrinks.
    pub decay: DecayScope,
}

impl Default for Gradients {
    fn default() -> Gradients {
        Gradients { micro_batches: 1, clip_norm: None, decay: DecayScope::All }
    }
}

/// The parameters weight decay applies to.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Default,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[scale_info(capture_docs = "always")]
pub enum DecayScope {
    /// Every trainable parameter.
    #[default]
    All,
    /// Matrices and embeddings only (parameters of two or more dimensions), not biases nor
    /// normalization gains — as nanoGPT and Llama's recipes group them.
    Matrices,
}

/// The arithmetic a job trains in: one exact definition per precision, so that the same kernels give
/// the same bits and the verifier replays what the trainer ran (docs/protocol.md, *Precision*).
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Debug,
    Default,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[scale_info(capture_docs = "always")]
pub enum Precision {
    /// Everything in f32: weights, activations, gradients, optimizer state (a GPU with TF32 off).
    #[default]
    F32,
    /// Mixed precision in the manner of `torch.autocast(dtype=bfloat16)`: every matrix product (linear
    /// layers, adapters, the tied head, convolutions, attention) takes its operands rounded to
    /// bf16 (to nearest, ties to even), accumulates in f32 and rounds its output to bf16; a gradient
    /// crossing one of those roundings is rounded the same way. Norms, softmax, the loss, the
    /// element-wise ops, the master weights, the parameters' gradients and the optimizer state are f32.
    Bf16Mixed,
}

impl Precision {
    /// The name manifests record (`f32`, `bf16-mixed`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16Mixed => "bf16-mixed",
        }
    }
}

/// A training job.
#[derive(
    Clone, PartialEq, Eq, Debug, Encode, Decode, DecodeWithMemTracking, TypeInfo, MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "std", serde(deny_unknown_fields))]
#[scale_info(capture_docs = "always")]
pub struct JobSpec {
    /// The model to train.
    pub model: Model,
    /// Where C0's weights come from (JSON: optional, the seed by default).
    #[cfg_attr(feature = "std", serde(default))]
    pub init: InitialWeights,
    /// Training data.
    pub train: Dataset,
    /// Validation data (same format as `train`).
    pub validation: Dataset,
    /// Optimizer and hyper-parameters.
    pub optimizer: Optimizer,
    /// Learning-rate schedule (JSON: optional, constant by default).
    #[cfg_attr(feature = "std", serde(default))]
    pub schedule: Schedule,
    /// Full training or LoRA adapters over the frozen initial weights (JSON: optional, full by
    /// default).
    #[cfg_attr(feature = "std", serde(default))]
    pub adapters: Adapters,
    /// Accumulation, clipping and decay scope (JSON: optional, [`Gradients::default`]).
    #[cfg_attr(feature = "std", serde(default))]
    pub gradients: Gradients,
    /// Passes over the training data.
    pub epochs: u32,
    /// Samples per optimizer step (the last batch of an epoch may be smaller).
    pub batch_size: u32,
    /// A checkpoint every this many optimizer steps (and one after the last step).
    pub checkpoint_interval: u32,
    /// The arithmetic of the training (JSON: optional, f32 by default).
    #[cfg_attr(feature = "std", serde(default))]
    pub precision: Precision,
}

/// What [`JobSpec::validate`] derives from a valid spec.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Encode, Decode, TypeInfo, MaxEncodedLen)]
#[scale_info(capture_docs = "always")]
pub struct SpecSummary {
    /// Trainable parameters (with LoRA: the adapters').
    pub parameters: u64,
    /// Frozen parameters: the base a LoRA run adapts (0 when every parameter is trained).
    pub frozen_parameters: u64,
    /// Forward-pass FLOPs for one training sample, loss (and adapters) included.
    pub forward_flops_per_sample: u128,
    /// FLOPs of the whole run × samples × epochs, per sample: 3 × forward (forward, and a backward
    /// that costs about two forwards); with LoRA 2 × forward + the adapters' forward (the backward
    /// computes the input gradients through the frozen base, about one forward, and the adapters'
    /// weight gradients, about their forward).
    pub training_flops: u128,
    /// Optimizer steps per epoch.
    pub steps_per_epoch: u64,
    /// Optimizer steps in the whole run.
    pub total_steps: u64,
    /// Checkpoints in the bundle, C0 included.
    pub checkpoints: u64,
}

impl SpecSummary {
    /// Training work in micro-ut (10⁻⁶ ut), rounded down.
    pub fn training_micro_ut(&self) -> u128 {
        flops::flops_to_micro_ut(self.training_flops)
    }
}

impl JobSpec {
    /// Checks bounds and shapes and computes the FLOP count. The same code runs on chain and in the
    /// worker, so both agree on what a job is worth.
    pub fn validate(&self) -> Result<SpecSummary, SpecError> {
        shape::validate(self)
    }

    /// Checkpoints of the bundle of a training that diverged at optimizer step `step` (its loss, or
    /// at `step` = the total steps the final model's validation loss, is not finite): the
    /// prescribed checkpoints of the steps before `step`, C0 always — `max(1, ⌈step / interval⌉)`.
    /// The one rule the chain (draws, availability) and the worker (trainer, verifier) share.
    pub fn checkpoints_before_divergence(&self, step: u64) -> u64 {
        match self.checkpoint_interval {
            0 => 1,
            interval => step.div_ceil(interval as u64).max(1),
        }
    }

    /// The sets of files the job names and the content root each must hash to: the training and
    /// validation data and, when fine-tuning, the initial weights. What the owner must keep
    /// available and what attesters fetch — the one list every such check iterates.
    pub fn committed_files(&self) -> alloc::vec::Vec<(&[BoundedString<MAX_URI_LEN>], &Hash32)> {
        let mut sets = alloc::vec![
            (self.train.files.as_slice(), &self.train.content_root),
            (self.validation.files.as_slice(), &self.validation.content_root),
        ];
        if let InitialWeights::Safetensors { file, content_root, .. } = &self.init {
            sets.push((core::slice::from_ref(file), content_root));
        }
        sets
    }

    /// Whether an honest training of this spec on one device class replays within the verifier's
    /// tolerance on another (a CPU verifier replaying a GPU's bundle): not a convolutional model's.
    /// Each of its steps takes millions of ReLU and max-pool decisions, and the few that another
    /// summation order flips grow over a segment past ε (1.3·10⁻³ to 2.6·10⁻² GPU ↔ CPU on one
    /// H100 over three seeds, up to 7.9·10⁻³ between two CPU kernels: docs/pot-calibration.md);
    /// the MLP's and the transformer's stayed under 1.8·10⁻⁶ and 7·10⁻⁵. Such a job trains on the
    /// CPU and is replayed there (the worker), and the chain takes its bundle only from the CPU
    /// class (`ergon_protocol::device`). The one home of the rule.
    ///
    /// Nor, for now, a [`Precision::Bf16Mixed`] job's: another summation order moves a sum across a
    /// bf16 rounding boundary, an error of 2⁻⁹ where f32's is 2⁻²⁴, and no GPU ↔ CPU calibration
    /// has measured what that grows to over a segment (between two CPU kernels:
    /// docs/pot-calibration.md, *bf16*). Until one does, such a job trains on the CPU too, where
    /// every verifier replays it exactly.
    pub fn replays_across_devices(&self) -> bool {
        self.precision == Precision::F32
            && !self
                .model
                .layers
                .iter()
                .any(|l| matches!(l, Layer::Conv2d { .. } | Layer::MaxPool2d { .. }))
    }

    /// Samples per micro-batch: `batch_size / gradients.micro_batches` (the spec's whole batch
    /// without accumulation).
    pub fn micro_batch_size(&self) -> u32 {
        self.batch_size / self.gradients.micro_batches.max(1)
    }

    /// Optimizer steps in one epoch (the last batch may be partial).
    pub fn steps_per_epoch(&self) -> u64 {
        if self.batch_size == 0 {
            return 0;
        }
        self.train.samples.div_ceil(self.batch_size as u64)
    }
}

impl Optimizer {
    /// The learning rate.
    pub fn lr(&self) -> Ppb {
        match self {
            Optimizer::Sgd { lr, .. } | Optimizer::AdamW { lr, .. } => *lr,
        }
    }
}

#[cfg(feature = "std")]
mod serde_impls {
    use super::*;
    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

    impl Serialize for Hash32 {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
            s.serialize_str(&format!("0x{hex}"))
        }
    }

    impl<'de> Deserialize<'de> for Hash32 {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let s = String::deserialize(d)?;
            let hex = s.strip_prefix("0x").unwrap_or(&s);
            if hex.len() != 64 || !hex.is_ascii() {
                return Err(D::Error::custom("expected 32 bytes as 64 hex digits"));
            }
            let mut out = [0u8; 32];
            for (i, byte) in out.iter_mut().enumerate() {
                *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                    .map_err(|_| D::Error::custom("invalid hex digit"))?;
            }
            Ok(Hash32(out))
        }
    }

    impl Serialize for Ppb {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_f64(self.to_f64())
        }
    }

    /// Reads a number written as a JSON number or a decimal string. Also takes serde_json's
    /// `arbitrary_precision` form (a one-entry map holding the digits), which is what a number
    /// looks like inside an internally tagged enum when any crate of the build (sp-genesis-builder
    /// does) turns that serde_json feature on.
    struct NumberVisitor;

    impl<'de> serde::de::Visitor<'de> for NumberVisitor {
        type Value = f64;

        fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
            f.write_str("a number")
        }
        fn visit_f64<E: Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
        fn visit_u64<E: Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_i64<E: Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<f64, E> {
            v.trim().parse().map_err(|_| E::custom(format!("{v:?} is not a number")))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<f64, A::Error> {
            let (_, digits): (alloc::string::String, alloc::string::String) = map
                .next_entry()?
                .ok_or_else(|| A::Error::custom("empty map, expected a number"))?;
            self.visit_str(&digits)
        }
    }

    impl<'de> Deserialize<'de> for Ppb {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let x = d.deserialize_any(NumberVisitor)?;
            Ppb::from_f64(x).ok_or_else(|| D::Error::custom(format!("{x} is outside [0, 4.29]")))
        }
    }
}

#[cfg(test)]
mod tests;
