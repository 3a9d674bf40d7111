//! The ops' CUDA kernels (`update.cu`, `kernels.cu`, `attention.cu`), compiled to PTX by the build
//! script, and their launches. Each kernel but the attention's is its CPU twin's arithmetic in the
//! same order, so those ops give the same bits on either device; the attention is tiled
//! (flash-attention's online softmax), within f32 rounding of the CPU's (tested on a GPU by the
//! `on_a_gpu_*` tests, which skip where none opens).

use std::ops::Range;

use candle_core::{
    bail,
    cuda::{
        cudarc::driver::{CudaSlice, CudaView, DeviceRepr, LaunchConfig, PushKernelArg},
        CudaDevice, CudaStorageSlice, WrapErr,
    },
    CudaStorage, Layout, Result, WithDType,
};

/// The optimizers' updates (`update.cu`).
const UPDATE: (&str, &str) =
    ("ergon-update", include_str!(concat!(env!("OUT_DIR"), "/update.ptx")));
/// The ops' forward and backward kernels (`kernels.cu`).
pub(super) const KERNELS: (&str, &str) =
    ("ergon-kernels", include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx")));

/// The causal attention's forward and backward kernels (`attention.cu`).
pub(super) const ATTENTION: (&str, &str) =
    ("ergon-attention", include_str!(concat!(env!("OUT_DIR"), "/attention.ptx")));

/// Threads per block; the kernels loop over the elements (or rows) past the grid.
const BLOCK: u32 = 256;
const MAX_BLOCKS: usize = 4096;

/// A launch over `n` elements or rows.
pub(super) fn config(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK as usize).clamp(1, MAX_BLOCKS) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// The elements of a contiguous layout.
fn elements(l: &Layout) -> Result<Range<usize>> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(a..b),
        None => bail!("a kernel's input is not contiguous"),
    }
}

/// The f32 elements of `s` under `l` (contiguous).
pub(super) fn f32s<'a>(s: &'a CudaStorage, l: &Layout) -> Result<CudaView<'a, f32>> {
    Ok(s.as_cuda_slice::<f32>()?.slice(elements(l)?))
}

/// The u32 elements of `s` under `l` (contiguous).
pub(super) fn u32s<'a>(s: &'a CudaStorage, l: &Layout) -> Result<CudaView<'a, u32>> {
    Ok(s.as_cuda_slice::<u32>()?.slice(elements(l)?))
}

/// `n` uninitialized f32s on the device (every kernel here writes all of its output).
pub(super) fn alloc(device: &CudaDevice, n: usize) -> Result<CudaSlice<f32>> {
    // SAFETY: the caller's kernel writes every element before anything reads it.
    unsafe { device.alloc::<f32>(n.max(1)) }
}

/// Runs kernel `$name` of `$module` (`(name, ptx)`) with launch configuration `$config` and the
/// arguments that follow (those of the kernel's signature, in order).
macro_rules! launch_with {
    ($device:expr, $module:expr, $name:expr, $config:expr, $($arg:expr),+ $(,)?) => {{
        let (module, ptx) = $module;
        let func = $device.get_or_load_custom_func($name, module, ptx)?;
        let mut args = func.builder();
        $( candle_core::cuda::cudarc::driver::PushKernelArg::arg(&mut args, $arg); )+
        // SAFETY: the arguments are those of the kernel's signature, in order, with views of the
        // lengths the kernel indexes.
        candle_core::cuda::WrapErr::w(unsafe { args.launch($config) })?;
    }};
}
pub(super) use launch_with;

/// Runs kernel `$name` of `kernels.cu` over `$n` elements or rows, with the arguments that follow
/// (those of the kernel's signature, in order).
macro_rules! launch {
    ($device:expr, $name:expr, $n:expr, $($arg:expr),+ $(,)?) => {
        $crate::ops::gpu::launch_with!(
            $device,
            $crate::ops::gpu::KERNELS,
            $name,
            $crate::ops::gpu::config($n),
            $($arg),+
        )
    };
}
pub(super) use launch;

/// The output of an op: `data` wrapped as a storage of `device`.
pub(super) fn storage(data: CudaSlice<f32>, device: CudaDevice) -> CudaStorage {
    CudaStorage::wrap_cuda_slice(data, device)
}

/// Runs `kernel` of `update.cu` (its `_f32` or `_f64` version) on `dst`, in place, and `srcs`:
/// the tensors' elements, their count, then `scalars` rounded to the tensors' type, then `flag` if
/// any. The tensors must all be contiguous, of one length and one type (f32 or f64).
pub(super) fn update(
    kernel: &str,
    (dst, dst_layout): (&mut CudaStorage, &Layout),
    srcs: &[(&CudaStorage, &Layout)],
    scalars: &[f64],
    flag: Option<i32>,
) -> Result<()> {
    let device = dst.device.clone();
    let range = elements(dst_layout)?;
    for (_, l) in srcs {
        if elements(l)?.len() != range.len() {
            bail!("optimizer update: lengths differ");
        }
    }
    macro_rules! run {
        ($dst:expr, $t:ty, $suffix:literal) => {{
            let srcs = srcs
                .iter()
                .map(|(s, l)| Ok((s.as_cuda_slice::<$t>()?, elements(l)?)))
                .collect::<Result<Vec<_>>>()?;
            let name = format!("{kernel}_{}", $suffix);
            run_update::<$t>(&device, &name, $dst, range, &srcs, scalars, flag)
        }};
    }
    match &mut dst.slice {
        CudaStorageSlice::F32(d) => run!(d, f32, "f32"),
        CudaStorageSlice::F64(d) => run!(d, f64, "f64"),
        _ => bail!("optimizer update: the tensors must all be f32 or all f64"),
    }
}

fn run_update<T: DeviceRepr + WithDType>(
    device: &CudaDevice,
    name: &str,
    dst: &mut CudaSlice<T>,
    range: Range<usize>,
    srcs: &[(&CudaSlice<T>, Range<usize>)],
    scalars: &[f64],
    flag: Option<i32>,
) -> Result<()> {
    let func = device.get_or_load_custom_func(name, UPDATE.0, UPDATE.1)?;
    let n = range.len();
    let count = n as u64;
    let scalars: Vec<T> = scalars.iter().map(|&s| T::from_f64(s)).collect();
    let mut dst = dst.slice_mut(range);
    let srcs: Vec<_> = srcs.iter().map(|(s, r)| s.slice(r.clone())).collect();
    let mut args = func.builder();
    args.arg(&mut dst);
    for s in &srcs {
        args.arg(s);
    }
    args.arg(&count);
    for s in &scalars {
        args.arg(s);
    }
    if let Some(flag) = &flag {
        args.arg(flag);
    }
    // SAFETY: the arguments are those of the kernel's signature in update.cu, in order, and every
    // view holds `n` elements.
    unsafe { args.launch(config(n)) }.w()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor, Var};

    use crate::ops::{self, tests::randn};

    /// A tensor's values as f32 bits, from any device.
    fn bits(t: &Tensor) -> Vec<u32> {
        let t = t.to_device(&Device::Cpu).unwrap().flatten_all().unwrap();
        t.to_vec1::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()
    }

    /// The bits of `f(inputs)` on `device` and of each input's gradient of `Σ f(inputs) ⊙ w`.
    fn value_and_grads(
        device: &Device,
        inputs: &[Tensor],
        w: &Tensor,
        f: &dyn Fn(&[Tensor], &Device) -> Tensor,
    ) -> Vec<Vec<u32>> {
        let vars: Vec<Var> = inputs
            .iter()
            .map(|t| Var::from_tensor(&t.to_device(device).unwrap()).unwrap())
            .collect();
        let args: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
        let out = f(&args, device);
        let weighted = out.broadcast_mul(&w.to_device(device).unwrap()).unwrap();
        let grads = weighted.sum_all().unwrap().backward().unwrap();
        let mut all = vec![bits(&out)];
        all.extend(vars.iter().map(|v| bits(grads.get(v.as_tensor()).unwrap())));
        all
    }

    /// The engine's own ops give the CPU's bits on a GPU, values and gradients: the layer norm
    /// (rows not a multiple of its partial sums' 64), the cross-entropy over sequence logits, GELU
    /// and ReLU. Needs a GPU (scripts/bench-gpu.sh runs it on one); skipped where none opens.
    #[test]
    fn on_a_gpu_the_kernels_have_the_cpus_bits() {
        let Ok(gpu) = Device::new_cuda(0) else {
            eprintln!("no CUDA GPU: skipped");
            return;
        };
        let f32s = |shape: &[usize], seed| randn(shape, seed).to_dtype(DType::F32).unwrap();
        let targets: Vec<u32> = (0..130u32).map(|i| (i * 97 + 13) % 256).collect();
        let targets = Tensor::from_vec(targets, 130, &Device::Cpu).unwrap();
        type Case<'a> = (&'a str, Vec<Tensor>, Tensor, Box<dyn Fn(&[Tensor], &Device) -> Tensor>);
        let cases: Vec<Case> = vec![
            (
                "layer norm",
                vec![f32s(&[3, 70, 64], 1), f32s(&[64], 2), f32s(&[64], 3)],
                f32s(&[3, 70, 64], 4),
                Box::new(|a, _| ops::layer_norm(&a[0], &a[1], &a[2], 1e-5).unwrap()),
            ),
            (
                "cross-entropy",
                vec![(f32s(&[2, 65, 256], 5) * 3.0).unwrap()],
                Tensor::new(0.37f32, &Device::Cpu).unwrap(),
                Box::new(move |a, d| {
                    ops::cross_entropy(&a[0], &targets.to_device(d).unwrap()).unwrap()
                }),
            ),
            (
                "gelu",
                vec![(f32s(&[1000, 37], 6) * 4.0).unwrap()],
                f32s(&[1000, 37], 7),
                Box::new(|a, _| ops::gelu(&a[0]).unwrap()),
            ),
            (
                "relu",
                vec![f32s(&[1000, 37], 8)],
                f32s(&[1000, 37], 9),
                Box::new(|a, _| ops::relu(&a[0]).unwrap()),
            ),
        ];
        for (name, inputs, w, f) in &cases {
            let cpu = value_and_grads(&Device::Cpu, inputs, w, f.as_ref());
            let on_gpu = value_and_grads(&gpu, inputs, w, f.as_ref());
            for (i, (c, g)) in cpu.iter().zip(&on_gpu).enumerate() {
                let differ = c.iter().zip(g).filter(|(a, b)| a != b).count();
                assert!(
                    differ == 0 && c.len() == g.len(),
                    "{name}, output {i}: {differ} values differ"
                );
            }
        }
    }

    /// The GPU's tiled attention is the CPU's within f32 rounding, value and gradient, and repeats
    /// its own bits: its dot products and softmax run in their own order (online, over tiles of
    /// keys) where the CPU's come from gemm. Heads of every kernel width, one not a multiple of
    /// four columns, sequences shorter and longer than a block of rows and a tile of keys. Needs a
    /// GPU; skipped where none opens.
    #[test]
    fn on_a_gpu_attention_is_the_cpus_within_rounding() {
        let Ok(gpu) = Device::new_cuda(0) else {
            eprintln!("no CUDA GPU: skipped");
            return;
        };
        // (samples, positions, width, heads): heads 8, 64, 100, 16, 200 columns wide.
        let shapes =
            [(3, 37, 32, 4), (2, 130, 128, 2), (1, 70, 100, 1), (4, 64, 64, 4), (1, 65, 200, 1)];
        for (seed, (b, t, d, h)) in shapes.into_iter().enumerate() {
            let seed = 10 + 2 * seed as u8;
            let qkv = randn(&[b, t, 3 * d], seed).to_dtype(DType::F32).unwrap();
            let w = randn(&[b, t, d], seed + 1).to_dtype(DType::F32).unwrap();
            let f = |a: &[Tensor], _: &Device| ops::causal_attention(&a[0], h).unwrap();
            let cpu = value_and_grads(&Device::Cpu, std::slice::from_ref(&qkv), &w, &f);
            let on_gpu = value_and_grads(&gpu, std::slice::from_ref(&qkv), &w, &f);
            let again = value_and_grads(&gpu, std::slice::from_ref(&qkv), &w, &f);
            assert!(on_gpu == again, "[{b}, {t}, {d}] in {h} heads: a second run differs");
            for (i, (c, g)) in cpu.iter().zip(&on_gpu).enumerate() {
                let (c, g): (Vec<f32>, Vec<f32>) = (
                    c.iter().map(|b| f32::from_bits(*b)).collect(),
                    g.iter().map(|b| f32::from_bits(*b)).collect(),
                );
                let scale = c.iter().fold(0f32, |m, v| m.max(v.abs()));
                let worst = c.iter().zip(&g).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                println!("attention [{b}, {t}, {d}] in {h} heads, output {i}: off by {worst:.2e} of {scale:.2e}");
                assert!(
                    c.len() == g.len() && worst <= 1e-5 * scale,
                    "[{b}, {t}, {d}] in {h} heads, output {i}: off by {worst} of {scale}"
                );
            }
        }
    }
}
