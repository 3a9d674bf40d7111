//! `ergon_hashrate`, `ergon_hashrates` and `ergon_drillingTasksOf`: trainers' measured drilling
//! throughput (so users can compare trainers before hiring them) and the tasks a driller must do.
//! Amounts are micro-ut as decimal strings (they exceed JavaScript's safe integers).

use std::sync::Arc;

use ergon_runtime::{opaque::Block, AccountId, BlockNumber};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use pallet_drilling_runtime_api::{DrillingApi, DrillingRecord, TaskId};
use serde::Serialize;
use sp_api::ProvideRuntimeApi;
use sp_blockchain::HeaderBackend;
use sp_core::crypto::Ss58Codec;

use super::{check_limit, runtime_error};

/// Most rows `ergon_hashrates` and `ergon_drillingTasksOf` return in one call.
pub const MAX_ROWS: u32 = 1_000;

/// A trainer's measured drilling throughput in JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HashrateView {
    /// SS58 address of the trainer.
    pub account: String,
    /// Drilling tasks it completed with agreement.
    pub tasks: u32,
    /// Σ difficulty of those tasks (micro-ut).
    pub difficulty_micro_ut: String,
    /// Σ time from issuance to its commitment over those tasks (ms).
    pub busy_ms: u64,
    /// Throughput over all its tasks, Σ difficulty / Σ time (micro-ut per hour; a lower bound,
    /// since time is counted to the block that included the commitment).
    pub micro_ut_per_hour: String,
    /// The same in ut per hour, for display.
    pub ut_per_hour: f64,
    /// Throughput of its last task (micro-ut per hour).
    pub last_micro_ut_per_hour: String,
}

fn view(who: AccountId, record: DrillingRecord, rate: u128) -> HashrateView {
    HashrateView {
        account: who.to_ss58check(),
        tasks: record.tasks,
        difficulty_micro_ut: record.difficulty.to_string(),
        busy_ms: record.busy_ms,
        micro_ut_per_hour: rate.to_string(),
        ut_per_hour: rate as f64 / 1e6,
        last_micro_ut_per_hour: record.last_micro_ut_per_hour.to_string(),
    }
}

/// The drilling RPC methods.
#[rpc(server)]
pub trait DrillingRpc<BlockHash> {
    /// `who`'s measured drilling throughput at block `at` (best block when omitted); null before
    /// its first agreed task.
    #[method(name = "ergon_hashrate")]
    fn hashrate(&self, who: AccountId, at: Option<BlockHash>) -> RpcResult<Option<HashrateView>>;

    /// Trainers with a drilling record, fastest first: `limit` (default 100, at most 1,000).
    #[method(name = "ergon_hashrates")]
    fn hashrates(&self, limit: Option<u32>, at: Option<BlockHash>) -> RpcResult<Vec<HashrateView>>;

    /// Ids of the unfinished drilling tasks `who` must commit or reveal.
    #[method(name = "ergon_drillingTasksOf")]
    fn tasks_of(
        &self,
        who: AccountId,
        limit: Option<u32>,
        at: Option<BlockHash>,
    ) -> RpcResult<Vec<TaskId>>;
}

/// Implementation over a client.
pub struct DrillingRpcImpl<C> {
    client: Arc<C>,
}

impl<C> DrillingRpcImpl<C> {
    /// The RPC handler reading through `client`.
    pub fn new(client: Arc<C>) -> Self {
        Self { client }
    }
}

type Hash = <Block as sp_runtime::traits::Block>::Hash;

impl<C> DrillingRpcServer<Hash> for DrillingRpcImpl<C>
where
    C: ProvideRuntimeApi<Block> + HeaderBackend<Block> + Send + Sync + 'static,
    C::Api: DrillingApi<Block, AccountId, BlockNumber>,
{
    fn hashrate(&self, who: AccountId, at: Option<Hash>) -> RpcResult<Option<HashrateView>> {
        let at = at.unwrap_or_else(|| self.client.info().best_hash);
        let row = self.client.runtime_api().hashrate(at, who.clone()).map_err(runtime_error)?;
        Ok(row.map(|(record, rate)| view(who, record, rate)))
    }

    fn hashrates(&self, limit: Option<u32>, at: Option<Hash>) -> RpcResult<Vec<HashrateView>> {
        let limit = check_limit(limit, MAX_ROWS)?;
        let at = at.unwrap_or_else(|| self.client.info().best_hash);
        let rows = self.client.runtime_api().hashrates(at, limit).map_err(runtime_error)?;
        Ok(rows.into_iter().map(|(who, record, rate)| view(who, record, rate)).collect())
    }

    fn tasks_of(
        &self,
        who: AccountId,
        limit: Option<u32>,
        at: Option<Hash>,
    ) -> RpcResult<Vec<TaskId>> {
        let limit = check_limit(limit, MAX_ROWS)?;
        let at = at.unwrap_or_else(|| self.client.info().best_hash);
        self.client.runtime_api().tasks_of(at, who, limit).map_err(runtime_error)
    }
}
