//! The optimizers' updates in place, one pass per state tensor and no allocation, on the CPU and
//! on a CUDA GPU (`update.cu`, one launch per pass). Both devices do each element's arithmetic in
//! the same order with the same roundings (a scalar product `x·s` is written `x·s + 0`, as candle's
//! `affine` was when these were tensor expressions), so an update of given tensors has the same
//! bits on either. As tensor expressions, the dozen element-wise ops, each allocating its result,
//! took a fifth of an MLP's step on the CPU and were a GPU's most numerous launches.

#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{bail, CpuStorage, InplaceOp2, InplaceOp3, Layout, Result, Tensor, WithDType};

/// SGD with momentum: `v ← μ·v + (g + λ·w)`, then `w ← w − η·v`.
pub fn sgd(w: &Tensor, v: &Tensor, g: &Tensor, lr: f64, momentum: f64, decay: f64) -> Result<()> {
    v.inplace_op3(&g.contiguous()?, w, &Momentum { momentum, decay })?;
    w.inplace_op2(v, &Descend { lr })
}

/// AdamW at step `t`: `m ← β₁·m + (1−β₁)·g`, `v ← β₂·v + (1−β₂)·g²`, then
/// `w ← w·(1 − η·λ) − η · m̂ / (√v̂ + ε)` with the bias-corrected moments.
#[allow(clippy::too_many_arguments)]
pub fn adamw(
    w: &Tensor,
    m: &Tensor,
    v: &Tensor,
    g: &Tensor,
    (lr, beta1, beta2, eps, decay): (f64, f64, f64, f64, f64),
    t: i32,
) -> Result<()> {
    let g = g.contiguous()?;
    m.inplace_op2(&g, &Average { beta: beta1, square: false })?;
    v.inplace_op2(&g, &Average { beta: beta2, square: true })?;
    let step = AdamStep {
        keep: 1.0 - lr * decay,
        m_scale: 1.0 / (1.0 - beta1.powi(t)),
        v_scale: 1.0 / (1.0 - beta2.powi(t)),
        eps,
        lr,
    };
    w.inplace_op3(m, v, &step)
}

fn slice<'a, T>(all: &'a [T], l: &Layout) -> Result<&'a [T]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&all[a..b]),
        None => bail!("optimizer update: a tensor is not contiguous"),
    }
}

fn slice_mut<'a, T>(all: &'a mut [T], l: &Layout) -> Result<&'a mut [T]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&mut all[a..b]),
        None => bail!("optimizer update: a tensor is not contiguous"),
    }
}

/// Runs `f(target, a)` on f32 or f64 storages of one length.
macro_rules! dispatch2 {
    ($s1:expr, $l1:expr, $s2:expr, $l2:expr, $f:expr) => {
        match ($s1, $s2) {
            (CpuStorage::F32(x), CpuStorage::F32(a)) => {
                let (x, a) = (slice_mut(x, $l1)?, slice(a, $l2)?);
                if x.len() != a.len() {
                    bail!("optimizer update: lengths differ");
                }
                $f(x, a)
            }
            (CpuStorage::F64(x), CpuStorage::F64(a)) => {
                let (x, a) = (slice_mut(x, $l1)?, slice(a, $l2)?);
                if x.len() != a.len() {
                    bail!("optimizer update: lengths differ");
                }
                $f(x, a)
            }
            _ => bail!("optimizer update: the tensors must all be f32 or all f64"),
        }
    };
}

/// Runs `f(target, a, b)` on f32 or f64 storages of one length.
macro_rules! dispatch3 {
    ($s1:expr, $l1:expr, $s2:expr, $l2:expr, $s3:expr, $l3:expr, $f:expr) => {
        match ($s1, $s2, $s3) {
            (CpuStorage::F32(x), CpuStorage::F32(a), CpuStorage::F32(b)) => {
                let (x, a, b) = (slice_mut(x, $l1)?, slice(a, $l2)?, slice(b, $l3)?);
                if x.len() != a.len() || x.len() != b.len() {
                    bail!("optimizer update: lengths differ");
                }
                $f(x, a, b)
            }
            (CpuStorage::F64(x), CpuStorage::F64(a), CpuStorage::F64(b)) => {
                let (x, a, b) = (slice_mut(x, $l1)?, slice(a, $l2)?, slice(b, $l3)?);
                if x.len() != a.len() || x.len() != b.len() {
                    bail!("optimizer update: lengths differ");
                }
                $f(x, a, b)
            }
            _ => bail!("optimizer update: the tensors must all be f32 or all f64"),
        }
    };
}

/// `v ← (v·μ + 0) + (g + (w·λ + 0))` on `(v; g, w)`.
struct Momentum {
    momentum: f64,
    decay: f64,
}

impl InplaceOp3 for Momentum {
    fn name(&self) -> &'static str {
        "ergon-sgd-momentum"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<()> {
        fn run<T: WithDType>(v: &mut [T], g: &[T], w: &[T], mu: f64, decay: f64) -> Result<()> {
            let (mu, decay, zero) = (T::from_f64(mu), T::from_f64(decay), T::from_f64(0.0));
            for ((v, g), w) in v.iter_mut().zip(g).zip(w) {
                *v = (*v * mu + zero) + (*g + (*w * decay + zero));
            }
            Ok(())
        }
        dispatch3!(s1, l1, s2, l2, s3, l3, |v, g, w| run(v, g, w, self.momentum, self.decay))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &mut CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> Result<()> {
        let scalars = [self.momentum, self.decay];
        super::gpu::update("ergon_sgd_momentum", (s1, l1), &[(s2, l2), (s3, l3)], &scalars, None)
    }
}

/// `w ← w − (v·η + 0)` on `(w; v)`.
struct Descend {
    lr: f64,
}

impl InplaceOp2 for Descend {
    fn name(&self) -> &'static str {
        "ergon-sgd-descend"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<()> {
        fn run<T: WithDType>(w: &mut [T], v: &[T], lr: f64) -> Result<()> {
            let (lr, zero) = (T::from_f64(lr), T::from_f64(0.0));
            for (w, v) in w.iter_mut().zip(v) {
                *w -= *v * lr + zero;
            }
            Ok(())
        }
        dispatch2!(s1, l1, s2, l2, |w, v| run(w, v, self.lr))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &mut CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> Result<()> {
        super::gpu::update("ergon_sgd_descend", (s1, l1), &[(s2, l2)], &[self.lr], None)
    }
}

/// `m ← (m·β + 0) + (x·(1−β) + 0)`, `x` = `g` or `g·g`, on `(m; g)`.
struct Average {
    beta: f64,
    square: bool,
}

impl InplaceOp2 for Average {
    fn name(&self) -> &'static str {
        "ergon-adamw-moment"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<()> {
        fn run<T: WithDType>(m: &mut [T], g: &[T], beta: f64, square: bool) -> Result<()> {
            let (b, rest, zero) = (T::from_f64(beta), T::from_f64(1.0 - beta), T::from_f64(0.0));
            for (m, g) in m.iter_mut().zip(g) {
                let x = if square { *g * *g } else { *g };
                *m = (*m * b + zero) + (x * rest + zero);
            }
            Ok(())
        }
        dispatch2!(s1, l1, s2, l2, |m, g| run(m, g, self.beta, self.square))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &mut CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> Result<()> {
        let scalars = [self.beta, 1.0 - self.beta];
        let square = Some(self.square as i32);
        super::gpu::update("ergon_adamw_moment", (s1, l1), &[(s2, l2)], &scalars, square)
    }
}

/// `w ← (w·keep + 0) − (((m·m̂ₛ + 0) / (√(v·v̂ₛ + 0)·1 + ε))·η + 0)` on `(w; m, v)`.
struct AdamStep {
    keep: f64,
    m_scale: f64,
    v_scale: f64,
    eps: f64,
    lr: f64,
}

impl InplaceOp3 for AdamStep {
    fn name(&self) -> &'static str {
        "ergon-adamw-step"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<()> {
        fn step<T: WithDType>(w: &mut [T], m: &[T], v: &[T], s: &AdamStep) -> Result<()> {
            let f = T::from_f64;
            let (keep, ms, vs, eps, lr) =
                (f(s.keep), f(s.m_scale), f(s.v_scale), f(s.eps), f(s.lr));
            let (zero, one) = (f(0.0), f(1.0));
            // √ in f64, rounded once to T: the correctly rounded square root, as T's own.
            let sqrt = |x: T| f(x.to_f64().sqrt());
            for ((w, m), v) in w.iter_mut().zip(m).zip(v) {
                let update = (*m * ms + zero) / (sqrt(*v * vs + zero) * one + eps);
                *w = (*w * keep + zero) - (update * lr + zero);
            }
            Ok(())
        }
        dispatch3!(s1, l1, s2, l2, s3, l3, |w, m, v| step(w, m, v, self))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &mut CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> Result<()> {
        let scalars = [self.keep, self.m_scale, self.v_scale, self.eps, self.lr];
        super::gpu::update("ergon_adamw_step", (s1, l1), &[(s2, l2), (s3, l3)], &scalars, None)
    }
}

#[cfg(test)]
mod tests {
    use candle_core::DType;

    use super::*;
    use crate::ops::tests::randn;

    #[test]
    fn optimizer_updates_equal_the_tensor_expressions_bit_for_bit() {
        // The updates as tensor expressions, evaluated with candle's CPU ops.
        let f32s = |seed| randn(&[257], seed).to_dtype(DType::F32).unwrap();
        let bits = |t: &Tensor| {
            t.to_vec1::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let (w0, s0, g) = (f32s(20), f32s(21), f32s(22));
        let (lr, mu, wd) = (0.05, 0.9, 1e-4);
        let gp = (&g + (&w0 * wd).unwrap()).unwrap();
        let v1 = ((&s0 * mu).unwrap() + gp).unwrap();
        let w1 = (&w0 - (&v1 * lr).unwrap()).unwrap();
        let (w, v) = (w0.copy().unwrap(), s0.copy().unwrap());
        sgd(&w, &v, &g, lr, mu, wd).unwrap();
        assert_eq!((bits(&w), bits(&v)), (bits(&w1), bits(&v1)));

        let (b1, b2, eps, t) = (0.9, 0.99, 1e-8, 3);
        let m0 = f32s(23);
        let q0 = f32s(24).abs().unwrap();
        let decayed = (&w0 * (1.0 - lr * wd)).unwrap();
        let m1 = ((&m0 * b1).unwrap() + (&g * (1.0 - b1)).unwrap()).unwrap();
        let q1 = ((&q0 * b2).unwrap() + (g.sqr().unwrap() * (1.0 - b2)).unwrap()).unwrap();
        let m_hat = (&m1 * (1.0 / (1.0 - b1.powi(t)))).unwrap();
        let q_hat = (&q1 * (1.0 / (1.0 - b2.powi(t)))).unwrap();
        let step = m_hat.div(&(q_hat.sqrt().unwrap() + eps).unwrap()).unwrap();
        let w1 = (decayed - (step * lr).unwrap()).unwrap();
        let (w, m, q) = (w0.copy().unwrap(), m0.copy().unwrap(), q0.copy().unwrap());
        adamw(&w, &m, &q, &g, (lr, b1, b2, eps, wd), t).unwrap();
        assert_eq!((bits(&w), bits(&m), bits(&q)), (bits(&w1), bits(&m1), bits(&q1)));
    }

    /// The CUDA kernels give the CPU's bits for the same tensors: SGD and AdamW, f32 and f64, on
    /// lengths that end mid-block and that need the kernels' loop past the grid. Needs a GPU (run
    /// on one by scripts/bench-gpu.sh); skipped where none opens.
    #[cfg(feature = "cuda")]
    #[test]
    fn on_a_gpu_the_updates_have_the_cpus_bits() {
        use candle_core::Device;
        let Ok(gpu) = Device::new_cuda(0) else {
            eprintln!("no CUDA GPU: skipped");
            return;
        };
        let bits = |t: &Tensor| {
            let t = t.to_device(&Device::Cpu).unwrap().to_dtype(DType::F64).unwrap();
            t.to_vec1::<f64>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        for dtype in [DType::F32, DType::F64] {
            for len in [257, 4096 * 256 + 3] {
                let x = |seed| randn(&[len], seed).to_dtype(dtype).unwrap();
                let (w0, m0, q0, g) = (x(30), x(31), x(32).abs().unwrap(), x(33));
                let on = |d: &Device| {
                    // Copies: on the CPU `to_device` shares the storage the updates write to.
                    let [w, m, q, g] =
                        [&w0, &m0, &q0, &g].map(|t| t.to_device(d).unwrap().copy().unwrap());
                    sgd(&w, &m, &g, 0.05, 0.9, 1e-4).unwrap();
                    adamw(&w, &m, &q, &g, (0.003, 0.9, 0.99, 1e-8, 0.01), 7).unwrap();
                    [w, m, q].map(|t| bits(&t))
                };
                assert!(on(&Device::Cpu) == on(&gpu), "{dtype:?} × {len}: the devices differ");
            }
        }
    }
}
