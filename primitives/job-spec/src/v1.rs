//! Version 1 of the job specification (before initial weights, schedules and adapters), kept to read what was
//! stored under it: the job market migrates its stored jobs with [`JobSpec::upgrade`].
//!
//! Only the top-level struct changed: v2 appended variants to [`crate::Layer`] and
//! [`crate::DataFormat`] and raised [`crate::MAX_DATA_FILES`], none of which changes how a v1 value
//! encodes, so v1's parts decode as v2's.

use codec::{Decode, Encode};

use crate::{Adapters, Dataset, InitialWeights, Model, Optimizer, Schedule};

/// A v1 training job: a v2 [`crate::JobSpec`] without `init`, `schedule` and `adapters`.
#[derive(Clone, PartialEq, Eq, Debug, Encode, Decode)]
pub struct JobSpec {
    /// The model to train.
    pub model: Model,
    /// Training data.
    pub train: Dataset,
    /// Validation data.
    pub validation: Dataset,
    /// Optimizer and hyper-parameters.
    pub optimizer: Optimizer,
    /// Passes over the training data.
    pub epochs: u32,
    /// Samples per optimizer step.
    pub batch_size: u32,
    /// A checkpoint every this many optimizer steps.
    pub checkpoint_interval: u32,
}

impl JobSpec {
    /// The same job in v2: seeded weights and a constant learning rate, as v1 trained (one step of
    /// the chain of upgrades: [`crate::v2::JobSpec::upgrade`] takes it on).
    pub fn upgrade(self) -> crate::v2::JobSpec {
        crate::v2::JobSpec {
            model: self.model,
            init: InitialWeights::Seed,
            train: self.train,
            validation: self.validation,
            optimizer: self.optimizer,
            schedule: Schedule::Constant,
            adapters: Adapters::None,
            gradients: Default::default(),
            epochs: self.epochs,
            batch_size: self.batch_size,
            checkpoint_interval: self.checkpoint_interval,
        }
    }
}
