//! Block rewards: a fixed `BlockReward` minted to each block's author (through pallet-authorship's
//! event handler), and [`FeesToAuthor`] to hand transaction fees to the author as well. Block rewards
//! are the only value the chain creates; job payments and verifier fees come out of escrow.

use core::marker::PhantomData;
use frame_support::traits::{
    fungible::{Balanced, Mutate},
    Get, OnUnbalanced,
};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::Zero;

use crate::{Config, CreditOf, Event, Pallet, LOG_TARGET};

impl<T: Config> pallet_authorship::EventHandler<T::AccountId, BlockNumberFor<T>> for Pallet<T> {
    fn note_author(author: T::AccountId) {
        let reward = T::BlockReward::get();
        if reward.is_zero() {
            return;
        }
        match T::Currency::mint_into(&author, reward) {
            Ok(minted) => Self::deposit_event(Event::BlockRewarded { author, amount: minted }),
            // Only possible if the author's account cannot exist (reward below the existential
            // deposit on an empty account) or issuance overflows: the reward is skipped, not forced.
            Err(e) => log::warn!(target: LOG_TARGET, "block reward for {author:?} failed: {e:?}"),
        }
    }
}

/// Transaction-fee handler (`OnUnbalanced` for pallet-transaction-payment's `FungibleAdapter`): pays
/// fees and tips to the current block's author; burns them if there is none.
pub struct FeesToAuthor<T>(PhantomData<T>);

impl<T: Config + pallet_authorship::Config> OnUnbalanced<CreditOf<T>> for FeesToAuthor<T> {
    fn on_nonzero_unbalanced(fees: CreditOf<T>) {
        if let Some(author) = pallet_authorship::Pallet::<T>::author() {
            // A failed deposit (author account unable to exist) drops the credit: the fee is burnt.
            let _ = T::Currency::resolve(&author, fees);
        }
    }
}
