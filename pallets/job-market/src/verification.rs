//! Assignment and verification: choosing the winning bid, drawing verifiers (opted in, by stake at
//! risk) and each one's own segments, the commit-reveal vote, disputes, and settlement from
//! obligation collateral.
//!
//! **Every segment is replayed by two verifiers, every verifier's segments are its own mix**
//! ([`ergon_protocol::segments::assign`]): a round of `Verifiers` covers `Verifiers ×
//! SegmentsPerRound / 2` distinct segments, each shared by one pair, so no verifier can vote from
//! a replay shared by the whole round, and every pass is cross-checked.
//!
//! **A pass carries evidence only a replay produces** ([`ergon_protocol::evidence`]): a sketch of
//! the weights at a probe step inside each of its segments, which the bundle does not hold. The
//! two sketches of a segment must agree; when they do not, one of the two passes did not replay
//! (or replayed wrongly) and the segment is disputed like a fail. The dispute's verifiers sketch
//! it too, and a pass whose sketch their 2/3 refute is slashed.
//!
//! **Disputes, not majorities.** Verifiers replaying different segments cannot outvote each other:
//! a pass on segment 3 says nothing about segment 17. So any fail opens a dispute on the segment it
//! names, re-checked by a larger draw that replays exactly that segment; the dispute's 2/3 decide,
//! and whoever it proves wrong — the trainer, a fail that does not hold up, a pass on a segment
//! that is bad — is slashed. A lone honest fail among lazy passes is upheld, not outvoted.
//!
//! **Draws nobody can predict or steer.** A round's draw waits for randomness made of VRF outputs of
//! blocks after the round opened ([`FreshRandomness`]: the runtime's accumulator of every block's
//! VRF output, read once enough outputs of later blocks are in it), so when the trainer commits its
//! root nobody — not even a trainer that authors blocks — knows which segments or verifiers will be
//! drawn. Its candidates are the pool entries that joined by the round's opening block, found by
//! weighted points on the pool's sum trees ([`crate::pool`], [`ergon_protocol::sortition`]: about
//! log2(n) reads a point), each weighted by its bond at joining and thinned to its bond now. The
//! trees change only at pool-epoch boundaries and a draw uses randomness newer than them, and only
//! reasons fixed before the randomness began take an entry out of a draw: whoever learns the
//! randomness first (the author of the last block in it) can neither add a candidate nor move one
//! by changing the pool around it; all it can do is withhold its block or take its own entries
//! out, which never draws more of them and moves no other seat.

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
use sp_runtime::{
    traits::{One, SaturatedConversion, Saturating, Zero},
    Perbill,
};

use crate::{
    types::BundleCommitment, weights::WeightInfo, Abstentions, BalanceOf, Bid, Config, Error,
    Event, Evidence, FailureReason, HoldReason, JobId, JobOf, JobState, Jobs, Pallet,
    PastVerifiers, PendingVote, PendingVotes, Phase, Round, RoundOf, Rounds, SegmentSketches,
    Verdict, VerifierPool, VerifierVote,
};

/// Bound of [`crate::PastVerifiers`] and [`crate::PendingVotes`]: every verifier of every round.
pub struct MaxPastVerifiers<T>(PhantomData<T>);

impl<T: Config> Get<u32> for MaxPastVerifiers<T> {
    fn get() -> u32 {
        crate::fees::votes_possible::<T>().min(u32::MAX as u128) as u32
    }
}

/// Bound of a round's votes: the larger of `Verifiers` and `DisputeVerifiers`.
pub struct MaxVerifiersPerRound<T>(PhantomData<T>);

impl<T: Config> Get<u32> for MaxVerifiersPerRound<T> {
    fn get() -> u32 {
        T::Verifiers::get().max(T::DisputeVerifiers::get())
    }
}

/// Bound of [`crate::TrainerEvidence`]: every segment of every round of a job.
pub struct MaxTrainerSketches<T>(PhantomData<T>);

impl<T: Config> Get<u32> for MaxTrainerSketches<T> {
    fn get() -> u32 {
        MaxVerifiersPerRound::<T>::get()
            .saturating_mul(T::SegmentsPerRound::get())
            .saturating_mul(T::MaxRounds::get())
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
    sketches: &[SegmentSketches],
    report: H256,
    salt: H256,
) -> H256 {
    H256(ergon_protocol::commitments::verdict(
        job, round, verifier, verdict, sketches, &report.0, &salt.0,
    ))
}

/// A new round opened at `opened_at`, waiting for its draw: a regular round when `disputed` is
/// empty, else a dispute re-checking those segments.
pub fn new_round<T: Config>(
    number: u32,
    opened_at: BlockNumberFor<T>,
    disputed: BoundedVec<u32, T::SegmentsPerRound>,
) -> RoundOf<T> {
    Round {
        number,
        phase: Phase::Drawing,
        opened_at,
        votes: Default::default(),
        disputed,
        trainer_evidence: false,
    }
}

/// Fewest verifiers a round is drawn with: one seat would decide it alone, and every segment must
/// be replayed by two (issue 34, item 2). A draw that cannot seat them waits for later randomness.
pub const MIN_SEATS: usize = 2;

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

/// Whether `bid` could be assigned now: its trainer is eligible and its free bond covers the price
/// as collateral.
pub fn assignable<T: Config>(bid: &Bid<T::AccountId, BalanceOf<T>>) -> bool {
    T::Staking::is_eligible(&bid.trainer) && T::Staking::free_collateral(&bid.trainer) >= bid.price
}

/// The market's order of bids, the better first: lower price, then higher ECP, then the lower
/// account (so every node agrees).
pub fn bid_order<T: Config>(
    a: &Bid<T::AccountId, BalanceOf<T>>,
    b: &Bid<T::AccountId, BalanceOf<T>>,
) -> core::cmp::Ordering {
    a.price
        .cmp(&b.price)
        .then_with(|| T::ComputePower::ecp(&b.trainer).cmp(&T::ComputePower::ecp(&a.trainer)))
        .then_with(|| a.trainer.cmp(&b.trainer))
}

/// The winning bid among `bids`: the first in [`bid_order`] among the [`assignable`] ones.
pub fn cheapest_bid<T: Config>(
    bids: Vec<Bid<T::AccountId, BalanceOf<T>>>,
) -> Option<Bid<T::AccountId, BalanceOf<T>>> {
    bids.into_iter().filter(assignable::<T>).min_by(bid_order::<T>)
}

/// The place `bid` takes on a full list: the index of the kept bid that would lose first — one that
/// cannot be assigned any more, else the last in [`bid_order`] if `bid` beats it; `None` if `bid`
/// beats none (issue 34: the first 64 bids used to hold the list, so sybil bids locked a cheaper
/// honest one out).
pub fn outbid<T: Config>(
    bids: &[Bid<T::AccountId, BalanceOf<T>>],
    bid: &Bid<T::AccountId, BalanceOf<T>>,
) -> Option<usize> {
    if let Some(stale) = bids.iter().position(|b| !assignable::<T>(b)) {
        return Some(stale);
    }
    (0..bids.len())
        .max_by(|i, j| bid_order::<T>(&bids[*i], &bids[*j]))
        .filter(|worst| bid_order::<T>(bid, &bids[*worst]).is_lt())
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
    let JobState::Verifying { trainer, price, .. } = &job.state else { return false };
    let (trainer, price) = (trainer.clone(), *price);
    // Randomness newer than the round and than the pool's trees (`pool`): nobody could move a
    // point, or a candidate, once it was known.
    let committed = round.opened_at.max(crate::PoolFixedAt::<T>::get());
    let fresh = T::Randomness::fresh(committed);
    let (seed, since) = match fresh {
        Some((random, since)) => {
            (ergon_protocol::hash::job_round_seed(&random, id, round.number), since)
        }
        // Not yet: ask again about when enough later blocks have added their VRF outputs. Every
        // block adds one, so this ends; the bound only keeps a broken source from holding the job
        // forever (the round then draws nobody and is settled as indecisive).
        None if now <= round.opened_at.saturating_add(T::CommitWindow::get()) => {
            let retry = T::Randomness::retry_in(committed);
            Pallet::<T>::reschedule(id, job, now.saturating_add(retry));
            return false;
        }
        None => ([0; 32], now),
    };
    let past = PastVerifiers::<T>::get(id);
    // What each seat replays and evaluates, on which hardware it may (issue 37): a dispute's seats
    // replay the disputed segments, a regular round's `SegmentsPerRound` each.
    let count =
        if round.is_dispute() { round.disputed.len() as u32 } else { T::SegmentsPerRound::get() };
    let work = crate::capacity::round_work::<T>(job, count);
    let bundle = Pallet::<T>::job_device(id);
    let across = job.spec.replays_across_devices();
    let collateral = crate::capacity::seat_collateral::<T>(job, price, count, bundle);
    // The trees of the job's kernels and of the tiers that verify its bundle at their price.
    let trees =
        crate::pool::DrawTrees::<T>::read(crate::pool::keys_for::<T>(job.kernels, bundle, across));
    // A pool the owner or the trainer could fill alone never draws (issue 34, item 6): the slots
    // that could serve the round (by declared capacity, counted by band), less the trainer's and
    // the owner's, with the verifiers of its earlier rounds, must number at least
    // `min_verifier_pool`, so that a regular round and its dispute take different accounts.
    let needed = Pallet::<T>::min_verifier_pool();
    let (servable, counted) = trees.servable(work);
    let insiders = [&trainer, &job.owner].into_iter().filter(|who| counted(who)).count() as u32;
    let outside_past = past.iter().filter(|who| !counted(who)).count() as u32;
    let pool = servable.saturating_sub(insiders).saturating_add(outside_past);
    if fresh.is_some() && pool < needed {
        Pallet::<T>::deposit_event(Event::PoolTooSmall {
            job: id,
            round: round.number,
            candidates: pool,
            needed,
        });
        return wait_or_settle_unstaffed::<T>(id, job, round, now, Zero::zero());
    }
    // Points on the trees, weighted by each slot's bond at joining (the stake it put at risk,
    // not ECP: ECP can be earned with sham jobs, stake cannot be had for free); an entry whose
    // bond is now lower is thinned to its bond now. Never seated: entries changed after the round
    // opened or since the randomness began, of other kernels, on a class that does not verify
    // the bundle, without the capacity to replay the round within `MaxReplayWindow` after their
    // queue (never drawn beyond their declared capacity), the trainer, the owner, earlier
    // rounds' verifiers, the ineligible, and those whose bond cannot put up the seat's
    // collateral.
    let wanted = if round.is_dispute() { T::DisputeVerifiers::get() } else { T::Verifiers::get() };
    let mut forest = trees.forest();
    let entries = core::cell::RefCell::new(alloc::collections::BTreeMap::new());
    let mut busy = false;
    let seats = if fresh.is_some() {
        ergon_protocol::sortition::draw(
            &seed,
            &mut forest,
            wanted as usize,
            crate::pool::DRAW_POINTS,
            |slot| {
                use ergon_protocol::sortition::Look;
                // Excluded (out of the trees for this draw): reasons fixed before the randomness
                // began. Refused (left in): what a holder may change once it knows the seed —
                // leaving, re-declaring, its bond — so that such a choice moves no other point.
                let Some(who) = trees.holder(slot) else { return Look::Refuse };
                if who == trainer || who == job.owner || past.contains(&who) {
                    return Look::Exclude;
                }
                let Some(entry) = VerifierPool::<T>::get(&who) else { return Look::Refuse };
                if entry.since >= since {
                    return Look::Refuse;
                }
                // Joined or re-declared after the round opened, another revision, a class that
                // does not verify the bundle at its price, a capacity that never replays the
                // round in time.
                if entry.since > round.opened_at
                    || entry.kernels != job.kernels
                    || !crate::capacity::could_serve::<T>(&entry, bundle, across, work)
                {
                    return Look::Exclude;
                }
                if !T::Staking::is_eligible(&who) {
                    return Look::Refuse;
                }
                if !crate::capacity::can_serve::<T>(&entry, bundle, across, work, now) {
                    busy = true;
                    return Look::Refuse;
                }
                // The slot's weight is the bond at the last sync (an entry re-declared since,
                // with another bond, keeps its old slot until the boundary): never more than that,
                // nor than the bond now.
                let of = crate::PoolSlots::<T>::get(&who).map(|s| s.weight).unwrap_or_default();
                let keep = of.min(stake_weight::<T>(&who));
                entries.borrow_mut().insert(slot, (who, entry));
                Look::Keep { keep: keep as u128, of: of as u128 }
            },
            |slot| {
                entries.borrow().get(&slot).is_some_and(|(who, _)| {
                    T::Staking::obligate(
                        who,
                        Obligation::Verification { job: id, round: round.number },
                        collateral,
                    )
                    .is_ok()
                })
            },
        )
    } else {
        Vec::new()
    };
    let mut seated: Vec<(T::AccountId, crate::VerifierEntry<BlockNumberFor<T>>)> =
        seats.iter().filter_map(|slot| entries.borrow_mut().remove(slot)).collect();
    let verifiers: Vec<T::AccountId> = seated.iter().map(|(who, _)| who.clone()).collect();
    if fresh.is_some() && verifiers.len() < MIN_SEATS {
        // One seat would decide the round alone (issue 34, item 2): nobody checks its sketches.
        // Give the seats back and draw again from later randomness while the window lasts (other
        // duties' collateral comes free); after it, the round is as unstaffed as one nobody could
        // take.
        for v in &verifiers {
            T::Staking::release(v, Obligation::Verification { job: id, round: round.number });
        }
        Pallet::<T>::deposit_event(Event::DrawPostponed {
            job: id,
            round: round.number,
            seated: verifiers.len() as u32,
        });
        // Candidates busy with other rounds are free within `MaxReplayWindow` (no seat is given
        // more): the round waits for them that long rather than end unverified.
        let extra = if busy { T::MaxReplayWindow::get() } else { Zero::zero() };
        return wait_or_settle_unstaffed::<T>(id, job, round, now, extra);
    }
    // A dispute's verifiers all replay the disputed segments; a regular round's each get their own.
    let segments: Vec<Vec<u32>> = if round.is_dispute() {
        verifiers.iter().map(|_| round.disputed.to_vec()).collect()
    } else {
        ergon_protocol::segments::assign(
            &seed,
            u32::try_from(job.drawable_segments()).unwrap_or(u32::MAX),
            verifiers.len() as u32,
            T::SegmentsPerRound::get(),
        )
    };
    round.votes = BoundedVec::truncate_from(
        verifiers
            .iter()
            .zip(&segments)
            .map(|(v, own)| VerifierVote {
                verifier: v.clone(),
                segments: BoundedVec::truncate_from(own.clone()),
                commitment: None,
                verdict: None,
                evidence: Default::default(),
            })
            .collect(),
    );
    round.phase = Phase::Commit;
    // Each seat's replay queues behind its earlier rounds; the round waits for the slowest.
    let mut last_ready = now;
    for (v, entry) in seated.iter_mut() {
        entry.busy_until = crate::capacity::ready_at::<T>(entry, work, now);
        last_ready = last_ready.max(entry.busy_until);
        VerifierPool::<T>::insert(&*v, entry.clone());
    }
    PastVerifiers::<T>::mutate(id, |past| {
        for v in &verifiers {
            let _ = past.try_push(v.clone());
        }
    });
    Pallet::<T>::deposit_event(Event::VerifiersDrawn {
        job: id,
        round: round.number,
        assignments: verifiers.iter().cloned().zip(segments).collect(),
    });
    if verifiers.is_empty() {
        // No one can verify this round: it is settled as indecisive right away.
        settle::<T>(id, job, round.clone());
        return true;
    }
    Pallet::<T>::reschedule(id, job, last_ready.saturating_add(T::CommitWindow::get()));
    false
}

/// A draw that could not seat its round: tries again from later randomness while the round's commit
/// window (and `extra` blocks) lasts (other duties' collateral comes free, busy verifiers finish,
/// the pool grows); after it, settles the round as unstaffed. Returns whether the round was
/// settled (`round` is then stale).
fn wait_or_settle_unstaffed<T: Config>(
    id: JobId,
    job: &mut JobOf<T>,
    round: &RoundOf<T>,
    now: BlockNumberFor<T>,
    extra: BlockNumberFor<T>,
) -> bool {
    if now <= round.opened_at.saturating_add(T::CommitWindow::get()).saturating_add(extra) {
        let retry = T::Randomness::retry_in(now).max(One::one());
        Pallet::<T>::reschedule(id, job, now.saturating_add(retry));
        return false;
    }
    settle::<T>(id, job, round.clone());
    true
}

impl<T: Config> Pallet<T> {
    /// How many distinct accounts must be able to serve a job before a round of it is drawn:
    /// [`crate::MinVerifierPool`] if set, else a regular round's seats and a dispute's; never
    /// fewer than [`MIN_SEATS`].
    pub fn min_verifier_pool() -> u32 {
        crate::MinVerifierPool::<T>::get()
            .unwrap_or_else(|| T::Verifiers::get().saturating_add(T::DisputeVerifiers::get()))
            .max(MIN_SEATS as u32)
    }

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
        evidence: Evidence<T>,
        report: H256,
        salt: H256,
    ) -> DispatchResult {
        let record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
        let mut round = Rounds::<T>::get(job).ok_or(Error::<T>::NotInRevealPhase)?;
        ensure!(round.phase == Phase::Reveal, Error::<T>::NotInRevealPhase);
        let number = round.number;
        let vote =
            round.votes.iter_mut().find(|v| v.verifier == who).ok_or(Error::<T>::NotAVerifier)?;
        let commitment = vote.commitment.ok_or(Error::<T>::NotCommitted)?;
        ensure!(vote.verdict.is_none(), Error::<T>::AlreadyRevealed);
        ensure!(
            commitment == verdict_commitment(job, number, &who, verdict, &evidence, report, salt),
            Error::<T>::CommitmentMismatch
        );
        match verdict.failed_segment() {
            // A fail's evidence is a segment the verifier replayed: a dispute re-checks it.
            Some(segment) => ensure!(vote.segments.contains(&segment), Error::<T>::NotYourSegment),
            // A pass shows its replay: a sketch of every segment it was given.
            None => ensure!(evidence.len() == vote.segments.len(), Error::<T>::MissingEvidence),
        }
        vote.verdict = Some(verdict);
        vote.evidence = evidence;
        Self::deposit_event(Event::VerdictRevealed {
            job,
            round: number,
            verifier: who,
            verdict,
            evidence: report,
        });
        Self::settle_if_all_in(job, record, round);
        Ok(())
    }

    /// Settles a round in its reveal phase at once when it has everything it waits for (every
    /// committed verifier revealed, and the trainer's evidence is in); else stores it.
    fn settle_if_all_in(job: JobId, mut record: JobOf<T>, round: RoundOf<T>) {
        let all_in = round.trainer_evidence
            && round.votes.iter().all(|v| v.commitment.is_none() || v.verdict.is_some());
        if all_in {
            Self::unschedule(job, record.timeout);
            settle::<T>(job, &mut record, round);
            Jobs::<T>::insert(job, record);
        } else {
            Rounds::<T>::insert(job, round);
        }
    }

    pub(crate) fn do_trainer_evidence(
        job: JobId,
        who: T::AccountId,
        evidence: crate::TrainerSketches<T>,
    ) -> DispatchResult {
        let record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
        let JobState::Verifying { trainer, .. } = &record.state else {
            return Err(Error::<T>::NotAssignedTrainer.into());
        };
        ensure!(*trainer == who, Error::<T>::NotAssignedTrainer);
        let mut round = Rounds::<T>::get(job).ok_or(Error::<T>::NotInRevealPhase)?;
        ensure!(round.phase == Phase::Reveal, Error::<T>::NotInRevealPhase);
        ensure!(!round.trainer_evidence, Error::<T>::AlreadyRevealed);
        let segments = round.segments();
        let mut given: Vec<u32> = evidence.iter().map(|(s, _)| *s).collect();
        ensure!(given.iter().all(|s| segments.contains(s)), Error::<T>::NotYourSegment);
        given.sort_unstable();
        given.dedup();
        ensure!(given.len() == evidence.len(), Error::<T>::NotYourSegment);
        // A segment's sketch is given once: later rounds keep the first.
        crate::TrainerEvidence::<T>::try_mutate(job, |kept| -> DispatchResult {
            for (segment, sketch) in evidence.iter() {
                if !kept.iter().any(|(s, _)| s == segment) {
                    kept.try_push((*segment, sketch.clone()))
                        .map_err(|_| Error::<T>::MissingEvidence)?;
                }
            }
            Ok(())
        })?;
        round.trainer_evidence = true;
        let number = round.number;
        Self::deposit_event(Event::TrainerEvidenceSubmitted {
            job,
            round: number,
            segments: given,
        });
        Self::settle_if_all_in(job, record, round);
        Ok(())
    }
}

/// Slashes `TrainerSlash` of the trainer's collateral for job `id` for `reason`: out of it the owner
/// first gets back what catching the bundle cost its escrow (the verifier fees paid so far), the
/// rest goes where every slash goes. A forger pays for its own verification; an owner whose trainer
/// cheated is refunded in full (up to the collateral).
pub(crate) fn slash_trainer<T: Config>(
    id: JobId,
    job: &JobOf<T>,
    trainer: &T::AccountId,
    reason: SlashReason,
) {
    let spent = job.budget.saturating_sub(job.escrow);
    T::Staking::slash_obligation_compensating(
        trainer,
        Obligation::Training(id),
        T::TrainerSlash::get(),
        reason,
        &job.owner,
        spent,
    );
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
    for vote in PendingVotes::<T>::take(id) {
        T::Staking::release(
            &vote.verifier,
            Obligation::Verification { job: id, round: vote.round },
        );
    }
    for (verifier, round) in Abstentions::<T>::take(id) {
        T::Staking::release(&verifier, Obligation::Verification { job: id, round });
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

/// Pays every verifier of job `id` who revealed a vote (earlier rounds' pending votes and the
/// current round's) its fee and releases its collateral: the job ends for a reason none of them
/// could judge (its data went missing), and each did its replay.
pub(crate) fn pay_revealed<T: Config>(id: JobId, job: &mut JobOf<T>) {
    for vote in PendingVotes::<T>::take(id) {
        pay_verifier::<T>(id, job, &vote.verifier, vote.round, vote.segments.len());
    }
    if let Some(round) = Rounds::<T>::get(id) {
        for vote in round.votes.iter().filter(|v| v.verdict.is_some()) {
            pay_verifier::<T>(id, job, &vote.verifier, round.number, vote.segments.len());
        }
    }
}

/// Pays a verifier its fee for a vote of round `round` that replayed `replayed` segments, at the
/// job's price ([`crate::fees::vote_fee`]), and releases its collateral.
fn pay_verifier<T: Config>(
    id: JobId,
    job: &mut JobOf<T>,
    verifier: &T::AccountId,
    round: u32,
    replayed: usize,
) {
    T::Staking::release(verifier, Obligation::Verification { job: id, round });
    let JobState::Verifying { price, .. } = &job.state else { return };
    let replayed = replayed.min(u32::MAX as usize) as u32;
    let fee = crate::fees::vote_fee::<T>(
        *price,
        job.work_micro_ut,
        job.segments(),
        replayed,
        job.overhead_ppb(),
        Pallet::<T>::job_device(id),
    );
    let paid = pay::<T>(job, verifier, fee);
    if !paid.is_zero() {
        Pallet::<T>::deposit_event(Event::VerifierPaid {
            job: id,
            verifier: verifier.clone(),
            amount: paid,
        });
    }
}

/// What the round that decides a job found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Decision {
    /// The bundle holds up.
    Pass,
    /// A fail was upheld.
    Fail,
}

impl Decision {
    fn agrees(self, verdict: &Verdict) -> bool {
        verdict.is_pass() == (self == Decision::Pass)
    }
}

/// What a deciding dispute found: its decision, the disputed segments, and for each disputed
/// segment the sketch 2/3 of its revealed votes agree on, if any.
struct Finding<'a> {
    decision: Decision,
    disputed: &'a [u32],
    confirmed: Vec<(u32, SegmentSketches)>,
}

impl Finding<'_> {
    /// Whether a vote (on `segments`, with `evidence` aligned to them) is proven wrong: a pass on a
    /// disputed segment when the fail is upheld, a fail on a disputed segment when it is not, or a
    /// pass whose sketch of a disputed segment the confirmed sketch refutes. A vote on other
    /// segments is not refuted by a dispute about these.
    fn refutes(&self, verdict: &Verdict, segments: &[u32], evidence: &[SegmentSketches]) -> bool {
        match (verdict, self.decision) {
            (Verdict::Pass, Decision::Fail) => segments.iter().any(|s| self.disputed.contains(s)),
            (Verdict::Fail { segment }, Decision::Pass) => self.disputed.contains(segment),
            (Verdict::Pass, Decision::Pass) => self.confirmed.iter().any(|(segment, truth)| {
                segments.iter().zip(evidence).any(|(s, sketch)| {
                    s == segment && !ergon_protocol::evidence::agree_all(sketch, truth)
                })
            }),
            (Verdict::Fail { .. }, Decision::Fail) => false,
        }
    }

    /// The trainer's own sketches against the confirmed ones: (some agree, some disagree).
    fn judge_trainer(&self, sketches: &[(u32, SegmentSketches)]) -> (bool, bool) {
        let verdicts: Vec<bool> = self
            .confirmed
            .iter()
            .filter_map(|(segment, truth)| {
                let (_, sketch) = sketches.iter().find(|(s, _)| s == segment)?;
                Some(ergon_protocol::evidence::agree_all(sketch, truth))
            })
            .collect();
        (verdicts.contains(&true), verdicts.contains(&false))
    }

    /// Whether a vote the finding does not refute touched a disputed segment: it is proven right.
    fn touches(&self, segments: &[u32]) -> bool {
        segments.iter().any(|s| self.disputed.contains(s))
    }
}

/// For each of a dispute's `disputed` segments, a sketch that agrees with 2/3 of the `revealed`
/// votes' sketches of it (a dispute's votes each carry the sketches of every disputed segment, in
/// order).
fn confirmed_sketches<'a>(
    disputed: &[u32],
    votes: impl Iterator<Item = &'a [SegmentSketches]> + Clone,
    revealed: u32,
) -> Vec<(u32, SegmentSketches)> {
    disputed
        .iter()
        .enumerate()
        .filter_map(|(i, segment)| {
            let sketches = votes.clone().filter_map(|e| e.get(i));
            sketches.clone().find_map(|candidate| {
                let agreeing = sketches
                    .clone()
                    .filter(|s| ergon_protocol::evidence::agree_all(candidate, s))
                    .count() as u32;
                (agreeing * 3 >= revealed * 2 && agreeing > 0)
                    .then(|| (*segment, candidate.clone()))
            })
        })
        .collect()
}

/// The trainer's sketches of a dispute's disputed segments, if they are backed: a strict majority
/// of the `revealed` votes (and at least [`MIN_SEATS`]) are passes whose sketches of every disputed
/// segment agree with the trainer's. Replaying is the only way to produce them (a pass cannot
/// copy them: the trainer gives its sketches after every vote is committed).
fn trainer_backing<T: Config>(
    round: &RoundOf<T>,
    trainer: &[(u32, SegmentSketches)],
    revealed: u32,
) -> Option<Vec<(u32, SegmentSketches)>> {
    let truth: Vec<(u32, SegmentSketches)> = round
        .disputed
        .iter()
        .map(|segment| trainer.iter().find(|(s, _)| s == segment).cloned())
        .collect::<Option<_>>()?;
    let backers = round
        .votes
        .iter()
        .filter(|v| v.verdict.is_some_and(|d| d.is_pass()) && v.evidence.len() == truth.len())
        .filter(|v| {
            truth
                .iter()
                .zip(v.evidence.iter())
                .all(|((_, t), e)| ergon_protocol::evidence::agree_all(e, t))
        })
        .count() as u32;
    (!truth.is_empty() && backers >= MIN_SEATS as u32 && backers * 2 > revealed).then_some(truth)
}

/// The segments of a regular round whose two passes' sketches disagree, or where a pass's sketch
/// disagrees with the trainer's own (`trainer`): one of them did not replay (or replayed wrongly),
/// so the segment is disputed like a fail.
fn contested<T: Config>(round: &RoundOf<T>, trainer: &[(u32, SegmentSketches)]) -> Vec<u32> {
    let passes: Vec<&VerifierVote<T>> =
        round.votes.iter().filter(|v| v.verdict.is_some_and(|d| d.is_pass())).collect();
    let mut out = Vec::new();
    for pass in &passes {
        for (segment, sketch) in pass.segments.iter().zip(pass.evidence.iter()) {
            let refuted = trainer.iter().any(|(s, truth)| {
                s == segment && !ergon_protocol::evidence::agree_all(sketch, truth)
            });
            if refuted && !out.contains(segment) {
                out.push(*segment);
            }
        }
    }
    for (i, a) in passes.iter().enumerate() {
        for b in &passes[i + 1..] {
            for (sa, ea) in a.segments.iter().zip(a.evidence.iter()) {
                let Some(eb) =
                    b.segments.iter().position(|s| s == sa).and_then(|j| b.evidence.get(j))
                else {
                    continue;
                };
                if !ergon_protocol::evidence::agree_all(ea, eb) && !out.contains(sa) {
                    out.push(*sa);
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// Judges the votes of earlier rounds by the deciding round's `finding` on the disputed segments:
/// those it proves wrong are slashed `VerifierSlash` of their collateral, shared among `right` and
/// the earlier voters it proves right; everyone else is paid its fee.
fn judge_pending<T: Config>(
    id: JobId,
    job: &mut JobOf<T>,
    finding: &Finding,
    mut right: Vec<T::AccountId>,
) {
    let pending = PendingVotes::<T>::take(id);
    right.extend(
        pending
            .iter()
            .filter(|v| finding.decision.agrees(&v.verdict) && finding.touches(&v.segments))
            .filter(|v| !finding.refutes(&v.verdict, &v.segments, &v.evidence))
            .map(|v| v.verifier.clone()),
    );
    for vote in pending {
        if finding.refutes(&vote.verdict, &vote.segments, &vote.evidence) {
            T::Staking::slash_obligation_to(
                &vote.verifier,
                Obligation::Verification { job: id, round: vote.round },
                T::VerifierSlash::get(),
                SlashReason::LostVerificationVote,
                &right,
            );
        } else {
            pay_verifier::<T>(id, job, &vote.verifier, vote.round, vote.segments.len());
        }
    }
}

/// Ends a round. Silent verifiers are slashed at once. A regular round whose revealed votes all pass
/// (from more than half of its verifiers) and whose paired sketches all agree passes the bundle;
/// any fail opens a dispute on the segments the fails name, and any disagreeing pair of sketches on
/// that segment (fails first, at most `SegmentsPerRound`). A dispute decides by 2/3 of its revealed
/// votes (from more than half of it), and a split or short one escalates to another dispute while
/// rounds remain. Votes of a round that does not decide are kept pending for the one that does.
pub(crate) fn settle<T: Config>(id: JobId, job: &mut JobOf<T>, round: RoundOf<T>) {
    let JobState::Verifying { trainer, price, bundle } = job.state.clone() else { return };
    let revealed_votes = || round.votes.iter().filter_map(|v| v.verdict.map(|d| (v, d)));
    let pass = revealed_votes().filter(|(_, d)| d.is_pass()).count() as u32;
    let revealed = revealed_votes().count() as u32;
    let fail = revealed - pass;
    let seated = round.votes.len() as u32;
    let silent = seated - revealed;
    // A seat emptied by an abstention still counts among the drawn: abstentions decide nothing.
    let abstained =
        Abstentions::<T>::get(id).iter().filter(|(_, r)| *r == round.number).count() as u32;
    let drawn = seated + abstained;
    let quorum = revealed * 2 > drawn;
    let trainer_sketches = crate::TrainerEvidence::<T>::get(id);
    let contested =
        if round.is_dispute() { Vec::new() } else { contested::<T>(&round, &trainer_sketches) };
    if !contested.is_empty() {
        Pallet::<T>::deposit_event(Event::EvidenceContested {
            job: id,
            round: round.number,
            segments: contested.clone(),
        });
    }
    let decision = if round.is_dispute() {
        if quorum && pass * 3 >= revealed * 2 {
            Some(Decision::Pass)
        } else if quorum && fail * 3 >= revealed * 2 {
            Some(Decision::Fail)
        } else {
            None
        }
    } else if quorum && fail == 0 && contested.is_empty() {
        Some(Decision::Pass)
    } else {
        None
    };
    let last = round.number + 1 >= T::MaxRounds::get();
    // A dispute that splits is re-checked while rounds remain: its minority is judged by the next.
    let decision = decision.filter(|_| !(round.is_dispute() && pass > 0 && fail > 0 && !last));
    // The last dispute, short of 2/3: the trainer's own sketches decide for it when a strict
    // majority of the revealed votes replayed exactly them (issue 34, item 6: two of an owner's
    // seats failing an honest bundle used to end it with a refund and the model served).
    let backing = match decision {
        None if last && round.is_dispute() => {
            trainer_backing::<T>(&round, &trainer_sketches, revealed)
        }
        _ => None,
    };
    let decision = decision.or(backing.as_ref().map(|_| Decision::Pass));
    Pallet::<T>::deposit_event(Event::RoundSettled {
        job: id,
        round: round.number,
        pass,
        fail,
        silent,
        decisive: decision.is_some(),
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

    let Some(decision) = decision else {
        // Nobody is judged on this round alone: keep its votes for the round that decides.
        PendingVotes::<T>::mutate(id, |pending| {
            for (vote, verdict) in revealed_votes() {
                let kept = PendingVote {
                    verifier: vote.verifier.clone(),
                    round: round.number,
                    segments: vote.segments.clone(),
                    verdict,
                    evidence: vote.evidence.clone(),
                };
                if pending.try_push(kept).is_err() {
                    T::Staking::release(&vote.verifier, obligation);
                }
            }
        });
        if !last {
            // Fails and contested sketches on the table (this round's, or a split dispute's) are
            // disputed; otherwise the bundle is drawn for afresh.
            let disputed = if round.is_dispute() {
                round.disputed.clone()
            } else {
                let mut named: Vec<u32> =
                    revealed_votes().filter_map(|(_, d)| d.failed_segment()).collect();
                named.sort_unstable();
                named.dedup();
                named.extend(contested.iter().filter(|s| !named.contains(s)).collect::<Vec<_>>());
                BoundedVec::truncate_from(named)
            };
            if !disputed.is_empty() {
                Pallet::<T>::deposit_event(Event::DisputeOpened {
                    job: id,
                    round: round.number,
                    segments: disputed.to_vec(),
                });
            }
            let now = frame_system::Pallet::<T>::block_number();
            Rounds::<T>::insert(id, new_round::<T>(round.number + 1, now, disputed));
            Pallet::<T>::reschedule(id, job, now.saturating_add(One::one()));
            return;
        }
        // The last round decided nothing: everyone who revealed did the work and is paid; nobody's
        // vote was confirmed or refuted.
        for vote in PendingVotes::<T>::take(id) {
            pay_verifier::<T>(id, job, &vote.verifier, vote.round, vote.segments.len());
        }
        T::Staking::release(&trainer, Obligation::Training(id));
        // The bundle is committed and served (its model is public), and nobody proved it right
        // or wrong. Neither side is made whole (issue 34, item 6): the trainer is not paid and
        // the owner not refunded the price, so an undecided end gains nobody anything — not the
        // owner's seats splitting the last dispute or filling the pool (a refund with the
        // model), not a forger's (its collateral back), not a forger hoping for a thin pool.
        let burnt = burn::<T>(job, price);
        Pallet::<T>::deposit_event(Event::UndecidedPriceBurnt { job: id, burnt });
        Pallet::<T>::finish(id, job, Some(trainer), FailureReason::Inconclusive);
        return;
    };
    // This round decides. Earlier rounds' votes are judged by it on the disputed segments (their
    // verdicts, and their sketches against the one 2/3 of this round confirm); its own majority is
    // paid, its own minority (only possible in the last round) is released unjudged, and so is a
    // vote of its majority whose sketch the others refute (it may be a replay on other hardware).
    let confirmed = backing.unwrap_or_else(|| {
        confirmed_sketches(
            &round.disputed,
            revealed_votes().filter(|(_, d)| d.is_pass()).map(|(v, _)| &v.evidence[..]),
            revealed,
        )
    });
    let finding = Finding { decision, disputed: &round.disputed, confirmed };
    let upheld = |vote: &VerifierVote<T>, verdict: &Verdict| {
        decision.agrees(verdict) && !finding.refutes(verdict, &vote.segments, &vote.evidence)
    };
    let mut majority: Vec<T::AccountId> =
        revealed_votes().filter(|(v, d)| upheld(v, d)).map(|(v, _)| v.verifier.clone()).collect();
    // The trainer's own sketches are judged like a pass's: backed by the dispute, it shares the
    // slashes of those it proved wrong; refuted (on a bundle that holds up), it pays for the
    // dispute it forced.
    let (trainer_backed, trainer_refuted) = finding.judge_trainer(&trainer_sketches);
    if trainer_backed && !trainer_refuted {
        majority.push(trainer.clone());
    }
    judge_pending::<T>(id, job, &finding, majority.clone());
    if trainer_refuted && decision == Decision::Pass {
        let right: Vec<T::AccountId> = majority.into_iter().filter(|a| *a != trainer).collect();
        T::Staking::slash_obligation_to(
            &trainer,
            Obligation::Training(id),
            T::VerifierSlash::get(),
            SlashReason::LostVerificationVote,
            &right,
        );
    }
    for (vote, verdict) in revealed_votes() {
        if upheld(vote, &verdict) {
            pay_verifier::<T>(id, job, &vote.verifier, round.number, vote.segments.len());
        } else {
            T::Staking::release(&vote.verifier, obligation);
        }
    }
    match decision {
        Decision::Pass if job.diverged_at().is_some() => {
            settle_divergence::<T>(id, job, trainer, price, bundle);
        }
        Decision::Pass => {
            T::Staking::release(&trainer, Obligation::Training(id));
            // Still held if no quorum of validators attested the bundle either way.
            Pallet::<T>::release_deposit(&trainer, &mut job.trainer_deposit);
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
        Decision::Fail => {
            slash_trainer::<T>(id, job, &trainer, SlashReason::FailedProofOfTraining);
            Pallet::<T>::finish(id, job, Some(trainer), FailureReason::Rejected);
        }
    }
}

/// A confirmed divergence at step `s` of `n`: the trainer trained `s` steps of the owner's spec
/// and is paid and credited for them (`price × s / n`, burn included), its collateral released; the
/// rest of the escrow goes back to the owner. Nobody is slashed: the spec diverged, not the trainer.
fn settle_divergence<T: Config>(
    id: JobId,
    job: &mut JobOf<T>,
    trainer: T::AccountId,
    price: BalanceOf<T>,
    bundle: BundleCommitment<BlockNumberFor<T>>,
) {
    let (step, steps) = (job.diverged_at().unwrap_or_default(), job.total_steps().max(1));
    let trained = Perbill::from_rational(step.min(steps), steps);
    T::Staking::release(&trainer, Obligation::Training(id));
    Pallet::<T>::release_deposit(&trainer, &mut job.trainer_deposit);
    let earned = trained.mul_floor(price);
    let burnt = burn::<T>(job, T::PaymentBurn::get().mul_floor(earned));
    let paid = pay::<T>(job, &trainer, earned.saturating_sub(burnt));
    let credited = credit_cap::<T>(trained.mul_floor(job.work_micro_ut));
    T::ComputePower::credit(&trainer, WorkKind::Training, credited);
    Pallet::<T>::refund(job);
    job.state = JobState::Completed { trainer: trainer.clone(), price: paid, bundle };
    Pallet::<T>::retire(id, job);
    Pallet::<T>::deposit_event(Event::TrainingDiverged {
        job: id,
        trainer,
        step,
        steps,
        price: paid,
        burnt,
        work_micro_ut: credited,
    });
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
