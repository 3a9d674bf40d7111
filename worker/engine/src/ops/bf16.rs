//! Rounding to bf16, the one primitive of [`ergon_job_spec::Precision::Bf16Mixed`]: the model
//! rounds the operands and the output of every matrix product with it, and its gradient is the
//! same rounding of the incoming gradient — what a bf16 tensor between two f32 ones does to the
//! values and gradients that cross it under `torch.autocast`.
//!
//! Values stay in f32 tensors (bf16 is the top half of an f32): a product of two bf16 values is
//! exact in f32, so an f32 matrix product of rounded operands is what a bf16 GEMM with f32
//! accumulation computes, in the summation order of the kernel that runs it.
//!
//! Rounding is to nearest, ties to even (`half::bf16::from_f32`, which candle's CPU cast uses;
//! CUDA's `__float2bfloat16`, which its GPU cast uses, rounds the same way), NaN stays NaN.

use candle_core::{
    backend::BackendStorage, bail, CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor,
};
use rayon::prelude::*;

use super::{contiguous, Elem, CHUNK};

/// `x` with every element rounded to the nearest bf16 (ties to even), kept in `x`'s dtype; its
/// gradient is the incoming gradient rounded the same way. On the CPU one op each way, elsewhere
/// candle's casts to bf16 and back (the same bits).
pub fn round_bf16(x: &Tensor) -> Result<Tensor> {
    if x.device().is_cpu() {
        x.contiguous()?.apply_op1(RoundBf16)
    } else {
        x.to_dtype(DType::BF16)?.to_dtype(x.dtype())
    }
}

struct RoundBf16;

/// `x` rounded to bf16 element by element ([`Elem::bf16`]), `CHUNK` elements per parallel task.
pub(super) fn rounded<T: Elem>(x: &[T]) -> Vec<T> {
    let mut out = vec![T::default(); x.len()];
    out.par_chunks_mut(CHUNK).zip(x.par_chunks(CHUNK)).for_each(|(out, x)| {
        for (o, x) in out.iter_mut().zip(x) {
            *o = x.bf16();
        }
    });
    out
}

/// `x` rounded to bf16 in place.
pub(super) fn round_in_place<T: Elem>(x: &mut [T]) {
    x.par_chunks_mut(CHUNK).for_each(|x| {
        for v in x {
            *v = v.bf16();
        }
    });
}

impl CustomOp1 for RoundBf16 {
    fn name(&self) -> &'static str {
        "ergon-round-bf16"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let y = match s {
            CpuStorage::F32(all) => CpuStorage::F32(rounded(contiguous(all, l, self.name())?)),
            CpuStorage::F64(all) => CpuStorage::F64(rounded(contiguous(all, l, self.name())?)),
            other => bail!("{}: unsupported dtype {:?}", self.name(), other.dtype()),
        };
        Ok((y, l.shape().clone()))
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(round_bf16(grad)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn rounds_to_nearest_even_like_candles_cast() {
        let one_ulp = 2f32.powi(-7); // bf16's spacing at 1
        let values = vec![
            1.0,
            1.0 + one_ulp / 2.0,        // a tie: to 1 (even)
            1.0 + 1.5 * one_ulp,        // a tie: to 1 + 2 ulp (even)
            1.0 + one_ulp / 2.0 + 1e-6, // past the tie: up
            -std::f32::consts::PI,
            1e-40, // subnormal
            f32::MAX,
            f32::INFINITY,
        ];
        let x = Tensor::new(values.as_slice(), &Device::Cpu).unwrap();
        let ours = round_bf16(&x).unwrap().to_vec1::<f32>().unwrap();
        let cast = x.to_dtype(DType::BF16).unwrap().to_dtype(DType::F32).unwrap();
        assert_eq!(ours, cast.to_vec1::<f32>().unwrap());
        assert_eq!(&ours[..4], &[1.0, 1.0, 1.0 + 2.0 * one_ulp, 1.0 + one_ulp]);
        let nan = round_bf16(&Tensor::new(&[f32::NAN], &Device::Cpu).unwrap()).unwrap();
        assert!(nan.to_vec1::<f32>().unwrap()[0].is_nan());
    }

    #[test]
    fn the_gradient_is_rounded_the_same_way() {
        let x = Var::new(&[1.0f32, 2.0, 3.0], &Device::Cpu).unwrap();
        let w = Tensor::new(&[1.0f32 + 2f32.powi(-10), -0.3, 7.123_456], &Device::Cpu).unwrap();
        let loss = round_bf16(x.as_tensor()).unwrap().mul(&w).unwrap().sum_all().unwrap();
        let grads = loss.backward().unwrap();
        let g = grads.get(x.as_tensor()).unwrap().to_vec1::<f32>().unwrap();
        let expected = w.to_dtype(DType::BF16).unwrap().to_dtype(DType::F32).unwrap();
        assert_eq!(g, expected.to_vec1::<f32>().unwrap());
    }
}
