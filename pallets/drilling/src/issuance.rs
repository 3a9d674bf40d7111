//! Who drills what: the per-epoch synthetic issuance and the draw of a published (or re-issued)
//! task's executors, both from on-chain randomness.
//!
//! At an epoch boundary the eligible drillers (at most `MaxTrainers`) are shuffled with the block's
//! randomness, ordered by capacity band (powers of two of their declared capacity, highest first;
//! a band of fewer than `MinBandSize` drillers is merged with the next lower one) and stored once.
//! Each band is cut into groups of `SyntheticReplication` consecutive drillers (its last group takes
//! the remainder), so every eligible driller has exactly one task per epoch. A group's matrix chain
//! is as long as its slowest member's declared capacity computes in `CapacityUse` of the commit
//! window ([`Pallet::window_work`]): D per epoch follows declared capacity, and accounts sharing a
//! machine must compute one task each within the same window. Tasks are issued at most
//! `MaxIssuePerBlock` a block (and only while `MaxOpenTasks` leaves room), so an epoch of 1 000
//! trainers spreads over several blocks.
//!
//! Drawn tasks (published ones and re-issues) take executors uniformly among eligible drillers
//! whose declared capacity covers the task in `CapacityUse` of the window, who are not busy with
//! another drawn task, and whose free bond covers the collateral.

use alloc::vec::Vec;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use ergon_drill::MatmulChain;
use frame_support::{pallet_prelude::*, traits::Randomness};
use frame_system::pallet_prelude::BlockNumberFor;
use pallet_trainer_staking::BondInspect;
use scale_info::TypeInfo;
use sp_runtime::traits::Saturating;

use crate::{
    weights::WeightInfo, Config, CurrentEpoch, Drillers, Event, Issuance, IssuanceGroups,
    IssuanceQueue, Pallet, TaskId, TaskKind, TaskOf, TaskOrigin, LOG_TARGET,
};
use pallet_compute_power::MicroUt;

/// Progress of an epoch's synthetic issuance.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub struct IssuanceState {
    /// The epoch.
    pub epoch: u32,
    /// Randomness the epoch's shuffle and task seeds come from.
    pub seed: [u8; 32],
    /// Number of groups (tasks) of the epoch (the length of `IssuanceGroups`).
    pub groups: u32,
    /// Next group to issue.
    pub next: u32,
}

/// 32 bytes of randomness for `subject`: the previous block's VRF output, or the parent hash before
/// BABE has produced any (genesis).
pub fn seed<T: Config>(subject: &[u8]) -> [u8; 32] {
    let (random, _) = T::Randomness::random(subject);
    let base = random.unwrap_or_else(frame_system::Pallet::<T>::parent_hash);
    sp_io::hashing::blake2_256(&(subject, base).encode())
}

/// A uniform-ish `u64` from `seed`, a domain tag and a counter.
pub fn random_u64(seed: &[u8; 32], tag: &[u8], i: u32) -> u64 {
    let hash = sp_io::hashing::blake2_256(&(seed, tag, i).encode());
    u64::from_le_bytes(hash[..8].try_into().expect("32-byte hash has 8 bytes; qed"))
}

/// Shuffles `items` in place (Fisher–Yates) with randomness from `seed`.
pub fn shuffle<A>(items: &mut [A], seed: &[u8; 32]) {
    for i in (1..items.len()).rev() {
        let j = (random_u64(seed, b"shuffle", i as u32) % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
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

/// A driller that may be given a task: who, its declared capacity, and until when it is busy with a
/// drawn task.
pub type Candidate<T> = (<T as frame_system::Config>::AccountId, MicroUt, BlockNumberFor<T>);

/// Every registered driller that is eligible (bonded at least `MinBond`), in storage order (the same
/// on every node).
pub fn candidates<T: Config>() -> Vec<Candidate<T>> {
    Drillers::<T>::iter()
        .filter(|(who, _)| T::Staking::is_eligible(who))
        .map(|(who, d)| (who, d.capacity, d.busy_until))
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

/// Starts a drilling epoch at `now`: shuffles the eligible drillers into the issuance queue.
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
    let seed = seed::<T>(&(b"ergon/drilling/epoch", epoch).encode());
    let mut trainers: Vec<(T::AccountId, MicroUt)> =
        candidates::<T>().into_iter().map(|(who, capacity, _)| (who, capacity)).collect();
    shuffle(&mut trainers, &seed);
    trainers.truncate(T::MaxTrainers::get() as usize);
    // Stable: the order within a band stays the shuffle's.
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
        Issuance::<T>::put(IssuanceState { epoch, seed, groups, next: 0 });
    }
    Pallet::<T>::deposit_event(Event::EpochStarted { epoch, trainers: n, tasks: groups });
    T::WeightInfo::start_epoch(drillers)
}

/// Issues up to `MaxIssuePerBlock` of the epoch's synthetic tasks. Returns the weight used.
pub fn issue_due<T: Config>(now: BlockNumberFor<T>) -> Weight {
    let Some(mut state) = Issuance::<T>::get() else {
        return Weight::zero();
    };
    let queue = IssuanceQueue::<T>::get();
    let starts = IssuanceGroups::<T>::get();
    let mut issued = 0u32;
    while issued < T::MaxIssuePerBlock::get() && state.next < state.groups {
        let g = state.next as usize;
        let from = starts.get(g).map_or(queue.len(), |s| *s as usize).min(queue.len());
        let to = starts.get(g + 1).map_or(queue.len(), |s| *s as usize).min(queue.len());
        let group = &queue[from..to];
        let slowest = group.iter().map(|(_, c)| *c).min().unwrap_or_default();
        let chain = synthetic_chain(
            sp_io::hashing::blake2_256(&(&state.seed, b"task", state.next).encode()),
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
    T::WeightInfo::issue_tasks(issued)
}

/// Draws a task's executors from `pool` (the eligible drillers) with randomness of this block:
/// uniformly among those whose declared capacity covers the task, who are not busy with another
/// drawn task and whose free bond covers the collateral, leaving out the previous attempts'
/// revealers when enough others qualify. Too few abandons the task.
pub fn draw<T: Config>(
    id: TaskId,
    task: &mut TaskOf<T>,
    pool: &[Candidate<T>],
    now: BlockNumberFor<T>,
) {
    let min = T::MinReplication::get() as usize;
    let able: Vec<&T::AccountId> = pool
        .iter()
        .filter(|(_, capacity, busy_until)| {
            *busy_until < now && Pallet::<T>::window_work(*capacity) >= task.difficulty
        })
        .map(|(who, _, _)| who)
        .collect();
    let fresh: Vec<&T::AccountId> =
        able.iter().copied().filter(|who| !task.disputed.iter().any(|d| &d.who == *who)).collect();
    let mut chosen = if fresh.len() >= min { fresh } else { able };
    let seed = seed::<T>(&(b"ergon/drilling/draw", id).encode());
    let r = task.replication as usize;
    // Fisher–Yates, stopped once `r` drawn candidates took on the collateral.
    let n = chosen.len();
    let mut i = 0;
    let shuffled = core::iter::from_fn(|| {
        (i < n).then(|| {
            let j = i + (random_u64(&seed, b"draw", i as u32) % (n - i) as u64) as usize;
            chosen.swap(i, j);
            i += 1;
            chosen[i - 1].clone()
        })
    });
    let executors = Pallet::<T>::obligate_executors(id, task.difficulty, shuffled, r);
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
