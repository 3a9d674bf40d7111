//! Configuration of every pallet in the runtime.

use frame_support::{
    derive_impl,
    dispatch::DispatchClass,
    parameter_types,
    traits::{ConstU128, ConstU32, ConstU64, ConstU8, Get, VariantCountOf},
    weights::{
        constants::{RocksDbWeight, WEIGHT_REF_TIME_PER_SECOND},
        IdentityFee, Weight,
    },
};
use frame_system::limits::{BlockLength, BlockWeights};
use pallet_transaction_payment::{ConstFeeMultiplier, FungibleAdapter, Multiplier};
use sp_runtime::{traits::One, transaction_validity::TransactionPriority, Perbill, Permill};
use sp_version::RuntimeVersion;

use pallet_trainer_staking::rewards::FeesToAuthor;

pub mod prices;

use crate::{
    durations::*, units::*, AccountId, Babe, Balance, Balances, Block, BlockNumber, ComputePower,
    Hash, Historical, ImOnline, Nonce, Offences, PalletInfo, Runtime, RuntimeCall, RuntimeEvent,
    RuntimeFreezeReason, RuntimeHoldReason, RuntimeOrigin, RuntimeTask, Session, SessionKeys,
    System, Timestamp, TrainerStaking, UncheckedExtrinsic, VERSION,
};

/// Operational extrinsics may use the last 25% of a block.
const NORMAL_DISPATCH_RATIO: Perbill = Perbill::from_percent(75);
/// Largest block, in bytes.
const MAX_BLOCK_LENGTH: u32 = 5 * 1024 * 1024;

parameter_types! {
    pub const BlockHashCount: BlockNumber = 2400;
    pub const Version: RuntimeVersion = VERSION;

    /// Two seconds of compute per block: a third of the 6 s block time, leaving room for import and
    /// propagation on modest validator hardware.
    pub RuntimeBlockWeights: BlockWeights = BlockWeights::with_sensible_defaults(
        Weight::from_parts(2u64 * WEIGHT_REF_TIME_PER_SECOND, u64::MAX),
        NORMAL_DISPATCH_RATIO,
    );
    /// 5 MiB blocks, of which normal extrinsics may fill 75%.
    pub RuntimeBlockLength: BlockLength = BlockLength::builder()
        .max_length(MAX_BLOCK_LENGTH)
        .modify_max_length_for_class(DispatchClass::Normal, |max| {
            *max = NORMAL_DISPATCH_RATIO * MAX_BLOCK_LENGTH
        })
        .build();
    /// Generic substrate prefix 42: addresses start with "5".
    pub const SS58Prefix: u8 = 42;
}

#[derive_impl(frame_system::config_preludes::SolochainDefaultConfig)]
impl frame_system::Config for Runtime {
    type Block = Block;
    type BlockWeights = RuntimeBlockWeights;
    type BlockLength = RuntimeBlockLength;
    type AccountId = AccountId;
    type Nonce = Nonce;
    type Hash = Hash;
    type BlockHashCount = BlockHashCount;
    // The node stores its chain in ParityDB; its read/write costs are of the same order as these
    // reference figures, which the benchmarks of later pallets are measured against.
    type DbWeight = RocksDbWeight;
    type Version = Version;
    type AccountData = pallet_balances::AccountData<Balance>;
    type SS58Prefix = SS58Prefix;
    type MaxConsumers = ConstU32<16>;
}

parameter_types! {
    pub const EpochDuration: u64 = EPOCH_DURATION_IN_SLOTS;
    pub const ExpectedBlockTime: u64 = MILLI_SECS_PER_BLOCK;
    pub const MaxAuthorities: u32 = 100;
}

impl pallet_babe::Config for Runtime {
    type EpochDuration = EpochDuration;
    type ExpectedBlockTime = ExpectedBlockTime;
    // Epochs change when the session rotates (pallet-session calls `enact_epoch_change`).
    type EpochChangeTrigger = pallet_babe::ExternalTrigger;
    type DisabledValidators = Session;
    type WeightInfo = ();
    type MaxAuthorities = MaxAuthorities;
    type MaxNominators = ConstU32<0>;
    // Equivocations are proven against the historical session that held the key, reported to
    // pallet-offences, and slashed by trainer-staking.
    type KeyOwnerProof = sp_session::MembershipProof;
    type EquivocationReportSystem =
        pallet_babe::EquivocationReportSystem<Self, Offences, Historical, ReportLongevity>;
}

/// The parent block's VRF output: pallet-babe writes the author's output at the end of each block
/// (`AuthorVrfRandomness`), so at the start of the next one it is the parent's.
pub struct BabeParentVrfOutput;

impl Get<Option<[u8; 32]>> for BabeParentVrfOutput {
    fn get() -> Option<[u8; 32]> {
        pallet_babe::AuthorVrfRandomness::<Runtime>::get()
    }
}

impl pallet_fresh_randomness::Config for Runtime {
    type ParentVrfOutput = BabeParentVrfOutput;
    // A draw for a commitment at block `c` waits for the VRF outputs of blocks `c + 1 ..= c + 16`
    // (about 96 s). To know it when committing, an authority must author all sixteen, which BABE's
    // lottery gives one holding a third of the weight (the authorship cap) about (1/3)^16 ≈ 2·10⁻⁸
    // of the time; a private fork as long must outrun GRANDPA, which finalizes within a few blocks.
    // Sixteen blocks is well inside the longest a draw may wait (the job market's commit window,
    // 300 blocks; a drilling epoch, 600). See docs/threat-model.md.
    type FreshOutputs = ConstU32<16>;
}

impl pallet_grandpa::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    type WeightInfo = ();
    type MaxAuthorities = MaxAuthorities;
    type MaxNominators = ConstU32<0>;
    // GRANDPA set ids map to sessions for as long as offences can be reported.
    type MaxSetIdSessionEntries = ConstU64<{ HISTORY_DEPTH as u64 }>;
    type KeyOwnerProof = sp_session::MembershipProof;
    type EquivocationReportSystem =
        pallet_grandpa::EquivocationReportSystem<Self, Offences, Historical, ReportLongevity>;
}

impl pallet_timestamp::Config for Runtime {
    type Moment = u64;
    type OnTimestampSet = Babe;
    type MinimumPeriod = ConstU64<{ SLOT_DURATION / 2 }>;
    type WeightInfo = ();
}

impl pallet_authorship::Config for Runtime {
    type FindAuthor = pallet_session::FindAccountFromAuthorIndex<Self, Babe>;
    // Mints the block reward to the author; an authored block counts as being online.
    type EventHandler = (TrainerStaking, ImOnline);
}

impl pallet_session::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    type ValidatorId = AccountId;
    type ValidatorIdOf = sp_runtime::traits::ConvertInto;
    type ShouldEndSession = Babe;
    type NextSessionRotation = Babe;
    // Trainer-staking picks the validators (bonded, with keys, by ECP); the historical wrapper keeps
    // each session's set so equivocation reports can prove key ownership.
    type SessionManager = pallet_session::historical::NoteHistoricalRoot<Self, TrainerStaking>;
    // Same key types as `SessionKeys` (BABE, GRANDPA, ergn, imon); BABE's handler is Proof of
    // Hashrate, which weights the authorities by ECP, GRANDPA's weighs votes by bond; the job
    // market's keeps the availability attesters; im-online's expects heartbeats.
    type SessionHandler = (
        crate::proof_of_hashrate::ProofOfHashrate,
        crate::finality_weights::StakeWeightedFinality,
        crate::JobMarket,
        ImOnline,
    );
    type Keys = SessionKeys;
    // An equivocator is disabled at once (its BABE blocks are invalid for the rest of the session),
    // at most a third of the set, so reports cannot stall the chain.
    type DisablingStrategy = pallet_session::disabling::UpToLimitDisablingStrategy;
    type WeightInfo = ();
    type Currency = Balances;
    type KeyDeposit = ();
}

impl pallet_balances::Config for Runtime {
    type MaxLocks = ConstU32<50>;
    type MaxReserves = ();
    type ReserveIdentifier = [u8; 8];
    type Balance = Balance;
    type RuntimeEvent = RuntimeEvent;
    type DustRemoval = ();
    type ExistentialDeposit = ConstU128<EXISTENTIAL_DEPOSIT>;
    type AccountStore = System;
    type WeightInfo = pallet_balances::weights::SubstrateWeight<Runtime>;
    type FreezeIdentifier = RuntimeFreezeReason;
    type MaxFreezes = VariantCountOf<RuntimeFreezeReason>;
    type RuntimeHoldReason = RuntimeHoldReason;
    type RuntimeFreezeReason = RuntimeFreezeReason;
    type DoneSlashHandler = ();
}

parameter_types! {
    pub FeeMultiplier: Multiplier = Multiplier::one();
}

impl pallet_transaction_payment::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    // Fees and tips go to the block's author.
    type OnChargeTransaction = FungibleAdapter<Balances, FeesToAuthor<Runtime>>;
    type OperationalFeeMultiplier = ConstU8<5>;
    type WeightToFee = IdentityFee<Balance>;
    type LengthToFee = IdentityFee<Balance>;
    type FeeMultiplierUpdate = ConstFeeMultiplier<FeeMultiplier>;
    type WeightInfo = pallet_transaction_payment::weights::SubstrateWeight<Runtime>;
}

impl pallet_sudo::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    type RuntimeCall = RuntimeCall;
    type WeightInfo = pallet_sudo::weights::SubstrateWeight<Runtime>;
}

parameter_types! {
    /// D and T halve every week of blocks.
    pub const ComputePowerHalfLife: BlockNumber = 7 * DAYS;
    /// ECP = 0.4·D + 0.6·T.
    pub const DrillingWeight: Permill = Permill::from_percent(40);
    pub const TrainingWeight: Permill = Permill::from_percent(60);
}

impl pallet_compute_power::Config for Runtime {
    type HalfLife = ComputePowerHalfLife;
    type DrillingWeight = DrillingWeight;
    type TrainingWeight = TrainingWeight;
}

/// Sessions (= BABE epochs) for which offences are accepted: six sevenths of the unbonding period
/// (six days; 2 592 sessions of 200 s in production), so an offender's stake is still held when
/// the report lands.
pub const HISTORY_DEPTH: u32 = (UNBONDING_PERIOD as u64 * MILLI_SECS_PER_BLOCK * 6
    / 7
    / (EPOCH_DURATION_IN_SLOTS * SLOT_DURATION)) as u32;

parameter_types! {
    /// An equivocation report stays valid in the transaction pool as long as it can be processed.
    pub const ReportLongevity: u64 = HISTORY_DEPTH as u64 * EPOCH_DURATION_IN_SLOTS;
    /// The smallest active bond that lets a trainer author, bid, verify or drill.
    pub const MinBond: Balance = 1_000 * ERG;
    /// Unbonded stake stays held (and slashable) for a week.
    pub const UnbondingPeriod: BlockNumber = UNBONDING_PERIOD;
    /// An equivocation costs at least 10% of the bond...
    pub const MinEquivocationSlash: Perbill = Perbill::from_percent(10);
    /// ...and a day (432 sessions) out of the authority set.
    pub const SuspensionSessions: u32 = 432;
    /// Minted to each block's author.
    pub const BlockReward: Balance = ERG;
    /// A seat takes at least half a ut of ECP (verified training or drilling) besides `MinBond`:
    /// ECP halves every week, so the test networks' least validator (1 ut at genesis) keeps its
    /// seat for a week without work.
    pub const MinAuthorityEcp: pallet_compute_power::MicroUt = 500_000;
    /// A session held without a block or a heartbeat costs at least 1% of the bond...
    pub const UnresponsiveSlash: Perbill = Perbill::from_percent(1);
    /// ...and an hour (18 sessions) out of the authority set.
    pub const UnresponsiveSuspension: u32 = 18;
}

/// Prunes pallet-session-historical's roots older than trainer-staking's history depth.
pub struct PruneHistoricalRoots;

impl pallet_trainer_staking::PruneSessionHistory for PruneHistoricalRoots {
    fn prune_up_to(up_to: sp_staking::SessionIndex) {
        Historical::prune_up_to(up_to)
    }
}

/// Disables an equivocating validator through pallet-session's disabling strategy.
pub struct SessionDisabler;

impl pallet_trainer_staking::DisableValidator<AccountId> for SessionDisabler {
    fn disable(who: &AccountId, severity: Perbill) {
        Session::report_offence(who.clone(), sp_staking::offence::OffenceSeverity(severity))
    }
}

impl pallet_trainer_staking::Config for Runtime {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type ComputePower = ComputePower;
    type ValidatorRegistration = Session;
    // Slashed stake is burnt (there is no treasury yet); `ResolveTo<TreasuryAccount, Balances>` would
    // send it to a treasury account instead.
    type Slashed = ();
    type MinBond = MinBond;
    type UnbondingPeriod = UnbondingPeriod;
    type MaxUnlockingChunks = ConstU32<32>;
    type MaxBonders = ConstU32<1_000>;
    type MaxAuthorities = MaxAuthorities;
    type MinEquivocationSlash = MinEquivocationSlash;
    type SuspensionSessions = SuspensionSessions;
    type MinAuthorityEcp = MinAuthorityEcp;
    type UnresponsiveSlash = UnresponsiveSlash;
    type UnresponsiveSuspension = UnresponsiveSuspension;
    type HistoryDepth = ConstU32<HISTORY_DEPTH>;
    type SessionHistory = PruneHistoricalRoots;
    type Disabler = SessionDisabler;
    // A trainer can hold at most 64 duties (jobs, verifications, drilling tasks) at once.
    type MaxObligations = ConstU32<64>;
    type BlockReward = BlockReward;
    type WeightInfo = pallet_trainer_staking::weights::SubstrateWeight<Runtime>;
}

impl pallet_session::historical::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    type FullIdentification = ();
    type FullIdentificationOf = pallet_trainer_staking::session::UnitIdentification;
}

parameter_types! {
    /// Heartbeats go ahead of ordinary transactions.
    pub const ImOnlineUnsignedPriority: TransactionPriority = TransactionPriority::MAX / 2;
}

/// pallet-im-online's view of a session's progress: twice BABE's (at most all of it). im-online
/// sends a validator's heartbeat at a random point after 10 % of the progress it is given and
/// surely from 80 %: on BABE's own clock that is the last fifth of the session, a few blocks (on a
/// 50-slot session, about three), and a validator whose few blocks all fell there, or whose
/// heartbeat missed them, was reported unresponsive — slashed and suspended though it ran. From
/// twice the progress the heartbeat goes out by 40 % of the session, with the rest of it for the
/// transaction to be included (im-online sends it again if it is not, three blocks on). It proves
/// what it proved before: the validator was up during the session.
pub struct HeartbeatProgress;

impl frame_support::traits::EstimateNextSessionRotation<BlockNumber> for HeartbeatProgress {
    fn average_session_length() -> BlockNumber {
        <Babe as frame_support::traits::EstimateNextSessionRotation<BlockNumber>>::average_session_length()
    }

    fn estimate_current_session_progress(now: BlockNumber) -> (Option<Permill>, Weight) {
        let (progress, weight) = <Babe as frame_support::traits::EstimateNextSessionRotation<
            BlockNumber,
        >>::estimate_current_session_progress(now);
        (
            progress.map(|p| {
                Permill::from_parts(p.deconstruct().saturating_mul(2)).min(Permill::one())
            }),
            weight,
        )
    }

    fn estimate_next_session_rotation(now: BlockNumber) -> (Option<BlockNumber>, Weight) {
        <Babe as frame_support::traits::EstimateNextSessionRotation<BlockNumber>>::estimate_next_session_rotation(now)
    }
}

impl pallet_im_online::Config for Runtime {
    type AuthorityId = pallet_im_online::sr25519::AuthorityId;
    type MaxKeys = MaxAuthorities;
    type MaxPeerInHeartbeats = ConstU32<10_000>;
    type RuntimeEvent = RuntimeEvent;
    type ValidatorSet = Historical;
    type NextSessionRotation = HeartbeatProgress;
    // A validator with neither a block nor a heartbeat in a session is slashed and suspended by
    // trainer-staking at once (its seat held without validating).
    type ReportUnresponsiveness = pallet_trainer_staking::ReportUnresponsive<Runtime>;
    type UnsignedPriority = ImOnlineUnsignedPriority;
    type WeightInfo = pallet_im_online::weights::SubstrateWeight<Runtime>;
}

impl pallet_offences::Config for Runtime {
    type RuntimeEvent = RuntimeEvent;
    type IdentificationTuple = pallet_session::historical::IdentificationTuple<Self>;
    type OnOffenceHandler = TrainerStaking;
}

// Unsigned transactions created inside the runtime (equivocation reports, offchain-worker
// submissions) are bare extrinsics.
impl<C> frame_system::offchain::CreateTransactionBase<C> for Runtime
where
    RuntimeCall: From<C>,
{
    type Extrinsic = UncheckedExtrinsic;
    type RuntimeCall = RuntimeCall;
}

impl<C> frame_system::offchain::CreateTransaction<C> for Runtime
where
    RuntimeCall: From<C>,
{
    type Extension = crate::TxExtension;

    fn create_transaction(call: RuntimeCall, extension: crate::TxExtension) -> UncheckedExtrinsic {
        UncheckedExtrinsic::new_transaction(call, extension)
    }
}

// Calls a pallet authorizes itself (im-online's heartbeats, signed with the session key): general
// transactions whose origin `AuthorizeCall` sets; the other extensions let a transaction without a
// signer through.
impl<C> frame_system::offchain::CreateAuthorizedTransaction<C> for Runtime
where
    RuntimeCall: From<C>,
{
    fn create_extension() -> crate::TxExtension {
        (
            frame_system::AuthorizeCall::<Runtime>::new(),
            frame_system::CheckNonZeroSender::<Runtime>::new(),
            frame_system::CheckSpecVersion::<Runtime>::new(),
            frame_system::CheckTxVersion::<Runtime>::new(),
            frame_system::CheckGenesis::<Runtime>::new(),
            frame_system::CheckEra::<Runtime>::from(sp_runtime::generic::Era::Immortal),
            frame_system::CheckNonce::<Runtime>::from(0),
            frame_system::CheckWeight::<Runtime>::new(),
            pallet_transaction_payment::ChargeTransactionPayment::<Runtime>::from(0),
        )
    }
}

impl<C> frame_system::offchain::CreateBare<C> for Runtime
where
    RuntimeCall: From<C>,
{
    fn create_bare(call: RuntimeCall) -> UncheckedExtrinsic {
        UncheckedExtrinsic::new_bare(call)
    }
}

parameter_types! {
    /// Least price per ut of training, per device class ([`prices::MIN_PRICE_PER_UT`]).
    pub const MinPricePerUt: ergon_protocol::PerClass<Balance> = prices::MIN_PRICE_PER_UT;
    /// Least fee basis per ut, per device class ([`prices::REPLAY_PRICE_PER_UT`]).
    pub const ReplayPricePerUt: ergon_protocol::PerClass<Balance> = prices::REPLAY_PRICE_PER_UT;
    /// A verifier's fee is its replay's share of the price plus a fifth (download, rules, the
    /// collateral it freezes): the replay measured at most 0.66 of that share (docs/pot-calibration.md).
    pub const VerifierFeeMarkup: Perbill = Perbill::from_percent(20);
    /// A rejected, unavailable or late trainer loses all of its collateral (the price it bid).
    pub const TrainerSlash: Perbill = Perbill::from_percent(100);
    /// A silent verifier, or one a dispute proves wrong, loses 10% of its collateral (10 ERG).
    pub const VerifierSlash: Perbill = Perbill::from_percent(10);
    /// 10% of every trainer payment is burnt: credit bought with a sham job costs at least that.
    pub const PaymentBurn: Permill = Permill::from_percent(10);
    /// One job credits at most 5% of the network's ECP (or `MinCreditCap`)...
    pub const MaxCreditShare: Perbill = Perbill::from_percent(5);
}

parameter_types! {
    /// Availability attestations go ahead of ordinary transactions.
    pub const AvailabilityPriority: TransactionPriority = TransactionPriority::MAX / 2;
}

impl pallet_job_market::Config for Runtime {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type Staking = TrainerStaking;
    type ComputePower = ComputePower;
    // The VRF outputs of blocks after the bundle commitment, accumulated.
    type Randomness = crate::FreshRandomness;
    type MinBudget = ConstU128<ERG>;
    type MinBidWindow = ConstU32<2>;
    type MaxBidWindow = ConstU32<MAX_BID_WINDOW>;
    type MinTrainingTime = ConstU32<MIN_TRAINING_TIME>;
    type MaxJobDuration = ConstU32<MAX_JOB_DURATION>;
    type MaxBids = ConstU32<64>;
    // 512 unfinished jobs at most; a block spends at most 6 verifier draws: with the weights
    // measured on 2026-11-29 (a draw over a pool of 1 000 is 3.4 % of a block), 8 would let
    // `on_initialize` take 27.6 % of a block, past the quarter that leaves normal transactions
    // their 75 % (`runtime::tests::weights_fit_in_a_block`).
    type MaxActiveJobs = ConstU32<512>;
    type MaxTimeoutsPerBlock = ConstU32<6>;
    // Finished jobs are kept a day for clients; at most 2 048 stored, 6 timeouts handled per block:
    // a queue entry is always found within 342 blocks.
    type MaxStoredJobs = ConstU32<2_048>;
    type MaxOpenJobsPerOwner = ConstU32<16>;
    type PostingFee = ConstU128<ERG>;
    // 1 ERG for each day a job can hold its slot: the longest job (30 days) rents it for 30 ERG,
    // and jamming all 512 slots for 30 days burns 15 360 ERG (a day of the fast build is a day of
    // its shorter blocks).
    type SlotRent = ConstU128<{ ERG / crate::units::DAYS as u128 }>;
    type BidDeposit = ConstU128<{ 10 * ERG }>;
    // Per ut of training work (432·10⁹ FLOPs), per device class: an hour's rent over an hour's
    // work (`prices`: 0.05 ERG on a CPU, 0.0086 ERG on a GPU; the GPT-2-small GPU-hour
    // example, 3.67·10⁶ ut, 31 578 ERG).
    type MinPricePerUt = MinPricePerUt;
    // What a floor bid's verification costs the verifiers' class: twice the CPU's least price,
    // five times the GPU's (`prices`).
    type ReplayPricePerUt = ReplayPricePerUt;
    type PaymentBurn = PaymentBurn;
    type MaxCreditShare = MaxCreditShare;
    // ...or 10⁵ ut (about half an H200-hour at f32), so that a young network can grow by GPU jobs.
    type MinCreditCap = ConstU128<{ 100_000 * 1_000_000 }>;
    // Verifiers declare their replay capacity (issue 37): from 10 ut an hour (a slow CPU; a
    // 2-core one does ~1 000) to 3·10⁷ (an 8-GPU machine at ~3.3·10⁶ ut an hour per H100 in
    // bf16), and are drawn only for rounds they replay within `MaxReplayWindow` (2 hours): a vote
    // of a job may be up to 6·10⁷ ut, so jobs of GPU-hours are taken and served by GPU verifiers.
    type MillisecsPerBlock = ConstU64<{ crate::durations::MILLI_SECS_PER_BLOCK }>;
    type MinVerifierCapacity = ConstU128<{ 10 * 1_000_000 }>;
    type MaxVerifierCapacity = ConstU128<{ 30_000_000 * 1_000_000 }>;
    type MaxReplayWindow = ConstU32<MAX_REPLAY_WINDOW>;
    type VerifierCollateral = ConstU128<{ 100 * ERG }>;
    // 10 000 verifiers (issue 37): a draw reads about log2 of them per point (`pool`), never all.
    // (Each is a bonded trainer: `MaxBonders` caps those at 1 000 while session planning reads
    // every ledger.)
    type MaxVerifierPool = ConstU32<10_000>;
    // The pool's changes reach the draw's trees at the end of each pool epoch, 64 a block (a
    // whole pool's in 157 blocks, within a round's commit window).
    type PoolEpoch = ConstU32<POOL_EPOCH>;
    type MaxPoolSyncs = ConstU32<64>;
    // The worker kernels this runtime pins new jobs to: a release whose kernels change bumps it,
    // and reaches the chain with that release's runtime.
    type KernelsRevision = ConstU32<{ ergon_protocol::kernels::KERNELS_REVISION }>;
    // Three verifiers with four segments each, every segment shared by two of them (a ring): 6
    // distinct segments per job, every pass's sketches compared with a second replay.
    type Verifiers = ConstU32<3>;
    // A fail (or two disagreeing sketches) is re-checked by five others, all replaying the
    // disputed segments.
    type DisputeVerifiers = ConstU32<5>;
    type SegmentsPerRound = ConstU32<4>;
    // Each verifier replays 4 segments: with at least 30 in a spec, at most 13 % of training.
    type MinSegments = ConstU32<30>;
    // A regular round and one dispute (or a redraw): the owner's budget reserves the fees of all
    // 3 + 5 possible votes, 1.28 of the price for a 30-segment job, refunded unless spent.
    type MaxRounds = ConstU32<2>;
    // Replaying a few checkpoint segments of a CPU-sized job takes minutes.
    type CommitWindow = ConstU32<JOB_COMMIT_WINDOW>;
    type RevealWindow = ConstU32<JOB_REVEAL_WINDOW>;
    type Retention = ConstU32<JOB_RETENTION>;
    type VerifierFeeMarkup = VerifierFeeMarkup;
    type TrainerSlash = TrainerSlash;
    type VerifierSlash = VerifierSlash;
    // Validators' offchain workers attest bundle availability with their `ergn` session key.
    type AttesterId = pallet_job_market::availability::crypto::Public;
    type MaxAttesters = MaxAuthorities;
    type UnsignedPriority = AvailabilityPriority;
    type WeightInfo = pallet_job_market::weights::SubstrateWeight<Runtime>;
    #[cfg(feature = "runtime-benchmarks")]
    type BenchmarkHelper = TrainerStaking;
}

parameter_types! {
    /// A silent drilling executor, or one a confirmed result proves wrong, loses its task's whole
    /// collateral.
    pub const DrillingSlash: Perbill = Perbill::from_percent(100);
    /// A task fills half of the commit window at its executors' declared capacity: slack for
    /// latency, and room for a synthetic task and one drawn task at once.
    pub const DrillingCapacityUse: Perbill = Perbill::from_percent(50);
}

impl pallet_drilling::Config for Runtime {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type Staking = TrainerStaking;
    type ComputePower = ComputePower;
    // The VRF outputs of blocks after the publication (or the snapshot), accumulated.
    type Randomness = crate::FreshRandomness;
    type Time = Timestamp;
    type PublisherOrigin = frame_system::EnsureRoot<AccountId>;
    type PublisherDeposit = ConstU128<{ 100 * ERG }>;
    type MaxPublishedTasks = ConstU32<16>;
    type MinReplication = ConstU32<2>;
    type MaxReplication = ConstU32<9>;
    // Three executors: a dissenter is judged by the re-issue.
    type SyntheticReplication = ConstU32<3>;
    // A 2048² product is 2·2048³ = 1.7·10¹⁰ operations = 0.04 ut; a synthetic chain has as many as
    // half of the 5-minute commit window holds at the group's declared capacity (a 2-core CPU at
    // ~1 000 ut/hour: 41.7 ut, ~1 000 products, ~2.5 minutes).
    type SyntheticDim = ConstU32<2048>;
    type MillisecsPerBlock = ConstU64<{ crate::units::MILLI_SECS_PER_BLOCK }>;
    // 10 ut/hour (0.4 ut a task) to 100 000 ut/hour (4 167 ut a task; chains stop at 100 000
    // products, 3 977 ut).
    type MinCapacity = ConstU128<10_000_000>;
    type MaxCapacity = ConstU128<100_000_000_000>;
    type CapacityUse = DrillingCapacityUse;
    // Collateral per task: 10 ERG + 1 ERG per ut (51.7 ERG for the CPU's 41.7 ut task).
    type CollateralPerUt = ConstU128<ERG>;
    type MinCollateral = ConstU128<{ 10 * ERG }>;
    // Four groups' worth: a band of a few sybil accounts is merged into the honest one below.
    type MinBandSize = ConstU32<12>;
    // Four weeks of hourly epochs.
    type RecordRetention = ConstU32<672>;
    type EpochLength = ConstU32<DRILLING_EPOCH>;
    type CommitWindow = ConstU32<DRILLING_COMMIT_WINDOW>;
    type RevealWindow = ConstU32<DRILLING_REVEAL_WINDOW>;
    type Retention = ConstU32<DRILLING_RETENTION>;
    // 1 000 trainers make 333 synthetic tasks an epoch, issued 16 a block (21 blocks).
    type MaxOpenTasks = ConstU32<2_048>;
    type MaxIssuePerBlock = ConstU32<16>;
    type MaxTimeoutsPerBlock = ConstU32<32>;
    type MaxReissues = ConstU32<2>;
    type MaxTrainers = ConstU32<1_000>;
    type DrillingSlash = DrillingSlash;
    type WeightInfo = pallet_drilling::weights::SubstrateWeight<Runtime>;
    #[cfg(feature = "runtime-benchmarks")]
    type BenchmarkHelper = TrainerStaking;
}
