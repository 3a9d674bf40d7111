//! Settling a task: credit on unanimous agreement, penalties and a re-issue otherwise.

use alloc::vec::Vec;
use codec::Encode;
use frame_support::{pallet_prelude::*, traits::Get};
use frame_system::pallet_prelude::BlockNumberFor;
use pallet_compute_power::{ComputePowerLedger, WorkKind};
use pallet_trainer_staking::{BondInspect, SlashReason, Slashing};
use sp_core::H256;
use sp_runtime::traits::Saturating;

use crate::{
    rate, Config, DrillingRecord, Event, Pallet, Records, ReplicationBound, TaskId, TaskOf,
    TaskPhase,
};

/// The commitment an executor makes to its result. Binding the task and the executor stops anyone
/// from replaying another executor's commitment; the salt stops anyone from testing guesses.
pub fn result_commitment<AccountId: Encode>(
    task: TaskId,
    executor: &AccountId,
    result: H256,
    salt: H256,
) -> H256 {
    H256(sp_io::hashing::blake2_256(&(b"ergon/drilling", task, executor, result, salt).encode()))
}

/// The result more than half of the task's `r` executors revealed, if any.
pub fn strict_majority(revealed: &[H256], r: usize) -> Option<H256> {
    revealed
        .iter()
        .find(|candidate| revealed.iter().filter(|x| x == candidate).count() * 2 > r)
        .copied()
}

/// Settles `task` at `now` (every executor revealed, or the reveal or commit window closed) and
/// schedules its removal.
pub(crate) fn settle<T: Config>(id: TaskId, task: &mut TaskOf<T>, now: BlockNumberFor<T>) {
    let revealed: Vec<H256> = task.executors.iter().filter_map(|e| e.result).collect();
    let r = task.executors.len();
    let unanimous = r > 0 && revealed.len() == r && revealed.iter().all(|x| *x == revealed[0]);
    if unanimous {
        let result = revealed[0];
        // The previous attempt's dissenters are known now.
        for (who, theirs) in &task.disputed {
            if *theirs != result {
                slash::<T>(id, who, SlashReason::DrillingDisagreement);
            }
        }
        if Some(result) == task.kind.invalid_result() {
            task.phase = TaskPhase::Invalid;
            Pallet::<T>::deposit_event(Event::TaskInvalid { task: id });
        } else {
            for executor in &task.executors {
                T::ComputePower::credit(&executor.who, WorkKind::Drilling, task.difficulty);
                record::<T>(&executor.who, task.difficulty, executor.elapsed_ms);
            }
            task.phase = TaskPhase::Agreed { result };
            Pallet::<T>::deposit_event(Event::TaskAgreed {
                task: id,
                result,
                executors: r as u32,
                difficulty: task.difficulty,
            });
        }
    } else {
        let majority = strict_majority(&revealed, r);
        let mut disputed: Vec<(T::AccountId, H256)> = Vec::new();
        for executor in &task.executors {
            match executor.result {
                None => slash::<T>(id, &executor.who, SlashReason::NoShow),
                Some(theirs) if majority.is_some_and(|m| m != theirs) => {
                    slash::<T>(id, &executor.who, SlashReason::DrillingDisagreement)
                }
                Some(theirs) => disputed.push((executor.who.clone(), theirs)),
            }
        }
        // Dissenters of earlier attempts stay on record until an attempt agrees.
        disputed.extend(task.disputed.iter().cloned());
        let disputed = BoundedVec::<_, ReplicationBound>::truncate_from(disputed);
        let reissued = (task.attempt < T::MaxReissues::get())
            .then(|| {
                Pallet::<T>::new_task(
                    task.kind.clone(),
                    task.difficulty,
                    task.origin.clone(),
                    task.replication.saturating_add(2).min(T::MaxReplication::get()),
                    task.attempt.saturating_add(1),
                    disputed,
                    None,
                    now,
                )
                .ok()
            })
            .flatten();
        task.phase = TaskPhase::Disagreed { reissued };
        Pallet::<T>::deposit_event(Event::TaskDisagreed {
            task: id,
            revealed: revealed.len() as u32,
            silent: (r - revealed.len()) as u32,
            reissued,
        });
    }
    Pallet::<T>::reschedule(id, task, now.saturating_add(T::Retention::get()));
}

/// Slashes `DrillingSlash` of `who`'s active bond.
fn slash<T: Config>(task: TaskId, who: &T::AccountId, reason: SlashReason) {
    let amount = T::DrillingSlash::get().mul_floor(T::Staking::active_bond(who));
    let amount = T::Staking::slash(who, amount, reason);
    Pallet::<T>::deposit_event(Event::ExecutorSlashed { task, who: who.clone(), reason, amount });
}

/// Adds an agreed task done in `elapsed_ms` to `who`'s drilling record.
fn record<T: Config>(who: &T::AccountId, difficulty: u128, elapsed_ms: u64) {
    let elapsed_ms = elapsed_ms.max(1);
    Records::<T>::mutate(who, |entry| {
        let r = entry.get_or_insert_with(DrillingRecord::default);
        r.tasks.saturating_inc();
        r.difficulty.saturating_accrue(difficulty);
        r.busy_ms.saturating_accrue(elapsed_ms);
        r.last_micro_ut_per_hour = rate(difficulty, elapsed_ms);
    });
}
