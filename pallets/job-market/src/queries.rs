//! Read-only views for the runtime API (and so the node's RPC, the worker and polkadot.js). They read
//! at most `MaxActiveJobs` jobs and are never called on a block path.

use alloc::vec::Vec;

use crate::{Bids, Config, JobId, JobOf, JobState, Jobs, Pallet, RoundInfo, Rounds, VoteInfo};

impl<T: Config> Pallet<T> {
    /// Jobs taking bids, lowest id first, at most `limit`.
    pub fn open_jobs(limit: u32) -> Vec<(JobId, JobOf<T>)> {
        let mut open: Vec<_> =
            Jobs::<T>::iter().filter(|(_, job)| job.state == JobState::Open).collect();
        open.sort_by_key(|(id, _)| *id);
        open.truncate(limit as usize);
        open
    }

    /// The current verification round of `id`, if it is being verified.
    pub fn round_info(id: JobId) -> Option<RoundInfo<T::AccountId>> {
        Rounds::<T>::get(id).map(|round| RoundInfo {
            number: round.number,
            phase: round.phase,
            votes: round
                .votes
                .into_iter()
                .map(|v| VoteInfo {
                    verifier: v.verifier,
                    segments: v.segments.into_inner(),
                    commitment: v.commitment,
                    verdict: v.verdict,
                    evidence: v.evidence.into_iter().map(|s| s.into_inner()).collect(),
                })
                .collect(),
            disputed: round.disputed.into_inner(),
            trainer_evidence: round.trainer_evidence,
        })
    }

    /// Ids of the jobs `who` owns, bids on, trains or verifies (current round), lowest first, at
    /// most `limit`.
    pub fn jobs_of(who: &T::AccountId, limit: u32) -> Vec<JobId> {
        let mut ids: Vec<JobId> = Jobs::<T>::iter()
            .filter(|(id, job)| {
                job.owner == *who
                    || match &job.state {
                        JobState::Open => Bids::<T>::get(id).iter().any(|b| b.trainer == *who),
                        JobState::Assigned { trainer, .. }
                        | JobState::Verifying { trainer, .. }
                        | JobState::Completed { trainer, .. } => trainer == who,
                        JobState::Failed { trainer, .. } => trainer.as_ref() == Some(who),
                    }
                    || Rounds::<T>::get(id)
                        .is_some_and(|r| r.votes.iter().any(|v| v.verifier == *who))
            })
            .map(|(id, _)| id)
            .collect();
        ids.sort_unstable();
        ids.truncate(limit as usize);
        ids
    }
}
