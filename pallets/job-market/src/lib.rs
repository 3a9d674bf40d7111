//! # Job-market pallet
//!
//! Users pay for training and get either a verified model or their money back.
//!
//! 1. [`Pallet::post_job`]: the spec is validated on chain (bounded size, shapes) and its training work
//!    computed from the spec (never from a trainer's claim); the budget is held in escrow
//!    ([`HoldReason::Escrow`]). [`Pallet::cancel_job`] refunds it in full before assignment.
//! 2. [`Pallet::bid`] by eligible (bonded) trainers during the bid window. When the window closes the
//!    cheapest eligible bid wins (ties: higher ECP, then account); [`Pallet::accept_bid`] lets the owner
//!    pick one earlier. A price may use the budget minus the verification reserve
//!    (`VerificationShare`).
//! 3. [`Pallet::submit_bundle`] by the assigned trainer before the deadline commits the bundle's Merkle
//!    root, URI, final-model hash and claimed metrics. Missing the deadline slashes the trainer and
//!    refunds the owner.
//! 4. Verification rounds ([`verification`]): randomness from a block *after* the commitment draws
//!    `Verifiers` bonded trainers (ECP-weighted, never the trainer or the owner) and the checkpoint
//!    segments to replay. Verifiers [`Pallet::commit_verdict`] then [`Pallet::reveal_verdict`].
//! 5. Settlement: a round is decisive when more than half of the drawn verifiers revealed and one verdict
//!    has at least 2/3 of the revealed votes. Pass pays the trainer's price and credits T; fail slashes
//!    the trainer. Verifiers on the winning side (or all who revealed, in an indecisive round) share the
//!    round's fee; silent verifiers and, in a decisive round, the minority are slashed a little. An
//!    indecisive round is followed by a fresh one, at most `MaxRounds`; then the owner is refunded.
//!
//! 6. Availability ([`availability`]): validators' offchain workers sample every bundle under
//!    verification over HTTP and attest ([`Pallet::attest_availability`], an unsigned transaction
//!    signed with their `ergn` session key); two thirds of the attesters finding it unavailable fail
//!    the job as a rejected bundle.
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
pub mod queries;
pub mod types;
pub mod verification;
pub mod weights;

#[cfg(test)]
mod availability_tests;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

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
    use frame_support::{
        pallet_prelude::*,
        traits::{
            fungible::{InspectHold, MutateHold},
            tokens::Precision,
            Randomness,
        },
    };
    use frame_system::pallet_prelude::*;
    use pallet_compute_power::ComputePowerLedger;
    use pallet_trainer_staking::{BondInspect, Slashing};
    use sp_core::H256;
    use sp_runtime::{traits::MaybeSerializeDeserialize, RuntimeAppPublic};
    use sp_runtime::{
        traits::{One, Saturating, Zero},
        Perbill, Permill,
    };

    #[pallet::pallet]
    pub struct Pallet<T>(_);

    /// Why this pallet holds balance.
    #[pallet::composite_enum]
    pub enum HoldReason {
        /// A job's budget, from posting until settlement.
        Escrow,
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

        /// Trainers' bonds: who may bid and verify, and who is slashed.
        type Staking: BondInspect<Self::AccountId, Balance = BalanceOf<Self>>
            + Slashing<Self::AccountId, Balance = BalanceOf<Self>>;

        /// Effective computing power: ranks bids and weights the verifier draw; credited with T.
        type ComputePower: ComputePowerLedger<Self::AccountId>;

        /// Randomness of the previous block (BABE's VRF output), with the block it comes from.
        type Randomness: Randomness<Option<Self::Hash>, BlockNumberFor<Self>>;

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

        /// Most jobs stored at once (terminal ones included until removed).
        #[pallet::constant]
        type MaxActiveJobs: Get<u32>;

        /// Most timeouts processed in one block.
        #[pallet::constant]
        type MaxTimeoutsPerBlock: Get<u32>;

        /// Verifiers drawn per round.
        #[pallet::constant]
        type Verifiers: Get<u32>;

        /// Checkpoint segments each round replays (the last one always, the others drawn).
        #[pallet::constant]
        type SegmentsPerRound: Get<u32>;

        /// Fewest checkpoint segments a job's spec must have. With `10 × SegmentsPerRound`, a
        /// verifier replays at most a tenth of the training steps.
        #[pallet::constant]
        type MinSegments: Get<u32>;

        /// Most verification rounds of a job.
        #[pallet::constant]
        type MaxRounds: Get<u32>;

        /// Blocks verifiers have to replay and commit.
        #[pallet::constant]
        type CommitWindow: Get<BlockNumberFor<Self>>;

        /// Blocks verifiers have to reveal.
        #[pallet::constant]
        type RevealWindow: Get<BlockNumberFor<Self>>;

        /// Blocks a finished job stays readable before its record is removed.
        #[pallet::constant]
        type Retention: Get<BlockNumberFor<Self>>;

        /// Share of the budget reserved for verifier fees (split evenly over every possible vote).
        #[pallet::constant]
        type VerificationShare: Get<Permill>;

        /// Share of the trainer's active bond slashed for a rejected bundle or a missed deadline.
        #[pallet::constant]
        type TrainerSlash: Get<Perbill>;

        /// Share of a verifier's active bond slashed for not revealing or voting against the quorum.
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
        type BenchmarkHelper: pallet_trainer_staking::BenchmarkTrainers<Self::AccountId>;
    }

    /// The next job's id.
    #[pallet::storage]
    pub type NextJobId<T: Config> = StorageValue<_, JobId, ValueQuery>;

    /// Every job not yet removed.
    #[pallet::storage]
    pub type Jobs<T: Config> = CountedStorageMap<_, Twox64Concat, JobId, JobOf<T>, OptionQuery>;

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

    /// Availability attestations of each job under verification: attester key and verdict.
    #[pallet::storage]
    pub type Attestations<T: Config> = StorageMap<
        _,
        Twox64Concat,
        JobId,
        BoundedVec<(T::AttesterId, bool), T::MaxAttesters>,
        ValueQuery,
    >;

    #[pallet::event]
    #[pallet::generate_deposit(pub(super) fn deposit_event)]
    pub enum Event<T: Config> {
        /// A job was posted; `budget` is held in escrow; its training work is `work_micro_ut`.
        JobPosted { job: JobId, owner: T::AccountId, budget: BalanceOf<T>, work_micro_ut: u128 },
        /// A trainer bid (or changed its bid).
        BidPlaced { job: JobId, trainer: T::AccountId, price: BalanceOf<T> },
        /// A trainer was assigned; it must commit a bundle by `deadline`.
        JobAssigned {
            job: JobId,
            trainer: T::AccountId,
            price: BalanceOf<T>,
            deadline: BlockNumberFor<T>,
        },
        /// The trainer committed its bundle.
        BundleSubmitted { job: JobId, trainer: T::AccountId, root: H256 },
        /// Verifiers and segments of a round were drawn.
        VerifiersDrawn {
            job: JobId,
            round: u32,
            verifiers: alloc::vec::Vec<T::AccountId>,
            segments: alloc::vec::Vec<u32>,
        },
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
        /// The bundle passed: the trainer was paid `price` and credited `work_micro_ut` of T.
        JobCompleted { job: JobId, trainer: T::AccountId, price: BalanceOf<T>, work_micro_ut: u128 },
        /// The job ended without a verified model; `refunded` went back to the owner.
        JobFailed { job: JobId, reason: FailureReason, refunded: BalanceOf<T> },
        /// A finished job's record was removed.
        JobRemoved { job: JobId },
        /// An attester checked the job's bundle over HTTP against its root.
        AvailabilityAttested { job: JobId, attester: T::AttesterId, available: bool },
    }

    #[pallet::error]
    pub enum Error<T> {
        /// The job spec is invalid (shapes, bounds or data description).
        InvalidSpec,
        /// The spec trains nothing (zero FLOPs) or has fewer than two checkpoints.
        NothingToTrain,
        /// The spec has fewer than `MinSegments` checkpoint segments: lower its checkpoint interval.
        TooFewCheckpoints,
        /// The budget is below `MinBudget`.
        BudgetTooLow,
        /// The free balance cannot cover the budget.
        InsufficientBalance,
        /// The bid window is outside [`MinBidWindow`, `MaxBidWindow`].
        BidWindowOutOfRange,
        /// The deadline leaves less than `MinTrainingTime` after bidding, or is beyond
        /// `MaxJobDuration`.
        DeadlineOutOfRange,
        /// `MaxActiveJobs` jobs are stored already.
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
        /// `MaxBids` bids were placed already.
        TooManyBids,
        /// No bid from that trainer.
        BidNotFound,
        /// The job is not assigned to the caller.
        NotAssignedTrainer,
        /// The deadline has passed.
        DeadlinePassed,
        /// The bundle URI is empty or not `http://`, `https://` or `file://`.
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
        /// No attester with that index in the current set.
        NotAnAttester,
        /// The job's bundle is not under verification.
        NotVerifying,
        /// This attester already attested this job.
        AlreadyAttested,
    }

    #[pallet::hooks]
    impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
        fn on_initialize(now: BlockNumberFor<T>) -> Weight {
            let due = Timeouts::<T>::take(now);
            // At most `MaxTimeoutsPerBlock` jobs, each weighed by the path its timeout took.
            due.iter().fold(T::WeightInfo::on_initialize_idle(), |weight, job| {
                weight.saturating_add(Self::on_timeout(*job, now))
            })
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
            let summary = spec.validate().map_err(|e| {
                log::debug!(target: LOG_TARGET, "invalid spec: {e:?}");
                Error::<T>::InvalidSpec
            })?;
            let work_micro_ut = summary.training_micro_ut();
            ensure!(
                summary.training_flops > 0 && summary.checkpoints >= 2,
                Error::<T>::NothingToTrain
            );
            ensure!(
                summary.checkpoints.saturating_sub(1) >= T::MinSegments::get() as u64,
                Error::<T>::TooFewCheckpoints
            );
            ensure!(budget >= T::MinBudget::get(), Error::<T>::BudgetTooLow);
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
            ensure!(Jobs::<T>::count() < T::MaxActiveJobs::get(), Error::<T>::TooManyJobs);
            let reason = HoldReason::Escrow.into();
            ensure!(
                T::Currency::can_hold(&reason, &owner, budget),
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
                bid_window_end,
                deadline,
                timeout: Zero::zero(),
                state: JobState::Open,
            };
            // The bid window closes at its last block; assignment happens at the next one.
            Self::schedule(id, &mut job, bid_window_end.saturating_add(One::one()))?;
            T::Currency::hold(&reason, &owner, budget)?;
            NextJobId::<T>::put(id.saturating_add(1));
            Jobs::<T>::insert(id, job);
            Self::deposit_event(Event::JobPosted { job: id, owner, budget, work_micro_ut });
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

        /// Bids `price` for an open job (replacing the caller's earlier bid). The caller must be an
        /// eligible trainer, not the owner.
        #[pallet::call_index(2)]
        #[pallet::weight(T::WeightInfo::bid())]
        pub fn bid(
            origin: OriginFor<T>,
            job: JobId,
            #[pallet::compact] price: BalanceOf<T>,
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
            ensure!(price <= Self::max_price(&record), Error::<T>::PriceAboveBudget);
            Bids::<T>::try_mutate(job, |bids| -> DispatchResult {
                match bids.iter_mut().find(|b| b.trainer == trainer) {
                    Some(existing) => existing.price = price,
                    None => bids
                        .try_push(Bid { trainer: trainer.clone(), price })
                        .map_err(|_| Error::<T>::TooManyBids)?,
                }
                Ok(())
            })?;
            Self::deposit_event(Event::BidPlaced { job, trainer, price });
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
        /// served, the final model's hash and the claimed metrics. Verification starts with
        /// randomness from a later block.
        #[pallet::call_index(4)]
        #[pallet::weight(T::WeightInfo::submit_bundle())]
        pub fn submit_bundle(
            origin: OriginFor<T>,
            job: JobId,
            bundle_root: H256,
            bundle_uri: BundleUri,
            final_model_hash: H256,
            metrics: ClaimedMetrics,
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
            let bundle = BundleCommitment {
                root: bundle_root,
                uri: bundle_uri,
                final_model_hash,
                metrics,
                submitted_at: now,
            };
            Self::unschedule(job, record.timeout);
            // Randomness of block now + 1 (read at now + 2) did not exist when the root was committed.
            Self::schedule(job, &mut record, now.saturating_add(2u32.into()))?;
            record.state = JobState::Verifying { trainer: trainer.clone(), price, bundle };
            Rounds::<T>::insert(job, verification::new_round::<T>(0));
            Jobs::<T>::insert(job, record);
            Self::deposit_event(Event::BundleSubmitted { job, trainer, root: bundle_root });
            Ok(())
        }

        /// A drawn verifier commits to its verdict:
        /// `blake2_256(SCALE(job, round, verifier, verdict, evidence_hash, salt))`.
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

        /// A verifier reveals the verdict it committed to, with the hash of its evidence report and
        /// the salt. The round settles as soon as every drawn verifier has revealed.
        #[pallet::call_index(6)]
        #[pallet::weight(T::WeightInfo::reveal_verdict())]
        pub fn reveal_verdict(
            origin: OriginFor<T>,
            job: JobId,
            verdict: Verdict,
            evidence_hash: H256,
            salt: H256,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            Self::do_reveal(job, who, verdict, evidence_hash, salt)
        }

        /// An attester's verdict on the availability of a job's bundle: an unsigned transaction from
        /// a validator's offchain worker, signed with its `ergn` session key (checked before
        /// dispatch). Two thirds of the attesters finding the bundle unavailable fail the job.
        #[pallet::call_index(7)]
        #[pallet::weight(T::WeightInfo::attest_availability())]
        pub fn attest_availability(
            origin: OriginFor<T>,
            attestation: availability::Attestation,
            _signature: <T::AttesterId as RuntimeAppPublic>::Signature,
        ) -> DispatchResult {
            ensure_none(origin)?;
            Self::do_attest(attestation)
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
        /// Highest price a bid may ask: the budget minus the verification reserve.
        pub fn max_price(job: &JobOf<T>) -> BalanceOf<T> {
            job.budget.saturating_sub(T::VerificationShare::get().mul_floor(job.budget))
        }

        /// Puts `job` in the timeout queue at the first block from `at` with room, and records it.
        pub(crate) fn schedule(
            id: JobId,
            job: &mut JobOf<T>,
            at: BlockNumberFor<T>,
        ) -> Result<(), Error<T>> {
            // With at most `MaxActiveJobs` jobs, each in one entry, this many blocks always have room.
            let span = ergon_timeouts::span(T::MaxActiveJobs::get(), T::MaxTimeoutsPerBlock::get());
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
                frame_support::defensive!("timeout queue full although MaxActiveJobs holds");
            }
        }

        /// Assigns `job` to `bid`: the deadline becomes its timeout.
        pub(crate) fn assign(
            id: JobId,
            job: &mut JobOf<T>,
            bid: Bid<T::AccountId, BalanceOf<T>>,
        ) -> Result<(), Error<T>> {
            Self::schedule(id, job, job.deadline.saturating_add(One::one()))?;
            job.state = JobState::Assigned { trainer: bid.trainer.clone(), price: bid.price };
            Bids::<T>::remove(id);
            Self::deposit_event(Event::JobAssigned {
                job: id,
                trainer: bid.trainer,
                price: bid.price,
                deadline: job.deadline,
            });
            Ok(())
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
            job.state = JobState::Failed { trainer, reason };
            Bids::<T>::remove(id);
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

        /// Terminal job: keep it `Retention` blocks for clients, then remove it.
        pub(crate) fn retire(id: JobId, job: &mut JobOf<T>) {
            Rounds::<T>::remove(id);
            PastVerifiers::<T>::remove(id);
            Attestations::<T>::remove(id);
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
                                frame_support::defensive!("timeout queue full");
                            }
                        }
                        None => Self::finish(id, &mut job, None, FailureReason::NoBids),
                    }
                    T::WeightInfo::timeout_assign().max(T::WeightInfo::timeout_missed_deadline())
                }
                JobState::Assigned { trainer, .. } => {
                    verification::slash_share::<T>(
                        &trainer,
                        T::TrainerSlash::get(),
                        pallet_trainer_staking::SlashReason::NoShow,
                    );
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

        /// Every owner's `Escrow` hold equals the escrow of its jobs; terminal jobs hold nothing;
        /// every job sits in exactly the timeout entry it records.
        pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
            let mut per_owner =
                alloc::collections::btree_map::BTreeMap::<T::AccountId, BalanceOf<T>>::new();
            for (id, job) in Jobs::<T>::iter() {
                if job.state.is_terminal() {
                    ensure!(job.escrow.is_zero(), "a finished job still holds escrow");
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
            let queued: usize = Timeouts::<T>::iter_values().map(|q| q.len()).sum();
            ensure!(queued == Jobs::<T>::count() as usize, "timeout entries differ from jobs");
            Ok(())
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
