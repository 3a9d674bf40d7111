//! Runtime API of the job-market pallet: what the `ergon_openJobs`, `ergon_job`, `ergon_jobsOf` and
//! `ergon_checkSpec` RPCs, the worker and polkadot.js read.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use codec::Codec;
pub use ergon_job_spec::{JobSpec, SpecSummary};
pub use pallet_job_market::{
    spec_check::SpecRejection, DeviceClass, Job, JobId, PerClass, RoundInfo,
};

sp_api::decl_runtime_apis! {
    /// The training-job market. Version 2 adds [`least_budget`](JobMarketApi::least_budget),
    /// version 3 [`least_budgets`](JobMarketApi::least_budgets), version 4
    /// [`bid_ceiling`](JobMarketApi::bid_ceiling) (the runtime implements 4).
    #[api_version(2)]
    pub trait JobMarketApi<AccountId: Codec, Balance: Codec, BlockNumber: Codec> {
        /// Jobs taking bids, lowest id first, at most `limit`.
        fn open_jobs(limit: u32) -> Vec<(JobId, Job<AccountId, Balance, BlockNumber>)>;
        /// A stored job and its current verification round, if any.
        fn job(id: JobId) -> Option<(Job<AccountId, Balance, BlockNumber>, Option<RoundInfo<AccountId>>)>;
        /// Ids of the jobs `who` owns, bid on, trains or verifies (current round), lowest first, at
        /// most `limit`.
        fn jobs_of(who: AccountId, limit: u32) -> Vec<JobId>;
        /// Whether `post_job` would take `spec` (as far as the spec goes: the budget, windows and
        /// caps are checked at posting): its summary (work, checkpoints), or the rule it breaks.
        fn check_spec(spec: JobSpec) -> Result<SpecSummary, SpecRejection>;
        /// The least budget `post_job` takes for `spec`: `MinBudget`, or the least price of its work
        /// plus the reserve for every possible verifier's fee; the rule the spec breaks if refused.
        #[api_version(2)]
        fn least_budget(spec: JobSpec) -> Result<Balance, SpecRejection>;
        /// The least budget `post_job` takes for `spec` on each price tier: a CPU, and a GPU when
        /// the spec may train on one (`None` otherwise); `least_budget` is the lower of the two.
        #[api_version(3)]
        fn least_budgets(spec: JobSpec) -> Result<PerClass<Option<Balance>>, SpecRejection>;
        /// The highest price a bid on job `id` naming `device` may ask: its budget less the fees
        /// of every vote it may pay (`None` unless the job takes bids). A bid above it is refused
        /// (`PriceAboveBudget`).
        #[api_version(4)]
        fn bid_ceiling(id: JobId, device: DeviceClass) -> Option<Balance>;
    }
}
