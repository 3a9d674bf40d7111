//! The owner's data, when the trainer or a drawn verifier cannot fetch it (issue 34, item 3).
//!
//! A missing dataset is the owner's doing, never the trainer's: an owner that takes its data down
//! after the bundle commitment must not get a fail on an honest bundle (and a refund, with the
//! served model kept). So:
//!
//! 1. the trainer reports the data while assigned or while its bundle is under verification
//!    ([`do_report`]); a drawn verifier that cannot fetch the data *abstains* instead of voting
//!    ([`do_abstain`]): its seat is emptied but still counts among the drawn (abstentions decide
//!    nothing), its collateral stays frozen, and the first abstention opens the same check;
//! 2. validators' offchain workers check the files' chunk lists against the spec's content roots,
//!    fetch the chunks the reporters named ([`crate::DataGaps`]) and random ones by byte range,
//!    and attest ([`crate::availability`], subject `Data`, kept in [`crate::DataAttestations`]);
//! 3. two thirds "unavailable" end the job without a slash ([`Pallet::end_for_unavailable_data`]:
//!    the trainer paid the bid deposit's worth while assigned, its price once it delivered;
//!    revealed verifiers paid, abstainers released); two thirds "available" reject the report
//!    ([`data_found`]): one report per job, and every abstention on the job is slashed
//!    `VerifierSlash` as silence — after that nobody may abstain on it.

use frame_support::{ensure, pallet_prelude::DispatchResult, traits::Get};
use sp_runtime::traits::Saturating;

use crate::{
    availability, verification, Abstentions, Config, DataAttestations, DataGaps, DataReports,
    Error, Event, JobId, JobOf, JobState, Jobs, Pallet, Phase, RejectedDataReports, Rounds,
};
use ergon_job_spec::DataGap;
use ergon_protocol::traits::{Obligation, Obligations, SlashReason};

/// Most chunks named in one job's data check (the trainer and the round's abstainers each name
/// one; the rest are still checked by the attesters' random samples).
pub const MAX_DATA_GAPS: u32 = 8;

/// Opens the data check of `job` unless one is open or was rejected, and adds `gap` to the chunks
/// it fetches; returns whether it opened. A gap the check did not have restarts its attestations:
/// the attesters that already answered never fetched it.
pub(crate) fn open<T: Config>(
    job: JobId,
    record: &JobOf<T>,
    gap: Option<DataGap>,
) -> Result<bool, Error<T>> {
    if RejectedDataReports::<T>::contains_key(job) {
        return Err(Error::<T>::DataFoundAvailable);
    }
    if let Some(gap) = gap {
        let sets = record.spec.committed_files();
        let files = sets.get(gap.set as usize).map(|(files, _)| files.len()).unwrap_or(0);
        ensure!((gap.file as usize) < files, Error::<T>::DataGapOutOfRange);
    }
    let opened = !DataReports::<T>::contains_key(job);
    if opened {
        ensure!(availability::data_is_checkable(&record.spec), Error::<T>::DataNotCheckable);
        DataReports::<T>::insert(job, frame_system::Pallet::<T>::block_number());
        DataAttestations::<T>::remove(job);
    }
    if let Some(gap) = gap {
        let added =
            DataGaps::<T>::mutate(job, |gaps| !gaps.contains(&gap) && gaps.try_push(gap).is_ok());
        if added {
            DataAttestations::<T>::remove(job);
        }
    }
    Ok(opened)
}

/// [`Pallet::report_data_unavailable`]: the job's trainer, while assigned (before the deadline) or
/// verifying, opens the data check; one report per job.
pub(crate) fn do_report<T: Config>(
    job: JobId,
    who: T::AccountId,
    gap: Option<DataGap>,
) -> DispatchResult {
    let record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
    let trainer = match &record.state {
        JobState::Assigned { trainer, .. } => {
            let now = frame_system::Pallet::<T>::block_number();
            ensure!(now <= record.deadline, Error::<T>::DeadlinePassed);
            trainer.clone()
        }
        JobState::Verifying { trainer, .. } => trainer.clone(),
        _ => return Err(Error::<T>::NotAssignedTrainer.into()),
    };
    ensure!(trainer == who, Error::<T>::NotAssignedTrainer);
    // Before `open`, which would add the gap to a check someone else opened.
    ensure!(!DataReports::<T>::contains_key(job), Error::<T>::DataAlreadyReported);
    match open::<T>(job, &record, gap) {
        Err(Error::<T>::DataFoundAvailable) => return Err(Error::<T>::DataAlreadyReported.into()),
        other => other?,
    };
    Pallet::<T>::deposit_event(Event::DataReported { job, trainer });
    Ok(())
}

/// [`Pallet::abstain`]: a drawn verifier of the current round, before it commits, gives up its
/// seat because it cannot fetch the job's data.
pub(crate) fn do_abstain<T: Config>(
    job: JobId,
    who: T::AccountId,
    gap: Option<DataGap>,
) -> DispatchResult {
    let mut record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
    let mut round = Rounds::<T>::get(job).ok_or(Error::<T>::NotInCommitPhase)?;
    ensure!(round.phase == Phase::Commit, Error::<T>::NotInCommitPhase);
    let seat =
        round.votes.iter().position(|v| v.verifier == who).ok_or(Error::<T>::NotAVerifier)?;
    ensure!(round.votes[seat].commitment.is_none(), Error::<T>::AlreadyCommitted);
    let opened_data_check = open::<T>(job, &record, gap)?;
    Abstentions::<T>::try_mutate(job, |list| list.try_push((who.clone(), round.number)))
        .map_err(|_| Error::<T>::NotAVerifier)?;
    round.votes.remove(seat);
    Pallet::<T>::deposit_event(Event::VerifierAbstained {
        job,
        round: round.number,
        verifier: who,
        opened_data_check,
    });
    let now = frame_system::Pallet::<T>::block_number();
    if round.votes.is_empty() {
        // Nobody is left to commit: the round decides nothing, now rather than at the window's end.
        Pallet::<T>::unschedule(job, record.timeout);
        verification::settle::<T>(job, &mut record, round);
    } else {
        if round.votes.iter().all(|v| v.commitment.is_some()) {
            // Everyone left committed: reveal now, as `commit_verdict` does.
            Pallet::<T>::unschedule(job, record.timeout);
            Pallet::<T>::schedule(job, &mut record, now.saturating_add(T::RevealWindow::get()))?;
            round.phase = Phase::Reveal;
        }
        Rounds::<T>::insert(job, round);
    }
    Jobs::<T>::insert(job, record);
    Ok(())
}

/// Two thirds of the attesters found `job`'s data served and matching its content roots: the
/// report is rejected (one per job), and every verifier that abstained on it is slashed
/// `VerifierSlash` of its seat's collateral, as a silent one is.
pub(crate) fn data_found<T: Config>(job: JobId, trainer: T::AccountId) {
    DataReports::<T>::remove(job);
    DataGaps::<T>::remove(job);
    RejectedDataReports::<T>::insert(job, ());
    DataAttestations::<T>::remove(job);
    for (verifier, round) in Abstentions::<T>::take(job) {
        T::Staking::slash_obligation(
            &verifier,
            Obligation::Verification { job, round },
            T::VerifierSlash::get(),
            SlashReason::NoShow,
        );
    }
    Pallet::<T>::deposit_event(Event::DataReportRejected { job, trainer });
}
