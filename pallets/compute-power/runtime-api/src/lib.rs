//! Runtime API of the compute-power pallet: what the `ergon_ecp` and `ergon_topTrainers` RPCs, the
//! worker and polkadot.js read.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use codec::Codec;
pub use pallet_compute_power::ComputePower;

sp_api::decl_runtime_apis! {
    /// Trainers' computing power, decayed to the queried block.
    pub trait ComputePowerApi<AccountId: Codec> {
        /// `who`'s drilling credit D, training credit T, ECP and undecayed lifetime total (micro-ut).
        fn compute_power(who: AccountId) -> ComputePower;
        /// The trainers with the highest ECP, highest first, at most `limit`.
        fn top_trainers(limit: u32) -> Vec<(AccountId, ComputePower)>;
    }
}
