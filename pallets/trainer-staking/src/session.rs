//! The session manager: which trainers validate the next session.
//!
//! Candidates are the trainers whose active bond reaches `MinBond` and whose ECP reaches
//! `MinAuthorityEcp`, who registered session keys and are not suspended (equivocation,
//! unresponsiveness). They are ordered by their [`seat_score`], √(bond · ECP) (highest first, ties by
//! account so every node computes the same order), and cut at `MaxAuthorities`: a seat takes both
//! stake and verified work, and neither alone buys it. The runtime then weighs BABE's lottery by ECP
//! (Proof of Hashrate) and GRANDPA's votes by bond. If no one qualifies, `None` keeps the current set:
//! announcing an empty set would halt the chain for good.
//!
//! The attack the ECP floor stops: bonded accounts without any work (sybils) filling seats. With
//! 1-weight BABE shares and equal GRANDPA votes, three such seats beside four validators took 75 % of
//! the BABE weight and halted finality (issue 34).

use alloc::vec::Vec;
use frame_support::traits::{Get, ValidatorRegistration};
use pallet_compute_power::{ComputePowerLedger, MicroUt};
use sp_staking::SessionIndex;

use sp_runtime::traits::{IntegerSquareRoot, UniqueSaturatedInto};

use crate::{Config, CurrentSession, Event, Ledgers, OffenceSlashes, Pallet, SuspendedUntil};

/// Prunes the historical session data (pallet-session's `historical`) that key-ownership proofs of
/// old offences are checked against.
pub trait PruneSessionHistory {
    /// Drops the history of the sessions before `up_to`.
    fn prune_up_to(up_to: SessionIndex);
}

impl PruneSessionHistory for () {
    fn prune_up_to(_up_to: SessionIndex) {}
}

/// Disables a validator of the current session (pallet-session's `report_offence`, which asks the
/// runtime's disabling strategy). A disabled BABE authority's blocks are invalid.
pub trait DisableValidator<AccountId> {
    /// Disables `who` for the rest of the session, for an offence of `severity`.
    fn disable(who: &AccountId, severity: sp_runtime::Perbill);
}

impl<AccountId> DisableValidator<AccountId> for () {
    fn disable(_who: &AccountId, _severity: sp_runtime::Perbill) {}
}

/// How a candidate ranks for a seat: the geometric mean √(bond · ECP) of its active bond (plancks)
/// and its ECP (micro-ut). Doubling either raises it by √2; a seat cannot be bought with one alone
/// while the other is near zero.
pub fn seat_score(bond: u128, ecp: MicroUt) -> u128 {
    bond.saturating_mul(ecp).integer_sqrt()
}

impl<T: Config> Pallet<T> {
    /// The next authority set: eligible, registered, unsuspended trainers with at least
    /// `MinAuthorityEcp`, highest [`seat_score`] first, at most `MaxAuthorities`. May be empty.
    pub fn select_authorities(session: SessionIndex) -> Vec<T::AccountId> {
        let min_ecp = T::MinAuthorityEcp::get();
        let mut candidates: Vec<(u128, T::AccountId)> = Ledgers::<T>::iter()
            .filter(|(_, ledger)| Self::is_eligible_bond(ledger.active))
            .filter(|(who, _)| T::ValidatorRegistration::is_registered(who))
            .filter(|(who, _)| SuspendedUntil::<T>::get(who).is_none_or(|until| session >= until))
            .filter_map(|(who, ledger)| {
                let ecp = T::ComputePower::ecp(&who);
                (ecp >= min_ecp)
                    .then(|| (seat_score(ledger.active.unique_saturated_into(), ecp), who))
            })
            .collect();
        // Highest score first; equal scores by account, so the order does not depend on storage
        // layout.
        candidates
            .sort_by(|(score_a, a), (score_b, b)| score_b.cmp(score_a).then_with(|| a.cmp(b)));
        candidates.truncate(T::MaxAuthorities::get() as usize);
        candidates.into_iter().map(|(_, who)| who).collect()
    }

    fn plan_session(session: SessionIndex) -> Option<Vec<T::AccountId>> {
        let authorities = Self::select_authorities(session);
        if authorities.is_empty() {
            log::warn!(
                target: crate::LOG_TARGET,
                "no eligible trainer for session {session}: keeping the current authority set"
            );
            return None;
        }
        Self::deposit_event(Event::AuthoritiesSelected {
            session,
            authorities: authorities.len() as u32,
        });
        Some(authorities)
    }
}

impl<T: Config> pallet_session::SessionManager<T::AccountId> for Pallet<T> {
    fn new_session(new_index: SessionIndex) -> Option<Vec<T::AccountId>> {
        Self::plan_session(new_index)
    }

    fn start_session(start_index: SessionIndex) {
        CurrentSession::<T>::put(start_index);
        // Suspensions that are over are forgotten (at most the equivocators of the last
        // `SuspensionSessions` sessions are stored).
        let expired: Vec<T::AccountId> = SuspendedUntil::<T>::iter()
            .filter(|(_, until)| *until <= start_index)
            .map(|(who, _)| who)
            .collect();
        for who in expired {
            SuspendedUntil::<T>::remove(who);
        }
        // Forget what is older than the history depth: offences that old are refused anyway.
        if let Some(expired) = start_index.checked_sub(T::HistoryDepth::get().saturating_add(1)) {
            let _ = OffenceSlashes::<T>::clear_prefix(expired, u32::MAX, None);
            T::SessionHistory::prune_up_to(expired.saturating_add(1));
        }
    }

    fn end_session(_end_index: SessionIndex) {}
}

/// The same, for pallet-session's `historical` wrapper (`NoteHistoricalRoot`), which records each
/// session's validators so that equivocation reports can prove key ownership. Validators carry no
/// extra identification: the offence handler reads the bond at slashing time.
impl<T: Config> pallet_session::historical::SessionManager<T::AccountId, ()> for Pallet<T> {
    fn new_session(new_index: SessionIndex) -> Option<Vec<(T::AccountId, ())>> {
        Self::plan_session(new_index).map(|set| set.into_iter().map(|who| (who, ())).collect())
    }

    fn start_session(start_index: SessionIndex) {
        <Self as pallet_session::SessionManager<_>>::start_session(start_index)
    }

    fn end_session(end_index: SessionIndex) {
        <Self as pallet_session::SessionManager<_>>::end_session(end_index)
    }
}

/// pallet-session-historical's `FullIdentificationOf`: every validator is identified by `()`.
pub struct UnitIdentification;

impl<AccountId> sp_runtime::traits::Convert<AccountId, Option<()>> for UnitIdentification {
    fn convert(_who: AccountId) -> Option<()> {
        Some(())
    }
}
