//! A connection to a node: reads at the finalized block, submissions that wait for inclusion and
//! report the runtime's error in words, and the node's `ergon_*` RPCs.

use std::time::Duration;

use subxt::{
    config::DefaultExtrinsicParamsBuilder as Params,
    error::{DispatchError, TransactionEventsError},
    rpcs::{client::ReconnectingRpcClient, LegacyRpcMethods, RpcClient},
    transactions::{Payload, TransactionStatus},
    utils::{AccountId32, Static},
    OnlineClient, SubstrateConfig,
};

use crate::{
    error::{Error, Result},
    keys::Signer,
    runtime::{self, runtime_types::pallet_job_market::types},
};

/// A job as the runtime API returns it.
pub type Job = types::Job<AccountId32, u128, u32>;
/// Where a job stands.
pub type JobState = types::JobState<AccountId32, u128, u32>;
/// A verification round as the runtime API returns it.
pub type RoundInfo = types::RoundInfo<AccountId32>;
/// A round's phase.
pub use types::Phase;

/// The client's view of the chain at a finalized block.
pub type AtBlock = subxt::client::OnlineClientAtBlock<SubstrateConfig>;

/// How long a submission may wait to be included in a block.
const INCLUSION_TIMEOUT: Duration = Duration::from_secs(120);

/// A connection to one node (it reconnects by itself when the node restarts).
#[derive(Clone)]
pub struct Chain {
    api: OnlineClient<SubstrateConfig>,
    rpc: RpcClient,
    /// One submission at a time per client: nonces are taken from the pool in order.
    submitting: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// What a submission left on chain.
pub struct Included {
    /// The block it is in.
    pub block: subxt::utils::H256,
    /// The events it emitted.
    pub events: subxt::extrinsics::ExtrinsicEvents<SubstrateConfig>,
}

impl Chain {
    /// Connects to the node at `url` (`ws://` or `wss://`) and checks that it runs the runtime this
    /// client was generated for.
    pub async fn connect(url: &str) -> Result<Chain> {
        let inner = ReconnectingRpcClient::builder()
            .build(url)
            .await
            .map_err(|e| Error::Unreachable(format!("{url}: {e}")))?;
        let rpc = RpcClient::new(inner);
        let api = OnlineClient::<SubstrateConfig>::from_rpc_client(rpc.clone()).await?;
        let chain = Chain { api, rpc, submitting: Default::default() };
        chain.check_runtime().await?;
        Ok(chain)
    }

    /// Fails with [`Error::Incompatible`] unless the finalized block's runtime is the one this
    /// client's calls were generated from.
    pub async fn check_runtime(&self) -> Result<()> {
        let at = self.at().await?;
        if runtime::is_codegen_valid_for(at.metadata_ref()) {
            Ok(())
        } else {
            Err(Error::Incompatible(format!("metadata at block {}", at.block_number())))
        }
    }

    /// The subxt client (typed storage, constants, runtime APIs, blocks).
    pub fn api(&self) -> &OnlineClient<SubstrateConfig> {
        &self.api
    }

    /// The chain at its latest finalized block.
    pub async fn at(&self) -> Result<AtBlock> {
        Ok(self.api.at_current_block().await?)
    }

    /// Calls one of the node's RPC methods (`ergon_job`, `system_health`, …).
    pub async fn rpc<R: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: subxt::rpcs::client::RpcParams,
    ) -> Result<R> {
        Ok(self.rpc.request(method, params).await?)
    }

    /// Signs `call` with `signer`, submits it and waits until it is in a block; a call the runtime
    /// refuses is an [`Error::Rejected`] naming the pallet's error and its documentation.
    pub async fn submit<C: Payload>(&self, call: &C, signer: &Signer) -> Result<Included> {
        let mut progress = {
            // The pool's next nonce counts this account's transactions still in the pool, so
            // submissions made one after another never reuse a nonce.
            let _one_at_a_time = self.submitting.lock().await;
            let account: AccountId32 = signer.public_key().to_account_id();
            let legacy = LegacyRpcMethods::<subxt::config::RpcConfigFor<SubstrateConfig>>::new(
                self.rpc.clone(),
            );
            let nonce = legacy.system_account_next_index(&account).await?;
            let params = Params::<SubstrateConfig>::new().nonce(nonce).build();
            let mut tx = self.at().await?.transactions();
            tx.sign_and_submit_then_watch(call, signer, params).await.map_err(|e| {
                // A pool refusal (bad nonce, invalid at this state) comes back at submission.
                let e = Error::from(e);
                match e {
                    Error::Other(text) => Error::NotIncluded(text),
                    e => e,
                }
            })?
        };
        let wait = async {
            while let Some(status) = progress.next().await {
                match status? {
                    TransactionStatus::InBestBlock(b) | TransactionStatus::InFinalizedBlock(b) => {
                        let block = b.block_hash();
                        return match b.wait_for_success().await {
                            Ok(events) => Ok(Included { block, events }),
                            Err(e) => Err(dispatch_error(e)),
                        };
                    }
                    TransactionStatus::Error { message }
                    | TransactionStatus::Invalid { message }
                    | TransactionStatus::Dropped { message } => {
                        return Err(Error::NotIncluded(message))
                    }
                    _ => {}
                }
            }
            Err(Error::NotIncluded("the node stopped reporting on the transaction".into()))
        };
        tokio::time::timeout(INCLUSION_TIMEOUT, wait).await.map_err(|_| {
            Error::NotIncluded(format!("not in a block after {} s", INCLUSION_TIMEOUT.as_secs()))
        })?
    }

    /// Whether every transaction `who` sent is final: none waits in the pool and none sits in a
    /// block not finalized yet (the pool's next nonce is the account's nonce at the finalized
    /// block). A client that decides from the finalized state waits for this after a restart, or
    /// it would send again what it sent just before.
    pub async fn all_finalized(&self, who: &AccountId32) -> Result<bool> {
        let legacy =
            LegacyRpcMethods::<subxt::config::RpcConfigFor<SubstrateConfig>>::new(self.rpc.clone());
        let next = legacy.system_account_next_index(who).await?;
        let at = self.at().await?;
        let info = at.storage().try_fetch(runtime::storage().system().account(), (*who,)).await?;
        let nonce = match info {
            Some(v) => v.decode().map_err(subxt::Error::from)?.nonce as u64,
            None => 0,
        };
        Ok(next == nonce)
    }

    /// Job `id` and its current round, at the finalized block.
    pub async fn job(&self, id: u64) -> Result<Option<(Job, Option<RoundInfo>)>> {
        let call = runtime::runtime_apis().job_market_api().job(id);
        Ok(self.at().await?.runtime_apis().call(call).await?)
    }

    /// The device class the trainer declared for job `id`'s bundle (`JobMarket.BundleDevice`), at
    /// the finalized block: what its verifiers were drawn by, and what its manifest must name.
    pub async fn bundle_device(&self, id: u64) -> Result<Option<ergon_protocol::DeviceClass>> {
        let at = self.at().await?;
        let query = runtime::storage().job_market().bundle_device();
        match at.storage().try_fetch(query, (id,)).await? {
            Some(v) => Ok(Some(v.decode().map_err(subxt::Error::from)?.0)),
            None => Ok(None),
        }
    }

    /// Ids of the jobs `who` owns, bid on, trains or verifies.
    pub async fn jobs_of(&self, who: &AccountId32, limit: u32) -> Result<Vec<u64>> {
        let call = runtime::runtime_apis().job_market_api().jobs_of(*who, limit);
        Ok(self.at().await?.runtime_apis().call(call).await?)
    }

    /// The jobs `who` owns, bids on, trains or verifies, each with its current round, all read at
    /// one finalized block (what a daemon looks at once per block).
    pub async fn jobs_of_with_rounds(
        &self,
        who: &AccountId32,
        limit: u32,
    ) -> Result<Vec<(u64, Job, Option<RoundInfo>)>> {
        let at = self.at().await?;
        let apis = at.runtime_apis();
        let ids = apis.call(runtime::runtime_apis().job_market_api().jobs_of(*who, limit)).await?;
        let mut jobs = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some((job, round)) =
                apis.call(runtime::runtime_apis().job_market_api().job(id)).await?
            {
                jobs.push((id, job, round));
            }
        }
        Ok(jobs)
    }

    /// The highest price a bid on job `id` naming `device` may ask (the budget less the fees of
    /// every vote the job may pay), at the finalized block; `None` unless the job takes bids.
    pub async fn bid_ceiling(
        &self,
        id: u64,
        device: ergon_protocol::DeviceClass,
    ) -> Result<Option<u128>> {
        let call = runtime::runtime_apis().job_market_api().bid_ceiling(id, Static(device));
        Ok(self.at().await?.runtime_apis().call(call).await?)
    }

    /// Jobs taking bids, lowest id first.
    pub async fn open_jobs(&self, limit: u32) -> Result<Vec<(u64, Job)>> {
        let call = runtime::runtime_apis().job_market_api().open_jobs(limit);
        Ok(self.at().await?.runtime_apis().call(call).await?)
    }
}

/// The runtime's refusal in words: `JobMarket.PriceAboveBudget: The price exceeds …`.
fn dispatch_error(e: TransactionEventsError) -> Error {
    match e {
        TransactionEventsError::ExtrinsicFailed(DispatchError::Module(m)) => match m.details() {
            Ok(d) => Error::Rejected {
                pallet: d.pallet.name().to_string(),
                error: d.variant.name.clone(),
                docs: d.variant.docs.join(" "),
            },
            Err(_) => Error::Other(m.to_string()),
        },
        TransactionEventsError::ExtrinsicFailed(other) => Error::Rejected {
            pallet: "System".into(),
            error: format!("{other:?}"),
            docs: other.to_string(),
        },
        other => Error::from(subxt::Error::from(other)),
    }
}
