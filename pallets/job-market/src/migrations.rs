//! Storage migrations of the job market.
//!
//! Version 1: job specs v2 ([`ergon_job_spec::v1`] → [`ergon_job_spec::JobSpec`], which added the
//! initial weights and the learning-rate schedule). Each stored [`crate::types::Job`] is rewritten
//! in place: its owner and everything after the spec are kept byte for byte, the spec is read as v1
//! and upgraded (seeded weights, constant rate — what v1 trained). `Jobs`' counter is untouched:
//! no job is added or removed.
//!
//! Version 2: verifiers declare a device class and a replay capacity (issue 37). Each
//! [`crate::VerifierPool`] entry keeps its block, weight and kernels and is given the CPU class,
//! the least capacity (`MinVerifierCapacity`) and an empty queue: it is drawn only for rounds a
//! CPU of that capacity replays in time until its daemon joins again with what it measured.
//!
//! Version 4: job specs v3 ([`ergon_job_spec::v2`] → [`ergon_job_spec::JobSpec`], which added the
//! precision). Each stored job is rewritten as for version 1, its spec read as v2 and given f32 —
//! what every v2 job trained in.
//!
//! Version 5: the draw's sum trees (issue 37, [`crate::pool`]). Every [`crate::VerifierPool`]
//! entry gets its slot in the trees at once (as a pool epoch's end would give it), the pool's
//! epochs count from the upgrade's, and [`crate::PoolFixedAt`] is the upgrade's block: rounds
//! drawing after it use randomness newer than the trees.
//!
//! Specs are upgraded one version at a time: a chain at version 0 first rewrites its v1 specs as v2
//! (version 1), and version 4 rewrites those as v3, so each step reads exactly the bytes the
//! previous one wrote.
//!
//! Version 3: bids name the device class they train on (issue 37, item 4: price floors per class).
//! Each stored [`crate::Bid`] keeps its trainer, price and deposit and names the CPU: every bid
//! before was checked against the one floor there was, the CPU's. Jobs already assigned have no
//! class recorded, and their trainer may declare any allowed class with its bundle.

use alloc::vec::Vec;
use codec::{Decode, DecodeAll, Encode};
use frame_support::{
    migrations::VersionedMigration,
    storage::unhashed,
    traits::{Get, UncheckedOnRuntimeUpgrade},
    weights::Weight,
};
use frame_system::pallet_prelude::BlockNumberFor;

use crate::{
    pallet::{Bids, Jobs},
    BalanceOf, Bid, Config, JobOf, Pallet, VerifierEntry, VerifierPool, LOG_TARGET,
};

/// Jobs' specs v1 → v2, run once when the pallet's storage version is 0.
pub type SpecV2<T> = VersionedMigration<
    0,
    1,
    UpgradeSpecs<T, FromV1>,
    Pallet<T>,
    <T as frame_system::Config>::DbWeight,
>;

/// Jobs' specs v2 → v3 (a precision each), run once when the pallet's storage version is 3.
pub type SpecPrecision<T> = VersionedMigration<
    3,
    4,
    UpgradeSpecs<T, FromV2>,
    Pallet<T>,
    <T as frame_system::Config>::DbWeight,
>;

/// One step of the specs' upgrades: a stored job's bytes with its spec one version up.
pub trait SpecStep {
    /// The step, for the log (`v1 → v2`).
    const NAME: &'static str;
    /// `stored` with its spec upgraded, or `None` if they do not read as a job of the version
    /// before.
    fn upgrade<T: Config>(stored: &[u8]) -> Option<Vec<u8>>;
    /// Whether `stored` reads as a job of the version after.
    fn is_done<T: Config>(stored: &[u8]) -> bool;
}

/// v1 → v2 ([`SpecV2`]).
pub struct FromV1;
/// v2 → v3 ([`SpecPrecision`]).
pub struct FromV2;

/// `stored` (an owner, a spec of type `Old`, the rest of a job) with the spec rewritten by `f`, the
/// owner and the rest kept byte for byte.
fn rewrite_spec<T: Config, Old: Decode, New: Encode>(
    stored: &[u8],
    f: impl FnOnce(Old) -> New,
) -> Option<Vec<u8>> {
    let mut input = stored;
    let owner = T::AccountId::decode(&mut input).ok()?;
    let spec = Old::decode(&mut input).ok()?;
    let mut out = (owner, f(spec)).encode();
    out.extend_from_slice(input);
    Some(out)
}

impl SpecStep for FromV1 {
    const NAME: &'static str = "v1 → v2";

    fn upgrade<T: Config>(stored: &[u8]) -> Option<Vec<u8>> {
        let out = rewrite_spec::<T, _, _>(stored, ergon_job_spec::v1::JobSpec::upgrade)?;
        // What is written back must read as a v2 job.
        Self::is_done::<T>(&out).then_some(out)
    }

    fn is_done<T: Config>(stored: &[u8]) -> bool {
        FromV2::upgrade::<T>(stored).is_some()
    }
}

impl SpecStep for FromV2 {
    const NAME: &'static str = "v2 → v3";

    fn upgrade<T: Config>(stored: &[u8]) -> Option<Vec<u8>> {
        let out = rewrite_spec::<T, _, _>(stored, ergon_job_spec::v2::JobSpec::upgrade)?;
        Self::is_done::<T>(&out).then_some(out)
    }

    fn is_done<T: Config>(stored: &[u8]) -> bool {
        // Exactly a job: every byte read, none missing.
        JobOf::<T>::decode_all(&mut &stored[..]).is_ok()
    }
}

/// Rewrites every stored job's spec by one [`SpecStep`].
pub struct UpgradeSpecs<T, Step>(core::marker::PhantomData<(T, Step)>);

impl<T: Config, Step: SpecStep> UncheckedOnRuntimeUpgrade for UpgradeSpecs<T, Step> {
    fn on_runtime_upgrade() -> Weight {
        let (mut upgraded, mut unreadable) = (0u64, 0u64);
        let keys: Vec<_> = Jobs::<T>::iter_keys().collect();
        for id in &keys {
            let key = Jobs::<T>::hashed_key_for(id);
            let Some(stored) = unhashed::get_raw(&key) else { continue };
            match Step::upgrade::<T>(&stored) {
                Some(bytes) => {
                    unhashed::put_raw(&key, &bytes);
                    upgraded += 1;
                }
                None => {
                    // Left as it was: nothing is deleted (its escrow stays held, try-runtime flags it).
                    log::error!(target: LOG_TARGET, "job {id}: stored record does not read as a job before {}", Step::NAME);
                    unreadable += 1;
                }
            }
        }
        log::info!(target: LOG_TARGET, "job specs {}: {upgraded} jobs upgraded, {unreadable} unreadable", Step::NAME);
        let n = keys.len() as u64;
        T::DbWeight::get().reads_writes(n.saturating_mul(2).saturating_add(1), upgraded)
    }

    #[cfg(feature = "try-runtime")]
    fn pre_upgrade() -> Result<Vec<u8>, sp_runtime::TryRuntimeError> {
        Ok((Jobs::<T>::count() as u64).encode())
    }

    #[cfg(feature = "try-runtime")]
    fn post_upgrade(state: Vec<u8>) -> Result<(), sp_runtime::TryRuntimeError> {
        let before = u64::decode(&mut &state[..]).map_err(|_| "pre-upgrade state")?;
        frame_support::ensure!(Jobs::<T>::count() as u64 == before, "jobs were added or lost");
        let done = Jobs::<T>::iter_keys()
            .filter_map(|id| unhashed::get_raw(&Jobs::<T>::hashed_key_for(id)))
            .filter(|raw| Step::is_done::<T>(raw))
            .count();
        frame_support::ensure!(done as u64 == before, "a stored job was not upgraded");
        Ok(())
    }
}

/// The pool's entry count, as a migration's `pre_upgrade` state.
#[cfg(feature = "try-runtime")]
fn pool_size<T: Config>() -> Vec<u8> {
    (VerifierPool::<T>::count() as u64).encode()
}

/// The entry count [`pool_size`] kept before the upgrade.
#[cfg(feature = "try-runtime")]
fn pool_size_before(state: &[u8]) -> Result<u64, sp_runtime::TryRuntimeError> {
    u64::decode(&mut &state[..]).map_err(|_| "pre-upgrade state".into())
}

/// Verifier entries v1 → v2, run once when the pallet's storage version is 1.
pub type VerifierCapacity<T> =
    VersionedMigration<1, 2, DeclareCapacity<T>, Pallet<T>, <T as frame_system::Config>::DbWeight>;

/// A verifier entry as version 1 stored it.
#[derive(Decode)]
pub struct VerifierEntryV1<BlockNumber> {
    /// Block it joined.
    pub since: BlockNumber,
    /// Its draw weight.
    pub weight: u64,
    /// The kernels revision it declared.
    pub kernels: u32,
}

/// The unversioned step of [`VerifierCapacity`].
pub struct DeclareCapacity<T>(core::marker::PhantomData<T>);

impl<T: Config> UncheckedOnRuntimeUpgrade for DeclareCapacity<T> {
    fn on_runtime_upgrade() -> Weight {
        let mut n = 0u64;
        VerifierPool::<T>::translate::<VerifierEntryV1<BlockNumberFor<T>>, _>(|_, old| {
            n += 1;
            Some(VerifierEntry {
                since: old.since,
                weight: old.weight,
                kernels: old.kernels,
                class: ergon_protocol::DeviceClass::Cpu,
                capacity: T::MinVerifierCapacity::get(),
                busy_until: Default::default(),
            })
        });
        log::info!(target: LOG_TARGET, "verifier pool v1 → v2: {n} entries declared CPU at the least capacity");
        T::DbWeight::get().reads_writes(n, n)
    }

    #[cfg(feature = "try-runtime")]
    fn pre_upgrade() -> Result<Vec<u8>, sp_runtime::TryRuntimeError> {
        Ok(pool_size::<T>())
    }

    #[cfg(feature = "try-runtime")]
    fn post_upgrade(state: Vec<u8>) -> Result<(), sp_runtime::TryRuntimeError> {
        let before = pool_size_before(&state)?;
        frame_support::ensure!(
            VerifierPool::<T>::iter_values().count() as u64 == before,
            "a verifier entry was lost or does not read as v2"
        );
        Ok(())
    }
}

/// The pool's sum trees built from the entries, run once when the pallet's storage version is 4.
pub type PoolTrees<T> =
    VersionedMigration<4, 5, BuildPoolTrees<T>, Pallet<T>, <T as frame_system::Config>::DbWeight>;

/// The unversioned step of [`PoolTrees`].
pub struct BuildPoolTrees<T>(core::marker::PhantomData<T>);

impl<T: Config> UncheckedOnRuntimeUpgrade for BuildPoolTrees<T> {
    fn on_runtime_upgrade() -> Weight {
        let accounts: Vec<T::AccountId> = VerifierPool::<T>::iter_keys().collect();
        for who in &accounts {
            crate::pool::sync::<T>(who);
        }
        let now = frame_system::Pallet::<T>::block_number();
        crate::PoolSyncedEpoch::<T>::put(crate::pool::epoch_of::<T>(now));
        crate::PoolFixedAt::<T>::put(now);
        let n = accounts.len() as u64;
        log::info!(target: LOG_TARGET, "verifier pool → sum trees: {n} slots");
        // Each slot: its entry, about log2(n) nodes read and one written, its tree, its holder
        // and its slot record.
        let depth = 64 - n.leading_zeros() as u64 + 1;
        T::DbWeight::get().reads_writes(n.saturating_mul(depth + 3), n.saturating_mul(4) + 2)
    }

    #[cfg(feature = "try-runtime")]
    fn pre_upgrade() -> Result<Vec<u8>, sp_runtime::TryRuntimeError> {
        Ok(pool_size::<T>())
    }

    #[cfg(feature = "try-runtime")]
    fn post_upgrade(state: Vec<u8>) -> Result<(), sp_runtime::TryRuntimeError> {
        let before = pool_size_before(&state)?;
        frame_support::ensure!(
            crate::PoolSlots::<T>::iter().count() as u64 == before,
            "a verifier entry has no slot in the trees"
        );
        Pallet::<T>::pool_try_state()
    }
}

/// Bids v2 → v3 (a device class each), run once when the pallet's storage version is 2.
pub type BidClasses<T> =
    VersionedMigration<2, 3, NameBidClasses<T>, Pallet<T>, <T as frame_system::Config>::DbWeight>;

/// A bid as version 2 stored it.
#[derive(Decode)]
pub struct BidV2<AccountId, Balance> {
    /// The bidding trainer.
    pub trainer: AccountId,
    /// Its price.
    pub price: Balance,
    /// Its deposit.
    pub deposit: Balance,
}

/// The unversioned step of [`BidClasses`].
pub struct NameBidClasses<T>(core::marker::PhantomData<T>);

impl<T: Config> UncheckedOnRuntimeUpgrade for NameBidClasses<T> {
    fn on_runtime_upgrade() -> Weight {
        let (mut jobs, mut bids) = (0u64, 0u64);
        Bids::<T>::translate::<Vec<BidV2<T::AccountId, BalanceOf<T>>>, _>(|_, old| {
            jobs += 1;
            bids += old.len() as u64;
            let new: Vec<_> = old
                .into_iter()
                .map(|b| Bid {
                    trainer: b.trainer,
                    price: b.price,
                    deposit: b.deposit,
                    device: ergon_protocol::DeviceClass::Cpu,
                })
                .collect();
            // As many as before, so within `MaxBids`.
            new.try_into().ok()
        });
        log::info!(target: LOG_TARGET, "bids v2 → v3: {bids} bids of {jobs} jobs name the CPU");
        T::DbWeight::get().reads_writes(jobs, jobs)
    }

    #[cfg(feature = "try-runtime")]
    fn pre_upgrade() -> Result<Vec<u8>, sp_runtime::TryRuntimeError> {
        Ok((Bids::<T>::iter_keys().count() as u64).encode())
    }

    #[cfg(feature = "try-runtime")]
    fn post_upgrade(state: Vec<u8>) -> Result<(), sp_runtime::TryRuntimeError> {
        let before = u64::decode(&mut &state[..]).map_err(|_| "pre-upgrade state")?;
        frame_support::ensure!(
            Bids::<T>::iter_values().count() as u64 == before,
            "a job's bids were lost or do not read as v3"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::*;
    use frame_support::traits::{GetStorageVersion, OnRuntimeUpgrade, StorageVersion};

    /// `job`'s bytes with `spec` in place of its spec.
    fn with_spec(job: &JobOf<Test>, spec: impl Encode) -> Vec<u8> {
        let now = job.encode();
        let rest = &now[(job.owner, &job.spec).encode().len()..];
        let mut out = (job.owner, spec).encode();
        out.extend_from_slice(rest);
        out
    }

    /// A job stored under spec v1 by the runtime before.
    fn as_stored_by_v1(job: &JobOf<Test>) -> Vec<u8> {
        let s = job.spec.clone();
        with_spec(
            job,
            ergon_job_spec::v1::JobSpec {
                model: s.model,
                train: s.train,
                validation: s.validation,
                optimizer: s.optimizer,
                epochs: s.epochs,
                batch_size: s.batch_size,
                checkpoint_interval: s.checkpoint_interval,
            },
        )
    }

    /// A job stored under spec v2 (before the precision).
    fn as_stored_by_v2(job: &JobOf<Test>) -> Vec<u8> {
        let s = job.spec.clone();
        with_spec(
            job,
            ergon_job_spec::v2::JobSpec {
                model: s.model,
                init: s.init,
                train: s.train,
                validation: s.validation,
                optimizer: s.optimizer,
                schedule: s.schedule,
                adapters: s.adapters,
                gradients: s.gradients,
                epochs: s.epochs,
                batch_size: s.batch_size,
                checkpoint_interval: s.checkpoint_interval,
            },
        )
    }

    /// Three jobs posted, then stored as `old` writes them, the pallet at `version`.
    fn stored_as(
        old: fn(&JobOf<Test>) -> Vec<u8>,
        version: u16,
    ) -> Vec<(crate::JobId, JobOf<Test>)> {
        run_to_block(1);
        for _ in 0..3 {
            frame_support::assert_ok!(crate::Pallet::<Test>::post_job(
                frame_system::RawOrigin::Signed(1).into(),
                alloc::boxed::Box::new(example_spec()),
                ENDOWMENT / 10,
                5,
                21,
            ));
        }
        let jobs: Vec<_> = Jobs::<Test>::iter().collect();
        assert_eq!(jobs.len(), 3);
        for (id, job) in &jobs {
            unhashed::put_raw(&Jobs::<Test>::hashed_key_for(id), &old(job));
            assert!(Jobs::<Test>::get(id).is_none(), "old bytes do not read as a job now");
        }
        StorageVersion::new(version).put::<Pallet<Test>>();
        jobs
    }

    /// A chain at version 0 upgrades its v1 specs one version at a time: after the step to v2
    /// they read as v2 jobs (not yet as jobs now), after the step to v3 as the jobs they were.
    #[test]
    fn v1_jobs_read_as_they_were_after_both_spec_upgrades_and_none_is_lost() {
        new_test_ext().execute_with(|| {
            let jobs = stored_as(as_stored_by_v1, 0);

            SpecV2::<Test>::on_runtime_upgrade();
            assert_eq!(Pallet::<Test>::on_chain_storage_version(), 1);
            for (id, job) in &jobs {
                let raw = unhashed::get_raw(&Jobs::<Test>::hashed_key_for(id)).unwrap();
                assert_eq!(raw, as_stored_by_v2(job), "job {id} is a v2 job");
            }
            // The pool's and the bids' steps (versions 2 and 3) touch no job.
            StorageVersion::new(3).put::<Pallet<Test>>();
            SpecPrecision::<Test>::on_runtime_upgrade();

            assert_eq!(Pallet::<Test>::on_chain_storage_version(), 4);
            assert_eq!(Jobs::<Test>::count(), 3);
            for (id, job) in jobs {
                assert_eq!(Jobs::<Test>::get(id), Some(job), "job {id} upgraded unchanged");
            }
            // Run again (version 4 now): nothing to do, nothing touched.
            SpecV2::<Test>::on_runtime_upgrade();
            SpecPrecision::<Test>::on_runtime_upgrade();
            assert_eq!(Jobs::<Test>::count(), 3);
        });
    }

    #[test]
    fn v2_jobs_read_as_f32_jobs_after_the_upgrade() {
        new_test_ext().execute_with(|| {
            let jobs = stored_as(as_stored_by_v2, 3);
            SpecPrecision::<Test>::on_runtime_upgrade();
            assert_eq!(Pallet::<Test>::on_chain_storage_version(), 4);
            for (id, job) in jobs {
                assert_eq!(job.spec.precision, ergon_job_spec::Precision::F32);
                assert_eq!(Jobs::<Test>::get(id), Some(job), "job {id} upgraded unchanged");
            }
        });
    }

    /// No step takes bytes that are not a job of the version before — garbage, or a job already
    /// upgraded, which a step run twice would otherwise shift by a byte.
    #[test]
    fn bytes_that_are_not_a_job_of_the_version_before_are_left_alone() {
        new_test_ext().execute_with(|| {
            assert_eq!(FromV1::upgrade::<Test>(&[1, 2, 3]), None);
            assert_eq!(FromV2::upgrade::<Test>(&[1, 2, 3]), None);
            let jobs = stored_as(as_stored_by_v2, 3);
            for (_, job) in jobs {
                assert_eq!(FromV2::upgrade::<Test>(&job.encode()), None, "a v3 job is not v2");
                let v2 = as_stored_by_v2(&job);
                assert_eq!(FromV1::upgrade::<Test>(&v2), None, "a v2 job is not v1");
                assert!(FromV1::is_done::<Test>(&v2) && FromV2::is_done::<Test>(&job.encode()));
            }
        });
    }

    #[test]
    fn v1_verifier_entries_become_least_capacity_cpu_entries() {
        new_test_ext().execute_with(|| {
            let key = VerifierPool::<Test>::hashed_key_for(7u64);
            unhashed::put_raw(&key, &(3u64, 500u64, 1u32).encode());
            frame_support::storage::unhashed::put(
                &VerifierPool::<Test>::counter_storage_final_key(),
                &1u32,
            );
            StorageVersion::new(1).put::<Pallet<Test>>();

            VerifierCapacity::<Test>::on_runtime_upgrade();

            assert_eq!(Pallet::<Test>::on_chain_storage_version(), 2);
            let entry = VerifierPool::<Test>::get(7).expect("kept");
            assert_eq!((entry.since, entry.weight, entry.kernels), (3, 500, 1));
            assert_eq!(entry.class, ergon_protocol::DeviceClass::Cpu);
            assert_eq!(entry.capacity, MinVerifierCapacity::get());
            assert_eq!(entry.busy_until, 0);
        });
    }

    #[test]
    fn v2_bids_name_the_cpu_and_keep_price_and_deposit() {
        new_test_ext().execute_with(|| {
            let key = Bids::<Test>::hashed_key_for(4u64);
            unhashed::put_raw(
                &key,
                &vec![(3u64, 700u128, 10u128), (5u64, 650u128, 10u128)].encode(),
            );
            StorageVersion::new(2).put::<Pallet<Test>>();

            BidClasses::<Test>::on_runtime_upgrade();

            assert_eq!(Pallet::<Test>::on_chain_storage_version(), 3);
            let bids = Bids::<Test>::get(4);
            let read: Vec<_> =
                bids.iter().map(|b| (b.trainer, b.price, b.deposit, b.device)).collect();
            let cpu = ergon_protocol::DeviceClass::Cpu;
            assert_eq!(read, vec![(3, 700, 10, cpu), (5, 650, 10, cpu)]);
        });
    }

    /// Version 5: every entry of the pool gets its slot in the trees, weighted by its bond at
    /// joining, and draws after the upgrade use randomness newer than it.
    #[test]
    fn v4_pool_entries_get_their_slots_in_the_trees() {
        new_test_ext().execute_with(|| {
            System::set_block_number(7);
            for (who, weight) in [(3u64, 500u64), (4, 700), (5, 900)] {
                let entry = VerifierEntry {
                    since: 2,
                    weight,
                    kernels: 1,
                    class: ergon_protocol::DeviceClass::Cpu,
                    capacity: 1 << 20,
                    busy_until: 0,
                };
                VerifierPool::<Test>::insert(who, entry);
            }
            StorageVersion::new(4).put::<Pallet<Test>>();

            PoolTrees::<Test>::on_runtime_upgrade();

            assert_eq!(Pallet::<Test>::on_chain_storage_version(), 5);
            let key = crate::pool::PoolKey { kernels: 1, gpu: false };
            let tree = crate::PoolTrees::<Test>::get(key);
            assert_eq!((tree.len, tree.bands[20]), (3, 3));
            let nodes = crate::pool::Stored::<Test>::new(key);
            assert_eq!(ergon_protocol::sortition::total(&nodes, 3), 2_100);
            assert_eq!(crate::PoolFixedAt::<Test>::get(), 7);
            Pallet::<Test>::pool_try_state().expect("the trees match the entries");
        });
    }
}
