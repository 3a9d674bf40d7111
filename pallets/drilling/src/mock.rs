//! A runtime for the drilling tests: balances, compute power and trainer staking as in Ergon, with
//! short windows.
//!
//! Accounts 1–30 hold 1 000 000 each; trainers bond `MinBond` 1 000. Drilling: epochs of 20 blocks,
//! synthetic tasks for 3 executors (64 × 64 matrices, about 1 micro-ut a product, as many as half of
//! the 18 s commit window holds at the declared capacity), at most 2 issued a block; commit and
//! reveal windows of 3 blocks, records kept 5 blocks; replication 2–7, 2 re-issues; capacities
//! 400–10⁹ micro-ut/hour in bands of at least 6; collateral 100 + 1 per micro-ut, all of it
//! slashed; publishers deposit 500 and may have 3 tasks.

use crate as pallet_drilling;
use frame_support::{
    derive_impl, parameter_types,
    traits::{ConstU128, ConstU32, ConstU64, Hooks, UnixTime},
};
use frame_system::EnsureRoot;
use sp_runtime::{BuildStorage, Perbill, Permill};

type Block = frame_system::mocking::MockBlock<Test>;

frame_support::construct_runtime!(
    pub enum Test {
        System: frame_system,
        Balances: pallet_balances,
        ComputePower: pallet_compute_power,
        TrainerStaking: pallet_trainer_staking,
        Drilling: pallet_drilling,
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
    pub const DrillingWeight: Permill = Permill::from_percent(40);
    pub const TrainingWeight: Permill = Permill::from_percent(60);
    pub const MinEquivocationSlash: Perbill = Perbill::from_percent(10);
    pub const DrillingSlash: Perbill = Perbill::from_percent(100);
    pub const CapacityUse: Perbill = Perbill::from_percent(50);
    /// When false, the randomness source has nothing (as before BABE's first VRF output).
    pub static RandomnessAvailable: bool = true;
}

impl pallet_compute_power::Config for Test {
    type HalfLife = ConstU64<0>;
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
    type MaxObligations = ConstU32<64>;
    type BlockReward = ConstU128<0>;
    type WeightInfo = ();
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

/// Block `n` starts at `6 000 · n` ms.
pub struct BlockTime;
impl UnixTime for BlockTime {
    fn now() -> core::time::Duration {
        core::time::Duration::from_millis(System::block_number() * 6_000)
    }
}

impl pallet_drilling::Config for Test {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type Staking = TrainerStaking;
    type ComputePower = ComputePower;
    type Randomness = TestRandomness;
    type Time = BlockTime;
    type PublisherOrigin = EnsureRoot<u64>;
    type PublisherDeposit = ConstU128<500>;
    type MaxPublishedTasks = ConstU32<3>;
    type MinReplication = ConstU32<2>;
    type MaxReplication = ConstU32<7>;
    type SyntheticReplication = ConstU32<3>;
    type SyntheticDim = ConstU32<64>;
    type MillisecsPerBlock = ConstU64<6_000>;
    type MinCapacity = ConstU128<400>;
    type MaxCapacity = ConstU128<1_000_000_000>;
    type CapacityUse = CapacityUse;
    type CollateralPerUt = ConstU128<1_000_000>;
    type MinCollateral = ConstU128<100>;
    type MinBandSize = ConstU32<6>;
    type RecordRetention = ConstU32<2>;
    type EpochLength = ConstU64<20>;
    type CommitWindow = ConstU64<3>;
    type RevealWindow = ConstU64<3>;
    type Retention = ConstU64<5>;
    type MaxOpenTasks = ConstU32<16>;
    type MaxIssuePerBlock = ConstU32<2>;
    type MaxTimeoutsPerBlock = ConstU32<4>;
    type MaxReissues = ConstU32<2>;
    type MaxTrainers = ConstU32<100>;
    type DrillingSlash = DrillingSlash;
    type WeightInfo = ();
    #[cfg(feature = "runtime-benchmarks")]
    type BenchmarkHelper = TrainerStaking;
}

/// Funds of each account at genesis.
pub const ENDOWMENT: u128 = 1_000_000;

/// Accounts 1–30 endowed, block 1.
pub fn new_test_ext() -> sp_io::TestExternalities {
    let mut storage = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
    pallet_balances::GenesisConfig::<Test> {
        balances: (1..=30).map(|who| (who, ENDOWMENT)).collect(),
        ..Default::default()
    }
    .assimilate_storage(&mut storage)
    .unwrap();
    let mut ext = sp_io::TestExternalities::new(storage);
    ext.execute_with(|| {
        System::set_block_number(1);
        RandomnessAvailable::set(true);
    });
    ext
}

/// Runs `on_initialize` of every block up to `n`, checking the invariants after each.
pub fn run_to_block(n: u64) {
    while System::block_number() < n {
        let next = System::block_number() + 1;
        System::set_block_number(next);
        Drilling::on_initialize(next);
        Drilling::do_try_state().expect("drilling invariants hold");
    }
}

frame_support::parameter_types! {
    pub const UnresponsiveSlash: sp_runtime::Perbill = sp_runtime::Perbill::from_percent(1);
}
