//! Settling a task: credit on unanimous agreement, penalties and a re-issue otherwise.

use alloc::vec::Vec;
use codec::Encode;
use ergon_protocol::traits::{ComputePowerLedger, MicroUt, WorkKind};
use ergon_protocol::traits::{Obligation, Obligations, SlashReason};
use frame_support::{pallet_prelude::*, traits::Get};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_core::H256;
use sp_runtime::traits::Saturating;

use crate::{
    rate, Config, CurrentEpoch, Dispute, DrillingRecord, Event, Pallet, Records, ReplicationBound,
    TaskId, TaskOf, TaskPhase, MAX_REPLICATION,
};

/// The commitment an executor makes to its result. Binding the task and the executor stops anyone
/// from replaying another executor's commitment; the salt stops anyone from testing guesses.
pub fn result_commitment<AccountId: Encode>(
    task: TaskId,
    executor: &AccountId,
    result: H256,
    salt: H256,
) -> H256 {
    H256(ergon_protocol::commitments::drill_result(task, executor, &result.0, &salt.0))
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
///
/// The silent are slashed at once: silence is never right. A revealed result is judged only by a
/// result the network has confirmed: this attempt's unanimous agreement or, on the last attempt, a
/// strict majority of its `r` executors. Until then it is disputed: its collateral stays frozen
/// and it travels with the re-issue. Those a confirmed result proves wrong are slashed, and what is
/// slashed goes to the disputed executors it proves right, who are released and credited their D.
pub(crate) fn settle<T: Config>(id: TaskId, task: &mut TaskOf<T>, now: BlockNumberFor<T>) {
    let revealed: Vec<H256> = task.executors.iter().filter_map(|e| e.result).collect();
    let r = task.executors.len();
    let unanimous = r > 0 && revealed.len() == r && revealed.iter().all(|x| *x == revealed[0]);
    let last = task.attempt >= T::MaxReissues::get();
    let confirmed = if unanimous {
        Some(revealed[0])
    } else if last {
        strict_majority(&revealed, r)
    } else {
        None
    };
    for executor in task.executors.iter().filter(|e| e.result.is_none()) {
        slash::<T>(id, &executor.who, SlashReason::NoShow, &[]);
    }
    let disputed = core::mem::take(&mut task.disputed).into_inner();
    let mine: Vec<Dispute<T::AccountId>> = task
        .executors
        .iter()
        .filter_map(|e| e.result.map(|result| Dispute { who: e.who.clone(), result, task: id }))
        .collect();
    let invalid = confirmed.is_some_and(|result| Some(result) == task.kind.invalid_result());

    let reissued = match confirmed {
        Some(result) => {
            // Every revealed result is judged against the confirmed one; those proven wrong pay
            // the earlier executors proven right.
            let right: Vec<T::AccountId> =
                disputed.iter().filter(|d| d.result == result).map(|d| d.who.clone()).collect();
            let credit = if invalid { 0 } else { task.difficulty };
            for dispute in disputed.iter().chain(&mine) {
                judge::<T>(dispute, result, credit, &right, dispute.task == id);
            }
            if unanimous && !invalid {
                for executor in &task.executors {
                    T::ComputePower::credit(&executor.who, WorkKind::Drilling, task.difficulty);
                    record::<T>(&executor.who, task.difficulty, executor.elapsed_ms);
                }
            }
            None
        }
        None => {
            // Nobody is judged on this attempt alone: its results join the earlier disputes.
            let mut all = mine;
            all.extend(disputed);
            let keep = all.len().min(MAX_REPLICATION as usize);
            drop_disputes::<T>(all.split_off(keep));
            let created = (!last)
                .then(|| {
                    Pallet::<T>::new_task(
                        task.kind.clone(),
                        task.difficulty,
                        task.origin.clone(),
                        task.replication.saturating_add(2).min(T::MaxReplication::get()),
                        task.attempt.saturating_add(1),
                        BoundedVec::<_, ReplicationBound>::truncate_from(all.clone()),
                        None,
                        now,
                    )
                    .ok()
                })
                .flatten();
            if created.is_none() {
                drop_disputes::<T>(all);
            }
            created
        }
    };

    match confirmed {
        Some(_) if invalid => {
            task.phase = TaskPhase::Invalid;
            Pallet::<T>::deposit_event(Event::TaskInvalid { task: id });
        }
        Some(result) if unanimous => {
            task.phase = TaskPhase::Agreed { result };
            Pallet::<T>::deposit_event(Event::TaskAgreed {
                task: id,
                result,
                executors: r as u32,
                difficulty: task.difficulty,
            });
        }
        _ => {
            task.phase = TaskPhase::Disagreed { reissued };
            Pallet::<T>::deposit_event(Event::TaskDisagreed {
                task: id,
                revealed: revealed.len() as u32,
                silent: (r - revealed.len()) as u32,
                reissued,
            });
        }
    }
    Pallet::<T>::reschedule(id, task, now.saturating_add(T::Retention::get()));
}

/// Judges one revealed result against the confirmed `result`: wrong → slashed, paid to `right`;
/// right → released and, for a dispute of an earlier attempt (`current` false), credited `credit`
/// micro-ut of D for the work it was right about.
fn judge<T: Config>(
    dispute: &Dispute<T::AccountId>,
    result: H256,
    credit: MicroUt,
    right: &[T::AccountId],
    current: bool,
) {
    if dispute.result != result {
        slash::<T>(dispute.task, &dispute.who, SlashReason::DrillingDisagreement, right);
        return;
    }
    T::Staking::release(&dispute.who, Obligation::Drilling(dispute.task));
    if !current {
        if credit > 0 {
            T::ComputePower::credit(&dispute.who, WorkKind::Drilling, credit);
        }
        Pallet::<T>::deposit_event(Event::ExecutorVindicated {
            task: dispute.task,
            who: dispute.who.clone(),
            difficulty: credit,
        });
    }
}

/// Releases the collateral of disputes that can no longer be judged.
pub(crate) fn drop_disputes<T: Config>(disputes: Vec<Dispute<T::AccountId>>) {
    for d in disputes {
        T::Staking::release(&d.who, Obligation::Drilling(d.task));
        Pallet::<T>::deposit_event(Event::DisputeDropped { task: d.task, who: d.who });
    }
}

/// Slashes `DrillingSlash` of the collateral `who` holds for `task`, paid to `to` (burnt if none).
fn slash<T: Config>(task: TaskId, who: &T::AccountId, reason: SlashReason, to: &[T::AccountId]) {
    let amount = T::Staking::slash_obligation_to(
        who,
        Obligation::Drilling(task),
        T::DrillingSlash::get(),
        reason,
        to,
    );
    Pallet::<T>::deposit_event(Event::ExecutorSlashed { task, who: who.clone(), reason, amount });
}

/// Adds an agreed task done in `elapsed_ms` to `who`'s drilling record.
fn record<T: Config>(who: &T::AccountId, difficulty: u128, elapsed_ms: u64) {
    let elapsed_ms = elapsed_ms.max(1);
    let epoch = CurrentEpoch::<T>::get();
    Records::<T>::mutate(who, |entry| {
        let r = entry.get_or_insert_with(DrillingRecord::default);
        r.tasks.saturating_inc();
        r.difficulty.saturating_accrue(difficulty);
        r.busy_ms.saturating_accrue(elapsed_ms);
        r.last_micro_ut_per_hour = rate(difficulty, elapsed_ms);
        r.last_epoch = epoch;
    });
}
