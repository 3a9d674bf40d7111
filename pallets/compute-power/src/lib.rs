//! # Compute-power pallet
//!
//! Keeps each trainer's *effective computing power* (ECP), the quantity that weights block authorship
//! and ranks trainers in the market:
//!
//! - **D**, drilling credit: Σ difficulty of drilling tasks completed with agreement;
//! - **T**, training credit: Σ FLOPs / 432·10⁹ of training jobs that passed Proof of Training;
//! - **ECP = 0.4·D + 0.6·T** (`DrillingWeight`, `TrainingWeight`).
//!
//! All amounts are in micro-ut (10⁻⁶ ut). D and T decay with a half-life of `HalfLife` blocks, applied
//! lazily whenever a record is read or written ([`decay`]); the undecayed lifetime totals are kept for
//! display. Other pallets credit work through [`ComputePowerLedger`]; credit is only ever earned
//! through verified work. The one extrinsic, [`Pallet::prune_credit`], lets anyone remove a record
//! that decayed to nothing, so dead accounts do not stay in storage forever. [`Totals`] keeps the
//! network's D and T, which cap what one job can credit (see the job market).

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod decay;

#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

pub use pallet::*;

use codec::{Decode, Encode, MaxEncodedLen};
use scale_info::TypeInfo;
use sp_runtime::{
    traits::{SaturatedConversion, Saturating},
    Permill,
};

pub use ergon_protocol::traits::{ComputePowerLedger, MicroUt, WorkKind};

/// A trainer's credit as last written. Values are decayed up to `updated_at`.
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen, Default)]
pub struct Credit<BlockNumber> {
    /// Drilling credit D at `updated_at`.
    pub drilling: MicroUt,
    /// Training credit T at `updated_at`.
    pub training: MicroUt,
    /// Block at which the values were last decayed.
    pub updated_at: BlockNumber,
    /// Undecayed lifetime sum of D and T credited ("total computing power value").
    pub lifetime: MicroUt,
}

/// A trainer's computing power as of a given block (decayed).
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, Default)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct ComputePower {
    /// Drilling credit D.
    pub drilling: MicroUt,
    /// Training credit T.
    pub training: MicroUt,
    /// ECP = wD·D + wT·T.
    pub ecp: MicroUt,
    /// Undecayed lifetime total of D and T.
    pub lifetime: MicroUt,
}

#[frame_support::pallet]
pub mod pallet {
    use super::*;
    use frame_support::pallet_prelude::*;
    use frame_system::pallet_prelude::*;

    #[pallet::pallet]
    pub struct Pallet<T>(_);

    #[pallet::config]
    pub trait Config: frame_system::Config<RuntimeEvent: From<Event<Self>>> {
        /// Blocks after which undecayed D and T halve (0 disables decay).
        #[pallet::constant]
        type HalfLife: Get<BlockNumberFor<Self>>;
        /// Weight of D in ECP (0.4).
        #[pallet::constant]
        type DrillingWeight: Get<Permill>;
        /// Weight of T in ECP (0.6).
        #[pallet::constant]
        type TrainingWeight: Get<Permill>;
    }

    /// Each trainer's D and T credit, decayed up to `updated_at`.
    #[pallet::storage]
    pub type Credits<T: Config> =
        StorageMap<_, Blake2_128Concat, T::AccountId, Credit<BlockNumberFor<T>>, OptionQuery>;

    /// Undecayed lifetime sum of all credit ever granted, network-wide.
    #[pallet::storage]
    pub type TotalLifetime<T: Config> = StorageValue<_, MicroUt, ValueQuery>;

    /// Network-wide D and T, decayed like every record (up to `updated_at`): the sum of all
    /// records up to rounding (each decay rounds down on its own).
    #[pallet::storage]
    pub type Totals<T: Config> = StorageValue<_, Credit<BlockNumberFor<T>>, ValueQuery>;

    #[pallet::event]
    #[pallet::generate_deposit(pub(super) fn deposit_event)]
    pub enum Event<T: Config> {
        /// `who` was credited `amount` micro-ut of `kind` work; its ECP is now `ecp`.
        Credited { who: T::AccountId, kind: WorkKind, amount: MicroUt, ecp: MicroUt },
        /// `who`'s record had decayed to zero and was removed.
        CreditPruned { who: T::AccountId },
    }

    #[pallet::error]
    pub enum Error<T> {
        /// The record still has credit (or there is none): nothing to prune.
        NothingToPrune,
    }

    #[pallet::call]
    impl<T: Config> Pallet<T> {
        /// Removes `who`'s credit record if its D and T have decayed to zero (anyone may call).
        #[pallet::call_index(0)]
        #[pallet::weight(T::DbWeight::get().reads_writes(1, 1))]
        pub fn prune_credit(origin: OriginFor<T>, who: T::AccountId) -> DispatchResult {
            ensure_signed(origin)?;
            ensure!(Self::prune(&who), Error::<T>::NothingToPrune);
            Self::deposit_event(Event::CreditPruned { who });
            Ok(())
        }
    }

    /// Initial credit, for test networks (e.g. unequal ECP so authorship weighting shows at once).
    #[pallet::genesis_config]
    #[derive(frame_support::DefaultNoBound)]
    pub struct GenesisConfig<T: Config> {
        /// `(trainer, drilling micro-ut, training micro-ut)`.
        pub trainers: alloc::vec::Vec<(T::AccountId, MicroUt, MicroUt)>,
    }

    #[pallet::genesis_build]
    impl<T: Config> BuildGenesisConfig for GenesisConfig<T> {
        fn build(&self) {
            for (who, drilling, training) in &self.trainers {
                Pallet::<T>::add(who, WorkKind::Drilling, *drilling);
                Pallet::<T>::add(who, WorkKind::Training, *training);
            }
        }
    }

    impl<T: Config> Pallet<T> {
        /// `credit` decayed from its `updated_at` to `now`.
        pub fn decayed(
            credit: &Credit<BlockNumberFor<T>>,
            now: BlockNumberFor<T>,
        ) -> Credit<BlockNumberFor<T>> {
            let elapsed: u64 = now.saturating_sub(credit.updated_at).saturated_into();
            let half_life: u64 = T::HalfLife::get().saturated_into();
            Credit {
                drilling: decay::decay(credit.drilling, elapsed, half_life),
                training: decay::decay(credit.training, elapsed, half_life),
                updated_at: now.max(credit.updated_at),
                lifetime: credit.lifetime,
            }
        }

        /// ECP of decayed D and T: `wD·D + wT·T`, rounded down.
        pub fn ecp_of(drilling: MicroUt, training: MicroUt) -> MicroUt {
            T::DrillingWeight::get()
                .mul_floor(drilling)
                .saturating_add(T::TrainingWeight::get().mul_floor(training))
        }

        /// `who`'s computing power now (decayed, not written back).
        pub fn compute_power(who: &T::AccountId) -> ComputePower {
            let now = frame_system::Pallet::<T>::block_number();
            match Credits::<T>::get(who) {
                None => ComputePower::default(),
                Some(c) => {
                    let d = Self::decayed(&c, now);
                    ComputePower {
                        drilling: d.drilling,
                        training: d.training,
                        ecp: Self::ecp_of(d.drilling, d.training),
                        lifetime: d.lifetime,
                    }
                }
            }
        }

        /// Every trainer with credit and its computing power now, highest ECP first (ties by account),
        /// at most `limit`. Iterates all records: for runtime APIs and off-chain readers, not for
        /// dispatchables.
        pub fn top_trainers(limit: u32) -> alloc::vec::Vec<(T::AccountId, ComputePower)> {
            let mut all: alloc::vec::Vec<_> = Credits::<T>::iter_keys()
                .map(|who| (who.clone(), Self::compute_power(&who)))
                .collect();
            all.sort_by(|a, b| b.1.ecp.cmp(&a.1.ecp).then_with(|| a.0.encode().cmp(&b.0.encode())));
            all.truncate(limit as usize);
            all
        }

        /// Decays `who`'s record to now, adds `amount` of `kind`, writes it back; returns the new ECP.
        fn add(who: &T::AccountId, kind: WorkKind, amount: MicroUt) -> MicroUt {
            let now = frame_system::Pallet::<T>::block_number();
            let mut c = Self::decayed(&Credits::<T>::get(who).unwrap_or_default(), now);
            match kind {
                WorkKind::Drilling => c.drilling = c.drilling.saturating_add(amount),
                WorkKind::Training => c.training = c.training.saturating_add(amount),
            }
            c.lifetime = c.lifetime.saturating_add(amount);
            let ecp = Self::ecp_of(c.drilling, c.training);
            Credits::<T>::insert(who, c);
            TotalLifetime::<T>::mutate(|t| *t = t.saturating_add(amount));
            Totals::<T>::mutate(|total| {
                *total = Self::decayed(total, now);
                match kind {
                    WorkKind::Drilling => total.drilling = total.drilling.saturating_add(amount),
                    WorkKind::Training => total.training = total.training.saturating_add(amount),
                }
            });
            ecp
        }

        /// The network's ECP now (decayed, not written back).
        pub fn total_ecp() -> MicroUt {
            let total =
                Self::decayed(&Totals::<T>::get(), frame_system::Pallet::<T>::block_number());
            Self::ecp_of(total.drilling, total.training)
        }

        /// Removes `who`'s record if its D and T have decayed to zero; returns whether it did.
        /// The lifetime total stays in [`TotalLifetime`].
        pub fn prune(who: &T::AccountId) -> bool {
            let now = frame_system::Pallet::<T>::block_number();
            match Credits::<T>::get(who) {
                Some(c) => {
                    let d = Self::decayed(&c, now);
                    if d.drilling == 0 && d.training == 0 {
                        Credits::<T>::remove(who);
                        return true;
                    }
                    false
                }
                None => false,
            }
        }
    }

    impl<T: Config> ComputePowerLedger<T::AccountId> for Pallet<T> {
        fn credit(who: &T::AccountId, kind: WorkKind, amount: MicroUt) {
            if amount == 0 {
                return;
            }
            let ecp = Self::add(who, kind, amount);
            Self::deposit_event(Event::Credited { who: who.clone(), kind, amount, ecp });
        }

        fn ecp(who: &T::AccountId) -> MicroUt {
            Self::compute_power(who).ecp
        }

        fn total_ecp() -> MicroUt {
            Self::total_ecp()
        }
    }
}
