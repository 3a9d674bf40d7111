//! Runtime API of the drilling pallet: what the `ergon_hashrate`, `ergon_hashrates` and
//! `ergon_drillingTask` RPCs, the worker and polkadot.js read.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use codec::Codec;
pub use pallet_drilling::{DrillingRecord, Task, TaskId};

sp_api::decl_runtime_apis! {
    /// Proof of Drilling.
    pub trait DrillingApi<AccountId: Codec, BlockNumber: Codec> {
        /// `who`'s drilling record and measured throughput in micro-ut per hour (Σ difficulty of its
        /// agreed tasks over Σ time from issuance to commitment), if it completed any task.
        fn hashrate(who: AccountId) -> Option<(DrillingRecord, u128)>;
        /// Trainers with a drilling record, fastest first, at most `limit`.
        fn hashrates(limit: u32) -> Vec<(AccountId, DrillingRecord, u128)>;
        /// A stored drilling task.
        fn task(id: TaskId) -> Option<Task<AccountId, BlockNumber>>;
        /// Ids of the unfinished tasks `who` must commit or reveal, lowest first, at most `limit`.
        fn tasks_of(who: AccountId, limit: u32) -> Vec<TaskId>;
    }
}
