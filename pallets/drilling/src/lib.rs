//! # Drilling pallet (Proof of Drilling)
//!
//! Network-issued benchmark work that earns *drilling credit* D by redundant agreement: how a new
//! trainer earns effective computing power before anyone hires it, and how the network measures each
//! trainer's hardware.
//!
//! 1. **Tasks** ([`TaskKind`]) are integer-only workloads whose result bytes are the same on any
//!    hardware (the reference is [`ergon_drill`]): chained int8 matrix products over seeded matrices,
//!    and int8 inference of a committed model over a committed dataset. The difficulty in micro-ut is
//!    computed on chain from the exact operation count.
//! 2. **Drillers**: a bonded trainer opts in with [`Pallet::set_driller`] (the worker's driller role),
//!    declaring its capacity in micro-ut per hour; only drillers get tasks, so a trainer that runs no
//!    driller is never slashed for silence. Tasks are sized to fill `CapacityUse` of the commit window
//!    at the declared capacity, so accounts sharing one machine earn no more D than the machine does.
//!    [`Pallet::prune_driller`] lets anyone remove one whose bond fell below the minimum.
//! 3. **Synthetic tasks** ([`issuance`]): every `EpochLength` blocks the runtime snapshots the
//!    eligible drillers; once randomness that began after the snapshot exists (the fresh-randomness
//!    accumulator's VRF outputs of later blocks) it orders them and cuts them into groups of `SyntheticReplication` (the last
//!    group takes the remainder), one matrix-chain task per group, seeded by that randomness. Every
//!    eligible driller gets exactly one task per epoch; at most `MaxIssuePerBlock` are issued a block.
//! 4. **Published tasks**: a task publisher registers with a deposit ([`Pallet::register_publisher`]),
//!    is approved by `PublisherOrigin` (root or governance), then [`Pallet::publish_task`]s with a
//!    replication `r`. Executors are drawn once randomness that began after the publication exists
//!    (nobody, the publisher included, knew it then), uniformly among eligible drillers that declared
//!    before it began.
//! 5. **Commit-reveal**: executors [`Pallet::commit_result`] `hash(task, executor, result, salt)`
//!    within `CommitWindow`, then [`Pallet::reveal_result`] within `RevealWindow`.
//! 6. **Collateral**: each executor's task freezes part of its bond (trainer staking's obligations)
//!    until the task is judged, and every drilling slash is taken from it.
//! 7. **Settlement** ([`settlement`]): all `r` reveal the same result → each is credited D = difficulty
//!    through pallet-compute-power and its drilling record (hashrate) updated. Any disagreement or
//!    silence → nobody is credited; the silent are slashed at once (`NoShow`); revealed results become
//!    disputes, judged by the first re-issue that agrees (or a strict majority of the last attempt):
//!    those proven wrong are slashed (`DrillingDisagreement`) and their collateral paid to those proven
//!    right. A task is re-issued with `r + 2` executors at most `MaxReissues` times.
//! 8. **Records** of accounts that stopped drilling are pruned by anyone after `RecordRetention`
//!    epochs ([`Pallet::prune_record`]).
//!
//! Every task has one entry in [`Timeouts`]; finished tasks are removed `Retention` blocks later.
//! Storage is bounded: `MaxOpenTasks` tasks, `MaxPublishedTasks` per publisher, `MaxTrainers`
//! drillers (and in an epoch's issuance). Invariants (`try_state`): every task is in exactly the
//! timeout entry it names, the count of each publisher's tasks matches, each publisher's deposit is
//! held, and every executor of an open task and every pending dispute holds its collateral.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
pub mod issuance;
pub mod settlement;
pub mod types;
pub mod weights;

#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;

pub use pallet::*;
pub use types::*;
pub use weights::WeightInfo;

use frame_support::traits::fungible;

/// Balance type of publisher deposits.
pub type BalanceOf<T> =
    <<T as Config>::Currency as fungible::Inspect<<T as frame_system::Config>::AccountId>>::Balance;

/// A task as stored.
pub type TaskOf<T> =
    Task<<T as frame_system::Config>::AccountId, frame_system::pallet_prelude::BlockNumberFor<T>>;

const LOG_TARGET: &str = "runtime::drilling";

#[frame_support::pallet]
pub mod pallet {
    use super::*;
    use ergon_protocol::traits::{BondInspect, Obligation, Obligations, SlashReason, Slashing};
    use ergon_protocol::traits::{ComputePowerLedger, MicroUt};
    use frame_support::{
        pallet_prelude::*,
        traits::{
            fungible::{InspectHold, MutateHold},
            tokens::{Fortitude, Precision},
            UnixTime,
        },
    };
    use frame_system::pallet_prelude::*;
    use sp_core::H256;
    use sp_runtime::{
        traits::{One, SaturatedConversion, Saturating, Zero},
        Perbill,
    };

    #[pallet::pallet]
    pub struct Pallet<T>(_);

    /// Why this pallet holds balance.
    #[pallet::composite_enum]
    pub enum HoldReason {
        /// A task publisher's deposit.
        PublisherDeposit,
    }

    #[pallet::config]
    pub trait Config: frame_system::Config<RuntimeEvent: From<Event<Self>>> {
        /// The currency publisher deposits are held in.
        type Currency: fungible::Inspect<Self::AccountId>
            + fungible::Mutate<Self::AccountId>
            + fungible::InspectHold<Self::AccountId, Reason = Self::RuntimeHoldReason>
            + fungible::MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>;

        /// The runtime's hold reasons, of which [`HoldReason`] is a part.
        type RuntimeHoldReason: From<HoldReason>;

        /// Trainers' bonds: who may drill, the collateral each task freezes, and slashing.
        type Staking: BondInspect<Self::AccountId, Balance = BalanceOf<Self>>
            + Slashing<Self::AccountId, Balance = BalanceOf<Self>>
            + Obligations<Self::AccountId, Balance = BalanceOf<Self>>;

        /// Effective computing power, credited with D on agreement.
        type ComputePower: ComputePowerLedger<Self::AccountId>;

        /// Randomness nobody knew when a task was issued or the drillers were snapshotted (the VRF
        /// outputs of blocks after it, accumulated: `pallet-fresh-randomness`).
        type Randomness: ergon_protocol::traits::FreshRandomness<BlockNumberFor<Self>>;

        /// Wall-clock time of the block (pallet-timestamp), to time executors.
        type Time: UnixTime;

        /// Who approves and revokes task publishers (root or governance).
        type PublisherOrigin: EnsureOrigin<Self::RuntimeOrigin>;

        /// Deposit a task publisher holds while registered.
        #[pallet::constant]
        type PublisherDeposit: Get<BalanceOf<Self>>;

        /// Most open (not yet removed) tasks of one publisher.
        #[pallet::constant]
        type MaxPublishedTasks: Get<u32>;

        /// Least replication of a task (at least 2: agreement needs two executors).
        #[pallet::constant]
        type MinReplication: Get<u32>;

        /// Most replication of a task (at most [`MAX_REPLICATION`]).
        #[pallet::constant]
        type MaxReplication: Get<u32>;

        /// Executors of a synthetic task (its last group of an epoch takes up to `r − 1` more).
        #[pallet::constant]
        type SyntheticReplication: Get<u32>;

        /// Matrix side of synthetic tasks.
        #[pallet::constant]
        type SyntheticDim: Get<u32>;

        /// Milliseconds per block (the slot time): turns the commit window into hours of work.
        #[pallet::constant]
        type MillisecsPerBlock: Get<u64>;

        /// Least capacity a driller may declare, in micro-ut per hour. Its share of a commit window
        /// must be worth at least one synthetic product.
        #[pallet::constant]
        type MinCapacity: Get<MicroUt>;

        /// Most capacity a driller may declare, in micro-ut per hour.
        #[pallet::constant]
        type MaxCapacity: Get<MicroUt>;

        /// Share of the commit window a task fills at its executors' declared capacity (at most
        /// half: a driller's synthetic task and one drawn task may overlap).
        #[pallet::constant]
        type CapacityUse: Get<Perbill>;

        /// Collateral a task freezes from each executor, per ut of the task's difficulty.
        #[pallet::constant]
        type CollateralPerUt: Get<BalanceOf<Self>>;

        /// Collateral a task freezes from each executor at least.
        #[pallet::constant]
        type MinCollateral: Get<BalanceOf<Self>>;

        /// Least drillers a synthetic capacity band groups together: a band with fewer is merged
        /// with the next lower one, so that a handful of accounts cannot form a band of their own.
        #[pallet::constant]
        type MinBandSize: Get<u32>;

        /// Drilling epochs a record is kept after its last task, once its account no longer drills.
        #[pallet::constant]
        type RecordRetention: Get<u32>;

        /// Blocks per drilling epoch (synthetic tasks are issued at every multiple).
        #[pallet::constant]
        type EpochLength: Get<BlockNumberFor<Self>>;

        /// Blocks executors have to compute and commit.
        #[pallet::constant]
        type CommitWindow: Get<BlockNumberFor<Self>>;

        /// Blocks executors have to reveal.
        #[pallet::constant]
        type RevealWindow: Get<BlockNumberFor<Self>>;

        /// Blocks a finished task stays readable before removal.
        #[pallet::constant]
        type Retention: Get<BlockNumberFor<Self>>;

        /// Most tasks stored at once (finished ones included until removed).
        #[pallet::constant]
        type MaxOpenTasks: Get<u32>;

        /// Most synthetic tasks issued in one block.
        #[pallet::constant]
        type MaxIssuePerBlock: Get<u32>;

        /// Most timeouts processed in one block.
        #[pallet::constant]
        type MaxTimeoutsPerBlock: Get<u32>;

        /// Most re-issues of a task after disagreements.
        #[pallet::constant]
        type MaxReissues: Get<u32>;

        /// Most registered drillers, hence trainers given synthetic work in an epoch (the staking
        /// pallet's `MaxBonders`).
        #[pallet::constant]
        type MaxTrainers: Get<u32>;

        /// Share of an executor's task collateral slashed for silence or a result proven wrong.
        #[pallet::constant]
        type DrillingSlash: Get<Perbill>;

        /// Weights of this pallet's calls and hooks.
        type WeightInfo: WeightInfo;

        /// Makes eligible trainers for the benchmarks.
        #[cfg(feature = "runtime-benchmarks")]
        type BenchmarkHelper: ergon_protocol::traits::BenchmarkTrainers<Self::AccountId>;
    }

    /// The next task's id.
    #[pallet::storage]
    pub type NextTaskId<T: Config> = StorageValue<_, TaskId, ValueQuery>;

    /// Every task not yet removed.
    #[pallet::storage]
    pub type Tasks<T: Config> = CountedStorageMap<_, Twox64Concat, TaskId, TaskOf<T>, OptionQuery>;

    /// Tasks whose current phase times out at a block. A task is in exactly one entry (its
    /// `Task::timeout`) until it is removed.
    #[pallet::storage]
    pub type Timeouts<T: Config> = StorageMap<
        _,
        Twox64Concat,
        BlockNumberFor<T>,
        BoundedVec<TaskId, T::MaxTimeoutsPerBlock>,
        ValueQuery,
    >;

    /// Registered task publishers and their deposits.
    #[pallet::storage]
    pub type Publishers<T: Config> =
        StorageMap<_, Blake2_128Concat, T::AccountId, Publisher<BalanceOf<T>>, OptionQuery>;

    /// Number of stored tasks of each publisher (bounded by `MaxPublishedTasks` when publishing).
    #[pallet::storage]
    pub type PublishedTasks<T: Config> =
        StorageMap<_, Blake2_128Concat, T::AccountId, u32, ValueQuery>;

    /// The current drilling epoch.
    #[pallet::storage]
    pub type CurrentEpoch<T: Config> = StorageValue<_, u32, ValueQuery>;

    /// This epoch's synthetic issuance: the eligible drillers with their declared capacities,
    /// ordered by capacity band (within a band by the race, once the randomness exists) and cut into
    /// groups at [`IssuanceGroups`].
    #[pallet::storage]
    pub type IssuanceQueue<T: Config> =
        StorageValue<_, BoundedVec<(T::AccountId, MicroUt), T::MaxTrainers>, ValueQuery>;

    /// Where each of this epoch's synthetic groups starts in [`IssuanceQueue`] (a group ends where
    /// the next starts, the last at the end of the queue).
    #[pallet::storage]
    pub type IssuanceGroups<T: Config> =
        StorageValue<_, BoundedVec<u32, T::MaxTrainers>, ValueQuery>;

    /// Progress of this epoch's synthetic issuance (absent when done).
    #[pallet::storage]
    pub type Issuance<T: Config> =
        StorageValue<_, issuance::IssuanceState<BlockNumberFor<T>>, OptionQuery>;

    /// Trainers who run the driller role, with the capacity each declared: only they are given
    /// synthetic tasks or drawn for published ones (a trainer without a driller would only be
    /// slashed for silence). At most `MaxTrainers`.
    #[pallet::storage]
    pub type Drillers<T: Config> = CountedStorageMap<
        _,
        Blake2_128Concat,
        T::AccountId,
        Driller<BlockNumberFor<T>>,
        OptionQuery,
    >;

    /// Each trainer's completed drilling tasks and timing: its measured hashrate.
    #[pallet::storage]
    pub type Records<T: Config> =
        StorageMap<_, Blake2_128Concat, T::AccountId, DrillingRecord, OptionQuery>;

    #[pallet::event]
    #[pallet::generate_deposit(pub(super) fn deposit_event)]
    pub enum Event<T: Config> {
        /// `who` registered as a task publisher, holding `deposit`.
        PublisherRegistered { who: T::AccountId, deposit: BalanceOf<T> },
        /// `who` now takes drilling tasks at the declared `capacity` (micro-ut per hour), or no
        /// longer does (`None`).
        DrillerSet { who: T::AccountId, capacity: Option<MicroUt> },
        /// `who` may publish tasks.
        PublisherApproved { who: T::AccountId },
        /// `who` is no longer a publisher; `slashed` of its deposit was burned, the rest released.
        PublisherRemoved { who: T::AccountId, slashed: BalanceOf<T> },
        /// A drilling epoch started: `trainers` eligible drillers get `tasks` synthetic tasks.
        EpochStarted { epoch: u32, trainers: u32, tasks: u32 },
        /// A task was issued (its executors are drawn now, or once fresh randomness exists).
        TaskIssued {
            task: TaskId,
            origin: TaskOrigin<T::AccountId>,
            difficulty: MicroUt,
            replication: u32,
            attempt: u32,
        },
        /// Executors were assigned; they must commit by `commit_deadline`.
        ExecutorsAssigned {
            task: TaskId,
            executors: alloc::vec::Vec<T::AccountId>,
            commit_deadline: BlockNumberFor<T>,
        },
        /// An executor committed to its result.
        ResultCommitted { task: TaskId, who: T::AccountId },
        /// Commitments are closed; those who committed must reveal by `reveal_deadline`.
        RevealOpened { task: TaskId, reveal_deadline: BlockNumberFor<T> },
        /// An executor revealed its result.
        ResultRevealed { task: TaskId, who: T::AccountId, result: H256 },
        /// All executors agreed on `result`; each was credited `difficulty` micro-ut of D.
        TaskAgreed { task: TaskId, result: H256, executors: u32, difficulty: MicroUt },
        /// All executors agreed that the task's inputs are unusable; nobody was credited.
        TaskInvalid { task: TaskId },
        /// Results differed or executors were silent; nobody was credited.
        TaskDisagreed { task: TaskId, revealed: u32, silent: u32, reissued: Option<TaskId> },
        /// An executor was slashed `amount` for silence (`NoShow`) or a dissenting result.
        ExecutorSlashed {
            task: TaskId,
            who: T::AccountId,
            reason: SlashReason,
            amount: BalanceOf<T>,
        },
        /// Too few eligible drillers (with the capacity and the collateral) to draw the executors.
        TaskAbandoned { task: TaskId },
        /// An executor's disputed result of `task` was proven right by a later attempt: its
        /// collateral is released, it is credited `difficulty` of D and paid what the executors it
        /// proved wrong were slashed.
        ExecutorVindicated { task: TaskId, who: T::AccountId, difficulty: MicroUt },
        /// A disputed result could not be judged (no attempt agreed): its collateral is released.
        DisputeDropped { task: TaskId, who: T::AccountId },
        /// `who`'s stale drilling record was removed.
        RecordPruned { who: T::AccountId },
        /// A finished task's record was removed.
        TaskRemoved { task: TaskId },
    }

    #[pallet::error]
    pub enum Error<T> {
        /// The account is already a registered publisher.
        AlreadyRegistered,
        /// The account is not a registered publisher.
        NotRegistered,
        /// The publisher is approved already.
        AlreadyApproved,
        /// Only approved publishers may publish tasks.
        NotApproved,
        /// The free balance cannot cover the deposit.
        InsufficientBalance,
        /// The task's parameters are out of bounds, its URIs invalid, or it is worth no work.
        InvalidTask,
        /// The replication is outside [`MinReplication`, `MaxReplication`].
        ReplicationOutOfRange,
        /// `MaxOpenTasks` tasks are stored already.
        TooManyTasks,
        /// The publisher has `MaxPublishedTasks` tasks stored already.
        TooManyPublishedTasks,
        /// No room in the timeout queue (cannot happen while `MaxOpenTasks` holds).
        TimeoutQueueFull,
        /// No such task.
        TaskNotFound,
        /// The caller is not an executor of this task.
        NotAnExecutor,
        /// The task is not taking commitments.
        NotInCommitPhase,
        /// The task is not taking reveals.
        NotInRevealPhase,
        /// The caller committed already.
        AlreadyCommitted,
        /// The caller did not commit, so it cannot reveal.
        NotCommitted,
        /// The caller revealed already.
        AlreadyRevealed,
        /// The revealed result and salt do not match the commitment.
        CommitmentMismatch,
        /// Only eligible (bonded) trainers may drill.
        NotEligible,
        /// `MaxTrainers` drillers are registered already.
        TooManyDrillers,
        /// The account is not a registered driller.
        NotADriller,
        /// The driller is still eligible: only its owner may remove it.
        StillEligible,
        /// The declared capacity is outside [`MinCapacity`, `MaxCapacity`].
        CapacityOutOfRange,
        /// The free bond cannot cover the collateral of a task sized to the declared capacity.
        CapacityNotBacked,
        /// The account has no drilling record.
        NoRecord,
        /// The record is recent, or its account still drills.
        RecordNotStale,
    }

    #[pallet::hooks]
    impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
        fn on_initialize(now: BlockNumberFor<T>) -> Weight {
            let mut weight = T::WeightInfo::on_initialize_idle();
            let epoch_length = T::EpochLength::get();
            if !epoch_length.is_zero() && !now.is_zero() && (now % epoch_length).is_zero() {
                weight.saturating_accrue(issuance::start_epoch::<T>(now));
            }
            weight.saturating_accrue(issuance::issue_due::<T>(now));
            // At most `MaxTimeoutsPerBlock` tasks, each weighed by the path its timeout took; the
            // eligible drillers are read once for all the draws of the block.
            let mut candidates = None;
            for task in Timeouts::<T>::take(now) {
                weight.saturating_accrue(Self::on_timeout(task, now, &mut candidates));
            }
            weight
        }

        fn integrity_test() {
            assert!(T::MinReplication::get() >= 2, "agreement needs at least two executors");
            assert!(T::MinReplication::get() <= T::SyntheticReplication::get());
            assert!(
                T::SyntheticReplication::get().saturating_mul(2).saturating_sub(1)
                    <= T::MaxReplication::get(),
                "the last synthetic group takes up to r − 1 extra executors"
            );
            assert!(T::MaxReplication::get() <= MAX_REPLICATION);
            let product =
                ergon_drill::MatmulChain { seed: [0; 32], dim: T::SyntheticDim::get(), length: 1 };
            assert!(
                product.validate().is_ok() && product.difficulty_micro_ut() > 0,
                "synthetic tasks out of bounds or worth nothing"
            );
            assert!(
                Self::window_work(T::MinCapacity::get()) >= product.difficulty_micro_ut(),
                "the least capacity must be worth one synthetic product in a window"
            );
            assert!(T::MinCapacity::get() > 0 && T::MinCapacity::get() <= T::MaxCapacity::get());
            assert!(T::CapacityUse::get() <= Perbill::from_percent(50));
            assert!(T::MinBandSize::get() >= T::SyntheticReplication::get());
            assert!(T::MaxTimeoutsPerBlock::get() > 0 && T::MaxIssuePerBlock::get() > 0);
            assert!(!T::CommitWindow::get().is_zero() && !T::RevealWindow::get().is_zero());
        }

        #[cfg(feature = "try-runtime")]
        fn try_state(_n: BlockNumberFor<T>) -> Result<(), sp_runtime::TryRuntimeError> {
            Self::do_try_state()
        }
    }

    #[pallet::call]
    impl<T: Config> Pallet<T> {
        /// Registers the caller as a task publisher, holding `PublisherDeposit`. It may publish once
        /// `PublisherOrigin` approves it.
        #[pallet::call_index(0)]
        #[pallet::weight(T::WeightInfo::register_publisher())]
        pub fn register_publisher(origin: OriginFor<T>) -> DispatchResult {
            let who = ensure_signed(origin)?;
            ensure!(!Publishers::<T>::contains_key(&who), Error::<T>::AlreadyRegistered);
            let deposit = T::PublisherDeposit::get();
            T::Currency::hold(&HoldReason::PublisherDeposit.into(), &who, deposit)
                .map_err(|_| Error::<T>::InsufficientBalance)?;
            Publishers::<T>::insert(&who, Publisher { deposit, approved: false });
            Self::deposit_event(Event::PublisherRegistered { who, deposit });
            Ok(())
        }

        /// Approves a registered publisher (`PublisherOrigin`).
        #[pallet::call_index(1)]
        #[pallet::weight(T::WeightInfo::approve_publisher())]
        pub fn approve_publisher(origin: OriginFor<T>, who: T::AccountId) -> DispatchResult {
            T::PublisherOrigin::ensure_origin(origin)?;
            Publishers::<T>::try_mutate(&who, |publisher| {
                let publisher = publisher.as_mut().ok_or(Error::<T>::NotRegistered)?;
                ensure!(!publisher.approved, Error::<T>::AlreadyApproved);
                publisher.approved = true;
                Ok::<_, DispatchError>(())
            })?;
            Self::deposit_event(Event::PublisherApproved { who });
            Ok(())
        }

        /// Removes a publisher (`PublisherOrigin`): `slash` burns its deposit (for abuse), otherwise
        /// the deposit is released. Its tasks already issued run to their end.
        #[pallet::call_index(2)]
        #[pallet::weight(T::WeightInfo::revoke_publisher())]
        pub fn revoke_publisher(
            origin: OriginFor<T>,
            who: T::AccountId,
            slash: bool,
        ) -> DispatchResult {
            T::PublisherOrigin::ensure_origin(origin)?;
            Self::remove_publisher(who, slash)
        }

        /// Leaves the publisher role and gets the deposit back.
        #[pallet::call_index(3)]
        #[pallet::weight(T::WeightInfo::deregister_publisher())]
        pub fn deregister_publisher(origin: OriginFor<T>) -> DispatchResult {
            let who = ensure_signed(origin)?;
            Self::remove_publisher(who, false)
        }

        /// Publishes a drilling task for `replication` executors (approved publishers). The
        /// difficulty is computed from the task's exact operation count; executors are drawn once
        /// randomness that began after this block exists.
        #[pallet::call_index(4)]
        #[pallet::weight(T::WeightInfo::publish_task())]
        pub fn publish_task(
            origin: OriginFor<T>,
            kind: TaskKind,
            replication: u32,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            let publisher = Publishers::<T>::get(&who).ok_or(Error::<T>::NotRegistered)?;
            ensure!(publisher.approved, Error::<T>::NotApproved);
            ensure!(
                (T::MinReplication::get()..=T::MaxReplication::get()).contains(&replication),
                Error::<T>::ReplicationOutOfRange
            );
            let difficulty = kind.difficulty().ok_or(Error::<T>::InvalidTask)?;
            ensure!(
                PublishedTasks::<T>::get(&who) < T::MaxPublishedTasks::get(),
                Error::<T>::TooManyPublishedTasks
            );
            let now = frame_system::Pallet::<T>::block_number();
            Self::new_task(
                kind,
                difficulty,
                TaskOrigin::Publisher(who),
                replication,
                0,
                Default::default(),
                None,
                now,
            )?;
            Ok(())
        }

        /// Commits to a result: `commitment` = [`settlement::result_commitment`]`(task, caller,
        /// result, salt)`. When every executor has committed, reveals open at once.
        #[pallet::call_index(5)]
        #[pallet::weight(T::WeightInfo::commit_result())]
        pub fn commit_result(
            origin: OriginFor<T>,
            task: TaskId,
            commitment: H256,
        ) -> DispatchResult {
            let who = ensure_signed(origin)?;
            let mut record = Tasks::<T>::get(task).ok_or(Error::<T>::TaskNotFound)?;
            ensure!(record.phase == TaskPhase::Committing, Error::<T>::NotInCommitPhase);
            let elapsed_ms = Self::now_ms().saturating_sub(record.issued_ms);
            let executor = record
                .executors
                .iter_mut()
                .find(|e| e.who == who)
                .ok_or(Error::<T>::NotAnExecutor)?;
            ensure!(executor.commitment.is_none(), Error::<T>::AlreadyCommitted);
            executor.commitment = Some(commitment);
            executor.elapsed_ms = elapsed_ms;
            Self::deposit_event(Event::ResultCommitted { task, who });
            if record.executors.iter().all(|e| e.commitment.is_some()) {
                let now = frame_system::Pallet::<T>::block_number();
                Self::unschedule(task, record.timeout);
                Self::open_reveal(task, &mut record, now)?;
            }
            Tasks::<T>::insert(task, record);
            Ok(())
        }

        /// Reveals the committed result and salt. The last reveal settles the task; the others are
        /// refunded down to the weight of a commitment (they read and write only the task).
        #[pallet::call_index(6)]
        #[pallet::weight(T::WeightInfo::reveal_result())]
        pub fn reveal_result(
            origin: OriginFor<T>,
            task: TaskId,
            result: H256,
            salt: H256,
        ) -> DispatchResultWithPostInfo {
            let who = ensure_signed(origin)?;
            let mut record = Tasks::<T>::get(task).ok_or(Error::<T>::TaskNotFound)?;
            ensure!(record.phase == TaskPhase::Revealing, Error::<T>::NotInRevealPhase);
            let executor = record
                .executors
                .iter_mut()
                .find(|e| e.who == who)
                .ok_or(Error::<T>::NotAnExecutor)?;
            let commitment = executor.commitment.ok_or(Error::<T>::NotCommitted)?;
            ensure!(executor.result.is_none(), Error::<T>::AlreadyRevealed);
            ensure!(
                commitment == settlement::result_commitment(task, &who, result, salt),
                Error::<T>::CommitmentMismatch
            );
            executor.result = Some(result);
            Self::deposit_event(Event::ResultRevealed { task, who, result });
            let mut committed = record.executors.iter().filter(|e| e.commitment.is_some());
            let settles = committed.all(|e| e.result.is_some());
            if settles {
                let now = frame_system::Pallet::<T>::block_number();
                Self::unschedule(task, record.timeout);
                settlement::settle::<T>(task, &mut record, now);
            }
            Tasks::<T>::insert(task, record);
            Ok((!settles).then(T::WeightInfo::commit_result).into())
        }

        /// Starts taking drilling tasks at a declared `capacity` in micro-ut per hour (`Some`), or
        /// stops (`None`). Tasks are sized to the capacity so that they fill `CapacityUse` of the
        /// commit window: N accounts on one machine must compute N tasks in that window, so they earn
        /// no more D than the machine does. Starting needs an eligible bond whose free part covers
        /// the collateral of a task of that size. Tasks already assigned must still be answered.
        #[pallet::call_index(7)]
        #[pallet::weight(T::WeightInfo::set_driller())]
        pub fn set_driller(origin: OriginFor<T>, capacity: Option<MicroUt>) -> DispatchResult {
            let who = ensure_signed(origin)?;
            match capacity {
                Some(capacity) => {
                    ensure!(
                        (T::MinCapacity::get()..=T::MaxCapacity::get()).contains(&capacity),
                        Error::<T>::CapacityOutOfRange
                    );
                    ensure!(T::Staking::is_eligible(&who), Error::<T>::NotEligible);
                    ensure!(
                        T::Staking::free_collateral(&who)
                            >= Self::collateral(Self::window_work(capacity)),
                        Error::<T>::CapacityNotBacked
                    );
                    let since = frame_system::Pallet::<T>::block_number();
                    let driller = match Drillers::<T>::get(&who) {
                        Some(driller) => Driller { capacity, since, ..driller },
                        None => {
                            ensure!(
                                Drillers::<T>::count() < T::MaxTrainers::get(),
                                Error::<T>::TooManyDrillers
                            );
                            Driller { capacity, busy_until: Zero::zero(), since }
                        }
                    };
                    Drillers::<T>::insert(&who, driller);
                }
                None => Drillers::<T>::remove(&who),
            }
            Self::deposit_event(Event::DrillerSet { who, capacity });
            Ok(())
        }

        /// Removes a driller that is no longer eligible (unbonded or slashed below the minimum):
        /// anyone may do it, so stale entries cannot fill `MaxTrainers`.
        #[pallet::call_index(8)]
        #[pallet::weight(T::WeightInfo::prune_driller())]
        pub fn prune_driller(origin: OriginFor<T>, who: T::AccountId) -> DispatchResult {
            ensure_signed(origin)?;
            ensure!(Drillers::<T>::contains_key(&who), Error::<T>::NotADriller);
            ensure!(!T::Staking::is_eligible(&who), Error::<T>::StillEligible);
            Drillers::<T>::remove(&who);
            Self::deposit_event(Event::DrillerSet { who, capacity: None });
            Ok(())
        }

        /// Removes the drilling record of an account that no longer drills and completed no task
        /// for `RecordRetention` epochs: anyone may do it, so records do not pile up forever.
        #[pallet::call_index(9)]
        #[pallet::weight(T::WeightInfo::prune_record())]
        pub fn prune_record(origin: OriginFor<T>, who: T::AccountId) -> DispatchResult {
            ensure_signed(origin)?;
            let record = Records::<T>::get(&who).ok_or(Error::<T>::NoRecord)?;
            let idle = CurrentEpoch::<T>::get().saturating_sub(record.last_epoch);
            ensure!(
                !Drillers::<T>::contains_key(&who) && idle > T::RecordRetention::get(),
                Error::<T>::RecordNotStale
            );
            Records::<T>::remove(&who);
            Self::deposit_event(Event::RecordPruned { who });
            Ok(())
        }
    }

    impl<T: Config> Pallet<T> {
        /// The block's timestamp in milliseconds.
        pub(crate) fn now_ms() -> u64 {
            T::Time::now().as_millis() as u64
        }

        /// Stores a new task and emits `TaskIssued`: assigned to `executors` at once when given,
        /// otherwise in `Drawing` (executors drawn once randomness that began after `now` exists).
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn new_task(
            kind: TaskKind,
            difficulty: MicroUt,
            origin: TaskOrigin<T::AccountId>,
            replication: u32,
            attempt: u32,
            disputed: BoundedVec<Dispute<T::AccountId>, ReplicationBound>,
            executors: Option<alloc::vec::Vec<T::AccountId>>,
            now: BlockNumberFor<T>,
        ) -> Result<TaskId, Error<T>> {
            ensure!(Tasks::<T>::count() < T::MaxOpenTasks::get(), Error::<T>::TooManyTasks);
            let id = NextTaskId::<T>::get();
            let mut task = crate::types::Task {
                kind,
                difficulty,
                origin: origin.clone(),
                replication,
                attempt,
                phase: TaskPhase::Drawing,
                executors: Default::default(),
                disputed,
                issued_ms: 0,
                opened_at: now,
                timeout: now,
            };
            Self::deposit_event(Event::TaskIssued {
                task: id,
                origin: origin.clone(),
                difficulty,
                replication,
                attempt,
            });
            match executors {
                Some(group) => {
                    let r = group.len();
                    let executors = Self::obligate_executors(id, difficulty, group.into_iter(), r);
                    Self::assign(id, &mut task, executors, now)?
                }
                None => Self::schedule(id, &mut task, now.saturating_add(One::one()))?,
            }
            NextTaskId::<T>::put(id.saturating_add(1));
            if let TaskOrigin::Publisher(who) = &origin {
                PublishedTasks::<T>::mutate(who, |n| n.saturating_inc());
            }
            Tasks::<T>::insert(id, task);
            Ok(id)
        }

        /// Work in micro-ut that a declared `capacity` (micro-ut per hour) does in `CapacityUse` of
        /// the commit window: the size of the tasks it is given, and the most it can be drawn for.
        pub fn window_work(capacity: MicroUt) -> MicroUt {
            let window_ms = T::MillisecsPerBlock::get()
                .saturating_mul(T::CommitWindow::get().saturated_into::<u64>());
            let full = capacity.saturating_mul(window_ms as u128) / 3_600_000;
            T::CapacityUse::get().mul_floor(full)
        }

        /// Collateral a task of `difficulty` micro-ut freezes from each executor:
        /// `MinCollateral + CollateralPerUt · difficulty` (in ut, rounded up).
        pub fn collateral(difficulty: MicroUt) -> BalanceOf<T> {
            let per_ut: u128 = T::CollateralPerUt::get().saturated_into();
            let extra = per_ut.saturating_mul(difficulty).div_ceil(1_000_000);
            T::MinCollateral::get().saturating_add(extra.saturated_into())
        }

        /// Freezes the collateral of task `id` from `candidates` in order until `r` succeeded, and
        /// returns those. A candidate whose free bond cannot cover it (or who has `MaxObligations`
        /// open duties) is passed over.
        pub(crate) fn obligate_executors(
            id: TaskId,
            difficulty: MicroUt,
            candidates: impl Iterator<Item = T::AccountId>,
            r: usize,
        ) -> alloc::vec::Vec<T::AccountId> {
            let amount = Self::collateral(difficulty);
            let mut chosen = alloc::vec::Vec::with_capacity(r);
            for who in candidates {
                if chosen.len() >= r {
                    break;
                }
                if T::Staking::obligate(&who, Obligation::Drilling(id), amount).is_ok() {
                    chosen.push(who);
                }
            }
            chosen
        }

        /// Ends a task that could not get enough executors: releases what it holds (collateral of
        /// executors already obligated, disputes it was to judge) and schedules its removal.
        pub(crate) fn abandon(
            id: TaskId,
            task: &mut TaskOf<T>,
            obligated: &[T::AccountId],
            now: BlockNumberFor<T>,
        ) {
            for who in obligated {
                T::Staking::release(who, Obligation::Drilling(id));
            }
            settlement::drop_disputes::<T>(core::mem::take(&mut task.disputed).into_inner());
            task.phase = TaskPhase::Abandoned;
            Self::deposit_event(Event::TaskAbandoned { task: id });
            Self::reschedule(id, task, now.saturating_add(T::Retention::get()));
        }

        /// Assigns `executors` (their collateral already frozen) to a task and opens its commit
        /// window; too few of them abandon the task.
        pub(crate) fn assign(
            id: TaskId,
            task: &mut TaskOf<T>,
            executors: alloc::vec::Vec<T::AccountId>,
            now: BlockNumberFor<T>,
        ) -> Result<(), Error<T>> {
            if executors.len() < T::MinReplication::get() as usize {
                Self::abandon(id, task, &executors, now);
                return Ok(());
            }
            task.executors = executors
                .iter()
                .map(|who| Executor {
                    who: who.clone(),
                    commitment: None,
                    elapsed_ms: 0,
                    result: None,
                })
                .collect::<alloc::vec::Vec<_>>()
                .try_into()
                .map_err(|_| Error::<T>::ReplicationOutOfRange)?;
            task.phase = TaskPhase::Committing;
            task.issued_ms = Self::now_ms();
            if let Err(e) = Self::schedule(id, task, now.saturating_add(T::CommitWindow::get())) {
                for who in &executors {
                    T::Staking::release(who, Obligation::Drilling(id));
                }
                return Err(e);
            }
            Self::deposit_event(Event::ExecutorsAssigned {
                task: id,
                executors,
                commit_deadline: task.timeout,
            });
            Ok(())
        }

        /// Closes commitments and opens the reveal window.
        pub(crate) fn open_reveal(
            id: TaskId,
            task: &mut TaskOf<T>,
            now: BlockNumberFor<T>,
        ) -> Result<(), Error<T>> {
            task.phase = TaskPhase::Revealing;
            Self::schedule(id, task, now.saturating_add(T::RevealWindow::get()))?;
            Self::deposit_event(Event::RevealOpened { task: id, reveal_deadline: task.timeout });
            Ok(())
        }

        /// A task's phase timed out at `now`; returns the weight of what it did.
        fn on_timeout(
            id: TaskId,
            now: BlockNumberFor<T>,
            candidates: &mut Option<alloc::vec::Vec<issuance::Candidate<T>>>,
        ) -> Weight {
            let Some(mut task) = Tasks::<T>::get(id) else {
                return T::WeightInfo::timeout_remove();
            };
            let weight = match task.phase {
                TaskPhase::Drawing => {
                    let mut weight = Weight::zero();
                    // Drillers are loaded only once the draw can happen: a task still waiting for
                    // fresh randomness is rescheduled without reading them.
                    let ready =
                        <T::Randomness as ergon_protocol::traits::FreshRandomness<_>>::fresh(
                            task.opened_at,
                        )
                        .is_some();
                    if ready && candidates.is_none() {
                        weight = T::WeightInfo::load_candidates(Drillers::<T>::count());
                        *candidates = Some(issuance::candidates::<T>());
                    }
                    let pool = candidates.as_deref().unwrap_or_default();
                    issuance::draw::<T>(id, &mut task, pool, now);
                    weight.saturating_add(T::WeightInfo::timeout_draw(task.replication))
                }
                TaskPhase::Committing if task.executors.iter().any(|e| e.commitment.is_some()) => {
                    if Self::open_reveal(id, &mut task, now).is_err() {
                        frame_support::defensive!("timeout queue full although MaxOpenTasks holds");
                    }
                    T::WeightInfo::timeout_open_reveal()
                }
                TaskPhase::Committing | TaskPhase::Revealing => {
                    settlement::settle::<T>(id, &mut task, now);
                    T::WeightInfo::timeout_settle(task.executors.len() as u32)
                }
                _ => {
                    Self::remove_task(id, &task);
                    return T::WeightInfo::timeout_remove();
                }
            };
            Tasks::<T>::insert(id, task);
            weight
        }

        /// Removes a finished task and releases its publisher's slot.
        fn remove_task(id: TaskId, task: &TaskOf<T>) {
            Tasks::<T>::remove(id);
            if let TaskOrigin::Publisher(who) = &task.origin {
                PublishedTasks::<T>::mutate_exists(who, |n| {
                    let left = n.unwrap_or_default().saturating_sub(1);
                    *n = (left > 0).then_some(left);
                });
            }
            Self::deposit_event(Event::TaskRemoved { task: id });
        }

        /// Removes a publisher, burning its deposit if `slash`, releasing it otherwise.
        fn remove_publisher(who: T::AccountId, slash: bool) -> DispatchResult {
            let publisher = Publishers::<T>::take(&who).ok_or(Error::<T>::NotRegistered)?;
            let reason = HoldReason::PublisherDeposit.into();
            let slashed = if slash {
                T::Currency::burn_held(
                    &reason,
                    &who,
                    publisher.deposit,
                    Precision::BestEffort,
                    Fortitude::Force,
                )?
            } else {
                T::Currency::release(&reason, &who, publisher.deposit, Precision::BestEffort)?;
                Zero::zero()
            };
            Self::deposit_event(Event::PublisherRemoved { who, slashed });
            Ok(())
        }

        /// Puts task `id` in the first timeout entry at or after `at` with room.
        pub(crate) fn schedule(
            id: TaskId,
            task: &mut TaskOf<T>,
            at: BlockNumberFor<T>,
        ) -> Result<(), Error<T>> {
            // With at most `MaxOpenTasks` tasks, each in one entry, this many blocks always have room.
            let span = ergon_timeouts::span(T::MaxOpenTasks::get(), T::MaxTimeoutsPerBlock::get());
            let block = ergon_timeouts::schedule::<Timeouts<T>, _, _, _>(id, at, span)
                .ok_or(Error::<T>::TimeoutQueueFull)?;
            task.timeout = block;
            Ok(())
        }

        /// Takes task `id` out of the timeout entry at `at`.
        pub(crate) fn unschedule(id: TaskId, at: BlockNumberFor<T>) {
            ergon_timeouts::unschedule::<Timeouts<T>, _, _, _>(&id, at);
        }

        /// Reschedules from a hook or settlement, where there is no caller to return an error to.
        pub(crate) fn reschedule(id: TaskId, task: &mut TaskOf<T>, at: BlockNumberFor<T>) {
            if Self::schedule(id, task, at).is_err() {
                frame_support::defensive!("timeout queue full although MaxOpenTasks holds");
            }
        }

        /// `who`'s drilling record and its throughput in micro-ut per hour (`None` before its first
        /// agreed task): what the hashrate RPC shows.
        pub fn hashrate(who: &T::AccountId) -> Option<(DrillingRecord, MicroUt)> {
            Records::<T>::get(who).map(|r| {
                let rate = r.micro_ut_per_hour();
                (r, rate)
            })
        }

        /// Every trainer with a drilling record, fastest first, at most `limit`. Iterates all
        /// records: for runtime APIs, not dispatchables.
        pub fn hashrates(limit: u32) -> alloc::vec::Vec<(T::AccountId, DrillingRecord, MicroUt)> {
            let mut all: alloc::vec::Vec<_> = Records::<T>::iter()
                .map(|(who, r)| {
                    let rate = r.micro_ut_per_hour();
                    (who, r, rate)
                })
                .collect();
            all.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
            all.truncate(limit as usize);
            all
        }

        /// Ids of unfinished tasks in which `who` is an executor, lowest first, at most `limit`.
        /// Iterates all tasks: for runtime APIs, not dispatchables.
        pub fn tasks_of(who: &T::AccountId, limit: u32) -> alloc::vec::Vec<TaskId> {
            let mut ids: alloc::vec::Vec<TaskId> = Tasks::<T>::iter()
                .filter(|(_, t)| !t.phase.is_final() && t.executors.iter().any(|e| &e.who == who))
                .map(|(id, _)| id)
                .collect();
            ids.sort_unstable();
            ids.truncate(limit as usize);
            ids
        }

        /// Checks the pallet's invariants.
        pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
            let mut scheduled = 0u32;
            for (block, queue) in Timeouts::<T>::iter() {
                for id in queue {
                    let task = Tasks::<T>::get(id).ok_or("a timeout names a missing task")?;
                    ensure!(task.timeout == block, "a task is queued at a block it does not name");
                    scheduled += 1;
                }
            }
            ensure!(scheduled == Tasks::<T>::count(), "a task is not in exactly one timeout entry");
            ensure!(Tasks::<T>::count() <= T::MaxOpenTasks::get(), "too many tasks");
            let mut published = alloc::collections::BTreeMap::<T::AccountId, u32>::new();
            for (id, task) in Tasks::<T>::iter() {
                if let TaskOrigin::Publisher(who) = &task.origin {
                    *published.entry(who.clone()).or_default() += 1;
                }
                ensure!(
                    task.phase == TaskPhase::Drawing
                        || task.phase.is_final()
                        || !task.executors.is_empty(),
                    "an active task has no executors"
                );
                // Every executor of an open task, and every dispute awaiting judgment, holds its
                // collateral until the task settles.
                if matches!(task.phase, TaskPhase::Committing | TaskPhase::Revealing) {
                    for e in &task.executors {
                        ensure!(
                            !T::Staking::collateral(&e.who, Obligation::Drilling(id)).is_zero(),
                            "an executor of an open task holds no collateral"
                        );
                    }
                }
                if !task.phase.is_final() {
                    for d in &task.disputed {
                        ensure!(
                            !T::Staking::collateral(&d.who, Obligation::Drilling(d.task)).is_zero(),
                            "a dispute awaiting judgment holds no collateral"
                        );
                    }
                }
            }
            ensure!(
                published == PublishedTasks::<T>::iter().collect(),
                "a publisher's task count does not match its tasks"
            );
            let reason = HoldReason::PublisherDeposit.into();
            for (who, publisher) in Publishers::<T>::iter() {
                ensure!(
                    T::Currency::balance_on_hold(&reason, &who) == publisher.deposit,
                    "a publisher's deposit is not held"
                );
            }
            Ok(())
        }
    }
}
