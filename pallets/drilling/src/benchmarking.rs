//! Benchmarks of the drilling calls and of each kind of work `on_initialize` does (frame-benchmarking
//! v2), each in its worst case.
//!
//! Worst cases: the largest task kind (inference with the longest URIs and most layers); the last
//! commit (which opens reveals); the last reveal of `MaxReplication` executors, which settles with
//! agreement, crediting all of them and slashing as many dissenters of the previous attempt; an
//! epoch start over `n` drillers (up to 999: with a genesis trainer, `MaxBonders`); `k` synthetic tasks issued in a block; a draw of `r`
//! executors out of `MaxTrainers` candidates with a full list of excluded ones.

use super::*;
use crate::settlement::result_commitment;
use alloc::{vec, vec::Vec};
use ergon_protocol::traits::BenchmarkTrainers;
use frame_benchmarking::v2::*;
use frame_support::{
    traits::{fungible::Mutate, EnsureOrigin, Get, Hooks},
    BoundedVec,
};
use frame_system::{pallet_prelude::BlockNumberFor, RawOrigin};
use sp_core::H256;
use sp_runtime::traits::{One, Saturating};

/// `n` eligible trainers registered as drillers, named by `tag`.
fn trainers<T: Config>(tag: &'static str, n: u32) -> Vec<T::AccountId> {
    (0..n)
        .map(|i| {
            let who: T::AccountId = account(tag, i, 0);
            T::BenchmarkHelper::make_trainer(&who);
            Drillers::<T>::insert(&who, driller::<T>());
            who
        })
        .collect()
}

/// A driller of the most capacity, not busy.
fn driller<T: Config>() -> Driller<BlockNumberFor<T>> {
    Driller {
        capacity: T::MaxCapacity::get(),
        busy_until: Default::default(),
        since: Default::default(),
    }
}

/// A funded account.
fn funded<T: Config>(name: &'static str) -> T::AccountId {
    let who: T::AccountId = account(name, 0, 0);
    let amount = T::PublisherDeposit::get().saturating_mul(100u32.into());
    let _ = T::Currency::set_balance(&who, amount.max(1_000_000u32.into()));
    who
}

/// A registered (and, if `approved`, approved) publisher.
fn publisher<T: Config>(approved: bool) -> T::AccountId {
    let who = funded::<T>("publisher");
    Pallet::<T>::register_publisher(RawOrigin::Signed(who.clone()).into())
        .expect("a funded account registers");
    if approved {
        Publishers::<T>::mutate(&who, |p| {
            if let Some(p) = p {
                p.approved = true;
            }
        });
    }
    who
}

fn uri(prefix: &[u8]) -> BoundedVec<u8, MaxUriLen> {
    let mut uri = prefix.to_vec();
    uri.resize(<MaxUriLen as Get<u32>>::get() as usize, b'a');
    BoundedVec::truncate_from(uri)
}

/// The most expensive kind to validate: inference with the longest URIs and the most layers.
fn largest_kind() -> TaskKind {
    TaskKind::QuantizedInference {
        model: H256::repeat_byte(1),
        model_uri: uri(b"https://models.example.org/"),
        dataset: H256::repeat_byte(2),
        dataset_uri: uri(b"https://data.example.org/"),
        widths: BoundedVec::truncate_from(vec![256; <MaxWidths as Get<u32>>::get() as usize]),
        samples: 1_000,
    }
}

fn chain_kind() -> TaskKind {
    TaskKind::MatmulChain(ergon_drill::MatmulChain { seed: [9; 32], dim: 256, length: 4 })
}

fn now<T: Config>() -> BlockNumberFor<T> {
    frame_system::Pallet::<T>::block_number()
}

/// Starts the benchmark at block 1 (not an epoch boundary).
fn start<T: Config>() {
    frame_system::Pallet::<T>::set_block_number(One::one());
}

/// A task assigned to `executors`, in `Committing`.
fn assigned<T: Config>(executors: Vec<T::AccountId>) -> TaskId {
    let r = executors.len() as u32;
    Pallet::<T>::new_task(
        chain_kind(),
        1_000,
        TaskOrigin::Synthetic { epoch: 0 },
        r,
        0,
        Default::default(),
        Some(executors),
        now::<T>(),
    )
    .expect("room for a task")
}

fn salt() -> H256 {
    H256::repeat_byte(5)
}

/// Every executor but the last commits `result`.
fn all_but_one_committed<T: Config>(id: TaskId, executors: &[T::AccountId], result: H256) {
    for who in &executors[..executors.len() - 1] {
        let commitment = result_commitment(id, who, result, salt());
        Pallet::<T>::commit_result(RawOrigin::Signed(who.clone()).into(), id, commitment)
            .expect("an executor commits");
    }
}

/// A task of `r` executors in `Revealing`, all but the last revealed `result`, with `r` bonded
/// dissenters of a previous attempt on record, their collateral frozen (slashed when it agrees).
fn revealing_with_dissenters<T: Config>(r: u32, result: H256) -> (TaskId, Vec<T::AccountId>) {
    use ergon_protocol::traits::{Obligation, Obligations};
    let executors = trainers::<T>("executor", r);
    let id = assigned::<T>(executors.clone());
    let dissenters = trainers::<T>("dissenter", r);
    let earlier = id.saturating_add(1_000_000);
    for d in &dissenters {
        T::Staking::obligate(d, Obligation::Drilling(earlier), Pallet::<T>::collateral(1_000))
            .expect("a benchmark trainer covers the collateral");
    }
    Tasks::<T>::mutate(id, |t| {
        if let Some(t) = t {
            t.disputed = BoundedVec::truncate_from(
                dissenters
                    .into_iter()
                    .map(|who| Dispute { who, result: H256::repeat_byte(0xdd), task: earlier })
                    .collect(),
            );
        }
    });
    all_but_one_committed::<T>(id, &executors, result);
    let last = executors[executors.len() - 1].clone();
    let commitment = result_commitment(id, &last, result, salt());
    Pallet::<T>::commit_result(RawOrigin::Signed(last).into(), id, commitment)
        .expect("the last executor commits");
    for who in &executors[..executors.len() - 1] {
        Pallet::<T>::reveal_result(RawOrigin::Signed(who.clone()).into(), id, result, salt())
            .expect("an executor reveals");
    }
    (id, executors)
}

fn timeout_of<T: Config>(id: TaskId) -> BlockNumberFor<T> {
    Tasks::<T>::get(id).map(|t| t.timeout).unwrap_or_default()
}

#[benchmarks]
mod benchmarks {
    use super::*;

    #[benchmark]
    fn register_publisher() {
        let who = funded::<T>("publisher");
        #[extrinsic_call]
        _(RawOrigin::Signed(who.clone()));
        assert!(Publishers::<T>::contains_key(&who));
    }

    #[benchmark]
    fn approve_publisher() -> Result<(), BenchmarkError> {
        let who = publisher::<T>(false);
        let origin =
            T::PublisherOrigin::try_successful_origin().map_err(|_| BenchmarkError::Weightless)?;
        #[extrinsic_call]
        _(origin as T::RuntimeOrigin, who.clone());
        assert!(Publishers::<T>::get(&who).is_some_and(|p| p.approved));
        Ok(())
    }

    /// Revocation burning the deposit.
    #[benchmark]
    fn revoke_publisher() -> Result<(), BenchmarkError> {
        let who = publisher::<T>(true);
        let origin =
            T::PublisherOrigin::try_successful_origin().map_err(|_| BenchmarkError::Weightless)?;
        #[extrinsic_call]
        _(origin as T::RuntimeOrigin, who.clone(), true);
        assert!(!Publishers::<T>::contains_key(&who));
        Ok(())
    }

    #[benchmark]
    fn deregister_publisher() {
        let who = publisher::<T>(true);
        #[extrinsic_call]
        _(RawOrigin::Signed(who.clone()));
        assert!(!Publishers::<T>::contains_key(&who));
    }

    #[benchmark]
    fn publish_task() {
        start::<T>();
        let who = publisher::<T>(true);
        let r = T::MaxReplication::get();
        #[extrinsic_call]
        _(RawOrigin::Signed(who.clone()), largest_kind(), r);
        assert_eq!(PublishedTasks::<T>::get(&who), 1);
    }

    /// A trainer starts drilling.
    #[benchmark]
    fn set_driller() {
        let who: T::AccountId = account("trainer", 0, 0);
        T::BenchmarkHelper::make_trainer(&who);
        #[extrinsic_call]
        _(RawOrigin::Signed(who.clone()), Some(T::MinCapacity::get()));
        assert!(Drillers::<T>::contains_key(&who));
    }

    /// A driller that is no longer eligible is removed by someone else.
    #[benchmark]
    fn prune_driller() {
        let stale: T::AccountId = account("stale", 0, 0);
        Drillers::<T>::insert(&stale, driller::<T>());
        let caller = funded::<T>("caller");
        #[extrinsic_call]
        _(RawOrigin::Signed(caller), stale.clone());
        assert!(!Drillers::<T>::contains_key(&stale));
    }

    /// A stale drilling record is removed by someone else.
    #[benchmark]
    fn prune_record() {
        let stale: T::AccountId = account("stale", 0, 0);
        Records::<T>::insert(&stale, DrillingRecord { tasks: 1, ..Default::default() });
        CurrentEpoch::<T>::put(T::RecordRetention::get().saturating_add(1));
        let caller = funded::<T>("caller");
        #[extrinsic_call]
        _(RawOrigin::Signed(caller), stale.clone());
        assert!(!Records::<T>::contains_key(&stale));
    }

    /// The last commitment, which opens the reveal window.
    #[benchmark]
    fn commit_result() {
        start::<T>();
        let executors = trainers::<T>("executor", T::MaxReplication::get());
        let id = assigned::<T>(executors.clone());
        let result = H256::repeat_byte(1);
        all_but_one_committed::<T>(id, &executors, result);
        let last = executors[executors.len() - 1].clone();
        let commitment = result_commitment(id, &last, result, salt());
        #[extrinsic_call]
        _(RawOrigin::Signed(last), id, commitment);
        assert_eq!(Tasks::<T>::get(id).map(|t| t.phase), Some(TaskPhase::Revealing));
    }

    /// The last reveal: agreement of `MaxReplication` executors, all credited, and as many
    /// dissenters of the previous attempt slashed.
    #[benchmark]
    fn reveal_result() {
        start::<T>();
        let result = H256::repeat_byte(1);
        let (id, executors) = revealing_with_dissenters::<T>(T::MaxReplication::get(), result);
        let last = executors[executors.len() - 1].clone();
        #[extrinsic_call]
        _(RawOrigin::Signed(last), id, result, salt());
        assert_eq!(Tasks::<T>::get(id).map(|t| t.phase), Some(TaskPhase::Agreed { result }));
    }

    /// A block with nothing to do.
    #[benchmark]
    fn on_initialize_idle() {
        start::<T>();
        let at = now::<T>().saturating_add(One::one());
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
    }

    /// An epoch starts with `n` drillers: read, check eligibility, shuffle, store the issuance queue.
    #[benchmark]
    fn start_epoch(n: Linear<2, 999>) {
        start::<T>();
        let before = issuance::candidates::<T>().len() as u32;
        trainers::<T>("trainer", n);
        #[block]
        {
            issuance::start_epoch::<T>(now::<T>());
        }
        let expected = (before + n).min(T::MaxTrainers::get());
        assert_eq!(IssuanceQueue::<T>::get().len() as u32, expected);
    }

    /// `k` synthetic tasks issued in one block: the queue holds `k` groups of `SyntheticReplication`.
    #[benchmark]
    fn issue_tasks(k: Linear<0, 16>) {
        start::<T>();
        let r = T::SyntheticReplication::get();
        let k = k.min(T::MaxIssuePerBlock::get());
        let capacity = T::MinCapacity::get();
        let queue: Vec<(T::AccountId, u128)> =
            trainers::<T>("trainer", k * r).into_iter().map(|who| (who, capacity)).collect();
        IssuanceQueue::<T>::put(BoundedVec::truncate_from(queue));
        IssuanceGroups::<T>::put(BoundedVec::truncate_from(
            (0..k).map(|g| g * r).collect::<Vec<_>>(),
        ));
        Issuance::<T>::put(issuance::IssuanceState {
            epoch: 1,
            snapshot_at: Default::default(),
            seed: Some([3; 32]),
            groups: k,
            next: 0,
        });
        #[block]
        {
            issuance::issue_due::<T>(now::<T>());
        }
        assert_eq!(Tasks::<T>::count(), k);
    }

    /// The eligible drillers read once for a block's draws.
    #[benchmark]
    fn load_candidates(n: Linear<2, 999>) {
        let before = issuance::candidates::<T>().len() as u32;
        trainers::<T>("trainer", n);
        #[block]
        {
            let pool = issuance::candidates::<T>();
            assert_eq!(pool.len() as u32, before + n);
        }
    }

    /// `r` executors drawn out of `MaxTrainers` candidates, excluding a full list of previous ones.
    #[benchmark]
    fn timeout_draw(r: Linear<2, 16>) {
        start::<T>();
        let r = r.min(T::MaxReplication::get());
        // Every candidate bonded, so every drawn one takes on the collateral.
        let pool: Vec<issuance::Candidate<T>> = trainers::<T>("trainer", T::MaxTrainers::get())
            .into_iter()
            .map(|who| (who, T::MaxCapacity::get(), Default::default(), Default::default()))
            .collect();
        let id = Pallet::<T>::new_task(
            chain_kind(),
            1_000,
            TaskOrigin::Synthetic { epoch: 0 },
            r,
            1,
            BoundedVec::truncate_from(
                pool.iter()
                    .take(MAX_REPLICATION as usize)
                    .map(|(who, _, _, _)| Dispute {
                        who: who.clone(),
                        result: H256::zero(),
                        task: 0,
                    })
                    .collect(),
            ),
            None,
            now::<T>(),
        )
        .expect("room for a task");
        let mut task = Tasks::<T>::get(id).expect("just stored");
        // Randomness that began after the task was issued exists.
        let at = task.timeout.saturating_add(One::one());
        frame_system::Pallet::<T>::set_block_number(at);
        <T::Randomness as ergon_protocol::traits::FreshRandomness<_>>::benchmark_make_fresh(
            task.opened_at,
        );
        #[block]
        {
            issuance::draw::<T>(id, &mut task, &pool, at);
            Tasks::<T>::insert(id, task);
        }
        assert_eq!(Tasks::<T>::get(id).map(|t| t.executors.len() as u32), Some(r));
    }

    /// The commit window closes with commitments missing: reveals open.
    #[benchmark]
    fn timeout_open_reveal() {
        start::<T>();
        let executors = trainers::<T>("executor", T::MaxReplication::get());
        let id = assigned::<T>(executors.clone());
        all_but_one_committed::<T>(id, &executors, H256::repeat_byte(1));
        let at = timeout_of::<T>(id);
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
        assert_eq!(Tasks::<T>::get(id).map(|t| t.phase), Some(TaskPhase::Revealing));
    }

    /// The reveal window closes on `r` executors: the heaviest settlement (all credited, `r`
    /// dissenters of the previous attempt slashed).
    #[benchmark]
    fn timeout_settle(r: Linear<2, 16>) {
        start::<T>();
        let r = r.min(T::MaxReplication::get());
        let result = H256::repeat_byte(1);
        let (id, executors) = revealing_with_dissenters::<T>(r, result);
        // The last executor's result is set without settling, as if revealed in the last block.
        Tasks::<T>::mutate(id, |t| {
            if let Some(t) = t {
                if let Some(e) =
                    t.executors.iter_mut().find(|e| e.who == executors[executors.len() - 1])
                {
                    e.result = Some(result);
                }
            }
        });
        let at = timeout_of::<T>(id);
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
        assert_eq!(Tasks::<T>::get(id).map(|t| t.phase), Some(TaskPhase::Agreed { result }));
    }

    /// A finished task's record is removed.
    #[benchmark]
    fn timeout_remove() {
        start::<T>();
        let result = H256::repeat_byte(1);
        let (id, executors) = revealing_with_dissenters::<T>(2, result);
        let last = executors[1].clone();
        Pallet::<T>::reveal_result(RawOrigin::Signed(last).into(), id, result, salt())
            .expect("the last executor reveals");
        let at = timeout_of::<T>(id);
        #[block]
        {
            Pallet::<T>::on_initialize(at);
        }
        assert!(Tasks::<T>::get(id).is_none());
    }

    impl_benchmark_test_suite!(Pallet, crate::mock::new_test_ext(), crate::mock::Test);
}
