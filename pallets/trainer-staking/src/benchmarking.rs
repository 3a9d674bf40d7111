//! Benchmarks of the trainer-staking calls (frame-benchmarking v2), each in its worst case.

use super::*;
use frame_benchmarking::v2::*;
use frame_support::traits::{fungible::Mutate, Get};
use frame_system::RawOrigin;
use sp_runtime::traits::{Bounded, Saturating, Zero};

/// A funded account with `bonded` already bonded (if non-zero).
fn trainer<T: Config>(bonded: BalanceOf<T>) -> T::AccountId {
    let who: T::AccountId = account("trainer", 0, 0);
    let _ = T::Currency::set_balance(&who, BalanceOf::<T>::max_value() / 4u32.into());
    if !bonded.is_zero() {
        Pallet::<T>::do_bond(&who, bonded).expect("funded account bonds");
    }
    who
}

/// An amount comfortably above the minimum bond.
fn stake<T: Config>() -> BalanceOf<T> {
    T::MinBond::get().saturating_mul(10u32.into()).max(1_000u32.into())
}

#[benchmarks]
mod benchmarks {
    use super::*;

    #[benchmark]
    fn bond() {
        let who = trainer::<T>(Zero::zero());
        #[extrinsic_call]
        _(RawOrigin::Signed(who.clone()), stake::<T>());
        assert_eq!(Pallet::<T>::active_bond(&who), stake::<T>());
    }

    #[benchmark]
    fn unbond() {
        let who = trainer::<T>(stake::<T>());
        // Fill all but one unlocking slot, at distinct blocks, so the push is the last one allowed.
        for i in 1..T::MaxUnlockingChunks::get() {
            frame_system::Pallet::<T>::set_block_number(i.into());
            Pallet::<T>::unbond(RawOrigin::Signed(who.clone()).into(), 1u32.into())
                .expect("active bond covers it");
        }
        frame_system::Pallet::<T>::set_block_number(T::MaxUnlockingChunks::get().into());
        #[extrinsic_call]
        _(RawOrigin::Signed(who.clone()), 1u32.into());
        assert_eq!(
            Ledgers::<T>::get(&who).map(|l| l.unlocking.len() as u32),
            Some(T::MaxUnlockingChunks::get())
        );
    }

    #[benchmark]
    fn rebond() {
        let who = trainer::<T>(stake::<T>());
        for i in 0..T::MaxUnlockingChunks::get() {
            frame_system::Pallet::<T>::set_block_number(i.into());
            Pallet::<T>::unbond(RawOrigin::Signed(who.clone()).into(), 1u32.into())
                .expect("active bond covers it");
        }
        #[extrinsic_call]
        _(RawOrigin::Signed(who.clone()), BalanceOf::<T>::max_value());
        assert_eq!(Pallet::<T>::active_bond(&who), stake::<T>());
    }

    #[benchmark]
    fn withdraw_unbonded() {
        let who = trainer::<T>(stake::<T>());
        Pallet::<T>::unbond(RawOrigin::Signed(who.clone()).into(), stake::<T>())
            .expect("active bond covers it");
        frame_system::Pallet::<T>::set_block_number(
            frame_system::Pallet::<T>::block_number().saturating_add(T::UnbondingPeriod::get()),
        );
        #[extrinsic_call]
        _(RawOrigin::Signed(who.clone()));
        assert!(Ledgers::<T>::get(&who).is_none());
    }

    impl_benchmark_test_suite!(Pallet, crate::mock::new_test_ext(), crate::mock::Test);
}
