//! Assignment and verification: choosing the winning bid, drawing verifiers (opted in, by stake at
//! risk) and segments, the commit-reveal vote, escalation of split rounds, and settlement from
//! obligation collateral.
//!
//! **Draws nobody can predict or steer.** A round's draw waits for randomness that began after the
//! round opened ([`FreshRandomness`]: BABE's VRF outputs of a whole epoch that started after the
//! commitment), so when the trainer commits its root nobody — not even a trainer that authors
//! blocks — knows which segments or verifiers will be drawn. Its candidates are the pool entries
//! that joined before that randomness began, each weighted by the lower of its bond at joining and
//! its bond now, ordered by an exponential race ([`ergon_protocol::draw::weighted_order`]) where
//! each entry's place depends on its own key only: whoever learns the randomness first (the last
//! authors of the epoch) can neither add a candidate nor move one by changing the list around it;
//! all it can do is take its own entries out, which never draws more of them.

use alloc::vec::Vec;
use codec::Encode;
use core::marker::PhantomData;
use ergon_protocol::traits::{BondInspect, FreshRandomness, Obligation, Obligations, SlashReason};
use ergon_protocol::traits::{ComputePowerLedger, WorkKind};
use frame_support::{
    pallet_prelude::*,
    traits::{
        fungible::MutateHold,
        tokens::{Fortitude, Precision, Restriction},
    },
};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_core::H256;
use sp_runtime::traits::{One, SaturatedConversion, Saturating, Zero};

use crate::{
    weights::WeightInfo, BalanceOf, Bid, Config, Error, Event, FailureReason, HoldReason, JobId,
    JobOf, JobState, Jobs, Pallet, PastVerifiers, PendingVotes, Phase, Round, RoundOf, Rounds,
    Verdict, VerifierPool, VerifierVote,
};

/// Bound of [`crate::PastVerifiers`]: every verifier of every round.
pub struct MaxPastVerifiers<T>(PhantomData<T>);

impl<T: Config> Get<u32> for MaxPastVerifiers<T> {
    fn get() -> u32 {
        T::Verifiers::get().saturating_mul(T::MaxRounds::get())
    }
}

/// A bundle URI must be non-empty `http://` or `https://`: the validators' availability check and
/// every verifier must be able to fetch it (a `file://` path exists on one machine only).
pub fn is_valid_uri(uri: &[u8]) -> bool {
    [&b"http://"[..], b"https://"]
        .iter()
        .any(|scheme| uri.len() > scheme.len() && uri.starts_with(scheme))
}

/// The commitment a verifier makes to its verdict ([`ergon_protocol::commitments::verdict`]).
pub fn verdict_commitment<AccountId: Encode>(
    job: JobId,
    round: u32,
    verifier: &AccountId,
    verdict: Verdict,
    evidence_hash: H256,
    salt: H256,
) -> H256 {
    H256(ergon_protocol::commitments::verdict(
        job,
        round,
        verifier,
        verdict,
        &evidence_hash.0,
        &salt.0,
    ))
}

/// A new round opened at `opened_at`, waiting for its draw.
pub fn new_round<T: Config>(number: u32, opened_at: BlockNumberFor<T>) -> RoundOf<T> {
    Round {
        number,
        phase: Phase::Drawing,
        opened_at,
        votes: Default::default(),
        segments: Default::default(),
    }
}

/// `who`'s draw weight from its active bond: planck, saturated to `u64`.
pub fn stake_weight<T: Config>(who: &T::AccountId) -> u64 {
    let stake: u128 = T::Staking::active_bond(who).saturated_into();
    stake.min(u64::MAX as u128) as u64
}

/// Training work (micro-ut) a verifier replays in one round: `count` of the job's `segments`
/// (rounded up; all of it if the job has fewer segments).
pub fn replay_work(work_micro_ut: u128, segments: u64, count: u32) -> u128 {
    let segments = segments.max(1) as u128;
    let count = (count as u128).min(segments);
    sp_runtime::helpers_128bit::multiply_by_rational_with_rounding(
        work_micro_ut,
        count,
        segments,
        sp_runtime::Rounding::Up,
    )
    .unwrap_or(u128::MAX)
}

/// The winning bid among `bids`: eligible trainers whose free bond covers the price as collateral,
/// lowest price, then highest ECP, then the lowest account (so every node agrees).
pub fn cheapest_bid<T: Config>(
    bids: Vec<Bid<T::AccountId, BalanceOf<T>>>,
) -> Option<Bid<T::AccountId, BalanceOf<T>>> {
    bids.into_iter()
        .filter(|b| {
            T::Staking::is_eligible(&b.trainer)
                && T::Staking::free_collateral(&b.trainer) >= b.price
        })
        .min_by(|a, b| {
            a.price
                .cmp(&b.price)
                .then_with(|| {
                    T::ComputePower::ecp(&b.trainer).cmp(&T::ComputePower::ecp(&a.trainer))
                })
                .then_with(|| a.trainer.cmp(&b.trainer))
        })
}

/// A verifying job's phase timed out at `now`; returns the weight of what it did.
pub(crate) fn advance<T: Config>(id: JobId, job: &mut JobOf<T>, now: BlockNumberFor<T>) -> Weight {
    let Some(mut round) = Rounds::<T>::get(id) else {
        frame_support::defensive!("a verifying job has no round");
        return T::WeightInfo::timeout_remove();
    };
    match round.phase {
        Phase::Drawing => {
            let weight = T::WeightInfo::timeout_draw(VerifierPool::<T>::count());
            if draw::<T>(id, job, &mut round, now) {
                return weight;
            }
            Rounds::<T>::insert(id, round);
            weight
        }
        Phase::Commit => {
            if round.votes.iter().all(|v| v.commitment.is_none()) {
                // Nobody committed: nothing to reveal.
                settle::<T>(id, job, round);
            } else {
                round.phase = Phase::Reveal;
                Pallet::<T>::reschedule(id, job, now.saturating_add(T::RevealWindow::get()));
                Rounds::<T>::insert(id, round);
            }
            T::WeightInfo::timeout_settle()
        }
        Phase::Reveal => {
            settle::<T>(id, job, round);
            T::WeightInfo::timeout_settle()
        }
    }
}

/// Draws the round's verifiers and segments once randomness that began after the round opened
/// exists (see the module docs). Returns whether the round was settled already (nobody could be
/// drawn), in which case `round` is stale.
fn draw<T: Config>(
    id: JobId,
    job: &mut JobOf<T>,
    round: &mut RoundOf<T>,
    now: BlockNumberFor<T>,
) -> bool {
    let JobState::Verifying { trainer, .. } = &job.state else { return false };
    let trainer = trainer.clone();
    let fresh = T::Randomness::fresh(round.opened_at);
    let (seed, since) = match fresh {
        Some((random, since)) => (
            ergon_protocol::hash::draw_seed(&random, &(b"ergon/job-market/draw", id, round.number)),
            since,
        ),
        // Not yet: ask again about when the next epoch's randomness appears. The epochs never stop
        // while blocks are made, so this ends; the bound only keeps a broken source from holding
        // the job forever (the round then draws nobody and is settled as indecisive).
        None if now <= round.opened_at.saturating_add(T::CommitWindow::get()) => {
            Pallet::<T>::reschedule(id, job, now.saturating_add(T::Randomness::retry_in()));
            return false;
        }
        None => ([0; 32], now),
    };
    let past = PastVerifiers::<T>::get(id);
    let collateral = T::VerifierCollateral::get();
    // Opted-in verifiers that joined before the randomness began, weighted by their bond (the stake
    // they put at risk, never more than at joining), not by ECP: ECP can be earned with sham jobs,
    // stake cannot be had for free.
    let candidates: Vec<(T::AccountId, u64)> = if fresh.is_some() {
        VerifierPool::<T>::iter()
            .filter(|(who, entry)| {
                entry.since < since && *who != trainer && *who != job.owner && !past.contains(who)
            })
            .map(|(who, entry)| {
                let weight = entry.weight.min(stake_weight::<T>(&who));
                (who, weight)
            })
            .collect()
    } else {
        Vec::new()
    };
    let order = ergon_protocol::draw::weighted_order(&seed, b"verifiers", &candidates);
    // The first `Verifiers` of the race that can still put up the collateral (skipping one never
    // moves the others).
    let verifiers: Vec<T::AccountId> = order
        .into_iter()
        .filter(|v| {
            T::Staking::is_eligible(v)
                && T::Staking::obligate(
                    v,
                    Obligation::Verification { job: id, round: round.number },
                    collateral,
                )
                .is_ok()
        })
        .take(T::Verifiers::get() as usize)
        .collect();
    let segments = if verifiers.is_empty() {
        Vec::new()
    } else {
        ergon_protocol::segments::draw(
            &seed,
            u32::try_from(job.checkpoints.saturating_sub(1)).unwrap_or(u32::MAX),
            T::SegmentsPerRound::get(),
        )
    };
    round.votes = BoundedVec::truncate_from(
        verifiers
            .iter()
            .map(|v| VerifierVote { verifier: v.clone(), commitment: None, verdict: None })
            .collect(),
    );
    round.segments = BoundedVec::truncate_from(segments.clone());
    round.phase = Phase::Commit;
    PastVerifiers::<T>::mutate(id, |past| {
        for v in &verifiers {
            let _ = past.try_push(v.clone());
        }
    });
    Pallet::<T>::deposit_event(Event::VerifiersDrawn {
        job: id,
        round: round.number,
        verifiers: verifiers.clone(),
        segments,
    });
    if verifiers.is_empty() {
        // No one can verify this round: it is settled as indecisive right away.
        settle::<T>(id, job, round.clone());
        return true;
    }
    Pallet::<T>::reschedule(id, job, now.saturating_add(T::CommitWindow::get()));
    false
}

impl<T: Config> Pallet<T> {
    pub(crate) fn do_commit(job: JobId, who: T::AccountId, commitment: H256) -> DispatchResult {
        let mut record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
        let mut round = Rounds::<T>::get(job).ok_or(Error::<T>::NotInCommitPhase)?;
        ensure!(round.phase == Phase::Commit, Error::<T>::NotInCommitPhase);
        let vote =
            round.votes.iter_mut().find(|v| v.verifier == who).ok_or(Error::<T>::NotAVerifier)?;
        ensure!(vote.commitment.is_none(), Error::<T>::AlreadyCommitted);
        vote.commitment = Some(commitment);
        let number = round.number;
        if round.votes.iter().all(|v| v.commitment.is_some()) {
            // Everyone committed: reveal now rather than at the end of the window.
            let now = frame_system::Pallet::<T>::block_number();
            Self::unschedule(job, record.timeout);
            Self::schedule(job, &mut record, now.saturating_add(T::RevealWindow::get()))?;
            round.phase = Phase::Reveal;
            Jobs::<T>::insert(job, record);
        }
        Rounds::<T>::insert(job, round);
        Self::deposit_event(Event::VerdictCommitted { job, round: number, verifier: who });
        Ok(())
    }

    pub(crate) fn do_reveal(
        job: JobId,
        who: T::AccountId,
        verdict: Verdict,
        evidence_hash: H256,
        salt: H256,
    ) -> DispatchResult {
        let mut record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
        let mut round = Rounds::<T>::get(job).ok_or(Error::<T>::NotInRevealPhase)?;
        ensure!(round.phase == Phase::Reveal, Error::<T>::NotInRevealPhase);
        let number = round.number;
        let vote =
            round.votes.iter_mut().find(|v| v.verifier == who).ok_or(Error::<T>::NotAVerifier)?;
        let commitment = vote.commitment.ok_or(Error::<T>::NotCommitted)?;
        ensure!(vote.verdict.is_none(), Error::<T>::AlreadyRevealed);
        ensure!(
            commitment == verdict_commitment(job, number, &who, verdict, evidence_hash, salt),
            Error::<T>::CommitmentMismatch
        );
        vote.verdict = Some(verdict);
        Self::deposit_event(Event::VerdictRevealed {
            job,
            round: number,
            verifier: who,
            verdict,
            evidence: evidence_hash,
        });
        let committed_all_revealed =
            round.votes.iter().all(|v| v.commitment.is_none() || v.verdict.is_some());
        if committed_all_revealed {
            Self::unschedule(job, record.timeout);
            settle::<T>(job, &mut record, round);
            Jobs::<T>::insert(job, record);
        } else {
            Rounds::<T>::insert(job, round);
        }
        Ok(())
    }
}

/// Slashes `TrainerSlash` of the trainer's collateral for job `id` for `reason`.
pub(crate) fn slash_trainer<T: Config>(id: JobId, trainer: &T::AccountId, reason: SlashReason) {
    T::Staking::slash_obligation(trainer, Obligation::Training(id), T::TrainerSlash::get(), reason);
}

/// Releases the collateral of every verifier of job `id` still waiting for a verdict (the current
/// round's and the pending votes of earlier rounds): the job ended without judging them.
pub(crate) fn release_verifiers<T: Config>(id: JobId) {
    if let Some(round) = Rounds::<T>::get(id) {
        for vote in round.votes.iter() {
            T::Staking::release(
                &vote.verifier,
                Obligation::Verification { job: id, round: round.number },
            );
        }
    }
    for (verifier, number, _) in PendingVotes::<T>::take(id) {
        T::Staking::release(&verifier, Obligation::Verification { job: id, round: number });
    }
}

/// Pays `amount` from the job's escrow to `to`; returns what was paid (nothing if the transfer
/// cannot happen, in which case the amount stays in escrow and is refunded at the end).
fn pay<T: Config>(job: &mut JobOf<T>, to: &T::AccountId, amount: BalanceOf<T>) -> BalanceOf<T> {
    let amount = amount.min(job.escrow);
    if amount.is_zero() {
        return amount;
    }
    match T::Currency::transfer_on_hold(
        &HoldReason::Escrow.into(),
        &job.owner,
        to,
        amount,
        Precision::Exact,
        Restriction::Free,
        Fortitude::Polite,
    ) {
        Ok(paid) => {
            job.escrow = job.escrow.saturating_sub(paid);
            paid
        }
        Err(_) => Zero::zero(),
    }
}

/// Pays a verifier its fee for a vote and releases its collateral.
fn pay_verifier<T: Config>(id: JobId, job: &mut JobOf<T>, verifier: &T::AccountId, round: u32) {
    T::Staking::release(verifier, Obligation::Verification { job: id, round });
    // Each possible vote of each possible round gets an equal share of the verification reserve.
    let reserve = T::VerificationShare::get().mul_floor(job.budget);
    let votes_possible = T::Verifiers::get().saturating_mul(T::MaxRounds::get()).max(1);
    let fee = reserve / BalanceOf::<T>::from(votes_possible);
    let paid = pay::<T>(job, verifier, fee);
    if !paid.is_zero() {
        Pallet::<T>::deposit_event(Event::VerifierPaid {
            job: id,
            verifier: verifier.clone(),
            amount: paid,
        });
    }
}

/// Judges the votes of earlier rounds against the final `outcome`: those on its side are paid their
/// fee, those against it are slashed from their collateral, and what is slashed goes to those proven
/// right (a minority proven right is made whole from the slashed majority).
fn judge_pending<T: Config>(id: JobId, job: &mut JobOf<T>, outcome: Verdict) {
    let pending = PendingVotes::<T>::take(id);
    let right: Vec<T::AccountId> =
        pending.iter().filter(|(_, _, v)| *v == outcome).map(|(who, _, _)| who.clone()).collect();
    for (verifier, number, verdict) in pending {
        if verdict == outcome {
            pay_verifier::<T>(id, job, &verifier, number);
        } else {
            T::Staking::slash_obligation_to(
                &verifier,
                Obligation::Verification { job: id, round: number },
                T::VerifierSlash::get(),
                SlashReason::LostVerificationVote,
                &right,
            );
        }
    }
}

/// Ends a round. Silent verifiers are slashed at once. A round that decides unanimously among those
/// who revealed, or the last round, settles the job; a decisive round with dissent, or an
/// indecisive one, is re-checked by a fresh round while rounds remain, its votes kept pending.
fn settle<T: Config>(id: JobId, job: &mut JobOf<T>, round: RoundOf<T>) {
    let JobState::Verifying { trainer, price, bundle } = job.state.clone() else { return };
    let count = |verdict| round.votes.iter().filter(|v| v.verdict == Some(verdict)).count() as u32;
    let (pass, fail) = (count(Verdict::Pass), count(Verdict::Fail));
    let revealed = pass + fail;
    let drawn = round.votes.len() as u32;
    let silent = drawn - revealed;
    // Decisive: more than half of the drawn verifiers revealed and one side has ≥ 2/3 of the votes.
    let outcome = if revealed * 2 > drawn && pass * 3 >= revealed * 2 {
        Some(Verdict::Pass)
    } else if revealed * 2 > drawn && fail * 3 >= revealed * 2 {
        Some(Verdict::Fail)
    } else {
        None
    };
    Pallet::<T>::deposit_event(Event::RoundSettled {
        job: id,
        round: round.number,
        pass,
        fail,
        silent,
        decisive: outcome.is_some(),
    });
    let obligation = Obligation::Verification { job: id, round: round.number };
    for vote in round.votes.iter().filter(|v| v.verdict.is_none()) {
        T::Staking::slash_obligation(
            &vote.verifier,
            obligation,
            T::VerifierSlash::get(),
            SlashReason::NoShow,
        );
    }
    let dissent = pass > 0 && fail > 0;
    let last = round.number + 1 >= T::MaxRounds::get();

    if outcome.is_none() || (dissent && !last) {
        // Nobody is judged on this round alone: keep its votes for the round that decides.
        PendingVotes::<T>::mutate(id, |pending| {
            for vote in round.votes.iter() {
                if let Some(verdict) = vote.verdict {
                    if pending.try_push((vote.verifier.clone(), round.number, verdict)).is_err() {
                        T::Staking::release(&vote.verifier, obligation);
                    }
                }
            }
        });
        if !last {
            if outcome.is_some() {
                Pallet::<T>::deposit_event(Event::RoundEscalated { job: id, round: round.number });
            }
            let now = frame_system::Pallet::<T>::block_number();
            Rounds::<T>::insert(id, new_round::<T>(round.number + 1, now));
            let next = now.saturating_add(One::one());
            Pallet::<T>::reschedule(id, job, next);
            return;
        }
        // The last round decided nothing: everyone who revealed did the work and is paid; nobody's
        // vote was confirmed or refuted.
        for (verifier, number, _) in PendingVotes::<T>::take(id) {
            pay_verifier::<T>(id, job, &verifier, number);
        }
        T::Staking::release(&trainer, Obligation::Training(id));
        Pallet::<T>::finish(id, job, Some(trainer), FailureReason::Inconclusive);
        return;
    }
    let Some(outcome) = outcome else { return };
    // This round decides. Earlier rounds' votes are judged by it; its own majority is paid, its own
    // minority (only possible in the last round) is released unjudged.
    judge_pending::<T>(id, job, outcome);
    for vote in round.votes.iter() {
        match vote.verdict {
            Some(v) if v == outcome => pay_verifier::<T>(id, job, &vote.verifier, round.number),
            Some(_) => {
                T::Staking::release(&vote.verifier, obligation);
            }
            None => {}
        }
    }
    match outcome {
        Verdict::Pass => {
            T::Staking::release(&trainer, Obligation::Training(id));
            let burnt = burn::<T>(job, T::PaymentBurn::get().mul_floor(price));
            let paid = pay::<T>(job, &trainer, price.saturating_sub(burnt));
            let credited = credit_cap::<T>(job.work_micro_ut);
            T::ComputePower::credit(&trainer, WorkKind::Training, credited);
            Pallet::<T>::refund(job);
            job.state = JobState::Completed { trainer: trainer.clone(), price: paid, bundle };
            Pallet::<T>::retire(id, job);
            Pallet::<T>::deposit_event(Event::JobCompleted {
                job: id,
                trainer,
                price: paid,
                burnt,
                work_micro_ut: credited,
            });
        }
        Verdict::Fail => {
            slash_trainer::<T>(id, &trainer, SlashReason::FailedProofOfTraining);
            Pallet::<T>::finish(id, job, Some(trainer), FailureReason::Rejected);
        }
    }
}

/// T credit a passed job earns: its work, at most `MaxCreditShare` of the network's ECP (or
/// `MinCreditCap` when that is larger), so no single job buys a large share of authorship.
pub fn credit_cap<T: Config>(work_micro_ut: u128) -> u128 {
    let cap = T::MaxCreditShare::get()
        .mul_floor(T::ComputePower::total_ecp())
        .max(T::MinCreditCap::get());
    work_micro_ut.min(cap)
}

/// Burns `amount` of the job's escrow; returns what was burnt.
fn burn<T: Config>(job: &mut JobOf<T>, amount: BalanceOf<T>) -> BalanceOf<T> {
    let amount = amount.min(job.escrow);
    if amount.is_zero() {
        return amount;
    }
    let burnt = T::Currency::burn_held(
        &HoldReason::Escrow.into(),
        &job.owner,
        amount,
        Precision::BestEffort,
        Fortitude::Force,
    )
    .unwrap_or_default();
    job.escrow = job.escrow.saturating_sub(burnt);
    burnt
}
