//! A minimal runtime for the pallet's tests: half-life of 100 blocks, ECP = 0.4·D + 0.6·T.

use crate as pallet_compute_power;
use frame_support::{derive_impl, parameter_types};
use sp_runtime::{BuildStorage, Permill};

type Block = frame_system::mocking::MockBlock<Test>;

frame_support::construct_runtime!(
    pub enum Test {
        System: frame_system,
        ComputePower: pallet_compute_power,
    }
);

#[derive_impl(frame_system::config_preludes::TestDefaultConfig)]
impl frame_system::Config for Test {
    type Block = Block;
}

parameter_types! {
    pub const HalfLife: u64 = 100;
    pub const DrillingWeight: Permill = Permill::from_percent(40);
    pub const TrainingWeight: Permill = Permill::from_percent(60);
}

impl pallet_compute_power::Config for Test {
    type HalfLife = HalfLife;
    type DrillingWeight = DrillingWeight;
    type TrainingWeight = TrainingWeight;
}

/// Externalities with `trainers` credited at genesis, at block 1.
pub fn new_test_ext(trainers: Vec<(u64, u128, u128)>) -> sp_io::TestExternalities {
    let mut storage = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
    pallet_compute_power::GenesisConfig::<Test> { trainers }
        .assimilate_storage(&mut storage)
        .unwrap();
    let mut ext = sp_io::TestExternalities::new(storage);
    ext.execute_with(|| System::set_block_number(1));
    ext
}
