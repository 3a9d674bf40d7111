//! The bundle manifest: what was trained, how, and the hash of every checkpoint tensor.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Manifest format version. 4: `final_train_loss` is the mean loss of the last epoch
/// ([`crate::trajectory::final_train_loss`]); up to 3 it was the last step's loss.
pub const FORMAT_VERSION: u32 = 4;

/// Where and how the run was computed. Replays elsewhere must tolerate differences of these.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// `cpu` or `cuda:<ordinal>`.
    pub device: String,
    /// Floating-point precision of weights, activations and optimizer state (`f32`).
    pub precision: String,
    /// SIMD features of the CPU that ran it (they change floating-point rounding of kernels).
    pub cpu_features: Vec<String>,
    /// Threads of the CPU kernels.
    pub threads: usize,
    /// `ergon-worker` version.
    pub worker_version: String,
    /// The kernels revision it ran ([`crate::KERNELS_REVISION`]): the one the job pins, or the
    /// bundle fails.
    pub kernels: u32,
}

/// One checkpoint Cᵢ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointEntry {
    /// Optimizer steps taken before it (0 for C0).
    pub step: u64,
    /// File name within the bundle.
    pub file: String,
    /// SHA-256 of the file's bytes.
    pub file_sha256: String,
    /// Length of the file in bytes.
    pub file_bytes: u64,
    /// SHA-256 of each `ergon_bundle::CHUNK_SIZE` chunk of the file: what availability checks
    /// fetch with range requests and compare.
    pub chunks: Vec<String>,
    /// Digest over the tensor hashes in name order: the checkpoint's Merkle leaf.
    pub digest: String,
    /// Hash of every tensor (`param.<name>` weights, `opt.<name>.<slot>` optimizer state), by name.
    pub tensors: BTreeMap<String, String>,
}

/// Metrics of the final model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Mean cross-entropy on the validation set.
    pub validation_loss: f32,
    /// Share of validation targets predicted right (argmax).
    pub validation_accuracy: f32,
    /// Mean training loss of the last epoch's steps (zero when the training diverged):
    /// [`crate::trajectory::final_train_loss`] of the manifest's losses.
    pub final_train_loss: f32,
}

/// Metrics as a bundle commitment states them on chain (`ClaimedMetrics`): losses in millionths,
/// accuracy in parts per million. The one conversion the trainer commits with and a verifier
/// compares with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnChainMetrics {
    /// `final_train_loss` in millionths.
    pub train_loss_micro: u64,
    /// `validation_loss` in millionths.
    pub validation_loss_micro: u64,
    /// `validation_accuracy` in parts per million.
    pub validation_accuracy_ppm: u32,
}

impl Metrics {
    /// These metrics as the chain records them.
    pub fn on_chain(&self) -> OnChainMetrics {
        let micro = |x: f32| (x as f64 * 1e6).round().clamp(0.0, u64::MAX as f64) as u64;
        OnChainMetrics {
            train_loss_micro: micro(self.final_train_loss),
            validation_loss_micro: micro(self.validation_loss),
            validation_accuracy_ppm: (self.validation_accuracy as f64 * 1e6).round().clamp(0.0, 1e6)
                as u32,
        }
    }
}

/// The manifest of a bundle (`manifest.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// SHA-256 of the SCALE-encoded job spec.
    pub spec_hash: String,
    /// The training seed.
    pub seed: String,
    /// Device, precision, CPU features, threads.
    pub environment: Environment,
    /// Samples per step.
    pub batch_size: u32,
    /// Steps between checkpoints.
    pub checkpoint_interval: u32,
    /// Steps per epoch.
    pub steps_per_epoch: u64,
    /// Steps of the run.
    pub total_steps: u64,
    /// Learning rate of each step.
    pub learning_rates: Vec<f32>,
    /// Training loss of each step (before its update).
    pub losses: Vec<f32>,
    /// C0 … Cn.
    pub checkpoints: Vec<CheckpointEntry>,
    /// Digest of the final weights (the `param.*` tensors of Cn).
    pub final_model_hash: String,
    /// Metrics of the final model.
    pub metrics: Metrics,
    /// Set when the training diverged: the optimizer step whose loss is not finite (or, equal to
    /// `total_steps`, a final model whose validation loss is not finite). The bundle then holds
    /// the checkpoints before it ([`ergon_job_spec::JobSpec::checkpoints_before_divergence`]), the
    /// losses of the steps before it, and zero metrics; a verifier replays from the last
    /// checkpoint to the divergence (the "tail", segment `checkpoints.len() - 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diverged_at: Option<u64>,
}

impl Manifest {
    /// Canonical bytes: pretty JSON with fields in declaration order (what `manifest.json` holds).
    pub fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut bytes = serde_json::to_vec_pretty(self)?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}
