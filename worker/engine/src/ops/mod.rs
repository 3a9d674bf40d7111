//! CPU kernels of the model's layers, each with its own backward pass: here convolutions,
//! max-pooling and the element-wise activations (`Pointwise`: ReLU, GELU); the linear layer, layer
//! norm and cross-entropy in `dense`; GELU and causal attention in `transformer`; and the
//! optimizers' in-place updates ([`update`]).
//!
//! Why not candle's: its CPU convolution backward runs a transposed convolution for the input gradient
//! and a convolution of transposed tensors for the kernel gradient, both slow direct loops, and it
//! computes the image gradient of the input layer that nobody reads; and each of candle's ops is a node
//! whose backward allocates a zero gradient and adds to it. Here a convolution (with its bias) is one
//! op: per sample, one gemm on the im2col patch matrix forward, two backward and a col2im, no image
//! gradient when the input is not a variable (the input layer). A convolution followed by a ReLU
//! and a max-pool is one op ([`conv2d_relu_max_pool2d`]): the convolution's output, a CNN's largest
//! tensor, lives one sample at a time in a thread's buffer, and neither it nor its gradient is ever
//! stored whole (measured: the CNN example trained 40 % faster). A ReLU followed by a max-pool is
//! one op too ([`relu_max_pool2d`]). `exp` and `ln` come from [`elementary`], not libm.
//!
//! Determinism: every kernel splits its work by sample (or by image plane, or row), each sum runs in
//! a fixed order and the weight gradients add fixed groups of samples in order, so results are
//! bit-identical for any number of threads, as replay requires. On a GPU the model uses candle's own
//! kernels instead (see [`crate::model`]).

use candle_core::{
    backend::BackendStorage, bail, CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Result,
    Shape, Tensor,
};
use rayon::prelude::*;
use std::sync::{Arc, OnceLock};

mod bf16;
mod dense;
mod elementary;
#[cfg(feature = "cuda")]
mod gpu;
mod transformer;

pub use bf16::round_bf16;
pub use dense::{cross_entropy, layer_norm, linear, linear_bf16};
pub use transformer::{causal_attention, gelu, silu};

/// The element types the kernels support: f32 (training) and f64 (gradient checks).
trait Elem:
    Copy
    + Default
    + PartialOrd
    + std::ops::AddAssign
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + Send
    + Sync
    + 'static
{
    /// `v` rounded to this type.
    fn of(v: f64) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    /// The nearest bf16 value (ties to even), kept in this type ([`round_bf16`]).
    fn bf16(self) -> Self;
}

macro_rules! elem {
    ($t:ty, $exp:expr, $ln:expr, $bf16:expr) => {
        impl Elem for $t {
            fn of(v: f64) -> Self {
                v as $t
            }
            #[inline]
            fn exp(self) -> Self {
                $exp(self)
            }
            fn ln(self) -> Self {
                $ln(self)
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline]
            fn bf16(self) -> Self {
                $bf16(self)
            }
        }
    };
}
// Training's f32 takes `exp` and `ln` from `elementary` (the same bits on every CPU and C library);
// f64 only checks gradients in tests, against candle's f64 ops, which use libm.
elem!(f32, elementary::exp, elementary::ln, |v| half::bf16::from_f32(v).to_f32());
elem!(f64, f64::exp, f64::ln, |v| half::bf16::from_f64(v).to_f64());

/// The contiguous values a layout views, or an error naming `op`.
fn contiguous<'a, T>(all: &'a [T], layout: &Layout, op: &str) -> Result<&'a [T]> {
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&all[start..end]),
        None => bail!("{op}: the input must be contiguous"),
    }
}

/// Applies `$body` (an expression in the slice `$v`) to a one-input f32 or f64 storage.
macro_rules! unary {
    ($op:expr, $s:expr, $l:expr, |$v:ident| $body:expr) => {
        match $s {
            CpuStorage::F32(all) => {
                let $v = contiguous(all, $l, $op)?;
                CpuStorage::F32($body)
            }
            CpuStorage::F64(all) => {
                let $v = contiguous(all, $l, $op)?;
                CpuStorage::F64($body)
            }
            other => bail!("{}: unsupported dtype {:?}", $op, other.dtype()),
        }
    };
}
use unary;

/// Applies `$body` (an expression in the slices `$a`, `$b` and the element type's one, `$one`) to two
/// storages, both f32 or both f64.
macro_rules! binary {
    ($op:expr, ($s1:expr, $l1:expr), ($s2:expr, $l2:expr), |$a:ident, $b:ident, $one:ident| $body:expr) => {
        match ($s1, $s2) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => {
                let ($a, $b) = (contiguous(a, $l1, $op)?, contiguous(b, $l2, $op)?);
                let $one = 1f32;
                CpuStorage::F32($body)
            }
            (CpuStorage::F64(a), CpuStorage::F64(b)) => {
                let ($a, $b) = (contiguous(a, $l1, $op)?, contiguous(b, $l2, $op)?);
                let $one = 1f64;
                CpuStorage::F64($body)
            }
            (a, b) => bail!("{}: unsupported dtypes {:?}, {:?}", $op, a.dtype(), b.dtype()),
        }
    };
}
use binary;

/// The sum of equal-length partial sums (`partial`: groups of `width` values), group after group:
/// the order the kernels' determinism rests on.
fn sum_partials<T: Elem>(partial: &[T], width: usize) -> Vec<T> {
    let mut total = vec![T::default(); width];
    for acc in partial.chunks(width) {
        for (t, v) in total.iter_mut().zip(acc) {
            *t += *v;
        }
    }
    total
}

/// The sum of `values` in a fixed order that vectorizes: eight running sums over the values at
/// positions ≡ 0…7 (mod 8), added in order, then the last `len mod 8` values. (One running sum is a
/// chain of dependent additions the compiler may not reorder, one addition's latency each: the
/// convolution's bias gradient sums 784 values per channel and sample that way in the CNN.)
fn sum_lanes<T: Elem>(values: &[T]) -> T {
    let mut lanes = [T::default(); 8];
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            *lane += *v;
        }
    }
    let mut sum = T::default();
    for v in lanes.iter().chain(rest) {
        sum += *v;
    }
    sum
}

/// Applies `$body` (an expression in the slices `$a`, `$b`, `$c` and the element type's one, `$one`)
/// to three storages, all f32 or all f64.
macro_rules! ternary {
    ($op:expr, ($s1:expr, $l1:expr), ($s2:expr, $l2:expr), ($s3:expr, $l3:expr),
     |$a:ident, $b:ident, $c:ident, $one:ident| $body:expr) => {
        match ($s1, $s2, $s3) {
            (CpuStorage::F32(a), CpuStorage::F32(b), CpuStorage::F32(c)) => {
                let ($a, $b, $c) =
                    (contiguous(a, $l1, $op)?, contiguous(b, $l2, $op)?, contiguous(c, $l3, $op)?);
                let $one = 1f32;
                CpuStorage::F32($body)
            }
            (CpuStorage::F64(a), CpuStorage::F64(b), CpuStorage::F64(c)) => {
                let ($a, $b, $c) =
                    (contiguous(a, $l1, $op)?, contiguous(b, $l2, $op)?, contiguous(c, $l3, $op)?);
                let $one = 1f64;
                CpuStorage::F64($body)
            }
            _ => bail!("{}: the inputs must all be f32 or all f64", $op),
        }
    };
}
use ternary;

/// The geometry of a 2-D convolution over `[n, c, h, w]` images with square `k`×`k` kernels.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    k: usize,
    stride: usize,
    pad: usize,
    ho: usize,
    wo: usize,
}

impl Geometry {
    fn new(dims: &[usize], k: usize, stride: usize, pad: usize) -> Result<Geometry> {
        let [n, c, h, w] = dims else {
            bail!("conv2d: the input must be [N, C, H, W], got {dims:?}")
        };
        let (n, c, h, w) = (*n, *c, *h, *w);
        if stride == 0 || h + 2 * pad < k || w + 2 * pad < k {
            bail!(
                "conv2d: a {k}×{k} kernel at stride {stride}, padding {pad} does not fit {h}×{w}"
            );
        }
        let (ho, wo) = ((h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1);
        Ok(Geometry { n, c, h, w, k, stride, pad, ho, wo })
    }

    /// Columns of the patch matrix: one per input channel and kernel position.
    fn patch(&self) -> usize {
        self.c * self.k * self.k
    }

    /// Rows of the patch matrix per sample: one per output position.
    fn positions(&self) -> usize {
        self.ho * self.wo
    }
}

/// The output columns `ow` whose kernel offset `kj` reads a real pixel (not padding), and the pixel
/// column of the first: `ow·stride + kj − pad ∈ [0, w)`.
fn valid_columns(g: Geometry, kj: usize) -> (std::ops::Range<usize>, usize) {
    let lo = g.pad.saturating_sub(kj).div_ceil(g.stride);
    let hi = match (g.w + g.pad).checked_sub(kj + 1) {
        Some(last) => (last / g.stride + 1).min(g.wo),
        None => 0,
    };
    let lo = lo.min(hi);
    (lo..hi, (lo * g.stride + kj).saturating_sub(g.pad))
}

/// The input row that output row `oh` reads at kernel offset `ki`, or `None` in the padding.
fn source_row(g: Geometry, oh: usize, ki: usize) -> Option<usize> {
    (oh * g.stride + ki).checked_sub(g.pad).filter(|r| *r < g.h)
}

/// `im2col` of one image: `[c, h, w]` → the patch matrix `[c·k·k, ho·wo]` (row = channel and kernel
/// offset, column = output position; zeros in the padding).
fn im2col<T: Elem>(x: &[T], g: Geometry, cols: &mut [T]) {
    let l = g.positions();
    for c in 0..g.c {
        let plane = &x[c * g.h * g.w..][..g.h * g.w];
        for ki in 0..g.k {
            for kj in 0..g.k {
                let row = &mut cols[((c * g.k + ki) * g.k + kj) * l..][..l];
                let (valid, first) = valid_columns(g, kj);
                for (oh, out) in row.chunks_mut(g.wo).enumerate() {
                    let Some(r) = source_row(g, oh, ki) else {
                        out.fill(T::default());
                        continue;
                    };
                    let src = &plane[r * g.w..][..g.w];
                    out[..valid.start].fill(T::default());
                    out[valid.end..].fill(T::default());
                    let out = &mut out[valid.clone()];
                    if g.stride == 1 {
                        out.copy_from_slice(&src[first..first + out.len()]);
                    } else {
                        for (i, o) in out.iter_mut().enumerate() {
                            *o = src[first + i * g.stride];
                        }
                    }
                }
            }
        }
    }
}

/// `col2im`, the adjoint of [`im2col`]: adds each patch-matrix entry onto the pixel it came from (in
/// `x`, zero on entry), in a fixed order.
fn col2im<T: Elem>(cols: &[T], g: Geometry, x: &mut [T]) {
    let l = g.positions();
    for c in 0..g.c {
        let plane = &mut x[c * g.h * g.w..][..g.h * g.w];
        for ki in 0..g.k {
            for kj in 0..g.k {
                let row = &cols[((c * g.k + ki) * g.k + kj) * l..][..l];
                let (valid, first) = valid_columns(g, kj);
                for (oh, grad) in row.chunks(g.wo).enumerate() {
                    let Some(r) = source_row(g, oh, ki) else { continue };
                    let dst = &mut plane[r * g.w..][..g.w];
                    let grad = &grad[valid.clone()];
                    if g.stride == 1 {
                        // Contiguous: one vectorized add.
                        for (d, v) in dst[first..first + grad.len()].iter_mut().zip(grad) {
                            *d += *v;
                        }
                    } else {
                        for (i, v) in grad.iter().enumerate() {
                            dst[first + i * g.stride] += *v;
                        }
                    }
                }
            }
        }
    }
}

/// A row-major matrix view for [`matmul`]: its values, rows, columns and whether it is read
/// transposed (`t`: the view is the transpose of the row-major `cols × rows` matrix stored).
struct Mat<'a, T> {
    values: &'a [T],
    rows: usize,
    cols: usize,
    t: bool,
}

impl<T> Mat<'_, T> {
    /// (row stride, column stride).
    fn strides(&self) -> (isize, isize) {
        if self.t {
            (1, self.rows as isize)
        } else {
            (self.cols as isize, 1)
        }
    }
}

/// `dst (+)= a · b` on this thread (single-threaded gemm: the callers parallelize over samples, which
/// keeps every sum's order independent of the thread count). `dst` is row-major `a.rows × b.cols`.
fn matmul<T: Elem>(dst: &mut [T], a: Mat<T>, b: Mat<T>, accumulate: bool, one: T) {
    matmul_on(dst, a, b, accumulate, one, gemm::Parallelism::None)
}

/// Terms of the inner dimension one gemm call sums at most: a product with more adds its blocks
/// one after the other (see [`inner_blocks`]).
///
/// Why: gemm blocks the inner dimension by a size it derives from the CPU's L1 cache (`kc`, at
/// least 512: `gemm-common`'s `kernel_params`), so on CPUs with other caches a product of more
/// than 512 terms per output would be summed in another order — honest replays 7·10⁻⁵ apart in
/// f32 and 2·10⁻² in bf16 (docs/pot-calibration.md, *Another summation order*). Given at most 512
/// terms, gemm sums them in one block on every CPU.
const INNER_BLOCK: usize = 512;

/// The blocks `[start, end)` a product's inner dimension of `k` terms is summed in, in order: as
/// few as hold at most [`INNER_BLOCK`] terms each, of equal size but the last (`⌈k / ⌈k /
/// 512⌉⌉` terms) — the split gemm itself makes with a `kc` of 512, so that CPUs where it already
/// did sum as before. The `other-order` calibration build halves each block instead: another
/// order, to measure what one costs.
fn inner_blocks(k: usize) -> impl Iterator<Item = (usize, usize)> {
    let blocks = k.div_ceil(INNER_BLOCK).max(1);
    let size = k.div_ceil(blocks).max(1);
    let size = if cfg!(feature = "other-order") && size >= 2 { size.div_ceil(2) } else { size };
    (0..k.div_ceil(size).max(1)).map(move |i| (i * size, ((i + 1) * size).min(k)))
}

/// [`matmul`] on `parallelism`. gemm's threads split the destination into blocks and never a dot
/// product, whose terms it adds in an order set by the shapes alone ([`inner_blocks`]): the result
/// is the same bits on any number of threads and any x86-64 CPU with AVX2.
fn matmul_on<T: Elem>(
    dst: &mut [T],
    a: Mat<T>,
    b: Mat<T>,
    accumulate: bool,
    one: T,
    parallelism: gemm::Parallelism,
) {
    assert!(a.cols == b.rows && dst.len() == a.rows * b.cols);
    assert!(a.values.len() >= a.rows * a.cols && b.values.len() >= b.rows * b.cols);
    let ((a_rs, a_cs), (b_rs, b_cs)) = (a.strides(), b.strides());
    for (start, end) in inner_blocks(a.cols) {
        // SAFETY: the asserts above bound every index gemm reads and writes by the slices'
        // lengths; the offsets `start · a_cs` and `start · b_rs` move to column `start` of `a` and
        // row `start` of `b`, and the block reads `end - start ≤ a.cols - start` more.
        unsafe {
            gemm::gemm(
                a.rows,
                b.cols,
                end - start,
                dst.as_mut_ptr(),
                1,
                b.cols as isize,
                accumulate || start > 0,
                a.values.as_ptr().offset(start as isize * a_cs),
                a_cs,
                a_rs,
                b.values.as_ptr().offset(start as isize * b_rs),
                b_cs,
                b_rs,
                one,
                one,
                false,
                false,
                false,
                parallelism,
            )
        }
    }
}

/// Samples per partial sum of the weight gradient: fixed, so that the partial sums (computed in
/// parallel) and their sum (in order) are the same for any number of threads.
const SAMPLES_PER_PARTIAL: usize = 4;

/// A 2-D convolution with bias: `(x [n, c, h, w], weight [o, c, k, k], bias [o])` → `[n, o, ho, wo]`.
/// Each sample is `bias + W · im2col(x)`, one gemm; the patch matrix is rebuilt in the backward
/// pass instead of being kept.
struct Conv2d {
    stride: usize,
    pad: usize,
    /// A ReLU and a max-pooling after the convolution, in the same op.
    pool: Option<ReluPool>,
}

/// The ReLU and max-pooling of [`conv2d_relu_max_pool2d`].
struct ReluPool {
    kernel: usize,
    stride: usize,
    /// Set by the forward pass: per pooled value, the convolution output (within its sample) whose
    /// ReLU won the window, `u32::MAX` where none gets the gradient (see [`pool_windows`]). The
    /// backward routes the gradient with it instead of recomputing the convolution.
    sources: OnceLock<Arc<Vec<u32>>>,
}

impl ReluPool {
    /// The pooling's geometry over the convolution's output `[n, o, ho, wo]`.
    fn geometry(&self, g: Geometry, o: usize) -> Result<Geometry> {
        if o * g.positions() >= u32::MAX as usize {
            bail!("conv2d: {o}×{} outputs a sample do not fit the pooling's index", g.positions());
        }
        Geometry::new(&[g.n, o, g.ho, g.wo], self.kernel, self.stride, 0)
    }
}

impl Conv2d {
    fn geometry(&self, x: &Layout, w: &Layout) -> Result<(Geometry, usize)> {
        let [o, c, k, k2] = w.dims() else { bail!("conv2d: the weight must be [O, C, k, k]") };
        let g = Geometry::new(x.dims(), *k, self.stride, self.pad)?;
        if k != k2 || *c != g.c {
            bail!("conv2d: weight {:?} does not fit input {:?}", w.dims(), x.dims());
        }
        Ok((g, *o))
    }
}

/// One sample's convolution, `y = bias + W · im2col(x)` (`y`: `[o, ho·wo]`), with `cols` as the
/// patch matrix's buffer.
fn conv2d_sample<T: Elem>(x: &[T], w: &[T], b: &[T], g: Geometry, cols: &mut [T], y: &mut [T]) {
    let (l, o) = (g.positions(), b.len());
    im2col(x, g, cols);
    for (row, bias) in y.chunks_mut(l).zip(b) {
        row.fill(*bias);
    }
    let w = Mat { values: w, rows: o, cols: g.patch(), t: false };
    let one = T::of(1.0);
    matmul(y, w, Mat { values: cols, rows: g.patch(), cols: l, t: false }, true, one);
}

fn conv2d_forward<T: Elem>(x: &[T], w: &[T], b: &[T], g: Geometry, o: usize) -> Vec<T> {
    let (image, l, patch) = (g.c * g.h * g.w, g.positions(), g.patch());
    let mut y = vec![T::default(); g.n * o * l];
    y.par_chunks_mut(o * l).zip(x.par_chunks(image)).for_each_init(
        || vec![T::default(); patch * l],
        |cols, (y, x)| conv2d_sample(x, w, b, g, cols, y),
    );
    y
}

/// [`conv2d_forward`] followed by a ReLU and max-pooling (geometry `pg`), a sample at a time: the
/// pooled values and, for each, the convolution output it came from ([`ReluPool::sources`]).
fn conv2d_relu_pool_forward<T: Elem>(
    x: &[T],
    w: &[T],
    b: &[T],
    g: Geometry,
    o: usize,
    pg: Geometry,
) -> (Vec<T>, Vec<u32>) {
    let (image, l, patch, pooled) = (g.c * g.h * g.w, g.positions(), g.patch(), pg.positions());
    let mut out = vec![T::default(); g.n * o * pooled];
    let mut sources = vec![u32::MAX; g.n * o * pooled];
    out.par_chunks_mut(o * pooled)
        .zip(sources.par_chunks_mut(o * pooled))
        .zip(x.par_chunks(image))
        .for_each_init(
            || (vec![T::default(); patch * l], vec![T::default(); o * l]),
            |(cols, y), ((out, src), x)| {
                conv2d_sample(x, w, b, g, cols, y);
                let planes = y.chunks(l).zip(out.chunks_mut(pooled)).zip(src.chunks_mut(pooled));
                for (c, ((plane, out), src)) in planes.enumerate() {
                    pool_windows(plane, pg, true, |j, v, from| {
                        out[j] = v;
                        if let Some(from) = from {
                            src[j] = (c * l + from) as u32;
                        }
                    });
                }
            },
        );
    (out, sources)
}

/// Where a convolution's output gradient comes from, per sample.
#[derive(Clone, Copy)]
enum OutputGrad<'a, T> {
    /// `[n, o, ho, wo]`, given.
    Given(&'a [T]),
    /// A ReLU and max-pooling came after the convolution ([`conv2d_relu_max_pool2d`]): the pooled
    /// gradient `[n, o, ho', wo']` and, per pooled value, the convolution output it came from
    /// (within its sample; `u32::MAX` for none), recorded by the forward pass; `per` pooled values
    /// a sample.
    Pooled { grad: &'a [T], sources: &'a [u32], per: usize },
}

impl<T: Elem> OutputGrad<'_, T> {
    /// Sample `i`'s gradient (`buf.len()` values, `[o, ho·wo]`): a slice of the given one, or the
    /// pooled one routed back into `buf` (zeroed first; where windows overlap, the gradients add up
    /// in window order, as [`MaxPool`]'s backward adds them).
    fn of<'b>(&'b self, i: usize, buf: &'b mut [T]) -> &'b [T] {
        match *self {
            OutputGrad::Given(grad) => &grad[i * buf.len()..][..buf.len()],
            OutputGrad::Pooled { grad, sources, per } => {
                buf.fill(T::default());
                let at = i * per;
                for (source, g) in sources[at..at + per].iter().zip(&grad[at..at + per]) {
                    if let Some(d) = buf.get_mut(*source as usize) {
                        *d += *g;
                    }
                }
                buf
            }
        }
    }
}

/// The gradients of [`Conv2d`], packed in one vector: `∂x` (when `with_x`), then `∂W`, then `∂b`.
fn conv2d_backward<T: Elem>(
    x: &[T],
    w: &[T],
    dy: OutputGrad<T>,
    g: Geometry,
    o: usize,
    with_x: bool,
    one: T,
) -> Vec<T> {
    let (image, l, patch) = (g.c * g.h * g.w, g.positions(), g.patch());
    let per = SAMPLES_PER_PARTIAL;
    // Per group of samples: ∂W and ∂b over its samples (in sample order), and each sample's ∂x.
    // Room for the weight and bias gradients too, appended at the end without a reallocation.
    let mut dx = Vec::with_capacity(if with_x { x.len() } else { 0 } + o * patch + o);
    dx.resize(if with_x { x.len() } else { 0 }, T::default());
    let groups = g.n.div_ceil(per);
    let mut partial = vec![T::default(); groups * (o * patch + o)];
    let dx_chunks: Vec<&mut [T]> = if with_x {
        dx.chunks_mut(image * per).collect()
    } else {
        (0..groups).map(|_| &mut [][..]).collect()
    };
    partial
        .par_chunks_mut(o * patch + o)
        .zip(x.par_chunks(image * per))
        .zip(dx_chunks)
        .enumerate()
        .for_each_init(
            || {
                (
                    vec![T::default(); patch * l],
                    vec![T::default(); patch * l],
                    vec![T::default(); o * l],
                )
            },
            |(cols, dcols, dy_buf), (group, ((acc, x), dx))| {
                let (dw, db) = acc.split_at_mut(o * patch);
                for (i, x) in x.chunks(image).enumerate() {
                    let grad = dy.of(group * per + i, dy_buf);
                    im2col(x, g, cols);
                    // ∂W += ∂y · colsᵀ
                    let dy = Mat { values: grad, rows: o, cols: l, t: false };
                    let cols_t = Mat { values: &cols[..], rows: l, cols: patch, t: true };
                    matmul(dw, dy, cols_t, i > 0, one);
                    for (db, row) in db.iter_mut().zip(grad.chunks(l)) {
                        *db += sum_lanes(row);
                    }
                    if with_x {
                        // ∂cols = Wᵀ · ∂y, then back onto the image.
                        let w_t = Mat { values: w, rows: patch, cols: o, t: true };
                        matmul(
                            dcols,
                            w_t,
                            Mat { values: grad, rows: o, cols: l, t: false },
                            false,
                            one,
                        );
                        col2im(dcols, g, &mut dx[i * image..][..image]);
                    }
                }
            },
        );
    let mut out = dx;
    out.extend(sum_partials(&partial, o * patch + o));
    out
}

impl CustomOp3 for Conv2d {
    fn name(&self) -> &'static str {
        "ergon-conv2d"
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
        let (g, o) = self.geometry(l1, l2)?;
        if l3.dims() != [o] {
            bail!("conv2d: the bias must be [{o}], got {:?}", l3.dims());
        }
        let Some(pool) = &self.pool else {
            let y = ternary!(self.name(), (s1, l1), (s2, l2), (s3, l3), |x, w, b, _one| {
                conv2d_forward(x, w, b, g, o)
            });
            return Ok((y, Shape::from((g.n, o, g.ho, g.wo))));
        };
        let pg = pool.geometry(g, o)?;
        let sources;
        let y = ternary!(self.name(), (s1, l1), (s2, l2), (s3, l3), |x, w, b, _one| {
            let (y, s) = conv2d_relu_pool_forward(x, w, b, g, o, pg);
            sources = s;
            y
        });
        if pool.sources.set(Arc::new(sources)).is_err() {
            bail!("conv2d: one op ran forward twice");
        }
        Ok((y, Shape::from((g.n, o, pg.ho, pg.wo))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        // The input layer's images are no variable: their gradient is not computed at all.
        let with_x = x.track_op();
        let pooled = match &self.pool {
            None => None,
            Some(pool) => match pool.sources.get() {
                Some(sources) => Some(sources.clone()),
                None => bail!("conv2d: backward before forward"),
            },
        };
        let grads = x.apply_op3_no_bwd(
            w,
            &grad.contiguous()?,
            &Conv2dGrad { stride: self.stride, pad: self.pad, with_x, pooled },
        )?;
        let (nx, nw) = (if with_x { x.elem_count() } else { 0 }, w.elem_count());
        let dx = with_x.then(|| grads.narrow(0, 0, nx)?.reshape(x.shape())).transpose()?;
        let dw = grads.narrow(0, nx, nw)?.reshape(w.shape())?;
        let db = grads.narrow(0, nx + nw, b.elem_count())?;
        Ok((dx, Some(dw), Some(db)))
    }
}

/// The backward of [`Conv2d`]: `(x, W, ∂y)` → `∂x ‖ ∂W ‖ ∂b`, flat.
struct Conv2dGrad {
    stride: usize,
    pad: usize,
    with_x: bool,
    /// After a ReLU and max-pooling: where each pooled value came from ([`OutputGrad::Pooled`]).
    pooled: Option<Arc<Vec<u32>>>,
}

impl CustomOp3 for Conv2dGrad {
    fn name(&self) -> &'static str {
        "ergon-conv2d-grad"
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
        let (g, o) = Conv2d { stride: self.stride, pad: self.pad, pool: None }.geometry(l1, l2)?;
        let fits = match &self.pooled {
            None => l3.dims() == [g.n, o, g.ho, g.wo],
            Some(s) => l3.dims().starts_with(&[g.n, o]) && l3.shape().elem_count() == s.len(),
        };
        if !fits {
            bail!("conv2d backward: the gradient has shape {:?}", l3.dims());
        }
        let out = ternary!(self.name(), (s1, l1), (s2, l2), (s3, l3), |x, w, dy, one| {
            let dy = match &self.pooled {
                None => OutputGrad::Given(dy),
                Some(s) => OutputGrad::Pooled { grad: dy, sources: s, per: s.len() / g.n.max(1) },
            };
            conv2d_backward(x, w, dy, g, o, self.with_x, one)
        });
        let dx = if self.with_x { g.n * g.c * g.h * g.w } else { 0 };
        Ok((out, Shape::from(dx + o * g.patch() + o)))
    }
}

/// A 2-D convolution of `x` (`[N, C, H, W]`) with `weight` (`[O, C, k, k]`) and an optional `bias`
/// (`[O]`) on the CPU: `[N, O, H', W']`.
pub fn conv2d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: usize,
    padding: usize,
) -> Result<Tensor> {
    convolve(x, weight, bias, Conv2d { stride, pad: padding, pool: None })
}

/// `max_pool2d(relu(conv2d(x)))` (`pool`: the pooling's kernel and stride) in one op, with exactly
/// the values and gradients of the three in a row (the usual CNN block): the convolution's output,
/// the largest tensor of a CNN, lives one sample at a time in a thread's buffer and is never
/// stored whole, nor its gradient.
pub fn conv2d_relu_max_pool2d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    (stride, padding): (usize, usize),
    (kernel, pool_stride): (usize, usize),
) -> Result<Tensor> {
    let pool = ReluPool { kernel, stride: pool_stride, sources: OnceLock::new() };
    convolve(x, weight, bias, Conv2d { stride, pad: padding, pool: Some(pool) })
}

fn convolve(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, op: Conv2d) -> Result<Tensor> {
    let out_channels = weight.dim(0)?;
    let bias = match bias {
        Some(b) => b.contiguous()?,
        None => Tensor::zeros(out_channels, weight.dtype(), weight.device())?,
    };
    x.contiguous()?.apply_op3(&weight.contiguous()?, &bias, op)
}

/// Max pooling over `kernel`×`kernel` windows every `stride` pixels of `[N, C, H, W]` on the CPU.
/// The gradient goes to the first maximum of each window (exactly one input per window, as in
/// PyTorch); overlapping windows add up.
pub fn max_pool2d(x: &Tensor, kernel: usize, stride: usize) -> Result<Tensor> {
    x.contiguous()?.apply_op1(MaxPool { kernel, stride, relu: false })
}

/// `max_pool2d(relu(x))` in one pass each way, with exactly the values and gradients of the two
/// ops in a row (a ReLU before a pooling is the usual CNN block): the ReLU's output, as large as
/// the convolution's, is never stored, nor its gradient.
pub fn relu_max_pool2d(x: &Tensor, kernel: usize, stride: usize) -> Result<Tensor> {
    x.contiguous()?.apply_op1(MaxPool { kernel, stride, relu: true })
}

/// Max pooling, after a ReLU when `relu`.
struct MaxPool {
    kernel: usize,
    stride: usize,
    relu: bool,
}

impl MaxPool {
    fn geometry(&self, dims: &[usize]) -> Result<Geometry> {
        Geometry::new(dims, self.kernel, self.stride, 0)
    }
}

/// Visits each window of an `h`×`w` plane: `visit(output index, value, the input index that gets
/// the window's gradient)`. Without ReLU that input is the first maximum (ties keep the first
/// position; NaN never wins). With it, the window of `relu(x)` is pooled: its first maximum is the
/// first maximum of `x` when that is positive; otherwise every `relu(x)` is 0, the first position
/// wins, and the ReLU lets its gradient through only if its input is 0 (candle's ReLU passes the
/// gradient where `x ≥ 0`).
fn pool_windows<T: Elem>(
    plane: &[T],
    g: Geometry,
    relu: bool,
    mut visit: impl FnMut(usize, T, Option<usize>),
) {
    let zero = T::default();
    let mut emit = |out, first: usize, best, max| match relu {
        false => visit(out, max, Some(best)),
        true if max > zero => visit(out, max, Some(best)),
        true => visit(out, zero, (plane[first] == zero).then_some(first)),
    };
    if g.k == 2 && g.stride == 2 {
        // The usual 2×2 pooling, two input rows at a time, without index arithmetic per element.
        for oh in 0..g.ho {
            let (top, bottom) = (2 * oh * g.w, (2 * oh + 1) * g.w);
            let rows = plane[top..top + 2 * g.wo].chunks_exact(2);
            for (ow, (a, b)) in
                rows.zip(plane[bottom..bottom + 2 * g.wo].chunks_exact(2)).enumerate()
            {
                let first = top + 2 * ow;
                let (mut best, mut max) = (first, a[0]);
                for (i, v) in
                    [(first + 1, a[1]), (bottom + 2 * ow, b[0]), (bottom + 2 * ow + 1, b[1])]
                {
                    let better = v > max;
                    max = if better { v } else { max };
                    best = if better { i } else { best };
                }
                emit(oh * g.wo + ow, first, best, max);
            }
        }
        return;
    }
    for oh in 0..g.ho {
        for ow in 0..g.wo {
            let first = (oh * g.stride) * g.w + ow * g.stride;
            let (mut best, mut max) = (first, plane[first]);
            for ki in 0..g.k {
                let row = first + ki * g.w;
                for (kj, v) in plane[row..row + g.k].iter().enumerate() {
                    // Branch-free (data-dependent branches mispredict on half the windows).
                    let better = *v > max;
                    max = if better { *v } else { max };
                    best = if better { row + kj } else { best };
                }
            }
            emit(oh * g.wo + ow, first, best, max);
        }
    }
}

fn max_pool<T: Elem>(x: &[T], g: Geometry, relu: bool) -> Vec<T> {
    let (plane, out_plane) = (g.h * g.w, g.positions());
    let mut out = vec![T::default(); g.n * g.c * out_plane];
    out.par_chunks_mut(out_plane).zip(x.par_chunks(plane)).for_each(|(out, x)| {
        pool_windows(x, g, relu, |o, v, _| out[o] = v);
    });
    out
}

fn max_pool_grad<T: Elem>(x: &[T], grad: &[T], g: Geometry, relu: bool) -> Vec<T> {
    let (plane, out_plane) = (g.h * g.w, g.positions());
    let mut out = vec![T::default(); x.len()];
    out.par_chunks_mut(plane).zip(x.par_chunks(plane)).zip(grad.par_chunks(out_plane)).for_each(
        |((out, x), grad)| {
            pool_windows(x, g, relu, |o, _, source| {
                if let Some(i) = source {
                    out[i] += grad[o];
                }
            })
        },
    );
    out
}

impl CustomOp1 for MaxPool {
    fn name(&self) -> &'static str {
        "ergon-max-pool2d"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = self.geometry(l.dims())?;
        let out = unary!(self.name(), s, l, |x| max_pool(x, g, self.relu));
        Ok((out, Shape::from((g.n, g.c, g.ho, g.wo))))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let g = self.geometry(arg.dims())?;
        Ok(Some(arg.apply_op2_no_bwd(&grad.contiguous()?, &MaxPoolGrad(g, self.relu))?))
    }
}

/// The backward of [`MaxPool`]: `(x, ∂L/∂y)` → `∂L/∂x`.
struct MaxPoolGrad(Geometry, bool);

impl CustomOp2 for MaxPoolGrad {
    fn name(&self) -> &'static str {
        "ergon-max-pool2d-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (g, relu) = (self.0, self.1);
        if l2.dims() != [g.n, g.c, g.ho, g.wo] {
            bail!("max-pool2d backward: the gradient has shape {:?}", l2.dims());
        }
        let out = binary!(self.name(), (s1, l1), (s2, l2), |x, grad, _one| {
            max_pool_grad(x, grad, g, relu)
        });
        Ok((out, l1.shape().clone()))
    }
}

/// Elements per parallel task of the element-wise kernels.
const CHUNK: usize = 1 << 14;

/// `f(a[i], b[i])` for every `i` (`a` and `b` of one length), `CHUNK` elements per parallel task,
/// each task a plain loop over slices, which vectorizes (a parallel iterator's `collect` writes one
/// checked element at a time, which does not).
fn map_chunks<T: Elem>(a: &[T], b: &[T], f: impl Fn(T, T) -> T + Sync) -> Vec<T> {
    let mut out = vec![T::default(); a.len()];
    out.par_chunks_mut(CHUNK).zip(a.par_chunks(CHUNK)).zip(b.par_chunks(CHUNK)).for_each(
        |((out, a), b)| {
            for ((o, a), b) in out.iter_mut().zip(a).zip(b) {
                *o = f(*a, *b);
            }
        },
    );
    out
}

/// An element-wise function with its own backward, for [`Pointwise`].
trait Activation: Copy + Send + Sync + 'static {
    /// The op's name, and its backward's.
    const NAMES: (&'static str, &'static str);
    /// `f(x)`.
    fn value<T: Elem>(x: T) -> T;
    /// `∂y · f′(x)`.
    fn grad<T: Elem>(x: T, dy: T) -> T;
}

/// An [`Activation`] as one op each way (candle's ReLU backward takes four nodes, its GELU's fifteen).
#[derive(Clone, Copy)]
struct Pointwise<A>(A);

impl<A: Activation> CustomOp1 for Pointwise<A> {
    fn name(&self) -> &'static str {
        A::NAMES.0
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let y = unary!(self.name(), s, l, |x| map_chunks(x, x, |x, _| A::value(x)));
        Ok((y, l.shape().clone()))
    }

    /// `kernels.cu`'s kernel of the op's name (`ergon-gelu` → `ergon_gelu_f32`), f32 only.
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        let x = gpu::f32s(s, l)?;
        let y = gpu::alloc(&s.device, x.len())?;
        let (name, n) = (format!("{}_f32", self.name().replace('-', "_")), x.len() as u64);
        gpu::launch!(&s.device, &name, x.len(), &x, &y, &n);
        Ok((gpu::storage(y, s.device.clone()), l.shape().clone()))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(arg.apply_op2_no_bwd(&grad.contiguous()?, &PointwiseGrad(self.0))?))
    }
}

/// The backward of [`Pointwise`]: `(x, ∂y)` → `∂x`.
struct PointwiseGrad<A>(A);

impl<A: Activation> CustomOp2 for PointwiseGrad<A> {
    fn name(&self) -> &'static str {
        A::NAMES.1
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        if l1.dims() != l2.dims() {
            bail!("{}: the gradient has shape {:?}, not {:?}", self.name(), l2.dims(), l1.dims());
        }
        let dx = binary!(self.name(), (s1, l1), (s2, l2), |x, dy, _one| map_chunks(x, dy, A::grad));
        Ok((dx, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        if l1.dims() != l2.dims() {
            bail!("{}: the gradient has shape {:?}, not {:?}", self.name(), l2.dims(), l1.dims());
        }
        let (x, dy) = (gpu::f32s(s1, l1)?, gpu::f32s(s2, l2)?);
        let dx = gpu::alloc(&s1.device, x.len())?;
        let (name, n) = (format!("{}_f32", self.name().replace('-', "_")), x.len() as u64);
        gpu::launch!(&s1.device, &name, x.len(), &x, &dy, &dx, &n);
        Ok((gpu::storage(dx, s1.device.clone()), l1.shape().clone()))
    }
}

/// ReLU with its own backward, one pass each way: `max(x, 0)`, and the gradient passes where
/// `x ≥ 0`, as in candle's ReLU, which the GPU path uses.
pub fn relu(x: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1(Pointwise(Relu))
}

#[derive(Clone, Copy)]
struct Relu;

impl Activation for Relu {
    const NAMES: (&'static str, &'static str) = ("ergon-relu", "ergon-relu-grad");

    fn value<T: Elem>(x: T) -> T {
        if x > T::default() {
            x
        } else {
            T::default()
        }
    }

    fn grad<T: Elem>(x: T, dy: T) -> T {
        if x >= T::default() {
            dy
        } else {
            T::default()
        }
    }
}

/// The optimizers' updates, in place, on the CPU and on CUDA GPUs with the same bits.
pub mod update;

#[cfg(test)]
mod tests {
    #[test]
    fn inner_blocks_are_gemms_split_at_512_whatever_the_cpu() {
        let blocks = |k| inner_blocks(k).collect::<Vec<_>>();
        if cfg!(feature = "other-order") {
            return;
        }
        assert_eq!(blocks(1), [(0, 1)]);
        assert_eq!(blocks(512), [(0, 512)]);
        assert_eq!(blocks(784), [(0, 392), (392, 784)]);
        assert_eq!(blocks(1000), [(0, 500), (500, 1000)]);
        assert_eq!(blocks(3072), (0..6).map(|i| (512 * i, 512 * (i + 1))).collect::<Vec<_>>());
        assert_eq!(blocks(1025), [(0, 342), (342, 684), (684, 1025)]);
    }

    use candle_core::{DType, Device, Var};

    use super::*;
    use crate::rng::Stream;

    pub(super) fn randn(shape: &[usize], seed: u8) -> Tensor {
        let mut s = Stream::new(&[seed; 32], "x", b"");
        let v: Vec<f64> = (0..shape.iter().product()).map(|_| s.normal() as f64).collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    /// The gradients of `Σ weights ⊙ out` with respect to each of `args`.
    pub(super) fn grads_of(args: &[&Var], out: Tensor, weights: &Tensor) -> Vec<Tensor> {
        let g = (out * weights).unwrap().sum_all().unwrap().backward().unwrap();
        args.iter().map(|v| g.get(v.as_tensor()).unwrap().clone()).collect()
    }

    pub(super) fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
        let d = (a - b).unwrap().abs().unwrap().max_all().unwrap();
        d.to_dtype(DType::F64).unwrap().to_scalar::<f64>().unwrap()
    }

    #[test]
    fn conv2d_matches_candle_forward_and_backward() {
        for (k, stride, pad) in [(3, 1, 1), (3, 2, 1), (2, 1, 0), (5, 2, 2)] {
            let x = Var::from_tensor(&randn(&[3, 2, 7, 6], 1)).unwrap();
            let w = Var::from_tensor(&randn(&[4, 2, k, k], 2)).unwrap();
            let b = Var::from_tensor(&randn(&[4], 9)).unwrap();
            let ours =
                conv2d(x.as_tensor(), w.as_tensor(), Some(b.as_tensor()), stride, pad).unwrap();
            let theirs = x.as_tensor().conv2d(w.as_tensor(), pad, stride, 1, 1).unwrap();
            let theirs =
                theirs.broadcast_add(&b.as_tensor().reshape((1, 4, 1, 1)).unwrap()).unwrap();
            assert_eq!(ours.dims(), theirs.dims());
            assert!(max_abs_diff(&ours, &theirs) < 1e-12, "forward k={k} s={stride} p={pad}");
            // Backward against candle's, through a loss that weighs every output differently.
            // (Candle's own backward gets the input gradient's shape wrong for strided
            // convolutions; those are checked against finite differences in `model`'s tests.)
            if stride > 1 {
                continue;
            }
            let weights = randn(ours.dims(), 3);
            let g1 = (ours * &weights).unwrap().sum_all().unwrap().backward().unwrap();
            let g2 = (theirs * &weights).unwrap().sum_all().unwrap().backward().unwrap();
            for v in [&x, &w, &b] {
                let (a, b) = (g1.get(v.as_tensor()).unwrap(), g2.get(v.as_tensor()).unwrap());
                assert!(max_abs_diff(a, b) < 1e-12, "backward k={k} s={stride} p={pad}");
            }
        }
    }

    #[test]
    fn the_input_layer_gets_no_image_gradient() {
        let x = randn(&[2, 1, 5, 5], 4);
        let w = Var::from_tensor(&randn(&[3, 1, 3, 3], 5)).unwrap();
        let grads =
            conv2d(&x, w.as_tensor(), None, 1, 1).unwrap().sum_all().unwrap().backward().unwrap();
        assert!(grads.get(&x).is_none());
        assert!(grads.get(w.as_tensor()).is_some());
    }

    #[test]
    fn max_pool_matches_candle_and_routes_ties_to_the_first_input() {
        let x = randn(&[2, 3, 6, 6], 5);
        let ours = max_pool2d(&x, 2, 2).unwrap();
        assert_eq!(max_abs_diff(&ours, &x.max_pool2d_with_stride(2, 2).unwrap()), 0.0);
        assert_eq!(max_pool2d(&x, 3, 1).unwrap().dims(), &[2, 3, 4, 4]);
        let flat = Var::from_tensor(&Tensor::ones((1, 1, 2, 2), DType::F64, &Device::Cpu).unwrap())
            .unwrap();
        let g = max_pool2d(flat.as_tensor(), 2, 2).unwrap().sum_all().unwrap().backward().unwrap();
        let g = g.get(flat.as_tensor()).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        assert_eq!(g, vec![1.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn kernels_give_the_same_bits_on_any_number_of_threads() {
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let x = Var::from_tensor(&randn(&[5, 3, 9, 9], 6).to_dtype(DType::F32).unwrap())
                    .unwrap();
                let w = Var::from_tensor(&randn(&[4, 3, 3, 3], 7).to_dtype(DType::F32).unwrap())
                    .unwrap();
                let y = conv2d(x.as_tensor(), w.as_tensor(), None, 1, 1).unwrap();
                let pooled = max_pool2d(&y, 2, 2).unwrap();
                let fused =
                    conv2d_relu_max_pool2d(x.as_tensor(), w.as_tensor(), None, (1, 1), (2, 2));
                let y = (pooled + fused.unwrap()).unwrap();
                let grads = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
                [
                    y,
                    grads.get(x.as_tensor()).unwrap().clone(),
                    grads.get(w.as_tensor()).unwrap().clone(),
                ]
                .map(|t| t.flatten_all().unwrap().to_vec1::<f32>().unwrap())
            })
        };
        let one = run(1);
        for threads in [2, 3, 8] {
            assert!(run(threads) == one, "{threads} threads differ from one");
        }
    }

    #[test]
    fn relu_then_max_pool_in_one_op_equals_the_two_ops() {
        let mut v = randn(&[2, 3, 6, 6], 12).flatten_all().unwrap().to_vec1::<f64>().unwrap();
        // Windows with every input negative, a zero first, a zero later, and ties.
        for i in [0, 1, 6, 7] {
            v[i] = -1.0 - i as f64;
        }
        v[2] = 0.0;
        v[3] = -0.5;
        v[8] = -2.0;
        v[9] = 0.0;
        v[14] = 0.7;
        v[15] = 0.7;
        let x =
            Var::from_tensor(&Tensor::from_vec(v, (2, 3, 6, 6), &Device::Cpu).unwrap()).unwrap();
        for (k, stride) in [(2, 2), (3, 1), (2, 1)] {
            let fused = relu_max_pool2d(x.as_tensor(), k, stride).unwrap();
            let apart = max_pool2d(&relu(x.as_tensor()).unwrap(), k, stride).unwrap();
            assert_eq!(max_abs_diff(&fused, &apart), 0.0);
            let weights = randn(fused.dims(), 13);
            let g1 = (fused * &weights).unwrap().sum_all().unwrap().backward().unwrap();
            let g2 = (apart * &weights).unwrap().sum_all().unwrap().backward().unwrap();
            let (a, b) = (g1.get(x.as_tensor()).unwrap(), g2.get(x.as_tensor()).unwrap());
            assert_eq!(max_abs_diff(a, b), 0.0, "kernel {k}, stride {stride}");
        }
    }

    /// The fused block gives the bits of the convolution followed by the fused ReLU and pooling,
    /// forward and backward, f32 and f64, with and without an image gradient, for padded, strided
    /// convolutions and overlapping or uneven pooling windows, with and without bias.
    #[test]
    fn conv_relu_pool_in_one_op_equals_the_ops_in_a_row() {
        let cases = [
            ([3, 2, 8, 8], [4, 2, 3, 3], (1, 1), (2, 2), true),
            ([2, 3, 9, 7], [5, 3, 3, 3], (2, 1), (2, 2), false),
            ([2, 1, 7, 7], [3, 1, 2, 2], (1, 0), (3, 1), true),
            ([5, 2, 6, 6], [2, 2, 3, 3], (1, 2), (3, 2), true),
        ];
        for (case, (xs, ws, conv, pool, with_bias)) in cases.into_iter().enumerate() {
            for dtype in [DType::F64, DType::F32] {
                let seed = 20 + case as u8;
                let tensor = |shape: &[usize], seed| randn(shape, seed).to_dtype(dtype).unwrap();
                let x = Var::from_tensor(&tensor(&xs, seed)).unwrap();
                let w = Var::from_tensor(&tensor(&ws, seed + 1)).unwrap();
                let b = Var::from_tensor(&tensor(&[ws[0]], seed + 2)).unwrap();
                let bias = with_bias.then(|| b.as_tensor());
                let fused =
                    conv2d_relu_max_pool2d(x.as_tensor(), w.as_tensor(), bias, conv, pool).unwrap();
                let y = conv2d(x.as_tensor(), w.as_tensor(), bias, conv.0, conv.1).unwrap();
                let apart = relu_max_pool2d(&y, pool.0, pool.1).unwrap();
                assert_eq!(fused.dims(), apart.dims());
                assert_eq!(max_abs_diff(&fused, &apart), 0.0, "case {case} forward");
                let weights = tensor(fused.dims(), seed + 3);
                let g1 = grads_of(&[&x, &w, &b][..2 + with_bias as usize], fused, &weights);
                let g2 = grads_of(&[&x, &w, &b][..2 + with_bias as usize], apart, &weights);
                for (i, (a, b)) in g1.iter().zip(&g2).enumerate() {
                    assert_eq!(max_abs_diff(a, b), 0.0, "case {case}, gradient {i}, {dtype:?}");
                }
                // The input layer: no image gradient, the same weight gradients.
                let images = tensor(&xs, seed);
                let fused = conv2d_relu_max_pool2d(&images, w.as_tensor(), None, conv, pool);
                let g = fused.unwrap().sum_all().unwrap().backward().unwrap();
                assert!(g.get(&images).is_none());
                assert!(g.get(w.as_tensor()).is_some());
            }
        }
    }

    #[test]
    fn relu_matches_candle_forward_and_backward() {
        let mut v = randn(&[3, 4, 5], 10).flatten_all().unwrap().to_vec1::<f64>().unwrap();
        v[7] = 0.0; // the gradient at 0 passes, as in candle
        let x = Var::from_tensor(&Tensor::from_vec(v, (3, 4, 5), &Device::Cpu).unwrap()).unwrap();
        let weights = randn(&[3, 4, 5], 11);
        let ours = relu(x.as_tensor()).unwrap();
        let theirs = x.as_tensor().relu().unwrap();
        assert_eq!(max_abs_diff(&ours, &theirs), 0.0);
        let g1 = (ours * &weights).unwrap().sum_all().unwrap().backward().unwrap();
        let g2 = (theirs * &weights).unwrap().sum_all().unwrap().backward().unwrap();
        let (a, b) = (g1.get(x.as_tensor()).unwrap(), g2.get(x.as_tensor()).unwrap());
        assert_eq!(max_abs_diff(a, b), 0.0);
    }

    #[test]
    fn sum_lanes_adds_eight_running_sums_in_order_then_the_rest() {
        let v: Vec<f64> = (0..21).map(|i| 1.0 + i as f64 * 0.1).collect();
        let mut lanes = [0.0; 8];
        for (i, x) in v[..16].iter().enumerate() {
            lanes[i % 8] += x;
        }
        let expected = lanes.iter().chain(&v[16..]).fold(0.0, |s, x| s + x);
        assert_eq!(sum_lanes(&v).to_bits(), expected.to_bits());
        assert_eq!(sum_lanes::<f32>(&[]), 0.0);
        assert_eq!(sum_lanes(&[2.5f32, 1.0]), 3.5);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let x = randn(&[1, 1, 2, 2], 8);
        assert!(conv2d(&x, &randn(&[1, 1, 5, 5], 9), None, 1, 0).is_err());
        assert!(conv2d(&x, &randn(&[1, 2, 1, 1], 9), None, 1, 0).is_err());
        assert!(conv2d(&x, &randn(&[3, 1, 1, 1], 9), Some(&randn(&[2], 9)), 1, 0).is_err());
        assert!(max_pool2d(&randn(&[2, 2], 1), 2, 2).is_err());
        assert!(max_pool2d(&x, 2, 0).is_err());
    }
}
