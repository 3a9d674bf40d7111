//! Version 2 of the job specification (before `precision`), kept to read what was stored under it:
//! the job market migrates its stored jobs with [`JobSpec::upgrade`].
//!
//! Only the top-level struct changed (v3 appended `precision`), so v2's parts decode as v3's.

use codec::{Decode, Encode};

use crate::{Adapters, Dataset, Gradients, InitialWeights, Model, Optimizer, Precision, Schedule};

/// A v2 training job: a current [`crate::JobSpec`] without `precision`.
#[derive(Clone, PartialEq, Eq, Debug, Encode, Decode)]
pub struct JobSpec {
    /// The model to train.
    pub model: Model,
    /// Where C0's weights come from.
    pub init: InitialWeights,
    /// Training data.
    pub train: Dataset,
    /// Validation data.
    pub validation: Dataset,
    /// Optimizer and hyper-parameters.
    pub optimizer: Optimizer,
    /// Learning-rate schedule.
    pub schedule: Schedule,
    /// Full training or LoRA adapters.
    pub adapters: Adapters,
    /// Accumulation, clipping and decay scope.
    pub gradients: Gradients,
    /// Passes over the training data.
    pub epochs: u32,
    /// Samples per optimizer step.
    pub batch_size: u32,
    /// A checkpoint every this many optimizer steps.
    pub checkpoint_interval: u32,
}

impl JobSpec {
    /// The same job now: trained in f32, as every v2 job was.
    pub fn upgrade(self) -> crate::JobSpec {
        crate::JobSpec {
            model: self.model,
            init: self.init,
            train: self.train,
            validation: self.validation,
            optimizer: self.optimizer,
            schedule: self.schedule,
            adapters: self.adapters,
            gradients: self.gradients,
            epochs: self.epochs,
            batch_size: self.batch_size,
            checkpoint_interval: self.checkpoint_interval,
            precision: Precision::F32,
        }
    }
}
