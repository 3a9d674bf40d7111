//! CPU kernels of the transformer block, each one op with its own backward: the tanh GELU
//! ([`gelu`]), Llama's SiLU ([`silu`]) and causal multi-head self-attention ([`causal_attention`]).
//!
//! Why: candle's GELU backward is fifteen element-wise nodes (with two `powf`), each allocating its
//! result and, in the backward, a zero gradient it adds to. Every value here is computed per
//! element, or per sample on one thread in a fixed order: the same bits on any number of threads.

use candle_core::{
    backend::BackendStorage, bail, CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor,
};
use rayon::prelude::*;

#[cfg(feature = "cuda")]
use super::gpu::{self, launch_with};
use super::{binary, contiguous, matmul, unary, Activation, Elem, Mat, Pointwise};
#[cfg(feature = "cuda")]
use candle_core::{cuda::cudarc::driver::LaunchConfig, CudaStorage};

/// √(2/π), in the tanh approximation of GELU.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of the tanh approximation.
const GELU_CUBIC: f64 = 0.044715;

/// GELU, tanh approximation (candle's and PyTorch's `approximate="tanh"`):
/// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, and its exact derivative in the backward.
pub fn gelu(x: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1(Pointwise(Gelu))
}

#[derive(Clone, Copy)]
struct Gelu;

/// SiLU (swish), `x·σ(x)` with `σ(x) = 1/(1 + exp(−x))`, and its exact derivative
/// `σ(x)·(1 + x·(1 − σ(x)))` in the backward — Ergon's own `exp`, so the same bits on every CPU.
/// On the CPU only: the GPU path uses candle's `silu`.
pub fn silu(x: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1(Pointwise(Silu))
}

#[derive(Clone, Copy)]
struct Silu;

fn sigmoid<T: Elem>(x: T) -> T {
    let one = T::of(1.0);
    one / (one + (T::default() - x).exp())
}

impl Activation for Silu {
    const NAMES: (&'static str, &'static str) = ("ergon-silu", "ergon-silu-grad");

    fn value<T: Elem>(x: T) -> T {
        x * sigmoid(x)
    }

    fn grad<T: Elem>(x: T, dy: T) -> T {
        let (s, one) = (sigmoid(x), T::of(1.0));
        dy * s * (one + x * (one - s))
    }
}

/// `tanh(√(2/π)·(x + 0.044715·x³))`.
fn gelu_tanh<T: Elem>(x: T) -> T {
    tanh(T::of(SQRT_2_OVER_PI) * x * (T::of(1.0) + T::of(GELU_CUBIC) * x * x))
}

/// `tanh(u)` for GELU as `1 − 2/(exp(2u) + 1)`: within 3·10⁻⁷ of `tanh` in f32 (absolute, which is
/// what `1 + tanh` needs) and cheaper than libm's `tanhf`, which goes through `expm1f` (measured:
/// the char transformer trained 26 % faster with it). `exp` overflowing to ∞ gives 1, underflowing
/// to 0 gives −1.
fn tanh<T: Elem>(u: T) -> T {
    let one = T::of(1.0);
    one - T::of(2.0) / ((u + u).exp() + one)
}

impl Activation for Gelu {
    const NAMES: (&'static str, &'static str) = ("ergon-gelu", "ergon-gelu-grad");

    fn value<T: Elem>(x: T) -> T {
        T::of(0.5) * x * (T::of(1.0) + gelu_tanh(x))
    }

    /// `∂y · (0.5·(1 + t) + 0.5·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²))`, `t` the tanh above.
    fn grad<T: Elem>(x: T, dy: T) -> T {
        let (half, one) = (T::of(0.5), T::of(1.0));
        let t = gelu_tanh(x);
        let inner = T::of(SQRT_2_OVER_PI) * (one + T::of(3.0 * GELU_CUBIC) * x * x);
        dy * (half * (one + t) + half * x * (one - t * t) * inner)
    }
}

/// Causal multi-head self-attention from the fused projection `qkv` (`[B, T, 3d]`: queries, keys
/// and values, each `heads` heads of `d/heads` columns): `[B, T, d]`, head after head. Per sample and
/// head: `softmax(q·kᵀ/√dₕ)` over the keys up to the query's position, times `v`. One op: written with
/// candle's primitives it is thirty nodes (slices, transposes and copies of the heads, two batched
/// products, the mask and the softmax), and the backward of a slice pads its gradient with zeros to
/// the whole `qkv`. The backward recomputes the weights instead of keeping them.
pub fn causal_attention(qkv: &Tensor, heads: usize) -> Result<Tensor> {
    qkv.contiguous()?.apply_op1(CausalAttention { heads })
}

struct CausalAttention {
    heads: usize,
}

/// The shape of an attention's input `[B, T, 3d]`.
#[derive(Clone, Copy)]
struct Heads {
    /// Sequence length.
    t: usize,
    /// Model width.
    d: usize,
    /// Number of heads.
    h: usize,
    /// Width of a head.
    dh: usize,
}

impl Heads {
    fn new(dims: &[usize], h: usize) -> Result<Heads> {
        match dims {
            [_, t, d3] if *t > 0 && h > 0 && d3 % (3 * h) == 0 && *d3 > 0 => {
                Ok(Heads { t: *t, d: d3 / 3, h, dh: d3 / 3 / h })
            }
            _ => bail!("attention: {dims:?} is no [B, T, 3d] with d a multiple of {h} heads"),
        }
    }

    /// `1/√dₕ`.
    fn scale<T: Elem>(&self) -> T {
        T::of(1.0 / (self.dh as f64).sqrt())
    }

    /// Copies head `head` of part `part` (0 queries, 1 keys, 2 values) of one sample's `[T, 3d]`
    /// rows into `out` (`[T, dₕ]`).
    fn gather<T: Elem>(&self, qkv: &[T], part: usize, head: usize, out: &mut [T]) {
        let at = part * self.d + head * self.dh;
        for (row, out) in qkv.chunks(3 * self.d).zip(out.chunks_mut(self.dh)) {
            out.copy_from_slice(&row[at..at + self.dh]);
        }
    }

    /// Writes `[T, dₕ]` values into head `head` of `rows` (`[T, width]`, the head at column
    /// `offset + head·dₕ`).
    fn scatter<T: Elem>(
        &self,
        values: &[T],
        rows: &mut [T],
        width: usize,
        offset: usize,
        head: usize,
    ) {
        let at = offset + head * self.dh;
        for (row, v) in rows.chunks_mut(width).zip(values.chunks(self.dh)) {
            row[at..at + self.dh].copy_from_slice(v);
        }
    }
}

/// One sample's and head's attention weights `p` (`[T, T]`, zero above the diagonal) from its
/// queries and keys (`[T, dₕ]`): row `i` is the softmax of `scale · q_i·k_j` over `j ≤ i`.
fn attention_weights<T: Elem>(q: &[T], k: &[T], g: Heads, p: &mut [T], one: T) {
    let (t, dh) = (g.t, g.dh);
    let scale = g.scale::<T>();
    let k_t = Mat { values: k, rows: dh, cols: t, t: true };
    matmul(p, Mat { values: q, rows: t, cols: dh, t: false }, k_t, false, one);
    for (i, row) in p.chunks_mut(t).enumerate() {
        let (live, masked) = row.split_at_mut(i + 1);
        let max = live.iter().fold(live[0], |m, v| if *v > m { *v } else { m }) * scale;
        // The exponentials in a loop of their own, which vectorizes; then their sum, in order.
        for v in live.iter_mut() {
            *v = (*v * scale - max).exp();
        }
        let mut sum = T::default();
        for v in live.iter() {
            sum += *v;
        }
        for v in live.iter_mut() {
            *v = *v / sum;
        }
        masked.fill(T::default());
    }
}

/// Per-thread buffers of one sample's and head's attention.
struct Scratch<T> {
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    /// `[T, T]`: the weights.
    p: Vec<T>,
    /// `[T, T]`: their gradient (backward).
    dp: Vec<T>,
    /// `[T, dₕ]`: the output, or its gradient (backward).
    o: Vec<T>,
    /// `[T, dₕ]`: a gradient of the input (backward).
    di: Vec<T>,
}

impl<T: Elem> Scratch<T> {
    fn new(g: Heads) -> Self {
        let (head, square) = (vec![T::default(); g.t * g.dh], vec![T::default(); g.t * g.t]);
        Scratch {
            q: head.clone(),
            k: head.clone(),
            v: head.clone(),
            p: square.clone(),
            dp: square,
            o: head.clone(),
            di: head,
        }
    }
}

fn attention_forward<T: Elem>(qkv: &[T], g: Heads) -> Vec<T> {
    let one = T::of(1.0);
    let (t, d) = (g.t, g.d);
    let mut y = vec![T::default(); qkv.len() / 3];
    y.par_chunks_mut(t * d).zip(qkv.par_chunks(t * 3 * d)).for_each_init(
        || Scratch::new(g),
        |s, (y, qkv)| {
            for head in 0..g.h {
                g.gather(qkv, 0, head, &mut s.q);
                g.gather(qkv, 1, head, &mut s.k);
                g.gather(qkv, 2, head, &mut s.v);
                attention_weights(&s.q, &s.k, g, &mut s.p, one);
                let p = Mat { values: &s.p, rows: t, cols: t, t: false };
                matmul(
                    &mut s.o,
                    p,
                    Mat { values: &s.v, rows: t, cols: g.dh, t: false },
                    false,
                    one,
                );
                g.scatter(&s.o, y, d, 0, head);
            }
        },
    );
    y
}

impl CustomOp1 for CausalAttention {
    fn name(&self) -> &'static str {
        "ergon-causal-attention"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = Heads::new(l.dims(), self.heads)?;
        let y = unary!(self.name(), s, l, |x| attention_forward(x, g));
        Ok((y, Shape::from((l.dims()[0], g.t, g.d))))
    }

    /// `attention.cu`: a thread per query, the keys and values through shared memory in tiles,
    /// the softmax online (no `[B, h, T, T]` buffer).
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        let g = Heads::new(l.dims(), self.heads)?;
        let qkv = gpu::f32s(s, l)?;
        let launch = GpuAttention::new(g, l.dims()[0])?;
        let y = gpu::alloc(&s.device, qkv.len() / 3)?;
        let (t, d, h, scale) = launch.sizes();
        let kernel = launch.kernel("forward");
        launch_with!(
            &s.device,
            gpu::ATTENTION,
            &kernel,
            launch.config,
            &qkv,
            &y,
            &t,
            &d,
            &h,
            &scale
        );
        Ok((gpu::storage(y, s.device.clone()), Shape::from((l.dims()[0], g.t, g.d))))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let grad = grad.contiguous()?;
        Ok(Some(arg.apply_op2_no_bwd(&grad, &CausalAttentionGrad { heads: self.heads })?))
    }
}

/// The backward of [`CausalAttention`]: `(qkv, ∂y)` → `∂qkv`.
struct CausalAttentionGrad {
    heads: usize,
}

/// Per sample and head, with `p` the weights and `o = p·v`: `∂v = pᵀ·∂o`, `∂p = ∂o·vᵀ`, the scores'
/// `∂s = scale · p ⊙ (∂p − rowsum(∂p ⊙ p))`, `∂q = ∂s·k`, `∂k = ∂sᵀ·q`.
fn attention_backward<T: Elem>(qkv: &[T], dy: &[T], g: Heads, one: T) -> Vec<T> {
    let (t, d, dh) = (g.t, g.d, g.dh);
    let scale = g.scale::<T>();
    let mut dqkv = vec![T::default(); qkv.len()];
    let samples = dqkv.par_chunks_mut(t * 3 * d).zip(qkv.par_chunks(t * 3 * d));
    samples.zip(dy.par_chunks(t * d)).for_each_init(
        || Scratch::new(g),
        |s, ((dqkv, qkv), dy)| {
            for head in 0..g.h {
                g.gather(qkv, 0, head, &mut s.q);
                g.gather(qkv, 1, head, &mut s.k);
                g.gather(qkv, 2, head, &mut s.v);
                attention_weights(&s.q, &s.k, g, &mut s.p, one);
                // ∂o, this head's columns of ∂y.
                for (row, o) in dy.chunks(d).zip(s.o.chunks_mut(dh)) {
                    o.copy_from_slice(&row[head * dh..][..dh]);
                }
                let d_o = Mat { values: &s.o, rows: t, cols: dh, t: false };
                let p_t = Mat { values: &s.p, rows: t, cols: t, t: true };
                matmul(&mut s.di, p_t, d_o, false, one);
                g.scatter(&s.di, dqkv, 3 * d, 2 * d, head);
                let d_o = Mat { values: &s.o, rows: t, cols: dh, t: false };
                matmul(
                    &mut s.dp,
                    d_o,
                    Mat { values: &s.v, rows: dh, cols: t, t: true },
                    false,
                    one,
                );
                for (i, (ds, p)) in s.dp.chunks_mut(t).zip(s.p.chunks(t)).enumerate() {
                    let mut dot = T::default();
                    for (ds, p) in ds[..=i].iter().zip(&p[..=i]) {
                        dot += *ds * *p;
                    }
                    for (ds, p) in ds[..=i].iter_mut().zip(&p[..=i]) {
                        *ds = scale * *p * (*ds - dot);
                    }
                    ds[i + 1..].fill(T::default());
                }
                let ds = Mat { values: &s.dp, rows: t, cols: t, t: false };
                matmul(
                    &mut s.di,
                    ds,
                    Mat { values: &s.k, rows: t, cols: dh, t: false },
                    false,
                    one,
                );
                g.scatter(&s.di, dqkv, 3 * d, 0, head);
                let ds_t = Mat { values: &s.dp, rows: t, cols: t, t: true };
                matmul(
                    &mut s.di,
                    ds_t,
                    Mat { values: &s.q, rows: t, cols: dh, t: false },
                    false,
                    one,
                );
                g.scatter(&s.di, dqkv, 3 * d, d, head);
            }
        },
    );
    dqkv
}

impl CustomOp2 for CausalAttentionGrad {
    fn name(&self) -> &'static str {
        "ergon-causal-attention-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let g = Heads::new(l1.dims(), self.heads)?;
        if l2.dims() != [l1.dims()[0], g.t, g.d] {
            bail!("attention backward: the gradient has shape {:?}", l2.dims());
        }
        let out = binary!(self.name(), (s1, l1), (s2, l2), |x, dy, one| {
            attention_backward(x, dy, g, one)
        });
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let g = Heads::new(l1.dims(), self.heads)?;
        if l2.dims() != [l1.dims()[0], g.t, g.d] {
            bail!("attention backward: the gradient has shape {:?}", l2.dims());
        }
        let (qkv, dy) = (gpu::f32s(s1, l1)?, gpu::f32s(s2, l2)?);
        let device = &s1.device;
        let launch = GpuAttention::new(g, l1.dims()[0])?;
        // Each row's largest score, softmax denominator and Σ p·∂p, then ∂q, ∂k and ∂v (each
        // kernel writes its third of every row of ∂qkv).
        let rows = launch.rows as u64;
        let stats = gpu::alloc(device, 3 * launch.rows)?;
        let dqkv = gpu::alloc(device, qkv.len())?;
        let (t, d, h, scale) = launch.sizes();
        let kernel = launch.kernel("stats");
        launch_with!(
            device,
            gpu::ATTENTION,
            &kernel,
            launch.config,
            &qkv,
            &dy,
            &stats,
            &t,
            &d,
            &h,
            &scale,
            &rows
        );
        for part in ["dq", "dk", "dv"] {
            let kernel = launch.kernel(part);
            let config = launch.config;
            launch_with!(
                device,
                gpu::ATTENTION,
                &kernel,
                config,
                &qkv,
                &dy,
                &stats,
                &dqkv,
                &t,
                &d,
                &h,
                &scale,
                &rows
            );
        }
        Ok((gpu::storage(dqkv, device.clone()), l1.shape().clone()))
    }
}

/// A launch of `attention.cu`'s kernels for `samples` samples of shape `g`.
#[cfg(feature = "cuda")]
struct GpuAttention {
    g: Heads,
    /// Rows of all samples' heads: `samples · h · T`.
    rows: usize,
    /// The kernels' width: the narrowest of theirs that holds a head.
    width: usize,
    /// A block of 64 threads for each 64 rows of each sample's head.
    config: LaunchConfig,
}

#[cfg(feature = "cuda")]
impl GpuAttention {
    /// Threads per block, one per row (`ERGON_ROWS`).
    const ROWS: usize = 64;
    /// The kernels' widths (`ERGON_ATTENTION`).
    const WIDTHS: [usize; 4] = [32, 64, 128, 256];

    fn new(g: Heads, samples: usize) -> Result<GpuAttention> {
        let Some(width) = Self::WIDTHS.into_iter().find(|&w| g.dh <= w) else {
            bail!("attention on a GPU: heads of {} columns (at most 256)", g.dh);
        };
        let blocks = g.t.div_ceil(Self::ROWS);
        let heads = samples * g.h;
        if samples == 0 || blocks > 65_535 || heads > i32::MAX as usize {
            bail!("attention on a GPU: {samples} samples of {} positions in {} heads", g.t, g.h);
        }
        let config = LaunchConfig {
            grid_dim: (heads as u32, blocks as u32, 1),
            block_dim: (Self::ROWS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        Ok(GpuAttention { g, rows: heads * g.t, width, config })
    }

    /// The kernel `part` (forward, stats, dq, dk, dv) of this width.
    fn kernel(&self, part: &str) -> String {
        format!("ergon_flash_{part}_c{}", self.width)
    }

    /// The kernels' size arguments: T, d, h and 1/√dₕ.
    fn sizes(&self) -> (u32, u32, u32, f32) {
        (self.g.t as u32, self.g.d as u32, self.g.h as u32, self.g.scale::<f32>())
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Var, D};

    use super::*;
    use crate::ops::tests::{grads_of, max_abs_diff, randn};

    /// The reference: causal multi-head self-attention from `qkv` (`[B, T, 3d]`) written with
    /// candle's primitive ops (differentiable): `[B, T, d]`.
    fn primitive_attention(qkv: &Tensor, heads: usize) -> candle_core::Result<Tensor> {
        let (bsz, t, d3) = qkv.dims3()?;
        let (d, dh) = (d3 / 3, d3 / 3 / heads);
        let split = |i: usize| -> candle_core::Result<Tensor> {
            qkv.narrow(2, i * d, d)?.reshape((bsz, t, heads, dh))?.transpose(1, 2)?.contiguous()
        };
        let (q, k, v) = (split(0)?, split(1)?, split(2)?); // [B, H, T, dh]
        let scores = (q.matmul(&k.t()?)? * (1.0 / (dh as f64).sqrt()))?; // [B, H, T, T]
        let mask: Vec<f32> = (0..t * t).map(|i| if i % t > i / t { -1e9 } else { 0.0 }).collect();
        let mask = Tensor::from_vec(mask, (t, t), qkv.device())?.to_dtype(qkv.dtype())?;
        let probs = softmax_last_dim(&scores.broadcast_add(&mask)?)?;
        probs.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape((bsz, t, d))
    }

    /// Softmax over the last dimension from primitive ops, shifted by the detached max.
    fn softmax_last_dim(x: &Tensor) -> candle_core::Result<Tensor> {
        let max = x.max_keepdim(D::Minus1)?.detach();
        let e = x.broadcast_sub(&max)?.exp()?;
        e.broadcast_div(&e.sum_keepdim(D::Minus1)?)
    }

    #[test]
    fn gelu_matches_candle_forward_and_backward() {
        let x = Var::from_tensor(&(randn(&[4, 33], 1) * 2.0).unwrap()).unwrap();
        let weights = randn(&[4, 33], 2);
        let ours = gelu(x.as_tensor()).unwrap();
        let theirs = x.as_tensor().gelu().unwrap();
        assert!(max_abs_diff(&ours, &theirs) < 1e-12);
        let (a, b) = (grads_of(&[&x], ours, &weights), grads_of(&[&x], theirs, &weights));
        // Candle's backward rounds √(2/π) and 0.044715·√(2/π) to six digits.
        assert!(max_abs_diff(&a[0], &b[0]) < 1e-5);
    }

    #[test]
    fn gelu_gradient_matches_finite_differences() {
        let x = randn(&[64], 3);
        let v = Var::from_tensor(&x).unwrap();
        let g = gelu(v.as_tensor()).unwrap().sum_all().unwrap().backward().unwrap();
        let h = 1e-6;
        let numeric = ((gelu(&(&x + h).unwrap()).unwrap() - gelu(&(&x - h).unwrap()).unwrap())
            .unwrap()
            / (2.0 * h))
            .unwrap();
        assert!(max_abs_diff(g.get(v.as_tensor()).unwrap(), &numeric) < 1e-8);
    }

    #[test]
    fn tanh_through_exp_is_within_f32_rounding_of_tanh() {
        let worst = (-200_000..=200_000)
            .map(|i| i as f32 * 1e-4)
            .chain([-1e4, -100.0, 50.0, 1e4, f32::MAX, f32::MIN])
            .map(|u| (tanh(u) as f64 - (u as f64).tanh()).abs())
            .fold(0.0, f64::max);
        assert!(worst < 3e-7, "{worst}");
    }

    #[test]
    fn causal_attention_equals_the_primitive_ops() {
        // 2 samples, 5 positions, width 8 in 2 heads.
        let qkv = Var::from_tensor(&(randn(&[2, 5, 24], 4) * 2.0).unwrap()).unwrap();
        let ours = causal_attention(qkv.as_tensor(), 2).unwrap();
        let theirs = primitive_attention(qkv.as_tensor(), 2).unwrap();
        assert_eq!(ours.dims(), &[2, 5, 8]);
        assert!(max_abs_diff(&ours, &theirs) < 1e-12);
        let weights = randn(ours.dims(), 5);
        let (a, b) = (grads_of(&[&qkv], ours, &weights), grads_of(&[&qkv], theirs, &weights));
        assert!(max_abs_diff(&a[0], &b[0]) < 1e-12);
    }

    #[test]
    fn transformer_kernels_give_the_same_bits_on_any_number_of_threads() {
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let x = Var::from_tensor(&randn(&[9, 70, 48], 6).to_dtype(DType::F32).unwrap())
                    .unwrap();
                let y = gelu(&causal_attention(x.as_tensor(), 4).unwrap()).unwrap();
                let g = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
                let mut all = y.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                let dx = g.get(x.as_tensor()).unwrap().flatten_all().unwrap();
                all.extend(dx.to_vec1::<f32>().unwrap());
                all.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            })
        };
        let one = run(1);
        for threads in [2, 3] {
            assert!(run(threads) == one, "{threads} threads differ from one");
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(causal_attention(&randn(&[2, 3, 4], 7), 1).is_err(), "4 is no 3d");
        assert!(causal_attention(&randn(&[2, 3, 6], 7), 4).is_err(), "2 columns in 4 heads");
        assert!(causal_attention(&randn(&[2, 6], 7), 1).is_err());
        assert!(gelu(&Tensor::new(&[1u32, 2], &Device::Cpu).unwrap()).is_err());
    }
}
