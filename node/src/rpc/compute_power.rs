//! `ergon_ecp` and `ergon_topTrainers`: trainers' effective computing power, decayed to the queried
//! block. Amounts are micro-ut as decimal strings (they exceed JavaScript's safe integers).

use std::sync::Arc;

use ergon_runtime::{opaque::Block, AccountId};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use pallet_compute_power_runtime_api::{ComputePower, ComputePowerApi};
use serde::Serialize;
use sp_api::ProvideRuntimeApi;
use sp_blockchain::HeaderBackend;
use sp_core::crypto::Ss58Codec;

use super::{check_limit, runtime_error};

/// Most trainers `ergon_topTrainers` returns in one call.
pub const MAX_TOP_TRAINERS: u32 = 1_000;

/// A trainer's computing power in JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ComputePowerView {
    /// Drilling credit D (micro-ut).
    pub drilling: String,
    /// Training credit T (micro-ut).
    pub training: String,
    /// Effective computing power 0.4·D + 0.6·T (micro-ut).
    pub ecp: String,
    /// Undecayed lifetime total ("total computing power value", micro-ut).
    pub lifetime: String,
}

impl From<ComputePower> for ComputePowerView {
    fn from(p: ComputePower) -> Self {
        ComputePowerView {
            drilling: p.drilling.to_string(),
            training: p.training.to_string(),
            ecp: p.ecp.to_string(),
            lifetime: p.lifetime.to_string(),
        }
    }
}

/// One row of `ergon_topTrainers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainerView {
    /// SS58 address of the trainer.
    pub account: String,
    /// Its computing power.
    #[serde(flatten)]
    pub power: ComputePowerView,
}

/// The compute-power RPC methods.
#[rpc(server)]
pub trait ComputePowerRpc<BlockHash> {
    /// `who`'s D, T, ECP and lifetime total at block `at` (best block when omitted).
    #[method(name = "ergon_ecp")]
    fn ecp(&self, who: AccountId, at: Option<BlockHash>) -> RpcResult<ComputePowerView>;

    /// The trainers with the highest ECP, highest first: `limit` (default 100, at most 1,000).
    #[method(name = "ergon_topTrainers")]
    fn top_trainers(
        &self,
        limit: Option<u32>,
        at: Option<BlockHash>,
    ) -> RpcResult<Vec<TrainerView>>;
}

/// Implementation over a client.
pub struct ComputePowerRpcImpl<C> {
    client: Arc<C>,
}

impl<C> ComputePowerRpcImpl<C> {
    /// The RPC handler reading through `client`.
    pub fn new(client: Arc<C>) -> Self {
        Self { client }
    }
}

impl<C> ComputePowerRpcServer<<Block as sp_runtime::traits::Block>::Hash> for ComputePowerRpcImpl<C>
where
    C: ProvideRuntimeApi<Block> + HeaderBackend<Block> + Send + Sync + 'static,
    C::Api: ComputePowerApi<Block, AccountId>,
{
    fn ecp(
        &self,
        who: AccountId,
        at: Option<<Block as sp_runtime::traits::Block>::Hash>,
    ) -> RpcResult<ComputePowerView> {
        let at = at.unwrap_or_else(|| self.client.info().best_hash);
        let power = self.client.runtime_api().compute_power(at, who).map_err(runtime_error)?;
        Ok(power.into())
    }

    fn top_trainers(
        &self,
        limit: Option<u32>,
        at: Option<<Block as sp_runtime::traits::Block>::Hash>,
    ) -> RpcResult<Vec<TrainerView>> {
        let limit = check_limit(limit, MAX_TOP_TRAINERS)?;
        let at = at.unwrap_or_else(|| self.client.info().best_hash);
        let rows = self.client.runtime_api().top_trainers(at, limit).map_err(runtime_error)?;
        Ok(rows
            .into_iter()
            .map(|(who, power)| TrainerView { account: who.to_ss58check(), power: power.into() })
            .collect())
    }
}
