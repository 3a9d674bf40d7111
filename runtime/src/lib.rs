//! # Ergon runtime
//!
//! The FRAME runtime of the Ergon chain, a decentralized AI-training compute market.
//!
//! Consensus: BABE produces blocks in primary VRF slots only (`AllowedSlots::PrimarySlots`), so each
//! authority's chance to author is governed by its weight, which [`proof_of_hashrate`] derives from
//! its effective computing power; GRANDPA finalizes. Sessions rotate with BABE
//! epochs and carry the BABE and GRANDPA session keys.
//!
//! Layout: [`configs`] holds the pallet configurations, [`apis`] the runtime APIs the node and clients
//! call, [`genesis_config_presets`] the `development` and `local_testnet` genesis presets.

#![cfg_attr(not(feature = "std"), no_std)]
// `construct_runtime!` and the runtime API macros expand to deeply nested types.
#![recursion_limit = "256"]

#[cfg(feature = "std")]
include!(concat!(env!("OUT_DIR"), "/wasm_binary.rs"));

extern crate alloc;

pub mod apis;
#[cfg(feature = "runtime-benchmarks")]
mod benchmarks;
pub use apis::RuntimeApi;
pub mod configs;
pub mod durations;
pub mod finality_weights;
pub mod genesis_config_presets;
pub mod proof_of_hashrate;
#[cfg(all(test, feature = "try-runtime"))]
mod snapshot_tests;
#[cfg(test)]
mod tests;

use alloc::{borrow::Cow, vec::Vec};
use sp_runtime::{
    generic, impl_opaque_keys,
    traits::{BlakeTwo256, IdentifyAccount, Verify},
    MultiAddress, MultiSignature,
};
use sp_version::RuntimeVersion;

pub use frame_support::{construct_runtime, derive_impl, parameter_types};
pub use pallet_balances::Call as BalancesCall;
pub use pallet_timestamp::Call as TimestampCall;
#[cfg(any(feature = "std", test))]
pub use sp_runtime::BuildStorage;

/// Basic primitive types of the chain.
pub mod primitives {
    use super::*;

    /// An index to a block.
    pub type BlockNumber = u32;
    /// Alias to 512-bit hash when used in the context of a transaction signature on the chain.
    pub type Signature = MultiSignature;
    /// Some way of identifying an account on the chain (an sr25519/ed25519/ecdsa public key).
    pub type AccountId = <<Signature as Verify>::Signer as IdentifyAccount>::AccountId;
    /// Balance of an account, in plancks (10^-12 ERG).
    pub type Balance = u128;
    /// Index of a transaction in the chain.
    pub type Nonce = u32;
    /// A hash of some data used by the chain.
    pub type Hash = sp_core::H256;
    /// Timestamps in milliseconds since the Unix epoch.
    pub type Moment = u64;
}
pub use primitives::*;

/// Opaque types: the node knows blocks and extrinsics only as bytes, so it does not depend on the
/// runtime's concrete call type.
pub mod opaque {
    use super::*;
    use alloc::vec::Vec;
    pub use sp_runtime::OpaqueExtrinsic as UncheckedExtrinsic;

    /// Opaque block header type.
    pub type Header = generic::Header<BlockNumber, BlakeTwo256>;
    /// Opaque block type.
    pub type Block = generic::Block<Header, UncheckedExtrinsic>;
    /// Opaque block identifier type.
    pub type BlockId = generic::BlockId<Block>;

    impl_opaque_keys! {
        /// The session keys of a validator: BABE for authorship, GRANDPA for finality, `ergn`
        /// for signing bundle-availability attestations and `imon` for heartbeats.
        pub struct SessionKeys {
            pub babe: super::Babe,
            pub grandpa: super::Grandpa,
            pub ergon: super::JobMarket,
            pub im_online: super::ImOnline,
        }
    }
}
pub use opaque::SessionKeys;

/// The runtime version. Bump `spec_version` on every change of runtime logic.
#[sp_version::runtime_version]
pub const VERSION: RuntimeVersion = RuntimeVersion {
    spec_name: Cow::Borrowed("ergon"),
    impl_name: Cow::Borrowed("ergon-node"),
    authoring_version: 1,
    spec_version: 117,
    impl_version: 1,
    apis: apis::RUNTIME_API_VERSIONS,
    transaction_version: 2,
    system_version: 1,
};

/// Time and token units.
pub mod units {
    use super::{Balance, BlockNumber};

    /// One ERG: 12 decimals (the one definition, `ergon_protocol::units`).
    pub const ERG: Balance = ergon_protocol::units::ERG;
    /// 10^-3 ERG.
    pub const MILLI_ERG: Balance = ERG / 1_000;
    /// 10^-6 ERG.
    pub const MICRO_ERG: Balance = MILLI_ERG / 1_000;
    /// The smallest balance an account may hold.
    pub const EXISTENTIAL_DEPOSIT: Balance = MILLI_ERG;

    // Slots, blocks and epochs: both builds' values are in `durations`.
    pub use crate::durations::{
        EPOCH_DURATION_IN_SLOTS, MILLI_SECS_PER_BLOCK, PRIMARY_PROBABILITY, SLOT_DURATION,
    };

    /// One minute, in blocks.
    pub const MINUTES: BlockNumber = 60_000 / (MILLI_SECS_PER_BLOCK as BlockNumber);
    /// One hour, in blocks.
    pub const HOURS: BlockNumber = MINUTES * 60;
    /// One day, in blocks.
    pub const DAYS: BlockNumber = HOURS * 24;
}

/// The BABE epoch configuration at genesis: `c` = 1/3 and primary slots only, so authorship follows the
/// authorities' weights (secondary slots would be assigned round-robin, ignoring weight).
pub const BABE_GENESIS_EPOCH_CONFIG: sp_consensus_babe::BabeEpochConfiguration =
    sp_consensus_babe::BabeEpochConfiguration {
        c: units::PRIMARY_PROBABILITY,
        allowed_slots: sp_consensus_babe::AllowedSlots::PrimarySlots,
    };

/// The address format for describing accounts.
pub type Address = MultiAddress<AccountId, ()>;
/// Block header type as expected by this runtime.
pub type Header = generic::Header<BlockNumber, BlakeTwo256>;
/// Block type as expected by this runtime.
pub type Block = generic::Block<Header, UncheckedExtrinsic>;
/// A Block signed with a Justification.
pub type SignedBlock = generic::SignedBlock<Block>;
/// BlockId type as expected by this runtime.
pub type BlockId = generic::BlockId<Block>;

/// The transaction extensions: checks and payment applied to every signed transaction.
pub type TxExtension = (
    // Sets the origin of a call its pallet authorizes (im-online's heartbeats); encodes to nothing.
    frame_system::AuthorizeCall<Runtime>,
    frame_system::CheckNonZeroSender<Runtime>,
    frame_system::CheckSpecVersion<Runtime>,
    frame_system::CheckTxVersion<Runtime>,
    frame_system::CheckGenesis<Runtime>,
    frame_system::CheckEra<Runtime>,
    frame_system::CheckNonce<Runtime>,
    frame_system::CheckWeight<Runtime>,
    pallet_transaction_payment::ChargeTransactionPayment<Runtime>,
);

/// Unchecked extrinsic type as expected by this runtime.
pub type UncheckedExtrinsic =
    generic::UncheckedExtrinsic<Address, RuntimeCall, Signature, TxExtension>;
/// The payload being signed in transactions.
pub type SignedPayload = generic::SignedPayload<RuntimeCall, TxExtension>;

/// Storage migrations run on runtime upgrade.
type Migrations = (
    pallet_job_market::migrations::SpecV2<Runtime>,
    pallet_job_market::migrations::VerifierCapacity<Runtime>,
    pallet_job_market::migrations::BidClasses<Runtime>,
    pallet_job_market::migrations::SpecPrecision<Runtime>,
    pallet_job_market::migrations::PoolTrees<Runtime>,
);

/// Executive: handles dispatch to the various pallets.
pub type Executive = frame_executive::Executive<
    Runtime,
    Block,
    frame_system::ChainContext<Runtime>,
    Runtime,
    AllPalletsWithSystem,
    Migrations,
>;

#[frame_support::runtime]
mod runtime {
    #[runtime::runtime]
    #[runtime::derive(
        RuntimeCall,
        RuntimeEvent,
        RuntimeError,
        RuntimeOrigin,
        RuntimeFreezeReason,
        RuntimeHoldReason,
        RuntimeSlashReason,
        RuntimeLockId,
        RuntimeTask,
        RuntimeViewFunction
    )]
    pub struct Runtime;

    #[runtime::pallet_index(0)]
    pub type System = frame_system;

    #[runtime::pallet_index(1)]
    pub type Timestamp = pallet_timestamp;

    #[runtime::pallet_index(2)]
    pub type Babe = pallet_babe;

    #[runtime::pallet_index(3)]
    pub type Authorship = pallet_authorship;

    // Before the job market and drilling: their draws at a block's start read the accumulator with
    // the parent's VRF output already in it.
    #[runtime::pallet_index(15)]
    pub type FreshRandomness = pallet_fresh_randomness;

    #[runtime::pallet_index(4)]
    pub type Balances = pallet_balances;

    #[runtime::pallet_index(5)]
    pub type TransactionPayment = pallet_transaction_payment;

    // ComputePower and TrainerStaking come before Session: the genesis credit and bonds must exist
    // when the session's genesis asks TrainerStaking for the first validators and hands them to
    // Proof of Hashrate (genesis is built in pallet order).
    #[runtime::pallet_index(6)]
    pub type ComputePower = pallet_compute_power;

    #[runtime::pallet_index(7)]
    pub type TrainerStaking = pallet_trainer_staking;

    #[runtime::pallet_index(8)]
    pub type Offences = pallet_offences;

    #[runtime::pallet_index(9)]
    pub type Historical = pallet_session::historical;

    #[runtime::pallet_index(10)]
    pub type Session = pallet_session;

    #[runtime::pallet_index(11)]
    pub type Grandpa = pallet_grandpa;

    #[runtime::pallet_index(12)]
    pub type Sudo = pallet_sudo;

    #[runtime::pallet_index(13)]
    pub type JobMarket = pallet_job_market;

    #[runtime::pallet_index(14)]
    pub type Drilling = pallet_drilling;

    #[runtime::pallet_index(16)]
    pub type ImOnline = pallet_im_online;
}
