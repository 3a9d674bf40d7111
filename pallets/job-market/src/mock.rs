//! A runtime for the job-market tests: balances, compute power and trainer staking as in Ergon, with
//! short windows.
//!
//! Accounts 1–12 hold 1 000 000 each. Trainers bond with `MinBond` 1 000. Jobs: budget ≥ 100, bid
//! window 2–20 blocks, at least 5 blocks to train, 3 verifiers per round with 2 segments of their own
//! (of at least 20 in a spec), 4 per dispute, 2 rounds, commit and reveal windows of 5 blocks, records
//! kept 10 blocks. A vote earns its replay's share of the price plus 20%; a rejected or late trainer
//! loses all of its collateral (the price), a silent or refuted verifier 10% of its collateral of
//! 1 000. Fees, deposits, the minimum price, the payment burn and the rounds are statics a test may
//! set.

use crate as pallet_job_market;
use frame_support::{
    derive_impl, parameter_types,
    traits::{ConstU128, ConstU32, ConstU64, Hooks},
};
use sp_runtime::{testing::UintAuthorityId, BuildStorage, Perbill, Permill};

type Block = frame_system::mocking::MockBlock<Test>;

frame_support::construct_runtime!(
    pub enum Test {
        System: frame_system,
        Balances: pallet_balances,
        ComputePower: pallet_compute_power,
        TrainerStaking: pallet_trainer_staking,
        JobMarket: pallet_job_market,
    }
);

#[derive_impl(frame_system::config_preludes::TestDefaultConfig)]
impl frame_system::Config for Test {
    type Block = Block;
    type AccountData = pallet_balances::AccountData<u128>;
}

#[derive_impl(pallet_balances::config_preludes::TestDefaultConfig)]
impl pallet_balances::Config for Test {
    type Balance = u128;
    type ExistentialDeposit = ConstU128<1>;
    type AccountStore = System;
    type RuntimeHoldReason = RuntimeHoldReason;
}

parameter_types! {
    pub const HalfLife: u64 = 100_000;
    pub const DrillingWeight: Permill = Permill::from_percent(40);
    pub const TrainingWeight: Permill = Permill::from_percent(60);
}

impl pallet_compute_power::Config for Test {
    type HalfLife = HalfLife;
    type DrillingWeight = DrillingWeight;
    type TrainingWeight = TrainingWeight;
}

/// Every account counts as having session keys.
pub struct AllRegistered;
impl frame_support::traits::ValidatorRegistration<u64> for AllRegistered {
    fn is_registered(_: &u64) -> bool {
        true
    }
}

impl pallet_trainer_staking::Config for Test {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type ComputePower = ComputePower;
    type ValidatorRegistration = AllRegistered;
    type Slashed = ();
    type MinBond = ConstU128<1_000>;
    type UnbondingPeriod = ConstU64<50>;
    type MaxUnlockingChunks = ConstU32<4>;
    type MaxBonders = ConstU32<1_000>;
    type MaxAuthorities = ConstU32<10>;
    type MinEquivocationSlash = MinEquivocationSlash;
    type SuspensionSessions = ConstU32<1>;
    type MinAuthorityEcp = frame_support::traits::ConstU128<0>;
    type UnresponsiveSlash = UnresponsiveSlash;
    type UnresponsiveSuspension = ConstU32<1>;
    type HistoryDepth = ConstU32<10>;
    type SessionHistory = ();
    type Disabler = ();
    type MaxObligations = ConstU32<16>;
    type BlockReward = ConstU128<0>;
    type WeightInfo = ();
}

parameter_types! {
    pub const MinEquivocationSlash: Perbill = Perbill::from_percent(10);
    /// When false, the randomness source has nothing (as before BABE's first VRF output).
    pub static RandomnessAvailable: bool = true;
}

/// The block number, for the mock's randomness.
pub struct Now;
impl frame_support::traits::Get<u64> for Now {
    fn get() -> u64 {
        System::block_number()
    }
}

/// Epochs of one block: fresh randomness two blocks after a commitment.
pub type TestRandomness = ergon_protocol::traits::OneBlockEpochs<Now, RandomnessAvailable>;

parameter_types! {
    /// A fee is a fifth above the replay's share of the price.
    pub const VerifierFeeMarkup: Perbill = Perbill::from_percent(20);
    /// All of the trainer's collateral (its price).
    pub const TrainerSlash: Perbill = Perbill::from_percent(100);
    /// 10% of a verifier's collateral (1 000): 100.
    pub const VerifierSlash: Perbill = Perbill::from_percent(10);
    pub const MaxCreditShare: Perbill = Perbill::from_percent(1);
    /// Burnt at every post (0 unless a test sets it).
    pub static PostingFee: u128 = 0;
    /// Burnt per block until the deadline at every post (0 unless a test sets it).
    pub static SlotRent: u128 = 0;
    /// Held with a first bid (0 unless a test sets it).
    pub static BidDeposit: u128 = 0;
    /// Least price per ut of work on a CPU (0 unless a test sets it), and on a GPU (the CPU's
    /// unless a test sets it).
    pub static MinPricePerUt: u128 = 0;
    pub static GpuMinPricePerUt: Option<u128> = None;
    /// Least fee basis per ut of work on a CPU and on a GPU, alike.
    pub static ReplayPricePerUt: u128 = 0;
    pub static GpuReplayPricePerUt: Option<u128> = None;
    /// Share of the trainer's pay burnt (0 unless a test sets it).
    pub static PaymentBurn: Permill = Permill::zero();
    /// Least per-job credit cap, micro-ut (the example job's work fits unless a test lowers it).
    pub static MinCreditCap: u128 = u128::MAX;
    /// Least and most replay capacity a verifier declares, micro-ut per hour (a test narrows them).
    pub static MinVerifierCapacity: u128 = 1;
    pub static MaxVerifierCapacity: u128 = u64::MAX as u128;
    /// A pool epoch: one block unless a test sets it.
    pub static PoolEpoch: u64 = 1;
    /// A dispute's seats: 4 (a test may take the runtime's 5).
    pub static DisputeVerifiers: u32 = 4;
    /// Verification rounds: a regular one and a dispute (a test may allow a second dispute).
    pub static MaxRounds: u32 = 2;
    /// The kernels revision of new jobs and joining verifiers (a test raises it as an upgrade would).
    pub static KernelsRevision: u32 = 1;
}

/// `MinPricePerUt` per class: the CPU's static, and the GPU's (the CPU's unless set).
pub struct MinPrices;
impl frame_support::traits::Get<ergon_protocol::PerClass<u128>> for MinPrices {
    fn get() -> ergon_protocol::PerClass<u128> {
        let cpu = MinPricePerUt::get();
        ergon_protocol::PerClass { cpu, gpu: GpuMinPricePerUt::get().unwrap_or(cpu) }
    }
}

/// `ReplayPricePerUt` per class: the CPU's static, and the GPU's (the CPU's unless set).
pub struct ReplayPrices;
impl frame_support::traits::Get<ergon_protocol::PerClass<u128>> for ReplayPrices {
    fn get() -> ergon_protocol::PerClass<u128> {
        let cpu = ReplayPricePerUt::get();
        ergon_protocol::PerClass { cpu, gpu: GpuReplayPricePerUt::get().unwrap_or(cpu) }
    }
}

impl pallet_job_market::Config for Test {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type Staking = TrainerStaking;
    type ComputePower = ComputePower;
    type Randomness = TestRandomness;
    type MinBudget = ConstU128<100>;
    type MinBidWindow = ConstU64<2>;
    type MaxBidWindow = ConstU64<20>;
    type MinTrainingTime = ConstU64<5>;
    type MaxJobDuration = ConstU64<200>;
    type MaxBids = ConstU32<4>;
    type MaxActiveJobs = ConstU32<8>;
    type MaxStoredJobs = ConstU32<12>;
    type MaxOpenJobsPerOwner = ConstU32<6>;
    type PostingFee = PostingFee;
    type SlotRent = SlotRent;
    type BidDeposit = BidDeposit;
    type MinPricePerUt = MinPrices;
    type ReplayPricePerUt = ReplayPrices;
    type PaymentBurn = PaymentBurn;
    type MaxCreditShare = MaxCreditShare;
    type MinCreditCap = MinCreditCap;
    type MillisecsPerBlock = ConstU64<6_000>;
    type MinVerifierCapacity = MinVerifierCapacity;
    type MaxVerifierCapacity = MaxVerifierCapacity;
    type MaxReplayWindow = ConstU64<20>;
    type VerifierCollateral = ConstU128<1_000>;
    type MaxVerifierPool = ConstU32<16>;
    type PoolEpoch = PoolEpoch;
    type MaxPoolSyncs = ConstU32<64>;
    type KernelsRevision = KernelsRevision;
    type MaxTimeoutsPerBlock = ConstU32<2>;
    type Verifiers = ConstU32<3>;
    type DisputeVerifiers = DisputeVerifiers;
    type SegmentsPerRound = ConstU32<2>;
    type MinSegments = ConstU32<20>;
    type MaxRounds = MaxRounds;
    type CommitWindow = ConstU64<5>;
    type RevealWindow = ConstU64<5>;
    type Retention = ConstU64<10>;
    type VerifierFeeMarkup = VerifierFeeMarkup;
    type TrainerSlash = TrainerSlash;
    type VerifierSlash = VerifierSlash;
    type AttesterId = UintAuthorityId;
    type MaxAttesters = ConstU32<16>;
    type UnsignedPriority = ConstU64<{ 1 << 20 }>;
    type WeightInfo = ();
    #[cfg(feature = "runtime-benchmarks")]
    type BenchmarkHelper = TrainerStaking;
}

/// Extrinsics of the mock: what the availability offchain worker submits.
pub type Extrinsic = <Block as sp_runtime::traits::Block>::Extrinsic;

impl<LocalCall> frame_system::offchain::CreateTransactionBase<LocalCall> for Test
where
    RuntimeCall: From<LocalCall>,
{
    type RuntimeCall = RuntimeCall;
    type Extrinsic = Extrinsic;
}

impl<LocalCall> frame_system::offchain::CreateBare<LocalCall> for Test
where
    RuntimeCall: From<LocalCall>,
{
    fn create_bare(call: RuntimeCall) -> Extrinsic {
        Extrinsic::new_bare(call)
    }
}

/// The Fashion-MNIST MLP example the worker trains (60 000 samples, 1 epoch, 33 checkpoints).
pub fn example_spec() -> ergon_job_spec::JobSpec {
    serde_json::from_str(include_str!("../../../worker/examples/fashion-mnist-mlp.json"))
        .expect("the example spec parses")
}

/// What the tests' verifiers declare: the CPU at the most capacity (every round replays within a
/// block), unless a test declares otherwise.
pub fn offer() -> Option<pallet_job_market::VerifierOffer> {
    Some(pallet_job_market::VerifierOffer {
        class: ergon_protocol::DeviceClass::Cpu,
        capacity: MaxVerifierCapacity::get(),
    })
}

/// Funds of each account at genesis.
pub const ENDOWMENT: u128 = 1_000_000;

/// Accounts 1–12 endowed, block 1.
pub fn new_test_ext() -> sp_io::TestExternalities {
    let mut storage = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
    pallet_balances::GenesisConfig::<Test> {
        balances: (1..=12).map(|who| (who, ENDOWMENT)).collect(),
        ..Default::default()
    }
    .assimilate_storage(&mut storage)
    .unwrap();
    let mut ext = sp_io::TestExternalities::new(storage);
    ext.execute_with(|| {
        System::set_block_number(1);
        RandomnessAvailable::set(true);
        PostingFee::set(0);
        SlotRent::set(0);
        BidDeposit::set(0);
        MinPricePerUt::set(0);
        GpuMinPricePerUt::set(None);
        ReplayPricePerUt::set(0);
        GpuReplayPricePerUt::set(None);
        PaymentBurn::set(Permill::zero());
        MinCreditCap::set(u128::MAX);
        MinVerifierCapacity::set(1);
        MaxVerifierCapacity::set(u64::MAX as u128);
        MaxRounds::set(2);
        DisputeVerifiers::set(4);
    });
    ext
}

/// Runs `on_initialize` of every block up to `n`.
/// Applies the pool's staged changes now, as the end of a pool epoch would (the tests' pools are
/// set up as a genesis would: in the draw's trees before anything is committed).
pub fn pool_boundary() {
    pallet_job_market::pool::apply_now::<Test>();
}

pub fn run_to_block(n: u64) {
    while System::block_number() < n {
        let next = System::block_number() + 1;
        System::set_block_number(next);
        JobMarket::on_initialize(next);
    }
}

frame_support::parameter_types! {
    pub const UnresponsiveSlash: sp_runtime::Perbill = sp_runtime::Perbill::from_percent(1);
}
