//! The runtime APIs: what the node, the RPC layer and clients call into the runtime for.

use alloc::vec::Vec;
use frame_support::{
    genesis_builder_helper::{build_state, get_preset},
    weights::Weight,
};
use sp_api::impl_runtime_apis;
use sp_core::{crypto::KeyTypeId, OpaqueMetadata};
use sp_runtime::{
    traits::{Block as BlockT, NumberFor},
    transaction_validity::{TransactionSource, TransactionValidity},
    ApplyExtrinsicResult, ExtrinsicInclusionMode,
};
use sp_version::RuntimeVersion;

use crate::{
    AccountId, Babe, Balance, Block, BlockNumber, ComputePower, Drilling, Executive, Grandpa,
    Historical, InherentDataExt, JobMarket, Nonce, Runtime, RuntimeCall, RuntimeGenesisConfig,
    SessionKeys, System, TransactionPayment, VERSION,
};

impl_runtime_apis! {
    impl sp_api::Core<Block> for Runtime {
        fn version() -> RuntimeVersion {
            VERSION
        }

        fn execute_block(block: <Block as BlockT>::LazyBlock) {
            Executive::execute_block(block);
        }

        fn initialize_block(header: &<Block as BlockT>::Header) -> ExtrinsicInclusionMode {
            Executive::initialize_block(header)
        }
    }

    impl sp_api::Metadata<Block> for Runtime {
        fn metadata() -> OpaqueMetadata {
            OpaqueMetadata::new(Runtime::metadata().into())
        }

        fn metadata_at_version(version: u32) -> Option<OpaqueMetadata> {
            Runtime::metadata_at_version(version)
        }

        fn metadata_versions() -> Vec<u32> {
            Runtime::metadata_versions()
        }
    }

    impl sp_block_builder::BlockBuilder<Block> for Runtime {
        fn apply_extrinsic(extrinsic: <Block as BlockT>::Extrinsic) -> ApplyExtrinsicResult {
            Executive::apply_extrinsic(extrinsic)
        }

        fn finalize_block() -> <Block as BlockT>::Header {
            Executive::finalize_block()
        }

        fn inherent_extrinsics(data: sp_inherents::InherentData) -> Vec<<Block as BlockT>::Extrinsic> {
            data.create_extrinsics()
        }

        fn check_inherents(
            block: <Block as BlockT>::LazyBlock,
            data: sp_inherents::InherentData,
        ) -> sp_inherents::CheckInherentsResult {
            data.check_extrinsics(&block)
        }
    }

    impl sp_transaction_pool::runtime_api::TaggedTransactionQueue<Block> for Runtime {
        fn validate_transaction(
            source: TransactionSource,
            tx: <Block as BlockT>::Extrinsic,
            block_hash: <Block as BlockT>::Hash,
        ) -> TransactionValidity {
            Executive::validate_transaction(source, tx, block_hash)
        }
    }

    impl sp_offchain::OffchainWorkerApi<Block> for Runtime {
        fn offchain_worker(header: &<Block as BlockT>::Header) {
            Executive::offchain_worker(header)
        }
    }

    impl sp_consensus_babe::BabeApi<Block> for Runtime {
        fn configuration() -> sp_consensus_babe::BabeConfiguration {
            let epoch_config = Babe::epoch_config().unwrap_or(crate::BABE_GENESIS_EPOCH_CONFIG);
            sp_consensus_babe::BabeConfiguration {
                slot_duration: Babe::slot_duration(),
                epoch_length: crate::units::EPOCH_DURATION_IN_SLOTS,
                c: epoch_config.c,
                authorities: Babe::authorities().to_vec(),
                randomness: Babe::randomness(),
                allowed_slots: epoch_config.allowed_slots,
            }
        }

        fn current_epoch_start() -> sp_consensus_babe::Slot {
            Babe::current_epoch_start()
        }

        fn current_epoch() -> sp_consensus_babe::Epoch {
            Babe::current_epoch()
        }

        fn next_epoch() -> sp_consensus_babe::Epoch {
            Babe::next_epoch()
        }

        fn generate_key_ownership_proof(
            _slot: sp_consensus_babe::Slot,
            authority_id: sp_consensus_babe::AuthorityId,
        ) -> Option<sp_consensus_babe::OpaqueKeyOwnershipProof> {
            use codec::Encode;
            use frame_support::traits::KeyOwnerProofSystem;
            Historical::prove((sp_consensus_babe::KEY_TYPE, authority_id))
                .map(|proof| proof.encode())
                .map(sp_consensus_babe::OpaqueKeyOwnershipProof::new)
        }

        fn submit_report_equivocation_unsigned_extrinsic(
            equivocation_proof: sp_consensus_babe::EquivocationProof<<Block as BlockT>::Header>,
            key_owner_proof: sp_consensus_babe::OpaqueKeyOwnershipProof,
        ) -> Option<()> {
            let key_owner_proof = key_owner_proof.decode()?;
            Babe::submit_unsigned_equivocation_report(equivocation_proof, key_owner_proof)
        }
    }

    impl sp_consensus_grandpa::GrandpaApi<Block> for Runtime {
        fn grandpa_authorities() -> sp_consensus_grandpa::AuthorityList {
            Grandpa::grandpa_authorities()
        }

        fn current_set_id() -> sp_consensus_grandpa::SetId {
            Grandpa::current_set_id()
        }

        fn submit_report_equivocation_unsigned_extrinsic(
            equivocation_proof: sp_consensus_grandpa::EquivocationProof<
                <Block as BlockT>::Hash,
                NumberFor<Block>,
            >,
            key_owner_proof: sp_consensus_grandpa::OpaqueKeyOwnershipProof,
        ) -> Option<()> {
            let key_owner_proof = key_owner_proof.decode()?;
            Grandpa::submit_unsigned_equivocation_report(equivocation_proof, key_owner_proof)
        }

        fn generate_key_ownership_proof(
            _set_id: sp_consensus_grandpa::SetId,
            authority_id: sp_consensus_grandpa::AuthorityId,
        ) -> Option<sp_consensus_grandpa::OpaqueKeyOwnershipProof> {
            use codec::Encode;
            use frame_support::traits::KeyOwnerProofSystem;
            Historical::prove((sp_consensus_grandpa::KEY_TYPE, authority_id))
                .map(|proof| proof.encode())
                .map(sp_consensus_grandpa::OpaqueKeyOwnershipProof::new)
        }
    }

    impl sp_session::SessionKeys<Block> for Runtime {
        fn generate_session_keys(
            owner: Vec<u8>,
            seed: Option<Vec<u8>>,
        ) -> sp_session::OpaqueGeneratedSessionKeys {
            SessionKeys::generate(&owner, seed).into()
        }

        fn decode_session_keys(encoded: Vec<u8>) -> Option<Vec<(Vec<u8>, KeyTypeId)>> {
            SessionKeys::decode_into_raw_public_keys(&encoded)
        }
    }

    impl frame_system_rpc_runtime_api::AccountNonceApi<Block, AccountId, Nonce> for Runtime {
        fn account_nonce(account: AccountId) -> Nonce {
            System::account_nonce(account)
        }
    }

    impl pallet_transaction_payment_rpc_runtime_api::TransactionPaymentApi<Block, Balance> for Runtime {
        fn query_info(
            uxt: <Block as BlockT>::Extrinsic,
            len: u32,
        ) -> pallet_transaction_payment_rpc_runtime_api::RuntimeDispatchInfo<Balance> {
            TransactionPayment::query_info(uxt, len)
        }

        fn query_fee_details(
            uxt: <Block as BlockT>::Extrinsic,
            len: u32,
        ) -> pallet_transaction_payment::FeeDetails<Balance> {
            TransactionPayment::query_fee_details(uxt, len)
        }

        fn query_weight_to_fee(weight: Weight) -> Balance {
            TransactionPayment::weight_to_fee(weight)
        }

        fn query_length_to_fee(length: u32) -> Balance {
            TransactionPayment::length_to_fee(length)
        }
    }

    impl pallet_transaction_payment_rpc_runtime_api::TransactionPaymentCallApi<Block, Balance, RuntimeCall>
        for Runtime
    {
        fn query_call_info(
            call: RuntimeCall,
            len: u32,
        ) -> pallet_transaction_payment::RuntimeDispatchInfo<Balance> {
            TransactionPayment::query_call_info(call, len)
        }

        fn query_call_fee_details(
            call: RuntimeCall,
            len: u32,
        ) -> pallet_transaction_payment::FeeDetails<Balance> {
            TransactionPayment::query_call_fee_details(call, len)
        }

        fn query_weight_to_fee(weight: Weight) -> Balance {
            TransactionPayment::weight_to_fee(weight)
        }

        fn query_length_to_fee(length: u32) -> Balance {
            TransactionPayment::length_to_fee(length)
        }
    }

    #[api_version(4)]
    impl pallet_job_market_runtime_api::JobMarketApi<Block, AccountId, Balance, BlockNumber>
        for Runtime
    {
        fn open_jobs(
            limit: u32,
        ) -> Vec<(pallet_job_market::JobId, pallet_job_market::Job<AccountId, Balance, BlockNumber>)>
        {
            JobMarket::open_jobs(limit)
        }

        fn job(
            id: pallet_job_market::JobId,
        ) -> Option<(
            pallet_job_market::Job<AccountId, Balance, BlockNumber>,
            Option<pallet_job_market::RoundInfo<AccountId>>,
        )> {
            pallet_job_market::Jobs::<Runtime>::get(id).map(|job| (job, JobMarket::round_info(id)))
        }

        fn check_spec(
            spec: pallet_job_market_runtime_api::JobSpec,
        ) -> Result<
            pallet_job_market_runtime_api::SpecSummary,
            pallet_job_market_runtime_api::SpecRejection,
        > {
            pallet_job_market::spec_check::check::<Runtime>(&spec)
        }

        fn least_budget(
            spec: pallet_job_market_runtime_api::JobSpec,
        ) -> Result<Balance, pallet_job_market_runtime_api::SpecRejection> {
            JobMarket::least_budget(&spec)
        }

        fn least_budgets(
            spec: pallet_job_market_runtime_api::JobSpec,
        ) -> Result<
            pallet_job_market_runtime_api::PerClass<Option<Balance>>,
            pallet_job_market_runtime_api::SpecRejection,
        > {
            JobMarket::least_budgets(&spec)
        }

        fn jobs_of(who: AccountId, limit: u32) -> Vec<pallet_job_market::JobId> {
            JobMarket::jobs_of(&who, limit)
        }

        fn bid_ceiling(
            id: pallet_job_market::JobId,
            device: pallet_job_market::DeviceClass,
        ) -> Option<Balance> {
            JobMarket::bid_ceiling(id, device)
        }
    }

    impl pallet_drilling_runtime_api::DrillingApi<Block, AccountId, BlockNumber> for Runtime {
        fn hashrate(who: AccountId) -> Option<(pallet_drilling::DrillingRecord, u128)> {
            Drilling::hashrate(&who)
        }

        fn hashrates(limit: u32) -> Vec<(AccountId, pallet_drilling::DrillingRecord, u128)> {
            Drilling::hashrates(limit)
        }

        fn task(
            id: pallet_drilling::TaskId,
        ) -> Option<pallet_drilling::Task<AccountId, BlockNumber>> {
            pallet_drilling::Tasks::<Runtime>::get(id)
        }

        fn tasks_of(who: AccountId, limit: u32) -> Vec<pallet_drilling::TaskId> {
            Drilling::tasks_of(&who, limit)
        }
    }

    impl pallet_compute_power_runtime_api::ComputePowerApi<Block, AccountId> for Runtime {
        fn compute_power(who: AccountId) -> pallet_compute_power::ComputePower {
            ComputePower::compute_power(&who)
        }

        fn top_trainers(limit: u32) -> Vec<(AccountId, pallet_compute_power::ComputePower)> {
            ComputePower::top_trainers(limit)
        }
    }

    #[cfg(feature = "runtime-benchmarks")]
    impl frame_benchmarking::Benchmark<Block> for Runtime {
        fn benchmark_metadata(extra: bool) -> (
            Vec<frame_benchmarking::BenchmarkList>,
            Vec<frame_support::traits::StorageInfo>,
        ) {
            use frame_benchmarking::{baseline::Pallet as BaselineBench, BenchmarkList};
            use frame_support::traits::StorageInfoTrait;
            use frame_system_benchmarking::Pallet as SystemBench;
            use crate::*;

            let mut list = Vec::<BenchmarkList>::new();
            list_benchmarks!(list, extra);
            (list, AllPalletsWithSystem::storage_info())
        }

        #[allow(non_local_definitions)]
        fn dispatch_benchmark(
            config: frame_benchmarking::BenchmarkConfig,
        ) -> Result<Vec<frame_benchmarking::BenchmarkBatch>, alloc::string::String> {
            use frame_benchmarking::{baseline, baseline::Pallet as BaselineBench, BenchmarkBatch};
            use frame_support::traits::WhitelistedStorageKeys;
            use frame_system_benchmarking::Pallet as SystemBench;
            use sp_storage::TrackedStorageKey;
            use crate::*;

            impl frame_system_benchmarking::Config for Runtime {}
            impl baseline::Config for Runtime {}

            let whitelist: Vec<TrackedStorageKey> = AllPalletsWithSystem::whitelisted_storage_keys();
            let mut batches = Vec::<BenchmarkBatch>::new();
            let params = (&config, &whitelist);
            add_benchmarks!(params, batches);
            Ok(batches)
        }
    }

    impl sp_genesis_builder::GenesisBuilder<Block> for Runtime {
        fn build_state(config: Vec<u8>) -> sp_genesis_builder::Result {
            build_state::<RuntimeGenesisConfig>(config)
        }

        fn get_preset(id: &Option<sp_genesis_builder::PresetId>) -> Option<Vec<u8>> {
            get_preset::<RuntimeGenesisConfig>(id, crate::genesis_config_presets::get_preset)
        }

        fn preset_names() -> Vec<sp_genesis_builder::PresetId> {
            crate::genesis_config_presets::preset_names()
        }
    }
}
