//! Quantized (int8) inference of a committed model over a committed dataset: drilling work with a use.
//!
//! A publisher commits (SHA-256) to a model file and a dataset file and declares their shapes; the
//! chain prices the task from the shapes (`2 · Σ in·out · samples` integer operations) and every
//! executor runs the model over every sample. Integer arithmetic makes the outputs identical on any
//! hardware, so the int8 logits the executors agree on are a trustworthy labelling of the dataset.
//!
//! Model file (`EQNN`, little-endian): magic `b"EQNN"`, version `1`, layer count `u8`, input width
//! `u32`, then per layer: output width `u32`, right shift `u8` (0‥31), weights `i8[out × in]`
//! (row-major, one row per output), biases `i32[out]`. Each layer computes
//! `yⱼ = clamp((bⱼ + Σₖ wⱼₖ·xₖ) >> shift, −128, 127)` with wrapping i32 sums and an arithmetic shift;
//! hidden layers apply ReLU, the last one gives the logits.
//!
//! Dataset file (`EQDS`): magic `b"EQDS"`, version `1`, samples `u32`, width `u32`, then
//! `i8[samples × width]`.
//!
//! Result: SHA-256 over a domain tag, the task's encoding and every sample's logits in order. A task
//! whose files do not match its commitments or shapes has the agreed result
//! [`QuantizedInference::invalid_result`], so honest executors still agree (and earn nothing).

use alloc::vec::Vec;
use codec::Encode;
use sha2::{Digest, Sha256};

use crate::{DrillError, Hash, OPS_PER_UT};

/// Most layers of a model.
pub const MAX_LAYERS: usize = 8;
/// Widest layer (and input).
pub const MAX_WIDTH: u32 = 4096;
/// Most samples of a dataset.
pub const MAX_SAMPLES: u32 = 1_000_000;
/// Most weights of a model (16 MiB of int8).
pub const MAX_WEIGHTS: u64 = 16 << 20;
/// Most int8 values of a dataset (256 MiB).
pub const MAX_DATASET_BYTES: u64 = 256 << 20;

const MODEL_MAGIC: &[u8; 4] = b"EQNN";
const DATASET_MAGIC: &[u8; 4] = b"EQDS";
const VERSION: u8 = 1;

/// An inference task as the chain stores it: commitments and the shapes that price it.
#[derive(Clone, PartialEq, Eq, Debug, Encode)]
pub struct QuantizedInference {
    /// SHA-256 of the model file.
    pub model: Hash,
    /// SHA-256 of the dataset file.
    pub dataset: Hash,
    /// Input width followed by every layer's output width (at least 2 entries).
    pub widths: Vec<u32>,
    /// Number of samples in the dataset.
    pub samples: u32,
}

/// One layer of a parsed model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    /// Input width.
    pub inputs: usize,
    /// Output width.
    pub outputs: usize,
    /// Right shift of the accumulated sums.
    pub shift: u8,
    /// `outputs × inputs` weights, row-major.
    pub weights: Vec<i8>,
    /// One bias per output.
    pub biases: Vec<i32>,
}

/// A parsed model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    /// The layers, input first.
    pub layers: Vec<Layer>,
}

/// A parsed dataset: `samples × width` int8 values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dataset {
    /// Values per sample.
    pub width: usize,
    /// All samples, one after another.
    pub values: Vec<i8>,
}

impl QuantizedInference {
    /// Checks the declared shapes against the bounds.
    pub fn validate(&self) -> Result<(), DrillError> {
        if self.widths.len() < 2 || self.widths.len() > MAX_LAYERS + 1 {
            return Err(DrillError::Layers);
        }
        if self.widths.iter().any(|w| *w == 0 || *w > MAX_WIDTH) {
            return Err(DrillError::Width);
        }
        if self.samples == 0 || self.samples > MAX_SAMPLES {
            return Err(DrillError::Samples);
        }
        let weights: u64 = self.widths.windows(2).map(|w| w[0] as u64 * w[1] as u64).sum();
        if weights > MAX_WEIGHTS {
            return Err(DrillError::Width);
        }
        if self.samples as u64 * self.widths[0] as u64 > MAX_DATASET_BYTES {
            return Err(DrillError::Samples);
        }
        Ok(())
    }

    /// Exact integer operations: `2 · Σ in·out · samples` (a multiply and an add per weight and
    /// sample; biases, shifts and ReLU are not counted).
    pub fn ops(&self) -> u128 {
        let per_sample: u128 = self.widths.windows(2).map(|w| w[0] as u128 * w[1] as u128).sum();
        2 * per_sample * self.samples as u128
    }

    /// Difficulty in micro-ut (rounded down).
    pub fn difficulty_micro_ut(&self) -> u128 {
        self.ops().saturating_mul(1_000_000) / OPS_PER_UT
    }

    /// Parses the two files and checks them against the commitments and shapes.
    pub fn load(&self, model: &[u8], dataset: &[u8]) -> Result<(Model, Dataset), DrillError> {
        self.validate()?;
        if crate::sha256(model) != self.model {
            return Err(DrillError::ModelHash);
        }
        if crate::sha256(dataset) != self.dataset {
            return Err(DrillError::DatasetHash);
        }
        let model = Model::parse(model)?;
        let dataset = Dataset::parse(dataset)?;
        let widths: Vec<u32> = core::iter::once(model.layers[0].inputs)
            .chain(model.layers.iter().map(|l| l.outputs))
            .map(|w| w as u32)
            .collect();
        if widths != self.widths {
            return Err(DrillError::ModelShape);
        }
        if dataset.width != self.widths[0] as usize || dataset.samples() != self.samples as usize {
            return Err(DrillError::DatasetShape);
        }
        Ok((model, dataset))
    }

    /// The reference result: loads the files and runs every sample in order. Files that do not match
    /// the task give [`Self::invalid_result`].
    pub fn run_reference(&self, model: &[u8], dataset: &[u8]) -> Hash {
        match self.load(model, dataset) {
            Ok((model, dataset)) => self.result(
                (0..dataset.samples()).flat_map(|i| model.infer(dataset.sample(i))).collect(),
            ),
            Err(_) => self.invalid_result(),
        }
    }

    /// The result hash of all samples' logits, concatenated in sample order.
    pub fn result(&self, logits: Vec<i8>) -> Hash {
        Sha256::new()
            .chain_update(b"ergon/drill/quantized-inference/result")
            .chain_update(self.encode())
            .chain_update(logits.into_iter().map(|v| v as u8).collect::<Vec<u8>>())
            .finalize()
            .into()
    }

    /// The result every honest executor reports when the committed files are missing or do not match
    /// the task: the chain recognises it and grants no credit.
    pub fn invalid_result(&self) -> Hash {
        Sha256::new()
            .chain_update(b"ergon/drill/quantized-inference/invalid")
            .chain_update(self.encode())
            .finalize()
            .into()
    }
}

/// A little-endian reader over a byte slice that fails instead of panicking.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, err: DrillError) -> Result<&'a [u8], DrillError> {
        if self.0.len() < n {
            return Err(err);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn u8(&mut self, err: DrillError) -> Result<u8, DrillError> {
        Ok(self.take(1, err)?[0])
    }
    /// Reads the 4-byte `magic` and the format version, failing with `err` on anything else.
    fn header(&mut self, magic: &[u8; 4], err: DrillError) -> Result<(), DrillError> {
        if self.take(4, err)? != magic || self.u8(err)? != VERSION {
            return Err(err);
        }
        Ok(())
    }
    fn u32(&mut self, err: DrillError) -> Result<u32, DrillError> {
        let b = self.take(4, err)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

impl Model {
    /// Parses an `EQNN` file (bounded by [`MAX_LAYERS`], [`MAX_WIDTH`] and [`MAX_WEIGHTS`]).
    pub fn parse(bytes: &[u8]) -> Result<Self, DrillError> {
        let bad = DrillError::ModelFormat;
        let mut r = Reader(bytes);
        r.header(MODEL_MAGIC, bad)?;
        let count = r.u8(bad)? as usize;
        if count == 0 || count > MAX_LAYERS {
            return Err(DrillError::Layers);
        }
        let mut inputs = r.u32(bad)?;
        let mut total: u64 = 0;
        let mut layers = Vec::with_capacity(count);
        for _ in 0..count {
            let outputs = r.u32(bad)?;
            let shift = r.u8(bad)?;
            if inputs == 0
                || outputs == 0
                || inputs > MAX_WIDTH
                || outputs > MAX_WIDTH
                || shift > 31
            {
                return Err(bad);
            }
            total += inputs as u64 * outputs as u64;
            if total > MAX_WEIGHTS {
                return Err(bad);
            }
            let n = inputs as usize * outputs as usize;
            let weights = r.take(n, bad)?.iter().map(|b| *b as i8).collect();
            let biases = r
                .take(4 * outputs as usize, bad)?
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            layers.push(Layer {
                inputs: inputs as usize,
                outputs: outputs as usize,
                shift,
                weights,
                biases,
            });
            inputs = outputs;
        }
        if !r.0.is_empty() {
            return Err(bad);
        }
        Ok(Model { layers })
    }

    /// Serializes to the `EQNN` format ([`Self::parse`]'s inverse).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MODEL_MAGIC);
        out.push(VERSION);
        out.push(self.layers.len() as u8);
        out.extend((self.layers.first().map_or(0, |l| l.inputs) as u32).to_le_bytes());
        for layer in &self.layers {
            out.extend((layer.outputs as u32).to_le_bytes());
            out.push(layer.shift);
            out.extend(layer.weights.iter().map(|w| *w as u8));
            for b in &layer.biases {
                out.extend(b.to_le_bytes());
            }
        }
        out
    }

    /// The logits of one sample (`sample.len()` is the input width).
    pub fn infer(&self, sample: &[i8]) -> Vec<i8> {
        let mut x: Vec<i8> = sample.to_vec();
        let last = self.layers.len().saturating_sub(1);
        for (index, layer) in self.layers.iter().enumerate() {
            x = layer.forward(&x, index < last);
        }
        x
    }
}

impl Layer {
    /// One layer on one input vector: wrapping i32 sums, arithmetic shift, clamp, optional ReLU.
    pub fn forward(&self, x: &[i8], relu: bool) -> Vec<i8> {
        self.weights
            .chunks_exact(self.inputs)
            .zip(&self.biases)
            .map(|(row, bias)| {
                let acc = row
                    .iter()
                    .zip(x)
                    .fold(*bias, |acc, (w, v)| acc.wrapping_add(*w as i32 * *v as i32));
                requantize_clamped(acc, self.shift, relu)
            })
            .collect()
    }
}

/// `clamp(acc >> shift, −128, 127)`, then `max(0, ·)` when `relu`.
#[inline(always)]
pub fn requantize_clamped(acc: i32, shift: u8, relu: bool) -> i8 {
    let y = (acc >> shift).clamp(i8::MIN as i32, i8::MAX as i32) as i8;
    if relu {
        y.max(0)
    } else {
        y
    }
}

impl Dataset {
    /// Parses an `EQDS` file (bounded by [`MAX_SAMPLES`], [`MAX_WIDTH`], [`MAX_DATASET_BYTES`]).
    pub fn parse(bytes: &[u8]) -> Result<Self, DrillError> {
        let bad = DrillError::DatasetFormat;
        let mut r = Reader(bytes);
        r.header(DATASET_MAGIC, bad)?;
        let samples = r.u32(bad)?;
        let width = r.u32(bad)?;
        if samples == 0 || samples > MAX_SAMPLES || width == 0 || width > MAX_WIDTH {
            return Err(bad);
        }
        let n = samples as u64 * width as u64;
        if n > MAX_DATASET_BYTES || r.0.len() as u64 != n {
            return Err(bad);
        }
        Ok(Dataset { width: width as usize, values: r.0.iter().map(|b| *b as i8).collect() })
    }

    /// Serializes to the `EQDS` format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(13 + self.values.len());
        out.extend_from_slice(DATASET_MAGIC);
        out.push(VERSION);
        out.extend((self.samples() as u32).to_le_bytes());
        out.extend((self.width as u32).to_le_bytes());
        out.extend(self.values.iter().map(|v| *v as u8));
        out
    }

    /// Number of samples.
    pub fn samples(&self) -> usize {
        self.values.len() / self.width.max(1)
    }

    /// Sample `i`.
    pub fn sample(&self, i: usize) -> &[i8] {
        &self.values[i * self.width..(i + 1) * self.width]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> (Model, Dataset) {
        let model = Model {
            layers: alloc::vec![
                Layer {
                    inputs: 2,
                    outputs: 2,
                    shift: 1,
                    weights: alloc::vec![1, 2, -3, 4],
                    biases: alloc::vec![0, -10]
                },
                Layer {
                    inputs: 2,
                    outputs: 1,
                    shift: 0,
                    weights: alloc::vec![100, 100],
                    biases: alloc::vec![5]
                },
            ],
        };
        let dataset = Dataset { width: 2, values: alloc::vec![10, 20, -10, 3] };
        (model, dataset)
    }

    fn task_of(model: &Model, dataset: &Dataset) -> QuantizedInference {
        QuantizedInference {
            model: crate::sha256(&model.to_bytes()),
            dataset: crate::sha256(&dataset.to_bytes()),
            widths: alloc::vec![2, 2, 1],
            samples: dataset.samples() as u32,
        }
    }

    #[test]
    fn hand_computed_logits() {
        let (model, dataset) = tiny();
        // Sample (10, 20): layer 1 sums 50 and 40 (−30 + 80 − 10), shifted 25 and 20, ReLU;
        // layer 2: 5 + 2500 + 2000 = 4505, clamped to 127.
        assert_eq!(model.infer(dataset.sample(0)), alloc::vec![127]);
        // Sample (−10, 3): sums −4 and 32 (30 + 12 − 10) → −2 → ReLU 0, and 16; layer 2: 5 + 1600.
        assert_eq!(model.infer(dataset.sample(1)), alloc::vec![127]);
        assert_eq!(requantize_clamped(-300, 0, false), -128);
        assert_eq!(requantize_clamped(-3, 1, false), -2, "arithmetic shift rounds down");
    }

    #[test]
    fn files_round_trip_and_mismatches_give_the_invalid_result() {
        let (model, dataset) = tiny();
        let (m, d) = (model.to_bytes(), dataset.to_bytes());
        assert_eq!(Model::parse(&m), Ok(model.clone()));
        assert_eq!(Dataset::parse(&d), Ok(dataset.clone()));
        let task = task_of(&model, &dataset);
        assert_eq!(task.validate(), Ok(()));
        assert_eq!(task.ops(), 2 * (4 + 2) * 2);
        let good = task.run_reference(&m, &d);
        assert_ne!(good, task.invalid_result());
        // Swapped files, a truncated file, wrong declared shapes.
        assert_eq!(task.load(&d, &m).unwrap_err(), DrillError::ModelHash);
        assert_eq!(task.run_reference(&m[..m.len() - 1], &d), task.invalid_result());
        let wrong = QuantizedInference { widths: alloc::vec![2, 3, 1], ..task.clone() };
        assert_eq!(wrong.load(&m, &d).unwrap_err(), DrillError::ModelShape);
        let wrong = QuantizedInference { samples: 3, ..task.clone() };
        assert_eq!(wrong.load(&m, &d).unwrap_err(), DrillError::DatasetShape);
        // Garbage never panics.
        for cut in 0..m.len() {
            assert!(Model::parse(&m[..cut]).is_err());
        }
        for cut in 0..d.len() {
            assert!(Dataset::parse(&d[..cut]).is_err());
        }
    }

    #[test]
    fn shapes_are_bounded() {
        let (model, dataset) = tiny();
        let task = task_of(&model, &dataset);
        let with =
            |widths: Vec<u32>, samples| QuantizedInference { widths, samples, ..task.clone() };
        assert_eq!(with(alloc::vec![2], 1).validate(), Err(DrillError::Layers));
        assert_eq!(with(alloc::vec![2; MAX_LAYERS + 2], 1).validate(), Err(DrillError::Layers));
        assert_eq!(with(alloc::vec![2, 0], 1).validate(), Err(DrillError::Width));
        assert_eq!(with(alloc::vec![4096, 4096, 4096], 1).validate(), Err(DrillError::Width));
        assert_eq!(with(alloc::vec![2, 2], 0).validate(), Err(DrillError::Samples));
    }
}
