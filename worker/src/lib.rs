//! # ergon-worker
//!
//! The trainer process of Ergon. This crate trains a job spec with candle and writes the checkpoint
//! bundle that Proof of Training checks:
//!
//! - [`data`]: fetch (path or http(s)), check the content root, decode IDX / CSV / text;
//! - [`rng`]: the seed-derived randomness (initial weights, batch order as a PRF of seed, epoch, step);
//! - [`model`]: the layer DSL as candle computations with our own seeded initialization;
//! - [`optim`]: SGD with momentum and AdamW with checkpointable state;
//! - [`train`]: the resumable training loop;
//! - [`bundle`]: checkpoints, manifest, Merkle root and inclusion proofs;
//! - [`verify`]: the Proof-of-Training verifier (integrity, Init(seed), segment replay, metrics);
//! - [`delivery`]: a completed job's model, fetched alone, checked against its root and evaluated;
//! - [`daemon`]: `ergon-worker run`, the trainer daemon that takes part in the market on its own.
//!
//! It depends on no node crate: the daemon reaches the chain through `ergon-client`, as any client does.

#[cfg(feature = "attacks")]
pub mod attacks;
pub mod bundle;
pub mod daemon;
pub mod data;
pub mod delivery;
pub mod drill;
pub mod error;
pub mod full_pass;
pub mod model;
pub mod optim;
pub mod rng;
pub mod serve;
pub mod train;
pub mod verify;

pub use error::{Error, Result};

use std::path::Path;

use ergon_job_spec::JobSpec;

/// Reads and validates a JSON job spec.
pub fn load_spec(path: &Path) -> Result<JobSpec> {
    let bytes = std::fs::read(path).map_err(error::io("reading", path))?;
    let spec: JobSpec = serde_json::from_slice(&bytes)
        .map_err(|source| Error::SpecJson { path: path.into(), source })?;
    spec.validate()?;
    Ok(spec)
}
