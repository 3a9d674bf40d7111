//! Weights of the trainer-staking calls.
//!
//! **Estimated, not yet benchmarked**: each figure is the storage accesses the call makes (counted from
//! the code, priced with the runtime's `DbWeight`) plus a generous fixed compute cost and the proof size
//! of the records it touches. `benchmarking.rs` holds the benchmarks that will replace them with
//! measured values once the node is built with `runtime-benchmarks`.

use core::marker::PhantomData;
use frame_support::{traits::Get, weights::Weight};

/// Weight functions needed by the pallet.
pub trait WeightInfo {
    /// `bond`: ledger, ledger counter, total, account balance and holds.
    fn bond() -> Weight;
    /// `unbond`: ledger.
    fn unbond() -> Weight;
    /// `rebond`: ledger.
    fn rebond() -> Weight;
    /// `withdraw_unbonded`: ledger, counter, total, account balance and holds.
    fn withdraw_unbonded() -> Weight;
}

/// Compute cost charged on top of storage accesses (50 µs), far above what the code needs.
const BASE_REF_TIME: u64 = 50_000_000;
/// Proof size of a ledger (≤ 32 unlocking chunks), an account and its holds.
const PROOF_SIZE: u64 = 8_192;

/// Estimated weights for a runtime: see the module documentation.
pub struct SubstrateWeight<T>(PhantomData<T>);

impl<T: frame_system::Config> WeightInfo for SubstrateWeight<T> {
    fn bond() -> Weight {
        Weight::from_parts(BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(5, 5))
    }
    fn unbond() -> Weight {
        Weight::from_parts(BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(2, 1))
    }
    fn rebond() -> Weight {
        Weight::from_parts(BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(2, 1))
    }
    fn withdraw_unbonded() -> Weight {
        Weight::from_parts(BASE_REF_TIME, PROOF_SIZE)
            .saturating_add(T::DbWeight::get().reads_writes(5, 5))
    }
}

/// Zero weights, for tests.
impl WeightInfo for () {
    fn bond() -> Weight {
        Weight::zero()
    }
    fn unbond() -> Weight {
        Weight::zero()
    }
    fn rebond() -> Weight {
        Weight::zero()
    }
    fn withdraw_unbonded() -> Weight {
        Weight::zero()
    }
}
