//! Obligation collateral: part of a trainer's active bond frozen for a duty until the duty settles.
//!
//! Assigning a trainer to a job, drawing a verifier and drawing a drilling executor each freeze
//! collateral ([`Obligations::obligate`]). `unbond` cannot take the active bond below what is
//! obligated, so a trainer cannot walk away from a duty by unbonding, and every protocol slash is a
//! share of the obligation's collateral ([`Obligations::slash_obligation`]), never of whatever
//! happens to be active when the slash lands.
//!
//! The attack this stops: before obligations, a job-market or drilling slash was a share of the
//! *active* bond, so `unbond(all)` right after taking a duty made every such slash zero, and
//! `rebond` restored the stake afterwards.

use frame_support::{pallet_prelude::*, traits::Get};
use sp_runtime::{traits::Zero, Perbill, Saturating};

use crate::{BalanceOf, Config, Error, Event, Ledgers, ObligationsOf, Pallet, SlashReason};

pub use ergon_protocol::traits::{Obligation, Obligations};

impl<T: Config> Obligations<T::AccountId> for Pallet<T> {
    type Balance = BalanceOf<T>;

    fn free_collateral(who: &T::AccountId) -> BalanceOf<T> {
        Ledgers::<T>::get(who).map(|l| l.free_active()).unwrap_or_default()
    }

    fn obligate(who: &T::AccountId, what: Obligation, amount: BalanceOf<T>) -> DispatchResult {
        ensure!(!ObligationsOf::<T>::contains_key(who, what), Error::<T>::AlreadyObligated);
        let mut ledger = Ledgers::<T>::get(who).ok_or(Error::<T>::NotBonded)?;
        ensure!(ledger.free_active() >= amount, Error::<T>::InsufficientCollateral);
        ensure!(ledger.obligations < T::MaxObligations::get(), Error::<T>::TooManyObligations);
        ledger.obligated = ledger.obligated.saturating_add(amount);
        ledger.obligations.saturating_inc();
        Ledgers::<T>::insert(who, ledger);
        ObligationsOf::<T>::insert(who, what, amount);
        Pallet::<T>::deposit_event(Event::Obligated { who: who.clone(), what, amount });
        Ok(())
    }

    fn release(who: &T::AccountId, what: Obligation) -> BalanceOf<T> {
        let Some(amount) = ObligationsOf::<T>::take(who, what) else { return Zero::zero() };
        if let Some(mut ledger) = Ledgers::<T>::get(who) {
            ledger.obligated = ledger.obligated.saturating_sub(amount);
            ledger.obligations.saturating_dec();
            // A ledger slashed to nothing was kept only for this obligation.
            Pallet::<T>::put_ledger(who, ledger);
        }
        Pallet::<T>::deposit_event(Event::ObligationReleased { who: who.clone(), what, amount });
        amount
    }

    fn slash_obligation(
        who: &T::AccountId,
        what: Obligation,
        share: Perbill,
        reason: SlashReason,
    ) -> BalanceOf<T> {
        let collateral = <Self as Obligations<_>>::release(who, what);
        if collateral.is_zero() {
            return Zero::zero();
        }
        Pallet::<T>::do_slash(who, share.mul_floor(collateral), reason)
    }

    fn slash_obligation_to(
        who: &T::AccountId,
        what: Obligation,
        share: Perbill,
        reason: SlashReason,
        beneficiaries: &[T::AccountId],
    ) -> BalanceOf<T> {
        let (slashed, credit) = Pallet::<T>::slash_collateral(who, what, share, reason);
        Pallet::<T>::pay_out(who, credit, beneficiaries);
        slashed
    }

    fn slash_obligation_compensating(
        who: &T::AccountId,
        what: Obligation,
        share: Perbill,
        reason: SlashReason,
        wronged: &T::AccountId,
        up_to: BalanceOf<T>,
    ) -> BalanceOf<T> {
        use frame_support::traits::{Imbalance, OnUnbalanced};
        let (slashed, credit) = Pallet::<T>::slash_collateral(who, what, share, reason);
        let (compensation, rest) = credit.split(up_to);
        Pallet::<T>::pay_out(who, compensation, core::slice::from_ref(wronged));
        T::Slashed::on_unbalanced(rest);
        slashed
    }

    fn collateral(who: &T::AccountId, what: Obligation) -> BalanceOf<T> {
        ObligationsOf::<T>::get(who, what).unwrap_or_default()
    }
}

impl<T: Config> Pallet<T> {
    /// Ends obligation `what` of `who` and takes `share` of its collateral out of the bond for
    /// `reason` (announced with `Slashed`); returns what was taken and its imbalance, for the caller
    /// to place.
    fn slash_collateral(
        who: &T::AccountId,
        what: Obligation,
        share: Perbill,
        reason: SlashReason,
    ) -> (BalanceOf<T>, crate::CreditOf<T>) {
        let collateral = <Self as Obligations<_>>::release(who, what);
        let (slashed, credit) = Self::take_slash(who, share.mul_floor(collateral));
        if !slashed.is_zero() {
            Self::deposit_event(Event::Slashed { who: who.clone(), amount: slashed, reason });
        }
        (slashed, credit)
    }

    /// A slash reached the obligated part of `who`'s bond (only an equivocation slash larger than the
    /// free bond and the unlocking chunks can): shrinks its obligations, first ones first, by
    /// `taken` in total, so that their sum stays the ledger's `obligated`.
    pub(crate) fn shrink_obligations(who: &T::AccountId, mut taken: BalanceOf<T>) {
        let entries: alloc::vec::Vec<_> = ObligationsOf::<T>::iter_prefix(who).collect();
        for (what, amount) in entries {
            if taken.is_zero() {
                break;
            }
            let cut = taken.min(amount);
            taken = taken.saturating_sub(cut);
            ObligationsOf::<T>::insert(who, what, amount.saturating_sub(cut));
        }
    }
}
