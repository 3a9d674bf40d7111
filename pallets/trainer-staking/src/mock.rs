//! A minimal runtime for the pallet's tests.
//!
//! Accounts 1–6 hold 10 000 each; `MinBond` is 100, unbonding takes 10 blocks, at most 3 unlocking
//! chunks, 5 bonders and 3 authorities, each with at least 100 micro-ut of ECP. Slashes go to the treasury account 99. Session-key
//! registration and the block author are set per test through [`Registered`] and [`Author`].

use crate as pallet_trainer_staking;
use frame_support::{
    derive_impl, parameter_types,
    traits::{
        tokens::imbalance::ResolveTo, ConstU128, ConstU32, FindAuthor, ValidatorRegistration,
    },
    ConsensusEngineId,
};
use sp_runtime::{BuildStorage, Perbill};

type Block = frame_system::mocking::MockBlock<Test>;

frame_support::construct_runtime!(
    pub enum Test {
        System: frame_system,
        Balances: pallet_balances,
        Authorship: pallet_authorship,
        ComputePower: pallet_compute_power,
        TrainerStaking: pallet_trainer_staking,
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
    /// Accounts with session keys.
    pub static Registered: Vec<u64> = vec![];
    /// The current block's author.
    pub static Author: Option<u64> = None;
    /// Validators disabled through `Disabler`, in order.
    pub static Disabled: Vec<u64> = vec![];
}

pub struct RecordDisabled;
impl pallet_trainer_staking::DisableValidator<u64> for RecordDisabled {
    fn disable(who: &u64, _severity: Perbill) {
        Disabled::mutate(|d| d.push(*who));
    }
}

pub struct RegisteredKeys;
impl ValidatorRegistration<u64> for RegisteredKeys {
    fn is_registered(id: &u64) -> bool {
        Registered::get().contains(id)
    }
}

pub struct StaticAuthor;
impl FindAuthor<u64> for StaticAuthor {
    fn find_author<'a, I>(_digests: I) -> Option<u64>
    where
        I: 'a + IntoIterator<Item = (ConsensusEngineId, &'a [u8])>,
    {
        Author::get()
    }
}

impl pallet_authorship::Config for Test {
    type FindAuthor = StaticAuthor;
    type EventHandler = TrainerStaking;
}

parameter_types! {
    pub const HalfLife: u64 = 1_000;
    pub const DrillingWeight: sp_runtime::Permill = sp_runtime::Permill::from_percent(40);
    pub const TrainingWeight: sp_runtime::Permill = sp_runtime::Permill::from_percent(60);
}

impl pallet_compute_power::Config for Test {
    type HalfLife = HalfLife;
    type DrillingWeight = DrillingWeight;
    type TrainingWeight = TrainingWeight;
}

/// Receives slashes.
pub const TREASURY: u64 = 99;

parameter_types! {
    pub const Treasury: u64 = TREASURY;
    pub const MinEquivocationSlash: Perbill = Perbill::from_percent(10);
    pub const UnresponsiveSlash: Perbill = Perbill::from_percent(1);
}

/// Least ECP for an authority seat (micro-ut).
pub const MIN_AUTHORITY_ECP: u128 = 100;

impl pallet_trainer_staking::Config for Test {
    type Currency = Balances;
    type RuntimeHoldReason = RuntimeHoldReason;
    type ComputePower = ComputePower;
    type ValidatorRegistration = RegisteredKeys;
    type Slashed = ResolveTo<Treasury, Balances>;
    type MinBond = ConstU128<100>;
    type UnbondingPeriod = frame_support::traits::ConstU64<10>;
    type MaxUnlockingChunks = ConstU32<3>;
    type MaxBonders = ConstU32<5>;
    type MaxAuthorities = ConstU32<3>;
    type MinEquivocationSlash = MinEquivocationSlash;
    type SuspensionSessions = ConstU32<2>;
    type MinAuthorityEcp = ConstU128<MIN_AUTHORITY_ECP>;
    type UnresponsiveSlash = UnresponsiveSlash;
    type UnresponsiveSuspension = ConstU32<3>;
    type HistoryDepth = ConstU32<4>;
    type SessionHistory = ();
    type Disabler = RecordDisabled;
    type MaxObligations = ConstU32<3>;
    type BlockReward = ConstU128<7>;
    type WeightInfo = ();
}

/// Accounts 1–6 and the treasury funded, nothing bonded, block 1.
pub fn new_test_ext() -> sp_io::TestExternalities {
    let mut storage = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
    pallet_balances::GenesisConfig::<Test> {
        balances: (1..=6).map(|who| (who, 10_000)).chain([(TREASURY, 1)]).collect(),
        ..Default::default()
    }
    .assimilate_storage(&mut storage)
    .unwrap();
    let mut ext = sp_io::TestExternalities::new(storage);
    ext.execute_with(|| {
        System::set_block_number(1);
        Registered::set(vec![]);
        Author::set(None);
        Disabled::set(vec![]);
    });
    ext
}
