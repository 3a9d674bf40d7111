//! Proof of Hashrate: BABE's authority weights come from the validators' effective computing power.
//!
//! BABE's primary-slot rule already gives authority *i* the threshold `1 − (1 − c)^θᵢ` with
//! `θᵢ = weightᵢ / Σ weight`; Ergon only chooses the weights. [`ProofOfHashrate`] takes the place of
//! pallet-babe in the session handlers: at genesis it installs ECP-weighted authorities, and at every
//! session (= epoch) change it enacts the epoch with the previously announced set as the current one and
//! announces the next set weighted by the ECP of that moment.
//!
//! No authority gets more than [`MAX_AUTHORITY_SHARE`] (a third) of the total weight: a bought or
//! concentrated share of ECP above a third buys no more primary slots, so no single authority
//! authors more than about a third of the blocks, the share BFT finality already tolerates. The cap is
//! water-filled ([`cap_shares`]): the largest weights are lowered to one level, the others kept.
//!
//! Invariants: a weight is never 0 (BABE panics), the weights sum to less than 2⁵³ (they travel through
//! JavaScript clients and BABE's float threshold), and an empty next set is never announced (it would
//! halt the chain for good): the current set is kept instead.

use alloc::vec::Vec;
use frame_support::{traits::OneSessionHandler, WeakBoundedVec};
use pallet_compute_power::{ComputePowerLedger, MicroUt};
use sp_consensus_babe::{AuthorityId as BabeId, BabeAuthorityWeight};
use sp_runtime::{BoundToRuntimeAppPublic, Perbill};

use crate::{
    configs::MaxAuthorities, AccountId, Babe, ComputePower, Runtime, Session, TrainerStaking,
};

/// ECP per unit of BABE weight: one milli-ut.
pub const MICRO_UT_PER_WEIGHT: MicroUt = 1_000;

/// Upper bound of the sum of all weights (strictly below 2⁵³).
pub const MAX_TOTAL_WEIGHT: u64 = (1 << 53) - 1;

/// The largest weight one authority may get, so that even `MaxAuthorities` of them sum below 2⁵³.
pub fn weight_cap() -> BabeAuthorityWeight {
    MAX_TOTAL_WEIGHT / (MaxAuthorities::get().max(1) as u64)
}

/// Most share of the total BABE weight one authority may hold.
pub const MAX_AUTHORITY_SHARE: Perbill = Perbill::from_parts(333_333_333);

/// Lowers the largest `weights` to one level `L` so that none exceeds `share` of the total, keeping
/// the rest: `L = share · Σ(uncapped) / (1 − k · share)` for the smallest number `k` of capped weights
/// under which the next weight fits. With fewer than `1 / share` weights no level satisfies the cap
/// and the weights are kept as they are: flattening them (as this did before) handed a zero-ECP
/// newcomer the same share as a validator with all the work.
pub fn cap_shares(weights: &mut [BabeAuthorityWeight], share: Perbill) {
    let n = weights.len();
    if n == 0 {
        return;
    }
    let parts = share.deconstruct() as u128;
    let one = Perbill::one().deconstruct() as u128;
    let mut sorted: Vec<u128> = weights.iter().map(|w| *w as u128).collect();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let total: u128 = sorted.iter().sum();
    if sorted[0] * one <= parts * total {
        return;
    }
    for k in 1..n {
        let capped = k as u128 * parts;
        if capped >= one {
            break;
        }
        let rest: u128 = sorted[k..].iter().sum();
        let level = parts * rest / (one - capped);
        if sorted[k] <= level {
            let level = level.max(1) as BabeAuthorityWeight;
            weights.iter_mut().for_each(|w| *w = (*w).min(level));
            return;
        }
    }
}

/// BABE weight of an ECP: `clamp(ecp / MICRO_UT_PER_WEIGHT, 1, weight_cap())`. A suspended
/// authority (see `TrainerStaking::is_suspended`) weighs 1 whatever its ECP.
pub fn weight_of(ecp: MicroUt) -> BabeAuthorityWeight {
    let scaled = u64::try_from(ecp / MICRO_UT_PER_WEIGHT).unwrap_or(u64::MAX);
    scaled.clamp(1, weight_cap())
}

/// The validators' BABE keys with ECP weights, none above [`MAX_AUTHORITY_SHARE`] of the total, in
/// session order (BABE authority indices follow it).
fn weigh<'a>(
    validators: impl Iterator<Item = (&'a AccountId, BabeId)>,
) -> Vec<(BabeId, BabeAuthorityWeight)> {
    let (keys, mut weights): (Vec<BabeId>, Vec<BabeAuthorityWeight>) = validators
        .map(|(who, key)| {
            let weight = if TrainerStaking::is_suspended(who) {
                1
            } else {
                weight_of(ComputePower::ecp(who))
            };
            (key, weight)
        })
        .unzip();
    cap_shares(&mut weights, MAX_AUTHORITY_SHARE);
    keys.into_iter().zip(weights).collect()
}

/// A weighted authority list bounded by `MaxAuthorities` (BABE's and GRANDPA's): the session's
/// validators, which trainer-staking already cut at that many, so nothing is dropped.
pub(crate) fn bounded<K>(authorities: Vec<(K, u64)>) -> WeakBoundedVec<(K, u64), MaxAuthorities> {
    WeakBoundedVec::force_from(authorities, Some("more weighted authorities than MaxAuthorities"))
}

/// The session handler that feeds ECP weights to BABE (in place of pallet-babe's equal weights).
pub struct ProofOfHashrate;

impl BoundToRuntimeAppPublic for ProofOfHashrate {
    type Public = BabeId;
}

impl OneSessionHandler<AccountId> for ProofOfHashrate {
    type Key = BabeId;

    fn on_genesis_session<'a, I>(validators: I)
    where
        I: 'a + Iterator<Item = (&'a AccountId, BabeId)>,
    {
        // What pallet-babe does at genesis, with weights: epochs 0 and 1 both use this set.
        let authorities = weigh(validators);
        if !authorities.is_empty() {
            let authorities = bounded(authorities);
            pallet_babe::Authorities::<Runtime>::put(&authorities);
            pallet_babe::NextAuthorities::<Runtime>::put(&authorities);
        }
    }

    fn on_new_session<'a, I>(_changed: bool, validators: I, queued_validators: I)
    where
        I: 'a + Iterator<Item = (&'a AccountId, BabeId)>,
    {
        // The epoch starting now runs with the set announced one epoch ago, weights included.
        let mut current = pallet_babe::NextAuthorities::<Runtime>::get().into_inner();
        if current.is_empty() {
            current = weigh(validators);
        }
        let mut next = weigh(queued_validators);
        if next.is_empty() {
            next = current.clone();
        }
        Babe::enact_epoch_change(bounded(current), bounded(next), Some(Session::current_index()));
    }

    fn on_disabled(i: u32) {
        <Babe as OneSessionHandler<AccountId>>::on_disabled(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{tests::ext, System};
    use codec::Decode;
    use pallet_compute_power::WorkKind;
    use sp_consensus_babe::{ConsensusLog, BABE_ENGINE_ID};
    use sp_keyring::Sr25519Keyring::{Alice, Bob, Charlie, Dave};
    use sp_runtime::generic::DigestItem;

    fn weights(set: &[(BabeId, BabeAuthorityWeight)]) -> Vec<BabeAuthorityWeight> {
        set.iter().map(|(_, w)| *w).collect()
    }

    /// The weights of Alice, Bob, Charlie and Dave in `set` (0 for one that is missing), whatever the
    /// order of the set.
    fn weights_by_name(set: &[(BabeId, BabeAuthorityWeight)]) -> Vec<BabeAuthorityWeight> {
        [Alice, Bob, Charlie, Dave]
            .map(|k| {
                let key = BabeId::from(k.public());
                set.iter().find(|(id, _)| *id == key).map_or(0, |(_, w)| *w)
            })
            .to_vec()
    }

    /// The `NextEpochData` BABE digest of the current block, if any.
    fn next_epoch_log() -> Option<Vec<(BabeId, BabeAuthorityWeight)>> {
        System::digest().logs.iter().find_map(|log| match log {
            DigestItem::Consensus(id, data) if *id == BABE_ENGINE_ID => {
                match ConsensusLog::decode(&mut &data[..]).ok()? {
                    ConsensusLog::NextEpochData(next) => Some(next.authorities),
                    _ => None,
                }
            }
            _ => None,
        })
    }

    #[test]
    fn genesis_authorities_are_weighted_by_ecp_1_2_4_8_capped_at_a_third() {
        ext("local_testnet").execute_with(|| {
            let current = pallet_babe::Authorities::<Runtime>::get();
            // Trainer-staking orders the validators by ECP, highest first; Dave's 8 and Charlie's 4
            // are lowered to 3 so that neither holds more than a third of 9.
            assert_eq!(weights(&current), vec![2_999, 2_999, 2_000, 1_000]);
            assert_eq!(weights_by_name(&current), vec![1_000, 2_000, 2_999, 2_999]);
            assert_eq!(current.to_vec(), pallet_babe::NextAuthorities::<Runtime>::get().to_vec());
        });
    }

    #[test]
    fn next_epoch_digest_carries_the_new_ecp_weights() {
        ext("local_testnet").execute_with(|| {
            System::set_block_number(1);
            pallet_babe::CurrentSlot::<Runtime>::put(sp_consensus_babe::Slot::from(
                crate::units::EPOCH_DURATION_IN_SLOTS,
            ));
            // Bob's ECP grows from 2 ut to 0.4·2 + 0.6·(2 + 10) = 8 ut.
            ComputePower::credit(&Bob.to_account_id(), WorkKind::Training, 10_000_000);
            crate::tests::note_online(&[Alice, Bob, Charlie, Dave]);
            pallet_session::Pallet::<Runtime>::rotate_session();
            // The epoch that starts keeps the announced weights; the next one carries Bob's growth.
            assert_eq!(
                weights_by_name(&pallet_babe::Authorities::<Runtime>::get()),
                vec![1_000, 2_000, 2_999, 2_999]
            );
            // 1 : 8 : 4 : 8, capped at a third: Bob and Dave lowered to (1 + 4)/(1 − 2/3) = 5.
            let announced = next_epoch_log().expect("NextEpochData digest");
            assert_eq!(weights_by_name(&announced), vec![1_000, 4_999, 4_000, 4_999]);
            assert_eq!(announced, pallet_babe::NextAuthorities::<Runtime>::get().to_vec());
        });
    }

    /// The attack: buy ECP until one authority outweighs everyone else. Its share of the weight,
    /// hence of primary slots, stops at a third whatever it buys.
    #[test]
    fn attack_bought_ecp_buys_no_more_than_a_third_of_the_weight() {
        let share = |w: &[BabeAuthorityWeight]| {
            w.iter().copied().max().unwrap() as f64 / w.iter().sum::<u64>() as f64
        };
        for bought in [10, 1_000, 1_000_000, weight_cap()] {
            let mut w = vec![bought, 100, 100, 100, 100, 100];
            cap_shares(&mut w, MAX_AUTHORITY_SHARE);
            assert!(share(&w) <= 1.0 / 3.0 + 1e-9, "{w:?}");
            assert_eq!(&w[1..], &[100; 5], "the others keep their weight");
        }
        // Under the cap nothing changes; two authorities cannot satisfy it and keep their relative
        // weights: a newcomer with no work does not get the share of one with all of it.
        let mut w = vec![30, 30, 20, 20];
        cap_shares(&mut w, MAX_AUTHORITY_SHARE);
        assert_eq!(w, vec![30, 30, 20, 20]);
        let mut w = vec![900, 100];
        cap_shares(&mut w, MAX_AUTHORITY_SHARE);
        assert_eq!(w, vec![900, 100]);
        let mut w = vec![999, 1];
        cap_shares(&mut w, MAX_AUTHORITY_SHARE);
        assert_eq!(w, vec![999, 1]);
        let mut w = vec![7];
        cap_shares(&mut w, MAX_AUTHORITY_SHARE);
        assert_eq!(w, vec![7]);
    }

    #[test]
    fn zero_ecp_never_gives_zero_weight_and_an_empty_set_is_never_announced() {
        assert_eq!(weight_of(0), 1);
        assert_eq!(weight_of(999), 1);
        assert_eq!(weight_of(MicroUt::MAX), weight_cap());
        assert!((weight_cap() as u128) * 100 < 1u128 << 53);

        ext("development").execute_with(|| {
            System::set_block_number(1);
            let alice = Alice.to_account_id();
            let key = BabeId::from(Alice.public());
            // An account without credit still gets weight 1.
            let none = Bob.to_account_id();
            let weighted = weigh([(&none, key.clone())].into_iter());
            assert_eq!(weights(&weighted), vec![1]);
            // An empty queued set: the current one is announced again.
            let current = pallet_babe::NextAuthorities::<Runtime>::get().to_vec();
            assert!(!current.is_empty());
            <ProofOfHashrate as OneSessionHandler<AccountId>>::on_new_session(
                false,
                vec![(&alice, key.clone())].into_iter(),
                Vec::new().into_iter(),
            );
            assert_eq!(next_epoch_log().expect("NextEpochData digest"), current);
            assert!(weights(&current).iter().all(|w| *w > 0));
        });
    }
}
