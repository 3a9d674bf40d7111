//! # Proof-of-Drilling workloads
//!
//! Drilling tasks are network-issued benchmark work: every executor assigned a task must produce the
//! same result bytes, whatever its hardware, so that agreement of `r` executors can be checked by
//! comparing hashes. Floating point cannot promise that (summation order differs between kernels), so
//! the workloads here are integer-only.
//!
//! [`MatmulChain`]: `X₀` and `W₁ … W_L` are `n × n` int8 matrices drawn from the task seed; each step
//! multiplies with i32 accumulation and keeps bits 8‥15 of every sum as the next int8 matrix:
//! `Xₖ = ⌊(Xₖ₋₁ · Wₖ) / 2⁸⌋ mod 2⁸`. Keeping middle bits (wrapping, not clamping) keeps every `Xₖ` spread
//! over the whole int8 range, so the chain never collapses to a constant a cheater could guess; the
//! truncation makes it non-linear, so the product of the `W`s cannot be taken ahead of time. The
//! result is SHA-256 over the task and `X_L`. Work: exactly `2·n³·L` integer operations (a multiply and
//! an add per term), priced like training FLOPs (432·10⁹ per ut).
//!
//! [`QuantizedInference`] ([`inference`]): int8 inference of a committed model over a committed
//! dataset, work whose agreed output (the logits) is useful in itself.
//!
//! This crate is the reference (`no_std`, used on chain to size tasks and by tests); the worker runs
//! the same generation and hashing around a fast multi-threaded product, and a property test checks
//! that both give the same bytes.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod inference;

pub use inference::QuantizedInference;

use alloc::vec::Vec;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;
use sha2::{Digest, Sha256};

/// Largest matrix side.
pub const MAX_DIM: u32 = 4096;
/// Longest chain.
pub const MAX_LENGTH: u32 = 100_000;
/// Integer operations per unit of work (ut), the same rate as training FLOPs.
pub const OPS_PER_UT: u128 = 432_000_000_000;

/// A 32-byte digest.
pub type Hash = [u8; 32];

/// Why a task cannot be run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrillError {
    /// The matrix side is zero or above [`MAX_DIM`].
    Dim,
    /// The chain is empty or longer than [`MAX_LENGTH`].
    Length,
    /// A model has no layers or more than [`inference::MAX_LAYERS`].
    Layers,
    /// A layer width is zero, above [`inference::MAX_WIDTH`], or the model is too big.
    Width,
    /// The dataset is empty or too big.
    Samples,
    /// The model file does not hash to the committed model.
    ModelHash,
    /// The dataset file does not hash to the committed dataset.
    DatasetHash,
    /// The model file is not a valid `EQNN` file.
    ModelFormat,
    /// The dataset file is not a valid `EQDS` file.
    DatasetFormat,
    /// The model's layer widths are not the declared ones.
    ModelShape,
    /// The dataset's width or sample count is not the declared one.
    DatasetShape,
}

impl core::fmt::Display for DrillError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DrillError::Dim => write!(f, "matrix side must be 1..={MAX_DIM}"),
            DrillError::Length => write!(f, "chain length must be 1..={MAX_LENGTH}"),
            DrillError::Layers => {
                write!(f, "a model needs 1..={} layers", inference::MAX_LAYERS)
            }
            DrillError::Width => write!(
                f,
                "layer widths must be 1..={} with at most {} weights in all",
                inference::MAX_WIDTH,
                inference::MAX_WEIGHTS
            ),
            DrillError::Samples => write!(
                f,
                "a dataset needs 1..={} samples and at most {} bytes",
                inference::MAX_SAMPLES,
                inference::MAX_DATASET_BYTES
            ),
            DrillError::ModelHash => write!(f, "the model file does not match its commitment"),
            DrillError::DatasetHash => write!(f, "the dataset file does not match its commitment"),
            DrillError::ModelFormat => write!(f, "the model file is not a valid EQNN file"),
            DrillError::DatasetFormat => write!(f, "the dataset file is not a valid EQDS file"),
            DrillError::ModelShape => {
                write!(f, "the model's layer widths are not the declared ones")
            }
            DrillError::DatasetShape => write!(f, "the dataset's shape is not the declared one"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for DrillError {}

/// Chained int8 matrix products with i32 accumulation over seeded matrices.
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
pub struct MatmulChain {
    /// Seed of every matrix of the task.
    pub seed: Hash,
    /// Matrix side `n`.
    pub dim: u32,
    /// Number of products `L`.
    pub length: u32,
}

impl MatmulChain {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), DrillError> {
        if self.dim == 0 || self.dim > MAX_DIM {
            return Err(DrillError::Dim);
        }
        if self.length == 0 || self.length > MAX_LENGTH {
            return Err(DrillError::Length);
        }
        Ok(())
    }

    /// Exact integer operations: `2·n³·L`.
    pub fn ops(&self) -> u128 {
        2 * (self.dim as u128).pow(3) * self.length as u128
    }

    /// Difficulty in micro-ut (rounded down).
    pub fn difficulty_micro_ut(&self) -> u128 {
        self.ops().saturating_mul(1_000_000) / OPS_PER_UT
    }

    /// Matrix `index` of the task (0 is `X₀`, `k ≥ 1` is `Wₖ`), row-major.
    pub fn matrix(&self, index: u32) -> Vec<i8> {
        let digest = Sha256::new()
            .chain_update(b"ergon/drill/matmul-chain")
            .chain_update(self.seed)
            .chain_update(index.to_le_bytes())
            .finalize();
        let mut state = u64::from_le_bytes(digest[..8].try_into().expect("32-byte digest; qed"));
        let len = self.dim as usize * self.dim as usize;
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend(splitmix64(&mut state).to_le_bytes().map(|b| b as i8));
        }
        out.truncate(len);
        out
    }

    /// Runs the chain with `product` as the matrix product (`x · w`, both `dim × dim`, row-major,
    /// requantized with [`requantize`]); returns the result hash.
    pub fn run_with(&self, mut product: impl FnMut(&[i8], &[i8], usize) -> Vec<i8>) -> Hash {
        let dim = self.dim as usize;
        let mut x = self.matrix(0);
        for k in 1..=self.length {
            x = product(&x, &self.matrix(k), dim);
        }
        self.result(&x)
    }

    /// The reference result: [`Self::run_with`] the naive [`product`].
    pub fn run_reference(&self) -> Hash {
        self.run_with(product)
    }

    /// The result hash of the final matrix `x`.
    pub fn result(&self, x: &[i8]) -> Hash {
        Sha256::new()
            .chain_update(b"ergon/drill/matmul-chain/result")
            .chain_update(self.encode())
            .chain_update(x.iter().map(|v| *v as u8).collect::<Vec<u8>>())
            .finalize()
            .into()
    }
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Hash {
    Sha256::digest(bytes).into()
}

/// SplitMix64: a small, exact, portable generator (not for secrets: seeds are public anyway).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An accumulated sum to the next int8 entry: bits 8‥15 (two's complement, wrapping).
#[inline(always)]
pub fn requantize(acc: i32) -> i8 {
    (acc >> 8) as i8
}

/// The reference product `x · w` of two `dim × dim` int8 matrices, i32 accumulation, requantized.
pub fn product(x: &[i8], w: &[i8], dim: usize) -> Vec<i8> {
    let mut out = alloc::vec![0i8; dim * dim];
    for i in 0..dim {
        for j in 0..dim {
            let mut acc: i32 = 0;
            for k in 0..dim {
                acc = acc.wrapping_add(x[i * dim + k] as i32 * w[k * dim + j] as i32);
            }
            out[i * dim + j] = requantize(acc);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(dim: u32, length: u32) -> MatmulChain {
        MatmulChain { seed: [3; 32], dim, length }
    }

    #[test]
    fn ops_difficulty_and_bounds() {
        let t = task(512, 10);
        assert_eq!(t.ops(), 2 * 512u128.pow(3) * 10);
        assert_eq!(t.difficulty_micro_ut(), t.ops() * 1_000_000 / OPS_PER_UT);
        assert_eq!(task(0, 1).validate(), Err(DrillError::Dim));
        assert_eq!(task(MAX_DIM + 1, 1).validate(), Err(DrillError::Dim));
        assert_eq!(task(4, 0).validate(), Err(DrillError::Length));
        assert_eq!(task(4, MAX_LENGTH + 1).validate(), Err(DrillError::Length));
        assert_eq!(task(4, 1).validate(), Ok(()));
    }

    #[test]
    fn matrices_depend_on_seed_and_index_and_cover_the_range() {
        let t = task(64, 2);
        let (a, b) = (t.matrix(0), t.matrix(1));
        assert_eq!(a.len(), 64 * 64);
        assert_ne!(a, b);
        assert_ne!(a, MatmulChain { seed: [4; 32], ..t }.matrix(0));
        assert!(a.iter().any(|v| *v < -100) && a.iter().any(|v| *v > 100));
    }

    #[test]
    fn the_chain_stays_spread_and_the_result_commits_to_the_task() {
        // After many products the matrix is still spread over the int8 range (no collapse).
        let t = task(32, 40);
        let mut x = t.matrix(0);
        for k in 1..=t.length {
            x = product(&x, &t.matrix(k), 32);
        }
        let distinct = x.iter().collect::<alloc::collections::BTreeSet<_>>().len();
        assert!(distinct > 200, "only {distinct} distinct values after 40 products");
        assert_eq!(t.run_reference(), t.result(&x));
        assert_ne!(t.run_reference(), task(32, 39).run_reference());
    }

    #[test]
    fn a_hand_computed_product() {
        // [[1, 2], [3, 4]] · [[5, 6], [7, 8]] = [[19, 22], [43, 50]], scaled by 2⁸ and back.
        let x = [1i8, 2, 3, 4];
        let w = [5i8, 6, 7, 8];
        assert_eq!(product(&x, &w, 2), alloc::vec![0, 0, 0, 0]);
        let big = [100i8, 100, 100, 100];
        // 2·100·100 = 20 000 = 0x4E20: bits 8‥15 are 0x4E = 78.
        assert_eq!(product(&big, &big, 2), alloc::vec![78; 4]);
        // −20 000 = 0x…B1E0 (two's complement): bits 8‥15 are 0xB1 = −79.
        let neg = [-100i8, -100, -100, -100];
        assert_eq!(product(&big, &neg, 2), alloc::vec![-79; 4]);
    }
}
