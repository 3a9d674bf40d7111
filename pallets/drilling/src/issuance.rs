//! Who drills what: the per-epoch synthetic issuance and the draw of a published (or re-issued)
//! task's executors, both from on-chain randomness.
//!
//! At an epoch boundary the eligible drillers (at most `MaxTrainers`) are ordered by capacity band
//! (powers of two of their declared capacity, highest first; a band of fewer than `MinBandSize`
//! drillers is merged with the next lower one) and stored once: the snapshot is fixed before the
//! randomness that orders it exists. Once randomness that began after the boundary is available
//! ([`FreshRandomness`]), each band is ordered by an exponential race of equal weights (a uniform
//! order in which each driller's place depends on its own key only), so nobody who learns the
//! randomness first can regroup the drillers by joining, leaving or changing capacity.
//! Each band is cut into groups of `SyntheticReplication` consecutive drillers (its last group takes
//! the remainder), so every eligible driller has exactly one task per epoch. A group's matrix chain
//! is as long as its slowest member's declared capacity computes in `CapacityUse` of the commit
//! window ([`Pallet::window_work`]): D per epoch follows declared capacity, and accounts sharing a
//! machine must compute one task each within the same window. Tasks are issued at most
//! `MaxIssuePerBlock` a block (and only while `MaxOpenTasks` leaves room), so an epoch of 1 000
//! trainers spreads over several blocks.
//!
//! Drawn tasks (published ones and re-issues) wait for randomness that began after they were issued
//! and take executors uniformly (the same race) among eligible drillers that declared their
//! capacity before that randomness began, whose declared capacity covers the task in `CapacityUse`
//! of the window, who are not busy with another drawn task, and whose free bond covers the
//! collateral.

use alloc::vec::Vec;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use ergon_drill::MatmulChain;
use ergon_protocol::draw::uniform_order;
use ergon_protocol::traits::BondInspect;
use ergon_protocol::traits::FreshRandomness;
use frame_support::pallet_prelude::*;
use frame_system::pallet_prelude::BlockNumberFor;
use scale_info::TypeInfo;
use sp_runtime::traits::Saturating;

use crate::{
    weights::WeightInfo, Config, CurrentEpoch, Drillers, Event, Issuance, IssuanceGroups,
    IssuanceQueue, Pallet, TaskId, TaskKind, TaskOf, TaskOrigin, LOG_TARGET,
};
use ergon_protocol::traits::MicroUt;

/// Progress of an epoch's synthetic issuance.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub struct IssuanceState<BlockNumber> {
    /// The epoch.
    pub epoch: u32,
    /// Block of the snapshot of the drillers: the order and the task seeds come from randomness
    /// that began after it.
    pub snapshot_at: BlockNumber,
    /// That randomness, once available (tasks are issued from then on).
    pub seed: Option<[u8; 32]>,
    /// Number of groups (tasks) of the epoch (the length of `IssuanceGroups`).
    pub groups: u32,
    /// Next group to issue.
    pub next: u32,
}

/// Number of groups `n` trainers make with replication `r`: `⌊n / r⌋`, or 1 when
/// `min ≤ n < r`, or 0 when fewer than `min` trainers.
pub fn group_count(n: u32, r: u32, min: u32) -> u32 {
    if n < min.max(2) {
        0
    } else {
        (n / r.max(1)).max(1)
    }
}

/// A driller that may be given a task: who, its declared capacity, until when it is busy with a
/// drawn task, and since when its declaration stands.
pub type Candidate<T> =
    (<T as frame_system::Config>::AccountId, MicroUt, BlockNumberFor<T>, BlockNumberFor<T>);

/// Every registered driller that is eligible (bonded at least `MinBond`), in storage order (the same
/// on every node).
pub fn candidates<T: Config>() -> Vec<Candidate<T>> {
    Drillers::<T>::iter()
        .filter(|(who, _)| T::Staking::is_eligible(who))
        .map(|(who, d)| (who, d.capacity, d.busy_until, d.since))
        .collect()
}

/// The capacity band of a declared capacity: its power of two.
pub fn band(capacity: MicroUt) -> u32 {
    128 - capacity.leading_zeros()
}

/// Where each group starts among drillers ordered by band, highest first (`capacities`): bands of
/// fewer than `min_band` drillers are merged downwards (the lowest one upwards), and each merged
/// band is cut into groups of `r` (its last group takes the remainder; see [`group_count`]).
pub fn group_starts(
    capacities: &[MicroUt],
    r: u32,
    min_replication: u32,
    min_band: u32,
) -> Vec<u32> {
    let n = capacities.len();
    // Bands as index ranges, each at least `min_band` long where possible.
    let mut bands: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for i in 1..=n {
        let boundary = i == n || band(capacities[i]) != band(capacities[i - 1]);
        if boundary && i - start >= min_band as usize {
            bands.push((start, i));
            start = i;
        }
    }
    if start < n {
        match bands.last_mut() {
            Some(last) => last.1 = n,
            None => bands.push((start, n)),
        }
    }
    let mut starts = Vec::new();
    for (from, to) in bands {
        let m = (to - from) as u32;
        for g in 0..group_count(m, r, min_replication) {
            starts.push(from as u32 + g * r);
        }
    }
    starts
}

/// The matrix chain of a synthetic task worth about `work` micro-ut: `dim`-sided products, as many
/// as fit (at least one, at most [`ergon_drill::MAX_LENGTH`]).
pub fn synthetic_chain(seed: [u8; 32], dim: u32, work: MicroUt) -> MatmulChain {
    // Counted in operations, so that the chain's difficulty (rounded down) never exceeds `work`.
    let per_product = MatmulChain { seed, dim, length: 1 }.ops().saturating_mul(1_000_000).max(1);
    let length = (work.saturating_mul(ergon_drill::OPS_PER_UT) / per_product)
        .clamp(1, ergon_drill::MAX_LENGTH as u128) as u32;
    MatmulChain { seed, dim, length }
}

/// Starts a drilling epoch at `now`: snapshots the eligible drillers, by capacity band, into the
/// issuance queue; they are ordered and issued once fresh randomness exists ([`issue_due`]).
/// Returns the weight used.
pub fn start_epoch<T: Config>(now: BlockNumberFor<T>) -> Weight {
    let drillers = Drillers::<T>::count();
    let epoch = CurrentEpoch::<T>::mutate(|e| {
        e.saturating_inc();
        *e
    });
    if Issuance::<T>::get().is_some() {
        log::warn!(
            target: LOG_TARGET,
            "epoch {epoch} starts at {now:?} before the last epoch's tasks were all issued"
        );
    }
    let mut trainers: Vec<(T::AccountId, MicroUt)> =
        candidates::<T>().into_iter().map(|(who, capacity, _, _)| (who, capacity)).collect();
    trainers.truncate(T::MaxTrainers::get() as usize);
    // The order within a band is set by the race once the randomness exists.
    trainers.sort_by_key(|(_, capacity)| core::cmp::Reverse(band(*capacity)));
    let n = trainers.len() as u32;
    let capacities: Vec<MicroUt> = trainers.iter().map(|(_, c)| *c).collect();
    let starts = group_starts(
        &capacities,
        T::SyntheticReplication::get(),
        T::MinReplication::get(),
        T::MinBandSize::get(),
    );
    let groups = starts.len() as u32;
    if groups == 0 {
        IssuanceQueue::<T>::kill();
        IssuanceGroups::<T>::kill();
        Issuance::<T>::kill();
    } else {
        IssuanceQueue::<T>::put(BoundedVec::<_, T::MaxTrainers>::truncate_from(trainers));
        IssuanceGroups::<T>::put(BoundedVec::<_, T::MaxTrainers>::truncate_from(starts));
        Issuance::<T>::put(IssuanceState { epoch, snapshot_at: now, seed: None, groups, next: 0 });
    }
    Pallet::<T>::deposit_event(Event::EpochStarted { epoch, trainers: n, tasks: groups });
    T::WeightInfo::start_epoch(drillers)
}

/// Issues up to `MaxIssuePerBlock` of the epoch's synthetic tasks. Returns the weight used.
pub fn issue_due<T: Config>(now: BlockNumberFor<T>) -> Weight {
    let Some(mut state) = Issuance::<T>::get() else {
        return Weight::zero();
    };
    let mut queue = IssuanceQueue::<T>::get();
    let mut weight = Weight::zero();
    let seed = match state.seed {
        Some(seed) => seed,
        None => match T::Randomness::fresh(state.snapshot_at) {
            Some((random, _)) => {
                let seed = ergon_protocol::hash::draw_seed(
                    &random,
                    &(b"ergon/drilling/epoch", state.epoch),
                );
                // Each band in the order of the race; bands keep their places, so the group
                // boundaries computed at the snapshot still hold.
                let mut ordered = Vec::with_capacity(queue.len());
                for chunk in queue.chunk_by(|a, b| band(a.1) == band(b.1)) {
                    ordered.extend(uniform_order(&seed, b"synthetic", chunk));
                }
                queue = BoundedVec::truncate_from(ordered);
                IssuanceQueue::<T>::put(&queue);
                // Ordering costs about what the snapshot did (one key per driller, one sort).
                weight = T::WeightInfo::start_epoch(queue.len() as u32);
                state.seed = Some(seed);
                seed
            }
            None => return T::DbWeight::get().reads(2),
        },
    };
    let starts = IssuanceGroups::<T>::get();
    let mut issued = 0u32;
    while issued < T::MaxIssuePerBlock::get() && state.next < state.groups {
        let g = state.next as usize;
        let from = starts.get(g).map_or(queue.len(), |s| *s as usize).min(queue.len());
        let to = starts.get(g + 1).map_or(queue.len(), |s| *s as usize).min(queue.len());
        let group = &queue[from..to];
        let slowest = group.iter().map(|(_, c)| *c).min().unwrap_or_default();
        let chain = synthetic_chain(
            ergon_protocol::seed::synthetic_task(&seed, state.next),
            T::SyntheticDim::get(),
            Pallet::<T>::window_work(slowest),
        );
        let created = Pallet::<T>::new_task(
            TaskKind::MatmulChain(chain),
            chain.difficulty_micro_ut(),
            TaskOrigin::Synthetic { epoch: state.epoch },
            group.len() as u32,
            0,
            Default::default(),
            Some(group.iter().map(|(who, _)| who.clone()).collect()),
            now,
        );
        if created.is_err() {
            // `MaxOpenTasks` reached: the rest waits for finished tasks to be removed.
            break;
        }
        state.next += 1;
        issued += 1;
    }
    if state.next >= state.groups {
        Issuance::<T>::kill();
        IssuanceQueue::<T>::kill();
        IssuanceGroups::<T>::kill();
    } else {
        Issuance::<T>::put(state);
    }
    weight.saturating_add(T::WeightInfo::issue_tasks(issued))
}

/// Draws a task's executors from `pool` (the eligible drillers) once randomness that began after
/// the task was issued exists: uniformly (the race) among those that declared before it began,
/// whose declared capacity covers the task, who are not busy with another drawn task and whose free
/// bond covers the collateral, leaving out the previous attempts' revealers when enough others
/// qualify. Too few abandons the task; so does no fresh randomness within
/// `EpochLength` blocks.
pub fn draw<T: Config>(
    id: TaskId,
    task: &mut TaskOf<T>,
    pool: &[Candidate<T>],
    now: BlockNumberFor<T>,
) {
    let Some((random, since)) = T::Randomness::fresh(task.opened_at) else {
        if now <= task.opened_at.saturating_add(T::EpochLength::get()) {
            let retry = now.saturating_add(T::Randomness::retry_in(task.opened_at));
            if Pallet::<T>::schedule(id, task, retry).is_err() {
                frame_support::defensive!("timeout queue full although MaxOpenTasks holds");
            }
        } else {
            Pallet::<T>::abandon(id, task, &[], now);
        }
        return;
    };
    let min = T::MinReplication::get() as usize;
    let able: Vec<T::AccountId> = pool
        .iter()
        .filter(|(_, capacity, busy_until, declared)| {
            *declared < since
                && *busy_until < now
                && Pallet::<T>::window_work(*capacity) >= task.difficulty
        })
        .map(|(who, _, _, _)| who.clone())
        .collect();
    let fresh: Vec<T::AccountId> =
        able.iter().filter(|who| !task.disputed.iter().any(|d| &d.who == *who)).cloned().collect();
    let chosen = if fresh.len() >= min { fresh } else { able };
    let seed = ergon_protocol::hash::draw_seed(&random, &(b"ergon/drilling/draw", id));
    let r = task.replication as usize;
    // The race's first `r` that take on the collateral.
    let order = uniform_order(&seed, b"executors", &chosen);
    let executors = Pallet::<T>::obligate_executors(id, task.difficulty, order.into_iter(), r);
    let commit_deadline = now.saturating_add(T::CommitWindow::get());
    if executors.len() >= min {
        for who in &executors {
            Drillers::<T>::mutate(who, |d| {
                if let Some(d) = d {
                    d.busy_until = commit_deadline;
                }
            });
        }
    }
    if Pallet::<T>::assign(id, task, executors, now).is_err() {
        frame_support::defensive!("timeout queue full although MaxOpenTasks holds");
    }
}
