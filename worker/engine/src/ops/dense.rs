//! CPU kernels of the dense layers, each one op with its own backward: the linear layer
//! ([`linear`]), layer normalization ([`layer_norm`]) and the softmax cross-entropy
//! ([`cross_entropy`]).
//!
//! Why: written with candle's primitives, a linear layer is three nodes (matmul, transpose,
//! broadcast add), a layer norm nine and the cross-entropy eight, and in the backward each node
//! allocates a zero gradient and adds to it; on the MLP's and the transformer's small tensors that
//! per-node cost, not the arithmetic, set the speed. The candle matmul also computes the input
//! layer's gradient, which nobody reads.
//!
//! Determinism, as replay requires: the products are gemm calls, which split the destination among
//! threads and never a dot product; every other sum runs over rows in order, or over fixed groups of
//! rows added in order. Results are the same bits on any number of threads.

use candle_core::{
    backend::BackendStorage, bail, CpuStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape,
    Tensor, D,
};
use rayon::prelude::*;

#[cfg(feature = "cuda")]
use super::gpu::{self, launch};
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

use super::{
    bf16::{round_in_place, rounded},
    contiguous, matmul_on, sum_partials, ternary, unary, Elem, Mat, CHUNK,
};

/// Products of fewer multiply-adds than this run on the calling thread, larger ones on gemm's
/// threads in the current rayon pool (the computation's `--threads`). Measured on the 2-core machine:
/// waking the second thread costs about 30 µs a product, and the MLP (products of at most 6.4 · 10⁶)
/// trained at 97–99 k samples/s with its products on one thread against 80–84 k on two, while the
/// transformer's (8.4 · 10⁶ to 3.4 · 10⁷) gained 6 % from two. The choice depends on the shapes
/// alone, and gemm sums in the same order either way.
const ONE_THREAD_BELOW: usize = 1 << 23;

/// Where a product of `work` multiply-adds runs.
fn pool(work: usize) -> gemm::Parallelism {
    if work < ONE_THREAD_BELOW {
        gemm::Parallelism::None
    } else {
        gemm::Parallelism::Rayon(0)
    }
}

/// Rows per partial sum of the layer norm's ∂γ and ∂β (fixed, for the same bits on any number of
/// threads).
const ROWS_PER_PARTIAL: usize = 64;

/// `x · Wᵀ + b` over the last dimension of `x` (`[.., in]`), for `weight` `[out, in]` and an
/// optional `bias` `[out]`: `[.., out]`. One gemm forward; backward one gemm for ∂W, one for ∂x
/// (none when `x` is no variable: the input layer) and a column sum for ∂b.
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    linear_op(x, weight, bias, false)
}

/// [`linear`] in bf16 mixed precision, one op each way: `round(round(x) · round(W)ᵀ + round(b))`,
/// and in the backward `∂y` rounded before the products and `∂x`, `∂W`, `∂b` after — the same
/// bits as [`super::round_bf16`] around each operand and the output of [`linear`], without their
/// graph nodes and copies.
pub fn linear_bf16(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    linear_op(x, weight, bias, true)
}

/// The [`Linear`] op on `x`, in f32 or with `bf16`'s roundings.
fn linear_op(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, bf16: bool) -> Result<Tensor> {
    let (out, inp) = weight.dims2()?;
    if x.dims().last() != Some(&inp) {
        bail!("linear: weight [{out}, {inp}] does not fit input {:?}", x.dims());
    }
    let (bias, has_bias) = match bias {
        Some(b) => (b.contiguous()?, true),
        None => (Tensor::zeros(out, weight.dtype(), weight.device())?, false),
    };
    // No reshape to 2-D and back: each would be a node of the graph, whose gradient candle's
    // backward allocates, zeroes and adds to (a tenth of the transformer's step).
    x.contiguous()?.apply_op3(&weight.contiguous()?, &bias, Linear { has_bias, bf16 })
}

/// The linear layer: `(x [.., in], W [out, in], b [out])` → `[.., out]`, the leading dimensions of
/// `x` its rows.
struct Linear {
    /// Whether `b` is the layer's bias (else zeros, which get no gradient).
    has_bias: bool,
    /// Operands, output and gradients rounded to bf16 ([`linear_bf16`]).
    bf16: bool,
}

/// `(rows, in, out)` of a linear layer's input and weight.
fn linear_dims(x: &Layout, w: &Layout) -> Result<(usize, usize, usize)> {
    match (x.dims().split_last(), w.dims()) {
        (Some((inp, lead)), [out, inp2]) if inp == inp2 => Ok((lead.iter().product(), *inp, *out)),
        _ => bail!("linear: weight {:?} does not fit input {:?}", w.dims(), x.dims()),
    }
}

/// The shape of a linear layer's output: `x`'s with `out` columns.
fn linear_output(x: &Layout, out: usize) -> Shape {
    let mut dims = x.dims().to_vec();
    if let Some(last) = dims.last_mut() {
        *last = out;
    }
    Shape::from(dims)
}

fn linear_forward<T: Elem>(x: &[T], w: &[T], b: &[T], rows: usize, inp: usize, one: T) -> Vec<T> {
    let out = b.len();
    let mut y = b.repeat(rows);
    if rows > 0 && inp > 0 {
        let x = Mat { values: x, rows, cols: inp, t: false };
        let w_t = Mat { values: w, rows: inp, cols: out, t: true };
        matmul_on(&mut y, x, w_t, true, one, pool(rows * inp * out));
    }
    y
}

impl CustomOp3 for Linear {
    fn name(&self) -> &'static str {
        "ergon-linear"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (rows, inp, out) = linear_dims(l1, l2)?;
        if l3.dims() != [out] {
            bail!("linear: the bias must be [{out}], got {:?}", l3.dims());
        }
        let y = ternary!(self.name(), (s1, l1), (s2, l2), (s3, l3), |x, w, b, one| {
            if self.bf16 {
                let (x, w, b) = (rounded(x), rounded(w), rounded(b));
                let mut y = linear_forward(&x, &w, &b, rows, inp, one);
                round_in_place(&mut y);
                y
            } else {
                linear_forward(x, w, b, rows, inp, one)
            }
        });
        Ok((y, linear_output(l1, out)))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let with_x = x.track_op();
        let grads =
            x.apply_op3_no_bwd(w, &grad.contiguous()?, &LinearGrad { with_x, bf16: self.bf16 })?;
        let (nx, nw) = (if with_x { x.elem_count() } else { 0 }, w.elem_count());
        let dx = with_x.then(|| grads.narrow(0, 0, nx)?.reshape(x.shape())).transpose()?;
        let dw = grads.narrow(0, nx, nw)?.reshape(w.shape())?;
        let db = self.has_bias.then(|| grads.narrow(0, nx + nw, b.elem_count())).transpose()?;
        Ok((dx, Some(dw), db))
    }
}

/// The backward of [`Linear`]: `(x, W, ∂y)` → `∂x ‖ ∂W ‖ ∂b`, flat (`∂x` only when `with_x`).
struct LinearGrad {
    with_x: bool,
    /// [`linear_bf16`]'s: inputs and results rounded to bf16.
    bf16: bool,
}

fn linear_backward<T: Elem>(
    x: &[T],
    w: &[T],
    dy: &[T],
    (rows, inp, out): (usize, usize, usize),
    with_x: bool,
    one: T,
) -> Vec<T> {
    let nx = if with_x { rows * inp } else { 0 };
    let mut grads = vec![T::default(); nx + out * inp + out];
    let (dx, rest) = grads.split_at_mut(nx);
    let (dw, db) = rest.split_at_mut(out * inp);
    if rows == 0 {
        return grads;
    }
    // ∂W = ∂yᵀ · x
    let dy_t = Mat { values: dy, rows: out, cols: rows, t: true };
    matmul_on(
        dw,
        dy_t,
        Mat { values: x, rows, cols: inp, t: false },
        false,
        one,
        pool(rows * inp * out),
    );
    // ∂b: the column sums of ∂y, row after row.
    for row in dy.chunks(out) {
        for (d, v) in db.iter_mut().zip(row) {
            *d += *v;
        }
    }
    if with_x && out > 0 {
        // ∂x = ∂y · W
        let dy = Mat { values: dy, rows, cols: out, t: false };
        matmul_on(
            dx,
            dy,
            Mat { values: w, rows: out, cols: inp, t: false },
            false,
            one,
            pool(rows * inp * out),
        );
    }
    grads
}

impl CustomOp3 for LinearGrad {
    fn name(&self) -> &'static str {
        "ergon-linear-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (rows, inp, out) = linear_dims(l1, l2)?;
        if l3.shape() != &linear_output(l1, out) {
            bail!("linear backward: the gradient has shape {:?}", l3.dims());
        }
        let grads = ternary!(self.name(), (s1, l1), (s2, l2), (s3, l3), |x, w, dy, one| {
            if self.bf16 {
                let (x, w, dy) = (rounded(x), rounded(w), rounded(dy));
                let mut grads = linear_backward(&x, &w, &dy, (rows, inp, out), self.with_x, one);
                round_in_place(&mut grads);
                grads
            } else {
                linear_backward(x, w, dy, (rows, inp, out), self.with_x, one)
            }
        });
        let nx = if self.with_x { rows * inp } else { 0 };
        Ok((grads, Shape::from(nx + out * inp + out)))
    }
}

/// Layer normalization over the last dimension of `x` (`[.., d]`): `(x − mean) / √(var + eps) · γ
/// + β`, with the biased variance, for `gamma` and `beta` `[d]`.
pub fn layer_norm(x: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f64) -> Result<Tensor> {
    x.contiguous()?.apply_op3(&gamma.contiguous()?, &beta.contiguous()?, LayerNorm { eps })
}

struct LayerNorm {
    eps: f64,
}

/// The width `d` of the normalized rows, checked against `γ` and `β` (or `∂y`).
fn norm_width(x: &Layout, gamma: &Layout) -> Result<usize> {
    match (x.dims().last(), gamma.dims()) {
        (Some(d), [g]) if d == g && *d > 0 => Ok(*d),
        (_, g) => bail!("layer norm: γ and β {g:?} do not fit input {:?}", x.dims()),
    }
}

/// A row's mean and `1/√(var + eps)`.
fn moments<T: Elem>(row: &[T], eps: T) -> (T, T) {
    let n = T::of(row.len() as f64);
    let mut sum = T::default();
    for v in row {
        sum += *v;
    }
    let mean = sum / n;
    let mut sq = T::default();
    for v in row {
        sq += (*v - mean) * (*v - mean);
    }
    (mean, T::of(1.0) / (sq / n + eps).sqrt())
}

fn layer_norm_forward<T: Elem>(x: &[T], gamma: &[T], beta: &[T], eps: f64) -> Vec<T> {
    let d = gamma.len();
    let mut y = vec![T::default(); x.len()];
    y.par_chunks_mut(d).zip(x.par_chunks(d)).with_min_len(CHUNK / d + 1).for_each(|(y, x)| {
        let (mean, rstd) = moments(x, T::of(eps));
        for (((y, x), g), b) in y.iter_mut().zip(x).zip(gamma).zip(beta) {
            *y = (*x - mean) * rstd * *g + *b;
        }
    });
    y
}

impl CustomOp3 for LayerNorm {
    fn name(&self) -> &'static str {
        "ergon-layer-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        norm_width(l1, l2)?;
        norm_width(l1, l3)?;
        let y = ternary!(self.name(), (s1, l1), (s2, l2), (s3, l3), |x, g, b, _one| {
            layer_norm_forward(x, g, b, self.eps)
        });
        Ok((y, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let d = norm_width(l1, l2)?;
        norm_width(l1, l3)?;
        let (x, gamma, beta) = (gpu::f32s(s1, l1)?, gpu::f32s(s2, l2)?, gpu::f32s(s3, l3)?);
        let device = &s1.device;
        let rows = x.len() / d;
        let y = gpu::alloc(device, x.len())?;
        let (n, width, eps) = (rows as u64, d as u32, self.eps as f32);
        launch!(device, "ergon_layer_norm_f32", rows, &x, &gamma, &beta, &y, &n, &width, &eps);
        Ok((gpu::storage(y, device.clone()), l1.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        gamma: &Tensor,
        beta: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grads =
            x.apply_op3_no_bwd(gamma, &grad.contiguous()?, &LayerNormGrad { eps: self.eps })?;
        let (n, d) = (x.elem_count(), gamma.elem_count());
        let dx = grads.narrow(0, 0, n)?.reshape(x.shape())?;
        let dgamma = grads.narrow(0, n, d)?;
        let dbeta = grads.narrow(0, n + d, beta.elem_count())?;
        Ok((Some(dx), Some(dgamma), Some(dbeta)))
    }
}

/// The backward of [`LayerNorm`]: `(x, γ, ∂y)` → `∂x ‖ ∂γ ‖ ∂β`, flat.
struct LayerNormGrad {
    eps: f64,
}

/// Per row, with `x̂ = (x − mean)·r` and `g = ∂y·γ`: `∂x = r·(g − mean(g) − x̂·mean(g·x̂))`; `∂γ` and
/// `∂β` sum `∂y·x̂` and `∂y` over the rows.
fn layer_norm_backward<T: Elem>(x: &[T], gamma: &[T], dy: &[T], eps: f64) -> Vec<T> {
    let d = gamma.len();
    let n = T::of(d as f64);
    let mut dx = vec![T::default(); x.len()];
    let groups = (x.len() / d).div_ceil(ROWS_PER_PARTIAL);
    let mut partial = vec![T::default(); groups * 2 * d];
    let span = ROWS_PER_PARTIAL * d;
    partial
        .par_chunks_mut(2 * d)
        .zip(dx.par_chunks_mut(span))
        .zip(x.par_chunks(span).zip(dy.par_chunks(span)))
        .for_each(|((acc, dx), (x, dy))| {
            let (dgamma, dbeta) = acc.split_at_mut(d);
            for ((dx, x), dy) in dx.chunks_mut(d).zip(x.chunks(d)).zip(dy.chunks(d)) {
                let (mean, rstd) = moments(x, T::of(eps));
                let (mut g_mean, mut gx_mean) = (T::default(), T::default());
                for i in 0..d {
                    let xhat = (x[i] - mean) * rstd;
                    let g = dy[i] * gamma[i];
                    g_mean += g;
                    gx_mean += g * xhat;
                    dgamma[i] += dy[i] * xhat;
                    dbeta[i] += dy[i];
                }
                let (g_mean, gx_mean) = (g_mean / n, gx_mean / n);
                for i in 0..d {
                    let xhat = (x[i] - mean) * rstd;
                    dx[i] = rstd * (dy[i] * gamma[i] - g_mean - xhat * gx_mean);
                }
            }
        });
    let mut out = dx;
    out.extend(sum_partials(&partial, 2 * d));
    out
}

impl CustomOp3 for LayerNormGrad {
    fn name(&self) -> &'static str {
        "ergon-layer-norm-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let d = norm_width(l1, l2)?;
        if l3.dims() != l1.dims() {
            bail!("layer norm backward: the gradient has shape {:?}", l3.dims());
        }
        let grads = ternary!(self.name(), (s1, l1), (s2, l2), (s3, l3), |x, g, dy, _one| {
            layer_norm_backward(x, g, dy, self.eps)
        });
        Ok((grads, Shape::from(l1.shape().elem_count() + 2 * d)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let d = norm_width(l1, l2)?;
        if l3.dims() != l1.dims() {
            bail!("layer norm backward: the gradient has shape {:?}", l3.dims());
        }
        let (x, gamma, dy) = (gpu::f32s(s1, l1)?, gpu::f32s(s2, l2)?, gpu::f32s(s3, l3)?);
        let device = &s1.device;
        let rows = x.len() / d;
        let groups = rows.div_ceil(ROWS_PER_PARTIAL);
        // ∂x, then ∂γ ‖ ∂β, in one buffer, as the CPU returns them.
        let mut out = gpu::alloc(device, x.len() + 2 * d)?;
        let moments = gpu::alloc(device, 2 * rows)?;
        let partial = gpu::alloc(device, groups * 2 * d)?;
        let (n, width, eps, per) =
            (rows as u64, d as u32, self.eps as f32, ROWS_PER_PARTIAL as u32);
        {
            let (mut dx, mut sums) = out.split_at_mut(x.len());
            launch!(
                device,
                "ergon_layer_norm_dx_f32",
                rows,
                &x,
                &gamma,
                &dy,
                &mut dx,
                &moments,
                &n,
                &width,
                &eps
            );
            launch!(
                device,
                "ergon_layer_norm_partials_f32",
                groups * d,
                &x,
                &dy,
                &moments,
                &partial,
                &n,
                &width,
                &per
            );
            let (groups, both) = (groups as u64, 2 * width);
            launch!(device, "ergon_sum_partials_f32", 2 * d, &partial, &mut sums, &groups, &both);
        }
        Ok((gpu::storage(out, device.clone()), Shape::from(x.len() + 2 * d)))
    }
}

/// Mean softmax cross-entropy of `logits` (`[.., C]`, `N` rows of `C` classes) against `targets`
/// (u32, `N` values): `mean(logsumexp(row) − row[target])`, a scalar. Backward:
/// `(softmax(row) − onehot(target)) / N`.
/// A target `≥ C` is an error.
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    if targets.dtype() != DType::U32 {
        bail!("cross-entropy: the targets must be u32, not {:?}", targets.dtype());
    }
    logits.contiguous()?.apply_op2(&targets.contiguous()?, CrossEntropy)
}

struct CrossEntropy;

/// `(rows, classes)` and the targets, checked.
fn targets<'a>(
    logits: &Layout,
    s: &'a CpuStorage,
    l: &Layout,
    op: &str,
) -> Result<((usize, usize), &'a [u32])> {
    let CpuStorage::U32(all) = s else { bail!("{op}: the targets must be u32") };
    let t = contiguous(all, l, op)?;
    let (rows, classes) = rows_and_classes(logits, t.len(), op)?;
    if let Some(bad) = t.iter().find(|t| **t as usize >= classes) {
        bail!("{op}: target {bad} is not one of {classes} classes");
    }
    Ok(((rows, classes), t))
}

/// The `(rows, classes)` of `logits` (`[.., C]`), checked against the number of targets.
fn rows_and_classes(logits: &Layout, targets: usize, op: &str) -> Result<(usize, usize)> {
    let Some((&classes, lead)) = logits.dims().split_last() else {
        bail!("{op}: the logits must be [.., C], got a scalar")
    };
    let rows = lead.iter().product();
    if targets != rows || classes == 0 {
        bail!("{op}: {targets} targets for logits {:?}", logits.dims());
    }
    Ok((rows, classes))
}

/// On a GPU: `(rows, classes)`, the logits and the targets, their shapes checked. A target out
/// of range cannot be checked there without a copy back: the kernels give that row a NaN loss, and
/// the training stops as diverged. (The engine's targets are checked against the classes when the
/// data loads.)
#[cfg(feature = "cuda")]
#[allow(clippy::type_complexity)]
fn gpu_targets<'a>(
    logits: &'a CudaStorage,
    lz: &Layout,
    targets: &'a CudaStorage,
    lt: &Layout,
    op: &str,
) -> Result<(
    (usize, usize),
    candle_core::cuda::cudarc::driver::CudaView<'a, f32>,
    candle_core::cuda::cudarc::driver::CudaView<'a, u32>,
)> {
    let t = gpu::u32s(targets, lt)?;
    let shape = rows_and_classes(lz, t.len(), op)?;
    Ok((shape, gpu::f32s(logits, lz)?, t))
}

/// A row's maximum and `ln Σ exp(v − max)`.
fn log_sum_exp<T: Elem>(row: &[T]) -> (T, T) {
    let max = row.iter().fold(row[0], |m, v| if *v > m { *v } else { m });
    // The exponentials a block at a time into a buffer (a loop that vectorizes), then added in
    // order: the same sum as one element at a time.
    let (mut sum, mut block) = (T::default(), [T::default(); 64]);
    for part in row.chunks(block.len()) {
        let block = &mut block[..part.len()];
        for (e, v) in block.iter_mut().zip(part) {
            *e = (*v - max).exp();
        }
        for e in block.iter() {
            sum += *e;
        }
    }
    (max, sum.ln())
}

fn cross_entropy_forward<T: Elem>(z: &[T], t: &[u32], classes: usize) -> T {
    let losses: Vec<T> = z
        .par_chunks(classes)
        .with_min_len(CHUNK / classes + 1)
        .zip(t)
        .map(|(row, t)| {
            let (max, lse) = log_sum_exp(row);
            lse - (row[*t as usize] - max)
        })
        .collect();
    let mut sum = T::default();
    for l in &losses {
        sum += *l;
    }
    sum / T::of(t.len().max(1) as f64)
}

impl CustomOp2 for CrossEntropy {
    fn name(&self) -> &'static str {
        "ergon-cross-entropy"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let n = self.name();
        let ((_, classes), t) = targets(l1, s2, l2, n)?;
        let loss = unary!(n, s1, l1, |z| vec![cross_entropy_forward(z, t, classes)]);
        Ok((loss, Shape::from(())))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let ((rows, classes), z, t) = gpu_targets(s1, l1, s2, l2, self.name())?;
        let device = &s1.device;
        let losses = gpu::alloc(device, rows)?;
        let loss = gpu::alloc(device, 1)?;
        let (n, c) = (rows as u64, classes as u32);
        launch!(device, "ergon_cross_entropy_rows_f32", rows, &z, &t, &losses, &n, &c);
        launch!(device, "ergon_mean_f32", 1, &losses, &loss, &n);
        Ok((gpu::storage(loss, device.clone()), Shape::from(())))
    }

    fn bwd(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let rows = (logits.elem_count() / logits.dim(D::Minus1)?.max(1)).max(1) as f64;
        let grad = grad.to_dtype(logits.dtype())?;
        Ok((Some(logits.apply_op3_no_bwd(targets, &grad, &CrossEntropyGrad { rows })?), None))
    }
}

/// The backward of [`CrossEntropy`]: `(logits, targets, ∂loss)` → `scale · (softmax − onehot)` with
/// `scale = ∂loss / rows`. The loss's gradient is read where it is (on a GPU, by the kernel), so the
/// backward pass never waits for the device.
struct CrossEntropyGrad {
    /// The rows the loss averages over.
    rows: f64,
}

fn cross_entropy_backward<T: Elem>(z: &[T], t: &[u32], classes: usize, scale: f64) -> Vec<T> {
    let scale = T::of(scale);
    let mut dz = vec![T::default(); z.len()];
    dz.par_chunks_mut(classes)
        .zip(z.par_chunks(classes))
        .zip(t)
        .with_min_len(CHUNK / classes + 1)
        .for_each(|((dz, row), t)| {
            let (max, lse) = log_sum_exp(row);
            for (d, v) in dz.iter_mut().zip(row) {
                *d = (*v - max - lse).exp() * scale;
            }
            dz[*t as usize] = dz[*t as usize] - scale;
        });
    dz
}

impl CustomOp3 for CrossEntropyGrad {
    fn name(&self) -> &'static str {
        "ergon-cross-entropy-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let n = self.name();
        let ((_, classes), t) = targets(l1, s2, l2, n)?;
        let grad = match s3 {
            CpuStorage::F32(g) => contiguous(g, l3, n)?.first().map(|g| *g as f64),
            CpuStorage::F64(g) => contiguous(g, l3, n)?.first().copied(),
            other => bail!("{n}: unsupported dtype {:?}", other.dtype()),
        };
        let Some(grad) = grad.filter(|_| l3.shape().elem_count() == 1) else {
            bail!("{n}: the loss's gradient must be one value, got {:?}", l3.dims())
        };
        let scale = grad / self.rows;
        let dz = unary!(n, s1, l1, |z| cross_entropy_backward(z, t, classes, scale));
        Ok((dz, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let ((rows, classes), z, t) = gpu_targets(s1, l1, s2, l2, self.name())?;
        let grad = gpu::f32s(s3, l3)?;
        if grad.len() != 1 {
            bail!("{}: the loss's gradient must be one value, got {:?}", self.name(), l3.dims());
        }
        let device = &s1.device;
        let dz = gpu::alloc(device, z.len())?;
        let (n, c, divisor) = (rows as u64, classes as u32, self.rows);
        launch!(device, "ergon_cross_entropy_grad_f32", rows, &z, &t, &grad, &dz, &n, &c, &divisor);
        Ok((gpu::storage(dz, device.clone()), l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::*;
    use crate::ops::tests::{grads_of, max_abs_diff, randn};

    #[test]
    fn linear_matches_candle_forward_and_backward() {
        for (lead, bias) in [(vec![5], true), (vec![2, 3], true), (vec![4], false)] {
            let x = Var::from_tensor(&randn(&[lead.clone(), vec![7]].concat(), 1)).unwrap();
            let w = Var::from_tensor(&randn(&[6, 7], 2)).unwrap();
            let b = Var::from_tensor(&randn(&[6], 3)).unwrap();
            let ours = linear(x.as_tensor(), w.as_tensor(), bias.then(|| b.as_tensor())).unwrap();
            let theirs = x.as_tensor().broadcast_matmul(&w.as_tensor().t().unwrap()).unwrap();
            let theirs = if bias { theirs.broadcast_add(b.as_tensor()).unwrap() } else { theirs };
            assert_eq!(ours.dims(), theirs.dims());
            assert!(max_abs_diff(&ours, &theirs) < 1e-12);
            let weights = randn(ours.dims(), 4);
            let args: &[&Var] = if bias { &[&x, &w, &b] } else { &[&x, &w] };
            for (a, b) in
                grads_of(args, ours, &weights).iter().zip(grads_of(args, theirs, &weights))
            {
                assert!(max_abs_diff(a, &b) < 1e-12, "lead {lead:?}, bias {bias}");
            }
        }
    }

    /// The fused bf16 linear layer gives the bits of the roundings around the f32 one, values and
    /// gradients (a product of more than 512 terms included), on one and on two threads.
    #[test]
    fn linear_bf16_is_the_roundings_around_linear_bit_for_bit() {
        use super::super::round_bf16;
        let f32s = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
        for (lead, inp, bias) in [(vec![5], 7, true), (vec![2, 3], 600, true), (vec![4], 9, false)]
        {
            let x =
                Var::from_tensor(&f32s(&randn(&[lead.clone(), vec![inp]].concat(), 1))).unwrap();
            let w = Var::from_tensor(&f32s(&randn(&[6, inp], 2))).unwrap();
            let b = Var::from_tensor(&f32s(&randn(&[6], 3))).unwrap();
            let weights = f32s(&randn(&[lead.clone(), vec![6]].concat(), 4));
            let args: &[&Var] = if bias { &[&x, &w, &b] } else { &[&x, &w] };
            let fused = || {
                let y = linear_bf16(x.as_tensor(), w.as_tensor(), bias.then(|| b.as_tensor()));
                y.unwrap()
            };
            let around = || {
                let r = |t: &Tensor| round_bf16(t).unwrap();
                let rb = r(b.as_tensor());
                let y = linear(&r(x.as_tensor()), &r(w.as_tensor()), bias.then_some(&rb)).unwrap();
                r(&y)
            };
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let (ours, theirs) = pool.install(|| (fused(), around()));
                let bits = |t: &Tensor| {
                    t.flatten_all()
                        .unwrap()
                        .to_vec1::<f32>()
                        .unwrap()
                        .iter()
                        .map(|v| v.to_bits())
                        .collect::<Vec<_>>()
                };
                assert_eq!(bits(&ours), bits(&theirs), "values, in {inp}");
                let (g1, g2) = pool
                    .install(|| (grads_of(args, ours, &weights), grads_of(args, theirs, &weights)));
                for (a, b) in g1.iter().zip(&g2) {
                    assert_eq!(bits(a), bits(b), "gradients, in {inp}, bias {bias}");
                }
            }
        }
    }

    #[test]
    fn the_input_of_the_first_linear_layer_gets_no_gradient() {
        let x = randn(&[3, 4], 5);
        let w = Var::from_tensor(&randn(&[2, 4], 6)).unwrap();
        let g = linear(&x, w.as_tensor(), None).unwrap().sum_all().unwrap().backward().unwrap();
        assert!(g.get(&x).is_none());
        assert!(g.get(w.as_tensor()).is_some());
    }

    #[test]
    fn layer_norm_matches_the_primitive_ops() {
        // 130 rows: three partial groups, the last one short.
        let x = Var::from_tensor(&randn(&[2, 65, 6], 7)).unwrap();
        let gamma = Var::from_tensor(&randn(&[6], 8)).unwrap();
        let beta = Var::from_tensor(&randn(&[6], 9)).unwrap();
        let ours = layer_norm(x.as_tensor(), gamma.as_tensor(), beta.as_tensor(), 1e-5).unwrap();
        let xt = x.as_tensor();
        let centered = xt.broadcast_sub(&xt.mean_keepdim(D::Minus1).unwrap()).unwrap();
        let var = centered.sqr().unwrap().mean_keepdim(D::Minus1).unwrap();
        let normed = centered.broadcast_div(&(var + 1e-5).unwrap().sqrt().unwrap()).unwrap();
        let theirs = normed
            .broadcast_mul(gamma.as_tensor())
            .unwrap()
            .broadcast_add(beta.as_tensor())
            .unwrap();
        assert!(max_abs_diff(&ours, &theirs) < 1e-12);
        let weights = randn(ours.dims(), 10);
        let args = [&x, &gamma, &beta];
        for (a, b) in grads_of(&args, ours, &weights).iter().zip(grads_of(&args, theirs, &weights))
        {
            assert!(max_abs_diff(a, &b) < 1e-12);
        }
    }

    #[test]
    fn cross_entropy_matches_the_primitive_ops() {
        let logits = Var::from_tensor(&(randn(&[9, 5], 11) * 4.0).unwrap()).unwrap();
        let t = Tensor::new(&[0u32, 4, 2, 2, 1, 3, 0, 4, 1], &Device::Cpu).unwrap();
        let ours = cross_entropy(logits.as_tensor(), &t).unwrap();
        let z = logits.as_tensor();
        let z = z.broadcast_sub(&z.max_keepdim(1).unwrap().detach()).unwrap();
        let lse = z.exp().unwrap().sum_keepdim(1).unwrap().log().unwrap();
        let picked = z.broadcast_sub(&lse).unwrap().gather(&t.reshape((9, 1)).unwrap(), 1);
        let theirs = picked.unwrap().mean_all().unwrap().neg().unwrap();
        assert!(max_abs_diff(&ours, &theirs) < 1e-12);
        let scale = Tensor::new(3.0f64, &Device::Cpu).unwrap();
        let (a, b) = (
            grads_of(&[&logits], ours, &scale).remove(0),
            grads_of(&[&logits], theirs, &scale).remove(0),
        );
        assert!(max_abs_diff(&a, &b) < 1e-12);
    }

    /// A sequence model's logits `[B, T, C]` go in as they are (no reshape node): the same loss and
    /// gradient bits as their `B·T` rows, and the gradient in the logits' shape.
    #[test]
    fn cross_entropy_of_sequence_logits_is_that_of_their_rows() {
        let logits = Var::from_tensor(&(randn(&[2, 3, 5], 12) * 4.0).unwrap()).unwrap();
        let rows = Var::from_tensor(&logits.as_tensor().reshape((6, 5)).unwrap()).unwrap();
        let t = Tensor::new(&[0u32, 4, 2, 2, 1, 3], &Device::Cpu).unwrap();
        let seq = cross_entropy(logits.as_tensor(), &t).unwrap();
        let flat = cross_entropy(rows.as_tensor(), &t).unwrap();
        let bits = |t: &Tensor| -> Vec<u64> {
            t.flatten_all().unwrap().to_vec1::<f64>().unwrap().iter().map(|v| v.to_bits()).collect()
        };
        assert_eq!(bits(&seq), bits(&flat));
        let (a, b) = (seq.backward().unwrap(), flat.backward().unwrap());
        let (a, b) = (a.get(logits.as_tensor()).unwrap(), b.get(rows.as_tensor()).unwrap());
        assert_eq!(a.dims(), [2, 3, 5]);
        assert_eq!(bits(a), bits(b));
        assert!(cross_entropy(logits.as_tensor(), &t.narrow(0, 0, 5).unwrap()).is_err());
    }

    #[test]
    fn dense_kernels_give_the_same_bits_on_any_number_of_threads() {
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let f32s = |shape: &[usize], seed| {
                    Var::from_tensor(&randn(shape, seed).to_dtype(DType::F32).unwrap()).unwrap()
                };
                // 600 · 130 · 110 multiply-adds: over ONE_THREAD_BELOW, on gemm's threads.
                let (x, w, b) = (f32s(&[600, 130], 12), f32s(&[110, 130], 13), f32s(&[110], 14));
                let (g, be) = (f32s(&[110], 15), f32s(&[110], 16));
                let h = linear(x.as_tensor(), w.as_tensor(), Some(b.as_tensor())).unwrap();
                let h = layer_norm(&h, g.as_tensor(), be.as_tensor(), 1e-5).unwrap();
                let t: Vec<u32> = (0..600).map(|i| (i * 7 % 110) as u32).collect();
                let t = Tensor::from_vec(t, 600, &Device::Cpu).unwrap();
                let loss = cross_entropy(&h, &t).unwrap();
                let grads = loss.backward().unwrap();
                let mut all = vec![loss.to_scalar::<f32>().unwrap()];
                for v in [&x, &w, &b, &g, &be] {
                    let t = grads.get(v.as_tensor()).unwrap();
                    all.extend(t.flatten_all().unwrap().to_vec1::<f32>().unwrap());
                }
                all.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            })
        };
        let one = run(1);
        for threads in [2, 3, 8] {
            assert!(run(threads) == one, "{threads} threads differ from one");
        }
    }

    #[test]
    fn a_product_has_the_same_bits_on_one_thread_and_on_gemms_threads() {
        let (m, k, n) = (300, 700, 90);
        let f32s = |len, seed| {
            let t = randn(&[len], seed).to_dtype(DType::F32).unwrap();
            t.to_vec1::<f32>().unwrap()
        };
        let (a, b) = (f32s(m * k, 22), f32s(k * n, 23));
        let product = |parallelism| {
            let mut dst = vec![0f32; m * n];
            let (a, b) = (
                Mat { values: &a, rows: m, cols: k, t: false },
                Mat { values: &b, rows: k, cols: n, t: false },
            );
            matmul_on(&mut dst, a, b, false, 1.0, parallelism);
            dst.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let threaded = pool.install(|| product(gemm::Parallelism::Rayon(0)));
        assert!(threaded == product(gemm::Parallelism::None));
    }

    #[test]
    fn bad_input_is_an_error() {
        let x = randn(&[3, 4], 17);
        assert!(linear(&x, &randn(&[2, 5], 18), None).is_err());
        assert!(linear(&x, &randn(&[2, 4], 18), Some(&randn(&[3], 19))).is_err());
        assert!(layer_norm(&x, &randn(&[3], 20), &randn(&[4], 21), 1e-5).is_err());
        let t = Tensor::new(&[0u32, 1, 4], &Device::Cpu).unwrap();
        assert!(cross_entropy(&x, &t).is_err(), "target 4 of 4 classes");
        assert!(cross_entropy(&x, &t.narrow(0, 0, 2).unwrap()).is_err(), "2 targets, 3 rows");
        assert!(cross_entropy(&x, &t.to_dtype(DType::F32).unwrap()).is_err());
    }
}
