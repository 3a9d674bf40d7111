//! Who drills what: the per-epoch synthetic issuance and the draw of a published (or re-issued)
//! task's executors, both from on-chain randomness.
//!
//! At an epoch boundary the eligible drillers (at most `MaxTrainers`) are shuffled with the block's
//! randomness and stored once. Groups of `SyntheticReplication` consecutive trainers each get one
//! matrix-chain task; the last group takes the `n mod r` left over, so every eligible trainer has
//! exactly one task per epoch. Tasks are issued at most `MaxIssuePerBlock` a block (and only while
//! `MaxOpenTasks` leaves room), so an epoch of 1 000 trainers spreads over several blocks.

use alloc::vec::Vec;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use ergon_drill::MatmulChain;
use frame_support::{pallet_prelude::*, traits::Randomness};
use frame_system::pallet_prelude::BlockNumberFor;
use pallet_trainer_staking::BondInspect;
use scale_info::TypeInfo;
use sp_runtime::traits::Saturating;

use crate::{
    weights::WeightInfo, Config, CurrentEpoch, Drillers, Event, Issuance, IssuanceQueue, Pallet,
    TaskId, TaskKind, TaskOf, TaskOrigin, TaskPhase, LOG_TARGET,
};

/// Progress of an epoch's synthetic issuance.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub struct IssuanceState {
    /// The epoch.
    pub epoch: u32,
    /// Randomness the epoch's shuffle and task seeds come from.
    pub seed: [u8; 32],
    /// Number of groups (tasks) of the epoch.
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

/// Moves `k` uniformly drawn items of `items` to its front (the first `k` steps of Fisher–Yates).
pub fn partial_shuffle<A>(items: &mut [A], k: usize, seed: &[u8; 32]) {
    let n = items.len();
    for i in 0..k.min(n) {
        let j = i + (random_u64(seed, b"draw", i as u32) % (n - i) as u64) as usize;
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

/// The index range of group `g` among `n` trainers cut into `groups` groups of `r` (the last group
/// takes the remainder).
pub fn group_range(g: u32, groups: u32, n: u32, r: u32) -> core::ops::Range<usize> {
    let start = g.saturating_mul(r);
    let end = if g + 1 >= groups { n } else { start.saturating_add(r).min(n) };
    start as usize..end as usize
}

/// Every registered driller that is eligible (bonded at least `MinBond`), in storage order (the same
/// on every node).
pub fn candidates<T: Config>() -> Vec<T::AccountId> {
    Drillers::<T>::iter_keys().filter(T::Staking::is_eligible).collect()
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
    let mut trainers = candidates::<T>();
    shuffle(&mut trainers, &seed);
    trainers.truncate(T::MaxTrainers::get() as usize);
    let n = trainers.len() as u32;
    let groups = group_count(n, T::SyntheticReplication::get(), T::MinReplication::get());
    let queue = BoundedVec::<_, T::MaxTrainers>::truncate_from(trainers);
    if groups == 0 {
        IssuanceQueue::<T>::kill();
        Issuance::<T>::kill();
    } else {
        IssuanceQueue::<T>::put(queue);
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
    let n = queue.len() as u32;
    let r = T::SyntheticReplication::get();
    let mut issued = 0u32;
    while issued < T::MaxIssuePerBlock::get() && state.next < state.groups {
        let executors: Vec<_> = queue[group_range(state.next, state.groups, n, r)].to_vec();
        let chain = MatmulChain {
            seed: sp_io::hashing::blake2_256(&(&state.seed, b"task", state.next).encode()),
            dim: T::SyntheticDim::get(),
            length: T::SyntheticLength::get(),
        };
        let created = Pallet::<T>::new_task(
            TaskKind::MatmulChain(chain),
            chain.difficulty_micro_ut(),
            TaskOrigin::Synthetic { epoch: state.epoch },
            r,
            0,
            Default::default(),
            Some(executors),
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
    } else {
        Issuance::<T>::put(state);
    }
    T::WeightInfo::issue_tasks(issued)
}

/// Draws a task's executors from `pool` (the eligible drillers) with randomness of this block,
/// leaving out the previous attempt's revealers when enough others are eligible. Too small a pool
/// abandons the task.
pub fn draw<T: Config>(
    id: TaskId,
    task: &mut TaskOf<T>,
    pool: &[T::AccountId],
    now: BlockNumberFor<T>,
) {
    let min = T::MinReplication::get() as usize;
    let fresh: Vec<&T::AccountId> =
        pool.iter().filter(|who| !task.disputed.iter().any(|(d, _)| d == *who)).collect();
    let mut chosen: Vec<&T::AccountId> =
        if fresh.len() >= min { fresh } else { pool.iter().collect() };
    if chosen.len() < min {
        task.phase = TaskPhase::Abandoned;
        Pallet::<T>::deposit_event(Event::TaskAbandoned { task: id });
        Pallet::<T>::reschedule(id, task, now.saturating_add(T::Retention::get()));
        return;
    }
    let seed = seed::<T>(&(b"ergon/drilling/draw", id).encode());
    let r = (task.replication as usize).min(chosen.len());
    partial_shuffle(&mut chosen, r, &seed);
    chosen.truncate(r);
    let executors = chosen.into_iter().cloned().collect();
    if Pallet::<T>::assign(id, task, executors, now).is_err() {
        frame_support::defensive!("timeout queue full although MaxOpenTasks holds");
    }
}
