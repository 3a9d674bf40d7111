//! Weights of the job-market calls and hooks.
//!
//! **Estimated, not yet benchmarked**: storage accesses counted from the code and priced with the
//! runtime's `DbWeight`, plus a fixed compute cost and the proof size of the records touched (a job
//! with its spec is at most a few KiB). To be replaced by figures from a frame-benchmarking run.

use core::marker::PhantomData;
use frame_support::{traits::Get, weights::Weight};

/// Weight functions needed by the pallet.
pub trait WeightInfo {
    /// `post_job`: spec validation, job, counter, timeout entry, escrow hold.
    fn post_job() -> Weight;
    /// `cancel_job`: job, timeout entries, bids, escrow release.
    fn cancel_job() -> Weight;
    /// `bid`: job, bond, bids.
    fn bid() -> Weight;
    /// `accept_bid`: job, bids, bond, timeout entries.
    fn accept_bid() -> Weight;
    /// `submit_bundle`: job, round, timeout entries.
    fn submit_bundle() -> Weight;
    /// `commit_verdict`: job, round, timeout entries.
    fn commit_verdict() -> Weight;
    /// `reveal_verdict`, including a settlement (verifier fees and slashes, payment, credit).
    fn reveal_verdict() -> Weight;
    /// One timeout in `on_initialize`, the worst case being a verifier draw over all bonders.
    fn on_timeout() -> Weight;
}

const BASE_REF_TIME: u64 = 100_000_000;
const PROOF_SIZE: u64 = 16_384;

/// Estimated weights for a runtime: see the module documentation.
pub struct SubstrateWeight<T>(PhantomData<T>);

impl<T: frame_system::Config> WeightInfo for SubstrateWeight<T> {
    fn post_job() -> Weight {
        // Spec validation walks at most a few dozen layers: a few hundred µs at worst.
        Weight::from_parts(4 * BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(6, 6))
    }
    fn cancel_job() -> Weight {
        Weight::from_parts(BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(6, 7))
    }
    fn bid() -> Weight {
        Weight::from_parts(BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(3, 1))
    }
    fn accept_bid() -> Weight {
        Weight::from_parts(BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(5, 5))
    }
    fn submit_bundle() -> Weight {
        Weight::from_parts(BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(4, 5))
    }
    fn commit_verdict() -> Weight {
        Weight::from_parts(BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(4, 4))
    }
    fn reveal_verdict() -> Weight {
        // Settlement: up to `Verifiers` fee transfers or slashes, the trainer's payment and credit.
        Weight::from_parts(4 * BASE_REF_TIME, 4 * PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(40, 40))
    }
    fn on_timeout() -> Weight {
        // A draw reads every bonder's ledger and ECP (up to 1 000 of each).
        Weight::from_parts(10 * BASE_REF_TIME, 64 * PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(2_050, 45))
    }
}

/// Zero weights, for tests.
impl WeightInfo for () {
    fn post_job() -> Weight {
        Weight::zero()
    }
    fn cancel_job() -> Weight {
        Weight::zero()
    }
    fn bid() -> Weight {
        Weight::zero()
    }
    fn accept_bid() -> Weight {
        Weight::zero()
    }
    fn submit_bundle() -> Weight {
        Weight::zero()
    }
    fn commit_verdict() -> Weight {
        Weight::zero()
    }
    fn reveal_verdict() -> Weight {
        Weight::zero()
    }
    fn on_timeout() -> Weight {
        Weight::zero()
    }
}
