//! # Fresh randomness: every block's VRF output, accumulated
//!
//! Every draw of the protocol — a job's verifiers and segments, the evidence and rules derived from
//! the round's seed, drilling epochs, synthetic task seeds and executors — must use randomness that
//! nobody could compute when the commitment it judges was made: not the committer, not the author of
//! the commitment's block. This pallet provides it ([`FreshRandomness`]) in two phases:
//!
//! 1. **Absorb** (`on_initialize`): at the start of each block, the VRF output of its parent (BABE
//!    writes the block author's VRF output at the end of each block: `AuthorVrfRandomness`) is
//!    hashed into the [`Accumulator`], and the parent's number is noted among the last
//!    [`Config::FreshOutputs`] contributions. A block without a VRF output (none on this chain:
//!    primary slots only) adds nothing, and a stale value is never absorbed twice.
//! 2. **Read** ([`FreshRandomness::fresh`]): for a commitment at block `c`, the accumulator answers
//!    once its last `FreshOutputs` contributions all come from blocks *after* `c`. Each of those
//!    outputs was unknown to everyone but its author until its block was published, so the value
//!    is a function of at least `FreshOutputs` secrets that did not exist at `c`.
//!
//! ## Why not BABE's epoch randomness
//! pallet-babe 50.0.0's `randomness_change_epoch` hashes only the *full* 256-output segments of
//! `UnderConstruction` (`0..segment_idx`), never the segment being filled. On short epochs most
//! epoch changes add no VRF output at all: `NextRandomness` becomes `blake2(previous ‖ epoch)`, a
//! public hash chain anyone computes in advance (the runtime's tests show it). This accumulator
//! takes every output, one per block, as soon as the block is built.
//!
//! ## What remains (priced in `docs/threat-model.md`)
//! - Each author learns its own output before it publishes its block, so the author of a block
//!   among the last contributions can withhold it and re-roll the value once per withheld block, at
//!   the cost of its block reward. With the authorship cap nobody holds more than a third of the
//!   slots.
//! - Knowing the value at commitment needs all `FreshOutputs` blocks after it, which BABE's VRF
//!   lottery gives one authority about `(1/3)^FreshOutputs` of the time; a private fork that long
//!   must also outrun GRANDPA's finality.
//!
//! The value changes with every block: a caller draws once, when [`FreshRandomness::fresh`] first
//! answers, and keeps what it drew.

#![cfg_attr(not(feature = "std"), no_std)]

#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

pub use pallet::*;

use ergon_protocol::traits::FreshRandomness;
use frame_support::{
    pallet_prelude::*, CloneNoBound, DebugNoBound, DefaultNoBound, EqNoBound, PartialEqNoBound,
};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::traits::{One, Saturating};

/// Domain tag of one absorption step: `value' = blake2(tag ‖ value ‖ block ‖ output)`.
pub const ABSORB_TAG: &[u8] = b"ergon/fresh-randomness/absorb/v1";

/// The accumulated VRF outputs and where the most recent ones came from.
#[derive(
    Encode,
    Decode,
    MaxEncodedLen,
    TypeInfo,
    CloneNoBound,
    PartialEqNoBound,
    EqNoBound,
    DebugNoBound,
    DefaultNoBound,
)]
#[scale_info(skip_type_params(T))]
pub struct AccumulatorState<T: Config> {
    /// The hash of every output absorbed so far, in block order.
    pub value: [u8; 32],
    /// The last output absorbed: the source keeps its value through a block without a VRF output,
    /// which must not count as a second contribution.
    pub last_output: Option<[u8; 32]>,
    /// The blocks that produced the last [`Config::FreshOutputs`] outputs absorbed, oldest first.
    pub recent: BoundedVec<BlockNumberFor<T>, T::FreshOutputs>,
    /// Outputs absorbed since genesis.
    pub absorbed: u64,
}

impl<T: Config> AccumulatorState<T> {
    /// Absorbs `output`, produced by block `block`. Returns whether it was new.
    pub fn absorb(&mut self, block: BlockNumberFor<T>, output: [u8; 32]) -> bool {
        if self.last_output == Some(output) {
            return false;
        }
        self.value = ergon_protocol::hash::tagged(ABSORB_TAG, &(self.value, block, output));
        self.last_output = Some(output);
        if self.recent.is_full() && !self.recent.is_empty() {
            self.recent.remove(0);
        }
        // Cannot fail: a slot was freed above (or `FreshOutputs` is zero, which the integrity
        // test refuses).
        let _ = self.recent.try_push(block);
        self.absorbed = self.absorbed.saturating_add(1);
        true
    }

    /// Whether the last [`Config::FreshOutputs`] outputs were all produced after block
    /// `committed_at`.
    pub fn fresh_for(&self, committed_at: BlockNumberFor<T>) -> bool {
        self.recent.is_full() && self.recent.first().is_some_and(|oldest| *oldest > committed_at)
    }
}

#[frame_support::pallet]
pub mod pallet {
    use super::*;

    #[pallet::pallet]
    pub struct Pallet<T>(_);

    #[pallet::config]
    pub trait Config: frame_system::Config {
        /// The VRF output of the parent block, as seen at the start of a block (the runtime:
        /// pallet-babe's `AuthorVrfRandomness`, written at the end of each block). `None` for a
        /// block without one.
        type ParentVrfOutput: Get<Option<[u8; 32]>>;
        /// How many VRF outputs of blocks after a commitment the randomness for it must contain
        /// (at least one). Each is one block's wait.
        #[pallet::constant]
        type FreshOutputs: Get<u32>;
    }

    /// The accumulator: every VRF output absorbed so far and the blocks of the most recent ones.
    #[pallet::storage]
    pub type Accumulator<T: Config> = StorageValue<_, AccumulatorState<T>, ValueQuery>;

    #[pallet::hooks]
    impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
        /// Phase 1: absorbs the parent block's VRF output.
        fn on_initialize(now: BlockNumberFor<T>) -> Weight {
            // One read of the source, one read and one write of the accumulator (about 130 bytes)
            // and one blake2 of 100 bytes, whatever the block.
            let weight = T::DbWeight::get().reads_writes(2, 1);
            let Some(output) = T::ParentVrfOutput::get() else {
                return T::DbWeight::get().reads(1);
            };
            let parent = now.saturating_sub(One::one());
            Accumulator::<T>::mutate(|state| state.absorb(parent, output));
            weight
        }

        fn integrity_test() {
            assert!(T::FreshOutputs::get() >= 1, "FreshOutputs must be at least one");
        }

        #[cfg(feature = "try-runtime")]
        fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
            let state = Accumulator::<T>::get();
            ensure!(
                state.recent.windows(2).all(|w| w[0] < w[1]),
                "the recent contributions are not in block order"
            );
            ensure!(
                state.absorbed >= state.recent.len() as u64,
                "more recent contributions than outputs absorbed"
            );
            ensure!(
                state
                    .recent
                    .last()
                    .is_none_or(|last| *last < frame_system::Pallet::<T>::block_number()),
                "a contribution from a block not built yet"
            );
            Ok(())
        }
    }
}

/// Phase 2: the protocol's draws read the accumulator through this.
impl<T: Config> FreshRandomness<BlockNumberFor<T>> for Pallet<T> {
    /// The accumulator once its last [`Config::FreshOutputs`] outputs all come from blocks after
    /// `committed_at`, with `since = committed_at + 1`: a draw's candidates must be fixed by the
    /// commitment's block.
    fn fresh(committed_at: BlockNumberFor<T>) -> Option<([u8; 32], BlockNumberFor<T>)> {
        let state = Accumulator::<T>::get();
        state
            .fresh_for(committed_at)
            .then(|| (state.value, committed_at.saturating_add(One::one())))
    }

    /// With one output per block, the outputs of blocks `c + 1 ..= c + FreshOutputs` are all
    /// absorbed at the start of block `c + FreshOutputs + 1`.
    fn retry_in(committed_at: BlockNumberFor<T>) -> BlockNumberFor<T> {
        let ready =
            committed_at.saturating_add(T::FreshOutputs::get().into()).saturating_add(One::one());
        ready.saturating_sub(frame_system::Pallet::<T>::block_number()).max(One::one())
    }

    #[cfg(feature = "runtime-benchmarks")]
    fn benchmark_make_fresh(committed_at: BlockNumberFor<T>) {
        Accumulator::<T>::mutate(|state| {
            let mut block = committed_at;
            for i in 0..T::FreshOutputs::get() {
                block = block.saturating_add(One::one());
                state.absorb(block, ergon_protocol::hash::tagged(b"benchmark", &(block, i)));
            }
        });
    }
}
