//! # ergon-engine
//!
//! The computing half of Ergon's trainer process: it trains a job spec with candle, writes the
//! checkpoint bundle that Proof of Training checks, verifies other trainers' bundles and runs
//! drilling tasks. It is synchronous and deterministic and knows no chain: the worker's daemon
//! decides *what* to run, the engine only *runs* it.
//!
//! - [`data`]: fetch (path or http(s)), check the content root, decode IDX / CSV / text, a cache;
//! - [`device`]: the CPU or a CUDA GPU, opened once, with TF32 off;
//! - [`rng`]: the seed-derived randomness (initial weights, batch order as a PRF of seed, epoch, step);
//! - [`model`]: the layer DSL as candle computations with our own seeded initialization;
//! - [`ops`]: the CPU kernels, each with its own backward pass: convolution, max-pooling, ReLU, and
//!   (`ops/dense.rs`, `ops/transformer.rs`) linear layers, layer norm, cross-entropy, GELU and causal
//!   attention; and the optimizers' in-place updates;
//! - [`optim`]: SGD with momentum and AdamW with checkpointable state;
//! - [`step`]: one optimizer step's passes, on a GPU replayed as a CUDA graph;
//! - [`trajectory`]: the optimizer steps, checkpoint schedule, state save/load, evaluation;
//! - [`train`]: the resumable training loop that writes a bundle;
//! - [`bundle`]: checkpoints, manifest, Merkle root and inclusion proofs;
//! - [`verify`]: the Proof-of-Training verifier (integrity, Init(seed), segment replay, metrics),
//!   one file per check, and the full-pass rules it reads on the checkpoints it samples;
//! - [`drill`]: Proof-of-Drilling tasks;
//! - [`calibrate`]: this machine's training throughput, measured by training a reference model;
//! - [`delivery`]: a completed job's model, fetched alone, checked against its root and evaluated;
//! - [`run`]: what every long computation takes from its caller — the thread pool, a progress
//!   callback and a cancellation token — instead of process-global state.

#[cfg(feature = "attacks")]
pub mod attacks;
pub mod bundle;
pub mod calibrate;
pub mod data;
pub mod delivery;
pub mod device;
pub mod drill;
pub mod error;
pub mod model;
pub mod ops;
pub mod optim;
pub mod rng;
pub mod run;
pub mod step;
pub mod train;
pub mod trajectory;
pub mod verify;
pub mod weights;

pub use ergon_protocol::kernels::KERNELS_REVISION;
pub use error::{Error, Result};
pub use run::{Cancel, Threads};

use std::path::Path;

use ergon_job_spec::JobSpec;

/// Whether this worker runs kernels revision `job`, the one a job pins: [`Error::OtherKernels`] if
/// not, since its replay of an honest bundle of other kernels may be off by more than ε.
pub fn runs_kernels(job: u32) -> Result<()> {
    if job == KERNELS_REVISION {
        Ok(())
    } else {
        Err(Error::OtherKernels { job, ours: KERNELS_REVISION })
    }
}

/// Reads and validates a JSON job spec.
pub fn load_spec(path: &Path) -> Result<JobSpec> {
    let bytes = std::fs::read(path).map_err(error::io("reading", path))?;
    let spec: JobSpec = serde_json::from_slice(&bytes)
        .map_err(|source| Error::SpecJson { path: path.into(), source })?;
    spec.validate()?;
    Ok(spec)
}
