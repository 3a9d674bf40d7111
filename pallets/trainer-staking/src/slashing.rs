//! Slashing: the interface other pallets use, and the offence handler behind BABE and GRANDPA
//! equivocation reports.
//!
//! Equivocations travel the standard path: the node sees two blocks (or votes) signed by one key for
//! one slot (round), submits an unsigned `report_equivocation` with a key-ownership proof against the
//! historical session, pallet-babe/pallet-grandpa check it and hand an offence to pallet-offences,
//! which calls [`OnOffenceHandler::on_offence`] here with the slash fraction it computed.

use frame_support::weights::Weight;
use sp_runtime::{Perbill, Saturating};
use sp_staking::{
    offence::{OffenceDetails, OnOffenceHandler},
    SessionIndex,
};

use crate::{
    session::DisableValidator, BalanceOf, Config, CurrentSession, Ledgers, OffenceSlashes, Pallet,
    LOG_TARGET,
};
use frame_support::traits::Get;

pub use ergon_protocol::traits::{BondInspect, SlashReason, Slashing};

impl<T: Config> BondInspect<T::AccountId> for Pallet<T> {
    type Balance = BalanceOf<T>;

    fn active_bond(who: &T::AccountId) -> BalanceOf<T> {
        Pallet::<T>::active_bond(who)
    }

    fn is_eligible(who: &T::AccountId) -> bool {
        Pallet::<T>::is_eligible_bond(Pallet::<T>::active_bond(who))
    }

    fn eligible_trainers() -> alloc::vec::Vec<(T::AccountId, BalanceOf<T>)> {
        Ledgers::<T>::iter()
            .filter(|(_, ledger)| Pallet::<T>::is_eligible_bond(ledger.active))
            .map(|(who, ledger)| (who, ledger.active))
            .collect()
    }

    fn bonder_count() -> u32 {
        Ledgers::<T>::count()
    }
}

impl<T: Config> Slashing<T::AccountId> for Pallet<T> {
    type Balance = BalanceOf<T>;

    fn slash(who: &T::AccountId, amount: BalanceOf<T>, reason: SlashReason) -> BalanceOf<T> {
        Pallet::<T>::do_slash(who, amount, reason)
    }
}

/// Equivocation offences from pallet-offences. The offender tuple is pallet-session-historical's
/// `(validator id, full identification)`; only the account is used.
impl<T: Config, FullIdentification>
    OnOffenceHandler<T::AccountId, (T::AccountId, FullIdentification), Weight> for Pallet<T>
{
    fn on_offence(
        offenders: &[OffenceDetails<T::AccountId, (T::AccountId, FullIdentification)>],
        slash_fraction: &[Perbill],
        session: SessionIndex,
    ) -> Weight {
        let db = T::DbWeight::get();
        let current = CurrentSession::<T>::get();
        let mut weight = db.reads(1);
        // Older offences than the kept history are refused: their records (and maybe the stake) are
        // gone, and re-applying an old slash would punish twice.
        if session.saturating_add(T::HistoryDepth::get()) < current {
            log::warn!(
                target: LOG_TARGET,
                "offence in session {session} is older than the history depth; ignored"
            );
            return weight;
        }
        for (details, fraction) in offenders.iter().zip(slash_fraction) {
            let who = &details.offender.0;
            let fraction = (*fraction).max(T::MinEquivocationSlash::get());
            let (already, base) = OffenceSlashes::<T>::get(session, who).unwrap_or_else(|| {
                (Perbill::zero(), Ledgers::<T>::get(who).map(|l| l.total()).unwrap_or_default())
            });
            weight = weight.saturating_add(db.reads(2));
            // pallet-offences repeats earlier offenders of the same slot when a new one is reported;
            // only an increase of the fraction is slashed, of the bond at the first report (a
            // repeat report of a shrunken bond would otherwise slash less than the fraction says).
            if fraction <= already {
                continue;
            }
            let amount = fraction.mul_floor(base).saturating_sub(already.mul_floor(base));
            Pallet::<T>::do_slash(who, amount, SlashReason::Equivocation);
            OffenceSlashes::<T>::insert(session, who, (fraction, base));
            let until = current.saturating_add(1).saturating_add(T::SuspensionSessions::get());
            Pallet::<T>::suspend(who, until);
            // Out of the current session's authorship at once, not only from the next set on.
            T::Disabler::disable(who, fraction);
            weight = weight.saturating_add(db.reads_writes(6, 8));
        }
        weight
    }
}
