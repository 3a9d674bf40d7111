//! The verifier's checks, one file per numbered check of [`super`] (its module documentation lists
//! them); [`super::verify`] runs them in order. A check adds its outcome to the [`Report`] and says
//! whether the ones after it can still run: a bundle that is not what it claims to be is not
//! replayed.

pub(super) mod device;
pub(super) mod files;
pub(super) mod final_model;
pub(super) mod init;
pub(super) mod manifest;
pub(super) mod metrics;
pub(super) mod replay;
pub(super) mod rules;
pub(super) mod states;

use candle_core::Device;
use ergon_job_spec::{JobSpec, SpecSummary};

use super::{Checkpoints, Selection, VerifyOptions};
use crate::{bundle::Manifest, data::JobData, model::Model, optim::Optimizer, rng::Seed};

/// The bundle as the checks after the first two see it: read (check 1) and describing this job
/// (check 2).
pub(super) struct Bundle<'a> {
    pub spec: &'a JobSpec,
    pub summary: &'a SpecSummary,
    pub opts: &'a VerifyOptions,
    /// The Merkle root recomputed from the files.
    pub root: [u8; 32],
    pub manifest: &'a Manifest,
    /// What is read and replayed.
    pub chosen: &'a Selection,
    /// The prescribed seed, which the manifest names.
    pub seed: Seed,
    pub checkpoints: Checkpoints<'a>,
    /// The coordinates the rules compare of every checkpoint of their sample.
    pub coordinates: super::CoordinateSample,
}

/// The replay's working state: a model and its optimizer on the replay device, and the job's data.
pub(super) struct Replayer<'a> {
    pub model: Model,
    pub opt: Optimizer,
    pub device: &'a Device,
    /// The replay device as the manifest's environment names devices.
    pub replayed_on: String,
    pub data: JobData,
}
