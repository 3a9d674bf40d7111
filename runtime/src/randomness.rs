//! Randomness for the protocol's draws: BABE's epoch randomness, read only once it is *fresh* for
//! a commitment — made entirely of VRF outputs of blocks after it.
//!
//! During epoch `N`, pallet-babe's `NextRandomness` (what `RandomnessFromOneEpochAgo` reads) is
//! computed from the VRF outputs of every block of epoch `N − 1`, which began at block
//! `EpochStart.0`. For a commitment at block `c` that value is fresh once `EpochStart.0 > c`: every
//! output in it was produced after the commitment, so at commitment time nobody, not even the
//! author of the commitment's block, knew it. A commitment therefore waits until the second epoch
//! change after it (between one and two epochs, 200–400 s here).
//!
//! Remaining bias (pallet-babe's own analysis of `RandomnessFromOneEpochAgo`): the authors of the
//! last slots of epoch `N − 1` learn the value a little before everyone else and can withhold their
//! blocks, each withheld block choosing between two values at the cost of its block reward, and
//! authors early in epoch `N` could build on a fork. Draws bound what that buys: candidates are
//! fixed before the randomness began (see the draws' module docs), and with the weight cap no
//! authority holds more than a third of the slots.

use crate::primitives::BlockNumber;
use crate::{units, Runtime};
use ergon_protocol::traits::FreshRandomness;

/// BABE's epoch randomness, fresh for a commitment once the epoch it comes from began after it.
pub struct EpochRandomness;

impl FreshRandomness<BlockNumber> for EpochRandomness {
    fn fresh(committed_at: BlockNumber) -> Option<([u8; 32], BlockNumber)> {
        let (previous_epoch_start, _) = pallet_babe::EpochStart::<Runtime>::get();
        (previous_epoch_start > committed_at)
            .then(|| (pallet_babe::NextRandomness::<Runtime>::get(), previous_epoch_start))
    }

    fn retry_in() -> BlockNumber {
        let end = u64::from(pallet_babe::Pallet::<Runtime>::current_epoch_start())
            .saturating_add(units::EPOCH_DURATION_IN_SLOTS);
        let slots_left = end.saturating_sub(u64::from(pallet_babe::CurrentSlot::<Runtime>::get()));
        // Blocks come every `MILLI_SECS_PER_BLOCK` on average, slots every `SLOT_DURATION`. An
        // early retry only asks again.
        let blocks = slots_left.saturating_mul(units::SLOT_DURATION) / units::MILLI_SECS_PER_BLOCK;
        BlockNumber::try_from(blocks).unwrap_or(BlockNumber::MAX).max(1)
    }

    #[cfg(feature = "runtime-benchmarks")]
    fn benchmark_make_fresh(committed_at: BlockNumber) {
        let since = committed_at.saturating_add(1);
        pallet_babe::EpochStart::<Runtime>::put((since, since));
        pallet_babe::NextRandomness::<Runtime>::put([7u8; 32]);
    }
}
