//! # Job-market pallet
//!
//! Users pay for training and get either a verified model or their money back.
//!
//! 1. [`Pallet::post_job`]: the spec is validated on chain (bounded size, shapes) and its training work
//!    computed from the spec (never from a trainer's claim). The budget must pay at least
//!    `MinPricePerUt` for that work (that of the cheapest device class the spec may train on), and
//!    one verifier's round must be at most what the largest declarable capacity replays within
//!    `MaxReplayWindow` ([`Pallet::max_round_work`]).
//!    A non-refundable `PostingFee`, plus `SlotRent` for every block until the deadline (an unfinished
//!    job holds a slot that long), is burnt; the budget is held in escrow ([`HoldReason::Escrow`]).
//!    An owner has at most `MaxOpenJobsPerOwner` unfinished jobs; `MaxActiveJobs` counts unfinished
//!    jobs only. [`Pallet::cancel_job`] refunds the budget in full before assignment.
//! 2. [`Pallet::bid`] by eligible (bonded) trainers during the bid window, naming the device class
//!    they train on, at least that class's `MinPricePerUt` for the work (a GPU's ut costs less
//!    than a CPU's), holding a refundable `BidDeposit` ([`HoldReason::BidDeposit`]). When the window
//!    closes the cheapest bid whose trainer can put up the collateral wins (ties: higher ECP, then
//!    account); [`Pallet::accept_bid`] lets the owner pick one earlier. A price may use the budget minus
//!    the verification reserve: the fee of every vote that could happen ([`fees`]). Assignment
//!    freezes the price as the trainer's obligation collateral (trainer staking's
//!    [`ergon_protocol::traits::Obligations`]).
//! 3. [`Pallet::submit_bundle`] by the assigned trainer before the deadline commits the bundle's Merkle
//!    root, URI, final-model hash, claimed metrics and the device class it trained on (its bid's);
//!    the bid deposit comes back once validators attest the bundle available. Missing the
//!    deadline, or committing a bundle they find unavailable, slashes `TrainerSlash` of the
//!    collateral, forfeits the deposit to the owner and refunds the owner: walking away costs more
//!    than the job paid.
//! 4. Verification rounds ([`verification`]): VRF outputs of blocks after the commitment draw
//!    `Verifiers` from the trainers who opted in ([`Pallet::set_verifier`], declaring a device
//!    class and a replay capacity backed by bond; their slots in the draw's sum trees follow at the
//!    end of the pool epoch, [`pool`]), weighted by their bond (stake at risk, not ECP;
//!    never the trainer or the owner), among those whose class verifies the bundle's and who
//!    replay the round within `MaxReplayWindow` after the rounds they hold ([`capacity`]), each
//!    freezing the round's fee (at least `VerifierCollateral`) and each given `SegmentsPerRound`
//!    checkpoint segments to replay, every segment shared by
//!    exactly two verifiers (a ring: no replay is shared by the round, every pass is cross-checked).
//!    A round needs two seats at least: a draw that seats fewer waits for later randomness.
//!    Verifiers [`Pallet::commit_verdict`] then [`Pallet::reveal_verdict`]; a fail names the segment
//!    it found wrong, a pass carries a sketch of the weights inside each of its segments that only a
//!    replay produces ([`ergon_protocol::evidence`]). Once they are bound by their commitments the
//!    trainer gives its own sketches ([`Pallet::submit_trainer_evidence`]): it holds the true
//!    trajectory, so passes agreeing on a guess disagree with it.
//! 5. Settlement is by disputes, not majorities: a regular round whose revealed votes all pass, from
//!    more than half of the drawn verifiers, passes the bundle. Any fail — even a lone one — opens a
//!    dispute: a fresh draw of `DisputeVerifiers` (none of the earlier verifiers) replays the segments
//!    the fails named, and 2/3 of its revealed votes (from more than half of it) decide. Two passes
//!    whose sketches of a segment disagree, or a pass and the trainer's sketch, dispute it the same
//!    way; the trainer's sketches are judged like a pass's (a refuted one costs it `VerifierSlash`
//!    of its collateral). Whoever the dispute proves wrong
//!    is slashed `VerifierSlash` of its collateral, paid to those proven right: a fail that does not
//!    hold up, a pass on a disputed segment that does, or a pass whose sketch the dispute refutes. Everyone else who revealed
//!    is paid its fee ([`fees`]: its replay at the trainer's rate, at least `ReplayPricePerUt`,
//!    plus `VerifierFeeMarkup`); silent
//!    verifiers are slashed at once. A dispute that splits escalates to another while rounds remain.
//!    Pass pays the trainer its price less `PaymentBurn` (burnt) and credits T, at most
//!    `MaxCreditShare` of the network's ECP (or `MinCreditCap`); an upheld fail slashes `TrainerSlash`
//!    of the trainer's collateral. A last dispute short of 2/3 still passes the bundle when a strict
//!    majority of its revealed votes replayed exactly the trainer's sketches; a last round that
//!    decides nothing otherwise pays neither side the price (burnt, the rest refunded). Draws need
//!    a pool of `min_verifier_pool` distinct accounts able to serve the job, or wait.
//!
//! 6. Availability ([`availability`]): validators' offchain workers sample every bundle under
//!    verification over HTTP and attest ([`Pallet::attest_availability`], an unsigned transaction
//!    signed with their `ergn` session key); two thirds of the attesters finding it unavailable fail
//!    the job as a rejected bundle.
//! 7. The owner's data ([`data_check`]): a trainer that cannot fetch it reports it
//!    ([`Pallet::report_data_unavailable`], while assigned or verifying), and a drawn verifier that
//!    cannot fetch it abstains ([`Pallet::abstain`]) instead of voting, which opens the same check:
//!    attesters download the datasets against their content roots. Unavailable data ends the job
//!    without slashing anyone (a delivered bundle is paid its price: the owner took its data down
//!    after getting the model); data found served rejects the report, and every abstention on it
//!    is slashed as silence.
//!
//! Every phase has a timeout in [`Timeouts`], processed in `on_initialize` within a bounded number per
//! block; every job reaches a terminal state, its escrow is then settled to zero, and its record is
//! removed `Retention` blocks later. Invariant (`try_state`): the balance each owner has on hold under
//! `Escrow` equals the escrow of that owner's jobs.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod availability;
#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
pub mod capacity;
pub mod data_check;
pub mod fees;
pub mod migrations;
pub mod pool;
pub mod queries;
pub mod spec_check;
pub mod types;
pub mod verification;
pub mod weights;

#[cfg(test)]
mod availability_tests;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

/// The hardware class a bundle is trained on and a verifier replays on.
pub use ergon_protocol::DeviceClass;
/// What differs by device class (prices, the least budgets of `least_budgets`).
pub use ergon_protocol::PerClass;
pub use pallet::*;
pub use types::*;
pub use weights::WeightInfo;

use frame_support::traits::fungible;

/// Balance type of the currency escrows are held in.
pub type BalanceOf<T> =
    <<T as Config>::Currency as fungible::Inspect<<T as frame_system::Config>::AccountId>>::Balance;

/// A job as stored.
pub type JobOf<T> = Job<
    <T as frame_system::Config>::AccountId,
    BalanceOf<T>,
    frame_system::pallet_prelude::BlockNumberFor<T>,
>;

/// A verification round as stored.
pub type RoundOf<T> = Round<T>;

const LOG_TARGET: &str = "runtime::job-market";

#[frame_support::pallet]
pub mod pallet {
    use super::*;
    use ergon_job_spec::JobSpec;
    use ergon_protocol::traits::ComputePowerLedger;
    use ergon_protocol::traits::{BondInspect, Obligation, Obligations, Slashing};
    use ergon_protocol::DeviceClass;
    use frame_support::{
        pallet_prelude::*,
        traits::{
            fungible::{InspectHold, MutateHold},
            tokens::{Fortitude, Precision, Preservation, Restriction},
        },
    };
    use frame_system::pallet_prelude::*;
    use sp_core::H256;
    use sp_runtime::{traits::MaybeSerializeDeserialize, RuntimeAppPublic};
    use sp_runtime::{
        traits::{One, Saturating, Zero},
        Perbill, Permill,
    };

    /// 1: job specs v2 ([`crate::migrations::SpecV2`]); 2: verifiers declare a device class and a
    /// capacity ([`crate::migrations::VerifierCapacity`]); 3: bids name a device class
    /// ([`crate::migrations::BidClasses`]); 4: job specs v3, a precision each
    /// ([`crate::migrations::SpecPrecision`]).
    const STORAGE_VERSION: StorageVersion = StorageVersion::new(5);

    #[pallet::pallet]
    #[pallet::storage_version(STORAGE_VERSION)]
    pub struct Pallet<T>(_);

    /// Why this pallet holds balance.
    #[pallet::composite_enum]
    pub enum HoldReason {
        /// A job's budget, from posting until settlement.
        Escrow,
        /// A bidder's deposit, from its bid until it loses, delivers, or forfeits it by not delivering.
        BidDeposit,
    }

    #[pallet::config]
    pub trait Config:
        frame_system::Config<RuntimeEvent: From<Event<Self>>>
        + frame_system::offchain::CreateBare<Call<Self>>
    {
        /// The currency escrows are held in and paid from.
        type Currency: fungible::Inspect<Self::AccountId>
            + fungible::Mutate<Self::AccountId>
            + fungible::InspectHold<Self::AccountId, Reason = Self::RuntimeHoldReason>
            + fungible::MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>;

        /// The runtime's hold reasons, of which [`HoldReason`] is a part.
        type RuntimeHoldReason: From<HoldReason>;

        /// Trainers' bonds: who may bid and verify, their obligation collateral, and slashing.
        type Staking: BondInspect<Self::AccountId, Balance = BalanceOf<Self>>
            + Slashing<Self::AccountId, Balance = BalanceOf<Self>>
            + Obligations<Self::AccountId, Balance = BalanceOf<Self>>;

        /// Effective computing power: breaks ties between bids; credited with T.
        type ComputePower: ComputePowerLedger<Self::AccountId>;

        /// Randomness nobody knew when a bundle was committed (the VRF outputs of blocks after the
        /// commitment, accumulated: `pallet-fresh-randomness`): what draws verifiers and segments.
        type Randomness: ergon_protocol::traits::FreshRandomness<BlockNumberFor<Self>>;

        /// Smallest budget of a job.
        #[pallet::constant]
        type MinBudget: Get<BalanceOf<Self>>;

        /// Shortest bid window, in blocks.
        #[pallet::constant]
        type MinBidWindow: Get<BlockNumberFor<Self>>;

        /// Longest bid window, in blocks.
        #[pallet::constant]
        type MaxBidWindow: Get<BlockNumberFor<Self>>;

        /// Fewest blocks between the end of bidding and the deadline (time to train).
        #[pallet::constant]
        type MinTrainingTime: Get<BlockNumberFor<Self>>;

        /// Latest deadline, in blocks after posting.
        #[pallet::constant]
        type MaxJobDuration: Get<BlockNumberFor<Self>>;

        /// Most bids a job takes.
        #[pallet::constant]
        type MaxBids: Get<u32>;

        /// Most unfinished jobs at once (finished ones waiting for removal do not count).
        #[pallet::constant]
        type MaxActiveJobs: Get<u32>;

        /// Most jobs stored at once, finished ones included until removed (bounds the timeout queue).
        #[pallet::constant]
        type MaxStoredJobs: Get<u32>;

        /// Most unfinished jobs of one owner.
        #[pallet::constant]
        type MaxOpenJobsPerOwner: Get<u32>;

        /// Burnt from the owner at every `post_job`, whatever happens to the job: posting is never
        /// free, so jamming the market costs real tokens.
        #[pallet::constant]
        type PostingFee: Get<BalanceOf<Self>>;

        /// Burnt at `post_job` for every block from now to the job's deadline: an unfinished job
        /// holds one of `MaxActiveJobs` slots until then, so holding slots costs in proportion to
        /// how long they are held (issue 34, item 6: 512 slots jammed for 30 days cost ≈ 524 ERG
        /// before). [`Pallet::posting_fee`] is the whole fee.
        #[pallet::constant]
        type SlotRent: Get<BalanceOf<Self>>;

        /// Held from a bidder with its first bid on a job; released when the bid loses (or is
        /// outbid on a full list) or the job is cancelled, or once the assigned trainer's bundle is
        /// attested available (or the job settles); forfeited to the owner when the assigned
        /// trainer misses the deadline or its bundle is attested unavailable.
        #[pallet::constant]
        type BidDeposit: Get<BalanceOf<Self>>;

        /// Least price per ut (432·10⁹ FLOPs) of training work, for the device class a bid names
        /// (a CPU's ut costs several GPU ut): a bid's price, and the budget less the verification
        /// reserve, must pay at least this for the job's work. T credit is bought at no less.
        #[pallet::constant]
        type MinPricePerUt: Get<ergon_protocol::PerClass<BalanceOf<Self>>>;

        /// Share of the trainer's payment that is burnt: credit bought through a sham job (owner and
        /// trainer one person) costs at least this much, unrecoverably.
        #[pallet::constant]
        type PaymentBurn: Get<Permill>;

        /// Most T credit one job earns, as a share of the network's ECP before it...
        #[pallet::constant]
        type MaxCreditShare: Get<Perbill>;

        /// ...or this many micro-ut, whichever is larger (so a young network can grow).
        #[pallet::constant]
        type MinCreditCap: Get<u128>;

        /// Expected milliseconds per block: converts a verifier's declared capacity (work per hour)
        /// into the blocks its replay takes.
        #[pallet::constant]
        type MillisecsPerBlock: Get<u64>;

        /// Least replay capacity a verifier may declare, in micro-ut per hour.
        #[pallet::constant]
        type MinVerifierCapacity: Get<u128>;

        /// Most replay capacity a verifier may declare, in micro-ut per hour (a multi-GPU machine).
        /// With `MaxReplayWindow` it bounds a round's work ([`Pallet::max_round_work`]): a job whose
        /// round no verifier could replay in time is refused at posting.
        #[pallet::constant]
        type MaxVerifierCapacity: Get<u128>;

        /// Longest a drawn verifier's replay may take at its declared capacity, queue included
        /// (blocks): a verifier is drawn only for a round it finishes within this, and the round's
        /// commit window is its slowest seat's replay plus `CommitWindow` (issue 37: the window
        /// follows the drawn verifiers' capacity, not one global replay limit).
        #[pallet::constant]
        type MaxReplayWindow: Get<BlockNumberFor<Self>>;

        /// Least collateral a drawn verifier freezes for its round; a round whose fee is more
        /// freezes the fee ([`Pallet::seat_collateral`]).
        #[pallet::constant]
        type VerifierCollateral: Get<BalanceOf<Self>>;

        /// Most trainers in the verifier pool.
        #[pallet::constant]
        type MaxVerifierPool: Get<u32>;

        /// Length of a pool epoch: changes to the pool staged in one are applied to the draw's
        /// trees at its end ([`pool`]), never while a draw could read them.
        #[pallet::constant]
        type PoolEpoch: Get<BlockNumberFor<Self>>;

        /// Most staged pool changes applied in one block ([`pool::apply_staged`]).
        #[pallet::constant]
        type MaxPoolSyncs: Get<u32>;

        /// The worker kernels revision ([`ergon_protocol::kernels`]) that jobs posted now are
        /// trained and replayed with, and that verifiers joining now declare they run. Raised by a
        /// runtime upgrade when the worker's kernels change; jobs and verifiers keep the revision
        /// they started with.
        #[pallet::constant]
        type KernelsRevision: Get<u32>;

        /// Most timeouts processed in one block.
        #[pallet::constant]
        type MaxTimeoutsPerBlock: Get<u32>;

        /// Verifiers drawn in a regular round.
        #[pallet::constant]
        type Verifiers: Get<u32>;

        /// Verifiers drawn for a dispute: more than `Verifiers`, since they decide who is slashed.
        #[pallet::constant]
        type DisputeVerifiers: Get<u32>;

        /// Checkpoint segments each verifier replays in a regular round (its own, drawn), and the
        /// most a dispute re-checks.
        #[pallet::constant]
        type SegmentsPerRound: Get<u32>;

        /// Fewest checkpoint segments a job's spec must have. A verifier replays
        /// `SegmentsPerRound` of them: with `MinSegments = 30` and 4 a round, at most 13 % of the
        /// training steps.
        #[pallet::constant]
        type MinSegments: Get<u32>;

        /// Most verification rounds of a job.
        #[pallet::constant]
        type MaxRounds: Get<u32>;

        /// Blocks verifiers have to download, check and commit, besides their replay's time at
        /// their declared capacity.
        #[pallet::constant]
        type CommitWindow: Get<BlockNumberFor<Self>>;

        /// Blocks verifiers have to reveal.
        #[pallet::constant]
        type RevealWindow: Get<BlockNumberFor<Self>>;

        /// Blocks a finished job stays readable before its record is removed.
        #[pallet::constant]
        type Retention: Get<BlockNumberFor<Self>>;

        /// The least price per ut of work a verifier's fee is a share of, whatever the trainer
        /// bid ([`fees::fee_basis`]), for the job's device class: what a verification on that class
        /// is measured to cost, so that a floor bid still pays its verifiers to replay. A verifier
        /// is drawn only for jobs whose floor pays its own class's ([`capacity::can_serve`]).
        #[pallet::constant]
        type ReplayPricePerUt: Get<ergon_protocol::PerClass<BalanceOf<Self>>>;

        /// What a verifier earns above the share of the price its work is ([`fees::vote_fee`]: its
        /// replay, the rules and the metrics): the download and the collateral it freezes.
        #[pallet::constant]
        type VerifierFeeMarkup: Get<Perbill>;

        /// Share of the trainer's collateral (the price) slashed for a rejected bundle, an unavailable
        /// bundle or a missed deadline.
        #[pallet::constant]
        type TrainerSlash: Get<Perbill>;

        /// Share of a verifier's collateral slashed for not revealing, or for a vote a dispute
        /// proved wrong.
        #[pallet::constant]
        type VerifierSlash: Get<Perbill>;

        /// The session key validators sign availability attestations with
        /// ([`availability::crypto::Public`] in a runtime).
        type AttesterId: Member
            + Parameter
            + RuntimeAppPublic
            + Ord
            + MaybeSerializeDeserialize
            + MaxEncodedLen;

        /// Most attesters (validators) in a session.
        #[pallet::constant]
        type MaxAttesters: Get<u32>;

        /// Pool priority of availability attestations.
        #[pallet::constant]
        type UnsignedPriority: Get<TransactionPriority>;

        /// Weights of this pallet's calls and hooks.
        type WeightInfo: WeightInfo;

        /// Makes eligible trainers for the benchmarks.
        #[cfg(feature = "runtime-benchmarks")]
        type BenchmarkHelper: ergon_protocol::traits::BenchmarkTrainers<Self::AccountId>;
    }

    /// The next job's id.
    #[pallet::storage]
    pub type NextJobId<T: Config> = StorageValue<_, JobId, ValueQuery>;

    /// Every job not yet removed.
    #[pallet::storage]
    pub type Jobs<T: Config> = CountedStorageMap<_, Twox64Concat, JobId, JobOf<T>, OptionQuery>;

    /// Number of unfinished jobs (bounded by `MaxActiveJobs`).
    #[pallet::storage]
    pub type ActiveJobs<T: Config> = StorageValue<_, u32, ValueQuery>;

    /// Number of unfinished jobs of each owner (bounded by `MaxOpenJobsPerOwner`).
    #[pallet::storage]
    pub type OpenJobsOf<T: Config> = StorageMap<_, Blake2_128Concat, T::AccountId, u32, ValueQuery>;

    /// Trainers who opted in to verify: the only ones drawn (a trainer running no verifier would
    /// only be slashed for silence), with the block they joined and their weight then. At most
    /// `MaxVerifierPool`.
    #[pallet::storage]
    pub type VerifierPool<T: Config> = CountedStorageMap<
        _,
        Blake2_128Concat,
        T::AccountId,
        VerifierEntry<BlockNumberFor<T>>,
        OptionQuery,
    >;

    /// The draw's sum trees ([`pool`]): each tree's length and capacity bands.
    #[pallet::storage]
    pub type PoolTrees<T: Config> =
        StorageMap<_, Twox64Concat, pool::PoolKey, pool::PoolTree, ValueQuery>;

    /// The trees' nodes (numbered from 1; a node never written is 0).
    #[pallet::storage]
    pub type PoolNodes<T: Config> =
        StorageDoubleMap<_, Twox64Concat, pool::PoolKey, Twox64Concat, u32, u128, ValueQuery>;

    /// Who holds each slot of each tree.
    #[pallet::storage]
    pub type PoolHolders<T: Config> = StorageDoubleMap<
        _,
        Twox64Concat,
        pool::PoolKey,
        Twox64Concat,
        u32,
        T::AccountId,
        OptionQuery,
    >;

    /// Each verifier's slot in the trees, as last synced with its [`VerifierPool`] entry.
    #[pallet::storage]
    pub type PoolSlots<T: Config> =
        StorageMap<_, Blake2_128Concat, T::AccountId, pool::PoolSlot, OptionQuery>;

    /// Accounts whose entry changed in a pool epoch, their slots to sync once it has ended.
    #[pallet::storage]
    pub type PoolStaged<T: Config> =
        StorageDoubleMap<_, Twox64Concat, u32, Blake2_128Concat, T::AccountId, (), OptionQuery>;

    /// Pool epochs before this one have all their staged changes applied.
    #[pallet::storage]
    pub type PoolSyncedEpoch<T: Config> = StorageValue<_, u32, ValueQuery>;

    /// The last block at which the trees changed: a draw uses only randomness that began after it.
    #[pallet::storage]
    pub type PoolFixedAt<T: Config> = StorageValue<_, BlockNumberFor<T>, ValueQuery>;

    /// The device class each assigned job is trained on, as its winning bid named (and its bundle
    /// then declares): it sets the job's price floor and its verifiers' fee floor, and only
    /// verifiers whose class [`DeviceClass::verifies`] it are drawn.
    #[pallet::storage]
    pub type BundleDevice<T: Config> = StorageMap<_, Twox64Concat, JobId, DeviceClass, OptionQuery>;

    /// Revealed votes of a job's earlier rounds awaiting the round that decides. Their collateral
    /// stays frozen until then.
    #[pallet::storage]
    pub type PendingVotes<T: Config> = StorageMap<
        _,
        Twox64Concat,
        JobId,
        BoundedVec<PendingVote<T>, verification::MaxPastVerifiers<T>>,
        ValueQuery,
    >;

    /// Bids on open jobs.
    #[pallet::storage]
    pub type Bids<T: Config> = StorageMap<
        _,
        Twox64Concat,
        JobId,
        BoundedVec<Bid<T::AccountId, BalanceOf<T>>, T::MaxBids>,
        ValueQuery,
    >;

    /// The current verification round of each job being verified.
    #[pallet::storage]
    pub type Rounds<T: Config> = StorageMap<_, Twox64Concat, JobId, RoundOf<T>, OptionQuery>;

    /// Verifiers of a job's earlier rounds, not drawn again.
    #[pallet::storage]
    pub type PastVerifiers<T: Config> = StorageMap<
        _,
        Twox64Concat,
        JobId,
        BoundedVec<T::AccountId, verification::MaxPastVerifiers<T>>,
        ValueQuery,
    >;

    /// Jobs whose current phase times out at a block. A job is in exactly one entry (its
    /// `Job::timeout`) until it is removed.
    #[pallet::storage]
    pub type Timeouts<T: Config> = StorageMap<
        _,
        Twox64Concat,
        BlockNumberFor<T>,
        BoundedVec<JobId, T::MaxTimeoutsPerBlock>,
        ValueQuery,
    >;

    /// The `ergn` keys of the current session's validators: who may attest bundle availability.
    #[pallet::storage]
    pub type Attesters<T: Config> =
        StorageValue<_, BoundedVec<T::AttesterId, T::MaxAttesters>, ValueQuery>;

    /// Counts attester sets (one per session); attestations name the set they were made under.
    #[pallet::storage]
    pub type AttesterSetId<T: Config> = StorageValue<_, u32, ValueQuery>;

    /// Whether offchain workers fetch URLs on loopback, link-local and private hosts: only on
    /// development and local test networks, whose services all run on one host (set at genesis).
    /// On a live chain such a URL is attested unavailable unfetched (`ergon_protocol::url`).
    #[pallet::storage]
    pub type AllowPrivateUrls<T: Config> = StorageValue<_, bool, ValueQuery>;

    /// How many distinct accounts must be able to serve a job before its verifiers are drawn, if
    /// set (test networks set it low); unset, `Verifiers + DisputeVerifiers`
    /// ([`Pallet::min_verifier_pool`]).
    #[pallet::storage]
    pub type MinVerifierPool<T: Config> = StorageValue<_, u32, OptionQuery>;

    /// The job market's genesis: whether this is a test network that fetches private URLs, and
    /// the least verifier pool a draw needs.
    #[pallet::genesis_config]
    #[derive(frame_support::DefaultNoBound)]
    pub struct GenesisConfig<T: Config> {
        /// Sets [`AllowPrivateUrls`] (development and local test networks only).
        pub allow_private_urls: bool,
        /// Sets [`MinVerifierPool`] (test networks with a handful of verifiers); `None` keeps the
        /// default, a regular round's seats and a dispute's.
        pub min_verifier_pool: Option<u32>,
        #[serde(skip)]
        pub _config: core::marker::PhantomData<T>,
    }

    #[pallet::genesis_build]
    impl<T: Config> BuildGenesisConfig for GenesisConfig<T> {
        fn build(&self) {
            AllowPrivateUrls::<T>::put(self.allow_private_urls);
            MinVerifierPool::<T>::set(self.min_verifier_pool);
        }
    }

    /// Availability attestations of each job under verification: attester key and verdict.
    #[pallet::storage]
    pub type Attestations<T: Config> = StorageMap<
        _,
        Twox64Concat,
        JobId,
        BoundedVec<(T::AttesterId, bool), T::MaxAttesters>,
        ValueQuery,
    >;

    /// Jobs whose assigned trainer reported that it cannot fetch the data, with the block of the
    /// report: attesters check the data until a quorum decides.
    #[pallet::storage]
    pub type DataReports<T: Config> =
        StorageMap<_, Twox64Concat, JobId, BlockNumberFor<T>, OptionQuery>;

    /// The chunks of a job's data that its reporters could not get ([`ergon_job_spec::DataGap`]:
    /// the trainer's report and each abstention may name one), while its data check is open: the
    /// attesters fetch these besides their own random samples, so withholding one chunk of a huge
    /// dataset is found as surely as withholding all of it. Removed with the report.
    #[pallet::storage]
    pub type DataGaps<T: Config> = StorageMap<
        _,
        Twox64Concat,
        JobId,
        BoundedVec<ergon_job_spec::DataGap, ConstU32<{ data_check::MAX_DATA_GAPS }>>,
        ValueQuery,
    >;

    /// Jobs whose data report the attesters rejected (the data was served and matched): the
    /// trainer cannot report that job's data again (issue 34: a rejected report used to clear
    /// itself, and each new one made every validator download the data again).
    #[pallet::storage]
    pub type RejectedDataReports<T: Config> = StorageMap<_, Twox64Concat, JobId, (), OptionQuery>;

    /// Availability attestations of a job's data after a report (kept apart from the bundle's,
    /// which are collected at the same time while the job is verifying).
    #[pallet::storage]
    pub type DataAttestations<T: Config> = StorageMap<
        _,
        Twox64Concat,
        JobId,
        BoundedVec<(T::AttesterId, bool), T::MaxAttesters>,
        ValueQuery,
    >;

    /// The trainer's own sketches of its bundle's drawn segments, by segment, kept until the job
    /// ends ([`Pallet::submit_trainer_evidence`]). A segment's sketch is given once: the probe and
    /// projections are the same in every round, so a later round cannot change the story.
    #[pallet::storage]
    pub type TrainerEvidence<T: Config> =
        StorageMap<_, Twox64Concat, JobId, TrainerSketches<T>, ValueQuery>;

    /// Drawn verifiers who abstained because they could not fetch the job's data
    /// ([`Pallet::abstain`]), with the round they were drawn for. Their collateral stays frozen
    /// until the data check decides: released when the data is unavailable (or the job ends
    /// otherwise), slashed `VerifierSlash` when the attesters find the data served (a false
    /// abstention is silence).
    #[pallet::storage]
    pub type Abstentions<T: Config> = StorageMap<
        _,
        Twox64Concat,
        JobId,
        BoundedVec<(T::AccountId, u32), verification::MaxPastVerifiers<T>>,
        ValueQuery,
    >;

    #[pallet::event]
    #[pallet::generate_deposit(pub(super) fn deposit_event)]
    pub enum Event<T: Config> {
        /// A job was posted; `budget` is held in escrow; its training work is `work_micro_ut`; bids
        /// are taken until block `bid_window_end` and the bundle is due by block `deadline`; `fee`
        /// (the posting fee and the slot rent to the deadline) was burnt.
        JobPosted {
            job: JobId,
            owner: T::AccountId,
            budget: BalanceOf<T>,
            work_micro_ut: u128,
            bid_window_end: BlockNumberFor<T>,
            deadline: BlockNumberFor<T>,
            fee: BalanceOf<T>,
        },
        /// A trainer bid (or changed its bid).
        BidPlaced { job: JobId, trainer: T::AccountId, price: BalanceOf<T>, device: DeviceClass },
        /// A full bid list gave `trainer`'s bid's place to a better one; its deposit is released.
        BidOutbid { job: JobId, trainer: T::AccountId },
        /// A trainer was assigned; it must commit a bundle by `deadline`.
        JobAssigned {
            job: JobId,
            trainer: T::AccountId,
            price: BalanceOf<T>,
            deadline: BlockNumberFor<T>,
        },
        /// The trainer committed its bundle.
        BundleSubmitted { job: JobId, trainer: T::AccountId, root: H256, device: DeviceClass },
        /// A round's verifiers were drawn, each with the segments it replays (a dispute's verifiers
        /// all replay the disputed segments).
        VerifiersDrawn {
            job: JobId,
            round: u32,
            assignments: alloc::vec::Vec<(T::AccountId, alloc::vec::Vec<u32>)>,
        },
        /// A round's draw could seat only `seated` verifiers, fewer than the two every round needs:
        /// the seats were given back and the draw is tried again from later randomness (or, once
        /// the commit window since the round opened is over, the round is settled unstaffed).
        DrawPostponed { job: JobId, round: u32, seated: u32 },
        /// Fewer than `needed` distinct accounts could serve the job (`candidates` now, counting
        /// its earlier verifiers): nobody was drawn, the draw waits for the pool to grow (or, once
        /// the commit window since the round opened is over, the round is settled unstaffed).
        PoolTooSmall { job: JobId, round: u32, candidates: u32, needed: u32 },
        /// The last round decided nothing: nobody proved the committed bundle right or wrong, so
        /// neither side is made whole — the price is burnt (the trainer is not paid, the owner
        /// not refunded it; the model is served), the rest of the escrow refunded.
        UndecidedPriceBurnt { job: JobId, burnt: BalanceOf<T> },
        /// The trainer submitted its own sketches of `segments` of the round: a pass whose sketch
        /// of one of them disagrees with the trainer's is disputed.
        TrainerEvidenceSubmitted { job: JobId, round: u32, segments: alloc::vec::Vec<u32> },
        /// A verifier committed to a verdict.
        VerdictCommitted { job: JobId, round: u32, verifier: T::AccountId },
        /// A verifier revealed its verdict.
        VerdictRevealed {
            job: JobId,
            round: u32,
            verifier: T::AccountId,
            verdict: Verdict,
            evidence: H256,
        },
        /// A round ended: revealed votes per verdict, silent verifiers, and whether it decided.
        RoundSettled { job: JobId, round: u32, pass: u32, fail: u32, silent: u32, decisive: bool },
        /// A verifier was paid its fee.
        VerifierPaid { job: JobId, verifier: T::AccountId, amount: BalanceOf<T> },
        /// The bundle passed: the trainer was paid `price` (of which `burnt` was burnt) and credited
        /// `work_micro_ut` of T (the job's work, capped by `MaxCreditShare`).
        JobCompleted {
            job: JobId,
            trainer: T::AccountId,
            price: BalanceOf<T>,
            burnt: BalanceOf<T>,
            work_micro_ut: u128,
        },
        /// `who` joined the verifier pool with `offer` (its device class and replay capacity), or
        /// left it (`None`).
        VerifierSet { who: T::AccountId, offer: Option<VerifierOffer> },
        /// The assigned trainer missed the deadline: its bid deposit went to the owner.
        BidDepositForfeited { job: JobId, trainer: T::AccountId, amount: BalanceOf<T> },
        /// Two passes of a regular round sketched these segments differently: one of them did not
        /// replay (or replayed wrongly); the segments are disputed like a fail's.
        EvidenceContested { job: JobId, round: u32, segments: alloc::vec::Vec<u32> },
        /// A round's fails (or a split dispute) open a dispute: the next round re-checks `segments`
        /// with a larger draw before anyone is judged.
        DisputeOpened { job: JobId, round: u32, segments: alloc::vec::Vec<u32> },
        /// The job ended without a verified model; `refunded` went back to the owner.
        JobFailed { job: JobId, reason: FailureReason, refunded: BalanceOf<T> },
        /// A finished job's record was removed.
        JobRemoved { job: JobId },
        /// An attester checked the job's bundle over HTTP against its root.
        AvailabilityAttested { job: JobId, attester: T::AttesterId, available: bool },
        /// The assigned trainer reported that it cannot fetch the job's data; attesters check it.
        DataReported { job: JobId, trainer: T::AccountId },
        /// Two thirds of the attesters fetched the data and found it matching: the report (the
        /// trainer's, or the one an abstention opened) is dropped; an assigned trainer must still
        /// deliver by the deadline, and the abstentions are slashed as silence.
        DataReportRejected { job: JobId, trainer: T::AccountId },
        /// The data was found unavailable: the trainer was paid `amount` from the escrow (an
        /// assigned trainer the bid deposit's worth for its trouble, one whose bundle is under
        /// verification its price); its collateral and deposit are released; nobody is slashed.
        TrainerCompensated { job: JobId, trainer: T::AccountId, amount: BalanceOf<T> },
        /// A drawn verifier could not fetch the job's data and abstained: its seat is empty and
        /// its collateral waits for the data check, which its abstention opened if
        /// `opened_data_check`.
        VerifierAbstained {
            job: JobId,
            round: u32,
            verifier: T::AccountId,
            opened_data_check: bool,
        },
        /// The bundle's divergence was confirmed: the owner's spec diverged at optimizer `step` of
        /// `steps`. The trainer was paid `price` for the steps it trained (of which `burnt` was
        /// burnt) and credited `work_micro_ut` of T pro rata; the rest went back to the owner.
        TrainingDiverged {
            job: JobId,
            trainer: T::AccountId,
            step: u64,
            steps: u64,
            price: BalanceOf<T>,
            burnt: BalanceOf<T>,
            work_micro_ut: u128,
        },
    }

    #[pallet::error]
    pub enum Error<T> {
        /// The spec's model has no layers.
        EmptyModel,
        /// A size, count or hyper-parameter of the spec is zero or beyond its bound (the bounds are
        /// the `MaxLayers`, `MaxUriLength`, `MaxParameters`, `MaxCheckpoints`, `MaxEpochs` and
        /// `MaxBatchSize` constants); `ergon_checkSpec` says which.
        SpecOutOfBounds,
        /// A dataset lists the wrong number of files for its format (IDX: images and labels; CSV
        /// and text: one).
        WrongFileCount,
        /// A dataset URI is empty, not UTF-8, or neither a path nor an http(s) URL.
        BadDataUri,
        /// Training and validation data have different formats.
        DataFormatMismatch,
        /// A dataset has no samples (or a text sample does not fit in it).
        NoSamples,
        /// A layer cannot take the shape the previous one produces (`ergon_checkSpec` names the
        /// layer).
        LayerShapeMismatch,
        /// An embedding must be the first layer, on token (text) input; other layers take float
        /// input.
        TokenInputMismatch,
        /// The model's output does not match the target (the classes, or `[seq_len, 256]` for
        /// text).
        OutputMismatch,
        /// More trainable parameters than `MaxParameters`.
        TooManyParameters,
        /// More checkpoints than `MaxCheckpoints`: raise the checkpoint interval.
        TooManyCheckpoints,
        /// A hyper-parameter is out of range: a learning rate of 0, momentum or a β of 1 or more,
        /// an ε of 0 (real numbers are parts per billion: `lr: 1000000` is 0.001).
        BadHyperParameter,
        /// The spec's FLOP count overflows.
        WorkOverflow,
        /// The spec trains nothing (zero FLOPs) or has fewer than two checkpoints.
        NothingToTrain,
        /// The spec has fewer than `MinSegments` checkpoint segments: lower its checkpoint interval.
        TooFewCheckpoints,
        /// The budget is below `MinBudget`.
        BudgetTooLow,
        /// The budget less the verification reserve (every possible vote's fee at that price) pays
        /// less than `MinPricePerUt` for the job's work: raise the budget.
        BudgetBelowWorkPrice,
        /// A verifier's round (its replay and the evaluation of the rules and the validation set)
        /// would be more work than the fastest verifier may declare to do within
        /// `MaxReplayWindow` ([`Pallet::max_round_work`]): checkpoint more often, or use fewer
        /// validation samples.
        VerificationTooLong,
        /// The owner has `MaxOpenJobsPerOwner` unfinished jobs already.
        TooManyOpenJobs,
        /// The price is below `MinPricePerUt` for the job's work.
        PriceBelowMinimum,
        /// The trainer's active bond not already obligated cannot cover the collateral (the price,
        /// or `VerifierCollateral`).
        InsufficientCollateral,
        /// The free balance cannot cover the bid deposit.
        CannotPayDeposit,
        /// `MaxVerifierPool` trainers are in the verifier pool already.
        TooManyVerifiers,
        /// The account is not in the verifier pool.
        NotInVerifierPool,
        /// The declared replay capacity is outside [`MinVerifierCapacity`, `MaxVerifierCapacity`].
        CapacityOutOfRange,
        /// The free bond cannot cover the collateral of a round at the declared capacity
        /// ([`Pallet::capacity_backing`]): declare less, or bond more.
        CapacityNotBacked,
        /// The device class names no hardware the worker runs (a CUDA capability out of range).
        InvalidDeviceClass,
        /// This job's bundle cannot be trained on that device class: a spec that does not replay
        /// across devices (convolutions) trains on the CPU.
        DeviceNotAllowed,
        /// The verifier is still eligible: only its owner may remove it.
        StillEligible,
        /// The free balance cannot cover the budget.
        InsufficientBalance,
        /// The bid window is outside [`MinBidWindow`, `MaxBidWindow`].
        BidWindowOutOfRange,
        /// The deadline leaves less than `MinTrainingTime` after bidding, or is beyond
        /// `MaxJobDuration`.
        DeadlineOutOfRange,
        /// `MaxActiveJobs` jobs are unfinished, or `MaxStoredJobs` are stored, already.
        TooManyJobs,
        /// No room in the timeout queue (cannot happen while `MaxActiveJobs` holds).
        TimeoutQueueFull,
        /// No such job.
        JobNotFound,
        /// Only the job's owner may do this.
        NotOwner,
        /// The job is not open for bids.
        NotOpen,
        /// The bid window has closed.
        BidWindowClosed,
        /// The trainer's active bond is below the minimum.
        NotEligible,
        /// The owner cannot bid on (or verify) its own job.
        OwnJob,
        /// A price of zero.
        ZeroPrice,
        /// The price exceeds the budget minus the verification reserve.
        PriceAboveBudget,
        /// `MaxBids` bids were placed already, all of them better than this one (a lower price, or
        /// the same price and more ECP).
        TooManyBids,
        /// No bid from that trainer.
        BidNotFound,
        /// The job is not assigned to the caller.
        NotAssignedTrainer,
        /// The deadline has passed.
        DeadlinePassed,
        /// The bundle URI is empty or not `http://` or `https://`.
        InvalidUri,
        /// The job is not in the commit phase of a verification round.
        NotInCommitPhase,
        /// The job is not in the reveal phase of a verification round.
        NotInRevealPhase,
        /// The caller was not drawn for this round.
        NotAVerifier,
        /// The caller already committed in this round.
        AlreadyCommitted,
        /// The caller did not commit in this round.
        NotCommitted,
        /// The caller already revealed in this round.
        AlreadyRevealed,
        /// The revealed verdict does not match the commitment.
        CommitmentMismatch,
        /// A fail must name one of the segments the verifier was given.
        NotYourSegment,
        /// A pass must carry one replay sketch per segment the verifier was given, in their order.
        MissingEvidence,
        /// No attester with that index in the current set.
        NotAnAttester,
        /// The job's bundle is not under verification.
        NotVerifying,
        /// This attester already attested this job.
        AlreadyAttested,
        /// The job has no open data report to attest.
        NoDataReport,
        /// The job's data is reported already, or an earlier report was rejected (one per job).
        DataAlreadyReported,
        /// A data file is not served over HTTP(S), so attesters could not check a report.
        DataNotCheckable,
        /// A data gap names a file set or file the spec does not have.
        DataGapOutOfRange,
        /// The attesters found this job's data served: a verifier that cannot fetch it must vote
        /// (or is slashed as silent).
        DataFoundAvailable,
        /// The bundle claims a divergence after the spec's last step.
        DivergenceOutOfRange,
        /// A URL names a loopback, link-local or private host (or one no HTTP client parses),
        /// which the validators of a live chain do not fetch (`AllowPrivateUrls` is off): a bundle
        /// there would be attested unavailable, data there could not be checked.
        UrlNotPublic,
        /// The spec's learning-rate schedule does not fit its run (warmup and decay steps longer
        /// than the run, or a ratio above 1).
        ScheduleTooLong,
        /// The spec's initial weights name their tensors in a way its model does not fit (Hugging
        /// Face GPT-2 naming needs a GPT-2-shaped model).
        WeightNamingMismatch,
        /// The spec's LoRA adapters cannot be: no weights file to freeze, a rank of 0 or wider
        /// than an adapted projection, an alpha of 0, or no transformer block to adapt.
        BadAdapters,
        /// The spec's gradient accumulation or clipping cannot be: 0 micro-batches, a count that
        /// does not divide the batch size, or a clipping norm of 0.
        BadGradients,
        /// The bundle's device class is not the one the trainer's bid named (its price and the
        /// verifiers' fees were set for that class).
        DeviceNotAsBid,
    }

    /// The job spec's limits (`ergon_job_spec`), in the metadata so that clients check a spec
    /// before signing: a spec beyond them is refused (and one beyond a length bound does not even
    /// decode).
    #[pallet::extra_constants]
    impl<T: Config> Pallet<T> {
        /// Most layers in a model.
        #[pallet::constant_name(MaxLayers)]
        fn max_layers() -> u32 {
            ergon_job_spec::MAX_LAYERS
        }

        /// Longest data URI, in bytes.
        #[pallet::constant_name(MaxUriLength)]
        fn max_uri_length() -> u32 {
            ergon_job_spec::MAX_URI_LEN
        }

        /// Most files per dataset.
        #[pallet::constant_name(MaxDataFiles)]
        fn max_data_files() -> u32 {
            ergon_job_spec::MAX_DATA_FILES
        }

        /// Most trainable parameters.
        #[pallet::constant_name(MaxParameters)]
        fn max_parameters() -> u64 {
            ergon_job_spec::MAX_PARAMETERS
        }

        /// Most checkpoints in a bundle (C0 included).
        #[pallet::constant_name(MaxCheckpoints)]
        fn max_checkpoints() -> u64 {
            ergon_job_spec::MAX_CHECKPOINTS
        }

        /// Most epochs.
        #[pallet::constant_name(MaxEpochs)]
        fn max_epochs() -> u32 {
            ergon_job_spec::MAX_EPOCHS
        }

        /// Largest batch.
        #[pallet::constant_name(MaxBatchSize)]
        fn max_batch_size() -> u32 {
            ergon_job_spec::MAX_BATCH_SIZE
        }
    }

    #[pallet::hooks]
    impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
        fn on_initialize(now: BlockNumberFor<T>) -> Weight {
            // The trees first: a draw in this block then sees them as they stay.
            let (synced, prefixes) = pool::apply_staged::<T>(now);
            let pool_weight = T::WeightInfo::pool_sync(synced)
                .saturating_add(T::DbWeight::get().reads(prefixes.into()));
            let due = Timeouts::<T>::take(now);
            // At most `MaxTimeoutsPerBlock` jobs, each weighed by the path its timeout took.
            due.iter().fold(
                T::WeightInfo::on_initialize_idle().saturating_add(pool_weight),
                |weight, job| weight.saturating_add(Self::on_timeout(*job, now)),
            )
        }

        fn integrity_test() {
            assert!(T::SegmentsPerRound::get() > 0);
            // Every segment is replayed by two seats, and no round is decided by one: a round
            // needs two seats, and with an odd number of segments each the ring leaves some
            // segment with one replay (`ergon_protocol::segments::assign`).
            assert!(T::Verifiers::get() as usize >= verification::MIN_SEATS);
            assert!(T::SegmentsPerRound::get() % 2 == 0, "SegmentsPerRound must be even");
            // A fail must be able to open its dispute, and a dispute decides who is slashed.
            assert!(T::MaxRounds::get() >= 2, "MaxRounds leaves no round for a dispute");
            assert!(T::DisputeVerifiers::get() >= T::Verifiers::get());
        }

        fn offchain_worker(now: BlockNumberFor<T>) {
            if sp_io::offchain::is_validator() {
                availability::offchain_worker::<T>(now);
            }
        }

        #[cfg(feature = "try-runtime")]
        fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
            Self::do_try_state()
        }
    }

    #[pallet::call]
    impl<T: Config> Pallet<T> {
        /// Posts a training job: `spec` is validated and its work computed on chain, `budget` is
        /// held in escrow, bids are taken for `bid_window` blocks, and the assigned trainer must
        /// commit its bundle by block `deadline`.
        #[pallet::call_index(0)]
        #[pallet::weight(T::WeightInfo::post_job(spec.model.layers.len() as u32))]
        pub fn post_job(
            origin: OriginFor<T>,
            spec: alloc::boxed::Box<JobSpec>,
            #[pallet::compact] budget: BalanceOf<T>,
            bid_window: BlockNumberFor<T>,
            deadline: BlockNumberFor<T>,
        ) -> DispatchResult {
            let owner = ensure_signed(origin)?;
            let summary = spec_check::check::<T>(&spec).map_err(Error::<T>::from)?;
            ensure!(availability::data_urls_allowed::<T>(&spec), Error::<T>::UrlNotPublic);
            let work_micro_ut = summary.training_micro_ut();
            let segments = summary.checkpoints.saturating_sub(1);
            ensure!(budget >= T::MinBudget::get(), Error::<T>::BudgetTooLow);
            // Enough for the floor of some class the spec may be trained on (the cheapest
            // tier's trainers, at least, can bid).
            let overhead = spec_overhead_ppb(&spec);
            ensure!(
                Self::classes_for(&spec).any(|device| {
                    fees::max_price::<T>(budget, work_micro_ut, segments, overhead, device)
                        >= Self::min_price_for(work_micro_ut, device)
                }),
                Error::<T>::BudgetBelowWorkPrice
            );
            ensure!(
                bid_window >= T::MinBidWindow::get() && bid_window <= T::MaxBidWindow::get(),
                Error::<T>::BidWindowOutOfRange
            );
            let now = frame_system::Pallet::<T>::block_number();
            let bid_window_end = now.saturating_add(bid_window);
            ensure!(
                deadline >= bid_window_end.saturating_add(T::MinTrainingTime::get())
                    && deadline <= now.saturating_add(T::MaxJobDuration::get()),
                Error::<T>::DeadlineOutOfRange
            );
            ensure!(
                ActiveJobs::<T>::get() < T::MaxActiveJobs::get()
                    && Jobs::<T>::count() < T::MaxStoredJobs::get(),
                Error::<T>::TooManyJobs
            );
            ensure!(
                OpenJobsOf::<T>::get(&owner) < T::MaxOpenJobsPerOwner::get(),
                Error::<T>::TooManyOpenJobs
            );
            let reason = HoldReason::Escrow.into();
            let fee = Self::posting_fee(deadline.saturating_sub(now));
            ensure!(
                <T::Currency as fungible::Inspect<_>>::reducible_balance(
                    &owner,
                    Preservation::Preserve,
                    Fortitude::Polite
                ) >= budget.saturating_add(fee),
                Error::<T>::InsufficientBalance
            );

            let id = NextJobId::<T>::get();
            let mut job = Job {
                owner: owner.clone(),
                spec: *spec,
                work_micro_ut,
                checkpoints: summary.checkpoints,
                budget,
                escrow: budget,
                trainer_deposit: Zero::zero(),
                bid_window_end,
                deadline,
                timeout: Zero::zero(),
                kernels: T::KernelsRevision::get(),
                state: JobState::Open,
            };
            // The bid window closes at its last block; assignment happens at the next one.
            Self::schedule(id, &mut job, bid_window_end.saturating_add(One::one()))?;
            T::Currency::hold(&reason, &owner, budget)?;
            if !fee.is_zero() {
                <T::Currency as fungible::Mutate<_>>::burn_from(
                    &owner,
                    fee,
                    Preservation::Preserve,
                    Precision::Exact,
                    Fortitude::Polite,
                )?;
            }
            ActiveJobs::<T>::mutate(|n| n.saturating_inc());
            OpenJobsOf::<T>::mutate(&owner, |n| n.saturating_inc());
            NextJobId::<T>::put(id.saturating_add(1));
            Jobs::<T>::insert(id, job);
            Self::deposit_event(Event::JobPosted {
                job: id,
                owner,
                budget,
                work_micro_ut,
                bid_window_end,
                deadline,
                fee,
            });
            Ok(())
        }

        /// Cancels an open job (before assignment) and refunds its whole budget.
        #[pallet::call_index(1)]
        #[pallet::weight(T::WeightInfo::cancel_job())]
        pub fn cancel_job(origin: OriginFor<T>, job: JobId) -> DispatchResult {
            let who = ensure_signed(origin)?;
            let mut record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
            ensure!(record.owner == who, Error::<T>::NotOwner);
            ensure!(record.state == JobState::Open, Error::<T>::NotOpen);
            Self::unschedule(job, record.timeout);
            Self::finish(job, &mut record, None, FailureReason::Cancelled);
            Jobs::<T>::insert(job, record);
            Ok(())
        }

        /// Bids `price` for an open job, to train it on `device` (replacing the caller's earlier
        /// bid). The caller must be an eligible trainer, not the owner. The class sets the price
        /// floor (`MinPricePerUt` of its tier) and the verifiers' fee floor (`ReplayPricePerUt`),
        /// and binds the bundle: the trainer commits one of that class. On a full list the bid takes
        /// the place of the one that would lose first, if it beats it ([`verification::outbid`]).
        #[pallet::call_index(2)]
        #[pallet::weight(Pallet::<T>::bid_weight())]
        pub fn bid(
            origin: OriginFor<T>,
            job: JobId,
            #[pallet::compact] price: BalanceOf<T>,
            device: DeviceClass,
        ) -> DispatchResult {
            let trainer = ensure_signed(origin)?;
            let record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
            ensure!(record.state == JobState::Open, Error::<T>::NotOpen);
            ensure!(
                frame_system::Pallet::<T>::block_number() <= record.bid_window_end,
                Error::<T>::BidWindowClosed
            );
            ensure!(record.owner != trainer, Error::<T>::OwnJob);
            ensure!(T::Staking::is_eligible(&trainer), Error::<T>::NotEligible);
            ensure!(!price.is_zero(), Error::<T>::ZeroPrice);
            ensure!(device.is_valid(), Error::<T>::InvalidDeviceClass);
            ensure!(
                device.may_train(record.spec.replays_across_devices()),
                Error::<T>::DeviceNotAllowed
            );
            ensure!(price <= Self::max_price(&record, device), Error::<T>::PriceAboveBudget);
            ensure!(
                price >= Self::min_price_for(record.work_micro_ut, device),
                Error::<T>::PriceBelowMinimum
            );
            // Checked again at assignment, when the collateral is frozen.
            ensure!(
                T::Staking::free_collateral(&trainer) >= price,
                Error::<T>::InsufficientCollateral
            );
            Bids::<T>::try_mutate(job, |bids| -> DispatchResult {
                match bids.iter_mut().find(|b| b.trainer == trainer) {
                    Some(existing) => {
                        existing.price = price;
                        existing.device = device;
                    }
                    None => {
                        let deposit = T::BidDeposit::get();
                        let bid = Bid { trainer: trainer.clone(), price, deposit, device };
                        if bids.is_full() {
                            // The list keeps the best bids: this one (assignable, checked above)
                            // takes the place of the bid that would lose first, if it beats it.
                            let at = verification::outbid::<T>(bids, &bid)
                                .ok_or(Error::<T>::TooManyBids)?;
                            let mut out = bids.remove(at);
                            Self::release_deposit(&out.trainer, &mut out.deposit);
                            Self::deposit_event(Event::BidOutbid { job, trainer: out.trainer });
                        }
                        bids.try_push(bid).map_err(|_| Error::<T>::TooManyBids)?;
                        T::Currency::hold(&HoldReason::BidDeposit.into(), &trainer, deposit)
                            .map_err(|_| Error::<T>::CannotPayDeposit)?;
                    }
                }
                Ok(())
            })?;
            Self::deposit_event(Event::BidPlaced { job, trainer, price, device });
            Ok(())
        }

        /// The owner assigns its open job to `trainer`'s bid now, without waiting for the window.
        #[pallet::call_index(3)]
        #[pallet::weight(T::WeightInfo::accept_bid())]
        pub fn accept_bid(
            origin: OriginFor<T>,
            job: JobId,
            trainer: T::AccountId,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            let mut record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
            ensure!(record.owner == who, Error::<T>::NotOwner);
            ensure!(record.state == JobState::Open, Error::<T>::NotOpen);
            let bid = Bids::<T>::get(job)
                .into_iter()
                .find(|b| b.trainer == trainer)
                .ok_or(Error::<T>::BidNotFound)?;
            ensure!(T::Staking::is_eligible(&trainer), Error::<T>::NotEligible);
            // Out of the old queue entry first: the new one may be the same block. (A refusal below
            // rolls the whole call back.)
            Self::unschedule(job, record.timeout);
            Self::assign(job, &mut record, bid)?;
            Jobs::<T>::insert(job, record);
            Ok(())
        }

        /// The assigned trainer commits its checkpoint bundle: Merkle `bundle_root`, where it is
        /// served, the final model's hash, the claimed metrics and the `device` class it trained
        /// on, the one its bid named (only verifiers whose class verifies it are drawn; a spec
        /// that does not replay across devices trains on the CPU). Verification starts with randomness from a later block. A training that diverged commits the checkpoints before
        /// the divergence and says where (`metrics.diverged_at`): a confirmed claim pays for the
        /// steps trained, and nobody is slashed.
        #[pallet::call_index(4)]
        #[pallet::weight(T::WeightInfo::submit_bundle())]
        pub fn submit_bundle(
            origin: OriginFor<T>,
            job: JobId,
            bundle_root: H256,
            bundle_uri: BundleUri,
            final_model_hash: H256,
            metrics: ClaimedMetrics,
            device: DeviceClass,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            let mut record = Jobs::<T>::get(job).ok_or(Error::<T>::JobNotFound)?;
            let JobState::Assigned { trainer, price } = record.state.clone() else {
                return Err(Error::<T>::NotAssignedTrainer.into());
            };
            ensure!(trainer == who, Error::<T>::NotAssignedTrainer);
            let now = frame_system::Pallet::<T>::block_number();
            ensure!(now <= record.deadline, Error::<T>::DeadlinePassed);
            ensure!(verification::is_valid_uri(&bundle_uri), Error::<T>::InvalidUri);
            ensure!(availability::url_allowed::<T>(&bundle_uri), Error::<T>::UrlNotPublic);
            ensure!(
                metrics.diverged_at.is_none_or(|step| step <= record.total_steps()),
                Error::<T>::DivergenceOutOfRange
            );
            ensure!(device.is_valid(), Error::<T>::InvalidDeviceClass);
            ensure!(
                device.may_train(record.spec.replays_across_devices()),
                Error::<T>::DeviceNotAllowed
            );
            // The bid fixed the class (a job assigned before bids named one is open to any).
            ensure!(
                BundleDevice::<T>::get(job).is_none_or(|bid| bid == device),
                Error::<T>::DeviceNotAsBid
            );
            let bundle = BundleCommitment {
                root: bundle_root,
                uri: bundle_uri,
                final_model_hash,
                metrics,
                submitted_at: now,
            };
            Self::unschedule(job, record.timeout);
            // Delivered after all: a data report is moot.
            DataReports::<T>::remove(job);
            DataGaps::<T>::remove(job);
            DataAttestations::<T>::remove(job);
            Attestations::<T>::remove(job);
            // The draw waits for randomness that began after this block (see `verification::draw`).
            Self::schedule(job, &mut record, now.saturating_add(One::one()))?;
            // The bid deposit stays held until validators find the bundle available (or the job
            // settles): a junk commitment forfeits it to the owner, as a missed deadline does.
            record.state = JobState::Verifying { trainer: trainer.clone(), price, bundle };
            Rounds::<T>::insert(job, verification::new_round::<T>(0, now, Default::default()));
            BundleDevice::<T>::insert(job, device);
            Jobs::<T>::insert(job, record);
            Self::deposit_event(Event::BundleSubmitted { job, trainer, root: bundle_root, device });
            Ok(())
        }

        /// A drawn verifier commits to its verdict:
        /// [`ergon_protocol::commitments::verdict`] of (job, round, verifier, verdict, sketches,
        /// report, salt).
        #[pallet::call_index(5)]
        #[pallet::weight(T::WeightInfo::commit_verdict())]
        pub fn commit_verdict(
            origin: OriginFor<T>,
            job: JobId,
            commitment: H256,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            Self::do_commit(job, who, commitment)
        }

        /// A verifier reveals the verdict it committed to, with its replay evidence, the hash of its
        /// full report and the salt. A pass carries a sketch of every segment the verifier was given
        /// ([`ergon_protocol::evidence`], in the order of its segments), compared with the other
        /// verifier of each segment; a fail names one of the verifier's segments, which a dispute
        /// re-checks. The round settles as soon as every drawn verifier has revealed.
        #[pallet::call_index(6)]
        #[pallet::weight(T::WeightInfo::reveal_verdict())]
        pub fn reveal_verdict(
            origin: OriginFor<T>,
            job: JobId,
            verdict: Verdict,
            evidence: Evidence<T>,
            report: H256,
            salt: H256,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            Self::do_reveal(job, who, verdict, evidence, report, salt)
        }

        /// An attester's verdict on the availability of a job's bundle, or of its data after the
        /// trainer's report: an unsigned transaction from a validator's offchain worker, signed with
        /// its `ergn` session key (checked before dispatch). Two thirds of the attesters finding the
        /// bundle unavailable fail the job; see [`Pallet::report_data_unavailable`] for data.
        #[pallet::call_index(7)]
        #[pallet::weight(T::WeightInfo::attest_availability().max(T::WeightInfo::attest_data()))]
        pub fn attest_availability(
            origin: OriginFor<T>,
            attestation: availability::Attestation,
            _signature: <T::AttesterId as RuntimeAppPublic>::Signature,
        ) -> DispatchResult {
            ensure_none(origin)?;
            Self::do_attest(attestation)
        }

        /// The job's trainer reports that it cannot fetch the job's data: while assigned (before
        /// its deadline), or while its bundle is under verification (the owner took the data down
        /// after the commitment). `gap` names the chunk it could not get (`None`: the chunk lists
        /// themselves). Validators' offchain workers check the files' chunk lists against the
        /// spec's content roots, fetch the named chunks and random ones by byte range, and attest
        /// whether all of it is served as committed: two thirds "unavailable" end the job
        /// without slashing the trainer, which gets its collateral and deposit back plus, from the
        /// escrow, the bid deposit's worth (assigned) or its price (verifying: the owner has the
        /// model); two thirds "available" drop the report. One report per job. The deadline does
        /// not move: report early.
        #[pallet::call_index(10)]
        #[pallet::weight(T::WeightInfo::report_data_unavailable())]
        pub fn report_data_unavailable(
            origin: OriginFor<T>,
            job: JobId,
            gap: Option<ergon_job_spec::DataGap>,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            data_check::do_report::<T>(job, who, gap)
        }

        /// A drawn verifier of the current round that cannot fetch the job's *data* (not the
        /// bundle: a bundle it cannot fetch is a fail) abstains instead of committing a verdict.
        /// Its seat is emptied (it still counts among the drawn, so a round of abstentions decides
        /// nothing) and its collateral stays frozen; the first abstention opens the data check of
        /// [`Pallet::report_data_unavailable`], and its `gap` joins the chunks checked (a new gap
        /// restarts the attestations). Unavailable data releases it and ends the job
        /// without slashing the trainer; data found served slashes it as silence, and once the
        /// data was found served nobody may abstain on the job.
        #[pallet::call_index(11)]
        #[pallet::weight(T::WeightInfo::abstain())]
        pub fn abstain(
            origin: OriginFor<T>,
            job: JobId,
            gap: Option<ergon_job_spec::DataGap>,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            data_check::do_abstain::<T>(job, who, gap)
        }

        /// The trainer of a job under verification gives its own sketches of segments of the
        /// current round (each `(segment, sketch)`, a segment some verifier of the round replays),
        /// once per round, while the round's verifiers reveal: after they are bound by their
        /// commitments, so nobody copies it. The trainer holds the true trajectory: a pass whose
        /// sketch disagrees with the trainer's is disputed, so two lazy verifiers agreeing on a
        /// guess lose their collateral (to those proven right, the trainer included). A sketch
        /// the dispute refutes costs the trainer `VerifierSlash` of its collateral. Empty
        /// evidence is allowed: a round whose verifiers have all revealed settles once the
        /// trainer has submitted, or at the end of the reveal window.
        #[pallet::call_index(12)]
        #[pallet::weight(T::WeightInfo::submit_trainer_evidence(evidence.len() as u32))]
        pub fn submit_trainer_evidence(
            origin: OriginFor<T>,
            job: JobId,
            evidence: TrainerSketches<T>,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            Self::do_trainer_evidence(job, who, evidence)
        }

        /// Joins the verifier pool with `offer` (`Some`), or leaves it (`None`). Joining needs an
        /// eligible bond; a drawn verifier must commit and reveal in time or lose part of its
        /// collateral. Rounds already drawn must still be answered after leaving. Joining again
        /// refreshes the draw weight to the active bond now and replaces the offer (the queue of
        /// rounds drawn before stays); either way the entry takes part only in draws of rounds
        /// opened after this block, from randomness that began after it (so nobody can join, or
        /// weigh more, once it knows a draw). Its slot in the draw's sum trees follows at the end
        /// of the current pool epoch ([`pool`]): until then a join is not drawn, and a leave's old
        /// slot is refused.
        ///
        /// The offer declares the device class the worker replays on (it is drawn only for
        /// bundles that class verifies) and its replay capacity in micro-ut per hour (it is drawn
        /// only for rounds it replays within `MaxReplayWindow`, after the rounds it has already
        /// been drawn for): a verifier is never asked for more than it declared, so silence is
        /// never forced on it. The capacity must be backed: the free bond must cover the collateral
        /// of a round that fills the commit window at that capacity ([`Self::capacity_backing`]).
        ///
        /// Joining also declares that the verifier's worker runs the current `KernelsRevision`:
        /// it is drawn only for jobs of that revision. After a runtime upgrade raises it, a
        /// verifier joins again once its worker runs the new kernels.
        #[pallet::call_index(8)]
        #[pallet::weight(T::WeightInfo::set_verifier())]
        pub fn set_verifier(origin: OriginFor<T>, offer: Option<VerifierOffer>) -> DispatchResult {
            let who = ensure_signed(origin)?;
            match offer {
                Some(VerifierOffer { class, capacity }) => {
                    ensure!(T::Staking::is_eligible(&who), Error::<T>::NotEligible);
                    ensure!(class.is_valid(), Error::<T>::InvalidDeviceClass);
                    ensure!(
                        (T::MinVerifierCapacity::get()..=T::MaxVerifierCapacity::get())
                            .contains(&capacity),
                        Error::<T>::CapacityOutOfRange
                    );
                    ensure!(
                        T::Staking::free_collateral(&who)
                            >= Self::capacity_backing(class, capacity),
                        Error::<T>::CapacityNotBacked
                    );
                    let previous = VerifierPool::<T>::get(&who);
                    ensure!(
                        previous.is_some()
                            || VerifierPool::<T>::count() < T::MaxVerifierPool::get(),
                        Error::<T>::TooManyVerifiers
                    );
                    let entry = VerifierEntry {
                        since: frame_system::Pallet::<T>::block_number(),
                        weight: verification::stake_weight::<T>(&who),
                        kernels: T::KernelsRevision::get(),
                        class,
                        capacity,
                        busy_until: previous.map(|p| p.busy_until).unwrap_or_default(),
                    };
                    VerifierPool::<T>::insert(&who, entry);
                }
                None => VerifierPool::<T>::remove(&who),
            }
            pool::stage::<T>(&who);
            Self::deposit_event(Event::VerifierSet { who, offer });
            Ok(())
        }

        /// Removes a verifier that is no longer eligible (unbonded or slashed below the minimum):
        /// anyone may, so stale entries cannot fill the pool.
        #[pallet::call_index(9)]
        #[pallet::weight(T::WeightInfo::prune_verifier())]
        pub fn prune_verifier(origin: OriginFor<T>, who: T::AccountId) -> DispatchResult {
            ensure_signed(origin)?;
            ensure!(VerifierPool::<T>::contains_key(&who), Error::<T>::NotInVerifierPool);
            ensure!(!T::Staking::is_eligible(&who), Error::<T>::StillEligible);
            VerifierPool::<T>::remove(&who);
            pool::stage::<T>(&who);
            Self::deposit_event(Event::VerifierSet { who, offer: None });
            Ok(())
        }
    }

    // `ValidateUnsigned` is deprecated in favour of `#[pallet::authorize]`, which needs the
    // `AuthorizeCall` transaction extension in the runtime; BABE and GRANDPA of this release line still
    // report equivocations through it, and so do attestations until the runtime moves over.
    #[allow(deprecated)]
    #[pallet::validate_unsigned]
    impl<T: Config> ValidateUnsigned for Pallet<T> {
        type Call = Call<T>;

        fn validate_unsigned(_source: TransactionSource, call: &Self::Call) -> TransactionValidity {
            match call {
                Call::attest_availability { attestation, signature } => {
                    availability::validate::<T>(attestation, signature)
                }
                _ => InvalidTransaction::Call.into(),
            }
        }
    }

    impl<T: Config> Pallet<T> {
        /// Highest price a bid to train `job` on `device` may ask: what leaves the fees of every
        /// possible vote, at that class's replay floor, in the budget ([`fees::max_price`]).
        pub fn max_price(job: &JobOf<T>, device: DeviceClass) -> BalanceOf<T> {
            fees::max_price::<T>(
                job.budget,
                job.work_micro_ut,
                job.segments(),
                job.overhead_ppb(),
                device,
            )
        }

        /// The highest price a bid on job `id` naming `device` may ask ([`Self::max_price`]);
        /// `None` unless the job exists and takes bids. What a trainer's daemon checks its asking
        /// price against before sending a bid the chain would refuse (`PriceAboveBudget`): the
        /// budget less the fees of every vote the job may pay.
        pub fn bid_ceiling(id: JobId, device: DeviceClass) -> Option<BalanceOf<T>> {
            Jobs::<T>::get(id)
                .filter(|job| matches!(job.state, JobState::Open))
                .map(|job| Self::max_price(&job, device))
        }

        /// The least budget `post_job` takes for `spec` (what `ergon_checkSpec` shows a user before
        /// posting): `MinBudget`, or the least price of its work plus the reserve for every possible
        /// vote ([`fees::least_budget`]), for the cheapest class the spec may be trained on (at that
        /// budget only that class's trainers can bid); the rule the spec breaks if `post_job`
        /// would refuse it.
        pub fn least_budget(spec: &JobSpec) -> Result<BalanceOf<T>, spec_check::SpecRejection> {
            let least = Self::least_budgets(spec)?;
            Ok([least.cpu, least.gpu].into_iter().flatten().min().unwrap_or_else(T::MinBudget::get))
        }

        /// The least budget `post_job` takes for `spec` on each price tier (what `ergon_checkSpec`
        /// shows beside [`Self::least_budget`]): on a CPU, and on a GPU when the spec may be trained
        /// on one (`None` for a convolutional spec, which trains on CPUs only). A budget between the
        /// two lets only the cheaper tier's trainers bid. The rule the spec breaks if refused.
        pub fn least_budgets(
            spec: &JobSpec,
        ) -> Result<ergon_protocol::PerClass<Option<BalanceOf<T>>>, spec_check::SpecRejection>
        {
            let summary = spec_check::check::<T>(spec)?;
            let mut least = ergon_protocol::PerClass { cpu: None, gpu: None };
            for device in Self::classes_for(spec) {
                let budget = Some(Self::least_for(spec, &summary, device));
                match device {
                    DeviceClass::Cpu => least.cpu = budget,
                    DeviceClass::Cuda { .. } => least.gpu = budget,
                }
            }
            Ok(least)
        }

        /// The least budget for `spec` whose price floor and verification reserve are those of
        /// `device` (what a bid naming that class needs).
        pub fn least_budget_on(
            spec: &JobSpec,
            device: DeviceClass,
        ) -> Result<BalanceOf<T>, spec_check::SpecRejection> {
            let summary = spec_check::check::<T>(spec)?;
            Ok(Self::least_for(spec, &summary, device))
        }

        /// [`fees::least_budget`] of a checked `spec` (its `summary`) on `device`.
        fn least_for(
            spec: &JobSpec,
            summary: &ergon_job_spec::SpecSummary,
            device: DeviceClass,
        ) -> BalanceOf<T> {
            let work_micro_ut = summary.training_micro_ut();
            fees::least_budget::<T>(
                Self::min_price_for(work_micro_ut, device),
                work_micro_ut,
                summary.checkpoints.saturating_sub(1),
                spec_overhead_ppb(spec),
                device,
            )
        }

        /// A class of each price tier `spec` may be trained on: the CPU, and a GPU when the spec
        /// replays across devices (every GPU class is priced alike).
        fn classes_for(spec: &JobSpec) -> impl Iterator<Item = DeviceClass> {
            let gpu = DeviceClass::Cuda { capability: ergon_protocol::device::MIN_CUDA_CAPABILITY };
            let gpu = gpu.may_train(spec.replays_across_devices()).then_some(gpu);
            core::iter::once(DeviceClass::Cpu).chain(gpu)
        }

        /// Least price of `work_micro_ut` of training on `device`: `MinPricePerUt` of its tier per
        /// ut, rounded up.
        pub fn min_price_for(work_micro_ut: u128, device: DeviceClass) -> BalanceOf<T> {
            use sp_runtime::traits::SaturatedConversion;
            let per_ut: u128 = T::MinPricePerUt::get().of(device).saturated_into();
            let price = sp_runtime::helpers_128bit::multiply_by_rational_with_rounding(
                work_micro_ut,
                per_ut,
                1_000_000,
                sp_runtime::Rounding::Up,
            )
            .unwrap_or(u128::MAX);
            price.saturated_into()
        }

        /// `bid`'s weight: its benchmark is the worst case (a full list, every kept bid's trainer
        /// read to find the bid that would lose first, its deposit released).
        pub(crate) fn bid_weight() -> Weight {
            T::WeightInfo::bid()
        }

        /// Releases a bid deposit held from `who` and zeroes `amount`.
        pub(crate) fn release_deposit(who: &T::AccountId, amount: &mut BalanceOf<T>) {
            if !amount.is_zero() {
                let _ = T::Currency::release(
                    &HoldReason::BidDeposit.into(),
                    who,
                    *amount,
                    Precision::BestEffort,
                );
                *amount = Zero::zero();
            }
        }

        /// Releases the deposits of every bid left on `id` and removes the bids.
        pub(crate) fn release_bids(id: JobId) {
            for mut bid in Bids::<T>::take(id) {
                Self::release_deposit(&bid.trainer, &mut bid.deposit);
            }
        }

        /// Puts `job` in the timeout queue at the first block from `at` with room, and records it.
        pub(crate) fn schedule(
            id: JobId,
            job: &mut JobOf<T>,
            at: BlockNumberFor<T>,
        ) -> Result<(), Error<T>> {
            // With at most `MaxStoredJobs` jobs, each in one entry, this many blocks always have room.
            let span = ergon_timeouts::span(T::MaxStoredJobs::get(), T::MaxTimeoutsPerBlock::get());
            let block = ergon_timeouts::schedule::<Timeouts<T>, _, _, _>(id, at, span)
                .ok_or(Error::<T>::TimeoutQueueFull)?;
            job.timeout = block;
            Ok(())
        }

        /// Takes `job` out of the timeout queue entry at `at`.
        pub(crate) fn unschedule(id: JobId, at: BlockNumberFor<T>) {
            ergon_timeouts::unschedule::<Timeouts<T>, _, _, _>(&id, at);
        }

        /// Reschedules from a hook, where there is no caller to return an error to.
        pub(crate) fn reschedule(id: JobId, job: &mut JobOf<T>, at: BlockNumberFor<T>) {
            if Self::schedule(id, job, at).is_err() {
                frame_support::defensive!("timeout queue full although MaxStoredJobs holds");
            }
        }

        /// Assigns `job` to `bid`: freezes the price as the trainer's collateral, keeps its bid
        /// deposit, releases the other bids' deposits; the deadline becomes the job's timeout.
        pub(crate) fn assign(
            id: JobId,
            job: &mut JobOf<T>,
            bid: Bid<T::AccountId, BalanceOf<T>>,
        ) -> DispatchResult {
            T::Staking::obligate(&bid.trainer, Obligation::Training(id), bid.price)
                .map_err(|_| Error::<T>::InsufficientCollateral)?;
            Self::schedule(id, job, job.deadline.saturating_add(One::one()))?;
            job.state = JobState::Assigned { trainer: bid.trainer.clone(), price: bid.price };
            job.trainer_deposit = bid.deposit;
            // The bid's class prices the job's verification: its bundle must be of that class.
            BundleDevice::<T>::insert(id, bid.device);
            Bids::<T>::mutate(id, |bids| bids.retain(|b| b.trainer != bid.trainer));
            Self::release_bids(id);
            Self::deposit_event(Event::JobAssigned {
                job: id,
                trainer: bid.trainer,
                price: bid.price,
                deadline: job.deadline,
            });
            Ok(())
        }

        /// What posting a job whose deadline is `blocks` from now burns: `PostingFee` plus
        /// `SlotRent` for each of those blocks.
        pub fn posting_fee(blocks: BlockNumberFor<T>) -> BalanceOf<T> {
            use sp_runtime::traits::SaturatedConversion;
            let blocks: BalanceOf<T> = blocks.saturated_into::<u128>().saturated_into();
            T::PostingFee::get().saturating_add(T::SlotRent::get().saturating_mul(blocks))
        }

        /// Ends `job` without a verified model: refunds what is left in escrow, records the failure
        /// and schedules the record's removal.
        pub(crate) fn finish(
            id: JobId,
            job: &mut JobOf<T>,
            trainer: Option<T::AccountId>,
            reason: FailureReason,
        ) {
            let refunded = Self::refund(job);
            if let Some(trainer) = &trainer {
                Self::release_deposit(trainer, &mut job.trainer_deposit);
            }
            job.state = JobState::Failed { trainer, reason };
            Self::release_bids(id);
            Self::retire(id, job);
            Self::deposit_event(Event::JobFailed { job: id, reason, refunded });
        }

        /// Releases the rest of the escrow to the owner; returns the amount.
        pub(crate) fn refund(job: &mut JobOf<T>) -> BalanceOf<T> {
            let amount = job.escrow;
            if amount.is_zero() {
                return amount;
            }
            let released = T::Currency::release(
                &HoldReason::Escrow.into(),
                &job.owner,
                amount,
                Precision::BestEffort,
            )
            .unwrap_or_default();
            job.escrow = job.escrow.saturating_sub(released);
            released
        }

        /// Terminal job: keep it `Retention` blocks for clients, then remove it. It no longer counts
        /// against `MaxActiveJobs` or its owner's open jobs.
        pub(crate) fn retire(id: JobId, job: &mut JobOf<T>) {
            verification::release_verifiers::<T>(id);
            Rounds::<T>::remove(id);
            PastVerifiers::<T>::remove(id);
            BundleDevice::<T>::remove(id);
            TrainerEvidence::<T>::remove(id);
            PendingVotes::<T>::remove(id);
            Attestations::<T>::remove(id);
            DataAttestations::<T>::remove(id);
            DataReports::<T>::remove(id);
            DataGaps::<T>::remove(id);
            RejectedDataReports::<T>::remove(id);
            ActiveJobs::<T>::mutate(|n| n.saturating_dec());
            OpenJobsOf::<T>::mutate_exists(&job.owner, |n| {
                let left = n.unwrap_or_default().saturating_sub(1);
                *n = (left > 0).then_some(left);
            });
            let at = frame_system::Pallet::<T>::block_number()
                .saturating_add(T::Retention::get())
                .max(frame_system::Pallet::<T>::block_number().saturating_add(One::one()));
            Self::reschedule(id, job, at);
        }

        /// A job's phase timed out at `now`; returns the weight of what it did.
        pub(crate) fn on_timeout(id: JobId, now: BlockNumberFor<T>) -> Weight {
            let Some(mut job) = Jobs::<T>::get(id) else {
                return T::WeightInfo::timeout_remove();
            };
            if job.timeout != now {
                return T::WeightInfo::timeout_remove();
            }
            let weight = match job.state.clone() {
                JobState::Open => {
                    match verification::cheapest_bid::<T>(Bids::<T>::get(id).into_inner()) {
                        Some(bid) => {
                            if Self::assign(id, &mut job, bid).is_err() {
                                frame_support::defensive!("the winner's collateral was checked");
                                Self::finish(id, &mut job, None, FailureReason::NoBids);
                            }
                        }
                        None => Self::finish(id, &mut job, None, FailureReason::NoBids),
                    }
                    T::WeightInfo::timeout_assign().max(T::WeightInfo::timeout_missed_deadline())
                }
                JobState::Assigned { trainer, .. } => {
                    T::Staking::slash_obligation(
                        &trainer,
                        Obligation::Training(id),
                        T::TrainerSlash::get(),
                        ergon_protocol::traits::SlashReason::NoShow,
                    );
                    Self::forfeit_deposit(id, &mut job, &trainer);
                    Self::finish(id, &mut job, Some(trainer), FailureReason::MissedDeadline);
                    T::WeightInfo::timeout_missed_deadline()
                }
                JobState::Verifying { .. } => verification::advance::<T>(id, &mut job, now),
                JobState::Completed { .. } | JobState::Failed { .. } => {
                    Jobs::<T>::remove(id);
                    Self::deposit_event(Event::JobRemoved { job: id });
                    return T::WeightInfo::timeout_remove();
                }
            };
            Jobs::<T>::insert(id, job);
            weight
        }

        /// Attesters found the data of `job` unavailable: the trainer is released from its
        /// collateral and paid from the escrow — up to `BidDeposit` while assigned (what it would
        /// have forfeited had it missed the deadline), its price once its bundle is under
        /// verification (the owner has the model and took the data down) — the verifiers who
        /// revealed are paid their fees, and the job ends with the rest refunded. Nobody is
        /// slashed.
        pub(crate) fn end_for_unavailable_data(
            id: JobId,
            job: &mut JobOf<T>,
            trainer: T::AccountId,
        ) {
            T::Staking::release(&trainer, Obligation::Training(id));
            let amount = match job.state.clone() {
                JobState::Verifying { price, .. } => {
                    verification::pay_revealed::<T>(id, job);
                    price
                }
                _ => T::BidDeposit::get(),
            }
            .min(job.escrow);
            let paid = T::Currency::transfer_on_hold(
                &HoldReason::Escrow.into(),
                &job.owner,
                &trainer,
                amount,
                Precision::BestEffort,
                Restriction::Free,
                Fortitude::Force,
            )
            .unwrap_or_default();
            job.escrow = job.escrow.saturating_sub(paid);
            Self::deposit_event(Event::TrainerCompensated {
                job: id,
                trainer: trainer.clone(),
                amount: paid,
            });
            Self::unschedule(id, job.timeout);
            Self::finish(id, job, Some(trainer), FailureReason::DataUnavailable);
        }

        /// The assigned trainer missed the deadline, or committed a bundle the validators found
        /// unavailable: its bid deposit goes to the owner.
        pub(crate) fn forfeit_deposit(id: JobId, job: &mut JobOf<T>, trainer: &T::AccountId) {
            let amount = core::mem::take(&mut job.trainer_deposit);
            if amount.is_zero() {
                return;
            }
            let moved = T::Currency::transfer_on_hold(
                &HoldReason::BidDeposit.into(),
                trainer,
                &job.owner,
                amount,
                Precision::BestEffort,
                Restriction::Free,
                Fortitude::Force,
            )
            .unwrap_or_default();
            Self::deposit_event(Event::BidDepositForfeited {
                job: id,
                trainer: trainer.clone(),
                amount: moved,
            });
        }

        /// Every owner's `Escrow` hold equals the escrow of its jobs, every bidder's `BidDeposit`
        /// hold its bids' and assignments' deposits; terminal jobs hold nothing; the job counters
        /// match; every job sits in exactly the timeout entry it records; an assigned or verifying
        /// trainer has its collateral frozen.
        pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
            use alloc::collections::btree_map::BTreeMap;
            let mut per_owner = BTreeMap::<T::AccountId, BalanceOf<T>>::new();
            let mut deposits = BTreeMap::<T::AccountId, BalanceOf<T>>::new();
            let mut open = BTreeMap::<T::AccountId, u32>::new();
            let mut active = 0u32;
            for (id, job) in Jobs::<T>::iter() {
                if job.state.is_terminal() {
                    ensure!(job.escrow.is_zero(), "a finished job still holds escrow");
                    ensure!(job.trainer_deposit.is_zero(), "a finished job holds a deposit");
                } else {
                    active += 1;
                    *open.entry(job.owner.clone()).or_default() += 1;
                }
                if let JobState::Verifying { price, .. } = &job.state {
                    // The reserve is every possible vote's fee: fees never eat into the price.
                    ensure!(job.escrow >= *price, "verifier fees ate into the trainer's price");
                }
                match &job.state {
                    JobState::Assigned { trainer, .. } | JobState::Verifying { trainer, .. } => {
                        ensure!(
                            !T::Staking::collateral(trainer, Obligation::Training(id)).is_zero(),
                            "an assigned trainer has no collateral frozen"
                        );
                        let d = deposits.entry(trainer.clone()).or_default();
                        *d = d.saturating_add(job.trainer_deposit);
                    }
                    _ => {}
                }
                for bid in Bids::<T>::get(id) {
                    let d = deposits.entry(bid.trainer).or_default();
                    *d = d.saturating_add(bid.deposit);
                }
                ensure!(
                    Timeouts::<T>::get(job.timeout).contains(&id),
                    "a job is missing from its timeout entry"
                );
                let sum = per_owner.entry(job.owner.clone()).or_default();
                *sum = sum.saturating_add(job.escrow);
            }
            for (owner, escrow) in per_owner {
                ensure!(
                    T::Currency::balance_on_hold(&HoldReason::Escrow.into(), &owner) == escrow,
                    "escrow hold differs from the jobs' escrow"
                );
            }
            for (trainer, deposit) in deposits {
                ensure!(
                    T::Currency::balance_on_hold(&HoldReason::BidDeposit.into(), &trainer)
                        == deposit,
                    "deposit hold differs from the bids' deposits"
                );
            }
            ensure!(active == ActiveJobs::<T>::get(), "ActiveJobs differs from unfinished jobs");
            ensure!(
                open == OpenJobsOf::<T>::iter().collect::<BTreeMap<_, _>>(),
                "OpenJobsOf differs from the owners' unfinished jobs"
            );
            for id in RejectedDataReports::<T>::iter_keys() {
                ensure!(
                    Jobs::<T>::get(id).is_some_and(|j| !j.state.is_terminal()),
                    "a rejected data report outlived its job"
                );
            }
            for (id, _) in DataReports::<T>::iter() {
                ensure!(
                    Jobs::<T>::get(id).is_some_and(|j| matches!(
                        j.state,
                        JobState::Assigned { .. } | JobState::Verifying { .. }
                    )),
                    "a data report names a job that is neither assigned nor verifying"
                );
            }
            for (id, _) in DataAttestations::<T>::iter() {
                ensure!(
                    DataReports::<T>::contains_key(id),
                    "data attestations outlived their report"
                );
            }
            for (id, _) in DataGaps::<T>::iter() {
                ensure!(DataReports::<T>::contains_key(id), "data gaps outlived their report");
            }
            for (id, abstentions) in Abstentions::<T>::iter() {
                ensure!(
                    Jobs::<T>::get(id)
                        .is_some_and(|j| matches!(j.state, JobState::Verifying { .. })),
                    "abstentions name a job that is not verifying"
                );
                for (verifier, round) in abstentions.iter() {
                    ensure!(
                        !T::Staking::collateral(
                            verifier,
                            Obligation::Verification { job: id, round: *round }
                        )
                        .is_zero(),
                        "an abstainer's collateral is not frozen until the data check decides"
                    );
                }
            }
            for (_, round) in Rounds::<T>::iter() {
                for vote in round.votes.iter() {
                    if let Some(segment) = vote.verdict.and_then(|v| v.failed_segment()) {
                        ensure!(vote.segments.contains(&segment), "a fail names a foreign segment");
                    }
                    ensure!(
                        !round.is_dispute() || vote.segments == round.disputed,
                        "a dispute's verifier replays other segments than the disputed ones"
                    );
                }
            }
            let queued: usize = Timeouts::<T>::iter_values().map(|q| q.len()).sum();
            ensure!(queued == Jobs::<T>::count() as usize, "timeout entries differ from jobs");
            Self::pool_try_state()
        }
    }
}

impl<T: Config> sp_runtime::BoundToRuntimeAppPublic for Pallet<T> {
    type Public = T::AttesterId;
}

/// The session's validators, with their `ergn` keys, are the attesters.
impl<T: Config> frame_support::traits::OneSessionHandler<T::AccountId> for Pallet<T> {
    type Key = T::AttesterId;

    fn on_genesis_session<'a, I>(validators: I)
    where
        I: 'a + Iterator<Item = (&'a T::AccountId, T::AttesterId)>,
    {
        Attesters::<T>::put(frame_support::BoundedVec::truncate_from(
            validators.map(|(_, key)| key).collect(),
        ));
    }

    fn on_new_session<'a, I>(_changed: bool, validators: I, _queued: I)
    where
        I: 'a + Iterator<Item = (&'a T::AccountId, T::AttesterId)>,
    {
        Attesters::<T>::put(frame_support::BoundedVec::truncate_from(
            validators.map(|(_, key)| key).collect(),
        ));
        AttesterSetId::<T>::mutate(|id| *id = id.wrapping_add(1));
    }

    fn on_disabled(_validator_index: u32) {}
}
