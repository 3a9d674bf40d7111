//! GRANDPA votes weighed by stake: each authority's vote counts its active bond.
//!
//! pallet-grandpa's own session handler gives every authority weight 1, so finality needs more
//! than two thirds of the *seats*: a few cheap seats that never vote halt it (issue 34: three
//! 1 000-ERG sybils beside four 10 000-ERG validators did). [`StakeWeightedFinality`] takes its
//! place in the session handlers and weighs each vote by the voter's active bond in whole ERG — the
//! stake an equivocating vote puts at risk — so halting finality takes a third of the *bond* of
//! the set, and a suspended authority (an equivocator or an unresponsive validator still in the set
//! it was queued for) counts 1.
//!
//! It lets pallet-grandpa do the bookkeeping (set ids, the set-id → session map, stalls) and only
//! replaces the weights: of the genesis set, and of every change it schedules. A change is scheduled
//! when the set changes or when its weights would (a bond grew or was slashed).
//!
//! Invariants: a weight is never 0 and the weights sum below 2⁶³ (GRANDPA's voter set adds them up
//! in a u64).

use alloc::vec::Vec;
use frame_support::traits::OneSessionHandler;
use sp_consensus_grandpa::{AuthorityId as GrandpaId, AuthorityWeight};
use sp_runtime::BoundToRuntimeAppPublic;

use crate::{
    configs::MaxAuthorities, proof_of_hashrate::bounded, units::ERG, AccountId, Grandpa, Runtime,
    TrainerStaking,
};

/// The GRANDPA weight of an authority: its active bond in whole ERG, at least 1 and at most
/// `2⁶² / MaxAuthorities`; 1 while it is suspended.
pub fn vote_weight(who: &AccountId) -> AuthorityWeight {
    if TrainerStaking::is_suspended(who) {
        return 1;
    }
    let cap = (1u64 << 62) / u64::from(MaxAuthorities::get().max(1));
    let whole = TrainerStaking::active_bond(who) / ERG;
    u64::try_from(whole).unwrap_or(u64::MAX).clamp(1, cap)
}

/// `validators` with their vote weights, in session order.
fn weigh<'a>(
    validators: impl Iterator<Item = (&'a AccountId, GrandpaId)>,
) -> Vec<(GrandpaId, AuthorityWeight)> {
    validators.map(|(who, key)| (key, vote_weight(who))).collect()
}

/// The session handler that feeds bond weights to GRANDPA (in place of pallet-grandpa's equal
/// weights).
pub struct StakeWeightedFinality;

impl BoundToRuntimeAppPublic for StakeWeightedFinality {
    type Public = GrandpaId;
}

impl OneSessionHandler<AccountId> for StakeWeightedFinality {
    type Key = GrandpaId;

    fn on_genesis_session<'a, I>(validators: I)
    where
        I: 'a + Iterator<Item = (&'a AccountId, GrandpaId)>,
    {
        let validators: Vec<_> = validators.collect();
        <Grandpa as OneSessionHandler<AccountId>>::on_genesis_session(validators.iter().cloned());
        let weighted = weigh(validators.into_iter());
        if !weighted.is_empty() {
            pallet_grandpa::Authorities::<Runtime>::put(bounded(weighted));
        }
    }

    fn on_new_session<'a, I>(changed: bool, validators: I, queued_validators: I)
    where
        I: 'a + Iterator<Item = (&'a AccountId, GrandpaId)>,
    {
        let validators: Vec<_> = validators.collect();
        let weighted = weigh(validators.iter().cloned());
        let reweighted = weighted != pallet_grandpa::Authorities::<Runtime>::get().into_inner();
        // pallet-grandpa ignores the queued set.
        let queued: Vec<_> = queued_validators.collect();
        <Grandpa as OneSessionHandler<AccountId>>::on_new_session(
            changed || reweighted,
            validators.into_iter(),
            queued.into_iter(),
        );
        // The change pallet-grandpa just scheduled (if it could: none is pending) carries equal
        // weights; give it the bonds'.
        let now = frame_system::Pallet::<Runtime>::block_number();
        pallet_grandpa::PendingChange::<Runtime>::mutate(|pending| {
            if let Some(change) = pending.as_mut().filter(|c| c.scheduled_at == now) {
                change.next_authorities = bounded(weighted);
            }
        });
    }

    fn on_disabled(i: u32) {
        <Grandpa as OneSessionHandler<AccountId>>::on_disabled(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        tests::{ext, note_online},
        ComputePower, RuntimeOrigin, Session, SessionKeys, System,
    };
    use codec::Encode;
    use frame_support::{assert_ok, traits::Hooks};
    use pallet_compute_power::{ComputePowerLedger, WorkKind};
    use sp_keyring::Sr25519Keyring::{self, Alice, Bob, Charlie, Dave, Eve, Ferdie};

    const HONEST: [Sr25519Keyring; 4] = [Alice, Bob, Charlie, Dave];

    /// The current GRANDPA weight of each of `who` (0 if not in the set).
    fn grandpa_weights(who: &[Sr25519Keyring]) -> Vec<AuthorityWeight> {
        let set = pallet_grandpa::Authorities::<Runtime>::get();
        who.iter()
            .map(|k| {
                let key = GrandpaId::from(crate::genesis_config_presets::ed25519_twin(*k).public());
                set.iter().find(|(id, _)| *id == key).map_or(0, |(_, w)| *w)
            })
            .collect()
    }

    /// Ends the session with `online` marked online, and enacts the GRANDPA change it scheduled.
    fn rotate(online: &[Sr25519Keyring]) {
        note_online(online);
        System::set_block_number(System::block_number() + 1);
        Session::rotate_session();
        <crate::Grandpa as Hooks<_>>::on_finalize(System::block_number());
    }

    /// Whether GRANDPA can finalize with only `voters` voting: more than two thirds of the weight.
    fn finalizes_with(voters: &[Sr25519Keyring]) -> bool {
        let all = grandpa_weights(&[Alice, Bob, Charlie, Dave, Eve, Ferdie]).iter().sum::<u64>();
        let voting = grandpa_weights(voters).iter().sum::<u64>();
        3 * voting > 2 * all
    }

    #[test]
    fn genesis_votes_are_weighted_by_bond() {
        ext("local_testnet").execute_with(|| {
            // Each genesis validator bonded 10 000 ERG.
            assert_eq!(grandpa_weights(&HONEST), vec![10_000; 4]);
            assert_eq!(vote_weight(&Eve.to_account_id()), 1, "no bond: the least weight");
        });
    }

    /// The attack (issue 34, item 4; live on `--chain local`): sybil accounts bond the minimum,
    /// do the least work a seat takes, register keys, take seats and never vote. With one vote per
    /// seat, two of six seats silent halted GRANDPA (4 < 5 votes). Weighed by bond they hold 2 000
    /// of 42 000 and the honest four finalize; the session they sit through without a block or a
    /// heartbeat costs each at least 1 % of its bond, its weight and then its seat.
    #[test]
    fn attack_sybil_seats_that_never_vote_neither_halt_finality_nor_keep_their_seats() {
        let mut ext = ext("local_testnet");
        ext.register_extension(sp_keystore::KeystoreExt::new(
            sp_keystore::testing::MemoryKeystore::new(),
        ));
        ext.execute_with(|| {
            System::set_block_number(1);
            for sybil in [Eve, Ferdie] {
                let who = sybil.to_account_id();
                assert_ok!(crate::TrainerStaking::bond(
                    RuntimeOrigin::signed(who.clone()),
                    1_000 * ERG
                ));
                // 1.5 ut of drilling: ECP 0.6 ut, a little above the least a seat takes (ECP
                // decays; at exactly the floor it would drop below within a block).
                ComputePower::credit(&who, WorkKind::Drilling, 1_500_000);
                // The dev keys `//Eve` with their proof of possession, as `author_rotateKeys`
                // makes them.
                let seed = format!("//{}", <&'static str>::from(sybil));
                let generated = SessionKeys::generate(&who.encode(), Some(seed.into_bytes()));
                assert_ok!(Session::set_keys(
                    RuntimeOrigin::signed(who),
                    generated.keys,
                    generated.proof.encode()
                ));
            }
            // Session 1 queues them; from session 2 they hold seats.
            rotate(&HONEST);
            rotate(&HONEST);
            let eve = Eve.to_account_id();
            assert!(Session::validators().contains(&eve));
            assert_eq!(grandpa_weights(&[Eve, Ferdie]), vec![1_000, 1_000]);
            assert!(finalizes_with(&HONEST), "four honest bonds are more than 2/3 of 42 000");
            // With a vote per seat, as before, four of the six seats are not more than two thirds.
            assert!(3 * HONEST.len() <= 2 * Session::validators().len());

            // They sit session 2 out: slashed (at least 1 %) and suspended; in session 3 (queued
            // before the report) they weigh 1, from session 4 on they are gone.
            rotate(&HONEST);
            // im-online's own fraction for two offline of the set (4.2 %) is above the 1 % floor.
            let bond = crate::TrainerStaking::active_bond(&eve);
            assert!((900 * ERG..=990 * ERG).contains(&bond), "{bond}");
            assert!(crate::TrainerStaking::is_suspended(&eve));
            assert!(Session::validators().contains(&eve));
            assert_eq!(grandpa_weights(&[Eve, Ferdie]), vec![1, 1]);
            // BABE announced this epoch's weights an epoch ahead (their slots go empty for this
            // one epoch); the next epoch's set leaves them out.
            assert!(
                !pallet_babe::NextAuthorities::<Runtime>::get()
                    .iter()
                    .any(|(k, _)| *k == Eve.public().into()),
                "not announced for the next epoch"
            );
            rotate(&HONEST);
            assert!(!Session::validators().contains(&eve));
            assert_eq!(grandpa_weights(&[Eve, Ferdie]), vec![0, 0]);
            assert_eq!(grandpa_weights(&HONEST), vec![10_000; 4]);
            crate::TrainerStaking::do_try_state().unwrap();
        });
    }
}
