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
//! Version 3: bids name the device class they train on (issue 37, item 4: price floors per class).
//! Each stored [`crate::Bid`] keeps its trainer, price and deposit and names the CPU: every bid
//! before was checked against the one floor there was, the CPU's. Jobs already assigned have no
//! class recorded, and their trainer may declare any allowed class with its bundle.

use alloc::vec::Vec;
use codec::{Decode, Encode};
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
pub type SpecV2<T> =
    VersionedMigration<0, 1, UpgradeSpecs<T>, Pallet<T>, <T as frame_system::Config>::DbWeight>;

/// The unversioned step of [`SpecV2`].
pub struct UpgradeSpecs<T>(core::marker::PhantomData<T>);

/// A stored job's bytes with its spec upgraded, or `None` if they do not read as a v1 job.
pub fn upgrade_job<T: Config>(stored: &[u8]) -> Option<Vec<u8>> {
    let mut input = stored;
    let owner = T::AccountId::decode(&mut input).ok()?;
    let spec = ergon_job_spec::v1::JobSpec::decode(&mut input).ok()?;
    let mut out = (owner, spec.upgrade()).encode();
    out.extend_from_slice(input);
    // What is written back must read as a job of this version.
    JobOf::<T>::decode(&mut &out[..]).ok()?;
    Some(out)
}

impl<T: Config> UncheckedOnRuntimeUpgrade for UpgradeSpecs<T> {
    fn on_runtime_upgrade() -> Weight {
        let (mut upgraded, mut unreadable) = (0u64, 0u64);
        let keys: Vec<_> = Jobs::<T>::iter_keys().collect();
        for id in &keys {
            let key = Jobs::<T>::hashed_key_for(id);
            let Some(stored) = unhashed::get_raw(&key) else { continue };
            match upgrade_job::<T>(&stored) {
                Some(bytes) => {
                    unhashed::put_raw(&key, &bytes);
                    upgraded += 1;
                }
                None => {
                    // Left as it was: nothing is deleted (its escrow stays held, try-runtime flags it).
                    log::error!(target: LOG_TARGET, "job {id}: stored record does not read as a v1 job");
                    unreadable += 1;
                }
            }
        }
        log::info!(target: LOG_TARGET, "job specs v1 → v2: {upgraded} jobs upgraded, {unreadable} unreadable");
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
        frame_support::ensure!(
            Jobs::<T>::iter_values().count() as u64 == before,
            "a stored job does not read as v2"
        );
        Ok(())
    }
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
        Ok((VerifierPool::<T>::count() as u64).encode())
    }

    #[cfg(feature = "try-runtime")]
    fn post_upgrade(state: Vec<u8>) -> Result<(), sp_runtime::TryRuntimeError> {
        let before = u64::decode(&mut &state[..]).map_err(|_| "pre-upgrade state")?;
        frame_support::ensure!(
            VerifierPool::<T>::iter_values().count() as u64 == before,
            "a verifier entry was lost or does not read as v2"
        );
        Ok(())
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

    /// A job stored under spec v1 by the runtime before: its bytes are the v2 job's with the v1
    /// spec in place of the v2 one.
    fn as_stored_by_v1(job: &JobOf<Test>) -> Vec<u8> {
        let s = job.spec.clone();
        let v1 = ergon_job_spec::v1::JobSpec {
            model: s.model,
            train: s.train,
            validation: s.validation,
            optimizer: s.optimizer,
            epochs: s.epochs,
            batch_size: s.batch_size,
            checkpoint_interval: s.checkpoint_interval,
        };
        let v2 = job.encode();
        let rest = &v2[(job.owner, &job.spec).encode().len()..];
        let mut out = (job.owner, v1).encode();
        out.extend_from_slice(rest);
        out
    }

    #[test]
    fn v1_jobs_read_as_v2_after_the_upgrade_and_none_is_lost() {
        new_test_ext().execute_with(|| {
            run_to_block(1);
            let budget = ENDOWMENT / 10;
            for _ in 0..3 {
                frame_support::assert_ok!(crate::Pallet::<Test>::post_job(
                    frame_system::RawOrigin::Signed(1).into(),
                    alloc::boxed::Box::new(example_spec()),
                    budget,
                    5,
                    21,
                ));
            }
            let jobs: Vec<_> = Jobs::<Test>::iter().collect();
            assert_eq!(jobs.len(), 3);
            for (id, job) in &jobs {
                unhashed::put_raw(&Jobs::<Test>::hashed_key_for(id), &as_stored_by_v1(job));
                assert!(Jobs::<Test>::get(id).is_none(), "v1 bytes do not read as v2");
            }
            StorageVersion::new(0).put::<Pallet<Test>>();

            SpecV2::<Test>::on_runtime_upgrade();

            assert_eq!(Pallet::<Test>::on_chain_storage_version(), 1);
            assert_eq!(Jobs::<Test>::count(), 3);
            for (id, job) in jobs {
                assert_eq!(Jobs::<Test>::get(id), Some(job), "job {id} upgraded unchanged");
            }
            // Run again (version 1 now): nothing to do, nothing touched.
            SpecV2::<Test>::on_runtime_upgrade();
            assert_eq!(Jobs::<Test>::count(), 3);
        });
    }

    #[test]
    fn bytes_that_are_not_a_v1_job_are_left_alone() {
        new_test_ext().execute_with(|| {
            assert_eq!(upgrade_job::<Test>(&[1, 2, 3]), None);
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
}
