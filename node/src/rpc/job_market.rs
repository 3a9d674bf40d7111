//! `ergon_openJobs`, `ergon_job`, `ergon_jobsOf` and `ergon_checkSpec`: the training-job market in
//! JSON, for the worker and for people. Balances and work amounts are decimal strings (they exceed JavaScript's safe
//! integers); accounts are SS58; hashes are 0x-hex.

use std::sync::Arc;

use ergon_job_spec::JobSpec;
use ergon_runtime::{opaque::Block, AccountId, Balance, BlockNumber};
use jsonrpsee::{core::RpcResult, proc_macros::rpc};
use pallet_job_market::{BundleCommitment, JobState, Phase, Verdict};
use pallet_job_market_runtime_api::{Job, JobId, JobMarketApi, RoundInfo, SpecRejection};
use serde::Serialize;
use sp_api::{ApiExt, ProvideRuntimeApi};
use sp_blockchain::HeaderBackend;
use sp_core::{crypto::Ss58Codec, Encode};

use super::{check_limit, runtime_error};

/// Most jobs one call returns.
pub const MAX_JOBS: u32 = 512;

/// A committed bundle in JSON.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleView {
    /// Merkle root of the bundle.
    pub root: String,
    /// Where it is served.
    pub uri: String,
    /// Hash of the final model.
    pub final_model_hash: String,
    /// Claimed mean training loss of the last epoch (millionths).
    pub train_loss_micro: u64,
    /// Claimed validation loss (millionths).
    pub validation_loss_micro: u64,
    /// Claimed validation accuracy (parts per million).
    pub validation_accuracy_ppm: u32,
    /// The optimizer step where the training diverged, if the bundle says so (no model then: the
    /// trainer is paid for the steps before it).
    pub diverged_at: Option<u64>,
    /// Block of the commitment.
    pub submitted_at: BlockNumber,
}

/// A job's state in JSON: `status` is one of open, assigned, verifying, completed, failed.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateView {
    /// open | assigned | verifying | completed | failed.
    pub status: &'static str,
    /// The assigned trainer, if any.
    pub trainer: Option<String>,
    /// The agreed price, if assigned.
    pub price: Option<String>,
    /// The committed bundle, once submitted.
    pub bundle: Option<BundleView>,
    /// Why a failed job failed (Cancelled, NoBids, MissedDeadline, Rejected, Inconclusive).
    pub reason: Option<String>,
}

/// A verifier's progress in JSON.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VoteView {
    /// The verifier.
    pub verifier: String,
    /// The checkpoint segments it replays (`i` for Cᵢ → Cᵢ₊₁).
    pub segments: Vec<u32>,
    /// Whether it committed.
    pub committed: bool,
    /// Its revealed verdict ("pass" / "fail"), if revealed.
    pub verdict: Option<&'static str>,
    /// The segment a revealed fail names.
    pub failed_segment: Option<u32>,
}

/// A verification round in JSON.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundView {
    /// Round number.
    pub number: u32,
    /// drawing | commit | reveal.
    pub phase: &'static str,
    /// The drawn verifiers, each with its own segments.
    pub votes: Vec<VoteView>,
    /// In a dispute, the segments re-checked (empty in a regular round).
    pub disputed: Vec<u32>,
}

/// A job in JSON.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    /// Job id.
    pub id: JobId,
    /// Who posted it.
    pub owner: String,
    /// The spec, as the worker reads it.
    pub spec: JobSpec,
    /// Training work computed on chain (micro-ut).
    pub work_micro_ut: String,
    /// Checkpoints the bundle holds (C0 included).
    pub checkpoints: u64,
    /// Budget.
    pub budget: String,
    /// Still held in escrow.
    pub escrow: String,
    /// Last block of bidding.
    pub bid_window_end: BlockNumber,
    /// Last block to commit the bundle.
    pub deadline: BlockNumber,
    /// Where it stands.
    pub state: StateView,
    /// The current verification round, when verifying.
    pub round: Option<RoundView>,
}

fn hex(bytes: &[u8]) -> String {
    format!("0x{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

fn bundle_view(b: BundleCommitment<BlockNumber>) -> BundleView {
    BundleView {
        root: hex(b.root.as_bytes()),
        uri: String::from_utf8_lossy(&b.uri).into_owned(),
        final_model_hash: hex(b.final_model_hash.as_bytes()),
        train_loss_micro: b.metrics.train_loss_micro,
        validation_loss_micro: b.metrics.validation_loss_micro,
        validation_accuracy_ppm: b.metrics.validation_accuracy_ppm,
        diverged_at: b.metrics.diverged_at,
        submitted_at: b.submitted_at,
    }
}

fn state_view(state: JobState<AccountId, Balance, BlockNumber>) -> StateView {
    let mut view =
        StateView { status: "open", trainer: None, price: None, bundle: None, reason: None };
    match state {
        JobState::Open => {}
        JobState::Assigned { trainer, price } => {
            view.status = "assigned";
            view.trainer = Some(trainer.to_ss58check());
            view.price = Some(price.to_string());
        }
        JobState::Verifying { trainer, price, bundle } => {
            view.status = "verifying";
            view.trainer = Some(trainer.to_ss58check());
            view.price = Some(price.to_string());
            view.bundle = Some(bundle_view(bundle));
        }
        JobState::Completed { trainer, price, bundle } => {
            view.status = "completed";
            view.trainer = Some(trainer.to_ss58check());
            view.price = Some(price.to_string());
            view.bundle = Some(bundle_view(bundle));
        }
        JobState::Failed { trainer, reason } => {
            view.status = "failed";
            view.trainer = trainer.map(|t| t.to_ss58check());
            view.reason = Some(format!("{reason:?}"));
        }
    }
    view
}

fn round_view(round: RoundInfo<AccountId>) -> RoundView {
    RoundView {
        number: round.number,
        phase: match round.phase {
            Phase::Drawing => "drawing",
            Phase::Commit => "commit",
            Phase::Reveal => "reveal",
        },
        votes: round
            .votes
            .into_iter()
            .map(|v| VoteView {
                verifier: v.verifier.to_ss58check(),
                segments: v.segments,
                committed: v.commitment.is_some(),
                verdict: v.verdict.map(|v| match v {
                    Verdict::Pass => "pass",
                    Verdict::Fail { .. } => "fail",
                }),
                failed_segment: v.verdict.and_then(|v| v.failed_segment()),
            })
            .collect(),
        disputed: round.disputed,
    }
}

/// The JSON view of job `id`.
pub fn job_view(
    id: JobId,
    job: Job<AccountId, Balance, BlockNumber>,
    round: Option<RoundInfo<AccountId>>,
) -> JobView {
    JobView {
        id,
        owner: job.owner.to_ss58check(),
        spec: job.spec,
        work_micro_ut: job.work_micro_ut.to_string(),
        checkpoints: job.checkpoints,
        budget: job.budget.to_string(),
        escrow: job.escrow.to_string(),
        bid_window_end: job.bid_window_end,
        deadline: job.deadline,
        state: state_view(job.state),
        round: round.map(round_view),
    }
}

/// What `ergon_checkSpec` says of a spec.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecCheckView {
    /// Whether `postJob` takes the spec (the budget, windows and caps aside).
    pub valid: bool,
    /// The `jobMarket` error `postJob` would fail with (e.g. `LayerShapeMismatch`), if invalid.
    pub error: Option<String>,
    /// What is wrong, in words (naming the layer where one is at fault), if invalid.
    pub reason: Option<String>,
    /// Training work (micro-ut, decimal string), if valid.
    pub work_micro_ut: Option<String>,
    /// Checkpoints of its bundle (C0 included), if valid.
    pub checkpoints: Option<u64>,
    /// Trainable parameters, if valid.
    pub parameters: Option<u64>,
    /// Optimizer steps, if valid.
    pub steps: Option<u64>,
    /// The least budget `postJob` takes for it (planck, decimal string), if valid and the runtime
    /// knows (`JobMarketApi` version 2): the market's floor for this work, with the reserve for
    /// every possible verifier's fee.
    pub least_budget: Option<String>,
    /// The least budget on each price tier (planck, decimal strings), if valid and the runtime
    /// knows (`JobMarketApi` version 3): trained on a CPU, and on a GPU (null when the spec trains
    /// on CPUs only). `leastBudget` is the lower: a budget under the other lets only the cheaper
    /// tier's trainers bid.
    pub least_budgets: Option<LeastBudgetsView>,
    /// The spec as `postJob`'s argument, SCALE-encoded (0x hex), if valid: what a client passes to
    /// `jobMarket.postJob` (polkadot.js decodes it with the metadata's type), so that no client
    /// maps the JSON to the chain's types itself.
    pub encoded: Option<String>,
}

/// The least budget of a spec on each price tier.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeastBudgetsView {
    /// Trained on a CPU (planck, decimal string).
    pub cpu: Option<String>,
    /// Trained on a GPU (planck, decimal string); null when the spec trains on CPUs only.
    pub gpu: Option<String>,
}

/// The view of a check's outcome.
pub fn spec_check_view(
    result: Result<ergon_job_spec::SpecSummary, SpecRejection>,
) -> SpecCheckView {
    match result {
        Ok(s) => SpecCheckView {
            valid: true,
            error: None,
            reason: None,
            work_micro_ut: Some(s.training_micro_ut().to_string()),
            checkpoints: Some(s.checkpoints),
            parameters: Some(s.parameters),
            steps: Some(s.total_steps),
            least_budget: None,
            least_budgets: None,
            encoded: None,
        },
        Err(rejection) => {
            let error: &'static str =
                pallet_job_market::Error::<ergon_runtime::Runtime>::from(rejection).into();
            SpecCheckView {
                valid: false,
                error: Some(error.to_string()),
                reason: Some(rejection.to_string()),
                work_micro_ut: None,
                checkpoints: None,
                parameters: None,
                steps: None,
                least_budget: None,
                least_budgets: None,
                encoded: None,
            }
        }
    }
}

/// The job-market RPC methods.
#[rpc(server)]
pub trait JobMarketRpc<BlockHash> {
    /// Jobs taking bids, lowest id first (`limit` default 100, at most 512).
    #[method(name = "ergon_openJobs")]
    fn open_jobs(&self, limit: Option<u32>, at: Option<BlockHash>) -> RpcResult<Vec<JobView>>;

    /// Job `id` with its current verification round; null if there is no such job (any more).
    #[method(name = "ergon_job")]
    fn job(&self, id: JobId, at: Option<BlockHash>) -> RpcResult<Option<JobView>>;

    /// Whether `postJob` would take `spec` (the worker's JSON form), and if not which rule it
    /// breaks, in words; if so its work and checkpoints.
    #[method(name = "ergon_checkSpec")]
    fn check_spec(&self, spec: JobSpec, at: Option<BlockHash>) -> RpcResult<SpecCheckView>;

    /// Ids of the jobs `who` owns, bids on, trains or verifies.
    #[method(name = "ergon_jobsOf")]
    fn jobs_of(
        &self,
        who: AccountId,
        limit: Option<u32>,
        at: Option<BlockHash>,
    ) -> RpcResult<Vec<JobId>>;
}

/// Implementation over a client.
pub struct JobMarketRpcImpl<C> {
    client: Arc<C>,
}

impl<C> JobMarketRpcImpl<C> {
    /// The RPC handler reading through `client`.
    pub fn new(client: Arc<C>) -> Self {
        Self { client }
    }
}

type Hash = <Block as sp_runtime::traits::Block>::Hash;

impl<C> JobMarketRpcServer<Hash> for JobMarketRpcImpl<C>
where
    C: ProvideRuntimeApi<Block> + HeaderBackend<Block> + Send + Sync + 'static,
    C::Api: JobMarketApi<Block, AccountId, Balance, BlockNumber>,
{
    fn open_jobs(&self, limit: Option<u32>, at: Option<Hash>) -> RpcResult<Vec<JobView>> {
        let limit = check_limit(limit, MAX_JOBS)?;
        let at = at.unwrap_or_else(|| self.client.info().best_hash);
        let jobs = self.client.runtime_api().open_jobs(at, limit).map_err(runtime_error)?;
        Ok(jobs.into_iter().map(|(id, job)| job_view(id, job, None)).collect())
    }

    fn job(&self, id: JobId, at: Option<Hash>) -> RpcResult<Option<JobView>> {
        let at = at.unwrap_or_else(|| self.client.info().best_hash);
        let job = self.client.runtime_api().job(at, id).map_err(runtime_error)?;
        Ok(job.map(|(job, round)| job_view(id, job, round)))
    }

    fn check_spec(&self, spec: JobSpec, at: Option<Hash>) -> RpcResult<SpecCheckView> {
        let at = at.unwrap_or_else(|| self.client.info().best_hash);
        let api = self.client.runtime_api();
        let version = api
            .api_version::<dyn JobMarketApi<Block, AccountId, Balance, BlockNumber>>(at)
            .map_err(runtime_error)?
            .unwrap_or_default();
        let knows_least_budget = version >= 2;
        let result = api.check_spec(at, spec.clone()).map_err(runtime_error)?;
        let mut view = spec_check_view(result);
        if view.valid {
            view.encoded = Some(sp_core::bytes::to_hex(&spec.encode(), false));
        }
        if view.valid && knows_least_budget {
            let least = api.least_budget(at, spec.clone()).map_err(runtime_error)?;
            view.least_budget = least.ok().map(|b| b.to_string());
        }
        if view.valid && version >= 3 {
            let least = api.least_budgets(at, spec).map_err(runtime_error)?;
            view.least_budgets = least.ok().map(|l| LeastBudgetsView {
                cpu: l.cpu.map(|b| b.to_string()),
                gpu: l.gpu.map(|b| b.to_string()),
            });
        }
        Ok(view)
    }

    fn jobs_of(
        &self,
        who: AccountId,
        limit: Option<u32>,
        at: Option<Hash>,
    ) -> RpcResult<Vec<JobId>> {
        let limit = check_limit(limit, MAX_JOBS)?;
        let at = at.unwrap_or_else(|| self.client.info().best_hash);
        self.client.runtime_api().jobs_of(at, who, limit).map_err(runtime_error)
    }
}
