//! The drilling pallet's stored types: tasks, their executors, publishers and trainers' drilling
//! records.

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use ergon_drill::{MatmulChain, QuantizedInference};
use ergon_protocol::traits::MicroUt;
use frame_support::{traits::ConstU32, BoundedVec};
use scale_info::TypeInfo;
use sp_core::H256;

/// Identifier of a drilling task (never reused; a re-issue gets a new id).
pub type TaskId = u64;

/// Longest URI of a committed model or dataset.
pub type MaxUriLen = ConstU32<256>;

/// Hard upper bound of a task's replication (the runtime's `MaxReplication` is at most this).
pub const MAX_REPLICATION: u32 = 16;

/// Bound of a task's executor lists.
pub type ReplicationBound = ConstU32<MAX_REPLICATION>;

/// Most widths of an inference model (input + [`ergon_drill::inference::MAX_LAYERS`] layers).
pub type MaxWidths = ConstU32<9>;

/// What an executor has to compute. Every kind is integer-only, so all honest executors produce the
/// same result bytes on any hardware ([`ergon_drill`] is the reference).
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub enum TaskKind {
    /// Chained int8 matrix products over seeded matrices.
    MatmulChain(MatmulChain),
    /// Int8 inference of a committed model over a committed dataset, both fetched from URIs.
    QuantizedInference {
        /// SHA-256 of the `EQNN` model file.
        model: H256,
        /// Where executors fetch the model.
        model_uri: BoundedVec<u8, MaxUriLen>,
        /// SHA-256 of the `EQDS` dataset file.
        dataset: H256,
        /// Where executors fetch the dataset.
        dataset_uri: BoundedVec<u8, MaxUriLen>,
        /// Input width, then each layer's output width.
        widths: BoundedVec<u32, MaxWidths>,
        /// Samples in the dataset.
        samples: u32,
    },
}

impl TaskKind {
    /// The inference task as the reference crate sees it (`None` for other kinds).
    pub fn inference(&self) -> Option<QuantizedInference> {
        match self {
            TaskKind::QuantizedInference { model, dataset, widths, samples, .. } => {
                Some(QuantizedInference {
                    model: model.0,
                    dataset: dataset.0,
                    widths: widths.to_vec(),
                    samples: *samples,
                })
            }
            TaskKind::MatmulChain(_) => None,
        }
    }

    /// Checks the parameters and returns the difficulty in micro-ut, computed from the exact
    /// operation count; `None` when the parameters are out of bounds or the task is worth nothing.
    pub fn difficulty(&self) -> Option<MicroUt> {
        let difficulty = match self {
            TaskKind::MatmulChain(chain) => {
                chain.validate().ok()?;
                chain.difficulty_micro_ut()
            }
            TaskKind::QuantizedInference { model_uri, dataset_uri, .. } => {
                if !is_valid_uri(model_uri) || !is_valid_uri(dataset_uri) {
                    return None;
                }
                let task = self.inference()?;
                task.validate().ok()?;
                task.difficulty_micro_ut()
            }
        };
        (difficulty > 0).then_some(difficulty)
    }

    /// The result honest executors report when the task's inputs are unusable (committed files
    /// missing or not matching): agreement on it earns nothing.
    pub fn invalid_result(&self) -> Option<H256> {
        self.inference().map(|task| H256(task.invalid_result()))
    }
}

/// A model or dataset URI must be non-empty `http://` or `https://`.
pub fn is_valid_uri(uri: &[u8]) -> bool {
    [&b"http://"[..], b"https://"]
        .iter()
        .any(|scheme| uri.len() > scheme.len() && uri.starts_with(scheme))
}

/// Who issued a task.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub enum TaskOrigin<AccountId> {
    /// The runtime, in drilling epoch `epoch`.
    Synthetic {
        /// The epoch.
        epoch: u32,
    },
    /// An approved task publisher.
    Publisher(AccountId),
}

/// Where a task is in its life.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub enum TaskPhase {
    /// Waiting for executors to be drawn (from randomness that began after the task was issued).
    Drawing,
    /// Executors compute and commit `hash(task, executor, result, salt)`.
    Committing,
    /// Executors who committed reveal their result and salt.
    Revealing,
    /// All executors revealed the same result and were credited.
    Agreed {
        /// The agreed result.
        result: H256,
    },
    /// Executors agreed that the task's committed inputs are unusable: nobody was credited.
    Invalid,
    /// Results differed or executors were silent: nobody was credited; the task was re-issued as
    /// `reissued` (if the re-issue limit allowed).
    Disagreed {
        /// The re-issued task.
        reissued: Option<TaskId>,
    },
    /// Too few eligible drillers to draw executors.
    Abandoned,
}

impl TaskPhase {
    /// Whether the task has ended (and only waits to be removed).
    pub fn is_final(&self) -> bool {
        !matches!(self, TaskPhase::Drawing | TaskPhase::Committing | TaskPhase::Revealing)
    }
}

/// One executor's progress on a task.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub struct Executor<AccountId> {
    /// The trainer.
    pub who: AccountId,
    /// Its commitment, once committed.
    pub commitment: Option<H256>,
    /// Milliseconds from the task's issuance to the block that included the commitment.
    pub elapsed_ms: u64,
    /// Its revealed result.
    pub result: Option<H256>,
}

/// A drilling task.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub struct Task<AccountId, BlockNumber> {
    /// The work.
    pub kind: TaskKind,
    /// D credit each executor earns on agreement, in micro-ut (from the exact operation count).
    pub difficulty: MicroUt,
    /// Who issued it.
    pub origin: TaskOrigin<AccountId>,
    /// How many executors must agree (`r`).
    pub replication: u32,
    /// 0 for a first issue, n for the n-th re-issue after a disagreement.
    pub attempt: u32,
    /// The phase.
    pub phase: TaskPhase,
    /// The drawn executors and their commitments and results.
    pub executors: BoundedVec<Executor<AccountId>, ReplicationBound>,
    /// Results revealed in earlier attempts, awaiting judgment: once an attempt agrees, those who
    /// revealed something else are slashed and those who revealed the agreed result are made whole.
    pub disputed: BoundedVec<Dispute<AccountId>, ReplicationBound>,
    /// Timestamp (ms) at which executors were assigned.
    pub issued_ms: u64,
    /// Block the task was issued: its executors are drawn from randomness that began after it.
    pub opened_at: BlockNumber,
    /// Block at which the current phase times out (or the finished task is removed).
    pub timeout: BlockNumber,
}

/// A result revealed in a failed attempt, kept for judgment by a later attempt. The executor's
/// collateral for `task` stays obligated until then: a dissent is neither slashed nor released on
/// the word of a majority that may be lying.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub struct Dispute<AccountId> {
    /// The executor.
    pub who: AccountId,
    /// What it revealed.
    pub result: H256,
    /// The attempt it revealed it in, whose collateral backs it.
    pub task: TaskId,
}

/// A trainer that runs the driller role.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub struct Driller<BlockNumber> {
    /// Declared capacity in micro-ut per hour: the size of its tasks and the most it is drawn for.
    pub capacity: MicroUt,
    /// Commit deadline of its last drawn task: it is not drawn again before that block.
    pub busy_until: BlockNumber,
    /// Block of its declaration: it is drawn only from randomness that began after it (declaring
    /// again, e.g. a larger capacity, restarts the wait).
    pub since: BlockNumber,
}

/// The state of a registered task publisher.
#[derive(
    Clone, PartialEq, Eq, Encode, Decode, DecodeWithMemTracking, Debug, TypeInfo, MaxEncodedLen,
)]
pub struct Publisher<Balance> {
    /// The deposit held while registered.
    pub deposit: Balance,
    /// Whether governance approved it to publish.
    pub approved: bool,
}

/// A trainer's record of completed (agreed) drilling tasks: its measured hashrate.
#[derive(
    Clone,
    PartialEq,
    Eq,
    Default,
    Encode,
    Decode,
    DecodeWithMemTracking,
    Debug,
    TypeInfo,
    MaxEncodedLen,
)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub struct DrillingRecord {
    /// Tasks completed with agreement.
    pub tasks: u32,
    /// Σ difficulty of those tasks, in micro-ut.
    pub difficulty: MicroUt,
    /// Σ milliseconds from issuance to commitment over those tasks.
    pub busy_ms: u64,
    /// Micro-ut per hour of the last completed task.
    pub last_micro_ut_per_hour: MicroUt,
    /// Drilling epoch of the last completed task: a record idle for `RecordRetention` epochs, of
    /// an account that no longer drills, can be pruned.
    pub last_epoch: u32,
}

impl DrillingRecord {
    /// Throughput in micro-ut per hour over every completed task: Σ difficulty / Σ time. Time is
    /// measured to the block that included the commitment, so this is a lower bound on the trainer's
    /// speed (tight when tasks take many blocks).
    pub fn micro_ut_per_hour(&self) -> MicroUt {
        rate(self.difficulty, self.busy_ms)
    }
}

/// `difficulty` micro-ut done in `ms` milliseconds, per hour.
pub fn rate(difficulty: MicroUt, ms: u64) -> MicroUt {
    difficulty.saturating_mul(3_600_000) / (ms.max(1) as u128)
}
