//! # Trainer-staking pallet
//!
//! Trainers put stake behind their work. This pallet (Ergon's own, not FRAME's NPoS pallet-staking)
//! keeps that stake and everything that hangs on it:
//!
//! - **Bonds**: [`Pallet::bond`] holds balance under [`HoldReason::Bonded`]; [`Pallet::unbond`] starts
//!   the `UnbondingPeriod`, [`Pallet::rebond`] takes unbonding stake back, [`Pallet::withdraw_unbonded`]
//!   releases what has matured. An active bond of at least `MinBond` makes a trainer eligible to author,
//!   bid, verify and drill ([`BondInspect`]).
//! - **Obligations** ([`obligations`]): a duty (an assigned job, a verification, a drilling task) freezes
//!   collateral out of the active bond until it settles; `unbond` cannot go below it, and the pallets
//!   that judge work slash a share of that collateral ([`Obligations`]), so unbonding never dodges a
//!   slash.
//! - **Slashing**: other pallets slash through [`Slashing`] with a [`SlashReason`]; a slash is bounded
//!   by the bond (free active first, then unlocking chunks, then obligated stake), goes to `Slashed`
//!   (treasury or burn) and emits [`Event::Slashed`]. BABE and GRANDPA equivocations reach [`Pallet`]
//!   through pallet-offences ([`slashing`]): the offender is slashed at least `MinEquivocationSlash`
//!   of its bond at the first report, disabled at once (`Disabler`: it stops authoring in the current
//!   session) and left out of the authority set for `SuspensionSessions` sessions.
//! - **Authority set**: as the session manager ([`session`]), it picks the next validators: bonded,
//!   eligible trainers with session keys and at least `MinAuthorityEcp`, ordered by their seat score
//!   √(bond · ECP), at most `MaxAuthorities`. It never hands pallet-session an empty set (the
//!   current one stays).
//! - **Liveness** ([`liveness`]): a validator that held its seat a whole session without authoring a
//!   block or sending a heartbeat (pallet-im-online's report) is slashed at least
//!   `UnresponsiveSlash` of its bond and suspended for `UnresponsiveSuspension` sessions.
//! - **Rewards** ([`rewards`]): a fixed `BlockReward` minted to each block's author, and
//!   [`rewards::FeesToAuthor`] to pay transaction fees to the author.
//!
//! Invariants (checked by `try_state`): for every trainer the balance held under `Bonded` equals the
//! ledger's total, its obligations sum to the ledger's `obligated`, which never exceeds its active
//! bond, and [`TotalBonded`] is the sum of the totals.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod ledger;
pub mod liveness;
pub mod obligations;
pub mod rewards;
pub mod session;
pub mod slashing;
pub mod weights;

#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

pub use ledger::{Ledger, UnlockChunk};
pub use liveness::ReportUnresponsive;
pub use obligations::{Obligation, Obligations};
pub use pallet::*;
pub use session::{seat_score, DisableValidator, PruneSessionHistory};
pub use slashing::{BondInspect, SlashReason, Slashing};
pub use weights::WeightInfo;

use frame_support::traits::fungible;
use frame_system::pallet_prelude::BlockNumberFor;

/// Balance type of the currency the bonds are held in.
pub type BalanceOf<T> =
    <<T as Config>::Currency as fungible::Inspect<<T as frame_system::Config>::AccountId>>::Balance;

/// A slashed or minted amount not yet placed in an account.
pub type CreditOf<T> =
    fungible::Credit<<T as frame_system::Config>::AccountId, <T as Config>::Currency>;

/// A trainer's ledger as stored.
pub type LedgerOf<T> = Ledger<BalanceOf<T>, BlockNumberFor<T>, <T as Config>::MaxUnlockingChunks>;

const LOG_TARGET: &str = "runtime::trainer-staking";

pub use ergon_protocol::traits::BenchmarkTrainers;

/// Trainer staking makes trainers by funding them and bonding `MinBond`.
#[cfg(feature = "runtime-benchmarks")]
impl<T: Config> BenchmarkTrainers<T::AccountId> for Pallet<T> {
    fn make_trainer(who: &T::AccountId) {
        use frame_support::traits::{fungible::Mutate, Get};
        use sp_runtime::Saturating;
        // A thousand times the minimum, so the trainer can put up any benchmark job's collateral.
        let bond = T::MinBond::get().max(1u32.into()).saturating_mul(1_000u32.into());
        let _ = T::Currency::set_balance(who, bond.saturating_mul(100u32.into()));
        if let Err(e) = Pallet::<T>::do_bond(who, bond) {
            log::error!(target: LOG_TARGET, "benchmark trainer cannot bond: {e:?}");
        }
    }
}

#[frame_support::pallet]
pub mod pallet {
    use super::*;
    use frame_support::{
        pallet_prelude::*,
        traits::{
            fungible::{InspectHold, MutateHold},
            tokens::Precision,
            OnUnbalanced, ValidatorRegistration,
        },
    };
    use frame_system::pallet_prelude::*;
    use pallet_compute_power::ComputePowerLedger;
    use sp_runtime::{traits::Zero, Perbill, Saturating};
    use sp_staking::SessionIndex;

    #[pallet::pallet]
    pub struct Pallet<T>(_);

    /// Why this pallet holds balance.
    #[pallet::composite_enum]
    pub enum HoldReason {
        /// A trainer's bond (active and unlocking).
        Bonded,
    }

    #[pallet::config]
    pub trait Config: frame_system::Config<RuntimeEvent: From<Event<Self>>> {
        /// The currency bonds are held in, slashed from and rewards minted in.
        type Currency: fungible::Inspect<Self::AccountId>
            + fungible::Mutate<Self::AccountId>
            + fungible::InspectHold<Self::AccountId, Reason = Self::RuntimeHoldReason>
            + fungible::MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>
            + fungible::BalancedHold<Self::AccountId>;

        /// The runtime's hold reasons, of which [`HoldReason`] is a part.
        type RuntimeHoldReason: From<HoldReason>;

        /// Effective computing power, which orders the authority candidates.
        type ComputePower: ComputePowerLedger<Self::AccountId>;

        /// Whether an account has session keys (pallet-session).
        type ValidatorRegistration: ValidatorRegistration<Self::AccountId>;

        /// Where slashed stake goes: a treasury account (`ResolveTo`) or `()` to burn it.
        type Slashed: OnUnbalanced<CreditOf<Self>>;

        /// Smallest active bond that makes a trainer eligible (and smallest non-zero active bond).
        #[pallet::constant]
        type MinBond: Get<BalanceOf<Self>>;

        /// Blocks between unbonding and withdrawing. Must exceed the time an offence can be reported
        /// (`HistoryDepth` sessions), so misbehaviour stays slashable until the stake leaves.
        #[pallet::constant]
        type UnbondingPeriod: Get<BlockNumberFor<Self>>;

        /// Unlocking chunks a ledger may have at once.
        #[pallet::constant]
        type MaxUnlockingChunks: Get<u32>;

        /// Most trainers with a bond; bounds the work of choosing the authority set.
        #[pallet::constant]
        type MaxBonders: Get<u32>;

        /// Most authorities in a session (BABE's and GRANDPA's `MaxAuthorities`).
        #[pallet::constant]
        type MaxAuthorities: Get<u32>;

        /// Least fraction of the bond an equivocation costs, whatever pallet-offences computes.
        #[pallet::constant]
        type MinEquivocationSlash: Get<Perbill>;

        /// Sessions an equivocator is left out of the authority set.
        #[pallet::constant]
        type SuspensionSessions: Get<SessionIndex>;

        /// Least ECP for an authority seat: a seat is earned with verified work as well as stake,
        /// so bonded accounts that never trained or drilled (sybils) get none.
        #[pallet::constant]
        type MinAuthorityEcp: Get<pallet_compute_power::MicroUt>;

        /// Least fraction of the bond a session held without validating costs (neither a block nor
        /// a heartbeat, as pallet-im-online reports it), whatever im-online's own formula gives.
        #[pallet::constant]
        type UnresponsiveSlash: Get<Perbill>;

        /// Sessions an unresponsive validator is left out of the authority set (counted like
        /// `SuspensionSessions`, from the session after the one it missed).
        #[pallet::constant]
        type UnresponsiveSuspension: Get<SessionIndex>;

        /// Disables an equivocating validator for the rest of the session (pallet-session's
        /// disabling strategy): it stops authoring at once, not only from the next set on.
        type Disabler: DisableValidator<Self::AccountId>;

        /// Most open obligations of one trainer.
        #[pallet::constant]
        type MaxObligations: Get<u32>;

        /// Sessions back for which offences are accepted and session history is kept.
        #[pallet::constant]
        type HistoryDepth: Get<SessionIndex>;

        /// Prunes the historical session roots (pallet-session's `historical`) older than
        /// `HistoryDepth`.
        type SessionHistory: PruneSessionHistory;

        /// Minted to the author of every block.
        #[pallet::constant]
        type BlockReward: Get<BalanceOf<Self>>;

        /// Weights of this pallet's calls.
        type WeightInfo: WeightInfo;
    }

    /// Each trainer's bond.
    #[pallet::storage]
    pub type Ledgers<T: Config> =
        CountedStorageMap<_, Blake2_128Concat, T::AccountId, LedgerOf<T>, OptionQuery>;

    /// Sum of all ledgers' totals (all balance held under [`HoldReason::Bonded`]).
    #[pallet::storage]
    pub type TotalBonded<T: Config> = StorageValue<_, BalanceOf<T>, ValueQuery>;

    /// Collateral each trainer has frozen per open obligation (their sum is the ledger's
    /// `obligated`).
    #[pallet::storage]
    pub type ObligationsOf<T: Config> = StorageDoubleMap<
        _,
        Blake2_128Concat,
        T::AccountId,
        Twox64Concat,
        Obligation,
        BalanceOf<T>,
        OptionQuery,
    >;

    /// Equivocators left out of authority selection until (excluding) this session; removed once
    /// that session starts.
    #[pallet::storage]
    pub type SuspendedUntil<T: Config> =
        StorageMap<_, Blake2_128Concat, T::AccountId, SessionIndex, OptionQuery>;

    /// Largest equivocation slash fraction already applied per (offence session, offender), and the
    /// bond it is a fraction of (the bond at the first report): a later report for the same session
    /// only slashes the difference, of the same base, not of the bond the first slash shrank.
    #[pallet::storage]
    pub type OffenceSlashes<T: Config> = StorageDoubleMap<
        _,
        Twox64Concat,
        SessionIndex,
        Blake2_128Concat,
        T::AccountId,
        (Perbill, BalanceOf<T>),
        OptionQuery,
    >;

    /// The session that started last (as told by pallet-session).
    #[pallet::storage]
    pub type CurrentSession<T: Config> = StorageValue<_, SessionIndex, ValueQuery>;

    #[pallet::event]
    #[pallet::generate_deposit(pub(crate) fn deposit_event)]
    pub enum Event<T: Config> {
        /// `amount` more was bonded by `who`.
        Bonded { who: T::AccountId, amount: BalanceOf<T> },
        /// `amount` started unbonding; it can be withdrawn from block `unlocks_at`.
        Unbonded { who: T::AccountId, amount: BalanceOf<T>, unlocks_at: BlockNumberFor<T> },
        /// `amount` was moved back from unbonding into the active bond.
        Rebonded { who: T::AccountId, amount: BalanceOf<T> },
        /// `amount` of matured unbonding stake was released.
        Withdrawn { who: T::AccountId, amount: BalanceOf<T> },
        /// `amount` of `who`'s bond was slashed for `reason`.
        Slashed { who: T::AccountId, amount: BalanceOf<T>, reason: SlashReason },
        /// `amount` slashed from `from` was paid to `to`, whom the slash proved right.
        SlashPaidOut { from: T::AccountId, to: T::AccountId, amount: BalanceOf<T> },
        /// `who` is left out of the authority set until (excluding) session `until`.
        Suspended { who: T::AccountId, until: SessionIndex },
        /// The authority set for `session` was chosen: `authorities` trainers.
        AuthoritiesSelected { session: SessionIndex, authorities: u32 },
        /// `author` was minted `amount` for authoring a block.
        BlockRewarded { author: T::AccountId, amount: BalanceOf<T> },
        /// `amount` of `who`'s active bond is frozen as collateral for `what`.
        Obligated { who: T::AccountId, what: Obligation, amount: BalanceOf<T> },
        /// The collateral `who` held for `what` is free again (the duty settled).
        ObligationReleased { who: T::AccountId, what: Obligation, amount: BalanceOf<T> },
    }

    #[pallet::error]
    pub enum Error<T> {
        /// The amount is zero.
        ZeroAmount,
        /// The active bond would end below `MinBond` without being zero.
        BelowMinimumBond,
        /// The free balance cannot cover the bond.
        InsufficientBalance,
        /// The account has no bond.
        NotBonded,
        /// More is to be unbonded than is actively bonded.
        InsufficientBond,
        /// That much of the active bond is collateral for open duties (jobs, verifications, drilling
        /// tasks): it can be unbonded once they settle.
        BondObligated,
        /// The active bond not already obligated cannot cover this duty's collateral.
        InsufficientCollateral,
        /// The trainer has `MaxObligations` open duties already.
        TooManyObligations,
        /// This duty is obligated already.
        AlreadyObligated,
        /// Every unlocking slot is taken; withdraw or rebond first.
        TooManyUnlockingChunks,
        /// Nothing is unbonding.
        NothingToRebond,
        /// No unbonding stake has matured yet.
        NothingToWithdraw,
        /// `MaxBonders` trainers already have a bond.
        TooManyBonders,
    }

    /// Trainers bonded at genesis (test networks): `(account, amount)`. Each needs the free balance.
    #[pallet::genesis_config]
    #[derive(frame_support::DefaultNoBound)]
    pub struct GenesisConfig<T: Config> {
        /// Bonds to hold at genesis.
        pub stakers: alloc::vec::Vec<(T::AccountId, BalanceOf<T>)>,
    }

    #[pallet::genesis_build]
    impl<T: Config> BuildGenesisConfig for GenesisConfig<T> {
        fn build(&self) {
            for (who, amount) in &self.stakers {
                if let Err(e) = Pallet::<T>::do_bond(who, *amount) {
                    panic!("genesis bond of {who:?} ({amount:?}) failed: {e:?}");
                }
            }
        }
    }

    #[pallet::hooks]
    impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
        #[cfg(feature = "try-runtime")]
        fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
            Self::do_try_state()
        }
    }

    #[pallet::call]
    impl<T: Config> Pallet<T> {
        /// Bonds `amount` more of the caller's free balance. The active bond must reach `MinBond`.
        #[pallet::call_index(0)]
        #[pallet::weight(T::WeightInfo::bond())]
        pub fn bond(
            origin: OriginFor<T>,
            #[pallet::compact] amount: BalanceOf<T>,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            Self::do_bond(&who, amount)
        }

        /// Starts unbonding `amount` of the active bond. What stays active must be zero or at least
        /// `MinBond`. The amount can be withdrawn after `UnbondingPeriod` blocks and stays
        /// slashable until then.
        #[pallet::call_index(1)]
        #[pallet::weight(T::WeightInfo::unbond())]
        pub fn unbond(
            origin: OriginFor<T>,
            #[pallet::compact] amount: BalanceOf<T>,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            ensure!(!amount.is_zero(), Error::<T>::ZeroAmount);
            let mut ledger = Ledgers::<T>::get(&who).ok_or(Error::<T>::NotBonded)?;
            ensure!(amount <= ledger.active, Error::<T>::InsufficientBond);
            ensure!(amount <= ledger.free_active(), Error::<T>::BondObligated);
            let remaining = ledger.active - amount;
            ensure!(
                remaining.is_zero() || remaining >= T::MinBond::get(),
                Error::<T>::BelowMinimumBond
            );
            let unlocks_at =
                frame_system::Pallet::<T>::block_number().saturating_add(T::UnbondingPeriod::get());
            ledger.unbond(amount, unlocks_at).map_err(|e| match e {
                ledger::LedgerError::InsufficientActive => Error::<T>::BondObligated,
                ledger::LedgerError::TooManyChunks => Error::<T>::TooManyUnlockingChunks,
            })?;
            Ledgers::<T>::insert(&who, ledger);
            Self::deposit_event(Event::Unbonded { who, amount, unlocks_at });
            Ok(())
        }

        /// Moves up to `amount` of unbonding stake (newest first) back into the active bond.
        #[pallet::call_index(2)]
        #[pallet::weight(T::WeightInfo::rebond())]
        pub fn rebond(
            origin: OriginFor<T>,
            #[pallet::compact] amount: BalanceOf<T>,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            ensure!(!amount.is_zero(), Error::<T>::ZeroAmount);
            let mut ledger = Ledgers::<T>::get(&who).ok_or(Error::<T>::NotBonded)?;
            ensure!(!ledger.unlocking.is_empty(), Error::<T>::NothingToRebond);
            let moved = ledger.rebond(amount);
            ensure!(ledger.active >= T::MinBond::get(), Error::<T>::BelowMinimumBond);
            Ledgers::<T>::insert(&who, ledger);
            Self::deposit_event(Event::Rebonded { who, amount: moved });
            Ok(())
        }

        /// Releases every unbonding chunk whose period is over. A ledger left empty is removed.
        #[pallet::call_index(3)]
        #[pallet::weight(T::WeightInfo::withdraw_unbonded())]
        pub fn withdraw_unbonded(origin: OriginFor<T>) -> DispatchResult {
            let who = ensure_signed(origin)?;
            let mut ledger = Ledgers::<T>::get(&who).ok_or(Error::<T>::NotBonded)?;
            let freed = ledger.withdraw_unlocked(frame_system::Pallet::<T>::block_number());
            ensure!(!freed.is_zero(), Error::<T>::NothingToWithdraw);
            T::Currency::release(&HoldReason::Bonded.into(), &who, freed, Precision::Exact)?;
            TotalBonded::<T>::mutate(|total| *total = total.saturating_sub(freed));
            Self::put_ledger(&who, ledger);
            Self::deposit_event(Event::Withdrawn { who, amount: freed });
            Ok(())
        }
    }

    impl<T: Config> Pallet<T> {
        /// Holds `amount` more for `who` and adds it to the active bond.
        pub(crate) fn do_bond(who: &T::AccountId, amount: BalanceOf<T>) -> DispatchResult {
            ensure!(!amount.is_zero(), Error::<T>::ZeroAmount);
            let existing = Ledgers::<T>::get(who);
            if existing.is_none() {
                ensure!(Ledgers::<T>::count() < T::MaxBonders::get(), Error::<T>::TooManyBonders);
            }
            let mut ledger = existing.unwrap_or_else(|| LedgerOf::<T>::new(Zero::zero()));
            ledger.active = ledger.active.saturating_add(amount);
            ensure!(ledger.active >= T::MinBond::get(), Error::<T>::BelowMinimumBond);
            let reason = HoldReason::Bonded.into();
            ensure!(T::Currency::can_hold(&reason, who, amount), Error::<T>::InsufficientBalance);
            T::Currency::hold(&reason, who, amount)?;
            TotalBonded::<T>::mutate(|total| *total = total.saturating_add(amount));
            Ledgers::<T>::insert(who, ledger);
            Self::deposit_event(Event::Bonded { who: who.clone(), amount });
            Ok(())
        }

        /// Slashes up to `amount` of `who`'s bond; see [`Slashing::slash`].
        pub(crate) fn do_slash(
            who: &T::AccountId,
            amount: BalanceOf<T>,
            reason: SlashReason,
        ) -> BalanceOf<T> {
            let (slashed, credit) = Self::take_slash(who, amount);
            T::Slashed::on_unbalanced(credit);
            if !slashed.is_zero() {
                Self::deposit_event(Event::Slashed { who: who.clone(), amount: slashed, reason });
            }
            slashed
        }

        /// Takes up to `amount` of `who`'s bond out of the hold and the ledger and returns what was
        /// taken with its imbalance, for the caller to place (and announce).
        pub(crate) fn take_slash(
            who: &T::AccountId,
            amount: BalanceOf<T>,
        ) -> (BalanceOf<T>, CreditOf<T>) {
            let Some(mut ledger) = Ledgers::<T>::get(who) else {
                return (Zero::zero(), frame_support::traits::Imbalance::zero());
            };
            let wanted = amount.min(ledger.total());
            if wanted.is_zero() {
                return (Zero::zero(), frame_support::traits::Imbalance::zero());
            }
            let (credit, _) = <T::Currency as fungible::hold::Balanced<T::AccountId>>::slash(
                &HoldReason::Bonded.into(),
                who,
                wanted,
            );
            let (slashed, from_obligated) =
                ledger.slash(frame_support::traits::Imbalance::peek(&credit));
            if !from_obligated.is_zero() {
                Self::shrink_obligations(who, from_obligated);
            }
            TotalBonded::<T>::mutate(|total| *total = total.saturating_sub(slashed));
            Self::put_ledger(who, ledger);
            (slashed, credit)
        }

        /// Pays `credit` (slashed stake) to `to` in equal parts; what cannot be paid (rounding, or an
        /// account that cannot receive it) goes where every slash goes.
        pub(crate) fn pay_out(from: &T::AccountId, mut credit: CreditOf<T>, to: &[T::AccountId]) {
            use frame_support::traits::{fungible::Balanced, Imbalance};
            for (i, beneficiary) in to.iter().enumerate() {
                let left = (to.len() - i) as u32;
                let part = credit.peek() / left.into();
                let (share, rest) = credit.split(part);
                credit = rest;
                let amount = share.peek();
                if amount.is_zero() {
                    continue;
                }
                match T::Currency::resolve(beneficiary, share) {
                    Ok(()) => Self::deposit_event(Event::SlashPaidOut {
                        from: from.clone(),
                        to: beneficiary.clone(),
                        amount,
                    }),
                    Err(unpaid) => credit = credit.merge(unpaid),
                }
            }
            T::Slashed::on_unbalanced(credit);
        }

        /// Stores `ledger`, or removes it once nothing is left in it.
        pub(crate) fn put_ledger(who: &T::AccountId, ledger: LedgerOf<T>) {
            if ledger.is_empty() {
                Ledgers::<T>::remove(who);
            } else {
                Ledgers::<T>::insert(who, ledger);
            }
        }

        /// Whether an active bond makes a trainer eligible: non-zero and at least `MinBond`.
        pub(crate) fn is_eligible_bond(active: BalanceOf<T>) -> bool {
            !active.is_zero() && active >= T::MinBond::get()
        }

        /// Active bond of `who` (zero if none).
        pub fn active_bond(who: &T::AccountId) -> BalanceOf<T> {
            Ledgers::<T>::get(who).map(|l| l.active).unwrap_or_default()
        }

        /// Held == ledger total for every trainer, its obligations sum to `obligated` ≤ active, and
        /// [`TotalBonded`] == Σ ledger totals. Reads every ledger: for `try_state` and tests, never on
        /// a block path.
        pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
            let mut sum = BalanceOf::<T>::zero();
            let mut count = 0u32;
            for (who, ledger) in Ledgers::<T>::iter() {
                let held = T::Currency::balance_on_hold(&HoldReason::Bonded.into(), &who);
                ensure!(held == ledger.total(), "held balance differs from the ledger total");
                ensure!(!ledger.is_empty(), "an empty ledger is stored");
                ensure!(ledger.obligated <= ledger.active, "more is obligated than is active");
                let (obligated, open) = ObligationsOf::<T>::iter_prefix_values(&who)
                    .fold((BalanceOf::<T>::zero(), 0u32), |(sum, n), a| {
                        (sum.saturating_add(a), n + 1)
                    });
                ensure!(obligated == ledger.obligated, "obligations differ from the ledger's sum");
                ensure!(open == ledger.obligations, "obligation count differs from the ledger");
                sum = sum.saturating_add(ledger.total());
                count += 1;
            }
            ensure!(sum == TotalBonded::<T>::get(), "TotalBonded differs from the sum of ledgers");
            ensure!(count == Ledgers::<T>::count(), "ledger counter is off");
            ensure!(
                ObligationsOf::<T>::iter_keys().all(|(who, _)| Ledgers::<T>::contains_key(&who)),
                "an obligation of an account without a ledger"
            );
            Ok(())
        }
    }
}
