//! The driller role: runs Proof-of-Drilling tasks on every core, producing the same bytes as the
//! reference in `ergon-drill`.
//!
//! - Matrix chains: the generation of the matrices and the result hash are the reference's own code;
//!   only the matrix product is the fast multi-threaded one, and integer sums do not depend on their
//!   order, so every machine agrees.
//! - Quantized inference: the committed files are fetched and checked against their hashes and the
//!   declared shapes by the reference's loader; samples are split over the threads, each running the
//!   reference's integer layers, and the logits are hashed in sample order.

use std::{path::Path, time::Instant};

use ergon_drill::{inference::Model, requantize, DrillError, MatmulChain, QuantizedInference};
use serde::Deserialize;

use crate::error::{io, Error, Result};

/// A drilling task file (`--task task.json`).
#[derive(Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
enum TaskFile {
    /// `{"kind": "MatmulChain", "seed": "0x…", "dim": 512, "length": 16}`
    MatmulChain { seed: String, dim: u32, length: u32 },
    /// `{"kind": "QuantizedInference", "model": "0x…", "model_uri": "…", "dataset": "0x…",
    /// "dataset_uri": "…", "widths": [784, 128, 10], "samples": 10000}` (URIs: http(s), `file://`
    /// or a path)
    QuantizedInference {
        model: String,
        model_uri: String,
        dataset: String,
        dataset_uri: String,
        widths: Vec<u32>,
        samples: u32,
    },
}

/// A validated drilling task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrillTask {
    /// Chained int8 matrix products.
    MatmulChain(MatmulChain),
    /// Int8 inference of a committed model over a committed dataset, with where to get them.
    QuantizedInference {
        /// Commitments and shapes.
        task: QuantizedInference,
        /// Where the model file is.
        model_uri: String,
        /// Where the dataset file is.
        dataset_uri: String,
    },
}

/// Reads and validates a task file.
pub fn load_task(path: &Path) -> Result<DrillTask> {
    let bytes = std::fs::read(path).map_err(io("reading", path))?;
    let bad = |reason: String| Error::Task { path: path.into(), reason };
    let hash = |name: &str, hex: &str| {
        crate::bundle::parse_hash(hex)
            .ok_or_else(|| bad(format!("{name} {hex:?} is not 32 bytes of hex")))
    };
    match serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))? {
        TaskFile::MatmulChain { seed, dim, length } => {
            let task = MatmulChain { seed: hash("seed", &seed)?, dim, length };
            task.validate().map_err(|e| bad(e.to_string()))?;
            Ok(DrillTask::MatmulChain(task))
        }
        TaskFile::QuantizedInference {
            model,
            model_uri,
            dataset,
            dataset_uri,
            widths,
            samples,
        } => {
            let task = QuantizedInference {
                model: hash("model", &model)?,
                dataset: hash("dataset", &dataset)?,
                widths,
                samples,
            };
            task.validate().map_err(|e| bad(e.to_string()))?;
            Ok(DrillTask::QuantizedInference { task, model_uri, dataset_uri })
        }
    }
}

/// How a matrix chain's products are computed (both give the reference's bytes).
#[derive(Clone, Debug)]
pub enum Engine {
    /// Exact f32 products with candle on a device ([`run_on_device`]): the CPU's f32 GEMM is several
    /// times faster than its int8 multiply-adds on x86 without VNNI, and the GPU path.
    Candle(candle_core::Device),
    /// The integer kernel on `threads` threads ([`run`]).
    Int8 {
        /// Threads.
        threads: usize,
    },
}

/// Runs any task, fetching an inference task's files first (inference runs on `threads` threads).
/// Files that cannot be fetched or do not match the task give the agreed "invalid" result (see
/// [`Outcome::invalid`]).
pub fn run_task(task: &DrillTask, threads: usize, engine: &Engine) -> Result<Outcome> {
    match task {
        DrillTask::MatmulChain(chain) => match engine {
            Engine::Candle(device) => run_on_device(chain, device),
            Engine::Int8 { threads } => run(chain, *threads),
        },
        DrillTask::QuantizedInference { task, model_uri, dataset_uri } => {
            let files = crate::data::fetch(model_uri)
                .and_then(|m| Ok((m, crate::data::fetch(dataset_uri)?)));
            match files {
                Ok((model, dataset)) => Ok(run_inference(task, &model, &dataset, threads)),
                Err(e) => Ok(Outcome {
                    result: task.invalid_result(),
                    ops: 0,
                    micro_ut: 0,
                    seconds: 0.0,
                    invalid: Some(e.to_string()),
                }),
            }
        }
    }
}

/// Runs an inference task over the given files on `threads` threads. Files that do not match the
/// task give [`QuantizedInference::invalid_result`], as the reference does.
pub fn run_inference(
    task: &QuantizedInference,
    model: &[u8],
    dataset: &[u8],
    threads: usize,
) -> Outcome {
    let started = Instant::now();
    let invalid = |e: DrillError| Outcome {
        result: task.invalid_result(),
        ops: 0,
        micro_ut: 0,
        seconds: started.elapsed().as_secs_f64(),
        invalid: Some(e.to_string()),
    };
    let (model, dataset) = match task.load(model, dataset) {
        Ok(loaded) => loaded,
        Err(e) => return invalid(e),
    };
    let samples = dataset.samples();
    let outputs = model.layers.last().map_or(0, |l| l.outputs);
    let mut logits = vec![0i8; samples * outputs];
    let per_thread = samples.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        for (chunk, out) in logits.chunks_mut(per_thread * outputs.max(1)).enumerate() {
            let (model, dataset) = (&model, &dataset);
            scope.spawn(move || infer_samples(model, dataset, chunk * per_thread, out));
        }
    });
    Outcome {
        result: task.result(logits),
        ops: task.ops(),
        micro_ut: task.difficulty_micro_ut(),
        seconds: started.elapsed().as_secs_f64(),
        invalid: None,
    }
}

/// A random int8 model with `widths` and a random dataset of `samples`, drawn from `seed`: the model
/// file, the dataset file and the task committing to them (for tests and benchmarks).
pub fn random_inference(
    seed: u64,
    widths: &[u32],
    samples: u32,
) -> (QuantizedInference, Vec<u8>, Vec<u8>) {
    use ergon_drill::inference::{Dataset, Layer};
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let layers = widths
        .windows(2)
        .map(|w| Layer {
            inputs: w[0] as usize,
            outputs: w[1] as usize,
            shift: (next() % 12) as u8,
            weights: (0..w[0] * w[1]).map(|_| next() as i8).collect(),
            biases: (0..w[1]).map(|_| next() as i32 % 5_000).collect(),
        })
        .collect();
    let model = Model { layers }.to_bytes();
    let dataset = Dataset {
        width: widths.first().copied().unwrap_or(0) as usize,
        values: (0..widths.first().copied().unwrap_or(0) * samples).map(|_| next() as i8).collect(),
    }
    .to_bytes();
    let task = QuantizedInference {
        model: ergon_drill::sha256(&model),
        dataset: ergon_drill::sha256(&dataset),
        widths: widths.to_vec(),
        samples,
    };
    (task, model, dataset)
}

fn infer_samples(
    model: &Model,
    dataset: &ergon_drill::inference::Dataset,
    first: usize,
    out: &mut [i8],
) {
    let outputs = model.layers.last().map_or(0, |l| l.outputs).max(1);
    for (i, row) in out.chunks_mut(outputs).enumerate() {
        row.copy_from_slice(&model.infer(dataset.sample(first + i)));
    }
}

/// What a run produced and how fast.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The result hash executors commit to.
    pub result: [u8; 32],
    /// Integer operations done.
    pub ops: u128,
    /// The task's difficulty (D credit on agreement), in micro-ut.
    pub micro_ut: u128,
    /// Wall time.
    pub seconds: f64,
    /// Why an inference task's inputs were unusable (the result is then the agreed "invalid" one).
    pub invalid: Option<String>,
}

impl Outcome {
    /// The outcome of matrix chain `task` with `result`, started at `started`.
    fn of_chain(task: &MatmulChain, result: [u8; 32], started: Instant) -> Self {
        Outcome {
            result,
            ops: task.ops(),
            micro_ut: task.difficulty_micro_ut(),
            seconds: started.elapsed().as_secs_f64(),
            invalid: None,
        }
    }

    /// Throughput in ut per hour.
    pub fn ut_per_hour(&self) -> f64 {
        self.micro_ut as f64 / 1e6 / self.seconds.max(1e-9) * 3600.0
    }

    /// Throughput in integer operations per second.
    pub fn ops_per_second(&self) -> f64 {
        self.ops as f64 / self.seconds.max(1e-9)
    }
}

/// Runs `task` on `threads` threads.
pub fn run(task: &MatmulChain, threads: usize) -> Result<Outcome> {
    task.validate().map_err(|e| Error::Task { path: "task".into(), reason: e.to_string() })?;
    let started = Instant::now();
    let result = task.run_with(|x, w, dim| product(x, w, dim, threads));
    Ok(Outcome::of_chain(task, result, started))
}

/// Most inner-dimension terms one f32 product may sum: every partial sum of at most `2¹⁰` int8·int8
/// products is an integer of magnitude at most `2¹⁰ · 2¹⁴ = 2²⁴`, which f32 represents exactly, so the
/// product is exact whatever order the kernel adds in (with FMA or without).
pub const EXACT_F32_TERMS: usize = 1 << 10;

/// Runs `task` with its products on a candle `device` (the CPU by default: its f32 GEMM outruns its
/// int8 multiply-adds; a GPU with `--cuda` in a build with the `cuda` feature): the same bytes as
/// the reference. Each product is computed
/// in f32 over inner-dimension blocks of at most [`EXACT_F32_TERMS`] (exact, see there), and the blocks
/// are added in wrapping i32 on the host, as the reference does. Reduced-precision (TF32) f32 GEMMs
/// are switched off, since they would round.
pub fn run_on_device(task: &MatmulChain, device: &candle_core::Device) -> Result<Outcome> {
    task.validate().map_err(|e| Error::Task { path: "task".into(), reason: e.to_string() })?;
    #[cfg(feature = "cuda")]
    candle_core::cuda::set_gemm_reduced_precision_f32(false);
    let started = Instant::now();
    let mut failure = None;
    let result = task.run_with(|x, w, dim| match device_product(x, w, dim, device) {
        Ok(out) => out,
        Err(e) => {
            failure.get_or_insert(e);
            vec![0; dim * dim]
        }
    });
    if let Some(e) = failure {
        return Err(e.into());
    }
    Ok(Outcome::of_chain(task, result, started))
}

/// `x · w` on `device`, exact (see [`run_on_device`]), requantized.
pub fn device_product(
    x: &[i8],
    w: &[i8],
    dim: usize,
    device: &candle_core::Device,
) -> candle_core::Result<Vec<i8>> {
    use candle_core::Tensor;
    let to_f32 = |m: &[i8]| m.iter().map(|v| *v as f32).collect::<Vec<f32>>();
    let xf = Tensor::from_vec(to_f32(x), (dim, dim), device)?;
    let wf = Tensor::from_vec(to_f32(w), (dim, dim), device)?;
    // The blocks' exact sums are added on the device in i64 (each is an integer below 2²⁴ in
    // magnitude, so the f32 → i64 conversion is exact), and only the total comes back: truncated to
    // i32 it is the wrapping i32 sum. (Copying every block back to add it on the host held the GPU
    // to about 1 % of its f32 peak, measured on an H100.)
    let mut acc: Option<Tensor> = None;
    for start in (0..dim).step_by(EXACT_F32_TERMS) {
        let len = EXACT_F32_TERMS.min(dim - start);
        // A column block of `x` is strided; candle's CUDA matmul takes only contiguous operands
        // (measured on an H100: dim 2048 failed without the copy). A row block of `w` is contiguous.
        let part = xf.narrow(1, start, len)?.contiguous()?.matmul(&wf.narrow(0, start, len)?)?;
        let part = part.to_dtype(candle_core::DType::I64)?;
        acc = Some(match acc {
            Some(sum) => (sum + part)?,
            None => part,
        });
    }
    let sums = match acc {
        Some(sum) => sum.flatten_all()?.to_vec1::<i64>()?,
        None => vec![0; dim * dim],
    };
    Ok(sums.into_iter().map(|v| requantize(v as i32)).collect())
}

/// `x · w` for `dim × dim` int8 matrices (row-major), i32 accumulation, requantized: `w` is
/// transposed once so that every entry is a dot product of two contiguous int8 rows (a reduction the
/// compiler turns into widening multiply-adds), and the rows of `x` are split over `threads` threads.
pub fn product(x: &[i8], w: &[i8], dim: usize, threads: usize) -> Vec<i8> {
    let mut out = vec![0i8; dim * dim];
    if dim == 0 {
        return out;
    }
    let mut wt = vec![0i8; dim * dim];
    for (k, row) in w.chunks_exact(dim).enumerate() {
        for (j, v) in row.iter().enumerate() {
            wt[j * dim + k] = *v;
        }
    }
    let wt = &wt;
    let rows_per_thread = dim.div_ceil(threads.max(1));
    std::thread::scope(|scope| {
        for (block, out_rows) in out.chunks_mut(rows_per_thread * dim).enumerate() {
            scope.spawn(move || rows(x, wt, dim, block * rows_per_thread, out_rows));
        }
    });
    out
}

fn rows(x: &[i8], wt: &[i8], dim: usize, first_row: usize, out: &mut [i8]) {
    for (r, out_row) in out.chunks_mut(dim).enumerate() {
        let xi = &x[(first_row + r) * dim..(first_row + r + 1) * dim];
        for (o, wj) in out_row.iter_mut().zip(wt.chunks_exact(dim)) {
            *o = requantize(dot(xi, wj));
        }
    }
}

/// Σ aₖ·bₖ with wrapping i32 accumulation.
#[inline(always)]
fn dot(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).fold(0i32, |sum, (x, y)| sum.wrapping_add(*x as i32 * *y as i32))
}

/// The machine's peak int8 multiply-add rate, in integer operations per second: the same vectorized
/// dot product as [`product`] over two cache-resident rows, on `threads` threads for about `seconds`.
pub fn peak_ops_per_second(threads: usize, seconds: f64) -> f64 {
    const LEN: usize = 1024;
    let started = Instant::now();
    let total: u64 = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|t| {
                scope.spawn(move || {
                    let a: Vec<i8> = (0..LEN).map(|i| (i * 7 + t) as i8).collect();
                    let b: Vec<i8> = (0..LEN).map(|i| (i * 13 + t) as i8).collect();
                    let mut sink = 0i32;
                    let mut rounds = 0u64;
                    while started.elapsed().as_secs_f64() < seconds {
                        for _ in 0..1024 {
                            sink = sink.wrapping_add(dot(std::hint::black_box(&a), &b));
                        }
                        rounds += 1024;
                    }
                    std::hint::black_box(sink);
                    rounds * LEN as u64 * 2
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    total as f64 / started.elapsed().as_secs_f64()
}

/// The rate of exact f32 matrix products on a candle `device` (1 024 × 1 024, the largest exact
/// block), in integer-equivalent operations per second, over about `seconds`: the peak of the
/// device path ([`run_on_device`]).
pub fn peak_f32_ops_per_second(device: &candle_core::Device, seconds: f64) -> Result<f64> {
    const N: usize = EXACT_F32_TERMS;
    let a = candle_core::Tensor::ones((N, N), candle_core::DType::F32, device)?;
    let started = Instant::now();
    let mut products = 0u64;
    while started.elapsed().as_secs_f64() < seconds {
        let c = a.matmul(&a)?;
        // Reading one value back waits for the product on asynchronous devices.
        c.narrow(0, 0, 1)?.narrow(1, 0, 1)?.flatten_all()?.to_vec1::<f32>()?;
        products += 1;
    }
    Ok(products as f64 * 2.0 * (N as f64).powi(3) / started.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_product_is_exact_across_inner_blocks() {
        // 1 100 > EXACT_F32_TERMS: two inner blocks; extreme entries make the largest sums.
        let dim = 1_100;
        let x = vec![-128i8; dim * dim];
        let w: Vec<i8> = (0..dim * dim).map(|i| if i % 3 == 0 { -128 } else { 127 }).collect();
        let cpu = candle_core::Device::Cpu;
        assert_eq!(device_product(&x, &w, dim, &cpu).unwrap(), ergon_drill::product(&x, &w, dim));
    }

    #[test]
    fn the_fast_product_matches_the_reference_on_odd_shapes_and_thread_counts() {
        for dim in [1usize, 2, 3, 7, 33] {
            let t = MatmulChain { seed: [dim as u8; 32], dim: dim as u32, length: 1 };
            let (x, w) = (t.matrix(0), t.matrix(1));
            for threads in [1, 2, 3, 8] {
                assert_eq!(product(&x, &w, dim, threads), ergon_drill::product(&x, &w, dim));
            }
        }
    }
}
