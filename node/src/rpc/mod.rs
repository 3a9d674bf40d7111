//! The node's JSON-RPC extensions beyond Substrate's defaults (system, chain, state, author):
//! account nonces, fee queries, BABE epoch authorship, GRANDPA finality, trainers' computing power and
//! the job market, drilling hashrates.

pub mod compute_power;
pub mod drilling;
pub mod job_market;

use jsonrpsee::types::{error::ErrorObject, ErrorObjectOwned};

/// Rows a listing method returns when the caller gives no limit.
pub const DEFAULT_LIMIT: u32 = 100;

/// A runtime API call that failed, as a JSON-RPC error (code 1).
pub fn runtime_error(e: impl ToString) -> ErrorObjectOwned {
    ErrorObject::owned(1, "runtime API call failed", Some(e.to_string()))
}

/// The caller's `limit` (default [`DEFAULT_LIMIT`]), or a JSON-RPC error (code 2) above `max`.
pub fn check_limit(limit: Option<u32>, max: u32) -> Result<u32, ErrorObjectOwned> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if limit > max {
        return Err(ErrorObject::owned(
            2,
            format!("limit {limit} is above the maximum of {max}"),
            None::<()>,
        ));
    }
    Ok(limit)
}

use std::sync::Arc;

use ergon_runtime::{opaque::Block, AccountId, Balance, Nonce};
use jsonrpsee::RpcModule;
use sc_consensus_babe::BabeWorkerHandle;
use sc_consensus_grandpa::{
    FinalityProofProvider, GrandpaJustificationStream, SharedAuthoritySet, SharedVoterState,
};
use sc_rpc::SubscriptionTaskExecutor;
use sc_transaction_pool_api::TransactionPool;
use sp_api::ProvideRuntimeApi;
use sp_block_builder::BlockBuilder;
use sp_blockchain::{Error as BlockChainError, HeaderBackend, HeaderMetadata};
use sp_consensus::SelectChain;
use sp_consensus_babe::BabeApi;
use sp_keystore::KeystorePtr;

/// What the BABE RPC needs.
pub struct BabeDeps {
    /// A handle to the BABE worker, for epoch data.
    pub babe_worker_handle: BabeWorkerHandle<Block>,
    /// The keystore, to tell which slots this node may author.
    pub keystore: KeystorePtr,
}

/// What the GRANDPA RPC needs.
pub struct GrandpaDeps<B> {
    /// Voting round info.
    pub shared_voter_state: SharedVoterState,
    /// Authority set info.
    pub shared_authority_set: SharedAuthoritySet<<Block as sp_runtime::traits::Block>::Hash, u32>,
    /// Receives notifications about justification events from GRANDPA.
    pub justification_stream: GrandpaJustificationStream<Block>,
    /// Executor to drive the subscription manager in the GRANDPA RPC handler.
    pub subscription_executor: SubscriptionTaskExecutor,
    /// Finality proof provider.
    pub finality_provider: Arc<FinalityProofProvider<B, Block>>,
}

/// Everything the full node's RPC extensions need.
pub struct FullDeps<C, P, SC, B> {
    /// The client.
    pub client: Arc<C>,
    /// The transaction pool.
    pub pool: Arc<P>,
    /// The chain selection rule.
    pub select_chain: SC,
    /// BABE dependencies.
    pub babe: BabeDeps,
    /// GRANDPA dependencies.
    pub grandpa: GrandpaDeps<B>,
}

/// Builds the RPC extensions of a full node.
pub fn create_full<C, P, SC, B>(
    deps: FullDeps<C, P, SC, B>,
) -> Result<RpcModule<()>, Box<dyn std::error::Error + Send + Sync>>
where
    C: ProvideRuntimeApi<Block>
        + HeaderBackend<Block>
        + HeaderMetadata<Block, Error = BlockChainError>
        + Send
        + Sync
        + 'static,
    C::Api: substrate_frame_rpc_system::AccountNonceApi<Block, AccountId, Nonce>,
    C::Api: pallet_transaction_payment_rpc::TransactionPaymentRuntimeApi<Block, Balance>,
    C::Api: BabeApi<Block>,
    C::Api: BlockBuilder<Block>,
    C::Api: pallet_compute_power_runtime_api::ComputePowerApi<Block, AccountId>,
    C::Api: pallet_job_market_runtime_api::JobMarketApi<
        Block,
        AccountId,
        Balance,
        ergon_runtime::BlockNumber,
    >,
    C::Api: pallet_drilling_runtime_api::DrillingApi<Block, AccountId, ergon_runtime::BlockNumber>,
    P: TransactionPool + 'static,
    SC: SelectChain<Block> + 'static,
    B: sc_client_api::Backend<Block> + Send + Sync + 'static,
    B::State: sc_client_api::StateBackend<sp_runtime::traits::HashingFor<Block>>,
{
    use compute_power::{ComputePowerRpcImpl, ComputePowerRpcServer};
    use drilling::{DrillingRpcImpl, DrillingRpcServer};
    use job_market::{JobMarketRpcImpl, JobMarketRpcServer};
    use pallet_transaction_payment_rpc::{TransactionPayment, TransactionPaymentApiServer};
    use sc_consensus_babe_rpc::{Babe, BabeApiServer};
    use sc_consensus_grandpa_rpc::{Grandpa, GrandpaApiServer};
    use substrate_frame_rpc_system::{System, SystemApiServer};

    let mut module = RpcModule::new(());
    let FullDeps { client, pool, select_chain, babe, grandpa } = deps;

    module.merge(System::new(client.clone(), pool).into_rpc())?;
    module.merge(TransactionPayment::new(client.clone()).into_rpc())?;
    module.merge(ComputePowerRpcImpl::new(client.clone()).into_rpc())?;
    module.merge(JobMarketRpcImpl::new(client.clone()).into_rpc())?;
    module.merge(DrillingRpcImpl::new(client.clone()).into_rpc())?;
    module.merge(
        Babe::new(client.clone(), babe.babe_worker_handle, babe.keystore, select_chain).into_rpc(),
    )?;
    module.merge(
        Grandpa::new(
            grandpa.subscription_executor,
            grandpa.shared_authority_set,
            grandpa.shared_voter_state,
            grandpa.justification_stream,
            grandpa.finality_provider,
        )
        .into_rpc(),
    )?;

    Ok(module)
}
