//! The records of the market: jobs, bids, bundle commitments and verification rounds.

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use ergon_job_spec::JobSpec;
use frame_support::{BoundedVec, CloneNoBound, DebugNoBound, EqNoBound, PartialEqNoBound};
use frame_system::pallet_prelude::BlockNumberFor;
use scale_info::TypeInfo;
use sp_core::H256;

/// Identifier of a job (sequential).
pub type JobId = u64;

/// Longest bundle URI, in bytes.
pub const MAX_URI_LEN: u32 = 256;

/// Where a bundle can be fetched: `http://` or `https://` URI bytes.
pub type BundleUri = BoundedVec<u8, frame_support::traits::ConstU32<MAX_URI_LEN>>;

/// A trainer's offer to train a job.
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
pub struct Bid<AccountId, Balance> {
    /// The bidding trainer.
    pub trainer: AccountId,
    /// What the trainer asks to be paid.
    pub price: Balance,
    /// The bid deposit held from the trainer.
    pub deposit: Balance,
    /// The device class it trains on: the price floor's and the verifiers' fee floor's tier, and
    /// the class its bundle must declare.
    pub device: ergon_protocol::DeviceClass,
}

/// What the trainer reports about the trained model; checked by the verifiers against the bundle.
/// Fixed-point integers (no floats on chain).
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Encode,
    Decode,
    DecodeWithMemTracking,
    Debug,
    TypeInfo,
    MaxEncodedLen,
    Default,
)]
#[scale_info(capture_docs = "always")]
pub struct ClaimedMetrics {
    /// Mean training loss of the last epoch, in millionths.
    pub train_loss_micro: u64,
    /// Validation loss, in millionths.
    pub validation_loss_micro: u64,
    /// Validation accuracy in parts per million (0 when the task has no accuracy).
    pub validation_accuracy_ppm: u32,
    /// Set when the training diverged (the owner's spec, e.g. too high a learning rate): the
    /// optimizer step whose loss (or, at the last step, the final validation loss) is not finite.
    /// The bundle then holds the checkpoints before it and its tail is replayed by every verifier;
    /// a confirmed divergence pays the trainer for the steps it trained (`price × step / steps`)
    /// and refunds the rest, a refuted one fails the bundle. The metrics above are zero.
    pub diverged_at: Option<u64>,
}

/// A trainer's commitment to a checkpoint bundle, made before the challenge randomness exists.
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
pub struct BundleCommitment<BlockNumber> {
    /// Merkle root over the manifest and every checkpoint file.
    pub root: H256,
    /// Where the bundle is served.
    pub uri: BundleUri,
    /// Hash of the final model's weights.
    pub final_model_hash: H256,
    /// The claimed metrics.
    pub metrics: ClaimedMetrics,
    /// Block of the commitment; the challenge uses randomness from a later block.
    pub submitted_at: BlockNumber,
}

pub use ergon_protocol::{Sketch, Verdict};

/// Bound of a segment's sketches: [`ergon_protocol::evidence::MAX_PROBES`].
pub type MaxProbes =
    frame_support::traits::ConstU32<{ ergon_protocol::evidence::MAX_PROBES as u32 }>;

/// A segment's replay evidence: the [`Sketch`] of each of its probe steps, in order
/// ([`ergon_protocol::evidence::probe_steps`]).
pub type SegmentSketches = BoundedVec<Sketch, MaxProbes>;

/// A vote's replay evidence: one [`SegmentSketches`] per segment of the vote, in the vote's order.
pub type Evidence<T> = BoundedVec<SegmentSketches, <T as crate::Config>::SegmentsPerRound>;

/// The trainer's own sketches of its bundle's drawn segments (issue 34, item 2), by segment: the
/// trainer holds the true trajectory, so two lazy passes agreeing on a guess disagree with it and
/// the segment is disputed.
pub type TrainerSketches<T> =
    BoundedVec<(u32, SegmentSketches), crate::verification::MaxTrainerSketches<T>>;

/// A trainer in the verifier pool.
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
pub struct VerifierEntry<BlockNumber> {
    /// Block it joined (or last refreshed its weight): it is drawn only from randomness that began
    /// after it.
    pub since: BlockNumber,
    /// Its active bond when it joined (planck, saturated to `u64`): the draw weighs it by the lower
    /// of this and its active bond at the draw, so bonding more after learning a draw cannot help.
    pub weight: u64,
    /// The worker kernels revision it declared when it joined (`KernelsRevision` then): it is
    /// drawn only for jobs of that revision, whose bundles it replays exactly.
    pub kernels: u32,
    /// The hardware class it replays on: it is drawn only for bundles that class verifies
    /// ([`ergon_protocol::DeviceClass::verifies`]).
    pub class: ergon_protocol::DeviceClass,
    /// Its declared replay capacity, micro-ut per hour: it is drawn only for rounds it replays
    /// within `MaxReplayWindow` after the work it was drawn for before.
    pub capacity: u128,
    /// When the replays it was drawn for end at its declared capacity: a new round queues behind
    /// them. Joining again keeps it, so re-declaring never empties a queue.
    pub busy_until: BlockNumber,
}

/// What a verifier declares when it joins the pool ([`crate::Pallet::set_verifier`]).
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Encode,
    Decode,
    DecodeWithMemTracking,
    Debug,
    TypeInfo,
    MaxEncodedLen,
)]
pub struct VerifierOffer {
    /// The hardware class its worker replays on.
    pub class: ergon_protocol::DeviceClass,
    /// Its replay capacity, micro-ut per hour, within [`MinVerifierCapacity`,
    /// `MaxVerifierCapacity`] and backed by its free bond ([`crate::Pallet::capacity_backing`]).
    pub capacity: u128,
}

/// One drawn verifier's task and progress in a round.
#[derive(
    CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, DebugNoBound, TypeInfo, MaxEncodedLen,
)]
#[scale_info(skip_type_params(T))]
pub struct VerifierVote<T: crate::Config> {
    /// The verifier.
    pub verifier: T::AccountId,
    /// Its own checkpoint segments `Cᵢ → Cᵢ₊₁` to replay, by `i` (in a dispute: the disputed ones).
    pub segments: BoundedVec<u32, T::SegmentsPerRound>,
    /// [`ergon_protocol::commitments::verdict`] of its verdict, evidence and salt, once committed.
    pub commitment: Option<H256>,
    /// The verdict, once revealed (matching the commitment).
    pub verdict: Option<Verdict>,
    /// The replay evidence revealed with it: a sketch per segment (a pass must carry them).
    pub evidence: Evidence<T>,
}

/// A revealed vote of an earlier round, waiting for the round that decides the job.
#[derive(
    CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, DebugNoBound, TypeInfo, MaxEncodedLen,
)]
#[scale_info(skip_type_params(T))]
pub struct PendingVote<T: crate::Config> {
    /// The verifier (its collateral stays frozen until then).
    pub verifier: T::AccountId,
    /// The round it voted in.
    pub round: u32,
    /// The segments it replayed.
    pub segments: BoundedVec<u32, T::SegmentsPerRound>,
    /// Its verdict.
    pub verdict: Verdict,
    /// Its replay evidence, a sketch per segment.
    pub evidence: Evidence<T>,
}

/// Phase of a verification round.
#[derive(Clone, Copy, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
pub enum Phase {
    /// Waiting for randomness that began after the round opened, to draw verifiers (and, in a
    /// regular round, their segments).
    Drawing,
    /// Drawn verifiers replay the segments and commit to a verdict.
    Commit,
    /// Verifiers reveal their committed verdicts.
    Reveal,
}

/// A verification round of a job's bundle.
#[derive(
    CloneNoBound, PartialEqNoBound, EqNoBound, Encode, Decode, DebugNoBound, TypeInfo, MaxEncodedLen,
)]
#[scale_info(skip_type_params(T))]
pub struct Round<T: crate::Config> {
    /// Round number, from 0.
    pub number: u32,
    /// Current phase.
    pub phase: Phase,
    /// Block the round opened (the bundle commitment for round 0): its draw uses only randomness
    /// that began after it.
    pub opened_at: BlockNumberFor<T>,
    /// The drawn verifiers, their segments and their votes.
    pub votes: BoundedVec<VerifierVote<T>, crate::verification::MaxVerifiersPerRound<T>>,
    /// Empty in a regular round, where each verifier replays segments of its own. In a dispute
    /// (a round opened by a fail), the segments the fails named: every verifier of the round
    /// replays all of them.
    pub disputed: BoundedVec<u32, T::SegmentsPerRound>,
    /// Whether the trainer has submitted its own sketches of this round's segments
    /// ([`crate::Pallet::submit_trainer_evidence`]): a round whose verifiers have all revealed
    /// settles early only then.
    pub trainer_evidence: bool,
}

impl<T: crate::Config> Round<T> {
    /// Every segment a vote of this round replays, sorted, each once.
    pub fn segments(&self) -> alloc::vec::Vec<u32> {
        let mut all: alloc::vec::Vec<u32> =
            self.votes.iter().flat_map(|v| v.segments.iter().copied()).collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Whether this round re-checks the segments of an earlier round's fails.
    pub fn is_dispute(&self) -> bool {
        !self.disputed.is_empty()
    }
}

/// Why a job ended without a verified model.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    Encode,
    Decode,
    DecodeWithMemTracking,
    Debug,
    TypeInfo,
    MaxEncodedLen,
)]
pub enum FailureReason {
    /// The owner cancelled it before assignment.
    Cancelled,
    /// The bid window closed without an eligible bid.
    NoBids,
    /// The assigned trainer did not commit a bundle before the deadline.
    MissedDeadline,
    /// A verifier's fail was upheld (by a dispute, or by the quorum of the last round).
    Rejected,
    /// No round reached a quorum within `MaxRounds`.
    Inconclusive,
    /// Two thirds of the attesters found the bundle unavailable or not matching its root.
    Unavailable,
    /// The trainer reported that it could not fetch the job's data, and two thirds of the attesters
    /// found the data unavailable or not matching its content roots: not the trainer's fault.
    DataUnavailable,
}

/// Where a job stands. The last two are terminal: the escrow is settled and the record is kept
/// `Retention` blocks for clients, then removed.
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
pub enum JobState<AccountId, Balance, BlockNumber> {
    /// Taking bids until the bid window closes.
    Open,
    /// A trainer is training; it must commit a bundle before the deadline.
    Assigned {
        /// The trainer.
        trainer: AccountId,
        /// The agreed price.
        price: Balance,
    },
    /// The bundle is committed and being verified (see the job's [`Round`]).
    Verifying {
        /// The trainer.
        trainer: AccountId,
        /// The agreed price.
        price: Balance,
        /// The commitment.
        bundle: BundleCommitment<BlockNumber>,
    },
    /// Verified: the trainer was paid, the model is at the bundle.
    Completed {
        /// The trainer.
        trainer: AccountId,
        /// What it was paid.
        price: Balance,
        /// The verified bundle.
        bundle: BundleCommitment<BlockNumber>,
    },
    /// Ended without a verified model; the owner got the escrow back (minus verifier fees).
    Failed {
        /// The trainer, if one was assigned.
        trainer: Option<AccountId>,
        /// Why.
        reason: FailureReason,
    },
}

impl<AccountId, Balance, BlockNumber> JobState<AccountId, Balance, BlockNumber> {
    /// The escrow is settled and nothing more happens but the record's removal.
    pub fn is_terminal(&self) -> bool {
        matches!(self, JobState::Completed { .. } | JobState::Failed { .. })
    }
}

/// A training job.
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo, MaxEncodedLen)]
pub struct Job<AccountId, Balance, BlockNumber> {
    /// Who posted and pays.
    pub owner: AccountId,
    /// What to train.
    pub spec: JobSpec,
    /// Training work computed on chain from the spec, in micro-ut: the T credit a pass earns.
    pub work_micro_ut: u128,
    /// Checkpoints the bundle must hold (C0 included).
    pub checkpoints: u64,
    /// The most the owner pays, trainer and verifiers together.
    pub budget: Balance,
    /// Still held in escrow for this job.
    pub escrow: Balance,
    /// The assigned trainer's bid deposit, held until validators find its bundle available or the
    /// job settles (forfeited to the owner if it misses the deadline or its bundle is unavailable).
    pub trainer_deposit: Balance,
    /// Last block of bidding.
    pub bid_window_end: BlockNumber,
    /// Last block at which the assigned trainer may commit its bundle.
    pub deadline: BlockNumber,
    /// Block at which the current phase times out (the job's entry in `Timeouts`).
    pub timeout: BlockNumber,
    /// The worker kernels revision the job is trained and replayed with: `KernelsRevision` when
    /// it was posted. Only verifiers that joined declaring it are drawn.
    pub kernels: u32,
    /// Where the job stands.
    pub state: JobState<AccountId, Balance, BlockNumber>,
}

impl<AccountId, Balance, BlockNumber> Job<AccountId, Balance, BlockNumber> {
    /// Segments `Cᵢ → Cᵢ₊₁` of its spec's bundle: what fees are shares of (each segment costs the
    /// same to replay, whatever the bundle).
    pub fn segments(&self) -> u64 {
        self.checkpoints.saturating_sub(1)
    }

    /// The step at which the committed bundle says the training diverged, if it does.
    pub fn diverged_at(&self) -> Option<u64> {
        match &self.state {
            JobState::Verifying { bundle, .. } | JobState::Completed { bundle, .. } => {
                bundle.metrics.diverged_at
            }
            _ => None,
        }
    }

    /// Checkpoints of the committed bundle: the spec's, or those before a divergence
    /// ([`JobSpec::checkpoints_before_divergence`]).
    pub fn bundle_checkpoints(&self) -> u64 {
        match self.diverged_at() {
            Some(step) => self.spec.checkpoints_before_divergence(step),
            None => self.checkpoints,
        }
    }

    /// Segments verifiers are drawn for: the bundle's `Cᵢ → Cᵢ₊₁`, and the tail of a diverged
    /// bundle (its last checkpoint to the divergence, segment `bundle_checkpoints() - 1`).
    pub fn drawable_segments(&self) -> u64 {
        self.bundle_checkpoints().saturating_sub(1) + self.diverged_at().is_some() as u64
    }

    /// Optimizer steps of its spec.
    pub fn total_steps(&self) -> u64 {
        self.spec.steps_per_epoch().saturating_mul(self.spec.epochs as u64)
    }

    /// What a verification of it spends besides its replay, in parts per billion of its training
    /// ([`ergon_protocol::overhead::overhead_ppb`]).
    pub fn overhead_ppb(&self) -> u64 {
        spec_overhead_ppb(&self.spec)
    }
}

/// What a verification of a job with `spec` spends besides its replay, in parts per billion of its
/// training ([`ergon_protocol::overhead::overhead_ppb`]).
pub fn spec_overhead_ppb(spec: &JobSpec) -> u64 {
    ergon_protocol::overhead::overhead_ppb(spec.train.samples, spec.epochs, spec.validation.samples)
}

/// A drawn verifier's task and progress as clients read it (runtime API).
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo)]
pub struct VoteInfo<AccountId> {
    /// The verifier.
    pub verifier: AccountId,
    /// The checkpoint segments `Cᵢ → Cᵢ₊₁` it replays, by `i`.
    pub segments: alloc::vec::Vec<u32>,
    /// Its commitment, once made.
    pub commitment: Option<H256>,
    /// Its verdict, once revealed.
    pub verdict: Option<Verdict>,
    /// Its replay evidence, once revealed: per segment, a sketch per probe step.
    pub evidence: alloc::vec::Vec<alloc::vec::Vec<Sketch>>,
}

/// A verification round as clients read it (runtime API).
#[derive(Clone, PartialEq, Eq, Encode, Decode, Debug, TypeInfo)]
pub struct RoundInfo<AccountId> {
    /// Round number, from 0.
    pub number: u32,
    /// Current phase.
    pub phase: Phase,
    /// The drawn verifiers, their segments and their progress.
    pub votes: alloc::vec::Vec<VoteInfo<AccountId>>,
    /// The disputed segments (empty in a regular round).
    pub disputed: alloc::vec::Vec<u32>,
    /// Whether the trainer has given its own evidence of the round's segments.
    pub trainer_evidence: bool,
}
