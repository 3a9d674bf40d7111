//! Seats held without validating: pallet-im-online's unresponsiveness reports.
//!
//! A validator that neither authored a block nor sent a heartbeat during a whole session is reported
//! by pallet-im-online when the session ends ([`ReportUnresponsive`] is its
//! `ReportUnresponsiveness`). The attack it answers: bond the minimum under several accounts, take
//! seats, and never vote, so that GRANDPA's supermajority is out of reach. Each such seat costs at
//! least `UnresponsiveSlash` of its bond per session missed, and the seat itself: the validator is
//! left out of the authority set for `UnresponsiveSuspension` sessions, and for the one session it
//! was already queued for the runtime weighs its blocks and votes at the minimum
//! ([`Pallet::is_suspended`]).
//!
//! The genesis session is not judged: a new network's validators start their nodes one by one,
//! and the first of them opens session 0 with its first block, so a validator that came up a
//! minute late would lose a seat it was given by the chain spec, and a slice of its bond, for no
//! fault. A sybil holding a genesis seat gains one session (whose seats the spec's authors chose);
//! from session 1 on every session is judged.

use alloc::vec::Vec;
use core::marker::PhantomData;
use frame_support::traits::Get;
use sp_runtime::Perbill;
use sp_staking::offence::{Offence, OffenceError, ReportOffence};

use crate::{Config, CurrentSession, Event, Ledgers, Pallet, SlashReason, SuspendedUntil};

/// The session the chain starts in, which is not judged (see the module's doc).
pub const GENESIS_SESSION: sp_staking::SessionIndex = 0;

/// pallet-im-online's `ReportUnresponsiveness`: slashes and suspends each offender at once (no
/// pallet-offences in between, whose handler would treat it as an equivocation).
pub struct ReportUnresponsive<T>(PhantomData<T>);

impl<T: Config, Id, O> ReportOffence<T::AccountId, (T::AccountId, Id), O> for ReportUnresponsive<T>
where
    O: Offence<(T::AccountId, Id)>,
{
    fn report_offence(_reporters: Vec<T::AccountId>, offence: O) -> Result<(), OffenceError> {
        if offence.session_index() == GENESIS_SESSION {
            return Ok(());
        }
        let offenders = offence.offenders();
        // im-online's own fraction grows with the share of the set offline (0 below a tenth);
        // a floor makes every missed session cost something.
        let fraction =
            offence.slash_fraction(offenders.len() as u32).max(T::UnresponsiveSlash::get());
        for (who, _) in offenders {
            Pallet::<T>::punish_unresponsive(&who, fraction);
        }
        Ok(())
    }

    fn is_known_offence(_offenders: &[(T::AccountId, Id)], _time_slot: &O::Slot) -> bool {
        // im-online reports each session once, at its end.
        false
    }
}

impl<T: Config> Pallet<T> {
    /// Slashes `fraction` of `who`'s bond for an unresponsive session and suspends it.
    pub(crate) fn punish_unresponsive(who: &T::AccountId, fraction: Perbill) {
        let bond = Ledgers::<T>::get(who).map(|l| l.total()).unwrap_or_default();
        Pallet::<T>::do_slash(who, fraction.mul_floor(bond), SlashReason::Unresponsive);
        let until = CurrentSession::<T>::get()
            .saturating_add(1)
            .saturating_add(T::UnresponsiveSuspension::get());
        Pallet::<T>::suspend(who, until);
    }

    /// Leaves `who` out of the authority set until (excluding) session `until`; never shortens a
    /// longer suspension already running (an equivocator's).
    pub(crate) fn suspend(who: &T::AccountId, until: sp_staking::SessionIndex) {
        SuspendedUntil::<T>::mutate(who, |s| *s = Some(s.map_or(until, |s| s.max(until))));
        Pallet::<T>::deposit_event(Event::Suspended { who: who.clone(), until });
    }

    /// Whether `who` is suspended in the current session: an equivocator or an unresponsive
    /// validator still in the set it was queued for before its offence. The runtime weighs such an
    /// authority's blocks and votes at the minimum.
    pub fn is_suspended(who: &T::AccountId) -> bool {
        let now = CurrentSession::<T>::get();
        SuspendedUntil::<T>::get(who).is_some_and(|until| now < until)
    }
}
