//! The training seed of a job: C0 and the batch order are regenerated from it, so neither the
//! trainer nor the owner can choose them once the job id and the trainer are fixed.

use crate::hash::{tagged, JOB_SEED, SYNTHETIC_TASK};

/// A 32-byte training seed.
pub type Seed = [u8; 32];

/// The seed of job `job` trained by `trainer` (the account's raw 32 bytes, never its text form):
/// `blake2_256(SCALE(("ergon/job-seed/v1", job, trainer)))`.
pub fn job_seed(job: u64, trainer: &[u8; 32]) -> Seed {
    tagged(JOB_SEED, &(job, trainer))
}

/// The seed of the `index`-th synthetic drilling task issued from an epoch's draw seed
/// `epoch_seed`: `blake2_256(SCALE(("ergon/synthetic-task/v1", epoch_seed, index)))`.
pub fn synthetic_task(epoch_seed: &[u8; 32], index: u32) -> Seed {
    tagged(SYNTHETIC_TASK, &(epoch_seed, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_binds_job_and_account() {
        let a = [1u8; 32];
        let b = [2u8; 32];
        assert_ne!(job_seed(1, &a), job_seed(2, &a));
        assert_ne!(job_seed(1, &a), job_seed(1, &b));
        assert_eq!(job_seed(7, &a), job_seed(7, &a));
    }
}
