//! A candle model built from a spec's layer list, with parameters initialized from the job seed or
//! read from the spec's initial weights ([`crate::weights`]).
//!
//! Everything differentiable is written with candle's primitive ops (matmul, conv2d, exp, sum, …):
//! candle's fused softmax / layer-norm kernels do not propagate gradients, so they are not used here.
//! On the CPU, linear layers, convolutions, max-pooling, ReLU, GELU, layer norm, causal attention
//! and the cross-entropy run Ergon's own kernels ([`crate::ops`]), which are faster there than
//! candle's and as deterministic.
//!
//! A [`Precision::Bf16Mixed`] job rounds the operands and the output of every matrix product to
//! bf16 ([`ops::round_bf16`], whose gradient rounds the gradient that crosses it): the one place
//! where the precision enters the model is [`Model::bf16`].

use candle_core::{DType, Device, Tensor, Var, D};
use ergon_job_spec::{JobSpec, Layer, Precision};

use crate::{
    error::Result,
    ops,
    rng::{Seed, Stream},
    weights::InitialWeights,
};

/// ε of every LayerNorm.
pub const LAYER_NORM_EPS: f64 = 1e-5;
/// ε of every RMSNorm.
pub const RMS_NORM_EPS: f64 = 1e-5;

/// A named trainable tensor.
pub struct Param {
    /// Stable name, e.g. `layers.1.weight`: the key in checkpoints and the init stream label.
    pub name: String,
    /// The tensor.
    pub var: Var,
}

/// How a parameter is initialized.
enum Init {
    /// Uniform in ±1/√fan_in (PyTorch's default for Linear and Conv2d).
    FanIn(usize),
    /// Normal with this standard deviation.
    Normal(f32),
    /// A constant.
    Const(f32),
}

/// One layer, holding indices into [`Model::params`].
enum Block {
    Linear(Lin),
    Conv2d {
        w: usize,
        b: Option<usize>,
        stride: usize,
        padding: usize,
    },
    MaxPool2d {
        kernel: usize,
        stride: usize,
    },
    Flatten,
    Relu,
    Gelu,
    LayerNorm(Norm),
    Embedding {
        w: usize,
    },
    Positional {
        w: usize,
    },
    /// The output head tied to the embedding `w` (`[vocab, dim]`): `x·wᵀ`.
    TiedHead {
        w: usize,
    },
    /// RMSNorm with its gain.
    RmsNorm {
        gain: usize,
    },
    Llama(Box<LlamaBlock>),
    Transformer(Box<TransformerBlock>),
}

/// Weight and optional bias of an affine map, and its LoRA adapter `(A, B)` if it has one.
#[derive(Clone, Copy)]
struct Lin {
    w: usize,
    b: Option<usize>,
    lora: Option<(usize, usize)>,
}

/// Marks an index of [`Model::frozen`] (a frozen base tensor) among indices of [`Model::params`].
const FROZEN: usize = 1 << (usize::BITS - 1);

struct Norm {
    gamma: usize,
    beta: usize,
}

struct TransformerBlock {
    heads: usize,
    ln1: Norm,
    qkv: Lin,
    proj: Lin,
    ln2: Norm,
    fc1: Lin,
    fc2: Lin,
}

struct LlamaBlock {
    heads: usize,
    kv_heads: usize,
    rope_theta: f64,
    norm1: usize,
    q: Lin,
    k: Lin,
    v: Lin,
    o: Lin,
    norm2: usize,
    gate: Lin,
    up: Lin,
    down: Lin,
}

/// A sequential model.
pub struct Model {
    /// Trainable parameters in a fixed order (creation order): every parameter, or with LoRA the
    /// adapters (`….lora_a`, `….lora_b`).
    pub params: Vec<Param>,
    /// With LoRA, the frozen base: its parameters by name, never trained nor checkpointed.
    frozen: Vec<(String, Tensor)>,
    /// Every base parameter's name and index (into `params`, or `frozen` with [`FROZEN`]).
    base: Vec<(String, usize)>,
    /// LoRA's `alpha / rank`.
    lora_scale: f64,
    /// LoRA's adapters `(A, B)` by the index of the base weight they adapt.
    adapters: std::collections::BTreeMap<usize, (usize, usize)>,
    blocks: Vec<Block>,
    /// The job's arithmetic.
    precision: Precision,
    /// A forger's cheaper arithmetic instead ([`Model::forge_fp8_products`]).
    #[cfg(feature = "attacks")]
    fp8_products: bool,
}

struct Builder<'a> {
    seed: &'a Seed,
    /// Values read from a weights file, used instead of the seed's draws for the base.
    preset: Option<&'a InitialWeights>,
    device: &'a Device,
    dtype: DType,
    params: Vec<Param>,
    /// Every trainable parameter's name and shape, in creation order.
    shapes: Vec<(String, Vec<usize>)>,
    /// Every base parameter's name and shape, in creation order (what a weights file holds).
    base_shapes: Vec<(String, Vec<usize>)>,
    /// Every base parameter's name and index.
    base: Vec<(String, usize)>,
    /// Record the shapes only: no tensor is allocated ([`Model::layout`]).
    layout_only: bool,
    /// LoRA: the base is frozen, these projections get adapters of `rank`.
    lora: Option<(u32, Vec<ergon_job_spec::lora::Adapted>)>,
    frozen: Vec<(String, Tensor)>,
    frozen_count: usize,
    /// The adapters made, by the index of the weight they adapt.
    adapters: std::collections::BTreeMap<usize, (usize, usize)>,
    /// The layer being built.
    layer: usize,
}

impl<'a> Builder<'a> {
    fn new(
        spec: &JobSpec,
        seed: &'a Seed,
        preset: Option<&'a InitialWeights>,
        device: &'a Device,
        layout_only: bool,
    ) -> Self {
        let lora = match spec.adapters {
            ergon_job_spec::Adapters::None => None,
            ergon_job_spec::Adapters::Lora { rank, .. } => {
                Some((rank, ergon_job_spec::lora::adapted(&spec.model.layers, &spec.adapters)))
            }
        };
        Builder {
            seed,
            preset,
            device,
            dtype: DType::F32,
            params: Vec::new(),
            shapes: Vec::new(),
            base_shapes: Vec::new(),
            base: Vec::new(),
            layout_only,
            lora,
            frozen: Vec::new(),
            frozen_count: 0,
            adapters: std::collections::BTreeMap::new(),
            layer: 0,
        }
    }

    /// Parameter `name`'s initial values: the preset's when `from_preset`, else the seed's draws.
    fn values(&self, name: &str, shape: &[usize], init: Init, from_preset: bool) -> Result<Tensor> {
        if from_preset {
            let preset = self.preset.ok_or_else(|| {
                crate::Error::Candle(candle_core::Error::Msg(format!(
                    "{name}: a frozen base needs the initial weights file"
                )))
            })?;
            let (_, values) = preset.get(name).filter(|(s, _)| s == shape).ok_or_else(|| {
                crate::Error::Candle(candle_core::Error::Msg(format!(
                    "the initial weights have no {name} of shape {shape:?}"
                )))
            })?;
            return Ok(Tensor::from_slice(values, shape, self.device)?.to_dtype(self.dtype)?);
        }
        let n: usize = shape.iter().product();
        let mut rng = Stream::new(self.seed, "init", name.as_bytes());
        let values: Vec<f32> = match init {
            Init::FanIn(fan_in) => {
                let bound = 1.0 / (fan_in as f32).sqrt();
                (0..n).map(|_| rng.uniform(bound)).collect()
            }
            Init::Normal(std) => (0..n).map(|_| rng.normal() * std).collect(),
            Init::Const(c) => vec![c; n],
        };
        Ok(Tensor::from_vec(values, shape, self.device)?.to_dtype(self.dtype)?)
    }

    /// A trainable parameter: checkpointed and optimized.
    fn trainable(
        &mut self,
        name: String,
        shape: &[usize],
        init: Init,
        preset: bool,
    ) -> Result<usize> {
        self.shapes.push((name.clone(), shape.to_vec()));
        if self.layout_only {
            return Ok(self.shapes.len() - 1);
        }
        let t = self.values(&name, shape, init, preset)?;
        self.params.push(Param { name, var: Var::from_tensor(&t)? });
        Ok(self.params.len() - 1)
    }

    /// A parameter of the model itself (its base): trainable, or frozen under LoRA.
    fn param(&mut self, name: String, shape: &[usize], init: Init) -> Result<usize> {
        self.base_shapes.push((name.clone(), shape.to_vec()));
        let index = if self.lora.is_none() {
            self.trainable(name.clone(), shape, init, self.preset.is_some())?
        } else {
            let index = FROZEN | self.frozen_count;
            self.frozen_count += 1;
            if !self.layout_only {
                let t = self.values(&name, shape, init, true)?;
                self.frozen.push((name.clone(), t));
            }
            index
        };
        self.base.push((name, index));
        Ok(index)
    }

    fn linear(&mut self, prefix: &str, inp: usize, out: usize, bias: bool) -> Result<Lin> {
        let w = self.param(format!("{prefix}.weight"), &[out, inp], Init::FanIn(inp))?;
        let b = if bias {
            Some(self.param(format!("{prefix}.bias"), &[out], Init::FanIn(inp))?)
        } else {
            None
        };
        // `layers.<i>.<module>`: adapted when LoRA lists this layer's module.
        let module = prefix.splitn(3, '.').nth(2).unwrap_or_default();
        let (layer, rank) = (self.layer, self.lora.as_ref().map(|(r, _)| *r as usize));
        let adapted = self
            .lora
            .as_ref()
            .is_some_and(|(_, list)| list.iter().any(|a| a.layer == layer && a.module == module));
        let lora = match rank {
            Some(r) if adapted => Some((
                self.trainable(format!("{prefix}.lora_a"), &[r, inp], Init::FanIn(inp), false)?,
                self.trainable(format!("{prefix}.lora_b"), &[out, r], Init::Const(0.0), false)?,
            )),
            _ => None,
        };
        if let Some(ab) = lora {
            self.adapters.insert(w, ab);
        }
        Ok(Lin { w, b, lora })
    }

    fn norm(&mut self, prefix: &str, dim: usize) -> Result<Norm> {
        Ok(Norm {
            gamma: self.param(format!("{prefix}.gamma"), &[dim], Init::Const(1.0))?,
            beta: self.param(format!("{prefix}.beta"), &[dim], Init::Const(0.0))?,
        })
    }
}

impl Model {
    /// Builds the model of `spec` with weights drawn from `seed` (C0 = Init(seed), bit for bit).
    /// The spec must have been validated.
    pub fn new(spec: &JobSpec, seed: &Seed, device: &Device, dtype: DType) -> Result<Model> {
        Self::initial(spec, seed, None, device, dtype)
    }

    /// Builds C0 of `spec`: its parameters from `weights` when the spec names a weights file (its
    /// content loaded by [`crate::weights::load`]), else drawn from `seed`. The spec must have been
    /// validated.
    pub fn initial(
        spec: &JobSpec,
        seed: &Seed,
        weights: Option<&InitialWeights>,
        device: &Device,
        dtype: DType,
    ) -> Result<Model> {
        let mut b = Builder::new(spec, seed, weights, device, false);
        b.dtype = dtype;
        let blocks = Self::blocks(spec, &mut b)?;
        let lora_scale = match spec.adapters {
            ergon_job_spec::Adapters::Lora { rank, alpha, .. } => alpha as f64 / rank as f64,
            ergon_job_spec::Adapters::None => 0.0,
        };
        Ok(Model {
            params: b.params,
            frozen: b.frozen,
            base: b.base,
            lora_scale,
            adapters: b.adapters,
            blocks,
            precision: spec.precision,
            #[cfg(feature = "attacks")]
            fp8_products: false,
        })
    }

    /// The name and shape of every trainable parameter of `spec`'s model, in [`Model::params`]
    /// order, without allocating any of them: what a checkpoint of the spec may hold, known before
    /// a byte of a bundle is read. The spec must have been validated.
    pub fn layout(spec: &JobSpec) -> Result<Vec<(String, Vec<usize>)>> {
        let mut b = Builder::new(spec, &[0; 32], None, &Device::Cpu, true);
        Self::blocks(spec, &mut b)?;
        Ok(b.shapes)
    }

    /// The name and shape of every parameter of the model itself — what a weights file for it
    /// holds: with LoRA the frozen base (no adapters), else the same as [`Model::layout`].
    pub fn base_layout(spec: &JobSpec) -> Result<Vec<(String, Vec<usize>)>> {
        let mut b = Builder::new(spec, &[0; 32], None, &Device::Cpu, true);
        Self::blocks(spec, &mut b)?;
        Ok(b.base_shapes)
    }

    /// The model's own parameters by name with LoRA's updates merged in (`W + (alpha/rank)·B·A`;
    /// without LoRA, the parameters as they are): what a model exported for other tools holds.
    pub fn merged_base(&self) -> Result<crate::weights::NamedTensors> {
        let mut out = std::collections::BTreeMap::new();
        for (name, index) in &self.base {
            let mut t = self.p(*index).clone();
            if let Some((a, b)) = self.adapters.get(index) {
                let update = self.p(*b).matmul(self.p(*a))?;
                t = (t + (update * self.lora_scale)?)?;
            }
            out.insert(name.clone(), (t.dims().to_vec(), t.flatten_all()?.to_vec1::<f32>()?));
        }
        Ok(out)
    }

    /// The blocks of `spec`'s layers, their parameters created by `b`.
    fn blocks(spec: &JobSpec, b: &mut Builder) -> Result<Vec<Block>> {
        let mut blocks = Vec::new();
        let tied_head = spec.model.layers.iter().any(|l| matches!(l, Layer::TiedEmbeddingHead));
        for (i, layer) in spec.model.layers.iter().enumerate() {
            b.layer = i;
            let p = format!("layers.{i}");
            let block = match *layer {
                Layer::Linear { in_features, out_features, bias } => Block::Linear(b.linear(
                    &p,
                    in_features as usize,
                    out_features as usize,
                    bias,
                )?),
                Layer::Conv2d { in_channels, out_channels, kernel_size, stride, padding, bias } => {
                    let (cin, cout, k) =
                        (in_channels as usize, out_channels as usize, kernel_size as usize);
                    let fan_in = cin * k * k;
                    let w =
                        b.param(format!("{p}.weight"), &[cout, cin, k, k], Init::FanIn(fan_in))?;
                    let bias = if bias {
                        Some(b.param(format!("{p}.bias"), &[cout], Init::FanIn(fan_in))?)
                    } else {
                        None
                    };
                    Block::Conv2d { w, b: bias, stride: stride as usize, padding: padding as usize }
                }
                Layer::MaxPool2d { kernel_size, stride } => {
                    Block::MaxPool2d { kernel: kernel_size as usize, stride: stride as usize }
                }
                Layer::Flatten => Block::Flatten,
                Layer::ReLU => Block::Relu,
                Layer::GELU => Block::Gelu,
                Layer::LayerNorm { dim } => Block::LayerNorm(b.norm(&p, dim as usize)?),
                Layer::Embedding { vocab_size, dim } => Block::Embedding {
                    // N(0, 1) as PyTorch's `nn.Embedding`; N(0, 0.02) as GPT-2 when the output
                    // head is tied to it (unit rows would make its first logits ~√dim wide).
                    w: b.param(
                        format!("{p}.weight"),
                        &[vocab_size as usize, dim as usize],
                        Init::Normal(if tied_head { 0.02 } else { 1.0 }),
                    )?,
                },
                Layer::PositionalEmbedding { max_len, dim } => Block::Positional {
                    w: b.param(
                        format!("{p}.weight"),
                        &[max_len as usize, dim as usize],
                        Init::Normal(0.02),
                    )?,
                },
                Layer::RMSNorm { dim } => Block::RmsNorm {
                    gain: b.param(format!("{p}.gain"), &[dim as usize], Init::Const(1.0))?,
                },
                Layer::LlamaBlock { dim, heads, kv_heads, hidden, rope_theta } => {
                    let (d, h) = (dim as usize, hidden as usize);
                    let kv_width = kv_heads as usize * (d / heads as usize);
                    let gain = |b: &mut Builder, name: &str| {
                        b.param(format!("{p}.{name}.gain"), &[d], Init::Const(1.0))
                    };
                    Block::Llama(Box::new(LlamaBlock {
                        heads: heads as usize,
                        kv_heads: kv_heads as usize,
                        rope_theta: rope_theta as f64,
                        norm1: gain(b, "norm1")?,
                        q: b.linear(&format!("{p}.attn.q"), d, d, false)?,
                        k: b.linear(&format!("{p}.attn.k"), d, kv_width, false)?,
                        v: b.linear(&format!("{p}.attn.v"), d, kv_width, false)?,
                        o: b.linear(&format!("{p}.attn.o"), d, d, false)?,
                        norm2: gain(b, "norm2")?,
                        gate: b.linear(&format!("{p}.mlp.gate"), d, h, false)?,
                        up: b.linear(&format!("{p}.mlp.up"), d, h, false)?,
                        down: b.linear(&format!("{p}.mlp.down"), h, d, false)?,
                    }))
                }
                Layer::TiedEmbeddingHead => match blocks.first() {
                    Some(Block::Embedding { w }) => Block::TiedHead { w: *w },
                    _ => {
                        return Err(crate::Error::Spec(ergon_job_spec::SpecError::ShapeMismatch {
                            layer: i as u32,
                        }))
                    }
                },
                Layer::TransformerBlock { dim, heads, hidden } => {
                    let (d, h) = (dim as usize, hidden as usize);
                    Block::Transformer(Box::new(TransformerBlock {
                        heads: heads as usize,
                        ln1: b.norm(&format!("{p}.ln1"), d)?,
                        qkv: b.linear(&format!("{p}.attn.qkv"), d, 3 * d, true)?,
                        proj: b.linear(&format!("{p}.attn.proj"), d, d, true)?,
                        ln2: b.norm(&format!("{p}.ln2"), d)?,
                        fc1: b.linear(&format!("{p}.mlp.fc1"), d, h, true)?,
                        fc2: b.linear(&format!("{p}.mlp.fc2"), h, d, true)?,
                    }))
                }
            };
            blocks.push(block);
        }
        Ok(blocks)
    }

    fn p(&self, i: usize) -> &Tensor {
        if i & FROZEN != 0 {
            &self.frozen[i & !FROZEN].1
        } else {
            self.params[i].var.as_tensor()
        }
    }

    /// `x` as a matrix product of the job's precision sees it: itself in f32, rounded to bf16 in
    /// [`Precision::Bf16Mixed`] (operands, outputs, and the gradients crossing them).
    fn bf16(&self, x: &Tensor) -> Result<Tensor> {
        #[cfg(feature = "attacks")]
        if self.fp8_products {
            return crate::attacks::round_fp8(x);
        }
        Ok(match self.precision {
            Precision::F32 => x.clone(),
            Precision::Bf16Mixed => ops::round_bf16(x)?,
        })
    }

    /// Whether a forger changed the arithmetic (never outside the attack suite).
    fn forged(&self) -> bool {
        #[cfg(feature = "attacks")]
        return self.fp8_products;
        #[cfg(not(feature = "attacks"))]
        false
    }

    /// The attack suite's cheaper arithmetic: every matrix product's operands and output in FP8
    /// (E4M3, scaled per tensor) where the spec says bf16 or f32.
    #[cfg(feature = "attacks")]
    pub fn forge_fp8_products(&mut self) {
        self.fp8_products = true;
    }

    /// `x·Wᵀ + b`, plus `(alpha/rank)·x·Aᵀ·Bᵀ` when the map has a LoRA adapter.
    fn linear(&self, x: &Tensor, lin: Lin) -> Result<Tensor> {
        let y = self.affine(x, lin.w, lin.b)?;
        let Some((a, b)) = lin.lora else { return Ok(y) };
        let low = self.affine(&self.affine(x, a, None)?, b, None)?;
        Ok((y + (low * self.lora_scale)?)?)
    }

    /// `x·Wᵀ + b`, in the job's precision: in bf16 `x`, `W` and `b` rounded, the product summed in
    /// f32, the bias added in f32 and the sum rounded.
    fn affine(&self, x: &Tensor, w: usize, b: Option<usize>) -> Result<Tensor> {
        if x.device().is_cpu() && !self.forged() {
            let (w, b) = (self.p(w), b.map(|b| self.p(b)));
            return Ok(match self.precision {
                Precision::F32 => ops::linear(x, w, b)?,
                // The roundings inside the op (the same bits as around it).
                Precision::Bf16Mixed => ops::linear_bf16(x, w, b)?,
            });
        }
        let (x, w) = (self.bf16(x)?, self.bf16(self.p(w))?);
        let b = b.map(|b| self.bf16(self.p(b))).transpose()?;
        if x.device().is_cpu() {
            return self.bf16(&ops::linear(&x, &w, b.as_ref())?);
        }
        // Flatten leading dimensions so the matmul is 2-D.
        let dims = x.dims().to_vec();
        let (lead, inp) = dims.split_at(dims.len() - 1);
        let rows: usize = lead.iter().product();
        let y = x.reshape((rows, inp[0]))?.matmul(&w.t()?)?;
        let y = match b {
            Some(b) => y.broadcast_add(&b)?,
            None => y,
        };
        let mut out = lead.to_vec();
        out.push(y.dim(1)?);
        self.bf16(&y.reshape(out)?)
    }

    /// Causal self-attention over the fused `qkv` (`[B, T, 3d]`): in bf16 its operands and output
    /// rounded, the scores, softmax and sums in f32.
    fn causal_attention(&self, qkv: &Tensor, heads: usize) -> Result<Tensor> {
        self.bf16(&ops::causal_attention(&self.bf16(qkv)?, heads)?)
    }

    fn layer_norm(&self, x: &Tensor, n: &Norm) -> Result<Tensor> {
        Ok(ops::layer_norm(x, self.p(n.gamma), self.p(n.beta), LAYER_NORM_EPS)?)
    }

    /// `x / √(mean(x²) + ε) · g` over the last dimension.
    fn rms_norm(&self, x: &Tensor, gain: usize) -> Result<Tensor> {
        let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
        let rms = (ms + RMS_NORM_EPS)?.sqrt()?;
        Ok(x.broadcast_div(&rms)?.broadcast_mul(self.p(gain))?)
    }

    /// A Llama block on `x` (`[B, T, d]`): grouped-query attention with rotary positions, then
    /// the SwiGLU MLP, each after an RMSNorm and added to its input.
    fn llama(&self, x: &Tensor, blk: &LlamaBlock) -> Result<Tensor> {
        let (bsz, t, d) = x.dims3()?;
        let (h, kv) = (blk.heads, blk.kv_heads);
        let hd = d / h;
        let n = self.rms_norm(x, blk.norm1)?;
        let (cos, sin) = rope_tables(t, hd, blk.rope_theta, x.device())?;
        let q = rope(&self.linear(&n, blk.q)?.reshape((bsz, t, h, hd))?, &cos, &sin)?;
        let k = rope(&self.linear(&n, blk.k)?.reshape((bsz, t, kv, hd))?, &cos, &sin)?;
        let v = self.linear(&n, blk.v)?.reshape((bsz, t, kv, hd))?;
        // Each key/value head serves `h / kv` consecutive query heads: repeated into place, the
        // three are the fused `[B, T, 3d]` the attention op takes.
        let repeat = |x: Tensor| -> Result<Tensor> {
            Ok(x.unsqueeze(3)?
                .broadcast_as((bsz, t, kv, h / kv, hd))?
                .contiguous()?
                .reshape((bsz, t, d))?)
        };
        let qkv = Tensor::cat(&[q.reshape((bsz, t, d))?, repeat(k)?, repeat(v)?], 2)?;
        let x1 = (x + self.linear(&self.causal_attention(&qkv, h)?, blk.o)?)?;
        let n2 = self.rms_norm(&x1, blk.norm2)?;
        let gate = self.linear(&n2, blk.gate)?;
        let gate = if gate.device().is_cpu() { ops::silu(&gate)? } else { gate.silu()? };
        let hidden = (gate * self.linear(&n2, blk.up)?)?;
        Ok((&x1 + self.linear(&hidden, blk.down)?)?)
    }

    fn attention(&self, x: &Tensor, blk: &TransformerBlock) -> Result<Tensor> {
        let qkv = self.linear(x, blk.qkv)?; // [B, T, 3d]
        self.linear(&self.causal_attention(&qkv, blk.heads)?, blk.proj)
    }

    /// Logits for a batch: `[B, classes]`, or `[B, T, vocab]` for token input (`x` of dtype u32).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = x.clone();
        let mut blocks = self.blocks.as_slice();
        while let Some((block, rest)) = blocks.split_first() {
            blocks = rest;
            // On the CPU a convolution, ReLU and max-pooling in a row are one op, and so are a ReLU
            // and max-pooling (same values and gradients as the ops one by one). Not in bf16, whose
            // convolution output is rounded before the pooling chooses among its values.
            if x.device().is_cpu() && self.precision == Precision::F32 && !self.forged() {
                match (block, rest) {
                    (
                        Block::Conv2d { w, b, stride, padding },
                        [Block::Relu, Block::MaxPool2d { kernel, stride: every }, ..],
                    ) => {
                        let (w, b) = (self.p(*w), b.map(|b| self.p(b)));
                        let (conv, pool) = ((*stride, *padding), (*kernel, *every));
                        x = ops::conv2d_relu_max_pool2d(&x, w, b, conv, pool)?;
                        blocks = &rest[2..];
                        continue;
                    }
                    (Block::Relu, [Block::MaxPool2d { kernel, stride }, ..]) => {
                        x = ops::relu_max_pool2d(&x, *kernel, *stride)?;
                        blocks = &rest[1..];
                        continue;
                    }
                    _ => {}
                }
            }
            x = match block {
                Block::Linear(lin) => self.linear(&x, *lin)?,
                Block::Conv2d { w, b, stride, padding } => {
                    let (x, w) = (self.bf16(&x)?, self.bf16(self.p(*w))?);
                    let b = b.map(|b| self.bf16(self.p(b))).transpose()?;
                    let y = if x.device().is_cpu() {
                        ops::conv2d(&x, &w, b.as_ref(), *stride, *padding)?
                    } else {
                        let y = x.conv2d(&w, *padding, *stride, 1, 1)?;
                        match b {
                            Some(b) => y.broadcast_add(&b.reshape((1, (), 1, 1))?)?,
                            None => y,
                        }
                    };
                    self.bf16(&y)?
                }
                Block::MaxPool2d { kernel, stride } if x.device().is_cpu() => {
                    ops::max_pool2d(&x, *kernel, *stride)?
                }
                Block::MaxPool2d { kernel, stride } => max_pool2d(&x, *kernel, *stride)?,
                Block::Flatten => x.flatten_from(1)?,
                Block::Relu if x.device().is_cpu() => ops::relu(&x)?,
                Block::Relu => x.relu()?,
                Block::Gelu => ops::gelu(&x)?,
                Block::LayerNorm(n) => self.layer_norm(&x, n)?,
                Block::Embedding { w } => {
                    let (bsz, t) = x.dims2()?;
                    let d = self.p(*w).dim(1)?;
                    self.p(*w).index_select(&x.flatten_all()?, 0)?.reshape((bsz, t, d))?
                }
                Block::Positional { w } => {
                    let t = x.dim(1)?;
                    x.broadcast_add(&self.p(*w).narrow(0, 0, t)?)?
                }
                Block::TiedHead { w } => self.affine(&x, *w, None)?,
                Block::RmsNorm { gain } => self.rms_norm(&x, *gain)?,
                Block::Llama(blk) => self.llama(&x, blk)?,
                Block::Transformer(blk) => {
                    let x1 = (&x + self.attention(&self.layer_norm(&x, &blk.ln1)?, blk)?)?;
                    let hdn = ops::gelu(&self.linear(&self.layer_norm(&x1, &blk.ln2)?, blk.fc1)?)?;
                    (&x1 + self.linear(&hdn, blk.fc2)?)?
                }
            };
        }
        Ok(x)
    }
}

/// Rotary tables `cos` and `sin` (`[t, hd]`): position `p`, column `j` holds the angle
/// `p · θ^(−2(j mod hd/2)/hd)` — each head's two halves rotate by the same frequencies, as in
/// Hugging Face's Llama. Computed in f64 with `libm` (the same Rust code on every machine), then
/// rounded to f32.
fn rope_tables(t: usize, hd: usize, theta: f64, device: &Device) -> Result<(Tensor, Tensor)> {
    let half = hd / 2;
    let (mut cos, mut sin) = (Vec::with_capacity(t * hd), Vec::with_capacity(t * hd));
    for p in 0..t {
        for j in 0..hd {
            let inv_freq = 1.0 / libm::pow(theta, (2 * (j % half)) as f64 / hd as f64);
            let angle = p as f64 * inv_freq;
            cos.push(libm::cos(angle) as f32);
            sin.push(libm::sin(angle) as f32);
        }
    }
    Ok((Tensor::from_vec(cos, (t, hd), device)?, Tensor::from_vec(sin, (t, hd), device)?))
}

/// Rotary positions on `x` (`[B, T, heads, hd]`): `x·cos + rotate_half(x)·sin`, where
/// `rotate_half([x₁, x₂]) = [−x₂, x₁]` over the head's two halves.
fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (_, t, _, hd) = x.dims4()?;
    let half = hd / 2;
    let rotated = Tensor::cat(&[x.narrow(3, half, half)?.neg()?, x.narrow(3, 0, half)?], 3)?;
    let (cos, sin) = (cos.reshape((1, t, 1, hd))?, sin.reshape((1, t, 1, hd))?);
    Ok((x.broadcast_mul(&cos)? + rotated.broadcast_mul(&sin)?)?)
}

/// Max pooling over `kernel`×`kernel` windows every `stride` pixels of `[N, C, H, W]`, on any device
/// (the CPU has a faster kernel with the same results, [`ops::max_pool2d`]).
///
/// Candle's own max-pool backward scales the gradient by 1/kernel² (and needs stride = kernel), so
/// this one is built from differentiable primitives: gather the k² window positions with index
/// selects, pick the first maximum of each window with a constant one-hot mask, and sum. Exactly one
/// input per window receives the gradient, as in PyTorch.
pub fn max_pool2d(x: &Tensor, kernel: usize, stride: usize) -> Result<Tensor> {
    let (_, _, h, w) = x.dims4()?;
    let (ho, wo) = ((h - kernel) / stride + 1, (w - kernel) / stride + 1);
    let positions = |offset: usize, n: usize| -> Result<Tensor> {
        let idx: Vec<u32> = (0..n).map(|i| (i * stride + offset) as u32).collect();
        Ok(Tensor::from_vec(idx, n, x.device())?)
    };
    let mut windows = Vec::with_capacity(kernel * kernel);
    for di in 0..kernel {
        let rows = x.index_select(&positions(di, ho)?, 2)?;
        for dj in 0..kernel {
            windows.push(rows.index_select(&positions(dj, wo)?, 3)?);
        }
    }
    let stacked = Tensor::stack(&windows, 4)?; // [N, C, H', W', k²]
    let first_max = stacked.detach().argmax_keepdim(4)?; // [N, C, H', W', 1]
    let slots = Tensor::arange(0u32, (kernel * kernel) as u32, x.device())?;
    let mask = slots.broadcast_as(stacked.dims())?.broadcast_eq(&first_max)?.to_dtype(x.dtype())?;
    Ok((stacked * mask)?.sum(4)?)
}

/// Mean softmax cross-entropy of `logits` (`[N, C]`, or `[B, T, C]`) against `targets` (u32, `N` or
/// `B·T` values): `−mean log softmax(logits)[target]`.
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    // The logits as they are: a reshape would be one more node of the graph.
    Ok(ops::cross_entropy(logits, &targets.flatten_all()?)?)
}

/// Number of rows of `logits` whose argmax equals the target.
pub fn correct(logits: &Tensor, targets: &Tensor) -> Result<u64> {
    let classes = logits.dim(D::Minus1)?;
    let pred = logits.reshape(((), classes))?.argmax(1)?;
    let hits =
        pred.eq(&targets.flatten_all()?)?.to_dtype(DType::U32)?.sum_all()?.to_scalar::<u32>()?;
    Ok(hits as u64)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ergon_job_spec::{
        Bounded, BoundedString, DataFormat, Dataset, Hash32, JobSpec, Layer, Model as ModelSpec,
        Optimizer, Ppb,
    };

    /// A spec around `layers` whose data has `format` (the data itself is not read here).
    pub(crate) fn spec_of(layers: Vec<Layer>, format: DataFormat) -> JobSpec {
        let files =
            vec![BoundedString::from_str("/x").unwrap(); if format.takes_files(2) { 2 } else { 1 }];
        let data = Dataset {
            format,
            files: Bounded::new(files).unwrap(),
            content_root: Hash32([0; 32]),
            samples: 4,
        };
        let spec = JobSpec {
            model: ModelSpec { layers: Bounded::new(layers).unwrap() },
            train: data.clone(),
            validation: data,
            optimizer: Optimizer::Sgd {
                lr: Ppb(1_000_000),
                momentum: Ppb(0),
                weight_decay: Ppb(0),
            },
            init: Default::default(),
            schedule: Default::default(),
            adapters: Default::default(),
            gradients: Default::default(),
            epochs: 1,
            batch_size: 2,
            checkpoint_interval: 1,
            precision: Default::default(),
        };
        spec.validate().expect("test spec is valid");
        spec
    }

    /// Compares backward gradients of every parameter with central finite differences (f64).
    fn grad_check(spec: &JobSpec, x: Tensor, y: Tensor) {
        let device = Device::Cpu;
        let model = Model::new(spec, &[3; 32], &device, DType::F64).unwrap();
        let loss_of = |m: &Model| {
            cross_entropy(&m.forward(&x).unwrap(), &y).unwrap().to_scalar::<f64>().unwrap()
        };
        let grads = cross_entropy(&model.forward(&x).unwrap(), &y).unwrap().backward().unwrap();
        let mut pick = Stream::new(&[9; 32], "pick", b"");
        for p in &model.params {
            let analytic = grads.get(p.var.as_tensor()).expect("every parameter gets a gradient");
            let analytic = analytic.flatten_all().unwrap().to_vec1::<f64>().unwrap();
            let original = p.var.as_tensor().flatten_all().unwrap().to_vec1::<f64>().unwrap();
            for _ in 0..6.min(original.len()) {
                let i = pick.below(original.len() as u64) as usize;
                let eps = 1e-6;
                let mut plus = original.clone();
                plus[i] += eps;
                p.var.set(&Tensor::from_vec(plus, p.var.dims(), &device).unwrap()).unwrap();
                let lp = loss_of(&model);
                let mut minus = original.clone();
                minus[i] -= eps;
                p.var.set(&Tensor::from_vec(minus, p.var.dims(), &device).unwrap()).unwrap();
                let lm = loss_of(&model);
                p.var
                    .set(&Tensor::from_vec(original.clone(), p.var.dims(), &device).unwrap())
                    .unwrap();
                let numeric = (lp - lm) / (2.0 * eps);
                let err =
                    (numeric - analytic[i]).abs() / (numeric.abs() + analytic[i].abs()).max(1e-8);
                assert!(
                    err < 1e-5,
                    "{}[{i}]: analytic {} vs numeric {numeric} (rel err {err})",
                    p.name,
                    analytic[i]
                );
            }
        }
    }

    fn randn(shape: &[usize], seed: u8) -> Tensor {
        let mut s = Stream::new(&[seed; 32], "x", b"");
        let v: Vec<f64> = (0..shape.iter().product()).map(|_| s.normal() as f64).collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    fn labels(v: &[u32]) -> Tensor {
        Tensor::new(v, &Device::Cpu).unwrap()
    }

    #[test]
    fn linear_relu_gelu_layernorm_gradients() {
        let spec = spec_of(
            vec![
                Layer::Linear { in_features: 5, out_features: 6, bias: true },
                Layer::GELU,
                Layer::LayerNorm { dim: 6 },
                Layer::Linear { in_features: 6, out_features: 4, bias: false },
                Layer::ReLU,
                Layer::Linear { in_features: 4, out_features: 3, bias: true },
            ],
            DataFormat::Csv { features: 5, classes: 3 },
        );
        grad_check(&spec, randn(&[4, 5], 1), labels(&[0, 2, 1, 2]));
    }

    #[test]
    fn conv_maxpool_flatten_gradients() {
        let spec = spec_of(
            vec![
                Layer::Conv2d {
                    in_channels: 1,
                    out_channels: 3,
                    kernel_size: 3,
                    stride: 1,
                    padding: 1,
                    bias: true,
                },
                Layer::MaxPool2d { kernel_size: 2, stride: 2 },
                Layer::Conv2d {
                    in_channels: 3,
                    out_channels: 2,
                    kernel_size: 2,
                    stride: 1,
                    padding: 0,
                    bias: false,
                },
                Layer::Flatten,
                Layer::Linear { in_features: 2, out_features: 3, bias: true },
            ],
            DataFormat::Idx { height: 4, width: 4, classes: 3 },
        );
        grad_check(&spec, randn(&[3, 1, 4, 4], 2), labels(&[1, 0, 2]));

        // Strided, padded convolution and overlapping pooling windows.
        let spec = spec_of(
            vec![
                Layer::Conv2d {
                    in_channels: 1,
                    out_channels: 2,
                    kernel_size: 3,
                    stride: 2,
                    padding: 1,
                    bias: true,
                },
                Layer::MaxPool2d { kernel_size: 2, stride: 1 },
                Layer::Flatten,
                Layer::Linear { in_features: 8, out_features: 3, bias: true },
            ],
            DataFormat::Idx { height: 5, width: 5, classes: 3 },
        );
        grad_check(&spec, randn(&[3, 1, 5, 5], 4), labels(&[2, 2, 0]));
    }

    #[test]
    fn embedding_positional_transformer_gradients() {
        let spec = spec_of(
            vec![
                Layer::Embedding { vocab_size: 256, dim: 8 },
                Layer::PositionalEmbedding { max_len: 4, dim: 8 },
                Layer::TransformerBlock { dim: 8, heads: 2, hidden: 12 },
                Layer::LayerNorm { dim: 8 },
                Layer::Linear { in_features: 8, out_features: 256, bias: true },
            ],
            DataFormat::Text { seq_len: 4 },
        );
        let x = Tensor::new(&[[65u32, 66, 67, 10], [200, 3, 65, 65]], &Device::Cpu).unwrap();
        grad_check(&spec, x, labels(&[66, 67, 10, 65, 3, 65, 65, 1]));
    }

    #[test]
    fn max_pool_matches_candle_forward_and_routes_ties_to_one_input() {
        let x = randn(&[2, 3, 6, 6], 5);
        let ours = max_pool2d(&x, 2, 2).unwrap();
        let theirs = x.max_pool2d_with_stride(2, 2).unwrap();
        let diff =
            (ours - theirs).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f64>().unwrap();
        assert_eq!(diff, 0.0);
        // Overlapping windows (stride < kernel) have the right shape.
        assert_eq!(max_pool2d(&x, 3, 1).unwrap().dims(), &[2, 3, 4, 4]);
        // A window of equal values passes the gradient to one input only.
        let flat = Var::from_tensor(&Tensor::ones((1, 1, 2, 2), DType::F64, &Device::Cpu).unwrap())
            .unwrap();
        let g = max_pool2d(flat.as_tensor(), 2, 2).unwrap().sum_all().unwrap().backward().unwrap();
        let g = g.get(flat.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        assert_eq!(g, vec![1.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn attention_is_causal() {
        let spec = spec_of(
            vec![
                Layer::Embedding { vocab_size: 256, dim: 8 },
                Layer::TransformerBlock { dim: 8, heads: 2, hidden: 8 },
                Layer::Linear { in_features: 8, out_features: 256, bias: true },
            ],
            DataFormat::Text { seq_len: 4 },
        );
        let m = Model::new(&spec, &[1; 32], &Device::Cpu, DType::F64).unwrap();
        let a = m.forward(&Tensor::new(&[[1u32, 2, 3, 4]], &Device::Cpu).unwrap()).unwrap();
        let b = m.forward(&Tensor::new(&[[1u32, 2, 3, 99]], &Device::Cpu).unwrap()).unwrap();
        // Changing the last token leaves the first three positions' outputs unchanged.
        let diff = (a.narrow(1, 0, 3).unwrap() - b.narrow(1, 0, 3).unwrap())
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap();
        assert_eq!(diff.to_scalar::<f64>().unwrap(), 0.0);
    }

    #[test]
    fn initialization_is_a_pure_function_of_the_seed() {
        let spec = spec_of(
            vec![Layer::Linear { in_features: 5, out_features: 3, bias: true }],
            DataFormat::Csv { features: 5, classes: 3 },
        );
        let w = |seed: u8| {
            let m = Model::new(&spec, &[seed; 32], &Device::Cpu, DType::F32).unwrap();
            m.params[0].var.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap()
        };
        assert_eq!(w(1), w(1));
        assert_ne!(w(1), w(2));
        assert!(w(1).iter().all(|v| v.abs() <= 1.0 / 5f32.sqrt()));
    }
}
